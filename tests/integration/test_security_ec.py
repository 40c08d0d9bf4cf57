"""Issue 10, exhaustion: the memory of request bodies in flight, and EC
multipart cleanup.

- A signed PUT that sends a small prefix of a large body and stalls must
  hold little memory (nothing big is allocated before body bytes arrive, and
  buffers are sized to what arrived and what the object needs), in both
  modes.
- Every body buffer comes out of one budget (body_memory_bytes): with a small
  budget, PUTs beyond it wait and then get 503 SlowDown, never over-commit,
  and what is stored is correct.
- Stalled EC GETs are bounded by the same budget; GETs beyond it get 503
  before their head.
- Aborting a many-part EC upload and deleting a many-part EC object return at
  once; the parts' shards are removed in the background, also across a
  restart.

Every server here is private to its test (configs differ).
"""

import concurrent.futures as cf
import hashlib
import os
import socket
import time

import pytest

import helpers as H

MODES = ["sd", "ec"]


def _sanitized():
    """True for a server built with ASan/UBSan: its allocator's shadow and
    quarantine make RSS bounds meaningless and it runs ~10x slower, so the
    memory and timing bounds are not checked (the behaviour still is)."""
    try:
        return b"__asan_init" in H.openlake_binary().read_bytes()
    except OSError:
        return False


SANITIZED = _sanitized()


def start(mode, tmp_path, config=None, **kw):
    return H.make_mode_server(mode, tmp_path / mode, config=config, **kw).start()


def stalled_put(srv, bucket, key, total, prefix):
    """A signed PUT announcing `total` bytes that sends `prefix` and stalls."""
    target = f"/{bucket}/{key}"
    hdrs = {"Host": f"127.0.0.1:{srv.port}", "Content-Length": str(total)}
    hdrs, _ = H.sign_headers("PUT", target, hdrs, "UNSIGNED-PAYLOAD")
    c = H.RawConn(srv.port, timeout=30)
    c.send(H.request_bytes("PUT", target, hdrs, b"p" * prefix))
    return c


def stalled_get(srv, bucket, key):
    """A signed GET whose client never reads (a small receive buffer)."""
    target = f"/{bucket}/{key}"
    hdrs, _ = H.sign_headers("GET", target, {"Host": f"127.0.0.1:{srv.port}"}, H.EMPTY_SHA256)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.port))
    s.sendall(H.request_bytes("GET", target, hdrs))
    return s


def warm_up(cl, bucket, n=16, size=9 * H.MIB):
    """Concurrent large PUTs and GETs first: memory that the allocator kept
    from them must not be what makes stalled requests look cheap."""
    blob = os.urandom(size)
    with cf.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda i: cl.put_object(Bucket=bucket, Key=f"warm{i}", Body=blob), range(n)))
        list(ex.map(lambda i: cl.get_object(Bucket=bucket, Key=f"warm{i}")["Body"].read(),
                    range(n)))


def settle(srv, seconds=1.5):
    time.sleep(seconds)
    return srv.proc_status("VmRSS")


# ---- A: stalled PUTs ----

# A stalled PUT that has sent a 1,000-byte prefix of a 64 MiB body holds
# at most this much resident memory (measured: ~25 KiB on one drive, ~50 KiB
# on six EC drives).  The base commit holds about as little here (its big
# buffers are malloc'ed and left untouched), so this test guards the lazy,
# sized allocation rather than reproducing the issue; a stalled PUT that
# has sent real bytes holds them, and the budget tests below bound that.
STALLED_PUT_RSS_BOUND = 256 * H.KIB


@pytest.mark.parametrize("mode", MODES)
def test_stalled_puts_hold_little_memory(mode, tmp_path):
    srv = start(mode, tmp_path)
    conns = []
    try:
        cl = H.make_client(srv.endpoint)
        cl.create_bucket(Bucket="stall")
        warm_up(cl, "stall")
        r0 = settle(srv)
        n = 50
        for i in range(n):
            conns.append(stalled_put(srv, "stall", f"s{i}", 64 * H.MIB, 1000))
        r1 = settle(srv, 2.0)
        per = (r1 - r0) / n
        assert SANITIZED or per < STALLED_PUT_RSS_BOUND, \
            f"{mode}: {per / 1024:.0f} KiB of RSS per stalled PUT (bound {STALLED_PUT_RSS_BOUND // 1024})"
        # The server still serves, and the stalled PUTs stored nothing.
        cl.put_object(Bucket="stall", Key="after", Body=b"ok")
        assert cl.get_object(Bucket="stall", Key="after")["Body"].read() == b"ok"
    finally:
        for c in conns:
            c.close()
        srv.close()


