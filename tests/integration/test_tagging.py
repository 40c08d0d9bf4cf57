"""Object tagging: Put/Get/DeleteObjectTagging, x-amz-tagging on PutObject,
x-amz-tagging-count on GetObject/HeadObject."""

import pytest
from botocore.exceptions import ClientError

import helpers as h


def tagset(d):
    return {"TagSet": [{"Key": k, "Value": v} for k, v in d.items()]}


def as_dict(resp):
    return {t["Key"]: t["Value"] for t in resp["TagSet"]}


def test_put_get_delete_tagging(s3, bucket):
    s3.put_object(Bucket=bucket, Key="k", Body=b"data")
    before = s3.head_object(Bucket=bucket, Key="k")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")) == {}
    assert "x-amz-tagging-count" not in before["ResponseMetadata"]["HTTPHeaders"]

    tags = {"project": "lake", "team": "storage+ops", "empty": "", "path": "a/b:c@d=e.f_g-h",
            "ünïcode": "välue with spaces"}
    r = s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tagset(tags))
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    got = s3.get_object_tagging(Bucket=bucket, Key="k")
    assert as_dict(got) == tags
    assert [t["Key"] for t in got["TagSet"]] == list(tags), "order is kept"

    # Tags do not change the object's ETag or Last-Modified.
    after = s3.head_object(Bucket=bucket, Key="k")
    assert after["ETag"] == before["ETag"]
    assert after["LastModified"] == before["LastModified"]
    assert after["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == str(len(tags))
    g = s3.get_object(Bucket=bucket, Key="k")
    assert g["TagCount"] == len(tags)
    assert g["Body"].read() == b"data"

    # Replacing replaces the whole set.
    s3.put_object_tagging(Bucket=bucket, Key="k", Tagging=tagset({"only": "one"}))
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")) == {"only": "one"}

    d = s3.delete_object_tagging(Bucket=bucket, Key="k")
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="k")) == {}
    assert "TagCount" not in s3.get_object(Bucket=bucket, Key="k")


def test_overwrite_drops_tags(s3, bucket):
    s3.put_object(Bucket=bucket, Key="o", Body=b"1")
    s3.put_object_tagging(Bucket=bucket, Key="o", Tagging=tagset({"a": "b"}))
    s3.put_object(Bucket=bucket, Key="o", Body=b"2")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="o")) == {}


def test_missing_object(s3, bucket):
    for call in (lambda: s3.get_object_tagging(Bucket=bucket, Key="nope"),
                 lambda: s3.put_object_tagging(Bucket=bucket, Key="nope",
                                               Tagging=tagset({"a": "b"})),
                 lambda: s3.delete_object_tagging(Bucket=bucket, Key="nope")):
        with pytest.raises(ClientError) as e:
            call()
        assert h.error_code(e.value) == "NoSuchKey"
        assert h.http_status(e.value) == 404


@pytest.mark.parametrize("tags, why", [
    ({f"k{i}": "v" for i in range(11)}, "too many"),
    ({"k" * 129: "v"}, "key too long"),
    ({"k": "v" * 257}, "value too long"),
    ({"bad*key": "v"}, "bad key character"),
    ({"k": "bad<>value"}, "bad value character"),
    ({"aws:reserved": "v"}, "reserved prefix"),
])
def test_invalid_tags(s3, bucket, tags, why):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.put_object_tagging(Bucket=bucket, Key="t", Tagging=tagset(tags))
    assert h.error_code(e.value) == "InvalidTag", why
    assert h.http_status(e.value) == 400


def test_limits_accepted(s3, bucket):
    s3.put_object(Bucket=bucket, Key="t", Body=b"x")
    tags = {f"k{i}": "v" for i in range(9)}
    tags["é" * 128] = "ü" * 256  # limits count characters, not bytes
    s3.put_object_tagging(Bucket=bucket, Key="t", Tagging=tagset(tags))
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="t")) == tags


@pytest.mark.parametrize("doc", [
    b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value></Tag>"
    b"<Tag><Key>a</Key><Value>2</Value></Tag></TagSet></Tagging>",
    b"<Tagging><TagSet><Tag><Key></Key><Value>1</Value></Tag></TagSet></Tagging>",
])
def test_duplicate_or_empty_keys(server, bucket, s3, doc):
    s3.put_object(Bucket=bucket, Key="d", Body=b"x")
    r = h.signed_request(server, "PUT", f"/{bucket}/d?tagging", body=doc)
    assert r.status == 400
    assert h.parse_error(r.body)["Code"] == "InvalidTag"


