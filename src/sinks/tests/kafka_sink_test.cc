// KafkaSink against `sluice serve` (started by the test on a free port): every row arrives
// as one JSON object, read back with kafka::client::Consumer; exactly-once, a transaction
// the broker aborted at its timeout is lost and the next one commits, a producer fenced by
// another live one is fatal. The broker binary comes from SLUICE_BINARY (ctest sets it);
// without it the test skips.
#include "sinks/kafka_sink.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "duck/database.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "sluice_process.h"

namespace sluice::sinks {
namespace {

using namespace std::chrono_literals;
namespace kc = kafka::client;

class KafkaSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* binary = std::getenv("SLUICE_BINARY");
    if (binary == nullptr) GTEST_SKIP() << "SLUICE_BINARY is not set (ctest sets it)";
    SetLogLevel(LogLevel::kWarn);
    // Transactions past their timeout are aborted within 100 ms of it (the exactly-once
    // tests below).
    broker_ = std::make_unique<integration::SluiceProcess>(
        binary, "transactions:\n  abort_check_interval: 100\n");
    std::string error = broker_->Start();
    ASSERT_EQ(error, "");
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(conn_->Execute("SET TimeZone = 'UTC'").ok());
  }
  void TearDown() override {
    if (broker_ != nullptr && HasFailure()) broker_->DumpLogs();
    if (broker_ != nullptr && !broker_->bootstrap().empty()) {
      EXPECT_EQ(broker_->Stop(), 0);
    }
    SetLogLevel(LogLevel::kInfo);
  }

  // Every record of `topic` (partitions 0..partitions-1) until `want` arrived, as
  // "key-is-null:value" strings, sorted.
  std::vector<std::string> ReadBack(const std::string& topic, int partitions, size_t want) {
    auto consumer = kc::Consumer::Create({{"bootstrap.servers", broker_->bootstrap()}});
    EXPECT_TRUE(consumer.ok()) << consumer.status().ToString();
    if (!consumer.ok()) return {};
    std::vector<kc::TopicPartition> assign;
    for (int p = 0; p < partitions; ++p) assign.push_back({topic, p, kc::kOffsetBeginning});
    EXPECT_TRUE((*consumer)->Assign(assign).ok());
    std::vector<std::string> got;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
      auto batch = (*consumer)->Poll(100ms);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) break;
      for (const Status& e : batch->errors()) ADD_FAILURE() << e.ToString();
      for (size_t i = 0; i < batch->size(); ++i) {
        kc::Message m = (*batch)[i];
        got.push_back(fmt::format("{}:{}", m.key.data() == nullptr ? "null" : "set", m.value));
      }
    }
    std::sort(got.begin(), got.end());
    return got;
  }

  void CreateTopic(const std::string& topic, int partitions) {
    auto admin = kc::Admin::Create({{"bootstrap.servers", broker_->bootstrap()}});
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    Status st = (*admin)->CreateTopic(topic, partitions, 1, {}, 10s);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  std::unique_ptr<integration::SluiceProcess> broker_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(KafkaSinkTest, EachRowIsOneJsonRecordAndFlushWaitsForTheAcks) {
  CreateTopic("results", 2);
  auto sink = KafkaSink::Create(
      {.brokers = {broker_->bootstrap()}, .topic = "results", .properties = {{"linger.ms", "5"}}});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_EQ((*sink)->Describe(), "kafka topic results");
  std::vector<RejectedRow> rejected;

  ASSERT_TRUE(conn_
                  ->Execute(R"sql(CREATE OR REPLACE TABLE batch AS SELECT * FROM (VALUES
      ('Paris', 3::BIGINT, 2.5::DOUBLE, TIMESTAMPTZ '2024-05-01 10:00:00+00',
       {'lat': 48.85, 'tags': ['a', 'b']}),
      ('Lyon', NULL, NULL, NULL, NULL)
    ) t(city, n, amount, ts, extra))sql")
                  .ok());
  Status st = (*sink)->Write(*conn_, "batch", {}, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  // The pipeline replaces its table: the next batch, 1000 rows.
  ASSERT_TRUE(conn_
                  ->Execute("CREATE OR REPLACE TABLE batch AS SELECT range AS i, "
                            "'v' || range AS s FROM range(1000)")
                  .ok());
  ASSERT_TRUE((*sink)->Write(*conn_, "batch", {}, &rejected).ok());
  st = (*sink)->Flush();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(rejected.empty());

  std::vector<std::string> want = {
      R"(null:{"city":"Lyon","n":null,"amount":null,"ts":null,"extra":null})",
      R"(null:{"city":"Paris","n":3,"amount":2.5,"ts":"2024-05-01 10:00:00+00",)"
      R"("extra":{"lat":48.85,"tags":["a","b"]}})",
  };
  for (int i = 0; i < 1000; ++i) want.push_back(fmt::format(R"(null:{{"i":{0},"s":"v{0}"}})", i));
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ReadBack("results", 2, want.size()), want);
}

