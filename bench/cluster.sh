#!/bin/bash
# A 3-node cluster (3 nodes x 2 drives, EC 4+2, etcd, UCX on loopback) against one node with
# six drives EC 4+2, through the GET and PUT rows of the standard matrix (bench/run.py's MATRIX
# and `openlake bench`); one run per row and side.  Prints the ratio cluster / single per row
# and writes bench/results/cluster.md and cluster.json.
#   bench/cluster.sh [--duration 3s] [--threads 2]
# The openlake binary: $OPENLAKE_BIN, else build-bench/openlake or build/openlake.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v etcd >/dev/null && [ ! -x /usr/bin/etcd ]; then
    echo "cluster.sh: etcd is needed (apt-get install etcd-server)" >&2
    exit 1
fi
# UCX would also open tcp lanes on the host's other interfaces to reach a peer on this host.
export UCX_NET_DEVICES="${UCX_NET_DEVICES:-lo}"
exec /usr/bin/env python3 bench/cluster.py "$@"
