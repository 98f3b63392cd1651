#include "pipeline/window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <utility>

#include "base/strings.h"
#include "duck/chunk_view.h"
#include "duck/data_chunk.h"

namespace sluice::pipeline {
namespace {

using duck::QuoteIdentifier;
using duck::QuoteLiteral;

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr std::string_view kRows = "sluice_window_rows";
constexpr std::string_view kSources = "sluice_window_sources";
constexpr std::string_view kWatermarks = "sluice_watermarks";
constexpr std::string_view kClosed = "sluice_window_closed";
constexpr std::string_view kEmit = "sluice_window_emit";
constexpr std::string_view kSessions = "sluice_window_sessions";
constexpr std::string_view kMeta = "sluice_batch_meta";
constexpr std::string_view kNewRows = "sluice_window_new";
// One row: what the prepared statements of a batch read instead of parameters.
constexpr std::string_view kParams = "sluice_window_params";
constexpr std::string_view kWatermarkNow = "(SELECT watermark FROM sluice_window_params)";
constexpr std::string_view kBatchNow = "(SELECT batch FROM sluice_window_params)";
constexpr std::string_view kCapNow = "(SELECT cap FROM sluice_window_params)";
// The columns the state adds to the result's.
constexpr std::string_view kInternal = "sluice_t, sluice_end, sluice_emitted, sluice_batch";

// The SQL that gives a column's event time in microseconds (NULL when there is none), by
// its DuckDB type; empty when the type cannot be a time.
std::string TimeExpr(std::string_view column, std::string_view type) {
  std::string t = AsciiLower(type);
  if (t == "timestamp with time zone") return fmt::format("epoch_us({})", column);
  if (t == "timestamp" || t == "timestamp_s" || t == "timestamp_ms" || t == "timestamp_ns" ||
      t == "date") {
    return fmt::format("epoch_us({}::TIMESTAMP)", column);
  }
  if (t == "varchar") return fmt::format("epoch_us(TRY_CAST({} AS TIMESTAMPTZ))", column);
  return "";
}

// Floor division's start for a positive step (correct for times before 1970 too).
std::string StartOf(std::string_view t, int64_t step) {
  return fmt::format("({0} - ((({0} % {1}) + {1}) % {1}))", t, step);
}

int64_t Sat(int64_t a, int64_t b) {  // a + b, saturating
  if (b > 0 && a > kNever - b) return kNever;
  return a + b;
}

// ApplyClose of fixed windows.
Status ApplyFixedClose(duck::Connection& conn, int64_t w, int64_t lateness) {
  if (lateness == 0)
    return conn.Execute(fmt::format("DELETE FROM {} WHERE sluice_end <= {}", kRows, w));
  RETURN_IF_ERROR(conn.Execute(fmt::format(
      "UPDATE {} SET sluice_emitted = true WHERE NOT sluice_emitted AND sluice_end <= {}", kRows,
      w)));
  return conn.Execute(
      fmt::format("DELETE FROM {} WHERE sluice_end + {} <= {}", kRows, lateness, w));
}

// The sessions of the rows table as the temp table kSessions: per row, its session's
// bounds. Gaps and islands: a row `gap` or more after the previous one of its key starts
// a session; a session is [first, last + gap).
Status MakeSessions(duck::Connection& conn, const WindowConfig& config) {
  std::vector<std::string> keys;
  for (const std::string& k : config.key) keys.push_back(QuoteIdentifier(k));
  std::string by = keys.empty() ? "" : fmt::format("PARTITION BY {} ", fmt::join(keys, ", "));
  std::string by_session = keys.empty()
                               ? "PARTITION BY sluice_sid"
                               : fmt::format("PARTITION BY {}, sluice_sid", fmt::join(keys, ", "));
  std::string key_list = keys.empty() ? "" : fmt::format(", {}", fmt::join(keys, ", "));
  return conn.Execute(
      fmt::format("CREATE OR REPLACE TEMP TABLE {0} AS "
                  "WITH o AS (SELECT rowid AS sluice_rowid, sluice_t, sluice_emitted{1}, "
                  "  CASE WHEN sluice_t - lag(sluice_t) OVER ({2}ORDER BY sluice_t) >= {3} THEN 1 "
                  "ELSE 0 END AS sluice_break "
                  "  FROM {4}), "
                  "g AS (SELECT *, sum(sluice_break) OVER ({2}ORDER BY sluice_t ROWS UNBOUNDED "
                  "PRECEDING) AS sluice_sid FROM o) "
                  "SELECT sluice_rowid, sluice_emitted, min(sluice_t) OVER s AS sluice_s0, "
                  "max(sluice_t) OVER s + {3} AS sluice_s1, "
                  "  bool_and(sluice_emitted) OVER s AS sluice_done FROM g WINDOW s AS ({5})",
                  kSessions, key_list, by, config.gap_us, kRows, by_session));
}

// ApplyClose of sessions, over kSessions (MakeSessions), which it drops.
Status ApplySessionClose(duck::Connection& conn, int64_t w, int64_t lateness) {
  if (lateness > 0) {
    RETURN_IF_ERROR(
        conn.Execute(fmt::format("UPDATE {} SET sluice_emitted = true WHERE rowid IN (SELECT "
                                 "sluice_rowid FROM {} WHERE sluice_s1 <= {} "
                                 "AND NOT sluice_emitted)",
                                 kRows, kSessions, w)));
  }
  RETURN_IF_ERROR(conn.Execute(fmt::format(
      "DELETE FROM {} WHERE rowid IN (SELECT sluice_rowid FROM {} WHERE sluice_s1 <= {} - {})",
      kRows, kSessions, w, lateness)));
  return conn.Execute(fmt::format("DROP TABLE {}", kSessions));
}

}  // namespace

Status ApplyClose(duck::Connection& conn, const WindowConfig& config, int64_t w, int64_t lateness) {
  if (config.type != WindowType::kSession) return ApplyFixedClose(conn, w, lateness);
  RETURN_IF_ERROR(MakeSessions(conn, config));
  return ApplySessionClose(conn, w, lateness);
}

struct PartitionState {
  int64_t newest = WindowEngine::kNoTime;
  WindowEngine::SteadyTime last_seen{};
  bool assigned = false;
  bool dirty = false;  // newest changed since the last save
};

struct WindowEngine::Memory {
  std::map<std::pair<std::string, int32_t>, PartitionState> partitions;
  int64_t watermark = kNoTime;
  bool watermark_dirty = false;
  // Lower bounds: the earliest end of a window holding rows not yet emitted, and of one
  // emitted but kept for lateness. kNever when none.
  int64_t open_end = kNever;
  int64_t kept_end = kNever;
  uint64_t batch = 0;      // the last batch number Add used
  uint64_t min_batch = 0;  // the oldest batch with rows in the state (when it has any)
  bool rows_empty = true;
  uint64_t pruned_below = 0;  // sources below this batch are deleted from the table
  std::map<std::pair<std::string, int32_t>, std::deque<std::pair<uint64_t, int64_t>>> sources;
  std::vector<std::tuple<uint64_t, std::string, int32_t, int64_t>> unsaved_sources;
  // Closes so far, and per partition the count at its last source entry: one entry per
  // partition between two closes is enough (the floor is a lower bound), which keeps the
  // lists short.
  uint64_t closes = 0;
  std::map<std::pair<std::string, int32_t>, uint64_t> noted_at;
  bool table_ready = false;
  bool closed_view = false;              // the TEMP VIEW `closed` exists
  std::set<std::string> table_columns;   // lower-case
  std::vector<std::string> table_order;  // the rows table's columns, in order
  std::set<std::string> result_columns;  // lower-case
  uint64_t result_generation = std::numeric_limits<uint64_t>::max();
  std::string result_time;  // the time expression over the result's column (alias r)
  uint64_t batch_generation = std::numeric_limits<uint64_t>::max();
  std::string batch_time;  // over the batch's column (alias b)
};

struct WindowEngine::Impl {
  duck::Connection& conn;
  WindowConfig config;
  std::string pipeline;
  Memory m;
  std::unique_ptr<duck::ChunkView> meta;
  std::vector<duck::DataChunk> meta_chunks;
  std::unique_ptr<duck::ChunkView> params;
  std::optional<duck::DataChunk> params_chunk;
  Status SetParams(int64_t watermark, int64_t batch, int64_t cap) {
    if (!params_chunk) {
      std::vector<duck::LogicalType> types;
      for (int i = 0; i < 3; ++i) types.push_back(duck::LogicalType::BigInt());
      ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
      params_chunk.emplace(std::move(chunk));
      params->SetChunks({&*params_chunk});
    }
    params_chunk->column(0).data<int64_t>()[0] = watermark;
    params_chunk->column(1).data<int64_t>()[0] = batch;
    params_chunk->column(2).data<int64_t>()[0] = cap;
    params_chunk->SetSize(1);
    params->SetChunks({&*params_chunk});
    return Status::OK();
  }
  // With track_changes: what TakeChanges hands over.
  bool track = false;
  RowChanges changes;
  // DDL statements run on the rows table, and whether the INSERT was prepared in a
  // transaction that ran one: DuckDB 1.5 checks a prepared INSERT's target catalog version
  // at each execution, and one prepared inside a transaction that changed the catalog is
  // planned again at every execution after it commits (the re-planned copy is not kept).
  uint64_t ddl_generation = 0;
  bool stale = false;
  // The statements of every batch, prepared once per shape of the result and the batch
  // (parse, bind and plan cost more than running them on a batch): $1 the watermark, $2
  // the batch number; Observe's $1 the future cap.
  std::unique_ptr<duck::PreparedStatement> stats;
  std::unique_ptr<duck::PreparedStatement> insert;  // the kept rows, in the table's order
  std::unique_ptr<duck::ChunkView> new_rows;        // what `insert` selected...
  std::unique_ptr<duck::PreparedStatement> append;  // ...into the rows table
  std::unique_ptr<duck::PreparedStatement> observe_one;
  std::unique_ptr<duck::PreparedStatement> observe_many;
  void Unprepare() {
    stats.reset();
    insert.reset();
    append.reset();
    new_rows.reset();
    observe_one.reset();
    observe_many.reset();
  }
  Impl(duck::Connection& c, const WindowConfig& w, std::string p)
      : conn(c), config(w), pipeline(std::move(p)) {}

