// HttpServer: sluice's HTTP port (`--http-addr`): Prometheus metrics at /metrics, a
// health check at /healthz (200 "ok", or 503 with the reasons), and the routes other
// modules add under a path prefix (the Iceberg REST catalog's /v1/), with the request's
// headers, streamed responses (server-sent events), an authentication hook that runs
// before every route, and a guard against browsers made to call it from other sites
// (docs/design/0021-http-tokens-and-browser-safety.md). Loopback by default, like every
// listener of sluice.
//
// Lifecycle: Start() binds and serves on its own thread until Stop() or destruction.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
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
  // Names in lower case (HTTP's names are case-insensitive); a header sent more than once
  // has its values joined with ", ", as RFC 9110 allows for lists.
  std::map<std::string, std::string> headers;
  std::string body;
  std::string remote_addr;  // the peer's address
  // Who the authentication hook said sent it; "" without a hook.
  std::string principal;

  // The value of header `name` (lower case), or null.
  const std::string* Header(std::string_view name) const;
};

// The body of a streamed response, written chunk by chunk (chunked transfer encoding):
// server-sent events, long downloads.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Sends `bytes` as they are; false once the client has gone (stop producing then).
  virtual bool Write(std::string_view bytes) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string body;  // empty: no body
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // more response headers
  // When set, the body is this function's writes instead of `body`, sent as they come on
  // the server thread that answers the request; the response ends when it returns.
  std::function<void(HttpStream&)> stream;
};

// Answers every request whose path starts with its prefix. Called on the server's threads,
// several at once.
using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpRoute {
  std::string prefix;  // "/v1/"
  HttpHandler handler;
  // false: the authentication hook does not run (a login endpoint).
  bool needs_login = true;
  // true: a state-changing request needs no proof against cross-site forms (a login
  // endpoint that is a form by its spec); the Host and Origin checks still hold.
  bool accepts_forms = false;
};

// Decides who sent a request before its route runs: the principal (any text; it reaches
// the route as HttpRequest::principal), or the response to send instead (401 with a
// WWW-Authenticate header, 403).
struct HttpAuthResult {
  bool allowed = false;
  std::string principal;  // when allowed
  HttpResponse refusal;   // when not
};
using HttpAuthenticator = std::function<HttpAuthResult(const HttpRequest&)>;

// Browser safety, for a port a browser on the same machine or network can reach: a page
// from any site can make the browser send requests to it from inside the network the port
// trusts (a form, fetch without CORS, DNS rebinding). With the guard on, a request is refused (403,
// one line) when:
// - its Host is not an allowed name (DNS rebinding): allowed are `allowed_hosts`, IP
//   literals (no rebinding names them) and, with "*" listed, anything; a request without
//   Host (HTTP/1.0, never a browser) passes;
// - it has an Origin that is not this port's: "null", or another host or port than the
//   Host header's (unless the origin's host is in `allowed_hosts` and its port the same);
// - it changes something (any method but GET, HEAD and OPTIONS) without a sign that it is
//   not a simple cross-site request (which can carry only safelisted headers and a form,
//   multipart or text/plain body): an Authorization, X-Sluice-Request, X-Client-Version,
//   X-Iceberg-Access-Delegation or Idempotency-Key header, or another Content-Type. Routes
//   with accepts_forms are exempt.
// /healthz and /readyz are never checked. No response ever carries CORS headers (Access-Control-*).
struct HttpBrowserGuard {
  bool enabled = false;
  // Host names (lower case, IPv6 without brackets) requests may name; "*": any.
  std::vector<std::string> allowed_hosts;
  // PUT, DELETE and PATCH need no proof: a browser sends them to another site only after a
  // CORS preflight, which no route here approves (the Schema Registry's port, whose users
  // `curl -X DELETE` as Confluent's documentation does). POST still needs one.
  bool preflighted_methods_pass = false;
};

// Why the guard refuses `req` (one line), or "" when it may go on. `accepts_forms` as the
// route it goes to says.
std::string BrowserRefusal(const HttpBrowserGuard& guard, const HttpRequest& req,
                           bool accepts_forms);

struct HttpServerOptions {
  HttpAuthenticator authenticate;  // null: every request is allowed, principal ""
  // /metrics, /healthz and /readyz too (off: they stay open to whatever can reach the
  // port, as Prometheus and load balancers expect).
  bool authenticate_metrics = false;
  // /readyz: 200 "ready" when it returns "", else 503 with its lines (a service manager or
  // load balancer waits for 200). Null: /readyz answers as /healthz does.
  std::function<std::string()> readiness;
  // Behind a proxy on loopback (sluice serve's front door, which also does HTTPS): the
  // client's address for the proxy's connection from `addr`:`port`, "" for a connection
  // that did not come through the proxy — refused with 403, so that nobody bypasses the
  // proxy's TLS and limits. Null: HttpRequest::remote_addr is the peer's.
  std::function<std::string(const std::string& addr, int port)> peer_of;
  HttpBrowserGuard browser_guard;
};

class HttpServer {
 public:
  // The threads that answer requests (a connection holds one while it is open).
  static constexpr int kServerThreads = 32;
  // "" when healthy, else what is wrong (one line per problem). Called on the server's
  // thread, for each /healthz request.
  using HealthCheck = std::function<std::string()>;

  // Binds `addr` ("HOST:PORT"; port 0 picks a free one) and serves /metrics, /healthz,
  // /readyz and `routes` (GET, HEAD, POST, PUT and DELETE). `registry` must outlive the server. A
  // port that cannot be bound is an IOError naming `addr`.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& addr,
                                                   MetricsRegistry& registry, HealthCheck health,
                                                   std::vector<HttpRoute> routes = {},
                                                   HttpServerOptions options = {});
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
