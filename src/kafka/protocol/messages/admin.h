// Admin and miscellaneous Kafka messages: topic and partition creation and deletion,
// configs, producer ids, record deletion, leader-epoch lookups, cluster description and
// SASL. Each struct is written by hand against Kafka's JSON message definition of the
// same name; Decode reads a body after its header, Encode appends one.
//
// Conventions shared by every message here:
//  - A field absent in a version is left at its default by Decode and skipped by Encode.
//    Kafka refuses to serialize a non-ignorable field holding a non-default value in a
//    version that lacks it; Encode here silently skips it instead, so a handler that
//    answers an old client never fails half-way through a response.
//  - Defaults are the JSON "default"s. Nullable strings without one default to null;
//    nullable arrays without one default to empty, as in Kafka's generated code (the
//    Java client reads some of them without a null check).
//  - unknown_tags keeps the tagged fields of a flexible version that are not known
//    here, so a decoded message re-encodes to the same bytes.
//  - Decode rejects versions outside the JSON's validVersions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

// CreateTopics (19), versions 0-7, flexible from 5.
struct CreateTopicsRequest {
  struct Assignment {
    int32_t partition_index = 0;
    std::vector<int32_t> broker_ids;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Assignment&) const = default;
  };
  struct Config {
    std::string name;
    std::optional<std::string> value;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Config&) const = default;
  };
  struct Topic {
    std::string name;
    int32_t num_partitions = 0;
    int16_t replication_factor = 0;
    std::vector<Assignment> assignments;
    std::vector<Config> configs;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  std::vector<Topic> topics;
  int32_t timeout_ms = 60000;
  bool validate_only = false;  // v1+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const CreateTopicsRequest&) const = default;
};

struct CreateTopicsResponse {
  struct Config {  // v5+
    std::string name;
    std::optional<std::string> value;
    bool read_only = false;
    int8_t config_source = -1;
    bool is_sensitive = false;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Config&) const = default;
  };
  struct Topic {
    std::string name;
    Uuid topic_id;  // v7+
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;                            // v1+
    ErrorCode topic_config_error_code = ErrorCode::kNone;                // v5+, tag 0
    int32_t num_partitions = -1;                                         // v5+
    int16_t replication_factor = -1;                                     // v5+
    std::optional<std::vector<Config>> configs = std::vector<Config>{};  // v5+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v2+
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const CreateTopicsResponse&) const = default;
};

// DeleteTopics (20), versions 0-6, flexible from 4. v0-5 name topics in topic_names,
// v6 in topics (by name or id); Encode writes only the one its version has.
struct DeleteTopicsRequest {
  struct Topic {  // v6+
    std::optional<std::string> name;
    Uuid topic_id;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  std::vector<Topic> topics;             // v6+
  std::vector<std::string> topic_names;  // v0-5
  int32_t timeout_ms = 0;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteTopicsRequest&) const = default;
};

struct DeleteTopicsResponse {
  struct Result {
    std::optional<std::string> name;  // null only in v6+; Encode writes "" for null before
    Uuid topic_id;                    // v6+
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;  // v5+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Result&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v1+
  std::vector<Result> responses;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteTopicsResponse&) const = default;
};

// CreatePartitions (37), versions 0-3, flexible from 2.
struct CreatePartitionsRequest {
  struct Assignment {
    std::vector<int32_t> broker_ids;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Assignment&) const = default;
  };
  struct Topic {
    std::string name;
    int32_t count = 0;
    std::optional<std::vector<Assignment>> assignments = std::vector<Assignment>{};
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  std::vector<Topic> topics;
  int32_t timeout_ms = 0;
  bool validate_only = false;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const CreatePartitionsRequest&) const = default;
};

struct CreatePartitionsResponse {
  struct Result {
    std::string name;
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Result&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<Result> results;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const CreatePartitionsResponse&) const = default;
};

// DescribeConfigs (32), versions 0-4, flexible from 4.
struct DescribeConfigsRequest {
  struct Resource {
    int8_t resource_type = 0;
    std::string resource_name;
    // Null lists every key.
    std::optional<std::vector<std::string>> configuration_keys = std::vector<std::string>{};
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Resource&) const = default;
  };
  std::vector<Resource> resources;
  bool include_synonyms = false;       // v1+
  bool include_documentation = false;  // v3+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeConfigsRequest&) const = default;
};

struct DescribeConfigsResponse {
  struct Synonym {  // v1+
    std::string name;
    std::optional<std::string> value;
    int8_t source = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Synonym&) const = default;
  };
  struct Config {
    std::string name;
    std::optional<std::string> value;
    bool read_only = false;
    bool is_default = false;    // v0 only
    int8_t config_source = -1;  // v1+
    bool is_sensitive = false;
    std::vector<Synonym> synonyms;             // v1+
    int8_t config_type = 0;                    // v3+
    std::optional<std::string> documentation;  // v3+
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Config&) const = default;
  };
  struct Result {
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    int8_t resource_type = 0;
    std::string resource_name;
    std::vector<Config> configs;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Result&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<Result> results;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeConfigsResponse&) const = default;
};

