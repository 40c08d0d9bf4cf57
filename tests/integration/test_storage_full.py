"""A full drive answers the same in both modes: 507 XOpenLakeStorageFull
(MinIO's choice for its XMinioStorageFull; see src/s3/errors.c), not a 500
or 503 that every SDK retries.  The drives are tiny tmpfs mounts (root
only: skipped elsewhere, as test_ec_faults.py)."""

import pytest
from botocore.exceptions import ClientError

import helpers as h
from test_ec_faults import mount_tmpfs, umount


@pytest.mark.parametrize("mode", ["sd", "ec"])
def test_full_drive_is_507(tmp_path, mode):
    srv = h.make_mode_server(mode, tmp_path / mode, threads=2)
    mounts = [srv.drive(i) for i in range(6)] if mode == "ec" else [srv.data_dir]
    try:
        for m in mounts:
            mount_tmpfs(m, "24m")
        srv.start()
        s3 = h.make_client(srv.endpoint)
        bucket = h.unique_bucket("full")
        s3.create_bucket(Bucket=bucket)
        stored = {}
        failure = None
        # 8 MiB PUTs until the drives are full: the failing one gets the
        # 507 (not a connection reset: the server answers before it has
        # read the body, then lingers), and the next ones too.
        for i in range(40):
            data = bytes([i]) * (8 * h.MIB)
            try:
                s3.put_object(Bucket=bucket, Key=f"o{i}", Body=data)
                stored[f"o{i}"] = data
            except ClientError as e:
                failure = e
                break
        assert failure is not None, "the drives never filled"
        assert h.http_status(failure) == 507, failure.response
        assert h.error_code(failure) == "XOpenLakeStorageFull", failure.response
        assert "full" in failure.response["Error"]["Message"] or \
            "space" in failure.response["Error"]["Message"], failure.response
        for _ in range(3):
            with pytest.raises(ClientError) as ei:
                s3.put_object(Bucket=bucket, Key="again", Body=b"a" * (8 * h.MIB))
            assert h.http_status(ei.value) == 507, ei.value.response
        # What was acknowledged is still there.
        for k, v in stored.items():
            assert s3.get_object(Bucket=bucket, Key=k)["Body"].read() == v, k
    finally:
        srv.close()
        for m in mounts:
            umount(m)
