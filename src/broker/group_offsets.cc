// GroupCoordinator: OffsetCommit, OffsetFetch, and the offsets of transactions:
// TxnOffsetCommit and CompleteTxn (group_coordinator.h;
// docs/design/0016-transactions.md, "Group offsets").
#include <fmt/format.h>

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/coordinator_partitions.h"
#include "broker/group_coordinator.h"
#include "broker/group_state.h"
#include "broker/txn_markers.h"

namespace sluice::broker {

// ---------------------------------------------------------------------------------------
// OffsetCommit, OffsetFetch

namespace {

using Indexes = std::vector<std::pair<size_t, size_t>>;  // (topic, partition) indexes

// One commit request (OffsetCommit or TxnOffsetCommit) while it is checked and written:
// the response shaped as the request, UNKNOWN_TOPIC_OR_PARTITION already set where a
// partition does not exist; `valid` the others, `written` those sent to the offsets log.
template <class Resp>
struct PendingCommit {
  Resp resp;
  Indexes valid;
  Indexes written;
  GroupCoordinator::Done<Resp> done;

  template <class Req>
  PendingCommit(const Req& req, GroupCoordinator::Done<Resp> d,
                const GroupCoordinatorOptions& options)
      : done(std::move(d)) {
    using Topic = typename decltype(Resp::topics)::value_type;
    using Partition = typename decltype(Topic::partitions)::value_type;
    for (size_t t = 0; t < req.topics.size(); ++t) {
      const auto& topic = req.topics[t];
      Topic rt;
      rt.name = topic.name;
      for (size_t p = 0; p < topic.partitions.size(); ++p) {
        Partition rp;
        rp.partition_index = topic.partitions[p].partition_index;
        if (options.partition_exists && !options.partition_exists(topic.name, rp.partition_index)) {
          rp.error_code = ErrorCode::kUnknownTopicOrPartition;
        } else {
          valid.emplace_back(t, p);
        }
        rt.partitions.push_back(std::move(rp));
      }
      resp.topics.push_back(std::move(rt));
    }
  }
  void Set(const Indexes& which, ErrorCode error) {
    for (auto [t, p] : which) resp.topics[t].partitions[p].error_code = error;
  }
  void Answer() { done(std::move(resp)); }
  void FailAll(ErrorCode error) {
    Set(valid, error);
    Answer();
  }

