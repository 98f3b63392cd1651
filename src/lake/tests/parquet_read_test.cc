// read_parquet under a table schema: columns found by field id, whatever their name in the
// file; renamed columns keep their data, added ones read as NULL, promoted types are cast.
#include "lake/parquet_read.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "duck/database.h"
#include "lake/iceberg_json.h"

namespace sluice::lake {
namespace parquet_read_test {
namespace {

namespace fs = std::filesystem;

Schema ParseSchema(std::string_view json) {
  auto s = SchemaFromJson(Json::parse(json), "$", true);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return *s;
}

class ParquetReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/sluice_parquet_read_" + std::to_string(getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/city=oslo");
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(*conn);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<std::string> Rows(const std::string& sql) {
    auto rows = conn_->QueryText(sql);
    EXPECT_TRUE(rows.ok()) << rows.status().message() << "\n" << sql;
    std::vector<std::string> out;
    if (!rows.ok()) return out;
    for (const auto& r : *rows) {
      std::string line;
      for (const auto& v : r) line += (line.empty() ? "" : "|") + v.value_or("NULL");
      out.push_back(line);
    }
    return out;
  }

  std::string dir_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(ParquetReadTest, ReadsByFieldIdAcrossRenamesAddedColumnsAndPromotions) {
  // Written under the first schema: id int (1), name string (2); in a hive-looking folder.
  const std::string old_file = dir_ + "/city=oslo/old.parquet";
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT 1::INTEGER AS id, 'a' AS name, 1.5::FLOAT AS f) TO '{}' "
                      "(FORMAT parquet, FIELD_IDS {{id: 1, name: 2, f: 4}})",
                      old_file))
                  .ok());
  // Written later: name renamed label, extra added.
  const std::string new_file = dir_ + "/new.parquet";
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT 2::BIGINT AS id, 'b' AS label, 7.25::DOUBLE AS extra, "
                      "2.5::DOUBLE AS f) TO '{}' "
                      "(FORMAT parquet, FIELD_IDS {{id: 1, label: 2, extra: 3, f: 4}})",
                      new_file))
                  .ok());
  Schema now = ParseSchema(R"j({"type":"struct","schema-id":1,"fields":[
      {"id":1,"name":"id","required":false,"type":"long"},
      {"id":2,"name":"label","required":false,"type":"string"},
      {"id":3,"name":"extra","required":false,"type":"double"},
      {"id":4,"name":"f","required":false,"type":"double"}]})j");
  std::string scan = ParquetScanSql({old_file, new_file}, now);
  EXPECT_EQ(Rows(fmt::format("SELECT * FROM ({}) ORDER BY id", scan)),
            (std::vector<std::string>{"1|a|NULL|1.5", "2|b|7.25|2.5"}));
  // No hive column (city) and the schema's types.
  EXPECT_EQ(Rows(fmt::format("SELECT column_name, column_type FROM (DESCRIBE {})", scan)),
            (std::vector<std::string>{"id|BIGINT", "label|VARCHAR", "extra|DOUBLE", "f|DOUBLE"}));
}

TEST_F(ParquetReadTest, NoFilesIsAnEmptyRelationOfTheSchemaTypes) {
  Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"Odd \"name\"","required":false,"type":"decimal(9,2)"},
      {"id":2,"name":"ts","required":false,"type":"timestamptz"}]})j");
  std::string scan = ParquetScanSql({}, s);
  EXPECT_EQ(Rows(fmt::format("SELECT count(*) FROM ({})", scan)), (std::vector<std::string>{"0"}));
  EXPECT_EQ(Rows(fmt::format("SELECT column_name, column_type FROM (DESCRIBE {})", scan)),
            (std::vector<std::string>{"Odd \"name\"|DECIMAL(9,2)", "ts|TIMESTAMP WITH TIME ZONE"}));
}

TEST_F(ParquetReadTest, QuotesPathsAndNames) {
  const std::string odd = dir_ + "/it's.parquet";
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT 5::BIGINT AS x) TO '{}' (FORMAT parquet, FIELD_IDS {{x: 1}})",
                      "" + std::string(dir_) + "/it''s.parquet"))
                  .ok());
  Schema s = ParseSchema(R"j({"type":"struct","schema-id":0,"fields":[
      {"id":1,"name":"it's","required":false,"type":"long"}]})j");
  EXPECT_EQ(Rows(fmt::format("SELECT \"it's\" FROM ({})", ParquetScanSql({odd}, s))),
            (std::vector<std::string>{"5"}));
}

}  // namespace
}  // namespace parquet_read_test
}  // namespace sluice::lake
