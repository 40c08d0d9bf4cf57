"""Direct reads (docs/PROTOCOL.md "Direct reads"): on a three-node cluster
of 4+2 (two drives a node, so one node down leaves exactly k shards), the
native client reads an object's data shards straight from the nodes that
hold them (LAYOUT, then SHARD_GETs), byte-identical for 0 B, 1 B, a small
object, one of several stripes and ranges; reads of at most 256 KiB come back
in LAYOUT's reply instead (no SHARD_GET served); a batch's large GETs read
direct too.  With a node killed, every
object reads identical again, its lost pieces rebuilt by the client (ISA-L),
without going through one node.  SHARD_GET is authorized as a GET: another
user gets AccessDenied from it, and a wrong secret is refused."""
import json
import os
import re
import subprocess

from cluster_harness import Cluster, body, needs_etcd
from helpers import ACCESS_KEY, SECRET_KEY, make_client, openlake_binary, unique_bucket, \
    import_openlake, signed_request

pytestmark = needs_etcd
openlake = import_openlake()

MIB = 1 << 20
EACCES = 13


def shard_gets(node):
    r = signed_request(node, "GET", "/_openlake/metrics")
    m = re.search(rb"^openlake_native_shard_gets_total (\d+)$", r.body, re.M)
    return int(m.group(1)) if m else 0


