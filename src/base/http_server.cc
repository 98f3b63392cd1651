#include "base/http_server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <memory>
#include <optional>

#include "base/strings.h"

namespace sluice {

Result<std::pair<std::string, int>> SplitHostPort(const std::string& addr,
                                                  const std::string& what) {
  size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) {
    return InvalidArgumentError("{}: '{}' is not HOST:PORT", what, addr);
  }
  std::string host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = -1;
  const char* begin = addr.data() + colon + 1;
  const char* end = addr.data() + addr.size();
  auto [p, ec] = std::from_chars(begin, end, port);
  if (ec != std::errc() || p != end || port < 0 || port > 65535) {
    return InvalidArgumentError("{}: '{}' has no port in 0..65535", what, addr);
  }
  return std::make_pair(host, port);
}

const std::string* HttpRequest::Header(std::string_view name) const {
  auto it = headers.find(std::string(name));
  return it == headers.end() ? nullptr : &it->second;
}

namespace {

// The library's request as a route sees it.
HttpRequest FromLibrary(const httplib::Request& req) {
  HttpRequest r;
  r.method = req.method;
  std::string_view target = req.target;
  if (size_t q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
  r.path = target.empty() || target[0] != '/' ? req.path : std::string(target);
  for (const auto& [k, v] : req.params) r.query.emplace(k, v);
  for (const auto& [k, v] : req.headers) {
    std::string name = AsciiLower(k);
    // httplib adds these itself; they are not the client's.
    if (name == "remote_addr" || name == "remote_port" || name == "local_addr" ||
        name == "local_port") {
      continue;
    }
    auto [it, fresh] = r.headers.emplace(name, v);
    if (!fresh) it->second += ", " + v;
  }
  r.body = req.body;
  r.remote_addr = req.remote_addr;
  return r;
}

class SinkStream : public HttpStream {
 public:
  explicit SinkStream(httplib::DataSink& sink) : sink_(sink) {}
  bool Write(std::string_view bytes) override {
    if (!open_) return false;
    if (bytes.empty()) return true;
    open_ = sink_.is_writable() && sink_.write(bytes.data(), bytes.size());
    return open_;
  }

 private:
  httplib::DataSink& sink_;
  bool open_ = true;
};

// Takes "br" out of the request's Accept-Encoding: "gzip" when it offers gzip too, else
// nothing (an answer uncompressed).
void StripBrotli(httplib::Request& req) {
  auto it = req.headers.find("Accept-Encoding");
  if (it == req.headers.end()) return;
  const std::string offered = AsciiLower(it->second);
  if (offered.find("br") == std::string::npos) return;
  bool gzip = false;
  for (std::string_view rest = offered; !rest.empty();) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? "" : rest.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    const size_t semi = item.find(';');
    std::string_view name = item.substr(0, semi);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    const bool refused = semi != std::string_view::npos &&
                         item.substr(semi).find("q=0") != std::string_view::npos &&
                         item.substr(semi).find_first_of("123456789") == std::string_view::npos;
    if (name == "gzip" && !refused) gzip = true;
  }
  req.headers.erase("Accept-Encoding");
  if (gzip) req.headers.emplace("Accept-Encoding", "gzip");
}

void ToLibrary(HttpResponse out, httplib::Response& res) {
  res.status = out.status;
  for (auto& [k, v] : out.headers) {
    // Never a CORS grant: no other site's page may read what this port answers.
    if (AsciiLower(k).starts_with("access-control-")) continue;
    res.set_header(k, v);
  }
  if (out.stream) {
    res.set_chunked_content_provider(
        out.content_type, [stream = std::move(out.stream)](size_t, httplib::DataSink& sink) {
          SinkStream s(sink);
          stream(s);
          sink.done();
          return true;
        });
  } else if (!out.body.empty() && res.has_header("Content-Encoding")) {
    // Already encoded (the console's gzipped files): httplib would compress a text body
    // again, and say so in a second Content-Encoding; a sized provider it leaves alone.
    auto body = std::make_shared<std::string>(std::move(out.body));
    res.set_content_provider(body->size(), out.content_type.c_str(),
                             [body](size_t offset, size_t length, httplib::DataSink& sink) {
                               return sink.write(body->data() + offset, length);
                             });
  } else if (!out.body.empty()) {
    res.set_content(out.body, out.content_type.c_str());
  }
}

struct HostPort {
  std::string host;  // lower case, IPv6 without brackets, no trailing dot
  std::string port;  // digits, or "" when not given
};

// "name", "name:80", "[::1]:80" (a Host header, or an origin's authority).
std::optional<HostPort> ParseAuthority(std::string_view v) {
  HostPort out;
  std::string_view rest;
  if (v.starts_with('[')) {
    const size_t close = v.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = AsciiLower(v.substr(1, close - 1));
    rest = v.substr(close + 1);
  } else {
    const size_t colon = v.find(':');
    out.host = AsciiLower(v.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : v.substr(colon);
  }
  if (!rest.empty()) {
    if (rest[0] != ':' || rest.size() < 2 || rest.size() > 6 ||
        rest.find_first_not_of("0123456789", 1) != std::string_view::npos) {
      return std::nullopt;
    }
    out.port = std::string(rest.substr(1));
  }
  if (out.host.ends_with('.')) out.host.pop_back();
  if (out.host.empty()) return std::nullopt;
  return out;
}

bool IsIpLiteral(const std::string& host) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

bool Listed(const HttpBrowserGuard& g, const std::string& host) {
  return std::find(g.allowed_hosts.begin(), g.allowed_hosts.end(), host) != g.allowed_hosts.end();
}

bool Safelisted(std::string_view content_type) {
  const std::string essence = AsciiLower(Trim(content_type.substr(0, content_type.find(';'))));
  return essence == "application/x-www-form-urlencoded" || essence == "multipart/form-data" ||
         essence == "text/plain";
}

}  // namespace

std::string BrowserRefusal(const HttpBrowserGuard& guard, const HttpRequest& req,
                           bool accepts_forms) {
  if (!guard.enabled || req.path == "/healthz" || req.path == "/readyz") return "";
  const bool any_host = Listed(guard, "*");
  std::optional<HostPort> host;
  if (const std::string* h = req.Header("host")) {
    host = ParseAuthority(*h);
    if (!host.has_value()) return "a malformed Host header";
    if (!any_host && !IsIpLiteral(host->host) && !Listed(guard, host->host)) {
      return fmt::format(
          "Host '{}' is not an allowed name for this port (against DNS rebinding; "
          "http.allowed_hosts lists more)",
          host->host.substr(0, 128));
    }
  }
  if (const std::string* origin = req.Header("origin")) {
    std::string_view o = *origin;
    const size_t sep = o.find("://");
    const std::string scheme = sep == std::string_view::npos ? "" : AsciiLower(o.substr(0, sep));
    std::optional<HostPort> from;
    if (scheme == "http" || scheme == "https") from = ParseAuthority(o.substr(sep + 3));
    if (!from.has_value()) {
      return fmt::format("requests from other sites' pages are refused (Origin '{}')",
                         o.substr(0, 128));
    }
    const std::string default_port = scheme == "https" ? "443" : "80";
    const std::string from_port = from->port.empty() ? default_port : from->port;
    bool same = false;
    if (host.has_value()) {
      const std::string host_port = host->port.empty() ? default_port : host->port;
      same = from_port == host_port &&
             (from->host == host->host || (Listed(guard, from->host) && !any_host));
    } else {
      same = Listed(guard, from->host);
    }
    if (!same) {
      return fmt::format("requests from other sites' pages are refused (Origin '{}')",
                         o.substr(0, 128));
    }
  }
  if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS" || accepts_forms) {
    return "";
  }
  if (guard.preflighted_methods_pass && req.method != "POST") return "";
  for (const char* proof : {"authorization", "x-sluice-request", "x-client-version",
                            "x-iceberg-access-delegation", "idempotency-key"}) {
    if (req.Header(proof) != nullptr) return "";
  }
  if (const std::string* type = req.Header("content-type"); type != nullptr && !Safelisted(*type)) {
    return "";
  }
  return fmt::format(
      "a {} without an X-Sluice-Request header, an Authorization header or a JSON body is "
      "refused: it could be another site's form",
      req.method);
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr,
                                                      MetricsRegistry& registry, HealthCheck health,
                                                      std::vector<HttpRoute> routes,
                                                      HttpServerOptions options) {
  ASSIGN_OR_RETURN(auto host_port, SplitHostPort(addr, "--http-addr"));
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->host_ = host_port.first;
  // A connection holds one of the server's threads from its first request until it ends,
  // including httplib's wait for a next request on it (keep-alive), also after its client
  // went: the front door ends the server's side only when the server does. With 8 threads
  // and a 5 s wait, a ninth connection within 5 s of eight others waited for one of them
  // (seconds, for a page's API calls). More threads (a browser opens 6 connections, live
  // streams hold theirs) and a 1 s wait.
  s->server_->new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  s->server_->set_keep_alive_timeout(1);
  // httplib sets SO_REUSEPORT too, which lets a second process bind a port in use.
  s->server_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    // Accepted sockets inherit it: httplib writes a response's head and body apart, and
    // without it the body waited for the client's delayed ACK of the head (40 ms per
    // answer on loopback, measured by `sluice bench console`).
    ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  });
  // The request as routes see it, with the client's address when behind a proxy.
  auto from = [peer_of = options.peer_of](const httplib::Request& req) {
    HttpRequest r = FromLibrary(req);
    if (peer_of) r.remote_addr = peer_of(req.remote_addr, req.remote_port);
    return r;
  };
  // The prefixes of routes that take forms, for the browser guard.
  std::vector<std::string> form_prefixes;
  for (const HttpRoute& route : routes) {
    if (route.accepts_forms) form_prefixes.push_back(route.prefix);
  }
  {
    s->server_->set_pre_routing_handler([peer_of = options.peer_of, guard = options.browser_guard,
                                         form_prefixes, from](const httplib::Request& req,
                                                              httplib::Response& res) {
      // httplib answers in brotli when the client takes it, at brotli's slowest quality
      // (11): 250 ms to compress the console's 135 KB list of 1,000 topics, 10 times the
      // list itself, and worse on a streamed query. Its gzip is fast and compresses that
      // list to 3 KB: the request is made to offer gzip only. (The request object is not
      // const in httplib: it is handed on as const.)
      StripBrotli(const_cast<httplib::Request&>(req));
      if (peer_of && peer_of(req.remote_addr, req.remote_port).empty()) {
        res.status = 403;
        res.set_content("connect to the HTTP port (http.addr), not to this one\n", "text/plain");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (guard.enabled) {
        const HttpRequest r = from(req);
        bool forms = false;
        for (const std::string& p : form_prefixes) forms |= r.path.starts_with(p);
        if (std::string why = BrowserRefusal(guard, r, forms); !why.empty()) {
          res.status = 403;
          res.set_content("sluice: " + why + "\n", "text/plain");
          return httplib::Server::HandlerResponse::Handled;
        }
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
  }
  // Runs the authentication hook: true when `req` may go on (its principal set), else
  // `res` holds the refusal.
  auto admit = [auth = options.authenticate](HttpRequest& req, httplib::Response& res) {
    if (!auth) return true;
    HttpAuthResult verdict = auth(req);
    if (verdict.allowed) {
      req.principal = std::move(verdict.principal);
      return true;
    }
    ToLibrary(std::move(verdict.refusal), res);
    return false;
  };
  const bool guard_metrics = options.authenticate_metrics && options.authenticate;
  s->server_->Get("/metrics", [&registry, admit, from, guard_metrics](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (guard_metrics) {
      HttpRequest r = from(req);
      if (!admit(r, res)) return;
    }
    res.set_content(registry.Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  // /healthz and /readyz: 200 with `ok_text`, or 503 with what `check` says is wrong.
  auto probe = [admit, from, guard_metrics](HealthCheck check, std::string ok_text) {
    return [check = std::move(check), ok_text = std::move(ok_text), admit, from, guard_metrics](
               const httplib::Request& req, httplib::Response& res) {
      if (guard_metrics) {
        HttpRequest r = from(req);
        if (!admit(r, res)) return;
      }
      std::string problems = check ? check() : "";
      if (problems.empty()) {
        res.set_content(ok_text, "text/plain");
      } else {
        res.status = 503;
        res.set_content(problems + "\n", "text/plain");
      }
    };
  };
  s->server_->Get("/healthz", probe(health, "ok\n"));
  s->server_->Get("/readyz",
                  options.readiness ? probe(options.readiness, "ready\n") : probe(health, "ok\n"));
  for (HttpRoute& route : routes) {
    // httplib matches patterns as regular expressions over the decoded path; the handler
    // gets the path as sent (req.target), so that an encoded '/' or 0x1F survives.
    std::string pattern;
    for (char c : route.prefix) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) pattern += '\\';
      pattern += c;
    }
    pattern += ".*";
    auto handler = [h = std::move(route.handler), login = route.needs_login, admit, from](
                       const httplib::Request& req, httplib::Response& res) {
      HttpRequest r = from(req);
      if (login && !admit(r, res)) return;
      ToLibrary(h(r), res);
    };
    s->server_->Get(pattern, handler);  // GET and HEAD
    s->server_->Post(pattern, handler);
    s->server_->Put(pattern, handler);
    s->server_->Delete(pattern, handler);
  }
  // A CORS preflight is answered without granting anything: the browser then refuses to
  // send the request.
  s->server_->Options(".*", [](const httplib::Request&, httplib::Response& res) {
    res.status = 204;
    res.set_header("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS");
  });
  if (host_port.second == 0) {
    s->port_ = s->server_->bind_to_any_port(s->host_);
  } else {
    s->port_ = s->server_->bind_to_port(s->host_, host_port.second) ? host_port.second : -1;
  }
  if (s->port_ <= 0) return IOError("--http-addr: cannot listen on {}", addr);
  auto ended = std::make_shared<std::atomic<bool>>(false);
  s->thread_ = std::thread([server = s->server_.get(), ended] {
    server->listen_after_bind();
    ended->store(true);
  });
  // httplib's stop() does nothing before the listening loop runs, so a Stop() right after
  // Start() would leave it running forever: wait for it here (or for its end, if it failed).
  while (!s->server_->is_running() && !ended->load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!s->server_->is_running()) return IOError("--http-addr: cannot serve on {}", addr);
  return s;
}

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpServer::~HttpServer() { Stop(); }

}  // namespace sluice
