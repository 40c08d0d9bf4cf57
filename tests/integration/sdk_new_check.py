#!/usr/bin/env python3
"""Exercises OpenLake with whatever boto3 the running interpreter has, with
its default checksum behaviour (new SDKs send CRC32 checksums and
aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER bodies).

usage: sdk_new_check.py ENDPOINT_URL [ACCESS_KEY SECRET_KEY]
Exits 0 when every step passes, 1 otherwise.  Standalone: no pytest needed.
"""

import base64
import hashlib
import os
import sys
import tempfile
import traceback
import zlib

import boto3
import botocore
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

MIB = 1024 * 1024


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(MIB), b""):
            h.update(b)
    return h.hexdigest()


def run(endpoint, access, secret):
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=access, aws_secret_access_key=secret,
                      config=Config(s3={"addressing_style": "path"},
                                    retries={"max_attempts": 1}))
    bucket = f"sdk-new-{os.getpid()}"
    steps = []

    def step(name):
        steps.append(name)
        print(f"  {name}", flush=True)

    step("create_bucket")
    s3.create_bucket(Bucket=bucket)
    check(bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]], "bucket not listed")

    step("put_object small (default checksums)")
    small = os.urandom(3000)
    r = s3.put_object(Bucket=bucket, Key="small", Body=small)
    check(r["ETag"] == f'"{hashlib.md5(small).hexdigest()}"', f"ETag {r['ETag']}")

    step("put_object with explicit CRC32 checksum and metadata")
    r = s3.put_object(Bucket=bucket, Key="crc", Body=b"checksummed", ChecksumAlgorithm="CRC32",
                      Metadata={"m": "v"}, ContentType="text/plain")

    step("get_object")
    got = s3.get_object(Bucket=bucket, Key="small")
    check(got["Body"].read() == small, "small object content differs")
    got = s3.get_object(Bucket=bucket, Key="crc")
    check(got["Body"].read() == b"checksummed", "crc object content differs")
    check(got["Metadata"] == {"m": "v"}, f"metadata {got['Metadata']}")
    check(got["ContentType"] == "text/plain", f"content type {got['ContentType']}")
    check("aws-chunked" not in (got.get("ContentEncoding") or ""),
          "aws-chunked leaked into Content-Encoding")

    step("checksum mode ENABLED returns the CRC32 the SDK sent")
    want = base64.b64encode(zlib.crc32(small).to_bytes(4, "big")).decode()
    head = s3.head_object(Bucket=bucket, Key="small", ChecksumMode="ENABLED")
    check(head.get("ChecksumCRC32") == want, f"CRC32 {head.get('ChecksumCRC32')} != {want}")
    got = s3.get_object(Bucket=bucket, Key="small", ChecksumMode="ENABLED")
    check(got.get("ChecksumCRC32") == want, f"GET CRC32 {got.get('ChecksumCRC32')}")
    check(got["Body"].read() == small, "small object content differs (checksum mode)")
    head = s3.head_object(Bucket=bucket, Key="small")
    check("ChecksumCRC32" not in head, "checksum returned without checksum mode")
    try:
        s3.put_object(Bucket=bucket, Key="bad-crc", Body=b"data", ChecksumCRC32="AAAAAA==")
        raise AssertionError("a wrong CRC32 was accepted")
    except ClientError as e:
        check(e.response["Error"]["Code"] == "BadDigest", str(e))

    step("get_object_attributes")
    r = s3.get_object_attributes(Bucket=bucket, Key="small", ObjectAttributes=[
        "ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"])
    check(r["ETag"] == hashlib.md5(small).hexdigest(), f"attributes ETag {r.get('ETag')}")
    check(r["ObjectSize"] == len(small), f"attributes size {r.get('ObjectSize')}")
    check(r["StorageClass"] == "STANDARD", f"storage class {r.get('StorageClass')}")
    check(r.get("Checksum", {}).get("ChecksumCRC32") == want,
          f"attributes checksum {r.get('Checksum')}")

    step("conditional put (IfNoneMatch) and delete_objects")
    s3.put_object(Bucket=bucket, Key="once", Body=b"1", IfNoneMatch="*")
    try:
        s3.put_object(Bucket=bucket, Key="once", Body=b"2", IfNoneMatch="*")
        raise AssertionError("second create-only put succeeded")
    except ClientError as e:
        check(e.response["ResponseMetadata"]["HTTPStatusCode"] == 412, str(e))
    r = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "once"}, {"Key": "nope"}]})
    check(sorted(d["Key"] for d in r.get("Deleted", [])) == ["nope", "once"], f"deleted {r}")

    step("get_object range")
    got = s3.get_object(Bucket=bucket, Key="small", Range="bytes=10-19")
    check(got["Body"].read() == small[10:20], "range content differs")

    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "src.bin")
        with open(src, "wb") as f:
            for _ in range(20):
                f.write(os.urandom(MIB))
        step("upload_file 20 MiB (multipart)")
        s3.upload_file(src, bucket, "big/file.bin")
        head = s3.head_object(Bucket=bucket, Key="big/file.bin")
        check(head["ContentLength"] == 20 * MIB, f"size {head['ContentLength']}")
        check("-" in head["ETag"], f"expected a multipart ETag, got {head['ETag']}")
        step("download_file")
        dst = os.path.join(d, "dst.bin")
        s3.download_file(bucket, "big/file.bin", dst)
        check(file_sha256(dst) == file_sha256(src), "downloaded file differs")
        step("upload_file with small parts")
        s3.upload_file(src, bucket, "big/parts.bin",
                       Config=TransferConfig(multipart_threshold=5 * MIB,
                                             multipart_chunksize=5 * MIB))
        s3.download_file(bucket, "big/parts.bin", dst)
        check(file_sha256(dst) == file_sha256(src), "downloaded file (5 MiB parts) differs")
        step("multipart object checksum and ?partNumber=")
        head = s3.head_object(Bucket=bucket, Key="big/parts.bin", ChecksumMode="ENABLED")
        crc = head.get("ChecksumCRC32")
        if head.get("ChecksumType") == "FULL_OBJECT":
            with open(src, "rb") as f:
                whole = zlib.crc32(f.read()).to_bytes(4, "big")
            check(crc == base64.b64encode(whole).decode(), f"full-object CRC32 {crc}")
        else:
            check(crc is None or crc.endswith("-4"), f"composite CRC32 {crc}")
        part = s3.get_object(Bucket=bucket, Key="big/parts.bin", PartNumber=2)
        check(part["PartsCount"] == 4, f"parts count {part.get('PartsCount')}")
        with open(src, "rb") as f:
            f.seek(5 * MIB)
            check(part["Body"].read() == f.read(5 * MIB), "part 2 content differs")

    step("list_objects_v2")
    r = s3.list_objects_v2(Bucket=bucket)
    keys = [o["Key"] for o in r.get("Contents", [])]
    check(keys == ["big/file.bin", "big/parts.bin", "crc", "small"], f"keys {keys}")
    r = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
    check([p["Prefix"] for p in r.get("CommonPrefixes", [])] == ["big/"], "common prefixes")

    step("delete_object")
    s3.delete_object(Bucket=bucket, Key="small")
    try:
        s3.head_object(Bucket=bucket, Key="small")
        raise AssertionError("deleted object still there")
    except ClientError as e:
        check(e.response["Error"]["Code"] in ("404", "NoSuchKey"), str(e))
    for k in ["crc", "big/file.bin", "big/parts.bin"]:
        s3.delete_object(Bucket=bucket, Key=k)
    check(s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0, "bucket not empty")

    step("delete_bucket")
    s3.delete_bucket(Bucket=bucket)
    return steps


def main(argv):
    if len(argv) not in (2, 4):
        print(__doc__, file=sys.stderr)
        return 1
    endpoint = argv[1]
    access, secret = (argv[2], argv[3]) if len(argv) == 4 else ("openlake", "openlake-secret")
    print(f"boto3 {boto3.__version__}, botocore {botocore.__version__}, endpoint {endpoint}")
    try:
        steps = run(endpoint, access, secret)
    except Exception:  # noqa: BLE001 - report any failure as exit 1
        traceback.print_exc()
        print("FAIL")
        return 1
    print(f"OK ({len(steps)} steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
