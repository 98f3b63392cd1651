// WindowEngine: the declarative windows of `pipeline.window` (docs/design/0007 #3-#8):
// tumbling, hopping and session windows over event time, kept in one unindexed table of
// the pipeline's database, closed by a per-partition watermark and emitted through the
// user's emit_sql.
//
// Each batch, on the pipeline's thread, inside the batch's transaction:
//   engine->Add("sluice_handler_result", seq, &late);   // result rows into the state
//   engine->Observe("batch", runs, wall_us, now);        // newest event time per partition
//   engine->TakeProgress(&progress);                     // with pipeline.state
// then, in a transaction of its own, while windows are due:
//   engine->Close(false, now, emit);                     // emit(table) writes the sink
// With pipeline.state the progress goes to StateTables::Save in the same transaction, or,
// write-behind (the rows table in memory), TakeChanges and the progress go to the
// StateWriter after the commit (state_writer.h).
//
// Event time is `time_column`: TIMESTAMP (read as UTC), TIMESTAMP WITH TIME ZONE, DATE,
// or VARCHAR (cast to TIMESTAMPTZ; a string that is not a timestamp has no time). Times
// are microseconds since the epoch inside.
//
// Watermark: per assigned partition, the newest event time seen (times beyond wall clock +
// max_future do not count) minus grace; the pipeline's is the smallest over partitions
// that are not idle (silent for idle_close), or, when all are idle, the newest over all of
// them. A partition assigned but never heard from holds it back until it goes idle. The
// watermark never moves back. A window [start, end) closes when the watermark reaches end.
//
// State tables: sluice_window_rows in the pipeline's database (and its copy on file with
// pipeline.state); the others with pipeline.state (StateTables):
//   sluice_window_rows: the result columns, window_start, window_end, and sluice_t
//     (event µs), sluice_end (window end µs; NULL for sessions), sluice_emitted,
//     sluice_batch (the batch that added the row).
//   sluice_window_sources(batch, topic, partition, first_offset): per batch that added
//     rows, where each partition's messages in it started: the Kafka commit floor.
//   sluice_watermarks(topic, partition, newest, seq): per partition, the row with the
//     highest seq; ('', -1) is the pipeline's (see PartitionValues).
//
// Lifecycle: owned by the runner, on its thread; the Connection must outlive it. The
// in-memory part (watermarks, floors) can be snapshotted and restored around a
// transaction that is rolled back.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/database.h"
#include "duck/logical_type.h"
#include "pipeline/pipeline_config.h"

namespace sluice::pipeline {

// A run of consecutive decoded rows from one partition.
struct SourceRun {
  std::string_view topic;
  int32_t partition = 0;
  size_t rows = 0;
};

// A result row that is not kept: too late, or without an event time.
struct DroppedRow {
  std::string row_json;
  std::string reason;
  bool late = false;  // else: no event time
};

// A state table of one BIGINT per partition, `table(topic VARCHAR, "partition" INTEGER,
// <column> BIGINT, seq BIGINT)`, unindexed and append-only: each Save appends the new
// values under the next seq, and a partition's value is its row with the highest seq.
// One INSERT per batch from a view of the new values, prepared once (an UPDATE joining the
// table cost 0.5-1.2 ms a batch here; DuckDB 1.5 also plans a statement with parameters
// again at every execution). Every 1024 saves the superseded rows are deleted.
class PartitionValues {
 public:
  // Creates the table if it does not exist, and the view `<table>_new`.
  static Result<std::unique_ptr<PartitionValues>> Create(duck::Connection& conn, std::string table,
                                                         std::string column);
  ~PartitionValues();
  PartitionValues(const PartitionValues&) = delete;
  PartitionValues& operator=(const PartitionValues&) = delete;

  using Key = std::pair<std::string, int32_t>;
  // Every row.
  Result<std::map<Key, int64_t>> Load();
  // Sets these rows (updates, and inserts the ones not in the table). Part of the caller's
  // transaction.
  Status Save(const std::map<Key, int64_t>& values);
  // After a rollback: what Save inserted may be gone, and its statements may name it.
  void Forget();

 private:
  PartitionValues(duck::Connection& conn, std::string table, std::string column);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A row of sluice_window_sources: the batch that added rows, a partition, and the offset
// its messages in that batch started at.
struct SourceEntry {
  uint64_t batch = 0;
  std::string topic;
  int32_t partition = 0;
  int64_t first_offset = 0;
};

// What a batch (or a close) changed in the progress tables of pipeline.state.
struct StateProgress {
  std::map<PartitionValues::Key, int64_t> offsets;  // sluice_state: next offset
  std::map<PartitionValues::Key, int64_t>
      watermarks;                    // sluice_watermarks; ("", -1): the pipeline's
  std::vector<SourceEntry> sources;  // new sluice_window_sources rows
  uint64_t prune_sources_below = 0;  // delete the rows of older batches (0: none)
};

// The progress tables of pipeline.state on one connection: sluice_state(topic, partition,
// next_offset, seq), sluice_watermarks(topic, partition, newest, seq) (both
// PartitionValues) and sluice_window_sources(batch, topic, partition, first_offset).
// Created when missing. Owned by the thread of its connection.
class StateTables {
 public:
  static Result<std::unique_ptr<StateTables>> Open(duck::Connection& conn);
  ~StateTables();
  StateTables(const StateTables&) = delete;
  StateTables& operator=(const StateTables&) = delete;

  struct Loaded {
    std::map<PartitionValues::Key, int64_t> offsets;
    std::map<PartitionValues::Key, int64_t> watermarks;
    std::vector<SourceEntry> sources;  // by batch
  };
  Result<Loaded> Load();
  // Writes `p`; part of the caller's transaction.
  Status Save(const StateProgress& p);
  // After a rollback (see PartitionValues::Forget).
  void Forget();