@pytest.mark.parametrize("mode", MODES)
def test_put_waits_for_budget_then_completes(mode, tmp_path):
    """A PUT that finds the budget held by stalled PUTs waits (up to
    body_memory_wait_ms) and completes once they go away, with its bytes
    intact."""
    budget = 15 * H.MIB if mode == "ec" else 7 * H.MIB
    srv = start(mode, tmp_path, config={"body_memory_bytes": str(budget),
                                        "body_memory_wait_ms": "5000"})
    conns = []
    try:
        cl = H.make_client(srv.endpoint)
        cl.create_bucket(Bucket="wait")
        size = 2 * H.MIB
        conns = [stalled_put(srv, "wait", f"hold{i}", size, 1000) for i in range(2)]
        time.sleep(0.5)
        body = os.urandom(size)
        with cf.ThreadPoolExecutor(1) as ex:
            t0 = time.monotonic()
            fut = ex.submit(H.signed_request, srv, "PUT", "/wait/waited", body)
            time.sleep(1.0)
            assert not fut.done(), "the PUT did not wait for the budget"
            for c in conns:
                c.close()
            conns = []
            r = fut.result(timeout=30)
            took = time.monotonic() - t0
        assert r.status == 200, r
        assert 0.9 < took < 5.0, took
        assert cl.get_object(Bucket="wait", Key="waited")["Body"].read() == body
    finally:
        for c in conns:
            c.close()
        srv.close()


@pytest.mark.parametrize("mode", MODES)
def test_stalled_puts_bounded_by_budget(mode, tmp_path):
    """40 PUTs of 2 MiB bodies that each send 1 MiB and stall, under a 48 MiB
    budget: those that fit hold their reservation (6 MiB each on 4+2, 3 MiB on
    one drive), the others get 503 SlowDown after body_memory_wait_ms, and
    RSS grows by less than the budget.  (Base: every one is held, ~1.5 MiB
    each in EC mode, and none is refused.)"""
    budget = 48 * H.MIB
    need = 6 * H.MIB if mode == "ec" else 3 * H.MIB
    srv = start(mode, tmp_path, config={"body_memory_bytes": str(budget),
                                        "body_memory_wait_ms": "500"})
    conns = []
    try:
        cl = H.make_client(srv.endpoint)
        cl.create_bucket(Bucket="held")
        warm_up(cl, "held", n=8, size=2 * H.MIB)
        r0 = settle(srv)
        n = 40
        for i in range(n):
            conns.append(stalled_put(srv, "held", f"h{i}", 2 * H.MIB, H.MIB))
        r1 = settle(srv, 3.0)
        assert SANITIZED or r1 - r0 < budget, f"{mode}: RSS grew {(r1 - r0) >> 20} MiB"
        refused = 0
        for c in conns:
            c.sock.settimeout(0.2)
            try:
                head = c.sock.recv(4096)
            except socket.timeout:
                continue
            if head.startswith(b"HTTP/1.1 503"):
                assert b"SlowDown" in head
                refused += 1
        assert refused >= n - budget // need, (refused, n, budget // need)
        # Not more than needed either: those that fit were kept.
        assert refused <= n - 1
        # The metrics tell the same story: the budget full, never past it.
        m = H.signed_request(srv, "GET", "/_openlake/metrics")
        assert m.status == 200
        vals = dict(line.split(" ", 1) for line in m.body.decode().splitlines()
                    if line.startswith("openlake_body_memory"))
        assert int(vals["openlake_body_memory_limit_bytes"]) == budget
        assert budget - need < int(vals["openlake_body_memory_bytes"]) <= budget, vals
        assert int(vals["openlake_body_memory_refused_total"]) >= refused, vals
    finally:
        for c in conns:
            c.close()
        srv.close()


@pytest.mark.parametrize("mode", MODES)
def test_memory_returns_after_a_burst(mode, tmp_path):
    """50 PUTs that each sent 5 MB and stalled, then went away: the server
    gives their buffers back (base: ~600 MiB kept in EC mode)."""
    srv = start(mode, tmp_path)
    conns = []
    try:
        cl = H.make_client(srv.endpoint)
        cl.create_bucket(Bucket="burst")
        r0 = settle(srv, 0.5)
        for i in range(50):
            conns.append(stalled_put(srv, "burst", f"b{i}", 64 * H.MIB, 5_000_000))
        r1 = settle(srv, 2.0)
        for c in conns:
            c.close()
        conns = []
        r2 = settle(srv, 2.0)
        # Per thread at most 32 MiB of buffers are pooled for reuse (2
        # threads), plus index pages and slack.
        assert SANITIZED or r2 - r0 < 100 * H.MIB, \
            f"{mode}: RSS {r0 >> 20} -> {r1 >> 20} -> {r2 >> 20} MiB after the PUTs went away"
    finally:
        for c in conns:
            c.close()
        srv.close()


