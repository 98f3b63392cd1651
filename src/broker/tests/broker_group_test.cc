// The group APIs through the broker over real sockets: FindCoordinator, a member's whole
// life (join with MEMBER_ID_REQUIRED, sync, heartbeat, commit, fetch, leave), committed
// offsets across a restart, TxnOffsetCommit's pending offsets and OffsetFetch's
// require_stable, the internal topic's name being reserved and the offsets log cleaned by
// the broker's cleaner. The group
// semantics themselves are tested in group_coordinator_test.cc; the real consumers in
// tests/integration.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "broker/broker.h"
#include "broker/server.h"
#include "broker/tests/broker_test_util.h"

namespace sluice::broker {
namespace broker_group_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Client;

class BrokerGroupTest : public testing::BrokerFixture {
 protected:
  void SetUp() override {
    options_.groups.initial_rebalance_delay_ms = 0;
    options_.groups.min_session_timeout_ms = 100;
    BrokerFixture::SetUp();
  }
  kafka::OffsetFetchResponse::Partition Committed(Client& c, const std::string& group,
                                                  bool require_stable = false) {
    kafka::OffsetFetchRequest req;
    req.group_id = group;
    req.require_stable = require_stable;
    req.topics.emplace();
    req.topics->push_back({"t", {0}, {}});
    auto resp = c.Call<kafka::OffsetFetchResponse>(ApiKey::kOffsetFetch, 7, req);
    return resp.topics.at(0).partitions.at(0);
  }
  ErrorCode CommitStandalone(Client& c, const std::string& group, int64_t offset) {
    kafka::OffsetCommitRequest commit;
    commit.group_id = group;
    commit.generation_id_or_member_epoch = -1;
    commit.topics.push_back({"t", {{0, offset, -1, -1, "", {}}}, {}});
    auto r = c.Call<kafka::OffsetCommitResponse>(ApiKey::kOffsetCommit, 8, commit);
    return r.topics.at(0).partitions.at(0).error_code;
  }
};

TEST_F(BrokerGroupTest, FindCoordinatorNamesThisBroker) {
  Client c(port());
  kafka::FindCoordinatorRequest req;
  req.key = "g";
  auto v3 = c.Call<kafka::FindCoordinatorResponse>(ApiKey::kFindCoordinator, 3, req);
  EXPECT_EQ(v3.error_code, ErrorCode::kNone);
  EXPECT_EQ(v3.node_id, Broker::kNodeId);
  EXPECT_EQ(v3.host, "127.0.0.1");
  EXPECT_EQ(v3.port, port());
  req.coordinator_keys = {"a", "b"};
  auto v4 = c.Call<kafka::FindCoordinatorResponse>(ApiKey::kFindCoordinator, 4, req);
  ASSERT_EQ(v4.coordinators.size(), 2u);
  EXPECT_EQ(v4.coordinators[1].key, "b");
  EXPECT_EQ(v4.coordinators[1].port, port());
  req.key_type = 1;  // the transaction coordinator: this node too
  auto txn = c.Call<kafka::FindCoordinatorResponse>(ApiKey::kFindCoordinator, 3, req);
  EXPECT_EQ(txn.error_code, ErrorCode::kNone);
  EXPECT_EQ(txn.port, port());
  req.key_type = 2;
  EXPECT_EQ(c.Call<kafka::FindCoordinatorResponse>(ApiKey::kFindCoordinator, 3, req).error_code,
            ErrorCode::kInvalidRequest);
}

TEST_F(BrokerGroupTest, MemberLifecycleAndOffsetsSurviveRestart) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  kafka::JoinGroupRequest join;
  join.group_id = "g";
  join.session_timeout_ms = 10000;
  join.rebalance_timeout_ms = 10000;
  join.protocol_type = "consumer";
  join.protocols.push_back({"range", {1, 2, 3}, {}});
  auto first = c.Call<kafka::JoinGroupResponse>(ApiKey::kJoinGroup, 7, join);
  ASSERT_EQ(first.error_code, ErrorCode::kMemberIdRequired);
  ASSERT_FALSE(first.member_id.empty());
  join.member_id = first.member_id;
  auto joined = c.Call<kafka::JoinGroupResponse>(ApiKey::kJoinGroup, 7, join);
  ASSERT_EQ(joined.error_code, ErrorCode::kNone);
  EXPECT_EQ(joined.leader, joined.member_id);
  EXPECT_EQ(joined.generation_id, 1);
  ASSERT_EQ(joined.members.size(), 1u);

