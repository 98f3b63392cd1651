// The rewrites' answers against DuckDB's unrewritten plan, on generated data with NULL keys,
// NULL order keys, ties, several keys and mixed directions; and the shapes that must pass
// through unchanged.
#include "query/rewrite/rewrite.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

namespace sluice::query::rewrite {
namespace {

using Rows = std::vector<std::vector<std::optional<std::string>>>;

// 200,000 rows: id unique; k1 ~1,000 values and NULL; k2 3 strings and NULL; x with many
// ties and NULLs; y a timestamp with NULLs; v a DOUBLE in halves (sums are exact); s text.
constexpr const char* kTable =
    "CREATE TABLE t AS SELECT i AS id, "
    "CASE WHEN i % 97 = 0 THEN NULL ELSE (hash(i, 1) % 1000)::INTEGER END AS k1, "
    "CASE hash(i, 2) % 4 WHEN 0 THEN NULL WHEN 1 THEN 'a' WHEN 2 THEN 'b' ELSE 'c' END AS k2, "
    "CASE WHEN i % 13 = 0 THEN NULL ELSE (hash(i, 3) % 50)::INTEGER END AS x, "
    "CASE WHEN i % 17 = 0 THEN NULL ELSE TIMESTAMP '2024-01-01' + to_seconds((hash(i, 4) % "
    "1000)::BIGINT) END AS y, "
    "(hash(i, 5) % 1000)::DOUBLE / 2 AS v, "
    "'s' || (hash(i, 6) % 300)::VARCHAR AS s "
    "FROM range(200000) r(i)";

class RewriteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    spill_ = std::filesystem::temp_directory_path() /
             ("sluice_rewrite_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(spill_);
    // The server's settings in small: an explicit memory limit, threads, a spill directory.
    auto db = duck::Database::Open(
        {.memory_limit_bytes = 512 << 20, .threads = 2, .temp_directory = spill_.string()});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value().release();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(conn).value().release();
    ASSERT_TRUE(conn_->Execute(kTable).ok());
    ASSERT_TRUE(conn_->Execute("SET preserve_insertion_order = false").ok());
  }
  static void TearDownTestSuite() {
    delete conn_;
    delete db_;
    std::filesystem::remove_all(spill_);
  }

  static RewriteOptions Options(int parts) {
    return {.memory_limit_bytes = 512 << 20,
            .threads = 2,
            .min_rows_to_rewrite = 0,
            .force_parts = parts};
  }

  static Rows Sorted(Rows r) {
    std::sort(r.begin(), r.end());
    return r;
  }

  // The rewritten plan's answer; fails the test when no rewrite applies.
  static Rows Rewritten(const std::string& sql, int parts, RewriteKind kind,
                        std::string* explanation = nullptr) {
    std::string why_not;
    auto plan = PlanRewrite(*conn_, sql, Options(parts), &why_not);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (!plan.ok() || !plan->has_value()) {
      ADD_FAILURE() << "no rewrite for " << sql << ": " << why_not;
      return {};
    }
    const Plan& p = **plan;
    EXPECT_EQ(p.kind, kind);
    EXPECT_EQ(p.parts, parts);
    EXPECT_EQ(p.steps.size(),
              parts == 1 ? 0u : static_cast<size_t>(parts));  // one part runs inline (D15)
    if (explanation)
      *explanation = p.explanation + "\n" + (p.steps.empty() ? p.final_select : p.steps[0]);
    return Answer(p);
  }

  // A plan's answer: its steps, its final SELECT, its cleanup.
  static Rows Answer(const Plan& p) {
    auto final_select = RunSteps(*conn_, p);
    EXPECT_TRUE(final_select.ok()) << final_select.status().ToString();
    if (!final_select.ok()) return {};
    auto rows = conn_->QueryText(*final_select);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString() << "\n" << *final_select;
    EXPECT_TRUE(RunCleanup(*conn_, p).ok());
    return rows.ok() ? *rows : Rows{};
  }

  static Rows Plain(const std::string& sql) {
    auto rows = conn_->QueryText(sql);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? *rows : Rows{};
  }

  // The rewritten answer equals DuckDB's (as a multiset) with 1 and several parts.
  static void ExpectSame(const std::string& sql, RewriteKind kind,
                         const std::string& reference = "") {
    Rows want = Sorted(Plain(reference.empty() ? sql : reference));
    ASSERT_FALSE(want.empty());
    for (int parts : {1, 3, 8}) {
      std::string how;
      Rows got = Sorted(Rewritten(sql, parts, kind, &how));
      EXPECT_EQ(got, want) << sql << "\nparts " << parts << ": " << how;
    }
  }

  static void ExpectPassThrough(const std::string& sql) {
    auto plan = PlanRewrite(*conn_, sql, Options(4));
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_FALSE(plan->has_value()) << sql << "\n" << (*plan)->final_select;
  }

  static size_t TempTables() {
    auto rows = conn_->QueryText("SELECT count(*) FROM duckdb_tables() WHERE temporary");
    return rows.ok() ? std::stoul(*(*rows)[0][0]) : 999;
  }

