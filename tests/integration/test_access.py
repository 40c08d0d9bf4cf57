"""Access control (src/access/, src/s3/authz.c) with two users, an admin and
anonymous requests, in both storage modes (one drive "sd", EC 4+2 "ec"):

- a bucket belongs to its creator: ListBuckets shows a user their own, and
  every S3 operation of another user on it or its objects is refused (403)
  until a bucket policy grants it;
- Deny beats Allow (the owner too);
- canned ACLs: a public-read object is readable with plain urllib, without
  credentials, and a private one is not; BucketOwnerEnforced turns ACLs off;
- presigned URLs carry the signer's permissions;
- a malformed policy gets MalformedPolicy and changes nothing;
- the aws CLI (put-bucket-policy, get-bucket-acl) and the image's newer
  boto3 against the same rules.
"""

import json
import os
import subprocess
import urllib.error
import urllib.request

import pytest
from botocore.exceptions import ClientError

import helpers as h

ADMIN = ("openlake", "openlake-secret")
ALICE = ("alice", "alice-secret-1")
BOB = ("bob", "bob-secret-22")

SERVER_CONFIG = [
    ("user",) + ADMIN,
    ("user",) + ALICE,
    ("user",) + BOB,
    ("admin_users", ADMIN[0]),
]


@pytest.fixture(scope="module")
def clients(mode_server):
    ep = mode_server.endpoint
    return {
        "admin": h.make_client(ep, *ADMIN),
        "alice": h.make_client(ep, *ALICE),
        "bob": h.make_client(ep, *BOB),
    }


def new_bucket(c, owner="alice"):
    name = h.unique_bucket("acc")
    c[owner].create_bucket(Bucket=name)
    return name


def denied(fn, code="AccessDenied", status=403):
    with pytest.raises(ClientError) as ei:
        fn()
    assert h.error_code(ei.value) == code, ei.value.response
    assert h.http_status(ei.value) == status


