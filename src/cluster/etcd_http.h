// The HTTP/1.1 side of the etcd client: endpoint URLs, a pool of keep-alive connections per
// endpoint, and the failover rule every unary call follows. cpp-httplib stays in the .cc
// files of this module.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace httplib {
class Client;
}

namespace sluice::cluster {

struct EtcdEndpoint {
  std::string host;
  int port = 0;
  std::string url;  // "http://host:port", as given
};

// "http://host:port" or "host:port" (https is not supported: etcd's client port on loopback
// or a private network); IPv6 literals in brackets.
Result<EtcdEndpoint> ParseEtcdEndpoint(std::string_view url);

// A new httplib client for `e` with the given connect and read/write timeouts.
std::unique_ptr<httplib::Client> MakeHttpClient(const EtcdEndpoint& e,
                                                std::chrono::milliseconds connect_timeout,
                                                std::chrono::milliseconds io_timeout);

struct EtcdHttpOptions {
  // One HTTP exchange with one endpoint: connect, send, the whole answer.
  std::chrono::milliseconds request_timeout{2000};
  std::chrono::milliseconds connect_timeout{500};
  // A whole call, over every endpoint and round tried; a call ends with the last error
  // when it runs out.
  std::chrono::milliseconds call_timeout{10000};
  // Pause after every endpoint failed once, before the next round.
  std::chrono::milliseconds retry_backoff{100};
};

// Thread-safe: every call takes a connection of its own from the pool.
class EtcdHttp {
 public:
  // Whether a call may go to another endpoint after one that may have received it.
  enum class Retry {
    kAlways,     // reads, and writes whose repetition is harmless (lease keepalive)
    kIfNotSent,  // writes: only after a failure that proves etcd did not apply them
  };

  EtcdHttp(std::vector<EtcdEndpoint> endpoints, EtcdHttpOptions options);
  ~EtcdHttp();

  // POSTs `body` to `path` (e.g. "/v3/kv/range"), starting with the endpoint that answered
  // last (or the one after the endpoint that failed last). Returns the body of the first answer
  // that is not a failure of the endpoint: a 2xx, or an etcd error that any member would give (a
  // 4xx: the parser makes it a Status). Connection failures and 5xx answers move on to the next
  // endpoint (for kIfNotSent, only those where etcd surely did not apply the request; otherwise
  // IOError saying the outcome is unknown).
  Result<std::string> Post(std::string_view path, const std::string& body, Retry retry);
  // The same against one endpoint only, once (Status of a given member).
  Result<std::string> PostTo(size_t endpoint, std::string_view path, const std::string& body);

  const std::vector<EtcdEndpoint>& endpoints() const { return endpoints_; }
  const EtcdHttpOptions& options() const { return options_; }
  // The endpoint the next call starts with.
  size_t preferred() const { return preferred_.load(std::memory_order_relaxed); }

 private:
  enum class Outcome { kAnswered, kNotSent, kMaybeApplied };
  struct Attempt {
    Outcome outcome;
    Result<std::string> body;
  };
  Attempt Once(size_t endpoint, std::string_view path, const std::string& body,
               std::chrono::milliseconds timeout);
  std::unique_ptr<httplib::Client> Take(size_t endpoint, std::chrono::milliseconds timeout);
  void Give(size_t endpoint, std::unique_ptr<httplib::Client> client);

  const std::vector<EtcdEndpoint> endpoints_;
  const EtcdHttpOptions options_;
  std::atomic<size_t> preferred_{0};
  std::mutex mu_;
  std::vector<std::vector<std::unique_ptr<httplib::Client>>> idle_;  // guarded by mu_
};

}  // namespace sluice::cluster