  static std::filesystem::path spill_;
  static duck::Database* db_;
  static duck::Connection* conn_;
};

std::filesystem::path RewriteTest::spill_;
duck::Database* RewriteTest::db_ = nullptr;
duck::Connection* RewriteTest::conn_ = nullptr;

// ---- latest row per key

// The text filter that spares a statement the parse: every shape the rewrites take has a
// window (OVER) or a GROUP BY; statements with neither word never plan.
TEST(MayRewriteTest, OnlyWindowsAndGroupBysArePlanned) {
  EXPECT_FALSE(MayRewrite("SELECT 1"));
  EXPECT_FALSE(MayRewrite("SELECT * FROM lake.bench.products WHERE product_id = 7"));
  EXPECT_FALSE(MayRewrite("SELECT overview, group_id FROM groups_over"));
  EXPECT_TRUE(MayRewrite("SELECT k, count(*) FROM t GROUP BY k"));
  EXPECT_TRUE(
      MayRewrite("select * from (select *, row_number() over (partition by k) rn "
                 "from t) where rn = 1"));
  EXPECT_TRUE(
      MayRewrite("SELECT * FROM t QUALIFY row_number() OVER w = 1 WINDOW w AS (ORDER BY x)"));
}

// ---- DISTINCT ON as the latest-row window (D24)

TEST(MayRewriteTest, DistinctOnIsPlanned) {
  EXPECT_TRUE(MayRewrite("SELECT DISTINCT ON (k) * FROM t ORDER BY k, ts DESC"));
  EXPECT_TRUE(MayRewrite("select distinct\n  on(k) * from t order by k, ts desc"));
  // A plain DISTINCT (psql's catalog queries have them) is not parsed for the rewrites.
  EXPECT_FALSE(MayRewrite("SELECT DISTINCT k FROM t JOIN u ON t.a = u.a"));
  EXPECT_FALSE(MayRewrite("SELECT DISTINCT ONE FROM t"));
  EXPECT_FALSE(MayRewrite("SELECT nondistinct on_x FROM t"));
}

TEST_F(RewriteTest, DistinctOnIsTheLatestRowInTheOrderOfItsKeys) {
  // id is unique: the answer does not depend on ties; NULL keys included.
  for (const std::string sql :
       {"SELECT DISTINCT ON (k1) * FROM t ORDER BY k1, id DESC",
        "SELECT DISTINCT ON (k1, k2) id, x, v FROM t WHERE v > 10 ORDER BY k2 DESC NULLS FIRST, "
        "k1, y DESC NULLS LAST, id",
        "SELECT DISTINCT ON (k1 % 7) k1 % 7 AS bucket, id FROM t ORDER BY k1 % 7, x, id DESC"}) {
    ExpectSame(sql, RewriteKind::kLatestRow);
    // The rows come in the order of the keys, as DuckDB's DISTINCT ON gives them.
    for (int parts : {1, 3}) {
      EXPECT_EQ(Rewritten(sql, parts, RewriteKind::kLatestRow), Plain(sql)) << sql;
    }
  }
  // A LIMIT (and OFFSET) applies to the keys in order, after the latest row of each.
  for (const std::string sql :
       {"SELECT DISTINCT ON (k1) k1, id, x FROM t ORDER BY k1 DESC NULLS LAST, id LIMIT 25",
        "SELECT DISTINCT ON (k1) k1, id FROM t ORDER BY k1, id DESC LIMIT 10 OFFSET 3"}) {
    for (int parts : {1, 3}) {
      EXPECT_EQ(Rewritten(sql, parts, RewriteKind::kLatestRow), Plain(sql)) << sql;
    }
  }
  // Column names as written.
  auto plan = PlanRewrite(*conn_, "SELECT DISTINCT ON (k1) k1, id AS newest FROM t ORDER BY k1, y",
                          Options(2));
  ASSERT_TRUE(plan.ok() && plan->has_value());
  ASSERT_TRUE(RunSteps(*conn_, **plan).ok());
  auto described = conn_->QueryText("DESCRIBE " + (*plan)->final_select);
  ASSERT_TRUE(described.ok()) << described.status().ToString();
  ASSERT_EQ(described->size(), 2u);
  EXPECT_EQ((*described)[0][0], "k1");
  EXPECT_EQ((*described)[1][0], "newest");
  EXPECT_TRUE(RunCleanup(*conn_, **plan).ok());
}

// What the consumer reads of a DISTINCT ON subquery is all the rewrite keeps (D6 through
// D24's projection): here id, besides the key.
TEST_F(RewriteTest, DistinctOnKeepsOnlyWhatItsConsumerReads) {
  std::string how;
  Rewritten(
      "SELECT count(*), sum(id) FROM (SELECT DISTINCT ON (k1) * FROM t ORDER BY k1, y DESC, id) "
      "d",
      2, RewriteKind::kLatestRow, &how);
  EXPECT_NE(how.find("of 2 kept column(s)"), std::string::npos) << how;
}

TEST_F(RewriteTest, DistinctOnInASubqueryOrCte) {
  ExpectSame(
      "SELECT count(*), sum(id), max(x) FROM (SELECT DISTINCT ON (k1) * FROM t ORDER BY k1, y "
      "DESC, id) d WHERE x > 3",
      RewriteKind::kLatestRow);
  ExpectSame(
      "WITH latest AS (SELECT DISTINCT ON (k2) k2, id, s FROM t ORDER BY k2, id DESC) "
      "SELECT l.k2, l.s, l.id FROM latest l",
      RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, DistinctOnShapesThatMeanSomethingElsePassThrough) {
  // No order beyond the keys: any row per key.
  ExpectPassThrough("SELECT DISTINCT ON (k1) * FROM t ORDER BY k1");
  ExpectPassThrough("SELECT DISTINCT ON (k1) * FROM t");
  // The ORDER BY does not start with the keys.
  ExpectPassThrough("SELECT DISTINCT ON (k1) * FROM t ORDER BY id, k1");
  // A position, or an output alias the window could not see.
  ExpectPassThrough("SELECT DISTINCT ON (k1) k1, id FROM t ORDER BY 1, id");
  ExpectPassThrough("SELECT DISTINCT ON (k1) k1, x * 2 AS d FROM t ORDER BY k1, d DESC");
  // A GROUP BY, a plain DISTINCT.
  ExpectPassThrough("SELECT DISTINCT ON (k1) k1, max(id) FROM t GROUP BY k1 ORDER BY k1, 2");
  ExpectPassThrough("SELECT DISTINCT k1 FROM t ORDER BY k1");
}

TEST_F(RewriteTest, LatestRowTwoKeysDescAscMatchesDuckDB) {
  // id is unique, so the answer does not depend on ties; NULL k1, k2 and x included.
  ExpectSame(
      "SELECT k1, k2, id, x FROM (SELECT *, row_number() OVER (PARTITION BY k1, k2 ORDER BY x "
      "DESC, id) AS rn "
      "FROM t) WHERE rn = 1",
      RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, LatestRowExplicitNullOrdersMatchDuckDB) {
  ExpectSame(
      "SELECT id, y, x FROM (SELECT *, row_number() OVER (PARTITION BY k2 ORDER BY y ASC NULLS "
      "FIRST, "
      "x DESC NULLS FIRST, id DESC) AS rn FROM t WHERE k1 < 500) sub WHERE sub.rn = 1",
      RewriteKind::kLatestRow);
  ExpectSame(
      "SELECT id, x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x DESC NULLS LAST, "
      "id ASC NULLS "
      "FIRST) AS rn FROM t) WHERE rn = 1",
      RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, LatestRowSortKeyPathForTextAndDoubleKeys) {
  std::string how;
  std::string sql =
      "SELECT k1, s, v, id FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY s DESC, v, "
      "id) AS rn "
      "FROM t) WHERE rn = 1";
  ExpectSame(sql, RewriteKind::kLatestRow);
  Rewritten(sql, 2, RewriteKind::kLatestRow, &how);
  EXPECT_NE(how.find("create_sort_key"), std::string::npos) << how;
}

TEST_F(RewriteTest, LatestRowPacksIntegerAndTimestampKeys) {
  std::string how;
  Rewritten(
      "SELECT id FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY y DESC, id DESC) AS "
      "rn FROM t) "
      "WHERE rn = 1",
      2, RewriteKind::kLatestRow, &how);
  EXPECT_NE(how.find("packed"), std::string::npos) << how;
  EXPECT_NE(how.find("no kept column differs"), std::string::npos) << how;
}

TEST_F(RewriteTest, LatestRowCteFormsAndOtherConjuncts) {
  for (std::string filter : {"rn = 1", "rn <= 1", "rn < 2", "1 = rn", "r.rn = 1 AND x > 10"}) {
    ExpectSame(
        "WITH r AS (SELECT id, k1, x, y, row_number() OVER (PARTITION BY k1 ORDER BY y, id) AS rn "
        "FROM t) "
        "SELECT count(*), sum(id), sum(x), max(rn) FROM r WHERE " +
            filter,
        RewriteKind::kLatestRow);
  }
}

TEST_F(RewriteTest, LatestRowQualifyForms) {
  ExpectSame(
      "SELECT id, k1, k2 FROM t QUALIFY row_number() OVER (PARTITION BY k1, k2 ORDER BY id DESC) = "
      "1",
      RewriteKind::kLatestRow);
  ExpectSame(
      "SELECT id, k2, row_number() OVER (PARTITION BY k2 ORDER BY x NULLS FIRST, id) AS rn FROM t "
      "QUALIFY rn = 1",
      RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, LatestRowSelectStarKeepsEveryColumnInOrder) {
  ExpectSame(
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY id) AS rn FROM t) "
      "WHERE rn = 1",
      RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, LatestRowTiesBrokenByAHashOfTheKeptColumns) {
  // x has many ties per k1: the answer depends on which tied row is taken. Text columns
  // cannot be packed exactly, so the rewrite takes the tied row with the least hash of the
  // kept columns (63 bits), the same answer for any number of parts.
  std::string sql =
      "SELECT k1, k2, s FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x) AS rn FROM "
      "t) WHERE rn = 1";
  std::string reference =
      "SELECT k1, k2, s FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, hash(k2, "
      "s)) AS rn FROM t) "
      "WHERE rn = 1";
  ExpectSame(sql, RewriteKind::kLatestRow, reference);
  std::string how;
  Rewritten(sql, 2, RewriteKind::kLatestRow, &how);
  EXPECT_NE(how.find("63-bit hash of 2 kept column(s)"), std::string::npos) << how;
}

TEST_F(RewriteTest, LatestRowTiesBrokenByTheLeastExactlyPackedColumns) {
  // v (a DOUBLE of halves) and y (a timestamp) pack exactly (D14): among rows tied on x the
  // least y, then the least v wins (the window query's column order), NULLs last; s is
  // broken by hash.
  std::string sql =
      "SELECT k1, v, y FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x) AS rn FROM "
      "t) WHERE rn = 1";
  std::string reference =
      "SELECT k1, v, y FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, y NULLS "
      "LAST, v NULLS LAST) "
      "AS rn FROM t) WHERE rn = 1";
  ExpectSame(sql, RewriteKind::kLatestRow, reference);
  std::string how;
  Rewritten(sql, 2, RewriteKind::kLatestRow, &how);
  EXPECT_NE(how.find("2 of 3 kept column(s) decoded from the key; ties broken by the least kept "
                     "columns, packed exactly"),
            std::string::npos)
      << how;
  std::string mixed =
      "SELECT k1, v, s FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x) AS rn FROM "
      "t) WHERE rn = 1";
  ExpectSame(mixed, RewriteKind::kLatestRow,
             "SELECT k1, v, s FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, v "
             "NULLS LAST, hash(s)) "
             "AS rn FROM t) WHERE rn = 1");
}

TEST_F(RewriteTest, LatestRowDecodesEveryPackableTypeExactly) {
  // A kept column comes back from the packed key with its type and value, NULLs too:
  // integers of each width, BOOLEAN, DATE, TIMESTAMP (s, ms, us, ns, tz), DECIMALs of up to
  // 18 digits, and DOUBLEs and FLOATs with one or two decimals; as a tie-breaking column and as
  // an order key.
  // The order ends in the unique id, so DuckDB's answer is the only one.
  ASSERT_TRUE(
      conn_
          ->Execute(
              "CREATE OR REPLACE TABLE typed AS SELECT id, id % 500 AS k1, "
              "(id % 7)::TINYINT AS i8, (id % 300 - 150)::SMALLINT AS i16, (id * 3 - "
              "100000)::INTEGER AS "
              "i32, CASE WHEN id % 11 = 0 THEN NULL ELSE id * 1000003 - 7 END AS i64, "
              "(id % 5)::UTINYINT AS u8, id % 2 = 0 AS b, "
              "DATE '1999-12-31' + (id % 5000)::INTEGER AS d, "
              "TIMESTAMP '2020-02-29 12:00:00' + to_microseconds(id * 1234567) AS ts, "
              "(TIMESTAMP '2020-02-29 12:00:00' + to_seconds(id))::TIMESTAMP_S AS ts_s, "
              "(TIMESTAMP '2020-02-29 12:00:00' + to_milliseconds(id))::TIMESTAMP_MS AS ts_ms, "
              "(TIMESTAMPTZ '2020-02-29 12:00:00+00' + to_microseconds(id * 7)) AS tz, "
              "CASE WHEN id % 13 = 0 THEN NULL ELSE round((id % 100000) / 7.0 - 50, 2) END AS "
              "money, "
              "round((id % 1000) / 7.0, 1) AS fine, "
              "make_timestamp_ns(1582977600000000000 + id * 999999937) AS ts_ns, "
              "CASE WHEN id % 17 = 0 THEN NULL ELSE (((id % 9000) - 4500) / 100)::DECIMAL(10,2) "
              "END AS dec2, (id * 7 - 3000)::DECIMAL(18,0) AS dec0, "
              "((id % 777) * 0.001 - 0.3)::DECIMAL(6,3) AS dec3, "
              "CASE WHEN id % 19 = 0 THEN NULL ELSE ((id % 2000) / 4.0 - 100)::FLOAT END AS f4, "
              "round((id % 100000) / 7.0 - 50, 2)::FLOAT AS fcents FROM range(20000) r(id)")
          .ok());
  const char* columns[] = {"i8",   "i16",  "i32",   "i64", "u8",    "b",    "d",
                           "ts",   "ts_s", "ts_ms", "tz",  "money", "fine", "ts_ns",
                           "dec2", "dec0", "dec3",  "f4",  "fcents"};
  for (size_t i = 0; i < std::size(columns); ++i) {
    std::string col = columns[i];
    bool is_double = col == "money" || col == "fine" || col == "f4" || col == "fcents";
    std::string order = i % 3 == 0                ? "id DESC"
                        : i % 3 == 1 || is_double ? "id"
                                                  : col + " DESC NULLS FIRST, id";
    std::string sql = fmt::format(
        "SELECT k1, id, {} FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY {}) AS rn "
        "FROM typed) "
        "WHERE rn = 1",
        col, order);
    ExpectSame(sql, RewriteKind::kLatestRow);
    std::string how;
    Rewritten(sql, 1, RewriteKind::kLatestRow, &how);
    EXPECT_NE(how.find("2 of 3 kept column(s) decoded from the key"), std::string::npos)
        << sql << "\n"
        << how;
  }
}

TEST_F(RewriteTest, LatestRowDoublesThatAreNotExactFallBackToAHash) {
  // Thirds do not survive scaling to hundredths; -0.0 would come back as 0.0; nor do NaN and
  // infinities.
  for (const char* expr :
       {"(id / 3.0)::DOUBLE", "CASE WHEN id = 5 THEN -(0.0::DOUBLE) ELSE 1.5 END",
        "(id / 3.0)::FLOAT", "CASE WHEN id = 5 THEN -(0.0::FLOAT) ELSE 1.5::FLOAT END",
        "CASE WHEN id = 7 THEN 'nan'::FLOAT ELSE 2.5::FLOAT END",
        "CASE WHEN id = 9 THEN '-inf'::DOUBLE ELSE 2.5 END"}) {
    ASSERT_TRUE(conn_
                    ->Execute(fmt::format(
                        "CREATE OR REPLACE TABLE inexact AS SELECT id, k1, {} AS w FROM t", expr))
                    .ok());
    std::string sql =
        "SELECT k1, w FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY id DESC) AS rn "
        "FROM inexact) "
        "WHERE rn = 1";
    ExpectSame(sql, RewriteKind::kLatestRow);
    std::string how;
    Rewritten(sql, 1, RewriteKind::kLatestRow, &how);
    EXPECT_NE(how.find("0 of 2 kept column(s) decoded"), std::string::npos) << expr << ": " << how;
  }
}

TEST_F(RewriteTest, LatestRowOrderKeyOfAnotherTableIsNotDecodedAsTheOutputColumn) {
  // The output x is a.x; the order key b.x is another column of the same name.
  ExpectSame(
      "SELECT * FROM (SELECT a.id, a.x, row_number() OVER (PARTITION BY a.k1 ORDER BY b.x DESC, "
      "a.id) AS rn "
      "FROM t a JOIN t b ON a.id = b.id + 1) WHERE rn = 1",
      RewriteKind::kLatestRow);
  ExpectSame(
      "SELECT * FROM (SELECT a.*, row_number() OVER (PARTITION BY a.k1 ORDER BY b.x DESC, a.id) AS "
      "rn "
      "FROM t a JOIN t b ON a.id = b.id + 1) WHERE rn = 1",
      RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, LatestRowInputChangedAfterTheStatisticsScanIsAnError) {
  // A value outside the scanned bounds would overflow into its neighbour's bits: the parts
  // refuse it rather than answer wrongly, one part (inline) or several.
  for (int parts : {1, 2}) {
    ASSERT_TRUE(conn_->Execute("CREATE OR REPLACE TABLE moving AS SELECT id, k1, x FROM t").ok());
    std::string sql =
        "SELECT k1, id, x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY id DESC) AS "
        "rn FROM moving) "
        "WHERE rn = 1";
    auto plan = PlanRewrite(*conn_, sql, Options(parts));
    ASSERT_TRUE(plan.ok() && plan->has_value()) << plan.status().ToString();
    ASSERT_TRUE(conn_->Execute("INSERT INTO moving VALUES (999999999, 1, 5)").ok());
    auto final_select = RunSteps(*conn_, **plan);
    Status st =
        final_select.ok() ? conn_->QueryText(*final_select).status() : final_select.status();
    EXPECT_NE(st.ToString().find("input changed"), std::string::npos) << st.ToString();
    EXPECT_TRUE(RunCleanup(*conn_, **plan).ok());
  }
}

// D21: over Parquet files the order keys' bounds and NULLs, an integer tie-breaking
// column's and the keys' bound come from the footers (many row groups, NULLs, row groups
// whose values are all NULL, a WHERE, the lake's field-id form); the answers are DuckDB's.
TEST_F(RewriteTest, LatestRowStatisticsComeFromTheParquetFooters) {
  std::string dir = (spill_ / "footers").string();
  std::filesystem::create_directories(dir);
  std::string file = dir + "/t.parquet";
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT *, CASE WHEN id < 20000 THEN NULL ELSE id % 5000 END AS z, "
                      "(id % 3 = 0) AS b, DATE '2020-01-01' + (id % 900)::INTEGER AS d FROM t "
                      "ORDER BY id) TO '{}' (FORMAT parquet, ROW_GROUP_SIZE 10000, FIELD_IDS "
                      "{{id: 1, k1: 2, k2: 3, x: 4, y: 5, v: 6, s: 7, z: 8, b: 9, d: 10}})",
                      file))
                  .ok());
  const std::string f = fmt::format("read_parquet('{}')", file);
  auto explained = [&](const std::string& sql) {
    std::string how;
    Rewritten(sql, 1, RewriteKind::kLatestRow, &how);
    return how;
  };
  const std::vector<std::string> queries = {
      // NULLs in both order keys; id (integer) packed, k2/v/s hashed.
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY y DESC NULLS LAST, "
      "x, id) AS rn FROM {f}) WHERE rn = 1",
      // A column whose first two row groups are all NULL; a BOOLEAN and a DATE key.
      "SELECT id, k1, z FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY z NULLS "
      "FIRST, b, d DESC, id DESC) AS rn FROM {f}) WHERE rn = 1",
      // A WHERE on the window query: the files' bounds still bound what it keeps.
      "SELECT k1, id, x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x DESC, id) "
      "AS rn FROM {f} WHERE x > 10) WHERE rn = 1",
      // Qualified columns of an aliased read.
      "SELECT k1, id FROM (SELECT r.k1, r.id, row_number() OVER (PARTITION BY r.k1 ORDER BY r.id "
      "DESC) AS rn FROM {f} AS r) WHERE rn = 1"};
  for (const std::string& q : queries) {
    std::string sql = fmt::format(fmt::runtime(q), fmt::arg("f", f));
    ExpectSame(sql, RewriteKind::kLatestRow);
    std::string how = explained(sql);
    EXPECT_NE(how.find("statistics from the Parquet footers"), std::string::npos) << sql << how;
    EXPECT_NE(how.find("at most 1001 keys"), std::string::npos) << sql << how;
    // Several parts: a probe of the first rows agrees with the bound, so the keys are not
    // counted again.
    how.clear();
    Rewritten(sql, 3, RewriteKind::kLatestRow, &how);
    EXPECT_NE(how.find("at most 1001 keys"), std::string::npos) << sql << how;
    EXPECT_NE(how.find("statistics from the Parquet footers"), std::string::npos) << sql << how;
  }
  // The lake's form: renamed columns found by field id (k1 is kk now, id is oid).
  std::string lake = fmt::format(
      "(SELECT \"oid\", \"kk\", \"y\" FROM read_parquet(['{}'], schema = MAP {{1: {{name: "
      "'oid', type: 'BIGINT', default_value: NULL}}, 2: {{name: 'kk', type: 'INTEGER', "
      "default_value: NULL}}, 5: {{name: 'y', type: 'TIMESTAMP', default_value: NULL}}}}, "
      "hive_partitioning = false))",
      file);
  std::string sql = fmt::format(
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY kk ORDER BY y, oid DESC) AS rn "
      "FROM {} AS l) WHERE rn = 1",
      lake);
  ExpectSame(sql, RewriteKind::kLatestRow);
  EXPECT_NE(explained(sql).find("statistics from the Parquet footers"), std::string::npos);
  // An expression as an order key has no footer statistics: scanned.
  sql = fmt::format(
      "SELECT k1, id FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x + 1, id) AS rn "
      "FROM {}) WHERE rn = 1",
      f);
  ExpectSame(sql, RewriteKind::kLatestRow);
  EXPECT_NE(explained(sql).find("statistics scanned"), std::string::npos);
}

// D25: with several parts over Parquet files, a DOUBLE or FLOAT kept column's exactness in
// hundredths is taken from the first rows (its bounds from the footers) instead of a pass
// over the input; a later row that breaks it stops the part, and planning again without
// the assumption gives DuckDB's answer.
TEST_F(RewriteTest, FloatExactnessAssumedFromTheFirstRowsIsPlannedAgainWhenARowBreaksIt) {
  std::string dir = (spill_ / "assumed").string();
  std::filesystem::create_directories(dir);
  const std::string sql_of =
      "SELECT k, id, m, f FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY id DESC) AS "
      "rn FROM read_parquet('{}')) WHERE rn = 1";
  struct Case {
    const char* name;
    const char* m;
    bool breaks;
  };
  // (No 0.0 beside the -0.0: Parquet's dictionary would store both as the first seen.)
  for (const Case& c : {
           Case{"exact", "(i % 1000) / 4.0", false},
           Case{"third", "CASE WHEN i = 29990 THEN i / 3.0 ELSE (i % 1000) / 4.0 END", true},
           Case{"negative_zero",
                "CASE WHEN i = 29990 THEN -(0.0::DOUBLE) ELSE (i % 1000) / 4.0 + 1 END", true},
           Case{"thousandths", "CASE WHEN i = 29990 THEN 0.125 ELSE (i % 1000) / 4.0 END", true},
       }) {
    const std::string file = fmt::format("{}/{}.parquet", dir, c.name);
    ASSERT_TRUE(conn_
                    ->Execute(fmt::format(
                        "COPY (SELECT i % 500 AS k, i AS id, ({})::DOUBLE AS m, "
                        "CASE WHEN i % 7 = 0 THEN NULL ELSE ((i % 300) / 20.0)::FLOAT END AS f "
                        "FROM range(30000) r(i) ORDER BY i) TO '{}' (FORMAT parquet)",
                        c.m, file))
                    .ok());
    const std::string sql = fmt::format(fmt::runtime(sql_of), file);
    auto want = conn_->QueryText(sql);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    RewriteOptions options = Options(3);
    options.probe_rows = 1000;
    auto plan = PlanRewrite(*conn_, sql, options);
    ASSERT_TRUE(plan.ok() && plan->has_value()) << c.name;
    EXPECT_TRUE((*plan)->assumed) << c.name << ": " << (*plan)->explanation;
    EXPECT_NE((*plan)->explanation.find("assumed from the first 1000 rows"), std::string::npos)
        << (*plan)->explanation;
    auto tried = RunSteps(*conn_, **plan);
    EXPECT_EQ(AssumptionFailed(tried.status()), c.breaks)
        << c.name << ": " << tried.status().ToString() << "\n"
        << (*plan)->explanation;
    if (tried.ok()) EXPECT_TRUE(RunCleanup(*conn_, **plan).ok());
    if (c.breaks) {
      options.assume = false;
      plan = PlanRewrite(*conn_, sql, options);
      ASSERT_TRUE(plan.ok() && plan->has_value());
      EXPECT_FALSE((*plan)->assumed);
      EXPECT_EQ((*plan)->explanation.find("assumed"), std::string::npos) << (*plan)->explanation;
    }
    EXPECT_EQ(Sorted(Answer(**plan)), Sorted(*want)) << c.name;
    EXPECT_EQ(TempTables(), 0u);
  }
}

// D26: over Parquet files a single integer key bounded in the footers is split into ranges
// (the first part also takes NULL keys), not hashed; the answers stay DuckDB's.
TEST_F(RewriteTest, PartsByRangesOfAnIntegerKey) {
  const std::string file = (spill_ / "ranged.parquet").string();
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT i AS id, CASE WHEN i % 97 = 0 THEN NULL ELSE (i * 7919) % "
                      "20011 - 5000 END AS k, (i % 1000) / 4.0 AS m, i % 13 AS q FROM "
                      "range(60000) r(i)) TO '{}' (FORMAT parquet, ROW_GROUP_SIZE 7000)",
                      file))
                  .ok());
  const std::string f = fmt::format("read_parquet('{}')", file);
  const std::vector<std::pair<std::string, RewriteKind>> queries = {
      {"SELECT k, count(*), sum(q), max(id) FROM {f} GROUP BY k", RewriteKind::kGroupBy},
      {"SELECT count(*), sum(n), sum(s) FROM (SELECT k, count(*) AS n, sum(q) AS s FROM {f} "
       "GROUP BY k)",
       RewriteKind::kGroupBy},
      {"SELECT k, id, m FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY id DESC) AS "
       "rn FROM {f}) WHERE rn = 1",
       RewriteKind::kLatestRow},
  };
  for (const auto& [q, kind] : queries) {
    const std::string sql = fmt::format(fmt::runtime(q), fmt::arg("f", f));
    ExpectSame(sql, kind);
    for (int parts : {2, 5}) {
      std::string how;
      Rewritten(sql, parts, kind, &how);
      EXPECT_NE(how.find("parts by ranges of the key from -5000 to 15010"), std::string::npos)
          << sql << "\n"
          << how;
    }
  }
  // Two keys, or a key that is an expression: hashed.
  std::string how;
  Rewritten(fmt::format("SELECT k, q, count(*) FROM {} GROUP BY k, q", f), 3, RewriteKind::kGroupBy,
            &how);
  EXPECT_EQ(how.find("ranges"), std::string::npos) << how;
  Rewritten(fmt::format("SELECT k + 1, count(*) FROM {} GROUP BY k + 1", f), 3,
            RewriteKind::kGroupBy, &how);
  EXPECT_EQ(how.find("ranges"), std::string::npos) << how;
}

