// TxnCoordinator: the markers of a decided transaction, its Complete record, and the
// periodic work (timed-out transactions, idle transactional ids).
#include <algorithm>
#include <functional>
#include <memory>
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
  if (t == nullptr || shutting_down_ || !markers_started_ || t->markers_fenced) return;
  if (t->state != TxnState::kPrepareCommit && t->state != TxnState::kPrepareAbort) return;
  if (t->markers_left.empty() && t->groups_left.empty() && t->markers_sent.empty() &&
      !t->groups_sent) {
    // A fresh round: every partition but the offsets one (the groups cover it).
    t->failed_rounds = 0;
    t->marker_round = ++last_marker_round_;
    for (const auto& tp : t->partitions) {
      if (tp != kOffsetsPartition) t->markers_left.insert(tp);
    }
    t->groups_left = t->groups;
  }
  std::vector<TopicPartition> tps;
  for (const auto& tp : t->markers_left) {
    if (t->markers_sent.count(tp) == 0) tps.push_back(tp);
  }
  SendMarkers(*t, std::move(tps));
  if (!t->groups_left.empty() && !t->groups_sent) SendGroups(*t);
  MaybeComplete(*t);
}

namespace {

// The answers may come after Close: they reach the loop through the gate, never `this`.
template <class Gate>
std::function<void(std::function<void()>)> PostThrough(const std::shared_ptr<Gate>& gate) {
  return [gate](std::function<void()> fn) {
    std::lock_guard g(gate->mu);
    if (gate->loop != nullptr) gate->loop->Post(std::move(fn));
  };
}

}  // namespace

void TxnCoordinator::SendMarkers(Txn& t, std::vector<TopicPartition> tps) {
  if (tps.empty()) return;
  // The coordinator epoch is the leader epoch of the id's partition of
  // __transaction_state (Kafka's coordinatorEpoch): a partition that took a marker of a
  // newer coordinator refuses this one's late ones (TRANSACTION_COORDINATOR_FENCED).
  const TxnMarker marker{t.producer_id, t.producer_epoch, t.state == TxnState::kPrepareCommit,
                         log_->CoordinatorEpochOf(t.id)};
  for (const auto& tp : tps) t.markers_sent.insert(tp);
  auto post = PostThrough(gate_);
  options_.participants->WritePartitionMarkersInParts(
      marker, tps,
      [this, post, id = t.id, round = t.marker_round, tps](std::vector<size_t> which,
                                                           std::vector<ErrorCode> errors) {
        std::vector<TopicPartition> part;
        part.reserve(which.size());
        for (size_t i : which) part.push_back(tps.at(i));
        post([this, id, round, part = std::move(part), errors = std::move(errors)] {
          OnMarkersPart(id, round, part, errors);
        });
      });
}

void TxnCoordinator::SendGroups(Txn& t) {
  const TxnMarker marker{t.producer_id, t.producer_epoch, t.state == TxnState::kPrepareCommit,
                         log_->CoordinatorEpochOf(t.id)};
  std::vector<std::string> groups(t.groups_left.begin(), t.groups_left.end());
  t.groups_sent = true;
  auto post = PostThrough(gate_);
  options_.participants->CompleteGroupOffsets(
      marker, groups,
      [this, post, id = t.id, round = t.marker_round,
       groups](std::vector<ErrorCode> errors) mutable {
        post([this, id, round, groups = std::move(groups), errors = std::move(errors)] {
          OnGroupsDone(id, round, groups, errors);
        });
      });
}

