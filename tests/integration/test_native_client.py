"""libopenlake and `openlake get` / `openlake put` against a running server,
one drive and erasure-coded drives (4+2): the native port serves the same
objects, users and keys as S3.

The C checks live in native_client_check.c (built beside the openlake
binary, linked against libopenlake.so); this file runs it and drives the CLI.
"""

import hashlib
import json
import os
import pty
import subprocess
import urllib.request

import pytest

import helpers

KIB, MIB = helpers.KIB, helpers.MIB


def _env(access=helpers.ACCESS_KEY, secret=helpers.SECRET_KEY):
    env = dict(os.environ)
    for k in ("OPENLAKE_ACCESS_KEY", "OPENLAKE_SECRET_KEY", "AWS_ACCESS_KEY_ID",
              "AWS_SECRET_ACCESS_KEY"):
        env.pop(k, None)
    if access is not None:
        env["OPENLAKE_ACCESS_KEY"] = access
    if secret is not None:
        env["OPENLAKE_SECRET_KEY"] = secret
    return env


def _check_program():
    p = helpers.openlake_binary().parent / "native_client_check"
    if not p.exists():
        pytest.skip(f"{p} not built")
    return p


def _cli(*args, env=None, input=None, timeout=60):
    return subprocess.run([str(helpers.openlake_binary()), *map(str, args)], env=env or _env(),
                          input=input, capture_output=True, timeout=timeout)


def _native_port(server):
    with urllib.request.urlopen(server.endpoint + "/_openlake/native", timeout=10) as r:
        assert r.status == 200
        doc = json.loads(r.read())
    assert doc["protocol"] == 1 and 0 < doc["port"] < 65536
    return doc["port"]


def test_native_port_named(mode_server):
    """GET /_openlake/native names the port (no credentials needed: it
    carries nothing secret, and every native request is signed)."""
    assert _native_port(mode_server) != mode_server.port


