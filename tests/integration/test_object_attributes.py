"""GetObjectAttributes (GET ?attributes) through boto3, one-drive mode;
erasure-coded mode answers 501 for it."""

import os

import pytest
from botocore.exceptions import ClientError

import helpers as h
from helpers import KIB, MIB

ALL = ["ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"]


def test_single_put(s3, bucket):
    body = b"attribute me" * 100
    s3.put_object(Bucket=bucket, Key="k", Body=body, ChecksumAlgorithm="SHA256")
    r = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=ALL)
    assert r["ETag"] == h.md5_hex(body)  # unquoted, as S3 sends it
    assert r["ObjectSize"] == len(body)
    assert r["StorageClass"] == "STANDARD"
    head = s3.head_object(Bucket=bucket, Key="k", ChecksumMode="ENABLED")
    assert r["Checksum"]["ChecksumSHA256"] == head["ChecksumSHA256"]
    assert "ObjectParts" not in r
    assert r["LastModified"] == head["LastModified"]
    # Only what was asked for.
    r = s3.get_object_attributes(Bucket=bucket, Key="k", ObjectAttributes=["ObjectSize"])
    assert r["ObjectSize"] == len(body)
    assert "ETag" not in r and "StorageClass" not in r


def test_multipart_parts(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(KIB)]
    uid = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    done = []
    for i, p in enumerate(parts, 1):
        e = s3.upload_part(Bucket=bucket, Key="mp", UploadId=uid, PartNumber=i, Body=p)["ETag"]
        done.append({"PartNumber": i, "ETag": e})
    s3.complete_multipart_upload(Bucket=bucket, Key="mp", UploadId=uid,
                                 MultipartUpload={"Parts": done})
    r = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=ALL)
    assert r["ETag"] == h.multipart_etag(parts).strip('"')
    assert r["ObjectSize"] == sum(len(p) for p in parts)
    op = r["ObjectParts"]
    assert op["TotalPartsCount"] == 3
    assert [(p["PartNumber"], p["Size"]) for p in op["Parts"]] == [
        (1, 5 * MIB), (2, 5 * MIB), (3, KIB)]
    assert op["IsTruncated"] is False
    # Paged with max-parts and part-number-marker.
    r = s3.get_object_attributes(Bucket=bucket, Key="mp", ObjectAttributes=["ObjectParts"],
                                 MaxParts=1, PartNumberMarker=1)
    op = r["ObjectParts"]
    assert [p["PartNumber"] for p in op["Parts"]] == [2]
    assert op["IsTruncated"] is True and op["NextPartNumberMarker"] == 2


def test_versions_and_errors(server, s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket=bucket, Key="v", Body=b"one")["VersionId"]
    s3.put_object(Bucket=bucket, Key="v", Body=b"three")
    r = s3.get_object_attributes(Bucket=bucket, Key="v", VersionId=v1,
                                 ObjectAttributes=["ObjectSize"])
    assert r["ObjectSize"] == 3 and r["VersionId"] == v1
    with pytest.raises(ClientError) as e:
        s3.get_object_attributes(Bucket=bucket, Key="missing", ObjectAttributes=["ETag"])
    assert h.http_status(e.value) == 404
    assert h.error_code(e.value) == "NoSuchKey"
    r = h.signed_request(server, "GET", f"/{bucket}/v?attributes",
                         headers={"x-amz-object-attributes": "ETag,Bogus"})
    assert r.status == 400 and h.parse_error(r.body)["Code"] == "InvalidArgument", r
    r = h.signed_request(server, "GET", f"/{bucket}/v?attributes")
    assert r.status == 400 and h.parse_error(r.body)["Code"] == "InvalidArgument", r
    # Never the object's data, nor a listing at the bucket level.
    r = h.signed_request(server, "GET", f"/{bucket}?attributes",
                         headers={"x-amz-object-attributes": "ETag"})
    assert r.status == 405, r
