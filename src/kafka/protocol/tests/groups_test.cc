// Tests of the consumer-group API codecs (messages/groups.h): every advertised version of
// every request and response against golden bytes built from Kafka's JSON field lists,
// and malformed input.
#include "kafka/protocol/messages/groups.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "kafka/protocol/api.h"
#include "kafka/protocol/tests/golden.h"
#include "kafka/protocol/tests/message_harness.h"

// The samples use designated initializers that leave unknown_tags, and fields a version
// lacks, at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace sluice::kafka {
namespace groups_test {
namespace {

using namespace testing;  // Golden and the harness (message_harness.h)

bool Flexible(ApiKey key, int16_t v) { return IsFlexible(*FindApi(key), v); }

void Byt(Golden& g, bool f, const Bytes& b) {
  if (f) {
    g.cbytes(b);
  } else {
    g.bytes(b);
  }
}

// ------------------------------------------------------------------ FindCoordinator

FindCoordinatorRequest FindCoordinatorRequestSample(int16_t v, bool) {
  FindCoordinatorRequest m;
  if (v <= 3) m.key = "group-a";
  if (v >= 1) m.key_type = 1;
  if (v >= 4) m.coordinator_keys = {"group-a", "txn-b"};
  return m;
}

Bytes FindCoordinatorRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kFindCoordinator, v);
  Golden g;
  if (v <= 3) g.s(f, "group-a");
  if (v >= 1) g.i8(1);
  if (v >= 4) g.a(f, 2).s(f, "group-a").s(f, "txn-b");
  g.t(f);
  return g.take();
}

FindCoordinatorResponse FindCoordinatorResponseSample(int16_t v, bool nulls) {
  FindCoordinatorResponse m;
  if (v >= 1) m.throttle_time_ms = 250;
  if (v <= 3) {
    m.error_code = ErrorCode::kCoordinatorNotAvailable;
    if (v >= 1) m.error_message = Opt(nulls, "not yet");
    m.node_id = 3;
    m.host = "broker-3";
    m.port = 9092;
  }
  if (v >= 4) {
    m.coordinators = {
        {.key = "group-a",
         .node_id = 1,
         .host = "h1",
         .port = 9093,
         .error_code = ErrorCode::kNone,
         .error_message = Opt(nulls, "ok")},
        {.key = "txn-b",
         .node_id = 2,
         .host = "h2",
         .port = 9094,
         .error_code = ErrorCode::kCoordinatorLoadInProgress,
         .error_message = "loading"},
    };
  }
  return m;
}

Bytes FindCoordinatorResponseGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kFindCoordinator, v);
  Golden g;
  if (v >= 1) g.i32(250);
  if (v <= 3) {
    g.i16(15);
    if (v >= 1) NStr(g, f, Opt(nulls, "not yet"));
    g.i32(3).s(f, "broker-3").i32(9092);
  }
  if (v >= 4) {
    g.a(f, 2);
    g.s(f, "group-a").i32(1).s(f, "h1").i32(9093).i16(0);
    NStr(g, f, Opt(nulls, "ok"));
    g.t(f);
    g.s(f, "txn-b").i32(2).s(f, "h2").i32(9094).i16(14).s(f, "loading").t(f);
  }
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ JoinGroup

JoinGroupRequest JoinGroupRequestSample(int16_t v, bool nulls) {
  JoinGroupRequest m;
  m.group_id = "group-a";
  m.session_timeout_ms = 30000;
  if (v >= 1) m.rebalance_timeout_ms = 60000;
  m.member_id = "member-1";
  if (v >= 5) m.group_instance_id = Opt(nulls, "instance-1");
  m.protocol_type = "consumer";
  m.protocols = {{.name = "range", .metadata = {0, 1, 2}},
                 {.name = "roundrobin", .metadata = {3, 4}}};
  if (v >= 8) m.reason = Opt(nulls, "rejoin");
  return m;
}

Bytes JoinGroupRequestGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kJoinGroup, v);
  Golden g;
  g.s(f, "group-a").i32(30000);
  if (v >= 1) g.i32(60000);
  g.s(f, "member-1");
  if (v >= 5) NStr(g, f, Opt(nulls, "instance-1"));
  g.s(f, "consumer").a(f, 2);
  g.s(f, "range");
  Byt(g, f, {0, 1, 2});
  g.t(f).s(f, "roundrobin");
  Byt(g, f, {3, 4});
  g.t(f);
  if (v >= 8) NStr(g, f, Opt(nulls, "rejoin"));
  g.t(f);
  return g.take();
}

JoinGroupResponse JoinGroupResponseSample(int16_t v, bool nulls) {
  JoinGroupResponse m;
  if (v >= 2) m.throttle_time_ms = 5;
  m.error_code = ErrorCode::kMemberIdRequired;
  m.generation_id = 7;
  if (v >= 7) m.protocol_type = Opt(nulls, "consumer");
  m.protocol_name = Opt(nulls && v >= 7, "range");
  m.leader = "member-1";
  if (v >= 9) m.skip_assignment = true;
  m.member_id = "member-2";
  m.members = {{.member_id = "member-1", .metadata = {1, 2}},
               {.member_id = "member-2", .metadata = {3}}};
  if (v >= 5) {
    m.members[0].group_instance_id = Opt(nulls, "instance-1");
    m.members[1].group_instance_id = "instance-2";
  }
  return m;
}

