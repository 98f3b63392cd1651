// TableManagers (table_managers.h): sqlflow's window managers on the runner's loop.
#include "pipeline/table_managers.h"

#include <fmt/format.h>

#include "base/logging.h"
#include "pipeline/loggers.h"
#include "pipeline/sql_text.h"

namespace sluice::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

// The closed windows a manager collected, for its sink.
constexpr std::string_view kWindowTable = "sluice_closed_windows";

}  // namespace

void TableManagers::Add(const TableConfig& table, std::unique_ptr<sinks::Sink> sink) {
  Manager w;
  w.table = table.name;
  w.config = *table.tumbling_window;
  w.next_poll = Clock::now() + std::chrono::seconds(w.config.poll_interval_seconds);
  w.sink = std::move(sink);
  managers_.push_back(std::move(w));
}

// DuckDB never frees the rows deleted from a table with an index (a UNIQUE index is what
// sqlflow's upsert needs), so a window table that keeps deleting closed windows grows for
// ever. Once the rows deleted since the last rebuild are at least 10,000 and twice the rows
// left, the table is rebuilt in one transaction from DuckDB's own DDL of the table and its
// indexes: the open windows are copied out, the table dropped and re-created, and copied
// back. A rebuild that fails (a view depends on the table, the name is not a table) is
// rolled back, warned about once, and not tried again.
void TableManagers::Compact(Manager& w) {
  constexpr uint64_t kMinDeleted = 10000;
  if (!w.compact || w.deleted < kMinDeleted) return;
  std::string name = duck::QuoteLiteral(w.table);
  auto rebuild = [&]() -> Status {
    ASSIGN_OR_RETURN(
        auto table,
        conn_.QueryText(fmt::format(
            "SELECT sql, schema_name FROM duckdb_tables() WHERE lower(table_name) = lower({}) "
            "AND NOT temporary AND database_name = current_database()",
            name)));
    if (table.size() != 1 || !table[0][0]) {
      return NotFoundError("no table named {} in the pipeline's database", w.table);
    }
    std::string qualified =
        duck::QuoteIdentifier(table[0][1].value_or("main")) + "." + duck::QuoteIdentifier(w.table);
    ASSIGN_OR_RETURN(auto live, conn_.QueryText("SELECT count(*) FROM " + qualified));
    if (w.deleted < 2 * std::stoull(live[0][0].value_or("0"))) return Status::OK();
    // The handler's statement reads the table about to be replaced: prepare it again.
    hooks_.table_replaced();
    ASSIGN_OR_RETURN(auto indexes,
                     conn_.QueryText(fmt::format(
                         "SELECT sql FROM duckdb_indexes() WHERE lower(table_name) = lower({}) "
                         "AND database_name = current_database() AND sql IS NOT NULL",
                         name)));
    RETURN_IF_ERROR(conn_.Execute("BEGIN TRANSACTION"));
    Status st = [&]() -> Status {
      RETURN_IF_ERROR(conn_.Execute(
          "CREATE OR REPLACE TEMP TABLE sluice_window_keep AS SELECT * FROM " + qualified));
      RETURN_IF_ERROR(conn_.Execute("DROP TABLE " + qualified));
      RETURN_IF_ERROR(conn_.Execute(*table[0][0]));
      for (const auto& row : indexes) RETURN_IF_ERROR(conn_.Execute(*row[0]));
      RETURN_IF_ERROR(
          conn_.Execute(fmt::format("INSERT INTO {} SELECT * FROM sluice_window_keep", qualified)));
      RETURN_IF_ERROR(conn_.Execute("DROP TABLE sluice_window_keep"));
      return conn_.Execute("COMMIT");
    }();
    if (!st.ok()) (void)conn_.Execute("ROLLBACK");
    RETURN_IF_ERROR(st);
    w.deleted = 0;
    ++*hooks_.compactions;
    return Status::OK();
  };
  if (Status st = rebuild(); !st.ok()) {
    w.compact = false;
    SLUICE_LOG(kLog, kWarn,
               "pipeline {}: window table {} cannot be rebuilt, so the rows its polls delete stay "
               "in memory (DuckDB keeps them for an indexed table): {}",
               hooks_.pipeline, w.table, st.message());
  }
}

Status TableManagers::Poll(bool all, std::vector<std::string>* emitted) {
  const auto now = Clock::now();
  for (Manager& w : managers_) {
    if (!all && now < w.next_poll) continue;
    w.next_poll = now + std::chrono::seconds(w.config.poll_interval_seconds);
    std::vector<sinks::RejectedRow> rejected;
    std::vector<std::string> collected;  // for `emitted`, once the poll committed
    uint64_t deleted = 0;
    std::string where;  // the step that failed
    auto attempt = [&]() -> Status {
      where = w.config.collect_origin + ": collect_closed_windows_sql";
      ASSIGN_OR_RETURN(
          duck::QueryResult r,
          conn_.Query(fmt::format("CREATE OR REPLACE TEMP TABLE {} AS {}", kWindowTable,
                                  StripTrailingSemicolons(w.config.collect_sql))));
      uint64_t rows = 0;
      if (r.column_count() == 1 && r.chunk_count() > 0 && r.chunk(0).size() == 1 &&
          !r.chunk(0).IsNull(0, 0)) {
        rows = static_cast<uint64_t>(r.chunk(0).GetInt64(0, 0));
      }
      if (rows > 0 && emitted != nullptr) {
        ASSIGN_OR_RETURN(
            duck::QueryResult j,
            conn_.Query(fmt::format("SELECT to_json(t)::VARCHAR FROM {} t", kWindowTable)));
        for (size_t i = 0; i < j.chunk_count(); ++i) {
          duck::ResultChunk chunk = j.chunk(i);
          for (size_t row = 0; row < chunk.size(); ++row)
            collected.emplace_back(chunk.GetString(0, row));
        }
      } else if (rows > 0 && w.sink) {
        where = fmt::format("tables.sql '{}' manager.sink {}", w.table, w.sink->Describe());
        RETURN_IF_ERROR(w.sink->Write(conn_, kWindowTable, {}, &rejected));
        RETURN_IF_ERROR(w.sink->Flush());
      }
      where = w.config.delete_origin + ": delete_closed_windows_sql";
      ASSIGN_OR_RETURN(duck::QueryResult d, conn_.Query(w.config.delete_sql));
      deleted = d.rows_changed();
      return Status::OK();
    };
    where = "starting the window poll's transaction";
    Status st = conn_.Execute("BEGIN TRANSACTION");
    if (st.ok()) st = attempt();
    if (st.ok()) {
      where = "committing the window poll";
      st = conn_.Execute("COMMIT");
    }
    if (!st.ok()) {
      (void)conn_.Execute("ROLLBACK");
      // The windows stay in the table: the next poll tries again.
      hooks_.failed();
      std::string error = fmt::format("pipeline {}: window {}: {}: {}", hooks_.pipeline, w.table,
                                      where, st.message());
      if (hooks_.policy == ErrorPolicy::kRaise) return InvalidArgumentError("{}", error);
      SLUICE_LOG(kLog, kWarn, "{} (the windows stay; the next poll tries again)", error);
      continue;
    }
    if (emitted != nullptr) emitted->insert(emitted->end(), collected.begin(), collected.end());
    w.deleted += deleted;
    Compact(w);
    // Rows the sink refused (they do not cast into its schema) would be refused again.
    RETURN_IF_ERROR(hooks_.refused(rejected, fmt::format("window {}: manager.sink", w.table)));
  }
  return Status::OK();
}

}  // namespace sluice::pipeline
