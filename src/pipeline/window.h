// WindowEngine: the declarative windows of `pipeline.window` (docs/design/0007 #3-#8):
// tumbling, hopping and session windows over event time, kept in one unindexed table of
// the pipeline's database, closed by a per-partition watermark and emitted through the
// user's emit_sql.
//
// Each batch, on the pipeline's thread, inside the batch's transaction:
//   engine->Add("sluice_handler_result", seq, &late);   // result rows into the state
//   engine->Observe("batch", runs, wall_us, now);        // newest event time per partition
//   engine->SaveState();                                 // with pipeline.state
// then, in a transaction of its own, while windows are due:
//   engine->Close(false, now, emit);                     // emit(table) writes the sink
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
// State tables (in the pipeline's database; on file with pipeline.state):
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
#include "duck/database.h"
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

class WindowEngine {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  static constexpr int64_t kNoTime = INT64_MIN;

  // Creates (or, with a durable database, reopens) the state tables and reads back the
  // watermarks and floors stored there.
  static Result<std::unique_ptr<WindowEngine>> Create(duck::Connection& conn, const WindowConfig& config,
                                                      std::string pipeline);
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
  Result<uint64_t> Add(std::string_view result, uint64_t result_generation, std::vector<DroppedRow>* dropped);
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

  // Writes the watermarks and the new floors to the state tables (part of the batch's
  // transaction).
  Status SaveState();

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
