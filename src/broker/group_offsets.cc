// GroupCoordinator: OffsetCommit, OffsetFetch, and the offsets of transactions:
// TxnOffsetCommit and CompleteTxn (group_coordinator.h;
// docs/design/0016-transactions.md, "Group offsets").
#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "broker/group_coordinator.h"
#include "broker/group_state.h"
#include "broker/txn_markers.h"

namespace sluice::broker {

// ---------------------------------------------------------------------------------------
// OffsetCommit, OffsetFetch

namespace {

struct PendingCommit {
  kafka::OffsetCommitResponse resp;
  std::vector<std::pair<size_t, size_t>> written;  // (topic, partition) indexes
  GroupCoordinator::Done<kafka::OffsetCommitResponse> done;

  void Fail(ErrorCode error) {
    for (auto [t, p] : written) resp.topics[t].partitions[p].error_code = error;
  }
};

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
  auto pending = std::make_shared<PendingCommit>();
  pending->done = std::move(done);
  kafka::OffsetCommitResponse& resp = pending->resp;
  std::vector<std::pair<size_t, size_t>> valid;
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const auto& topic = req.topics[t];
    kafka::OffsetCommitResponse::Topic rt;
    rt.name = topic.name;
    for (size_t p = 0; p < topic.partitions.size(); ++p) {
      kafka::OffsetCommitResponse::Partition rp;
      rp.partition_index = topic.partitions[p].partition_index;
      if (options_.partition_exists && !options_.partition_exists(topic.name, rp.partition_index)) {
        rp.error_code = ErrorCode::kUnknownTopicOrPartition;
      } else {
        valid.emplace_back(t, p);
      }
      rt.partitions.push_back(std::move(rp));
    }
    resp.topics.push_back(std::move(rt));
  }
  auto fail_all = [&](ErrorCode error) {
    for (auto [t, p] : valid) resp.topics[t].partitions[p].error_code = error;
    pending->done(std::move(resp));
  };
  if (shutting_down_) return fail_all(ErrorCode::kCoordinatorNotAvailable);
  if (valid.empty()) return pending->done(std::move(resp));

  const int32_t generation = req.generation_id_or_member_epoch;
  Group* g = FindGroup(req.group_id);
  if (g == nullptr) {
    // A commit with a generation for a group that does not exist comes from an older
    // generation (or a coordinator restart): refused. Without one it creates the group.
    if (generation >= 0) return fail_all(ErrorCode::kIllegalGeneration);
    g = &CreateGroup(req.group_id);
    SLUICE_LOG(kLog, kInfo, "group {} created by a commit without group management", req.group_id);
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
  if (err != ErrorCode::kNone) return fail_all(err);

  OffsetWrite write;
  const int64_t now = WallMillis();
  for (auto [t, p] : valid) {
    const auto& rp = req.topics[t].partitions[p];
    if (rp.committed_metadata && options_.max_offset_metadata_bytes >= 0 &&
        rp.committed_metadata->size() > static_cast<size_t>(options_.max_offset_metadata_bytes)) {
      resp.topics[t].partitions[p].error_code = ErrorCode::kOffsetMetadataTooLarge;
      continue;
    }
    CommittedOffset value;
    value.offset = rp.committed_offset;
    value.leader_epoch = version >= 6 ? rp.committed_leader_epoch : -1;
    value.metadata = rp.committed_metadata.value_or("");
    // Only v1 carries a client timestamp; -1 there means "now" too.
    value.commit_timestamp_ms =
        version == 1 && rp.commit_timestamp != -1 ? rp.commit_timestamp : now;
    write.Commit(req.group_id, TopicPartition{req.topics[t].name, rp.partition_index},
                 std::move(value));
    pending->written.emplace_back(t, p);
  }
  if (write.empty()) return pending->done(std::move(resp));
  Status st = offsets_->Write(write, [this, pending](const Status& s) {
    loop_->Post([pending, s] {
      if (!s.ok()) {
        SLUICE_LOG(kLog, kWarn, "offset commit not durable: {}", s.ToString());
        pending->Fail(ErrorCode::kCoordinatorNotAvailable);
      }
      pending->done(std::move(pending->resp));
    });
  });
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "group {}: offset commit refused: {}", req.group_id, st.ToString());
    pending->Fail(st.code() == StatusCode::kInvalidArgument ? ErrorCode::kInvalidCommitOffsetSize
                                                            : ErrorCode::kCoordinatorNotAvailable);
    pending->done(std::move(pending->resp));
    return;
  }
  MaybeSnapshot();
}

