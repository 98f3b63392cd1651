// Server: the broker's listening socket and its shards (one EventLoop thread each).
// Shard 0 accepts; each new connection goes to a shard round robin and stays there
// (docs/design/0002-broker-plan.md, decision 1).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "broker/connection.h"
#include "broker/event_loop.h"

namespace sluice::broker {

// One listening socket (Kafka's named listeners, docs/design/0019-security.md).
struct ListenerOptions {
  std::string name = "PLAINTEXT";  // what Metadata answers by (the connection's listener)
  std::string host = "127.0.0.1";  // an IPv4 address
  uint16_t port = 0;               // 0: the kernel picks a free port
  std::shared_ptr<const net::TlsContext> tls;  // SSL and SASL_SSL; null: plaintext
  bool sasl = false;                           // SASL_PLAINTEXT and SASL_SSL
};

struct ServerOptions {
  std::string host = "127.0.0.1";  // an IPv4 address
  uint16_t port = 0;               // 0: the kernel picks a free port; see Server::port()
  // Each its own socket, served by the same shards; empty: one PLAINTEXT listener on
  // host:port (with `connection`'s TLS and SASL settings).
  std::vector<ListenerOptions> listeners;
  int shards = 1;  // event loop threads
  int backlog = 1024;
  ConnectionOptions connection;  // a listener's name, TLS and SASL replace these fields'
};

// Lifecycle: construct, Start() once, Stop() once (the destructor stops too), all from
// one controlling thread. Between them each shard's thread owns its loop and
// connections. Start() makes the process ignore SIGPIPE, since sendfile(2) has no
// flag to suppress it.
class Server {
 public:
  // `handler` must outlive the server; it is called on every shard's thread.
  Server(ServerOptions options, RequestHandler* handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the shard threads.
  Status Start();
  // Stops the loops, joins their threads, then closes the listener and every
  // connection. Tasks still queued on the loops are dropped. Idempotent.
  void Stop();

  // For a graceful stop, before Stop(): closes the listening socket, so new connections
  // are refused while the open ones finish. Waits until shard 0 has done it.
  void StopAccepting();
  // Connections with a request being handled or a response being written, on all
  // shards (asks each shard's loop and waits for the answers).
  int BusyConnectionCount();

  // The first listener's port, and the port of listener `name` (0 when there is none).
  uint16_t port() const { return listeners_.empty() ? 0 : listeners_[0].port; }
  uint16_t port(std::string_view name) const;
  int shard_count() const { return static_cast<int>(shards_.size()); }
  // Valid between Start() and Stop(): for handlers and tests that post work to a shard.
  EventLoop& loop(int shard) { return *shards_[static_cast<size_t>(shard)]->loop; }
  // Open connections on all shards (any thread).
  int connection_count() const { return connection_count_.load(); }

 private:
  struct Shard {
    std::unique_ptr<EventLoop> loop;
    std::thread thread;
    // Owned by the shard's thread.
    std::unordered_map<Connection*, std::shared_ptr<Connection>> connections;
  };

  struct Listening {
    ListenerOptions options;
    ConnectionOptions connection;  // what its connections get
    int fd = -1;
    uint16_t port = 0;
  };

  Status Listen(Listening& l);
  void OnAcceptable(Listening& l);
  void PauseAccepting(Listening& l);
  void AddConnection(Shard& shard, const Listening& l, int fd);
  void CloseListeners();

  const ServerOptions options_;
  RequestHandler* const handler_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<Listening> listeners_;  // sized in Start, before the shards run
  size_t next_shard_ = 0;             // shard 0's thread
  std::atomic<int> connection_count_{0};
  bool started_ = false;
  bool accepting_ = true;  // shard 0's thread
};

}  // namespace sluice::broker
