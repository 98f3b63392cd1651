// HttpFrontDoor: the HTTP port's listening socket (docs/design/0019-security.md, "the HTTP
// port's front door"). cpp-httplib serves each connection on one of a few pool threads, and
// blocks that thread in the TLS handshake and in reading the request head: a thousand
// silent or half-open connections would hold the pool for minutes and nothing else would
// be answered. The front door accepts on one event loop of its own, runs the TLS handshake
// (when `tls` is set) and waits for the first request's head without blocking anything,
// with a deadline; only a connection that has sent a whole request head is connected to
// the HTTP server behind it (plain HTTP on a loopback port) and proxied both ways from
// then on. A connection that has not done so by the deadline is closed.
//
// The server behind sees the front door's address as its peer: HttpPeers gives the
// client's address for a backend connection's local port.
//
// Lifecycle: Start() binds and serves on its own thread until Stop() or destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "base/status.h"
#include "net/tls.h"

namespace sluice::broker {
class EventLoop;
}

namespace sluice::app {

// The client's address behind each backend connection, by the connection's local port:
// written by the front door, read by the HTTP server's threads.
class HttpPeers {
 public:
  void Set(int local_port, std::string addr);
  void Erase(int local_port);
  // "" when the port is not one of the front door's connections.
  std::string Get(int local_port) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<int, std::string> by_port_;
};

struct HttpFrontDoorOptions {
  std::string listen_addr;  // "HOST:PORT" (port 0 picks a free one); what clients reach
  int backend_port = 0;     // the HTTP server's plain port on 127.0.0.1
  std::shared_ptr<const net::TlsContext> tls;  // null: plain HTTP
  // From accept to the end of the first request's head (the handshake included).
  int64_t head_timeout_ms = 10'000;
  // Connections at once; the ones beyond are closed as they come.
  int max_connections = 10'000;
  std::shared_ptr<HttpPeers> peers;  // null: kept to itself
};

class HttpFrontDoor {
 public:
  static Result<std::unique_ptr<HttpFrontDoor>> Start(HttpFrontDoorOptions options);
  ~HttpFrontDoor();
  HttpFrontDoor(const HttpFrontDoor&) = delete;
  HttpFrontDoor& operator=(const HttpFrontDoor&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  void Stop();

 private:
  struct Conn;
  explicit HttpFrontDoor(HttpFrontDoorOptions options);
  void OnAcceptable();
  void Admit(int fd, std::string peer);
  void Pump(std::shared_ptr<Conn> self);
  void CloseBackend(Conn& c);
  bool ConnectBackend(Conn& c);
  void UpdateInterest(Conn& c);
  void Close(Conn& c, const char* why);

  const HttpFrontDoorOptions options_;
  std::unique_ptr<broker::EventLoop> loop_;
  std::thread thread_;
  int listen_fd_ = -1;
  std::string host_;
  int port_ = 0;
  // Loop thread only: every open connection, by its client socket.
  std::unordered_map<int, std::shared_ptr<Conn>> conns_;
};

}  // namespace sluice::app
