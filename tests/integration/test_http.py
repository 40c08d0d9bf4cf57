"""HTTP/1.1 behaviour on raw sockets: keep-alive, pipelining, 100-continue,
chunked bodies, limits and timeouts."""

import os
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h
from helpers import KIB, MIB


def _presign(s3, op, bucket, key, expires=600):
    return h.split_url(s3.generate_presigned_url(op, Params={"Bucket": bucket, "Key": key},
                                                 ExpiresIn=expires))[2]


def _host(server):
    return f"127.0.0.1:{server.port}"


def test_keep_alive(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="a", Body=b"AAAA")
    s3.put_object(Bucket=bucket, Key="b", Body=b"BBBBBB")
    with h.RawConn(server.port) as c:
        for key, want in [("a", b"AAAA"), ("b", b"BBBBBB"), ("a", b"AAAA")]:
            c.send(h.request_bytes("GET", _presign(s3, "get_object", bucket, key),
                                   {"Host": _host(server)}))
            r = c.read_response()
            assert r.status == 200, r
            assert r.body == want
            assert r.header("connection", "").lower() != "close"


def test_connection_close_is_honoured(server, s3, bucket):
    s3.put_object(Bucket=bucket, Key="c", Body=b"C")
    with h.RawConn(server.port) as c:
        c.send(h.request_bytes("GET", _presign(s3, "get_object", bucket, "c"),
                               {"Host": _host(server), "Connection": "close"}))
        r = c.read_response()
        assert r.status == 200 and r.body == b"C"
        c.wait_closed(5)


def test_pipelining(server, s3, bucket):
    bodies = {"p1": os.urandom(100), "p2": os.urandom(200 * KIB), "p3": b""}
    for k, v in bodies.items():
        s3.put_object(Bucket=bucket, Key=k, Body=v)
    reqs = b"".join(h.request_bytes("GET", _presign(s3, "get_object", bucket, k),
                                    {"Host": _host(server)}) for k in bodies)
    head = h.request_bytes("HEAD", _presign(s3, "head_object", bucket, "p2"),
                           {"Host": _host(server)})
    missing = h.request_bytes("GET", _presign(s3, "get_object", bucket, "nope"),
                              {"Host": _host(server)})
    last = h.request_bytes("GET", _presign(s3, "get_object", bucket, "p1"),
                           {"Host": _host(server)})
    with h.RawConn(server.port) as c:
        c.send(reqs + head + missing + last)  # one write
        for k, v in bodies.items():
            r = c.read_response()
            assert r.status == 200, (k, r)
            assert r.body == v, k
        r = c.read_response(head_only=True)
        assert r.status == 200
        assert r.header("content-length") == str(200 * KIB)
        r = c.read_response()
        assert r.status == 404
        assert h.parse_error(r.body)["Code"] == "NoSuchKey"
        r = c.read_response()
        assert r.status == 200 and r.body == bodies["p1"]


def test_expect_100_continue(server, s3, bucket):
    data = os.urandom(300 * KIB)
    target = _presign(s3, "put_object", bucket, "cont")
    hdrs = {"Host": _host(server), "Content-Length": str(len(data)), "Expect": "100-continue"}
    with h.RawConn(server.port, timeout=5) as c:
        c.send(h.request_bytes("PUT", target, hdrs))
        r = c.read_response()
        assert r.status == 100, f"expected 100 Continue before the body, got {r}"
        c.send(data)
        r = c.read_response()
        assert r.status == 200, r
        assert r.header("etag") == f'"{h.md5_hex(data)}"'
    assert s3.get_object(Bucket=bucket, Key="cont")["Body"].read() == data


def test_chunked_transfer_encoding_put(mode_server, mode_s3, mode_bucket):
    # Both modes: a body of unknown length once aborted an erasure-coded server.
    server, s3, bucket = mode_server, mode_s3, mode_bucket
    sizes = [1, 1000, 64 * KIB, 100_000, 3, 1 * MIB + 7]
    pieces = [os.urandom(n) for n in sizes]
    body = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in pieces) + b"0\r\n\r\n"
    target = _presign(s3, "put_object", bucket, "chunked")
    hdrs = {"Host": _host(server), "Transfer-Encoding": "chunked"}
    with h.RawConn(server.port) as c:
        c.send(h.request_bytes("PUT", target, hdrs))
        # Send in odd-sized writes so framing straddles reads.
        for i in range(0, len(body), 7777):
            c.send(body[i:i + 7777])
        r = c.read_response()
        assert r.status == 200, r
        data = b"".join(pieces)
        assert r.header("etag") == f'"{h.md5_hex(data)}"'
        # The connection is still usable afterwards.
        c.send(h.request_bytes("GET", _presign(s3, "get_object", bucket, "chunked"),
                               {"Host": _host(server)}))
        r = c.read_response()
        assert r.status == 200
        assert r.body == data


