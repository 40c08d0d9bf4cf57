"""Multipart uploads on an erasure-coded server (6 drives, 4+2): boto3 and the
aws CLI.

Parts are erasure-coded objects of their own and a completed upload is a
manifest that refers to them (docs/EC.md, section 7).  Checked: bytes and the
multipart ETag, ranged GETs across part boundaries, ListParts and
ListMultipartUploads, the completion errors, abort, that overwrite, delete,
abort and unused parts give the drives' space back, that no internal key shows
in a listing, that a multipart object survives two wiped drives, and `aws s3
cp` of a 20 MiB file up and down.
"""
import filecmp
import json
import os
import time
import random
import subprocess

import pytest
from botocore.exceptions import ClientError

import helpers

MIB = helpers.MIB


ECServer = helpers.ECServer


@pytest.fixture
def ec(tmp_path):
    srv = ECServer(tmp_path / "ec", threads=2)
    srv.start()
    yield srv
    srv.close()


def wait_until(cond, timeout):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def live_bytes(srv):
    out = subprocess.run([str(helpers.openlake_binary()), "admin", "info", "--endpoint",
                          srv.endpoint], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return sum(d["live_bytes"] for d in json.loads(out.stdout)["drives"])


def upload(s3, bucket, key, parts, **kw):
    mpu = s3.create_multipart_upload(Bucket=bucket, Key=key, **kw)
    uid = mpu["UploadId"]
    done = []
    for n, body in enumerate(parts, 1):
        r = s3.upload_part(Bucket=bucket, Key=key, UploadId=uid, PartNumber=n, Body=body)
        assert r["ETag"] == f'"{helpers.md5_hex(body)}"'
        done.append({"PartNumber": n, "ETag": r["ETag"]})
    return uid, done


def code_of(call):
    with pytest.raises(ClientError) as e:
        call()
    return helpers.error_code(e.value)


def test_ec_multipart(ec):
    s3 = helpers.make_client(ec.endpoint)
    bucket = helpers.unique_bucket("ecmp")
    s3.create_bucket(Bucket=bucket)
    rnd = random.Random(7)
    base = live_bytes(ec)

    # Three parts; ListParts and ListMultipartUploads; Complete; read back.
    parts = [rnd.randbytes(5 * MIB), rnd.randbytes(5 * MIB), rnd.randbytes(1024)]
    data = b"".join(parts)
    uid, done = upload(s3, bucket, "big/obj", parts, ContentType="text/x-test",
                       Metadata={"color": "blue"})
    lp = s3.list_parts(Bucket=bucket, Key="big/obj", UploadId=uid)
    assert [(p["PartNumber"], p["Size"], p["ETag"]) for p in lp["Parts"]] == \
        [(d["PartNumber"], len(b), d["ETag"]) for d, b in zip(done, parts)]
    lp2 = s3.list_parts(Bucket=bucket, Key="big/obj", UploadId=uid, MaxParts=2)
    assert lp2["IsTruncated"] and [p["PartNumber"] for p in lp2["Parts"]] == [1, 2]
    lp3 = s3.list_parts(Bucket=bucket, Key="big/obj", UploadId=uid, PartNumberMarker=2)
    assert [p["PartNumber"] for p in lp3["Parts"]] == [3]
    ups = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [("big/obj", uid)]
    # Uploads are not objects.
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    r = s3.complete_multipart_upload(Bucket=bucket, Key="big/obj", UploadId=uid,
                                     MultipartUpload={"Parts": done})
    etag = helpers.multipart_etag(parts)
    assert r["ETag"] == etag
    got = s3.get_object(Bucket=bucket, Key="big/obj")
    assert got["Body"].read() == data
    assert got["ETag"] == etag and got["ContentLength"] == len(data)
    assert got["ContentType"] == "text/x-test" and got["Metadata"] == {"color": "blue"}
    h = s3.head_object(Bucket=bucket, Key="big/obj")
    assert h["ContentLength"] == len(data) and h["ETag"] == etag
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    assert code_of(lambda: s3.list_parts(Bucket=bucket, Key="big/obj",
                                         UploadId=uid)) == "NoSuchUpload"
    # The parts are stored once, erasure-coded (x 1.5), and never copied
    # (small shards live in the index, outside live_bytes).
    assert live_bytes(ec) - base >= 10 * MIB * 1.5
    assert live_bytes(ec) - base < len(data) * 1.5 + 2 * MIB

    # Ranges inside parts and across part boundaries.
    b1, b2 = 5 * MIB, 10 * MIB
    for a, z in [(0, 0), (b1 - 10, b1 + 10), (b1 - 1, b1), (b2 - 5, len(data) - 1),
                 (100, len(data) - 100), (b2, b2 + 1023), (b1, b2 - 1), (len(data) - 1,
                                                                          len(data) - 1)]:
        r = s3.get_object(Bucket=bucket, Key="big/obj", Range=f"bytes={a}-{z}")
        assert r["Body"].read() == data[a:z + 1], (a, z)
        assert r["ContentRange"] == f"bytes {a}-{z}/{len(data)}"
    r = s3.get_object(Bucket=bucket, Key="big/obj", Range="bytes=-2000")
    assert r["Body"].read() == data[-2000:]

    # Completion errors; the upload survives them and can still be aborted.
    small = [rnd.randbytes(1024), rnd.randbytes(2048)]
    uid2, done2 = upload(s3, bucket, "err", small)

    def complete(plist, up=uid2, key="err"):
        return lambda: s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=up,
                                                    MultipartUpload={"Parts": plist})
    assert code_of(complete(done2[::-1])) == "InvalidPartOrder"
    assert code_of(complete([done2[0], {"PartNumber": 2, "ETag": done2[0]["ETag"]}])) == \
        "InvalidPart"
    assert code_of(complete([done2[0], {"PartNumber": 3, "ETag": done2[1]["ETag"]}])) == \
        "InvalidPart"
    assert code_of(complete(done2)) == "EntityTooSmall"
    bogus = "0123456789abcdef0123456789abcdef"
    assert code_of(complete(done2, up=bogus)) == "NoSuchUpload"
    assert code_of(complete(done2, key="other")) == "NoSuchUpload"
    assert code_of(lambda: s3.upload_part(Bucket=bucket, Key="err", UploadId=bogus,
                                          PartNumber=1, Body=b"x")) == "NoSuchUpload"
    assert code_of(lambda: s3.list_parts(Bucket=bucket, Key="err",
                                         UploadId="nope")) == "NoSuchUpload"
    assert [p["PartNumber"] for p in
            s3.list_parts(Bucket=bucket, Key="err", UploadId=uid2)["Parts"]] == [1, 2]
    s3.abort_multipart_upload(Bucket=bucket, Key="err", UploadId=uid2)
    assert code_of(lambda: s3.abort_multipart_upload(Bucket=bucket, Key="err",
                                                     UploadId=uid2)) == "NoSuchUpload"
    assert code_of(lambda: s3.list_parts(Bucket=bucket, Key="err",
                                         UploadId=uid2)) == "NoSuchUpload"
    assert "Uploads" not in s3.list_multipart_uploads(Bucket=bucket)
    # A one-part upload below the minimum is fine (the last part may be small).
    uid3, done3 = upload(s3, bucket, "one", [b"tiny"])
    s3.complete_multipart_upload(Bucket=bucket, Key="one", UploadId=uid3,
                                 MultipartUpload={"Parts": done3})
    assert s3.get_object(Bucket=bucket, Key="one")["Body"].read() == b"tiny"

    # Complete with a subset: the unused part's space is given back.
    sub = [rnd.randbytes(5 * MIB), rnd.randbytes(3 * MIB), rnd.randbytes(777)]
    before = live_bytes(ec)
    uid4, done4 = upload(s3, bucket, "sub", sub)
    s3.complete_multipart_upload(Bucket=bucket, Key="sub", UploadId=uid4,
                                 MultipartUpload={"Parts": [done4[0], done4[2]]})
    assert s3.get_object(Bucket=bucket, Key="sub")["Body"].read() == sub[0] + sub[2]
    assert live_bytes(ec) - before < (5 * MIB + 777) * 1.5 + MIB

    # Listing: only the S3 keys, with the multipart objects' sizes.
    objs = s3.list_objects_v2(Bucket=bucket)["Contents"]
    assert [(o["Key"], o["Size"], o["ETag"]) for o in objs] == [
        ("big/obj", len(data), etag), ("one", 4, helpers.multipart_etag([b"tiny"])),
        ("sub", 5 * MIB + 777, helpers.multipart_etag([sub[0], sub[2]]))]

    # Two drives wiped: the multipart object still reads back whole.
    ec.stop()
    ec.wipe(0)
    ec.wipe(3)
    ec.start()
    assert s3.get_object(Bucket=bucket, Key="big/obj")["Body"].read() == data
    r = s3.get_object(Bucket=bucket, Key="big/obj", Range=f"bytes={b1 - 7}-{b2 + 7}")
    assert r["Body"].read() == data[b1 - 7:b2 + 8]

    # Overwrite one multipart object and delete the others: the parts go.
    base2 = live_bytes(ec)
    s3.put_object(Bucket=bucket, Key="big/obj", Body=b"plain now")
    assert s3.get_object(Bucket=bucket, Key="big/obj")["Body"].read() == b"plain now"
    s3.delete_object(Bucket=bucket, Key="sub")
    s3.delete_object(Bucket=bucket, Key="one")
    assert code_of(lambda: s3.get_object(Bucket=bucket, Key="sub")) == "NoSuchKey"
    # Two drives were empty; the parts go in the background.
    wait_until(lambda: base2 - live_bytes(ec) > (len(data) + 5 * MIB) * 1.5 * 0.6, 30)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["big/obj"]
    # A multipart object replacing another multipart object.
    uid5, done5 = upload(s3, bucket, "big/obj", [rnd.randbytes(5 * MIB), b"end"])
    s3.complete_multipart_upload(Bucket=bucket, Key="big/obj", UploadId=uid5,
                                 MultipartUpload={"Parts": done5})
    mid = live_bytes(ec)
    uid6, done6 = upload(s3, bucket, "big/obj", [b"again"])
    s3.complete_multipart_upload(Bucket=bucket, Key="big/obj", UploadId=uid6,
                                 MultipartUpload={"Parts": done6})
    # The replaced object's parts are removed in the background (the
    # cleaner, s3/ec_multipart.h): soon, not before Complete returns.
    wait_until(lambda: mid - live_bytes(ec) > 5 * MIB, 30)
    assert s3.get_object(Bucket=bucket, Key="big/obj")["Body"].read() == b"again"
    s3.delete_object(Bucket=bucket, Key="big/obj")
    assert s3.list_objects_v2(Bucket=bucket)["KeyCount"] == 0
    # BucketNotEmpty until the cleaner has removed the last parts.
    def bucket_deleted():
        try:
            s3.delete_bucket(Bucket=bucket)
            return True
        except ClientError as e:
            assert helpers.error_code(e) == "BucketNotEmpty"
            return False
    wait_until(bucket_deleted, 30)


