// The four commit strategies (commit_strategy.h).
#include "pipeline/commit_strategy.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "base/crash_point.h"
#include "base/logging.h"
#include "pipeline/loggers.h"

namespace sluice::pipeline {
namespace {

using kafka::client::TopicPartition;
using Clock = std::chrono::steady_clock;

}  // namespace

void CommitStrategy::Assigning(std::vector<TopicPartition>& partitions) {
  for (TopicPartition& tp : partitions) {
    // With pipeline.state the state's offsets, not the group's: the state holds exactly
    // what was processed up to them (docs/design/0007 #8).
    if (auto it = stored_.find({tp.topic, tp.partition}); it != stored_.end())
      tp.offset = it->second;
  }
}

void CommitStrategy::Revoked(const std::vector<TopicPartition>& partitions) {
  for (const TopicPartition& tp : partitions)
    sent_.erase({tp.topic, tp.partition});  // its next owner commits it
}

Status CommitStrategy::Lost(const std::vector<TopicPartition>& /*partitions*/) {
  sent_.clear();
  return Status::OK();
}

void CommitStrategy::CommitToSource(const std::vector<TopicPartition>& commit, CommitMode mode) {
  const bool sync = mode == CommitMode::kSync;
  std::vector<TopicPartition> moved;
  for (const TopicPartition& tp : commit) {
    auto it = sent_.find({tp.topic, tp.partition});
    if (sync || it == sent_.end() || it->second != tp.offset) moved.push_back(tp);
  }
  if (moved.empty()) return;
  Status st = source_->Commit(moved, mode);
  if (!st.ok()) {
    // Not fatal: the next commit covers these offsets too; a restart re-reads them (or,
    // with pipeline.state, seeks to the state's).
    counters_.errors->Inc();
    SLUICE_LOG(kLog, kWarn, "pipeline {}: commit failed (the next commit covers it): {}", pipeline_,
               st.message());
  } else {
    for (const TopicPartition& tp : moved) {
      sent_[{tp.topic, tp.partition}] = tp.offset;
      if (counters_.committed_offset) {
        counters_.committed_offset(tp.topic, tp.partition)->Set(static_cast<double>(tp.offset));
      }
    }
    counters_.commits->Inc();
    ++*counters_.commits_stat;
  }
}

std::vector<TopicPartition> CommitStrategy::WithFloor(const SourceOffsets& offsets,
                                                      const WindowEngine* window) {
  std::vector<TopicPartition> commit;
  for (const auto& [tp, next] : offsets) {
    // Not past what an open window still needs: without the state file, a restart reads
    // the open windows' messages again.
    int64_t at = next;
    if (window != nullptr) at = std::min(at, window->Floor(tp.first, tp.second).value_or(next));
    commit.push_back({tp.first, tp.second, at});
  }
  return commit;
}

namespace {

// kAfterSink: the batch's offsets (held back by an open window's floor) to the group once
// the sink flushed. Asynchronous while running (the sink already holds the batch; the
// next commit covers a failed one): a synchronous commit per batch would wait a broker
// round trip and its fsync every batch. Synchronous when partitions are about to go or at
// the end.
class AfterSinkStrategy final : public CommitStrategy {
 public:
  AfterSinkStrategy(std::string pipeline, CommitCounters counters, WindowEngine* window)
      : CommitStrategy(std::move(pipeline), counters), window_(window) {}
  Kind kind() const override { return Kind::kAfterSink; }
  Status CommitBatch(const SourceOffsets& offsets, bool /*wrote*/, CommitMode mode) override {
    if (source_ != nullptr) CommitToSource(WithFloor(offsets, window_), mode);
    return Status::OK();
  }

