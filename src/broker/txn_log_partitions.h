// TxnLogs: the partitions of __transaction_state a transaction coordinator serves — one,
// always, on a single node (<data-dir>/__transaction_state-0); in a cluster those this
// broker leads (docs/design/0018-cluster.md, "coordmove"), each loaded from its replicated
// log. A transactional id belongs to partition CoordinatorPartitionFor(id, count); a write
// goes to its partition's log.
//
// Threads: the transaction coordinator's thread only.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "broker/txn_log.h"
#include "kafka/protocol/api.h"

namespace sluice::broker {

class TxnLogs {
 public:
  struct Part {
    std::unique_ptr<TxnLog> log;  // null while it loads
    int32_t epoch = -1;           // its leader epoch (the coordinator epoch)
    uint64_t load_id = 0;         // tells a load's result from a later load's
  };

  explicit TxnLogs(bool replicated) : replicated_(replicated) {}

  bool replicated() const { return replicated_; }
  int32_t PartitionOf(const std::string& id) const;
  // kNone when `id`'s partition is loaded here, COORDINATOR_LOAD_IN_PROGRESS while it
  // loads, NOT_COORDINATOR when it is not led here.
  kafka::ErrorCode ServingError(const std::string& id) const;
  // Which load of `id`'s partition is served now (0 for none, or a single node's): a
  // write's answer applies only to the load it was made in.
  uint64_t LoadOf(const std::string& id) const;
  // The coordinator epoch of `id`'s partition: its leader epoch (0 on a single node).
  int32_t CoordinatorEpochOf(const std::string& id) const;
  // As TxnLog::Write, on `id`'s partition; NotLeadingError when it is not loaded here.
  Status Write(const std::string& id, const std::optional<TxnRecord>& record, TxnLog::Done done);
  // Closes every loaded log; the first error.
  Status Close();

  std::map<int32_t, Part> parts;  // by partition
  int32_t count = 1;              // the topic's partition count

 private:
  const bool replicated_;
};

}  // namespace sluice::broker
