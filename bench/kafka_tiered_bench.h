// `sluice bench kafka --tiered` (issue 27, docs/design/0025-tiered-storage.md): a consumer
// reading an old range of a tiered topic, every byte of it served from S3, beside the S3 GET
// bandwidth measured through the same S3 client in the same run.
//
// Runs under tests/integration/s3/with-rgw.sh (or any S3: the AWS_* variables and
// SLUICE_S3_BUCKET). Starts its own `sluice serve` with `tiered_storage` under
// s3://$SLUICE_S3_BUCKET/sluice-bench-tiered/run-<pid>, creates a topic with
// remote.storage.enable=true and local.retention.bytes of one segment, produces the range
// (2 GB; 200 MB with --quick) and more, waits until the old segments are uploaded and gone
// from the broker's disk, then times one librdkafka consumer reading the range from offset 0
// (phase "tiered_fetch": mb_per_s of record bytes; s3_get_mb_per_s, one stream reading a
// 256 MiB object by the 32 MiB ranges the object cache downloads with). The topic is deleted
// at the end, which deletes its objects. See bench/README.md.
#pragma once

#include "base/status.h"
#include "bench/kafka_bench.h"

namespace sluice::bench {

Status RunTieredBench(const KafkaBenchOptions& o);

}  // namespace sluice::bench
