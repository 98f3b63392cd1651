// The replication core (docs/design/0018-cluster.md, phase B) with real brokers on
// 127.0.0.1 in one process, real files, and the in-process IsrStore: acks=all, the high
// watermark, ISR shrink and expansion, truncation by diverging epoch after a leader
// change, idempotent producers across it, and the errors of malformed replica fetches.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "broker/replica_checkpoint.h"
#include "broker/replica_isr_store.h"
#include "broker/tests/broker_test_util.h"
#include "broker/tests/replica_test_util.h"
#include "kafka/protocol/records.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace replica_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Bytes;
using testing::Client;
using testing::WaitUntil;

using PartitionResponse = kafka::ProduceResponse::PartitionProduceResponse;

PartitionResponse Produce(Client& c, const std::string& topic, const Bytes& batch, int16_t acks,
                          int32_t timeout_ms = 10'000, int32_t partition = 0) {
  kafka::ProduceRequest req;
  req.acks = acks;
  req.timeout_ms = timeout_ms;
  req.topic_data.push_back({topic, {{partition, std::span<const uint8_t>(batch), {}}}, {}});
  auto resp = c.Call<kafka::ProduceResponse>(ApiKey::kProduce, 9, req);
  if (resp.responses.size() != 1 || resp.responses[0].partition_responses.size() != 1) {
    ADD_FAILURE() << "bad produce response shape";
    return {};
  }
  return resp.responses[0].partition_responses[0];
}

Bytes Idempotent(const std::string& value, int64_t pid, int16_t epoch, int32_t seq) {
  kafka::BatchBuilderOptions o;
  o.producer_id = pid;
  o.producer_epoch = epoch;
  o.base_sequence = seq;
  return testing::ValueBatch(value, 1, 1000, o);
}

// A consumer's fetch (v11, by topic name) or a follower's (v15, `replica` >= 0).
struct FetchOptions {
  int32_t replica = -1;
  int64_t replica_epoch = -1;
  int32_t current_leader_epoch = -1;
  int32_t last_fetched_epoch = -1;
};
class Fetcher {
 public:
  explicit Fetcher(uint16_t port) : client_(port) {}
  kafka::FetchResponse::PartitionData Fetch(const std::string& topic, const kafka::Uuid& id,
                                            int64_t offset, FetchOptions o = {}) {
    const int16_t version = o.replica >= 0 ? 15 : 12;
    kafka::FetchRequest req;
    req.replica_state.replica_id = o.replica;
    req.replica_state.replica_epoch = o.replica_epoch;
    req.max_wait_ms = 0;
    req.min_bytes = 1;
    req.max_bytes = 1 << 20;
    kafka::FetchRequest::FetchTopic t;
    t.topic = topic;
    t.topic_id = id;
    kafka::FetchRequest::FetchPartition p;
    p.fetch_offset = offset;
    p.partition_max_bytes = 1 << 20;
    p.current_leader_epoch = o.current_leader_epoch;
    p.last_fetched_epoch = o.last_fetched_epoch;
    t.partitions.push_back(p);
    req.topics.push_back(t);
    last_ = client_.Call<kafka::FetchResponse>(ApiKey::kFetch, version, req);
    if (last_.responses.size() != 1 || last_.responses[0].partitions.size() != 1) {
      ADD_FAILURE() << "bad fetch response shape";
      return {};
    }
    return last_.responses[0].partitions[0];
  }
  // How many records a fetch's batches hold.
  static int64_t Records(const kafka::FetchResponse::PartitionData& p) {
    if (!p.records.inline_bytes) return 0;
    std::span<const uint8_t> b = *p.records.inline_bytes;
    int64_t n = 0;
    size_t pos = 0;
    while (b.size() - pos >= storage::kBatchHeaderSize) {
      storage::BatchHeader h = storage::ParseBatchHeader(b.subspan(pos));
      n += h.records_count;
      pos += h.total_size();
    }
    return n;
  }
  Client& client() { return client_; }

 private:
  Client client_;
  kafka::FetchResponse last_;
};

class ReplicaTest : public testing::ReplicaClusterFixture {
 protected:
  kafka::Uuid TopicId(int32_t node_id, const std::string& topic) {
    auto meta = node(node_id).broker->Snapshot();
    const MetadataSnapshot::Topic* t = meta->Find(topic);
    return t != nullptr ? t->info.id : kafka::Uuid{};
  }
  static std::vector<int32_t> Sorted(std::vector<int32_t> v) {
    std::sort(v.begin(), v.end());
    return v;
  }
};

