// WriteTxnMarkers on replicated partitions (txn_partition_markers.h, ServeWriteTxnMarkers:
// what a cluster broker's handler runs), with real brokers on 127.0.0.1 in one process
// and the in-process ISR store: a follower refuses with NOT_LEADER_OR_FOLLOWER and writes
// nothing; the leader answers only once every in-sync follower has the marker (its high
// watermark passed it, as acks=all).
#include <gtest/gtest.h>

#include <future>

#include "broker/tests/replica_test_util.h"
#include "broker/txn_partition_markers.h"

namespace sluice::broker {
namespace txn_marker_replica_test {
namespace {

using kafka::ErrorCode;

kafka::WriteTxnMarkersRequest Marker(bool commit) {
  kafka::WriteTxnMarkersRequest req;
  kafka::WriteTxnMarkersRequest::Marker m;
  m.producer_id = 11;
  m.producer_epoch = 0;
  m.transaction_result = commit;
  m.topics.push_back({"t", {0}, {}});
  req.markers.push_back(m);
  return req;
}

ErrorCode Serve(testing::ReplicaNode& n, const kafka::WriteTxnMarkersRequest& req) {
  std::promise<kafka::WriteTxnMarkersResponse> p;
  ServeWriteTxnMarkers(n.broker->context_for_testing().shards, req,
                       [&p](kafka::WriteTxnMarkersResponse r) { p.set_value(std::move(r)); });
  auto r = p.get_future().get();
  if (r.markers.size() != 1 || r.markers[0].topics.size() != 1 ||
      r.markers[0].topics[0].partitions.size() != 1) {
    ADD_FAILURE() << "bad answer shape";
    return ErrorCode::kUnknownServerError;
  }
  EXPECT_EQ(r.markers[0].producer_id, 11);
  return r.markers[0].topics[0].partitions[0].error_code;
}

class TxnMarkerReplicaTest : public testing::ReplicaClusterFixture {};

TEST_F(TxnMarkerReplicaTest, AFollowerRefusesAndTheLeaderAnswersOnceReplicated) {
  StartCluster(3, /*min_isr=*/2);
  EXPECT_EQ(Serve(node(2), Marker(true)), ErrorCode::kNotLeaderOrFollower);
  EXPECT_EQ(node(2).View("t").log_end, 0);
  EXPECT_EQ(node(1).View("t").log_end, 0);

  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(Serve(node(1), Marker(round % 2 == 0)), ErrorCode::kNone) << round;
    const int64_t end = round + 1;  // one control batch per marker
    EXPECT_GE(node(1).View("t").high_watermark, end);
    for (int f = 2; f <= 3; ++f) {
      EXPECT_GE(node(f).View("t").log_end, end) << "follower " << f << " round " << round;
    }
  }
  // Not a partition of this cluster at all.
  kafka::WriteTxnMarkersRequest unknown = Marker(true);
  unknown.markers[0].topics[0].name = "nope";
  EXPECT_EQ(Serve(node(1), unknown), ErrorCode::kUnknownTopicOrPartition);
}

TEST_F(TxnMarkerReplicaTest, TooFewInSyncReplicasRefuseBeforeWriting) {
  MakeNodes(2, "t");
  node(1).Start();
  node(2).Start();
  // The ISR is the leader alone, below min.insync.replicas=2.
  Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1}, /*min_isr=*/2);
  EXPECT_EQ(Serve(node(1), Marker(true)), ErrorCode::kNotEnoughReplicas);
  EXPECT_EQ(node(1).View("t").log_end, 0);
}

}  // namespace
}  // namespace txn_marker_replica_test
}  // namespace sluice::broker
