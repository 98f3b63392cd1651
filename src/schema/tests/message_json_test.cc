// FramedToJson (message_json.h): framed Avro, Protobuf and JSON Schema values as the JSON
// text the console shows, compared exactly. The schemas live in a real Registry over a log
// kept in memory; the values are written by the project's encoders (the lake's Avro
// encoder, FramedEncoder from DuckDB rows) or byte by byte where a case needs bytes no
// encoder writes. Then what hostile bytes get: not framed, unknown ids, every truncation,
// endless varints, lengths past the end, huge counts, deep nesting, random mutations.
#include "schema/message_json.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "duck/database.h"
#include "lake/avro.h"
#include "schema/avro/avro_format.h"
#include "schema/decoder_plans.h"
#include "schema/framed_encoder.h"
#include "schema/protobuf/protobuf_format.h"
#include "schema/protobuf/tests/test_util.h"
#include "schema/registry/registry.h"
#include "schema/registry/tests/memory_log.h"
#include "schema/schema_source.h"
#include "schema/tests/avro_bytes.h"

namespace sluice::schema {
namespace {

using lake::avro::Datum;
using protobuf::testing::Wire;

constexpr const char* kOrderAvro = R"({"type":"record","name":"Order","namespace":"shop","fields":[
  {"name":"id","type":"long"},
  {"name":"customer","type":{"type":"record","name":"Customer","fields":[
    {"name":"name","type":"string"},{"name":"vip","type":"boolean"}]}},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"counts","type":{"type":"map","values":"int"}},
  {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
  {"name":"note","type":["null","string"]},
  {"name":"raw","type":"bytes"},
  {"name":"hash","type":{"type":"fixed","name":"Hash","size":4}},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
  {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
  {"name":"score","type":"double"},
  {"name":"ratio","type":"float"},
  {"name":"big","type":"long"},
  {"name":"at_us","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"local","type":{"type":"long","logicalType":"local-timestamp-millis"}},
  {"name":"tod","type":{"type":"int","logicalType":"time-millis"}},
  {"name":"wait","type":{"type":"fixed","name":"Wait","size":12,"logicalType":"duration"}}]})";

constexpr const char* kOrderProto = R"(syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  string customer = 2;
  Address address = 3;
  repeated Line lines = 4;
  map<string, int32> counts = 5;
  Status status = 6;
  bytes blob = 7;
  google.protobuf.Timestamp at = 8;
  repeated int32 codes = 9;
  uint64 big = 10;
  double score = 11;
  oneof choice {
    string note = 12;
    int32 code = 13;
  }
  sint64 delta = 14;
  float ratio = 15;
  repeated Status history = 16;
  map<int32, Line> by_number = 17;

  message Address { string city = 1; string zip = 2; }
  message Line { string sku = 1; int32 qty = 2; }
  enum Status { UNKNOWN = 0; PAID = 1; SHIPPED = 2; }
}

message Refund {
  int64 order_id = 1;
  Order.Status status = 2;
}
)";

using testing::Framed;
using testing::Str;
using testing::Zigzag;
// Framed Protobuf: the framing, message indexes, the body.
std::string FramedProto(int32_t id, std::vector<int> indexes, std::string_view body) {
  std::string out;
  WriteFraming(id, &out);
  protobuf::WriteMessageIndexes(indexes, &out);
  return out.append(body);
}
uint64_t Signed(int64_t v) { return static_cast<uint64_t>(v); }

class MessageJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log_.registry = &registry_;
    source_ = MakeRegistrySchemaSource(&registry_);
  }

  int32_t Register(std::string_view subject, std::string text,
                   SchemaType type = SchemaType::kAvro) {
    registry::SchemaInput in;
    in.type = type;
    in.text = std::move(text);
    auto r = registry_.Register(subject, in, false);
    EXPECT_TRUE(r.ok()) << r.error.message;
    return r.ok() ? r.value->id : -1;
  }

  // `datum` in Avro binary of `schema_text`, by the lake's encoder.
  static std::string AvroBytes(std::string_view schema_text, const Datum& datum) {
    auto schema = avro::Parse(schema_text);
    EXPECT_TRUE(schema.ok()) << schema.status().ToString();
    if (!schema.ok()) return "";
    std::string out;
    Status st = lake::avro::Encode(schema->root(), datum, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out;
  }

  // The JSON text, or the error as "Code: message".
  std::string Json(std::string_view payload) {
    Result<FramedJson> r = FramedToJson(payload, *source_);
    return r.ok() ? r->json : r.status().ToString();
  }

  // The framed values FramedEncoder writes for the rows of `select`.
  std::vector<std::string> EncodeRows(PayloadFormat format, std::string_view subject,
                                      const std::string& select) {
    auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
    EXPECT_TRUE(db.ok()) << db.status().ToString();
    auto conn = duck::Connection::Open(**db);
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    Status st = (*conn)->Execute("CREATE TABLE t AS " + select);
    EXPECT_TRUE(st.ok()) << st.ToString();
    auto enc = FramedEncoder::Create(source_, format, std::string(subject));
    EXPECT_TRUE(enc.ok()) << enc.status().ToString();
    std::vector<std::string> values;
    st = (*enc)->Encode(**conn, "t", [&](std::string_view v) {
      values.emplace_back(v);
      return Status::OK();
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    return values;
  }

  // Every prefix of `payload` decodes or fails cleanly: NotFound while the framing is cut,
  // InvalidArgument or (where the cut happens to leave a valid value) valid JSON after.
  // Returns how many prefixes decoded.
  int EveryPrefix(const std::string& payload) {
    int decoded = 0;
    for (size_t n = 0; n <= payload.size(); ++n) {
      // A copy of exactly n bytes, so that reading past it is a real overrun.
      std::string cut = payload.substr(0, n);
      Result<FramedJson> r = FramedToJson(cut, *source_);
      if (n < 5) {
        EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << n;
        continue;
      }
      if (r.ok()) {
        ++decoded;
        EXPECT_TRUE(nlohmann::json::accept(r->json)) << n << ": " << r->json;
      } else {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument)
            << n << ": " << r.status().ToString();
      }
    }
    return decoded;
  }

  registry::MemoryLog log_;
  registry::Registry registry_{&log_};
  std::shared_ptr<SchemaSource> source_;
};

Datum FullOrder() {
  return Datum::Record({
      {"id", Datum::Long(42)},
      {"customer", Datum::Record({{"name", Datum::String("Ada \"A\" Lovelace\n")},
                                  {"vip", Datum::Boolean(true)}})},
      {"tags", Datum::Array({Datum::String("gift"), Datum::String("fragile")})},
      {"counts", Datum::Map({{"x", Datum::Int(1)}, {"y", Datum::Int(-2)}})},
      {"status", Datum::Enum("PAID")},
      {"note", Datum::String("leave at the door")},
      {"raw", Datum::Bytes(std::string("\x00\xff\x10", 3))},
      {"hash", Datum::Fixed("\xde\xad\xbe\xef")},
      {"day", Datum::Int(19844)},
      {"at", Datum::Long(1714564800123)},
      {"price", Datum::Bytes("\x30\x39")},  // 12345
      {"ref", Datum::String("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")},
      {"score", Datum::Double(std::numeric_limits<double>::quiet_NaN())},
      {"ratio", Datum::Float(0.1f)},
      {"big", Datum::Long(9007199254740993)},  // 2^53 + 1
      {"at_us", Datum::Long(-1)},
      {"local", Datum::Long(0)},
      {"tod", Datum::Int(45296789)},
      {"wait", Datum::Fixed(std::string("\x01\x00\x00\x00\x02\x00\x00\x00\xac\x0d\x00\x00", 12))},
  });
}

TEST_F(MessageJsonTest, AvroRecordWithEveryKindOfValue) {
  const int32_t id = Register("orders-value", kOrderAvro);
  const std::string payload = Framed(id, AvroBytes(kOrderAvro, FullOrder()));
  Result<FramedJson> r = FramedToJson(payload, *source_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, "avro");
  EXPECT_EQ(r->schema_id, id);
  EXPECT_EQ(r->message, "");
  EXPECT_EQ(r->json,
            R"({"id":42,"customer":{"name":"Ada \"A\" Lovelace\n","vip":true},)"
            R"("tags":["gift","fragile"],"counts":{"x":1,"y":-2},"status":"PAID",)"
            R"("note":"leave at the door","raw":"00ff10","hash":"deadbeef","day":"2024-05-01",)"
            R"("at":"2024-05-01T12:00:00.123Z","price":"123.45",)"
            R"("ref":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","score":"NaN","ratio":0.1,)"
            R"("big":9007199254740993,"at_us":"1969-12-31T23:59:59.999999Z",)"
            R"("local":"1970-01-01T00:00:00","tod":"12:34:56.789","wait":"P1M2DT3.500S"})");

  // The other branches: a null union, an infinite double, a negative decimal, empty
  // containers, dates before 1970.
  Datum other = FullOrder();
  other.Set("note", Datum::Null());
  other.Set("score", Datum::Double(-std::numeric_limits<double>::infinity()));
  other.Set("ratio", Datum::Float(std::numeric_limits<float>::infinity()));
  other.Set("price", Datum::Bytes("\xcf\xc7"));  // -12345
  other.Set("tags", Datum::Array({}));
  other.Set("counts", Datum::Map({}));
  other.Set("day", Datum::Int(-719528));  // 0000-01-01
  other.Set("at", Datum::Long(-62135596800001));
  other.Set("big", Datum::Long(std::numeric_limits<int64_t>::min()));
  other.Set("wait", Datum::Fixed(std::string(12, '\0')));
  EXPECT_EQ(Json(Framed(id, AvroBytes(kOrderAvro, other))),
            R"({"id":42,"customer":{"name":"Ada \"A\" Lovelace\n","vip":true},)"
            R"("tags":[],"counts":{},"status":"PAID",)"
            R"("note":null,"raw":"00ff10","hash":"deadbeef","day":"0000-01-01",)"
            R"("at":"0000-12-31T23:59:59.999Z","price":"-123.45",)"
            R"("ref":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","score":"-Infinity",)"
            R"("ratio":"Infinity","big":-9223372036854775808,)"
            R"("at_us":"1969-12-31T23:59:59.999999Z","local":"1970-01-01T00:00:00",)"
            R"("tod":"12:34:56.789","wait":"PT0S"})");
}

