"""Conditional creates racing through different nodes of a cluster (issue
#12): three nodes with two drives each, one pool of 4+2.  Round after round,
six writers (two per node) send PutObject with If-None-Match: * for the same
fresh key at once: exactly one gets 200, the others 412 PreconditionFailed
(what a single node answers), and every node then reads the winner's body.

Each node's own lock table cannot see the others' commits: what makes one
winner is the quorum lock over the key's erasure set (src/ec/qlock.h), a
majority of the set's drives granting the key to one commit."""
import concurrent.futures
import threading

import helpers as h
from cluster_harness import Cluster, needs_etcd
from helpers import KIB, unique_bucket

pytestmark = needs_etcd

ROUNDS = 20
PER_NODE = 2


def _put(node, bucket, key, data, **headers):
    return h.signed_request(node, "PUT", f"/{bucket}/{key}", body=data, headers=headers)


def test_create_only_race_across_nodes():
    with Cluster(nodes=3, dirs=2, k=4, m=2, prefix="ol_cluster_cond_") as cl:
        clients = cl.clients()
        bucket = unique_bucket("cond")
        clients[0].create_bucket(Bucket=bucket)
        writers = [cl.nodes[i % len(cl.nodes)] for i in range(PER_NODE * len(cl.nodes))]
        nw = len(writers)
        failures = []
        with concurrent.futures.ThreadPoolExecutor(nw) as ex:
            for rnd in range(ROUNDS):
                key = f"race-{rnd}"
                # Distinct bodies; some large enough that their commit is
                # not instant (more time for a second commit to slip in).
                bodies = [bytes([65 + i]) * (200 * KIB if (i + rnd) % 2 else 700)
                          for i in range(nw)]
                barrier = threading.Barrier(nw)

                def one(i, key=key, bodies=bodies, barrier=barrier):
                    barrier.wait()
                    r = _put(writers[i], bucket, key, bodies[i], **{"If-None-Match": "*"})
                    code = h.parse_error(r.body)["Code"] if r.status != 200 else ""
                    return r.status, code

                res = list(ex.map(one, range(nw)))
                statuses = [s for s, _ in res]
                if sorted(statuses) != [200] + [412] * (nw - 1):
                    failures.append((rnd, res))
                    continue
                assert all(c == "PreconditionFailed" for s, c in res if s == 412), res
                want = bodies[statuses.index(200)]
                for c in clients:
                    got = c.get_object(Bucket=bucket, Key=key)["Body"].read()
                    assert got == want, (rnd, len(got), got[:1], want[:1])
        assert not failures, f"{len(failures)} of {ROUNDS} rounds without one winner: " \
            f"{failures[:3]}"
