#!/usr/bin/env bash
# Lanes on the GPU machine (carried .gpu/, bench/gpu_native_probe.sh): GET 64 MiB
# by lanes 1 vs 4 (bench/native_lanes.sh), then the small checkpoint
# (bench/gpu_ckpt.sh 4 --reps 1) with the client on 1 lane and on 4.
R=$PWD; export LD_LIBRARY_PATH=$R/.gpu/lib UCX_MODULE_DIR=$R/.gpu/lib/ucx
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 bash bench/native_lanes.sh .gpu/bin 2 1 4
for L in 1 4; do
  echo "=== gpu_ckpt.sh 4 --reps 1, OPENLAKE_CLIENT_LANES=$L (server native_lanes default: 4)"
  OPENLAKE_CLIENT_LANES=$L DCP= timeout 170 bash bench/gpu_ckpt.sh 4 --reps 1 2>&1 | tail -25
done
