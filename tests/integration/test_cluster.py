"""A real three-node cluster on 127.0.0.1: one etcd, three `openlake server
--cluster` processes with two drives each, one pool of 4+2 built with
`openlake admin cluster pool`.  Objects written through any node read back
byte-identical through every node; with one node killed (-9) every object
still reads (4 of 6 shards left: k), a PUT is refused quickly (503, it cannot
reach the write quorum) rather than hanging; the node restarts, rejoins and
serves the objects again.  With etcd stopped (SIGSTOP) for longer than the
lease's TTL, writes and reads go on through every node: the nodes cannot renew
their leases, but each finds a majority of the map's nodes without etcd too
and acknowledges on their vouches (`admin info` says "etcd_down_vouched");
once etcd answers again they are back on their leases."""
import re
import signal
import subprocess
import time

import pytest

from cluster_harness import DRIVE_TIMEOUT_MS, Cluster, admin, body, needs_etcd
from helpers import make_client, openlake_binary, http_status, unique_bucket

pytestmark = needs_etcd


def _ack_state(node):
    """What `admin info` says the node acknowledges writes on."""
    out = subprocess.run([str(openlake_binary()), "admin", "info", "--endpoint", node.endpoint],
                         capture_output=True, text=True, timeout=20)
    m = re.search(r'"ack":"([a-z_]+)"', out.stdout)
    assert m, out.stdout + out.stderr
    return m.group(1)


def test_three_nodes():
    cl = Cluster(nodes=3, dirs=2, k=4, m=2)
    try:
        cl.start()
        etcd, nodes = cl.etcd, cl.nodes
        assert cl.pool_output.count("set ") == 1, cl.pool_output
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

        # etcd stops answering for longer than the lease's TTL (6 s): every node
        # keeps acknowledging writes, on its peers' vouches once its lease has
        # run out (cluster/member.h, "When etcd is down"), and reads go on.
        etcd.proc.send_signal(signal.SIGSTOP)
        n_down = 0
        states = set()
        try:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 8:
                i = n_down % 3
                key = f"etcd-down-{n_down}"
                data = body(1000 + n_down, n_down)
                clients[i].put_object(Bucket=bucket, Key=key, Body=data)  # never 503
                objs[key] = data
                n_down += 1
                got = clients[(i + 1) % 3].get_object(Bucket=bucket, Key="obj-4096")
                assert got["Body"].read() == objs["obj-4096"]
                if time.monotonic() - t0 > 6.5:
                    states.add(_ack_state(nodes[i]))
                time.sleep(0.1)
        finally:
            etcd.proc.send_signal(signal.SIGCONT)
        assert states == {"etcd_down_vouched"}, states
        t0 = time.monotonic()
        while {_ack_state(n) for n in nodes} != {"lease"}:
            assert time.monotonic() - t0 < 15, "leases not renewed after etcd resumed"
            time.sleep(0.2)
        print(f"etcd stopped 8 s: {n_down} writes acknowledged through every node; "
              f"back on leases {time.monotonic() - t0:.1f} s after it resumed")
        clients[1].put_object(Bucket=bucket, Key="fence", Body=b"f")
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
        cl.close()
