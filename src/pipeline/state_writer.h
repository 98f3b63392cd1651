// StateWriter: the write-behind copy of a windowed pipeline's durable state
// (docs/design/0007, "Write-behind state").
//
// With pipeline.state and a declarative window, the window's rows live in the pipeline's
// in-memory database and the state file holds a copy of them plus the progress tables
// (StateTables). After each batch (or close) commits in memory, the runner submits what it
// changed, a StateDelta; the writer's thread applies the deltas to the file in order while
// the pipeline goes on with the next batch. The file's COMMIT (its WAL write and fsync,
// 1-3 ms on this machine's disk) is then off the pipeline's path. A batch's rows and its
// offsets are always in one transaction; when deltas queue up behind a COMMIT, the next
// transaction takes all of them (group commit; at most one commit per 20 ms while the
// pipeline runs), so the file is always at a batch boundary.
// A delta's Kafka offsets are handed back once the file holds it: the Kafka commit still
// follows the state commit.
//
//   auto writer = StateWriter::Start(std::move(conn), std::move(tables), window, name, 4);
//   RETURN_IF_ERROR(writer->Submit(std::move(delta)));   // waits while 4 are queued
//   ASSIGN_OR_RETURN(auto commit, writer->TakeWritten()); // offsets now safe to commit
//   RETURN_IF_ERROR(writer->Drain());                     // before a sync commit, at stop
//
// A failed delta stops the writer: every later call returns its error and the pipeline
// stops. The file is consistent (each delta is one transaction) and behind the memory by
// the deltas not written; a restart loads it and seeks to its offsets.
//
// Lifecycle: Start gives the connection (whose default catalog is the state file) and the
// tables to the writer's thread. Destruction writes what is queued, then joins.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "duck/chunk_view.h"
#include "duck/database.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/window.h"

namespace sluice::pipeline {

struct StateDelta {
  RowChanges rows;
  StateProgress progress;
  // Offsets to commit to Kafka once the file holds this delta.
  std::map<std::pair<std::string, int32_t>, int64_t> kafka_commit;
  bool checkpoint = false;  // CHECKPOINT the file after this delta
};

class StateWriter {
 public:
  using Offsets = std::map<std::pair<std::string, int32_t>, int64_t>;

  static std::unique_ptr<StateWriter> Start(std::unique_ptr<duck::Connection> conn,
                                            std::unique_ptr<StateTables> tables,
                                            WindowConfig window, std::string pipeline,
                                            size_t max_queued);
  ~StateWriter();
  StateWriter(const StateWriter&) = delete;
  StateWriter& operator=(const StateWriter&) = delete;

  // Queues `delta`; waits while max_queued deltas are queued. The writer's error once it
  // failed.
  Status Submit(StateDelta delta);
  // The Kafka offsets of the deltas written since the last call (later deltas win).
  Result<Offsets> TakeWritten();
  // Waits until every submitted delta is written.
  Status Drain();

 private:
  StateWriter(std::unique_ptr<duck::Connection> conn, std::unique_ptr<StateTables> tables,
              WindowConfig window, std::string pipeline, size_t max_queued);
  void Loop();
  Status Apply(const std::vector<StateDelta*>& group);

  // The writer thread's own.
  std::unique_ptr<duck::Connection> conn_;
  std::unique_ptr<StateTables> tables_;
  WindowConfig window_;
  std::string pipeline_;
  std::unique_ptr<duck::ChunkView> view_;  // the rows of the deltas being written
  std::vector<std::string> view_names_;
  std::unique_ptr<duck::PreparedStatement> insert_;  // from view_ into the rows table

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::deque<StateDelta> queue_;  // guarded by mu_; the front is being written
  Offsets written_;               // guarded by mu_
  Status error_;                  // guarded by mu_
  bool stopping_ = false;         // guarded by mu_
  int draining_ = 0;              // guarded by mu_: Drain calls waiting
  std::thread thread_;
};

}  // namespace sluice::pipeline
