#include "query/sql_text.h"

#include <gtest/gtest.h>

namespace sluice::query {
namespace {

TEST(SqlTextTest, SplitsAtSemicolonsOutsideQuotesAndComments) {
  auto pieces = SplitStatements(
      "SELECT 'a;b'; SELECT \"x;y\" FROM t -- c;d\n; SELECT $$;$$, $tag$ ; $tag$; /* ; */ SELECT "
      "E'\\';'; ;");
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_EQ(pieces[0], "SELECT 'a;b'");
  EXPECT_EQ(pieces[1], "SELECT \"x;y\" FROM t -- c;d");
  EXPECT_EQ(pieces[2], "SELECT $$;$$, $tag$ ; $tag$");
  EXPECT_EQ(pieces[3], "/* ; */ SELECT E'\\';'");
  EXPECT_TRUE(SplitStatements("  ;  ; ").empty());
  EXPECT_EQ(SplitStatements("SELECT 'unterminated; x").size(), 1u);
}

TEST(SqlTextTest, SubstitutesParametersOutsideQuotesAndComments) {
  std::vector<std::string> v = {"CAST('a''b' AS VARCHAR)", "NULL"};
  EXPECT_EQ(SubstituteParameters("SELECT $1, '$1', \"$2\", $$ $1 $$, x$1 -- $2\n"
                                 "FROM t WHERE b = $2::INT /* $1 */",
                                 v),
            "SELECT (CAST('a''b' AS VARCHAR)), '$1', \"$2\", $$ $1 $$, x$1 -- $2\n"
            "FROM t WHERE b = (NULL)::INT /* $1 */");
  EXPECT_EQ(SubstituteParameters("SELECT 1", {}), "SELECT 1");
  EXPECT_EQ(SubstituteParameters("SELECT $3", v), std::nullopt);  // beyond the values
  EXPECT_EQ(SubstituteParameters("SELECT $0", v), std::nullopt);
  EXPECT_EQ(SubstituteParameters("SELECT ?", v), std::nullopt);      // DuckDB's positional form
  EXPECT_EQ(SubstituteParameters("SELECT $name", v), std::nullopt);  // DuckDB's named form
  EXPECT_EQ(SubstituteParameters("SELECT $1a", v), std::nullopt);
  EXPECT_EQ(SubstituteParameters("SELECT $10", v), std::nullopt);
}

TEST(SqlTextTest, LeadingWordsSkipCommentsAndParentheses) {
  EXPECT_EQ(LeadingWords("-- hi\n /* x */ (select 1)", 2), (std::vector<std::string>{"SELECT"}));
  EXPECT_EQ(LeadingWords("create or replace view v as select 1", 3),
            (std::vector<std::string>{"CREATE", "OR", "REPLACE"}));
}

TEST(SqlTextTest, FindsTheQueryOfCreateTableAsAndInsert) {
  auto query_of = [](std::string_view s) {
    size_t at = EmbeddedQueryStart(s);
    return at == std::string_view::npos ? std::string("none") : std::string(s.substr(at));
  };
  EXPECT_EQ(query_of("CREATE TABLE t AS SELECT * FROM lake.a.b"), "SELECT * FROM lake.a.b");
  EXPECT_EQ(query_of("create or replace temp table \"a s\" as (select 1) union all (select 2)"),
            "(select 1) union all (select 2)");
  EXPECT_EQ(
      query_of("CREATE TEMPORARY TABLE IF NOT EXISTS t AS WITH x AS (SELECT 1) SELECT * FROM x"),
      "WITH x AS (SELECT 1) SELECT * FROM x");
  EXPECT_EQ(query_of("INSERT INTO t SELECT 1"), "SELECT 1");
  EXPECT_EQ(query_of("INSERT INTO t (a, b) VALUES (1, 2)"), "VALUES (1, 2)");
  EXPECT_EQ(query_of("insert or replace into t by name from lake.a.b"), "from lake.a.b");
  EXPECT_EQ(query_of("INSERT INTO t (SELECT 1)"), "(SELECT 1)");
  EXPECT_EQ(query_of("INSERT INTO t (a) (SELECT 1)"), "(SELECT 1)");
  EXPECT_EQ(query_of("CREATE TABLE t ('AS' VARCHAR)"), "none");  // a quoted word is not AS
  EXPECT_EQ(query_of("CREATE VIEW v AS SELECT 1"), "none");      // a view keeps its text
  EXPECT_EQ(query_of("CREATE MACRO m(a) AS a"), "none");
  EXPECT_EQ(query_of("SELECT 1"), "none");
  EXPECT_EQ(query_of("CREATE TABLE t AS"), "none");
  EXPECT_EQ(query_of(""), "none");
}

TEST(SqlTextTest, FindsWhereADuckDBErrorPoints) {
  // Messages as DuckDB 1.5 writes them.
  std::string two_lines = "SELECT 1,\n  nosuch FROM range(3)";
  EXPECT_EQ(ErrorOffset("Binder Error: Referenced column \"nosuch\" not found in FROM "
                        "clause!\nCandidate bindings: "
                        "\"range\"\n\nLINE 2:   nosuch FROM range(3)\n          ^",
                        two_lines),
            two_lines.find("nosuch"));
  std::string long_line =
      "SELECT 1 AS aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, 2 AS "
      "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
      "bbbbbbb, 3 AS ccccccccccccccccccccccccccccc, nosuch FROM range(3) WHERE 1 = 1 AND 2 = 2 AND "
      "3 = 3 AND 4 = 4 AND 5 = 5";
  EXPECT_EQ(ErrorOffset("Binder Error: x\n\nLINE 1: ...bbbbbbbbbbbbbbbbbbbbb, 3 AS "
                        "ccccccccccccccccccccccccccccc, nosuch "
                        "FROM range(3) WHERE 1 = 1 AND 2 = 2 AND 3 = 3 AND...\n"
                        "                                                                      ^",
                        long_line),
            long_line.find("nosuch"));
  EXPECT_EQ(
      ErrorOffset("Parser Error: syntax error at or near \"SELEC\"\n\nLINE 1: SELEC 1\n        ^",
                  "SELEC 1"),
      0u);
  std::string accented = "SELECT 'é', nosuch";
  EXPECT_EQ(
      ErrorOffset("Binder Error: y\n\nLINE 1: SELECT 'é', nosuch\n                    ^", accented),
      accented.find("nosuch"));
  // No context, another text, a malformed caret: none.
  EXPECT_EQ(ErrorOffset("Conversion Error: could not convert", "SELECT 1"), std::string_view::npos);
  EXPECT_EQ(ErrorOffset("E\n\nLINE 1: SELECT x\n        ^", "SELECT y"), std::string_view::npos);
  EXPECT_EQ(ErrorOffset("E\n\nLINE 1: SELECT x\n  x ^", "SELECT x"), std::string_view::npos);
  EXPECT_EQ(ErrorOffset("E\n\nLINE 9: SELECT x\n        ^", "SELECT x"), std::string_view::npos);
  EXPECT_EQ(ErrorOffset("E\n\nLINE 0: SELECT x\n        ^", "SELECT x"), std::string_view::npos);
  EXPECT_EQ(ErrorOffset("E\n\nLINE 1: SELECT x", "SELECT x"), std::string_view::npos);
}

TEST(SqlTextTest, LightStatementsReadNoRelationOrOnlyTheCatalog) {
  for (const char* light : {
           "SELECT 1",
           "select version()",
           "SET application_name = 'x'",
           "BEGIN",
           "COMMIT",
           "SHOW search_path",
           "",
           "SELECT c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON "
           "n.oid = c.relnamespace "
           "WHERE c.relkind IN ('r','p') ORDER BY 1, 2",
           "SELECT a.attname, (SELECT c.collname FROM pg_catalog.pg_collation c, "
           "pg_catalog.pg_type t WHERE c.oid = "
           "a.attcollation) FROM pg_catalog.pg_attribute a WHERE a.attrelid = '16384'",
           "SELECT * FROM information_schema.tables WHERE table_schema = 'x'",
           "SELECT n.nspname FROM pg_namespace n, \"pg_class\" c",
           "SELECT * FROM (SELECT 1) AS t",
       }) {
    EXPECT_TRUE(LightStatement(light)) << light;
  }
  for (const char* heavy : {
           "SELECT * FROM lake.db.events",
           "SELECT count(*) FROM range(1000000000)",
           "SELECT * FROM pg_class, events",
           "SELECT * FROM pg_class c JOIN events e ON true",
           "SELECT (SELECT count(*) FROM t) AS n",
           "WITH x AS (SELECT 1) SELECT * FROM x",
           "SELECT * FROM read_parquet('f.parquet')",
           "SELECT * FROM pg_catalog.read_parquet('f')",
           "SELECT * FROM pg_class UNION ALL SELECT * FROM t",
           "SELECT extract(year FROM now())",
           "INSERT INTO t VALUES (1)",
           "COPY t TO STDOUT",
           "SELECT * FROM",
           "SELECT * FROM LATERAL (SELECT 1)",
       }) {
    EXPECT_FALSE(LightStatement(heavy)) << heavy;
  }
}

TEST(SqlTextTest, SandboxRefusesSettingsAttachAndExtensions) {
  for (const char* sql :
       {"SET memory_limit = '10GB'", "set GLOBAL threads to 8", "RESET memory_limit",
        "PRAGMA memory_limit='1GB'", "SET enable_external_access = true",
        "SET \"lock_configuration\" = false", "ATTACH 'x.db' AS x", "attach ':memory:' as m",
        "DETACH x", "INSTALL httpfs", "FORCE INSTALL httpfs", "LOAD httpfs",
        "/* hidden */ SET allowed_directories = ['/']"}) {
    SandboxVerdict v = CheckSandbox(sql);
    EXPECT_TRUE(v.refused) << sql;
    EXPECT_NE(v.message.find("permission denied"), std::string::npos) << sql;
  }
  for (const char* sql :
       {"SELECT 1", "SET search_path = 'main'", "SET VARIABLE x = 1", "COPY t TO 'x.csv'",
        "select 'attach'", "UPDATE t SET memory_limit = 1"}) {
    EXPECT_FALSE(CheckSandbox(sql).refused) << sql;
  }
}

TEST(SqlTextTest, ParsesClientSettings) {
  ClientSetting s = ParseClientSetting("SET application_name = 'my app'");
  EXPECT_EQ(s.name, "application_name");
  EXPECT_EQ(s.value, "my app");
  s = ParseClientSetting("set extra_float_digits to 3");
  EXPECT_EQ(s.name, "extra_float_digits");
  EXPECT_EQ(s.value, "3");
  s = ParseClientSetting("SET TIME ZONE 'UTC'");
  EXPECT_EQ(s.name, "timezone");
  EXPECT_EQ(s.value, "UTC");
  s = ParseClientSetting("SET SESSION DateStyle TO 'ISO, MDY'");
  EXPECT_EQ(s.name, "datestyle");
  EXPECT_EQ(ParseClientSetting("SET search_path = 'x'").name, "");
  EXPECT_EQ(ParseClientSetting("SELECT 1").name, "");
}

TEST(SqlTextTest, CommandTags) {
  EXPECT_EQ(CommandTag("select 1", true, 1), "SELECT 1");
  EXPECT_EQ(CommandTag("WITH x AS (SELECT 1) SELECT * FROM x", true, 3), "SELECT 3");
  EXPECT_EQ(CommandTag("insert into t values (1)", false, 2), "INSERT 0 2");
  EXPECT_EQ(CommandTag("UPDATE t SET a = 1", false, 5), "UPDATE 5");
  EXPECT_EQ(CommandTag("delete from t", false, 0), "DELETE 0");
  EXPECT_EQ(CommandTag("create or replace temp table t (a int)", false, 0), "CREATE TABLE");
  EXPECT_EQ(CommandTag("DROP VIEW v", false, 0), "DROP VIEW");
  EXPECT_EQ(CommandTag("begin", false, 0), "BEGIN");
  EXPECT_EQ(CommandTag("end", false, 0), "COMMIT");
  EXPECT_EQ(CommandTag("abort", false, 0), "ROLLBACK");
  EXPECT_EQ(CommandTag("SET search_path = 'main'", false, 0), "SET");
}

}  // namespace
}  // namespace sluice::query
