// TxnCoordinator: the partitions of __transaction_state in a cluster — loaded when this
// broker becomes their leader, dropped when it stops (docs/design/0018-cluster.md,
// "coordmove"). See txn_coordinator.h.
#include <utility>
#include <vector>

#include "broker/coordinator_partitions.h"
#include "broker/event_loop.h"
#include "broker/txn_coordinator.h"
#include "broker/txn_coordinator_internal.h"

namespace sluice::broker {

using kafka::ErrorCode;

ErrorCode TxnCoordinator::ServingError(const std::string& id) const {
  if (shutting_down_) return ErrorCode::kCoordinatorNotAvailable;
  return log_->ServingError(id);
}

void TxnCoordinator::LoadPartition(int32_t p, int32_t count, int32_t epoch, TxnLogOptions log) {
  // Never waits for the coordinator's thread: it may be waiting for the caller (the
  // cluster controller's thread hands out producer ids).
  const uint64_t id = loads_.Begin(p, epoch);
  if (id == 0) return;  // loaded (or loading) in this epoch, or closed
  {
    std::lock_guard gate_lock(gate_->mu);
    if (gate_->loop == nullptr || closed_for_loads_.load()) return;
    gate_->loop->Post([this, p, count, epoch, id] {
      if (shutting_down_) return;
      DropPartition(p);  // an older epoch's, if any
      log_->count = count;
      TxnLogs::Part& part = log_->parts[p];
      part.epoch = epoch;
      part.load_id = id;
    });
  }
  loads_.Start(p, [this, p, id, log = std::move(log)]() mutable {
    if (options_.before_load) options_.before_load(p);
    auto shared = std::make_shared<Result<std::unique_ptr<TxnLog>>>(TxnLog::Open(std::move(log)));
    std::lock_guard gate_lock(gate_->mu);
    if (gate_->loop != nullptr) {
      gate_->loop->Post([this, p, id, shared] { InstallPartition(p, id, std::move(*shared)); });
    }
  });
}

void TxnCoordinator::InstallPartition(int32_t p, uint64_t load_id,
                                      Result<std::unique_ptr<TxnLog>> loaded) {
  auto it = log_->parts.find(p);
  if (shutting_down_ || it == log_->parts.end() || it->second.load_id != load_id) return;
  if (!loaded.ok()) {
    SLUICE_LOG(kTxnLog, kError, "loading partition {} of the transaction state log: {}", p,
               loaded.status().ToString());
    log_->parts.erase(it);  // NOT_COORDINATOR until the next leadership
    return;
  }
  it->second.log = std::move(*loaded);
  std::vector<std::string> preparing;
  size_t count = 0;
  for (const auto& [id, rec] : it->second.log->records()) {
    if (log_->PartitionOf(id) != p) continue;
    auto t = std::make_unique<Txn>();
    t->id = id;
    ApplyDurable(*t, rec);
    t->previous_producer_id = rec.previous_producer_id;
    if (rec.state == TxnState::kPrepareCommit || rec.state == TxnState::kPrepareAbort) {
      preparing.push_back(id);
    }
    txns_[id] = std::move(t);
    ++count;
  }
  SLUICE_LOG(kTxnLog, kInfo,
             "coordinating partition {} of the transaction state log (epoch {}): {} "
             "transactional ids, {} to complete",
             p, it->second.epoch, count, preparing.size());
  // Kafka's onElection: a decided transaction's markers are written by the new
  // coordinator (once the partitions can take markers).
  if (markers_started_) {
    for (const std::string& id : preparing) WriteMarkers(id);
  }
}

void TxnCoordinator::DropPartition(int32_t p) {
  auto it = log_->parts.find(p);
  if (it == log_->parts.end()) return;
  std::vector<std::string> gone;
  for (const auto& [id, t] : txns_) {
    if (log_->PartitionOf(id) == p) gone.push_back(id);
  }
  if (it->second.log != nullptr) {
    // An attached log: nothing is closed; writes under way answer from the owner.
    Status st = it->second.log->Close();
    if (!st.ok())
      SLUICE_LOG(kTxnLog, kWarn, "transaction state partition {}: {}", p, st.ToString());
  }
  log_->parts.erase(it);  // first: the requests released below answer NOT_COORDINATOR
  for (const std::string& id : gone) {
    Txn* t = FindTxn(id);
    for (uint64_t timer : t->retry_timers) loop_->Cancel(timer);
    t->retry_timers.clear();
    ReleaseWaiting(*t);
    txns_.erase(id);
  }
  SLUICE_LOG(kTxnLog, kInfo,
             "no longer coordinating partition {} of the transaction state log ({} ids)", p,
             gone.size());
}

void TxnCoordinator::UnloadPartition(int32_t p) {
  // Once the loading thread ended nothing reads the log here: it may close. The drop
  // runs when the coordinator's thread gets to it (writes meanwhile go to the owner,
  // which answers NOT_COORDINATOR once the partition is gone).
  if (!loads_.End(p)) return;
  std::lock_guard gate_lock(gate_->mu);
  if (gate_->loop == nullptr || closed_for_loads_.load()) return;
  gate_->loop->Post([this, p] { DropPartition(p); });
}

std::map<int32_t, bool> TxnCoordinator::PartitionsForTesting() {
  std::map<int32_t, bool> out;
  RunAndWait([&] {
    for (const auto& [p, part] : log_->parts) out[p] = part.log != nullptr;
  });
  return out;
}

}  // namespace sluice::broker
