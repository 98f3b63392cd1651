// GroupCoordinator and the offsets of transactions: TxnOffsetCommit (KIP-98, KIP-447
// checks), CompleteTxn markers (commit, abort, ordering against plain commits), OffsetFetch
// require_stable, and what a reopen, a crash and a snapshot leave
// (docs/design/0016-transactions.md, "Group offsets").
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "broker/group_coordinator.h"
#include "broker/offset_log.h"
#include "broker/tests/group_coordinator_fixture.h"
#include "broker/txn_markers.h"
#include "storage/testing/fault_env.h"

namespace sluice::broker {
namespace group_txn_test {
namespace {

struct TxnSpec {
  std::string group = "g";
  int64_t producer_id = 1000;
  int16_t producer_epoch = 0;
  int32_t generation = -1;
  std::string member_id;
  std::optional<std::string> instance;
  std::vector<CommitSpec> commits;
  int16_t version = 3;
};

class GroupTxnTest : public GroupCoordinatorTest {
 protected:
  kafka::TxnOffsetCommitResponse TxnCommit(const TxnSpec& s) {
    kafka::TxnOffsetCommitRequest req;
    req.transactional_id = "txn-" + std::to_string(s.producer_id);
    req.group_id = s.group;
    req.producer_id = s.producer_id;
    req.producer_epoch = s.producer_epoch;
    req.generation_id = s.generation;
    req.member_id = s.member_id;
    req.group_instance_id = s.instance;
    AddCommits(req, s.commits);
    Pending<kafka::TxnOffsetCommitResponse> p;
    coord_->TxnOffsetCommit(std::move(req), s.version, p.Callback());
    return p.Get();
  }
  // The only error of a one-partition TxnOffsetCommit.
  ErrorCode TxnCommitOne(TxnSpec s, const std::string& topic, int32_t partition, int64_t offset) {
    s.commits = {CommitSpec{topic, partition, offset}};
    auto r = TxnCommit(s);
    if (r.topics.size() != 1 || r.topics[0].partitions.size() != 1) {
      ADD_FAILURE() << "unexpected TxnOffsetCommit response shape";
      return ErrorCode::kUnknownServerError;
    }
    return r.topics[0].partitions[0].error_code;
  }

  ErrorCode Complete(const std::string& group, int64_t producer_id, int16_t epoch, bool commit) {
    Pending<ErrorCode> p;
    coord_->CompleteTxn(group, producer_id, epoch, commit, 0, p.Callback());
    return p.Get();
  }