  // The end of the latest / earliest window holding time `t` (an SQL expression).
  std::string LastEnd(std::string_view t) const {
    switch (config.type) {
      case WindowType::kTumbling:
        return fmt::format("({} + {})", StartOf(t, config.size_us), config.size_us);
      case WindowType::kHopping:
        return fmt::format("({} + {})", StartOf(t, config.slide_us), config.size_us);
      case WindowType::kSession:
        return fmt::format("({} + {})", t, config.gap_us);
    }
    return "";
  }
  std::string FirstEnd(std::string_view t) const {
    if (config.type == WindowType::kHopping)
      return fmt::format("({} + {})", StartOf(t, config.slide_us), config.slide_us);
    return LastEnd(t);
  }
  // True for a row that cannot be kept: no time, or every window of it past lateness. A
  // session row within `gap` of a stored row of its key joins that session (open, or kept
  // for lateness), so it is kept. `row` names the row's relation (for its key columns).
  // `w` is the watermark: a literal, or a parameter bound to it (kNoTime when none, which
  // makes nothing late).
  std::string Dropped(std::string_view t, std::string_view row, std::string_view w) const {
    std::string joins;
    if (config.type == WindowType::kSession && m.table_ready) {
      std::string same_key;
      for (const std::string& k : config.key) {
        same_key += fmt::format(" AND s.{0} IS NOT DISTINCT FROM {1}.{0}", QuoteIdentifier(k), row);
      }
      joins = fmt::format(" AND NOT EXISTS (SELECT 1 FROM {} s WHERE abs(s.sluice_t - {}) < {}{})",
                          kRows, t, config.gap_us, same_key);
    }
    return fmt::format("({0} IS NULL OR ({1} + {2} <= {3}{4}))", t, LastEnd(t),
                       config.allowed_lateness_us, w, joins);
  }

  // The relation's columns and their types, in order.
  Result<std::vector<std::pair<std::string, std::string>>> Describe(std::string_view relation) {
    ASSIGN_OR_RETURN(auto rows, conn.QueryText(fmt::format("DESCRIBE SELECT * FROM {}", relation)));
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& row : rows) out.emplace_back(row[0].value_or(""), row[1].value_or(""));
    return out;
  }

