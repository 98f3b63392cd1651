#include "pipeline/runner.h"

#include <malloc.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "base/crash_point.h"
#include "base/logging.h"
#include "duck/chunk_view.h"
#include "duck/database.h"
#include "pipeline/json_decoder.h"
#include "pipeline/state_writer.h"
#include "pipeline/window.h"
#include "sinks/console_sink.h"
#include "sinks/iceberg_sink.h"
#include "sinks/kafka_sink.h"
#include "sinks/noop_sink.h"
#include "sinks/postgres_sink.h"
#include "sinks/sqlcommand_sink.h"

namespace sluice::pipeline {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using kafka::client::Message;

const Logger kLog("pipeline");

// The handler's result lives here between the SQL and the sink.
constexpr std::string_view kResultTable = "sluice_handler_result";
constexpr std::string_view kDlqTable = "sluice_dead_letters";
// The closed windows a manager collected, for its sink.
constexpr std::string_view kWindowTable = "sluice_closed_windows";
// Write-behind pipeline.state: how many deltas may wait for the writer before a batch
// waits for it.
constexpr size_t kWriterQueue = 128;
// The state file's block size. DuckDB gives every table appended to after a checkpoint a
// fresh block per column: with 256 KiB blocks the state's few tables held ~11 MiB of them
// (duckdb_memory's IN_MEMORY_TABLE) for a few hundred rows; with 16 KiB, ~1 MiB.
constexpr uint64_t kStateBlockSize = 16 * 1024;
// A windowed pipeline CHECKPOINTs its database (on file or in memory) after a close at
// most this often.
constexpr auto kCheckpointEvery = std::chrono::seconds(60);

// `source`: the pipeline's, for a sink that records the offsets it holds (iceberg);
// `memory_limit_bytes`: its DuckDB's, for a sink that stages rows there (iceberg).
Result<std::unique_ptr<sinks::Sink>> MakeSink(const SinkConfig& config, std::FILE* console,
                                              const KafkaSourceConfig* source = nullptr,
                                              int64_t memory_limit_bytes = 0) {
  switch (config.type) {
    case SinkType::kConsole:
      return std::unique_ptr<sinks::Sink>(
          std::make_unique<sinks::ConsoleSink>(sinks::ConsoleSinkOptions{console}));
    case SinkType::kNoop:
      return std::unique_ptr<sinks::Sink>(std::make_unique<sinks::NoopSink>());
    case SinkType::kKafka: {
      sinks::KafkaSinkOptions o;
      o.brokers = config.kafka.brokers;
      o.topic = config.kafka.topic;
      for (const auto& [k, v] : KafkaClientProperties(config.kafka)) {
        if (k != "bootstrap.servers") o.properties[k] = v;
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
      o.mode = config.postgres.mode == PostgresMode::kUpsert ? sinks::PostgresSinkOptions::Mode::kUpsert
                                                             : sinks::PostgresSinkOptions::Mode::kAppend;
      o.key = config.postgres.key;
      ASSIGN_OR_RETURN(auto sink, sinks::PostgresSink::Create(std::move(o)));
      return std::unique_ptr<sinks::Sink>(std::move(sink));
    }
    case SinkType::kIceberg: {
      sinks::IcebergSinkOptions o;
      o.warehouse = config.iceberg.warehouse;
      if (o.warehouse.empty()) {
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

// `s` with every invalid UTF-8 sequence replaced by U+FFFD: DuckDB's VARCHAR (and every
// JSON sink) needs valid text, and a dead letter must get through whatever it holds.
std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size() && c != 0;
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && len == 2) ok = c >= 0xC2;
    if (ok && len == 3) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = c <= 0xF4 && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string StripTrailingSemicolons(std::string sql) {
  while (!sql.empty() && (std::isspace(static_cast<unsigned char>(sql.back())) || sql.back() == ';')) {
    sql.pop_back();
  }
  return sql;
}

}  // namespace

// One dead letter (on_error DLQ): what failed, where, and the message.
struct DeadLetter {
  DeadLetter(std::string error, std::string phase, const Message& m)
      : error(std::move(error)),
        phase(std::move(phase)),
        value(m.value.data() == nullptr ? std::nullopt : std::optional<std::string>(m.value)),
        topic(m.topic),
        partition(m.partition),
        offset(m.offset),
        timestamp_ms(m.timestamp_ms) {}
  std::string error;
  std::string phase;  // decode, handler, sink
  std::optional<std::string> value;
  std::string topic;
  int32_t partition;
  int64_t offset;
  int64_t timestamp_ms;
};

struct PipelineRunner::Impl {
  std::string temp_dir;  // removed at the end, when the runner made it
  std::unique_ptr<duck::Database> db;
  std::unique_ptr<duck::Connection> conn;
  std::unique_ptr<StructuredDecoder> structured;
  std::unique_ptr<InferredDecoder> inferred;
  std::string handler_sql;
  // The handler's SQL, prepared at the first batch (the batch's table exists from then),
  // and its result shown to the sinks as the view kResultTable over the result's chunks
  // (no table is created per batch). The chunks may point into the result: declared
  // after it, so destroyed first.
  std::unique_ptr<duck::PreparedStatement> handler;
  std::optional<duck::QueryResult> result;
  std::vector<duck::DataChunk> result_chunks;
  std::vector<std::string> result_names;
  std::vector<duck::LogicalType> result_types;
  std::unique_ptr<duck::ChunkView> result_view;
  Result<uint64_t> RunHandler();
  bool inferred_in_memory = false;
  std::string prepared_schema;  // the inferred batch schema the handler was prepared over
  std::unique_ptr<sinks::Sink> sink;
  std::unique_ptr<sinks::Sink> dlq;
  // tables.sql entries managed as tumbling windows (sqlflow's form, docs/design/0007 #2).
  struct WindowManager {
    std::string table;
    TumblingWindowConfig config;
    std::unique_ptr<sinks::Sink> sink;  // null for Invoke
    Clock::time_point next_poll;
    uint64_t deleted = 0;     // rows deleted since the table was last rebuilt
    bool compact = true;      // false once a rebuild failed (warned once)
  };
  std::vector<WindowManager> managers;
  // pipeline.window (docs/design/0007 #3-#8) and its sink.
  std::unique_ptr<WindowEngine> window;
  std::unique_ptr<sinks::Sink> window_sink;
  Clock::time_point close_retry{};  // after a failed close, not before this
  Clock::time_point last_checkpoint = Clock::now();  // of the database, after a close
  uint64_t result_generation = 0;   // changes when the result's columns may have
  uint64_t batch_generation = 0;    // changes when the batch's columns may have
  // pipeline.state: the database is on file; offsets are stored with each batch.
  bool durable = false;
  std::map<std::pair<std::string, int32_t>, int64_t> stored;  // next offsets in the state
  // The progress tables: on the pipeline's connection, written in the batch's transaction;
  // or, write-behind (docs/design/0007, "Write-behind state"), the writer's.
  std::unique_ptr<StateTables> state_tables;
  std::unique_ptr<StateWriter> writer;
  std::unique_ptr<duck::Database> state_db;  // write-behind: the state file, the writer's own
  uint64_t state_ddl = 0;  // the window's ddl_generation when state_tables were last prepared
  // The window's Observe over the decoded batch of `messages`.
  Status ObserveBatch(std::span<const Message> messages, const std::vector<DecodeError>& decode_errors,
                      const PipelineConfig& c) {
    // Which partition each decoded row came from (the decoder leaves out the messages it
    // could not decode, in order).
    std::vector<SourceRun> runs;
    size_t error_index = 0;
    for (size_t i = 0; i < messages.size(); ++i) {
      if (error_index < decode_errors.size() && decode_errors[error_index].index == i) {
        ++error_index;
        continue;
      }
      const Message& m = messages[i];
      if (runs.empty() || runs.back().partition != m.partition || runs.back().topic != m.topic) {
        runs.push_back({m.topic, m.partition, 0});
      }
      ++runs.back().rows;
    }
    const int64_t wall_us = std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count();
    return window->Observe(structured ? c.handler.table : "batch", batch_generation, runs, wall_us, Clock::now());
  }
  // After a rolled-back transaction: what it may have created is gone.
  void ForgetAfterRollback() {
    if (result_view) result_view->SetChunks({});
    result_chunks.clear();
    result.reset();
    result_view.reset();
    result_names.clear();
    result_types.clear();
    handler.reset();
    ++result_generation;
  }
  void CompactWindowTable(WindowManager& w, const std::string& pipeline, RunnerStats& stats);
  std::unique_ptr<kafka::client::Consumer> consumer;

  // What Poll returned that is not finished with, oldest first: `pending` (the batch in
  // hand) views the first records, the rest is the read-ahead (docs/design/0006 #7).
  struct Polled {
    kafka::client::MessageBatch batch;
    uint64_t epoch;  // the revocation count when it was polled
  };
  std::deque<Polled> held;
  size_t take_chunk = 0;  // held[take_chunk].batch[take_index]: the first record not taken
  size_t take_index = 0;
  uint64_t ahead_records = 0;  // polled, not yet taken into `pending`
  uint64_t ahead_bytes = 0;
  uint64_t read_ahead_limit = 0;  // bytes: fetch.prefetch × fetch.max_bytes
  bool full = false;              // the read-ahead holds its bound: librdkafka's queue is not drained
  // Revoked partitions whose records polled before (epoch <=) must not be taken.
  uint64_t epoch = 0;
  std::map<std::pair<std::string, int32_t>, uint64_t> dropped;
  // The next offset per partition after the last batch processed (for the lag).
  std::map<std::pair<std::string, int32_t>, int64_t> processed;
  // Offsets last sent to Kafka: an asynchronous commit that would not move one is not sent
  // (a window's floor keeps it still for many batches: a commit per batch cost the broker
  // 11 s of CPU per 10M events at batch 500).
  std::map<std::pair<std::string, int32_t>, int64_t> kafka_sent;
  std::vector<Message> pending;

  static uint64_t Size(const Message& m) { return m.key.size() + m.value.size(); }

  // Moves records from the read-ahead into `pending`, up to `batch_size`.
  // Returns how many records and bytes it took.
  std::pair<uint64_t, uint64_t> Take(size_t batch_size) {
    uint64_t records = 0;
    uint64_t bytes = 0;
    while (pending.size() < batch_size && take_chunk < held.size()) {
      const Polled& p = held[take_chunk];
      if (take_index >= p.batch.size()) {
        ++take_chunk;
        take_index = 0;
        continue;
      }
      Message m = p.batch[take_index++];
      --ahead_records;
      ahead_bytes -= Size(m);
      if (!dropped.empty()) {
        auto it = dropped.find({std::string(m.topic), m.partition});
        if (it != dropped.end() && p.epoch <= it->second) continue;
      }
      pending.push_back(m);
      ++records;
      bytes += m.value.size();
    }
    return {records, bytes};
  }

  // After the batch in hand is done (or dropped): releases the polled batches it used up.
  void ReleaseTaken() {
    pending.clear();
    if (take_chunk < held.size() && take_index >= held[take_chunk].batch.size()) {
      ++take_chunk;
      take_index = 0;
    }
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(take_chunk));
    take_chunk = 0;
    if (held.empty()) dropped.clear();
  }

  // Drops everything polled (a lost assignment, a RAISE stop).
  void DropAll() {
    pending.clear();
    held.clear();
    take_chunk = take_index = 0;
    ahead_records = ahead_bytes = 0;
    dropped.clear();
  }
  Status fatal;  // a RAISE error met inside a rebalance callback
  std::atomic<bool> stop{false};

  // Metrics.
  Counter* messages_in = nullptr;
  Counter* bytes_in = nullptr;
  Counter* rows_out = nullptr;
  Counter* commits = nullptr;
  Counter* read_ahead_full = nullptr;
  Gauge* read_ahead = nullptr;
  std::map<std::string, Counter*> errors;  // by phase
  Histogram* batch_seconds = nullptr;
  Histogram* flush_seconds = nullptr;
  Histogram* commit_seconds = nullptr;  // a deferred sink's commits
  Gauge* commit_max_seconds = nullptr;
  double commit_max = 0;
  MetricsRegistry* registry = nullptr;
  mutable std::mutex health_mu;
  std::string health;  // guarded by health_mu

  ~Impl() {
    DropAll();  // messages before their consumer (see Run)
    consumer.reset();
    managers.clear();
    writer.reset();  // writes what is queued; its connection goes before the database
    state_tables.reset();
    state_db.reset();
    window.reset();
    window_sink.reset();
    result_view.reset();
    result_chunks.clear();
    result.reset();
    handler.reset();
    structured.reset();
    inferred.reset();
    sink.reset();
    dlq.reset();
    conn.reset();
    db.reset();
    if (!temp_dir.empty()) {
      std::error_code ec;
      fs::remove_all(temp_dir, ec);
    }
  }
};

PipelineRunner::PipelineRunner(PipelineConfig config, RunnerOptions options)
    : config_(std::move(config)), options_(options), impl_(std::make_unique<Impl>()) {}

PipelineRunner::~PipelineRunner() {
  if (impl_ && impl_->registry != nullptr) impl_->registry->RemoveLabeled("pipeline", config_.name);
}

Result<std::unique_ptr<PipelineRunner>> PipelineRunner::Create(PipelineConfig config,
                                                               RunnerOptions options) {
  if (config.name.empty()) config.name = "pipeline";
  std::unique_ptr<PipelineRunner> r(new PipelineRunner(std::move(config), options));
  Impl& impl = *r->impl_;
  const PipelineConfig& c = r->config_;

  duck::DatabaseOptions db_options;
  db_options.memory_limit_bytes = c.duckdb.memory_limit_bytes;
  db_options.threads = static_cast<int>(c.duckdb.threads);
  bool write_behind = false;
  if (c.handler.type == HandlerType::kInferredDiskBatch) {
    // The batch lives in a database file and DuckDB spills beside it.
    std::string dir = options.work_dir;
    if (dir.empty()) {
      std::string pattern = (fs::temp_directory_path() / "sluice-pipeline-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) return ErrnoError("mkdtemp", pattern, errno);
      dir = pattern;
      impl.temp_dir = dir;
    }
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return IOError("pipeline {}: cannot create {}: {}", c.name, dir, ec.message());
    db_options.path = dir + "/" + c.name + ".duckdb";
    fs::remove(db_options.path, ec);
    db_options.temp_directory = dir + "/spill";
  }
  if (c.state && !options.without_sinks) {
    if (c.handler.type == HandlerType::kInferredDiskBatch) {
      return InvalidArgumentError(
          "pipeline {}: pipeline.state cannot be used with handlers.InferredDiskBatch (its batch table would be "
          "written to the state file every batch); use handlers.InferredMemBatch or StructuredBatch",
          c.name);
    }
    fs::path path(c.state->path);
    std::error_code ec;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
    if (ec) return IOError("pipeline {}: cannot create the directory of {}: {}", c.name, c.state->path, ec.message());
    impl.durable = true;
    // Write-behind (docs/design/0007, "Write-behind state"): a declarative window whose
    // emissions and dead letters leave the process keeps its database in memory and a
    // copy of its state on file. Anything that writes tables of the state database itself
    // (sqlflow-form managers, a sqlcommand window sink or DLQ) works on the file directly.
    const bool managed = std::any_of(c.tables.begin(), c.tables.end(),
                                     [](const TableConfig& t) { return t.tumbling_window.has_value(); });
    const bool dlq_in_db =
        c.on_error.policy == ErrorPolicy::kDlq && c.on_error.dlq && c.on_error.dlq->type == SinkType::kSqlCommand;
    write_behind = c.window && !managed && c.window->sink.type != SinkType::kSqlCommand && !dlq_in_db;
    if (!write_behind) {
      db_options.path = c.state->path;
      db_options.block_size = kStateBlockSize;
    }
  }
  ASSIGN_OR_RETURN(impl.db, duck::Database::Open(db_options));
  ASSIGN_OR_RETURN(impl.conn, duck::Connection::Open(*impl.db));
  if (write_behind) {
    // A database of its own (not ATTACHed to the pipeline's): with both in one instance,
    // DuckDB planned the INSERTs of both connections again at most executions.
    duck::DatabaseOptions state_options;
    state_options.path = c.state->path;
    state_options.threads = 1;
    state_options.block_size = kStateBlockSize;
    auto state_db = duck::Database::Open(state_options);
    if (!state_db.ok()) {
      return IOError("pipeline {}: cannot open the state file {}: {}", c.name, c.state->path,
                     state_db.status().message());
    }
    impl.state_db = std::move(state_db).value();
  }
  for (const SqlCommand& cmd : c.commands) {
    Status st = impl.conn->Execute(cmd.sql);
    if (!st.ok()) {
      return InvalidArgumentError("{}: command '{}' failed: {}", cmd.origin, cmd.name, st.message());
    }
  }
  for (const TableConfig& t : c.tables) {
    Status st = impl.conn->Execute(t.sql);
    if (!st.ok()) {
      return InvalidArgumentError("{}: tables.sql '{}' failed: {}", t.origin, t.name, st.message());
    }
    if (!t.tumbling_window) continue;
    Impl::WindowManager w;
    w.table = t.name;
    w.config = *t.tumbling_window;
    w.next_poll = Clock::now() + std::chrono::seconds(w.config.poll_interval_seconds);
    if (!options.without_sinks) {
      ASSIGN_OR_RETURN(w.sink, MakeSink(t.sink, options.console));
    }
    impl.managers.push_back(std::move(w));
  }
  StateTables::Loaded loaded;
  std::unique_ptr<duck::Connection> writer_conn;
  if (impl.durable) {
    duck::Connection* state_conn = impl.conn.get();
    if (write_behind) {
      ASSIGN_OR_RETURN(writer_conn, duck::Connection::Open(*impl.state_db));
      state_conn = writer_conn.get();
    }
    ASSIGN_OR_RETURN(impl.state_tables, StateTables::Open(*state_conn));
    ASSIGN_OR_RETURN(loaded, impl.state_tables->Load());
    impl.stored = loaded.offsets;
    if (write_behind) {
      // The open windows' rows, into memory.
      ASSIGN_OR_RETURN(auto exists, writer_conn->QueryText(
                                        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND "
                                        "table_name = 'sluice_window_rows' AND database_name = current_database()"));
      if (exists[0][0].value_or("0") != "0") {
        ASSIGN_OR_RETURN(duck::QueryResult rows, writer_conn->Query("SELECT * FROM sluice_window_rows"));
        std::vector<std::string> names;
        for (size_t i = 0; i < rows.column_count(); ++i) names.push_back(rows.column_name(i));
        std::vector<duck::LogicalType> types = rows.column_logical_types();
        std::vector<duck::DataChunk> chunks = rows.TakeChunks();
        std::vector<const duck::DataChunk*> pointers;
        for (const duck::DataChunk& chunk : chunks) pointers.push_back(&chunk);
        ASSIGN_OR_RETURN(auto view, duck::ChunkView::Create(*impl.conn, "sluice_window_loaded", names, std::move(types)));
        view->SetChunks(pointers);
        Status st = impl.conn->Execute("CREATE TABLE sluice_window_rows AS SELECT * FROM sluice_window_loaded");
        view.reset();
        chunks.clear();  // before the result they point into
        RETURN_IF_ERROR(st);
      }
    }
  }
  if (c.window) {
    auto engine = WindowEngine::Create(*impl.conn, *c.window, c.name, impl.durable ? &loaded : nullptr, write_behind);
    if (!engine.ok()) {
      return InvalidArgumentError("pipeline {}: pipeline.window: {}", c.name, engine.status().message());
    }
    impl.window = std::move(engine).value();
    if (!options.without_sinks) {
      ASSIGN_OR_RETURN(impl.window_sink, MakeSink(c.window->sink, options.console));
    }
  }
  if (write_behind) {
    impl.writer = StateWriter::Start(std::move(writer_conn), std::move(impl.state_tables), *c.window, c.name,
                                     kWriterQueue);
  }
  if (c.handler.type == HandlerType::kStructuredBatch) {
    // The batch stays in memory, shown to the SQL through a view (docs/design/0005).
    StructuredOptions decoder_options;
    decoder_options.in_memory = true;
    auto dec = StructuredDecoder::Create(*impl.conn, c.handler.table, decoder_options);
    if (!dec.ok()) {
      return InvalidArgumentError("pipeline {}: handler.table '{}': {}", c.name, c.handler.table,
                                  dec.status().message());
    }
    impl.structured = std::move(dec).value();
  } else {
    // InferredDiskBatch keeps a real table, which DuckDB can spill; the in-memory batch
    // is a view over the decoded chunks.
    InferredOptions decoder_options;
    decoder_options.in_memory = c.handler.type == HandlerType::kInferredMemBatch;
    impl.inferred_in_memory = decoder_options.in_memory;
    ASSIGN_OR_RETURN(impl.inferred, InferredDecoder::Create(*impl.conn, decoder_options));
  }
  impl.handler_sql = StripTrailingSemicolons(c.handler.sql);
  if (!options.without_sinks && !c.window) {
    ASSIGN_OR_RETURN(impl.sink, MakeSink(c.sink, options.console, &c.source, c.duckdb.memory_limit_bytes));
    // A sink that stores the offsets with its rows (an Iceberg table's snapshots) says
    // where its data ends: the pipeline resumes there, not at the group's commit, which
    // may lag behind it (a crash between the two commits) or run ahead (never: the Kafka
    // commit follows the sink's).
    if (std::optional<sinks::SourceOffsets> held = impl.sink->HeldOffsets()) {
      for (const auto& [tp, next] : *held) impl.stored[tp] = next;
    }
  }
  if (!options.without_sinks && c.on_error.policy == ErrorPolicy::kDlq && c.on_error.dlq) {
    ASSIGN_OR_RETURN(impl.dlq, MakeSink(*c.on_error.dlq, options.console));
  }

  MetricsRegistry& m = options.metrics != nullptr ? *options.metrics : MetricsRegistry::Global();
  impl.registry = &m;
  MetricLabels labels = {{"pipeline", c.name}};
  impl.messages_in = &m.GetCounter("sluice_pipeline_messages_in_total", "Messages read from the source", labels);
  impl.bytes_in = &m.GetCounter("sluice_pipeline_bytes_in_total", "Message value bytes read from the source", labels);
  impl.rows_out = &m.GetCounter("sluice_pipeline_rows_out_total", "Rows written to the sink", labels);
  impl.commits = &m.GetCounter("sluice_pipeline_commits_total", "Offset commits after a sink flush", labels);
  impl.read_ahead_full = &m.GetCounter("sluice_pipeline_read_ahead_full_total",
                              "Times the read-ahead reached its bound (prefetch x max_bytes)", labels);
  impl.read_ahead = &m.GetGauge("sluice_pipeline_read_ahead_bytes",
                                "Message bytes fetched and not yet in a batch", labels);
  for (const char* phase : {"decode", "handler", "sink", "source", "commit", "window", "late"}) {
    impl.errors[phase] = &m.GetCounter("sluice_pipeline_errors_total", "Errors by phase",
                                       {{"pipeline", c.name}, {"phase", phase}});
  }
  impl.batch_seconds = &m.GetHistogram("sluice_pipeline_batch_seconds",
                                       "Time to decode, run the handler on and flush one batch", labels);
  impl.flush_seconds = &m.GetHistogram("sluice_pipeline_sink_flush_seconds", "Sink flush time", labels);
  impl.commit_seconds = &m.GetHistogram("sluice_pipeline_sink_commit_seconds",
                                        "Commit time of a sink durable at its own commit (iceberg)", labels);
  impl.commit_max_seconds = &m.GetGauge("sluice_pipeline_sink_commit_max_seconds",
                                        "The longest commit of a sink durable at its own commit", labels);
  return r;
}

void PipelineRunner::Stop() { impl_->stop.store(true); }

std::string PipelineRunner::Health() const {
  std::lock_guard<std::mutex> lock(impl_->health_mu);
  return impl_->health;
}

// Runs the handler over what the decoder loaded; the result becomes kResultTable.
// Returns how many rows it has.
Result<uint64_t> PipelineRunner::Impl::RunHandler() {
  if (result_view) result_view->SetChunks({});
  result_chunks.clear();
  result.reset();
  if (inferred) {
    // DuckDB does not notice that the batch's view (or table) was recreated with other
    // columns: a statement prepared over the old ones would read the new chunks with the
    // old types. Prepare again whenever the batch's schema changed, and every batch when
    // the batch is a table recreated each time (InferredDiskBatch).
    if (!inferred_in_memory || inferred->schema_sql() != prepared_schema) {
      handler.reset();
      ++batch_generation;
    }
    prepared_schema = inferred->schema_sql();
  }
  if (!handler) {
    ASSIGN_OR_RETURN(handler, duck::PreparedStatement::Prepare(*conn, handler_sql));
  }
  Result<duck::QueryResult> ran = handler->Execute();
  const std::string& error = ran.ok() ? std::string() : ran.status().message();
  if (!ran.ok() && (error.find("Binder Error") != std::string::npos ||
                    error.find("Catalog Error") != std::string::npos)) {
    // Prepared over what an earlier batch looked like: prepare it again, once. (Not for
    // other errors: the handler would run twice over the same batch.)
    handler.reset();
    ASSIGN_OR_RETURN(handler, duck::PreparedStatement::Prepare(*conn, handler_sql));
    ran = handler->Execute();
  }
  if (!ran.ok()) return ran.status();
  result.emplace(std::move(ran).value());
  std::vector<std::string> names;
  for (size_t i = 0; i < result->column_count(); ++i) names.push_back(result->column_name(i));
  std::vector<duck::LogicalType> types = result->column_logical_types();
  bool same = result_view != nullptr && names == result_names && types.size() == result_types.size();
  for (size_t i = 0; same && i < types.size(); ++i) same = types[i].Equals(result_types[i]);
  if (!same) {
    // A new schema (the first batch, or an inferred one that changed): a new view.
    if (!result_view) {
      ASSIGN_OR_RETURN(result_view, duck::ChunkView::Create(*conn, kResultTable, names, result->column_logical_types()));
    } else {
      RETURN_IF_ERROR(result_view->SetColumns(names, result->column_logical_types()));
    }
    result_names = std::move(names);
    result_types = std::move(types);
    ++result_generation;
  }
  result_chunks = result->TakeChunks();
  uint64_t rows = 0;
  std::vector<const duck::DataChunk*> chunks;
  for (const duck::DataChunk& c : result_chunks) {
    rows += c.size();
    chunks.push_back(&c);
  }
  result_view->SetChunks(chunks);
  return rows;
}

Result<std::vector<std::string>> PipelineRunner::Invoke(std::span<const Message> messages,
                                                        std::vector<std::string>* errors) {
  Impl& impl = *impl_;
  std::vector<DecodeError> decode_errors;
  if (impl.structured) {
    RETURN_IF_ERROR(impl.structured->Decode(messages, &decode_errors).status());
  } else {
    RETURN_IF_ERROR(impl.inferred->Decode(messages, &decode_errors).status());
  }
  for (const DecodeError& e : decode_errors) {
    errors->push_back(fmt::format("message {}: {}", e.index + 1, e.reason));
  }
  Status st = impl.RunHandler().status();
  if (!st.ok()) return InvalidArgumentError("{}: handler.sql: {}", config_.handler.sql_origin, st.message());
  if (impl.window) {
    // pipeline.window: the rows the window emits once the fixture is over (every window
    // closes at its end); rows it cannot keep are errors.
    std::vector<DroppedRow> dropped;
    Result<uint64_t> kept = impl.window->Add(kResultTable, impl.result_generation, &dropped);
    if (!kept.ok()) return InvalidArgumentError("pipeline.window: {}", kept.status().message());
    for (const DroppedRow& d : dropped) errors->push_back(fmt::format("row {}: {}", d.row_json, d.reason));
    Status observed = impl.ObserveBatch(messages, decode_errors, config_);
    if (!observed.ok()) return InvalidArgumentError("pipeline.window: {}", observed.message());
    std::vector<std::string> out;
    RETURN_IF_ERROR(CloseWindows(true, &out));
    return out;
  }
  if (!impl.managers.empty()) {
    // A windowed pipeline: the rows are what its windows emit at the end of the fixture.
    std::vector<std::string> out;
    RETURN_IF_ERROR(PollWindows(true, &out));
    return out;
  }
  ASSIGN_OR_RETURN(duck::QueryResult rows,
                   impl.conn->Query(fmt::format("SELECT to_json(t)::VARCHAR FROM {} t", kResultTable)));
  std::vector<std::string> out;
  for (size_t i = 0; i < rows.chunk_count(); ++i) {
    duck::ResultChunk chunk = rows.chunk(i);
    for (size_t r = 0; r < chunk.size(); ++r) out.emplace_back(chunk.GetString(0, r));
  }
  return out;
}

namespace {

// The batch's dead letters as a table on `conn` (error, message, phase, topic, partition,
// offset, timestamp), for the DLQ sink.
Status LoadDeadLetters(duck::Connection& conn, const std::vector<DeadLetter>& letters) {
  RETURN_IF_ERROR(conn.Execute(fmt::format(
      "CREATE OR REPLACE TEMP TABLE {} (error VARCHAR, message VARCHAR, phase VARCHAR, "
      "topic VARCHAR, \"partition\" INTEGER, \"offset\" BIGINT, \"timestamp\" TIMESTAMPTZ)",
      kDlqTable)));
  std::string sql;
  for (size_t i = 0; i < letters.size(); ++i) {
    const DeadLetter& d = letters[i];
    if (sql.empty()) sql = fmt::format("INSERT INTO {} VALUES ", kDlqTable);
    else sql += ',';
    std::string ts = d.timestamp_ms >= 0
                         ? fmt::format("make_timestamptz({}::BIGINT * 1000)", d.timestamp_ms)
                         : "NULL";
    std::string partition = d.partition >= 0 ? std::to_string(d.partition) : "NULL";
    std::string offset = d.offset >= 0 ? std::to_string(d.offset) : "NULL";
    sql += fmt::format("({}, {}, {}, {}, {}, {}, {})", duck::QuoteLiteral(ValidUtf8(d.error)),
                       d.value ? duck::QuoteLiteral(ValidUtf8(*d.value)) : "NULL",
                       duck::QuoteLiteral(d.phase),
                       d.topic.empty() ? "NULL" : duck::QuoteLiteral(ValidUtf8(d.topic)), partition,
                       offset, ts);
    if (sql.size() > (8 << 20) || i + 1 == letters.size()) {
      RETURN_IF_ERROR(conn.Execute(sql));
      sql.clear();
    }
  }
  return Status::OK();
}

}  // namespace

// DuckDB never frees the rows deleted from a table with an index (a UNIQUE index is what
// sqlflow's upsert needs), so a window table that keeps deleting closed windows grows for
// ever. Once the rows deleted since the last rebuild are at least 10,000 and twice the rows
// left, the table is rebuilt in one transaction from DuckDB's own DDL of the table and its
// indexes: the open windows are copied out, the table dropped and re-created, and copied
// back. A rebuild that fails (a view depends on the table, the name is not a table) is
// rolled back, warned about once, and not tried again.
void PipelineRunner::Impl::CompactWindowTable(WindowManager& w, const std::string& pipeline,
                                              RunnerStats& stats) {
  constexpr uint64_t kMinDeleted = 10000;
  if (!w.compact || w.deleted < kMinDeleted) return;
  std::string name = duck::QuoteLiteral(w.table);
  auto rebuild = [&]() -> Status {
    ASSIGN_OR_RETURN(auto table, conn->QueryText(fmt::format(
                                     "SELECT sql, schema_name FROM duckdb_tables() WHERE lower(table_name) = lower({}) "
                                     "AND NOT temporary AND database_name = current_database()",
                                     name)));
    if (table.size() != 1 || !table[0][0]) {
      return NotFoundError("no table named {} in the pipeline's database", w.table);
    }
    std::string qualified = duck::QuoteIdentifier(table[0][1].value_or("main")) + "." + duck::QuoteIdentifier(w.table);
    ASSIGN_OR_RETURN(auto live, conn->QueryText("SELECT count(*) FROM " + qualified));
    if (w.deleted < 2 * std::stoull(live[0][0].value_or("0"))) return Status::OK();
    // The handler's statement reads the table about to be replaced: prepare it again.
    handler.reset();
    ASSIGN_OR_RETURN(auto indexes, conn->QueryText(fmt::format(
                                       "SELECT sql FROM duckdb_indexes() WHERE lower(table_name) = lower({}) "
                                       "AND database_name = current_database() AND sql IS NOT NULL",
                                       name)));
    RETURN_IF_ERROR(conn->Execute("BEGIN TRANSACTION"));
    Status st = [&]() -> Status {
      RETURN_IF_ERROR(conn->Execute("CREATE OR REPLACE TEMP TABLE sluice_window_keep AS SELECT * FROM " + qualified));
      RETURN_IF_ERROR(conn->Execute("DROP TABLE " + qualified));
      RETURN_IF_ERROR(conn->Execute(*table[0][0]));
      for (const auto& row : indexes) RETURN_IF_ERROR(conn->Execute(*row[0]));
      RETURN_IF_ERROR(conn->Execute(fmt::format("INSERT INTO {} SELECT * FROM sluice_window_keep", qualified)));
      RETURN_IF_ERROR(conn->Execute("DROP TABLE sluice_window_keep"));
      return conn->Execute("COMMIT");
    }();
    if (!st.ok()) (void)conn->Execute("ROLLBACK");
    RETURN_IF_ERROR(st);
    w.deleted = 0;
    ++stats.window_compactions;
    return Status::OK();
  };
  if (Status st = rebuild(); !st.ok()) {
    w.compact = false;
    SLUICE_LOG(kLog, kWarn,
               "pipeline {}: window table {} cannot be rebuilt, so the rows its polls delete stay in memory "
               "(DuckDB keeps them for an indexed table): {}",
               pipeline, w.table, st.message());
  }
}

Status PipelineRunner::PollWindows(bool all, std::vector<std::string>* emitted) {
  Impl& impl = *impl_;
  const PipelineConfig& c = config_;
  const auto now = Clock::now();
  for (Impl::WindowManager& w : impl.managers) {
    if (!all && now < w.next_poll) continue;
    w.next_poll = now + std::chrono::seconds(w.config.poll_interval_seconds);
    std::vector<sinks::RejectedRow> rejected;
    std::vector<std::string> collected;  // for `emitted`, once the poll committed
    uint64_t deleted = 0;
    std::string where;  // the step that failed
    auto attempt = [&]() -> Status {
      where = w.config.collect_origin + ": collect_closed_windows_sql";
      ASSIGN_OR_RETURN(duck::QueryResult r,
                       impl.conn->Query(fmt::format("CREATE OR REPLACE TEMP TABLE {} AS {}", kWindowTable,
                                                    StripTrailingSemicolons(w.config.collect_sql))));
      uint64_t rows = 0;
      if (r.column_count() == 1 && r.chunk_count() > 0 && r.chunk(0).size() == 1 && !r.chunk(0).IsNull(0, 0)) {
        rows = static_cast<uint64_t>(r.chunk(0).GetInt64(0, 0));
      }
      if (rows > 0 && emitted != nullptr) {
        ASSIGN_OR_RETURN(duck::QueryResult j,
                         impl.conn->Query(fmt::format("SELECT to_json(t)::VARCHAR FROM {} t", kWindowTable)));
        for (size_t i = 0; i < j.chunk_count(); ++i) {
          duck::ResultChunk chunk = j.chunk(i);
          for (size_t row = 0; row < chunk.size(); ++row) collected.emplace_back(chunk.GetString(0, row));
        }
      } else if (rows > 0 && w.sink) {
        where = fmt::format("tables.sql '{}' manager.sink {}", w.table, w.sink->Describe());
        RETURN_IF_ERROR(w.sink->Write(*impl.conn, kWindowTable, {}, &rejected));
        RETURN_IF_ERROR(w.sink->Flush());
      }
      where = w.config.delete_origin + ": delete_closed_windows_sql";
      ASSIGN_OR_RETURN(duck::QueryResult d, impl.conn->Query(w.config.delete_sql));
      deleted = d.rows_changed();
      return Status::OK();
    };
    where = "starting the window poll's transaction";
    Status st = impl.conn->Execute("BEGIN TRANSACTION");
    if (st.ok()) st = attempt();
    if (st.ok()) {
      where = "committing the window poll";
      st = impl.conn->Execute("COMMIT");
    }
    if (!st.ok()) {
      (void)impl.conn->Execute("ROLLBACK");
      // The windows stay in the table: the next poll tries again.
      impl.errors["window"]->Inc();
      ++stats_.errors;
      std::string error = fmt::format("pipeline {}: window {}: {}: {}", c.name, w.table, where, st.message());
      if (c.on_error.policy == ErrorPolicy::kRaise) return InvalidArgumentError("{}", error);
      SLUICE_LOG(kLog, kWarn, "{} (the windows stay; the next poll tries again)", error);
      continue;
    }
    if (emitted != nullptr) emitted->insert(emitted->end(), collected.begin(), collected.end());
    w.deleted += deleted;
    impl.CompactWindowTable(w, c.name, stats_);
    // Rows the sink refused (they do not cast into its schema) would be refused again.
    RETURN_IF_ERROR(DeadLetterRows(rejected, "window", fmt::format("window {}: manager.sink", w.table)));
  }
  return Status::OK();
}

Status PipelineRunner::DeadLetterRows(const std::vector<sinks::RejectedRow>& rows, std::string_view phase,
                                      std::string_view what) {
  Impl& impl = *impl_;
  const PipelineConfig& c = config_;
  if (rows.empty()) return Status::OK();
  impl.errors[std::string(phase)]->Inc(rows.size());
  stats_.errors += rows.size();
  if (c.on_error.policy == ErrorPolicy::kRaise) {
    return InvalidArgumentError("pipeline {}: {}: {} row(s) refused, the first: {}", c.name, what, rows.size(),
                                rows.front().reason);
  }
  if (c.on_error.policy == ErrorPolicy::kDlq && impl.dlq) {
    std::vector<DeadLetter> letters;
    for (const sinks::RejectedRow& row : rows) {
      Message as_message;
      as_message.value = row.row_json;
      as_message.partition = -1;
      as_message.offset = -1;
      letters.emplace_back(row.reason, std::string(phase), as_message);
    }
    RETURN_IF_ERROR(LoadDeadLetters(*impl.conn, letters));
    std::vector<sinks::RejectedRow> dlq_rejected;
    Status dst = impl.dlq->Write(*impl.conn, kDlqTable, {}, &dlq_rejected);
    if (dst.ok()) dst = impl.dlq->Flush();
    if (!dst.ok() || !dlq_rejected.empty()) {
      return InternalError("pipeline {}: dead-letter sink {} failed for {} rows: {}", c.name, impl.dlq->Describe(),
                           what, dst.ok() ? dlq_rejected.front().reason : dst.message());
    }
    return Status::OK();
  }
  SLUICE_LOG(kLog, kWarn, "pipeline {}: {}: {} row(s) refused, skipped (on_error {}): {}", c.name, what, rows.size(),
             c.on_error.policy == ErrorPolicy::kDlq ? "DLQ without a sink" : "IGNORE", rows.front().reason);
  return Status::OK();
}

Status PipelineRunner::CloseWindows(bool all, std::vector<std::string>* emitted) {
  Impl& impl = *impl_;
  const PipelineConfig& c = config_;
  if (!impl.window) return Status::OK();
  const auto now = Clock::now();
  impl.window->Tick(now);
  if (!all && (!impl.window->CloseDue() || now < impl.close_retry)) return Status::OK();
  std::vector<sinks::RejectedRow> rejected;
  std::vector<std::string> collected;
  auto emit = [&](std::string_view table, uint64_t) -> Status {
    if (emitted != nullptr) {
      ASSIGN_OR_RETURN(duck::QueryResult j, impl.conn->Query(fmt::format("SELECT to_json(t)::VARCHAR FROM {} t", table)));
      for (size_t i = 0; i < j.chunk_count(); ++i) {
        duck::ResultChunk chunk = j.chunk(i);
        for (size_t row = 0; row < chunk.size(); ++row) collected.emplace_back(chunk.GetString(0, row));
      }
      return Status::OK();
    }
    if (!impl.window_sink) return Status::OK();
    RETURN_IF_ERROR(impl.window_sink->Write(*impl.conn, table, {}, &rejected));
    auto flush_started = Clock::now();
    Status st = impl.window_sink->Flush();
    if (st.ok()) CrashPoint("window-emitted");
    impl.flush_seconds->Observe(std::chrono::duration<double>(Clock::now() - flush_started).count());
    if (st.ok()) {
      uint64_t n = 0;
      if (auto count = impl.conn->QueryText(fmt::format("SELECT count(*) FROM {}", table)); count.ok()) {
        n = std::stoull((*count)[0][0].value_or("0"));
      }
      n -= std::min<uint64_t>(n, rejected.size());
      impl.rows_out->Inc(n);
      stats_.rows_out += n;
    }
    return st;
  };
  auto snapshot = impl.window->Snapshot();
  Status st = impl.conn->Execute("BEGIN TRANSACTION");
  if (st.ok()) st = impl.window->Close(all, emit);
  if (st.ok() && impl.durable && !impl.writer) {
    StateProgress progress;
    impl.window->TakeProgress(&progress);
    st = impl.state_tables->Save(progress);
  }
  if (st.ok()) st = impl.conn->Execute("COMMIT");
  if (!st.ok()) {
    (void)impl.conn->Execute("ROLLBACK");
    impl.window->Restore(*snapshot);
    impl.errors["window"]->Inc();
    ++stats_.errors;
    std::string error = fmt::format("pipeline {}: closing windows: {}", c.name, st.message());
    {
      std::lock_guard<std::mutex> lock(impl.health_mu);
      impl.health = error;
    }
    if (c.on_error.policy == ErrorPolicy::kRaise) return InvalidArgumentError("{}", error);
    SLUICE_LOG(kLog, kWarn, "{} (the windows stay; tried again in a second)", error);
    impl.close_retry = now + std::chrono::seconds(1);
    return Status::OK();
  }
  if (emitted != nullptr) emitted->insert(emitted->end(), collected.begin(), collected.end());
  if (impl.writer) {
    StateDelta delta;
    delta.rows = impl.window->TakeChanges();
    impl.window->TakeProgress(&delta.progress);
    delta.checkpoint = now - impl.last_checkpoint >= kCheckpointEvery;
    RETURN_IF_ERROR(impl.writer->Submit(std::move(delta)));
  }
  if (now - impl.last_checkpoint >= kCheckpointEvery) {
    // Until a checkpoint, what the batches appended and the closes deleted stays in
    // memory as DuckDB's uncheckpointed rows: on file until its 16 MB WAL threshold (~20
    // minutes of a 1000/s pipeline: the paced run's working set grew 27-45% in 10 min),
    // and in an in-memory database (no state, or written behind) for good (its
    // IN_MEMORY_TABLE grew 0.2 -> 3 MiB in 5 minutes of the paced run). In memory a
    // CHECKPOINT only vacuums.
    impl.last_checkpoint = now;
    if (Status cp = impl.conn->Execute("CHECKPOINT"); !cp.ok()) {
      SLUICE_LOG(kLog, kWarn, "pipeline {}: checkpoint of its database: {}", c.name, cp.message());
    }
  }
  // Rows the sink refused (they do not cast into its schema) would be refused again.
  return DeadLetterRows(rejected, "window",
                        fmt::format("window sink {}", impl.window_sink ? impl.window_sink->Describe() : "-"));
}

Status PipelineRunner::ProcessBatch() {
  Impl& impl = *impl_;
  const PipelineConfig& c = config_;
  RunnerStats& stats = stats_;
  // (Write-behind: a sync commit still commits what the writer holds.)
  if (impl.pending.empty()) {
    if (!sync_commit_) return Status::OK();
    RETURN_IF_ERROR(CommitWritten(true));
    return CommitSink(true);
  }
  auto started = Clock::now();
  const ErrorPolicy policy = c.on_error.policy;
  std::vector<DeadLetter> letters;
  // Under IGNORE and DLQ a failed phase loses (or dead-letters) its messages, then the
  // batch's offsets are committed all the same; under RAISE it stops the pipeline.
  auto fail = [&](const std::string& phase, const std::string& error,
                  std::span<const Message> messages) -> Status {
    impl.errors[phase]->Inc(messages.size());
    stats.errors += messages.size();
    if (policy == ErrorPolicy::kRaise) {
      return InvalidArgumentError("pipeline {}: {} failed: {}", c.name, phase, error);
    }
    if (policy == ErrorPolicy::kDlq) {
      for (const Message& m : messages) letters.emplace_back(error, phase, m);
    } else {
      SLUICE_LOG(kLog, kWarn, "pipeline {}: {} failed for {} message(s), skipped (on_error IGNORE): {}", c.name,
               phase, messages.size(), error);
    }
    return Status::OK();
  };
  // A result row (not a message) that failed: it goes to the DLQ as the row.
  auto fail_row = [&](const std::string& phase, const std::string& reason, const std::string& row_json) {
    Message as_message;
    as_message.value = row_json;
    as_message.partition = -1;
    as_message.offset = -1;
    return fail(phase, reason, std::span<const Message>(&as_message, 1));
  };

  sinks::SourceOffsets offsets;
  std::map<std::pair<std::string, int32_t>, int64_t> first;  // the batch's first offset per partition
  {
    // Runs of one partition are the rule: look the map up only when the partition changes.
    int64_t* next = nullptr;
    const Message* last = nullptr;
    for (const Message& m : impl.pending) {
      if (last == nullptr || m.partition != last->partition || m.topic != last->topic) {
        auto [it, inserted] = offsets.try_emplace({std::string(m.topic), m.partition}, 0);
        next = &it->second;
        if (inserted) first[it->first] = m.offset;
        last = &m;
      }
      *next = std::max(*next, m.offset + 1);
    }
  }

  std::vector<DecodeError> decode_errors;
  Result<size_t> decoded = impl.structured ? impl.structured->Decode(impl.pending, &decode_errors)
                                           : impl.inferred->Decode(impl.pending, &decode_errors);
  bool batch_ok = true;
  bool wrote = false;  // the sink took the batch's rows
  if (!decoded.ok()) {
    RETURN_IF_ERROR(fail("decode", decoded.status().message(), impl.pending));
    batch_ok = false;
  } else {
    for (const DecodeError& e : decode_errors) {
      const Message& m = impl.pending[e.index];
      RETURN_IF_ERROR(fail("decode", fmt::format("{} [{}] offset {}: {}", m.topic, m.partition,
                                                 m.offset, e.reason),
                           std::span<const Message>(&m, 1)));
    }
  }
  // With a window or durable state the batch is one transaction: the handler's writes, the
  // window state, the sink's writes into this database and the offsets commit together.
  // It is rolled back on every way out but the COMMIT.
  const bool transaction = impl.window || impl.durable;
  bool open = false;
  std::shared_ptr<const WindowEngine::Memory> snapshot;
  auto rollback = [&] {
    if (!open) return;
    open = false;
    (void)impl.conn->Execute("ROLLBACK");
    impl.ForgetAfterRollback();
    if (snapshot) impl.window->Restore(*snapshot);
    if (impl.state_tables) impl.state_tables->Forget();
  };
  struct OnExit {
    std::function<void()> f;
    ~OnExit() { f(); }
  } on_exit{rollback};
  if (transaction && batch_ok) {
    if (impl.window) snapshot = impl.window->Snapshot();
    Status st = impl.conn->Execute("BEGIN TRANSACTION");
    if (!st.ok()) return InternalError("pipeline {}: cannot begin the batch's transaction: {}", c.name, st.message());
    open = true;
  }
  uint64_t result_rows = 0;
  if (batch_ok) {
    Result<uint64_t> ran = impl.RunHandler();
    if (!ran.ok()) {
      rollback();
      RETURN_IF_ERROR(fail("handler", ran.status().message(), impl.pending));
      batch_ok = false;
    } else {
      result_rows = *ran;
    }
  }
  if (batch_ok && impl.window) {
    std::vector<DroppedRow> dropped;
    Result<uint64_t> kept = impl.window->Add(kResultTable, impl.result_generation, &dropped);
    Status st = kept.status();
    if (st.ok()) {
      st = impl.ObserveBatch(impl.pending, decode_errors, c);
    }
    if (!st.ok()) {
      rollback();
      RETURN_IF_ERROR(fail("window", st.message(), impl.pending));
      batch_ok = false;
    } else {
      if (*kept > 0) impl.window->NoteSources(first);
      impl.rows_out->Inc(*kept);
      for (const DroppedRow& d : dropped) RETURN_IF_ERROR(fail_row(d.late ? "late" : "window", d.reason, d.row_json));
    }
  } else if (batch_ok) {
    std::vector<sinks::RejectedRow> rejected;
    Status st = impl.sink->Write(*impl.conn, kResultTable, offsets, &rejected);
    wrote = st.ok();
    if (st.ok()) {
      auto flush_started = Clock::now();
      st = impl.sink->Flush();
      impl.flush_seconds->Observe(std::chrono::duration<double>(Clock::now() - flush_started).count());
    }
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(impl.health_mu);
      impl.health = fmt::format("pipeline {}: sink {}: {}", c.name, impl.sink->Describe(), st.message());
    } else {
      std::lock_guard<std::mutex> lock(impl.health_mu);
      impl.health.clear();
    }
    if (!st.ok()) {
      rollback();
      RETURN_IF_ERROR(fail("sink", st.message(), impl.pending));
    } else {
      uint64_t n = result_rows - std::min<uint64_t>(result_rows, rejected.size());
      impl.rows_out->Inc(n);
      stats.rows_out += n;
      for (const sinks::RejectedRow& row : rejected) RETURN_IF_ERROR(fail_row("sink", row.reason, row.row_json));
    }
  }
  if (impl.sink && impl.sink->Defers() && !wrote) impl.sink->Skip(offsets);
  if (!letters.empty() && impl.dlq) {
    RETURN_IF_ERROR(LoadDeadLetters(*impl.conn, letters));
    std::vector<sinks::RejectedRow> dlq_rejected;
    Status dst = impl.dlq->Write(*impl.conn, kDlqTable, offsets, &dlq_rejected);
    if (dst.ok()) dst = impl.dlq->Flush();
    if (dst.ok() && !dlq_rejected.empty()) {
      // A dead letter the DLQ sink refused (e.g. over the kafka sink's message.max.bytes)
      // would be lost once the batch's offsets are committed.
      dst = InvalidArgumentError("{} dead letter(s) refused, the first: {}", dlq_rejected.size(),
                                 dlq_rejected.front().reason);
    }
    if (!dst.ok()) {
      // Nowhere left to put them: stop rather than lose them.
      return InternalError("pipeline {}: dead-letter sink {} failed: {}", c.name,
                           impl.dlq->Describe(), dst.message());
    }
  }
  CrashPoint("batch-begun");
  if (impl.durable && !impl.writer) {
    // The offsets go with the batch's state (or alone, when the batch failed and its
    // messages were skipped or dead-lettered).
    Status st = open ? Status::OK() : impl.conn->Execute("BEGIN TRANSACTION");
    open = true;
    StateProgress progress;
    progress.offsets.insert(offsets.begin(), offsets.end());
    if (impl.window) impl.window->TakeProgress(&progress);
    if (st.ok()) st = impl.state_tables->Save(progress);
    if (!st.ok()) return InternalError("pipeline {}: saving the state failed: {}", c.name, st.message());
  }
  if (open) {
    Status st = impl.conn->Execute("COMMIT");
    if (!st.ok()) {
      return InternalError("pipeline {}: committing the batch's state failed: {}", c.name, st.message());
    }
    open = false;
    if (impl.durable && !impl.writer) {
      for (const auto& [tp, next] : offsets) impl.stored[tp] = next;
      if (impl.window && impl.window->ddl_generation() != impl.state_ddl) {
        // Prepared in a transaction that changed the catalog: DuckDB 1.5 would plan them
        // again at every execution.
        impl.state_ddl = impl.window->ddl_generation();
        impl.state_tables->Forget();
      }
      CrashPoint("state-committed");
    }
  }
  if (impl.writer) {
    // Write-behind: what the batch changed goes to the file on the writer's thread; its
    // Kafka commit once it is there.
    StateDelta delta;
    delta.rows = impl.window->TakeChanges();
    delta.progress.offsets.insert(offsets.begin(), offsets.end());
    impl.window->TakeProgress(&delta.progress);
    for (const auto& [tp, next] : offsets) {
      delta.kafka_commit[tp] = std::min(next, impl.window->Floor(tp.first, tp.second).value_or(next));
    }
    RETURN_IF_ERROR(impl.writer->Submit(std::move(delta)));
    for (const auto& [tp, next] : offsets) impl.stored[tp] = next;
    RETURN_IF_ERROR(CommitWritten(sync_commit_));
  } else if (impl.sink && impl.sink->Defers()) {
    RETURN_IF_ERROR(CommitSink(sync_commit_));
  } else if (impl.consumer) {
    std::vector<kafka::client::TopicPartition> commit;
    for (const auto& [tp, next] : offsets) {
      // Not past what an open window still needs: without the state file, a restart reads
      // the open windows' messages again.
      int64_t at = next;
      if (impl.window) at = std::min(at, impl.window->Floor(tp.first, tp.second).value_or(next));
      commit.push_back({tp.first, tp.second, at});
    }
    // Asynchronous while running (the sink already holds the batch; the next commit covers
    // a failed one): a synchronous commit per batch would wait a broker round trip and
    // its fsync every batch. Synchronous when partitions are about to go or at the end.
    CommitToKafka(commit, sync_commit_);
  }
  for (const auto& [tp, next] : offsets) impl.processed[tp] = next;
  ++stats.batches;
  impl.batch_seconds->Observe(std::chrono::duration<double>(Clock::now() - started).count());
  impl.ReleaseTaken();
  return Status::OK();
}

Status PipelineRunner::CommitWritten(bool sync) {
  Impl& impl = *impl_;
  if (!impl.writer) return Status::OK();
  if (sync) RETURN_IF_ERROR(impl.writer->Drain());
  ASSIGN_OR_RETURN(StateWriter::Offsets written, impl.writer->TakeWritten());
  if (written.empty() || !impl.consumer) return Status::OK();
  CrashPoint("state-committed");
  std::vector<kafka::client::TopicPartition> commit;
  for (const auto& [tp, at] : written) commit.push_back({tp.first, tp.second, at});
  CommitToKafka(commit, sync);
  return Status::OK();
}

Status PipelineRunner::CommitSink(bool force) {
  Impl& impl = *impl_;
  if (!impl.sink || !impl.sink->Defers()) return Status::OK();
  auto started = Clock::now();
  Result<sinks::SourceOffsets> durable = impl.sink->Commit(force);
  if (!durable.ok()) {
    return InternalError("pipeline {}: sink {} could not commit: {}", config_.name, impl.sink->Describe(),
                         durable.status().message());
  }
  if (durable->empty()) return Status::OK();
  double took = std::chrono::duration<double>(Clock::now() - started).count();
  impl.commit_seconds->Observe(took);
  impl.commit_max = std::max(impl.commit_max, took);
  impl.commit_max_seconds->Set(impl.commit_max);
  CrashPoint("sink-committed");
  for (const auto& [tp, next] : *durable) impl.stored[tp] = next;
  if (!impl.consumer) return Status::OK();
  std::vector<kafka::client::TopicPartition> commit;
  for (const auto& [tp, next] : *durable) commit.push_back({tp.first, tp.second, next});
  CommitToKafka(commit, force);
  return Status::OK();
}

void PipelineRunner::CommitToKafka(const std::vector<kafka::client::TopicPartition>& commit, bool sync) {
  Impl& impl = *impl_;
  std::vector<kafka::client::TopicPartition> moved;
  for (const kafka::client::TopicPartition& tp : commit) {
    auto it = impl.kafka_sent.find({tp.topic, tp.partition});
    if (sync || it == impl.kafka_sent.end() || it->second != tp.offset) moved.push_back(tp);
  }
  if (moved.empty()) return;
  Status st = sync ? impl.consumer->Commit(moved) : impl.consumer->CommitAsync(moved);
  if (!st.ok()) {
    // Not fatal: the next commit covers these offsets too; a restart re-reads them (or,
    // with pipeline.state, seeks to the state's).
    impl.errors["commit"]->Inc();
    SLUICE_LOG(kLog, kWarn, "pipeline {}: commit failed (the next commit covers it): {}", config_.name, st.message());
  } else {
    for (const kafka::client::TopicPartition& tp : moved) impl.kafka_sent[{tp.topic, tp.partition}] = tp.offset;
    impl.commits->Inc();
    ++stats_.commits;
  }
}

Status PipelineRunner::Run() {
  Impl& impl = *impl_;
  if (options_.without_sinks) return FailedPreconditionError("pipeline {}: made without sinks", config_.name);
  const PipelineConfig& c = config_;
  kafka::client::Config props;
  for (const auto& [k, v] : KafkaClientProperties(c.source)) props[k] = v;
  props["group.id"] = c.source.group_id;
  props["auto.offset.reset"] = c.source.auto_offset_reset == AutoOffsetReset::kEarliest ? "earliest" : "latest";
  props["enable.auto.commit"] = "false";
  // fetch.prefetch: the consumer holds at most about `prefetch` fetches of max_bytes ahead
  // of the pipeline (docs/pipelines.md, docs/design/0006 #7): a quarter in librdkafka's
  // local queue, a quarter in the runner's read-ahead, and one drain's overshoot.
  const int64_t bound = c.source.fetch.prefetch * c.source.fetch.max_bytes;
  props["fetch.max.bytes"] = std::to_string(c.source.fetch.max_bytes);
  props["max.partition.fetch.bytes"] = std::to_string(c.source.fetch.max_partition_bytes);
  props["queued.max.messages.kbytes"] = std::to_string(std::max<int64_t>(1, bound / 4 / 1024));
  // Only the byte bound limits read-ahead: librdkafka (< 2.2) stops fetching a partition
  // for up to a second whenever either bound is reached, and a message-count bound of a
  // batch or so was reached by every fetch (one fetch a second).
  props["queued.min.messages"] = "10000000";
  ASSIGN_OR_RETURN(impl.consumer, kafka::client::Consumer::Create(props));
  impl.read_ahead_limit = static_cast<uint64_t>(std::max<int64_t>(1, bound / 4));
  auto WarnIfError = [name = c.name](const Status& st, std::string_view what) {
    if (!st.ok()) SLUICE_LOG(kLog, kWarn, "pipeline {}: {}: {}", name, what, st.message());
  };
  impl.consumer->SetRebalanceListener([this, WarnIfError](kafka::client::RebalanceEvent& e) {
    Impl& impl = *impl_;
    const bool deferred = impl.sink && impl.sink->Defers();
    if (e.kind == kafka::client::RebalanceEvent::Kind::kAssigned) {
      if (deferred) {
        // The table's offsets as they are now: another member may have written these
        // partitions since we last held them.
        std::optional<sinks::SourceOffsets> held = impl.sink->HeldOffsets();
        for (const kafka::client::TopicPartition& tp : e.partitions) {
          impl.stored.erase({tp.topic, tp.partition});
          if (held) {
            if (auto it = held->find({tp.topic, tp.partition}); it != held->end()) impl.stored[it->first] = it->second;
          }
        }
      }
      for (kafka::client::TopicPartition& tp : e.partitions) {
        // With pipeline.state the state's offsets, not the group's: the state holds
        // exactly what was processed up to them (docs/design/0007 #8).
        if (auto it = impl.stored.find({tp.topic, tp.partition}); it != impl.stored.end()) tp.offset = it->second;
        if (impl.window) impl.window->Assign(tp.topic, tp.partition, Clock::now());
      }
      return;
    }
    for (const kafka::client::TopicPartition& tp : e.partitions) {
      if (impl.window) impl.window->Revoke(tp.topic, tp.partition);
    }
    if (e.kind == kafka::client::RebalanceEvent::Kind::kRevoked) {
      // Finish the batch in hand and commit it while the partitions are still ours; what
      // was read ahead of them is dropped (their next owner reads it from the commit).
      sync_commit_ = true;
      if (impl.fatal.ok()) impl.fatal = ProcessBatch();
      sync_commit_ = false;
      for (const kafka::client::TopicPartition& tp : e.partitions) {
        impl.dropped[{tp.topic, tp.partition}] = impl.epoch;
        impl.processed.erase({tp.topic, tp.partition});
        impl.kafka_sent.erase({tp.topic, tp.partition});  // its next owner commits it
        if (deferred) impl.stored.erase({tp.topic, tp.partition});
      }
      ++impl.epoch;
    } else {
      // Lost: already someone else's; what we hold of them will be read again there. So
      // will the records of them this Poll brought before the loss (tagged below).
      impl.DropAll();
      impl.processed.clear();
      impl.kafka_sent.clear();
      if (deferred) {
        // What the sink staged of them must not be committed by us now.
        if (Status st = impl.sink->Discard(); !st.ok() && impl.fatal.ok()) impl.fatal = st;
        for (const kafka::client::TopicPartition& tp : e.partitions) impl.stored.erase({tp.topic, tp.partition});
      }
      for (const kafka::client::TopicPartition& tp : e.partitions) {
        impl.dropped[{tp.topic, tp.partition}] = impl.epoch;
      }
      ++impl.epoch;
    }
  });
  RETURN_IF_ERROR(impl.consumer->Subscribe(c.source.topics));
  SLUICE_LOG(kLog, kInfo, "pipeline {}: consuming {} as group {} (batch {}, flush every {} s)", c.name,
           fmt::join(c.source.topics, ","), c.source.group_id, c.batch_size, c.flush_interval_seconds);

  const size_t batch_size = static_cast<size_t>(c.batch_size);
  const auto interval = std::chrono::seconds(c.flush_interval_seconds);
  auto deadline = Clock::now() + interval;
  auto next_progress = Clock::now() + std::chrono::seconds(1);
  auto next_duck_memory = Clock::now();
  // DuckDB's memory limit: the configured bytes, or DuckDB's default as it reports it.
  std::string memory_limit;
  if (c.duckdb.memory_limit_bytes > 0) {
    memory_limit = fmt::format("{}B", c.duckdb.memory_limit_bytes);
  } else if (auto limit = impl.conn->QueryText("SELECT current_setting('memory_limit')"); limit.ok() && !limit->empty()) {
    memory_limit = (*limit)[0][0].value_or("");
  }
  uint64_t last_in = 0;
  Status result;
  // librdkafka 2.0 notices a resumed partition (or room below its queue bound) only when
  // its fetcher thread wakes: a watermark request to the partition's leader wakes it.
  auto last_wake = Clock::now();
  auto last_arrival = Clock::now();
  auto wake_fetchers = [&] {
    last_wake = Clock::now();
    auto lags = impl.consumer->Lag();  // positions after the read-ahead, cached watermarks
    if (!lags.ok()) return;
    for (const kafka::client::PartitionLag& l : *lags) {
      if (l.lag() <= 0) continue;
      Status st = impl.consumer->QueryHighWatermark(l.topic, l.partition, std::chrono::seconds(1)).status();
      if (!st.ok()) {
        // The broker is unreachable: librdkafka reconnects by itself; try again in a second.
        WarnIfError(st, "waking the fetcher");
        last_wake = Clock::now() + std::chrono::seconds(1);
        return;
      }
    }
  };
  // Takes what the read-ahead holds into the batch in hand; stops draining librdkafka's
  // queue while the read-ahead holds its bound, and drains again at half (docs/design/0006
  // #7). librdkafka's own bound then holds the rest: its fetcher stops at it and sleeps,
  // so the first drain after a full spell wakes it.
  bool wake_after_drain = false;
  auto take = [&] {
    auto [records, bytes] = impl.Take(batch_size);
    if (records > 0) {
      impl.messages_in->Inc(records);
      impl.bytes_in->Inc(bytes);
      stats_.messages_in += records;
    }
    if (!impl.full && impl.ahead_bytes >= impl.read_ahead_limit) {
      impl.full = true;
      impl.read_ahead_full->Inc();
    } else if (impl.full && impl.ahead_bytes <= impl.read_ahead_limit / 2) {
      impl.full = false;
      wake_after_drain = true;
    }
    // Polled batches used up by skipped (revoked) records alone: release them now.
    if (impl.pending.empty() && impl.take_chunk > 0) impl.ReleaseTaken();
    impl.read_ahead->Set(static_cast<double>(impl.ahead_bytes));
  };
  while (!impl.stop.load()) {
    // Wait for records only when the read-ahead cannot fill the batch; otherwise just
    // drain what librdkafka has (and serve its callbacks).
    auto now = Clock::now();
    auto wait = std::chrono::milliseconds(0);
    if (impl.pending.size() + impl.ahead_records < batch_size) {
      // Short of a batch. When nothing has come for a while although the broker has more
      // (librdkafka's fetcher asleep at its own queue bound), wake the fetcher.
      constexpr auto kStarved = std::chrono::milliseconds(5);
      if (!impl.full && now - last_arrival >= kStarved && now - last_wake >= kStarved) wake_fetchers();
      wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      wait = std::clamp(wait, std::chrono::milliseconds(0), kStarved);
    }
    // All that librdkafka holds, unless the read-ahead is full. (No pause/resume: in
    // librdkafka 2.0 a batch consume around a pause can skip offsets, fixed in 2.1.)
    constexpr size_t kPollMax = 10000;
    size_t got = impl.full ? 0 : kPollMax;
    while (got == kPollMax) {
      // Records a rebalance inside this Poll revoked carry the epoch before it: dropped.
      const uint64_t poll_epoch = impl.epoch;
      auto polled = impl.consumer->Poll(wait, kPollMax);
      wait = std::chrono::milliseconds(0);
      got = 0;
      if (!impl.fatal.ok()) break;
      if (!polled.ok()) {
        impl.errors["source"]->Inc();
        SLUICE_LOG(kLog, kWarn, "pipeline {}: poll: {}", c.name, polled.status().message());
        break;
      }
      for (const Status& e : polled->errors()) {
        impl.errors["source"]->Inc();
        SLUICE_LOG(kLog, kWarn, "pipeline {}: source: {}", c.name, e.message());
      }
      got = polled->size();
      if (!polled->empty() && impl.window) {
        // Idleness is judged on arrival: a partition whose messages wait in the read-ahead
        // behind another's backlog is not idle.
        const auto now = Clock::now();
        std::optional<Message> last;
        for (size_t i = 0; i < polled->size(); ++i) {
          Message m = (*polled)[i];
          if (last && m.partition == last->partition && m.topic == last->topic) continue;
          impl.window->Heard(m.topic, m.partition, now);
          last = m;
        }
      }
      if (!polled->empty()) {
        last_arrival = Clock::now();
        impl.ahead_bytes += polled->bytes();
        impl.ahead_records += polled->size();
        impl.held.push_back({std::move(polled).value(), poll_epoch});
      }
    }
    if (wake_after_drain && !impl.full) {
      wake_after_drain = false;
      wake_fetchers();
    }
    if (!impl.fatal.ok()) {
      result = impl.fatal;
      break;
    }
    take();
    now = Clock::now();
    if (impl.pending.size() >= static_cast<size_t>(c.batch_size) || now >= deadline) {
      Status st = ProcessBatch();
      if (!st.ok()) {
        result = st;
        break;
      }
      deadline = Clock::now() + interval;
      take();
    }
    if (!impl.managers.empty()) {
      Status st = PollWindows(false);
      if (!st.ok()) {
        result = st;
        break;
      }
    }
    if (impl.window) {
      Status st = CloseWindows(false);
      if (st.ok()) st = CommitWritten(false);  // write-behind: what the file holds now
      if (!st.ok()) {
        result = st;
        break;
      }
    }
    if (Status st = CommitSink(false); !st.ok()) {  // a deferred sink's commit, when due
      result = st;
      break;
    }
    if (now >= next_progress) {
      // About once a second: consumer lag per partition (from what the consumer last heard
      // of the broker: no request), and the progress line when there is a terminal.
      int64_t lag = 0;
      if (auto lags = impl.consumer->Lag(); lags.ok()) {
        for (kafka::client::PartitionLag& l : *lags) {
          // Behind what the pipeline processed, not what it read ahead.
          if (auto it = impl.processed.find({l.topic, l.partition}); it != impl.processed.end()) {
            l.position = it->second;
          }
          if (l.lag() < 0) continue;
          // A partition with messages still to read is not idle, however long it waits.
          if (l.lag() > 0 && impl.window) impl.window->Heard(l.topic, l.partition, now);
          lag += l.lag();
          impl.registry
              ->GetGauge("sluice_pipeline_consumer_lag", "Records behind the high watermark, per partition",
                         {{"pipeline", c.name}, {"topic", l.topic}, {"partition", std::to_string(l.partition)}})
              .Set(static_cast<double>(l.lag()));
        }
      }
      if (now >= next_duck_memory) {
        // DuckDB's own accounting, per tag: tells DuckDB's growth from the allocators'.
        next_duck_memory = now + std::chrono::seconds(10);
        if (!memory_limit.empty()) {
          // Setting the limit (to what it is) makes DuckDB flush its allocators: its
          // jemalloc keeps freed pages resident and purges them only from idle worker
          // threads, which a one-thread database does not have (0.3-8 ms here).
          if (Status st = impl.conn->Execute(fmt::format("SET memory_limit = {}", duck::QuoteLiteral(memory_limit)));
              !st.ok()) {
            WarnIfError(st, "flushing DuckDB's allocator");
            memory_limit.clear();
          }
        }
        // glibc's heap (everything but DuckDB's buffers): held from the system, in use by
        // allocations; a gap growing between them is fragmentation, not a leak.
        struct mallinfo2 heap = mallinfo2();
        for (const auto& [kind, bytes] : {std::pair<const char*, size_t>{"arena", heap.arena + heap.hblkhd},
                                          {"in_use", heap.uordblks + heap.hblkhd},
                                          {"free", heap.fordblks}}) {
          impl.registry
              ->GetGauge("sluice_pipeline_malloc_bytes", "glibc malloc's heap: arena (from the system), in_use, free",
                         {{"pipeline", c.name}, {"kind", kind}})
              .Set(static_cast<double>(bytes));
        }
        if (auto tags = impl.conn->QueryText("SELECT tag, memory_usage_bytes FROM duckdb_memory()"); tags.ok()) {
          for (const auto& row : *tags) {
            if (!row[0] || !row[1]) continue;
            impl.registry
                ->GetGauge("sluice_pipeline_duckdb_memory_bytes", "DuckDB's memory by its tag (duckdb_memory())",
                           {{"pipeline", c.name}, {"tag", *row[0]}})
                .Set(std::stod(*row[1]));
          }
        }
      }
      if (options_.progress != nullptr) {
        uint64_t in = stats_.messages_in.load();
        std::fprintf(options_.progress, "\r%s: %llu in, %llu msg/s, lag %lld, %llu out, %llu errors   ",
                     c.name.c_str(), static_cast<unsigned long long>(in),
                     static_cast<unsigned long long>(in - last_in), static_cast<long long>(lag),
                     static_cast<unsigned long long>(stats_.rows_out.load()),
                     static_cast<unsigned long long>(stats_.errors.load()));
        std::fflush(options_.progress);
        last_in = in;
      }
      next_progress = now + std::chrono::seconds(1);
    }
  }
  sync_commit_ = true;
  if (result.ok()) result = ProcessBatch();
  // One last poll, so that a window that closed while stopping is not left behind.
  if (result.ok() && !impl.managers.empty()) result = PollWindows(true);
  // Windows the last batch closed; the open ones stay (in the state file, or read again
  // from the committed offsets).
  if (result.ok() && impl.window) result = CloseWindows(false);
  if (result.ok()) result = CommitWritten(true);
  if (result.ok()) result = CommitSink(true);
  if (options_.progress != nullptr) std::fprintf(options_.progress, "\n");
  if (!result.ok()) {
    // RAISE: what is in hand was not committed; leave it for the next run.
    impl.DropAll();
    SLUICE_LOG(kLog, kError, "{}", result.message());
  }
  // What is still read ahead goes first: librdkafka cannot be destroyed (its broker
  // threads wait) while messages it handed out are alive.
  impl.DropAll();
  impl.consumer.reset();  // leaves the group
  return result;
}

}  // namespace sluice::pipeline
