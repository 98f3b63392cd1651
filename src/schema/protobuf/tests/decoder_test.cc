// ColumnsOf and MakeRowDecoder against a real DuckDB: payloads built by hand are decoded
// into a chunk, appended to a table and read back with SQL. Every type mapping, presence
// and defaults, packed and unpacked lists, unknown fields, oneofs, maps, well-known types,
// and each malformed payload that matters.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "duck/logical_type.h"
#include "schema/protobuf/protobuf_format.h"
#include "schema/protobuf/tests/test_util.h"

namespace sluice::schema::protobuf {
namespace {

using duck::TypeId;
using testing::DuckTable;
using testing::MustParse;
using testing::Rows;
using testing::Wire;

std::string TypeSql(const duck::LogicalType& t) {
  switch (t.id()) {
    case TypeId::kList:
      return TypeSql(t.ListChild()) + "[]";
    case TypeId::kMap:
      return "MAP(" + TypeSql(t.MapKey()) + ", " + TypeSql(t.MapValue()) + ")";
    case TypeId::kStruct: {
      std::string s = "STRUCT(";
      for (size_t i = 0; i < t.StructFieldCount(); ++i)
        s += fmt::format("{}\"{}\" {}", i ? ", " : "", t.StructFieldName(i),
                         TypeSql(t.StructFieldType(i)));
      return s + ")";
    }
    case TypeId::kTimestampTz:
      return "TIMESTAMPTZ";
    default:
      return t.ToSql();
  }
}

std::string ColumnsSql(const std::vector<Column>& cols) {
  std::string s;
  for (const Column& c : cols)
    s += fmt::format("{}\"{}\" {}", s.empty() ? "" : ", ", c.name, TypeSql(c.type));
  return s;
}

constexpr const char* kAll = R"(
syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/struct.proto";
message All {
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;
  sint32 s32 = 7; sint64 s64 = 8; fixed32 fx32 = 9; fixed64 fx64 = 10; sfixed32 sf32 = 11;
  sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes by = 15; Color color = 16;
  Inner inner = 17; repeated int64 nums = 18; map<string, int32> counts = 19;
  google.protobuf.Timestamp ts = 20; google.protobuf.Duration dur = 21;
  google.protobuf.Int32Value wi = 22; google.protobuf.StringValue ws = 23;
  google.protobuf.Empty e = 24; google.protobuf.Struct st = 25;
  oneof choice { string name = 26; int32 code = 27; }
  optional int32 maybe = 28;
  repeated Inner inners = 29;
  map<int64, Inner> by_id = 30;
}
message Inner { string label = 1; repeated string tags = 2; }
enum Color { RED = 0; GREEN = 1; BLUE = 2; }
)";

TEST(ProtobufColumnsTest, EveryTypeMapsToItsDuckDbType) {
  Parsed p = MustParse(kAll);
  auto cols = ColumnsOf(p, std::vector<int>{0});
  ASSERT_TRUE(cols.ok()) << cols.status().ToString();
  EXPECT_EQ(
      ColumnsSql(*cols),
      "\"d\" DOUBLE, \"f\" FLOAT, \"i32\" INTEGER, \"i64\" BIGINT, \"u32\" UINTEGER, "
      "\"u64\" UBIGINT, \"s32\" INTEGER, \"s64\" BIGINT, \"fx32\" UINTEGER, \"fx64\" UBIGINT, "
      "\"sf32\" INTEGER, \"sf64\" BIGINT, \"b\" BOOLEAN, \"s\" VARCHAR, \"by\" BLOB, "
      "\"color\" VARCHAR, \"inner\" STRUCT(\"label\" VARCHAR, \"tags\" VARCHAR[]), "
      "\"nums\" BIGINT[], \"counts\" MAP(VARCHAR, INTEGER), \"ts\" TIMESTAMPTZ, "
      "\"dur\" INTERVAL, \"wi\" INTEGER, \"ws\" VARCHAR, \"e\" BOOLEAN, \"st\" JSON, "
      "\"name\" VARCHAR, \"code\" INTEGER, \"maybe\" INTEGER, "
      "\"inners\" STRUCT(\"label\" VARCHAR, \"tags\" VARCHAR[])[], "
      "\"by_id\" MAP(BIGINT, STRUCT(\"label\" VARCHAR, \"tags\" VARCHAR[]))");
}

TEST(ProtobufColumnsTest, RecursiveMessagesAreCutIntoBlobs) {
  Parsed p = MustParse("syntax = \"proto3\"; message T { string v = 1; T next = 2; }");
  auto cols = ColumnsOf(p, std::vector<int>{0});
  ASSERT_TRUE(cols.ok());
  EXPECT_EQ(ColumnsSql(*cols),
            "\"v\" VARCHAR, \"next\" STRUCT(\"v\" VARCHAR, \"next\" STRUCT(\"v\" VARCHAR, "
            "\"next\" BLOB))");
}

class ProtobufDecoderTest : public ::testing::Test {
 protected:
  std::vector<std::string> DecodeAll(const Parsed& p, const std::vector<std::string>& payloads,
                                     std::vector<int> idx = {0}) {
    auto cols = ColumnsOf(p, idx);
    EXPECT_TRUE(cols.ok()) << cols.status().ToString();
    return db_.Decode(p, ColumnsSql(*cols), payloads, idx);
  }
  DuckTable db_;
};

TEST_F(ProtobufDecoderTest, EveryScalarAndWellKnownType) {
  Parsed p = MustParse(kAll);
  Wire w;
  w.Double(1, 2.5)
      .Float(2, 1.5f)
      .Varint(3, static_cast<uint64_t>(-7))
      .Varint(4, 1ull << 40)
      .Varint(5, 4000000000u)
      .Varint(6, ~0ull)
      .Sint(7, -3)
      .Sint(8, -5000000000)
      .Fixed32(9, 7)
      .Fixed64(10, 8)
      .Fixed32(11, static_cast<uint32_t>(-9))
      .Fixed64(12, static_cast<uint64_t>(-10))
      .Varint(13, 1)
      .Bytes(14, "héllo")
      .Bytes(15, std::string("\x00\xff", 2))
      .Varint(16, 2)
      .Message(17, Wire().Bytes(1, "in").Bytes(2, "x").Bytes(2, "y"))
      .Varint(18, 1)
      .Varint(18, 2)
      .Message(19, Wire().Bytes(1, "a").Varint(2, 1))
      .Message(19, Wire().Bytes(1, "b").Varint(2, 2))
      .Message(20, Wire().Varint(1, 1714564800).Varint(2, 123456789))
      .Message(21, Wire().Varint(1, 90).Varint(2, 500000000))
      .Message(22, Wire().Varint(1, 42))
      .Message(23, Wire().Bytes(1, "w"))
      .Message(24, Wire())
      .Message(25, Wire()
                       .Message(1, Wire().Bytes(1, "k").Message(2, Wire().Double(2, 1.5)))
                       .Message(1, Wire().Bytes(1, "l").Message(
                                       2, Wire().Message(6, Wire()
                                                                .Message(1, Wire().Bytes(3, "s"))
                                                                .Message(1, Wire().Varint(4, 1))
                                                                .Message(1, Wire().Varint(1, 0))))))
      .Varint(27, 5)
      .Varint(28, 0)
      .Message(29, Wire().Bytes(1, "a"))
      .Message(29, Wire().Bytes(2, "t1").Bytes(2, "t2"))
      .Message(30, Wire().Varint(1, 7).Message(2, Wire().Bytes(1, "seven")));
  ASSERT_EQ(DecodeAll(p, {w.str()}), std::vector<std::string>{""});
  Rows r = db_.Query(
      "SELECT d, f, i32, i64, u32, u64, s32, s64, fx32, fx64, sf32, sf64, b, s, hex(\"by\"), "
      "color, "
      "\"inner\", nums, counts, ts AT TIME ZONE 'UTC', dur, wi, ws, e, st, name, code, maybe, "
      "inners, "
      "by_id FROM t");
  ASSERT_EQ(r.size(), 1u);
  std::vector<std::string> want = {"2.5",
                                   "1.5",
                                   "-7",
                                   "1099511627776",
                                   "4000000000",
                                   "18446744073709551615",
                                   "-3",
                                   "-5000000000",
                                   "7",
                                   "8",
                                   "-9",
                                   "-10",
                                   "true",
                                   "héllo",
                                   "00FF",
                                   "BLUE",
                                   "{'label': in, 'tags': [x, y]}",
                                   "[1, 2]",
                                   "{a=1, b=2}",
                                   "2024-05-01 12:00:00.123456",
                                   "00:01:30.5",
                                   "42",
                                   "w",
                                   "true",
                                   R"({"k":1.5,"l":["s",true,null]})",
                                   "NULL",
                                   "5",
                                   "0",
                                   "[{'label': a, 'tags': []}, {'label': '', 'tags': [t1, t2]}]",
                                   "{7={'label': seven, 'tags': []}}"};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r[0][i].value_or("NULL"), want[i]) << "column " << i;
  }
}

