#!/usr/bin/env bash
# bench/native.sh on the GPU machine (the server and native_bench carried in
# .gpu/ with their Debian libraries, as bench/gpu_native_probe.sh does), with
# the client on one lane and on four (the server's native_lanes default: 4).
R=$PWD; export LD_LIBRARY_PATH=$R/.gpu/lib UCX_MODULE_DIR=$R/.gpu/lib/ucx
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); $(nproc) cores"
for L in 1 4; do
  echo "=== client lanes $L"
  OPENLAKE_CLIENT_LANES=$L timeout 240 bash bench/native.sh .gpu/bin
done
