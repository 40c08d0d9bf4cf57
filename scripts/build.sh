#!/usr/bin/env bash
# Configures and builds OpenLake into build/ (release-ish: -O2 -g, asserts on).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  meson setup build --buildtype=debugoptimized -Dwerror=true >/dev/null
fi
ninja -C build
