// TxnCoordinator: the markers of a decided transaction, its Complete record, and the
// periodic work (timed-out transactions, idle transactional ids).
#include <algorithm>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/crash_point.h"
#include "broker/event_loop.h"
#include "broker/txn_coordinator.h"
#include "broker/txn_coordinator_internal.h"
#include "broker/txn_log.h"

namespace sluice::broker {

using kafka::ErrorCode;

// Starts (or restarts, after a replay) the markers of a transaction in a Prepare state.
void TxnCoordinator::WriteMarkers(const std::string& id) {
  Txn* t = FindTxn(id);
  if (t == nullptr || shutting_down_ || !markers_started_) return;
  if (t->state != TxnState::kPrepareCommit && t->state != TxnState::kPrepareAbort) return;
  t->retry_timer = 0;
  if (t->calls_in_flight == 0 && t->markers_left.empty() && t->groups_left.empty()) {
    // A fresh round: every partition but the offsets one (the groups cover it).
    t->failed_rounds = 0;
    for (const auto& tp : t->partitions) {
      if (tp != kOffsetsPartition) t->markers_left.insert(tp);
    }
    t->groups_left = t->groups;
  }
  if (t->markers_left.empty() && t->groups_left.empty()) return CompleteTransaction(*t);
  // The coordinator epoch is the leader epoch of the id's partition of
  // __transaction_state (Kafka's coordinatorEpoch): a partition that took a marker of a
  // newer coordinator refuses this one's late ones (TRANSACTION_COORDINATOR_FENCED).
  const TxnMarker marker{t->producer_id, t->producer_epoch, t->state == TxnState::kPrepareCommit,
                         log_->CoordinatorEpochOf(id)};
  const int64_t pid = t->producer_id;
  // The answers may come after Close: they reach the loop through the gate, never `this`.
  auto post = [gate = gate_](std::function<void()> fn) {
    std::lock_guard g(gate->mu);
    if (gate->loop != nullptr) gate->loop->Post(std::move(fn));
  };
  if (!t->markers_left.empty()) {
    std::vector<TopicPartition> tps(t->markers_left.begin(), t->markers_left.end());
    ++t->calls_in_flight;
    options_.participants->WritePartitionMarkers(
        marker, tps, [this, post, id, pid, tps](std::vector<ErrorCode> errors) mutable {
          post([this, id, pid, tps = std::move(tps), errors = std::move(errors)] {
            OnMarkersDone(id, pid, tps, {}, errors, /*for_groups=*/false);
          });
        });
  }
  if (!t->groups_left.empty()) {
    std::vector<std::string> groups(t->groups_left.begin(), t->groups_left.end());
    ++t->calls_in_flight;
    options_.participants->CompleteGroupOffsets(
        marker, groups, [this, post, id, pid, groups](std::vector<ErrorCode> errors) mutable {
          post([this, id, pid, groups = std::move(groups), errors = std::move(errors)] {
            OnMarkersDone(id, pid, {}, groups, errors, /*for_groups=*/true);
          });
        });
  }
}

void TxnCoordinator::OnMarkersDone(const std::string& id, int64_t producer_id,
                                   std::vector<TopicPartition> tps, std::vector<std::string> groups,
                                   std::vector<ErrorCode> errors, bool for_groups) {
  Txn* t = FindTxn(id);
  if (t == nullptr || t->producer_id != producer_id || shutting_down_) return;
  --t->calls_in_flight;
  const size_t n = for_groups ? groups.size() : tps.size();
  // A partition whose leader is gone is retried every marker_retry_ms until another
  // leads it (seconds in a cluster): its first failure and then one in 50 are logged.
  const bool log_failures = t->failed_rounds % 50 == 0;
  for (size_t i = 0; i < n; ++i) {
    const ErrorCode e = i < errors.size() ? errors[i] : ErrorCode::kUnknownServerError;
    if (for_groups) {
      // An older epoch than the group's last marker: nothing more can be written there.
      if (e == ErrorCode::kNone || e == ErrorCode::kInvalidProducerEpoch) {
        t->groups_left.erase(groups[i]);
      } else {
        if (log_failures) {
          SLUICE_LOG(kTxnLog, kWarn,
                     "transactional id {}: completing offsets of group {}: error {} (attempt {})",
                     id, groups[i], static_cast<int>(e), t->failed_rounds + 1);
        }
      }
      continue;
    }
    const TopicPartition& tp = tps[i];
    // Done: durable; or the partition was deleted since (Kafka drops markers for
    // partitions without a leader the same way); or it refuses this producer epoch or
    // coordinator epoch for good (Kafka stops sending on those too). Anything else is
    // written again after a backoff.
    const bool gone = options_.partition_exists && !options_.partition_exists(tp);
    const bool refused =
        e == ErrorCode::kInvalidProducerEpoch || e == ErrorCode::kTransactionCoordinatorFenced;
    if (e == ErrorCode::kNone || gone || refused) {
      t->markers_left.erase(tp);
    } else {
      if (log_failures) {
        SLUICE_LOG(kTxnLog, kWarn, "transactional id {}: marker for {}-{}: error {} (attempt {})",
                   id, tp.topic, tp.partition, static_cast<int>(e), t->failed_rounds + 1);
      }
    }
  }
  if (t->calls_in_flight > 0) return;
  if (t->markers_left.empty() && t->groups_left.empty()) return CompleteTransaction(*t);
  // Something is left (this call's failures, or the other call's when it answered
  // first): written again after the backoff.
  ++t->failed_rounds;
  if (t->retry_timer == 0) {
    t->retry_timer = loop_->RunAfter(options_.marker_retry_ms, [this, id] { WriteMarkers(id); });
  }
}

void TxnCoordinator::CompleteTransaction(Txn& t) {
  CrashPoint("txn-markers-written");
  TxnRecord next = RecordOf(t);
  next.state =
      t.state == TxnState::kPrepareCommit ? TxnState::kCompleteCommit : TxnState::kCompleteAbort;
  next.partitions.clear();
  next.groups.clear();
  next.last_update_ms = WallMillis();
  const std::string id = t.id;
  Persist(t, std::move(next), [this, id](ErrorCode e) {
    if (e == ErrorCode::kNone) return CrashPoint("txn-complete-durable");
    // The Prepare record stays the last durable one. Not leading the partition any more
    // (NOT_COORDINATOR): the next coordinator completes it. Otherwise (too few replicas,
    // not replicated in time, a failed log) the write is tried again after the backoff,
    // as Kafka's marker channel retries its log append on COORDINATOR_NOT_AVAILABLE;
    // meanwhile the id stays in its Prepare state (its producer's next transaction waits).
    Txn* t = FindTxn(id);
    if (e == ErrorCode::kNotCoordinator || t == nullptr || shutting_down_) {
      SLUICE_LOG(kTxnLog, kWarn, "transactional id {}: the Complete record was not written", id);
      return;
    }
    if (t->failed_rounds++ % 50 == 0) {
      SLUICE_LOG(kTxnLog, kWarn,
                 "transactional id {}: the Complete record was not written (error {}); trying "
                 "again",
                 id, static_cast<int>(e));
    }
    if (t->retry_timer == 0) {
      t->retry_timer = loop_->RunAfter(options_.marker_retry_ms, [this, id] {
        Txn* t = FindTxn(id);
        if (t == nullptr) return;
        t->retry_timer = 0;
        if (shutting_down_ || t->pending || !t->markers_left.empty() || !t->groups_left.empty() ||
            (t->state != TxnState::kPrepareCommit && t->state != TxnState::kPrepareAbort)) {
          return;
        }
        CompleteTransaction(*t);
      });
    }
  });
}

// ---------------------------------------------------------------------------------------
// Periodic work

void TxnCoordinator::OnTick() {
  tick_timer_ = 0;
  if (shutting_down_) return;
  const int64_t now = WallMillis();
  AbortTimedOut(now);
  ExpireIds(now);
  tick_timer_ = loop_->RunAfter(options_.abort_check_interval_ms, [this] { OnTick(); });
}

void TxnCoordinator::AbortTimedOut(int64_t now) {
  std::vector<std::string> due;
  for (const auto& [id, t] : txns_) {
    if (!t->pending && t->state == TxnState::kOngoing && t->start_ms + t->timeout_ms < now) {
      due.push_back(id);
    }
  }
  for (const std::string& id : due) {
    Txn* t = FindTxn(id);
    SLUICE_LOG(kTxnLog, kInfo,
               "transactional id {}: aborting the transaction of producer {} "
               "epoch {}, open for more than its {} ms",
               id, t->producer_id, t->producer_epoch, t->timeout_ms);
    FenceAndAbort(*t, [id](ErrorCode e, int64_t, int16_t) {
      if (e != ErrorCode::kNone) {
        SLUICE_LOG(kTxnLog, kWarn, "transactional id {}: the timeout abort failed: error {}", id,
                   static_cast<int>(e));
      }
    });
  }
}

void TxnCoordinator::ExpireIds(int64_t now) {
  std::vector<std::string> due;
  for (const auto& [id, t] : txns_) {
    if (!t->pending && TxnExpirationAllowed(t->state) &&
        t->last_update_ms + options_.id_expiration_ms <= now) {
      due.push_back(id);
    }
  }
  for (const std::string& id : due) {
    Txn* t = FindTxn(id);
    t->pending = TxnState::kDead;
    const uint64_t load = log_->LoadOf(id);
    auto on_durable = [this, id, load](const Status& st) {
      loop_->Post([this, id, load, st] {
        Txn* t = FindTxn(id);
        if (t == nullptr || t->pending != TxnState::kDead || log_->LoadOf(id) != load) return;
        if (!st.ok()) {
          t->pending.reset();
          ReleaseWaiting(*t);
          return;
        }
        SLUICE_LOG(kTxnLog, kInfo, "transactional id {} expired", id);
        // Requests that waited behind the expiry are answered before the id goes (they
        // find it Dead: CONCURRENT_TRANSACTIONS), not dropped with it.
        ReleaseWaiting(*t);
        txns_.erase(id);
      });
    };
    if (Status st = log_->Write(id, std::nullopt, std::move(on_durable)); !st.ok()) {
      SLUICE_LOG(kTxnLog, kError, "expiring transactional id {}: {}", id, st.ToString());
      t->pending.reset();
    }
  }
}

}  // namespace sluice::broker
