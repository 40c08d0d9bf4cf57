"""HTTPS (tls_listen, tls_cert, tls_key; http/tls.h).

A self-signed certificate made with the openssl CLI is the test CA; clients
verify against it.  Covered: both boto3 stacks (Debian's 1.26 here, the
image's 1.43 in a subprocess: its default CRC32 trailer bodies are
aws-chunked), a signed aws-chunked PUT, the file path (GETs past 256 KiB,
sendfile on plain HTTP, read and encrypt on TLS), curl and the aws CLI with
the CA, TLS 1.2 and 1.3, plain HTTP on the TLS port (a plain 400), a client
that never finishes its handshake (cut after header_timeout_ms while others
are served), SIGHUP with a new and with a broken certificate, an HTTPS-only
server (listen off) on erasure-coded drives, and configuration errors.
"""

import hashlib
import http.client
import io
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

import helpers as h

MIB = 1024 * 1024
KIB = 1024
HEADER_TIMEOUT_MS = 2000

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl CLI")


def make_cert(d, name):
    """A self-signed P-256 certificate for 127.0.0.1 and localhost: (cert, key)."""
    cert, key = Path(d) / f"{name}.crt", Path(d) / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", f"/CN=openlake-test-{name}",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    return cert, key


def cert_fingerprint(cert):
    der = ssl.PEM_cert_to_DER_cert(Path(cert).read_text())
    return hashlib.sha256(der).hexdigest()