// AlterConfigs (33), versions 0-2, flexible from 2.
struct AlterConfigsRequest {
  struct Config {
    std::string name;
    std::optional<std::string> value;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Config&) const = default;
  };
  struct Resource {
    int8_t resource_type = 0;
    std::string resource_name;
    std::vector<Config> configs;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Resource&) const = default;
  };
  std::vector<Resource> resources;
  bool validate_only = false;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AlterConfigsRequest&) const = default;
};

// The per-resource result of AlterConfigs and IncrementalAlterConfigs (same fields).
struct AlterConfigsResourceResponse {
  ErrorCode error_code = ErrorCode::kNone;
  std::optional<std::string> error_message;
  int8_t resource_type = 0;
  std::string resource_name;
  std::vector<RawTaggedField> unknown_tags;
  bool operator==(const AlterConfigsResourceResponse&) const = default;
};

struct AlterConfigsResponse {
  int32_t throttle_time_ms = 0;
  std::vector<AlterConfigsResourceResponse> responses;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AlterConfigsResponse&) const = default;
};

// IncrementalAlterConfigs (44), versions 0-1, flexible from 1.
struct IncrementalAlterConfigsRequest {
  struct Config {
    std::string name;
    int8_t config_operation = 0;  // 0 set, 1 delete, 2 append, 3 subtract
    std::optional<std::string> value;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Config&) const = default;
  };
  struct Resource {
    int8_t resource_type = 0;
    std::string resource_name;
    std::vector<Config> configs;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Resource&) const = default;
  };
  std::vector<Resource> resources;
  bool validate_only = false;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const IncrementalAlterConfigsRequest&) const = default;
};

struct IncrementalAlterConfigsResponse {
  int32_t throttle_time_ms = 0;
  std::vector<AlterConfigsResourceResponse> responses;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const IncrementalAlterConfigsResponse&) const = default;
};

// InitProducerId (22), versions 0-5, flexible from 2.
struct InitProducerIdRequest {
  std::optional<std::string> transactional_id;
  int32_t transaction_timeout_ms = 0;
  int64_t producer_id = -1;     // v3+
  int16_t producer_epoch = -1;  // v3+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const InitProducerIdRequest&) const = default;
};

struct InitProducerIdResponse {
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  int64_t producer_id = -1;
  int16_t producer_epoch = 0;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const InitProducerIdResponse&) const = default;
};

// DeleteRecords (21), versions 0-2, flexible from 2.
struct DeleteRecordsRequest {
  struct Partition {
    int32_t partition_index = 0;
    int64_t offset = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string name;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  std::vector<Topic> topics;
  int32_t timeout_ms = 0;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteRecordsRequest&) const = default;
};

struct DeleteRecordsResponse {
  struct Partition {
    int32_t partition_index = 0;
    int64_t low_watermark = 0;
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
  int32_t throttle_time_ms = 0;
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DeleteRecordsResponse&) const = default;
};

// OffsetForLeaderEpoch (23), versions 0-4, flexible from 4.
struct OffsetForLeaderEpochRequest {
  struct Partition {
    int32_t partition = 0;
    int32_t current_leader_epoch = -1;  // v2+
    int32_t leader_epoch = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string topic;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  int32_t replica_id = -2;  // v3+; consumers send -1
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const OffsetForLeaderEpochRequest&) const = default;
};

struct OffsetForLeaderEpochResponse {
  struct Partition {
    ErrorCode error_code = ErrorCode::kNone;
    int32_t partition = 0;
    int32_t leader_epoch = -1;  // v1+
    int64_t end_offset = -1;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  struct Topic {
    std::string topic;
    std::vector<Partition> partitions;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Topic&) const = default;
  };
  int32_t throttle_time_ms = 0;  // v2+
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const OffsetForLeaderEpochResponse&) const = default;
};

// DescribeCluster (60), versions 0-1, flexible in every version.
struct DescribeClusterRequest {
  bool include_cluster_authorized_operations = false;
  int8_t endpoint_type = 1;  // v1+; 1 brokers, 2 controllers
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeClusterRequest&) const = default;
};

struct DescribeClusterResponse {
  struct Broker {
    int32_t broker_id = 0;
    std::string host;
    int32_t port = 0;
    std::optional<std::string> rack;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Broker&) const = default;
  };
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  std::optional<std::string> error_message;
  int8_t endpoint_type = 1;  // v1+
  std::string cluster_id;
  int32_t controller_id = -1;
  std::vector<Broker> brokers;
  int32_t cluster_authorized_operations = INT32_MIN;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeClusterResponse&) const = default;
};

// SaslHandshake (17), versions 0-1, never flexible.
struct SaslHandshakeRequest {
  std::string mechanism;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const SaslHandshakeRequest&) const = default;
};

struct SaslHandshakeResponse {
  ErrorCode error_code = ErrorCode::kNone;
  std::vector<std::string> mechanisms;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const SaslHandshakeResponse&) const = default;
};

// SaslAuthenticate (36), versions 0-2, flexible from 2.
struct SaslAuthenticateRequest {
  std::vector<uint8_t> auth_bytes;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const SaslAuthenticateRequest&) const = default;
};

struct SaslAuthenticateResponse {
  ErrorCode error_code = ErrorCode::kNone;
  std::optional<std::string> error_message;
  std::vector<uint8_t> auth_bytes;
  int64_t session_lifetime_ms = 0;  // v1+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const SaslAuthenticateResponse&) const = default;
};

}  // namespace sluice::kafka
