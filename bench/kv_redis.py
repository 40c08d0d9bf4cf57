#!/usr/bin/env python3
"""The KV-cache namespace against redis-server (LMCache's default remote
store), same host, one run (issue 15).  A benchmark, not a test.

    /usr/bin/python3 bench/kv_redis.py [BUILD_DIR] [--blocks N] [--size BYTES]

Both stores are fed the same N blocks (KV chunks) in batches of 64 and read
back in batches: OpenLake through the native client's KV calls (one message
per batch), Redis through redis-py pipelines of MSET/MGET (one round trip per
batch), and a prefix lookup of all N keys (OpenLake match_prefix, Redis EXISTS
in one pipeline).  Prints blocks/s and GB/s and the ratios.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait(p):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", p), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {p} did not open")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--blocks", type=int, default=2048)
    ap.add_argument("--size", type=int, default=256 << 10)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    os.environ.setdefault("OPENLAKE_LIB", os.path.join(a.build, "libopenlake.so"))
    import redis
    import openlake
    from openlake.kv import chain_keys

    d = tempfile.mkdtemp(prefix="ol-kv-bench-")
    hp, rp = port(), port()
    mem = a.blocks * (a.size + 4096) * 2
    ol = subprocess.Popen([os.path.join(a.build, "openlake"), "server", os.path.join(d, "data"),
                           "--listen", f"127.0.0.1:{hp}", "--kv_memory_bytes", str(mem)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rs = subprocess.Popen(["redis-server", "--port", str(rp), "--bind", "127.0.0.1",
                           "--save", "", "--appendonly", "no", "--maxmemory", str(mem),
                           "--dir", d], stdout=subprocess.DEVNULL)
    try:
        wait(hp)
        wait(rp)
        keys = chain_keys(range(a.blocks * 16), 16)[:a.blocks]
        blocks = [os.urandom(64) * (a.size // 64) for _ in range(64)]
        vals = [blocks[i % 64] for i in range(a.blocks)]
        bufs = [bytearray(a.size) for _ in range(a.batch)]
        res = {}
        with openlake.Client(f"http://127.0.0.1:{hp}") as c:
            kv = c.kv()
            t = time.perf_counter()
            for o in range(0, a.blocks, a.batch):
                kv.put(keys[o:o + a.batch], vals[o:o + a.batch])
            res["openlake put"] = time.perf_counter() - t
            t = time.perf_counter()
            for o in range(0, a.blocks, a.batch):
                got = kv.get(keys[o:o + a.batch], bufs[:len(keys[o:o + a.batch])])
                assert all(g == a.size for g in got), got
            res["openlake get"] = time.perf_counter() - t
            t = time.perf_counter()
            for _ in range(10):
                assert kv.match_prefix(keys[:min(a.blocks, 4096)]) == min(a.blocks, 4096)
            res["openlake match_prefix"] = (time.perf_counter() - t) / 10
        r = redis.Redis(host="127.0.0.1", port=rp)
        t = time.perf_counter()
        for o in range(0, a.blocks, a.batch):
            p = r.pipeline(transaction=False)
            p.mset({keys[i]: vals[i] for i in range(o, min(o + a.batch, a.blocks))})
            p.execute()
        res["redis put"] = time.perf_counter() - t
        t = time.perf_counter()
        for o in range(0, a.blocks, a.batch):
            got = r.mget(keys[o:o + a.batch])
            assert all(g is not None and len(g) == a.size for g in got)
        res["redis get"] = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(10):
            p = r.pipeline(transaction=False)
            for k in keys[:min(a.blocks, 4096)]:
                p.exists(k)
            assert all(p.execute())
        res["redis match_prefix"] = (time.perf_counter() - t) / 10
    finally:
        ol.terminate()
        rs.terminate()
        ol.wait()
        rs.wait()
        shutil.rmtree(d, ignore_errors=True)
    total = a.blocks * a.size / 1e9
    print(f"{a.blocks} blocks of {a.size} bytes, batches of {a.batch}")
    for op in ("put", "get"):
        o, rr = res[f"openlake {op}"], res[f"redis {op}"]
        print(f"{op}: openlake {a.blocks / o:.0f} blocks/s ({total / o:.2f} GB/s), "
              f"redis {a.blocks / rr:.0f} blocks/s ({total / rr:.2f} GB/s), ratio {rr / o:.2f}")
    n = min(a.blocks, 4096)
    o, rr = res["openlake match_prefix"], res["redis match_prefix"]
    print(f"prefix lookup of {n} keys: openlake {o * 1e6:.0f} us, redis {rr * 1e6:.0f} us, "
          f"ratio {rr / o:.2f}")


if __name__ == "__main__":
    main()
