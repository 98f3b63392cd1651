// HttpServer: sluice's HTTP port (`--http-addr`): Prometheus metrics at /metrics, a
// health check at /healthz (200 "ok", or 503 with the reasons), and the routes other
// modules add under a path prefix (the Iceberg REST catalog's /v1/). Loopback by default,
// like every listener of sluice.
//
// Lifecycle: Start() binds and serves on its own thread until Stop() or destruction.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"

namespace httplib {
class Server;
}

namespace sluice {

// One request as a route sees it, free of the HTTP library's types.
struct HttpRequest {
  std::string method;                        // "GET", "HEAD", "POST", "DELETE", ...
  std::string path;                          // as sent: still percent-encoded, no query
  std::map<std::string, std::string> query;  // decoded
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string body;  // empty: no body
  std::string content_type = "application/json";
};

// Answers every request whose path starts with its prefix. Called on the server's threads,
// several at once.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpRoute {
  std::string prefix;  // "/v1/"
  HttpHandler handler;
};

class HttpServer {
 public:
  // "" when healthy, else what is wrong (one line per problem). Called on the server's
  // thread, for each /healthz request.
  using HealthCheck = std::function<std::string()>;

  // Binds `addr` ("HOST:PORT"; port 0 picks a free one) and serves /metrics, /healthz and
  // `routes` (GET, HEAD, POST, PUT and DELETE). `registry` must outlive the server. A port
  // that cannot be bound is an IOError naming `addr`.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& addr,
                                                   MetricsRegistry& registry, HealthCheck health,
                                                   std::vector<HttpRoute> routes = {});
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
