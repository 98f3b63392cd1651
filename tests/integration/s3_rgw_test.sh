#!/usr/bin/env bash
# The S3 client against a real S3 server (issue 26): Ceph's radosgw on loopback
# (tests/integration/s3/with-rgw.sh), then src/s3/tests/s3_rgw_test against it.
# usage: s3_rgw_test.sh path/to/s3_rgw_test
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/s3/with-rgw.sh" sluice-test "$1"
