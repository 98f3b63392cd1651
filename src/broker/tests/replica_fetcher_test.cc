// ReplicaFetcher against a fake leader on 127.0.0.1 that answers with crafted bytes:
// what a follower does with malformed answers (bad CRC, a negative or oversized batch
// length, a truncated frame, a wrong correlation id, garbage) — nothing is appended and
// the fetcher carries on — and that a good answer after them is appended with the
// leader's offsets and epoch; and that under the durable policy a follower reports as its
// end only what it has synced, also after an answer that failed half-way.
#include "broker/replica_fetcher.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <thread>

#include "broker/tests/replica_test_util.h"
#include "kafka/protocol/header.h"
#include "kafka/protocol/records.h"
#include "storage/batch_header.h"
#include "storage/testing/fault_env.h"

namespace sluice::broker {
namespace replica_fetcher_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Bytes;
using testing::WaitUntil;

// A leader that reads each request frame and answers with what `answer` makes of it.
// Every fetch request it decodes is kept.
class FakeLeader {
 public:
  // The bytes to send (none: close at once) and whether to close after them.
  struct Reply {
    Bytes bytes;
    bool close_after = false;
  };
  using Answer = std::function<Reply(const kafka::RequestHeader&, const kafka::FetchRequest&)>;
  explicit FakeLeader(Answer answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeLeader() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    {
      std::lock_guard lock(mu_);
      if (conn_ >= 0) ::shutdown(conn_, SHUT_RDWR);
    }
    thread_.join();
  }
  uint16_t port() const { return port_; }
  int requests() const { return requests_.load(); }
  int connections() const { return connections_.load(); }
  kafka::FetchRequest last() {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  void Run() {
    while (!stop_) {
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      ++connections_;
      {
        std::lock_guard lock(mu_);
        conn_ = c;
      }
      Serve(c);
      {
        std::lock_guard lock(mu_);
        conn_ = -1;
      }
      ::close(c);
    }
  }
  bool ReadN(int c, size_t n, Bytes* out) {
    out->resize(n);
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::recv(c, out->data() + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }
  void Serve(int c) {
    for (;;) {
      Bytes size, frame;
      if (!ReadN(c, 4, &size)) return;
      if (!ReadN(c, storage::LoadBE32(size.data()), &frame)) return;
      kafka::Reader r(frame);
      auto h = kafka::DecodeRequestHeader(r);
      kafka::FetchRequest req;
      if (!h.ok() || !req.Decode(r, h->api_version).ok()) return;
      {
        std::lock_guard lock(mu_);
        last_ = req;
      }
      ++requests_;
      Reply out = answer_(*h, req);
      if (out.bytes.empty()) return;  // close the connection
      if (::send(c, out.bytes.data(), out.bytes.size(), MSG_NOSIGNAL) !=
              static_cast<ssize_t>(out.bytes.size()) ||
          out.close_after)
        return;
    }
  }

  Answer answer_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0}, connections_{0};
  std::mutex mu_;
  int conn_ = -1;             // guarded by mu_
  kafka::FetchRequest last_;  // guarded by mu_
  std::thread thread_;
};

// A Fetch v15 response frame (size included) with one partition's answer `p`.
Bytes EncodeFetchAnswer(int32_t correlation_id, const kafka::Uuid& topic_id,
                        const kafka::FetchResponse::PartitionData& p) {
  kafka::FetchResponse resp;
  kafka::FetchResponse::FetchableTopicResponse t;
  t.topic_id = topic_id;
  t.partitions.push_back(p);
  resp.responses.push_back(t);
  Bytes out(4);
  kafka::Writer w(&out);
  kafka::EncodeResponseHeader(w, ApiKey::kFetch, 15, correlation_id);
  resp.Encode(w, 15);
  storage::StoreBE32(out.data(), static_cast<uint32_t>(out.size() - 4));
  return out;
}

// A Fetch v15 response frame (size included) for one partition with `records`.
Bytes FetchAnswer(int32_t correlation_id, const kafka::Uuid& topic_id, const Bytes& records,
                  int64_t hw) {
  kafka::FetchResponse::PartitionData p;
  p.partition_index = 0;
  p.high_watermark = hw;
  p.last_stable_offset = hw;
  p.log_start_offset = 0;
  p.records = kafka::RecordsRef::Inline(std::span<const uint8_t>(records));
  return EncodeFetchAnswer(correlation_id, topic_id, p);
}

// A Fetch v15 response frame for one partition answered with `error`.
Bytes FetchErrorAnswer(int32_t correlation_id, const kafka::Uuid& topic_id,
                       kafka::ErrorCode error) {
  kafka::FetchResponse::PartitionData p;
  p.partition_index = 0;
  p.error_code = error;
  p.high_watermark = -1;
  p.last_stable_offset = -1;
  p.log_start_offset = -1;
  p.records = kafka::RecordsRef::Inline(std::span<const uint8_t>());
  return EncodeFetchAnswer(correlation_id, topic_id, p);
}

// A batch of `n` records as a leader stored it: at `base`, in `epoch`.
Bytes LeaderBatch(int n, int64_t base, int32_t epoch) {
  Bytes b = testing::ValueBatch("r", n, 1000);
  storage::AssignOffsets(b, base, epoch);
  return b;
}

class ReplicaFetcherTest : public testing::ReplicaClusterFixture {};

TEST_F(ReplicaFetcherTest, MalformedLeaderAnswersAppendNothingThenAGoodOneIsAppended) {
  MakeNodes(1, "t");
  node(1).Start();
  const kafka::Uuid id = node(1).broker->Snapshot()->Find("t")->info.id;
  std::atomic<int> step{0};
  FakeLeader leader(
      [&](const kafka::RequestHeader& h, const kafka::FetchRequest& req) -> FakeLeader::Reply {
        const int s = step.fetch_add(1);
        Bytes good = LeaderBatch(3, 0, 4);
        switch (s) {
          case 0: {  // a flipped record byte: the CRC does not match
            Bytes bad = good;
            bad.back() ^= 0x01;
            return {FetchAnswer(h.correlation_id, id, bad, 3)};
          }
          case 1: {  // a negative batch length
            Bytes bad = good;
            storage::StoreBE32(bad.data() + 8, 0xfffffff0u);
            return {FetchAnswer(h.correlation_id, id, bad, 3)};
          }
          case 2: {  // a batch longer than the records: a partial batch, left for later
            Bytes bad = good;
            storage::StoreBE32(bad.data() + 8, static_cast<uint32_t>(bad.size() * 4));
            return {FetchAnswer(h.correlation_id, id, bad, 3)};
          }
          case 3: {  // the wrong correlation id
            return {FetchAnswer(h.correlation_id + 1, id, good, 3)};
          }
          case 4: {  // a frame cut short, then the connection closes
            Bytes cut = FetchAnswer(h.correlation_id, id, good, 3);
            cut.resize(cut.size() / 2);
            return {cut, /*close_after=*/true};
          }
          case 5: {  // garbage with a huge size
            return {Bytes{0x7f, 0xff, 0xff, 0xff, 1, 2, 3}};
          }
          case 6:
            return {};  // just close
          default:
            return {FetchAnswer(h.correlation_id, id, good, 3)};
        }
      });
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 4, 7, "127.0.0.1", leader.port()).ok());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").log_end == 3; }));
  EXPECT_GE(step.load(), 8);
  EXPECT_GE(leader.connections(), 3);  // the fetcher reconnected after each broken frame
  auto v = node(1).View("t");
  EXPECT_EQ(v.epochs.back(), (LeaderEpochCache::Entry{4, 0}));
  // The fetcher asks on from the end, as replica 1 of epoch 4 with its last epoch.
  ASSERT_TRUE(WaitUntil([&] {
    return leader.last().topics.size() == 1 &&
           leader.last().topics[0].partitions[0].fetch_offset == 3;
  }));
  kafka::FetchRequest last = leader.last();
  EXPECT_EQ(last.replica_state.replica_id, 1);
  EXPECT_EQ(last.replica_state.replica_epoch, 101);
  EXPECT_EQ(last.topics[0].topic_id, id);
  EXPECT_EQ(last.topics[0].partitions[0].current_leader_epoch, 4);
  EXPECT_EQ(last.topics[0].partitions[0].last_fetched_epoch, 4);
  // The follower's high watermark is the leader's.
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").high_watermark == 3; }));
}

