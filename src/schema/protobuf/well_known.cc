// The well-known types' files, built in so that `import "google/protobuf/timestamp.proto";`
// resolves without a schema reference (as Confluent's registry does). Comments and
// options of the originals are left out; the messages and field numbers are theirs.
#include <cstring>

#include "schema/protobuf/internal.h"

namespace sluice::schema::protobuf::internal {

namespace {

struct Builtin {
  const char* path;
  const char* text;
};

constexpr Builtin kBuiltins[] = {
    {"google/protobuf/timestamp.proto", R"(syntax = "proto3";
package google.protobuf;
message Timestamp {
  int64 seconds = 1;
  int32 nanos = 2;
}
)"},
    {"google/protobuf/duration.proto", R"(syntax = "proto3";
package google.protobuf;
message Duration {
  int64 seconds = 1;
  int32 nanos = 2;
}
)"},
    {"google/protobuf/wrappers.proto", R"(syntax = "proto3";
package google.protobuf;
message DoubleValue { double value = 1; }
message FloatValue { float value = 1; }
message Int64Value { int64 value = 1; }
message UInt64Value { uint64 value = 1; }
message Int32Value { int32 value = 1; }
message UInt32Value { uint32 value = 1; }
message BoolValue { bool value = 1; }
message StringValue { string value = 1; }
message BytesValue { bytes value = 1; }
)"},
    {"google/protobuf/empty.proto", R"(syntax = "proto3";
package google.protobuf;
message Empty {}
)"},
    {"google/protobuf/any.proto", R"(syntax = "proto3";
package google.protobuf;
message Any {
  string type_url = 1;
  bytes value = 2;
}
)"},
    {"google/protobuf/struct.proto", R"(syntax = "proto3";
package google.protobuf;
message Struct {
  map<string, Value> fields = 1;
}
message Value {
  oneof kind {
    NullValue null_value = 1;
    double number_value = 2;
    string string_value = 3;
    bool bool_value = 4;
    Struct struct_value = 5;
    ListValue list_value = 6;
  }
}
enum NullValue {
  NULL_VALUE = 0;
}
message ListValue {
  repeated Value values = 1;
}
)"},
    {"google/protobuf/field_mask.proto", R"(syntax = "proto3";
package google.protobuf;
message FieldMask {
  repeated string paths = 1;
}
)"},
};

}  // namespace

const char* WellKnownText(std::string_view path) {
  for (const Builtin& b : kBuiltins) {
    if (path == b.path) return b.text;
  }
  return nullptr;
}

WellKnown WellKnownOf(const MessageType* m) {
  if (m == nullptr) return WellKnown::kNone;
  std::string_view n = m->full_name;
  constexpr std::string_view kPrefix = "google.protobuf.";
  if (n.substr(0, kPrefix.size()) != kPrefix) return WellKnown::kNone;
  n.remove_prefix(kPrefix.size());
  static constexpr std::pair<std::string_view, WellKnown> kNames[] = {
      {"Timestamp", WellKnown::kTimestamp},     {"Duration", WellKnown::kDuration},
      {"DoubleValue", WellKnown::kDoubleValue}, {"FloatValue", WellKnown::kFloatValue},
      {"Int64Value", WellKnown::kInt64Value},   {"UInt64Value", WellKnown::kUInt64Value},
      {"Int32Value", WellKnown::kInt32Value},   {"UInt32Value", WellKnown::kUInt32Value},
      {"BoolValue", WellKnown::kBoolValue},     {"StringValue", WellKnown::kStringValue},
      {"BytesValue", WellKnown::kBytesValue},   {"Empty", WellKnown::kEmpty},
      {"Struct", WellKnown::kStruct},           {"Value", WellKnown::kValue},
      {"ListValue", WellKnown::kListValue},
  };
  for (const auto& [name, wk] : kNames) {
    if (n == name) return wk;
  }
  return WellKnown::kNone;
}

bool ValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (p < end) {
    if (end - p >= 8) {  // ASCII 8 bytes at a time
      uint64_t w;
      std::memcpy(&w, p, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        p += 8;
        continue;
      }
    }
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int k = 1; k <= n; ++k) {
      if ((p[k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[k] & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    p += n + 1;
  }
  return true;
}

}  // namespace sluice::schema::protobuf::internal

namespace sluice::schema::protobuf {

const char* WellKnownFileText(std::string_view path) { return internal::WellKnownText(path); }

}  // namespace sluice::schema::protobuf