def anon_get(server, path):
    """A plain GET with no credentials at all: (status, body)."""
    try:
        with urllib.request.urlopen(server.endpoint + path, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def policy(bucket, *stmts):
    return json.dumps({"Version": "2012-10-17", "Statement": list(stmts)})


def stmt(effect, principal, action, resource, **extra):
    s = {"Effect": effect, "Principal": principal, "Action": action, "Resource": resource}
    s.update(extra)
    return s


def test_owner_lists_own_buckets(clients):
    a = new_bucket(clients, "alice")
    b = new_bucket(clients, "bob")
    names = lambda who: {x["Name"] for x in clients[who].list_buckets()["Buckets"]}
    assert a in names("alice") and b not in names("alice")
    assert b in names("bob") and a not in names("bob")
    assert {a, b} <= names("admin")
    assert clients["alice"].list_buckets()["Owner"]["ID"] == "alice"
    # The name space is shared: another user's name is taken.
    denied(lambda: clients["bob"].create_bucket(Bucket=a), "BucketAlreadyExists", 409)
    denied(lambda: clients["alice"].create_bucket(Bucket=a), "BucketAlreadyOwnedByYou", 409)


def foreign_ops(c, bucket, key, own_bucket):
    """Every S3 operation bob may try on alice's bucket and object."""
    bob = c["bob"]
    tagging = {"TagSet": [{"Key": "k", "Value": "v"}]}
    cors = {"CORSRules": [{"AllowedMethods": ["GET"], "AllowedOrigins": ["*"]}]}
    life = {"Rules": [{"ID": "r", "Status": "Enabled", "Filter": {"Prefix": "x/"},
                       "Expiration": {"Days": 1}}]}
    return {
        "HeadBucket": lambda: bob.head_bucket(Bucket=bucket),
        "ListObjectsV2": lambda: bob.list_objects_v2(Bucket=bucket),
        "ListObjects": lambda: bob.list_objects(Bucket=bucket),
        "ListObjectVersions": lambda: bob.list_object_versions(Bucket=bucket),
        "ListMultipartUploads": lambda: bob.list_multipart_uploads(Bucket=bucket),
        "GetBucketLocation": lambda: bob.get_bucket_location(Bucket=bucket),
        "GetBucketVersioning": lambda: bob.get_bucket_versioning(Bucket=bucket),
        "PutBucketVersioning": lambda: bob.put_bucket_versioning(
            Bucket=bucket, VersioningConfiguration={"Status": "Suspended"}),
        "GetBucketTagging": lambda: bob.get_bucket_tagging(Bucket=bucket),
        "PutBucketTagging": lambda: bob.put_bucket_tagging(Bucket=bucket, Tagging=tagging),
        "PutBucketCors": lambda: bob.put_bucket_cors(Bucket=bucket, CORSConfiguration=cors),
        "GetBucketCors": lambda: bob.get_bucket_cors(Bucket=bucket),
        "PutBucketLifecycle": lambda: bob.put_bucket_lifecycle_configuration(
            Bucket=bucket, LifecycleConfiguration=life),
        "GetBucketAcl": lambda: bob.get_bucket_acl(Bucket=bucket),
        "PutBucketAcl": lambda: bob.put_bucket_acl(Bucket=bucket, ACL="public-read"),
        "GetBucketOwnershipControls": lambda: bob.get_bucket_ownership_controls(Bucket=bucket),
        "PutObject": lambda: bob.put_object(Bucket=bucket, Key="bob.txt", Body=b"b"),
        "GetObject": lambda: bob.get_object(Bucket=bucket, Key=key)["Body"].read(),
        "HeadObject": lambda: bob.head_object(Bucket=bucket, Key=key),
        "GetObjectTagging": lambda: bob.get_object_tagging(Bucket=bucket, Key=key),
        "PutObjectTagging": lambda: bob.put_object_tagging(Bucket=bucket, Key=key,
                                                           Tagging=tagging),
        "GetObjectAcl": lambda: bob.get_object_acl(Bucket=bucket, Key=key),
        "PutObjectAcl": lambda: bob.put_object_acl(Bucket=bucket, Key=key, ACL="public-read"),
        "GetObjectAttributes": lambda: bob.get_object_attributes(
            Bucket=bucket, Key=key, ObjectAttributes=["ETag"]),
        "CopyObjectOut": lambda: bob.copy_object(Bucket=own_bucket, Key="stolen",
                                                 CopySource={"Bucket": bucket, "Key": key}),
        "CopyObjectIn": lambda: bob.copy_object(Bucket=bucket, Key="planted",
                                                CopySource={"Bucket": own_bucket, "Key": "mine"}),
        "CreateMultipartUpload": lambda: bob.create_multipart_upload(Bucket=bucket, Key="mp"),
        "DeleteObject": lambda: bob.delete_object(Bucket=bucket, Key=key),
        "GetBucketPolicy": lambda: bob.get_bucket_policy(Bucket=bucket),
        "PutBucketPolicy": lambda: bob.put_bucket_policy(Bucket=bucket, Policy=policy(
            bucket, stmt("Allow", "*", "s3:*", f"arn:aws:s3:::{bucket}/*"))),
        "DeleteBucketPolicy": lambda: bob.delete_bucket_policy(Bucket=bucket),
        "DeleteBucket": lambda: bob.delete_bucket(Bucket=bucket),
    }


def test_foreign_bucket_refused_until_policy_grants(clients):
    alice, bob = clients["alice"], clients["bob"]
    bucket = new_bucket(clients)
    own = new_bucket(clients, "bob")
    bob.put_object(Bucket=own, Key="mine", Body=b"bob's")
    alice.put_object(Bucket=bucket, Key="doc.txt", Body=b"alice's")
    ops = foreign_ops(clients, bucket, "doc.txt", own)
    for name, fn in ops.items():
        with pytest.raises(ClientError) as ei:
            fn()
        assert h.http_status(ei.value) == 403, (name, ei.value.response)
    # DeleteObjects without any grant that could apply: refused whole.
    denied(lambda: bob.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "doc.txt"}]}))
    assert alice.get_object(Bucket=bucket, Key="doc.txt")["Body"].read() == b"alice's"

    # The owner grants bob everything on the bucket and its objects.
    alice.put_bucket_policy(Bucket=bucket, Policy=policy(bucket, stmt(
        "Allow", {"AWS": ["arn:aws:iam::000000000000:user/bob"]}, "s3:*",
        [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"])))
    for name, fn in ops.items():
        if name in ("GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy"):
            denied(fn)  # the policy stays its owner's
            continue
        if name in ("DeleteBucket", "DeleteObject"):
            continue
        try:
            fn()
        except ClientError as e:
            # Allowed through: what is left is the operation's own answer.
            assert h.http_status(e) != 403, (name, e.response)
    # Every object belongs to the bucket's owner, whoever wrote it.
    listed = bob.list_objects_v2(Bucket=bucket, FetchOwner=True)["Contents"]
    assert {o["Key"] for o in listed} >= {"doc.txt", "bob.txt"}
    assert {o["Owner"]["ID"] for o in listed} == {"alice"}
    ops["DeleteObject"]()
    bob.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "bob.txt"}]})
    # Bob never sees it in ListBuckets: it is not his.
    assert bucket not in {x["Name"] for x in bob.list_buckets()["Buckets"]}


