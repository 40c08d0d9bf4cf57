"""More of the aws CLI (Debian's aws CLI v2) against OpenLake.

s3 cp --recursive, s3 sync (up, down, --delete), s3 mv (single and
--recursive), s3 rm --recursive, and the s3api calls for head-object,
list-objects-v2 with --prefix/--delimiter, the multipart upload calls and
get-bucket-location.  Every transfer is checked by content hash.

`s3 mv` is CopyObject followed by DeleteObject: its tests probe CopyObject at
run time and skip while it answers 501 NotImplemented, so they turn on by
themselves when the feature lands.
"""

import hashlib
import json
import os
from pathlib import Path

import pytest

import helpers as h
from helpers import KIB, MIB


AWS = h.aws_binary()
pytestmark = pytest.mark.skipif(AWS is None, reason="aws CLI not installed")
# The client's own requests are mode-independent: one mode, except the tests
# marked both_modes (conftest.py, ONE_MODE).
ONE_MODE = True


@pytest.fixture(scope="module")
def aws(server, tmp_path_factory):
    return h.aws_runner(server.endpoint, tmp_path_factory.mktemp("awscfg"))


@pytest.fixture(scope="module")
def api(aws):
    """s3api call returning parsed JSON ({} for commands that print nothing)."""
    def call(op, *args, check=True):
        p = aws("s3api", op, "--output", "json", *args, check=check)
        if not check and p.returncode != 0:
            return p
        return json.loads(p.stdout) if p.stdout.strip() else {}
    return call


def make_tree(root, files=None):
    files = files or {
        "a.txt": 10,
        "empty": 0,
        "sub/b.bin": 70 * KIB,
        "sub/deeper/c.bin": 3001,
        "sub/deeper/d e.txt": 5,
        "z/zz/zzz/leaf": 1,
    }
    out = {}
    for rel, size in files.items():
        p = Path(root) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        data = h.content_for("cli-more/" + rel, size)
        p.write_bytes(data)
        out[rel] = h.sha256(data)
    return out


def copy_object_supported(s3, bucket):
    """False while CopyObject answers 501 NotImplemented."""
    s3.put_object(Bucket=bucket, Key="__probe-src", Body=b"probe")
    try:
        s3.copy_object(Bucket=bucket, Key="__probe-dst",
                       CopySource={"Bucket": bucket, "Key": "__probe-src"})
    except s3.exceptions.ClientError as e:
        if h.http_status(e) == 501 or h.error_code(e) == "NotImplemented":
            return False
        raise
    finally:
        s3.delete_object(Bucket=bucket, Key="__probe-src")
        s3.delete_object(Bucket=bucket, Key="__probe-dst")
    return True


def upload_part_copy_supported(s3, bucket):
    """False while UploadPartCopy answers 501 NotImplemented."""
    s3.put_object(Bucket=bucket, Key="__probe-src", Body=b"probe")
    up = s3.create_multipart_upload(Bucket=bucket, Key="__probe-dst")["UploadId"]
    try:
        s3.upload_part_copy(Bucket=bucket, Key="__probe-dst", UploadId=up, PartNumber=1,
                            CopySource={"Bucket": bucket, "Key": "__probe-src"})
    except s3.exceptions.ClientError as e:
        if h.http_status(e) == 501 or h.error_code(e) == "NotImplemented":
            return False
        raise
    finally:
        s3.abort_multipart_upload(Bucket=bucket, Key="__probe-dst", UploadId=up)
        s3.delete_object(Bucket=bucket, Key="__probe-src")
    return True


# ---- s3 high-level commands ---------------------------------------------------

