#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs
# `openlake server` on the embedded default (./openlake-data, 127.0.0.1:9000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh >/dev/null
exec ./build/openlake server ./openlake-data "$@"
