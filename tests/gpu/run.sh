#!/usr/bin/env bash
# GPU checks of CUDA IPC reads (native/cuda_ipc.h), run by hand on a GPU host
# (CI has no GPU; tests/integration/test_access.py covers the refusals
# there).  Uses the binaries carried in .gpu/ (see bench/gpu_ckpt.sh): the
# server, libopenlake and cuda_ipc_check.  For each of one drive and EC 4+2:
# cuda_ipc_check (hostile destinations, bounds, another user, a real copy)
# and tests/gpu/cuda_ipc_loads.py (byte-identical GETs and loads into CUDA
# tensors); then a server with OPENLAKE_CUDA=0, whose clients stage.
#   bash tests/gpu/run.sh
set -u
R=$(pwd)
export LD_LIBRARY_PATH=$R/.gpu/lib UCX_MODULE_DIR=$R/.gpu/lib/ucx
export OPENLAKE_LIB=$R/.gpu/bin/libopenlake.so PYTHONPATH=$R/python:$R/.gpu/py
W=$(mktemp -d /dev/shm/olgpu.XXXXXX)
trap 'kill $SRV 2>/dev/null; rm -rf "$W"' EXIT
printf 'user openlake openlake-secret\nuser bob bob-secret-22\n' > "$W/conf"
fail=0
s3() { env -u LD_LIBRARY_PATH curl -sf -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
  --aws-sigv4 "aws:amz:us-east-1:s3" -u openlake:openlake-secret "$@"; }
for mode in one ec nocuda; do
  rm -rf "$W/d"; mkdir -p "$W/d"
  if [ $mode = ec ]; then D=("$W"/d/d{1..6}); else D=("$W/d/data"); fi
  env $([ $mode = nocuda ] && echo OPENLAKE_CUDA=0) $R/.gpu/bin/openlake server \
    --listen 127.0.0.1:19700 --config "$W/conf" "${D[@]}" >/dev/null 2>"$W/log" &
  SRV=$!
  for _ in $(seq 100); do env -u LD_LIBRARY_PATH curl -sf -o /dev/null http://127.0.0.1:19700/_openlake/native && break; sleep 0.1; done
  s3 http://127.0.0.1:19700/gpu-check
  python3 -c "import sys; sys.stdout.buffer.write(bytes((i * 7 + 3) & 255 for i in range(8192)))" > "$W/t"
  s3 -T "$W/t" http://127.0.0.1:19700/gpu-check/t
  if [ $mode != nocuda ]; then
    out=$($R/.gpu/bin/cuda_ipc_check http://127.0.0.1:19700 openlake openlake-secret bob bob-secret-22 gpu-check t)
    echo "$out" | sed "s/^/$mode /"
    want="hello_flag: 1
garbage_uuid: -19
cuda: 1
garbage_handle: -18
truncated: -22
stranger: -13
copy: 4096
data: ok
past_end: -22
wrapped: -22
stranger_real: -13
untouched: ok
client_get: 4096 ok ipc=1"
    [ "$out" = "$want" ] && echo "$mode cuda_ipc_check: ok" || { echo "$mode cuda_ipc_check: FAIL"; fail=1; }
    python3 tests/gpu/cuda_ipc_loads.py http://127.0.0.1:19700 $mode 2>&1 | grep -v Warning || fail=1
  else
    python3 - <<'PY' || fail=1
import torch
from openlake import Client
c = Client("http://127.0.0.1:19700", "openlake", "openlake-secret")
torch.zeros(1, device="cuda")
d = torch.zeros(8192, dtype=torch.uint8, device="cuda")
n = c.get_into("gpu-check", "t", d)
ok = c.cuda_path == "staged" and n == 8192 and bytes(d.cpu().numpy()) == bytes((i * 7 + 3) & 255 for i in range(8192))
print("nocuda: server without CUDA, client stages:", "ok" if ok else "FAIL")
raise SystemExit(0 if ok else 1)
PY
  fi
  kill -0 $SRV || { echo "$mode: server died"; fail=1; }
  kill $SRV; wait $SRV
done
echo "GPU checks: $([ $fail = 0 ] && echo ALL OK || echo FAILED)"
exit $fail
