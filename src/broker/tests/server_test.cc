// Server and Connection over real sockets on 127.0.0.1: framing, muting, limits, idle
// clients, sendfile'd splices, Stop with open connections.
#include "broker/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "net/testing/test_certs.h"
#include "net/tls.h"
#include "storage/env.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace {

// Only there so a broken server fails the test instead of hanging it.
constexpr int kTimeoutMs = 20'000;

using Bytes = std::vector<uint8_t>;

Bytes ToBytes(std::string_view s) { return Bytes(s.begin(), s.end()); }

Bytes SizePrefix(int32_t size) {
  auto u = static_cast<uint32_t>(size);
  return {static_cast<uint8_t>(u >> 24), static_cast<uint8_t>(u >> 16),
          static_cast<uint8_t>(u >> 8), static_cast<uint8_t>(u)};
}

Bytes Frame(const Bytes& payload) {
  Bytes out = SizePrefix(static_cast<int32_t>(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

bool WaitUntil(const std::function<bool()>& cond) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// A plain blocking POSIX client; reads wait at most kTimeoutMs.
class Client {
 public:
  // `rcvbuf` > 0 shrinks the receive buffer, so a large response fills the server's
  // socket buffer and its writes meet EAGAIN.
  explicit Client(uint16_t port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
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

  // From now on the bytes go through a TLS client session (blocking; reads time out after
  // kTimeoutMs). False when the session cannot be made.
  bool UseTls(const net::TlsClientOptions& options) {
    timeval tv{kTimeoutMs / 1000, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    auto t = net::MakeTlsClient(fd_, options);
    if (!t.ok()) {
      ADD_FAILURE() << t.status().ToString();
      return false;
    }
    tls_ = std::move(*t);
    return true;
  }
  net::Transport* tls() { return tls_.get(); }
  // Ends the TLS session with a close_notify; the socket stays open.
  void EndTls() { tls_.reset(); }

  // Over TLS: sends `frame` and reads the one frame that answers it, from one thread (an
  // SSL session must not be used by two threads at once), the socket non-blocking so a
  // peer that answers while it reads never waits on us. Fails the test on an error or
  // after kTimeoutMs.
  Bytes SendAndReadFrameOverTls(const Bytes& frame) {
    const int flags = ::fcntl(fd_, F_GETFL);
    ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
    Bytes in;
    size_t sent = 0, want = 4;
    bool sized = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kTimeoutMs);
    uint8_t buf[64 << 10];
    while (in.size() < want) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "timed out with " << sent << " bytes sent, " << in.size() << " read";
        break;
      }
      bool progress = false, failed = false;
      if (sent < frame.size()) {
        net::IoResult r = tls_->Write(frame.data() + sent, frame.size() - sent);
        if (r.done()) {
          sent += r.bytes;
          progress = true;
        } else if (r.state != net::IoResult::State::kWantRead &&
                   r.state != net::IoResult::State::kWantWrite) {
          ADD_FAILURE() << "TLS write failed after " << sent << " bytes: " << tls_->last_error();
          failed = true;
        }
      }
      net::IoResult r = tls_->Read(buf, sizeof(buf));
      if (r.done()) {
        in.insert(in.end(), buf, buf + r.bytes);
        progress = true;
      } else if (r.state != net::IoResult::State::kWantRead &&
                 r.state != net::IoResult::State::kWantWrite) {
        ADD_FAILURE() << "TLS read failed after " << in.size() << " bytes: " << tls_->last_error();
        failed = true;
      }
      if (failed) break;
      if (!sized && in.size() >= 4) {
        want = 4 + ((size_t{in[0]} << 24) | (size_t{in[1]} << 16) | (size_t{in[2]} << 8) | in[3]);
        sized = true;
      }
      if (!progress) {
        pollfd p{fd_, static_cast<short>(POLLIN | (sent < frame.size() ? POLLOUT : 0)), 0};
        ::poll(&p, 1, 10);
      }
    }
    ::fcntl(fd_, F_SETFL, flags);
    if (in.size() < 4) return {};
    return Bytes(in.begin() + 4, in.end());
  }

  bool Send(const Bytes& b) {
    if (tls_ != nullptr) {
      size_t done = 0;
      while (done < b.size()) {
        net::IoResult r = tls_->Write(b.data() + done, b.size() - done);
        if (!r.done()) return false;
        done += r.bytes;
      }
      return true;
    }
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::send(fd_, b.data() + done, b.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Exactly `n` bytes; fails the test (and returns what came) on EOF or timeout.
  Bytes Read(size_t n) {
    Bytes out(n);
    size_t got = 0;
    while (tls_ != nullptr && got < n) {
      net::IoResult r = tls_->Read(out.data() + got, n - got);
      if (!r.done()) {
        ADD_FAILURE() << "TLS read ended after " << got << " of " << n
                      << " bytes: " << tls_->last_error();
        break;
      }
      got += r.bytes;
    }
    while (got < n) {
      if (!WaitReadable()) {
        ADD_FAILURE() << "timed out after " << got << " of " << n << " bytes";
        break;
      }
      ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        ADD_FAILURE() << "connection closed after " << got << " of " << n << " bytes";
        break;
      }
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  }

  // One response frame's body.
  Bytes ReadFrame() {
    Bytes size = Read(4);
    if (size.size() != 4) return {};
    uint32_t n =
        uint32_t{size[0]} << 24 | uint32_t{size[1]} << 16 | uint32_t{size[2]} << 8 | size[3];
    return Read(n);
  }

  // True when the server closed the connection (EOF or reset) before the timeout, with
  // no bytes before the close.
  bool SeesClose() {
    if (!WaitReadable()) return false;
    char c;
    ssize_t r = ::recv(fd_, &c, 1, 0);
    return r == 0 || (r < 0 && (errno == ECONNRESET || errno == EPIPE));
  }

  // True when nothing arrives within `ms` (the connection is open and silent).
  bool SilentFor(int ms) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, ms) == 0;
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

  int fd_ = -1;
  std::unique_ptr<net::Transport> tls_;
};

// A handler made of a function, so each test says what its server does.
class FnHandler : public RequestHandler {
 public:
  using Fn = std::function<void(const std::shared_ptr<Connection>&, Bytes)>;
  explicit FnHandler(Fn fn) : fn_(std::move(fn)) {}
  void OnRequest(const std::shared_ptr<Connection>& conn, Bytes frame) override {
    fn_(conn, std::move(frame));
  }

 private:
  Fn fn_;
};

void Echo(const std::shared_ptr<Connection>& conn, Bytes frame) {
  conn->Send(Response{std::move(frame), {}, {}});
}

// Starts a server with `handler`, failing the test when it cannot.
std::unique_ptr<Server> StartServer(RequestHandler* handler, int shards = 2,
                                    int32_t max_request_bytes = 100 << 20,
                                    std::shared_ptr<const net::TlsContext> tls = nullptr) {
  ServerOptions options;
  options.shards = shards;
  options.connection.max_request_bytes = max_request_bytes;
  options.connection.tls = std::move(tls);
  auto server = std::make_unique<Server>(options, handler);
  Status st = server->Start();
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(server->port(), 0);
  return server;
}

TEST(ServerTest, EchoesEachFrameOnEveryShard) {
  std::mutex mu;
  std::set<std::thread::id> threads;  // guarded by mu
  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes frame) {
    {
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    }
    Echo(conn, std::move(frame));
  });
  auto server = StartServer(&handler, 3);
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 6; ++i) clients.push_back(std::make_unique<Client>(server->port()));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < clients.size(); ++i) {
      std::string msg = "client " + std::to_string(i) + " round " + std::to_string(round);
      ASSERT_TRUE(clients[i]->Send(Frame(ToBytes(msg))));
      EXPECT_EQ(clients[i]->ReadFrame(), ToBytes(msg));
    }
  }
  EXPECT_TRUE(clients[0]->Send(Frame({})));  // an empty frame is the handler's business
  EXPECT_EQ(clients[0]->ReadFrame(), Bytes{});
  EXPECT_EQ(server->connection_count(), 6);
  server->Stop();
  EXPECT_EQ(threads.size(), 3u) << "connections were not spread over the shards";
}

