"""Checks the test helpers themselves (no server needed): the SigV4 signer and
the aws-chunked body builder against the examples in the AWS documentation
and against botocore, so that an auth test failure means a server bug."""

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import helpers as h

EX_ACCESS = "AKIAIOSFODNN7EXAMPLE"
EX_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
EX_DATE = "20130524T000000Z"


def test_sign_headers_matches_aws_get_object_example():
    # "Example: GET Object" of the SigV4 header-based authentication docs.
    hdrs = {"Host": "examplebucket.s3.amazonaws.com", "Range": "bytes=0-9"}
    out, sig = h.sign_headers("GET", "/test.txt", hdrs, h.EMPTY_SHA256, EX_ACCESS, EX_SECRET,
                              amz_date=EX_DATE)
    assert sig == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
    assert "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date" in out["Authorization"]


def test_chunked_signatures_match_aws_example():
    # "Example: PUT Object" of the SigV4 streaming (aws-chunked) docs:
    # 66560 bytes of 'a' in a 65536-byte chunk and a 1024-byte chunk.
    data = b"a" * 66560
    hdrs = {
        "Host": "s3.amazonaws.com",
        "x-amz-storage-class": "REDUCED_REDUNDANCY",
        "Content-Encoding": "aws-chunked",
        "x-amz-decoded-content-length": "66560",
        "Content-Length": "66824",
    }
    _, seed = h.sign_headers("PUT", "/examplebucket/chunkObject.txt", hdrs, h.STREAMING_PAYLOAD,
                             EX_ACCESS, EX_SECRET, amz_date=EX_DATE)
    assert seed == "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
    body = h.aws_chunked_body(data, seed, EX_DATE, 65536, EX_SECRET)
    assert len(body) == 66824 == h.aws_chunked_length(66560, 65536)
    sig1 = b"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
    sig2 = b"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
    sig3 = b"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
    assert body.startswith(b"10000;chunk-signature=" + sig1 + b"\r\n")
    assert b"\r\n400;chunk-signature=" + sig2 + b"\r\n" in body
    assert body.endswith(b"\r\n0;chunk-signature=" + sig3 + b"\r\n\r\n")


def test_sign_headers_matches_botocore():
    url = "http://127.0.0.1:9000/bkt/a%20b/c?partNumber=2&uploadId=x%2By"
    req = AWSRequest(method="PUT", url=url, data=b"hello", headers={"Content-Type": "text/plain"})
    req.headers["x-amz-content-sha256"] = h.sha256(b"hello")
    S3SigV4Auth(Credentials(h.ACCESS_KEY, h.SECRET_KEY), "s3", "us-east-1").add_auth(req)
    amz_date = req.headers["X-Amz-Date"]
    auth = req.headers["Authorization"]
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    # Sign the same headers botocore signed.
    hdrs = {"Host": "127.0.0.1:9000", "Content-Type": "text/plain"}
    hdrs = {k: v for k, v in hdrs.items() if k.lower() in signed}
    _, sig = h.sign_headers("PUT", "/bkt/a%20b/c?partNumber=2&uploadId=x%2By", hdrs,
                            h.sha256(b"hello"), amz_date=amz_date)
    assert auth.endswith("Signature=" + sig)


def test_multipart_etag_format():
    assert h.multipart_etag([b"a", b"b"]).endswith('-2"')
    assert h.content_for("k", 10) == h.content_for("k", 10) != h.content_for("j", 10)
