"""Erasure-coded server: `openlake server DIR{1...6}` (4+2) through boto3.

1,000 objects of 0 B to 50 MiB survive two wiped drives (and then two others
after a heal) byte-identical, flipped bytes in the shard data of 100 of them
are read around and repaired (counted), a PUT with three drives offline fails cleanly (503) and
leaves the previous version, concurrent PUTs of one key leave one whole
version, and every operation without an EC implementation answers 501.
"""
import hashlib
import json
import random
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError

import helpers

NDRIVES = 6


class ECServer(helpers.ECServer):
    """Six drives in the automatic geometry (3+3), with a small inline size,
    open metrics and the scrubber's interval from scrub_ms (0: off)."""

    def ec_args(self):
        return ["--inline_bytes", "4096", "--metrics_public", "true",
                "--scrub_interval_ms", str(getattr(self, "scrub_ms", 0))]


def admin(srv, *args, stderr=None):
    out = subprocess.run([str(helpers.openlake_binary()), "admin", *args, "--endpoint",
                          srv.endpoint], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    if stderr is not None:
        stderr.append(out.stderr)
    return json.loads(out.stdout)


# The numbers: 1,000 objects of 0 B to 50 MiB, most of them small,
# every tenth 64 KiB..2 MiB (the bit-rot targets), four of 20..50 MiB.
NOBJ = 1000
BIG = {7: 20 * helpers.MIB, 333: 50 * helpers.MIB, 555: 32 * helpers.MIB + 5,
       777: 27 * helpers.MIB + 1}
ROT_TARGETS = [i for i in range(NOBJ) if i % 10 == 0 and i >= 10]  # 99 objects
ROT_TARGETS.append(3)  # and one more: 100


def size_for(i):
    if i < 3:
        return i  # 0, 1 and 2 bytes
    if i in BIG:
        return BIG[i]
    if i % 10 == 0 or i == 3:
        return 64 * 1024 + (i * 7919) % (2 * helpers.MIB - 64 * 1024)
    return (i * 104729) % (48 * 1024)


def body_for(i):
    return random.Random(i).randbytes(size_for(i))


def key_for(i):
    return f"dir{i % 7}/obj-{i:04d}"


@pytest.fixture
def ec(tmp_path):
    srv = ECServer(tmp_path / "ec", threads=2)
    srv.start()
    yield srv
    srv.close()


def check_all(s3, bucket, digests, pool):
    def one(i):
        got = s3.get_object(Bucket=bucket, Key=key_for(i))["Body"].read()
        assert hashlib.sha256(got).digest() == digests[i], key_for(i)
    list(pool.map(one, sorted(digests)))


ROT_OFF = 1000    # body offset of the region searched for (inside data shard 0)
ROT_STRIDE = 256  # segment files are probed at this stride
ROT_WIN = 16


def rot_shard_data(drives, targets):
    """Flips one byte inside data shard 0 of each target object, wherever its
    bytes lie in the drives' segment files (every copy: dead ones too).

    The eset object is the S3 metadata blob then the body, and a data shard
    holds its part of the object as is, so body[ROT_OFF:ROT_OFF + 272] is
    inside shard 0 of any object of 64 KiB or more.  Every 16-byte window of
    that region goes into a dict; probing each file every 256 bytes is then
    certain to hit any copy of the region."""
    windows = {}
    for i, body in targets.items():
        region = body[ROT_OFF:ROT_OFF + ROT_STRIDE + ROT_WIN]
        for j in range(ROT_STRIDE):
            windows[region[j:j + ROT_WIN]] = i
    hit = set()
    for drive in drives:
        for seg in sorted((drive / "seg").glob("*.seg")):
            with open(seg, "r+b") as f:
                data = f.read()
                flips = []
                for x in range(4096, len(data) - ROT_WIN, ROT_STRIDE):
                    i = windows.get(data[x:x + ROT_WIN])
                    if i is not None:
                        flips.append(x)
                        hit.add(i)
                for x in flips:
                    f.seek(x)
                    f.write(bytes([data[x] ^ 0x5A]))
    return hit




def test_ec_end_to_end(ec):
    s3 = helpers.make_client(ec.endpoint)
    bucket = helpers.unique_bucket("ec")
    s3.create_bucket(Bucket=bucket)
    pool = ThreadPoolExecutor(8)
    digests = {}

    def put(i):
        b = body_for(i)
        r = s3.put_object(Bucket=bucket, Key=key_for(i), Body=b,
                          ContentType="application/x-test", Metadata={"n": str(i)})
        assert r["ETag"] == '"%s"' % hashlib.md5(b).hexdigest()
        digests[i] = hashlib.sha256(b).digest()
    list(pool.map(put, range(NOBJ)))

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
            "PageSize": 300}):
        keys += [(o["Key"], o["Size"]) for o in page.get("Contents", [])]
    assert keys == sorted((key_for(i), size_for(i)) for i in range(NOBJ))
    top = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    assert [p["Prefix"] for p in top["CommonPrefixes"]] == [f"dir{d}/" for d in range(7)]
    v1 = s3.list_objects(Bucket=bucket, Prefix="dir3/", MaxKeys=10)
    assert v1["IsTruncated"] and len(v1["Contents"]) == 10
    with pytest.raises(ClientError) as e:
        s3.get_object(Bucket=bucket, Key="nope")
    assert helpers.error_code(e.value) == "NoSuchKey"
    # Two drives wiped: everything reads byte-identical; a heal rebuilds them.
    ec.stop()
    ec.wipe(1)
    ec.wipe(4)
    ec.start()
    check_all(s3, bucket, digests, pool)
    # The deployment heal prints progress lines (stderr) while it runs, the
    # final counts (stdout) at the end.
    err = []
    st = admin(ec, "heal", "--progress-ms", "20", stderr=err)
    assert st["unrecoverable"] == 0 and st["objects"] == NOBJ, st
    progress = [ln for ln in err[0].splitlines() if ln.startswith("heal: ")]
    assert progress and " objects, " in progress[-1], err[0]
    counts = [int(ln.split()[1]) for ln in progress]
    assert counts == sorted(counts) and counts[-1] <= NOBJ, counts
    # Reads healed some already (heal on read); a second pass finds nothing.
    again = admin(ec, "heal")
    assert again["shards_rebuilt"] == 0 and again["objects"] == NOBJ, again

    # Two other drives: still everything.
    ec.stop()
    ec.wipe(0)
    ec.wipe(3)
    ec.start()
    check_all(s3, bucket, digests, pool)
    assert admin(ec, "heal")["unrecoverable"] == 0

    # Bit rot inside shard data of 100 objects: GETs stay correct (the first
    # 50 heal on read), the heal repairs the rest, and the counts add up.
    ec.stop()
    targets = {i: body_for(i) for i in ROT_TARGETS}
    hit = rot_shard_data([ec.drive(d) for d in range(NDRIVES)], targets)
    assert hit == set(ROT_TARGETS), sorted(set(ROT_TARGETS) - hit)
    del targets
    ec.start()
    healed0 = helpers.metric(ec, "openlake_ec_shards_healed_on_read_total")
    check_all(s3, bucket, {i: digests[i] for i in ROT_TARGETS[:50]}, pool)
    on_read = helpers.metric(ec, "openlake_ec_shards_healed_on_read_total") - healed0
    st = admin(ec, "heal")
    assert st["unrecoverable"] == 0 and st["corrupt"] >= 50, st
    assert on_read + st["shards_rebuilt"] >= 100, (on_read, st)
    check_all(s3, bucket, digests, pool)
    again = admin(ec, "heal")
    assert again["corrupt"] == 0 and again["shards_rebuilt"] == 0, again
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