def test_ec_multipart_aws_cli(ec, tmp_path):
    s3 = helpers.make_client(ec.endpoint)
    bucket = helpers.unique_bucket("ecli")
    s3.create_bucket(Bucket=bucket)
    aws = helpers.aws_runner(ec.endpoint, tmp_path)
    src = tmp_path / "src.bin"
    helpers.write_random_file(src, 20 * MIB)
    aws("s3", "cp", src, f"s3://{bucket}/dir/file.bin")
    h = s3.head_object(Bucket=bucket, Key="dir/file.bin")
    assert h["ContentLength"] == 20 * MIB and h["ETag"].endswith('-3"')
    dst = tmp_path / "dst.bin"
    aws("s3", "cp", f"s3://{bucket}/dir/file.bin", dst)
    assert filecmp.cmp(src, dst, shallow=False)
    out = aws("s3", "ls", f"s3://{bucket}/dir/")
    assert str(20 * MIB) in str(out)


def test_concurrent_completes_do_not_hang(ec):
    """Eight CompleteMultipartUploads at once on two loop threads.  Each
    records its upload for a repeated Complete in a bucket setting, whose
    read and write park the fiber; a thread lock held across them stopped
    both loops for good (the server answered nothing any more)."""
    import concurrent.futures

    s3 = helpers.make_client(ec.endpoint, read_timeout=20)
    bucket = helpers.unique_bucket("ecmpc")
    s3.create_bucket(Bucket=bucket)
    small = b"x" * 1000
    ups = [(f"k{i}",) + upload(s3, bucket, f"k{i}", [small]) for i in range(8)]

    def complete(u):
        key, uid, parts = u
        s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=uid,
                                     MultipartUpload={"Parts": parts})
        return key

    for _ in range(3):
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            assert sorted(ex.map(complete, ups)) == sorted(u[0] for u in ups)
        ups = [(f"k{i}",) + upload(s3, bucket, f"k{i}", [small]) for i in range(8)]
    for i in range(8):
        assert s3.get_object(Bucket=bucket, Key=f"k{i}")["Body"].read() == small


