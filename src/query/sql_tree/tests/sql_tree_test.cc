// sql_tree: one parse and one print per statement, the walkers over DuckDB's trees, the
// expression texts, and trees that are not what DuckDB writes (a Status, never a crash).
#include "query/sql_tree/sql_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace sluice::query::sql_tree {
namespace {

class SqlTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(*conn);
  }

  SqlTree Parse(const std::string& sql) {
    Result<SqlTree> t = SqlTree::Parse(*conn_, sql);
    EXPECT_TRUE(t.ok()) << sql << ": " << t.status().ToString();
    return t.ok() ? std::move(*t) : SqlTree::FromJson(sql, "");
  }

  // The BASE_TABLE names ForEachTableRef finds, in the order it finds them.
  std::vector<std::string> TableNames(const std::string& sql) {
    SqlTree t = Parse(sql);
    EXPECT_TRUE(t.ok()) << t.error();
    std::vector<std::string> names;
    ForEachTableRef(t.doc(), [&](Json& ref) {
      if (StringField(ref, "type") == "BASE_TABLE") names.push_back(StringField(ref, "table_name"));
      return true;
    });
    return names;
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(SqlTreeTest, AStatementIsParsedOnceAndPrintedOnce) {
  const RoundTrips before = CountRoundTrips();
  SqlTree t = Parse("SELECT 1 AS x");
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t.statement_count(), 1u);
  // Unchanged: the text as given, without asking DuckDB.
  Result<std::string> same = t.Render(*conn_);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, "SELECT 1 AS x");
  t.MarkChanged();
  Result<std::string> printed = t.Render(*conn_);
  ASSERT_TRUE(printed.ok()) << printed.status().ToString();
  EXPECT_EQ(*printed, "SELECT 1 AS x");
  const RoundTrips after = CountRoundTrips();
  EXPECT_EQ(after.parses - before.parses, 1u);
  EXPECT_EQ(after.renders - before.renders, 1u);
}

TEST_F(SqlTreeTest, AnExplainPrefixIsKeptAsideAndPutBack) {
  SqlTree t = Parse("EXPLAIN SELECT 42");
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t.prefix(), "EXPLAIN ");
  t.MarkChanged();
  Result<std::string> printed = t.Render(*conn_);
  ASSERT_TRUE(printed.ok());
  EXPECT_EQ(*printed, "EXPLAIN SELECT 42");
}

TEST_F(SqlTreeTest, StatementsThatAreNotSelectsGiveATreeThatSaysWhy) {
  SqlTree t = Parse("CREATE TABLE t (a INTEGER)");
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.error().find("not a SELECT"), std::string::npos) << t.error();
  Result<std::string> same = t.Render(*conn_);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, "CREATE TABLE t (a INTEGER)");

  SqlTree garbage = Parse("SELEC oops");
  EXPECT_FALSE(garbage.ok());

  const RoundTrips before = CountRoundTrips();
  SqlTree nul = Parse(std::string("SELECT 1\0 --", 12));
  EXPECT_FALSE(nul.ok());
  EXPECT_EQ(CountRoundTrips().parses, before.parses) << "a NUL byte is not sent to DuckDB";
}

TEST_F(SqlTreeTest, TableRefsAreFoundInSubqueriesJoinsCtesAndSetOperations) {
  ASSERT_TRUE(conn_
                  ->Execute("CREATE TABLE t1 (x INTEGER); CREATE TABLE t2 (x INTEGER); CREATE "
                            "TABLE t3 (y INTEGER);"
                            "CREATE TABLE t4 (x INTEGER)")
                  .ok());
  std::vector<std::string> names = TableNames(
      "WITH c AS (SELECT x FROM t1) SELECT c.x FROM c JOIN (SELECT x FROM t2) s ON c.x = s.x "
      "WHERE c.x IN (SELECT y FROM t3) UNION ALL SELECT x FROM t4");
  std::set<std::string> found(names.begin(), names.end());
  EXPECT_EQ(found, (std::set<std::string>{"t1", "c", "t2", "t3", "t4"}));

  // A visit that returns false does not look inside its reference.
  SqlTree t = Parse("SELECT * FROM (SELECT * FROM t1) s");
  std::vector<std::string> types;
  ForEachTableRef(t.doc(), [&](Json& ref) {
    types.push_back(StringField(ref, "type"));
    return false;
  });
  EXPECT_EQ(types, (std::vector<std::string>{"SUBQUERY"}));
}

