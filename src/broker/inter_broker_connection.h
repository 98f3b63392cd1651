// InterBrokerConnection: one blocking TCP connection from this broker to another one's
// inter-broker address, speaking Kafka's framing with sluice's codec: a bounded
// non-blocking connect, whole-frame writes, reads with a timeout, and one request/answer
// round trip that checks the answer's size and correlation id. Shared by the follower's
// ReplicaFetcher and the InterBrokerSender (docs/design/0018-cluster.md, decision 5 and
// "txncluster").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"
#include "net/tls.h"
#include "net/transport.h"

namespace sluice::broker {

// How this broker speaks to the others' inter-broker listener (kafka.inter_broker_listener;
// docs/design/0019-security.md): plaintext, TLS (the server verified against ca_file by
// the address it is reached at, this broker's own certificate offered for client
// authentication), SASL, or both. Every broker of a cluster uses the same listener name.
struct InterBrokerSecurity {
  std::string listener = "PLAINTEXT";
  bool tls = false;
  net::TlsClientOptions tls_client;  // server_name is set per connection
  std::string sasl_mechanism;        // empty: no SASL; else PLAIN or SCRAM-SHA-256
  std::string sasl_user;
  std::string sasl_password;
};

// Used by one thread (the fetcher's or the sender's); Shutdown() may be called from any
// other thread, at any time, and ends a connect, send or read in progress and every later
// one (the object is then done: Connect fails).
class InterBrokerConnection {
 public:
  // `security` null: plaintext.
  InterBrokerConnection(std::string host, int32_t port, Clock* clock = Clock::Real(),
                        std::shared_ptr<const InterBrokerSecurity> security = nullptr);
  ~InterBrokerConnection();
  InterBrokerConnection(const InterBrokerConnection&) = delete;
  InterBrokerConnection& operator=(const InterBrokerConnection&) = delete;

  // Connects unless connected; a numeric address skips the resolver. Bounded by
  // `timeout_ms` (as Kafka's NetworkClient bounds a connection setup), and so are the TLS
  // handshake and the SASL exchange that follow when the security asks for them.
  Status Connect(int64_t timeout_ms);
  bool connected() const { return fd_ >= 0; }
  // Closes the socket (a later Connect opens a new one).
  void Close();
  // Any thread: see the class comment.
  void Shutdown();

  Status SendAll(std::span<const uint8_t> bytes);
  // Reads exactly `n` bytes, each wait bounded by `timeout_ms`.
  Status ReadExactly(size_t n, std::vector<uint8_t>* out, int timeout_ms);
  // Whether a failed Connect is worth a warning: the other broker's security refused this
  // one (a certificate, a SASL login: a configuration to fix), not a peer that is down or
  // stopping (IOError, Aborted: debug). The same refusal warns at most once a minute.
  bool WarnAbout(const Status& connect_failure);

  // One round trip: a request header (`api`, `version`, the next correlation id,
  // `client_id`) and the body `encode` writes; then the answer's size (at most
  // `max_bytes`), the answer, and its header (correlation id checked). Returns the
  // answer's bytes; `*body_at` is where its body starts. Any error leaves the connection
  // unusable: the caller Close()s it.
  Result<std::vector<uint8_t>> RoundTrip(kafka::ApiKey api, int16_t version,
                                         const std::string& client_id,
                                         const std::function<void(kafka::Writer&)>& encode,
                                         int timeout_ms, uint32_t max_bytes, size_t* body_at);

  const std::string& host() const { return host_; }
  int32_t port() const { return port_; }

 private:
  // Waits until the socket is ready for `want` (a transport's kWantRead/kWantWrite).
  Status Wait(net::IoResult::State want, int timeout_ms, const char* what);
  Status Authenticate(int timeout_ms);

  const std::string host_;
  const int32_t port_;
  Clock* const clock_;
  const std::shared_ptr<const InterBrokerSecurity> security_;
  std::unique_ptr<net::Transport> transport_;  // the owning thread's, while fd_ >= 0
  std::string last_warning_;                   // WarnAbout's, the owning thread's
  int64_t last_warning_ms_ = 0;
  std::mutex mu_;
  bool shut_down_ = false;  // guarded by mu_
  int fd_ = -1;             // written by the owning thread under mu_
  int32_t correlation_id_ = 0;
};

}  // namespace sluice::broker
