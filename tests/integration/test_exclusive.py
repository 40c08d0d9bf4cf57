"""One server per listening address and one per drive: a second server on the
same port (SO_REUSEPORT would otherwise let the kernel split clients between
two stores) or on the same data directory (two processes appending to the same
segment files) is refused at start-up, and the first one keeps serving."""
import subprocess

import helpers as h


def start_second(args, timeout=20):
    """Runs a second `openlake server` that must exit on its own; returns
    (exit code, its output)."""
    cmd = [str(h.openlake_binary()), "server"] + [str(a) for a in args]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace")


def check_first_serves(srv):
    s3 = h.make_client(srv.endpoint)
    s3.put_object(Bucket="excl", Key="k", Body=b"first")
    assert s3.get_object(Bucket="excl", Key="k")["Body"].read() == b"first"


def test_second_server_on_same_port_is_refused(make_server, tmp_path):
    srv = make_server()
    h.make_client(srv.endpoint).create_bucket(Bucket="excl")
    rc, out = start_second([tmp_path / "other", "--listen", f"127.0.0.1:{srv.port}"])
    assert rc != 0
    assert "address already in use" in out, out
    check_first_serves(srv)


def test_second_server_on_same_drive_is_refused(make_server):
    srv = make_server()
    h.make_client(srv.endpoint).create_bucket(Bucket="excl")
    rc, out = start_second([srv.data_dir, "--listen", f"127.0.0.1:{h.free_port()}"])
    assert rc != 0
    assert "in use" in out, out
    check_first_serves(srv)
    # The lock goes with the process: after a stop, the drive opens again.
    srv.stop()
    srv.start()
    check_first_serves(srv)