TEST_F(SqlTreeTest, SelectsAreVisitedOuterFirst) {
  SqlTree t = Parse("SELECT a FROM (SELECT 1 AS a) s WHERE a IN (SELECT 1)");
  std::vector<size_t> where_or_not;
  ForEachSelect(t.doc(), [&](Json& select) {
    where_or_not.push_back(select["where_clause"].is_null() ? 0 : 1);
  });
  ASSERT_EQ(where_or_not.size(), 3u);
  EXPECT_EQ(where_or_not[0], 1u) << "the outer SELECT has the WHERE";
}

TEST_F(SqlTreeTest, CtesAreListedInOrder) {
  SqlTree t = Parse("WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a) SELECT * FROM b");
  Result<Json*> node = t.Node(0);
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  std::vector<Cte> ctes = Ctes(**node);
  ASSERT_EQ(ctes.size(), 2u);
  EXPECT_EQ(ctes[0].name, "a");
  EXPECT_EQ(ctes[1].name, "b");
  ASSERT_NE(ctes[1].query_node, nullptr);
  EXPECT_EQ(StringField(*ctes[1].query_node, "type"), "SELECT_NODE");
}

TEST_F(SqlTreeTest, ConjunctsAreTheAndedPartsOnly) {
  SqlTree t =
      Parse("SELECT * FROM range(3) r(a) WHERE a = 1 AND (a > 0 AND a < 5) AND (a = 4 OR a = 5)");
  Result<Json*> node = t.Node(0);
  ASSERT_TRUE(node.ok());
  std::vector<const Json*> parts = Conjuncts((**node)["where_clause"]);
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(StringField(*parts[3], "class"), "CONJUNCTION");  // the OR stays whole
  EXPECT_TRUE(Conjuncts(Json()).empty());
}

TEST_F(SqlTreeTest, SimpleConstantsArePrintedAsDuckDBPrintsThem) {
  for (const char* e : {"42", "-7", "'it''s'", "true", "false", "TIMESTAMP '2024-07-01'",
                        "CAST(5 AS BIGINT)", "DATE '2024-01-02'", "CAST('x' AS VARCHAR)"}) {
    Result<Json> tree = ParseExpression(*conn_, e);
    ASSERT_TRUE(tree.ok()) << e << ": " << tree.status().ToString();
    std::optional<std::string> fast = SimpleConstantSql(*tree);
    ASSERT_TRUE(fast.has_value()) << e;
    Result<std::string> asked = ExpressionSql(*conn_, *tree);
    ASSERT_TRUE(asked.ok()) << asked.status().ToString();
    EXPECT_EQ(*fast, *asked) << e;
  }
  Result<Json> sum = ParseExpression(*conn_, "1 + 2");
  ASSERT_TRUE(sum.ok());
  EXPECT_FALSE(SimpleConstantSql(*sum).has_value());
}

TEST_F(SqlTreeTest, ManyExpressionsArePrintedInOneRoundTrip) {
  std::vector<Json> trees;
  for (const char* e : {"1 + 2", "'a' || 'b'", "42", "lower('X')"}) {
    Result<Json> t = ParseExpression(*conn_, e);
    ASSERT_TRUE(t.ok());
    trees.push_back(*t);
  }
  std::vector<const Json*> exprs;
  for (const Json& t : trees) exprs.push_back(&t);
  const RoundTrips before = CountRoundTrips();
  std::vector<std::optional<std::string>> texts = ExpressionsSql(*conn_, exprs);
  EXPECT_EQ(CountRoundTrips().renders - before.renders, 1u);
  ASSERT_EQ(texts.size(), 4u);
  for (size_t i = 0; i < texts.size(); ++i) {
    Result<std::string> one = ExpressionSql(*conn_, trees[i]);
    ASSERT_TRUE(one.ok());
    ASSERT_TRUE(texts[i].has_value()) << i;
    EXPECT_EQ(*texts[i], *one);
  }
}

TEST_F(SqlTreeTest, ExpressionTemplatesAreParsedOncePerProcess) {
  ASSERT_TRUE(ParseExpression(*conn_, "hash(1) % 2 = 3").ok());
  const RoundTrips before = CountRoundTrips();
  ASSERT_TRUE(ParseExpression(*conn_, "hash(1) % 2 = 3").ok());
  EXPECT_EQ(CountRoundTrips().parses, before.parses);
  Result<Json> two = ParseExpression(*conn_, "1, 2");
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument) << two.status().ToString();
}

