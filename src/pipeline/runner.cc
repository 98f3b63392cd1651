// PipelineRunner (runner.h): the loop, the batch (decode, handler, sink or window, dead
// letters, the batch's transaction), assignment events and the window closes. Commits
// are the strategy's (commit_strategy.h), messages the source's (source.h).
#include "pipeline/runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "base/crash_point.h"
#include "base/logging.h"
#include "duck/chunk_view.h"
#include "duck/database.h"
#include "pipeline/batch_handler.h"
#include "pipeline/commit_strategy.h"
#include "pipeline/dead_letters.h"
#include "pipeline/json_decoder.h"
#include "pipeline/kafka_source.h"
#include "pipeline/loggers.h"
#include "pipeline/progress.h"
#include "pipeline/runner_metrics.h"
#include "pipeline/schemas.h"
#include "pipeline/sink_factory.h"
#include "pipeline/state_writer.h"
#include "pipeline/table_managers.h"
#include "pipeline/window.h"

namespace sluice::pipeline {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using kafka::client::Message;

// The handler's result lives here between the SQL and the sink.
constexpr std::string_view kResultTable = BatchHandler::kResultTable;
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

}  // namespace

struct PipelineRunner::Impl final : SourceListener {
  std::string temp_dir;  // removed at the end, when the runner made it
  std::unique_ptr<duck::Database> db;
  std::unique_ptr<duck::Connection> conn;
  // The decoder and the handler's SQL.
  std::unique_ptr<BatchHandler> handler;
  std::unique_ptr<sinks::Sink> sink;
  std::unique_ptr<sinks::Sink> dlq;
  // tables.sql entries managed as tumbling windows (sqlflow's form, docs/design/0007 #2).
  std::unique_ptr<TableManagers> managers;
  // pipeline.window (docs/design/0007 #3-#8) and its sink.
  std::unique_ptr<WindowEngine> window;
  std::unique_ptr<sinks::Sink> window_sink;
  Clock::time_point close_retry{};                   // after a failed close, not before this
  Clock::time_point last_checkpoint = Clock::now();  // of the database, after a close
  // pipeline.state: the database (or, write-behind, the state writer's) is on file.
  bool durable = false;
  std::unique_ptr<duck::Database> state_db;  // write-behind: the state file, the writer's own
  // When offsets are committed and where they are kept (it owns the state tables or the
  // state writer).
  std::unique_ptr<CommitStrategy> strategy;
  // The window's Observe over the decoded batch of `messages`.
  Status ObserveBatch(std::span<const Message> messages,
                      const std::vector<DecodeError>& decode_errors) {
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
    return window->Observe(handler->batch_table(), handler->batch_generation(), runs, wall_us,
                           Clock::now());
  }

  // Exactly-once: why the sink's transaction was lost by the call that just failed
  // (sinks::Sink::TransactionLost), or empty.
  std::string_view Lost() const { return sink ? sink->TransactionLost() : std::string_view(); }
  // Exactly-once: a fatal error of the transactional producer (fenced by a live producer
  // with the same transactional.id): the batch's records are not at fault, on_error does
  // not apply; the pipeline stops.
  bool Fatal(const Status& st) const {
    return sink && sink->CommitsSourceOffsets() && st.code() == StatusCode::kFailedPrecondition;
  }

  // The source (made by Run) and what the runner keeps of it.
  std::unique_ptr<Source> source;
  // After a lost transaction (made by Run).
  std::unique_ptr<LostTransactions> lost;
  // The next offset per partition after the last batch processed (for the lag).
  std::map<std::pair<std::string, int32_t>, int64_t> processed;

  // SourceListener, inside the source's NextBatch.
  void Assigning(std::vector<kafka::client::TopicPartition>& partitions) override {
    strategy->Assigning(partitions);
    if (window) {
      for (const kafka::client::TopicPartition& tp : partitions)
        window->Assign(tp.topic, tp.partition, Clock::now());
    }
  }
  void Heard(std::string_view topic, int32_t partition, SteadyTime now) override {
    window->Heard(topic, partition, now);
  }

  std::atomic<bool> stop{false};
  RunnerMetrics metrics;
  mutable std::mutex health_mu;
  std::string health;  // guarded by health_mu