TEST_F(ProtobufDecoderTest, AbsentFieldsGetDefaultsOrNullByPresence) {
  Parsed p = MustParse(kAll);
  ASSERT_EQ(DecodeAll(p, {""}), std::vector<std::string>{""});
  Rows r = db_.Query(
      "SELECT d, i64, b, s, hex(\"by\"), color, \"inner\" IS NULL, nums, counts, ts IS NULL, wi IS "
      "NULL, "
      "ws IS NULL, e IS NULL, st IS NULL, name IS NULL, code IS NULL, maybe IS NULL FROM t");
  std::vector<std::string> want = {"0.0",  "0",    "false", "",     "",     "RED",
                                   "true", "[]",   "{}",    "true", "true", "true",
                                   "true", "true", "true",  "true", "true"};
  ASSERT_EQ(r.size(), 1u);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(r[0][i].value_or("NULL"), want[i]) << i;
  // proto2: every singular field has presence.
  Parsed p2 = MustParse(
      "syntax = \"proto2\"; message A { optional int32 a = 1; required string b = 2; repeated "
      "int32 c = 3; }");
  ASSERT_EQ(DecodeAll(p2, {""}), std::vector<std::string>{""});
  EXPECT_EQ(db_.Query("SELECT a IS NULL, b IS NULL, c FROM t")[0],
            (std::vector<std::optional<std::string>>{"true", "true", "[]"}));
}

