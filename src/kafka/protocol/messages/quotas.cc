// Codecs of the client quota APIs; field order and versions follow Kafka's JSON
// definitions (quotas.h). Flexible versions from v1; no field depends on the version.
#include "kafka/protocol/messages/quotas.h"

#include "kafka/protocol/messages/codec_util.h"

namespace sluice::kafka {
namespace {

using namespace codec;

constexpr ApiSpec kDescribeClientQuotas{"DescribeClientQuotas", 1, 1};
constexpr ApiSpec kAlterClientQuotas{"AlterClientQuotas", 1, 1};

// The smallest encodings of the elements both APIs share, for ArrayLength's bound.
constexpr size_t MinEntity(bool f) { return 2 * MinString(f) + MinTags(f); }
constexpr size_t kFloat64Bytes = 8;

// EntityData: the same fields in all three messages that have it.
template <typename Entity>
void ReadEntity(Reader& r, bool f, std::vector<Entity>& out) {
  ReadArray(r, f, "entity", MinEntity(f), out, [&](Entity& e) {
    e.entity_type = r.String(f, "entity type");
    e.entity_name = r.NullableString(f, "entity name");
    ReadTags(r, f, &e.unknown_tags);
  });
}

template <typename Entity>
void WriteEntity(Writer& w, bool f, const std::vector<Entity>& entity) {
  WriteArray(w, f, entity, [&](const Entity& e) {
    w.String(f, e.entity_type);
    w.NullableString(f, e.entity_name);
    WriteTags(w, f, e.unknown_tags);
  });
}

}  // namespace

// ---------------------------------------------------------------- DescribeClientQuotas

Status DescribeClientQuotasRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeClientQuotas, "Request", version));
  *this = {};
  const bool f = version >= kDescribeClientQuotas.flexible_from;
  const size_t component_min = MinString(f) + 1 + MinString(f) + MinTags(f);
  ReadArray(r, f, "components", component_min, components, [&](Component& c) {
    c.entity_type = r.String(f, "entity type");
    c.match_type = r.Int8("match type");
    c.match = r.NullableString(f, "match");
    ReadTags(r, f, &c.unknown_tags);
  });
  strict = r.Bool("strict");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeClientQuotas, "Request", version);
}

void DescribeClientQuotasRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeClientQuotas.flexible_from;
  WriteArray(w, f, components, [&](const Component& c) {
    w.String(f, c.entity_type);
    w.Int8(c.match_type);
    w.NullableString(f, c.match);
    WriteTags(w, f, c.unknown_tags);
  });
  w.Bool(strict);
  WriteTags(w, f, unknown_tags);
}

Status DescribeClientQuotasResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kDescribeClientQuotas, "Response", version));
  *this = {};
  const bool f = version >= kDescribeClientQuotas.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  error_code = ReadErrorCode(r, "error code");
  error_message = r.NullableString(f, "error message");
  const size_t entry_min = 2 * MinArray(f) + MinTags(f);
  const size_t value_min = MinString(f) + kFloat64Bytes + MinTags(f);
  ReadNullableArray(r, f, "entries", entry_min, entries, [&](Entry& e) {
    ReadEntity(r, f, e.entity);
    ReadArray(r, f, "values", value_min, e.values, [&](Value& v) {
      v.key = r.String(f, "key");
      v.value = r.Float64("value");
      ReadTags(r, f, &v.unknown_tags);
    });
    ReadTags(r, f, &e.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kDescribeClientQuotas, "Response", version);
}

void DescribeClientQuotasResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kDescribeClientQuotas.flexible_from;
  w.Int32(throttle_time_ms);
  WriteErrorCode(w, error_code);
  w.NullableString(f, error_message);
  WriteNullableArray(w, f, entries, [&](const Entry& e) {
    WriteEntity(w, f, e.entity);
    WriteArray(w, f, e.values, [&](const Value& v) {
      w.String(f, v.key);
      w.Float64(v.value);
      WriteTags(w, f, v.unknown_tags);
    });
    WriteTags(w, f, e.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

// ---------------------------------------------------------------- AlterClientQuotas

Status AlterClientQuotasRequest::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAlterClientQuotas, "Request", version));
  *this = {};
  const bool f = version >= kAlterClientQuotas.flexible_from;
  const size_t entry_min = 2 * MinArray(f) + MinTags(f);
  const size_t op_min = MinString(f) + kFloat64Bytes + 1 + MinTags(f);
  ReadArray(r, f, "entries", entry_min, entries, [&](Entry& e) {
    ReadEntity(r, f, e.entity);
    ReadArray(r, f, "ops", op_min, e.ops, [&](Op& op) {
      op.key = r.String(f, "key");
      op.value = r.Float64("value");
      op.remove = r.Bool("remove");
      ReadTags(r, f, &op.unknown_tags);
    });
    ReadTags(r, f, &e.unknown_tags);
  });
  validate_only = r.Bool("validate only");
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAlterClientQuotas, "Request", version);
}

void AlterClientQuotasRequest::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAlterClientQuotas.flexible_from;
  WriteArray(w, f, entries, [&](const Entry& e) {
    WriteEntity(w, f, e.entity);
    WriteArray(w, f, e.ops, [&](const Op& op) {
      w.String(f, op.key);
      w.Float64(op.value);
      w.Bool(op.remove);
      WriteTags(w, f, op.unknown_tags);
    });
    WriteTags(w, f, e.unknown_tags);
  });
  w.Bool(validate_only);
  WriteTags(w, f, unknown_tags);
}

Status AlterClientQuotasResponse::Decode(Reader& r, int16_t version) {
  RETURN_IF_ERROR(CheckVersion(kAlterClientQuotas, "Response", version));
  *this = {};
  const bool f = version >= kAlterClientQuotas.flexible_from;
  throttle_time_ms = r.Int32("throttle time ms");
  const size_t entry_min = 2 + MinString(f) + MinArray(f) + MinTags(f);
  ReadArray(r, f, "entries", entry_min, entries, [&](Entry& e) {
    e.error_code = ReadErrorCode(r, "error code");
    e.error_message = r.NullableString(f, "error message");
    ReadEntity(r, f, e.entity);
    ReadTags(r, f, &e.unknown_tags);
  });
  ReadTags(r, f, &unknown_tags);
  return Finish(r, kAlterClientQuotas, "Response", version);
}

void AlterClientQuotasResponse::Encode(Writer& w, int16_t version) const {
  const bool f = version >= kAlterClientQuotas.flexible_from;
  w.Int32(throttle_time_ms);
  WriteArray(w, f, entries, [&](const Entry& e) {
    WriteErrorCode(w, e.error_code);
    w.NullableString(f, e.error_message);
    WriteEntity(w, f, e.entity);
    WriteTags(w, f, e.unknown_tags);
  });
  WriteTags(w, f, unknown_tags);
}

}  // namespace sluice::kafka
