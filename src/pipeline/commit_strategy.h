// CommitStrategy: when a pipeline's source offsets may be committed, and where they are
// kept besides the group — the one object that keeps the promise "offsets never ahead of
// what is durable" (DESIGN.md; docs/design/0006 #4, 0007 #8 and #10). The runner picks
// one at Create and calls it at fixed points of a batch, of a window close, between
// batches and on assignment events; it never asks which one it has.
//
//   kind              offsets are committed               a restart resumes at
//   kAfterSink        to the group after the sink flushed  the group's commit
//   kStateTransaction saved in the batch's DuckDB          the state file's offsets
//                     transaction with the window state,
//                     then to the group
//   kWriteBehind      to the group once the state writer   the state file's offsets
//                     has the batch on file
//   kSinkCommit       to the group once the sink's own     the sink's offsets
//                     commit made them durable (a
//                     deferring sink: Iceberg snapshots);
//                     or by the sink's own commit (kafka   the group's commit
//                     with exactly_once: the rows and the
//                     offsets in one Kafka transaction)
//
// With a window the group commit never passes what an open window still needs (its
// floor): without the state file a restart reads the open windows' messages again.
//
// The runner's calls, in order:
//   Assigning(partitions)            partitions about to be assigned: where they start
//   per batch (after the sink and the dead-letter sink flushed):
//     SaveBatch(offsets)             in the batch's open transaction (SavesInTransaction)
//     BatchCommitted(offsets)        that transaction committed
//     CommitBatch(offsets, wrote, mode)
//   per window close: SaveClose() in its transaction, CloseCommitted(checkpoint) after
//   Flush(kAsync) between batches; Flush(kSync) before partitions go and at stop
//   Revoked(partitions) after the batch in hand was finished; Lost(partitions)
//
// Lifecycle: made by the runner's Create, used on the runner's thread; the source is set
// by Run (none for Invoke: nothing is committed then).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "kafka/client/consumer.h"
#include "pipeline/source.h"
#include "pipeline/state_writer.h"
#include "pipeline/window.h"
#include "sinks/sink.h"

namespace sluice::pipeline {

// What a strategy counts (the runner's metrics; every pointer set).
struct CommitCounters {
  Counter* commits = nullptr;                     // group commits sent
  Counter* errors = nullptr;                      // errors of phase "commit"
  std::atomic<uint64_t>* commits_stat = nullptr;  // RunnerStats::commits
  Histogram* sink_commit_seconds = nullptr;       // a deferring sink's commits
  Gauge* sink_commit_max_seconds = nullptr;
  // The gauge of a partition's offset last committed to the group (optional).
  std::function<Gauge*(const std::string& topic, int32_t partition)> committed_offset;
};

class CommitStrategy {
 public:
  enum class Kind { kAfterSink, kStateTransaction, kWriteBehind, kSinkCommit };

  // kAfterSink: `window` may be null.
  static std::unique_ptr<CommitStrategy> AfterSink(std::string pipeline, CommitCounters counters,
                                                   WindowEngine* window);
  // kStateTransaction: `state` is on the pipeline's connection; `loaded` its offsets.
  static std::unique_ptr<CommitStrategy> StateTransaction(std::string pipeline,
                                                          CommitCounters counters,
                                                          WindowEngine* window,
                                                          std::unique_ptr<StateTables> state,
                                                          SourceOffsets loaded);
  // kWriteBehind: `window` is set.
  static std::unique_ptr<CommitStrategy> WriteBehind(std::string pipeline, CommitCounters counters,
                                                     WindowEngine* window,
                                                     std::unique_ptr<StateWriter> writer,
                                                     SourceOffsets loaded);
  // kSinkCommit: `sink` defers (it must outlive the strategy). With pipeline.state (no
  // window) `state` also takes each batch's offsets in its transaction, as
  // kStateTransaction does, though the sink's offsets are where assigned partitions start.
  // A sink that CommitsSourceOffsets (exactly-once into Kafka) gets the source's group
  // metadata through SetGroupMetadata, commits the offsets itself, and has whatever it
  // holds open discarded (aborted) on revocation and loss; nothing goes to the group
  // from here.
  static std::unique_ptr<CommitStrategy> SinkCommit(std::string pipeline, CommitCounters counters,
                                                    sinks::Sink* sink,
                                                    std::unique_ptr<StateTables> state,
                                                    SourceOffsets loaded);

  virtual ~CommitStrategy() = default;
  virtual Kind kind() const = 0;
  void set_source(Source* source) { source_ = source; }

  // Partitions about to be assigned: each starts at the offset the strategy holds for it
  // (TopicPartition::offset), or, when it holds none, at the group's commit.
  virtual void Assigning(std::vector<kafka::client::TopicPartition>& partitions);
  // The batch in hand was finished and committed; the partitions go.
  virtual void Revoked(const std::vector<kafka::client::TopicPartition>& partitions);
  // The partitions were lost: nothing of them may be committed by this member.
  virtual Status Lost(const std::vector<kafka::client::TopicPartition>& partitions);

  // True when a batch's offsets go into its DuckDB transaction (SaveBatch).
  virtual bool SavesInTransaction() const { return false; }
  // In the batch's open transaction: its offsets (and the window's progress).
  virtual Status SaveBatch(const SourceOffsets& /*offsets*/) { return Status::OK(); }
  // The batch's transaction was rolled back: statements prepared in it are prepared again.
  virtual void RolledBack() {}
  // The batch's transaction committed (only called when SavesInTransaction).
  virtual void BatchCommitted(const SourceOffsets& /*offsets*/) {}
  // The batch is done and durable where the strategy needs it: commit what may be.
  // `wrote`: the sink took the batch's rows (else its messages were skipped or
  // dead-lettered by on_error). Returns an error only when the pipeline must stop.
  virtual Status CommitBatch(const SourceOffsets& offsets, bool wrote, CommitMode mode) = 0;

  // A window close: in its transaction (before COMMIT), then after it committed.
  virtual Status SaveClose() { return Status::OK(); }
  virtual Status CloseCommitted(bool /*checkpoint*/) { return Status::OK(); }

  // Commits what became durable since the last call (the state file's, a deferring
  // sink's when due); kSync waits for all of it and commits it now (revocation, stop).
  virtual Status Flush(CommitMode /*mode*/) { return Status::OK(); }

  // The next offset per partition the strategy holds (state file, sink, or what it saved).
  const SourceOffsets& stored() const { return stored_; }

 protected:
  CommitStrategy(std::string pipeline, CommitCounters counters)
      : pipeline_(std::move(pipeline)), counters_(counters) {}
  // Commits `commit` to the source's group (a failure is counted and logged, not
  // returned: the next commit covers it). An asynchronous commit that moves no offset is
  // not sent (a window's floor keeps it still for many batches: a commit per batch cost
  // the broker 11 s of CPU per 10M events at batch 500).
  void CommitToSource(const std::vector<kafka::client::TopicPartition>& commit, CommitMode mode);
  // `offsets` held back by `window`'s floor (null: as they are).
  static std::vector<kafka::client::TopicPartition> WithFloor(const SourceOffsets& offsets,
                                                              const WindowEngine* window);

  const std::string pipeline_;
  CommitCounters counters_;
  Source* source_ = nullptr;
  SourceOffsets stored_;
  SourceOffsets sent_;  // offsets last sent to the group
};

}  // namespace sluice::pipeline
