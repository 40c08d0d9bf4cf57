"""Run-time users on a 3-node cluster (users/users.h): kept in etcd under
/openlake/<cluster>/users/, sealed; a user added through node 1 works on
node 2; a removal through node 1 and a rotation through node 2 take effect
on node 3 within the documented bound (OL_USERS_STALE_MS, 5 s; in practice
the watch's delay); a node that cannot read etcd for longer than the bound
refuses run-time users (503) while configuration users go on."""
import base64
import json
import subprocess
import time
import urllib.request

import pytest
from botocore.exceptions import ClientError

from cluster_harness import Cluster, needs_etcd
from helpers import error_code, make_client, openlake_binary

pytestmark = needs_etcd

BOUND_S = 5.0  # OL_USERS_STALE_MS


def cli(node, *args):
    out = subprocess.run([str(openlake_binary()), "admin", "user", *args, "--endpoint",
                          node.endpoint], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def until(fn, bound=BOUND_S):
    """Seconds until fn() is true, failing past bound."""
    t0 = time.monotonic()
    while True:
        if fn():
            return time.monotonic() - t0
        assert time.monotonic() - t0 < bound, "not within the bound"
        time.sleep(0.02)


def works(node, ak, sk):
    try:
        make_client(node.endpoint, ak, sk).list_buckets()
        return True
    except ClientError:
        return False


def refused(node, ak, sk, code):
    try:
        make_client(node.endpoint, ak, sk).list_buckets()
        return False
    except ClientError as e:
        return error_code(e) == code


def etcd_values(cl):
    key = base64.b64encode(b"/openlake/").decode()
    end = base64.b64encode(b"/openlake0").decode()
    req = urllib.request.Request(f"http://{cl.etcd.endpoint}/v3/kv/range",
                                 data=json.dumps({"key": key, "range_end": end}).encode(),
                                 method="POST")
    kvs = json.loads(urllib.request.urlopen(req, timeout=5).read()).get("kvs", [])
    return {base64.b64decode(kv["key"]): base64.b64decode(kv.get("value", "")) for kv in kvs}


def test_cluster_users():
    with Cluster(nodes=3, dirs=2, k=4, m=2, prefix="ol_cusers_") as cl:
        n1, n2, n3 = cl.nodes
        sk = cli(n1, "add", "ivy")["secret_key"]
        assert works(n1, "ivy", sk)  # at once on the node that added it
        added = until(lambda: works(n2, "ivy", sk))
        b = "ivy-bucket"
        make_client(n2.endpoint, "ivy", sk).create_bucket(Bucket=b)
        make_client(n3.endpoint, "ivy", sk).put_object(Bucket=b, Key="k", Body=b"x")

        # Sealed in etcd: the record is there, the secret is not.
        vals = etcd_values(cl)
        rec = [v for k, v in vals.items() if k.endswith(b"/users/ivy")]
        assert len(rec) == 1 and sk.encode() not in rec[0]
        assert all(sk.encode() not in v for v in vals.values())

        # Rotation through node 2: the old secret stops on node 3.
        sk2 = cli(n2, "rotate", "ivy")["secret_key"]
        rotated = until(lambda: refused(n3, "ivy", sk, "SignatureDoesNotMatch"))
        assert works(n3, "ivy", sk2)

        # Removal through node 1: node 3 refuses within the bound.
        t0 = time.monotonic()
        cli(n1, "remove", "ivy")
        assert refused(n1, "ivy", sk2, "InvalidAccessKeyId")  # at once here
        removed = until(lambda: refused(n3, "ivy", sk2, "InvalidAccessKeyId"))
        assert refused(n2, "ivy", sk2, "InvalidAccessKeyId")
        print(f"propagation: add {added:.3f} s, rotate {rotated:.3f} s, "
              f"remove {removed:.3f} s (command included: {time.monotonic() - t0:.3f} s)")
        names = [u["access_key"] for u in cli(n3, "list")["users"]]
        assert "ivy" not in names

        # etcd gone: past the bound a node fails closed for run-time users;
        # the configuration user still gets in.
        sk3 = cli(n1, "add", "jack")["secret_key"]
        until(lambda: works(n3, "jack", sk3))
        cl.etcd.stop()
        until(lambda: refused(n3, "jack", sk3, "ServiceUnavailable"), bound=BOUND_S + 4)
        make_client(n3.endpoint).list_buckets()
