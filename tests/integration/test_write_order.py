"""Last completed write wins: concurrent PUTs of one key whose bodies finish
in a controlled order.

Amazon S3: "If Amazon S3 receives multiple write requests for the same
object simultaneously, it overwrites all but the last object written" --
the last one to complete, not the last one to start.  Each PUT here is a
raw, header-signed request (UNSIGNED-PAYLOAD) on its own connection: the
headers and the first part of every body go out in start order, the server
is given time to begin each one, and then the bodies are finished in
another order, waiting for each response before finishing the next.  The
PUT that STARTED first finishes last, so a server that orders writes by
their start time (the request's clock reading) rather than their commit
keeps the wrong body.

Checked: GET and HEAD return the body and ETag of the PUT that completed
last, a listing shows its size and ETag, and in a versioning-enabled bucket
the version marked IsLatest (the top of ListObjectVersions) is the one
that PUT returned.

Both modes: on EC drives the version id is taken when a PUT commits, so the
order is the same as on one drive.
"""

import time

import pytest

import helpers as h

SETTLE_S = 0.3  # lets the server read each request's head and first bytes


class SlowPut:
    """A PUT whose body is sent in two steps."""

    def __init__(self, server, bucket, key, body, first):
        self.body = body
        self.first = first
        self.target = f"/{bucket}/{key}"
        hdrs = {"Host": f"127.0.0.1:{server.port}", "Content-Length": str(len(body))}
        hdrs, _ = h.sign_headers("PUT", self.target, hdrs, h.UNSIGNED_PAYLOAD)
        self.conn = h.RawConn(server.port, timeout=30)
        self.conn.send(h.request_bytes("PUT", self.target, hdrs, body[:first]))

    def finish(self):
        self.conn.send(self.body[self.first:])
        r = self.conn.read_response()
        self.conn.close()
        assert r.status == 200, (self.target, r)
        assert r.header("etag") == f'"{h.md5_hex(self.body)}"', r.headers
        return r


def race(server, bucket, key, sizes, finish_order):
    """Starts one PUT per size (in order), then finishes them in
    finish_order (indexes); returns (bodies, responses by index)."""
    bodies = [h.content_for(f"{key}/{i}", n) for i, n in enumerate(sizes)]
    puts = []
    try:
        for b in bodies:
            puts.append(SlowPut(server, bucket, key, b, first=max(1, len(b) // 4)))
            time.sleep(SETTLE_S)
        responses = {}
        for i in finish_order:
            responses[i] = puts[i].finish()
            time.sleep(SETTLE_S)
    finally:
        for p in puts:
            p.conn.close()
    return bodies, responses


def check_current(s3, bucket, key, body):
    got = s3.get_object(Bucket=bucket, Key=key)
    assert got["Body"].read() == body, "GET returned a body other than the last completed PUT's"
    etag = f'"{h.md5_hex(body)}"'
    assert got["ETag"] == etag
    assert s3.head_object(Bucket=bucket, Key=key)["ETag"] == etag
    listed = [o for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []) if o["Key"] == key]
    assert [(o["Size"], o["ETag"]) for o in listed] == [(len(body), etag)]


CASES = {
    # sizes of the PUTs in start order, and the order their bodies finish
    "two-small": ([3000, 3000], [1, 0]),
    "two-large": ([3 * h.MIB, 2 * h.MIB + 7], [1, 0]),
    "three": ([40 * h.KIB, 70 * h.KIB, 100 * h.KIB], [2, 1, 0]),
    "three-middle-last": ([40 * h.KIB, 70 * h.KIB, 100 * h.KIB], [0, 2, 1]),
}


@h.modes()
@pytest.mark.parametrize("case", list(CASES))
def test_last_completed_put_wins(mode_server, mode_s3, mode_bucket, case):
    sizes, order = CASES[case]
    bodies, _ = race(mode_server, mode_bucket, "k", sizes, order)
    check_current(mode_s3, mode_bucket, "k", bodies[order[-1]])


@h.modes()
def test_last_completed_put_wins_over_existing(mode_server, mode_s3, mode_bucket):
    """Same, over an object that exists before the race."""
    mode_s3.put_object(Bucket=mode_bucket, Key="k", Body=b"before")
    bodies, _ = race(mode_server, mode_bucket, "k", [5000, 6000], [1, 0])
    check_current(mode_s3, mode_bucket, "k", bodies[0])


@h.modes()
@pytest.mark.parametrize("case", ["two-small", "three"])
def test_last_completed_put_is_latest_version(mode_server, mode_s3, mode_bucket, case):
    mode_s3.put_bucket_versioning(Bucket=mode_bucket,
                                  VersioningConfiguration={"Status": "Enabled"})
    sizes, order = CASES[case]
    bodies, responses = race(mode_server, mode_bucket, "k", sizes, order)
    last = order[-1]
    vids = {i: r.header("x-amz-version-id") for i, r in responses.items()}
    assert all(vids.values()) and len(set(vids.values())) == len(sizes), vids
    check_current(mode_s3, mode_bucket, "k", bodies[last])

    versions = mode_s3.list_object_versions(Bucket=mode_bucket, Prefix="k")["Versions"]
    assert len(versions) == len(sizes), versions
    latest = [v for v in versions if v["IsLatest"]]
    assert [v["VersionId"] for v in latest] == [vids[last]], (vids, versions)
    assert versions[0]["VersionId"] == vids[last], "the latest version is not listed first"
    # Every version keeps its own body, and the listing order (newest first)
    # is the completion order.
    assert [v["VersionId"] for v in versions] == [vids[i] for i in reversed(order)]
    for i, vid in vids.items():
        got = mode_s3.get_object(Bucket=mode_bucket, Key="k", VersionId=vid)["Body"].read()
        assert got == bodies[i]
