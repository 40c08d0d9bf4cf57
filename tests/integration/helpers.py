"""Shared helpers for the OpenLake integration tests.

Everything here talks to 127.0.0.1 only.  The helpers are deliberately plain
(http.client, raw sockets, a small SigV4 signer) so that a failing test points
at the server rather than at a client library.
"""

import base64
import datetime
import email.utils
import hashlib
import hmac
import http.client
import os
import sys
import random
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

import boto3
from botocore.config import Config

ACCESS_KEY = "openlake"
SECRET_KEY = "openlake-secret"
REGION = "us-east-1"
KIB = 1024
MIB = 1024 * 1024
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
STREAMING_PAYLOAD = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"

REPO_ROOT = Path(__file__).resolve().parents[2]

# Servers that are running right now, so that conftest can attach their log
# tails to the report of a failing test.
LIVE_SERVERS = []


def openlake_binary():
    """Returns the path of the openlake binary.  OPENLAKE_BIN may name the
    binary itself or the build directory that holds it."""
    env = os.environ.get("OPENLAKE_BIN")
    if env:
        p = Path(env)
        if p.is_dir():
            p = p / "openlake"
        return p
    return REPO_ROOT / "build" / "openlake"


def _port_block():
    """This process's block of listening ports: below the kernel's ephemeral
    range, which outgoing connections draw their source ports from (a port
    picked there can be taken by any client's connection before a server
    binds it, or between a server's stop and its restart), and one block
    per pytest-xdist worker so that workers never pick the same port."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range")
                  .read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    first, last = 10000, min(low, 65536) - 1
    m = re.match(r"gw(\d+)$", os.environ.get("PYTEST_XDIST_WORKER", ""))
    worker = int(m.group(1)) if m else 0
    size = (last - first + 1) // 16
    if size < 64:
        return None  # no room below the ephemeral range: let the kernel pick
    start = first + (worker % 16) * size
    return start, size


_PORTS = {"block": _port_block(), "next": None}


def free_port():
    """Picks a TCP port on 127.0.0.1 that nothing listens on, from this
    process's block (see _port_block), walking it in order so that a port
    is not handed out twice in one test."""
    block = _PORTS["block"]
    if block is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    start, size = block
    if _PORTS["next"] is None:
        _PORTS["next"] = random.randrange(size)
    for _ in range(size):
        port = start + _PORTS["next"] % size
        _PORTS["next"] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise ServerError(f"no free port in {start}..{start + size - 1}")


def write_config(path, settings):
    """Writes a redis-like config file.  settings is a dict or a list of
    (name, value...) tuples; a list allows repeated names such as
    ("user", ACCESS_KEY, SECRET_KEY)."""
    items = settings.items() if isinstance(settings, dict) else settings
    lines = ["# written by tests/integration"]
    for name, *values in items:
        lines.append(" ".join([name] + [str(v) for v in values]))
    Path(path).write_text("\n".join(lines) + "\n")


class ServerError(AssertionError):
    pass


class Server:
    """One openlake server process on 127.0.0.1 with its own data directory."""

    def __init__(self, workdir, config=None, port=None, threads=2, extra_args=()):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(exist_ok=True)
        self.log_path = self.workdir / "server.log"
        self.config_path = None
        if config:
            self.config_path = self.workdir / "openlake.conf"
            write_config(self.config_path, config)
        # A port picked here may be taken by another process before the
        # server binds it (free_port releases it): start() then picks another.
        self._auto_port = port is None
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.threads = threads
        self.extra_args = list(extra_args)
        self.proc = None
        self._log = None

    # -- process control ---------------------------------------------------

    def command(self):
        binary = openlake_binary()
        cmd = [str(binary), "server", str(self.data_dir),
               "--listen", f"127.0.0.1:{self.port}", "--threads", str(self.threads)]
        if self.config_path:
            cmd += ["--config", str(self.config_path)]
        level = os.environ.get("OPENLAKE_LOG_LEVEL")
        if level:
            cmd += ["--log-level", level]
        return cmd + self.extra_args

    def _owns_listener(self):
        """Whether this server's process holds the socket listening on
        127.0.0.1:port: a connection that succeeds may reach another
        process that took the port first."""
        want = f"0100007F:{self.port:04X}"
        inodes = set()
        try:
            for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
                f = line.split()
                if f[1] == want and f[3] == "0A":  # LISTEN
                    inodes.add(f"socket:[{f[9]}]")
        except OSError:
            return True  # no /proc to ask: trust the connection
        try:
            fds = list(Path(f"/proc/{self.proc.pid}/fd").iterdir())
        except OSError:
            return False  # the process is exiting: not ours
        for fd in fds:
            try:
                if os.readlink(fd) in inodes:
                    return True
            except OSError:
                pass
        return False

    def start(self, ready_timeout=20.0):
        for attempt in range(3):
            try:
                return self._start(ready_timeout)
            except ServerError as e:
                # The port this object picked was taken meanwhile (the
                # server refuses to share it): pick another, before the
                # first start only (a restart keeps its port).
                if not (self._auto_port and "address already in use" in str(e)
                        and attempt < 2):
                    raise
                self.port = free_port()
                self.endpoint = f"http://127.0.0.1:{self.port}"

    def _start(self, ready_timeout):
        assert self.proc is None, "server already running"
        binary = openlake_binary()
        if not binary.exists():
            raise ServerError(f"openlake binary not found at {binary} "
                              "(build it, or set OPENLAKE_BIN)")
        self._log = open(self.log_path, "ab")
        self._log.write(f"\n=== start {time.strftime('%H:%M:%S')} "
                        f"{' '.join(self.command())}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=self._log)
        LIVE_SERVERS.append(self)
        deadline = time.monotonic() + ready_timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                self._forget()
                raise ServerError(f"openlake exited with {rc} during startup\n"
                                  + self.log_tail())
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                if self._owns_listener():
                    self._auto_port = False
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.kill9()
                raise ServerError(f"openlake did not accept connections within "
                                  f"{ready_timeout} s\n" + self.log_tail())
            time.sleep(0.05)

    def _forget(self):
        if self in LIVE_SERVERS:
            LIVE_SERVERS.remove(self)
        self.proc = None
        if self._log:
            self._log.close()
            self._log = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal_and_wait(self, sig=signal.SIGTERM, timeout=10.0):
        """Sends sig and waits for the exit; returns (exit code, seconds).  A
        server that outlives the timeout is killed and ServerError raised."""
        assert self.proc is not None, "server not running"
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            raise ServerError(f"openlake did not exit within {timeout} s of "
                              f"{signal.Signals(sig).name}\n" + self.log_tail())
        elapsed = time.monotonic() - t0
        self._forget()
        return rc, elapsed

    def stop(self, sig=signal.SIGTERM, timeout=10.0, check=True):
        """Stops the server cleanly; with check, a non-zero exit raises."""
        if self.proc is None:
            return 0
        rc, _ = self.signal_and_wait(sig, timeout)
        if check and rc != 0:
            raise ServerError(f"openlake exited with {rc} on "
                              f"{signal.Signals(sig).name}\n" + self.log_tail())
        return rc

    def kill9(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._forget()
        # The killed process's io_uring keeps its listening socket for a
        # moment after the process is reaped (the kernel tears the ring down
        # asynchronously).  A start() right away would take that socket's
        # handshake for the new server's readiness, and the first request
        # would then find nobody listening.  Wait until the port is free.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    pass
            except OSError:
                return
            time.sleep(0.05)

    def restart(self, kill=False):
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start()

    def close(self):
        """Fixture teardown: stops the server and reports a crash or an
        unclean exit.  The data directory is removed unless
        OPENLAKE_KEEP_DATA is set."""
        try:
            if self.proc is not None:
                rc = self.proc.poll()
                if rc is not None:
                    self._forget()
                    raise ServerError(f"openlake died during the test (exit {rc})\n"
                                      + self.log_tail())
                self.stop()
        finally:
            if not os.environ.get("OPENLAKE_KEEP_DATA"):
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def log_tail(self, n=60):
        try:
            lines = self.log_path.read_bytes().decode(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return f"--- {self.log_path} (last {n} lines) ---\n" + "\n".join(lines[-n:])

    # -- introspection -------------------------------------------------------

    def proc_status(self, field):
        """Reads a field such as VmHWM from /proc/PID/status, in bytes."""
        text = Path(f"/proc/{self.pid}/status").read_text()
        m = re.search(rf"^{field}:\s+(\d+)\s+kB", text, re.M)
        assert m, f"{field} not in /proc/{self.pid}/status"
        return int(m.group(1)) * 1024

    def segment_files(self):
        return sorted(self.data_dir.rglob("*.seg"))

    def segment_disk_bytes(self):
        """Disk usage of all segment files (allocated blocks, like du)."""
        total = 0
        for p in self.segment_files():
            try:
                total += p.stat().st_blocks * 512
            except FileNotFoundError:
                pass
        return total


class ECServer(Server):
    """A server on six erasure-coded drives (4+2) under its work directory.
    A subclass with other options overrides EC_ARGS, or ec_args() when they
    depend on the instance."""

    EC_ARGS = ["--ec_data", "4", "--ec_parity", "2", "--scrub_interval_ms", "0"]

    def ec_args(self):
        return list(self.EC_ARGS)

    def command(self):
        cmd = super().command()
        # The single data directory becomes the brace form of six.
        i = cmd.index(str(self.data_dir))
        cmd[i] = str(self.workdir / "d{1...6}")
        return cmd + self.ec_args()

    def drive(self, i):
        return self.workdir / f"d{i + 1}"

    def wipe(self, i):
        """Removes drive i's directory (the drive is lost)."""
        shutil.rmtree(self.drive(i))


