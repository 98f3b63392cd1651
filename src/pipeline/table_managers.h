// TableManagers: sqlflow's window managers (`tables.sql[].manager.tumbling_window`,
// docs/design/0007 #2): tables the handler's SQL fills, polled on the runner's loop every
// poll_interval_seconds. A poll, in one transaction (so now() is one instant for both
// statements): collect_closed_windows_sql into a table, its rows to the manager's sink
// and flushed, delete_closed_windows_sql. A failed poll is rolled back and the windows
// stay for the next one. A table that keeps deleting rows is rebuilt now and then: DuckDB
// never frees the rows deleted from an indexed table.
//
// Lifecycle: made by the runner's Create, polled on its thread; the connection must
// outlive it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "pipeline/pipeline_config.h"
#include "sinks/sink.h"

namespace sluice::pipeline {

class TableManagers {
 public:
  // What a poll needs from the runner.
  struct Hooks {
    std::string pipeline;  // the pipeline's name, for errors and logs
    ErrorPolicy policy = ErrorPolicy::kRaise;
    std::function<void()> failed;                  // counts a failed poll (phase window)
    std::atomic<uint64_t>* compactions = nullptr;  // RunnerStats::window_compactions
    std::function<void()> table_replaced;          // the handler's statement must be prepared again
    // Rows a manager's sink refused, through on_error (phase window).
    std::function<Status(const std::vector<sinks::RejectedRow>& rows, std::string what)> refused;
  };

  TableManagers(duck::Connection& conn, Hooks hooks) : conn_(conn), hooks_(std::move(hooks)) {}

  // Manages `table` (a tables.sql entry with a manager); `sink` is null for Invoke.
  void Add(const TableConfig& table, std::unique_ptr<sinks::Sink> sink);
  bool empty() const { return managers_.empty(); }

  // Polls the managers that are due (all of them with `all`). With `emitted` (Invoke) the
  // collected rows are returned as JSON objects instead of going to a sink. Returns an
  // error only under on_error RAISE.
  Status Poll(bool all, std::vector<std::string>* emitted = nullptr);

 private:
  struct Manager {
    std::string table;
    TumblingWindowConfig config;
    std::unique_ptr<sinks::Sink> sink;  // null for Invoke
    std::chrono::steady_clock::time_point next_poll;
    uint64_t deleted = 0;  // rows deleted since the table was last rebuilt
    bool compact = true;   // false once a rebuild failed (warned once)
  };
  void Compact(Manager& w);

  duck::Connection& conn_;
  Hooks hooks_;
  std::vector<Manager> managers_;
};

}  // namespace sluice::pipeline
