// Malformed sink options, and servers that are not there, without any server running:
// each is an error that names what was wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "duck/database.h"
#include "sinks/kafka_sink.h"
#include "sinks/postgres_sink.h"

namespace sluice::sinks {
namespace {

using ::testing::HasSubstr;

class SinkOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(conn_->Execute("CREATE TABLE batch AS SELECT 1 AS id, 'a' AS v").ok());
  }
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(SinkOptionsTest, KafkaNeedsATopicAndBrokers) {
  auto no_topic = KafkaSink::Create({.brokers = {"127.0.0.1:9092"}, .topic = ""});
  EXPECT_EQ(no_topic.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_topic.status().message(), HasSubstr("topic is empty"));
  auto no_brokers = KafkaSink::Create({.brokers = {}, .topic = "t"});
  EXPECT_EQ(no_brokers.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(no_brokers.status().message(), HasSubstr("brokers"));
  auto empty_broker = KafkaSink::Create({.brokers = {""}, .topic = "t"});
  EXPECT_THAT(empty_broker.status().message(), HasSubstr("brokers[0]"));
}

TEST_F(SinkOptionsTest, KafkaRefusesAnUnknownProperty) {
  auto sink = KafkaSink::Create(
      {.brokers = {"127.0.0.1:9092"}, .topic = "t", .properties = {{"no.such.property", "1"}}});
  EXPECT_EQ(sink.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(sink.status().message(), HasSubstr("no.such.property"));
  auto bad_timeout = KafkaSink::Create(
      {.brokers = {"127.0.0.1:9092"}, .topic = "t", .properties = {{"message.timeout.ms", "x"}}});
  EXPECT_EQ(bad_timeout.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SinkOptionsTest, KafkaFlushFailsWhenNoBrokerAcknowledges) {
  // Port 1 on loopback: nothing listens, every record times out.
  auto sink = KafkaSink::Create({.brokers = {"127.0.0.1:1"},
                                 .topic = "events",
                                 .properties = {{"message.timeout.ms", "1500"}}});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  std::vector<RejectedRow> rejected;
  ASSERT_TRUE((*sink)->Write(*conn_, "batch", {}, &rejected).ok());
  Status st = (*sink)->Flush();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("kafka sink (topic events)"));
  EXPECT_THAT(st.message(), HasSubstr("1 of 1 records were not delivered"));
  EXPECT_THAT(st.message(), HasSubstr("timed out"));
  // The failure was reported once: nothing is left for the next Flush.
  EXPECT_TRUE((*sink)->Flush().ok());
}

TEST_F(SinkOptionsTest, PostgresRefusesMalformedOptions) {
  using Mode = PostgresSinkOptions::Mode;
  EXPECT_THAT(PostgresSink::Create({.dsn = "", .table = "t"}).status().message(),
              HasSubstr("dsn is empty"));
  auto bad = PostgresSink::Create({.dsn = "host=127.0.0.1 port", .table = "t"});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("malformed dsn"));
  auto unknown = PostgresSink::Create({.dsn = "hots=127.0.0.1", .table = "t"});
  EXPECT_THAT(unknown.status().message(), HasSubstr("hots"));
  auto uri = PostgresSink::Create({.dsn = "postgresql://u@[::1", .table = "t"});
  EXPECT_EQ(uri.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(PostgresSink::Create({.dsn = "host=127.0.0.1", .table = ""}).status().message(),
              HasSubstr("table is empty"));
  auto upsert =
      PostgresSink::Create({.dsn = "host=127.0.0.1", .table = "t", .mode = Mode::kUpsert});
  EXPECT_THAT(upsert.status().message(), HasSubstr("upsert needs key columns"));
}

TEST_F(SinkOptionsTest, PostgresNotListeningIsAClearErrorNamingServerAndTable) {
  auto sink = PostgresSink::Create(
      {.dsn = "host=127.0.0.1 port=1 user=u password=secret dbname=app", .table = "events"});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_EQ((*sink)->Describe(), "postgres table events at 127.0.0.1:1/app");
  std::vector<RejectedRow> rejected;
  Status st = (*sink)->Write(*conn_, "batch", {}, &rejected);
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_THAT(st.message(), HasSubstr("table events at 127.0.0.1:1/app"));
  EXPECT_THAT(st.message(), HasSubstr("cannot connect"));
  EXPECT_THAT(st.message(), ::testing::Not(HasSubstr("secret")));
  EXPECT_TRUE((*sink)->Flush().ok());  // nothing was written: nothing to commit
}

}  // namespace
}  // namespace sluice::sinks
