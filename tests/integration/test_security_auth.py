"""Issue 10, items 2, 8 and 9: a signature vouches for exactly what the
server obeys.

- Every x-amz-* header present must be signed (x-amz-content-sha256
  excepted), in presigned and header-signed requests: an unsigned
  x-amz-copy-source added to a presigned PUT must not turn it into a copy.
- Every part of the credential scope is checked (date, service,
  terminator; the region already was), with S3's error codes and messages
  naming the wrong part.
- A '+' in a signed query means what the router decodes it to (a space):
  prefix=a%2Bb changed to prefix=a+b no longer verifies.
- A signed header must be present, and only once; a query parameter must
  not be repeated.

Runs against one drive and against six erasure-coded drives (mode_server).
"""

import base64
import hashlib
import hmac
import json
import urllib.parse

import pytest

import helpers
from helpers import ACCESS_KEY, REGION, SECRET_KEY, UNSIGNED_PAYLOAD

HEADERS_NOT_SIGNED_MSG = "There were headers present in the request which were not signed"


def q(s):
    return urllib.parse.quote(s, safe="-_.~")


def host_of(server):
    return f"127.0.0.1:{server.port}"


def scope_of(amz_date, date=None, region=REGION, service="s3", terminator="aws4_request"):
    return f"{date or amz_date[:8]}/{region}/{service}/{terminator}"


def signature(amz_date, scope, creq, date, region, service):
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    key = helpers.signing_key(SECRET_KEY, date, region, service)
    return hmac.new(key, sts.encode(), hashlib.sha256).hexdigest()


def sign_custom(server, method, target, headers=None, body=b"", date=None, region=REGION,
                service="s3", terminator="aws4_request", amz_date=None, payload_hash=None,
                unsigned=None):
    """Headers for a header-signed request whose scope parts can be anything.
    Every header in `headers` is signed; `unsigned` ones are added after."""
    amz_date = amz_date or helpers.amz_now()
    date = date or amz_date[:8]
    ph = payload_hash or hashlib.sha256(body).hexdigest()
    out = {"Host": host_of(server), "x-amz-date": amz_date, "x-amz-content-sha256": ph}
    out.update(headers or {})
    if body:
        out["Content-Length"] = str(len(body))
    canon = {k.lower(): " ".join(str(v).split()) for k, v in out.items()}
    names = sorted(canon)
    path, _, query = target.partition("?")
    creq = "\n".join([method, path, helpers.canonical_query(query),
                      "".join(f"{n}:{canon[n]}\n" for n in names), ";".join(names), ph])
    scope = scope_of(amz_date, date, region, service, terminator)
    sig = signature(amz_date, scope, creq, date, region, service)
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, "
                            f"SignedHeaders={';'.join(names)}, Signature={sig}")
    out.update(unsigned or {})
    return out


def presign_custom(server, method, path, params=None, signed=None, date=None, region=REGION,
                   service="s3", terminator="aws4_request", amz_date=None, expires=300):
    """A presigned target ("/b/k?...") whose scope parts can be anything;
    `signed` headers (besides host) are signed and must then be sent."""
    amz_date = amz_date or helpers.amz_now()
    date = date or amz_date[:8]
    hdrs = {"host": host_of(server)}
    hdrs.update({k.lower(): v for k, v in (signed or {}).items()})
    names = sorted(hdrs)
    scope = scope_of(amz_date, date, region, service, terminator)
    qp = list((params or {}).items()) + [
        ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
        ("X-Amz-Credential", f"{ACCESS_KEY}/{scope}"),
        ("X-Amz-Date", amz_date),
        ("X-Amz-Expires", str(expires)),
        ("X-Amz-SignedHeaders", ";".join(names)),
    ]
    raw = "&".join(f"{q(k)}={q(v)}" for k, v in qp)
    creq = "\n".join([method, path, helpers.canonical_query(raw),
                      "".join(f"{n}:{hdrs[n]}\n" for n in names), ";".join(names),
                      UNSIGNED_PAYLOAD])
    sig = signature(amz_date, scope, creq, date, region, service)
    return f"{path}?{raw}&X-Amz-Signature={sig}"


