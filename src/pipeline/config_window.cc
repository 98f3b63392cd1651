// The pipeline file's window and state sections, sqlflow's commands and tables (with
// their window managers), and the walk of the whole file (config_walker.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "pipeline/config_walker.h"

namespace sluice::pipeline::config_internal {

void Walker::Window(const MapView& pipeline, std::optional<WindowConfig>* out) {
  const Entry* e = pipeline.Find("window");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, "pipeline.window", EntryLine(*e, pipeline.line),
                      {"type", "time_column", "size", "slide", "gap", "key", "grace",
                       "allowed_lateness", "idle_close", "max_future", "emit_sql", "sink"});
  if (e->value.IsNull()) {
    Error(m.line, m.path, "is empty; it needs type, time_column, size (or gap) and sink");
    return;
  }
  if (!m.present) return;
  WindowConfig w;
  constexpr int64_t kDay = 86'400'000'000;
  std::optional<WindowType> type = Enum(m, "type", true, kWindowTypes, true);
  if (type) w.type = *type;
  w.time_column = String(m, "time_column", true).value_or("");
  auto only = [&](std::string_view key, std::string_view kind) {
    if (m.Find(key) != nullptr) {
      Error(EntryLine(*m.Find(key), m.line), Join(m.path, key),
            fmt::format("applies to {} windows only; this one is {}", kind, Name(w.type)));
    }
  };
  // A required duration written with no value (`size:`) is as missing as an absent one;
  // Duration() passes over it silently, as it does for optional keys.
  auto need = [&](std::string_view key, std::string_view what) {
    const Entry* k = m.Find(key);
    if (k == nullptr) {
      Error(m.line, Join(m.path, key),
            fmt::format("is required for a {} window: {}", Name(w.type), what));
    } else if (k->value.IsNull()) {
      Error(EntryLine(*k, m.line), Join(m.path, key),
            fmt::format("is empty; it is required for a {} window: {}", Name(w.type), what));
    }
  };
  if (type && *type != WindowType::kSession) {
    need("size", "how long each window is, e.g. 1m");
    if (auto v = Duration(m, "size", 1000, 366 * kDay)) w.size_us = *v;
    only("gap", "session");
    only("key", "session");
  }
  if (type && *type == WindowType::kHopping) {
    need("slide", "how far apart windows start, e.g. 1m for 5m windows");
    if (auto v = Duration(m, "slide", 1000, 366 * kDay)) w.slide_us = *v;
    if (w.size_us > 0 && w.slide_us > 0) {
      int line = EntryLine(*m.Find("slide"), m.line);
      if (w.slide_us > w.size_us) {
        Error(line, Join(m.path, "slide"), "must not be longer than size");
      } else if (w.size_us % w.slide_us != 0) {
        Error(line, Join(m.path, "slide"),
              "must divide size (5m windows sliding by 1m, not by 2m)");
      } else if (w.size_us / w.slide_us > 1000) {
        Error(line, Join(m.path, "slide"),
              "makes more than 1000 windows per row (size / slide); slide further");
      }
    }
  } else if (type) {
    only("slide", "hopping");
  }
  if (type && *type == WindowType::kSession) {
    need("gap", "the silence that ends a session, e.g. 30s");
    if (auto v = Duration(m, "gap", 1000, 366 * kDay)) w.gap_us = *v;
    only("size", "tumbling and hopping");
    if (auto v = StringList(m, "key", false, "[user_id]")) w.key = std::move(*v);
  }
  if (auto v = Duration(m, "grace", 0, 366 * kDay)) w.grace_us = *v;
  if (auto v = Duration(m, "allowed_lateness", 0, 366 * kDay)) w.allowed_lateness_us = *v;
  if (auto v = Duration(m, "idle_close", 1000, 366 * kDay)) w.idle_close_us = *v;
  if (auto v = Duration(m, "max_future", 0, 3660 * kDay)) w.max_future_us = *v;
  if (auto sql = String(m, "emit_sql", false); sql && Trim(*sql).empty()) {
    Error(EntryLine(*m.Find("emit_sql"), m.line), Join(m.path, "emit_sql"),
          "is empty; leave it out to emit SELECT * FROM closed");
  } else if (sql) {
    w.emit_sql = std::move(*sql);
    w.emit_origin = Where(EntryLine(*m.Find("emit_sql"), m.line));
  } else {
    w.emit_sql = "SELECT * FROM closed";
    w.emit_origin = Where(m.line) + " (pipeline.window.emit_sql's default)";
  }
  if (const Entry* s = m.Find("sink")) {
    Sink(s->value, Join(m.path, "sink"), EntryLine(*s, m.line), &w.sink);
    if (w.sink.type == SinkType::kIceberg) {
      Error(EntryLine(*s, m.line), Join(m.path, "sink"),
            "type iceberg takes a pipeline's results (pipeline.sink) only; send the windows to a "
            "kafka topic and append that topic to the table with a second pipeline");
    }
    if (w.sink.type == SinkType::kPostgres && w.sink.postgres.commit_interval_ms > 0) {
      Error(EntryLine(*s, m.line), Join(m.path, "sink.postgres.commit_interval_ms"),
            "is for pipeline.sink only: closed windows are committed as they close");
    }
  } else {
    Error(m.line, Join(m.path, "sink"), "is required but missing: where closed windows go");
  }
  *out = std::move(w);
}

