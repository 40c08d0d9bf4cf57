"""A cluster whose nodes are separate hosts: each node, and etcd, in a
network namespace of its own, joined by veth pairs to a bridge in a hub
namespace, on a private /24 (10.231.X.0/24, X from the test's pid) that has
no route anywhere else.  All of it is made inside namespaces the test
creates and deletes (the host's own namespace gets no interface, address or
route); the nodes reach each other's drives over UCX's tcp transport on
their veth (UCX_TLS=tcp, UCX_NET_DEVICES=eth0).

One node is cut off (its link set down):
  - the other two carry on: reads, and writes too.  The pool is 3 nodes x 2
    drives with 3+3, so that a write reaches its quorum (k+1 = 4) on the
    4 drives left; with 4+2 (quorum 5) only reads would carry on, and 6
    nodes x 1 drive would double the processes on a 2-core machine.
  - the cut node fences itself within its lease TTL (6 s; measured through
    its own namespace: `admin info` says "fenced") and acknowledges no
    write after;
  - the writes made meanwhile are not on its drives (their live bytes do not
    move: the objects are 768 KiB, so that their 256 KiB shards live in the
    stores' segments, which live_bytes counts, not inline) and sit in the coordinators' catch-up logs (ec/catchup.h).
Link up: the node renews or registers again and acknowledges writes; the
coordinators' catch-up logs heal the missed keys onto its drives (pending 0,
healed >= the writes, no whole-set heal; the scrubber is off), after which
a full `admin heal` finds nothing to rebuild.

Then one node loses etcd alone (a blackhole route to etcd in its namespace,
its peers in reach): the peers renew their leases and do not vouch for it,
so it fences within its TTL and refuses writes, while they acknowledge on
their leases; the route gone, it acknowledges writes again.

Needs root and `ip netns`; skipped otherwise."""
import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from cluster_harness import ETCD, needs_etcd
from helpers import http_status, make_client, openlake_binary, unique_bucket

pytestmark = needs_etcd

IP = shutil.which("ip") or "/usr/sbin/ip"
TTL_S = 6            # the member's default lease TTL (cluster/member.h)
DRIVE_TIMEOUT_MS = 1500
S3_PORT = 9000       # each node has its own namespace: one port for all
DRIVE_PORT = 7000