def error_of(resp):
    assert resp.body, f"no error document: {resp}"
    return helpers.parse_error(resp.body)


def object_body(s3, bucket, key):
    """The object's content, or None when it does not exist."""
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.ClientError as e:
        assert helpers.http_status(e) == 404, e
        return None


# ---- item 2: unsigned x-amz-* headers ------------------------------------

SECRET = b"the secret the URL holder must not read"


@pytest.fixture
def secret_bucket(mode_s3, mode_bucket):
    mode_s3.put_object(Bucket=mode_bucket, Key="secret.txt", Body=SECRET)
    return mode_bucket


def test_presigned_put_with_unsigned_copy_source_is_refused(mode_server, mode_s3, secret_bucket):
    url = mode_s3.generate_presigned_url(
        "put_object", Params={"Bucket": secret_bucket, "Key": "upload.txt"}, ExpiresIn=300)
    r = helpers.url_request(url, "PUT", headers={"x-amz-copy-source": f"/{secret_bucket}/secret.txt"},
                            body=b"")
    assert r.status == 403, r
    err = error_of(r)
    assert err["Code"] == "AccessDenied"
    assert err["Message"] == HEADERS_NOT_SIGNED_MSG
    assert err["HeadersNotSigned"] == "x-amz-copy-source"
    assert object_body(mode_s3, secret_bucket, "upload.txt") is None
    # The URL itself still works, for what it was made for.
    r = helpers.url_request(url, "PUT", body=b"mine")
    assert r.status == 200, r
    assert object_body(mode_s3, secret_bucket, "upload.txt") == b"mine"


def test_presigned_upload_part_copy_is_refused(mode_server, mode_s3, secret_bucket):
    uid = mode_s3.create_multipart_upload(Bucket=secret_bucket, Key="big.bin")["UploadId"]
    try:
        url = mode_s3.generate_presigned_url(
            "upload_part", Params={"Bucket": secret_bucket, "Key": "big.bin", "UploadId": uid,
                                   "PartNumber": 1}, ExpiresIn=300)
        r = helpers.url_request(url, "PUT", body=b"", headers={
            "x-amz-copy-source": f"/{secret_bucket}/secret.txt"})
        assert r.status == 403, r
        err = error_of(r)
        assert err["Code"] == "AccessDenied"
        assert err["HeadersNotSigned"] == "x-amz-copy-source"
        parts = mode_s3.list_parts(Bucket=secret_bucket, Key="big.bin", UploadId=uid)
        assert parts.get("Parts", []) == []
        # The part URL works without the added header.
        r = helpers.url_request(url, "PUT", body=b"part one")
        assert r.status == 200, r
        parts = mode_s3.list_parts(Bucket=secret_bucket, Key="big.bin", UploadId=uid)
        assert [p["Size"] for p in parts["Parts"]] == [8]
    finally:
        mode_s3.abort_multipart_upload(Bucket=secret_bucket, Key="big.bin", UploadId=uid)


@pytest.mark.parametrize("extra,names", [
    ({"x-amz-meta-foo": "bar"}, "x-amz-meta-foo"),
    ({"x-amz-tagging": "k=v"}, "x-amz-tagging"),
    ({"X-Amz-Meta-A": "1", "x-amz-tagging": "k=v", "x-amz-storage-class": "STANDARD"},
     "x-amz-meta-a, x-amz-tagging, x-amz-storage-class"),
])
def test_presigned_put_with_unsigned_amz_headers_is_refused(mode_server, mode_s3, mode_bucket,
                                                            extra, names):
    url = mode_s3.generate_presigned_url(
        "put_object", Params={"Bucket": mode_bucket, "Key": "k"}, ExpiresIn=300)
    r = helpers.url_request(url, "PUT", headers=extra, body=b"data")
    assert r.status == 403, r
    err = error_of(r)
    assert err["Code"] == "AccessDenied" and err["Message"] == HEADERS_NOT_SIGNED_MSG
    assert err["HeadersNotSigned"] == names
    assert object_body(mode_s3, mode_bucket, "k") is None


