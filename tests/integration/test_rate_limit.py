"""Per-user limits (access/ratelimit.h, docs/SECURITY.md "Limits") on one
drive: a user over its request rate gets 503 SlowDown while another user is
served in the same second, and is served again a second later; the native
port answers such a user EBUSY, and a user that owes bandwidth time EBUSY
until it has passed; a bandwidth-limited user's PUT and GET take
about size/rate (less the one-second burst of a rested bucket) while an
unlimited user's do not; the refusals show in the metrics; bad limits stop
the server at start with a clear message.  The clients here never retry
(total_max_attempts 1: helpers.make_client's max_attempts 1 still allows
one retry, which botocore makes on SlowDown), so a SlowDown is seen as
such."""
import errno
import time

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import helpers

MIB = 1 << 20
ALICE = ("alice", "alice-secret-1")  # 3 requests a second
CAROL = ("carol", "carol-secret-1")  # 1 MiB a second
RATE = 3
BYTES_RATE = MIB

CONFIG = [
    ("user", helpers.ACCESS_KEY, helpers.SECRET_KEY),
    ("user", *ALICE),
    ("user", *CAROL),
    ("limit", ALICE[0], RATE, 0),
    ("limit", CAROL[0], 0, "1m"),
]


def client(srv, access=helpers.ACCESS_KEY, secret=helpers.SECRET_KEY):
    cfg = Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1},
                 signature_version="s3v4", connect_timeout=5, read_timeout=60)
    return boto3.client("s3", endpoint_url=srv.endpoint, region_name=helpers.REGION,
                        aws_access_key_id=access, aws_secret_access_key=secret, config=cfg)


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    s = helpers.Server(tmp_path_factory.mktemp("rl"), config=CONFIG)
    s.start()
    yield s
    s.close()




def burst(client, n):
    """n ListBuckets calls as fast as they go: (ok, slowdowns, seconds)."""
    ok = slow = 0
    t0 = time.monotonic()
    for _ in range(n):
        try:
            client.list_buckets()
            ok += 1
        except ClientError as e:
            assert helpers.error_code(e) == "SlowDown", e.response
            assert helpers.http_status(e) == 503
            slow += 1
    return ok, slow, time.monotonic() - t0


def test_request_rate(srv):
    alice = client(srv, *ALICE)
    bob = client(srv)
    before = helpers.metric(srv, 'openlake_ratelimit_throttled_total{port="s3"}')
    ok, slow, took = burst(alice, 12)
    # A rested bucket admits RATE at once, then RATE a second.
    assert RATE <= ok <= RATE + int(took * RATE) + 1, (ok, took)
    assert slow >= 12 - ok and slow > 0
    # Another user in the same second: every request served.
    ok_b, slow_b, _ = burst(bob, 12)
    assert (ok_b, slow_b) == (12, 0)
    assert helpers.metric(srv, 'openlake_ratelimit_throttled_total{port="s3"}') - before == slow
    # A second later the limited user is served again.
    time.sleep(1.1)
    alice.list_buckets()


def test_native_request_rate(srv):
    openlake = helpers.import_openlake()
    time.sleep(1.1)  # alice's bucket full again
    with openlake.Client(srv.endpoint, access_key=ALICE[0], secret_key=ALICE[1]) as c:
        codes = []
        for _ in range(10):
            try:
                c.head("no-such-bucket", "k")
                codes.append(0)
            except openlake.Error as e:
                codes.append(e.code)
    busy = codes.count(-errno.EBUSY)
    assert busy >= 10 - RATE - 2 and busy > 0, codes
    # The first ones went through (to a bucket that does not exist).
    assert -errno.EBUSY not in codes[:RATE], codes
    assert helpers.metric(srv, 'openlake_ratelimit_throttled_total{port="native"}') >= busy


def test_bandwidth(srv):
    carol = client(srv, *CAROL)
    bob = client(srv)
    b = helpers.unique_bucket("rl")
    carol.create_bucket(Bucket=b)
    data = helpers.content_for("rl", 4 * MIB)
    # A rested bucket: one second's worth at once, the rest at the rate.
    t0 = time.monotonic()
    carol.put_object(Bucket=b, Key="k", Body=data)
    put_s = time.monotonic() - t0
    assert 0.8 * (3 * MIB / BYTES_RATE) <= put_s <= 4 * MIB / BYTES_RATE + 3, put_s
    # Now drained: the GET takes the whole size / rate.
    t0 = time.monotonic()
    got = carol.get_object(Bucket=b, Key="k")["Body"].read()
    get_s = time.monotonic() - t0
    assert got == data
    assert 0.8 * (4 * MIB / BYTES_RATE) <= get_s <= 4 * MIB / BYTES_RATE + 3, get_s
    # Another user is not held to it.
    bb = helpers.unique_bucket("rl")
    bob.create_bucket(Bucket=bb)
    t0 = time.monotonic()
    bob.put_object(Bucket=bb, Key="k", Body=data)
    assert bob.get_object(Bucket=bb, Key="k")["Body"].read() == data
    assert time.monotonic() - t0 < 4.5  # paced, it would take 6 s or more
    paced = helpers.metric(srv, "openlake_ratelimit_paced_seconds_total")
    assert paced >= 0.8 * (put_s + get_s) - 2


def test_native_bandwidth(srv):
    """The native port does not pace: a user's large PUT goes through and is
    charged after it, and the user's next requests get EBUSY until the
    time it owes has passed.  test_bandwidth may have left carol owing a
    little (its paced GET drains her bucket to about zero): that is waited
    out first."""
    openlake = helpers.import_openlake()
    b = helpers.unique_bucket("rln")
    client(srv, *CAROL).create_bucket(Bucket=b)
    with openlake.Client(srv.endpoint, access_key=CAROL[0], secret_key=CAROL[1]) as c:
        deadline = time.monotonic() + 5
        while True:
            try:
                c.head(b, "none")
            except openlake.NotFound:
                break
            except openlake.Error as e0:
                assert e0.code == -errno.EBUSY and time.monotonic() < deadline, e0
                time.sleep(0.2)
        c.put(b, "big", helpers.content_for("rln", 3 * MIB))
        t0 = time.monotonic()
        with pytest.raises(openlake.Error) as e:
            c.head(b, "big")
        assert e.value.code == -errno.EBUSY
        # Owed: 3 MiB at 1 MiB/s less the burst, 2 s at most (the upper
        # bound leaves room for a loaded machine's polling and requests).
        while time.monotonic() - t0 < 6:
            try:
                assert c.head(b, "big").size == 3 * MIB
                break
            except openlake.Error as e2:
                assert e2.code == -errno.EBUSY
                time.sleep(0.2)
        took = time.monotonic() - t0
        assert 1.0 <= took <= 5.0, took


@pytest.mark.parametrize("lines,message", [
    ([("limit", "alice", "fast", 0)], "limit alice"),
    ([("limit", "alice", 1)], "limit needs ACCESS_KEY REQ_PER_SEC BYTES_PER_SEC"),
    ([("limit", "alice", 1, 512)], "min_body_rate_bytes_per_sec"),
    ([("user_bytes_per_sec", "100")], "min_body_rate_bytes_per_sec"),
    ([("user_requests_per_sec", "-1")], "user_requests_per_sec"),
])
def test_bad_config(tmp_path, lines, message):
    s = helpers.Server(tmp_path, config=[("user", *ALICE)] + lines)
    with pytest.raises(helpers.ServerError) as e:
        s.start(ready_timeout=10)
    assert message in str(e.value)
