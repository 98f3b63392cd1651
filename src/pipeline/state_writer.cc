#include "pipeline/state_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include "base/logging.h"
#include "duck/chunk_view.h"
#include "pipeline/loggers.h"

namespace sluice::pipeline {
namespace {

constexpr std::string_view kRowsTable = "sluice_window_rows";
constexpr std::string_view kRowsView = "sluice_window_rows_new";
// At most this many deltas in one transaction of the file, and at most one transaction per
// kLinger while the pipeline runs (group commit: each costs a WAL write, an fsync and a
// few statements, ~1 ms of CPU here, on the pipeline's second core).
constexpr size_t kMaxGroup = 64;
constexpr auto kLinger = std::chrono::milliseconds(20);

}  // namespace

StateWriter::StateWriter(std::unique_ptr<duck::Connection> conn,
                         std::unique_ptr<StateTables> tables, WindowConfig window,
                         std::string pipeline, size_t max_queued)
    : conn_(std::move(conn)),
      tables_(std::move(tables)),
      window_(std::move(window)),
      pipeline_(std::move(pipeline)),
      max_queued_(std::max<size_t>(1, max_queued)) {}

std::unique_ptr<StateWriter> StateWriter::Start(std::unique_ptr<duck::Connection> conn,
                                                std::unique_ptr<StateTables> tables,
                                                WindowConfig window, std::string pipeline,
                                                size_t max_queued) {
  std::unique_ptr<StateWriter> w(new StateWriter(
      std::move(conn), std::move(tables), std::move(window), std::move(pipeline), max_queued));
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

StateWriter::~StateWriter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The writer's statements and views go before its connection.
  insert_.reset();
  view_.reset();
  tables_.reset();
  conn_.reset();
}

Status StateWriter::Submit(StateDelta delta) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [&] { return !error_.ok() || queue_.size() < max_queued_; });
  if (!error_.ok()) return error_;
  queue_.push_back(std::move(delta));
  changed_.notify_all();
  return Status::OK();
}

Result<StateWriter::Offsets> StateWriter::TakeWritten() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return error_;
  return std::exchange(written_, Offsets{});
}

Status StateWriter::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  ++draining_;
  changed_.notify_all();
  changed_.wait(lock, [&] { return !error_.ok() || queue_.empty(); });
  --draining_;
  return error_;
}

void StateWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto last_commit = std::chrono::steady_clock::now() - kLinger;
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    // At most one commit per kLinger while the pipeline runs: what queues meanwhile shares
    // it. Not when stopping or when the pipeline waits for the file (Drain).
    changed_.wait_until(lock, last_commit + kLinger,
                        [&] { return stopping_ || draining_ > 0 || queue_.size() >= kMaxGroup; });
    // Everything queued goes in one transaction (group commit): a delta's pointer stays
    // valid while the pipeline's thread pushes more behind it.
    std::vector<StateDelta*> group;
    for (size_t i = 0; i < queue_.size() && i < kMaxGroup; ++i) group.push_back(&queue_[i]);
    lock.unlock();
    Status st = Apply(group);
    lock.lock();
    if (!st.ok()) {
      error_ =
          InternalError("pipeline {}: writing the state file failed: {}", pipeline_, st.message());
      SLUICE_LOG(kLog, kError, "{}", error_.message());
      queue_.clear();
      changed_.notify_all();
      return;
    }
    for (StateDelta* d : group) {
      for (const auto& [tp, offset] : d->kafka_commit) written_[tp] = offset;
    }
    queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(group.size()));
    last_commit = std::chrono::steady_clock::now();
    changed_.notify_all();
  }
}

