// Codecs of the consumer-group APIs; field order and versions follow Kafka's JSON
// definitions (see groups.h for the rules every message here follows).
#include "kafka/protocol/messages/groups.h"

#include <fmt/format.h>

#include "kafka/protocol/messages/codec_util.h"

namespace sluice::kafka {
namespace {

// First flexible version of each API ("flexibleVersions" in the JSON).
constexpr int16_t kOffsetCommitFlexible = 8;
constexpr int16_t kOffsetFetchFlexible = 6;
constexpr int16_t kFindCoordinatorFlexible = 3;
constexpr int16_t kJoinGroupFlexible = 6;
constexpr int16_t kHeartbeatFlexible = 4;
constexpr int16_t kLeaveGroupFlexible = 4;
constexpr int16_t kSyncGroupFlexible = 4;
constexpr int16_t kDescribeGroupsFlexible = 5;
constexpr int16_t kListGroupsFlexible = 3;
constexpr int16_t kDeleteGroupsFlexible = 2;

using namespace codec;

}  // namespace

// ---------------------------------------------------------------- FindCoordinator

Status FindCoordinatorRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kFindCoordinatorFlexible;
  if (version <= 3) key = r.String(f, "key");
  if (version >= 1) key_type = r.Int8("key_type");
  if (version >= 4) ReadStrings(r, f, "coordinator_keys", &coordinator_keys);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "FindCoordinatorRequest", version);
}

void FindCoordinatorRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kFindCoordinatorFlexible;
  if (version <= 3) w.String(f, key);
  if (version >= 1) w.Int8(key_type);
  if (version >= 4) WriteStrings(w, f, coordinator_keys);
  WriteTags(w, f, unknown_tags);
}

Status FindCoordinatorResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kFindCoordinatorFlexible;
  if (version >= 1) throttle_time_ms = r.Int32("throttle_time_ms");
  if (version <= 3) {
    error_code = ReadErrorCode(r, "error_code");
    if (version >= 1) error_message = r.NullableString(f, "error_message");
    node_id = r.Int32("node_id");
    host = r.String(f, "host");
    port = r.Int32("port");
  }
  if (version >= 4) {
    ReadArray(r, f, "coordinators", 3 * MinString(f) + 10 + MinTags(f), &coordinators,
              [&](Coordinator& c) {
                c.key = r.String(f, "coordinators.key");
                c.node_id = r.Int32("coordinators.node_id");
                c.host = r.String(f, "coordinators.host");
                c.port = r.Int32("coordinators.port");
                c.error_code = ReadErrorCode(r, "coordinators.error_code");
                c.error_message = r.NullableString(f, "coordinators.error_message");
                ReadTags(r, f, &c.unknown_tags);
              });
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "FindCoordinatorResponse", version);
}

void FindCoordinatorResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kFindCoordinatorFlexible;
  if (version >= 1) w.Int32(throttle_time_ms);
  if (version <= 3) {
    WriteErrorCode(w, error_code);
    if (version >= 1) w.NullableString(f, error_message);
    w.Int32(node_id);
    w.String(f, host);
    w.Int32(port);
  }
  if (version >= 4) {
    WriteArray(w, f, coordinators, [&](const Coordinator& c) {
      w.String(f, c.key);
      w.Int32(c.node_id);
      w.String(f, c.host);
      w.Int32(c.port);
      WriteErrorCode(w, c.error_code);
      w.NullableString(f, c.error_message);
      WriteTags(w, f, c.unknown_tags);
    });
  }
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- JoinGroup

Status JoinGroupRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kJoinGroupFlexible;
  group_id = r.String(f, "group_id");
  session_timeout_ms = r.Int32("session_timeout_ms");
  if (version >= 1) rebalance_timeout_ms = r.Int32("rebalance_timeout_ms");
  member_id = r.String(f, "member_id");
  if (version >= 5) group_instance_id = r.NullableString(f, "group_instance_id");
  protocol_type = r.String(f, "protocol_type");
  ReadArray(r, f, "protocols", MinString(f) + MinBytes(f) + MinTags(f), &protocols,
            [&](Protocol& p) {
              p.name = r.String(f, "protocols.name");
              p.metadata = r.Bytes(f, "protocols.metadata");
              ReadTags(r, f, &p.unknown_tags);
            });
  if (version >= 8) reason = r.NullableString(f, "reason");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "JoinGroupRequest", version);
}

void JoinGroupRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kJoinGroupFlexible;
  w.String(f, group_id);
  w.Int32(session_timeout_ms);
  if (version >= 1) w.Int32(rebalance_timeout_ms);
  w.String(f, member_id);
  if (version >= 5) w.NullableString(f, group_instance_id);
  w.String(f, protocol_type);
  WriteArray(w, f, protocols, [&](const Protocol& p) {
    w.String(f, p.name);
    w.Bytes(f, p.metadata);
    WriteTags(w, f, p.unknown_tags);
  });
  if (version >= 8) w.NullableString(f, reason);
  WriteTags(w, f, unknown_tags);
}

Status JoinGroupResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kJoinGroupFlexible;
  if (version >= 2) throttle_time_ms = r.Int32("throttle_time_ms");
  error_code = ReadErrorCode(r, "error_code");
  generation_id = r.Int32("generation_id");
  if (version >= 7) {
    protocol_type = r.NullableString(f, "protocol_type");
    protocol_name = r.NullableString(f, "protocol_name");
  } else {
    protocol_name = r.String(f, "protocol_name");
  }
  leader = r.String(f, "leader");
  if (version >= 9) skip_assignment = r.Bool("skip_assignment");
  member_id = r.String(f, "member_id");
  ReadArray(r, f, "members", MinString(f) + MinBytes(f) + MinTags(f), &members, [&](Member& m) {
    m.member_id = r.String(f, "members.member_id");
    if (version >= 5) m.group_instance_id = r.NullableString(f, "members.group_instance_id");
    m.metadata = r.Bytes(f, "members.metadata");
    ReadTags(r, f, &m.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "JoinGroupResponse", version);
}

void JoinGroupResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kJoinGroupFlexible;
  if (version >= 2) w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  w.Int32(generation_id);
  if (version >= 7) {
    w.NullableString(f, protocol_type);
    w.NullableString(f, protocol_name);
  } else {
    w.String(f, protocol_name.value_or(std::string()));
  }
  w.String(f, leader);
  if (version >= 9) w.Bool(skip_assignment);
  w.String(f, member_id);
  WriteArray(w, f, members, [&](const Member& m) {
    w.String(f, m.member_id);
    if (version >= 5) w.NullableString(f, m.group_instance_id);
    w.Bytes(f, m.metadata);
    WriteTags(w, f, m.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- SyncGroup

Status SyncGroupRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kSyncGroupFlexible;
  group_id = r.String(f, "group_id");
  generation_id = r.Int32("generation_id");
  member_id = r.String(f, "member_id");
  if (version >= 3) group_instance_id = r.NullableString(f, "group_instance_id");
  if (version >= 5) {
    protocol_type = r.NullableString(f, "protocol_type");
    protocol_name = r.NullableString(f, "protocol_name");
  }
  ReadArray(r, f, "assignments", MinString(f) + MinBytes(f) + MinTags(f), &assignments,
            [&](Assignment& a) {
              a.member_id = r.String(f, "assignments.member_id");
              a.assignment = r.Bytes(f, "assignments.assignment");
              ReadTags(r, f, &a.unknown_tags);
            });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "SyncGroupRequest", version);
}

void SyncGroupRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kSyncGroupFlexible;
  w.String(f, group_id);
  w.Int32(generation_id);
  w.String(f, member_id);
  if (version >= 3) w.NullableString(f, group_instance_id);
  if (version >= 5) {
    w.NullableString(f, protocol_type);
    w.NullableString(f, protocol_name);
  }
  WriteArray(w, f, assignments, [&](const Assignment& a) {
    w.String(f, a.member_id);
    w.Bytes(f, a.assignment);
    WriteTags(w, f, a.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status SyncGroupResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kSyncGroupFlexible;
  if (version >= 1) throttle_time_ms = r.Int32("throttle_time_ms");
  error_code = ReadErrorCode(r, "error_code");
  if (version >= 5) {
    protocol_type = r.NullableString(f, "protocol_type");
    protocol_name = r.NullableString(f, "protocol_name");
  }
  assignment = r.Bytes(f, "assignment");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "SyncGroupResponse", version);
}

void SyncGroupResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kSyncGroupFlexible;
  if (version >= 1) w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  if (version >= 5) {
    w.NullableString(f, protocol_type);
    w.NullableString(f, protocol_name);
  }
  w.Bytes(f, assignment);
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- Heartbeat

Status HeartbeatRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kHeartbeatFlexible;
  group_id = r.String(f, "group_id");
  generation_id = r.Int32("generation_id");
  member_id = r.String(f, "member_id");
  if (version >= 3) group_instance_id = r.NullableString(f, "group_instance_id");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "HeartbeatRequest", version);
}

void HeartbeatRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kHeartbeatFlexible;
  w.String(f, group_id);
  w.Int32(generation_id);
  w.String(f, member_id);
  if (version >= 3) w.NullableString(f, group_instance_id);
  WriteTags(w, f, unknown_tags);
}