def make_mode_server(mode, workdir, config=None, **kw):
    """A server of one mode: "sd" (one drive) or "ec" (six drives, 4+2)."""
    cls = ECServer if mode == "ec" else Server
    return cls(workdir, config=config, **kw)


# -- clients -----------------------------------------------------------------

def make_client(endpoint, access=ACCESS_KEY, secret=SECRET_KEY, addressing="path",
                read_timeout=30):
    cfg = Config(s3={"addressing_style": addressing}, retries={"max_attempts": 1},
                 signature_version="s3v4", connect_timeout=5, read_timeout=read_timeout)
    return boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                        aws_access_key_id=access, aws_secret_access_key=secret, config=cfg)


def error_code(exc):
    """The S3 error code of a botocore ClientError."""
    return exc.response.get("Error", {}).get("Code")


def http_status(exc):
    return exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")


_bucket_counter = [0]


def unique_bucket(prefix="b"):
    _bucket_counter[0] += 1
    return f"{prefix}-{os.getpid()}-{_bucket_counter[0]}-{random.randrange(1 << 30):x}"


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def md5_hex(data):
    return hashlib.md5(data).hexdigest()


def multipart_etag(parts):
    """The S3 multipart ETag: md5 of the concatenated binary part md5s, "-N"."""
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def content_for(key, size):
    """Deterministic bytes for a key: the same key and size give the same data."""
    return random.Random(f"{key}/{size}").randbytes(size)


