"""Bit rot under encrypted GETs on erasure-coded drives (4+2).

An encrypted GET maps the local data shards' bytes without the drives'
CRC pass (the AES-GCM tags authenticate them, obj/sse.h ol_sse_src_fn),
and a window whose tag fails is read again through the checked path,
which rebuilds the rotted piece from parity and heals it.  One flipped
byte in data shard 0 of an SSE-S3 (and an SSE-C) object: whole and ranged
GETs across the rotted window return the exact bytes, the window is
counted as rechecked, and the shard heals on read as a plain object's
does (the heal afterwards finds nothing left)."""
import hashlib
import json
import random
import subprocess

import pytest

import helpers

MIB = 1 << 20
SIZE = 16 * MIB
SEG_HDR = 4096   # a segment file's header (store/format.h)
ROT_AT = 300000  # the rotted byte's offset in data shard 0: object byte ~299.7 KB


class Server(helpers.ECServer):
    EC_ARGS = helpers.ECServer.EC_ARGS + ["--metrics_public", "true"]


@pytest.fixture
def ec(tmp_path):
    srv = Server(tmp_path / "ec", threads=2)
    srv.start()
    yield srv
    srv.close()




def admin(srv, *args):
    out = subprocess.run([str(helpers.openlake_binary()), "admin", *args, "--endpoint",
                          srv.endpoint], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def seg_sizes(srv):
    return {f: f.stat().st_size for d in range(6) for f in (srv.drive(d) / "seg").glob("*.seg")}


def put_shards(srv, put):
    """Calls put() and returns, per drive, the segment file and offset where
    the shard it wrote starts: the bytes the drives appended (the PUTs here
    are one at a time)."""
    before = seg_sizes(srv)
    put()
    out = {}
    for f, size in seg_sizes(srv).items():
        start = before.get(f, SEG_HDR)
        if size > start:
            d = int(f.parent.parent.name[1:]) - 1
            assert d not in out, (f, out)
            out[d] = (f, start)
    assert len(out) == 6, out
    return out


def put_rotted(srv, s3, b, key, data, enc):
    """PUTs data as bucket/key with enc and flips one byte of its data shard
    0.  The drive holding shard 0 is found with a plain PUT of the same key
    first (a key's shards go to the same drives, ec/place.h): the one whose
    shard starts with the body's first bytes."""
    probe = put_shards(srv, lambda: s3.put_object(Bucket=b, Key=key, Body=data))
    first = []
    for d, (f, at) in probe.items():
        with open(f, "rb") as fh:
            fh.seek(at)
            if fh.read(4096) == data[:4096]:
                first.append(d)
    assert len(first) == 1, first
    shards = put_shards(srv, lambda: s3.put_object(Bucket=b, Key=key, Body=data, **enc))
    f, at = shards[first[0]]
    with open(f, "r+b") as fh:
        fh.seek(at + ROT_AT)
        x = fh.read(1)
        fh.seek(at + ROT_AT)
        fh.write(bytes([x[0] ^ 0x5A]))


def test_rotted_shard_read_around(ec):
    s3 = helpers.make_client(ec.endpoint)
    b = helpers.unique_bucket("rot")
    s3.create_bucket(Bucket=b)
    data = random.Random(16).randbytes(SIZE)
    ssec = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": bytes(range(32))}
    encs = {"plain": {}, "s3": {"ServerSideEncryption": "AES256"}, "s3-range": {
        "ServerSideEncryption": "AES256"}, "c-range": ssec}
    for k, enc in encs.items():
        put_rotted(ec, s3, b, k, data, enc)
    # The shards in the page cache (as a hot object's are): the GETs below
    # map them, rotted byte and all.
    for f in seg_sizes(ec):
        f.read_bytes()
    healed = helpers.metric(ec, "openlake_ec_shards_healed_on_read_total")
    rechecked = helpers.metric(ec, "openlake_sse_windows_rechecked_total")

    def get(key, rng=None):
        kw = {"Range": rng} if rng else {}
        if key == "c-range":
            kw.update(ssec)
        return s3.get_object(Bucket=b, Key=key, **kw)["Body"].read()

    # The plain object: read around and healed on read (the reference).
    assert hashlib.sha256(get("plain")).digest() == hashlib.sha256(data).digest()
    assert helpers.metric(ec, "openlake_ec_shards_healed_on_read_total") == healed + 1
    assert helpers.metric(ec, "openlake_sse_windows_rechecked_total") == rechecked
    # The encrypted ones: the same, through a checked reread of the window.
    for key, rng in [("s3", None), ("s3-range", "bytes=250000-1300000"),
                     ("c-range", "bytes=299000-300500")]:
        healed = helpers.metric(ec, "openlake_ec_shards_healed_on_read_total")
        rechecked = helpers.metric(ec, "openlake_sse_windows_rechecked_total")
        got = get(key, rng)
        if rng:
            a, z = map(int, rng[len("bytes="):].split("-"))
            assert got == data[a:z + 1], key
        else:
            assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest(), key
        assert helpers.metric(ec, "openlake_sse_windows_rechecked_total") > rechecked, key
        assert helpers.metric(ec, "openlake_ec_shards_healed_on_read_total") == healed + 1, key
    # Healed: read again without a recheck, and the heal finds nothing.
    rechecked = helpers.metric(ec, "openlake_sse_windows_rechecked_total")
    for key in encs:
        assert get(key) == data, key
    assert helpers.metric(ec, "openlake_sse_windows_rechecked_total") == rechecked
    st = admin(ec, "heal")
    assert st["corrupt"] == 0 and st["shards_rebuilt"] == 0 and st["unrecoverable"] == 0, st
