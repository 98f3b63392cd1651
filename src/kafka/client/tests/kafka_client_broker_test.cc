// kafka/client against a running `sluice serve` (label integration): topics created and
// listed, records produced with keys to chosen partitions and read back with Assign
// (offsets, keys, values, timestamps, partition ends), and a consumer group: Subscribe,
// Commit, and a second member that resumes from the committed offsets.
//
// The broker binary comes from SLUICE_BINARY (ctest sets it); without it the tests skip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "kafka/client/admin.h"
#include "kafka/client/consumer.h"
#include "kafka/client/producer.h"

namespace sluice::kafka::client {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// `sluice serve` on 127.0.0.1 and a free port, in a temporary directory; stopped with
// SIGTERM (and checked to exit with 0) by Stop.
class Broker {
 public:
  // Empty address() when it could not start (the reason is in error()).
  explicit Broker(const std::string& binary) {
    char pattern[] = "/tmp/kafka-client-test-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = pattern;
    std::ofstream(dir_ + "/sluice.yaml") << "groups:\n  initial_rebalance_delay: 0s\n";
    std::string out = dir_ + "/out";
    std::vector<std::string> args = {binary,
                                     "serve",
                                     "--config",
                                     dir_ + "/sluice.yaml",
                                     "--kafka-addr",
                                     "127.0.0.1:0",
                                     "--http-addr",
                                     "127.0.0.1:0",
                                     "--pg-addr",
                                     "127.0.0.1:0",
                                     "--schema-registry-addr",
                                     "off",
                                     "--data-dir",
                                     dir_ + "/data"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!std::freopen(out.c_str(), "w", stdout) || !std::freopen(out.c_str(), "a", stderr)) {
        ::_exit(126);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    const std::string line = "sluice: serving Kafka on ";
    for (int i = 0; i < 3000 && address_.empty(); ++i) {
      std::ifstream in(out);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      size_t at = text.find(line);
      if (at != std::string::npos) {
        size_t end = text.find(' ', at + line.size());
        if (end != std::string::npos)
          address_ = text.substr(at + line.size(), end - at - line.size());
      }
      int status;
      if (address_.empty() && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        error_ = "sluice serve exited: " + text;
        return;
      }
      if (address_.empty()) std::this_thread::sleep_for(10ms);
    }
    if (address_.empty()) error_ = "sluice serve did not start listening";
  }

  ~Broker() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // The exit status after SIGTERM.
  int Stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  const std::string& address() const { return address_; }
  const std::string& error() const { return error_; }

 private:
  pid_t pid_ = -1;
  std::string dir_, address_, error_;
};

class KafkaClientBrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* binary = std::getenv("SLUICE_BINARY");
    if (binary == nullptr) GTEST_SKIP() << "SLUICE_BINARY is not set (ctest sets it)";
    SetLogLevel(LogLevel::kWarn);
    broker_ = std::make_unique<Broker>(binary);
    ASSERT_FALSE(broker_->address().empty()) << broker_->error();
  }
  void TearDown() override {
    if (broker_ != nullptr && !broker_->address().empty()) EXPECT_EQ(broker_->Stop(), 0);
    SetLogLevel(LogLevel::kInfo);
  }

  Config Base() const { return {{"bootstrap.servers", broker_->address()}}; }

  // Polls until `want` records arrived (or 30 s passed); returns them as
  // "partition:offset:key:value".
  static std::vector<std::string> Read(Consumer* consumer, size_t want) {
    std::vector<std::string> got;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
      Result<MessageBatch> batch = consumer->Poll(100ms);
      EXPECT_TRUE(batch.ok()) << batch.status().ToString();
      if (!batch.ok()) break;
      for (const Status& e : batch->errors()) ADD_FAILURE() << e.ToString();
      for (size_t i = 0; i < batch->size(); ++i) {
        Message m = (*batch)[i];
        got.push_back(fmt::format("{}:{}:{}:{}", m.partition, m.offset, m.key, m.value));
      }
    }
    return got;
  }

  std::unique_ptr<Broker> broker_;
};