Status StateWriter::Apply(const std::vector<StateDelta*>& group) {
  RETURN_IF_ERROR(conn_->Execute("BEGIN TRANSACTION"));
  StateProgress progress;  // the group's, merged: later deltas win
  bool checkpoint = false;
  bool ddl = false;
  auto write = [&]() -> Status {
    // The deltas in order. Rows are inserted a run of deltas at a time: their chunks
    // through one view and one prepared INSERT (an Appender plans an INSERT per flush).
    std::vector<const duck::DataChunk*> pending;
    const AppendedRows* shape = nullptr;  // the pending chunks' columns
    auto flush = [&]() -> Status {
      if (pending.empty()) return Status::OK();
      if (!view_ || view_names_ != shape->names) {
        std::vector<duck::LogicalType> types;
        for (const duck::LogicalType& t : shape->types) types.push_back(t.Copy());
        if (!view_) {
          ASSIGN_OR_RETURN(
              view_, duck::ChunkView::Create(*conn_, kRowsView, shape->names, std::move(types)));
        } else {
          RETURN_IF_ERROR(view_->SetColumns(shape->names, std::move(types)));
        }
        view_names_ = shape->names;
        insert_.reset();
      }
      if (!insert_) {
        ASSIGN_OR_RETURN(insert_, duck::PreparedStatement::Prepare(
                                      *conn_, fmt::format("INSERT INTO {} SELECT * FROM {}",
                                                          kRowsTable, kRowsView)));
      }
      view_->SetChunks(pending);
      Status st = insert_->Execute().status();
      view_->SetChunks({});
      pending.clear();
      return st;
    };
    for (StateDelta* d : group) {
      if (!d->rows.ddl.empty()) {
        RETURN_IF_ERROR(flush());
        insert_.reset();  // the table changes
      }
      for (const std::string& sql : d->rows.ddl) RETURN_IF_ERROR(conn_->Execute(sql));
      ddl = ddl || !d->rows.ddl.empty();
      // The rows as the pipeline inserted them into its own table, whose columns the
      // file's table has in the same order (the same DDL ran on both).
      for (const AppendedRows& a : d->rows.appended) {
        if (shape != nullptr && shape->names != a.names) RETURN_IF_ERROR(flush());
        shape = &a;
        for (const duck::DataChunk& chunk : a.chunks) pending.push_back(&chunk);
      }
      if (!d->rows.closes.empty()) RETURN_IF_ERROR(flush());
      for (const auto& [w, lateness] : d->rows.closes)
        RETURN_IF_ERROR(ApplyClose(*conn_, window_, w, lateness));
      for (const auto& [tp, v] : d->progress.offsets) progress.offsets[tp] = v;
      for (const auto& [tp, v] : d->progress.watermarks) progress.watermarks[tp] = v;
      progress.sources.insert(progress.sources.end(), d->progress.sources.begin(),
                              d->progress.sources.end());
      progress.prune_sources_below =
          std::max(progress.prune_sources_below, d->progress.prune_sources_below);
      checkpoint = checkpoint || d->checkpoint;
    }
    RETURN_IF_ERROR(flush());
    return tables_->Save(progress);
  };
  Status st = write();
  if (st.ok()) st = conn_->Execute("COMMIT");
  if (!st.ok()) {
    (void)conn_->Execute("ROLLBACK");
    tables_->Forget();
    insert_.reset();
    view_.reset();  // may have been made inside the transaction
    return st;
  }
  if (ddl) {
    // Statements prepared in a transaction that changed the catalog are planned again at
    // every execution once it committed (DuckDB 1.5): prepare them again.
    insert_.reset();
    tables_->Forget();
  }
  // The appended chunks point into their results: free both now, on this thread.
  for (StateDelta* d : group) d->rows = RowChanges{};
  if (checkpoint) {
    // Without it the rows closes delete stay in memory as DuckDB's uncheckpointed rows
    // until its 16 MB WAL threshold.
    if (Status cp = conn_->Execute("CHECKPOINT"); !cp.ok()) {
      SLUICE_LOG(kLog, kWarn, "pipeline {}: checkpoint of the state file: {}", pipeline_,
                 cp.message());
    }
  }
  return Status::OK();
}

}  // namespace sluice::pipeline
