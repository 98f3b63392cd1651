// MakeSink (sink_factory.h): a sink section's type and keys to a src/sinks sink.
#include "pipeline/sink_factory.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "pipeline/schemas.h"
#include "schema/framed_encoder.h"
#include "sinks/console_sink.h"
#include "sinks/iceberg_sink.h"
#include "sinks/kafka_sink.h"
#include "sinks/noop_sink.h"
#include "sinks/postgres_sink.h"
#include "sinks/sqlcommand_sink.h"

namespace sluice::pipeline {

namespace {

bool SameBrokers(std::vector<std::string> a, std::vector<std::string> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

}  // namespace

Result<std::unique_ptr<sinks::Sink>> MakeSink(const SinkConfig& config, std::FILE* console,
                                              const KafkaSourceConfig* source,
                                              int64_t memory_limit_bytes, std::string_view pipeline,
                                              sinks::Sink* transaction,
                                              std::shared_ptr<schema::SchemaSource> schemas) {
  switch (config.type) {
    case SinkType::kConsole:
      return std::unique_ptr<sinks::Sink>(
          std::make_unique<sinks::ConsoleSink>(sinks::ConsoleSinkOptions{console}));
    case SinkType::kNoop:
      return std::unique_ptr<sinks::Sink>(std::make_unique<sinks::NoopSink>());
    case SinkType::kKafka: {
      if (auto* owner = dynamic_cast<sinks::KafkaSink*>(transaction);
          owner != nullptr && owner->transactional() &&
          SameBrokers(owner->brokers(), config.kafka.brokers)) {
        // Dead letters inside the exactly-once sink's transactions.
        return owner->DeadLetterTopic(config.kafka.topic);
      }
      sinks::KafkaSinkOptions o;
      o.brokers = config.kafka.brokers;
      o.topic = config.kafka.topic;
      if (config.kafka.exactly_once) {
        KafkaSourceConfig none;
        o.transactional_id =
            TransactionalId(config.kafka, source != nullptr ? *source : none, pipeline);
      }
      for (const auto& [k, v] : KafkaClientProperties(config.kafka)) {
        if (k != "bootstrap.servers") o.properties[k] = v;
      }
      if (config.kafka.format == MessageFormat::kAvro ||
          config.kafka.format == MessageFormat::kProtobuf) {
        // Rows in the Confluent framing, the schema registered from their columns
        // (docs/design/0022).
        ASSIGN_OR_RETURN(std::shared_ptr<schema::SchemaSource> registry,
                         SchemasFor(config.kafka.schema_registry, config.kafka.brokers, schemas));
        ASSIGN_OR_RETURN(std::unique_ptr<schema::FramedEncoder> made,
                         schema::FramedEncoder::Create(std::move(registry),
                                                       config.kafka.format == MessageFormat::kAvro
                                                           ? schema::PayloadFormat::kAvro
                                                           : schema::PayloadFormat::kProtobuf,
                                                       config.kafka.subject.empty()
                                                           ? config.kafka.topic + "-value"
                                                           : config.kafka.subject));
        std::shared_ptr<schema::FramedEncoder> encoder = std::move(made);
        o.render = [encoder](duck::Connection& conn, std::string_view table,
                             const std::function<Status(std::string_view)>& emit) {
          return encoder->Encode(conn, table, emit);
        };
      }
      ASSIGN_OR_RETURN(auto sink, sinks::KafkaSink::Create(std::move(o)));
      return std::unique_ptr<sinks::Sink>(std::move(sink));
    }
    case SinkType::kSqlCommand: {
      sinks::SqlCommandSinkOptions o;
      o.sql = config.sqlcommand.sql;
      for (const SqlSubstitution& s : config.sqlcommand.substitutions) {
        o.substitutions.push_back({s.var, sinks::SqlSubstitution::Type::kUuid4});
      }
      ASSIGN_OR_RETURN(auto sink, sinks::SqlCommandSink::Create(std::move(o)));
      return std::unique_ptr<sinks::Sink>(std::move(sink));
    }
    case SinkType::kPostgres: {
      sinks::PostgresSinkOptions o;
      o.dsn = config.postgres.dsn;
      o.table = config.postgres.table;
      o.mode = config.postgres.mode == PostgresMode::kUpsert
                   ? sinks::PostgresSinkOptions::Mode::kUpsert
                   : sinks::PostgresSinkOptions::Mode::kAppend;
      o.key = config.postgres.key;
      o.commit_interval_ms = config.postgres.commit_interval_ms;
      ASSIGN_OR_RETURN(auto sink, sinks::PostgresSink::Create(std::move(o)));
      return std::unique_ptr<sinks::Sink>(std::move(sink));
    }
    case SinkType::kIceberg: {
      sinks::IcebergSinkOptions o;
      o.warehouse = config.iceberg.warehouse;
      if (const std::optional<IcebergCatalogConfig>& c = config.iceberg.catalog) {
        lake::RestCatalogConfig rc;
        rc.uri = c->uri;
        rc.warehouse = c->warehouse;
        rc.credential = c->credential;
        rc.token = c->token;
        rc.oauth2_server_uri = c->oauth2_server_uri;
        rc.scope = c->scope;
        rc.request_timeout = std::chrono::milliseconds(c->request_timeout_ms);
        rc.max_retries = static_cast<int>(c->max_retries);
        o.catalog = std::move(rc);
      } else if (o.warehouse.empty()) {
        const char* env = std::getenv("SLUICE_WAREHOUSE");
        o.warehouse = env != nullptr ? env : "";
      }
      o.namespace_ = config.iceberg.namespace_;
      o.table = config.iceberg.table;
      o.catalog_name = config.iceberg.catalog_name;
      o.commit_interval_seconds = config.iceberg.commit_interval_seconds;
      o.target_file_size_bytes = config.iceberg.target_file_size_bytes;
      o.schema_evolution = config.iceberg.schema_evolution;
      o.partition_by = config.iceberg.partition_by;
      o.staged_memory_limit_bytes = memory_limit_bytes / 2;
      if (source != nullptr) {
        o.group_id = source->group_id;
        o.topics = source->topics;
      }
      ASSIGN_OR_RETURN(auto sink, sinks::IcebergSink::Create(std::move(o)));
      return std::unique_ptr<sinks::Sink>(std::move(sink));
    }
  }
  return InternalError("unknown sink type");
}

}  // namespace sluice::pipeline
