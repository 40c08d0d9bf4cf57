"""Object-level S3 features: DeleteObjects, conditional reads and writes,
additional checksums, response overrides, range edge cases, GET ?partNumber=,
and the reaper of abandoned multipart uploads."""

import base64
import hashlib
import os
import subprocess
import sys
import threading
import time
import zlib
from email.utils import formatdate

import pytest
from botocore.exceptions import ClientError

import helpers
from helpers import error_code, http_status, make_client, signed_request

HERE = os.path.dirname(os.path.abspath(__file__))
MIB = 1024 * 1024
SERVER_CONFIG = {"min_part_bytes": "5242880"}


def b64(b):
    return base64.b64encode(b).decode()


def crc32_b64(data):
    return b64(zlib.crc32(data).to_bytes(4, "big"))


def crc64nvme(data):
    poly = 0x9a6c9329ac4bc9b5
    c = (1 << 64) - 1
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
    return c ^ ((1 << 64) - 1)


def add_headers(client, op, headers):
    """Adds raw headers to one operation of a client (boto3 1.26 lacks some
    parameters, e.g. IfNoneMatch on PutObject)."""
    def hook(request, **kw):
        for k, v in headers.items():
            request.headers[k] = v
    client.meta.events.register(f"before-sign.s3.{op}", hook)
    return hook


def put_with(server, bucket, key, body, headers):
    """PUT signed by the helpers' signer, with extra headers."""
    return signed_request(server, "PUT", f"/{bucket}/{key}", body=body, headers=headers)


# ---- DeleteObjects ----

def test_delete_objects(s3, bucket):
    for i in range(5):
        s3.put_object(Bucket=bucket, Key=f"k{i}", Body=b"x")
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [
        {"Key": "k0"}, {"Key": "k1"}, {"Key": "missing"}]})
    assert sorted(d["Key"] for d in r["Deleted"]) == ["k0", "k1", "missing"]
    assert not r.get("Errors")
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert left == ["k2", "k3", "k4"]
    r = s3.delete_objects(Bucket=bucket, Delete={"Quiet": True, "Objects": [
        {"Key": "k2"}, {"Key": "k3", "VersionId": "v-unknown"}]})
    assert not r.get("Deleted")
    assert [(e["Key"], e["Code"]) for e in r["Errors"]] == [("k3", "NoSuchVersion")]
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["k3", "k4"]


def test_delete_objects_limits(s3, bucket, server):
    with pytest.raises(ClientError) as e:
        s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"k{i}"}
                                                              for i in range(1001)]})
    assert error_code(e.value) == "MalformedXML"
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": f"k{i}"}
                                                              for i in range(1000)]})
    assert len(r["Deleted"]) == 1000
    with pytest.raises(ClientError) as e:
        s3.delete_objects(Bucket="no-such-bucket-xyz", Delete={"Objects": [{"Key": "a"}]})
    assert error_code(e.value) == "NoSuchBucket"
    body = b"<Delete><Object><Key>a</Key></Object></Delete>"
    bad = b64(hashlib.md5(b"other").digest())
    r = signed_request(server, "POST", f"/{bucket}?delete", body=body,
                       headers={"Content-MD5": bad})
    assert r.status == 400 and b"BadDigest" in r.body
    r = signed_request(server, "POST", f"/{bucket}?delete", body=body,
                       headers={"x-amz-checksum-crc32": crc32_b64(body)})
    assert r.status == 200 and b"<Deleted>" in r.body
    r = signed_request(server, "POST", f"/{bucket}?delete", body=body)
    assert r.status == 200
    r = signed_request(server, "POST", f"/{bucket}?delete", body=b"<Delete>oops")
    assert r.status == 400 and b"MalformedXML" in r.body


# ---- conditional reads ----