Bytes JoinGroupResponseGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kJoinGroup, v);
  Golden g;
  if (v >= 2) g.i32(5);
  g.i16(79).i32(7);
  if (v >= 7) NStr(g, f, Opt(nulls, "consumer"));
  NStr(g, f, Opt(nulls && v >= 7, "range"));
  g.s(f, "member-1");
  if (v >= 9) g.boolean(true);
  g.s(f, "member-2").a(f, 2);
  g.s(f, "member-1");
  if (v >= 5) NStr(g, f, Opt(nulls, "instance-1"));
  Byt(g, f, {1, 2});
  g.t(f).s(f, "member-2");
  if (v >= 5) g.s(f, "instance-2");
  Byt(g, f, {3});
  g.t(f).t(f);
  return g.take();
}

// ------------------------------------------------------------------ SyncGroup

SyncGroupRequest SyncGroupRequestSample(int16_t v, bool nulls) {
  SyncGroupRequest m;
  m.group_id = "group-a";
  m.generation_id = 7;
  m.member_id = "member-1";
  if (v >= 3) m.group_instance_id = Opt(nulls, "instance-1");
  if (v >= 5) {
    m.protocol_type = Opt(nulls, "consumer");
    m.protocol_name = Opt(nulls, "range");
  }
  m.assignments = {{.member_id = "member-1", .assignment = {9, 8}},
                   {.member_id = "member-2", .assignment = {}}};
  return m;
}

Bytes SyncGroupRequestGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kSyncGroup, v);
  Golden g;
  g.s(f, "group-a").i32(7).s(f, "member-1");
  if (v >= 3) NStr(g, f, Opt(nulls, "instance-1"));
  if (v >= 5) {
    NStr(g, f, Opt(nulls, "consumer"));
    NStr(g, f, Opt(nulls, "range"));
  }
  g.a(f, 2).s(f, "member-1");
  Byt(g, f, {9, 8});
  g.t(f).s(f, "member-2");
  Byt(g, f, {});
  g.t(f).t(f);
  return g.take();
}

SyncGroupResponse SyncGroupResponseSample(int16_t v, bool nulls) {
  SyncGroupResponse m;
  if (v >= 1) m.throttle_time_ms = 11;
  m.error_code = ErrorCode::kRebalanceInProgress;
  if (v >= 5) {
    m.protocol_type = Opt(nulls, "consumer");
    m.protocol_name = Opt(nulls, "range");
  }
  m.assignment = {0, 1, 0, 0, 0, 1};
  return m;
}

Bytes SyncGroupResponseGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kSyncGroup, v);
  Golden g;
  if (v >= 1) g.i32(11);
  g.i16(27);
  if (v >= 5) {
    NStr(g, f, Opt(nulls, "consumer"));
    NStr(g, f, Opt(nulls, "range"));
  }
  Byt(g, f, {0, 1, 0, 0, 0, 1});
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ Heartbeat

HeartbeatRequest HeartbeatRequestSample(int16_t v, bool nulls) {
  HeartbeatRequest m;
  m.group_id = "group-a";
  m.generation_id = 7;
  m.member_id = "member-1";
  if (v >= 3) m.group_instance_id = Opt(nulls, "instance-1");
  return m;
}

Bytes HeartbeatRequestGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kHeartbeat, v);
  Golden g;
  g.s(f, "group-a").i32(7).s(f, "member-1");
  if (v >= 3) NStr(g, f, Opt(nulls, "instance-1"));
  g.t(f);
  return g.take();
}

HeartbeatResponse HeartbeatResponseSample(int16_t v, bool) {
  HeartbeatResponse m;
  if (v >= 1) m.throttle_time_ms = 12;
  m.error_code = ErrorCode::kRebalanceInProgress;
  return m;
}

Bytes HeartbeatResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kHeartbeat, v);
  Golden g;
  if (v >= 1) g.i32(12);
  g.i16(27).t(f);
  return g.take();
}

// ------------------------------------------------------------------ LeaveGroup

LeaveGroupRequest LeaveGroupRequestSample(int16_t v, bool nulls) {
  LeaveGroupRequest m;
  m.group_id = "group-a";
  if (v <= 2) m.member_id = "member-1";
  if (v >= 3) {
    m.members = {{.member_id = "member-1", .group_instance_id = Opt(nulls, "instance-1")},
                 {.member_id = "member-2", .group_instance_id = "instance-2"}};
    if (v >= 5) {
      m.members[0].reason = Opt(nulls, "shutdown");
      m.members[1].reason = "scale-in";
    }
  }
  return m;
}

