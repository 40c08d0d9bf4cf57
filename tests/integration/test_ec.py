"""Erasure-coded server: `openlake server DIR{1...6}` (4+2) through boto3.

Objects survive two wiped drives (and then two others after a heal), flipped
bytes in shard data, a PUT with three drives offline fails cleanly (503) and
leaves the previous version, concurrent PUTs of one key leave one whole
version, and every operation without an EC implementation answers 501.
"""
import hashlib
import json
import os
import random
import shutil
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

import helpers

NDRIVES = 6


class ECServer(helpers.Server):
    def command(self):
        cmd = super().command()
        # Replace the single data directory with the brace form of six.
        i = cmd.index(str(self.data_dir))
        cmd[i] = str(self.workdir / "d{1...6}")
        return cmd + ["--inline_bytes", "4096", "--metrics_public", "true",
                      "--scrub_interval_ms", str(getattr(self, "scrub_ms", 0))]

    def drive(self, i):
        return self.workdir / f"d{i + 1}"

    def wipe(self, i):
        shutil.rmtree(self.drive(i))


def admin(srv, *args):
    out = subprocess.run([str(helpers.openlake_binary()), "admin", *args, "--endpoint",
                          srv.endpoint], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def body_for(i):
    if i in (7, 150):
        size = 20 * helpers.MIB if i == 7 else 9 * helpers.MIB + 3
    elif i % 10 == 0:
        size = (i * 7919) % (2 * helpers.MIB)
    else:
        size = (i * 104729) % (300 * 1024)
    if i < 3:
        size = i  # 0, 1 and 2 bytes
    rnd = random.Random(i)
    return rnd.randbytes(size)


def key_for(i):
    return f"dir{i % 7}/obj-{i:04d}"


@pytest.fixture
def ec(tmp_path):
    srv = ECServer(tmp_path / "ec", threads=2)
    srv.start()
    yield srv
    srv.close()


def check_all(s3, bucket, n, pool):
    def one(i):
        got = s3.get_object(Bucket=bucket, Key=key_for(i))["Body"].read()
        assert hashlib.md5(got).digest() == hashlib.md5(body_for(i)).digest(), key_for(i)
    list(pool.map(one, range(n)))


def flip_segment_bytes(drive, every=96 * 1024):
    flips = 0
    for seg in sorted((drive / "seg").glob("*.seg")):
        size = seg.stat().st_size
        with open(seg, "r+b") as f:
            for off in range(4096 + 1234, size, every):
                f.seek(off)
                b = f.read(1)
                f.seek(off)
                f.write(bytes([b[0] ^ 0x5A]))
                flips += 1
    return flips


def test_ec_end_to_end(ec):
    s3 = helpers.make_client(ec.endpoint)
    bucket = helpers.unique_bucket("ec")
    s3.create_bucket(Bucket=bucket)
    n = 300
    pool = ThreadPoolExecutor(8)

    def put(i):
        b = body_for(i)
        r = s3.put_object(Bucket=bucket, Key=key_for(i), Body=b,
                          ContentType="application/x-test", Metadata={"n": str(i)})
        assert r["ETag"] == '"%s"' % hashlib.md5(b).hexdigest()
    list(pool.map(put, range(n)))

    # Metadata, ranges, conditionals, listing.
    h = s3.head_object(Bucket=bucket, Key=key_for(7))
    assert h["ContentLength"] == 20 * helpers.MIB
    assert h["ContentType"] == "application/x-test" and h["Metadata"] == {"n": "7"}
    r = s3.get_object(Bucket=bucket, Key=key_for(7), Range="bytes=5000000-5000099")
    assert r["Body"].read() == body_for(7)[5000000:5000100]
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key=key_for(7), IfNoneMatch=h["ETag"])
    assert helpers.http_status(e.value) == 304
    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={
            "PageSize": 70}):
        keys += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
    assert keys == sorted((key_for(i), len(body_for(i))) for i in range(n))
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == [f"dir{d}/" for d in range(7)]
    v1 = s3.list_objects(Bucket=bucket, Prefix="dir3/", MaxKeys=10)
    assert v1["IsTruncated"] and len(v1["Contents"]) == 10
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="nope")
    assert helpers.error_code(e.value) == "NoSuchKey"
    # Operations EC mode lacks answer 501, never a wrong success.
    for call in (lambda: s3.copy_object(Bucket=bucket, Key="c",
                                        CopySource={"Bucket": bucket, "Key": key_for(5)}),
                 lambda: s3.get_bucket_versioning(Bucket=bucket),
                 lambda: s3.put_object_tagging(Bucket=bucket, Key=key_for(5),
                                               Tagging={"TagSet": []})):
        with pytest.raises(ClientError) as e:
            call()
        assert helpers.http_status(e.value) == 501

    # Two drives wiped: everything reads; a heal rebuilds them.
    ec.stop()
    ec.wipe(1)
    ec.wipe(4)
    ec.start()
    check_all(s3, bucket, n, pool)
    st = admin(ec, "heal")
    assert st["unrecoverable"] == 0
    # Reads healed some already (heal on read); together, two shards each.
    again = admin(ec, "heal")
    assert again["shards_rebuilt"] == 0 and again["objects"] == n

    # Two other drives: still everything.
    ec.stop()
    ec.wipe(0)
    ec.wipe(3)
    ec.start()
    check_all(s3, bucket, n, pool)
    admin(ec, "heal")

    # Bit rot in shard data of two drives: GETs stay correct, heal repairs.
    ec.stop()
    flips = flip_segment_bytes(ec.drive(2)) + flip_segment_bytes(ec.drive(5))
    assert flips >= 20
    ec.start()
    st = admin(ec, "heal")
    assert st["corrupt"] >= 20 and st["shards_rebuilt"] >= st["corrupt"], st
    check_all(s3, bucket, n, pool)
    assert admin(ec, "heal")["corrupt"] == 0
    info = admin(ec, "info")
    assert len(info["drives"]) == NDRIVES and info["sets"][0]["state"] == "healthy"

    # Three drives offline: the PUT fails with 503, the old version stays.
    for d in (0, 2, 4):
        admin(ec, "drive", "--index", str(d), "--state", "offline")
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key=key_for(5), Body=b"new" * 1000)
    assert helpers.http_status(e.value) == 503
    for d in (0, 2, 4):
        admin(ec, "drive", "--index", str(d), "--state", "online")
    assert s3.get_object(Bucket=bucket, Key=key_for(5))["Body"].read() == body_for(5)

    # Concurrent PUTs of one key: one whole version afterwards.
    bodies = [bytes([65 + t]) * (300 * 1024 + t) for t in range(8)]
    clients = [helpers.make_client(ec.endpoint) for _ in range(8)]
    barrier = threading.Barrier(8)

    def race(t):
        barrier.wait()
        clients[t].put_object(Bucket=bucket, Key="race", Body=bodies[t])
    list(pool.map(race, range(8)))
    admin(ec, "heal", "--bucket", bucket, "--key", "race")
    got = s3.get_object(Bucket=bucket, Key="race")["Body"].read()
    assert got in bodies

    # Delete and bucket removal.
    s3.delete_object(Bucket=bucket, Key="race")
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="race")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=bucket)
    assert helpers.error_code(e.value) == "BucketNotEmpty"
    pool.shutdown()


