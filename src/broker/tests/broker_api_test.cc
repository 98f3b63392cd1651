// Broker over real sockets on 127.0.0.1: ApiVersions (and its v0 fallback), Metadata,
// CreateTopics, DeleteTopics, DescribeCluster, restart on the same data directory, and
// the requests that close a connection.
#include "broker/broker.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "broker/server.h"
#include "kafka/protocol/header.h"

namespace sluice::broker {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using Bytes = std::vector<uint8_t>;

// Only there so a broken broker fails the test instead of hanging it.
constexpr int kTimeoutMs = 20'000;

// A blocking client that speaks whole frames.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `payload` with its 4-byte size.
  bool SendFrame(const Bytes& payload) {
    Bytes b;
    kafka::Writer w(&b);
    w.Int32(static_cast<int32_t>(payload.size()));
    w.Raw(payload);
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::send(fd_, b.data() + done, b.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Sends one request (header v1 or v2 as the API and version need).
  template <typename Body>
  bool SendRequest(ApiKey key, int16_t version, int32_t correlation_id, const Body& body) {
    Bytes payload;
    kafka::Writer w(&payload);
    kafka::RequestHeader h;
    h.api_key = static_cast<int16_t>(key);
    h.api_version = version;
    h.correlation_id = correlation_id;
    h.client_id = "broker_api_test";
    h.header_version = kafka::RequestHeaderVersion(key, version);
    kafka::EncodeRequestHeader(w, h);
    body.Encode(w, version);
    return SendFrame(payload);
  }

  // One response frame's body, or nullopt on close or timeout.
  std::optional<Bytes> ReadFrame() {
    Bytes size;
    if (!Read(4, &size)) return std::nullopt;
    uint32_t n =
        uint32_t{size[0]} << 24 | uint32_t{size[1]} << 16 | uint32_t{size[2]} << 8 | size[3];
    Bytes body;
    if (!Read(n, &body)) return std::nullopt;
    return body;
  }

  // Sends a request and decodes its response, checking the correlation id.
  template <typename Resp, typename Body>
  Resp Call(ApiKey key, int16_t version, const Body& body) {
    const int32_t id = next_id_++;
    EXPECT_TRUE(SendRequest(key, version, id, body));
    auto frame = ReadFrame();
    Resp resp;
    if (!frame) {
      ADD_FAILURE() << "no response to " << kafka::ApiName(key) << " v" << version;
      return resp;
    }
    kafka::Reader r(*frame);
    auto got = kafka::DecodeResponseHeader(r, key, version);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (got.ok()) {
      EXPECT_EQ(*got, id);
    }
    Status st = resp.Decode(r, version);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(r.remaining(), 0u);
    return resp;
  }

  // True when the server closes the connection, with no bytes before the close.
  bool SeesClose() {
    if (!WaitReadable()) return false;
    char c;
    ssize_t r = ::recv(fd_, &c, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }

 private:
  bool WaitReadable() {
    pollfd p{fd_, POLLIN, 0};
    int r;
    do {
      r = ::poll(&p, 1, kTimeoutMs);
    } while (r < 0 && errno == EINTR);
    return r == 1;
  }

  bool Read(size_t n, Bytes* out) {
    out->resize(n);
    size_t got = 0;
    while (got < n) {
      if (!WaitReadable()) return false;
      ssize_t r = ::recv(fd_, out->data() + got, n - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      got += static_cast<size_t>(r);
    }
    return true;
  }

  int fd_ = -1;
  int32_t next_id_ = 1;
};

// A broker on a temp data directory, served on a free port by two shards.
class BrokerApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("broker_api_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    Start();
  }
  void TearDown() override {
    Stop();
    std::filesystem::remove_all(dir_);
  }

  void Start() {
    BrokerOptions o;
    o.data_dir = dir_.string();
    auto broker = Broker::Open(o);
    ASSERT_TRUE(broker.ok()) << broker.status().ToString();
    broker_ = std::move(*broker);
    ServerOptions so;
    so.shards = 2;
    server_ = std::make_unique<Server>(so, broker_.get());
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    broker_->SetAdvertisedAddress("127.0.0.1", server_->port());
  }
  void Stop() {
    if (server_) server_->Stop();
    server_.reset();
    if (broker_) {
      Status st = broker_->Close();
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    broker_.reset();
  }

  uint16_t port() const { return server_->port(); }

  kafka::CreateTopicsResponse Create(Client& c, const std::string& name, int32_t partitions,
                                     int16_t replication = -1, int16_t version = 7) {
    kafka::CreateTopicsRequest req;
    req.topics.push_back({name, partitions, replication, {}, {}, {}});
    return c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, version, req);
  }
  kafka::MetadataResponse Metadata(Client& c, int16_t version,
                                   std::optional<std::vector<std::string>> names) {
    kafka::MetadataRequest req;
    if (names) {
      req.topics.emplace();
      for (const auto& n : *names) req.topics->push_back({{}, n, {}});
    }
    return c.Call<kafka::MetadataResponse>(ApiKey::kMetadata, version, req);
  }

  std::filesystem::path dir_;
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<Server> server_;
};

void ExpectFullApiList(const std::vector<kafka::ApiVersionsResponse::ApiVersion>& got) {
  auto apis = kafka::SupportedApis();
  ASSERT_EQ(got.size(), apis.size());
  for (size_t i = 0; i < apis.size(); ++i) {
    EXPECT_EQ(got[i].api_key, static_cast<int16_t>(apis[i].key));
    EXPECT_EQ(got[i].min_version, apis[i].min);
    EXPECT_EQ(got[i].max_version, apis[i].max);
  }
}

TEST_F(BrokerApiTest, ApiVersionsV0AndV3ListEverySupportedApi) {
  Client c(port());
  for (int16_t v : {0, 3}) {
    auto resp = c.Call<kafka::ApiVersionsResponse>(ApiKey::kApiVersions, v, kafka::ApiVersionsRequest{});
    EXPECT_EQ(resp.error_code, ErrorCode::kNone);
    EXPECT_EQ(resp.throttle_time_ms, 0);
    ExpectFullApiList(resp.api_keys);
  }
}

TEST_F(BrokerApiTest, ApiVersionsV3ResponseHeaderHasNoTags) {
  Client c(port());
  kafka::ApiVersionsRequest req;
  req.client_software_name = "test";
  req.client_software_version = "1";
  ASSERT_TRUE(c.SendRequest(ApiKey::kApiVersions, 3, 42, req));
  auto frame = c.ReadFrame();
  ASSERT_TRUE(frame);
  // correlation id, then the body at once: error code 0, compact array length.
  ASSERT_GE(frame->size(), 7u);
  EXPECT_EQ((Bytes{frame->begin(), frame->begin() + 6}), (Bytes{0, 0, 0, 42, 0, 0}));
  EXPECT_EQ((*frame)[6], kafka::SupportedApis().size() + 1);
}

TEST_F(BrokerApiTest, ApiVersionsUnknownVersionGetsV0Fallback) {
  Client c(port());
  ASSERT_TRUE(c.SendRequest(ApiKey::kApiVersions, 99, 7, kafka::ApiVersionsRequest{}));
  auto frame = c.ReadFrame();
  ASSERT_TRUE(frame);
  kafka::Reader r(*frame);
  EXPECT_EQ(r.Int32("correlation id"), 7);
  kafka::ApiVersionsResponse resp;
  ASSERT_TRUE(resp.Decode(r, 0).ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(resp.error_code, ErrorCode::kUnsupportedVersion);
  ExpectFullApiList(resp.api_keys);
  // The connection stays usable.
  auto again = c.Call<kafka::ApiVersionsResponse>(ApiKey::kApiVersions, 3, kafka::ApiVersionsRequest{});
  EXPECT_EQ(again.error_code, ErrorCode::kNone);
}

TEST_F(BrokerApiTest, MetadataV1AllTopicsAndUnknownTopic) {
  Client c(port());
  ASSERT_EQ(Create(c, "alpha", 3).topics.at(0).error_code, ErrorCode::kNone);
  ASSERT_EQ(Create(c, "beta", -1).topics.at(0).error_code, ErrorCode::kNone);

  auto all = Metadata(c, 1, std::nullopt);
  ASSERT_EQ(all.brokers.size(), 1u);
  EXPECT_EQ(all.brokers[0].node_id, 1);
  EXPECT_EQ(all.brokers[0].host, "127.0.0.1");
  EXPECT_EQ(all.brokers[0].port, port());
  EXPECT_EQ(all.controller_id, 1);
  ASSERT_EQ(all.topics.size(), 2u);
  EXPECT_EQ(all.topics[0].name, "alpha");
  EXPECT_EQ(all.topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(all.topics[0].partitions.size(), 3u);
  for (int32_t p = 0; p < 3; ++p) {
    const auto& part = all.topics[0].partitions[static_cast<size_t>(p)];
    EXPECT_EQ(part.partition_index, p);
    EXPECT_EQ(part.leader_id, 1);
    EXPECT_EQ(part.replica_nodes, std::vector<int32_t>{1});
    EXPECT_EQ(part.isr_nodes, std::vector<int32_t>{1});
  }
  EXPECT_EQ(all.topics[1].name, "beta");
  EXPECT_EQ(all.topics[1].partitions.size(), 1u);

  auto v0 = Metadata(c, 0, std::vector<std::string>{});  // v0: empty = all
  EXPECT_EQ(v0.topics.size(), 2u);

  auto one = Metadata(c, 1, std::vector<std::string>{"nope"});
  ASSERT_EQ(one.topics.size(), 1u);
  EXPECT_EQ(one.topics[0].name, "nope");
  EXPECT_EQ(one.topics[0].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_TRUE(one.topics[0].partitions.empty());
  // No automatic creation.
  EXPECT_EQ(Metadata(c, 1, std::nullopt).topics.size(), 2u);
}

TEST_F(BrokerApiTest, MetadataV12HasTopicIdsAndClusterId) {
  Client c(port());
  auto created = Create(c, "ids", 2);
  ASSERT_EQ(created.topics.at(0).error_code, ErrorCode::kNone);
  kafka::Uuid id = created.topics[0].topic_id;
  EXPECT_FALSE(id.IsZero());
  EXPECT_EQ(created.topics[0].num_partitions, 2);
  EXPECT_EQ(created.topics[0].replication_factor, 1);

  auto md = Metadata(c, 12, std::vector<std::string>{"ids"});
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].topic_id, id);
  EXPECT_EQ(md.topics[0].partitions.size(), 2u);
  EXPECT_EQ(md.topics[0].partitions[0].leader_epoch, 0);
  EXPECT_EQ(md.cluster_id, broker_->cluster_id());
  EXPECT_EQ(broker_->cluster_id().size(), 22u);

  // By id (v10+), with a null name.
  kafka::MetadataRequest by_id;
  by_id.topics.emplace();
  by_id.topics->push_back({id, std::nullopt, {}});
  auto md2 = c.Call<kafka::MetadataResponse>(ApiKey::kMetadata, 12, by_id);
  ASSERT_EQ(md2.topics.size(), 1u);
  EXPECT_EQ(md2.topics[0].name, "ids");
}

TEST_F(BrokerApiTest, CreateTopicsErrors) {
  Client c(port());
  ASSERT_EQ(Create(c, "dup", 1).topics.at(0).error_code, ErrorCode::kNone);
  auto again = Create(c, "dup", 1);
  EXPECT_EQ(again.topics.at(0).error_code, ErrorCode::kTopicAlreadyExists);
  EXPECT_TRUE(again.topics[0].error_message.has_value());

  EXPECT_EQ(Create(c, "bad/name", 1).topics.at(0).error_code, ErrorCode::kInvalidTopicException);
  EXPECT_EQ(Create(c, "rf3", 1, 3).topics.at(0).error_code, ErrorCode::kInvalidReplicationFactor);
  EXPECT_EQ(Create(c, "zero", 0).topics.at(0).error_code, ErrorCode::kInvalidPartitions);

  kafka::CreateTopicsRequest assigned;
  assigned.topics.push_back({"assigned", -1, -1, {{0, {1}, {}}}, {}, {}});
  auto a = c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 4, assigned);
  EXPECT_EQ(a.topics.at(0).error_code, ErrorCode::kInvalidRequest);
  EXPECT_TRUE(a.topics[0].error_message.has_value());

  kafka::CreateTopicsRequest validate;
  validate.validate_only = true;
  validate.topics.push_back({"dry", 4, 1, {}, {}, {}});
  auto v = c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 5, validate);
  EXPECT_EQ(v.topics.at(0).error_code, ErrorCode::kNone);
  EXPECT_EQ(v.topics[0].num_partitions, 4);

  auto md = Metadata(c, 1, std::nullopt);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].name, "dup");
  EXPECT_EQ(broker_->open_log_count(), 1u);
}