TEST(ServerTest, LargeFramesAreReadAndWrittenInPieces) {
  FnHandler handler(Echo);
  auto server = StartServer(&handler, 1);
  Client client(server->port(), 32 << 10);  // the echo cannot be written in one go
  Bytes payload(8 << 20);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  std::thread writer([&] { EXPECT_TRUE(client.Send(Frame(payload))); });
  Bytes got = client.ReadFrame();
  writer.join();
  EXPECT_EQ(got.size(), payload.size());
  EXPECT_TRUE(got == payload) << "echoed bytes differ";
  server->Stop();
}

TEST(ServerTest, PipelinedFramesAreAnsweredInOrderOneAtATime) {
  std::atomic<int> in_flight{0}, max_in_flight{0};
  // Answers a millisecond later from a timer, so a connection that kept reading would
  // hand over the next frames meanwhile.
  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes frame) {
    int now = in_flight.fetch_add(1) + 1;
    int seen = max_in_flight.load();
    while (now > seen && !max_in_flight.compare_exchange_weak(seen, now)) {
    }
    conn->loop()->RunAfter(1, [&, conn, frame = std::move(frame)]() mutable {
      in_flight.fetch_sub(1);
      conn->Send(Response{std::move(frame), {}, {}});
    });
  });
  auto server = StartServer(&handler, 1);
  Client client(server->port());
  constexpr int kFrames = 200;
  Bytes all;
  for (int i = 0; i < kFrames; ++i) {
    Bytes f = Frame(ToBytes("request " + std::to_string(i)));
    all.insert(all.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(client.Send(all));  // one write: the server has them all at once
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_EQ(client.ReadFrame(), ToBytes("request " + std::to_string(i))) << "response " << i;
  }
  EXPECT_EQ(max_in_flight.load(), 1);
  server->Stop();
}