  ~Impl() override {
    source.reset();  // messages before their consumer; leaves the group
    managers.reset();
    // A state writer writes what is queued; its connection goes before the database.
    strategy.reset();
    state_db.reset();
    window.reset();
    window_sink.reset();
    handler.reset();
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
    : config_(std::move(config)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

PipelineRunner::~PipelineRunner() {
  if (impl_ && impl_->metrics.registry != nullptr)
    impl_->metrics.registry->RemoveLabeled("pipeline", config_.name);
}

Result<std::unique_ptr<sinks::Sink>> PipelineRunner::NewSink(const SinkConfig& config,
                                                             const KafkaSourceConfig* source,
                                                             int64_t memory_limit_bytes,
                                                             sinks::Sink* transaction) const {
  if (options_.make_sink) return options_.make_sink(config);
  return MakeSink(config, options_.console, source, memory_limit_bytes, config_.name, transaction,
                  options_.schemas);
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
          "pipeline {}: pipeline.state cannot be used with handlers.InferredDiskBatch (its batch "
          "table would be "
          "written to the state file every batch); use handlers.InferredMemBatch or "
          "StructuredBatch",
          c.name);
    }
    fs::path path(c.state->path);
    std::error_code ec;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
    if (ec)
      return IOError("pipeline {}: cannot create the directory of {}: {}", c.name, c.state->path,
                     ec.message());
    impl.durable = true;
    // Write-behind (docs/design/0007, "Write-behind state"): a declarative window whose
    // emissions and dead letters leave the process keeps its database in memory and a
    // copy of its state on file. Anything that writes tables of the state database itself
    // (sqlflow-form managers, a sqlcommand window sink or DLQ) works on the file directly.
    const bool managed = std::any_of(c.tables.begin(), c.tables.end(), [](const TableConfig& t) {
      return t.tumbling_window.has_value();
    });
    const bool dlq_in_db = c.on_error.policy == ErrorPolicy::kDlq && c.on_error.dlq &&
                           c.on_error.dlq->type == SinkType::kSqlCommand;
    write_behind =
        c.window && !managed && c.window->sink.type != SinkType::kSqlCommand && !dlq_in_db;
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
  if (options.sandbox) {
    for (const char* set :
         {"SET enable_external_access = false", "SET autoinstall_known_extensions = false",
          "SET autoload_known_extensions = false", "SET allow_community_extensions = false",
          "SET lock_configuration = true"}) {
      RETURN_IF_ERROR(impl.conn->Execute(set));
    }
  }
  for (const SqlCommand& cmd : c.commands) {
    Status st = impl.conn->Execute(cmd.sql);
    if (!st.ok()) {
      return InvalidArgumentError("{}: command '{}' failed: {}", cmd.origin, cmd.name,
                                  st.message());
    }
  }
  PipelineRunner* runner = r.get();
  TableManagers::Hooks hooks;
  hooks.pipeline = c.name;
  hooks.policy = c.on_error.policy;
  hooks.failed = [runner] {
    runner->impl_->metrics.errors(ErrorPhase::kWindow).Inc();
    ++runner->stats_.errors;
  };
  hooks.compactions = &r->stats_.window_compactions;
  // The handler's statement reads the table about to be replaced: prepare it again.
  hooks.table_replaced = [runner] { runner->impl_->handler->Unprepare(); };
  hooks.refused = [runner](const std::vector<sinks::RejectedRow>& rows, std::string what) {
    return runner->DeadLetterRows(rows, ErrorPhase::kWindow, what);
  };
  impl.managers = std::make_unique<TableManagers>(*impl.conn, std::move(hooks));
  for (const TableConfig& t : c.tables) {
    Status st = impl.conn->Execute(t.sql);
    if (!st.ok()) {
      return InvalidArgumentError("{}: tables.sql '{}' failed: {}", t.origin, t.name, st.message());
    }
    if (!t.tumbling_window) continue;
    std::unique_ptr<sinks::Sink> sink;
    if (!options.without_sinks) {
      ASSIGN_OR_RETURN(sink, r->NewSink(t.sink));
    }
    impl.managers->Add(t, std::move(sink));
  }
  StateTables::Loaded loaded;
  std::unique_ptr<StateTables> state_tables;
  std::unique_ptr<duck::Connection> writer_conn;
  if (impl.durable) {
    duck::Connection* state_conn = impl.conn.get();
    if (write_behind) {
      ASSIGN_OR_RETURN(writer_conn, duck::Connection::Open(*impl.state_db));
      state_conn = writer_conn.get();
    }
    ASSIGN_OR_RETURN(state_tables, StateTables::Open(*state_conn));
    ASSIGN_OR_RETURN(loaded, state_tables->Load());
    if (write_behind) {
      // The open windows' rows, into memory.
      ASSIGN_OR_RETURN(
          auto exists,
          writer_conn->QueryText(
              "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'main' AND "
              "table_name = 'sluice_window_rows' AND database_name = current_database()"));
      if (exists[0][0].value_or("0") != "0") {
        ASSIGN_OR_RETURN(duck::QueryResult rows,
                         writer_conn->Query("SELECT * FROM sluice_window_rows"));
        std::vector<std::string> names;
        for (size_t i = 0; i < rows.column_count(); ++i) names.push_back(rows.column_name(i));
        std::vector<duck::LogicalType> types = rows.column_logical_types();
        std::vector<duck::DataChunk> chunks = rows.TakeChunks();
        std::vector<const duck::DataChunk*> pointers;
        for (const duck::DataChunk& chunk : chunks) pointers.push_back(&chunk);
        ASSIGN_OR_RETURN(auto view, duck::ChunkView::Create(*impl.conn, "sluice_window_loaded",
                                                            names, std::move(types)));
        view->SetChunks(pointers);
        Status st = impl.conn->Execute(
            "CREATE TABLE sluice_window_rows AS SELECT * FROM sluice_window_loaded");
        view.reset();
        chunks.clear();  // before the result they point into
        RETURN_IF_ERROR(st);
      }
    }
  }
  if (c.window) {
    auto engine = WindowEngine::Create(*impl.conn, *c.window, c.name,
                                       impl.durable ? &loaded : nullptr, write_behind);
    if (!engine.ok()) {
      return InvalidArgumentError("pipeline {}: pipeline.window: {}", c.name,
                                  engine.status().message());
    }
    impl.window = std::move(engine).value();
    if (!options.without_sinks) {
      ASSIGN_OR_RETURN(impl.window_sink, r->NewSink(c.window->sink));
    }
  }
  std::unique_ptr<StateWriter> writer;
  if (write_behind) {
    writer = StateWriter::Start(std::move(writer_conn), std::move(state_tables), *c.window, c.name,
                                kWriterQueue);
  }
  std::shared_ptr<schema::SchemaSource> schemas;
  if (c.source.format != MessageFormat::kJson) {
    auto found = SchemasFor(c.source.schema_registry, c.source.brokers, options.schemas);
    if (!found.ok()) {
      return InvalidArgumentError("pipeline {}: source.kafka.schema_registry: {}", c.name,
                                  found.status().message());
    }
    schemas = std::move(found).value();
  }
  ASSIGN_OR_RETURN(impl.handler, BatchHandler::Create(*impl.conn, c, std::move(schemas)));
  if (!options.without_sinks && !c.window) {
    ASSIGN_OR_RETURN(impl.sink, r->NewSink(c.sink, &c.source, c.duckdb.memory_limit_bytes));
  }
  if (!options.without_sinks && c.on_error.policy == ErrorPolicy::kDlq && c.on_error.dlq) {
    ASSIGN_OR_RETURN(impl.dlq, r->NewSink(*c.on_error.dlq, nullptr, 0, impl.sink.get()));
  }

  MetricsRegistry& m = options.metrics != nullptr ? *options.metrics : MetricsRegistry::Global();
  impl.metrics = RunnerMetrics::Register(m, c.name);

  // The commit strategy: one per pipeline, chosen here (commit_strategy.h).
  CommitCounters counters{impl.metrics.commits, &impl.metrics.errors(ErrorPhase::kCommit),
                          &r->stats_.commits, impl.metrics.commit_seconds,
                          impl.metrics.commit_max_seconds};
  counters.committed_offset = [&m, name = c.name](const std::string& topic, int32_t partition) {
    return &m.GetGauge(
        "sluice_pipeline_committed_offset",
        "The source offset last committed to the consumer group (the next "
        "message to read), per partition: everything before it is in the sink",
        {{"pipeline", name}, {"topic", topic}, {"partition", std::to_string(partition)}});
  };
  if (writer) {
    impl.strategy = CommitStrategy::WriteBehind(c.name, counters, impl.window.get(),
                                                std::move(writer), loaded.offsets);
  } else if (impl.sink && impl.sink->Defers()) {
    impl.strategy = CommitStrategy::SinkCommit(c.name, counters, impl.sink.get(),
                                               std::move(state_tables), loaded.offsets);
  } else if (impl.durable) {
    impl.strategy = CommitStrategy::StateTransaction(c.name, counters, impl.window.get(),
                                                     std::move(state_tables), loaded.offsets);
  } else {
    impl.strategy = CommitStrategy::AfterSink(c.name, counters, impl.window.get());
  }
  return r;
}

void PipelineRunner::Stop() { impl_->stop.store(true); }

std::string PipelineRunner::Health() const {
  std::lock_guard<std::mutex> lock(impl_->health_mu);
  return impl_->health;
}

void PipelineRunner::SetHealth(std::string problem) {
  std::lock_guard<std::mutex> lock(impl_->health_mu);
  impl_->health = std::move(problem);
}

Result<std::vector<std::string>> PipelineRunner::Invoke(std::span<const Message> messages,
                                                        std::vector<std::string>* errors) {
  Impl& impl = *impl_;
  std::vector<DecodeError> decode_errors;
  ASSIGN_OR_RETURN(size_t decoded, impl.handler->Decode(messages, &decode_errors));
  for (const DecodeError& e : decode_errors) {
    errors->push_back(fmt::format("message {}: {}", e.index + 1, e.reason));
  }
  // Nothing decoded: no rows for the handler (as ProcessBatch).
  if (impl.handler->NoColumnsYet() || (decoded == 0 && !decode_errors.empty())) {
    return std::vector<std::string>();
  }
  Status st = impl.handler->Run().status();
  if (!st.ok())
    return InvalidArgumentError("{}: handler.sql: {}", config_.handler.sql_origin, st.message());
  if (impl.window) {
    // pipeline.window: the rows the window emits once the fixture is over (every window
    // closes at its end); rows it cannot keep are errors.
    std::vector<DroppedRow> dropped;
    Result<uint64_t> kept =
        impl.window->Add(kResultTable, impl.handler->result_generation(), &dropped);
    if (!kept.ok()) return InvalidArgumentError("pipeline.window: {}", kept.status().message());
    for (const DroppedRow& d : dropped)
      errors->push_back(fmt::format("row {}: {}", d.row_json, d.reason));
    Status observed = impl.ObserveBatch(messages, decode_errors);
    if (!observed.ok()) return InvalidArgumentError("pipeline.window: {}", observed.message());
    std::vector<std::string> out;
    RETURN_IF_ERROR(CloseWindows(true, &out));
    return out;
  }
  if (!impl.managers->empty()) {
    // A windowed pipeline: the rows are what its windows emit at the end of the fixture.
    std::vector<std::string> out;
    RETURN_IF_ERROR(impl.managers->Poll(true, &out));
    return out;
  }
  ASSIGN_OR_RETURN(
      duck::QueryResult rows,
      impl.conn->Query(fmt::format("SELECT to_json(t)::VARCHAR FROM {} t", kResultTable)));
  std::vector<std::string> out;
  for (size_t i = 0; i < rows.chunk_count(); ++i) {
    duck::ResultChunk chunk = rows.chunk(i);
    for (size_t r = 0; r < chunk.size(); ++r) out.emplace_back(chunk.GetString(0, r));
  }
  return out;
}

Status PipelineRunner::DeadLetterRows(const std::vector<sinks::RejectedRow>& rows, ErrorPhase phase,
                                      std::string_view what) {
  Impl& impl = *impl_;
  const PipelineConfig& c = config_;
  if (rows.empty()) return Status::OK();
  impl.metrics.errors(phase).Inc(rows.size());
  stats_.errors += rows.size();
  if (c.on_error.policy == ErrorPolicy::kRaise) {
    return InvalidArgumentError("pipeline {}: {}: {} row(s) refused, the first: {}", c.name, what,
                                rows.size(), rows.front().reason);
  }
  if (options_.on_failure) {
    const size_t skip = rows.size() - std::min(rows.size(), kFailuresTold);
    for (size_t i = skip; i < rows.size(); ++i) {
      options_.on_failure(DeadLetter(rows[i].reason, phase, RowAsMessage(rows[i].row_json)),
                          c.on_error.policy == ErrorPolicy::kDlq && impl.dlq != nullptr);
    }
  }
  if (c.on_error.policy == ErrorPolicy::kDlq && impl.dlq) {
    std::vector<DeadLetter> letters;
    for (const sinks::RejectedRow& row : rows) {
      letters.emplace_back(row.reason, phase, RowAsMessage(row.row_json));
    }
    RETURN_IF_ERROR(LoadDeadLetters(*impl.conn, letters));
    std::vector<sinks::RejectedRow> dlq_rejected;
    Status dst = impl.dlq->Write(*impl.conn, kDlqTable, {}, &dlq_rejected);
    if (dst.ok()) dst = impl.dlq->Flush();
    if (!dst.ok() || !dlq_rejected.empty()) {
      return InternalError("pipeline {}: dead-letter sink {} failed for {} rows: {}", c.name,
                           impl.dlq->Describe(), what,
                           dst.ok() ? dlq_rejected.front().reason : dst.message());
    }
    return Status::OK();
  }
  SLUICE_LOG(kLog, kWarn, "pipeline {}: {}: {} row(s) refused, skipped (on_error {}): {}", c.name,
             what, rows.size(),
             c.on_error.policy == ErrorPolicy::kDlq ? "DLQ without a sink" : "IGNORE",
             rows.front().reason);
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
      ASSIGN_OR_RETURN(duck::QueryResult j, impl.conn->Query(fmt::format(
                                                "SELECT to_json(t)::VARCHAR FROM {} t", table)));
      for (size_t i = 0; i < j.chunk_count(); ++i) {
        duck::ResultChunk chunk = j.chunk(i);
        for (size_t row = 0; row < chunk.size(); ++row)
          collected.emplace_back(chunk.GetString(0, row));
      }
      return Status::OK();
    }
    if (!impl.window_sink) return Status::OK();
    RETURN_IF_ERROR(impl.window_sink->Write(*impl.conn, table, {}, &rejected));
    auto flush_started = Clock::now();
    Status st = impl.window_sink->Flush();
    if (st.ok()) CrashPoint("window-emitted");
    impl.metrics.flush_seconds->Observe(
        std::chrono::duration<double>(Clock::now() - flush_started).count());
    if (st.ok()) {
      uint64_t n = 0;
      if (auto count = impl.conn->QueryText(fmt::format("SELECT count(*) FROM {}", table));
          count.ok()) {
        n = std::stoull((*count)[0][0].value_or("0"));
      }
      n -= std::min<uint64_t>(n, rejected.size());
      impl.metrics.rows_out->Inc(n);
      stats_.rows_out += n;
    }
    return st;
  };
  auto snapshot = impl.window->Snapshot();
  Status st = impl.conn->Execute("BEGIN TRANSACTION");
  if (st.ok()) st = impl.window->Close(all, emit);
  if (st.ok()) st = impl.strategy->SaveClose();  // kStateTransaction: the progress with the close
  if (st.ok()) st = impl.conn->Execute("COMMIT");
  if (!st.ok()) {
    (void)impl.conn->Execute("ROLLBACK");
    impl.window->Restore(*snapshot);
    impl.metrics.errors(ErrorPhase::kWindow).Inc();
    ++stats_.errors;
    std::string error = fmt::format("pipeline {}: closing windows: {}", c.name, st.message());
    SetHealth(error);
    if (c.on_error.policy == ErrorPolicy::kRaise) return InvalidArgumentError("{}", error);
    SLUICE_LOG(kLog, kWarn, "{} (the windows stay; tried again in a second)", error);
    impl.close_retry = now + std::chrono::seconds(1);
    return Status::OK();
  }
  // A close that failed before made the pipeline unhealthy until one succeeds.
  SetHealth("");
  if (emitted != nullptr) emitted->insert(emitted->end(), collected.begin(), collected.end());
  // kWriteBehind: the close's changes to the state writer.
  RETURN_IF_ERROR(impl.strategy->CloseCommitted(now - impl.last_checkpoint >= kCheckpointEvery));
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
  return DeadLetterRows(
      rejected, ErrorPhase::kWindow,
      fmt::format("window sink {}", impl.window_sink ? impl.window_sink->Describe() : "-"));
}

