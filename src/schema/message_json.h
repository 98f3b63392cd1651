// FramedToJson: a Kafka record's bytes in the Confluent framing (magic byte 0, the 4-byte
// big-endian schema id, for Protobuf the message indexes, then the body) decoded with its
// writer schema into one compact JSON document, for people to read (the console's message
// browser). Not a round-trippable encoding: it is made to be read.
//
//   Result<FramedJson> j = FramedToJson(record.value, *source);
//   if (!j.ok() && j.status().code() == StatusCode::kNotFound) { /* show the bytes */ }
//
// The mapping:
// - Avro: records are objects (fields in schema order), arrays, maps objects, enums their
//   symbol, a union its branch's value unwrapped (null is null), bytes and fixed lower-case
//   hex, date "YYYY-MM-DD", time-millis/micros "HH:MM:SS[.f]", timestamp-* RFC 3339 in UTC
//   ("…Z"), local-timestamp-* the same without "Z", decimal its exact decimal text, uuid
//   the text, duration ISO 8601 ("P1M2DT3.500S"); float and double NaN/±Inf as "NaN",
//   "Infinity", "-Infinity"; long as an exact JSON integer; invalid UTF-8 as U+FFFD.
// - Protobuf: proto3's JSON mapping with the fields' names as written in the .proto (not
//   lowerCamelCase json names), only the fields on the wire (no defaults filled in), by
//   field number; int64/uint64 as exact JSON integers (not strings); bytes base64;
//   enums their value's name (the number when the schema names none); repeated fields
//   arrays, maps objects (keys as text; a key sent twice keeps its first place and its last
//   value, as Avro maps), groups objects; a singular message seen twice
//   merged, a oneof's last member kept; Timestamp RFC 3339, Duration "1.5s", wrappers
//   their value, Struct/Value/ListValue the JSON they hold, Empty {}; Any and FieldMask as
//   plain messages; unknown fields skipped; invalid UTF-8 in strings as U+FFFD. Values the
//   framing's message indexes do not name a message of are read as the schema's first
//   message (producers that write no indexes, as decoder_plans.h).
// - JSON Schema: the body parsed (it must be one JSON value) and written back compactly:
//   keys in the order given (repeated keys kept as sent), numbers as written.
//
// Errors name where: "field 'lines[1].qty': truncated or overlong varint at byte 14", the byte
// counted from the start of the value (the framing's 5 bytes included). Nesting deeper than
// kMaxJsonDepth is refused, counts are bounded by the bytes left, and no allocation is
// sized by a number read from the input.
//
// Threads: any; the schema is parsed on every call (SchemaSource caches the text by id).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "schema/schema_source.h"

namespace sluice::schema {

// Deepest nesting of values followed (records, arrays, maps, unions, messages, JSON).
inline constexpr int kMaxJsonDepth = 64;

struct FramedJson {
  std::string json;    // the decoded value as one JSON document (compact, no newlines)
  std::string format;  // "avro", "protobuf" or "json" (JSON Schema)
  int32_t schema_id = 0;
  std::string message;  // Protobuf: the full name of the message type decoded ("" otherwise)
};

// `payload` framed by a Schema Registry (ReadFraming) decoded with its writer schema from
// `source` into JSON. NotFound when the payload is not framed (so the caller shows the bytes
// as they are) or the schema id is unknown; InvalidArgument (naming the byte offset or field
// where it failed) when the body does not decode with that schema, or the registered schema
// itself does not parse; the source's own error when it cannot be asked. Never crashes or
// reads out of bounds on any input.
Result<FramedJson> FramedToJson(std::string_view payload, SchemaSource& source);

}  // namespace sluice::schema
