"""A cluster storm: writers through every node while one node is killed
(-9) in the middle.  Six nodes of one drive, one set of 4+2 across
them (one node down leaves 5 of 6 shards: k + 1, writes go on).  Eight boto3
writers PUT objects of mixed sizes (0 B to 3 MiB, a few multipart, a few keys
overwritten by several writers) through the nodes, two of them through the
victim; the victim is killed -9 half-way.  Every acknowledged PUT is recorded
(key -> sha256).  Then: every acknowledged object reads back byte-identical
through every survivor; a key whose PUTs were not acknowledged reads 404 or
one whole body that was sent for it; every listed key reads.  The victim
restarts and serves every object; `openlake admin heal` through it rebuilds
its missing shards, checked by killing two *other* nodes: objects written
while the victim was down then read only if the victim has their shards."""
import hashlib
import json
import os
import random
import subprocess
import threading
import time

from cluster_harness import Cluster, needs_etcd
from helpers import http_status, make_client, openlake_binary, unique_bucket

pytestmark = needs_etcd

KiB, MiB = 1024, 1024 * 1024
# Sizes and weights: mostly small, a few large, so a few seconds make a few
# hundred objects on a loaded two-core machine.
SIZES = [(0, 2), (1, 2), (1000, 4), (4 * KiB, 6), (37 * KiB, 4), (256 * KiB, 3),
         (1 * MiB, 2), (3 * MiB, 1)]
PART = 256 * KiB  # multipart part size (the nodes run with --min_part_bytes PART)
RETRIES_503 = 3   # a writer retries a 503 this many times, then gives up on the PUT


def sha(b):
    return hashlib.sha256(b).hexdigest()


def status_of(e):
    """The HTTP status of a botocore error, None for a transport error."""
    resp = getattr(e, "response", None)
    return http_status(e) if resp else None


class Ledger:
    """What the writers sent and what was acknowledged, per key."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent = {}    # key -> set of sha256 of every body sent for it
        self.acked = {}   # key -> sha256 of the last acknowledged body
        self.acks = 0
        self.multipart_acks = 0
        self.fails = {}   # kind -> count
        self.ack_times = []

    def send(self, key, digest):
        with self.lock:
            self.sent.setdefault(key, set()).add(digest)

    def ack(self, key, digest, multipart=False):
        with self.lock:
            self.acked[key] = digest
            self.acks += 1
            self.multipart_acks += multipart
            self.ack_times.append(time.monotonic())

    def fail(self, kind):
        with self.lock:
            self.fails[kind] = self.fails.get(kind, 0) + 1


def put_once(c, bucket, key, data, multipart):
    if not multipart:
        c.put_object(Bucket=bucket, Key=key, Body=data)
        return
    up = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for i in range(0, len(data), PART):
        e = c.upload_part(Bucket=bucket, Key=key, UploadId=up, PartNumber=len(parts) + 1,
                          Body=data[i:i + PART])
        parts.append({"PartNumber": len(parts) + 1, "ETag": e["ETag"]})
    c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up,
                                MultipartUpload={"Parts": parts})


def writer(wid, endpoint, bucket, ledger, stop, shared_keys, exclusive_sizes):
    """PUTs until stop is set.  Keys are the writer's own (w<id>-<n>) except
    one in eight, which goes to a key every writer overwrites.  A 503 is
    retried RETRIES_503 times (same body); any other failure gives up on the
    PUT.  Only a PUT that returned success is recorded as acknowledged."""
    c = make_client(endpoint, read_timeout=15)
    rng = random.Random(wid)
    sizes, weights = zip(*exclusive_sizes)
    n = 0
    while not stop.is_set():
        n += 1
        key = rng.choice(shared_keys) if n % 8 == 0 else f"w{wid}-{n:05d}"
        size = rng.choices(sizes, weights)[0]
        # Every writer's third PUT is a multipart upload of three parts, and
        # so is one in five of the larger ones after it.
        size = 2 * PART + 1000 if n == 3 else size
        multipart = n == 3 or (size >= PART and n % 5 == 0)
        data = os.urandom(size)
        digest = sha(data)
        ledger.send(key, digest)
        for attempt in range(RETRIES_503 + 1):
            try:
                put_once(c, bucket, key, data, multipart)
                ledger.ack(key, digest, multipart)
                break
            except Exception as e:  # noqa: BLE001 - a failed PUT is expected here
                st = status_of(e)
                if st == 503 and attempt < RETRIES_503:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                ledger.fail(str(st) if st else type(e).__name__)
                time.sleep(0.05)  # a dead node refuses at once: do not spin
                break


def get_sha(c, bucket, key):
    """sha256 of the object's body, or None for 404."""
    try:
        r = c.get_object(Bucket=bucket, Key=key)
    except Exception as e:  # noqa: BLE001
        if status_of(e) == 404:
            return None
        raise
    data = r["Body"].read()
    assert len(data) == r["ContentLength"], (key, len(data), r["ContentLength"])
    return sha(data)


