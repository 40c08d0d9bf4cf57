"""The native client (libopenlake through the Python package `openlake`)
against a real server, in both storage modes: byte-identical round trips
across the one-message limit, the same objects as S3 sees (ETags too), ranged
reads into numpy arrays and torch tensors, a batch of 1000 ranged reads,
wrong keys refused, the command line, and `pip install` of the package."""
import hashlib
import os
import shutil
import subprocess
import sys

import pytest

import helpers

from helpers import REPO_ROOT, openlake_binary, unique_bucket, import_openlake

openlake = import_openlake()

MIB = 1 << 20


def body(n, seed):
    return helpers.seeded_body(n, seed)


@pytest.fixture(scope="module")
def client(mode_server):
    with openlake.Client(mode_server.endpoint, access_key="openlake",
                         secret_key="openlake-secret") as c:
        yield c


@pytest.fixture(scope="module")
def nbucket(mode_s3):
    b = unique_bucket("nat")
    mode_s3.create_bucket(Bucket=b)
    return b


def test_round_trips(client, mode_s3, nbucket):
    for i, n in enumerate([0, 1, 4096, MIB, 64 * MIB + 1]):
        data = body(n, i)
        key = f"rt/{n}"
        info = client.put(nbucket, key, data)
        assert info.size == n
        back = bytearray(n + 7)
        assert client.get_into(nbucket, key, back) == n
        assert bytes(back[:n]) == data
        # The object S3 sees is the same one, ETag included.
        got = mode_s3.get_object(Bucket=nbucket, Key=key)
        assert got["Body"].read() == data
        assert got["ETag"] == info.etag
        if n < 8 * MIB:
            assert info.etag == '"%s"' % hashlib.md5(data).hexdigest()
        else:  # the aws CLI's multipart ETag, 8 MiB parts
            parts = [hashlib.md5(data[o:o + 8 * MIB]).digest() for o in range(0, n, 8 * MIB)]
            assert info.etag == '"%s-%d"' % (hashlib.md5(b"".join(parts)).hexdigest(),
                                             len(parts))
            assert mode_s3.head_object(Bucket=nbucket, Key=key, PartNumber=1)["PartsCount"] == \
                len(parts)
    # What S3 wrote, the native client reads.
    data = body(3 * MIB + 5, 42)
    mode_s3.put_object(Bucket=nbucket, Key="from-s3", Body=data, ContentType="text/x-test")
    assert client.get(nbucket, "from-s3") == data
    h = client.head(nbucket, "from-s3")
    assert h.size == len(data) and h.content_type == "text/x-test"


def test_ranges_into_arrays(client, nbucket):
    np = pytest.importorskip("numpy")
    data = body(2 * MIB, 7)
    client.put(nbucket, "arr", data)
    a = np.zeros(1000, dtype=np.uint8)
    assert client.get_into(nbucket, "arr", a, offset=12345) == 1000
    assert a.tobytes() == data[12345:13345]
    f = np.zeros(256, dtype=np.float32)  # any dtype: bytes land as they are
    assert client.get_into(nbucket, "arr", f, offset=2 * MIB - 1024) == 1024
    assert f.tobytes() == data[-1024:]
    with pytest.raises(openlake.Error) as e:
        client.get_into(nbucket, "arr", a, offset=2 * MIB)
    assert e.value.code == -34  # ERANGE


def test_torch_tensors(client, nbucket):
    torch = pytest.importorskip("torch")
    t = torch.arange(100000, dtype=torch.float32)
    client.put(nbucket, "tensor", t)
    back = torch.empty_like(t)
    assert client.get_into(nbucket, "tensor", back) == t.numel() * 4
    assert torch.equal(back, t)


def test_batch_of_1000_ranged_reads(client, nbucket):
    objs = [body(16384, 100 + i) for i in range(50)]
    for i, d in enumerate(objs):
        client.put(nbucket, f"batch/{i:02d}", d)
    reads, want = [], []
    for j in range(1000):
        off = (j * 37) % 15000
        reads.append((nbucket, f"batch/{j % 50:02d}", bytearray(1000), off))
        want.append(objs[j % 50][off:off + 1000])
    reads.append((nbucket, "batch/missing", bytearray(10), 0))
    res = client.get_many(reads)
    assert res[:1000] == [1000] * 1000
    assert all(bytes(r[2]) == w for r, w in zip(reads, want))
    assert isinstance(res[1000], openlake.NotFound)