def write_random_file(path, size, chunk=8 * MIB):
    """Writes size random bytes to path in chunks; returns the sha256 hex."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            b = os.urandom(min(chunk, left))
            h.update(b)
            f.write(b)
            left -= len(b)
    return h.hexdigest()


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * MIB)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def stream_blocks(total, block=MIB, seed=0):
    """Yields total bytes in blocks without holding them: one random block,
    stamped with its index so no two blocks are the same."""
    base = random.Random(seed).randbytes(block)
    i = 0
    sent = 0
    while sent < total:
        n = min(block, total - sent)
        stamp = i.to_bytes(8, "little")
        yield (stamp + base[8:])[:n]
        sent += n
        i += 1


def stream_sha256(total, block=MIB, seed=0):
    h = hashlib.sha256()
    for b in stream_blocks(total, block, seed):
        h.update(b)
    return h.hexdigest()


# -- SigV4 -------------------------------------------------------------------

def _hmac(key, msg):
    return hmac.new(key, msg.encode() if isinstance(msg, str) else msg, hashlib.sha256).digest()


def signing_key(secret, date, region=REGION, service="s3"):
    k = _hmac(("AWS4" + secret).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def uri_encode(s, safe="-_.~"):
    return urllib.parse.quote(s, safe=safe)


def canonical_query(query):
    """Canonical query string of a raw (percent-encoded) query."""
    if not query:
        return ""
    pairs = []
    for part in query.split("&"):
        if not part:
            continue
        k, _, v = part.partition("=")
        # '+' is a space, as the server decodes it (form encoding).
        k = urllib.parse.unquote_plus(k)
        v = urllib.parse.unquote_plus(v)
        pairs.append((uri_encode(k), uri_encode(v)))
    pairs.sort()
    return "&".join(f"{k}={v}" for k, v in pairs)


def amz_now(offset_seconds=0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_seconds)
    return t.strftime("%Y%m%dT%H%M%SZ")


def sign_headers(method, target, headers, payload_hash, access=ACCESS_KEY, secret=SECRET_KEY,
                 region=REGION, amz_date=None, service="s3"):
    """Signs a request with an Authorization header.

    target is the request target as it goes on the wire ("/bucket/key?x=y",
    already percent-encoded).  headers must include Host.  Returns a new dict
    of headers with x-amz-date, x-amz-content-sha256 and Authorization added;
    every header passed in is signed.  Also returns the signature (the seed
    for aws-chunked bodies)."""
    amz_date = amz_date or amz_now()
    date = amz_date[:8]
    out = dict(headers)
    out["x-amz-date"] = amz_date
    out["x-amz-content-sha256"] = payload_hash
    path, _, query = target.partition("?")
    canon = {}
    for name, value in out.items():
        canon[name.lower().strip()] = re.sub(r"\s+", " ", str(value).strip())
    names = sorted(canon)
    signed = ";".join(names)
    creq = "\n".join([
        method, path, canonical_query(query),
        "".join(f"{n}:{canon[n]}\n" for n in names),
        signed, payload_hash])
    scope = f"{date}/{region}/{service}/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    sig = hmac.new(signing_key(secret, date, region, service), sts.encode(),
                   hashlib.sha256).hexdigest()
    out["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={access}/{scope}, "
                            f"SignedHeaders={signed}, Signature={sig}")
    return out, sig


def chunk_signature(prev_sig, data, amz_date, secret=SECRET_KEY, region=REGION, service="s3"):
    date = amz_date[:8]
    scope = f"{date}/{region}/{service}/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz_date, scope, prev_sig, EMPTY_SHA256,
                     hashlib.sha256(data).hexdigest()])
    return hmac.new(signing_key(secret, date, region, service), sts.encode(),
                    hashlib.sha256).hexdigest()


def aws_chunked_body(data, seed_sig, amz_date, chunk_size=64 * KIB, secret=SECRET_KEY,
                     region=REGION, tamper_chunk=None):
    """Builds a STREAMING-AWS4-HMAC-SHA256-PAYLOAD body: each chunk is
    "hex(len);chunk-signature=SIG\\r\\n" + data + "\\r\\n", ending with a
    zero-length chunk.  tamper_chunk (an index) corrupts that chunk's
    signature."""
    chunks = [data[i:i + chunk_size] for i in range(0, len(data), chunk_size)] + [b""]
    prev = seed_sig
    out = []
    for i, c in enumerate(chunks):
        sig = chunk_signature(prev, c, amz_date, secret, region)
        prev = sig
        sent = sig
        if tamper_chunk == i:
            sent = ("0" if sig[0] != "0" else "1") + sig[1:]
        out.append(f"{len(c):x};chunk-signature={sent}\r\n".encode() + c + b"\r\n")
    return b"".join(out)


def aws_chunked_length(data_len, chunk_size=64 * KIB):
    """Encoded length of an aws-chunked body (signatures are 64 hex)."""
    sizes = [chunk_size] * (data_len // chunk_size)
    if data_len % chunk_size:
        sizes.append(data_len % chunk_size)
    sizes.append(0)
    return sum(len(f"{n:x}") + len(";chunk-signature=") + 64 + 2 + n + 2 for n in sizes)


# -- SigV2 -------------------------------------------------------------------

# The query parameters a V2 signature covers (botocore's list).
SIGV2_SUBRESOURCES = {
    "accelerate", "acl", "analytics", "cors", "defaultObjectAcl", "delete", "inventory",
    "lifecycle", "location", "logging", "metrics", "notification", "object-lock", "partNumber",
    "policy", "replication", "requestPayment", "restore", "select", "select-type",
    "storageClass", "tagging", "torrent", "uploadId", "uploads", "versionId", "versioning",
    "versions", "website", "response-content-type", "response-content-language",
    "response-expires", "response-cache-control", "response-content-disposition",
    "response-content-encoding",
}


def sigv2_string_to_sign(method, target, headers, date, bucket_from_host=None):
    """StringToSign of a V2 request: target as on the wire, headers a dict
    (x-amz-* ones are signed), date the Date line (or Expires)."""
    path, _, query = target.partition("?")
    low = {k.lower(): str(v).strip() for k, v in headers.items()}
    amz = "".join(f"{k}:{low[k]}\n" for k in sorted(low) if k.startswith("x-amz-"))
    res = (f"/{bucket_from_host}" if bucket_from_host else "") + path
    subs = []
    for part in query.split("&") if query else []:
        name, eq, value = part.partition("=")
        if name in SIGV2_SUBRESOURCES:
            subs.append((name, eq + urllib.parse.unquote(value)))
    subs.sort(key=lambda s: s[0])
    if subs:
        res += "?" + "&".join(n + v for n, v in subs)
    return (f"{method}\n{low.get('content-md5', '')}\n{low.get('content-type', '')}\n"
            f"{date}\n{amz}{res}")


def sigv2_sign(sts, secret=SECRET_KEY):
    return base64.b64encode(hmac.new(secret.encode(), sts.encode(), hashlib.sha1).digest()).decode()


def http_date(offset_seconds=0):
    return email.utils.formatdate(time.time() + offset_seconds, usegmt=True)


# -- plain HTTP --------------------------------------------------------------

class Response:
    def __init__(self, status, reason, headers, body):
        self.status = status
        self.reason = reason
        self.headers = headers  # lower-case name -> value (last wins)
        self.body = body

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def __repr__(self):
        return f"<Response {self.status} {self.reason} {self.body[:200]!r}>"


def split_url(url):
    u = urllib.parse.urlsplit(url)
    target = u.path + ("?" + u.query if u.query else "")
    return u.hostname, u.port, target


def http_request(server, method, target, headers=None, body=None, timeout=30, host=None):
    """One request on a fresh connection; returns a Response."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        hdrs = dict(headers or {})
        if host is not None:
            hdrs["Host"] = host
        conn.request(method, target, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.reason, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def url_request(url, method="GET", headers=None, body=None, timeout=30):
    """Sends a request to a (presigned) URL with http.client."""
    host, port, target = split_url(url)
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, target, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.reason, {k.lower(): v for k, v in r.getheaders()}, data)
    finally:
        conn.close()


