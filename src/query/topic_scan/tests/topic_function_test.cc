// topic() against a real `sluice serve` (SLUICE_BINARY; ctest sets it): rows, bounds by
// offset and time, projections, null and binary keys and values, bad arguments, bounds
// from WHERE (the planner's answers equal the unplanned query's), typed value columns.
#include "query/topic_scan/topic_function.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "duck/database.h"
#include "kafka/client/admin.h"
#include "kafka/client/producer.h"
#include "query/topic_scan/topic_planner.h"
#include "sluice_process.h"

namespace sluice::query {
namespace {

using namespace std::chrono_literals;
namespace kc = kafka::client;

constexpr int64_t kBaseTimeMs = 1'714'564'800'000;  // 2024-05-01 12:00:00 UTC

class TopicFunctionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* binary = std::getenv("SLUICE_BINARY");
    if (binary == nullptr) GTEST_SKIP() << "SLUICE_BINARY is not set (ctest sets it)";
    SetLogLevel(LogLevel::kWarn);
    broker_ = std::make_unique<integration::SluiceProcess>(binary, "");
    ASSERT_EQ(broker_->Start(), "");
    auto db = duck::Database::Open({.threads = 2});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(conn_->Execute("SET TimeZone = 'UTC'").ok());
    Status st =
        RegisterTopicFunction(*conn_, {.bootstrap_servers = broker_->bootstrap(), .timeout = 10s});
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    conn_.reset();
    db_.reset();
    if (broker_ != nullptr && HasFailure()) broker_->DumpLogs();
    if (broker_ != nullptr && !broker_->bootstrap().empty()) {
      EXPECT_EQ(broker_->Stop(), 0);
    }
    SetLogLevel(LogLevel::kInfo);
  }

  // `per_partition` records in each of `partitions` partitions: value {"i": n, "p": p},
  // key "k<n>", timestamp base + n seconds (n counts per partition).
  void Fill(const std::string& topic, int partitions, int per_partition) {
    auto admin = kc::Admin::Create({{"bootstrap.servers", broker_->bootstrap()}});
    ASSERT_TRUE(admin.ok());
    ASSERT_TRUE((*admin)->CreateTopic(topic, partitions, 1, {}, 10s).ok());
    auto producer =
        kc::Producer::Create({{"bootstrap.servers", broker_->bootstrap()}, {"linger.ms", "5"}});
    ASSERT_TRUE(producer.ok()) << producer.status().ToString();
    for (int p = 0; p < partitions; ++p) {
      for (int n = 0; n < per_partition; ++n) {
        Status st = (*producer)->Produce(topic, p, fmt::format("k{}", n),
                                         fmt::format(R"({{"i": {}, "p": {}}})", n, p), 0,
                                         kc::Producer::Value::kCopy, kBaseTimeMs + n * 1000);
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
    }
    ASSERT_TRUE((*producer)->Flush(30s).ok());
  }

  std::vector<std::string> Rows(const std::string& sql) {
    auto r = conn_->QueryText(sql);
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status().ToString();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    for (const auto& row : *r) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) line += (i ? "|" : "") + row[i].value_or("NULL");
      out.push_back(line);
    }
    return out;
  }
  std::string Planned(const std::string& sql) {
    Result<std::string> planned = PlanTopicBounds(*conn_, sql);
    EXPECT_TRUE(planned.ok()) << sql << ": " << planned.status().ToString();
    return planned.ok() ? *planned : sql;
  }
  // The scan's row estimate (what bind found in its ranges), from EXPLAIN; "none" when
  // DuckDB's optimizer left no scan.
  std::string Estimate(const std::string& sql) {
    auto r = conn_->Query("EXPLAIN " + sql);
    if (!r.ok() || r->chunk_count() == 0 || r->column_count() < 2) return "?";
    const std::string plan(r->chunk(0).GetString(1, 0));
    size_t at = plan.rfind("~");  // the last operator printed is the scan
    return at == std::string::npos ? "none" : plan.substr(at, plan.find(' ', at) - at);
  }
  std::string Error(const std::string& sql) {
    auto r = conn_->QueryText(sql);
    return r.ok() ? "<no error>" : r.status().message();
  }

  std::unique_ptr<integration::SluiceProcess> broker_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(TopicFunctionTest, EveryMessageOnceWithItsCoordinates) {
  Fill("events", 3, 2000);
  EXPECT_EQ(Rows("SELECT count(*), count(DISTINCT (partition, \"offset\")), min(\"offset\"), "
                 "max(\"offset\") "
                 "FROM topic('events')"),
            std::vector<std::string>{"6000|6000|0|1999"});
  // The values are JSON text DuckDB reads; offsets match the values' counters.
  EXPECT_EQ(
      Rows("SELECT count(*) FROM topic('events') WHERE (value::JSON->>'i')::BIGINT = \"offset\" "
           "AND (value::JSON->>'p')::INT = partition AND key = 'k' || \"offset\""),
      std::vector<std::string>{"6000"});
  EXPECT_EQ(Rows("SELECT timestamp FROM topic('events', partition => 1, from_offset => 7, "
                 "to_offset => 8)"),
            std::vector<std::string>{"2024-05-01 12:00:07+00"});
  // Projection only, and twice in one query.
  EXPECT_EQ(Rows("SELECT (SELECT count(*) FROM topic('events')) - (SELECT count(partition) FROM "
                 "topic('events'))"),
            std::vector<std::string>{"0"});
}

