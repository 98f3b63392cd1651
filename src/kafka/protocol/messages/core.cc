// Encoding and decoding of the data-path messages (see core.h). Each function follows the
// field list of Kafka's JSON definition for the message, in order, with the version
// condition of each field next to it.
#include "kafka/protocol/messages/core.h"

#include <fmt/format.h>

#include <algorithm>

#include "kafka/protocol/messages/codec_util.h"

namespace sluice::kafka {
namespace {

// First flexible version of each message (the JSON "flexibleVersions").
constexpr int16_t kApiVersionsFlexible = 3;
constexpr int16_t kMetadataFlexible = 9;
constexpr int16_t kProduceFlexible = 9;
constexpr int16_t kFetchFlexible = 12;
constexpr int16_t kListOffsetsFlexible = 6;

using namespace codec;

// A tagged-field section with no known tags: only the unknown ones are read or written.
void ReadUnknownTags(Reader& r, std::vector<RawTaggedField>& unknown) {
  unknown.clear();
  r.TaggedFields([](uint32_t, Reader&) { return false; }, &unknown);
}

void WriteUnknownTags(Writer& w, const std::vector<RawTaggedField>& unknown) {
  w.UnsignedVarint(static_cast<uint32_t>(unknown.size()));
  for (const RawTaggedField& f : unknown) {
    w.TaggedFieldHeader(f.tag, static_cast<uint32_t>(f.data.size()));
    w.Raw(f.data);
  }
}

// Writes a tagged-field section: the known fields present, added in increasing tag order
// with Add(), merged with the struct's unknown ones. Allocates only for a known field that
// is present, which on the hot path is the rare case.
class TagWriter {
 public:
  explicit TagWriter(const std::vector<RawTaggedField>& unknown) : unknown_(unknown) {}

  template <typename F>
  void Add(uint32_t tag, F&& write_value) {
    RawTaggedField& f = known_.emplace_back();
    f.tag = tag;
    Writer sub(&f.data);
    write_value(sub);
  }

  void WriteTo(Writer& w) const {
    w.UnsignedVarint(static_cast<uint32_t>(known_.size() + unknown_.size()));
    size_t k = 0, u = 0;
    while (k < known_.size() || u < unknown_.size()) {
      bool take_known =
          u == unknown_.size() || (k < known_.size() && known_[k].tag < unknown_[u].tag);
      const RawTaggedField& f = take_known ? known_[k++] : unknown_[u++];
      w.TaggedFieldHeader(f.tag, static_cast<uint32_t>(f.data.size()));
      w.Raw(f.data);
    }
  }

