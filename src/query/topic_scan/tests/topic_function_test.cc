// topic() against a real `sluice serve` (SLUICE_BINARY; ctest sets it): rows, bounds by
// offset and time, projections, null and binary keys and values, bad arguments.
#include "query/topic_scan/topic_function.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/logging.h"
#include "duck/database.h"
#include "kafka/client/admin.h"
#include "kafka/client/producer.h"
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
    Status st = RegisterTopicFunction(*conn_, {.bootstrap_servers = broker_->bootstrap(), .timeout = 10s});
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
    auto producer = kc::Producer::Create({{"bootstrap.servers", broker_->bootstrap()}, {"linger.ms", "5"}});
    ASSERT_TRUE(producer.ok()) << producer.status().ToString();
    for (int p = 0; p < partitions; ++p) {
      for (int n = 0; n < per_partition; ++n) {
        Status st = (*producer)->Produce(topic, p, fmt::format("k{}", n), fmt::format(R"({{"i": {}, "p": {}}})", n, p),
                                         0, kc::Producer::Value::kCopy, kBaseTimeMs + n * 1000);
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
  EXPECT_EQ(Rows("SELECT count(*), count(DISTINCT (partition, \"offset\")), min(\"offset\"), max(\"offset\") "
                 "FROM topic('events')"),
            std::vector<std::string>{"6000|6000|0|1999"});
  // The values are JSON text DuckDB reads; offsets match the values' counters.
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('events') WHERE (value::JSON->>'i')::BIGINT = \"offset\" "
                 "AND (value::JSON->>'p')::INT = partition AND key = 'k' || \"offset\""),
            std::vector<std::string>{"6000"});
  EXPECT_EQ(Rows("SELECT timestamp FROM topic('events', partition => 1, from_offset => 7, to_offset => 8)"),
            std::vector<std::string>{"2024-05-01 12:00:07+00"});
  // Projection only, and twice in one query.
  EXPECT_EQ(Rows("SELECT (SELECT count(*) FROM topic('events')) - (SELECT count(partition) FROM topic('events'))"),
            std::vector<std::string>{"0"});
}

TEST_F(TopicFunctionTest, OffsetAndTimeBounds) {
  Fill("bounded", 2, 100);
  EXPECT_EQ(Rows("SELECT count(*), min(\"offset\"), max(\"offset\") FROM topic('bounded', from_offset => 10, "
                 "to_offset => 20)"),
            std::vector<std::string>{"20|10|19"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('bounded', partition => 0, from_offset => 95)"),
            std::vector<std::string>{"5"});
  // Seconds 30 .. 39 of each partition.
  EXPECT_EQ(Rows("SELECT count(*), min(\"offset\"), max(\"offset\") FROM topic('bounded', "
                 "from_ts => TIMESTAMPTZ '2024-05-01 12:00:30+00', to_ts => TIMESTAMPTZ '2024-05-01 12:00:40+00')"),
            std::vector<std::string>{"20|30|39"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('bounded', from_offset => 1000)"), std::vector<std::string>{"0"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('bounded', from_ts => TIMESTAMPTZ '2030-01-01 00:00:00+00')"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('bounded', to_offset => 0)"), std::vector<std::string>{"0"});
}

TEST_F(TopicFunctionTest, NullAndBinaryKeysAndValues) {
  auto admin = kc::Admin::Create({{"bootstrap.servers", broker_->bootstrap()}});
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE((*admin)->CreateTopic("odd", 1, 1, {}, 10s).ok());
  auto producer = kc::Producer::Create({{"bootstrap.servers", broker_->bootstrap()}});
  ASSERT_TRUE(producer.ok());
  ASSERT_TRUE((*producer)->Produce("odd", 0, std::string_view(), "plain").ok());
  ASSERT_TRUE((*producer)->Produce("odd", 0, "key", std::string_view()).ok());
  ASSERT_TRUE((*producer)->Produce("odd", 0, std::string_view("\xff\xfe", 2), std::string_view("a\xc3", 2)).ok());
  ASSERT_TRUE((*producer)->Flush(30s).ok());
  EXPECT_EQ(Rows("SELECT \"offset\", key, value, hex(key_bytes), hex(value_bytes) FROM topic('odd') ORDER BY 1"),
            (std::vector<std::string>{"0|NULL|plain|NULL|706C61696E", "1|key|NULL|6B6579|NULL",
                                      "2|NULL|NULL|FFFE|61C3"}));
}

TEST_F(TopicFunctionTest, BadArgumentsAreClearErrors) {
  Fill("small", 2, 3);
  EXPECT_NE(Error("SELECT * FROM topic('no_such_topic')").find("no such topic"), std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('small', partition => 5)").find("partition 5 does not exist"),
            std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('small', from_offset => -1)").find("negative"), std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic(NULL)").find("NULL"), std::string::npos);
  EXPECT_NE(Error("SELECT * FROM topic('small', colour => 1)"), "<no error>");
  EXPECT_NE(Error("SELECT * FROM topic('small', from_ts => 'yesterday')"), "<no error>");
  // The connection still works.
  EXPECT_EQ(Rows("SELECT count(*) FROM topic('small')"), std::vector<std::string>{"6"});
}

}  // namespace
}  // namespace sluice::query
