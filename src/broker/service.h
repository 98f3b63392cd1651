// KafkaService: the broker as `sluice serve` runs it — the Broker (topics, logs, groups,
// SASL) behind a Server of one event loop per shard — with a graceful stop. The command
// line only parses flags into a ServeConfig and waits for a signal; everything else is
// here, so tests and benchmarks can run the same thing in-process.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "broker/broker.h"
#include "broker/serve_config.h"
#include "broker/server.h"

namespace sluice::broker {

// Lifecycle: Start() on a controlling thread, Stop() once from the same thread (the
// destructor stops too).
class KafkaService {
 public:
  static Result<std::unique_ptr<KafkaService>> Start(const ServeConfig& config);
  ~KafkaService();
  KafkaService(const KafkaService&) = delete;
  KafkaService& operator=(const KafkaService&) = delete;

  // Stops gracefully: new connections are refused, waiting fetches are answered, logs
  // are flushed so in-flight produces get their acks, and the responses still being
  // written get up to `drain_ms` to go out; then the loops stop and every log and the
  // offsets are flushed and closed. The error of the final close, if any.
  Status Stop(int64_t drain_ms = 5000);

  uint16_t port() const { return server_->port(); }
  // librdkafka properties for one of this process's own clients (topic(), the pipelines of
  // serve) to reach this broker as `principal` ("": the process itself, a super user;
  // docs/design/0020-data-authorization.md): bootstrap.servers of a SASL_PLAINTEXT listener,
  // else a SASL_SSL one, with the internal credential; else PLAINTEXT (User:ANONYMOUS).
  std::map<std::string, std::string> InternalClientProperties(
      std::string_view principal = "") const;
  int shard_count() const { return server_->shard_count(); }
  Broker& broker() { return *broker_; }
  Server& server() { return *server_; }

 private:
  KafkaService() = default;

  struct Listener {
    std::string protocol, host;
    uint16_t port = 0;
  };
  std::vector<Listener> listeners_;
  std::vector<std::string> sasl_mechanisms_;  // empty: no SASL
  std::unique_ptr<Broker> broker_;
  std::unique_ptr<Server> server_;
  bool stopped_ = false;
};

}  // namespace sluice::broker
