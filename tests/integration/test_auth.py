"""Authentication: SigV4 headers, presigned URLs, aws-chunked streaming
signatures, users, and the admin endpoints."""

import os
import re
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h
from helpers import KIB


# -- anonymous and bad credentials -------------------------------------------

def test_anonymous_is_denied(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="secret", Body=b"s")
    for method, target in [("GET", "/"), ("GET", f"/{bucket}"), ("GET", f"/{bucket}/secret"),
                           ("GET", f"/{bucket}/missing"), ("DELETE", f"/{bucket}/secret")]:
        r = h.http_request(server, method, target)
        assert r.status == 403, (method, target, r)
        assert h.parse_error(r.body)["Code"] == "AccessDenied"
    r = h.http_request(server, "PUT", f"/{bucket}/anon", body=b"x")
    assert r.status == 403
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="anon")
    assert s3.get_object(Bucket=bucket, Key="secret")["Body"].read() == b"s"


def test_wrong_secret(server, s3, bucket):
    bad = h.make_client(server.endpoint, secret="not-the-secret")
    with pytest.raises(ClientError) as e:
        bad.list_buckets()
    assert h.error_code(e.value) == "SignatureDoesNotMatch"
    assert h.http_status(e.value) == 403
    with pytest.raises(ClientError) as e:
        bad.put_object(Bucket=bucket, Key="w", Body=b"x")
    assert h.error_code(e.value) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="w")


def test_unknown_access_key(server):
    bad = h.make_client(server.endpoint, access="nobody-knows-me", secret="whatever")
    with pytest.raises(ClientError) as e:
        bad.list_buckets()
    assert h.error_code(e.value) == "InvalidAccessKeyId"
    assert h.http_status(e.value) == 403


def test_tampered_signed_request(server, bucket):
    # A correctly signed request whose signed header is changed afterwards.
    target = f"/{bucket}/t"
    hdrs, _ = h.sign_headers("GET", target, {"Host": f"127.0.0.1:{server.port}",
                                             "Range": "bytes=0-1"}, h.EMPTY_SHA256)
    hdrs["Range"] = "bytes=0-2"
    r = h.http_request(server, "GET", target, hdrs)
    assert r.status == 403
    assert h.parse_error(r.body)["Code"] == "SignatureDoesNotMatch"


@pytest.mark.parametrize("auth", [
    "AWS4-HMAC-SHA256 garbage",
    "AWS4-HMAC-SHA256 Credential=openlake/20200101/us-east-1/s3/aws4_request",
    "Bearer abc",
])
def test_malformed_authorization(server, auth):
    hdrs = {"Authorization": auth, "x-amz-date": h.amz_now(),
            "x-amz-content-sha256": h.EMPTY_SHA256}
    r = h.http_request(server, "GET", "/", hdrs)
    assert r.status in (400, 403), r
    assert h.parse_error(r.body)["Code"] in (
        "AuthorizationHeaderMalformed", "AccessDenied", "InvalidArgument", "InvalidRequest",
        "SignatureDoesNotMatch", "NotImplemented")


def test_wrong_region_in_scope_is_refused(server):
    host = f"127.0.0.1:{server.port}"
    date = h.amz_now()
    hdrs, _ = h.sign_headers("GET", "/", {"Host": host}, h.EMPTY_SHA256, region="eu-west-1",
                             amz_date=date)
    r = h.http_request(server, "GET", "/", hdrs)
    assert r.status in (400, 403), r


@pytest.mark.parametrize("offset", [-20 * 60, 20 * 60])
def test_clock_skew(server, offset):
    r = h.signed_request(server, "GET", "/", amz_date=h.amz_now(offset))
    assert r.status == 403, r
    assert h.parse_error(r.body)["Code"] == "RequestTimeTooSkewed"


def test_small_skew_is_accepted(server):
    r = h.signed_request(server, "GET", "/", amz_date=h.amz_now(-60))
    assert r.status == 200, r


def test_own_signer_works(server, s3, bucket):
    # Sanity for the helpers used below: a hand-signed PUT and GET succeed.
    body = os.urandom(3000)
    r = h.signed_request(server, "PUT", f"/{bucket}/hand", body=body)
    assert r.status == 200, r
    assert r.header("etag") == f'"{h.md5_hex(body)}"'
    r = h.signed_request(server, "GET", f"/{bucket}/hand")
    assert r.status == 200 and r.body == body


# -- payload hash --------------------------------------------------------------