TEST_F(KafkaClientBrokerTest, AdminCreatesListsAndDeletesTopics) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("events", 3, 1, {}, 10s).ok());
  Status again = (*admin)->CreateTopic("events", 3, 1, {}, 10s);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();
  Result<int> n = (*admin)->PartitionCount("events", 10s);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 3);
  Result<Watermarks> w = (*admin)->QueryWatermarks("events", 2, 10s);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->low, 0);
  EXPECT_EQ(w->high, 0);
  ASSERT_TRUE((*admin)->DeleteTopic("events", 10s).ok());
  EXPECT_EQ((*admin)->PartitionCount("events", 10s).status().code(), StatusCode::kNotFound);
}

TEST_F(KafkaClientBrokerTest, ProducedRecordsAreReadBackByAssign) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("events", 3, 1, {}, 10s).ok());

  std::map<uint64_t, DeliveryReport> reports;  // by cookie
  auto producer = Producer::Create(Base(), [&](const DeliveryReport& r) {
    DeliveryReport copy = r;
    copy.topic = {};  // a view that lives only during the callback
    reports[r.cookie] = copy;
  });
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  const int64_t before_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE((*producer)
                    ->Produce("events", i % 3, fmt::format("k{}", i), fmt::format("v{}", i),
                              static_cast<uint64_t>(i + 1))
                    .ok());
  }
  ASSERT_TRUE((*producer)->Flush(10s).ok());
  ASSERT_EQ(reports.size(), 30u);
  for (int i = 0; i < 30; ++i) {
    const DeliveryReport& r = reports[static_cast<uint64_t>(i + 1)];
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_EQ(r.partition, i % 3);
    EXPECT_EQ(r.offset, i / 3);
  }
  EXPECT_EQ((*producer)->counters().delivered, 30u);
  for (int p = 0; p < 3; ++p) {
    Result<Watermarks> w = (*admin)->QueryWatermarks("events", p, 10s);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_EQ(w->high, 10);
  }

  Config config = Base();
  config["enable.partition.eof"] = "true";
  auto consumer = Consumer::Create(config);
  ASSERT_TRUE(consumer.ok()) << consumer.status().ToString();
  ASSERT_TRUE(
      (*consumer)
          ->Assign(
              {{"events", 0, kOffsetBeginning}, {"events", 1, kOffsetBeginning}, {"events", 2, 5}})
          .ok());
  std::vector<std::string> got;
  std::map<int32_t, int64_t> ends;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (ends.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    Result<MessageBatch> batch = (*consumer)->Poll(100ms);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    for (size_t i = 0; i < batch->size(); ++i) {
      Message m = (*batch)[i];
      EXPECT_EQ(m.topic, "events");
      EXPECT_GE(m.timestamp_ms, before_ms - 1000);  // CreateTime, set by the producer
      got.push_back(fmt::format("{}:{}:{}:{}", m.partition, m.offset, m.key, m.value));
    }
    for (const MessageBatch::PartitionEnd& e : batch->ends()) ends[e.partition] = e.offset;
  }
  std::vector<std::string> want;
  for (int i = 0; i < 30; ++i) {
    if (i % 3 == 2 && i / 3 < 5) continue;  // partition 2 from offset 5
    want.push_back(fmt::format("{}:{}:k{}:v{}", i % 3, i / 3, i, i));
  }
  EXPECT_THAT(got, ::testing::UnorderedElementsAreArray(want));
  EXPECT_EQ(ends, (std::map<int32_t, int64_t>{{0, 10}, {1, 10}, {2, 10}}));
}

// QueryHighWatermark asks the partition's leader (a ListOffsets round trip).
TEST_F(KafkaClientBrokerTest, QueryHighWatermarkAsksTheLeader) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("marks", 1, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base(), nullptr);
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  for (int i = 0; i < 25; ++i) ASSERT_TRUE((*producer)->Produce("marks", 0, {}, "v", 0).ok());
  ASSERT_TRUE((*producer)->Flush(10s).ok());
  auto consumer = Consumer::Create(Base());
  ASSERT_TRUE(consumer.ok()) << consumer.status().ToString();
  ASSERT_TRUE((*consumer)->Assign({{"marks", 0, kOffsetBeginning}}).ok());
  Result<int64_t> high = (*consumer)->QueryHighWatermark("marks", 0, 10s);
  ASSERT_TRUE(high.ok()) << high.status().ToString();
  EXPECT_EQ(*high, 25);
  EXPECT_FALSE((*consumer)->QueryHighWatermark("no-such-topic", 0, 2s).ok());
}

