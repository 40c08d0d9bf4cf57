"""Security regressions of the S3 handlers (issue 10), in both modes.

Each test names the issue item it covers.  Every test runs against one drive
("sd") and against six erasure-coded drives ("ec") through mode_server, and
expects the same answers from both.
"""

import base64
import hashlib
import urllib.parse

import pytest

import helpers
from helpers import RawConn, parse_error, signed_request, http_request, sign_headers


def alive(srv):
    """The server still answers (and its process still runs)."""
    assert srv.running(), "server process died\n" + srv.log_tail(40)
    r = http_request(srv, "GET", "/_openlake/health")
    assert r.status in (200, 403), r


def raw_head_bytes(srv, data):
    """Sends raw request bytes and returns the response head as bytes."""
    with RawConn(srv.port) as c:
        c.send(data)
        return c._read_until(b"\r\n\r\n")


def signed_raw(srv, method, target, headers=None, body=b""):
    """The bytes of a signed request (for checks on the raw response)."""
    hdrs = {"Host": f"127.0.0.1:{srv.port}"}
    hdrs.update(headers or {})
    if body or method in ("PUT", "POST"):
        hdrs["Content-Length"] = str(len(body))
    hdrs, _ = sign_headers(method, target, hdrs, hashlib.sha256(body).hexdigest())
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    return head.encode("latin-1") + b"\r\n" + body


def unsigned_raw(srv, method, target, headers=None, body=b""):
    hdrs = {"Host": f"127.0.0.1:{srv.port}"}
    hdrs.update(headers or {})
    if body or method in ("PUT", "POST"):
        hdrs["Content-Length"] = str(len(body))
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items())
    return head.encode("latin-1") + b"\r\n" + body


# ---- item 1: an Origin header on an EC server ----


@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD", "DELETE", "OPTIONS", "POST"])
@pytest.mark.parametrize("signed", [True, False])
def test_origin_header_never_crashes(mode_server, mode_bucket, method, signed):
    """Item 1: any request that names a bucket and carries Origin crashed an
    EC server (a settings read through a NULL store).  Every method, signed or
    not, existing or missing bucket: the server answers and stays up."""
    srv = mode_server
    for bucket in (mode_bucket, "no-such-bucket-xyz"):
        for target in (f"/{bucket}/k", f"/{bucket}", f"/{bucket}/k?cors"):
            if signed and method in ("PUT", "DELETE") and target == f"/{bucket}":
                continue  # would create or delete the bucket itself
            hdrs = {"Origin": "http://x.example"}
            if method == "OPTIONS":
                hdrs["Access-Control-Request-Method"] = "GET"
            body = b"abc" if method == "PUT" and target.endswith("/k") else b""
            make = signed_raw if signed else unsigned_raw
            with RawConn(srv.port, timeout=10) as c:
                c.send(make(srv, method, target, hdrs, body))
                r = c.read_response(head_only=method == "HEAD")
            assert 200 <= r.status < 600, r
            if method == "OPTIONS":
                # No CORS configuration anywhere here: every preflight is refused.
                assert r.status == 403, r
                assert "access-control-allow-origin" not in r.headers
                err = parse_error(r.body)
                assert err["Code"] == "AccessForbidden"
                assert err["Message"].startswith("CORSResponse:")
                if bucket == "no-such-bucket-xyz":
                    assert "Bucket not found" in err["Message"]
            alive(srv)


# ---- item 3: response splitting through response-* overrides ----

EVIL = "text/html\r\nSet-Cookie: pwn=1\r\n\r\n<script>alert(1)</script>"


@pytest.mark.parametrize("param", ["response-content-type", "response-content-disposition",
                                   "response-cache-control", "response-content-language",
                                   "response-content-encoding", "response-expires"])
