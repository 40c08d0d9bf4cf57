"""Run-time users (users/users.h): `openlake admin user add|remove|list|rotate`
and the /_openlake/admin/users routes behind it, on one drive and on
erasure-coded drives.  A user added works at once with boto3 (SigV4,
presigned URLs, SigV2); a removed one gets InvalidAccessKeyId on its next
request; a rotated one's old secret is refused; list shows no secret; only
an admin may call the routes; users survive a restart and no drive holds a
secret in the clear."""
import json
import subprocess
import urllib.parse

import pytest
from botocore.exceptions import ClientError

import helpers

USERS = "/_openlake/admin/users"


def cli(srv, *args, check=True, stdin=None, access=None, secret=None):
    cmd = [str(helpers.openlake_binary()), "admin", "user", *args, "--endpoint", srv.endpoint]
    if access:
        cmd += ["--access-key", access, "--secret-key", secret]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, input=stdin)
    if check:
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)
    return out


def http(srv, method, path, query="", body=b"", access=helpers.ACCESS_KEY,
         secret=helpers.SECRET_KEY):
    target = path + ("?" + query if query else "")
    return helpers.signed_request(srv, method, target, body=body, access=access, secret=secret)


def code_of(fn):
    with pytest.raises(ClientError) as e:
        fn()
    return helpers.error_code(e.value)


def drive_bytes(srv):
    """Every byte of every file of the server's drives."""
    root = srv.workdir
    out = b""
    for p in root.rglob("*"):
        if p.is_file() and p.name != "server.log":
            out += p.read_bytes()
    return out


def test_cli_add_use_remove(mode_server):
    srv = mode_server
    got = cli(srv, "add", "alice")
    assert got["access_key"] == "alice" and len(got["secret_key"]) == 40
    alice = helpers.make_client(srv.endpoint, "alice", got["secret_key"])
    b = helpers.unique_bucket()
    alice.create_bucket(Bucket=b)  # at once, no restart
    alice.put_object(Bucket=b, Key="k", Body=b"hello")
    assert alice.get_object(Bucket=b, Key="k")["Body"].read() == b"hello"
    url = alice.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "k"},
                                       ExpiresIn=300)
    assert helpers.url_request(url).status == 200
    # SigV2 with the same key.
    date = helpers.http_date()
    sts = helpers.sigv2_string_to_sign("GET", f"/{b}/k", {}, date)
    sig = helpers.sigv2_sign(sts, got["secret_key"])
    r = helpers.http_request(srv, "GET", f"/{b}/k",
                             {"Date": date, "Authorization": f"AWS alice:{sig}"})
    assert r.status == 200 and r.body == b"hello"

    assert cli(srv, "remove", "alice") == {"access_key": "alice", "removed": True}
    assert code_of(lambda: alice.get_object(Bucket=b, Key="k")) == "InvalidAccessKeyId"
    assert helpers.url_request(url).status == 403
    r = helpers.http_request(srv, "GET", f"/{b}/k",
                             {"Date": date, "Authorization": f"AWS alice:{sig}"})
    assert r.status == 403 and b"InvalidAccessKeyId" in r.body
    out = cli(srv, "remove", "alice", check=False)
    assert out.returncode == 1 and "NoSuchUser" in out.stderr


def test_http_add_rotate_list(mode_server):
    srv = mode_server
    r = http(srv, "POST", USERS, "access_key=bob", body=b"bob-first-secret\n")
    assert r.status == 200, r.body
    assert json.loads(r.body) == {"access_key": "bob", "secret_key": "bob-first-secret"}
    assert r.header("cache-control") == "no-store"
    bob = helpers.make_client(srv.endpoint, "bob", "bob-first-secret")
    bob.list_buckets()

    # Rotate over HTTP (generated), then through the CLI with a given secret.
    r = http(srv, "POST", USERS + "/rotate", "access_key=bob")
    assert r.status == 200, r.body
    second = json.loads(r.body)["secret_key"]
    assert second != "bob-first-secret" and len(second) == 40
    assert code_of(bob.list_buckets) == "SignatureDoesNotMatch"
    helpers.make_client(srv.endpoint, "bob", second).list_buckets()
    third = cli(srv, "rotate", "bob", "--secret", "-", stdin="bob-third-secret\n")
    assert third["secret_key"] == "bob-third-secret"
    assert code_of(helpers.make_client(srv.endpoint, "bob", second).list_buckets) \
        == "SignatureDoesNotMatch"
    helpers.make_client(srv.endpoint, "bob", "bob-third-secret").list_buckets()

    listed = cli(srv, "list")
    text = json.dumps(listed)
    for s in ("bob-first-secret", second, "bob-third-secret", helpers.SECRET_KEY):
        assert s not in text
    rows = {u["access_key"]: u for u in listed["users"]}
    assert rows["openlake"]["source"] == "config" and rows["openlake"]["admin"] is True
    assert rows["bob"]["source"] == "runtime" and rows["bob"]["admin"] is False
    assert rows["bob"]["created"] > 0
    assert set(rows["bob"]) == {"access_key", "source", "admin", "created"}


