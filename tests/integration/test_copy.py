"""CopyObject and UploadPartCopy through boto3: copies share the source's data
by reference, so they cost the same for 1 KiB and 2 GiB."""

import datetime
import os
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h
from helpers import KIB, MIB


def _src(s3, bucket, key, body, **kw):
    s3.put_object(Bucket=bucket, Key=key, Body=body, **kw)
    return f'"{h.md5_hex(body)}"'


def test_copy_same_bucket(s3, bucket):
    body = os.urandom(300 * KIB)
    etag = _src(s3, bucket, "a", body, ContentType="text/x-a", Metadata={"k": "v"})
    r = s3.copy_object(Bucket=bucket, Key="b", CopySource={"Bucket": bucket, "Key": "a"})
    assert r["CopyObjectResult"]["ETag"] == etag
    assert isinstance(r["CopyObjectResult"]["LastModified"], datetime.datetime)
    g = s3.get_object(Bucket=bucket, Key="b")
    assert g["Body"].read() == body
    assert g["ETag"] == etag
    # COPY (the default) keeps the source's metadata.
    assert g["ContentType"] == "text/x-a"
    assert g["Metadata"] == {"k": "v"}


def test_copy_small_and_empty_and_odd_keys(s3, bucket):
    for key, body in (("tiny", b"x" * 10), ("empty", b""), ("dir/sp ace+%&?", b"odd key")):
        _src(s3, bucket, key, body)
        s3.copy_object(Bucket=bucket, Key=key + ".c", CopySource={"Bucket": bucket, "Key": key})
        assert s3.get_object(Bucket=bucket, Key=key + ".c")["Body"].read() == body
    # The raw string form, with a leading slash.
    s3.copy_object(Bucket=bucket, Key="raw", CopySource=f"/{bucket}/tiny")
    assert s3.get_object(Bucket=bucket, Key="raw")["Body"].read() == b"x" * 10


def test_copy_across_buckets(s3, bucket):
    other = h.unique_bucket()
    s3.create_bucket(Bucket=other)
    body = os.urandom(2 * MIB + 123)
    etag = _src(s3, bucket, "src", body)
    r = s3.copy_object(Bucket=other, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert r["CopyObjectResult"]["ETag"] == etag
    assert s3.get_object(Bucket=other, Key="dst")["Body"].read() == body
    s3.delete_object(Bucket=other, Key="dst")
    s3.delete_bucket(Bucket=other)


def test_copy_missing(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": bucket, "Key": "nope"})
    assert h.error_code(e.value) == "NoSuchKey"
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="d", CopySource={"Bucket": "no-such-bkt-x", "Key": "k"})
    assert h.error_code(e.value) == "NoSuchBucket"


def test_metadata_replace(s3, bucket):
    body = b"meta" * 1000
    _src(s3, bucket, "m", body, ContentType="text/old", Metadata={"old": "1"})
    s3.copy_object(Bucket=bucket, Key="m2", CopySource={"Bucket": bucket, "Key": "m"},
                   MetadataDirective="REPLACE", ContentType="text/new", Metadata={"new": "2"})
    g = s3.get_object(Bucket=bucket, Key="m2")
    assert g["Body"].read() == body
    assert g["ContentType"] == "text/new"
    assert g["Metadata"] == {"new": "2"}
    # The source is untouched.
    assert s3.head_object(Bucket=bucket, Key="m")["Metadata"] == {"old": "1"}


def test_copy_onto_itself(s3, bucket):
    body = os.urandom(200 * KIB)
    etag = _src(s3, bucket, "self", body, Metadata={"a": "1"})
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="self", CopySource={"Bucket": bucket, "Key": "self"})
    assert h.error_code(e.value) == "InvalidRequest"
    assert "copy an object to itself" in str(e.value)
    lm0 = s3.head_object(Bucket=bucket, Key="self")["LastModified"]
    time.sleep(1.1)
    r = s3.copy_object(Bucket=bucket, Key="self", CopySource={"Bucket": bucket, "Key": "self"},
                       MetadataDirective="REPLACE", Metadata={"b": "2"})
    assert r["CopyObjectResult"]["ETag"] == etag
    hd = s3.head_object(Bucket=bucket, Key="self")
    assert hd["Metadata"] == {"b": "2"}
    assert hd["ETag"] == etag
    assert hd["LastModified"] > lm0
    assert s3.get_object(Bucket=bucket, Key="self")["Body"].read() == body


