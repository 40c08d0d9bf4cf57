"""Bucket CORS: Put/Get/DeleteBucketCors, OPTIONS preflight, and the CORS
headers of actual requests (a browser-like flow with raw HTTP)."""

import pytest
from botocore.exceptions import ClientError

import helpers as h

RULES = [
    {
        "ID": "app",
        "AllowedOrigins": ["https://app.example.com", "https://*.example.org"],
        "AllowedMethods": ["GET", "PUT"],
        "AllowedHeaders": ["content-type", "x-amz-*"],
        "ExposeHeaders": ["ETag", "x-amz-request-id"],
        "MaxAgeSeconds": 600,
    },
    {
        "AllowedOrigins": ["*"],
        "AllowedMethods": ["HEAD"],
    },
]


def preflight(server, target, origin, method, headers=None):
    hdrs = {"Origin": origin, "Access-Control-Request-Method": method}
    if headers:
        hdrs["Access-Control-Request-Headers"] = headers
    return h.http_request(server, "OPTIONS", target, hdrs)


@pytest.fixture
def cors_bucket(s3, bucket):
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    return bucket


def test_put_get_delete(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_cors(Bucket=bucket)
    assert h.error_code(e.value) == "NoSuchCORSConfiguration"
    assert h.http_status(e.value) == 404

    r = s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": RULES})
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    got = s3.get_bucket_cors(Bucket=bucket)["CORSRules"]
    assert len(got) == 2
    assert got[0]["ID"] == "app"
    assert got[0]["AllowedOrigins"] == RULES[0]["AllowedOrigins"]
    assert got[0]["AllowedMethods"] == ["GET", "PUT"]
    assert got[0]["AllowedHeaders"] == RULES[0]["AllowedHeaders"]
    assert got[0]["ExposeHeaders"] == RULES[0]["ExposeHeaders"]
    assert got[0]["MaxAgeSeconds"] == 600
    assert got[1]["AllowedOrigins"] == ["*"] and got[1]["AllowedMethods"] == ["HEAD"]

    d = s3.delete_bucket_cors(Bucket=bucket)
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.get_bucket_cors(Bucket=bucket)
    assert h.error_code(e.value) == "NoSuchCORSConfiguration"


def test_no_such_bucket(s3):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_cors(Bucket=h.unique_bucket("none"))
    assert h.error_code(e.value) == "NoSuchBucket"


@pytest.mark.parametrize("rules, code", [
    ([{"AllowedOrigins": ["*"], "AllowedMethods": ["PATCH"]}], "InvalidRequest"),
    ([{"AllowedOrigins": ["https://*.*.example.com"], "AllowedMethods": ["GET"]}],
     "InvalidRequest"),
    ([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"], "AllowedHeaders": ["a*b*"]}],
     "InvalidRequest"),
    ([{"AllowedOrigins": ["*"], "AllowedMethods": ["GET"]}] * 101, "MalformedXML"),
])
def test_invalid(s3, bucket, rules, code):
    with pytest.raises(ClientError) as e:
        s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})
    assert h.error_code(e.value) == code
    assert h.http_status(e.value) == 400


@pytest.mark.parametrize("doc", [
    b"<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule>"
    b"</CORSConfiguration>",  # no origin
    b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule>"
    b"</CORSConfiguration>",  # no method
    b"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>"
    b"<AllowedMethod>GET</AllowedMethod><Bogus>1</Bogus></CORSRule></CORSConfiguration>",
    b"<CORSConfiguration/>",
    b"<CORSConfiguration><CORSRule>",
])
def test_malformed(server, bucket, doc):
    r = h.signed_request(server, "PUT", f"/{bucket}?cors", body=doc)
    assert r.status == 400, r
    assert h.parse_error(r.body)["Code"] == "MalformedXML"


def test_preflight_allowed(server, cors_bucket):
    r = preflight(server, f"/{cors_bucket}/some/key", "https://app.example.com", "PUT",
                  "Content-Type, X-Amz-Meta-Foo")
    assert r.status == 200, r
    assert r.header("access-control-allow-origin") == "https://app.example.com"
    assert r.header("access-control-allow-methods") == "GET, PUT"
    assert r.header("access-control-allow-headers") == "Content-Type, X-Amz-Meta-Foo"
    assert r.header("access-control-max-age") == "600"
    assert r.header("access-control-expose-headers") == "ETag, x-amz-request-id"
    assert r.header("access-control-allow-credentials") == "true"
    assert "Origin" in r.header("vary")

    # The wildcard origin of the first rule.
    r = preflight(server, f"/{cors_bucket}/k", "https://sub.example.org", "GET")
    assert r.status == 200
    assert r.header("access-control-allow-origin") == "https://sub.example.org"

    # The second rule: any origin, HEAD only, answered with "*".
    r = preflight(server, f"/{cors_bucket}/k", "http://elsewhere.test", "HEAD")
    assert r.status == 200
    assert r.header("access-control-allow-origin") == "*"
    assert r.header("access-control-allow-credentials") is None
    # Preflights need no authentication, also on the bucket itself.
    r = preflight(server, f"/{cors_bucket}", "https://app.example.com", "GET")
    assert r.status == 200


