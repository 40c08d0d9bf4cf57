"""Durability: kill -9 under load, clean restarts, atomic overwrites, bitrot
detection, compaction and bounded memory.  The first three run against one
drive and against six erasure-coded drives (4+2); the others look at one
drive's files."""

import concurrent.futures
import hashlib
import http.client
import os
import random
import threading
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h
from helpers import KIB, MIB

# The object layer under test: one drive, and six erasure-coded drives.
MODES = ["sd", "ec"]
CRASH_SIZES = [1 * KIB, 7 * KIB, 100 * KIB, 129 * KIB, 700 * KIB, 2 * MIB]


def _key_size(key):
    return int(key.rsplit("-", 1)[1])


def _writer(endpoint, bucket, tid, cycle, stop, killing, acked, errors):
    s3 = h.make_client(endpoint, read_timeout=20)
    rnd = random.Random(f"{tid}/{cycle}")
    i = 0
    while not stop.is_set() and i < 100000:
        size = rnd.choice(CRASH_SIZES)
        key = f"c{cycle}/t{tid}/{i:06d}-{size}"
        i += 1
        try:
            s3.put_object(Bucket=bucket, Key=key, Body=h.content_for(key, size))
        except Exception as e:  # noqa: BLE001 - the server is being killed
            if not killing.is_set():
                errors.append(f"{key}: {e!r}")
            continue
        acked.append(key)


def _verify(s3, bucket, new_keys, old_keys):
    """Every key acknowledged in this cycle reads back byte-identical; keys
    of earlier cycles are still listed (a sample is read in full); and
    every object that exists, acknowledged or not, is complete."""
    existing = {o["Key"]: o["Size"]
                for p in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                for o in p.get("Contents", [])}
    lost = [k for k in new_keys + old_keys if k not in existing]
    assert not lost, f"{len(lost)} acknowledged keys lost after kill -9: {lost[:5]}"
    acked = set(new_keys) | set(old_keys)
    unacked = [k for k in existing if k not in acked]
    sample = random.Random(len(old_keys)).sample(old_keys, min(100, len(old_keys)))
    for key in new_keys + sample + unacked:
        size = _key_size(key)
        assert existing[key] == size, f"{key} listed with size {existing[key]}"
        try:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as e:
            pytest.fail(f"listed key {key} unreadable after kill -9: {h.error_code(e)}")
        assert body == h.content_for(key, size), f"partial or corrupt object {key}"


@pytest.mark.parametrize("mode", MODES)
def test_kill9_under_write_load(make_server, mode):
    srv = make_server(mode=mode)
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="crash")
    acked_all = []
    for cycle in range(3):
        stop, killing = threading.Event(), threading.Event()
        acked, errors = [], []
        threads = [threading.Thread(target=_writer, args=(srv.endpoint, "crash", t, cycle, stop,
                                                          killing, acked, errors))
                   for t in range(8)]
        for t in threads:
            t.start()
        time.sleep(3)
        killing.set()
        srv.kill9()
        stop.set()
        for t in threads:
            t.join(30)
            assert not t.is_alive(), "writer thread hung after kill -9"
        assert not errors, f"PUTs failed before the kill: {errors[:5]}"
        assert len(acked) > 10, f"only {len(acked)} PUTs acknowledged in 3 s"
        srv.start()
        _verify(h.make_client(srv.endpoint), "crash", list(acked), acked_all)
        acked_all += acked