TEST(InProcessIsrStoreTest, ChecksLeaderEpochVersionAndIsr) {
  InProcessIsrStore store;
  IsrError got = IsrError::kNone;
  int64_t version = -1;
  auto done = [&](IsrError e, int64_t v) {
    got = e;
    version = v;
  };
  store.AlterIsr("t", 0, 1, 1, {1}, 1, {}, done);
  EXPECT_EQ(got, IsrError::kUnknownPartition);
  LeaderAndIsr l = store.Elect("t", 0, 1, {1, 2, 3}, std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(l.leader_epoch, 1);
  store.AlterIsr("t", 0, 2, l.leader_epoch, {1, 2}, l.version, {}, done);
  EXPECT_EQ(got, IsrError::kFencedLeaderEpoch);  // not the leader
  store.AlterIsr("t", 0, 1, l.leader_epoch + 1, {1, 2}, l.version, {}, done);
  EXPECT_EQ(got, IsrError::kFencedLeaderEpoch);  // a future epoch
  store.AlterIsr("t", 0, 1, l.leader_epoch, {1, 2}, l.version + 1, {}, done);
  EXPECT_EQ(got, IsrError::kInvalidVersion);
  for (std::vector<int32_t> bad : {std::vector<int32_t>{}, {2, 3}, {1, 4}, {1, 1}}) {
    store.AlterIsr("t", 0, 1, l.leader_epoch, bad, l.version, {}, done);
    EXPECT_EQ(got, IsrError::kInvalidIsr);
  }
  EXPECT_EQ(store.changes(), 0);
  store.AlterIsr("t", 0, 1, l.leader_epoch, {1, 3}, l.version, {}, done);
  EXPECT_EQ(got, IsrError::kNone);
  EXPECT_EQ(version, l.version + 1);
  EXPECT_EQ(store.Get("t", 0)->isr, (std::vector<int32_t>{1, 3}));
  // The old version is stale now.
  store.AlterIsr("t", 0, 1, l.leader_epoch, {1}, l.version, {}, done);
  EXPECT_EQ(got, IsrError::kInvalidVersion);
  // A new election fences the old leader's epoch.
  LeaderAndIsr l2 = store.Elect("t", 0, 3, {1, 2, 3}, std::nullopt);
  EXPECT_EQ(l2.isr, (std::vector<int32_t>{1, 3}));
  store.AlterIsr("t", 0, 1, l.leader_epoch, {1}, l2.version, {}, done);
  EXPECT_EQ(got, IsrError::kFencedLeaderEpoch);
  EXPECT_EQ(store.changes(), 1);
}

TEST(HighWatermarkCheckpointTest, ParsesKafkasFormatAndRejectsMalformedText) {
  auto marks = ParseHighWatermarks("0\n2\nt 0 15\nother.topic 3 0\n");
  ASSERT_TRUE(marks.ok()) << marks.status().ToString();
  EXPECT_EQ(*marks, (HighWatermarks{{{"t", 0}, 15}, {{"other.topic", 3}, 0}}));
  EXPECT_EQ(FormatHighWatermarks(*marks), "0\n2\nother.topic 3 0\nt 0 15\n");
  EXPECT_TRUE(ParseHighWatermarks("0\n0\n").ok());
  for (const char* bad : {"", "0\n", "1\n0\n", "0\n1\n", "0\n1\nt 0 1", "0\n1\nt 0\n",
                          "0\n1\nt -1 5\n", "0\n1\nt 0 -5\n", "0\n1\nt 0 5 6\n", "0\n1\nt x 5\n",
                          "0\n1\nt/x 0 5\n", "0\n2\nt 0 5\nt 0 6\n", "0\n-1\n", "0\n1\n 0 5\n",
                          "0\n1\nt  0 5\n", "0\n1\nt 0 99999999999999999999\n"}) {
    EXPECT_FALSE(ParseHighWatermarks(bad).ok()) << "'" << bad << "'";
  }
}

TEST_F(ReplicaTest, ARestartedLeaderStartsAtItsCheckpointedHighWatermark) {
  StartCluster(2);
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 3, 1000), -1).error_code, ErrorCode::kNone);
  node(2).Stop();
  // Written on the leader, never committed: past the high watermark.
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("b", 2, 1000), 1).error_code, ErrorCode::kNone);
  EXPECT_EQ(node(1).View("t").high_watermark, 3);
  node(1).Stop();  // writes the checkpoint a last time
  auto text = storage::testing::ReadFileBytes((root_ / "n1" / kHighWatermarkFile).string());
  EXPECT_EQ(std::string(text.begin(), text.end()), "0\n1\nt 0 3\n");
  // Restarted and elected again, it does not show consumers the uncommitted tail.
  node(1).Start();
  Elect("t", 0, 1, {1, 2}, std::nullopt);
  auto v = node(1).View("t");
  EXPECT_EQ(v.log_end, 5);
  EXPECT_EQ(v.high_watermark, 3);
}

TEST_F(ReplicaTest, AcksAllIsAnsweredOnlyOnceEveryIsrFollowerHasTheBatch) {
  StartCluster(3);
  Client c(node(1).port());
  for (int round = 0; round < 5; ++round) {
    auto r = Produce(c, "t", testing::ValueBatch("v" + std::to_string(round), 4, 1000), -1);
    ASSERT_EQ(r.error_code, ErrorCode::kNone) << r.error_message.value_or("");
    const int64_t end = r.base_offset + 4;
    // Answered: the high watermark passed the batch, so both followers reported (after
    // syncing, under the durable policy) a log end past it.
    for (int f = 2; f <= 3; ++f) {
      auto v = node(f).View("t");
      EXPECT_GE(v.log_end, end) << "follower " << f << " round " << round;
      EXPECT_EQ(v.role, ReplicaRole::kFollower);
    }
    EXPECT_GE(node(1).View("t").high_watermark, end);
  }
  auto v = node(1).View("t");
  EXPECT_EQ(v.log_end, 20);
  EXPECT_EQ(Sorted(v.isr), (std::vector<int32_t>{1, 2, 3}));
  // The followers carry the leader's epoch history.
  EXPECT_EQ(node(2).View("t").epochs, v.epochs);
}

// 0018 "pagecache": a follower writes its copy around the page cache; the leader's stays
// there for its consumers, and a follower that comes to lead caches what it writes next.
TEST_F(ReplicaTest, FollowersWriteAroundThePageCacheLeadersThroughIt) {
  StartCluster(3);
  node(3).replica_options.follower_direct_writes = false;  // buffered, as before 0018 "pagecache"
  node(3).Stop();
  node(3).Start();
  ASSERT_TRUE(
      node(3)
          .replicas
          ->BecomeFollower("t", 0, node(1).View("t").leader_epoch, 1, "127.0.0.1", node(1).port())
          .ok());
  Client c(node(1).port());
  const std::string value(2000, 'x');
  for (int round = 0; round < 40; ++round) {  // ~400 KB
    auto r = Produce(c, "t", testing::ValueBatch(value + std::to_string(round), 5, 1000), -1);
    ASSERT_EQ(r.error_code, ErrorCode::kNone) << r.error_message.value_or("");
  }
  auto segment = [&](int32_t n) {
    return (node(n).dir / "t-0" / "00000000000000000000.log").string();
  };
  ASSERT_TRUE(WaitUntil([&] { return node(3).View("t").log_end == 200; }));
  EXPECT_GE(storage::testing::ResidentPages(segment(1)), 90u);  // the leader's
  EXPECT_LE(storage::testing::ResidentPages(segment(2)), 1u);   // a follower's
  EXPECT_GE(storage::testing::ResidentPages(segment(3)), 90u);  // one told to write buffered
  // The leader's bytes came whole to the follower that wrote around the cache (its file
  // zero-padded to a block while open).
  Bytes leader = storage::testing::ReadFileBytes(segment(1));
  Bytes follower = storage::testing::ReadFileBytes(segment(2));
  ASSERT_GE(follower.size(), leader.size());
  EXPECT_LT(follower.size() - leader.size(), storage::kDirectIoAlign);
  EXPECT_TRUE(std::all_of(follower.begin() + static_cast<ptrdiff_t>(leader.size()), follower.end(),
                          [](uint8_t b) { return b == 0; }));
  follower.resize(leader.size());
  EXPECT_EQ(follower, leader);

  // Node 2 comes to lead: what it writes from now on is cached; node 1 follows and keeps
  // only what it wrote as the leader.
  const size_t led = storage::testing::ResidentPages(segment(1));
  Elect("t", 0, 2, {1, 2, 3}, std::vector<int32_t>{1, 2, 3});
  Client c2(node(2).port());
  for (int round = 0; round < 40; ++round) {
    auto r = Produce(c2, "t", testing::ValueBatch(value + std::to_string(round), 5, 1000), -1);
    ASSERT_EQ(r.error_code, ErrorCode::kNone) << r.error_message.value_or("");
  }
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").log_end == 400; }));
  EXPECT_GE(storage::testing::ResidentPages(segment(2)), 90u);
  EXPECT_LE(storage::testing::ResidentPages(segment(1)), led + 1);
}