Bytes LeaveGroupRequestGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kLeaveGroup, v);
  Golden g;
  g.s(f, "group-a");
  if (v <= 2) g.s(f, "member-1");
  if (v >= 3) {
    g.a(f, 2).s(f, "member-1");
    NStr(g, f, Opt(nulls, "instance-1"));
    if (v >= 5) NStr(g, f, Opt(nulls, "shutdown"));
    g.t(f).s(f, "member-2").s(f, "instance-2");
    if (v >= 5) g.s(f, "scale-in");
    g.t(f);
  }
  g.t(f);
  return g.take();
}

LeaveGroupResponse LeaveGroupResponseSample(int16_t v, bool nulls) {
  LeaveGroupResponse m;
  if (v >= 1) m.throttle_time_ms = 13;
  m.error_code = ErrorCode::kUnknownMemberId;
  if (v >= 3) {
    m.members = {{.member_id = "member-1",
                  .group_instance_id = Opt(nulls, "instance-1"),
                  .error_code = ErrorCode::kNone},
                 {.member_id = "member-2",
                  .group_instance_id = "instance-2",
                  .error_code = ErrorCode::kUnknownMemberId}};
  }
  return m;
}

Bytes LeaveGroupResponseGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kLeaveGroup, v);
  Golden g;
  if (v >= 1) g.i32(13);
  g.i16(25);
  if (v >= 3) {
    g.a(f, 2).s(f, "member-1");
    NStr(g, f, Opt(nulls, "instance-1"));
    g.i16(0).t(f);
    g.s(f, "member-2").s(f, "instance-2").i16(25).t(f);
  }
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ OffsetCommit

OffsetCommitRequest OffsetCommitRequestSample(int16_t v, bool nulls) {
  OffsetCommitRequest m;
  m.group_id = "group-a";
  if (v >= 1) {
    m.generation_id_or_member_epoch = 7;
    m.member_id = "member-1";
  }
  if (v >= 7) m.group_instance_id = Opt(nulls, "instance-1");
  if (v >= 2 && v <= 4) m.retention_time_ms = 86400000;
  for (const char* name : {"orders", "payments"}) {
    OffsetCommitRequest::Topic t{.name = name};
    for (int32_t p : {0, 5}) {
      OffsetCommitRequest::Partition part{.partition_index = p, .committed_offset = 1000 + p};
      if (v >= 6) part.committed_leader_epoch = 3;
      if (v == 1) part.commit_timestamp = 1700000000000;
      part.committed_metadata = Opt(nulls && p == 0, "meta");
      t.partitions.push_back(part);
    }
    m.topics.push_back(t);
  }
  return m;
}

Bytes OffsetCommitRequestGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kOffsetCommit, v);
  Golden g;
  g.s(f, "group-a");
  if (v >= 1) g.i32(7).s(f, "member-1");
  if (v >= 7) NStr(g, f, Opt(nulls, "instance-1"));
  if (v >= 2 && v <= 4) g.i64(86400000);
  g.a(f, 2);
  for (const char* name : {"orders", "payments"}) {
    g.s(f, name).a(f, 2);
    for (int p : {0, 5}) {
      g.i32(p).i64(1000 + p);
      if (v >= 6) g.i32(3);
      if (v == 1) g.i64(1700000000000);
      NStr(g, f, Opt(nulls && p == 0, "meta"));
      g.t(f);
    }
    g.t(f);
  }
  g.t(f);
  return g.take();
}

OffsetCommitResponse OffsetCommitResponseSample(int16_t v, bool) {
  OffsetCommitResponse m;
  if (v >= 3) m.throttle_time_ms = 14;
  m.topics = {
      {.name = "orders",
       .partitions = {{.partition_index = 0, .error_code = ErrorCode::kNone},
                      {.partition_index = 1, .error_code = ErrorCode::kOffsetMetadataTooLarge}}},
      {.name = "payments",
       .partitions = {{.partition_index = 2, .error_code = ErrorCode::kIllegalGeneration},
                      {.partition_index = 3, .error_code = ErrorCode::kUnknownTopicOrPartition}}}};
  return m;
}

Bytes OffsetCommitResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kOffsetCommit, v);
  Golden g;
  if (v >= 3) g.i32(14);
  g.a(f, 2);
  g.s(f, "orders").a(f, 2).i32(0).i16(0).t(f).i32(1).i16(12).t(f).t(f);
  g.s(f, "payments").a(f, 2).i32(2).i16(22).t(f).i32(3).i16(3).t(f).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ OffsetFetch

std::vector<OffsetFetchRequest::Topic> FetchTopics() {
  return {{.name = "orders", .partition_indexes = {0, 1}},
          {.name = "payments", .partition_indexes = {7, 8}}};
}

void FetchTopicsGolden(Golden& g, bool f) {
  g.a(f, 2);
  g.s(f, "orders").a(f, 2).i32(0).i32(1).t(f);
  g.s(f, "payments").a(f, 2).i32(7).i32(8).t(f);
}

