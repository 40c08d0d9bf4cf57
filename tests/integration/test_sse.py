"""Encryption at rest (obj/sse.h, s3/sse.h): SSE-S3 and SSE-C with boto3 and
the aws CLI, on one drive and on erasure-coded drives.  Put, get, ranged
get, head, listings, multipart (ranges across parts, ?partNumber), copies
between every kind of encryption, UploadPartCopy, bucket default
encryption, the errors S3 answers (no key, another key, a bad key MD5), a
restart, and a grep of the drives for a known plaintext that must find
nothing."""
import base64
import hashlib
import os
import subprocess

import pytest
from botocore.exceptions import ClientError

import helpers

pytestmark = helpers.modes()

MARK = b"OPENLAKE-SSE-PLAINTEXT-MARKER:"
MIB = 1 << 20


def body(n, seed):
    """n bytes that start with MARK (for the grep) and are otherwise random."""
    rnd = hashlib.sha256(seed.encode()).digest()
    out = bytearray(MARK)
    while len(out) < n:
        rnd = hashlib.sha256(rnd).digest()
        out += rnd * 64
    return bytes(out[:n])


def ssec(key):
    return {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}


def code_status(fn, *a, **kw):
    with pytest.raises(ClientError) as e:
        fn(*a, **kw)
    return helpers.error_code(e.value), helpers.http_status(e.value)