def test_admin_api_is_the_admins(mode_server):
    if mode_server.mode != "ec":
        pytest.skip("the drive admin API exists with erasure-coded drives")
    r = h.signed_request(mode_server, "GET", "/_openlake/admin/info", access=ALICE[0],
                         secret=ALICE[1])
    assert r.status == 403, r
    r = h.signed_request(mode_server, "GET", "/_openlake/admin/info", access=ADMIN[0],
                         secret=ADMIN[1])
    assert r.status == 200, r


def test_two_subresources_are_named_as_served(mode_server, clients):
    """A grant of one sub-resource's action does not open another named in
    the same request (the check names the operation the router serves)."""
    bucket = new_bucket(clients)
    clients["alice"].put_bucket_policy(Bucket=bucket, Policy=policy(bucket, stmt(
        "Allow", {"AWS": "bob"}, ["s3:PutBucketTagging", "s3:GetBucketTagging"],
        f"arn:aws:s3:::{bucket}")))
    r = h.signed_request(mode_server, "PUT", f"/{bucket}?acl&tagging",
                         headers={"x-amz-acl": "public-read"}, access=BOB[0], secret=BOB[1])
    assert r.status == 403, r
    assert clients["alice"].get_bucket_acl(Bucket=bucket)["Grants"] == [
        {"Grantee": {"ID": "alice", "DisplayName": "alice", "Type": "CanonicalUser"},
         "Permission": "FULL_CONTROL"}]


