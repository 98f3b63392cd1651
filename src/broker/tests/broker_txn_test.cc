// Transactions on the partition side, against a real Broker over sockets: transactional
// produce with KIP-890 verification, markers (WriteTxnMarkers), the last stable offset,
// Fetch and ListOffsets under both isolation levels, the aborted-transaction list, the
// errors Kafka answers, and all of it again after a restart; and librdkafka consumers
// (read_committed and read_uncommitted) reading the result. The transaction coordinator
// is not here: a TxnVerifier double answers as the test tells it.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "broker/broker.h"
#include "broker/handlers/context.h"
#include "broker/tests/broker_test_util.h"
#include "broker/txn_partition_markers.h"
#include "kafka/client/consumer.h"
#include "kafka/protocol/records.h"

namespace sluice::broker {
namespace broker_txn_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Bytes;
using testing::Client;

// Answers every verification with `answer`, after running `before` (a test's way to let
// the coordinator act between the question and the answer). Records the questions.
class TestVerifier : public TxnVerifier {
 public:
  void Verify(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
              std::vector<TopicPartition> partitions,
              std::function<void(std::vector<ErrorCode>)> done) override {
    std::function<void()> before;
    ErrorCode answer;
    {
      std::lock_guard lock(mu_);
      asked_.push_back({transactional_id, producer_id, producer_epoch, partitions});
      before = before_;
      answer = answer_;
    }
    // Off the shard's thread, as a coordinator answers.
    std::thread([before, answer, n = partitions.size(), done = std::move(done)] {
      if (before) before();
      done(std::vector<ErrorCode>(n, answer));
    }).detach();
  }

  struct Question {
    std::string transactional_id;
    int64_t producer_id;
    int16_t producer_epoch;
    std::vector<TopicPartition> partitions;
  };
  std::vector<Question> asked() {
    std::lock_guard lock(mu_);
    return asked_;
  }
  void Answer(ErrorCode e, std::function<void()> before = nullptr) {
    std::lock_guard lock(mu_);
    answer_ = e;
    before_ = std::move(before);
  }

 private:
  std::mutex mu_;
  std::vector<Question> asked_;
  ErrorCode answer_ = ErrorCode::kNone;
  std::function<void()> before_;
};

const int64_t kBaseTs = Clock::Real()->NowMillis();

class BrokerTxnTest : public testing::BrokerFixture {
 protected:
  void SetUp() override {
    BrokerFixture::SetUp();
    broker_->context_for_testing().txn_verifier = &verifier_;
  }
  void Restart() {
    Stop();
    Start();
    broker_->context_for_testing().txn_verifier = &verifier_;
  }

  // `n` records "<prefix>-<i>"; transactional when `txn`.
  static Bytes Batch(const std::string& prefix, int n, int64_t pid, int16_t epoch, int32_t seq,
                     bool txn = true) {
    kafka::BatchBuilderOptions o;
    o.producer_id = pid;
    o.producer_epoch = epoch;
    o.base_sequence = seq;
    o.transactional = txn;
    // Now: a marker (stamped now) after records from long ago would roll the segment.
    return testing::ValueBatch(prefix, n, kBaseTs, o);
  }

  kafka::ProduceResponse::PartitionProduceResponse Produce(Client& c, const Bytes& batch,
                                                           std::optional<std::string> txn_id = "tx",
                                                           int16_t version = 9,
                                                           const std::string& topic = "t") {
    kafka::ProduceRequest req;
    req.transactional_id = std::move(txn_id);
    req.acks = -1;
    req.timeout_ms = 5000;
    req.topic_data.push_back({topic, {{0, std::span<const uint8_t>(batch), {}}}, {}});
    auto resp = c.Call<kafka::ProduceResponse>(ApiKey::kProduce, version, req);
    if (resp.responses.size() != 1 || resp.responses[0].partition_responses.size() != 1) {
      ADD_FAILURE() << "bad produce response shape";
      return {};
    }
    return resp.responses[0].partition_responses[0];
  }