  // OffsetFetch of one partition, with require_stable, at `version` (7: top-level error
  // field; 8: groups).
  kafka::OffsetFetchResponse::Partition FetchOne(const std::string& group, const std::string& topic,
                                                 int32_t partition, bool require_stable,
                                                 int16_t version = 7) {
    kafka::OffsetFetchRequest req;
    req.require_stable = require_stable;
    kafka::OffsetFetchRequest::Topic t;
    t.name = topic;
    t.partition_indexes = {partition};
    if (version >= 8) {
      kafka::OffsetFetchRequest::Group g;
      g.group_id = group;
      g.topics.emplace();
      g.topics->push_back(std::move(t));
      req.groups.push_back(std::move(g));
    } else {
      req.group_id = group;
      req.topics.emplace();
      req.topics->push_back(std::move(t));
    }
    Pending<kafka::OffsetFetchResponse> p;
    coord_->OffsetFetch(std::move(req), version, p.Callback());
    auto r = p.Get();
    const auto& topics =
        version >= 8 ? (r.groups.size() == 1 ? r.groups[0].topics : r.topics) : r.topics;
    EXPECT_EQ(r.error_code, ErrorCode::kNone);
    if (topics.size() != 1 || topics[0].partitions.size() != 1) {
      ADD_FAILURE() << "unexpected OffsetFetch response shape";
      return {};
    }
    return topics[0].partitions[0];
  }
};

// -----------------------------------------------------------------------------------------
// Visibility, commit and abort

TEST_F(GroupTxnTest, OffsetsAreInvisibleUntilTheCommitMarker) {
  Open();
  ASSERT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 42), ErrorCode::kNone);
  EXPECT_EQ(Committed("g", "t", 0), -1);
  auto stable = FetchOne("g", "t", 0, true);
  EXPECT_EQ(stable.error_code, ErrorCode::kUnstableOffsetCommit);
  EXPECT_EQ(stable.committed_offset, -1);
  EXPECT_EQ(FetchOne("g", "t", 1, true).error_code, ErrorCode::kNone);  // another partition
  EXPECT_EQ(Complete("g", 1000, 0, true), ErrorCode::kNone);
  EXPECT_EQ(Committed("g", "t", 0), 42);
  auto after = FetchOne("g", "t", 0, true);
  EXPECT_EQ(after.error_code, ErrorCode::kNone);
  EXPECT_EQ(after.committed_offset, 42);
}

TEST_F(GroupTxnTest, AbortDropsTheOffsetsAndKeepsTheStableOne) {
  Open();
  ASSERT_EQ(CommitStandalone("g", {{"t", 0, 5}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  ASSERT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 9), ErrorCode::kNone);
  // Without require_stable: the last stable offset; with it (v7 and v8): unstable.
  EXPECT_EQ(FetchOne("g", "t", 0, false).committed_offset, 5);
  EXPECT_EQ(FetchOne("g", "t", 0, true).error_code, ErrorCode::kUnstableOffsetCommit);
  EXPECT_EQ(FetchOne("g", "t", 0, true, 8).error_code, ErrorCode::kUnstableOffsetCommit);
  // v6 has no require_stable: never unstable.
  EXPECT_EQ(FetchOne("g", "t", 0, true, 6).committed_offset, 5);
  EXPECT_EQ(Complete("g", 1000, 0, false), ErrorCode::kNone);
  EXPECT_EQ(FetchOne("g", "t", 0, true).committed_offset, 5);
}

TEST_F(GroupTxnTest, AllOffsetsFetchMarksPendingPartitionsUnstable) {
  Open();
  ASSERT_EQ(CommitStandalone("g", {{"t", 0, 1}, {"t", 1, 2}}).topics[0].partitions.size(), 2u);
  ASSERT_EQ(TxnCommitOne(TxnSpec{}, "t", 1, 20), ErrorCode::kNone);
  kafka::OffsetFetchRequest req;
  req.group_id = "g";
  req.topics = std::nullopt;
  req.require_stable = true;
  Pending<kafka::OffsetFetchResponse> p;
  coord_->OffsetFetch(std::move(req), 7, p.Callback());
  auto r = p.Get();
  ASSERT_EQ(r.topics.size(), 1u);
  ASSERT_EQ(r.topics[0].partitions.size(), 2u);
  EXPECT_EQ(r.topics[0].partitions[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(r.topics[0].partitions[0].committed_offset, 1);
  EXPECT_EQ(r.topics[0].partitions[1].error_code, ErrorCode::kUnstableOffsetCommit);
}

TEST_F(GroupTxnTest, APlainCommitWrittenAfterTheTransactionsRecordWins) {
  Open();
  ASSERT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 100), ErrorCode::kNone);
  ASSERT_EQ(TxnCommitOne(TxnSpec{}, "t", 1, 100), ErrorCode::kNone);
  ASSERT_EQ(CommitStandalone("g", {{"t", 0, 7}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  ASSERT_EQ(Complete("g", 1000, 0, true), ErrorCode::kNone);
  EXPECT_EQ(Committed("g", "t", 0), 7);    // the plain commit came later in the log
  EXPECT_EQ(Committed("g", "t", 1), 100);  // nothing later: the transaction's
  Reopen();
  EXPECT_EQ(Committed("g", "t", 0), 7);
  EXPECT_EQ(Committed("g", "t", 1), 100);
}

TEST_F(GroupTxnTest, AMarkerCompletesTheProducersOffsetsInEveryGroup) {
  Open();
  ASSERT_EQ(TxnCommitOne(TxnSpec{"a"}, "t", 0, 1), ErrorCode::kNone);
  ASSERT_EQ(TxnCommitOne(TxnSpec{"b"}, "t", 0, 2), ErrorCode::kNone);
  TxnSpec other{"a"};
  other.producer_id = 2000;
  ASSERT_EQ(TxnCommitOne(other, "t", 1, 3), ErrorCode::kNone);
  ASSERT_EQ(Complete("a", 1000, 0, true), ErrorCode::kNone);
  EXPECT_EQ(Committed("a", "t", 0), 1);
  EXPECT_EQ(Committed("b", "t", 0), 2);  // same producer, same marker in the log
  EXPECT_EQ(FetchOne("a", "t", 1, true).error_code, ErrorCode::kUnstableOffsetCommit);
  // The coordinator's marker for the second group finds nothing left, and is fine.
  EXPECT_EQ(Complete("b", 1000, 0, true), ErrorCode::kNone);
  EXPECT_EQ(Complete("nobody", 5555, 0, false), ErrorCode::kNone);
  EXPECT_EQ(Complete("a", 2000, 0, false), ErrorCode::kNone);
  EXPECT_EQ(Committed("a", "t", 1), -1);
}

TEST_F(GroupTxnTest, StaleProducerEpochsAreRefused) {
  Open();
  TxnSpec s;
  s.producer_epoch = 3;
  ASSERT_EQ(TxnCommitOne(s, "t", 0, 1), ErrorCode::kNone);
  s.producer_epoch = 2;
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 2), ErrorCode::kInvalidProducerEpoch);
  EXPECT_EQ(Complete("g", 1000, 2, true), ErrorCode::kInvalidProducerEpoch);
  EXPECT_EQ(FetchOne("g", "t", 0, true).error_code, ErrorCode::kUnstableOffsetCommit);
  // A bumped epoch (an abort after a timeout, KIP-360) completes it.
  EXPECT_EQ(Complete("g", 1000, 4, false), ErrorCode::kNone);
  EXPECT_EQ(FetchOne("g", "t", 0, true).committed_offset, -1);
  s.producer_epoch = -1;
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 2), ErrorCode::kInvalidProducerIdMapping);
}

// -----------------------------------------------------------------------------------------
// Request checks (KIP-447 from v3)

TEST_F(GroupTxnTest, GroupAndMemberChecks) {
  Open();
  TxnSpec unknown;
  unknown.group = "fresh";
  unknown.generation = 1;
  EXPECT_EQ(TxnCommitOne(unknown, "t", 0, 1), ErrorCode::kIllegalGeneration);
  TxnSpec empty_id;
  empty_id.group = "";
  EXPECT_EQ(TxnCommitOne(empty_id, "t", 0, 1), ErrorCode::kInvalidGroupId);
  EXPECT_EQ(TxnCommitOne(TxnSpec{}, "missing", 0, 1), ErrorCode::kUnknownTopicOrPartition);
  TxnSpec big;
  big.commits = {CommitSpec{"t", 0, 1, std::string(5000, 'm')}, CommitSpec{"t", 1, 2}};
  auto r = TxnCommit(big);
  ASSERT_EQ(r.topics.size(), 1u);
  EXPECT_EQ(r.topics[0].partitions[0].error_code, ErrorCode::kOffsetMetadataTooLarge);
  EXPECT_EQ(r.topics[0].partitions[1].error_code, ErrorCode::kNone);

  const std::string member = StableSingleMember("m");
  TxnSpec s;
  s.group = "m";
  s.member_id = member;
  s.generation = 1;
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 1), ErrorCode::kNone);
  s.generation = 2;
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 1), ErrorCode::kIllegalGeneration);
  s.generation = 1;
  s.member_id = "someone-else";
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 1), ErrorCode::kUnknownMemberId);
  // v0-2 carry no member fields: accepted in a group with members, as Kafka does.
  TxnSpec old;
  old.group = "m";
  old.version = 2;
  EXPECT_EQ(TxnCommitOne(old, "t", 0, 1), ErrorCode::kNone);
}