def test_deny_beats_allow(clients):
    alice, bob = clients["alice"], clients["bob"]
    bucket = new_bucket(clients)
    for k in ("pub/a", "secret/b", "keep/c"):
        alice.put_object(Bucket=bucket, Key=k, Body=k.encode())
    alice.put_bucket_policy(Bucket=bucket, Policy=policy(
        bucket,
        stmt("Allow", {"AWS": "bob"}, "s3:Get*", f"arn:aws:s3:::{bucket}/*"),
        stmt("Deny", {"AWS": "bob"}, "s3:GetObject", f"arn:aws:s3:::{bucket}/secret*"),
        stmt("Deny", "*", ["s3:DeleteObject"], f"arn:aws:s3:::{bucket}/keep/*"),
    ))
    assert bob.get_object(Bucket=bucket, Key="pub/a")["Body"].read() == b"pub/a"
    denied(lambda: bob.get_object(Bucket=bucket, Key="secret/b"))
    # A Deny binds the owner as well, but never locks them out of the policy.
    denied(lambda: alice.delete_object(Bucket=bucket, Key="keep/c"))
    # DeleteObjects decides per key.
    r = alice.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "keep/c"},
                                                                {"Key": "secret/b"}]})
    assert [(e["Key"], e["Code"]) for e in r.get("Errors", [])] == [("keep/c", "AccessDenied")]
    assert [d["Key"] for d in r["Deleted"]] == ["secret/b"]
    alice.put_object(Bucket=bucket, Key="secret/b", Body=b"secret/b")
    alice.delete_object(Bucket=bucket, Key="pub/a")
    assert json.loads(alice.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"]
    alice.delete_bucket_policy(Bucket=bucket)
    denied(lambda: alice.get_bucket_policy(Bucket=bucket), "NoSuchBucketPolicy", 404)
    alice.delete_object(Bucket=bucket, Key="keep/c")
    denied(lambda: bob.get_object(Bucket=bucket, Key="secret/b"))


def test_canned_acls_and_anonymous(mode_server, clients):
    alice, bob = clients["alice"], clients["bob"]
    bucket = new_bucket(clients)
    alice.put_object(Bucket=bucket, Key="public.txt", Body=b"hello world", ACL="public-read")
    alice.put_object(Bucket=bucket, Key="private.txt", Body=b"secret")
    assert anon_get(mode_server, f"/{bucket}/public.txt") == (200, b"hello world")
    assert anon_get(mode_server, f"/{bucket}/private.txt")[0] == 403
    assert anon_get(mode_server, f"/{bucket}/missing.txt")[0] == 403
    assert anon_get(mode_server, f"/{bucket}")[0] == 403
    assert anon_get(mode_server, "/")[0] == 403
    assert bob.get_object(Bucket=bucket, Key="public.txt")["Body"].read() == b"hello world"
    if os.path.exists("/usr/bin/curl"):
        for key, want in (("public.txt", b"hello world200"), ("private.txt", b"403")):
            p = subprocess.run(["/usr/bin/curl", "-s", "-w", "%{http_code}", "-o",
                                "/dev/null" if want == b"403" else "-",
                                f"{mode_server.endpoint}/{bucket}/{key}"],
                               capture_output=True, timeout=20)
            assert p.stdout == want, p

    acl = alice.get_object_acl(Bucket=bucket, Key="public.txt")
    assert acl["Owner"]["ID"] == "alice" and acl["Owner"]["DisplayName"] == "alice"
    grants = {(g["Grantee"].get("URI", g["Grantee"].get("ID")), g["Permission"])
              for g in acl["Grants"]}
    assert grants == {("alice", "FULL_CONTROL"),
                      ("http://acs.amazonaws.com/groups/global/AllUsers", "READ")}
    # Back to private: anonymous reads stop at once.
    alice.put_object_acl(Bucket=bucket, Key="public.txt", ACL="private")
    assert anon_get(mode_server, f"/{bucket}/public.txt")[0] == 403
    # The same through an AccessControlPolicy body.
    alice.put_object_acl(Bucket=bucket, Key="public.txt", AccessControlPolicy={
        "Owner": {"ID": "alice"},
        "Grants": [
            {"Grantee": {"Type": "CanonicalUser", "ID": "alice"}, "Permission": "FULL_CONTROL"},
            {"Grantee": {"Type": "Group",
                         "URI": "http://acs.amazonaws.com/groups/global/AllUsers"},
             "Permission": "READ"}]})
    assert anon_get(mode_server, f"/{bucket}/public.txt")[0] == 200
    denied(lambda: alice.put_object_acl(Bucket=bucket, Key="public.txt", AccessControlPolicy={
        "Owner": {"ID": "alice"},
        "Grants": [{"Grantee": {"Type": "CanonicalUser", "ID": "bob"}, "Permission": "READ"}]}),
        "NotImplemented", 501)

    # A public-read bucket lists for anyone, but its objects stay private.
    alice.put_bucket_acl(Bucket=bucket, ACL="public-read")
    st, body = anon_get(mode_server, f"/{bucket}?list-type=2")
    assert st == 200 and b"private.txt" in body
    assert anon_get(mode_server, f"/{bucket}/private.txt")[0] == 403
    acl = bob.list_objects_v2(Bucket=bucket)
    assert acl["KeyCount"] == 2
    denied(lambda: bob.put_object(Bucket=bucket, Key="x", Body=b"x"))
    g = alice.get_bucket_acl(Bucket=bucket)
    assert g["Owner"]["ID"] == "alice"
    assert len(g["Grants"]) == 2

    # Copies and multipart uploads take the request's ACL.
    alice.copy_object(Bucket=bucket, Key="copy.txt", CopySource={"Bucket": bucket,
                                                                 "Key": "public.txt"})
    assert anon_get(mode_server, f"/{bucket}/copy.txt")[0] == 403
    alice.copy_object(Bucket=bucket, Key="copy2.txt", ACL="public-read",
                      CopySource={"Bucket": bucket, "Key": "private.txt"})
    assert anon_get(mode_server, f"/{bucket}/copy2.txt") == (200, b"secret")
    up = alice.create_multipart_upload(Bucket=bucket, Key="mp.bin", ACL="public-read")
    p = alice.upload_part(Bucket=bucket, Key="mp.bin", UploadId=up["UploadId"], PartNumber=1,
                          Body=b"m" * 100)
    alice.complete_multipart_upload(Bucket=bucket, Key="mp.bin", UploadId=up["UploadId"],
                                    MultipartUpload={"Parts": [{"PartNumber": 1,
                                                                "ETag": p["ETag"]}]})
    assert anon_get(mode_server, f"/{bucket}/mp.bin") == (200, b"m" * 100)

    # BucketOwnerEnforced: ACLs off, public ACLs refused, private ones fine.
    alice.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={
        "Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    assert alice.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]["Rules"] == [
        {"ObjectOwnership": "BucketOwnerEnforced"}]
    assert anon_get(mode_server, f"/{bucket}/mp.bin")[0] == 403
    denied(lambda: alice.put_object(Bucket=bucket, Key="p", Body=b"p", ACL="public-read"),
           "AccessControlListNotSupported", 400)
    alice.put_object(Bucket=bucket, Key="p", Body=b"p", ACL="private")
    alice.delete_bucket_ownership_controls(Bucket=bucket)
    denied(lambda: alice.get_bucket_ownership_controls(Bucket=bucket),
           "OwnershipControlsNotFoundError", 404)


def test_anonymous_policy_and_conditions(mode_server, clients):
    alice = clients["alice"]
    bucket = new_bucket(clients)
    alice.put_object(Bucket=bucket, Key="pub/a.txt", Body=b"A")
    alice.put_object(Bucket=bucket, Key="other/b.txt", Body=b"B")
    res = f"arn:aws:s3:::{bucket}/pub/*"
    alice.put_bucket_policy(Bucket=bucket, Policy=policy(
        bucket, stmt("Allow", "*", "s3:GetObject", res),
        stmt("Allow", "*", "s3:ListBucket", f"arn:aws:s3:::{bucket}",
             Condition={"StringLike": {"s3:prefix": "pub/*"}})))
    assert anon_get(mode_server, f"/{bucket}/pub/a.txt") == (200, b"A")
    assert anon_get(mode_server, f"/{bucket}/other/b.txt")[0] == 403
    assert anon_get(mode_server, f"/{bucket}?list-type=2&prefix=pub/")[0] == 200
    assert anon_get(mode_server, f"/{bucket}?list-type=2&prefix=other/")[0] == 403
    assert anon_get(mode_server, f"/{bucket}?list-type=2")[0] == 403
    # A source-address condition the client does not meet, then one it does.
    alice.put_bucket_policy(Bucket=bucket, Policy=policy(
        bucket, stmt("Allow", "*", "s3:GetObject", res,
                     Condition={"IpAddress": {"aws:SourceIp": ["10.0.0.0/8"]}})))
    assert anon_get(mode_server, f"/{bucket}/pub/a.txt")[0] == 403
    alice.put_bucket_policy(Bucket=bucket, Policy=policy(
        bucket, stmt("Allow", "*", "s3:GetObject", res,
                     Condition={"IpAddress": {"aws:SourceIp": "127.0.0.0/8"}}),
        stmt("Deny", "*", "s3:GetObject", res,
             Condition={"Bool": {"aws:SecureTransport": "true"}})))
    assert anon_get(mode_server, f"/{bucket}/pub/a.txt") == (200, b"A")
    # Plain HTTP is not secure transport: a Deny on false bites.
    alice.put_bucket_policy(Bucket=bucket, Policy=policy(
        bucket, stmt("Allow", "*", "s3:GetObject", res),
        stmt("Deny", "*", "s3:*", f"arn:aws:s3:::{bucket}/*",
             Condition={"Bool": {"aws:SecureTransport": "false"}})))
    assert anon_get(mode_server, f"/{bucket}/pub/a.txt")[0] == 403
    denied(lambda: alice.get_object(Bucket=bucket, Key="pub/a.txt"))
    # Anonymous writes stay refused without a grant.
    req = urllib.request.Request(f"{mode_server.endpoint}/{bucket}/pub/new", data=b"x",
                                 method="PUT")
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(req, timeout=10)
    assert ei.value.code == 403


def test_presigned_urls_carry_signer_permissions(clients):
    alice, bob = clients["alice"], clients["bob"]
    bucket = new_bucket(clients)
    alice.put_object(Bucket=bucket, Key="k", Body=b"presigned")
    params = {"Bucket": bucket, "Key": "k"}
    url_a = alice.generate_presigned_url("get_object", Params=params, ExpiresIn=300)
    url_b = bob.generate_presigned_url("get_object", Params=params, ExpiresIn=300)
    assert h.url_request(url_a).status == 200
    assert h.url_request(url_b).status == 403
    alice.put_bucket_policy(Bucket=bucket, Policy=policy(
        bucket, stmt("Allow", {"AWS": "bob"}, "s3:GetObject", f"arn:aws:s3:::{bucket}/k")))
    r = h.url_request(url_b)
    assert r.status == 200 and r.body == b"presigned"
    put_b = bob.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "w"},
                                       ExpiresIn=300)
    assert h.url_request(put_b, method="PUT", body=b"w").status == 403


