// PipelineConfig: one pipeline file (`sluice pipeline run FILE`), in sqlflow's format key
// for key (https://github.com/turbolytics/sql-flow), read into typed structs.
//
// Reading happens in three steps, each of which names `file:line` in its errors:
//   1. template substitution on the raw text: `{{ NAME }}` and
//      `{{ NAME|default('value') }}` from environment variables (looked up through an
//      injectable EnvLookup), as sqlflow's Jinja rendering does for these forms;
//   2. YAML parsing (yaml-cpp; its exceptions never leave this module);
//   3. strict validation: unknown keys, wrong types, missing required keys, bad enum
//      values, and keys sqlflow has but sluice refuses (with what to use instead). Every
//      error found is reported, one per line, each naming the dotted key path.
//
//   ASSIGN_OR_RETURN(PipelineConfig config, LoadPipelineFile(path, ProcessEnv()));
//
// docs/pipelines.md is the reference of every key, its type and its default.
// A PipelineConfig is a plain value: built once, then read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::pipeline {

// Files (and the text after substitution) larger than this are refused.
inline constexpr size_t kMaxPipelineFileBytes = size_t{4} << 20;

// Looks up a template variable; nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process environment (getenv), every variable name.
EnvLookup ProcessEnv();
// A fixed set of variables, for tests and tools.
EnvLookup MapEnv(std::map<std::string, std::string> vars);

enum class AutoOffsetReset { kEarliest, kLatest };
enum class SecurityProtocol { kPlaintext, kSsl, kSaslPlaintext, kSaslSsl };
enum class HandlerType { kStructuredBatch, kInferredMemBatch, kInferredDiskBatch };
enum class SinkType { kConsole, kNoop, kKafka, kSqlCommand, kPostgres, kIceberg };
// source.kafka.format / sink.kafka.format (sluice's keys): plain JSON, or the Confluent
// framing with a schema id from a Schema Registry (docs/design/0022-schemas.md).
enum class MessageFormat { kJson, kAvro, kProtobuf, kJsonSchema };
// source.kafka.key_format (sluice's key): keys as bytes, or framed keys decoded (kafka_key).
enum class KeyFormat { kBytes, kAvro, kProtobuf };
// source.kafka.in_process (sluice's key): read the broker of `sluice serve` in-process
// (docs/design/0023-native-path.md) when it can be (auto), always (true) or never (false).
enum class InProcessMode { kAuto, kTrue, kFalse };
enum class ErrorPolicy { kRaise, kIgnore, kDlq };
enum class PostgresMode { kAppend, kUpsert };
enum class SubstitutionType { kUuid4 };

// sqlflow's spellings: "earliest", "SASL_SSL", "handlers.InferredMemBatch", "sqlcommand",
// "DLQ", "upsert", "uuid4".
std::string_view Name(AutoOffsetReset v);
std::string_view Name(SecurityProtocol v);
std::string_view Name(HandlerType v);
std::string_view Name(SinkType v);
std::string_view Name(ErrorPolicy v);
std::string_view Name(PostgresMode v);
std::string_view Name(SubstitutionType v);

// kafka.ssl: librdkafka's ssl.* settings under sqlflow's names. Empty = not set.
struct KafkaSslConfig {
  std::string ca_location;                        // ssl.ca.location
  std::string certificate_location;               // ssl.certificate.location
  std::string key_location;                       // ssl.key.location
  std::string key_password;                       // ssl.key.password
  std::string endpoint_identification_algorithm;  // ssl.endpoint.identification.algorithm
};

// kafka.sasl. `mechanism` is upper-cased: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, GSSAPI or
// OAUTHBEARER.
struct KafkaSaslConfig {
  std::string mechanism;
  std::string username;
  std::string password;
};