  static kafka::FetchRequest FetchRequest(int64_t offset, bool committed, int32_t max_wait_ms = 0) {
    kafka::FetchRequest req;
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = 1;
    req.max_bytes = 1 << 20;
    req.isolation_level = committed ? 1 : 0;
    kafka::FetchRequest::FetchTopic t;
    t.topic = "t";
    kafka::FetchRequest::FetchPartition p;
    p.partition = 0;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    t.partitions.push_back(p);
    req.topics.push_back(t);
    return req;
  }

  kafka::FetchResponse::PartitionData Fetch(Client& c, int64_t offset, bool committed) {
    last_fetch_ = c.Call<kafka::FetchResponse>(ApiKey::kFetch, 11, FetchRequest(offset, committed));
    if (last_fetch_.responses.size() != 1 || last_fetch_.responses[0].partitions.size() != 1) {
      ADD_FAILURE() << "bad fetch response shape";
      return {};
    }
    return last_fetch_.responses[0].partitions[0];
  }

  kafka::ListOffsetsResponse::Partition Latest(Client& c, bool committed, int64_t ts = -1) {
    kafka::ListOffsetsRequest req;
    req.replica_id = -1;
    req.isolation_level = committed ? 1 : 0;
    kafka::ListOffsetsRequest::Partition p;
    p.partition_index = 0;
    p.timestamp = ts;
    req.topics.push_back({"t", {p}, {}});
    auto resp = c.Call<kafka::ListOffsetsResponse>(ApiKey::kListOffsets, 7, req);
    if (resp.topics.size() != 1 || resp.topics[0].partitions.size() != 1) {
      ADD_FAILURE() << "bad list offsets response shape";
      return {};
    }
    return resp.topics[0].partitions[0];
  }

  // Writes a marker as the coordinator would, and waits for its answers.
  std::vector<ErrorCode> Mark(int64_t pid, int16_t epoch, bool commit,
                              std::vector<TopicPartition> tps = {{"t", 0}},
                              int32_t coordinator_epoch = 0) {
    std::promise<std::vector<ErrorCode>> done;
    WriteTxnMarkers(broker_->context_for_testing().shards,
                    TxnMarker{pid, epoch, commit, coordinator_epoch}, std::move(tps),
                    [&](std::vector<ErrorCode> e) { done.set_value(std::move(e)); });
    return done.get_future().get();
  }

  // The record values of a fetch's batches (data only), and how many control batches.
  static std::vector<std::string> Values(const kafka::FetchResponse::PartitionData& p,
                                         int* markers = nullptr) {
    std::vector<std::string> out;
    if (markers != nullptr) *markers = 0;
    if (!p.records.inline_bytes) return out;
    std::span<const uint8_t> rest = *p.records.inline_bytes;
    while (rest.size() >= storage::kBatchHeaderSize) {
      storage::BatchHeader h = storage::ParseBatchHeader(rest);
      std::span<const uint8_t> batch = rest.first(h.total_size());
      rest = rest.subspan(h.total_size());
      if ((h.attributes & storage::kAttrControl) != 0) {
        if (markers != nullptr) ++*markers;
        continue;
      }
      EXPECT_TRUE(kafka::ForEachRecord(batch, 1 << 20, [&](const kafka::Record& r) {
                    out.emplace_back(r.value->begin(), r.value->end());
                  }).ok());
    }
    return out;
  }