def test_payload_hash_mismatch(server, s3, bucket):
    target = f"/{bucket}/mismatch"
    signed_body = b"hello world, this is the body"
    sent_body = b"hello world, this is the bodY"
    hdrs = {"Host": f"127.0.0.1:{server.port}", "Content-Length": str(len(signed_body))}
    hdrs, _ = h.sign_headers("PUT", target, hdrs, h.sha256(signed_body))
    r = h.http_request(server, "PUT", target, hdrs, sent_body)
    assert r.status == 400, r
    assert h.parse_error(r.body)["Code"] == "XAmzContentSHA256Mismatch"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="mismatch")
    assert h.http_status(e.value) == 404


def test_unsigned_payload_header(server, s3, bucket):
    target = f"/{bucket}/unsigned"
    body = os.urandom(5000)
    hdrs = {"Host": f"127.0.0.1:{server.port}", "Content-Length": str(len(body))}
    hdrs, _ = h.sign_headers("PUT", target, hdrs, h.UNSIGNED_PAYLOAD)
    r = h.http_request(server, "PUT", target, hdrs, body)
    assert r.status == 200, r
    assert s3.get_object(Bucket=bucket, Key="unsigned")["Body"].read() == body


# -- aws-chunked streaming signatures -------------------------------------------

def _streaming_put(server, bucket, key, data, chunk=64 * KIB, tamper_chunk=None,
                   amz_date=None):
    target = f"/{bucket}/{key}"
    amz_date = amz_date or h.amz_now()
    hdrs = {
        "Host": f"127.0.0.1:{server.port}",
        "Content-Encoding": "aws-chunked",
        "Content-Length": str(h.aws_chunked_length(len(data), chunk)),
        "x-amz-decoded-content-length": str(len(data)),
        "Content-Type": "application/octet-stream",
    }
    hdrs, seed = h.sign_headers("PUT", target, hdrs, h.STREAMING_PAYLOAD, amz_date=amz_date)
    body = h.aws_chunked_body(data, seed, amz_date, chunk, tamper_chunk=tamper_chunk)
    assert len(body) == int(hdrs["Content-Length"])
    return h.raw_exchange(server.port, h.request_bytes("PUT", target, hdrs, body))


@pytest.mark.parametrize("size", [0, 100, 64 * KIB, 200 * KIB + 17])
def test_streaming_signed_upload(server, s3, bucket, size):
    data = os.urandom(size)
    r = _streaming_put(server, bucket, f"stream-{size}", data)
    assert r.status == 200, r
    assert r.header("etag") == f'"{h.md5_hex(data)}"'
    got = s3.get_object(Bucket=bucket, Key=f"stream-{size}")
    assert got["Body"].read() == data
    assert got["ContentLength"] == size
    # aws-chunked is a transfer detail, not the object's encoding.
    assert "aws-chunked" not in (got.get("ContentEncoding") or "")


@pytest.mark.parametrize("tamper", [0, 1, 3])
def test_streaming_tampered_chunk_signature(server, s3, bucket, tamper):
    # 150 KiB in 64 KiB chunks: chunks 0, 1, 2 carry data, 3 is the final one.
    data = os.urandom(150 * KIB)
    key = f"tampered-{tamper}"
    r = _streaming_put(server, bucket, key, data, tamper_chunk=tamper)
    assert r.status == 403, r
    assert h.parse_error(r.body)["Code"] == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key=key)
    assert h.http_status(e.value) == 404


def test_streaming_tampered_chunk_data(server, s3, bucket):
    # Correct signatures, but one data byte changed after signing.
    data = os.urandom(150 * KIB)
    target = f"/{bucket}/tampered-data"
    amz_date = h.amz_now()
    hdrs = {
        "Host": f"127.0.0.1:{server.port}",
        "Content-Encoding": "aws-chunked",
        "Content-Length": str(h.aws_chunked_length(len(data))),
        "x-amz-decoded-content-length": str(len(data)),
    }
    hdrs, seed = h.sign_headers("PUT", target, hdrs, h.STREAMING_PAYLOAD, amz_date=amz_date)
    body = bytearray(h.aws_chunked_body(data, seed, amz_date))
    body[100 * KIB] ^= 0xFF
    r = h.raw_exchange(server.port, h.request_bytes("PUT", target, hdrs, bytes(body)))
    assert r.status == 403, r
    assert h.parse_error(r.body)["Code"] == "SignatureDoesNotMatch"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="tampered-data")


