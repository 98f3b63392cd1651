// The consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, ListGroups, DescribeGroups and DeleteGroups, requests and
// responses, in the versions sluice advertises (api.cc). Written by hand against Kafka's
// JSON message definitions; the comment on each struct gives its versions and the first
// flexible one, and each field's comment the versions it has when not all of them.
//
// Common rules for every message here:
//  - Decode(r, version) reads the body that follows the header and returns OK or an
//    InvalidArgument naming the message, version, field and byte. It reads only what
//    the version has; fields the version lacks keep their defaults.
//  - Encode(w, version) writes the fields the version has. Values set in fields the
//    version lacks are dropped silently, also for fields Kafka marks non-ignorable (its
//    generated code throws there): the broker fills what the client's version can carry.
//  - Defaults are the JSON "default"s. Where the JSON gives none, numbers are 0, arrays
//    empty and nullable strings null (Kafka's generated code would use "").
//  - None of these messages defines tagged fields; in flexible versions the tags read at
//    the end of each struct are kept in unknown_tags and written back after known ones.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

// FindCoordinator (key 10), v0-5, flexible from v3. v4+ batches keys.
struct FindCoordinatorRequest {
  std::string key;                            // v0-3
  int8_t key_type = 0;                        // v1+: 0 group, 1 transaction
  std::vector<std::string> coordinator_keys;  // v4+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const FindCoordinatorRequest&) const = default;
};

struct FindCoordinatorResponse {
  struct Coordinator {
    std::string key;
    int32_t node_id = 0;
    std::string host;
    int32_t port = 0;
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Coordinator&) const = default;
  };
  int32_t throttle_time_ms = 0;              // v1+
  ErrorCode error_code = ErrorCode::kNone;   // v0-3
  std::optional<std::string> error_message;  // v1-3
  int32_t node_id = 0;                       // v0-3
  std::string host;                          // v0-3
  int32_t port = 0;                          // v0-3
  std::vector<Coordinator> coordinators;     // v4+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const FindCoordinatorResponse&) const = default;
};

// JoinGroup (key 11), v0-9, flexible from v6.
struct JoinGroupRequest {
  struct Protocol {
    std::string name;
    std::vector<uint8_t> metadata;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Protocol&) const = default;
  };
  std::string group_id;
  int32_t session_timeout_ms = 0;
  int32_t rebalance_timeout_ms = -1;  // v1+; v0 means "use session_timeout_ms"
  std::string member_id;
  std::optional<std::string> group_instance_id;  // v5+
  std::string protocol_type;
  std::vector<Protocol> protocols;
  std::optional<std::string> reason;  // v8+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const JoinGroupRequest&) const = default;
};

struct JoinGroupResponse {
  struct Member {
    std::string member_id;
    std::optional<std::string> group_instance_id;  // v5+
    std::vector<uint8_t> metadata;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Member&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v2+
  ErrorCode error_code = ErrorCode::kNone;
  int32_t generation_id = -1;
  std::optional<std::string> protocol_type;  // v7+
  // Nullable from v7; before v7 a null is written as "" (as Kafka's JoinGroupResponse
  // does for error responses) and a null on the wire is an error.
  std::optional<std::string> protocol_name;
  std::string leader;
  bool skip_assignment = false;  // v9+
  std::string member_id;
  std::vector<Member> members;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const JoinGroupResponse&) const = default;
};

// SyncGroup (key 14), v0-5, flexible from v4.
struct SyncGroupRequest {
  struct Assignment {
    std::string member_id;
    std::vector<uint8_t> assignment;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Assignment&) const = default;
  };
  std::string group_id;
  int32_t generation_id = 0;
  std::string member_id;
  std::optional<std::string> group_instance_id;  // v3+
  std::optional<std::string> protocol_type;      // v5+
  std::optional<std::string> protocol_name;      // v5+
  std::vector<Assignment> assignments;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const SyncGroupRequest&) const = default;
};

struct SyncGroupResponse {
  int32_t throttle_time_ms = 0;  // v1+
  ErrorCode error_code = ErrorCode::kNone;
  std::optional<std::string> protocol_type;  // v5+
  std::optional<std::string> protocol_name;  // v5+
  std::vector<uint8_t> assignment;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const SyncGroupResponse&) const = default;
};

// Heartbeat (key 12), v0-4, flexible from v4.
struct HeartbeatRequest {
  std::string group_id;
  int32_t generation_id = 0;
  std::string member_id;
  std::optional<std::string> group_instance_id;  // v3+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const HeartbeatRequest&) const = default;
};

struct HeartbeatResponse {
  int32_t throttle_time_ms = 0;  // v1+
  ErrorCode error_code = ErrorCode::kNone;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const HeartbeatResponse&) const = default;
};

// LeaveGroup (key 13), v0-5, flexible from v4. v3+ leaves a batch of members.
struct LeaveGroupRequest {
  struct Member {
    std::string member_id;
    std::optional<std::string> group_instance_id;
    std::optional<std::string> reason;  // v5+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Member&) const = default;
  };
  std::string group_id;
  std::string member_id;        // v0-2
  std::vector<Member> members;  // v3+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const LeaveGroupRequest&) const = default;
};