  TestVerifier verifier_;
  kafka::FetchResponse last_fetch_;
};

using Strings = std::vector<std::string>;

TEST_F(BrokerTxnTest, TransactionalBatchesAreVerifiedOnceThenHeldBackFromReadCommitted) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("plain", 2, -1, -1, -1, false), std::nullopt).error_code,
            ErrorCode::kNone);
  auto r1 = Produce(c, Batch("a", 3, 100, 0, 0));
  ASSERT_EQ(r1.error_code, ErrorCode::kNone) << r1.error_message.value_or("");
  EXPECT_EQ(r1.base_offset, 2);
  ASSERT_EQ(verifier_.asked().size(), 1u);
  EXPECT_EQ(verifier_.asked()[0].transactional_id, "tx");
  EXPECT_EQ(verifier_.asked()[0].producer_id, 100);
  EXPECT_EQ(verifier_.asked()[0].partitions, (std::vector<TopicPartition>{{"t", 0}}));
  // The transaction is open here now: the next batch is not asked about.
  ASSERT_EQ(Produce(c, Batch("b", 2, 100, 0, 3)).error_code, ErrorCode::kNone);
  EXPECT_EQ(verifier_.asked().size(), 1u);

  auto committed = Fetch(c, 0, true);
  EXPECT_EQ(committed.error_code, ErrorCode::kNone);
  EXPECT_EQ(committed.high_watermark, 7);
  EXPECT_EQ(committed.last_stable_offset, 2);
  EXPECT_EQ(Values(committed), (Strings{"plain-0", "plain-1"}));
  ASSERT_TRUE(committed.aborted_transactions.has_value());
  EXPECT_TRUE(committed.aborted_transactions->empty());
  auto at_lso = Fetch(c, 2, true);
  EXPECT_EQ(at_lso.error_code, ErrorCode::kNone);
  EXPECT_TRUE(Values(at_lso).empty());
  auto uncommitted = Fetch(c, 0, false);
  EXPECT_EQ(uncommitted.last_stable_offset, 2);
  EXPECT_EQ(Values(uncommitted).size(), 7u);
  EXPECT_EQ(Latest(c, true).offset, 2);
  EXPECT_EQ(Latest(c, false).offset, 7);
  // A lookup by time landing inside the open transaction finds nothing yet under
  // read_committed.
  EXPECT_EQ(Latest(c, true, kBaseTs).offset, 0);
  EXPECT_EQ(Latest(c, true, kBaseTs + 1).offset, 1);
  EXPECT_EQ(Latest(c, true, kBaseTs + 2).offset, -1);
  EXPECT_EQ(Latest(c, false, kBaseTs + 2).offset, 4);

  EXPECT_EQ(Mark(100, 0, /*commit=*/true), (std::vector<ErrorCode>{ErrorCode::kNone}));
  auto after = Fetch(c, 0, true);
  EXPECT_EQ(after.high_watermark, 8);
  EXPECT_EQ(after.last_stable_offset, 8);
  int markers = 0;
  EXPECT_EQ(Values(after, &markers),
            (Strings{"plain-0", "plain-1", "a-0", "a-1", "a-2", "b-0", "b-1"}));
  EXPECT_EQ(markers, 1);
  EXPECT_TRUE(after.aborted_transactions->empty());
  EXPECT_EQ(Latest(c, true).offset, 8);
}

TEST_F(BrokerTxnTest, AbortedTransactionsAreListedForReadCommitted) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("x", 2, 200, 0, 0)).error_code, ErrorCode::kNone);           // 0-1
  ASSERT_EQ(Produce(c, Batch("y", 2, 300, 0, 0), "ty").error_code, ErrorCode::kNone);     // 2-3
  ASSERT_EQ(Produce(c, Batch("x", 1, 200, 0, 2)).error_code, ErrorCode::kNone);           // 4
  EXPECT_EQ(Mark(200, 0, /*commit=*/false), (std::vector<ErrorCode>{ErrorCode::kNone}));  // 5
  // Producer 300 is still open from offset 2: the LSO stays there.
  EXPECT_EQ(Fetch(c, 0, true).last_stable_offset, 2);
  EXPECT_EQ(Mark(300, 0, /*commit=*/true), (std::vector<ErrorCode>{ErrorCode::kNone}));  // 6
  auto f = Fetch(c, 0, true);
  EXPECT_EQ(f.last_stable_offset, 7);
  ASSERT_TRUE(f.aborted_transactions.has_value());
  ASSERT_EQ(f.aborted_transactions->size(), 1u);
  EXPECT_EQ((*f.aborted_transactions)[0].producer_id, 200);
  EXPECT_EQ((*f.aborted_transactions)[0].first_offset, 0);
  int markers = 0;
  // The records are all there; the consumer drops the aborted ones by the list.
  EXPECT_EQ(Values(f, &markers).size(), 5u);
  EXPECT_EQ(markers, 2);
  // A fetch from past the aborted transaction does not list it.
  EXPECT_TRUE(Fetch(c, 6, true).aborted_transactions->empty());
  // read_uncommitted: no list.
  EXPECT_TRUE(Fetch(c, 0, false).aborted_transactions->empty());

  // The same after a restart: the index and the producer state come back from disk.
  Restart();
  Client c2(port());
  auto again = Fetch(c2, 0, true);
  EXPECT_EQ(again.last_stable_offset, 7);
  ASSERT_EQ(again.aborted_transactions->size(), 1u);
  EXPECT_EQ((*again.aborted_transactions)[0].producer_id, 200);
  // Writing the abort again (a coordinator replaying its log) changes nothing visible.
  EXPECT_EQ(Mark(200, 0, /*commit=*/false), (std::vector<ErrorCode>{ErrorCode::kNone}));
  auto replayed = Fetch(c2, 0, true);
  EXPECT_EQ(replayed.aborted_transactions->size(), 1u);
  EXPECT_EQ(replayed.last_stable_offset, 8);
}

