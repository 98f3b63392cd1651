// The kafka sink's exactly_once and transactional_id keys (docs/pipelines.md): where they
// are accepted, what `validate` refuses with the reason (a window, pipeline.state, a
// managed table, another sink type, the DLQ), wrong types, and the transactional.id a
// member derives.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "pipeline/pipeline_config.h"

namespace sluice::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::string_view kSource = R"(pipeline:
  name: orders
  source:
    type: kafka
    kafka:
      brokers: [localhost:9092]
      group_id: g
      auto_offset_reset: earliest
      topics: [in]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT * FROM batch
)";

std::string WithSink(std::string_view kafka_extra, std::string_view rest = "") {
  return fmt::format(R"({}  sink:
    type: kafka
    kafka:
      brokers: [localhost:9092]
      topic: out
{}{})",
                     kSource, kafka_extra, rest);
}

Result<PipelineConfig> Parse(const std::string& text) {
  return ParsePipeline(text, "p.yml", MapEnv({}));
}

std::string ErrorOf(const std::string& text) {
  Result<PipelineConfig> r = Parse(text);
  EXPECT_FALSE(r.ok()) << "parsed, but should not have:\n" << text;
  return r.ok() ? "" : r.status().message();
}

TEST(ExactlyOnceConfigTest, OffByDefaultSoSqlflowFilesStayAsTheyWere) {
  auto r = Parse(WithSink(""));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->sink.kafka.exactly_once);
  EXPECT_EQ(r->sink.kafka.transactional_id, "");
  EXPECT_THAT(DescribePipeline(*r), Not(HasSubstr("exactly once")));
}

TEST(ExactlyOnceConfigTest, TrueWithAPrefix) {
  auto r = Parse(WithSink("      exactly_once: true\n      transactional_id: orders-eos\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->sink.kafka.exactly_once);
  EXPECT_EQ(r->sink.kafka.transactional_id, "orders-eos");
  EXPECT_THAT(DescribePipeline(*r), HasSubstr("exactly once (Kafka transactions)"));
  EXPECT_TRUE(r->warnings.empty());
  auto off = Parse(WithSink("      exactly_once: false\n"));
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->sink.kafka.exactly_once);
}

TEST(ExactlyOnceConfigTest, WrongTypesNameTheKeyAndLine) {
  EXPECT_THAT(ErrorOf(WithSink("      exactly_once: yes please\n")),
              AllOf(HasSubstr("p.yml:18: pipeline.sink.kafka.exactly_once"),
                    HasSubstr("must be true or false, got 'yes please'")));
  EXPECT_THAT(ErrorOf(WithSink("      exactly_once: [true]\n")),
              HasSubstr("pipeline.sink.kafka.exactly_once: must be true or false, got a list"));
  EXPECT_THAT(ErrorOf(WithSink("      exactly_once: {on: true}\n")),
              HasSubstr("pipeline.sink.kafka.exactly_once: must be true or false, got a map"));
  EXPECT_THAT(ErrorOf(WithSink("      exactly_once: true\n      transactional_id: [a]\n")),
              HasSubstr("pipeline.sink.kafka.transactional_id: must be a single value"));
  EXPECT_THAT(ErrorOf(WithSink("      exactly_once: true\n      transactional_id: ' '\n")),
              HasSubstr("transactional_id: is empty"));
  EXPECT_THAT(ErrorOf(WithSink(fmt::format("      exactly_once: true\n      transactional_id: {}\n",
                                           std::string(201, 'x')))),
              HasSubstr("at most 200"));
}

TEST(ExactlyOnceConfigTest, APrefixWithoutExactlyOnceIsAWarning) {
  auto r = Parse(WithSink("      transactional_id: x\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("exactly_once is not true"));
}

TEST(ExactlyOnceConfigTest, TransactionalIdPropertiesAreRefused) {
  EXPECT_THAT(ErrorOf(WithSink("      properties: {transactional.id: x}\n")),
              HasSubstr("properties.transactional.id: cannot be set as a property: use "
                        "kafka.exactly_once and kafka.transactional_id"));
  EXPECT_THAT(ErrorOf(WithSink(
                  "      exactly_once: true\n      properties: {enable.idempotence: false}\n")),
              HasSubstr("a transactional producer is idempotent"));
}

TEST(ExactlyOnceConfigTest, RefusedWithAWindowWithTheReason) {
  std::string text = std::string(kSource) + R"(  window:
    type: tumbling
    time_column: ts
    size: 1m
    sink:
      type: kafka
      kafka:
        brokers: [localhost:9092]
        topic: out
        exactly_once: true
)";
  EXPECT_THAT(ErrorOf(text),
              AllOf(HasSubstr("p.yml:22: pipeline.window.sink.kafka.exactly_once: is refused with "
                              "pipeline.window"),
                    HasSubstr("the open windows live in the pipeline's DuckDB, which cannot join "
                              "a Kafka transaction")));
}

TEST(ExactlyOnceConfigTest, RefusedWithPipelineState) {
  EXPECT_THAT(
      ErrorOf(WithSink("      exactly_once: true\n", "  state:\n    path: /tmp/s.duckdb\n")),
      HasSubstr("is refused with pipeline.state"));
}

TEST(ExactlyOnceConfigTest, RefusedWithAManagedTable) {
  std::string text = R"(tables:
  sql:
    - name: t
      sql: CREATE TABLE t (a INT)
      manager:
        tumbling_window:
          collect_closed_windows_sql: SELECT * FROM t
          delete_closed_windows_sql: DELETE FROM t
        sink:
          type: console
)" + WithSink("      exactly_once: true\n");
  EXPECT_THAT(ErrorOf(text), HasSubstr("is refused with a managed table"));
  std::string on_manager = R"(tables:
  sql:
    - name: t
      sql: CREATE TABLE t (a INT)
      manager:
        tumbling_window:
          collect_closed_windows_sql: SELECT * FROM t
          delete_closed_windows_sql: DELETE FROM t
        sink:
          type: kafka
          kafka: {brokers: [localhost:9092], topic: o, exactly_once: true}
)" + WithSink("");
  EXPECT_THAT(ErrorOf(on_manager), HasSubstr("is refused on a table manager's sink"));
}

