// Internal to src/schema/protobuf: the pieces the public functions are built from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema::protobuf::internal {

// .proto text into a File (types not yet resolved). InvalidArgument "line:col: ...".
Result<File> ParseProtoText(std::string_view text, std::string name);

// A serialized FileDescriptorProto into a File (map entries become map fields, proto3
// optional's synthetic oneofs are dropped).
Result<File> ParseDescriptor(std::string_view bytes);

// Whether `text` looks like base64 (no .proto can: it needs a space or a ';').
bool LooksLikeBase64(std::string_view text);
bool Base64Decode(std::string_view text, std::string* out);

// The built-in text of a well-known type's file ("google/protobuf/timestamp.proto"), or
// nullptr.
const char* WellKnownText(std::string_view path);

// A string as a .proto string literal, quoted.
std::string QuoteString(std::string_view s);

// The bytes of a varint at `*p` (< end), advancing `*p`; false when truncated or longer
// than 10 bytes.
inline bool ReadVarint(const uint8_t** p, const uint8_t* end, uint64_t* out) {
  const uint8_t* q = *p;
  if (q < end && *q < 0x80) {
    *out = *q;
    *p = q + 1;
    return true;
  }
  uint64_t v = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (q >= end) return false;
    uint8_t b = *q++;
    if (shift == 63 && b > 1) return false;  // more than 64 bits
    v |= uint64_t{b & 0x7fu} << shift;
    if (b < 0x80) {
      *out = v;
      *p = q;
      return true;
    }
  }
  return false;
}

inline void WriteVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The wire type of a field of type `t`: 0 varint, 1 fixed64, 2 length-delimited, 3 group
// (its start), 5 fixed32.
inline uint8_t WireTypeOf(FieldType t) {
  switch (t) {
    case FieldType::kDouble:
    case FieldType::kFixed64:
    case FieldType::kSfixed64:
      return 1;
    case FieldType::kFloat:
    case FieldType::kFixed32:
    case FieldType::kSfixed32:
      return 5;
    case FieldType::kString:
    case FieldType::kBytes:
    case FieldType::kMessage:
      return 2;
    case FieldType::kGroup:
      return 3;
    default:
      return 0;
  }
}

inline uint64_t ZigZag64(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag64(uint64_t v) { return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1)); }

// Well-known message types with a DuckDB form of their own.
enum class WellKnown : uint8_t {
  kNone,
  kTimestamp,
  kDuration,
  kDoubleValue,
  kFloatValue,
  kInt64Value,
  kUInt64Value,
  kInt32Value,
  kUInt32Value,
  kBoolValue,
  kStringValue,
  kBytesValue,
  kEmpty,
  kStruct,  // Struct, Value, ListValue: JSON text
  kValue,
  kListValue,
};
WellKnown WellKnownOf(const MessageType* m);

// Whether `s` is valid UTF-8.
bool ValidUtf8(std::string_view s);

}  // namespace sluice::schema::protobuf::internal