@pytest.mark.parametrize("origin, method, headers", [
    ("https://evil.example.com", "GET", None),        # origin not listed
    ("https://app.example.com", "DELETE", None),      # method not allowed
    ("https://app.example.com", "PUT", "authorization"),  # header not allowed
    ("http://elsewhere.test", "GET", None),           # "*" rule is HEAD only
    ("https://example.org", "GET", None),             # wildcard needs the "."
])
def test_preflight_denied(server, cors_bucket, origin, method, headers):
    r = preflight(server, f"/{cors_bucket}/k", origin, method, headers)
    assert r.status == 403, r
    err = h.parse_error(r.body)
    assert err["Code"] == "AccessForbidden"
    assert err["Message"].startswith("CORSResponse: This CORS request is not allowed")
    assert r.header("access-control-allow-origin") is None


def test_preflight_without_config_or_bucket(server, bucket):
    r = preflight(server, f"/{bucket}/k", "https://app.example.com", "GET")
    assert r.status == 403
    assert h.parse_error(r.body)["Code"] == "AccessForbidden"
    r = preflight(server, f"/{h.unique_bucket('gone')}/k", "https://app.example.com", "GET")
    assert r.status == 403
    assert h.parse_error(r.body)["Code"] == "AccessForbidden"


def test_preflight_bad_request(server, cors_bucket):
    r = h.http_request(server, "OPTIONS", f"/{cors_bucket}/k",
                       {"Access-Control-Request-Method": "GET"})
    assert r.status == 400
    r = h.http_request(server, "OPTIONS", f"/{cors_bucket}/k",
                       {"Origin": "https://app.example.com"})
    assert r.status == 400


def test_browser_flow(server, s3, cors_bucket):
    """Preflight, then the actual signed PUT and GET with Origin, as a
    browser would send them."""
    origin = "https://app.example.com"
    key = "upload.bin"
    r = preflight(server, f"/{cors_bucket}/{key}", origin, "PUT",
                  "authorization,content-type,x-amz-content-sha256,x-amz-date")
    # "authorization" is not in the rule's AllowedHeader list.
    assert r.status == 403
    s3.put_bucket_cors(Bucket=cors_bucket, CORSConfiguration={"CORSRules": [
        dict(RULES[0], AllowedHeaders=["*"])]})
    r = preflight(server, f"/{cors_bucket}/{key}", origin, "PUT",
                  "authorization,content-type,x-amz-content-sha256,x-amz-date")
    assert r.status == 200
    assert r.header("access-control-allow-origin") == origin

    put = h.signed_request(server, "PUT", f"/{cors_bucket}/{key}", body=b"hello",
                           headers={"Origin": origin, "Content-Type": "text/plain"})
    assert put.status == 200, put
    assert put.header("access-control-allow-origin") == origin
    assert put.header("access-control-expose-headers") == "ETag, x-amz-request-id"
    assert put.header("etag")

    get = h.signed_request(server, "GET", f"/{cors_bucket}/{key}", headers={"Origin": origin})
    assert get.status == 200 and get.body == b"hello"
    assert get.header("access-control-allow-origin") == origin
    assert get.header("access-control-expose-headers") == "ETag, x-amz-request-id"

    # Error responses carry the headers too, so the page can read the error.
    miss = h.signed_request(server, "GET", f"/{cors_bucket}/missing", headers={"Origin": origin})
    assert miss.status == 404
    assert miss.header("access-control-allow-origin") == origin

    # XML responses (a listing).
    lst = h.signed_request(server, "GET", f"/{cors_bucket}?list-type=2",
                           headers={"Origin": origin})
    assert lst.status == 200
    assert lst.header("access-control-allow-origin") == origin

    # DELETE is not allowed by the rule: no CORS headers (the browser blocks).
    d = h.signed_request(server, "DELETE", f"/{cors_bucket}/{key}", headers={"Origin": origin})
    assert d.status == 204
    assert d.header("access-control-allow-origin") is None

    # Another origin: no CORS headers; no Origin: none either.
    other = h.signed_request(server, "GET", f"/{cors_bucket}/missing",
                             headers={"Origin": "https://evil.test"})
    assert other.header("access-control-allow-origin") is None
    plain = h.signed_request(server, "GET", f"/{cors_bucket}/missing")
    assert plain.header("access-control-allow-origin") is None


def test_config_change_applies_at_once(server, s3, cors_bucket):
    origin = "https://app.example.com"
    assert preflight(server, f"/{cors_bucket}/k", origin, "GET").status == 200
    s3.delete_bucket_cors(Bucket=cors_bucket)
    assert preflight(server, f"/{cors_bucket}/k", origin, "GET").status == 403
