// QueryEngine: what it adds around the rewrites, on a real DuckDB connection.
#include "query/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "duck/database.h"
#include "lake/data_files.h"
#include "lake/iceberg_json.h"
#include "lake/table.h"
#include "lake/table_files.h"
#include "query/sql_tree/sql_tree.h"

namespace sluice::query {
namespace {

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spill_ =
        std::filesystem::temp_directory_path() / ("sluice_engine_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(spill_);
    auto db = duck::Database::Open(
        {.memory_limit_bytes = 512 << 20, .threads = 2, .temp_directory = spill_.string()});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(*conn);
  }
  void TearDown() override {
    conn_.reset();
    db_.reset();
    std::filesystem::remove_all(spill_);
  }

  std::filesystem::path spill_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

// The rewrites read the user's functions once per process while no statement could have
// changed them. A macro that shadows a built-in (abs, here not deterministic) must stop
// the rewrite of the next query that calls it: the partitioned input would be evaluated
// again, to other values. Without noticing `change`, the cached functions say abs is the
// built-in and the query is rewritten.
void ExpectTheStatementStopsTheRewrite(duck::Connection& conn, const std::string& change) {
  QueryEngine engine({.memory_limit_bytes = 16 << 20, .threads = 2});
  ASSERT_TRUE(engine.OpenDatabase(conn).ok());
  ASSERT_TRUE(engine.StartSession(conn, "").ok());
  ASSERT_TRUE(conn.Execute("CREATE TABLE t AS SELECT i AS id, i % 100000 AS k, i % 977 AS x FROM "
                           "range(6000000) r(i)")
                  .ok());
  const std::string query =
      "SELECT count(*), sum(id) FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY x DESC, "
      "id) AS rn "
      "FROM t WHERE abs(id) >= 0) WHERE rn = 1";
  auto before = engine.Plan(conn, query, /*allow_steps=*/true);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_FALSE(before->explanation.empty()) << "the query is rewritten while abs is the built-in";
  if (before->cleanup) before->cleanup(conn);

  auto ddl = engine.Plan(conn, change, /*allow_steps=*/true);
  ASSERT_TRUE(ddl.ok()) << ddl.status().ToString();
  ASSERT_TRUE(conn.Execute(ddl->sql).ok()) << change;

  auto after = engine.Plan(conn, query, /*allow_steps=*/true);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_TRUE(after->explanation.empty())
      << "rewritten after " << change << ": " << after->explanation;
  if (after->cleanup) after->cleanup(conn);
}

TEST_F(EngineTest, AMacroCreatedInASessionIsSeenByTheNextPlan) {
  ExpectTheStatementStopsTheRewrite(*conn_, "CREATE MACRO abs(a) AS a + (random() * 0.5)::BIGINT");
}

TEST_F(EngineTest, AMacroImportedWithADatabaseIsSeenByTheNextPlan) {
  // IMPORT DATABASE runs an export's schema.sql: macros created without the statement
  // naming one.
  std::filesystem::path dir = spill_ / "export";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "schema.sql") << "CREATE MACRO abs(a) AS a + (random() * 0.5)::BIGINT;\n";
  std::ofstream(dir / "load.sql") << "";
  ExpectTheStatementStopsTheRewrite(*conn_, "IMPORT DATABASE '" + dir.string() + "'");
}

// With several parts over Parquet files a DOUBLE kept column's exactness is assumed from
// the first million rows (design 0013 D25); a row after them that breaks it stops the part,
// and the engine plans the statement again without the assumption: DuckDB's answer.
TEST_F(EngineTest, ARowThatBreaksTheRewritesAssumptionIsPlannedAgain) {
  QueryEngine engine({.memory_limit_bytes = 16 << 20, .threads = 2});
  ASSERT_TRUE(engine.OpenDatabase(*conn_).ok());
  ASSERT_TRUE(engine.StartSession(*conn_, "").ok());
  const std::string file = (spill_ / "late.parquet").string();
  // The inexact value (a third) is in the last row group, after the first million rows.
  ASSERT_TRUE(conn_
                  ->Execute("COPY (SELECT i AS id, i % 100000 AS k, CASE WHEN i = 1499990 THEN "
                            "i / 3.0 ELSE (i % 1000) / 4.0 END::DOUBLE AS m FROM range(1500000) "
                            "r(i) ORDER BY i) TO '" +
                            file + "' (FORMAT parquet)")
                  .ok());
  const std::string query =
      "SELECT count(*), sum(id), sum(m) FILTER (WHERE m * 4 = round(m * 4)), count(*) FILTER "
      "(WHERE m * 4 <> round(m * 4)) FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY "
      "id DESC) AS rn FROM read_parquet('" +
      file + "')) WHERE rn = 1";
  auto want = conn_->QueryText(query);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  EXPECT_EQ(*(*want)[0][3], "1");  // the third is a latest row
  auto planned = engine.Plan(*conn_, query, /*allow_steps=*/true);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  EXPECT_NE(planned->explanation.find("part(s)"), std::string::npos) << planned->explanation;
  EXPECT_EQ(planned->explanation.find("assumed"), std::string::npos) << planned->explanation;
  auto got = conn_->QueryText(planned->sql);
  if (planned->cleanup) planned->cleanup(*conn_);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, *want);
}