TEST_F(GroupTxnTest, StaticMemberIsFencedByItsInstanceId) {
  Open();
  JoinSpec j;
  j.group = "s";
  j.instance = "inst";
  auto join = Join(j);
  ASSERT_EQ(join.error_code, ErrorCode::kNone);
  ASSERT_EQ(
      Sync("s", join.member_id, join.generation_id, {{join.member_id, {1}}}, "inst").error_code,
      ErrorCode::kNone);
  TxnSpec s;
  s.group = "s";
  s.generation = join.generation_id;
  s.member_id = "stale-id";
  s.instance = "inst";
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 1), ErrorCode::kFencedInstanceId);
  s.member_id = join.member_id;
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 1), ErrorCode::kNone);
}

TEST_F(GroupTxnTest, CommitsWhileTheGroupCompletesARebalance) {
  Open();
  JoinSpec j;
  j.group = "r";
  auto join = JoinNewAsync(j)->Get();
  ASSERT_EQ(join.error_code, ErrorCode::kNone);
  // CompletingRebalance: OffsetCommit would be REBALANCE_IN_PROGRESS; a transaction's
  // commit is not checked against the state.
  TxnSpec s;
  s.group = "r";
  s.generation = join.generation_id;
  s.member_id = join.member_id;
  EXPECT_EQ(TxnCommitOne(s, "t", 0, 1), ErrorCode::kNone);
}

