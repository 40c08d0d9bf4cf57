"""S3 over RDMA from Python: a client's memory in an rdma_peer process (built
with the server: build/rdma_peer), its x-amz-rdma-token, and signed GET/PUT
requests that carry it (docs/PROTOCOL.md "S3 over RDMA").  Used by
test_s3_rdma.py and bench/s3_rdma.py."""

import base64
import hashlib
import os
import struct
import subprocess
import tempfile
from pathlib import Path

import helpers


def peer_binary():
    return helpers.openlake_binary().parent / "rdma_peer"


def encode_token(worker, rkey, addr, length, tag=bytes(16), reserved=0, version=b"2"):
    """The token's text form (native/rdma_token.h), from raw parts: tests
    also build malformed ones with it."""
    rec = struct.pack("<HHIQQ", len(worker) & 0xFFFF, len(rkey) & 0xFFFF, reserved,
                      addr & (2**64 - 1), length & (2**64 - 1)) + tag + worker + rkey
    return (version + b"." + base64.urlsafe_b64encode(rec).rstrip(b"=")).decode()


class Peer:
    """An rdma_peer process: a UCX worker with `size` bytes registered,
    confirming tokens of its memory (docs/PROTOCOL.md "S3 over RDMA",
    "Confirmation") for the user access/secret."""

    def __init__(self, size, env=None, access=helpers.ACCESS_KEY, secret=helpers.SECRET_KEY):
        self.proc = subprocess.Popen([str(peer_binary()), access, secret], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        assert self._line() == "ready"
        parts = self.cmd(f"alloc {size}").split()
        assert parts[0] == "mem", parts
        self.addr = int(parts[1], 16)
        self.worker = bytes.fromhex(parts[2])
        self.rkey = bytes.fromhex(parts[3])
        self.tag = bytes.fromhex(parts[4])
        self.size = size
        self.tmp = Path(tempfile.mkdtemp(prefix="rdma_peer"))

    def _line(self):
        line = self.proc.stdout.readline()
        assert line, "rdma_peer exited"
        return line.strip()

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self._line()
        assert not out.startswith("err"), f"rdma_peer {line!r}: {out}"
        return out

    def token(self, off=0, length=None):
        return encode_token(self.worker, self.rkey, self.addr + off,
                            self.size - off if length is None else length, self.tag)

    def fill(self, byte):
        self.cmd(f"set {byte}")

    def load(self, data, off=0):
        p = self.tmp / "in"
        p.write_bytes(data)
        self.cmd(f"load {p} {off}")

    def read(self, off=0, length=None):
        length = self.size - off if length is None else length
        p = self.tmp / "out"
        self.cmd(f"save {p} {off} {length}")
        return p.read_bytes()

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for f in self.tmp.iterdir():
            f.unlink()
        self.tmp.rmdir()


def rdma_get(server, bucket, key, token, headers=None, sign_token=True):
    """A signed GET carrying token; returns helpers.Response."""
    return _request(server, "GET", f"/{bucket}/{key}", token, headers, sign_token,
                    hashlib.sha256(b"").hexdigest())


def rdma_put(server, bucket, key, token, data_sha256=None, headers=None, sign_token=True):
    """A signed PUT whose body is in the client's memory: Content-Length 0,
    the payload hash of the real body (or UNSIGNED-PAYLOAD)."""
    return _request(server, "PUT", f"/{bucket}/{key}", token, headers, sign_token,
                    data_sha256 or "UNSIGNED-PAYLOAD")


def _request(server, method, target, token, headers, sign_token, payload_hash):
    hdrs = {"Host": f"127.0.0.1:{server.port}"}
    hdrs.update(headers or {})
    if token is not None and sign_token:
        hdrs["x-amz-rdma-token"] = token
    hdrs, _ = helpers.sign_headers(method, target, hdrs, payload_hash)
    if token is not None and not sign_token:
        hdrs["x-amz-rdma-token"] = token  # added after signing: not covered
    if method == "PUT":
        hdrs["Content-Length"] = "0"
    return helpers.http_request(server, method, target, hdrs, None, timeout=60)