 private:
  WindowEngine* window_;
};

// The progress tables of pipeline.state written in the batch's transaction on the
// pipeline's connection (kStateTransaction, and kSinkCommit with state).
class TransactionalState {
 public:
  TransactionalState(std::unique_ptr<StateTables> tables, WindowEngine* window)
      : tables_(std::move(tables)), window_(window) {}
  // The offsets go with the batch's state (or alone, when the batch failed and its
  // messages were skipped or dead-lettered).
  Status Save(const SourceOffsets& offsets) {
    StateProgress progress;
    progress.offsets.insert(offsets.begin(), offsets.end());
    if (window_ != nullptr) window_->TakeProgress(&progress);
    return tables_->Save(progress);
  }
  Status SaveClose() {
    StateProgress progress;
    window_->TakeProgress(&progress);
    return tables_->Save(progress);
  }
  void RolledBack() { tables_->Forget(); }
  void Committed(const SourceOffsets& offsets, SourceOffsets* stored) {
    for (const auto& [tp, next] : offsets) (*stored)[tp] = next;
    if (window_ != nullptr && window_->ddl_generation() != ddl_) {
      // Prepared in a transaction that changed the catalog: DuckDB 1.5 would plan them
      // again at every execution.
      ddl_ = window_->ddl_generation();
      tables_->Forget();
    }
    CrashPoint("state-committed");
  }

 private:
  std::unique_ptr<StateTables> tables_;
  WindowEngine* window_;
  uint64_t ddl_ = 0;  // the window's ddl_generation when the tables were last prepared
};

// kStateTransaction: the offsets in the batch's transaction with the window state (and
// what the sqlflow-form tables and a sqlcommand sink wrote there), then to the group as
// kAfterSink does.
class StateTransactionStrategy final : public CommitStrategy {
 public:
  StateTransactionStrategy(std::string pipeline, CommitCounters counters, WindowEngine* window,
                           std::unique_ptr<StateTables> state, SourceOffsets loaded)
      : CommitStrategy(std::move(pipeline), counters),
        window_(window),
        state_(std::move(state), window) {
    stored_ = std::move(loaded);
  }
  Kind kind() const override { return Kind::kStateTransaction; }
  bool SavesInTransaction() const override { return true; }
  Status SaveBatch(const SourceOffsets& offsets) override { return state_.Save(offsets); }
  void RolledBack() override { state_.RolledBack(); }
  void BatchCommitted(const SourceOffsets& offsets) override {
    state_.Committed(offsets, &stored_);
  }
  Status CommitBatch(const SourceOffsets& offsets, bool /*wrote*/, CommitMode mode) override {
    if (source_ != nullptr) CommitToSource(WithFloor(offsets, window_), mode);
    return Status::OK();
  }
  Status SaveClose() override { return state_.SaveClose(); }

 private:
  WindowEngine* window_;
  TransactionalState state_;
};

// kWriteBehind: what a batch or a close changed goes to the state writer's thread; the
// group commit follows once the writer has it on file.
class WriteBehindStrategy final : public CommitStrategy {
 public:
  WriteBehindStrategy(std::string pipeline, CommitCounters counters, WindowEngine* window,
                      std::unique_ptr<StateWriter> writer, SourceOffsets loaded)
      : CommitStrategy(std::move(pipeline), counters), window_(window), writer_(std::move(writer)) {
    stored_ = std::move(loaded);
  }
  Kind kind() const override { return Kind::kWriteBehind; }
  Status CommitBatch(const SourceOffsets& offsets, bool /*wrote*/, CommitMode mode) override {
    StateDelta delta;
    delta.rows = window_->TakeChanges();
    delta.progress.offsets.insert(offsets.begin(), offsets.end());
    window_->TakeProgress(&delta.progress);
    for (const auto& [tp, next] : offsets) {
      delta.kafka_commit[tp] = std::min(next, window_->Floor(tp.first, tp.second).value_or(next));
    }
    RETURN_IF_ERROR(writer_->Submit(std::move(delta)));
    for (const auto& [tp, next] : offsets) stored_[tp] = next;
    return CommitWritten(mode);
  }
  Status CloseCommitted(bool checkpoint) override {
    StateDelta delta;
    delta.rows = window_->TakeChanges();
    window_->TakeProgress(&delta.progress);
    delta.checkpoint = checkpoint;
    return writer_->Submit(std::move(delta));
  }
  Status Flush(CommitMode mode) override { return CommitWritten(mode); }

