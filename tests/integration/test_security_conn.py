"""Issue 10, exhaustion: connection slots and slow bodies.

- A flood of idle and slow-loris connections must not keep other clients
  out: the server cuts the oldest idle connections when its slots run short,
  a request head is due header_timeout_ms after accept (or after its first
  byte), and one client address may hold max_conns_per_ip connections.
- A request body slower than min_body_rate_bytes_per_sec (measured while the
  server waits for it, after a grace period) is cut and nothing is stored.

Everything talks to 127.0.0.1 only.
"""

import errno
import random
import re
import resource
import selectors
import socket
import time
from pathlib import Path

import pytest

import helpers as h

KIB = 1024
MIB = 1024 * 1024


def _raise_nofile(need):
    """Raises this process's open-file limit to the hard limit; skips the test
    when even that cannot hold `need` descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need} sockets this test opens")
    if soft == resource.RLIM_INFINITY or soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return soft, hard


def _host(srv):
    return f"127.0.0.1:{srv.port}"


def _signed_bytes(srv, method, target, body=b"", headers=None, payload_hash=None):
    hdrs = {"Host": _host(srv)}
    hdrs.update(headers or {})
    ph = payload_hash or h.sha256(body)
    hdrs, _ = h.sign_headers(method, target, hdrs, ph)
    return h.request_bytes(method, target, hdrs, body)


def _timed_get(srv, target, want_body, timeout=5.0):
    """A signed GET on a fresh connection; returns (seconds, response) for
    connect + request + whole response."""
    req = _signed_bytes(srv, "GET", target)
    t0 = time.monotonic()
    with h.RawConn(srv.port, timeout=timeout) as c:
        c.send(req)
        r = c.read_response()
    took = time.monotonic() - t0
    assert r.status == 200, (r.status, r.body[:300])
    assert r.body == want_body
    return took, r


def _metric(srv, name):
    # Right after a test closed connections that filled its address's
    # limit, the server may not have seen the closes yet and resets this
    # one: try again for a moment.
    deadline = time.monotonic() + 5
    while True:
        try:
            r = h.signed_request(srv, "GET", "/_openlake/metrics")
            break
        except (ConnectionError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return int(line.split()[1])
    raise AssertionError(f"{name} not in the metrics")


class Flood:
    """Many client sockets in one process: non-blocking connects in batches
    (the listen backlog is 1024 per loop), then a selector tells which ones
    the server has closed."""

    def __init__(self, port):
        self.port = port
        self.sel = selectors.DefaultSelector()
        self.socks = []
        self.closed = set()

    def open(self, n, batch=400, first_byte=None):
        opened = []
        for start in range(0, n, batch):
            pending = []
            for _ in range(min(batch, n - start)):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                rc = s.connect_ex(("127.0.0.1", self.port))
                assert rc in (0, errno.EINPROGRESS), rc
                pending.append(s)
            # Wait for the handshakes of this batch (bounded).
            wsel = selectors.DefaultSelector()
            for s in pending:
                wsel.register(s, selectors.EVENT_WRITE)
            left = len(pending)
            deadline = time.monotonic() + 10
            while left and time.monotonic() < deadline:
                for key, _ in wsel.select(timeout=0.5):
                    wsel.unregister(key.fileobj)
                    left -= 1
            wsel.close()
            assert left == 0, f"{left} connects did not complete"
            for s in pending:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                assert err == 0, f"connect failed: {errno.errorcode.get(err, err)}"
                if first_byte:
                    s.send(first_byte)
                self.sel.register(s, selectors.EVENT_READ)
            opened += pending
        self.socks += opened
        return opened

    def reap(self):
        """Notes which sockets the server closed (EOF or reset)."""
        while True:
            ready = self.sel.select(timeout=0)
            if not ready:
                return
            for key, _ in ready:
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except (ConnectionResetError, BlockingIOError):
                    data = b""
                if not data:
                    self.sel.unregister(s)
                    self.closed.add(s)

    def close(self):
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass
        self.sel.close()


# ---- C: 10,000 idle + 2,000 slow-loris connections ----------------------------

IDLE = 10000
LORIS = 2000
# RSS growth bound for the whole flood.  The server holds at most its slots
# (2 threads x max_conns_per_thread 4096 = 8192) of them; measured: about
# 8 KiB per idle connection (one stack page and the connection's state; no
# receive buffer while idle) and 12 KiB per slow-loris one (plus the first
# page of a receive buffer), 50-70 MiB for the flood.  Before issue 10 each
# connection also held an 80 KiB buffer and an 8 KiB response head buffer.
FLOOD_RSS_BOUND = 128 * MIB
GET_BOUND_S = 0.100
LORIS_HEAD = b"GET /loris/never HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 4000


@pytest.mark.parametrize("mode", ["sd", "ec"])
def test_idle_and_slow_loris_flood(tmp_path, mode):
    soft, hard = _raise_nofile(IDLE + LORIS + 512)
    # Default settings, except the per-address limit: every client here is
    # 127.0.0.1, and the default (1024) would refuse the flood at the door
    # (test_per_address_limit covers it).
    srv = h.make_mode_server(mode, tmp_path / mode, config={"max_conns_per_ip": 0})
    # The server starts with a soft open-file limit below its 8,192 slots,
    # as under many service managers, and must raise it itself.
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    try:
        srv.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    limits = Path(f"/proc/{srv.pid}/limits").read_text()
    m = re.search(r"^Max open files\s+(\d+)\s+(\d+)", limits, re.M)
    assert m and m.group(1) == m.group(2), f"the server kept a soft limit below the hard one:\n{limits}"
    flood = Flood(srv.port)
    t_start = time.monotonic()
    try:
        assert h.signed_request(srv, "PUT", "/flood").status == 200
        body = b"survives the flood"
        assert h.signed_request(srv, "PUT", "/flood/k", body=body).status == 200
        _timed_get(srv, "/flood/k", body)
        time.sleep(0.3)
        rss0 = srv.proc_status("VmRSS")

        flood.open(IDLE)
        loris = flood.open(LORIS, first_byte=LORIS_HEAD[:1])
        t_open = time.monotonic() - t_start
        # Let the server take in the burst (accepts, cuts, first bytes).
        time.sleep(0.5)
        # Keep the slow-loris heads trickling, a byte per connection per
        # round, while fresh clients come in.
        pos = 1
        gets = []
        for round_ in range(6):
            for s in loris:
                if s not in flood.closed:
                    try:
                        s.send(LORIS_HEAD[pos:pos + 1])
                    except OSError:
                        pass
            pos += 1
            flood.reap()
            gets.append(_timed_get(srv, "/flood/k", body)[0])
            time.sleep(0.2)
        flood.reap()
        rss1 = srv.proc_status("VmRSS")
        cut = _metric(srv, "openlake_connections_idle_cut_total")
        open_now = _metric(srv, "openlake_connections_open")
        elapsed = time.monotonic() - t_start
        print(f"{mode}: opened {IDLE}+{LORIS} in {t_open:.1f} s; server cut {cut} idle, "
              f"{open_now} open, clients saw {len(flood.closed)} closed; "
              f"GETs {[round(g * 1000, 1) for g in gets]} ms; "
              f"RSS {rss0 / MIB:.1f} -> {rss1 / MIB:.1f} MiB in {elapsed:.1f} s")
        # Fresh clients get in, quickly, while the flood holds the slots:
        # every GET succeeded (_timed_get checks the status and body), all
        # within 1 s and all but one within 100 ms (two cores shared with
        # other work may stall any one request).
        assert max(gets) < 1.0, gets
        assert sum(g < GET_BOUND_S for g in gets) >= len(gets) - 1, gets
        # The server made room by cutting idle connections (12,000 is past
        # its 8,192 slots), and it still holds the rest.
        assert cut >= IDLE + LORIS - 2 * 4096 - 200, cut
        assert open_now >= 4096, open_now
        assert rss1 - rss0 < FLOOD_RSS_BOUND, (rss0, rss1)
        assert elapsed < 60
    finally:
        flood.close()
        srv.close()


# ---- the per-address limit ------------------------------------------------------

def test_per_address_limit(make_server):
    srv = make_server(config={"max_conns_per_ip": 8})
    held = []
    try:
        # Eight connections, each served (so each has been accepted: two
        # listeners accept in no particular order).  The server may not have
        # seen the close of start()'s probe connection yet: a refused one
        # is tried again.
        for _ in range(8):
            for attempt in range(20):
                c = h.RawConn(srv.port)
                try:
                    c.send(_signed_bytes(srv, "GET", "/"))
                    assert c.read_response().status == 200
                    break
                except (ConnectionError, OSError):
                    c.close()
                    time.sleep(0.1)
            else:
                raise AssertionError("could not open 8 connections under a limit of 8")
            held.append(c)
        # The ninth connection from this address is closed at once.
        with h.RawConn(srv.port) as c:
            took = c.wait_closed(3)
        assert took < 2
        # The first eight are still served.
        held[0].send(_signed_bytes(srv, "GET", "/"))
        assert held[0].read_response().status == 200
        # One closes; a new connection takes its place once the server has
        # seen the close (a moment; longer under a sanitizer).
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:
            time.sleep(0.2)
            try:
                r = h.signed_request(srv, "GET", "/")
                break
            except (ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise
        assert r.status == 200
    finally:
        for c in held:
            c.close()
    assert _metric(srv, "openlake_connections_ip_limited_total") >= 1


def _connect_from(port, src):
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(src, 0))


def _closed_within(socks, seconds):
    """The sockets the server closed (EOF or reset) within seconds."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    closed = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(closed) < len(socks):
        for key, _ in sel.select(timeout=0.1):
            try:
                data = key.fileobj.recv(4096)
            except ConnectionResetError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
                closed.append(key.fileobj)
    sel.close()
    return closed