# ---- the budget ----

def put_all(srv, bucket, blobs, workers):
    """PUTs every blob at once; returns {key: status}."""
    def one(item):
        key, body = item
        r = H.signed_request(srv, "PUT", f"/{bucket}/{key}", body=body)
        return key, r.status, r.body
    with cf.ThreadPoolExecutor(workers) as ex:
        return {k: (st, b) for k, st, b in ex.map(one, blobs.items())}


@pytest.mark.parametrize("mode", MODES)
def test_body_budget_backpressure(mode, tmp_path):
    """A budget that fits about two 2 MiB PUTs: while two stalled PUTs hold
    it, another PUT waits body_memory_wait_ms and gets 503 SlowDown; once
    they go away PUTs succeed again; a burst of 12 concurrent PUTs either
    completes or gets 503, and every stored object reads back exactly."""
    # EC 4+2: a 2 MiB PUT reserves 2 MiB stripe + 1 MiB parity + 6 x 512 KiB
    # writers = 6 MiB; one drive: 3 x 1 MiB writers.
    budget = 15 * H.MIB if mode == "ec" else 7 * H.MIB
    cfg = {"body_memory_bytes": str(budget), "body_memory_wait_ms": "500"}
    srv = start(mode, tmp_path, config=cfg)
    conns = []
    try:
        cl = H.make_client(srv.endpoint)
        cl.create_bucket(Bucket="budget")
        size = 2 * H.MIB
        conns = [stalled_put(srv, "budget", f"hold{i}", size, 1000) for i in range(2)]
        time.sleep(0.5)
        body = os.urandom(size)
        t0 = time.monotonic()
        r = H.signed_request(srv, "PUT", "/budget/refused", body=body)
        took = time.monotonic() - t0
        assert r.status == 503, r
        assert H.parse_error(r.body)["Code"] == "SlowDown"
        assert 0.4 < took < 5, took
        for c in conns:
            c.close()
        conns = []
        time.sleep(0.5)
        r = H.signed_request(srv, "PUT", "/budget/fits", body=body)
        assert r.status == 200, r
        blobs = {f"k{i}": os.urandom(size - i) for i in range(12)}
        res = put_all(srv, "budget", blobs, 12)
        ok = [k for k, (st, _) in res.items() if st == 200]
        for k, (st, b) in res.items():
            assert st in (200, 503), (k, st, b[:300])
            if st == 503:
                assert H.parse_error(b)["Code"] == "SlowDown"
        assert ok, "no PUT of the burst got through"
        for k in ok:
            got = cl.get_object(Bucket="budget", Key=k)["Body"].read()
            assert hashlib.sha256(got).digest() == hashlib.sha256(blobs[k]).digest(), k
        for k, (st, _) in res.items():
            if st == 503:
                with pytest.raises(Exception):
                    cl.head_object(Bucket="budget", Key=k)
        assert srv.running()
    finally:
        for c in conns:
            c.close()
        srv.close()


# ---- B: stalled EC GETs ----

def test_stalled_ec_gets_bounded(tmp_path):
    """30 GETs of a 64 MiB object whose clients never read, with a 32 MiB
    budget (a 64 MiB EC PUT reserves 24 MiB, a GET that copies 3 MiB): RSS
    grows by less than the budget (base: ~2.3 MiB per GET, ~70 MiB), every
    GET is answered 200 or 503 SlowDown before any byte of the object, and
    once the stalled ones go away a GET succeeds.  (A GET whose shard pages
    are cached sends them with sendfile and holds no buffer, so how many are
    refused depends on the page cache: the bound is on memory.)"""
    budget = 32 * H.MIB
    srv = start("ec", tmp_path, config={"body_memory_bytes": str(budget),
                                        "body_memory_wait_ms": "300"})
    socks = []
    try:
        cl = H.make_client(srv.endpoint)
        cl.create_bucket(Bucket="gets")
        data = os.urandom(64 * H.MIB)
        cl.put_object(Bucket="gets", Key="big", Body=data)
        warm_up(cl, "gets", n=8, size=4 * H.MIB)
        r0 = settle(srv)
        for _ in range(30):
            socks.append(stalled_get(srv, "gets", "big"))
        r1 = settle(srv, 2.5)
        assert SANITIZED or r1 - r0 < budget, f"RSS grew {(r1 - r0) >> 20} MiB"
        refused = 0
        for s in socks:
            s.settimeout(2)
            head = s.recv(4096)
            if head.startswith(b"HTTP/1.1 503"):
                assert b"SlowDown" in head or b"Content-Length" in head
                refused += 1
            else:
                assert head.startswith(b"HTTP/1.1 200"), head[:100]
        assert refused <= 30, refused
        for s in socks:
            s.close()
        socks = []
        time.sleep(0.5)
        got = cl.get_object(Bucket="gets", Key="big")["Body"].read()
        assert got == data
        # A small object needs a small buffer: many fit the budget at once.
        cl.put_object(Bucket="gets", Key="small", Body=b"s" * 4096)
        with cf.ThreadPoolExecutor(16) as ex:
            outs = list(ex.map(lambda _: cl.get_object(Bucket="gets", Key="small")["Body"].read(),
                               range(64)))
        assert all(o == b"s" * 4096 for o in outs)
    finally:
        for s in socks:
            s.close()
        srv.close()


