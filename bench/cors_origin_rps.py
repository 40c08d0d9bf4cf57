#!/usr/bin/python3
"""Requests per second of anonymous requests carrying Origin to a bucket with a
large (~60 KB, 100-rule) CORS configuration.

  bench/cors_origin_rps.py [--bin build/openlake] [--seconds 5] [--conns 8]

Starts its own server on 127.0.0.1 (one drive, two threads), stores the
configuration, then drives pipelined keep-alive GETs with an Origin that no
rule matches (every rule is examined) and prints req/s.  A second line runs
the same load without the Origin header, as the reference.  Compare numbers
only from one machine in one run.
"""

import argparse
import base64
import hashlib
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
import helpers  # noqa: E402


def big_cors():
    rules = []
    for i in range(100):
        hdrs = "".join(f"<AllowedHeader>x-amz-meta-h{i}-{j}</AllowedHeader>" for j in range(9))
        rules.append(f"<CORSRule><AllowedOrigin>https://app{i}.example.com</AllowedOrigin>"
                     f"<AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod>"
                     f"{hdrs}<ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>300</MaxAgeSeconds>"
                     f"</CORSRule>")
    return ("<CORSConfiguration>" + "".join(rules) + "</CORSConfiguration>").encode()


def load(port, req, seconds, counts, idx, depth=64):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    batch = req * depth
    n = 0
    buf = b""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        s.sendall(batch)
        got = 0
        # Responses carry Content-Length and are small: count status lines.
        while got < depth:
            b = s.recv(1 << 20)
            if not b:
                raise ConnectionError("closed")
            buf += b
            k = buf.count(b"HTTP/1.1 ")
            if k:
                got += k
                cut = buf.rfind(b"HTTP/1.1 ")
                buf = buf[cut + 9:]
        n += depth
    s.close()
    counts[idx] = n


def run(port, req, seconds, conns):
    counts = [0] * conns
    ts = [threading.Thread(target=load, args=(port, req, seconds, counts, i))
          for i in range(conns)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(counts) / (time.monotonic() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=None)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--conns", type=int, default=8)
    a = ap.parse_args()
    if a.bin:
        os.environ["OPENLAKE_BIN"] = a.bin
    with tempfile.TemporaryDirectory() as d:
        srv = helpers.Server(d, threads=2)
        srv.start()
        try:
            s3 = helpers.make_client(srv.endpoint)
            s3.create_bucket(Bucket="corsbench")
            doc = big_cors()
            md5 = base64.b64encode(hashlib.md5(doc).digest()).decode()
            r = helpers.signed_request(srv, "PUT", "/corsbench?cors", body=doc,
                                       headers={"Content-MD5": md5})
            assert r.status == 200, r
            host = f"127.0.0.1:{srv.port}"
            with_origin = (f"GET /corsbench/k HTTP/1.1\r\nHost: {host}\r\n"
                           f"Origin: https://nomatch.example.org\r\n\r\n").encode()
            without = f"GET /corsbench/k HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            print(f"CORS document: {len(doc)} bytes, 100 rules")
            print(f"anonymous GET with Origin:    {run(srv.port, with_origin, a.seconds, a.conns):9.0f} req/s")
            print(f"anonymous GET without Origin: {run(srv.port, without, a.seconds, a.conns):9.0f} req/s")
        finally:
            srv.close()


if __name__ == "__main__":
    main()