 private:
  std::vector<RawTaggedField> known_;
  const std::vector<RawTaggedField>& unknown_;
};

// A string field that becomes nullable from some version: before it, null is written as
// the empty string (Kafka would refuse to serialize it).
void WriteMaybeNullable(Writer& w, bool flexible, bool nullable,
                        const std::optional<std::string>& s) {
  if (nullable) {
    w.NullableString(flexible, s);
  } else {
    w.String(flexible, s ? std::string_view(*s) : std::string_view());
  }
}

std::optional<std::string> ReadMaybeNullable(Reader& r, bool flexible, bool nullable,
                                             const char* field) {
  if (nullable) return r.NullableString(flexible, field);
  return r.String(flexible, field);
}

// The NodeEndpoint of Produce (v10+) and Fetch (v16+) responses: only in flexible versions.
template <typename E>
void ReadNodeEndpoint(Reader& r, E& e) {
  e.node_id = r.Int32("node id");
  e.host = r.String(true, "node host");
  e.port = r.Int32("node port");
  e.rack = r.NullableString(true, "node rack");
  ReadUnknownTags(r, e.unknown_tags);
}

template <typename E>
void WriteNodeEndpoint(Writer& w, const E& e) {
  w.Int32(e.node_id);
  w.String(true, e.host);
  w.Int32(e.port);
  w.NullableString(true, e.rack);
  WriteUnknownTags(w, e.unknown_tags);
}

// node id + host + port + rack + tags, each at its smallest.
constexpr size_t kMinNodeEndpointBytes = 4 + 1 + 4 + 1 + 1;

// LeaderIdAndEpoch as a tagged value (inner tagged fields skipped).
template <typename L>
void ReadLeaderIdAndEpoch(Reader& r, L& l) {
  l.leader_id = r.Int32("current leader id");
  l.leader_epoch = r.Int32("current leader epoch");
  r.TaggedFields([](uint32_t, Reader&) { return false; });
}

template <typename L>
void WriteLeaderIdAndEpoch(Writer& w, const L& l) {
  w.Int32(l.leader_id);
  w.Int32(l.leader_epoch);
  w.EmptyTaggedFields();
}

}  // namespace

bool SameBytes(const std::optional<std::span<const uint8_t>>& a,
               const std::optional<std::span<const uint8_t>>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || std::equal(a->begin(), a->end(), b->begin(), b->end());
}

bool RecordsRef::operator==(const RecordsRef& o) const {
  if (is_splice != o.is_splice) return false;
  if (is_splice) return splice_size == o.splice_size && splice_token == o.splice_token;
  return SameBytes(inline_bytes, o.inline_bytes);
}

// ---------------------------------------------------------------------------------------
// ApiVersions

Status ApiVersionsRequest::Decode(Reader& r, int16_t version) {
  *this = ApiVersionsRequest{};
  if (version >= kApiVersionsFlexible) {
    client_software_name = r.String(true, "client software name");
    client_software_version = r.String(true, "client software version");
    ReadUnknownTags(r, unknown_tags);
  }
  return Finish(r, "ApiVersionsRequest", version);
}

void ApiVersionsRequest::Encode(Writer& w, int16_t version) const {
  if (version >= kApiVersionsFlexible) {
    w.String(true, client_software_name);
    w.String(true, client_software_version);
    WriteUnknownTags(w, unknown_tags);
  }
}

Status ApiVersionsResponse::Decode(Reader& r, int16_t version) {
  *this = ApiVersionsResponse{};
  const bool flex = version >= kApiVersionsFlexible;
  error_code = ReadErrorCode(r, "error code");
  ReadArray(r, flex, "api keys", 6, api_keys, [&](ApiVersion& a) {
    a.api_key = r.Int16("api key");
    a.min_version = r.Int16("min version");
    a.max_version = r.Int16("max version");
    if (flex) ReadUnknownTags(r, a.unknown_tags);
  });
  if (version >= 1) throttle_time_ms = r.Int32("throttle time ms");
  if (flex) {
    r.TaggedFields(
        [&](uint32_t tag, Reader& t) {
          switch (tag) {
            case 0:
              ReadArray(t, true, "supported features", 6, supported_features,
                        [&](SupportedFeatureKey& f) {
                          f.name = t.String(true, "feature name");
                          f.min_version = t.Int16("feature min version");
                          f.max_version = t.Int16("feature max version");
                          ReadUnknownTags(t, f.unknown_tags);
                        });
              return true;
            case 1:
              finalized_features_epoch = t.Int64("finalized features epoch");
              return true;
            case 2:
              ReadArray(t, true, "finalized features", 6, finalized_features,
                        [&](FinalizedFeatureKey& f) {
                          f.name = t.String(true, "feature name");
                          f.max_version_level = t.Int16("feature max version level");
                          f.min_version_level = t.Int16("feature min version level");
                          ReadUnknownTags(t, f.unknown_tags);
                        });
              return true;
            case 3:
              zk_migration_ready = t.Bool("zk migration ready");
              return true;
            default:
              return false;
          }
        },
        &unknown_tags);
  }
  return Finish(r, "ApiVersionsResponse", version);
}

void ApiVersionsResponse::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kApiVersionsFlexible;
  WriteErrorCode(w, error_code);
  WriteArray(w, flex, api_keys, [&](const ApiVersion& a) {
    w.Int16(a.api_key);
    w.Int16(a.min_version);
    w.Int16(a.max_version);
    if (flex) WriteUnknownTags(w, a.unknown_tags);
  });
  if (version >= 1) w.Int32(throttle_time_ms);
  if (!flex) return;
  TagWriter tags(unknown_tags);
  if (!supported_features.empty()) {
    tags.Add(0, [&](Writer& t) {
      WriteArray(t, true, supported_features, [&](const SupportedFeatureKey& f) {
        t.String(true, f.name);
        t.Int16(f.min_version);
        t.Int16(f.max_version);
        WriteUnknownTags(t, f.unknown_tags);
      });
    });
  }
  if (finalized_features_epoch != -1)
    tags.Add(1, [&](Writer& t) { t.Int64(finalized_features_epoch); });
  if (!finalized_features.empty()) {
    tags.Add(2, [&](Writer& t) {
      WriteArray(t, true, finalized_features, [&](const FinalizedFeatureKey& f) {
        t.String(true, f.name);
        t.Int16(f.max_version_level);
        t.Int16(f.min_version_level);
        WriteUnknownTags(t, f.unknown_tags);
      });
    });
  }
  if (zk_migration_ready) tags.Add(3, [&](Writer& t) { t.Bool(true); });
  tags.WriteTo(w);
}