TEST_F(MessageJsonTest, AvroValuesThatAreNotRecords) {
  const int32_t text = Register("a-value", R"("string")");
  EXPECT_EQ(Json(Framed(text, Str("h\xc3\xa9llo \"you\""))), R"("héllo \"you\"")");
  // Invalid UTF-8 is shown as U+FFFD, not refused.
  EXPECT_EQ(Json(Framed(text, Str("a\xff"
                                  "b"))),
            "\"a\xef\xbf\xbd"
            "b\"");

  const int32_t maybe = Register("b-value", R"(["null","long"])");
  EXPECT_EQ(Json(Framed(maybe, Zigzag(0))), "null");
  EXPECT_EQ(Json(Framed(maybe, Zigzag(1) + Zigzag(std::numeric_limits<int64_t>::max()))),
            "9223372036854775807");

  const int32_t list = Register("c-value", R"({"type":"array","items":["null","boolean"]})");
  // Two blocks, the second with a byte size (negative count).
  EXPECT_EQ(Json(Framed(list, Zigzag(2) + Zigzag(1) + "\x01" + Zigzag(0) + Zigzag(-1) + Zigzag(2) +
                                  Zigzag(1) + std::string(1, '\0') + Zigzag(0))),
            "[true,null,false]");

  const int32_t big = Register(
      "d-value",
      R"({"type":"fixed","name":"Big","size":20,"logicalType":"decimal","precision":40,"scale":3})");
  // -1 in 20 bytes, and 10^39 + 1 (more than 128 bits).
  EXPECT_EQ(Json(Framed(big, std::string(20, '\xff'))), R"("-0.001")");
  std::string e39(20, '\0');
  const uint8_t e39_bytes[] = {0x02, 0xf0, 0x50, 0xfe, 0x93, 0x89, 0x43, 0xac, 0xc4,
                               0x5f, 0x65, 0x56, 0x80, 0x00, 0x00, 0x00, 0x01};
  std::memcpy(e39.data() + 3, e39_bytes, sizeof(e39_bytes));
  EXPECT_EQ(Json(Framed(big, e39)), R"("1000000000000000000000000000000000000.001")");
}

TEST_F(MessageJsonTest, AvroRowsWrittenByFramedEncoder) {
  std::vector<std::string> values = EncodeRows(
      PayloadFormat::kAvro, "rows-value",
      "SELECT 1::INTEGER AS id, 'x' AS name, [1, 2] AS nums, {'city': 'Oslo', 'n': 3} AS place, "
      "MAP {'k': 5} AS kv, DATE '2024-05-01' AS day, "
      "TIMESTAMPTZ '2024-05-01 12:00:00.5+00' AS ts, 12.34::DECIMAL(10, 2) AS price, "
      "NULL::VARCHAR AS missing, '\\x01\\x02'::BLOB AS raw, "
      "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::UUID AS u, 12345678901234::BIGINT AS big");
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(Json(values[0]),
            R"({"id":1,"name":"x","nums":[1,2],"place":{"city":"Oslo","n":3},"kv":{"k":5},)"
            R"("day":"2024-05-01","ts":"2024-05-01T12:00:00.500Z","price":"12.34",)"
            R"("missing":null,"raw":"0102","u":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",)"
            R"("big":12345678901234})");
}