TEST_F(ProtobufDecoderTest, PackedAndUnpackedRepeatedScalarsAndLastOneWins) {
  Parsed p = MustParse(
      "syntax = \"proto3\"; message A { repeated sint32 n = 1; repeated double d = 2; int32 x = 3; "
      "Color c = 4; } enum Color { Z = 0; }");
  Wire packed_n, packed_d;
  packed_n.Raw(1).Raw(2).Raw(5);  // zig-zag -1, 1, -3
  double ds[] = {0.5, 1.5};
  std::string dbytes(reinterpret_cast<const char*>(ds), 16);
  Wire w;
  w.Varint(3, 1)
      .Bytes(1, packed_n.str())
      .Sint(1, 9)
      .Bytes(2, dbytes)
      .Double(2, 2.5)
      .Varint(3, 2)
      .Varint(4, 7);  // an enum number the schema does not name
  ASSERT_EQ(DecodeAll(p, {w.str(), Wire().Bytes(1, "").str()}), (std::vector<std::string>{"", ""}));
  Rows r = db_.Query("SELECT n, d, x, c FROM t");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0][0], "[-1, 1, -3, 9]");
  EXPECT_EQ(r[0][1], "[0.5, 1.5, 2.5]");
  EXPECT_EQ(r[0][2], "2");
  EXPECT_EQ(r[0][3], "7");
  EXPECT_EQ(r[1][0], "[]");
}

TEST_F(ProtobufDecoderTest, UnknownFieldsAreSkippedByWireType) {
  Parsed p = MustParse("syntax = \"proto3\"; message A { string s = 1; }");
  Wire w;
  w.Varint(2, 300)
      .Fixed32(3, 1)
      .Fixed64(4, 2)
      .Bytes(5, "zz")
      .Tag(6, 3)
      .Varint(7, 1)
      .Tag(8, 3)
      .Tag(8, 4)
      .Tag(6, 4)
      .Bytes(1, "kept")
      .Varint(100000, 1);
  ASSERT_EQ(DecodeAll(p, {w.str()}), std::vector<std::string>{""});
  EXPECT_EQ(db_.One("SELECT s FROM t"), "kept");
}