void EncodeApiVersionsV0Fallback(Writer& w, ErrorCode error_code) {
  std::span<const ApiVersionRange> apis = SupportedApis();
  WriteErrorCode(w, error_code);
  w.ArrayLength(false, static_cast<int32_t>(apis.size()));
  for (const ApiVersionRange& supported : apis) {
    const ApiVersionRange a = AdvertisedRange(supported);
    w.Int16(static_cast<int16_t>(a.key));
    w.Int16(a.min);
    w.Int16(a.max);
  }
}

// ---------------------------------------------------------------------------------------
// Metadata

Status MetadataRequest::Decode(Reader& r, int16_t version) {
  *this = MetadataRequest{};
  const bool flex = version >= kMetadataFlexible;
  // topic id + name + tags (v10+), else just the name; each at its smallest.
  const size_t min_topic = version >= 10 ? 16 + 1 + 1 : 2;
  auto read_topic = [&](Topic& t) {
    if (version >= 10) t.topic_id = r.ReadUuid("topic id");
    t.name = ReadMaybeNullable(r, flex, version >= 10, "topic name");
    if (flex) ReadUnknownTags(r, t.unknown_tags);
  };
  if (version >= 1) {
    ReadNullableArray(r, flex, "topics", min_topic, topics, read_topic);
  } else {
    topics.emplace();
    ReadArray(r, flex, "topics", min_topic, *topics, read_topic);
  }
  if (version >= 4) allow_auto_topic_creation = r.Bool("allow auto topic creation");
  if (version >= 8 && version <= 10)
    include_cluster_authorized_operations = r.Bool("include cluster authorized operations");
  if (version >= 8)
    include_topic_authorized_operations = r.Bool("include topic authorized operations");
  if (flex) ReadUnknownTags(r, unknown_tags);
  return Finish(r, "MetadataRequest", version);
}

void MetadataRequest::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kMetadataFlexible;
  if (!topics) {
    w.ArrayLength(flex, version >= 1 ? -1 : 0);  // v0: all topics is the empty array
  } else {
    WriteArray(w, flex, *topics, [&](const Topic& t) {
      if (version >= 10) w.WriteUuid(t.topic_id);
      WriteMaybeNullable(w, flex, version >= 10, t.name);
      if (flex) WriteUnknownTags(w, t.unknown_tags);
    });
  }
  if (version >= 4) w.Bool(allow_auto_topic_creation);
  if (version >= 8 && version <= 10) w.Bool(include_cluster_authorized_operations);
  if (version >= 8) w.Bool(include_topic_authorized_operations);
  if (flex) WriteUnknownTags(w, unknown_tags);
}

Status MetadataResponse::Decode(Reader& r, int16_t version) {
  *this = MetadataResponse{};
  const bool flex = version >= kMetadataFlexible;
  if (version >= 3) throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, flex, "brokers", flex ? 4 + 1 + 4 : 4 + 2 + 4, brokers, [&](Broker& b) {
    b.node_id = r.Int32("broker node id");
    b.host = r.String(flex, "broker host");
    b.port = r.Int32("broker port");
    if (version >= 1) b.rack = r.NullableString(flex, "broker rack");
    if (flex) ReadUnknownTags(r, b.unknown_tags);
  });
  if (version >= 2) cluster_id = r.NullableString(flex, "cluster id");
  if (version >= 1) controller_id = r.Int32("controller id");
  ReadArray(r, flex, "topics", flex ? 2 + 1 + 1 : 2 + 2 + 4, topics, [&](Topic& t) {
    t.error_code = ReadErrorCode(r, "topic error code");
    t.name = ReadMaybeNullable(r, flex, version >= 12, "topic name");
    if (version >= 10) t.topic_id = r.ReadUuid("topic id");
    if (version >= 1) t.is_internal = r.Bool("is internal");
    ReadArray(r, flex, "partitions", flex ? 2 + 4 + 4 + 1 + 1 : 2 + 4 + 4 + 4 + 4, t.partitions,
              [&](Partition& p) {
                p.error_code = ReadErrorCode(r, "partition error code");
                p.partition_index = r.Int32("partition index");
                p.leader_id = r.Int32("leader id");
                if (version >= 7) p.leader_epoch = r.Int32("leader epoch");
                ReadInt32s(r, flex, "replica nodes", p.replica_nodes);
                ReadInt32s(r, flex, "isr nodes", p.isr_nodes);
                if (version >= 5) ReadInt32s(r, flex, "offline replicas", p.offline_replicas);
                if (flex) ReadUnknownTags(r, p.unknown_tags);
              });
    if (version >= 8) t.topic_authorized_operations = r.Int32("topic authorized operations");
    if (flex) ReadUnknownTags(r, t.unknown_tags);
  });
  if (version >= 8 && version <= 10)
    cluster_authorized_operations = r.Int32("cluster authorized operations");
  if (flex) ReadUnknownTags(r, unknown_tags);
  return Finish(r, "MetadataResponse", version);
}