 private:
  // Commits to the group the offsets of what the writer has put on file (after waiting
  // for all of it with kSync).
  Status CommitWritten(CommitMode mode) {
    if (mode == CommitMode::kSync) RETURN_IF_ERROR(writer_->Drain());
    ASSIGN_OR_RETURN(StateWriter::Offsets written, writer_->TakeWritten());
    if (written.empty() || source_ == nullptr) return Status::OK();
    CrashPoint("state-committed");
    std::vector<TopicPartition> commit;
    for (const auto& [tp, at] : written) commit.push_back({tp.first, tp.second, at});
    CommitToSource(commit, mode);
    return Status::OK();
  }

  WindowEngine* window_;
  std::unique_ptr<StateWriter> writer_;  // destroyed first: it writes what is queued
};

// kSinkCommit: a deferring sink (Sink::Defers) stores the offsets in its own commits;
// what it reports durable goes to the group, and assigned partitions start where the
// sink's data ends (another member may have written them since).
class SinkCommitStrategy final : public CommitStrategy {
 public:
  SinkCommitStrategy(std::string pipeline, CommitCounters counters, sinks::Sink* sink,
                     std::unique_ptr<StateTables> state, SourceOffsets loaded)
      : CommitStrategy(std::move(pipeline), counters), sink_(sink) {
    if (state) state_.emplace(std::move(state), nullptr);
    stored_ = std::move(loaded);
    // The sink says where its data ends: the pipeline resumes there, not at the group's
    // commit, which may lag behind it (a crash between the two commits) or run ahead
    // (never: the group commit follows the sink's).
    if (std::optional<sinks::SourceOffsets> held = sink_->HeldOffsets()) {
      for (const auto& [tp, next] : *held) stored_[tp] = next;
    }
    // Exactly-once into Kafka: the sink's transaction carries the offsets, with the
    // member's group metadata as it is at each commit (KIP-447 fences a member whose
    // generation is gone).
    sink_->SetGroupMetadata([this]() -> Result<kafka::client::GroupMetadata> {
      if (source_ == nullptr) return FailedPreconditionError("no source: nothing to commit");
      return source_->GroupMetadata();
    });
  }
  Kind kind() const override { return Kind::kSinkCommit; }

  void Assigning(std::vector<TopicPartition>& partitions) override {
    // The table's offsets as they are now: another member may have written these
    // partitions since we last held them.
    std::optional<sinks::SourceOffsets> held = sink_->HeldOffsets();
    for (const TopicPartition& tp : partitions) {
      stored_.erase({tp.topic, tp.partition});
      if (held) {
        if (auto it = held->find({tp.topic, tp.partition}); it != held->end())
          stored_[it->first] = it->second;
      }
    }
    CommitStrategy::Assigning(partitions);
  }
  void Revoked(const std::vector<TopicPartition>& partitions) override {
    CommitStrategy::Revoked(partitions);
    for (const TopicPartition& tp : partitions) stored_.erase({tp.topic, tp.partition});
    if (sink_->CommitsSourceOffsets()) {
      // The batch in hand was committed before this; a transaction still open holds
      // nothing that may be committed once the partitions are another member's.
      if (Status st = sink_->Discard(); !st.ok()) {
        counters_.errors->Inc();
        SLUICE_LOG(kLog, kWarn, "pipeline {}: on revocation: {}", pipeline_, st.message());
      }
    }
  }
  Status Lost(const std::vector<TopicPartition>& partitions) override {
    Status st = CommitStrategy::Lost(partitions);
    // What the sink staged of them must not be committed by us now.
    if (Status discarded = sink_->Discard(); !discarded.ok() && st.ok()) st = discarded;
    for (const TopicPartition& tp : partitions) stored_.erase({tp.topic, tp.partition});
    return st;
  }