def test_conditional_get_head(s3, bucket):
    s3.put_object(Bucket=bucket, Key="c", Body=b"hello")
    h = s3.head_object(Bucket=bucket, Key="c")
    etag, lm = h["ETag"], h["LastModified"]
    past, future = lm.timestamp() - 3600, lm.timestamp() + 3600
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag)["Body"].read() == b"hello"
    assert s3.get_object(Bucket=bucket, Key="c", IfMatch=etag.strip('"'))["ETag"] == etag
    s3.get_object(Bucket=bucket, Key="c", IfMatch="*")
    for op in (s3.get_object, s3.head_object):
        with pytest.raises(ClientError) as e:
            op(Bucket=bucket, Key="c", IfMatch='"0000"')
        assert http_status(e.value) == 412
        with pytest.raises(ClientError) as e:
            op(Bucket=bucket, Key="c", IfNoneMatch=etag)
        assert http_status(e.value) == 304
        with pytest.raises(ClientError) as e:
            op(Bucket=bucket, Key="c", IfNoneMatch="*")
        assert http_status(e.value) == 304
        with pytest.raises(ClientError) as e:
            op(Bucket=bucket, Key="c", IfModifiedSince=future)
        assert http_status(e.value) == 304
        with pytest.raises(ClientError) as e:
            op(Bucket=bucket, Key="c", IfUnmodifiedSince=past)
        assert http_status(e.value) == 412
        op(Bucket=bucket, Key="c", IfModifiedSince=past)
        op(Bucket=bucket, Key="c", IfUnmodifiedSince=future)
        # If-Match true wins over If-Unmodified-Since false.
        op(Bucket=bucket, Key="c", IfMatch=etag, IfUnmodifiedSince=past)
        # If-None-Match false (matches) with If-Modified-Since true: 304.
        with pytest.raises(ClientError) as e:
            op(Bucket=bucket, Key="c", IfNoneMatch=etag, IfModifiedSince=past)
        assert http_status(e.value) == 304
        # If-None-Match true (no match) makes If-Modified-Since irrelevant.
        op(Bucket=bucket, Key="c", IfNoneMatch='"other"', IfModifiedSince=future)


def test_not_modified_raw(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="n", Body=b"data")
    etag = s3.head_object(Bucket=bucket, Key="n")["ETag"]
    r = signed_request(server, "GET", f"/{bucket}/n", headers={"If-None-Match": etag})
    assert r.status == 304 and r.body == b""
    assert r.header("ETag") == etag and r.header("Last-Modified")
    r = signed_request(server, "GET", f"/{bucket}/n",
                       headers={"If-None-Match": f'"x", {etag}'})
    assert r.status == 304


# ---- conditional writes ----

def test_put_if_none_match_race(server, bucket):
    key = "race"
    results = []
    barrier = threading.Barrier(16)

    def worker(i):
        c = make_client(server.endpoint)
        add_headers(c, "PutObject", {"If-None-Match": "*"})
        barrier.wait()
        try:
            c.put_object(Bucket=bucket, Key=key, Body=f"writer {i}".encode())
            results.append(200)
        except ClientError as e:
            results.append(http_status(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200] + [412] * 15


def test_put_if_match_cas(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="cas", Body=b"v1")
    e1 = s3.head_object(Bucket=bucket, Key="cas")["ETag"]
    r = put_with(server, bucket, "cas", b"v2", {"If-Match": e1})
    assert r.status == 200
    e2 = r.header("ETag")
    r = put_with(server, bucket, "cas", b"v3", {"If-Match": e1})
    assert r.status == 412 and b"PreconditionFailed" in r.body
    assert s3.get_object(Bucket=bucket, Key="cas")["Body"].read() == b"v2"
    r = put_with(server, bucket, "cas", b"v3", {"If-Match": e2.strip('"')})
    assert r.status == 200
    r = put_with(server, bucket, "nothere", b"x", {"If-Match": e2})
    assert r.status == 404 and b"NoSuchKey" in r.body
    r = put_with(server, bucket, "cas", b"x", {"If-None-Match": e2})
    assert r.status == 501
    r = put_with(server, bucket, "cas", b"x", {"If-None-Match": "*"})
    assert r.status == 412


def _mpu(s3, bucket, key, parts, **create):
    up = s3.create_multipart_upload(Bucket=bucket, Key=key, **create)["UploadId"]
    done = []
    for i, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=i, Body=data)
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    return up, done