  Result<std::string> TimeOf(std::string_view relation, std::string_view what,
                             std::string_view alias) {
    ASSIGN_OR_RETURN(auto columns, Describe(relation));
    std::vector<std::string> names;
    for (const auto& [name, type] : columns) {
      if (AsciiLower(name) != AsciiLower(config.time_column)) {
        names.push_back(name);
        continue;
      }
      std::string expr = TimeExpr(fmt::format("{}.{}", alias, QuoteIdentifier(name)), type);
      if (expr.empty()) {
        return InvalidArgumentError(
            "pipeline.window.time_column {} is {} in {}; it must be TIMESTAMP, TIMESTAMP WITH TIME "
            "ZONE, DATE "
            "or a VARCHAR holding timestamps",
            QuoteLiteral(config.time_column), type, what);
      }
      return expr;
    }
    return InvalidArgumentError(
        "pipeline.window.time_column {} is not a column of {} (its columns: {})",
        QuoteLiteral(config.time_column), what, fmt::join(names, ", "));
  }

  // Creates the rows table from the result's columns, or adds the ones it lacks.
  Status PrepareTable(std::string_view result,
                      const std::vector<std::pair<std::string, std::string>>& columns) {
    for (const auto& [name, type] : columns) {
      std::string l = AsciiLower(name);
      if (l == "window_start" || l == "window_end" || l.rfind("sluice_", 0) == 0) {
        return InvalidArgumentError(
            "the handler's result has a column named {}, which the window state uses itself; "
            "rename it",
            name);
      }
    }
    // Spelled out (not CREATE TABLE AS over the result) so that a write-behind copy of the
    // table can run the same statements.
    auto ddl = [&](std::string sql) -> Status {
      RETURN_IF_ERROR(conn.Execute(sql));
      ++ddl_generation;
      if (track) changes.ddl.push_back(std::move(sql));
      return Status::OK();
    };
    if (!m.table_ready) {
      std::vector<std::string> defs;
      for (const auto& [name, type] : columns)
        defs.push_back(fmt::format("{} {}", QuoteIdentifier(name), type));
      RETURN_IF_ERROR(
          ddl(fmt::format("CREATE TABLE IF NOT EXISTS {} ({}, window_start TIMESTAMPTZ, window_end "
                          "TIMESTAMPTZ, sluice_t BIGINT, "
                          "sluice_end BIGINT, sluice_emitted BOOLEAN, sluice_batch BIGINT)",
                          kRows, fmt::join(defs, ", "))));
      RETURN_IF_ERROR(LoadColumns());
      m.table_ready = true;
    }
    for (const auto& [name, type] : columns) {
      if (m.table_columns.count(AsciiLower(name)) != 0) continue;
      RETURN_IF_ERROR(
          ddl(fmt::format("ALTER TABLE {} ADD COLUMN {} {}", kRows, QuoteIdentifier(name), type)));
      Unprepare();
      m.table_columns.insert(AsciiLower(name));
      m.table_order.push_back(name);
    }
    return Status::OK();
  }

  Status LoadColumns() {
    ASSIGN_OR_RETURN(
        auto rows,
        conn.QueryText(fmt::format(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = {} AND schema_name "
            "= 'main' AND database_name = current_database() ORDER BY column_index",
            QuoteLiteral(kRows))));
    m.table_columns.clear();
    m.table_order.clear();
    for (const auto& row : rows) {
      m.table_columns.insert(AsciiLower(row[0].value_or("")));
      m.table_order.push_back(row[0].value_or(""));
    }
    return Status::OK();
  }

  void Advance(SteadyTime now) {
    const auto idle = std::chrono::microseconds(config.idle_close_us);
    int64_t min_active = kNever;
    int64_t max_all = kNoTime;
    bool any_active = false;
    bool any_assigned = false;
    for (const auto& [tp, p] : m.partitions) {
      if (!p.assigned) continue;  // stored from an earlier run, or given away
      any_assigned = true;
      if (p.newest != kNoTime) max_all = std::max(max_all, p.newest);
      if (now - p.last_seen >= idle) continue;
      if (p.newest == kNoTime) return;  // heard of, never read from, not idle yet: hold
      any_active = true;
      min_active = std::min(min_active, p.newest);
    }
    if (!any_assigned) return;
    int64_t candidate = any_active ? min_active : max_all;
    if (candidate == kNoTime) return;
    candidate -= config.grace_us;
    if (candidate > m.watermark) {
      m.watermark = candidate;
      m.watermark_dirty = true;
    }
  }

  // After rows went: where the state stands now.
  Status Recount() {
    // (Sessions keep their own bounds: CloseSessions knows where the open ones end.)
    std::string open_end =
        config.type == WindowType::kSession ? "min(sluice_t)" : "min(sluice_end)";
    ASSIGN_OR_RETURN(
        auto rows,
        conn.QueryText(fmt::format(
            "SELECT {0} FILTER (WHERE NOT sluice_emitted), {0} FILTER (WHERE sluice_emitted), "
            "min(sluice_batch) FROM {1}",
            open_end, kRows)));
    auto num = [](const std::optional<std::string>& s) { return s ? std::stoll(*s) : kNever; };
    if (config.type != WindowType::kSession) m.open_end = num(rows[0][0]);
    if (config.type != WindowType::kSession) m.kept_end = num(rows[0][1]);
    m.rows_empty = !rows[0][2].has_value();
    if (!m.rows_empty) m.min_batch = static_cast<uint64_t>(std::stoll(*rows[0][2]));
    // Entries older than the one covering the oldest row's batch are no longer needed.
    uint64_t keep = m.rows_empty ? m.batch + 1 : m.min_batch;
    for (auto& [tp, q] : m.sources) {
      if (m.rows_empty) q.clear();
      while (q.size() > 1 && q[1].first <= keep) q.pop_front();
    }
    ++m.closes;
    // Entries not saved yet (always, without pipeline.state) that the lists dropped.
    std::erase_if(m.unsaved_sources, [&](const auto& e) {
      auto it = m.sources.find({std::get<1>(e), std::get<2>(e)});
      return it == m.sources.end() || it->second.empty() ||
             std::get<0>(e) < it->second.front().first;
    });
    return Status::OK();
  }

  Status Emit(const std::function<Status(std::string_view, uint64_t)>& emit) {
    if (!m.closed_view) {
      RETURN_IF_ERROR(conn.Execute(
          fmt::format("CREATE OR REPLACE TEMP VIEW closed AS SELECT * EXCLUDE ({}) FROM {}",
                      kInternal, kClosed)));
      m.closed_view = true;
    }
    std::string sql(config.emit_sql);
    while (!sql.empty() &&
           (std::isspace(static_cast<unsigned char>(sql.back())) || sql.back() == ';'))
      sql.pop_back();
    Result<duck::QueryResult> r =
        conn.Query(fmt::format("CREATE OR REPLACE TEMP TABLE {} AS {}", kEmit, sql));
    if (!r.ok())
      return InvalidArgumentError("{}: emit_sql: {}", config.emit_origin, r.status().message());
    uint64_t rows = 0;
    if (r->column_count() == 1 && r->chunk_count() > 0 && r->chunk(0).size() == 1 &&
        !r->chunk(0).IsNull(0, 0)) {
      rows = static_cast<uint64_t>(r->chunk(0).GetInt64(0, 0));
    }
    if (rows == 0) return Status::OK();
    return emit(kEmit, rows);
  }