void MetadataResponse::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kMetadataFlexible;
  if (version >= 3) w.Int32(throttle_time_ms);
  WriteArray(w, flex, brokers, [&](const Broker& b) {
    w.Int32(b.node_id);
    w.String(flex, b.host);
    w.Int32(b.port);
    if (version >= 1) w.NullableString(flex, b.rack);
    if (flex) WriteUnknownTags(w, b.unknown_tags);
  });
  if (version >= 2) w.NullableString(flex, cluster_id);
  if (version >= 1) w.Int32(controller_id);
  WriteArray(w, flex, topics, [&](const Topic& t) {
    WriteErrorCode(w, t.error_code);
    WriteMaybeNullable(w, flex, version >= 12, t.name);
    if (version >= 10) w.WriteUuid(t.topic_id);
    if (version >= 1) w.Bool(t.is_internal);
    WriteArray(w, flex, t.partitions, [&](const Partition& p) {
      WriteErrorCode(w, p.error_code);
      w.Int32(p.partition_index);
      w.Int32(p.leader_id);
      if (version >= 7) w.Int32(p.leader_epoch);
      WriteInt32s(w, flex, p.replica_nodes);
      WriteInt32s(w, flex, p.isr_nodes);
      if (version >= 5) WriteInt32s(w, flex, p.offline_replicas);
      if (flex) WriteUnknownTags(w, p.unknown_tags);
    });
    if (version >= 8) w.Int32(t.topic_authorized_operations);
    if (flex) WriteUnknownTags(w, t.unknown_tags);
  });
  if (version >= 8 && version <= 10) w.Int32(cluster_authorized_operations);
  if (flex) WriteUnknownTags(w, unknown_tags);
}

// ---------------------------------------------------------------------------------------
// Produce

Status ProduceRequest::Decode(Reader& r, int16_t version) {
  *this = ProduceRequest{};
  const bool flex = version >= kProduceFlexible;
  if (version >= 3) transactional_id = r.NullableString(flex, "transactional id");
  acks = r.Int16("acks");
  timeout_ms = r.Int32("timeout ms");
  ReadArray(r, flex, "topic data", flex ? 1 + 1 + 1 : 2 + 4, topic_data, [&](TopicData& t) {
    t.name = r.String(flex, "topic name");
    ReadArray(r, flex, "partition data", flex ? 4 + 1 + 1 : 4 + 4, t.partition_data,
              [&](PartitionData& p) {
                p.index = r.Int32("partition index");
                p.records = r.NullableBytesView(flex, "records");
                if (flex) ReadUnknownTags(r, p.unknown_tags);
              });
    if (flex) ReadUnknownTags(r, t.unknown_tags);
  });
  if (flex) ReadUnknownTags(r, unknown_tags);
  return Finish(r, "ProduceRequest", version);
}

void ProduceRequest::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kProduceFlexible;
  if (version >= 3) w.NullableString(flex, transactional_id);
  w.Int16(acks);
  w.Int32(timeout_ms);
  WriteArray(w, flex, topic_data, [&](const TopicData& t) {
    w.String(flex, t.name);
    WriteArray(w, flex, t.partition_data, [&](const PartitionData& p) {
      w.Int32(p.index);
      w.NullableBytesView(flex, p.records);
      if (flex) WriteUnknownTags(w, p.unknown_tags);
    });
    if (flex) WriteUnknownTags(w, t.unknown_tags);
  });
  if (flex) WriteUnknownTags(w, unknown_tags);
}

