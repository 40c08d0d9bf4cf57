#!/usr/bin/env bash
# Runs the standard matrix (bench/run.py) on the GPU machine: 16 cores, Ubuntu,
# no network, no -dev packages, no nginx.  Everything travels in .gpu/ from the
# Debian 12 build machine:
#   .gpu/bin/openlake   the server and load generator (build/openlake)
#   .gpu/bin/nginx      Debian's nginx 1.22 (/usr/sbin/nginx: it has the dav module)
#   .gpu/lib/           every library either loads that glibc does not have
#                       (`ldd build/openlake /usr/sbin/nginx`)
# nginx creates its compiled-in temporary directories under /var/lib/nginx at
# start, so they are made first (the machine runs commands as root).
#
#   bash bench/gpu_matrix.sh [run.py options, e.g. --only put,ceil]
set -euo pipefail
R=$(pwd)
[ -x "$R/.gpu/bin/openlake" ] && [ -x "$R/.gpu/bin/nginx" ] || {
    echo "gpu_matrix.sh: .gpu/bin/openlake and .gpu/bin/nginx are needed (see the header)" >&2
    exit 1
}
export LD_LIBRARY_PATH=$R/.gpu/lib PATH=$R/.gpu/bin:$PATH
mkdir -p /var/lib/nginx /var/log/nginx
nproc
lscpu | grep -E "Model name" || true
findmnt -no SOURCE,FSTYPE,OPTIONS -T "${TMPDIR:-/tmp}" || true
OPENLAKE_BIN=$R/.gpu/bin/openlake python3 bench/run.py "$@"
# The device copies back what lands in $OUT.
if [ -n "${OUT:-}" ]; then
    cp bench/results/latest.md bench/results/latest.json "$OUT"/
fi