Status PipelineRunner::ProcessBatch(CommitMode mode) {
  Impl& impl = *impl_;
  const PipelineConfig& c = config_;
  RunnerStats& stats = stats_;
  const std::span<const Message> pending = impl.source->InHand();
  // (A sync commit still commits what the state writer or a deferring sink holds.)
  if (pending.empty()) {
    if (mode != CommitMode::kSync) return Status::OK();
    return impl.strategy->Flush(CommitMode::kSync);
  }
  auto started = Clock::now();
  const ErrorPolicy policy = c.on_error.policy;
  std::vector<DeadLetter> letters;
  // Under IGNORE and DLQ a failed phase loses (or dead-letters) its messages, then the
  // batch's offsets are committed all the same; under RAISE it stops the pipeline.
  auto fail = [&](ErrorPhase phase, const std::string& error,
                  std::span<const Message> messages) -> Status {
    impl.metrics.errors(phase).Inc(messages.size());
    stats.errors += messages.size();
    if (policy == ErrorPolicy::kRaise) {
      return InvalidArgumentError("pipeline {}: {} failed: {}", c.name, Name(phase), error);
    }
    if (options_.on_failure) {
      const size_t skip = messages.size() - std::min(messages.size(), kFailuresTold);
      for (const Message& m : messages.subspan(skip)) {
        options_.on_failure(DeadLetter(error, phase, m),
                            policy == ErrorPolicy::kDlq && impl.dlq != nullptr);
      }
    }
    if (policy == ErrorPolicy::kDlq) {
      for (const Message& m : messages) letters.emplace_back(error, phase, m);
    } else {
      SLUICE_LOG(kLog, kWarn,
                 "pipeline {}: {} failed for {} message(s), skipped (on_error IGNORE): {}", c.name,
                 Name(phase), messages.size(), error);
    }
    return Status::OK();
  };
  // A result row (not a message) that failed: it goes to the DLQ as the row.
  auto fail_row = [&](ErrorPhase phase, const std::string& reason, const std::string& row_json) {
    Message as_message = RowAsMessage(row_json);
    return fail(phase, reason, std::span<const Message>(&as_message, 1));
  };

  sinks::SourceOffsets offsets;
  std::map<std::pair<std::string, int32_t>, int64_t>
      first;  // the batch's first offset per partition
  {
    // Runs of one partition are the rule: look the map up only when the partition changes.
    int64_t* next = nullptr;
    const Message* last = nullptr;
    for (const Message& m : pending) {
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
  Result<size_t> decoded = impl.handler->Decode(pending, &decode_errors);
  impl.source->BatchDecoded();
  bool batch_ok = true;
  bool wrote = false;  // the sink took the batch's rows
  if (!decoded.ok()) {
    RETURN_IF_ERROR(fail(ErrorPhase::kDecode, decoded.status().message(), pending));
    batch_ok = false;
  } else {
    for (const DecodeError& e : decode_errors) {
      const Message& m = pending[e.index];
      RETURN_IF_ERROR(
          fail(ErrorPhase::kDecode,
               fmt::format("{} [{}] offset {}: {}", m.topic, m.partition, m.offset, e.reason),
               std::span<const Message>(&m, 1)));
    }
    // No message of the batch decoded (each is a decode error already): there is no row
    // for the handler, and an inferred batch has only its kafka_ columns (framed messages
    // none of which decoded before any gave the batch its columns: no table at all).
    // Running the SQL would fail on them and dead-letter the messages a second time.
    if (*decoded == 0 && (!decode_errors.empty() || impl.handler->NoColumnsYet())) {
      batch_ok = false;
    }
  }
  // The messages a later phase's failure dead-letters: the decoded ones (those that failed
  // to decode have their letter already).
  std::vector<Message> decoded_messages;
  std::span<const Message> decoded_span = pending;
  if (decoded.ok() && !decode_errors.empty()) {
    size_t error_index = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
      if (error_index < decode_errors.size() && decode_errors[error_index].index == i) {
        ++error_index;
      } else {
        decoded_messages.push_back(pending[i]);
      }
    }
    decoded_span = decoded_messages;
  }
  // With a window or durable state the batch is one transaction: the handler's writes, the
  // window state, the sink's writes into this database and the offsets commit together.
  // It is rolled back on every way out but the COMMIT.
  const bool transaction = impl.window || impl.strategy->SavesInTransaction();
  bool open = false;
  std::shared_ptr<const WindowEngine::Memory> snapshot;
  auto rollback = [&] {
    if (!open) return;
    open = false;
    (void)impl.conn->Execute("ROLLBACK");
    impl.handler->Forget();
    if (snapshot) impl.window->Restore(*snapshot);
    impl.strategy->RolledBack();
  };
  struct OnExit {
    std::function<void()> f;
    ~OnExit() { f(); }
  } on_exit{rollback};
  auto begin_transaction = [&]() -> Status {
    Status st = impl.conn->Execute("BEGIN TRANSACTION");
    if (!st.ok())
      return InternalError("pipeline {}: cannot begin the batch's transaction: {}", c.name,
                           st.message());
    open = true;
    return Status::OK();
  };
  if (transaction && batch_ok) {
    if (impl.window) snapshot = impl.window->Snapshot();
    RETURN_IF_ERROR(begin_transaction());
  }
  uint64_t result_rows = 0;
  if (batch_ok) {
    Result<uint64_t> ran = impl.handler->Run();
    if (!ran.ok()) {
      rollback();
      RETURN_IF_ERROR(fail(ErrorPhase::kHandler, ran.status().message(), decoded_span));
      batch_ok = false;
    } else {
      result_rows = *ran;
    }
  }
  if (batch_ok && impl.window) {
    std::vector<DroppedRow> dropped;
    Result<uint64_t> kept =
        impl.window->Add(kResultTable, impl.handler->result_generation(), &dropped);
    Status st = kept.status();
    if (st.ok()) {
      st = impl.ObserveBatch(pending, decode_errors);
    }
    if (!st.ok()) {
      rollback();
      RETURN_IF_ERROR(fail(ErrorPhase::kWindow, st.message(), decoded_span));
      batch_ok = false;
    } else {
      if (*kept > 0) impl.window->NoteSources(first);
      impl.metrics.rows_out->Inc(*kept);
      for (const DroppedRow& d : dropped)
        RETURN_IF_ERROR(
            fail_row(d.late ? ErrorPhase::kLate : ErrorPhase::kWindow, d.reason, d.row_json));
    }
  } else if (batch_ok) {
    std::vector<sinks::RejectedRow> rejected;
    Status st = impl.sink->Write(*impl.conn, kResultTable, offsets, &rejected);
    wrote = st.ok();
    if (st.ok()) {
      auto flush_started = Clock::now();
      st = impl.sink->Flush();
      impl.metrics.flush_seconds->Observe(
          std::chrono::duration<double>(Clock::now() - flush_started).count());
    }
    SetHealth(st.ok() ? ""
                      : fmt::format("pipeline {}: sink {}: {}", c.name, impl.sink->Describe(),
                                    st.message()));
    if (!st.ok()) {
      rollback();
      // Exactly-once: a lost transaction is re-read (Run), a fenced producer stops; neither
      // is the records' fault.
      if (!impl.Lost().empty() || impl.Fatal(st)) return st;
      RETURN_IF_ERROR(fail(ErrorPhase::kSink, st.message(), decoded_span));
    } else {
      uint64_t n = result_rows - std::min<uint64_t>(result_rows, rejected.size());
      impl.metrics.rows_out->Inc(n);
      stats.rows_out += n;
      for (const sinks::RejectedRow& row : rejected)
        RETURN_IF_ERROR(fail_row(ErrorPhase::kSink, row.reason, row.row_json));
    }
  }
  if (!letters.empty() && impl.dlq) {
    if (impl.strategy->SavesInTransaction() && !open) {
      // A batch that failed before its transaction began (nothing decoded, a handler's
      // failure): the dead letters still go in one transaction with the offsets, so a
      // crash before its COMMIT does not leave them written for the batch's replay.
      RETURN_IF_ERROR(begin_transaction());
    }
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
      // Exactly-once: the sink's transaction (the dead letters are in it) was lost.
      if (!impl.Lost().empty()) return dst;
      // Nowhere left to put them: stop rather than lose them.
      return InternalError("pipeline {}: dead-letter sink {} failed: {}", c.name,
                           impl.dlq->Describe(), dst.message());
    }
  }
  CrashPoint("batch-begun");
  if (impl.strategy->SavesInTransaction()) {
    // The offsets go with the batch's state (or alone, when the batch failed and its
    // messages were skipped or dead-lettered).
    Status st = open ? Status::OK() : impl.conn->Execute("BEGIN TRANSACTION");
    open = true;
    if (st.ok()) st = impl.strategy->SaveBatch(offsets);
    if (!st.ok())
      return InternalError("pipeline {}: saving the state failed: {}", c.name, st.message());
  }
  if (open) {
    Status st = impl.conn->Execute("COMMIT");
    if (!st.ok()) {
      return InternalError("pipeline {}: committing the batch's state failed: {}", c.name,
                           st.message());
    }
    open = false;
    if (impl.strategy->SavesInTransaction()) impl.strategy->BatchCommitted(offsets);
  }
  // The commit the strategy allows now that the sink, the dead letters and the state hold
  // the batch.
  RETURN_IF_ERROR(impl.strategy->CommitBatch(offsets, wrote, mode));
  for (const auto& [tp, next] : offsets) impl.processed[tp] = next;
  ++stats.batches;
  impl.metrics.batch_seconds->Observe(
      std::chrono::duration<double>(Clock::now() - started).count());
  return Status::OK();
}