def test_ec_sealed_reads_degraded(ec):
    """Sealed objects on an erasure set read the same with two drives gone:
    windows that lie in one shard piece open in place, others are gathered,
    and lost pieces are rebuilt from parity before they are opened."""
    s3 = helpers.make_client(ec.endpoint)
    s3.create_bucket(Bucket="deg")
    single = os.urandom(9 * MIB + 777)
    s3.put_object(Bucket="deg", Key="s", Body=single, ServerSideEncryption="AES256")
    parts = [os.urandom(5 * MIB + 3), os.urandom(2 * MIB + 11)]
    up = s3.create_multipart_upload(Bucket="deg", Key="m", ServerSideEncryption="AES256")
    done = [{"PartNumber": n, "ETag": s3.upload_part(
        Bucket="deg", Key="m", UploadId=up["UploadId"], PartNumber=n, Body=p)["ETag"]}
        for n, p in enumerate(parts, 1)]
    s3.complete_multipart_upload(Bucket="deg", Key="m", UploadId=up["UploadId"],
                                 MultipartUpload={"Parts": done})
    multi = b"".join(parts)
    spans = [(0, 100), (MIB - 7, 3 * MIB + 9), (5 * MIB - 2, 5 * MIB + 70000)]

    def check():
        for key, data in (("s", single), ("m", multi)):
            assert s3.get_object(Bucket="deg", Key=key)["Body"].read() == data
            for a, z in spans:
                got = s3.get_object(Bucket="deg", Key=key,
                                    Range=f"bytes={a}-{z}")["Body"].read()
                assert got == data[a:z + 1], (key, a, z)

    check()
    ec.stop()
    for i in (0, 2):
        ec.wipe(i)
    ec.start()
    s3 = helpers.make_client(ec.endpoint)
    check()


