"""The native client on a three-node cluster (3+3 over six drives, so that
four drives still make the write quorum): given
one node, it learns the others (HELLO), spreads its calls over them, and
when the node it was given is killed it goes on through the others, reading
every object byte-identical (the serving node rebuilds the lost shards) and
writing new ones.  KV blocks placed on the killed node become misses; the
others still hit, and nothing is an error.  Every node has two lanes
(native_lanes): the client learns the other nodes' lanes from HELLO and
reaches every lane of every node."""

import re
import urllib.request


from cluster_harness import Cluster, body, needs_etcd
from helpers import make_client, unique_bucket, import_openlake

pytestmark = needs_etcd
openlake = import_openlake()

MIB = 1 << 20


def test_native_cluster_node_down():
    cl = Cluster(nodes=3, dirs=2, k=3, m=3)
    for n in cl.nodes:
        n.extra += ["--native_lanes", "2", "--metrics_public", "true"]
    with cl:
        n1 = cl.nodes[0]
        s3 = make_client(n1.endpoint)
        bucket = unique_bucket("ncl")
        s3.create_bucket(Bucket=bucket)
        c = openlake.Client(n1.endpoint, lanes=2)
        try:
            # The KV namespace: keys spread over the three nodes.
            from openlake.kv import chain_keys
            kv = c.kv()
            keys = chain_keys(range(64 * 16), 16)
            blocks = [bytes([i]) * 1000 for i in range(len(keys))]
            assert kv.put(keys, blocks) == ["stored"] * len(keys)
            objs = {f"o/{n}": body(n, n % 97) for n in (0, 1, 4096, 3 * MIB + 7, 70 * MIB + 1)}
            for k, v in objs.items():
                c.put(bucket, k, v)
            # Another node's S3 sees the same objects.
            s3b = make_client(cl.nodes[1].endpoint)
            for k, v in objs.items():
                assert s3b.get_object(Bucket=bucket, Key=k)["Body"].read() == v
            # Each node's every lane served some of it (the peers' lanes came
            # from n1's HELLO).
            for n in cl.nodes:
                with urllib.request.urlopen(n.endpoint + "/_openlake/metrics", timeout=10) as r:
                    m = re.findall(r'^openlake_native_lane_requests_total\{lane="\d+"\} (\d+)$',
                                   r.read().decode(), re.M)
                assert len(m) == 2 and all(int(x) > 0 for x in m), (n.name, m)
            # The node the client was given goes away: the client goes on.
            n1.kill9()
            for k, v in objs.items():
                assert c.get(bucket, k) == v, k
            c.put(bucket, "after", b"written with n1 down")
            assert c.get(bucket, "after") == b"written with n1 down"
            res = c.get_many([(bucket, "o/4096", bytearray(100), i * 10) for i in range(200)])
            assert res == [100] * 200
            # n1's KV blocks are misses now, never errors or wrong bytes; the
            # other nodes' are hits.
            bufs = [bytearray(1000) for _ in keys]
            got = kv.get(keys, bufs)
            hits = [i for i, g in enumerate(got) if g is not None]
            assert 0 < len(hits) < len(keys), got
            assert all(got[i] == 1000 and bytes(bufs[i]) == blocks[i] for i in hits)
            assert kv.match_prefix(keys) <= len(keys)
        finally:
            c.close()