def check_all(endpoint, bucket, ledger, threads=4):
    """Every acknowledged key reads its acknowledged body through endpoint
    (a key overwritten by several writers: one of the bodies sent for it,
    never 404); every key that was sent but not acknowledged reads 404 or
    one whole body sent for it.  Returns the number of GETs."""
    keys = sorted(ledger.sent)
    errors = []

    def work(part):
        c = make_client(endpoint, read_timeout=30)
        for key in part:
            try:
                got = get_sha(c, bucket, key)
            except Exception as e:  # noqa: BLE001
                errors.append(f"{key}: GET failed through {endpoint}: {e!r}")
                continue
            sent = ledger.sent[key]
            if key in ledger.acked:
                if key.startswith("shared-"):
                    ok = got is not None and got in sent
                else:
                    ok = got == ledger.acked[key]
            else:
                ok = got is None or got in sent
            if not ok:
                errors.append(f"{key}: through {endpoint} read {got}, acked "
                              f"{ledger.acked.get(key)}, sent {len(sent)} bodies")

    ts = [threading.Thread(target=work, args=(keys[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, f"{len(errors)} bad reads, first: " + "\n".join(errors[:10])
    return len(keys)


def list_all(c, bucket):
    keys, token = [], None
    while True:
        kw = {"ContinuationToken": token} if token else {}
        r = c.list_objects_v2(Bucket=bucket, **kw)
        keys += [o["Key"] for o in r.get("Contents", [])]
        if not r.get("IsTruncated"):
            return keys
        token = r["NextContinuationToken"]


def admin_cmd(verb, endpoint, timeout=60):
    out = subprocess.run([str(openlake_binary()), "admin", verb, "--endpoint", endpoint],
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def storm(endpoints, seconds, middle, bucket, ledger):
    """Runs one writer per endpoint for `seconds`; calls middle() half-way.
    Returns the time middle() was called."""
    stop = threading.Event()
    shared = [f"shared-{i}" for i in range(6)]
    ws = [threading.Thread(target=writer, args=(i, ep, bucket, ledger, stop, shared, SIZES))
          for i, ep in enumerate(endpoints)]
    for w in ws:
        w.start()
    time.sleep(seconds / 2)
    t_mid = time.monotonic()
    middle()
    time.sleep(seconds / 2)
    stop.set()
    for w in ws:
        w.join(timeout=60)
        assert not w.is_alive(), "a writer hangs"
    return t_mid


def test_node_killed_mid_storm():
    t0 = time.monotonic()
    cl = Cluster(nodes=6, dirs=1, k=4, m=2, prefix="ol_storm_")
    for n in cl.nodes:
        n.extra += ["--min_part_bytes", str(PART)]
    with cl:
        assert cl.pool_output.count("set ") == 1, cl.pool_output
        nodes = cl.nodes
        victim = nodes[5]
        bucket = unique_bucket("storm")
        make_client(nodes[0].endpoint).create_bucket(Bucket=bucket)
        ledger = Ledger()
        # Six writers through the five survivors, two through the victim.
        eps = [n.endpoint for n in nodes[:5]] + [nodes[0].endpoint] + [victim.endpoint] * 2
        t_kill = storm(eps, 4.0, victim.kill9, bucket, ledger)
        after_kill = sum(1 for t in ledger.ack_times if t > t_kill + 0.5)
        hist = {}
        for t in ledger.ack_times:
            b = int((t - t_kill) // 0.5)
            hist[b] = hist.get(b, 0) + 1
        print("acks per half second around the kill:",
              " ".join(f"{b * 0.5:+.1f}:{hist[b]}" for b in sorted(hist)))
        print(f"storm: {len(ledger.sent)} keys, {ledger.acks} PUTs acknowledged "
              f"({ledger.multipart_acks} multipart; {after_kill} more than 0.5 s after the kill), "
              f"failures {ledger.fails}")
        assert ledger.acks >= 50, f"only {ledger.acks} PUTs acknowledged"
        assert ledger.multipart_acks >= 1, "no multipart upload acknowledged"
        assert after_kill >= 5, f"writes did not go on with one node down ({after_kill})"

        for n in nodes[:5]:
            check_all(n.endpoint, bucket, ledger)
        c0 = make_client(nodes[0].endpoint)
        listed = list_all(c0, bucket)
        assert set(ledger.acked) <= set(listed), set(ledger.acked) - set(listed)
        for key in listed:
            assert key in ledger.sent, key
            assert get_sha(c0, bucket, key) is not None, f"{key} listed, GET 404"
        t1 = time.monotonic()
        print(f"checked through 5 survivors: {t1 - t0:.1f} s so far")

        # The victim comes back and serves everything.
        victim.launch()
        victim.wait_s3()
        check_all(victim.endpoint, bucket, ledger)
        # The survivors' catch-up logs give it the shards of the writes it
        # missed (ec/catchup.h) once it answers again; a heal through it
        # rebuilds whatever is left.  Together they rebuilt something (the
        # victim missed writes), and nothing is unrecoverable.
        out = admin_cmd("heal", victim.endpoint)
        print("heal:", out.strip())
        assert '"unrecoverable":0' in out, out
        healed = int(json.loads(out)["shards_rebuilt"])
        for n in nodes[:5]:
            cu = json.loads(admin_cmd("info", n.endpoint)).get("catchup", {})
            healed += int(cu.get("healed", 0))
        assert healed > 0, out
        # Two other nodes go: 4 of 6 shards left, the victim's among them.
        nodes[1].kill9()
        nodes[2].kill9()
        check_all(victim.endpoint, bucket, ledger)
        check_all(nodes[0].endpoint, bucket, ledger)
        print(f"total {time.monotonic() - t0:.1f} s")