// D25's assumption is only for plans of several steps: a plan that ends as one inline part
// (the keys, counted, fit where the footers' bound did not) is made without it, so a row
// that breaks it cannot fail the answer's own query.
TEST_F(RewriteTest, AFloatAssumptionNeverReachesAnInlinePart) {
  const std::string file = (spill_ / "inline_assumed.parquet").string();
  // 1,000 VARCHAR keys (bounded by the rows in the footers, 60,000), a DOUBLE in quarters but
  // for one third after the first rows.
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT 'k' || (i % 1000) AS k, i AS id, CASE WHEN i = 59990 THEN "
                      "i / 3.0 ELSE (i % 1000) / 4.0 END::DOUBLE AS m FROM range(60000) r(i) "
                      "ORDER BY i) TO '{}' (FORMAT parquet)",
                      file))
                  .ok());
  const std::string sql = fmt::format(
      "SELECT k, id, m FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY id DESC) AS rn "
      "FROM read_parquet('{}')) WHERE rn = 1",
      file);
  auto want = conn_->QueryText(sql);
  ASSERT_TRUE(want.ok());
  // A memory limit under which the bound's 60,001 keys need parts and the 1,000 counted fit
  // in one.
  RewriteOptions options{.memory_limit_bytes = 4 << 20, .threads = 2, .min_rows_to_rewrite = 0};
  options.probe_rows = 1000;
  auto plan = PlanRewrite(*conn_, sql, options);
  ASSERT_TRUE(plan.ok() && plan->has_value());
  EXPECT_EQ((*plan)->parts, 1) << (*plan)->explanation;
  EXPECT_FALSE((*plan)->assumed) << (*plan)->explanation;
  EXPECT_EQ(Sorted(Answer(**plan)), Sorted(*want));
}

