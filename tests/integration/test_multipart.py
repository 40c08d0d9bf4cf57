"""Multipart uploads through boto3."""

import os

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

import helpers as h
from helpers import KIB, MIB


def _upload_parts(s3, bucket, key, parts):
    up = s3.create_multipart_upload(Bucket=bucket, Key=key)
    uid = up["UploadId"]
    assert uid
    etags = []
    for i, p in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=i, Body=p)
        assert r["ETag"] == f'"{h.md5_hex(p)}"'
        etags.append(r["ETag"])
    return uid, etags


def _complete(s3, bucket, key, uid, pairs):
    return s3.complete_multipart_upload(
        Bucket=bucket, Key=key, UploadId=uid,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in pairs]})


def test_multipart_round_trip(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(KIB)]
    uid, etags = _upload_parts(s3, bucket, "mp", parts)

    lp = s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)
    assert [p["PartNumber"] for p in lp["Parts"]] == [1, 2, 3]
    assert [p["Size"] for p in lp["Parts"]] == [5 * MIB, 5 * MIB, KIB]
    assert [p["ETag"] for p in lp["Parts"]] == etags

    done = _complete(s3, bucket, "mp", uid, zip([1, 2, 3], etags))
    assert done["ETag"] == h.multipart_etag(parts)
    assert done["Key"] == "mp"
    assert done["Bucket"] == bucket

    data = b"".join(parts)
    got = s3.get_object(Bucket=bucket, Key="mp")
    assert got["ContentLength"] == len(data)
    assert got["ETag"] == h.multipart_etag(parts)
    assert h.sha256(got["Body"].read()) == h.sha256(data)
    head = s3.head_object(Bucket=bucket, Key="mp")
    assert head["ETag"] == h.multipart_etag(parts)
    # A range that crosses a part boundary.
    r = s3.get_object(Bucket=bucket, Key="mp", Range=f"bytes={5 * MIB - 10}-{5 * MIB + 9}")
    assert r["Body"].read() == data[5 * MIB - 10:5 * MIB + 10]
    r = s3.get_object(Bucket=bucket, Key="mp", Range="bytes=-2000")
    assert r["Body"].read() == data[-2000:]
    # The upload is gone once completed.
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="mp", UploadId=uid)
    assert h.error_code(e.value) == "NoSuchUpload"
    listed = s3.list_multipart_uploads(Bucket=bucket)
    assert uid not in [u["UploadId"] for u in listed.get("Uploads", [])]


def test_part_reupload_replaces(s3, bucket):
    a, b, c = os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(100)
    uid, etags = _upload_parts(s3, bucket, "re", [a, b])
    r = s3.upload_part(Bucket=bucket, Key="re", UploadId=uid, PartNumber=2, Body=c)
    lp = s3.list_parts(Bucket=bucket, Key="re", UploadId=uid)
    assert [(p["PartNumber"], p["Size"]) for p in lp["Parts"]] == [(1, 5 * MIB), (2, 100)]
    done = _complete(s3, bucket, "re", uid, [(1, etags[0]), (2, r["ETag"])])
    assert done["ETag"] == h.multipart_etag([a, c])
    assert s3.get_object(Bucket=bucket, Key="re")["Body"].read() == a + c


def test_complete_subset_of_parts(s3, bucket):
    # Parts may be skipped (1 and 3 of 3); the object is just those parts.
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(10)]
    uid, etags = _upload_parts(s3, bucket, "subset", parts)
    done = _complete(s3, bucket, "subset", uid, [(1, etags[0]), (3, etags[2])])
    assert done["ETag"] == h.multipart_etag([parts[0], parts[2]])
    body = s3.get_object(Bucket=bucket, Key="subset")["Body"].read()
    assert body == parts[0] + parts[2]


def test_invalid_part_wrong_etag(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(KIB)]
    uid, etags = _upload_parts(s3, bucket, "badetag", parts)
    with pytest.raises(ClientError) as e:
        _complete(s3, bucket, "badetag", uid, [(1, etags[0]), (2, '"' + "0" * 32 + '"')])
    assert h.error_code(e.value) == "InvalidPart"
    assert h.http_status(e.value) == 400
    # The upload survives a failed completion and can still complete.
    done = _complete(s3, bucket, "badetag", uid, zip([1, 2], etags))
    assert done["ETag"] == h.multipart_etag(parts)