// A lost .txnindex comes back from the markers when the partition opens.
TEST_F(BrokerTxnTest, ALostAbortedIndexIsRebuiltAtOpen) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("x", 2, 210, 0, 0)).error_code, ErrorCode::kNone);         // 0-1
  ASSERT_EQ(Produce(c, Batch("y", 1, 310, 0, 0), "ty").error_code, ErrorCode::kNone);   // 2
  EXPECT_EQ(Mark(210, 0, /*commit=*/false), std::vector<ErrorCode>{ErrorCode::kNone});  // 3
  EXPECT_EQ(Mark(310, 0, /*commit=*/false), std::vector<ErrorCode>{ErrorCode::kNone});  // 4
  Stop();
  int removed = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "t-0")) {
    if (e.path().extension() == ".txnindex") removed += std::filesystem::remove(e.path());
  }
  ASSERT_GT(removed, 0);
  Start();
  broker_->context_for_testing().txn_verifier = &verifier_;
  Client c2(port());
  auto f = Fetch(c2, 0, true);
  EXPECT_EQ(f.last_stable_offset, 5);
  ASSERT_EQ(f.aborted_transactions->size(), 2u);
  EXPECT_EQ((*f.aborted_transactions)[0].producer_id, 210);
  EXPECT_EQ((*f.aborted_transactions)[0].first_offset, 0);
  EXPECT_EQ((*f.aborted_transactions)[1].producer_id, 310);
  EXPECT_EQ((*f.aborted_transactions)[1].first_offset, 2);
}

TEST_F(BrokerTxnTest, AnOpenTransactionSurvivesARestart) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("p", 1, -1, -1, -1, false), std::nullopt).error_code,
            ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("o", 2, 400, 3, 0)).error_code, ErrorCode::kNone);
  Restart();
  Client c2(port());
  EXPECT_EQ(Fetch(c2, 0, true).last_stable_offset, 1);
  EXPECT_EQ(Latest(c2, true).offset, 1);
  // Still open: continues without asking the coordinator.
  ASSERT_EQ(Produce(c2, Batch("o2", 1, 400, 3, 2)).error_code, ErrorCode::kNone);
  EXPECT_EQ(verifier_.asked().size(), 1u);
  EXPECT_EQ(Mark(400, 3, /*commit=*/false), (std::vector<ErrorCode>{ErrorCode::kNone}));
  auto f = Fetch(c2, 0, true);
  EXPECT_EQ(f.last_stable_offset, 5);
  ASSERT_EQ(f.aborted_transactions->size(), 1u);
  EXPECT_EQ((*f.aborted_transactions)[0].first_offset, 1);
}

