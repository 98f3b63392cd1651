// Tests of pipeline files: sqlflow's own examples parse unchanged, template substitution,
// and each malformed case names the key and its file:line.
#include "pipeline/pipeline_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

namespace sluice::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kDir = SLUICE_TEST_PIPELINES_DIR;

// A minimal valid file; tests splice one change into it.
constexpr std::string_view kMinimal = R"(pipeline:
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
  sink:
    type: console
)";

Result<PipelineConfig> Parse(std::string_view text, std::map<std::string, std::string> env = {}) {
  return ParsePipeline(text, "p.yml", MapEnv(std::move(env)));
}

// The error message of a parse that must fail.
std::string ErrorOf(std::string_view text, std::map<std::string, std::string> env = {}) {
  Result<PipelineConfig> r = Parse(text, std::move(env));
  EXPECT_FALSE(r.ok()) << "parsed, but should not have:\n" << text;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

std::string Replace(std::string_view text, std::string_view from, std::string_view to) {
  std::string s(text);
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(PipelineConfigTest, MinimalFileTakesSqlflowDefaults) {
  Result<PipelineConfig> r = Parse(kMinimal);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PipelineConfig& c = *r;
  EXPECT_EQ(c.batch_size, 1);
  EXPECT_EQ(c.flush_interval_seconds, 30);
  EXPECT_EQ(c.source.brokers, std::vector<std::string>{"localhost:9092"});
  EXPECT_EQ(c.source.group_id, "g");
  EXPECT_EQ(c.source.auto_offset_reset, AutoOffsetReset::kEarliest);
  EXPECT_EQ(c.source.topics, std::vector<std::string>{"in"});
  EXPECT_EQ(c.source.fetch.max_bytes, 4 << 20);
  EXPECT_EQ(c.source.fetch.max_partition_bytes, 1 << 20);
  EXPECT_EQ(c.source.fetch.prefetch, 2);
  EXPECT_EQ(c.handler.type, HandlerType::kInferredMemBatch);
  EXPECT_EQ(c.handler.sql, "SELECT * FROM batch");
  EXPECT_EQ(c.handler.sql_origin, "p.yml:11");
  EXPECT_EQ(c.sink.type, SinkType::kConsole);
  EXPECT_EQ(c.on_error.policy, ErrorPolicy::kRaise);
  EXPECT_FALSE(c.on_error.dlq.has_value());
  EXPECT_EQ(c.duckdb.memory_limit_bytes, 256 << 20);
  EXPECT_EQ(c.duckdb.threads, 1);
  EXPECT_TRUE(c.commands.empty());
  EXPECT_TRUE(c.warnings.empty());
}

// ---- sqlflow's own example files, unchanged

TEST(PipelineConfigTest, DecodeThreads) {
  const std::string_view at = "    sql: SELECT * FROM batch\n";
  auto with = [&](std::string_view value) {
    return Replace(kMinimal, at, fmt::format("{}    decode_threads: {}\n", at, value));
  };
  Result<PipelineConfig> r = Parse(kMinimal);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->handler.decode_threads, 0);  // auto
  const size_t auto_threads = DecodeThreads(r->handler);
  EXPECT_GE(auto_threads, 1u);
  EXPECT_LE(auto_threads, static_cast<size_t>(kMaxAutoDecodeThreads));
  r = Parse(with("auto"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DecodeThreads(r->handler), auto_threads);
  r = Parse(with("3"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(DecodeThreads(r->handler), 3u);
  EXPECT_THAT(ErrorOf(with("0")),
              HasSubstr("p.yml:12: pipeline.handler.decode_threads: must be at least 1, got 0"));
  EXPECT_THAT(ErrorOf(with("65")), HasSubstr("must be at most 64"));
  EXPECT_THAT(ErrorOf(with("two")), HasSubstr("decode_threads: must be a whole number"));
  EXPECT_THAT(ErrorOf(with("[2]")), HasSubstr("decode_threads"));
}

TEST(PipelineConfigTest, SqlflowTumblingWindowExample) {
  auto r = LoadPipelineFile(kDir + "/sqlflow.tumbling.window.yml", MapEnv({}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tables.size(), 1u);
  const TableConfig& t = r->tables[0];
  EXPECT_EQ(t.name, "agg_cities_count");
  EXPECT_THAT(t.sql, HasSubstr("CREATE UNIQUE INDEX"));
  ASSERT_TRUE(t.tumbling_window.has_value());
  EXPECT_EQ(t.tumbling_window->poll_interval_seconds, 10);
  EXPECT_THAT(t.tumbling_window->collect_sql, HasSubstr("SELECT bucket, city, count"));
  EXPECT_THAT(t.tumbling_window->delete_sql, HasSubstr("DELETE FROM agg_cities_count"));
  EXPECT_THAT(t.tumbling_window->collect_origin, HasSubstr("sqlflow.tumbling.window.yml:16"));
  EXPECT_EQ(t.sink.type, SinkType::kKafka);
  EXPECT_EQ(t.sink.kafka.topic, "output-tumbling-window-1");
  EXPECT_THAT(DescribePipeline(*r),
              HasSubstr("table:    agg_cities_count, a tumbling window polled every 10 s"));
}

TEST(PipelineConfigTest, WindowManagerErrorsNameTheKey) {
  auto with_tables = [](std::string_view tables) {
    return std::string(kMinimal) + std::string(tables);
  };
  EXPECT_THAT(
      ErrorOf(with_tables("tables:\n  sql:\n    - name: t\n      sql: CREATE TABLE t (a INT)\n"
                          "      manager:\n        sink: {type: console}\n")),
      HasSubstr("tables.sql[0].manager.tumbling_window: is required (the only manager type) but "
                "missing"));
  EXPECT_THAT(
      ErrorOf(with_tables("tables:\n  sql:\n    - name: t\n      sql: CREATE TABLE t (a INT)\n"
                          "      manager:\n        tumbling_window:\n"
                          "          collect_closed_windows_sql: SELECT * FROM t\n")),
      AllOf(HasSubstr("tumbling_window.delete_closed_windows_sql: is required but missing"),
            HasSubstr("tables.sql[0].manager.sink: is required but missing")));
  EXPECT_THAT(ErrorOf(with_tables(
                  "tables:\n  sql:\n    - name: t\n      sql: CREATE TABLE t (a INT)\n"
                  "      manager:\n        hopping_window: {}\n        sink: {type: console}\n")),
              HasSubstr("tables.sql[0].manager.hopping_window: unknown key"));
  EXPECT_THAT(ErrorOf(with_tables(
                  "tables:\n  sql:\n    - name: t\n      sql: CREATE TABLE t (a INT)\n"
                  "      manager:\n        tumbling_window: {collect_closed_windows_sql: a, "
                  "delete_closed_windows_sql: b, poll_interval_seconds: 0}\n"
                  "        sink: {type: console}\n")),
              HasSubstr("poll_interval_seconds: must be at least 1, got 0"));
  EXPECT_THAT(ErrorOf(with_tables("tables:\n  sql:\n    - sql: CREATE TABLE t (a INT)\n")),
              HasSubstr("tables.sql[0].name: is required but missing"));
  EXPECT_THAT(ErrorOf(with_tables("tables:\n  sql: {name: t}\n")),
              HasSubstr("tables.sql: must be a list of {name, sql, manager}, got a map"));
  // A table with no manager is a plain table created at start.
  auto r =
      Parse(with_tables("tables:\n  sql:\n    - name: t\n      sql: CREATE TABLE t (a INT)\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->tables.size(), 1u);
  EXPECT_FALSE(r->tables[0].tumbling_window.has_value());
}

TEST(PipelineConfigTest, SqlflowStructuredMemExample) {
  auto r = LoadPipelineFile(kDir + "/sqlflow.kafka.structured.mem.yml", MapEnv({}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->handler.type, HandlerType::kStructuredBatch);
  EXPECT_EQ(r->handler.table, "source");
  ASSERT_EQ(r->commands.size(), 1u);
  EXPECT_EQ(r->commands[0].name, "create source buffer table");
  EXPECT_THAT(r->commands[0].sql, HasSubstr("CREATE TABLE source"));
  EXPECT_THAT(r->commands[0].origin, HasSubstr("sqlflow.kafka.structured.mem.yml:6"));
  EXPECT_EQ(r->batch_size, 1);
  EXPECT_EQ(r->source.topics, std::vector<std::string>{"input-structured-mem"});
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
}

TEST(PipelineConfigTest, SqlflowDlqExampleWithLowerCasePolicy) {
  auto r = LoadPipelineFile(kDir + "/sqlflow.kafka.dlq.yml",
                            MapEnv({{"SQLFLOW_KAFKA_BROKERS", "kafka1:9092"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batch_size, 1000);
  EXPECT_EQ(r->on_error.policy, ErrorPolicy::kDlq);  // written 'dlq'
  ASSERT_TRUE(r->on_error.dlq.has_value());
  EXPECT_EQ(r->on_error.dlq->type, SinkType::kKafka);
  EXPECT_EQ(r->on_error.dlq->kafka.topic, "dlq-topic");
  EXPECT_EQ(r->on_error.dlq->kafka.brokers, std::vector<std::string>{"kafka1:9092"});
  EXPECT_EQ(r->source.brokers, std::vector<std::string>{"kafka1:9092"});
  EXPECT_EQ(r->source.topics, std::vector<std::string>{"input-simple-agg-mem"});
}

TEST(PipelineConfigTest, SqlflowPostgresSqlcommandExample) {
  auto r = LoadPipelineFile(kDir + "/sqlflow.kafka.postgres.sink.yml", MapEnv({}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "kafka-postgres-sink-example");
  EXPECT_EQ(r->description, "Inserts a kafka stream into a postgres table");
  ASSERT_EQ(r->commands.size(), 2u);
  EXPECT_THAT(r->commands[1].sql,
              HasSubstr("ATTACH 'postgresql://postgres:postgres@localhost:5432/testdb'"));
  EXPECT_EQ(r->sink.type, SinkType::kSqlCommand);
  EXPECT_THAT(r->sink.sqlcommand.sql, HasSubstr("FROM sqlflow_sink_batch"));
}

TEST(PipelineConfigTest, SqlflowSaslTlsExampleNeedsItsVariable) {
  std::string path = kDir + "/sqlflow.kafka.sasl-tls.yml";
  auto missing = LoadPipelineFile(path, MapEnv({}));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("SQLFLOW_ROOT_DIR is not set"));
  EXPECT_THAT(missing.status().message(), HasSubstr("sqlflow.kafka.sasl-tls.yml:16:"));
  // Each of the three uses is reported.
  EXPECT_THAT(missing.status().message(), HasSubstr("sqlflow.kafka.sasl-tls.yml:18:"));

  auto r = LoadPipelineFile(path, MapEnv({{"SQLFLOW_ROOT_DIR", "/src/sql-flow"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source.security_protocol, SecurityProtocol::kSaslSsl);
  ASSERT_TRUE(r->source.ssl.has_value());
  EXPECT_EQ(r->source.ssl->ca_location, "/src/sql-flow/dev/kafka/certs/ca-cert.pem");
  EXPECT_EQ(r->source.ssl->key_password, "testpass");
  EXPECT_EQ(r->source.ssl->endpoint_identification_algorithm, "none");
  ASSERT_TRUE(r->source.sasl.has_value());
  EXPECT_EQ(r->source.sasl->mechanism, "PLAIN");
  EXPECT_EQ(r->source.sasl->username, "user");
  auto props = KafkaClientProperties(r->source);
  EXPECT_EQ(props["security.protocol"], "sasl_ssl");
  EXPECT_EQ(props["sasl.mechanisms"], "PLAIN");
  EXPECT_EQ(props["ssl.key.location"], "/src/sql-flow/dev/kafka/certs/client-key.pem");
  EXPECT_EQ(props["bootstrap.servers"], "localhost:9092");
  // The description never shows secrets.
  std::string d = DescribePipeline(*r);
  EXPECT_THAT(d, Not(HasSubstr("bitnami")));
  EXPECT_THAT(d, Not(HasSubstr("testpass")));
}

TEST(PipelineConfigTest, SqlflowKafkaSinkExample) {
  auto r = LoadPipelineFile(kDir + "/sqlflow.basic.agg.mem.yml", MapEnv({}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sink.type, SinkType::kKafka);
  EXPECT_EQ(r->sink.kafka.topic, "output-simple-agg-mem");
  EXPECT_EQ(r->sink.kafka.brokers, std::vector<std::string>{"localhost:9092"});
}

TEST(PipelineConfigTest, FullSluiceExample) {
  auto r = LoadPipelineFile(kDir + "/sluice.full.yml", MapEnv({{"BATCH_SIZE", "2000"}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PipelineConfig& c = *r;
  EXPECT_EQ(c.batch_size, 2000);
  EXPECT_EQ(c.flush_interval_seconds, 5);
  EXPECT_EQ(c.source.auto_offset_reset, AutoOffsetReset::kLatest);
  EXPECT_EQ(c.source.topics, (std::vector<std::string>{"events", "events-replay"}));
  EXPECT_EQ(c.source.fetch.max_bytes, 8388608);
  EXPECT_EQ(c.source.fetch.max_partition_bytes, 2097152);
  EXPECT_EQ(c.source.fetch.prefetch, 3);
  EXPECT_EQ(c.source.properties.at("fetch.wait.max.ms"), "50");
  EXPECT_EQ(KafkaClientProperties(c.source).at("client.id"), "city-revenue");
  EXPECT_EQ(c.sink.type, SinkType::kPostgres);
  EXPECT_EQ(c.sink.postgres.dsn, "postgresql://sluice@127.0.0.1:5432/sluice");
  EXPECT_EQ(c.sink.postgres.table, "public.city_revenue");
  EXPECT_EQ(c.sink.postgres.mode, PostgresMode::kUpsert);
  EXPECT_EQ(c.sink.postgres.key, std::vector<std::string>{"city"});
  EXPECT_EQ(c.on_error.policy, ErrorPolicy::kDlq);  // written 'Dlq'
  ASSERT_TRUE(c.on_error.dlq.has_value());
  EXPECT_EQ(c.on_error.dlq->type, SinkType::kSqlCommand);
  ASSERT_EQ(c.on_error.dlq->sqlcommand.substitutions.size(), 1u);
  EXPECT_EQ(c.on_error.dlq->sqlcommand.substitutions[0].var, "$uuid");
  EXPECT_EQ(c.on_error.dlq->sqlcommand.substitutions[0].type, SubstitutionType::kUuid4);
  EXPECT_EQ(c.duckdb.memory_limit_bytes, 512 << 20);
  EXPECT_EQ(c.duckdb.threads, 2);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings[0];

  std::string d = DescribePipeline(c);
  EXPECT_THAT(d, HasSubstr("pipeline city-revenue: Revenue per city"));
  EXPECT_THAT(d, HasSubstr("handlers.StructuredBatch into table events"));
  EXPECT_THAT(d, HasSubstr("postgres table public.city_revenue, upsert on (city)"));
  EXPECT_THAT(d, HasSubstr("DLQ to sqlcommand"));
  EXPECT_THAT(d, HasSubstr("2000 messages or 5 s"));
  EXPECT_THAT(d, HasSubstr("memory_limit 512 MiB, 2 threads"));
  EXPECT_THAT(d, HasSubstr("read-ahead 3 fetches of 8 MiB"));
  EXPECT_THAT(d, Not(HasSubstr("postgresql://")));
}

// ---- pipeline.window and pipeline.state (sluice's declarative windows, docs/design/0007)

// kMinimal with its sink replaced by `window:` (line 12); `keys` start at line 13.
std::string WithWindow(std::string_view keys) {
  return Replace(kMinimal, "  sink:\n    type: console\n", "  window:\n" + std::string(keys));
}

// A tumbling window with its required keys only: type at line 13, time_column 14, size 15,
// sink 16.
constexpr std::string_view kTumblingKeys =
    "    type: tumbling\n"
    "    time_column: ts\n"
    "    size: 1m\n"
    "    sink:\n"
    "      type: console\n";

// The same as a hopping window: slide at line 16, sink 17.
constexpr std::string_view kHoppingKeys =
    "    type: hopping\n"
    "    time_column: ts\n"
    "    size: 5m\n"
    "    slide: 1m\n"
    "    sink: {type: console}\n";

// And a session window: gap at line 15, sink 16.
constexpr std::string_view kSessionKeys =
    "    type: session\n"
    "    time_column: ts\n"
    "    gap: 30s\n"
    "    sink: {type: console}\n";

// kTumblingKeys with `line` added after size, at line 16.
std::string TumblingWith(std::string_view line) {
  return WithWindow(Replace(kTumblingKeys, "    size: 1m\n", "    size: 1m\n" + std::string(line)));
}

TEST(PipelineConfigTest, TumblingWindowWithEveryKey) {
  auto r = Parse(
      WithWindow("    type: tumbling\n"
                 "    time_column: ts\n"
                 "    size: 1m\n"
                 "    grace: 5s\n"
                 "    allowed_lateness: 1h\n"
                 "    idle_close: 30s\n"
                 "    max_future: 1d\n"
                 "    emit_sql: SELECT city, count(*) AS n, window_start FROM closed GROUP BY ALL\n"
                 "    sink:\n"
                 "      type: kafka\n"
                 "      kafka: {brokers: [localhost:9092], topic: counts}\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->window.has_value());
  const WindowConfig& w = *r->window;
  EXPECT_EQ(w.type, WindowType::kTumbling);
  EXPECT_EQ(w.time_column, "ts");
  EXPECT_EQ(w.size_us, 60'000'000);
  EXPECT_EQ(w.slide_us, 0);
  EXPECT_EQ(w.gap_us, 0);
  EXPECT_TRUE(w.key.empty());
  EXPECT_EQ(w.grace_us, 5'000'000);
  EXPECT_EQ(w.allowed_lateness_us, 3'600'000'000);
  EXPECT_EQ(w.idle_close_us, 30'000'000);
  EXPECT_EQ(w.max_future_us, 86'400'000'000);
  EXPECT_EQ(w.emit_sql, "SELECT city, count(*) AS n, window_start FROM closed GROUP BY ALL");
  EXPECT_EQ(w.emit_origin, "p.yml:20");
  EXPECT_EQ(w.sink.type, SinkType::kKafka);
  EXPECT_EQ(w.sink.kafka.topic, "counts");
  EXPECT_EQ(w.sink.kafka.brokers, std::vector<std::string>{"localhost:9092"});
  EXPECT_FALSE(r->state.has_value());
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
  EXPECT_EQ(Name(w.type), "tumbling");
}

TEST(PipelineConfigTest, WindowDefaults) {
  auto r = Parse(WithWindow(kTumblingKeys));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->window.has_value());
  const WindowConfig& w = *r->window;
  EXPECT_EQ(w.grace_us, 0);
  EXPECT_EQ(w.allowed_lateness_us, 0);
  EXPECT_EQ(w.idle_close_us, 60'000'000);   // 60s
  EXPECT_EQ(w.max_future_us, 600'000'000);  // 10m
  EXPECT_EQ(w.emit_sql, "SELECT * FROM closed");
  EXPECT_EQ(w.emit_origin, "p.yml:13 (pipeline.window.emit_sql's default)");
  EXPECT_EQ(w.sink.type, SinkType::kConsole);
  // A key written with no value takes its default, as everywhere else.
  auto empty = Parse(TumblingWith("    idle_close:\n    emit_sql:\n"));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->window->idle_close_us, 60'000'000);
  EXPECT_EQ(empty->window->emit_sql, "SELECT * FROM closed");
  // Without a window there is none, and the pipeline's sink is used.
  auto plain = Parse(kMinimal);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->window.has_value());
  EXPECT_FALSE(plain->state.has_value());
}

TEST(PipelineConfigTest, HoppingWindowWithEveryKey) {
  auto r =
      Parse(WithWindow("    type: hopping\n"
                       "    time_column: event_time\n"
                       "    size: 5m\n"
                       "    slide: 1m\n"
                       "    grace: 500ms\n"
                       "    allowed_lateness: 0s\n"
                       "    idle_close: 2m\n"
                       "    max_future: 0ms\n"
                       "    emit_sql: |\n"
                       "      SELECT window_start, window_end, city, sum(n) AS n\n"
                       "      FROM closed GROUP BY ALL\n"
                       "    sink:\n"
                       "      type: postgres\n"
                       "      postgres: {dsn: x, table: counts, mode: upsert, key: [window_start, "
                       "window_end, city]}\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->window.has_value());
  const WindowConfig& w = *r->window;
  EXPECT_EQ(w.type, WindowType::kHopping);
  EXPECT_EQ(w.time_column, "event_time");
  EXPECT_EQ(w.size_us, 300'000'000);
  EXPECT_EQ(w.slide_us, 60'000'000);
  EXPECT_EQ(w.gap_us, 0);
  EXPECT_EQ(w.grace_us, 500'000);
  EXPECT_EQ(w.allowed_lateness_us, 0);
  EXPECT_EQ(w.idle_close_us, 120'000'000);
  EXPECT_EQ(w.max_future_us, 0);
  EXPECT_EQ(w.emit_sql,
            "SELECT window_start, window_end, city, sum(n) AS n\nFROM closed GROUP BY ALL\n");
  EXPECT_EQ(w.emit_origin, "p.yml:21");
  EXPECT_EQ(w.sink.type, SinkType::kPostgres);
  EXPECT_EQ(w.sink.postgres.key, (std::vector<std::string>{"window_start", "window_end", "city"}));
  // A slide equal to the size is one window per row: a tumbling window, accepted.
  auto same = Parse(WithWindow(Replace(kHoppingKeys, "slide: 1m", "slide: 5m")));
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->window->slide_us, same->window->size_us);
}

TEST(PipelineConfigTest, SessionWindowWithEveryKey) {
  auto r = Parse(WithWindow(
      "    type: Session\n"
      "    time_column: ts\n"
      "    gap: 30s\n"
      "    key: [user_id, device]\n"
      "    grace: 1s\n"
      "    allowed_lateness: 10m\n"
      "    idle_close: 1h\n"
      "    max_future: 10m\n"
      "    emit_sql: SELECT user_id, window_start, window_end, count(*) AS clicks FROM closed "
      "GROUP BY ALL\n"
      "    sink:\n"
      "      type: sqlcommand\n"
      "      sqlcommand: {sql: INSERT INTO sessions SELECT * FROM sqlflow_sink_batch}\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->window.has_value());
  const WindowConfig& w = *r->window;
  EXPECT_EQ(w.type, WindowType::kSession);  // written `Session`
  EXPECT_EQ(w.time_column, "ts");
  EXPECT_EQ(w.size_us, 0);
  EXPECT_EQ(w.slide_us, 0);
  EXPECT_EQ(w.gap_us, 30'000'000);
  EXPECT_EQ(w.key, (std::vector<std::string>{"user_id", "device"}));
  EXPECT_EQ(w.grace_us, 1'000'000);
  EXPECT_EQ(w.allowed_lateness_us, 600'000'000);
  EXPECT_EQ(w.idle_close_us, 3'600'000'000);
  EXPECT_EQ(w.max_future_us, 600'000'000);
  EXPECT_THAT(w.emit_sql, HasSubstr("count(*) AS clicks FROM closed"));
  EXPECT_EQ(w.emit_origin, "p.yml:21");
  EXPECT_EQ(w.sink.type, SinkType::kSqlCommand);
  EXPECT_THAT(w.sink.sqlcommand.sql, HasSubstr("INSERT INTO sessions"));
  // `key` is optional: without it, sessions are over all rows.
  auto keyless = Parse(WithWindow(kSessionKeys));
  ASSERT_TRUE(keyless.ok()) << keyless.status().ToString();
  EXPECT_TRUE(keyless->window->key.empty());
}

TEST(PipelineConfigTest, DurationUnits) {
  const std::pair<std::string, int64_t> cases[] = {
      {"0s", 0},
      {"1ms", 1'000},
      {"500ms", 500'000},
      {"1500ms", 1'500'000},
      {"30s", 30'000'000},
      {"5m", 300'000'000},
      {"90m", 5'400'000'000},
      {"1h", 3'600'000'000},
      {"1d", 86'400'000'000},
      {"366d", 366 * int64_t{86'400'000'000}},
      {"\"2s\"", 2'000'000},
  };
  for (const auto& [text, us] : cases) {
    auto r = Parse(TumblingWith("    grace: " + text + "\n"));
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(r->window->grace_us, us) << text;
  }
}

TEST(PipelineConfigTest, BadDurationsNameKeyAndLine) {
  auto grace = [](std::string_view value) {
    return ErrorOf(TumblingWith("    grace: " + std::string(value) + "\n"));
  };
  EXPECT_THAT(grace("30"),
              HasSubstr("p.yml:16: pipeline.window.grace: must be a duration such as 500ms, 30s, "
                        "5m, 1h or 1d, got '30' (give a unit)"));
  EXPECT_THAT(grace("5w"), HasSubstr("p.yml:16: pipeline.window.grace: must be a duration such "
                                     "as 500ms, 30s, 5m, 1h or 1d, got '5w'"));
  EXPECT_THAT(grace("-5s"),
              HasSubstr("p.yml:16: pipeline.window.grace: must be a duration such as 500ms, 30s, "
                        "5m, 1h or 1d, got '-5s'"));
  EXPECT_THAT(grace("1.5s"), HasSubstr("p.yml:16: pipeline.window.grace: must be a duration"));
  EXPECT_THAT(grace("s"), HasSubstr("p.yml:16: pipeline.window.grace: must be a duration"));
  EXPECT_THAT(grace("''"),
              HasSubstr("p.yml:16: pipeline.window.grace: must be a duration such as 500ms, 30s, "
                        "5m, 1h or 1d, got ''"));
  EXPECT_THAT(grace("{s: 5}"),
              HasSubstr("p.yml:16: pipeline.window.grace: must be a single value, got a map"));
  EXPECT_THAT(grace("[5s]"),
              HasSubstr("p.yml:16: pipeline.window.grace: must be a single value, got a list"));
  // Out of range: past the bound, and past what 64 bits hold.
  EXPECT_THAT(grace("367d"), AllOf(HasSubstr("p.yml:16: pipeline.window.grace: must be at most "),
                                   HasSubstr("got '367d'")));
  EXPECT_THAT(grace("99999999999999999999ms"),
              HasSubstr("p.yml:16: pipeline.window.grace: must be a duration"));
  EXPECT_THAT(grace("106751991167d"),
              HasSubstr("p.yml:16: pipeline.window.grace: must be at most"));
  EXPECT_THAT(ErrorOf(TumblingWith("    max_future: 3661d\n")),
              HasSubstr("p.yml:16: pipeline.window.max_future: must be at most"));
  // Lower bounds: a window, a gap, a slide and idle_close are at least 1ms.
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "size: 1m", "size: 0s"))),
              HasSubstr("p.yml:15: pipeline.window.size: must be at least 1ms, got '0s'"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kSessionKeys, "gap: 30s", "gap: 0ms"))),
              HasSubstr("p.yml:15: pipeline.window.gap: must be at least 1ms, got '0ms'"));
  EXPECT_THAT(ErrorOf(TumblingWith("    idle_close: 0s\n")),
              HasSubstr("p.yml:16: pipeline.window.idle_close: must be at least 1ms, got '0s'"));
  // Every duration key is read the same way.
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "size: 1m", "size: 10"))),
              HasSubstr("p.yml:15: pipeline.window.size: must be a duration such as 500ms, 30s, "
                        "5m, 1h or 1d, got '10' (give a unit)"));
  for (std::string key : {"allowed_lateness", "idle_close", "max_future"}) {
    EXPECT_THAT(ErrorOf(TumblingWith("    " + key + ": 10\n")),
                HasSubstr("p.yml:16: pipeline.window." + key +
                          ": must be a duration such as 500ms, 30s, 5m, 1h or 1d, got '10' (give "
                          "a unit)"));
  }
}

TEST(PipelineConfigTest, HoppingSlideMustDivideSize) {
  auto hopping = [](std::string_view from, std::string_view to) {
    return WithWindow(Replace(kHoppingKeys, from, to));
  };
  EXPECT_THAT(ErrorOf(hopping("slide: 1m", "slide: 2m")),
              HasSubstr("p.yml:16: pipeline.window.slide: must divide size"));
  EXPECT_THAT(ErrorOf(hopping("slide: 1m", "slide: 10m")),
              HasSubstr("p.yml:16: pipeline.window.slide: must not be longer than size"));
  EXPECT_THAT(ErrorOf(hopping("size: 5m", "size: 1d")),
              HasSubstr("p.yml:16: pipeline.window.slide: makes more than 1000 windows per row"));
  EXPECT_THAT(ErrorOf(hopping("    slide: 1m\n", "")),
              HasSubstr("p.yml:13: pipeline.window.slide: is required for a hopping window"));
  EXPECT_THAT(ErrorOf(hopping("    slide: 1m\n", "    slide:\n")),
              HasSubstr("p.yml:16: pipeline.window.slide: is empty; it is required for a hopping "
                        "window"));
  EXPECT_THAT(ErrorOf(hopping("    size: 5m\n", "")),
              HasSubstr("p.yml:13: pipeline.window.size: is required for a hopping window"));
  // Exactly 1000 windows per row is the limit, and allowed.
  auto r = Parse(hopping("size: 5m\n    slide: 1m", "size: 1000s\n    slide: 1s"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->window->size_us / r->window->slide_us, 1000);
}

TEST(PipelineConfigTest, WindowKeysOfAnotherTypeAreErrors) {
  EXPECT_THAT(ErrorOf(TumblingWith("    slide: 30s\n")),
              HasSubstr("p.yml:16: pipeline.window.slide: applies to hopping windows only; this "
                        "one is tumbling"));
  EXPECT_THAT(ErrorOf(TumblingWith("    gap: 30s\n")),
              HasSubstr("p.yml:16: pipeline.window.gap: applies to session windows only; this one "
                        "is tumbling"));
  EXPECT_THAT(ErrorOf(TumblingWith("    key: [user_id]\n")),
              HasSubstr("p.yml:16: pipeline.window.key: applies to session windows only; this one "
                        "is tumbling"));
  EXPECT_THAT(ErrorOf(WithWindow(
                  Replace(kHoppingKeys, "    slide: 1m\n", "    slide: 1m\n    key: [user_id]\n"))),
              HasSubstr("p.yml:17: pipeline.window.key: applies to session windows only; this one "
                        "is hopping"));
  EXPECT_THAT(
      ErrorOf(WithWindow(Replace(kHoppingKeys, "    slide: 1m\n", "    slide: 1m\n    gap: 1m\n"))),
      HasSubstr("p.yml:17: pipeline.window.gap: applies to session windows only; this one "
                "is hopping"));
  EXPECT_THAT(
      ErrorOf(WithWindow(Replace(kSessionKeys, "    gap: 30s\n", "    gap: 30s\n    size: 1m\n"))),
      HasSubstr("p.yml:16: pipeline.window.size: applies to tumbling and hopping windows "
                "only; this one is session"));
  EXPECT_THAT(
      ErrorOf(WithWindow(Replace(kSessionKeys, "    gap: 30s\n", "    gap: 30s\n    slide: 1m\n"))),
      HasSubstr("p.yml:16: pipeline.window.slide: applies to hopping windows only; this "
                "one is session"));
  // What each type needs.
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "    size: 1m\n", ""))),
              HasSubstr("p.yml:13: pipeline.window.size: is required for a tumbling window"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "    size: 1m\n", "    size:\n"))),
              HasSubstr("p.yml:15: pipeline.window.size: is empty; it is required for a tumbling "
                        "window"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kSessionKeys, "    gap: 30s\n", ""))),
              HasSubstr("p.yml:13: pipeline.window.gap: is required for a session window"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kSessionKeys, "    gap: 30s\n", "    gap:\n"))),
              HasSubstr("p.yml:15: pipeline.window.gap: is empty; it is required for a session "
                        "window"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kSessionKeys, "    gap: 30s\n", "    gap: ''\n"))),
              HasSubstr("p.yml:15: pipeline.window.gap: must be a duration"));
  EXPECT_THAT(ErrorOf(WithWindow(
                  Replace(kSessionKeys, "    gap: 30s\n", "    gap: 30s\n    key: user_id\n"))),
              HasSubstr("p.yml:16: pipeline.window.key: must be a list, e.g. [user_id]; got a "
                        "scalar"));
}

TEST(PipelineConfigTest, WindowRequiredKeysAndShapes) {
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "    time_column: ts\n", ""))),
              HasSubstr("p.yml:13: pipeline.window.time_column: is required but missing"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "time_column: ts", "time_column: ''"))),
              HasSubstr("p.yml:14: pipeline.window.time_column: is empty; it is required"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "    type: tumbling\n", ""))),
              HasSubstr("pipeline.window.type: is required but missing"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "type: tumbling", "type: sliding"))),
              HasSubstr("p.yml:13: pipeline.window.type: must be one of tumbling, hopping, "
                        "session; got 'sliding'"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "    sink:\n      type: console\n", ""))),
              HasSubstr("p.yml:13: pipeline.window.sink: is required but missing: where closed "
                        "windows go"));
  EXPECT_THAT(ErrorOf(WithWindow(
                  Replace(kTumblingKeys, "    sink:\n      type: console\n", "    sink:\n"))),
              HasSubstr("p.yml:16: pipeline.window.sink: is empty; a sink needs at least `type`"));
  EXPECT_THAT(ErrorOf(WithWindow(Replace(kTumblingKeys, "type: console", "type: kafka"))),
              HasSubstr("pipeline.window.sink.kafka: is required for type kafka but missing"));
  EXPECT_THAT(ErrorOf(TumblingWith("    emit_sql: ''\n")),
              HasSubstr("p.yml:16: pipeline.window.emit_sql: is empty; leave it out to emit "
                        "SELECT * FROM closed"));
  EXPECT_THAT(ErrorOf(TumblingWith("    emit_sql: [SELECT 1]\n")),
              HasSubstr("p.yml:16: pipeline.window.emit_sql: must be a single value, got a list"));
  EXPECT_THAT(ErrorOf(WithWindow("")),
              HasSubstr("p.yml:12: pipeline.window: is empty; it needs type, time_column, size "
                        "(or gap) and sink"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "  sink:\n    type: console\n", "  window: tumbling\n")),
              HasSubstr("p.yml:12: pipeline.window: must be a map of keys, got a scalar"));
}

