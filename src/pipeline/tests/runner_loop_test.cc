// PipelineRunner::Run without a broker: a FakeSource and FakeSinks (fakes.h) in place of
// the Kafka source and the configured sinks. What the group sees (commits, in order,
// against what the sink holds) is the behaviour under test: offsets never ahead of the
// sink, a revocation finishes and commits the batch in hand before the partitions go, a
// lost assignment commits nothing of it, on_error decides whether a refused batch is
// committed past, and /healthz recovers once a failed window close succeeds.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pipeline/runner.h"
#include "pipeline/tests/fakes.h"

namespace sluice::pipeline {
namespace {

using ::testing::ElementsAre;
using testing::FakeGroup;
using testing::FakeSink;
using testing::FakeSinkState;
using testing::FakeSource;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr std::string_view kNoopSink = "  sink:\n    type: noop";

// A pipeline file over topic "in"; `output` is its sink (or window) section.
std::string Pipeline(int batch_size, std::string_view on_error, std::string_view handler_sql,
                     std::string_view output = kNoopSink) {
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
    sql: {}
{}
  on_error:
{}
)",
                     batch_size, handler_sql, output, on_error);
}

constexpr std::string_view kRaise = "    policy: RAISE";
constexpr std::string_view kIgnore = "    policy: IGNORE";
constexpr std::string_view kDlq = "    policy: DLQ\n    dlq:\n      type: console";
constexpr std::string_view kSelectId = "SELECT id FROM batch ORDER BY kafka_offset";

std::vector<std::string> Ids(int from, int to) {
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back(fmt::format(R"({{"id":{}}})", i));
  return out;
}

// One pipeline over fakes: `sink` is the pipeline's (or the window's) sink, `dlq` the
// dead-letter sink (a console sink in the file).
struct Harness {
  FakeGroup group;
  FakeSinkState sink;
  FakeSinkState dlq;
  std::map<int32_t, std::vector<std::string>> partitions;
  FakeSource::Script script;
  std::unique_ptr<PipelineRunner> runner;

  void Make(const std::string& yaml) {
    auto config = ParsePipeline(yaml, "t.yml", MapEnv({}));
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    RunnerOptions options;
    options.make_sink = [this](const SinkConfig& c) -> Result<std::unique_ptr<sinks::Sink>> {
      return std::unique_ptr<sinks::Sink>(
          std::make_unique<FakeSink>(c.type == SinkType::kConsole ? &dlq : &sink));
    };
    options.make_source =
        [this](const SourceCounters& counters) -> Result<std::unique_ptr<Source>> {
      // Stops the runner once everything was delivered.
      return std::unique_ptr<Source>(std::make_unique<FakeSource>(
          &group, partitions, counters, script, [this] { runner->Stop(); }));
    };
    auto r = PipelineRunner::Create(std::move(config).value(), std::move(options));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner = std::move(r).value();
  }
};