TEST_F(BrokerTxnTest, ProduceErrorsLeaveTheConnectionAndPartitionWorking) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  auto works = [&] {
    auto r = Produce(c, Batch("ok", 1, -1, -1, -1, false), std::nullopt);
    EXPECT_EQ(r.error_code, ErrorCode::kNone);
  };
  // No transactional id: the whole request is refused, as Kafka does.
  auto no_id = Produce(c, Batch("n", 1, 500, 0, 0), std::nullopt);
  EXPECT_EQ(no_id.error_code, ErrorCode::kTransactionalIdAuthorizationFailed);
  works();
  // A transactional batch without a producer id.
  EXPECT_EQ(Produce(c, Batch("n", 1, -1, -1, -1)).error_code, ErrorCode::kInvalidRecord);
  works();
  // A control batch from a client.
  auto control = Produce(c, kafka::BuildTxnMarkerBatch(500, 0, true, 0, 1000), std::string("tx"));
  EXPECT_EQ(control.error_code, ErrorCode::kInvalidRecord);
  works();
  // The coordinator says the partition is not in the transaction.
  verifier_.Answer(ErrorCode::kInvalidTxnState);
  auto not_added = Produce(c, Batch("n", 1, 500, 0, 0));
  EXPECT_EQ(not_added.error_code, ErrorCode::kInvalidTxnState);
  EXPECT_EQ(not_added.error_message.value_or(""), "Partition was not added to the transaction");
  // Fenced by the coordinator: the produce answer is INVALID_PRODUCER_EPOCH.
  verifier_.Answer(ErrorCode::kProducerFenced);
  EXPECT_EQ(Produce(c, Batch("n", 1, 500, 0, 0)).error_code, ErrorCode::kInvalidProducerEpoch);
  // A coordinator that cannot answer now: retriable NOT_ENOUGH_REPLICAS.
  verifier_.Answer(ErrorCode::kCoordinatorNotAvailable);
  EXPECT_EQ(Produce(c, Batch("n", 1, 500, 0, 0)).error_code, ErrorCode::kNotEnoughReplicas);
  works();
  verifier_.Answer(ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("t", 2, 500, 0, 0)).error_code, ErrorCode::kNone);
  // A plain batch of the producer while its transaction is open.
  EXPECT_EQ(Produce(c, Batch("plain", 1, 500, 0, 2, false), std::nullopt).error_code,
            ErrorCode::kInvalidTxnState);
  // The coordinator aborts with a bumped epoch (a timeout, KIP-360): the old epoch is fenced.
  EXPECT_EQ(Mark(500, 1, false), (std::vector<ErrorCode>{ErrorCode::kNone}));
  EXPECT_EQ(Produce(c, Batch("z", 1, 500, 0, 2)).error_code, ErrorCode::kInvalidProducerEpoch);
  // The new epoch starts a new transaction (asked again).
  size_t asked = verifier_.asked().size();
  EXPECT_EQ(Produce(c, Batch("new", 1, 500, 1, 0)).error_code, ErrorCode::kNone);
  EXPECT_EQ(verifier_.asked().size(), asked + 1);
  works();
  auto f = Fetch(c, 0, false);
  EXPECT_EQ(f.error_code, ErrorCode::kNone);
}

TEST_F(BrokerTxnTest, NoCoordinatorMeansNoTransactionalBatches) {
  broker_->context_for_testing().txn_verifier = nullptr;
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  auto r = Produce(c, Batch("n", 1, 600, 0, 0));
  EXPECT_EQ(r.error_code, ErrorCode::kNotEnoughReplicas);
  EXPECT_NE(r.error_message.value_or("").find("no transaction coordinator"), std::string::npos);
  EXPECT_EQ(Produce(c, Batch("ok", 1, -1, -1, -1, false), std::nullopt).error_code,
            ErrorCode::kNone);
}

// KIP-890's point: the coordinator ends the transaction (a marker) while the verification
// is answered; the batch must not open a transaction the coordinator does not know.
TEST_F(BrokerTxnTest, AMarkerBetweenVerificationAndAppendRefusesTheBatch) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  verifier_.Answer(ErrorCode::kNone, [this] { Mark(700, 0, /*commit=*/false); });
  auto r = Produce(c, Batch("late", 1, 700, 0, 0));
  EXPECT_EQ(r.error_code, ErrorCode::kInvalidTxnState);
  verifier_.Answer(ErrorCode::kNone);
  // Nothing is open: read_committed sees the whole log (the marker only).
  auto f = Fetch(c, 0, true);
  EXPECT_EQ(f.last_stable_offset, f.high_watermark);
  EXPECT_TRUE(f.aborted_transactions->empty());
}