struct LeaveGroupResponse {
  struct Member {
    std::string member_id;
    std::optional<std::string> group_instance_id;
    ErrorCode error_code = ErrorCode::kNone;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Member&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v1+
  ErrorCode error_code = ErrorCode::kNone;
  std::vector<Member> members;  // v3+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const LeaveGroupResponse&) const = default;
};

// OffsetCommit (key 8), v0-9, flexible from v8.
struct OffsetCommitRequest {
  struct Partition {
    int32_t partition_index = 0;
    int64_t committed_offset = 0;
    int32_t committed_leader_epoch = -1;  // v6+
    int64_t commit_timestamp = -1;        // v1 only
    std::optional<std::string> committed_metadata;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string name;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  std::string group_id;
  int32_t generation_id_or_member_epoch = -1;    // v1+
  std::string member_id;                         // v1+
  std::optional<std::string> group_instance_id;  // v7+
  int64_t retention_time_ms = -1;                // v2-4
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const OffsetCommitRequest&) const = default;
};

struct OffsetCommitResponse {
  struct Partition {
    int32_t partition_index = 0;
    ErrorCode error_code = ErrorCode::kNone;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string name;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v3+
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const OffsetCommitResponse&) const = default;
};

// OffsetFetch (key 9), v0-9, flexible from v6. v0-7 fetch one group, v8+ several.
struct OffsetFetchRequest {
  // One struct for both OffsetFetchRequestTopic (v0-7) and ...Topics (v8+): same fields.
  struct Topic {
    std::string name;
    std::vector<int32_t> partition_indexes;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  struct Group {
    std::string group_id;
    std::optional<std::string> member_id;                             // v9+
    int32_t member_epoch = -1;                                        // v9+
    std::optional<std::vector<Topic>> topics = std::vector<Topic>{};  // null: all topics
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Group&) const = default;
  };
  std::string group_id;  // v0-7
  // v0-7; null (all topics) from v2. A null written at v0-1 goes out as an empty array.
  std::optional<std::vector<Topic>> topics = std::vector<Topic>{};
  std::vector<Group> groups;    // v8+
  bool require_stable = false;  // v7+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const OffsetFetchRequest&) const = default;
};

struct OffsetFetchResponse {
  // One struct for ...ResponsePartition (v0-7) and ...ResponsePartitions (v8+).
  struct Partition {
    int32_t partition_index = 0;
    int64_t committed_offset = 0;
    int32_t committed_leader_epoch = -1;  // v5+
    std::optional<std::string> metadata;
    ErrorCode error_code = ErrorCode::kNone;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string name;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  struct Group {
    std::string group_id;
    std::vector<Topic> topics;
    ErrorCode error_code = ErrorCode::kNone;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Group&) const = default;
  };
  int32_t throttle_time_ms = 0;             // v3+
  std::vector<Topic> topics;                // v0-7
  ErrorCode error_code = ErrorCode::kNone;  // v2-7
  std::vector<Group> groups;                // v8+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const OffsetFetchResponse&) const = default;
};

// ListGroups (key 16), v0-5, flexible from v3.
struct ListGroupsRequest {
  std::vector<std::string> states_filter;  // v4+
  std::vector<std::string> types_filter;   // v5+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ListGroupsRequest&) const = default;
};

struct ListGroupsResponse {
  struct Group {
    std::string group_id;
    std::string protocol_type;
    std::string group_state;  // v4+
    std::string group_type;   // v5+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Group&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v1+
  ErrorCode error_code = ErrorCode::kNone;
  std::vector<Group> groups;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ListGroupsResponse&) const = default;
};

// DescribeGroups (key 15), v0-5, flexible from v5.
struct DescribeGroupsRequest {
  std::vector<std::string> groups;
  bool include_authorized_operations = false;  // v3+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeGroupsRequest&) const = default;
};

struct DescribeGroupsResponse {
  struct Member {
    std::string member_id;
    std::optional<std::string> group_instance_id;  // v4+
    std::string client_id;
    std::string client_host;
    std::vector<uint8_t> member_metadata;
    std::vector<uint8_t> member_assignment;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Member&) const = default;
  };
  struct Group {
    ErrorCode error_code = ErrorCode::kNone;
    std::string group_id;
    std::string group_state;
    std::string protocol_type;
    std::string protocol_data;
    std::vector<Member> members;
    int32_t authorized_operations = std::numeric_limits<int32_t>::min();  // v3+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Group&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v1+
  std::vector<Group> groups;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeGroupsResponse&) const = default;
};

// DeleteGroups (key 42), v0-2, flexible from v2.
struct DeleteGroupsRequest {
  std::vector<std::string> groups_names;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteGroupsRequest&) const = default;
};

struct DeleteGroupsResponse {
  struct GroupResult {  // DeletableGroupResult
    std::string group_id;
    ErrorCode error_code = ErrorCode::kNone;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const GroupResult&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<GroupResult> results;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteGroupsResponse&) const = default;
};

}  // namespace sluice::kafka