// A verifier standing in for the transaction coordinator (KIP-890 verification).
class FakeVerifier : public TxnVerifier {
 public:
  explicit FakeVerifier(ErrorCode answer) : answer_(answer) {}
  void Verify(std::string transactional_id, int64_t producer_id, int16_t,
              std::vector<TopicPartition> partitions,
              std::function<void(std::vector<ErrorCode>)> done) override {
    asked_id = transactional_id;
    asked_producer = producer_id;
    asked = partitions;
    done(std::vector<ErrorCode>(partitions.size(), answer_));
  }
  std::string asked_id;
  int64_t asked_producer = -1;
  std::vector<TopicPartition> asked;

 private:
  ErrorCode answer_;
};

TEST_F(GroupTxnTest, TheVerifiersAnswerComesFirst) {
  FakeVerifier refuse(ErrorCode::kInvalidTxnState);
  GroupCoordinatorOptions o = Options();
  o.txn_verifier = &refuse;
  Open(o);
  EXPECT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 1), ErrorCode::kInvalidTxnState);
  EXPECT_EQ(refuse.asked_id, "txn-1000");
  EXPECT_EQ(refuse.asked_producer, 1000);
  EXPECT_EQ(refuse.asked, (std::vector<TopicPartition>{{kOffsetsTopic, 0}}));
  EXPECT_EQ(FetchOne("g", "t", 0, true).error_code, ErrorCode::kNone);  // nothing pending

  FakeVerifier slow(ErrorCode::kNetworkException);
  o.txn_verifier = &slow;
  Reopen(o);
  EXPECT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 1), ErrorCode::kCoordinatorLoadInProgress);
  TxnSpec v1;
  v1.version = 1;
  EXPECT_EQ(TxnCommitOne(v1, "t", 0, 1), ErrorCode::kCoordinatorNotAvailable);

  FakeVerifier ok(ErrorCode::kNone);
  o.txn_verifier = &ok;
  Reopen(o);
  EXPECT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 1), ErrorCode::kNone);
}

// A verifier that answers only when the test says so.
class HeldVerifier : public TxnVerifier {
 public:
  void Verify(std::string, int64_t, int16_t, std::vector<TopicPartition>,
              std::function<void(std::vector<ErrorCode>)> done) override {
    held = std::move(done);
  }
  std::function<void(std::vector<ErrorCode>)> held;
};

