// ConsoleApi: the console's JSON API under /api/v1 (docs/design/0026-console.md): the
// cluster, topics, messages and consumer groups through KafkaOps as the HTTP user's
// principal, and what only this process knows (disk use, rates, memory, pipelines).
//
// Threads: Handle on the HTTP server's threads, several at once. Live message streams hold
// their thread while the client stays, at most kMaxLiveStreams at once; Stop() ends them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/http_server.h"
#include "base/metrics.h"
#include "console/history.h"
#include "console/kafka_ops.h"
#include "console/pipelines.h"

namespace sluice::query {
class QueryServer;
class LocalSession;
class WarehouseCatalog;
}  // namespace sluice::query
namespace sluice::schema {
class SchemaSource;
}  // namespace sluice::schema
namespace sluice::lake {
class CatalogAccess;
class Table;
}  // namespace sluice::lake

namespace sluice::console {

struct ConsoleApiOptions {
  // librdkafka properties for a client of this process's broker acting as `principal`
  // (HttpRequest::principal: "User:alice", or "" when the port has no login).
  std::function<kafka::client::Config(const std::string& principal)> client_for;
  // The earliest and latest offsets of partitions as `principal` may see them, read from
  // this process's broker without Kafka's protocol (InProcessKafka::Watermarks; nullopt for
  // one it does not answer, asked over Kafka then). Empty: all over Kafka.
  std::function<std::vector<std::optional<kafka::client::Watermarks>>(
      const std::string& principal, const std::vector<kafka::client::TopicPartition>&)>
      local_watermarks;
  // The broker's data directory, for disk use ("": not shown).
  std::string data_dir;
  MetricsRegistry* metrics = nullptr;  // required; outlives the API
  // The pipelines of `sluice serve --pipelines DIR`; null: no folder (the pipelines API
  // answers 404 PIPELINES_OFF). Outlives the API.
  PipelineControl* pipelines = nullptr;
  std::chrono::milliseconds kafka_timeout{10000};
  // When set (ConsoleRefusalFor), every request but /api/v1/openapi.json is refused with
  // it: 403 and its code.
  std::string refusal;
  std::string refusal_code;
  // Whether `principal` may check, preview, write, restart or remove pipelines: a pipeline
  // runs its SQL in DuckDB, its sinks and its {{ env }} templates as the process (it can
  // read and write the process's files and environment), so only whom the process would
  // trust with its own files. Null: everyone who may use the API.
  std::function<bool(const std::string& principal)> may_run_pipelines;
  // The lake's tables, as the query server finds them (null: 404 TABLES_OFF), and who may
  // read which (null: everyone who may use the API).
  std::shared_ptr<const query::WarehouseCatalog> tables;
  std::shared_ptr<const lake::CatalogAccess> table_access;
  // Whether this process runs a query server (SetQueryServer gives it once started).
  bool query_server_enabled = false;
  // The Schema Registry of this process: values and keys in its framing are shown decoded
  // (Avro, Protobuf, JSON Schema) to whoever may read the topic. Null: shown as bytes.
  std::shared_ptr<schema::SchemaSource> schemas;
  // The query server's user a request of `principal` runs SQL as, or why it may not
  // (an error: 403 SQL_NEEDS_LOGIN): the login's name, or without a login a name
  // of its own only where the query server lets everyone in (decision 12).
  std::function<Result<std::string>(const std::string& principal)> sql_user;
};

// Why the console must refuse every request of an HTTP port (code and message; empty
// when it may answer): without a login on the port it would act as the process itself, a
// super user, where Kafka asks for logins (CONSOLE_NEEDS_LOGIN); and a port reaching beyond
// this machine without TLS would carry its logins and data readable (CONSOLE_NEEDS_TLS).
struct ConsoleRefusal {
  std::string code, message;
};
ConsoleRefusal ConsoleRefusalFor(bool http_login, bool kafka_needs_login, bool loopback, bool tls);

class ConsoleApi {
 public:
  // Live message streams at once (each holds one of the HTTP server's 32 threads).
  static constexpr int kMaxLiveStreams = 4;
  // Queries streaming at once (each holds one of the HTTP server's threads while it runs
  // or waits for its admission turn).
  static constexpr int kMaxQueries = 8;

  explicit ConsoleApi(ConsoleApiOptions options);
  ~ConsoleApi();
  ConsoleApi(const ConsoleApi&) = delete;
  ConsoleApi& operator=(const ConsoleApi&) = delete;