// D23: top k per key (`rn <= k`, k > 1, in any form) is left to DuckDB's window, which
// beat k-row aggregates here; `rn <= 1` and its forms are the latest row.
TEST_F(RewriteTest, TopRowsPerKeyAreDuckDBsWindow) {
  const std::string w =
      "SELECT * FROM (SELECT id, k1, row_number() OVER (PARTITION BY k1 ORDER BY id) AS rn FROM "
      "t)";
  for (const char* filter : {"rn <= 3", "rn < 4", "3 >= rn", "4 > rn", "rn = 2", "rn < 1"})
    ExpectPassThrough(w + " WHERE " + filter);
  ExpectPassThrough(
      "SELECT k1, id FROM (SELECT k1, id, row_number() OVER (PARTITION BY k1 ORDER BY id) AS rn "
      "FROM t QUALIFY rn <= 2)");
  for (const char* filter : {"rn <= 1", "2 > rn", "rn <= 7 AND rn < 2"})
    ExpectSame(w + " WHERE " + filter, RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, LatestRowTiesBrokenByTheLeastKeptColumnsWithASortKey) {
  // The kept columns compare in the window query's column order (t's: x before v).
  std::string sql =
      "SELECT k1, v, x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY s DESC) AS rn "
      "FROM t) WHERE rn = 1";
  std::string reference =
      "SELECT k1, v, x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY s DESC, x ASC "
      "NULLS LAST, v ASC "
      "NULLS LAST) AS rn FROM t) WHERE rn = 1";
  ExpectSame(sql, RewriteKind::kLatestRow, reference);
}

TEST_F(RewriteTest, LatestRowKeepsNullValuesOfTheChosenRow) {
  // arg_min skips NULL values; the rewrite must return the chosen row's NULL.
  ExpectSame(
      "SELECT x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY id DESC) AS rn FROM t) "
      "WHERE rn = 1",
      RewriteKind::kLatestRow);
  ExpectSame(
      "SELECT y FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY y DESC NULLS FIRST) AS "
      "rn FROM t) "
      "WHERE rn = 1",
      RewriteKind::kLatestRow);
  ExpectSame(
      "SELECT s, x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY s, id DESC) AS rn "
      "FROM t) WHERE rn = 1",
      RewriteKind::kLatestRow);
}

// List, struct and map literals parse as functions of schema `main` (list_value,
// struct_pack, map); the lake planner's read_parquet([files], schema = MAP {...}) has them.
TEST_F(RewriteTest, LatestRowOverListStructAndMapLiteralsMatchesDuckDB) {
  ExpectSame(
      "SELECT id, k1, x, k2b, v2, one FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k1 ORDER BY "
      "x DESC, id DESC) "
      "AS rn FROM (SELECT id, k1, x, [k2, s][1] AS k2b, {'a': v}.a AS v2, (MAP {'m': 1})['m'] AS "
      "one FROM t)) "
      "WHERE rn = 1",
      RewriteKind::kLatestRow);
}

TEST_F(RewriteTest, LatestRowOnTheNullableSideOfALeftJoinPassesThrough) {
  ExpectPassThrough(
      "SELECT count(*) FROM (SELECT DISTINCT k1 FROM t) m LEFT JOIN (SELECT *, row_number() OVER "
      "(PARTITION BY k1 "
      "ORDER BY id) AS rn FROM t) l ON l.k1 = m.k1 WHERE l.rn = 1");
}

TEST_F(RewriteTest, LatestRowFollowsTheSessionsDefaultNullOrder) {
  ASSERT_TRUE(conn_->Execute("SET default_null_order = 'nulls_first'").ok());
  ExpectSame(
      "SELECT id, x FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x DESC, id) AS rn "
      "FROM t) "
      "WHERE rn = 1",
      RewriteKind::kLatestRow);
  ASSERT_TRUE(conn_->Execute("RESET default_null_order").ok());
}

TEST_F(RewriteTest, LatestRowInsideAJoinAndAnOuterAggregate) {
  ExpectSame(
      "SELECT count(*), sum(l.id), sum(l.x) FROM (SELECT *, row_number() OVER (PARTITION BY k1 "
      "ORDER BY y DESC, id DESC) "
      "AS rn FROM t) l JOIN (SELECT DISTINCT k1 FROM t WHERE k1 % 3 = 0) m ON l.k1 = m.k1 WHERE "
      "l.rn = 1",
      RewriteKind::kLatestRow);
}

// ---- group-by

TEST_F(RewriteTest, GroupByManyAggregatesMatchesDuckDB) {
  ExpectSame(
      "SELECT k1, k2, count(*), count(x), sum(x), min(s), max(y), avg(v), count(DISTINCT x), "
      "string_agg(DISTINCT s, ',' "
      "ORDER BY s) FROM t GROUP BY k1, k2",
      RewriteKind::kGroupBy);
}

TEST_F(RewriteTest, GroupByPositionHavingAndOuterQuery) {
  ExpectSame("SELECT x % 7 AS m, k2, sum(v) FROM t GROUP BY 1, 2 HAVING count(*) > 10",
             RewriteKind::kGroupBy);
  ExpectSame(
      "WITH g AS (SELECT k1, count(*) AS n, sum(x) AS sx, max(y) AS last_y FROM t WHERE id % 5 <> "
      "0 GROUP BY k1) "
      "SELECT count(*), sum(n), sum(sx), sum(n * n), max(last_y) FROM g",
      RewriteKind::kGroupBy);
}

// ---- pass-through

TEST_F(RewriteTest, ShapesThatMustNotBeRewrittenPassThrough) {
  const char* window = "SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, id) AS rn FROM t";
  ExpectPassThrough(std::string("SELECT * FROM (") + window + ") WHERE rn = 2");
  ExpectPassThrough(std::string("SELECT * FROM (") + window +
                    ") WHERE rn = 1 OR x IS NULL");                  // rn used otherwise
  ExpectPassThrough(std::string("SELECT * FROM (") + window + ")");  // no filter
  ExpectPassThrough(
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x) AS rn, rank() OVER "
      "(ORDER BY id) AS r "
      "FROM t) WHERE rn = 1");  // another window function
  ExpectPassThrough(
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x) AS rn FROM (SELECT "
      "* FROM t LIMIT 1000)) "
      "WHERE rn = 1");  // LIMIT without ORDER BY inside
  ExpectPassThrough(
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x) AS rn FROM t WHERE "
      "random() < 0.5) "
      "WHERE rn = 1");  // volatile
  ExpectPassThrough(
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, random()) AS rn "
      "FROM t) WHERE rn = 1");
  ExpectPassThrough(
      "SELECT * FROM (SELECT *, row_number() OVER (ORDER BY x) AS rn FROM t) WHERE rn = 1");
  ExpectPassThrough(
      "SELECT k1, sum(x), rank() OVER (ORDER BY sum(x)) FROM t GROUP BY k1");  // window over groups
  ExpectPassThrough("SELECT k1, sum(x) FROM t GROUP BY ROLLUP (k1)");
  ExpectPassThrough("SELECT k1, sum(x) FROM t GROUP BY k1 ORDER BY 2 LIMIT 5");
  ExpectPassThrough("SELECT k1, sum(x) FROM t WHERE now() > TIMESTAMP '2000-01-01' GROUP BY k1");
  ExpectPassThrough("SELEC k1 FROM t");  // malformed: DuckDB reports it when it runs
  ExpectPassThrough("SELECT nope FROM t GROUP BY nope");  // a binder error: DuckDB reports it
  ExpectPassThrough("INSERT INTO t SELECT * FROM t LIMIT 0");
}

