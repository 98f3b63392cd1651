// The client quota APIs (KIP-546): DescribeClientQuotas (key 48) and AlterClientQuotas
// (49), v0-1, flexible from v1. Written by hand from Kafka's JSON definitions, with the
// rules of the other message files: every field in order, unknown tagged fields kept, a
// decode error for any malformed input.
//
// v1 changes only the encoding (compact strings and arrays, tagged fields), no field. A
// quota value is a float64: a big-endian IEEE 754 double on the wire, read and written bit
// for bit (NaN payloads and -0.0 included), so what is decoded re-encodes unchanged
// (operator== compares them as doubles, so a struct holding a NaN is unequal to itself). The
// entity types ("user", "client-id", "ip") and the match type are kept as sent: whoever
// answers checks them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

struct DescribeClientQuotasRequest {
  struct Component {  // ComponentData
    std::string entity_type;
    int8_t match_type = 0;             // 0 the exact name `match`, 1 the default, 2 any name
    std::optional<std::string> match;  // null unless match_type is 0
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Component&) const = default;
  };
  std::vector<Component> components;
  bool strict = false;  // true: leave out entities with types no component names
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeClientQuotasRequest&) const = default;
};

struct DescribeClientQuotasResponse {
  struct Entity {  // EntityData
    std::string entity_type;
    std::optional<std::string> entity_name;  // null: the default entity of the type
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Entity&) const = default;
  };
  struct Value {  // ValueData
    std::string key;
    double value = 0;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Value&) const = default;
  };
  struct Entry {  // EntryData
    std::vector<Entity> entity;
    std::vector<Value> values;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Entry&) const = default;
  };
  int32_t throttle_time_ms = 0;
  ErrorCode error_code = ErrorCode::kNone;
  std::optional<std::string> error_message;
  std::optional<std::vector<Entry>> entries = std::vector<Entry>{};  // null with an error
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const DescribeClientQuotasResponse&) const = default;
};

struct AlterClientQuotasRequest {
  struct Entity {  // EntityData
    std::string entity_type;
    std::optional<std::string> entity_name;  // null: the default entity of the type
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Entity&) const = default;
  };
  struct Op {  // OpData
    std::string key;
    double value = 0;     // ignored when `remove`
    bool remove = false;  // true: remove the key, false: set it to `value`
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Op&) const = default;
  };
  struct Entry {  // EntryData
    std::vector<Entity> entity;
    std::vector<Op> ops;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Entry&) const = default;
  };
  std::vector<Entry> entries;
  bool validate_only = false;
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AlterClientQuotasRequest&) const = default;
};

struct AlterClientQuotasResponse {
  struct Entity {  // EntityData
    std::string entity_type;
    std::optional<std::string> entity_name;  // null: the default entity of the type
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Entity&) const = default;
  };
  struct Entry {  // EntryData
    ErrorCode error_code = ErrorCode::kNone;
    std::optional<std::string> error_message;
    std::vector<Entity> entity;
    std::vector<RawTaggedField> unknown_tags;
    bool operator==(const Entry&) const = default;
  };
  int32_t throttle_time_ms = 0;
  std::vector<Entry> entries;  // one per request entry, in order
  std::vector<RawTaggedField> unknown_tags;

  Status Decode(Reader& r, int16_t version);
  void Encode(Writer& w, int16_t version) const;
  bool operator==(const AlterClientQuotasResponse&) const = default;
};

}  // namespace sluice::kafka
