// The transaction APIs (KIP-98, KIP-447, KIP-664, KIP-890): AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, WriteTxnMarkers, TxnOffsetCommit, DescribeProducers,
// DescribeTransactions and ListTransactions, requests and responses. Written by hand
// against Kafka's JSON message definitions; the comment on each struct gives its versions
// (the JSON's validVersions, which Decode enforces; api.cc says which ones are advertised)
// and the first flexible one, and each field's comment the versions it has when not all.
//
// Common rules for every message here (the same as groups.h):
//  - Decode(r, version) reads the body that follows the header and returns OK or an
//    InvalidArgument naming the message, version, field and byte. It reads only what
//    the version has; fields the version lacks keep their defaults. A version outside
//    the JSON's validVersions is an InvalidArgument.
//  - Encode(w, version) writes the fields the version has. Values set in fields the
//    version lacks are dropped silently (Kafka's generated code throws for non-ignorable
//    ones): the broker fills what the client's version can carry.
//  - Defaults are the JSON "default"s; where the JSON gives none, numbers are 0, arrays
//    empty and nullable strings null.
//  - None of these messages defines tagged fields; in flexible versions the tags read at
//    the end of each struct are kept in unknown_tags and written back after known ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

// A topic name and partition indexes: AddPartitionsToTxnTopic, WritableTxnMarkerTopic,
// DescribeProducers' TopicRequest and DescribeTransactions' TopicData have this shape
// (the JSON names the fields Name/Topic and Partitions/PartitionIndexes).
struct TxnTopic {
  std::string name;
  std::vector<int32_t> partitions;
  std::vector<RawTaggedField> unknown_tags;
  bool operator==(const TxnTopic&) const = default;
};

// A topic name and an error code per partition: AddPartitionsToTxnTopicResult,
// WritableTxnMarkerTopicResult and TxnOffsetCommitResponseTopic have this shape.
struct TxnTopicErrors {
  struct Partition {
    int32_t partition_index = 0;
    ErrorCode error_code = ErrorCode::kNone;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Partition&) const = default;
  };
  std::string name;
  std::vector<Partition> partitions;
  std::vector<RawTaggedField> unknown_tags;
  bool operator==(const TxnTopicErrors&) const = default;
};

// AddPartitionsToTxn (key 24), v0-5, flexible from v3. v0-3 are what clients send (one
// transaction); v4+ is the broker-to-broker batch of KIP-890, whose verify_only asks
// whether the partitions are already in the transaction instead of adding them.
struct AddPartitionsToTxnRequest {
  struct Transaction {
    std::string transactional_id;
    int64_t producer_id = 0;
    int16_t producer_epoch = 0;
    bool verify_only = false;
    std::vector<TxnTopic> topics;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Transaction&) const = default;
  };
  std::vector<Transaction> transactions;      // v4+
  std::string v3_and_below_transactional_id;  // v0-3
  int64_t v3_and_below_producer_id = 0;       // v0-3
  int16_t v3_and_below_producer_epoch = 0;    // v0-3
  std::vector<TxnTopic> v3_and_below_topics;  // v0-3
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AddPartitionsToTxnRequest&) const = default;
};

struct AddPartitionsToTxnResponse {
  struct Result {  // AddPartitionsToTxnResult
    std::string transactional_id;
    std::vector<TxnTopicErrors> topic_results;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Result&) const = default;
  };
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;                    // v4+
  std::vector<Result> results_by_transaction;                 // v4+
  std::vector<TxnTopicErrors> results_by_topic_v3_and_below;  // v0-3
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AddPartitionsToTxnResponse&) const = default;
};

// AddOffsetsToTxn (key 25), v0-4, flexible from v3.
struct AddOffsetsToTxnRequest {
  std::string transactional_id;
  int64_t producer_id = 0;
  int16_t producer_epoch = 0;
  std::string group_id;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AddOffsetsToTxnRequest&) const = default;
};

struct AddOffsetsToTxnResponse {
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AddOffsetsToTxnResponse&) const = default;
};

// EndTxn (key 26), v0-5, flexible from v3. v5 (KIP-890 part 2: the epoch is bumped at
// every transaction end, and the response carries the new id and epoch) is unstable in
// Kafka's JSON: decoded and encoded here, not advertised (api.cc).
struct EndTxnRequest {
  std::string transactional_id;
  int64_t producer_id = 0;
  int16_t producer_epoch = 0;
  bool committed = false;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const EndTxnRequest&) const = default;
};