TEST_F(RewriteTest, ConsumerAggregatesRunPerPartAndAreCombined) {
  // D17: an ungrouped count/sum/min/max consumer runs in every part over that part's rows;
  // the final query sums the counts and sums, and takes min of mins and max of maxes.
  const char* queries[] = {
      "WITH g AS (SELECT k1, count(*) AS n, sum(x) AS sx, max(y) AS my FROM t GROUP BY k1) "
      "SELECT count(*), sum(n), sum(sx), min(my), max(my), sum(n * n)::BIGINT AS sq, count(sx), "
      "sum(sx) / count(*) AS ratio FROM g WHERE n > 1",
      "WITH g AS (SELECT k1, count(*) AS n, sum(x) AS sx FROM t GROUP BY k1) "
      "SELECT count(*), sum(n), sum(sx), max(n) FROM g WHERE n > 1000000",  // every part empty
      "SELECT count(*) AS c, sum(id) FILTER (WHERE x > 10), min(y), max(s) FROM (SELECT *, "
      "row_number() OVER "
      "(PARTITION BY k1 ORDER BY id DESC) AS rn FROM t) WHERE rn = 1",
      "WITH ranked AS (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY y DESC, id DESC) AS "
      "rn FROM t) "
      "SELECT count(*)::BIGINT AS customers, sum(id)::BIGINT AS ids, sum(round(v * "
      "100)::BIGINT)::BIGINT AS cents "
      "FROM ranked WHERE rn = 1",  // q3's shape
  };
  for (size_t i = 0; i < std::size(queries); ++i) {
    ExpectSame(queries[i], i < 2 ? RewriteKind::kGroupBy : RewriteKind::kLatestRow);
    std::string how;
    Rewritten(queries[i], 3, i < 2 ? RewriteKind::kGroupBy : RewriteKind::kLatestRow, &how);
    EXPECT_NE(how.find("the consumer's aggregates per part"), std::string::npos) << how;
  }
  // Other consumers keep the parts' rows in the temp table: avg, a DOUBLE sum (not exact
  // in another order), a grouped consumer, a DISTINCT aggregate.
  const char* others[] = {
      "WITH g AS (SELECT k1, count(*) AS n FROM t GROUP BY k1) SELECT avg(n) FROM g",
      "WITH g AS (SELECT k1, sum(v) AS sv FROM t GROUP BY k1) SELECT sum(sv) FROM g",
      "WITH g AS (SELECT k1, count(*) AS n FROM t GROUP BY k1) SELECT n % 3, count(*) FROM g GROUP "
      "BY 1",
      "WITH g AS (SELECT k1, count(*) AS n FROM t GROUP BY k1) SELECT count(DISTINCT n) FROM g",
  };
  for (const char* q : others) {
    ExpectSame(q, RewriteKind::kGroupBy);
    std::string how;
    Rewritten(q, 3, RewriteKind::kGroupBy, &how);
    EXPECT_EQ(how.find("the consumer's aggregates per part"), std::string::npos) << q << "\n"
                                                                                 << how;
  }
}