TEST(PipelineConfigTest, WindowAndPipelineSinkTogetherIsAnError) {
  std::string err =
      ErrorOf(std::string(kMinimal) +
              "  window: {type: tumbling, time_column: ts, size: 1m, sink: {type: console}}\n");
  EXPECT_THAT(err, HasSubstr("p.yml:13: pipeline.sink: is not used with pipeline.window: the "
                             "handler's rows go into the window, and closed windows go to "
                             "pipeline.window.sink; remove one of them"));
}

TEST(PipelineConfigTest, PipelineWithoutSinkOrWindowIsAnError) {
  std::string err = ErrorOf(Replace(kMinimal, "  sink:\n    type: console\n", ""));
  EXPECT_THAT(err, HasSubstr("p.yml:2: pipeline.sink: is required but missing"));
  // A window whose sink is missing names the window's sink, not the pipeline's.
  err = ErrorOf(WithWindow(Replace(kTumblingKeys, "    sink:\n      type: console\n", "")));
  EXPECT_THAT(err, HasSubstr("pipeline.window.sink: is required but missing"));
  EXPECT_THAT(err, Not(HasSubstr("pipeline.sink:")));
}

TEST(PipelineConfigTest, StateWithPathIsParsed) {
  auto r = Parse(std::string(kMinimal) + "  state:\n    path: /var/lib/sluice/counts.duckdb\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->state.has_value());
  EXPECT_EQ(r->state->path, "/var/lib/sluice/counts.duckdb");
  EXPECT_FALSE(r->window.has_value());
  // With a window, in either order.
  auto windowed = Parse(
      Replace(WithWindow(kTumblingKeys), "  window:\n", "  state: {path: state.db}\n  window:\n"));
  ASSERT_TRUE(windowed.ok()) << windowed.status().ToString();
  ASSERT_TRUE(windowed->state.has_value());
  EXPECT_EQ(windowed->state->path, "state.db");
  EXPECT_TRUE(windowed->window.has_value());
  EXPECT_TRUE(windowed->warnings.empty()) << windowed->warnings[0];
}

TEST(PipelineConfigTest, EmptyStateIsAnError) {
  auto with_state = [](std::string_view state) {
    return ErrorOf(std::string(kMinimal) + "  state:" + std::string(state) + "\n");
  };
  EXPECT_THAT(with_state(""),
              HasSubstr("p.yml:14: pipeline.state: is empty; it needs path (the state's "
                        "database file)"));
  EXPECT_THAT(with_state(" ~"), HasSubstr("p.yml:14: pipeline.state: is empty; it needs path"));
  EXPECT_THAT(with_state(" {}"),
              HasSubstr("p.yml:14: pipeline.state.path: is required but missing"));
  EXPECT_THAT(with_state(" {path: ''}"),
              HasSubstr("p.yml:14: pipeline.state.path: is empty; it is required"));
  EXPECT_THAT(with_state("\n    path:"),
              HasSubstr("p.yml:15: pipeline.state.path: is empty; it is required"));
  EXPECT_THAT(with_state(" s.db"),
              HasSubstr("p.yml:14: pipeline.state: must be a map of keys, got a scalar"));
  EXPECT_THAT(with_state(" {path: [a, b]}"),
              HasSubstr("p.yml:14: pipeline.state.path: must be a single value, got a list"));
}

TEST(PipelineConfigTest, UnknownWindowAndStateKeysSuggestTheNearest) {
  EXPECT_THAT(ErrorOf(TumblingWith("    grase: 5s\n")),
              HasSubstr("p.yml:16: pipeline.window.grase: unknown key (did you mean `grace`?); "
                        "known here: type, time_column, size, slide, gap, key, grace, "
                        "allowed_lateness, idle_close, max_future, emit_sql, sink"));
  std::string err =
      ErrorOf(WithWindow(Replace(kTumblingKeys, "time_column: ts", "time_colum: ts")));
  EXPECT_THAT(err, HasSubstr("p.yml:14: pipeline.window.time_colum: unknown key (did you mean "
                             "`time_column`?)"));
  EXPECT_THAT(err, HasSubstr("pipeline.window.time_column: is required but missing"));
  EXPECT_THAT(ErrorOf(TumblingWith("    watermark: 5s\n")),
              HasSubstr("p.yml:16: pipeline.window.watermark: unknown key; known here: type"));
  err = ErrorOf(std::string(kMinimal) + "  state:\n    pth: s.db\n");
  EXPECT_THAT(err, HasSubstr("p.yml:15: pipeline.state.pth: unknown key (did you mean `path`?); "
                             "known here: path"));
  EXPECT_THAT(err, HasSubstr("pipeline.state.path: is required but missing"));
  // `windows` under pipeline is a near miss too.
  EXPECT_THAT(ErrorOf(Replace(WithWindow(kTumblingKeys), "  window:\n", "  windows:\n")),
              HasSubstr("p.yml:12: pipeline.windows: unknown key (did you mean `window`?)"));
}

TEST(PipelineConfigTest, DescribeShowsWindowAndState) {
  auto r = Parse(Replace(
      WithWindow("    type: tumbling\n"
                 "    time_column: ts\n"
                 "    size: 1m\n"
                 "    grace: 500ms\n"
                 "    sink: {type: kafka, kafka: {brokers: [localhost:9092], topic: counts}}\n"),
      "  window:\n", "  state: {path: /data/counts.duckdb}\n  window:\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string d = DescribePipeline(*r);
  EXPECT_THAT(d, HasSubstr("window:   tumbling on ts, size 60s; grace 500ms, allowed lateness 0s, "
                           "idle after 60s, future cap 600s"));
  EXPECT_THAT(d, HasSubstr("sink:     kafka topic counts on localhost:9092 (closed windows)"));
  EXPECT_THAT(d, HasSubstr("state:    /data/counts.duckdb"));

  auto hopping = Parse(WithWindow(kHoppingKeys));
  ASSERT_TRUE(hopping.ok()) << hopping.status().ToString();
  EXPECT_THAT(DescribePipeline(*hopping),
              HasSubstr("window:   hopping on ts, size 300s sliding by 60s;"));
  EXPECT_THAT(DescribePipeline(*hopping), Not(HasSubstr("state:")));

  auto session = Parse(WithWindow(
      Replace(kSessionKeys, "    gap: 30s\n", "    gap: 30s\n    key: [user_id, device]\n")));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_THAT(DescribePipeline(*session),
              HasSubstr("window:   session on ts, gap 30s per user_id, device;"));

  std::string plain = DescribePipeline(*Parse(kMinimal));
  EXPECT_THAT(plain, Not(HasSubstr("window:")));
  EXPECT_THAT(plain, HasSubstr("sink:     console\n"));
}

// The windowed example of docs/pipelines.md.
TEST(PipelineConfigTest, SluiceWindowExample) {
  auto r = LoadPipelineFile(kDir + "/sluice.window.yml", MapEnv({}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->window.has_value());
  EXPECT_EQ(r->window->type, WindowType::kTumbling);
  EXPECT_EQ(r->window->time_column, "timestamp");
  EXPECT_EQ(r->window->size_us, 60'000'000);
  EXPECT_EQ(r->window->grace_us, 5'000'000);
  EXPECT_THAT(r->window->emit_sql, HasSubstr("sum(n) AS events"));
  EXPECT_THAT(r->window->emit_origin, HasSubstr("sluice.window.yml:37"));
  EXPECT_EQ(r->window->sink.type, SinkType::kConsole);
  ASSERT_TRUE(r->state.has_value());
  EXPECT_EQ(r->state->path, "/var/lib/sluice/city-counts.duckdb");
  EXPECT_EQ(r->handler.table, "events");
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];
}

// ---- substitution

TEST(PipelineConfigTest, SubstitutionForms) {
  EnvLookup env = MapEnv({{"SET", "value"}, {"EMPTY", ""}});
  auto render = [&](std::string_view text) {
    auto r = SubstituteTemplate(text, "t", env);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::string();
  };
  EXPECT_EQ(render("a: {{ SET }}"), "a: value");
  EXPECT_EQ(render("a: {{SET}}"), "a: value");
  EXPECT_EQ(render("a: {{ SET|default('x') }}"), "a: value");
  EXPECT_EQ(render("a: {{ UNSET|default('x') }}"), "a: x");
  EXPECT_EQ(render("a: {{ UNSET | default(\"x y\") }}"), "a: x y");
  EXPECT_EQ(render("a: {{ UNSET|default(1000) }}"), "a: 1000");
  EXPECT_EQ(render("a: {{ UNSET|d('short') }}"), "a: short");
  EXPECT_EQ(render("a: {{ UNSET|default(true) }}"), "a: True");
  EXPECT_EQ(render("a: {{ UNSET|default('it\\'s') }}"), "a: it's");
  // Jinja's default() keeps a set-but-empty value unless asked with a second argument.
  EXPECT_EQ(render("a: [{{ EMPTY|default('x') }}]"), "a: []");
  EXPECT_EQ(render("a: {{ EMPTY|default('x', true) }}"), "a: x");
  EXPECT_EQ(render("a: {{ EMPTY|default('x', boolean=true) }}"), "a: x");
  // Comments go; whitespace control trims.
  EXPECT_EQ(render("a: 1 {# note\n #}\nb: 2"), "a: 1 \nb: 2");
  EXPECT_EQ(render("a: [ {{- SET -}} ]"), "a: [value]");
  // No braces, no change.
  EXPECT_EQ(render("sql: SELECT '{' || x || '}'"), "sql: SELECT '{' || x || '}'");
}

TEST(PipelineConfigTest, UnsetVariableWithoutDefaultNamesVariableAndLine) {
  std::string text = Replace(kMinimal, "group_id: g", "group_id: {{ GROUP }}");
  std::string err = ErrorOf(text);
  EXPECT_THAT(err, HasSubstr("p.yml:6:"));
  EXPECT_THAT(err, HasSubstr("environment variable GROUP is not set"));
  EXPECT_THAT(err, HasSubstr("{{ GROUP|default('value') }}"));
  ASSERT_TRUE(Parse(text, {{"GROUP", "from-env"}}).ok());
  EXPECT_EQ(Parse(text, {{"GROUP", "from-env"}})->source.group_id, "from-env");
}

TEST(PipelineConfigTest, UnsupportedTemplateSyntaxIsAnError) {
  EXPECT_THAT(ErrorOf(std::string("{% if X %}\n") + std::string(kMinimal)),
              HasSubstr("p.yml:1: template statements ({% ... %}) are not supported"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "group_id: g", "group_id: {{ G|upper }}")),
              HasSubstr("p.yml:6: {{ G|upper }}: filter 'upper' is not supported"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "group_id: g", "group_id: {{ G")),
              HasSubstr("p.yml:6: '{{' is never closed"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "group_id: g", "group_id: {{ G|default(other) }}")),
              HasSubstr("quote it to use it as text"));
}