  Status CloseFixed(int64_t w, bool all,
                    const std::function<Status(std::string_view, uint64_t)>& emit) {
    const int64_t lateness = all ? 0 : config.allowed_lateness_us;
    if (w >= m.open_end) {
      // With lateness allowed, windows already emitted and kept stay out unless a late row
      // came (also when closing everything).
      std::string where =
          config.allowed_lateness_us == 0
              ? fmt::format("sluice_end <= {}", w)
              : fmt::format(
                    "sluice_end <= {0} AND sluice_end IN (SELECT sluice_end FROM {1} "
                    "WHERE NOT sluice_emitted AND sluice_end <= {0})",
                    w, kRows);
      RETURN_IF_ERROR(conn.Execute(fmt::format(
          "CREATE OR REPLACE TEMP TABLE {} AS SELECT * FROM {} WHERE {}", kClosed, kRows, where)));
      RETURN_IF_ERROR(Emit(emit));
    }
    RETURN_IF_ERROR(ApplyFixedClose(conn, w, lateness));
    if (track) changes.closes.emplace_back(w, lateness);
    return Recount();
  }

  Status CloseSessions(int64_t w, bool all,
                       const std::function<Status(std::string_view, uint64_t)>& emit) {
    const int64_t lateness = all ? 0 : config.allowed_lateness_us;
    RETURN_IF_ERROR(MakeSessions(conn, config));
    ASSIGN_OR_RETURN(
        auto due,
        conn.QueryText(fmt::format(
            "SELECT count(*) FILTER (WHERE sluice_s1 <= {0} AND NOT sluice_done), "
            "min(sluice_s1) FILTER (WHERE sluice_s1 > {0}), "
            "min(sluice_s1) FILTER (WHERE sluice_s1 <= {0} AND sluice_s1 > {0} - {1}) FROM {2}",
            w, lateness, kSessions)));
    if (due[0][0].value_or("0") != "0") {
      RETURN_IF_ERROR(conn.Execute(fmt::format(
          "CREATE OR REPLACE TEMP TABLE {0} AS SELECT r.* REPLACE (make_timestamptz(s.sluice_s0) "
          "AS window_start, "
          "make_timestamptz(s.sluice_s1) AS window_end) FROM {1} r JOIN {2} s ON r.rowid = "
          "s.sluice_rowid "
          "WHERE s.sluice_s1 <= {3} AND NOT s.sluice_done ORDER BY s.sluice_s0, r.sluice_t",
          kClosed, kRows, kSessions, w)));
      RETURN_IF_ERROR(Emit(emit));
    }
    RETURN_IF_ERROR(ApplySessionClose(conn, w, lateness));
    if (track) changes.closes.emplace_back(w, lateness);
    auto num = [](const std::optional<std::string>& s) { return s ? std::stoll(*s) : kNever; };
    m.open_end = num(due[0][1]);
    m.kept_end = lateness > 0 ? num(due[0][2]) : kNever;
    return Recount();
  }

  Status Load(const StateTables::Loaded* loaded) {
    ASSIGN_OR_RETURN(
        auto exists,
        conn.QueryText(fmt::format(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = {} AND schema_name = "
            "'main' AND database_name = current_database()",
            QuoteLiteral(kRows))));
    if (exists[0][0].value_or("0") != "0") {
      RETURN_IF_ERROR(LoadColumns());
      for (std::string_view c : {"window_start", "window_end", "sluice_t", "sluice_end",
                                 "sluice_emitted", "sluice_batch"}) {
        if (m.table_columns.count(std::string(c)) == 0) {
          return FailedPreconditionError(
              "pipeline {}: the state's {} has no column {}: not sluice's window state", pipeline,
              kRows, c);
        }
      }
      m.table_ready = true;
      ASSIGN_OR_RETURN(auto b,
                       conn.QueryText(fmt::format("SELECT max(sluice_batch) FROM {}", kRows)));
      if (b[0][0]) m.batch = static_cast<uint64_t>(std::stoll(*b[0][0]));
    }
    if (loaded != nullptr) {
      for (const auto& [tp, newest] : loaded->watermarks) {
        if (tp.second < 0) {
          m.watermark = newest;
          continue;
        }
        PartitionState& p = m.partitions[tp];
        p.newest = newest;
      }
      for (const SourceEntry& e : loaded->sources) {
        m.sources[{e.topic, e.partition}].emplace_back(e.batch, e.first_offset);
        m.batch = std::max(m.batch, e.batch);
      }
    }
    if (m.table_ready) {
      RETURN_IF_ERROR(Recount());
      if (config.type == WindowType::kSession) {
        ASSIGN_OR_RETURN(
            auto b, conn.QueryText(
                        fmt::format("SELECT min(sluice_t) FILTER (WHERE NOT sluice_emitted) + {0}, "
                                    "min(sluice_t) FILTER (WHERE sluice_emitted) + {0} FROM {1}",
                                    config.gap_us, kRows)));
        m.open_end = b[0][0] ? std::stoll(*b[0][0]) : kNever;
        m.kept_end = b[0][1] ? std::stoll(*b[0][1]) : kNever;
      }
    }
    m.pruned_below = m.rows_empty ? m.batch + 1 : m.min_batch;
    // Made here, outside any batch's transaction, so a rollback never takes it away.
    std::vector<duck::LogicalType> types;
    types.push_back(duck::LogicalType::Integer());
    ASSIGN_OR_RETURN(meta,
                     duck::ChunkView::Create(conn, kMeta, {"sluice_source"}, std::move(types)));
    std::vector<duck::LogicalType> param_types;
    for (int i = 0; i < 3; ++i) param_types.push_back(duck::LogicalType::BigInt());
    ASSIGN_OR_RETURN(params, duck::ChunkView::Create(conn, kParams, {"watermark", "batch", "cap"},
                                                     std::move(param_types)));
    return Status::OK();
  }
};

WindowEngine::WindowEngine(duck::Connection& conn, const WindowConfig& config, std::string pipeline)
    : impl_(std::make_unique<Impl>(conn, config, std::move(pipeline))) {}