void TxnCoordinator::OnMarkersPart(const std::string& id, uint64_t round,
                                   std::vector<TopicPartition> tps, std::vector<ErrorCode> errors) {
  Txn* t = FindTxn(id);
  if (t == nullptr || t->marker_round != round || shutting_down_) return;
  // A partition whose leader is gone is retried every marker_retry_ms until another
  // leads it (seconds in a cluster): its first failure and then one in 50 are logged.
  std::vector<TopicPartition> failed;
  for (size_t i = 0; i < tps.size(); ++i) {
    const TopicPartition& tp = tps[i];
    const ErrorCode e = i < errors.size() ? errors[i] : ErrorCode::kUnknownServerError;
    t->markers_sent.erase(tp);
    // Done: durable; or the partition was deleted since (Kafka drops markers for
    // partitions of deleted topics the same way); or it refuses this producer epoch for
    // good (a newer epoch's marker is there). A newer coordinator's marker there: this
    // coordinator stops (Kafka's removeMarkersForTxn). Anything else is written again
    // after a backoff, this part's own.
    const bool gone = options_.partition_exists && !options_.partition_exists(tp);
    if (e == ErrorCode::kTransactionCoordinatorFenced) {
      t->markers_fenced = true;
    } else if (e == ErrorCode::kNone || gone || e == ErrorCode::kInvalidProducerEpoch) {
      t->markers_left.erase(tp);
    } else {
      failed.push_back(tp);
      if (t->failed_rounds % 50 == 0) {
        SLUICE_LOG(kTxnLog, kWarn, "transactional id {}: marker for {}-{}: error {} (attempt {})",
                   id, tp.topic, tp.partition, static_cast<int>(e), t->failed_rounds + 1);
      }
    }
  }
  if (t->markers_fenced) return StopMarkers(*t);
  if (!failed.empty()) {
    ++t->failed_rounds;
    RetryAfter(*t, options_.marker_retry_ms, [this, failed](Txn& t) {
      std::vector<TopicPartition> again;
      for (const auto& tp : failed) {
        if (t.markers_left.count(tp) != 0 && t.markers_sent.count(tp) == 0) again.push_back(tp);
      }
      SendMarkers(t, std::move(again));
    });
  }
  MaybeComplete(*t);
}

void TxnCoordinator::OnGroupsDone(const std::string& id, uint64_t round,
                                  std::vector<std::string> groups, std::vector<ErrorCode> errors) {
  Txn* t = FindTxn(id);
  if (t == nullptr || t->marker_round != round || shutting_down_) return;
  t->groups_sent = false;
  bool failed = false;
  for (size_t i = 0; i < groups.size(); ++i) {
    const ErrorCode e = i < errors.size() ? errors[i] : ErrorCode::kUnknownServerError;
    // An older epoch than the group's last marker: nothing more can be written there.
    if (e == ErrorCode::kTransactionCoordinatorFenced) {
      t->markers_fenced = true;
    } else if (e == ErrorCode::kNone || e == ErrorCode::kInvalidProducerEpoch) {
      t->groups_left.erase(groups[i]);
    } else {
      failed = true;
      if (t->failed_rounds % 50 == 0) {
        SLUICE_LOG(kTxnLog, kWarn,
                   "transactional id {}: completing offsets of group {}: error {} (attempt {})", id,
                   groups[i], static_cast<int>(e), t->failed_rounds + 1);
      }
    }
  }
  if (t->markers_fenced) return StopMarkers(*t);
  if (failed) {
    ++t->failed_rounds;
    RetryAfter(*t, options_.marker_retry_ms, [this](Txn& t) {
      if (!t.groups_left.empty() && !t.groups_sent) SendGroups(t);
    });
  }
  MaybeComplete(*t);
}

void TxnCoordinator::StopMarkers(Txn& t) {
  SLUICE_LOG(kTxnLog, kWarn,
             "transactional id {}: a newer transaction coordinator wrote markers for producer {} "
             "(this one's epoch {} is older): its markers are left to it",
             t.id, t.producer_id, log_->CoordinatorEpochOf(t.id));
  t.markers_left.clear();
  t.groups_left.clear();
  for (uint64_t timer : t.retry_timers) loop_->Cancel(timer);
  t.retry_timers.clear();
}

void TxnCoordinator::MaybeComplete(Txn& t) {
  if (t.markers_fenced || t.pending || !t.markers_left.empty() || !t.groups_left.empty() ||
      !t.markers_sent.empty() || t.groups_sent) {
    return;
  }
  if (t.state != TxnState::kPrepareCommit && t.state != TxnState::kPrepareAbort) return;
  CompleteTransaction(t);
}

void TxnCoordinator::RetryAfter(Txn& t, int64_t ms, std::function<void(Txn&)> fn) {
  auto timer = std::make_shared<uint64_t>(0);
  *timer = loop_->RunAfter(ms, [this, id = t.id, pid = t.producer_id, timer, fn = std::move(fn)] {
    Txn* t = FindTxn(id);
    if (t == nullptr) return;
    std::erase(t->retry_timers, *timer);
    if (t->producer_id != pid || shutting_down_) return;
    fn(*t);
  });
  t.retry_timers.push_back(*timer);
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
    RetryAfter(*t, options_.marker_retry_ms, [this](Txn& t) { MaybeComplete(t); });
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