OffsetFetchRequest OffsetFetchRequestSample(int16_t v, bool nulls) {
  OffsetFetchRequest m;
  if (v <= 7) {
    m.group_id = "group-a";
    if (nulls && v >= 2) {
      m.topics = std::nullopt;
    } else {
      m.topics = FetchTopics();
    }
  }
  if (v >= 8) {
    m.groups = {{.group_id = "group-a"}, {.group_id = "group-b"}};
    for (auto& grp : m.groups) {
      grp.topics = nulls ? std::nullopt : std::optional(FetchTopics());
    }
    if (v >= 9) {
      m.groups[0].member_id = Opt(nulls, "member-1");
      m.groups[0].member_epoch = 4;
      m.groups[1].member_id = "member-2";
      m.groups[1].member_epoch = 5;
    }
  }
  if (v >= 7) m.require_stable = true;
  return m;
}

Bytes OffsetFetchRequestGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kOffsetFetch, v);
  Golden g;
  if (v <= 7) {
    g.s(f, "group-a");
    if (nulls && v >= 2) {
      g.a(f, -1);
    } else {
      FetchTopicsGolden(g, f);
    }
  }
  if (v >= 8) {
    g.a(f, 2);
    g.s(f, "group-a");
    if (v >= 9) {
      NStr(g, f, Opt(nulls, "member-1"));
      g.i32(4);
    }
    if (nulls)
      g.a(f, -1);
    else
      FetchTopicsGolden(g, f);
    g.t(f);
    g.s(f, "group-b");
    if (v >= 9) g.s(f, "member-2").i32(5);
    if (nulls)
      g.a(f, -1);
    else
      FetchTopicsGolden(g, f);
    g.t(f);
  }
  if (v >= 7) g.boolean(true);
  g.t(f);
  return g.take();
}

std::vector<OffsetFetchResponse::Topic> FetchedTopics(int16_t v, bool nulls) {
  std::vector<OffsetFetchResponse::Topic> topics;
  for (const char* name : {"orders", "payments"}) {
    OffsetFetchResponse::Topic t{.name = name};
    for (int32_t p : {0, 1}) {
      OffsetFetchResponse::Partition part{.partition_index = p, .committed_offset = 500 + p};
      if (v >= 5) part.committed_leader_epoch = 9;
      part.metadata = Opt(nulls && p == 0, "meta");
      part.error_code = p == 0 ? ErrorCode::kNone : ErrorCode::kUnstableOffsetCommit;
      t.partitions.push_back(part);
    }
    topics.push_back(t);
  }
  return topics;
}

void FetchedTopicsGolden(Golden& g, bool f, int16_t v, bool nulls) {
  g.a(f, 2);
  for (const char* name : {"orders", "payments"}) {
    g.s(f, name).a(f, 2);
    for (int p : {0, 1}) {
      g.i32(p).i64(500 + p);
      if (v >= 5) g.i32(9);
      NStr(g, f, Opt(nulls && p == 0, "meta"));
      g.i16(p == 0 ? 0 : 88).t(f);
    }
    g.t(f);
  }
}

OffsetFetchResponse OffsetFetchResponseSample(int16_t v, bool nulls) {
  OffsetFetchResponse m;
  if (v >= 3) m.throttle_time_ms = 15;
  if (v <= 7) {
    m.topics = FetchedTopics(v, nulls);
    if (v >= 2) m.error_code = ErrorCode::kCoordinatorLoadInProgress;
  }
  if (v >= 8) {
    m.groups = {
        {.group_id = "group-a", .topics = FetchedTopics(v, nulls), .error_code = ErrorCode::kNone},
        {.group_id = "group-b", .topics = {}, .error_code = ErrorCode::kGroupIdNotFound}};
  }
  return m;
}

Bytes OffsetFetchResponseGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kOffsetFetch, v);
  Golden g;
  if (v >= 3) g.i32(15);
  if (v <= 7) {
    FetchedTopicsGolden(g, f, v, nulls);
    if (v >= 2) g.i16(14);
  }
  if (v >= 8) {
    g.a(f, 2).s(f, "group-a");
    FetchedTopicsGolden(g, f, v, nulls);
    g.i16(0).t(f);
    g.s(f, "group-b").a(f, 0).i16(69).t(f);
  }
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ ListGroups

ListGroupsRequest ListGroupsRequestSample(int16_t v, bool) {
  ListGroupsRequest m;
  if (v >= 4) m.states_filter = {"Stable", "Empty"};
  if (v >= 5) m.types_filter = {"classic", "consumer"};
  return m;
}

Bytes ListGroupsRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kListGroups, v);
  Golden g;
  if (v >= 4) g.a(f, 2).s(f, "Stable").s(f, "Empty");
  if (v >= 5) g.a(f, 2).s(f, "classic").s(f, "consumer");
  g.t(f);
  return g.take();
}

