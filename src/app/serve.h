// ServeProcess: the composition root of `sluice serve`. From one Config (the YAML file with
// the command line's flags set over it) it builds and wires the process: the Kafka broker
// (broker::KafkaService), the pipelines of a folder (PipelineSet), the HTTP port (metrics,
// health, the Iceberg REST catalog of the warehouse) and the query server with its engine.
// The command line only parses flags into the Config and waits for a signal; tests can run
// the same process in-process.
//
// Lifecycle: Start on a controlling thread (every setting is checked before anything
// listens), then Stop once from the same thread (the destructor stops too). Stop runs in
// the order that loses nothing: query sessions end, pipelines finish and commit their
// batches to the still-running broker, the HTTP port closes, the broker drains and
// flushes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/pipeline_set.h"
#include "base/config.h"
#include "base/logging.h"
#include "base/status.h"

namespace sluice {
class HttpServer;
namespace broker {
class KafkaService;
}
namespace net {
class TlsContext;
}
namespace lake {
class RestCatalog;
}
namespace query {
class QueryEngine;
class QueryServer;
}  // namespace query
}  // namespace sluice

namespace sluice::console {
class ConsoleApi;
class PipelineControl;
}  // namespace sluice::console

namespace sluice::app {

class HttpFrontDoor;
class SchemaRegistryPort;

struct ServeOptions {
  // `--pipelines DIR` ("": <data_dir>/pipelines, made when missing; "off": none) and the
  // budget of their DuckDB memory limits (0: half the machine's memory).
  std::string pipelines_dir;
  int64_t pipelines_memory_budget_bytes = 0;
  // Called with each line `sluice serve` prints as a part starts listening ("serving Kafka
  // on ...", "metrics on ...", ...), in order; tests and scripts read the ports from them.
  std::function<void(const std::string&)> on_banner;
  // `sluice serve --check-config`: every setting and pipeline file is checked as Start
  // would, and nothing is made, opened or listened on; Start then returns null, having
  // said through on_banner what would run.
  bool check_only = false;
};

// `log:` (log.level, log.format): what `sluice serve` logs and how. Checked by Start;
// the command line applies it before starting and on SIGHUP.
struct LogSettings {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
};
Result<LogSettings> LogSettingsFrom(const Config& config);

// Every key `sluice serve` reads, gathered from the modules that read them (the broker's,
// the query server's and this root's own): a key outside it is an error naming it and
// where it was set.
std::vector<std::string_view> ServeConfigKeys();

class ServeProcess {
 public:
  // Errors are InvalidArgument for a setting (the message names it and where it was set)
  // and other codes for what failed while starting.
  static Result<std::unique_ptr<ServeProcess>> Start(const Config& config,
                                                     const ServeOptions& options);
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // The error of the broker's final close, if any. Idempotent. /readyz answers 503
  // "stopping" from its start.
  Status Stop();

  // "" when the process takes work (/readyz): started, not stopping, the broker a member
  // of its cluster (single node: always) and every pipeline not stopped by hand running;
  // otherwise one line per reason. Any thread.
  std::string Readiness() const;

  uint16_t kafka_port() const;
  // SIGHUP: the tls: section's certificate and key read again; open connections keep
  // theirs, new ones take the new ones; a file that does not load keeps the old in use
  // (the error says why). OK and nothing done without a tls: section.
  Status ReloadTls();
  bool has_tls() const { return tls_ != nullptr; }
  int http_port() const;             // 0: off
  int pg_port() const;               // 0: off
  int schema_registry_port() const;  // 0: off
  SchemaRegistryPort* schema_registry() { return schema_registry_.get(); }
  PipelineSet* pipelines() { return pipelines_.get(); }
  broker::KafkaService& kafka() { return *kafka_; }

 private:
  ServeProcess();

  // Destroyed bottom up: the HTTP port (its health check reads the pipelines) before the
  // pipelines, the pipelines (they commit to the broker) before the broker.
  std::unique_ptr<lake::RestCatalog> catalog_;
  std::unique_ptr<broker::KafkaService> kafka_;
  std::shared_ptr<net::TlsContext> tls_;                 // the tls: section's, or null
  std::unique_ptr<SchemaRegistryPort> schema_registry_;  // after the broker, before pipelines
  std::unique_ptr<PipelineSet> pipelines_;
  std::unique_ptr<console::PipelineControl> pipeline_control_;  // over pipelines_
  std::unique_ptr<console::ConsoleApi> console_;                // before http_, which calls it
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpFrontDoor> http_door_;  // http.addr's socket, in front of http_
  std::unique_ptr<query::QueryEngine> query_engine_;
  std::unique_ptr<query::QueryServer> query_server_;
  bool stopped_ = false;
  enum class Phase : int { kStarting, kReady, kStopping };
  std::atomic<Phase> phase_{Phase::kStarting};
};

}  // namespace sluice::app
