"""The aws CLI against OpenLake: mb, cp (single and multipart), ls, rm, rb."""

import os

import pytest

import helpers as h
from helpers import KIB, MIB


AWS = h.aws_binary()
pytestmark = pytest.mark.skipif(AWS is None, reason="aws CLI not installed")
# The client's own requests are mode-independent: one mode, except the tests
# marked both_modes (conftest.py, ONE_MODE).
ONE_MODE = True


@pytest.fixture(scope="module")
def aws(server, tmp_path_factory):
    return h.aws_runner(server.endpoint, tmp_path_factory.mktemp("awscfg"))


def _ls_objects(out):
    """Parses `aws s3 ls s3://bucket/` lines: date time size key."""
    objs = {}
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[2].isdigit():
            objs[parts[3]] = int(parts[2])
    return objs


def test_mb_ls_rb(aws):
    name = h.unique_bucket("cli")
    aws("s3", "mb", f"s3://{name}")
    out = aws("s3", "ls").stdout
    assert name in [line.split()[-1] for line in out.splitlines() if line.strip()]
    p = aws("s3", "mb", f"s3://{name}", check=False)
    assert p.returncode != 0, "creating an existing bucket must fail"
    aws("s3", "rb", f"s3://{name}")
    out = aws("s3", "ls").stdout
    assert name not in out
    p = aws("s3", "ls", f"s3://{name}/", check=False)
    assert p.returncode != 0
    assert "NoSuchBucket" in p.stderr


# 96 MiB: twelve 8 MiB parts, more than the CLI's ten concurrent part
# uploads, so its queue of parts and its ranged downloads both overlap.
@pytest.mark.both_modes
@pytest.mark.parametrize("size", [
    KIB,
    10 * MIB,
    pytest.param(96 * MIB, marks=pytest.mark.slow),
], ids=["1KiB", "10MiB", "96MiB"])
def test_cp_round_trip(aws, s3, tmp_path, size):
    name = h.unique_bucket("cp")
    aws("s3", "mb", f"s3://{name}")
    src = tmp_path / "src.bin"
    digest = h.write_random_file(src, size)
    aws("s3", "cp", str(src), f"s3://{name}/dir/file.bin", timeout=600)

    objs = _ls_objects(aws("s3", "ls", f"s3://{name}/dir/").stdout)
    assert objs == {"file.bin": size}
    objs = _ls_objects(aws("s3", "ls", "--recursive", f"s3://{name}").stdout)
    assert objs == {"dir/file.bin": size}
    head = s3.head_object(Bucket=name, Key="dir/file.bin")
    assert head["ContentLength"] == size
    if size > 8 * MIB:  # the CLI's default multipart threshold
        assert "-" in head["ETag"], "expected a multipart upload"

    dst = tmp_path / "dst.bin"
    aws("s3", "cp", f"s3://{name}/dir/file.bin", str(dst), timeout=600)
    assert dst.stat().st_size == size
    assert h.file_sha256(dst) == digest
    src.unlink()
    dst.unlink()

    aws("s3", "rm", f"s3://{name}/dir/file.bin")
    assert _ls_objects(aws("s3", "ls", "--recursive", f"s3://{name}").stdout) == {}
    aws("s3", "rb", f"s3://{name}")


def test_rb_non_empty_fails_then_force(aws, tmp_path):
    name = h.unique_bucket("rbf")
    aws("s3", "mb", f"s3://{name}")
    f = tmp_path / "x"
    f.write_bytes(b"hello")
    aws("s3", "cp", str(f), f"s3://{name}/a/x")
    aws("s3", "cp", str(f), f"s3://{name}/b")
    p = aws("s3", "rb", f"s3://{name}", check=False)
    assert p.returncode != 0
    assert "BucketNotEmpty" in p.stderr
    aws("s3", "rb", "--force", f"s3://{name}")
    assert name not in aws("s3", "ls").stdout


def test_sync_and_recursive_rm(aws, tmp_path):
    name = h.unique_bucket("sync")
    aws("s3", "mb", f"s3://{name}")
    d = tmp_path / "tree"
    files = {"a.txt": b"A", "sub/b.txt": b"BB", "sub/deeper/c.bin": os.urandom(3000)}
    for rel, data in files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    aws("s3", "sync", str(d), f"s3://{name}/t")
    objs = _ls_objects(aws("s3", "ls", "--recursive", f"s3://{name}").stdout)
    assert objs == {f"t/{k}": len(v) for k, v in files.items()}
    out = tmp_path / "back"
    aws("s3", "sync", f"s3://{name}/t", str(out))
    for rel, data in files.items():
        assert (out / rel).read_bytes() == data
    aws("s3", "rm", "--recursive", f"s3://{name}/t")
    assert _ls_objects(aws("s3", "ls", "--recursive", f"s3://{name}").stdout) == {}
    aws("s3", "rb", f"s3://{name}")