TEST(ServerTest, DetachedRequestsAreAnsweredInOrderWhateverOrderTheyFinishIn) {
  // Frames starting with 'd' are detached at once and answered 5 ms later, the newest
  // first; others are answered at once, their responses waiting behind the detached ones
  // before them. The connection reads on meanwhile, up to kMaxPipelined unanswered.
  std::vector<std::pair<RequestId, Bytes>> held;
  size_t most_held = 0;
  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes frame) {
    if (frame.empty() || frame[0] != 'd') return Echo(conn, std::move(frame));
    RequestId id = conn->Detach();
    EXPECT_NE(id, 0u);
    held.push_back({id, std::move(frame)});
    most_held = std::max(most_held, held.size());
    if (held.size() > 1) return;
    conn->loop()->RunAfter(5, [&held, conn] {
      while (!held.empty()) {
        auto [id, frame] = std::move(held.back());
        held.pop_back();
        conn->Send(Response{std::move(frame), {}, {}}, id);
      }
    });
  });
  auto server = StartServer(&handler, 1);
  Client client(server->port());
  std::vector<std::string> sent;
  Bytes all;
  for (int i = 0; i < 60; ++i) {
    sent.push_back((i % 4 == 3 ? "plain " : "d ") + std::to_string(i));
    Bytes f = Frame(ToBytes(sent.back()));
    all.insert(all.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(client.Send(all));
  for (size_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ(client.ReadFrame(), ToBytes(sent[i])) << "response " << i;
  }
  EXPECT_TRUE(client.SilentFor(20)) << "bytes after the last answer";
  EXPECT_GT(most_held, 1u) << "the connection did not read past a detached request";
  EXPECT_LE(most_held, Connection::kMaxPipelined);
  server->Stop();
}

TEST(ServerTest, FrameSplitIntoOneByteWrites) {
  FnHandler handler(Echo);
  auto server = StartServer(&handler, 1);
  Client client(server->port());
  Bytes payload = ToBytes("a frame that arrives one byte at a time");
  Bytes frame = Frame(payload);
  for (int round = 0; round < 2; ++round) {
    for (uint8_t b : frame) {
      ASSERT_TRUE(client.Send({b}));
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // separate segments, mostly
    }
    EXPECT_EQ(client.ReadFrame(), payload);
  }
  server->Stop();
}

TEST(ServerTest, NegativeSizeClosesTheConnectionAndOthersAreStillServed) {
  FnHandler handler(Echo);
  auto server = StartServer(&handler, 2);
  Client other(server->port());
  Client bad(server->port());
  ASSERT_TRUE(bad.Send(SizePrefix(-1)));
  EXPECT_TRUE(bad.SeesClose()) << "a negative size did not close the connection";
  ASSERT_TRUE(other.Send(Frame(ToBytes("still here"))));
  EXPECT_EQ(other.ReadFrame(), ToBytes("still here"));
  Client late(server->port());
  ASSERT_TRUE(late.Send(Frame(ToBytes("new client"))));
  EXPECT_EQ(late.ReadFrame(), ToBytes("new client"));
  EXPECT_TRUE(WaitUntil([&] { return server->connection_count() == 2; }))
      << server->connection_count();
  server->Stop();
}

TEST(ServerTest, SizeOverTheLimitClosesBeforeTheBodyArrives) {
  FnHandler handler(Echo);
  constexpr int32_t kLimit = 1024;
  auto server = StartServer(&handler, 2, kLimit);
  Client at_limit(server->port());
  Bytes payload(kLimit, 'x');
  ASSERT_TRUE(at_limit.Send(Frame(payload)));
  EXPECT_EQ(at_limit.ReadFrame(), payload);

  Client over(server->port());
  ASSERT_TRUE(over.Send(SizePrefix(kLimit + 1)));  // the size alone: no body is sent
  EXPECT_TRUE(over.SeesClose()) << "a size over the limit did not close the connection";
  Client huge(server->port());
  ASSERT_TRUE(huge.Send(SizePrefix(INT32_MAX)));
  EXPECT_TRUE(huge.SeesClose());

  ASSERT_TRUE(at_limit.Send(Frame(ToBytes("after"))));
  EXPECT_EQ(at_limit.ReadFrame(), ToBytes("after"));
  server->Stop();
}

TEST(ServerTest, HandlerMayCloseTheConnection) {
  FnHandler handler([](const std::shared_ptr<Connection>& conn, Bytes frame) {
    if (frame == ToBytes("bye")) {
      conn->Close();                                     // what a malformed request does
      conn->Close();                                     // idempotent
      conn->Send(Response{ToBytes("ignored"), {}, {}});  // a closed connection ignores it
    } else {
      Echo(conn, std::move(frame));
    }
  });
  auto server = StartServer(&handler, 1);
  Client client(server->port());
  ASSERT_TRUE(client.Send(Frame(ToBytes("hi"))));
  EXPECT_EQ(client.ReadFrame(), ToBytes("hi"));
  ASSERT_TRUE(client.Send(Frame(ToBytes("bye"))));
  EXPECT_TRUE(client.SeesClose());
  EXPECT_TRUE(WaitUntil([&] { return server->connection_count() == 0; }))
      << server->connection_count();
  server->Stop();
}

TEST(ServerTest, FinishRequestWithoutResponseUnmutes) {
  // Frames starting with 0 are "acks=0 produce": no response.
  FnHandler handler([](const std::shared_ptr<Connection>& conn, Bytes frame) {
    if (!frame.empty() && frame[0] == 0) {
      conn->loop()->Post([conn] { conn->FinishRequest(); });
    } else {
      Echo(conn, std::move(frame));
    }
  });
  auto server = StartServer(&handler, 1);
  Client client(server->port());
  Bytes all;
  for (int i = 0; i < 10; ++i) {
    Bytes silent = Frame({0, static_cast<uint8_t>(i)});
    Bytes loud = Frame(ToBytes("answer " + std::to_string(i)));
    all.insert(all.end(), silent.begin(), silent.end());
    all.insert(all.end(), loud.begin(), loud.end());
  }
  ASSERT_TRUE(client.Send(all));
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(client.ReadFrame(), ToBytes("answer " + std::to_string(i)));
  EXPECT_TRUE(client.SilentFor(20)) << "bytes after the last answer";
  server->Stop();
}

// Raises the soft descriptor limit to the hard one; returns the soft limit now in force.
rlim_t RaiseFdLimit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &lim);
    (void)::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