kafka::OffsetFetchResponse GroupCoordinator::DoOffsetFetch(const kafka::OffsetFetchRequest& req,
                                                           int16_t version) {
  using Resp = kafka::OffsetFetchResponse;
  // One group's answer: every committed partition (topics null), or the asked ones,
  // -1 / "" for those without a commit (also when the group does not exist).
  auto fetch = [&](const std::string& group,
                   const std::optional<std::vector<kafka::OffsetFetchRequest::Topic>>& topics) {
    std::vector<Resp::Topic> out;
    // require_stable (v7+): a partition a transaction holds offsets for answers
    // UNSTABLE_OFFSET_COMMIT (the client retries); without it, the last visible offset.
    const bool require_stable = version >= 7 && req.require_stable;
    auto partition = [&](const TopicPartition& tp, const CommittedOffset* v) {
      Resp::Partition p;
      p.partition_index = tp.partition;
      if (require_stable && offsets_->HasPendingOffset(group, tp)) {
        v = nullptr;
        p.error_code = ErrorCode::kUnstableOffsetCommit;
      }
      p.committed_offset = v ? v->offset : -1;
      p.committed_leader_epoch = v ? v->leader_epoch : -1;
      p.metadata = v ? v->metadata : std::string();
      return p;
    };
    if (!topics) {
      if (const OffsetLog::OffsetMap* offsets = offsets_->Offsets(group)) {
        for (const auto& [tp, v] : *offsets) {
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
        rt.partitions.push_back(partition(tp, offsets_->Find(group, tp)));
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
      if (shutting_down_) {
        out.error_code = ErrorCode::kCoordinatorNotAvailable;
      } else {
        out.topics = fetch(rg.group_id, rg.topics);
      }
      resp.groups.push_back(std::move(out));
    }
    return resp;
  }
  if (shutting_down_) {
    if (version >= 2) {
      resp.error_code = ErrorCode::kCoordinatorNotAvailable;
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
          p.error_code = ErrorCode::kCoordinatorNotAvailable;
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

struct PendingTxnCommit {
  kafka::TxnOffsetCommitResponse resp;
  std::vector<std::pair<size_t, size_t>> written;  // (topic, partition) indexes
  GroupCoordinator::Done<kafka::TxnOffsetCommitResponse> done;

  void Fail(ErrorCode error) {
    for (auto [t, p] : written) resp.topics[t].partitions[p].error_code = error;
  }
};

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
      [this, shared, version](std::vector<ErrorCode> errors) {
        ErrorCode verified = errors.empty() ? ErrorCode::kUnknownServerError : errors.front();
        loop_->Post([this, shared, version, verified] {
          DoTxnOffsetCommit(shared->first, version, ConvertVerifyError(verified), shared->second);
        });
      });
}

void GroupCoordinator::CompleteTxn(std::string group, int64_t producer_id, int16_t producer_epoch,
                                   bool commit, Done<ErrorCode> done) {
  loop_->Post([this, group = std::move(group), producer_id, producer_epoch, commit,
               done = std::move(done)]() mutable {
    DoCompleteTxn(group, producer_id, producer_epoch, commit, done);
  });
}

// Kafka's handleTxnCommitOffsets / the new coordinator's commitTransactionalOffset. Unlike
// OffsetCommit the group's state is not checked (a transaction may commit while the group
// completes a rebalance) and no member's session is extended.
void GroupCoordinator::DoTxnOffsetCommit(kafka::TxnOffsetCommitRequest& req, int16_t version,
                                         ErrorCode verified,
                                         Done<kafka::TxnOffsetCommitResponse>& done) {
  auto pending = std::make_shared<PendingTxnCommit>();
  pending->done = std::move(done);
  kafka::TxnOffsetCommitResponse& resp = pending->resp;
  std::vector<std::pair<size_t, size_t>> valid;
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const auto& topic = req.topics[t];
    kafka::TxnTopicErrors rt;
    rt.name = topic.name;
    for (size_t p = 0; p < topic.partitions.size(); ++p) {
      kafka::TxnTopicErrors::Partition rp;
      rp.partition_index = topic.partitions[p].partition_index;
      if (options_.partition_exists && !options_.partition_exists(topic.name, rp.partition_index)) {
        rp.error_code = ErrorCode::kUnknownTopicOrPartition;
      } else {
        valid.emplace_back(t, p);
      }
      rt.partitions.push_back(std::move(rp));
    }
    resp.topics.push_back(std::move(rt));
  }
  auto fail_all = [&](ErrorCode error) {
    for (auto [t, p] : valid) resp.topics[t].partitions[p].error_code = error;
    pending->done(std::move(resp));
  };
  if (req.group_id.empty()) return fail_all(ErrorCode::kInvalidGroupId);
  if (shutting_down_) return fail_all(ErrorCode::kCoordinatorNotAvailable);
  if (verified != ErrorCode::kNone) {
    // Kafka's handler: clients before 2.0 (v0-1) do not retry a loading coordinator.
    if (version < 2 && verified == ErrorCode::kCoordinatorLoadInProgress)
      verified = ErrorCode::kCoordinatorNotAvailable;
    return fail_all(verified);
  }
  if (valid.empty()) return pending->done(std::move(resp));
  if (req.producer_id < 0 || req.producer_epoch < 0) {
    return fail_all(ErrorCode::kInvalidProducerIdMapping);
  }

  const int32_t generation = req.generation_id;
  Group* g = FindGroup(req.group_id);
  if (g == nullptr) {
    // As OffsetCommit: without a generation the commit creates a simple group.
    if (generation >= 0) return fail_all(ErrorCode::kIllegalGeneration);
    g = &CreateGroup(req.group_id);
    SLUICE_LOG(kLog, kInfo, "group {} created by a transactional commit of producer {}",
               req.group_id, req.producer_id);
  }
  ErrorCode err = ValidateOffsetCommit(*g, generation, req.member_id, req.group_instance_id, true);
  if (err != ErrorCode::kNone) return fail_all(err);

  OffsetWrite write;
  const int64_t now = WallMillis();
  for (auto [t, p] : valid) {
    const auto& rp = req.topics[t].partitions[p];
    if (rp.committed_metadata && options_.max_offset_metadata_bytes >= 0 &&
        rp.committed_metadata->size() > static_cast<size_t>(options_.max_offset_metadata_bytes)) {
      resp.topics[t].partitions[p].error_code = ErrorCode::kOffsetMetadataTooLarge;
      continue;
    }
    CommittedOffset value;
    value.offset = rp.committed_offset;
    value.leader_epoch = version >= 2 ? rp.committed_leader_epoch : -1;
    value.metadata = rp.committed_metadata.value_or("");
    value.commit_timestamp_ms = now;
    write.Commit(req.group_id, TopicPartition{req.topics[t].name, rp.partition_index},
                 std::move(value));
    pending->written.emplace_back(t, p);
  }
  if (write.empty()) return pending->done(std::move(resp));
  Status st = offsets_->WriteTxnOffsets(
      req.producer_id, req.producer_epoch, write, [this, pending](const Status& s) {
        loop_->Post([pending, s] {
          if (!s.ok()) {
            SLUICE_LOG(kLog, kWarn, "transactional offset commit not durable: {}", s.ToString());
            pending->Fail(ErrorCode::kCoordinatorNotAvailable);
          }
          pending->done(std::move(pending->resp));
        });
      });
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "group {}: transactional offset commit of producer {} refused: {}",
               req.group_id, req.producer_id, st.ToString());
    pending->Fail(st.code() == StatusCode::kAborted ? ErrorCode::kInvalidProducerEpoch
                  : st.code() == StatusCode::kInvalidArgument
                      ? ErrorCode::kInvalidCommitOffsetSize
                      : ErrorCode::kCoordinatorNotAvailable);
    pending->done(std::move(pending->resp));
    return;
  }
  MaybeSnapshot();
}