TEST_F(ReplicaTest, AcksAllUnderTheIntervalPolicyWaitsForTheFollowersWrites) {
  MakeNodes(2, "t");
  for (auto& n : nodes_) n->options.flush_policy = storage::FlushPolicy::kInterval;
  node(1).Start();
  node(2).Start();
  Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1, 2});
  Client c(node(1).port());
  for (int round = 0; round < 3; ++round) {
    auto r = Produce(c, "t", testing::ValueBatch("v", 5, 1000), -1);
    ASSERT_EQ(r.error_code, ErrorCode::kNone);
    EXPECT_GE(node(2).View("t").log_end, r.base_offset + 5);
  }
  EXPECT_EQ(node(1).View("t").high_watermark, 15);
}

TEST_F(ReplicaTest, PartitionsLedByDifferentBrokersReplicateTogether) {
  // Four partitions over both shards of each broker; brokers 1 and 2 lead two each, so
  // every broker runs fetchers to two leaders, each fetch naming several partitions.
  MakeNodes(3, "m", 4);
  for (int i = 1; i <= 3; ++i) node(i).Start();
  for (int32_t p = 0; p < 4; ++p) {
    Elect("m", p, p < 2 ? 1 : 2, {1, 2, 3}, std::vector<int32_t>{1, 2, 3});
  }
  Client c1(node(1).port());
  Client c2(node(2).port());
  for (int round = 0; round < 3; ++round) {
    for (int32_t p = 0; p < 4; ++p) {
      auto r = Produce(p < 2 ? c1 : c2, "m", testing::ValueBatch("p" + std::to_string(p), 2, 1000),
                       -1, 10'000, p);
      ASSERT_EQ(r.error_code, ErrorCode::kNone) << "partition " << p;
      EXPECT_EQ(r.base_offset, round * 2);
    }
  }
  for (int32_t p = 0; p < 4; ++p) {
    const int32_t leader = p < 2 ? 1 : 2;
    EXPECT_EQ(node(leader).View("m", p).high_watermark, 6) << "partition " << p;
    for (int n = 1; n <= 3; ++n) {
      EXPECT_EQ(node(n).View("m", p).log_end, 6) << "partition " << p << " node " << n;
      EXPECT_EQ(node(n).View("m", p).role,
                n == leader ? ReplicaRole::kLeader : ReplicaRole::kFollower);
    }
  }
  // Producing to a follower of a partition is refused.
  EXPECT_EQ(Produce(c1, "m", testing::ValueBatch("x", 1, 1000), -1, 10'000, 3).error_code,
            ErrorCode::kNotLeaderOrFollower);
}

TEST_F(ReplicaTest, ConsumersSeeNothingPastTheHighWatermark) {
  StartCluster(2);
  const kafka::Uuid id = TopicId(1, "t");
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 3, 1000), -1).error_code, ErrorCode::kNone);
  // The follower goes away but stays in the ISR (replica.lag.time.max.ms is a minute).
  node(2).Stop();
  auto r = Produce(c, "t", testing::ValueBatch("b", 2, 1000), 1);
  ASSERT_EQ(r.error_code, ErrorCode::kNone);
  EXPECT_EQ(r.base_offset, 3);
  Fetcher consumer(node(1).port());
  auto f = consumer.Fetch("t", id, 0);
  EXPECT_EQ(f.error_code, ErrorCode::kNone);
  EXPECT_EQ(f.high_watermark, 3);
  EXPECT_EQ(Fetcher::Records(f), 3);  // "b" is written on the leader, not committed
  EXPECT_EQ(
      consumer.Fetch("t", id, 3).records.inline_bytes.value_or(std::span<const uint8_t>()).size(),
      0u);
  // Between the high watermark and the log end is not out of range (a consumer of an
  // earlier leader may be there): nothing yet. Past the log end is.
  auto between = consumer.Fetch("t", id, 4);
  EXPECT_EQ(between.error_code, ErrorCode::kNone);
  EXPECT_EQ(Fetcher::Records(between), 0);
  EXPECT_EQ(consumer.Fetch("t", id, 6).error_code, ErrorCode::kOffsetOutOfRange);
  // The follower comes back and catches up: the high watermark moves, "b" is readable.
  node(2).Start();
  Elect("t", 0, 1, {1, 2}, std::nullopt);
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").high_watermark == 5; }));
  f = consumer.Fetch("t", id, 3);
  EXPECT_EQ(f.high_watermark, 5);
  EXPECT_EQ(Fetcher::Records(f), 2);
}

TEST_F(ReplicaTest, AcksAllTimesOutWhileAnIsrFollowerIsAway) {
  StartCluster(2);
  node(2).Stop();
  Client c(node(1).port());
  auto r = Produce(c, "t", testing::ValueBatch("a", 1, 1000), -1, /*timeout_ms=*/200);
  EXPECT_EQ(r.error_code, ErrorCode::kRequestTimedOut);
  // An idempotent batch written with acks=1, then retried with acks=all: the duplicate
  // is answered as the original would be, only once committed.
  ASSERT_EQ(Produce(c, "t", Idempotent("x", 77, 0, 0), 1).error_code, ErrorCode::kNone);
  EXPECT_EQ(Produce(c, "t", Idempotent("x", 77, 0, 0), -1, 200).error_code,
            ErrorCode::kRequestTimedOut);
  node(2).Start();
  Elect("t", 0, 1, {1, 2}, std::nullopt);
  auto dup = Produce(c, "t", Idempotent("x", 77, 0, 0), -1);
  EXPECT_EQ(dup.error_code, ErrorCode::kNone);
  EXPECT_EQ(dup.base_offset, 1);
}