TEST(ServerTest, ThousandIdleConnectionsDoNotStopOthersBeingServed) {
  // Both ends live in this process: two descriptors per connection, plus headroom.
  int idle = 1000;
  rlim_t limit = RaiseFdLimit();
  if (limit != RLIM_INFINITY && limit < 2 * 1000 + 100) {
    idle = static_cast<int>((limit - 100) / 2);
    std::fprintf(stderr, "descriptor limit %llu: scaled down to %d idle connections\n",
                 static_cast<unsigned long long>(limit), idle);
  }
  FnHandler handler(Echo);
  auto server = StartServer(&handler, 2);
  std::vector<std::unique_ptr<Client>> idlers;
  for (int i = 0; i < idle; ++i) idlers.push_back(std::make_unique<Client>(server->port()));
  Client active(server->port());
  ASSERT_TRUE(WaitUntil([&] { return server->connection_count() == idle + 1; }))
      << server->connection_count() << " connections, expected " << idle + 1;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(active.Send(Frame(ToBytes("busy " + std::to_string(i)))));
    EXPECT_EQ(active.ReadFrame(), ToBytes("busy " + std::to_string(i)));
  }
  EXPECT_EQ(server->connection_count(), idle + 1) << "an idle connection was dropped";
  EXPECT_TRUE(idlers.front()->SilentFor(1));
  // An idle one is still served when it finally speaks.
  ASSERT_TRUE(idlers.back()->Send(Frame(ToBytes("woke up"))));
  EXPECT_EQ(idlers.back()->ReadFrame(), ToBytes("woke up"));
  server->Stop();
}