ListGroupsResponse ListGroupsResponseSample(int16_t v, bool) {
  ListGroupsResponse m;
  if (v >= 1) m.throttle_time_ms = 16;
  m.error_code = ErrorCode::kCoordinatorNotAvailable;
  m.groups = {{.group_id = "group-a", .protocol_type = "consumer"},
              {.group_id = "group-b", .protocol_type = ""}};
  if (v >= 4) {
    m.groups[0].group_state = "Stable";
    m.groups[1].group_state = "Empty";
  }
  if (v >= 5) {
    m.groups[0].group_type = "classic";
    m.groups[1].group_type = "consumer";
  }
  return m;
}

Bytes ListGroupsResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kListGroups, v);
  Golden g;
  if (v >= 1) g.i32(16);
  g.i16(15).a(f, 2);
  g.s(f, "group-a").s(f, "consumer");
  if (v >= 4) g.s(f, "Stable");
  if (v >= 5) g.s(f, "classic");
  g.t(f);
  g.s(f, "group-b").s(f, "");
  if (v >= 4) g.s(f, "Empty");
  if (v >= 5) g.s(f, "consumer");
  g.t(f).t(f);
  return g.take();
}

// ------------------------------------------------------------------ DescribeGroups

DescribeGroupsRequest DescribeGroupsRequestSample(int16_t v, bool) {
  DescribeGroupsRequest m;
  m.groups = {"group-a", "group-b"};
  if (v >= 3) m.include_authorized_operations = true;
  return m;
}

Bytes DescribeGroupsRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kDescribeGroups, v);
  Golden g;
  g.a(f, 2).s(f, "group-a").s(f, "group-b");
  if (v >= 3) g.boolean(true);
  g.t(f);
  return g.take();
}

DescribeGroupsResponse DescribeGroupsResponseSample(int16_t v, bool nulls) {
  DescribeGroupsResponse m;
  if (v >= 1) m.throttle_time_ms = 17;
  for (const char* id : {"group-a", "group-b"}) {
    DescribeGroupsResponse::Group grp{.error_code = ErrorCode::kGroupAuthorizationFailed,
                                      .group_id = id,
                                      .group_state = "Stable",
                                      .protocol_type = "consumer",
                                      .protocol_data = "range"};
    grp.members = {{.member_id = "member-1",
                    .client_id = "rdkafka",
                    .client_host = "/10.0.0.1",
                    .member_metadata = {1, 2},
                    .member_assignment = {3}},
                   {.member_id = "member-2",
                    .client_id = "java",
                    .client_host = "/10.0.0.2",
                    .member_metadata = {},
                    .member_assignment = {4, 5, 6}}};
    if (v >= 4) {
      grp.members[0].group_instance_id = Opt(nulls, "instance-1");
      grp.members[1].group_instance_id = "instance-2";
    }
    if (v >= 3) grp.authorized_operations = 0x0ff8;
    m.groups.push_back(grp);
  }
  return m;
}

Bytes DescribeGroupsResponseGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kDescribeGroups, v);
  Golden g;
  if (v >= 1) g.i32(17);
  g.a(f, 2);
  for (const char* id : {"group-a", "group-b"}) {
    g.i16(30).s(f, id).s(f, "Stable").s(f, "consumer").s(f, "range").a(f, 2);
    g.s(f, "member-1");
    if (v >= 4) NStr(g, f, Opt(nulls, "instance-1"));
    g.s(f, "rdkafka").s(f, "/10.0.0.1");
    Byt(g, f, {1, 2});
    Byt(g, f, {3});
    g.t(f).s(f, "member-2");
    if (v >= 4) g.s(f, "instance-2");
    g.s(f, "java").s(f, "/10.0.0.2");
    Byt(g, f, {});
    Byt(g, f, {4, 5, 6});
    g.t(f);
    if (v >= 3) g.i32(0x0ff8);
    g.t(f);
  }
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ DeleteGroups

DeleteGroupsRequest DeleteGroupsRequestSample(int16_t, bool) {
  DeleteGroupsRequest m;
  m.groups_names = {"group-a", "group-b"};
  return m;
}

Bytes DeleteGroupsRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kDeleteGroups, v);
  Golden g;
  g.a(f, 2).s(f, "group-a").s(f, "group-b").t(f);
  return g.take();
}

DeleteGroupsResponse DeleteGroupsResponseSample(int16_t, bool) {
  DeleteGroupsResponse m;
  m.throttle_time_ms = 18;
  m.results = {{.group_id = "group-a", .error_code = ErrorCode::kNone},
               {.group_id = "group-b", .error_code = ErrorCode::kNonEmptyGroup}};
  return m;
}

Bytes DeleteGroupsResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kDeleteGroups, v);
  Golden g;
  g.i32(18).a(f, 2).s(f, "group-a").i16(0).t(f).s(f, "group-b").i16(68).t(f).t(f);
  return g.take();
}

// ------------------------------------------------------------------ specs

#define GROUPS_SPEC(Name, Key) \
  const Spec<Name> k##Name##Spec { #Name, ApiKey::Key, &Name##Sample, &Name##Golden }