TEST_F(BrokerTxnTest, MarkerErrors) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("a", 1, 800, 2, 0)).error_code, ErrorCode::kNone);
  EXPECT_EQ(Mark(800, 2, true, {{"t", 0}, {"missing", 0}, {"t", 5}}, 3),
            (std::vector<ErrorCode>{ErrorCode::kNone, ErrorCode::kUnknownTopicOrPartition,
                                    ErrorCode::kUnknownTopicOrPartition}));
  EXPECT_EQ(Mark(800, 1, true), (std::vector<ErrorCode>{ErrorCode::kInvalidProducerEpoch}));
  EXPECT_EQ(Mark(800, 2, true, {{"t", 0}}, 2),
            (std::vector<ErrorCode>{ErrorCode::kTransactionCoordinatorFenced}));
  EXPECT_EQ(Mark(800, 2, true, {}, 0), std::vector<ErrorCode>{});
  // The coordinator epoch survives a restart (read back from the marker).
  Restart();
  EXPECT_EQ(Mark(800, 2, true, {{"t", 0}}, 2),
            (std::vector<ErrorCode>{ErrorCode::kTransactionCoordinatorFenced}));
}

// A read_committed fetch waiting at the LSO is answered when the marker moves it.
TEST_F(BrokerTxnTest, WaitingReadCommittedFetchWakesWhenTheLsoMoves) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("w", 2, 900, 0, 0)).error_code, ErrorCode::kNone);
  Client consumer(port());
  // A max wait far beyond the client's read timeout: only the wake-up can answer.
  ASSERT_TRUE(consumer.SendRequest(ApiKey::kFetch, 11, 77, FetchRequest(0, true, 600'000)));
  // Let the fetch register (it answers nothing: no data below the LSO).
  for (int i = 0; i < 200 && broker_->waiting_fetch_count() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(broker_->waiting_fetch_count(), 1u);
  EXPECT_EQ(Mark(900, 0, /*commit=*/true), (std::vector<ErrorCode>{ErrorCode::kNone}));
  auto frame = consumer.ReadFrame();
  ASSERT_TRUE(frame.has_value());
  kafka::Reader r(*frame);
  auto id = kafka::DecodeResponseHeader(r, ApiKey::kFetch, 11);
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(*id, 77);
  kafka::FetchResponse resp;
  ASSERT_TRUE(resp.Decode(r, 11).ok());
  ASSERT_EQ(resp.responses.size(), 1u);
  const auto& p = resp.responses[0].partitions[0];
  EXPECT_EQ(p.last_stable_offset, 3);
  EXPECT_EQ(Values(p), (Strings{"w-0", "w-1"}));
}

TEST_F(BrokerTxnTest, DescribeProducersShowsOpenTransactions) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, Batch("i", 3, 1000, 1, 0, false), std::nullopt).error_code,
            ErrorCode::kNone);                                                    // 0-2
  ASSERT_EQ(Produce(c, Batch("t", 2, 2000, 4, 0)).error_code, ErrorCode::kNone);  // 3-4
  auto describe = [&] {
    kafka::DescribeProducersRequest req;
    req.topics.push_back({"t", {0, 7}, {}});
    req.topics.push_back({"missing", {0}, {}});
    return c.Call<kafka::DescribeProducersResponse>(ApiKey::kDescribeProducers, 0, req);
  };
  auto resp = describe();
  ASSERT_EQ(resp.topics.size(), 2u);
  ASSERT_EQ(resp.topics[0].partitions.size(), 2u);
  const auto& p0 = resp.topics[0].partitions[0];
  EXPECT_EQ(p0.error_code, ErrorCode::kNone);
  std::map<int64_t, kafka::DescribeProducersResponse::Producer> by_id;
  for (const auto& p : p0.active_producers) by_id[p.producer_id] = p;
  ASSERT_EQ(by_id.size(), 2u);
  EXPECT_EQ(by_id[1000].producer_epoch, 1);
  EXPECT_EQ(by_id[1000].last_sequence, 2);
  EXPECT_EQ(by_id[1000].current_txn_start_offset, -1);
  EXPECT_EQ(by_id[1000].last_timestamp, kBaseTs + 2);
  EXPECT_EQ(by_id[2000].producer_epoch, 4);
  EXPECT_EQ(by_id[2000].last_sequence, 1);
  EXPECT_EQ(by_id[2000].current_txn_start_offset, 3);
  EXPECT_EQ(resp.topics[0].partitions[1].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(resp.topics[1].partitions[0].error_code, ErrorCode::kUnknownTopicOrPartition);
  ASSERT_EQ(Mark(2000, 4, /*commit=*/true, {{"t", 0}}, 6),
            std::vector<ErrorCode>{ErrorCode::kNone});
  for (const auto& p : describe().topics[0].partitions[0].active_producers) {
    if (p.producer_id != 2000) continue;
    EXPECT_EQ(p.current_txn_start_offset, -1);
    EXPECT_EQ(p.coordinator_epoch, 6);
  }
}

// librdkafka's consumer is the judge of the aborted-transaction list and the LSO: under
// read_committed it must show exactly the plain and committed records, in order, and
// nothing past an open transaction until it is decided.
TEST_F(BrokerTxnTest, LibrdkafkaConsumersSeeWhatKafkaWouldShowThem) {
  Client c(port());
  ASSERT_EQ(Create(c, "t", 1).topics[0].error_code, ErrorCode::kNone);
  auto plain = [&](const std::string& v) {
    ASSERT_EQ(Produce(c, Batch(v, 1, -1, -1, -1, false), std::nullopt).error_code,
              ErrorCode::kNone);
  };
  plain("p0");                                                                          // 0
  ASSERT_EQ(Produce(c, Batch("a", 2, 100, 0, 0)).error_code, ErrorCode::kNone);         // 1-2
  ASSERT_EQ(Produce(c, Batch("b", 1, 200, 0, 0)).error_code, ErrorCode::kNone);         // 3
  ASSERT_EQ(Produce(c, Batch("a2", 1, 100, 0, 2)).error_code, ErrorCode::kNone);        // 4
  ASSERT_EQ(Mark(100, 0, /*commit=*/false), std::vector<ErrorCode>{ErrorCode::kNone});  // 5
  ASSERT_EQ(Mark(200, 0, /*commit=*/true), std::vector<ErrorCode>{ErrorCode::kNone});   // 6
  plain("p1");                                                                          // 7
  ASSERT_EQ(Produce(c, Batch("c", 1, 300, 0, 0)).error_code, ErrorCode::kNone);         // 8, open
  plain("p2");                                                                          // 9

  // Polls until `want` records came, or `polls` polls of 100 ms went by.
  auto consume = [&](kafka::client::Consumer& consumer, size_t want, int polls = 100) {
    Strings got;
    for (int i = 0; i < polls && got.size() < want; ++i) {
      auto batch = consumer.Poll(std::chrono::milliseconds(100));
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) break;
      for (size_t k = 0; k < batch->size(); ++k) got.emplace_back((*batch)[k].value);
    }
    return got;
  };
  auto make = [&](const std::string& isolation) {
    kafka::client::Config config = {
        {"bootstrap.servers", "127.0.0.1:" + std::to_string(port())},
        {"isolation.level", isolation},
    };
    auto consumer = kafka::client::Consumer::Create(config);
    EXPECT_TRUE(consumer.ok()) << consumer.status().ToString();
    EXPECT_TRUE((*consumer)->Assign({{"t", 0, kafka::client::kOffsetBeginning}}).ok());
    return std::move(*consumer);
  };

  auto uncommitted = make("read_uncommitted");
  EXPECT_EQ(consume(*uncommitted, 8),
            (Strings{"p0-0", "a-0", "a-1", "b-0", "a2-0", "p1-0", "c-0", "p2-0"}));

  auto committed = make("read_committed");
  EXPECT_EQ(consume(*committed, 3), (Strings{"p0-0", "b-0", "p1-0"}));
  // Producer 300's transaction holds the rest back...
  EXPECT_TRUE(consume(*committed, 1, /*polls=*/10).empty());
  // ... until it commits.
  ASSERT_EQ(Mark(300, 0, /*commit=*/true), std::vector<ErrorCode>{ErrorCode::kNone});
  EXPECT_EQ(consume(*committed, 2), (Strings{"c-0", "p2-0"}));
}

}  // namespace
}  // namespace broker_txn_test
}  // namespace sluice::broker
