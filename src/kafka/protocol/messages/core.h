// The data-path messages of the Kafka protocol: ApiVersions, Metadata, Produce, Fetch and
// ListOffsets, requests and responses, written by hand against Kafka's JSON message
// definitions (field order, types, versions, tags).
//
// Each struct decodes the body that follows the request or response header and encodes
// it again. Decode(r, version) expects a version the caller has checked against
// SupportedApis(); it never crashes on malformed bytes and returns InvalidArgument naming
// the message, version, field and byte position. Fields a version lacks are left at their
// default by Decode and skipped by Encode; a non-default value in such a field is dropped
// silently by Encode (Kafka throws for non-ignorable ones) so the broker never fails to
// answer.
//
// Produce and Fetch are the hot path: record bytes are never copied on decode. Their
// `records` fields are views into the buffer given to the Reader and are valid only as
// long as that buffer is (the caller keeps the request frame alive while it uses them).
//
// Tagged fields: known ones are members (written only when they differ from their
// default, as Kafka does); unknown ones are kept in each struct's unknown_tags and written
// back in tag order. unknown_tags must not hold a tag the struct knows. The small structs
// that are themselves the value of a tagged field (LeaderIdAndEpoch, EpochEndOffset,
// SnapshotId, ReplicaState) skip unknown tags of their own.
#pragma once

#include <climits>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

// Record bytes of one partition in a response: either inline bytes copied into the
// response buffer, or a splice of `splice_size` bytes the connection sends from a segment
// file with sendfile (identified by `splice_token`; see Writer::AddSplice). Decode always
// fills inline_bytes (a view into the decoded buffer).
struct RecordsRef {
  std::optional<std::span<const uint8_t>> inline_bytes;  // null = null records
  uint64_t splice_size = 0;
  uint32_t splice_token = 0;
  bool is_splice = false;

  static RecordsRef Inline(std::optional<std::span<const uint8_t>> bytes) {
    return {bytes, 0, 0, false};
  }
  static RecordsRef Splice(uint64_t size, uint32_t token) {
    return {std::nullopt, size, token, true};
  }
  // Inline records compare by content, splices by size and token.
  bool operator==(const RecordsRef& other) const;
};

// Null and content equality of two record views (std::span has no operator==).
bool SameBytes(const std::optional<std::span<const uint8_t>>& a,
               const std::optional<std::span<const uint8_t>>& b);

// ---------------------------------------------------------------------------------------
// ApiVersions (key 18), v0-4, flexible from v3. The response header is always v0.

struct ApiVersionsRequest {
  std::string client_software_name;     // v3+
  std::string client_software_version;  // v3+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ApiVersionsRequest&) const = default;
};

struct ApiVersionsResponse {
  struct ApiVersion {
    int16_t api_key = 0;
    int16_t min_version = 0;
    int16_t max_version = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const ApiVersion&) const = default;
  };
  struct SupportedFeatureKey {
    std::string name;
    int16_t min_version = 0;
    int16_t max_version = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const SupportedFeatureKey&) const = default;
  };
  struct FinalizedFeatureKey {
    std::string name;
    int16_t max_version_level = 0;
    int16_t min_version_level = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const FinalizedFeatureKey&) const = default;
  };

  ErrorCode error_code = ErrorCode::kNone;
  std::vector<ApiVersion> api_keys;
  int32_t throttle_time_ms = 0;                         // v1+
  std::vector<SupportedFeatureKey> supported_features;  // v3+, tag 0
  int64_t finalized_features_epoch = -1;                // v3+, tag 1
  std::vector<FinalizedFeatureKey> finalized_features;  // v3+, tag 2
  bool zk_migration_ready = false;                      // v3+, tag 3
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ApiVersionsResponse&) const = default;
};

// The body Kafka answers an ApiVersions request of a version it does not know with: the
// v0 layout (error code, api list, nothing else) whatever the requested version, so any
// client can read it and retry with a version from the list. The list is every API in
// SupportedApis() (Kafka itself lists only ApiVersions here; clients look for that entry).
void EncodeApiVersionsV0Fallback(Writer& w, ErrorCode error_code);

// ---------------------------------------------------------------------------------------
// Metadata (key 3), v0-12, flexible from v9.

struct MetadataRequest {
  struct Topic {
    Uuid topic_id;                    // v10+
    std::optional<std::string> name;  // null only from v10; encoded as "" before
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };

