"""Anonymous requests (no Authorization, no presigned query) to every route the
router knows, in both modes: one drive ("sd") and erasure-coded 4+2 ("ec").

src/s3/router.c picks a handler from the method, the presence of bucket and
key, and the sub-resource parameters; /_openlake/ paths go to admin_route
(health, metrics, and the EC admin API).  Every method x target x
sub-resource below is sent with raw http.client, with and without an
Origin header (CORS headers are added to error answers too), and OPTIONS
preflights with Access-Control-Request-Method.  Each one must get a clean,
well-formed answer:

- a status line (never a dropped or reset connection), status < 600;
- for 4xx/5xx with a body, an XML <Error> document with a <Code>;
- no anonymous S3 request other than a preflight succeeds (2xx): there are no
  public buckets, so every one of them is denied or refused.

Afterwards the server process is still running, a signed request works,
and the bucket and object the anonymous requests aimed at are unchanged.
"""

import http.client
import xml.etree.ElementTree as ET

import pytest

import helpers as h

ORIGIN = "http://a.example"
KEY = "dir/obj.txt"
BODY = b"anonymous routes\n"

METHODS = ["GET", "HEAD", "PUT", "POST", "DELETE", "PATCH"]

# Every sub-resource the router (or the EC dispatcher) looks at, the ones S3
# has that OpenLake lacks (?acl, ?policy, ?attributes...), a listing
# argument, and an unknown one.
SUBRESOURCES = [
    "", "acl", "cors", "lifecycle", "location", "tagging", "versioning", "versions",
    "uploads", "uploadId=2f", "partNumber=1", "uploadId=2f&partNumber=1", "delete",
    "policy", "attributes", "versionId=null", "list-type=2&prefix=dir/", "website",
    "notification", "x-id=PutObject", "no-such-subresource=1",
]

ADMIN_PATHS = [
    "/_openlake/health", "/_openlake/metrics", "/_openlake/admin/info",
    "/_openlake/admin/heal", "/_openlake/admin/heal/status", "/_openlake/admin/drive?index=0&state=offline",
    "/_openlake/admin/", "/_openlake/admin/nope", "/_openlake/nope", "/_openlake/",
    "/metrics", "/health", "/minio/health/live",
]


def targets(bucket, cors_bucket):
    """Paths of the service, existing buckets (one with a CORS configuration
    that allows ORIGIN, where the mode has bucket CORS) and a missing one,
    existing and missing keys."""
    out = ["/"]
    for b in (bucket, cors_bucket):
        out += [f"/{b}", f"/{b}/", f"/{b}/{KEY}", f"/{b}/nope"]
    return out + ["/no-such-bucket-anon", "/no-such-bucket-anon/k"]