TEST_F(ReplicaTest, FollowerLossShrinksTheIsrAndMinInsyncReplicasDecides) {
  MakeNodes(2, "t");
  for (auto& n : nodes_) n->replica_options.replica_lag_time_max_ms = 300;
  node(1).Start();
  node(2).Start();
  LeaderAndIsr l = Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1, 2}, /*min_isr=*/2);
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 2, 1000), -1).error_code, ErrorCode::kNone);
  node(2).Stop();
  // A follower with everything is in sync however long it is silent (Kafka's
  // isCaughtUp); once the leader has more, the silent one falls behind, and the leader
  // takes it out of the ISR after replica.lag.time.max.ms, through the store.
  // An acks=all batch appended while the ISR was {1, 2} and committed after it shrank to
  // {1}: below min.insync.replicas, NOT_ENOUGH_REPLICAS_AFTER_APPEND (Kafka's
  // checkEnoughReplicasReachOffset), never a success held by one replica.
  auto after = Produce(c, "t", testing::ValueBatch("a2", 1, 1000), -1, /*timeout_ms=*/20000);
  EXPECT_EQ(after.error_code, ErrorCode::kNotEnoughReplicasAfterAppend);
  ASSERT_TRUE(WaitUntil([&] { return StoredIsr("t") == std::vector<int32_t>{1}; }));
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").isr == std::vector<int32_t>{1}; }));
  // min.insync.replicas=2: refused before anything is appended.
  const int64_t end = node(1).View("t").log_end;
  auto refused = Produce(c, "t", testing::ValueBatch("b", 1, 1000), -1);
  EXPECT_EQ(refused.error_code, ErrorCode::kNotEnoughReplicas);
  EXPECT_EQ(node(1).View("t").log_end, end);
  // acks=1 still works.
  EXPECT_EQ(Produce(c, "t", testing::ValueBatch("c", 1, 1000), 1).error_code, ErrorCode::kNone);
  // min.insync.replicas=1: acks=all proceeds with the leader alone.
  auto current = store_.Get("t", 0);
  ASSERT_TRUE(node(1).replicas->BecomeLeader("t", 0, LeaderFor(*current, 1)).ok());
  auto ok = Produce(c, "t", testing::ValueBatch("d", 1, 1000), -1);
  EXPECT_EQ(ok.error_code, ErrorCode::kNone);
  // The follower comes back, catches up, and the leader adds it again.
  node(2).Start();
  ASSERT_TRUE(node(2)
                  .replicas->BecomeFollower("t", 0, l.leader_epoch, 1, "127.0.0.1", node(1).port())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return StoredIsr("t") == std::vector<int32_t>{1, 2}; }));
  ASSERT_TRUE(WaitUntil([&] {
    return Sorted(node(1).View("t").isr) == std::vector<int32_t>{1, 2};
  }));
  EXPECT_EQ(node(2).View("t").log_end, node(1).View("t").log_end);
  EXPECT_GE(store_.changes(), 2);
}

// Refuses the first `refusals` ISR expansions with kInvalidIsr (what the etcd store
// answers a follower that fetched as a registration it has since replaced), then passes
// every call to `inner`.
class RefusingIsrStore final : public IsrStore {
 public:
  RefusingIsrStore(IsrStore& inner, int refusals) : inner_(inner), refusals_(refusals) {}
  void AlterIsr(const std::string& topic, int32_t partition, int32_t leader, int32_t leader_epoch,
                std::vector<int32_t> new_isr, int64_t expected_version, BrokerEpochs broker_epochs,
                Done done) override {
    if (refusals_.fetch_sub(1) > 0) {
      refused_.fetch_add(1);
      done(IsrError::kInvalidIsr, 0);
      return;
    }
    inner_.AlterIsr(topic, partition, leader, leader_epoch, std::move(new_isr), expected_version,
                    std::move(broker_epochs), std::move(done));
  }
  int refused() const { return refused_.load(); }

 private:
  IsrStore& inner_;
  std::atomic<int> refusals_;
  std::atomic<int> refused_{0};
};

TEST_F(ReplicaTest, ARefusedExpansionIsAskedAgainAfterTheFetchBackoff) {
  // Seen in the fault runs (cluster_faults.py, a paused leader back): the first expansion
  // was refused and the caught-up follower stayed out for replica.lag.time.max.ms.
  MakeNodes(2, "t");
  RefusingIsrStore refusing(store_, 2);
  node(1).replica_options.isr_store = &refusing;
  node(1).Start();
  node(2).Start();
  Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1});
  // replica.lag.time.max.ms is 60 s here, past WaitUntil's limit.
  ASSERT_TRUE(WaitUntil([&] { return StoredIsr("t") == std::vector<int32_t>{1, 2}; }));
  EXPECT_EQ(refusing.refused(), 2);
  ASSERT_TRUE(WaitUntil([&] {
    return Sorted(node(1).View("t").isr) == std::vector<int32_t>{1, 2};
  }));
}

