#include "pipeline/state_writer.h"

#include <fmt/format.h>

#include "base/logging.h"
#include "duck/appender.h"

namespace sluice::pipeline {
namespace {

const Logger kLog("pipeline");

constexpr std::string_view kRowsTable = "sluice_window_rows";

}  // namespace

StateWriter::StateWriter(std::unique_ptr<duck::Connection> conn, std::unique_ptr<StateTables> tables,
                         WindowConfig window, std::string pipeline, size_t max_queued)
    : conn_(std::move(conn)),
      tables_(std::move(tables)),
      window_(std::move(window)),
      pipeline_(std::move(pipeline)),
      max_queued_(std::max<size_t>(1, max_queued)) {}

std::unique_ptr<StateWriter> StateWriter::Start(std::unique_ptr<duck::Connection> conn,
                                                std::unique_ptr<StateTables> tables, WindowConfig window,
                                                std::string pipeline, size_t max_queued) {
  std::unique_ptr<StateWriter> w(
      new StateWriter(std::move(conn), std::move(tables), std::move(window), std::move(pipeline), max_queued));
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
  changed_.wait(lock, [&] { return !error_.ok() || queue_.empty(); });
  return error_;
}

size_t StateWriter::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void StateWriter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    StateDelta& delta = queue_.front();
    lock.unlock();
    Status st = Apply(delta);
    lock.lock();
    if (!st.ok()) {
      error_ = InternalError("pipeline {}: writing the state file failed: {}", pipeline_, st.message());
      SLUICE_LOG(kLog, kError, "{}", error_.message());
      queue_.clear();
      changed_.notify_all();
      return;
    }
    for (const auto& [tp, offset] : delta.kafka_commit) written_[tp] = offset;
    queue_.pop_front();
    changed_.notify_all();
  }
}

Status StateWriter::Apply(StateDelta& delta) {
  RETURN_IF_ERROR(conn_->Execute("BEGIN TRANSACTION"));
  auto write = [&]() -> Status {
    for (const std::string& ddl : delta.rows.ddl) RETURN_IF_ERROR(conn_->Execute(ddl));
    if (!delta.rows.appended.empty()) {
      // The rows as the pipeline appended them to its own table, whose columns the file's
      // table has in the same order (the same DDL ran on both).
      ASSIGN_OR_RETURN(duck::Appender app, duck::Appender::Open(*conn_, kRowsTable));
      for (const AppendedRows& a : delta.rows.appended) {
        for (const duck::DataChunk& chunk : a.chunks) RETURN_IF_ERROR(app.Append(chunk));
      }
      RETURN_IF_ERROR(app.Flush());
    }
    for (const auto& [w, lateness] : delta.rows.closes) RETURN_IF_ERROR(ApplyClose(*conn_, window_, w, lateness));
    return tables_->Save(delta.progress);
  };
  Status st = write();
  if (st.ok()) st = conn_->Execute("COMMIT");
  if (!st.ok()) {
    (void)conn_->Execute("ROLLBACK");
    tables_->Forget();
    return st;
  }
  // The appended chunks point into their results: free both now, on this thread.
  delta.rows = RowChanges{};
  if (delta.checkpoint) {
    // Without it the rows closes delete stay in memory as DuckDB's uncheckpointed rows
    // until its 16 MB WAL threshold.
    if (Status cp = conn_->Execute("CHECKPOINT"); !cp.ok()) {
      SLUICE_LOG(kLog, kWarn, "pipeline {}: checkpoint of the state file: {}", pipeline_, cp.message());
    }
  }
  return Status::OK();
}

}  // namespace sluice::pipeline