TEST(PipelineConfigTest, MultiLineValueKeepsLaterLineNumbers) {
  // A value with newlines, then an error further down: the line is the file's.
  std::string text = "commands: {{ CMDS }}\n" + Replace(kMinimal, "group_id: g", "group_id: [g]");
  std::string err = ErrorOf(text, {{"CMDS", "\n  - name: a\n    sql: SELECT 1\n"}});
  EXPECT_THAT(err, HasSubstr("p.yml:7: pipeline.source.kafka.group_id: must be a single value"));
}

// ---- malformed files

TEST(PipelineConfigTest, BadYamlNamesLineAndColumn) {
  std::string err = ErrorOf(Replace(kMinimal, "topics: [in]", "topics: [in"));
  EXPECT_THAT(err, HasSubstr("p.yml:"));
  EXPECT_THAT(err, HasSubstr("not valid YAML"));
  err = ErrorOf("pipeline:\n  a: b\n   c: d\n");
  EXPECT_THAT(err, HasSubstr("p.yml:3:"));
}

TEST(PipelineConfigTest, UnknownKeyNamesKeyAndLine) {
  std::string err =
      ErrorOf(Replace(kMinimal, "      group_id: g", "      group_id: g\n      groupid: h"));
  EXPECT_THAT(err, HasSubstr("p.yml:7: pipeline.source.kafka.groupid: unknown key (did you mean "
                             "`group_id`?)"));
  err = ErrorOf(std::string(kMinimal) + "extra: 1\n");
  EXPECT_THAT(err, HasSubstr("p.yml:14: extra: unknown key; known here: pipeline, commands"));
}