def test_response_override_with_crlf_is_refused(mode_server, mode_s3, mode_bucket, param):
    """Item 3: a response-* override with CR/LF gets 400 InvalidArgument and
    injects nothing, signed or presigned, in both modes."""
    srv = mode_server
    mode_s3.put_object(Bucket=mode_bucket, Key="o", Body=b"hello")
    q = urllib.parse.quote(EVIL, safe="")
    target = f"/{mode_bucket}/o?{param}={q}"
    head = raw_head_bytes(srv, signed_raw(srv, "GET", target))
    assert head.startswith(b"HTTP/1.1 400"), head
    assert b"set-cookie" not in head.lower(), head
    r = signed_request(srv, "GET", target)
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] == "InvalidArgument"

    # A presigned URL, as an application would make for a user-named file.
    pmap = {"response-content-type": "ResponseContentType",
            "response-content-disposition": "ResponseContentDisposition",
            "response-cache-control": "ResponseCacheControl",
            "response-content-language": "ResponseContentLanguage",
            "response-content-encoding": "ResponseContentEncoding",
            "response-expires": None}
    if pmap[param]:
        url = mode_s3.generate_presigned_url(
            "get_object", Params={"Bucket": mode_bucket, "Key": "o", pmap[param]: EVIL},
            ExpiresIn=300)
        _, _, ptarget = helpers.split_url(url)
        head = raw_head_bytes(srv, unsigned_raw(srv, "GET", ptarget))
        assert head.startswith(b"HTTP/1.1 400"), head
        assert b"set-cookie" not in head.lower(), head
    alive(srv)


def test_response_override_plain_still_works(mode_server, mode_s3, mode_bucket):
    """The check refuses control bytes only: a normal override still applies."""
    mode_s3.put_object(Bucket=mode_bucket, Key="o", Body=b"hello")
    target = f"/{mode_bucket}/o?response-content-type=text%2Fplain%3B%20charset%3Dutf-8"
    r = signed_request(mode_server, "GET", target)
    assert r.status == 200, r
    assert r.header("content-type") == "text/plain; charset=utf-8"


def test_stored_header_with_control_byte_is_refused(mode_server, mode_bucket):
    """Item 3 (stored side): a PUT whose metadata holds a control byte is
    refused and stores nothing."""
    srv = mode_server
    for name in ("x-amz-meta-a", "Content-Disposition"):
        data = unsigned_raw(srv, "PUT", f"/{mode_bucket}/ctl", {name: "a\x01b"}, b"x")
        with RawConn(srv.port) as c:
            c.send(data)
            try:
                r = c.read_response()
                assert r.status == 400, r
            except ConnectionError:
                pass
    r = signed_request(srv, "HEAD", f"/{mode_bucket}/ctl")
    assert r.status == 404, r
    alive(srv)


# ---- item 4: stored header injection through CORS ----

CORS_EVIL = (b'<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>'
             b'<AllowedMethod>GET</AllowedMethod>'
             b'<ExposeHeader>x-ok&#13;&#10;Set-Cookie: pwn=1</ExposeHeader>'
             b'</CORSRule></CORSConfiguration>')


def put_cors(srv, bucket, doc):
    md5 = base64.b64encode(hashlib.md5(doc).digest()).decode()
    return signed_request(srv, "PUT", f"/{bucket}?cors", body=doc,
                          headers={"Content-MD5": md5, "Content-Type": "application/xml"})


@pytest.mark.parametrize("field", ["ExposeHeader", "AllowedHeader", "AllowedOrigin"])
def test_cors_value_with_crlf_is_refused(mode_server, mode_bucket, field):
    """Item 4: a CORS value that would reach a response header with CR/LF in
    it is refused at PutBucketCors, and no response then carries the
    attacker's header (anonymous 403s included)."""
    srv = mode_server
    doc = (b'<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>'
           b'<AllowedMethod>GET</AllowedMethod>'
           b'<' + field.encode() + b'>x-ok&#13;&#10;Set-Cookie: pwn=1</' + field.encode() + b'>'
           b'</CORSRule></CORSConfiguration>')
    r = put_cors(srv, mode_bucket, doc)
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] in ("InvalidRequest", "MalformedXML")
    r = signed_request(srv, "GET", f"/{mode_bucket}?cors")
    assert r.status == 404, r  # nothing stored
    for data in (unsigned_raw(srv, "GET", f"/{mode_bucket}/nokey", {"Origin": "http://a"}),
                 signed_raw(srv, "GET", f"/{mode_bucket}/nokey", {"Origin": "http://a"})):
        head = raw_head_bytes(srv, data)
        assert b"set-cookie" not in head.lower(), head
    alive(srv)


# ---- item 6: NUL and invalid UTF-8 in tags, keys and XML ----


@pytest.mark.parametrize("tagging", ["k=%00aws:x", "%00aws%3Ax=v", "k=%FF", "%FF=v", "k=a%00b",
                                     "k=%C2%85", "k=%ED%A0%80", "k=%C0%AF", "k%09=v"])
