// Transactions through librdkafka's C API (the library under Kafka's C/C++, Python, Go
// and .NET clients) against a `sluice serve` child process: commit and abort as a
// read_committed and a read_uncommitted consumer see them, a read_committed consumer
// held at an open transaction, fencing by a second producer with the same
// transactional.id, and consume-transform-produce with the consumed offsets committed
// in the transaction (KIP-447). One broker serves the whole binary; each test uses its
// own topics, groups and transactional ids.
//
// usage: rdkafka_txn_test [gtest flags] path/to/sluice
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rdkafka_util.h"

namespace sluice::integration {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kBrokerConfig = "groups:\n  initial_rebalance_delay: 0\n";

struct ErrorDeleter {
  void operator()(rd_kafka_error_t* e) const { rd_kafka_error_destroy(e); }
};
using ErrorPtr = std::unique_ptr<rd_kafka_error_t, ErrorDeleter>;

// "OK", or the error's name, string and class (fatal, abortable, retriable).
std::string Describe(const ErrorPtr& e) {
  if (!e) return "OK";
  std::string s = std::string(rd_kafka_error_name(e.get())) + ": " + rd_kafka_error_string(e.get());
  if (rd_kafka_error_is_fatal(e.get())) s += " (fatal)";
  if (rd_kafka_error_txn_requires_abort(e.get())) s += " (abortable)";
  if (rd_kafka_error_is_retriable(e.get())) s += " (retriable)";
  return s;
}

KafkaPtr NewTxnProducer(const std::string& transactional_id, const Props& extra = {}) {
  Props props = {{"transactional.id", transactional_id}, {"linger.ms", "1"}};
  props.insert(props.end(), extra.begin(), extra.end());
  return NewClient(RD_KAFKA_PRODUCER, props);
}

// Produces `value` to topic/partition; the delivery report is served by the next
// flush or commit.
void Produce(rd_kafka_t* producer, const std::string& topic, int32_t partition,
             const std::string& value) {
  rd_kafka_resp_err_t err = rd_kafka_producev(
      producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()), RD_KAFKA_V_END);
  ASSERT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR)
      << "produce to " << topic << ": " << rd_kafka_err2str(err);
}

void ProduceValues(rd_kafka_t* producer, const std::string& topic, int32_t partitions,
                   const std::string& prefix, int count) {
  for (int i = 0; i < count; ++i) {
    Produce(producer, topic, i % partitions, prefix + std::to_string(i));
  }
}

// The values of `topic`'s partitions read from the beginning under `isolation`, in
// partition then offset order, until `want` values came or `wait` passed with none.
std::map<int32_t, std::vector<std::string>> ReadValues(const std::string& topic, int32_t partitions,
                                                       const std::string& isolation, size_t want,
                                                       std::chrono::milliseconds wait = 10s) {
  std::map<int32_t, std::vector<std::string>> out;
  KafkaPtr consumer = NewClient(RD_KAFKA_CONSUMER, {{"group.id", "reader-" + topic + isolation},
                                                    {"enable.auto.commit", "false"},
                                                    {"isolation.level", isolation}});
  if (!consumer) return out;
  std::vector<std::pair<int32_t, int64_t>> starts;
  for (int32_t p = 0; p < partitions; ++p) starts.emplace_back(p, RD_KAFKA_OFFSET_BEGINNING);
  ListPtr list = NewList(topic, starts);
  EXPECT_EQ(rd_kafka_assign(consumer.get(), list.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
  size_t got = 0;
  auto quiet_since = Clock::now();
  while (got < want || Clock::now() - quiet_since < 500ms) {
    if (Clock::now() - quiet_since > wait) break;
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer.get(), 100);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      out[m->partition].emplace_back(static_cast<const char*>(m->payload), m->len);
      ++got;
      quiet_since = Clock::now();
    } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      ADD_FAILURE() << "consuming " << topic << ": " << rd_kafka_message_errstr(m);
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(consumer.get());
  return out;
}

std::vector<std::string> Values(const std::string& prefix, int from, int to) {
  std::vector<std::string> v;
  for (int i = from; i < to; ++i) v.push_back(prefix + std::to_string(i));
  return v;
}

// All values of `m` in partition order.
std::vector<std::string> Flatten(const std::map<int32_t, std::vector<std::string>>& m) {
  std::vector<std::string> v;
  for (const auto& [p, values] : m) v.insert(v.end(), values.begin(), values.end());
  return v;
}

class TxnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    admin_ = NewClient(RD_KAFKA_PRODUCER, {});
    ASSERT_TRUE(admin_);
  }
  std::string NewTopic(const std::string& name, int partitions) {
    std::string topic = name + "-" + std::to_string(Clock::now().time_since_epoch().count());
    EXPECT_EQ(CreateTopic(admin_.get(), topic, partitions), RD_KAFKA_RESP_ERR_NO_ERROR) << topic;
    return topic;
  }
  KafkaPtr admin_;
};

