#!/usr/bin/env python3
"""Encrypted reads against plain reads (issue 16: "encrypted reads must stay
within 0.8x of plain reads").

One OpenLake server (one drive, or --ec for six drives 4+2) in a temporary
directory; two buckets with the same objects written by `openlake bench
--prepare`: "plain", and "sse" with default encryption (SSE-S3), so every
object in it is sealed (obj/sse.h).  Then GETs of each, interleaved run by
run, with the same tool and load; the figure is the median of the runs and
the ratio sse / plain.

    bench/sse.py [--runs 3] [--duration 3s] [--sizes 64KiB,1MiB,16MiB] [--ec]
                 [--concurrency 1,4] [--decrypt-threads 0,-1] [--server-threads 0]

With --decrypt-threads 0,-1 one server runs with the decrypt pool off and
one with it as derived from the cores, their runs interleaved (bench/sse_gpu.sh).
With --bin A,B one server runs each binary (an A/B of two builds), their
runs interleaved likewise.  Each row also gives the server's CPU per GET
(utime + stime from /proc over the run, microseconds), which a loaded
machine moves less than throughput.
An entry T:S also sets sse_decrypt_spin_us to S (-1:0,-1: the pool with its
threads sleeping at once against the default spin).  At the end each
server's openlake_sse_* metrics are printed: windows opened where the source
handed them over (in_place, two_pieces) or copied first, and the parts of
split windows opened by the pool or taken back by the loop thread.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
import helpers  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench(binary, endpoint, bucket, size, duration, conc, prepare, a):
    args = [binary, "bench", "--endpoint", endpoint, "--bucket", bucket, "--op", "get",
            "--size", size, "--objects", str(a.objects), "--concurrency", str(conc),
            "--threads", str(a.client_threads),
            "--duration", duration, "--json", "-", "--quiet"]
    if prepare:
        args.append("--prepare")
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"bench failed: {out.stderr[-2000:]}")
    text = out.stdout
    return json.loads(text[text.index("{"):])


def cpu_ticks(srv):
    with open(f"/proc/{srv.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def start_server(binary, ec, server_threads, decrypt_threads):
    """A server in its own temporary directory: (process, endpoint, work)."""
    work = tempfile.mkdtemp(prefix="ol-bench-sse-")
    port = free_port()
    data = os.path.join(work, "d{1...6}") if ec else os.path.join(work, "data")
    cmd = [binary, "server", data, "--listen", f"127.0.0.1:{port}", "--metrics_public", "yes"]
    if server_threads:
        cmd += ["--threads", str(server_threads)]
    if decrypt_threads is not None:
        threads, _, spin = decrypt_threads.partition(":")
        cmd += ["--sse_decrypt_threads", threads]
        if spin:
            cmd += ["--sse_decrypt_spin_us", spin]
    srv = subprocess.Popen(cmd, stdout=open(os.path.join(work, "server.log"), "w"),
                           stderr=subprocess.STDOUT)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if srv.poll() is not None:
                raise SystemExit(f"server exited: {open(os.path.join(work, 'server.log')).read()}")
            time.sleep(0.1)
    endpoint = f"http://127.0.0.1:{port}"
    s3 = helpers.make_client(endpoint)
    s3.create_bucket(Bucket="plain")
    s3.create_bucket(Bucket="sse")
    s3.put_bucket_encryption(Bucket="sse", ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    return srv, endpoint, work, s3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", default="3s")
    ap.add_argument("--sizes", default="64KiB,1MiB,16MiB")
    ap.add_argument("--concurrency", default="8",
                    help="client connections; a comma list runs each")
    ap.add_argument("--client-threads", type=int, default=2)
    ap.add_argument("--objects", type=int, default=16)
    ap.add_argument("--server-threads", type=int, default=2,
                    help="server loop threads (0: one per core)")
    ap.add_argument("--decrypt-threads", default="",
                    help="sse_decrypt_threads; a comma list (e.g. 0,-1) starts one server "
                         "for each and interleaves their runs (empty: the server's default)")
    ap.add_argument("--ec", action="store_true", help="six drives, 4+2")
    ap.add_argument("--bin", default=os.environ.get("OPENLAKE_BIN",
                                                    os.path.join(ROOT, "build", "openlake")),
                    help="the openlake binary; a comma list starts one server for each "
                         "(times each --decrypt-threads) and interleaves their runs")
    a = ap.parse_args()
    bins = a.bin.split(",")
    # A server per binary and decrypt setting, named by both when there
    # are several binaries.
    dts = []
    for bi, b in enumerate(bins):
        for dt in (a.decrypt_threads.split(",") if a.decrypt_threads else [None]):
            label = "default" if dt is None else str(dt)
            dts.append((b, dt, f"{label} bin{chr(65 + bi)}" if len(bins) > 1 else label))
    servers = []
    hz = os.sysconf("SC_CLK_TCK")
    try:
        for i, (b, dt, _) in enumerate(dts):
            servers.append((i, b) + start_server(b, a.ec, a.server_threads, dt))
        if len(bins) > 1:
            for bi, b in enumerate(bins):
                print(f"# bin{chr(65 + bi)}: {b}")
        concs = [int(c) for c in a.concurrency.split(",")]
        print(f"# {'EC 4+2' if a.ec else 'one drive'}, server threads "
              f"{a.server_threads or 'all'}, {a.runs} x {a.duration}, MiB/s (median)")
        print("| size | clients | decrypt threads | plain | SSE-S3 | ratio "
              "| plain us CPU/GET | SSE us CPU/GET |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for size in a.sizes.split(","):
            for i, binary, srv, ep, work, s3 in servers:
                for b in ("plain", "sse"):
                    bench(binary, ep, b, size, "0", 8, True, a)
            for conc in concs:
                res = {(i, b): [] for i in range(len(dts)) for b in ("plain", "sse")}
                cpu = {(i, b): [] for i in range(len(dts)) for b in ("plain", "sse")}
                for _ in range(a.runs):
                    for i, binary, srv, ep, work, s3 in servers:
                        for b in ("plain", "sse"):
                            c0 = cpu_ticks(srv)
                            j = bench(binary, ep, b, size, a.duration, conc, False, a)
                            c1 = cpu_ticks(srv)
                            if j["errors"]["total"]:
                                raise SystemExit(f"errors: {j['errors']}")
                            res[(i, b)].append(j["total"]["mib_per_s"])
                            cpu[(i, b)].append((c1 - c0) / hz * 1e6 / max(j["total"]["ops"], 1))
                for i, (_, _, label) in enumerate(dts):
                    p = statistics.median(res[(i, "plain")])
                    e = statistics.median(res[(i, "sse")])
                    pc = statistics.median(cpu[(i, "plain")])
                    ec = statistics.median(cpu[(i, "sse")])
                    print(f"| {size} | {conc} | {label} | {p:.0f} | {e:.0f} | {e / p:.2f} "
                          f"| {pc:.0f} | {ec:.0f} |")
                sys.stdout.flush()
        for i, binary, srv, ep, work, s3 in servers:
            head = s3.head_object(Bucket="sse", Key="obj-00000000")
            assert head.get("ServerSideEncryption") == "AES256", "the sse bucket is not encrypted"
            with urllib.request.urlopen(ep + "/_openlake/metrics", timeout=10) as r:
                lines = [ln.split(None, 1) for ln in r.read().decode().splitlines()
                         if ln.startswith("openlake_sse_")]
            label = dts[i][2]
            print(f"# decrypt threads {label}: " +
                  ", ".join(f"{k.replace('openlake_sse_', '')} {v}" for k, v in lines))
    finally:
        for i, binary, srv, ep, work, s3 in servers:
            srv.terminate()
            srv.wait()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