TEST_F(TopicFunctionTest, OffsetAndTimeBounds) {
  Fill("bounded", 2, 100);
  EXPECT_EQ(Rows("SELECT count(*), min(\"offset\"), max(\"offset\") FROM topic('bounded', "
                 "from_offset => 10, "
                 "to_offset => 20)"),
            std::vector<std::string>{"20|10|19"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('bounded', partition => 0, from_offset => 95)"),
            std::vector<std::string>{"5"});
  // Seconds 30 .. 39 of each partition.
  EXPECT_EQ(Rows("SELECT count(*), min(\"offset\"), max(\"offset\") FROM topic('bounded', "
                 "from_ts => TIMESTAMPTZ '2024-05-01 12:00:30+00', to_ts => TIMESTAMPTZ "
                 "'2024-05-01 12:00:40+00')"),
            std::vector<std::string>{"20|30|39"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('bounded', from_offset => 1000)"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(
      Rows(
          "SELECT count(*) FROM topic('bounded', from_ts => TIMESTAMPTZ '2030-01-01 00:00:00+00')"),
      std::vector<std::string>{"0"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('bounded', to_offset => 0)"),
            std::vector<std::string>{"0"});
}

TEST_F(TopicFunctionTest, NullAndBinaryKeysAndValues) {
  auto admin = kc::Admin::Create({{"bootstrap.servers", broker_->bootstrap()}});
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE((*admin)->CreateTopic("odd", 1, 1, {}, 10s).ok());
  auto producer = kc::Producer::Create({{"bootstrap.servers", broker_->bootstrap()}});
  ASSERT_TRUE(producer.ok());
  ASSERT_TRUE((*producer)->Produce("odd", 0, std::string_view(), "plain").ok());
  ASSERT_TRUE((*producer)->Produce("odd", 0, "key", std::string_view()).ok());
  ASSERT_TRUE((*producer)
                  ->Produce("odd", 0, std::string_view("\xff\xfe", 2), std::string_view("a\xc3", 2))
                  .ok());
  ASSERT_TRUE((*producer)->Flush(30s).ok());
  EXPECT_EQ(Rows("SELECT \"offset\", key, value, hex(key_bytes), hex(value_bytes) FROM "
                 "topic('odd') ORDER BY 1"),
            (std::vector<std::string>{"0|NULL|plain|NULL|706C61696E", "1|key|NULL|6B6579|NULL",
                                      "2|NULL|NULL|FFFE|61C3"}));
}

TEST_F(TopicFunctionTest, BadArgumentsAreClearErrors) {
  Fill("small", 2, 3);
  EXPECT_NE(Error("SELECT * FROM topic('no_such_topic')").find("no such topic"), std::string::npos);
  EXPECT_NE(
      Error("SELECT * FROM topic('small', partition => 5)").find("partition 5 does not exist"),
      std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('small', from_offset => -1)").find("negative"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic(NULL)").find("NULL"), std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('small', colour => 1)"), "<no error>");
  EXPECT_NE(Error("SELECT * FROM topic('small', from_ts => 'yesterday')"), "<no error>");
  // The connection still works.
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('small')"), std::vector<std::string>{"6"});
}

TEST_F(TopicFunctionTest, PartitionsListSkipsMissingOnes) {
  Fill("parts", 3, 10);
  EXPECT_EQ(Rows("SELECT count(*), count(DISTINCT partition) FROM topic('parts', partitions => [0, "
                 "2, 9, -1])"),
            std::vector<std::string>{"20|2"});
  // With `partition =>` too: both apply.
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('parts', partition => 2, partitions => [1])"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('parts', partition => 2, partitions => [1, 2])"),
            std::vector<std::string>{"10"});
}

TEST_F(TopicFunctionTest, WhereBoundsReadLessAndAnswerTheSame) {
  Fill("w", 3, 200);
  struct Case {
    std::string sql;
    std::string rows;      // the answer, planned or not
    std::string estimate;  // rows the planned scan expects to read (600 unplanned)
  };
  const std::vector<Case> cases = {
      {R"(SELECT count(*), min("offset"), max("offset") FROM topic('w') WHERE "offset" >= 50 AND "offset" < 60)",
       "30|50|59", "~30"},
      {R"(SELECT count(*) FROM topic('w') WHERE partition IN (0, 2) AND "offset" BETWEEN 10 AND 19)",
       "20", "~20"},
      {R"(SELECT count(*), min("offset") FROM topic('w') WHERE timestamp >= TIMESTAMPTZ '2024-05-01 12:00:30+00'
          AND timestamp < TIMESTAMPTZ '2024-05-01 12:00:40+00')",
       "30|30", "~510"},
      {R"(SELECT count(*) FROM topic('w') WHERE partition = 7)", "0", "~0"},
      {R"(SELECT count(*) FROM topic('w') WHERE partition = 1 AND partition = 2)", "0", "none"},
      {R"(SELECT count(*) FROM topic('w') WHERE "offset" > 9223372036854775807)", "0", "~0"},
      {R"(SELECT count(*) FROM topic('w') WHERE "offset" < -1)", "0", "~0"},
      {R"(SELECT count(*) FROM topic('w', from_offset => 100) WHERE "offset" >= 50 AND "offset" < 150)",
       "150", "~150"},
      {R"(SELECT count(*) FROM topic('w', partition => 1) WHERE partition = 2)", "0", "~0"},
      // A bound on the NULL-extended side of a LEFT JOIN still filters the joined rows.
      {R"(SELECT count(*), count(t."offset") FROM range(4) r(p) LEFT JOIN topic('w') t ON t.partition = r.p
          WHERE t."offset" < 3)",
       "9|9", "~9"},
  };
  for (const Case& c : cases) {
    const std::string planned = Planned(c.sql);
    EXPECT_NE(planned, c.sql) << "nothing pushed: " << c.sql;
    EXPECT_EQ(Rows(c.sql), std::vector<std::string>{c.rows}) << c.sql;
    EXPECT_EQ(Rows(planned), std::vector<std::string>{c.rows}) << planned;
    EXPECT_EQ(Estimate(planned), c.estimate) << planned;
  }
  // Two topic() calls in a join, each with its own bounds.
  const std::string join = R"(SELECT count(*) FROM topic('w') a JOIN topic('w') b
      ON a.partition = b.partition AND a."offset" = b."offset" WHERE a."offset" < 10 AND b."offset" >= 5)";
  EXPECT_EQ(Rows(Planned(join)), std::vector<std::string>{"15"});
  EXPECT_EQ(Rows(join), std::vector<std::string>{"15"});
}

