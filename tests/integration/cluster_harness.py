"""The cluster test harness: a real etcd and `openlake server --cluster`
node processes on 127.0.0.1, each with its own ports and directories, and a
pool built with `openlake admin cluster pool`.  Used by every test_cluster*
file; everything it starts is stopped by Cluster.close()."""
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import ServerError, Server, free_port, make_client, openlake_binary

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
DRIVE_TIMEOUT_MS = 3000

# Test files that use the harness set `pytestmark = needs_etcd`.
needs_etcd = pytest.mark.skipif(not Path(ETCD).exists(), reason="etcd is not installed "
                                "(apt-get install etcd-server)")


class Etcd:
    def __init__(self, root):
        self.root = Path(root)
        self.port, self.peer = free_port(), free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        client, peer = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.peer}"
        self.log = open(self.root / "etcd.log", "ab")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "default", "--data-dir", str(self.root / "etcd"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"default={peer}", "--log-level", "warn"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                req = urllib.request.Request(f"{client}/v3/kv/range", data=b'{"key":"Lw=="}',
                                             method="POST")
                urllib.request.urlopen(req, timeout=1).read()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise ServerError("etcd did not start: " + (self.root / "etcd.log").read_text()[-2000:])

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc:
            self.log.close()


class Node(Server):
    """One cluster node: two drives, its S3 port and a fixed drive port."""

    def __init__(self, workdir, name, etcd, dirs=2, extra_args=()):
        super().__init__(workdir, threads=2)
        self.name = name
        self.etcd = etcd
        self.dirs = [f"d{c}" for c in "abcdefgh"[:dirs]]
        self.extra = list(extra_args)
        self.drive_port = free_port()
        self.env = {}  # more environment for the process (a test's LD_PRELOAD)
        self._repicks = 0

    def command(self):
        cmd = super().command()
        i = cmd.index(str(self.data_dir))
        cmd[i:i + 1] = [str(self.workdir / d) for d in self.dirs]
        return cmd + ["--cluster", self.etcd.endpoint, "--node", self.name,
                      "--drive_listen", f"127.0.0.1:{self.drive_port}",
                      "--drive_timeout_ms", str(DRIVE_TIMEOUT_MS),
                      "--scrub_interval_ms", "0", "--cluster_wait_ms", "30000"] + self.extra

    def launch(self):
        """Starts the process without waiting for S3 (it waits for a pool)."""
        self._log = open(self.log_path, "ab")
        # UCX would also open tcp lanes on the host's other interfaces to
        # reach a peer on this host: the tests send nothing off 127.0.0.1.
        env = dict(os.environ, UCX_NET_DEVICES="lo", **self.env)
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=self._log, env=env)

    def wait_s3(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log_tail()
                self._forget()
                # A node binds its S3 port only once it serves a map, seconds
                # after the port was picked: another process may have taken
                # it meanwhile (seen in CI).  Before the first start only,
                # pick another and launch again (Server.start does the same).
                if (self._auto_port and self._repicks < 2 and
                        f"listen: 127.0.0.1:{self.port}: address already in use" in log):
                    self._repicks += 1
                    self.port = free_port()
                    self.endpoint = f"http://127.0.0.1:{self.port}"
                    self.launch()
                    continue
                if "UCX did not start" in log:
                    pytest.skip("UCX cannot start here")
                raise ServerError(f"node {self.name} exited\n" + log)
            try:
                with urllib.request.urlopen(f"{self.endpoint}/_openlake/health", timeout=1):
                    self._auto_port = False
                    return
            except urllib.error.HTTPError:
                self._auto_port = False
                return  # it answers (the route wants credentials)
            except OSError:
                time.sleep(0.1)
        raise ServerError(f"node {self.name} does not answer S3\n" + self.log_tail())


def admin(*args, check=True):
    out = subprocess.run([str(openlake_binary()), "admin", "cluster", *args],
                         capture_output=True, text=True, timeout=20)
    if check:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


def info(node):
    """`openlake admin info` of a node, parsed."""
    import json
    out = subprocess.run([str(openlake_binary()), "admin", "info", "--endpoint", node.endpoint],
                         capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout)


def body(size, seed):
    block = bytes((i * 131 + seed) & 0xFF for i in range(4096))
    return (block * (size // 4096 + 1))[:size]


class Cluster:
    """etcd plus `nodes` nodes with `dirs` drives each, one pool of k+m over
    all of them.  Use as a context manager (stops everything, removes the
    directories unless OPENLAKE_KEEP_DATA is set)."""

    def __init__(self, nodes=3, dirs=2, k=4, m=2, prefix="ol_cluster_"):
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.etcd = Etcd(self.root)
        self.k, self.m = k, m
        self.nodes = [Node(self.root / f"n{i}", f"n{i}", self.etcd, dirs=dirs)
                      for i in range(1, nodes + 1)]

    def start(self):
        self.etcd.start()
        for n in self.nodes:
            n.launch()
        self.pool_output = self._pool(self.nodes)
        return self

    def _pool(self, nodes):
        """Builds a pool of `nodes` (k+m as the cluster's), retrying until
        they have registered with their drives, and waits for their S3;
        returns the admin command's output."""
        names = ",".join(n.name for n in nodes)
        deadline = time.monotonic() + 30
        while True:
            out = admin("pool", "--cluster", self.etcd.endpoint, "--nodes", names,
                        "--ec_data", str(self.k), "--ec_parity", str(self.m), check=False)
            if out.returncode == 0:
                break
            for n in nodes:
                if n.proc.poll() is not None:
                    n.wait_s3()  # raises (or skips) with the node's log
            assert time.monotonic() < deadline, out.stdout + out.stderr
            time.sleep(0.3)
        for n in nodes:
            n.wait_s3()
        return out.stdout

    def add_pool(self, count, dirs=2):
        """Starts `count` more nodes and adds a pool of them (k+m as the
        first) while the others run; returns the new nodes."""
        first = len(self.nodes) + 1
        new = [Node(self.root / f"n{i}", f"n{i}", self.etcd, dirs=dirs)
               for i in range(first, first + count)]
        self.nodes += new
        for n in new:
            n.launch()
        self._pool(new)
        return new

    def clients(self, **kw):
        return [make_client(n.endpoint, **kw) for n in self.nodes]

    def close(self):
        for n in self.nodes:
            if n.proc is not None:
                n.kill9()
        self.etcd.stop()
        if not os.environ.get("OPENLAKE_KEEP_DATA"):
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
