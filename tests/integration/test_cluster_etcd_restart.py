"""etcd killed (-9) and restarted under load.  Three nodes of two drives,
one set of 4+2; a writer and a reader through each node; etcd is killed and,
7.5 s later (past the lease TTL of 6 s), started again on the same data
directory and ports.  Writes through every node are acknowledged all along
(none refused) and reads go on; no acknowledged write is lost (all read back
byte-identical through every node after etcd is back).

What the nodes do (docs/ARCHITECTURE.md "Cluster", cluster/member.h "When etcd
is down"): a node that cannot renew its lease would fence itself TTL - margin
(5 s) after the last renewal etcd answered; but its peers, asked over UCX,
vouch that etcd is silent for them too, and with a majority of the map's nodes
without etcd it acknowledges on their vouches ("etcd_down_vouched").  etcd 3.4
keeps leases across a restart (their deadlines start over), so once it
answers the nodes renew the same leases: no new registration, no map change."""
import os
import random
import threading
import time

from cluster_harness import Cluster, needs_etcd
from helpers import make_client, unique_bucket
from test_cluster_storm import KiB, get_sha, sha, status_of

pytestmark = needs_etcd


def test_etcd_killed_mid_load():
    with Cluster(nodes=3, dirs=2, k=4, m=2, prefix="ol_etcdrs_") as cl:
        nodes = cl.nodes
        bucket = unique_bucket("etcdrs")
        make_client(nodes[0].endpoint).create_bucket(Bucket=bucket)
        lock = threading.Lock()
        acked = {}      # key -> sha256
        events = []     # (time, "ack" | "503" | other, node index)
        read_errors = []
        reads = [0]
        stop = threading.Event()

        def put_loop(i):
            c = make_client(nodes[i].endpoint, read_timeout=15)
            rng = random.Random(100 + i)
            n = 0
            while not stop.is_set():
                n += 1
                key = f"n{i}-{n:05d}"
                data = os.urandom(rng.choice([0, 100, 4 * KiB, 64 * KiB, 300 * KiB]))
                try:
                    c.put_object(Bucket=bucket, Key=key, Body=data)
                    what = "ack"
                    with lock:
                        acked[key] = sha(data)
                except Exception as e:  # noqa: BLE001
                    what = str(status_of(e) or type(e).__name__)
                with lock:
                    events.append((time.monotonic(), what, i))
                if what != "ack":
                    time.sleep(0.1)

        def get_loop(i):
            c = make_client(nodes[i].endpoint, read_timeout=15)
            rng = random.Random(200 + i)
            while not stop.is_set():
                with lock:
                    keys = list(acked.items())
                if not keys:
                    time.sleep(0.05)
                    continue
                key, digest = rng.choice(keys)
                try:
                    got = get_sha(c, bucket, key)
                    if got != digest:
                        read_errors.append(f"{key} via n{i + 1}: {got} != {digest}")
                except Exception as e:  # noqa: BLE001
                    read_errors.append(f"{key} via n{i + 1} at {time.monotonic():.1f}: {e!r}")
                reads[0] += 1

        threads = [threading.Thread(target=put_loop, args=(i,)) for i in range(3)] + \
                  [threading.Thread(target=get_loop, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        try:
            time.sleep(1.5)
            t_kill = time.monotonic()
            cl.etcd.proc.kill()
            cl.etcd.proc.wait()
            # Down past every node's lease deadline (TTL - margin = 5 s after
            # the last renewal etcd answered) and past the TTL itself.
            time.sleep(7.5)
            reads_down = reads[0]
            cl.etcd.log.close()
            t_back = time.monotonic()
            cl.etcd.start()
            t_up = time.monotonic()
            # Writes through every node acknowledged after etcd is back.
            deadline = t_up + 15
            while time.monotonic() < deadline:
                with lock:
                    back = {i for t, w, i in events if t > t_up and w == "ack"}
                if back == {0, 1, 2}:
                    break
                time.sleep(0.1)
            t_acked = time.monotonic()
            time.sleep(1.0)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=60)
        assert back == {0, 1, 2}, f"writes not acknowledged again through n{set(range(3)) - back}"
        down = [(t - t_kill, w, i) for t, w, i in events if t_kill <= t <= t_back]
        # None refused while etcd was down, nor while it came back.
        bad = [(t - t_kill, w, i) for t, w, i in events if t >= t_kill and w != "ack"]
        assert not bad, f"writes refused after etcd was killed: {bad[:5]}"
        late = {i for t, w, i in down if w == "ack" and t > 6.0}
        assert late == {0, 1, 2}, f"no write acknowledged past the leases through n{late}"
        assert not read_errors, read_errors[:5]
        assert reads_down > 10, "reads did not go on while etcd was down"
        acks_down = sum(1 for _, w, _ in down if w == "ack")
        print(f"etcd down {t_back - t_kill:.1f} s: {acks_down} writes acknowledged, none "
              f"refused; etcd started in {t_up - t_back:.1f} s, writes through every node "
              f"{t_acked - t_up:.1f} s after; {reads[0]} reads")
        # Nothing acknowledged is lost: every node reads every key back.
        for n in nodes:
            c = make_client(n.endpoint)
            for key, digest in acked.items():
                assert get_sha(c, bucket, key) == digest, (n.name, key)
