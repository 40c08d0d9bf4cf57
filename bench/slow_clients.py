#!/usr/bin/env python3
"""Memory held by stalled uploads and idle connections (issue 10, exhaustion).

Starts OpenLake on one drive, then erasure-coded 4+2 on six directories (each
in a temporary directory, on a free 127.0.0.1 port), and for each mode:

1. opens --puts signed PUTs (Content-Length --put-size, 64 MiB by default)
   that send their head and --sent bytes of body, then stall; prints the
   server's RSS growth per stalled PUT;
2. with --watch S, waits up to S seconds for the server to cut them
   (io_timeout_ms for a stalled body; min_body_rate_bytes_per_sec after
   body_rate_grace_ms and one body_rate_window_ms for one that trickles a
   byte every --trickle seconds) and prints when it did;
3. opens --idle connections that send nothing and prints the RSS growth per
   idle connection.

A benchmark, not a test: it is not run by CI.  Usage:

    ninja -C build && /usr/bin/python3 bench/slow_clients.py
    /usr/bin/python3 bench/slow_clients.py --reference /path/to/older/openlake
    /usr/bin/python3 bench/slow_clients.py --puts 100 --watch 40 --trickle 5 --modes sd,ec

OPENLAKE_BIN names the binary (default build/openlake).  --reference BIN
measures another binary (an older build) the same way in the same run, mode
by mode, and prints this binary's figures as ratios of it (lower is better).
"""
import argparse
import hashlib
import os
import resource
import selectors
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import helpers as h  # noqa: E402

MIB = 1 << 20
KIB = 1 << 10


def parse_size(s):
    s = s.strip().lower()
    for suf, mul in (("gib", 1 << 30), ("mib", MIB), ("kib", KIB), ("g", 1 << 30),
                     ("m", MIB), ("k", KIB)):
        if s.endswith(suf):
            return int(float(s[:-len(suf)]) * mul)
    return int(s)


def zeros_sha256(n):
    d = hashlib.sha256()
    block = bytes(MIB)
    while n > 0:
        d.update(block[:min(n, MIB)])
        n -= MIB
    return d.hexdigest()


def rss(srv):
    return srv.proc_status("VmRSS")


def settle(srv, seconds=1.0):
    """Waits until the server's RSS has not moved for a moment."""
    last = rss(srv)
    deadline = time.monotonic() + seconds * 4
    time.sleep(seconds / 4)
    while time.monotonic() < deadline:
        time.sleep(seconds / 4)
        now = rss(srv)
        if abs(now - last) < 256 * KIB:
            return now
        last = now
    return rss(srv)


def stalled_puts(srv, n, size, sent, payload_sha):
    socks = []
    body = bytes(sent)
    for i in range(n):
        target = f"/bench/stalled-{i}"
        hdrs = {"Host": f"127.0.0.1:{srv.port}", "Content-Length": str(size)}
        hdrs, _ = h.sign_headers("PUT", target, hdrs, payload_sha)
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(h.request_bytes("PUT", target, hdrs) + body)
        socks.append(s)
    return socks


def watch_cut(socks, seconds, trickle):
    """Seconds until the server closed every socket (or None), and how many
    it closed.  trickle > 0: each PUT sends one more body byte every trickle
    seconds meanwhile (a slow body rather than a stalled one)."""
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    left = len(socks)
    t0 = time.monotonic()
    first = None
    next_byte = t0 + trickle
    while left and time.monotonic() - t0 < seconds:
        if trickle > 0 and time.monotonic() >= next_byte:
            next_byte += trickle
            for key in list(sel.get_map().values()):
                try:
                    key.fileobj.send(b"\0")
                except OSError:
                    pass
        for key, _ in sel.select(timeout=0.2):
            try:
                data = key.fileobj.recv(65536)
            except (ConnectionResetError, BlockingIOError):
                data = b""
            if data and b"RequestTimeout" not in data and not data.startswith(b"HTTP/1.1 4"):
                continue
            sel.unregister(key.fileobj)
            left -= 1
            if first is None:
                first = time.monotonic() - t0
    sel.close()
    took = time.monotonic() - t0
    return (took if left == 0 else None), first, len(socks) - left


def idle_conns(srv, n):
    socks = []
    for _ in range(n):
        socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
    return socks


