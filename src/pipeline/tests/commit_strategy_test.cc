// The commit strategies (commit_strategy.h) driven as the runner drives them, with a
// FakeSource (whose group outlives a "crashed" member) and a FakeSink (fakes.h), no
// broker. A crash is the strategy, its source (and, for the state, its database) thrown
// away between two of the runner's calls; the restart is a new strategy over what
// survived. What must hold: the group's commit is never ahead of what is durable, and a
// restart resumes where the durable data ends (at-least-once; exactly once where the
// offsets live with the data).
#include "pipeline/commit_strategy.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "duck/database.h"
#include "pipeline/state_writer.h"
#include "pipeline/tests/fakes.h"
#include "pipeline/window.h"

namespace sluice::pipeline {
namespace {

using ::testing::ElementsAre;
using testing::FakeGroup;
using testing::FakeSink;
using testing::FakeSinkState;
using testing::FakeSource;

#define ASSERT_OK(expr)                                               \
  do {                                                                \
    const ::sluice::Status _status = (expr);                          \
    ASSERT_TRUE(_status.ok()) << #expr << ": " << _status.ToString(); \
  } while (0)

const std::pair<std::string, int32_t> kIn0 = {"in", 0};

CommitCounters Counters() {
  MetricsRegistry& m = MetricsRegistry::Global();
  MetricLabels labels = {{"pipeline", "commit_strategy_test"}};
  return {&m.GetCounter("test_commits_total", "", labels),
          &m.GetCounter("test_commit_errors_total", "", labels),
          new std::atomic<uint64_t>(0),  // lives as long as the test binary, as the registry does
          &m.GetHistogram("test_sink_commit_seconds", "", labels),
          &m.GetGauge("test_sink_commit_max", "", labels)};
}

SourceCounters NoSourceCounters() {
  MetricsRegistry& m = MetricsRegistry::Global();
  MetricLabels labels = {{"pipeline", "commit_strategy_test"}};
  return {&m.GetCounter("test_in_total", "", labels),
          &m.GetCounter("test_bytes_total", "", labels),
          new std::atomic<uint64_t>(0),
          &m.GetCounter("test_source_errors_total", "", labels),
          &m.GetCounter("test_full_total", "", labels),
          &m.GetGauge("test_ahead", "", labels)};
}

// What the sink's Write of a batch ending at `next` leaves staged (the strategy-level
// tests do not write rows).
void Wrote(FakeSinkState& sink, int64_t next) { sink.staged_offsets[kIn0] = next; }

// The runner's part of an assignment: the strategy says where partitions start.
struct Listener final : SourceListener {
  CommitStrategy* strategy;
  explicit Listener(CommitStrategy* s) : strategy(s) {}
  void Assigning(std::vector<kafka::client::TopicPartition>& partitions) override {
    strategy->Assigning(partitions);
  }
  void Heard(std::string_view, int32_t, SteadyTime) override {}
};

// A member: a strategy and a source over partition 0 of `group`, started (assigned).
struct Member {
  std::unique_ptr<CommitStrategy> strategy;
  std::unique_ptr<FakeSource> source;
  std::unique_ptr<Listener> listener;
  Member(FakeGroup* group, std::unique_ptr<CommitStrategy> s) : strategy(std::move(s)) {
    source = std::make_unique<FakeSource>(
        group, std::map<int32_t, std::vector<std::string>>{{0, {}}}, NoSourceCounters());
    strategy->set_source(source.get());
    listener = std::make_unique<Listener>(strategy.get());
    EXPECT_TRUE(source->Start(listener.get(), false).ok());
  }
};

TEST(AfterSinkStrategyTest, CrashBetweenSinkFlushAndCommitRereadsTheBatch) {
  FakeGroup group;
  {
    Member m(&group, CommitStrategy::AfterSink("t", Counters(), nullptr));
    // Batch [0, 2): the sink flushed it, then the commit.
    ASSERT_OK(m.strategy->CommitBatch({{kIn0, 2}}, true, CommitMode::kAsync));
    // Batch [2, 4): the sink flushed it ... and the process died before the commit.
  }
  EXPECT_EQ(group.committed.at(kIn0), 2);
  // The restart reads [2, 4) again: at-least-once.
  Member restarted(&group, CommitStrategy::AfterSink("t", Counters(), nullptr));
  EXPECT_THAT(group.log,
              ElementsAre("assigned in[0]@0", "commit async in[0]@2", "assigned in[0]@2"));
}

TEST(AfterSinkStrategyTest, AnAsyncCommitThatMovesNothingIsNotSentASyncOneIs) {
  FakeGroup group;
  Member m(&group, CommitStrategy::AfterSink("t", Counters(), nullptr));
  ASSERT_OK(m.strategy->CommitBatch({{kIn0, 2}}, true, CommitMode::kAsync));
  ASSERT_OK(m.strategy->CommitBatch({{kIn0, 2}}, true, CommitMode::kAsync));
  ASSERT_OK(m.strategy->CommitBatch({{kIn0, 2}}, true, CommitMode::kSync));
  EXPECT_THAT(group.log,
              ElementsAre("assigned in[0]@0", "commit async in[0]@2", "commit sync in[0]@2"));
}

// kStateTransaction over a state file: the batch's writes (here a table of rows, as a
// sqlcommand sink or a sqlflow-form table makes them) and its offsets commit together.
class StateTransactionStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("sluice-commit-strategy-{}", ::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A member over the state file: its database, its strategy (state's offsets loaded).
  struct StateMember {
    std::unique_ptr<duck::Database> db;
    std::unique_ptr<duck::Connection> conn;
    std::unique_ptr<Member> member;
  };
  std::unique_ptr<StateMember> Open(FakeGroup* group) {
    auto m = std::make_unique<StateMember>();
    duck::DatabaseOptions options;
    options.path = (dir_ / "state.duckdb").string();
    m->db = duck::Database::Open(options).value();
    m->conn = duck::Connection::Open(*m->db).value();
    EXPECT_TRUE(m->conn->Execute("CREATE TABLE IF NOT EXISTS rows (id BIGINT)").ok());
    auto tables = StateTables::Open(*m->conn).value();
    StateTables::Loaded loaded = tables->Load().value();
    m->member = std::make_unique<Member>(
        group, CommitStrategy::StateTransaction("t", Counters(), nullptr, std::move(tables),
                                                loaded.offsets));
    return m;
  }
  // One batch of ids [from, to) through the strategy, as ProcessBatch runs it; stops
  // after `steps` of: 1 the writes and offsets in the open transaction, 2 COMMIT, 3 the
  // group commit.
  static void Batch(StateMember& m, int from, int to, int steps) {
    CommitStrategy& s = *m.member->strategy;
    ASSERT_TRUE(s.SavesInTransaction());
    ASSERT_OK(m.conn->Execute("BEGIN TRANSACTION"));
    ASSERT_OK(
        m.conn->Execute(fmt::format("INSERT INTO rows SELECT range FROM range({}, {})", from, to)));
    ASSERT_OK(s.SaveBatch({{kIn0, to}}));
    if (steps < 2) return;
    ASSERT_OK(m.conn->Execute("COMMIT"));
    s.BatchCommitted({{kIn0, to}});
    if (steps < 3) return;
    ASSERT_OK(s.CommitBatch({{kIn0, to}}, true, CommitMode::kAsync));
  }
  static int64_t Rows(StateMember& m) {
    return std::stoll(m.conn->QueryText("SELECT count(*) FROM rows").value()[0][0].value_or("-1"));
  }

  std::filesystem::path dir_;
};

TEST_F(StateTransactionStrategyTest, CrashBeforeTheStateCommitLeavesStateAndOffsetsAsTheyWere) {
  FakeGroup group;
  {
    auto m = Open(&group);
    ASSERT_NO_FATAL_FAILURE(Batch(*m, 0, 2, 3));
    ASSERT_NO_FATAL_FAILURE(Batch(*m, 2, 4, 1));  // dies with its transaction open
  }
  auto m = Open(&group);
  EXPECT_EQ(Rows(*m), 2);  // the rows of the first batch only
  EXPECT_EQ(m->member->strategy->stored().at(kIn0), 2);
  EXPECT_EQ(group.committed.at(kIn0), 2);
  EXPECT_EQ(group.log.back(), "assigned in[0]@2");  // reads the second batch again
}

TEST_F(StateTransactionStrategyTest, CrashBetweenTheStateCommitAndTheGroupCommitResumesAtTheState) {
  FakeGroup group;
  {
    auto m = Open(&group);
    ASSERT_NO_FATAL_FAILURE(Batch(*m, 0, 2, 3));
    ASSERT_NO_FATAL_FAILURE(Batch(*m, 2, 4, 2));  // state committed, the group commit never sent
  }
  EXPECT_EQ(group.committed.at(kIn0), 2);
  auto m = Open(&group);
  EXPECT_EQ(Rows(*m), 4);
  // The state's offset, ahead of the group's: the second batch is not counted twice.
  EXPECT_EQ(group.log.back(), "assigned in[0]@4");
}

// kWriteBehind: a window engine over an in-memory database, its state written behind to
// a second database (the state file) by a StateWriter.
class WriteBehindStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WindowConfig config;
    config.type = WindowType::kTumbling;
    config.time_column = "ts";
    config.size_us = int64_t{60'000'000};
    config.emit_sql = "SELECT * FROM closed";
    config.emit_origin = "t.yml:1";
    db_ = duck::Database::Open(duck::DatabaseOptions{}).value();
    conn_ = duck::Connection::Open(*db_).value();
    engine_ = WindowEngine::Create(*conn_, config, "t", nullptr, true).value();
    file_ = duck::Database::Open(duck::DatabaseOptions{}).value();
    auto writer_conn = duck::Connection::Open(*file_).value();
    auto tables = StateTables::Open(*writer_conn).value();
    auto writer = StateWriter::Start(std::move(writer_conn), std::move(tables), config, "t", 4);
    member_ = std::make_unique<Member>(
        &group_,
        CommitStrategy::WriteBehind("t", Counters(), engine_.get(), std::move(writer), {}));
  }
  void TearDown() override {
    member_.reset();  // the writer writes what is queued
    engine_.reset();
    conn_.reset();
    db_.reset();
  }
  // The next offset of partition 0 the state file holds.
  int64_t OnFile() {
    auto conn = duck::Connection::Open(*file_).value();
    auto r = conn->QueryText(
        "SELECT arg_max(next_offset, seq) FROM sluice_state WHERE \"partition\" = 0");
    return r.ok() && !r->empty() ? std::stoll((*r)[0][0].value_or("-1")) : -1;
  }
  CommitStrategy& strategy() { return *member_->strategy; }

