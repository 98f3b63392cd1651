// Fuzz target for schema/message_json.h (FramedToJson, the console's view of framed
// values). The first byte picks a fixed schema (Avro with every kind of value, a recursive
// Avro record, Protobuf with nested, repeated, map, oneof, group and well-known fields, a
// recursive Protobuf message, JSON Schema); the rest is the body after the framing, or with
// the top bit of the first byte set, the whole value (framing included). Whatever the
// bytes, nothing may crash, the answer is JSON or NotFound/InvalidArgument.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "schema/decoder_plans.h"
#include "schema/message_json.h"
#include "schema/schema_source.h"

using namespace sluice;
using namespace sluice::schema;

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

struct Fixed {
  SchemaType type;
  const char* text;
};

constexpr Fixed kSchemas[] = {
    {SchemaType::kAvro,
     R"({"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"l","type":"long"},
      {"name":"d","type":"double"},{"name":"f","type":"float"},{"name":"b","type":"boolean"},
      {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
      {"name":"day","type":{"type":"int","logicalType":"date"}},
      {"name":"t","type":{"type":"int","logicalType":"time-millis"}},
      {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":60,"scale":4}},
      {"name":"u","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}},
      {"name":"dur","type":{"type":"fixed","name":"D","size":12,"logicalType":"duration"}},
      {"name":"a","type":{"type":"array","items":{"type":"map","values":["null","int","string"]}}},
      {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
      {"name":"z","type":{"type":"array","items":"null"}}]})"},
    {SchemaType::kAvro,
     R"({"type":"record","name":"L","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","L"]}]})"},
    {SchemaType::kProtobuf, R"(syntax = "proto2";
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
message M {
  optional int64 a = 1;
  optional string s = 2;
  repeated sint32 xs = 3 [packed = true];
  map<string, M> kids = 4;
  optional E e = 5;
  oneof o { bytes raw = 6; double d = 7; }
  optional google.protobuf.Timestamp ts = 8;
  optional google.protobuf.Duration dur = 9;
  optional google.protobuf.Struct st = 10;
  optional google.protobuf.Int64Value w = 11;
  repeated group G = 12 { optional fixed64 f = 13; }
  optional M next = 14;
  enum E { X = 0; Y = 1; }
}
message Other { repeated float fs = 1; map<bool, uint64> flags = 2; }
)"},
    {SchemaType::kJson, R"({"type":"object"})"},
};
constexpr size_t kCount = sizeof(kSchemas) / sizeof(kSchemas[0]);

class FixedSource final : public SchemaSource {
 public:
  Result<std::shared_ptr<const SchemaRecord>> ById(int32_t id) override {
    if (id < 1 || static_cast<size_t>(id) > kCount) return NotFoundError("no schema {}", id);
    auto r = std::make_shared<SchemaRecord>();
    r->id = id;
    r->type = kSchemas[id - 1].type;
    r->text = kSchemas[id - 1].text;
    return std::shared_ptr<const SchemaRecord>(std::move(r));
  }
  Result<std::shared_ptr<const SchemaRecord>> Latest(std::string_view) override {
    return NotFoundError("none");
  }
  Result<Registered> Register(std::string_view, SchemaType, std::string_view,
                              const std::vector<registry::SchemaReference>&) override {
    return UnimplementedError("fixed schemas");
  }
  std::string Describe() const override { return "the fuzz target's schemas"; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FixedSource source;
  if (size == 0) return 0;
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  // An allocation of exactly the value's size, so that a read past it is caught by ASan.
  std::string value;
  if ((data[0] & 0x80) != 0) {
    value = rest;
  } else {
    WriteFraming(static_cast<int32_t>(1 + data[0] % kCount), &value);
    value += rest;
  }
  auto copy = std::make_unique<char[]>(value.size());
  std::copy(value.begin(), value.end(), copy.get());
  Result<FramedJson> r = FramedToJson(std::string_view(copy.get(), value.size()), source);
  if (r.ok()) {
    Check(nlohmann::json::accept(r->json));
  } else {
    Check(r.status().code() == StatusCode::kNotFound ||
          r.status().code() == StatusCode::kInvalidArgument);
  }
  return 0;
}
