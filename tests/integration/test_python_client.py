"""The Python package `openlake` itself, on one drive (test_native.py runs the
round trips 0 B .. 64 MiB+1 against boto3, the batch of 1000 ranged reads,
wrong keys and `pip install` in both storage modes): how buffers are taken
(in place, read-only ones too, strided ones refused), tensors at an offset,
CUDA tensors direct and staged (where a GPU is), the error classes, listing in
pages, put streams as context managers, a closed client."""
import hashlib

import pytest

import helpers

from helpers import Server, make_client, unique_bucket, import_openlake

openlake = import_openlake()

MIB = 1 << 20


def body(n, seed):
    return helpers.seeded_body(n, seed)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("pyc"))
    s.start()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def client(srv):
    with openlake.Client(srv.endpoint, access_key="openlake",
                         secret_key="openlake-secret") as c:
        yield c


@pytest.fixture(scope="module")
def bkt(srv):
    b = unique_bucket("py")
    make_client(srv.endpoint).create_bucket(Bucket=b)
    return b


@pytest.fixture(scope="module")
def obj(client, bkt):
    data = body(3 * MIB + 17, 1)
    client.put(bkt, "obj", data)
    return data


def test_buffers_in_place(client, bkt, obj):
    # Read-only buffers go out as they are: bytes, a slice of bytes through a
    # memoryview, an array.array.
    import array
    client.put(bkt, "ro", memoryview(obj)[MIB:2 * MIB])
    assert client.get(bkt, "ro") == obj[MIB:2 * MIB]
    a = array.array("I", range(1000))
    client.put(bkt, "arr", a)
    assert client.get(bkt, "arr") == a.tobytes()
    # Into part of a larger buffer, through a memoryview slice.
    big = bytearray(b"\xee" * 10000)
    assert client.get_into(bkt, "obj", memoryview(big)[100:4196], offset=5) == 4096
    assert big[:100] == b"\xee" * 100 and big[4196:] == b"\xee" * (10000 - 4196)
    assert big[100:4196] == obj[5:4101]
    # Nothing to write into, or memory that is not one run of bytes.
    with pytest.raises(BufferError):
        client.get_into(bkt, "obj", b"x" * 10)
    with pytest.raises(BufferError):
        client.get_into(bkt, "obj", memoryview(bytearray(100))[::2])
    # Zero bytes asked: nothing read, the object is still looked up.
    assert client.get_into(bkt, "obj", bytearray(0)) == 0
    with pytest.raises(openlake.NotFound):
        client.get_into(bkt, "missing", bytearray(0))


def test_numpy(client, bkt, obj):
    np = pytest.importorskip("numpy")
    a = np.zeros((16, 64), dtype=np.float64)  # 8 KiB, two dimensions
    assert client.get_into(bkt, "obj", a, offset=MIB + 3) == 8192
    assert a.tobytes() == obj[MIB + 3:MIB + 3 + 8192]
    with pytest.raises((BufferError, ValueError)):  # numpy says ValueError
        client.get_into(bkt, "obj", a[:, ::2])
    ro = np.frombuffer(obj, dtype=np.uint8)[:1000]
    assert not ro.flags.writeable
    client.put(bkt, "np", ro)
    assert client.get(bkt, "np") == obj[:1000]


def test_torch_cpu_at_offset(client, bkt, obj):
    torch = pytest.importorskip("torch")
    t = torch.zeros(3000, dtype=torch.int32)
    # A slice of the tensor: its own data_ptr, not the storage's start.
    assert client.get_into(bkt, "obj", t[1000:2000], offset=4 * 12345) == 4000
    assert t[1000:2000].numpy().tobytes() == obj[4 * 12345:4 * 13345]
    assert int(t[:1000].abs().sum()) == 0 and int(t[2000:].abs().sum()) == 0
    with pytest.raises(ValueError):
        client.get_into(bkt, "obj", t.view(100, 30).t())  # not contiguous
    w = torch.arange(50000, dtype=torch.float16)
    client.put(bkt, "half", w.view(250, 200).t())  # put makes it contiguous first
    assert client.get(bkt, "half") == w.view(250, 200).t().contiguous().numpy().tobytes()


