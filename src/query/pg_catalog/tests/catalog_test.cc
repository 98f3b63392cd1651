// psql 15's catalog queries (tests/fixtures/psql, captured from a real psql against a real
// PostgreSQL 15) run through RewriteForDuckDB on a DuckDB database with InstallCatalog,
// and give the answers psql shows.
#include "query/pg_catalog/catalog.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "query/pg_catalog/lexer.h"
#include "query/pg_catalog/pg_types.h"
#include "query/pg_catalog/rewrite.h"

namespace sluice::query::pg_catalog {
namespace {

using Rows = std::vector<std::vector<std::optional<std::string>>>;

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(SLUICE_PSQL_FIXTURES) + "/" + name);
  EXPECT_TRUE(in.good()) << "fixture " << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The statements of a fixture, split at top-level semicolons, comments kept.
std::vector<std::string> Statements(const std::string& sql) {
  auto tokens = Lex(sql);
  EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
  std::vector<std::string> out;
  std::string cur;
  bool any = false;
  for (const Token& t : *tokens) {
    if (t.kind == TokenKind::kPunct && t.text == ";") {
      if (any) out.push_back(cur);
      cur.clear();
      any = false;
      continue;
    }
    cur += t.text;
    if (t.kind != TokenKind::kSpace && t.kind != TokenKind::kComment) any = true;
  }
  if (any) out.push_back(cur);
  return out;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

std::string RowsText(const Rows& rows) {
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += (i ? " | " : "") + (row[i] ? *row[i] : std::string("NULL"));
    }
    out += "\n";
  }
  return out;
}

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    conn_ = Connect();
    ASSERT_TRUE(
        conn_
            ->Execute(
                "CREATE TABLE orders(id BIGINT PRIMARY KEY, customer TEXT NOT NULL, amount "
                "NUMERIC(10,2),"
                " qty INT DEFAULT 1, ok BOOLEAN, day DATE, ts TIMESTAMP, price DOUBLE PRECISION);"
                "CREATE SCHEMA sales; CREATE TABLE sales.items(sku TEXT, n SMALLINT);"
                "CREATE VIEW big_orders AS SELECT id, amount FROM orders WHERE amount > 100;"
                "COMMENT ON TABLE orders IS 'all orders'; COMMENT ON COLUMN orders.amount IS 'in "
                "EUR';")
            .ok());
    Status installed = InstallCatalog(*conn_);
    ASSERT_TRUE(installed.ok()) << installed.ToString();
    // Postgres's oids in the fixtures (their headers) mapped to this database's.
    for (const auto& [pg_oid, name] : std::map<std::string, std::string>{
             {"16384", "orders"}, {"16393", "items"}, {"16398", "big_orders"}}) {
      auto r =
          conn_->QueryText("SELECT oid FROM pg_class WHERE relname = " + duck::QuoteLiteral(name));
      ASSERT_TRUE(r.ok() && r->size() == 1) << name;
      oids_[pg_oid] = *(*r)[0][0];
    }
  }

  std::unique_ptr<duck::Connection> Connect() {
    auto conn = duck::Connection::Open(*db_);
    EXPECT_TRUE(conn.ok());
    return std::move(conn).value();
  }

  // Runs each query of the fixture (with this database's oids), rewritten; returns their
  // results, failing the test on any error.
  std::vector<Rows> RunFixture(const std::string& name) {
    std::vector<Rows> results;
    for (std::string stmt : Statements(ReadFixture(name))) {
      for (const auto& [pg_oid, oid] : oids_)
        stmt = Replace(stmt, "'" + pg_oid + "'", "'" + oid + "'");
      auto sql = RewriteForDuckDB(stmt);
      EXPECT_TRUE(sql.ok()) << sql.status().ToString();
      if (!sql.ok()) break;
      auto rows = conn_->QueryText(*sql);
      EXPECT_TRUE(rows.ok()) << name << ": " << rows.status().ToString() << "\n--- rewritten:\n"
                             << *sql;
      results.push_back(rows.ok() ? *rows : Rows{});
    }
    return results;
  }

  Rows Query(const std::string& pg_sql) {
    auto sql = RewriteForDuckDB(pg_sql);
    EXPECT_TRUE(sql.ok()) << sql.status().ToString();
    auto rows = conn_->QueryText(*sql);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString() << "\n" << *sql;
    return rows.ok() ? *rows : Rows{};
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  std::map<std::string, std::string> oids_;
};

