#!/usr/bin/env bash
# Installs everything sluice needs to build and test on a fresh Debian 12 machine:
# the apt packages listed below and the pinned npm packages that carry DuckDB.
# Idempotent and quiet when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libyaml-cpp-dev liburing-dev libcli11-dev
  zlib1g-dev libsnappy-dev liblz4-dev libzstd-dev nlohmann-json3-dev
  nodejs
  libssl-dev librdkafka-dev iperf3
  kcat python3-confluent-kafka python3-kafka python3-avro
  python3-requests python3-protobuf python3-jsonschema
  libsimdjson-dev libpq-dev postgresql libcpp-httplib-dev
  etcd-server etcd-client
  radosgw ceph-mon ceph-osd
  openssl curl
  clang-format-14
  python3-botocore libcurl4-openssl-dev
  chromium
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# npm ships inside some nodejs builds (nodesource); Debian packages it separately.
if ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing apt packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
      echo "setup: run this as root, or install sudo, or install them by hand" >&2
      exit 1
    fi
    SUDO="sudo"
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# DuckDB: libduckdb.so and duckdb.h come pinned from npm (package.json, package-lock.json).
# --ignore-scripts: the duckdb package would otherwise try to build a node addon.
stamp=node_modules/.sluice-installed
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  echo "setup: installing pinned npm packages (DuckDB, KafkaJS, iceberg-js, icebird, pg, nodejs-polars; esbuild, preact, uPlot and TypeScript for the console page)"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
  touch "$stamp"
fi