def test_presigned_put_with_signed_amz_headers_works(mode_server, mode_s3, mode_bucket):
    # Headers the URL was signed with are obeyed; an unsigned Content-Type
    # and x-amz-content-sha256 are accepted, as S3 accepts them.
    # (Tagging on PUT is not implemented with erasure-coded drives yet.)
    tagging = mode_server.mode == "sd"
    params = {"Bucket": mode_bucket, "Key": "k", "Metadata": {"foo": "bar"}}
    sent = {"x-amz-meta-foo": "bar"}
    if tagging:
        params["Tagging"] = "k=v"
        sent["x-amz-tagging"] = "k=v"
    url = mode_s3.generate_presigned_url("put_object", Params=params, ExpiresIn=300)
    r = helpers.url_request(url, "PUT", body=b"data", headers={
        **sent, "Content-Type": "text/plain", "x-amz-content-sha256": UNSIGNED_PAYLOAD})
    assert r.status == 200, r
    h = mode_s3.head_object(Bucket=mode_bucket, Key="k")
    assert h["Metadata"] == {"foo": "bar"}
    assert h["ContentType"] == "text/plain"
    if tagging:
        tags = mode_s3.get_object_tagging(Bucket=mode_bucket, Key="k")["TagSet"]
        assert tags == [{"Key": "k", "Value": "v"}]
    # Signed with a value, sent with another: the signature fails.
    r = helpers.url_request(url, "PUT", body=b"data", headers={**sent, "x-amz-meta-foo": "evil"})
    assert r.status == 403 and error_of(r)["Code"] == "SignatureDoesNotMatch", r


def test_header_signed_request_with_unsigned_meta_is_refused(mode_server, mode_s3, mode_bucket):
    target = f"/{mode_bucket}/k"
    hdrs = sign_custom(mode_server, "PUT", target, body=b"data",
                       unsigned={"x-amz-meta-foo": "injected"})
    r = helpers.http_request(mode_server, "PUT", target, hdrs, b"data")
    assert r.status == 403, r
    err = error_of(r)
    assert err["Code"] == "AccessDenied" and err["HeadersNotSigned"] == "x-amz-meta-foo"
    assert object_body(mode_s3, mode_bucket, "k") is None
    # An unsigned x-amz-date (the header form's time) is refused too.
    hdrs = sign_custom(mode_server, "PUT", target, body=b"data")
    auth = hdrs["Authorization"].replace("x-amz-content-sha256;x-amz-date",
                                         "x-amz-content-sha256")
    hdrs["Authorization"] = auth
    r = helpers.http_request(mode_server, "PUT", target, hdrs, b"data")
    assert r.status == 403 and error_of(r)["HeadersNotSigned"] == "x-amz-date", r
    # Signed, the same request works.
    hdrs = sign_custom(mode_server, "PUT", target, body=b"data",
                       headers={"x-amz-meta-foo": "signed"})
    r = helpers.http_request(mode_server, "PUT", target, hdrs, b"data")
    assert r.status == 200, r
    assert mode_s3.head_object(Bucket=mode_bucket, Key="k")["Metadata"] == {"foo": "signed"}


def test_signed_header_absent_or_repeated_is_refused(mode_server, mode_s3, mode_bucket):
    target = f"/{mode_bucket}/k"
    # Signed with an (empty) x-amz-meta-a that is then not sent.
    hdrs = sign_custom(mode_server, "PUT", target, body=b"data", headers={"x-amz-meta-a": ""})
    del hdrs["x-amz-meta-a"]
    r = helpers.http_request(mode_server, "PUT", target, hdrs, b"data")
    assert r.status == 403, r
    err = error_of(r)
    assert err["Code"] == "AccessDenied" and "x-amz-meta-a" in err["Message"]
    assert object_body(mode_s3, mode_bucket, "k") is None
    # A signed header sent twice: the signature covers "x,y" while the
    # server would read "x"; refused.
    hdrs = sign_custom(mode_server, "PUT", target, body=b"data",
                       headers={"x-amz-meta-a": "x,y"})
    del hdrs["x-amz-meta-a"]
    raw = helpers.request_bytes("PUT", target, hdrs, b"data")
    raw = raw.replace(b"\r\n\r\n", b"\r\nx-amz-meta-a: x\r\nx-amz-meta-a: y\r\n\r\n", 1)
    r = helpers.raw_exchange(mode_server.port, raw)
    assert r.status == 400, r
    err = error_of(r)
    assert err["Code"] == "InvalidArgument" and "x-amz-meta-a" in err["Message"]
    assert object_body(mode_s3, mode_bucket, "k") is None