// What the source and the kafka sink share: where the cluster is and how to reach it.
struct KafkaConnectionConfig {
  std::vector<std::string> brokers;  // host:port, at least one
  std::optional<SecurityProtocol> security_protocol;
  std::optional<KafkaSslConfig> ssl;
  std::optional<KafkaSaslConfig> sasl;
  // sluice's addition: any librdkafka property ("fetch.wait.max.ms": "50"), applied
  // after the named keys. Properties that a named key sets, or that sluice must own
  // (enable.auto.commit), are refused.
  std::map<std::string, std::string> properties;
};

// source.kafka.fetch: how far the consumer may read ahead of the pipeline. sqlflow's
// defaults (its measured ones): 4 MiB, 1 MiB, 2.
struct KafkaFetchConfig {
  int64_t max_bytes = int64_t{4} << 20;            // fetch.max.bytes
  int64_t max_partition_bytes = int64_t{1} << 20;  // max.partition.fetch.bytes
  int64_t prefetch = 2;  // fetches of max_bytes held ahead of the pipeline
};

// schema_registry (sluice's key, under source.kafka and sink.kafka): a Confluent-compatible
// registry's URL and its HTTP Basic login. Not set: under `sluice serve`, a pipeline whose
// broker is that server uses its own registry; elsewhere http://<first broker's host>:8081.
struct SchemaRegistryConfig {
  std::string url;
  std::string username;
  std::string password;
};

struct KafkaSourceConfig : KafkaConnectionConfig {
  MessageFormat format = MessageFormat::kJson;
  // avro or protobuf: framed keys decoded into kafka_key by the `<topic>-key` subject's
  // schema; only with format avro or protobuf.
  KeyFormat key_format = KeyFormat::kBytes;
  InProcessMode in_process = InProcessMode::kAuto;
  std::optional<SchemaRegistryConfig> schema_registry;
  std::string group_id;
  AutoOffsetReset auto_offset_reset = AutoOffsetReset::kEarliest;
  std::vector<std::string> topics;  // at least one
  KafkaFetchConfig fetch;
};

struct HandlerConfig {
  HandlerType type = HandlerType::kInferredMemBatch;
  std::string sql;
  std::string sql_origin;  // "file.yml:31", where handler.sql is
  // StructuredBatch: the table (declared in `commands`) messages are parsed into.
  // Required for StructuredBatch; the inferred handlers name their table `batch`.
  std::string table;
  std::string sql_results_cache_dir;  // InferredDiskBatch's spill directory; "" = default
  // handler.decode_threads, sluice's addition: a StructuredBatch batch is decoded, an
  // InferredMemBatch batch's rows filled, in up to this many parts at once
  // (json::StructuredOptions::threads, InferredOptions::threads). 0: auto, the CPUs this
  // process may run on, at most kMaxAutoDecodeThreads.
  int64_t decode_threads = 0;
};

constexpr int64_t kMaxAutoDecodeThreads = 4;

// handler.decode_threads as the decoder takes it: `auto` resolved.
size_t DecodeThreads(const HandlerConfig& handler);

struct KafkaSinkConfig : KafkaConnectionConfig {
  std::string topic;
  // avro or protobuf: rows in the Confluent framing, their schema derived from the result's
  // columns and registered under `subject` (default `<topic>-value`). json_schema is refused.
  MessageFormat format = MessageFormat::kJson;
  std::optional<SchemaRegistryConfig> schema_registry;
  std::string subject;
  // sluice's addition (docs/pipelines.md "Exactly-once into Kafka"): each batch's rows and
  // the consumed offsets in one Kafka transaction. Only on pipeline.sink, without a
  // window, pipeline.state or managed tables.
  bool exactly_once = false;
  // The transactional.id's prefix; "" = sluice-<pipeline name> (docs/design/0006 #12).
  std::string transactional_id;
};

struct SqlSubstitution {
  std::string var;  // replaced in `sql` with a fresh value each batch
  SubstitutionType type = SubstitutionType::kUuid4;
};

// sink.sqlcommand: user SQL over the batch, exposed as table `sqlflow_sink_batch`.
struct SqlCommandSinkConfig {
  std::string sql;
  std::string sql_origin;
  std::vector<SqlSubstitution> substitutions;
};

