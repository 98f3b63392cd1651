// Admin and miscellaneous Kafka messages, transcribed by hand from Kafka's JSON
// definitions (CreateTopicsRequest.json and friends). Field comments name the versions
// a field exists in; everything else is in every version.
#include "kafka/protocol/messages/admin.h"

#include <fmt/format.h>

#include "kafka/protocol/messages/codec_util.h"

namespace sluice::kafka {
namespace {

using namespace codec;

// The JSON's validVersions and first flexible version per API.
constexpr ApiSpec kCreateTopics{"CreateTopics", 7, 5};
constexpr ApiSpec kDeleteTopics{"DeleteTopics", 6, 4};
constexpr ApiSpec kCreatePartitions{"CreatePartitions", 3, 2};
constexpr ApiSpec kDescribeConfigs{"DescribeConfigs", 4, 4};
constexpr ApiSpec kAlterConfigs{"AlterConfigs", 2, 2};
constexpr ApiSpec kIncrementalAlterConfigs{"IncrementalAlterConfigs", 1, 1};
constexpr ApiSpec kInitProducerId{"InitProducerId", 5, 2};
constexpr ApiSpec kDeleteRecords{"DeleteRecords", 2, 2};
constexpr ApiSpec kOffsetForLeaderEpoch{"OffsetForLeaderEpoch", 4, 4};
constexpr ApiSpec kDescribeCluster{"DescribeCluster", 1, 0};
constexpr ApiSpec kSaslHandshake{"SaslHandshake", 1, 2};
constexpr ApiSpec kSaslAuthenticate{"SaslAuthenticate", 2, 2};

constexpr size_t Str(bool flexible) { return MinString(flexible); }
constexpr size_t Arr(bool flexible) { return MinArray(flexible); }
constexpr size_t Tags(bool flexible) { return MinTags(flexible); }
ErrorCode ReadError(Reader& r, const char* field) { return ReadErrorCode(r, field); }
void WriteError(Writer& w, ErrorCode e) { WriteErrorCode(w, e); }

}  // namespace

// ---------------------------------------------------------------- CreateTopics

Status CreateTopicsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kCreateTopics, "Request", version));
  *this = {};
  const bool f = version >= kCreateTopics.flexible_from;
  const size_t topic_min = Str(f) + 4 + 2 + Arr(f) + Arr(f) + Tags(f);
  ReadArray(r, f, "topics", topic_min, topics, [&](Topic& t) {
    t.name = r.String(f, "topic name");
    t.num_partitions = r.Int32("num partitions");
    t.replication_factor = r.Int16("replication factor");
    ReadArray(r, f, "assignments", 4 + Arr(f) + Tags(f), t.assignments, [&](Assignment& a) {
      a.partition_index = r.Int32("partition index");
      ReadInt32s(r, f, "broker ids", a.broker_ids);
      ReadTags(r, f, &a.unknown_tags);
    });
    ReadArray(r, f, "configs", Str(f) + Str(f) + Tags(f), t.configs, [&](Config& c) {
      c.name = r.String(f, "config name");
      c.value = r.NullableString(f, "config value");
      ReadTags(r, f, &c.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  timeout_ms = r.Int32("timeout ms");
  if (version >= 1) validate_only = r.Bool("validate only");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kCreateTopics, "Request", version);
}

void CreateTopicsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kCreateTopics.flexible_from;
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    w.Int32(t.num_partitions);
    w.Int16(t.replication_factor);
    WriteArray(w, f, t.assignments, [&](const Assignment& a) {
      w.Int32(a.partition_index);
      WriteInt32s(w, f, a.broker_ids);
      WriteTags(w, f, a.unknown_tags);
    });
    WriteArray(w, f, t.configs, [&](const Config& c) {
      w.String(f, c.name);
      w.NullableString(f, c.value);
      WriteTags(w, f, c.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  w.Int32(timeout_ms);
  if (version >= 1) w.Bool(validate_only);  // Kafka refuses validate_only=true at v0
  WriteTags(w, f, unknown_tags);
}

Status CreateTopicsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kCreateTopics, "Response", version));
  *this = {};
  const bool f = version >= kCreateTopics.flexible_from;
  if (version >= 2) throttle_time_ms = r.Int32("throttle time ms");
  const size_t topic_min = Str(f) + 2 + Tags(f);
  ReadArray(r, f, "topics", topic_min, topics, [&](Topic& t) {
    t.name = r.String(f, "topic name");
    if (version >= 7) t.topic_id = r.ReadUuid("topic id");
    t.error_code = ReadError(r, "error code");
    if (version >= 1) t.error_message = r.NullableString(f, "error message");
    if (version >= 5) {
      t.num_partitions = r.Int32("num partitions");
      t.replication_factor = r.Int16("replication factor");
      ReadNullableArray(r, f, "configs", Str(f) + Str(f) + 1 + 1 + 1 + Tags(f), t.configs,
                        [&](Config& c) {
                          c.name = r.String(f, "config name");
                          c.value = r.NullableString(f, "config value");
                          c.read_only = r.Bool("read only");
                          c.config_source = r.Int8("config source");
                          c.is_sensitive = r.Bool("is sensitive");
                          ReadTags(r, f, &c.unknown_tags);
                        });
    }
    if (f) {
      r.TaggedFields(
          [&](uint32_t tag, Reader& sub) {
            if (tag != 0) return false;
            t.topic_config_error_code = ReadError(sub, "topic config error code");
            return true;
          },
          &t.unknown_tags);
    }
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kCreateTopics, "Response", version);
}

void CreateTopicsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kCreateTopics.flexible_from;
  if (version >= 2) w.Int32(throttle_time_ms);
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    if (version >= 7) w.WriteUuid(t.topic_id);
    WriteError(w, t.error_code);
    if (version >= 1) w.NullableString(f, t.error_message);
    if (version >= 5) {
      w.Int32(t.num_partitions);
      w.Int16(t.replication_factor);
      WriteNullableArray(w, f, t.configs, [&](const Config& c) {
        w.String(f, c.name);
        w.NullableString(f, c.value);
        w.Bool(c.read_only);
        w.Int8(c.config_source);
        w.Bool(c.is_sensitive);
        WriteTags(w, f, c.unknown_tags);
      });
    }
    if (f) {
      // Tag 0 goes first: it is the smallest tag. Like Kafka, it is written only when set.
      const bool has_config_error = t.topic_config_error_code != ErrorCode::kNone;
      w.UnsignedVarint(static_cast<uint32_t>(t.unknown_tags.size() + (has_config_error ? 1 : 0)));
      if (has_config_error) {
        w.TaggedFieldHeader(0, 2);
        WriteError(w, t.topic_config_error_code);
      }
      for (const RawTaggedField& u : t.unknown_tags) {
        w.TaggedFieldHeader(u.tag, static_cast<uint32_t>(u.data.size()));
        w.Raw(u.data);
      }
    }
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DeleteTopics

Status DeleteTopicsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDeleteTopics, "Request", version));
  *this = {};
  const bool f = version >= kDeleteTopics.flexible_from;
  if (version >= 6) {
    ReadArray(r, f, "topics", Str(f) + 16 + Tags(f), topics, [&](Topic& t) {
      t.name = r.NullableString(f, "topic name");
      t.topic_id = r.ReadUuid("topic id");
      ReadTags(r, f, &t.unknown_tags);
    });
  } else {
    ReadStrings(r, f, "topic names", topic_names);
  }
  timeout_ms = r.Int32("timeout ms");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDeleteTopics, "Request", version);
}

void DeleteTopicsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteTopics.flexible_from;
  if (version >= 6) {
    WriteArray(w, f, topics, [&](const Topic& t) {
      w.NullableString(f, t.name);
      w.WriteUuid(t.topic_id);
      WriteTags(w, f, t.unknown_tags);
    });
  } else {
    WriteStrings(w, f, topic_names);
  }
  w.Int32(timeout_ms);
  WriteTags(w, f, unknown_tags);
}

Status DeleteTopicsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDeleteTopics, "Response", version));
  *this = {};
  const bool f = version >= kDeleteTopics.flexible_from;
  if (version >= 1) throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, f, "responses", Str(f) + 2 + Tags(f), responses, [&](Result& t) {
    if (version >= 6) {
      t.name = r.NullableString(f, "topic name");
    } else {
      t.name = r.String(f, "topic name");
    }
    if (version >= 6) t.topic_id = r.ReadUuid("topic id");
    t.error_code = ReadError(r, "error code");
    if (version >= 5) t.error_message = r.NullableString(f, "error message");
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDeleteTopics, "Response", version);
}

void DeleteTopicsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteTopics.flexible_from;
  if (version >= 1) w.Int32(throttle_time_ms);
  WriteArray(w, f, responses, [&](const Result& t) {
    if (version >= 6) {
      w.NullableString(f, t.name);
    } else {
      w.String(f, t.name.value_or(""));  // null is not valid before v6
    }
    if (version >= 6) w.WriteUuid(t.topic_id);
    WriteError(w, t.error_code);
    if (version >= 5) w.NullableString(f, t.error_message);
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- CreatePartitions

Status CreatePartitionsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kCreatePartitions, "Request", version));
  *this = {};
  const bool f = version >= kCreatePartitions.flexible_from;
  ReadArray(r, f, "topics", Str(f) + 4 + Arr(f) + Tags(f), topics, [&](Topic& t) {
    t.name = r.String(f, "topic name");
    t.count = r.Int32("count");
    ReadNullableArray(r, f, "assignments", Arr(f) + Tags(f), t.assignments, [&](Assignment& a) {
      ReadInt32s(r, f, "broker ids", a.broker_ids);
      ReadTags(r, f, &a.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  timeout_ms = r.Int32("timeout ms");
  validate_only = r.Bool("validate only");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kCreatePartitions, "Request", version);
}

void CreatePartitionsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kCreatePartitions.flexible_from;
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    w.Int32(t.count);
    WriteNullableArray(w, f, t.assignments, [&](const Assignment& a) {
      WriteInt32s(w, f, a.broker_ids);
      WriteTags(w, f, a.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  w.Int32(timeout_ms);
  w.Bool(validate_only);
  WriteTags(w, f, unknown_tags);
}

Status CreatePartitionsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kCreatePartitions, "Response", version));
  *this = {};
  const bool f = version >= kCreatePartitions.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, f, "results", Str(f) + 2 + Str(f) + Tags(f), results, [&](Result& t) {
    t.name = r.String(f, "topic name");
    t.error_code = ReadError(r, "error code");
    t.error_message = r.NullableString(f, "error message");
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kCreatePartitions, "Response", version);
}

void CreatePartitionsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kCreatePartitions.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, results, [&](const Result& t) {
    w.String(f, t.name);
    WriteError(w, t.error_code);
    w.NullableString(f, t.error_message);
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DescribeConfigs

Status DescribeConfigsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeConfigs, "Request", version));
  *this = {};
  const bool f = version >= kDescribeConfigs.flexible_from;
  ReadArray(r, f, "resources", 1 + Str(f) + Arr(f) + Tags(f), resources, [&](Resource& res) {
    res.resource_type = r.Int8("resource type");
    res.resource_name = r.String(f, "resource name");
    ReadNullableArray(r, f, "configuration keys", Str(f), res.configuration_keys,
                      [&](std::string& k) { k = r.String(f, "configuration key"); });
    ReadTags(r, f, &res.unknown_tags);
  });
  if (version >= 1) include_synonyms = r.Bool("include synonyms");
  if (version >= 3) include_documentation = r.Bool("include documentation");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeConfigs, "Request", version);
}

void DescribeConfigsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeConfigs.flexible_from;
  WriteArray(w, f, resources, [&](const Resource& res) {
    w.Int8(res.resource_type);
    w.String(f, res.resource_name);
    WriteNullableArray(w, f, res.configuration_keys, [&](const std::string& k) { w.String(f, k); });
    WriteTags(w, f, res.unknown_tags);
  });
  // Kafka refuses non-default values of these in versions without them; skipped here.
  if (version >= 1) w.Bool(include_synonyms);
  if (version >= 3) w.Bool(include_documentation);
  WriteTags(w, f, unknown_tags);
}

Status DescribeConfigsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeConfigs, "Response", version));
  *this = {};
  const bool f = version >= kDescribeConfigs.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  const size_t result_min = 2 + Str(f) + 1 + Str(f) + Arr(f) + Tags(f);
  const size_t config_min =
      Str(f) + Str(f) + 3 + Tags(f);  // + three 1-byte fields in every version
  ReadArray(r, f, "results", result_min, results, [&](Result& res) {
    res.error_code = ReadError(r, "error code");
    res.error_message = r.NullableString(f, "error message");
    res.resource_type = r.Int8("resource type");
    res.resource_name = r.String(f, "resource name");
    ReadArray(r, f, "configs", config_min, res.configs, [&](Config& c) {
      c.name = r.String(f, "config name");
      c.value = r.NullableString(f, "config value");
      c.read_only = r.Bool("read only");
      if (version == 0) c.is_default = r.Bool("is default");
      if (version >= 1) c.config_source = r.Int8("config source");
      c.is_sensitive = r.Bool("is sensitive");
      if (version >= 1) {
        ReadArray(r, f, "synonyms", Str(f) + Str(f) + 1 + Tags(f), c.synonyms, [&](Synonym& s) {
          s.name = r.String(f, "synonym name");
          s.value = r.NullableString(f, "synonym value");
          s.source = r.Int8("synonym source");
          ReadTags(r, f, &s.unknown_tags);
        });
      }
      if (version >= 3) {
        c.config_type = r.Int8("config type");
        c.documentation = r.NullableString(f, "documentation");
      }
      ReadTags(r, f, &c.unknown_tags);
    });
    ReadTags(r, f, &res.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeConfigs, "Response", version);
}

void DescribeConfigsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeConfigs.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, results, [&](const Result& res) {
    WriteError(w, res.error_code);
    w.NullableString(f, res.error_message);
    w.Int8(res.resource_type);
    w.String(f, res.resource_name);
    WriteArray(w, f, res.configs, [&](const Config& c) {
      w.String(f, c.name);
      w.NullableString(f, c.value);
      w.Bool(c.read_only);
      if (version == 0) w.Bool(c.is_default);
      if (version >= 1) w.Int8(c.config_source);
      w.Bool(c.is_sensitive);
      if (version >= 1) {
        WriteArray(w, f, c.synonyms, [&](const Synonym& s) {
          w.String(f, s.name);
          w.NullableString(f, s.value);
          w.Int8(s.source);
          WriteTags(w, f, s.unknown_tags);
        });
      }
      if (version >= 3) {
        w.Int8(c.config_type);
        w.NullableString(f, c.documentation);
      }
      WriteTags(w, f, c.unknown_tags);
    });
    WriteTags(w, f, res.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- AlterConfigs and
// IncrementalAlterConfigs (their responses share a layout)

namespace {

void ReadAlterConfigsResponses(Reader& r, bool f, std::vector<AlterConfigsResourceResponse>& out) {
  ReadArray(r, f, "responses", 2 + Str(f) + 1 + Str(f) + Tags(f), out,
            [&](AlterConfigsResourceResponse& res) {
              res.error_code = ReadError(r, "error code");
              res.error_message = r.NullableString(f, "error message");
              res.resource_type = r.Int8("resource type");
              res.resource_name = r.String(f, "resource name");
              ReadTags(r, f, &res.unknown_tags);
            });
}

void WriteAlterConfigsResponses(Writer& w, bool f,
                                const std::vector<AlterConfigsResourceResponse>& v) {
  WriteArray(w, f, v, [&](const AlterConfigsResourceResponse& res) {
    WriteError(w, res.error_code);
    w.NullableString(f, res.error_message);
    w.Int8(res.resource_type);
    w.String(f, res.resource_name);
    WriteTags(w, f, res.unknown_tags);
  });
}

}  // namespace

Status AlterConfigsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAlterConfigs, "Request", version));
  *this = {};
  const bool f = version >= kAlterConfigs.flexible_from;
  ReadArray(r, f, "resources", 1 + Str(f) + Arr(f) + Tags(f), resources, [&](Resource& res) {
    res.resource_type = r.Int8("resource type");
    res.resource_name = r.String(f, "resource name");
    ReadArray(r, f, "configs", Str(f) + Str(f) + Tags(f), res.configs, [&](Config& c) {
      c.name = r.String(f, "config name");
      c.value = r.NullableString(f, "config value");
      ReadTags(r, f, &c.unknown_tags);
    });
    ReadTags(r, f, &res.unknown_tags);
  });
  validate_only = r.Bool("validate only");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAlterConfigs, "Request", version);
}

void AlterConfigsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAlterConfigs.flexible_from;
  WriteArray(w, f, resources, [&](const Resource& res) {
    w.Int8(res.resource_type);
    w.String(f, res.resource_name);
    WriteArray(w, f, res.configs, [&](const Config& c) {
      w.String(f, c.name);
      w.NullableString(f, c.value);
      WriteTags(w, f, c.unknown_tags);
    });
    WriteTags(w, f, res.unknown_tags);
  });
  w.Bool(validate_only);
  WriteTags(w, f, unknown_tags);
}

Status AlterConfigsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAlterConfigs, "Response", version));
  *this = {};
  const bool f = version >= kAlterConfigs.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  ReadAlterConfigsResponses(r, f, responses);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAlterConfigs, "Response", version);
}

void AlterConfigsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAlterConfigs.flexible_from;
  w.Int32(throttle_time_ms);
  WriteAlterConfigsResponses(w, f, responses);
  WriteTags(w, f, unknown_tags);
}

Status IncrementalAlterConfigsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kIncrementalAlterConfigs, "Request", version));
  *this = {};
  const bool f = version >= kIncrementalAlterConfigs.flexible_from;
  ReadArray(r, f, "resources", 1 + Str(f) + Arr(f) + Tags(f), resources, [&](Resource& res) {
    res.resource_type = r.Int8("resource type");
    res.resource_name = r.String(f, "resource name");
    ReadArray(r, f, "configs", Str(f) + 1 + Str(f) + Tags(f), res.configs, [&](Config& c) {
      c.name = r.String(f, "config name");
      c.config_operation = r.Int8("config operation");
      c.value = r.NullableString(f, "config value");
      ReadTags(r, f, &c.unknown_tags);
    });
    ReadTags(r, f, &res.unknown_tags);
  });
  validate_only = r.Bool("validate only");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kIncrementalAlterConfigs, "Request", version);
}

void IncrementalAlterConfigsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kIncrementalAlterConfigs.flexible_from;
  WriteArray(w, f, resources, [&](const Resource& res) {
    w.Int8(res.resource_type);
    w.String(f, res.resource_name);
    WriteArray(w, f, res.configs, [&](const Config& c) {
      w.String(f, c.name);
      w.Int8(c.config_operation);
      w.NullableString(f, c.value);
      WriteTags(w, f, c.unknown_tags);
    });
    WriteTags(w, f, res.unknown_tags);
  });
  w.Bool(validate_only);
  WriteTags(w, f, unknown_tags);
}

Status IncrementalAlterConfigsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kIncrementalAlterConfigs, "Response", version));
  *this = {};
  const bool f = version >= kIncrementalAlterConfigs.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  ReadAlterConfigsResponses(r, f, responses);
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kIncrementalAlterConfigs, "Response", version);
}

void IncrementalAlterConfigsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kIncrementalAlterConfigs.flexible_from;
  w.Int32(throttle_time_ms);
  WriteAlterConfigsResponses(w, f, responses);
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- InitProducerId

Status InitProducerIdRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kInitProducerId, "Request", version));
  *this = {};
  const bool f = version >= kInitProducerId.flexible_from;
  transactional_id = r.NullableString(f, "transactional id");
  transaction_timeout_ms = r.Int32("transaction timeout ms");
  if (version >= 3) {
    producer_id = r.Int64("producer id");
    producer_epoch = r.Int16("producer epoch");
  }
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kInitProducerId, "Request", version);
}

void InitProducerIdRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kInitProducerId.flexible_from;
  w.NullableString(f, transactional_id);
  w.Int32(transaction_timeout_ms);
  if (version >= 3) {  // Kafka refuses non-default values before v3; skipped here
    w.Int64(producer_id);
    w.Int16(producer_epoch);
  }
  WriteTags(w, f, unknown_tags);
}

Status InitProducerIdResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kInitProducerId, "Response", version));
  *this = {};
  const bool f = version >= kInitProducerId.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadError(r, "error code");
  producer_id = r.Int64("producer id");
  producer_epoch = r.Int16("producer epoch");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kInitProducerId, "Response", version);
}

void InitProducerIdResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kInitProducerId.flexible_from;
  w.Int32(throttle_time_ms);
  WriteError(w, error_code);
  w.Int64(producer_id);
  w.Int16(producer_epoch);
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DeleteRecords

Status DeleteRecordsRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDeleteRecords, "Request", version));
  *this = {};
  const bool f = version >= kDeleteRecords.flexible_from;
  ReadArray(r, f, "topics", Str(f) + Arr(f) + Tags(f), topics, [&](Topic& t) {
    t.name = r.String(f, "topic name");
    ReadArray(r, f, "partitions", 4 + 8 + Tags(f), t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partition index");
      p.offset = r.Int64("offset");
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  timeout_ms = r.Int32("timeout ms");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDeleteRecords, "Request", version);
}

void DeleteRecordsRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteRecords.flexible_from;
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      w.Int64(p.offset);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  w.Int32(timeout_ms);
  WriteTags(w, f, unknown_tags);
}

Status DeleteRecordsResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDeleteRecords, "Response", version));
  *this = {};
  const bool f = version >= kDeleteRecords.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, f, "topics", Str(f) + Arr(f) + Tags(f), topics, [&](Topic& t) {
    t.name = r.String(f, "topic name");
    ReadArray(r, f, "partitions", 4 + 8 + 2 + Tags(f), t.partitions, [&](Partition& p) {
      p.partition_index = r.Int32("partition index");
      p.low_watermark = r.Int64("low watermark");
      p.error_code = ReadError(r, "error code");
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDeleteRecords, "Response", version);
}

void DeleteRecordsResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDeleteRecords.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.name);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition_index);
      w.Int64(p.low_watermark);
      WriteError(w, p.error_code);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- OffsetForLeaderEpoch

Status OffsetForLeaderEpochRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kOffsetForLeaderEpoch, "Request", version));
  *this = {};
  const bool f = version >= kOffsetForLeaderEpoch.flexible_from;
  if (version >= 3) replica_id = r.Int32("replica id");
  ReadArray(r, f, "topics", Str(f) + Arr(f) + Tags(f), topics, [&](Topic& t) {
    t.topic = r.String(f, "topic name");
    ReadArray(r, f, "partitions", 4 + 4 + Tags(f), t.partitions, [&](Partition& p) {
      p.partition = r.Int32("partition");
      if (version >= 2) p.current_leader_epoch = r.Int32("current leader epoch");
      p.leader_epoch = r.Int32("leader epoch");
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kOffsetForLeaderEpoch, "Request", version);
}

void OffsetForLeaderEpochRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kOffsetForLeaderEpoch.flexible_from;
  if (version >= 3) w.Int32(replica_id);
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.topic);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      w.Int32(p.partition);
      if (version >= 2) w.Int32(p.current_leader_epoch);
      w.Int32(p.leader_epoch);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

Status OffsetForLeaderEpochResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kOffsetForLeaderEpoch, "Response", version));
  *this = {};
  const bool f = version >= kOffsetForLeaderEpoch.flexible_from;
  if (version >= 2) throttle_time_ms = r.Int32("throttle time ms");
  ReadArray(r, f, "topics", Str(f) + Arr(f) + Tags(f), topics, [&](Topic& t) {
    t.topic = r.String(f, "topic name");
    ReadArray(r, f, "partitions", 2 + 4 + 8 + Tags(f), t.partitions, [&](Partition& p) {
      p.error_code = ReadError(r, "error code");
      p.partition = r.Int32("partition");
      if (version >= 1) p.leader_epoch = r.Int32("leader epoch");
      p.end_offset = r.Int64("end offset");
      ReadTags(r, f, &p.unknown_tags);
    });
    ReadTags(r, f, &t.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kOffsetForLeaderEpoch, "Response", version);
}

void OffsetForLeaderEpochResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kOffsetForLeaderEpoch.flexible_from;
  if (version >= 2) w.Int32(throttle_time_ms);
  WriteArray(w, f, topics, [&](const Topic& t) {
    w.String(f, t.topic);
    WriteArray(w, f, t.partitions, [&](const Partition& p) {
      WriteError(w, p.error_code);
      w.Int32(p.partition);
      if (version >= 1) w.Int32(p.leader_epoch);
      w.Int64(p.end_offset);
      WriteTags(w, f, p.unknown_tags);
    });
    WriteTags(w, f, t.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- DescribeCluster

Status DescribeClusterRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeCluster, "Request", version));
  *this = {};
  const bool f = version >= kDescribeCluster.flexible_from;
  include_cluster_authorized_operations = r.Bool("include cluster authorized operations");
  if (version >= 1) endpoint_type = r.Int8("endpoint type");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeCluster, "Request", version);
}

void DescribeClusterRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeCluster.flexible_from;
  w.Bool(include_cluster_authorized_operations);
  if (version >= 1) w.Int8(endpoint_type);  // Kafka refuses endpoint_type != 1 at v0
  WriteTags(w, f, unknown_tags);
}

Status DescribeClusterResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeCluster, "Response", version));
  *this = {};
  const bool f = version >= kDescribeCluster.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadError(r, "error code");
  error_message = r.NullableString(f, "error message");
  if (version >= 1) endpoint_type = r.Int8("endpoint type");
  cluster_id = r.String(f, "cluster id");
  controller_id = r.Int32("controller id");
  ReadArray(r, f, "brokers", 4 + Str(f) + 4 + Str(f) + Tags(f), brokers, [&](Broker& b) {
    b.broker_id = r.Int32("broker id");
    b.host = r.String(f, "host");
    b.port = r.Int32("port");
    b.rack = r.NullableString(f, "rack");
    ReadTags(r, f, &b.unknown_tags);
  });
  cluster_authorized_operations = r.Int32("cluster authorized operations");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeCluster, "Response", version);
}

void DescribeClusterResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeCluster.flexible_from;
  w.Int32(throttle_time_ms);
  WriteError(w, error_code);
  w.NullableString(f, error_message);
  if (version >= 1) w.Int8(endpoint_type);
  w.String(f, cluster_id);
  w.Int32(controller_id);
  WriteArray(w, f, brokers, [&](const Broker& b) {
    w.Int32(b.broker_id);
    w.String(f, b.host);
    w.Int32(b.port);
    w.NullableString(f, b.rack);
    WriteTags(w, f, b.unknown_tags);
  });
  w.Int32(cluster_authorized_operations);
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- SaslHandshake

Status SaslHandshakeRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kSaslHandshake, "Request", version));
  *this = {};
  mechanism = r.String(false, "mechanism");
  return Finish(r, kSaslHandshake, "Request", version);
}

void SaslHandshakeRequest::Encode(Writer& w, int16_t version) const { w.String(false, mechanism); }

Status SaslHandshakeResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kSaslHandshake, "Response", version));
  *this = {};
  error_code = ReadError(r, "error code");
  ReadStrings(r, false, "mechanisms", mechanisms);
  return Finish(r, kSaslHandshake, "Response", version);
}

void SaslHandshakeResponse::Encode(Writer& w, int16_t version) const {
  WriteError(w, error_code);
  WriteStrings(w, false, mechanisms);
}

// ---------------------------------------------------------------- SaslAuthenticate

Status SaslAuthenticateRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kSaslAuthenticate, "Request", version));
  *this = {};
  const bool f = version >= kSaslAuthenticate.flexible_from;
  auth_bytes = r.Bytes(f, "auth bytes");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kSaslAuthenticate, "Request", version);
}

void SaslAuthenticateRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kSaslAuthenticate.flexible_from;
  w.Bytes(f, auth_bytes);
  WriteTags(w, f, unknown_tags);
}

Status SaslAuthenticateResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kSaslAuthenticate, "Response", version));
  *this = {};
  const bool f = version >= kSaslAuthenticate.flexible_from;
  error_code = ReadError(r, "error code");
  error_message = r.NullableString(f, "error message");
  auth_bytes = r.Bytes(f, "auth bytes");
  if (version >= 1) session_lifetime_ms = r.Int64("session lifetime ms");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kSaslAuthenticate, "Response", version);
}

void SaslAuthenticateResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kSaslAuthenticate.flexible_from;
  WriteError(w, error_code);
  w.NullableString(f, error_message);
  w.Bytes(f, auth_bytes);
  if (version >= 1) w.Int64(session_lifetime_ms);
  WriteTags(w, f, unknown_tags);
}

}  // namespace sluice::kafka
