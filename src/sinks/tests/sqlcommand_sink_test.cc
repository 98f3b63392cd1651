// SqlCommandSink: the batch as sqlflow_sink_batch, user SQL with uuid4 substitutions
// (a Parquet file per batch through COPY, read back with read_parquet), errors.
#include "sinks/sqlcommand_sink.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "duck/database.h"

namespace sluice::sinks {
namespace {

namespace fs = std::filesystem;
using Rows = std::vector<std::vector<std::optional<std::string>>>;

class SqlCommandSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
    std::string tmpl = (fs::temp_directory_path() / "sluice-sqlcommand-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  Rows Query(const std::string& sql) {
    auto rows = conn_->QueryText(sql);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : Rows{};
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  fs::path dir_;
};

TEST_F(SqlCommandSinkTest, CopyWithAUuidSubstitutionWritesAParquetFilePerBatch) {
  auto sink = SqlCommandSink::Create(
      {.sql = "COPY sqlflow_sink_batch TO '" + dir_.string() +
              "/$sqlflow_uuid.parquet' (FORMAT 'parquet');",
       .substitutions = {{.var = "$sqlflow_uuid", .type = SqlSubstitution::Type::kUuid4}}});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  std::vector<RejectedRow> rejected;
  for (int batch = 0; batch < 3; ++batch) {
    // The pipeline replaces its table after each Write: the sink must not keep a view.
    ASSERT_TRUE(conn_
                    ->Execute(fmt::format(
                        "CREATE OR REPLACE TABLE out AS SELECT {0} AS batch, range AS n, "
                        "'row ' || range AS label, {{'x': range}} AS nested FROM range(4)",
                        batch))
                    .ok());
    Status st = (*sink)->Write(*conn_, "out", {}, &rejected);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE((*sink)->Flush().ok());
  }
  EXPECT_TRUE(rejected.empty());

  std::set<std::string> names;
  const std::regex uuid4(
      "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\\.parquet");
  for (const auto& e : fs::directory_iterator(dir_)) {
    names.insert(e.path().filename().string());
    EXPECT_TRUE(std::regex_match(e.path().filename().string(), uuid4)) << e.path();
  }
  EXPECT_EQ(names.size(), 3u);

  Rows got = Query("SELECT batch, n, label, nested.x FROM read_parquet('" + dir_.string() +
                   "/*.parquet') ORDER BY batch, n");
  Rows want;
  for (int b = 0; b < 3; ++b) {
    for (int n = 0; n < 4; ++n) {
      want.push_back(
          {std::to_string(b), std::to_string(n), "row " + std::to_string(n), std::to_string(n)});
    }
  }
  EXPECT_EQ(got, want);
  // The batch copy is gone after the Write.
  EXPECT_EQ(Query("SELECT count(*) FROM duckdb_tables() WHERE table_name = "
                  "'sqlflow_sink_batch'"),
            (Rows{{"0"}}));
}

TEST_F(SqlCommandSinkTest, InsertIntoATableOfTheConnection) {
  ASSERT_TRUE(conn_->Execute("CREATE TABLE totals (city VARCHAR, n BIGINT)").ok());
  ASSERT_TRUE(conn_
                  ->Execute("CREATE TABLE out AS SELECT * FROM (VALUES ('Paris', 2), "
                            "('Lyon', 1)) t(city, n)")
                  .ok());
  auto sink =
      SqlCommandSink::Create({.sql = "INSERT INTO totals SELECT * FROM sqlflow_sink_batch"});
  ASSERT_TRUE(sink.ok());
  std::vector<RejectedRow> rejected;
  ASSERT_TRUE((*sink)->Write(*conn_, "out", {}, &rejected).ok());
  ASSERT_TRUE((*sink)->Write(*conn_, "out", {}, &rejected).ok());
  EXPECT_EQ(Query("SELECT city, sum(n) FROM totals GROUP BY city ORDER BY city"),
            (Rows{{"Lyon", "2"}, {"Paris", "4"}}));
}

TEST_F(SqlCommandSinkTest, OneValuePerVarPerExecutionAndFreshEachTime) {
  auto sink = SqlCommandSink::Create({.sql = "SELECT '$a' AS x, '$a' AS y, '$b' AS z",
                                      .substitutions = {{.var = "$a"}, {.var = "$b"}}});
  ASSERT_TRUE(sink.ok());
  const std::regex shape("SELECT '(.{36})' AS x, '(.{36})' AS y, '(.{36})' AS z");
  std::smatch m1, m2;
  std::string first = (*sink)->SubstitutedSql();
  std::string second = (*sink)->SubstitutedSql();
  ASSERT_TRUE(std::regex_match(first, m1, shape)) << first;
  ASSERT_TRUE(std::regex_match(second, m2, shape)) << second;
  EXPECT_EQ(m1[1], m1[2]);  // the same var twice: one value
  EXPECT_NE(m1[1], m1[3]);  // another var: another value
  EXPECT_NE(m1[1], m2[1]);  // another execution: a fresh value
}

TEST_F(SqlCommandSinkTest, SqlErrorsAreReportedAndTheBatchCopyDropped) {
  ASSERT_TRUE(conn_->Execute("CREATE TABLE out AS SELECT 1 AS a").ok());
  auto sink =
      SqlCommandSink::Create({.sql = "INSERT INTO missing SELECT * FROM sqlflow_sink_batch"});
  ASSERT_TRUE(sink.ok());
  std::vector<RejectedRow> rejected;
  Status st = (*sink)->Write(*conn_, "out", {}, &rejected);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), ::testing::HasSubstr("sqlcommand sink: running sql"));
  EXPECT_THAT(st.message(), ::testing::HasSubstr("missing"));
  EXPECT_EQ(Query("SELECT count(*) FROM duckdb_tables() WHERE table_name = "
                  "'sqlflow_sink_batch'"),
            (Rows{{"0"}}));
}

TEST_F(SqlCommandSinkTest, MalformedOptionsAreErrors) {
  EXPECT_EQ(SqlCommandSink::Create({.sql = ""}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SqlCommandSink::Create({.sql = " \n ; "}).status().code(),
            StatusCode::kInvalidArgument);
  auto no_var = SqlCommandSink::Create({.sql = "SELECT 1", .substitutions = {{.var = ""}}});
  EXPECT_EQ(no_var.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_var.status().message(), ::testing::HasSubstr("substitutions[0].var"));
}

}  // namespace
}  // namespace sluice::sinks
