// Exactly-once pipelines into Kafka without a broker (docs/design/0006 #12): the runner and
// the kSinkCommit strategy over a FakeSource and a FakeTxnSink (txn_fakes.h), which keeps
// a cluster's transactions as a read_committed consumer sees them. A member "crashes" at
// every step of a batch (after its rows, after the flush, after the dead letters, after
// the offsets were sent, after the commit); the restart, a new member with the same
// transactional.id, fences what the crashed one left open and resumes at the group's
// commit. What must hold: every result and every dead letter visible exactly once, the
// offsets committed only by the transaction (never by the consumer), a revocation commits
// the batch in hand before the partitions go, a loss and a fenced or stale member commit
// nothing.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "duck/database.h"
#include "pipeline/commit_strategy.h"
#include "pipeline/kafka_source.h"
#include "pipeline/runner.h"
#include "pipeline/tests/fakes.h"
#include "pipeline/tests/txn_fakes.h"

namespace sluice::pipeline {
namespace {

using testing::FakeGroup;
using testing::FakeSource;
using testing::FakeTxnCluster;
using testing::FakeTxnSink;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr std::string_view kDlq =
    "    policy: DLQ\n    dlq:\n      type: kafka\n"
    "      kafka: {brokers: [localhost:9092], topic: dlq}";
constexpr std::string_view kRaise = "    policy: RAISE";

std::string Pipeline(int batch_size, std::string_view on_error) {
  return fmt::format(R"(pipeline:
  name: t
  batch_size: {}
  source:
    type: kafka
    kafka:
      brokers: [localhost:9092]
      group_id: g
      auto_offset_reset: earliest
      topics: [in]
  handler:
    type: handlers.InferredMemBatch
    sql: SELECT id FROM batch ORDER BY kafka_offset
  sink:
    type: kafka
    kafka:
      brokers: [localhost:9092]
      topic: out
      exactly_once: true
      transactional_id: t
  on_error:
{}
)",
                     batch_size, on_error);
}

// Records {"id":from} .. {"id":to-1}, each `bad_every`th one not JSON (a dead letter).
std::vector<std::string> Input(int from, int to, int bad_every = 0) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) {
    out.push_back(bad_every > 0 && i % bad_every == bad_every - 1
                      ? fmt::format("bad {}", i)
                      : fmt::format(R"({{"id":{}}})", i));
  }
  return out;
}

// One member: a runner over a FakeSource of `group` and a FakeTxnSink on `cluster`.
struct Member {
  MetricsRegistry metrics;  // outlives the runner
  std::unique_ptr<PipelineRunner> runner;
  FakeTxnSink* sink = nullptr;

  Member(FakeGroup* group, FakeTxnCluster* cluster,
         std::map<int32_t, std::vector<std::string>> partitions, const std::string& yaml,
         FakeSource::Script script = {}) {
    auto config = ParsePipeline(yaml, "t.yml", MapEnv({}));
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    RunnerOptions options;
    options.metrics = &metrics;
    // Short waits between retries: the policy's bound is what is tested.
    options.lost_transactions.first_backoff = std::chrono::milliseconds(1);
    options.lost_transactions.max_backoff = std::chrono::milliseconds(4);
    options.make_sink = [this,
                         cluster](const SinkConfig& c) -> Result<std::unique_ptr<sinks::Sink>> {
      EXPECT_EQ(c.type, SinkType::kKafka);
      if (c.kafka.exactly_once) {
        auto s = std::make_unique<FakeTxnSink>(cluster, c.kafka.transactional_id, c.kafka.topic);
        sink = s.get();
        return std::unique_ptr<sinks::Sink>(std::move(s));
      }
      // The DLQ on the same brokers: inside the sink's transactions (MakeSink does this
      // for the real kafka sink).
      return sink->DeadLetterTopic(c.kafka.topic);
    };
    options.make_source = [this, group, partitions, script](
                              const SourceCounters& counters) -> Result<std::unique_ptr<Source>> {
      return std::unique_ptr<Source>(std::make_unique<FakeSource>(
          group, partitions, counters, script, [this] { runner->Stop(); }));
    };
    auto r = PipelineRunner::Create(std::move(config).value(), std::move(options));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) runner = std::move(r).value();
  }

  // sluice_pipeline_txn_aborts_total{cause}.
  uint64_t Aborts(const std::string& cause) {
    return metrics
        .GetCounter("sluice_pipeline_txn_aborts_total", "", {{"pipeline", "t"}, {"cause", cause}})
        .value();
  }
  uint64_t Rewinds() {
    return metrics.GetCounter("sluice_pipeline_source_rewinds_total", "", {{"pipeline", "t"}})
        .value();
  }
};