// Every captured query runs: the fixtures checked in detail below, and the rest (\\du, \\dx,
// \\df, \\dT, \\d+ NAME ...).
TEST_F(CatalogTest, EveryFixtureRuns) {
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(SLUICE_PSQL_FIXTURES)) {
    if (entry.path().extension() != ".sql") continue;
    ++files;
    SCOPED_TRACE(entry.path().filename().string());
    EXPECT_FALSE(RunFixture(entry.path().filename().string()).empty());
  }
  EXPECT_GE(files, 20u);
}

// \dt+, \l+ and \db: sizes are unknown (empty, as a foreign table's), tablespaces are
// Postgres's two.
TEST_F(CatalogTest, SizesAndTablespaces) {
  std::vector<Rows> dt = RunFixture("dtplus.sql");
  ASSERT_EQ(dt.size(), 1u);
  ASSERT_FALSE(dt[0].empty());
  EXPECT_EQ(dt[0][0][6], std::nullopt);  // Size
  std::vector<Rows> l = RunFixture("lplus.sql");
  ASSERT_EQ(l.size(), 1u);
  ASSERT_EQ(l[0].size(), 1u);
  EXPECT_EQ(l[0][0][9], "pg_default");  // Tablespace
  std::vector<Rows> db = RunFixture("db.sql");
  ASSERT_EQ(db.size(), 1u);
  EXPECT_EQ(db[0], (Rows{{"pg_default", "sluice", ""}, {"pg_global", "sluice", ""}}));
}