def test_body_is_skipped_after_error(server, s3, bucket):
    # A PUT refused by the server (missing bucket) still has its body
    # consumed (or the connection closed): never is the body taken as the
    # next request.
    target = _presign(s3, "put_object", h.unique_bucket("nob"), "k")
    junk = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 10
    s3.put_object(Bucket=bucket, Key="after", Body=b"after")
    with h.RawConn(server.port) as c:
        c.send(h.request_bytes("PUT", target, {"Host": _host(server),
                                               "Content-Length": str(len(junk))}, junk))
        r = c.read_response()
        assert r.status == 404
        try:
            c.send(h.request_bytes("GET", _presign(s3, "get_object", bucket, "after"),
                                   {"Host": _host(server)}))
            r = c.read_response()
        except (ConnectionError, OSError):
            return  # closing the connection is acceptable
        assert r.status == 200 and r.body == b"after", r


def test_header_too_large(server):
    req = (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
    assert h.raw_exchange(server.port, req).status == 431


def test_too_many_headers(server):
    req = b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(
        f"X-H{i}: v\r\n".encode() for i in range(150)) + b"\r\n"
    assert len(req) < 16384
    assert h.raw_exchange(server.port, req).status == 431


def test_url_too_long(server):
    req = b"GET /bucket/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert h.raw_exchange(server.port, req).status == 414


@pytest.mark.parametrize("line", [b"GARBAGE", b"G\x01T / HTTP/1.1", b"GET / FTP/1.1",
                                  b"GET /\x00x HTTP/1.1"])
def test_malformed_request_line(server, line):
    assert h.raw_exchange(server.port, line + b"\r\nHost: x\r\n\r\n").status == 400


def test_bad_content_length(server):
    r = h.raw_exchange(server.port, b"PUT /b/k HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n")
    assert r.status == 400


def test_server_survives_garbage(server, s3):
    # After all of the above the server still works.
    with h.RawConn(server.port) as c:
        try:
            c.send(os.urandom(4096) + b"\r\n\r\n")
        except OSError:
            pass
    assert s3.list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200


@pytest.fixture(scope="module")
def timeout_server(tmp_path_factory):
    srv = h.Server(tmp_path_factory.mktemp("srv-timeouts"),
                   config={"idle_timeout_ms": 1000, "io_timeout_ms": 1000})
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


def test_idle_timeout(timeout_server):
    with h.RawConn(timeout_server.port) as c:
        took = c.wait_closed(6)
    assert 0.5 <= took <= 5, f"idle connection closed after {took:.2f} s"


def test_idle_timeout_after_request(timeout_server):
    s3 = h.make_client(timeout_server.endpoint)
    s3.create_bucket(Bucket="idle")
    s3.put_object(Bucket="idle", Key="k", Body=b"v")
    with h.RawConn(timeout_server.port) as c:
        c.send(h.request_bytes("GET", _presign(s3, "get_object", "idle", "k"),
                               {"Host": _host(timeout_server)}))
        r = c.read_response()
        assert r.status == 200 and r.body == b"v"
        took = c.wait_closed(6)
    assert 0.5 <= took <= 5


def test_slow_client_body(timeout_server):
    s3 = h.make_client(timeout_server.endpoint)
    s3.create_bucket(Bucket="slow")
    target = _presign(s3, "put_object", "slow", "half")
    data = os.urandom(MIB)
    with h.RawConn(timeout_server.port) as c:
        c.send(h.request_bytes("PUT", target, {"Host": _host(timeout_server),
                                               "Content-Length": str(len(data))}))
        c.send(data[:len(data) // 2])
        took = c.wait_closed(8)  # a 408 response before the close is fine
    assert took <= 6, f"stalled body closed after {took:.2f} s"
    time.sleep(0.2)
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket="slow", Key="half")
    assert h.http_status(e.value) == 404
    # The server is still healthy.
    s3.put_object(Bucket="slow", Key="ok", Body=b"fine")
    assert s3.get_object(Bucket="slow", Key="ok")["Body"].read() == b"fine"
