"""S3 over RDMA (docs/PROTOCOL.md "S3 over RDMA"): signed GET and PUT carrying
x-amz-rdma-token, the body moved by UCX between the server and an rdma_peer
process's registered memory.

One single-drive server for the module; UCX on loopback (UCX_NET_DEVICES=lo)
with the environment's UCX_TLS (default: UCX's own choice)."""

import base64
import hashlib
import os

import pytest

import helpers
import rdma_helpers as rh

os.environ.setdefault("UCX_NET_DEVICES", "lo")

pytestmark = pytest.mark.skipif(not rh.peer_binary().exists(),
                                reason="build/rdma_peer not built")

KIB = 1024
MIB = 1024 * KIB


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = helpers.Server(tmp_path_factory.mktemp("rdma"))
    s.start()
    yield s
    s.close()


@pytest.fixture(scope="module")
def s3(srv):
    return helpers.make_client(srv.endpoint)


@pytest.fixture(scope="module")
def bkt(s3):
    name = helpers.unique_bucket()
    s3.create_bucket(Bucket=name)
    return name


@pytest.fixture
def peer():
    peers = []

    def make(size, **kw):
        p = rh.Peer(size, **kw)
        peers.append(p)
        return p

    yield make
    for p in peers:
        p.close()


def error_code(r):
    return helpers.parse_error(r.body)["Code"]


def assert_serving(srv, s3, bkt):
    """The server is alive and still answers plain requests."""
    assert srv.proc.poll() is None
    s3.put_object(Bucket=bkt, Key="alive", Body=b"yes")
    assert s3.get_object(Bucket=bkt, Key="alive")["Body"].read() == b"yes"


@pytest.mark.parametrize("size", [0, 4 * KIB, 8 * MIB])
def test_get_into_client_memory(srv, s3, bkt, peer, size):
    data = os.urandom(size)
    etag = s3.put_object(Bucket=bkt, Key=f"g{size}", Body=data)["ETag"]
    p = peer(size + 4 * KIB)
    p.fill(0xAA)
    r = rh.rdma_get(srv, bkt, f"g{size}", p.token())
    assert r.status == 200, r
    assert r.body == b"" and r.header("content-length") == "0"
    assert r.header("x-amz-rdma-reply") == "200"
    assert r.header("x-amz-rdma-bytes-transferred") == str(size)
    assert r.header("etag") == etag
    mem = p.read()
    assert mem[:size] == data
    assert mem[size:] == b"\xaa" * (4 * KIB)  # nothing past the object


def test_get_range(srv, s3, bkt, peer):
    data = os.urandom(64 * KIB)
    s3.put_object(Bucket=bkt, Key="range", Body=data)
    p = peer(8 * KIB)
    p.fill(0)
    r = rh.rdma_get(srv, bkt, "range", p.token(), headers={"Range": "bytes=1000-5095"})
    assert r.status == 206, r
    assert r.header("x-amz-rdma-reply") == "206"
    assert r.header("x-amz-rdma-bytes-transferred") == "4096"
    assert r.header("content-range") == f"bytes 1000-5095/{len(data)}"
    assert p.read(0, 4096) == data[1000:5096]
    assert p.read(4096) == bytes(4 * KIB)


@pytest.mark.parametrize("size", [4 * KIB, 8 * MIB])
def test_put_from_client_memory(srv, s3, bkt, peer, size):
    data = os.urandom(size)
    p = peer(size)
    p.load(data)
    r = rh.rdma_put(srv, bkt, f"p{size}", p.token(), hashlib.sha256(data).hexdigest())
    assert r.status == 200, r
    assert r.header("x-amz-rdma-reply") == "200"
    assert r.header("x-amz-rdma-bytes-transferred") == str(size)
    got = s3.get_object(Bucket=bkt, Key=f"p{size}")
    assert got["Body"].read() == data
    assert got["ETag"] == r.header("etag")


