"""A real three-node cluster on 127.0.0.1: one etcd, three `openlake server
--cluster` processes with two drives each, one pool of 4+2 built with
`openlake admin cluster pool`.  Objects written through any node read back
byte-identical through every node; with one node killed (-9) every object
still reads (4 of 6 shards left: k), a PUT is refused quickly (503, it cannot
reach the write quorum) rather than hanging; the node restarts, rejoins and
serves the objects again.  With etcd stopped (SIGSTOP) the nodes fence: writes
get 503 within the lease's TTL - margin, reads go on, and writes come back once
etcd answers again."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import (ServerError, Server, free_port, make_client, openlake_binary, http_status,
                     unique_bucket)

ETCD = shutil.which("etcd") or "/usr/bin/etcd"
DRIVE_TIMEOUT_MS = 3000

pytestmark = pytest.mark.skipif(not Path(ETCD).exists(), reason="etcd is not installed "
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

    def __init__(self, workdir, name, etcd):
        super().__init__(workdir, threads=2)
        self.name = name
        self.etcd = etcd
        self.drive_port = free_port()

    def command(self):
        cmd = super().command()
        i = cmd.index(str(self.data_dir))
        cmd[i:i + 1] = [str(self.workdir / "da"), str(self.workdir / "db")]
        return cmd + ["--cluster", self.etcd.endpoint, "--node", self.name,
                      "--drive_listen", f"127.0.0.1:{self.drive_port}",
                      "--drive_timeout_ms", str(DRIVE_TIMEOUT_MS),
                      "--scrub_interval_ms", "0", "--cluster_wait_ms", "30000"]

    def launch(self):
        """Starts the process without waiting for S3 (it waits for a pool)."""
        self._log = open(self.log_path, "ab")
        # UCX would also open tcp lanes on the host's other interfaces to
        # reach a peer on this host: the tests send nothing off 127.0.0.1.
        env = dict(os.environ, UCX_NET_DEVICES="lo")
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=self._log, env=env)

    def wait_s3(self, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.log_tail()
                self._forget()
                if "UCX did not start" in log:
                    pytest.skip("UCX cannot start here")
                raise ServerError(f"node {self.name} exited\n" + log)
            try:
                with urllib.request.urlopen(f"{self.endpoint}/_openlake/health", timeout=1):
                    return
            except urllib.error.HTTPError:
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


def body(size, seed):
    block = bytes((i * 131 + seed) & 0xFF for i in range(4096))
    return (block * (size // 4096 + 1))[:size]


def test_three_nodes():
    root = Path(tempfile.mkdtemp(prefix="ol_cluster_"))
    etcd = Etcd(root)
    nodes = []
    try:
        etcd.start()
        nodes = [Node(root / f"n{i}", f"n{i}", etcd) for i in (1, 2, 3)]
        for n in nodes:
            n.launch()
        # The pool needs every node and its drives in the map: retry until
        # the three have registered.
        deadline = time.monotonic() + 20
        while True:
            out = admin("pool", "--cluster", etcd.endpoint, "--nodes", "n1,n2,n3",
                        "--ec_data", "4", "--ec_parity", "2", check=False)
            if out.returncode == 0:
                break
            for n in nodes:
                if n.proc.poll() is not None:
                    n.wait_s3()  # raises (or skips) with the node's log
            assert time.monotonic() < deadline, out.stdout + out.stderr
            time.sleep(0.3)
        assert out.stdout.count("set ") == 1, out.stdout
        for n in nodes:
            n.wait_s3()
        shown = admin("show", "--cluster", etcd.endpoint).stdout
        assert shown.count(" up ") == 3 and "pool 0" in shown, shown
        info = subprocess.run([str(openlake_binary()), "admin", "info", "--endpoint",
                               nodes[1].endpoint], capture_output=True, text=True, timeout=20)
        assert '"node":"n2"' in info.stdout and '"cluster":"openlake"' in info.stdout, \
            info.stdout + info.stderr

        clients = [make_client(n.endpoint) for n in nodes]
        bucket = unique_bucket("cl")
        clients[0].create_bucket(Bucket=bucket)
        objs = {}
        for i, size in enumerate([0, 4096, 1 << 20, 9 << 20]):
            key = f"obj-{size}"
            objs[key] = body(size, i)
            clients[i % 3].put_object(Bucket=bucket, Key=key, Body=objs[key])
        for c in clients:
            for key, data in objs.items():
                assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == data, key
            listed = [o["Key"] for o in c.list_objects_v2(Bucket=bucket).get("Contents", [])]
            assert listed == sorted(objs), listed
            assert bucket in [b["Name"] for b in c.list_buckets()["Buckets"]]

        # etcd stops answering: within TTL - margin (5 s) of their last renewal the
        # nodes stop acknowledging writes (503), and still serve reads; once etcd
        # is back they renew (or register again) and writes are acknowledged.
        etcd.proc.send_signal(signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            while True:
                try:
                    clients[1].put_object(Bucket=bucket, Key="fence", Body=b"f")
                except Exception as e:  # noqa: BLE001 - the 503 is what we wait for
                    assert http_status(e) == 503, e
                    break
                assert time.monotonic() - t0 < 8, "writes still acknowledged"
                time.sleep(0.2)
            fenced_after = time.monotonic() - t0
            assert clients[1].get_object(Bucket=bucket, Key="obj-4096")["Body"].read() == \
                objs["obj-4096"]
        finally:
            etcd.proc.send_signal(signal.SIGCONT)
        t0 = time.monotonic()
        while True:
            try:
                clients[1].put_object(Bucket=bucket, Key="fence", Body=b"f")
                break
            except Exception as e:  # noqa: BLE001
                assert http_status(e) == 503, e
                assert time.monotonic() - t0 < 15, "writes not acknowledged again"
                time.sleep(0.2)
        print(f"fenced {fenced_after:.1f} s after etcd stopped, "
              f"writes back {time.monotonic() - t0:.1f} s after it resumed")
        objs["fence"] = b"f"

        # One node gone: 4 of 6 shards of every object are left (k).
        nodes[2].kill9()
        for c in clients[:2]:
            for key, data in objs.items():
                assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == data, key
        # A write cannot reach k+1 drives: refused, and in bounded time.
        t0 = time.monotonic()
        with pytest.raises(Exception) as ei:
            clients[0].put_object(Bucket=bucket, Key="after-kill", Body=b"x" * 1000)
        took = time.monotonic() - t0
        assert http_status(ei.value) == 503, ei.value
        assert took < 3 * DRIVE_TIMEOUT_MS / 1000, took
        print(f"PUT with a node killed: 503 in {took:.2f} s")

        # It comes back: the same drives, the same objects through it.
        nodes[2].launch()
        nodes[2].wait_s3()
        for key, data in objs.items():
            assert clients[2].get_object(Bucket=bucket, Key=key)["Body"].read() == data, key
        clients[1].put_object(Bucket=bucket, Key="after-restart", Body=b"y" * 5000)
        assert clients[2].get_object(Bucket=bucket, Key="after-restart")["Body"].read() == \
            b"y" * 5000
    finally:
        for n in nodes:
            if n.proc is not None:
                n.kill9()
        etcd.stop()
        if not os.environ.get("OPENLAKE_KEEP_DATA"):
            shutil.rmtree(root, ignore_errors=True)
