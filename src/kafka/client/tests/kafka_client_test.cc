// kafka/client without a broker: configuration errors become InvalidArgument naming the
// property, local limits are reported at once, and an unreachable bootstrap address ends
// in an error after the configured timeouts instead of hanging.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "base/logging.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"

namespace sluice::kafka::client {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A loopback port nobody listens on: bound by the kernel's choice, then closed, so a
// connection is refused at once.
std::string ClosedAddress() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "cannot bind a loopback socket";
  }
  ::close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

class KafkaClientTest : public ::testing::Test {
 protected:
  // librdkafka logs every refused connection; the tests expect them.
  void SetUp() override { SetLogLevel(LogLevel::kOff); }
  void TearDown() override { SetLogLevel(LogLevel::kInfo); }
};

TEST_F(KafkaClientTest, LibraryVersionIsKnown) { EXPECT_FALSE(LibraryVersion().empty()); }

TEST_F(KafkaClientTest, UnknownPropertyIsInvalidArgumentNamingIt) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"no.such.property", "1"}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("producer config: no.such.property = '1'"));
  EXPECT_THAT(p.status().message(), HasSubstr("No such configuration property"));
}

TEST_F(KafkaClientTest, BadValueIsInvalidArgumentWithLibrdkafkasReason) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"linger.ms", "banana"}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("linger.ms = 'banana'"));

  auto c = Consumer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"fetch.min.bytes", "-5"}});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("consumer config: fetch.min.bytes = '-5'"));

  auto a = Admin::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"acks", "most"}});
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("admin config: acks = 'most'"));
}

TEST_F(KafkaClientTest, CheckConfigFindsBadPropertiesWithoutAClient) {
  EXPECT_TRUE(CheckConfig({{"linger.ms", "5"}, {"acks", "all"}}).ok());
  Status st = CheckConfig({{"linger.ms", "5"}, {"compression.codec", "brotli"}});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("compression.codec = 'brotli'"));
}

TEST_F(KafkaClientTest, BorrowedValueIsReportedLikeACopiedOne) {
  std::vector<size_t> sizes;
  auto p = Producer::Create({{"bootstrap.servers", ClosedAddress()}, {"message.timeout.ms", "200"}},
                            [&](const DeliveryReport& r) { sizes.push_back(r.value_bytes); });
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::string value(100, 'v');  // outlives the producer's use of it
  ASSERT_TRUE((*p)->Produce("events", kAnyPartition, {}, value, 1, Producer::Value::kBorrow).ok());
  ASSERT_TRUE((*p)->Produce("events", kAnyPartition, "k", value, 2).ok());
  EXPECT_TRUE((*p)->Flush(10s).ok());
  EXPECT_THAT(sizes, ::testing::ElementsAre(100u, 100u));
}

TEST_F(KafkaClientTest, StatisticsArriveThroughPoll) {
  std::string stats;
  auto p =
      Producer::Create({{"bootstrap.servers", ClosedAddress()}, {"statistics.interval.ms", "100"}},
                       nullptr, [&](std::string_view json) { stats = json; });
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (int i = 0; i < 50 && stats.empty(); ++i) (*p)->Poll(100ms);
  EXPECT_THAT(stats, HasSubstr("\"type\": \"producer\""));
}

TEST_F(KafkaClientTest, InconsistentConfigFailsAtCreate) {
  // Each value is valid alone; rd_kafka_new checks them together.
  auto p = Producer::Create(
      {{"bootstrap.servers", "127.0.0.1:1"}, {"enable.idempotence", "true"}, {"acks", "1"}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("producer: "));
}

TEST_F(KafkaClientTest, OversizedRecordIsRefusedAtProduce) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"message.max.bytes", "1000"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::string value(5000, 'x');
  Status st = (*p)->Produce("t", 0, {}, value);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("MSG_SIZE_TOO_LARGE"));
  EXPECT_EQ((*p)->counters().produced, 0u);
}