struct EndTxnResponse {
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  int64_t producer_id = -1;     // v5+
  int16_t producer_epoch = -1;  // v5+
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const EndTxnResponse&) const = default;
};

// WriteTxnMarkers (key 27), v0-1, flexible from v1. Sent by a transaction coordinator to
// the leaders of a transaction's partitions (on one node sluice calls the partitions
// directly, broker/txn_markers.h; this is the wire form for the cluster work).
struct WriteTxnMarkersRequest {
  struct Marker {  // WritableTxnMarker
    int64_t producer_id = 0;
    int16_t producer_epoch = 0;
    bool transaction_result = false;  // false = ABORT, true = COMMIT
    std::vector<TxnTopic> topics;
    int32_t coordinator_epoch = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Marker&) const = default;
  };
  std::vector<Marker> markers;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const WriteTxnMarkersRequest&) const = default;
};

struct WriteTxnMarkersResponse {
  struct Marker {  // WritableTxnMarkerResult
    int64_t producer_id = 0;
    std::vector<TxnTopicErrors> topics;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Marker&) const = default;
  };
  std::vector<Marker> markers;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const WriteTxnMarkersResponse&) const = default;
};

// TxnOffsetCommit (key 28), v0-4, flexible from v3. v3+ carries the consumer's group
// metadata (KIP-447) so the group coordinator can fence zombie members.
struct TxnOffsetCommitRequest {
  struct Partition {
    int32_t partition_index = 0;
    int64_t committed_offset = 0;
    int32_t committed_leader_epoch = -1;  // v2+
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
  std::string transactional_id;
  std::string group_id;
  int64_t producer_id = 0;
  int16_t producer_epoch = 0;
  int32_t generation_id = -1;                    // v3+
  std::string member_id;                         // v3+
  std::optional<std::string> group_instance_id;  // v3+
  std::vector<Topic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const TxnOffsetCommitRequest&) const = default;
};

struct TxnOffsetCommitResponse {
  int32_t throttle_time_ms = 0;
  std::vector<TxnTopicErrors> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const TxnOffsetCommitResponse&) const = default;
};

// DescribeProducers (key 61), v0, flexible from v0 (KIP-664): the producers a partition
// leader knows, with the first offset of each one's open transaction.
struct DescribeProducersRequest {
  std::vector<TxnTopic> topics;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeProducersRequest&) const = default;
};

struct DescribeProducersResponse {
  struct Producer {  // ProducerState
    int64_t producer_id = 0;
    int32_t producer_epoch = 0;  // int32 in this message, int16 elsewhere
    int32_t last_sequence = -1;
    int64_t last_timestamp = -1;
    int32_t coordinator_epoch = 0;
    int64_t current_txn_start_offset = -1;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Producer&) const = default;
  };
  struct Partition {
    int32_t partition_index = 0;
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<Producer> active_producers;
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
  bool operator==(const DescribeProducersResponse&) const = default;
};

// DescribeTransactions (key 65), v0, flexible from v0 (KIP-664): the coordinator's state
// of each transactional id.
struct DescribeTransactionsRequest {
  std::vector<std::string> transactional_ids;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeTransactionsRequest&) const = default;
};

struct DescribeTransactionsResponse {
  struct State {  // TransactionState
    ErrorCode error_code = ErrorCode::kNone;
    std::string transactional_id;
    std::string transaction_state;  // Kafka's names: "Ongoing", "PrepareCommit", ...
    int32_t transaction_timeout_ms = 0;
    int64_t transaction_start_time_ms = 0;
    int64_t producer_id = 0;
    int16_t producer_epoch = 0;
    std::vector<TxnTopic> topics;  // TopicData: the JSON calls the name "Topic"
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const State&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<State> transaction_states;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeTransactionsResponse&) const = default;
};

// ListTransactions (key 66), v0-1, flexible from v0 (KIP-664; v1 adds the duration
// filter of KIP-994).
struct ListTransactionsRequest {
  std::vector<std::string> state_filters;
  std::vector<int64_t> producer_id_filters;
  int64_t duration_filter = -1;  // v1+; < 0: no filter
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ListTransactionsRequest&) const = default;
};

struct ListTransactionsResponse {
  struct State {  // TransactionState
    std::string transactional_id;
    int64_t producer_id = 0;
    std::string transaction_state;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const State&) const = default;
  };
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  std::vector<std::string> unknown_state_filters;
  std::vector<State> transaction_states;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const ListTransactionsResponse&) const = default;
};

}  // namespace sluice::kafka
