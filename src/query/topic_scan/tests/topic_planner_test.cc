// The topic() bounds planner on SQL text: which WHERE conjuncts become named parameters
// and which do not. No broker: DuckDB only parses and prints (json_serialize_sql).
#include "query/topic_scan/topic_planner.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace sluice::query {
namespace {

class TopicPlannerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
  }

  std::string Plan(const std::string& sql) {
    Result<std::string> out = PlanTopicBounds(*conn_, sql);
    EXPECT_TRUE(out.ok()) << sql << ": " << out.status().ToString();
    return out.ok() ? *out : "";
  }

  // The argument lists of the planned query's topic() calls, in order.
  std::vector<std::string> Calls(const std::string& sql) {
    const std::string planned = Plan(sql);
    std::vector<std::string> out;
    for (size_t at = planned.find("topic("); at != std::string::npos;
         at = planned.find("topic(", at + 1)) {
      size_t i = at + 6;
      int depth = 1;
      bool quoted = false;
      for (; i < planned.size() && depth > 0; ++i) {
        if (planned[i] == '\'') quoted = !quoted;
        if (quoted) continue;
        if (planned[i] == '(') ++depth;
        if (planned[i] == ')') --depth;
      }
      out.push_back(planned.substr(at + 6, i - at - 7));
    }
    return out;
  }
  std::string Call(const std::string& sql) {
    std::vector<std::string> calls = Calls(sql);
    EXPECT_EQ(calls.size(), 1u) << Plan(sql);
    return calls.empty() ? "" : calls[0];
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(TopicPlannerTest, OffsetComparisonsBecomeHalfOpenBounds) {
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE "offset" >= 10 AND "offset" < 20)"),
            "'e', from_offset := 10, to_offset := 20");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE "offset" > 10 AND "offset" <= 20)"),
            "'e', from_offset := 11, to_offset := 21");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE 10 < "offset" AND 20 >= "offset")"),
            "'e', from_offset := 11, to_offset := 21");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE "offset" = 7)"),
            "'e', from_offset := 7, to_offset := 8");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE "offset" BETWEEN 5 AND 9)"),
            "'e', from_offset := 5, to_offset := 10");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE "offset" IN (3, 9, 5))"),
            "'e', from_offset := 3, to_offset := 10");
  // Several bounds: the tightest; below zero: zero (offsets are never negative).
  EXPECT_EQ(
      Call(R"(SELECT * FROM topic('e') WHERE "offset" >= 4 AND "offset" >= 6 AND "offset" > -3)"),
      "'e', from_offset := 6");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE "offset" < -3)"), "'e', to_offset := 0");
}

TEST_F(TopicPlannerTest, GivenBoundsAreIntersectedNeverWidened) {
  EXPECT_EQ(
      Call(
          R"(SELECT * FROM topic('e', from_offset => 50, to_offset => 60) WHERE "offset" >= 10 AND "offset" < 100)"),
      "'e', from_offset := greatest(CAST(50 AS BIGINT), 10), "
      "to_offset := least(CAST(60 AS BIGINT), 100)");
  // A given bound holding a parameter is left as it is.
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e', from_offset => $1) WHERE "offset" >= 10)"),
            "'e', from_offset => $1");
}

TEST_F(TopicPlannerTest, TimeLowerBoundsAndUpperOnesForLogAppendTime) {
  EXPECT_EQ(
      Call(R"(SELECT * FROM topic('e') WHERE "timestamp" >= TIMESTAMPTZ '2024-05-01 12:00:00+00')"),
      "'e', from_ts := CAST(CAST('2024-05-01 12:00:00+00' AS TIMESTAMP WITH TIME ZONE) AS "
      "TIMESTAMP WITH "
      "TIME ZONE)");
  EXPECT_EQ(
      Call(
          R"(SELECT * FROM topic('e') WHERE timestamp > '2024-05-01' AND timestamp < '2024-06-01')"),
      "'e', from_ts := CAST('2024-05-01' AS TIMESTAMP WITH TIME ZONE), to_ts_log_append := "
      "date_add(CAST('2024-06-01' AS TIMESTAMP WITH TIME ZONE), to_milliseconds(1))");
  EXPECT_EQ(
      Call(
          R"(SELECT * FROM topic('e', from_ts => now() - INTERVAL 1 HOUR) WHERE timestamp >= DATE '2024-05-01')"),
      "'e', from_ts := greatest(CAST((now() - to_hours(CAST(trunc(CAST(1 AS DOUBLE)) AS BIGINT))) "
      "AS TIMESTAMP "
      "WITH TIME ZONE), CAST(CAST('2024-05-01' AS DATE) AS TIMESTAMP WITH TIME ZONE))");
  // Upper time bounds go to to_ts_log_append, which only a LogAppendTime topic applies
  // (CreateTime timestamps need not grow with offsets), a millisecond later.
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE timestamp < TIMESTAMP '2024-05-01')"),
            "'e', to_ts_log_append := date_add(CAST(CAST('2024-05-01' AS TIMESTAMP) AS TIMESTAMP "
            "WITH TIME ZONE), "
            "to_milliseconds(1))");
}