def test_cuda_tensors(srv, bkt):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    data = body(70 * MIB + 5, 2)  # more than one staging piece
    want = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    paths = ["staged"]
    with openlake.Client(srv.endpoint) as c:
        if c.cuda_direct:
            paths.append("direct")
    for path in paths:
        with openlake.Client(srv.endpoint, cuda_path=path) as c:
            assert c.cuda_path == path
            src = want.cuda()
            info = c.put(bkt, f"cuda-{path}", src)
            assert info.size == len(data)
            assert c.get(bkt, f"cuda-{path}") == data
            dst = torch.zeros(len(data) - 1000, dtype=torch.uint8, device="cuda")
            assert c.get_into(bkt, f"cuda-{path}", dst, offset=1000) == len(data) - 1000
            assert torch.equal(dst.cpu(), want[1000:])
            small = [torch.zeros(4096, dtype=torch.uint8, device="cuda") for _ in range(64)]
            res = c.get_many([(bkt, f"cuda-{path}", t, i * 999) for i, t in enumerate(small)])
            assert res == [4096] * 64
            for i, t in enumerate(small):
                assert torch.equal(t.cpu(), want[i * 999:i * 999 + 4096])


def test_staging_code_on_cpu(srv, bkt, monkeypatch):
    # The staged CUDA path, run over CPU tensors (plain host memory stands in
    # for pinned where there is no GPU) with 64 KiB pieces: pieces, the put
    # stream past one piece, batches, and a read restarted by an overwrite.
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(openlake, "STAGE_BYTES", 64 << 10)
    data = body(300000, 5)
    want = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    with openlake.Client(srv.endpoint, cuda_path="staged") as c:
        monkeypatch.setattr(c, "_staged", openlake._is_tensor)
        info = c.put(bkt, "stg", want.view(torch.int32)[:75000])  # 5 pieces, a stream
        assert info.size == 300000 and info.key == "stg"
        assert c.get(bkt, "stg") == data
        c.put(bkt, "stg-small", want[:1000])  # one piece, a plain put
        assert c.get(bkt, "stg-small") == data[:1000]
        dst = torch.zeros(200000, dtype=torch.uint8)
        assert c.get_into(bkt, "stg", dst, offset=150000) == 150000  # short at the end
        assert torch.equal(dst[:150000], want[150000:]) and int(dst[150000:].sum()) == 0
        assert c.get_into(bkt, "stg", torch.zeros(0, dtype=torch.uint8)) == 0
        with pytest.raises(openlake.NotFound):
            c.get_into(bkt, "stg-missing", torch.zeros(0, dtype=torch.uint8))
        small = [torch.zeros(777, dtype=torch.uint8) for _ in range(20)]
        res = c.get_many([(bkt, "stg", t, i * 5000) for i, t in enumerate(small)] +
                         [(bkt, "stg-missing", torch.zeros(5, dtype=torch.uint8), 0)])
        assert res[:20] == [777] * 20 and isinstance(res[20], openlake.NotFound)
        for i, t in enumerate(small):
            assert torch.equal(t, want[i * 5000:i * 5000 + 777])
        # Overwritten after the first piece: the read starts again and
        # returns the new object whole, never a mix.
        newer = body(300000, 6)
        orig, calls = c._get, []

        def get_then_overwrite(*a):
            r = orig(*a)
            calls.append(r)
            if len(calls) == 1:
                c.put(bkt, "stg", newer)
            return r
        monkeypatch.setattr(c, "_get", get_then_overwrite)
        dst = torch.zeros(300000, dtype=torch.uint8)
        assert c.get_into(bkt, "stg", dst) == 300000
        # piece 1 (old), piece 2 (new ETag: restart), the 5 pieces again
        assert dst.numpy().tobytes() == newer and len(calls) == 2 + 5


