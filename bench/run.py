#!/usr/bin/env python3
"""The standard OpenLake benchmark matrix (run through bench/run.sh).

Starts OpenLake twice (one drive, and six drives erasure-coded 4+2, each in a
temporary directory) and nginx (static files with sendfile for GET, WebDAV PUT
for PUT) on free 127.0.0.1 ports, drives all three with `openlake bench`,
measures raw ceilings (memcpy, MD5, O_DIRECT write), and writes
bench/results/latest.md and latest.json.  Every figure is the median of
several runs; every OpenLake figure comes with its ratio to the reference
measured in the same run.
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
EC_DRIVES = 6  # 4+2 (given explicitly: the automatic geometry for six is 3+3)
ERR_KINDS = ("http_4xx", "http_5xx", "http_other", "connect", "io", "proto", "verify")

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


def dirty_bytes():
    """Bytes of the page cache waiting to be written back (Dirty + Writeback)."""
    n = 0
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            if k in ("Dirty", "Writeback"):
                n += int(v.split()[0]) * 1024
    return n


def disk_activity():
    """Sectors written and discarded so far, summed over the block devices."""
    n = 0
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            if len(x) >= 10:
                n += int(x[9]) + (int(x[16]) if len(x) >= 17 else 0)
    return n


def settle(limit=64 << 20, timeout=60.0, quiet_s=0.3):
    """Lets the disk finish what earlier runs left it, before the next run.

    nginx's DAV PUT returns once a file is in the page cache, and the kernel
    writes it back later: up to gigabytes after a 5 s run.  OpenLake frees the
    segments of overwritten objects in the background, and on a file system
    mounted with `discard` each freed block is discarded.  Without this, one
    side's late I/O lands in the other side's next run.  So: write back the
    dirty pages, then wait until no device has written or discarded anything
    for quiet_s.  nginx is still measured without paying for its writeback."""
    os.sync()
    t = time.time() + timeout
    while dirty_bytes() > limit and time.time() < t:
        time.sleep(0.1)
    last = disk_activity()
    quiet_since = time.time()
    while time.time() < t:
        time.sleep(0.1)
        now = disk_activity()
        if now != last:
            last, quiet_since = now, time.time()
        elif time.time() - quiet_since >= quiet_s:
            break


def stop_all(procs):
    """Stops the processes a run started, the last started first: SIGTERM,
    then SIGKILL for one that does not exit within 30 s."""
    for p in reversed(procs):
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()


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
        # Errors by the tool's kinds, summed over runs (only kinds that occurred).
        "errors_by_kind": {k: v for k, v in
                           ((k, sum(r["errors"].get(k, 0) for r in runs)) for k in ERR_KINDS)
                           if v},
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
        lscpu = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        for line in lscpu.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release()}


def tree_state():
    """The commit benchmarked, and whether the working tree had changes (other engineers')."""
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                "--untracked-files=no"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True).stdout.strip() != ""
    except OSError:
        return {"commit": None, "dirty": None}
    return {"commit": head or None, "dirty": dirty}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="one run per figure")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", default="5s")
    ap.add_argument("--bin", default=os.environ.get("OPENLAKE_BIN"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--only", default="", help="comma list: get,put,list,ceil")
    ap.add_argument("--no-ec", action="store_true", help="skip the EC 4+2 column")
    ap.add_argument("--ec-runs", type=int, default=None,
                    help="runs per EC figure (default: same as --runs)")
    ap.add_argument("--ec-duration", default=None,
                    help="duration of each EC run (default: same as --duration)")
    a = ap.parse_args()
    runs = 1 if a.quick else a.runs
    ec_runs = 0 if a.no_ec else min(runs, a.ec_runs) if a.ec_runs else runs
    ec_duration = a.ec_duration or a.duration
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
    results = {"machine": machine(), "tree": tree_state(), "runs": runs, "duration": a.duration,
               "ec": {"drives": EC_DRIVES, "geometry": "4+2", "runs": ec_runs,
                      "duration": ec_duration, "server_exit": None, "prepare_errors": 0},
               "command": " ".join(sys.argv), "rows": [], "ceilings": {}}
    t_start = time.time()
    try:
        # OpenLake, one drive.
        ol_port = free_port()
        ol = subprocess.Popen([binary, "server", os.path.join(tmp, "ol"), "--listen",
                               "127.0.0.1:%d" % ol_port], stdout=log, stderr=log)
        procs.append(ol)
        wait_port(ol_port, ol)
        # OpenLake, six drives erasure-coded 4+2.
        ec = None
        if ec_runs:
            ec_port = free_port()
            # The server creates each drive directory but not their parent.
            os.makedirs(os.path.join(tmp, "ec"))
            # 4+2 explicitly: the automatic geometry for six drives is 3+3
            # (docs/EC.md, "Placement"), which the column measured until
            # issue 11 while its header said 4+2.
            ec = subprocess.Popen([binary, "server"] +
                                  [os.path.join(tmp, "ec", "d%d" % i)
                                   for i in range(1, EC_DRIVES + 1)] +
                                  ["--ec_data", "4", "--ec_parity", "2",
                                   "--listen", "127.0.0.1:%d" % ec_port], stdout=log, stderr=log)
            procs.append(ec)
            wait_port(ec_port, ec)
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
        ecep = ["--endpoint", "http://127.0.0.1:%d" % ec_port] if ec else []

        def ec_alive():
            """False once the EC server has exited; the exit is recorded once."""
            if ec is None:
                return False
            if ec.poll() is not None:
                if results["ec"]["server_exit"] is None:
                    results["ec"]["server_exit"] = ec.returncode
                    print("EC server exited (rc %s); see latest.log" % ec.returncode,
                          flush=True)
                return False
            return True

        def ec_prepare(args):
            # A failing EC server must not stop the matrix: its errors are counted.
            if not ec_alive():
                return
            try:
                r = b.run(ecep + args, check=False)
                results["ec"]["prepare_errors"] += r["errors"]["total"]
            except (RuntimeError, ValueError) as e:
                log.write("EC prepare failed: %s\n" % e)
                results["ec"]["prepare_errors"] += 1

        def ec_measure(args, out):
            if not ec_alive():
                return
            try:
                out.append(b.run(ecep + args, ec.pid, check=False))
            except (RuntimeError, ValueError) as e:
                log.write("EC run failed: %s\n" % e)
                print("EC run failed: %s" % e, flush=True)
        ngep = ["--endpoint", "http://127.0.0.1:%d" % ng_port, "--no-sign"]
        for op, label, size, conc, objs in MATRIX:
            if op not in only:
                continue
            bucket = "b%s%s" % (op, label.lower())
            common = ["--size", label, "--concurrency", str(conc), "--objects", str(objs),
                      "--duration", a.duration]
            ec_common = common[:-1] + [ec_duration]
            if op == "get":
                # Same bytes on all sides: OpenLake via PUTs, nginx via files.
                prep = ["--bucket", bucket, "--op", "put", "--prepare", "--size", label,
                        "--objects", str(objs), "--concurrency", str(min(conc, 16)),
                        "--duration", "0"]
                b.run(olep + prep)
                ec_prepare(prep)
                d = os.path.join(tmp, "www", "files", label)
                subprocess.run([binary, "bench", "--size", label, "--objects", str(objs),
                                "--write-files", d], check=True, stdout=log, stderr=log)
                ngpath = ["--path-template", "/files/%s/obj-%%d" % label]
            else:
                os.makedirs(os.path.join(tmp, "www", "put", label), exist_ok=True)
                ngpath = ["--path-template", "/put/%s/obj-%%d" % label]
            if op == "get":
                # A warm-up pass on every side, not counted: nginx's files were
                # written through the page cache, OpenLake's segments O_DIRECT
                # (not cached), and the rows compare serving hot data.
                warm = ["--op", "get", "--size", label, "--concurrency", str(conc),
                        "--objects", str(objs), "--duration", "1s"]
                b.run(olep + ["--bucket", bucket] + warm, ol.pid)
                ec_measure(["--bucket", bucket] + warm, [])
                b.run(ngep + ngpath + warm, ng.pid)
            ol_runs, ec_runs_l, ng_runs = [], [], []
            for i in range(runs):
                # Interleaved, so that a noisy neighbour hurts every side alike;
                # each run starts on a settled disk (see settle()).
                settle()
                ol_runs.append(b.run(olep + ["--bucket", bucket, "--op", op] + common, ol.pid))
                if i < ec_runs:
                    settle()
                    ec_measure(["--bucket", bucket, "--op", op] + ec_common, ec_runs_l)
                settle()
                ng_runs.append(b.run(ngep + ngpath + ["--op", op] + common, ng.pid))
            row = {"test": "%s %s c=%d" % (op.upper(), label, conc), "op": op,
                   "openlake": summarize(ol_runs, "openlake"),
                   "ec": summarize(ec_runs_l, "openlake EC 4+2") if ec_runs_l else None,
                   "reference": summarize(ng_runs, "nginx " + ("sendfile" if op == "get"
                                                               else "dav PUT"))}
            results["rows"].append(row)
            print_row(row)
            if op == "get":
                shutil.rmtree(os.path.join(tmp, "www", "files", label), ignore_errors=True)
        if "list" in only:
            prep = ["--bucket", "blist", "--op", "put", "--prepare", "--size", "0",
                    "--objects", str(LIST_KEYS), "--prepare-concurrency", "64",
                    "--duration", "0"]
            b.run(olep + prep)
            ec_prepare(prep)
            lr, elr = [], []
            for i in range(runs):
                lr.append(b.run(olep + ["--bucket", "blist", "--op", "list", "--concurrency", "1",
                                        "--duration", a.duration], ol.pid))
                if i < ec_runs:
                    ec_measure(["--bucket", "blist", "--op", "list", "--concurrency", "1",
                                "--duration", ec_duration], elr)
            row = {"test": "LIST 100k keys, 1000/page, c=1", "op": "list",
                   "openlake": summarize(lr, "openlake"),
                   "ec": summarize(elr, "openlake EC 4+2") if elr else None,
                   "reference": None}
            results["rows"].append(row)
            print_row(row)
        if "ceil" in only:
            results["ceilings"] = ceilings(tmp, log)
            print("ceilings:", json.dumps(results["ceilings"]))
        ec_alive()
    finally:
        stop_all(procs)
        shutil.rmtree(tmp, ignore_errors=True)
    results["wall_s"] = round(time.time() - t_start, 1)
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump(results, f, indent=2)
    md = render(results)
    with open(os.path.join(a.out, "latest.md"), "w") as f:
        f.write(md)
    print()
    print(md)


def ratio(x, r, op):
    """x's throughput over the reference's, or "-" where there is no reference."""
    if not x or not r or op == "list" or r["mib_per_s"] <= 0:
        return "-"
    return "%.2f" % (x["mib_per_s"] / r["mib_per_s"])


def fmt_errs(s):
    if s is None:
        return "-"
    if not s["errors"]:
        return "0"
    return "%d (%s)" % (s["errors"], ", ".join("%s=%d" % kv
                                               for kv in sorted(s["errors_by_kind"].items())))


def print_row(row):
    o, e, r = row["openlake"], row.get("ec"), row["reference"]
    line = "%-32s 1 drive %-26s" % (row["test"], fmt_rate(o, row["op"]))
    if e:
        line += " EC %-26s" % fmt_rate(e, row["op"])
        if e["errors"]:
            line += " EC errors %s" % fmt_errs(e)
    if r:
        line += " ref %s ratio %s / %s" % (fmt_rate(r, row["op"]), ratio(o, r, row["op"]),
                                          ratio(e, r, row["op"]))
    print(line, flush=True)


def render(res):
    m = res["machine"]
    ec = res.get("ec") or {}
    if ec.get("runs"):
        ec_head = "EC 4+2 (6 drives)"
        if ec["runs"] != res["runs"] or ec["duration"] != res["duration"]:
            ec_head += ", %d run(s) of %s" % (ec["runs"], ec["duration"])
    else:
        ec_head = "EC 4+2 (not run)"
    lines = [
        "# OpenLake benchmark: latest run",
        "",
        "Machine: %s, %s cores, Linux %s. Medians of %d run(s) of %s each; wall time %ss." % (
            m["cpu"], m["cores"], m["kernel"], res["runs"], res["duration"], res["wall_s"]),
        "Command: `bench/run.sh %s`" % " ".join(res["command"].split()[1:]),
        "Tree: commit %s%s." % ((res.get("tree") or {}).get("commit"),
                                " plus uncommitted changes" if (res.get("tree") or {}).get("dirty")
                                else ""),
        "",
        "| test | OpenLake 1 drive | %s | reference (same run) | ratio 1 drive / EC "
        "| 1 drive p50 / p99 | EC p50 / p99 | reference p50 / p99 "
        "| server CPU-s/GiB 1 drive / EC / ref | errors 1 drive / EC / ref |" % ec_head,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in res["rows"]:
        o, e, r = row["openlake"], row.get("ec"), row["reference"]
        op = row["op"]
        lat = lambda s: "%s / %s" % (fmt_lat(s["p50_us"]), fmt_lat(s["p99_us"])) if s else "-"
        cpu = lambda s: "%.2f" % s["server_cpu_s_per_gib"] if s else "-"
        ref = "%s: %s" % (r["what"], fmt_rate(r, op)) if r else "-"
        ratios = "%s / %s" % (ratio(o, r, op), ratio(e, r, op)) if r else "-"
        cpus = "%s / %s / %s" % (cpu(o), cpu(e), cpu(r)) if op != "list" else "-"
        errs = "%s / %s / %s" % (fmt_errs(o), fmt_errs(e), fmt_errs(r))
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["test"], fmt_rate(o, op), fmt_rate(e, op) if e else "-", ref, ratios, lat(o),
            lat(e), lat(r), cpus, errs))
    if ec.get("server_exit") is not None:
        lines += ["", "**The EC server exited during the run (rc %s)**; rows after that have "
                  "no EC figure. See latest.log." % ec["server_exit"]]
    if ec.get("prepare_errors"):
        lines += ["", "EC prepare phases (PUTs of the GET/LIST working sets) counted %d "
                  "error(s); see latest.log." % ec["prepare_errors"]]
    c = res.get("ceilings") or {}
    if c:
        lines += ["", "Raw ceilings on this machine (one core): memcpy %s GB/s, MD5 %s GB/s, "
                  "O_DIRECT sequential write (dd, 4 MiB blocks) %s GB/s." % (
                      c.get("memcpy_gbps"), c.get("md5_gbps"), c.get("odirect_write_gbps"))]
    cl = [row["openlake"]["client_cores"] for row in res["rows"]]
    cl += [row["ec"]["client_cores"] for row in res["rows"] if row.get("ec")]
    if cl:
        lines += ["", "Load generator (`openlake bench`, one thread): at most %.2f cores "
                  "in any row." % max(cl)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
