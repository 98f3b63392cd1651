// PipelineRunner without a broker: Invoke runs the handler over batches of messages, as
// `sluice pipeline invoke` does. The handler's SQL is prepared once and its result is a
// view over the result's chunks: these tests check that results stay right when the
// batch's inferred schema (and so the result's) changes from one batch to the next, and
// that an SQL error is an error, every time.
#include "pipeline/runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace sluice::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Config(std::string_view handler, std::string_view sql) {
  return fmt::format(R"(pipeline:
  name: t
  source:
    type: kafka
    kafka:
      brokers: [localhost:9092]
      group_id: g
      auto_offset_reset: earliest
      topics: [in]
  handler:
    type: {}
    sql: {}
  sink:
    type: noop
)",
                     handler, sql);
}

// A runner with no sinks over the pipeline file `text`.
std::unique_ptr<PipelineRunner> MakeFrom(const std::string& text) {
  auto config = ParsePipeline(text, "t.yml", MapEnv({}));
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  if (!config.ok()) return nullptr;
  RunnerOptions options;  // the process's metrics registry, which outlives the runner
  options.without_sinks = true;
  auto runner = PipelineRunner::Create(std::move(config).value(), options);
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  return runner.ok() ? std::move(runner).value() : nullptr;
}

std::unique_ptr<PipelineRunner> Make(std::string_view handler, std::string_view sql) {
  return MakeFrom(Config(handler, sql));
}

std::vector<std::string> Feed(PipelineRunner& r, const std::vector<std::string>& values) {
  std::vector<kafka::client::Message> messages;
  for (size_t i = 0; i < values.size(); ++i) {
    kafka::client::Message m;
    m.topic = "in";
    m.partition = 0;
    m.offset = static_cast<int64_t>(i);
    m.value = values[i];
    messages.push_back(m);
  }
  std::vector<std::string> errors;
  auto rows = r.Invoke(messages, &errors);
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_TRUE(errors.empty());
  return rows.ok() ? *rows : std::vector<std::string>{};
}

TEST(RunnerTest, ResultFollowsTheInferredSchemaFromBatchToBatch) {
  auto r = Make("handlers.InferredMemBatch",
                "SELECT * EXCLUDE (kafka_topic, kafka_partition, kafka_timestamp, kafka_key) FROM "
                "batch ORDER BY kafka_offset");
  ASSERT_NE(r, nullptr);
  EXPECT_THAT(Feed(*r, {R"({"a":1})", R"({"a":2})"}),
              ElementsAre(R"({"a":1.0,"kafka_offset":0})", R"({"a":2.0,"kafka_offset":1})"));
  // Other columns, other types: the result view follows.
  EXPECT_THAT(Feed(*r, {R"({"b":"x","c":{"d":[1,2]}})"}),
              ElementsAre(R"({"b":"x","c":{"d":[1.0,2.0]},"kafka_offset":0})"));
  EXPECT_THAT(Feed(*r, {R"({"a":"now text"})"}),
              ElementsAre(R"({"a":"now text","kafka_offset":0})"));
  // Back to the first schema.
  EXPECT_THAT(Feed(*r, {R"({"a":3})"}), ElementsAre(R"({"a":3.0,"kafka_offset":0})"));
}

// A fixture none of whose lines decodes: its decode errors, and no handler error from SQL
// over a batch that has only the kafka_ columns.
TEST(RunnerTest, FixtureOfOnlyUndecodableLinesGivesItsDecodeErrorsOnly) {
  auto r = Make("handlers.InferredMemBatch", "SELECT id FROM batch");
  ASSERT_NE(r, nullptr);
  EXPECT_THAT(Feed(*r, {R"({"id":1})"}), ElementsAre(R"({"id":1.0})"));
  std::vector<kafka::client::Message> messages(2);
  const std::string bad[] = {"not json {", "nor this"};
  for (int i = 0; i < 2; ++i) {
    messages[i].topic = "in";
    messages[i].partition = 0;
    messages[i].offset = i;
    messages[i].value = bad[i];
  }
  std::vector<std::string> errors;
  auto rows = r->Invoke(messages, &errors);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_TRUE(rows->empty());
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_THAT(errors[0], HasSubstr("message 1"));
  EXPECT_THAT(errors[1], HasSubstr("message 2"));
}

TEST(RunnerTest, ResultTypesWithParametersAreKept) {
  auto r = Make("handlers.InferredMemBatch",
                "SELECT a::DECIMAL(10,2) AS d, a::VARCHAR::mood_free AS m FROM batch");
  // mood_free does not exist: the error is the handler's, with DuckDB's message.
  ASSERT_NE(r, nullptr);
  std::string value = R"({"a":1.25})";
  kafka::client::Message m;
  m.topic = "in";
  m.value = value;
  std::vector<std::string> errors;
  auto rows = r->Invoke(std::vector<kafka::client::Message>{m}, &errors);
  ASSERT_FALSE(rows.ok());
  EXPECT_THAT(rows.status().message(), HasSubstr("handler.sql"));
  EXPECT_THAT(rows.status().message(), HasSubstr("mood_free"));
  // Still an error the second time (the statement is prepared again, not reused).
  rows = r->Invoke(std::vector<kafka::client::Message>{m}, &errors);
  EXPECT_FALSE(rows.ok());

  auto d = Make(
      "handlers.InferredMemBatch",
      "SELECT a::DECIMAL(10,2) AS d, a::DECIMAL(18,4) AS e, [a, a]::DOUBLE[2] AS arr FROM batch");
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(Feed(*d, {R"({"a":1.25})"}),
              ElementsAre(R"({"d":1.25,"e":1.2500,"arr":[1.25,1.25]})"));
  EXPECT_THAT(
      Feed(*d, {R"({"a":"2.5"})"}),
      ElementsAre(
          R"({"d":2.5,"e":2.5000,"arr":[2.5,2.5]})"));  // DuckDB's to_json of these DECIMALs
}