// sink.postgres (sluice's keys: sqlflow has no postgres sink): a libpq DSN, the target table
// (`table` or `schema.table`), mode, and the key columns (required for upsert, refused for append).
struct PostgresSinkConfig {
  std::string dsn;
  std::string table;
  PostgresMode mode = PostgresMode::kAppend;
  std::vector<std::string> key;
  // commit_interval_ms (sluice's): 0 commits at every batch; N > 0 streams the batches of
  // N ms into one COPY and transaction (mode append, pipeline.sink only; docs/sinks.md).
  int64_t commit_interval_ms = 0;
};

// sink.iceberg (sqlflow's keys catalog_name and table_name, the rest sluice's; docs/sinks.md):
// appends the results to an Iceberg table of the warehouse, committing every
// commit_interval_seconds or when the staged rows reach the target file size.
// sink.iceberg.catalog (sluice's): an Iceberg REST catalog the table is found, created and
// committed through, instead of a warehouse directory (docs/sinks.md).
struct IcebergCatalogConfig {
  std::string uri;  // http(s)://host:port[/path]
  std::string warehouse;
  std::string credential;  // OAuth2 client credentials "id:secret"
  std::string token;       // or a bearer token
  std::string oauth2_server_uri;
  std::string scope = "catalog";
  int64_t request_timeout_ms = 30000;
  int64_t max_retries = 3;
};

struct IcebergSinkConfig {
  std::string catalog_name;
  std::vector<std::string> namespace_;          // table_name's levels before the last dot
  std::string table;                            // table_name's last part
  std::string warehouse;                        // "" = $SLUICE_WAREHOUSE at run time
  std::optional<IcebergCatalogConfig> catalog;  // instead of the warehouse
  int64_t commit_interval_seconds = 60;
  int64_t target_file_size_bytes = int64_t{128} << 20;
  bool schema_evolution = false;          // add new nullable columns instead of refusing
  std::vector<std::string> partition_by;  // "day(ts)", "bucket(16, id)", "city", ...
};

// One sink; only the member named by `type` is filled.
struct SinkConfig {
  SinkType type = SinkType::kConsole;
  KafkaSinkConfig kafka;
  SqlCommandSinkConfig sqlcommand;
  PostgresSinkConfig postgres;
  IcebergSinkConfig iceberg;
};

struct OnErrorConfig {
  ErrorPolicy policy = ErrorPolicy::kRaise;
  std::optional<SinkConfig> dlq;  // set whenever the file has one; required for kDlq
};

// pipeline.duckdb, sluice's addition: the limits of the pipeline's own DuckDB database.
struct DuckDbConfig {
  int64_t memory_limit_bytes = int64_t{256} << 20;  // DuckDB's memory_limit
  int64_t threads = 1;
};

// commands[i]: SQL run once at start, in order.
struct SqlCommand {
  std::string name;
  std::string sql;
  std::string origin;  // "file.yml:4"
};

// tables.sql[i].manager.tumbling_window (sqlflow's form, docs/design/0007 #2): every
// poll_interval_seconds the rows collect_sql returns go to the manager's sink, then
// delete_sql removes them.
struct TumblingWindowConfig {
  std::string collect_sql;
  std::string collect_origin;  // "file.yml:12"
  std::string delete_sql;
  std::string delete_origin;
  int64_t poll_interval_seconds = 10;  // sqlflow's default
};

// tables.sql[i]: a table created at start (after `commands`), optionally managed as a
// window.
struct TableConfig {
  std::string name;
  std::string sql;
  std::string origin;
  std::optional<TumblingWindowConfig> tumbling_window;  // set with `manager`
  SinkConfig sink;                                      // manager.sink, with `manager`
};

// pipeline.window (sluice's declarative form, docs/design/0007 #3-#7): the handler's result
// rows go into window state keyed by event time; closed windows go through emit_sql to
// `sink`. Durations are in microseconds.
enum class WindowType { kTumbling, kHopping, kSession };
std::string_view Name(WindowType v);  // "tumbling", "hopping", "session"

