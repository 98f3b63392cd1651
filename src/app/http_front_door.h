// HttpFrontDoor: the HTTP port's listening socket (docs/design/0019-security.md, "the HTTP
// port's front door"). cpp-httplib serves each connection on one of a few pool threads, and
// blocks that thread in the TLS handshake and in reading a request: a thousand silent,
// half-open or dripping connections would hold the pool and nothing else would be
// answered. The front door accepts on one event loop of its own, runs the TLS handshake
// (when `tls` is set) and reads every request whole — its head, and its body by
// Content-Length or chunked framing — without blocking anything, each within a deadline.
// Only whole requests go to the HTTP server behind it (plain HTTP on a loopback port); its
// answers go back as they come. A request not whole by its deadline, a response the client
// stops reading, a head over 64 KiB or a body over `max_request_bytes` end the connection
// (the last two with 431 / 413 when nothing was forwarded yet).
//
// The server behind sees the front door's address as its peer: HttpPeers gives the
// client's address for a backend connection's local port, and tells the server which
// connections came through the door.
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
  // The client's address behind a connection the server sees from `addr`:`port`; "" when
  // it is not one of the front door's connections (they all come from 127.0.0.1).
  std::string Get(const std::string& addr, int port) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<int, std::string> by_port_;
};

struct HttpFrontDoorOptions {
  std::string listen_addr;  // "HOST:PORT" (port 0 picks a free one); what clients reach
  int backend_port = 0;     // the HTTP server's plain port on 127.0.0.1
  std::shared_ptr<const net::TlsContext> tls;  // null: plain HTTP
  // From accept to the end of the first request (the handshake included), and from the
  // first byte of each later request to its end; a body adds 1 s per 64 KiB it declares.
  int64_t head_timeout_ms = 10'000;
  // A response the client does not read for this long ends the connection.
  int64_t write_stall_ms = 30'000;
  // The largest request (head and body) passed on; larger ones are refused with 413.
  size_t max_request_bytes = 4 << 20;
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
  // Moves `c`'s gate over the bytes read: whole requests become sendable. False when the
  // connection is to end (a refusal may be queued for the client).
  bool Frame(Conn& c, int64_t now_ms);
  void Refuse(Conn& c, int status, const char* reason);
  void CloseBackend(Conn& c);
  bool ConnectBackend(Conn& c);
  void WatchBackend(Conn& c, uint32_t events);
  void UpdateInterest(Conn& c);
  void Sweep();
  void Close(Conn& c, const char* why);

  const HttpFrontDoorOptions options_;
  std::unique_ptr<broker::EventLoop> loop_;
  std::thread thread_;
  int listen_fd_ = -1;
  std::string host_;
  int port_ = 0;
  // Loop thread only: every open connection, by its client socket; log lines written in
  // this sweep period about connections refused at the limit, and other refusals.
  std::unordered_map<int, std::shared_ptr<Conn>> conns_;
  int refused_at_limit_ = 0;
  int refusals_ = 0;
};

}  // namespace sluice::app