  bool SavesInTransaction() const override { return state_.has_value(); }
  Status SaveBatch(const SourceOffsets& offsets) override { return state_->Save(offsets); }
  void RolledBack() override {
    if (state_) state_->RolledBack();
  }
  void BatchCommitted(const SourceOffsets& offsets) override {
    state_->Committed(offsets, &stored_);
  }

  Status CommitBatch(const SourceOffsets& offsets, bool wrote, CommitMode mode) override {
    // A batch that wrote no rows: the next sink commit covers its offsets too.
    if (!wrote) sink_->Skip(offsets);
    return CommitSink(mode);
  }
  Status Flush(CommitMode mode) override { return CommitSink(mode); }

 private:
  // Commits the sink when due (or now, kSync) and to the group what it made durable.
  Status CommitSink(CommitMode mode) {
    auto started = Clock::now();
    Result<sinks::SourceOffsets> durable = sink_->Commit(mode == CommitMode::kSync);
    if (!durable.ok()) {
      // The sink's code kept: FailedPrecondition is a fenced producer's (exactly-once).
      return Status(durable.status().code(),
                    fmt::format("pipeline {}: sink {} could not commit: {}", pipeline_,
                                sink_->Describe(), durable.status().message()));
    }
    if (durable->empty()) return Status::OK();
    double took = std::chrono::duration<double>(Clock::now() - started).count();
    counters_.sink_commit_seconds->Observe(took);
    commit_max_ = std::max(commit_max_, took);
    counters_.sink_commit_max_seconds->Set(commit_max_);
    CrashPoint("sink-committed");
    for (const auto& [tp, next] : *durable) stored_[tp] = next;
    if (source_ == nullptr) return Status::OK();
    if (sink_->CommitsSourceOffsets()) {
      // Committed to the group by the sink's transaction: nothing to send.
      counters_.commits->Inc();
      ++*counters_.commits_stat;
      return Status::OK();
    }
    std::vector<TopicPartition> commit;
    for (const auto& [tp, next] : *durable) commit.push_back({tp.first, tp.second, next});
    CommitToSource(commit, mode);
    return Status::OK();
  }

  sinks::Sink* sink_;
  std::optional<TransactionalState> state_;  // pipeline.state without a window
  double commit_max_ = 0;
};

}  // namespace

std::unique_ptr<CommitStrategy> CommitStrategy::AfterSink(std::string pipeline,
                                                          CommitCounters counters,
                                                          WindowEngine* window) {
  return std::make_unique<AfterSinkStrategy>(std::move(pipeline), counters, window);
}

std::unique_ptr<CommitStrategy> CommitStrategy::StateTransaction(std::string pipeline,
                                                                 CommitCounters counters,
                                                                 WindowEngine* window,
                                                                 std::unique_ptr<StateTables> state,
                                                                 SourceOffsets loaded) {
  return std::make_unique<StateTransactionStrategy>(std::move(pipeline), counters, window,
                                                    std::move(state), std::move(loaded));
}

std::unique_ptr<CommitStrategy> CommitStrategy::WriteBehind(std::string pipeline,
                                                            CommitCounters counters,
                                                            WindowEngine* window,
                                                            std::unique_ptr<StateWriter> writer,
                                                            SourceOffsets loaded) {
  return std::make_unique<WriteBehindStrategy>(std::move(pipeline), counters, window,
                                               std::move(writer), std::move(loaded));
}

std::unique_ptr<CommitStrategy> CommitStrategy::SinkCommit(std::string pipeline,
                                                           CommitCounters counters,
                                                           sinks::Sink* sink,
                                                           std::unique_ptr<StateTables> state,
                                                           SourceOffsets loaded) {
  return std::make_unique<SinkCommitStrategy>(std::move(pipeline), counters, sink, std::move(state),
                                              std::move(loaded));
}

}  // namespace sluice::pipeline
