// GroupCoordinator: OffsetCommit and OffsetFetch (group_coordinator.h).
#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "broker/group_coordinator.h"
#include "broker/group_state.h"

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

ErrorCode GroupCoordinator::ValidateOffsetCommit(
    const Group& g, int32_t generation, const std::string& member_id,
    const std::optional<std::string>& instance_id) const {
  // Generation -1: the admin client or a consumer without group management; allowed
  // while the group has no members.
  if (generation < 0 && g.Is(State::kEmpty)) return ErrorCode::kNone;
  if (generation >= 0 || !member_id.empty() || instance_id) {
    ErrorCode err = ValidateCurrentMember(g, member_id, instance_id);
    if (err != ErrorCode::kNone) return err;
    return generation == g.generation ? ErrorCode::kNone : ErrorCode::kIllegalGeneration;
  }
  // Only members commit to a group with members.
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
    auto partition = [](int32_t index, const CommittedOffset* v) {
      Resp::Partition p;
      p.partition_index = index;
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
          out.back().partitions.push_back(partition(tp.partition, &v));
        }
      }
      return out;
    }
    for (const auto& t : *topics) {
      Resp::Topic rt;
      rt.name = t.name;
      for (int32_t index : t.partition_indexes) {
        rt.partitions.push_back(
            partition(index, offsets_->Find(group, TopicPartition{t.name, index})));
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

}  // namespace sluice::broker
