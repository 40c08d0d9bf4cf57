#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_router (tests/fuzz/corpus/router/).

Each file: one mode byte ('0'..'7', see fuzz_router.c: bit 1 EC, bit 2
signed by the harness, bit 4 split delivery), then pipelined HTTP/1.1
requests.  Every file creates the bucket it uses (the harness empties the
backend after each input).  UPLOADID in a query stands for the last upload
id of the connection; part ETags are the MD5 of the part's bytes.

    python3 tests/fuzz/gen_router_corpus.py tests/fuzz/corpus/router
"""
import base64
import hashlib
import os
import sys

HOST = "Host: fuzz.local\r\n"


def req(method, path, headers=(), body=b"", cl=True):
    if isinstance(headers, (str, bytes)):  # req(m, p, body)
        headers, body = (), headers
    if isinstance(body, str):
        body = body.encode()
    s = f"{method} {path} HTTP/1.1\r\n{HOST}"
    for h in headers:
        s += h + "\r\n"
    if cl and (body or method in ("PUT", "POST")):
        s += f"Content-Length: {len(body)}\r\n"
    return (s + "\r\n").encode() + body


def md5_b64(s):
    return base64.b64encode(hashlib.md5(s.encode()).digest()).decode()


def etag(b):
    return '"' + hashlib.md5(b).hexdigest() + '"'


def main(out):
    os.makedirs(out, exist_ok=True)

    def w(name, mode, *reqs):
        with open(os.path.join(out, name), "wb") as f:
            f.write(mode.encode() + b"".join(reqs))

    mk = req("PUT", "/bkt")
    # The main flows on both backends, signed: '3' EC, '2' one drive.
    for m, suf in (("3", "ec"), ("2", "one")):
        w(f"bucket_create_list_{suf}", m, mk, req("GET", "/"), req("HEAD", "/bkt"),
          req("GET", "/bkt?list-type=2&prefix=a&delimiter=/"), req("GET", "/bkt?location"),
          req("GET", "/bkt?max-keys=1&marker=a"), req("DELETE", "/bkt"))
        w(f"put_get_range_{suf}", m, mk,
          req("PUT", "/bkt/a/b.txt", ["Content-Type: text/plain", "x-amz-meta-color: blue"],
              "hello, object layer"),
          req("GET", "/bkt/a/b.txt", ["Range: bytes=2-8"]), req("HEAD", "/bkt/a/b.txt"),
          req("GET", "/bkt/a/b.txt", ["Range: bytes=-4"]),
          req("GET", "/bkt/a/b.txt", ["Range: bytes=100-"]),
          req("GET", "/bkt/a/b.txt", ["If-None-Match: *"]), req("DELETE", "/bkt/a/b.txt"),
          req("GET", "/bkt/a/b.txt"))
        p1, p2 = b"abcdefgh", b"ijkl"
        cmpl = ("<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
                "<Part><PartNumber>2</PartNumber><ETag>%s</ETag></Part></CompleteMultipartUpload>"
                % (etag(p1), etag(p2)))
        w(f"multipart_{suf}", m, mk, req("POST", "/bkt/mp?uploads"),
          req("PUT", "/bkt/mp?partNumber=1&uploadId=UPLOADID", p1),
          req("PUT", "/bkt/mp?partNumber=2&uploadId=UPLOADID", p2),
          req("GET", "/bkt/mp?uploadId=UPLOADID"), req("GET", "/bkt?uploads"),
          req("POST", "/bkt/mp?uploadId=UPLOADID", cmpl), req("GET", "/bkt/mp?partNumber=2"),
          req("POST", "/bkt/mp2?uploads"), req("DELETE", "/bkt/mp2?uploadId=UPLOADID"))
        w(f"copy_{suf}", m, mk, req("PUT", "/bkt/src", "copy me please"),
          req("PUT", "/bkt/dst", ["x-amz-copy-source: /bkt/src",
                                  "x-amz-metadata-directive: REPLACE", "x-amz-meta-k: v"]),
          req("GET", "/bkt/dst"),
          req("PUT", "/bkt/dst2", ["x-amz-copy-source: bkt/src",
                                   'x-amz-copy-source-if-match: "nope"']))
        w(f"tagging_{suf}", m, mk, req("PUT", "/bkt/t", ["x-amz-tagging: a=1&b=2"], "tagged"),
          req("GET", "/bkt/t?tagging"),
          req("PUT", "/bkt/t?tagging",
              "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>"),
          req("DELETE", "/bkt/t?tagging"),
          req("PUT", "/bkt?tagging",
              "<Tagging><TagSet><Tag><Key>env</Key><Value>fuzz</Value></Tag></TagSet></Tagging>"),
          req("GET", "/bkt?tagging"))
        w(f"versioning_{suf}", m, mk,
          req("PUT", "/bkt?versioning",
              "<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>"),
          req("PUT", "/bkt/v", "one"), req("PUT", "/bkt/v", "two"), req("DELETE", "/bkt/v"),
          req("GET", "/bkt?versions"), req("GET", "/bkt/v?versionId=null"),
          req("GET", "/bkt?versioning"),
          req("PUT", "/bkt?versioning",
              "<VersioningConfiguration><Status>Suspended</Status></VersioningConfiguration>"),
          req("PUT", "/bkt/v", "three"), req("GET", "/bkt?versions&key-marker=v"))
        w(f"cors_{suf}", m, mk,
          req("PUT", "/bkt?cors",
              "<CORSConfiguration><CORSRule><AllowedOrigin>http://a.example</AllowedOrigin>"
              "<AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod>"
              "<AllowedHeader>*</AllowedHeader><ExposeHeader>ETag</ExposeHeader>"
              "<MaxAgeSeconds>60</MaxAgeSeconds></CORSRule></CORSConfiguration>"),
          req("OPTIONS", "/bkt/x", ["Origin: http://a.example",
                                    "Access-Control-Request-Method: PUT",
                                    "Access-Control-Request-Headers: content-type"]),
          req("OPTIONS", "/bkt/x", ["Origin: http://evil.example",
                                    "Access-Control-Request-Method: DELETE"]),
          req("PUT", "/bkt/x", ["Origin: http://a.example"], "cors"), req("GET", "/bkt?cors"),
          req("DELETE", "/bkt?cors"))
        dele = ("<Delete><Quiet>false</Quiet><Object><Key>k1</Key></Object><Object><Key>k2</Key>"
                "<VersionId>null</VersionId></Object><Object><Key>none</Key></Object></Delete>")
        w(f"delete_objects_{suf}", m, mk, req("PUT", "/bkt/k1", "1"), req("PUT", "/bkt/k2", "2"),
          req("POST", "/bkt?delete", ["Content-MD5: " + md5_b64(dele)], dele),
          req("POST", "/bkt?delete", ["Content-MD5: AAAAAAAAAAAAAAAAAAAAAA=="],
              "<Delete><Object><Key>k1</Key></Object></Delete>"),
          req("GET", "/bkt?list-type=2"))
    # Unsigned: the 403 paths, and a split delivery.
    w("unsigned_ec", "1", mk, req("GET", "/"), req("PUT", "/bkt/x", "x"), req("GET", "/bkt/x"))
    w("unsigned_one", "0", mk, req("GET", "/bkt?list-type=2"))
    w("split_put_get_ec", "7", mk, req("PUT", "/bkt/s", "0123456789" * 50),
      req("GET", "/bkt/s", ["Range: bytes=10-400"]))
    w("chunked_put_ec", "3", mk,
      b"PUT /bkt/c HTTP/1.1\r\n" + HOST.encode() + b"Transfer-Encoding: chunked\r\n\r\n"
      b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", req("GET", "/bkt/c"))
    w("aws_chunked_trailer_one", "2", mk,
      req("PUT", "/bkt/t", ["x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                            "Content-Encoding: aws-chunked", "x-amz-decoded-content-length: 5",
                            "x-amz-trailer: x-amz-checksum-crc32"],
          b"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:NhCmhg==\r\n\r\n"),
      req("GET", "/bkt/t", ["x-amz-checksum-mode: ENABLED"]))
    w("expect_continue_ec", "3", mk,
      b"PUT /bkt/e HTTP/1.1\r\n" + HOST.encode() + b"Expect: 100-continue\r\n"
      b"Content-Length: 3\r\n\r\nabc", req("GET", "/bkt/e"))
    w("attributes_ec", "3", mk, req("PUT", "/bkt/at", "attrs"),
      req("GET", "/bkt/at?attributes", ["x-amz-object-attributes: ETag,ObjectSize,StorageClass"]))
    w("lifecycle_one", "2", mk,
      req("PUT", "/bkt?lifecycle",
          "<LifecycleConfiguration><Rule><ID>r</ID><Filter><Prefix>tmp/</Prefix></Filter>"
          "<Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>"
          "</LifecycleConfiguration>"),
      req("GET", "/bkt?lifecycle"), req("DELETE", "/bkt?lifecycle"))
    src = b"0123456789abcdef"
    w("part_copy_ec", "3", mk, req("PUT", "/bkt/src", src), req("POST", "/bkt/dst?uploads"),
      req("PUT", "/bkt/dst?partNumber=1&uploadId=UPLOADID",
          ["x-amz-copy-source: /bkt/src", "x-amz-copy-source-range: bytes=2-9"]),
      req("POST", "/bkt/dst?uploadId=UPLOADID",
          "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>%s</ETag></Part>"
          "</CompleteMultipartUpload>" % etag(src[2:10])),
      req("GET", "/bkt/dst"))
    # Malformed variants.
    w("bad_bucket_name_ec", "3", req("PUT", "/Bad_Bucket"), req("PUT", "/ab"),
      req("GET", "/bkt/%zz"))
    w("bad_xml_one", "2", mk,
      req("PUT", "/bkt?versioning", "<VersioningConfiguration><Status>Enab"),
      req("POST", "/bkt?delete", "<Delete><Object><Key></Key></Object>"),
      req("PUT", "/bkt?cors", "not xml"))
    w("bad_range_ec", "3", mk, req("PUT", "/bkt/r", "range"),
      req("GET", "/bkt/r", ["Range: bytes=9-1"]), req("GET", "/bkt/r", ["Range: bytes=1-2,3-4"]),
      req("GET", "/bkt/r", ["Range: items=0-1"]))
    w("bad_auth_ec", "1",
      req("GET", "/", ["Authorization: AWS4-HMAC-SHA256 Credential=nobody/20200101/us-east-1/s3/"
                       "aws4_request, SignedHeaders=host, Signature=00"]),
      req("GET", "/?X-Amz-Signature=1"))
    w("bad_head_ec", "3", mk,
      b"PUT /bkt/x HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
      b"GARBAGE\r\n\r\n")
    w("bad_chunked_one", "2", mk,
      b"PUT /bkt/c HTTP/1.1\r\n" + HOST.encode() + b"Transfer-Encoding: chunked\r\n\r\n"
      b"zz\r\nhello\r\n0\r\n\r\n")
    w("truncated_body_ec", "3", mk,
      b"PUT /bkt/x HTTP/1.1\r\n" + HOST.encode() + b"Content-Length: 100\r\n\r\nshort")
    w("bad_multipart_ec", "3", mk,
      req("POST", "/bkt/mp?uploadId=nosuch",
          "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>"
          "</CompleteMultipartUpload>"),
      req("PUT", "/bkt/mp?partNumber=0&uploadId=nosuch", "x"),
      req("PUT", "/bkt/mp?partNumber=10001&uploadId=x", "x"))
    # Access control: policy, canned ACLs, ownership controls (signed: the
    # harness's user owns the bucket it creates).
    pol = ('{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*",'
           '"Action":"s3:GetObject","Resource":"arn:aws:s3:::bkt/pub/*","Condition":'
           '{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}},{"Effect":"Deny","Principal":'
           '{"AWS":"bob"},"Action":"s3:*","Resource":["arn:aws:s3:::bkt","arn:aws:s3:::bkt/*"]}]}')
    acp = ('<AccessControlPolicy><Owner><ID>x</ID></Owner><AccessControlList><Grant><Grantee>'
           '<URI>http://acs.amazonaws.com/groups/global/AllUsers</URI></Grantee>'
           '<Permission>READ</Permission></Grant></AccessControlList></AccessControlPolicy>')
    own = ('<OwnershipControls><Rule><ObjectOwnership>BucketOwnerEnforced</ObjectOwnership>'
           '</Rule></OwnershipControls>')
    for m, suf in (("3", "ec"), ("2", "one")):
        w(f"access_{suf}", m, req("PUT", "/bkt", ["x-amz-acl: public-read"]),
          req("PUT", "/bkt?policy", pol), req("GET", "/bkt?policy"),
          req("PUT", "/bkt?policy", '{"Statement":[{"Effect":"Maybe"}]}'),
          req("PUT", "/bkt/pub/o", ["x-amz-acl: public-read"], "public"),
          req("GET", "/bkt/pub/o?acl"), req("PUT", "/bkt/pub/o?acl", acp),
          req("PUT", "/bkt?acl", ["x-amz-acl: authenticated-read"]), req("GET", "/bkt?acl"),
          req("PUT", "/bkt?ownershipControls", own), req("GET", "/bkt?ownershipControls"),
          req("PUT", "/bkt/p", ["x-amz-acl: public-read"], "refused"),
          req("DELETE", "/bkt?ownershipControls"), req("DELETE", "/bkt?policy"),
          req("DELETE", "/bkt/pub/o"), req("DELETE", "/bkt"))
    w("anonymous_one", "0", req("GET", "/"), req("GET", "/bkt/pub/o"), req("PUT", "/bkt?policy", pol),
      req("GET", "/bkt?acl"))
    w("conditional_put_one", "2", mk, req("PUT", "/bkt/c", ["If-None-Match: *"], "a"),
      req("PUT", "/bkt/c", ["If-None-Match: *"], "b"),
      req("PUT", "/bkt/c", ['If-Match: "nope"'], "c"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__),
                                                               "corpus", "router"))