MALFORMED = [
    "not json",
    "[]",
    '{"Version":"2012-10-17"}',
    '{"Statement":[{"Effect":"Maybe","Principal":"*","Action":"s3:GetObject",'
    '"Resource":"arn:aws:s3:::BUCKET/*"}]}',
    '{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject",'
    '"Resource":"arn:aws:s3:::another-bucket/*"}]}',
    '{"Statement":[{"Effect":"Allow","Principal":"*","Action":"iam:PassRole",'
    '"Resource":"arn:aws:s3:::BUCKET/*"}]}',
    '{"Statement":[{"Effect":"Allow","Action":"s3:GetObject","Resource":"arn:aws:s3:::BUCKET"}]}',
    '{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject",'
    '"Resource":"arn:aws:s3:::BUCKET/*","Condition":{"IpAddress":{"aws:SourceIp":"nope"}}}]}',
    '{"Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject",'
    '"Resource":"arn:aws:s3:::BUCKET/*","Condition":{"Frobnicate":{"s3:prefix":"a"}}}]}',
    '{"Statement":[{"Effect":"Allow","NotPrincipal":"*","Action":"s3:GetObject",'
    '"Resource":"arn:aws:s3:::BUCKET/*"}]}',
]


def test_malformed_policy_changes_nothing(clients):
    alice = clients["alice"]
    bucket = new_bucket(clients)
    good = policy(bucket, stmt("Allow", {"AWS": "bob"}, "s3:GetObject",
                               f"arn:aws:s3:::{bucket}/*"))
    alice.put_bucket_policy(Bucket=bucket, Policy=good)
    for doc in MALFORMED:
        denied(lambda: alice.put_bucket_policy(Bucket=bucket,
                                               Policy=doc.replace("BUCKET", bucket)),
               "MalformedPolicy", 400)
    assert alice.get_bucket_policy(Bucket=bucket)["Policy"] == good


