"""The new AWS Python SDK and CLI against both modes (one drive and EC 4+2).

- sdk_new_check.py under the image's python3 (pyenv, boto3 1.43), which
  sends CRC32 checksums and aws-chunked trailer bodies by default: run once
  per mode, each check it prints is one case here.
- The aws CLI of that python (v1, on the same botocore, so with the same
  default checksums): cp, multipart cp, s3api checksum mode, sync, rm, mb/rb.
"""

import base64
import os
import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import helpers as h

SCRIPT = Path(__file__).with_name("sdk_new_check.py")

# The checks of sdk_new_check.py, in the order it runs them.
CHECKS = [
    "create_bucket", "put_object_default_checksum", "put_object_crc32_metadata", "get_object",
    "checksum_mode_enabled", "wrong_crc32_rejected", "get_object_attributes", "conditional_put",
    "delete_objects",
    "get_object_range", "copy_object", "presigned_get_and_put", "upload_file_multipart",
    "download_file", "upload_file_small_parts", "multipart_checksum_and_part_number",
    "list_objects_v2", "delete_object", "delete_bucket",
]
RAN_ALL = "script_ran_every_check"

def _new_python():
    for cand in ("/root/.pyenv/shims/python3", shutil.which("python3")):
        if cand and os.path.exists(cand):
            return cand
    return None


def _clean_env(tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = str(tmp / "no-config")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp / "no-credentials")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["TMPDIR"] = str(tmp)
    return env


@pytest.fixture(scope="module")
def new_python():
    py = _new_python()
    if py is None:
        pytest.skip("no python3 on PATH")
    probe = subprocess.run([py, "-c", "import boto3; print(boto3.__version__)"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"{py} has no boto3")
    return py, probe.stdout.strip()


@pytest.fixture(scope="module")
def sdk_run(mode_server, new_python, tmp_path_factory):
    """Runs sdk_new_check.py once against the module's server of one mode;
    returns (process, {check: (passed, message)})."""
    py, _ = new_python
    tmp = tmp_path_factory.mktemp("sdknew")
    p = subprocess.run([py, str(SCRIPT), mode_server.endpoint, h.ACCESS_KEY, h.SECRET_KEY],
                       capture_output=True, text=True, env=_clean_env(tmp), timeout=600)
    results = {}
    for line in p.stdout.splitlines():
        m = re.match(r"(PASS|FAIL) (\w+)(?:: (.*))?$", line)
        if m:
            results[m.group(2)] = (m.group(1) == "PASS", m.group(3) or "")
    return p, results


def _cases():
    out = []
    for mode in ("sd", "ec"):
        for name in CHECKS + [RAN_ALL]:
            out.append(pytest.param(mode, name, id=f"{mode}-{name}"))
    return out


@pytest.mark.parametrize("mode_server, check", _cases(), indirect=["mode_server"], scope="module")
def test_new_sdk(mode_server, new_python, sdk_run, check):
    p, results = sdk_run
    where = f"sdk_new_check.py with {new_python[0]} (boto3 {new_python[1]})"
    if check == RAN_ALL:
        assert list(results) == CHECKS, f"{where}:\n{p.stdout}\n{p.stderr[-3000:]}"
        failed = [c for c, (ok, _) in results.items() if not ok]
        assert p.returncode == (1 if failed else 0), p.stdout
        return
    assert check in results, f"{where} printed no line for {check}:\n{p.stdout}\n{p.stderr}"
    ok, msg = results[check]
    if not ok:
        print(p.stderr[-4000:], file=sys.stderr)
    assert ok, f"{check} [{mode_server.mode}], {where}: {msg}"


# ---- the aws CLI on the new botocore ----

def _new_aws():
    """The aws CLI of the pyenv python (v1 on botocore 1.36 or later, which
    sends default checksums), or None."""
    py = _new_python()
    cands = [os.path.join(os.path.dirname(py), "aws")] if py else []
    cands.append(shutil.which("aws"))
    for cand in cands:
        if not cand or not os.path.exists(cand) or os.path.realpath(cand) == "/usr/bin/aws":
            continue
        try:
            v = subprocess.run([cand, "--version"], capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        m = re.search(r"botocore/1\.(\d+)", v.stdout + v.stderr)
        if m and int(m.group(1)) >= 36:
            return cand
    return None


@pytest.fixture(scope="module")
def aws(mode_server, tmp_path_factory):
    binary = _new_aws()
    if binary is None:
        pytest.skip("no aws CLI on botocore >= 1.36 (the pyenv python's awscli)")
    return h.aws_runner(mode_server.endpoint, tmp_path_factory.mktemp("awsnew"), binary=binary)


@h.modes()
def test_cli_mb_ls_rb(aws, mode_server):
    b = h.unique_bucket("cli")
    aws("s3", "mb", f"s3://{b}")
    assert b in aws("s3", "ls").stdout
    aws("s3", "rb", f"s3://{b}")
    assert b not in aws("s3", "ls").stdout


@h.modes()
@pytest.mark.parametrize("size", [3000, 20 * h.MIB], ids=["small", "multipart"])
def test_cli_cp_round_trip(aws, mode_server, mode_s3, mode_bucket, tmp_path, size):
    src = tmp_path / "src.bin"
    digest = h.write_random_file(src, size)
    aws("s3", "cp", src, f"s3://{mode_bucket}/dir/obj.bin")
    head = mode_s3.head_object(Bucket=mode_bucket, Key="dir/obj.bin")
    assert head["ContentLength"] == size
    assert ("-" in head["ETag"]) == (size > 8 * h.MIB), head["ETag"]
    dst = tmp_path / "dst.bin"
    aws("s3", "cp", f"s3://{mode_bucket}/dir/obj.bin", dst)
    assert h.file_sha256(dst) == digest


@h.modes()
def test_cli_s3api_checksum_mode(aws, mode_server, mode_bucket, tmp_path):
    body = os.urandom(10000)
    src = tmp_path / "body"
    src.write_bytes(body)
    aws("s3api", "put-object", "--bucket", mode_bucket, "--key", "k", "--body", src)
    out = tmp_path / "out"
    r = aws("s3api", "get-object", "--bucket", mode_bucket, "--key", "k",
            "--checksum-mode", "ENABLED", out)
    want = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    assert f'"ChecksumCRC32": "{want}"' in r.stdout, r.stdout
    assert out.read_bytes() == body


@h.modes()
def test_cli_sync_ls_rm(aws, mode_server, mode_s3, mode_bucket, tmp_path):
    up = tmp_path / "up"
    want = {}
    for i, size in enumerate([0, 1, 4096, 100_000, 9 * h.MIB]):
        p = up / ("sub" if i % 2 else "") / f"f{i}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        want[p.relative_to(up).as_posix()] = h.write_random_file(p, size)
    aws("s3", "sync", up, f"s3://{mode_bucket}/t/")
    listing = aws("s3", "ls", "--recursive", f"s3://{mode_bucket}/t/").stdout
    assert sorted(line.split()[-1] for line in listing.splitlines()) == \
        sorted(f"t/{k}" for k in want)
    down = tmp_path / "down"
    aws("s3", "sync", f"s3://{mode_bucket}/t/", down)
    assert h.tree_hashes(down) == want
    aws("s3", "rm", "--recursive", f"s3://{mode_bucket}/t/")
    assert mode_s3.list_objects_v2(Bucket=mode_bucket)["KeyCount"] == 0