def test_invalid_part_missing(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(KIB)]
    uid, etags = _upload_parts(s3, bucket, "missing", parts)
    with pytest.raises(ClientError) as e:
        # Part 3 was never uploaded (it is the last part, so its size is
        # not in question).
        _complete(s3, bucket, "missing", uid, [(1, etags[0]), (3, etags[1])])
    assert h.error_code(e.value) == "InvalidPart"
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="missing")


def test_invalid_part_order(s3, bucket):
    parts = [os.urandom(5 * MIB), os.urandom(5 * MIB)]
    uid, etags = _upload_parts(s3, bucket, "order", parts)
    with pytest.raises(ClientError) as e:
        _complete(s3, bucket, "order", uid, [(2, etags[1]), (1, etags[0])])
    assert h.error_code(e.value) == "InvalidPartOrder"
    assert h.http_status(e.value) == 400
    s3.abort_multipart_upload(Bucket=bucket, Key="order", UploadId=uid)


def test_entity_too_small(s3, bucket):
    parts = [os.urandom(KIB), os.urandom(KIB)]
    uid, etags = _upload_parts(s3, bucket, "small", parts)
    with pytest.raises(ClientError) as e:
        _complete(s3, bucket, "small", uid, zip([1, 2], etags))
    assert h.error_code(e.value) == "EntityTooSmall"
    assert h.http_status(e.value) == 400
    with pytest.raises(ClientError):
        s3.head_object(Bucket=bucket, Key="small")


def test_single_small_part_is_fine(s3, bucket):
    uid, etags = _upload_parts(s3, bucket, "one", [b"tiny"])
    done = _complete(s3, bucket, "one", uid, [(1, etags[0])])
    assert done["ETag"] == h.multipart_etag([b"tiny"])
    assert s3.get_object(Bucket=bucket, Key="one")["Body"].read() == b"tiny"


def test_no_such_upload(s3, bucket):
    bogus = "bogus-upload-id-0000"
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="k", UploadId=bogus, PartNumber=1, Body=b"x")
    assert h.error_code(e.value) == "NoSuchUpload"
    assert h.http_status(e.value) == 404
    with pytest.raises(ClientError) as e:
        _complete(s3, bucket, "k", bogus, [(1, '"' + "0" * 32 + '"')])
    assert h.error_code(e.value) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="k", UploadId=bogus)
    assert h.error_code(e.value) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        s3.abort_multipart_upload(Bucket=bucket, Key="k", UploadId=bogus)
    assert h.error_code(e.value) == "NoSuchUpload"


def test_upload_id_bound_to_key(s3, bucket):
    uid, _ = _upload_parts(s3, bucket, "key-a", [b"x"])
    with pytest.raises(ClientError) as e:
        s3.upload_part(Bucket=bucket, Key="key-b", UploadId=uid, PartNumber=1, Body=b"y")
    assert h.error_code(e.value) == "NoSuchUpload"
    s3.abort_multipart_upload(Bucket=bucket, Key="key-a", UploadId=uid)


def test_abort_keeps_existing_object(s3, bucket):
    old = os.urandom(3000)
    s3.put_object(Bucket=bucket, Key="same", Body=old)
    uid, _ = _upload_parts(s3, bucket, "same", [os.urandom(5 * MIB), os.urandom(KIB)])

    listed = s3.list_multipart_uploads(Bucket=bucket)
    ups = [(u["Key"], u["UploadId"]) for u in listed.get("Uploads", [])]
    assert ("same", uid) in ups

    r = s3.abort_multipart_upload(Bucket=bucket, Key="same", UploadId=uid)
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 204
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="same", UploadId=uid)
    assert h.error_code(e.value) == "NoSuchUpload"
    listed = s3.list_multipart_uploads(Bucket=bucket)
    assert uid not in [u["UploadId"] for u in listed.get("Uploads", [])]
    got = s3.get_object(Bucket=bucket, Key="same")
    assert got["Body"].read() == old
    assert got["ETag"] == f'"{h.md5_hex(old)}"'


