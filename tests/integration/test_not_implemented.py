"""Operations OpenLake does not implement answer 501 NotImplemented.

Never a wrong success: a sub-resource the server does not know must not fall
through to plain GET/PUT/DELETE of the bucket or object (a PUT ?acl that
overwrote the object with its XML body, a DELETE ?policy that deleted the
bucket, a GET ?website that answered with a listing).  Each case sends one
signed raw request and then checks that the bucket and its object are intact.

Run as a script to print the status of every probed operation, for updating
docs/S3-COMPATIBILITY.md:

    OPENLAKE_BIN=build/openlake /usr/bin/python3 tests/integration/test_not_implemented.py
"""

import base64
import hashlib
import os
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import helpers as h  # noqa: E402

OBJ_KEY = "obj.bin"
OBJ_DATA = b"original object contents\n" * 40

XML = b'<?xml version="1.0" encoding="UTF-8"?>\n'

# (operation, method, query, body, level) for operations that must answer 501.
# level "bucket" targets /bucket, "object" targets /bucket/obj.bin.
UNIMPLEMENTED = [
    ("GetBucketPolicyStatus", "GET", "policyStatus", b"", "bucket"),
    ("GetBucketWebsite", "GET", "website", b"", "bucket"),
    ("PutBucketWebsite", "PUT", "website",
     XML + b"<WebsiteConfiguration><IndexDocument><Suffix>index.html</Suffix>"
     b"</IndexDocument></WebsiteConfiguration>", "bucket"),
    ("DeleteBucketWebsite", "DELETE", "website", b"", "bucket"),
    ("GetBucketLogging", "GET", "logging", b"", "bucket"),
    ("PutBucketLogging", "PUT", "logging", XML + b"<BucketLoggingStatus/>", "bucket"),
    ("GetBucketNotificationConfiguration", "GET", "notification", b"", "bucket"),
    ("PutBucketNotificationConfiguration", "PUT", "notification",
     XML + b"<NotificationConfiguration/>", "bucket"),
    ("GetBucketReplication", "GET", "replication", b"", "bucket"),
    ("PutBucketReplication", "PUT", "replication",
     XML + b"<ReplicationConfiguration><Role>r</Role></ReplicationConfiguration>", "bucket"),
    ("DeleteBucketReplication", "DELETE", "replication", b"", "bucket"),
    ("GetObjectLockConfiguration", "GET", "object-lock", b"", "bucket"),
    ("PutObjectLockConfiguration", "PUT", "object-lock",
     XML + b"<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled>"
     b"</ObjectLockConfiguration>", "bucket"),
    ("GetBucketAccelerateConfiguration", "GET", "accelerate", b"", "bucket"),
    ("PutBucketAccelerateConfiguration", "PUT", "accelerate",
     XML + b"<AccelerateConfiguration><Status>Enabled</Status></AccelerateConfiguration>",
     "bucket"),
    ("GetBucketRequestPayment", "GET", "requestPayment", b"", "bucket"),
    ("PutBucketRequestPayment", "PUT", "requestPayment",
     XML + b"<RequestPaymentConfiguration><Payer>Requester</Payer>"
     b"</RequestPaymentConfiguration>", "bucket"),
    ("ListBucketAnalyticsConfigurations", "GET", "analytics", b"", "bucket"),
    ("GetBucketAnalyticsConfiguration", "GET", "analytics&id=a1", b"", "bucket"),
    ("PutBucketAnalyticsConfiguration", "PUT", "analytics&id=a1",
     XML + b"<AnalyticsConfiguration><Id>a1</Id></AnalyticsConfiguration>", "bucket"),
    ("DeleteBucketAnalyticsConfiguration", "DELETE", "analytics&id=a1", b"", "bucket"),
    ("ListBucketInventoryConfigurations", "GET", "inventory", b"", "bucket"),
    ("GetBucketInventoryConfiguration", "GET", "inventory&id=i1", b"", "bucket"),
    ("PutBucketInventoryConfiguration", "PUT", "inventory&id=i1",
     XML + b"<InventoryConfiguration><Id>i1</Id></InventoryConfiguration>", "bucket"),
    ("DeleteBucketInventoryConfiguration", "DELETE", "inventory&id=i1", b"", "bucket"),
    ("ListBucketMetricsConfigurations", "GET", "metrics", b"", "bucket"),
    ("GetBucketMetricsConfiguration", "GET", "metrics&id=m1", b"", "bucket"),
    ("PutBucketMetricsConfiguration", "PUT", "metrics&id=m1",
     XML + b"<MetricsConfiguration><Id>m1</Id></MetricsConfiguration>", "bucket"),
    ("DeleteBucketMetricsConfiguration", "DELETE", "metrics&id=m1", b"", "bucket"),
    ("ListBucketIntelligentTieringConfigurations", "GET", "intelligent-tiering", b"", "bucket"),
    ("GetBucketIntelligentTieringConfiguration", "GET", "intelligent-tiering&id=t1", b"",
     "bucket"),
    ("PutBucketIntelligentTieringConfiguration", "PUT", "intelligent-tiering&id=t1",
     XML + b"<IntelligentTieringConfiguration><Id>t1</Id></IntelligentTieringConfiguration>",
     "bucket"),
    ("DeleteBucketIntelligentTieringConfiguration", "DELETE", "intelligent-tiering&id=t1", b"",
     "bucket"),
    ("GetPublicAccessBlock", "GET", "publicAccessBlock", b"", "bucket"),
    ("PutPublicAccessBlock", "PUT", "publicAccessBlock",
     XML + b"<PublicAccessBlockConfiguration><BlockPublicAcls>true</BlockPublicAcls>"
     b"</PublicAccessBlockConfiguration>", "bucket"),
    ("DeletePublicAccessBlock", "DELETE", "publicAccessBlock", b"", "bucket"),
    ("GetObjectRetention", "GET", "retention", b"", "object"),
    ("PutObjectRetention", "PUT", "retention",
     XML + b"<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>2030-01-01T00:00:00Z"
     b"</RetainUntilDate></Retention>", "object"),
    ("GetObjectLegalHold", "GET", "legal-hold", b"", "object"),
    ("PutObjectLegalHold", "PUT", "legal-hold",
     XML + b"<LegalHold><Status>ON</Status></LegalHold>", "object"),
    ("GetObjectTorrent", "GET", "torrent", b"", "object"),
    ("RestoreObject", "POST", "restore",
     XML + b"<RestoreRequest><Days>1</Days></RestoreRequest>", "object"),
    ("SelectObjectContent", "POST", "select&select-type=2",
     XML + b"<SelectObjectContentRequest><Expression>select * from s3object</Expression>"
     b"<ExpressionType>SQL</ExpressionType></SelectObjectContentRequest>", "object"),
]