// A temporary file of `size` patterned bytes, removed at the end of the test.
class TempFile {
 public:
  explicit TempFile(size_t size) {
    char name[] = "/tmp/sluice_broker_test_XXXXXX";
    int fd = ::mkstemp(name);
    path_ = name;
    content_.resize(size);
    for (size_t i = 0; i < size; ++i) content_[i] = static_cast<uint8_t>((i * 131 + i / 7) & 0xff);
    size_t done = 0;
    while (fd >= 0 && done < size) {
      ssize_t n = ::write(fd, content_.data() + done, size - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    EXPECT_EQ(done, size) << "writing " << path_;
    if (fd >= 0) ::close(fd);
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }
  const Bytes& content() const { return content_; }

 private:
  std::string path_;
  Bytes content_;
};

TEST(ServerTest, SplicesAreSentFromTheFileBetweenBufferPieces) {
  TempFile file(12 << 20);
  auto opened = storage::Env::Posix()->Open(file.path(), storage::OpenMode::kRead);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<storage::File> shared = std::move(opened).value();
  // Two slices, the first larger than the socket buffers so sendfile meets EAGAIN.
  storage::FileSlice first{shared, 100, 10 << 20};
  storage::FileSlice second{shared, 5, 1000};

  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes frame) {
    Response r;
    kafka::Writer w(&r.buffer);
    w.Raw(ToBytes("HDR"));
    w.Int32(static_cast<int32_t>(first.size));
    w.AddSplice(first.size, 0);
    w.Raw(ToBytes("MID"));
    w.AddSplice(second.size, 1);
    w.AddSplice(0, 1);  // an empty splice sends nothing
    w.Raw(ToBytes("TRL"));
    r.splices = w.splices();
    r.files = {first, second};
    conn->Send(std::move(r));
  });
  auto server = StartServer(&handler, 1);
  Client client(server->port(), 32 << 10);

  Bytes want = ToBytes("HDR");
  Bytes size = SizePrefix(static_cast<int32_t>(first.size));
  want.insert(want.end(), size.begin(), size.end());
  want.insert(want.end(), file.content().begin() + 100, file.content().begin() + 100 + (10 << 20));
  Bytes mid = ToBytes("MID");
  want.insert(want.end(), mid.begin(), mid.end());
  want.insert(want.end(), file.content().begin() + 5, file.content().begin() + 1005);
  Bytes trl = ToBytes("TRL");
  want.insert(want.end(), trl.begin(), trl.end());

  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(client.Send(Frame(ToBytes("fetch"))));
    Bytes got = client.ReadFrame();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want) << "spliced response differs (round " << round << ")";
  }
  server->Stop();
}

// TLS connections (docs/design/0019-security.md): a CA and a server certificate made here.
class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net::TlsOptions o;
    o.cert_file = server_cert_.cert_file();
    o.key_file = server_cert_.key_file();
    auto ctx = net::TlsContext::Create(o);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    tls_ = std::move(*ctx);
  }
  net::TlsClientOptions ClientOptions() const {
    net::TlsClientOptions o;
    o.ca_file = ca_.cert_file();
    o.server_name = "localhost";
    return o;
  }

  storage::testing::TempDir dir_{"server-tls"};
  net::testing::TestIdentity ca_{"test CA", nullptr, true, dir_.path(), "ca"};
  net::testing::TestIdentity server_cert_{"localhost", &ca_, false, dir_.path(), "server"};
  std::shared_ptr<const net::TlsContext> tls_;
};