@pytest.mark.parametrize("mode", MODES)
def test_clean_restart_keeps_data(make_server, mode):
    srv = make_server(mode=mode)
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="keep")
    s3.create_bucket(Bucket="empty-bucket")
    objs = {"small": os.urandom(100), "inline-edge": os.urandom(128 * KIB),
            "big": os.urandom(5 * MIB + 1), "zero": b""}
    for k, v in objs.items():
        s3.put_object(Bucket="keep", Key=k, Body=v, Metadata={"k": k})
    s3.put_object(Bucket="keep", Key="deleted", Body=b"gone")
    s3.delete_object(Bucket="keep", Key="deleted")
    parts = [os.urandom(5 * MIB), os.urandom(123)]
    up = s3.create_multipart_upload(Bucket="keep", Key="mp")
    etags = [s3.upload_part(Bucket="keep", Key="mp", UploadId=up["UploadId"], PartNumber=i,
                            Body=p)["ETag"] for i, p in enumerate(parts, 1)]
    s3.complete_multipart_upload(Bucket="keep", Key="mp", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": [{"PartNumber": i, "ETag": e}
                                                            for i, e in enumerate(etags, 1)]})
    pending = s3.create_multipart_upload(Bucket="keep", Key="pending")["UploadId"]
    p1 = os.urandom(5 * MIB)
    e1 = s3.upload_part(Bucket="keep", Key="pending", UploadId=pending, PartNumber=1,
                        Body=p1)["ETag"]

    srv.restart()
    s3 = h.make_client(srv.endpoint)

    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert "keep" in names and "empty-bucket" in names
    for k, v in objs.items():
        got = s3.get_object(Bucket="keep", Key=k)
        assert got["Body"].read() == v, k
        assert got["Metadata"] == {"k": k}
        assert got["ETag"] == f'"{h.md5_hex(v)}"'
    with pytest.raises(ClientError):
        s3.head_object(Bucket="keep", Key="deleted")
    got = s3.get_object(Bucket="keep", Key="mp")
    assert got["ETag"] == h.multipart_etag(parts)
    assert got["Body"].read() == b"".join(parts)
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket="keep")["Contents"]]
    assert listed == sorted(list(objs) + ["mp"])
    # An upload in progress survives the restart and can be completed.
    p2 = os.urandom(10)
    e2 = s3.upload_part(Bucket="keep", Key="pending", UploadId=pending, PartNumber=2,
                        Body=p2)["ETag"]
    s3.complete_multipart_upload(Bucket="keep", Key="pending", UploadId=pending,
                                 MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": e1},
                                                            {"PartNumber": 2, "ETag": e2}]})
    assert s3.get_object(Bucket="keep", Key="pending")["Body"].read() == p1 + p2


@pytest.mark.parametrize("mode", MODES)
def test_atomic_overwrite(make_server, mode):
    srv = make_server(mode=mode)
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="atomic")
    a, b = os.urandom(4 * MIB), os.urandom(4 * MIB)
    valid = {h.sha256(a): "a", h.sha256(b): "b"}
    s3.put_object(Bucket="atomic", Key="k", Body=a)
    stop = threading.Event()
    bad, seen, errors = [], [], []

    def writer():
        c = h.make_client(srv.endpoint)
        i = 0
        while not stop.is_set():
            try:
                c.put_object(Bucket="atomic", Key="k", Body=b if i % 2 == 0 else a)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
            i += 1

    def reader():
        c = h.make_client(srv.endpoint)
        while not stop.is_set():
            try:
                got = c.get_object(Bucket="atomic", Key="k")
                body = got["Body"].read()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                continue
            d = h.sha256(body)
            if d not in valid:
                bad.append((len(body), got["ETag"]))
            else:
                seen.append(valid[d])
                want_etag = f'"{h.md5_hex(a if valid[d] == "a" else b)}"'
                if got["ETag"] != want_etag:
                    bad.append(("etag does not match body", got["ETag"]))

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader)
                                                   for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(4)
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors[:5]
    assert not bad, f"{len(bad)} GETs returned a mix or a partial object: {bad[:5]}"
    assert len(seen) >= 10
    assert "a" in seen and "b" in seen, "the overwrites were never observed"