TEST_F(TopicPlannerTest, PartitionsEqualAndIn) {
  EXPECT_EQ(Call("SELECT * FROM topic('e') WHERE partition = 2"),
            "'e', partitions := list_value(2)");
  EXPECT_EQ(Call("SELECT * FROM topic('e') WHERE partition IN (4, 1, 2) AND partition IN (2, 4)"),
            "'e', partitions := list_value(2, 4)");
  // A contradiction reads nothing.
  EXPECT_EQ(Call("SELECT * FROM topic('e') WHERE partition = 1 AND partition = 2"),
            "'e', to_offset := 0");
  // The given partition is kept: the function intersects both.
  EXPECT_EQ(Call("SELECT * FROM topic('e', partition => 1) WHERE partition = 2"),
            "'e', \"partition\" := 1, partitions := list_value(2)");
}

TEST_F(TopicPlannerTest, NothingUnderOrNotOrFunctionsOrParameters) {
  for (const char* sql : {
           R"(SELECT * FROM topic('e') WHERE "offset" >= 10 OR key = 'a')",
           R"(SELECT * FROM topic('e') WHERE NOT ("offset" < 10 OR key = 'a'))",
           R"(SELECT * FROM topic('e') WHERE "offset" NOT BETWEEN 1 AND 5)",
           R"(SELECT * FROM topic('e') WHERE partition NOT IN (1, 2))",
           R"(SELECT * FROM topic('e') WHERE "offset" + 1 >= 10)",
           R"(SELECT * FROM topic('e') WHERE "offset"::INTEGER >= 10)",
           R"(SELECT * FROM topic('e') WHERE "offset" >= 10.5)",
           R"(SELECT * FROM topic('e') WHERE "offset" >= '10')",
           R"(SELECT * FROM topic('e') WHERE "offset" >= NULL)",
           R"(SELECT * FROM topic('e') WHERE "offset" >= $1)",
           R"(SELECT * FROM topic('e') WHERE "offset" >= ?)",
           R"(SELECT * FROM topic('e') WHERE "offset" <> 3)",
           R"(SELECT * FROM topic('e') WHERE "offset" >= (SELECT 10))",
           R"(SELECT * FROM topic('e') WHERE partition IN (1, NULL))",
           R"(SELECT * FROM topic('e') WHERE timestamp >= now())",
           R"(SELECT * FROM topic('e') WHERE timestamp >= TRY_CAST('x' AS TIMESTAMP))",
           R"(SELECT partition, count(*) FROM topic('e') GROUP BY partition HAVING partition = 1)",
           R"(SELECT * FROM topic('e') USING SAMPLE 10 WHERE "offset" >= 10)",
           R"(SELECT * FROM topic('e') TABLESAMPLE 10 WHERE "offset" >= 10)",
       }) {
    EXPECT_EQ(Call(sql), "'e'") << sql;
  }
  // DuckDB's parser itself turns NOT of a comparison into the opposite comparison.
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE NOT ("offset" < 10))"),
            "'e', from_offset := 10");
  // A query without topic() is not even parsed; one DuckDB cannot parse comes back as is.
  EXPECT_EQ(Plan("SELECT 1 WHERE \"offset\" > 1"), "SELECT 1 WHERE \"offset\" > 1");
  EXPECT_EQ(Plan("SELEC * FROM topic('e')"), "SELEC * FROM topic('e')");
  EXPECT_EQ(Plan("INSERT INTO t SELECT * FROM topic('e') WHERE \"offset\" > 1"),
            "INSERT INTO t SELECT * FROM topic('e') WHERE \"offset\" > 1");
}