// How often each record of `topic` is visible to a read_committed consumer.
std::map<std::string, int> Visible(const FakeTxnCluster& cluster, std::string_view topic) {
  std::map<std::string, int> seen;
  for (const std::string& r : cluster.committed) {
    if (r.starts_with(std::string(topic) + ":")) ++seen[r.substr(topic.size() + 1)];
  }
  return seen;
}

// The dead letters' source offsets, with how often each is visible.
std::map<int64_t, int> DeadLetterOffsets(const FakeTxnCluster& cluster) {
  std::map<int64_t, int> seen;
  for (const auto& [row, n] : Visible(cluster, "dlq")) {
    size_t at = row.find("\"offset\":");
    EXPECT_NE(at, std::string::npos) << row;
    if (at != std::string::npos) seen[std::stoll(row.substr(at + 9))] += n;
  }
  return seen;
}

// Every id in `input` (partition -> values, ids from Input) visible exactly once in "out".
void ExpectEachOnce(const FakeTxnCluster& cluster,
                    const std::map<int32_t, std::vector<std::string>>& input) {
  std::map<std::string, int> out = Visible(cluster, "out");
  size_t expected = 0;
  for (const auto& [p, values] : input) {
    for (const std::string& v : values) {
      if (v.starts_with("bad")) continue;
      ++expected;
      const std::string id = v.substr(6, v.size() - 7);  // {"id":N}
      EXPECT_EQ(out[fmt::format(R"({{"id":{}.0}})", id)], 1) << "id " << id;
    }
  }
  EXPECT_EQ(out.size(), expected);
}

bool ConsumerCommitted(const FakeGroup& group) {
  return std::any_of(group.log.begin(), group.log.end(),
                     [](const std::string& l) { return l.starts_with("commit "); });
}

TEST(ExactlyOnceTest, RowsDeadLettersAndOffsetsCommitInOneTransactionPerBatch) {
  FakeGroup group;
  FakeTxnCluster cluster(&group);
  Member m(&group, &cluster, {{0, Input(0, 10, 4)}}, Pipeline(4, kDlq));
  ASSERT_TRUE(m.runner->Run().ok());
  // Ids 3 and 7 are not JSON: dead letters, in the same transactions as the rows.
  std::map<std::string, int> out = Visible(cluster, "out");
  EXPECT_EQ(out.size(), 8u);
  for (int id : {0, 1, 2, 4, 5, 6, 8, 9}) EXPECT_EQ(out[fmt::format(R"({{"id":{}.0}})", id)], 1);
  EXPECT_EQ(DeadLetterOffsets(cluster), (std::map<int64_t, int>{{3, 1}, {7, 1}}));
  EXPECT_EQ(group.committed.at({"in", 0}), 10);
  EXPECT_FALSE(ConsumerCommitted(group)) << fmt::format("{}", fmt::join(group.log, "\n"));
  EXPECT_THAT(cluster.log, ::testing::ElementsAre("init t epoch 1", "commit t 4 records",
                                                  "commit t 4 records", "commit t 2 records"));
  EXPECT_THAT(cluster.open, IsEmpty());
}