GROUPS_SPEC(FindCoordinatorRequest, kFindCoordinator);
GROUPS_SPEC(FindCoordinatorResponse, kFindCoordinator);
GROUPS_SPEC(JoinGroupRequest, kJoinGroup);
GROUPS_SPEC(JoinGroupResponse, kJoinGroup);
GROUPS_SPEC(SyncGroupRequest, kSyncGroup);
GROUPS_SPEC(SyncGroupResponse, kSyncGroup);
GROUPS_SPEC(HeartbeatRequest, kHeartbeat);
GROUPS_SPEC(HeartbeatResponse, kHeartbeat);
GROUPS_SPEC(LeaveGroupRequest, kLeaveGroup);
GROUPS_SPEC(LeaveGroupResponse, kLeaveGroup);
GROUPS_SPEC(OffsetCommitRequest, kOffsetCommit);
GROUPS_SPEC(OffsetCommitResponse, kOffsetCommit);
GROUPS_SPEC(OffsetFetchRequest, kOffsetFetch);
GROUPS_SPEC(OffsetFetchResponse, kOffsetFetch);
GROUPS_SPEC(ListGroupsRequest, kListGroups);
GROUPS_SPEC(ListGroupsResponse, kListGroups);
GROUPS_SPEC(DescribeGroupsRequest, kDescribeGroups);
GROUPS_SPEC(DescribeGroupsResponse, kDescribeGroups);
GROUPS_SPEC(DeleteGroupsRequest, kDeleteGroups);
GROUPS_SPEC(DeleteGroupsResponse, kDeleteGroups);
#undef GROUPS_SPEC

// ------------------------------------------------------------------ every version

TEST(GroupsCodecTest, FindCoordinatorRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kFindCoordinatorRequestSpec);
}
TEST(GroupsCodecTest, FindCoordinatorResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kFindCoordinatorResponseSpec);
}
TEST(GroupsCodecTest, JoinGroupRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kJoinGroupRequestSpec);
}
TEST(GroupsCodecTest, JoinGroupResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kJoinGroupResponseSpec);
}
TEST(GroupsCodecTest, SyncGroupRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kSyncGroupRequestSpec);
}
TEST(GroupsCodecTest, SyncGroupResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kSyncGroupResponseSpec);
}
TEST(GroupsCodecTest, HeartbeatRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kHeartbeatRequestSpec);
}
TEST(GroupsCodecTest, HeartbeatResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kHeartbeatResponseSpec);
}
TEST(GroupsCodecTest, LeaveGroupRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kLeaveGroupRequestSpec);
}
TEST(GroupsCodecTest, LeaveGroupResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kLeaveGroupResponseSpec);
}
TEST(GroupsCodecTest, OffsetCommitRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kOffsetCommitRequestSpec);
}
TEST(GroupsCodecTest, OffsetCommitResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kOffsetCommitResponseSpec);
}
TEST(GroupsCodecTest, OffsetFetchRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kOffsetFetchRequestSpec);
}
TEST(GroupsCodecTest, OffsetFetchResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kOffsetFetchResponseSpec);
}
TEST(GroupsCodecTest, ListGroupsRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kListGroupsRequestSpec);
}
TEST(GroupsCodecTest, ListGroupsResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kListGroupsResponseSpec);
}
TEST(GroupsCodecTest, DescribeGroupsRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDescribeGroupsRequestSpec);
}
TEST(GroupsCodecTest, DescribeGroupsResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDescribeGroupsResponseSpec);
}
TEST(GroupsCodecTest, DeleteGroupsRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDeleteGroupsRequestSpec);
}
TEST(GroupsCodecTest, DeleteGroupsResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDeleteGroupsResponseSpec);
}

// ------------------------------------------------------------------ version table

// Older librdkafka turns consumer groups off when a group API lacks version 0.
TEST(GroupsCodecTest, GroupApisAdvertiseVersionZeroUpToTheCodecsMaximum) {
  struct Want {
    ApiKey key;
    int16_t max;
    int16_t flexible_from;  // "flexibleVersions" in Kafka's JSON
  };
  for (Want want : {Want{ApiKey::kOffsetCommit, 9, 8}, Want{ApiKey::kOffsetFetch, 9, 6},
                    Want{ApiKey::kFindCoordinator, 5, 3}, Want{ApiKey::kJoinGroup, 9, 6},
                    Want{ApiKey::kHeartbeat, 4, 4}, Want{ApiKey::kLeaveGroup, 5, 4},
                    Want{ApiKey::kSyncGroup, 5, 4}, Want{ApiKey::kDescribeGroups, 5, 5},
                    Want{ApiKey::kListGroups, 5, 3}, Want{ApiKey::kDeleteGroups, 2, 2}}) {
    auto api = FindApi(want.key);
    ASSERT_TRUE(api.has_value()) << ApiName(want.key);
    EXPECT_EQ(api->min, 0) << ApiName(want.key);
    EXPECT_EQ(api->max, want.max) << ApiName(want.key);
    EXPECT_EQ(api->flexible_from, want.flexible_from) << ApiName(want.key);
  }
}

