// GroupCoordinator: ListGroups, DescribeGroups, DeleteGroups, deleted topics and the cleanup
// of empty groups (group_coordinator.h).
#include <fmt/format.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "broker/coordinator_partitions.h"
#include "broker/group_coordinator.h"
#include "broker/group_state.h"

namespace sluice::broker {

// ---------------------------------------------------------------------------------------
// ListGroups, DescribeGroups, DeleteGroups, deleted topics

kafka::ListGroupsResponse GroupCoordinator::DoListGroups(const kafka::ListGroupsRequest& req) {
  kafka::ListGroupsResponse resp;
  if (shutting_down_) {
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
    return resp;
  }
  // A partition still loading: its groups are not known yet (Kafka's answer).
  for (const auto& [p, part] : partitions_) {
    if (part.log == nullptr) {
      resp.error_code = ErrorCode::kCoordinatorLoadInProgress;
      return resp;
    }
  }
  // Both filters compare without case, as Kafka does; every group here is "classic".
  std::set<std::string> states, types;
  for (const auto& s : req.states_filter) states.insert(AsciiLower(s));
  for (const auto& t : req.types_filter) types.insert(AsciiLower(t));
  if (!types.empty() && types.count("classic") == 0) return resp;
  for (const auto& [id, g] : groups_) {
    std::string state = StateName(g->state);
    if (!states.empty() && states.count(AsciiLower(state)) == 0) continue;
    kafka::ListGroupsResponse::Group out;
    out.group_id = id;
    out.protocol_type = g->protocol_type.value_or("");
    out.group_state = std::move(state);
    out.group_type = "classic";
    resp.groups.push_back(std::move(out));
  }
  return resp;
}

kafka::DescribeGroupsResponse GroupCoordinator::DoDescribeGroups(
    const kafka::DescribeGroupsRequest& req, int16_t version) {
  kafka::DescribeGroupsResponse resp;
  for (const std::string& id : req.groups) {
    kafka::DescribeGroupsResponse::Group out;
    out.group_id = id;
    if (ErrorCode e = ServingError(id); e != ErrorCode::kNone) {
      out.error_code = e;
      resp.groups.push_back(std::move(out));
      continue;
    }
    const Group* g = FindGroup(id);
    if (g == nullptr) {
      out.group_state = StateName(State::kDead);  // unknown: Dead, no error (before v6)
    } else {
      out.group_state = StateName(g->state);
      out.protocol_type = g->protocol_type.value_or("");
      const bool stable = g->Is(State::kStable) && g->protocol_name;
      // Metadata and assignments only in Stable, as Kafka's GroupMetadata.summary.
      if (stable) out.protocol_data = *g->protocol_name;
      for (const Member* m : g->Ordered()) {
        kafka::DescribeGroupsResponse::Member om;
        om.member_id = m->id;
        om.group_instance_id = m->instance_id;
        om.client_id = m->client_id;
        om.client_host = m->client_host;
        if (stable) {
          om.member_metadata = m->Metadata(*g->protocol_name);
          om.member_assignment = m->assignment;
        }
        out.members.push_back(std::move(om));
      }
    }
    if (version >= 3 && req.include_authorized_operations)
      out.authorized_operations = kGroupOperations;
    resp.groups.push_back(std::move(out));
  }
  return resp;
}

void GroupCoordinator::DoDeleteGroups(const kafka::DeleteGroupsRequest& req,
                                      Done<kafka::DeleteGroupsResponse>& done) {
  auto resp = std::make_shared<kafka::DeleteGroupsResponse>();
  std::set<std::string> seen;
  // One write per partition of the offsets log (one on a single node), and the results
  // it decides.
  std::map<OffsetLog*, std::pair<OffsetWrite, std::vector<size_t>>> writes;
  for (const std::string& id : req.groups_names) {
    if (!seen.insert(id).second) continue;
    kafka::DeleteGroupsResponse::GroupResult r;
    r.group_id = id;
    const ErrorCode serving = ServingError(id);
    Group* g = serving != ErrorCode::kNone ? nullptr : FindGroup(id);
    if (serving != ErrorCode::kNone) {
      r.error_code = serving;
    } else if (g == nullptr) {
      r.error_code = ErrorCode::kGroupIdNotFound;
    } else if (!g->Is(State::kEmpty)) {
      r.error_code = ErrorCode::kNonEmptyGroup;
    } else {
      DropGroup(*g);
      auto& [write, results] = writes[OffsetsOf(id)];
      write.DeleteGroup(id);
      results.push_back(resp->results.size());
    }
    resp->results.push_back(std::move(r));
  }
  if (writes.empty()) return done(std::move(*resp));
  SLUICE_LOG(kGroupsLog, kInfo, "deleting {} groups", resp->results.size());
  // Answered once every write is durable; a result whose write failed says so.
  struct Answer {
    std::shared_ptr<kafka::DeleteGroupsResponse> resp;
    Done<kafka::DeleteGroupsResponse> done;
    size_t left = 0;
  };
  auto answer = std::make_shared<Answer>(Answer{resp, std::move(done), writes.size()});
  for (auto& [log, w] : writes) {
    auto finish = [answer, results = w.second](const Status& st) {
      if (!st.ok()) {
        SLUICE_LOG(kGroupsLog, kWarn, "group deletion not durable: {}", st.ToString());
        for (size_t i : results) answer->resp->results[i].error_code = CoordinatorWriteError(st);
      }
      if (--answer->left == 0) answer->done(std::move(*answer->resp));
    };
    Status st = log->Write(
        w.first, [this, finish](const Status& s) { loop_->Post([finish, s] { finish(s); }); });
    if (!st.ok()) finish(st);
  }
}

void GroupCoordinator::DoTopicDeleted(const std::string& topic) {
  if (shutting_down_) return;
  OffsetWrite write;
  write.DeleteTopic(topic);
  for (auto& [p, part] : partitions_) {
    if (part.log == nullptr) continue;
    Status st = part.log->Write(write, LogIfFailed("deleting the offsets of topic " + topic));
    if (!st.ok())
      SLUICE_LOG(kGroupsLog, kWarn, "deleting the offsets of topic {}: {}", topic, st.ToString());
  }
  CleanupEmptyGroups("a topic was deleted");
}

// Kafka's cleanupGroupMetadata: an Empty group left without offsets is forgotten, with
// its generation (no member can refer to it).
void GroupCoordinator::CleanupEmptyGroups(const char* why) {
  std::vector<std::string> dropped;
  for (const auto& [id, g] : groups_) {
    OffsetLog* log = OffsetsOf(id);
    if (log != nullptr && g->Is(State::kEmpty) && g->pending_members.empty() &&
        !log->HasOffsets(id))
      dropped.push_back(id);
  }
  if (dropped.empty()) return;
  std::map<OffsetLog*, OffsetWrite> writes;
  for (const std::string& id : dropped) {
    DropGroup(*FindGroup(id));
    OffsetLog* log = OffsetsOf(id);
    if (log->Group(id) != nullptr) writes[log].DeleteGroup(id);
  }
  SLUICE_LOG(kGroupsLog, kInfo, "{}: forgetting {} empty groups without offsets", why,
             dropped.size());
  for (auto& [log, write] : writes) {
    Status st = log->Write(write, LogIfFailed("forgetting empty groups"));
    if (!st.ok()) SLUICE_LOG(kGroupsLog, kWarn, "forgetting empty groups: {}", st.ToString());
  }
}

void GroupCoordinator::ScheduleCleanup() {
  loop_->RunAfter(kCleanupIntervalMs, [this] {
    if (shutting_down_) return;
    CleanupEmptyGroups("periodic cleanup");
    ScheduleCleanup();
  });
}

}  // namespace sluice::broker