TEST_F(RewriteTest, UserMacrosAreReadAtEveryPlan) {
  // The built-in functions are read once per process (D16); a macro the user creates later
  // is still found. DuckDB gives macros no stability, so they are never trusted to give the
  // same rows to every part: the query passes through as not CONSISTENT (not as unknown).
  ExpectSame(
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, id) AS rn FROM t) "
      "WHERE rn = 1",
      RewriteKind::kLatestRow);
  ASSERT_TRUE(conn_->Execute("CREATE OR REPLACE TEMP MACRO jitter(i) AS i >= 0").ok());
  std::string why_not;
  auto plan = PlanRewrite(
      *conn_,
      "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, id) AS rn FROM t "
      "WHERE jitter(id)) WHERE rn = 1",
      Options(2), &why_not);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(plan->has_value());
  EXPECT_NE(why_not.find("function jitter is not CONSISTENT"), std::string::npos) << why_not;
  ASSERT_TRUE(conn_->Execute("DROP MACRO jitter").ok());
}

TEST_F(RewriteTest, GroupByThatFitsInMemoryPassesThrough) {
  RewriteOptions o{.memory_limit_bytes = 512 << 20, .threads = 2, .min_rows_to_rewrite = 0};
  auto plan = PlanRewrite(*conn_, "SELECT k1, count(*) FROM t GROUP BY k1", o);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->has_value());
}

