#!/bin/bash
# The UCX shard path against ucx_perftest (UCX's own ceiling), on the same
# transports and sizes, in the same run (issue 12).  For each transport:
# bench/net_drive.c (a drive server over an in-memory drive in one process,
# remote drives in another, THREADS client threads) measures shard writes
# (begin + write + commit + mark_complete) and read_shard; then
# `ucx_perftest -t ucp_am_bw` measures one-way active message bandwidth of
# the same sizes between two processes.  Prints a markdown table with the
# ratios ours / ucx_perftest.  MiB = 2^20 bytes (ucx_perftest's "MB").
#
#   bench/net_drive.sh [-t THREADS] [-d SECONDS] [-s SIZES] [-T TRANSPORTS]
#
# TRANSPORTS (comma list, default tcp,shm,shm-eh):
#   tcp     UCX_TLS=tcp for both
#   shm     UCX's default on one host (UCX_TLS unset): ucx_perftest gets
#           shared memory and cma; our endpoints ask for peer-failure error
#           handling, which UCX 1.13's shared memory transports do not offer
#           by default, so they get tcp/lo (see bench/RESULTS.md)
#   shm-eh  the default plus UCX_MM_ERROR_HANDLING=y for both, which lets
#           our endpoints use sysv/posix shared memory for active messages
# The net_drive binary: $NET_DRIVE_BIN, else build/net_drive (meson builds it).
# NET_DRIVE_RESULTS=FILE keeps the raw lines there.
# A run of the defaults takes about 70 s.  A benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

threads=8 secs=1.5 sizes=65536,1048576,4194304 transports=tcp,shm,shm-eh
while getopts "t:d:s:T:" o; do
    case $o in
    t) threads=$OPTARG ;;
    d) secs=$OPTARG ;;
    s) sizes=$OPTARG ;;
    T) transports=$OPTARG ;;
    *) sed -n '2,22p' "$0" >&2; exit 2 ;;
    esac
done
bin=${NET_DRIVE_BIN:-build/net_drive}
[ -x "$bin" ] || { echo "net_drive.sh: $bin is missing (ninja -C build)" >&2; exit 1; }
command -v ucx_perftest >/dev/null ||
    { echo "net_drive.sh: ucx_perftest is missing (apt-get install ucx-utils)" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Runs cmd under the transport's environment.
with_tls() {
    local t=$1
    shift
    case $t in
    tcp) env UCX_TLS=tcp UCX_NET_DEVICES=lo "$@" ;;
    shm) env -u UCX_TLS UCX_NET_DEVICES=lo "$@" ;;
    shm-eh) env -u UCX_TLS UCX_NET_DEVICES=lo UCX_MM_ERROR_HANDLING=y "$@" ;;
    *) echo "net_drive.sh: unknown transport $t" >&2; return 2 ;;
    esac
}

# ucx_perftest ucp_am_bw of one size: prints MiB/s (the overall bandwidth).
perftest() {
    local t=$1 size=$2 port iters out
    port=$(free_port)
    iters=$(( (768 << 20) / size ))
    [ "$iters" -ge 200 ] || iters=200
    with_tls "$t" timeout 60 ucx_perftest -p "$port" >/dev/null 2>&1 &
    local srv=$!
    out=""
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        sleep 0.2
        out=$(with_tls "$t" timeout 60 ucx_perftest 127.0.0.1 -p "$port" -t ucp_am_bw \
            -s "$size" -n "$iters" -w $((iters / 10)) -f -v 2>/dev/null | grep -E '^ *[0-9]+,' |
            tail -1) && [ -n "$out" ] && break
    done
    wait "$srv" 2>/dev/null || true
    # iterations,p50_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
    echo "$out" | awk -F, '{ print $6 }'
}

results=${NET_DRIVE_RESULTS:-$(mktemp)}
[ -n "${NET_DRIVE_RESULTS:-}" ] || trap 'rm -f "$results"' EXIT
start=$(date +%s)
IFS=, read -ra tl <<<"$transports"
IFS=, read -ra sl <<<"$sizes"
for t in "${tl[@]}"; do
    echo "== $t: net_drive -t $threads -d $secs -s $sizes" >&2
    out=$(with_tls "$t" "$bin" -t "$threads" -d "$secs" -s "$sizes")
    echo "$out" >&2
    echo "$out" | sed "s/^/$t /" >>"$results"
    for s in "${sl[@]}"; do
        bw=$(perftest "$t" "$s")
        echo "== $t: ucx_perftest ucp_am_bw -s $s: ${bw:-failed} MiB/s" >&2
        echo "$t perftest size=$s mibps=${bw:-0}" >>"$results"
    done
done

echo
echo "threads=$threads seconds=$secs; $(nproc) CPUs, load average $(cut -d" " -f1-3 /proc/loadavg); UCX $(ucx_info -v | sed -n 's/^# Version //p'); wall $(( $(date +%s) - start )) s"
echo
echo "| transport | shard size | write MiB/s (ops/s) | read MiB/s (ops/s) | ucx_perftest ucp_am_bw MiB/s | write / perftest | read / perftest |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
awk '
function kv(k,   i, a) {
    for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == k) return a[2] }
    return ""
}
$2 == "net_drive" {
    key = $1 " " kv("size"); op = kv("op")
    bw[key "/" op] = kv("mibps"); ops[key "/" op] = kv("ops") / kv("seconds")
    if (!(key in seen)) { seen[key] = 1; order[n++] = key }
}
$2 == "perftest" { pt[$1 " " kv("size")] = kv("mibps") }
END {
    for (i = 0; i < n; i++) {
        k = order[i]; split(k, p, " ")
        if (p[2] >= 1048576) sz = sprintf("%d MiB", p[2] / 1048576)
        else sz = sprintf("%d KiB", p[2] / 1024)
        ref = pt[k] + 0; w = bw[k "/write"] + 0; r = bw[k "/read"] + 0
        wr = "-"; rr = "-"
        if (ref > 0) { wr = sprintf("%.2f", w / ref); rr = sprintf("%.2f", r / ref) }
        printf "| %s | %s | %.0f (%.0f) | %.0f (%.0f) | %.0f | %s | %s |\n", p[1], sz, w,
            ops[k "/write"], r, ops[k "/read"], ref, wr, rr
    }
}' "$results"