def test_tagging_header_refuses_nul_and_bad_utf8(mode_server, mode_s3, mode_bucket, tagging):
    """Item 6: NUL passed the character check (strchr matched the set's
    terminator) and %FF stored invalid UTF-8.  Both get 400 InvalidTag and
    store nothing."""
    srv = mode_server
    r = signed_request(srv, "PUT", f"/{mode_bucket}/t", body=b"x",
                       headers={"x-amz-tagging": tagging})
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] == "InvalidTag"
    assert signed_request(srv, "HEAD", f"/{mode_bucket}/t").status == 404


def test_tagging_header_accepts_valid_unicode(mode_server, mode_s3, mode_bucket):
    q = urllib.parse.urlencode({"clé": "välue ü+-=._:/@", "k2": ""})
    mode_s3.put_object(Bucket=mode_bucket, Key="u", Body=b"x", Tagging=q)
    tags = mode_s3.get_object_tagging(Bucket=mode_bucket, Key="u")["TagSet"]
    assert {t["Key"]: t["Value"] for t in tags} == {"clé": "välue ü+-=._:/@", "k2": ""}
    r = signed_request(mode_server, "GET", f"/{mode_bucket}/u")
    assert r.header("x-amz-tagging-count") == "2"


@pytest.mark.parametrize("value", ["a&#133;b", "a&#9;b", "a&#13;&#10;b", "&#xFFFE;"])
def test_put_object_tagging_xml_refuses_controls(mode_server, mode_s3, mode_bucket, value):
    """Item 6, the XML form: C1 controls (U+0085), TAB, CR/LF and
    noncharacters decoded from references are refused."""
    srv = mode_server
    mode_s3.put_object(Bucket=mode_bucket, Key="x", Body=b"x")
    doc = (f"<Tagging><TagSet><Tag><Key>k</Key><Value>{value}</Value></Tag>"
           f"</TagSet></Tagging>").encode()
    r = signed_request(srv, "PUT", f"/{mode_bucket}/x?tagging", body=doc)
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] in ("InvalidTag", "MalformedXML")
    assert mode_s3.get_object_tagging(Bucket=mode_bucket, Key="x")["TagSet"] == []


def test_lifecycle_tag_filter_refuses_controls(mode_server, mode_bucket):
    """Item 6, lifecycle tag filters: a tag no object can carry is refused."""
    srv = mode_server
    for key in ("k&#9;x", "k&#133;", "k&#13;&#10;"):
        doc = (f"<LifecycleConfiguration><Rule><ID>r</ID><Status>Enabled</Status>"
               f"<Filter><Tag><Key>{key}</Key><Value>v</Value></Tag></Filter>"
               f"<Expiration><Days>1</Days></Expiration></Rule></LifecycleConfiguration>").encode()
        md5 = base64.b64encode(hashlib.md5(doc).digest()).decode()
        r = signed_request(srv, "PUT", f"/{mode_bucket}?lifecycle", body=doc,
                           headers={"Content-MD5": md5})
        assert r.status == 400, (key, r)
        assert parse_error(r.body)["Code"] == "InvalidArgument"


@pytest.mark.parametrize("key", ["%FF", "a%C0%80", "a%ED%A0%80b", "x%F4%90%80%80", "t%E2%82"])
def test_key_that_is_not_utf8_is_refused(mode_server, mode_bucket, key):
    """Item 6: object keys are UTF-8 in S3 (400 InvalidURI otherwise); a
    key that is not could not be listed in a UTF-8 XML document."""
    srv = mode_server
    r = signed_request(srv, "PUT", f"/{mode_bucket}/{key}", body=b"x")
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] == "InvalidURI"
    r = signed_request(srv, "GET", f"/{mode_bucket}?list-type=2")
    assert r.status == 200
    assert helpers.xml_find_all(r.body, "Key") == []


