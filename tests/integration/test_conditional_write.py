"""Conditional writes (If-None-Match: * and If-Match on PutObject and
CompleteMultipartUpload), checked inside the store's commit: racing writers
cannot both pass."""

import concurrent.futures
import threading

import helpers as h
from helpers import KIB, MIB


def _put(server, bucket, key, body, **headers):
    return h.signed_request(server, "PUT", f"/{bucket}/{key}", body=body, headers=headers)


def test_create_only_race(server, s3, bucket):
    for rnd in range(3):
        key = f"race{rnd}"
        bodies = [bytes([65 + i]) * (300 * KIB if i % 2 else 1000) for i in range(8)]
        barrier = threading.Barrier(8)

        def one(i):
            barrier.wait()
            return _put(server, bucket, key, bodies[i], **{"If-None-Match": "*"}).status

        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            statuses = list(ex.map(one, range(8)))
        assert sorted(statuses) == [200] + [412] * 7, statuses
        winner = statuses.index(200)
        assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == bodies[winner]


def test_if_match(server, s3, bucket):
    r = _put(server, bucket, "m", b"one")
    assert r.status == 200
    etag = r.header("etag")
    assert _put(server, bucket, "m", b"two", **{"If-Match": '"nope"'}).status == 412
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == b"one"
    assert _put(server, bucket, "m", b"two", **{"If-Match": etag}).status == 200
    assert s3.get_object(Bucket=bucket, Key="m")["Body"].read() == b"two"
    # The old etag no longer matches.
    assert _put(server, bucket, "m", b"three", **{"If-Match": etag}).status == 412
    r = _put(server, bucket, "absent", b"x", **{"If-Match": etag})
    assert r.status == 404
    assert h.parse_error(r.body)["Code"] == "NoSuchKey"
    assert _put(server, bucket, "m", b"x", **{"If-None-Match": "*"}).status == 412


def test_complete_multipart_create_only(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="exists", Body=b"old")
    uid = s3.create_multipart_upload(Bucket=bucket, Key="exists")["UploadId"]
    p = s3.upload_part(Bucket=bucket, Key="exists", UploadId=uid, PartNumber=1, Body=b"new")
    doc = (f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
           f"<ETag>{p['ETag']}</ETag></Part></CompleteMultipartUpload>").encode()
    target = f"/{bucket}/exists?uploadId={uid}"
    r = h.signed_request(server, "POST", target, body=doc, headers={"If-None-Match": "*"})
    assert r.status == 412, r
    assert s3.get_object(Bucket=bucket, Key="exists")["Body"].read() == b"old"
    etag = s3.head_object(Bucket=bucket, Key="exists")["ETag"]
    r = h.signed_request(server, "POST", target, body=doc, headers={"If-Match": etag})
    assert r.status == 200, r
    assert s3.get_object(Bucket=bucket, Key="exists")["Body"].read() == b"new"


def test_failed_conditional_put_leaves_no_space(make_server):
    srv = make_server(config={"segment_bytes": 8 * MIB, "compact_interval_ms": 300})
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="cwb")
    s3.put_object(Bucket="cwb", Key="k", Body=b"small")
    for _ in range(4):
        r = _put(srv, "cwb", "k", b"z" * (4 * MIB), **{"If-None-Match": "*"})
        assert r.status == 412
    assert s3.get_object(Bucket="cwb", Key="k")["Body"].read() == b"small"


def test_if_match_star(server, s3, bucket):
    # If-Match: * wants any current object: 404 NoSuchKey when there is none
    # (nothing written), a plain overwrite when there is one.
    r = _put(server, bucket, "star", b"x", **{"If-Match": "*"})
    assert r.status == 404, r
    assert h.parse_error(r.body)["Code"] == "NoSuchKey"
    assert "star" not in [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
    assert _put(server, bucket, "star", b"one").status == 200
    assert _put(server, bucket, "star", b"two", **{"If-Match": "*"}).status == 200
    assert s3.get_object(Bucket=bucket, Key="star")["Body"].read() == b"two"