def test_cp_recursive_up_and_down(aws, s3, bucket, tmp_path):
    src = tmp_path / "src"
    want = make_tree(src)
    aws("s3", "cp", "--recursive", src, f"s3://{bucket}/tree/")
    assert h.bucket_hashes(s3, bucket, "tree/") == want
    dst = tmp_path / "dst"
    aws("s3", "cp", "--recursive", f"s3://{bucket}/tree/", dst)
    assert h.tree_hashes(dst) == want
    # A sub-prefix only.
    dst2 = tmp_path / "dst2"
    aws("s3", "cp", "--recursive", f"s3://{bucket}/tree/sub/", dst2)
    assert h.tree_hashes(dst2) == {k[4:]: v for k, v in want.items() if k.startswith("sub/")}
    # --exclude/--include filter on the client side.
    dst3 = tmp_path / "dst3"
    aws("s3", "cp", "--recursive", "--exclude", "*", "--include", "*.bin",
        f"s3://{bucket}/tree/", dst3)
    assert h.tree_hashes(dst3) == {k: v for k, v in want.items() if k.endswith(".bin")}


def test_sync_up_down_delete(aws, s3, bucket, tmp_path):
    src = tmp_path / "src"
    want = make_tree(src)
    out = aws("s3", "sync", src, f"s3://{bucket}/s").stdout
    assert out.count("upload:") == len(want)
    assert h.bucket_hashes(s3, bucket, "s/") == want

    # Nothing changed: nothing to do.
    out = aws("s3", "sync", src, f"s3://{bucket}/s").stdout
    assert "upload:" not in out, out

    # Sync down, then change both sides.
    dst = tmp_path / "dst"
    aws("s3", "sync", f"s3://{bucket}/s", dst)
    assert h.tree_hashes(dst) == want

    (src / "sub" / "b.bin").write_bytes(b"a different size now")
    (src / "new.txt").write_bytes(b"new")
    os.remove(src / "a.txt")
    out = aws("s3", "sync", src, f"s3://{bucket}/s").stdout
    assert "delete:" not in out, "sync without --delete must not delete"
    keys = set(h.bucket_hashes(s3, bucket, "s/"))
    assert "a.txt" in keys and "new.txt" in keys

    out = aws("s3", "sync", "--delete", src, f"s3://{bucket}/s").stdout
    assert f"delete: s3://{bucket}/s/a.txt" in out, out
    want = h.tree_hashes(src)
    assert h.bucket_hashes(s3, bucket, "s/") == want

    # Down with --delete removes the local file that is gone remotely.
    s3.delete_object(Bucket=bucket, Key="s/z/zz/zzz/leaf")
    aws("s3", "sync", "--delete", f"s3://{bucket}/s", dst)
    want.pop("z/zz/zzz/leaf")
    assert h.tree_hashes(dst) == want


@pytest.mark.both_modes
def test_mv_single(aws, s3, bucket, tmp_path):
    if not copy_object_supported(s3, bucket):
        pytest.skip("CopyObject not implemented yet (s3 mv uses CopyObject + DeleteObject)")
    data = h.content_for("mv-single", 123 * KIB)
    s3.put_object(Bucket=bucket, Key="from/x.bin", Body=data, Metadata={"color": "blue"})
    aws("s3", "mv", f"s3://{bucket}/from/x.bin", f"s3://{bucket}/to/y.bin")
    assert h.bucket_hashes(s3, bucket) == {"to/y.bin": h.sha256(data)}
    assert s3.head_object(Bucket=bucket, Key="to/y.bin")["Metadata"] == {"color": "blue"}

    # Local to remote and back are moves too.
    f = tmp_path / "local.bin"
    f.write_bytes(data)
    aws("s3", "mv", f, f"s3://{bucket}/local.bin")
    assert not f.exists()
    aws("s3", "mv", f"s3://{bucket}/local.bin", f)
    assert h.file_sha256(f) == h.sha256(data)
    assert set(h.bucket_hashes(s3, bucket)) == {"to/y.bin"}


@pytest.mark.both_modes
def test_mv_recursive(aws, s3, bucket, tmp_path):
    if not copy_object_supported(s3, bucket):
        pytest.skip("CopyObject not implemented yet (s3 mv uses CopyObject + DeleteObject)")
    src = tmp_path / "src"
    want = make_tree(src)
    aws("s3", "cp", "--recursive", src, f"s3://{bucket}/old/")
    aws("s3", "mv", "--recursive", f"s3://{bucket}/old/", f"s3://{bucket}/new/")
    assert h.bucket_hashes(s3, bucket, "old/") == {}
    assert h.bucket_hashes(s3, bucket, "new/") == want