def test_refusals(mode_server):
    srv = mode_server
    cli(srv, "add", "carol", "--secret", "carol-secret-1")
    # A non-admin may not call the routes, neither may anonymous nor a bad signature.
    for method, path, q in (("GET", USERS, ""), ("POST", USERS, "access_key=mallory"),
                            ("DELETE", USERS, "access_key=carol"),
                            ("POST", USERS + "/rotate", "access_key=carol")):
        r = http(srv, method, path, q, access="carol", secret="carol-secret-1")
        assert r.status == 403, (method, path, r.body)
        r = helpers.http_request(srv, method, path + ("?" + q if q else ""))
        assert r.status == 403
    # Nor the drive administration of erasure sets (one drive has none).
    r = http(srv, "GET", "/_openlake/admin/info", access="carol", secret="carol-secret-1")
    assert r.status == (403 if srv.mode == "ec" else 400), r.body
    assert http(srv, "GET", "/_openlake/admin/info").status == (200 if srv.mode == "ec" else 400)
    out = cli(srv, "list", check=False, access="carol", secret="carol-secret-1")
    assert out.returncode == 1 and "AccessDenied" in out.stderr
    helpers.make_client(srv.endpoint, "carol", "carol-secret-1").list_buckets()  # still there
    # Configuration users are the file's; names and secrets are checked.
    assert http(srv, "DELETE", USERS, "access_key=openlake").status == 403
    assert http(srv, "POST", USERS + "/rotate", "access_key=openlake").status == 403
    assert http(srv, "POST", USERS, "access_key=openlake").status == 409
    assert http(srv, "POST", USERS, "access_key=carol").status == 409
    assert http(srv, "POST", USERS, "access_key=a%2Fb").status == 400
    assert http(srv, "POST", USERS, "access_key=dave", body=b"short").status == 400
    assert http(srv, "POST", USERS).status == 400
    assert http(srv, "DELETE", USERS, "access_key=nobody").status == 404


def test_reserved_bucket_hidden(mode_server):
    srv = mode_server
    cli(srv, "add", "erin")  # the store exists
    s3 = helpers.make_client(srv.endpoint)
    assert all(not b["Name"].startswith(".") for b in s3.list_buckets()["Buckets"])
    for method in ("GET", "DELETE", "PUT"):
        r = http(srv, method, "/" + urllib.parse.quote(".openlake"))
        assert r.status == 400 and b"InvalidBucketName" in r.body, (method, r.body)
    r = http(srv, "GET", "/.openlake/x")
    assert r.status == 400


def test_restart_keeps_users(mode_server):
    srv = mode_server
    kept = cli(srv, "add", "frank")["secret_key"]
    cli(srv, "add", "gone", "--secret", "gone-secret-xyz")
    cli(srv, "remove", "gone")
    srv.restart()
    frank = helpers.make_client(srv.endpoint, "frank", kept)
    frank.list_buckets()
    gone = helpers.make_client(srv.endpoint, "gone", "gone-secret-xyz")
    assert code_of(gone.list_buckets) == "InvalidAccessKeyId"
    names = [u["access_key"] for u in cli(srv, "list")["users"]]
    assert "frank" in names and "gone" not in names
    # After a kill -9 as well: an acknowledged add is durable.
    late = cli(srv, "add", "henry")["secret_key"]
    srv.restart(kill=True)
    helpers.make_client(srv.endpoint, "henry", late).list_buckets()
    # Secrets are sealed at rest: no drive file holds one in the clear.
    data = drive_bytes(srv)
    assert b"henry" in data or b"frank" in data or srv.mode == "ec"
    for s in (kept, late):
        assert s.encode() not in data


def native_module():
    return helpers.import_openlake()


def test_native_port(mode_server):
    """The native port looks users up the same way: a run-time user works
    there at once, and its removal refuses the next request of a client
    that is already connected."""
    openlake = native_module()
    srv = mode_server
    sk = cli(srv, "add", "nat-user")["secret_key"]
    b = helpers.unique_bucket("nat")
    helpers.make_client(srv.endpoint, "nat-user", sk).create_bucket(Bucket=b)
    with openlake.Client(srv.endpoint, access_key="nat-user", secret_key=sk) as c:
        c.put(b, "k", b"native bytes")
        back = bytearray(12)
        assert c.get_into(b, "k", back) == 12 and bytes(back) == b"native bytes"
        cli(srv, "remove", "nat-user")
        with pytest.raises(openlake.Error):
            c.get_into(b, "k", back)
    with pytest.raises(openlake.AccessDenied):
        openlake.Client(srv.endpoint, access_key="nat-user", secret_key=sk)