TEST(ExactlyOnceTest, ACrashAtAnyStepLeavesEveryResultVisibleExactlyOnceAfterTheRestart) {
  const std::vector<std::string> steps = {"write",     "flush",        "dlq-write",
                                          "dlq-flush", "offsets-sent", "committed"};
  for (const std::string& step : steps) {
    for (int nth = 1; nth <= 3; ++nth) {
      SCOPED_TRACE(fmt::format("crash at {} #{}", step, nth));
      FakeGroup group;
      FakeTxnCluster cluster(&group);
      cluster.crash_at = step;
      cluster.crash_count = nth;
      const std::map<int32_t, std::vector<std::string>> input = {{0, Input(0, 12, 3)},
                                                                 {1, Input(100, 107, 5)}};
      {
        Member crashed(&group, &cluster, input, Pipeline(5, kDlq));
        Status st = crashed.runner->Run();
        EXPECT_FALSE(st.ok()) << "the crash did not happen";
        EXPECT_THAT(st.message(), HasSubstr("crashed at " + step));
      }
      cluster.crash_at.clear();
      Member restarted(&group, &cluster, input, Pipeline(5, kDlq));
      ASSERT_TRUE(restarted.runner->Run().ok());

      std::map<std::string, int> out = Visible(cluster, "out");
      std::map<int64_t, int> dead = DeadLetterOffsets(cluster);
      for (const auto& [p, values] : input) {
        for (size_t i = 0; i < values.size(); ++i) {
          if (values[i].starts_with("bad")) {
            EXPECT_EQ(dead[static_cast<int64_t>(i)] > 0, true) << values[i];
          } else {
            int id = (p == 0 ? 0 : 100) + static_cast<int>(i);
            EXPECT_EQ(out[fmt::format(R"({{"id":{}.0}})", id)], 1) << "id " << id;
          }
        }
      }
      // Partition 0 has bad records at offsets 2, 5, 8, 11 and partition 1 at 4: each
      // dead letter once (the two partitions' offsets are counted together).
      EXPECT_EQ(dead, (std::map<int64_t, int>{{2, 1}, {4, 1}, {5, 1}, {8, 1}, {11, 1}}));
      EXPECT_EQ(out.size(), 12u - 4u + 7u - 1u);
      for (const auto& [row, n] : out) EXPECT_EQ(n, 1) << row;
      EXPECT_EQ(group.committed.at({"in", 0}), 12);
      EXPECT_EQ(group.committed.at({"in", 1}), 7);
      EXPECT_FALSE(ConsumerCommitted(group));
      EXPECT_THAT(cluster.open, IsEmpty()) << "a transaction left open";
    }
  }
}

TEST(ExactlyOnceTest, RevocationCommitsTheBatchInHandBeforeThePartitionsGo) {
  FakeGroup group;
  FakeTxnCluster cluster(&group);
  FakeSource::Script script;
  script.revoke_when_in_hand = 4;
  script.partition = 1;
  const std::map<int32_t, std::vector<std::string>> input = {{0, Input(0, 3)},
                                                             {1, Input(100, 110)}};
  {
    Member m(&group, &cluster, input, Pipeline(10, kRaise), script);
    ASSERT_TRUE(m.runner->Run().ok());
  }
  // The batch in hand (3 of partition 0, 7 of partition 1) committed in its transaction
  // before the revocation was acknowledged.
  EXPECT_THAT(group.log,
              ::testing::ElementsAre("assigned in[0]@0", "assigned in[1]@0", "txn commit in[0]@3",
                                     "txn commit in[1]@7", "ack revoke in[1]"));
  // The partition's next owner resumes at the transaction's offsets: nothing twice.
  Member next(&group, &cluster, input, Pipeline(10, kRaise));
  ASSERT_TRUE(next.runner->Run().ok());
  std::map<std::string, int> out = Visible(cluster, "out");
  EXPECT_EQ(out.size(), 13u);
  for (const auto& [row, n] : out) EXPECT_EQ(n, 1) << row;
  EXPECT_FALSE(ConsumerCommitted(group));
}

