"""An error answered before the request body is read reaches the client:
the server reads and discards the rest of the body (bounded, as nginx's
lingering close) instead of closing with unread bytes, which would make
the kernel send a reset that destroys the response on its way."""

import socket
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h

BODY = 8 * h.MIB


def _put_head(server, bucket, length, expect=False):
    target = f"/{bucket}/big"
    hdrs = {"Host": f"127.0.0.1:{server.port}", "Content-Length": str(length)}
    if expect:
        hdrs["Expect"] = "100-continue"
    hdrs, _ = h.sign_headers("PUT", target, hdrs, "UNSIGNED-PAYLOAD")
    return h.request_bytes("PUT", target, hdrs)


@pytest.mark.parametrize("slow", [False, True])
def test_raw_put_to_missing_bucket_gets_the_404(mode_server, slow):
    missing = h.unique_bucket("missing")
    for _ in range(3):
        with h.RawConn(mode_server.port, timeout=20) as c:
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * h.KIB)
            c.send(_put_head(mode_server, missing, BODY))
            block = b"x" * (256 * h.KIB)
            for i in range(BODY // len(block)):
                c.send(block)
                if slow and i % 8 == 0:
                    time.sleep(0.05)
            r = c.read_response()
            assert r.status == 404, r
            assert h.parse_error(r.body)["Code"] == "NoSuchBucket"
            assert r.header("connection") == "close"
            # Then an orderly close (FIN), not a reset.
            c.wait_closed(10)


def test_raw_put_partial_body_then_close(mode_server):
    # The client stops halfway and reads: the response is there.
    missing = h.unique_bucket("missing")
    with h.RawConn(mode_server.port, timeout=20) as c:
        c.send(_put_head(mode_server, missing, BODY) + b"y" * (3 * h.MIB))
        r = c.read_response()
        assert r.status == 404 and h.parse_error(r.body)["Code"] == "NoSuchBucket", r


def test_boto3_put_to_missing_bucket_twenty_times(mode_server, mode_s3):
    missing = h.unique_bucket("missing")
    data = b"z" * BODY
    for i in range(20):
        with pytest.raises(ClientError) as ei:
            mode_s3.put_object(Bucket=missing, Key=f"k{i}", Body=data)
        assert h.error_code(ei.value) == "NoSuchBucket", i
