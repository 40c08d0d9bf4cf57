#!/usr/bin/env python3
"""A 3-node cluster against one node, through the GET and PUT rows of the
standard matrix (run through bench/cluster.sh).

Single: one `openlake server` with six drives, EC 4+2 (as run.py's EC
column).  Cluster: etcd and three `openlake server --cluster` nodes with two
drives each, one pool of 4+2 (`openlake admin cluster pool`), so every set
spans the three nodes and four of an object's six shards travel over UCX.
Both on 127.0.0.1, with the same number of loop threads per process.  The
load comes from `openlake bench` with run.py's MATRIX rows and its Bench
wrapper; against the cluster it goes to node 1's S3 port only (the node that
coordinates every request: the cost of remote shards shows, the spreading of
requests over nodes does not).  Server CPU is summed over the three nodes.

Prints one line per row and a table with the ratio cluster / single for each
row; the caller appends it to bench/RESULTS.md.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/run.py: the matrix and the bench wrapper)

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def start_etcd(tmp, log):
    port, peer = run.free_port(), run.free_port()
    client, purl = "http://127.0.0.1:%d" % port, "http://127.0.0.1:%d" % peer
    p = subprocess.Popen([ETCD, "--name", "bench", "--data-dir", os.path.join(tmp, "etcd"),
                          "--listen-client-urls", client, "--advertise-client-urls", client,
                          "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
                          "--initial-cluster", "bench=" + purl, "--log-level", "warn"],
                         stdout=log, stderr=log)
    t0 = time.time()
    while time.time() - t0 < 20:
        try:
            req = urllib.request.Request(client + "/v3/kv/range", data=b'{"key":"Lw=="}',
                                         method="POST")
            urllib.request.urlopen(req, timeout=1).read()
            return p, "127.0.0.1:%d" % port
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.1)
    raise RuntimeError("etcd did not start; see the log")


def start_cluster(binary, tmp, nodes, dirs, threads, log, procs):
    """etcd and `nodes` nodes of `dirs` drives, one 4+2 pool; returns the
    nodes' S3 ports and processes."""
    etcd, endpoint = start_etcd(tmp, log)
    procs.append(etcd)
    env = dict(os.environ)
    env.setdefault("UCX_NET_DEVICES", "lo")
    ports, nps = [], []
    for i in range(1, nodes + 1):
        port = run.free_port()
        root = os.path.join(tmp, "n%d" % i)
        os.makedirs(root)
        p = subprocess.Popen([binary, "server"] +
                             [os.path.join(root, "d%d" % j) for j in range(dirs)] +
                             ["--listen", "127.0.0.1:%d" % port, "--threads", str(threads),
                              "--cluster", endpoint, "--node", "n%d" % i,
                              "--drive_listen", "127.0.0.1:0"],
                             stdout=log, stderr=log, env=env)
        procs.append(p)
        ports.append(port)
        nps.append(p)
    names = ",".join("n%d" % i for i in range(1, nodes + 1))
    t0 = time.time()
    while True:
        out = subprocess.run([binary, "admin", "cluster", "pool", "--cluster", endpoint,
                              "--nodes", names, "--ec_data", "4", "--ec_parity", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if out.returncode == 0:
            break
        if time.time() - t0 > 30 or any(p.poll() is not None for p in nps):
            raise RuntimeError("no pool: " + out.stdout)
        time.sleep(0.3)
    for port, p in zip(ports, nps):
        run.wait_port(port, p, timeout=30)
    return ports, nps


def measure(b, endpoint, args, pids):
    """b.run with the server CPU summed over pids."""
    c0 = sum(run.proc_tree_cpu(p) for p in pids)
    res = b.run(["--endpoint", endpoint] + args, check=False)
    res["server_cpu_s"] = sum(run.proc_tree_cpu(p) for p in pids) - c0
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", default="3s", help="per row and side (one run each)")
    ap.add_argument("--threads", type=int, default=2, help="loop threads of every server")
    ap.add_argument("--bin", default=os.environ.get("OPENLAKE_BIN"))
    ap.add_argument("--out", default=os.path.join(run.ROOT, "bench", "results"))
    a = ap.parse_args()
    binary = a.bin
    for cand in ("build-bench/openlake", "build/openlake"):
        if not binary and os.access(os.path.join(run.ROOT, cand), os.X_OK):
            binary = os.path.join(run.ROOT, cand)
    if not binary:
        sys.exit("cluster.sh: no openlake binary (set OPENLAKE_BIN or build into build/)")
    if not os.path.exists(ETCD):
        sys.exit("cluster.sh: etcd is needed (apt-get install etcd-server)")
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="olbench-cluster-")
    log = open(os.path.join(a.out, "cluster.log"), "w")
    procs, rows = [], []
    t_start = time.time()
    try:
        sport = run.free_port()
        os.makedirs(os.path.join(tmp, "single"))
        single = subprocess.Popen([binary, "server"] +
                                  [os.path.join(tmp, "single", "d%d" % i) for i in range(6)] +
                                  ["--ec_data", "4", "--ec_parity", "2", "--threads",
                                   str(a.threads), "--listen", "127.0.0.1:%d" % sport],
                                  stdout=log, stderr=log)
        procs.append(single)
        run.wait_port(sport, single)
        cports, cprocs = start_cluster(binary, tmp, 3, 2, a.threads, log, procs)
        sides = [("single", "http://127.0.0.1:%d" % sport, [single.pid]),
                 ("cluster", "http://127.0.0.1:%d" % cports[0], [p.pid for p in cprocs])]
        b = run.Bench(binary, a.duration, log)
        for op, label, size, conc, objs in run.MATRIX:
            bucket = "b%s%s" % (op, label.lower())
            common = ["--bucket", bucket, "--size", label, "--concurrency", str(conc),
                      "--objects", str(objs)]
            res = {}
            for name, ep, pids in sides:
                if op == "get":
                    b.run(["--endpoint", ep, "--bucket", bucket, "--op", "put", "--prepare",
                           "--size", label, "--objects", str(objs), "--concurrency",
                           str(min(conc, 16)), "--duration", "0"], check=False)
                    measure(b, ep, common + ["--op", "get", "--duration", "1s"], pids)  # warm
                run.settle()
                res[name] = run.summarize([measure(b, ep, common + ["--op", op, "--duration",
                                                                     a.duration], pids)], name)
            s, c = res["single"], res["cluster"]
            row = {"test": "%s %s c=%d" % (op.upper(), label, conc), "op": op, "single": s,
                   "cluster": c,
                   "ratio": c["mib_per_s"] / s["mib_per_s"] if s["mib_per_s"] > 0 else None}
            rows.append(row)
            print("%-18s single %-26s cluster %-26s ratio %s  errors %d / %d" % (
                row["test"], run.fmt_rate(s, op), run.fmt_rate(c, op),
                "%.2f" % row["ratio"] if row["ratio"] is not None else "-",
                s["errors"], c["errors"]), flush=True)
    finally:
        run.stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    m, tree = run.machine(), run.tree_state()
    lines = ["Machine: %s, %s cores, Linux %s; tree %s%s; one run of %s per row and side; "
             "wall %.0f s." % (m["cpu"], m["cores"], m["kernel"], tree.get("commit"),
                               " (dirty)" if tree.get("dirty") else "", a.duration,
                               time.time() - t_start),
             "",
             "| test | single node, 6 drives EC 4+2 | 3 nodes x 2 drives, EC 4+2 "
             "(S3 to node 1) | ratio cluster / single | p50 / p99 single | p50 / p99 cluster "
             "| server CPU-s/GiB single / cluster | errors single / cluster |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    lat = lambda s: "%s / %s" % (run.fmt_lat(s["p50_us"]), run.fmt_lat(s["p99_us"]))
    for r in rows:
        s, c = r["single"], r["cluster"]
        lines.append("| %s | %s | %s | %s | %s | %s | %.2f / %.2f | %s / %s |" % (
            r["test"], run.fmt_rate(s, r["op"]), run.fmt_rate(c, r["op"]),
            "%.2f" % r["ratio"] if r["ratio"] is not None else "-", lat(s), lat(c),
            s["server_cpu_s_per_gib"], c["server_cpu_s_per_gib"], s["errors"], c["errors"]))
    md = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, "cluster.json"), "w") as f:
        json.dump({"machine": m, "tree": tree, "duration": a.duration, "rows": rows}, f, indent=2)
    with open(os.path.join(a.out, "cluster.md"), "w") as f:
        f.write(md)
    print()
    print(md)


if __name__ == "__main__":
    main()
