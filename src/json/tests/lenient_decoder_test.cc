// The lenient side of the JSON decoder (topic()'s): inference over a sample under both
// InferredTypes rules, the same columns as the pipeline's InferredDecoder, and decoding
// where a value that does not fit is NULL, read back through DuckDB.
#include "json/lenient_decoder.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "duck/chunk_view.h"
#include "duck/database.h"
#include "duck/json_type.h"
#include "json/json_decoder.h"

namespace sluice::json {
namespace {

using Rows = std::vector<std::vector<std::optional<std::string>>>;

std::string Describe(const std::vector<Column>& columns) {
  std::string out;
  for (const Column& c : columns) out += (out.empty() ? "" : ", ") + c.name + " " + c.type.ToSql();
  return out;
}

std::vector<kafka::client::Message> Messages(const std::vector<std::string>& values) {
  std::vector<kafka::client::Message> out;
  for (const std::string& v : values) {
    kafka::client::Message m;
    m.topic = "t";
    m.offset = static_cast<int64_t>(out.size());
    m.timestamp_ms = 0;
    m.value = v;
    out.push_back(m);
  }
  return out;
}

const std::vector<std::string> kSample = {
    R"({"id": 1, "price": 2, "name": "a", "ok": true, "tags": ["x"], "meta": {"k": 1}, "n": null})",
    R"({"id": 2, "price": 2.5, "Name": "b", "ok": false, "tags": [], "meta": null, "n": null,
        "mixed": 1, "at": "2024-05-01T12:00:00Z"})",
    R"({"mixed": "one", "": 1, "kafka_key": "reserved"})",
    "not json",
    "[1, 2]",
    R"({"late": {"deep": [1, 2]}})"};

TEST(LenientDecoderTest, FlatInferenceKeepsIntegersAndNestedValuesAsJson) {
  EXPECT_EQ(Describe(InferColumns(kSample, {})),
            "id BIGINT, price DOUBLE, name VARCHAR, ok BOOLEAN, tags JSON, meta JSON, n JSON, "
            "mixed VARCHAR, at VARCHAR, kafka_key VARCHAR, late JSON");
  constexpr std::string_view kReserved[] = {"KAFKA_KEY"};
  EXPECT_EQ(Describe(InferColumns(kSample, {.reserved = kReserved, .max_columns = 3})),
            "id BIGINT, price DOUBLE, name VARCHAR");
}

// The pipeline's InferredDecoder and InferColumns over the same messages: the same
// columns, in the same order, with the same types under the pipeline's rule.
TEST(LenientDecoderTest, NestedInferenceIsThePipelines) {
  auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto conn = duck::Connection::Open(**db);
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  auto decoder = InferredDecoder::Create(**conn);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  std::vector<DecodeError> errors;
  ASSERT_TRUE((*decoder)->Decode(Messages(kSample), &errors).ok());
  EXPECT_EQ(errors.size(), 2u);  // "not json" and "[1, 2]"

  constexpr std::string_view kKafka[] = {"kafka_topic", "kafka_partition", "kafka_offset",
                                         "kafka_timestamp", "kafka_key"};
  std::string inferred;
  for (const Column& c :
       InferColumns(kSample, {.reserved = kKafka, .types = InferredTypes::kNested})) {
    inferred += duck::QuoteIdentifier(c.name) + " " + c.type.ToSql() + ", ";
  }
  const std::string& pipeline = (*decoder)->schema_sql();
  EXPECT_EQ(inferred, pipeline.substr(0, pipeline.find("\"kafka_topic\"")));
  EXPECT_NE(inferred.find("\"tags\" VARCHAR[], \"meta\" STRUCT(\"k\" DOUBLE)"), std::string::npos)
      << inferred;
}

class LenientDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(*conn);
  }

  // Decodes `values` into columns of the types `make_types` makes and reads them back as
  // text, a row per value. (Types are made twice: LogicalType::Copy drops the JSON alias.)
  Rows Decode(const std::vector<std::string>& names,
              const std::function<std::vector<duck::LogicalType>()>& make_types,
              const std::vector<std::optional<std::string>>& values) {
    std::vector<duck::LogicalType> types = make_types();
    std::vector<Column> columns;
    std::vector<duck::LogicalType> column_types = make_types();
    for (size_t i = 0; i < names.size(); ++i)
      columns.push_back({names[i], std::move(column_types[i])});
    auto decoder = LenientDecoder::Create(columns);
    EXPECT_TRUE(decoder.ok()) << decoder.status().ToString();
    if (!decoder.ok()) return {};
    auto chunk = duck::DataChunk::Create(types);
    EXPECT_TRUE(chunk.ok());
    std::vector<duck::Vector> vectors;
    for (size_t i = 0; i < names.size(); ++i) vectors.push_back(chunk->column(i));
    (*decoder)->Bind(vectors);
    for (size_t r = 0; r < values.size(); ++r) {
      (*decoder)->Decode(r, values[r] ? std::string_view(*values[r]) : std::string_view());
    }
    EXPECT_TRUE((*decoder)->Finish().ok());
    chunk->SetSize(values.size());
    auto view = duck::ChunkView::Create(*conn_, "decoded", names, types);
    EXPECT_TRUE(view.ok()) << view.status().ToString();
    if (!view.ok()) return {};
    (*view)->SetChunks({&*chunk});
    auto rows = conn_->QueryText("SELECT * FROM decoded");
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : Rows{};
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

std::vector<duck::LogicalType> Types(std::initializer_list<duck::TypeId> ids, bool json_last) {
  std::vector<duck::LogicalType> out;
  for (duck::TypeId id : ids) out.push_back(duck::LogicalType::Of(id));
  if (json_last) out.push_back(duck::JsonType());
  return out;
}

TEST_F(LenientDecodeTest, WhatDoesNotFitIsNull) {
  using duck::TypeId;
  Rows rows =
      Decode({"i", "s", "d", "b", "i8", "o"},
             [] {
               return Types({TypeId::kBigInt, TypeId::kVarchar, TypeId::kDouble, TypeId::kBoolean,
                             TypeId::kTinyInt},
                            true);
             },
             {R"({"i": 1, "s": "a", "d": 1.5, "b": true, "o": {"x": [1, 2]}})",
              R"({"i": "2", "s": 3, "d": 2, "b": "true", "o": "str", "s2": [1, 2]})",
              std::string("not json"), std::string("[1, 2]"), std::nullopt, std::string(""),
              R"({"I": 5.0, "S": null, "s": "last wins"})",
              R"({"i": 1.5, "i8": 300, "s": {"a" : [1, true]}})",
              R"({"i": 99999999999999999999, "i8": -128})", R"({"i": 1e400, "i8": 1})",
              R"({"s": "trunc)", R"({"i8": -128} trailing)", R"({"i8": -128, "i": 2, "i": "no"})"});
  std::vector<std::string> got;
  for (const auto& row : rows) {
    std::string line;
    for (const auto& v : row) line += (line.empty() ? "" : "|") + v.value_or("NULL");
    got.push_back(line);
  }
  EXPECT_EQ(got, (std::vector<std::string>{
                     R"(1|a|1.5|true|NULL|{"x":[1,2]})", R"(NULL|3|2.0|NULL|NULL|"str")",
                     "NULL|NULL|NULL|NULL|NULL|NULL", "NULL|NULL|NULL|NULL|NULL|NULL",
                     "NULL|NULL|NULL|NULL|NULL|NULL", "NULL|NULL|NULL|NULL|NULL|NULL",
                     "5|last wins|NULL|NULL|NULL|NULL",
                     R"(NULL|{"a":[1,true]}|NULL|NULL|NULL|NULL)", "NULL|NULL|NULL|NULL|NULL|NULL",
                     "NULL|NULL|NULL|NULL|NULL|NULL", "NULL|NULL|NULL|NULL|NULL|NULL",
                     "NULL|NULL|NULL|NULL|NULL|NULL", "NULL|NULL|NULL|NULL|-128|NULL"}));
}

TEST_F(LenientDecodeTest, NestedColumnsAndTimestamps) {
  auto types = [] {
    std::vector<duck::LogicalType> out;
    out.push_back(duck::LogicalType::List(duck::LogicalType::BigInt()));
    std::vector<duck::LogicalType> fields;
    fields.push_back(duck::LogicalType::Varchar());
    out.push_back(duck::LogicalType::Struct({"a"}, fields));
    out.push_back(duck::LogicalType::TimestampTz());
    return out;
  };
  Rows rows = Decode(
      {"l", "st", "at"}, types,
      {R"({"l": [1, "x", 3], "st": {"a": 1}, "at": "2024-05-01T12:00:00Z"})",
       R"({"l": 5, "st": [], "at": "yesterday"})", R"({"l": [4], "st": {"A": "b", "z": 1}})"});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][0].value_or("NULL"), "[1, NULL, 3]");
  EXPECT_EQ(rows[0][1].value_or("NULL"), "{'a': 1}");
  EXPECT_NE(rows[0][2].value_or("NULL").find("2024-05-01"), std::string::npos);
  EXPECT_EQ(rows[1],
            (std::vector<std::optional<std::string>>{std::nullopt, std::nullopt, std::nullopt}));
  EXPECT_EQ(rows[2][0].value_or("NULL"), "[4]");
  EXPECT_EQ(rows[2][1].value_or("NULL"), "{'a': b}");
}

TEST(LenientDecoderCreateTest, TypesWithoutADirectPathAreRefused) {
  std::vector<Column> columns;
  columns.push_back({"u", duck::LogicalType::Of(duck::TypeId::kUuid)});
  EXPECT_FALSE(LenientDecoder::Create(columns).ok());
}

}  // namespace
}  // namespace sluice::json