def served_fingerprint(port):
    """The SHA-256 of the certificate a new connection to port is served."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s) as t:
            return hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest()


def tls_server(workdir, cert, key, mode="sd", https_only=False, config=None):
    """A server with an HTTPS listener (srv.tls_port, srv.https) beside its
    HTTP one, or alone (https_only: listen off)."""
    base = h.ECServer if mode == "ec" else h.Server

    class TLSServer(base):
        def command(self):
            cmd = super().command()
            if https_only:
                cmd[cmd.index("--listen") + 1] = "off"
            return cmd

    tls_port = h.free_port()
    cfg = {"tls_listen": f"127.0.0.1:{tls_port}", "tls_cert": cert, "tls_key": key,
           "header_timeout_ms": HEADER_TIMEOUT_MS}
    cfg.update(config or {})
    srv = TLSServer(workdir, config=cfg, port=tls_port if https_only else None)
    srv.tls_port = tls_port
    srv.https = f"https://127.0.0.1:{tls_port}"
    return srv


def client(endpoint, ca):
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                 signature_version="s3v4", connect_timeout=5, read_timeout=30)
    return boto3.client("s3", endpoint_url=endpoint, region_name=h.REGION, verify=str(ca),
                        aws_access_key_id=h.ACCESS_KEY, aws_secret_access_key=h.SECRET_KEY,
                        config=cfg)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    return {"a": make_cert(d, "a"), "b": make_cert(d, "b"), "dir": d}


@pytest.fixture(scope="module")
def srv(tmp_path_factory, certs):
    cert, key = certs["a"]
    s = tls_server(tmp_path_factory.mktemp("tls"), cert, key,
                   config={"health_public": "yes"})
    s.start()
    yield s
    s.close()


@pytest.fixture(scope="module")
def s3s(srv, certs):
    return client(srv.https, certs["a"][0])


@pytest.fixture
def bucket(s3s):
    name = h.unique_bucket("tls")
    s3s.create_bucket(Bucket=name)
    return name


def test_boto3_put_get_list_multipart(srv, s3s, bucket):
    plain = h.make_client(srv.endpoint)
    sizes = [0, 1000, 300 * KIB + 3, 3 * MIB + 7]  # 300 KiB up: the file path
    blobs = {f"k{n}": os.urandom(n) for n in sizes}
    for k, data in blobs.items():
        s3s.put_object(Bucket=bucket, Key=k, Body=data)
    for k, data in blobs.items():
        assert s3s.get_object(Bucket=bucket, Key=k)["Body"].read() == data, k
        # The same bytes over plain HTTP (sendfile) as over TLS.
        assert plain.get_object(Bucket=bucket, Key=k)["Body"].read() == data, k
    big = blobs[f"k{3 * MIB + 7}"]
    r = s3s.get_object(Bucket=bucket, Key=f"k{3 * MIB + 7}", Range="bytes=1000-2000999")
    assert r["Body"].read() == big[1000:2001000]
    keys = [o["Key"] for o in s3s.list_objects_v2(Bucket=bucket)["Contents"]]
    assert sorted(keys) == sorted(blobs)
    data = os.urandom(11 * MIB + 5)
    tc = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB)
    s3s.upload_fileobj(io.BytesIO(data), bucket, "mp", Config=tc)
    head = s3s.head_object(Bucket=bucket, Key="mp")
    assert head["ContentLength"] == len(data) and head["ETag"].endswith('-3"')
    out = io.BytesIO()
    s3s.download_fileobj(bucket, "mp", out, Config=tc)
    assert out.getvalue() == data


def test_signed_aws_chunked_put(srv, s3s, bucket, certs):
    data = os.urandom(200 * KIB + 17)
    target = f"/{bucket}/chunked"
    amz_date = h.amz_now()
    hdrs = {
        "Host": f"127.0.0.1:{srv.tls_port}",
        "Content-Encoding": "aws-chunked",
        "Content-Length": str(h.aws_chunked_length(len(data))),
        "x-amz-decoded-content-length": str(len(data)),
    }
    hdrs, seed = h.sign_headers("PUT", target, hdrs, h.STREAMING_PAYLOAD, amz_date=amz_date)
    body = h.aws_chunked_body(data, seed, amz_date)
    ctx = ssl.create_default_context(cafile=str(certs["a"][0]))
    conn = http.client.HTTPSConnection("127.0.0.1", srv.tls_port, context=ctx, timeout=30)
    try:
        conn.request("PUT", target, body=body, headers=hdrs)
        r = conn.getresponse()
        assert r.status == 200, r.read()
        r.read()
    finally:
        conn.close()
    assert s3s.get_object(Bucket=bucket, Key="chunked")["Body"].read() == data


NEW_SDK_SCRIPT = r"""
import io, os, sys, boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
ep, ca, bucket = sys.argv[1:4]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", verify=ca,
                  aws_access_key_id="openlake", aws_secret_access_key="openlake-secret",
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
small, big = os.urandom(2 * 1024 * 1024 + 1), os.urandom(7 * 1024 * 1024 + 3)
s3.put_object(Bucket=bucket, Key="new-small", Body=small)
assert s3.get_object(Bucket=bucket, Key="new-small")["Body"].read() == small
tc = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
s3.upload_fileobj(io.BytesIO(big), bucket, "new-mp", Config=tc)
out = io.BytesIO()
s3.download_fileobj(bucket, "new-mp", out)
assert out.getvalue() == big
keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
assert keys == ["new-mp", "new-small"], keys
print("ok", boto3.__version__)
"""


def test_new_boto3(srv, bucket, certs, tmp_path):
    py = "/root/.pyenv/shims/python3"
    if not os.path.exists(py):
        py = shutil.which("python3")
    probe = subprocess.run([py, "-c", "import boto3"], capture_output=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"{py} has no boto3")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = str(tmp_path / "none")
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    p = subprocess.run([py, "-c", NEW_SDK_SCRIPT, srv.https, str(certs["a"][0]), bucket],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("ok"), p.stdout


def test_curl_and_aws_cli(srv, s3s, bucket, certs, tmp_path):
    cert = str(certs["a"][0])
    data = os.urandom(100 * KIB)
    s3s.put_object(Bucket=bucket, Key="c", Body=data)
    curl = ["curl", "-sS", "--cacert", cert, "--max-time", "20"]
    r = subprocess.run(curl + ["-o", "/dev/null", "-w", "%{http_code}",
                               f"{srv.https}/_openlake/health"],
                       capture_output=True, text=True, timeout=30)
    assert r.stdout == "200", r.stderr
    url = s3s.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "c"},
                                     ExpiresIn=300)
    assert url.startswith("https://")
    r = subprocess.run(curl + [url], capture_output=True, timeout=30)
    assert r.returncode == 0 and r.stdout == data, r.stderr
    # Without the CA, curl refuses the self-signed certificate.
    r = subprocess.run(["curl", "-sS", "--max-time", "20", f"{srv.https}/_openlake/health"],
                       capture_output=True, timeout=30)
    assert r.returncode != 0
    aws = h.aws_binary()
    if aws is None:
        pytest.skip("no aws CLI")
    run = h.aws_runner(srv.https, tmp_path)
    src = tmp_path / "up"
    src.write_bytes(data)
    run("--ca-bundle", cert, "s3", "cp", str(src), f"s3://{bucket}/via-cli", timeout=120)
    run("--ca-bundle", cert, "s3", "cp", f"s3://{bucket}/via-cli", str(tmp_path / "down"),
        timeout=120)
    assert (tmp_path / "down").read_bytes() == data


def test_tls_versions(srv, certs):
    for maxv, want in ((ssl.TLSVersion.TLSv1_2, "TLSv1.2"), (None, "TLSv1.3")):
        ctx = ssl.create_default_context(cafile=str(certs["a"][0]))
        if maxv:
            ctx.maximum_version = maxv
        with socket.create_connection(("127.0.0.1", srv.tls_port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname="127.0.0.1") as t:
                assert t.version() == want
                t.sendall(b"GET /_openlake/health HTTP/1.1\r\nHost: x\r\n"
                          b"Connection: close\r\n\r\n")
                resp = b""
                while chunk := t.recv(65536):
                    resp += chunk
                assert resp.startswith(b"HTTP/1.1 200"), resp[:100]
    # TLS 1.1 is refused with a protocol_version alert (70).
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{srv.tls_port}",
                        "-tls1_1"], input="", capture_output=True, text=True, timeout=20)
    assert p.returncode != 0
    assert "alert protocol version" in p.stdout + p.stderr, p.stdout + p.stderr


def test_plain_http_on_tls_port(srv, s3s):
    with h.RawConn(srv.tls_port) as c:
        c.send(b"GET /_openlake/health HTTP/1.1\r\nHost: x\r\n\r\n")
        r = c.read_response()
        assert r.status == 400 and b"HTTPS" in r.body, r
        c.wait_closed(5)
    # Bytes that are neither TLS nor HTTP: closed without an answer.
    with h.RawConn(srv.tls_port) as c:
        c.send(b"\x00\x01\x02\x03garbage\r\n\r\n")
        c.wait_closed(5)
        assert c.buf == b""
    s3s.list_buckets()


def test_stalled_handshake_is_cut(srv, s3s, bucket):
    t0 = time.monotonic()
    silent = h.RawConn(srv.tls_port)
    partial = h.RawConn(srv.tls_port)
    partial.send(b"\x16\x03\x01\x02")  # the start of a ClientHello record, then nothing
    try:
        # Others are served meanwhile.
        s3s.put_object(Bucket=bucket, Key="during", Body=b"x" * 1000)
        assert s3s.get_object(Bucket=bucket, Key="during")["Body"].read() == b"x" * 1000
        for c in (silent, partial):
            c.wait_closed(HEADER_TIMEOUT_MS / 1000 + 4)
        took = time.monotonic() - t0
        assert took >= HEADER_TIMEOUT_MS / 1000 - 0.3, took
    finally:
        silent.close()
        partial.close()
    s3s.list_buckets()


def test_sighup_reloads_certificate(tmp_path, certs):
    d = tmp_path / "live"
    d.mkdir()
    cert, key = d / "server.crt", d / "server.key"
    shutil.copy(certs["a"][0], cert)
    shutil.copy(certs["a"][1], key)
    srv = tls_server(tmp_path / "srv", cert, key)
    srv.start()
    try:
        fa, fb = cert_fingerprint(certs["a"][0]), cert_fingerprint(certs["b"][0])
        assert served_fingerprint(srv.tls_port) == fa
        old = client(srv.https, certs["a"][0])
        old.create_bucket(Bucket="reload")  # a kept-alive connection with cert a
        # New files in place (key first is fine: nothing reads them until SIGHUP).
        shutil.copy(certs["b"][1], key)
        shutil.copy(certs["b"][0], cert)
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while served_fingerprint(srv.tls_port) != fb:
            assert time.monotonic() < deadline, "SIGHUP did not bring the new certificate"
            time.sleep(0.05)
        new = client(srv.https, certs["b"][0])
        new.put_object(Bucket="reload", Key="k", Body=b"after reload")
        assert new.get_object(Bucket="reload", Key="k")["Body"].read() == b"after reload"
        # A connection made before the reload goes on with its session.
        assert old.get_object(Bucket="reload", Key="k")["Body"].read() == b"after reload"
        # A broken certificate: the reload fails, the old context stays.
        cert.write_text("-----BEGIN CERTIFICATE-----\nnot a certificate\n"
                        "-----END CERTIFICATE-----\n")
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while "not reloaded" not in srv.log_path.read_text():
            assert time.monotonic() < deadline, srv.log_tail()
            time.sleep(0.05)
        assert served_fingerprint(srv.tls_port) == fb
        assert new.get_object(Bucket="reload", Key="k")["Body"].read() == b"after reload"
        # A key that does not match the certificate: refused as well.
        shutil.copy(certs["a"][0], cert)
        srv.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while srv.log_path.read_text().count("not reloaded") < 2:
            assert time.monotonic() < deadline, srv.log_tail()
            time.sleep(0.05)
        assert served_fingerprint(srv.tls_port) == fb
    finally:
        srv.close()


def test_https_only_erasure_coded(tmp_path, certs):
    cert, key = certs["a"]
    srv = tls_server(tmp_path / "ec", cert, key, mode="ec", https_only=True)
    srv.start()
    try:
        s3 = client(srv.https, cert)
        s3.create_bucket(Bucket="ecb")
        for n in (100, 2 * MIB + 9):
            data = os.urandom(n)
            s3.put_object(Bucket="ecb", Key=f"o{n}", Body=data)
            assert s3.get_object(Bucket="ecb", Key=f"o{n}")["Body"].read() == data
        log = srv.log_path.read_text()
        assert f"listening on https://127.0.0.1:{srv.tls_port}" in log
        assert "listening on http://" not in log
    finally:
        srv.close()


@pytest.mark.parametrize("args, want", [
    (["--tls_listen", "127.0.0.1:{port}"], "tls_cert"),
    (["--listen", "off"], "tls_listen"),
    (["--tls_listen", "127.0.0.1:{port}", "--tls_cert", "{dir}/missing.crt", "--tls_key",
      "{dir}/a.key"], "missing.crt"),
    (["--tls_listen", "127.0.0.1:{port}", "--tls_cert", "{dir}/a.crt", "--tls_key",
      "{dir}/b.key"], "tls_key"),
])
def test_config_errors(tmp_path, certs, args, want):
    args = [a.format(port=h.free_port(), dir=certs["dir"]) for a in args]
    cmd = [str(h.openlake_binary()), "server", str(tmp_path / "data"), "--listen",
           f"127.0.0.1:{h.free_port()}", *args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    assert p.returncode == 2, p.stderr
    assert want in p.stderr, p.stderr