def run_mode(mode, args, payload_sha):
    with tempfile.TemporaryDirectory(prefix=f"ol-slow-{mode}-") as d:
        # Default settings (so that older binaries run it too): the idle
        # connections stay under max_conns_per_ip's default of 1024.
        srv = h.make_mode_server(mode, Path(d))
        srv.start()
        out = {"mode": mode}
        try:
            assert h.signed_request(srv, "PUT", "/bench").status == 200
            assert h.signed_request(srv, "PUT", "/bench/warm", body=b"w" * 4096).status == 200
            base = settle(srv)
            socks = stalled_puts(srv, args.puts, args.put_size, args.sent, payload_sha)
            held = settle(srv, 2.0)
            out["put_rss0"] = base
            out["put_rss"] = held
            out["put_per_conn"] = (held - base) / args.puts
            if args.watch > 0:
                all_cut, first, ncut = watch_cut(socks, args.watch, args.trickle)
                out["cut_all_s"] = all_cut
                out["cut_first_s"] = first
                out["cut_n"] = ncut
                out["after_cut_rss"] = settle(srv)
            for s in socks:
                s.close()
            time.sleep(0.5)
            base = settle(srv)
            idle = idle_conns(srv, args.idle)
            held = settle(srv, 2.0)
            out["idle_per_conn"] = (held - base) / args.idle
            for s in idle:
                s.close()
        finally:
            srv.close()
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modes", default="sd,ec", help="sd (one drive), ec (six drives, 4+2)")
    ap.add_argument("--puts", type=int, default=100, help="stalled PUTs per mode")
    ap.add_argument("--put-size", type=parse_size, default=64 * MIB, help="their Content-Length")
    ap.add_argument("--sent", type=parse_size, default=256 * KIB,
                    help="body bytes each sends before it stalls")
    ap.add_argument("--idle", type=int, default=1000, help="idle connections per mode")
    ap.add_argument("--watch", type=float, default=0,
                    help="seconds to wait for the server to cut the stalled PUTs (0: do not)")
    ap.add_argument("--trickle", type=float, default=0,
                    help="while watching, each PUT sends a byte every this many seconds")
    ap.add_argument("--reference", default=None,
                    help="another openlake binary measured the same way, for ratios")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"# {' '.join([Path(sys.executable).name] + sys.argv)}")
    print(f"# binary {h.openlake_binary()}; {args.puts} stalled PUTs of "
          f"{args.put_size / MIB:.0f} MiB after {args.sent / KIB:.0f} KiB of body; "
          f"{args.idle} idle connections")
    payload_sha = zeros_sha256(args.put_size)
    rows = []
    binary = str(h.openlake_binary())
    for mode in args.modes.split(","):
        ref = None
        if args.reference:
            os.environ["OPENLAKE_BIN"] = args.reference
            ref = run_mode(mode.strip(), args, payload_sha)
            os.environ["OPENLAKE_BIN"] = binary
            print(f"{ref['mode']:>3}: reference: stalled PUT {ref['put_per_conn'] / MIB:7.2f} "
                  f"MiB/conn; idle {ref['idle_per_conn'] / KIB:6.1f} KiB/conn", flush=True)
        r = run_mode(mode.strip(), args, payload_sha)
        rows.append(r)
        line = (f"{r['mode']:>3}: stalled PUT {r['put_per_conn'] / MIB:7.2f} MiB/conn "
                f"(RSS {r['put_rss0'] / MIB:.0f} -> {r['put_rss'] / MIB:.0f} MiB); "
                f"idle {r['idle_per_conn'] / KIB:6.1f} KiB/conn")
        if "cut_n" in r:
            if r["cut_all_s"] is not None:
                line += (f"; all {r['cut_n']} stalled PUTs cut after {r['cut_all_s']:.1f} s "
                         f"(RSS then {r['after_cut_rss'] / MIB:.0f} MiB)")
            else:
                line += f"; {r['cut_n']} of {args.puts} cut within {args.watch:.0f} s"
        print(line, flush=True)
        if ref:
            def ratio(k):
                return r[k] / ref[k] if ref[k] > 0 else float("nan")
            print(f"{r['mode']:>3}: ratio to reference: stalled PUT {ratio('put_per_conn'):.2f}, "
                  f"idle connection {ratio('idle_per_conn'):.2f}", flush=True)


if __name__ == "__main__":
    main()