TEST_F(ReplicaTest, ARoleFromAnOlderIsrVersionDoesNotUndoACommittedChange) {
  // The controller may tell the leader its role again from a view made before the
  // leader's own ISR expansion reached it: that older version must not shrink the ISR
  // back (0018 decision 4); the same version changes nothing; a newer one is taken.
  MakeNodes(2, "t");
  node(1).Start();
  node(2).Start();
  LeaderAndIsr l = Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1});
  ASSERT_TRUE(WaitUntil([&] { return StoredIsr("t") == std::vector<int32_t>{1, 2}; }));
  ASSERT_TRUE(WaitUntil([&] {
    return Sorted(node(1).View("t").isr) == std::vector<int32_t>{1, 2};
  }));
  const int64_t committed = node(1).View("t").isr_version;
  EXPECT_GT(committed, l.version);
  ASSERT_TRUE(node(1).replicas->BecomeLeader("t", 0, LeaderFor(l, 1)).ok());  // older
  EXPECT_EQ(Sorted(node(1).View("t").isr), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(node(1).View("t").isr_version, committed);
  ASSERT_TRUE(node(1).replicas->BecomeLeader("t", 0, LeaderFor(*store_.Get("t", 0), 1)).ok());
  EXPECT_EQ(Sorted(node(1).View("t").isr), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(node(1).View("t").isr_version, committed);
  // A newer version (another writer's, as the controller's) is the leader's ISR now.
  ReplicaManager::Leadership newer = LeaderFor(*store_.Get("t", 0), 1);
  newer.isr = {1};
  newer.isr_version = committed + 10;
  ASSERT_TRUE(node(1).replicas->BecomeLeader("t", 0, newer).ok());
  EXPECT_EQ(node(1).View("t").isr, (std::vector<int32_t>{1}));
  EXPECT_EQ(node(1).View("t").isr_version, committed + 10);
}

TEST_F(ReplicaTest, AFollowerTheControllerTookOutNoLongerHoldsTheHighWatermark) {
  // The controller takes a dead broker out of the ISR in the same leader epoch (its lease
  // went, the leader stayed). Caught up when it died, it must not hold the high watermark
  // for replica.lag.time.max.ms (60 s here) after its last fetch: Kafka resets its
  // caught-up time (resetReplicaState). Seen as kafkajs's acks=all sends stalling about
  // 30 s after a SIGKILL in cluster_clients_test.
  StartCluster(3);
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 2, 1000), -1).error_code, ErrorCode::kNone);
  node(3).Stop();
  // A fetch node 3 sent before it stopped reaches the leader first (a dead broker's last
  // fetch comes before the controller's change, session_timeout later).
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ReplicaManager::Leadership without = LeaderFor(*store_.Get("t", 0), 1);
  without.isr = {1, 2};
  without.isr_version += 10;  // the controller's write
  ASSERT_TRUE(node(1).replicas->BecomeLeader("t", 0, without).ok());
  auto r = Produce(c, "t", testing::ValueBatch("b", 1, 1000), -1, /*timeout_ms=*/20000);
  EXPECT_EQ(r.error_code, ErrorCode::kNone);
  EXPECT_GE(node(1).View("t").high_watermark, 3);
}

TEST_F(ReplicaTest, NoAcknowledgedRecordIsLostWhenTheLeaderDies) {
  StartCluster(3);
  std::vector<std::string> acked;
  {
    Client c(node(1).port());
    for (int i = 0; i < 20; ++i) {
      const std::string prefix = "k" + std::to_string(i);
      auto r = Produce(c, "t", testing::ValueBatch(prefix, 3, 1000), -1);
      ASSERT_EQ(r.error_code, ErrorCode::kNone);
      acked.push_back(prefix + "-2");
    }
  }
  node(1).Stop();  // the leader dies; the controller elects from the rest of the ISR
  LeaderAndIsr l = Elect("t", 0, 2, {1, 2, 3}, std::vector<int32_t>{2, 3});
  {
    Client c(node(2).port());
    for (int i = 20; i < 30; ++i) {
      const std::string prefix = "k" + std::to_string(i);
      auto r = Produce(c, "t", testing::ValueBatch(prefix, 3, 1000), -1);
      ASSERT_EQ(r.error_code, ErrorCode::kNone) << r.error_message.value_or("");
      EXPECT_EQ(r.base_offset, i * 3);
      acked.push_back(prefix + "-2");
    }
  }
  ASSERT_TRUE(WaitUntil([&] { return node(2).View("t").high_watermark == 90; }));
  Fetcher consumer(node(2).port());
  std::string all;
  for (int64_t offset = 0; offset < 90;) {
    auto f = consumer.Fetch("t", TopicId(2, "t"), offset);
    ASSERT_EQ(f.error_code, ErrorCode::kNone);
    const int64_t n = Fetcher::Records(f);
    ASSERT_GT(n, 0);
    std::span<const uint8_t> b = f.records.inline_bytes.value_or(std::span<const uint8_t>());
    all.append(b.begin(), b.end());
    offset += n;
  }
  for (const std::string& v : acked) EXPECT_NE(all.find(v), std::string::npos) << v;
  // The old leader comes back as a follower, catches up and rejoins the ISR.
  node(1).Start();
  ASSERT_TRUE(node(1)
                  .replicas->BecomeFollower("t", 0, l.leader_epoch, 2, "127.0.0.1", node(2).port())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return StoredIsr("t") == std::vector<int32_t>{1, 2, 3}; }));
  EXPECT_EQ(node(1).View("t").log_end, 90);
  EXPECT_EQ(node(1).View("t").epochs, node(2).View("t").epochs);
  EXPECT_EQ(node(3).View("t").epochs, node(2).View("t").epochs);
}

// 0018 review item 6: while a partition has no leader, a replica here stays open as a
// follower of no one, and the next leadership keeps its log and in-memory high watermark
// (with no checkpoint written, a reopened log would have taken its whole end as committed).
TEST_F(ReplicaTest, AFollowerOfNoOneKeepsItsHighWatermarkForTheNextLeadership) {
  MakeNodes(3, "t");
  for (auto& n : nodes_) n->replica_options.hw_checkpoint_interval_ms = 0;
  for (int i = 1; i <= 3; ++i) node(i).Start();
  LeaderAndIsr l = Elect("t", 0, 1, {1, 2, 3}, std::vector<int32_t>{1, 2, 3});
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 2, 1000), -1).error_code, ErrorCode::kNone);
  ASSERT_TRUE(WaitUntil([&] { return node(2).View("t").high_watermark == 2; }));
  // Follower 3 goes: an acks=1 batch reaches follower 2 but is not committed.
  node(3).Stop();
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("b", 3, 1000), 1).error_code, ErrorCode::kNone);
  ASSERT_TRUE(WaitUntil([&] { return node(2).View("t").log_end == 5; }));
  EXPECT_EQ(node(1).View("t").high_watermark, 2);
  node(1).Stop();  // the leader dies; no leader is elected yet
  ASSERT_TRUE(node(2).replicas->BecomeFollower("t", 0, l.leader_epoch, -1, "", 0).ok());
  EXPECT_FALSE(node(2).replicas->HasFetcherFor(1));
  auto v = node(2).View("t");
  EXPECT_EQ(v.role, ReplicaRole::kFollower);
  EXPECT_EQ(v.log_end, 5);
  EXPECT_EQ(v.high_watermark, 2);
  {
    Client c2(node(2).port());
    EXPECT_EQ(Produce(c2, "t", testing::ValueBatch("x", 1, 1000), 1).error_code,
              ErrorCode::kNotLeaderOrFollower);
  }
  // Elected with follower 3 still in the ISR: the high watermark is the one it had.
  Elect("t", 0, 2, {1, 2, 3}, std::vector<int32_t>{2, 3});
  v = node(2).View("t");
  EXPECT_EQ(v.role, ReplicaRole::kLeader);
  EXPECT_EQ(v.high_watermark, 2);
  EXPECT_EQ(v.log_end, 5);
}