// The many-partition query asks in lists of 256: every partition's watermarks come back in
// the order asked, across the lists' seams, whatever each holds.
TEST_F(KafkaClientBrokerTest, WatermarksOfManyPartitionsComeBackInOrder) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("wide", 300, 1, {}, 30s).ok());
  ASSERT_TRUE((*admin)->CreateTopic("narrow", 2, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base(), nullptr);
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  // Partition p of "wide" gets p % 4 records; "narrow" 7 and 1.
  for (int p = 0; p < 300; ++p) {
    for (int i = 0; i < p % 4; ++i) ASSERT_TRUE((*producer)->Produce("wide", p, {}, "v", 0).ok());
  }
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*producer)->Produce("narrow", 0, {}, "v", 0).ok());
  ASSERT_TRUE((*producer)->Produce("narrow", 1, {}, "v", 0).ok());
  ASSERT_TRUE((*producer)->Flush(30s).ok());
  std::vector<TopicPartition> asked;
  for (int p = 299; p >= 0; --p) asked.push_back({"wide", p, 0});  // not in the log's order
  asked.push_back({"narrow", 1, 0});
  asked.push_back({"narrow", 0, 0});
  Result<std::vector<Watermarks>> marks = (*admin)->QueryWatermarks(asked, 30s);
  ASSERT_TRUE(marks.ok()) << marks.status().ToString();
  ASSERT_EQ(marks->size(), asked.size());
  for (size_t i = 0; i < 300; ++i) {
    EXPECT_EQ((*marks)[i].low, 0) << "wide " << asked[i].partition;
    EXPECT_EQ((*marks)[i].high, asked[i].partition % 4) << "wide " << asked[i].partition;
  }
  EXPECT_EQ((*marks)[300].high, 1);
  EXPECT_EQ((*marks)[301].high, 7);
}

// librdkafka 2.0's rd_kafka_query_watermark_offsets retries a request to a leader that
// went away for as long as it stays away, whatever its timeout: a pipeline's runner and a
// registry write hung there after a broker of a cluster stopped. The queries give up.
TEST_F(KafkaClientBrokerTest, WatermarkQueriesGiveUpWhenTheLeaderIsGone) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("gone", 1, 1, {}, 10s).ok());
  auto consumer = Consumer::Create(Base());
  ASSERT_TRUE(consumer.ok()) << consumer.status().ToString();
  ASSERT_TRUE((*consumer)->Assign({{"gone", 0, kOffsetBeginning}}).ok());
  // The leader known to both handles.
  ASSERT_TRUE((*admin)->QueryWatermarks("gone", 0, 10s).ok());
  ASSERT_TRUE((*consumer)->QueryHighWatermark("gone", 0, 10s).ok());
  ASSERT_EQ(broker_->Stop(), 0);
  broker_.reset();
  Result<Watermarks> w = (*admin)->QueryWatermarks("gone", 0, 3s);
  EXPECT_FALSE(w.ok());
  EXPECT_THAT(w.status().message(), ::testing::HasSubstr("watermarks of gone [0]"));
  Result<int64_t> high = (*consumer)->QueryHighWatermark("gone", 0, 1s);
  EXPECT_FALSE(high.ok());
  EXPECT_FALSE((*admin)->OffsetForTime("gone", 0, 0, 1s).ok());
}

TEST_F(KafkaClientBrokerTest, GroupMemberResumesFromCommittedOffsets) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("events", 2, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base());
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*producer)->Produce("events", i % 2, "k", fmt::format("a{}", i)).ok());
  }
  ASSERT_TRUE((*producer)->Flush(10s).ok());

  Config group = Base();
  group["group.id"] = "readers";
  group["auto.offset.reset"] = "earliest";
  group["session.timeout.ms"] = "6000";
  {
    auto first = Consumer::Create(group);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    ASSERT_TRUE((*first)->Subscribe({"events"}).ok());
    EXPECT_EQ(Read(first->get(), 10).size(), 10u);
    ASSERT_TRUE((*first)->Commit({{"events", 0, 5}, {"events", 1, 5}}).ok());
  }  // leaves the group

  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE((*producer)->Produce("events", i % 2, "k", fmt::format("b{}", i)).ok());
  }
  ASSERT_TRUE((*producer)->Flush(10s).ok());
  auto second = Consumer::Create(group);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_TRUE((*second)->Subscribe({"events"}).ok());
  EXPECT_THAT(Read(second->get(), 4),
              ::testing::UnorderedElementsAre("0:5:k:b0", "1:5:k:b1", "0:6:k:b2", "1:6:k:b3"));
}