// The Order message with every kind of field, written out of order, some twice.
std::string OrderWire() {
  return Wire()
      .Varint(1, Signed(-7))
      .Bytes(2, "Ada")
      .Message(3, Wire().Bytes(1, "Oslo"))
      .Message(4, Wire().Bytes(1, "A-1").Varint(2, 2))
      .Message(4, Wire().Bytes(1, "B-2").Varint(2, 1))
      .Message(5, Wire().Bytes(1, "x").Varint(2, 1))
      .Message(5, Wire().Bytes(1, "y").Varint(2, Signed(-2)))
      .Message(5, Wire().Bytes(1, "x").Varint(2, 3))  // a key again: the last value wins
      .Varint(6, 1)
      .Bytes(7, std::string("\x00\xff", 2))
      .Message(8, Wire().Varint(1, 1714564800).Varint(2, 500000000))
      .Bytes(9, Wire().Raw(1).Raw(2).Raw(300).str())  // packed
      .Varint(9, 4)                                   // and not
      .Varint(10, std::numeric_limits<uint64_t>::max())
      .Double(11, 2.5)
      .Bytes(12, "first")
      .Varint(13, 9)  // the oneof's last member wins
      .Sint(14, -3)
      .Float(15, 0.1f)
      .Varint(16, 2)
      .Varint(16, 7)  // a number the enum does not name
      .Message(17, Wire().Varint(1, 5).Message(2, Wire().Bytes(1, "C-3")))
      .Varint(99, 1)  // unknown fields: skipped
      .Bytes(98, "zzz")
      .Fixed32(97, 1)
      .Fixed64(96, 1)
      .Tag(95, 3)
      .Varint(1, 1)
      .Tag(95, 4)
      .Message(3, Wire().Bytes(2, "0150"))  // merged into the address
      .str();
}

constexpr const char* kOrderJson =
    R"({"id":-7,"customer":"Ada","address":{"city":"Oslo","zip":"0150"},)"
    R"("lines":[{"sku":"A-1","qty":2},{"sku":"B-2","qty":1}],"counts":{"x":3,"y":-2},)"
    R"("status":"PAID","blob":"AP8=","at":"2024-05-01T12:00:00.500Z","codes":[1,2,300,4],)"
    R"("big":18446744073709551615,"score":2.5,"code":9,"delta":-3,"ratio":0.1,)"
    R"("history":["SHIPPED",7],"by_number":{"5":{"sku":"C-3"}}})";

TEST_F(MessageJsonTest, ProtobufMessages) {
  const int32_t id = Register("orders-value", kOrderProto, SchemaType::kProtobuf);
  Result<FramedJson> r = FramedToJson(FramedProto(id, {0}, OrderWire()), *source_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, "protobuf");
  EXPECT_EQ(r->schema_id, id);
  EXPECT_EQ(r->message, "shop.Order");
  EXPECT_EQ(r->json, kOrderJson);

  // The second message of the file, and a nested one.
  r = FramedToJson(FramedProto(id, {1}, Wire().Varint(1, 77).Varint(2, 2).str()), *source_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->message, "shop.Refund");
  EXPECT_EQ(r->json, R"({"order_id":77,"status":"SHIPPED"})");
  r = FramedToJson(FramedProto(id, {0, 0}, Wire().Bytes(1, "Rome").str()), *source_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->message, "shop.Order.Address");
  EXPECT_EQ(r->json, R"({"city":"Rome"})");

  // Sibling messages share nothing: the second line has no sku, the address (another type,
  // read after the lines) none of theirs; a oneof member seen again after the other wins.
  EXPECT_EQ(Json(FramedProto(id, {0},
                             Wire()
                                 .Message(4, Wire().Bytes(1, "A").Varint(2, 1))
                                 .Message(4, Wire().Varint(2, 2))
                                 .Message(3, Wire().Bytes(2, "z"))
                                 .Varint(13, 1)
                                 .Bytes(12, "n")
                                 .str())),
            R"({"address":{"zip":"z"},"lines":[{"sku":"A","qty":1},{"qty":2}],"note":"n"})");

  // Only what is on the wire: an empty message is {}, a field at its default is shown.
  EXPECT_EQ(Json(FramedProto(id, {1}, "")), "{}");
  EXPECT_EQ(Json(FramedProto(id, {1}, Wire().Varint(2, 0).str())), R"({"status":"UNKNOWN"})");
}

TEST_F(MessageJsonTest, ProtobufWithoutMessageIndexesIsTheFirstMessage) {
  const int32_t id = Register("orders-value", kOrderProto, SchemaType::kProtobuf);
  Result<FramedJson> r = FramedToJson(Framed(id, OrderWire()), *source_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->message, "shop.Order");
  EXPECT_EQ(r->json, kOrderJson);
  // Neither indexes nor a first message: both said.
  EXPECT_EQ(Json(Framed(id,
                        "\x0a\x09"
                        "eu")),
            fmt::format("InvalidArgument: the message indexes name no message of schema id {}; "
                        "read without indexes as its first message, shop.Order: field 'id': "
                        "wrong wire type 2 (expected 0) at byte 5",
                        id));
}

