#!/usr/bin/env bash
# Runs bench/gpu_ckpt.py on the GPU machine (no network, no -dev packages):
# the server and libopenlake built here on Debian 12 travel in .gpu/ with
# their libraries (see bench/RESULTS.md, "Checkpoints and weights on a GPU",
# for how .gpu/ is made), the data goes to a local disk directory.
#
#   bash bench/gpu_ckpt.sh GB [extra gpu_ckpt.py args]
set -euo pipefail
GB=${1:-16}; shift || true
R=$(pwd)
export LD_LIBRARY_PATH=$R/.gpu/lib UCX_MODULE_DIR=$R/.gpu/lib/ucx
export OPENLAKE_LIB=$R/.gpu/bin/libopenlake.so
# The machine's own Python packages first; Debian's boto3 (carried) after.
export PYTHONPATH=$R/python:$R/.gpu/py
W=${WORK:-/tmp/olbench}
rm -rf "$W"; mkdir -p "$W"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch, safetensors; print('torch', torch.__version__, 'safetensors', safetensors.__version__, 'cuda', torch.version.cuda)"
df -h "$W" | tail -1
PORT=19500
$R/.gpu/bin/openlake server --listen 127.0.0.1:$PORT --threads 8 "$W/data" 2>"$W/server.log" &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null || true' EXIT
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/_openlake/native" && break; sleep 0.1; done
python3 - <<PY
import boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:$PORT", aws_access_key_id="openlake",
                  aws_secret_access_key="openlake-secret", region_name="us-east-1")
for b in ("bench-ckpt", "dcp"):
    s3.create_bucket(Bucket=b)
PY
python3 "$R/bench/gpu_ckpt.py" --endpoint "http://127.0.0.1:$PORT" --gb "$GB" --dir "$W" "$@"
if [ -n "${DCP:-}" ]; then
  mkdir -p "$W/pg"
  python3 "$R/tests/integration/dcp_ranks.py" "http://127.0.0.1:$PORT" dcp "$W/pg" && echo "DCP gloo: ok"
  rm -rf "$W/pg"; mkdir -p "$W/pg"
  python3 "$R/tests/integration/dcp_ranks.py" "http://127.0.0.1:$PORT" dcp "$W/pg" --cuda && echo "DCP cuda: ok"
fi
