// TxnLogs: the transaction state log's partitions served here. See txn_log_partitions.h.
#include "broker/txn_log_partitions.h"

#include <algorithm>

#include "broker/coordinator_partitions.h"

namespace sluice::broker {

int32_t TxnLogs::PartitionOf(const std::string& id) const {
  return replicated_ ? CoordinatorPartitionFor(id, count) : 0;
}

kafka::ErrorCode TxnLogs::ServingError(const std::string& id) const {
  auto it = parts.find(PartitionOf(id));
  if (it == parts.end()) return kafka::ErrorCode::kNotCoordinator;
  if (it->second.log == nullptr) return kafka::ErrorCode::kCoordinatorLoadInProgress;
  return kafka::ErrorCode::kNone;
}

uint64_t TxnLogs::LoadOf(const std::string& id) const {
  auto it = parts.find(PartitionOf(id));
  return it == parts.end() || it->second.log == nullptr ? 0 : it->second.load_id;
}

int32_t TxnLogs::CoordinatorEpochOf(const std::string& id) const {
  if (!replicated_) return 0;
  auto it = parts.find(PartitionOf(id));
  return it == parts.end() ? 0 : std::max(it->second.epoch, 0);
}

Status TxnLogs::Write(const std::string& id, const std::optional<TxnRecord>& record,
                      TxnLog::Done done) {
  auto it = parts.find(PartitionOf(id));
  if (it == parts.end() || it->second.log == nullptr) {
    return NotLeadingError("the transaction state of " + id);
  }
  return it->second.log->Write(id, record, std::move(done));
}

Status TxnLogs::Close() {
  Status first;
  for (auto& [p, part] : parts) {
    if (part.log == nullptr) continue;
    Status st = part.log->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace sluice::broker