TEST_F(KafkaClientTest, FullLocalQueueIsResourceExhausted) {
  auto p = Producer::Create(
      {{"bootstrap.servers", ClosedAddress()}, {"queue.buffering.max.messages", "2"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE((*p)->Produce("t", 0, "k", "v1").ok());
  EXPECT_TRUE((*p)->Produce("t", 0, "k", "v2").ok());
  Status st = (*p)->Produce("t", 0, "k", "v3");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_EQ((*p)->counters().produced, 2u);
  EXPECT_GE((*p)->InFlight(), 2);  // the records, and any queued error events
}

TEST_F(KafkaClientTest, UnreachableBrokerFailsDeliveryAfterMessageTimeout) {
  std::vector<DeliveryReport> reports;
  std::vector<std::string> topics;
  auto p =
      Producer::Create({{"bootstrap.servers", ClosedAddress()}, {"message.timeout.ms", "300"}},
                       [&](const DeliveryReport& r) {
                         reports.push_back(r);
                         topics.emplace_back(r.topic);  // the view lives only during the callback
                       });
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE((*p)->Produce("events", 3, "key", "value", 42).ok());
  Status flushed = (*p)->Flush(10s);
  EXPECT_TRUE(flushed.ok()) << flushed.ToString();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(topics[0], "events");
  EXPECT_EQ(reports[0].partition, 3);
  EXPECT_EQ(reports[0].cookie, 42u);
  EXPECT_EQ(reports[0].value_bytes, 5u);
  EXPECT_EQ(reports[0].status.code(), StatusCode::kAborted);
  EXPECT_THAT(reports[0].status.message(), HasSubstr("delivery to events [3]"));
  EXPECT_THAT(reports[0].status.message(), HasSubstr("MSG_TIMED_OUT"));
  ProducerCounters c = (*p)->counters();
  EXPECT_EQ(c.produced, 1u);
  EXPECT_EQ(c.delivered, 0u);
  EXPECT_EQ(c.failed, 1u);
}

TEST_F(KafkaClientTest, FlushTimesOutWhileRecordsAreInFlight) {
  auto p =
      Producer::Create({{"bootstrap.servers", ClosedAddress()}, {"message.timeout.ms", "60000"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE((*p)->Produce("events", 0, {}, "value").ok());
  Status st = (*p)->Flush(200ms);
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("still in flight"));
}

TEST_F(KafkaClientTest, UnreachableBrokerFailsAdminCallsAfterTheirTimeout) {
  auto a = Admin::Create({{"bootstrap.servers", ClosedAddress()}});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Status created = (*a)->CreateTopic("events", 4, 1, {}, 500ms);
  EXPECT_FALSE(created.ok());
  EXPECT_THAT(created.message(), HasSubstr("create topic 'events'"));
  EXPECT_THAT(created.message(), HasSubstr("TIMED_OUT"));

  Result<Watermarks> w = (*a)->QueryWatermarks("events", 0, 500ms);
  EXPECT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), HasSubstr("watermarks of events [0]"));

  Result<int> n = (*a)->PartitionCount("events", 500ms);
  EXPECT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), HasSubstr("metadata of topic 'events'"));
}

TEST_F(KafkaClientTest, BadTopicSpecIsRefusedLocally) {
  auto a = Admin::Create({{"bootstrap.servers", ClosedAddress()}});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Status st = (*a)->CreateTopic("events", 0, 1, {}, 500ms);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("partitions must be at least 1"));
  st = (*a)->CreateTopic("events", 1, 0, {}, 500ms);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  st = (*a)->CreateTopic("", 1, 1, {}, 500ms);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

TEST_F(KafkaClientTest, AssignedConsumerPollsNothingFromAnUnreachableBroker) {
  auto c =
      Consumer::Create({{"bootstrap.servers", ClosedAddress()}, {"enable.partition.eof", "true"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(
      (*c)->Assign({{"events", 0, kOffsetBeginning}, {"events", 1, kOffsetBeginning}}).ok());
  Result<MessageBatch> batch = (*c)->Poll(200ms);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->size(), 0u);
  EXPECT_TRUE(batch->ends().empty());
  // Moving a batch keeps exactly one owner of its records.
  MessageBatch moved = std::move(*batch);
  moved = MessageBatch();
  EXPECT_EQ(moved.size(), 0u);
}

TEST_F(KafkaClientTest, ConsumerRefusesCallsOutOfOrder) {
  auto c = Consumer::Create({{"bootstrap.servers", ClosedAddress()}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->Poll(10ms).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*c)->Subscribe({"events"}).code(), StatusCode::kFailedPrecondition);  // no group.id
  ASSERT_TRUE((*c)->Assign({{"events", 0, kOffsetEnd}}).ok());
  EXPECT_EQ((*c)->Assign({{"events", 1, kOffsetEnd}}).code(), StatusCode::kFailedPrecondition);
  Status commit = (*c)->Commit({{"events", 0, 10}});
  EXPECT_EQ(commit.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(commit.message(), HasSubstr("needs Subscribe"));
}

TEST_F(KafkaClientTest, SubscribedConsumerStartsWithGroupId) {
  auto c = Consumer::Create({{"bootstrap.servers", ClosedAddress()}, {"group.id", "g"}});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->Subscribe({"events"}).ok());
  Result<MessageBatch> batch = (*c)->Poll(100ms);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->size(), 0u);
}

}  // namespace
}  // namespace sluice::kafka::client