// Kafka Streams' TaskMigrated: an abortable commit error aborts the transaction, the source
// is rewound to the group's commit and the run goes on by itself.
TEST(ExactlyOnceTest, AnAbortedCommitIsReadAgainFromTheGroupsCommitAndTheRunGoesOn) {
  FakeGroup group;
  FakeTxnCluster cluster(&group);
  cluster.fail_commits = 1;
  const std::map<int32_t, std::vector<std::string>> input = {{0, Input(0, 6)}};
  Member m(&group, &cluster, input, Pipeline(3, kRaise));
  ASSERT_TRUE(m.runner->Run().ok());
  ExpectEachOnce(cluster, input);
  EXPECT_EQ(group.committed.at({"in", 0}), 6);
  EXPECT_EQ(m.Aborts("abortable"), 1u);
  EXPECT_EQ(m.Rewinds(), 1u);
  EXPECT_THAT(group.log, ::testing::Contains("rewind in[0]@0"));
  EXPECT_FALSE(ConsumerCommitted(group));
}

TEST(ExactlyOnceTest, AMemberThatMissedARebalanceAbortsRewindsRejoinsAndGoesOn) {
  FakeGroup group;
  FakeTxnCluster cluster(&group);
  cluster.rebalance_at_commit = 2;  // the second batch's commit: ILLEGAL_GENERATION
  const std::map<int32_t, std::vector<std::string>> input = {{0, Input(0, 7, 4)},
                                                             {1, Input(100, 105)}};
  Member m(&group, &cluster, input, Pipeline(3, kDlq));
  ASSERT_TRUE(m.runner->Run().ok());
  ExpectEachOnce(cluster, input);
  EXPECT_EQ(DeadLetterOffsets(cluster), (std::map<int64_t, int>{{3, 1}}));
  EXPECT_EQ(m.Aborts("rebalance"), 1u);
  EXPECT_EQ(m.Rewinds(), 1u);
  // Rewound to the first batch's commit, then the loss the member learnt of, the rejoin.
  EXPECT_THAT(group.log,
              ::testing::IsSupersetOf(
                  {"rewind in[0]@3", "lost all, rejoining generation 2", "assigned in[0]@3"}));
  EXPECT_EQ(group.committed.at({"in", 0}), 7);
  EXPECT_EQ(group.committed.at({"in", 1}), 5);
  EXPECT_THAT(cluster.open, IsEmpty());
}

TEST(ExactlyOnceTest, ATransactionTheBrokerTimedOutIsReadAgainWithANewProducer) {
  for (bool at_write : {false, true}) {
    SCOPED_TRACE(at_write ? "found at the write" : "found at the commit");
    FakeGroup group;
    FakeTxnCluster cluster(&group);
    (at_write ? cluster.time_out_at_write : cluster.time_out_at_commit) = 2;
    const std::map<int32_t, std::vector<std::string>> input = {{0, Input(0, 9, 4)}};
    Member m(&group, &cluster, input, Pipeline(3, kDlq));
    ASSERT_TRUE(m.runner->Run().ok());
    ExpectEachOnce(cluster, input);
    // The lost batch's records are not the records' fault: no dead letters for them.
    EXPECT_EQ(DeadLetterOffsets(cluster), (std::map<int64_t, int>{{3, 1}, {7, 1}}));
    EXPECT_EQ(m.Aborts("timeout"), 1u);
    EXPECT_EQ(m.Rewinds(), 1u);
    EXPECT_THAT(cluster.log, ::testing::Contains("init t epoch 3 (after a timeout)"));
    EXPECT_EQ(group.committed.at({"in", 0}), 9);
    EXPECT_THAT(cluster.open, IsEmpty());
  }
}

