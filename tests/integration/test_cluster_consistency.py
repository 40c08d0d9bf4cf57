"""Consistency across gateways: a cluster (3 nodes x 2 drives, one 4+2 set
whose drives span the nodes) serves every key through every node, and what
one node acknowledged is what every node then reads.

- Clock skew: node n1's wall clock runs SKEW_S ahead (libfaketime, preloaded
  into its process only).  Writes to one key alternate between n1 and n2,
  each after the previous was acknowledged: every node reads the last body,
  and ListObjectVersions lists the versions newest first in acknowledgement
  order.  Without the HLC on the drive protocol, n2's version stamps would
  fall SKEW_S behind n1's and n1's older writes would win.
- Last completed write wins across nodes: PUT A (through n2, on time) starts
  first with a slow body, PUT B (through n1, ahead) starts and completes, then
  A completes: A's body is the object (test_write_order.py's technique).
- A multipart upload created, uploaded and completed through three nodes;
  ListParts and ListMultipartUploads through a node other than the creator.
- An object written through one node reads byte-identical through the others
  with boto3 and the aws CLI (Debian's v2 and the image's v1 when present).

One cluster for the whole file (a module fixture).
"""
import shutil
import time
from pathlib import Path

import pytest

import helpers as h
from cluster_harness import Cluster, body, needs_etcd

pytestmark = needs_etcd

SKEW_S = 5
FAKETIME_LIBS = [Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"),
                 Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")]
SETTLE_S = 0.3  # lets a node read a PUT's head and first bytes


def faketime_env(offset_s):
    lib = next((p for p in FAKETIME_LIBS if p.exists()), None)
    if lib is None:
        pytest.skip("libfaketime is not installed (apt-get install libfaketime)")
    # The wall clock only: timeouts and leases run on CLOCK_MONOTONIC.
    return {"LD_PRELOAD": str(lib), "FAKETIME": f"{offset_s:+d}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_DONT_RESET": "1"}


@pytest.fixture(scope="module")
def cluster():
    cl = Cluster(prefix="ol_consist_")
    cl.nodes[0].env = faketime_env(SKEW_S)
    try:
        cl.start()
        yield cl
    finally:
        cl.close()


@pytest.fixture(scope="module")
def clients(cluster):
    return cluster.clients()


def new_bucket(s3, versioned=False):
    name = h.unique_bucket("cons")
    s3.create_bucket(Bucket=name)
    if versioned:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def test_skew_is_real(cluster, clients):
    """The skewed node really stamps its objects SKEW_S ahead (else the next
    test proves nothing)."""
    s3 = clients[0]
    b = new_bucket(s3)
    s3.put_object(Bucket=b, Key="t", Body=b"x")
    lm = s3.head_object(Bucket=b, Key="t")["LastModified"].timestamp()
    assert lm > time.time() + SKEW_S - 2, (lm, time.time())


def test_skewed_writes_in_ack_order(cluster, clients):
    n1, n2, n3 = clients
    b = new_bucket(n2, versioned=True)
    writers = [n1, n2, n1, n2, n2, n1, n2]
    acked = []  # (version id, body) in acknowledgement order
    for i, s3 in enumerate(writers):
        data = body(3000 + i * 1111, seed=i)
        r = s3.put_object(Bucket=b, Key="k", Body=data)
        acked.append((r["VersionId"], data))
        # Each write is the current object, through every node, at once.
        for reader in (n1, n2, n3):
            got = reader.get_object(Bucket=b, Key="k")
            assert got["Body"].read() == data, f"write {i} is not the current object"
            assert got["VersionId"] == r["VersionId"]
    for reader in (n1, n2, n3):
        vs = reader.list_object_versions(Bucket=b, Prefix="k")["Versions"]
        assert [v["VersionId"] for v in vs] == [v for v, _ in reversed(acked)], \
            "versions are not listed newest first in acknowledgement order"
        assert [v["IsLatest"] for v in vs] == [True] + [False] * (len(acked) - 1)
    # Each version keeps its body.
    for vid, data in acked:
        assert n3.get_object(Bucket=b, Key="k", VersionId=vid)["Body"].read() == data


class SlowPut:
    """A raw PUT whose body is sent in two steps (test_write_order.py)."""

    def __init__(self, node, bucket, key, data, first):
        self.data, self.first = data, first
        target = f"/{bucket}/{key}"
        hdrs = {"Host": f"127.0.0.1:{node.port}", "Content-Length": str(len(data))}
        hdrs, _ = h.sign_headers("PUT", target, hdrs, h.UNSIGNED_PAYLOAD)
        self.conn = h.RawConn(node.port, timeout=30)
        self.conn.send(h.request_bytes("PUT", target, hdrs, data[:first]))

    def finish(self):
        self.conn.send(self.data[self.first:])
        r = self.conn.read_response()
        self.conn.close()
        assert r.status == 200, r
        return r


@pytest.mark.parametrize("slow,fast", [(1, 0), (0, 1)], ids=["slow-on-time", "slow-ahead"])
def test_last_completed_write_wins_across_nodes(cluster, clients, slow, fast):
    """PUT A through node `slow` starts first and completes last; PUT B
    through node `fast` starts and completes in between.  A wins, whichever
    of the two nodes runs ahead."""
    nodes = cluster.nodes
    b = new_bucket(clients[2], versioned=True)
    a_data, b_data = body(200_000, seed=11), body(150_000, seed=12)
    a = SlowPut(nodes[slow], b, "race", a_data, first=50_000)
    try:
        time.sleep(SETTLE_S)
        bput = SlowPut(nodes[fast], b, "race", b_data, first=10_000)
        time.sleep(SETTLE_S)
        rb = bput.finish()
        time.sleep(SETTLE_S)
        ra = a.finish()
    finally:
        a.conn.close()
    for s3 in clients:
        got = s3.get_object(Bucket=b, Key="race")
        assert got["Body"].read() == a_data, "GET returned the body of the PUT completed first"
        assert got["ETag"] == f'"{h.md5_hex(a_data)}"'
    vs = clients[2].list_object_versions(Bucket=b, Prefix="race")["Versions"]
    assert [v["VersionId"] for v in vs] == [ra.header("x-amz-version-id"),
                                            rb.header("x-amz-version-id")]


def test_multipart_across_nodes(cluster, clients):
    n1, n2, n3 = clients
    b = new_bucket(n1)
    key = "mp/object"
    parts = [body(5 * h.MIB, seed=21), body(5 * h.MIB, seed=22), body(1 * h.MIB + 17, seed=23)]
    up = n1.create_multipart_upload(Bucket=b, Key=key)["UploadId"]
    done = []
    for i, (s3, data) in enumerate(zip([n2, n3, n1], parts), start=1):
        r = s3.upload_part(Bucket=b, Key=key, UploadId=up, PartNumber=i, Body=data)
        done.append({"PartNumber": i, "ETag": r["ETag"]})
    # Seen from nodes that did not create the upload.
    for s3 in (n2, n3):
        listed = s3.list_parts(Bucket=b, Key=key, UploadId=up)["Parts"]
        assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in listed] == \
            [(d["PartNumber"], d["ETag"], len(p)) for d, p in zip(done, parts)]
        ups = s3.list_multipart_uploads(Bucket=b).get("Uploads", [])
        assert [(u["Key"], u["UploadId"]) for u in ups] == [(key, up)]
    n3.complete_multipart_upload(Bucket=b, Key=key, UploadId=up,
                                 MultipartUpload={"Parts": done})
    whole = b"".join(parts)
    for s3 in clients:
        got = s3.get_object(Bucket=b, Key=key)["Body"].read()
        assert len(got) == len(whole) and h.sha256(got) == h.sha256(whole)
        assert s3.list_multipart_uploads(Bucket=b).get("Uploads", []) == []