def signed_request(server, method, target, body=b"", headers=None, access=ACCESS_KEY,
                   secret=SECRET_KEY, amz_date=None, host=None, payload_hash=None):
    """A request signed with an Authorization header (payload signed)."""
    host = host or f"127.0.0.1:{server.port}"
    hdrs = {"Host": host}
    hdrs.update(headers or {})
    if body:
        hdrs["Content-Length"] = str(len(body))
    ph = payload_hash or hashlib.sha256(body or b"").hexdigest()
    hdrs, _ = sign_headers(method, target, hdrs, ph, access, secret, amz_date=amz_date)
    return http_request(server, method, target, hdrs, body or None)


def metric(server, name, missing_ok=False):
    """The value of an unlabelled metric of the server's /_openlake/metrics
    (asked signed, so it works whether the page is public or not).  A metric
    not on the page fails, or is None with missing_ok (a counter that has not
    counted yet)."""
    r = signed_request(server, "GET", "/_openlake/metrics")
    assert r.status == 200, r.status
    m = re.search(r"^%s (\S+)$" % re.escape(name), r.body.decode(), re.M)
    if not m:
        assert missing_ok, f"{name} not in the metrics"
        return None
    return float(m.group(1))


def parse_error(body):
    """Parses an S3 <Error> body into a dict of its child elements."""
    root = ET.fromstring(body)
    tag = root.tag.split("}")[-1]
    assert tag == "Error", f"root element is {root.tag}, want Error"
    return {c.tag.split("}")[-1]: (c.text or "") for c in root}