def _aws_env(tmp_path, user):
    cfg = tmp_path / "config"
    cfg.write_text("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ACCESS_KEY_ID": user[0], "AWS_SECRET_ACCESS_KEY": user[1],
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(cfg),
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_PAGER": "", "AWS_MAX_ATTEMPTS": "1"})
    return env


def test_aws_cli_policy_and_acl(mode_server, clients, tmp_path):
    aws = h.aws_binary()
    if aws is None or mode_server.mode != "sd":
        pytest.skip("aws CLI once, on one drive")
    bucket = new_bucket(clients)
    clients["alice"].put_object(Bucket=bucket, Key="o", Body=b"cli")
    env = _aws_env(tmp_path, ALICE)
    doc = policy(bucket, stmt("Allow", {"AWS": "bob"}, "s3:GetObject",
                              f"arn:aws:s3:::{bucket}/*"))
    run = lambda *a: subprocess.run([aws, "--endpoint-url", mode_server.endpoint, *a], env=env,
                                    capture_output=True, text=True, timeout=60)
    p = run("s3api", "put-bucket-policy", "--bucket", bucket, "--policy", doc)
    assert p.returncode == 0, p.stderr
    p = run("s3api", "get-bucket-acl", "--bucket", bucket)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["Owner"]["ID"] == "alice"
    assert out["Grants"][0]["Permission"] == "FULL_CONTROL"
    assert clients["bob"].get_object(Bucket=bucket, Key="o")["Body"].read() == b"cli"
    p = run("s3api", "put-bucket-policy", "--bucket", bucket, "--policy", "{broken")
    assert p.returncode != 0 and "MalformedPolicy" in p.stderr


NEW_SDK_CHECK = r"""
import sys, boto3
from botocore.config import Config
from botocore.exceptions import ClientError
ep, bucket = sys.argv[1], sys.argv[2]
def c(a, s):
    return boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id=a,
                        aws_secret_access_key=s, config=Config(s3={"addressing_style": "path"}))
bob = c("bob", "bob-secret-22")
try:
    bob.put_object(Bucket=bucket, Key="x", Body=b"x")
    print("put allowed"); sys.exit(1)
except ClientError as e:
    assert e.response["Error"]["Code"] == "AccessDenied", e.response
print(bob.get_object(Bucket=bucket, Key="o")["Body"].read().decode())
"""


def test_new_boto3(mode_server, clients, tmp_path):
    py = "/root/.pyenv/shims/python3"
    if not os.path.exists(py) or mode_server.mode != "sd":
        pytest.skip("the image's python3 once, on one drive")
    bucket = new_bucket(clients)
    clients["alice"].put_object(Bucket=bucket, Key="o", Body=b"new sdk", ACL="authenticated-read")
    env = _aws_env(tmp_path, ("none", "none"))
    p = subprocess.run([py, "-c", NEW_SDK_CHECK, mode_server.endpoint, bucket], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip() == "new sdk"


def test_s3cmd_acl_and_policy(mode_server, clients, tmp_path):
    s3cmd = "/usr/bin/s3cmd"
    if not os.path.exists(s3cmd) or mode_server.mode != "sd":
        pytest.skip("s3cmd once, on one drive")
    bucket = new_bucket(clients)
    clients["alice"].put_object(Bucket=bucket, Key="o", Body=b"s3cmd")
    hostport = f"127.0.0.1:{mode_server.port}"
    cfg = tmp_path / "s3cfg"
    cfg.write_text("\n".join([
        "[default]", f"access_key = {ALICE[0]}", f"secret_key = {ALICE[1]}",
        f"host_base = {hostport}", f"host_bucket = {hostport}", "use_https = False",
        "signature_v2 = False", "bucket_location = us-east-1", "progress_meter = False", ""]))
    env = _aws_env(tmp_path, ("none", "none"))
    env["HOME"] = str(tmp_path)
    run = lambda *a: subprocess.run([s3cmd, "-c", str(cfg), *a], env=env, capture_output=True,
                                    text=True, timeout=60)
    assert anon_get(mode_server, f"/{bucket}/o")[0] == 403
    p = run("setacl", "--acl-public", f"s3://{bucket}/o")
    assert p.returncode == 0, p.stdout + p.stderr
    assert anon_get(mode_server, f"/{bucket}/o") == (200, b"s3cmd")
    p = run("setacl", "--acl-private", f"s3://{bucket}/o")
    assert p.returncode == 0, p.stdout + p.stderr
    assert anon_get(mode_server, f"/{bucket}/o")[0] == 403
    doc = tmp_path / "policy.json"
    doc.write_text(policy(bucket, stmt("Allow", "*", "s3:GetObject", f"arn:aws:s3:::{bucket}/*")))
    p = run("setpolicy", str(doc), f"s3://{bucket}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert anon_get(mode_server, f"/{bucket}/o") == (200, b"s3cmd")
    p = run("info", f"s3://{bucket}")
    assert p.returncode == 0 and "s3:GetObject" in p.stdout, p.stdout + p.stderr
    p = run("delpolicy", f"s3://{bucket}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert anon_get(mode_server, f"/{bucket}/o")[0] == 403


def test_native_port_keeps_the_same_rules(mode_server, clients):
    """The native port (libopenlake) is held to the same owners and
    policies as the S3 port: bob can neither read, write, list nor delete in
    alice's bucket until her policy lets him read."""
    openlake = h.import_openlake()
    bucket = new_bucket(clients)
    clients["alice"].put_object(Bucket=bucket, Key="doc", Body=b"alice's")
    with openlake.Client(mode_server.endpoint, *ALICE) as alice, \
            openlake.Client(mode_server.endpoint, *BOB) as bob:
        assert alice.get(bucket, "doc") == b"alice's"
        for fn in (lambda: bob.get(bucket, "doc"), lambda: bob.head(bucket, "doc"),
                   lambda: bob.put(bucket, "x", b"bob"), lambda: list(bob.list(bucket)),
                   lambda: bob.delete(bucket, "doc"),
                   lambda: bob.open_put(bucket, "big", 1 << 20)):
            with pytest.raises(openlake.AccessDenied):
                fn()
        res = bob.get_many([(bucket, "doc", bytearray(4), 0)])
        assert isinstance(res[0], openlake.AccessDenied)
        clients["alice"].put_bucket_policy(Bucket=bucket, Policy=policy(bucket, stmt(
            "Allow", {"AWS": ["bob"]}, "s3:GetObject", f"arn:aws:s3:::{bucket}/*")))
        assert bob.get(bucket, "doc") == b"alice's"
        with pytest.raises(openlake.AccessDenied):
            bob.put(bucket, "doc", b"overwrite")
        assert alice.get(bucket, "doc") == b"alice's"


def test_native_get_cuda_refusals(mode_server, clients):
    """GET_CUDA (a GET whose bytes the node copies into a local client's GPU
    memory) is authorized as a GET before anything else, and hostile
    destinations get clean errors, never a crash (cuda_ipc_check.c).  On a
    host without a CUDA driver the node says so (-ENOTSUP) and its HELLO does
    not offer it; tests/gpu/run.sh runs the same program where there is a
    GPU and checks the copies and their bounds."""
    import errno
    prog = h.openlake_binary().parent / "cuda_ipc_check"
    if not prog.exists():
        pytest.skip(f"{prog} not built")
    bucket = new_bucket(clients)
    body = bytes((i * 7 + 3) & 255 for i in range(8192))
    clients["alice"].put_object(Bucket=bucket, Key="t", Body=body)
    out = subprocess.run([str(prog), mode_server.endpoint, *ALICE, *BOB, bucket, "t"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    got = dict(line.split(": ", 1) for line in out.stdout.splitlines() if ": " in line)
    if "cuda" in got:
        pytest.skip("this host has a CUDA device: tests/gpu/run.sh checks it")
    assert got["hello_flag"] == "0"
    assert got["garbage_uuid"] == str(-errno.ENOTSUP)
    assert got["garbage_handle"] == str(-errno.ENOTSUP)
    assert got["truncated"] == str(-errno.EINVAL)
    assert got["stranger"] == str(-errno.EACCES)
    assert clients["alice"].get_object(Bucket=bucket, Key="t")["Body"].read() == body