TEST_F(CatalogTest, DtListsTheVisibleTablesWithOwner) {
  auto r = RunFixture("dt.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]), "main | orders | table | sluice\n");
}

TEST_F(CatalogTest, DListsTablesAndViews) {
  auto r = RunFixture("d.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]), "main | big_orders | view | sluice\nmain | orders | table | sluice\n");
}

TEST_F(CatalogTest, DvListsViews) {
  auto r = RunFixture("dv.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]), "main | big_orders | view | sluice\n");
}

TEST_F(CatalogTest, DtWithSchemaPatternListsThatSchema) {
  auto r = RunFixture("dt_schema.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]), "sales | items | table | sluice\n");
}

TEST_F(CatalogTest, DnListsUserSchemas) {
  auto r = RunFixture("dn.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]), "main | sluice\nsales | sluice\n");
}

TEST_F(CatalogTest, DiAndDsRun) {
  EXPECT_EQ(RunFixture("di.sql").size(), 1u);
  auto ds = RunFixture("ds.sql");
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_TRUE(ds[0].empty());
}

TEST_F(CatalogTest, LListsTheDatabase) {
  auto r = RunFixture("l.sql");
  ASSERT_EQ(r.size(), 1u);
  // DuckDB's database shows under the name the client asked for (here the default).
  EXPECT_EQ(RowsText(r[0]), "sluice | sluice | UTF8 | C | C | NULL | libc | NULL\n");
}

TEST_F(CatalogTest, DTableDescribesColumnsWithPostgresTypes) {
  auto r = RunFixture("d_table.sql");
  ASSERT_EQ(r.size(), 9u);
  EXPECT_EQ(RowsText(r[0]), oids_["16384"] + " | main | orders\n");
  ASSERT_EQ(r[1].size(), 1u);
  EXPECT_EQ(*r[1][0][1], "r");  // relkind
  EXPECT_EQ(RowsText(r[2]),
            "id | bigint | NULL | true | NULL |  | \n"
            "customer | text | NULL | true | NULL |  | \n"
            "amount | numeric(10,2) | NULL | false | NULL |  | \n"
            "qty | integer | 1 | false | NULL |  | \n"
            "ok | boolean | NULL | false | NULL |  | \n"
            "day | date | NULL | false | NULL |  | \n"
            "ts | timestamp without time zone | NULL | false | NULL |  | \n"
            "price | double precision | NULL | false | NULL |  | \n");
  for (size_t i = 4; i < r.size(); ++i) EXPECT_TRUE(r[i].empty()) << "query " << i;
}

TEST_F(CatalogTest, DViewDescribesViewColumns) {
  auto r = RunFixture("d_view.sql");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(RowsText(r[0]), oids_["16398"] + " | main | big_orders\n");
  EXPECT_EQ(*r[1][0][1], "v");
  EXPECT_EQ(RowsText(r[2]),
            "id | bigint | NULL | false | NULL |  | \n"
            "amount | numeric(10,2) | NULL | false | NULL |  | \n");
}

TEST_F(CatalogTest, DSchemaQualifiedTable) {
  auto r = RunFixture("d_schema_table.sql");
  ASSERT_EQ(r.size(), 8u);
  EXPECT_EQ(RowsText(r[0]), oids_["16393"] + " | sales | items\n");
  EXPECT_EQ(RowsText(r[2]),
            "sku | text | NULL | false | NULL |  | \n"
            "n | smallint | NULL | false | NULL |  | \n");
}

TEST_F(CatalogTest, DPlusViewShowsDefinitionAndComments) {
  auto r = RunFixture("dplus_view.sql");
  ASSERT_EQ(r.size(), 5u);
  ASSERT_EQ(r[3].size(), 1u);
  EXPECT_NE(r[3][0][0]->find("FROM orders"), std::string::npos) << *r[3][0][0];
  EXPECT_TRUE(r[4].empty());
}

TEST_F(CatalogTest, FunctionsAnswerLikePostgres) {
  auto r = Query(
      "SELECT pg_catalog.version(), current_setting('server_version_num'), "
      "pg_catalog.current_setting('server_version'), pg_catalog.pg_get_userbyid(10), "
      "pg_catalog.pg_encoding_to_char(6), pg_catalog.array_to_string(['a', 'b'], ',')");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0][0]->rfind("PostgreSQL 15.0 (sluice, DuckDB v", 0), 0u) << *r[0][0];
  EXPECT_EQ(*r[0][1], "150000");
  EXPECT_EQ(*r[0][2], "15.0");
  EXPECT_EQ(*r[0][3], "sluice");
  EXPECT_EQ(*r[0][4], "UTF8");
  EXPECT_EQ(*r[0][5], "a,b");
  // DuckDB's own settings still answer.
  auto threads = Query("SELECT current_setting('threads')");
  EXPECT_EQ(*threads[0][0], "1");
}

TEST_F(CatalogTest, RegclassCastsGoBothWays) {
  auto r = Query("SELECT 'orders'::regclass::oid = " + oids_["16384"] +
                 ", 'sales.items'::pg_catalog.regclass, " + oids_["16393"] +
                 "::regclass, 'pg_class'::regclass, 'int4'::regtype::oid");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(*r[0][0], "true");
  EXPECT_EQ(*r[0][1], oids_["16393"]);
  EXPECT_EQ(*r[0][2], "sales.items");
  EXPECT_EQ(*r[0][3], "1259");
  EXPECT_EQ(*r[0][4], "23");
  // An oid written as digits is that oid, as in Postgres.
  auto digits = Query("SELECT '" + oids_["16384"] + "'::regclass::oid, " + "'" + oids_["16384"] +
                      "'::regclass = 'orders'::regclass");
  EXPECT_EQ(RowsText(digits), oids_["16384"] + " | true\n");
}

TEST_F(CatalogTest, RegclassOfAParameterLooksTheNameUp) {
  auto sql = RewriteForDuckDB("SELECT relname FROM pg_catalog.pg_class WHERE oid = $1::regclass");
  ASSERT_TRUE(sql.ok());
  auto stmt = duck::PreparedStatement::Prepare(*conn_, *sql);
  ASSERT_TRUE(stmt.ok()) << stmt.status().ToString();
  ASSERT_TRUE((*stmt)->BindInt64(1, std::stoll(oids_["16393"])).ok());
  auto r = (*stmt)->Execute();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->row_count(), 1u);
  EXPECT_EQ(r->chunk(0).GetString(0, 0), "items");
}

TEST_F(CatalogTest, CommentsShowAsDescriptions) {
  auto r = Query(
      "SELECT obj_description('orders'::regclass, 'pg_class'), "
      "col_description('orders'::regclass, 3), col_description('orders'::regclass, 1)");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(*r[0][0], "all orders");
  EXPECT_EQ(*r[0][1], "in EUR");
  EXPECT_FALSE(r[0][2].has_value());
}

TEST_F(CatalogTest, NewTablesShowUpAtOnce) {
  ASSERT_TRUE(conn_->Execute("CREATE TABLE later(x INT)").ok());
  auto r = RunFixture("dt.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]), "main | later | table | sluice\nmain | orders | table | sluice\n");
}

TEST_F(CatalogTest, EachSessionHasItsOwnCatalogAndDuckDbKeepsItsOwn) {
  auto other = Connect();
  // Without InstallCatalog, a connection sees DuckDB's pg_catalog and version().
  auto v = other->QueryText("SELECT version()");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)[0][0]->rfind("v", 0), 0u);
  ASSERT_TRUE(InstallCatalog(*other, {.user = "alice"}).ok());
  auto owner =
      other->QueryText("SELECT pg_get_userbyid(relowner) FROM pg_class WHERE relname = 'orders'");
  ASSERT_TRUE(owner.ok());
  EXPECT_EQ(*(*owner)[0][0], "alice");
  // Installing twice is fine (CREATE OR REPLACE).
  EXPECT_TRUE(InstallCatalog(*conn_).ok());
}

TEST_F(CatalogTest, AttributeTypesMatchPgTypesForDuckDbColumns) {
  ASSERT_TRUE(
      conn_
          ->Execute(
              "CREATE TABLE types(a TINYINT, b INTEGER[], c VARCHAR, d BLOB, e TIMESTAMPTZ, f UUID,"
              " g INTERVAL, h STRUCT(x INT), i DECIMAL(18,3)[], j HUGEINT, k FLOAT, l TIME, m "
              "JSON)")
          .ok());
  auto r = Query(
      "SELECT a.attname, a.atttypid, t.typname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
      "FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
      "WHERE a.attrelid = 'types'::regclass ORDER BY a.attnum");
  EXPECT_EQ(RowsText(r),
            "a | 21 | int2 | smallint\n"
            "b | 1007 | _int4 | integer[]\n"
            "c | 25 | text | text\n"
            "d | 17 | bytea | bytea\n"
            "e | 1184 | timestamptz | timestamp with time zone\n"
            "f | 2950 | uuid | uuid\n"
            "g | 1186 | interval | interval\n"
            "h | 25 | text | text\n"
            "i | 1231 | _numeric | numeric[]\n"
            "j | 1700 | numeric | numeric\n"
            "k | 700 | float4 | real\n"
            "l | 1083 | time | time without time zone\n"
            "m | 114 | json | json\n");
  // The C++ mapping (for the wire server's RowDescription) agrees with pg_attribute.
  EXPECT_EQ(PgTypeForDuckDB("INTEGER[]").oid, 1007u);
  EXPECT_EQ(PgTypeForDuckDB("DECIMAL(10,2)").typmod, (10 << 16 | 2) + 4);
  EXPECT_EQ(PgTypeForDuckDB("STRUCT(x INTEGER)").oid, 25u);
  EXPECT_EQ(PgTypeForDuckDB("TIMESTAMP WITH TIME ZONE").oid, 1184u);
  EXPECT_EQ(PgTypeForDuckDB("TIMESTAMPTZ").oid, 1184u);  // the lake's spelling
  EXPECT_EQ(PgTypeForDuckDB("timestamptz[]").oid, 1185u);
  EXPECT_EQ(FormatPgType(1700, (10 << 16 | 2) + 4), "numeric(10,2)");
}

TEST_F(CatalogTest, InformationSchemaDoesNotShowTheEmulation) {
  auto r = Query(
      "SELECT table_schema, table_name, table_type FROM information_schema.tables "
      "ORDER BY 1, 2");
  EXPECT_EQ(RowsText(r),
            "main | big_orders | VIEW\nmain | orders | BASE TABLE\nsales | items | BASE TABLE\n");
  auto c = Query("SELECT count(*) FROM information_schema.columns WHERE table_catalog = 'temp'");
  EXPECT_EQ(RowsText(c), "0\n");
}

TEST_F(CatalogTest, DtPatternMatchesLikePsql) {
  auto r = RunFixture("dt_pattern.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]), "main | orders | table | sluice\n");
}

TEST_F(CatalogTest, DuListsTheRole) {
  auto r = RunFixture("du.sql");
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].size(), 1u);
  EXPECT_EQ(*r[0][0][0], "sluice");
  EXPECT_EQ(*r[0][0][1], "true");  // rolsuper
}