TEST_F(RewriteTest, LakeInputsProbeTheirKeysBeforeTheStatisticsScan) {
  // A lake table's read_parquet gives DuckDB no row count or distinct counts; the engine
  // passes the manifests' rows (here far more than the view holds). A key that repeats in the
  // first rows (g: 4 values) is left to DuckDB without the statistics scan; a near-unique
  // one (id + 1) is scaled to the known rows and scanned (D13).
  ASSERT_TRUE(conn_
                  ->Execute("CREATE OR REPLACE VIEW lakeish AS SELECT hash(i) % 4 AS g, i AS id "
                            "FROM range(200000) r(i)")
                  .ok());
  RewriteOptions o{.memory_limit_bytes = 16 << 20,
                   .threads = 2,
                   .min_rows_to_rewrite = 0,
                   .known_input_rows = 4'000'000'000};
  std::string why_not;
  // hash() has no statistics: DuckDB estimates its groups near its rows.
  auto plan = PlanRewrite(*conn_, "SELECT g, count(*) FROM lakeish GROUP BY g", o, &why_not);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(plan->has_value());
  EXPECT_NE(why_not.find("a probe of the first rows gives 4 groups"), std::string::npos) << why_not;
  why_not.clear();
  plan = PlanRewrite(*conn_, "SELECT id + 1, count(*) FROM lakeish GROUP BY 1", o, &why_not);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->has_value()) << why_not;  // 200,000 groups do not fit in half of 16 MB
}

TEST_F(RewriteTest, ParquetKeysAreBoundedByTheirTablesRowsAndRanges) {
  // Keys read from Parquet files are bounded without a probe: a dimension's column by the
  // dimension's rows, a bare integer column by its range in the footers' statistics, and
  // the lake's form (a projection of read_parquet with a field-id schema, the column
  // renamed since the files were written) by the field id's statistics (D18).
  std::string dir = (spill_ / "bound").string();
  std::filesystem::create_directories(dir);
  std::string fact = dir + "/fact.parquet", dim = dir + "/dim.parquet", ids = dir + "/ids.parquet";
  ASSERT_TRUE(
      conn_
          ->Execute(fmt::format(
              "COPY (SELECT i AS id, i % 500 AS k, i % 3000 AS p, i % 7 AS j FROM range(200000) "
              "r(i)) TO '{}' (FORMAT parquet, FIELD_IDS {{id: 1, k: 2, p: 3, j: 4}})",
              fact))
          .ok());
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT i AS p, 'c' || (i % 7) AS cat FROM range(3000) r(i)) TO '{}' "
                      "(FORMAT parquet)",
                      dim))
                  .ok());
  ASSERT_TRUE(
      conn_
          ->Execute(fmt::format("COPY (SELECT i * 1000 AS sparse FROM range(1000) r(i)) TO '{}' "
                                "(FORMAT parquet)",
                                ids))
          .ok());
  // 16 MB: about 80,000 groups fit; the fact's 200,000 rows do not. Blind estimates, as for
  // lake tables, so that DuckDB's own estimate does not decide.
  RewriteOptions o{.memory_limit_bytes = 16 << 20,
                   .threads = 2,
                   .min_rows_to_rewrite = 0,
                   .known_input_rows = 4'000'000'000};
  auto why = [&](const std::string& sql) {
    std::string why_not;
    auto plan = PlanRewrite(*conn_, sql, o, &why_not);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (plan.ok() && plan->has_value()) return std::string("rewritten");
    return why_not;
  };
  const std::string f = fmt::format("read_parquet('{}')", fact),
                    d = fmt::format("read_parquet('{}')", dim);
  // (DuckDB's own estimate decides here; the same query as a lake table's is bounded.)
  EXPECT_EQ(why(fmt::format(
                    "SELECT d.cat, count(*) FROM {} s JOIN {} d ON s.p = d.p GROUP BY d.cat", f, d))
                .find("probe"),
            std::string::npos);
  EXPECT_NE(why(fmt::format("SELECT k, count(*) FROM {} GROUP BY k", f)).find("at most 501 groups"),
            std::string::npos);
  // Two keys of one file: the product of their ranges (at most its rows).
  EXPECT_NE(why(fmt::format("SELECT k, j, count(*) FROM {} GROUP BY 1, 2", f))
                .find("at most 4008 groups"),
            std::string::npos);
  // The lake's form: column k is called kk now; field 2's statistics bound it.
  std::string lake = fmt::format(
      "(SELECT \"kk\" FROM read_parquet(['{}'], schema = MAP {{2: {{name: 'kk', type: 'BIGINT', "
      "default_value: NULL}}}}))",
      fact);
  EXPECT_NE(why(fmt::format("SELECT s.kk, count(*) FROM {} AS s GROUP BY s.kk", lake))
                .find("at most 501 groups"),
            std::string::npos);
  std::string lake_dim = fmt::format(
      "(SELECT \"p\", \"cat\" FROM read_parquet(['{}'], schema = MAP {{1: {{name: 'p', type: "
      "'BIGINT', default_value: "
      "NULL}}, 2: {{name: 'cat', type: 'VARCHAR', default_value: NULL}}}}))",
      dim);
  EXPECT_NE(
      why(fmt::format("SELECT d.cat, count(*) FROM {} s JOIN {} AS d ON s.kk = d.p GROUP BY d.cat",
                      lake, lake_dim))
          .find("at most 3001 groups"),
      std::string::npos);
  // Not bounded: an expression of an integer column (its range is not the column's), a
  // column of range() and a wide range go on to the probe, which finds their groups.
  EXPECT_NE(why(fmt::format("SELECT k + 1, count(*) FROM {} GROUP BY 1", f)).find("a probe"),
            std::string::npos);
  EXPECT_NE(why("SELECT i % 10, count(*) FROM range(200000) r(i) GROUP BY 1").find("probe"),
            std::string::npos);
  EXPECT_NE(why(fmt::format("SELECT sparse, count(*) FROM read_parquet('{}') GROUP BY 1", ids))
                .find("at most 1001 "),
            std::string::npos);  // a range of 999,002 but 1,000 rows (and an outer join's NULL)
  // Columns renamed by position (`AS t(a, b)`) are not followed: no bound from k's range
  // for what is really id.
  EXPECT_EQ(
      why(fmt::format("SELECT k, count(*) FROM read_parquet('{}') AS r(k, id) GROUP BY k", fact))
          .find("at most"),
      std::string::npos);
  // A hive path's value replaces the file's column of that name: no range from the footers.
  for (int year : {1, 2, 3}) {
    std::filesystem::create_directories(fmt::format("{}/hive/year={}", dir, year));
    ASSERT_TRUE(conn_
                    ->Execute(fmt::format("COPY (SELECT 0 AS year, i AS v FROM range(100) r(i)) TO "
                                          "'{}/hive/year={}/f.parquet' (FORMAT parquet)",
                                          dir, year))
                    .ok());
  }
  EXPECT_EQ(
      why(fmt::format(
              "SELECT year, count(*) FROM read_parquet('{}/hive/*/*.parquet') GROUP BY year", dir))
          .find("at most 2 "),
      std::string::npos);
  EXPECT_EQ(why(fmt::format("SELECT id, count(*) FROM {} GROUP BY id", f)), "rewritten");
  // There the bound (200,001) is below the probe's estimate: it counts the groups, without
  // a statistics scan (D20), and the answer is DuckDB's.
  {
    const std::string sql = fmt::format(
        "SELECT count(*) AS g, sum(n)::BIGINT AS rows FROM (SELECT id, count(*) AS n FROM {} "
        "GROUP BY id)",
        f);
    auto plan = PlanRewrite(*conn_, sql, o);
    ASSERT_TRUE(plan.ok() && plan->has_value());
    EXPECT_NE((*plan)->explanation.find("~200001 groups by the footers' bound"), std::string::npos)
        << (*plan)->explanation;
    auto got = RunPlan(*conn_, **plan);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->chunk(0).GetInt64(0, 0), 200000);
    EXPECT_EQ(got->chunk(0).GetInt64(1, 0), 200000);
  }
  // Past 256 files the footers are not read (the probe's cost is fixed; theirs is not):
  // the rows alone (3,001) would have fit.
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT i % 300 AS part, i AS v FROM range(3000) r(i)) TO '{}/many' "
                      "(FORMAT parquet, PARTITION_BY (part))",
                      dir))
                  .ok());
  std::string many = why(
      fmt::format("SELECT v, count(*) FROM read_parquet('{}/many/*/*.parquet') GROUP BY v", dir));
  EXPECT_EQ(many.find("at most"), std::string::npos) << many;  // the probe and the scan decided
  // Partitioned anyway, the join's answer is DuckDB's.
  ExpectSame(
      fmt::format("SELECT d.cat, count(*) AS n FROM {} s JOIN {} d ON s.p = d.p GROUP BY d.cat", f,
                  d),
      RewriteKind::kGroupBy);
}