# Sub-resources outside the router's list of known query parameters: each once
# fell through to a plain bucket or object operation (a DELETE ?metadataTable
# deleted the bucket).  They must answer 501 and change nothing.
MISROUTED = [
    ("RenameObject", "PUT", "renameObject", b"", "object",
     "PUT ?renameObject is taken for PutObject and empties the object"),
    ("CreateSession", "GET", "session", b"", "bucket",
     "GET ?session is answered with a ListObjects listing"),
    ("GetBucketMetadataTableConfiguration", "GET", "metadataTable", b"", "bucket",
     "GET ?metadataTable is answered with a ListObjects listing"),
    ("GetBucketMetadataConfiguration", "GET", "metadataConfiguration", b"", "bucket",
     "GET ?metadataConfiguration is answered with a ListObjects listing"),
    ("DeleteBucketMetadataTableConfiguration", "DELETE", "metadataTable", b"", "bucket",
     "DELETE ?metadataTable is taken for DeleteBucket and deletes an empty bucket"),
    ("DeleteBucketMetadataConfiguration", "DELETE", "metadataConfiguration", b"", "bucket",
     "DELETE ?metadataConfiguration is taken for DeleteBucket and deletes an empty bucket"),
]

# Features other work is adding: until then they must answer 501; once
# implemented they must answer with their own document or error, never with
# the plain bucket operation (a listing, an empty 200, a deleted bucket).
PENDING = [
    ("GetBucketTagging", "GET", "tagging", b"", "bucket", (b"<Tagging", b"NoSuchTagSet")),
    ("PutBucketTagging", "PUT", "tagging",
     XML + b"<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>",
     "bucket", (b"",)),
    ("DeleteBucketTagging", "DELETE", "tagging", b"", "bucket", (b"",)),
]


def _send(server, method, target, body):
    headers = {}
    if body:
        headers["Content-MD5"] = base64.b64encode(hashlib.md5(body).digest()).decode()
        headers["Content-Type"] = "application/xml"
    return h.signed_request(server, method, target, body=body, headers=headers)


def _setup(server, level):
    """A fresh bucket; for object cases it holds one object.  Bucket-level
    DELETE cases get an empty bucket so that a DELETE that fell through to
    DeleteBucket would succeed and be caught."""
    b = h.unique_bucket("ni")
    r = h.signed_request(server, "PUT", f"/{b}")
    assert r.status == 200, r
    if level == "object":
        r = h.signed_request(server, "PUT", f"/{b}/{OBJ_KEY}", body=OBJ_DATA)
        assert r.status == 200, r
        return b, f"/{b}/{OBJ_KEY}"
    return b, f"/{b}"


