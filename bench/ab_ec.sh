#!/usr/bin/env bash
# Interleaved A/B of two openlake binaries on an erasure-coded server (six
# directories, 4+2): one fresh server per binary, the same working set
# prepared on each, then RUNS rounds of `openlake bench` alternating A and B.
# Prints op/s, MiB/s and the server's CPU per operation (utime+stime from
# /proc over the run), which a loaded machine moves less than throughput.
#
#   bench/ab_ec.sh BIN_A BIN_B
#   env: OP (get) SIZE (4KiB) C (64) N (1000) RUNS (3) DUR (3s)
#        ONE_DRIVE=1 (one drive instead of the erasure set, same runs)
#        EXTRA (more options for the prepare, e.g. "--multipart-size 8MiB")
#        DEGRADE=I (after the prepare, take drive I out of service: degraded reads)
set -euo pipefail
A=$1; B=$2
OP=${OP:-get}; SIZE=${SIZE:-4KiB}; C=${C:-64}; N=${N:-1000}; RUNS=${RUNS:-3}; DUR=${DUR:-3s}
W=$(mktemp -d /tmp/ab_ec.XXXXXX)
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$W"' EXIT
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
start() { # bin tag -> sets PORT_tag
  local bin=$1 tag=$2 port; port=$(free_port)
  mkdir -p "$W/$tag"
  local drives=("$W/$tag"/d{1..6} --ec_data 4 --ec_parity 2)
  [ "${ONE_DRIVE:-0}" = 1 ] && drives=("$W/$tag/d1")
  "$bin" server "${drives[@]}" --listen 127.0.0.1:$port \
      >"$W/$tag/log" 2>&1 &
  PIDS+=($!); echo $! >"$W/$tag/pid"; echo $port >"$W/$tag/port"
  for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:$port/ && break; sleep 0.1; done
  # shellcheck disable=SC2086
  "$bin" bench --endpoint http://127.0.0.1:$port --op "$OP" --size "$SIZE" --objects "$N" \
      --prepare ${EXTRA:-} --duration 1s --concurrency "$C" --quiet >/dev/null
  if [ -n "${DEGRADE:-}" ]; then
    "$bin" admin drive --endpoint http://127.0.0.1:$port --index "$DEGRADE" --state offline \
        >/dev/null
  fi
}
start "$A" A; start "$B" B
for _ in $(seq "$RUNS"); do
  for t in A B; do
    bin=$([ $t = A ] && echo "$A" || echo "$B"); port=$(cat "$W/$t/port"); pid=$(cat "$W/$t/pid")
    c0=$(awk '{print $14+$15}' /proc/$pid/stat)
    "$bin" bench --endpoint http://127.0.0.1:$port --op "$OP" --size "$SIZE" --objects "$N" \
        --concurrency "$C" --duration "$DUR" --quiet --json "$W/$t.json" >/dev/null
    c1=$(awk '{print $14+$15}' /proc/$pid/stat)
    python3 - "$W/$t.json" "$t" "$((c1 - c0))" "$(getconf CLK_TCK)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); t = d["total"]; ticks = int(sys.argv[3]); hz = int(sys.argv[4])
print(f'{sys.argv[2]} {d["op"]} {d["size"]} c={d["concurrency"]}: {t["ops_per_s"]:.0f} op/s '
      f'{t["mib_per_s"]:.0f} MiB/s  server {ticks / hz * 1e6 / max(t["ops"], 1):.0f} us CPU/op  '
      f'errors {d["errors"]["total"]}')
PY
  done
done