TEST(RunnerLoopTest, CommitsFollowTheSinkFlushBatchByBatch) {
  Harness h;
  h.partitions[0] = Ids(0, 5);
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(2, kRaise, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  EXPECT_THAT(h.sink.durable, ElementsAre(R"({"id":0.0})", R"({"id":1.0})", R"({"id":2.0})",
                                          R"({"id":3.0})", R"({"id":4.0})"));
  EXPECT_THAT(h.sink.log, ElementsAre("write 2", "flush", "write 2", "flush", "write 1", "flush"));
  // Asynchronous while running, each after its batch's flush.
  EXPECT_THAT(h.group.log, ElementsAre("assigned in[0]@0", "commit async in[0]@2",
                                       "commit async in[0]@4", "commit async in[0]@5"));
  EXPECT_EQ(h.group.committed.at({"in", 0}), 5);
}

TEST(RunnerLoopTest, RestartResumesAtTheGroupsCommit) {
  Harness h;
  h.partitions[0] = Ids(0, 5);
  h.group.committed[{"in", 0}] = 3;  // what a member before this one committed
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(10, kRaise, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  EXPECT_THAT(h.sink.durable, ElementsAre(R"({"id":3.0})", R"({"id":4.0})"));
  EXPECT_EQ(h.group.committed.at({"in", 0}), 5);
}

TEST(RunnerLoopTest, RevocationFinishesAndCommitsTheBatchInHandBeforeThePartitionsGo) {
  Harness h;
  h.partitions[0] = Ids(0, 3);
  h.partitions[1] = Ids(100, 110);
  h.script.revoke_when_in_hand = 4;  // comes with a batch in hand, before it is processed
  h.script.partition = 1;
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(10, kRaise, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  // The batch in hand (partition 0's three records, seven of partition 1) went to the
  // sink, flushed, and was committed synchronously before the revocation was
  // acknowledged; partition 1 was not read past it.
  EXPECT_THAT(h.sink.log, ElementsAre("write 10", "flush"));
  EXPECT_THAT(h.group.log,
              ElementsAre("assigned in[0]@0", "assigned in[1]@0", "commit sync in[0]@3",
                          "commit sync in[1]@7", "ack revoke in[1]"));
}

TEST(RunnerLoopTest, LostAssignmentDropsTheBatchInHandUncommitted) {
  Harness h;
  h.partitions[0] = Ids(0, 3);
  h.script.lose_when_in_hand = 2;
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(10, kRaise, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  EXPECT_THAT(h.sink.durable, IsEmpty());
  EXPECT_THAT(h.group.log, ElementsAre("assigned in[0]@0", "lost in[0]"));
  EXPECT_TRUE(h.group.committed.empty());
}

TEST(RunnerLoopTest, SinkThatFailsUnderRaiseStopsAndCommitsNothingOfTheBatch) {
  Harness h;
  h.partitions[0] = Ids(0, 4);
  h.sink.fail_writes = 1;
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(10, kRaise, kSelectId)));
  Status st = h.runner->Run();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("sink failed"));
  EXPECT_THAT(h.group.log, ElementsAre("assigned in[0]@0"));
  EXPECT_THAT(h.runner->Health(), HasSubstr("sink fake"));
}

TEST(RunnerLoopTest, SinkThatFailsUnderIgnoreIsCommittedPast) {
  Harness h;
  h.partitions[0] = Ids(0, 4);
  h.sink.fail_flushes = 1;
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(2, kIgnore, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  // The first batch was lost to the failed flush and skipped; both batches are committed.
  EXPECT_THAT(h.sink.durable, ElementsAre(R"({"id":2.0})", R"({"id":3.0})"));
  EXPECT_EQ(h.group.committed.at({"in", 0}), 4);
  EXPECT_EQ(h.runner->stats().errors.load(), 2u);
  EXPECT_EQ(h.runner->Health(), "");  // the later flush succeeded
}

TEST(RunnerLoopTest, RowsTheSinkRefusesGoToTheDlqAndAreCommittedPast) {
  Harness h;
  h.partitions[0] = Ids(0, 4);
  h.sink.refuse = "2.0";
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(10, kDlq, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  EXPECT_THAT(h.sink.durable, ElementsAre(R"({"id":0.0})", R"({"id":1.0})", R"({"id":3.0})"));
  ASSERT_EQ(h.dlq.durable.size(), 1u);
  EXPECT_THAT(h.dlq.durable[0], HasSubstr(R"("phase":"sink")"));
  EXPECT_THAT(h.dlq.durable[0], HasSubstr("fake sink: refused"));
  EXPECT_EQ(h.group.committed.at({"in", 0}), 4);
}

// The defect console_api_test met: a batch whose every message failed to decode ran the
// handler over a table with only the kafka_ columns, and its messages were dead-lettered a
// second time as the handler's (Binder Error) failure.
TEST(RunnerLoopTest, BatchOfOnlyUndecodableMessagesIsNotRunThroughTheHandler) {
  Harness h;
  // Batches of two: the second has no message that decodes.
  h.partitions[0] = {R"({"id":0})", R"({"id":1})", "not json {", "also not json"};
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(2, kDlq, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  EXPECT_THAT(h.sink.durable, ElementsAre(R"({"id":0.0})", R"({"id":1.0})"));
  ASSERT_EQ(h.dlq.durable.size(), 2u);
  for (const std::string& letter : h.dlq.durable) {
    EXPECT_THAT(letter, HasSubstr(R"("phase":"decode")"));
    EXPECT_THAT(letter, Not(HasSubstr("Binder Error")));
  }
  EXPECT_EQ(h.group.committed.at({"in", 0}), 4);
  EXPECT_EQ(h.runner->stats().errors.load(), 2u);
}

// A batch whose handler fails dead-letters the messages that decoded; those that did not
// have their decode letter already and get no second one.
TEST(RunnerLoopTest, HandlerFailureDeadLettersOnlyTheMessagesThatDecoded) {
  Harness h;
  h.partitions[0] = {R"({"other":1})", "not json {"};
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(2, kDlq, "SELECT id FROM batch")));
  ASSERT_TRUE(h.runner->Run().ok());
  EXPECT_THAT(h.sink.durable, IsEmpty());
  ASSERT_EQ(h.dlq.durable.size(), 2u);
  EXPECT_THAT(h.dlq.durable[0], HasSubstr(R"("phase":"decode")"));
  EXPECT_THAT(h.dlq.durable[0], HasSubstr("offset 1"));
  EXPECT_THAT(h.dlq.durable[1], HasSubstr(R"("phase":"handler")"));
  EXPECT_THAT(h.dlq.durable[1], HasSubstr(R"("offset":0)"));
  EXPECT_EQ(h.group.committed.at({"in", 0}), 2);
  EXPECT_EQ(h.runner->stats().errors.load(), 2u);
}

TEST(RunnerLoopTest, DeferringSinkCommitsTheGroupOnlyAfterItsOwnCommit) {
  Harness h;
  h.partitions[0] = Ids(0, 4);
  h.sink.defers = true;
  h.sink.held[{"in", 0}] = 1;  // the table holds offsets 0 already: resume after it
  ASSERT_NO_FATAL_FAILURE(h.Make(Pipeline(2, kRaise, kSelectId)));
  ASSERT_TRUE(h.runner->Run().ok());
  // Nothing committed to the group while the sink only staged; at stop the sink commits
  // (forced) and the group follows with what it made durable.
  EXPECT_THAT(h.group.log, ElementsAre("assigned in[0]@1", "commit sync in[0]@4"));
  EXPECT_THAT(h.sink.durable, ElementsAre(R"({"id":1.0})", R"({"id":2.0})", R"({"id":3.0})"));
  EXPECT_THAT(h.sink.log, ElementsAre("write 2", "flush", "write 1", "flush", "commit in[0]@4"));
}

// The defect /healthz had: after one failed window close a windowed pipeline stayed
// unhealthy for good. It is healthy again once a close succeeds.
TEST(RunnerLoopTest, WindowedPipelineIsHealthyAgainAfterAFailedCloseSucceedsLater) {
  Harness h;
  // Two minutes of events: the second closes the first minute's window.
  h.partitions[0] = {R"({"ts":"2024-01-01T00:00:10Z","n":1})",
                     R"({"ts":"2024-01-01T00:02:10Z","n":2})"};
  h.sink.fail_flushes = 1;  // the window sink's first flush fails
  auto config =
      ParsePipeline(Pipeline(1, kIgnore, "SELECT ts::TIMESTAMPTZ AS ts, n FROM batch", R"(  window:
    type: tumbling
    time_column: ts
    size: 1m
    emit_sql: SELECT window_start, sum(n) AS n FROM closed GROUP BY ALL
    sink:
      type: noop)"),
                    "t.yml", MapEnv({}));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  RunnerOptions options;
  options.make_sink = [&h](const SinkConfig&) -> Result<std::unique_ptr<sinks::Sink>> {
    return std::unique_ptr<sinks::Sink>(std::make_unique<FakeSink>(&h.sink));
  };
  // Once everything is read: notes the health, and stops once the retried close (a second
  // after the failed one) emitted the window.
  std::string unhealthy;
  auto idle = [&] {
    std::string health = h.runner->Health();
    if (!health.empty()) unhealthy = health;
    if (!h.sink.durable.empty()) h.runner->Stop();
  };
  options.make_source = [&](const SourceCounters& counters) -> Result<std::unique_ptr<Source>> {
    return std::unique_ptr<Source>(
        std::make_unique<FakeSource>(&h.group, h.partitions, counters, FakeSource::Script{}, idle));
  };
  auto r = PipelineRunner::Create(std::move(config).value(), std::move(options));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  h.runner = std::move(r).value();
  ASSERT_TRUE(h.runner->Run().ok());
  EXPECT_THAT(unhealthy, HasSubstr("closing windows"));
  EXPECT_THAT(h.sink.log, ElementsAre("write 1", "flush failed", "write 1", "flush"));
  ASSERT_EQ(h.sink.durable.size(), 1u);
  EXPECT_THAT(h.sink.durable[0], HasSubstr(R"("n":1)"));
  EXPECT_EQ(h.runner->Health(), "");
}

}  // namespace
}  // namespace sluice::pipeline