TEST(ExactlyOnceTest, AProducerFencedByAnotherLiveOneStopsThePipeline) {
  FakeGroup group;
  FakeTxnCluster cluster(&group);
  cluster.fence_at_commit = 2;
  Member m(&group, &cluster, {{0, Input(0, 9)}}, Pipeline(3, kDlq));
  Status st = m.runner->Run();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("fenced"));
  EXPECT_EQ(Visible(cluster, "out").size(), 3u);  // the first batch only
  EXPECT_THAT(Visible(cluster, "dlq"), IsEmpty());
  EXPECT_EQ(group.committed.at({"in", 0}), 3);
  EXPECT_EQ(m.Rewinds(), 0u);
}

TEST(ExactlyOnceTest, LostTransactionsInARowAreBoundedThenThePipelineStops) {
  FakeGroup group;
  FakeTxnCluster cluster(&group);
  cluster.fail_commits = 100;  // every commit
  Member m(&group, &cluster, {{0, Input(0, 6)}}, Pipeline(3, kRaise));
  Status st = m.runner->Run();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("7 transactions in a row were aborted"));
  EXPECT_EQ(m.Aborts("abortable"), 7u);
  EXPECT_EQ(m.Rewinds(), 6u);
  EXPECT_THAT(cluster.committed, IsEmpty());
  EXPECT_TRUE(group.committed.empty());
}

TEST(LostTransactionsTest, TheFirstRetryIsAtOnceThenTheWaitDoublesUpToItsBound) {
  LostTransactionPolicy policy;
  policy.first_backoff = std::chrono::milliseconds(500);
  policy.max_backoff = std::chrono::milliseconds(3000);
  std::vector<int64_t> waits;
  for (int n = 1; n <= 6; ++n) waits.push_back(LostTransactions::Backoff(n, policy).count());
  EXPECT_THAT(waits, ::testing::ElementsAre(0, 500, 1000, 2000, 3000, 3000));
}

