#!/usr/bin/env python3
"""The standard OpenLake benchmark matrix (run through bench/run.sh).

Starts OpenLake (one drive, in a temporary directory) and nginx (static files
with sendfile for GET, WebDAV PUT for PUT) on free 127.0.0.1 ports, drives
both with `openlake bench`, measures raw ceilings (memcpy, MD5, O_DIRECT
write), and writes bench/results/latest.md and latest.json.  Every figure is
the median of several runs; every OpenLake figure comes with its ratio to the
reference measured in the same run.
"""
import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20

# (op, size label, bytes, concurrency, working-set objects)
MATRIX = [
    ("get", "4KiB", 4096, 64, 1000),
    ("get", "1MiB", MiB, 16, 200),
    ("get", "64MiB", 64 * MiB, 4, 8),
    ("put", "4KiB", 4096, 64, 1000),
    ("put", "1MiB", MiB, 16, 200),
    ("put", "64MiB", 64 * MiB, 4, 8),
]
LIST_KEYS = 100000

NGINX_CONF = """
{user}
worker_processes {workers};
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    client_max_body_size 0;
    client_body_buffer_size 1m;
    client_body_temp_path {tmp}/www/.tmp;
    proxy_temp_path {tmp}/ngx-proxy;
    fastcgi_temp_path {tmp}/ngx-fastcgi;
    types {{ }}
    default_type application/octet-stream;
    server {{
        listen 127.0.0.1:{port};
        root {tmp}/www;
        location /files/ {{ }}
        location /put/ {{
            dav_methods PUT DELETE;
            create_full_put_path on;
        }}
    }}
}}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, timeout=20):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError("server exited early (rc %s)" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("port %d did not open" % port)


def proc_tree_cpu(pid):
    """utime+stime (seconds) of pid and its child processes (nginx workers)."""
    hz = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    # Children by parent pid (/proc/PID/task/*/children needs CONFIG_PROC_CHILDREN).
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    pids.append(int(d))
        except (OSError, ValueError, IndexError):
            pass
    total = 0
    for p in pids:
        try:
            with open("/proc/%d/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / hz


class Bench:
    def __init__(self, binary, duration, log):
        self.bin = binary
        self.duration = duration
        self.log = log

    def run(self, args, server_pid=None, check=True):
        cmd = [self.bin, "bench", "--quiet", "--json", "-"] + args
        self.log.write("$ " + " ".join(cmd) + "\n")
        self.log.flush()
        c0 = proc_tree_cpu(server_pid) if server_pid else 0
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True)
        c1 = proc_tree_cpu(server_pid) if server_pid else 0
        out = p.stdout
        start = out.find("{\n")
        if start < 0:
            raise RuntimeError("bench printed no JSON (rc %d): %s" % (p.returncode, out[-500:]))
        res = json.loads(out[start:])
        res["server_cpu_s"] = c1 - c0
        self.log.write(json.dumps(res["total"]) + " errors=%d\n" % res["errors"]["total"])
        if check and p.returncode not in (0, 1):
            raise RuntimeError("bench failed: rc %d" % p.returncode)
        return res


def med(xs):
    return statistics.median(xs) if xs else 0.0


def summarize(runs, what):
    """Medians over runs of one configuration."""
    gib = [r["total"]["bytes"] / (1 << 30) for r in runs]
    return {
        "mib_per_s": med([r["total"]["mib_per_s"] for r in runs]),
        "ops_per_s": med([r["total"]["ops_per_s"] for r in runs]),
        "keys_per_s": med([r.get("keys_per_s", 0) for r in runs]),
        "p50_us": med([r["total"]["latency_us"]["p50"] for r in runs]),
        "p99_us": med([r["total"]["latency_us"]["p99"] for r in runs]),
        "errors": sum(r["errors"]["total"] for r in runs),
        "server_cpu_s_per_gib": med([r["server_cpu_s"] / g for r, g in zip(runs, gib) if g > 0]),
        "client_cores": med([r["client_cpu"]["cores"] for r in runs]),
        "client_cpu_us_per_op": med([r["client_cpu"]["cpu_us_per_op"] for r in runs]),
        "runs": len(runs),
        "what": what,
    }


def ceilings(tmp, log):
    out = {}
    exe = os.path.join(tmp, "ceil")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc and subprocess.run([cc, "-O2", "-o", exe, os.path.join(ROOT, "bench", "ceil.c"),
                              "-lcrypto"], stderr=log).returncode == 0:
        out.update(json.loads(subprocess.run([exe], stdout=subprocess.PIPE, text=True).stdout))
    # O_DIRECT sequential write of 1 GiB in 4 MiB blocks to the data file system.
    f = os.path.join(tmp, "dd.bin")
    p = subprocess.run(["dd", "if=/dev/zero", "of=" + f, "bs=4M", "count=256", "oflag=direct",
                        "conv=fdatasync"], stderr=subprocess.PIPE, text=True)
    try:
        os.unlink(f)
    except OSError:
        pass
    line = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    log.write("dd: " + line + "\n")
    try:
        secs = float(line.split(" s, ")[0].split(",")[-1].strip().split()[0])
        out["odirect_write_gbps"] = round((256 * 4 * MiB) / secs / 1e9, 3)
    except (ValueError, IndexError):
        out["odirect_write_gbps"] = None
    return out


def fmt_rate(s, op):
    if op == "list":
        return "%.0f keys/s" % s["keys_per_s"]
    if s["mib_per_s"] < 100:
        return "%.1f MiB/s (%.0f op/s)" % (s["mib_per_s"], s["ops_per_s"])
    return "%.0f MiB/s (%.0f op/s)" % (s["mib_per_s"], s["ops_per_s"])


def fmt_lat(us):
    return "%.2f ms" % (us / 1000.0) if us >= 1000 else "%d µs" % us


def machine():
    model = ""
    try:
        for line in subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one run per figure")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", default="5s")
    ap.add_argument("--bin", default=os.environ.get("OPENLAKE_BIN"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--only", default="", help="comma list: get,put,list,ceil")
    a = ap.parse_args()
    runs = 1 if a.quick else a.runs
    binary = a.bin
    if not binary:
        for cand in ("build-bench/openlake", "build/openlake"):
            if os.access(os.path.join(ROOT, cand), os.X_OK):
                binary = os.path.join(ROOT, cand)
                break
    if not binary:
        sys.exit("run.sh: no openlake binary (set OPENLAKE_BIN or build into build/)")
    only = set(x for x in a.only.split(",") if x) or {"get", "put", "list", "ceil"}
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="olbench-")
    log = open(os.path.join(a.out, "latest.log"), "w")
    procs = []
    results = {"machine": machine(), "runs": runs, "duration": a.duration,
               "command": " ".join(sys.argv), "rows": [], "ceilings": {}}
    t_start = time.time()
    try:
        # OpenLake, one drive.
        ol_port = free_port()
        ol = subprocess.Popen([binary, "server", os.path.join(tmp, "ol"), "--listen",
                               "127.0.0.1:%d" % ol_port], stdout=log, stderr=log)
        procs.append(ol)
        wait_port(ol_port, ol)
        # nginx.
        ng_port = free_port()
        os.makedirs(os.path.join(tmp, "www", "files"))
        os.makedirs(os.path.join(tmp, "www", "put"))
        os.makedirs(os.path.join(tmp, "www", ".tmp"))
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(tmp=tmp, port=ng_port, workers=os.cpu_count() or 1,
                                      user="user root;" if os.geteuid() == 0 else ""))
        ng = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stdout=log, stderr=log)
        procs.append(ng)
        wait_port(ng_port, ng)

        b = Bench(binary, a.duration, log)
        olep = ["--endpoint", "http://127.0.0.1:%d" % ol_port]
        ngep = ["--endpoint", "http://127.0.0.1:%d" % ng_port, "--no-sign"]
        for op, label, size, conc, objs in MATRIX:
            if op not in only:
                continue
            bucket = "b%s%s" % (op, label.lower())
            common = ["--size", label, "--concurrency", str(conc), "--objects", str(objs),
                      "--duration", a.duration]
            if op == "get":
                # Same bytes on both sides: OpenLake via PUTs, nginx via files.
                b.run(olep + ["--bucket", bucket, "--op", "put", "--prepare", "--size", label,
                              "--objects", str(objs), "--concurrency", str(min(conc, 16)),
                              "--duration", "0"])
                d = os.path.join(tmp, "www", "files", label)
                subprocess.run([binary, "bench", "--size", label, "--objects", str(objs),
                                "--write-files", d], check=True, stdout=log, stderr=log)
                ngpath = ["--path-template", "/files/%s/obj-%%d" % label]
            else:
                os.makedirs(os.path.join(tmp, "www", "put", label), exist_ok=True)
                ngpath = ["--path-template", "/put/%s/obj-%%d" % label]
            ol_runs, ng_runs = [], []
            for _ in range(runs):
                # Interleaved, so that a noisy neighbour hurts both sides alike.
                ol_runs.append(b.run(olep + ["--bucket", bucket, "--op", op] + common, ol.pid))
                ng_runs.append(b.run(ngep + ngpath + ["--op", op] + common, ng.pid))
            row = {"test": "%s %s c=%d" % (op.upper(), label, conc), "op": op,
                   "openlake": summarize(ol_runs, "openlake"),
                   "reference": summarize(ng_runs, "nginx " + ("sendfile" if op == "get"
                                                               else "dav PUT"))}
            results["rows"].append(row)
            print_row(row)
            if op == "get":
                shutil.rmtree(os.path.join(tmp, "www", "files", label), ignore_errors=True)
        if "list" in only:
            b.run(olep + ["--bucket", "blist", "--op", "put", "--prepare", "--size", "0",
                          "--objects", str(LIST_KEYS), "--prepare-concurrency", "64",
                          "--duration", "0"])
            lr = [b.run(olep + ["--bucket", "blist", "--op", "list", "--concurrency", "1",
                                "--duration", a.duration], ol.pid) for _ in range(runs)]
            row = {"test": "LIST 100k keys, 1000/page, c=1", "op": "list",
                   "openlake": summarize(lr, "openlake"), "reference": None}
            results["rows"].append(row)
            print_row(row)
        if "ceil" in only:
            results["ceilings"] = ceilings(tmp, log)
            print("ceilings:", json.dumps(results["ceilings"]))
    finally:
        for p in reversed(procs):
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    results["wall_s"] = round(time.time() - t_start, 1)
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump(results, f, indent=2)
    md = render(results)
    with open(os.path.join(a.out, "latest.md"), "w") as f:
        f.write(md)
    print()
    print(md)


def print_row(row):
    o, r = row["openlake"], row["reference"]
    ratio = ""
    if r and row["op"] != "list" and r["mib_per_s"] > 0:
        ratio = " ratio %.2f" % (o["mib_per_s"] / r["mib_per_s"])
    print("%-32s openlake %-28s%s%s" % (row["test"], fmt_rate(o, row["op"]),
                                       (" ref " + fmt_rate(r, row["op"])) if r else "", ratio),
          flush=True)


def render(res):
    m = res["machine"]
    lines = [
        "# OpenLake benchmark: latest run",
        "",
        "Machine: %s, %s cores, Linux %s. Medians of %d run(s) of %s each; wall time %ss." % (
            m["cpu"], m["cores"], m["kernel"], res["runs"], res["duration"], res["wall_s"]),
        "Command: `bench/run.sh %s`" % " ".join(res["command"].split()[1:]),
        "",
        "| test | OpenLake 1 drive | EC 4+2 | reference (same run) | ratio | OpenLake p50 / p99 "
        "| reference p50 / p99 | server CPU-s/GiB OpenLake / ref | errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in res["rows"]:
        o, r = row["openlake"], row["reference"]
        if r:
            ratio = "%.2f" % (o["mib_per_s"] / r["mib_per_s"]) if r["mib_per_s"] else "-"
            ref = "%s: %s" % (r["what"], fmt_rate(r, row["op"]))
            rlat = "%s / %s" % (fmt_lat(r["p50_us"]), fmt_lat(r["p99_us"]))
            cpu = "%.2f / %.2f" % (o["server_cpu_s_per_gib"], r["server_cpu_s_per_gib"])
            errs = "%d / %d" % (o["errors"], r["errors"])
        else:
            ratio, ref, rlat, errs = "-", "-", "-", "%d" % o["errors"]
            cpu = "-"
        lines.append("| %s | %s | n/a (erasure coding not built yet) | %s | %s | %s / %s | %s "
                     "| %s | %s |" % (row["test"], fmt_rate(o, row["op"]), ref, ratio,
                                      fmt_lat(o["p50_us"]), fmt_lat(o["p99_us"]), rlat, cpu,
                                      errs))
    c = res.get("ceilings") or {}
    if c:
        lines += ["", "Raw ceilings on this machine (one core): memcpy %s GB/s, MD5 %s GB/s, "
                  "O_DIRECT sequential write (dd, 4 MiB blocks) %s GB/s." % (
                      c.get("memcpy_gbps"), c.get("md5_gbps"), c.get("odirect_write_gbps"))]
    cl = [row["openlake"]["client_cores"] for row in res["rows"]]
    if cl:
        lines += ["", "Load generator (`openlake bench`, one thread): at most %.2f cores "
                  "in any row." % max(cl)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
