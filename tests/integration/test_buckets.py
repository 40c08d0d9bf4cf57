"""Bucket operations through boto3."""

import datetime

import pytest
from botocore.exceptions import ClientError

import helpers as h


def test_create_list_head_delete(s3):
    name = h.unique_bucket("crud")
    r = s3.create_bucket(Bucket=name)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200

    listed = s3.list_buckets()
    names = [b["Name"] for b in listed["Buckets"]]
    assert name in names
    entry = next(b for b in listed["Buckets"] if b["Name"] == name)
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - entry["CreationDate"]).total_seconds()) < 300
    assert names == sorted(names), "ListBuckets is sorted by name"

    head = s3.head_bucket(Bucket=name)
    assert head["ResponseMetadata"]["HTTPStatusCode"] == 200

    d = s3.delete_bucket(Bucket=name)
    assert d["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert name not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert h.http_status(e.value) == 404


def test_many_buckets_listed(s3):
    names = [h.unique_bucket("many") for _ in range(5)]
    for n in names:
        s3.create_bucket(Bucket=n)
    listed = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert set(names) <= set(listed)
    for n in names:
        s3.delete_bucket(Bucket=n)
    listed = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert not set(names) & set(listed)


@pytest.mark.parametrize("name", [
    "UpperCase", "ab", "a..b", "192.168.1.1", "-leadingdash", "trailingdash-",
    "under_score", "x" * 64, "bad.", ".bad",
])
def test_invalid_bucket_name(s3, name):
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=name)
    assert h.error_code(e.value) == "InvalidBucketName", e.value.response
    assert h.http_status(e.value) == 400


@pytest.mark.parametrize("name", ["a.-b", "a-.b", "my-.bucket", "my.-bucket", "a..b", "10.0.0.1"])
def test_dot_dash_bucket_names_refused(mode_s3, name):
    # A dot next to a dash would make a host label that starts or ends with
    # a dash in a virtual-hosted-style URL; S3 refuses both orders.
    with pytest.raises(ClientError) as e:
        mode_s3.create_bucket(Bucket=name)
    assert h.error_code(e.value) == "InvalidBucketName", e.value.response
    assert h.http_status(e.value) == 400


@pytest.mark.parametrize("name", ["abc", "a" * 63, "with.dots.ok", "0digits-9", "double--dash"])
def test_valid_edge_bucket_names(s3, name):
    s3.create_bucket(Bucket=name)
    s3.head_bucket(Bucket=name)
    s3.delete_bucket(Bucket=name)


def test_bucket_already_owned_by_you(s3, bucket):
    with pytest.raises(ClientError) as e:
        s3.create_bucket(Bucket=bucket)
    assert h.error_code(e.value) == "BucketAlreadyOwnedByYou"
    assert h.http_status(e.value) == 409


def test_no_such_bucket(s3):
    name = h.unique_bucket("missing")
    with pytest.raises(ClientError) as e:
        s3.head_bucket(Bucket=name)
    assert h.http_status(e.value) == 404
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=name)
    assert h.error_code(e.value) == "NoSuchBucket"
    assert h.http_status(e.value) == 404
    with pytest.raises(ClientError) as e:
        s3.list_objects_v2(Bucket=name)
    assert h.error_code(e.value) == "NoSuchBucket"


def test_bucket_not_empty(s3, bucket):
    s3.put_object(Bucket=bucket, Key="keep", Body=b"x")
    with pytest.raises(ClientError) as e:
        s3.delete_bucket(Bucket=bucket)
    assert h.error_code(e.value) == "BucketNotEmpty"
    assert h.http_status(e.value) == 409
    # The bucket and its object are untouched.
    assert s3.get_object(Bucket=bucket, Key="keep")["Body"].read() == b"x"
    s3.delete_object(Bucket=bucket, Key="keep")
    s3.delete_bucket(Bucket=bucket)
    with pytest.raises(ClientError):
        s3.head_bucket(Bucket=bucket)


def test_delete_bucket_with_pending_upload(s3, bucket):
    # A bucket whose only content is an in-progress multipart upload: S3
    # refuses to delete it (BucketNotEmpty); either way it must not crash
    # and must stay consistent.
    up = s3.create_multipart_upload(Bucket=bucket, Key="pending")
    try:
        s3.delete_bucket(Bucket=bucket)
    except ClientError as e:
        assert h.error_code(e) == "BucketNotEmpty"
        s3.abort_multipart_upload(Bucket=bucket, Key="pending", UploadId=up["UploadId"])
        s3.delete_bucket(Bucket=bucket)
    with pytest.raises(ClientError):
        s3.head_bucket(Bucket=bucket)


def test_recreate_after_delete_is_empty(s3):
    name = h.unique_bucket("again")
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="k", Body=b"1")
    s3.delete_object(Bucket=name, Key="k")
    s3.delete_bucket(Bucket=name)
    s3.create_bucket(Bucket=name)
    assert s3.list_objects_v2(Bucket=name)["KeyCount"] == 0


def test_get_bucket_location(s3, bucket):
    loc = s3.get_bucket_location(Bucket=bucket)
    assert loc["ResponseMetadata"]["HTTPStatusCode"] == 200
    # us-east-1 is reported as an empty LocationConstraint by AWS.
    assert loc.get("LocationConstraint") in (None, "", "us-east-1")
    with pytest.raises(ClientError) as e:
        s3.get_bucket_location(Bucket=h.unique_bucket("missing"))
    assert h.error_code(e.value) == "NoSuchBucket"