// Frames pipelined in one write arrive in one or a few TLS records: the frames decrypted
// past the first wait inside the transport while the connection is muted, and must be
// read when it unmutes (the socket has nothing more to say).
TEST_F(TlsServerTest, PipelinedFramesInOneRecordAreAllAnswered) {
  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes frame) {
    conn->loop()->RunAfter(1, [conn, frame = std::move(frame)]() mutable {
      conn->Send(Response{std::move(frame), {}, {}});
    });
  });
  auto server = StartServer(&handler, 1, 100 << 20, tls_);
  Client client(server->port());
  ASSERT_TRUE(client.UseTls(ClientOptions()));
  constexpr int kFrames = 100;
  Bytes all;
  for (int i = 0; i < kFrames; ++i) {
    Bytes f = Frame(ToBytes("request " + std::to_string(i)));
    all.insert(all.end(), f.begin(), f.end());
  }
  ASSERT_TRUE(client.Send(all));
  for (int i = 0; i < kFrames; ++i) {
    ASSERT_EQ(client.ReadFrame(), ToBytes("request " + std::to_string(i))) << "response " << i;
  }
  auto session = net::SessionOf(*client.tls());
  ASSERT_TRUE(session.has_value());
  EXPECT_EQ(session->peer_subject, "CN=localhost");
  server->Stop();
}

// Large frames both ways, and a response with file slices: with a user-space TLS
// transport the slices are copied in (no sendfile), byte for byte the same.
TEST_F(TlsServerTest, LargeFramesAndFileSlicesGoThroughTls) {
  TempFile file(3 << 20);
  auto opened = storage::Env::Posix()->Open(file.path(), storage::OpenMode::kRead);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<storage::File> shared = std::move(opened).value();
  storage::FileSlice slice{shared, 7, 2 << 20};
  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes frame) {
    if (frame == ToBytes("fetch")) {
      Response r;
      kafka::Writer w(&r.buffer);
      w.Raw(ToBytes("HDR"));
      w.AddSplice(slice.size, 0);
      w.Raw(ToBytes("TRL"));
      r.splices = w.splices();
      r.files = {slice};
      conn->Send(std::move(r));
      return;
    }
    Echo(conn, std::move(frame));
  });
  auto server = StartServer(&handler, 1, 100 << 20, tls_);
  Client client(server->port(), 32 << 10);
  ASSERT_TRUE(client.UseTls(ClientOptions()));
  Bytes payload(6 << 20);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 13 + i / 977);
  Bytes got = client.SendAndReadFrameOverTls(Frame(payload));
  EXPECT_TRUE(got == payload) << "echoed bytes differ (" << got.size() << " bytes)";
  ASSERT_TRUE(client.Send(Frame(ToBytes("fetch"))));
  Bytes want = ToBytes("HDR");
  want.insert(want.end(), file.content().begin() + 7, file.content().begin() + 7 + (2 << 20));
  Bytes trl = ToBytes("TRL");
  want.insert(want.end(), trl.begin(), trl.end());
  EXPECT_TRUE(client.ReadFrame() == want) << "spliced response differs";
  server->Stop();
}

// A plaintext Kafka client on the TLS port: its connection is closed (its bytes are no
// ClientHello); a TLS client beside it is served.
TEST_F(TlsServerTest, APlaintextClientIsClosedAndOthersAreServed) {
  FnHandler handler(Echo);
  auto server = StartServer(&handler, 1, 100 << 20, tls_);
  Client plain(server->port());
  Client good(server->port());
  ASSERT_TRUE(good.UseTls(ClientOptions()));
  ASSERT_TRUE(plain.Send(Frame(ToBytes("ApiVersions, in the clear"))));
  EXPECT_TRUE(plain.SeesClose());
  ASSERT_TRUE(good.Send(Frame(ToBytes("hello"))));
  EXPECT_EQ(good.ReadFrame(), ToBytes("hello"));
  EXPECT_TRUE(WaitUntil([&] { return server->connection_count() == 1; }));
  server->Stop();
}

