#!/usr/bin/env python3
"""Checkpoint and weight loading into GPU memory: OpenLake against the
references, in one run (issue 14).  Not a test.

Runs on the GPU machine (see bench/gpu_ckpt.sh, which starts the server):

  python3 bench/gpu_ckpt.py --endpoint http://127.0.0.1:PORT --gb 16 --dir /path/on/disk

Rows (GB/s, median of --reps, and ratios):
  1. openlake.torch.load_safetensors(..., device="cuda:0") (its cuda_path: "ipc"
     where the server runs here with a CUDA driver), and the same through
     the pinned staging ring (cuda_path="staged"); page cache warm
  2. safetensors.torch.load_file(local file, device="cuda") with a warm page cache
  3. boto3 download through the S3 port, then safetensors.torch.load (bytes) to cuda
  4. ceilings: pinned host-to-device copy (torch, 1 GiB copies) and
     multi-threaded host memcpy
  save: openlake.torch.save_state_dict from GPU tensors, against the disk's own
  O_DIRECT write ceiling (dd) and safetensors.torch.save_file to the local disk.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from openlake import Client  # noqa: E402
from openlake.torch import load_safetensors, save_state_dict  # noqa: E402


def med(xs):
    return statistics.median(xs)


def make_state(gb, device):
    """Tensors of a transformer-like mix (bf16 matrices, fp32 norms) adding up to gb."""
    sd, total, i = {}, 0, 0
    want = int(gb * (1 << 30))
    g = torch.Generator(device=device).manual_seed(1)
    while total < want:
        n = min(64 << 20, (want - total) // 2) or 1
        sd[f"layers.{i}.w"] = torch.randn(n, dtype=torch.bfloat16, device=device, generator=g)
        sd[f"layers.{i}.norm"] = torch.ones(4096, dtype=torch.float32, device=device)
        total += n * 2 + 4096 * 4
        i += 1
    return sd, total


def timeit(fn, reps):
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
        del out
        torch.cuda.empty_cache()
    return ts


def h2d_ceiling(total):
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    dst = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    reps = max(4, int(total // n))
    t = time.perf_counter()
    for _ in range(reps):
        dst.copy_(src, non_blocking=True)
    torch.cuda.synchronize()
    return reps * n / (time.perf_counter() - t)


def memcpy_ceiling(threads=16, per=512 << 20, reps=4):
    srcs = [torch.ones(per, dtype=torch.uint8) for _ in range(threads)]
    dsts = [torch.empty(per, dtype=torch.uint8) for _ in range(threads)]
    for d, s in zip(dsts, srcs):
        d.copy_(s)

    def run(i):
        for _ in range(reps):
            dsts[i].copy_(srcs[i])
    torch.set_num_threads(1)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    t = time.perf_counter()
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    return threads * per * reps / (time.perf_counter() - t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--access-key", default="openlake")
    ap.add_argument("--secret-key", default="openlake-secret")
    ap.add_argument("--gb", type=float, default=16)
    ap.add_argument("--dir", required=True, help="local disk directory for the file rows")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-boto3", action="store_true")
    a = ap.parse_args()
    from safetensors.torch import load as st_load, load_file, save_file

    gpu = torch.cuda.get_device_name(0)
    c = Client(a.endpoint, access_key=a.access_key, secret_key=a.secret_key)
    bucket, key = "bench-ckpt", "model.safetensors"
    try:
        c.create_bucket(bucket)
    except Exception:  # noqa: BLE001 - exists, or no such call: made through S3 below
        pass
    sd, total = make_state(a.gb, "cuda")
    gbs = total / 1e9
    res = {"gpu": gpu, "bytes": total, "cuda_path": getattr(c, "cuda_path", "?")}

    # Save: OpenLake from GPU tensors.
    t = [time.perf_counter()]
    save_state_dict(c, bucket, key, sd)
    res["save_openlake_s"] = time.perf_counter() - t[0]
    path = os.path.join(a.dir, "model.safetensors")
    t = time.perf_counter()
    save_file({k: v for k, v in sd.items()}, path)
    os.sync()
    res["save_safetensors_file_s"] = time.perf_counter() - t
    ddf = os.path.join(a.dir, "dd.bin")
    cnt = max(1, int(total // (64 << 20)))
    t = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={ddf}", "bs=64M", f"count={cnt}",
                    "oflag=direct", "status=none"], check=True)
    res["disk_write_ceiling_gbs"] = cnt * (64 << 20) / (time.perf_counter() - t) / 1e9
    os.unlink(ddf)
    del sd
    torch.cuda.empty_cache()

    # Loads.  The server wrote with O_DIRECT, so its page cache is cold, as
    # the file's is not (warmed below): one uncounted load warms it, so that
    # both rows read from memory.
    del_warm = load_safetensors(c, bucket, key, device="cuda:0")
    del del_warm
    torch.cuda.empty_cache()
    ol = timeit(lambda: load_safetensors(c, bucket, key, device="cuda:0"), a.reps)
    res["load_cuda_path"] = c.cuda_path
    staged = Client(a.endpoint, access_key=a.access_key, secret_key=a.secret_key,
                    cuda_path="staged")
    ols = timeit(lambda: load_safetensors(staged, bucket, key, device="cuda:0"), a.reps)
    res["load_openlake_staged_gbs"] = gbs / med(ols)
    staged.close()
    with open(path, "rb") as f:  # warm the page cache
        while f.read(1 << 26):
            pass
    stf = timeit(lambda: load_file(path, device="cuda:0"), a.reps)
    res["load_openlake_gbs"] = gbs / med(ol)
    res["load_safetensors_file_gbs"] = gbs / med(stf)
    if not a.skip_boto3:
        import boto3
        from botocore.config import Config
        s3 = boto3.client("s3", endpoint_url=a.endpoint, aws_access_key_id=a.access_key,
                          aws_secret_access_key=a.secret_key, region_name="us-east-1",
                          config=Config(s3={"addressing_style": "path"}))

        def via_s3():
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            return st_load(body)  # to CPU; then to the device
        def via_s3_gpu():
            return {k: v.to("cuda:0", non_blocking=True) for k, v in via_s3().items()}
        b3 = timeit(via_s3_gpu, 1)
        res["load_boto3_gbs"] = gbs / med(b3)
    res["h2d_pinned_ceiling_gbs"] = h2d_ceiling(total) / 1e9
    res["memcpy_ceiling_gbs"] = memcpy_ceiling() / 1e9
    low = min(res["h2d_pinned_ceiling_gbs"], res["memcpy_ceiling_gbs"])
    res["ratio_openlake_to_lower_ceiling"] = res["load_openlake_gbs"] / low
    res["ratio_openlake_to_safetensors_file"] = (res["load_openlake_gbs"] /
                                                 res["load_safetensors_file_gbs"])
    res["save_openlake_gbs"] = gbs / res["save_openlake_s"]
    res["save_safetensors_file_gbs"] = gbs / res["save_safetensors_file_s"]
    res["ratio_save_to_disk_ceiling"] = res["save_openlake_gbs"] / res["disk_write_ceiling_gbs"]
    print(json.dumps(res, indent=1))
    os.unlink(path)


if __name__ == "__main__":
    main()