  // Null = all topics (v1+). In v0 an empty array means all topics: Decode keeps it as
  // the empty array it is, and Encode writes null as an empty array in v0.
  std::optional<std::vector<Topic>> topics;
  bool allow_auto_topic_creation = true;               // v4+
  bool include_cluster_authorized_operations = false;  // v8-10
  bool include_topic_authorized_operations = false;    // v8+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const MetadataRequest&) const = default;
};

struct MetadataResponse {
  struct Broker {
    int32_t node_id = 0;
    std::string host;
    int32_t port = 0;
    std::optional<std::string> rack;  // v1+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Broker&) const = default;
  };
  struct Partition {
    ErrorCode error_code = ErrorCode::kNone;
    int32_t partition_index = 0;
    int32_t leader_id = 0;
    int32_t leader_epoch = -1;  // v7+
    std::vector<int32_t> replica_nodes;
    std::vector<int32_t> isr_nodes;
    std::vector<int32_t> offline_replicas;  // v5+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> name;  // null only from v12; encoded as "" before
    Uuid topic_id;                    // v10+
    bool is_internal = false;         // v1+
    std::vector<Partition> partitions;
    int32_t topic_authorized_operations = INT32_MIN;  // v8+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };

  int32_t throttle_time_ms = 0;  // v3+
  std::vector<Broker> brokers;
  std::optional<std::string> cluster_id;  // v2+
  int32_t controller_id = -1;             // v1+
  std::vector<Topic> topics;
  int32_t cluster_authorized_operations = INT32_MIN;  // v8-10
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const MetadataResponse&) const = default;
};

// ---------------------------------------------------------------------------------------
// Produce (key 0), v3-11 (v0-2 decode too), flexible from v9.

struct ProduceRequest {
  struct PartitionData {
    int32_t index = 0;
    // A view into the request buffer, valid while that buffer is; null = null records.
    std::optional<std::span<const uint8_t>> records;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const PartitionData& o) const {
      return index == o.index && SameBytes(records, o.records) && unknown_tags == o.unknown_tags;
    }
  };
  struct TopicData {
    std::string name;
    std::vector<PartitionData> partition_data;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const TopicData&) const = default;
  };

  std::optional<std::string> transactional_id;  // v3+
  int16_t acks = 0;
  int32_t timeout_ms = 0;
  std::vector<TopicData> topic_data;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ProduceRequest&) const = default;
};

struct ProduceResponse {
  struct BatchIndexAndErrorMessage {
    int32_t batch_index = 0;
    std::optional<std::string> batch_index_error_message;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const BatchIndexAndErrorMessage&) const = default;
  };
  struct LeaderIdAndEpoch {
    int32_t leader_id = -1;
    int32_t leader_epoch = -1;
    bool operator==(const LeaderIdAndEpoch&) const = default;
  };
  struct PartitionProduceResponse {
    int32_t index = 0;
    ErrorCode error_code = ErrorCode::kNone;
    int64_t base_offset = 0;
    int64_t log_append_time_ms = -1;                       // v2+
    int64_t log_start_offset = -1;                         // v5+
    std::vector<BatchIndexAndErrorMessage> record_errors;  // v8+
    std::optional<std::string> error_message;              // v8+
    LeaderIdAndEpoch current_leader;                       // v10+, tag 0
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const PartitionProduceResponse&) const = default;
  };
  struct TopicProduceResponse {
    std::string name;
    std::vector<PartitionProduceResponse> partition_responses;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const TopicProduceResponse&) const = default;
  };
  struct NodeEndpoint {
    int32_t node_id = 0;
    std::string host;
    int32_t port = 0;
    std::optional<std::string> rack;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const NodeEndpoint&) const = default;
  };

  std::vector<TopicProduceResponse> responses;
  int32_t throttle_time_ms = 0;              // v1+
  std::vector<NodeEndpoint> node_endpoints;  // v10+, tag 0
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ProduceResponse&) const = default;
};

// ---------------------------------------------------------------------------------------
// Fetch (key 1), v4-16, flexible from v12.