Status ProduceResponse::Decode(Reader& r, int16_t version) {
  *this = ProduceResponse{};
  const bool flex = version >= kProduceFlexible;
  ReadArray(r, flex, "responses", flex ? 1 + 1 + 1 : 2 + 4, responses,
            [&](TopicProduceResponse& t) {
              t.name = r.String(flex, "topic name");
              ReadArray(r, flex, "partition responses", 4 + 2 + 8, t.partition_responses,
                        [&](PartitionProduceResponse& p) {
                          p.index = r.Int32("partition index");
                          p.error_code = ReadErrorCode(r, "error code");
                          p.base_offset = r.Int64("base offset");
                          if (version >= 2) p.log_append_time_ms = r.Int64("log append time ms");
                          if (version >= 5) p.log_start_offset = r.Int64("log start offset");
                          if (version >= 8) {
                            ReadArray(r, flex, "record errors", flex ? 4 + 1 + 1 : 4 + 2,
                                      p.record_errors, [&](BatchIndexAndErrorMessage& e) {
                                        e.batch_index = r.Int32("batch index");
                                        e.batch_index_error_message =
                                            r.NullableString(flex, "batch index error message");
                                        if (flex) ReadUnknownTags(r, e.unknown_tags);
                                      });
                            p.error_message = r.NullableString(flex, "error message");
                          }
                          if (flex) {
                            r.TaggedFields(
                                [&](uint32_t tag, Reader& tr) {
                                  if (tag == 0 && version >= 10) {
                                    ReadLeaderIdAndEpoch(tr, p.current_leader);
                                    return true;
                                  }
                                  return false;
                                },
                                &p.unknown_tags);
                          }
                        });
              if (flex) ReadUnknownTags(r, t.unknown_tags);
            });
  if (version >= 1) throttle_time_ms = r.Int32("throttle time ms");
  if (flex) {
    r.TaggedFields(
        [&](uint32_t tag, Reader& tr) {
          if (tag == 0 && version >= 10) {
            ReadArray(tr, true, "node endpoints", kMinNodeEndpointBytes, node_endpoints,
                      [&](NodeEndpoint& e) { ReadNodeEndpoint(tr, e); });
            return true;
          }
          return false;
        },
        &unknown_tags);
  }
  return Finish(r, "ProduceResponse", version);
}

void ProduceResponse::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kProduceFlexible;
  WriteArray(w, flex, responses, [&](const TopicProduceResponse& t) {
    w.String(flex, t.name);
    WriteArray(w, flex, t.partition_responses, [&](const PartitionProduceResponse& p) {
      w.Int32(p.index);
      WriteErrorCode(w, p.error_code);
      w.Int64(p.base_offset);
      if (version >= 2) w.Int64(p.log_append_time_ms);
      if (version >= 5) w.Int64(p.log_start_offset);
      if (version >= 8) {
        WriteArray(w, flex, p.record_errors, [&](const BatchIndexAndErrorMessage& e) {
          w.Int32(e.batch_index);
          w.NullableString(flex, e.batch_index_error_message);
          if (flex) WriteUnknownTags(w, e.unknown_tags);
        });
        w.NullableString(flex, p.error_message);
      }
      if (flex) {
        TagWriter tags(p.unknown_tags);
        if (version >= 10 && p.current_leader != LeaderIdAndEpoch{}) {
          tags.Add(0, [&](Writer& tw) { WriteLeaderIdAndEpoch(tw, p.current_leader); });
        }
        tags.WriteTo(w);
      }
    });
    if (flex) WriteUnknownTags(w, t.unknown_tags);
  });
  if (version >= 1) w.Int32(throttle_time_ms);
  if (flex) {
    TagWriter tags(unknown_tags);
    if (version >= 10 && !node_endpoints.empty()) {
      tags.Add(0, [&](Writer& tw) {
        WriteArray(tw, true, node_endpoints,
                   [&](const NodeEndpoint& e) { WriteNodeEndpoint(tw, e); });
      });
    }
    tags.WriteTo(w);
  }
}

// ---------------------------------------------------------------------------------------
// Fetch