TEST_F(TopicPlannerTest, ColumnsResolveByAliasAndRenames) {
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') AS t WHERE t."offset" >= 3)"),
            "'e', from_offset := 3");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') WHERE topic."offset" >= 3)"), "'e', from_offset := 3");
  // `AS t(p, o)` renames: "offset" is no longer the topic's column.
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') AS t(p, o) WHERE o >= 3 AND p = 1)"),
            "'e', from_offset := 3, partitions := list_value(1)");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') AS t(p, o) WHERE "offset" >= 3)"), "'e'");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('e') AS t WHERE u."offset" >= 3)"), "'e'");
}

// kafka.<topic> names a topic as a table: it becomes topic('<topic>') AS <topic> (or its
// own alias), bounds and all, at any depth; other schemas and time travel are left alone.
TEST_F(TopicPlannerTest, TopicsNamedAsTablesBecomeCalls) {
  EXPECT_EQ(Plan("SELECT * FROM kafka.events"), "SELECT * FROM topic('events') AS events");
  EXPECT_EQ(Call(R"(SELECT * FROM "KAFKA"."Events" WHERE "offset" >= 3)"),
            "'Events', from_offset := 3");
  EXPECT_EQ(Call(R"(SELECT e.key FROM kafka.events AS e WHERE e."offset" < 9)"),
            "'events', to_offset := 9");
  EXPECT_EQ(Calls("WITH a AS (SELECT * FROM kafka.x) SELECT * FROM a, (SELECT 1 FROM kafka.y)"),
            (std::vector<std::string>{"'x'", "'y'"}));
  EXPECT_NE(Plan("SELECT * FROM kafka.events AS e(p, o)").find("AS e(p, o)"), std::string::npos)
      << Plan("SELECT * FROM kafka.events AS e(p, o)");
  EXPECT_EQ(Plan("SELECT * FROM lake.kafka.events"), "SELECT * FROM lake.kafka.events");
  EXPECT_EQ(Plan("SELECT * FROM kafkas.events"), "SELECT * FROM kafkas.events");
  EXPECT_EQ(Plan("SELECT 'kafka.events'"), "SELECT 'kafka.events'");
}

TEST_F(TopicPlannerTest, JoinsTakeQualifiedColumnsOnly) {
  // Two topics: each gets its own bounds.
  EXPECT_EQ(Calls(R"(SELECT * FROM topic('a') x JOIN topic('b') y ON x.key = y.key
                     WHERE x."offset" >= 5 AND y.partition = 0 AND y."offset" < 9)"),
            (std::vector<std::string>{"'a', from_offset := 5",
                                      "'b', to_offset := 9, partitions := list_value(0)"}));
  // Another table's column named offset, and bare names beside another table: not the topic's.
  EXPECT_EQ(Call(R"(SELECT * FROM topic('a') x, other o WHERE o."offset" >= 5)"), "'a'");
  EXPECT_EQ(Call(R"(SELECT * FROM topic('a') x, other o WHERE "offset" >= 5)"), "'a'");
  // Outer joins: a WHERE comparison is false on the NULL-extended rows, so either side may be
  // narrowed.
  EXPECT_EQ(
      Call(R"(SELECT * FROM other o LEFT JOIN topic('a') x ON o.k = x.key WHERE x."offset" >= 5)"),
      "'a', from_offset := 5");
  EXPECT_EQ(
      Call(R"(SELECT * FROM topic('a') x FULL JOIN other o ON o.k = x.key WHERE x."offset" >= 5)"),
      "'a', from_offset := 5");
  // ON is not WHERE; ASOF and POSITIONAL joins pair rows by what is there.
  EXPECT_EQ(
      Call(R"(SELECT * FROM other o LEFT JOIN topic('a') x ON o.k = x.key AND x."offset" >= 5)"),
      "'a'");
  EXPECT_EQ(
      Call(
          R"(SELECT * FROM other o ASOF JOIN topic('a') x ON o.t >= x.timestamp WHERE x."offset" >= 5)"),
      "'a'");
  EXPECT_EQ(Call(R"(SELECT * FROM other o POSITIONAL JOIN topic('a') x WHERE x."offset" >= 5)"),
            "'a'");
}

