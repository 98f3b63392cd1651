// Fuzz target for the consumer protocol's structures (pipeline/consumer_group.h), which
// the in-process source reads from other members' JoinGroup metadata and SyncGroup
// assignments. Input: the bytes of one structure. Both decoders run on it; what decodes
// must encode and decode back to the same, and the assignors must take what decoded.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "pipeline/consumer_group.h"

using namespace sluice::pipeline::consumer_group;

namespace {

void Check(bool cond) {
  if (!cond) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  if (auto s = DecodeSubscription(bytes); s.ok()) {
    for (int16_t v = 0; v <= 3; ++v) {
      auto back = DecodeSubscription(EncodeSubscription(*s, v));
      Check(back.ok() && back->topics == s->topics && back->user_data == s->user_data);
    }
    std::map<std::string, int32_t> partitions;
    for (const std::string& t : s->topics) partitions[t] = 1 + static_cast<int32_t>(t.size() % 5);
    for (const char* assignor : {"range", "roundrobin"}) {
      Member a{"a", std::nullopt, *s};
      Member b{"b", std::string("i"), *s};
      auto r = Assign(assignor, {a, b}, partitions);
      Check(r.ok() && r->size() == 2);
      size_t total = 0, want = 0;
      for (const auto& [member, assignment] : *r)
        for (const auto& [topic, parts] : assignment.partitions) total += parts.size();
      for (const auto& [topic, n] : partitions) want += static_cast<size_t>(n);
      Check(total == want);
    }
  }
  if (auto a = DecodeAssignment(bytes); a.ok()) {
    auto back = DecodeAssignment(EncodeAssignment(*a, 0));
    Check(back.ok() && back->partitions == a->partitions && back->user_data == a->user_data);
  }
  return 0;
}