// A group member's statistics arrive through Poll (what the pipeline's last-stable-offset
// gauge reads), with each assigned partition's ls_offset; its group metadata, for a
// transactional producer, is there once it is a member.
TEST_F(KafkaClientBrokerTest, GroupMemberStatisticsCarryTheLastStableOffset) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("stable", 1, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base());
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*producer)->Produce("stable", 0, "k", "v").ok());
  ASSERT_TRUE((*producer)->Flush(10s).ok());
  Config group = Base();
  group["group.id"] = "stats";
  group["auto.offset.reset"] = "earliest";
  group["statistics.interval.ms"] = "100";
  std::string last;
  auto consumer = Consumer::Create(group, [&](std::string_view json) { last = json; });
  ASSERT_TRUE(consumer.ok()) << consumer.status().ToString();
  ASSERT_TRUE((*consumer)->Subscribe({"stable"}).ok());
  EXPECT_EQ(Read(consumer->get(), 3).size(), 3u);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (last.find("\"ls_offset\":3") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE((*consumer)->Poll(100ms).ok());
  }
  EXPECT_THAT(last, ::testing::HasSubstr("\"ls_offset\":3"));
  auto md = (*consumer)->CurrentGroupMetadata();
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  EXPECT_NE(md->get(), nullptr);
}

// What an exactly-once pipeline's rewind uses: a member's id once it joined, the group's
// committed offsets (none: kOffsetInvalid), and a seek back to them, after which Poll
// returns the records from there again.
TEST_F(KafkaClientBrokerTest, AMemberSeeksBackToItsGroupsCommittedOffsets) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("rewind", 1, 1, {}, 10s).ok());
  ASSERT_TRUE((*admin)->CreateTopic("rewind-other", 1, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base());
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE((*producer)->Produce("rewind", 0, "k", fmt::format("v{}", i)).ok());
  }
  ASSERT_TRUE((*producer)->Flush(10s).ok());
  Config group = Base();
  group["group.id"] = "rewinders";
  group["auto.offset.reset"] = "earliest";
  auto consumer = Consumer::Create(group);
  ASSERT_TRUE(consumer.ok()) << consumer.status().ToString();
  Consumer& c = **consumer;
  EXPECT_EQ(c.MemberId(), "");  // not joined yet
  ASSERT_TRUE(c.Subscribe({"rewind"}).ok());
  ASSERT_EQ(Read(&c, 10).size(), 10u);
  EXPECT_NE(c.MemberId(), "");
  ASSERT_TRUE(c.Commit({{"rewind", 0, 4}}).ok());

  auto committed = c.Committed({{"rewind", 0}, {"rewind-other", 0}}, 10s);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  ASSERT_EQ(committed->size(), 2u);
  EXPECT_EQ((*committed)[0].offset, 4);
  EXPECT_EQ((*committed)[1].offset, kOffsetInvalid);
  Status st = c.Seek({{"rewind", 0, 4}}, 10s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_THAT(Read(&c, 6), ::testing::ElementsAre("0:4:k:v4", "0:5:k:v5", "0:6:k:v6", "0:7:k:v7",
                                                  "0:8:k:v8", "0:9:k:v9"));
  // A partition not assigned cannot be sought.
  EXPECT_FALSE(c.Seek({{"rewind-other", 0, 0}}, 2s).ok());
  auto plain = Consumer::Create(Base());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->Committed({{"rewind", 0}}, 1s).status().code(),
            StatusCode::kFailedPrecondition);
}