  // The offsets to write: each valid partition's, by `make(partition)`, except metadata
  // over `max_metadata` bytes (OFFSET_METADATA_TOO_LARGE).
  template <class Req, class MakeValue>
  OffsetWrite Collect(const Req& req, int32_t max_metadata, MakeValue make) {
    OffsetWrite write;
    for (auto [t, p] : valid) {
      const auto& rp = req.topics[t].partitions[p];
      if (rp.committed_metadata && max_metadata >= 0 &&
          rp.committed_metadata->size() > static_cast<size_t>(max_metadata)) {
        resp.topics[t].partitions[p].error_code = ErrorCode::kOffsetMetadataTooLarge;
        continue;
      }
      write.Commit(req.group_id, TopicPartition{req.topics[t].name, rp.partition_index}, make(rp));
      written.emplace_back(t, p);
    }
    return write;
  }
};

// What a request's partition commits: its offset, its metadata ("" for null), its leader
// epoch when the request's version carries one, at `timestamp_ms`.
template <class Partition>
CommittedOffset ValueOf(const Partition& rp, bool has_leader_epoch, int64_t timestamp_ms) {
  CommittedOffset value;
  value.offset = rp.committed_offset;
  value.leader_epoch = has_leader_epoch ? rp.committed_leader_epoch : -1;
  value.metadata = rp.committed_metadata.value_or("");
  value.commit_timestamp_ms = timestamp_ms;
  return value;
}

// Hands a write to the offsets log (`append` calls it with the durability callback) and
// answers from its verdict, on `loop`: `finish(ok)` first (the appended offsets become
// visible, or are dropped), then `written` NONE once acknowledged, else the write's error
// (CoordinatorWriteError); a write refused at once answers at once (a record too large
// INVALID_COMMIT_OFFSET_SIZE, a stale producer epoch INVALID_PRODUCER_EPOCH) and is not
// finished (nothing was appended).
template <class Resp>
void WriteAndAnswer(EventLoop& loop, const std::shared_ptr<PendingCommit<Resp>>& pending,
                    const std::string& what, const std::function<Status(OffsetLog::Done)>& append,
                    std::function<void(bool ok)> finish) {
  Status st = append([&loop, pending, what, finish](const Status& s) {
    loop.Post([pending, s, what, finish] {
      finish(s.ok());
      if (!s.ok()) {
        SLUICE_LOG(kGroupsLog, kWarn, "{} not acknowledged: {}", what, s.ToString());
        pending->Set(pending->written, CoordinatorWriteError(s));
      }
      pending->Answer();
    });
  });
  if (st.ok()) return;
  SLUICE_LOG(kGroupsLog, kWarn, "{} refused: {}", what, st.ToString());
  pending->Set(pending->written,
               st.code() == StatusCode::kAborted           ? ErrorCode::kInvalidProducerEpoch
               : st.code() == StatusCode::kInvalidArgument ? ErrorCode::kInvalidCommitOffsetSize
                                                           : ErrorCode::kCoordinatorNotAvailable);
  pending->Answer();
}

}  // namespace

// Kafka's ClassicGroup.validateOffsetCommit (the group states are checked by the callers).
ErrorCode GroupCoordinator::ValidateOffsetCommit(const Group& g, int32_t generation,
                                                 const std::string& member_id,
                                                 const std::optional<std::string>& instance_id,
                                                 bool transactional) const {
  if (g.Is(State::kDead)) return ErrorCode::kCoordinatorNotAvailable;
  // Generation -1: the admin client or a consumer without group management; allowed
  // while the group has no members.
  if (generation < 0 && g.Is(State::kEmpty)) return ErrorCode::kNone;
  if (generation >= 0 || !member_id.empty() || instance_id) {
    ErrorCode err = ValidateCurrentMember(g, member_id, instance_id);
    if (err != ErrorCode::kNone) return err;
    return generation == g.generation ? ErrorCode::kNone : ErrorCode::kIllegalGeneration;
  }
  // Only members commit to a group with members; a transaction's commit without member
  // fields (TxnOffsetCommit v0-2 has none) is let through, as Kafka does.
  if (transactional) return ErrorCode::kNone;
  return g.Is(State::kEmpty) ? ErrorCode::kNone : ErrorCode::kUnknownMemberId;
}

void GroupCoordinator::DoOffsetCommit(kafka::OffsetCommitRequest& req, int16_t version,
                                      Done<kafka::OffsetCommitResponse>& done) {
  auto pending =
      std::make_shared<PendingCommit<kafka::OffsetCommitResponse>>(req, std::move(done), options_);
  if (ErrorCode e = ServingError(req.group_id); e != ErrorCode::kNone) return pending->FailAll(e);
  if (pending->valid.empty()) return pending->Answer();

  const int32_t generation = req.generation_id_or_member_epoch;
  Group* g = FindGroup(req.group_id);
  if (g == nullptr) {
    // A commit with a generation for a group that does not exist comes from an older
    // generation (or a coordinator restart): refused. Without one it creates the group.
    if (generation >= 0) return pending->FailAll(ErrorCode::kIllegalGeneration);
    g = &CreateGroup(req.group_id);
    SLUICE_LOG(kGroupsLog, kInfo, "group {} created by a commit without group management",
               req.group_id);
  }
  ErrorCode err = ValidateOffsetCommit(*g, generation, req.member_id, req.group_instance_id);
  if (err == ErrorCode::kNone) {
    switch (g->state) {
      case State::kCompletingRebalance:
        // The member has its new generation but not its assignment yet.
        err = ErrorCode::kRebalanceInProgress;
        break;
      case State::kStable:
      case State::kPreparingRebalance:
        // Allowed while preparing: the heartbeat tells the member to rejoin.
        if (Member* m = g->Get(req.member_id)) ScheduleHeartbeat(*g, *m, m->session_timeout_ms);
        break;
      case State::kEmpty:
      case State::kDead:
        break;
    }
  }
  if (err != ErrorCode::kNone) return pending->FailAll(err);

  const int64_t now = WallMillis();
  OffsetWrite write =
      pending->Collect(req, options_.max_offset_metadata_bytes, [&](const auto& rp) {
        // Only v1 carries a client timestamp; -1 there means "now" too.
        return ValueOf(rp, version >= 6,
                       version == 1 && rp.commit_timestamp != -1 ? rp.commit_timestamp : now);
      });
  if (write.empty()) return pending->Answer();
  // Kafka's pendingOffsetCommits: visible only once the write is acknowledged.
  auto appended = std::make_shared<AppendedOffsets>();
  WriteAndAnswer<kafka::OffsetCommitResponse>(
      *loop_, pending, fmt::format("group {}: offset commit", req.group_id),
      [&](OffsetLog::Done cb) {
        return OffsetsOf(req.group_id)->AppendOffsets(write, std::move(cb), appended.get());
      },
      FinishIn(PartitionOf(req.group_id),
               [appended](OffsetLog& log, bool ok) { log.FinishOffsets(*appended, ok); }));
}

std::function<void(bool)> GroupCoordinator::FinishIn(int32_t p,
                                                     std::function<void(OffsetLog&, bool)> finish) {
  auto it = partitions_.find(p);
  const uint64_t load_id = it == partitions_.end() ? 0 : it->second.load_id;
  return [this, p, load_id, finish = std::move(finish)](bool ok) {
    // The partition may have been unloaded (or loaded again) since: its log is gone, and
    // a new load read the record from the log if it was written.
    auto it = partitions_.find(p);
    if (it == partitions_.end() || it->second.load_id != load_id || it->second.log == nullptr) {
      return;
    }
    finish(*it->second.log, ok);
  };
}

kafka::OffsetFetchResponse GroupCoordinator::DoOffsetFetch(const kafka::OffsetFetchRequest& req,
                                                           int16_t version) {
  using Resp = kafka::OffsetFetchResponse;
  // One group's answer: every committed partition (topics null), or the asked ones,
  // -1 / "" for those without a commit (also when the group does not exist).
  auto fetch = [&](const std::string& group,
                   const std::optional<std::vector<kafka::OffsetFetchRequest::Topic>>& topics) {
    std::vector<Resp::Topic> out;
    OffsetLog* offsets = OffsetsOf(group);  // served: checked by the caller
    // require_stable (v7+): a partition a transaction holds offsets for answers
    // UNSTABLE_OFFSET_COMMIT (the client retries); without it, the last visible offset.
    const bool require_stable = version >= 7 && req.require_stable;
    auto partition = [&](const TopicPartition& tp, const CommittedOffset* v) {
      Resp::Partition p;
      p.partition_index = tp.partition;
      if (require_stable && offsets->HasPendingOffset(group, tp)) {
        v = nullptr;
        p.error_code = ErrorCode::kUnstableOffsetCommit;
      }
      p.committed_offset = v ? v->offset : -1;
      p.committed_leader_epoch = v ? v->leader_epoch : -1;
      p.metadata = v ? v->metadata : std::string();
      return p;
    };
    if (!topics) {
      if (const OffsetLog::OffsetMap* committed = offsets->Offsets(group)) {
        for (const auto& [tp, v] : *committed) {
          if (out.empty() || out.back().name != tp.topic) {
            out.emplace_back();
            out.back().name = tp.topic;
          }
          out.back().partitions.push_back(partition(tp, &v));
        }
      }
      return out;
    }
    for (const auto& t : *topics) {
      Resp::Topic rt;
      rt.name = t.name;
      for (int32_t index : t.partition_indexes) {
        TopicPartition tp{t.name, index};
        rt.partitions.push_back(partition(tp, offsets->Find(group, tp)));
      }
      out.push_back(std::move(rt));
    }
    return out;
  };

  Resp resp;
  if (version >= 8) {
    for (const auto& rg : req.groups) {
      Resp::Group out;
      out.group_id = rg.group_id;
      if (ErrorCode e = ServingError(rg.group_id); e != ErrorCode::kNone) {
        out.error_code = e;
      } else {
        out.topics = fetch(rg.group_id, rg.topics);
      }
      resp.groups.push_back(std::move(out));
    }
    return resp;
  }
  if (ErrorCode e = ServingError(req.group_id); e != ErrorCode::kNone) {
    if (version >= 2) {
      resp.error_code = e;
    } else if (req.topics) {
      // v0-1 have no top-level error: every asked partition carries it.
      for (const auto& t : *req.topics) {
        Resp::Topic rt;
        rt.name = t.name;
        for (int32_t index : t.partition_indexes) {
          Resp::Partition p;
          p.partition_index = index;
          p.committed_offset = -1;
          p.metadata = std::string();
          p.error_code = e;
          rt.partitions.push_back(std::move(p));
        }
        resp.topics.push_back(std::move(rt));
      }
    }
    return resp;
  }
  resp.topics = fetch(req.group_id, req.topics);
  return resp;
}

// ---------------------------------------------------------------------------------------
// TxnOffsetCommit, CompleteTxn

namespace {

// Kafka's GroupMetadataManager.maybeConvertOffsetCommitError, for the verifier's errors.
ErrorCode ConvertVerifyError(ErrorCode error) {
  switch (error) {
    case ErrorCode::kNetworkException:
      return ErrorCode::kCoordinatorLoadInProgress;
    case ErrorCode::kUnknownTopicOrPartition:
    case ErrorCode::kNotEnoughReplicas:
    case ErrorCode::kNotEnoughReplicasAfterAppend:
      return ErrorCode::kCoordinatorNotAvailable;
    case ErrorCode::kNotLeaderOrFollower:
    case ErrorCode::kKafkaStorageError:
      return ErrorCode::kNotCoordinator;
    case ErrorCode::kMessageTooLarge:
    case ErrorCode::kRecordListTooLarge:
    case ErrorCode::kInvalidFetchSize:
      return ErrorCode::kInvalidCommitOffsetSize;
    default:
      return error;
  }
}

}  // namespace

void GroupCoordinator::TxnOffsetCommit(kafka::TxnOffsetCommitRequest req, int16_t version,
                                       Done<kafka::TxnOffsetCommitResponse> done) {
  if (options_.txn_verifier == nullptr || req.group_id.empty()) {
    loop_->Post([this, req = std::move(req), version, done = std::move(done)]() mutable {
      DoTxnOffsetCommit(req, version, ErrorCode::kNone, done);
    });
    return;
  }
  // Kafka 3.6+ verifies with the transaction coordinator before anything else (KIP-890).
  std::string txn_id = req.transactional_id;
  const int64_t producer_id = req.producer_id;
  const int16_t producer_epoch = req.producer_epoch;
  auto shared = std::make_shared<
      std::pair<kafka::TxnOffsetCommitRequest, Done<kafka::TxnOffsetCommitResponse>>>(
      std::move(req), std::move(done));
  options_.txn_verifier->Verify(
      std::move(txn_id), producer_id, producer_epoch, {TopicPartition{kOffsetsTopic, 0}},
      [this, gate = gate_, shared, version](std::vector<ErrorCode> errors) {
        ErrorCode verified = errors.empty() ? ErrorCode::kUnknownServerError : errors.front();
        std::lock_guard lock(gate->mu);
        if (gate->loop == nullptr) return;  // closed: dropped, as any request after Close
        gate->loop->Post([this, shared, version, verified] {
          DoTxnOffsetCommit(shared->first, version, ConvertVerifyError(verified), shared->second);
        });
      });
}

void GroupCoordinator::CompleteTxn(std::string group, int64_t producer_id, int16_t producer_epoch,
                                   bool commit, int32_t coordinator_epoch, Done<ErrorCode> done) {
  loop_->Post([this, group = std::move(group), producer_id, producer_epoch, commit,
               coordinator_epoch, done = std::move(done)]() mutable {
    if (ErrorCode e = ServingError(group); e != ErrorCode::kNone) return done(e);
    CompleteTxnIn(OffsetsOf(group), PartitionOf(group), producer_id, producer_epoch, commit,
                  coordinator_epoch, done);
  });
}

// Kafka's handleTxnCommitOffsets / the new coordinator's commitTransactionalOffset. Unlike
// OffsetCommit the group's state is not checked (a transaction may commit while the group
// completes a rebalance) and no member's session is extended.
void GroupCoordinator::DoTxnOffsetCommit(kafka::TxnOffsetCommitRequest& req, int16_t version,
                                         ErrorCode verified,
                                         Done<kafka::TxnOffsetCommitResponse>& done) {
  auto pending = std::make_shared<PendingCommit<kafka::TxnOffsetCommitResponse>>(
      req, std::move(done), options_);
  if (req.group_id.empty()) return pending->FailAll(ErrorCode::kInvalidGroupId);
  if (ErrorCode e = ServingError(req.group_id); e != ErrorCode::kNone) return pending->FailAll(e);
  if (verified != ErrorCode::kNone) {
    // Kafka's handler: clients before 2.0 (v0-1) do not retry a loading coordinator.
    if (version < 2 && verified == ErrorCode::kCoordinatorLoadInProgress)
      verified = ErrorCode::kCoordinatorNotAvailable;
    return pending->FailAll(verified);
  }
  if (pending->valid.empty()) return pending->Answer();
  if (req.producer_id < 0 || req.producer_epoch < 0) {
    return pending->FailAll(ErrorCode::kInvalidProducerIdMapping);
  }

  const int32_t generation = req.generation_id;
  Group* g = FindGroup(req.group_id);
  if (g == nullptr) {
    // As OffsetCommit: without a generation the commit creates a simple group.
    if (generation >= 0) return pending->FailAll(ErrorCode::kIllegalGeneration);
    g = &CreateGroup(req.group_id);
    SLUICE_LOG(kGroupsLog, kInfo, "group {} created by a transactional commit of producer {}",
               req.group_id, req.producer_id);
  }
  ErrorCode err = ValidateOffsetCommit(*g, generation, req.member_id, req.group_instance_id, true);
  if (err != ErrorCode::kNone) return pending->FailAll(err);

  const int64_t now = WallMillis();
  OffsetWrite write =
      pending->Collect(req, options_.max_offset_metadata_bytes,
                       [&](const auto& rp) { return ValueOf(rp, version >= 2, now); });
  if (write.empty()) return pending->Answer();
  // Pending until the transaction's marker anyway; taken back if the write fails
  // (Kafka's failPendingTxnOffsetCommit).
  auto appended = std::make_shared<AppendedOffsets>();
  WriteAndAnswer<kafka::TxnOffsetCommitResponse>(
      *loop_, pending,
      fmt::format("group {}: transactional offset commit of producer {}", req.group_id,
                  req.producer_id),
      [&](OffsetLog::Done cb) {
        return OffsetsOf(req.group_id)
            ->WriteTxnOffsets(req.producer_id, req.producer_epoch, write, std::move(cb),
                              appended.get());
      },
      FinishIn(PartitionOf(req.group_id), [appended](OffsetLog& log, bool ok) {
        if (!ok) log.FailTxnOffsets(*appended);
      }));
}

void GroupCoordinator::CompletePartitionTxn(int32_t p, int64_t producer_id, int16_t producer_epoch,
                                            bool commit, int32_t coordinator_epoch,
                                            Done<ErrorCode> done) {
  loop_->Post([this, p, producer_id, producer_epoch, commit, coordinator_epoch,
               done = std::move(done)]() mutable {
    if (shutting_down_) return done(ErrorCode::kCoordinatorNotAvailable);
    auto it = partitions_.find(p);
    if (it == partitions_.end()) return done(ErrorCode::kNotCoordinator);
    if (it->second.log == nullptr) return done(ErrorCode::kCoordinatorLoadInProgress);
    CompleteTxnIn(it->second.log.get(), p, producer_id, producer_epoch, commit, coordinator_epoch,
                  done);
  });
}

// The marker is written with the transaction coordinator's epoch (its state partition's
// leader epoch) and fenced as a partition's ProducerStateManager fences it.
void GroupCoordinator::CompleteTxnIn(OffsetLog* log, int32_t p, int64_t producer_id,
                                     int16_t producer_epoch, bool commit, int32_t coordinator_epoch,
                                     Done<ErrorCode>& done) {
  auto shared = std::make_shared<Done<ErrorCode>>(std::move(done));
  Status st = log->CompleteTxn(
      producer_id, producer_epoch, commit, coordinator_epoch, [this, shared](const Status& s) {
        loop_->Post([shared, s] {
          if (!s.ok())
            SLUICE_LOG(kGroupsLog, kWarn, "transaction marker not durable: {}", s.ToString());
          (*shared)(s.ok() ? ErrorCode::kNone : CoordinatorWriteError(s));
        });
      });
  if (!st.ok()) {
    SLUICE_LOG(kGroupsLog, kWarn,
               "offsets partition {}: {} marker of producer {} epoch {} refused: {}", p,
               commit ? "commit" : "abort", producer_id, producer_epoch, st.ToString());
    return (*shared)(st.code() == StatusCode::kAborted ? ErrorCode::kInvalidProducerEpoch
                     : st.code() == StatusCode::kOutOfRange
                         ? ErrorCode::kTransactionCoordinatorFenced
                         : ErrorCode::kCoordinatorNotAvailable);
  }
  SLUICE_LOG(kGroupsLog, kDebug, "offsets partition {}: {} of producer {} epoch {} completed", p,
             commit ? "commit" : "abort", producer_id, producer_epoch);
}

}  // namespace sluice::broker