void Walker::State(const MapView& pipeline, std::optional<StateConfig>* out) {
  const Entry* e = pipeline.Find("state");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, "pipeline.state", EntryLine(*e, pipeline.line), {"path"});
  if (e->value.IsNull()) {
    Error(m.line, m.path, "is empty; it needs path (the state's database file)");
    return;
  }
  if (!m.present) return;
  StateConfig st;
  st.path = String(m, "path", true).value_or("");
  *out = std::move(st);
}

void Walker::Commands(const MapView& top, std::vector<SqlCommand>* out) {
  const Entry* e = top.Find("commands");
  if (e == nullptr || e->value.IsNull()) return;
  int line = EntryLine(*e, top.line);
  if (!e->value.IsSequence()) {
    Error(line, "commands",
          fmt::format("must be a list of {{name, sql}}, got {}", KindName(e->value)));
    return;
  }
  size_t index = 0;
  for (const YAML::Node& item : e->value) {
    std::string path = fmt::format("commands[{}]", index++);
    MapView c = OpenMap(item, path, line, {"name", "sql"});
    if (!c.present || item.IsNull()) {
      if (item.IsNull()) Error(c.line, path, "must be a map {name, sql}, got nothing");
      continue;
    }
    SqlCommand command;
    command.name = String(c, "name", true).value_or("");
    if (auto sql = String(c, "sql", true)) {
      command.sql = std::move(*sql);
      command.origin = Where(EntryLine(*c.Find("sql"), c.line));
    }
    out->push_back(std::move(command));
  }
}

