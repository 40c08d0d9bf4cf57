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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
import helpers  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench(binary, endpoint, bucket, size, duration, conc, prepare):
    args = [binary, "bench", "--endpoint", endpoint, "--bucket", bucket, "--op", "get",
            "--size", size, "--objects", "16", "--concurrency", str(conc), "--threads", "2",
            "--duration", duration, "--json", "-", "--quiet"]
    if prepare:
        args.append("--prepare")
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"bench failed: {out.stderr[-2000:]}")
    text = out.stdout
    return json.loads(text[text.index("{"):])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", default="3s")
    ap.add_argument("--sizes", default="64KiB,1MiB,16MiB")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--ec", action="store_true", help="six drives, 4+2")
    ap.add_argument("--bin", default=os.environ.get("OPENLAKE_BIN",
                                                    os.path.join(ROOT, "build", "openlake")))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ol-bench-sse-")
    port = free_port()
    data = os.path.join(work, "d{1...6}") if a.ec else os.path.join(work, "data")
    cmd = [a.bin, "server", data, "--listen", f"127.0.0.1:{port}", "--threads", "2"]
    srv = subprocess.Popen(cmd, stdout=open(os.path.join(work, "server.log"), "w"),
                           stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        s3 = helpers.make_client(endpoint)
        s3.create_bucket(Bucket="plain")
        s3.create_bucket(Bucket="sse")
        s3.put_bucket_encryption(Bucket="sse", ServerSideEncryptionConfiguration={"Rules": [
            {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
        print(f"# {'EC 4+2' if a.ec else 'one drive'}, GET c={a.concurrency}, "
              f"{a.runs} x {a.duration}, MiB/s (median)")
        print("| size | plain | SSE-S3 | ratio |")
        print("|---|---:|---:|---:|")
        for size in a.sizes.split(","):
            res = {"plain": [], "sse": []}
            for b in res:
                bench(a.bin, endpoint, b, size, "0", a.concurrency, True)
            for _ in range(a.runs):
                for b in res:
                    j = bench(a.bin, endpoint, b, size, a.duration, a.concurrency, False)
                    if j["errors"]["total"]:
                        raise SystemExit(f"errors: {j['errors']}")
                    res[b].append(j["total"]["mib_per_s"])
            p, e = statistics.median(res["plain"]), statistics.median(res["sse"])
            print(f"| {size} | {p:.0f} | {e:.0f} | {e / p:.2f} |")
            sys.stdout.flush()
        head = s3.head_object(Bucket="sse", Key="obj-00000000")
        assert head.get("ServerSideEncryption") == "AES256", "the sse bucket is not encrypted"
    finally:
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