TEST_F(ReplicaTest, AStaleLeaderCannotAcknowledgeAcksAll) {
  // Decision 4: a leader cut off from the controller goes on believing it leads epoch 1.
  MakeNodes(3, "t");
  for (auto& n : nodes_) n->replica_options.replica_lag_time_max_ms = 200;
  for (int i = 1; i <= 3; ++i) node(i).Start();
  Elect("t", 0, 1, {1, 2, 3}, std::vector<int32_t>{1, 2, 3});
  Client c1(node(1).port());
  ASSERT_EQ(Produce(c1, "t", testing::ValueBatch("a", 2, 1000), -1).error_code, ErrorCode::kNone);
  // The controller elects node 2 in epoch 2; node 1 is not told.
  LeaderAndIsr l2 = store_.Elect("t", 0, 2, {1, 2, 3}, std::vector<int32_t>{2, 3});
  ASSERT_TRUE(node(2).replicas->BecomeLeader("t", 0, LeaderFor(l2, 2)).ok());
  ASSERT_TRUE(node(3)
                  .replicas->BecomeFollower("t", 0, l2.leader_epoch, 2, "127.0.0.1", node(2).port())
                  .ok());
  // Node 1 still appends, but no follower fetches from it any more: its high watermark
  // stays, and its attempt to drop them from the ISR is refused by the store (fenced).
  auto stale = Produce(c1, "t", testing::ValueBatch("stale", 1, 1000), -1, /*timeout_ms=*/600);
  EXPECT_EQ(stale.error_code, ErrorCode::kRequestTimedOut);
  EXPECT_EQ(node(1).View("t").high_watermark, 2);
  EXPECT_EQ(Sorted(node(1).View("t").isr), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(StoredIsr("t"), (std::vector<int32_t>{2, 3}));
  // The new leader takes acks=all writes in epoch 2.
  Client c2(node(2).port());
  auto r = Produce(c2, "t", testing::ValueBatch("b", 1, 1000), -1);
  ASSERT_EQ(r.error_code, ErrorCode::kNone);
  EXPECT_EQ(r.base_offset, 2);
  // Told at last, node 1 follows and loses its unacknowledged record.
  ASSERT_TRUE(node(1)
                  .replicas->BecomeFollower("t", 0, l2.leader_epoch, 2, "127.0.0.1", node(2).port())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] {
    auto v = node(1).View("t");
    return v.log_end == 3 && v.epochs == node(2).View("t").epochs;
  }));
}

TEST_F(ReplicaTest, NewLeaderTruncatesTheOldLeadersDivergedTail) {
  StartCluster(2);
  {
    Client c(node(1).port());
    ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 3, 1000), -1).error_code, ErrorCode::kNone);
  }
  // The follower is cut off; the leader appends a tail no one else has (acks=1).
  node(2).Stop();
  {
    Client c(node(1).port());
    ASSERT_EQ(Produce(c, "t", testing::ValueBatch("lost", 2, 1000), 1).error_code,
              ErrorCode::kNone);
  }
  EXPECT_EQ(node(1).View("t").log_end, 5);
  // The leader dies; the follower is elected (its ISR) and takes new writes.
  node(1).Stop();
  node(2).Start();
  LeaderAndIsr l2 = Elect("t", 0, 2, {1, 2}, std::vector<int32_t>{2});
  {
    Client c(node(2).port());
    auto r = Produce(c, "t", testing::ValueBatch("new", 4, 1000), -1);
    ASSERT_EQ(r.error_code, ErrorCode::kNone);
    EXPECT_EQ(r.base_offset, 3);
  }
  // The old leader returns as a follower: its tail in epoch 1 past offset 3 goes, and
  // it takes epoch 2's records from the new leader.
  node(1).Start();
  ASSERT_TRUE(node(1)
                  .replicas->BecomeFollower("t", 0, l2.leader_epoch, 2, "127.0.0.1", node(2).port())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").log_end == 7; }));
  auto v1 = node(1).View("t");
  auto v2 = node(2).View("t");
  EXPECT_EQ(v1.epochs, v2.epochs);
  ASSERT_EQ(v2.epochs.size(), 2u);
  EXPECT_EQ(v2.epochs[1], (LeaderEpochCache::Entry{l2.leader_epoch, 3}));
  ASSERT_TRUE(WaitUntil([&] {
    return Sorted(node(2).View("t").isr) == std::vector<int32_t>{1, 2};
  }));
  // Byte for byte: make node 1 the leader again and read everything from it.
  Elect("t", 0, 1, {1, 2}, std::nullopt);
  const kafka::Uuid id = TopicId(1, "t");
  Fetcher consumer(node(1).port());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").high_watermark == 7; }));
  auto f = consumer.Fetch("t", id, 0);
  ASSERT_EQ(f.error_code, ErrorCode::kNone);
  EXPECT_EQ(Fetcher::Records(f), 7);
  std::span<const uint8_t> b = f.records.inline_bytes.value_or(std::span<const uint8_t>());
  std::string text(b.begin(), b.end());
  EXPECT_EQ(text.find("lost-"), std::string::npos);
  EXPECT_NE(text.find("new-3"), std::string::npos);
}

TEST_F(ReplicaTest, ALiveLeaderDemotedWithADivergedTailTruncatesIt) {
  StartCluster(2);
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 3, 1000), -1).error_code, ErrorCode::kNone);
  node(2).Stop();
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("lost", 2, 1000), 1).error_code, ErrorCode::kNone);
  node(2).Start();
  // Node 1 is still running when the controller moves the leadership: it becomes a
  // follower of node 2 at once, with two records node 2 never had.
  LeaderAndIsr l = Elect("t", 0, 2, {1, 2}, std::vector<int32_t>{2});
  EXPECT_EQ(node(1).View("t").role, ReplicaRole::kFollower);
  Client c2(node(2).port());
  auto r = Produce(c2, "t", testing::ValueBatch("new", 4, 1000), -1);
  ASSERT_EQ(r.error_code, ErrorCode::kNone);
  EXPECT_EQ(r.base_offset, 3);
  ASSERT_TRUE(WaitUntil([&] {
    auto v = node(1).View("t");
    return v.log_end == 7 && v.epochs == node(2).View("t").epochs;
  }));
  ASSERT_TRUE(WaitUntil([&] { return StoredIsr("t") == std::vector<int32_t>{1, 2}; }));
  EXPECT_EQ(node(2).View("t").epochs.back(), (LeaderEpochCache::Entry{l.leader_epoch, 3}));
}