TEST(ExactlyOnceTest, AFailedWriteAbortsItsRowsAndTheBatchIsDeadLetteredOnce) {
  FakeGroup group;
  FakeTxnCluster cluster(&group);
  cluster.fail_writes = 1;  // the first batch's write fails after one row
  Member m(&group, &cluster, {{0, Input(0, 6)}}, Pipeline(3, kDlq));
  ASSERT_TRUE(m.runner->Run().ok());
  // The first batch: its messages in the DLQ, none of its rows (nor the row the failed
  // write produced) visible; the second batch's rows.
  std::map<std::string, int> out = Visible(cluster, "out");
  EXPECT_EQ(out, (std::map<std::string, int>{
                     {R"({"id":3.0})", 1}, {R"({"id":4.0})", 1}, {R"({"id":5.0})", 1}}));
  EXPECT_EQ(DeadLetterOffsets(cluster), (std::map<int64_t, int>{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_EQ(group.committed.at({"in", 0}), 6);
  EXPECT_FALSE(ConsumerCommitted(group));
}

// The strategy alone, as commit_strategy_test drives the others.
class ExactlyOnceStrategyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open(duck::DatabaseOptions{});
    ASSERT_TRUE(db.ok());
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok());
    conn_ = std::move(conn).value();
    ASSERT_TRUE(conn_->Execute("CREATE TABLE rows AS SELECT 1 AS id UNION ALL SELECT 2").ok());
  }
  static CommitCounters Counters() {
    MetricsRegistry& m = MetricsRegistry::Global();
    MetricLabels labels = {{"pipeline", "exactly_once_test"}};
    return {&m.GetCounter("eos_test_commits_total", "", labels),
            &m.GetCounter("eos_test_commit_errors_total", "", labels),
            new std::atomic<uint64_t>(0),  // lives as long as the test binary
            &m.GetHistogram("eos_test_sink_commit_seconds", "", labels),
            &m.GetGauge("eos_test_sink_commit_max", "", labels)};
  }
  static SourceCounters NoSourceCounters() {
    MetricsRegistry& m = MetricsRegistry::Global();
    MetricLabels labels = {{"pipeline", "exactly_once_test"}};
    return {&m.GetCounter("eos_test_in_total", "", labels),
            &m.GetCounter("eos_test_bytes_total", "", labels),
            new std::atomic<uint64_t>(0),
            &m.GetCounter("eos_test_source_errors_total", "", labels),
            &m.GetCounter("eos_test_full_total", "", labels),
            &m.GetGauge("eos_test_ahead", "", labels)};
  }
  // A strategy over `sink` and a started FakeSource on partition 0 of `group_`.
  std::unique_ptr<CommitStrategy> Strategy(FakeTxnSink* sink) {
    auto s = CommitStrategy::SinkCommit("t", Counters(), sink, nullptr, {});
    source_ = std::make_unique<FakeSource>(
        &group_, std::map<int32_t, std::vector<std::string>>{{0, {}}}, NoSourceCounters());
    s->set_source(source_.get());
    EXPECT_TRUE(source_->Start(&listener_, false).ok());
    return s;
  }
  struct NoListener final : SourceListener {
    void Assigning(std::vector<kafka::client::TopicPartition>&) override {}
    void Heard(std::string_view, int32_t, SteadyTime) override {}
  } listener_;
  void Write(FakeTxnSink& sink, int64_t next) {
    std::vector<sinks::RejectedRow> rejected;
    ASSERT_TRUE(sink.Write(*conn_, "rows", {{{"in", 0}, next}}, &rejected).ok());
    ASSERT_TRUE(sink.Flush().ok());
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  FakeGroup group_;
  FakeTxnCluster cluster_{&group_};
  std::unique_ptr<FakeSource> source_;
};

TEST_F(ExactlyOnceStrategyTest, TheKindIsTheSinksCommitAndNothingGoesToTheGroupFromTheConsumer) {
  FakeTxnSink sink(&cluster_, "t");
  auto strategy = Strategy(&sink);
  EXPECT_EQ(strategy->kind(), CommitStrategy::Kind::kSinkCommit);
  ASSERT_NO_FATAL_FAILURE(Write(sink, 2));
  ASSERT_TRUE(strategy->CommitBatch({{{"in", 0}, 2}}, true, CommitMode::kAsync).ok());
  EXPECT_EQ(group_.committed.at({"in", 0}), 2);
  EXPECT_FALSE(ConsumerCommitted(group_));
  EXPECT_EQ(strategy->stored().at({"in", 0}), 2);
}

TEST_F(ExactlyOnceStrategyTest, LostPartitionsAbortTheOpenTransaction) {
  FakeTxnSink sink(&cluster_, "t");
  auto strategy = Strategy(&sink);
  ASSERT_NO_FATAL_FAILURE(Write(sink, 2));
  ASSERT_EQ(cluster_.open.count("t"), 1u);
  ASSERT_TRUE(strategy->Lost({{"in", 0, -1}}).ok());
  EXPECT_THAT(cluster_.open, IsEmpty());
  EXPECT_THAT(cluster_.committed, IsEmpty());
  EXPECT_TRUE(group_.committed.empty());
  // Nothing left to commit afterwards either.
  ASSERT_TRUE(strategy->Flush(CommitMode::kSync).ok());
  EXPECT_THAT(cluster_.committed, IsEmpty());
}

TEST_F(ExactlyOnceStrategyTest, RevokedAbortsWhatIsStillOpen) {
  FakeTxnSink sink(&cluster_, "t");
  auto strategy = Strategy(&sink);
  ASSERT_NO_FATAL_FAILURE(Write(sink, 2));
  strategy->Revoked({{"in", 0, -1}});
  EXPECT_THAT(cluster_.open, IsEmpty());
  EXPECT_THAT(cluster_.committed, IsEmpty());
}

TEST_F(ExactlyOnceStrategyTest, AFencedMemberCommitsNothingAndStops) {
  FakeTxnSink zombie(&cluster_, "t");
  auto strategy = Strategy(&zombie);
  ASSERT_NO_FATAL_FAILURE(Write(zombie, 2));
  ASSERT_TRUE(strategy->CommitBatch({{{"in", 0}, 2}}, true, CommitMode::kAsync).ok());
  std::vector<sinks::RejectedRow> rejected;
  ASSERT_TRUE(zombie.Write(*conn_, "rows", {{{"in", 0}, 4}}, &rejected).ok());
  // A new member with the same transactional.id: its init aborts the zombie's open
  // transaction and fences it.
  FakeTxnSink successor(&cluster_, "t");
  Status st = strategy->CommitBatch({{{"in", 0}, 4}}, true, CommitMode::kAsync);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("fenced"));
  EXPECT_EQ(cluster_.committed.size(), 2u);  // the first batch's two rows only
  EXPECT_EQ(group_.committed.at({"in", 0}), 2);
}