Status FetchRequest::Decode(Reader& r, int16_t version) {
  *this = FetchRequest{};
  const bool flex = version >= kFetchFlexible;
  if (version <= 14) replica_id = r.Int32("replica id");
  max_wait_ms = r.Int32("max wait ms");
  min_bytes = r.Int32("min bytes");
  if (version >= 3) max_bytes = r.Int32("max bytes");
  if (version >= 4) isolation_level = r.Int8("isolation level");
  if (version >= 7) {
    session_id = r.Int32("session id");
    session_epoch = r.Int32("session epoch");
  }
  const size_t min_topic = version >= 13 ? 16 + 1 + 1 : (flex ? 1 + 1 + 1 : 2 + 4);
  ReadArray(r, flex, "topics", min_topic, topics, [&](FetchTopic& t) {
    if (version <= 12) t.topic = r.String(flex, "topic name");
    if (version >= 13) t.topic_id = r.ReadUuid("topic id");
    ReadArray(r, flex, "partitions", 4 + 8 + 4, t.partitions, [&](FetchPartition& p) {
      p.partition = r.Int32("partition");
      if (version >= 9) p.current_leader_epoch = r.Int32("current leader epoch");
      p.fetch_offset = r.Int64("fetch offset");
      if (version >= 12) p.last_fetched_epoch = r.Int32("last fetched epoch");
      if (version >= 5) p.log_start_offset = r.Int64("log start offset");
      p.partition_max_bytes = r.Int32("partition max bytes");
      if (flex) ReadUnknownTags(r, p.unknown_tags);
    });
    if (flex) ReadUnknownTags(r, t.unknown_tags);
  });
  if (version >= 7) {
    ReadArray(r, flex, "forgotten topics data", min_topic, forgotten_topics_data,
              [&](ForgottenTopic& t) {
                if (version <= 12) t.topic = r.String(flex, "forgotten topic name");
                if (version >= 13) t.topic_id = r.ReadUuid("forgotten topic id");
                ReadInt32s(r, flex, "forgotten partitions", t.partitions);
                if (flex) ReadUnknownTags(r, t.unknown_tags);
              });
  }
  if (version >= 11) rack_id = r.String(flex, "rack id");
  if (flex) {
    r.TaggedFields(
        [&](uint32_t tag, Reader& t) {
          if (tag == 0) {
            cluster_id = t.NullableString(true, "cluster id");
            return true;
          }
          if (tag == 1 && version >= 15) {
            replica_state.replica_id = t.Int32("replica state id");
            replica_state.replica_epoch = t.Int64("replica state epoch");
            t.TaggedFields([](uint32_t, Reader&) { return false; });
            return true;
          }
          return false;
        },
        &unknown_tags);
  }
  return Finish(r, "FetchRequest", version);
}

void FetchRequest::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kFetchFlexible;
  if (version <= 14) w.Int32(replica_id);
  w.Int32(max_wait_ms);
  w.Int32(min_bytes);
  if (version >= 3) w.Int32(max_bytes);
  if (version >= 4) w.Int8(isolation_level);
  if (version >= 7) {
    w.Int32(session_id);
    w.Int32(session_epoch);
  }
  WriteArray(w, flex, topics, [&](const FetchTopic& t) {
    if (version <= 12) w.String(flex, t.topic);
    if (version >= 13) w.WriteUuid(t.topic_id);
    WriteArray(w, flex, t.partitions, [&](const FetchPartition& p) {
      w.Int32(p.partition);
      if (version >= 9) w.Int32(p.current_leader_epoch);
      w.Int64(p.fetch_offset);
      if (version >= 12) w.Int32(p.last_fetched_epoch);
      if (version >= 5) w.Int64(p.log_start_offset);
      w.Int32(p.partition_max_bytes);
      if (flex) WriteUnknownTags(w, p.unknown_tags);
    });
    if (flex) WriteUnknownTags(w, t.unknown_tags);
  });
  if (version >= 7) {
    WriteArray(w, flex, forgotten_topics_data, [&](const ForgottenTopic& t) {
      if (version <= 12) w.String(flex, t.topic);
      if (version >= 13) w.WriteUuid(t.topic_id);
      WriteInt32s(w, flex, t.partitions);
      if (flex) WriteUnknownTags(w, t.unknown_tags);
    });
  }
  if (version >= 11) w.String(flex, rack_id);
  if (flex) {
    TagWriter tags(unknown_tags);
    if (cluster_id) tags.Add(0, [&](Writer& t) { t.NullableString(true, cluster_id); });
    if (version >= 15 && replica_state != ReplicaState{}) {
      tags.Add(1, [&](Writer& t) {
        t.Int32(replica_state.replica_id);
        t.Int64(replica_state.replica_epoch);
        t.EmptyTaggedFields();
      });
    }
    tags.WriteTo(w);
  }
}

