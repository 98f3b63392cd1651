// TxnCoordinator against a fake TxnParticipants: Kafka's answers for InitProducerId,
// AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, Describe/List, fencing, KIP-360 bumps,
// epoch exhaustion, timeouts, expiration, and markers written again after a restart.
#include "broker/txn_coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "broker/txn_log.h"
#include "broker/txn_participants.h"
#include "compaction/cleaner.h"
#include "storage/io_executor.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;
using storage::testing::TempDir;

// Records every marker; answers at once (from another thread) unless held.
class FakeParticipants : public TxnParticipants {
 public:
  struct Call {
    TxnMarker marker;
    std::vector<TopicPartition> partitions;
    std::vector<std::string> groups;
  };
  void WritePartitionMarkers(const TxnMarker& marker, std::vector<TopicPartition> partitions,
                             std::function<void(std::vector<ErrorCode>)> done) override {
    std::vector<ErrorCode> errors(partitions.size(), ErrorCode::kNone);
    std::lock_guard g(mu_);
    if (fail_next_ > 0) {
      --fail_next_;
      errors.assign(partitions.size(), ErrorCode::kNotLeaderOrFollower);
    }
    calls_.push_back({marker, std::move(partitions), {}});
    Answer(std::move(done), std::move(errors));
  }
  void CompleteGroupOffsets(const TxnMarker& marker, std::vector<std::string> groups,
                            std::function<void(std::vector<ErrorCode>)> done) override {
    std::vector<ErrorCode> errors(groups.size(), ErrorCode::kNone);
    std::lock_guard g(mu_);
    calls_.push_back({marker, {}, std::move(groups)});
    Answer(std::move(done), std::move(errors));
  }
  std::vector<Call> calls() {
    std::lock_guard g(mu_);
    return calls_;
  }
  void Hold(bool hold) {
    std::lock_guard g(mu_);
    hold_ = hold;
  }
  // Stops holding and answers the markers held so far (they were written after all).
  void Release() {
    std::lock_guard g(mu_);
    hold_ = false;
    for (auto& done : held_) {
      threads_.emplace_back([done = std::move(done)] { done({ErrorCode::kNone}); });
    }
    held_.clear();
  }
  void FailNext(int n) {
    std::lock_guard g(mu_);
    fail_next_ = n;
  }
  ~FakeParticipants() override {
    for (auto& t : threads_) t.join();
  }

 private:
  void Answer(std::function<void(std::vector<ErrorCode>)> done, std::vector<ErrorCode> errors) {
    if (hold_) {
      held_.push_back(std::move(done));  // never answered: a crash before the markers
      return;
    }
    threads_.emplace_back([done = std::move(done), errors = std::move(errors)] { done(errors); });
  }
  std::mutex mu_;
  std::vector<Call> calls_;
  std::vector<std::function<void(std::vector<ErrorCode>)>> held_;
  std::vector<std::thread> threads_;
  bool hold_ = false;
  int fail_next_ = 0;
};

class TxnCoordinatorTest : public ::testing::Test {
 protected:
  TxnCoordinatorOptions Options() {
    TxnCoordinatorOptions o;
    o.dir = dir_.path() + "/__transaction_state-0";
    o.executor = &executor_;
    o.participants = &participants_;
    o.allocate_producer_id = [this]() -> Result<int64_t> { return next_pid_++; };
    o.abort_check_interval_ms = 20;
    o.marker_retry_ms = 5;
    return o;
  }
  void Open(TxnCoordinatorOptions o, bool start_markers = true) {
    auto c = TxnCoordinator::Open(std::move(o));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    coord_ = std::move(c).value();
    if (start_markers) coord_->StartMarkers();
  }
  void Open() { Open(Options()); }