def test_real_clients_still_work(mode_server, mode_s3, mode_bucket):
    """boto3 (header auth: it signs every header it sends), multipart,
    presigned GET/PUT without extra headers, and aws-chunked uploads."""
    md5 = base64.b64encode(hashlib.md5(b"x" * 1000).digest()).decode()
    extra = {"Tagging": "t=1"} if mode_server.mode == "sd" else {}
    mode_s3.put_object(Bucket=mode_bucket, Key="a", Body=b"x" * 1000, Metadata={"m": "1"},
                       ContentType="text/plain", ContentMD5=md5, **extra)
    h = mode_s3.head_object(Bucket=mode_bucket, Key="a")
    assert h["Metadata"] == {"m": "1"} and h["ContentLength"] == 1000
    assert mode_s3.get_object(Bucket=mode_bucket, Key="a")["Body"].read() == b"x" * 1000
    if mode_server.mode == "sd":  # CopyObject is not implemented with EC drives yet
        mode_s3.copy_object(Bucket=mode_bucket, Key="b",
                            CopySource={"Bucket": mode_bucket, "Key": "a"})
        assert mode_s3.get_object(Bucket=mode_bucket, Key="b")["Body"].read() == b"x" * 1000

    uid = mode_s3.create_multipart_upload(Bucket=mode_bucket, Key="mp")["UploadId"]
    part = b"p" * (5 * helpers.MIB)
    e1 = mode_s3.upload_part(Bucket=mode_bucket, Key="mp", UploadId=uid, PartNumber=1,
                             Body=part)["ETag"]
    e2 = mode_s3.upload_part(Bucket=mode_bucket, Key="mp", UploadId=uid, PartNumber=2,
                             Body=b"tail")["ETag"]
    mode_s3.complete_multipart_upload(
        Bucket=mode_bucket, Key="mp", UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert mode_s3.head_object(Bucket=mode_bucket, Key="mp")["ContentLength"] == len(part) + 4

    put = mode_s3.generate_presigned_url("put_object", Params={"Bucket": mode_bucket, "Key": "p"},
                                         ExpiresIn=300)
    r = helpers.url_request(put, "PUT", body=b"presigned", headers={"Content-Type": "text/x"})
    assert r.status == 200, r
    get = mode_s3.generate_presigned_url("get_object", Params={"Bucket": mode_bucket, "Key": "p"},
                                         ExpiresIn=300)
    r = helpers.url_request(get)
    assert r.status == 200 and r.body == b"presigned", r

    # aws-chunked, signed chunks: the SDKs sign x-amz-decoded-content-length
    # and content-encoding with the rest.
    data = bytes(range(256)) * 300
    amz_date = helpers.amz_now()
    target = f"/{mode_bucket}/chunked"
    length = helpers.aws_chunked_length(len(data))
    hdrs = {"Host": host_of(mode_server), "Content-Encoding": "aws-chunked",
            "x-amz-decoded-content-length": str(len(data)), "Content-Length": str(length)}
    hdrs, seed = helpers.sign_headers("PUT", target, hdrs, helpers.STREAMING_PAYLOAD,
                                      amz_date=amz_date)
    body = helpers.aws_chunked_body(data, seed, amz_date)
    r = helpers.http_request(mode_server, "PUT", target, hdrs, body)
    assert r.status == 200, r
    assert mode_s3.get_object(Bucket=mode_bucket, Key="chunked")["Body"].read() == data


# ---- item 8: the credential scope ----------------------------------------

SCOPE_CASES = [
    # (overrides, words the message must hold)
    ({"service": "ec2"}, ['incorrect service "ec2"', '"s3"']),
    ({"service": "S3"}, ['incorrect service "S3"']),
    ({"terminator": "aws4_reques"}, ['incorrect terminal "aws4_reques"', '"aws4_request"']),
    ({"date": "2013052"}, ['incorrect date format "2013052"']),
    ({"date": "20200101"}, ['Invalid credential date "20200101"', "X-Amz-Date"]),
    ({"region": "eu-west-1"}, ["the region 'eu-west-1' is wrong", "expecting 'us-east-1'"]),
]


@pytest.mark.parametrize("over,words", SCOPE_CASES)
def test_scope_header_form(mode_server, mode_bucket, over, words):
    target = f"/{mode_bucket}"
    hdrs = sign_custom(mode_server, "GET", target, **over)
    r = helpers.http_request(mode_server, "GET", target, hdrs)
    assert r.status == 400, r
    err = error_of(r)
    assert err["Code"] == "AuthorizationHeaderMalformed"
    assert err["Message"].startswith("The authorization header is malformed; "), err
    for w in words:
        assert w in err["Message"], err


@pytest.mark.parametrize("over,words", SCOPE_CASES)
def test_scope_presigned_form(mode_server, mode_bucket, over, words):
    target = presign_custom(mode_server, "GET", f"/{mode_bucket}", **over)
    r = helpers.http_request(mode_server, "GET", target)
    assert r.status == 400, r
    err = error_of(r)
    assert err["Code"] == "AuthorizationQueryParametersError"
    assert err["Message"].startswith("Error parsing the X-Amz-Credential parameter; "), err
    for w in words:
        assert w in err["Message"], err


def test_scope_correct_in_both_forms(mode_server, mode_bucket):
    target = f"/{mode_bucket}"
    r = helpers.http_request(mode_server, "GET", target, sign_custom(mode_server, "GET", target))
    assert r.status == 200, r
    r = helpers.http_request(mode_server, "GET", presign_custom(mode_server, "GET", target))
    assert r.status == 200, r


# ---- item 9: what a signed query means -----------------------------------

KEYS = ["a+b/1", "a b/1", "a+b c", "a%2Bb", "ab/1", "a++b"]


@pytest.fixture
def plus_bucket(mode_s3, mode_bucket):
    for k in KEYS:
        mode_s3.put_object(Bucket=mode_bucket, Key=k, Body=k.encode())
    return mode_bucket


def listed(resp):
    assert resp.status == 200, resp
    keys = helpers.xml_find_all(resp.body, "Key")
    if helpers.xml_find_all(resp.body, "EncodingType") == ["url"]:
        keys = [urllib.parse.unquote(k) for k in keys]
    return sorted(keys)


def test_presigned_plus_tamper_is_refused(mode_server, mode_s3, plus_bucket):
    url = mode_s3.generate_presigned_url(
        "list_objects_v2", Params={"Bucket": plus_bucket, "Prefix": "a+b"}, ExpiresIn=300)
    assert "prefix=a%2Bb" in url
    assert listed(helpers.url_request(url)) == ["a+b c", "a+b/1"]
    # Same signature, "+" for "%2B": the router reads "a b", which was not signed.
    tampered = url.replace("prefix=a%2Bb", "prefix=a+b")
    r = helpers.url_request(tampered)
    assert r.status == 403, r
    assert error_of(r)["Code"] == "SignatureDoesNotMatch"
    # "%20" and "+" are one space: swapping them keeps both the meaning and
    # the signature.
    url = mode_s3.generate_presigned_url(
        "list_objects_v2", Params={"Bucket": plus_bucket, "Prefix": "a b"}, ExpiresIn=300)
    assert "prefix=a%20b" in url
    assert listed(helpers.url_request(url)) == ["a b/1"]
    assert listed(helpers.url_request(url.replace("prefix=a%20b", "prefix=a+b"))) == ["a b/1"]


def test_header_signed_plus_means_space(mode_server, plus_bucket):
    for raw, want in [("a+b", ["a b/1"]), ("a%2Bb", ["a+b c", "a+b/1"]),
                      ("a%2B%2Bb", ["a++b"]), ("a%252Bb", ["a%2Bb"])]:
        target = f"/{plus_bucket}?list-type=2&prefix={raw}"
        r = helpers.http_request(mode_server, "GET", target, sign_custom(mode_server, "GET", target))
        assert listed(r) == want, raw


def test_boto3_prefixes_with_plus_and_space(mode_s3, plus_bucket):
    for prefix, want in [("a+b", ["a+b c", "a+b/1"]), ("a b", ["a b/1"]), ("a+b c", ["a+b c"]),
                         ("a%2B", ["a%2Bb"]), ("a++", ["a++b"])]:
        v2 = mode_s3.list_objects_v2(Bucket=plus_bucket, Prefix=prefix)
        assert sorted(o["Key"] for o in v2.get("Contents", [])) == want, prefix
        v1 = mode_s3.list_objects(Bucket=plus_bucket, Prefix=prefix)
        assert sorted(o["Key"] for o in v1.get("Contents", [])) == want, prefix
    v2 = mode_s3.list_objects_v2(Bucket=plus_bucket, Prefix="a", Delimiter="+")
    assert [p["Prefix"] for p in v2["CommonPrefixes"]] == ["a+"]
    assert sorted(o["Key"] for o in v2["Contents"]) == ["a b/1", "a%2Bb", "ab/1"]


def test_aws_cli_prefixes_with_plus_and_space(mode_server, plus_bucket, tmp_path):
    if not helpers.aws_binary():
        pytest.skip("no aws CLI")
    aws = helpers.aws_runner(mode_server.endpoint, tmp_path)
    for prefix, want in [("a+b", ["a+b c", "a+b/1"]), ("a b", ["a b/1"]), ("a+b c", ["a+b c"])]:
        p = aws("s3api", "list-objects-v2", "--bucket", plus_bucket, "--prefix", prefix)
        got = sorted(o["Key"] for o in json.loads(p.stdout or "{}").get("Contents", []))
        assert got == want, (prefix, p.stdout)
    p = aws("s3", "ls", f"s3://{plus_bucket}/a+b")
    assert "a+b c" in p.stdout and "a+b/" in p.stdout and "a b/" not in p.stdout, p.stdout
    p = aws("s3", "ls", f"s3://{plus_bucket}/a b/")
    assert p.stdout.split()[-1] == "1", p.stdout
    dest = tmp_path / "out"
    aws("s3", "cp", f"s3://{plus_bucket}/a+b c", str(dest))
    assert dest.read_bytes() == b"a+b c"


def test_repeated_or_nul_query_parameters_are_refused(mode_server, plus_bucket):
    # Signed as a set, read as "the first": reordering copies would change
    # the meaning without touching the signature.
    for query in ["list-type=2&prefix=a&prefix=ab", "list-type=2&prefix=a&pre%66ix=ab",
                  "list-type=2&prefix%00=a"]:
        target = f"/{plus_bucket}?{query}"
        r = helpers.http_request(mode_server, "GET", target, sign_custom(mode_server, "GET", target))
        assert r.status == 400, (query, r)
        assert error_of(r)["Code"] == "InvalidArgument"


@pytest.mark.parametrize("expires,status,code,message", [
    # Zero is over as soon as it is signed.
    ("0", 403, "AccessDenied", "Request has expired"),
    # Out of range: S3 answers these with AuthorizationQueryParametersError.
    ("604801", 400, "AuthorizationQueryParametersError",
     "X-Amz-Expires must be less than a week (in seconds); that is, the given "
     "X-Amz-Expires must be less than 604800 seconds"),
    ("99999999999", 400, "AuthorizationQueryParametersError",
     "X-Amz-Expires must be less than a week (in seconds); that is, the given "
     "X-Amz-Expires must be less than 604800 seconds"),
    ("-7", 400, "AuthorizationQueryParametersError", "X-Amz-Expires must be non-negative"),
])
def test_presigned_expires_bounds(mode_server, mode_s3, mode_bucket, expires, status, code,
                                  message):
    mode_s3.put_object(Bucket=mode_bucket, Key="exp", Body=b"e")
    path = f"/{mode_bucket}/exp"
    r = helpers.http_request(mode_server, "GET", presign_custom(mode_server, "GET", path,
                                                                 expires=expires))
    assert r.status == status, r
    err = error_of(r)
    assert (err["Code"], err["Message"]) == (code, message)
    # The week itself is allowed.
    r = helpers.http_request(mode_server, "GET", presign_custom(mode_server, "GET", path,
                                                                 expires=604800))
    assert r.status == 200, r