def test_sse_s3_round_trip(mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    data = body(3 * MIB + 12345, "s3")
    r = s3.put_object(Bucket=b, Key="k", Body=data, ServerSideEncryption="AES256")
    assert r["ServerSideEncryption"] == "AES256"
    assert r["ETag"].strip('"') == hashlib.md5(data).hexdigest()
    g = s3.get_object(Bucket=b, Key="k")
    assert g["ServerSideEncryption"] == "AES256" and g["ContentLength"] == len(data)
    assert g["Body"].read() == data
    # Ranges anywhere: inside a package, across packages and windows, the end.
    for a, z in [(0, 0), (5, 70000), (65535, 65536), (MIB - 3, 2 * MIB + 5), (len(data) - 9,
                                                                               len(data) - 1)]:
        got = s3.get_object(Bucket=b, Key="k", Range=f"bytes={a}-{z}")["Body"].read()
        assert got == data[a:z + 1], (a, z)
    assert s3.head_object(Bucket=b, Key="k")["ContentLength"] == len(data)
    listed = s3.list_objects_v2(Bucket=b)["Contents"]
    assert [(o["Key"], o["Size"]) for o in listed] == [("k", len(data))]
    # Empty and one-package-exact objects.
    for n in (0, 65536, 1):
        s3.put_object(Bucket=b, Key=f"n{n}", Body=data[:n], ServerSideEncryption="AES256")
        assert s3.get_object(Bucket=b, Key=f"n{n}")["Body"].read() == data[:n]


def test_sse_c_round_trip_and_errors(mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    key, other = os.urandom(32), os.urandom(32)
    data = body(300000, "c")
    r = s3.put_object(Bucket=b, Key="c", Body=data, **ssec(key))
    assert r["SSECustomerAlgorithm"] == "AES256"
    assert r["SSECustomerKeyMD5"] == base64.b64encode(hashlib.md5(key).digest()).decode()
    g = s3.get_object(Bucket=b, Key="c", **ssec(key))
    assert g["Body"].read() == data and g["SSECustomerAlgorithm"] == "AES256"
    got = s3.get_object(Bucket=b, Key="c", Range="bytes=100-200000", **ssec(key))["Body"].read()
    assert got == data[100:200001]
    assert s3.head_object(Bucket=b, Key="c", **ssec(key))["ContentLength"] == len(data)
    # No key: 400; another key: 403 (GET and HEAD); the list still shows it.
    assert code_status(s3.get_object, Bucket=b, Key="c") == ("InvalidRequest", 400)
    assert code_status(s3.get_object, Bucket=b, Key="c", **ssec(other))[1] == 403
    assert code_status(s3.head_object, Bucket=b, Key="c")[1] == 400
    assert code_status(s3.head_object, Bucket=b, Key="c", **ssec(other))[1] == 403
    assert s3.list_objects_v2(Bucket=b)["Contents"][0]["Size"] == len(data)
    # A key given for an object that has none is refused too.
    s3.put_object(Bucket=b, Key="plain", Body=b"x")
    assert code_status(s3.get_object, Bucket=b, Key="plain", **ssec(key))[1] == 400


def test_sse_c_malformed_headers(mode_server, mode_bucket):
    key = os.urandom(32)
    k64 = base64.b64encode(key).decode()
    good_md5 = base64.b64encode(hashlib.md5(key).digest()).decode()
    bad_md5 = base64.b64encode(hashlib.md5(b"x").digest()).decode()
    cases = [
        ({"x-amz-server-side-encryption-customer-algorithm": "AES256",
          "x-amz-server-side-encryption-customer-key": k64,
          "x-amz-server-side-encryption-customer-key-MD5": bad_md5}, 400),
        ({"x-amz-server-side-encryption-customer-algorithm": "AES256",
          "x-amz-server-side-encryption-customer-key": k64}, 400),
        ({"x-amz-server-side-encryption-customer-key": k64,
          "x-amz-server-side-encryption-customer-key-MD5": good_md5}, 400),
        ({"x-amz-server-side-encryption-customer-algorithm": "AES256",
          "x-amz-server-side-encryption-customer-key": base64.b64encode(b"short").decode(),
          "x-amz-server-side-encryption-customer-key-MD5":
              base64.b64encode(hashlib.md5(b"short").digest()).decode()}, 400),
        ({"x-amz-server-side-encryption": "AES512"}, 400),
        ({"x-amz-server-side-encryption": "aws:kms"}, 501),
        ({"x-amz-server-side-encryption": "AES256",
          "x-amz-server-side-encryption-customer-algorithm": "AES256",
          "x-amz-server-side-encryption-customer-key": k64,
          "x-amz-server-side-encryption-customer-key-MD5": good_md5}, 400),
    ]
    for hdrs, status in cases:
        r = helpers.signed_request(mode_server, "PUT", f"/{mode_bucket}/bad", body=b"data",
                                   headers=hdrs)
        assert r.status == status, (hdrs, r.status, r.body)
    # Nothing was stored by any of them.
    r = helpers.signed_request(mode_server, "HEAD", f"/{mode_bucket}/bad")
    assert r.status == 404


def test_multipart(mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    key = os.urandom(32)
    parts = [body(5 * MIB, "p1"), body(5 * MIB + 7, "p2"), body(100, "p3")]
    full = b"".join(parts)
    for kind, extra in (("s3", {"ServerSideEncryption": "AES256"}), ("c", ssec(key))):
        k = f"mp-{kind}"
        mp = s3.create_multipart_upload(Bucket=b, Key=k, **extra)
        uid = mp["UploadId"]
        part_kw = ssec(key) if kind == "c" else {}
        if kind == "c":
            # Every part must carry the upload's key.
            assert code_status(s3.upload_part, Bucket=b, Key=k, UploadId=uid, PartNumber=1,
                               Body=b"x")[1] == 400
            assert code_status(s3.upload_part, Bucket=b, Key=k, UploadId=uid, PartNumber=1,
                               Body=b"x", **ssec(os.urandom(32)))[1] == 400
        done = []
        for i, p in enumerate(parts, 1):
            e = s3.upload_part(Bucket=b, Key=k, UploadId=uid, PartNumber=i, Body=p,
                               **part_kw)["ETag"]
            done.append({"ETag": e, "PartNumber": i})
        listed = s3.list_parts(Bucket=b, Key=k, UploadId=uid)["Parts"]
        assert [p["Size"] for p in listed] == [len(p) for p in parts]
        s3.complete_multipart_upload(Bucket=b, Key=k, UploadId=uid,
                                     MultipartUpload={"Parts": done})
        get_kw = ssec(key) if kind == "c" else {}
        assert s3.get_object(Bucket=b, Key=k, **get_kw)["Body"].read() == full
        a, z = 5 * MIB - 1000, 10 * MIB + 3
        rng = s3.get_object(Bucket=b, Key=k, Range=f"bytes={a}-{z}", **get_kw)["Body"].read()
        assert rng == full[a:z + 1]
        assert s3.get_object(Bucket=b, Key=k, PartNumber=2, **get_kw)["Body"].read() == parts[1]
        assert s3.head_object(Bucket=b, Key=k, **get_kw)["ContentLength"] == len(full)
    sizes = {o["Key"]: o["Size"] for o in s3.list_objects_v2(Bucket=b)["Contents"]}
    assert sizes == {"mp-s3": len(full), "mp-c": len(full)}


def test_copies(mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    k1, k2 = os.urandom(32), os.urandom(32)
    data = body(200000, "copy")
    s3.put_object(Bucket=b, Key="s3src", Body=data, ServerSideEncryption="AES256",
                  Metadata={"m": "1"})
    s3.put_object(Bucket=b, Key="csrc", Body=data, **ssec(k1))
    plain = b"Q" + data[1:]  # stored in the clear: without MARK
    s3.put_object(Bucket=b, Key="plain", Body=plain)
    # SSE-S3 -> SSE-S3 (by reference) keeps its metadata and encryption.
    s3.copy_object(Bucket=b, Key="d1", CopySource=f"{b}/s3src")
    g = s3.get_object(Bucket=b, Key="d1")
    assert g["Body"].read() == data and g["ServerSideEncryption"] == "AES256"
    assert g["Metadata"] == {"m": "1"}
    # SSE-C -> SSE-S3 needs the source's key.
    assert code_status(s3.copy_object, Bucket=b, Key="d2", CopySource=f"{b}/csrc")[1] == 400
    s3.copy_object(Bucket=b, Key="d2", CopySource=f"{b}/csrc", ServerSideEncryption="AES256",
                   CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=k1)
    assert s3.get_object(Bucket=b, Key="d2")["Body"].read() == data
    # SSE-C -> SSE-C under another key, and plain -> SSE-C.
    s3.copy_object(Bucket=b, Key="d3", CopySource=f"{b}/csrc", CopySourceSSECustomerAlgorithm=
                   "AES256", CopySourceSSECustomerKey=k1, **ssec(k2))
    assert s3.get_object(Bucket=b, Key="d3", **ssec(k2))["Body"].read() == data
    assert code_status(s3.get_object, Bucket=b, Key="d3", **ssec(k1))[1] == 403
    s3.copy_object(Bucket=b, Key="d4", CopySource=f"{b}/plain", **ssec(k2))
    assert s3.get_object(Bucket=b, Key="d4", **ssec(k2))["Body"].read() == plain
    # SSE-S3 -> plain is not possible without a default: it stays encrypted;
    # a self-copy that asks for SSE-C re-encrypts in place.
    s3.copy_object(Bucket=b, Key="s3src", CopySource=f"{b}/s3src", **ssec(k1))
    assert s3.get_object(Bucket=b, Key="s3src", **ssec(k1))["Body"].read() == data
    # UploadPartCopy from an SSE-C source into an SSE-S3 upload.
    mp = s3.create_multipart_upload(Bucket=b, Key="pc", ServerSideEncryption="AES256")
    r = s3.upload_part_copy(Bucket=b, Key="pc", UploadId=mp["UploadId"], PartNumber=1,
                            CopySource=f"{b}/csrc", CopySourceRange="bytes=10-150009",
                            CopySourceSSECustomerAlgorithm="AES256",
                            CopySourceSSECustomerKey=k1)
    etag = r["CopyPartResult"]["ETag"]
    assert etag.strip('"') == hashlib.md5(data[10:150010]).hexdigest()
    s3.complete_multipart_upload(Bucket=b, Key="pc", UploadId=mp["UploadId"],
                                 MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
    assert s3.get_object(Bucket=b, Key="pc")["Body"].read() == data[10:150010]


def test_bucket_default_encryption(mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    assert code_status(s3.get_bucket_encryption, Bucket=b) == (
        "ServerSideEncryptionConfigurationNotFoundError", 404)
    s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    rule = s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    data = body(70000, "default")
    assert s3.put_object(Bucket=b, Key="d", Body=data)["ServerSideEncryption"] == "AES256"
    g = s3.get_object(Bucket=b, Key="d")
    assert g["ServerSideEncryption"] == "AES256" and g["Body"].read() == data
    with pytest.raises(ClientError) as e:
        s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
            {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms"}}]})
    assert helpers.http_status(e.value) == 501
    s3.delete_bucket_encryption(Bucket=b)
    assert code_status(s3.get_bucket_encryption, Bucket=b)[1] == 404
    assert "ServerSideEncryption" not in s3.put_object(Bucket=b, Key="p", Body=b"x")


def test_aws_cli(mode_server, mode_bucket, tmp_path):
    # The CLI takes seconds per command here; the S3 layer it talks to is
    # the same in both modes, which the boto3 tests above cover.
    if mode_server.mode == "ec":
        pytest.skip("the CLI runs against one drive")
    aws = helpers.aws_runner(mode_server.endpoint, tmp_path)
    src = tmp_path / "src.bin"
    data = body(9 * MIB + 3, "cli")  # past the CLI's 8 MiB multipart threshold
    src.write_bytes(data)
    keyf = tmp_path / "key.bin"
    keyf.write_bytes(os.urandom(32))
    aws("s3", "cp", src, f"s3://{mode_bucket}/cli-s3", "--sse", "AES256")
    aws("s3", "cp", src, f"s3://{mode_bucket}/cli-c", "--sse-c", "AES256",
        "--sse-c-key", f"fileb://{keyf}")
    out = tmp_path / "out.bin"
    aws("s3", "cp", f"s3://{mode_bucket}/cli-s3", out)
    assert out.read_bytes() == data
    aws("s3", "cp", f"s3://{mode_bucket}/cli-c", out, "--sse-c", "AES256", "--sse-c-key",
        f"fileb://{keyf}")
    assert out.read_bytes() == data
    head = helpers.make_client(mode_server.endpoint).head_object(Bucket=mode_bucket,
                                                                 Key="cli-s3")
    assert head["ServerSideEncryption"] == "AES256"


def test_restart_and_drives_hold_no_plaintext(mode_server, mode_s3, mode_bucket):
    s3, b = mode_s3, mode_bucket
    key = os.urandom(32)
    data = body(100000, "restart")
    s3.put_object(Bucket=b, Key="r1", Body=data, ServerSideEncryption="AES256")
    s3.put_object(Bucket=b, Key="r2", Body=data, **ssec(key))
    mode_server.restart()
    s3 = helpers.make_client(mode_server.endpoint)
    assert s3.get_object(Bucket=b, Key="r1")["Body"].read() == data
    assert s3.get_object(Bucket=b, Key="r2", **ssec(key))["Body"].read() == data
    # Every test above wrote MARK-prefixed bodies only encrypted (the
    # plain ones are excluded by name: "plain" and "p" hold other bytes).
    roots = [mode_server.data_dir] if mode_server.mode == "sd" else \
        [mode_server.drive(i) for i in range(6)]
    found = subprocess.run(["grep", "-rl", "-a", MARK.decode(), *map(str, roots)],
                           capture_output=True, text=True)
    assert found.stdout == "", found.stdout
    # Nor does any drive hold a customer key.
    hits = subprocess.run(["grep", "-rlF", "-a", base64.b64encode(key).decode(),
                           *map(str, roots)], capture_output=True, text=True)
    assert hits.stdout == ""


def test_native_port(mode_server, mode_s3, mode_bucket):
    """The native port reads SSE-S3 objects as plaintext (the object layer
    opens them), refuses SSE-C ones (it carries no customer key), and its PUTs
    into a default-encrypted bucket are sealed."""
    openlake = helpers.import_openlake()
    s3, b = mode_s3, mode_bucket
    data = body(300000, "native")
    s3.put_object(Bucket=b, Key="n-s3", Body=data, ServerSideEncryption="AES256")
    s3.put_object(Bucket=b, Key="n-c", Body=data, **ssec(os.urandom(32)))
    with openlake.Client(mode_server.endpoint) as c:
        assert c.head(b, "n-s3").size == len(data)
        assert bytes(c.get(b, "n-s3")) == data
        with pytest.raises(openlake.Error):
            c.get(b, "n-c")
        s3.put_bucket_encryption(Bucket=b, ServerSideEncryptionConfiguration={"Rules": [
            {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
        c.put(b, "n-put", data)
    g = s3.get_object(Bucket=b, Key="n-put")
    assert g["ServerSideEncryption"] == "AES256" and g["Body"].read() == data

