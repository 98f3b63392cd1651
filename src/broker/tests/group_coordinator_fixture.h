// The GroupCoordinator test fixture shared by group_coordinator_test.cc and
// group_txn_test.cc: a coordinator on a temporary offsets log, requests built from small
// specs, and responses awaited from the coordinator's thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "broker/group_coordinator.h"
#include "storage/io_executor.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace {  // NOLINT: each test file gets its own copy

using kafka::ErrorCode;
using storage::testing::TempDir;
using namespace std::chrono_literals;

// A response that arrives on the coordinator's thread.
template <class R>
class Pending {
 public:
  GroupCoordinator::Done<R> Callback() {
    auto p = promise_;
    auto thread = caller_;
    return [p, thread](R r) {
      EXPECT_NE(std::this_thread::get_id(), thread) << "done ran on the caller's thread";
      p->set_value(std::move(r));
    };
  }
  R Get() {
    if (future_.wait_for(20s) != std::future_status::ready) {
      ADD_FAILURE() << "no response within 20 s";
      return R{};
    }
    return future_.get();
  }
  bool ReadyWithin(std::chrono::milliseconds d) {
    return future_.wait_for(d) == std::future_status::ready;
  }

 private:
  std::shared_ptr<std::promise<R>> promise_ = std::make_shared<std::promise<R>>();
  std::future<R> future_ = promise_->get_future();
  std::thread::id caller_ = std::this_thread::get_id();
};

using Protocols = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

struct JoinSpec {
  std::string group = "g";
  std::string member_id;
  std::optional<std::string> instance;
  int32_t session_ms = 10000;
  int32_t rebalance_ms = 10000;
  std::string protocol_type = "consumer";
  Protocols protocols = {{"range", {1, 2, 3}}};
  int16_t version = 9;
  std::string client_id = "client";
};

struct CommitSpec {
  std::string topic;
  int32_t partition;
  int64_t offset;
  std::optional<std::string> metadata = std::string();
  int32_t leader_epoch = -1;
};

// The topics of an OffsetCommit or TxnOffsetCommit request, from specs.
template <class Req>
void AddCommits(Req& req, const std::vector<CommitSpec>& commits) {
  using Topic = typename decltype(Req::topics)::value_type;
  using Partition = typename decltype(Topic::partitions)::value_type;
  for (const auto& c : commits) {
    if (req.topics.empty() || req.topics.back().name != c.topic) {
      req.topics.emplace_back();
      req.topics.back().name = c.topic;
    }
    Partition p;
    p.partition_index = c.partition;
    p.committed_offset = c.offset;
    p.committed_metadata = c.metadata;
    p.committed_leader_epoch = c.leader_epoch;
    req.topics.back().partitions.push_back(std::move(p));
  }
}

class GroupCoordinatorTest : public ::testing::Test {
 protected:
  GroupCoordinatorOptions Options() {
    GroupCoordinatorOptions o;
    o.dir = dir_.path() + "/__consumer_offsets-0";
    o.executor = &executor_;
    o.flush_ms = 5;
    o.min_session_timeout_ms = 10;
    o.max_session_timeout_ms = 60000;
    o.initial_rebalance_delay_ms = 0;
    o.partition_exists = [](const std::string& topic, int32_t partition) {
      return topic != "missing" && partition >= 0 && partition < 100;
    };
    return o;
  }

  void Open(GroupCoordinatorOptions o) {
    auto c = GroupCoordinator::Open(std::move(o));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    coord_ = std::move(c).value();
  }
  void Open() { Open(Options()); }
  void Reopen(GroupCoordinatorOptions o) {
    ASSERT_TRUE(coord_->Close().ok());
    coord_.reset();
    Open(std::move(o));
  }
  void Reopen() { Reopen(Options()); }