TEST_F(ProtobufDecoderTest, OneofLastMemberWinsAndMessagesMerge) {
  Parsed p = MustParse(R"(syntax = "proto3";
    message A { oneof o { string name = 1; int32 code = 2; } In in = 3; }
    message In { int32 a = 1; int32 b = 2; repeated int32 l = 3; })");
  Wire w;
  w.Bytes(1, "x")
      .Varint(2, 5)
      .Message(3, Wire().Varint(1, 1).Varint(3, 10))
      .Message(3, Wire().Varint(2, 2).Varint(3, 11));
  ASSERT_EQ(DecodeAll(p, {w.str()}), std::vector<std::string>{""});
  EXPECT_EQ(db_.Query("SELECT name, code, \"in\" FROM t")[0],
            (std::vector<std::optional<std::string>>{std::nullopt, "5",
                                                     "{'a': 1, 'b': 2, 'l': [10, 11]}"}));
}

TEST_F(ProtobufDecoderTest, DeclaredTableColumnsMatchByNameAnyCaseAndWiden) {
  Parsed p = MustParse(
      "syntax = \"proto3\"; message A { int32 Count = 1; string Name = 2; Color c = 3; In in = 4; "
      "} enum Color { Z = 0; Y = 1; } message In { int32 v = 1; string w = 2; }");
  Wire w;
  w.Varint(1, 7).Bytes(2, "n").Varint(3, 1).Message(4, Wire().Varint(1, 3));
  auto reasons = db_.Decode(
      p,
      "count BIGINT, name VARCHAR, extra VARCHAR, c SMALLINT, \"in\" STRUCT(V DOUBLE, x INTEGER)",
      {w.str()});
  ASSERT_EQ(reasons, std::vector<std::string>{""});
  EXPECT_EQ(db_.Query("SELECT count, name, extra, c, \"in\" FROM t")[0],
            (std::vector<std::optional<std::string>>{"7", "n", std::nullopt, "1",
                                                     "{'V': 3.0, 'x': NULL}"}));
}

TEST_F(ProtobufDecoderTest, FieldThatCannotGoIntoItsColumnIsRefused) {
  Parsed p = MustParse("syntax = \"proto3\"; message A { string s = 1; repeated int32 l = 2; }");
  Status st;
  db_.Decode(p, "s INTEGER", {}, {0}, &st);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("field 's' (string) cannot go into a INTEGER column"),
            std::string::npos)
      << st.message();
  db_.Decode(p, "l INTEGER", {}, {0}, &st);
  EXPECT_NE(st.message().find("field 'l' (repeated int32)"), std::string::npos) << st.message();
  db_.Decode(p, "s VARCHAR", {}, {3}, &st);
  EXPECT_FALSE(st.ok());
}

TEST_F(ProtobufDecoderTest, IntegerOutOfColumnRangeFailsTheRow) {
  Parsed p = MustParse("syntax = \"proto3\"; message A { int64 v = 1; }");
  auto reasons =
      db_.Decode(p, "v TINYINT", {Wire().Varint(1, 1000).str(), Wire().Varint(1, 5).str()});
  ASSERT_EQ(reasons.size(), 2u);
  EXPECT_NE(reasons[0].find("field 'v': 1000 out of range"), std::string::npos) << reasons[0];
  EXPECT_EQ(reasons[1], "");
  EXPECT_EQ(db_.One("SELECT list(v) FROM t"), "[5]");
}

