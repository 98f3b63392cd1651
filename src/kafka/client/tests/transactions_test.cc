// The transactional producer API and the consumer's group metadata without a broker:
// librdkafka's error classes turned into Status codes (producer.h), calls out of order,
// an unreachable coordinator timing out as a retriable error, and the configuration
// combinations librdkafka refuses. Against a broker that serves transactions the same
// calls run in tests/integration/exactly_once_pipeline_test.py.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <utility>

#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"

namespace sluice::kafka::client {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(TransactionsTest, ANonTransactionalProducerRefusesTransactionCalls) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Status st = (*p)->BeginTransaction();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("begin transaction"));
  EXPECT_THAT(st.message(), HasSubstr("_NOT_CONFIGURED"));
  EXPECT_TRUE((*p)->FatalError().ok());
}

TEST(TransactionsTest, BeginBeforeInitIsACallOutOfOrder) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"transactional.id", "t1"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Status st = (*p)->BeginTransaction();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("_STATE"));
}

TEST(TransactionsTest, InitAgainstAnUnreachableCoordinatorIsRetriable) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"transactional.id", "t1"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Status st = (*p)->InitTransactions(1000ms);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("init transactions"));
  EXPECT_THAT(st.message(), HasSubstr("_TIMED_OUT"));
}

TEST(TransactionsTest, SendingOffsetsNeedsGroupMetadata) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"transactional.id", "t1"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Status st = (*p)->SendOffsetsToTransaction({{"in", 0, 5}}, GroupMetadata(), 100ms);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  // With metadata but no transaction begun: librdkafka's state error.
  st = (*p)->SendOffsetsToTransaction({{"in", 0, 5}}, GroupMetadata::Make("g", 3, "m"), 100ms);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("send offsets to transaction"));
}

TEST(TransactionsTest, AMessageTimeoutAboveTheTransactionTimeoutIsRefusedAtCreate) {
  auto p = Producer::Create({{"bootstrap.servers", "127.0.0.1:1"},
                             {"transactional.id", "t1"},
                             {"transaction.timeout.ms", "10000"},
                             {"message.timeout.ms", "60000"}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << p.status().ToString();
  EXPECT_THAT(p.status().message(), HasSubstr("message.timeout.ms"));
}

TEST(TransactionsTest, GroupMetadataIsMoveOnlyAndOwnsItsHandle) {
  GroupMetadata a = GroupMetadata::Make("g", 7, "member-1", "instance-1");
  ASSERT_NE(a.get(), nullptr);
  GroupMetadata b = std::move(a);
  EXPECT_EQ(a.get(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_NE(b.get(), nullptr);
  b = GroupMetadata::Make("g", 8, "member-1");
  EXPECT_NE(b.get(), nullptr);
}

TEST(TransactionsTest, AConsumerHasGroupMetadataOnlyWithAGroup) {
  auto plain = Consumer::Create({{"bootstrap.servers", "127.0.0.1:1"}});
  ASSERT_TRUE(plain.ok());
  auto none = (*plain)->CurrentGroupMetadata();
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition) << none.status().ToString();
  auto member = Consumer::Create({{"bootstrap.servers", "127.0.0.1:1"}, {"group.id", "g"}});
  ASSERT_TRUE(member.ok());
  auto md = (*member)->CurrentGroupMetadata();
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_NE(md->get(), nullptr);
}

}  // namespace
}  // namespace sluice::kafka::client