def test_get_outlives_overwrite_of_multipart_object(ec):
    """A GET that began on a multipart object ends on it, although an
    overwrite releases the manifest mid-body and the cleaner removes released
    parts: the parts a GET is reading stay until it ends."""
    s3 = helpers.make_client(ec.endpoint)
    s3.create_bucket(Bucket="mpget")
    parts = [os.urandom(8 * MIB) for _ in range(4)]
    up = s3.create_multipart_upload(Bucket="mpget", Key="k")["UploadId"]
    etags = [s3.upload_part(Bucket="mpget", Key="k", UploadId=up, PartNumber=i, Body=p)["ETag"]
             for i, p in enumerate(parts, 1)]
    s3.complete_multipart_upload(Bucket="mpget", Key="k", UploadId=up,
                                 MultipartUpload={"Parts": [{"PartNumber": i, "ETag": e}
                                                            for i, e in enumerate(etags, 1)]})
    body = s3.get_object(Bucket="mpget", Key="k")["Body"]
    got = body.read(4 * MIB)  # the server is now blocked on the socket, parts 2-4 unsent
    base = live_bytes(ec)
    s3.put_object(Bucket="mpget", Key="k", Body=b"new")
    # Long enough for the cleaner's grace and passes (src/obj/ec_multipart.c).
    time.sleep(5)
    got += body.read()
    assert got == b"".join(parts)
    assert s3.get_object(Bucket="mpget", Key="k")["Body"].read() == b"new"
    # Once the GET ended, the old parts go.
    wait_until(lambda: base - live_bytes(ec) > 16 * MIB, 30)