void Walker::Tables(const MapView& top, std::vector<TableConfig>* out) {
  const Entry* e = top.Find("tables");
  if (e == nullptr || e->value.IsNull()) return;
  MapView tables = OpenMap(e->value, "tables", EntryLine(*e, top.line), {"sql"});
  if (!tables.present) return;
  const Entry* list = tables.Find("sql");
  if (list == nullptr || list->value.IsNull()) return;
  int line = EntryLine(*list, tables.line);
  if (!list->value.IsSequence()) {
    Error(line, "tables.sql",
          fmt::format("must be a list of {{name, sql, manager}}, got {}", KindName(list->value)));
    return;
  }
  static constexpr Refusal kTableRefused[] = {
      {"window",
       "sqlflow's later form is `manager: {tumbling_window: {collect_closed_windows_sql, "
       "delete_closed_windows_sql, poll_interval_seconds}, sink: {...}}`; or use "
       "sluice's pipeline.window"},
  };
  size_t index = 0;
  for (const YAML::Node& item : list->value) {
    std::string path = fmt::format("tables.sql[{}]", index++);
    MapView t = OpenMap(item, path, line, {"name", "sql", "manager"}, kTableRefused);
    if (!t.present || item.IsNull()) {
      if (item.IsNull()) Error(t.line, path, "must be a map {name, sql, manager}, got nothing");
      continue;
    }
    TableConfig table;
    table.name = String(t, "name", true).value_or("");
    if (auto sql = String(t, "sql", true)) {
      table.sql = std::move(*sql);
      table.origin = Where(EntryLine(*t.Find("sql"), t.line));
    }
    if (const Entry* me = t.Find("manager")) {
      MapView m = OpenMap(me->value, Join(path, "manager"), EntryLine(*me, t.line),
                          {"tumbling_window", "sink"});
      if (me->value.IsNull()) {
        Error(m.line, m.path, "is empty; it needs tumbling_window and sink");
      } else if (m.present) {
        MapView w = Section(
            m, "tumbling_window",
            {"collect_closed_windows_sql", "delete_closed_windows_sql", "poll_interval_seconds"},
            " (the only manager type)");
        if (w.present) {
          TumblingWindowConfig tw;
          if (auto sql = String(w, "collect_closed_windows_sql", true)) {
            tw.collect_sql = std::move(*sql);
            tw.collect_origin = Where(EntryLine(*w.Find("collect_closed_windows_sql"), w.line));
          }
          if (auto sql = String(w, "delete_closed_windows_sql", true)) {
            tw.delete_sql = std::move(*sql);
            tw.delete_origin = Where(EntryLine(*w.Find("delete_closed_windows_sql"), w.line));
          }
          if (auto v = Integer(w, "poll_interval_seconds", 1, 86'400))
            tw.poll_interval_seconds = *v;
          table.tumbling_window = std::move(tw);
        }
        if (const Entry* s = m.Find("sink")) {
          Sink(s->value, Join(m.path, "sink"), EntryLine(*s, m.line), &table.sink);
          if (table.sink.type == SinkType::kPostgres &&
              table.sink.postgres.commit_interval_ms > 0) {
            Error(EntryLine(*s, m.line), Join(m.path, "sink.postgres.commit_interval_ms"),
                  "is for pipeline.sink only: closed windows are committed as they close");
          }
          if (table.sink.type == SinkType::kIceberg) {
            Error(EntryLine(*s, m.line), Join(m.path, "sink"),
                  "type iceberg takes a pipeline's results (pipeline.sink) only; send the windows "
                  "to a "
                  "kafka topic and append that topic to the table with a second pipeline");
          }
        } else {
          Error(m.line, Join(m.path, "sink"), "is required but missing: where closed windows go");
        }
      }
    }
    out->push_back(std::move(table));
  }
}

PipelineConfig Walker::Walk(const YAML::Node& top) {
  PipelineConfig config;
  config.origin = std::string(origin_);
  MapView root = OpenMap(top, "", 0, {"pipeline", "commands", "tables"}, kTopRefused);
  Commands(root, &config.commands);
  Tables(root, &config.tables);
  const Entry* p = root.Find("pipeline");
  if (p == nullptr) {
    Error(root.line, "pipeline",
          "is required but missing: a pipeline file needs a `pipeline` section with source, "
          "handler and sink");
  } else {
    MapView pl =
        OpenMap(p->value, "pipeline", EntryLine(*p, root.line),
                {"name", "description", "principal", "batch_size", "flush_interval_seconds",
                 "source", "handler", "sink", "on_error", "duckdb", "window", "state"},
                kPipelineRefused);
    if (p->value.IsNull()) {
      Error(pl.line, "pipeline", "is empty; it needs source, handler and sink");
    } else if (pl.present) {
      config.name = String(pl, "name", false).value_or("");
      config.description = String(pl, "description", false).value_or("");
      config.principal = String(pl, "principal", false).value_or("");
      if (const Entry* e = pl.Find("principal");
          e != nullptr && (config.principal.empty() || config.principal.rfind("__sluice", 0) == 0 ||
                           config.principal.find_first_of("/:\n") != std::string::npos)) {
        Error(EntryLine(*e, pl.line), "pipeline.principal",
              "must be a user name (no '/', ':' or newline, not __sluice...)");
      }
      if (auto v = Integer(pl, "batch_size", 1, 1'000'000)) config.batch_size = *v;
      if (auto v = Integer(pl, "flush_interval_seconds", 1, 86'400)) {
        config.flush_interval_seconds = *v;
      }
      Source(pl, &config.source);
      Handler(pl, &config.handler);
      Window(pl, &config.window);
      if (const Entry* s = pl.Find("sink")) {
        if (config.window) {
          Error(EntryLine(*s, pl.line), "pipeline.sink",
                "is not used with pipeline.window: the handler's rows go into the window, and "
                "closed windows go to pipeline.window.sink; remove one of them");
        } else {
          Sink(s->value, "pipeline.sink", EntryLine(*s, pl.line), &config.sink);
        }
      } else if (pl.Find("window") == nullptr) {
        Error(pl.line, "pipeline.sink", "is required but missing");
      }
      OnError(pl, &config.on_error);
      DuckDb(pl, &config.duckdb);
      State(pl, &config.state);
      ExactlyOnceRules(config, pl);
    }
  }
  if (config.handler.type == HandlerType::kStructuredBatch && !config.handler.table.empty()) {
    std::string table = AsciiLower(config.handler.table);
    bool declared =
        std::any_of(config.commands.begin(), config.commands.end(),
                    [&](const SqlCommand& c) {
                      return AsciiLower(c.sql).find(table) != std::string::npos;
                    }) ||
        std::any_of(config.tables.begin(), config.tables.end(), [&](const TableConfig& t) {
          return AsciiLower(t.sql).find(table) != std::string::npos;
        });
    if (!declared) {
      Warn(0, "pipeline.handler.table",
           fmt::format("{} is not mentioned in any of `commands`; StructuredBatch parses "
                       "messages into a table the commands create",
                       Quote(config.handler.table)));
    }
  }
  config.warnings = std::move(warnings_);
  return config;
}

}  // namespace sluice::pipeline::config_internal