// ------------------------------------------------------------------ single behaviours

TEST(GroupsCodecTest, JoinGroupResponseNullProtocolNameIsWrittenEmptyBeforeV7) {
  JoinGroupResponse m;
  m.protocol_name = std::nullopt;
  Bytes want = Golden().i32(0).i16(0).i32(-1).str("").str("").str("").arr(0).take();
  EXPECT_EQ(EncodeAt(m, 5), want);  // throttle, error, generation, name, leader, member, members
  Bytes flexible =
      Golden().i32(0).i16(0).i32(-1).cnullstr().cnullstr().cstr("").cstr("").carr(0).tags().take();
  EXPECT_EQ(EncodeAt(m, 7), flexible);
}

TEST(GroupsCodecTest, JoinGroupResponseNullProtocolNameBeforeV7IsRejected) {
  Bytes bytes = Golden().i32(0).i16(0).i32(1).nullstr().str("l").str("m").arr(0).take();
  JoinGroupResponse m;
  Status st = DecodeAt(bytes, 5, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("protocol_name"), std::string::npos) << st.ToString();
}

TEST(GroupsCodecTest, OffsetFetchNullTopicsBeforeV2IsWrittenEmptyAndRejectedOnRead) {
  OffsetFetchRequest m;
  m.group_id = "g";
  m.topics = std::nullopt;
  EXPECT_EQ(EncodeAt(m, 1), Golden().str("g").arr(0).take());
  EXPECT_EQ(EncodeAt(m, 2), Golden().str("g").arr(-1).take());
  OffsetFetchRequest decoded;
  EXPECT_FALSE(DecodeAt(Golden().str("g").arr(-1).take(), 1, &decoded).ok());
  ASSERT_TRUE(DecodeAt(Golden().str("g").arr(-1).take(), 2, &decoded).ok());
  EXPECT_EQ(decoded.topics, std::nullopt);
}

TEST(GroupsCodecTest, FieldsAbsentFromTheVersionAreDroppedOnEncode) {
  // v0 has only key; key_type is non-ignorable in Kafka, which would throw.
  FindCoordinatorRequest m;
  m.key = "g";
  m.key_type = 1;
  m.coordinator_keys = {"x"};
  EXPECT_EQ(EncodeAt(m, 0), Golden().str("g").take());
}

TEST(GroupsCodecTest, DecodeResetsFieldsTheVersionLacksToDefaults) {
  JoinGroupRequest m = JoinGroupRequestSample(9, false);
  ASSERT_TRUE(DecodeAt(JoinGroupRequestGolden(0, false), 0, &m).ok());
  EXPECT_EQ(m.rebalance_timeout_ms, -1);
  EXPECT_EQ(m.group_instance_id, std::nullopt);
  EXPECT_EQ(m.reason, std::nullopt);
  EXPECT_EQ(m.protocols.size(), 2u);
}

TEST(GroupsCodecTest, UnknownTaggedFieldsAreKeptAndWrittenBack) {
  // SyncGroupRequest v5 with a tag in one assignment and two at the top level.
  Bytes bytes = Golden()
                    .cstr("g")
                    .i32(1)
                    .cstr("m")
                    .cnullstr()
                    .cstr("consumer")
                    .cstr("range")
                    .carr(1)
                    .cstr("m")
                    .cbytes({7})
                    .uvarint(1)
                    .uvarint(3)
                    .uvarint(2)
                    .i16(0x0102)  // tag 3, 2 bytes
                    .uvarint(2)
                    .uvarint(0)
                    .uvarint(0)
                    .uvarint(200)
                    .uvarint(1)
                    .i8(9)  // tags 0 and 200
                    .take();
  SyncGroupRequest m;
  Status st = DecodeAt(bytes, 5, &m);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(m.assignments.size(), 1u);
  ASSERT_EQ(m.assignments[0].unknown_tags.size(), 1u);
  EXPECT_EQ(m.assignments[0].unknown_tags[0], (RawTaggedField{3, {1, 2}}));
  ASSERT_EQ(m.unknown_tags.size(), 2u);
  EXPECT_EQ(m.unknown_tags[0], (RawTaggedField{0, {}}));
  EXPECT_EQ(m.unknown_tags[1], (RawTaggedField{200, {9}}));
  EXPECT_EQ(EncodeAt(m, 5), bytes);
}