Status FetchResponse::Decode(Reader& r, int16_t version) {
  *this = FetchResponse{};
  const bool flex = version >= kFetchFlexible;
  if (version >= 1) throttle_time_ms = r.Int32("throttle time ms");
  if (version >= 7) {
    error_code = ReadErrorCode(r, "error code");
    session_id = r.Int32("session id");
  }
  const size_t min_topic = version >= 13 ? 16 + 1 + 1 : (flex ? 1 + 1 + 1 : 2 + 4);
  ReadArray(r, flex, "responses", min_topic, responses, [&](FetchableTopicResponse& t) {
    if (version <= 12) t.topic = r.String(flex, "topic name");
    if (version >= 13) t.topic_id = r.ReadUuid("topic id");
    ReadArray(r, flex, "partitions", 4 + 2 + 8 + 1, t.partitions, [&](PartitionData& p) {
      p.partition_index = r.Int32("partition index");
      p.error_code = ReadErrorCode(r, "partition error code");
      p.high_watermark = r.Int64("high watermark");
      if (version >= 4) p.last_stable_offset = r.Int64("last stable offset");
      if (version >= 5) p.log_start_offset = r.Int64("log start offset");
      if (version >= 4) {
        ReadNullableArray(r, flex, "aborted transactions", 16, p.aborted_transactions,
                          [&](AbortedTransaction& a) {
                            a.producer_id = r.Int64("aborted producer id");
                            a.first_offset = r.Int64("aborted first offset");
                            if (flex) ReadUnknownTags(r, a.unknown_tags);
                          });
      }
      if (version >= 11) p.preferred_read_replica = r.Int32("preferred read replica");
      p.records = RecordsRef::Inline(r.NullableBytesView(flex, "records"));
      if (flex) {
        r.TaggedFields(
            [&](uint32_t tag, Reader& tr) {
              switch (tag) {
                case 0:
                  p.diverging_epoch.epoch = tr.Int32("diverging epoch");
                  p.diverging_epoch.end_offset = tr.Int64("diverging end offset");
                  break;
                case 1:
                  ReadLeaderIdAndEpoch(tr, p.current_leader);
                  return true;
                case 2:
                  p.snapshot_id.end_offset = tr.Int64("snapshot end offset");
                  p.snapshot_id.epoch = tr.Int32("snapshot epoch");
                  break;
                default:
                  return false;
              }
              tr.TaggedFields([](uint32_t, Reader&) { return false; });
              return true;
            },
            &p.unknown_tags);
      }
    });
    if (flex) ReadUnknownTags(r, t.unknown_tags);
  });
  if (flex) {
    r.TaggedFields(
        [&](uint32_t tag, Reader& tr) {
          if (tag == 0 && version >= 16) {
            ReadArray(tr, true, "node endpoints", kMinNodeEndpointBytes, node_endpoints,
                      [&](NodeEndpoint& e) { ReadNodeEndpoint(tr, e); });
            return true;
          }
          return false;
        },
        &unknown_tags);
  }
  return Finish(r, "FetchResponse", version);
}

void FetchResponse::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kFetchFlexible;
  if (version >= 1) w.Int32(throttle_time_ms);
  if (version >= 7) {
    WriteErrorCode(w, error_code);
    w.Int32(session_id);
  }
  WriteArray(w, flex, responses, [&](const FetchableTopicResponse& t) {
    if (version <= 12) w.String(flex, t.topic);
    if (version >= 13) w.WriteUuid(t.topic_id);
    WriteArray(w, flex, t.partitions, [&](const PartitionData& p) {
      w.Int32(p.partition_index);
      WriteErrorCode(w, p.error_code);
      w.Int64(p.high_watermark);
      if (version >= 4) w.Int64(p.last_stable_offset);
      if (version >= 5) w.Int64(p.log_start_offset);
      if (version >= 4) {
        if (!p.aborted_transactions) {
          w.ArrayLength(flex, -1);
        } else {
          WriteArray(w, flex, *p.aborted_transactions, [&](const AbortedTransaction& a) {
            w.Int64(a.producer_id);
            w.Int64(a.first_offset);
            if (flex) WriteUnknownTags(w, a.unknown_tags);
          });
        }
      }
      if (version >= 11) w.Int32(p.preferred_read_replica);
      if (p.records.is_splice) {
        // The splice's bytes follow the length prefix on the wire; they never enter the
        // buffer. A records field is at most INT32_MAX bytes in any version.
        SLUICE_ASSERT(p.records.splice_size < static_cast<uint64_t>(INT32_MAX));
        if (flex) {
          w.UnsignedVarint(static_cast<uint32_t>(p.records.splice_size + 1));
        } else {
          w.Int32(static_cast<int32_t>(p.records.splice_size));
        }
        w.AddSplice(p.records.splice_size, p.records.splice_token);
      } else {
        w.NullableBytesView(flex, p.records.inline_bytes);
      }
      if (flex) {
        TagWriter tags(p.unknown_tags);
        if (p.diverging_epoch != EpochEndOffset{}) {
          tags.Add(0, [&](Writer& tw) {
            tw.Int32(p.diverging_epoch.epoch);
            tw.Int64(p.diverging_epoch.end_offset);
            tw.EmptyTaggedFields();
          });
        }
        if (p.current_leader != LeaderIdAndEpoch{}) {
          tags.Add(1, [&](Writer& tw) { WriteLeaderIdAndEpoch(tw, p.current_leader); });
        }
        if (p.snapshot_id != SnapshotId{}) {
          tags.Add(2, [&](Writer& tw) {
            tw.Int64(p.snapshot_id.end_offset);
            tw.Int32(p.snapshot_id.epoch);
            tw.EmptyTaggedFields();
          });
        }
        tags.WriteTo(w);
      }
    });
    if (flex) WriteUnknownTags(w, t.unknown_tags);
  });
  if (flex) {
    TagWriter tags(unknown_tags);
    if (version >= 16 && !node_endpoints.empty()) {
      tags.Add(0, [&](Writer& tw) {
        WriteArray(tw, true, node_endpoints,
                   [&](const NodeEndpoint& e) { WriteNodeEndpoint(tw, e); });
      });
    }
    tags.WriteTo(w);
  }
}