def seg_bytes(srv):
    """Allocated bytes of every drive's segment files."""
    total = 0
    for d in range(NDRIVES):
        for f in (srv.drive(d) / "seg").glob("*.seg"):
            try:
                total += f.stat().st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def test_ec_copy_by_reference(ec):
    """CopyObject and whole-object UploadPartCopy in one erasure set share
    each shard's extents (no data written), keep the source's placement
    rotation, survive the source's delete, two wiped drives and a heal; a
    multipart source is copied as a manifest of copied parts."""
    s3 = helpers.make_client(ec.endpoint)
    b = helpers.unique_bucket("ecc")
    s3.create_bucket(Bucket=b)
    body = random.Random(5).randbytes(24 * helpers.MIB)
    s3.put_object(Bucket=b, Key="src", Body=body, Metadata={"a": "1"})
    before = seg_bytes(ec)
    s3.copy_object(Bucket=b, Key="dst", CopySource={"Bucket": b, "Key": "src"})
    s3.copy_object(Bucket=b, Key="dst2", CopySource={"Bucket": b, "Key": "src"},
                   MetadataDirective="REPLACE", Metadata={"b": "2"})
    # A streamed copy would have written 2 x 36 MiB of shards.
    assert seg_bytes(ec) - before < 4 * helpers.MIB
    up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
    p1 = s3.upload_part_copy(Bucket=b, Key="mp", UploadId=up, PartNumber=1,
                             CopySource={"Bucket": b, "Key": "src"})["CopyPartResult"]["ETag"]
    tail = b"tail" * 1000
    p2 = s3.upload_part(Bucket=b, Key="mp", UploadId=up, PartNumber=2, Body=tail)["ETag"]
    assert p1 == '"%s"' % hashlib.md5(body).hexdigest()
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": p1}, {"PartNumber": 2, "ETag": p2}]})
    mp_etag = s3.head_object(Bucket=b, Key="mp")["ETag"]
    s3.copy_object(Bucket=b, Key="mp.c", CopySource={"Bucket": b, "Key": "mp"})
    assert seg_bytes(ec) - before < 8 * helpers.MIB
    # The sources go (the multipart one's parts to the cleaner).
    s3.delete_object(Bucket=b, Key="src")
    s3.delete_object(Bucket=b, Key="mp")
    time.sleep(1.0)
    assert s3.get_object(Bucket=b, Key="dst")["Body"].read() == body
    h2 = s3.head_object(Bucket=b, Key="dst2")
    assert h2["Metadata"] == {"b": "2"} and h2["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
    g = s3.get_object(Bucket=b, Key="mp.c")
    assert g["ETag"] == mp_etag and g["Body"].read() == body + tail
    # Two drives wiped: byte-identical; the heal rebuilds; two others wiped.
    for pair in ((1, 4), (0, 3)):
        ec.stop()
        for d in pair:
            ec.wipe(d)
        ec.start()
        assert s3.get_object(Bucket=b, Key="dst")["Body"].read() == body
        assert s3.get_object(Bucket=b, Key="mp.c")["Body"].read() == body + tail
        assert admin(ec, "heal")["unrecoverable"] == 0
    assert admin(ec, "heal")["shards_rebuilt"] == 0
    assert s3.get_object(Bucket=b, Key="dst2")["Body"].read() == body
    # Overwritten by a copy of another object, then by a PUT.
    s3.put_object(Bucket=b, Key="small", Body=b"small")
    s3.copy_object(Bucket=b, Key="dst", CopySource={"Bucket": b, "Key": "small"})
    assert s3.get_object(Bucket=b, Key="dst")["Body"].read() == b"small"
    s3.put_object(Bucket=b, Key="dst", Body=b"put")
    assert s3.get_object(Bucket=b, Key="dst")["Body"].read() == b"put"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=b)["Contents"]]
    assert keys == ["dst", "dst2", "mp.c", "small"]


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