TEST_F(CatalogTest, DPlusTableShowsColumnComments) {
  auto r = RunFixture("dplus_table.sql");
  ASSERT_EQ(r.size(), 9u);
  ASSERT_EQ(r[2].size(), 8u);
  EXPECT_EQ(*r[2][2].back(), "in EUR");  // amount's col_description
  EXPECT_FALSE(r[2][0].back().has_value());
}

TEST_F(CatalogTest, ExternalRelationsShowLikeTables) {
  ExternalRelation events{
      .schema = "lake.sales",
      .name = "events",
      .columns = {{.name = "id", .duckdb_type = "BIGINT", .nullable = false},
                  {.name = "payload", .duckdb_type = "VARCHAR"},
                  {.name = "amount", .duckdb_type = "DECIMAL(12,4)", .comment = "net"}},
      .comment = "from the lake"};
  ASSERT_TRUE(SetExternalRelations(*conn_, {events}).ok());
  oids_["16406"] = std::to_string(kExternalRelationOidBase);

  auto all = RunFixture("dt_all.sql");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(RowsText(all[0]),
            "lake.sales | events | table | sluice\n"
            "main | orders | table | sluice\n"
            "sales | items | table | sluice\n");
  auto d = RunFixture("d_external.sql");
  ASSERT_EQ(d.size(), 8u);
  EXPECT_EQ(RowsText(d[0]), oids_["16406"] + " | lake.sales | events\n");
  EXPECT_EQ(RowsText(d[2]),
            "id | bigint | NULL | true | NULL |  | \n"
            "payload | text | NULL | false | NULL |  | \n"
            "amount | numeric(12,4) | NULL | false | NULL |  | \n");
  // Not in the search path: \dt leaves it out, as Postgres does for other schemas.
  EXPECT_EQ(RowsText(RunFixture("dt.sql")[0]), "main | orders | table | sluice\n");
  auto info = Query(
      "SELECT table_schema, table_name, table_type FROM information_schema.tables "
      "WHERE table_name = 'events'");
  EXPECT_EQ(RowsText(info), "lake.sales | events | BASE TABLE\n");
  auto cols = Query(
      "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
      "WHERE table_name = 'events' ORDER BY ordinal_position");
  EXPECT_EQ(RowsText(cols),
            "id | BIGINT | NO\npayload | VARCHAR | YES\namount | DECIMAL(12,4) | YES\n");
  auto meta = Query(
      "SELECT 'lake.sales.events'::regclass, obj_description('lake.sales.events'::regclass), "
      "col_description('lake.sales.events'::regclass, 3)");
  EXPECT_EQ(RowsText(meta), oids_["16406"] + " | from the lake | net\n");

  // Replacing the set drops what is no longer there.
  ASSERT_TRUE(SetExternalRelations(*conn_, {}).ok());
  EXPECT_EQ(RowsText(RunFixture("dt_all.sql")[0]),
            "main | orders | table | sluice\nsales | items | table | sluice\n");
  EXPECT_EQ(RowsText(Query("SELECT count(*) FROM pg_namespace WHERE nspname = 'lake.sales'")),
            "0\n");
}

