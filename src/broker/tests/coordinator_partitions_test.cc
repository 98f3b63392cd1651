// Coordinators over partitions that move with leadership (docs/design/0018-cluster.md,
// "coordmove"): Kafka's key hash, and a replicated GroupCoordinator / TxnCoordinator
// loading a partition from a real log (NOT_COORDINATOR before, COORDINATOR_LOAD_IN_PROGRESS
// during, served after), unloading it (waiting joins answered NOT_COORDINATOR) and loading
// it again with its commits; a write the partition's leader refuses answers NOT_COORDINATOR.
#include "broker/coordinator_partitions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <string>

#include "broker/group_coordinator.h"
#include "broker/offset_log.h"
#include "broker/tests/group_coordinator_fixture.h"
#include "broker/txn_coordinator.h"
#include "storage/log.h"

namespace sluice::broker {
namespace {

// -----------------------------------------------------------------------------------------
// The hash

TEST(CoordinatorPartitionsTest, HashIsJavasStringHashCode) {
  // Values of java.lang.String.hashCode().
  EXPECT_EQ(JavaStringHash(""), 0);
  EXPECT_EQ(JavaStringHash("a"), 97);
  EXPECT_EQ(JavaStringHash("hello"), 99162322);
  EXPECT_EQ(JavaStringHash("Hello World"), -862545276);
  // "é" is one UTF-16 unit (0xE9); an emoji is a surrogate pair (0xD83D, 0xDE00).
  EXPECT_EQ(JavaStringHash("\xc3\xa9"), 0xE9);
  EXPECT_EQ(JavaStringHash("\xf0\x9f\x98\x80"), 31 * 0xD83D + 0xDE00);
  // A byte that is not UTF-8 counts as U+FFFD, as Java's decoder makes it.
  EXPECT_EQ(JavaStringHash("\xff"), 0xFFFD);
  EXPECT_EQ(JavaStringHash("\xc3"), 0xFFFD);
}

TEST(CoordinatorPartitionsTest, PartitionIsKafkasAbsModulo) {
  EXPECT_EQ(CoordinatorPartitionFor("hello", 50), 99162322 % 50);
  // Negative hashes: Utils.abs.
  EXPECT_EQ(CoordinatorPartitionFor("Hello World", 50), 862545276 % 50);
  // Integer.MIN_VALUE ("polygenelubricants") is 0 under Utils.abs, not itself.
  ASSERT_EQ(JavaStringHash("polygenelubricants"), INT32_MIN);
  EXPECT_EQ(CoordinatorPartitionFor("polygenelubricants", 7), 0);
  EXPECT_EQ(CoordinatorPartitionFor("anything", 1), 0);
}

TEST(CoordinatorPartitionsTest, WriteErrorsMapAsKafkas) {
  EXPECT_EQ(CoordinatorWriteError(NotLeadingError("x")), ErrorCode::kNotCoordinator);
  EXPECT_EQ(CoordinatorWriteError(ResourceExhaustedError("timed out")),
            ErrorCode::kCoordinatorNotAvailable);
  EXPECT_EQ(CoordinatorWriteError(IOError("disk")), ErrorCode::kCoordinatorNotAvailable);
}

// -----------------------------------------------------------------------------------------
// A replicated group coordinator

constexpr int32_t kPartitions = 4;

class ReplicatedGroupsTest : public GroupCoordinatorTest {
 protected:
  void SetUp() override {
    storage::LogOptions lo;
    lo.executor = &executor_;
    lo.flush_policy = storage::FlushPolicy::kDurable;
    auto log = storage::PartitionLog::Open(dir_.path() + "/__consumer_offsets-1", lo);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(*log);
    auto o = Options();
    o.replicated = true;
    o.before_load = [this](int32_t) { gate_.wait(); };
    Open(o);
  }
  void TearDown() override {
    if (coord_ != nullptr) ASSERT_TRUE(coord_->Close().ok());
    coord_.reset();
    ASSERT_TRUE(log_->Close().ok());
  }

  // What the partition's owner does, without replication: append, acknowledge when
  // durable; or refuse every write as a broker that no longer leads.
  OffsetLogOptions Attached() {
    OffsetLogOptions o;
    o.dir = dir_.path() + "/__consumer_offsets-1";
    o.executor = &executor_;
    o.attach = log_.get();
    o.append = [this](std::vector<uint8_t> batch, InternalLog::Done done) {
      if (refuse_.load()) {
        if (done) done(NotLeadingError("__consumer_offsets-1"));
        return;
      }
      storage::AppendOptions ao;
      ao.ack = storage::AckLevel::kDurable;
      if (done) ao.on_ack = [done](const Status& st, const storage::AppendInfo&) { done(st); };
      auto r = log_->Append(batch, std::move(ao));
      if (!r.ok() && done) done(r.status());
    };
    return o;
  }

