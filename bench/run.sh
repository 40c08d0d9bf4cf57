#!/bin/bash
# The standard benchmark matrix: OpenLake (1 drive, and 6 drives EC 4+2) against nginx and raw
# ceilings, medians of 3 runs of 5 s (--quick: 1 run).  Writes
# bench/results/latest.md and latest.json and prints the table.
#   bench/run.sh [--quick] [--duration 5s] [--runs N] [--only get,put,list,ceil]
#                [--no-ec] [--ec-runs N] [--ec-duration 5s]
# The openlake binary: $OPENLAKE_BIN, else build-bench/openlake or build/openlake.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v nginx >/dev/null; then
    echo "run.sh: nginx is needed for the reference column (apt-get install nginx-light)" >&2
    exit 1
fi
if ! nginx -V 2>&1 | grep -q -- --with-http_dav_module; then
    echo "run.sh: this nginx lacks the dav module; install nginx-full or nginx-extras" >&2
    exit 1
fi
exec /usr/bin/env python3 bench/run.py "$@"
