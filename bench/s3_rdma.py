#!/usr/bin/python3
"""S3 over RDMA against plain HTTP: GET of one 64 MiB object, same server,
same run (issue 13).  A benchmark, not a test; results go to bench/RESULTS.md
("S3 over RDMA").

    OPENLAKE_BIN=build/openlake /usr/bin/python3 bench/s3_rdma.py [ROUNDS]

For each UCX setting (UCX_TLS and the server's error mode, see
src/native/rdma.h) it starts a server, stores the object, and times ROUNDS
(default 5) GETs each way after one warm-up: x-amz-rdma-token into an
rdma_peer's registered memory, and plain HTTP read into a preallocated
buffer (readinto: no copy past the socket's).  Prints GB/s and the ratio,
and the lanes UCX picked (ucp_ep_print_info)."""

import http.client
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))
import helpers  # noqa: E402
import rdma_helpers as rh  # noqa: E402

SIZE = 64 << 20
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
SETTINGS = [  # (label, environment)
    ("default (peer errors: tcp)", {}),
    ("UCX_TLS=tcp", {"UCX_TLS": "tcp"}),
    # Shared memory and cma alone cannot carry it: UCX 1.13 has no peer
    # failure detection on them (src/native/rdma.h); the run shows the 400.
    ("UCX_TLS=shm,cma,self", {"UCX_TLS": "shm,cma,self"}),
]


def http_get(srv, bkt, buf):
    hdrs = {"Host": f"127.0.0.1:{srv.port}"}
    hdrs, _ = helpers.sign_headers("GET", f"/{bkt}/obj", hdrs,
                                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    c.request("GET", f"/{bkt}/obj", headers=hdrs)
    r = c.getresponse()
    assert r.status == 200, r.status
    mv, got = memoryview(buf), 0
    while got < SIZE:
        n = r.readinto(mv[got:])
        assert n > 0
        got += n
    c.close()


def one(label, env):
    saved = {k: os.environ.get(k) for k in list(env) + ["UCX_NET_DEVICES", "OPENLAKE_RDMA_EP_INFO"]}
    os.environ.update(env, UCX_NET_DEVICES="lo", OPENLAKE_RDMA_EP_INFO="1")
    srv = helpers.Server(tempfile.mkdtemp(prefix="ol-rdma-bench"))
    srv.start()
    peer = None
    try:
        s3 = helpers.make_client(srv.endpoint)
        bkt = helpers.unique_bucket()
        s3.create_bucket(Bucket=bkt)
        data = os.urandom(SIZE)
        s3.put_object(Bucket=bkt, Key="obj", Body=data)
        peer = rh.Peer(SIZE)
        tok = peer.token()
        buf = bytearray(SIZE)
        times = {"rdma": [], "http": []}
        for i in range(ROUNDS + 1):
            t = time.perf_counter()
            r = rh.rdma_get(srv, bkt, "obj", tok)
            dt = time.perf_counter() - t
            if r.status != 200:
                print(f"{label}: S3-over-RDMA GET refused: {r.status} "
                      f"{helpers.parse_error(r.body)['Message']}")
                return
            assert r.header("x-amz-rdma-bytes-transferred") == str(SIZE), r
            if i:
                times["rdma"].append(dt)
            t = time.perf_counter()
            http_get(srv, bkt, buf)
            dt = time.perf_counter() - t
            if i:
                times["http"].append(dt)
        assert peer.read() == data, "RDMA bytes differ"
        assert bytes(buf) == data, "HTTP bytes differ"
        g = {k: SIZE / (sorted(v)[len(v) // 2]) / 1e9 for k, v in times.items()}
        lanes = [ln.strip("# ").strip() for ln in srv.log_tail(200).splitlines()
                 if "lane[" in ln]
        print(f"{label}: S3-over-RDMA GET 64 MiB {g['rdma']:.2f} GB/s, HTTP GET {g['http']:.2f} "
              f"GB/s, ratio {g['rdma'] / g['http']:.2f}  (median of {ROUNDS})")
        for ln in lanes[-2:]:
            print(f"    lane: {ln}")
    finally:
        if peer:
            peer.close()
        srv.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


if __name__ == "__main__":
    print(f"host: {os.cpu_count()} cores, {os.uname().release}")
    for label, env in SETTINGS:
        one(label, env)