def bytes_canonical_query(query):
    """helpers.canonical_query, byte-exact for values that are not UTF-8."""
    pairs = []
    for part in query.split("&"):
        if part:
            k, _, v = part.partition("=")
            pairs.append(tuple(urllib.parse.quote(urllib.parse.unquote_to_bytes(x), safe="-_.~")
                               for x in (k, v)))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def test_xml_echo_of_invalid_utf8_is_well_formed(mode_server, mode_s3, mode_bucket, monkeypatch):
    """Item 6: a listing echoes prefix/delimiter; invalid UTF-8 there used to
    make the document ill-formed.  It parses now."""
    srv = mode_server
    monkeypatch.setattr(helpers, "canonical_query", bytes_canonical_query)
    mode_s3.put_object(Bucket=mode_bucket, Key="ok", Body=b"x")
    for q in ("prefix=%FF", "delimiter=%C3", "prefix=a%80b&delimiter=%ED%A0%80"):
        r = signed_request(srv, "GET", f"/{mode_bucket}?list-type=2&{q}")
        assert r.status == 200, r
        helpers.xml_find_all(r.body, "Prefix")  # raises if not well-formed
        r.body.decode("utf-8")  # and valid UTF-8 throughout


# ---- item 10: metadata limits and serving every stored header ----


def meta_headers(n, value_len):
    return {f"x-amz-meta-k{i:02d}": ("v" * value_len) for i in range(n)}


def test_sixty_meta_headers_all_come_back(mode_server, mode_bucket):
    """Item 10: GET returned only 30 of 60 stored x-amz-meta-* headers."""
    srv = mode_server
    hdrs = meta_headers(60, 25)  # 60 * (3 + 25) = 1680 bytes < 2 KiB
    r = signed_request(srv, "PUT", f"/{mode_bucket}/m", body=b"body", headers=hdrs)
    assert r.status == 200, r
    for method in ("GET", "HEAD"):
        with RawConn(srv.port) as c:
            c.send(signed_raw(srv, method, f"/{mode_bucket}/m"))
            r = c.read_response(head_only=method == "HEAD")
        assert r.status == 200, r
        got = {k: v for k, v in r.headers.items() if k.startswith("x-amz-meta-")}
        assert got == hdrs, (method, len(got))


@pytest.mark.parametrize("op", ["put", "multipart", "copy"])
def test_user_metadata_over_2kib_is_refused(mode_server, mode_s3, mode_bucket, op):
    """Item 10: user metadata (names without the prefix, plus values) over
    2 KiB gets 400 MetadataTooLarge, before any body is read, and nothing is
    stored; exactly 2 KiB is accepted."""
    srv = mode_server
    ok = {"x-amz-meta-k": "v" * 2047}       # 1 + 2047 = 2048
    big = {"x-amz-meta-k": "v" * 2048}      # 2049
    if op == "copy":
        mode_s3.put_object(Bucket=mode_bucket, Key="src", Body=b"data")

    def attempt(hdrs, key):
        if op == "put":
            return signed_request(srv, "PUT", f"/{mode_bucket}/{key}", body=b"x", headers=hdrs)
        if op == "multipart":
            return signed_request(srv, "POST", f"/{mode_bucket}/{key}?uploads", headers=hdrs)
        h = dict(hdrs)
        h["x-amz-copy-source"] = f"/{mode_bucket}/src"
        h["x-amz-metadata-directive"] = "REPLACE"
        return signed_request(srv, "PUT", f"/{mode_bucket}/{key}", headers=h)

    r = attempt(big, "big")
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] == "MetadataTooLarge"
    assert signed_request(srv, "HEAD", f"/{mode_bucket}/big").status == 404
    if op == "multipart":
        ups = mode_s3.list_multipart_uploads(Bucket=mode_bucket).get("Uploads", [])
        assert [u for u in ups if u["Key"] == "big"] == []
    r = attempt(ok, "fits")
    assert r.status == 200, r


def test_put_with_large_body_and_big_metadata_refused_before_body(mode_server, mode_bucket):
    """Item 10: the refusal comes at the head: a client that announces a
    body and waits for 100-continue gets the 400 without sending it."""
    srv = mode_server
    hdrs = {"x-amz-meta-k": "v" * 2100, "Expect": "100-continue"}
    hdrs["Host"] = f"127.0.0.1:{srv.port}"
    hdrs["Content-Length"] = str(64 * 1024 * 1024)
    hdrs, _ = sign_headers("PUT", f"/{mode_bucket}/early", hdrs, helpers.UNSIGNED_PAYLOAD)
    head = f"PUT /{mode_bucket}/early HTTP/1.1\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    with RawConn(srv.port, timeout=10) as c:
        c.send(head.encode())
        r = c.read_response()
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] == "MetadataTooLarge"


