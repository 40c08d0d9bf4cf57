"""Clean shutdown on SIGTERM and SIGINT, also with a large PUT in flight."""

import hashlib
import http.client
import signal
import threading
import time

import pytest
from botocore.exceptions import ClientError

import helpers as h
from helpers import MIB

SIZE = 256 * MIB


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_during_large_put(make_server, sig):
    srv = make_server()
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="shut")
    s3.put_object(Bucket="shut", Key="before", Body=b"written before the signal")
    expected = h.stream_sha256(SIZE, seed=3)
    url = s3.generate_presigned_url("put_object", Params={"Bucket": "shut", "Key": "big"},
                                    ExpiresIn=600)
    sent = [0]
    result = {}

    def upload():
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
        try:
            conn.putrequest("PUT", h.split_url(url)[2], skip_accept_encoding=True)
            conn.putheader("Content-Length", str(SIZE))
            conn.endheaders()
            for block in h.stream_blocks(SIZE, seed=3):
                conn.send(block)
                sent[0] += len(block)
            resp = conn.getresponse()
            resp.read()
            result["status"] = resp.status
        except (OSError, http.client.HTTPException) as e:
            result["error"] = f"{e!r} after {sent[0]} bytes"
            try:  # an early answer from the server explains the failure
                resp = conn.getresponse()
                result["early"] = (resp.status, resp.read()[:300])
            except (OSError, http.client.HTTPException):
                pass
        finally:
            conn.close()

    t = threading.Thread(target=upload)
    t.start()
    deadline = time.monotonic() + 30
    while sent[0] < 32 * MIB and time.monotonic() < deadline and t.is_alive():
        time.sleep(0.01)
    assert sent[0] >= 32 * MIB, f"upload did not get going: {result}"
    rc, took = srv.signal_and_wait(sig, timeout=10)
    assert rc == 0, f"server exited {rc} on {sig.name}\n{srv.log_tail()}"
    assert took <= 10
    t.join(40)
    assert not t.is_alive(), "uploader still blocked after the server exited"

    srv.start()
    s3 = h.make_client(srv.endpoint)
    assert s3.get_object(Bucket="shut", Key="before")["Body"].read() == b"written before the signal"
    try:
        head = s3.head_object(Bucket="shut", Key="big")
    except ClientError as e:
        assert h.http_status(e) == 404
        assert result.get("status") != 200, "PUT acknowledged but the object is missing"
        return
    assert head["ContentLength"] == SIZE, "a partial object became visible"
    got = hashlib.sha256()
    for chunk in s3.get_object(Bucket="shut", Key="big")["Body"].iter_chunks(4 * MIB):
        got.update(chunk)
    assert got.hexdigest() == expected, "the object exists but its content is wrong"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_idle_server(make_server, sig):
    srv = make_server()
    s3 = h.make_client(srv.endpoint)
    s3.create_bucket(Bucket="idle")
    s3.put_object(Bucket="idle", Key="k", Body=b"v")
    # An idle keep-alive connection must not hold the shutdown up.
    with h.RawConn(srv.port) as c:
        c.send(h.request_bytes("GET", h.split_url(s3.generate_presigned_url(
            "get_object", Params={"Bucket": "idle", "Key": "k"}))[2],
            {"Host": f"127.0.0.1:{srv.port}"}))
        assert c.read_response().status == 200
        rc, took = srv.signal_and_wait(sig, timeout=10)
    assert rc == 0
    assert took < 5, f"shutdown took {took:.1f} s with an idle connection open"
    srv.start()
    assert h.make_client(srv.endpoint).get_object(Bucket="idle", Key="k")["Body"].read() == b"v"