TEST_F(TxnTest, CommittedRecordsAreVisibleToReadCommittedAndAbortedOnesAreNot) {
  std::string topic = NewTopic("txn-commit-abort", 2);
  KafkaPtr p = NewTxnProducer("commit-abort-" + topic);
  ASSERT_TRUE(p);
  ErrorPtr e(rd_kafka_init_transactions(p.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);

  e.reset(rd_kafka_begin_transaction(p.get()));
  ASSERT_FALSE(e) << Describe(e);
  ProduceValues(p.get(), topic, 2, "committed-", 10);
  e.reset(rd_kafka_commit_transaction(p.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);

  e.reset(rd_kafka_begin_transaction(p.get()));
  ASSERT_FALSE(e) << Describe(e);
  ProduceValues(p.get(), topic, 2, "aborted-", 6);
  ASSERT_EQ(rd_kafka_flush(p.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
  e.reset(rd_kafka_abort_transaction(p.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);

  e.reset(rd_kafka_begin_transaction(p.get()));
  ASSERT_FALSE(e) << Describe(e);
  ProduceValues(p.get(), topic, 2, "later-", 4);
  e.reset(rd_kafka_commit_transaction(p.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);

  // read_committed: the two committed transactions, in order, each partition; none of
  // the aborted records.
  auto committed = ReadValues(topic, 2, "read_committed", 14);
  std::map<int32_t, std::vector<std::string>> want;
  for (int i = 0; i < 10; ++i) want[i % 2].push_back("committed-" + std::to_string(i));
  for (int i = 0; i < 4; ++i) want[i % 2].push_back("later-" + std::to_string(i));
  EXPECT_EQ(committed, want);

  // read_uncommitted: everything written, the aborted records in the middle.
  auto uncommitted = ReadValues(topic, 2, "read_uncommitted", 20);
  std::map<int32_t, std::vector<std::string>> all;
  for (int i = 0; i < 10; ++i) all[i % 2].push_back("committed-" + std::to_string(i));
  for (int i = 0; i < 6; ++i) all[i % 2].push_back("aborted-" + std::to_string(i));
  for (int i = 0; i < 4; ++i) all[i % 2].push_back("later-" + std::to_string(i));
  EXPECT_EQ(uncommitted, all);

  // Each commit or abort left a marker in each partition: the end offsets count them.
  auto [low, high] = Watermarks(admin_.get(), topic, 0);
  EXPECT_EQ(low, 0);
  EXPECT_EQ(high, 5 + 3 + 2 + 3);
}

TEST_F(TxnTest, ReadCommittedWaitsBehindAnOpenTransactionUntilItCommits) {
  std::string topic = NewTopic("txn-open", 1);
  KafkaPtr txn = NewTxnProducer("open-" + topic);
  ASSERT_TRUE(txn);
  ErrorPtr e(rd_kafka_init_transactions(txn.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);
  e.reset(rd_kafka_begin_transaction(txn.get()));
  ASSERT_FALSE(e) << Describe(e);
  ProduceValues(txn.get(), topic, 1, "open-", 3);
  ASSERT_EQ(rd_kafka_flush(txn.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  // A plain producer writes after the open transaction's first record.
  KafkaPtr plain = NewClient(RD_KAFKA_PRODUCER, {{"linger.ms", "1"}});
  ASSERT_TRUE(plain);
  ProduceValues(plain.get(), topic, 1, "plain-", 2);
  ASSERT_EQ(rd_kafka_flush(plain.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  // read_committed stops at the open transaction's first offset: nothing yet.
  EXPECT_TRUE(Flatten(ReadValues(topic, 1, "read_committed", 1, 2s)).empty());
  // read_uncommitted sees all five.
  EXPECT_EQ(Flatten(ReadValues(topic, 1, "read_uncommitted", 5)).size(), 5u);

  e.reset(rd_kafka_commit_transaction(txn.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);
  std::vector<std::string> want = Values("open-", 0, 3);
  for (const std::string& v : Values("plain-", 0, 2)) want.push_back(v);
  EXPECT_EQ(Flatten(ReadValues(topic, 1, "read_committed", 5)), want);
}

TEST_F(TxnTest, ASecondProducerWithTheSameIdFencesTheFirstAndAbortsItsTransaction) {
  std::string topic = NewTopic("txn-fence", 1);
  const std::string id = "fence-" + topic;
  KafkaPtr first = NewTxnProducer(id);
  ASSERT_TRUE(first);
  ErrorPtr e(rd_kafka_init_transactions(first.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);
  e.reset(rd_kafka_begin_transaction(first.get()));
  ASSERT_FALSE(e) << Describe(e);
  ProduceValues(first.get(), topic, 1, "zombie-", 3);
  ASSERT_EQ(rd_kafka_flush(first.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  // The second producer's InitProducerId aborts the first one's transaction and bumps
  // the epoch.
  KafkaPtr second = NewTxnProducer(id);
  ASSERT_TRUE(second);
  e.reset(rd_kafka_init_transactions(second.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);
  e.reset(rd_kafka_begin_transaction(second.get()));
  ASSERT_FALSE(e) << Describe(e);
  ProduceValues(second.get(), topic, 1, "second-", 2);
  e.reset(rd_kafka_commit_transaction(second.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);

  // The zombie cannot commit: fenced, a fatal error.
  ProduceValues(first.get(), topic, 1, "zombie-late-", 1);
  e.reset(rd_kafka_commit_transaction(first.get(), kTimeoutMs));
  ASSERT_TRUE(e) << "the fenced producer committed";
  EXPECT_TRUE(rd_kafka_error_is_fatal(e.get())) << Describe(e);

  EXPECT_EQ(Flatten(ReadValues(topic, 1, "read_committed", 2)), Values("second-", 0, 2));
}

// Reads `count` records of `input` in group `group` (read_committed, no auto commit),
// and for each produces "out-<value>" to `output` inside one transaction that also
// commits the consumed offsets; commits or aborts it.
void ConsumeTransformProduce(rd_kafka_t* producer, const std::string& input,
                             const std::string& output, const std::string& group, size_t count,
                             bool commit) {
  KafkaPtr consumer = NewClient(RD_KAFKA_CONSUMER, {{"group.id", group},
                                                    {"enable.auto.commit", "false"},
                                                    {"auto.offset.reset", "earliest"},
                                                    {"isolation.level", "read_committed"}});
  ASSERT_TRUE(consumer);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, input.c_str(), RD_KAFKA_PARTITION_UA);
  ASSERT_EQ(rd_kafka_subscribe(consumer.get(), topics), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(topics);

  ErrorPtr e(rd_kafka_begin_transaction(producer));
  ASSERT_FALSE(e) << Describe(e);
  size_t got = 0;
  auto deadline = Clock::now() + 30s;
  while (got < count && Clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer.get(), 100);
    if (m == nullptr) continue;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      Produce(producer, output, 0,
              "out-" + std::string(static_cast<const char*>(m->payload), m->len));
      ++got;
    }
    rd_kafka_message_destroy(m);
  }
  ASSERT_EQ(got, count) << "records consumed from " << input;
  // Delivered before the end, so that an abort has records to abort (abort_transaction
  // purges what is still queued in the client).
  ASSERT_EQ(rd_kafka_flush(producer, kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  rd_kafka_topic_partition_list_t* positions = nullptr;
  ASSERT_EQ(rd_kafka_assignment(consumer.get(), &positions), RD_KAFKA_RESP_ERR_NO_ERROR);
  ASSERT_EQ(rd_kafka_position(consumer.get(), positions), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_consumer_group_metadata_t* meta = rd_kafka_consumer_group_metadata(consumer.get());
  e.reset(rd_kafka_send_offsets_to_transaction(producer, positions, meta, kTimeoutMs));
  rd_kafka_consumer_group_metadata_destroy(meta);
  rd_kafka_topic_partition_list_destroy(positions);
  ASSERT_FALSE(e) << Describe(e);
  e.reset(commit ? rd_kafka_commit_transaction(producer, kTimeoutMs)
                 : rd_kafka_abort_transaction(producer, kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);
  rd_kafka_consumer_close(consumer.get());
}

// The offsets `group` committed for `topic`'s partitions (-1001: none).
std::vector<int64_t> Committed(const std::string& topic, int32_t partitions,
                               const std::string& group) {
  KafkaPtr consumer = NewClient(RD_KAFKA_CONSUMER, {{"group.id", group}});
  std::vector<int64_t> out;
  if (!consumer) return out;
  std::vector<std::pair<int32_t, int64_t>> parts;
  for (int32_t p = 0; p < partitions; ++p) parts.emplace_back(p, RD_KAFKA_OFFSET_INVALID);
  ListPtr list = NewList(topic, parts);
  EXPECT_EQ(rd_kafka_committed(consumer.get(), list.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
  for (int i = 0; i < list->cnt; ++i) out.push_back(list->elems[i].offset);
  rd_kafka_consumer_close(consumer.get());
  return out;
}

TEST_F(TxnTest, ConsumeTransformProduceCommitsTheOffsetsWithTheOutputOrNeither) {
  std::string input = NewTopic("txn-ctp-in", 2);
  std::string output = NewTopic("txn-ctp-out", 1);
  const std::string group = "ctp-" + input;
  KafkaPtr plain = NewClient(RD_KAFKA_PRODUCER, {{"linger.ms", "1"}});
  ASSERT_TRUE(plain);
  ProduceValues(plain.get(), input, 2, "in-", 20);
  ASSERT_EQ(rd_kafka_flush(plain.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);

  KafkaPtr p = NewTxnProducer("ctp-" + input);
  ASSERT_TRUE(p);
  ErrorPtr e(rd_kafka_init_transactions(p.get(), kTimeoutMs));
  ASSERT_FALSE(e) << Describe(e);

  // Aborted: neither the output nor the offsets.
  ConsumeTransformProduce(p.get(), input, output, group, 20, /*commit=*/false);
  EXPECT_EQ(Committed(input, 2, group),
            (std::vector<int64_t>{RD_KAFKA_OFFSET_INVALID, RD_KAFKA_OFFSET_INVALID}));
  EXPECT_TRUE(Flatten(ReadValues(output, 1, "read_committed", 1, 2s)).empty());

  // Committed: both. The group starts again from nothing committed, so it reads all 20.
  ConsumeTransformProduce(p.get(), input, output, group, 20, /*commit=*/true);
  EXPECT_EQ(Committed(input, 2, group), (std::vector<int64_t>{10, 10}));
  EXPECT_EQ(Flatten(ReadValues(output, 1, "read_committed", 20)).size(), 20u);
  EXPECT_EQ(Flatten(ReadValues(output, 1, "read_uncommitted", 40)).size(), 40u);
}

}  // namespace
}  // namespace sluice::integration

int main(int argc, char** argv) {
  return sluice::integration::RunWithBroker(argc, argv, sluice::integration::kBrokerConfig);
}