  kafka::SyncGroupRequest sync;
  sync.group_id = "g";
  sync.generation_id = joined.generation_id;
  sync.member_id = joined.member_id;
  sync.protocol_type = "consumer";  // mandatory from v5, as in Kafka
  sync.protocol_name = "range";
  sync.assignments.push_back({joined.member_id, {9, 9}, {}});
  auto synced = c.Call<kafka::SyncGroupResponse>(ApiKey::kSyncGroup, 5, sync);
  EXPECT_EQ(synced.error_code, ErrorCode::kNone);
  EXPECT_EQ(synced.assignment, (std::vector<uint8_t>{9, 9}));

  kafka::HeartbeatRequest hb;
  hb.group_id = "g";
  hb.generation_id = joined.generation_id;
  hb.member_id = joined.member_id;
  EXPECT_EQ(c.Call<kafka::HeartbeatResponse>(ApiKey::kHeartbeat, 4, hb).error_code,
            ErrorCode::kNone);

  kafka::OffsetCommitRequest commit;
  commit.group_id = "g";
  commit.generation_id_or_member_epoch = joined.generation_id;
  commit.member_id = joined.member_id;
  commit.topics.push_back({"t", {{0, 42, -1, -1, "meta", {}}}, {}});
  commit.topics.push_back({"missing", {{0, 1, -1, -1, std::nullopt, {}}}, {}});
  auto committed = c.Call<kafka::OffsetCommitResponse>(ApiKey::kOffsetCommit, 8, commit);
  EXPECT_EQ(committed.topics.at(0).partitions.at(0).error_code, ErrorCode::kNone);
  EXPECT_EQ(committed.topics.at(1).partitions.at(0).error_code,
            ErrorCode::kUnknownTopicOrPartition);
  auto got = Committed(c, "g");
  EXPECT_EQ(got.committed_offset, 42);
  EXPECT_EQ(got.metadata, "meta");

  kafka::DescribeGroupsRequest describe;
  describe.groups = {"g"};
  auto d = c.Call<kafka::DescribeGroupsResponse>(ApiKey::kDescribeGroups, 5, describe);
  ASSERT_EQ(d.groups.size(), 1u);
  EXPECT_EQ(d.groups[0].group_state, "Stable");
  ASSERT_EQ(d.groups[0].members.size(), 1u);
  EXPECT_EQ(d.groups[0].members[0].client_host, "/127.0.0.1");

  kafka::LeaveGroupRequest leave;
  leave.group_id = "g";
  leave.members.push_back({joined.member_id, std::nullopt, std::nullopt, {}});
  EXPECT_EQ(c.Call<kafka::LeaveGroupResponse>(ApiKey::kLeaveGroup, 5, leave).error_code,
            ErrorCode::kNone);

  Stop();
  Start();
  Client c2(port());
  EXPECT_EQ(Committed(c2, "g").committed_offset, 42);
  EXPECT_EQ(Committed(c2, "other").committed_offset, -1);
}