TEST_F(TopicFunctionTest, UpperTimeBoundsReadLessOnLogAppendTimeTopics) {
  // The broker stamps each batch as it appends it: timestamps grow with offsets, so an
  // upper bound from WHERE ends the read there. Two batches with a moment between them.
  auto admin = kc::Admin::Create({{"bootstrap.servers", broker_->bootstrap()}});
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE(
      (*admin)
          ->CreateTopic("appended", 1, 1, {{"message.timestamp.type", "LogAppendTime"}}, 10s)
          .ok());
  auto type = (*admin)->TopicConfig("appended", "message.timestamp.type", 10s);
  ASSERT_TRUE(type.ok()) << type.status().ToString();
  EXPECT_EQ(*type, "LogAppendTime");
  auto produce = [&](int from, int to) {
    auto producer = kc::Producer::Create({{"bootstrap.servers", broker_->bootstrap()}});
    ASSERT_TRUE(producer.ok());
    for (int n = from; n < to; ++n)
      ASSERT_TRUE((*producer)->Produce("appended", 0, "k", std::to_string(n)).ok());
    ASSERT_TRUE((*producer)->Flush(30s).ok());
  };
  produce(0, 100);
  std::this_thread::sleep_for(50ms);
  const int64_t between_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  std::this_thread::sleep_for(50ms);
  produce(100, 250);
  std::time_t seconds = static_cast<std::time_t>(between_ms / 1000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  const std::string sql = fmt::format(
      "SELECT count(*), max(\"offset\") FROM topic('appended') WHERE timestamp < TIMESTAMPTZ "
      "'{:%Y-%m-%d %H:%M:%S}.{:03}+00'",
      utc, between_ms % 1000);
  const std::string planned = Planned(sql);
  EXPECT_EQ(Rows(planned), std::vector<std::string>{"100|99"}) << planned;
  EXPECT_EQ(Rows(sql), std::vector<std::string>{"100|99"});
  EXPECT_EQ(Estimate(planned), "~100") << planned;
  // A CreateTime topic's upper bound is not applied (the WHERE alone filters): the
  // estimate counts every message.
  Fill("created", 1, 50);
  const std::string created = Planned(
      "SELECT count(*) FROM topic('created') WHERE timestamp < TIMESTAMPTZ '2024-05-01 "
      "12:00:10+00'");
  EXPECT_EQ(Rows(created), std::vector<std::string>{"10"});
  EXPECT_EQ(Estimate(created), "~50") << created;
  EXPECT_EQ((*admin)->TopicConfig("nowhere", "message.timestamp.type", 10s).status().code(),
            StatusCode::kNotFound);
}

class TopicValuesTest : public TopicFunctionTest {
 protected:
  void SetUp() override {
    TopicFunctionTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto admin = kc::Admin::Create({{"bootstrap.servers", broker_->bootstrap()}});
    ASSERT_TRUE(admin.ok());
    ASSERT_TRUE((*admin)->CreateTopic("vals", 1, 1, {}, 10s).ok());
    auto producer = kc::Producer::Create({{"bootstrap.servers", broker_->bootstrap()}});
    ASSERT_TRUE(producer.ok());
    for (std::string_view v : {
             std::string_view(R"({"i": 1, "s": "a", "d": 1.5, "b": true, "o": {"x": [1, 2]}})"),
             std::string_view(R"({"i": "2", "s": 3, "d": 2, "b": "true", "o": "str"})"),
             std::string_view("not json"),
             std::string_view("[1, 2]"),
             std::string_view(),  // no value
             std::string_view(R"({"I": 5.0, "S": null, "s": "last wins"})"),
             std::string_view(R"({"i": 1.5, "i8": 300})"),
             // simdjson refuses integers past 64 bits: the message is unreadable, as "not json".
             std::string_view(R"({"i": 99999999999999999999, "i8": -128})"),
             std::string_view(R"({"s": "trunc)"),
         }) {
      ASSERT_TRUE((*producer)->Produce("vals", 0, "k", v).ok());
    }
    ASSERT_TRUE((*producer)->Flush(30s).ok());
  }
};

TEST_F(TopicValuesTest, DeclaredColumnsAreNullWhereTheValueDoesNotFit) {
  const std::string from =
      "FROM topic('vals', columns => 'i BIGINT, s VARCHAR, d DOUBLE, b BOOLEAN, o JSON, i8 "
      "TINYINT')";
  EXPECT_EQ(Rows("SELECT \"offset\", i, s, d, b, o, i8 " + from + " ORDER BY 1"),
            (std::vector<std::string>{
                R"(0|1|a|1.5|true|{"x":[1,2]}|NULL)", R"(1|NULL|3|2.0|NULL|"str"|NULL)",
                "2|NULL|NULL|NULL|NULL|NULL|NULL", "3|NULL|NULL|NULL|NULL|NULL|NULL",
                "4|NULL|NULL|NULL|NULL|NULL|NULL", "5|5|last wins|NULL|NULL|NULL|NULL",
                "6|NULL|NULL|NULL|NULL|NULL|NULL", "7|NULL|NULL|NULL|NULL|NULL|NULL",
                "8|NULL|NULL|NULL|NULL|NULL|NULL"}));
  // Only what is read is decoded; the raw value stays.
  EXPECT_EQ(Rows("SELECT count(*), count(s), count(value) " + from),
            std::vector<std::string>{"9|3|8"});
  EXPECT_EQ(Rows("SELECT o->>'x' " + from + " WHERE \"offset\" = 0"),
            std::vector<std::string>{"[1,2]"});
  EXPECT_EQ(Rows("SELECT typeof(i), typeof(o), typeof(i8) " + from + " LIMIT 1"),
            std::vector<std::string>{"BIGINT|JSON|TINYINT"});
}

TEST_F(TopicValuesTest, InferredColumnsWidenMixedKinds) {
  EXPECT_EQ(
      Rows("SELECT string_agg(column_name || ' ' || column_type, ', ') FROM "
           "(DESCRIBE SELECT * EXCLUDE (partition, \"offset\", timestamp, key, value, key_bytes, "
           "value_bytes) "
           "FROM topic('vals', format => 'json'))"),
      std::vector<std::string>{"i VARCHAR, s VARCHAR, d DOUBLE, b VARCHAR, o JSON, i8 BIGINT"});
  EXPECT_EQ(Rows("SELECT \"offset\", i, s, b, i8 FROM topic('vals', format => 'json') WHERE i IS "
                 "NOT NULL ORDER BY 1"),
            (std::vector<std::string>{"0|1|a|true|NULL", "1|2|3|true|NULL",
                                      "5|5.0|last wins|NULL|NULL", "6|1.5|NULL|NULL|300"}));
  // A sample of one message: the first message's kinds; later ones that do not fit are NULL.
  EXPECT_EQ(Rows("SELECT \"offset\", i FROM topic('vals', format => 'json', sample_size => 1) "
                 "WHERE \"offset\" < 2 "
                 "ORDER BY 1"),
            (std::vector<std::string>{"0|1", "1|NULL"}));
  // Nothing in range: no value columns.
  EXPECT_EQ(Rows("SELECT count(*) FROM (DESCRIBE SELECT * FROM topic('vals', format => 'json', "
                 "from_offset => 100))"),
            std::vector<std::string>{"7"});
}

TEST_F(TopicValuesTest, BadSchemasAreClearErrors) {
  EXPECT_NE(Error("SELECT * FROM topic('vals', columns => 'a WHATEVER')")
                .find("unknown or unsupported type 'WHATEVER'"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('vals', columns => '')").find("expected a column name"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('vals', columns => 'offset BIGINT')").find("own columns"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('vals', format => 'csv')").find("json, avro or protobuf"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('vals', format => 'jsonl')").find("json, avro or protobuf"),
            std::string::npos);
  // Avro and Protobuf take their columns from a schema registry, which this one has not.
  EXPECT_NE(Error("SELECT * FROM topic('vals', format => 'avro')").find("schema registry"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('vals', format => 'protobuf', columns => 'a INTEGER')")
                .find("takes its columns from the schema registry"),
            std::string::npos);
  // Keys: auto and bytes need no registry; avro and protobuf do.
  EXPECT_NE(Error("SELECT * FROM topic('vals', key_format => 'string')")
                .find("key_format 'string' is not supported (auto, bytes, avro or protobuf)"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('vals', key_format => 'avro')")
                .find("key_format 'avro' needs the schema registry, which is off"),
            std::string::npos);
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('vals', key_format => 'BYTES')"),
            Rows("SELECT count(*) FROM topic('vals')"));
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('vals', key_format => 'auto')"),
            Rows("SELECT count(*) FROM topic('vals')"));
  EXPECT_EQ(Rows("SELECT count(i) FROM topic('vals', format => 'JSON')"),
            std::vector<std::string>{"4"});
  EXPECT_NE(
      Error("SELECT * FROM topic('vals', format => 'json', sample_size => 0)").find("sample_size"),
      std::string::npos);
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('vals')"), std::vector<std::string>{"9"});
}

}  // namespace
}  // namespace sluice::query