def _netns_usable():
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if not Path(IP).exists():
        return "needs iproute2's ip"
    name = f"olprobe{os.getpid()}"
    r = subprocess.run([IP, "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot create a network namespace: " + r.stderr.strip()
    subprocess.run([IP, "netns", "del", name], capture_output=True)
    return None


_why = _netns_usable()
pytestmark = [needs_etcd, pytest.mark.skipif(_why is not None, reason=_why or "")]

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def in_ns(ns, fn, *args):
    """Runs fn(*args) on a thread that entered network namespace ns (a
    network namespace is per thread): its sockets are the namespace's."""
    box = {}

    def run():
        try:
            fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns " + ns)
            finally:
                os.close(fd)
            box["r"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["e"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "e" in box:
        raise box["e"]
    return box.get("r")


def sh(*args, check=True):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check:
        assert r.returncode == 0, f"{' '.join(args)}: {r.stdout}{r.stderr}"
    return r


class NetnsCluster:
    """The hub namespace (bridge br0, etcd) and one namespace per node (eth0,
    the other end of a veth pair on br0).  close() kills every process and
    deletes every namespace, whatever state it is in."""

    def __init__(self, nodes=3, dirs=2):
        pid = os.getpid()
        self.net = f"10.231.{pid % 250 + 1}"
        self.hub = f"olhub{pid}"
        self.ns = [f"olnode{pid}_{i}" for i in range(1, nodes + 1)]
        self.names = [f"n{i}" for i in range(1, nodes + 1)]
        self.root = Path(tempfile.mkdtemp(prefix="ol_netns_"))
        self.dirs = dirs
        self.procs = {}
        self.logs = {}
        self.made = []

    def addr(self, i):
        return f"{self.net}.{11 + i}"

    def build(self):
        sh(IP, "netns", "add", self.hub)
        self.made.append(self.hub)
        sh(IP, "-n", self.hub, "link", "set", "lo", "up")
        sh(IP, "-n", self.hub, "link", "add", "br0", "type", "bridge")
        sh(IP, "-n", self.hub, "addr", "add", f"{self.net}.1/24", "dev", "br0")
        sh(IP, "-n", self.hub, "link", "set", "br0", "up")
        for i, ns in enumerate(self.ns):
            sh(IP, "netns", "add", ns)
            self.made.append(ns)
            sh(IP, "-n", ns, "link", "set", "lo", "up")
            # Both ends are made in the namespaces: nothing appears in the
            # host's namespace, even for a moment.
            sh(IP, "-n", self.hub, "link", "add", f"h{i}", "type", "veth", "peer", "name",
               "eth0", "netns", ns)
            sh(IP, "-n", self.hub, "link", "set", f"h{i}", "master", "br0")
            sh(IP, "-n", self.hub, "link", "set", f"h{i}", "up")
            sh(IP, "-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            sh(IP, "-n", ns, "link", "set", "eth0", "up")

    def spawn(self, key, ns, cmd, env=None):
        log = open(self.root / f"{key}.log", "ab")
        self.logs[key] = log
        self.procs[key] = subprocess.Popen([IP, "netns", "exec", ns] + cmd,
                                           stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                           env=dict(os.environ, **(env or {})))

    def log_tail(self, key, n=4000):
        try:
            return (self.root / f"{key}.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def start(self):
        self.build()
        client, peer = f"http://{self.net}.1:2379", f"http://{self.net}.1:2380"
        self.spawn("etcd", self.hub,
                   [ETCD, "--name", "default", "--data-dir", str(self.root / "etcd"),
                    "--listen-client-urls", client, "--advertise-client-urls", client,
                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                    "--initial-cluster", f"default={peer}", "--log-level", "warn"])
        self.etcd = f"{self.net}.1:2379"

        def etcd_up():
            req = urllib.request.Request(f"{client}/v3/kv/range", data=b'{"key":"Lw=="}',
                                         method="POST")
            urllib.request.urlopen(req, timeout=1).read()

        deadline = time.monotonic() + 15
        while True:
            try:
                in_ns(self.hub, etcd_up)
                break
            except OSError:
                assert self.procs["etcd"].poll() is None, self.log_tail("etcd")
                assert time.monotonic() < deadline, "etcd did not start\n" + self.log_tail("etcd")
                time.sleep(0.1)
        ucx = {"UCX_TLS": "tcp", "UCX_NET_DEVICES": "eth0"}
        for i, ns in enumerate(self.ns):
            work = self.root / self.names[i]
            work.mkdir()
            dirs = [str(work / f"d{c}") for c in "ab"[:self.dirs]]
            self.spawn(self.names[i], ns,
                       [str(openlake_binary()), "server", *dirs,
                        "--listen", f"0.0.0.0:{S3_PORT}", "--threads", "2",
                        "--cluster", self.etcd, "--node", self.names[i],
                        "--drive_listen", f"{self.addr(i)}:{DRIVE_PORT}",
                        "--drive_timeout_ms", str(DRIVE_TIMEOUT_MS),
                        "--scrub_interval_ms", "0", "--cluster_wait_ms", "30000"], env=ucx)
        deadline = time.monotonic() + 30
        while True:
            out = self.cli(self.hub, "admin", "cluster", "pool", "--cluster", self.etcd,
                           "--nodes", ",".join(self.names), "--ec_data", "3",
                           "--ec_parity", "3", check=False)
            if out.returncode == 0:
                break
            for key, p in self.procs.items():
                if p.poll() is not None:
                    if "UCX did not start" in self.log_tail(key):
                        pytest.skip("UCX cannot start in a network namespace here")
                    raise AssertionError(f"{key} exited\n" + self.log_tail(key))
            assert time.monotonic() < deadline, out.stdout + out.stderr
            time.sleep(0.3)
        for i in range(len(self.ns)):
            self.wait_s3(i)
        return self

    def cli(self, ns, *args, check=True):
        r = subprocess.run([IP, "netns", "exec", ns, str(openlake_binary()), *args],
                           capture_output=True, text=True, timeout=60)
        if check:
            assert r.returncode == 0, r.stdout + r.stderr
        return r

    def info(self, i):
        """`admin info` of node i, asked from inside its own namespace."""
        r = self.cli(self.ns[i], "admin", "info", "--endpoint", f"http://127.0.0.1:{S3_PORT}")
        return json.loads(r.stdout)

    def heal(self, i):
        r = self.cli(self.ns[i], "admin", "heal", "--endpoint", f"http://127.0.0.1:{S3_PORT}",
                     "--progress-ms", "0")
        return json.loads(r.stdout)

    def wait_s3(self, i, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            r = self.cli(self.ns[i], "admin", "info", "--endpoint",
                         f"http://127.0.0.1:{S3_PORT}", check=False)
            if r.returncode == 0:
                return
            p = self.procs[self.names[i]]
            assert p.poll() is None, f"node {i} exited\n" + self.log_tail(self.names[i])
            assert time.monotonic() < deadline, r.stderr + self.log_tail(self.names[i])
            time.sleep(0.2)

    def client(self, i):
        """A boto3 client of node i; use it through in_ns(self.ns[i], ...)."""
        return make_client(f"http://127.0.0.1:{S3_PORT}", read_timeout=15)

    def link(self, i, up):
        sh(IP, "-n", self.ns[i], "link", "set", "eth0", "up" if up else "down")

    def close(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for log in self.logs.values():
            log.close()
        for ns in reversed(self.made):
            # Deleting a namespace removes its veth ends and the bridge.
            subprocess.run([IP, "netns", "del", ns], capture_output=True)
        if not os.environ.get("OPENLAKE_KEEP_DATA"):
            shutil.rmtree(self.root, ignore_errors=True)


def put(c, bucket, key, data):
    return c.put_object(Bucket=bucket, Key=key, Body=data)


def get(c, bucket, key):
    return c.get_object(Bucket=bucket, Key=key)["Body"].read()


def blob(i, size=768 * 1024):
    return bytes((j * 131 + i) & 0xFF for j in range(256)) * (size // 256)


def live_bytes(info):
    return sum(d["live_bytes"] for d in info["drives"] if "live_bytes" in d)


def test_cut_node_fences_and_catches_up():
    cl = NetnsCluster()
    try:
        cl.start()
        ns = cl.ns
        c = [cl.client(i) for i in range(3)]
        bucket = unique_bucket("nn")
        in_ns(ns[0], lambda: c[0].create_bucket(Bucket=bucket))
        before = {f"before-{i}": blob(i) for i in range(4)}
        for k, v in before.items():
            in_ns(ns[0], put, c[0], bucket, k, v)
        cut = 2
        live0 = live_bytes(cl.info(cut))

        # Cut node 3 off; watch its fence from inside its namespace.
        fenced_at = {}

        def watch():
            while time.monotonic() - t0 < 3 * TTL_S and "t" not in fenced_at:
                r = cl.cli(ns[cut], "admin", "info", "--endpoint", f"http://127.0.0.1:{S3_PORT}",
                           check=False)
                if r.returncode == 0 and json.loads(r.stdout).get("fenced"):
                    fenced_at["t"] = time.monotonic() - t0
                time.sleep(0.2)

        t0 = time.monotonic()
        cl.link(cut, False)
        watcher = threading.Thread(target=watch)
        watcher.start()

        # The others carry on: reads, and writes (3+3: 4 drives left, the
        # write quorum).
        during = {f"during-{i}": blob(100 + i) for i in range(6)}
        for n, (k, v) in enumerate(during.items()):
            in_ns(ns[n % 2], put, c[n % 2], bucket, k, v)
        for k, v in before.items():
            assert in_ns(ns[1], get, c[1], bucket, k) == v, k
        watcher.join()
        assert "t" in fenced_at, "the cut node never fenced\n" + cl.log_tail("n3")
        assert fenced_at["t"] < TTL_S, fenced_at
        # Fenced: nothing is acknowledged through it.
        with pytest.raises(Exception) as ei:
            in_ns(ns[cut], put, c[cut], bucket, "through-cut", b"x" * 100)
        assert http_status(ei.value) == 503, ei.value
        # The writes it missed are owed to it in the coordinators' logs.
        infos = [cl.info(i) for i in (0, 1)]
        pending = sum(x["catchup"]["pending"] for x in infos)
        assert pending >= len(during), [x["catchup"] for x in infos]
        assert live_bytes(cl.info(cut)) == live0

        # Link up: it acknowledges writes again, and is caught up.
        t1 = time.monotonic()
        cl.link(cut, True)
        while True:
            try:
                in_ns(ns[cut], put, c[cut], bucket, "after", b"back")
                break
            except Exception as e:  # noqa: BLE001 - 503 until it has renewed
                assert time.monotonic() - t1 < 25, f"writes not back: {e}\n" + cl.log_tail("n3")
                time.sleep(0.3)
        rejoined = time.monotonic() - t1
        while True:
            infos = [cl.info(i) for i in (0, 1)]
            cu = [x["catchup"] for x in infos]
            if sum(x["pending"] for x in cu) == 0:
                break
            assert time.monotonic() - t1 < 30, cu
            time.sleep(0.3)
        caught_up = time.monotonic() - t1
        assert sum(x["healed"] for x in cu) >= len(during), cu
        assert sum(x["full_heals"] for x in cu) == 0, cu
        assert sum(x["overflowed"] for x in cu) == 0, cu
        assert live_bytes(cl.info(cut)) > live0
        # Nothing left for a full heal: the log did it all.
        st = cl.heal(0)
        assert st["shards_rebuilt"] == 0 and st["unrecoverable"] == 0, st
        for k, v in {**before, **during}.items():
            assert in_ns(ns[cut], get, c[cut], bucket, k) == v, k
        print(f"fenced {fenced_at['t']:.1f} s after the cut; writes back {rejoined:.1f} s "
              f"and caught up {caught_up:.1f} s after the link came up")

        # Node 1 loses etcd alone (a blackhole route to etcd's address in its
        # namespace; its peers stay in reach).  The peers still renew their
        # leases, so none vouches for it (cluster/member.h, "When etcd is
        # down"): it fences within its TTL as a cut-off node does, while the
        # others acknowledge on their leases.
        lone = 0
        etcd_ip = cl.etcd.split(":")[0]
        sh(IP, "-n", ns[lone], "route", "add", "blackhole", f"{etcd_ip}/32")
        t2 = time.monotonic()
        try:
            while cl.info(lone).get("ack") != "fenced":
                assert time.monotonic() - t2 < TTL_S + 2, cl.info(lone)
                time.sleep(0.2)
            alone_fenced = time.monotonic() - t2
            with pytest.raises(Exception) as ei:
                in_ns(ns[lone], put, c[lone], bucket, "through-lone", b"x" * 100)
            assert http_status(ei.value) == 503, ei.value
            in_ns(ns[1], put, c[1], bucket, "while-lone", b"y" * 100)
            assert cl.info(1).get("ack") == "lease"
        finally:
            sh(IP, "-n", ns[lone], "route", "del", "blackhole", f"{etcd_ip}/32", check=False)
        while True:
            try:
                in_ns(ns[lone], put, c[lone], bucket, "lone-back", b"z")
                break
            except Exception as e:  # noqa: BLE001 - 503 until it has renewed
                assert time.monotonic() - t2 < 30, f"writes not back: {e}"
                time.sleep(0.3)
        print(f"a node without etcd alone fenced {alone_fenced:.1f} s after losing it")
    finally:
        cl.close()