TEST_F(KafkaSinkTest, ARecordLargerThanTheProducerAllowsIsRejectedAndTheOthersDelivered) {
  CreateTopic("sized", 1);
  auto sink = KafkaSink::Create({.brokers = {broker_->bootstrap()},
                                 .topic = "sized",
                                 .properties = {{"message.max.bytes", "1000"}}});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  ASSERT_TRUE(conn_
                  ->Execute("CREATE TABLE batch AS SELECT * FROM (VALUES (1, 'small'), "
                            "(2, repeat('x', 5000))) t(id, body)")
                  .ok());
  std::vector<RejectedRow> rejected;
  Status st = (*sink)->Write(*conn_, "batch", {}, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = (*sink)->Flush();
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_THAT(rejected[0].row_json, ::testing::StartsWith(R"({"id":2,"body":"xxx)"));
  EXPECT_THAT(rejected[0].reason, ::testing::HasSubstr("MSG_SIZE_TOO_LARGE"));
  EXPECT_EQ(ReadBack("sized", 1, 1), (std::vector<std::string>{R"(null:{"id":1,"body":"small"})"}));
}

// Exactly-once: a transaction left open past transaction.timeout.ms is aborted by the
// broker, which bumps the producer's epoch (librdkafka: a fatal "fenced" error). The sink
// tells it from a zombie by the transaction's age, makes a new producer, and reports the
// transaction lost ("timeout"); the next transaction commits, and only its rows and offsets
// are visible to read_committed.
TEST_F(KafkaSinkTest, ATransactionTheBrokerTimedOutIsLostAndTheNextOneCommits) {
  CreateTopic("eos-in", 1);
  CreateTopic("eos-out", 1);
  auto sink = KafkaSink::Create({.brokers = {broker_->bootstrap()},
                                 .topic = "eos-out",
                                 .properties = {{"transaction.timeout.ms", "1000"}},
                                 .transactional_id = "eos-timeout",
                                 .transaction_call_timeout = 30s});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  KafkaSink& s = **sink;
  // A consumer of a group with no members commits with generation -1 (an admin's commit).
  s.SetGroupMetadata([] { return kc::GroupMetadata::Make("eos-g", -1, ""); });
  std::vector<RejectedRow> rejected;
  ASSERT_TRUE(conn_->Execute("CREATE TABLE batch AS SELECT 'late' AS v").ok());
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"eos-in", 0}, 5}}, &rejected).ok());
  ASSERT_TRUE(s.Flush().ok());
  // The transaction outlives its timeout (1 s) and the broker's next check (100 ms).
  std::this_thread::sleep_for(2500ms);
  Result<SourceOffsets> committed = s.Commit(false);
  ASSERT_FALSE(committed.ok());
  EXPECT_EQ(committed.status().code(), StatusCode::kAborted) << committed.status().ToString();
  EXPECT_EQ(s.TransactionLost(), "timeout");
  EXPECT_FALSE(s.in_transaction());

  ASSERT_TRUE(conn_->Execute("CREATE OR REPLACE TABLE batch AS SELECT 'again' AS v").ok());
  Status st = s.Write(*conn_, "batch", {{{"eos-in", 0}, 5}}, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(s.TransactionLost(), "");
  ASSERT_TRUE(s.Flush().ok());
  committed = s.Commit(false);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(*committed, (SourceOffsets{{{"eos-in", 0}, 5}}));
  // The lost transaction's record has the lower offset: read_committed skips it.
  EXPECT_EQ(ReadBack("eos-out", 1, 1), std::vector<std::string>{R"(null:{"v":"again"})"});

  auto group =
      kc::Consumer::Create({{"bootstrap.servers", broker_->bootstrap()}, {"group.id", "eos-g"}});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  auto offsets = (*group)->Committed({{"eos-in", 0}}, 10s);
  ASSERT_TRUE(offsets.ok()) << offsets.status().ToString();
  EXPECT_EQ(offsets->at(0).offset, 5);
}

// A second live producer with the same transactional.id fences the first inside its
// transaction's timeout: fatal (the pipeline stops), not a lost transaction.
TEST_F(KafkaSinkTest, AProducerFencedByAnotherLiveOneIsFatal) {
  CreateTopic("zombie-out", 1);
  KafkaSinkOptions options{.brokers = {broker_->bootstrap()},
                           .topic = "zombie-out",
                           .transactional_id = "eos-zombie",
                           .transaction_call_timeout = 30s};
  auto zombie = KafkaSink::Create(options);
  ASSERT_TRUE(zombie.ok()) << zombie.status().ToString();
  (*zombie)->SetGroupMetadata([] { return kc::GroupMetadata::Make("zombie-g", -1, ""); });
  std::vector<RejectedRow> rejected;
  ASSERT_TRUE(conn_->Execute("CREATE TABLE batch AS SELECT 'zombie' AS v").ok());
  ASSERT_TRUE((*zombie)->Write(*conn_, "batch", {{{"zombie-out", 0}, 1}}, &rejected).ok());
  ASSERT_TRUE((*zombie)->Flush().ok());
  auto successor = KafkaSink::Create(options);  // InitTransactions: fences the first
  ASSERT_TRUE(successor.ok()) << successor.status().ToString();
  Result<SourceOffsets> committed = (*zombie)->Commit(false);
  ASSERT_FALSE(committed.ok());
  EXPECT_EQ(committed.status().code(), StatusCode::kFailedPrecondition)
      << committed.status().ToString();
  EXPECT_THAT(committed.status().message(), ::testing::HasSubstr("another producer"));
  EXPECT_EQ((*zombie)->TransactionLost(), "");
}

}  // namespace
}  // namespace sluice::sinks