WindowEngine::~WindowEngine() {
  if (!impl_) return;
  impl_->meta.reset();
}

Result<std::unique_ptr<WindowEngine>> WindowEngine::Create(duck::Connection& conn,
                                                           const WindowConfig& config,
                                                           std::string pipeline,
                                                           const StateTables::Loaded* loaded,
                                                           bool track_changes) {
  std::unique_ptr<WindowEngine> e(new WindowEngine(conn, config, std::move(pipeline)));
  e->impl_->track = track_changes;
  RETURN_IF_ERROR(e->impl_->Load(loaded));
  return e;
}

void WindowEngine::Assign(const std::string& topic, int32_t partition, SteadyTime now) {
  PartitionState& p = impl_->m.partitions[{topic, partition}];
  p.assigned = true;
  p.last_seen = now;
}

void WindowEngine::Heard(std::string_view topic, int32_t partition, SteadyTime now) {
  auto it = impl_->m.partitions.find({std::string(topic), partition});
  if (it == impl_->m.partitions.end()) {
    it =
        impl_->m.partitions.emplace(std::make_pair(std::string(topic), partition), PartitionState{})
            .first;
    it->second.assigned = true;
  }
  it->second.last_seen = now;
}

void WindowEngine::Revoke(const std::string& topic, int32_t partition) {
  auto it = impl_->m.partitions.find({topic, partition});
  if (it != impl_->m.partitions.end()) it->second.assigned = false;
  impl_->m.sources.erase({topic, partition});
}

Result<uint64_t> WindowEngine::Add(std::string_view result, uint64_t result_generation,
                                   std::vector<DroppedRow>* dropped) {
  Impl& impl = *impl_;
  Memory& m = impl.m;
  const WindowConfig& c = impl.config;
  if (impl.stale) {
    // Prepared in the transaction that changed the table: prepare it again now.
    impl.stale = false;
    impl.insert.reset();
    impl.append.reset();
    impl.new_rows.reset();
  }
  const uint64_t ddl_before = impl.ddl_generation;
  if (m.result_generation != result_generation) {
    ASSIGN_OR_RETURN(auto columns, impl.Describe(result));
    ASSIGN_OR_RETURN(m.result_time, impl.TimeOf(result, "the handler's result", "r"));
    m.result_columns.clear();
    for (const auto& [name, type] : columns) m.result_columns.insert(AsciiLower(name));
    RETURN_IF_ERROR(impl.PrepareTable(result, columns));
    m.result_generation = result_generation;
    impl.stats.reset();
    impl.insert.reset();
    impl.append.reset();
    impl.new_rows.reset();
  }
  const std::string q =
      fmt::format("(SELECT r.*, {} AS sluice_t FROM {} r) q", m.result_time, result);
  const std::string drop = impl.Dropped("q.sluice_t", "q", kWatermarkNow);
  RETURN_IF_ERROR(impl.SetParams(m.watermark, static_cast<int64_t>(m.batch + 1), 0));
  if (!impl.stats) {
    ASSIGN_OR_RETURN(
        impl.stats,
        duck::PreparedStatement::Prepare(
            impl.conn, fmt::format("SELECT count(*) FILTER (WHERE {0}), count(*) FILTER "
                                   "(WHERE NOT {0}), min({1}) FILTER (WHERE NOT {0}) FROM {2}",
                                   drop, impl.FirstEnd("q.sluice_t"), q)));
  }
  ASSIGN_OR_RETURN(duck::QueryResult stats, impl.stats->Execute());
  if (stats.chunk_count() == 0 || stats.chunk(0).size() == 0)
    return InternalError("window: no statistics row");
  duck::ResultChunk st = stats.chunk(0);
  const uint64_t n_dropped = static_cast<uint64_t>(st.GetInt64(0, 0));
  const uint64_t kept = static_cast<uint64_t>(st.GetInt64(1, 0));
  const std::optional<int64_t> first_end =
      st.IsNull(2, 0) ? std::nullopt : std::optional<int64_t>(st.GetInt64(2, 0));
  if (n_dropped > 0) {
    const std::string w = std::to_string(m.watermark);
    ASSIGN_OR_RETURN(
        auto rows,
        impl.conn.QueryText(fmt::format(
            "SELECT to_json(r)::VARCHAR, {0} IS NULL, {1} FROM {2} r WHERE {3}", m.result_time,
            impl.LastEnd(m.result_time), result, impl.Dropped(m.result_time, "r", w))));
    for (const auto& row : rows) {
      DroppedRow d;
      d.row_json = row[0].value_or("{}");
      if (row[1].value_or("false") == "true") {
        d.reason = fmt::format("no event time: {} is NULL or not a timestamp", c.time_column);
      } else {
        d.late = true;
        d.reason = fmt::format(
            "too late: its last window ended at {} µs since the epoch; the watermark is {} and "
            "allowed_lateness {} µs",
            row[2].value_or("?"), m.watermark, c.allowed_lateness_us);
      }
      dropped->push_back(std::move(d));
    }
  }
  if (kept == 0) return uint64_t{0};
  ++m.batch;
  if (!impl.insert) {
    // The kept rows with their windows, in the table's column order, then inserted from a
    // view of the selected chunks: one INSERT ... SELECT of them was planned again by
    // DuckDB 1.5 at every execution (~1 ms a batch), and an Appender's flush plans an
    // INSERT every time too; these two prepared statements are not.
    impl.append.reset();
    impl.new_rows.reset();
    const std::string kept_rows = fmt::format("(SELECT q.* FROM {} WHERE NOT {})", q, drop);
    const bool session = c.type == WindowType::kSession;
    std::vector<std::string> select;
    for (const std::string& column : m.table_order) {
      const std::string l = AsciiLower(column);
      if (l == "window_start") {
        select.push_back(session ? "NULL::TIMESTAMPTZ" : "make_timestamptz(sluice_s)");
      } else if (l == "window_end") {
        select.push_back(session ? "NULL::TIMESTAMPTZ"
                                 : fmt::format("make_timestamptz(sluice_s + {})", c.size_us));
      } else if (l == "sluice_end") {
        select.push_back(session ? "NULL::BIGINT" : fmt::format("sluice_s + {}", c.size_us));
      } else if (l == "sluice_emitted") {
        select.push_back("false");
      } else if (l == "sluice_batch") {
        select.push_back(std::string(kBatchNow));
      } else if (l == "sluice_t" || m.result_columns.count(l) != 0) {
        select.push_back(QuoteIdentifier(column));
      } else {
        select.push_back("NULL");  // a column of an earlier result
      }
      select.back() += " AS " + QuoteIdentifier(column);
    }
    std::string sql;
    switch (c.type) {
      case WindowType::kTumbling:
        sql = fmt::format("SELECT {} FROM (SELECT *, {} AS sluice_s FROM {})",
                          fmt::join(select, ", "), StartOf("sluice_t", c.size_us), kept_rows);
        break;
      case WindowType::kHopping:
        // Copies in windows closed longer than allowed_lateness ago are left out.
        sql = fmt::format(
            "SELECT {0} FROM (SELECT *, {1} - sluice_k * {2} AS sluice_s FROM {3}, range(0, {4}) "
            "AS "
            "sluice_w(sluice_k)) WHERE sluice_s + {5} + {6} > {7}",
            fmt::join(select, ", "), StartOf("sluice_t", c.slide_us), c.slide_us, kept_rows,
            c.size_us / c.slide_us, c.size_us, c.allowed_lateness_us, kWatermarkNow);
        break;
      case WindowType::kSession:
        sql = fmt::format("SELECT {} FROM {}", fmt::join(select, ", "), kept_rows);
        break;
    }
    ASSIGN_OR_RETURN(impl.insert, duck::PreparedStatement::Prepare(impl.conn, sql));
  }
  ASSIGN_OR_RETURN(duck::QueryResult selected, impl.insert->Execute());
  AppendedRows rows;
  for (size_t i = 0; i < selected.column_count(); ++i)
    rows.names.push_back(selected.column_name(i));
  rows.types = selected.column_logical_types();
  rows.chunks = selected.TakeChunks();
  if (!impl.new_rows) {
    std::vector<duck::LogicalType> types;
    for (const duck::LogicalType& t : rows.types) types.push_back(t.Copy());
    ASSIGN_OR_RETURN(impl.new_rows,
                     duck::ChunkView::Create(impl.conn, kNewRows, rows.names, std::move(types)));
  }
  if (!impl.append) {
    ASSIGN_OR_RETURN(impl.append, duck::PreparedStatement::Prepare(
                                      impl.conn, fmt::format("INSERT INTO {} SELECT * FROM {}",
                                                             kRows, kNewRows)));
  }
  {
    std::vector<const duck::DataChunk*> chunks;
    for (const duck::DataChunk& chunk : rows.chunks) chunks.push_back(&chunk);
    impl.new_rows->SetChunks(chunks);
    Status st = impl.append->Execute().status();
    impl.new_rows->SetChunks({});
    RETURN_IF_ERROR(st);
  }
  if (impl.ddl_generation != ddl_before) impl.stale = true;
  if (impl.track) {
    // Write-behind: the same rows for the copy on file.
    rows.result.emplace(std::move(selected));
    impl.changes.appended.push_back(std::move(rows));
  }
  if (first_end) m.open_end = std::min(m.open_end, *first_end);
  if (m.rows_empty) {
    m.rows_empty = false;
    m.min_batch = m.batch;
  }
  return kept;
}