def add_user(node, name):
    out = subprocess.run([str(openlake_binary()), "admin", "user", "add", name, "--endpoint",
                          node.endpoint], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["secret_key"]


def check_reads(c, bucket, objs):
    for k, v in objs.items():
        assert c.get(bucket, k) == v, k
    big = objs["o/big"]
    # Ranges: across a stripe's end, inside one unit, the tail (small:
    # inline), across two units (direct).
    for off, n in ((4 * MIB - 100, 200000), (MIB + 5, 17), (len(big) - 9, 100),
                   (MIB - 7, 2 * MIB + 3)):
        buf = bytearray(n)
        got = c.get_into(bucket, "o/big", buf, off)
        assert got == min(n, len(big) - off)
        assert bytes(buf[:got]) == big[off:off + got], (off, n)


def test_direct_reads_and_rebuild():
    with Cluster(nodes=3, dirs=2, k=4, m=2) as cl:
        n1, n2, n3 = cl.nodes
        s3 = make_client(n1.endpoint)
        bucket = unique_bucket("dir")
        s3.create_bucket(Bucket=bucket)
        objs = {"o/empty": b"", "o/one": b"x", "o/small": body(5000, 3),
                "o/big": body(9 * MIB + 13, 5)}
        c = openlake.Client(n1.endpoint)
        try:
            for k, v in objs.items():
                c.put(bucket, k, v)
            before = sum(shard_gets(n) for n in cl.nodes)
            check_reads(c, bucket, objs)
            st = c.stats()
            # The large reads went direct, the small ones (1 B, 5000 B, three
            # ranges) came back in LAYOUT's reply; nothing was rebuilt.
            assert st["direct_gets"] == 2, st
            assert st["inline_gets"] == 5, st
            assert st["shard_reads"] > 0 and st["shard_failures"] == 0, st
            assert st["pieces_rebuilt"] == 0 and st["fallbacks"] == 0, st
            # The nodes served the shards (more than one node).
            served = [shard_gets(n) for n in cl.nodes]
            assert sum(served) - before >= st["shard_reads"]
            assert sum(1 for s in served if s) >= 2, served

            # SHARD_GET is authorized as a GET: another user is refused on
            # every shard, the owner is served.
            sk = add_user(n1, "stranger")
            out = subprocess.run([str(openlake_binary().parent / "shard_get_check"), n1.endpoint,
                                  ACCESS_KEY, SECRET_KEY, "stranger", sk, bucket, "o/big"],
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stdout + out.stderr
            lines = out.stdout.split("\n")
            assert lines[0] == "direct=1 k=4 m=2", out.stdout
            shards = [ln.split()[2:] for ln in lines[1:] if ln.startswith("shard")]
            assert shards == [["16", str(-EACCES)]] * 4, out.stdout
            with openlake.Client(n1.endpoint, "stranger", sk) as other:
                try:
                    other.get(bucket, "o/small")
                    raise AssertionError("a stranger read the object")
                except openlake.AccessDenied:
                    pass
            try:
                openlake.Client(n1.endpoint, ACCESS_KEY, "wrong-secret").close()
                raise AssertionError("a wrong secret was accepted")
            except openlake.AccessDenied:
                pass
            # Small reads pay no extra round trip and read no shard: the
            # nodes served no SHARD_GET for them.
            st0, sg0 = c.stats(), sum(shard_gets(n) for n in cl.nodes)
            buf = bytearray(256 << 10)
            for _ in range(3):
                assert c.get_into(bucket, "o/small", buf) == 5000
                assert c.get_into(bucket, "o/big", buf, 3 * MIB) == len(buf)
                assert bytes(buf) == objs["o/big"][3 * MIB:3 * MIB + len(buf)]
            st = c.stats()
            assert st["inline_gets"] - st0["inline_gets"] == 6, st
            assert st["direct_gets"] == st0["direct_gets"], st
            assert st["shard_reads"] == st0["shard_reads"], st
            assert sum(shard_gets(n) for n in cl.nodes) == sg0
            # A batch's large GETs read direct too (its small ones share
            # GET_BATCH messages through a node).
            st0 = c.stats()
            bufs = [bytearray(2 * MIB + 3), bytearray(3 * MIB), bytearray(100)]
            got = c.get_many([(bucket, "o/big", bufs[0], MIB - 7), (bucket, "o/big", bufs[1]),
                              (bucket, "o/small", bufs[2])])
            assert got == [len(bufs[0]), len(bufs[1]), 100], got
            assert bytes(bufs[0]) == objs["o/big"][MIB - 7:3 * MIB - 4]
            assert bytes(bufs[1]) == objs["o/big"][:3 * MIB]
            assert bytes(bufs[2]) == objs["o/small"][:100]
            st = c.stats()
            assert st["direct_gets"] - st0["direct_gets"] == 2, st
            # OPENLAKE_CLIENT_INLINE_MAX=0: every read direct, same bytes.
            os.environ["OPENLAKE_CLIENT_INLINE_MAX"] = "0"
            try:
                with openlake.Client(n1.endpoint) as eager:
                    check_reads(eager, bucket, objs)
                    st = eager.stats()
                    assert st["inline_gets"] == 0 and st["direct_gets"] == 7, st
            finally:
                del os.environ["OPENLAKE_CLIENT_INLINE_MAX"]
            # OPENLAKE_CLIENT_DIRECT=0: the same bytes through one node.
            os.environ["OPENLAKE_CLIENT_DIRECT"] = "0"
            try:
                with openlake.Client(n1.endpoint) as plain:
                    assert plain.get(bucket, "o/big") == objs["o/big"]
                    assert plain.stats()["direct_gets"] == 0
            finally:
                del os.environ["OPENLAKE_CLIENT_DIRECT"]

            # A node down: every object still reads identical, the lost
            # pieces rebuilt by the client, none through one node.
            n2.kill9()
            st0 = c.stats()
            check_reads(c, bucket, objs)
            st = c.stats()
            assert st["direct_gets"] - st0["direct_gets"] == 2, st
            assert st["inline_gets"] - st0["inline_gets"] == 5, st
            assert st["pieces_rebuilt"] > st0["pieces_rebuilt"], st
            assert st["fallbacks"] == 0, st
            # Every range rebuilt by the client, the stripes' edges included.
            os.environ["OPENLAKE_CLIENT_INLINE_MAX"] = "0"
            try:
                with openlake.Client(n1.endpoint) as eager:
                    check_reads(eager, bucket, objs)
                    st = eager.stats()
                    assert st["direct_gets"] == 7 and st["pieces_rebuilt"] > 0, st
                    assert st["fallbacks"] == 0, st
            finally:
                del os.environ["OPENLAKE_CLIENT_INLINE_MAX"]
        finally:
            c.close()