def test_corruption_is_detected(make_server):
    srv = make_server()
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="rot")
    big = os.urandom(4 * MIB)
    small = os.urandom(KIB)
    s3.put_object(Bucket="rot", Key="big", Body=big)
    s3.put_object(Bucket="rot", Key="small", Body=small)
    srv.stop()

    # Find the object's bytes in a segment file (the header is 4096 bytes,
    # the data follows; searching keeps the test independent of the exact
    # layout) and flip a few bytes 1 MiB into the object.
    probe = big[MIB:MIB + 4096]
    where = None
    for seg in sorted(srv.segment_files(), key=lambda p: p.stat().st_size, reverse=True):
        data = seg.read_bytes()
        pos = data.find(probe)
        if pos >= 0:
            where = (seg, pos)
            break
    assert where, f"object data not found in segment files {srv.segment_files()}"
    seg, pos = where
    with open(seg, "r+b") as f:
        f.seek(pos + 100)
        orig = f.read(8)
        f.seek(pos + 100)
        f.write(bytes(x ^ 0x5A for x in orig))
        f.flush()
        os.fsync(f.fileno())

    srv.start()
    status, body, broken = _get_raw(srv, s3, "rot", "big")
    assert not (status == 200 and not broken and len(body) == len(big) and body != big), \
        "corrupt data was served as a complete, successful response"
    assert not (status == 200 and not broken and body == big), \
        "the flipped bytes were not read back at all (test did not hit the data)"
    if not broken:
        assert status == 500 or (status == 200 and len(body) < len(big)), (status, len(body))
        if status == 500:
            assert h.parse_error(body)["Code"] == "InternalError"
    # The server survives and still serves the untouched small object.
    s3 = h.make_client(srv.endpoint)
    assert s3.get_object(Bucket="rot", Key="small")["Body"].read() == small
    s3.put_object(Bucket="rot", Key="new", Body=big)
    assert s3.get_object(Bucket="rot", Key="new")["Body"].read() == big


def _get_raw(srv, s3, bucket, key):
    """GET through a raw connection: (status, body, broken) where broken says
    the response was cut off."""
    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key})
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    status, body, broken = None, b"", False
    try:
        conn.request("GET", h.split_url(url)[2])
        resp = conn.getresponse()
        status = resp.status
        try:
            body = resp.read()
        except (http.client.IncompleteRead, ConnectionError) as e:
            body = getattr(e, "partial", b"")
            broken = True
    except (ConnectionError, http.client.HTTPException):
        broken = True
    finally:
        conn.close()
    return status, body, broken


def test_corruption_in_cached_pages_is_detected(make_server):
    """Large GETs of cached data are sent with sendfile after their CRCs are
    checked on the cached pages: a page changed in the cache under a running
    server (as a bad page would look) is never sent as good data."""
    srv = make_server()
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="hot")
    big = os.urandom(6 * MIB)
    s3.put_object(Bucket="hot", Key="big", Body=big)
    for _ in range(2):  # the first read fills the page cache, the second is zero-copy
        assert s3.get_object(Bucket="hot", Key="big")["Body"].read() == big
    probe = big[3 * MIB:3 * MIB + 4096]
    where = None
    for seg in srv.segment_files():
        pos = seg.read_bytes().find(probe)
        if pos >= 0:
            where = (seg, pos)
            break
    assert where, "object data not found in segment files"
    seg, pos = where
    with open(seg, "r+b") as f:  # buffered: the cached page changes
        f.seek(pos + 200)
        orig = f.read(4)
        f.seek(pos + 200)
        f.write(bytes(x ^ 0xA5 for x in orig))
        f.flush()
        os.fsync(f.fileno())
    status, body, broken = _get_raw(srv, s3, "hot", "big")
    assert not (status == 200 and not broken and len(body) == len(big)), \
        "a changed cached page was served as a complete, successful response"
    # Bytes before the damaged block went out intact.
    assert body[:MIB] == big[:len(body[:MIB])]
    # The server goes on serving, and a rewrite heals the key.
    s3 = h.make_client(srv.endpoint)
    s3.put_object(Bucket="hot", Key="big", Body=big)
    assert s3.get_object(Bucket="hot", Key="big")["Body"].read() == big