# ---- C: EC multipart cleanup ----

# Under a sanitizer, fewer parts (the behaviour, not the time, is checked).
NPARTS = 200 if SANITIZED else 2000


def upload_parts(cl, bucket, key, n):
    """An upload of n one-byte parts (min_part_bytes is 0 on this server)."""
    uid = cl.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]

    def one(pn):
        return pn, cl.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=pn,
                                  Body=bytes([pn % 251]))["ETag"]
    with cf.ThreadPoolExecutor(8) as ex:
        etags = dict(ex.map(one, range(1, n + 1)))
    return uid, etags


def wait_bucket_empty(srv, bucket, uid, timeout):
    """Waits for the cleaner to report upload uid's parts removed (its log
    line), then checks that DeleteBucket succeeds: it does only once no key
    of the bucket is left on the drives (part objects, upload and cleanup
    records are keys of the bucket)."""
    deadline = time.monotonic() + timeout
    line = f"removed the parts of upload {uid} in {bucket}"
    while line not in srv.log_path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"the parts of {uid} are still there after {timeout} s"
        time.sleep(0.5)
    target = f"/{bucket}"
    hdrs, _ = H.sign_headers("DELETE", target, {"Host": f"127.0.0.1:{srv.port}"},
                             H.EMPTY_SHA256)
    r = H.http_request(srv, "DELETE", target, hdrs, timeout=120)
    assert r.status == 204, r


def test_ec_abort_many_parts_is_prompt_and_reclaimed_across_restart(tmp_path):
    srv = start("ec", tmp_path, config={"min_part_bytes": "0"})
    try:
        cl = H.make_client(srv.endpoint, read_timeout=120)
        cl.create_bucket(Bucket="abort")
        uid, _ = upload_parts(cl, "abort", "big", NPARTS)
        t0 = time.monotonic()
        cl.abort_multipart_upload(Bucket="abort", Key="big", UploadId=uid)
        took = time.monotonic() - t0
        # The base removes every part first: ~3 ms each (6 s here).
        assert SANITIZED or took < 2.0, f"abort of {NPARTS} parts took {took:.1f} s"
        # Gone from view at once.
        assert cl.list_multipart_uploads(Bucket="abort").get("Uploads", []) == []
        with pytest.raises(Exception) as ei:
            cl.list_parts(Bucket="abort", Key="big", UploadId=uid)
        assert H.error_code(ei.value) == "NoSuchUpload"
        # A crash in the middle of the background removal: the restart
        # resumes it from the cleanup record.
        srv.kill9()
        srv.start()
        time.sleep(1)
        wait_bucket_empty(srv, "abort", uid, 120)
    finally:
        srv.close()


def test_ec_delete_many_part_object_is_prompt_and_reclaimed(tmp_path):
    srv = start("ec", tmp_path, config={"min_part_bytes": "0"})
    try:
        cl = H.make_client(srv.endpoint, read_timeout=120)
        cl.create_bucket(Bucket="mpdel")
        uid, etags = upload_parts(cl, "mpdel", "big", NPARTS)
        cl.complete_multipart_upload(
            Bucket="mpdel", Key="big", UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": pn, "ETag": etags[pn]}
                                       for pn in range(1, NPARTS + 1)]})
        got = cl.get_object(Bucket="mpdel", Key="big")["Body"].read()
        assert got == bytes(pn % 251 for pn in range(1, NPARTS + 1))
        t0 = time.monotonic()
        cl.delete_object(Bucket="mpdel", Key="big")
        took = time.monotonic() - t0
        assert SANITIZED or took < 2.0, f"DELETE of a {NPARTS}-part object took {took:.1f} s"
        with pytest.raises(Exception) as ei:
            cl.head_object(Bucket="mpdel", Key="big")
        assert H.http_status(ei.value) == 404
        assert cl.list_objects_v2(Bucket="mpdel").get("KeyCount") == 0
        wait_bucket_empty(srv, "mpdel", uid, 120)
    finally:
        srv.close()