TEST_F(ReplicaFetcherTest, ABatchBelowTheLogEndIsSkippedNotAppendedTwice) {
  MakeNodes(1, "t");
  node(1).Start();
  const kafka::Uuid id = node(1).broker->Snapshot()->Find("t")->info.id;
  FakeLeader leader(
      [&](const kafka::RequestHeader& h, const kafka::FetchRequest& req) -> FakeLeader::Reply {
        // Always the whole log, whatever was asked: the follower keeps only what is new.
        Bytes all = LeaderBatch(2, 0, 1);
        Bytes second = LeaderBatch(3, 2, 1);
        all.insert(all.end(), second.begin(), second.end());
        return {FetchAnswer(h.correlation_id, id, all, 5)};
      });
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 1, 7, "127.0.0.1", leader.port()).ok());
  ASSERT_TRUE(WaitUntil([&] { return leader.requests() >= 5; }));
  EXPECT_EQ(node(1).View("t").log_end, 5);
}

// A leader whose listener never completes a handshake (its accept queue is full, so the
// kernel drops the SYNs): Stop ends the fetcher's connect in progress instead of waiting
// for the kernel's SYN timeout (minutes) or replica.socket.timeout.ms.
TEST_F(ReplicaFetcherTest, StopEndsAConnectThatNeverCompletes) {
  MakeNodes(1, "t");
  node(1).replica_options.socket_timeout_ms = 600'000;
  node(1).Start();
  const kafka::Uuid id = node(1).broker->Snapshot()->Find("t")->info.id;
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  socklen_t len = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  // One connection fills the queue, never accepted.
  int filler = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_EQ(::connect(filler, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  // The premise: a further connect stays in progress.
  int probe = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_NE(::connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(errno, EINPROGRESS);
  pollfd pf{probe, POLLOUT, 0};
  ASSERT_EQ(::poll(&pf, 1, 300), 0) << "the kernel completed a connect to a full queue";
  ::close(probe);

  auto fetcher =
      std::make_unique<ReplicaFetcher>(node(1).replicas.get(), 2, "127.0.0.1", ntohs(a.sin_port));
  ReplicaFetcher::Start start;
  start.topic_id = id;
  start.leader_epoch = 1;
  fetcher->Add({"t", 0}, start);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into its connect
  auto stopped = std::async(std::launch::async, [&] { fetcher->Stop(); });
  // Well below the kernel's SYN timeout and the 600 s socket timeout.
  EXPECT_EQ(stopped.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  stopped.wait();
  ::close(filler);
  ::close(listener);
}

// Batches whose offsets cannot be appended (straddling the log end, a last offset past
// INT64_MAX) record no leader epoch: the epochs stay those of the appended batches.
TEST_F(ReplicaFetcherTest, ABatchThatCannotBeAppendedRecordsNoEpoch) {
  MakeNodes(1, "t");
  node(1).Start();
  const kafka::Uuid id = node(1).broker->Snapshot()->Find("t")->info.id;
  std::atomic<int> step{0};
  FakeLeader leader(
      [&](const kafka::RequestHeader& h, const kafka::FetchRequest& req) -> FakeLeader::Reply {
        const int s = step.fetch_add(1);
        switch (s) {
          case 0:
            return {FetchAnswer(h.correlation_id, id, LeaderBatch(3, 0, 4), 3)};
          case 1:  // 1..3 in a new epoch, over the end 3: not appendable
            return {FetchAnswer(h.correlation_id, id, LeaderBatch(3, 1, 5), 4)};
          case 2:  // its last offset overflows
            return {FetchAnswer(h.correlation_id, id,
                                LeaderBatch(3, std::numeric_limits<int64_t>::max() - 1, 6), 4)};
          case 3:  // a negative base offset
            return {FetchAnswer(h.correlation_id, id, LeaderBatch(3, -2, 7), 4)};
          default:
            return {FetchAnswer(h.correlation_id, id, LeaderBatch(2, 3, 4), 5)};
        }
      });
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 4, 7, "127.0.0.1", leader.port()).ok());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").log_end == 5; }));
  EXPECT_GE(step.load(), 5);
  auto v = node(1).View("t");
  ASSERT_EQ(v.epochs.size(), 1u);
  EXPECT_EQ(v.epochs.back(), (LeaderEpochCache::Entry{4, 0}));
}

// 0018 review item 7: an answer whose first batch is appended and whose second is
// refused asks for no ack; the next answer brings only what is already here. The end
// the follower then reports must be synced (the leader counts it for acks=all): with
// every fdatasync slowed down, each fetch_offset the leader sees is at most the
// follower's durable end at that moment.
// The nodes' files go through env_, which outlives them (TearDown stops them first).
class ReplicaFetcherSyncTest : public ReplicaFetcherTest {
 protected:
  storage::testing::FaultEnv env_{storage::Env::Posix()};
};

TEST_F(ReplicaFetcherSyncTest, AFollowerReportsOnlySyncedOffsetsAfterAnAnswerFailedHalfWay) {
  storage::testing::FaultEnv& env = env_;
  MakeNodes(1, "t");
  node(1).options.env = &env;
  node(1).Start();
  const kafka::Uuid id = node(1).broker->Snapshot()->Find("t")->info.id;
  const Bytes a = LeaderBatch(3, 0, 4);
  Bytes b_bad = LeaderBatch(2, 3, 4);
  b_bad.back() ^= 0x01;  // its CRC does not match
  Bytes first = a;
  first.insert(first.end(), b_bad.begin(), b_bad.end());
  std::atomic<int> step{0};
  std::atomic<int> reported_end{0};
  std::atomic<int> unsynced_reports{0};
  FakeLeader leader(
      [&](const kafka::RequestHeader& h, const kafka::FetchRequest& req) -> FakeLeader::Reply {
        const int64_t offset = req.topics.at(0).partitions.at(0).fetch_offset;
        const int64_t durable = node(1).View("t").durable_end;
        if (offset > durable) unsynced_reports.fetch_add(1);
        if (offset >= 3) reported_end.store(1);
        if (offset >= 3) return {FetchAnswer(h.correlation_id, id, {}, 3)};
        return {FetchAnswer(h.correlation_id, id, step.fetch_add(1) == 0 ? first : a, 3)};
      });
  env.DelaySyncs(300);
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 4, 7, "127.0.0.1", leader.port()).ok());
  ASSERT_TRUE(WaitUntil([&] { return reported_end.load() == 1; }));
  env.DelaySyncs(0);
  EXPECT_GE(step.load(), 2);  // the half-failed answer, then one with nothing new
  EXPECT_EQ(unsynced_reports.load(), 0);
  EXPECT_EQ(node(1).View("t").log_end, 3);
}

