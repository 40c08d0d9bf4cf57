"""Encrypted read-ahead (obj/sse.h, obj/sse_pool.h): with the decrypt pool on
(sse_decrypt_threads 2, which a 2-core machine would not pick itself), long
encrypted GETs open their windows on the pool's threads.  Whole objects,
ranges, multipart objects whose parts end inside windows, SSE-C, several
GETs at once, and clients that hang up mid-body, on one drive and on
erasure-coded drives: every byte right, and the server still serving.  And
windows opened where the source hands them over: on erasure-coded drives a
window across two stripe units is taken as pinned pieces, not copied
(the openlake_sse_* metrics)."""
import concurrent.futures
import hashlib
import re
import socket

import helpers

pytestmark = helpers.modes()

SERVER_CONFIG = {"sse_decrypt_threads": "2"}
MIB = 1 << 20


def body(n, seed):
    rnd = hashlib.sha256(seed.encode()).digest()
    out = bytearray()
    while len(out) < n:
        rnd = hashlib.sha256(rnd).digest()
        out += rnd * 64
    return bytes(out[:n])


def test_long_reads(mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    data = body(9 * MIB + 4321, "ra")
    s3.put_object(Bucket=b, Key="s3", Body=data, ServerSideEncryption="AES256")
    key = b"k" * 32
    c = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    s3.put_object(Bucket=b, Key="c", Body=data, **c)
    assert s3.get_object(Bucket=b, Key="s3")["Body"].read() == data
    assert s3.get_object(Bucket=b, Key="c", **c)["Body"].read() == data
    for a, z in [(70000, 7 * MIB + 3), (MIB - 1, len(data) - 1), (3, 2 * MIB)]:
        got = s3.get_object(Bucket=b, Key="s3", Range=f"bytes={a}-{z}")["Body"].read()
        assert got == data[a:z + 1], (a, z)

    # Several at once: the pool's blocks are shared under one cap.
    def get(i):
        return s3.get_object(Bucket=b, Key="s3" if i % 2 else "c",
                             **({} if i % 2 else c))["Body"].read() == data
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        assert all(ex.map(get, range(12)))


def sse_windows(server):
    r = helpers.signed_request(server, "GET", "/_openlake/metrics")
    assert r.status == 200, r
    got = dict(re.findall(r'openlake_sse_windows_total\{source="(\w+)"\} (\d+)',
                          r.body.decode()))
    return {k: int(v) for k, v in got.items()}


def test_windows_in_pieces(mode_server, mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    data = body(9 * MIB + 5, "pieces")
    s3.put_object(Bucket=b, Key="o", Body=data, ServerSideEncryption="AES256")
    assert s3.get_object(Bucket=b, Key="o")["Body"].read() == data  # pages cached now
    w0 = sse_windows(mode_server)
    for _ in range(2):
        assert s3.get_object(Bucket=b, Key="o")["Body"].read() == data
        rng = s3.get_object(Bucket=b, Key="o", Range="bytes=1000000-2100000")["Body"].read()
        assert rng == data[1000000:2100001]
    w1 = sse_windows(mode_server)
    d = {k: w1[k] - w0.get(k, 0) for k in w1}
    assert d["copied"] == 0, d
    assert d["in_place"] + d["pieces"] >= 2 * 10, d
    if mode_server.mode == "ec":
        # 1 MiB units, windows of 983,280 sealed bytes: most straddle two.
        assert d["pieces"] >= 2 * 8, d


def test_multipart(mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    parts = [body(5 * MIB + 77, "p1"), body(5 * MIB, "p2"), body(MIB + 5, "p3")]
    up = s3.create_multipart_upload(Bucket=b, Key="mp", ServerSideEncryption="AES256")
    etags = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=b, Key="mp", UploadId=up["UploadId"], PartNumber=i, Body=p)
        etags.append({"PartNumber": i, "ETag": r["ETag"]})
    s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": etags})
    whole = b"".join(parts)
    assert s3.get_object(Bucket=b, Key="mp")["Body"].read() == whole
    got = s3.get_object(Bucket=b, Key="mp", Range=f"bytes={MIB}-{11 * MIB}")["Body"].read()
    assert got == whole[MIB:11 * MIB + 1]


def test_client_hangs_up(mode_server, mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    data = body(12 * MIB, "hup")
    s3.put_object(Bucket=b, Key="big", Body=data, ServerSideEncryption="AES256")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "big"})
    path = url.split(str(mode_server.port), 1)[1]
    for _ in range(8):
        with socket.create_connection(("127.0.0.1", mode_server.port), timeout=10) as sk:
            sk.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{mode_server.port}\r\n\r\n"
                       .encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sk.recv(1 << 16)
                assert chunk
                head += chunk
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            got = len(head)
            while got < 2 * MIB:
                chunk = sk.recv(1 << 16)
                assert chunk
                got += len(chunk)
    # The server goes on serving, and serves the object whole.
    assert s3.get_object(Bucket=b, Key="big")["Body"].read() == data