struct WindowConfig {
  WindowType type = WindowType::kTumbling;
  std::string time_column;       // a column of the batch and of the handler's result
  int64_t size_us = 0;           // tumbling, hopping
  int64_t slide_us = 0;          // hopping: divides size
  int64_t gap_us = 0;            // session
  std::vector<std::string> key;  // session: result columns that split sessions
  int64_t grace_us = 0;          // the watermark trails the newest event time by this
  int64_t allowed_lateness_us = 0;
  int64_t idle_close_us = 60'000'000;   // a partition silent this long stops holding back
  int64_t max_future_us = 600'000'000;  // event times beyond wall clock + this do not advance
  std::string emit_sql;                 // over the view `closed`; default SELECT * FROM closed
  std::string emit_origin;              // "file.yml:20"
  SinkConfig sink;
};

// pipeline.state (docs/design/0007 #8): the pipeline's database on this file, one
// transaction per batch with the offsets it covers.
struct StateConfig {
  std::string path;
};

struct PipelineConfig {
  std::string origin;  // the path (or origin) the file was read from
  std::string name;
  std::string description;
  // pipeline.principal: who the pipeline reads and writes as (docs/design/0020): under
  // `sluice serve` its Kafka clients log in to that broker as User:<principal> and its SQL
  // is checked against the SQL grants; a remote run's is its kafka.sasl.username. "": the
  // service itself under serve, the SASL user of a remote run.
  std::string principal;
  int64_t batch_size = 1;               // sqlflow's default
  int64_t flush_interval_seconds = 30;  // sqlflow's default
  KafkaSourceConfig source;
  HandlerConfig handler;
  SinkConfig sink;
  OnErrorConfig on_error;
  DuckDbConfig duckdb;
  std::vector<SqlCommand> commands;
  std::vector<TableConfig> tables;     // tables.sql
  std::optional<WindowConfig> window;  // pipeline.window; then `sink` is unused
  std::optional<StateConfig> state;    // pipeline.state
  // Things that are accepted but probably not what was meant ("file.yml:9: on_error.dlq
  // is set but policy is RAISE"); `sluice pipeline validate` prints them.
  std::vector<std::string> warnings;
};

// Reads and checks a pipeline file. NotFound / IOError name the path; everything wrong
// with the content is InvalidArgument whose message has one "path:line: key: problem"
// line per error.
Result<PipelineConfig> LoadPipelineFile(const std::string& path, const EnvLookup& env);

// The same over text; `origin` (usually the path) starts every error and origin.
Result<PipelineConfig> ParsePipeline(std::string_view text, std::string_view origin,
                                     const EnvLookup& env);

// Step 1 alone: the text with every `{{ ... }}` replaced. Lines keep their numbers unless
// a value holds a newline. Errors name origin:line and the variable.
Result<std::string> SubstituteTemplate(std::string_view text, std::string_view origin,
                                       const EnvLookup& env);

// A few lines for `sluice pipeline validate`: name, source, handler, sink, on_error,
// batching, DuckDB limits, commands. Passwords and DSNs are not printed.
std::string DescribePipeline(const PipelineConfig& config);

// The transactional.id of a member's exactly-once kafka sink (docs/design/0006 #12):
// `sink.transactional_id` or "sluice-<pipeline>", then "-<group.instance.id>" when the
// source's properties set one; without either of those configured, "-<host>-<pid>" (unique
// but not stable: a crashed member's open transaction then waits out
// transaction.timeout.ms).
std::string TransactionalId(const KafkaSinkConfig& sink, const KafkaSourceConfig& source,
                            std::string_view pipeline);

// librdkafka settings for a connection: bootstrap.servers, security.protocol, sasl.*,
// ssl.*, then `properties`.
std::map<std::string, std::string> KafkaClientProperties(const KafkaConnectionConfig& kafka);

}  // namespace sluice::pipeline
