#!/usr/bin/env python3
"""Direct reads (docs/PROTOCOL.md "Direct reads") against GETs through one node: a
3-node cluster (3 x 2 drives, EC 4+2, own etcd, UCX on loopback), GETs with the native
client (the Python package over libopenlake) of one size, by three clients opened side
by side in one process: `direct` (the default: LAYOUT, then SHARD_GETs; reads up to
OPENLAKE_CLIENT_INLINE_MAX come back in LAYOUT's reply), `eager` (INLINE_MAX=0: every
read by SHARD_GETs) and `node` (OPENLAKE_CLIENT_DIRECT=0: GET through one node).
Rounds interleave the clients (order rotating); each round times `--reads` GETs per
client, one at a time, into one buffer (--batch: one get_many of them).  Then a node other than the one asked is killed
and the rounds run again (direct: rebuilt by the client; node: rebuilt by the node).
Prints medians (ms per GET, GB/s) and ratios to `node`.
  UCX_NET_DEVICES=lo OPENLAKE_BIN=build/openlake bench/direct.py --size 64MiB [--rounds 5]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import cluster  # noqa: E402
import run  # noqa: E402

SIZES = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_size(s):
    for u, m in SIZES.items():
        if s.endswith(u):
            return int(float(s[:-len(u)]) * m)
    return int(s)


def open_client(ol, endpoint, env):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return ol.Client(endpoint)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


BATCH = False


def rounds(clients, bucket, keys, size, n, count):
    bufs = [bytearray(size) for _ in range(n if BATCH else 1)]
    res = {name: [] for name, _ in clients}
    for r in range(count):
        order = clients[r % len(clients):] + clients[:r % len(clients)]
        for name, c in order:
            t0 = time.perf_counter()
            if BATCH:  # one ol_client_run of n GETs
                got = c.get_many([(bucket, keys[i % len(keys)], bufs[i]) for i in range(n)])
                assert got == [size] * n, (name, got)
            else:
                for i in range(n):
                    got = c.get_into(bucket, keys[i % len(keys)], bufs[0])
                    assert got == size, (name, got)
            res[name].append((time.perf_counter() - t0) / n)
    return res


def report(title, res, size, base="node"):
    print(title)
    b = statistics.median(res[base])
    for name, v in res.items():
        m = statistics.median(v)
        print("  %-6s %8.3f ms/GET  %6.2f GB/s  x%.2f vs %s  (runs: %s)" % (
            name, m * 1e3, size / m / 1e9, b / m, base, " ".join("%.2f" % (x * 1e3) for x in v)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="64MiB")
    ap.add_argument("--objects", type=int, default=2)
    ap.add_argument("--reads", type=int, default=0, help="GETs per client per round (0: ~256 MiB)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-down", action="store_true")
    ap.add_argument("--batch", action="store_true",
                    help="each round: one get_many of --reads GETs (ol_client_run)")
    ap.add_argument("--bin", default=os.environ.get("OPENLAKE_BIN", "build/openlake"))
    a = ap.parse_args()
    global BATCH
    BATCH = a.batch
    os.environ.setdefault("UCX_NET_DEVICES", "lo")
    binary = os.path.abspath(a.bin)
    os.environ["OPENLAKE_BIN"] = binary
    from helpers import import_openlake, make_client
    ol = import_openlake()
    size = parse_size(a.size)
    n = a.reads or max(1, min(64, (256 << 20) // size))
    procs = []
    log = open(os.environ.get("DIRECT_LOG", "/tmp/bench_direct.log"), "w")
    tmp = tempfile.mkdtemp(prefix="bench-direct-")
    clients = []
    try:
        ports, nps = cluster.start_cluster(binary, tmp, 3, 2, a.threads, log, procs)
        ep = "http://127.0.0.1:%d" % ports[0]
        make_client(ep).create_bucket(Bucket="bdirect")
        data = os.urandom(size)
        clients = [("direct", open_client(ol, ep, {})),
                   ("eager", open_client(ol, ep, {"OPENLAKE_CLIENT_INLINE_MAX": "0"})),
                   ("node", open_client(ol, ep, {"OPENLAKE_CLIENT_DIRECT": "0"}))]
        keys = ["o%d" % i for i in range(a.objects)]
        for k in keys:
            clients[0][1].put("bdirect", k, data)
        rounds(clients, "bdirect", keys, size, 1, 1)  # warm-up, uncounted
        print("size %s, %d GETs per client per round%s, %d rounds, %d objects" % (
            a.size, n, " (one batch)" if BATCH else "", a.rounds, a.objects))
        report("all nodes up:", rounds(clients, "bdirect", keys, size, n, a.rounds), size)
        if not a.no_down:
            nps[1].kill()
            nps[1].wait()
            rounds(clients, "bdirect", keys, size, 1, 1)
            report("node n2 down:", rounds(clients, "bdirect", keys, size, n, a.rounds), size)
        for name, c in clients:
            print("  stats %s: %s" % (name, c.stats()))
    finally:
        for _, c in clients:
            c.close()
        run.stop_all(procs)
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