  std::unique_ptr<Pending<kafka::JoinGroupResponse>> JoinAsync(const JoinSpec& s) {
    kafka::JoinGroupRequest req;
    req.group_id = s.group;
    req.session_timeout_ms = s.session_ms;
    req.rebalance_timeout_ms = s.rebalance_ms;
    req.member_id = s.member_id;
    req.group_instance_id = s.instance;
    req.protocol_type = s.protocol_type;
    for (const auto& [name, metadata] : s.protocols) {
      kafka::JoinGroupRequest::Protocol p;
      p.name = name;
      p.metadata = metadata;
      req.protocols.push_back(std::move(p));
    }
    auto pending = std::make_unique<Pending<kafka::JoinGroupResponse>>();
    coord_->JoinGroup(std::move(req), s.version, GroupClient{s.client_id, "/127.0.0.1"},
                      pending->Callback());
    return pending;
  }
  kafka::JoinGroupResponse Join(const JoinSpec& s) { return JoinAsync(s)->Get(); }

  // A dynamic member's first join at v4+: MEMBER_ID_REQUIRED, then the join with the id.
  std::unique_ptr<Pending<kafka::JoinGroupResponse>> JoinNewAsync(JoinSpec s) {
    kafka::JoinGroupResponse first = Join(s);
    EXPECT_EQ(first.error_code, ErrorCode::kMemberIdRequired);
    s.member_id = first.member_id;
    return JoinAsync(s);
  }

  std::unique_ptr<Pending<kafka::SyncGroupResponse>> SyncAsync(
      const std::string& group, const std::string& member, int32_t generation,
      const std::vector<std::pair<std::string, std::vector<uint8_t>>>& assignments = {},
      std::optional<std::string> instance = std::nullopt, int16_t version = 5) {
    kafka::SyncGroupRequest req;
    req.group_id = group;
    req.generation_id = generation;
    req.member_id = member;
    req.group_instance_id = std::move(instance);
    if (version >= 5) {
      req.protocol_type = "consumer";
      req.protocol_name = "range";
    }
    for (const auto& [id, bytes] : assignments) {
      kafka::SyncGroupRequest::Assignment a;
      a.member_id = id;
      a.assignment = bytes;
      req.assignments.push_back(std::move(a));
    }
    auto pending = std::make_unique<Pending<kafka::SyncGroupResponse>>();
    coord_->SyncGroup(std::move(req), version, pending->Callback());
    return pending;
  }
  kafka::SyncGroupResponse Sync(
      const std::string& group, const std::string& member, int32_t generation,
      const std::vector<std::pair<std::string, std::vector<uint8_t>>>& assignments = {},
      std::optional<std::string> instance = std::nullopt) {
    return SyncAsync(group, member, generation, assignments, std::move(instance))->Get();
  }

  ErrorCode Heartbeat(const std::string& group, const std::string& member, int32_t generation,
                      std::optional<std::string> instance = std::nullopt) {
    kafka::HeartbeatRequest req;
    req.group_id = group;
    req.member_id = member;
    req.generation_id = generation;
    req.group_instance_id = std::move(instance);
    Pending<kafka::HeartbeatResponse> p;
    coord_->Heartbeat(std::move(req), 4, p.Callback());
    return p.Get().error_code;
  }

  kafka::LeaveGroupResponse Leave(
      const std::string& group,
      std::vector<std::pair<std::string, std::optional<std::string>>> members,
      int16_t version = 5) {
    kafka::LeaveGroupRequest req;
    req.group_id = group;
    if (version < 3) {
      req.member_id = members.at(0).first;
    } else {
      for (auto& [id, instance] : members) {
        kafka::LeaveGroupRequest::Member m;
        m.member_id = id;
        m.group_instance_id = instance;
        req.members.push_back(std::move(m));
      }
    }
    Pending<kafka::LeaveGroupResponse> p;
    coord_->LeaveGroup(std::move(req), version, p.Callback());
    return p.Get();
  }

