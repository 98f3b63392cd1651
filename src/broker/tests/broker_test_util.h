// Test helpers for the broker: a blocking Kafka client that speaks whole frames, and a
// fixture running a Broker on a temp data directory, served on a free port by two shards.
#pragma once

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

#include "broker/broker.h"
#include "broker/server.h"
#include "kafka/protocol/header.h"
#include "kafka/protocol/records.h"
#include "kafka/protocol/requests.h"

namespace sluice::broker::testing {

using kafka::ApiKey;
using kafka::ErrorCode;
using Bytes = std::vector<uint8_t>;

// Only there so a broken broker fails the test instead of hanging it.
constexpr int kTimeoutMs = 20'000;

// A batch of `n` records "<prefix>-<i>", timestamps base_ts + i, built with `o` (producer
// fields, attributes).
inline Bytes ValueBatch(const std::string& prefix, int n, int64_t base_ts,
                        kafka::BatchBuilderOptions o = {}) {
  std::vector<std::string> values;
  for (int i = 0; i < n; ++i) values.push_back(prefix + "-" + std::to_string(i));
  std::vector<kafka::RecordInput> recs;
  for (int i = 0; i < n; ++i) {
    kafka::RecordInput r;
    r.value = kafka::AsBytes(values[i]);
    r.timestamp_delta = i;
    recs.push_back(std::move(r));
  }
  o.base_timestamp = base_ts;
  return kafka::BuildBatch(o, recs);
}

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
    h.client_id = "sluice-test";
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
    // Records in a decoded response are views into the frame: keep it until the next call.
    last_frame_ = std::move(*frame);
    kafka::Reader r(last_frame_);
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
  Bytes last_frame_;
};

// A broker on a temp data directory, served on a free port by two shards.
class BrokerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("broker_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    Start();
  }
  void TearDown() override {
    Stop();
    std::filesystem::remove_all(dir_);
  }

  void Start() {
    BrokerOptions o = options_;
    o.data_dir = dir_.string();
    auto broker = Broker::Open(o);
    ASSERT_TRUE(broker.ok()) << broker.status().ToString();
    broker_ = std::move(*broker);
    ServerOptions so = server_options_;
    if (o.sasl.enabled) so.connection.sasl = true;  // as serve_config sets kafka.addr's
    server_ = std::make_unique<Server>(so, broker_.get());
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    broker_->SetAdvertisedAddress("127.0.0.1", server_->port());
  }
  void Stop() {
    if (broker_) broker_->StopWaking();
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

  BrokerOptions options_;  // what Start() opens the broker with (data_dir is set there)
  ServerOptions server_options_{.shards = 2};
  std::filesystem::path dir_;
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<Server> server_;
};

}  // namespace sluice::broker::testing
