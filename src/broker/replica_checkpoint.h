// The high-watermark checkpoint of a data directory (docs/design/0018-cluster.md,
// decision 8): <data-dir>/replication-offset-checkpoint in Kafka's text format
// (docs/formats/storage.md):
//
//   0                                 format version
//   <n>                               number of entries
//   <topic> <partition> <offset>      n lines
//
// The ReplicaManager writes it every few seconds and when it stops; a restarted broker
// starts a replica's high watermark there, so consumers of a new leader never see past
// what was committed.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"
#include "broker/partition.h"
#include "storage/env.h"

namespace sluice::broker {

inline constexpr const char* kHighWatermarkFile = "replication-offset-checkpoint";

using HighWatermarks = std::map<PartitionKey, int64_t>;

// InvalidArgument naming the line and what is wrong.
Result<HighWatermarks> ParseHighWatermarks(std::string_view text);
std::string FormatHighWatermarks(const HighWatermarks& marks);

// The checkpoint in `data_dir`: empty when missing; a malformed one is reported and read
// as empty (high watermarks then start from the logs, as before the first checkpoint).
HighWatermarks LoadHighWatermarks(storage::Env* env, const std::string& data_dir);
// Replaces it durably.
Status SaveHighWatermarks(storage::Env* env, const std::string& data_dir,
                          const HighWatermarks& marks);

}  // namespace sluice::broker