// A client that connects to a TLS listener and never starts (or finishes) a handshake is
// closed after tls_handshake_timeout_ms; one that finished its handshake stays.
TEST_F(TlsServerTest, AConnectionWithoutAHandshakeIsClosedInTime) {
  FnHandler handler(Echo);
  ServerOptions options;
  options.shards = 1;
  options.connection.tls = tls_;
  options.connection.tls_handshake_timeout_ms = 300;
  Server server(options, &handler);
  ASSERT_TRUE(server.Start().ok());
  Client silent(server.port());
  Client good(server.port());
  ASSERT_TRUE(good.UseTls(ClientOptions()));
  ASSERT_TRUE(good.Send(Frame(ToBytes("hello"))));
  EXPECT_EQ(good.ReadFrame(), ToBytes("hello"));
  EXPECT_TRUE(silent.SeesClose());
  EXPECT_TRUE(WaitUntil([&] { return server.connection_count() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // past the timeout
  ASSERT_TRUE(good.Send(Frame(ToBytes("still here"))));
  EXPECT_EQ(good.ReadFrame(), ToBytes("still here"));
  server.Stop();
}

// Two listeners on one server: a PLAINTEXT and an SSL socket, the same shards; each
// connection knows the listener it came in on.
TEST_F(TlsServerTest, EachListenerHasItsSocketAndItsConnectionsKnowIt) {
  FnHandler handler([](const std::shared_ptr<Connection>& conn, Bytes frame) {
    std::string text(frame.begin(), frame.end());
    text += " via " + conn->listener() + (conn->sasl_listener() ? "+sasl" : "");
    conn->Send(Response{ToBytes(text), {}, {}});
  });
  ServerOptions options;
  options.shards = 2;
  ListenerOptions plain;
  plain.name = "PLAINTEXT";
  ListenerOptions ssl;
  ssl.name = "SASL_SSL";
  ssl.tls = tls_;
  ssl.sasl = true;
  options.listeners = {plain, ssl};
  Server server(options, &handler);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_NE(server.port("PLAINTEXT"), 0);
  ASSERT_NE(server.port("SASL_SSL"), 0);
  EXPECT_NE(server.port("PLAINTEXT"), server.port("SASL_SSL"));
  EXPECT_EQ(server.port(), server.port("PLAINTEXT"));
  EXPECT_EQ(server.port("SSL"), 0);
  Client a(server.port("PLAINTEXT"));
  Client b(server.port("SASL_SSL"));
  ASSERT_TRUE(b.UseTls(ClientOptions()));
  ASSERT_TRUE(a.Send(Frame(ToBytes("a"))));
  ASSERT_TRUE(b.Send(Frame(ToBytes("b"))));
  EXPECT_EQ(a.ReadFrame(), ToBytes("a via PLAINTEXT"));
  EXPECT_EQ(b.ReadFrame(), ToBytes("b via SASL_SSL+sasl"));
  // A taken port fails Start with the address, and closes the listeners it opened.
  ServerOptions clash;
  ListenerOptions first;
  first.name = "PLAINTEXT";
  ListenerOptions taken;
  taken.name = "SSL";
  taken.port = server.port("SASL_SSL");
  clash.listeners = {first, taken};
  Server second(clash, &handler);
  Status st = second.Start();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(std::to_string(taken.port)), std::string::npos) << st.ToString();
  server.Stop();
}

// A closed TLS connection that something still holds (a request in flight) must not
// touch its old descriptor again: the kernel gives that number to the next socket opened,
// on any thread (CI, stop 55: a close_notify written when the Connection was destroyed
// reached a kafka-python client's new connection in the middle of its handshake).
TEST_F(TlsServerTest, AClosedConnectionWritesNothingToItsDescriptorsNextOwner) {
  std::mutex mu;
  std::shared_ptr<Connection> held;  // guarded by mu
  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes frame) {
    {
      std::lock_guard<std::mutex> lock(mu);
      held = conn;
    }
    Echo(conn, std::move(frame));
  });
  auto server = StartServer(&handler, 1, 100 << 20, tls_);
  Client client(server->port());
  ASSERT_TRUE(client.UseTls(ClientOptions()));
  ASSERT_TRUE(client.Send(Frame(ToBytes("hello"))));
  ASSERT_EQ(client.ReadFrame(), ToBytes("hello"));
  client.EndTls();  // the server reads the close_notify and closes its socket
  ASSERT_TRUE(WaitUntil([&] { return server->connection_count() == 0; }));
  // The freed number goes to one of these (the lowest free numbers are taken first).
  std::vector<int> ends;
  for (int i = 0; i < 16; ++i) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    ends.insert(ends.end(), {sv[0], sv[1]});
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    held.reset();  // the Connection is destroyed here
  }
  for (int fd : ends) {
    char c;
    EXPECT_EQ(::recv(fd, &c, 1, 0), -1) << "bytes arrived on a socket the server never had";
  }
  for (int fd : ends) ::close(fd);
  server->Stop();
}