Status HeartbeatResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kHeartbeatFlexible;
  if (version >= 1) throttle_time_ms = r.Int32("throttle_time_ms");
  error_code = ReadErrorCode(r, "error_code");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "HeartbeatResponse", version);
}

void HeartbeatResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kHeartbeatFlexible;
  if (version >= 1) w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- LeaveGroup

Status LeaveGroupRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kLeaveGroupFlexible;
  group_id = r.String(f, "group_id");
  if (version <= 2) member_id = r.String(f, "member_id");
  if (version >= 3) {
    ReadArray(r, f, "members", 2 * MinString(f) + MinTags(f), &members, [&](Member& m) {
      m.member_id = r.String(f, "members.member_id");
      m.group_instance_id = r.NullableString(f, "members.group_instance_id");
      if (version >= 5) m.reason = r.NullableString(f, "members.reason");
      ReadTags(r, f, &m.unknown_tags);
    });
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "LeaveGroupRequest", version);
}

void LeaveGroupRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kLeaveGroupFlexible;
  w.String(f, group_id);
  if (version <= 2) w.String(f, member_id);
  if (version >= 3) {
    WriteArray(w, f, members, [&](const Member& m) {
      w.String(f, m.member_id);
      w.NullableString(f, m.group_instance_id);
      if (version >= 5) w.NullableString(f, m.reason);
      WriteTags(w, f, m.unknown_tags);
    });
  }
  WriteTags(w, f, unknown_tags);
}

Status LeaveGroupResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kLeaveGroupFlexible;
  if (version >= 1) throttle_time_ms = r.Int32("throttle_time_ms");
  error_code = ReadErrorCode(r, "error_code");
  if (version >= 3) {
    ReadArray(r, f, "members", 2 * MinString(f) + 2 + MinTags(f), &members, [&](Member& m) {
      m.member_id = r.String(f, "members.member_id");
      m.group_instance_id = r.NullableString(f, "members.group_instance_id");
      m.error_code = ReadErrorCode(r, "members.error_code");
      ReadTags(r, f, &m.unknown_tags);
    });
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "LeaveGroupResponse", version);
}

void LeaveGroupResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kLeaveGroupFlexible;
  if (version >= 1) w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  if (version >= 3) {
    WriteArray(w, f, members, [&](const Member& m) {
      w.String(f, m.member_id);
      w.NullableString(f, m.group_instance_id);
      WriteErrorCode(w, m.error_code);
      WriteTags(w, f, m.unknown_tags);
    });
  }
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- OffsetCommit

