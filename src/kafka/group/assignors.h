// The partition assignors a consumer group's leader runs on the members' subscriptions,
// by the names members offer in JoinGroup: "range" and "roundrobin" with the Java
// client's (and librdkafka's) semantics, and "cooperative-sticky" with its guarantees;
// none rack-aware (no replica racks here).
//
// Every assignor is a pure function of its input: the same members and partition counts
// give the same assignment, whatever order the members come in.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kafka/group/consumer_protocol.h"

namespace sluice::kafka::group {

// One member of the group as JoinGroup's response lists it, its metadata decoded.
struct Member {
  std::string member_id;
  std::optional<std::string> group_instance_id;  // static membership (KIP-345)
  Subscription subscription;
};

// Partitions per topic, from metadata. Topics missing here, or with no partitions, are
// assigned to no one.
using PartitionCounts = std::map<std::string, int32_t>;

// Member id -> what it is given. Every member is present, with nothing if it gets nothing;
// topics in order, each topic's partitions ascending; no user data.
using GroupAssignment = std::map<std::string, Assignment>;

// Per topic: the members subscribed to it in member order, the topic's partitions cut into
// contiguous ranges, the first (partitions % members) members one more.
Result<GroupAssignment> AssignRange(std::span<const Member> members,
                                    const PartitionCounts& partitions);

// Every subscribed topic's partitions, sorted by topic then partition, dealt in turn to the
// members in member order, passing over a member not subscribed to the partition's topic.
Result<GroupAssignment> AssignRoundRobin(std::span<const Member> members,
                                         const PartitionCounts& partitions);

// "Member order" above is Kafka's: members with a group instance id first, by instance id,
// then the others by member id. Every assignor refuses a member id listed twice.

// Kafka's CooperativeStickyAssignor, by what it guarantees (cooperative_sticky.cc says
// how): every partition of a subscribed topic goes to a subscriber; no partition can move
// to a subscriber of its topic holding two fewer; members keep the partitions they own
// (their subscriptions' owned_partitions, the highest generation winning a partition
// claimed twice) as far as that balance allows (all it allows when subscriptions are
// identical; otherwise, as in Kafka, a best effort); and a partition that changes owner is
// left out until its owner has revoked it, so the members rebalance again (KIP-429)
// before it is given out.
Result<GroupAssignment> AssignCooperativeSticky(std::span<const Member> members,
                                                const PartitionCounts& partitions);

// The user data the Java client's cooperative-sticky member sends: its generation, an
// int32. A leader reads it when a subscription older than v2 has no generation field.
std::vector<uint8_t> CooperativeStickyUserData(int32_t generation);

using AssignFn = Result<GroupAssignment> (*)(std::span<const Member>, const PartitionCounts&);

struct AssignorInfo {
  std::string_view name;  // as JoinGroup's protocol name
  AssignFn assign;
  // Whether it serves the cooperative rebalance protocol (KIP-429) as well as the eager
  // one: only then may members keep their partitions while they rejoin.
  bool cooperative;
};

// Every assignor: range and roundrobin (librdkafka's default offer, in that order), then
// cooperative-sticky.
std::span<const AssignorInfo> Assignors();
// The assignor with this name, or null.
const AssignorInfo* FindAssignor(std::string_view name);
// The assignment by the assignor of that name; InvalidArgument for a name not known.
Result<GroupAssignment> Assign(std::string_view assignor, std::span<const Member> members,
                               const PartitionCounts& partitions);

}  // namespace sluice::kafka::group