TEST_F(CatalogTest, AThousandExternalRelationsAreAllListed) {
  // A broker of a thousand topics: every one is a relation of schema kafka, with its columns
  // (in a server of 1,000 topics a catalog read once took 5 s and listed none; the rows are
  // now appended, more than one of the appender's chunks of columns). Some have grants
  // (relacl), none to three, and some no comment.
  std::vector<ExternalRelation> topics;
  for (int i = 0; i < 1000; ++i) {
    topics.push_back({.schema = "kafka",
                      .name = fmt::format("topic-{:04}", i),
                      .columns = {{.name = "partition", .duckdb_type = "INTEGER"},
                                  {.name = "offset", .duckdb_type = "BIGINT"},
                                  {.name = "value", .duckdb_type = "VARCHAR", .comment = "JSON"}},
                      .comment = i % 2 == 0 ? "Kafka topic, 2 partitions" : ""});
    for (int a = 0; a < i % 4; ++a)
      topics.back().acl.push_back(fmt::format("u{}_{}=r/sluice", i, a));
  }
  ASSERT_TRUE(SetExternalRelations(*conn_, topics).ok());
  EXPECT_EQ(RowsText(Query(
                "SELECT relname, array_to_string(relacl, ' '), obj_description(oid) FROM pg_class "
                "WHERE relname IN ('topic-0000', 'topic-0001', 'topic-0998', "
                "'topic-0999') ORDER BY relname")),
            "topic-0000 | NULL | Kafka topic, 2 partitions\n"
            "topic-0001 | u1_0=r/sluice | NULL\n"
            "topic-0998 | u998_0=r/sluice u998_1=r/sluice | Kafka topic, 2 partitions\n"
            "topic-0999 | u999_0=r/sluice u999_1=r/sluice u999_2=r/sluice | NULL\n");
  EXPECT_EQ(RowsText(Query("SELECT count(*), count(col_description(attrelid, attnum)), "
                           "max(attnum) FROM pg_attribute WHERE attrelid >= " +
                           std::to_string(kExternalRelationOidBase))),
            "3000 | 1000 | 3\n");
  EXPECT_EQ(RowsText(Query("SELECT count(*) FROM pg_class c JOIN pg_namespace n "
                           "ON n.oid = c.relnamespace WHERE n.nspname = 'kafka'")),
            "1000\n");
  EXPECT_EQ(RowsText(Query("SELECT count(*) FROM information_schema.columns "
                           "WHERE table_schema = 'kafka'")),
            "3000\n");
  EXPECT_EQ(RowsText(Query("SELECT table_name FROM information_schema.tables "
                           "WHERE table_schema = 'kafka' ORDER BY table_name DESC LIMIT 1")),
            "topic-0999\n");
}

