// The kafka sink's exactly-once mode without a broker that serves transactions: a
// transactional sink waits for InitTransactions at Create and names the transactional.id
// when it cannot; what a plain sink answers to the deferring calls. The transactions
// themselves: src/pipeline/tests/exactly_once_test.cc (the protocol, over a fake cluster)
// and tests/integration/exactly_once_pipeline_test.py (against `sluice serve`).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "sinks/kafka_sink.h"

namespace sluice::sinks {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

TEST(KafkaSinkTxnTest, CreateWaitsForInitTransactionsAndNamesTheId) {
  KafkaSinkOptions o;
  o.brokers = {"127.0.0.1:1"};
  o.topic = "out";
  o.transactional_id = "sluice-orders-0";
  o.transaction_call_timeout = 1000ms;
  auto sink = KafkaSink::Create(o);
  ASSERT_FALSE(sink.ok());
  EXPECT_THAT(sink.status().message(), HasSubstr("transactional.id sluice-orders-0"));
  EXPECT_THAT(sink.status().message(), HasSubstr("init transactions"));
}

TEST(KafkaSinkTxnTest, TransactionalIdIsNotAProperty) {
  KafkaSinkOptions o;
  o.brokers = {"127.0.0.1:1"};
  o.topic = "out";
  o.transactional_id = "a";
  o.properties["transactional.id"] = "b";
  auto sink = KafkaSink::Create(o);
  ASSERT_FALSE(sink.ok());
  EXPECT_EQ(sink.status().code(), StatusCode::kInvalidArgument);
}

TEST(KafkaSinkTxnTest, APlainSinkDoesNotDeferNorCommitOffsets) {
  auto sink = KafkaSink::Create({.brokers = {"127.0.0.1:1"}, .topic = "out"});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_FALSE((*sink)->Defers());
  EXPECT_FALSE((*sink)->CommitsSourceOffsets());
  EXPECT_FALSE((*sink)->transactional());
  auto committed = (*sink)->Commit(true);
  ASSERT_TRUE(committed.ok());
  EXPECT_TRUE(committed->empty());
  EXPECT_TRUE((*sink)->Discard().ok());
  auto dlq = (*sink)->DeadLetterTopic("dlq");
  EXPECT_EQ(dlq.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sluice::sinks