def test_complete_conditional(s3, bucket):
    parts = [os.urandom(5 * MIB), b"tail"]
    up, done = _mpu(s3, bucket, "mc", parts)
    hook = add_headers(s3, "CompleteMultipartUpload", {"If-None-Match": "*"})
    try:
        s3.complete_multipart_upload(Bucket=bucket, Key="mc", UploadId=up,
                                     MultipartUpload={"Parts": done})
        up2, done2 = _mpu(s3, bucket, "mc", parts)
        with pytest.raises(ClientError) as e:
            s3.complete_multipart_upload(Bucket=bucket, Key="mc", UploadId=up2,
                                         MultipartUpload={"Parts": done2})
        assert http_status(e.value) == 412
    finally:
        s3.meta.events.unregister("before-sign.s3.CompleteMultipartUpload", hook)
    # The upload survives a failed precondition; If-Match with the current ETag wins.
    etag = s3.head_object(Bucket=bucket, Key="mc")["ETag"]
    hook = add_headers(s3, "CompleteMultipartUpload", {"If-Match": etag})
    try:
        r = s3.complete_multipart_upload(Bucket=bucket, Key="mc", UploadId=up2,
                                         MultipartUpload={"Parts": done2})
        assert r["ETag"] == helpers.multipart_etag(parts)
    finally:
        s3.meta.events.unregister("before-sign.s3.CompleteMultipartUpload", hook)
    up2 = None


# ---- checksums ----

def test_put_checksums(server, s3, bucket):
    data = os.urandom(300 * 1024)
    algos = {
        "crc32": zlib.crc32(data).to_bytes(4, "big"),
        "crc64nvme": crc64nvme(data[:1000]).to_bytes(8, "big"),
        "sha1": hashlib.sha1(data).digest(),
        "sha256": hashlib.sha256(data).digest(),
    }
    for name, digest in algos.items():
        body = data[:1000] if name == "crc64nvme" else data
        key = f"ck-{name}"
        r = put_with(server, bucket, key, body, {f"x-amz-checksum-{name}": b64(digest)})
        assert r.status == 200, r.body
        assert r.header(f"x-amz-checksum-{name}") == b64(digest)
        plain = signed_request(server, "HEAD", f"/{bucket}/{key}")
        assert plain.header(f"x-amz-checksum-{name}") is None
        assert not any(k.startswith(":") for k in plain.headers)
        got = signed_request(server, "GET", f"/{bucket}/{key}",
                             headers={"x-amz-checksum-mode": "ENABLED"})
        assert got.header(f"x-amz-checksum-{name}") == b64(digest)
        assert got.body == body
        ranged = signed_request(server, "GET", f"/{bucket}/{key}",
                                headers={"x-amz-checksum-mode": "ENABLED", "Range": "bytes=0-9"})
        assert ranged.status == 206 and ranged.header(f"x-amz-checksum-{name}") is None
        wrong = bytes(len(digest))
        r = put_with(server, bucket, key + "-bad", body, {f"x-amz-checksum-{name}": b64(wrong)})
        assert r.status == 400 and b"BadDigest" in r.body
        assert f"x-amz-checksum-{name} you specified did not match".encode() in r.body
    # crc32c through boto3 1.26's own parameter
    s3.put_object(Bucket=bucket, Key="c32c", Body=b"123456789", ChecksumAlgorithm="CRC32C")
    h = s3.head_object(Bucket=bucket, Key="c32c", ChecksumMode="ENABLED")
    assert h["ChecksumCRC32C"] == b64(bytes.fromhex("e3069283"))
    r = put_with(server, bucket, "bad", b"x", {"x-amz-checksum-crc32": "not-base64!"})
    assert r.status == 400 and b"InvalidRequest" in r.body
    r = put_with(server, bucket, "bad", b"x", {"x-amz-checksum-crc32": crc32_b64(b"x"),
                                                "x-amz-checksum-sha1": b64(bytes(20))})
    assert r.status == 400 and b"InvalidRequest" in r.body
    r = put_with(server, bucket, "bad", b"x", {"Content-MD5": "short"})
    assert r.status == 400 and b"InvalidDigest" in r.body
    r = put_with(server, bucket, "bad", b"x", {"Content-MD5": b64(hashlib.md5(b"y").digest())})
    assert r.status == 400 and b"BadDigest" in r.body