def test_list_multipart_uploads(s3, bucket):
    ids = {}
    for k in ["u/one", "u/two", "other"]:
        ids[k] = s3.create_multipart_upload(Bucket=bucket, Key=k)["UploadId"]
    assert len(set(ids.values())) == 3
    listed = s3.list_multipart_uploads(Bucket=bucket)
    got = {u["Key"]: u["UploadId"] for u in listed["Uploads"]}
    assert got == ids
    assert all(u.get("Initiated") for u in listed["Uploads"])
    listed = s3.list_multipart_uploads(Bucket=bucket, Prefix="u/")
    assert sorted(u["Key"] for u in listed["Uploads"]) == ["u/one", "u/two"]
    for k, uid in ids.items():
        s3.abort_multipart_upload(Bucket=bucket, Key=k, UploadId=uid)
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_metadata_from_create(s3, bucket):
    up = s3.create_multipart_upload(Bucket=bucket, Key="m", ContentType="application/x-test",
                                    Metadata={"origin": "multipart"})
    r = s3.upload_part(Bucket=bucket, Key="m", UploadId=up["UploadId"], PartNumber=1, Body=b"d")
    _complete(s3, bucket, "m", up["UploadId"], [(1, r["ETag"])])
    head = s3.head_object(Bucket=bucket, Key="m")
    assert head["ContentType"] == "application/x-test"
    assert head["Metadata"] == {"origin": "multipart"}


def test_upload_file_small_threshold(s3, bucket, tmp_path):
    src = tmp_path / "src.bin"
    digest = h.write_random_file(src, 12 * MIB + 777)
    cfg = TransferConfig(multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB,
                         max_concurrency=4)
    s3.upload_file(str(src), bucket, "uf", Config=cfg)
    head = s3.head_object(Bucket=bucket, Key="uf")
    assert head["ContentLength"] == 12 * MIB + 777
    assert head["ETag"].endswith('-3"'), head["ETag"]
    dst = tmp_path / "dst.bin"
    s3.download_file(bucket, "uf", str(dst), Config=cfg)
    assert h.file_sha256(dst) == digest


def test_complete_again_answers_same_result(s3, bucket):
    # A client whose reply was lost sends the Complete again: S3 answers with
    # the first result for a while after completion, not NoSuchUpload.
    parts = [os.urandom(5 * MIB), os.urandom(KIB)]
    uid, etags = _upload_parts(s3, bucket, "again", parts)
    first = _complete(s3, bucket, "again", uid, zip([1, 2], etags))
    second = _complete(s3, bucket, "again", uid, zip([1, 2], etags))
    for k in ("Location", "Bucket", "Key", "ETag"):
        assert second[k] == first[k], k
    assert second["ETag"] == h.multipart_etag(parts)
    # The upload is still gone for everything else, and the record is bound
    # to the upload's key.
    with pytest.raises(ClientError) as e:
        s3.list_parts(Bucket=bucket, Key="again", UploadId=uid)
    assert h.error_code(e.value) == "NoSuchUpload"
    with pytest.raises(ClientError) as e:
        _complete(s3, bucket, "other", uid, zip([1, 2], etags))
    assert h.error_code(e.value) == "NoSuchUpload"


def test_complete_again_versioned(s3, bucket):
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    uid, etags = _upload_parts(s3, bucket, "v", [b"one part"])
    first = _complete(s3, bucket, "v", uid, [(1, etags[0])])
    assert first.get("VersionId")
    # A newer version in between does not change the retried answer.
    s3.put_object(Bucket=bucket, Key="v", Body=b"newer")
    second = _complete(s3, bucket, "v", uid, [(1, etags[0])])
    assert second["VersionId"] == first["VersionId"]
    assert second["ETag"] == first["ETag"]


def test_complete_repeated_part_number(s3, bucket):
    # Part 1 sent twice (the second send replaces the first) and listed
    # twice in a row: accepted, and the object holds the current part 1.
    up = s3.create_multipart_upload(Bucket=bucket, Key="dup")
    uid = up["UploadId"]
    old1, new1, p2 = os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(KIB)
    e_old = s3.upload_part(Bucket=bucket, Key="dup", UploadId=uid, PartNumber=1, Body=old1)["ETag"]
    e_new = s3.upload_part(Bucket=bucket, Key="dup", UploadId=uid, PartNumber=1, Body=new1)["ETag"]
    e2 = s3.upload_part(Bucket=bucket, Key="dup", UploadId=uid, PartNumber=2, Body=p2)["ETag"]
    with pytest.raises(ClientError) as e:
        _complete(s3, bucket, "dup", uid, [(1, e_new), (2, e2), (1, e_new)])
    assert h.error_code(e.value) == "InvalidPartOrder"
    done = _complete(s3, bucket, "dup", uid, [(1, e_old), (1, e_new), (2, e2)])
    assert done["ETag"] == h.multipart_etag([new1, p2])
    got = s3.get_object(Bucket=bucket, Key="dup")["Body"].read()
    assert h.sha256(got) == h.sha256(new1 + p2)
