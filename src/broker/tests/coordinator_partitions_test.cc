// Coordinators over partitions that move with leadership (docs/design/0018-cluster.md,
// "coordmove"): Kafka's key hash, and a replicated GroupCoordinator / TxnCoordinator
// loading a partition from a real log (NOT_COORDINATOR before, COORDINATOR_LOAD_IN_PROGRESS
// during, served after), unloading it (waiting joins answered NOT_COORDINATOR) and loading
// it again with its commits; a write the partition's leader refuses answers NOT_COORDINATOR.
#include "broker/coordinator_partitions.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "broker/group_coordinator.h"
#include "broker/offset_log.h"
#include "broker/tests/group_coordinator_fixture.h"
#include "broker/txn_coordinator.h"
#include "storage/log.h"

namespace sluice::broker {
namespace coordinator_partitions_test {
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
    if (coord_ != nullptr) {
      ASSERT_TRUE(coord_->Close().ok());
    }
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
      if (hold_.load()) {  // kept until Release: a write waiting for its acknowledgement
        std::lock_guard lock(held_mu_);
        held_.emplace_back(std::move(batch), std::move(done));
        return;
      }
      AppendNow(batch, std::move(done));
    };
    return o;
  }
  void AppendNow(const std::vector<uint8_t>& batch, InternalLog::Done done) {
    {
      storage::AppendOptions ao;
      ao.ack = storage::AckLevel::kDurable;
      if (done) ao.on_ack = [done](const Status& st, const storage::AppendInfo&) { done(st); };
      auto r = log_->Append(batch, std::move(ao));
      if (!r.ok() && done) done(r.status());
    }
  }
  // Ends the held writes: appended and acknowledged (`ok`), or failed as a write the high
  // watermark never passed (nothing appended: a leader refusing below min.insync.replicas).
  void Release(bool ok) {
    Release(ok, ResourceExhaustedError("__consumer_offsets-1: not replicated (test)"));
  }
  // The same, failing the held writes with `failure` (ReplicatedAppend's timeout is
  // kAborted).
  void Release(bool ok, const Status& failure) {
    std::vector<std::pair<std::vector<uint8_t>, InternalLog::Done>> held;
    {
      std::lock_guard lock(held_mu_);
      held.swap(held_);
    }
    for (auto& [batch, done] : held) {
      if (ok) {
        AppendNow(batch, std::move(done));
      } else if (done) {
        done(failure);
      }
    }
  }
  size_t HeldCount() {
    std::lock_guard lock(held_mu_);
    return held_.size();
  }
  void WaitHeld(size_t n) {
    for (int i = 0; i < 4000 && HeldCount() < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(HeldCount(), n);
  }
  std::unique_ptr<Pending<kafka::OffsetCommitResponse>> CommitAsync(const std::string& group,
                                                                    int32_t partition,
                                                                    int64_t offset) {
    kafka::OffsetCommitRequest req;
    req.group_id = group;
    req.generation_id_or_member_epoch = -1;
    AddCommits(req, {CommitSpec{"t", partition, offset}});
    auto pending = std::make_unique<Pending<kafka::OffsetCommitResponse>>();
    coord_->OffsetCommit(std::move(req), 8, pending->Callback());
    return pending;
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
  std::atomic<bool> hold_{false};
  std::mutex held_mu_;
  std::vector<std::pair<std::vector<uint8_t>, InternalLog::Done>> held_;  // guarded by held_mu_
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
  // The refused commit was never applied (0018 "coordfix").
  EXPECT_EQ(Committed(g, "t", 0), -1);
}

// Kafka's pendingOffsetCommits: a commit is seen only once its write is acknowledged, and
// a commit whose write failed is never seen, nor after a reload.
TEST_F(ReplicatedGroupsTest, ACommitIsVisibleOnlyOnceItsWriteIsAcknowledged) {
  released_.set_value();
  LoadAndWait(1);
  const std::string g = GroupOf(1);
  ASSERT_EQ(CommitStandalone(g, {{"t", 0, 5}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  hold_ = true;
  auto failing = CommitAsync(g, 0, 9);
  WaitHeld(1);
  EXPECT_EQ(Committed(g, "t", 0), 5);  // in flight: not yet
  kafka::OffsetFetchRequest req;
  req.group_id = g;
  req.require_stable = true;
  req.topics.emplace();
  req.topics->push_back({"t", {0}});
  Pending<kafka::OffsetFetchResponse> unstable;
  coord_->OffsetFetch(req, 7, unstable.Callback());
  EXPECT_EQ(unstable.Get().topics.at(0).partitions.at(0).error_code,
            ErrorCode::kUnstableOffsetCommit);
  Release(false);
  EXPECT_EQ(failing->Get().topics[0].partitions[0].error_code, ErrorCode::kCoordinatorNotAvailable);
  EXPECT_EQ(Committed(g, "t", 0), 5);  // the failed commit is gone

  auto acked = CommitAsync(g, 0, 11);
  WaitHeld(1);
  EXPECT_EQ(Committed(g, "t", 0), 5);
  Release(true);
  EXPECT_EQ(acked->Get().topics[0].partitions[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(Committed(g, "t", 0), 11);
  hold_ = false;

  // A new epoch reads the log: what was acknowledged, nothing of the failed write.
  coord_->UnloadPartition(1);
  LoadAndWait(2);
  EXPECT_EQ(Committed(g, "t", 0), 11);
}

// Kafka's storeGroup: the leader's assignment is handed out once the generation's record
// is acknowledged; when its write fails every member waiting in SyncGroup gets the error
// and the group rebalances.
TEST_F(ReplicatedGroupsTest, TheAssignmentWaitsForTheGenerationsRecordAndItsFailureRebalances) {
  released_.set_value();
  LoadAndWait(1);
  const std::string g = GroupOf(1);
  hold_ = true;
  JoinSpec s;
  s.group = g;
  auto join = JoinNewAsync(s)->Get();  // answered at once; its generation's record waits
  ASSERT_EQ(join.error_code, ErrorCode::kNone);
  WaitHeld(1);
  auto sync = SyncAsync(g, join.member_id, join.generation_id, {{join.member_id, {7}}});
  EXPECT_FALSE(sync->ReadyWithin(std::chrono::milliseconds(100)));
  Release(false);
  EXPECT_EQ(sync->Get().error_code, ErrorCode::kCoordinatorNotAvailable);
  EXPECT_EQ(Describe(g).group_state, "PreparingRebalance");

  // The member rejoins: a new generation, stored, and then assigned.
  s.member_id = join.member_id;
  auto rejoin = JoinAsync(s);
  WaitHeld(1);
  Release(true);
  auto again = rejoin->Get();
  ASSERT_EQ(again.error_code, ErrorCode::kNone);
  EXPECT_EQ(again.generation_id, join.generation_id + 1);
  auto sync2 = SyncAsync(g, again.member_id, again.generation_id, {{again.member_id, {8}}});
  auto synced = sync2->Get();
  EXPECT_EQ(synced.error_code, ErrorCode::kNone);
  EXPECT_EQ(synced.assignment, std::vector<uint8_t>{8});
  EXPECT_EQ(Describe(g).group_state, "Stable");

  // Refused outright (no longer leading): NOT_COORDINATOR to the waiting members.
  refuse_ = true;
  hold_ = false;
  EXPECT_EQ(Heartbeat(g, again.member_id, again.generation_id), ErrorCode::kNone);
  JoinSpec r = s;
  r.member_id = again.member_id;
  r.protocols = {{"range", {1, 2}}};  // new metadata: a rebalance
  auto third = JoinAsync(r)->Get();
  ASSERT_EQ(third.error_code, ErrorCode::kNone);
  auto sync3 = Sync(g, third.member_id, third.generation_id, {{third.member_id, {9}}});
  EXPECT_EQ(sync3.error_code, ErrorCode::kNotCoordinator);
}

// A generation's record the high watermark did not pass in time: REBALANCE_IN_PROGRESS
// (Kafka's storeGroup maps REQUEST_TIMED_OUT so), and the member joins again.
TEST_F(ReplicatedGroupsTest, AGenerationRecordNotReplicatedInTimeAnswersRebalanceInProgress) {
  released_.set_value();
  LoadAndWait(1);
  const std::string g = GroupOf(1);
  hold_ = true;
  JoinSpec s;
  s.group = g;
  auto join = JoinNewAsync(s)->Get();
  ASSERT_EQ(join.error_code, ErrorCode::kNone);
  WaitHeld(1);
  auto sync = SyncAsync(g, join.member_id, join.generation_id, {{join.member_id, {7}}});
  Release(false, AbortedError("__consumer_offsets-1: not replicated in 5000 ms"));
  EXPECT_EQ(sync->Get().error_code, ErrorCode::kRebalanceInProgress);
  EXPECT_EQ(Describe(g).group_state, "PreparingRebalance");
  EXPECT_EQ(GroupStoreError(AbortedError("x")), ErrorCode::kRebalanceInProgress);
  EXPECT_EQ(CoordinatorWriteError(AbortedError("x")), ErrorCode::kCoordinatorNotAvailable);
  EXPECT_EQ(GroupStoreError(NotLeadingError("x")), ErrorCode::kNotCoordinator);
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

// -----------------------------------------------------------------------------------------
// The transaction coordinator's writes that fail (0018 "coordfix")

// Markers answered at once, each recorded with its coordinator epoch; or held until
// released.
class RecordingParticipants : public TxnParticipants {
 public:
  void WritePartitionMarkers(const TxnMarker& m, std::vector<TopicPartition> tps,
                             std::function<void(std::vector<ErrorCode>)> done) override {
    std::unique_lock lock(mu_);
    epochs_.push_back(m.coordinator_epoch);
    if (hold_) {
      held_.push_back(
          [n = tps.size(), done] { done(std::vector<ErrorCode>(n, ErrorCode::kNone)); });
      return;
    }
    lock.unlock();
    done(std::vector<ErrorCode>(tps.size(), ErrorCode::kNone));
  }
  void CompleteGroupOffsets(const TxnMarker&, std::vector<std::string> groups,
                            std::function<void(std::vector<ErrorCode>)> done) override {
    done(std::vector<ErrorCode>(groups.size(), ErrorCode::kNone));
  }
  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  void Release() {
    std::vector<std::function<void()>> held;
    {
      std::lock_guard lock(mu_);
      hold_ = false;
      held.swap(held_);
    }
    for (auto& f : held) f();
  }
  std::vector<int32_t> epochs() {
    std::lock_guard lock(mu_);
    return epochs_;
  }

 private:
  std::mutex mu_;
  bool hold_ = false;                        // guarded by mu_
  std::vector<std::function<void()>> held_;  // guarded by mu_
  std::vector<int32_t> epochs_;              // guarded by mu_
};

class ReplicatedTxnWritesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::LogOptions lo;
    lo.executor = &executor_;
    lo.flush_policy = storage::FlushPolicy::kDurable;
    auto log = storage::PartitionLog::Open(dir_.path() + "/__transaction_state-0", lo);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(*log);
    TxnCoordinatorOptions o;
    o.executor = &executor_;
    o.participants = &participants_;
    o.allocate_producer_id = [this]() -> Result<int64_t> { return next_pid_++; };
    o.replicated = true;
    o.marker_retry_ms = 10;
    auto opened = TxnCoordinator::Open(o);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    coord_ = std::move(*opened);
    coord_->StartMarkers();
  }
  void TearDown() override {
    ASSERT_TRUE(coord_->Close().ok());
    ASSERT_TRUE(log_->Close().ok());
  }
  TxnLogOptions Attached() {
    TxnLogOptions t;
    t.dir = dir_.path() + "/__transaction_state-0";
    t.executor = &executor_;
    t.attach = log_.get();
    t.append = [this](std::vector<uint8_t> batch, InternalLog::Done done) {
      if (refuse_.load()) {
        if (done) done(NotLeadingError("__transaction_state-0"));
        return;
      }
      if (fail_next_.load() > 0) {
        --fail_next_;
        if (done) done(ResourceExhaustedError("__transaction_state-0: not replicated (test)"));
        return;
      }
      storage::AppendOptions ao;
      ao.ack = storage::AckLevel::kDurable;
      if (done) ao.on_ack = [done](const Status& st, const storage::AppendInfo&) { done(st); };
      auto r = log_->Append(batch, std::move(ao));
      if (!r.ok() && done) done(r.status());
    };
    return t;
  }
  void LoadAndWait(int32_t epoch) {
    coord_->LoadPartition(0, 1, epoch, Attached());
    for (int i = 0; i < 2000; ++i) {
      auto parts = coord_->PartitionsForTesting();
      if (parts.count(0) != 0 && parts[0]) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    FAIL() << "never loaded";
  }
  TxnProducerResult Init(const std::string& id) {
    std::promise<TxnProducerResult> p;
    coord_->InitProducerId(id, 60000, -1, -1, [&](TxnProducerResult r) { p.set_value(r); });
    return p.get_future().get();
  }
  ErrorCode Add(const std::string& id, const TxnProducerResult& r, const std::string& topic) {
    std::promise<ErrorCode> p;
    coord_->AddPartitions(id, r.producer_id, r.producer_epoch, {TopicPartition{topic, 0}},
                          [&](ErrorCode e) { p.set_value(e); });
    return p.get_future().get();
  }
  ErrorCode End(const std::string& id, const TxnProducerResult& r, bool commit) {
    std::promise<TxnProducerResult> p;
    coord_->EndTxn(id, r.producer_id, r.producer_epoch, commit,
                   [&](TxnProducerResult x) { p.set_value(x); });
    return p.get_future().get().error;
  }
  // Waits until `id` is in `state` (the markers and the Complete record follow EndTxn).
  bool WaitState(const std::string& id, TxnState state) {
    for (int i = 0; i < 4000; ++i) {
      auto rec = coord_->Find(id);
      if (rec && rec->state == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  TempDir dir_{"replicated-txn-writes-test"};
  storage::IoExecutor executor_{2};
  std::unique_ptr<storage::PartitionLog> log_;
  RecordingParticipants participants_;
  std::atomic<int64_t> next_pid_{1000};
  std::atomic<bool> refuse_{false};
  std::atomic<int> fail_next_{0};
  std::unique_ptr<TxnCoordinator> coord_;
};

// Kafka's pendingState: a transition whose write failed is rolled back and the client
// gets the error (NOT_COORDINATOR no longer leading, COORDINATOR_NOT_AVAILABLE otherwise).
TEST_F(ReplicatedTxnWritesTest, AStateWriteThatFailsLeavesTheStateAsItWas) {
  LoadAndWait(3);
  refuse_ = true;
  EXPECT_EQ(Init("tx").error, ErrorCode::kNotCoordinator);
  EXPECT_FALSE(coord_->Find("tx").has_value());  // its first record was never written
  refuse_ = false;
  TxnProducerResult r = Init("tx");
  ASSERT_EQ(r.error, ErrorCode::kNone);

  fail_next_ = 1;
  EXPECT_EQ(Add("tx", r, "a"), ErrorCode::kCoordinatorNotAvailable);
  auto rec = coord_->Find("tx");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kEmpty);
  EXPECT_TRUE(rec->partitions.empty());
  ASSERT_EQ(Add("tx", r, "a"), ErrorCode::kNone);  // the retry goes through

  fail_next_ = 1;
  EXPECT_EQ(End("tx", r, true), ErrorCode::kCoordinatorNotAvailable);
  rec = coord_->Find("tx");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kOngoing);
  EXPECT_EQ(rec->partitions.size(), 1u);
  EXPECT_TRUE(participants_.epochs().empty());  // no marker for an undecided transaction

  ASSERT_EQ(End("tx", r, true), ErrorCode::kNone);
  EXPECT_TRUE(WaitState("tx", TxnState::kCompleteCommit));
  // The same transaction's state after a reload in a new epoch: what was written.
  coord_->UnloadPartition(0);
  LoadAndWait(4);
  rec = coord_->Find("tx");
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->state, TxnState::kCompleteCommit);
  EXPECT_EQ(rec->producer_epoch, r.producer_epoch);
}

// Markers carry the state partition's leader epoch; a Complete record whose write failed
// (not replicated) is written again, as Kafka's marker channel retries its log append.
TEST_F(ReplicatedTxnWritesTest, MarkersCarryTheLeaderEpochAndAFailedCompleteIsRetried) {
  LoadAndWait(7);
  TxnProducerResult r = Init("tx");
  ASSERT_EQ(r.error, ErrorCode::kNone);
  ASSERT_EQ(Add("tx", r, "a"), ErrorCode::kNone);
  participants_.Hold();
  ASSERT_EQ(End("tx", r, true), ErrorCode::kNone);
  fail_next_ = 2;  // the Complete record, twice
  participants_.Release();
  EXPECT_TRUE(WaitState("tx", TxnState::kCompleteCommit));
  EXPECT_EQ(fail_next_.load(), 0);
  ASSERT_FALSE(participants_.epochs().empty());
  for (int32_t e : participants_.epochs()) EXPECT_EQ(e, 7);
  // The next transaction goes on.
  ASSERT_EQ(Add("tx", r, "b"), ErrorCode::kNone);
}

}  // namespace
}  // namespace coordinator_partitions_test
}  // namespace sluice::broker
