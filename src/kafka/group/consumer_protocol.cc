#include "kafka/group/consumer_protocol.h"

#include <fmt/format.h>

#include <algorithm>

#include "kafka/protocol/wire.h"

namespace sluice::kafka::group {
namespace {

// The consumer protocol is never flexible: int16 string lengths, int32 byte and array
// lengths, no tagged fields.
constexpr bool kFlexible = false;

// The smallest encodings, for ArrayLength's bound on counts: a string is at least its
// int16 length, a TopicPartition at least a string and an int32 array length.
constexpr size_t kMinStringBytes = 2;
constexpr size_t kMinTopicPartitionsBytes = kMinStringBytes + 4;
constexpr size_t kPartitionBytes = 4;

int16_t WrittenVersion(int16_t version) {
  SLUICE_ASSERT(version >= 0);
  return std::min(version, kConsumerProtocolVersion);
}

void WriteTopicPartitions(Writer& w, const PartitionsByTopic& by_topic) {
  w.ArrayLength(kFlexible, static_cast<int32_t>(by_topic.size()));
  for (const auto& [topic, partitions] : by_topic) {
    w.String(kFlexible, topic);
    w.ArrayLength(kFlexible, static_cast<int32_t>(partitions.size()));
    for (int32_t p : partitions) w.Int32(p);
  }
}

// A non-nullable array's length: -1 (null) is an error, as in Kafka's generated readers.
int32_t RequiredArrayLength(Reader& r, const char* field, size_t min_element_bytes) {
  int32_t n = r.ArrayLength(kFlexible, field, min_element_bytes);
  if (r.ok() && n < 0) r.Fail(field, "null where an array is required");
  return std::max(n, 0);
}

PartitionsByTopic ReadTopicPartitions(Reader& r, const char* field) {
  PartitionsByTopic out;
  const int32_t n = RequiredArrayLength(r, field, kMinTopicPartitionsBytes);
  for (int32_t i = 0; i < n && r.ok(); ++i) {
    std::vector<int32_t>& partitions = out[r.String(kFlexible, "topic")];
    const int32_t count = RequiredArrayLength(r, "partitions", kPartitionBytes);
    partitions.reserve(partitions.size() + static_cast<size_t>(count));
    for (int32_t k = 0; k < count && r.ok(); ++k) partitions.push_back(r.Int32("partition"));
  }
  for (auto& [topic, partitions] : out) {
    std::sort(partitions.begin(), partitions.end());
    partitions.erase(std::unique(partitions.begin(), partitions.end()), partitions.end());
  }
  return out;
}

// Reads the leading version; the version the fields are read as comes back in `*known`.
int16_t ReadVersion(Reader& r, int16_t* known) {
  const int16_t version = r.Int16("version");
  if (r.ok() && version < 0) r.Fail("version", fmt::format("negative version {}", version));
  *known = std::min(version, kConsumerProtocolVersion);
  return version;
}

// The end of a decode: Reader errors and, for a known version, trailing bytes.
Status Finish(const Reader& r, int16_t version, const char* what) {
  if (r.ok() && version <= kConsumerProtocolVersion && r.remaining() > 0) {
    return InvalidArgumentError("{} v{}: {} bytes after the last field", what, version,
                                r.remaining());
  }
  return r.status().WithContext(what);
}

}  // namespace

std::vector<TopicPartition> Flatten(const PartitionsByTopic& grouped) {
  std::vector<TopicPartition> out;
  for (const auto& [topic, partitions] : grouped) {
    for (int32_t p : partitions) out.push_back({topic, p});
  }
  return out;
}

PartitionsByTopic GroupByTopic(std::span<const TopicPartition> partitions) {
  PartitionsByTopic out;
  for (const TopicPartition& tp : partitions) out[tp.topic].push_back(tp.partition);
  for (auto& [topic, list] : out) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return out;
}

std::vector<uint8_t> Subscription::Encode(int16_t version) const {
  version = WrittenVersion(version);
  std::vector<uint8_t> out;
  Writer w(&out);
  w.Int16(version);
  w.ArrayLength(kFlexible, static_cast<int32_t>(topics.size()));
  for (const std::string& topic : topics) w.String(kFlexible, topic);
  w.NullableBytes(kFlexible, user_data);
  if (version >= 1) WriteTopicPartitions(w, owned_partitions);
  if (version >= 2) w.Int32(generation_id);
  if (version >= 3) w.NullableString(kFlexible, rack_id);
  return out;
}

Result<Subscription> Subscription::Decode(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  int16_t known = 0;
  const int16_t version = ReadVersion(r, &known);
  Subscription s;
  const int32_t n = RequiredArrayLength(r, "topics", kMinStringBytes);
  s.topics.reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n && r.ok(); ++i) s.topics.push_back(r.String(kFlexible, "topic"));
  s.user_data = r.NullableBytes(kFlexible, "user_data");
  if (known >= 1) s.owned_partitions = ReadTopicPartitions(r, "owned_partitions");
  if (known >= 2) s.generation_id = r.Int32("generation_id");
  if (known >= 3) s.rack_id = r.NullableString(kFlexible, "rack_id");
  RETURN_IF_ERROR(Finish(r, version, "ConsumerProtocolSubscription"));
  return s;
}

std::vector<uint8_t> Assignment::Encode(int16_t version) const {
  version = WrittenVersion(version);
  std::vector<uint8_t> out;
  Writer w(&out);
  w.Int16(version);
  WriteTopicPartitions(w, assigned_partitions);
  w.NullableBytes(kFlexible, user_data);
  return out;
}

Result<Assignment> Assignment::Decode(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  int16_t known = 0;
  const int16_t version = ReadVersion(r, &known);
  Assignment a;
  a.assigned_partitions = ReadTopicPartitions(r, "assigned_partitions");
  a.user_data = r.NullableBytes(kFlexible, "user_data");
  RETURN_IF_ERROR(Finish(r, version, "ConsumerProtocolAssignment"));
  return a;
}

}  // namespace sluice::kafka::group
