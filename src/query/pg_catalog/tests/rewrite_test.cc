#include "query/pg_catalog/rewrite.h"

#include <gtest/gtest.h>

#include <string>

#include "query/pg_catalog/lexer.h"

namespace sluice::query::pg_catalog {
namespace {

std::string Rewrite(std::string_view sql) {
  auto r = RewriteForDuckDB(sql);
  EXPECT_TRUE(r.ok()) << r.status().ToString() << "\n" << sql;
  return r.ok() ? *r : "<error>";
}

TEST(LexerTest, TokensConcatenateToTheInput) {
  const std::string sql =
      "SELECT E'it\\'s', 'a''b', \"q\"\"x\", $tag$ '; $$ $tag$, $1, 1.5e3, a::int -- c\n"
      "/* x /* nested */ y */ FROM t WHERE a !~ 'x' AND b<>c;";
  auto tokens = Lex(sql);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  std::string joined;
  for (const Token& t : *tokens) joined += t.text;
  EXPECT_EQ(joined, sql);
}

TEST(LexerTest, UnterminatedFormsAreErrorsNamingTheOffset) {
  const std::pair<const char*, const char*> cases[] = {
      {"SELECT 'abc", "unterminated quoted string at byte 7"},
      {"SELECT \"abc", "unterminated quoted identifier at byte 7"},
      {"SELECT 1 /* x", "unterminated /* comment at byte 9"},
      {"SELECT 1 /* a /* b */", "unterminated /* comment at byte 9"},
      {"SELECT $$abc", "unterminated dollar-quoted string at byte 7"},
      {"SELECT $a$ x $b$", "unterminated dollar-quoted string at byte 7"},
      {"SELECT E'abc\\'", "unterminated quoted string at byte 7"},
      {"SELECT U&\"x", "unterminated quoted identifier at byte 7"},
  };
  for (const auto& [sql, message] : cases) {
    auto r = RewriteForDuckDB(sql);
    ASSERT_FALSE(r.ok()) << sql;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << sql;
    EXPECT_EQ(r.status().message(), message) << sql;
  }
}

// Ordinary DuckDB SQL must come back byte for byte.
TEST(RewriteTest, OrdinaryDuckDbSqlIsUnchanged) {
  const char* corpus[] = {
      "SELECT 1",
      "select * from orders where amount > 100 order by id limit 10;",
      "SELECT a::INTEGER, b::VARCHAR, CAST(c AS DOUBLE), d::DECIMAL(10,2), e::INT[] FROM t",
      "SELECT count(*) FILTER (WHERE x > 1) OVER (PARTITION BY k ORDER BY ts) FROM t",
      "SELECT list_transform([1, 2, 3], x -> x + 1), {'a': 1, 'b': [2]} AS s",
      "SELECT * FROM read_parquet('s3://bucket/pg_catalog.parquet') WHERE name LIKE 'OPERATOR(%'",
      "SELECT 'pg_catalog.pg_class', \"pg_catalog\".x FROM t -- pg_catalog.pg_class ::regclass\n",
      "/* OPERATOR(pg_catalog.~) COLLATE pg_catalog.default */ SELECT 1",
      "SELECT $$ ::regclass OPERATOR(pg_catalog.~) $$, $q$x$q$",
      "SELECT name COLLATE nocase FROM t ORDER BY name COLLATE noaccent",
      "SELECT a ~~ 'x%', a !~~ 'y', a ~~* 'z', a LIKE 'b', a SIMILAR TO 'c.*' FROM t",
      "SELECT regexp_matches(a, '^x'), regexp_full_match(a, 'y') FROM t",
      "SELECT j->>'a', j->'b', j::JSON FROM t",
      "SELECT * FROM t WHERE id = $1 AND name = $2",
      "SELECT E'line\\nbreak', 'it''s', x'ff', e'\\t'",
      "SELECT * FROM pg_class JOIN pg_namespace ON pg_namespace.oid = relnamespace",
      "SELECT * FROM information_schema.key_column_usage",
      "SELECT * FROM system.pg_catalog.pg_class",
      "WITH x AS (SELECT 1 AS a) SELECT a FROM x UNION ALL SELECT 2",
      "PIVOT t ON k USING sum(v)",
      "SELECT * FROM generate_series(1, 10) s, unnest([1, 2]) u",
      "SELECT struct_pack(a := 1), [1, 2, 3][2], 'abc'[1:2]",
      "CREATE TABLE t (a INTEGER PRIMARY KEY, b VARCHAR DEFAULT 'x')",
      "INSERT INTO t VALUES (1, 'a'), (2, 'b') ON CONFLICT DO NOTHING",
      "COPY (SELECT 1) TO '/tmp/x.parquet' (FORMAT parquet)",
      "SELECT ~5, 1 << 2, 7 % 3, 2 ^ 3, a || b, a @> b FROM t",
      "SELECT * FROM lake.ns.tbl AT (VERSION => 3)",
      "SELECT * FROM topic('events', from_offset => 10)",
      "SELECT\ttab,\r\n newline  FROM \"Mixed Case\".\"Table\"",
      "",
      "   ",
      "-- only a comment",
  };
  for (const char* sql : corpus) {
    EXPECT_EQ(Rewrite(sql), sql);
  }
}

TEST(RewriteTest, PsqlOperatorAndCollateBecomeRegexpMatches) {
  EXPECT_EQ(Rewrite("WHERE c.relname OPERATOR(pg_catalog.~) '^(orders)$' COLLATE "
                    "pg_catalog.default\n  AND x"),
            "WHERE regexp_matches(c.relname, '^(orders)$' )\n  AND x");
  EXPECT_EQ(Rewrite("SELECT a OPERATOR(~) 'x'"), "SELECT regexp_matches(a, 'x')");
  EXPECT_EQ(Rewrite("SELECT a OPERATOR(pg_catalog.!~) 'x'"), "SELECT (NOT regexp_matches(a, 'x'))");
  EXPECT_EQ(Rewrite("SELECT a OPERATOR(pg_catalog.~*) 'x'"), "SELECT regexp_matches(a, 'x', 'i')");
  EXPECT_EQ(Rewrite("SELECT a OPERATOR(pg_catalog.!~*) 'x'"),
            "SELECT (NOT regexp_matches(a, 'x', 'i'))");
  EXPECT_EQ(Rewrite("SELECT a OPERATOR(pg_catalog.=) b"), "SELECT a = b");
  EXPECT_EQ(Rewrite("SELECT lower(n.x) OPERATOR(pg_catalog.~) lower('A')"),
            "SELECT regexp_matches(lower(n.x), lower('A'))");
}

TEST(RewriteTest, BareRegexOperatorsGetPostgresMeaning) {
  EXPECT_EQ(Rewrite("WHERE n.nspname !~ '^pg_' AND n.nspname <> 'information_schema'"),
            "WHERE (NOT regexp_matches(n.nspname, '^pg_')) AND n.nspname <> 'information_schema'");
  EXPECT_EQ(Rewrite("SELECT (a) ~ ('b')"), "SELECT regexp_matches((a), ('b'))");
  EXPECT_EQ(Rewrite("SELECT ~ 5"), "SELECT ~ 5");  // bitwise not: no left operand
  // A wrapped match is itself an operand.
  EXPECT_EQ(Rewrite("SELECT a ~* 'x'::regclass"),
            "SELECT regexp_matches(a, sluice_regclass_oid('x'), 'i')");
  EXPECT_EQ(Rewrite("SELECT a !~ 'x' ~ 'y'"),
            "SELECT regexp_matches((NOT regexp_matches(a, 'x')), 'y')");
}

TEST(RewriteTest, CollationsDuckDbLacksAreDropped) {
  EXPECT_EQ(Rewrite("ORDER BY a COLLATE \"C\""), "ORDER BY a ");
  EXPECT_EQ(Rewrite("ORDER BY a COLLATE pg_catalog.\"default\", b"), "ORDER BY a , b");
  EXPECT_EQ(Rewrite("ORDER BY a COLLATE \"en_US.utf8\""), "ORDER BY a ");
  EXPECT_EQ(Rewrite("ORDER BY a COLLATE nocase"), "ORDER BY a COLLATE nocase");
}

TEST(RewriteTest, RegCastsBecomeLookups) {
  EXPECT_EQ(Rewrite("SELECT c.oid::pg_catalog.regclass FROM c"),
            "SELECT sluice_regclass_name(c.oid) FROM c");
  EXPECT_EQ(Rewrite("WHERE attrelid = 'public.t'::regclass"),
            "WHERE attrelid = sluice_regclass_oid('public.t')");
  EXPECT_EQ(Rewrite("SELECT c.reloftype::pg_catalog.regtype::pg_catalog.text"),
            "SELECT sluice_regtype_name(c.reloftype)::text");
  EXPECT_EQ(Rewrite("SELECT x.y::regnamespace::text AS nsp"),
            "SELECT sluice_regnamespace_name(x.y)::text AS nsp");
  EXPECT_EQ(Rewrite("ORDER BY c.oid::pg_catalog.regclass::pg_catalog.text"),
            "ORDER BY sluice_regclass_name(c.oid)::text");
  EXPECT_EQ(Rewrite("SELECT f(a, b)::regclass, (a + 1)::regclass, a[1]::regtype"),
            "SELECT sluice_regclass_name(f(a, b)), sluice_regclass_name((a + 1)), "
            "sluice_regtype_name(a[1])");
  EXPECT_EQ(Rewrite("SELECT a::int::regclass"), "SELECT sluice_regclass_name(a::int)");
  EXPECT_EQ(Rewrite("WHERE c.oid = $1::regclass"), "WHERE c.oid = sluice_regclass_oid($1)");
  EXPECT_EQ(Rewrite("SELECT pg_get_viewdef('16398'::pg_catalog.oid, true)"),
            "SELECT pg_get_viewdef('16398'::oid, true)");
  EXPECT_EQ(Rewrite("SELECT x::name, y::pg_catalog.int2[], z::xid"),
            "SELECT x::VARCHAR, y::int2[], z::BIGINT");
}

TEST(RewriteTest, PgCatalogQualifierIsDroppedOutsideLiterals) {
  EXPECT_EQ(Rewrite("SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM pg_catalog.pg_class c"),
            "SELECT pg_get_userbyid(c.relowner) FROM pg_class c");
  EXPECT_EQ(Rewrite("SELECT 'pg_catalog.x', pg_catalog.version()"),
            "SELECT 'pg_catalog.x', version()");
  EXPECT_EQ(Rewrite("SELECT * FROM system.pg_catalog.pg_class, pg_catalog.pg_am"),
            "SELECT * FROM system.pg_catalog.pg_class, pg_am");
}

TEST(RewriteTest, InformationSchemaViewsGoToTheFilteredCopies) {
  EXPECT_EQ(
      Rewrite("SELECT table_name FROM information_schema.tables t, INFORMATION_SCHEMA.columns"),
      "SELECT table_name FROM sluice_information_schema_tables t, "
      "sluice_information_schema_columns");
  EXPECT_EQ(Rewrite("SELECT * FROM system.information_schema.tables"),
            "SELECT * FROM system.information_schema.tables");
}

TEST(RewriteTest, SetReturningFunctionAliasNamesItsColumnInFrom) {
  EXPECT_EQ(Rewrite("SELECT prattrs[s] FROM pg_catalog.generate_series(0, 3) s, pg_attribute"),
            "SELECT prattrs[s] FROM generate_series(0, 3) s(s), pg_attribute");
  EXPECT_EQ(Rewrite("array(select 'toast.' || x from pg_catalog.unnest(tc.reloptions) x)"),
            "array(select 'toast.' || x from unnest(tc.reloptions) x(x))");
  EXPECT_EQ(Rewrite("SELECT pg_catalog.unnest(a) x FROM t"), "SELECT unnest(a) x FROM t");
  EXPECT_EQ(Rewrite("FROM pg_catalog.generate_series(1, 2) AS g(i)"),
            "FROM generate_series(1, 2) AS g(i)");
}

TEST(RewriteTest, MalformedInputIsLeftOrRefusedNeverCrashes) {
  // Incomplete constructs: left as they are, for DuckDB to report.
  for (const char* sql :
       {"SELECT a OPERATOR(", "SELECT a OPERATOR(pg_catalog.~", "OPERATOR",
        "SELECT x::", "::regclass", "SELECT ::pg_catalog.regclass", "COLLATE",
        "SELECT a COLLATE pg_catalog.", "pg_catalog.", "SELECT a ~", "~ 'x'", "SELECT ) ~ 'x'",
        "SELECT ((((a) ~ 'x'", "SELECT a::regclass[]", "x OPERATOR(pg_catalog.~) )"}) {
    auto r = RewriteForDuckDB(sql);
    ASSERT_TRUE(r.ok()) << sql;
  }
  EXPECT_EQ(Rewrite("SELECT a OPERATOR("), "SELECT a OPERATOR(");
  EXPECT_EQ(Rewrite("SELECT x::"), "SELECT x::");
}

// Dropping or inserting text must not join neighbours into another token.
TEST(RewriteTest, RewrittenTokensStayApart) {
  EXPECT_EQ(Rewrite("SELECT $pg_catalog.g_cata$x"), "SELECT $ g_cata$x");
  EXPECT_EQ(Rewrite("SELECT 'a'COLLATE\"C\"'b'"), "SELECT 'a' 'b'");
  EXPECT_EQ(Rewrite("SELECT a-OPERATOR(pg_catalog.-)-b"), "SELECT a- - -b");
  EXPECT_EQ(Rewrite("SELECT 1::pg_catalog.int4"), "SELECT 1::int4");
  // Found by the fuzzer: a rewrite once opened a dollar quote it did not close.
  const std::string found =
      "SELECT a::scaergls ~ 'x' COLLATE \"C\", "
      "OPERATOR(pg_ERATOR(pinformation_schema.g_catalog.!~*) "
      "$pg_catalog.g_cata$pg_catalog.g_catalo?";
  auto r = RewriteForDuckDB(found);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(Lex(*r).ok()) << *r;
}

TEST(RewriteTest, HugeAndDeepInputsFinish) {
  std::string deep(200000, '(');
  deep += "a::regclass";
  deep += std::string(200000, ')');
  auto r = RewriteForDuckDB(deep);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->find("sluice_regclass_name(a)"), std::string::npos);

  std::string chain = "SELECT a";
  for (int i = 0; i < 20000; ++i) chain += "::regclass";
  ASSERT_TRUE(RewriteForDuckDB(chain).ok());

  std::string many;
  for (int i = 0; i < 10000; ++i)
    many += "x OPERATOR(pg_catalog.~) 'y' COLLATE pg_catalog.default AND ";
  auto m = RewriteForDuckDB(many);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->find("OPERATOR"), std::string::npos);

  std::string unterminated = "SELECT '" + std::string(1 << 22, 'x');
  EXPECT_FALSE(RewriteForDuckDB(unterminated).ok());

  std::string subscripts = "SELECT a";
  for (int i = 0; i < 50000; ++i) subscripts += "[1]";
  subscripts += " ~ 'x'";
  ASSERT_TRUE(RewriteForDuckDB(subscripts).ok());
}

}  // namespace
}  // namespace sluice::query::pg_catalog