  template <class R, class F>
  static R Wait(F start) {
    std::promise<R> p;
    start([&p](R r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  TxnProducerResult Init(const std::string& id, int32_t timeout = 60000, int64_t pid = -1,
                         int16_t epoch = -1) {
    return Wait<TxnProducerResult>(
        [&](auto done) { coord_->InitProducerId(id, timeout, pid, epoch, done); });
  }
  ErrorCode Add(const std::string& id, const TxnProducerResult& p,
                std::vector<TopicPartition> tps) {
    return Wait<ErrorCode>(
        [&](auto done) { coord_->AddPartitions(id, p.producer_id, p.producer_epoch, tps, done); });
  }
  ErrorCode AddGroup(const std::string& id, const TxnProducerResult& p, const std::string& g) {
    return Wait<ErrorCode>(
        [&](auto done) { coord_->AddOffsets(id, p.producer_id, p.producer_epoch, g, done); });
  }
  TxnProducerResult End(const std::string& id, int64_t pid, int16_t epoch, bool commit) {
    return Wait<TxnProducerResult>(
        [&](auto done) { coord_->EndTxn(id, pid, epoch, commit, done); });
  }
  TxnDescription Describe(const std::string& id) {
    return Wait<std::vector<TxnDescription>>([&](auto done) { coord_->Describe({id}, done); })
        .at(0);
  }
  // Polls until the id reaches `state` (markers and records complete asynchronously).
  bool WaitForState(const std::string& id, TxnState state) {
    for (int i = 0; i < 2000; ++i) {
      auto r = coord_->Find(id);
      if (r && r->state == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  TempDir dir_{"txn-coordinator-test"};
  storage::IoExecutor executor_{2};
  FakeParticipants participants_;
  std::atomic<int64_t> next_pid_{1000};
  std::unique_ptr<TxnCoordinator> coord_;
};

TEST_F(TxnCoordinatorTest, InitGivesANewIdThenBumpsTheEpoch) {
  Open();
  auto a = Init("t");
  ASSERT_EQ(a.error, ErrorCode::kNone);
  EXPECT_EQ(a.producer_id, 1000);
  EXPECT_EQ(a.producer_epoch, 0);
  auto b = Init("t");
  EXPECT_EQ(b.producer_id, 1000);
  EXPECT_EQ(b.producer_epoch, 1);
  EXPECT_EQ(Init("other").producer_id, 1001);
}

TEST_F(TxnCoordinatorTest, BadInitRequestsGetKafkasErrors) {
  Open();
  EXPECT_EQ(Init("").error, ErrorCode::kInvalidRequest);
  EXPECT_EQ(Init("t", 0).error, ErrorCode::kInvalidTransactionTimeout);
  EXPECT_EQ(Init("t", 900001).error, ErrorCode::kInvalidTransactionTimeout);
  EXPECT_EQ(Init("t", 900000).error, ErrorCode::kNone);
}

TEST_F(TxnCoordinatorTest, CommitWritesPrepareMarkersThenComplete) {
  Open();
  auto p = Init("t");
  ASSERT_EQ(Add("t", p, {{"a", 0}, {"b", 1}}), ErrorCode::kNone);
  ASSERT_EQ(AddGroup("t", p, "g"), ErrorCode::kNone);
  auto d = Describe("t");
  EXPECT_EQ(d.state, "Ongoing");
  EXPECT_EQ(d.partitions.size(), 3u);  // a-0, b-1 and __consumer_offsets-0
  auto e = End("t", p.producer_id, p.producer_epoch, true);
  ASSERT_EQ(e.error, ErrorCode::kNone);
  ASSERT_TRUE(WaitForState("t", TxnState::kCompleteCommit));
  auto calls = participants_.calls();
  ASSERT_EQ(calls.size(), 2u);
  for (const auto& c : calls) {
    EXPECT_TRUE(c.marker.commit);
    EXPECT_EQ(c.marker.producer_id, p.producer_id);
    EXPECT_EQ(c.marker.producer_epoch, p.producer_epoch);
    if (c.groups.empty()) {
      EXPECT_EQ(c.partitions, (std::vector<TopicPartition>{{"a", 0}, {"b", 1}}));
    } else {
      EXPECT_EQ(c.groups, std::vector<std::string>{"g"});
    }
  }
  // A retried commit is answered NONE; an abort now is INVALID_TXN_STATE.
  EXPECT_EQ(End("t", p.producer_id, p.producer_epoch, true).error, ErrorCode::kNone);
  EXPECT_EQ(End("t", p.producer_id, p.producer_epoch, false).error, ErrorCode::kInvalidTxnState);
  // The next transaction starts from CompleteCommit.
  EXPECT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  EXPECT_EQ(Describe("t").partitions.size(), 1u);
}

TEST_F(TxnCoordinatorTest, RefusedMarkersAreRetried) {
  Open();
  participants_.FailNext(2);
  auto p = Init("t");
  ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  ASSERT_EQ(End("t", p.producer_id, p.producer_epoch, false).error, ErrorCode::kNone);
  ASSERT_TRUE(WaitForState("t", TxnState::kCompleteAbort));
  EXPECT_EQ(participants_.calls().size(), 3u);
}

TEST_F(TxnCoordinatorTest, EndTxnErrors) {
  Open();
  EXPECT_EQ(End("nobody", 1, 0, true).error, ErrorCode::kInvalidProducerIdMapping);
  auto p = Init("t");
  EXPECT_EQ(End("t", p.producer_id, p.producer_epoch, true).error, ErrorCode::kInvalidTxnState);
  ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  EXPECT_EQ(End("t", p.producer_id + 1, p.producer_epoch, true).error,
            ErrorCode::kInvalidProducerIdMapping);
  EXPECT_EQ(End("t", p.producer_id, static_cast<int16_t>(p.producer_epoch + 1), true).error,
            ErrorCode::kProducerFenced);
  EXPECT_EQ(Add("t", {ErrorCode::kNone, p.producer_id, 7}, {{"a", 1}}), ErrorCode::kProducerFenced);
  EXPECT_EQ(Add("nobody", p, {{"a", 1}}), ErrorCode::kInvalidProducerIdMapping);
}

TEST_F(TxnCoordinatorTest, CommitInProgressAnswersConcurrentTransactions) {
  Open();
  participants_.Hold(true);
  auto p = Init("t");
  ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  ASSERT_EQ(End("t", p.producer_id, p.producer_epoch, true).error, ErrorCode::kNone);
  EXPECT_EQ(End("t", p.producer_id, p.producer_epoch, true).error,
            ErrorCode::kConcurrentTransactions);
  EXPECT_EQ(End("t", p.producer_id, p.producer_epoch, false).error, ErrorCode::kInvalidTxnState);
  EXPECT_EQ(Add("t", p, {{"a", 1}}), ErrorCode::kConcurrentTransactions);
  EXPECT_EQ(Init("t").error, ErrorCode::kConcurrentTransactions);
  EXPECT_EQ(Describe("t").state, "PrepareCommit");
}

TEST_F(TxnCoordinatorTest, AddWhileTheLastTransactionCompletesWaitsForIt) {
  TxnCoordinatorOptions o = Options();
  o.add_wait_ms = 60'000;  // the release below decides, not the clock
  Open(std::move(o));
  participants_.Hold(true);
  auto p = Init("t");
  ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  ASSERT_EQ(End("t", p.producer_id, p.producer_epoch, true).error, ErrorCode::kNone);
  // The next transaction's first AddPartitionsToTxn arrives while the markers are held.
  std::promise<ErrorCode> added;
  coord_->AddPartitions("t", p.producer_id, p.producer_epoch, {{"a", 1}},
                        [&added](ErrorCode e) { added.set_value(e); });
  auto answer = added.get_future();
  EXPECT_EQ(Describe("t").state, "PrepareCommit");
  EXPECT_EQ(answer.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout)
      << "answered before the previous transaction completed";
  participants_.Release();
  EXPECT_EQ(answer.get(), ErrorCode::kNone);
  EXPECT_EQ(Describe("t").state, "Ongoing");
}

TEST_F(TxnCoordinatorTest, AddsArrivingTogetherAreBothTaken) {
  TxnCoordinatorOptions o = Options();
  o.add_wait_ms = 600'000;  // a request left waiting would hang the test
  Open(std::move(o));
  auto p = Init("t");
  // librdkafka adds partitions as it discovers them: the second request arrives while
  // the first one's record is being written, and goes on once it is.
  std::promise<ErrorCode> first, second;
  coord_->AddPartitions("t", p.producer_id, p.producer_epoch, {{"a", 0}},
                        [&first](ErrorCode e) { first.set_value(e); });
  coord_->AddPartitions("t", p.producer_id, p.producer_epoch, {{"a", 1}},
                        [&second](ErrorCode e) { second.set_value(e); });
  EXPECT_EQ(first.get_future().get(), ErrorCode::kNone);
  EXPECT_EQ(second.get_future().get(), ErrorCode::kNone);
  EXPECT_EQ(Describe("t").state, "Ongoing");
}

TEST_F(TxnCoordinatorTest, SecondProducerFencesTheFirst) {
  Open();
  auto first = Init("t");
  ASSERT_EQ(Add("t", first, {{"a", 0}}), ErrorCode::kNone);
  // A new producer with the same id: the open transaction is aborted with a bumped epoch
  // and the new producer is told to retry.
  EXPECT_EQ(Init("t").error, ErrorCode::kConcurrentTransactions);
  ASSERT_TRUE(WaitForState("t", TxnState::kCompleteAbort));
  auto calls = participants_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0].marker.commit);
  EXPECT_EQ(calls[0].marker.producer_epoch, first.producer_epoch + 1);
  auto second = Init("t");
  ASSERT_EQ(second.error, ErrorCode::kNone);
  EXPECT_EQ(second.producer_epoch, first.producer_epoch + 2);
  EXPECT_EQ(End("t", first.producer_id, first.producer_epoch, true).error,
            ErrorCode::kProducerFenced);
  EXPECT_EQ(Add("t", first, {{"a", 0}}), ErrorCode::kProducerFenced);
}

TEST_F(TxnCoordinatorTest, Kip360BumpWithProducerIdAndEpoch) {
  Open();
  auto p = Init("t");
  auto bumped = Init("t", 60000, p.producer_id, p.producer_epoch);
  ASSERT_EQ(bumped.error, ErrorCode::kNone);
  EXPECT_EQ(bumped.producer_epoch, p.producer_epoch + 1);
  // A retry of the same bump (its answer lost) gets the same answer.
  auto again = Init("t", 60000, p.producer_id, p.producer_epoch);
  ASSERT_EQ(again.error, ErrorCode::kNone);
  EXPECT_EQ(again.producer_epoch, bumped.producer_epoch);
  // An older epoch, or another producer id, is fenced.
  EXPECT_EQ(Init("t", 60000, p.producer_id, 77).error, ErrorCode::kProducerFenced);
  EXPECT_EQ(Init("t", 60000, 5, 0).error, ErrorCode::kProducerFenced);
}

TEST_F(TxnCoordinatorTest, ExhaustedEpochGetsANewProducerId) {
  Open();
  auto p = Init("t");
  coord_->RunAndWait([] {});
  // Walk the epoch up to the last one a client may hold.
  TxnProducerResult cur = p;
  for (int i = 0; i < 3; ++i) cur = Init("t");
  ASSERT_EQ(cur.producer_epoch, 3);
  // Jump close to the end through the log: write a record with a high epoch and reopen.
  ASSERT_TRUE(coord_->Close().ok());
  coord_.reset();
  {
    TxnLogOptions lo;
    lo.dir = Options().dir;
    lo.executor = &executor_;
    auto log = TxnLog::Open(lo);
    ASSERT_TRUE(log.ok());
    TxnRecord r = (*log)->records().at("t");
    r.producer_epoch = kMaxClientEpoch;
    std::promise<Status> written;
    ASSERT_TRUE((*log)->Write("t", r, [&](const Status& s) { written.set_value(s); }).ok());
    ASSERT_TRUE(written.get_future().get().ok());
  }
  Open();
  auto rotated = Init("t", 60000, p.producer_id, kMaxClientEpoch);
  ASSERT_EQ(rotated.error, ErrorCode::kNone);
  EXPECT_NE(rotated.producer_id, p.producer_id);
  EXPECT_EQ(rotated.producer_epoch, 0);
  // A retry of the rotation from the old id with the exhausted epoch is not fenced.
  auto retry = Init("t", 60000, p.producer_id, kMaxClientEpoch);
  EXPECT_EQ(retry.error, ErrorCode::kNone);
  EXPECT_EQ(retry.producer_id, rotated.producer_id);
}

TEST_F(TxnCoordinatorTest, TimedOutTransactionIsAbortedAndTheEpochBumped) {
  Open();
  auto p = Init("t", 50);
  ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  ASSERT_TRUE(WaitForState("t", TxnState::kCompleteAbort));
  auto d = Describe("t");
  EXPECT_EQ(d.producer_epoch, p.producer_epoch + 1);
  EXPECT_EQ(End("t", p.producer_id, p.producer_epoch, true).error, ErrorCode::kProducerFenced);
  auto calls = participants_.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0].marker.commit);
  EXPECT_EQ(calls[0].marker.producer_epoch, p.producer_epoch + 1);
}

TEST_F(TxnCoordinatorTest, IdleIdsExpire) {
  TxnCoordinatorOptions o = Options();
  o.id_expiration_ms = 30;
  Open(o);
  ASSERT_EQ(Init("t").error, ErrorCode::kNone);
  for (int i = 0; i < 2000 && coord_->Find("t"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(coord_->Find("t"));
  EXPECT_EQ(Describe("t").error, ErrorCode::kTransactionalIdNotFound);
  ASSERT_TRUE(coord_->Close().ok());
  Open();
  EXPECT_FALSE(coord_->Find("t"));
}

TEST_F(TxnCoordinatorTest, DescribeAndList) {
  Open();
  EXPECT_EQ(Describe("none").error, ErrorCode::kTransactionalIdNotFound);
  EXPECT_EQ(Describe("").error, ErrorCode::kInvalidRequest);
  auto a = Init("a");
  auto b = Init("b");
  ASSERT_EQ(Add("b", b, {{"x", 0}}), ErrorCode::kNone);
  auto list = [&](std::vector<std::string> states, std::vector<int64_t> pids, int64_t dur) {
    return Wait<TxnListResult>([&](auto done) { coord_->List(states, pids, dur, done); });
  };
  auto all = list({}, {}, -1);
  ASSERT_EQ(all.states.size(), 2u);
  EXPECT_EQ(all.states[0].transactional_id, "a");
  EXPECT_EQ(all.states[0].state, "Empty");
  auto ongoing = list({"Ongoing", "Bogus"}, {}, -1);
  ASSERT_EQ(ongoing.states.size(), 1u);
  EXPECT_EQ(ongoing.states[0].transactional_id, "b");
  EXPECT_EQ(ongoing.unknown_state_filters, std::vector<std::string>{"Bogus"});
  auto by_pid = list({}, {a.producer_id}, -1);
  ASSERT_EQ(by_pid.states.size(), 1u);
  EXPECT_EQ(by_pid.states[0].transactional_id, "a");
  // Duration: only transactions running longer than the filter.
  EXPECT_EQ(list({"Ongoing"}, {}, 3600000).states.size(), 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));  // strictly longer than 0 ms
  EXPECT_EQ(list({"Ongoing"}, {}, 0).states.size(), 1u);
}

TEST_F(TxnCoordinatorTest, VerifyAnswersForTheProducePath) {
  Open();
  auto p = Init("t");
  ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  auto verify = [&](int64_t pid, int16_t epoch) {
    return Wait<std::vector<ErrorCode>>([&](auto done) {
      coord_->Verify("t", pid, epoch, {{"a", 0}, {"a", 1}}, done);
    });
  };
  EXPECT_EQ(verify(p.producer_id, p.producer_epoch),
            (std::vector<ErrorCode>{ErrorCode::kNone, ErrorCode::kInvalidTxnState}));
  EXPECT_EQ(verify(p.producer_id, 9)[0], ErrorCode::kInvalidProducerEpoch);
  EXPECT_EQ(verify(99, p.producer_epoch)[0], ErrorCode::kInvalidProducerIdMapping);
}

TEST_F(TxnCoordinatorTest, PrepareFoundAtOpenIsCompleted) {
  Open();
  participants_.Hold(true);
  auto p = Init("t");
  ASSERT_EQ(Add("t", p, {{"a", 0}, {"a", 1}}), ErrorCode::kNone);
  ASSERT_EQ(End("t", p.producer_id, p.producer_epoch, true).error, ErrorCode::kNone);
  ASSERT_TRUE(coord_->Close().ok());  // the markers never came back: as after a crash
  coord_.reset();
  participants_.Hold(false);
  Open(Options(), /*start_markers=*/false);
  // Nothing is written before the partitions can take markers.
  EXPECT_EQ(Describe("t").state, "PrepareCommit");
  EXPECT_EQ(participants_.calls().size(), 1u);
  coord_->StartMarkers();
  ASSERT_TRUE(WaitForState("t", TxnState::kCompleteCommit));
  auto calls = participants_.calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_TRUE(calls[1].marker.commit);
  EXPECT_EQ(calls[1].partitions, (std::vector<TopicPartition>{{"a", 0}, {"a", 1}}));
}

TEST_F(TxnCoordinatorTest, OngoingFoundAtOpenTimesOut) {
  Open();
  auto p = Init("t", 100);
  ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
  ASSERT_TRUE(coord_->Close().ok());
  coord_.reset();
  Open();
  ASSERT_TRUE(WaitForState("t", TxnState::kCompleteAbort));
}

// The coordinator registers its state log with the cleaner it is given; cleaned, the log
// holds the one live id and what the active segment (never cleaned) holds.
TEST_F(TxnCoordinatorTest, StateLogIsCompactedByTheCleaner) {
  compaction::LogCleaner cleaner(compaction::CleanerOptions{});
  TxnCoordinatorOptions o = Options();
  o.log_segment_bytes = 4096;
  o.cleaner = &cleaner;
  Open(o);
  ASSERT_TRUE(cleaner.Contains(kTxnLogName));
  auto p = Init("t");
  for (int i = 0; i < 150; ++i) {
    ASSERT_EQ(Add("t", p, {{"a", 0}}), ErrorCode::kNone);
    ASSERT_EQ(End("t", p.producer_id, p.producer_epoch, i % 2 == 0).error, ErrorCode::kNone);
    ASSERT_TRUE(
        WaitForState("t", i % 2 == 0 ? TxnState::kCompleteCommit : TxnState::kCompleteAbort));
  }
  auto stats = cleaner.CleanNow(kTxnLogName);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GT(stats->records_read, stats->records_kept);
  ASSERT_TRUE(coord_->Close().ok());
  EXPECT_FALSE(cleaner.Contains(kTxnLogName));  // unregistered before the log closed
  coord_.reset();
  TxnLogOptions lo;
  lo.dir = o.dir;
  lo.executor = &executor_;
  auto log = TxnLog::Open(lo);
  ASSERT_TRUE(log.ok());
  // The cleaned segments hold one record of "t"; the active one less than a segment and
  // a batch.
  EXPECT_LT((*log)->log_bytes(), 2u * 4096);
  EXPECT_EQ((*log)->records().at("t").state, TxnState::kCompleteAbort);
  EXPECT_EQ((*log)->skipped_records(), 0);
}

}  // namespace
}  // namespace sluice::broker

namespace sluice::broker {
namespace {

TEST(BrokerTxnParticipantsTest, GathersOneAnswerPerPartitionAndGroupInOrder) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::pair<std::string, bool>> seen;
  BrokerTxnParticipants p(
      [&](const TxnMarker& m, const TopicPartition& tp, std::function<void(ErrorCode)> done) {
        std::lock_guard g(mu);
        seen.emplace_back(tp.topic + "-" + std::to_string(tp.partition), m.commit);
        ErrorCode e = tp.partition == 1 ? ErrorCode::kNotLeaderOrFollower : ErrorCode::kNone;
        threads.emplace_back([done, e] { done(e); });
      },
      [&](const TxnMarker& m, const std::string& group, std::function<void(ErrorCode)> done) {
        std::lock_guard g(mu);
        seen.emplace_back(group, m.commit);
        done(group == "bad" ? ErrorCode::kCoordinatorNotAvailable : ErrorCode::kNone);
      });
  std::promise<std::vector<ErrorCode>> parts;
  p.WritePartitionMarkers({1, 0, true, 0}, {{"a", 0}, {"a", 1}, {"b", 0}},
                          [&](std::vector<ErrorCode> e) { parts.set_value(std::move(e)); });
  EXPECT_EQ(parts.get_future().get(),
            (std::vector<ErrorCode>{ErrorCode::kNone, ErrorCode::kNotLeaderOrFollower,
                                    ErrorCode::kNone}));
  std::promise<std::vector<ErrorCode>> groups;
  p.CompleteGroupOffsets({1, 0, false, 0}, {"g", "bad"},
                         [&](std::vector<ErrorCode> e) { groups.set_value(std::move(e)); });
  EXPECT_EQ(groups.get_future().get(),
            (std::vector<ErrorCode>{ErrorCode::kNone, ErrorCode::kCoordinatorNotAvailable}));
  std::promise<std::vector<ErrorCode>> none;
  p.WritePartitionMarkers({1, 0, true, 0}, {},
                          [&](std::vector<ErrorCode> e) { none.set_value(std::move(e)); });
  EXPECT_TRUE(none.get_future().get().empty());
  for (auto& t : threads) t.join();
  EXPECT_EQ(seen.size(), 5u);
}

}  // namespace
}  // namespace sluice::broker