  kafka::OffsetCommitResponse Commit(const std::string& group, const std::string& member,
                                     int32_t generation, const std::vector<CommitSpec>& commits,
                                     int16_t version = 8,
                                     std::optional<std::string> instance = std::nullopt) {
    kafka::OffsetCommitRequest req;
    req.group_id = group;
    req.member_id = member;
    req.generation_id_or_member_epoch = generation;
    req.group_instance_id = std::move(instance);
    AddCommits(req, commits);
    Pending<kafka::OffsetCommitResponse> p;
    coord_->OffsetCommit(std::move(req), version, p.Callback());
    return p.Get();
  }
  kafka::OffsetCommitResponse CommitStandalone(const std::string& group,
                                               const std::vector<CommitSpec>& commits) {
    return Commit(group, "", -1, commits);
  }

  // OffsetFetch v7 of one group; `topics` null: everything committed.
  kafka::OffsetFetchResponse Fetch(
      const std::string& group,
      std::optional<std::vector<std::pair<std::string, std::vector<int32_t>>>> topics,
      int16_t version = 7) {
    kafka::OffsetFetchRequest req;
    req.group_id = group;
    if (!topics) {
      req.topics = std::nullopt;
    } else {
      req.topics.emplace();
      for (auto& [name, parts] : *topics) {
        kafka::OffsetFetchRequest::Topic t;
        t.name = name;
        t.partition_indexes = parts;
        req.topics->push_back(std::move(t));
      }
    }
    Pending<kafka::OffsetFetchResponse> p;
    coord_->OffsetFetch(std::move(req), version, p.Callback());
    return p.Get();
  }
  // The committed offset of one partition (-1 when none), via OffsetFetch v7.
  int64_t Committed(const std::string& group, const std::string& topic, int32_t partition) {
    auto r = Fetch(group,
                   std::vector<std::pair<std::string, std::vector<int32_t>>>{{topic, {partition}}});
    EXPECT_EQ(r.error_code, ErrorCode::kNone);
    if (r.topics.size() != 1 || r.topics[0].partitions.size() != 1) {
      ADD_FAILURE() << "unexpected OffsetFetch response shape";
      return -2;
    }
    return r.topics[0].partitions[0].committed_offset;
  }

  kafka::DescribeGroupsResponse::Group Describe(const std::string& group, int16_t version = 5,
                                                bool include_ops = false) {
    kafka::DescribeGroupsRequest req;
    req.groups = {group};
    req.include_authorized_operations = include_ops;
    Pending<kafka::DescribeGroupsResponse> p;
    coord_->DescribeGroups(std::move(req), version, p.Callback());
    auto r = p.Get();
    if (r.groups.size() != 1) {
      ADD_FAILURE() << "DescribeGroups answered " << r.groups.size() << " groups";
      return {};
    }
    return r.groups[0];
  }

  kafka::ListGroupsResponse List(std::vector<std::string> states = {},
                                 std::vector<std::string> types = {}) {
    kafka::ListGroupsRequest req;
    req.states_filter = std::move(states);
    req.types_filter = std::move(types);
    Pending<kafka::ListGroupsResponse> p;
    coord_->ListGroups(std::move(req), 5, p.Callback());
    return p.Get();
  }

  kafka::DeleteGroupsResponse Delete(std::vector<std::string> groups) {
    kafka::DeleteGroupsRequest req;
    req.groups_names = std::move(groups);
    Pending<kafka::DeleteGroupsResponse> p;
    coord_->DeleteGroups(std::move(req), 2, p.Callback());
    return p.Get();
  }

  // A Stable group of one dynamic member. Returns its id; the generation is 1.
  std::string StableSingleMember(const std::string& group = "g") {
    JoinSpec s;
    s.group = group;
    auto join = JoinNewAsync(s)->Get();
    EXPECT_EQ(join.error_code, ErrorCode::kNone);
    auto sync = Sync(group, join.member_id, join.generation_id, {{join.member_id, {7}}});
    EXPECT_EQ(sync.error_code, ErrorCode::kNone);
    return join.member_id;
  }

  TempDir dir_{"group-coordinator-test"};
  storage::IoExecutor executor_{2};
  std::unique_ptr<GroupCoordinator> coord_;
};

}  // namespace
}  // namespace sluice::broker
