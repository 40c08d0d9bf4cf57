"""The deployment identity of an erasure-coded server (docs/EC.md, "Deployment
identity"; the FORMAT fields in docs/FORMAT.md).

- The first start writes one random deployment id, each drive's position and
  the geometry into every FORMAT; a restart keeps data and ids; the same
  directories listed in another order are refused, naming the directory and
  its old position, and nothing on the drives changes; so is a directory
  listed twice.
- A directory of another deployment is refused; so is a single-drive
  OpenLake directory with data.
- A wiped drive (emptied directory) joins with the deployment's id at its
  position, and a heal fills it: every object then reads with two other
  drives out.
- A drive offline at start is checked when the monitor opens it: another
  deployment's directory in its place stays offline (logged); the real one
  comes online.
- Drives written by an older build (EC data, no identity) join with the
  legacy placement id, and their objects read back.
"""
import json
import os
import shutil
import struct
import subprocess
import time

import pytest

import helpers

NDRIVES = 6
LEGACY_ID = b"openlake-ec-dep1"


class IdServer(helpers.Server):
    """An EC server on an explicit, ordered list of directories."""

    def __init__(self, workdir, dirs=None, n=NDRIVES):
        super().__init__(workdir, threads=2)
        self.dirs = dirs or [self.workdir / f"d{i + 1}" for i in range(n)]

    def command(self):
        cmd = super().command()
        i = cmd.index(str(self.data_dir))
        cmd[i:i + 1] = [str(d) for d in self.dirs]
        return cmd + ["--inline_bytes", "4096", "--ec_data", "4", "--ec_parity", "2",
                      "--scrub_interval_ms", "0", "--ec_drive_check_ms", "100",
                      "--ec_drive_fail_after", "2", "--ec_drive_backoff_max_ms", "300"]


def fmt(d):
    """The FORMAT file of directory d, decoded."""
    raw = (d / "FORMAT").read_bytes()
    assert len(raw) == 128
    (magic, version, hdr, dep, drive, created, joined, k, m, pad, index,
     n) = struct.unpack_from("<IHH16s16sqBBBBII", raw)
    assert magic == 0x4b52444c and hdr == 128 and pad == 0
    return {"dep": dep, "drive": drive, "joined": joined, "k": k, "m": m,
            "index": index, "n": n, "raw": raw}


def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def strip_identity(d):
    """Rewrites FORMAT as a build older than drive identities wrote it: the
    drive's own random deployment id, the EC bytes zero."""
    raw = bytearray((d / "FORMAT").read_bytes())
    raw[8:24] = os.urandom(16)
    raw[48:128] = bytes(80)
    raw[124:128] = struct.pack("<I", crc32c(bytes(raw)))
    (d / "FORMAT").write_bytes(bytes(raw))