TEST(PipelineConfigTest, AllErrorsAreReportedNotOnlyTheFirst) {
  std::string text = Replace(kMinimal, "group_id: g", "group_id: [g]");
  text = Replace(text, "type: console", "type: consol");
  text = Replace(text, "handlers.InferredMemBatch", "handlers.Nope");
  std::string err = ErrorOf(text);
  EXPECT_THAT(err, HasSubstr("p.yml:6: pipeline.source.kafka.group_id"));
  EXPECT_THAT(err, HasSubstr("p.yml:10: pipeline.handler.type: must be one of "
                             "handlers.StructuredBatch, handlers.InferredMemBatch, "
                             "handlers.InferredDiskBatch; got 'handlers.Nope'"));
  EXPECT_THAT(err, HasSubstr("p.yml:13: pipeline.sink.type: must be one of console, noop, kafka, "
                             "sqlcommand, postgres, iceberg; got 'consol'"));
}

TEST(PipelineConfigTest, WrongTypes) {
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "brokers: [localhost:9092]", "brokers: localhost:9092")),
              HasSubstr("p.yml:5: pipeline.source.kafka.brokers: must be a list, e.g. "
                        "[localhost:9092]; got a scalar"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "topics: [in]", "topics: {a: b}")),
              HasSubstr("p.yml:8: pipeline.source.kafka.topics: must be a list"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "topics: [in]", "topics: [[in]]")),
              HasSubstr("pipeline.source.kafka.topics[0]: must be a single value, got a list"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "  sink:\n    type: console", "  sink: console")),
              HasSubstr("p.yml:12: pipeline.sink: must be a map of keys, got a scalar"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  batch_size: lots\n"),
              HasSubstr("p.yml:14: pipeline.batch_size: must be a whole number, got 'lots'"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  batch_size: 1.5\n"),
              HasSubstr("pipeline.batch_size: must be a whole number, got '1.5'"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  batch_size: -5\n"),
              HasSubstr("pipeline.batch_size: must be at least 1, got -5"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  batch_size: 99999999999999999999\n"),
              HasSubstr("pipeline.batch_size: must be a whole number between 1 and 1000000"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  flush_interval_seconds: 0\n"),
              HasSubstr("pipeline.flush_interval_seconds: must be at least 1, got 0"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "commands: {name: a, sql: b}\n"),
              HasSubstr("p.yml:14: commands: must be a list of {name, sql}, got a map"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  duckdb: {memory_limit: lots}\n"),
              HasSubstr("pipeline.duckdb.memory_limit: must be a size such as 512MiB"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  duckdb: {threads: 0}\n"),
              HasSubstr("pipeline.duckdb.threads: must be at least 1"));
  // Quoted integers are accepted.
  auto r = Parse(std::string(kMinimal) + "  batch_size: \"250\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->batch_size, 250);
}

TEST(PipelineConfigTest, MissingRequiredKeys) {
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      group_id: g\n", "")),
              HasSubstr("p.yml:5: pipeline.source.kafka.group_id: is required but missing"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      group_id: g\n", "      group_id:\n")),
              HasSubstr("p.yml:6: pipeline.source.kafka.group_id: is empty; it is required"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "  sink:\n    type: console\n", "")),
              HasSubstr("pipeline.sink: is required but missing"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    sql: SELECT * FROM batch\n", "")),
              HasSubstr("pipeline.handler.sql: is required but missing"));
  EXPECT_THAT(ErrorOf("commands: []\n"),
              HasSubstr("pipeline: is required but missing: a pipeline file needs a `pipeline` "
                        "section"));
  EXPECT_THAT(ErrorOf("pipeline:\n"), HasSubstr("p.yml:1: pipeline: is empty"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "type: console", "type: kafka")),
              HasSubstr("pipeline.sink.kafka: is required for type kafka but missing"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "commands:\n  - name: x\n"),
              HasSubstr("p.yml:15: commands[0].sql: is required but missing"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "handlers.InferredMemBatch", "handlers.StructuredBatch")),
              HasSubstr("pipeline.handler.table: is required for handlers.StructuredBatch"));
}

TEST(PipelineConfigTest, UnsupportedSqlflowKeysSayWhatToUseInstead) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "udfs:\n  - function_name: f\n"),
              HasSubstr("p.yml:14: udfs: sqlflow's `udfs` is not supported by sluice: sluice "
                        "runs no Python; write the function in SQL with CREATE MACRO"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) +
                      "tables:\n  sql:\n    - name: t\n      sql: CREATE TABLE t (a INT)\n"
                      "      window: {type: tumbling, duration_seconds: 10}\n"),
              HasSubstr("p.yml:18: tables.sql[0].window: sqlflow's `window` is not supported by "
                        "sluice: sqlflow's later form is `manager:"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "type: kafka\n    kafka:", "type: websocket\n    kafka:")),
              HasSubstr("p.yml:3: pipeline.source.type: sqlflow's 'websocket' is not supported "
                        "by sluice: sluice reads Kafka topics only"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    type: console",
                              "    type: clickhouse\n    clickhouse: {dsn: x, table: t}")),
              HasSubstr("pipeline.sink.type: sqlflow's 'clickhouse' is not supported by sluice: "
                        "use `type: postgres`"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    type: console",
                              "    type: clickhouse\n    clickhouse: {dsn: x, table: t}")),
              HasSubstr("p.yml:14: pipeline.sink.clickhouse: sqlflow's `clickhouse` is not "
                        "supported"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    type: console", "    type: iceberg")),
              HasSubstr("pipeline.sink.iceberg: is required for type iceberg but missing"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "    type: console",
                              "    type: console\n    format: {type: parquet}")),
              HasSubstr("pipeline.sink.format: sqlflow's `format` is not supported by sluice: "
                        "write files with `type: sqlcommand`"));
}