def xml_find_all(body, name):
    """Texts of every element with local name `name`, in document order."""
    root = ET.fromstring(body)
    return [e.text or "" for e in root.iter() if e.tag.split("}")[-1] == name]


class RawConn:
    """A raw HTTP/1.1 connection for tests that need byte-level control."""

    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        b = self.sock.recv(256 * KIB)
        if not b:
            raise ConnectionError("connection closed by server")
        self.buf += b

    def _read_until(self, marker, limit=1 << 20):
        while marker not in self.buf:
            if len(self.buf) > limit:
                raise AssertionError("response head too large")
            self._fill()
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def _read_exact(self, n):
        while len(self.buf) < n:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self, head_only=False):
        """Reads one response.  1xx responses are returned as they come.
        head_only: the request was HEAD, so no body follows."""
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        m = re.match(r"HTTP/1\.[01] (\d{3}) ?(.*)$", lines[0])
        assert m, f"bad status line {lines[0]!r}"
        status = int(m.group(1))
        headers = {}
        for line in lines[1:]:
            if not line:
                continue
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = b""
        if 100 <= status < 200 or head_only or status in (204, 304):
            pass
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size_line = self._read_until(b"\r\n").decode("latin-1")
                n = int(size_line.split(";")[0].strip(), 16)
                if n == 0:
                    self._read_until(b"\r\n")  # no trailers expected
                    break
                parts.append(self._read_exact(n))
                self._read_exact(2)
            body = b"".join(parts)
        elif "content-length" in headers:
            body = self._read_exact(int(headers["content-length"]))
        else:
            while True:
                try:
                    self._fill()
                except ConnectionError:
                    break
            body, self.buf = self.buf, b""
        return Response(status, m.group(2), headers, body)

    def wait_closed(self, timeout):
        """Waits for the server to close; returns the seconds it took (bytes
        that arrive first, such as an error response, are ignored).  Raises
        AssertionError if the connection is still open after timeout."""
        t0 = time.monotonic()
        self.sock.settimeout(0.2)
        while time.monotonic() - t0 < timeout:
            try:
                b = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - t0
            if not b:
                return time.monotonic() - t0
        raise AssertionError(f"server kept the connection open for {timeout} s")