def test_multipart_checksums(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), b"tail-bytes"]
    whole = b"".join(parts)
    # COMPOSITE SHA256 through boto3 1.26 (which sends the part checksums).
    up = s3.create_multipart_upload(Bucket=bucket, Key="comp",
                                    ChecksumAlgorithm="SHA256")["UploadId"]
    done = []
    for i, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="comp", UploadId=up, PartNumber=i, Body=data,
                           ChecksumAlgorithm="SHA256")
        assert r["ChecksumSHA256"] == b64(hashlib.sha256(data).digest())
        done.append({"PartNumber": i, "ETag": r["ETag"], "ChecksumSHA256": r["ChecksumSHA256"]})
    lp = s3.list_parts(Bucket=bucket, Key="comp", UploadId=up)
    assert [p["ChecksumSHA256"] for p in lp["Parts"]] == [d["ChecksumSHA256"] for d in done]
    assert [p["ETag"] for p in lp["Parts"]] == [d["ETag"] for d in done]
    r = s3.complete_multipart_upload(Bucket=bucket, Key="comp", UploadId=up,
                                     MultipartUpload={"Parts": done})
    comp = hashlib.sha256(b"".join(hashlib.sha256(p).digest() for p in parts)).digest()
    want = f"{b64(comp)}-3"
    assert r["ChecksumSHA256"] == want
    assert r["ETag"] == helpers.multipart_etag(parts)
    h = s3.head_object(Bucket=bucket, Key="comp", ChecksumMode="ENABLED")
    assert h["ChecksumSHA256"] == want
    # A part without a checksum header still gets one computed (the upload's algorithm).
    up = s3.create_multipart_upload(Bucket=bucket, Key="full", ChecksumAlgorithm="CRC32")
    up = up["UploadId"]
    done = []
    for i, data in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key="full", UploadId=up, PartNumber=i, Body=data)
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    r = s3.complete_multipart_upload(Bucket=bucket, Key="full", UploadId=up,
                                     MultipartUpload={"Parts": done})
    comp = zlib.crc32(b"".join(zlib.crc32(p).to_bytes(4, "big") for p in parts))
    assert r["ChecksumCRC32"] == f"{b64(comp.to_bytes(4, 'big'))}-3"


def test_multipart_full_object_crc(server, s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB + 17), b"end"]
    whole = b"".join(parts)
    for algo, value in (("CRC32", zlib.crc32(whole).to_bytes(4, "big")),):
        add = add_headers(s3, "CreateMultipartUpload", {"x-amz-checksum-type": "FULL_OBJECT"})
        up = s3.create_multipart_upload(Bucket=bucket, Key="fo", ChecksumAlgorithm=algo)
        s3.meta.events.unregister("before-sign.s3.CreateMultipartUpload", add)
        up = up["UploadId"]
        done = []
        for i, data in enumerate(parts, 1):
            r = s3.upload_part(Bucket=bucket, Key="fo", UploadId=up, PartNumber=i, Body=data)
            done.append({"PartNumber": i, "ETag": r["ETag"]})
        r = s3.complete_multipart_upload(Bucket=bucket, Key="fo", UploadId=up,
                                         MultipartUpload={"Parts": done})
        assert r[f"Checksum{algo}"] == b64(value)
        g = signed_request(server, "HEAD", f"/{bucket}/fo",
                           headers={"x-amz-checksum-mode": "ENABLED"})
        assert g.header("x-amz-checksum-type") == "FULL_OBJECT"
    # CRC64NVME defaults to FULL_OBJECT.
    small = [os.urandom(5 * MIB), b"z" * 100]
    up = signed_request(server, "POST", f"/{bucket}/nv?uploads",
                        headers={"x-amz-checksum-algorithm": "CRC64NVME"})
    assert up.header("x-amz-checksum-type") == "FULL_OBJECT"
    up_id = helpers.xml_find_all(up.body, "UploadId")[0]
    done = []
    for i, data in enumerate(small, 1):
        r = signed_request(server, "PUT", f"/{bucket}/nv?partNumber={i}&uploadId={up_id}",
                           body=data)
        assert r.status == 200
        done.append((i, r.header("ETag")))
    doc = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{i}</PartNumber><ETag>{e}</ETag></Part>" for i, e in done) + \
        "</CompleteMultipartUpload>"
    r = signed_request(server, "POST", f"/{bucket}/nv?uploadId={up_id}", body=doc.encode())
    assert r.status == 200, r.body
    want = b64(crc64nvme(b"".join(small)).to_bytes(8, "big"))
    assert helpers.xml_find_all(r.body, "ChecksumCRC64NVME") == [want]


# ---- overrides, HEAD, ranges ----

def test_response_overrides(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"body", ContentType="text/plain")
    r = s3.get_object(Bucket=bucket, Key="o", ResponseContentType="application/json",
                      ResponseContentDisposition='attachment; filename="x.json"',
                      ResponseContentEncoding="identity", ResponseContentLanguage="fr",
                      ResponseCacheControl="no-cache",
                      ResponseExpires=formatdate(0, usegmt=True))
    h = r["ResponseMetadata"]["HTTPHeaders"]
    assert h["content-type"] == "application/json"
    assert h["content-disposition"] == 'attachment; filename="x.json"'
    assert h["content-encoding"] == "identity"
    assert h["content-language"] == "fr"
    assert h["cache-control"] == "no-cache"
    assert "1970" in h["expires"]
    assert r["Body"].read() == b"body"