TEST_F(RewriteTest, TheAnswerKeepsTheQuerysColumnNamesAndOrder) {
  // The parts rename the consumer's aggregates; the answer's columns must be named as
  // DuckDB names the query's (a client reading by name sees no change with data size),
  // and an ORDER BY's order must survive the renaming.
  auto names_of = [](const std::string& sql, int parts) {
    std::vector<std::string> names;
    std::optional<Plan> plan;
    std::string run = sql;
    if (parts > 0) {
      auto planned = PlanRewrite(*conn_, sql, Options(parts));
      EXPECT_TRUE(planned.ok() && planned->has_value()) << sql;
      if (!planned.ok() || !planned->has_value()) return names;
      plan = std::move(**planned);
      auto final_select = RunSteps(*conn_, *plan);
      EXPECT_TRUE(final_select.ok());
      if (!final_select.ok()) return names;
      run = *final_select;
    }
    auto result = conn_->Query(run);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (result.ok()) {
      for (size_t c = 0; c < result->column_count(); ++c) names.push_back(result->column_name(c));
    }
    if (plan) EXPECT_TRUE(RunCleanup(*conn_, *plan).ok());
    return names;
  };
  for (const std::string sql : {
           std::string("SELECT count(*), sum(n), max(k1) AS top FROM (SELECT k1, count(*) AS n "
                       "FROM t GROUP BY k1)"),
           std::string("SELECT count(*), sum(id) FROM (SELECT *, row_number() OVER (PARTITION BY "
                       "k1 ORDER BY x, id) "
                       "AS rn FROM t) WHERE rn = 1"),
           std::string("SELECT k1, count(*) FROM t GROUP BY k1"),
       }) {
    std::vector<std::string> want = names_of(sql, 0);
    ASSERT_FALSE(want.empty());
    for (int parts : {1, 3}) EXPECT_EQ(names_of(sql, parts), want) << sql << "\nparts " << parts;
  }
  const std::string ordered =
      "SELECT k1, id FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x, id) AS rn FROM "
      "t) WHERE rn = 1 "
      "ORDER BY k1 DESC NULLS LAST, id";
  EXPECT_EQ(Rewritten(ordered, 3, RewriteKind::kLatestRow),
            Plain(ordered));  // not sorted: the order itself
}

TEST_F(RewriteTest, SmallInputsPassThrough) {
  RewriteOptions o{.memory_limit_bytes = 512 << 20, .threads = 2, .min_rows_to_rewrite = 1'000'000};
  auto plan = PlanRewrite(*conn_,
                          "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k1 ORDER BY x) "
                          "AS rn FROM t) WHERE rn = 1",
                          o);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->has_value());
}

TEST_F(RewriteTest, PartsFollowTheMemoryLimit) {
  // 1,000 keys at 8 KiB of budget per part: several parts, chosen from the estimate.
  RewriteOptions o{.memory_limit_bytes = 40 << 10,
                   .threads = 2,
                   .min_rows_to_rewrite = 0,
                   .part_memory_fraction = 0.5};
  auto plan = PlanRewrite(*conn_, "SELECT k1, count(*), sum(x) FROM t GROUP BY k1", o);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(plan->has_value());
  EXPECT_GT((*plan)->parts, 2);
  EXPECT_EQ((*plan)->steps.size(), static_cast<size_t>((*plan)->parts));
}

// ---- execution

TEST_F(RewriteTest, CleanupRunsAfterAFailedStep) {
  ASSERT_TRUE(conn_->Execute("CREATE TABLE doomed AS SELECT * FROM t").ok());
  auto plan = PlanRewrite(*conn_, "SELECT k1, count(*) FROM doomed GROUP BY k1", Options(3));
  ASSERT_TRUE(plan.ok() && plan->has_value());
  size_t before = TempTables();
  // The input goes away between parts: the step fails, the temp table is dropped.
  Plan p = **plan;
  p.steps.insert(p.steps.begin() + 1, "DROP TABLE doomed");
  auto final_select = RunSteps(*conn_, p);
  EXPECT_FALSE(final_select.ok());
  EXPECT_EQ(TempTables(), before);
}

TEST_F(RewriteTest, RunPlanReturnsTheAnswerAndDropsTheTempTable) {
  auto plan = PlanRewrite(*conn_, "SELECT count(*) FROM (SELECT k2, count(*) FROM t GROUP BY k2)",
                          Options(2));
  ASSERT_TRUE(plan.ok() && plan->has_value());
  size_t before = TempTables();
  auto result = RunPlan(*conn_, **plan);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->row_count(), 1u);
  EXPECT_EQ(TempTables(), before);
}

TEST_F(RewriteTest, TempTablesSpillUnderTheMemoryLimit) {
  // The parts' results live in a TEMP table: DuckDB must move it to temp_directory when it
  // outgrows memory_limit (here ~96 MB of rows under a 32 MB limit).
  auto db = duck::Database::Open(
      {.memory_limit_bytes = 32 << 20, .threads = 1, .temp_directory = spill_.string()});
  ASSERT_TRUE(db.ok());
  auto conn = duck::Connection::Open(**db);
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)->Execute("SET preserve_insertion_order = false").ok());
  Status st = (*conn)->Execute(
      "CREATE TEMP TABLE big AS SELECT i AS a, i * 2 AS b, i * 3 AS c FROM range(4000000) r(i)");
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto rows = (*conn)->QueryText("SELECT count(*), sum(c) FROM big");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(*(*rows)[0][0], "4000000");
}

}  // namespace
}  // namespace sluice::query::rewrite