Status PipelineRunner::OnAssignmentEvent(const AssignmentEvent& event) {
  Impl& impl = *impl_;
  for (const kafka::client::TopicPartition& tp : event.partitions) {
    if (impl.window) impl.window->Revoke(tp.topic, tp.partition);
  }
  if (event.kind == AssignmentEvent::Kind::kRevoked) {
    // Finish the batch in hand and commit it while the partitions are still ours (the
    // source keeps them until acknowledged; what it read ahead of them is dropped).
    // Exactly-once: a transaction lost meanwhile is re-read from the group's commit.
    RETURN_IF_ERROR(RecoverIfLost(ProcessBatch(CommitMode::kSync)));
    impl.source->BatchDone();
    for (const kafka::client::TopicPartition& tp : event.partitions)
      impl.processed.erase({tp.topic, tp.partition});
    impl.strategy->Revoked(event.partitions);
    impl.source->AcknowledgeRevocation();
    return Status::OK();
  }
  // Lost: already someone else's, and the source dropped what it held of them.
  impl.processed.clear();
  return impl.strategy->Lost(event.partitions);
}

Status PipelineRunner::RecoverIfLost(const Status& error) {
  Impl& impl = *impl_;
  if (error.ok() || impl.lost == nullptr) return error;
  const std::string_view cause = impl.Lost();
  if (cause.empty()) return error;
  ASSIGN_OR_RETURN(std::chrono::milliseconds wait, impl.lost->Recover(error, cause, *impl.source));
  impl.processed.clear();
  // The back-off; librdkafka keeps the member's session (its heartbeats are its own
  // thread's) and a Stop is heard within 50 ms.
  const auto until = Clock::now() + wait;
  for (auto now = Clock::now(); now < until && !impl.stop.load(); now = Clock::now()) {
    std::this_thread::sleep_for(
        std::min<Clock::duration>(std::chrono::milliseconds(50), until - now));
  }
  return Status::OK();
}