TEST_F(BrokerApiTest, CreateTopicsMakesPartitionDirectories) {
  Client c(port());
  ASSERT_EQ(Create(c, "dirs", 2, 1, 0).topics.at(0).error_code, ErrorCode::kNone);
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "dirs-0"));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "dirs-1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "dirs-2"));
  EXPECT_EQ(broker_->open_log_count(), 2u);
}

TEST_F(BrokerApiTest, DeleteTopicsByNameAndById) {
  Client c(port());
  ASSERT_EQ(Create(c, "gone", 2).topics.at(0).error_code, ErrorCode::kNone);
  auto kept = Create(c, "byid", 1);
  ASSERT_EQ(kept.topics.at(0).error_code, ErrorCode::kNone);

  kafka::DeleteTopicsRequest by_name;
  by_name.topic_names = {"gone", "never"};
  auto del = c.Call<kafka::DeleteTopicsResponse>(ApiKey::kDeleteTopics, 4, by_name);
  ASSERT_EQ(del.responses.size(), 2u);
  EXPECT_EQ(del.responses[0].name, "gone");
  EXPECT_EQ(del.responses[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(del.responses[1].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "gone-0"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "gone-0-delete"));

  auto md = Metadata(c, 1, std::nullopt);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].name, "byid");

  kafka::DeleteTopicsRequest by_id;
  by_id.topics.push_back({std::nullopt, kept.topics[0].topic_id, {}});
  by_id.topics.push_back({std::nullopt, kafka::Uuid{1, 2}, {}});
  auto del2 = c.Call<kafka::DeleteTopicsResponse>(ApiKey::kDeleteTopics, 6, by_id);
  ASSERT_EQ(del2.responses.size(), 2u);
  EXPECT_EQ(del2.responses[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(del2.responses[0].name, "byid");
  EXPECT_EQ(del2.responses[1].error_code, ErrorCode::kUnknownTopicId);
  EXPECT_TRUE(Metadata(c, 1, std::nullopt).topics.empty());
  EXPECT_EQ(broker_->open_log_count(), 0u);

  // A re-created topic starts afresh.
  auto again = Create(c, "gone", 1);
  EXPECT_EQ(again.topics.at(0).error_code, ErrorCode::kNone);
}

TEST_F(BrokerApiTest, DescribeCluster) {
  Client c(port());
  auto resp = c.Call<kafka::DescribeClusterResponse>(ApiKey::kDescribeCluster, 1,
                                                      kafka::DescribeClusterRequest{});
  EXPECT_EQ(resp.error_code, ErrorCode::kNone);
  EXPECT_EQ(resp.cluster_id, broker_->cluster_id());
  EXPECT_EQ(resp.controller_id, 1);
  ASSERT_EQ(resp.brokers.size(), 1u);
  EXPECT_EQ(resp.brokers[0].broker_id, 1);
  EXPECT_EQ(resp.brokers[0].port, port());
}

TEST_F(BrokerApiTest, RestartKeepsTopicsIdsAndClusterId) {
  kafka::Uuid id;
  std::string cluster;
  {
    Client c(port());
    auto created = Create(c, "durable", 3);
    ASSERT_EQ(created.topics.at(0).error_code, ErrorCode::kNone);
    id = created.topics[0].topic_id;
    cluster = broker_->cluster_id();
  }
  Stop();
  Start();
  EXPECT_EQ(broker_->cluster_id(), cluster);
  EXPECT_EQ(broker_->open_log_count(), 3u);
  Client c(port());
  auto md = Metadata(c, 12, std::nullopt);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].name, "durable");
  EXPECT_EQ(md.topics[0].topic_id, id);
  EXPECT_EQ(md.topics[0].partitions.size(), 3u);
  EXPECT_EQ(md.cluster_id, cluster);
}

TEST_F(BrokerApiTest, UnsupportedProduceVersionClosesConnection) {
  Client c(port());
  kafka::ProduceRequest req;
  ASSERT_TRUE(c.SendRequest(ApiKey::kProduce, 0, 1, req));
  EXPECT_TRUE(c.SeesClose());
}

TEST_F(BrokerApiTest, GarbageFrameClosesOnlyThatConnection) {
  Client good(port());
  Client bad(port());
  ASSERT_TRUE(bad.SendFrame(Bytes{0x00, 0x12, 0x00}));  // a header cut short
  EXPECT_TRUE(bad.SeesClose());
  Client unknown(port());  // API key 32512: a whole header, an API nobody has
  ASSERT_TRUE(unknown.SendFrame(Bytes{0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff}));
  EXPECT_TRUE(unknown.SeesClose());
  auto resp = good.Call<kafka::ApiVersionsResponse>(ApiKey::kApiVersions, 3, kafka::ApiVersionsRequest{});
  EXPECT_EQ(resp.error_code, ErrorCode::kNone);
}

}  // namespace
}  // namespace sluice::broker