TEST_F(MessageJsonTest, ProtobufWellKnownTypesAndGroups) {
  const int32_t id = Register("events-value", R"(syntax = "proto3";
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/any.proto";
import "google/protobuf/timestamp.proto";
message Event {
  google.protobuf.Struct attrs = 1;
  google.protobuf.Value v = 2;
  google.protobuf.ListValue list = 3;
  google.protobuf.Int64Value count = 4;
  google.protobuf.StringValue label = 5;
  google.protobuf.BoolValue flag = 6;
  google.protobuf.Duration took = 7;
  google.protobuf.Empty nothing = 8;
  google.protobuf.Any extra = 9;
  google.protobuf.DoubleValue empty_wrapper = 10;
  google.protobuf.Duration negative = 11;
  google.protobuf.Timestamp bad_time = 12;
}
)",
                              SchemaType::kProtobuf);
  auto entry = [](std::string_view key, const Wire& value) {
    return Wire().Bytes(1, key).Message(2, value);
  };
  const std::string body =
      Wire()
          .Message(1,
                   Wire()
                       .Message(1, entry("a", Wire().Double(2, 1.5)))
                       .Message(1, entry("b", Wire().Bytes(3, "x")))
                       .Message(1, entry("c", Wire().Varint(1, 0)))
                       .Message(1, entry("d", Wire().Message(
                                                  6, Wire()
                                                         .Message(1, Wire().Varint(4, 1))
                                                         .Message(1, Wire().Message(5, Wire()))))))
          .Message(2, Wire().Varint(4, 1))
          .Message(3, Wire().Message(1, Wire().Double(2, 1)).Message(1, Wire().Bytes(3, "s")))
          .Message(4, Wire().Varint(1, 9007199254740993))
          .Message(5, Wire())
          .Message(6, Wire().Varint(1, 1))
          .Message(7, Wire().Varint(1, 1).Varint(2, 500000000))
          .Message(8, Wire())
          .Message(9, Wire().Bytes(1, "type.googleapis.com/x.Y").Bytes(2, "\x08\x01"))
          .Message(10, Wire())
          .Message(11, Wire().Varint(1, Signed(-1)).Varint(2, Signed(-500000000)))
          .Message(12, Wire().Varint(2, 2000000000))  // nanos past a second: its fields
          .str();
  EXPECT_EQ(Json(FramedProto(id, {0}, body)),
            R"({"attrs":{"a":1.5,"b":"x","c":null,"d":[true,{}]},"v":true,"list":[1.0,"s"],)"
            R"("count":9007199254740993,"label":"","flag":true,"took":"1.500s","nothing":{},)"
            R"("extra":{"type_url":"type.googleapis.com/x.Y","value":"CAE="},)"
            R"("empty_wrapper":0.0,"negative":"-1.500s","bad_time":{"nanos":2000000000}})");

  const int32_t legacy = Register("legacy-value", R"(syntax = "proto2";
message Legacy {
  optional int32 a = 1;
  repeated group Item = 2 {
    optional string name = 3;
  }
}
)",
                                  SchemaType::kProtobuf);
  EXPECT_EQ(Json(FramedProto(legacy, {0},
                             Wire()
                                 .Varint(1, 1)
                                 .Tag(2, 3)
                                 .Bytes(3, "x")
                                 .Tag(2, 4)
                                 .Tag(2, 3)
                                 .Bytes(3, "y")
                                 .Tag(2, 4)
                                 .str())),
            R"({"a":1,"item":[{"name":"x"},{"name":"y"}]})");
}

TEST_F(MessageJsonTest, ProtobufRowsWrittenByFramedEncoder) {
  std::vector<std::string> values = EncodeRows(
      PayloadFormat::kProtobuf, "rows-value",
      "SELECT 1::INTEGER AS id, 'x' AS name, [1, 2] AS nums, {'city': 'Oslo', 'n': 3} AS place, "
      "MAP {'k': 5} AS kv, TIMESTAMPTZ '2024-05-01 12:00:00.5+00' AS ts, "
      "NULL::VARCHAR AS missing, '\\x01\\x02'::BLOB AS raw, INTERVAL 90 SECOND AS took, "
      "-12345678901234::BIGINT AS big");
  ASSERT_EQ(values.size(), 1u);
  Result<FramedJson> r = FramedToJson(values[0], *source_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->message, "rows");
  EXPECT_EQ(r->json,
            R"({"id":1,"name":"x","nums":[1,2],"place":{"city":"Oslo","n":3},"kv":{"k":5},)"
            R"("ts":"2024-05-01T12:00:00.500Z","raw":"AQI=","took":"90s","big":-12345678901234})");
}

