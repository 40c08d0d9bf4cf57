"""Bucket tagging: Put/Get/DeleteBucketTagging (one-drive mode; erasure-coded
mode answers 501, as for every bucket setting)."""

import pytest
from botocore.exceptions import ClientError

import helpers as h


def tagset(d):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in d.items()]}


def as_dict(resp):
    return {t["Key"]: t["Value"] for t in resp["TagSet"]}


def test_put_get_delete(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=bucket)
    assert h.error_code(e.value) == "NoSuchTagSet"
    assert h.http_status(e.value) == 404
    tags = {"team": "storage", "cost center": "a+b=c", "empty": "", "é": "ü"}
    s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset(tags))
    assert as_dict(s3.get_bucket_tagging(Bucket=bucket)) == tags
    # A Put replaces the whole set.
    s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset({"only": "one"}))
    assert as_dict(s3.get_bucket_tagging(Bucket=bucket)) == {"only": "one"}
    r = s3.delete_bucket_tagging(Bucket=bucket)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=bucket)
    assert h.error_code(e.value) == "NoSuchTagSet"
    # Deleting again is fine; the bucket and its listing are untouched.
    s3.delete_bucket_tagging(Bucket=bucket)
    s3.head_bucket(Bucket=bucket)


def test_fifty_tags(s3, bucket):
    tags = {f"k{i}": f"v{i}" for i in range(50)}
    s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset(tags))
    assert as_dict(s3.get_bucket_tagging(Bucket=bucket)) == tags
    tags["k50"] = "v"
    with pytest.raises(ClientError) as e:
        s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset(tags))
    assert h.http_status(e.value) == 400


@pytest.mark.parametrize("tags, why", [
    ({"k" * 129: "v"}, "key too long"),
    ({"k": "v" * 257}, "value too long"),
    ({"bad*key": "v"}, "bad key character"),
    ({"k": "bad<>value"}, "bad value character"),
    ({"aws:reserved": "v"}, "reserved prefix"),
])
def test_invalid_tags(s3, bucket, tags, why):
    s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset({"keep": "me"}))
    with pytest.raises(ClientError) as e:
        s3.put_bucket_tagging(Bucket=bucket, Tagging=tagset(tags))
    assert h.error_code(e.value) == "InvalidTag", why
    assert h.http_status(e.value) == 400
    assert as_dict(s3.get_bucket_tagging(Bucket=bucket)) == {"keep": "me"}


@pytest.mark.parametrize("doc,code", [
    (b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>"
     b"<Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tagging>", "InvalidTag"),
    (b"<Tagging><TagSet><Tag><Key></Key><Value>1</Value></Tag></TagSet></Tagging>", "InvalidTag"),
    (b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>", "MalformedXML"),
    (b"<Other><TagSet/></Other>", "MalformedXML"),
    (b"<Tagging><TagSet><Tag><Key>a</Key>", "MalformedXML"),
])
def test_bad_documents(server, bucket, doc, code):
    r = h.signed_request(server, "PUT", f"/{bucket}?tagging", body=doc)
    assert r.status == 400, r
    assert h.parse_error(r.body)["Code"] == code
    r = h.signed_request(server, "GET", f"/{bucket}?tagging")
    assert r.status == 404 and h.parse_error(r.body)["Code"] == "NoSuchTagSet"


def test_missing_bucket(s3):
    with pytest.raises(ClientError) as e:
        s3.get_bucket_tagging(Bucket=h.unique_bucket("nobucket"))
    assert h.error_code(e.value) == "NoSuchBucket"
