// PipelineRunner: runs one pipeline (docs/pipelines.md) — messages from a source, JSON
// decoded into DuckDB, the handler's SQL over each batch, the result to the sink (or into
// the window state), and the source offsets committed only when the commit strategy
// allows (at-least-once, DESIGN.md; exactly once into a sink that keeps the offsets).
//
// The runner is the loop and the batch; it hands work to rooms of their own:
//   source.h / kafka_source.h  the messages, the read-ahead bound, assignment events
//   batch_handler.h            decoding a batch and the handler's SQL over it
//   commit_strategy.h          when offsets are committed and where they are kept
//   window.h, state_writer.h   pipeline.window and pipeline.state
//   table_managers.h           sqlflow's window managers (tables.sql[].manager)
//   sink_factory.h             the sinks a pipeline file names
//   lost_transactions.h        exactly-once: an aborted transaction, re-read from the commit
//   runner_metrics.h, progress.h, error_phase.h, dead_letters.h
//
// Lifecycle: Create (opens the pipeline's own DuckDB database with its memory and thread
// limits, runs `commands`, makes the sinks and the commit strategy), then Run on one
// thread until Stop (any thread) or a RAISE error. Invoke runs the handler over given
// messages with no broker (`sluice pipeline invoke`).
//
// Batches: one at a time, of batch_size messages or what arrived within
// flush_interval_seconds, whichever comes first (an idle topic still flushes a partial
// batch). When the group takes partitions away, the source reports it and the runner
// finishes and commits the batch in hand before it lets them go; when they were lost,
// the batch in hand is dropped uncommitted. When an exactly-once sink's transaction is
// lost (aborted by a rebalance the member missed or the broker's timeout), everything
// after the group's committed offsets is read again.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "kafka/client/consumer.h"
#include "pipeline/dead_letters.h"
#include "pipeline/error_phase.h"
#include "pipeline/lost_transactions.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/source.h"
#include "schema/schema_source.h"
#include "sinks/sink.h"

namespace sluice::pipeline {

struct RunnerOptions {
  MetricsRegistry* metrics = nullptr;  // null: the process's registry
  std::FILE* console = nullptr;        // the console sink's stream; null: stdout
  // A progress line (rate, lag, errors) on this stream every second; null: none.
  std::FILE* progress = nullptr;
  // Where InferredDiskBatch keeps its database and spills; "" for a temporary directory.
  std::string work_dir;
  // The Schema Registry of this process (sluice serve), for a source or kafka sink of its
  // own broker without a schema_registry.url of its own; null: none (pipeline/schemas.h).
  std::shared_ptr<schema::SchemaSource> schemas;
  // Make no sinks (for Invoke, which never writes to one).
  bool without_sinks = false;
  // Lock DuckDB down before the pipeline's commands run: no files, no network, no
  // extensions to install or load, settings locked (the console's preview of a file an
  // HTTP user wrote; docs/design/0026-console.md).
  bool sandbox = false;
  // Tests: the source Run reads instead of a KafkaSource over the pipeline's source.
  std::function<Result<std::unique_ptr<Source>>(const SourceCounters&)> make_source;
  // Tests: makes every sink (pipeline, window, table managers', DLQ) instead of MakeSink.
  std::function<Result<std::unique_ptr<sinks::Sink>>(const SinkConfig&)> make_sink;
  // Exactly-once: the retries and back-off after a lost transaction.
  LostTransactionPolicy lost_transactions;
  // Told, on the pipeline's thread, of messages (or result rows) that failed and were
  // skipped (on_error IGNORE) or dead-lettered (DLQ, `dead_lettered` true): at most the
  // last kFailuresTold of each failure (the console's recent dead letters). Null: none.
  std::function<void(const DeadLetter& letter, bool dead_lettered)> on_failure;
};

// How many messages of one failure on_failure is told of.
inline constexpr size_t kFailuresTold = 50;

// Counts since Create (any thread).
struct RunnerStats {
  std::atomic<uint64_t> messages_in{0};
  std::atomic<uint64_t> rows_out{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> commits{0};
  // Window tables rebuilt to free the rows DuckDB keeps for deletes from indexed tables.
  std::atomic<uint64_t> window_compactions{0};
};

class PipelineRunner {
 public:
  static Result<std::unique_ptr<PipelineRunner>> Create(PipelineConfig config,
                                                        RunnerOptions options = {});
  ~PipelineRunner();
  PipelineRunner(const PipelineRunner&) = delete;
  PipelineRunner& operator=(const PipelineRunner&) = delete;

  // Consumes until Stop(); then finishes the batch in hand (flush, commit) and leaves the
  // group. Returns the error that stopped it under on_error RAISE (nothing past the last
  // flushed batch committed), or OK after Stop().
  Status Run();
  void Stop();  // any thread

  // Decodes `messages`, runs the handler and returns its rows as JSON objects, one per
  // row; decode errors go to `errors` as "message N: reason". No sink, no commit.
  Result<std::vector<std::string>> Invoke(std::span<const kafka::client::Message> messages,
                                          std::vector<std::string>* errors);

  const RunnerStats& stats() const { return stats_; }
  const std::string& name() const { return config_.name; }
  // "" when healthy, else why not (for /healthz).
  std::string Health() const;

 private:
  struct Impl;
  PipelineRunner(PipelineConfig config, RunnerOptions options);
  // Processes the batch in hand: decode, handler, sink write and flush (or the window),
  // dead letters, the state, then the commit the strategy allows (`mode`: kSync on
  // revocation and at stop). Returns an error only under RAISE (nothing of the batch
  // committed) or when the pipeline cannot go on.
  Status ProcessBatch(CommitMode mode);
  // A revocation (the batch in hand finished and committed first) or a lost assignment.
  Status OnAssignmentEvent(const AssignmentEvent& event);
  // After `error` failed a batch or a commit: when the exactly-once sink's transaction was
  // lost (sinks::Sink::TransactionLost), rewinds the source and waits the back-off
  // (LostTransactions), and returns OK: the pipeline goes on. Otherwise `error`.
  Status RecoverIfLost(const Status& error);
  // pipeline.window: emits the windows the watermark closed (every window with `all`), in
  // a transaction of its own; with `emitted` (Invoke) the rows are returned as JSON
  // objects instead of going to the sink. A failure leaves the windows for a retry a
  // second later (and /healthz unhealthy until a close succeeds); returns an error only
  // under RAISE.
  Status CloseWindows(bool all, std::vector<std::string>* emitted = nullptr);
  // Result rows a sink refused (not messages) through on_error, with `phase`.
  Status DeadLetterRows(const std::vector<sinks::RejectedRow>& rows, ErrorPhase phase,
                        std::string_view what);
  void SetHealth(std::string problem);
  // MakeSink, or options_.make_sink. `transaction`: for the DLQ, the pipeline's sink
  // (an exactly-once kafka sink takes dead letters into its transactions).
  Result<std::unique_ptr<sinks::Sink>> NewSink(const SinkConfig& config,
                                               const KafkaSourceConfig* source = nullptr,
                                               int64_t memory_limit_bytes = 0,
                                               sinks::Sink* transaction = nullptr) const;
  PipelineConfig config_;
  RunnerOptions options_;
  RunnerStats stats_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::pipeline
