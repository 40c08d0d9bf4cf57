"""Object PUT/GET/HEAD/DELETE through boto3 and plain HTTP."""

import datetime
import email.utils
import os
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h
from helpers import KIB, MIB


def test_put_get_head_delete(s3, bucket):
    data = os.urandom(1000)
    put = s3.put_object(Bucket=bucket, Key="obj", Body=data)
    assert put["ETag"] == f'"{h.md5_hex(data)}"'

    got = s3.get_object(Bucket=bucket, Key="obj")
    assert got["Body"].read() == data
    assert got["ETag"] == put["ETag"]
    assert got["ContentLength"] == len(data)

    head = s3.head_object(Bucket=bucket, Key="obj")
    assert head["ContentLength"] == len(data)
    assert head["ETag"] == put["ETag"]
    lm = head["LastModified"]
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - lm).total_seconds()) < 300, f"Last-Modified {lm} is not now ({now})"
    assert "last-modified" in head["ResponseMetadata"]["HTTPHeaders"]

    d = s3.delete_object(Bucket=bucket, Key="obj")
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="obj")
    assert h.error_code(e.value) == "NoSuchKey"
    assert h.http_status(e.value) == 404


def test_delete_missing_key_is_idempotent(s3, bucket):
    d = s3.delete_object(Bucket=bucket, Key="never-existed")
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    s3.put_object(Bucket=bucket, Key="k", Body=b"x")
    s3.delete_object(Bucket=bucket, Key="k")
    d = s3.delete_object(Bucket=bucket, Key="k")
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_delete_objects(s3, bucket):
    keys = [f"multi/{i}" for i in range(5)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    try:
        r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[:3]] +
                                                    [{"Key": "multi/never-existed"}]})
    except ClientError as e:
        if h.error_code(e) == "NotImplemented":
            pytest.skip("DeleteObjects (multi-object delete) is not implemented yet")
        raise
    deleted = sorted(d["Key"] for d in r.get("Deleted", []))
    # Deleting a missing key counts as deleted in S3.
    assert deleted == sorted(keys[:3] + ["multi/never-existed"])
    assert not r.get("Errors")
    left = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="multi/")["Contents"]]
    assert left == keys[3:]
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[3:]],
                                                 "Quiet": True})
    assert not r.get("Deleted") and not r.get("Errors")
    assert s3.list_objects_v2(Bucket=bucket, Prefix="multi/")["KeyCount"] == 0


def test_put_into_missing_bucket(s3):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=h.unique_bucket("missing"), Key="k", Body=b"x")
    assert h.error_code(e.value) == "NoSuchBucket"
    assert h.http_status(e.value) == 404


def test_metadata_round_trip(s3, bucket):
    expires = datetime.datetime(2030, 1, 1, 12, 30, 0, tzinfo=datetime.timezone.utc)
    s3.put_object(Bucket=bucket, Key="meta", Body=b"payload",
                  Metadata={"color": "blue", "owner-name": "Ada Lovelace", "n": "42"},
                  ContentType="text/plain; charset=utf-8",
                  ContentEncoding="gzip",
                  ContentDisposition='attachment; filename="x.txt"',
                  CacheControl="max-age=3600, public",
                  Expires=expires)
    for resp in (s3.head_object(Bucket=bucket, Key="meta"),
                 s3.get_object(Bucket=bucket, Key="meta")):
        assert resp["Metadata"] == {"color": "blue", "owner-name": "Ada Lovelace", "n": "42"}
        assert resp["ContentType"] == "text/plain; charset=utf-8"
        assert resp["ContentEncoding"] == "gzip"
        assert resp["ContentDisposition"] == 'attachment; filename="x.txt"'
        assert resp["CacheControl"] == "max-age=3600, public"
        raw = resp["ResponseMetadata"]["HTTPHeaders"]
        assert raw.get("expires"), "Expires was not returned"
        assert email.utils.parsedate_to_datetime(raw["expires"]) == expires
    body = s3.get_object(Bucket=bucket, Key="meta")["Body"].read()
    assert body == b"payload"


def test_default_content_type(s3, bucket):
    s3.put_object(Bucket=bucket, Key="plain", Body=b"x")
    head = s3.head_object(Bucket=bucket, Key="plain")
    assert head.get("ContentType"), "a Content-Type is always returned"
    assert head["Metadata"] == {}