def test_errors(srv, client, bkt, obj):
    with pytest.raises(openlake.NotFound) as e:
        client.get(bkt, "no-such-key")
    assert e.value.code == -10005 and "key" in e.value.message
    with pytest.raises(openlake.NotFound) as e:
        client.head("no-such-bucket-py", "k")
    assert e.value.code == -10002
    with pytest.raises(openlake.InvalidRange) as e:
        client.get_into(bkt, "obj", bytearray(10), offset=len(obj) + 1)
    assert e.value.code == -34 and isinstance(e.value, openlake.Error)
    for ak, sk in [("openlake", "wrong-secret"), ("nobody", "openlake-secret")]:
        with pytest.raises(openlake.AccessDenied) as e:
            openlake.Client(srv.endpoint, access_key=ak, secret_key=sk)
        assert e.value.code == -13
    # Each read of a batch has its own status.
    res = client.get_many([(bkt, "obj", bytearray(10), 0), (bkt, "gone", bytearray(10), 0),
                           (bkt, "obj", bytearray(10), len(obj) + 5)])
    assert res[0] == 10
    assert isinstance(res[1], openlake.NotFound) and isinstance(res[2], openlake.InvalidRange)
    assert client.get_many([]) == []
    b = bytearray(7)
    assert client.get_many([(bkt, "obj", b)]) == [7] and b == obj[:7]  # offset 0
    c = openlake.Client(srv.endpoint)
    c.close()
    assert c.closed
    with pytest.raises(ValueError):
        c.head(bkt, "obj")
    c.close()  # twice is fine
    with pytest.raises(ValueError):
        openlake.Client(srv.endpoint, cuda_path="sideways")


def test_list_in_pages(client, bkt):
    for i in range(23):
        client.put(bkt, f"pg/{i:02d}", b"y" * i)
    it = client.list(bkt, prefix="pg/", page=5)
    assert iter(it) is it  # lazy: a generator
    got = list(it)
    assert [o.key for o in got] == [f"pg/{i:02d}" for i in range(23)]
    assert [o.size for o in got] == list(range(23))
    assert got[7].etag == '"%s"' % hashlib.md5(b"y" * 7).hexdigest()
    assert [o.key for o in client.list(bkt, prefix="pg/", start_after="pg/19", page=2)] == \
        ["pg/20", "pg/21", "pg/22"]
    assert list(client.list(bkt, prefix="nothing/")) == []
    with pytest.raises(openlake.NotFound):
        next(client.list("no-such-bucket-py"))


def test_put_stream_context(client, bkt):
    with client.open_put(bkt, "st", 10) as s:
        s.write(b"01234")
        s.write(memoryview(b"56789"))
        info = s.commit()
    assert info.key == "st" and info.size == 10
    assert client.get(bkt, "st") == b"0123456789"
    with pytest.raises(RuntimeError):
        with client.open_put(bkt, "st2", 10) as s:
            s.write(b"abc")
            raise RuntimeError("the producer failed")
    with pytest.raises(openlake.NotFound):
        client.head(bkt, "st2")
    with pytest.raises(ValueError):
        s.write(b"more")
    with client.open_put(bkt, "st3", 10) as s:  # short: commit fails, nothing stays
        s.write(b"abc")
        with pytest.raises(openlake.Error) as e:
            s.commit()
        assert e.value.code == -5
    with pytest.raises(openlake.NotFound):
        client.head(bkt, "st3")
    # close() with a stream open aborts it: nothing appears, and the stream
    # is safe to drop afterwards.
    c = openlake.Client(client._endpoint)
    s = c.open_put(bkt, "st4", 6)
    s.write(b"abc")
    c.close()
    with pytest.raises(ValueError):
        s.write(b"def")
    s.abort()
    del s
    with pytest.raises(openlake.NotFound):
        client.head(bkt, "st4")