@pytest.mark.both_modes
def test_mv_multipart_object(aws, s3, bucket, tmp_path):
    if not copy_object_supported(s3, bucket):
        pytest.skip("CopyObject not implemented yet (s3 mv uses CopyObject + DeleteObject)")
    if not upload_part_copy_supported(s3, bucket):
        pytest.skip("UploadPartCopy not implemented yet (s3 mv copies objects over the "
                    "CLI's 8 MiB threshold with it)")
    # A multipart object (over the CLI's 8 MiB threshold) moves intact: the
    # CLI copies it with UploadPartCopy.
    big = tmp_path / "big.bin"
    digest = h.write_random_file(big, 9 * MIB)
    aws("s3", "cp", big, f"s3://{bucket}/bigsrc/big.bin")
    aws("s3", "mv", "--recursive", f"s3://{bucket}/bigsrc/", f"s3://{bucket}/bigdst/")
    got = s3.get_object(Bucket=bucket, Key="bigdst/big.bin")["Body"].read()
    assert h.sha256(got) == digest
    assert h.bucket_hashes(s3, bucket, "bigsrc/") == {}


def test_rm_recursive(aws, s3, bucket, tmp_path):
    src = tmp_path / "src"
    want = make_tree(src)
    aws("s3", "cp", "--recursive", src, f"s3://{bucket}/keep/")
    aws("s3", "cp", "--recursive", src, f"s3://{bucket}/gone/")
    out = aws("s3", "rm", "--recursive", f"s3://{bucket}/gone/").stdout
    assert out.count("delete:") == len(want)
    assert h.bucket_hashes(s3, bucket, "gone/") == {}
    assert h.bucket_hashes(s3, bucket, "keep/") == want
    # --exclude keeps what it matches.
    aws("s3", "rm", "--recursive", "--exclude", "sub/*", f"s3://{bucket}/keep/")
    assert h.bucket_hashes(s3, bucket, "keep/") == {k: v for k, v in want.items()
                                                  if k.startswith("sub/")}


# ---- s3api --------------------------------------------------------------------

def test_head_object(api, s3, bucket):
    data = h.content_for("head", 4321)
    s3.put_object(Bucket=bucket, Key="dir/h.bin", Body=data, ContentType="text/x-test",
                  Metadata={"k1": "v1"})
    r = api("head-object", "--bucket", bucket, "--key", "dir/h.bin")
    assert r["ContentLength"] == len(data)
    assert r["ETag"] == f'"{h.md5_hex(data)}"'
    assert r["ContentType"] == "text/x-test"
    assert r["Metadata"] == {"k1": "v1"}
    p = api("head-object", "--bucket", bucket, "--key", "dir/absent", check=False)
    assert p.returncode != 0 and "404" in p.stderr


