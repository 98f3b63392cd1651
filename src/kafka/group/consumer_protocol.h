// Kafka's embedded consumer protocol: the bytes a consumer puts in JoinGroup's protocol
// metadata (ConsumerProtocolSubscription) and the group leader puts in SyncGroup's
// assignments (ConsumerProtocolAssignment), for protocol type "consumer". Written by hand
// against Kafka's JSON definitions of the two (reference data outside the project).
//
// Both start with an int16 version. Versions 0..3 are known; a newer version is read as
// version 3 with whatever follows ignored, Kafka's rule (versions only append fields). For
// a known version bytes left after the last field are an error, as is anything truncated,
// a negative length other than -1 where null is allowed, or a count that cannot fit in
// what is left (so a lying count allocates nothing).
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::kafka::group {

// JoinGroup's protocol type for consumers.
inline constexpr std::string_view kConsumerProtocolType = "consumer";
// The newest version of both structs this module knows.
inline constexpr int16_t kConsumerProtocolVersion = 3;

struct TopicPartition {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const TopicPartition&) const = default;
};

// Topic -> partitions: how both structs list partitions (the JSON's TopicPartition array,
// keyed by topic). Decode merges a topic listed twice and leaves each topic's partitions
// ascending without duplicates; Encode writes what it is given.
using PartitionsByTopic = std::map<std::string, std::vector<int32_t>>;

// The pairs, topics in order.
std::vector<TopicPartition> Flatten(const PartitionsByTopic& grouped);
// By topic, each topic's partitions ascending, duplicates dropped.
PartitionsByTopic GroupByTopic(std::span<const TopicPartition> partitions);

// ConsumerProtocolSubscription: what a member asks for when it joins.
struct Subscription {
  std::vector<std::string> topics;
  std::optional<std::vector<uint8_t>> user_data;  // the assignor's own bytes
  PartitionsByTopic owned_partitions;             // v1+: what the member holds now
  int32_t generation_id = -1;                     // v2+: the generation it holds them from
  std::optional<std::string> rack_id;             // v3+

  // The bytes of `version` (0..3; a newer one is written as 3, as Kafka does; negative is
  // a bug). Fields the version lacks are left out, as Kafka leaves out ignorable fields.
  std::vector<uint8_t> Encode(int16_t version = kConsumerProtocolVersion) const;
  // Fields the bytes' version lacks keep their defaults. InvalidArgument on malformed bytes.
  static Result<Subscription> Decode(std::span<const uint8_t> bytes);

  bool operator==(const Subscription&) const = default;
};

// ConsumerProtocolAssignment: what the leader gives a member. The same fields in every
// version (v1..3 exist to keep in step with the subscription's version).
struct Assignment {
  PartitionsByTopic assigned_partitions;
  std::optional<std::vector<uint8_t>> user_data;

  // As Subscription::Encode.
  std::vector<uint8_t> Encode(int16_t version = kConsumerProtocolVersion) const;
  // As Subscription::Decode. An empty SyncGroup assignment (zero bytes, what a member the
  // leader gave nothing may receive) is InvalidArgument here: the caller decides.
  static Result<Assignment> Decode(std::span<const uint8_t> bytes);

  bool operator==(const Assignment&) const = default;
};

}  // namespace sluice::kafka::group