TEST_F(ReplicaTest, AFollowerBehindTheLeadersLogStartStartsThere) {
  MakeNodes(2, "t");
  node(1).Start();
  LeaderAndIsr l = Elect("t", 0, 1, {1, 2}, std::vector<int32_t>{1});
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 3, 1000), -1).error_code, ErrorCode::kNone);
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("b", 2, 1000), -1).error_code, ErrorCode::kNone);
  kafka::DeleteRecordsRequest del;
  del.topics.push_back({"t", {{0, 3, {}}}, {}});
  del.timeout_ms = 5000;
  auto deleted = c.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 2, del);
  ASSERT_EQ(deleted.topics.size(), 1u);
  ASSERT_EQ(deleted.topics[0].partitions[0].error_code, ErrorCode::kNone);
  // A new follower with an empty log: offset 0 is below the leader's start, so it starts
  // at 3 and takes "b".
  node(2).Start();
  ASSERT_TRUE(node(2)
                  .replicas->BecomeFollower("t", 0, l.leader_epoch, 1, "127.0.0.1", node(1).port())
                  .ok());
  ASSERT_TRUE(WaitUntil([&] { return node(2).View("t").log_end == 5; }));
  ASSERT_TRUE(WaitUntil([&] { return StoredIsr("t") == std::vector<int32_t>{1, 2}; }));
  // Its own log starts there too (Kafka's truncateFullyAndStartAt), across a restart.
  EXPECT_EQ(node(2).View("t").log_start, 3);
  node(2).Stop();
  node(2).Start();
  EXPECT_EQ(node(2).View("t").log_start, 3);
  EXPECT_EQ(node(2).View("t").log_end, 5);
}

// DeleteRecords on a replicated leader is bounded by the replicated high watermark, is
// refused by a follower, and reaches the followers through the log start in Fetch answers.
TEST_F(ReplicaTest, DeleteRecordsUsesTheReplicatedHighWatermarkAndReachesFollowers) {
  StartCluster(2);
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 5, 1000), -1).error_code, ErrorCode::kNone);
  auto delete_before = [](Client& client, int64_t offset) {
    kafka::DeleteRecordsRequest del;
    del.topics.push_back({"t", {{0, offset, {}}}, {}});
    del.timeout_ms = 5000;
    auto resp = client.Call<kafka::DeleteRecordsResponse>(ApiKey::kDeleteRecords, 2, del);
    EXPECT_EQ(resp.topics.size(), 1u);
    return resp.topics.empty() ? kafka::DeleteRecordsResponse::Partition{}
                               : resp.topics[0].partitions.at(0);
  };
  auto d = delete_before(c, 3);
  ASSERT_EQ(d.error_code, ErrorCode::kNone);
  EXPECT_EQ(d.low_watermark, 3);
  ASSERT_TRUE(WaitUntil([&] { return node(2).View("t").log_start == 3; }));
  EXPECT_EQ(node(2).View("t").log_end, 5);
  {
    Client f(node(2).port());
    EXPECT_EQ(delete_before(f, 4).error_code, ErrorCode::kNotLeaderOrFollower);
  }
  // The follower goes: two records are written (acks=1) but not committed. The log's own
  // durable end is 7; the replicated high watermark is 5, and bounds DeleteRecords.
  node(2).Stop();
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("b", 2, 1000), 1).error_code, ErrorCode::kNone);
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").durable_end == 7; }));
  EXPECT_EQ(delete_before(c, 6).error_code, ErrorCode::kOffsetOutOfRange);
  d = delete_before(c, -1);  // the high watermark
  EXPECT_EQ(d.error_code, ErrorCode::kNone);
  EXPECT_EQ(d.low_watermark, 5);
}

TEST_F(ReplicaTest, IdempotentSequencesHoldOnTheNewLeader) {
  StartCluster(2);
  const int64_t pid = 4242;
  {
    Client c(node(1).port());
    ASSERT_EQ(Produce(c, "t", Idempotent("x", pid, 0, 0), -1).error_code, ErrorCode::kNone);
    auto r = Produce(c, "t", Idempotent("y", pid, 0, 1), -1);
    ASSERT_EQ(r.error_code, ErrorCode::kNone);
    EXPECT_EQ(r.base_offset, 1);
  }
  Elect("t", 0, 2, {1, 2}, std::nullopt);
  Client c(node(2).port());
  // A retry of sequence 1 (its answer lost with the old leader) is a duplicate here.
  auto dup = Produce(c, "t", Idempotent("y", pid, 0, 1), -1);
  EXPECT_EQ(dup.error_code, ErrorCode::kNone);
  EXPECT_EQ(dup.base_offset, 1);
  // A gap before the producer wrote anything in this leadership may be batches still at
  // the old leader: a retriable refusal (ProducerStateTable::TakeEarlyGap).
  EXPECT_EQ(Produce(c, "t", Idempotent("z", pid, 0, 3), -1).error_code,
            ErrorCode::kNotLeaderOrFollower);
  auto next = Produce(c, "t", Idempotent("z", pid, 0, 2), -1);
  EXPECT_EQ(next.error_code, ErrorCode::kNone);
  EXPECT_EQ(next.base_offset, 2);
  // Once it wrote here, a gap is its own.
  EXPECT_EQ(Produce(c, "t", Idempotent("z", pid, 0, 5), -1).error_code,
            ErrorCode::kOutOfOrderSequenceNumber);
  // The old leader, now a follower, refuses writes and consumer reads.
  Client old(node(1).port());
  EXPECT_EQ(Produce(old, "t", Idempotent("w", pid, 0, 3), 1).error_code,
            ErrorCode::kNotLeaderOrFollower);
  Fetcher consumer(node(1).port());
  EXPECT_EQ(consumer.Fetch("t", TopicId(1, "t"), 0).error_code, ErrorCode::kNotLeaderOrFollower);
}