// ---------------------------------------------------------------------------------------
// ListOffsets

Status ListOffsetsRequest::Decode(Reader& r, int16_t version) {
  *this = ListOffsetsRequest{};
  const bool flex = version >= kListOffsetsFlexible;
  replica_id = r.Int32("replica id");
  if (version >= 2) isolation_level = r.Int8("isolation level");
  ReadArray(r, flex, "topics", flex ? 1 + 1 + 1 : 2 + 4, topics, [&](Topic& t) {
    t.name = r.String(flex, "topic name");
    ReadArray(r, flex, "partitions", 4 + 8, t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partition index");
      if (version >= 4) p.current_leader_epoch = r.Int32("current leader epoch");
      p.timestamp = r.Int64("timestamp");
      if (version == 0) p.max_num_offsets = r.Int32("max num offsets");
      if (flex) ReadUnknownTags(r, p.unknown_tags);
    });
    if (flex) ReadUnknownTags(r, t.unknown_tags);
  });
  if (flex) ReadUnknownTags(r, unknown_tags);
  return Finish(r, "ListOffsetsRequest", version);
}

void ListOffsetsRequest::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kListOffsetsFlexible;
  w.Int32(replica_id);
  if (version >= 2) w.Int8(isolation_level);
  WriteArray(w, flex, topics, [&](const Topic& t) {
    w.String(flex, t.name);
    WriteArray(w, flex, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      if (version >= 4) w.Int32(p.current_leader_epoch);
      w.Int64(p.timestamp);
      if (version == 0) w.Int32(p.max_num_offsets);
      if (flex) WriteUnknownTags(w, p.unknown_tags);
    });
    if (flex) WriteUnknownTags(w, t.unknown_tags);
  });
  if (flex) WriteUnknownTags(w, unknown_tags);
}

Status ListOffsetsResponse::Decode(Reader& r, int16_t version) {
  *this = ListOffsetsResponse{};
  const bool flex = version >= kListOffsetsFlexible;
  if (version >= 2) throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, flex, "topics", flex ? 1 + 1 + 1 : 2 + 4, topics, [&](Topic& t) {
    t.name = r.String(flex, "topic name");
    ReadArray(r, flex, "partitions", 4 + 2, t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partition index");
      p.error_code = ReadErrorCode(r, "error code");
      if (version == 0) {
        ReadArray(r, flex, "old style offsets", 8, p.old_style_offsets,
                  [&](int64_t& o) { o = r.Int64("old style offset"); });
      }
      if (version >= 1) {
        p.timestamp = r.Int64("timestamp");
        p.offset = r.Int64("offset");
      }
      if (version >= 4) p.leader_epoch = r.Int32("leader epoch");
      if (flex) ReadUnknownTags(r, p.unknown_tags);
    });
    if (flex) ReadUnknownTags(r, t.unknown_tags);
  });
  if (flex) ReadUnknownTags(r, unknown_tags);
  return Finish(r, "ListOffsetsResponse", version);
}

void ListOffsetsResponse::Encode(Writer& w, int16_t version) const {
  const bool flex = version >= kListOffsetsFlexible;
  if (version >= 2) w.Int32(throttle_time_ms);
  WriteArray(w, flex, topics, [&](const Topic& t) {
    w.String(flex, t.name);
    WriteArray(w, flex, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      WriteErrorCode(w, p.error_code);
      if (version == 0) WriteArray(w, flex, p.old_style_offsets, [&](int64_t o) { w.Int64(o); });
      if (version >= 1) {
        w.Int64(p.timestamp);
        w.Int64(p.offset);
      }
      if (version >= 4) w.Int32(p.leader_epoch);
      if (flex) WriteUnknownTags(w, p.unknown_tags);
    });
    if (flex) WriteUnknownTags(w, t.unknown_tags);
  });
  if (flex) WriteUnknownTags(w, unknown_tags);
}

}  // namespace sluice::kafka
