// Transactions across brokers without a cluster around them (txn_cluster.h,
// inter_broker_sender.h): the inter-broker channel against a fake broker on 127.0.0.1
// answering well and badly (a cut frame, a wrong correlation id, an oversized or negative
// size, a body that does not decode, nobody listening, a stop with requests queued); the
// coordinator's markers sent to the leader the metadata names, written again at the new
// leader after NOT_LEADER_OR_FOLLOWER; a verification asked of another broker's
// coordinator.
#include "broker/txn_cluster.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "broker/txn_coordinator.h"
#include "broker/txn_participants.h"
#include "broker/txn_partition_markers.h"
#include "kafka/protocol/header.h"
#include "storage/batch_header.h"
#include "storage/io_executor.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace txn_cluster_test {
namespace {

using kafka::ErrorCode;

// A broker that answers each request by a script: given the request's header, its body
// and the connection's number (0, 1, ... as they come), the bytes to send back (size
// prefix included) and whether to close the connection after them.
class FakeBroker {
 public:
  struct Reply {
    std::vector<uint8_t> bytes;
    bool close = false;
  };
  using Script = std::function<Reply(const kafka::RequestHeader&, kafka::Reader&, int)>;

  explicit FakeBroker(Script script) : script_(std::move(script)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~FakeBroker() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    {
      std::lock_guard g(mu_);
      for (int fd : conns_) ::shutdown(fd, SHUT_RDWR);
    }
    thread_.join();
    ::close(listen_fd_);
  }
  int32_t port() const { return port_; }
  int connections() const { return accepted_.load(); }
  int requests() const { return requests_.load(); }

  // A well-formed answer: size, response header, `body`.
  template <typename Body>
  static std::vector<uint8_t> Answer(const kafka::RequestHeader& h, const Body& body,
                                     std::optional<int32_t> correlation = std::nullopt) {
    std::vector<uint8_t> out(4);
    kafka::Writer w(&out);
    kafka::EncodeResponseHeader(w, static_cast<kafka::ApiKey>(h.api_key), h.api_version,
                                correlation.value_or(h.correlation_id));
    body.Encode(w, h.api_version);
    storage::StoreBE32(out.data(), static_cast<uint32_t>(out.size() - 4));
    return out;
  }