ODD_KEYS = [
    "unicode/ñandú/日本語/emoji-😀",
    "with space/and more  spaces ",
    "plus+sign+",
    "percent%20literal%",
    "double//slash//",
    "../x",
    "./dot/./seg",
    "q?mark&amp=1#hash",
    "tab\tand;semicolon,comma=eq",
    "k" * 1024,
    "ü" * 512,  # 1024 bytes of UTF-8
    "line\nbreak",
]


@pytest.mark.parametrize("key", ODD_KEYS, ids=lambda k: repr(k[:24]))
def test_odd_keys_round_trip(s3, bucket, key):
    data = os.urandom(37)
    s3.put_object(Bucket=bucket, Key=key, Body=data)
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == data
    assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == 37
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=key)
    assert [o["Key"] for o in listed.get("Contents", [])] == [key]
    s3.delete_object(Bucket=bucket, Key=key)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key=key)
    assert h.http_status(e.value) == 404


def test_odd_keys_are_distinct(s3, bucket):
    # Keys that a path normaliser would fold together must stay apart.
    keys = ["a/b", "a//b", "a/./b", "a/../a/b", "a%2Fb", "a b", "a+b"]
    for i, k in enumerate(keys):
        s3.put_object(Bucket=bucket, Key=k, Body=str(i).encode())
    for i, k in enumerate(keys):
        assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == str(i).encode(), k
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(listed) == sorted(keys)


def test_key_too_long(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="k" * 1025, Body=b"x")
    assert h.error_code(e.value) == "KeyTooLongError"
    assert h.http_status(e.value) == 400
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="ü" * 513, Body=b"x")  # 1026 bytes
    assert h.error_code(e.value) == "KeyTooLongError"


@pytest.mark.parametrize("size", [0, 1, 128 * KIB - 1, 128 * KIB, 128 * KIB + 1, 5 * MIB + 3])
def test_sizes(s3, bucket, size):
    data = os.urandom(size)
    put = s3.put_object(Bucket=bucket, Key=f"size-{size}", Body=data)
    assert put["ETag"] == f'"{h.md5_hex(data)}"'
    got = s3.get_object(Bucket=bucket, Key=f"size-{size}")
    body = got["Body"].read()
    assert len(body) == size
    assert body == data
    assert got["ContentLength"] == size
    assert s3.head_object(Bucket=bucket, Key=f"size-{size}")["ContentLength"] == size


def test_zero_byte_put_keeps_connection_usable(server, bucket):
    """boto3 sends PUTs with Expect: 100-continue, also with Content-Length: 0.
    When such a request gets its final response without a 100 Continue
    first, botocore (1.29 at least) keeps a stale status line for the
    connection, and the next Expect request on that connection misparses
    its response and waits for the server to close it (the idle timeout).
    So the server must answer Expect with 100 Continue (or close the
    connection after a final response that skipped it)."""
    s3 = h.make_client(server.endpoint, read_timeout=10)
    t0 = time.monotonic()
    s3.put_object(Bucket=bucket, Key="empty-1", Body=b"")
    s3.put_object(Bucket=bucket, Key="after-empty", Body=b"data")
    s3.put_object(Bucket=bucket, Key="empty-2", Body=b"")
    s3.put_object(Bucket=bucket, Key="after-empty-2", Body=b"more")
    took = time.monotonic() - t0
    assert took < 5, f"four small PUTs took {took:.1f} s (stalled keep-alive connection)"
    assert s3.get_object(Bucket=bucket, Key="after-empty")["Body"].read() == b"data"
    assert s3.get_object(Bucket=bucket, Key="empty-2")["Body"].read() == b""


def test_overwrite_replaces(s3, bucket):
    a, b = os.urandom(200 * KIB), os.urandom(3000)
    s3.put_object(Bucket=bucket, Key="ow", Body=a, Metadata={"v": "1"})
    s3.put_object(Bucket=bucket, Key="ow", Body=b, Metadata={"v": "2"})
    got = s3.get_object(Bucket=bucket, Key="ow")
    assert got["Body"].read() == b
    assert got["ETag"] == f'"{h.md5_hex(b)}"'
    assert got["Metadata"] == {"v": "2"}
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="ow")["Contents"]
    assert len(listed) == 1 and listed[0]["Size"] == len(b)


