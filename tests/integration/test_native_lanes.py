"""Lanes of the native port (native/server.h, ol_client_opts.lanes): a node
with native_lanes 4 names every lane's port (GET /_openlake/native, lane 0
first, "port" still lane 0's), a client with several lanes spreads its
calls over all of them (both sides' counters say so) with byte-identical
round trips, a client with one lane keeps to lane 0, and every lane refuses
a wrong secret."""
import json
import re
import urllib.request

import pytest

import helpers

from helpers import Server, make_client, unique_bucket, import_openlake

openlake = import_openlake()

MIB = 1 << 20
LANES = 4


def body(n, seed):
    return helpers.seeded_body(n, seed)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("lanes"),
               config={"native_lanes": LANES, "metrics_public": "yes"})
    s.start()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module")
def bkt(srv):
    b = unique_bucket("lanes")
    make_client(srv.endpoint).create_bucket(Bucket=b)
    return b


def _native(srv):
    with urllib.request.urlopen(srv.endpoint + "/_openlake/native", timeout=10) as r:
        return json.loads(r.read())


def _lane_requests(srv):
    with urllib.request.urlopen(srv.endpoint + "/_openlake/metrics", timeout=10) as r:
        text = r.read().decode()
    got = {}
    for m in re.finditer(r'^openlake_native_lane_requests_total\{lane="(\d+)"\} (\d+)$', text,
                         re.M):
        got[int(m.group(1))] = int(m.group(2))
    return [got.get(i, 0) for i in range(LANES)]


def test_every_lane_named(srv):
    j = _native(srv)
    assert len(j["ports"]) == LANES
    assert j["ports"][0] == j["port"]
    assert len(set(j["ports"])) == LANES


def test_round_trips_spread_over_lanes(srv, bkt):
    before = _lane_requests(srv)
    with openlake.Client(srv.endpoint, access_key="openlake", secret_key="openlake-secret",
                         lanes=LANES) as c:
        objs = {"k%d" % i: body(n, i) for i, n in enumerate(
            [0, 1, 4096, MIB + 3, 3 * MIB + 17, 9 * MIB + 1])}
        for k, v in objs.items():
            c.put(bkt, k, v)
        for _ in range(2):
            for k, v in objs.items():
                assert bytes(c.get(bkt, k)) == v, k
        # A batch's ops spread too.
        keys = sorted(objs)
        bufs = [bytearray(len(objs[k])) for k in keys]
        got = c.get_many([(bkt, k, b) for k, b in zip(keys, bufs)])
        for k, n, b in zip(keys, got, bufs):
            assert n == len(objs[k]) and bytes(b) == objs[k], k
        # One large GET alone goes in pieces on every lane at once, at an
        # offset too.
        big = objs["k5"]
        before_one = c.stats()["lane_calls"]
        assert bytes(c.get(bkt, "k5")) == big
        assert all(a > b for a, b in zip(c.stats()["lane_calls"], before_one))
        buf = bytearray(len(big))
        assert c.get_into(bkt, "k5", buf, 12345) == len(big) - 12345
        assert bytes(buf[:len(big) - 12345]) == big[12345:]
        st = c.stats()
    assert st["lanes"] == LANES
    assert all(n > 0 for n in st["lane_calls"]), st
    after = _lane_requests(srv)
    assert all(a > b for a, b in zip(after, before)), (before, after)


def test_one_lane_keeps_to_lane_0(srv, bkt):
    before = _lane_requests(srv)
    with openlake.Client(srv.endpoint, access_key="openlake", secret_key="openlake-secret",
                         lanes=1) as c:
        data = body(2 * MIB, 7)
        c.put(bkt, "one", data)
        assert bytes(c.get(bkt, "one")) == data
        assert c.stats()["lanes"] == 1
    after = _lane_requests(srv)
    assert after[0] > before[0]
    assert after[1:] == before[1:]


def test_every_lane_refuses_a_wrong_secret(srv, bkt):
    host = srv.endpoint.split("//")[1].rsplit(":", 1)[0]
    for port in _native(srv)["ports"]:
        addr = "%s:%d" % (host, port)
        with pytest.raises(openlake.Error):
            openlake.Client(addr, access_key="openlake", secret_key="wrong-secret", lanes=1,
                            timeout_ms=5000)
        # The right one is taken on the same lane.
        with openlake.Client(addr, access_key="openlake", secret_key="openlake-secret",
                             lanes=1) as c:
            c.put(bkt, "lane-%d" % port, b"x" * 100)
            assert bytes(c.get(bkt, "lane-%d" % port)) == b"x" * 100
    # A client whose other lanes would be reached with the wrong secret gets
    # nothing through any of them: open fails on lane 0 already.
    with pytest.raises(openlake.Error):
        openlake.Client(srv.endpoint, access_key="openlake", secret_key="wrong-secret",
                        lanes=LANES, timeout_ms=5000)
