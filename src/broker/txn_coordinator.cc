// TxnCoordinator: lifecycle, the request entry points and the transaction state machine.
// See txn_coordinator.h; the markers and timers are in txn_coordinator_markers.cc.
#include "broker/txn_coordinator.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <set>
#include <utility>

#include "base/clock.h"
#include "base/crash_point.h"
#include "base/logging.h"
#include "broker/coordinator_partitions.h"
#include "broker/event_loop.h"
#include "broker/txn_coordinator_internal.h"
#include "broker/txn_log.h"

namespace sluice::broker {

using kafka::ErrorCode;

// ---------------------------------------------------------------------------------------
// Lifecycle

TxnCoordinator::TxnCoordinator(TxnCoordinatorOptions options)
    : options_(std::move(options)), gate_(std::make_shared<LoopGate>()) {}

TxnCoordinator::~TxnCoordinator() {
  Status st = Close();
  if (!st.ok())
    SLUICE_LOG(kTxnLog, kWarn, "closing the transaction coordinator: {}", st.ToString());
}

Result<std::unique_ptr<TxnCoordinator>> TxnCoordinator::Open(TxnCoordinatorOptions options) {
  if (options.executor == nullptr) {
    return InvalidArgumentError("transaction coordinator: no IoExecutor given");
  }
  if (options.participants == nullptr || !options.allocate_producer_id) {
    return InvalidArgumentError("transaction coordinator: no participants or producer ids");
  }
  if (options.max_timeout_ms <= 0 || options.abort_check_interval_ms <= 0 ||
      options.id_expiration_ms <= 0) {
    return InvalidArgumentError(
        "transaction.max.timeout.ms, transactional.id.expiration.ms and "
        "transaction.abort.timed.out.transaction.cleanup.interval.ms must be positive");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  auto logs = std::make_unique<TxnLogs>(options.replicated);
  if (!options.replicated) {
    TxnLogOptions lo;
    lo.dir = options.dir;
    lo.executor = options.executor;
    lo.files = options.files;
    lo.env = options.env;
    lo.flush_policy = options.flush_policy;
    lo.flush_ms = options.flush_ms;
    lo.segment_bytes = options.log_segment_bytes;
    lo.cleaner = options.cleaner;
    ASSIGN_OR_RETURN(std::unique_ptr<TxnLog> log, TxnLog::Open(lo));
    logs->parts[0].log = std::move(log);  // a single node: one partition, always served
  }

  std::unique_ptr<TxnCoordinator> c(new TxnCoordinator(std::move(options)));
  c->loop_ = std::move(loop);
  c->log_ = std::move(logs);
  c->gate_->loop = c->loop_.get();
  if (!c->options_.replicated) {
    size_t preparing = 0;
    for (const auto& [id, rec] : c->log_->parts[0].log->records()) {
      auto t = std::make_unique<Txn>();
      t->id = id;
      c->ApplyDurable(*t, rec);
      t->previous_producer_id = rec.previous_producer_id;
      if (rec.state == TxnState::kPrepareCommit || rec.state == TxnState::kPrepareAbort) {
        ++preparing;
      }
      c->txns_.emplace(id, std::move(t));
    }
    SLUICE_LOG(kTxnLog, kInfo,
               "transaction coordinator on {}: {} transactional ids, {} to complete",
               c->options_.dir, c->txns_.size(), preparing);
  }
  c->tick_timer_ =
      c->loop_->RunAfter(c->options_.abort_check_interval_ms, [p = c.get()] { p->OnTick(); });
  c->thread_ = std::thread([p = c.get()] { p->loop_->Run(); });
  return c;
}

Status TxnCoordinator::Close() {
  std::lock_guard lock(close_mu_);
  if (closed_) return close_status_;
  closed_ = true;
  {
    std::lock_guard g(gate_->mu);
    closed_for_loads_.store(true);
  }
  loads_.Close();  // loading threads end; Shutdown drops what they posted
  if (thread_.joinable()) {
    loop_->Post([this] { Shutdown(); });
    thread_.join();
  }
  {
    std::lock_guard g(gate_->mu);
    gate_->loop = nullptr;  // marker answers arriving later are dropped
  }
  close_status_ = shutdown_status_;
  return close_status_;
}

// Closes the log (pending appends get their acks, posted here and run before the Stop
// posted after them), then stops.
void TxnCoordinator::Shutdown() {
  shutting_down_ = true;
  if (tick_timer_ != 0) loop_->Cancel(tick_timer_);
  for (auto& [id, t] : txns_) {
    for (uint64_t timer : t->retry_timers) loop_->Cancel(timer);
    t->retry_timers.clear();
    ReleaseWaiting(*t);  // answered COORDINATOR_NOT_AVAILABLE
  }
  shutdown_status_ = log_->Close();
  loop_->Post([this] { loop_->Stop(); });
}

void TxnCoordinator::StartMarkers() {
  loop_->Post([this] {
    if (markers_started_ || shutting_down_) return;
    markers_started_ = true;
    // A transaction found in a Prepare state has its markers written again (decision 2),
    // and so has one decided before the partitions could take markers.
    std::vector<std::string> preparing;
    for (const auto& [id, t] : txns_) {
      if (t->state == TxnState::kPrepareCommit || t->state == TxnState::kPrepareAbort) {
        preparing.push_back(id);
      }
    }
    for (const std::string& id : preparing) WriteMarkers(id);
  });
}

void TxnCoordinator::RunAndWait(const std::function<void()>& fn) {
  std::promise<void> ran;
  loop_->Post([&] {
    fn();
    ran.set_value();
  });
  ran.get_future().wait();
}

std::optional<TxnRecord> TxnCoordinator::Find(const std::string& transactional_id) {
  std::optional<TxnRecord> out;
  RunAndWait([&] {
    if (Txn* t = FindTxn(transactional_id)) out = RecordOf(*t);
  });
  return out;
}

TxnCoordinator::Txn* TxnCoordinator::FindTxn(const std::string& id) {
  auto it = txns_.find(id);
  return it == txns_.end() ? nullptr : it->second.get();
}

// ---------------------------------------------------------------------------------------
// Entry points: each posts to the loop.

void TxnCoordinator::InitProducerId(std::string transactional_id, int32_t timeout_ms,
                                    int64_t producer_id, int16_t producer_epoch,
                                    Done<TxnProducerResult> done) {
  loop_->Post([this, id = std::move(transactional_id), timeout_ms, producer_id, producer_epoch,
               done = std::move(done)]() mutable {
    DoInitProducerId(id, timeout_ms, producer_id, producer_epoch, done);
  });
}

void TxnCoordinator::AddPartitions(std::string transactional_id, int64_t producer_id,
                                   int16_t producer_epoch, std::vector<TopicPartition> partitions,
                                   Done<ErrorCode> done) {
  loop_->Post([this, id = std::move(transactional_id), producer_id, producer_epoch,
               partitions = std::move(partitions), done = std::move(done)]() mutable {
    DoAdd(id, producer_id, producer_epoch, partitions, std::nullopt, done);
  });
}

void TxnCoordinator::AddOffsets(std::string transactional_id, int64_t producer_id,
                                int16_t producer_epoch, std::string group, Done<ErrorCode> done) {
  loop_->Post([this, id = std::move(transactional_id), producer_id, producer_epoch,
               group = std::move(group), done = std::move(done)]() mutable {
    DoAdd(id, producer_id, producer_epoch, {kOffsetsPartition}, group, done);
  });
}

void TxnCoordinator::EndTxn(std::string transactional_id, int64_t producer_id,
                            int16_t producer_epoch, bool commit, Done<TxnProducerResult> done) {
  loop_->Post([this, id = std::move(transactional_id), producer_id, producer_epoch, commit,
               done = std::move(done)]() mutable {
    if (ErrorCode e = ServingError(id); e != ErrorCode::kNone) return done({e});
    EndTransaction(id, producer_id, producer_epoch, commit, /*from_client=*/true,
                   [done = std::move(done)](ErrorCode e, int64_t pid, int16_t epoch) {
                     done({e, pid, epoch});
                   });
  });
}

void TxnCoordinator::Describe(std::vector<std::string> transactional_ids,
                              Done<std::vector<TxnDescription>> done) {
  loop_->Post([this, ids = std::move(transactional_ids), done = std::move(done)] {
    std::vector<TxnDescription> out;
    for (const std::string& id : ids) {
      TxnDescription d;
      d.transactional_id = id;
      Txn* t = FindTxn(id);
      if (ErrorCode e = ServingError(id);
          e != ErrorCode::kNone && (shutting_down_ || !id.empty())) {
        d.error = e;
      } else if (id.empty()) {
        d.error = ErrorCode::kInvalidRequest;
      } else if (t == nullptr || t->state == TxnState::kDead) {
        d.error = ErrorCode::kTransactionalIdNotFound;
      } else {
        d.state = std::string(TxnStateName(t->state));
        d.timeout_ms = t->timeout_ms;
        d.start_ms = t->start_ms;
        d.producer_id = t->producer_id;
        d.producer_epoch = t->producer_epoch;
        d.partitions.assign(t->partitions.begin(), t->partitions.end());
      }
      out.push_back(std::move(d));
    }
    done(std::move(out));
  });
}

void TxnCoordinator::List(std::vector<std::string> state_filters,
                          std::vector<int64_t> producer_id_filters, int64_t duration_ms,
                          Done<TxnListResult> done) {
  loop_->Post([this, states = std::move(state_filters), pids = std::move(producer_id_filters),
               duration_ms, done = std::move(done)] {
    TxnListResult r;
    if (shutting_down_) {
      r.error = ErrorCode::kCoordinatorNotAvailable;
      return done(std::move(r));
    }
    for (const auto& [p, part] : log_->parts) {
      if (part.log == nullptr) {
        r.error = ErrorCode::kCoordinatorLoadInProgress;  // its ids are not known yet
        return done(std::move(r));
      }
    }
    std::set<TxnState> wanted;
    for (const std::string& name : states) {
      if (auto s = TxnStateFromName(name)) {
        wanted.insert(*s);
      } else {
        r.unknown_state_filters.push_back(name);
      }
    }
    const std::set<int64_t> pid_set(pids.begin(), pids.end());
    const int64_t now = WallMillis();
    for (const auto& [id, t] : txns_) {
      if (t->state == TxnState::kDead) continue;
      if (!pid_set.empty() && pid_set.count(t->producer_id) == 0) continue;
      if (!states.empty() && wanted.count(t->state) == 0) continue;
      if (duration_ms >= 0 && now - t->start_ms <= duration_ms) continue;
      r.states.push_back({id, t->producer_id, std::string(TxnStateName(t->state))});
    }
    done(std::move(r));
  });
}

void TxnCoordinator::Verify(std::string transactional_id, int64_t producer_id,
                            int16_t producer_epoch, std::vector<TopicPartition> partitions,
                            std::function<void(std::vector<ErrorCode>)> done) {
  loop_->Post([this, id = std::move(transactional_id), producer_id, producer_epoch,
               partitions = std::move(partitions), done = std::move(done)] {
    ErrorCode all = ErrorCode::kNone;
    Txn* t = FindTxn(id);
    if (ErrorCode e = ServingError(id); e != ErrorCode::kNone && (shutting_down_ || !id.empty())) {
      // The produce path turns these into the retriable NOT_ENOUGH_REPLICAS (KIP-890).
      all = shutting_down_ ? ErrorCode::kNotEnoughReplicas : e;
    } else if (id.empty()) {
      all = ErrorCode::kInvalidRequest;
    } else if (t == nullptr || t->producer_id != producer_id) {
      all = ErrorCode::kInvalidProducerIdMapping;
    } else if (t->producer_epoch != producer_epoch) {
      all = ErrorCode::kInvalidProducerEpoch;
    } else if (t->state == TxnState::kPrepareCommit || t->state == TxnState::kPrepareAbort) {
      all = ErrorCode::kNotEnoughReplicas;
    }
    std::vector<ErrorCode> out;
    out.reserve(partitions.size());
    for (const auto& tp : partitions) {
      if (all != ErrorCode::kNone) {
        out.push_back(all);
      } else {
        out.push_back(t->partitions.count(tp) != 0 ? ErrorCode::kNone
                                                   : ErrorCode::kInvalidTxnState);
      }
    }
    done(std::move(out));
  });
}

// ---------------------------------------------------------------------------------------
// InitProducerId

void TxnCoordinator::DoInitProducerId(const std::string& id, int32_t timeout_ms,
                                      int64_t producer_id, int16_t producer_epoch,
                                      Done<TxnProducerResult>& done) {
  if (id.empty()) {
    return done(
        {shutting_down_ ? ErrorCode::kCoordinatorNotAvailable : ErrorCode::kInvalidRequest});
  }
  if (ErrorCode e = ServingError(id); e != ErrorCode::kNone) return done({e});
  if (timeout_ms <= 0 || timeout_ms > options_.max_timeout_ms) {
    return done({ErrorCode::kInvalidTransactionTimeout});
  }
  const int64_t now = WallMillis();
  Txn* t = FindTxn(id);
  if (t == nullptr) {
    Result<int64_t> pid = options_.allocate_producer_id();
    if (!pid.ok()) {
      SLUICE_LOG(kTxnLog, kError, "allocating a producer id: {}", pid.status().ToString());
      return done({ErrorCode::kCoordinatorNotAvailable});
    }
    auto fresh = std::make_unique<Txn>();
    fresh->id = id;
    fresh->producer_id = *pid;
    fresh->timeout_ms = timeout_ms;
    fresh->last_update_ms = now;
    t = fresh.get();
    txns_.emplace(id, std::move(fresh));
  }
  if (t->pending) return done({ErrorCode::kConcurrentTransactions});
  const bool expected = producer_id != kNoProducerId;
  // KIP-360: a producer that gives its id and epoch is fenced unless the id is this
  // transactional id's (or the one before a rotation whose answer it may have missed).
  if (expected && t->producer_epoch != kNoProducerEpoch && producer_id != t->producer_id &&
      !(producer_id == t->previous_producer_id && producer_epoch >= kMaxClientEpoch)) {
    return done({ErrorCode::kProducerFenced});
  }
  switch (t->state) {
    case TxnState::kPrepareCommit:
    case TxnState::kPrepareAbort:
      return done({ErrorCode::kConcurrentTransactions});
    case TxnState::kOngoing:
      // The ongoing transaction is aborted with a bumped epoch; the client retries and
      // gets the next one (Kafka answers CONCURRENT_TRANSACTIONS here too).
      return FenceAndAbort(*t, [done](ErrorCode e, int64_t, int16_t) {
        done({e == ErrorCode::kNone ? ErrorCode::kConcurrentTransactions : e});
      });
    case TxnState::kDead:
    case TxnState::kPrepareEpochFence:
      return done({ErrorCode::kConcurrentTransactions});
    case TxnState::kEmpty:
    case TxnState::kCompleteCommit:
    case TxnState::kCompleteAbort:
      break;
  }
  TxnRecord next = RecordOf(*t);
  next.state = TxnState::kEmpty;
  next.partitions.clear();
  next.groups.clear();
  next.timeout_ms = timeout_ms;
  next.start_ms = -1;
  next.last_update_ms = now;
  next.previous_producer_id = kNoProducerId;
  int16_t last_epoch = kNoProducerEpoch;
  if (t->producer_epoch >= kMaxClientEpoch && (!expected || producer_epoch == t->producer_epoch)) {
    // Epochs exhausted: a new producer id, epoch 0.
    Result<int64_t> pid = options_.allocate_producer_id();
    if (!pid.ok()) {
      SLUICE_LOG(kTxnLog, kError, "allocating a producer id: {}", pid.status().ToString());
      return done({ErrorCode::kCoordinatorNotAvailable});
    }
    next.previous_producer_id = t->producer_id;
    next.producer_id = *pid;
    next.producer_epoch = 0;
    last_epoch = expected ? t->producer_epoch : kNoProducerEpoch;
  } else if (t->producer_epoch >= kMaxClientEpoch) {
    return done({ErrorCode::kProducerFenced});
  } else if (!expected) {
    next.producer_epoch = static_cast<int16_t>(t->producer_epoch + 1);
  } else if (t->producer_epoch == kNoProducerEpoch || producer_epoch == t->producer_epoch) {
    next.producer_epoch = static_cast<int16_t>(t->producer_epoch + 1);
    last_epoch = t->producer_epoch;
  } else if (producer_epoch == t->last_producer_epoch) {
    // A retry of a bump whose answer was lost: the same answer again.
    last_epoch = t->last_producer_epoch;
  } else {
    return done({ErrorCode::kProducerFenced});
  }
  t->pending_last_epoch = last_epoch;
  const bool fresh = t->producer_epoch == kNoProducerEpoch && t->state == TxnState::kEmpty;
  Persist(*t, next, [this, id, fresh, done](ErrorCode e) {
    Txn* t = FindTxn(id);
    if (e != ErrorCode::kNone && t != nullptr && fresh && t->producer_epoch == kNoProducerEpoch &&
        !t->pending && t->waiting.empty()) {
      // The id's first record was not written: it is not known here (Kafka keeps the
      // entry it made; nothing durable refers to it, so forgetting it is the same).
      txns_.erase(id);
    }
    if (e != ErrorCode::kNone || t == nullptr) return done({e});
    SLUICE_LOG(kTxnLog, kInfo, "initialized transactional id {} with producer id {} epoch {}", id,
               t->producer_id, t->producer_epoch);
    done({ErrorCode::kNone, t->producer_id, t->producer_epoch});
  });
}

// ---------------------------------------------------------------------------------------
// AddPartitionsToTxn, AddOffsetsToTxn

void TxnCoordinator::DoAdd(const std::string& id, int64_t producer_id, int16_t producer_epoch,
                           const std::vector<TopicPartition>& partitions,
                           const std::optional<std::string>& group, Done<ErrorCode>& done,
                           bool may_wait) {
  if (id.empty()) {
    return done(shutting_down_ ? ErrorCode::kCoordinatorNotAvailable : ErrorCode::kInvalidRequest);
  }
  if (ErrorCode e = ServingError(id); e != ErrorCode::kNone) return done(e);
  Txn* t = FindTxn(id);
  if (t == nullptr || t->producer_id != producer_id) {
    return done(ErrorCode::kInvalidProducerIdMapping);
  }
  if (t->producer_epoch != producer_epoch) return done(ErrorCode::kProducerFenced);
  if (t->pending || t->state == TxnState::kPrepareCommit || t->state == TxnState::kPrepareAbort) {
    if (!may_wait) return done(ErrorCode::kConcurrentTransactions);
    // The previous transaction is completing (its markers take a few fdatasyncs), or
    // another change of this id is being written: the request waits for it rather than
    // sending the client into its retry back-off, up to add_wait_ms.
    t->waiting.push_back([this, id, producer_id, producer_epoch, partitions, group,
                          done = std::move(done)]() mutable {
      DoAdd(id, producer_id, producer_epoch, partitions, group, done, /*may_wait=*/false);
    });
    if (t->waiting_timer == 0) {
      t->waiting_timer = loop_->RunAfter(options_.add_wait_ms, [this, id] {
        Txn* t = FindTxn(id);
        if (t == nullptr) return;
        t->waiting_timer = 0;
        ReleaseWaiting(*t);
      });
    }
    return;
  }
  if (t->state == TxnState::kDead || t->state == TxnState::kPrepareEpochFence) {
    return done(ErrorCode::kConcurrentTransactions);
  }
  const bool known =
      std::all_of(partitions.begin(), partitions.end(),
                  [t](const TopicPartition& tp) { return t->partitions.count(tp) != 0; }) &&
      (!group || t->groups.count(*group) != 0);
  if (t->state == TxnState::kOngoing && known) return done(ErrorCode::kNone);
  const int64_t now = WallMillis();
  TxnRecord next = RecordOf(*t);
  if (t->state != TxnState::kOngoing) {
    next.start_ms = now;
    next.partitions.clear();
    next.groups.clear();
  }
  next.state = TxnState::kOngoing;
  next.partitions.insert(partitions.begin(), partitions.end());
  if (group) next.groups.insert(*group);
  next.last_update_ms = now;
  Persist(*t, std::move(next), [done](ErrorCode e) { done(e); });
}

// ---------------------------------------------------------------------------------------
// EndTxn

void TxnCoordinator::FenceAndAbort(Txn& t, EndDone done) {
  if (t.producer_epoch == INT16_MAX) {
    SLUICE_LOG(kTxnLog, kError, "transactional id {}: epoch {} cannot be bumped to fence", t.id,
               t.producer_epoch);
    return done(ErrorCode::kUnknownServerError, kNoProducerId, kNoProducerEpoch);
  }
  const int16_t bumped =
      t.failed_epoch_fence ? t.producer_epoch : static_cast<int16_t>(t.producer_epoch + 1);
  t.pending = TxnState::kPrepareEpochFence;
  EndTransaction(t.id, t.producer_id, bumped, /*commit=*/false, /*from_client=*/false,
                 std::move(done));
}

void TxnCoordinator::EndTransaction(const std::string& id, int64_t producer_id,
                                    int16_t producer_epoch, bool commit, bool from_client,
                                    EndDone done) {
  if (id.empty()) return done(ErrorCode::kInvalidRequest, kNoProducerId, kNoProducerEpoch);
  Txn* t = FindTxn(id);
  if (t == nullptr || t->producer_id != producer_id) {
    return done(ErrorCode::kInvalidProducerIdMapping, kNoProducerId, kNoProducerEpoch);
  }
  const bool fence = t->pending == TxnState::kPrepareEpochFence;
  if (fence) t->pending.reset();
  // Transaction version 1: a client's epoch must be the current one; the coordinator's
  // own abort (a fence) carries the bumped epoch.
  const bool valid_epoch =
      (!from_client || producer_epoch == t->producer_epoch) && producer_epoch >= t->producer_epoch;
  if (!valid_epoch) return done(ErrorCode::kProducerFenced, kNoProducerId, kNoProducerEpoch);
  if (t->pending) return done(ErrorCode::kConcurrentTransactions, kNoProducerId, kNoProducerEpoch);
  auto invalid = [&] {
    SLUICE_LOG(kTxnLog, kDebug, "transactional id {}: {} asked in state {}", id,
               commit ? "commit" : "abort", TxnStateName(t->state));
    done(ErrorCode::kInvalidTxnState, kNoProducerId, kNoProducerEpoch);
  };
  switch (t->state) {
    case TxnState::kOngoing:
      break;
    case TxnState::kCompleteCommit:
      if (commit) return done(ErrorCode::kNone, t->producer_id, t->producer_epoch);
      return invalid();
    case TxnState::kCompleteAbort:
      if (!commit) return done(ErrorCode::kNone, t->producer_id, t->producer_epoch);
      return invalid();
    case TxnState::kPrepareCommit:
      if (commit) return done(ErrorCode::kConcurrentTransactions, kNoProducerId, kNoProducerEpoch);
      return invalid();
    case TxnState::kPrepareAbort:
      if (!commit) return done(ErrorCode::kConcurrentTransactions, kNoProducerId, kNoProducerEpoch);
      return invalid();
    case TxnState::kEmpty:
    case TxnState::kDead:
    case TxnState::kPrepareEpochFence:
      return invalid();
  }
  if (fence) {
    // The bumped epoch goes into the PrepareAbort record and the markers: the old
    // producer is fenced at the partitions too.
    t->producer_epoch = producer_epoch;
    t->last_producer_epoch = kNoProducerEpoch;
  }
  TxnRecord next = RecordOf(*t);
  next.state = commit ? TxnState::kPrepareCommit : TxnState::kPrepareAbort;
  next.last_update_ms = WallMillis();
  CrashPoint("txn-before-prepare");
  Persist(*t, std::move(next), [this, id, fence, done = std::move(done)](ErrorCode e) {
    Txn* t = FindTxn(id);
    if (t == nullptr)
      return done(ErrorCode::kCoordinatorNotAvailable, kNoProducerId, kNoProducerEpoch);
    if (e != ErrorCode::kNone) {
      if (fence) t->failed_epoch_fence = true;
      return done(e, kNoProducerId, kNoProducerEpoch);
    }
    CrashPoint("txn-prepare-durable");
    // Answered once the decision is durable; the markers follow (as Kafka).
    done(ErrorCode::kNone, t->producer_id, t->producer_epoch);
    WriteMarkers(id);
  });
}

// ---------------------------------------------------------------------------------------
// State changes

TxnRecord TxnCoordinator::RecordOf(const Txn& t) const {
  TxnRecord r;
  r.producer_id = t.producer_id;
  // Kept only across a producer id rotation (what KIP-360's retry check needs).
  r.previous_producer_id =
      t.previous_producer_id != t.producer_id ? t.previous_producer_id : kNoProducerId;
  r.producer_epoch = t.producer_epoch;
  r.timeout_ms = t.timeout_ms;
  r.state = t.state;
  r.partitions = t.partitions;
  r.groups = t.groups;
  r.last_update_ms = t.last_update_ms;
  r.start_ms = t.start_ms;
  return r;
}

void TxnCoordinator::ApplyDurable(Txn& t, const TxnRecord& next) {
  if (next.state == TxnState::kEmpty) {
    t.previous_producer_id =
        next.previous_producer_id != kNoProducerId ? next.previous_producer_id : t.producer_id;
    t.last_producer_epoch = t.pending_last_epoch;
    t.pending_last_epoch = kNoProducerEpoch;
  }
  if (next.state == TxnState::kCompleteCommit || next.state == TxnState::kCompleteAbort) {
    t.failed_epoch_fence = false;
  }
  t.producer_id = next.producer_id;
  t.producer_epoch = next.producer_epoch;
  t.timeout_ms = next.timeout_ms;
  t.state = next.state;
  t.partitions = next.partitions;
  t.groups = next.groups;
  t.start_ms = next.start_ms;
  t.last_update_ms = next.last_update_ms;
}

void TxnCoordinator::ReleaseWaiting(Txn& t) {
  if (t.waiting_timer != 0) {
    loop_->Cancel(t.waiting_timer);
    t.waiting_timer = 0;
  }
  std::vector<std::function<void()>> waiting = std::move(t.waiting);
  t.waiting.clear();
  for (auto& run : waiting) run();  // may free `t` (not today: nothing here erases)
}

void TxnCoordinator::Persist(Txn& t, TxnRecord next, std::function<void(ErrorCode)> then) {
  SLUICE_ASSERT(!t.pending);
  SLUICE_ASSERT(IsValidTxnTransition(t.state, next.state));
  t.pending = next.state;
  const std::string id = t.id;
  const uint64_t load = log_->LoadOf(id);
  auto on_durable = [this, id, load, next, then](const Status& st) mutable {
    // An IoExecutor thread: back to the loop (Close waits for these before stopping).
    loop_->Post([this, id, load, next = std::move(next), then = std::move(then), st] {
      Txn* t = FindTxn(id);
      // Unloaded meanwhile, or loaded again (Kafka's coordinator epoch check): `t` is not
      // the state this write started from; the new load read the log itself.
      if (t == nullptr || log_->LoadOf(id) != load) return then(ErrorCode::kNotCoordinator);
      t->pending.reset();
      if (!st.ok()) {
        SLUICE_LOG(kTxnLog, kError, "writing the state of transactional id {}: {}", id,
                   st.ToString());
        return then(CoordinatorWriteError(st));
      }
      ApplyDurable(*t, next);
      then(ErrorCode::kNone);
      // A change was written (a transaction completed, or another request's addition):
      // the requests that waited for it go on.
      if (Txn* done = FindTxn(id); done != nullptr && !done->pending &&
                                   done->state != TxnState::kPrepareCommit &&
                                   done->state != TxnState::kPrepareAbort) {
        ReleaseWaiting(*done);
      }
    });
  };
  Status st = log_->Write(id, next, std::move(on_durable));
  if (!st.ok()) {
    SLUICE_LOG(kTxnLog, kError, "writing the state of transactional id {}: {}", id, st.ToString());
    t.pending.reset();
    then(CoordinatorWriteError(st));
  }
}

}  // namespace sluice::broker