def test_library(mode_server, mode_bucket):
    """Round trips 0 B .. 64 MiB + 1, 1000 ranged reads in a batch, list
    paging, head, delete, wrong keys refused: native_client_check.c."""
    r = subprocess.run([str(_check_program()), mode_server.endpoint, mode_bucket], env=_env(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-4000:]
    assert r.stdout == b"ok\n"


@pytest.mark.slow
def test_library_one_gib(mode_server, mode_bucket):
    if mode_server.mode != "sd":
        pytest.skip("1 GiB once is enough (about 30 s here)")
    r = subprocess.run([str(_check_program()), mode_server.endpoint, mode_bucket,
                        str(1 << 30)], env=_env(), capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-4000:]


def test_cli_round_trip_and_s3_view(mode_server, mode_bucket, tmp_path):
    """openlake put / get: files through a put stream (more than one message
    at 64 MiB + 1), stdin and stdout; what the native port stored is what
    S3 serves, and the other way round."""
    s3 = helpers.make_client(mode_server.endpoint)
    # Past one message (64 MiB) on one drive only: the library check does
    # it in both modes, and the 2-core test machines are slow.
    sizes = (0, 1, 4 * KIB, 64 * MIB + 1) if mode_server.mode == "sd" else (0, 1, 4 * KIB, 3 * MIB + 1)
    for size in sizes:
        data = os.urandom(size)
        src = tmp_path / f"src{size}"
        src.write_bytes(data)
        r = _cli("put", "-q", mode_server.endpoint, src, mode_bucket, f"cli/{size}")
        assert r.returncode == 0, r.stderr
        assert r.stderr == b""  # -q
        back = tmp_path / f"back{size}"
        r = _cli("get", "-q", mode_server.endpoint, mode_bucket, f"cli/{size}", back)
        assert r.returncode == 0, r.stderr
        assert back.read_bytes() == data
        got = s3.get_object(Bucket=mode_bucket, Key=f"cli/{size}")
        assert got["Body"].read() == data
    # A small object's ETag is its MD5, as S3's.
    head = s3.head_object(Bucket=mode_bucket, Key="cli/4096")
    assert head["ETag"] == '"%s"' % hashlib.md5((tmp_path / "src4096").read_bytes()).hexdigest()

    # stdin -> object -> stdout
    data = os.urandom(300 * KIB + 7)
    r = _cli("put", "-q", mode_server.endpoint, "-", mode_bucket, "cli/pipe", input=data)
    assert r.returncode == 0, r.stderr
    r = _cli("get", "-q", mode_server.endpoint, mode_bucket, "cli/pipe", "-")
    assert r.returncode == 0 and r.stdout == data

    # S3 PUT -> native GET, through the native address given directly.
    data = os.urandom(2 * MIB + 11)
    s3.put_object(Bucket=mode_bucket, Key="from-s3", Body=data)
    port = _native_port(mode_server)
    r = _cli("get", "-q", f"127.0.0.1:{port}", mode_bucket, "from-s3", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout == data


def test_cli_credentials(mode_server, mode_bucket, tmp_path):
    src = tmp_path / "f"
    src.write_bytes(b"secret bytes")
    # The wrong secret, and an unknown user: refused, nothing stored.
    for ak, sk in ((helpers.ACCESS_KEY, "wrong-secret"), ("nobody-here", helpers.SECRET_KEY)):
        r = _cli("put", mode_server.endpoint, src, mode_bucket, "k",
                 env=_env(access=ak, secret=sk))
        assert r.returncode == 1
        assert b"access denied" in r.stderr
        r = _cli("get", "--access_key", ak, "--secret_key", sk, mode_server.endpoint,
                 mode_bucket, "k", "-")
        assert r.returncode == 1 and r.stdout == b""
    s3 = helpers.make_client(mode_server.endpoint)
    assert s3.list_objects_v2(Bucket=mode_bucket).get("KeyCount", 0) == 0
    # AWS_* as the fallback; --access_key / --secret_key over the environment.
    env = _env(access=None, secret=None)
    env["AWS_ACCESS_KEY_ID"] = helpers.ACCESS_KEY
    env["AWS_SECRET_ACCESS_KEY"] = helpers.SECRET_KEY
    r = _cli("put", "-q", mode_server.endpoint, src, mode_bucket, "k", env=env)
    assert r.returncode == 0, r.stderr
    r = _cli("get", "--access_key", helpers.ACCESS_KEY, "--secret_key", helpers.SECRET_KEY,
             "-q", mode_server.endpoint, mode_bucket, "k", "-",
             env=_env(access="nobody", secret="nothing"))
    assert r.returncode == 0 and r.stdout == b"secret bytes"
    # A missing key: an error, and no file left behind.
    out = tmp_path / "missing"
    r = _cli("get", mode_server.endpoint, mode_bucket, "no-such-key", out)
    assert r.returncode == 1 and b"no such key" in r.stderr
    assert not out.exists() and not (tmp_path / "missing.part").exists()
    # Usage errors.
    assert _cli("get", mode_server.endpoint, mode_bucket).returncode == 2


def test_cli_progress_on_a_terminal(mode_server, mode_bucket, tmp_path):
    """The progress bar goes to stderr when it is a terminal, never with -q
    and never into a pipe."""
    src = tmp_path / "f"
    src.write_bytes(os.urandom(3 * MIB))
    r = _cli("put", mode_server.endpoint, src, mode_bucket, "bar")
    assert r.returncode == 0 and b"%" not in r.stderr  # stderr is a pipe here

    def on_tty(*args):
        master, slave = pty.openpty()
        p = subprocess.Popen([str(helpers.openlake_binary()), *map(str, args)], env=_env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            out += chunk
        os.close(master)
        assert p.wait(timeout=60) == 0, out
        return out

    out = on_tty("get", mode_server.endpoint, mode_bucket, "bar", tmp_path / "back")
    assert b"100.0%" in out and b"3145728/3145728" in out
    assert (tmp_path / "back").read_bytes() == src.read_bytes()
    assert on_tty("get", "-q", mode_server.endpoint, mode_bucket, "bar", tmp_path / "b2") == b""