// The planning stages (lake tables, topic() bounds, the rewrites) share one parse of a
// statement and print it once.
TEST_F(EngineTest, AStatementIsParsedOnceAndPrintedOnce) {
  QueryEngine engine(
      {.kafka_bootstrap = "127.0.0.1:1", .memory_limit_bytes = 16 << 20, .threads = 2});
  sql_tree::RoundTrips before = sql_tree::CountRoundTrips();
  auto bounded =
      engine.Plan(*conn_, "SELECT * FROM topic('t') WHERE \"offset\" >= 5", /*allow_steps=*/true);
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  EXPECT_NE(bounded->sql.find("from_offset"), std::string::npos) << bounded->sql;
  sql_tree::RoundTrips after = sql_tree::CountRoundTrips();
  EXPECT_EQ(after.parses - before.parses, 1u) << "topic() bounds and the rewrites share one parse";
  EXPECT_EQ(after.renders - before.renders, 1u);

  // Nothing any stage could change (no lake name, no topic(), neither OVER nor GROUP): not
  // parsed at all.
  before = after;
  auto plain = engine.Plan(*conn_, "SELECT 42 AS x", /*allow_steps=*/true);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->sql, "SELECT 42 AS x");
  after = sql_tree::CountRoundTrips();
  EXPECT_EQ(after.parses - before.parses, 0u);
  EXPECT_EQ(after.renders - before.renders, 0u);

  // A GROUP BY the rewrites leave to DuckDB: parsed once (for them), handed on as written.
  before = after;
  const std::string grouped = "SELECT x, count(*) FROM (VALUES (1), (2)) v(x) GROUP BY x";
  auto small = engine.Plan(*conn_, grouped, /*allow_steps=*/true);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->sql, grouped);
  after = sql_tree::CountRoundTrips();
  EXPECT_EQ(after.parses - before.parses, 1u);
}

// A lake table's statement with the rewrites on: the lake planner and the rewrites share
// one parse, and the scan of the table's files is spliced into the text, never parsed.
TEST_F(EngineTest, ALakeStatementIsParsedOnceAndPrintedOnce) {
  const std::string warehouse = (spill_ / "wh").string();
  std::filesystem::create_directories(warehouse + "/db/t/data");
  auto schema = lake::SchemaFromJson(
      lake::Json::parse(
          R"({"type":"struct","schema-id":0,"fields":[{"id":1,"name":"id","required":false,"type":"long"}]})"),
      "$", true);
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  auto table = lake::Table::Create(warehouse + "/db/t", *schema, lake::PartitionSpec{}, {});
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  const std::string path = warehouse + "/db/t/data/0.parquet";
  auto file = lake::WriteDataFile(*conn_, "SELECT range::BIGINT AS id FROM range(10)", *schema,
                                  path, lake::FileUri(path));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto appended = table->Append(
      {*file}, [](const lake::TableMetadata&) -> Result<std::map<std::string, std::string>> {
        return std::map<std::string, std::string>{};
      });
  ASSERT_TRUE(appended.ok()) << appended.status().ToString();

  QueryEngine engine({.warehouse = warehouse, .memory_limit_bytes = 16 << 20, .threads = 2});
  const sql_tree::RoundTrips before = sql_tree::CountRoundTrips();
  auto planned =
      engine.Plan(*conn_, "SELECT count(*) FROM lake.db.t WHERE id >= 3", /*allow_steps=*/true);
  ASSERT_TRUE(planned.ok()) << planned.status().ToString();
  const sql_tree::RoundTrips after = sql_tree::CountRoundTrips();
  EXPECT_EQ(after.parses - before.parses, 1u) << planned->sql;
  EXPECT_EQ(after.renders - before.renders, 1u);
  auto rows = conn_->QueryText(planned->sql);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString() << "\n" << planned->sql;
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0][0].value_or(""), "7");
}

}  // namespace
}  // namespace sluice::query