Status PipelineRunner::Run() {
  Impl& impl = *impl_;
  if (options_.without_sinks)
    return FailedPreconditionError("pipeline {}: made without sinks", config_.name);
  const PipelineConfig& c = config_;
  SourceCounters counters{impl.metrics.messages_in,     impl.metrics.bytes_in,
                          &stats_.messages_in,          &impl.metrics.errors(ErrorPhase::kSource),
                          impl.metrics.read_ahead_full, impl.metrics.read_ahead};
  if (options_.make_source) {
    ASSIGN_OR_RETURN(impl.source, options_.make_source(counters));
  } else {
    ASSIGN_OR_RETURN(impl.source, KafkaSource::Create(c.source, c.name, counters));
  }
  impl.metrics.registry
      ->GetGauge("sluice_pipeline_source_info",
                 "1 for the path the pipeline's source reads by: in_process (the broker's log "
                 "in this process) or kafka (a Kafka client, librdkafka)",
                 {{"pipeline", c.name}, {"source", std::string(impl.source->path())}})
      .Set(1);
  impl.strategy->set_source(impl.source.get());
  impl.lost = std::make_unique<LostTransactions>(c.name, &impl.metrics, options_.lost_transactions);
  RETURN_IF_ERROR(impl.source->Start(&impl, impl.window != nullptr));
  SLUICE_LOG(kLog, kInfo, "pipeline {}: consuming {} as group {} (batch {}, flush every {} s)",
             c.name, fmt::join(c.source.topics, ","), c.source.group_id, c.batch_size,
             c.flush_interval_seconds);

  const size_t batch_size = static_cast<size_t>(c.batch_size);
  const auto interval = std::chrono::seconds(c.flush_interval_seconds);
  auto deadline = Clock::now() + interval;
  auto next_progress = Clock::now() + std::chrono::seconds(1);
  ProgressReporter progress(*impl.metrics.registry, c.name, *impl.conn, c.duckdb.memory_limit_bytes,
                            options_.progress);
  Status result;
  while (!impl.stop.load()) {
    SourceStep step = impl.source->NextBatch(batch_size, deadline);
    if (step.event.kind != AssignmentEvent::Kind::kNone) {
      result = OnAssignmentEvent(step.event);
      if (!result.ok()) break;
      continue;
    }
    if (step.ready) {
      const bool records = !impl.source->InHand().empty();
      Status st = ProcessBatch(CommitMode::kAsync);
      if (!st.ok()) {
        // Exactly-once: a lost transaction is re-read from the group's commit (the source
        // dropped the batch in hand); anything else stops.
        result = RecoverIfLost(st);
        if (!result.ok()) break;
        deadline = Clock::now() + interval;
        continue;
      }
      if (records) impl.lost->Committed();
      deadline = Clock::now() + interval;
      impl.source->BatchDone();
    }
    if (!impl.managers->empty()) {
      Status st = impl.managers->Poll(false);
      if (!st.ok()) {
        result = st;
        break;
      }
    }
    if (impl.window) {
      Status st = CloseWindows(false);
      if (!st.ok()) {
        result = st;
        break;
      }
    }
    // What became durable since: the state writer's file, a deferring sink's commit when due.
    if (Status st = RecoverIfLost(impl.strategy->Flush(CommitMode::kAsync)); !st.ok()) {
      result = st;
      break;
    }
    const auto now = Clock::now();
    if (now >= next_progress) {
      // About once a second: consumer lag per partition, behind what the pipeline
      // processed (not what it read ahead), and the progress line.
      std::vector<kafka::client::PartitionLag> lags;
      if (auto l = impl.source->Lag(); l.ok()) lags = std::move(l).value();
      for (kafka::client::PartitionLag& l : lags) {
        if (auto it = impl.processed.find({l.topic, l.partition}); it != impl.processed.end()) {
          l.position = it->second;
        }
        // A partition with messages still to read is not idle, however long it waits.
        if (l.lag() > 0 && impl.window) impl.window->Heard(l.topic, l.partition, now);
      }
      progress.Report(now, lags, stats_);
      next_progress = now + std::chrono::seconds(1);
    }
  }
  const bool stopped = result.ok();  // by Stop, not by an error
  if (result.ok()) result = ProcessBatch(CommitMode::kSync);
  // One last poll, so that a window that closed while stopping is not left behind.
  if (result.ok() && !impl.managers->empty()) result = impl.managers->Poll(true);
  // Windows the last batch closed; the open ones stay (in the state file, or read again
  // from the committed offsets).
  if (result.ok() && impl.window) result = CloseWindows(false);
  if (result.ok()) result = impl.strategy->Flush(CommitMode::kSync);
  if (stopped && !result.ok() && !impl.Lost().empty()) {
    // Exactly-once, stopping: the last transaction was lost (aborted); nothing of it is
    // visible and the group's commit is where the next run starts. Not an error.
    SLUICE_LOG(kLog, kWarn,
               "pipeline {}: stopping: the last transaction was aborted ({}); the next run "
               "reads it again: {}",
               c.name, impl.Lost(), result.message());
    impl.metrics.txn_aborts(impl.Lost()).Inc();
    result = Status::OK();
  }
  progress.Finish();
  // RAISE: what is in hand was not committed; leave it for the next run.
  if (!result.ok()) SLUICE_LOG(kLog, kError, "{}", result.message());
  impl.source->Close();  // drops what is still held, leaves the group
  return result;
}

}  // namespace sluice::pipeline