@pytest.mark.parametrize("size", [7900, 8100])
def test_long_content_disposition_round_trips(mode_server, mode_bucket, size):
    """Item 10: a ~8,000-byte Content-Disposition was stored but the object
    could not be read (GET/HEAD closed without a response): what is stored
    must be served.  8,100 bytes is near the most the 8 KiB metadata blob
    holds.  Needs the HTTP helper's response-head fix as well (the writer's
    head buffer must hold every header a request can store)."""
    srv = mode_server
    cd = "attachment; filename=\"" + "a" * (size - 23) + "\""
    assert len(cd) == size
    r = signed_request(srv, "PUT", f"/{mode_bucket}/cd", body=b"x",
                       headers={"Content-Disposition": cd})
    assert r.status == 200, r
    for method in ("GET", "HEAD"):
        with RawConn(srv.port) as c:
            c.send(signed_raw(srv, method, f"/{mode_bucket}/cd"))
            r = c.read_response(head_only=method == "HEAD")
        assert r.status == 200, r
        assert r.header("content-disposition") == cd


# ---- CORS: the per-thread cache and the document cap (one drive) ----


def cors_doc(origin, expose="x-a"):
    return (f"<CORSConfiguration><CORSRule><AllowedOrigin>{origin}</AllowedOrigin>"
            f"<AllowedMethod>GET</AllowedMethod><ExposeHeader>{expose}</ExposeHeader>"
            f"</CORSRule></CORSConfiguration>").encode()


def origin_view(srv, bucket, origin, conns=8):
    """The Access-Control-Allow-Origin each of several fresh connections
    sees (spread over the server's loop threads), and the expose list."""
    seen = set()
    for _ in range(conns):
        with RawConn(srv.port) as c:
            # Two requests per connection: the second is served from the cache.
            for _ in range(2):
                c.send(unsigned_raw(srv, "GET", f"/{bucket}/nokey", {"Origin": origin}))
                r = c.read_response()
                seen.add((r.header("access-control-allow-origin"),
                          r.header("access-control-expose-headers")))
    return seen


def test_cors_cache_invalidation_on_every_thread(mode_server, mode_s3, mode_bucket):
    srv = mode_server
    assert srv.threads >= 2
    assert origin_view(srv, mode_bucket, "http://a") == {(None, None)}
    assert put_cors(srv, mode_bucket, cors_doc("http://a", "x-one")).status == 200
    assert origin_view(srv, mode_bucket, "http://a") == {("http://a", "x-one")}
    assert put_cors(srv, mode_bucket, cors_doc("http://b", "x-two")).status == 200
    assert origin_view(srv, mode_bucket, "http://a") == {(None, None)}
    assert origin_view(srv, mode_bucket, "http://b") == {("http://b", "x-two")}
    assert signed_request(srv, "DELETE", f"/{mode_bucket}?cors").status == 204
    assert origin_view(srv, mode_bucket, "http://b") == {(None, None)}
    # Delete the bucket and make it again: the old configuration is gone.
    assert put_cors(srv, mode_bucket, cors_doc("http://c", "x-three")).status == 200
    assert origin_view(srv, mode_bucket, "http://c") == {("http://c", "x-three")}
    mode_s3.delete_bucket(Bucket=mode_bucket)
    mode_s3.create_bucket(Bucket=mode_bucket)
    assert origin_view(srv, mode_bucket, "http://c") == {(None, None)}


def test_cors_document_cap(mode_server, mode_bucket):
    """A CORS document over 64 KiB (Amazon S3's limit) is refused."""
    srv = mode_server
    rule = ("<CORSRule><AllowedOrigin>http://o.example</AllowedOrigin>"
            "<AllowedMethod>GET</AllowedMethod><AllowedHeader>h</AllowedHeader></CORSRule>")
    body = "<CORSConfiguration>" + rule * 90
    pad = "<CORSRule><AllowedOrigin>" + "p" * (64 * 1024 + 1 - len(body) - 60) + \
        "</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule>"
    doc = (body + pad + "</CORSConfiguration>").encode()
    assert len(doc) > 64 * 1024
    r = put_cors(srv, mode_bucket, doc)
    assert r.status == 400, r
    assert parse_error(r.body)["Code"] == "MalformedXML"
    assert signed_request(srv, "GET", f"/{mode_bucket}?cors").status == 404
    alive(srv)