def test_head_and_ranges(server, s3, bucket):
    data = bytes(range(256)) * 4
    s3.put_object(Bucket=bucket, Key="r", Body=data)
    r = signed_request(server, "HEAD", f"/{bucket}/r")
    assert r.status == 200 and r.body == b"" and r.header("Content-Length") == str(len(data))
    r = s3.get_object(Bucket=bucket, Key="r", Range="bytes=0-0")
    assert r["Body"].read() == data[:1] and r["ContentRange"] == f"bytes 0-0/{len(data)}"
    r = s3.get_object(Bucket=bucket, Key="r", Range="bytes=-5000")
    assert r["Body"].read() == data
    r = signed_request(server, "GET", f"/{bucket}/r", headers={"Range": "bytes=5000-"})
    assert r.status == 416 and b"InvalidRange" in r.body
    assert r.header("Content-Range") == f"bytes */{len(data)}"
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="r", Range=f"bytes={len(data)}-{len(data) + 5}")
    assert http_status(e.value) == 416


def test_get_part_number(server, s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), b"last-part"]
    up, done = _mpu(s3, bucket, "pn", parts)
    s3.complete_multipart_upload(Bucket=bucket, Key="pn", UploadId=up,
                                 MultipartUpload={"Parts": done})
    off = 0
    total = sum(len(p) for p in parts)
    for i, p in enumerate(parts, 1):
        r = s3.get_object(Bucket=bucket, Key="pn", PartNumber=i)
        assert r["Body"].read() == p
        assert r["PartsCount"] == 3
        assert r["ContentRange"] == f"bytes {off}-{off + len(p) - 1}/{total}"
        h = s3.head_object(Bucket=bucket, Key="pn", PartNumber=i)
        assert h["ContentLength"] == len(p) and h["PartsCount"] == 3
        off += len(p)
    # Past the last part: 400 InvalidPartNumber, for GET and HEAD, and for
    # part 2 of a single-part object.
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="pn", PartNumber=4)
    assert http_status(e.value) == 400
    assert e.value.response["Error"]["Code"] == "InvalidPartNumber"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="pn", PartNumber=4)
    assert http_status(e.value) == 400
    s3.put_object(Bucket=bucket, Key="single", Body=b"abc")
    r = signed_request(server, "GET", f"/{bucket}/single?partNumber=2")
    assert r.status == 400 and b"<Code>InvalidPartNumber</Code>" in r.body, r
    assert s3.get_object(Bucket=bucket, Key="single", PartNumber=1)["Body"].read() == b"abc"
    r = signed_request(server, "GET", f"/{bucket}/pn?partNumber=1", headers={"Range": "bytes=0-1"})
    assert r.status == 400


# ---- the reaper ----

def test_upload_reaper(make_server):
    srv = make_server(config={"multipart_expiry_sec": "2", "multipart_reap_interval_ms": "500"})
    c = make_client(srv.endpoint)
    c.create_bucket(Bucket="reap")
    old = c.create_multipart_upload(Bucket="reap", Key="a")["UploadId"]
    c.upload_part(Bucket="reap", Key="a", UploadId=old, PartNumber=1, Body=b"x" * 100)
    deadline = time.time() + 20
    while time.time() < deadline:
        if not c.list_multipart_uploads(Bucket="reap").get("Uploads"):
            break
        time.sleep(0.5)
    assert not c.list_multipart_uploads(Bucket="reap").get("Uploads")
    fresh = c.create_multipart_upload(Bucket="reap", Key="b")["UploadId"]
    ups = c.list_multipart_uploads(Bucket="reap").get("Uploads", [])
    assert [u["UploadId"] for u in ups] == [fresh]


# ---- the new SDK ----

def test_sdk_new_checksums(server):
    py = "/root/.pyenv/shims/python3"
    if not os.path.exists(py):
        pytest.skip("no image python3 with the new boto3")
    out = subprocess.run([py, os.path.join(HERE, "sdk_new_check.py"), server.endpoint,
                          helpers.ACCESS_KEY, helpers.SECRET_KEY],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