TEST_F(CatalogTest, JdbcGetSchemasListsSchemas) {
  auto r = RunFixture("jdbc_get_schemas.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]),
            "information_schema | NULL\nmain | NULL\npg_catalog | NULL\nsales | NULL\n");
}

TEST_F(CatalogTest, JdbcGetTablesListsTablesAndViewsWithRemarks) {
  auto r = RunFixture("jdbc_get_tables.sql");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(RowsText(r[0]),
            "NULL | main | orders | TABLE | all orders |  |  |  |  | \n"
            "NULL | sales | items | TABLE | NULL |  |  |  |  | \n"
            "NULL | main | big_orders | VIEW | NULL |  |  |  |  | \n");
}

TEST_F(CatalogTest, JdbcGetColumnsDescribesColumns) {
  auto r = RunFixture("jdbc_get_columns.sql");
  ASSERT_EQ(r.size(), 1u);
  // nspname, relname, attname, atttypid, attnotnull, atttypmod, attlen, typtypmod, attnum,
  // attidentity, attgenerated, adsrc, description, typbasetype, typtype
  EXPECT_EQ(
      RowsText(r[0]),
      "main | orders | id | 20 | true | -1 | 8 | -1 | 1 | NULL | NULL | NULL | NULL | 0 | b\n"
      "main | orders | customer | 25 | true | -1 | -1 | -1 | 2 | NULL | NULL | NULL | NULL | 0 | "
      "b\n"
      "main | orders | amount | 1700 | false | 655366 | -1 | -1 | 3 | NULL | NULL | NULL | in EUR "
      "| 0 | b\n"
      "main | orders | qty | 23 | false | -1 | 4 | -1 | 4 | NULL | NULL | 1 | NULL | 0 | b\n"
      "main | orders | ok | 16 | false | -1 | 1 | -1 | 5 | NULL | NULL | NULL | NULL | 0 | b\n"
      "main | orders | day | 1082 | false | -1 | 4 | -1 | 6 | NULL | NULL | NULL | NULL | 0 | b\n"
      "main | orders | ts | 1114 | false | -1 | 8 | -1 | 7 | NULL | NULL | NULL | NULL | 0 | b\n"
      "main | orders | price | 701 | false | -1 | 8 | -1 | 8 | NULL | NULL | NULL | NULL | 0 | "
      "b\n");
}

TEST_F(CatalogTest, JdbcTypeInfoFindsTypesByOid) {
  auto r = RunFixture("jdbc_type_info.sql");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(RowsText(r[0]), "true | pg_catalog | numeric\n");
  EXPECT_EQ(RowsText(r[1]), ",\n");
}

}  // namespace
}  // namespace sluice::query::pg_catalog