def _check_intact(server, b, level):
    r = h.signed_request(server, "HEAD", f"/{b}")
    assert r.status == 200, f"bucket gone after the request: {r}"
    r = h.signed_request(server, "GET", f"/{b}?list-type=2")
    keys = h.xml_find_all(r.body, "Key")
    if level == "object":
        assert keys == [OBJ_KEY], keys
        r = h.signed_request(server, "GET", f"/{b}/{OBJ_KEY}")
        assert r.status == 200 and r.body == OBJ_DATA, "object changed by the request"
    else:
        assert keys == [], keys


def _cleanup(server, b):
    h.signed_request(server, "DELETE", f"/{b}/{OBJ_KEY}")
    h.signed_request(server, "DELETE", f"/{b}")


def _assert_501(r):
    assert r.status == 501, f"want 501 NotImplemented, got {r}"
    err = h.parse_error(r.body)
    assert err["Code"] == "NotImplemented", err


@pytest.mark.parametrize("op,method,query,body,level", UNIMPLEMENTED,
                         ids=[c[0] for c in UNIMPLEMENTED])
def test_unimplemented_answers_501(server, op, method, query, body, level):
    b, path = _setup(server, level)
    try:
        r = _send(server, method, f"{path}?{query}", body)
        _assert_501(r)
        _check_intact(server, b, level)
    finally:
        _cleanup(server, b)


@pytest.mark.parametrize("op,method,query,body,level,why", MISROUTED,
                         ids=[c[0] for c in MISROUTED])
def test_unrecognised_subresource_answers_501(server, op, method, query, body, level, why):
    b, path = _setup(server, level)
    try:
        r = _send(server, method, f"{path}?{query}", body)
        _assert_501(r)
        _check_intact(server, b, level)
    finally:
        _cleanup(server, b)


@pytest.mark.parametrize("op,method,query,body,level,want", PENDING,
                         ids=[c[0] for c in PENDING])
def test_pending_feature_never_falls_through(server, op, method, query, body, level, want):
    b, path = _setup(server, level)
    try:
        r = _send(server, method, f"{path}?{query}", body)
        if r.status == 501:
            _assert_501(r)
        else:
            assert b"<ListBucketResult" not in r.body, f"{op} answered with a listing"
            assert any(w in r.body for w in want), f"{op}: unexpected answer {r}"
        r = h.signed_request(server, "HEAD", f"/{b}")
        assert r.status == 200, f"bucket gone after {op}: {r}"
    finally:
        _cleanup(server, b)


# Request headers that ask for a feature OpenLake lacks.  Accepting them and
# storing a plain object is a wrong success (the client believes the data is
# encrypted with its key, or locked); they must be refused (4xx or 501).
UNSUPPORTED_HEADERS = [
    # Encryption with a KMS key (SSE-S3 and SSE-C are built: test_sse.py).
    ("SSE-KMS", "PUT", "object", {"x-amz-server-side-encryption": "aws:kms",
                                  "x-amz-server-side-encryption-aws-kms-key-id": "k"}),
    ("ObjectLockRetention", "PUT", "object", {
        "x-amz-object-lock-mode": "GOVERNANCE",
        "x-amz-object-lock-retain-until-date": "2030-01-01T00:00:00Z"}),
    ("ObjectLockLegalHold", "PUT", "object", {"x-amz-object-lock-legal-hold": "ON"}),
    ("UnknownStorageClass", "PUT", "object", {"x-amz-storage-class": "NO-SUCH-CLASS"}),
    ("AppendWriteOffset", "PUT", "object", {"x-amz-write-offset-bytes": "0"}),
    ("CreateBucketObjectLock", "PUT", "bucket", {"x-amz-bucket-object-lock-enabled": "true"}),
]


@pytest.mark.parametrize("name,method,level,headers", UNSUPPORTED_HEADERS,
                         ids=[c[0] for c in UNSUPPORTED_HEADERS])
def test_unsupported_header_is_refused(server, name, method, level, headers):
    b = h.unique_bucket("nih")
    target = f"/{b}"
    if level == "object":
        assert h.signed_request(server, "PUT", f"/{b}").status == 200
        target = f"/{b}/k"
    try:
        r = h.signed_request(server, method, target, body=b"data" if level == "object" else b"",
                             headers=headers)
        assert r.status >= 400, f"{name}: the request succeeded ({r.status})"
    finally:
        h.signed_request(server, "DELETE", f"/{b}/k")
        h.signed_request(server, "DELETE", f"/{b}")