int CountOpenFds() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

TEST(ServerTest, StopClosesOpenConnections) {
  const int fds_before = CountOpenFds();
  std::mutex mu;
  std::vector<std::shared_ptr<Connection>> held;  // guarded by mu
  // Never answers: holds the request, as a long poll would.
  FnHandler handler([&](const std::shared_ptr<Connection>& conn, Bytes) {
    std::lock_guard<std::mutex> lock(mu);
    held.push_back(conn);
  });
  auto server = StartServer(&handler, 2);
  Client idle(server->port());
  Client waiting(server->port());
  Client partial(server->port());
  ASSERT_TRUE(waiting.Send(Frame(ToBytes("long poll"))));
  ASSERT_TRUE(partial.Send(SizePrefix(100)));
  ASSERT_TRUE(partial.Send(ToBytes("only part of it")));
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mu);
    return held.size() == 1 && server->connection_count() == 3;
  }));
  server->Stop();
  EXPECT_TRUE(idle.SeesClose());
  EXPECT_TRUE(waiting.SeesClose());
  EXPECT_TRUE(partial.SeesClose());
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_TRUE(held[0]->closed());
  held.clear();
  server->Stop();  // again: nothing to do
  server.reset();
  // The server's descriptors (listener, epoll, eventfds, sockets) are all closed; the
  // clients' three are still open.
  EXPECT_EQ(CountOpenFds(), fds_before + 3);
}

}  // namespace
}  // namespace sluice::broker

namespace sluice::broker {
namespace {

// A connection's principal (docs/design/0019-security.md, phase E): on an SSL listener the
// client certificate's subject mapped by ssl.principal.mapping.rules, User:ANONYMOUS without
// a certificate; a subject no rule maps fails (the request gets no principal).
TEST_F(TlsServerTest, PrincipalsComeFromClientCertificatesThroughTheMappingRules) {
  net::TlsOptions o;
  o.cert_file = server_cert_.cert_file();
  o.key_file = server_cert_.key_file();
  o.ca_file = ca_.cert_file();
  o.client_auth = net::ClientAuth::kRequested;
  auto ctx = net::TlsContext::Create(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  net::testing::TestIdentity alice("alice", &ca_, false, dir_.path(), "alice");
  net::testing::TestIdentity robot("robot-7", &ca_, false, dir_.path(), "robot");
  FnHandler handler([](const std::shared_ptr<Connection>& conn, Bytes) {
    Result<std::string> p = conn->Principal();
    conn->Send(Response{ToBytes(p.ok() ? *p : "error: " + p.status().message()), {}, {}});
  });
  ServerOptions options;
  options.connection.tls = *ctx;
  auto mapper = auth::SslPrincipalMapper::Parse("RULE:^CN=([a-z]+)$/$1/U");
  ASSERT_TRUE(mapper.ok());
  options.connection.ssl_principal_mapper =
      std::make_shared<const auth::SslPrincipalMapper>(std::move(*mapper));
  Server server(options, &handler);
  ASSERT_TRUE(server.Start().ok());
  auto ask = [&](const net::testing::TestIdentity* who) {
    Client client(server.port());
    net::TlsClientOptions c = ClientOptions();
    if (who != nullptr) {
      c.cert_file = who->cert_file();
      c.key_file = who->key_file();
    }
    if (!client.UseTls(c) || !client.Send(Frame(ToBytes("who")))) return std::string("no answer");
    Bytes b = client.ReadFrame();
    return std::string(b.begin(), b.end());
  };
  EXPECT_EQ(ask(&alice), "User:ALICE");
  EXPECT_EQ(ask(nullptr), "User:ANONYMOUS");
  EXPECT_EQ(ask(&robot), "error: No rules apply to CN=robot-7");
  server.Stop();
}

}  // namespace
}  // namespace sluice::broker
