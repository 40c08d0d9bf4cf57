"""Runs sdk_new_check.py with the newer boto3 of the image's python3 (pyenv),
which sends CRC32 checksums and aws-chunked trailer bodies by default."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import helpers as h

SCRIPT = Path(__file__).with_name("sdk_new_check.py")


def _new_python():
    for cand in ("/root/.pyenv/shims/python3", shutil.which("python3")):
        if cand and os.path.exists(cand):
            return cand
    return None


def test_new_sdk(server, tmp_path):
    py = _new_python()
    if py is None:
        pytest.skip("no python3 on PATH")
    probe = subprocess.run([py, "-c", "import boto3; print(boto3.__version__)"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"{py} has no boto3")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = str(tmp_path / "no-config")
    env["AWS_SHARED_CREDENTIALS_FILE"] = str(tmp_path / "no-credentials")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["TMPDIR"] = str(tmp_path)
    p = subprocess.run([py, str(SCRIPT), server.endpoint, h.ACCESS_KEY, h.SECRET_KEY],
                       capture_output=True, text=True, env=env, timeout=300)
    print(p.stdout)
    print(p.stderr, file=sys.stderr)
    assert p.returncode == 0, (f"sdk_new_check.py with {py} (boto3 {probe.stdout.strip()}) "
                               f"failed:\n{p.stdout}\n{p.stderr}")
