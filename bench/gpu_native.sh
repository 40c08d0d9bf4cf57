#!/usr/bin/env bash
# The native GET of 64 MiB on the GPU machine against HTTP and a one-thread
# memcpy of the same run (issue 13), by lanes 1 and 4: bench/native_lanes.sh
# with the server and libopenlake carried in .gpu/ with their Debian
# libraries, as bench/gpu_native_probe.sh does.
R=$PWD; export LD_LIBRARY_PATH=$R/.gpu/lib UCX_MODULE_DIR=$R/.gpu/lib/ucx
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); $(nproc) cores"
CLIENTS="1 4" timeout 200 bash bench/native_lanes.sh .gpu/bin 3 1 4
