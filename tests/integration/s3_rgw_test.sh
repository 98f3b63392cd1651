#!/usr/bin/env bash
# The S3 client against a real S3 server (issue 26): Ceph's radosgw from Debian on
# loopback, brought up by tests/integration/s3/rgw-up.sh (the proven recipe of
# ../shared/reference/s3, run as root; scripts/setup.sh installs its packages), a bucket
# made with curl's own SigV4 signer, then src/s3/tests/s3_rgw_test against it.
# usage: s3_rgw_test.sh path/to/s3_rgw_test
set -euo pipefail
binary=$1
here=$(cd "$(dirname "$0")" && pwd)
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
dir=$(mktemp -d /tmp/sluice-rgw-XXXXXX)
export RGW_PORT MON_PORT
RGW_PORT=$(free_port)
MON_PORT=$(free_port)
trap 'bash "$here/s3/rgw-down.sh" "$dir" >/dev/null 2>&1' EXIT
if ! bash "$here/s3/rgw-up.sh" "$dir" >"$dir.up.log" 2>&1; then
  cat "$dir.up.log"; tail -n 30 "$dir"/log/*.log 2>/dev/null || true
  echo "FAIL: s3_rgw_test: radosgw did not start"; exit 1
fi
rm -f "$dir.up.log"
export AWS_ACCESS_KEY_ID=testaccesskey AWS_SECRET_ACCESS_KEY=testsecretkey AWS_REGION=us-east-1
export AWS_ENDPOINT_URL_S3="http://127.0.0.1:$RGW_PORT"
export SLUICE_S3_BUCKET=sluice-test
curl -sf -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
  -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$AWS_ENDPOINT_URL_S3/$SLUICE_S3_BUCKET" \
  || { echo "FAIL: s3_rgw_test: the bucket was not created"; exit 1; }
"$binary"