def test_put_checks_apply(srv, s3, bkt, peer):
    data = os.urandom(16 * KIB)
    p = peer(len(data))
    p.load(data)
    # Content-MD5 of other bytes: refused, nothing stored.
    bad_md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    r = rh.rdma_put(srv, bkt, "chk", p.token(), headers={"Content-MD5": bad_md5})
    assert r.status == 400 and error_code(r) == "BadDigest", r
    # The signed payload hash is checked on the bytes pulled over RDMA.
    r = rh.rdma_put(srv, bkt, "chk", p.token(), hashlib.sha256(b"other").hexdigest())
    assert r.status == 400 and error_code(r) == "XAmzContentSHA256Mismatch", r
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=bkt, Key="chk")
    # Conditional write: If-None-Match: * on an existing key is 412.
    good_md5 = base64.b64encode(hashlib.md5(data).digest()).decode()
    r = rh.rdma_put(srv, bkt, "chk", p.token(), headers={"Content-MD5": good_md5})
    assert r.status == 200, r
    r = rh.rdma_put(srv, bkt, "chk", p.token(), headers={"If-None-Match": "*"})
    assert r.status == 412, r
    # A declared length that differs from the token's.
    r = rh.rdma_put(srv, bkt, "chk2", p.token(),
                    headers={"x-amz-decoded-content-length": "5"})
    assert r.status == 400 and error_code(r) == "InvalidArgument", r


def test_token_must_be_signed(srv, s3, bkt, peer):
    s3.put_object(Bucket=bkt, Key="unsigned", Body=b"x" * 100)
    p = peer(4 * KIB)
    p.fill(0x33)
    r = rh.rdma_get(srv, bkt, "unsigned", p.token(), sign_token=False)
    # Refused by authentication (an x-amz-* header outside SignedHeaders),
    # or, past it, by the RDMA path's own check.
    assert r.status == 403 and error_code(r) == "AccessDenied", r
    assert b"x-amz-rdma-token" in r.body
    r = rh.rdma_put(srv, bkt, "unsigned2", p.token(), sign_token=False)
    assert r.status == 403, r
    assert p.read() == b"\x33" * (4 * KIB)


def test_put_with_http_body_refused(srv, s3, bkt, peer):
    p = peer(4 * KIB)
    hdrs = {"Host": f"127.0.0.1:{srv.port}", "x-amz-rdma-token": p.token()}
    hdrs, _ = helpers.sign_headers("PUT", f"/{bkt}/body", hdrs, "UNSIGNED-PAYLOAD")
    r = helpers.http_request(srv, "PUT", f"/{bkt}/body", hdrs, b"abc")
    assert r.status == 400 and error_code(r) == "InvalidRequest", r


def test_hostile_tokens(srv, s3, bkt, peer):
    s3.put_object(Bucket=bkt, Key="h", Body=os.urandom(64 * KIB))
    p = peer(64 * KIB)
    p.fill(0x44)
    w, k, a = p.worker, p.rkey, p.addr
    cases = {
        "garbage": "garbage",
        "empty": "",
        "truncated": p.token()[:40],
        "padding": p.token() + "==",
        "version 1": "1" + p.token()[1:],
        "version 3": "3" + p.token()[1:],
        "huge length": rh.encode_token(w, k, a, (5 << 30) + 1),
        "wrapping": rh.encode_token(w, k, 2**64 - 16, 4096),
        "region smaller than the object": p.token(0, 100),
        "random worker address": rh.encode_token(os.urandom(len(w)), k, a, 64 * KIB),
        "zero worker address": rh.encode_token(bytes(len(w)), k, a, 64 * KIB),
        "bad address version": rh.encode_token(b"\x08" + w[1:], k, a, 64 * KIB),
        "one-byte worker address": rh.encode_token(b"\x01", k, a, 64 * KIB),
    }
    for name, tok in cases.items():
        r = rh.rdma_get(srv, bkt, "h", tok)
        assert r.status == 400, (name, r)
        assert error_code(r) == "InvalidArgument", (name, r)
        if name != "region smaller than the object":  # for a PUT, the token is the body
            r = rh.rdma_put(srv, bkt, "hput", tok)
            assert r.status == 400, (name, r)
    assert p.read() == b"\x44" * (64 * KIB)
    # An rkey UCX cannot unpack, if UCX checks it here: refused cleanly (400)
    # or, on transports that ignore rkeys (shm, tcp: emulated RMA), not
    # confirmed by the peer's worker (403).  Either way the server goes on.
    r = rh.rdma_get(srv, bkt, "h", rh.encode_token(w, os.urandom(len(k)), a, 64 * KIB, p.tag))
    assert r.status in (400, 403), r
    assert p.read() == b"\x44" * (64 * KIB)
    assert_serving(srv, s3, bkt)
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=bkt, Key="hput")