 private:
  explicit StateTables(duck::Connection& conn) : conn_(conn) {}
  duck::Connection& conn_;
  std::unique_ptr<PartitionValues> offsets_;
  std::unique_ptr<PartitionValues> watermarks_;
};

// The mutations a close makes to the rows table at watermark `w` (kNever-like for all):
// rows of windows closed longer than `lateness` ago go, the other closed ones are marked
// emitted. Deterministic in the table's rows, so the state writer replays it on the file.
Status ApplyClose(duck::Connection& conn, const WindowConfig& config, int64_t w, int64_t lateness);

// What the window engine changed in its rows table since the last TakeChanges, for a
// write-behind copy of it (docs/design/0007, "Write-behind state"): the DDL it ran, the
// rows it appended (the chunks it inserted) and the closes it applied.
struct AppendedRows {
  // Declared first: destroyed after the chunks that may point into it.
  std::optional<duck::QueryResult> result;
  std::vector<duck::DataChunk> chunks;  // in the rows table's column order
  std::vector<std::string> names;       // their columns
  std::vector<duck::LogicalType> types;
  AppendedRows() = default;
  AppendedRows(AppendedRows&&) = default;
  AppendedRows& operator=(AppendedRows&&) = default;
  ~AppendedRows() { chunks.clear(); }
};
struct RowChanges {
  std::vector<std::string> ddl;
  std::vector<AppendedRows> appended;
  std::vector<std::pair<int64_t, int64_t>> closes;  // ApplyClose's (w, lateness), in order
  bool empty() const { return ddl.empty() && appended.empty() && closes.empty(); }
};

class WindowEngine {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  static constexpr int64_t kNoTime = INT64_MIN;

  // Creates (or reopens) the rows table and takes the watermarks and floors `loaded` from
  // the state (nullptr without pipeline.state). With `track_changes` the engine keeps what
  // it changes in its rows table for TakeChanges.
  static Result<std::unique_ptr<WindowEngine>> Create(duck::Connection& conn,
                                                      const WindowConfig& config,
                                                      std::string pipeline,
                                                      const StateTables::Loaded* loaded,
                                                      bool track_changes);
  ~WindowEngine();
  WindowEngine(const WindowEngine&) = delete;
  WindowEngine& operator=(const WindowEngine&) = delete;

  // The group gave or took a partition.
  void Assign(const std::string& topic, int32_t partition, SteadyTime now);
  void Revoke(const std::string& topic, int32_t partition);
  // Messages of a partition arrived from the source (read ahead, not yet processed): it is
  // not idle, even while its messages wait behind another partition's backlog.
  void Heard(std::string_view topic, int32_t partition, SteadyTime now);

  // Puts the rows of `result` (the handler's result) into the window state, against the
  // watermark as it stood before this batch. Rows whose every window closed more than
  // allowed_lateness ago, and rows without an event time, are left out and returned in
  // `dropped`. `result_generation` changes whenever the result's columns may have. Returns
  // the rows kept.
  Result<uint64_t> Add(std::string_view result, uint64_t result_generation,
                       std::vector<DroppedRow>* dropped);
  // Records where this batch's messages start per partition (for the commit floor); call
  // with the batch's first offsets when Add kept rows.
  void NoteSources(const std::map<std::pair<std::string, int32_t>, int64_t>& first_offsets);
  // Reads the newest event time per partition from `batch` (the decoded batch; `runs` say
  // which partition each row came from, in order) and advances the watermark.
  // `batch_generation` changes whenever the batch's columns may have.
  Status Observe(std::string_view batch, uint64_t batch_generation, std::span<const SourceRun> runs,
                 int64_t wall_us, SteadyTime now);
  // Advances the watermark for partitions gone idle (no batch needed).
  void Tick(SteadyTime now);

  // True when some window may be closed by the watermark and not yet emitted (or emitted
  // rows may be due to go). For sessions it is a lower bound: a close may find nothing.
  bool CloseDue() const;
  // Emits every closed window (every window with `all`, as at the end of `invoke`):
  // emit_sql over the view `closed` into a temp table, `emit(table, rows)` (the sink's
  // write and flush), then the rows go (or are marked emitted while lateness allows).
  // Run it in a transaction: on error nothing is marked and the caller rolls back.
  Status Close(bool all, const std::function<Status(std::string_view table, uint64_t rows)>& emit);

  // The watermarks and floors changed since the last call, for StateTables::Save (in the
  // batch's transaction, or by the state writer); they count as saved from here on (a
  // rolled-back transaction restores a Snapshot taken before).
  void TakeProgress(StateProgress* out);
  // With track_changes: what changed in the rows table since the last call (committed).
  RowChanges TakeChanges();
  // Changes whenever the engine ran DDL on its table. Statements that write other tables
  // and were prepared in the same transaction should be prepared again after it commits
  // (DuckDB 1.5 would plan them again at every execution).
  uint64_t ddl_generation() const;

  // The lowest offset an open window still needs on a partition; nullopt when none.
  std::optional<int64_t> Floor(const std::string& topic, int32_t partition) const;
  int64_t watermark_us() const;  // kNoTime before there is one

  // The in-memory state, to restore after a rolled-back transaction.
  struct Memory;
  std::shared_ptr<const Memory> Snapshot() const;  // shared: Memory is opaque
  void Restore(const Memory& m);

 private:
  WindowEngine(duck::Connection& conn, const WindowConfig& config, std::string pipeline);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::pipeline
