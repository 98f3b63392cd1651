// Kafka's embedded consumer protocol, as the in-process source (in_process_source.h) puts
// it in JoinGroup and SyncGroup: the subscription a member offers (ConsumerProtocol-
// Subscription, versions 0-3 read, 0 written) and the assignment the leader hands out
// (ConsumerProtocolAssignment), and the assignors a leader runs with the Java client's and
// librdkafka's semantics: `range` and `roundrobin` (docs/design/0023-native-path.md).
//
// Bytes come from other members (librdkafka, the Java client): malformed input is an
// InvalidArgument Status, never a crash or an allocation larger than the input.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::pipeline::consumer_group {

struct Subscription {
  std::vector<std::string> topics;
  std::optional<std::vector<uint8_t>> user_data;
  std::map<std::string, std::vector<int32_t>> owned_partitions;  // v1+
  int32_t generation_id = -1;                                    // v2+
  std::optional<std::string> rack_id;                            // v3+
};

struct Assignment {
  std::map<std::string, std::vector<int32_t>> partitions;  // topic -> partitions, ascending
  std::optional<std::vector<uint8_t>> user_data;
};

// `version` 0-3.
std::vector<uint8_t> EncodeSubscription(const Subscription& s, int16_t version);
// Versions past 3 are read as 3 (their added fields follow the ones known).
Result<Subscription> DecodeSubscription(std::span<const uint8_t> bytes);
std::vector<uint8_t> EncodeAssignment(const Assignment& a, int16_t version);
Result<Assignment> DecodeAssignment(std::span<const uint8_t> bytes);

struct Member {
  std::string member_id;
  std::optional<std::string> group_instance_id;
  Subscription subscription;
};

// Every member's assignment by `assignor` ("range" or "roundrobin"; InvalidArgument
// otherwise) over `partitions` (topic -> partition count; topics not in it are skipped).
// Every member gets an entry, empty when it gets nothing.
//   range: per topic, its subscribers sorted by member id (group instance id first when
//   every subscriber has one, as Kafka's static members), the partitions split in
//   contiguous ranges, the first ones one larger.
//   roundrobin: every subscribed topic-partition in (topic, partition) order, dealt to the
//   members sorted likewise in a circle, skipping those not subscribed to its topic.
Result<std::map<std::string, Assignment>> Assign(std::string_view assignor,
                                                 const std::vector<Member>& members,
                                                 const std::map<std::string, int32_t>& partitions);

}  // namespace sluice::pipeline::consumer_group