TEST_F(MessageJsonTest, JsonSchemaValuesAreWrittenBackCompactly) {
  const int32_t id = Register(
      "j-value", R"({"type":"object","properties":{"b":{"type":"integer"}}})", SchemaType::kJson);
  Result<FramedJson> r =
      FramedToJson(Framed(id,
                          " { \"b\" : 1,\n \"a\" : [ true, null, 1.50, \"\xc3\xa9\\n\\u0041\" ], "
                          "\"n\": 18446744073709551615, \"o\": {}, \"e\": [] } "),
                   *source_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, "json");
  EXPECT_EQ(r->message, "");
  EXPECT_EQ(r->json,
            R"({"b":1,"a":[true,null,1.50,"é\nA"],"n":18446744073709551615,"o":{},"e":[]})");

  EXPECT_EQ(Json(Framed(id, "{\"a\":")).rfind("InvalidArgument: not JSON: ", 0), 0u);
  EXPECT_EQ(Json(Framed(id, "")).rfind("InvalidArgument: not JSON: ", 0), 0u);
  EXPECT_EQ(Json(Framed(id, "{} {}")).rfind("InvalidArgument: not JSON: ", 0), 0u);
  EXPECT_EQ(Json(Framed(id, "[1e400]")).rfind("InvalidArgument: not JSON: ", 0), 0u);
  // Invalid UTF-8 is refused, and the message quoting it is itself valid UTF-8.
  const std::string bad_utf8 = Json(Framed(id, "\"\xff\""));
  EXPECT_EQ(bad_utf8.rfind("InvalidArgument: not JSON: ", 0), 0u);
  EXPECT_TRUE(IsValidUtf8(bad_utf8)) << bad_utf8;
  EXPECT_EQ(Json(Framed(id, "[1,]")),
            "InvalidArgument: not JSON: syntax error while parsing value - unexpected ']'; "
            "expected '[', '{', or a literal at byte 8");
}

TEST_F(MessageJsonTest, UnframedValuesAndUnknownIdsAreNotFound) {
  Register("orders-value", kOrderAvro);
  for (std::string_view v :
       {std::string_view(), std::string_view(""), std::string_view("\0\0\0", 3),
        std::string_view("{\"a\":1}"), std::string_view("\x01\x00\x00\x00\x01\x02", 6)}) {
    Result<FramedJson> r = FramedToJson(v, *source_);
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  }
  EXPECT_EQ(Json(Framed(999, Zigzag(1))),
            "NotFound: schema id 999 is unknown to the Schema Registry of this process");
  EXPECT_EQ(Json(Framed(-1, Zigzag(1))).rfind("NotFound: schema id -1 is unknown", 0), 0u);
}

TEST_F(MessageJsonTest, EveryTruncationFailsCleanly) {
  const int32_t avro_id = Register("orders-value", kOrderAvro);
  // An Avro record ends with its last field: no strict prefix is a value.
  EXPECT_EQ(EveryPrefix(Framed(avro_id, AvroBytes(kOrderAvro, FullOrder()))), 1);

  const int32_t proto_id = Register("p-value", kOrderProto, SchemaType::kProtobuf);
  // Protobuf values end at any field: a prefix cut between fields is a (smaller) message.
  const std::string proto = FramedProto(proto_id, {0}, OrderWire());
  const int decoded = EveryPrefix(proto);
  EXPECT_GT(decoded, 1);
  EXPECT_LT(decoded, static_cast<int>(proto.size()) / 2);

  const int32_t json_id = Register("j-value", R"({"type":"object"})", SchemaType::kJson);
  EXPECT_EQ(EveryPrefix(Framed(json_id, R"({"a":[1,"two",{"b":null}],"c":true})")), 1);
}