  FakeGroup group_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  std::unique_ptr<WindowEngine> engine_;
  std::unique_ptr<duck::Database> file_;
  std::unique_ptr<Member> member_;
};

TEST_F(WriteBehindStrategyTest, TheGroupCommitFollowsTheStateFile) {
  ASSERT_FALSE(strategy().SavesInTransaction());  // the batch commits in memory first
  ASSERT_OK(strategy().CommitBatch({{kIn0, 2}}, true, CommitMode::kAsync));
  ASSERT_OK(strategy().Flush(CommitMode::kSync));  // waits for the file, then commits
  EXPECT_EQ(group_.committed.at(kIn0), 2);
  member_.reset();
  EXPECT_EQ(OnFile(), 2);
}

TEST_F(WriteBehindStrategyTest, TheGroupCommitStopsAtWhatAnOpenWindowNeeds) {
  // The batch's rows went into a window still open; its messages start at offset 0.
  engine_->NoteSources({{kIn0, 0}});
  ASSERT_OK(strategy().CommitBatch({{kIn0, 2}}, true, CommitMode::kAsync));
  ASSERT_OK(strategy().Flush(CommitMode::kSync));
  // The file holds the batch (a restart with it resumes at 2); without the file a restart
  // reads the open window's messages again from the group's 0.
  EXPECT_EQ(group_.committed.at(kIn0), 0);
  member_.reset();
  EXPECT_EQ(OnFile(), 2);
}

// A member whose sink defers (kSinkCommit); `state` is what the sink holds, and outlives it.
struct SinkMember {
  FakeSink sink;
  Member member;
  SinkMember(FakeGroup* group, FakeSinkState* state)
      : sink((state->defers = true, state)),
        member(group, CommitStrategy::SinkCommit("t", Counters(), &sink, nullptr, {})) {}
  CommitStrategy& strategy() { return *member.strategy; }
};

TEST(SinkCommitStrategyTest, CrashBeforeTheSinksCommitRereadsWhatItOnlyStaged) {
  FakeGroup group;
  FakeSinkState survived;  // what the sink holds durably: its commits' offsets
  {
    FakeSinkState state;
    SinkMember m(&group, &state);
    Wrote(state, 2);
    ASSERT_OK(m.strategy().CommitBatch({{kIn0, 2}}, true, CommitMode::kAsync));  // staged, not due
    ASSERT_OK(m.strategy().Flush(CommitMode::kSync));                            // the sink commits
    Wrote(state, 4);
    ASSERT_OK(m.strategy().CommitBatch({{kIn0, 4}}, true, CommitMode::kAsync));  // staged ... crash
    survived.held = state.held;
  }
  EXPECT_THAT(group.log, ElementsAre("assigned in[0]@0", "commit sync in[0]@2"));
  SinkMember restarted(&group, &survived);
  EXPECT_EQ(group.log.back(), "assigned in[0]@2");
}

TEST(SinkCommitStrategyTest, CrashBetweenTheSinksCommitAndTheGroupCommitResumesAtTheSink) {
  FakeGroup group;
  FakeSinkState state;
  {
    SinkMember m(&group, &state);
    Wrote(state, 3);
    ASSERT_OK(m.strategy().CommitBatch({{kIn0, 3}}, true, CommitMode::kAsync));
    // The sink's commit made [0, 3) durable with its offsets; the process died before the
    // group commit.
    ASSERT_TRUE(m.sink.Commit(true).ok());
  }
  EXPECT_TRUE(group.committed.empty());
  SinkMember restarted(&group, &state);
  EXPECT_EQ(group.log.back(), "assigned in[0]@3");  // exactly once: not from the group's
}

TEST(SinkCommitStrategyTest, ABatchTheSinkDidNotTakeIsCommittedPastWithTheNext) {
  FakeGroup group;
  FakeSinkState state;
  SinkMember m(&group, &state);
  // on_error IGNORE or DLQ: the batch's messages were skipped or dead-lettered.
  ASSERT_OK(m.strategy().CommitBatch({{kIn0, 5}}, false, CommitMode::kAsync));
  ASSERT_OK(m.strategy().Flush(CommitMode::kSync));
  EXPECT_EQ(group.committed.at(kIn0), 5);
}

TEST(SinkCommitStrategyTest, LostPartitionsDiscardWhatIsStagedAndCommitNothing) {
  FakeGroup group;
  FakeSinkState state;
  SinkMember m(&group, &state);
  Wrote(state, 3);
  ASSERT_OK(m.strategy().CommitBatch({{kIn0, 3}}, true, CommitMode::kAsync));
  ASSERT_OK(m.strategy().Lost({{"in", 0, testing::kUnset}}));
  ASSERT_OK(m.strategy().Flush(CommitMode::kSync));
  EXPECT_TRUE(group.committed.empty());
  EXPECT_THAT(state.log, ElementsAre("discard"));
}

TEST(SinkCommitStrategyTest, PartitionsAssignedAgainStartWhereTheSinkEndsNow) {
  FakeGroup group;
  FakeSinkState state;
  SinkMember m(&group, &state);
  m.strategy().Revoked({{"in", 0, testing::kUnset}});
  state.held[kIn0] = 7;  // another member wrote the partition meanwhile
  std::vector<kafka::client::TopicPartition> assigned = {{"in", 0, testing::kUnset}};
  m.strategy().Assigning(assigned);
  EXPECT_EQ(assigned[0].offset, 7);
}

}  // namespace
}  // namespace sluice::pipeline