// The broker's cleaner runs with no compacted user topic and cleans the offsets log: a
// long run of commits over one key leaves a log of a few segments, which replays to the
// last commit after a restart.
TEST_F(BrokerGroupTest, TheOffsetsLogIsCleanedByTheBrokersCleaner) {
  Stop();
  options_.groups.log_segment_bytes = 4096;
  options_.cleaner.backoff_ms = 10;
  Start();
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  const std::filesystem::path log_dir = dir_ / "__consumer_offsets-0";
  auto log_bytes = [&] {
    uint64_t total = 0;
    for (const auto& e : std::filesystem::directory_iterator(log_dir)) {
      // The cleaner may remove a segment between the listing and its size.
      std::error_code ec;
      const uintmax_t size = e.path().extension() == ".log" ? e.file_size(ec) : 0;
      if (!ec) total += size;
    }
    return total;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int64_t offset = 0;
  uint64_t written = 0;
  // Until a cleaning wrote its checkpoint and enough was written to need one.
  while (written < 100 * 1024 || !std::filesystem::exists(log_dir / "cleaner-offset-checkpoint")) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the offsets log was never cleaned";
    const uint64_t before = log_bytes();
    ASSERT_EQ(CommitStandalone(c, "g", ++offset), ErrorCode::kNone);
    written += log_bytes() > before ? log_bytes() - before : 0;
  }
  // Cleaned: the live record and at most the active and a closing segment, not the
  // 100 KiB written.
  while (log_bytes() > 4 * 4096) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << log_bytes() << " bytes left";
    ASSERT_EQ(CommitStandalone(c, "g", ++offset), ErrorCode::kNone);
  }
  Stop();
  Start();
  Client c2(port());
  EXPECT_EQ(Committed(c2, "g").committed_offset, offset);
}

// TxnOffsetCommit reaches the coordinator once the transaction coordinator has the group's
// offsets partition in the producer's transaction (AddOffsetsToTxn, KIP-890 verification);
// its offsets stay pending until EndTxn (never sent here), across a restart too.
TEST_F(BrokerGroupTest, TxnOffsetCommitIsPendingAndUnstable) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(CommitStandalone(c, "g", 7), ErrorCode::kNone);
  kafka::InitProducerIdRequest init;
  init.transactional_id = "tx";
  init.transaction_timeout_ms = 600000;
  auto producer = c.Call<kafka::InitProducerIdResponse>(ApiKey::kInitProducerId, 4, init);
  ASSERT_EQ(producer.error_code, ErrorCode::kNone);
  kafka::TxnOffsetCommitRequest req;
  req.transactional_id = "tx";
  req.group_id = "g";
  req.producer_id = producer.producer_id;
  req.producer_epoch = producer.producer_epoch;
  kafka::TxnOffsetCommitRequest::Topic t;
  t.name = "t";
  kafka::TxnOffsetCommitRequest::Partition p;
  p.partition_index = 0;
  p.committed_offset = 55;
  t.partitions.push_back(p);
  req.topics.push_back(t);
  t.name = "missing";
  req.topics.push_back(t);
  // Before AddOffsetsToTxn the transaction coordinator does not know the group's part in
  // the transaction: refused (Kafka 3.6+).
  auto refused = c.Call<kafka::TxnOffsetCommitResponse>(ApiKey::kTxnOffsetCommit, 3, req);
  EXPECT_NE(refused.topics.at(0).partitions.at(0).error_code, ErrorCode::kNone);
  kafka::AddOffsetsToTxnRequest add;
  add.transactional_id = "tx";
  add.producer_id = producer.producer_id;
  add.producer_epoch = producer.producer_epoch;
  add.group_id = "g";
  ASSERT_EQ(c.Call<kafka::AddOffsetsToTxnResponse>(ApiKey::kAddOffsetsToTxn, 3, add).error_code,
            ErrorCode::kNone);
  auto resp = c.Call<kafka::TxnOffsetCommitResponse>(ApiKey::kTxnOffsetCommit, 3, req);
  ASSERT_EQ(resp.topics.size(), 2u);
  EXPECT_EQ(resp.topics[0].partitions.at(0).error_code, ErrorCode::kNone);
  EXPECT_EQ(resp.topics[1].partitions.at(0).error_code, ErrorCode::kUnknownTopicOrPartition);
  for (int restart = 0; restart < 2; ++restart) {
    Client cc(port());
    EXPECT_EQ(Committed(cc, "g").committed_offset, 7);
    auto stable = Committed(cc, "g", true);
    EXPECT_EQ(stable.error_code, ErrorCode::kUnstableOffsetCommit);
    EXPECT_EQ(stable.committed_offset, -1);
    Stop();
    Start();
  }
}

TEST_F(BrokerGroupTest, InternalTopicNameIsReserved) {
  Client c(port());
  EXPECT_EQ(Create(c, "__consumer_offsets", 1).topics[0].error_code,
            ErrorCode::kTopicAlreadyExists);
}

}  // namespace
}  // namespace broker_group_test
}  // namespace sluice::broker