def test_list_head_delete(client, nbucket):
    for i in range(30):
        client.put(nbucket, f"ls/{i:03d}", b"x" * i)
    keys = [o.key for o in client.list(nbucket, prefix="ls/")]
    assert keys == [f"ls/{i:03d}" for i in range(30)]
    assert [o.key for o in client.list(nbucket, prefix="ls/", start_after="ls/027")] == \
        ["ls/028", "ls/029"]
    assert client.head(nbucket, "ls/005").size == 5
    client.delete(nbucket, "ls/005")
    with pytest.raises(openlake.NotFound):
        client.head(nbucket, "ls/005")
    client.delete(nbucket, "ls/005")  # as S3: no error
    with pytest.raises(openlake.NotFound):
        client.get("no-such-bucket-native", "k")


def test_put_stream_is_invisible_until_commit(client, nbucket):
    data = body(70 * MIB + 3, 9)
    s = client.open_put(nbucket, "streamed", len(data))
    for o in range(0, len(data), 5 * MIB):
        s.write(data[o:o + 5 * MIB])
        if o == 0:
            with pytest.raises(openlake.NotFound):
                client.head(nbucket, "streamed")
    s.commit()
    assert client.get(nbucket, "streamed") == data
    s = client.open_put(nbucket, "aborted", 100)
    s.write(b"a" * 10)
    s.abort()
    with pytest.raises(openlake.NotFound):
        client.head(nbucket, "aborted")


def test_wrong_credentials(mode_server):
    with pytest.raises(openlake.AccessDenied):
        openlake.Client(mode_server.endpoint, access_key="openlake", secret_key="wrong")
    with pytest.raises(openlake.AccessDenied):
        openlake.Client(mode_server.endpoint, access_key="nobody", secret_key="openlake-secret")


def test_cli_get_put(mode_server, nbucket, tmp_path):
    src = tmp_path / "in.bin"
    src.write_bytes(body(5 * MIB + 1, 3))
    env = dict(os.environ, OPENLAKE_ACCESS_KEY="openlake", OPENLAKE_SECRET_KEY="openlake-secret")
    ob = str(openlake_binary())
    r = subprocess.run([ob, "put", "-q", mode_server.endpoint, str(src), nbucket, "cli"],
                       env=env, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    dst = tmp_path / "out.bin"
    r = subprocess.run([ob, "get", "-q", mode_server.endpoint, nbucket, "cli", str(dst)],
                       env=env, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert dst.read_bytes() == src.read_bytes()
    r = subprocess.run([ob, "get", mode_server.endpoint, nbucket, "missing", str(dst)],
                       env=env, capture_output=True, timeout=60)
    assert r.returncode == 1 and b"no such key" in r.stderr
    r = subprocess.run([ob, "get", "--secret_key", "bad", mode_server.endpoint, nbucket, "cli",
                        "-"], env=env, capture_output=True, timeout=60)
    assert r.returncode == 1 and b"access denied" in r.stderr


def test_pip_install(tmp_path, mode_server):
    if mode_server.mode != "sd":
        pytest.skip("once is enough")
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if pip.returncode != 0:
        pytest.skip("no pip for this interpreter")
    target = tmp_path / "site"
    # From a copy: setuptools writes build/ and *.egg-info next to the
    # sources, and the checkout stays clean.
    src = tmp_path / "src"
    shutil.copytree(REPO_ROOT / "python", src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                        "--no-index", "--no-deps", "--target", str(target),
                        str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import openlake; c = openlake.Client(%r); c.close(); print(openlake.__file__)"
            % mode_server.endpoint)
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), capture_output=True,
                       text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(target)))
    assert r.returncode == 0, r.stderr
    assert str(target) in r.stdout