def test_service_level_subresource_is_not_list_buckets(server):
    r = h.signed_request(server, "GET", "/?acl")
    assert r.status != 200 or b"ListAllMyBucketsResult" not in r.body


# ---- status probe for docs/S3-COMPATIBILITY.md -------------------------------

def _probe_pending(server, s3):
    """Status lines for the features being implemented now, by behaviour."""
    b = h.unique_bucket("probe")
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="src", Body=b"probe")
    out = []

    def status(name, fn):
        try:
            fn()
            out.append((name, "answers (implemented)"))
        except Exception as e:  # noqa: BLE001 - any failure is a status here
            code = getattr(e, "response", {}).get("Error", {}).get("Code", type(e).__name__)
            out.append((name, f"fails: {code}"))

    status("CopyObject", lambda: s3.copy_object(Bucket=b, Key="dst",
                                                CopySource={"Bucket": b, "Key": "src"}))

    def upc():
        up = s3.create_multipart_upload(Bucket=b, Key="mp")["UploadId"]
        try:
            s3.upload_part_copy(Bucket=b, Key="mp", UploadId=up, PartNumber=1,
                                CopySource={"Bucket": b, "Key": "src"})
        finally:
            s3.abort_multipart_upload(Bucket=b, Key="mp", UploadId=up)
    status("UploadPartCopy", upc)
    status("DeleteObjects", lambda: s3.delete_objects(
        Bucket=b, Delete={"Objects": [{"Key": "absent"}]}))
    status("PutObjectTagging", lambda: s3.put_object_tagging(
        Bucket=b, Key="src", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]}))
    status("GetObjectTagging", lambda: s3.get_object_tagging(Bucket=b, Key="src"))
    status("GetBucketVersioning", lambda: s3.get_bucket_versioning(Bucket=b))
    status("PutBucketVersioning", lambda: s3.put_bucket_versioning(
        Bucket=b, VersioningConfiguration={"Status": "Suspended"}))
    status("ListObjectVersions", lambda: s3.list_object_versions(Bucket=b))
    status("PutBucketCors", lambda: s3.put_bucket_cors(Bucket=b, CORSConfiguration={
        "CORSRules": [{"AllowedMethods": ["GET"], "AllowedOrigins": ["*"]}]}))
    status("GetBucketCors", lambda: s3.get_bucket_cors(Bucket=b))
    status("PutBucketLifecycleConfiguration", lambda: s3.put_bucket_lifecycle_configuration(
        Bucket=b, LifecycleConfiguration={"Rules": [{"ID": "r", "Status": "Enabled",
                                                     "Filter": {"Prefix": "x/"},
                                                     "Expiration": {"Days": 1}}]}))
    status("GetBucketLifecycleConfiguration",
           lambda: s3.get_bucket_lifecycle_configuration(Bucket=b))

    def ifnm():
        # If-None-Match: * on an existing key must fail with 412.
        r = h.signed_request(server, "PUT", f"/{b}/src", body=b"x",
                             headers={"If-None-Match": "*"})
        if r.status != 412:
            raise RuntimeError(f"conditional PUT ignored (HTTP {r.status})")
    status("PutObject If-None-Match", ifnm)

    def ifm():
        r = h.signed_request(server, "GET", f"/{b}/src", headers={"If-Match": '"nope"'})
        if r.status != 412:
            raise RuntimeError(f"If-Match ignored (HTTP {r.status})")
    status("GetObject If-Match", ifm)

    def crc():
        r = s3.put_object(Bucket=b, Key="ck", Body=b"abc", ChecksumAlgorithm="CRC32")
        if "ChecksumCRC32" not in r:
            raise RuntimeError("no x-amz-checksum-crc32 in the response")
    status("PutObject checksums", crc)
    return out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        srv = h.Server(tmp)
        srv.start()
        try:
            s3 = h.make_client(srv.endpoint)
            rows = []
            for op, method, query, body, level in UNIMPLEMENTED + [c[:5] for c in MISROUTED] \
                    + [c[:5] for c in PENDING]:
                b, path = _setup(srv, level)
                r = _send(srv, method, f"{path}?{query}", body)
                rows.append((op, f"HTTP {r.status}" + (" NotImplemented" if r.status == 501
                                                        else "")))
                _cleanup(srv, b)
            rows += _probe_pending(srv, s3)
            for op, st in rows:
                print(f"{op:48} {st}")
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