TEST_F(ProtobufDecoderTest, MalformedPayloadsFailWithReasonsAndRollBackLists) {
  Parsed p = MustParse(
      "syntax = \"proto3\"; message A { repeated string l = 1; int64 n = 2; string s = 3; In in = "
      "4; } message In { In in = 1; int32 v = 2; }");
  Wire deep;
  for (int i = 0; i < 100; ++i) deep.Tag(9, 3);
  struct Case {
    std::string payload;
    std::string reason;
  };
  std::vector<Case> cases = {
      {Wire().Bytes(1, "a").Tag(2, 0).str(), "field 'n': truncated"},
      {Wire().Tag(2, 0).Append("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01").str(),
       "field 'n': truncated or overlong varint"},
      {Wire().Bytes(1, "a").Tag(3, 2).Raw(1000).Append("xy").str(),
       "field 's': length 1000 past the end"},
      {Wire().Tag(3, 2).Raw(~0ull >> 1).str(), "past the end"},
      {Wire().Bytes(1, "a").Fixed32(2, 1).str(), "field 'n': wrong wire type 5 (expected 0)"},
      {Wire().Bytes(3, "\xc3\x28").str(), "field 's': invalid UTF-8"},
      {Wire().Tag(9, 3).Varint(1, 1).Tag(10, 4).str(), "end-group tag does not match"},
      {Wire().Tag(9, 3).Varint(1, 1).str(), "unterminated group"},
      {Wire().Tag(9, 4).str(), "unexpected end-group tag"},
      {Wire().Tag(9, 7).str(), "invalid wire type 7"},
      {Wire().Bytes(1, "a").Append(deep.str()).str(), "groups nested too deeply"},
      {std::string("\x80", 1), "truncated tag"},
      {Wire().Tag(0, 0).Raw(1).str(), "bad field number 0"},
  };
  std::vector<std::string> payloads;
  for (const Case& c : cases) payloads.push_back(c.payload);
  payloads.push_back(Wire().Bytes(1, "ok").Bytes(1, "ok2").str());
  auto cols = ColumnsOf(p, std::vector<int>{0});
  ASSERT_TRUE(cols.ok());
  auto reasons = db_.Decode(p, "l VARCHAR[], n BIGINT, s VARCHAR", payloads);
  ASSERT_EQ(reasons.size(), payloads.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_NE(reasons[i].find(cases[i].reason), std::string::npos)
        << i << ": " << reasons[i] << " (wanted " << cases[i].reason << ")";
  }
  EXPECT_EQ(reasons.back(), "");
  // The failed rows' list elements were given back: the one good row sees only its own.
  EXPECT_EQ(db_.Query("SELECT l, n, s FROM t"), (Rows{{"[ok, ok2]", "0", ""}}));
}

TEST_F(ProtobufDecoderTest, ManyRowsAcrossChunksWithNestedLists) {
  Parsed p = MustParse(
      "syntax = \"proto3\"; message A { int64 id = 1; repeated In items = 2; } message In { "
      "repeated string tags = 1; }");
  std::vector<std::string> payloads;
  for (int i = 0; i < 5000; ++i) {
    Wire w;
    w.Varint(1, i);
    for (int k = 0; k < i % 4; ++k)
      w.Message(2, Wire().Bytes(1, fmt::format("t{}", k)).Bytes(1, "x"));
    payloads.push_back(i % 97 == 3 ? w.str() + "\x0a" : w.str());  // some truncated
  }
  auto reasons = DecodeAll(p, payloads);
  size_t bad = 0;
  for (const auto& r : reasons) bad += !r.empty();
  EXPECT_EQ(bad, 52u);
  EXPECT_EQ(db_.One("SELECT count(*) FROM t"), std::to_string(5000 - bad));
  EXPECT_EQ(db_.One("SELECT sum(len(items)) = sum(id % 4) FROM t"), "true");
  EXPECT_EQ(
      db_.One("SELECT count(*) FROM (SELECT unnest(items) AS i FROM t) WHERE i.tags[2] <> 'x'"),
      "0");
}

TEST_F(ProtobufDecoderTest, SecondMessageOfTheFileByIndexes) {
  Parsed p = MustParse(
      "syntax = \"proto3\"; message A { int32 a = 1; message B { string b = 1; } } message C { "
      "string c = 1; }");
  ASSERT_EQ(DecodeAll(p, {Wire().Bytes(1, "bee").str()}, {0, 0}), std::vector<std::string>{""});
  EXPECT_EQ(db_.One("SELECT b FROM t"), "bee");
}

}  // namespace
}  // namespace sluice::schema::protobuf