TEST_F(MessageJsonTest, MalformedAvro) {
  const int32_t id = Register("m-value", R"({"type":"record","name":"R","fields":[
    {"name":"n","type":"long"},{"name":"s","type":"string"},
    {"name":"xs","type":{"type":"array","items":"long"}},
    {"name":"zs","type":{"type":"array","items":"null"}},
    {"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},
    {"name":"u","type":["null","int"]}]})");
  const std::string head = Zigzag(1) + Str("a");  // n, s: bytes 5..7
  const std::string tail = Zigzag(0) + Zigzag(0) + Zigzag(0) + Zigzag(0);
  EXPECT_EQ(Json(Framed(id, head + tail)), R"({"n":1,"s":"a","xs":[],"zs":[],"e":"A","u":null})");
  // Varints that never end.
  EXPECT_EQ(Json(Framed(id, std::string(20, '\xff'))),
            "InvalidArgument: field 'n': varint longer than 10 bytes at byte 5");
  EXPECT_EQ(Json(Framed(id, std::string(4, '\xff'))),
            "InvalidArgument: field 'n': truncated varint at byte 5");
  // Lengths past the end, negative.
  EXPECT_EQ(Json(Framed(id, Zigzag(1) + Zigzag(100) + "abc")),
            "InvalidArgument: field 's': length 100 past the end (3 bytes left) at byte 6");
  EXPECT_EQ(Json(Framed(id, Zigzag(1) + Zigzag(-1))),
            "InvalidArgument: field 's': negative length -1 at byte 6");
  // Counts no bytes could hold, and items that take none.
  EXPECT_EQ(Json(Framed(id, head + Zigzag(int64_t{1} << 40) + Zigzag(1))),
            "InvalidArgument: field 'xs': 1099511627776 items cannot fit in the 1 bytes left at "
            "byte 8");
  EXPECT_EQ(Json(Framed(id, head + Zigzag(0) + Zigzag(1000000000) + Zigzag(0) + Zigzag(0))),
            "InvalidArgument: field 'zs': 1000000000 items that take no bytes (at most 65536) at "
            "byte 9");
  EXPECT_EQ(Json(Framed(id, head + Zigzag(-1) + Zigzag(1000) + Zigzag(5))),
            "InvalidArgument: field 'xs': block size 1000 past the end (1 bytes left) at byte 8");
  // An item that fails names its place.
  EXPECT_EQ(Json(Framed(id, head + Zigzag(2) + Zigzag(7) + "\x80")),
            "InvalidArgument: field 'xs[1]': truncated varint at byte 10");
  // Indexes out of range, trailing bytes.
  EXPECT_EQ(Json(Framed(id, head + Zigzag(0) + Zigzag(0) + Zigzag(1) + Zigzag(0))),
            "InvalidArgument: field 'e': enum index 1 out of range (1 symbols) at byte 10");
  EXPECT_EQ(Json(Framed(id, head + Zigzag(0) + Zigzag(0) + Zigzag(0) + Zigzag(2))),
            "InvalidArgument: field 'u': union index 2 out of range (2 branches) at byte 11");
  EXPECT_EQ(Json(Framed(id, head + Zigzag(0) + Zigzag(0) + Zigzag(0) + Zigzag(1) +
                                Zigzag(int64_t{1} << 31))),
            "InvalidArgument: field 'u': int 2147483648 out of range at byte 12");
  EXPECT_EQ(Json(Framed(id, head + tail + "!")),
            "InvalidArgument: 1 bytes after the end of the value at byte 12");

  const int32_t flag = Register("f-value", R"("boolean")");
  EXPECT_EQ(Json(Framed(flag, "\x02")), "InvalidArgument: invalid boolean byte 2 at byte 5");
  EXPECT_EQ(Json(Framed(flag, "")), "InvalidArgument: truncated boolean at byte 5");
}

TEST_F(MessageJsonTest, MalformedProtobuf) {
  const int32_t id = Register("orders-value", kOrderProto, SchemaType::kProtobuf);
  auto body = [&](std::string_view b) { return Json(FramedProto(id, {0}, b)); };  // at byte 6
  EXPECT_EQ(body(std::string(20, '\xff')), "InvalidArgument: truncated or overlong tag at byte 6");
  EXPECT_EQ(body(Wire().Tag(1, 0).Append(std::string(20, '\x80')).str()),
            "InvalidArgument: field 'id': truncated or overlong varint at byte 7");
  EXPECT_EQ(body(Wire().Tag(2, 2).Raw(100).Append("abc").str()),
            "InvalidArgument: field 'customer': length 100 past the end (3 bytes left) at byte 7");
  EXPECT_EQ(body(Wire().Bytes(1, "x").str()),
            "InvalidArgument: field 'id': wrong wire type 2 (expected 0) at byte 6");
  EXPECT_EQ(body(std::string(1, '\0')), "InvalidArgument: bad field number 0 at byte 6");
  EXPECT_EQ(body(Wire().Tag(99, 7).str()), "InvalidArgument: invalid wire type 7 at byte 6");
  EXPECT_EQ(body(Wire().Tag(99, 4).str()), "InvalidArgument: unexpected end-group tag at byte 6");
  EXPECT_EQ(body(Wire().Tag(50, 3).str()), "InvalidArgument: unterminated group at byte 6");
  EXPECT_EQ(body(Wire().Tag(50, 3).Tag(51, 4).str()),
            "InvalidArgument: end-group tag does not match at byte 8");
  EXPECT_EQ(body(Wire().Tag(11, 1).Append("1234").str()),
            "InvalidArgument: field 'score': truncated fixed64 at byte 7");
  // Failures inside nested messages, lists and maps name the path.
  EXPECT_EQ(body(Wire()
                     .Message(4, Wire().Bytes(1, "A"))
                     .Message(4, Wire().Tag(2, 0).Append("\xff"))
                     .str()),
            "InvalidArgument: field 'lines[1].qty': truncated or overlong varint at byte 14");
  EXPECT_EQ(body(Wire().Message(17, Wire().Varint(1, 5).Message(2, Wire().Varint(1, 1))).str()),
            "InvalidArgument: field 'by_number[\"5\"].sku': wrong wire type 0 (expected 2) at "
            "byte 13");
  EXPECT_EQ(body(Wire().Bytes(9, "\x01\x80").str()),
            "InvalidArgument: field 'codes[1]': truncated or overlong varint at byte 9");
  // A message seen twice is merged: a failure in its second part says where that is.
  EXPECT_EQ(body(Wire().Message(3, Wire().Bytes(1, "a")).Message(3, Wire().Tag(2, 0)).str()),
            "InvalidArgument: field 'address.zip': wrong wire type 0 (expected 2) at byte 13");
  // Message indexes naming no message: the body read as the first message.
  EXPECT_EQ(Json(FramedProto(id, {5}, Wire().Varint(1, 3).str()))
                .rfind("InvalidArgument: the message indexes name no message", 0),
            0u);
}

