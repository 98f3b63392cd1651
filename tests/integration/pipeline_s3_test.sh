#!/usr/bin/env bash
# Pipelines into Iceberg tables on S3 (issue 26): Ceph's radosgw on loopback
# (tests/integration/s3/with-rgw.sh), then the given test binary with a warehouse in its
# bucket named by SLUICE_TEST_S3_WAREHOUSE.
# usage: pipeline_s3_test.sh path/to/pipeline_test [gtest args...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export SLUICE_TEST_S3_WAREHOUSE=s3://sluice-lake/warehouse
exec bash "$here/s3/with-rgw.sh" sluice-lake "$@"
