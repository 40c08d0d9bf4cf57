#!/usr/bin/env bash
# Installs the Debian 12 packages that OpenLake's build, server and tests need.
# Idempotent; run as root.  Installs nothing when everything is present.
set -euo pipefail

PKGS=(
  # build
  build-essential meson ninja-build pkg-config clang libclang-rt-14-dev
  liburing-dev liblmdb-dev libisal-dev libssl-dev libexpat1-dev libboost-context-dev
  libucx-dev libcurl4-openssl-dev libcjson-dev
  # tests and tools (ucx-utils: ucx_info, to see the transports UCX finds)
  ucx-utils python3 python3-pytest python3-pytest-xdist python3-boto3 awscli lmdb-utils
  nginx-light curl
  # the openssl CLI: tests/integration/test_tls.py makes its test certificates with it
  openssl
  # the cluster tests start a real etcd (src/cluster/ talks to it)
  etcd-server etcd-client
  # libfaketime (LD_PRELOAD) sets one cluster node's clock ahead in
  # tests/integration/test_cluster_consistency.py
  libfaketime
  # third-party S3 clients for tests/integration/test_clients.py (s3fs needs fuse3's
  # fusermount3; the tests skip the FUSE mount where /dev/fuse is unusable)
  s3cmd rclone s3fs fuse3
  # the Python package (python/): pip installs it from the checkout; numpy and
  # PyTorch (CPU) for its buffer, safetensors and checkpoint tests
  python3-pip python3-setuptools python3-numpy python3-torch
  # the KV-cache benchmark's reference (bench/kv_redis.py): LMCache's default store
  redis-server python3-redis
)
# The AWS SDK for JavaScript check (tests/js, tests/integration/test_js_sdk.py):
# node and npm from Debian when the commands are missing.  Asked for by
# command rather than by package: NodeSource's nodejs (newer, which the SDK
# needs: node >= 20) bundles npm and conflicts with Debian's npm package.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
# AES-256-GCM for encryption at rest runs on Intel's ipsec-mb where Debian
# ships it (amd64 only; src/core/gcm.h); OpenSSL elsewhere.
if [ "$(dpkg --print-architecture)" = amd64 ]; then PKGS+=(libipsec-mb-dev); fi
command -v npm >/dev/null 2>&1 || PKGS+=(npm)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
