// Fuzz target for Kafka's embedded consumer protocol (kafka/group/consumer_protocol.h): the
// whole input is decoded as a ConsumerProtocolSubscription and as a
// ConsumerProtocolAssignment, the bytes a group member or leader sends as outside input.
// What decodes must re-encode to bytes that decode back to it. A subscription that decodes is also
// handed, as three members, to every assignor (assignors.h), partition counts taken from the topic
// names, so subscriptions and owned partitions the assignors never see in tests reach them.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <span>
#include <vector>

#include "kafka/group/assignors.h"
#include "kafka/group/consumer_protocol.h"

using namespace sluice;
using namespace sluice::kafka::group;

namespace {

void Check(bool cond) {
  if (!cond) std::abort();
}

// A decoded struct re-encodes, in the input's version, to no more bytes than the input
// (decoding merges a topic listed twice, drops a partition listed twice and passes over a
// newer version's fields), and those bytes decode back to it and encode to themselves.
template <typename T>
void CheckReencodes(const T& decoded, std::span<const uint8_t> in) {
  const auto version = static_cast<int16_t>(static_cast<uint16_t>(in[0] << 8 | in[1]));
  std::vector<uint8_t> out = decoded.Encode(version);
  Check(out.size() <= in.size());
  Result<T> again = T::Decode(out);
  Check(again.ok() && *again == decoded);
  Check(again->Encode(version) == out);
}

void Assign(const Subscription& s) {
  // Few topics and partitions, so that one input stays quick.
  PartitionCounts counts;
  for (const std::string& topic : s.topics) {
    if (counts.size() >= 16) break;
    counts[topic] = static_cast<int32_t>(topic.size() % 7);
  }
  std::vector<Member> members(3);
  for (size_t i = 0; i < members.size(); ++i) {
    members[i].member_id = std::string(1, static_cast<char>('a' + i));
    members[i].subscription = s;
  }
  members[1].subscription.generation_id = s.generation_id / 2;  // older, or the same
  members[1].group_instance_id = s.rack_id;
  members[2].subscription.topics.resize(s.topics.size() / 2);
  members[2].subscription.owned_partitions.clear();
  for (const AssignorInfo& a : Assignors()) {
    Result<GroupAssignment> g = a.assign(members, counts);
    Check(g.ok() && g->size() == members.size());
    // No partition is given twice, and only partitions that exist; a cooperative assignor
    // gives none that another member lists as owned to a member that does not.
    std::set<TopicPartition> seen;
    for (const auto& [id, assignment] : *g) {
      for (const TopicPartition& tp : Flatten(assignment.assigned_partitions)) {
        auto it = counts.find(tp.topic);
        Check(it != counts.end() && tp.partition >= 0 && tp.partition < it->second);
        Check(seen.insert(tp).second);
        if (!a.cooperative) continue;
        bool owned_by_taker = false, owned_by_other = false;
        for (const Member& m : members) {
          const std::vector<TopicPartition> owned = Flatten(m.subscription.owned_partitions);
          const bool owns = std::find(owned.begin(), owned.end(), tp) != owned.end();
          (m.member_id == id ? owned_by_taker : owned_by_other) |= owns;
        }
        Check(owned_by_taker || !owned_by_other);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  Result<Subscription> s = Subscription::Decode(in);
  if (s.ok()) {
    CheckReencodes(*s, in);
    if (s->topics.size() <= 64) Assign(*s);
  }
  Result<Assignment> a = Assignment::Decode(in);
  if (a.ok()) CheckReencodes(*a, in);
  return 0;
}