def test_streaming_overwrite_keeps_old_on_failure(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="keep", Body=b"old")
    r = _streaming_put(server, bucket, "keep", os.urandom(150 * KIB), tamper_chunk=2)
    assert r.status == 403
    assert s3.get_object(Bucket=bucket, Key="keep")["Body"].read() == b"old"


# -- presigned URLs ---------------------------------------------------------------

def test_presigned_get(server, s3, bucket):
    data = os.urandom(10 * KIB)
    s3.put_object(Bucket=bucket, Key="pre sign/d", Body=data)
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "pre sign/d"},
                                    ExpiresIn=300)
    r = h.url_request(url)
    assert r.status == 200, r
    assert r.body == data
    # A changed signature is refused.
    bad = re.sub(r"X-Amz-Signature=([0-9a-f])",
                 lambda m: "X-Amz-Signature=" + ("1" if m.group(1) == "0" else "0"), url)
    r = h.url_request(bad)
    assert r.status == 403
    assert h.parse_error(r.body)["Code"] == "SignatureDoesNotMatch"
    # The URL is for GET only: the method is part of the signature.
    r = h.url_request(url, method="DELETE")
    assert r.status == 403
    assert s3.head_object(Bucket=bucket, Key="pre sign/d")["ContentLength"] == len(data)


def test_presigned_put(server, s3, bucket):
    url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "pp"},
                                    ExpiresIn=300)
    data = os.urandom(70 * KIB)
    r = h.url_request(url, method="PUT", body=data)
    assert r.status == 200, r
    assert s3.get_object(Bucket=bucket, Key="pp")["Body"].read() == data


def test_presigned_expired(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="exp", Body=b"e")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "exp"},
                                    ExpiresIn=1)
    time.sleep(2.2)
    r = h.url_request(url)
    assert r.status == 403, r
    assert h.parse_error(r.body)["Code"] == "AccessDenied"


# -- users ------------------------------------------------------------------------

def test_configured_users(make_server):
    srv = make_server(config=[("user", "alice", "alice-secret-1"),
                              ("user", "bob", "bob-secret-2")])
    alice = h.make_client(srv.endpoint, "alice", "alice-secret-1")
    bob = h.make_client(srv.endpoint, "bob", "bob-secret-2")
    alice.create_bucket(Bucket="shared-a")
    alice.put_object(Bucket="shared-a", Key="k", Body=b"from alice")
    bob.create_bucket(Bucket="shared-b")
    bob.put_object(Bucket="shared-b", Key="k", Body=b"from bob")
    assert bob.get_object(Bucket="shared-b", Key="k")["Body"].read() == b"from bob"
    assert alice.get_object(Bucket="shared-a", Key="k")["Body"].read() == b"from alice"
    # Each user's secret is its own.
    with pytest.raises(ClientError) as e:
        h.make_client(srv.endpoint, "alice", "bob-secret-2").list_buckets()
    assert h.error_code(e.value) == "SignatureDoesNotMatch"
    # The default credentials exist only when no user is configured.
    with pytest.raises(ClientError) as e:
        h.make_client(srv.endpoint).list_buckets()
    assert h.error_code(e.value) == "InvalidAccessKeyId"


# -- admin endpoints -----------------------------------------------------------------

METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)( -?\d+)?$")


def _check_prometheus(text):
    samples = 0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = METRIC_LINE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        float(m.group(3))  # NaN, +Inf and -Inf parse too
        samples += 1
    assert samples > 0, "no samples in metrics output"


def test_admin_endpoints_need_auth(server):
    for path in ("/_openlake/health", "/_openlake/metrics"):
        r = h.http_request(server, "GET", path)
        assert r.status == 403, (path, r)
        assert h.parse_error(r.body)["Code"] == "AccessDenied"
    r = h.signed_request(server, "GET", "/_openlake/health")
    assert r.status == 200, r
    assert r.body.strip() == b"ok"
    r = h.signed_request(server, "GET", "/_openlake/metrics")
    assert r.status == 200, r
    _check_prometheus(r.body.decode())
    r = h.signed_request(server, "GET", "/_openlake/metrics", secret="wrong")
    assert r.status == 403


def test_admin_endpoints_public(make_server):
    srv = make_server(config={"health_public": "yes", "metrics_public": "yes"})
    r = h.http_request(srv, "GET", "/_openlake/health")
    assert r.status == 200 and r.body.strip() == b"ok"
    r = h.http_request(srv, "GET", "/_openlake/metrics")
    assert r.status == 200
    _check_prometheus(r.body.decode())
    # Public admin endpoints do not open S3 to anonymous users.
    r = h.http_request(srv, "GET", "/")
    assert r.status == 403