def test_per_address_limit_many_addresses(make_server):
    # All of 127.0.0.0/8 is loopback: each source address is a client of
    # its own.  The count of each is kept apart from the others', and stays
    # right as connections come and go in any order (the table's deletion).
    limit = 3
    srv = make_server(config={"max_conns_per_ip": limit, "header_timeout_ms": 60000})
    addrs = [f"127.0.{1 + i // 250}.{1 + i % 250}" for i in range(300)]
    rng = random.Random(10)
    held = {a: [_connect_from(srv.port, a) for _ in range(limit)] for a in addrs}
    try:
        everyone = [s for v in held.values() for s in v]
        assert _closed_within(everyone, 1.0) == [], "connections under the limit were closed"
        over = [_connect_from(srv.port, a) for a in rng.sample(addrs, 10)]
        assert len(_closed_within(over, 10)) == len(over), "connections past the limit stayed open"
        for s in over:
            s.close()
        # Close two of each address's three, in a random order.
        gone = [s for v in held.values() for s in v[1:]]
        rng.shuffle(gone)
        for s in gone:
            s.close()
        for a in addrs:
            held[a] = held[a][:1]
        time.sleep(0.5)
        # Each address may open two again, not three.
        fresh = []
        for a in rng.sample(addrs, 60):
            fresh += [_connect_from(srv.port, a) for _ in range(limit - 1)]
        assert _closed_within(fresh, 0.5) == []
        third = [_connect_from(srv.port, a) for a in rng.sample(addrs, 5)]
        extra = _closed_within(third, 3)
        # An address that got two fresh ones is full again; the others had
        # room for this one.
        refilled = set()
        for s in fresh:
            refilled.add(s.getsockname()[0])
        want = sum(1 for s in third if s.getsockname()[0] in refilled)
        assert len(extra) == want, (len(extra), want)
        r = h.signed_request(srv, "GET", "/")
        assert r.status == 200
        for s in fresh + third:
            s.close()
    finally:
        for v in held.values():
            for s in v:
                s.close()