def test_forged_descriptor_moves_no_bytes_into_another_client(srv, s3, bkt, peer):
    """B sends a token naming A's memory (A's rkey and address) with B's own
    worker: the server reaches only B's process, and A's memory is
    unchanged.  (A token naming A's worker: see
    test_forged_worker_address_of_another_client.)"""
    s3.put_object(Bucket=bkt, Key="forged", Body=os.urandom(64 * KIB))
    a = peer(64 * KIB)
    a.fill(0x11)
    b = peer(64 * KIB)
    b.fill(0x22)
    r = rh.rdma_get(srv, bkt, "forged", rh.encode_token(b.worker, a.rkey, a.addr, 64 * KIB))
    # B's worker does not confirm a token of memory it did not register.
    assert r.status == 403 and error_code(r) == "AccessDenied", r
    assert a.read() == b"\x11" * (64 * KIB)
    assert b.read() == b"\x22" * (64 * KIB)
    # PUT the other way: the server reads nothing of A's.
    r = rh.rdma_put(srv, bkt, "forged-put",
                    rh.encode_token(b.worker, a.rkey, a.addr, 64 * KIB))
    assert r.status == 403 and error_code(r) == "AccessDenied", r
    assert a.read() == b"\x11" * (64 * KIB)
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=bkt, Key="forged-put")
    assert_serving(srv, s3, bkt)


def test_forged_worker_address_of_another_client(srv, s3, bkt, peer):
    """A token naming A's worker with B's rkey (UCX's shm/cma/tcp transports
    do not check rkeys): A's worker does not confirm it (docs/PROTOCOL.md
    "S3 over RDMA", "Confirmation"), so nothing moves, either way."""
    s3.put_object(Bucket=bkt, Key="forged2", Body=b"\x99" * (4 * KIB))
    a = peer(4 * KIB)
    a.fill(0x11)
    b = peer(4 * KIB)
    r = rh.rdma_get(srv, bkt, "forged2", rh.encode_token(a.worker, b.rkey, a.addr, 4 * KIB))
    assert r.status == 403 and error_code(r) == "AccessDenied", r
    assert a.read() == b"\x11" * (4 * KIB)
    r = rh.rdma_put(srv, bkt, "forged2-put", rh.encode_token(a.worker, b.rkey, a.addr, 4 * KIB))
    assert r.status == 403 and error_code(r) == "AccessDenied", r
    with pytest.raises(s3.exceptions.NoSuchKey):
        s3.get_object(Bucket=bkt, Key="forged2-put")
    # Everything of A's token but its tag (on transports that do not check
    # rkeys, A's and B's rkeys may well be the same bytes), or B's tag.
    for tag in (bytes(16), b.tag):
        r = rh.rdma_get(srv, bkt, "forged2", rh.encode_token(a.worker, a.rkey, a.addr, 4 * KIB,
                                                            tag))
        assert r.status == 403 and error_code(r) == "AccessDenied", r
    # A range past the memory A registered, with A's own rkey and tag.
    r = rh.rdma_get(srv, bkt, "forged2", rh.encode_token(a.worker, a.rkey, a.addr + 4 * KIB,
                                                        4 * KIB, a.tag))
    assert r.status == 403, r
    assert a.read() == b"\x11" * (4 * KIB)
    # A's own token works (and the server remembers the confirmation).
    r = rh.rdma_get(srv, bkt, "forged2", a.token())
    assert r.status == 200, r
    assert a.read() == b"\x99" * (4 * KIB)
    assert_serving(srv, s3, bkt)


def test_worker_of_another_user_refused(srv, s3, bkt, peer):
    """A's worker confirms its own token, but under another user's key than
    the one that signed the request: refused, nothing moved."""
    s3.put_object(Bucket=bkt, Key="other-user", Body=b"\x77" * (4 * KIB))
    a = peer(4 * KIB, secret="not-the-" + helpers.SECRET_KEY)
    a.fill(0x11)
    r = rh.rdma_get(srv, bkt, "other-user", a.token())
    assert r.status == 403 and error_code(r) == "AccessDenied", r
    assert a.read() == b"\x11" * (4 * KIB)


def test_worker_that_does_not_answer_refused(srv, s3, bkt, peer):
    """A worker that does not speak the confirmation protocol: refused after
    the confirmation's deadline, nothing moved, the server goes on."""
    s3.put_object(Bucket=bkt, Key="silent", Body=b"\x55" * (4 * KIB))
    a = peer(4 * KIB)
    a.fill(0x11)
    a.cmd("confirm silent")
    r = rh.rdma_get(srv, bkt, "silent", a.token())
    assert r.status == 403 and error_code(r) == "AccessDenied", r
    assert a.read() == b"\x11" * (4 * KIB)
    assert_serving(srv, s3, bkt)