TEST(PipelineConfigTest, BadEnumValues) {
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "auto_offset_reset: earliest", "auto_offset_reset: first")),
              HasSubstr("p.yml:7: pipeline.source.kafka.auto_offset_reset: must be one of "
                        "earliest, latest; got 'first'"));
  EXPECT_THAT(
      ErrorOf(std::string(kMinimal) + "  on_error: {policy: retry}\n"),
      HasSubstr("pipeline.on_error.policy: must be one of RAISE, IGNORE, DLQ; got 'retry'"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      security_protocol: tls")),
              HasSubstr("pipeline.source.kafka.security_protocol: must be one of PLAINTEXT, SSL, "
                        "SASL_PLAINTEXT, SASL_SSL"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      sasl: {mechanism: MD5, username: u, "
                              "password: p}")),
              HasSubstr("pipeline.source.kafka.sasl.mechanism: must be one of PLAIN"));
}

TEST(PipelineConfigTest, OnErrorPolicyIsCaseInsensitive) {
  for (const char* policy : {"raise", "Raise", "RAISE", "ignore", "IgNoRe"}) {
    auto r = Parse(std::string(kMinimal) + "  on_error:\n    policy: " + policy + "\n");
    ASSERT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
    EXPECT_NE(r->on_error.policy, ErrorPolicy::kDlq);
  }
  auto r = Parse(std::string(kMinimal) + "  on_error:\n    policy: ignore\n");
  EXPECT_EQ(r->on_error.policy, ErrorPolicy::kIgnore);
}