def test_list_objects_v2_prefix_delimiter(api, s3, bucket):
    keys = ["a/1", "a/2", "a/b/3", "a/c/4", "b/5", "top"]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    r = api("list-objects-v2", "--bucket", bucket, "--delimiter", "/")
    assert [o["Key"] for o in r.get("Contents", [])] == ["top"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/", "b/"]

    r = api("list-objects-v2", "--bucket", bucket, "--prefix", "a/", "--delimiter", "/")
    assert [o["Key"] for o in r["Contents"]] == ["a/1", "a/2"]
    assert [p["Prefix"] for p in r["CommonPrefixes"]] == ["a/b/", "a/c/"]
    assert all(o["Size"] == 3 for o in r["Contents"])

    r = api("list-objects-v2", "--bucket", bucket, "--prefix", "a/")
    assert [o["Key"] for o in r["Contents"]] == ["a/1", "a/2", "a/b/3", "a/c/4"]
    assert "CommonPrefixes" not in r

    # The CLI pages by itself: --page-size 2 still returns everything.
    r = api("list-objects-v2", "--bucket", bucket, "--page-size", "2")
    assert [o["Key"] for o in r["Contents"]] == keys


@pytest.mark.both_modes
def test_multipart_via_s3api(api, s3, bucket, tmp_path):
    r = api("create-multipart-upload", "--bucket", bucket, "--key", "mp.bin",
            "--content-type", "application/x-mp", "--metadata", "who=cli")
    upload_id = r["UploadId"]
    assert r["Key"] == "mp.bin"

    ups = api("list-multipart-uploads", "--bucket", bucket)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in ups] == [("mp.bin", upload_id)]

    parts = [h.content_for("mp1", 5 * MIB), h.content_for("mp2", 5 * MIB),
             h.content_for("mp3", 1234)]
    etags = []
    for i, data in enumerate(parts, 1):
        f = tmp_path / f"part{i}"
        f.write_bytes(data)
        r = api("upload-part", "--bucket", bucket, "--key", "mp.bin", "--upload-id", upload_id,
                "--part-number", str(i), "--body", f)
        assert r["ETag"] == f'"{h.md5_hex(data)}"'
        etags.append(r["ETag"])

    r = api("list-parts", "--bucket", bucket, "--key", "mp.bin", "--upload-id", upload_id)
    assert [(p["PartNumber"], p["ETag"], p["Size"]) for p in r["Parts"]] == \
        [(i, etags[i - 1], len(parts[i - 1])) for i in (1, 2, 3)]

    layout = tmp_path / "parts.json"
    layout.write_text(json.dumps(
        {"Parts": [{"PartNumber": i, "ETag": e} for i, e in enumerate(etags, 1)]}))
    r = api("complete-multipart-upload", "--bucket", bucket, "--key", "mp.bin",
            "--upload-id", upload_id, "--multipart-upload", f"file://{layout}")
    assert r["ETag"] == h.multipart_etag(parts)
    assert r["Key"] == "mp.bin"

    # Checked with boto3: every aws CLI start costs a second or two.
    obj = s3.get_object(Bucket=bucket, Key="mp.bin")
    assert obj["ContentLength"] == sum(map(len, parts))
    assert obj["ContentType"] == "application/x-mp"
    assert obj["Metadata"] == {"who": "cli"}
    assert hashlib.sha256(obj["Body"].read()).hexdigest() == h.sha256(b"".join(parts))
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_abort_multipart_via_s3api(api, s3, bucket, tmp_path):
    ids = []
    for key in ("ab/one", "ab/two"):
        ids.append(api("create-multipart-upload", "--bucket", bucket, "--key", key)["UploadId"])
    f = tmp_path / "p"
    f.write_bytes(b"x" * KIB)
    api("upload-part", "--bucket", bucket, "--key", "ab/one", "--upload-id", ids[0],
        "--part-number", "1", "--body", f)
    ups = api("list-multipart-uploads", "--bucket", bucket, "--prefix", "ab/")["Uploads"]
    assert sorted(u["UploadId"] for u in ups) == sorted(ids)

    api("abort-multipart-upload", "--bucket", bucket, "--key", "ab/one", "--upload-id", ids[0])
    ups = s3.list_multipart_uploads(Bucket=bucket)["Uploads"]
    assert [u["UploadId"] for u in ups] == [ids[1]]
    p = api("list-parts", "--bucket", bucket, "--key", "ab/one", "--upload-id", ids[0],
            check=False)
    assert p.returncode != 0 and "NoSuchUpload" in p.stderr
    api("abort-multipart-upload", "--bucket", bucket, "--key", "ab/two", "--upload-id", ids[1])
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_get_bucket_location(api, bucket):
    r = api("get-bucket-location", "--bucket", bucket)
    # us-east-1 is reported as an empty constraint (null in the CLI's JSON).
    assert r.get("LocationConstraint") in (None, "", "us-east-1")
    p = api("get-bucket-location", "--bucket", h.unique_bucket("absent"), check=False)
    assert p.returncode != 0 and "NoSuchBucket" in p.stderr