Status OffsetCommitRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kOffsetCommitFlexible;
  group_id = r.String(f, "group_id");
  if (version >= 1) {
    generation_id_or_member_epoch = r.Int32("generation_id_or_member_epoch");
    member_id = r.String(f, "member_id");
  }
  if (version >= 7) group_instance_id = r.NullableString(f, "group_instance_id");
  if (version >= 2 && version <= 4) retention_time_ms = r.Int64("retention_time_ms");
  ReadArray(r, f, "topics", MinString(f) + MinArray(f) + MinTags(f), &topics, [&](Topic& t) {
    t.name = r.String(f, "topics.name");
    ReadArray(r, f, "partitions", 12 + MinString(f) + MinTags(f), &t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partitions.partition_index");
      p.committed_offset = r.Int64("partitions.committed_offset");
      if (version >= 6) p.committed_leader_epoch = r.Int32("partitions.committed_leader_epoch");
      if (version == 1) p.commit_timestamp = r.Int64("partitions.commit_timestamp");
      p.committed_metadata = r.NullableString(f, "partitions.committed_metadata");
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "OffsetCommitRequest", version);
}

void OffsetCommitRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kOffsetCommitFlexible;
  w.String(f, group_id);
  if (version >= 1) {
    w.Int32(generation_id_or_member_epoch);
    w.String(f, member_id);
  }
  if (version >= 7) w.NullableString(f, group_instance_id);
  if (version >= 2 && version <= 4) w.Int64(retention_time_ms);
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      w.Int64(p.committed_offset);
      if (version >= 6) w.Int32(p.committed_leader_epoch);
      if (version == 1) w.Int64(p.commit_timestamp);
      w.NullableString(f, p.committed_metadata);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status OffsetCommitResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kOffsetCommitFlexible;
  if (version >= 3) throttle_time_ms = r.Int32("throttle_time_ms");
  ReadArray(r, f, "topics", MinString(f) + MinArray(f) + MinTags(f), &topics, [&](Topic& t) {
    t.name = r.String(f, "topics.name");
    ReadArray(r, f, "partitions", 6 + MinTags(f), &t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partitions.partition_index");
      p.error_code = ReadErrorCode(r, "partitions.error_code");
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "OffsetCommitResponse", version);
}

void OffsetCommitResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kOffsetCommitFlexible;
  if (version >= 3) w.Int32(throttle_time_ms);
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      WriteErrorCode(w, p.error_code);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- OffsetFetch

namespace {

void ReadFetchTopic(Reader& r, bool f, OffsetFetchRequest::Topic& t) {
  t.name = r.String(f, "topics.name");
  ReadArray(r, f, "topics.partition_indexes", 4, &t.partition_indexes,
            [&](int32_t& p) { p = r.Int32("topics.partition_indexes"); });
  ReadTags(r, f, &t.unknown_tags);
}

void WriteFetchTopic(Writer& w, bool f, const OffsetFetchRequest::Topic& t) {
  w.String(f, t.name);
  WriteArray(w, f, t.partition_indexes, [&](int32_t p) { w.Int32(p); });
  WriteTags(w, f, t.unknown_tags);
}

size_t FetchTopicMin(bool f) { return MinString(f) + MinArray(f) + MinTags(f); }

// Topics of OffsetFetchResponse: the same layout in v0-7 (top level) and v8+ (per group).
void ReadFetchedTopic(Reader& r, bool f, int16_t version, OffsetFetchResponse::Topic& t) {
  t.name = r.String(f, "topics.name");
  ReadArray(r, f, "partitions", 14 + MinString(f) + MinTags(f), &t.partitions,
            [&](OffsetFetchResponse::Partition& p) {
              p.partition_index = r.Int32("partitions.partition_index");
              p.committed_offset = r.Int64("partitions.committed_offset");
              if (version >= 5)
                p.committed_leader_epoch = r.Int32("partitions.committed_leader_epoch");
              p.metadata = r.NullableString(f, "partitions.metadata");
              p.error_code = ReadErrorCode(r, "partitions.error_code");
              ReadTags(r, f, &p.unknown_tags);
            });
  ReadTags(r, f, &t.unknown_tags);
}

void WriteFetchedTopic(Writer& w, bool f, int16_t version, const OffsetFetchResponse::Topic& t) {
  w.String(f, t.name);
  WriteArray(w, f, t.partitions, [&](const OffsetFetchResponse::Partition& p) {
    w.Int32(p.partition_index);
    w.Int64(p.committed_offset);
    if (version >= 5) w.Int32(p.committed_leader_epoch);
    w.NullableString(f, p.metadata);
    WriteErrorCode(w, p.error_code);
    WriteTags(w, f, p.unknown_tags);
  });
  WriteTags(w, f, t.unknown_tags);
}

}  // namespace

Status OffsetFetchRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kOffsetFetchFlexible;
  if (version <= 7) {
    group_id = r.String(f, "group_id");
    ReadNullableArray(r, f, "topics", FetchTopicMin(f), &topics,
                      [&](Topic& t) { ReadFetchTopic(r, f, t); });
    if (version < 2 && !topics && r.ok()) r.Fail("topics", "null before v2");
  }
  if (version >= 8) {
    ReadArray(r, f, "groups", MinString(f) + MinArray(f) + MinTags(f), &groups, [&](Group& g) {
      g.group_id = r.String(f, "groups.group_id");
      if (version >= 9) {
        g.member_id = r.NullableString(f, "groups.member_id");
        g.member_epoch = r.Int32("groups.member_epoch");
      }
      ReadNullableArray(r, f, "groups.topics", FetchTopicMin(f), &g.topics,
                        [&](Topic& t) { ReadFetchTopic(r, f, t); });
      ReadTags(r, f, &g.unknown_tags);
    });
  }
  if (version >= 7) require_stable = r.Bool("require_stable");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "OffsetFetchRequest", version);
}

void OffsetFetchRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kOffsetFetchFlexible;
  if (version <= 7) {
    w.String(f, group_id);
    if (topics) {
      WriteArray(w, f, *topics, [&](const Topic& t) { WriteFetchTopic(w, f, t); });
    } else {
      w.ArrayLength(f, version >= 2 ? -1 : 0);  // v0-1 cannot say "all topics"
    }
  }
  if (version >= 8) {
    WriteArray(w, f, groups, [&](const Group& g) {
      w.String(f, g.group_id);
      if (version >= 9) {
        w.NullableString(f, g.member_id);
        w.Int32(g.member_epoch);
      }
      if (g.topics) {
        WriteArray(w, f, *g.topics, [&](const Topic& t) { WriteFetchTopic(w, f, t); });
      } else {
        w.ArrayLength(f, -1);
      }
      WriteTags(w, f, g.unknown_tags);
    });
  }
  if (version >= 7) w.Bool(require_stable);
  WriteTags(w, f, unknown_tags);
}

Status OffsetFetchResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kOffsetFetchFlexible;
  if (version >= 3) throttle_time_ms = r.Int32("throttle_time_ms");
  if (version <= 7) {
    ReadArray(r, f, "topics", MinString(f) + MinArray(f) + MinTags(f), &topics,
              [&](Topic& t) { ReadFetchedTopic(r, f, version, t); });
    if (version >= 2) error_code = ReadErrorCode(r, "error_code");
  }
  if (version >= 8) {
    ReadArray(r, f, "groups", MinString(f) + MinArray(f) + 2 + MinTags(f), &groups, [&](Group& g) {
      g.group_id = r.String(f, "groups.group_id");
      ReadArray(r, f, "groups.topics", MinString(f) + MinArray(f) + MinTags(f), &g.topics,
                [&](Topic& t) { ReadFetchedTopic(r, f, version, t); });
      g.error_code = ReadErrorCode(r, "groups.error_code");
      ReadTags(r, f, &g.unknown_tags);
    });
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "OffsetFetchResponse", version);
}

void OffsetFetchResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kOffsetFetchFlexible;
  if (version >= 3) w.Int32(throttle_time_ms);
  if (version <= 7) {
    WriteArray(w, f, topics, [&](const Topic& t) { WriteFetchedTopic(w, f, version, t); });
    if (version >= 2) WriteErrorCode(w, error_code);
  }
  if (version >= 8) {
    WriteArray(w, f, groups, [&](const Group& g) {
      w.String(f, g.group_id);
      WriteArray(w, f, g.topics, [&](const Topic& t) { WriteFetchedTopic(w, f, version, t); });
      WriteErrorCode(w, g.error_code);
      WriteTags(w, f, g.unknown_tags);
    });
  }
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- ListGroups

Status ListGroupsRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kListGroupsFlexible;
  if (version >= 4) ReadStrings(r, f, "states_filter", &states_filter);
  if (version >= 5) ReadStrings(r, f, "types_filter", &types_filter);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "ListGroupsRequest", version);
}

void ListGroupsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kListGroupsFlexible;
  if (version >= 4) WriteStrings(w, f, states_filter);
  if (version >= 5) WriteStrings(w, f, types_filter);
  WriteTags(w, f, unknown_tags);
}