TEST(PipelineConfigTest, DlqPolicyWithoutDlqSink) {
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  on_error:\n    policy: DLQ\n"),
              HasSubstr("p.yml:15: pipeline.on_error.dlq: is required when policy is DLQ"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "  on_error:\n    policy: DLQ\n    dlq:\n"),
              HasSubstr("pipeline.on_error.dlq: is empty; a sink needs at least `type`"));
  EXPECT_THAT(
      ErrorOf(std::string(kMinimal) + "  on_error:\n    policy: DLQ\n    dlq: {type: kafka}\n"),
      HasSubstr("pipeline.on_error.dlq.kafka: is required for type kafka but missing"));
  // A dlq that the policy does not use is a warning, not an error.
  auto r =
      Parse(std::string(kMinimal) + "  on_error:\n    policy: IGNORE\n    dlq: {type: noop}\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("p.yml:16: pipeline.on_error.dlq: is set but policy is "
                                        "IGNORE"));
}

TEST(PipelineConfigTest, PostgresSinkCommitInterval) {
  auto with_sink = [](std::string_view sink) {
    return Replace(kMinimal, "    type: console\n", sink);
  };
  auto r = Parse(with_sink(
      "    type: postgres\n    postgres: {dsn: x, table: t, mode: append, commit_interval_ms: "
      "250}\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sink.postgres.commit_interval_ms, 250);
  r = Parse(with_sink("    type: postgres\n    postgres: {dsn: x, table: t, mode: append}\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sink.postgres.commit_interval_ms, 0);
  for (std::string_view bad : {"0", "-5", "3600001", "soon", "1.5"}) {
    EXPECT_THAT(ErrorOf(with_sink(fmt::format("    type: postgres\n    postgres: {{dsn: x, table: "
                                              "t, mode: append, commit_interval_ms: {}}}\n",
                                              bad))),
                HasSubstr("pipeline.sink.postgres.commit_interval_ms"))
        << bad;
  }
  EXPECT_THAT(ErrorOf(with_sink("    type: postgres\n    postgres: {dsn: x, table: t, mode: "
                                "upsert, key: [id], commit_interval_ms: 100}\n")),
              HasSubstr("pipeline.sink.postgres.commit_interval_ms: is for mode append"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) +
                      "  on_error:\n    policy: DLQ\n    dlq: {type: postgres, postgres: {dsn: x, "
                      "table: t, mode: append, commit_interval_ms: 100}}\n"),
              HasSubstr("pipeline.on_error.dlq.postgres.commit_interval_ms: is for pipeline.sink "
                        "only"));
}

TEST(PipelineConfigTest, PostgresSinkModeAndKey) {
  auto with_sink = [](std::string_view sink) {
    return Replace(kMinimal, "    type: console\n", sink);
  };
  EXPECT_THAT(
      ErrorOf(with_sink("    type: postgres\n    postgres: {dsn: x, table: t, mode: upsert}\n")),
      HasSubstr("pipeline.sink.postgres.key: is required for mode upsert"));
  EXPECT_THAT(
      ErrorOf(with_sink("    type: postgres\n    postgres: {dsn: x, table: t, mode: append, "
                        "key: [id]}\n")),
      HasSubstr("pipeline.sink.postgres.key: is refused for mode append"));
  EXPECT_THAT(ErrorOf(with_sink("    type: postgres\n    postgres: {dsn: x, table: t}\n")),
              HasSubstr("pipeline.sink.postgres.mode: is required but missing"));
  EXPECT_THAT(ErrorOf(with_sink(
                  "    type: postgres\n    postgres: {dsn: x, table: a.b.c, mode: append}\n")),
              HasSubstr("pipeline.sink.postgres.table: 'a.b.c' is not a table name"));
  EXPECT_THAT(
      ErrorOf(with_sink("    type: postgres\n    postgres: {host: h, table: t, mode: append}\n")),
      HasSubstr("pipeline.sink.postgres.host: unknown key"));
  auto r = Parse(with_sink("    type: postgres\n    postgres: {dsn: x, table: t, mode: Append}\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sink.postgres.mode, PostgresMode::kAppend);
}

TEST(PipelineConfigTest, IcebergSinkKeys) {
  auto with_sink = [](std::string_view sink) {
    return Replace(kMinimal, "    type: console\n", sink);
  };
  auto r = Parse(with_sink(
      "    type: iceberg\n    iceberg:\n      catalog_name: c\n      table_name: a.b.t\n"
      "      warehouse: /w\n      commit_interval_seconds: 5\n"
      "      partition_by: [day(ts), bucket(16, id), city]\n      schema_evolution: true\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sink.iceberg.namespace_, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->sink.iceberg.table, "t");
  EXPECT_EQ(r->sink.iceberg.commit_interval_seconds, 5);
  EXPECT_TRUE(r->sink.iceberg.schema_evolution);
  EXPECT_EQ(r->sink.iceberg.partition_by,
            (std::vector<std::string>{"day(ts)", "bucket(16, id)", "city"}));
  EXPECT_EQ(r->sink.iceberg.target_file_size_bytes, int64_t{128} << 20);
  for (std::string_view bad : {"t", ".t", "a..t", "a.", "a/b.t", "'a\"b.t'"}) {
    EXPECT_THAT(ErrorOf(with_sink(fmt::format(
                    "    type: iceberg\n    iceberg: {{catalog_name: c, table_name: {}}}\n", bad))),
                HasSubstr("is not a table name; write namespace.table"))
        << bad;
  }
  EXPECT_THAT(ErrorOf(with_sink("    type: iceberg\n    iceberg: {table_name: a.t}\n")),
              HasSubstr("pipeline.sink.iceberg.catalog_name: is required"));
  EXPECT_THAT(
      ErrorOf(with_sink("    type: iceberg\n    iceberg: {catalog_name: c, table_name: a.t, "
                        "commit_interval_seconds: 0}\n")),
      HasSubstr("pipeline.sink.iceberg.commit_interval_seconds: must be at least 1, got 0"));
  EXPECT_THAT(
      ErrorOf(with_sink("    type: iceberg\n    iceberg: {catalog_name: c, table_name: a.t, "
                        "schema_evolution: maybe}\n")),
      HasSubstr("pipeline.sink.iceberg.schema_evolution: must be true or false"));
  EXPECT_THAT(
      ErrorOf(with_sink("    type: iceberg\n    iceberg: {catalog_name: c, table_name: a.t, "
                        "partition_by: ['bucket(16']}\n")),
      HasSubstr("has an unclosed parenthesis"));
  // sink.iceberg.catalog: an Iceberg REST catalog instead of a warehouse.
  r = Parse(
      with_sink("    type: iceberg\n    iceberg:\n      catalog_name: c\n      table_name: a.t\n"
                "      catalog:\n        type: rest\n        uri: https://cat:8181/api\n"
                "        warehouse: prod\n        credential: id:secret\n        scope: all\n"
                "        request_timeout_ms: 5000\n        max_retries: 1\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->sink.iceberg.catalog.has_value());
  EXPECT_EQ(r->sink.iceberg.catalog->uri, "https://cat:8181/api");
  EXPECT_EQ(r->sink.iceberg.catalog->warehouse, "prod");
  EXPECT_EQ(r->sink.iceberg.catalog->credential, "id:secret");
  EXPECT_EQ(r->sink.iceberg.catalog->scope, "all");
  EXPECT_EQ(r->sink.iceberg.catalog->request_timeout_ms, 5000);
  EXPECT_EQ(r->sink.iceberg.catalog->max_retries, 1);
  auto with_catalog = [&](std::string_view catalog) {
    return with_sink(fmt::format(
        "    type: iceberg\n    iceberg:\n      catalog_name: c\n      table_name: a.t\n{}",
        catalog));
  };
  EXPECT_THAT(ErrorOf(with_catalog("      catalog: {type: hive, uri: http://x}\n")),
              HasSubstr("pipeline.sink.iceberg.catalog.type: must be rest"));
  EXPECT_THAT(ErrorOf(with_catalog("      catalog: {uri: http://x}\n")),
              HasSubstr("pipeline.sink.iceberg.catalog.type: is required"));
  EXPECT_THAT(ErrorOf(with_catalog("      catalog: {type: rest}\n")),
              HasSubstr("pipeline.sink.iceberg.catalog.uri: is required"));
  EXPECT_THAT(ErrorOf(with_catalog("      catalog: {type: rest, uri: 'ftp://x'}\n")),
              HasSubstr("must be an http:// or https:// URL"));
  EXPECT_THAT(ErrorOf(with_catalog("      catalog: {type: rest, uri: 'http://x', credential: a:b, "
                                   "token: t}\n")),
              HasSubstr("set credential (OAuth2 client credentials) or token, not both"));
  EXPECT_THAT(ErrorOf(with_catalog("      catalog: {type: rest, uri: 'http://x', secret: s}\n")),
              HasSubstr("pipeline.sink.iceberg.catalog.secret: unknown key"));
  EXPECT_THAT(
      ErrorOf(with_catalog("      catalog: {type: rest, uri: 'http://x', max_retries: -1}\n")),
      HasSubstr("pipeline.sink.iceberg.catalog.max_retries"));
  EXPECT_THAT(ErrorOf(with_catalog("      catalog: [rest]\n")), HasSubstr("catalog"));
  EXPECT_THAT(ErrorOf(with_catalog("      warehouse: /w\n      catalog: {type: rest, uri: "
                                   "'http://x'}\n")),
              HasSubstr("a warehouse directory or a catalog, not both"));
  // Only a pipeline's own results: not a dead-letter sink.
  EXPECT_THAT(
      ErrorOf(std::string(kMinimal) +
              "  on_error:\n    policy: DLQ\n    dlq: {type: iceberg, iceberg: {catalog_name: c, "
              "table_name: a.t}}\n"),
      HasSubstr("type iceberg is not a dead-letter sink"));
}

TEST(PipelineConfigTest, SqlcommandSubstitutions) {
  auto with_sink = [](std::string_view sink) {
    return Replace(kMinimal, "    type: console\n", sink);
  };
  EXPECT_THAT(ErrorOf(with_sink("    type: sqlcommand\n    sqlcommand:\n      sql: COPY x TO 'f'\n"
                                "      substitutions:\n        - var: f\n          type: uuid7\n")),
              HasSubstr("p.yml:18: pipeline.sink.sqlcommand.substitutions[0].type: must be one of "
                        "uuid4; got 'uuid7'"));
  auto r =
      Parse(with_sink("    type: sqlcommand\n    sqlcommand:\n      sql: COPY x TO 'f'\n"
                      "      substitutions: [{var: zz, type: uuid4}]\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("'zz' does not appear in the sink's sql"));
}

TEST(PipelineConfigTest, PropertiesRefuseWhatNamedKeysOrSluiceOwn) {
  auto with_props = [](std::string_view props) {
    return Replace(kMinimal, "      topics: [in]\n",
                   "      topics: [in]\n      properties:\n" + std::string(props));
  };
  EXPECT_THAT(ErrorOf(with_props("        enable.auto.commit: true\n")),
              HasSubstr("p.yml:10: pipeline.source.kafka.properties.enable.auto.commit: cannot be "
                        "set as a property: sluice commits offsets itself"));
  EXPECT_THAT(ErrorOf(with_props("        bootstrap.servers: x:1\n")),
              HasSubstr("use kafka.brokers"));
  EXPECT_THAT(ErrorOf(with_props("        queued.max.messages.kbytes: 1\n")),
              HasSubstr("bounded by kafka.fetch"));
  EXPECT_THAT(ErrorOf(with_props("        client.id: [a]\n")),
              HasSubstr("properties.client.id: must be a single value, got a list"));
  auto r = Parse(with_props("        statistics.interval.ms: 1000\n        check.crcs: true\n"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source.properties.at("check.crcs"), "true");
}

TEST(PipelineConfigTest, FetchBounds) {
  auto with_fetch = [](std::string_view fetch) {
    return Replace(kMinimal, "      topics: [in]\n",
                   "      topics: [in]\n      fetch: " + std::string(fetch) + "\n");
  };
  EXPECT_THAT(ErrorOf(with_fetch("{prefetch: 0}")),
              HasSubstr("pipeline.source.kafka.fetch.prefetch: must be at least 1, got 0"));
  EXPECT_THAT(
      ErrorOf(with_fetch("{max_bytes: 1000, max_partition_bytes: 2000}")),
      HasSubstr("fetch.max_partition_bytes: (2000) must not exceed fetch.max_bytes (1000)"));
  EXPECT_THAT(ErrorOf(with_fetch("{max_bytes: 4294967296}")),
              HasSubstr("fetch.max_bytes: must be at most 2147483647"));
  EXPECT_THAT(
      ErrorOf(with_fetch("{max_bytes: 65536, max_partition_bytes: 4096}")),
      HasSubstr(
          "fetch.max_bytes: (65536) must be at least the consumer's message.max.bytes (1000000"));
  std::string lowered =
      Replace(with_fetch("{max_bytes: 65536, max_partition_bytes: 4096}"), "      topics: [in]\n",
              "      topics: [in]\n      properties: {message.max.bytes: 65536}\n");
  auto r = Parse(lowered);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source.fetch.max_bytes, 65536);
}

TEST(PipelineConfigTest, DuplicateKeyIsAnError) {
  std::string err =
      ErrorOf(Replace(kMinimal, "      group_id: g\n", "      group_id: g\n      group_id: h\n"));
  EXPECT_THAT(err, HasSubstr("p.yml:7: pipeline.source.kafka.group_id: is set twice (first at "
                             "line 6)"));
}

TEST(PipelineConfigTest, EmptyAndNonMapFiles) {
  EXPECT_THAT(ErrorOf(""), HasSubstr("p.yml: the file is empty"));
  EXPECT_THAT(ErrorOf("# only a comment\n\n"), HasSubstr("p.yml: the file is empty"));
  EXPECT_THAT(ErrorOf("- a\n- b\n"), HasSubstr("p.yml:1: the top level must be a map"));
  EXPECT_THAT(ErrorOf("just text"), HasSubstr("the top level must be a map"));
  EXPECT_THAT(ErrorOf(std::string(kMinimal) + "---\npipeline: {}\n"),
              HasSubstr("p.yml:14: a second YAML document starts here"));
}

TEST(PipelineConfigTest, BinaryGarbageIsRefusedClearly) {
  std::string nul = "pipeline:\n  name: a\0b\n";
  nul = std::string("pipeline:\n  name: a\0b\n", 22);
  EXPECT_THAT(ErrorOf(nul), HasSubstr("p.yml:2: holds a NUL byte"));
  EXPECT_THAT(ErrorOf("pipeline:\n  name: \xff\xfe\n"), HasSubstr("p.yml:2: is not UTF-8 text"));
  // Random bytes: always an error, never a crash.
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string bytes(1 + rng() % 512, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    auto r = Parse(bytes);
    EXPECT_FALSE(r.ok());
  }
}

TEST(PipelineConfigTest, HugeFileIsRefused) {
  std::string path = ::testing::TempDir() + "/huge_pipeline.yml";
  {
    std::ofstream out(path, std::ios::binary);
    out << kMinimal << "commands:\n";
    std::string sql(1000, 'x');
    for (int i = 0; i < 5000; ++i) out << "  - {name: c" << i << ", sql: " << sql << "}\n";
  }
  auto r = LoadPipelineFile(path, MapEnv({}));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("pipeline files are limited to 4194304"));
  std::remove(path.c_str());

  // Just under the limit parses, with every command.
  std::string text(kMinimal);
  text += "commands:\n";
  for (int i = 0; i < 3000; ++i)
    text += "  - {name: c" + std::to_string(i) + ", sql: " + std::string(1000, 'x') + "}\n";
  auto big = Parse(text);
  ASSERT_TRUE(big.ok()) << big.status().ToString().substr(0, 300);
  EXPECT_EQ(big->commands.size(), 3000u);

  // A value that makes the text too large after substitution.
  EXPECT_THAT(ErrorOf("a: {{ BIG }}\n", {{"BIG", std::string(kMaxPipelineFileBytes + 1, 'x')}}),
              HasSubstr("larger than 4194304 bytes after substitution"));
}

TEST(PipelineConfigTest, AliasesCannotExpandWithoutBound) {
  std::string text(kMinimal);
  text += "commands:\n  - &c {name: a, sql: " + std::string(100000, 'x') + "}\n";
  for (int i = 0; i < 2000; ++i) text += "  - *c\n";
  std::string err = ErrorOf(text);
  EXPECT_THAT(err, HasSubstr("expands (through aliases)"));
}

TEST(PipelineConfigTest, TooManyErrorsAreCut) {
  std::string text(kMinimal);
  text += "commands:\n";
  for (int i = 0; i < 200; ++i) text += "  - {name: c}\n";
  std::string err = ErrorOf(text);
  EXPECT_THAT(err, HasSubstr("... and 150 more errors"));
}

// yaml-cpp's LoadAll makes millions of empty documents of this (found by the fuzzer).
TEST(PipelineConfigTest, StrayCommaAtTopLevelIsAnErrorQuickly) {
  EXPECT_FALSE(Parse(",pipeline:\n  name: x\n  - a\n\n").ok());
  EXPECT_FALSE(Parse(",a:\n  - a\n").ok());
}

TEST(PipelineConfigTest, DeepNestingIsAnErrorNotACrash) {
  std::string text = "pipeline: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  EXPECT_FALSE(Parse(text).ok());
}

TEST(PipelineConfigTest, MissingFile) {
  auto r = LoadPipelineFile("/nonexistent/pipeline.yml", MapEnv({}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/pipeline.yml"));
  auto dir = LoadPipelineFile(kDir, MapEnv({}));
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("is a directory"));
}

TEST(PipelineConfigTest, ProcessEnvReadsTheEnvironment) {
  ::setenv("SLUICE_PIPELINE_CONFIG_TEST_VAR", "from-process", 1);
  auto r = ParsePipeline(
      Replace(kMinimal, "group_id: g", "group_id: {{ SLUICE_PIPELINE_CONFIG_TEST_VAR }}"), "p.yml",
      ProcessEnv());
  ::unsetenv("SLUICE_PIPELINE_CONFIG_TEST_VAR");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source.group_id, "from-process");
}

}  // namespace
}  // namespace sluice::pipeline

namespace sluice::pipeline {
namespace {

// source.kafka.format and schema_registry, the kafka sink's format and subject
// (docs/design/0022-schemas.md).
TEST(PipelineConfigTest, MessageFormatsAndTheirRegistry) {
  auto r = Parse(Replace(kMinimal, "      topics: [in]",
                         "      topics: [in]\n      format: avro\n      schema_registry:\n"
                         "        url: http://127.0.0.1:8081\n        username: u\n"
                         "        password: p"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->source.format, MessageFormat::kAvro);
  ASSERT_TRUE(r->source.schema_registry.has_value());
  EXPECT_EQ(r->source.schema_registry->url, "http://127.0.0.1:8081");
  EXPECT_EQ(r->source.schema_registry->username, "u");
  EXPECT_EQ(Parse(kMinimal)->source.format, MessageFormat::kJson);
  for (const char* f : {"protobuf", "json_schema", "json"}) {
    auto p = Parse(Replace(kMinimal, "      topics: [in]",
                           std::string("      topics: [in]\n      format: ") + f));
    ASSERT_TRUE(p.ok()) << f << ": " << p.status().ToString();
  }
  auto sink =
      Parse(Replace(kMinimal, "    type: console\n",
                    "    type: kafka\n    kafka:\n      brokers: [b:9092]\n      topic: out\n"
                    "      format: protobuf\n      subject: out-v\n"));
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_EQ(sink->sink.kafka.format, MessageFormat::kProtobuf);
  EXPECT_EQ(sink->sink.kafka.subject, "out-v");

  EXPECT_THAT(
      ErrorOf(Replace(kMinimal, "      topics: [in]", "      topics: [in]\n      format: xml")),
      HasSubstr("pipeline.source.kafka.format: must be one of json, avro, protobuf, json_schema"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      schema_registry:\n        url: ftp://x")),
              HasSubstr("pipeline.source.kafka.schema_registry.url"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      schema_registry:\n        username: u")),
              HasSubstr("schema_registry.url"));
  EXPECT_THAT(
      ErrorOf(Replace(kMinimal, "      topics: [in]",
                      "      topics: [in]\n      schema_registry:\n        url: http://h:1\n"
                      "        username: u")),
      HasSubstr("username and password go together"));
  EXPECT_THAT(
      ErrorOf(Replace(kMinimal, "    type: console\n",
                      "    type: kafka\n    kafka:\n      brokers: [b:9092]\n      topic: out\n"
                      "      format: json_schema\n")),
      HasSubstr("json_schema is read, not written"));
  EXPECT_THAT(
      ErrorOf(Replace(kMinimal, "    type: console\n",
                      "    type: kafka\n    kafka:\n      brokers: [b:9092]\n      topic: out\n"
                      "      subject: s\n")),
      HasSubstr("the format is json"));
}

// source.kafka.in_process: auto (the default), true, false; YAML's booleans read as such.
TEST(PipelineConfigTest, InProcess) {
  EXPECT_EQ(Parse(kMinimal)->source.in_process, InProcessMode::kAuto);
  for (const auto& [text, want] : {std::pair{"auto", InProcessMode::kAuto},
                                   {"true", InProcessMode::kTrue},
                                   {"false", InProcessMode::kFalse},
                                   {"True", InProcessMode::kTrue}}) {
    auto r = Parse(Replace(kMinimal, "      topics: [in]",
                           fmt::format("      topics: [in]\n      in_process: {}", text)));
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(r->source.in_process, want) << text;
  }
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      in_process: maybe")),
              HasSubstr("pipeline.source.kafka.in_process: must be one of auto, true, false; "
                        "got 'maybe'"));
}

// source.kafka.key_format: framed keys decoded beside framed values only.
TEST(PipelineConfigTest, KeyFormat) {
  EXPECT_EQ(Parse(kMinimal)->source.key_format, KeyFormat::kBytes);
  for (const auto& [value, key, want] : {std::tuple{"avro", "avro", KeyFormat::kAvro},
                                         {"protobuf", "protobuf", KeyFormat::kProtobuf},
                                         {"avro", "protobuf", KeyFormat::kProtobuf},
                                         {"json", "bytes", KeyFormat::kBytes}}) {
    auto r = Parse(Replace(
        kMinimal, "      topics: [in]",
        fmt::format("      topics: [in]\n      format: {}\n      key_format: {}", value, key)));
    ASSERT_TRUE(r.ok()) << key << ": " << r.status().ToString();
    EXPECT_EQ(r->source.key_format, want) << key;
  }
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      key_format: avro")),
              HasSubstr("pipeline.source.kafka.key_format: decodes framed keys beside framed "
                        "values: it needs format avro or protobuf (format is json)"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      format: json_schema\n"
                              "      key_format: protobuf")),
              HasSubstr("(format is json_schema)"));
  EXPECT_THAT(ErrorOf(Replace(kMinimal, "      topics: [in]",
                              "      topics: [in]\n      format: avro\n      key_format: string")),
              HasSubstr("key_format: must be one of bytes, avro, protobuf; got 'string'"));
}

}  // namespace
}  // namespace sluice::pipeline