TEST(CheckFetchedBatchTest, RefusesOffsetsThatCannotBeAppended) {
  storage::BatchHeader h{};
  h.base_offset = 10;
  h.last_offset_delta = 4;
  EXPECT_TRUE(replica::CheckFetchedBatch(h, 0).ok());    // past the end: a gap is allowed
  EXPECT_TRUE(replica::CheckFetchedBatch(h, 10).ok());   // at the end
  EXPECT_TRUE(replica::CheckFetchedBatch(h, 15).ok());   // wholly below: already here
  EXPECT_FALSE(replica::CheckFetchedBatch(h, 12).ok());  // straddles
  h.base_offset = std::numeric_limits<int64_t>::max() - 4;
  EXPECT_FALSE(replica::CheckFetchedBatch(h, 0).ok());  // the next offset overflows
  h.base_offset = std::numeric_limits<int64_t>::max() - 5;
  EXPECT_TRUE(replica::CheckFetchedBatch(h, 0).ok());
  h.base_offset = -1;
  EXPECT_FALSE(replica::CheckFetchedBatch(h, 0).ok());
  h.base_offset = 0;
  h.last_offset_delta = -1;
  EXPECT_FALSE(replica::CheckFetchedBatch(h, 0).ok());
}

// A leader that comes back at a new inter-broker address is fetched from there; a
// fetcher whose partitions all moved to another leader is stopped and removed.
TEST_F(ReplicaFetcherTest, ALeadersNewAddressIsFetchedFromAndAnUnusedFetcherGoes) {
  MakeNodes(1, "t");
  node(1).Start();
  const kafka::Uuid id = node(1).broker->Snapshot()->Find("t")->info.id;
  FakeLeader first(
      [&](const kafka::RequestHeader& h, const kafka::FetchRequest&) -> FakeLeader::Reply {
        return {FetchAnswer(h.correlation_id, id, LeaderBatch(3, 0, 4), 3)};
      });
  FakeLeader moved(
      [&](const kafka::RequestHeader& h, const kafka::FetchRequest&) -> FakeLeader::Reply {
        Bytes all = LeaderBatch(3, 0, 4);
        Bytes next = LeaderBatch(2, 3, 5);
        all.insert(all.end(), next.begin(), next.end());
        return {FetchAnswer(h.correlation_id, id, all, 5)};
      });
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 4, 7, "127.0.0.1", first.port()).ok());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").log_end == 3; }));
  // Broker 7 again, in a new epoch, at another port.
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 5, 7, "127.0.0.1", moved.port()).ok());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").log_end == 5; }));
  EXPECT_GE(moved.requests(), 1);
  EXPECT_EQ(node(1).View("t").epochs.back(), (LeaderEpochCache::Entry{5, 3}));
  EXPECT_TRUE(node(1).replicas->HasFetcherFor(7));
  // The partition follows broker 8 now: broker 7's fetcher has nothing left and goes.
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 6, 8, "127.0.0.1", moved.port()).ok());
  EXPECT_FALSE(node(1).replicas->HasFetcherFor(7));
  EXPECT_TRUE(node(1).replicas->HasFetcherFor(8));
  const int moved_requests = moved.requests();
  ASSERT_TRUE(WaitUntil([&] { return moved.requests() > moved_requests; }));
}