  // The route to add to the HTTP server: prefix /api/v1/, behind its login.
  HttpRoute Route();
  HttpResponse Handle(const HttpRequest& req);
  // Ends the live streams (before the HTTP server stops, which waits for them) and the
  // history's sampler (before the broker stops: it reads watched groups' lag).
  void Stop() {
    stopping_.store(true);
    if (history_) history_->Stop();
  }
  // The running query server /api/v1/sql uses (null: none, 404 SQL_OFF): set once it has
  // started, cleared before it stops.
  void SetQueryServer(query::QueryServer* server) { query_server_.store(server); }

 private:
  // A KafkaOps taken from the idle ones of a principal, given back when the request ends
  // (none after a failure to make one: status() says why).
  class OpsLease {
   public:
    OpsLease(ConsoleApi* api, std::string principal, std::unique_ptr<KafkaOps> ops, Status st)
        : api_(api),
          principal_(std::move(principal)),
          ops_(std::move(ops)),
          status_(std::move(st)) {}
    OpsLease(OpsLease&&) = default;
    ~OpsLease();
    const Status& status() const { return status_; }
    KafkaOps* operator->() { return ops_.get(); }

   private:
    ConsoleApi* api_;
    std::string principal_;
    std::unique_ptr<KafkaOps> ops_;
    Status status_;
  };
  OpsLease Lease(const std::string& principal);

  HttpResponse Overview(const HttpRequest& req);
  HttpResponse Topics(const HttpRequest& req, const std::vector<std::string>& path);
  HttpResponse Messages(const HttpRequest& req, const std::string& topic);
  HttpResponse Live(const HttpRequest& req, const std::string& topic);
  HttpResponse Groups(const HttpRequest& req, const std::vector<std::string>& path);
  HttpResponse Pipelines(const HttpRequest& req, const std::vector<std::string>& path);
  HttpResponse PipelineHistory(const std::string& name, PipelineControl& control);
  // api_tables.cc
  HttpResponse Tables(const HttpRequest& req, const std::vector<std::string>& path);
  HttpResponse Maintenance(const HttpRequest& req, lake::Table table);
  // api_sql.cc
  HttpResponse Sql(const HttpRequest& req, const std::vector<std::string>& path);
  HttpResponse RunSql(const HttpRequest& req, query::QueryServer& server, const std::string& user);
  HttpResponse DownloadSql(const HttpRequest& req, query::QueryServer& server,
                           const std::string& user);
  HttpResponse SqlSchema(query::QueryServer& server, const std::string& user);

  // Bytes on disk per topic under data_dir: the last measure, taken by the history's
  // sampler every step while asked for within a minute (the first one on the request).
  std::map<std::string, int64_t> DiskUse();
  std::map<std::string, int64_t> RefreshDiskUse();
  void RefreshDiskUseIfAsked();

  ConsoleApiOptions options_;
  std::unique_ptr<History> history_;  // the charts' past (history.h)
  std::atomic<bool> stopping_{false};
  std::atomic<int> live_streams_{0};
  std::atomic<int> queries_{0};
  std::atomic<query::QueryServer*> query_server_{nullptr};
  // The queries streaming now by id, with the principal that may cancel them.
  struct RunningQuery {
    std::string principal;
    std::weak_ptr<query::LocalSession> session;
  };
  std::map<std::string, RunningQuery> running_;  // guarded by mu_

  std::mutex mu_;
  // Idle KafkaOps per principal (each is used by one request at a time).
  std::map<std::string, std::vector<std::unique_ptr<KafkaOps>>> idle_;  // guarded by mu_
  struct Sample {
    std::chrono::steady_clock::time_point at{};
    uint64_t bytes_in = 0, bytes_out = 0, records_in = 0;
    double bytes_in_rate = 0, bytes_out_rate = 0, records_in_rate = 0;
  };
  Sample sample_;  // guarded by mu_
  // Per topic: the messages count seen last and when, and the rate computed then.
  struct TopicSample {
    std::chrono::steady_clock::time_point at{};
    int64_t messages = 0;
    double rate = 0;
  };
  std::map<std::string, TopicSample> topic_samples_;    // guarded by mu_
  std::chrono::steady_clock::time_point disk_at_{};     // guarded by mu_
  std::chrono::steady_clock::time_point disk_asked_{};  // guarded by mu_
  std::map<std::string, int64_t> disk_;                 // guarded by mu_
};

}  // namespace sluice::console
