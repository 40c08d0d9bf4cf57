#!/usr/bin/env bash
# Runs the integration suite (both modes) with the image's current SDK
# generation (pyenv python3: boto3/botocore 1.43, CRC32 checksums by
# default) instead of Debian's boto3 1.26, which scripts/test.sh uses.
# pytest comes from Debian (no PyPI): only its own modules are put on the
# path, so boto3 stays the new one.  Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${OPENLAKE_NEW_PYTHON:-/root/.pyenv/shims/python3}
[ -x "$PY" ] || { echo "no $PY: this machine has no second SDK generation"; exit 0; }
only=$(mktemp -d)
trap 'rm -rf "$only"' EXIT
for m in pytest _pytest pluggy iniconfig py.py; do
  [ -e "/usr/lib/python3/dist-packages/$m" ] && ln -s "/usr/lib/python3/dist-packages/$m" "$only/"
done
"$PY" -c 'import boto3, sys; print("boto3", boto3.__version__, "python", sys.version.split()[0])'
PYTHONPATH="$only" OPENLAKE_BIN="${OPENLAKE_BIN:-$PWD/build/openlake}" \
  "$PY" -m pytest -q -p no:cacheprovider tests/integration "$@"