// The transactional producer against the broker's transaction coordinator: a committed
// transaction's records and offsets become visible to read_committed, an aborted one's
// never; a second producer with the same transactional.id fences the first, whose next
// commit is a fatal error (kFailedPrecondition, "fatal: ...").
TEST_F(KafkaClientBrokerTest, TransactionsCommitAbortAndFence) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("txn-in", 1, 1, {}, 10s).ok());
  ASSERT_TRUE((*admin)->CreateTopic("txn-out", 1, 1, {}, 10s).ok());
  Config txn = Base();
  txn["transactional.id"] = "client-test";
  txn["transaction.timeout.ms"] = "10000";
  txn["message.timeout.ms"] = "10000";
  auto producer = Producer::Create(txn);
  ASSERT_TRUE(producer.ok()) << producer.status().ToString();
  Producer& p = **producer;
  ASSERT_TRUE(p.InitTransactions(30s).ok());

  // Committed with the offsets of a group member.
  Config member = Base();
  member["group.id"] = "txn-readers";
  auto consumer = Consumer::Create(member);
  ASSERT_TRUE(consumer.ok()) << consumer.status().ToString();
  auto md = (*consumer)->CurrentGroupMetadata();
  ASSERT_TRUE(md.ok()) << md.status().ToString();
  ASSERT_TRUE(p.BeginTransaction().ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(p.Produce("txn-out", 0, "k", fmt::format("c{}", i)).ok());
  Status st = p.SendOffsetsToTransaction({{"txn-in", 0, 42}}, *md, 30s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = p.CommitTransaction(30s);
  ASSERT_TRUE(st.ok()) << st.ToString();

  // Aborted.
  ASSERT_TRUE(p.BeginTransaction().ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(p.Produce("txn-out", 0, "k", fmt::format("a{}", i)).ok());
  st = p.AbortTransaction(30s);
  ASSERT_TRUE(st.ok()) << st.ToString();

  // Fenced by a newer producer with the same id.
  auto newer = Producer::Create(txn);
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
  ASSERT_TRUE((*newer)->InitTransactions(30s).ok());
  ASSERT_TRUE(p.BeginTransaction().ok());
  ASSERT_TRUE(p.Produce("txn-out", 0, "k", "zombie").ok());
  st = p.CommitTransaction(30s);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  EXPECT_THAT(st.message(), ::testing::StartsWith("fatal: "));
  EXPECT_EQ(p.FatalError().code(), StatusCode::kFailedPrecondition);

  Config reader = Base();
  reader["group.id"] = "txn-check";
  reader["auto.offset.reset"] = "earliest";
  reader["isolation.level"] = "read_committed";
  auto check = Consumer::Create(reader);
  ASSERT_TRUE(check.ok());
  ASSERT_TRUE((*check)->Subscribe({"txn-out"}).ok());
  std::vector<std::string> got = Read(check->get(), 3);
  std::vector<std::string> values;
  for (const std::string& g : got) values.push_back(g.substr(g.rfind(':') + 1));
  EXPECT_THAT(values, ::testing::ElementsAre("c0", "c1", "c2"));
  // Nothing more comes: the aborted records and the zombie's are never visible.
  EXPECT_TRUE(Read(check->get(), 1).empty());
}

// The listener can choose where an assigned partition starts, instead of the group's
// committed offset: partition 0 from offset 7, partition 1 from the commit (3).
TEST_F(KafkaClientBrokerTest, ListenerChoosesWhereAssignedPartitionsStart) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("resume", 2, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base());
  ASSERT_TRUE(producer.ok());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE((*producer)->Produce("resume", i % 2, "k", fmt::format("v{}", i)).ok());
  }
  ASSERT_TRUE((*producer)->Flush(10s).ok());
  Config group = Base();
  group["group.id"] = "resumers";
  group["auto.offset.reset"] = "earliest";
  {
    auto first = Consumer::Create(group);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    ASSERT_TRUE((*first)->Subscribe({"resume"}).ok());
    EXPECT_EQ(Read(first->get(), 20).size(), 20u);
    ASSERT_TRUE((*first)->Commit({{"resume", 0, 3}, {"resume", 1, 3}}).ok());
  }
  auto second = Consumer::Create(group);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  (*second)->SetRebalanceListener([](RebalanceEvent& e) {
    if (e.kind != RebalanceEvent::Kind::kAssigned) return;
    for (TopicPartition& tp : e.partitions) {
      if (tp.partition == 0) tp.offset = 7;
    }
  });
  ASSERT_TRUE((*second)->Subscribe({"resume"}).ok());
  std::vector<std::string> got = Read(second->get(), 10);
  std::vector<std::string> want;
  for (int o = 7; o < 10; ++o) want.push_back(fmt::format("0:{}:k:v{}", o, 2 * o));
  for (int o = 3; o < 10; ++o) want.push_back(fmt::format("1:{}:k:v{}", o, 2 * o + 1));
  EXPECT_THAT(got, ::testing::UnorderedElementsAreArray(want));
}

