#!/bin/bash
# Interleaved A/B of openlake binaries, one fresh server per row (one drive with SD=1,
# else EC 4+2 on six directories), load from `openlake bench` (BENCH, default build/openlake);
# prints op/s, latency and the server's CPU per op.  OP=put|get, PREP for GET's objects, DUR.
# usage: bench/ab.sh ROUNDS "size:conc ..." BIN_A BIN_B ...   (data under $TMPDIR, removed after)
BENCH=${BENCH:-$(dirname "$0")/../build/openlake}
rounds=$1; shift; cases=$1; shift
for r in $(seq $rounds); do
 for bin in "$@"; do
  for c in $cases; do
   size=${c%%:*}; conc=${c##*:}
   d=$(mktemp -d ${TMPDIR:-/tmp}/ol-ab.XXXX); port=$((20000 + RANDOM % 20000))
   if [ -n "$SD" ]; then dirs="$d/d1"; else dirs="--ec_data 4 --ec_parity 2 $d/d1 $d/d2 $d/d3 $d/d4 $d/d5 $d/d6"; fi
   $bin server --listen 127.0.0.1:$port $dirs >$d/log 2>&1 &
   pid=$!; sleep 0.7
   [ -n "$PREP" ] && $BENCH bench --endpoint http://127.0.0.1:$port --op put $PREP --size $size --concurrency 16 --duration 0 --quiet >/dev/null 2>&1
   t0=$(awk '{print $14+$15}' /proc/$pid/stat)
   out=$($BENCH bench --endpoint http://127.0.0.1:$port --op ${OP:-put} ${PREP:+--objects 1000} --size $size --concurrency $conc --duration ${DUR:-5s} --quiet 2>&1 | grep '^total' | awk '{print $2, $3, $4, $5, $6, $7}')
   t1=$(awk '{print $14+$15}' /proc/$pid/stat); ops=$(echo "$out" | awk '{print $1}')
   cpu=$(python3 -c "print('%.0f us/op' % (($t1-$t0)*10000/($ops*${DUR%s}) if float('$ops' or 0)>0 else 0))")
   echo "r$r $(basename $(dirname $(dirname $bin)))/$(basename $(dirname $bin)) $size c=$conc: $out  cpu $cpu"
   kill $pid; wait $pid 2>/dev/null; rm -rf $d
  done
 done
done
