// Endpoints, pooled connections and failover of the etcd client; see etcd_http.h.
#include "cluster/etcd_http.h"

#include <httplib.h>

#include <charconv>
#include <thread>

#include "base/logging.h"
#include "cluster/etcd_json.h"
#include "cluster/loggers.h"

namespace sluice::cluster {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// etcd errors (HTTP 503) that it gives before proposing the request to raft: a write that
// got one was not applied and may go to another member.
bool RejectedBeforeProposal(const Status& s) {
  for (std::string_view m :
       {"etcdserver: no leader", "etcdserver: not capable", "etcdserver: too many requests",
        "etcdserver: unhealthy cluster", "etcdserver: server stopped"}) {
    if (s.message().find(m) != std::string::npos) return true;
  }
  return false;
}

// Whether `text` is exactly one whole JSON object (give or take whitespace).
bool IsOneJsonObject(std::string_view text) {
  JsonObjectSplitter splitter(text.size() + 1);
  std::vector<std::string> objects;
  return splitter.Feed(text, &objects).ok() && objects.size() == 1 && splitter.pending() == 0;
}

}  // namespace

Result<EtcdEndpoint> ParseEtcdEndpoint(std::string_view url) {
  EtcdEndpoint e;
  e.url = std::string(url);
  std::string_view rest = url;
  if (rest.starts_with("https://")) {
    return InvalidArgumentError("etcd endpoint '{}': https is not supported", url);
  }
  if (rest.starts_with("http://")) rest.remove_prefix(7);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == rest.size()) {
    return InvalidArgumentError("etcd endpoint '{}': expected http://host:port", url);
  }
  std::string_view host = rest.substr(0, colon);
  std::string_view port = rest.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
  if (host.empty() || host.find('/') != std::string_view::npos || ec != std::errc() ||
      end != port.data() + port.size() || e.port <= 0 || e.port > 65535) {
    return InvalidArgumentError("etcd endpoint '{}': expected http://host:port", url);
  }
  e.host = std::string(host);
  if (!url.starts_with("http://")) e.url = "http://" + std::string(url);
  return e;
}

std::unique_ptr<httplib::Client> MakeHttpClient(const EtcdEndpoint& e, milliseconds connect_timeout,
                                                milliseconds io_timeout) {
  auto client = std::make_unique<httplib::Client>(e.host, e.port);
  client->set_connection_timeout(connect_timeout);
  client->set_read_timeout(io_timeout);
  client->set_write_timeout(io_timeout);
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);
  return client;
}

EtcdHttp::EtcdHttp(std::vector<EtcdEndpoint> endpoints, EtcdHttpOptions options)
    : endpoints_(std::move(endpoints)), options_(options), idle_(endpoints_.size()) {}

EtcdHttp::~EtcdHttp() = default;

std::unique_ptr<httplib::Client> EtcdHttp::Take(size_t endpoint, milliseconds timeout) {
  std::unique_ptr<httplib::Client> client;
  {
    std::lock_guard lock(mu_);
    auto& idle = idle_[endpoint];
    if (!idle.empty()) {
      client = std::move(idle.back());
      idle.pop_back();
    }
  }
  milliseconds connect = std::min(options_.connect_timeout, timeout);
  if (client == nullptr) return MakeHttpClient(endpoints_[endpoint], connect, timeout);
  client->set_connection_timeout(connect);
  client->set_read_timeout(timeout);
  client->set_write_timeout(timeout);
  return client;
}

void EtcdHttp::Give(size_t endpoint, std::unique_ptr<httplib::Client> client) {
  constexpr size_t kMaxIdlePerEndpoint = 8;
  std::lock_guard lock(mu_);
  if (idle_[endpoint].size() < kMaxIdlePerEndpoint) idle_[endpoint].push_back(std::move(client));
}

EtcdHttp::Attempt EtcdHttp::Once(size_t endpoint, std::string_view path, const std::string& body,
                                 milliseconds timeout) {
  const EtcdEndpoint& e = endpoints_[endpoint];
  auto client = Take(endpoint, timeout);
  httplib::Request req;
  req.method = "POST";
  req.path = std::string(path);
  req.body = body;
  req.set_header("Content-Type", "application/json");
  int status = 0;  // 0: no status line read
  std::string answer;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    answer.append(data, len);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool ok = client->send(req, res, err);
  bool reusable = ok;
  if (!ok && err == httplib::Error::Read && status != 0 && IsOneJsonObject(answer)) {
    // The gateway ends its error answers with a chunked trailer (Grpc-Trailer-Content-
    // Type), which cpp-httplib 0.11 cannot read: the body is whole, the connection is not.
    ok = true;
  }
  if (!ok) {
    // A failed connect never sent a byte; anything later may have reached etcd.
    bool not_sent = err == httplib::Error::Connection || err == httplib::Error::ConnectionTimeout;
    return {not_sent ? Outcome::kNotSent : Outcome::kMaybeApplied,
            IOError("etcd {}{}: {}", e.url, path, httplib::to_string(err))};
  }
  if (reusable) Give(endpoint, std::move(client));
  if (status >= 500) {
    Status error = IOError("etcd {}{}: HTTP {}", e.url, path, status);
    if (!answer.empty() && answer.front() == '{') {
      auto parsed = ParseHeaderResponse(answer);
      if (!parsed.ok()) error = parsed.status().WithContext(fmt::format("{}{}", e.url, path));
    }
    return {RejectedBeforeProposal(error) ? Outcome::kNotSent : Outcome::kMaybeApplied, error};
  }
  if (status != 200 && (answer.empty() || answer.front() != '{')) {
    // Not an etcd error object: not an etcd gateway, or a path it does not have.
    return {Outcome::kAnswered, IOError("etcd {}{}: HTTP {}", e.url, path, status)};
  }
  return {Outcome::kAnswered, std::move(answer)};
}

Result<std::string> EtcdHttp::PostTo(size_t endpoint, std::string_view path,
                                     const std::string& body) {
  if (endpoint >= endpoints_.size()) return InvalidArgumentError("no etcd endpoint {}", endpoint);
  return Once(endpoint, path, body, options_.request_timeout).body;
}

Result<std::string> EtcdHttp::Post(std::string_view path, const std::string& body, Retry retry) {
  const auto deadline = Clock::now() + options_.call_timeout;
  const size_t n = endpoints_.size();
  size_t next = preferred();
  Status last = IOError("etcd {}: no endpoint tried", path);
  int attempts = 0;
  while (true) {
    for (size_t k = 0; k < n; ++k) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) break;
      size_t idx = (next + k) % n;
      ++attempts;
      Attempt a = Once(idx, path, body, std::min(options_.request_timeout, left));
      if (a.outcome == Outcome::kAnswered) {
        preferred_.store(idx, std::memory_order_relaxed);
        return std::move(a.body);
      }
      last = a.body.status();
      // The next call (of any thread) starts past a member that failed, rather than
      // spending its own timeout on it again (a member held silent costs one timeout).
      size_t failed = idx;
      preferred_.compare_exchange_strong(failed, (idx + 1) % n, std::memory_order_relaxed);
      if (a.outcome == Outcome::kMaybeApplied && retry == Retry::kIfNotSent) {
        return IOError("{} (the request may have been applied)", last.message());
      }
      SLUICE_LOG(kLog, kDebug, "{}; trying the next endpoint", last.message());
    }
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) break;
    std::this_thread::sleep_for(std::min(options_.retry_backoff, left));
    next = (next + 1) % n;
  }
  return IOError("{} (gave up after {} attempts on {} endpoints)", last.message(), attempts, n);
}

}  // namespace sluice::cluster