TEST_F(ExactlyOnceStrategyTest, AMemberWhoseGenerationIsGoneCannotCommitOffsets) {
  FakeTxnSink sink(&cluster_, "t");
  auto strategy = Strategy(&sink);
  ASSERT_NO_FATAL_FAILURE(Write(sink, 2));
  ++group_.generation;  // a rebalance this member missed (KIP-447)
  Status st = strategy->CommitBatch({{{"in", 0}, 2}}, true, CommitMode::kAsync);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("ILLEGAL_GENERATION"));
  EXPECT_THAT(cluster_.committed, IsEmpty());
  EXPECT_THAT(cluster_.open, IsEmpty());
  EXPECT_TRUE(group_.committed.empty());
}

// The lag metric's last stable offsets come from librdkafka's statistics (a trimmed copy of
// what 2.0.2 writes for a read_committed consumer).
TEST(StableOffsetsFromStatsTest, ReadsEachPartitionsLastStableOffset) {
  constexpr std::string_view kStats = R"({"name":"rdkafka#consumer-1","type":"consumer",
    "topics":{"in":{"topic":"in","age":1000,"partitions":{
      "0":{"partition":0,"hi_offset":120,"ls_offset":100,"lo_offset":0,"consumer_lag":40},
      "1":{"partition":1,"hi_offset":7,"ls_offset":7,"lo_offset":0},
      "-1":{"partition":-1,"hi_offset":-1001,"ls_offset":-1001}}},
     "other":{"topic":"other","partitions":{"3":{"partition":3,"ls_offset":-1001}}}}})";
  auto stable = StableOffsetsFromStats(kStats);
  ASSERT_TRUE(stable.ok()) << stable.status().ToString();
  EXPECT_EQ(*stable,
            (std::map<std::pair<std::string, int32_t>, int64_t>{{{"in", 0}, 100}, {{"in", 1}, 7}}));
  kafka::client::PartitionLag lag{"in", 0, 90, 120};
  lag.last_stable_offset = 100;
  EXPECT_EQ(lag.lag(), 30);
  EXPECT_EQ(lag.unstable(), 20);  // an open transaction's records: not readable yet
}

TEST(StableOffsetsFromStatsTest, MalformedStatisticsAreAnErrorOrNothing) {
  EXPECT_EQ(StableOffsetsFromStats("").status().code(), StatusCode::kCorruption);
  EXPECT_EQ(StableOffsetsFromStats("{\"topics\":").status().code(), StatusCode::kCorruption);
  for (std::string_view text :
       {"{}", "[]", R"({"topics":[]})", R"({"topics":{"t":{"partitions":[]}}})",
        R"({"topics":{"t":{"partitions":{"0":{"partition":"0","ls_offset":5}}}}})",
        R"({"topics":{"t":{"partitions":{"0":{"partition":99999999999,"ls_offset":5}}}}})",
        R"({"topics":{"t":{"partitions":{"0":{"partition":0,"ls_offset":-5}}}}})"}) {
    auto r = StableOffsetsFromStats(text);
    ASSERT_TRUE(r.ok()) << text;
    EXPECT_TRUE(r->empty()) << text;
  }
}

}  // namespace
}  // namespace sluice::pipeline
