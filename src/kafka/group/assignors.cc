#include "kafka/group/assignors.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <vector>

namespace sluice::kafka::group {
namespace {

// Kafka's member order (AbstractPartitionAssignor.MemberInfo): static members first, by
// group instance id, then dynamic ones by member id. Equal instance ids (which a group
// never has) fall back to member ids, so the order never depends on the input's.
bool MemberBefore(const Member* a, const Member* b) {
  if (a->group_instance_id.has_value() != b->group_instance_id.has_value()) {
    return a->group_instance_id.has_value();
  }
  if (a->group_instance_id && *a->group_instance_id != *b->group_instance_id) {
    return *a->group_instance_id < *b->group_instance_id;
  }
  return a->member_id < b->member_id;
}

// A member with its topics sorted, for lookups in large subscriptions.
struct Subscriber {
  const Member* member;
  std::vector<std::string_view> topics;  // into member->subscription, sorted

  bool Subscribes(std::string_view topic) const {
    return std::binary_search(topics.begin(), topics.end(), topic);
  }
};

// The members in member order, each with an empty assignment in `*out`.
Result<std::vector<Subscriber>> SortedMembers(std::span<const Member> members,
                                              GroupAssignment* out) {
  std::vector<Subscriber> sorted;
  sorted.reserve(members.size());
  for (const Member& m : members) {
    if (!out->emplace(m.member_id, Assignment{}).second) {
      return InvalidArgumentError("member {} is listed twice", m.member_id);
    }
    Subscriber& s = sorted.emplace_back();
    s.member = &m;
    s.topics.assign(m.subscription.topics.begin(), m.subscription.topics.end());
    std::sort(s.topics.begin(), s.topics.end());
  }
  std::sort(sorted.begin(), sorted.end(), [](const Subscriber& a, const Subscriber& b) {
    return MemberBefore(a.member, b.member);
  });
  return sorted;
}

// The partitions of `topic` there are, 0 when it does not exist.
int32_t CountOf(const PartitionCounts& partitions, const std::string& topic) {
  auto it = partitions.find(topic);
  return it == partitions.end() ? 0 : std::max(it->second, 0);
}

// Appends partitions [first, first + n) of `topic`, which come in ascending order.
void Give(Assignment& a, const std::string& topic, int32_t first, int32_t n) {
  if (n <= 0) return;
  std::vector<int32_t>& mine = a.assigned_partitions[topic];
  for (int32_t p = first; p < first + n; ++p) mine.push_back(p);
}

}  // namespace

Result<GroupAssignment> AssignRange(std::span<const Member> members,
                                    const PartitionCounts& partitions) {
  GroupAssignment out;
  ASSIGN_OR_RETURN(std::vector<Subscriber> sorted, SortedMembers(members, &out));
  for (const auto& [topic, count] : partitions) {
    if (count <= 0) continue;
    std::vector<const Member*> subscribers;
    for (const Subscriber& s : sorted) {
      if (s.Subscribes(topic)) subscribers.push_back(s.member);
    }
    if (subscribers.empty()) continue;
    const int32_t n = static_cast<int32_t>(subscribers.size());
    const int32_t each = count / n;
    const int32_t extra = count % n;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t first = i * each + std::min(i, extra);
      Give(out[subscribers[i]->member_id], topic, first, each + (i < extra ? 1 : 0));
    }
  }
  return out;
}

Result<GroupAssignment> AssignRoundRobin(std::span<const Member> members,
                                         const PartitionCounts& partitions) {
  GroupAssignment out;
  ASSIGN_OR_RETURN(std::vector<Subscriber> sorted, SortedMembers(members, &out));
  std::set<std::string> topics;
  for (const Member& m : members) {
    topics.insert(m.subscription.topics.begin(), m.subscription.topics.end());
  }
  size_t next = 0;  // the member the next partition is offered to
  for (const std::string& topic : topics) {
    const int32_t count = CountOf(partitions, topic);
    for (int32_t p = 0; p < count; ++p) {
      // Some member subscribes to `topic` (it came from a subscription), so this ends.
      while (!sorted[next].Subscribes(topic)) next = (next + 1) % sorted.size();
      Give(out[sorted[next].member->member_id], topic, p, 1);
      next = (next + 1) % sorted.size();
    }
  }
  return out;
}

std::span<const AssignorInfo> Assignors() {
  static constexpr std::array<AssignorInfo, 3> kAssignors = {{
      {"range", AssignRange, false},
      {"roundrobin", AssignRoundRobin, false},
      {"cooperative-sticky", AssignCooperativeSticky, true},
  }};
  return kAssignors;
}

const AssignorInfo* FindAssignor(std::string_view name) {
  for (const AssignorInfo& a : Assignors()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

Result<GroupAssignment> Assign(std::string_view assignor, std::span<const Member> members,
                               const PartitionCounts& partitions) {
  const AssignorInfo* found = FindAssignor(assignor);
  if (found == nullptr) {
    std::string known;
    for (const AssignorInfo& a : Assignors())
      known += fmt::format("{}{}", known.empty() ? "" : ", ", a.name);
    return InvalidArgumentError("unknown partition assignor '{}' ({})", assignor, known);
  }
  return found->assign(members, partitions);
}

}  // namespace sluice::kafka::group