TEST_F(GroupTxnTest, AVerifierAnsweringAfterCloseIsDropped) {
  HeldVerifier v;
  GroupCoordinatorOptions o = Options();
  o.txn_verifier = &v;
  Open(o);
  kafka::TxnOffsetCommitRequest req;
  req.transactional_id = "tx";
  req.group_id = "g";
  req.producer_id = 1;
  AddCommits(req, {CommitSpec{"t", 0, 1}});
  coord_->TxnOffsetCommit(
      req, 3, [](kafka::TxnOffsetCommitResponse) { ADD_FAILURE() << "answered after close"; });
  ASSERT_TRUE(coord_->Close().ok());
  coord_.reset();
  ASSERT_TRUE(v.held);
  v.held({ErrorCode::kNone});  // must not reach the coordinator that is gone
}

// -----------------------------------------------------------------------------------------
// Reopen, crash, snapshot, deletion

TEST_F(GroupTxnTest, ReplayAfterReopenCommittedAbortedAndUnfinished) {
  Open();
  TxnSpec committed, aborted, open;
  committed.producer_id = 1;
  aborted.producer_id = 2;
  open.producer_id = 3;
  ASSERT_EQ(TxnCommitOne(committed, "t", 0, 10), ErrorCode::kNone);
  ASSERT_EQ(TxnCommitOne(aborted, "t", 1, 20), ErrorCode::kNone);
  ASSERT_EQ(TxnCommitOne(open, "t", 2, 30), ErrorCode::kNone);
  ASSERT_EQ(Complete("g", 1, 0, true), ErrorCode::kNone);
  ASSERT_EQ(Complete("g", 2, 0, false), ErrorCode::kNone);
  Reopen();
  EXPECT_EQ(Committed("g", "t", 0), 10);
  EXPECT_EQ(Committed("g", "t", 1), -1);
  EXPECT_EQ(FetchOne("g", "t", 1, true).error_code, ErrorCode::kNone);
  EXPECT_EQ(FetchOne("g", "t", 2, true).error_code, ErrorCode::kUnstableOffsetCommit);
  // The group exists (Empty) though it only holds a pending offset after a reopen.
  EXPECT_EQ(Describe("g").group_state, "Empty");
  ASSERT_EQ(Complete("g", 3, 0, true), ErrorCode::kNone);
  Reopen();
  EXPECT_EQ(Committed("g", "t", 2), 30);
}

TEST_F(GroupTxnTest, CrashBetweenTheOffsetsAndTheMarkerLeavesThemPending) {
  storage::testing::FaultEnv env(storage::Env::Posix());
  GroupCoordinatorOptions o = Options();
  o.env = &env;
  Open(o);
  ASSERT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 77), ErrorCode::kNone);  // durable
  env.SimulateCrash();
  (void)coord_->Close();  // fails: the process is "dead"
  coord_.reset();
  ASSERT_TRUE(env.DropUnsyncedData(1, storage::testing::TearMode::kDropAll).ok());
  env.Reset();
  Open(o);
  EXPECT_EQ(FetchOne("g", "t", 0, true).error_code, ErrorCode::kUnstableOffsetCommit);
  // The transaction coordinator writes its marker again after its own restart.
  ASSERT_EQ(Complete("g", 1000, 0, true), ErrorCode::kNone);
  env.SimulateCrash();
  (void)coord_->Close();
  coord_.reset();
  ASSERT_TRUE(env.DropUnsyncedData(2, storage::testing::TearMode::kDropAll).ok());
  env.Reset();
  Open(o);
  EXPECT_EQ(Committed("g", "t", 0), 77);  // the marker was durable when answered
}

TEST_F(GroupTxnTest, DeletingTheGroupDropsPendingOffsets) {
  Open();
  ASSERT_EQ(TxnCommitOne(TxnSpec{}, "t", 0, 1), ErrorCode::kNone);
  auto d = Delete({"g"});
  ASSERT_EQ(d.results.size(), 1u);
  EXPECT_EQ(d.results[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Complete("g", 1000, 0, true), ErrorCode::kNone);
  EXPECT_EQ(Committed("g", "t", 0), -1);
  Reopen();
  EXPECT_EQ(Committed("g", "t", 0), -1);
  EXPECT_EQ(FetchOne("g", "t", 0, true).error_code, ErrorCode::kNone);
}

}  // namespace
}  // namespace group_txn_test
}  // namespace sluice::broker