void WindowEngine::NoteSources(
    const std::map<std::pair<std::string, int32_t>, int64_t>& first_offsets) {
  Memory& m = impl_->m;
  for (const auto& [tp, offset] : first_offsets) {
    auto [at, fresh] = m.noted_at.try_emplace(tp, m.closes);
    std::deque<std::pair<uint64_t, int64_t>>& q = m.sources[tp];
    if (!q.empty() && !fresh && at->second == m.closes) continue;  // covered by the last entry
    at->second = m.closes;
    q.emplace_back(m.batch, offset);
    m.unsaved_sources.emplace_back(m.batch, tp.first, tp.second, offset);
  }
}

Status WindowEngine::Observe(std::string_view batch, uint64_t batch_generation,
                             std::span<const SourceRun> runs, int64_t wall_us, SteadyTime now) {
  Impl& impl = *impl_;
  Memory& m = impl.m;
  if (runs.empty()) return Status::OK();
  if (m.batch_generation != batch_generation) {
    ASSIGN_OR_RETURN(m.batch_time, impl.TimeOf(batch, "the batch", "b"));
    m.batch_generation = batch_generation;
    impl.observe_one.reset();
    impl.observe_many.reset();
  }
  const int64_t cap = Sat(wall_us, impl.config.max_future_us);
  // The partitions of this batch, in first-seen order; each run's rows belong to one.
  std::vector<std::pair<std::string, int32_t>> parts;
  std::vector<int32_t> run_part;
  for (const SourceRun& r : runs) {
    std::pair<std::string, int32_t> tp{std::string(r.topic), r.partition};
    auto it = std::find(parts.begin(), parts.end(), tp);
    run_part.push_back(static_cast<int32_t>(it - parts.begin()));
    if (it == parts.end()) parts.push_back(std::move(tp));
  }
  std::vector<int64_t> newest(parts.size(), kNoTime);
  RETURN_IF_ERROR(impl.SetParams(m.watermark, static_cast<int64_t>(m.batch), cap));
  if (parts.size() == 1) {
    if (!impl.observe_one) {
      ASSIGN_OR_RETURN(
          impl.observe_one,
          duck::PreparedStatement::Prepare(
              impl.conn, fmt::format("SELECT max(t) FILTER (WHERE t <= {}) FROM (SELECT {} AS t "
                                     "FROM {} b)",
                                     kCapNow, m.batch_time, batch)));
    }
    ASSIGN_OR_RETURN(duck::QueryResult r, impl.observe_one->Execute());
    if (r.chunk_count() > 0 && r.chunk(0).size() > 0 && !r.chunk(0).IsNull(0, 0))
      newest[0] = r.chunk(0).GetInt64(0, 0);
  } else {
    // Which partition each row came from, as a view read beside the batch row by row.
    impl.meta_chunks.clear();
    const uint64_t capacity = duck::DataChunk::Capacity();
    std::vector<duck::LogicalType> types;
    types.push_back(duck::LogicalType::Integer());
    uint64_t filled = capacity;
    for (size_t i = 0; i < runs.size(); ++i) {
      for (size_t k = 0; k < runs[i].rows; ++k) {
        if (filled == capacity) {
          ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
          impl.meta_chunks.push_back(std::move(chunk));
          filled = 0;
        }
        impl.meta_chunks.back().column(0).data<int32_t>()[filled++] = run_part[i];
        impl.meta_chunks.back().SetSize(filled);
      }
    }
    std::vector<const duck::DataChunk*> chunks;
    for (const duck::DataChunk& chunk : impl.meta_chunks) chunks.push_back(&chunk);
    impl.meta->SetChunks(chunks);
    Status st;
    if (!impl.observe_many) {
      auto prepared = duck::PreparedStatement::Prepare(
          impl.conn,
          fmt::format("SELECT sluice_source, max(t) FILTER (WHERE t <= {}) FROM (SELECT {} AS t "
                      "FROM {} b) POSITIONAL JOIN {} GROUP BY 1",
                      kCapNow, m.batch_time, batch, kMeta));
      if (prepared.ok()) impl.observe_many = std::move(prepared).value();
      st = prepared.status();
    }
    Result<duck::QueryResult> r =
        st.ok() ? impl.observe_many->Execute() : Result<duck::QueryResult>(st);
    if (r.ok()) {
      for (size_t c = 0; c < r->chunk_count(); ++c) {
        duck::ResultChunk chunk = r->chunk(c);
        for (size_t row = 0; row < chunk.size(); ++row) {
          size_t i = static_cast<size_t>(chunk.GetInt32(0, row));
          if (i < newest.size() && !chunk.IsNull(1, row)) newest[i] = chunk.GetInt64(1, row);
        }
      }
    }
    impl.meta->SetChunks({});
    if (!r.ok()) return r.status();
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    PartitionState& p = m.partitions[parts[i]];
    p.assigned = true;
    p.last_seen = now;
    if (newest[i] != kNoTime && newest[i] > p.newest) {
      p.newest = newest[i];
      p.dirty = true;
    }
  }
  impl.Advance(now);
  return Status::OK();
}