struct FetchRequest {
  struct ReplicaState {
    int32_t replica_id = -1;
    int64_t replica_epoch = -1;
    bool operator==(const ReplicaState&) const = default;
  };
  struct FetchPartition {
    int32_t partition = 0;
    int32_t current_leader_epoch = -1;  // v9+
    int64_t fetch_offset = 0;
    int32_t last_fetched_epoch = -1;  // v12+
    int64_t log_start_offset = -1;    // v5+
    int32_t partition_max_bytes = 0;
    // ReplicaDirectoryId (tag 0, v17) is past the advertised range: kept as unknown.
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const FetchPartition&) const = default;
  };
  struct FetchTopic {
    std::string topic;  // v0-12
    Uuid topic_id;      // v13+
    std::vector<FetchPartition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const FetchTopic&) const = default;
  };
  struct ForgottenTopic {
    std::string topic;  // v7-12
    Uuid topic_id;      // v13+
    std::vector<int32_t> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const ForgottenTopic&) const = default;
  };

  std::optional<std::string> cluster_id;  // v12+, tag 0
  int32_t replica_id = -1;                // v0-14
  ReplicaState replica_state;             // v15+, tag 1
  int32_t max_wait_ms = 0;
  int32_t min_bytes = 0;
  int32_t max_bytes = 0x7fffffff;  // v3+
  int8_t isolation_level = 0;      // v4+
  int32_t session_id = 0;          // v7+
  int32_t session_epoch = -1;      // v7+
  std::vector<FetchTopic> topics;
  std::vector<ForgottenTopic> forgotten_topics_data;  // v7+
  std::string rack_id;                                // v11+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const FetchRequest&) const = default;
};

struct FetchResponse {
  struct EpochEndOffset {
    int32_t epoch = -1;
    int64_t end_offset = -1;
    bool operator==(const EpochEndOffset&) const = default;
  };
  struct LeaderIdAndEpoch {
    int32_t leader_id = -1;
    int32_t leader_epoch = -1;
    bool operator==(const LeaderIdAndEpoch&) const = default;
  };
  struct SnapshotId {
    int64_t end_offset = -1;
    int32_t epoch = -1;
    bool operator==(const SnapshotId&) const = default;
  };
  struct AbortedTransaction {
    int64_t producer_id = 0;
    int64_t first_offset = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const AbortedTransaction&) const = default;
  };
  struct PartitionData {
    int32_t partition_index = 0;
    ErrorCode error_code = ErrorCode::kNone;
    int64_t high_watermark = 0;
    int64_t last_stable_offset = -1;                                      // v4+
    int64_t log_start_offset = -1;                                        // v5+
    EpochEndOffset diverging_epoch;                                       // v12+, tag 0
    LeaderIdAndEpoch current_leader;                                      // v12+, tag 1
    SnapshotId snapshot_id;                                               // v12+, tag 2
    std::optional<std::vector<AbortedTransaction>> aborted_transactions;  // v4+
    int32_t preferred_read_replica = -1;                                  // v11+
    // Decode: a view into the response buffer. Encode: inline bytes or a splice.
    RecordsRef records;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const PartitionData&) const = default;
  };
  struct FetchableTopicResponse {
    std::string topic;  // v0-12
    Uuid topic_id;      // v13+
    std::vector<PartitionData> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const FetchableTopicResponse&) const = default;
  };
  struct NodeEndpoint {
    int32_t node_id = 0;
    std::string host;
    int32_t port = 0;
    std::optional<std::string> rack;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const NodeEndpoint&) const = default;
  };

  int32_t throttle_time_ms = 0;             // v1+
  ErrorCode error_code = ErrorCode::kNone;  // v7+
  int32_t session_id = 0;                   // v7+
  std::vector<FetchableTopicResponse> responses;
  std::vector<NodeEndpoint> node_endpoints;  // v16+, tag 0
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  // Splices (RecordsRef::is_splice) are recorded on `w` with AddSplice after their length
  // prefix; the caller sends the buffer and the spliced bytes interleaved.
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const FetchResponse&) const = default;
};

// ---------------------------------------------------------------------------------------
// ListOffsets (key 2), v0-9, flexible from v6.

struct ListOffsetsRequest {
  struct Partition {
    int32_t partition_index = 0;
    int32_t current_leader_epoch = -1;  // v4+
    int64_t timestamp = 0;
    int32_t max_num_offsets = 1;  // v0 only
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string name;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };

  int32_t replica_id = 0;
  int8_t isolation_level = 0;  // v2+
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ListOffsetsRequest&) const = default;
};

struct ListOffsetsResponse {
  struct Partition {
    int32_t partition_index = 0;
    ErrorCode error_code = ErrorCode::kNone;
    std::vector<int64_t> old_style_offsets;  // v0 only
    int64_t timestamp = -1;                  // v1+
    int64_t offset = -1;                     // v1+
    int32_t leader_epoch = -1;               // v4+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string name;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };

  int32_t throttle_time_ms = 0;  // v2+
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ListOffsetsResponse&) const = default;
};

}  // namespace sluice::kafka