TEST(ExactlyOnceConfigTest, RefusedOnEverySinkButKafkaWithTheReason) {
  for (std::string_view block :
       {"console: {exactly_once: true}", "postgres: {dsn: x, table: t, exactly_once: true}",
        "sqlcommand: {sql: SELECT 1, exactly_once: true}"}) {
    std::string type(block.substr(0, block.find(':')));
    std::string text =
        std::string(kSource) + fmt::format("  sink:\n    type: {}\n    {}\n", type, block);
    EXPECT_THAT(ErrorOf(text),
                AllOf(HasSubstr(fmt::format("pipeline.sink.{}.exactly_once: is the kafka sink's "
                                            "key",
                                            type)),
                      HasSubstr(fmt::format("which a {} sink cannot join", type)),
                      Not(HasSubstr("unknown key"))))
        << type;
  }
}

TEST(ExactlyOnceConfigTest, OnTheDeadLetterSinkItBelongsOnThePipelinesSink) {
  EXPECT_THAT(
      ErrorOf(WithSink("      exactly_once: true\n",
                       "  on_error:\n    policy: DLQ\n    dlq:\n      type: kafka\n      kafka: "
                       "{brokers: [localhost:9092], topic: dlq, exactly_once: true}\n")),
      HasSubstr("pipeline.on_error.dlq.kafka.exactly_once: belongs on pipeline.sink"));
  auto ok = Parse(WithSink("      exactly_once: true\n",
                           "  on_error:\n    policy: DLQ\n    dlq:\n      type: kafka\n      "
                           "kafka: {brokers: [localhost:9092], topic: dlq}\n"));
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(ExactlyOnceConfigTest, ARead_uncommittedSourceIsRefused) {
  std::string text = WithSink("      exactly_once: true\n");
  text.replace(text.find("      topics: [in]\n"), 19,
               "      topics: [in]\n      properties: {isolation.level: read_uncommitted}\n");
  EXPECT_THAT(ErrorOf(text), AllOf(HasSubstr("needs the source to read read_committed"),
                                   HasSubstr("records of aborted upstream transactions")));
  std::string committed = WithSink("      exactly_once: true\n");
  committed.replace(committed.find("      topics: [in]\n"), 19,
                    "      topics: [in]\n      properties: {isolation.level: read_committed}\n");
  auto r = Parse(committed);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

TEST(ExactlyOnceConfigTest, TransactionalIdIsStablePerMemberWhenConfigured) {
  KafkaSinkConfig sink;
  KafkaSourceConfig source;
  sink.transactional_id = "orders-eos";
  EXPECT_EQ(TransactionalId(sink, source, "orders"), "orders-eos");
  source.properties["group.instance.id"] = "member-2";
  EXPECT_EQ(TransactionalId(sink, source, "orders"), "orders-eos-member-2");
  sink.transactional_id.clear();
  EXPECT_EQ(TransactionalId(sink, source, "orders"), "sluice-orders-member-2");
  // Neither: unique per process (host and pid), not stable across restarts.
  source.properties.clear();
  std::string id = TransactionalId(sink, source, "orders");
  EXPECT_THAT(id, AllOf(::testing::StartsWith("sluice-orders-"),
                        ::testing::EndsWith(fmt::format("-{}", getpid()))));
}

}  // namespace
}  // namespace sluice::pipeline