def aws_clis():
    """Debian's aws CLI v2 and, when the image has one, a v1 on PATH."""
    out = []
    v2 = "/usr/bin/aws" if Path("/usr/bin/aws").exists() else None
    if v2:
        out.append(pytest.param(v2, id="aws-v2"))
    other = shutil.which("aws")
    if other and (not v2 or Path(other).resolve() != Path(v2).resolve()):
        out.append(pytest.param(other, id="aws-path"))
    return out or [pytest.param(None, id="no-aws",
                                marks=pytest.mark.skip(reason="no aws CLI installed"))]


@pytest.mark.parametrize("cli", aws_clis())
def test_read_through_every_node(cluster, clients, cli, tmp_path):
    """Written through n2; read through every node with boto3, through the
    other two with the aws CLI (one invocation each: the CLI's start-up is
    most of this test's time)."""
    b = new_bucket(clients[0])
    data = body(700_001, seed=31)
    clients[1].put_object(Bucket=b, Key="dir/obj.bin", Body=data)
    for s3 in clients:
        got = s3.get_object(Bucket=b, Key="dir/obj.bin")
        assert got["Body"].read() == data and got["ContentLength"] == len(data)
    for i in (0, 2):
        node = cluster.nodes[i]
        cfg = tmp_path / f"aws{i}"
        cfg.mkdir()
        aws = h.aws_runner(node.endpoint, cfg, binary=cli)
        dest = tmp_path / f"got{i}.bin"
        aws("s3", "cp", f"s3://{b}/dir/obj.bin", str(dest), timeout=120)
        assert dest.read_bytes() == data, f"aws s3 cp through node {node.name}"