def test_copy_conditions(s3, bucket):
    body = b"cond" * 100
    etag = _src(s3, bucket, "c", body)
    lm = s3.head_object(Bucket=bucket, Key="c")["LastModified"]
    past = lm - datetime.timedelta(days=1)
    future = lm + datetime.timedelta(days=1)
    src = {"Bucket": bucket, "Key": "c"}
    ok = [dict(CopySourceIfMatch=etag), dict(CopySourceIfNoneMatch='"other"'),
          dict(CopySourceIfModifiedSince=past), dict(CopySourceIfUnmodifiedSince=future),
          # A true If-Match wins over a false If-Unmodified-Since, a true
          # If-None-Match over a false If-Modified-Since.
          dict(CopySourceIfMatch=etag, CopySourceIfUnmodifiedSince=past),
          dict(CopySourceIfNoneMatch='"other"', CopySourceIfModifiedSince=future)]
    bad = [dict(CopySourceIfMatch='"other"'), dict(CopySourceIfNoneMatch=etag),
           dict(CopySourceIfModifiedSince=future), dict(CopySourceIfUnmodifiedSince=past)]
    for kw in ok:
        s3.copy_object(Bucket=bucket, Key="c2", CopySource=src, **kw)
    for kw in bad:
        with pytest.raises(ClientError) as e:
            s3.copy_object(Bucket=bucket, Key="c3", CopySource=src, **kw)
        assert h.http_status(e.value) == 412, kw
        assert h.error_code(e.value) == "PreconditionFailed"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="c3")


def _read(s3, bucket, key):
    return s3.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_upload_part_copy_ranges(s3, bucket):
    src = os.urandom(12 * MIB + 4321)
    etag = _src(s3, bucket, "big", src)
    small = os.urandom(5000)
    _src(s3, bucket, "small", small)
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp")
    uid = up["UploadId"]
    # (source, first, last): block-aligned, unaligned, to the end, whole, inline.
    ranges = [("big", 0, 5 * MIB - 1), ("big", 100, 5 * MIB + 100 + 77),
              ("big", 64 * KIB, len(src) - 1), ("big", None, None), ("small", 10, 4999)]
    parts, expect = [], b""
    for i, (key, a, b) in enumerate(ranges, 1):
        kw = {}
        if a is not None:
            kw["CopySourceRange"] = f"bytes={a}-{b}"
        r = s3.upload_part_copy(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=i,
                                CopySource={"Bucket": bucket, "Key": key}, **kw)
        data = (src if key == "big" else small)
        data = data if a is None else data[a:b + 1]
        assert r["CopyPartResult"]["ETag"] == f'"{h.md5_hex(data)}"'
        parts.append({"PartNumber": i, "ETag": r["CopyPartResult"]["ETag"]})
        expect += data
    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)["Parts"]
    assert [p["ETag"] for p in lp] == [p["ETag"] for p in parts]
    # The sources may go before the upload completes.
    s3.delete_object(Bucket=bucket, Key="big")
    s3.delete_object(Bucket=bucket, Key="small")
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid,
                                 MultipartUpload={"Parts": parts})
    assert _read(s3, bucket, "mp") == expect
    assert etag


def test_upload_part_copy_errors(s3, bucket):
    _src(s3, bucket, "s", b"0123456789")
    uid = s3.create_multipart_upload(Bucket=bucket, Key="e")["UploadId"]
    src = {"Bucket": bucket, "Key": "s"}
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(Bucket=bucket, Key="e", UploadId=uid, PartNumber=1, CopySource=src,
                            CopySourceRange="bytes=5-10")
    assert h.error_code(e.value) == "InvalidRange"
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(Bucket=bucket, Key="e", UploadId=uid, PartNumber=1, CopySource=src,
                            CopySourceRange="bytes=x")
    assert h.error_code(e.value) == "InvalidArgument"
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(Bucket=bucket, Key="e", UploadId="0" * 32, PartNumber=1,
                            CopySource=src)
    assert h.error_code(e.value) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.upload_part_copy(Bucket=bucket, Key="e", UploadId=uid, PartNumber=1, CopySource=src,
                            CopySourceIfMatch='"nope"')
    assert h.error_code(e.value) == "PreconditionFailed"
    r = s3.upload_part_copy(Bucket=bucket, Key="e", UploadId=uid, PartNumber=1, CopySource=src,
                            CopySourceRange="bytes=2-4")
    assert r["CopyPartResult"]["ETag"] == f'"{h.md5_hex(b"234")}"'
    s3.abort_multipart_upload(Bucket=bucket, Key="e", UploadId=uid)