TEST(RunnerTest, StructuredBatchAggregatesEachBatch) {
  std::string config = std::string(R"(commands:
  - name: t
    sql: CREATE TABLE events (city VARCHAR, amount DOUBLE)
)") + Config("handlers.StructuredBatch\n    table: events",
             "SELECT city, count(*) AS n, sum(amount) AS total FROM events GROUP BY 1 ORDER BY 1");
  auto r = MakeFrom(config);
  ASSERT_NE(r, nullptr);
  EXPECT_THAT(
      Feed(*r, {R"({"city":"Oslo","amount":1})", R"({"city":"Rome","amount":2})",
                R"({"city":"Oslo","amount":3})"}),
      ElementsAre(R"({"city":"Oslo","n":2,"total":4.0})", R"({"city":"Rome","n":1,"total":2.0})"));
  EXPECT_THAT(Feed(*r, {R"({"city":"Rome","amount":5})"}),
              ElementsAre(R"({"city":"Rome","n":1,"total":5.0})"));
}

// sqlflow's tumbling window over its window.jsonl fixture: the handler upserts per-bucket
// counts, and invoke prints what the window emits at the end (the fixture is from 2015,
// so the collect SQL's wall-clock predicate closes every bucket).
TEST(RunnerTest, SqlflowTumblingWindowEmitsItsClosedBucketsOnInvoke) {
  ::setenv("TZ", "UTC", 1);  // DuckDB prints TIMESTAMPTZ in the process's time zone
  ::tzset();
  std::ifstream in(std::string(SLUICE_TEST_PIPELINES_DIR) + "/sqlflow.tumbling.window.yml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  auto r = MakeFrom(text);
  ASSERT_NE(r, nullptr);
  std::vector<std::string> lines = {
      R"({"timestamp":"2015-12-12T19:11:01.249Z","event":"search","properties":{"city":"New York"},"user":{"id":"123412ds"}})",
      R"({"timestamp":"2015-12-12T19:11:01.249Z","event":"search","properties":{"city":"New York"},"user":{"id":"123412ds1"}})",
      R"({"timestamp":"2015-12-12T19:11:01.249Z","event":"search","properties":{"city":"Baltimore"},"user":{"id":"123412ds1"}})",
      R"({"timestamp":"2015-12-12T19:11:01.249Z","event":"search","properties":{"city":"Baltimore"},"user":{"id":"123412ds1"}})"};
  std::vector<std::string> rows = Feed(*r, {lines[0], lines[1]});
  EXPECT_THAT(rows,
              ElementsAre(R"({"bucket":"2015-12-12 19:11:00+00","city":"New York","count":2})"));
  // The closed windows were deleted: the next batch's buckets start from nothing, and an
  // upsert into a bucket emitted before starts again at its own count.
  rows = Feed(*r, {lines[2], lines[3], lines[0]});
  EXPECT_THAT(rows,
              ElementsAre(R"({"bucket":"2015-12-12 19:11:00+00","city":"Baltimore","count":2})",
                          R"({"bucket":"2015-12-12 19:11:00+00","city":"New York","count":1})"));
}

// A window table with a UNIQUE index (sqlflow's upsert needs one) whose polls delete many
// rows is rebuilt, so DuckDB frees them; the upsert still works on the rebuilt table.
TEST(RunnerTest, IndexedWindowTableIsRebuiltAfterManyDeletes) {
  std::string config = R"(tables:
  sql:
    - name: agg
      sql: |
        CREATE TABLE agg (bucket BIGINT, n INT);
        CREATE UNIQUE INDEX agg_idx ON agg (bucket);
      manager:
        tumbling_window:
          collect_closed_windows_sql: SELECT bucket, n FROM agg WHERE bucket < 1000000 ORDER BY bucket
          delete_closed_windows_sql: DELETE FROM agg WHERE bucket < 1000000
        sink: {type: noop}
)" + Config("handlers.InferredMemBatch",
            "INSERT INTO agg SELECT b::BIGINT, count(*) FROM batch GROUP BY ALL ON CONFLICT "
            "(bucket) DO UPDATE SET n = n + EXCLUDED.n");
  auto r = MakeFrom(config);
  ASSERT_NE(r, nullptr);
  std::vector<std::string> values;
  for (int i = 0; i < 12000; ++i) values.push_back(fmt::format(R"({{"b":{}}})", i));
  values.push_back(R"({"b":2000000})");  // an open window, kept across the rebuild
  values.push_back(R"({"b":2000000})");
  std::vector<std::string> rows = Feed(*r, values);
  EXPECT_EQ(rows.size(), 12000u);
  EXPECT_EQ(r->stats().window_compactions.load(), 1u);
  // After the rebuild: the open window's row is there and the upsert still finds it.
  rows = Feed(*r, {R"({"b":2000000})", R"({"b":5})", R"({"b":5})"});
  EXPECT_THAT(rows, ElementsAre(R"({"bucket":5,"n":2})"));
}

}  // namespace
}  // namespace sluice::pipeline