Status ListGroupsResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kListGroupsFlexible;
  if (version >= 1) throttle_time_ms = r.Int32("throttle_time_ms");
  error_code = ReadErrorCode(r, "error_code");
  ReadArray(r, f, "groups", 2 * MinString(f) + MinTags(f), &groups, [&](Group& g) {
    g.group_id = r.String(f, "groups.group_id");
    g.protocol_type = r.String(f, "groups.protocol_type");
    if (version >= 4) g.group_state = r.String(f, "groups.group_state");
    if (version >= 5) g.group_type = r.String(f, "groups.group_type");
    ReadTags(r, f, &g.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "ListGroupsResponse", version);
}

void ListGroupsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kListGroupsFlexible;
  if (version >= 1) w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  WriteArray(w, f, groups, [&](const Group& g) {
    w.String(f, g.group_id);
    w.String(f, g.protocol_type);
    if (version >= 4) w.String(f, g.group_state);
    if (version >= 5) w.String(f, g.group_type);
    WriteTags(w, f, g.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DescribeGroups

Status DescribeGroupsRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kDescribeGroupsFlexible;
  ReadStrings(r, f, "groups", &groups);
  if (version >= 3) include_authorized_operations = r.Bool("include_authorized_operations");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "DescribeGroupsRequest", version);
}

void DescribeGroupsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeGroupsFlexible;
  WriteStrings(w, f, groups);
  if (version >= 3) w.Bool(include_authorized_operations);
  WriteTags(w, f, unknown_tags);
}

Status DescribeGroupsResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kDescribeGroupsFlexible;
  if (version >= 1) throttle_time_ms = r.Int32("throttle_time_ms");
  ReadArray(r, f, "groups", 2 + 4 * MinString(f) + MinArray(f) + MinTags(f), &groups,
            [&](Group& g) {
              g.error_code = ReadErrorCode(r, "groups.error_code");
              g.group_id = r.String(f, "groups.group_id");
              g.group_state = r.String(f, "groups.group_state");
              g.protocol_type = r.String(f, "groups.protocol_type");
              g.protocol_data = r.String(f, "groups.protocol_data");
              ReadArray(r, f, "members", 3 * MinString(f) + 2 * MinBytes(f) + MinTags(f),
                        &g.members, [&](Member& m) {
                          m.member_id = r.String(f, "members.member_id");
                          if (version >= 4)
                            m.group_instance_id = r.NullableString(f, "members.group_instance_id");
                          m.client_id = r.String(f, "members.client_id");
                          m.client_host = r.String(f, "members.client_host");
                          m.member_metadata = r.Bytes(f, "members.member_metadata");
                          m.member_assignment = r.Bytes(f, "members.member_assignment");
                          ReadTags(r, f, &m.unknown_tags);
                        });
              if (version >= 3) g.authorized_operations = r.Int32("groups.authorized_operations");
              ReadTags(r, f, &g.unknown_tags);
            });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "DescribeGroupsResponse", version);
}

void DescribeGroupsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeGroupsFlexible;
  if (version >= 1) w.Int32(throttle_time_ms);
  WriteArray(w, f, groups, [&](const Group& g) {
    WriteErrorCode(w, g.error_code);
    w.String(f, g.group_id);
    w.String(f, g.group_state);
    w.String(f, g.protocol_type);
    w.String(f, g.protocol_data);
    WriteArray(w, f, g.members, [&](const Member& m) {
      w.String(f, m.member_id);
      if (version >= 4) w.NullableString(f, m.group_instance_id);
      w.String(f, m.client_id);
      w.String(f, m.client_host);
      w.Bytes(f, m.member_metadata);
      w.Bytes(f, m.member_assignment);
      WriteTags(w, f, m.unknown_tags);
    });
    if (version >= 3) w.Int32(g.authorized_operations);
    WriteTags(w, f, g.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DeleteGroups

Status DeleteGroupsRequest::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kDeleteGroupsFlexible;
  ReadStrings(r, f, "groups_names", &groups_names);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "DeleteGroupsRequest", version);
}

void DeleteGroupsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteGroupsFlexible;
  WriteStrings(w, f, groups_names);
  WriteTags(w, f, unknown_tags);
}

Status DeleteGroupsResponse::Decode(Reader& r, int16_t version) {
  *this = {};
  const bool f = version >= kDeleteGroupsFlexible;
  throttle_time_ms = r.Int32("throttle_time_ms");
  ReadArray(r, f, "results", MinString(f) + 2 + MinTags(f), &results, [&](GroupResult& g) {
    g.group_id = r.String(f, "results.group_id");
    g.error_code = ReadErrorCode(r, "results.error_code");
    ReadTags(r, f, &g.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, "DeleteGroupsResponse", version);
}

void DeleteGroupsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteGroupsFlexible;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, results, [&](const GroupResult& g) {
    w.String(f, g.group_id);
    WriteErrorCode(w, g.error_code);
    WriteTags(w, f, g.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

}  // namespace sluice::kafka
