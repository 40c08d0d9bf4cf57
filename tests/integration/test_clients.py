"""Third-party S3 clients against OpenLake: s3cmd, rclone and s3fs-fuse.

Each client runs as its own process with a private configuration and an
environment scrubbed of AWS_* / RCLONE_* variables (a stray AWS_CA_BUNDLE, for
one, makes rclone refuse to start on a plain-http endpoint).  Every test checks
content (sha256 of what comes back, objects read with boto3), not only exit
codes.  A client whose binary is missing is skipped; s3fs is skipped, with the
reason, where this machine cannot mount FUSE file systems.

Tests that need an S3 feature that may still answer 501 NotImplemented
(DeleteObjects for recursive deletes) probe for it at run time and skip until
it lands.
"""

import base64
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import helpers as h
from helpers import KIB, MIB

S3CMD = shutil.which("s3cmd")
RCLONE = shutil.which("rclone")
S3FS = shutil.which("s3fs")
# The client's own requests are mode-independent: one mode, except the tests
# marked both_modes (conftest.py, ONE_MODE).
ONE_MODE = True


def clean_env(home):
    """os.environ without AWS_* and RCLONE_* and with a private HOME, so that
    no client reads the invoking user's configuration or credentials."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "RCLONE_"))}
    env["HOME"] = str(home)
    return env


def run_cmd(cmd, env, check=True, timeout=300, cwd=None):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} exited {p.returncode}\n"
                             f"stdout: {p.stdout[-4000:]}\nstderr: {p.stderr[-4000:]}")
    return p


def make_tree(root):
    """A nested directory tree of a few files of varied sizes, including an
    empty file and names with spaces; returns {relative posix path: sha256}."""
    files = {
        "top.txt": 3000,
        "empty": 0,
        "a/one.bin": 100 * KIB + 7,
        "a/b/deep.bin": 64 * KIB,
        "a/b/c/deeper.txt": 17,
        "with space/name with space.dat": 1234,
        "z/last": 1,
    }
    out = {}
    for rel, size in files.items():
        p = Path(root) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        data = h.content_for(rel, size)
        p.write_bytes(data)
        out[rel] = h.sha256(data)
    return out


def empty_bucket(s3, bucket):
    """Deletes every object one at a time (no DeleteObjects) and any
    unfinished multipart uploads."""
    for _ in range(1000):
        page = s3.list_objects_v2(Bucket=bucket)
        keys = [o["Key"] for o in page.get("Contents", [])]
        if not keys:
            break
        for k in keys:
            s3.delete_object(Bucket=bucket, Key=k)
    ups = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    for u in ups:
        s3.abort_multipart_upload(Bucket=bucket, Key=u["Key"], UploadId=u["UploadId"])


def delete_objects_supported(server):
    """True when POST ?delete (DeleteObjects) is implemented: probed with a
    request naming one key that does not exist."""
    b = h.unique_bucket("probe")
    h.signed_request(server, "PUT", f"/{b}")
    body = (b'<?xml version="1.0" encoding="UTF-8"?><Delete><Quiet>true</Quiet>'
            b'<Object><Key>absent</Key></Object></Delete>')
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    r = h.signed_request(server, "POST", f"/{b}?delete", body=body,
                         headers={"Content-MD5": md5, "Content-Type": "application/xml"})
    h.signed_request(server, "DELETE", f"/{b}")
    return r.status != 501


# ---- s3cmd ------------------------------------------------------------------

@pytest.fixture(scope="module")
def s3cmd(server, tmp_path_factory):
    if S3CMD is None:
        pytest.skip("s3cmd not installed (apt-get install s3cmd)")
    home = tmp_path_factory.mktemp("s3cmd-home")
    cfg = home / "s3cfg"
    hostport = f"127.0.0.1:{server.port}"
    cfg.write_text("\n".join([
        "[default]",
        f"access_key = {h.ACCESS_KEY}",
        f"secret_key = {h.SECRET_KEY}",
        f"host_base = {hostport}",
        # No %(bucket)s in host_bucket: s3cmd then uses path-style requests.
        f"host_bucket = {hostport}",
        "use_https = False",
        "signature_v2 = False",
        "bucket_location = us-east-1",
        "progress_meter = False",
        "",
    ]))
    env = clean_env(home)

    def run(*args, check=True, timeout=300):
        return run_cmd([S3CMD, "-c", str(cfg), *map(str, args)], env, check=check,
                       timeout=timeout)

    return run


def test_s3cmd_mb_put_get_ls_la_del_rb(s3cmd, s3, tmp_path):
    b = h.unique_bucket("s3cmd")
    s3cmd("mb", f"s3://{b}")
    s3.head_bucket(Bucket=b)

    src = tmp_path / "obj.bin"
    data = h.content_for("s3cmd-obj", 300 * KIB + 11)
    src.write_bytes(data)
    s3cmd("put", src, f"s3://{b}/dir/obj.bin")
    s3cmd("put", src, f"s3://{b}/top.bin")
    got = s3.get_object(Bucket=b, Key="dir/obj.bin")["Body"].read()
    assert h.sha256(got) == h.sha256(data)

    out = s3cmd("ls", f"s3://{b}").stdout
    assert f"s3://{b}/dir/" in out and "DIR" in out
    assert f"s3://{b}/top.bin" in out
    out = s3cmd("ls", "-r", f"s3://{b}").stdout
    lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    sizes = {ln[-1]: int(ln[2]) for ln in lines}
    assert sizes == {f"s3://{b}/dir/obj.bin": len(data), f"s3://{b}/top.bin": len(data)}
    out = s3cmd("la").stdout
    assert f"s3://{b}/top.bin" in out

    dst = tmp_path / "back.bin"
    s3cmd("get", f"s3://{b}/dir/obj.bin", dst)
    assert h.file_sha256(dst) == h.sha256(data)

    s3cmd("del", f"s3://{b}/dir/obj.bin")
    s3cmd("del", f"s3://{b}/top.bin")
    assert s3.list_objects_v2(Bucket=b).get("KeyCount") == 0
    p = s3cmd("get", f"s3://{b}/top.bin", tmp_path / "gone", check=False)
    assert p.returncode != 0 and "does not exist" in (p.stderr + p.stdout)
    s3cmd("rb", f"s3://{b}")
    p = s3cmd("ls", f"s3://{b}", check=False)
    assert p.returncode != 0 and "NoSuchBucket" in (p.stderr + p.stdout)


def test_s3cmd_sync_up_and_down(s3cmd, s3, bucket, tmp_path):
    up = tmp_path / "up"
    want = make_tree(up)
    s3cmd("sync", f"{up}/", f"s3://{bucket}/tree/")
    assert h.bucket_hashes(s3, bucket, "tree/") == want

    down = tmp_path / "down"
    down.mkdir()
    s3cmd("sync", f"s3://{bucket}/tree/", f"{down}/")
    assert h.tree_hashes(down) == want

    # A changed file and a new file go up on the next sync; unchanged ones
    # are compared by md5 (the ETag) and skipped.
    (up / "a" / "one.bin").write_bytes(b"changed contents")
    (up / "a" / "new.txt").write_bytes(b"new file")
    out = s3cmd("sync", f"{up}/", f"s3://{bucket}/tree/").stdout
    assert "deep.bin" not in out, "an unchanged file was uploaded again:\n" + out
    want = h.tree_hashes(up)
    assert h.bucket_hashes(s3, bucket, "tree/") == want
    s3cmd("sync", f"s3://{bucket}/tree/", f"{down}/")
    assert h.tree_hashes(down) == want
    empty_bucket(s3, bucket)


@pytest.mark.both_modes
def test_s3cmd_multipart(s3cmd, s3, bucket, tmp_path):
    src = tmp_path / "big"
    digest = h.write_random_file(src, 20 * MIB)
    s3cmd("put", "--multipart-chunk-size-mb=5", src, f"s3://{bucket}/big")
    head = s3.head_object(Bucket=bucket, Key="big")
    assert head["ContentLength"] == 20 * MIB
    assert head["ETag"].endswith('-4"'), f"not a 4-part multipart object: {head['ETag']}"
    dst = tmp_path / "big.out"
    s3cmd("get", f"s3://{bucket}/big", dst)
    assert h.file_sha256(dst) == digest
    s3cmd("del", f"s3://{bucket}/big")
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_s3cmd_recursive_delete(s3cmd, s3, server, bucket, tmp_path):
    if not delete_objects_supported(server):
        pytest.skip("DeleteObjects not implemented yet (s3cmd del --recursive and "
                    "sync --delete-removed use it)")
    up = tmp_path / "up"
    want = make_tree(up)
    s3cmd("sync", f"{up}/", f"s3://{bucket}/tree/")
    os.remove(up / "top.txt")
    shutil.rmtree(up / "a" / "b")
    s3cmd("sync", "--delete-removed", f"{up}/", f"s3://{bucket}/tree/")
    want = {k: v for k, v in want.items() if k != "top.txt" and not k.startswith("a/b/")}
    assert h.bucket_hashes(s3, bucket, "tree/") == want
    s3cmd("del", "--recursive", "--force", f"s3://{bucket}/tree/")
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


# ---- rclone -----------------------------------------------------------------

@pytest.fixture(scope="module")
def rclone(server, tmp_path_factory):
    if RCLONE is None:
        pytest.skip("rclone not installed (apt-get install rclone)")
    home = tmp_path_factory.mktemp("rclone-home")
    env = clean_env(home)
    env.update({
        # The remote "ol" lives entirely in the environment; an empty config
        # file keeps rclone from looking for one.
        "RCLONE_CONFIG": str(home / "rclone.conf"),
        "RCLONE_CONFIG_OL_TYPE": "s3",
        "RCLONE_CONFIG_OL_PROVIDER": "Other",
        "RCLONE_CONFIG_OL_ENDPOINT": server.endpoint,
        "RCLONE_CONFIG_OL_ACCESS_KEY_ID": h.ACCESS_KEY,
        "RCLONE_CONFIG_OL_SECRET_ACCESS_KEY": h.SECRET_KEY,
        "RCLONE_CONFIG_OL_REGION": h.REGION,
        "RCLONE_CONFIG_OL_FORCE_PATH_STYLE": "true",
    })
    (home / "rclone.conf").write_text("")

    def run(*args, check=True, timeout=300):
        return run_cmd([RCLONE, "--retries", "1", "--low-level-retries", "1",
                        *map(str, args)], env, check=check, timeout=timeout)

    return run


def rclone_lsf(rclone, remote):
    out = rclone("lsf", "-R", "--files-only", remote).stdout
    return sorted(ln for ln in out.splitlines() if ln)


def test_rclone_copy_sync_check_lsf_delete(rclone, s3, bucket, tmp_path):
    src = tmp_path / "src"
    want = make_tree(src)
    rclone("copy", src, f"ol:{bucket}/tree")
    assert h.bucket_hashes(s3, bucket, "tree/") == want
    assert rclone_lsf(rclone, f"ol:{bucket}/tree") == sorted(want)

    # check compares sizes and MD5 hashes; for single-part objects rclone
    # takes the MD5 from the ETag.
    p = rclone("check", src, f"ol:{bucket}/tree")
    assert "0 differences found" in p.stderr
    out = rclone("md5sum", f"ol:{bucket}/tree").stdout
    remote_md5 = {ln.split(None, 1)[1]: ln.split()[0] for ln in out.splitlines() if ln}
    assert remote_md5 == {k: h.md5_hex((src / k).read_bytes()) for k in want}

    # A remote object with the same size but other bytes must be caught.
    victim = "a/b/deep.bin"
    s3.put_object(Bucket=bucket, Key=f"tree/{victim}", Body=os.urandom(64 * KIB))
    p = rclone("check", src, f"ol:{bucket}/tree", check=False)
    assert p.returncode != 0 and "1 differences found" in p.stderr, p.stderr

    # sync up: restores the changed object, deletes the remote extra,
    # uploads the new local file.
    s3.put_object(Bucket=bucket, Key="tree/extra/remote-only", Body=b"remove me")
    (src / "a" / "added.txt").write_bytes(b"added locally")
    rclone("sync", src, f"ol:{bucket}/tree")
    want = h.tree_hashes(src)
    assert h.bucket_hashes(s3, bucket, "tree/") == want
    rclone("check", src, f"ol:{bucket}/tree")

    # sync down into a fresh directory, and again after a remote change.
    dst = tmp_path / "dst"
    rclone("sync", f"ol:{bucket}/tree", dst)
    assert h.tree_hashes(dst) == want
    s3.delete_object(Bucket=bucket, Key="tree/z/last")
    s3.put_object(Bucket=bucket, Key="tree/top.txt", Body=b"new top")
    rclone("sync", f"ol:{bucket}/tree", dst)
    want.pop("z/last")
    want["top.txt"] = h.sha256(b"new top")
    assert h.tree_hashes(dst) == want

    # delete removes the objects (rclone deletes them one by one).
    rclone("delete", f"ol:{bucket}/tree/a")
    assert not any(k.startswith("a/") for k in h.bucket_hashes(s3, bucket, "tree/"))
    rclone("delete", f"ol:{bucket}")
    assert rclone_lsf(rclone, f"ol:{bucket}") == []
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


@pytest.mark.both_modes
def test_rclone_multipart_50mib(rclone, s3, bucket, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    digest = h.write_random_file(src / "f50", 50 * MIB)
    # The upload cutoff must come down too, or rclone sends 50 MiB in one PUT.
    rclone("copy", "--s3-chunk-size", "5M", "--s3-upload-cutoff", "5M", src, f"ol:{bucket}/mp")
    head = s3.head_object(Bucket=bucket, Key="mp/f50")
    assert head["ContentLength"] == 50 * MIB
    assert head["ETag"].endswith('-10"'), f"not a 10-part multipart object: {head['ETag']}"

    # A multipart ETag is not an MD5; rclone keeps the MD5 in its own
    # metadata (x-amz-meta-md5chksum) and check uses it.  --download compares
    # the bytes themselves.
    p = rclone("check", src, f"ol:{bucket}/mp")
    assert "0 differences found" in p.stderr
    p = rclone("check", "--download", src, f"ol:{bucket}/mp")
    assert "0 differences found" in p.stderr
    dst = tmp_path / "dst"
    rclone("copy", f"ol:{bucket}/mp", dst)
    assert h.file_sha256(dst / "f50") == digest
    rclone("delete", f"ol:{bucket}/mp")
    assert s3.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_rclone_mkdir_rmdir_bucket(rclone, s3):
    b = h.unique_bucket("rcl")
    rclone("mkdir", f"ol:{b}")
    s3.head_bucket(Bucket=b)
    rclone("rmdir", f"ol:{b}")
    names = [x["Name"] for x in s3.list_buckets()["Buckets"]]
    assert b not in names


# ---- s3fs-fuse --------------------------------------------------------------

def _mounted(path):
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == target for line in f)


def _fuse_usable():
    """None when FUSE mounts can be tried here, else the reason they cannot."""
    if S3FS is None:
        return "s3fs not installed (apt-get install s3fs)"
    if not (shutil.which("fusermount3") or shutil.which("fusermount")):
        return "fusermount not installed (apt-get install fuse3)"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse in this environment"
    try:
        fd = os.open("/dev/fuse", os.O_RDWR)
        os.close(fd)
    except OSError as e:
        return f"/dev/fuse cannot be opened: {e}"
    return None


def _unmount(path):
    """Unmounts, lazily as a last resort; never raises."""
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    for args in (["-u"], ["-uz"]):
        if not _mounted(path):
            return
        subprocess.run([tool, *args, str(path)], capture_output=True, timeout=30)
        for _ in range(50):
            if not _mounted(path):
                return
            time.sleep(0.1)


def test_s3fs_mount_write_read_ls_rm(server, s3, bucket, tmp_path):
    reason = _fuse_usable()
    if reason:
        pytest.skip(reason)
    home = tmp_path / "home"
    home.mkdir()
    passwd = home / "passwd"
    passwd.write_text(f"{h.ACCESS_KEY}:{h.SECRET_KEY}\n")
    passwd.chmod(0o600)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    s3.put_object(Bucket=bucket, Key="pre/existing.txt", Body=b"written by boto3")
    log = open(tmp_path / "s3fs.log", "wb")
    opts = ",".join([f"passwd_file={passwd}", f"url={server.endpoint}", "use_path_request_style",
                     f"endpoint={h.REGION}", "sigv4", "retries=1", "stat_cache_expire=1",
                     "dbglevel=info"])
    proc = subprocess.Popen([S3FS, bucket, str(mnt), "-f", "-o", opts], env=clean_env(home),
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while not _mounted(mnt):
            if proc.poll() is not None:
                text = (tmp_path / "s3fs.log").read_text(errors="replace")
                if any(s in text for s in ("fuse: device not found", "Operation not permitted",
                                           "Permission denied", "fusermount")):
                    pytest.skip(f"s3fs cannot mount here: {text[-500:]}")
                raise AssertionError(f"s3fs exited {proc.returncode}:\n{text[-3000:]}")
            assert time.monotonic() < deadline, "s3fs did not mount within 15 s"
            time.sleep(0.1)

        # An object written through S3 reads back through the mount.
        assert (mnt / "pre" / "existing.txt").read_bytes() == b"written by boto3"

        # Files written through the mount arrive as objects, byte for byte.
        data = h.content_for("s3fs-file", 700 * KIB + 3)
        (mnt / "file.bin").write_bytes(data)
        (mnt / "sub").mkdir()
        (mnt / "sub" / "small.txt").write_bytes(b"small\n")
        got = s3.get_object(Bucket=bucket, Key="file.bin")["Body"].read()
        assert h.sha256(got) == h.sha256(data)
        assert s3.get_object(Bucket=bucket, Key="sub/small.txt")["Body"].read() == b"small\n"
        assert h.file_sha256(mnt / "file.bin") == h.sha256(data)

        names = sorted(os.listdir(mnt))
        assert names == ["file.bin", "pre", "sub"], names
        assert os.listdir(mnt / "sub") == ["small.txt"]
        assert (mnt / "file.bin").stat().st_size == len(data)

        os.remove(mnt / "file.bin")
        os.remove(mnt / "sub" / "small.txt")
        os.rmdir(mnt / "sub")
        assert sorted(os.listdir(mnt)) == ["pre"]
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]
        assert keys == ["pre/existing.txt"], keys
    finally:
        _unmount(mnt)
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
    assert not _mounted(mnt)
    empty_bucket(s3, bucket)