TEST_F(SqlTreeTest, SplicesReplaceTheirPlaceholdersWhenPrinted) {
  SqlTree t = Parse("SELECT * FROM __sluice_test_marker_0_ AS s");
  t.AddSplice({"__sluice_test_marker_0_", "(SELECT 7 AS x)", {"x"}});
  ASSERT_NE(t.FindSplice("__sluice_test_marker_0_"), nullptr);
  EXPECT_EQ(t.FindSplice("other"), nullptr);
  t.MarkChanged();
  Result<std::string> printed = t.Render(*conn_);
  ASSERT_TRUE(printed.ok()) << printed.status().ToString();
  EXPECT_EQ(*printed, "SELECT * FROM (SELECT 7 AS x) AS s");
  auto rows = conn_->QueryText(*printed);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();

  // A placeholder the tree no longer holds: a clear error, not SQL without the scan.
  SqlTree lost = Parse("SELECT 1");
  lost.AddSplice({"__sluice_test_marker_1_", "(SELECT 1)", {}});
  lost.MarkChanged();
  Result<std::string> bad = lost.Render(*conn_);
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
}

TEST_F(SqlTreeTest, MalformedTreesGiveAStatusNotACrash) {
  SqlTree not_json = SqlTree::FromJson("SELECT 1", "{not json");
  EXPECT_FALSE(not_json.ok());
  EXPECT_NE(not_json.error().find("invalid JSON"), std::string::npos);
  not_json.MarkChanged();
  EXPECT_FALSE(not_json.Render(*conn_).ok());

  SqlTree no_flag = SqlTree::FromJson("SELECT 1", R"({"statements": []})");
  EXPECT_FALSE(no_flag.ok());
  SqlTree flag_not_bool = SqlTree::FromJson("SELECT 1", R"({"error": "no", "statements": []})");
  EXPECT_FALSE(flag_not_bool.ok());
  SqlTree no_statements = SqlTree::FromJson("SELECT 1", R"({"error": false})");
  EXPECT_FALSE(no_statements.ok());

  SqlTree odd =
      SqlTree::FromJson("SELECT 1", R"({"error": false, "statements": [{"node": 42}, 7]})");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd.statement_count(), 2u);
  EXPECT_EQ(odd.Node(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.Node(1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(odd.Node(2).status().code(), StatusCode::kInvalidArgument);
  odd.MarkChanged();
  EXPECT_FALSE(odd.Render(*conn_).ok()) << "DuckDB refuses the tree: a Status";

  // Walkers over shapes DuckDB never writes find nothing and do not throw.
  Json weird = Json::parse(R"([1, "x", {"type": 5, "alias": []}, {"class": "CONJUNCTION",
      "type": "CONJUNCTION_AND", "children": 3}, {"cte_map": {"map": [1, {"key": 2}]}},
      {"type": "SELECT_NODE", "where_clause": [], "from_table": 9}])");
  size_t refs = 0;
  ForEachTableRef(weird, [&](Json&) { return ++refs, true; });
  EXPECT_EQ(refs, 1u);  // {"type": 5, "alias": []} has the keys of one; its fields read as ""
  size_t selects = 0;
  ForEachSelect(weird, [&](Json&) { ++selects; });
  EXPECT_EQ(selects, 1u);
  EXPECT_TRUE(Conjuncts(weird[3]).empty());
  std::vector<Cte> ctes = Ctes(weird[4]);
  ASSERT_EQ(ctes.size(), 1u);
  EXPECT_EQ(ctes[0].name, "");
  EXPECT_EQ(ctes[0].query_node, nullptr);
  EXPECT_EQ(StringField(weird[2], "type"), "");
  EXPECT_FALSE(
      SimpleConstantSql(Json::parse(R"({"class": "CONSTANT", "value": {"is_null": "no"}})"))
          .has_value());
  EXPECT_EQ(ExpressionSql(*conn_, Json(3)).status().code(), StatusCode::kInvalidArgument);
  Result<std::string> node = odd.RenderNode(*conn_, Json::parse(R"({"type": "NOT_A_NODE"})"));
  EXPECT_FALSE(node.ok());
}

}  // namespace
}  // namespace sluice::query::sql_tree