def send(server, method, target, headers, body=None):
    """One anonymous request on a fresh connection.  Returns (status,
    headers, body) or raises what http.client raised (a dropped
    connection is a failure of the test)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=15)
    try:
        hdrs = dict(headers)
        if body is not None:
            hdrs["Content-Length"] = str(len(body))
        conn.request(method, target, body=body, headers=hdrs)
        r = conn.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        conn.close()


def problem(method, target, status, hdrs, body, expect_denied):
    """What is wrong with one answer, or None."""
    if not 100 <= status < 600:
        return f"status {status}"
    if status >= 400 and body and method != "HEAD":
        try:
            root = ET.fromstring(body)
        except ET.ParseError as e:
            return f"{status} with a body that is not XML ({e}): {body[:200]!r}"
        if root.tag.split("}")[-1] != "Error":
            return f"{status} with root <{root.tag}>: {body[:200]!r}"
        code = [c.text for c in root if c.tag.split("}")[-1] == "Code"]
        if not code or not code[0]:
            return f"{status} <Error> without a <Code>: {body[:200]!r}"
        if "xml" not in hdrs.get("content-type", ""):
            return f"{status} <Error> with Content-Type {hdrs.get('content-type')!r}"
    if expect_denied and status < 300:
        return f"anonymous request succeeded with {status}: {body[:200]!r}"
    if "content-length" in hdrs and method != "HEAD" and int(hdrs["content-length"]) != len(body):
        return f"Content-Length {hdrs['content-length']} but {len(body)} bytes"
    return None


def request_plan(bucket, cors_bucket):
    """(method, target, headers, body, expect_denied) of every anonymous
    request of the test."""
    plan = []
    for path in targets(bucket, cors_bucket):
        for sub in SUBRESOURCES:
            target = path + ("?" + sub if sub else "")
            for method in METHODS:
                body = b"<x/>" if method in ("PUT", "POST") else None
                for origin in (None, ORIGIN):
                    hdrs = {"Origin": origin} if origin else {}
                    plan.append((method, target, hdrs, body, True))
            # CORS preflights: no credentials by design; they answer from the
            # bucket's CORS configuration (403 without one), never 5xx.
            for acrm in ("GET", "PUT", "DELETE", "POST", "PATCH"):
                plan.append(("OPTIONS", target,
                             {"Origin": ORIGIN, "Access-Control-Request-Method": acrm,
                              "Access-Control-Request-Headers": "content-type,x-amz-date"},
                             None, False))
            plan.append(("OPTIONS", target, {}, None, False))
            plan.append(("OPTIONS", target, {"Origin": ORIGIN}, None, False))
    for path in ADMIN_PATHS:
        for method in METHODS + ["OPTIONS"]:
            for origin in (None, ORIGIN):
                hdrs = {"Origin": origin} if origin else {}
                if method == "OPTIONS" and origin:
                    hdrs["Access-Control-Request-Method"] = "GET"
                body = b"{}" if method in ("PUT", "POST") else None
                # health and metrics are not public by default, and the admin
                # API needs a signature: all denied.
                plan.append((method, path, hdrs, body, method != "OPTIONS"))
    return plan


@pytest.fixture(scope="module")
def target_bucket(mode_s3):
    name = h.unique_bucket("anon")
    mode_s3.create_bucket(Bucket=name)
    mode_s3.put_object(Bucket=name, Key=KEY, Body=BODY)
    return name


@pytest.fixture(scope="module")
def cors_bucket(mode_server, mode_s3):
    """A bucket whose CORS rules allow ORIGIN (every method, any header), so
    that preflights succeed and denied answers carry CORS headers.  With EC
    drives PutBucketCors is not implemented yet: the bucket stays plain."""
    name = h.unique_bucket("anoncors")
    mode_s3.create_bucket(Bucket=name)
    mode_s3.put_object(Bucket=name, Key=KEY, Body=BODY)
    rules = [{"AllowedOrigins": [ORIGIN], "AllowedMethods": ["GET", "PUT", "POST", "DELETE",
                                                             "HEAD"],
              "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"]}]
    if mode_server.mode == "sd":
        mode_s3.put_bucket_cors(Bucket=name, CORSConfiguration={"CORSRules": rules})
    return name


def test_anonymous_requests_get_clean_answers(mode_server, mode_s3, target_bucket, cors_bucket):
    plan = request_plan(target_bucket, cors_bucket)
    failures = []
    for method, target, hdrs, body, denied in plan:
        try:
            status, rh, data = send(mode_server, method, target, hdrs, body)
        except (OSError, http.client.HTTPException) as e:
            failures.append(f"{method} {target} {hdrs}: connection error {e!r}")
            if not mode_server.running():
                break
            continue
        why = problem(method, target, status, rh, data, denied)
        if why:
            failures.append(f"{method} {target} {hdrs}: {why}")
    assert mode_server.running(), "openlake exited:\n" + mode_server.log_tail()
    assert not failures, (f"{len(failures)} of {len(plan)} anonymous requests got a bad "
                          "answer:\n" + "\n".join(failures[:60]))


def test_denied_answers_are_access_denied(mode_server, target_bucket):
    """The plain S3 operations on an existing bucket and object, and the
    non-public health and metrics paths, answer 403 AccessDenied to
    anonymous callers, with or without an Origin."""
    for method, target in [("GET", "/"), ("GET", f"/{target_bucket}"),
                           ("GET", f"/{target_bucket}/{KEY}"),
                           ("PUT", f"/{target_bucket}/{KEY}"),
                           ("DELETE", f"/{target_bucket}/{KEY}"),
                           ("DELETE", f"/{target_bucket}"),
                           ("POST", f"/{target_bucket}?delete"),
                           ("GET", "/_openlake/metrics"),
                           ("GET", "/_openlake/health")]:
        for origin in (None, ORIGIN):
            hdrs = {"Origin": origin} if origin else {}
            body = b"x" if method in ("PUT", "POST") else None
            status, _, data = send(mode_server, method, target, hdrs, body)
            assert status == 403, (method, target, status, data[:300])
            assert h.parse_error(data)["Code"] == "AccessDenied", (method, target, data[:300])
    # The admin API exists with EC drives only; one drive has no such path.
    status, _, data = send(mode_server, "GET", "/_openlake/admin/info", {})
    want = (403, "AccessDenied") if mode_server.mode == "ec" else (400, "InvalidRequest")
    assert (status, h.parse_error(data)["Code"]) == want, data[:300]


def test_preflight_of_cors_bucket(mode_server, cors_bucket):
    """The preflight the sweep sent to the CORS bucket is allowed (SD; the EC
    bucket has no CORS configuration, so it is refused with 403)."""
    r = h.http_request(mode_server, "OPTIONS", f"/{cors_bucket}/{KEY}",
                       {"Origin": ORIGIN, "Access-Control-Request-Method": "PUT"})
    if mode_server.mode == "sd":
        assert r.status == 200, r
        assert r.header("access-control-allow-origin") == ORIGIN
    else:
        assert r.status == 403 and h.parse_error(r.body)["Code"] == "AccessForbidden", r


def test_server_still_serves_after_anonymous_requests(mode_server, mode_s3, target_bucket,
                                                      cors_bucket):
    """Runs after the sweep (same module server): nothing anonymous changed
    the data, and signed requests work."""
    assert mode_server.running(), "openlake exited:\n" + mode_server.log_tail()
    for b in (target_bucket, cors_bucket):
        got = mode_s3.get_object(Bucket=b, Key=KEY)["Body"].read()
        assert got == BODY
        keys = [o["Key"] for o in mode_s3.list_objects_v2(Bucket=b).get("Contents", [])]
        assert keys == [KEY]
        assert b in [x["Name"] for x in mode_s3.list_buckets()["Buckets"]]
    r = h.signed_request(mode_server, "GET", f"/{target_bucket}/{KEY}")
    assert r.status == 200 and r.body == BODY
    mode_s3.put_object(Bucket=target_bucket, Key="after", Body=b"ok")
    assert mode_s3.get_object(Bucket=target_bucket, Key="after")["Body"].read() == b"ok"