TEST_F(TopicPlannerTest, SubqueriesAndCtesHaveTheirOwnWhere) {
  EXPECT_EQ(
      Call(
          R"(WITH w AS (SELECT * FROM topic('e') WHERE "offset" >= 3) SELECT * FROM w WHERE "offset" < 9)"),
      "'e', from_offset := 3");
  EXPECT_EQ(
      Call(
          R"(SELECT * FROM (SELECT * FROM topic('e') WHERE partition = 1) s WHERE s."offset" < 9)"),
      "'e', partitions := list_value(1)");
  EXPECT_EQ(
      Calls(
          R"(SELECT * FROM topic('e') WHERE "offset" >= 2 UNION ALL SELECT * FROM topic('e') WHERE "offset" < 1)"),
      (std::vector<std::string>{"'e', from_offset := 2", "'e', to_offset := 1"}));
  // A subquery's WHERE naming the outer topic is not the topic's own WHERE.
  EXPECT_EQ(
      Call(R"(SELECT * FROM topic('e') t WHERE EXISTS (SELECT 1 FROM other WHERE t."offset" > 5))"),
      "'e'");
  // EXPLAIN keeps its prefix.
  EXPECT_EQ(Plan(R"(EXPLAIN SELECT * FROM topic('e') WHERE "offset" >= 3)").substr(0, 8),
            "EXPLAIN ");
  EXPECT_NE(Plan(R"(EXPLAIN SELECT * FROM topic('e') WHERE "offset" >= 3)").find("from_offset"),
            std::string::npos);
}

// Whatever else the query holds comes back through json_deserialize_sql and still parses.
TEST_F(TopicPlannerTest, RestOfTheQuerySurvives) {
  for (
      const char* sql : {
          R"(SELECT key, row_number() OVER (PARTITION BY partition ORDER BY "offset") AS n FROM topic('e')
              WHERE "offset" >= 3 QUALIFY n = 1 ORDER BY key LIMIT 5)",
          R"(SELECT list_transform([1, 2], x -> x + "offset") FROM topic('e') WHERE "offset" < 9)",
          R"(SELECT value::JSON->>'a' AS a, count(*) FILTER (WHERE key IS NULL) FROM topic('e', columns => 'a BIGINT')
              WHERE partition IN (1, 2) GROUP BY ALL HAVING count(*) > 1)",
          R"(SELECT DISTINCT ON (key) * FROM topic('e') WHERE "offset" = 4 AND key LIKE 'k%' AND value ~ '^x')",
          R"(SELECT * FROM topic('e') WHERE "offset" >= 3 AND $1::INT = 1 AND ? IS NOT NULL)",
      }) {
    const std::string planned = Plan(sql);
    EXPECT_NE(planned, sql);
    auto parsed = conn_->QueryText("SELECT json_serialize_sql(" + duck::QuoteLiteral(planned) +
                                   ")::JSON->>'error'");
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ((*parsed)[0][0].value_or("?"), "false") << planned;
  }
}

// On a tree of another shape than DuckDB writes the pass changes nothing or says what was
// wrong; it never crashes (the engine then plans without the bounds).
TEST_F(TopicPlannerTest, AMalformedTreeIsLeftAloneOrAClearError) {
  const std::string sql = "SELECT * FROM topic('e') WHERE \"offset\" > 1";
  // The call's arguments are not a list: not a topic() call this pass knows.
  sql_tree::SqlTree odd =
      sql_tree::SqlTree::FromJson(sql, R"({"error": false, "statements": [{"node": {
      "type": "SELECT_NODE", "where_clause": {"class": "CONSTANT"}, "from_table": {"type": "TABLE_FUNCTION",
      "alias": "", "function": {"class": "FUNCTION", "function_name": "topic", "children": 5}}}}]})");
  Result<bool> changed = PlanTopicTree(odd);
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_FALSE(*changed);
  EXPECT_FALSE(odd.changed());
  // A column reference whose names are a number: the pass stops with a Status.
  sql_tree::SqlTree bad =
      sql_tree::SqlTree::FromJson(sql, R"({"error": false, "statements": [{"node": {
      "type": "SELECT_NODE", "from_table": {"type": "TABLE_FUNCTION", "alias": "",
      "function": {"class": "FUNCTION", "function_name": "topic", "children": []}},
      "where_clause": {"class": "COMPARISON", "type": "COMPARE_GREATERTHAN",
      "left": {"class": "COLUMN_REF", "column_names": 7}, "right": {"class": "CONSTANT"}}}}]})");
  Result<bool> failed = PlanTopicTree(bad);
  if (!failed.ok()) {
    EXPECT_EQ(failed.status().code(), StatusCode::kInternal) << failed.status().ToString();
  } else {
    EXPECT_FALSE(*failed);
  }
  // A tree DuckDB did not parse is left as it is.
  sql_tree::SqlTree not_parsed = sql_tree::SqlTree::FromJson(sql, "{");
  changed = PlanTopicTree(not_parsed);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

}  // namespace
}  // namespace sluice::query
