// GroupCoordinator: ListGroups, DescribeGroups, DeleteGroups, deleted topics and the cleanup
// of empty groups (group_coordinator.h).
#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

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
    if (shutting_down_) {
      out.error_code = ErrorCode::kCoordinatorNotAvailable;
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
  std::vector<size_t> deleted;
  OffsetWrite write;
  for (const std::string& id : req.groups_names) {
    if (!seen.insert(id).second) continue;
    kafka::DeleteGroupsResponse::GroupResult r;
    r.group_id = id;
    Group* g = shutting_down_ ? nullptr : FindGroup(id);
    if (shutting_down_) {
      r.error_code = ErrorCode::kCoordinatorNotAvailable;
    } else if (g == nullptr) {
      r.error_code = ErrorCode::kGroupIdNotFound;
    } else if (!g->Is(State::kEmpty)) {
      r.error_code = ErrorCode::kNonEmptyGroup;
    } else {
      DropGroup(*g);
      write.DeleteGroup(id);
      deleted.push_back(resp->results.size());
    }
    resp->results.push_back(std::move(r));
  }
  if (write.empty()) return done(std::move(*resp));
  SLUICE_LOG(kLog, kInfo, "deleting {} groups", deleted.size());
  auto answer = [resp, deleted, done = std::move(done)](const Status& st) mutable {
    if (!st.ok()) {
      SLUICE_LOG(kLog, kWarn, "group deletion not durable: {}", st.ToString());
      for (size_t i : deleted) resp->results[i].error_code = ErrorCode::kCoordinatorNotAvailable;
    }
    done(std::move(*resp));
  };
  auto shared_answer = std::make_shared<decltype(answer)>(std::move(answer));
  Status st = offsets_->Write(write, [this, shared_answer](const Status& s) {
    loop_->Post([shared_answer, s] { (*shared_answer)(s); });
  });
  if (!st.ok()) (*shared_answer)(st);
}

void GroupCoordinator::DoTopicDeleted(const std::string& topic) {
  if (shutting_down_) return;
  OffsetWrite write;
  write.DeleteTopic(topic);
  Status st = offsets_->Write(write, LogIfFailed("deleting the offsets of topic " + topic));
  if (!st.ok())
    SLUICE_LOG(kLog, kWarn, "deleting the offsets of topic {}: {}", topic, st.ToString());
  CleanupEmptyGroups("a topic was deleted");
}

// Kafka's cleanupGroupMetadata: an Empty group left without offsets is forgotten, with
// its generation (no member can refer to it).
void GroupCoordinator::CleanupEmptyGroups(const char* why) {
  std::vector<std::string> dropped;
  for (const auto& [id, g] : groups_) {
    if (g->Is(State::kEmpty) && g->pending_members.empty() && !offsets_->HasOffsets(id))
      dropped.push_back(id);
  }
  if (dropped.empty()) return;
  OffsetWrite write;
  for (const std::string& id : dropped) {
    DropGroup(*FindGroup(id));
    if (offsets_->Group(id) != nullptr) write.DeleteGroup(id);
  }
  SLUICE_LOG(kLog, kInfo, "{}: forgetting {} empty groups without offsets", why, dropped.size());
  if (write.empty()) return;
  Status st = offsets_->Write(write, LogIfFailed("forgetting empty groups"));
  if (!st.ok()) SLUICE_LOG(kLog, kWarn, "forgetting empty groups: {}", st.ToString());
}

void GroupCoordinator::ScheduleCleanup() {
  loop_->RunAfter(kCleanupIntervalMs, [this] {
    if (shutting_down_) return;
    CleanupEmptyGroups("periodic cleanup");
    ScheduleCleanup();
  });
}

}  // namespace sluice::broker