// A follower may learn of a new leadership before the leader does (each reads etcd's
// watch on its own): the leader's first answers are NOT_LEADER_OR_FOLLOWER and
// UNKNOWN_LEADER_EPOCH. Right after the role was given they are asked again at once, not
// after replica.fetch.backoff.ms (here ten minutes: the old wait would time the test out).
TEST_F(ReplicaFetcherTest, ALeaderNotYetAwareOfItsRoleIsAskedAgainSoon) {
  MakeNodes(1, "t");
  node(1).replica_options.fetch_backoff_ms = 600'000;
  node(1).Start();
  const kafka::Uuid id = node(1).broker->Snapshot()->Find("t")->info.id;
  std::atomic<int> answered{0};
  FakeLeader leader(
      [&](const kafka::RequestHeader& h, const kafka::FetchRequest&) -> FakeLeader::Reply {
        switch (answered++) {
          case 0:
            return {FetchErrorAnswer(h.correlation_id, id, ErrorCode::kNotLeaderOrFollower)};
          case 1:
            return {FetchErrorAnswer(h.correlation_id, id, ErrorCode::kUnknownLeaderEpoch)};
          default:
            return {FetchAnswer(h.correlation_id, id, LeaderBatch(3, 0, 4), 3)};
        }
      });
  ASSERT_TRUE(node(1).replicas->BecomeFollower("t", 0, 4, 7, "127.0.0.1", leader.port()).ok());
  ASSERT_TRUE(WaitUntil([&] { return node(1).View("t").log_end == 3; }));
  EXPECT_GE(answered.load(), 3);
}

}  // namespace
}  // namespace replica_fetcher_test
}  // namespace sluice::broker