def test_ec_bucket_ops(ec):
    s3 = helpers.make_client(ec.endpoint)
    b = helpers.unique_bucket("ecb")
    s3.create_bucket(Bucket=b)
    s3.head_bucket(Bucket=b)
    assert b in [x["Name"] for x in s3.list_buckets()["Buckets"]]
    s3.put_object(Bucket=b, Key="k", Body=b"x")
    s3.delete_object(Bucket=b, Key="k")
    s3.delete_bucket(Bucket=b)
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=b)
    assert helpers.http_status(e.value) == 404


def test_ec_scrubber(tmp_path):
    srv = ECServer(tmp_path / "scrub", threads=2)
    srv.scrub_ms = 300
    srv.start()
    try:
        s3 = helpers.make_client(srv.endpoint)
        b = helpers.unique_bucket("ecs")
        s3.create_bucket(Bucket=b)
        for i in range(5):
            s3.put_object(Bucket=b, Key=f"k{i}", Body=body_for(20 + i))
        srv.stop()
        srv.wipe(0)
        srv.start()
        import time
        import urllib.request
        deadline = time.monotonic() + 20
        rebuilt = 0
        while time.monotonic() < deadline and rebuilt < 5:
            text = urllib.request.urlopen(srv.endpoint + "/_openlake/metrics").read().decode()
            for line in text.splitlines():
                if line.startswith("openlake_ec_scrub_shards_rebuilt_total "):
                    rebuilt = int(line.split()[1])
            time.sleep(0.2)
        assert rebuilt == 5
        st = admin(srv, "heal")
        assert st["shards_rebuilt"] == 0 and st["objects"] == 5
    finally:
        srv.close()