# -- ranges ------------------------------------------------------------------

RANGE_CASES = [
    # (range header, start, end inclusive) for a 1000-byte object
    ("bytes=0-0", 0, 0),
    ("bytes=10-20", 10, 20),
    ("bytes=-5", 995, 999),
    ("bytes=100-", 100, 999),
    ("bytes=990-5000", 990, 999),
    ("bytes=999-999", 999, 999),
    ("bytes=-5000", 0, 999),
]


@pytest.fixture(scope="module")
def range_obj(s3):
    bucket = h.unique_bucket("range")
    s3.create_bucket(Bucket=bucket)
    small = os.urandom(1000)
    big = os.urandom(5 * MIB + 3)
    s3.put_object(Bucket=bucket, Key="small", Body=small)
    s3.put_object(Bucket=bucket, Key="big", Body=big)
    s3.put_object(Bucket=bucket, Key="empty", Body=b"")
    return bucket, small, big


@pytest.mark.parametrize("rng,start,end", RANGE_CASES)
def test_range(s3, range_obj, rng, start, end):
    bucket, small, _ = range_obj
    got = s3.get_object(Bucket=bucket, Key="small", Range=rng)
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert got["Body"].read() == small[start:end + 1]
    assert got["ContentRange"] == f"bytes {start}-{end}/1000"
    assert got["ContentLength"] == end - start + 1


@pytest.mark.parametrize("start,end", [(MIB - 7, MIB + 9), (0, 2 * MIB), (5 * MIB - 1, 5 * MIB + 2),
                                       (3 * MIB + 12345, 4 * MIB + 54321)])
def test_range_large_object(s3, range_obj, start, end):
    bucket, _, big = range_obj
    got = s3.get_object(Bucket=bucket, Key="big", Range=f"bytes={start}-{end}")
    assert got["Body"].read() == big[start:end + 1]
    assert got["ContentRange"] == f"bytes {start}-{end}/{len(big)}"


@pytest.mark.parametrize("key,rng", [("small", "bytes=1000-"), ("small", "bytes=5000-6000"),
                                     ("empty", "bytes=0-0"), ("empty", "bytes=0-")])
def test_range_not_satisfiable(s3, range_obj, key, rng):
    bucket = range_obj[0]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key=key, Range=rng)
    assert h.error_code(e.value) == "InvalidRange"
    assert h.http_status(e.value) == 416


def test_range_on_big_object_has_full_length_without_range(s3, range_obj):
    bucket, _, big = range_obj
    got = s3.get_object(Bucket=bucket, Key="big")
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert "ContentRange" not in got
    assert h.sha256(got["Body"].read()) == h.sha256(big)


# -- error bodies over plain HTTP ----------------------------------------------

def test_get_missing_error_body(s3, server, bucket):
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "nope/x"},
                                    ExpiresIn=300)
    r = h.url_request(url)
    assert r.status == 404
    assert "xml" in r.header("content-type", "")
    err = h.parse_error(r.body)
    assert err["Code"] == "NoSuchKey"
    assert err.get("Message")
    assert "Resource" in err
    assert err.get("RequestId")


def test_head_missing_has_no_body(s3, server, bucket):
    # A HEAD 404 must carry no body: the next response on the same
    # connection must parse cleanly.
    s3.put_object(Bucket=bucket, Key="exists", Body=b"0123456789")
    head_url = s3.generate_presigned_url("head_object", Params={"Bucket": bucket, "Key": "nope"})
    get_url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "exists"})
    host = f"127.0.0.1:{server.port}"
    with h.RawConn(server.port) as c:
        c.send(h.request_bytes("HEAD", h.split_url(head_url)[2], {"Host": host}))
        r1 = c.read_response(head_only=True)
        assert r1.status == 404
        c.send(h.request_bytes("GET", h.split_url(get_url)[2], {"Host": host}))
        r2 = c.read_response()
        assert r2.status == 200, r2
        assert r2.body == b"0123456789"
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="nope")
    assert h.http_status(e.value) == 404


def test_no_such_bucket_error_body(s3, server):
    name = h.unique_bucket("nob")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": name, "Key": "k"})
    r = h.url_request(url)
    assert r.status == 404
    assert h.parse_error(r.body)["Code"] == "NoSuchBucket"
