// HttpFrontDoor in front of an HttpServer, over real sockets: requests and large bodies
// go through both ways, routes see the client's address, connections that never finish a
// request head are closed at the deadline without keeping others waiting, and the
// connection limit holds. TLS through the door is tls_query_http_test's (integration).
#include "app/http_front_door.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/http_server.h"
#include "base/metrics.h"

namespace sluice::app {
namespace {

using namespace std::chrono_literals;

struct Served {
  std::unique_ptr<HttpServer> server;
  std::unique_ptr<HttpFrontDoor> door;
};

// `door` gives the door's limits; its addresses and peers are set here.
Served Serve(std::vector<HttpRoute> routes, HttpFrontDoorOptions door = {}) {
  static MetricsRegistry registry;
  auto peers = std::make_shared<HttpPeers>();
  HttpServerOptions options;
  options.peer_of = [peers](const std::string& addr, int port) { return peers->Get(addr, port); };
  auto server = HttpServer::Start(
      "127.0.0.1:0", registry, [] { return std::string(); }, std::move(routes), options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return {};
  door.listen_addr = "127.0.0.1:0";
  door.backend_port = (*server)->port();
  door.peers = peers;
  auto started = HttpFrontDoor::Start(std::move(door));
  EXPECT_TRUE(started.ok()) << started.status().ToString();
  if (!started.ok()) return {};
  return {std::move(server).value(), std::move(started).value()};
}

HttpFrontDoorOptions Deadline(int64_t ms) {
  HttpFrontDoorOptions o;
  o.head_timeout_ms = ms;
  return o;
}

// A blocking client socket to the door, from `source` (a loopback address).
int Connect(int port, const char* source = "127.0.0.1") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)), 0);
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Everything until the peer closes (or 10 s of silence).
std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Whether the door closes `fd` within `wait` (reads return 0 or an error).
bool ClosedWithin(int fd, std::chrono::milliseconds wait) {
  timeval tv{.tv_sec = wait.count() / 1000, .tv_usec = (wait.count() % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

TEST(HttpFrontDoorTest, RequestGoesThroughAndTheRouteSeesTheClientsAddress) {
  std::string seen_addr;
  Served s = Serve({{"/who", [&](const HttpRequest& r) {
                       seen_addr = r.remote_addr;
                       HttpResponse out;
                       out.body = "you are " + r.remote_addr;
                       out.content_type = "text/plain";
                       return out;
                     }}});
  ASSERT_NE(s.door, nullptr);
  int fd = Connect(s.door->port(), "127.0.0.7");
  SendAll(fd, "GET /who HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("you are 127.0.0.7"), std::string::npos) << answer;
  EXPECT_EQ(seen_addr, "127.0.0.7");
}

TEST(HttpFrontDoorTest, LargeBodiesBothWaysAndKeepAlive) {
  Served s = Serve({{"/echo", [](const HttpRequest& r) {
                       HttpResponse out;
                       out.content_type = "application/octet-stream";
                       // Four times the request's body: more than the door buffers.
                       for (int i = 0; i < 4; ++i) out.body += r.body;
                       return out;
                     }}});
  ASSERT_NE(s.door, nullptr);
  std::string body(3 << 20, 'x');
  for (size_t i = 0; i < body.size(); i += 4093) body[i] = static_cast<char>('a' + i % 26);
  int fd = Connect(s.door->port());
  // Two requests on one connection, the second closing it.
  for (int round = 0; round < 2; ++round) {
    std::string head =
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n";
    if (round == 1) head += "Connection: close\r\n";
    head += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    std::thread sender([&] {
      SendAll(fd, head);
      SendAll(fd, body);
    });
    // Read the response head, then exactly Content-Length bytes.
    std::string got;
    size_t head_end = std::string::npos;
    char buf[65536];
    while ((head_end = got.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      ASSERT_GT(n, 0);
      got.append(buf, static_cast<size_t>(n));
    }
    ASSERT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got.substr(0, head_end);
    size_t want = 4 * body.size();
    std::string content = got.substr(head_end + 4);
    while (content.size() < want) {
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      ASSERT_GT(n, 0);
      content.append(buf, static_cast<size_t>(n));
    }
    sender.join();
    ASSERT_EQ(content.size(), want);
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(content.compare(i * body.size(), body.size(), body), 0) << "copy " << i;
    }
  }
  EXPECT_TRUE(ClosedWithin(fd, 5000ms));
  ::close(fd);
}

TEST(HttpFrontDoorTest, HalfOpenConnectionsAreClosedAtTheDeadlineAndHoldNobodyUp) {
  Served s = Serve({{"/ping",
                     [](const HttpRequest&) {
                       HttpResponse out;
                       out.body = "pong";
                       out.content_type = "text/plain";
                       return out;
                     }}},
                   Deadline(500));
  ASSERT_NE(s.door, nullptr);
  // More silent and cut-short connections than the server has threads.
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
    int fd = Connect(s.door->port());
    if (i % 2) SendAll(fd, "GET /ping HTTP/1.1\r\nHost: x\r\n");  // no blank line
    idle.push_back(fd);
  }
  int fd = Connect(s.door->port());
  SendAll(fd, "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_NE(answer.find("pong"), std::string::npos) << answer;
  int closed = 0;
  for (int idle_fd : idle) {
    closed += ClosedWithin(idle_fd, 5000ms) ? 1 : 0;
    ::close(idle_fd);
  }
  EXPECT_EQ(closed, 64);
  // A client that leaves before its head is whole is simply gone.
  fd = Connect(s.door->port());
  SendAll(fd, "GET /pi");
  ::close(fd);
}

TEST(HttpFrontDoorTest, ConnectionsBeyondTheLimitAreClosed) {
  HttpFrontDoorOptions limit;
  limit.max_connections = 2;
  Served s = Serve({}, limit);
  ASSERT_NE(s.door, nullptr);
  int a = Connect(s.door->port());
  int b = Connect(s.door->port());
  std::this_thread::sleep_for(100ms);  // both accepted
  int c = Connect(s.door->port());
  EXPECT_TRUE(ClosedWithin(c, 5000ms));
  ::close(c);
  ::close(a);
  std::this_thread::sleep_for(100ms);  // a's place is free again
  int d = Connect(s.door->port());
  SendAll(d, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ReadAll(d).find("ok"), std::string::npos);
  ::close(d);
  ::close(b);
}

HttpRoute Echo() {
  return {"/echo", [](const HttpRequest& r) {
            HttpResponse out;
            out.body = "got " + std::to_string(r.body.size()) + ": " + r.body.substr(0, 64);
            out.content_type = "text/plain";
            return out;
          }};
}

TEST(HttpFrontDoorTest, DrippedBodiesAndLaterRequestsHaveDeadlinesToo) {
  Served s = Serve({Echo()}, Deadline(500));
  ASSERT_NE(s.door, nullptr);
  // Each holds a request that is not whole: a body short of its Content-Length, a second
  // request cut short after a whole first one. More of them than the server has threads.
  std::vector<int> slow;
  for (int i = 0; i < 24; ++i) {
    int fd = Connect(s.door->port());
    if (i % 2 == 0) {
      SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly ten..");
    } else {
      SendAll(fd, "GET /echo HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nHo");
    }
    slow.push_back(fd);
  }
  int fd = Connect(s.door->port());
  SendAll(fd,
          "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
  std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_NE(answer.find("got 5: hello"), std::string::npos) << answer;
  int closed = 0;
  for (int slow_fd : slow) {
    // Past the first request's answer, where there was one, to the end.
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(slow_fd, buf, sizeof(buf), 0);
      if (n > 0) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) ++closed;
      break;  // 0: closed; EAGAIN: still open after Connect's 10 s receive timeout
    }
    ::close(slow_fd);
  }
  EXPECT_EQ(closed, 24);
}

TEST(HttpFrontDoorTest, ChunkedBodiesAndAClientThatShutsItsWriteSide) {
  Served s = Serve({Echo()});
  ASSERT_NE(s.door, nullptr);
  int fd = Connect(s.door->port());
  SendAll(fd,
          "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: "
          "close\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");  // httplib takes no trailer
  std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_NE(answer.find("got 11: hello world"), std::string::npos) << answer;
  // A request, then the end of the client's stream: the answer still comes.
  fd = Connect(s.door->port());
  SendAll(fd, "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ::shutdown(fd, SHUT_WR);
  answer = ReadAll(fd);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
}

TEST(HttpFrontDoorTest, OversizedAndMalformedRequestsAreRefused) {
  HttpFrontDoorOptions small;
  small.max_request_bytes = 1000;
  Served s = Serve({Echo()}, small);
  ASSERT_NE(s.door, nullptr);
  auto ask = [&](const std::string& request) {
    int fd = Connect(s.door->port());
    SendAll(fd, request);
    std::string answer = ReadAll(fd);
    ::close(fd);
    return answer.substr(0, answer.find("\r\n"));
  };
  EXPECT_EQ(ask("GET /echo HTTP/1.1\r\nX-Big: " + std::string(70'000, 'a') + "\r\n\r\n"),
            "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_EQ(ask("GET /echo HTTP/1.1\r\nX-Big: " + std::string(70'000, 'a')),
            "HTTP/1.1 431 Request Header Fields Too Large");  // no end in sight
  EXPECT_EQ(ask("POST /echo HTTP/1.1\r\nContent-Length: 1001\r\n\r\n"),
            "HTTP/1.1 413 Payload Too Large");
  EXPECT_EQ(ask("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3e9\r\n"),
            "HTTP/1.1 413 Payload Too Large");
  EXPECT_EQ(ask("POST /echo HTTP/1.1\r\nContent-Length: 12x\r\n\r\n"), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(ask("POST /echo HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(ask("POST /echo HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(ask("POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
            "HTTP/1.1 400 Bad Request");
  // Within the limits, the same door answers.
  EXPECT_EQ(ask("POST /echo HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"),
            "HTTP/1.1 200 OK");
}

TEST(HttpFrontDoorTest, AnAnswerTheClientDoesNotReadEndsTheConnection) {
  HttpFrontDoorOptions stall;
  stall.write_stall_ms = 500;
  Served s = Serve({{"/big",
                     [](const HttpRequest&) {
                       HttpResponse out;
                       out.body = std::string(16 << 20, 'b');
                       out.content_type = "application/octet-stream";
                       return out;
                     }}},
                   stall);
  ASSERT_NE(s.door, nullptr);
  int fd = Connect(s.door->port());
  SendAll(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
  ::shutdown(fd, SHUT_WR);
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(2s);  // reading nothing meanwhile
  ::getrusage(RUSAGE_SELF, &after);
  // Nothing spins while the answer waits (a busy loop on the server's socket would burn
  // the whole 2 s): a generous bound, far from a timing assertion.
  auto cpu_us = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000 + u.ru_utime.tv_usec +
           u.ru_stime.tv_usec;
  };
  EXPECT_LT(cpu_us(after) - cpu_us(before), 1'000'000);
  // The door has given up with a reset: the rest of the 16 MiB never comes.
  size_t got = 0;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  EXPECT_LT(got, size_t{16} << 20);
}

TEST(HttpFrontDoorTest, TheServerBehindRefusesConnectionsThatBypassTheDoor) {
  Served s = Serve({Echo()});
  ASSERT_NE(s.door, nullptr);
  int fd = Connect(s.server->port());
  SendAll(fd, "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string answer = ReadAll(fd);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 403", 0), 0u) << answer;
}

TEST(HttpFrontDoorTest, AnAddressInUseOrMalformedIsRefused) {
  Served s = Serve({});
  ASSERT_NE(s.door, nullptr);
  auto again = HttpFrontDoor::Start({.listen_addr = "127.0.0.1:" + std::to_string(s.door->port()),
                                     .backend_port = s.server->port()});
  EXPECT_FALSE(again.ok());
  EXPECT_FALSE(HttpFrontDoor::Start({.listen_addr = "nocolon", .backend_port = 1}).ok());
  EXPECT_FALSE(HttpFrontDoor::Start({.listen_addr = "127.0.0.1:99999", .backend_port = 1}).ok());
}

}  // namespace
}  // namespace sluice::app