TEST_F(MessageJsonTest, DeepNestingIsRefused) {
  const int32_t list =
      Register("l-value", R"({"type":"record","name":"L","fields":[{"name":"v","type":"int"},)"
                          R"({"name":"next","type":["null","L"]}]})");
  auto linked = [](int n) {
    std::string b;
    for (int i = 1; i < n; ++i) b += Zigzag(i) + Zigzag(1);
    return b + Zigzag(n) + Zigzag(0);
  };
  EXPECT_EQ(Json(Framed(list, linked(3))), R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})");
  std::string deep = Json(Framed(list, linked(1000)));
  EXPECT_EQ(deep.rfind("InvalidArgument: field 'next.next.next", 0), 0u) << deep;
  EXPECT_NE(deep.find("values nested too deeply at byte"), std::string::npos) << deep;

  const int32_t tree =
      Register("t-value", "syntax = \"proto3\";\nmessage Node { int32 v = 1; Node child = 2; }\n",
               SchemaType::kProtobuf);
  Wire w = Wire().Varint(1, 1000);
  for (int i = 0; i < 1000; ++i) w = Wire().Varint(1, static_cast<uint64_t>(i)).Message(2, w);
  deep = Json(FramedProto(tree, {0}, w.str()));
  EXPECT_EQ(deep.rfind("InvalidArgument: field 'child.child.child", 0), 0u) << deep;
  EXPECT_NE(deep.find("messages nested too deeply at byte"), std::string::npos) << deep;
  Wire shallow = Wire().Varint(1, 2);
  shallow = Wire().Varint(1, 1).Message(2, shallow);
  EXPECT_EQ(Json(FramedProto(tree, {0}, shallow.str())), R"({"v":1,"child":{"v":2}})");

  // Unknown groups inside unknown groups.
  std::string groups;
  for (int i = 0; i < 1000; ++i) groups += Wire().Tag(50, 3).str();
  for (int i = 0; i < 1000; ++i) groups += Wire().Tag(50, 4).str();
  deep = Json(FramedProto(tree, {0}, groups));
  EXPECT_NE(deep.find("groups nested too deeply"), std::string::npos) << deep;

  const int32_t doc = Register("d-value", R"({"type":"array"})", SchemaType::kJson);
  EXPECT_EQ(Json(Framed(doc, std::string(100000, '[') + std::string(100000, ']'))),
            "InvalidArgument: JSON nested deeper than 64 levels at byte 69");
  EXPECT_EQ(Json(Framed(doc, std::string(64, '[') + std::string(64, ']'))),
            std::string(64, '[') + std::string(64, ']'));
}

// Valid values with random bytes changed, cut or grown: every result is JSON, NotFound or
// InvalidArgument, and nothing reads outside the value (each is its own allocation).
TEST_F(MessageJsonTest, MutatedValuesNeverCrash) {
  const int32_t avro_id = Register("orders-value", kOrderAvro);
  const int32_t proto_id = Register("p-value", kOrderProto, SchemaType::kProtobuf);
  const int32_t json_id = Register("j-value", R"({"type":"object"})", SchemaType::kJson);
  const std::vector<std::string> seeds = {
      Framed(avro_id, AvroBytes(kOrderAvro, FullOrder())),
      FramedProto(proto_id, {0}, OrderWire()),
      Framed(proto_id, OrderWire()),
      Framed(json_id, R"({"a":[1,"two",{"b":null}],"c":true})"),
  };
  std::mt19937 rng(20261201);
  int ok = 0, invalid = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string v = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = 5 + rng() % (v.size() - 5);
      switch (rng() % 4) {
        case 0:
          v[at] = static_cast<char>(rng());
          break;
        case 1:
          v[at] = static_cast<char>(v[at] ^ (1 << (rng() % 8)));
          break;
        case 2:
          v.resize(at);
          break;
        default:
          v.insert(at, 1, static_cast<char>(rng()));
          break;
      }
      if (v.size() <= 5) break;
    }
    Result<FramedJson> r = FramedToJson(v, *source_);
    if (r.ok()) {
      ++ok;
      ASSERT_TRUE(nlohmann::json::accept(r->json)) << r->json;
    } else {
      ++invalid;
      ASSERT_TRUE(r.status().code() == StatusCode::kInvalidArgument ||
                  r.status().code() == StatusCode::kNotFound)
          << r.status().ToString();
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(invalid, 0);
}

}  // namespace
}  // namespace sluice::schema
