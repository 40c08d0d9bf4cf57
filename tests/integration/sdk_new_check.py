#!/usr/bin/env python3
"""Exercises OpenLake with whatever boto3 the running interpreter has, with
its default checksum behaviour (new SDKs send CRC32 checksums and
aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER bodies).

usage: sdk_new_check.py ENDPOINT_URL [ACCESS_KEY SECRET_KEY]

Runs every check in order, printing "PASS name" or "FAIL name: error" for
each (a check that needs what an earlier one made fails too when that one
did), then "OK (N checks)" or "FAIL (M of N checks)".  Exits 0 when every
check passed, 1 otherwise.  Standalone: no pytest needed;
tests/integration/test_sdk_new.py lists the same check names.
"""

import base64
import hashlib
import os
import sys
import tempfile
import traceback
import urllib.error
import urllib.request
import zlib

import boto3
import botocore
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

MIB = 1024 * 1024
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(MIB), b""):
            h.update(b)
    return h.hexdigest()


def crc32_b64(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


class Ctx:
    def __init__(self, s3, s3v4, bucket, tmp):
        self.s3 = s3
        self.s3v4 = s3v4
        self.bucket = bucket
        self.tmp = tmp
        self.small = os.urandom(3000)
        self.src = os.path.join(tmp, "src.bin")
        self.dst = os.path.join(tmp, "dst.bin")


@check
def create_bucket(c):
    c.s3.create_bucket(Bucket=c.bucket)
    names = [b["Name"] for b in c.s3.list_buckets()["Buckets"]]
    expect(c.bucket in names, "bucket not listed")


@check
def put_object_default_checksum(c):
    r = c.s3.put_object(Bucket=c.bucket, Key="small", Body=c.small)
    expect(r["ETag"] == f'"{hashlib.md5(c.small).hexdigest()}"', f"ETag {r['ETag']}")


@check
def put_object_crc32_metadata(c):
    c.s3.put_object(Bucket=c.bucket, Key="crc", Body=b"checksummed", ChecksumAlgorithm="CRC32",
                    Metadata={"m": "v"}, ContentType="text/plain")


@check
def get_object(c):
    got = c.s3.get_object(Bucket=c.bucket, Key="small")
    expect(got["Body"].read() == c.small, "small object content differs")
    got = c.s3.get_object(Bucket=c.bucket, Key="crc")
    expect(got["Body"].read() == b"checksummed", "crc object content differs")
    expect(got["Metadata"] == {"m": "v"}, f"metadata {got['Metadata']}")
    expect(got["ContentType"] == "text/plain", f"content type {got['ContentType']}")
    expect("aws-chunked" not in (got.get("ContentEncoding") or ""),
           "aws-chunked leaked into Content-Encoding")


@check
def checksum_mode_enabled(c):
    """Checksum mode ENABLED returns the CRC32 the SDK sent (and only then)."""
    want = crc32_b64(c.small)
    head = c.s3.head_object(Bucket=c.bucket, Key="small", ChecksumMode="ENABLED")
    expect(head.get("ChecksumCRC32") == want, f"CRC32 {head.get('ChecksumCRC32')} != {want}")
    got = c.s3.get_object(Bucket=c.bucket, Key="small", ChecksumMode="ENABLED")
    expect(got.get("ChecksumCRC32") == want, f"GET CRC32 {got.get('ChecksumCRC32')}")
    expect(got["Body"].read() == c.small, "small object content differs (checksum mode)")
    head = c.s3.head_object(Bucket=c.bucket, Key="small")
    expect("ChecksumCRC32" not in head, "checksum returned without checksum mode")


@check
def wrong_crc32_rejected(c):
    try:
        c.s3.put_object(Bucket=c.bucket, Key="bad-crc", Body=b"data", ChecksumCRC32="AAAAAA==")
        raise AssertionError("a wrong CRC32 was accepted")
    except ClientError as e:
        expect(e.response["Error"]["Code"] == "BadDigest", str(e))



@check
def get_object_attributes(c):
    body = b"attributes" * 100
    r = c.s3.put_object(Bucket=c.bucket, Key="attrs", Body=body, ChecksumAlgorithm="CRC32")
    want = r.get("ChecksumCRC32")
    a = c.s3.get_object_attributes(Bucket=c.bucket, Key="attrs", ObjectAttributes=[
        "ETag", "Checksum", "ObjectParts", "StorageClass", "ObjectSize"])
    expect(a["ETag"] == hashlib.md5(body).hexdigest(), f"attributes ETag {a.get('ETag')}")
    expect(a["ObjectSize"] == len(body), f"attributes size {a.get('ObjectSize')}")
    expect(a["StorageClass"] == "STANDARD", f"storage class {a.get('StorageClass')}")
    expect(a.get("Checksum", {}).get("ChecksumCRC32") == want,
           f"attributes checksum {a.get('Checksum')}")

@check
def conditional_put(c):
    c.s3.put_object(Bucket=c.bucket, Key="once", Body=b"1", IfNoneMatch="*")
    try:
        c.s3.put_object(Bucket=c.bucket, Key="once", Body=b"2", IfNoneMatch="*")
        raise AssertionError("second create-only put succeeded")
    except ClientError as e:
        expect(e.response["ResponseMetadata"]["HTTPStatusCode"] == 412, str(e))


@check
def delete_objects(c):
    c.s3.put_object(Bucket=c.bucket, Key="gone", Body=b"1")
    r = c.s3.delete_objects(Bucket=c.bucket,
                            Delete={"Objects": [{"Key": "gone"}, {"Key": "nope"}]})
    expect(sorted(d["Key"] for d in r.get("Deleted", [])) == ["gone", "nope"], f"deleted {r}")


@check
def get_object_range(c):
    got = c.s3.get_object(Bucket=c.bucket, Key="small", Range="bytes=10-19")
    expect(got["Body"].read() == c.small[10:20], "range content differs")


@check
def copy_object(c):
    c.s3.copy_object(Bucket=c.bucket, Key="copy", CopySource={"Bucket": c.bucket, "Key": "crc"})
    got = c.s3.get_object(Bucket=c.bucket, Key="copy")
    expect(got["Body"].read() == b"checksummed", "copy content differs")
    expect(got["Metadata"] == {"m": "v"}, f"metadata {got['Metadata']}")
    c.s3.delete_object(Bucket=c.bucket, Key="copy")


@check
def presigned_get_and_put(c):
    # Presigned with SigV4 (boto3 presigns S3 URLs with SigV2 unless told,
    # which OpenLake refuses: docs/S3-COMPATIBILITY.md).
    url = c.s3v4.generate_presigned_url("put_object", Params={"Bucket": c.bucket, "Key": "pre"},
                                      ExpiresIn=300)
    req = urllib.request.Request(url, data=b"presigned body", method="PUT")
    with urllib.request.urlopen(req, timeout=30) as r:
        expect(r.status == 200, f"PUT status {r.status}")
    url = c.s3v4.generate_presigned_url("get_object", Params={"Bucket": c.bucket, "Key": "pre"},
                                      ExpiresIn=300)
    with urllib.request.urlopen(url, timeout=30) as r:
        expect(r.read() == b"presigned body", "presigned GET body differs")
    c.s3.delete_object(Bucket=c.bucket, Key="pre")


@check
def upload_file_multipart(c):
    with open(c.src, "wb") as f:
        for _ in range(20):
            f.write(os.urandom(MIB))
    c.s3.upload_file(c.src, c.bucket, "big/file.bin")
    head = c.s3.head_object(Bucket=c.bucket, Key="big/file.bin")
    expect(head["ContentLength"] == 20 * MIB, f"size {head['ContentLength']}")
    expect("-" in head["ETag"], f"expected a multipart ETag, got {head['ETag']}")


@check
def download_file(c):
    c.s3.download_file(c.bucket, "big/file.bin", c.dst)
    expect(file_sha256(c.dst) == file_sha256(c.src), "downloaded file differs")


@check
def upload_file_small_parts(c):
    c.s3.upload_file(c.src, c.bucket, "big/parts.bin",
                     Config=TransferConfig(multipart_threshold=5 * MIB,
                                           multipart_chunksize=5 * MIB))
    c.s3.download_file(c.bucket, "big/parts.bin", c.dst)
    expect(file_sha256(c.dst) == file_sha256(c.src), "downloaded file (5 MiB parts) differs")


@check
def multipart_checksum_and_part_number(c):
    head = c.s3.head_object(Bucket=c.bucket, Key="big/parts.bin", ChecksumMode="ENABLED")
    crc = head.get("ChecksumCRC32")
    if head.get("ChecksumType") == "FULL_OBJECT":
        with open(c.src, "rb") as f:
            whole = crc32_b64(f.read())
        expect(crc == whole, f"full-object CRC32 {crc}")
    else:
        expect(crc is None or crc.endswith("-4"), f"composite CRC32 {crc}")
    part = c.s3.get_object(Bucket=c.bucket, Key="big/parts.bin", PartNumber=2)
    expect(part["PartsCount"] == 4, f"parts count {part.get('PartsCount')}")
    with open(c.src, "rb") as f:
        f.seek(5 * MIB)
        expect(part["Body"].read() == f.read(5 * MIB), "part 2 content differs")


@check
def list_objects_v2(c):
    r = c.s3.list_objects_v2(Bucket=c.bucket)
    keys = [o["Key"] for o in r.get("Contents", [])]
    expect(keys == ["attrs", "big/file.bin", "big/parts.bin", "crc", "once", "small"],
           f"keys {keys}")
    r = c.s3.list_objects_v2(Bucket=c.bucket, Delimiter="/")
    expect([p["Prefix"] for p in r.get("CommonPrefixes", [])] == ["big/"], "common prefixes")


@check
def delete_object(c):
    c.s3.delete_object(Bucket=c.bucket, Key="small")
    try:
        c.s3.head_object(Bucket=c.bucket, Key="small")
        raise AssertionError("deleted object still there")
    except ClientError as e:
        expect(e.response["Error"]["Code"] in ("404", "NoSuchKey"), str(e))


@check
def delete_bucket(c):
    for o in c.s3.list_objects_v2(Bucket=c.bucket).get("Contents", []):
        c.s3.delete_object(Bucket=c.bucket, Key=o["Key"])
    expect(c.s3.list_objects_v2(Bucket=c.bucket)["KeyCount"] == 0, "bucket not empty")
    c.s3.delete_bucket(Bucket=c.bucket)


def run(endpoint, access, secret):
    """Runs every check; returns the names of the failed ones."""
    def client(**kw):
        return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                            aws_access_key_id=access, aws_secret_access_key=secret,
                            config=Config(s3={"addressing_style": "path"},
                                          retries={"max_attempts": 1}, **kw))

    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        c = Ctx(client(), client(signature_version="s3v4"),
                f"sdk-new-{os.getpid()}-{os.urandom(3).hex()}", tmp)
        for fn in CHECKS:
            try:
                fn(c)
                print(f"PASS {fn.__name__}", flush=True)
            except Exception as e:  # noqa: BLE001 - any failure is the check's
                failed.append(fn.__name__)
                msg = " ".join(f"{type(e).__name__}: {e}".split())
                print(f"FAIL {fn.__name__}: {msg[:600]}", flush=True)
                traceback.print_exc(file=sys.stderr)
    return failed


def main(argv):
    if len(argv) not in (2, 4):
        print(__doc__, file=sys.stderr)
        return 1
    endpoint = argv[1]
    access, secret = (argv[2], argv[3]) if len(argv) == 4 else ("openlake", "openlake-secret")
    print(f"boto3 {boto3.__version__}, botocore {botocore.__version__}, endpoint {endpoint}")
    failed = run(endpoint, access, secret)
    if failed:
        print(f"FAIL ({len(failed)} of {len(CHECKS)} checks)")
        return 1
    print(f"OK ({len(CHECKS)} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