 private:
  static bool ReadAll(int fd, uint8_t* p, size_t n) {
    while (n > 0) {
      ssize_t r = ::recv(fd, p, n, 0);
      if (r <= 0) return false;
      p += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  void Run() {
    // One connection at a time, as the sender keeps one.
    while (!stopping_) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      const int index = accepted_.fetch_add(1);
      {
        std::lock_guard g(mu_);
        conns_.push_back(fd);
      }
      for (;;) {
        uint8_t size[4];
        if (!ReadAll(fd, size, 4)) break;
        std::vector<uint8_t> frame(storage::LoadBE32(size));
        if (!ReadAll(fd, frame.data(), frame.size())) break;
        kafka::Reader r(frame);
        auto h = kafka::DecodeRequestHeader(r);
        if (!h.ok()) break;
        requests_.fetch_add(1);
        Reply reply = script_(*h, r, index);
        if (!reply.bytes.empty()) {
          (void)::send(fd, reply.bytes.data(), reply.bytes.size(), MSG_NOSIGNAL);
        }
        if (reply.close) break;
      }
      ::close(fd);
      std::lock_guard g(mu_);
      std::erase(conns_, fd);
    }
  }

  Script script_;
  int listen_fd_ = -1;
  int32_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  std::vector<int> conns_;  // guarded by mu_
  std::thread thread_;
};

// WriteTxnMarkers' answer: every partition of the request gets `error`.
kafka::WriteTxnMarkersResponse MarkersAnswer(kafka::Reader& r, int16_t version, ErrorCode error) {
  kafka::WriteTxnMarkersRequest req;
  EXPECT_TRUE(req.Decode(r, version).ok());
  return MarkersAnswerFor(req, error);
}

kafka::WriteTxnMarkersRequest OneMarker() {
  kafka::WriteTxnMarkersRequest req;
  kafka::WriteTxnMarkersRequest::Marker m;
  m.producer_id = 7;
  m.producer_epoch = 1;
  m.transaction_result = true;
  m.topics.push_back({"t", {0, 1}, {}});
  req.markers.push_back(m);
  return req;
}

class InterBrokerChannelTest : public ::testing::Test {
 protected:
  InterBrokerChannelTest() : channel_(Options()) {}
  static InterBrokerChannelOptions Options() {
    InterBrokerChannelOptions o;
    o.name = "test";
    o.node_id = 1;
    o.connect_timeout_ms = 3000;
    o.request_timeout_ms = 3000;
    o.max_response_bytes = 1 << 20;
    return o;
  }
  Result<kafka::WriteTxnMarkersResponse> Send(int32_t port, int32_t node = 2) {
    std::promise<Result<kafka::WriteTxnMarkersResponse>> p;
    channel_.Call<kafka::WriteTxnMarkersRequest, kafka::WriteTxnMarkersResponse>(
        node, "127.0.0.1", port, kafka::ApiKey::kWriteTxnMarkers, 1, OneMarker(),
        [&p](Result<kafka::WriteTxnMarkersResponse> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

  InterBrokerChannel channel_;
};

// The answers a test script gives: the first request of each connection gets `bad` (when
// set), every other one a good answer.
FakeBroker::Script BadThenGood(std::function<FakeBroker::Reply(const kafka::RequestHeader&)> bad) {
  return [bad](const kafka::RequestHeader& h, kafka::Reader& r, int conn) {
    if (conn == 0) return bad(h);
    return FakeBroker::Reply{
        FakeBroker::Answer(h, MarkersAnswer(r, h.api_version, ErrorCode::kNone))};
  };
}

TEST_F(InterBrokerChannelTest, AnAnswerIsDecodedAndTheConnectionKept) {
  FakeBroker fake([](const kafka::RequestHeader& h, kafka::Reader& r, int) {
    EXPECT_EQ(h.api_key, static_cast<int16_t>(kafka::ApiKey::kWriteTxnMarkers));
    EXPECT_EQ(h.client_id.value_or(""), "sluice-test-1");
    return FakeBroker::Reply{
        FakeBroker::Answer(h, MarkersAnswer(r, h.api_version, ErrorCode::kNotLeaderOrFollower))};
  });
  for (int i = 0; i < 3; ++i) {
    auto r = Send(fake.port());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->markers.size(), 1u);
    EXPECT_EQ(r->markers[0].producer_id, 7);
    EXPECT_EQ(
        ErrorsFor({{"t", 0}, {"t", 1}, {"t", 2}}, r->markers[0].topics,
                  ErrorCode::kUnknownServerError),
        (std::vector<ErrorCode>{ErrorCode::kNotLeaderOrFollower, ErrorCode::kNotLeaderOrFollower,
                                ErrorCode::kUnknownServerError}));
  }
  EXPECT_EQ(fake.connections(), 1);
}

TEST_F(InterBrokerChannelTest, ACutFrameFailsAndTheNextRequestConnectsAgain) {
  FakeBroker fake(BadThenGood([](const kafka::RequestHeader& h) {
    std::vector<uint8_t> whole = FakeBroker::Answer(h, kafka::WriteTxnMarkersResponse{});
    whole.resize(whole.size() - 2);  // the size promises two bytes more than come
    return FakeBroker::Reply{whole, /*close=*/true};
  }));
  EXPECT_FALSE(Send(fake.port()).ok());
  auto r = Send(fake.port());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(fake.connections(), 2);
}

TEST_F(InterBrokerChannelTest, AWrongCorrelationIdFailsAndClosesTheConnection) {
  FakeBroker fake(BadThenGood([](const kafka::RequestHeader& h) {
    return FakeBroker::Reply{
        FakeBroker::Answer(h, kafka::WriteTxnMarkersResponse{}, h.correlation_id + 1)};
  }));
  auto bad = Send(fake.port());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("correlation id"), std::string::npos)
      << bad.status().ToString();
  EXPECT_TRUE(Send(fake.port()).ok());
  EXPECT_EQ(fake.connections(), 2);  // the sender closed the first: it may be out of step
}

TEST_F(InterBrokerChannelTest, OversizedAndNegativeSizesFail) {
  for (uint32_t size : {(1u << 20) + 1, 0xFFFFFFFFu}) {
    FakeBroker fake(BadThenGood([size](const kafka::RequestHeader&) {
      std::vector<uint8_t> bytes(4);
      storage::StoreBE32(bytes.data(), size);
      return FakeBroker::Reply{bytes};
    }));
    EXPECT_FALSE(Send(fake.port()).ok()) << size;
    EXPECT_TRUE(Send(fake.port()).ok()) << size;
  }
}

TEST_F(InterBrokerChannelTest, ABodyThatDoesNotDecodeFails) {
  FakeBroker fake(BadThenGood([](const kafka::RequestHeader& h) {
    // A whole frame whose markers array claims more entries than it holds.
    std::vector<uint8_t> out(4);
    kafka::Writer w(&out);
    kafka::EncodeResponseHeader(w, kafka::ApiKey::kWriteTxnMarkers, h.api_version,
                                h.correlation_id);
    w.UnsignedVarint(50);  // compact array of 49 markers, none present
    storage::StoreBE32(out.data(), static_cast<uint32_t>(out.size() - 4));
    return FakeBroker::Reply{out};
  }));
  EXPECT_FALSE(Send(fake.port()).ok());
  EXPECT_TRUE(Send(fake.port()).ok());
  EXPECT_EQ(fake.connections(), 2);
}

TEST_F(InterBrokerChannelTest, NobodyListeningFailsAtOnceAndStopFailsLaterRequests) {
  int32_t port = 0;
  {
    FakeBroker gone(
        [](const kafka::RequestHeader&, kafka::Reader&, int) { return FakeBroker::Reply{}; });
    port = gone.port();
  }
  auto r = Send(port);
  EXPECT_FALSE(r.ok());
  channel_.Stop();
  auto after = Send(port);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), StatusCode::kAborted);
}

TEST_F(InterBrokerChannelTest, StopFailsARequestWaitingForItsAnswer) {
  std::promise<void> asked;
  FakeBroker fake([&asked](const kafka::RequestHeader&, kafka::Reader&, int) {
    asked.set_value();
    return FakeBroker::Reply{};  // never answers
  });
  std::promise<Result<kafka::WriteTxnMarkersResponse>> p;
  channel_.Call<kafka::WriteTxnMarkersRequest, kafka::WriteTxnMarkersResponse>(
      2, "127.0.0.1", fake.port(), kafka::ApiKey::kWriteTxnMarkers, 1, OneMarker(),
      [&p](Result<kafka::WriteTxnMarkersResponse> r) { p.set_value(std::move(r)); });
  asked.get_future().wait();
  channel_.Stop();
  EXPECT_FALSE(p.get_future().get().ok());
}

TEST_F(InterBrokerChannelTest, ANewAddressReplacesTheSenderAndFailsWhatItHeld) {
  std::promise<void> asked;
  FakeBroker silent([&asked](const kafka::RequestHeader&, kafka::Reader&, int) {
    asked.set_value();
    return FakeBroker::Reply{};  // never answers
  });
  FakeBroker moved([](const kafka::RequestHeader& h, kafka::Reader& r, int) {
    return FakeBroker::Reply{
        FakeBroker::Answer(h, MarkersAnswer(r, h.api_version, ErrorCode::kNone))};
  });
  std::promise<Result<kafka::WriteTxnMarkersResponse>> held;
  channel_.Call<kafka::WriteTxnMarkersRequest, kafka::WriteTxnMarkersResponse>(
      2, "127.0.0.1", silent.port(), kafka::ApiKey::kWriteTxnMarkers, 1, OneMarker(),
      [&held](Result<kafka::WriteTxnMarkersResponse> r) { held.set_value(std::move(r)); });
  asked.get_future().wait();
  auto r = Send(moved.port());  // broker 2 at its new address
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(held.get_future().get().ok());
}

// ---------------------------------------------------------------------------------------
// The coordinator's markers through ClusterTxnParticipants

std::shared_ptr<MetadataSnapshot> Snapshot(int32_t leader, int32_t leader_port,
                                           int32_t coordinator = 1) {
  auto meta = std::make_shared<MetadataSnapshot>();
  meta->cluster = true;
  meta->node_id = 1;
  meta->controller_id = 1;
  meta->brokers.push_back({1, "127.0.0.1", 1, "127.0.0.1", 1});
  meta->brokers.push_back({leader, "127.0.0.1", 9, "127.0.0.1", leader_port});
  MetadataSnapshot::Topic t;
  t.info.name = "t";
  t.info.partitions = 2;
  t.leader_epochs.assign(2, 0);
  MetadataSnapshot::Leadership l;
  l.leader = leader;
  l.replicas = {leader, 1};
  l.isr = l.replicas;
  t.partitions.assign(2, l);
  meta->topics["t"] = t;
  // The transaction coordinator of every id: the leader of __transaction_state's one
  // partition (TxnCoordinatorNode), here `coordinator`; none when it is -1.
  MetadataSnapshot::Topic state;
  state.info.name = "__transaction_state";
  state.info.partitions = 1;
  state.leader_epochs.assign(1, 0);
  MetadataSnapshot::Leadership sl;
  sl.leader = coordinator;
  sl.replicas = {1, leader};
  sl.isr = sl.replicas;
  state.partitions.assign(1, sl);
  meta->topics["__transaction_state"] = state;
  return meta;
}

// A TxnCoordinator on a temporary directory writing its markers through `participants`
// (retried every 5 ms), and one committed transaction of id "x" driven through it.
class CommitDriver {
 public:
  CommitDriver(TxnParticipants* participants, int64_t producer_id) {
    TxnCoordinatorOptions o;
    o.dir = dir_.path() + "/__transaction_state-0";
    o.executor = &executor_;
    o.participants = participants;
    o.allocate_producer_id = [producer_id]() -> Result<int64_t> { return producer_id; };
    o.marker_retry_ms = 5;
    auto c = TxnCoordinator::Open(std::move(o));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) coord_ = std::move(*c);
    if (coord_ != nullptr) coord_->StartMarkers();
  }
  ~CommitDriver() {
    if (coord_ != nullptr) {
      EXPECT_TRUE(coord_->Close().ok());
    }
  }
  // Init, the partitions (and `group`'s offsets, when given), EndTxn(commit): the
  // producer, once every answer was kNone.
  std::optional<TxnProducerResult> Commit(std::vector<TopicPartition> partitions,
                                          const std::string& group = "") {
    if (coord_ == nullptr) return std::nullopt;
    auto init = Wait<TxnProducerResult>(
        [&](auto done) { coord_->InitProducerId("x", 60000, -1, -1, done); });
    if (init.error != ErrorCode::kNone) return std::nullopt;
    auto added = Wait<ErrorCode>([&](auto done) {
      coord_->AddPartitions("x", init.producer_id, init.producer_epoch, partitions, done);
    });
    if (added != ErrorCode::kNone) return std::nullopt;
    if (!group.empty() && Wait<ErrorCode>([&](auto done) {
                            coord_->AddOffsets("x", init.producer_id, init.producer_epoch, group,
                                               done);
                          }) != ErrorCode::kNone) {
      return std::nullopt;
    }
    auto ended = Wait<TxnProducerResult>(
        [&](auto done) { coord_->EndTxn("x", init.producer_id, init.producer_epoch, true, done); });
    if (ended.error != ErrorCode::kNone) return std::nullopt;
    return init;
  }
  // Polls until "x" is CompleteCommit (its markers and record complete asynchronously).
  bool Completed() {
    for (int i = 0; i < 2000; ++i) {
      auto r = coord_->Find("x");
      if (r && r->state == TxnState::kCompleteCommit) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  std::optional<TxnRecord> Find() { return coord_->Find("x"); }

 private:
  template <class R, class F>
  static R Wait(F start) {
    std::promise<R> p;
    start([&p](R r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }

  storage::testing::TempDir dir_{"txn-cluster-test"};
  storage::IoExecutor executor_{2};
  std::unique_ptr<TxnCoordinator> coord_;
};

// Groups are not part of these tests: answered at once.
class NoGroups : public TxnParticipants {
 public:
  void WritePartitionMarkers(const TxnMarker&, std::vector<TopicPartition> partitions,
                             std::function<void(std::vector<ErrorCode>)> done) override {
    done(std::vector<ErrorCode>(partitions.size(), ErrorCode::kUnknownServerError));
  }
  void CompleteGroupOffsets(const TxnMarker&, std::vector<std::string> groups,
                            std::function<void(std::vector<ErrorCode>)> done) override {
    done(std::vector<ErrorCode>(groups.size(), ErrorCode::kNone));
  }
};

TEST(ClusterTxnParticipantsTest, AMarkerRefusedByAnOldLeaderIsWrittenAtTheNewOne) {
  MetadataPublisher publisher("127.0.0.1", 1);
  Shards shards(&publisher);
  std::atomic<int> old_asked{0};
  std::vector<kafka::WriteTxnMarkersRequest> written;
  std::mutex mu;
  FakeBroker new_leader([&](const kafka::RequestHeader& h, kafka::Reader& r, int) {
    kafka::WriteTxnMarkersRequest req;
    EXPECT_TRUE(req.Decode(r, h.api_version).ok());
    {
      std::lock_guard g(mu);
      written.push_back(req);
    }
    return FakeBroker::Reply{FakeBroker::Answer(h, MarkersAnswerFor(req, ErrorCode::kNone))};
  });
  FakeBroker old_leader([&](const kafka::RequestHeader& h, kafka::Reader& r, int) {
    // Not the leader any more: the metadata names the new one from now on.
    if (old_asked.fetch_add(1) == 0) publisher.Publish(Snapshot(3, new_leader.port()));
    return FakeBroker::Reply{
        FakeBroker::Answer(h, MarkersAnswer(r, h.api_version, ErrorCode::kNotLeaderOrFollower))};
  });
  publisher.Publish(Snapshot(2, old_leader.port()));

  InterBrokerChannelOptions co;
  co.name = "txn-markers";
  co.node_id = 1;
  InterBrokerChannel channel(co);
  NoGroups groups;
  ClusterTxnParticipants participants(&shards, &channel, &groups);
  CommitDriver driver(&participants, 5000);
  auto p = driver.Commit({{"t", 0}, {"t", 1}});
  const bool completed = p.has_value() && driver.Completed();
  channel.Stop();  // before the participants go: its callbacks come back to them
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(completed);
  EXPECT_GE(old_asked.load(), 1);
  std::lock_guard g(mu);
  ASSERT_FALSE(written.empty());
  const auto& m = written.front().markers.at(0);
  EXPECT_EQ(m.producer_id, 5000);
  EXPECT_EQ(m.producer_epoch, p->producer_epoch);
  EXPECT_TRUE(m.transaction_result);
  ASSERT_EQ(m.topics.size(), 1u);
  EXPECT_EQ(m.topics[0].partitions, (std::vector<int32_t>{0, 1}));
}

// Partitions refused (their leader moved) while the groups' offsets complete later: the
// partitions are written again and the transaction completes (it once stayed in
// PrepareCommit when the call that answered last had no failure of its own).
class LateGroups : public TxnParticipants {
 public:
  ~LateGroups() override {
    for (auto& t : threads_) t.join();
  }
  void WritePartitionMarkers(const TxnMarker&, std::vector<TopicPartition> partitions,
                             std::function<void(std::vector<ErrorCode>)> done) override {
    const bool first = partition_calls_.fetch_add(1) == 0;
    done(std::vector<ErrorCode>(partitions.size(),
                                first ? ErrorCode::kNotLeaderOrFollower : ErrorCode::kNone));
  }
  void CompleteGroupOffsets(const TxnMarker&, std::vector<std::string> groups,
                            std::function<void(std::vector<ErrorCode>)> done) override {
    std::lock_guard g(mu_);
    threads_.emplace_back([done = std::move(done), n = groups.size()] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      done(std::vector<ErrorCode>(n, ErrorCode::kNone));
    });
  }
  int partition_calls() const { return partition_calls_.load(); }

 private:
  std::atomic<int> partition_calls_{0};
  std::mutex mu_;
  std::vector<std::thread> threads_;  // guarded by mu_
};

TEST(TxnCoordinatorRetryTest, RefusedPartitionsAreWrittenAgainWhenTheGroupsAnswerLast) {
  LateGroups participants;
  CommitDriver driver(&participants, 77);
  ASSERT_TRUE(driver.Commit({{"t", 0}}, "g").has_value());
  EXPECT_TRUE(driver.Completed());
  EXPECT_EQ(participants.partition_calls(), 2);
}

// Two leaders answering in parts: "slow" holds its answer until released, "flaky"
// refuses its first marker. Per-leader retries (0018 "coordfix"): flaky is written
// again while slow's answer is still awaited, and nothing is sent twice to slow.
class TwoLeaders : public TxnParticipants {
 public:
  void WritePartitionMarkers(const TxnMarker&, std::vector<TopicPartition> partitions,
                             std::function<void(std::vector<ErrorCode>)> done) override {
    done(std::vector<ErrorCode>(partitions.size(), ErrorCode::kUnknownServerError));
  }
  void WritePartitionMarkersInParts(const TxnMarker&, std::vector<TopicPartition> partitions,
                                    MarkerPart part) override {
    for (size_t i = 0; i < partitions.size(); ++i) {
      std::lock_guard g(mu_);
      if (partitions[i].topic == "slow") {
        ++slow_calls_;
        slow_ = [part, i] { part({i}, {ErrorCode::kNone}); };
      } else if (partitions[i].topic == "fenced") {
        part({i}, {ErrorCode::kTransactionCoordinatorFenced});
      } else {
        const bool first = flaky_calls_++ == 0;
        part({i}, {first ? ErrorCode::kNotLeaderOrFollower : ErrorCode::kNone});
      }
    }
  }
  void CompleteGroupOffsets(const TxnMarker&, std::vector<std::string> groups,
                            std::function<void(std::vector<ErrorCode>)> done) override {
    done(std::vector<ErrorCode>(groups.size(), ErrorCode::kNone));
  }
  void ReleaseSlow() {
    std::function<void()> slow;
    {
      std::lock_guard g(mu_);
      slow.swap(slow_);
    }
    if (slow) slow();
  }
  int flaky_calls() {
    std::lock_guard g(mu_);
    return flaky_calls_;
  }
  int slow_calls() {
    std::lock_guard g(mu_);
    return slow_calls_;
  }

 private:
  std::mutex mu_;
  std::function<void()> slow_;  // guarded by mu_
  int flaky_calls_ = 0;         // guarded by mu_
  int slow_calls_ = 0;          // guarded by mu_
};

TEST(TxnCoordinatorRetryTest, EachLeaderIsRetriedOnItsOwnWhileAnotherHasNotAnswered) {
  TwoLeaders participants;
  CommitDriver driver(&participants, 78);
  ASSERT_TRUE(driver.Commit({{"slow", 0}, {"flaky", 0}}).has_value());
  // flaky's refused marker is written again although slow has not answered yet.
  for (int i = 0; i < 2000 && participants.flaky_calls() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(participants.flaky_calls(), 2);
  EXPECT_EQ(participants.slow_calls(), 1);  // asked once, still waiting: not sent again
  participants.ReleaseSlow();
  EXPECT_TRUE(driver.Completed());
  EXPECT_EQ(participants.flaky_calls(), 2);
  EXPECT_EQ(participants.slow_calls(), 1);
}

TEST(TxnCoordinatorRetryTest, ANewerCoordinatorsMarkerStopsThisOnesMarkers) {
  TwoLeaders participants;
  CommitDriver driver(&participants, 79);
  ASSERT_TRUE(driver.Commit({{"fenced", 0}}).has_value());
  // Kafka's TRANSACTION_COORDINATOR_FENCED: the newer coordinator completes it; this one
  // neither retries nor writes its Complete record.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto r = driver.Find();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->state, TxnState::kPrepareCommit);
}

TEST(ClusterTxnParticipantsTest, MarkersQueuedBehindARequestGoTogether) {
  MetadataPublisher publisher("127.0.0.1", 1);
  Shards shards(&publisher);
  std::promise<void> first_asked;
  std::promise<void> releaser;
  std::shared_future<void> release = releaser.get_future().share();
  std::mutex mu;
  std::vector<size_t> markers_per_request;
  FakeBroker leader([&](const kafka::RequestHeader& h, kafka::Reader& r, int) {
    kafka::WriteTxnMarkersRequest req;
    EXPECT_TRUE(req.Decode(r, h.api_version).ok());
    bool first = false;
    {
      std::lock_guard g(mu);
      first = markers_per_request.empty();
      markers_per_request.push_back(req.markers.size());
    }
    if (first) {
      first_asked.set_value();
      release.wait();  // held while two more transactions end
    }
    return FakeBroker::Reply{FakeBroker::Answer(h, MarkersAnswerFor(req, ErrorCode::kNone))};
  });
  publisher.Publish(Snapshot(2, leader.port()));
  InterBrokerChannel channel(InterBrokerChannelOptions{});
  NoGroups groups;
  ClusterTxnParticipants participants(&shards, &channel, &groups);
  std::vector<std::promise<std::vector<ErrorCode>>> answers(3);
  for (int64_t pid = 0; pid < 3; ++pid) {
    participants.WritePartitionMarkers(
        TxnMarker{100 + pid, 0, pid != 1, 0}, {{"t", 0}, {"t", 1}},
        [&answers, pid](std::vector<ErrorCode> e) { answers[pid].set_value(e); });
    if (pid == 0) first_asked.get_future().wait();
  }
  releaser.set_value();
  for (auto& a : answers) {
    EXPECT_EQ(a.get_future().get(), std::vector<ErrorCode>(2, ErrorCode::kNone));
  }
  channel.Stop();
  std::lock_guard g(mu);
  EXPECT_EQ(markers_per_request, (std::vector<size_t>{1, 2}));
}

TEST(ClusterTxnParticipantsTest, NoLeaderAndUnknownPartitionsAreAnsweredHere) {
  MetadataPublisher publisher("127.0.0.1", 1);
  Shards shards(&publisher);
  auto meta = Snapshot(2, 1);
  meta->topics["t"].partitions[1].leader = -1;
  meta->brokers.pop_back();  // broker 2 is not live: its address is unknown
  publisher.Publish(meta);
  InterBrokerChannel channel(InterBrokerChannelOptions{});
  NoGroups groups;
  ClusterTxnParticipants participants(&shards, &channel, &groups);
  std::promise<std::vector<ErrorCode>> p;
  participants.WritePartitionMarkers(TxnMarker{1, 0, true, 0}, {{"t", 0}, {"t", 1}, {"u", 0}},
                                     [&](std::vector<ErrorCode> e) { p.set_value(e); });
  EXPECT_EQ(p.get_future().get(), (std::vector<ErrorCode>{ErrorCode::kNotLeaderOrFollower,
                                                          ErrorCode::kNotLeaderOrFollower,
                                                          ErrorCode::kUnknownTopicOrPartition}));
}

// ---------------------------------------------------------------------------------------
// Verification with another broker's coordinator

class NeverLocal : public TxnVerifier {
 public:
  void Verify(std::string, int64_t, int16_t, std::vector<TopicPartition> partitions,
              std::function<void(std::vector<ErrorCode>)> done) override {
    ADD_FAILURE() << "asked the local coordinator";
    done(std::vector<ErrorCode>(partitions.size(), ErrorCode::kUnknownServerError));
  }
};

TEST(ClusterTxnVerifierTest, AsksTheCoordinatorsBrokerWithVerifyOnly) {
  MetadataPublisher publisher("127.0.0.1", 1);
  Shards shards(&publisher);
  FakeBroker coordinator([](const kafka::RequestHeader& h, kafka::Reader& r, int) {
    EXPECT_EQ(h.api_key, static_cast<int16_t>(kafka::ApiKey::kAddPartitionsToTxn));
    EXPECT_EQ(h.api_version, 4);
    kafka::AddPartitionsToTxnRequest req;
    EXPECT_TRUE(req.Decode(r, h.api_version).ok());
    kafka::AddPartitionsToTxnResponse resp;
    for (const auto& t : req.transactions) {
      EXPECT_TRUE(t.verify_only);
      EXPECT_EQ(t.producer_id, 42);
      kafka::AddPartitionsToTxnResponse::Result res;
      res.transactional_id = t.transactional_id;
      // t-0 is in the transaction; t-1 is not.
      res.topic_results.push_back(
          {"t", {{0, ErrorCode::kNone, {}}, {1, ErrorCode::kInvalidTxnState, {}}}, {}});
      resp.results_by_transaction.push_back(res);
    }
    return FakeBroker::Reply{FakeBroker::Answer(h, resp)};
  });
  publisher.Publish(Snapshot(2, coordinator.port(), /*coordinator=*/2));
  InterBrokerChannel channel(InterBrokerChannelOptions{});
  NeverLocal local;
  ClusterTxnVerifier verifier(&shards, &channel, &local);
  auto verify = [&] {
    std::promise<std::vector<ErrorCode>> p;
    verifier.Verify("x", 42, 3, {{"t", 1}, {"t", 0}},
                    [&](std::vector<ErrorCode> e) { p.set_value(e); });
    return p.get_future().get();
  };
  EXPECT_EQ(verify(), (std::vector<ErrorCode>{ErrorCode::kInvalidTxnState, ErrorCode::kNone}));

  // No coordinator now: retriable; and a coordinator that is not there: a network error.
  auto none = Snapshot(2, coordinator.port(), /*coordinator=*/-1);
  publisher.Publish(none);
  EXPECT_EQ(verify(), (std::vector<ErrorCode>(2, ErrorCode::kCoordinatorNotAvailable)));
  int32_t gone_port = 0;
  {
    FakeBroker gone(
        [](const kafka::RequestHeader&, kafka::Reader&, int) { return FakeBroker::Reply{}; });
    gone_port = gone.port();
  }
  publisher.Publish(Snapshot(2, gone_port, /*coordinator=*/2));
  EXPECT_EQ(verify(), (std::vector<ErrorCode>(2, ErrorCode::kNetworkException)));
}

}  // namespace
}  // namespace txn_cluster_test
}  // namespace sluice::broker
