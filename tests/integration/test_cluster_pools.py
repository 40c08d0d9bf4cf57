"""Adding capacity to a running cluster (issue #12): three nodes x two
drives hold pool 0 (4+2); three more nodes start and pool 1 is added with
`openlake admin cluster pool` while the first three run.  Without a restart:
old objects read through every node (the new ones too), new objects go to
both pools (by free space: equal here), an overwrite of an old key stays in
pool 0, a listing shows every key once.  Then membership: a node killed -9
is marked down in the map within the lease TTL and a little, and up again
once it restarts."""
import time

from cluster_harness import Cluster, admin, body, info, needs_etcd
from helpers import make_client, unique_bucket

pytestmark = needs_etcd

TTL_S = 6  # cluster/member.h's default lease


def pool_live_bytes(nodes):
    """Live bytes of the local drives of `nodes` (their own admin info)."""
    total = 0
    for n in nodes:
        for d in info(n)["drives"]:
            if not d.get("remote"):
                total += d["live_bytes"]
    return total


def node_state(endpoint, name):
    shown = admin("show", "--cluster", endpoint).stdout
    for line in shown.splitlines():
        f = line.split()
        if f and f[0] == name:
            return f[1]
    raise AssertionError(shown)


def test_add_pool_live():
    with Cluster(nodes=3, dirs=2, k=4, m=2, prefix="ol_pools_") as cl:
        old = list(cl.nodes)
        c0 = make_client(old[0].endpoint)
        bucket = unique_bucket("pools")
        c0.create_bucket(Bucket=bucket)
        objs = {}
        for i in range(6):
            objs[f"old-{i}"] = body(4096 + i * 1000, i)
            c0.put_object(Bucket=bucket, Key=f"old-{i}", Body=objs[f"old-{i}"])

        new = cl.add_pool(3)
        # The running nodes follow the map (every second): two pools each.
        deadline = time.monotonic() + 10
        for n in old + new:
            while len(info(n)["pools"]) != 2:
                assert time.monotonic() < deadline, info(n)
                time.sleep(0.2)
        assert "pool 1: sets" in admin("show", "--cluster", cl.etcd.endpoint).stdout

        clients = [make_client(n.endpoint) for n in old + new]
        for c in clients:
            for key, data in objs.items():
                assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == data, key

        # New keys: spread over both pools (shards past inline_bytes, so that
        # they count in the drives' live bytes).
        p0, p1 = pool_live_bytes(old), pool_live_bytes(new)
        for i in range(12):
            key = f"new-{i}"
            objs[key] = body(1 << 20, 100 + i)
            clients[i % len(clients)].put_object(Bucket=bucket, Key=key, Body=objs[key])
        g0, g1 = pool_live_bytes(old) - p0, pool_live_bytes(new) - p1
        assert g0 >= (1 << 20) and g1 >= (1 << 20), (g0, g1)

        # An overwrite of an old key stays where the key is (pool 0), even
        # when written through a node of pool 1.
        p0, p1 = pool_live_bytes(old), pool_live_bytes(new)
        objs["old-0"] = body(3 << 20, 7)
        clients[-1].put_object(Bucket=bucket, Key="old-0", Body=objs["old-0"])
        g0, g1 = pool_live_bytes(old) - p0, pool_live_bytes(new) - p1
        assert g0 >= (3 << 20) and g1 < (256 << 10), (g0, g1)

        for c in (clients[0], clients[-1]):
            for key, data in objs.items():
                assert c.get_object(Bucket=bucket, Key=key)["Body"].read() == data, key
            listed = [o["Key"] for o in c.list_objects_v2(Bucket=bucket).get("Contents", [])]
            assert listed == sorted(objs), listed

        # Membership: n2 dies; the live nodes mark it down once its lease is gone.
        assert node_state(cl.etcd.endpoint, "n2") == "up"
        old[1].kill9()
        t0 = time.monotonic()
        while node_state(cl.etcd.endpoint, "n2") != "down":
            assert time.monotonic() - t0 < TTL_S + 4, "n2 not marked down"
            time.sleep(0.3)
        nodes = {n["name"]: n["state"] for n in info(new[0])["nodes"]}
        deadline = time.monotonic() + 3
        while nodes.get("n2") != "down" and time.monotonic() < deadline:
            time.sleep(0.3)
            nodes = {n["name"]: n["state"] for n in info(new[0])["nodes"]}
        assert nodes.get("n2") == "down" and nodes.get("n1") == "up", nodes
        # Pool 0 still reads (4 of 6 shards) through a node of pool 1.
        assert clients[-1].get_object(Bucket=bucket, Key="old-1")["Body"].read() == objs["old-1"]
        old[1].launch()
        old[1].wait_s3()
        t0 = time.monotonic()
        while node_state(cl.etcd.endpoint, "n2") != "up":
            assert time.monotonic() - t0 < 5, "n2 not marked up"
            time.sleep(0.3)