def test_compaction_reclaims_space(make_server):
    srv = make_server(config={"segment_bytes": 8 * MIB, "compact_interval_ms": 500})
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="compact")
    blob = os.urandom(4 * MIB)
    keys = [f"o{i:02d}" for i in range(40)]
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        list(ex.map(lambda k: s3.put_object(Bucket="compact", Key=k, Body=k.encode() + blob),
                    keys))
    peak = srv.segment_disk_bytes()
    assert peak >= 150 * MIB, f"segment files hold only {peak} bytes after 160 MiB of PUTs"
    assert len(srv.segment_files()) >= 10, "segment_bytes 8 MiB was not honoured"
    for k in keys[::2]:
        s3.delete_object(Bucket="compact", Key=k)
    for k in keys[1::2]:
        s3.delete_object(Bucket="compact", Key=k)
    deadline = time.monotonic() + 20
    now = peak
    while time.monotonic() < deadline:
        now = srv.segment_disk_bytes()
        if now < peak * 0.25:
            break
        time.sleep(0.5)
    assert now < peak * 0.25, f"segments still use {now} of {peak} bytes 20 s after deleting all"
    # Still works after compaction, and after a restart.
    s3.put_object(Bucket="compact", Key="after", Body=blob)
    srv.restart()
    s3 = h.make_client(srv.endpoint)
    assert s3.get_object(Bucket="compact", Key="after")["Body"].read() == blob
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="compact")["Contents"]] == ["after"]


def test_compaction_keeps_live_objects(make_server):
    srv = make_server(config={"segment_bytes": 8 * MIB, "compact_interval_ms": 500})
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="live")
    bodies = {f"o{i:02d}": os.urandom(3 * MIB) for i in range(16)}
    for k, v in bodies.items():
        s3.put_object(Bucket="live", Key=k, Body=v)
    peak = srv.segment_disk_bytes()
    # Delete 3 of every 4: segments become sparse and get rewritten.
    keep = {k: v for i, (k, v) in enumerate(bodies.items()) if i % 4 == 0}
    for k in bodies:
        if k not in keep:
            s3.delete_object(Bucket="live", Key=k)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and srv.segment_disk_bytes() > peak * 0.6:
        time.sleep(0.5)
    for k, v in keep.items():
        assert s3.get_object(Bucket="live", Key=k)["Body"].read() == v, k
    srv.restart()
    s3 = h.make_client(srv.endpoint)
    for k, v in keep.items():
        assert s3.get_object(Bucket="live", Key=k)["Body"].read() == v, k


@pytest.mark.slow
def test_1gib_object_bounded_memory(make_server):
    srv = make_server()
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="huge")
    # Warm up so that start-up allocations are in the baseline.
    s3.put_object(Bucket="huge", Key="warm", Body=os.urandom(8 * MIB))
    s3.get_object(Bucket="huge", Key="warm")["Body"].read()
    # The server's private memory (RssAnon), sampled through the transfer:
    # VmHWM would also count the page-cache pages that zero-copy GETs map
    # (RssFile), which the kernel owns and reclaims at will.
    anon0 = srv.proc_status("RssAnon")
    peak = [anon0]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.02):
            peak[0] = max(peak[0], srv.proc_status("RssAnon"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    size = 1024 * MIB
    t0 = time.monotonic()
    url = s3.generate_presigned_url("put_object", Params={"Bucket": "huge", "Key": "g"},
                                    ExpiresIn=600)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    conn.putrequest("PUT", h.split_url(url)[2], skip_accept_encoding=True)
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    sent_hash = hashlib.sha256()
    md5 = hashlib.md5()
    for block in h.stream_blocks(size, seed=7):
        sent_hash.update(block)
        md5.update(block)
        conn.send(block)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    assert resp.status == 200, resp.status
    assert resp.getheader("ETag") == f'"{md5.hexdigest()}"'

    got = s3.get_object(Bucket="huge", Key="g")
    assert got["ContentLength"] == size
    got_hash = hashlib.sha256()
    n = 0
    for chunk in got["Body"].iter_chunks(MIB):
        got_hash.update(chunk)
        n += len(chunk)
    assert n == size
    assert got_hash.hexdigest() == sent_hash.hexdigest()
    took = time.monotonic() - t0
    stop.set()
    sampler.join()
    growth = peak[0] - anon0
    assert growth < 200 * MIB, \
        f"server private memory grew by {growth / MIB:.0f} MiB for a 1 GiB object"
    assert took < 60, f"1 GiB PUT+GET took {took:.1f} s"
