#include "base/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <memory>

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

void ToLibrary(HttpResponse out, httplib::Response& res) {
  res.status = out.status;
  for (auto& [k, v] : out.headers) res.set_header(k, v);
  if (out.stream) {
    res.set_chunked_content_provider(
        out.content_type, [stream = std::move(out.stream)](size_t, httplib::DataSink& sink) {
          SinkStream s(sink);
          stream(s);
          sink.done();
          return true;
        });
  } else if (!out.body.empty()) {
    res.set_content(out.body, out.content_type.c_str());
  }
}

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& addr,
                                                      MetricsRegistry& registry, HealthCheck health,
                                                      std::vector<HttpRoute> routes,
                                                      HttpServerOptions options) {
  ASSIGN_OR_RETURN(auto host_port, SplitHostPort(addr, "--http-addr"));
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->server_ = std::make_unique<httplib::Server>();
  s->host_ = host_port.first;
  // httplib sets SO_REUSEPORT too, which lets a second process bind a port in use.
  s->server_->set_socket_options([](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // The request as routes see it, with the client's address when behind a proxy.
  auto from = [peer_of = options.peer_of](const httplib::Request& req) {
    HttpRequest r = FromLibrary(req);
    if (peer_of) r.remote_addr = peer_of(req.remote_addr, req.remote_port);
    return r;
  };
  if (options.peer_of) {
    s->server_->set_pre_routing_handler(
        [peer_of = options.peer_of](const httplib::Request& req, httplib::Response& res) {
          if (!peer_of(req.remote_addr, req.remote_port).empty()) {
            return httplib::Server::HandlerResponse::Unhandled;
          }
          res.status = 403;
          res.set_content("connect to the HTTP port (http.addr), not to this one\n", "text/plain");
          return httplib::Server::HandlerResponse::Handled;
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
  s->server_->Get("/healthz", [health, admit, from, guard_metrics](const httplib::Request& req,
                                                                   httplib::Response& res) {
    if (guard_metrics) {
      HttpRequest r = from(req);
      if (!admit(r, res)) return;
    }
    std::string problems = health ? health() : "";
    if (problems.empty()) {
      res.set_content("ok\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content(problems + "\n", "text/plain");
    }
  });
  for (HttpRoute& route : routes) {
    // httplib matches patterns as regular expressions over the decoded path; the handler
    // gets the path as sent (req.target), so that an encoded '/' or 0x1F survives.
    std::string pattern;
    for (char c : route.prefix) {
      if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) pattern += '\\';
      pattern += c;
    }
    pattern += ".*";
    auto handler = [h = std::move(route.handler), admit, from](const httplib::Request& req,
                                                               httplib::Response& res) {
      HttpRequest r = from(req);
      if (!admit(r, res)) return;
      ToLibrary(h(r), res);
    };
    s->server_->Get(pattern, handler);  // GET and HEAD
    s->server_->Post(pattern, handler);
    s->server_->Put(pattern, handler);
    s->server_->Delete(pattern, handler);
  }
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