void GroupCoordinator::DoCompleteTxn(const std::string& group, int64_t producer_id,
                                     int16_t producer_epoch, bool commit, Done<ErrorCode>& done) {
  if (shutting_down_) return done(ErrorCode::kCoordinatorNotAvailable);
  auto shared = std::make_shared<Done<ErrorCode>>(std::move(done));
  // The coordinator epoch is 0: one node, whose transaction coordinator never moves.
  Status st = offsets_->CompleteTxn(
      producer_id, producer_epoch, commit, 0, [this, shared](const Status& s) {
        loop_->Post([shared, s] {
          if (!s.ok()) SLUICE_LOG(kLog, kWarn, "transaction marker not durable: {}", s.ToString());
          (*shared)(s.ok() ? ErrorCode::kNone : ErrorCode::kCoordinatorNotAvailable);
        });
      });
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "group {}: {} marker of producer {} epoch {} refused: {}", group,
               commit ? "commit" : "abort", producer_id, producer_epoch, st.ToString());
    return (*shared)(st.code() == StatusCode::kAborted ? ErrorCode::kInvalidProducerEpoch
                                                       : ErrorCode::kCoordinatorNotAvailable);
  }
  SLUICE_LOG(kLog, kDebug, "group {}: {} of producer {} epoch {} completed", group,
             commit ? "commit" : "abort", producer_id, producer_epoch);
  MaybeSnapshot();
}

}  // namespace sluice::broker
