// InterBrokerChannel: requests from this broker to other brokers of its cluster (Kafka's
// InterBrokerSendThread, as the TransactionMarkerChannelManager and the
// AddPartitionsToTxnManager use it): one connection and one sender thread per destination
// broker, requests sent one at a time in the order given, each answer decoded and handed
// to its callback on the sender's thread. A broken answer (a cut or oversized frame, a
// wrong correlation id, a body that does not decode) or a lost connection fails the
// request with a Status and closes the connection; the next request connects again. No
// retries here: the callers retry as Kafka's do (the coordinator's markers, the
// producer's verification). docs/design/0018-cluster.md, "txncluster".
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "broker/inter_broker_connection.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::broker {

struct InterBrokerChannelOptions {
  std::string name = "inter-broker";  // the client id's prefix and the logs'
  int32_t node_id = -1;               // this broker
  int64_t connect_timeout_ms = 10000;
  // How long an answer may take (a WriteTxnMarkers waits for replication).
  int request_timeout_ms = 40000;
  uint32_t max_response_bytes = 16u << 20;
  Clock* clock = Clock::Real();
  std::shared_ptr<const InterBrokerSecurity> security;  // null: plaintext
};

// One request: its body, and what to do with the answer's body (or the failure).
struct InterBrokerRequest {
  kafka::ApiKey api = kafka::ApiKey::kApiVersions;
  int16_t version = 0;
  std::function<void(kafka::Writer&)> encode;
  // On the sender's thread, once: with OK and the reader at the answer's body, or with
  // the failure (and null). Returns the body's decode status: not OK closes the
  // connection.
  std::function<Status(const Status&, kafka::Reader*)> handle;
};

// The requests to one broker. Lifecycle: made by the channel, its thread runs until
// Stop(), which fails what is queued (Aborted) and joins it.
class InterBrokerSender {
 public:
  InterBrokerSender(const InterBrokerChannelOptions& options, int32_t destination, std::string host,
                    int32_t port);
  ~InterBrokerSender();
  InterBrokerSender(const InterBrokerSender&) = delete;
  InterBrokerSender& operator=(const InterBrokerSender&) = delete;

  // Any thread. After Stop or Retire the request fails at once (on the caller's thread).
  void Enqueue(InterBrokerRequest request);
  // Stops taking requests and returns what is queued (for the caller to fail), without
  // waiting for the thread (which may be the caller: a callback sending again); Stop
  // joins it later. The request under way fails on the sender's thread.
  std::deque<InterBrokerRequest> Retire();
  // Answers each of `items` with `why`.
  static void FailAll(std::deque<InterBrokerRequest> items, const Status& why);
  void Stop();
  const std::string& host() const { return host_; }
  int32_t port() const { return port_; }

 private:
  void Run();

  const InterBrokerChannelOptions& options_;
  const int32_t destination_;
  const std::string host_;
  const int32_t port_;
  const std::string client_id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<InterBrokerRequest> queue_;               // guarded by mu_
  bool stopping_ = false;                              // guarded by mu_
  const std::unique_ptr<InterBrokerConnection> conn_;  // the thread's; Stop shuts it down
  std::thread thread_;
};

// The senders of one purpose (markers, verifications), by destination node. Thread-safe.
// Lifecycle: Stop() (idempotent, also in the destructor) stops every sender; requests
// after it fail at once.
class InterBrokerChannel {
 public:
  explicit InterBrokerChannel(InterBrokerChannelOptions options);
  ~InterBrokerChannel();

  // Sends `request` to broker `node` at host:port (a new address replaces the sender:
  // what it had queued fails and is retried by its callers). Never waits for a sender's
  // thread, so a callback may send again.
  void Send(int32_t node, const std::string& host, int32_t port, InterBrokerRequest request);

  // The typed form: `done` gets the decoded answer or the failure, on the sender's thread
  // (or the caller's after Stop).
  template <typename Req, typename Resp>
  void Call(int32_t node, const std::string& host, int32_t port, kafka::ApiKey api, int16_t version,
            Req req, std::function<void(Result<Resp>)> done) {
    InterBrokerRequest r;
    r.api = api;
    r.version = version;
    r.encode = [req = std::move(req), version](kafka::Writer& w) { req.Encode(w, version); };
    r.handle = [done = std::move(done), version](const Status& st, kafka::Reader* body) {
      if (!st.ok()) {
        done(st);
        return Status::OK();
      }
      Resp resp;
      Status decoded = resp.Decode(*body, version);
      if (decoded.ok()) {
        done(std::move(resp));
      } else {
        done(decoded);
      }
      return decoded;
    };
    Send(node, host, port, std::move(r));
  }

  void Stop();
  const InterBrokerChannelOptions& options() const { return options_; }

 private:
  const InterBrokerChannelOptions options_;
  std::mutex mu_;
  std::map<int32_t, std::unique_ptr<InterBrokerSender>> senders_;  // guarded by mu_
  // Senders replaced by a new address: retired at once, joined by Stop.
  std::vector<std::unique_ptr<InterBrokerSender>> retired_;  // guarded by mu_
  bool stopped_ = false;                                     // guarded by mu_
};

}  // namespace sluice::broker