// Clients learn of a new leader from any broker's metadata, which may name it before it
// has taken the role: its first batch is refused there (NOT_LEADER_OR_FOLLOWER), and the
// ones pipelined behind it arrive once it leads. They get the same refusal, not
// OUT_OF_ORDER_SEQUENCE_NUMBER (which librdkafka answers by bumping its epoch and
// renumbering every batch it holds, duplicating those an old leader wrote), and the
// client's resend in order is written in order.
TEST_F(ReplicaTest, BatchesBehindOneRefusedBeforeTheLeadershipGetTheSameRefusal) {
  StartCluster(2);
  const int64_t pid = 4343;
  {
    Client c(node(1).port());
    ASSERT_EQ(Produce(c, "t", Idempotent("x", pid, 0, 0), -1).error_code, ErrorCode::kNone);
  }
  ASSERT_TRUE(WaitUntil([&] { return node(2).View("t").log_end == 1; }));
  Client c(node(2).port());
  // Still a follower: sequence 1 is refused.
  EXPECT_EQ(Produce(c, "t", Idempotent("y", pid, 0, 1), -1).error_code,
            ErrorCode::kNotLeaderOrFollower);
  Elect("t", 0, 2, {1, 2}, std::nullopt);
  // Leading now: sequence 2, sent behind 1, gets 1's answer.
  EXPECT_EQ(Produce(c, "t", Idempotent("z", pid, 0, 2), -1).error_code,
            ErrorCode::kNotLeaderOrFollower);
  // The resend in order.
  auto one = Produce(c, "t", Idempotent("y", pid, 0, 1), -1);
  EXPECT_EQ(one.error_code, ErrorCode::kNone);
  EXPECT_EQ(one.base_offset, 1);
  auto two = Produce(c, "t", Idempotent("z", pid, 0, 2), -1);
  EXPECT_EQ(two.error_code, ErrorCode::kNone);
  EXPECT_EQ(two.base_offset, 2);
  // A gap with nothing refused before it is out of order, as ever.
  EXPECT_EQ(Produce(c, "t", Idempotent("w", pid, 0, 5), -1).error_code,
            ErrorCode::kOutOfOrderSequenceNumber);
}

TEST_F(ReplicaTest, MalformedReplicaFetchesGetKafkasErrors) {
  LeaderAndIsr l = StartCluster(2);
  const kafka::Uuid id = TopicId(1, "t");
  {
    Client c(node(1).port());
    ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 3, 1000), -1).error_code, ErrorCode::kNone);
  }
  Fetcher f(node(1).port());
  const int32_t e = l.leader_epoch;
  // Not one of the replicas: UNKNOWN_LEADER_EPOCH with an epoch, NOT_LEADER_OR_FOLLOWER
  // without.
  EXPECT_EQ(f.Fetch("t", id, 0, {.replica = 9, .current_leader_epoch = e}).error_code,
            ErrorCode::kUnknownLeaderEpoch);
  EXPECT_EQ(f.Fetch("t", id, 0, {.replica = 9}).error_code, ErrorCode::kNotLeaderOrFollower);
  // The leader itself is no follower.
  EXPECT_EQ(f.Fetch("t", id, 0, {.replica = 1}).error_code, ErrorCode::kNotLeaderOrFollower);
  // Stale and future epochs.
  EXPECT_EQ(f.Fetch("t", id, 0, {.replica = 2, .current_leader_epoch = e - 1}).error_code,
            ErrorCode::kFencedLeaderEpoch);
  EXPECT_EQ(f.Fetch("t", id, 0, {.replica = 2, .current_leader_epoch = e + 1}).error_code,
            ErrorCode::kUnknownLeaderEpoch);
  // An older registration of the follower (its broker epoch went up since).
  EXPECT_EQ(
      f.Fetch("t", id, 0, {.replica = 2, .replica_epoch = 1, .current_leader_epoch = e}).error_code,
      ErrorCode::kNotLeaderOrFollower);
  // Past the leader's end; an epoch the leader never had.
  EXPECT_EQ(f.Fetch("t", id, 99, {.replica = 2, .replica_epoch = 102, .current_leader_epoch = e})
                .error_code,
            ErrorCode::kOffsetOutOfRange);
  EXPECT_EQ(f.Fetch("t", id, 3,
                    {.replica = 2,
                     .replica_epoch = 102,
                     .current_leader_epoch = e,
                     .last_fetched_epoch = e + 5})
                .error_code,
            ErrorCode::kOffsetOutOfRange);
  // A diverging epoch: the follower claims epoch 0 up to offset 3, the leader's epoch 0
  // ended at 0.
  auto d = f.Fetch(
      "t", id, 3,
      {.replica = 2, .replica_epoch = 102, .current_leader_epoch = e, .last_fetched_epoch = 0});
  EXPECT_EQ(d.error_code, ErrorCode::kNone);
  EXPECT_EQ(d.diverging_epoch.epoch, 0);
  EXPECT_EQ(d.diverging_epoch.end_offset, 0);
  EXPECT_EQ(Fetcher::Records(d), 0);
  // A well-formed one is served, with the leader's high watermark.
  auto ok = f.Fetch("t", id, 0, {.replica = 2, .replica_epoch = 102, .current_leader_epoch = e});
  EXPECT_EQ(ok.error_code, ErrorCode::kNone);
  EXPECT_EQ(Fetcher::Records(ok), 3);
  EXPECT_EQ(ok.high_watermark, 3);
  // Replica fetches to the follower are refused.
  Fetcher to_follower(node(2).port());
  EXPECT_EQ(to_follower.Fetch("t", TopicId(2, "t"), 0, {.replica = 1, .current_leader_epoch = e})
                .error_code,
            ErrorCode::kNotLeaderOrFollower);
}

TEST_F(ReplicaTest, SingleNodePartitionsRefuseReplicaFetches) {
  MakeNodes(1, "t");
  node(1).Start();
  Client c(node(1).port());
  ASSERT_EQ(Produce(c, "t", testing::ValueBatch("a", 2, 1000), -1).error_code, ErrorCode::kNone);
  Fetcher f(node(1).port());
  EXPECT_EQ(f.Fetch("t", TopicId(1, "t"), 0, {.replica = 2}).error_code,
            ErrorCode::kNotLeaderOrFollower);
  // Consumers read it as ever.
  auto ok = f.Fetch("t", TopicId(1, "t"), 0);
  EXPECT_EQ(ok.error_code, ErrorCode::kNone);
  EXPECT_EQ(Fetcher::Records(ok), 2);
}

}  // namespace
}  // namespace replica_test
}  // namespace sluice::broker