void WindowEngine::Tick(SteadyTime now) { impl_->Advance(now); }

bool WindowEngine::CloseDue() const {
  const Memory& m = impl_->m;
  if (m.watermark == kNoTime) return false;
  if (m.open_end != kNever && m.watermark >= m.open_end) return true;
  return m.kept_end != kNever && m.watermark >= Sat(m.kept_end, impl_->config.allowed_lateness_us);
}

Status WindowEngine::Close(bool all,
                           const std::function<Status(std::string_view, uint64_t)>& emit) {
  Impl& impl = *impl_;
  if (!impl.m.table_ready) return Status::OK();
  if (!all && !CloseDue()) return Status::OK();
  const int64_t w = all ? kNever : impl.m.watermark;
  if (impl.config.type == WindowType::kSession) return impl.CloseSessions(w, all, emit);
  return impl.CloseFixed(w, all, emit);
}

void WindowEngine::TakeProgress(StateProgress* out) {
  Memory& m = impl_->m;
  for (auto& [tp, p] : m.partitions) {
    if (p.dirty && p.newest != kNoTime) out->watermarks[tp] = p.newest;
    p.dirty = false;
  }
  if (m.watermark_dirty && m.watermark != kNoTime) out->watermarks[{"", -1}] = m.watermark;
  m.watermark_dirty = false;
  for (auto& [batch, topic, partition, offset] : m.unsaved_sources) {
    out->sources.push_back({batch, std::move(topic), partition, offset});
  }
  m.unsaved_sources.clear();
  // What the lists no longer hold goes from the table too.
  uint64_t keep = m.batch + 1;
  for (const auto& [tp, q] : m.sources) {
    if (!q.empty()) keep = std::min(keep, q.front().first);
  }
  if (keep > m.pruned_below) {
    out->prune_sources_below = keep;
    m.pruned_below = keep;
  }
}

uint64_t WindowEngine::ddl_generation() const { return impl_->ddl_generation; }

RowChanges WindowEngine::TakeChanges() { return std::exchange(impl_->changes, RowChanges{}); }

std::optional<int64_t> WindowEngine::Floor(const std::string& topic, int32_t partition) const {
  auto it = impl_->m.sources.find({topic, partition});
  if (it == impl_->m.sources.end() || it->second.empty()) return std::nullopt;
  return it->second.front().second;
}

int64_t WindowEngine::watermark_us() const { return impl_->m.watermark; }

std::shared_ptr<const WindowEngine::Memory> WindowEngine::Snapshot() const {
  return std::make_shared<Memory>(impl_->m);
}

void WindowEngine::Restore(const Memory& m) {
  impl_->m = m;
  impl_->Unprepare();             // they may name what the rollback took away
  impl_->changes = RowChanges{};  // rolled back with the transaction
}

// ---- PartitionValues

struct PartitionValues::Impl {
  duck::Connection& conn;
  std::string table;
  std::string column;
  std::string view;
  std::unique_ptr<duck::ChunkView> values;
  std::optional<duck::DataChunk> chunk;
  int64_t next_seq = 1;
  uint64_t saves = 0;  // since the last compaction
  std::unique_ptr<duck::PreparedStatement> insert;
  std::unique_ptr<duck::PreparedStatement> compact;
};

// Every this many saves, the rows a later one superseded go.
constexpr uint64_t kCompactEvery = 1024;

PartitionValues::PartitionValues(duck::Connection& conn, std::string table, std::string column)
    : impl_(new Impl{conn, std::move(table), std::move(column), "", nullptr, std::nullopt, 1, 0,
                     nullptr, nullptr}) {}

PartitionValues::~PartitionValues() {
  impl_->insert.reset();
  impl_->compact.reset();
  impl_->values.reset();
}

Result<std::unique_ptr<PartitionValues>> PartitionValues::Create(duck::Connection& conn,
                                                                 std::string table,
                                                                 std::string column) {
  std::unique_ptr<PartitionValues> v(
      new PartitionValues(conn, std::move(table), std::move(column)));
  Impl& impl = *v->impl_;
  RETURN_IF_ERROR(conn.Execute(fmt::format(
      "CREATE TABLE IF NOT EXISTS {} (topic VARCHAR, \"partition\" INTEGER, {} BIGINT, seq BIGINT)",
      impl.table, QuoteIdentifier(impl.column))));
  // A file written before the table was append-only: one row per partition, no seq.
  ASSIGN_OR_RETURN(
      auto has_seq,
      conn.QueryText(fmt::format(
          "SELECT count(*) FROM duckdb_columns() WHERE table_name = {} AND schema_name = "
          "'main' AND database_name = current_database() AND column_name = 'seq'",
          QuoteLiteral(impl.table))));
  if (has_seq.empty() || has_seq[0][0].value_or("0") == "0") {
    RETURN_IF_ERROR(
        conn.Execute(fmt::format("ALTER TABLE {} ADD COLUMN seq BIGINT DEFAULT 0", impl.table)));
  }
  impl.view = impl.table + "_new";
  std::vector<duck::LogicalType> types;
  types.push_back(duck::LogicalType::Varchar());
  types.push_back(duck::LogicalType::Integer());
  types.push_back(duck::LogicalType::BigInt());
  types.push_back(duck::LogicalType::BigInt());
  ASSIGN_OR_RETURN(impl.values,
                   duck::ChunkView::Create(conn, impl.view, {"topic", "partition", "value", "seq"},
                                           std::move(types)));
  return v;
}

