#!/usr/bin/env bash
# Native GETs by lanes (issue 13): one server per native_lanes value, then
# bench/native_lanes.py with 1 and several clients, client lanes = server
# lanes.  A benchmark, not a test; results in bench/RESULTS.md ("Lanes").
#
#   bash bench/native_lanes.sh [BIN_DIR] [SECONDS] [LANES...]   (default: build 2 1 4)
# On the GPU machine: BIN_DIR=.gpu/bin with LD_LIBRARY_PATH and
# UCX_MODULE_DIR set (bench/gpu_native_probe.sh).
set -euo pipefail
BIN=$(cd "${1:-build}" && pwd); SECS=${2:-2}; shift 2 || true
LANES=${*:-1 4}
export OPENLAKE_LIB=${OPENLAKE_LIB:-$BIN/libopenlake.so}
R=$(cd "$(dirname "$0")/.." && pwd)
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
echo "host: $(nproc) cores; $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
for L in $LANES; do
  D=$(mktemp -d /tmp/ol-lanes.XXXXXX); HP=$(port)
  "$BIN/openlake" server --listen 127.0.0.1:$HP --native_lanes "$L" --threads 8 "$D/data" 2>"$D/log" &
  SRV=$!
  for _ in $(seq 100); do env -u LD_LIBRARY_PATH curl -sf -o /dev/null "http://127.0.0.1:$HP/_openlake/native" && break; sleep 0.05; done
  env -u LD_LIBRARY_PATH curl -s -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --aws-sigv4 "aws:amz:us-east-1:s3" -u openlake:openlake-secret "http://127.0.0.1:$HP/bench" >/dev/null
  # The HTTP path in the same run: one connection, GETs of 64 MiB.
  "$BIN/openlake" bench --endpoint "http://127.0.0.1:$HP" --bucket bench --op get --size 64MiB \
      --concurrency 1 --objects 2 --prepare --duration "${SECS}s" --quiet 2>/dev/null | head -1 |
      sed 's/^/HTTP GET 64 MiB, 1 connection: /'
  for C in ${CLIENTS:-1 4}; do
    python3 "$R/bench/native_lanes.py" "http://127.0.0.1:$HP" bench --lanes "$L" --clients "$C" --mib 64 --seconds "$SECS"
  done
  kill $SRV; wait $SRV 2>/dev/null || true; rm -rf "$D"
done