  void LoadAndWait(int32_t epoch) {
    coord_->LoadPartition(1, kPartitions, epoch, Attached());
    WaitLoaded();
  }
  void WaitLoaded() {
    for (int i = 0; i < 2000; ++i) {
      auto parts = coord_->PartitionsForTesting();
      if (parts.count(1) != 0 && parts[1]) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL() << "partition 1 never loaded";
  }

  // A group id of partition `p`.
  static std::string GroupOf(int32_t p, int n = 0) {
    for (int i = 0;; ++i) {
      std::string g = "group-" + std::to_string(i);
      if (CoordinatorPartitionFor(g, kPartitions) == p && n-- == 0) return g;
    }
  }

  std::unique_ptr<storage::PartitionLog> log_;
  std::promise<void> released_;
  std::shared_future<void> gate_ = released_.get_future().share();
  std::atomic<bool> refuse_{false};
};

TEST_F(ReplicatedGroupsTest, NotCoordinatorUntilLoadedAndLoadInProgressMeanwhile) {
  const std::string g = GroupOf(1);
  EXPECT_EQ(Heartbeat(g, "m", 1), ErrorCode::kNotCoordinator);
  EXPECT_EQ(Fetch(g, std::nullopt).error_code, ErrorCode::kNotCoordinator);
  // The loading thread waits at the gate: the partition is loading.
  coord_->LoadPartition(1, kPartitions, 5, Attached());
  EXPECT_EQ(Heartbeat(g, "m", 1), ErrorCode::kCoordinatorLoadInProgress);
  EXPECT_EQ(CommitStandalone(g, {{"t", 0, 10}}).topics[0].partitions[0].error_code,
            ErrorCode::kCoordinatorLoadInProgress);
  EXPECT_EQ(Describe(g).error_code, ErrorCode::kCoordinatorLoadInProgress);
  EXPECT_EQ(List().error_code, ErrorCode::kCoordinatorLoadInProgress);
  // Another partition's groups are not this broker's.
  EXPECT_EQ(Heartbeat(GroupOf(2), "m", 1), ErrorCode::kNotCoordinator);
  released_.set_value();
  WaitLoaded();
  EXPECT_EQ(CommitStandalone(g, {{"t", 0, 10}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  EXPECT_EQ(Committed(g, "t", 0), 10);
  EXPECT_EQ(List().error_code, ErrorCode::kNone);
  EXPECT_EQ(Heartbeat(GroupOf(2), "m", 1), ErrorCode::kNotCoordinator);
}

TEST_F(ReplicatedGroupsTest, UnloadAnswersWaitingJoinsAndLoadAgainKeepsTheCommits) {
  released_.set_value();
  LoadAndWait(1);
  const std::string g = GroupOf(1);
  const std::string other = GroupOf(1, 1);
  const std::string a = StableSingleMember(g);
  ASSERT_EQ(Commit(g, a, 1, {{"t", 0, 42}, {"t", 1, 7}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  ASSERT_EQ(CommitStandalone(other, {{"u", 3, 99}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  // A second member's join waits for the first to rejoin: the rebalance is under way.
  JoinSpec s;
  s.group = g;
  s.client_id = "b";
  auto waiting = JoinNewAsync(s);
  coord_->UnloadPartition(1);
  EXPECT_EQ(waiting->Get().error_code, ErrorCode::kNotCoordinator);
  EXPECT_EQ(Heartbeat(g, a, 1), ErrorCode::kNotCoordinator);
  EXPECT_EQ(Fetch(g, std::nullopt).error_code, ErrorCode::kNotCoordinator);
  EXPECT_EQ(Describe(g).error_code, ErrorCode::kNotCoordinator);
  EXPECT_TRUE(coord_->PartitionsForTesting().empty());

  // Leading again (a new epoch): the commits and the generation come back from the log.
  LoadAndWait(2);
  EXPECT_EQ(Committed(g, "t", 0), 42);
  EXPECT_EQ(Committed(g, "t", 1), 7);
  EXPECT_EQ(Committed(other, "u", 3), 99);
  EXPECT_EQ(Describe(g).group_state, "Empty");  // members rejoin
  EXPECT_EQ(Heartbeat(g, a, 1), ErrorCode::kUnknownMemberId);
  JoinSpec again;
  again.group = g;
  auto join = JoinNewAsync(again)->Get();
  ASSERT_EQ(join.error_code, ErrorCode::kNone);
  EXPECT_EQ(join.generation_id, 2);  // never backwards
}

TEST_F(ReplicatedGroupsTest, AWriteTheLeaderRefusesAnswersNotCoordinator) {
  released_.set_value();
  LoadAndWait(1);
  const std::string g = GroupOf(1);
  refuse_ = true;
  auto r = CommitStandalone(g, {{"t", 0, 5}});
  EXPECT_EQ(r.topics[0].partitions[0].error_code, ErrorCode::kNotCoordinator);
}

TEST_F(ReplicatedGroupsTest, TheSameEpochIsNotLoadedTwice) {
  released_.set_value();
  LoadAndWait(3);
  const std::string g = GroupOf(1);
  const std::string a = StableSingleMember(g);
  coord_->LoadPartition(1, kPartitions, 3, Attached());  // a role issued again
  EXPECT_EQ(Heartbeat(g, a, 1), ErrorCode::kNone);       // the member stays
}

// -----------------------------------------------------------------------------------------
// A replicated transaction coordinator

class NoParticipants : public TxnParticipants {
 public:
  void WritePartitionMarkers(const TxnMarker&, std::vector<TopicPartition> tps,
                             std::function<void(std::vector<ErrorCode>)> done) override {
    done(std::vector<ErrorCode>(tps.size(), ErrorCode::kNone));
  }
  void CompleteGroupOffsets(const TxnMarker&, std::vector<std::string> groups,
                            std::function<void(std::vector<ErrorCode>)> done) override {
    done(std::vector<ErrorCode>(groups.size(), ErrorCode::kNone));
  }
};

TEST(ReplicatedTxnTest, IdsAreServedWhileTheirPartitionIsLoadedAndSurviveAMove) {
  TempDir dir("replicated-txn-test");
  storage::IoExecutor executor(2);
  storage::LogOptions lo;
  lo.executor = &executor;
  lo.flush_policy = storage::FlushPolicy::kDurable;
  auto log = storage::PartitionLog::Open(dir.path() + "/__transaction_state-0", lo);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  NoParticipants participants;
  std::atomic<int64_t> next_pid{1000};
  TxnCoordinatorOptions o;
  o.executor = &executor;
  o.participants = &participants;
  o.allocate_producer_id = [&]() -> Result<int64_t> { return next_pid++; };
  o.replicated = true;
  auto opened = TxnCoordinator::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<TxnCoordinator> c = std::move(*opened);
  c->StartMarkers();
  auto init = [&](const std::string& id) {
    std::promise<TxnProducerResult> p;
    c->InitProducerId(id, 60000, -1, -1, [&](TxnProducerResult r) { p.set_value(r); });
    return p.get_future().get();
  };
  auto attached = [&] {
    TxnLogOptions t;
    t.dir = dir.path() + "/__transaction_state-0";
    t.executor = &executor;
    t.attach = log->get();
    t.append = [&](std::vector<uint8_t> batch, InternalLog::Done done) {
      storage::AppendOptions ao;
      ao.ack = storage::AckLevel::kDurable;
      if (done) ao.on_ack = [done](const Status& st, const storage::AppendInfo&) { done(st); };
      auto r = (*log)->Append(batch, std::move(ao));
      if (!r.ok() && done) done(r.status());
    };
    return t;
  };
  auto wait_loaded = [&] {
    for (int i = 0; i < 2000; ++i) {
      auto parts = c->PartitionsForTesting();
      if (parts.count(0) != 0 && parts[0]) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL() << "never loaded";
  };
  // One partition: every id is partition 0's.
  EXPECT_EQ(init("tx").error, ErrorCode::kNotCoordinator);
  c->LoadPartition(0, 1, 1, attached());
  wait_loaded();
  TxnProducerResult first = init("tx");
  ASSERT_EQ(first.error, ErrorCode::kNone);
  c->UnloadPartition(0);
  EXPECT_EQ(init("tx").error, ErrorCode::kNotCoordinator);
  c->LoadPartition(0, 1, 2, attached());
  wait_loaded();
  // The id's producer came back from the log: the same id, the epoch bumped.
  TxnProducerResult second = init("tx");
  ASSERT_EQ(second.error, ErrorCode::kNone);
  EXPECT_EQ(second.producer_id, first.producer_id);
  EXPECT_EQ(second.producer_epoch, first.producer_epoch + 1);
  ASSERT_TRUE(c->Close().ok());
  ASSERT_TRUE((*log)->Close().ok());
}

}  // namespace
}  // namespace sluice::broker