Result<std::map<PartitionValues::Key, int64_t>> PartitionValues::Load() {
  Impl& impl = *impl_;
  ASSIGN_OR_RETURN(
      auto rows,
      impl.conn.QueryText(fmt::format(
          "SELECT topic, \"partition\", arg_max({0}, seq), max(seq) FROM {1} GROUP BY ALL",
          QuoteIdentifier(impl.column), impl.table)));
  std::map<Key, int64_t> out;
  for (const auto& row : rows) {
    if (!row[0] || !row[1] || !row[2] || !row[3]) continue;
    out[Key{*row[0], std::stoi(*row[1])}] = std::stoll(*row[2]);
    impl.next_seq = std::max<int64_t>(impl.next_seq, std::stoll(*row[3]) + 1);
  }
  return out;
}

Status PartitionValues::Save(const std::map<Key, int64_t>& values) {
  Impl& impl = *impl_;
  if (values.empty()) return Status::OK();
  if (values.size() > duck::DataChunk::Capacity())
    return InvalidArgumentError("too many partitions in one batch");
  if (!impl.chunk) {
    std::vector<duck::LogicalType> types;
    types.push_back(duck::LogicalType::Varchar());
    types.push_back(duck::LogicalType::Integer());
    types.push_back(duck::LogicalType::BigInt());
    types.push_back(duck::LogicalType::BigInt());
    ASSIGN_OR_RETURN(duck::DataChunk c, duck::DataChunk::Create(types));
    impl.chunk.emplace(std::move(c));
  }
  impl.values->SetChunks({});
  impl.chunk->Reset();
  uint64_t row = 0;
  for (const auto& [key, value] : values) {
    impl.chunk->column(0).AssignString(row, key.first);
    impl.chunk->column(1).data<int32_t>()[row] = key.second;
    impl.chunk->column(2).data<int64_t>()[row] = value;
    impl.chunk->column(3).data<int64_t>()[row] = impl.next_seq;
    ++row;
  }
  impl.chunk->SetSize(row);
  impl.values->SetChunks({&*impl.chunk});
  Status st;
  if (!impl.insert) {
    auto prepared = duck::PreparedStatement::Prepare(
        impl.conn,
        fmt::format(
            "INSERT INTO {0} (topic, \"partition\", {1}, seq) SELECT topic, \"partition\", value, "
            "seq FROM {2}",
            impl.table, QuoteIdentifier(impl.column), impl.view));
    if (prepared.ok()) impl.insert = std::move(prepared).value();
    st = prepared.status();
  }
  if (st.ok()) st = impl.insert->Execute().status();
  impl.values->SetChunks({});
  RETURN_IF_ERROR(st);
  ++impl.next_seq;
  if (++impl.saves >= kCompactEvery) {
    if (!impl.compact) {
      ASSIGN_OR_RETURN(
          impl.compact,
          duck::PreparedStatement::Prepare(
              impl.conn,
              fmt::format("DELETE FROM {0} USING (SELECT topic, \"partition\", max(seq) AS "
                          "newest FROM {0} GROUP BY ALL) l WHERE {0}.topic = l.topic AND "
                          "{0}.\"partition\" = l.\"partition\" AND {0}.seq < l.newest",
                          impl.table)));
    }
    RETURN_IF_ERROR(impl.compact->Execute().status());
    impl.saves = 0;
  }
  return Status::OK();
}

void PartitionValues::Forget() {
  // Statements prepared inside a rolled-back transaction may name what it took away.
  impl_->insert.reset();
  impl_->compact.reset();
}

// ---- StateTables

StateTables::~StateTables() = default;

Result<std::unique_ptr<StateTables>> StateTables::Open(duck::Connection& conn) {
  std::unique_ptr<StateTables> t(new StateTables(conn));
  ASSIGN_OR_RETURN(t->offsets_, PartitionValues::Create(conn, "sluice_state", "next_offset"));
  ASSIGN_OR_RETURN(t->watermarks_,
                   PartitionValues::Create(conn, std::string(kWatermarks), "newest"));
  RETURN_IF_ERROR(
      conn.Execute(fmt::format("CREATE TABLE IF NOT EXISTS {} (batch BIGINT, topic VARCHAR, "
                               "\"partition\" INTEGER, first_offset BIGINT)",
                               kSources)));
  return t;
}

Result<StateTables::Loaded> StateTables::Load() {
  Loaded out;
  ASSIGN_OR_RETURN(out.offsets, offsets_->Load());
  ASSIGN_OR_RETURN(out.watermarks, watermarks_->Load());
  ASSIGN_OR_RETURN(
      auto sources,
      conn_.QueryText(fmt::format(
          "SELECT batch, topic, \"partition\", first_offset FROM {} ORDER BY batch", kSources)));
  for (const auto& row : sources) {
    SourceEntry e;
    e.batch = static_cast<uint64_t>(std::stoll(row[0].value_or("0")));
    e.topic = row[1].value_or("");
    e.partition = std::stoi(row[2].value_or("0"));
    e.first_offset = std::stoll(row[3].value_or("0"));
    out.sources.push_back(std::move(e));
  }
  return out;
}

Status StateTables::Save(const StateProgress& p) {
  RETURN_IF_ERROR(offsets_->Save(p.offsets));
  RETURN_IF_ERROR(watermarks_->Save(p.watermarks));
  if (!p.sources.empty()) {
    std::vector<std::string> values;
    for (const SourceEntry& e : p.sources) {
      values.push_back(fmt::format("({}, {}, {}, {})", e.batch, QuoteLiteral(e.topic), e.partition,
                                   e.first_offset));
    }
    RETURN_IF_ERROR(
        conn_.Execute(fmt::format("INSERT INTO {} VALUES {}", kSources, fmt::join(values, ", "))));
  }
  if (p.prune_sources_below > 0) {
    RETURN_IF_ERROR(conn_.Execute(
        fmt::format("DELETE FROM {} WHERE batch < {}", kSources, p.prune_sources_below)));
  }
  return Status::OK();
}

void StateTables::Forget() {
  offsets_->Forget();
  watermarks_->Forget();
}

}  // namespace sluice::pipeline