@pytest.mark.parametrize("doc", [
    b"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>",
    b"<Tagging><TagSet><Tag><Key>a</Key><Value>1</Value><Extra/></Tag></TagSet></Tagging>",
    b"<Other><TagSet/></Other>",
    b"<Tagging><TagSet><Tag><Key>a</Key>",
    b"",
])
def test_malformed(server, bucket, s3, doc):
    s3.put_object(Bucket=bucket, Key="m", Body=b"x")
    r = h.signed_request(server, "PUT", f"/{bucket}/m?tagging", body=doc)
    assert r.status == 400, r
    assert h.parse_error(r.body)["Code"] == "MalformedXML"


def test_empty_tagset_clears(server, bucket, s3):
    s3.put_object(Bucket=bucket, Key="e", Body=b"x")
    s3.put_object_tagging(Bucket=bucket, Key="e", Tagging=tagset({"a": "b"}))
    s3.put_object_tagging(Bucket=bucket, Key="e", Tagging={"TagSet": []})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="e")) == {}


def test_put_object_with_tagging_header(s3, bucket):
    s3.put_object(Bucket=bucket, Key="h", Body=b"x", Tagging="a=1&b=two%20words&c=x%2By")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="h")) == {
        "a": "1", "b": "two words", "c": "x+y"}
    assert s3.head_object(Bucket=bucket, Key="h")["ResponseMetadata"]["HTTPHeaders"][
        "x-amz-tagging-count"] == "3"


def test_put_object_bad_tagging_header(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.put_object(Bucket=bucket, Key="bad", Body=b"x", Tagging="a=1&a=2")
    assert h.error_code(e.value) == "InvalidTag"
    # Rejected before the object was written.
    with pytest.raises(ClientError) as e:
        s3.head_object(Bucket=bucket, Key="bad")
    assert h.http_status(e.value) == 404


def test_multipart_upload_with_tagging_header(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="mp", Tagging="team=lake&n=two%20words",
                                    ContentType="text/x-mp")["UploadId"]
    body = b"m" * (5 << 20)
    e1 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=1, Body=body)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="mp", UploadId=up, PartNumber=2, Body=b"end")["ETag"]
    # Not visible before Complete: the object does not exist yet.
    with pytest.raises(ClientError) as e:
        s3.get_object_tagging(Bucket=bucket, Key="mp")
    assert h.http_status(e.value) == 404
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=up, MultipartUpload={
        "Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="mp")) == {
        "team": "lake", "n": "two words"}
    hd = s3.head_object(Bucket=bucket, Key="mp")
    assert hd["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "2"
    assert hd["ContentType"] == "text/x-mp"
    assert hd["ContentLength"] == len(body) + 3
    # The internal entry that carried the tags is not sent as a header.
    assert not any(k.startswith(":") for k in hd["ResponseMetadata"]["HTTPHeaders"])


def test_multipart_upload_bad_tagging_header(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.create_multipart_upload(Bucket=bucket, Key="mpbad", Tagging="aws:x=1")
    assert h.error_code(e.value) == "InvalidTag"
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_copy_tagging_directive(s3, bucket):
    s3.put_object(Bucket=bucket, Key="src", Body=b"x", Tagging="a=1&b=2")
    # COPY (the default) carries the source's tags.
    s3.copy_object(Bucket=bucket, Key="c1", CopySource={"Bucket": bucket, "Key": "src"})
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="c1")) == {"a": "1", "b": "2"}
    # REPLACE takes the request's x-amz-tagging instead.
    s3.copy_object(Bucket=bucket, Key="c2", CopySource={"Bucket": bucket, "Key": "src"},
                   TaggingDirective="REPLACE", Tagging="z=26")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="c2")) == {"z": "26"}
    # REPLACE without tags leaves the copy untagged, even over a tagged object.
    s3.copy_object(Bucket=bucket, Key="c1", CopySource={"Bucket": bucket, "Key": "src"},
                   TaggingDirective="REPLACE")
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="c1")) == {}
    with pytest.raises(ClientError) as e:
        s3.copy_object(Bucket=bucket, Key="c3", CopySource={"Bucket": bucket, "Key": "src"},
                       TaggingDirective="REPLACE", Tagging="k=1&k=2")
    assert h.error_code(e.value) == "InvalidTag"
    assert as_dict(s3.get_object_tagging(Bucket=bucket, Key="src")) == {"a": "1", "b": "2"}