TEST(GroupsCodecTest, DecodeErrorNamesMessageVersionAndField) {
  Bytes bytes = Golden().str("group").i32(1).take();  // member_id missing
  HeartbeatRequest m;
  Status st = DecodeAt(bytes, 2, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("HeartbeatRequest v2"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("member_id"), std::string::npos) << st.ToString();
}

TEST(GroupsMalformedTest, NegativeStringLengthIsRejected) {
  HeartbeatRequest m;
  EXPECT_FALSE(DecodeAt(Golden().i16(-2).take(), 0, &m).ok());
  // -1 is null, which group_id may not be.
  EXPECT_FALSE(DecodeAt(Golden().nullstr().i32(1).str("m").take(), 0, &m).ok());
  OffsetCommitRequest c;
  Bytes nested = Golden().str("g").arr(1).str("t").arr(1).i32(0).i64(5).i16(-7).take();
  EXPECT_FALSE(DecodeAt(nested, 0, &c).ok());
}

TEST(GroupsMalformedTest, NegativeArrayLengthIsRejected) {
  DeleteGroupsRequest m;
  EXPECT_FALSE(DecodeAt(Golden().arr(-2).take(), 0, &m).ok());
  EXPECT_FALSE(DecodeAt(Golden().arr(-1).take(), 0, &m).ok());  // null where not nullable
  DescribeGroupsResponse d;
  Bytes nested = Golden().i32(0).arr(1).i16(0).str("g").str("s").str("p").str("d").arr(-5).take();
  EXPECT_FALSE(DecodeAt(nested, 1, &d).ok());
}

TEST(GroupsMalformedTest, ArrayCountBeyondTheBytesLeftFailsBeforeAllocating) {
  DeleteGroupsRequest m;
  Status st = DecodeAt(Golden().arr(0x7fffffff).str("g").take(), 1, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  st = DecodeAt(Golden().carr(0x7ffffffe).cstr("g").tags().take(), 2, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  // Nested: one topic claiming a million partitions with 4 bytes left.
  OffsetCommitRequest c;
  Bytes nested =
      Golden().cstr("g").i32(1).cstr("m").cnullstr().carr(1).cstr("t").carr(1000000).i32(0).take();
  st = DecodeAt(nested, 8, &c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  // Partition indexes take 4 bytes each: 3 cannot fit in 8 bytes.
  OffsetFetchRequest f;
  st = DecodeAt(Golden().str("g").arr(1).str("t").arr(3).i32(0).i32(1).take(), 1, &f);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
}

TEST(GroupsMalformedTest, OverlongVarintInFlexibleVersionIsRejected) {
  const Bytes overlong = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  HeartbeatRequest h;
  EXPECT_FALSE(DecodeAt(Golden().raw(overlong).take(), 4, &h).ok());  // group_id length
  ListGroupsRequest l;
  EXPECT_FALSE(DecodeAt(Golden().raw(overlong).take(), 3, &l).ok());  // tagged-field count
  JoinGroupRequest j;
  Bytes in_array =
      Golden().cstr("g").i32(1).i32(2).cstr("m").cnullstr().cstr("consumer").raw(overlong).take();
  EXPECT_FALSE(DecodeAt(in_array, 6, &j).ok());  // protocols count
}

TEST(GroupsMalformedTest, TagsOutOfOrderAreRejected) {
  HeartbeatResponse m;
  Bytes bytes =
      Golden().i32(0).i16(0).uvarint(2).uvarint(5).uvarint(0).uvarint(1).uvarint(0).take();
  EXPECT_FALSE(DecodeAt(bytes, 4, &m).ok());
}

// ------------------------------------------------------------------ every golden, malformed

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  AddCases(&cases, kFindCoordinatorRequestSpec);
  AddCases(&cases, kFindCoordinatorResponseSpec);
  AddCases(&cases, kJoinGroupRequestSpec);
  AddCases(&cases, kJoinGroupResponseSpec);
  AddCases(&cases, kSyncGroupRequestSpec);
  AddCases(&cases, kSyncGroupResponseSpec);
  AddCases(&cases, kHeartbeatRequestSpec);
  AddCases(&cases, kHeartbeatResponseSpec);
  AddCases(&cases, kLeaveGroupRequestSpec);
  AddCases(&cases, kLeaveGroupResponseSpec);
  AddCases(&cases, kOffsetCommitRequestSpec);
  AddCases(&cases, kOffsetCommitResponseSpec);
  AddCases(&cases, kOffsetFetchRequestSpec);
  AddCases(&cases, kOffsetFetchResponseSpec);
  AddCases(&cases, kListGroupsRequestSpec);
  AddCases(&cases, kListGroupsResponseSpec);
  AddCases(&cases, kDescribeGroupsRequestSpec);
  AddCases(&cases, kDescribeGroupsResponseSpec);
  AddCases(&cases, kDeleteGroupsRequestSpec);
  AddCases(&cases, kDeleteGroupsResponseSpec);
  return cases;
}

class GroupsGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(GroupsGoldenTest, EveryStrictPrefixFailsToDecode) {
  ExpectEveryStrictPrefixFails(GetParam());
}

TEST_P(GroupsGoldenTest, TrailingBytesAreTolerated) { ExpectTrailingBytesTolerated(GetParam()); }

TEST_P(GroupsGoldenTest, CorruptedBytesNeverCrash) { DecodeEveryCorruption(GetParam()); }

INSTANTIATE_TEST_SUITE_P(AllGroupMessages, GroupsGoldenTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace groups_test
}  // namespace sluice::kafka