# ---- header timeout ---------------------------------------------------------

@pytest.fixture(scope="module")
def header_server(tmp_path_factory):
    # The idle and io timeouts keep their defaults (60 s, 30 s): only the
    # header timeout may cut these connections.
    srv = h.Server(tmp_path_factory.mktemp("srv-header"), config={"header_timeout_ms": 1000})
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


def test_slow_loris_head_is_cut(header_server):
    head = _signed_bytes(header_server, "GET", "/")
    with h.RawConn(header_server.port) as c:
        t0 = time.monotonic()
        c.sock.settimeout(0.05)
        closed = False
        for i in range(len(head) - 2):  # never the final CRLF
            try:
                c.sock.send(head[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            try:
                b = c.sock.recv(4096)
            except socket.timeout:
                b = None
            except ConnectionResetError:
                b = b""
            if b is not None:
                # A 408 is fine before the close.
                assert b == b"" or b.startswith(b"HTTP/1.1 408"), b[:100]
                closed = True
                break
            time.sleep(0.05)
            if time.monotonic() - t0 > 8:
                break
        took = time.monotonic() - t0
    assert closed, f"a trickled head was still open after {took:.1f} s"
    assert took < 3, took


def test_silent_connection_is_cut(header_server):
    with h.RawConn(header_server.port) as c:
        took = c.wait_closed(8)
    assert 0.5 <= took < 3, took


def test_keepalive_idle_is_not_header_timeout(header_server):
    # Between requests the idle timeout (60 s) applies, not the header
    # timeout: a keep-alive connection outlives 1 s of quiet.
    with h.RawConn(header_server.port) as c:
        c.send(_signed_bytes(header_server, "GET", "/"))
        assert c.read_response().status == 200
        time.sleep(2.0)
        c.send(_signed_bytes(header_server, "GET", "/"))
        assert c.read_response().status == 200


# ---- minimum body rate ----------------------------------------------------------

RATE_CONFIG = {"min_body_rate_bytes_per_sec": 20000, "body_rate_grace_ms": 500,
               "body_rate_window_ms": 500}


@pytest.fixture(scope="module", params=["sd", "ec"])
def rate_server(tmp_path_factory, request):
    srv = h.make_mode_server(request.param, tmp_path_factory.mktemp("rate-" + request.param),
                             config=RATE_CONFIG)
    srv.mode = request.param
    srv.start()
    try:
        assert h.signed_request(srv, "PUT", "/rate").status == 200
        yield srv
    finally:
        srv.close()


def _trickle_put(srv, key, chunked):
    """A PUT whose body arrives at 10 bytes/s after a fast start; returns
    (seconds until the server answered or closed, response or None)."""
    target = f"/rate/{key}"
    ph = h.UNSIGNED_PAYLOAD
    extra = {"x-amz-content-sha256": ph}
    first = b""
    if chunked:
        # aws-chunked inside HTTP chunked (an EC PUT needs the decoded
        # length): the body goes through the receive buffer's chunked path.
        ph = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
        extra = {"x-amz-content-sha256": ph, "Transfer-Encoding": "chunked",
                 "Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": str(MIB)}
        first = (b"%x\r\n" % (2 * MIB)) + (b"%x\r\n" % MIB)
    else:
        extra["Content-Length"] = str(MIB)
    head = _signed_bytes(srv, "PUT", target, headers=extra, payload_hash=ph)
    with h.RawConn(srv.port, timeout=10) as c:
        c.send(head + first + b"x" * 8192)
        c.sock.settimeout(0.1)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:
            try:
                c.sock.send(b"x")
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - t0, None
            try:
                b = c.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                return time.monotonic() - t0, None
            took = time.monotonic() - t0
            if not b:
                return took, None
            c.buf = b
            c.sock.settimeout(5)
            try:
                return took, c.read_response()
            except (ConnectionError, OSError):
                return took, None
        return time.monotonic() - t0, "still open"


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_slow_body_is_cut(rate_server, chunked):
    key = f"slow-{int(chunked)}"
    took, r = _trickle_put(rate_server, key, chunked)
    print(f"{rate_server.mode} chunked={chunked}: answered after {took:.2f} s: {r!r}")
    assert r != "still open", "a body at 10 bytes/s was still being read after 10 s"
    # Grace 0.5 s plus a 0.5 s window, with slack for a loaded machine.
    assert took < 4, took
    if r is not None:
        assert r.status in (400, 408), (r.status, r.body[:300])
        if r.status == 400:
            assert h.parse_error(r.body)["Code"] == "RequestTimeout", r.body
    time.sleep(0.2)
    r = h.signed_request(rate_server, "HEAD", f"/rate/{key}")
    assert r.status == 404, "a cut body must store nothing"


def test_paused_but_fast_body_passes(rate_server):
    # Pauses shorter than the io timeout, at a rate far above the minimum
    # on average: the body completes.
    data = bytes(range(256)) * (4 * KIB)  # 1 MiB
    head = _signed_bytes(rate_server, "PUT", "/rate/paused",
                         headers={"Content-Length": str(len(data)),
                                  "x-amz-content-sha256": h.sha256(data)},
                         payload_hash=h.sha256(data))
    with h.RawConn(rate_server.port, timeout=10) as c:
        c.send(head)
        step = len(data) // 4
        for i in range(4):
            c.send(data[i * step:(i + 1) * step])
            time.sleep(0.3)
        r = c.read_response()
    assert r.status == 200, (r.status, r.body[:300])
    took, _ = _timed_get(rate_server, "/rate/paused", data)


def _slow_reader_get(srv, key, size, rcvbuf=4096, step=1024, pause=0.1, limit=30.0):
    """GETs /rate/key from a socket with a small receive buffer, taking `step`
    bytes every `pause` seconds (~10 KiB/s) until the server closes or
    `limit` seconds pass.  Returns (seconds, bytes received, closed?)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.connect(("127.0.0.1", srv.port))
    try:
        s.sendall(_signed_bytes(srv, "GET", f"/rate/{key}"))
        s.settimeout(1.0)
        t0 = time.monotonic()
        got = 0
        while time.monotonic() - t0 < limit:
            try:
                b = s.recv(step)
            except socket.timeout:
                continue
            except ConnectionResetError:
                return time.monotonic() - t0, got, True
            if not b:
                return time.monotonic() - t0, got, True
            got += len(b)
            time.sleep(pause)
        return time.monotonic() - t0, got, False
    finally:
        s.close()


@pytest.mark.parametrize("mode", ["sd", "ec"])
def test_slow_reader_is_cut(tmp_path, mode):
    # A response is held to the same minimum rate as a body (send_pace in
    # conn.c): a reader taking ~10 KiB/s of a 32 MiB object, far below the
    # configured 1 MiB/s, is cut once the credit of what the socket buffers
    # took (a few MiB on loopback) runs out, rather than holding the
    # response's buffers (and its share of the body memory budget) for as
    # long as it likes.  Base: still being served after 30 s.
    srv = h.make_mode_server(mode, tmp_path / mode,
                             config={"min_body_rate_bytes_per_sec": str(MIB),
                                     "body_rate_grace_ms": "500"})
    srv.start()
    try:
        assert h.signed_request(srv, "PUT", "/rate").status == 200
        size = 32 * MIB
        data = bytes(range(256)) * (size // 256)
        r = h.signed_request(srv, "PUT", "/rate/slow-reader", body=data)
        assert r.status == 200, r.body[:300]
        took, got, closed = _slow_reader_get(srv, "slow-reader", size)
        print(f"{mode}: cut={closed} after {took:.1f} s, {got} bytes read")
        assert closed, f"a reader at ~10 KiB/s was still being served after {took:.0f} s"
        assert got < size
        # A reader at full speed gets the whole object from the same server.
        took, _ = _timed_get(srv, "/rate/slow-reader", data, timeout=30.0)
        assert took < 30
    finally:
        srv.close()
