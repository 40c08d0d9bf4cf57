#!/usr/bin/env bash
# The native port against the HTTP path, same host, one run (issue 13).
# A benchmark, not a test; results go to bench/RESULTS.md ("Native client").
#
#   bash bench/native.sh [BUILD_DIR]     (default: build)
#
# Rows: GET 64 MiB (native vs HTTP vs memcpy), GET 4 KiB p50/p99 (native vs
# HTTP, one request at a time), 4 KiB reads per second (native GET_BATCH of
# 1000 vs HTTP at 16 connections); the native rows for each UCX transport
# that can carry them here (UCX_TLS).
set -euo pipefail
B=${1:-build}
OL=$B/openlake NB=$B/native_bench
D=$(mktemp -d /tmp/ol-native-bench.XXXXXX)
port() { /usr/bin/python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
HP=$(port) NP=$(port)
$OL server --listen 127.0.0.1:$HP --native_listen 127.0.0.1:$NP "$D/data" 2>"$D/server.log" &
SRV=$!
trap 'kill $SRV 2>/dev/null; wait $SRV 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$HP/_openlake/native" && break; sleep 0.05; done
echo "host: $(nproc) cores, $(uname -r); $(ucx_info -v | head -1)"
http() { $OL bench --endpoint "http://127.0.0.1:$HP" --bucket bench --quiet --json "$D/b.json" "$@" >/dev/null 2>&1; cat "$D/b.json"; }
js() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
h64=$(http --op get --size 64MiB --concurrency 1 --objects 2 --prepare --duration 5s | js 'd["total"]["mib_per_s"]*1048576/1e9')
hlat=$(http --op get --size 4KiB --concurrency 1 --objects 1000 --prepare --duration 5s | js '"%d %d" % (d["total"]["latency_us"]["p50"], d["total"]["latency_us"]["p99"])')
hops=$(http --op get --size 4KiB --concurrency 16 --objects 1000 --duration 5s | js 'd["total"]["ops_per_s"]')
printf 'HTTP GET 64 MiB (1 conn): %.2f GB/s\n' "$h64"
echo "HTTP GET 4 KiB (1 conn): p50/p99 us: $hlat"
printf 'HTTP GET 4 KiB (16 conns): %.0f ops/s\n' "$hops"
for tls in all tcp; do
  echo "--- native, UCX_TLS=$tls"
  out=$(UCX_TLS=$tls $NB 127.0.0.1:$NP bench get 64 9)
  echo "$out"
  g=$(echo "$out" | sed -n 's/native GET 64 MiB: \([0-9.]*\) GB.*/\1/p')
  m=$(echo "$out" | sed -n 's/.*memcpy \([0-9.]*\) GB.*/\1/p')
  UCX_TLS=$tls $NB 127.0.0.1:$NP bench lat4k 5000
  b=$(UCX_TLS=$tls $NB 127.0.0.1:$NP bench batch4k 5 | tee /dev/stderr | sed -n 's/.*: \([0-9]*\) reads.*/\1/p')
  /usr/bin/python3 -c "print('ratios (UCX_TLS=$tls): GET 64 MiB native/HTTP %.2f, native/memcpy %.2f; batched 4 KiB reads native/HTTP %.1fx' % ($g/$h64, $g/$m, $b/$hops))"
done