def raw_exchange(port, data, timeout=10):
    """Sends a whole request on a fresh connection and reads one response,
    tolerating a server that answers (and closes) before reading it all."""
    with RawConn(port, timeout=timeout) as c:
        try:
            c.send(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        return c.read_response()


def request_bytes(method, target, headers, body=b""):
    head = f"{method} {target} HTTP/1.1\r\n"
    for k, v in headers.items():
        head += f"{k}: {v}\r\n"
    return head.encode("latin-1") + b"\r\n" + body


# ---- the aws CLI (Debian's v2 at /usr/bin/aws) ----

def aws_binary():
    """Debian's aws CLI v2 if present (the image's PATH may hold pyenv's v1)."""
    if os.path.exists("/usr/bin/aws"):
        return "/usr/bin/aws"
    return shutil.which("aws")


def aws_runner(endpoint, cfgdir, binary=None):
    """A function running `aws --endpoint-url ENDPOINT ARGS...` with a clean
    environment (no AWS_* from the caller), path-style addressing and the
    default credentials; it raises with the output on a non-zero exit unless
    check=False.  binary: another aws than aws_binary()'s."""
    cfg = Path(cfgdir) / "config"
    cfg.write_text("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(cfg),
        "AWS_SHARED_CREDENTIALS_FILE": str(Path(cfgdir) / "no-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_PAGER": "",
        "AWS_MAX_ATTEMPTS": "1",
    })
    binary = binary or aws_binary()

    def run(*args, check=True, timeout=300):
        cmd = [binary, "--endpoint-url", endpoint, *map(str, args)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}\n"
                                 f"stdout: {p.stdout[-4000:]}\nstderr: {p.stderr[-4000:]}")
        return p

    return run


# ---- comparing local trees and buckets ----

def tree_hashes(root):
    """{relative path: sha256} of every file under root."""
    root = Path(root)
    return {p.relative_to(root).as_posix(): file_sha256(p)
            for p in sorted(root.rglob("*")) if p.is_file()}


def bucket_hashes(s3, bucket, prefix=""):
    """{key minus prefix: sha256 of the body} of every object under prefix."""
    out = {}
    token = None
    for _ in range(1000):
        kw = {"Bucket": bucket, "Prefix": prefix}
        if token:
            kw["ContinuationToken"] = token
        page = s3.list_objects_v2(**kw)
        for o in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
            out[o["Key"][len(prefix):]] = sha256(body)
        if not page.get("IsTruncated"):
            break
        token = page["NextContinuationToken"]
    return out


# ---- both modes ----


def modes():
    """Parametrizes the module-scoped mode_server fixture (indirectly) with
    "sd" and "ec"."""
    import pytest
    return pytest.mark.parametrize("mode_server", ["sd", "ec"], indirect=True)


def import_openlake():
    """The Python package `openlake` of this checkout (python/), over the
    libopenlake.so built next to the openlake binary under test (unless
    OPENLAKE_LIB names one); skips the calling module when it cannot load."""
    import pytest
    pkg = str(REPO_ROOT / "python")
    if pkg not in sys.path:
        sys.path.insert(0, pkg)
    if not os.environ.get("OPENLAKE_LIB"):
        lib = Path(openlake_binary()).parent / "libopenlake.so"
        if lib.exists():
            os.environ["OPENLAKE_LIB"] = str(lib)
    return pytest.importorskip("openlake")


def seeded_body(n, seed):
    """n bytes that depend on seed (an int) and look random: the native-client
    tests' bodies."""
    import hashlib
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(b"%d:%d" % (seed, i)).digest() * 128
        i += 1
    return bytes(out[:n])
