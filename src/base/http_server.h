// HttpServer: sluice's HTTP port (`--http-addr`): Prometheus metrics at /metrics and a
// health check at /healthz (200 "ok", or 503 with the reasons). Loopback by default, like
// every listener of sluice.
//
// Lifecycle: Start() binds and serves on its own thread until Stop() or destruction.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/metrics.h"
#include "base/status.h"

namespace httplib {
class Server;
}

namespace sluice {

class HttpServer {
 public:
  // "" when healthy, else what is wrong (one line per problem). Called on the server's
  // thread, for each /healthz request.
  using HealthCheck = std::function<std::string()>;

  // Binds `addr` ("HOST:PORT"; port 0 picks a free one). `registry` must outlive the server.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& addr,
                                                   MetricsRegistry& registry, HealthCheck health);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  void Stop();

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::string host_;
  int port_ = 0;
};

// Splits "HOST:PORT" ("[::1]:80" too); InvalidArgument naming `what` otherwise.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& addr, const std::string& what);

}  // namespace sluice
