// The consumer protocol's two structures and the range and roundrobin assignors
// (consumer_group.h).
#include "pipeline/consumer_group.h"

#include <algorithm>
#include <set>

#include "kafka/protocol/wire.h"

namespace sluice::pipeline::consumer_group {
namespace {

constexpr int16_t kMaxVersion = 3;

void WriteTopicPartitions(kafka::Writer& w,
                          const std::map<std::string, std::vector<int32_t>>& tps) {
  w.ArrayLength(false, static_cast<int32_t>(tps.size()));
  for (const auto& [topic, parts] : tps) {
    w.String(false, topic);
    w.ArrayLength(false, static_cast<int32_t>(parts.size()));
    for (int32_t p : parts) w.Int32(p);
  }
}

// [topic, [partition]] as both structures hold them; a topic twice is merged.
std::map<std::string, std::vector<int32_t>> ReadTopicPartitions(kafka::Reader& r,
                                                                const char* field) {
  std::map<std::string, std::vector<int32_t>> out;
  const int32_t n = r.ArrayLength(false, field, 4);
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    std::string topic = r.String(false, "topic");
    const int32_t m = r.ArrayLength(false, "partitions", 4);
    std::vector<int32_t>& parts = out[topic];
    for (int32_t j = 0; j < m && r.ok(); ++j) parts.push_back(r.Int32("partition"));
  }
  return out;
}

// The version a structure starts with; a negative one is malformed.
int16_t ReadVersion(kafka::Reader& r) {
  const int16_t v = r.Int16("version");
  if (r.ok() && v < 0) r.Fail("version", "is negative");
  return std::min(v, kMaxVersion);
}

// Members sorted as Kafka's assignors sort them: by group instance id when every member
// has one (static membership), else by member id.
std::vector<const Member*> Sorted(const std::vector<const Member*>& members) {
  std::vector<const Member*> out = members;
  const bool all_static = std::all_of(
      out.begin(), out.end(), [](const Member* m) { return m->group_instance_id.has_value(); });
  std::sort(out.begin(), out.end(), [all_static](const Member* a, const Member* b) {
    if (all_static && *a->group_instance_id != *b->group_instance_id)
      return *a->group_instance_id < *b->group_instance_id;
    return a->member_id < b->member_id;
  });
  return out;
}

bool Subscribes(const Member& m, const std::string& topic) {
  return std::find(m.subscription.topics.begin(), m.subscription.topics.end(), topic) !=
         m.subscription.topics.end();
}

}  // namespace

std::vector<uint8_t> EncodeSubscription(const Subscription& s, int16_t version) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(version);
  w.ArrayLength(false, static_cast<int32_t>(s.topics.size()));
  for (const std::string& t : s.topics) w.String(false, t);
  w.NullableBytes(false, s.user_data);
  if (version >= 1) WriteTopicPartitions(w, s.owned_partitions);
  if (version >= 2) w.Int32(s.generation_id);
  if (version >= 3) w.NullableString(false, s.rack_id);
  return out;
}

Result<Subscription> DecodeSubscription(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  Subscription s;
  const int16_t version = ReadVersion(r);
  const int32_t n = r.ArrayLength(false, "topics", 2);
  for (int32_t i = 0; i < n && r.ok(); ++i) s.topics.push_back(r.String(false, "topic"));
  // librdkafka and old Java clients may end a v0 subscription without user data.
  if (r.ok() && (r.remaining() > 0 || version > 0))
    s.user_data = r.NullableBytes(false, "user_data");
  if (r.ok() && version >= 1) s.owned_partitions = ReadTopicPartitions(r, "owned_partitions");
  if (r.ok() && version >= 2) s.generation_id = r.Int32("generation_id");
  if (r.ok() && version >= 3) s.rack_id = r.NullableString(false, "rack_id");
  RETURN_IF_ERROR(r.status());
  return s;
}

std::vector<uint8_t> EncodeAssignment(const Assignment& a, int16_t version) {
  std::vector<uint8_t> out;
  kafka::Writer w(&out);
  w.Int16(version);
  WriteTopicPartitions(w, a.partitions);
  w.NullableBytes(false, a.user_data);
  return out;
}

Result<Assignment> DecodeAssignment(std::span<const uint8_t> bytes) {
  kafka::Reader r(bytes);
  Assignment a;
  ReadVersion(r);
  a.partitions = ReadTopicPartitions(r, "assigned_partitions");
  if (r.ok() && r.remaining() > 0) a.user_data = r.NullableBytes(false, "user_data");
  RETURN_IF_ERROR(r.status());
  for (auto& [topic, parts] : a.partitions) {
    std::sort(parts.begin(), parts.end());
    parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
  }
  return a;
}

Result<std::map<std::string, Assignment>> Assign(std::string_view assignor,
                                                 const std::vector<Member>& members,
                                                 const std::map<std::string, int32_t>& partitions) {
  std::map<std::string, Assignment> out;
  for (const Member& m : members) out[m.member_id];
  if (assignor == "range") {
    for (const auto& [topic, count] : partitions) {
      std::vector<const Member*> subscribers;
      for (const Member& m : members) {
        if (Subscribes(m, topic)) subscribers.push_back(&m);
      }
      if (subscribers.empty() || count <= 0) continue;
      subscribers = Sorted(subscribers);
      const int32_t n = static_cast<int32_t>(subscribers.size());
      const int32_t each = count / n;
      const int32_t extra = count % n;
      for (int32_t i = 0; i < n; ++i) {
        const int32_t start = each * i + std::min(i, extra);
        const int32_t length = each + (i < extra ? 1 : 0);
        std::vector<int32_t>& mine = out[subscribers[i]->member_id].partitions[topic];
        for (int32_t p = start; p < start + length; ++p) mine.push_back(p);
        if (mine.empty()) out[subscribers[i]->member_id].partitions.erase(topic);
      }
    }
    return out;
  }
  if (assignor == "roundrobin") {
    std::vector<const Member*> all;
    for (const Member& m : members) all.push_back(&m);
    all = Sorted(all);
    if (all.empty()) return out;
    size_t next = 0;  // the circle's position
    for (const auto& [topic, count] : partitions) {
      bool anyone = false;
      for (const Member* m : all) anyone |= Subscribes(*m, topic);
      if (!anyone) continue;
      for (int32_t p = 0; p < count; ++p) {
        while (!Subscribes(*all[next % all.size()], topic)) ++next;
        out[all[next % all.size()]->member_id].partitions[topic].push_back(p);
        ++next;
      }
    }
    return out;
  }
  return InvalidArgumentError("unknown partition assignor '{}' (range, roundrobin)", assignor);
}

}  // namespace sluice::pipeline::consumer_group