// A second member joining makes the first give partitions up: its listener hears the
// revocation before they go (and may commit then), and both hear their assignments.
TEST_F(KafkaClientBrokerTest, RebalanceListenerHearsRevocationBeforeTheHandOver) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("moving", 4, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base());
  ASSERT_TRUE(producer.ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE((*producer)->Produce("moving", i % 4, "k", "v").ok());
  ASSERT_TRUE((*producer)->Flush(10s).ok());

  Config group = Base();
  group["group.id"] = "movers";
  group["auto.offset.reset"] = "earliest";
  group["session.timeout.ms"] = "6000";
  group["heartbeat.interval.ms"] = "200";
  auto first = Consumer::Create(group);
  ASSERT_TRUE(first.ok());
  std::vector<RebalanceEvent> events;
  Consumer* first_ptr = first->get();
  Status commit_in_revoke;
  (*first)->SetRebalanceListener([&](const RebalanceEvent& e) {
    events.push_back(e);
    if (e.kind == RebalanceEvent::Kind::kRevoked) {
      std::vector<TopicPartition> offsets;
      for (const TopicPartition& tp : e.partitions) offsets.push_back({tp.topic, tp.partition, 2});
      commit_in_revoke = first_ptr->Commit(offsets);
    }
  });
  ASSERT_TRUE((*first)->Subscribe({"moving"}).ok());
  EXPECT_EQ(Read(first->get(), 8).size(), 8u);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].kind, RebalanceEvent::Kind::kAssigned);
  EXPECT_EQ(events[0].partitions.size(), 4u);
  auto assigned = (*first)->Assignment();
  ASSERT_TRUE(assigned.ok());
  EXPECT_EQ(assigned->size(), 4u);
  auto lag = (*first)->Lag();
  ASSERT_TRUE(lag.ok());
  for (const PartitionLag& l : *lag) {
    EXPECT_EQ(l.position, 2) << l.partition;
    EXPECT_EQ(l.lag(), 0) << l.partition;
  }

  auto second = Consumer::Create(group);
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->Subscribe({"moving"}).ok());
  // Both poll until the group has settled with two partitions each.
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    (void)(*first)->Poll(100ms);
    (void)(*second)->Poll(100ms);
    auto a = (*first)->Assignment();
    auto b = (*second)->Assignment();
    if (a.ok() && b.ok() && a->size() == 2 && b->size() == 2) break;
  }
  ASSERT_EQ((*first)->Assignment()->size(), 2u);
  bool revoked = false;
  for (const RebalanceEvent& e : events) revoked |= e.kind == RebalanceEvent::Kind::kRevoked;
  EXPECT_TRUE(revoked);
  EXPECT_TRUE(commit_in_revoke.ok()) << commit_in_revoke.ToString();
}

// A Poll never returns records of an assignment it announced: they come in the next one,
// so a caller can tell them from records fetched before a revocation in the same Poll.
// (librdkafka's batch consume goes on after a rebalance callback: the runner once dropped
// records of a partition revoked and given back inside one Poll.)
TEST_F(KafkaClientBrokerTest, RecordsOfAnAssignmentComeAfterThePollThatAnnouncedIt) {
  auto admin = Admin::Create(Base());
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  ASSERT_TRUE((*admin)->CreateTopic("announced", 2, 1, {}, 10s).ok());
  auto producer = Producer::Create(Base());
  ASSERT_TRUE(producer.ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE((*producer)->Produce("announced", i % 2, "k", "v").ok());
  ASSERT_TRUE((*producer)->Flush(10s).ok());
  Config group = Base();
  group["group.id"] = "announcers";
  group["auto.offset.reset"] = "earliest";
  auto consumer = Consumer::Create(group);
  ASSERT_TRUE(consumer.ok());
  int assigned_in_poll = -1;
  int poll_number = 0;
  (*consumer)->SetRebalanceListener([&](const RebalanceEvent& e) {
    if (e.kind == RebalanceEvent::Kind::kAssigned) assigned_in_poll = poll_number;
  });
  ASSERT_TRUE((*consumer)->Subscribe({"announced"}).ok());
  size_t got = 0;
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while (got < 6 && std::chrono::steady_clock::now() < deadline) {
    ++poll_number;
    auto batch = (*consumer)->Poll(2s, 100);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    if (poll_number == assigned_in_poll) {
      EXPECT_EQ(batch->size(), 0u) << "records in the Poll that announced their assignment";
    }
    got += batch->size();
  }
  EXPECT_GT(assigned_in_poll, 0);
  EXPECT_EQ(got, 6u);
}

}  // namespace
}  // namespace sluice::kafka::client