def admin(srv, *args):
    out = subprocess.run([str(helpers.openlake_binary()), "admin", *args, "--endpoint",
                          srv.endpoint], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def wait_state(srv, i, want, timeout=10.0):
    deadline = time.monotonic() + timeout
    state = None
    while time.monotonic() < deadline:
        state = admin(srv, "info")["drives"][i]["state"]
        if state == want:
            return
        time.sleep(0.05)
    raise AssertionError(f"drive {i} is {state}, not {want}")


def refused(srv):
    """Starts srv, which must exit during start-up; returns its log."""
    with pytest.raises(helpers.ServerError) as e:
        srv.start()
    return str(e.value)


def body(i):
    return bytes([i % 251]) * (1000 + 3000 * i)


def put_some(srv, bucket, n=12):
    s3 = helpers.make_client(srv.endpoint)
    s3.create_bucket(Bucket=bucket)
    for i in range(n):
        s3.put_object(Bucket=bucket, Key=f"k{i:02d}", Body=body(i))


def check_some(srv, bucket, n=12):
    s3 = helpers.make_client(srv.endpoint)
    for i in range(n):
        assert s3.get_object(Bucket=bucket, Key=f"k{i:02d}")["Body"].read() == body(i), i


def new_deployment(path, bucket=None, n=NDRIVES):
    """A started-and-stopped deployment under path (with objects when bucket)."""
    srv = IdServer(path, n=n)
    srv.start()
    if bucket:
        put_some(srv, bucket)
    srv.stop()
    return srv


@pytest.fixture
def cleanup():
    servers = []
    yield servers
    for s in servers:
        s.close()


def test_restart_keeps_ids_and_order_is_checked(tmp_path, cleanup):
    srv = IdServer(tmp_path / "a")
    cleanup.append(srv)
    srv.start()
    f = [fmt(d) for d in srv.dirs]
    dep = f[0]["dep"]
    assert dep != LEGACY_ID
    for i, x in enumerate(f):
        assert (x["joined"], x["index"], x["n"], x["k"], x["m"]) == (1, i, NDRIVES, 4, 2)
        assert x["dep"] == dep
    assert len({x["drive"] for x in f}) == NDRIVES  # drive ids stay per drive
    assert admin(srv, "info")["deployment"] == dep.hex()
    put_some(srv, "idrestart")
    srv.stop()
    assert f"deployment {dep[:8].hex()}" in srv.log_path.read_text()

    srv.start()
    check_some(srv, "idrestart")
    srv.stop()
    assert [fmt(d)["raw"] for d in srv.dirs] == [x["raw"] for x in f]

    # d2 and d5 swapped: refused, naming the directory and its old place.
    srv.dirs[1], srv.dirs[4] = srv.dirs[4], srv.dirs[1]
    log = refused(srv)
    assert (f"drive {srv.dirs[1]} was drive 5 of this deployment but is listed as drive 2; "
            "list the directories in their original order") in log
    assert [fmt(d)["raw"] for d in sorted(srv.dirs)] == [x["raw"] for x in f]
    srv.dirs[1], srv.dirs[4] = srv.dirs[4], srv.dirs[1]
    # One directory listed twice.
    dup = IdServer(tmp_path / "a", dirs=[srv.dirs[0]] + srv.dirs[:5])
    log = refused(dup)
    assert f"drive {srv.dirs[0]} is in use: it is listed twice" in log
    srv.start()
    check_some(srv, "idrestart")
    srv.stop()
    assert [fmt(d)["raw"] for d in srv.dirs] == [x["raw"] for x in f]


def test_foreign_and_single_drive_dirs_refused(tmp_path, cleanup):
    a = new_deployment(tmp_path / "a")
    b = new_deployment(tmp_path / "b")
    cleanup += [a, b]
    before = [fmt(d)["raw"] for d in a.dirs]

    mixed = IdServer(tmp_path / "a", dirs=list(a.dirs))
    mixed.dirs[2] = b.dirs[2]
    log = refused(mixed)
    assert f"drive {b.dirs[2]} belongs to another deployment" in log

    # A single-drive OpenLake directory with a bucket and an object.
    single = helpers.Server(tmp_path / "single")
    cleanup.append(single)
    single.start()
    s3 = helpers.make_client(single.endpoint)
    s3.create_bucket(Bucket="plain")
    s3.put_object(Bucket="plain", Key="x", Body=b"single-drive bytes")
    single.stop()
    mixed.dirs = list(a.dirs)
    mixed.dirs[3] = single.data_dir
    log = refused(mixed)
    assert f"drive {single.data_dir} holds data of a single-drive store" in log
    # Also refused at the first start of a new deployment.
    fresh = IdServer(tmp_path / "fresh")
    fresh.dirs[0] = single.data_dir
    log = refused(fresh)
    assert f"drive {single.data_dir} holds data of a single-drive store" in log
    assert not fmt(single.data_dir)["joined"]

    assert [fmt(d)["raw"] for d in a.dirs] == before
    a.start()  # untouched by the refusals
    a.stop()


def test_wiped_drive_joins_and_heals(tmp_path, cleanup):
    srv = new_deployment(tmp_path / "a", bucket="idwipe")
    cleanup.append(srv)
    dep = fmt(srv.dirs[0])["dep"]
    shutil.rmtree(srv.dirs[2])
    srv.dirs[2].mkdir()
    srv.start()
    x = fmt(srv.dirs[2])
    assert (x["joined"], x["dep"], x["index"], x["n"]) == (1, dep, 2, NDRIVES)
    st = admin(srv, "heal")
    assert st.get("unrecoverable", 0) == 0
    srv.stop()
    # Two other drives out (files where their directories were): every
    # object needs the healed drive's shards.
    away = []
    for i in (0, 1):
        moved = srv.dirs[i].with_name(srv.dirs[i].name + ".away")
        srv.dirs[i].rename(moved)
        srv.dirs[i].write_text("not a directory")
        away.append((srv.dirs[i], moved))
    srv.start()
    check_some(srv, "idwipe")
    srv.stop()
    for d, moved in away:
        d.unlink()
        moved.rename(d)


def test_offline_drive_checked_when_it_comes_back(tmp_path, cleanup):
    a = new_deployment(tmp_path / "a", bucket="idoff")
    b = new_deployment(tmp_path / "b")
    cleanup += [a, b]
    d4 = a.dirs[3]
    d4_away = d4.with_name("d4.away")
    d4.rename(d4_away)
    d4.write_text("a lost mount")
    a.start()
    wait_state(a, 3, "offline")
    check_some(a, "idoff")

    # Another deployment's drive appears in its place: it stays offline.
    d4.unlink()
    b.dirs[3].rename(d4)
    deadline = time.monotonic() + 10
    while "belongs to another deployment" not in a.log_path.read_text():
        assert time.monotonic() < deadline, a.log_tail()
        time.sleep(0.1)
    time.sleep(0.5)  # several more probes: still refused, logged once
    log = a.log_path.read_text()
    assert log.count(f"drive {d4} belongs to another deployment") == 1
    assert admin(a, "info")["drives"][3]["state"] == "offline"
    assert fmt(d4)["dep"] == fmt(b.dirs[0])["dep"]  # not taken over
    d4.rename(b.dirs[3])

    # The real drive comes back: checked, online, unchanged.
    d4_away.rename(d4)
    wait_state(a, 3, "online")
    assert fmt(d4)["index"] == 3 and fmt(d4)["dep"] == fmt(a.dirs[0])["dep"]
    check_some(a, "idoff")
    a.stop()


def test_legacy_drives_join_with_the_legacy_id(tmp_path, cleanup):
    # A deployment as an older build left it: placement keyed by the legacy
    # constant, FORMAT without an identity.  Simulated by writing objects
    # while the drives say the legacy id, then stripping the identity.  Two
    # sets, so that a wrong placement key would look for keys in the wrong
    # set.
    srv = new_deployment(tmp_path / "a", n=2 * NDRIVES)
    cleanup.append(srv)
    for d in srv.dirs:
        raw = bytearray((d / "FORMAT").read_bytes())
        raw[8:24] = LEGACY_ID
        raw[124:128] = struct.pack("<I", crc32c(bytes(raw[:124]) + bytes(4)))
        (d / "FORMAT").write_bytes(bytes(raw))
    srv.start()
    assert admin(srv, "info")["deployment"] == LEGACY_ID.hex()
    put_some(srv, "idlegacy", n=24)
    srv.stop()
    for d in srv.dirs:
        strip_identity(d)
        assert not fmt(d)["joined"]
    srv.start()
    check_some(srv, "idlegacy", n=24)
    srv.stop()
    for i, d in enumerate(srv.dirs):
        x = fmt(d)
        assert (x["joined"], x["dep"], x["index"]) == (1, LEGACY_ID, i)
    assert "written before drive identities" in srv.log_path.read_text()
