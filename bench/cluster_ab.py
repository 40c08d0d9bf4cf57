#!/usr/bin/env python3
"""A/B of two openlake binaries on cluster small operations: one 3-node cluster (3 x 2 drives,
EC 4+2, own etcd) per binary, both up at once, runs interleaved (order alternating by round);
op/s, p50, p99 and server CPU per op (utime+stime of the three node processes).  UCX_NET_DEVICES=lo.
  ab.py --a BIN [--b BIN] [--rounds 3] [--op put] [--size 4KiB] [--conc 32] [--dur 3s] [--hold]
"""
import argparse, os, sys, tempfile, time, shutil
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run, cluster

ap = argparse.ArgumentParser()
ap.add_argument("--a", required=True); ap.add_argument("--b")
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--ops", default="put")
ap.add_argument("--size", default="4KiB"); ap.add_argument("--conc", type=int, default=32)
ap.add_argument("--dur", default="3s"); ap.add_argument("--hold", action="store_true")
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
bins = [("A", a.a)] + ([("B", a.b)] if a.b else [])
procs = []
log = open(os.environ.get("AB_LOG", "/tmp/cluster_ab.log"), "w")
sides = []
try:
    for name, b in bins:
        tmp = tempfile.mkdtemp(prefix="cperf-ab-")
        ports, nps = cluster.start_cluster(b, tmp, 3, 2, a.threads, log, procs)
        sides.append((name, b, "http://127.0.0.1:%d" % ports[0], [p.pid for p in nps], tmp))
        print(name, "endpoint", sides[-1][2], "pids", sides[-1][3], flush=True)
    if a.hold:
        print("holding; ctrl-c to stop", flush=True)
        while True: time.sleep(1)
    res = {}
    for op in a.ops.split(","):
        for name, b, ep, pids, tmp in sides:
            if op == "get":
                bb = run.Bench(b, "0", log)
                bb.run(["--endpoint", ep, "--bucket", "bget", "--op", "put", "--prepare", "--size", a.size,
                        "--objects", "500", "--concurrency", "16", "--duration", "0"], check=False)
    for r in range(a.rounds):
        for op in a.ops.split(","):
            order = sides if r % 2 == 0 else list(reversed(sides))
            for name, b, ep, pids, tmp in order:
                bb = run.Bench(b, a.dur, log)
                c0 = sum(run.proc_tree_cpu(p) for p in pids)
                out = bb.run(["--endpoint", ep, "--bucket", "bget" if op == "get" else "bput", "--op", op,
                              "--size", a.size, "--concurrency", str(a.conc), "--objects", "500",
                              "--duration", a.dur], check=False)
                cpu = sum(run.proc_tree_cpu(p) for p in pids) - c0
                t = out["total"]; n = t.get("ops", 0) or t["ops_per_s"]
                ops = t["ops_per_s"] * float(a.dur.rstrip("s"))
                line = "%s %s r%d: %8.0f op/s p50 %7.2f ms p99 %7.2f ms cpu/op %6.0f us errors %d" % (
                    op, name, r, t["ops_per_s"], t["latency_us"]["p50"] / 1000, t["latency_us"]["p99"] / 1000,
                    cpu / max(ops, 1) * 1e6, out["errors"]["total"])
                print(line, flush=True)
                res.setdefault((op, name), []).append((t["ops_per_s"], t["latency_us"]["p50"], cpu / max(ops, 1) * 1e6))
    for (op, name), v in sorted(res.items()):
        med = lambda i: sorted(x[i] for x in v)[len(v) // 2]
        print("MEDIAN %s %s: %.0f op/s p50 %.2f ms cpu/op %.0f us" % (op, name, med(0), med(1) / 1000, med(2)))
finally:
    run.stop_all(procs)
    for s in sides: shutil.rmtree(s[4], ignore_errors=True)
