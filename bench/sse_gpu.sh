#!/bin/sh
# Encrypted GETs against plain GETs on a many-core host (issue 16), with the
# decrypt pool off (sse_decrypt_threads 0: every window opened on the
# request's loop thread, as before read-ahead) and as the server derives it
# from the cores (-1), their runs interleaved: plain and SSE-S3 GET MiB/s,
# 1 MiB / 16 MiB / 64 MiB objects, 1 and 4 clients, one drive and EC 4+2.
#
# Needs nothing but a built server and Debian's boto3 for bucket set-up:
#   R=/path/to/repo   (this checkout)
#   $R/.gpu/bin/openlake       the server binary (it is also the load tool:
#                              `openlake bench`)
#   $R/.gpu/lib                its shared libraries (LD_LIBRARY_PATH)
#   $R/.gpu/py                 boto3 1.26 + botocore (PYTHONPATH), for the
#                              system python3
# Run from the checkout:   sh bench/sse_gpu.sh        (about 4 minutes on 16 cores)
# Knobs: RUNS (2), DURATION (1s), SIZES (1MiB,16MiB,64MiB), CONC (1,4),
#        DECRYPT (0,-1:0,-1: pool off, pool with its threads sleeping at once
#        after a job, pool with the default sse_decrypt_spin_us), MODES ("sd ec").
# After each table, each server's openlake_sse_* metrics: windows opened in
# place / from pieces / copied, and split windows' parts opened by the pool
# or taken back by the loop thread.
set -eu
R=${R:-$(cd "$(dirname "$0")/.." && pwd)}
BIN=${OPENLAKE_BIN:-$R/.gpu/bin/openlake}
export LD_LIBRARY_PATH="$R/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$R/.gpu/py${PYTHONPATH:+:$PYTHONPATH}"
RUNS=${RUNS:-2}
DURATION=${DURATION:-1s}
SIZES=${SIZES:-1MiB,16MiB,64MiB}
CONC=${CONC:-1,4}
DECRYPT=${DECRYPT:-0,-1:0,-1}
MODES=${MODES:-sd ec}

"$BIN" version
echo "# cores: $(nproc)"
for m in $MODES; do
    ec=""
    [ "$m" = ec ] && ec="--ec"
    # Server loop threads: one per core (0); the load tool's 4 threads.
    python3 "$R/bench/sse.py" --bin "$BIN" $ec --runs "$RUNS" --duration "$DURATION" \
        --sizes "$SIZES" --concurrency "$CONC" --decrypt-threads "$DECRYPT" \
        --server-threads 0 --client-threads 4 --objects 8
done
