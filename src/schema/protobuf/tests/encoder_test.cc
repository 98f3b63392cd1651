// SchemaForColumns and MakeRowEncoder: a DuckDB result written as Protobuf and read back
// with MakeRowDecoder gives the same rows.
#include <gtest/gtest.h>

#include "schema/protobuf/columns.h"
#include "schema/protobuf/protobuf_format.h"
#include "schema/protobuf/tests/test_util.h"

namespace sluice::schema::protobuf {
namespace {

using testing::DuckTable;
using testing::MustParse;
using testing::Rows;
using testing::Wire;

constexpr const char* kSelect =
    "SELECT i::INTEGER AS id, 'name ' || i AS name, i * 1.5 AS score, i % 2 = 0 AS even, "
    "CASE WHEN i % 3 = 0 THEN NULL ELSE i * 1000000000 END AS big, "
    "TIMESTAMPTZ '2024-05-01 12:00:00+00' + INTERVAL (i) SECOND AS ts, "
    "DATE '2024-01-01' + i::INTEGER AS day, (i * 100 + 0.25)::DECIMAL(10, 2) AS price, "
    "[i, i + 1] AS nums, {'city': 'c' || i, 'n': i} AS place, MAP {'k' || i: i} AS kv, "
    "[[i], [i, i]] AS nested, INTERVAL (i) MINUTE AS dur, ''::BLOB AS raw "
    "FROM range(5) t(i)";

TEST(ProtobufEncoderTest, SchemaForColumnsIsProto3Text) {
  DuckTable db;
  auto r = db.conn().Query(kSelect);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<Column> cols;
  auto types = r->column_logical_types();
  for (size_t i = 0; i < r->column_count(); ++i)
    cols.push_back({r->column_name(i), std::move(types[i])});
  auto text = SchemaForColumns(cols, "Row");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, R"(syntax = "proto3";

import "google/protobuf/duration.proto";
import "google/protobuf/timestamp.proto";

message Row {
  optional int32 id = 1;
  optional string name = 2;
  optional string score = 3;
  optional bool even = 4;
  optional int64 big = 5;
  google.protobuf.Timestamp ts = 6;
  optional int32 day = 7;
  optional string price = 8;
  repeated int64 nums = 9;
  Place place = 10;
  map<string, int64> kv = 11;
  repeated NestedItemList nested = 12;
  google.protobuf.Duration dur = 13;
  optional bytes raw = 14;
  message Place {
    optional string city = 1;
    optional int64 n = 2;
  }
  message NestedItemList {
    repeated int64 values = 1;
  }
}
)");
  MustParse(*text);
}

TEST(ProtobufEncoderTest, EncodeThenDecodeGivesTheSameRows) {
  DuckTable db;
  const char* select =
      "SELECT i::INTEGER AS id, 'name ' || i AS name, i * 1.5 AS score, i % 2 = 0 AS even, "
      "CASE WHEN i % 3 = 0 THEN NULL ELSE i * 1000000000 END AS big, "
      "TIMESTAMPTZ '2024-05-01 12:00:00.123456+00' + INTERVAL (i) SECOND AS ts, "
      "[i, i + 1] AS nums, {'city': 'c' || i, 'n': i} AS place, MAP {'k' || i: i} AS kv, "
      "INTERVAL (i) MINUTE AS dur, CASE WHEN i = 2 THEN NULL ELSE 'x' END AS maybe "
      "FROM range(5) t(i)";
  db.Exec(std::string("CREATE TABLE src AS ") + select);
  auto r = db.conn().Query("SELECT * FROM src");
  ASSERT_TRUE(r.ok());
  std::vector<Column> cols;
  auto types = r->column_logical_types();
  for (size_t i = 0; i < r->column_count(); ++i)
    cols.push_back({r->column_name(i), std::move(types[i])});
  auto text = SchemaForColumns(cols, "Row");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  Parsed p = MustParse(*text);
  auto enc = MakeRowEncoder(p, std::vector<int>{0}, cols);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  std::vector<std::string> payloads;
  auto chunks = r->TakeChunks();
  for (const duck::DataChunk& c : chunks) {
    for (uint64_t row = 0; row < c.size(); ++row) {
      std::string out;
      Status st = (*enc)->Encode(c, 0, row, &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      payloads.push_back(out);
    }
  }
  chunks.clear();
  ASSERT_EQ(payloads.size(), 5u);
  // Read back into a table of the source's own types.
  auto reasons = db.Decode(p,
                           "id INTEGER, name VARCHAR, score VARCHAR, even BOOLEAN, big BIGINT, "
                           "ts TIMESTAMPTZ, nums BIGINT[], place STRUCT(city VARCHAR, n BIGINT), "
                           "kv MAP(VARCHAR, BIGINT), dur INTERVAL, maybe VARCHAR",
                           payloads);
  ASSERT_EQ(reasons, std::vector<std::string>(5, ""));
  EXPECT_EQ(db.One("SELECT string_agg(score, ',' ORDER BY id) FROM t"), "0.0,1.5,3.0,4.5,6.0");
  EXPECT_EQ(db.Query("SELECT * EXCLUDE (score) FROM src EXCEPT SELECT * EXCLUDE (score) FROM t"),
            Rows{});
  EXPECT_EQ(db.Query("SELECT * EXCLUDE (score) FROM t EXCEPT SELECT * EXCLUDE (score) FROM src"),
            Rows{});
  EXPECT_EQ(db.One("SELECT count(*) FROM t WHERE big IS NULL"), "2");
  EXPECT_EQ(db.One("SELECT count(*) FROM t WHERE maybe IS NULL"), "1");
}

TEST(ProtobufEncoderTest, ColumnsWithoutFieldsOrBadTypesAreRefused) {
  Parsed p = MustParse("syntax = \"proto3\"; message A { int32 a = 1; string s = 2; }");
  std::vector<Column> cols;
  cols.push_back({"zz", duck::LogicalType::Integer()});
  EXPECT_FALSE(MakeRowEncoder(p, std::vector<int>{0}, cols).ok());
  cols.clear();
  cols.push_back({"a", duck::LogicalType::Varchar()});
  EXPECT_FALSE(MakeRowEncoder(p, std::vector<int>{0}, cols).ok());
  cols.clear();
  cols.push_back({"bad name", duck::LogicalType::Integer()});
  EXPECT_FALSE(SchemaForColumns(cols, "Row").ok());
}

}  // namespace
}  // namespace sluice::schema::protobuf
