// The transaction coordinator over the wire, against a real broker: Kafka's answers per
// request version (PRODUCER_FENCED or INVALID_PRODUCER_EPOCH), AddPartitionsToTxn with an
// unknown partition and in its broker-only versions, WriteTxnMarkers from a client,
// Describe/ListTransactions, a commit through the real partitions (markers, LSO), and the
// state surviving a restart.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "broker/broker.h"
#include "broker/server.h"
#include "broker/tests/broker_test_util.h"

namespace sluice::broker {
namespace broker_txn_coordinator_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Client;

class BrokerTxnCoordinatorTest : public testing::BrokerFixture {
 protected:
  kafka::InitProducerIdResponse Init(Client& c, const std::string& id, int16_t version = 4,
                                     int64_t pid = -1, int16_t epoch = -1) {
    kafka::InitProducerIdRequest req;
    req.transactional_id = id;
    req.transaction_timeout_ms = 60000;
    req.producer_id = pid;
    req.producer_epoch = epoch;
    return c.Call<kafka::InitProducerIdResponse>(ApiKey::kInitProducerId, version, req);
  }
  ErrorCode Add(Client& c, const std::string& id, int64_t pid, int16_t epoch, int16_t version,
                const std::string& topic = "t", int32_t partition = 0) {
    kafka::AddPartitionsToTxnRequest req;
    req.v3_and_below_transactional_id = id;
    req.v3_and_below_producer_id = pid;
    req.v3_and_below_producer_epoch = epoch;
    req.v3_and_below_topics.push_back({topic, {partition}, {}});
    auto resp =
        c.Call<kafka::AddPartitionsToTxnResponse>(ApiKey::kAddPartitionsToTxn, version, req);
    return resp.results_by_topic_v3_and_below.at(0).partitions.at(0).error_code;
  }
  ErrorCode End(Client& c, const std::string& id, int64_t pid, int16_t epoch, bool commit,
                int16_t version = 3) {
    kafka::EndTxnRequest req;
    req.transactional_id = id;
    req.producer_id = pid;
    req.producer_epoch = epoch;
    req.committed = commit;
    return c.Call<kafka::EndTxnResponse>(ApiKey::kEndTxn, version, req).error_code;
  }
  kafka::DescribeTransactionsResponse::State Describe(Client& c, const std::string& id) {
    kafka::DescribeTransactionsRequest req;
    req.transactional_ids = {id};
    return c.Call<kafka::DescribeTransactionsResponse>(ApiKey::kDescribeTransactions, 0, req)
        .transaction_states.at(0);
  }
};

TEST_F(BrokerTxnCoordinatorTest, FencedEpochErrorDependsOnTheVersion) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 2).topics[0].error_code, ErrorCode::kNone);
  auto p = Init(c, "tx");
  ASSERT_EQ(p.error_code, ErrorCode::kNone);
  const int16_t stale = static_cast<int16_t>(p.producer_epoch + 5);
  EXPECT_EQ(Add(c, "tx", p.producer_id, stale, 1), ErrorCode::kInvalidProducerEpoch);
  EXPECT_EQ(Add(c, "tx", p.producer_id, stale, 2), ErrorCode::kProducerFenced);
  EXPECT_EQ(Add(c, "tx", p.producer_id + 1, p.producer_epoch, 3),
            ErrorCode::kInvalidProducerIdMapping);
  kafka::AddOffsetsToTxnRequest off;
  off.transactional_id = "tx";
  off.producer_id = p.producer_id;
  off.producer_epoch = stale;
  off.group_id = "g";
  EXPECT_EQ(c.Call<kafka::AddOffsetsToTxnResponse>(ApiKey::kAddOffsetsToTxn, 1, off).error_code,
            ErrorCode::kInvalidProducerEpoch);
  EXPECT_EQ(c.Call<kafka::AddOffsetsToTxnResponse>(ApiKey::kAddOffsetsToTxn, 3, off).error_code,
            ErrorCode::kProducerFenced);
  ASSERT_EQ(Add(c, "tx", p.producer_id, p.producer_epoch, 3), ErrorCode::kNone);
  EXPECT_EQ(End(c, "tx", p.producer_id, stale, true, 1), ErrorCode::kInvalidProducerEpoch);
  EXPECT_EQ(End(c, "tx", p.producer_id, stale, true, 2), ErrorCode::kProducerFenced);
  // InitProducerId with a foreign producer id: fenced, INVALID_PRODUCER_EPOCH before v4.
  EXPECT_EQ(Init(c, "tx", 3, p.producer_id + 7, 0).error_code, ErrorCode::kInvalidProducerEpoch);
  EXPECT_EQ(Init(c, "tx", 4, p.producer_id + 7, 0).error_code, ErrorCode::kProducerFenced);
  EXPECT_EQ(Init(c, "tx", 4, p.producer_id, -1).error_code, ErrorCode::kInvalidRequest);
  kafka::InitProducerIdRequest too_long;
  too_long.transactional_id = "tx2";
  too_long.transaction_timeout_ms = 900001;
  EXPECT_EQ(c.Call<kafka::InitProducerIdResponse>(ApiKey::kInitProducerId, 4, too_long).error_code,
            ErrorCode::kInvalidTransactionTimeout);
}

