#!/usr/bin/env bash
# Runs a command beside a throwaway S3 server: Ceph's radosgw on loopback (rgw-up.sh, the
# proven recipe of ../shared/reference/s3, run as root; scripts/setup.sh installs its
# packages), with a bucket made by curl's own SigV4 signer and the AWS_* variables set
# for it; SLUICE_S3_BUCKET names the bucket. The server goes when the command ends.
# usage: with-rgw.sh BUCKET COMMAND [ARGS...]
set -euo pipefail
bucket=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
dir=$(mktemp -d /tmp/sluice-rgw-XXXXXX)
export RGW_PORT MON_PORT
RGW_PORT=$(free_port)
MON_PORT=$(free_port)
trap 'bash "$here/rgw-down.sh" "$dir" >/dev/null 2>&1' EXIT
if ! bash "$here/rgw-up.sh" "$dir" >"$dir.up.log" 2>&1; then
  cat "$dir.up.log"; tail -n 30 "$dir"/log/*.log 2>/dev/null || true
  echo "FAIL: radosgw did not start"; exit 1
fi
rm -f "$dir.up.log"
export AWS_ACCESS_KEY_ID=testaccesskey AWS_SECRET_ACCESS_KEY=testsecretkey AWS_REGION=us-east-1
export AWS_ENDPOINT_URL_S3="http://127.0.0.1:$RGW_PORT"
export SLUICE_S3_BUCKET=$bucket
curl -sf -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
  -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "$AWS_ENDPOINT_URL_S3/$bucket" \
  || { echo "FAIL: the bucket $bucket was not created"; exit 1; }
"$@"