def test_copy_survives_source_delete_and_space_returns(make_server):
    srv = make_server(config={"segment_bytes": 8 * MIB, "compact_interval_ms": 300})
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="reclaim")
    body = os.urandom(24 * MIB)
    s3.put_object(Bucket="reclaim", Key="src", Body=body)
    peak = srv.segment_disk_bytes()
    assert peak >= 24 * MIB
    s3.copy_object(Bucket="reclaim", Key="dst", CopySource={"Bucket": "reclaim", "Key": "src"})
    # The copy took no new data space.
    assert srv.segment_disk_bytes() < peak + 2 * MIB
    s3.delete_object(Bucket="reclaim", Key="src")
    time.sleep(1.0)  # a few compaction passes
    assert s3.get_object(Bucket="reclaim", Key="dst")["Body"].read() == body
    assert srv.segment_disk_bytes() >= 24 * MIB
    s3.delete_object(Bucket="reclaim", Key="dst")
    deadline = time.monotonic() + 20
    now = peak
    while time.monotonic() < deadline:
        now = srv.segment_disk_bytes()
        if now < 4 * MIB:
            break
        time.sleep(0.3)
    assert now < 4 * MIB, f"segments still use {now} bytes after both references went"
    srv.restart()
    s3 = h.make_client(srv.endpoint)
    assert s3.list_objects_v2(Bucket="reclaim").get("KeyCount", 0) == 0


def _timed_copy_delete(s3, bucket, src, dst):
    t0 = time.monotonic()
    s3.copy_object(Bucket=bucket, Key=dst, CopySource={"Bucket": bucket, "Key": src})
    s3.delete_object(Bucket=bucket, Key=dst)
    return time.monotonic() - t0


def test_copy_cost_does_not_grow_with_size(s3, bucket):
    # A 2 GiB object made without sending 2 GiB: 32 part copies of 64 MiB.
    seed = os.urandom(64 * MIB)
    _src(s3, bucket, "seed", seed)
    uid = s3.create_multipart_upload(Bucket=bucket, Key="huge")["UploadId"]
    parts = []
    for i in range(1, 33):
        r = s3.upload_part_copy(Bucket=bucket, Key="huge", UploadId=uid, PartNumber=i,
                                CopySource={"Bucket": bucket, "Key": "seed"})
        parts.append({"PartNumber": i, "ETag": r["CopyPartResult"]["ETag"]})
    s3.complete_multipart_upload(Bucket=bucket, Key="huge", UploadId=uid,
                                 MultipartUpload={"Parts": parts})
    assert s3.head_object(Bucket=bucket, Key="huge")["ContentLength"] == 2048 * MIB
    # Spot checks across the part boundaries.
    g = s3.get_object(Bucket=bucket, Key="huge", Range=f"bytes={64 * MIB - 10}-{64 * MIB + 9}")
    assert g["Body"].read() == seed[-10:] + seed[:10]
    _src(s3, bucket, "kib", os.urandom(KIB))
    small = min(_timed_copy_delete(s3, bucket, "kib", "kib.c") for _ in range(3))
    big = min(_timed_copy_delete(s3, bucket, "huge", "huge.c") for _ in range(3))
    print(f"copy+delete: 1 KiB {small * 1000:.1f} ms, 2 GiB {big * 1000:.1f} ms")
    assert big < 1.0, f"copy+delete of 2 GiB took {big:.3f} s"
    assert big < 10 * small + 0.2, f"2 GiB: {big:.3f} s, 1 KiB: {small:.3f} s"
    s3.delete_object(Bucket=bucket, Key="huge")
    s3.delete_object(Bucket=bucket, Key="seed")