TEST_F(BrokerTxnCoordinatorTest, UnknownPartitionsAndBrokerOnlyRequestsAreRefused) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  auto p = Init(c, "tx");
  kafka::AddPartitionsToTxnRequest req;
  req.v3_and_below_transactional_id = "tx";
  req.v3_and_below_producer_id = p.producer_id;
  req.v3_and_below_producer_epoch = p.producer_epoch;
  req.v3_and_below_topics.push_back({"t", {0, 5}, {}});
  auto resp = c.Call<kafka::AddPartitionsToTxnResponse>(ApiKey::kAddPartitionsToTxn, 3, req);
  ASSERT_EQ(resp.results_by_topic_v3_and_below.size(), 1u);
  const auto& parts = resp.results_by_topic_v3_and_below[0].partitions;
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].error_code, ErrorCode::kOperationNotAttempted);
  EXPECT_EQ(parts[1].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(Describe(c, "tx").transaction_state, "Empty");  // nothing was added

  kafka::AddPartitionsToTxnRequest v4;
  v4.transactions.push_back({"tx", p.producer_id, p.producer_epoch, true, {{"t", {0}, {}}}, {}});
  EXPECT_EQ(
      c.Call<kafka::AddPartitionsToTxnResponse>(ApiKey::kAddPartitionsToTxn, 4, v4).error_code,
      ErrorCode::kClusterAuthorizationFailed);

  kafka::WriteTxnMarkersRequest markers;
  markers.markers.push_back({p.producer_id, p.producer_epoch, true, {{"t", {0}, {}}}, 0, {}});
  auto wm = c.Call<kafka::WriteTxnMarkersResponse>(ApiKey::kWriteTxnMarkers, 1, markers);
  ASSERT_EQ(wm.markers.size(), 1u);
  EXPECT_EQ(wm.markers[0].topics.at(0).partitions.at(0).error_code,
            ErrorCode::kClusterAuthorizationFailed);
  // The connection goes on.
  EXPECT_EQ(Describe(c, "tx").error_code, ErrorCode::kNone);
}

TEST_F(BrokerTxnCoordinatorTest, CommitThroughThePartitionsAndRestart) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 2).topics[0].error_code, ErrorCode::kNone);
  auto p = Init(c, "tx");
  ASSERT_EQ(Add(c, "tx", p.producer_id, p.producer_epoch, 3, "t", 0), ErrorCode::kNone);
  ASSERT_EQ(Add(c, "tx", p.producer_id, p.producer_epoch, 3, "t", 1), ErrorCode::kNone);
  auto d = Describe(c, "tx");
  EXPECT_EQ(d.transaction_state, "Ongoing");
  ASSERT_EQ(d.topics.size(), 1u);
  EXPECT_EQ(d.topics[0].partitions, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(End(c, "tx", p.producer_id, p.producer_epoch, true), ErrorCode::kNone);
  // The markers reach both partitions (no data was produced: they only close nothing).
  for (int i = 0; i < 2000 && Describe(c, "tx").transaction_state != "CompleteCommit"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(Describe(c, "tx").transaction_state, "CompleteCommit");
  kafka::ListTransactionsRequest list;
  list.state_filters = {"CompleteCommit"};
  auto listed = c.Call<kafka::ListTransactionsResponse>(ApiKey::kListTransactions, 1, list);
  ASSERT_EQ(listed.transaction_states.size(), 1u);
  EXPECT_EQ(listed.transaction_states[0].transactional_id, "tx");
  EXPECT_EQ(listed.transaction_states[0].producer_id, p.producer_id);

  Stop();
  Start();
  Client again(port());
  auto after = Describe(again, "tx");
  EXPECT_EQ(after.transaction_state, "CompleteCommit");
  EXPECT_EQ(after.producer_id, p.producer_id);
  auto next = Init(again, "tx");
  EXPECT_EQ(next.producer_id, p.producer_id);
  EXPECT_EQ(next.producer_epoch, p.producer_epoch + 1);
  EXPECT_EQ(Describe(again, "unknown").error_code, ErrorCode::kTransactionalIdNotFound);
}

}  // namespace
}  // namespace broker_txn_coordinator_test
}  // namespace sluice::broker
