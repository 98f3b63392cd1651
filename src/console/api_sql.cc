// /api/v1/sql: queries on the running query server through a trusted local session
// (docs/design/0026-console.md, decision 12): rows streamed to the page as NDJSON,
// cancel, CSV and Parquet downloads, and the relations the editor completes.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "console/api.h"
#include "console/api_util.h"
#include "console/sql_output.h"
#include "duck/database.h"
#include "query/local_session.h"

namespace sluice::console {
namespace {

using namespace api_util;  // NOLINT: the API's answers and input checks
using SteadyClock = std::chrono::steady_clock;
using query::LocalColumn;
using query::LocalHandler;
using query::LocalOutcome;
using query::LocalSession;
using CellValues = std::vector<std::optional<std::string_view>>;

constexpr int64_t kDefaultMaxRows = 100'000;
constexpr int64_t kMaxRows = 1'000'000;
// A download's CSV at most (it is written to a temporary file before it is sent).
constexpr int64_t kMaxDownloadBytes = int64_t{1} << 30;
// A rows line holds at most this many rows, or what arrived in this long.
constexpr size_t kBatchRows = 1000;
constexpr auto kBatchEvery = std::chrono::milliseconds(100);
constexpr size_t kBatchBytes = 1 << 20;

std::string NewQueryId() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

// The SQL and row limit of a run or download body.
struct SqlBody {
  std::string sql;
  int64_t max_rows = kDefaultMaxRows;
  std::string format;
  std::string query_id;  // a download's, chosen by the page to cancel it by ("": none)
};

Result<SqlBody> ReadSqlBody(const HttpRequest& req, bool download) {
  ASSIGN_OR_RETURN(Json body, download ? ParseBody(req, {"sql", "max_rows", "format", "query_id"})
                                       : ParseBody(req, {"sql", "max_rows"}));
  SqlBody out;
  ASSIGN_OR_RETURN(std::optional<std::string> sql, OptionalString(body, "sql"));
  if (!sql.has_value() || sql->find_first_not_of(" \t\r\n;") == std::string::npos) {
    return InvalidArgumentError("sql: the query to run is missing");
  }
  if (sql->find('\0') != std::string::npos) {
    // The protocol's query string ends at a NUL: what follows would be dropped unseen.
    return InvalidArgumentError("sql: a NUL character cannot be sent to the query server");
  }
  out.sql = std::move(*sql);
  ASSIGN_OR_RETURN(out.max_rows, IntField(body, "max_rows", kDefaultMaxRows));
  if (out.max_rows < 1 || out.max_rows > kMaxRows) {
    return InvalidArgumentError("max_rows: from 1 to {}", kMaxRows);
  }
  if (download) {
    ASSIGN_OR_RETURN(std::optional<std::string> format, OptionalString(body, "format"));
    out.format = format.value_or("csv");
    if (out.format != "csv" && out.format != "parquet") {
      return InvalidArgumentError("format: csv or parquet");
    }
    ASSIGN_OR_RETURN(std::optional<std::string> id, OptionalString(body, "query_id"));
    out.query_id = id.value_or("");
    if (id.has_value() &&
        (id->size() < 8 || id->size() > 64 ||
         id->find_first_not_of(
             "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-") !=
             std::string::npos)) {
      return InvalidArgumentError("query_id: 8 to 64 of A-Z a-z 0-9 _ -");
    }
  }
  return out;
}

JsonNumbers NumbersOf(const LocalColumn& c) {
  if (!c.numeric) return JsonNumbers::kNever;
  return c.type == "float4" || c.type == "float8" ? JsonNumbers::kFloats : JsonNumbers::kExact;
}

Json ColumnsJson(const std::vector<LocalColumn>& columns) {
  Json list = Json::array();
  for (const LocalColumn& c : columns) {
    list.push_back(Json{{"name", c.name}, {"type", c.type}, {"numeric", c.numeric}});
  }
  return list;
}

Json SqlErrorJson(const LocalOutcome& o) {
  Json e{{"sqlstate", o.sqlstate}, {"message", o.message}};
  if (o.position > 0) e["position"] = o.position;
  return e;
}

HttpResponse SessionUnavailable(const Status& st) {
  return ErrorResponse(503, "SQL_UNAVAILABLE",
                       fmt::format("the query server cannot take a session: {}", st.message()));
}

// The DuckDB type a column's Postgres text form is read back as, for Parquet: numeric as
// the DECIMAL its modifier names (VARCHAR without one, or past DuckDB's 38 digits: a
// hugeint or ubigint reported as numeric must not round through a double).
std::string DuckTypeOf(const LocalColumn& c) {
  if (c.type == "numeric") {
    if (c.type_modifier < 4) return "VARCHAR";
    const int32_t precision = (c.type_modifier - 4) >> 16;
    const int32_t scale = (c.type_modifier - 4) & 0xffff;
    if (precision < 1 || precision > 38 || scale > precision) return "VARCHAR";
    return fmt::format("DECIMAL({}, {})", precision, scale);
  }
  static const std::map<std::string, std::string_view> kTypes = {
      {"bool", "BOOLEAN"},
      {"int2", "SMALLINT"},
      {"int4", "INTEGER"},
      {"int8", "BIGINT"},
      {"oid", "UBIGINT"},
      {"float4", "FLOAT"},
      {"float8", "DOUBLE"},
      {"date", "DATE"},
      {"time", "TIME"},
      {"timestamp", "TIMESTAMP"},
      {"timestamptz", "TIMESTAMPTZ"},
      {"uuid", "UUID"},
  };
  auto it = kTypes.find(c.type);
  return std::string(it == kTypes.end() ? std::string_view("VARCHAR") : it->second);
}

// `name` as SQL writes it: as it is when a plain lower-case identifier, else quoted.
std::string SqlIdentifier(std::string_view name) {
  const bool plain = !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
                     });
  return plain ? std::string(name) : duck::QuoteIdentifier(name);
}

// A directory of its own under the system's temporary directory, removed with it.
struct TempDir {
  std::string path;
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sluice-sql-XXXXXX").string();
    if (::mkdtemp(pattern.data()) != nullptr) path = pattern;
  }
  ~TempDir() {
    if (path.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The CSV file of a query's last result, written as its rows come.
struct CsvFile {
  std::string path;
  std::FILE* file = nullptr;
  std::vector<LocalColumn> columns;
  int64_t rows = 0;
  int64_t bytes = 0;
  std::string cut;      // "max_rows" or "bytes" when the result was cut there; "": whole
  bool failed = false;  // a write failed (the disk is full)
  std::string line;

  ~CsvFile() {
    if (file != nullptr) std::fclose(file);
  }
  // A new result replaces the one before: a download is of the last result with rows.
  void Start(const std::vector<LocalColumn>& cols) {
    if (file != nullptr) std::fclose(file);
    file = std::fopen(path.c_str(), "wb");
    failed = file == nullptr;
    columns = cols;
    rows = 0;
    bytes = 0;
    cut.clear();
    CellValues names;
    for (const LocalColumn& c : columns) names.emplace_back(c.name);
    line.clear();
    AppendCsvLine(line, names);
    Put();
  }
  void Row(const CellValues& values) {
    line.clear();
    AppendCsvLine(line, values);
    Put();
    ++rows;
  }
  void Put() {
    if (file != nullptr && std::fwrite(line.data(), 1, line.size(), file) != line.size()) {
      failed = true;
    }
    bytes += static_cast<int64_t>(line.size());
  }
  bool Close() {
    if (file == nullptr) return !failed;
    const bool ok = std::fclose(file) == 0 && !failed;
    file = nullptr;
    return ok;
  }
};

// Writes `csv` (with its columns' types) as a Parquet file at `out`, with a DuckDB of its
// own: nothing of the query server's, no other file.
Status CsvToParquet(const CsvFile& csv, const std::string& dir, const std::string& out) {
  ASSIGN_OR_RETURN(auto db, duck::Database::Open({.memory_limit_bytes = 256 << 20,
                                                  .threads = 1,
                                                  .temp_directory = dir + "/spill"}));
  ASSIGN_OR_RETURN(auto conn, duck::Connection::Open(*db));
  // Its files: the CSV in, the Parquet file out, its spill; nothing else, settings locked.
  RETURN_IF_ERROR(conn->Execute(fmt::format(
      "SET allowed_directories = [{}]; SET enable_external_access = false; "
      "SET autoinstall_known_extensions = false; SET autoload_known_extensions = false; "
      "SET lock_configuration = true",
      duck::QuoteLiteral(dir + "/"))));
  std::string columns;
  std::set<std::string> taken;
  for (const LocalColumn& c : csv.columns) {
    // Two columns of one name (SELECT 1, 1; "A" and a, which DuckDB's names do not tell
    // apart) get a suffix: a Parquet file needs them apart.
    std::string name = c.name;
    auto lower = [](std::string s) {
      for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      return s;
    };
    for (int k = 2; !taken.insert(lower(name)).second; ++k) {
      name = fmt::format("{}_{}", c.name, k);
    }
    if (!columns.empty()) columns += ", ";
    columns += duck::QuoteLiteral(name) + ": " + duck::QuoteLiteral(DuckTypeOf(c));
  }
  const std::string sql = fmt::format(
      "COPY (SELECT * FROM read_csv({}, header = true, columns = {{{}}}, nullstr = '', "
      "allow_quoted_nulls = false, quote = '\"', escape = '\"', auto_detect = false)) TO {} "
      "(FORMAT parquet)",
      duck::QuoteLiteral(csv.path), columns, duck::QuoteLiteral(out));
  return conn->Execute(sql);
}

// A file's bytes, streamed in pieces, then the file's directory removed.
// `cut`: where the result was cut ("max_rows", "bytes"), said in X-Sluice-Truncated.
HttpResponse FileResponse(std::shared_ptr<TempDir> dir, const std::string& path,
                          std::string content_type, std::string filename, const std::string& cut) {
  HttpResponse r;
  r.content_type = std::move(content_type);
  if (!cut.empty()) r.headers.emplace_back("X-Sluice-Truncated", cut);
  r.headers.emplace_back("Content-Disposition",
                         fmt::format("attachment; filename=\"{}\"", filename));
  r.headers.emplace_back("Cache-Control", "no-store");
  r.stream = [dir, path](HttpStream& out) {
    std::ifstream in(path, std::ios::binary);
    std::string chunk(256 * 1024, '\0');
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const auto n = static_cast<size_t>(in.gcount());
      if (n == 0 || !out.Write(std::string_view(chunk.data(), n))) return;
    }
  };
  return r;
}

}  // namespace

HttpResponse ConsoleApi::Sql(const HttpRequest& req, const std::vector<std::string>& path) {
  if (!options_.query_server_enabled) {
    return ErrorResponse(404, "SQL_OFF",
                         "the query server is off here (query.pg_addr: off), so no SQL runs");
  }
  if (!options_.sql_user) return ErrorResponse(403, "SQL_NEEDS_LOGIN", "no user to run SQL as");
  Result<std::string> user = options_.sql_user(req.principal);
  if (!user.ok()) return ErrorResponse(403, "SQL_NEEDS_LOGIN", user.status().message());
  query::QueryServer* server = query_server_.load();
  if (server == nullptr) {
    // The HTTP port serves before the query server has started, and after it stopped.
    HttpResponse r = ErrorResponse(503, "SQL_UNAVAILABLE",
                                   "the query server is starting or stopping; try again");
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  if (path.size() == 1) {
    if (req.method != "POST") return MethodNotAllowed(req);
    return RunSql(req, *server, *user);
  }
  if (path.size() != 2) return ErrorResponse(404, "NOT_FOUND", "no such API: " + req.path);
  if (path[1] == "download") {
    if (req.method != "POST") return MethodNotAllowed(req);
    return DownloadSql(req, *server, *user);
  }
  if (path[1] == "schema") {
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed(req);
    return SqlSchema(*server, *user);
  }
  if (req.method != "DELETE") return MethodNotAllowed(req);
  std::shared_ptr<LocalSession> session;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = running_.find(path[1]);
    // Another login's query is not this one's to see or cancel.
    if (it != running_.end() && it->second.principal == req.principal) {
      session = it->second.session.lock();
    }
  }
  if (session == nullptr) {
    return ErrorResponse(404, "NOT_FOUND", fmt::format("no query {} is running", path[1]));
  }
  session->Cancel();
  return NoContent();
}

HttpResponse ConsoleApi::RunSql(const HttpRequest& req, query::QueryServer& server,
                                const std::string& user) {
  Result<SqlBody> body = ReadSqlBody(req, /*download=*/false);
  if (!body.ok()) return BadRequest(body.status().message());
  if (queries_.fetch_add(1) >= kMaxQueries) {
    queries_.fetch_sub(1);
    HttpResponse r =
        ErrorResponse(429, "TOO_MANY_QUERIES",
                      fmt::format("at most {} queries at once; wait for one", kMaxQueries));
    r.headers.emplace_back("Retry-After", "2");
    return r;
  }
  // The count and the id are given back when the stream ends, or if it never starts. Made
  // in place: a copy's destructor would give the count back twice.
  struct Running {
    Running(ConsoleApi* a, std::string i) : api(a), id(std::move(i)) {}
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;
    ConsoleApi* api;
    std::string id;
    ~Running() {
      api->queries_.fetch_sub(1);
      std::lock_guard<std::mutex> lock(api->mu_);
      api->running_.erase(id);
    }
  };
  auto running = std::make_shared<Running>(this, NewQueryId());
  Result<std::unique_ptr<LocalSession>> opened =
      LocalSession::Open(server, user, "", "sluice console");
  if (!opened.ok()) return SessionUnavailable(opened.status());
  std::shared_ptr<LocalSession> session(std::move(*opened));
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_[running->id] = RunningQuery{req.principal, session};
  }
  HttpResponse r;
  r.content_type = "application/x-ndjson";
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("X-Accel-Buffering", "no");
  r.stream = [running, session, sql = std::move(body->sql),
              max_rows = body->max_rows](HttpStream& out) {
    const auto started = SteadyClock::now();
    std::string buf;
    buf += Json{{"query_id", running->id}}.dump() + "\n";
    bool gone = !out.Write(buf);
    buf.clear();
    if (gone) return;
    std::vector<JsonNumbers> numbers_of;
    int64_t rows = 0;    // of the current result
    size_t batched = 0;  // rows in the open rows line
    auto last_sent = SteadyClock::now();
    auto close_batch = [&] {
      if (batched == 0) return;
      buf += "]}\n";
      batched = 0;
    };
    auto send = [&] {
      close_batch();
      if (buf.empty()) return true;
      gone = gone || !out.Write(buf);
      buf.clear();
      last_sent = SteadyClock::now();
      return !gone;
    };
    LocalHandler h;
    h.on_columns = [&](const std::vector<LocalColumn>& columns) {
      close_batch();
      buf += Json{{"columns", ColumnsJson(columns)}}.dump() + "\n";
      numbers_of.clear();
      for (const LocalColumn& c : columns) numbers_of.push_back(NumbersOf(c));
      rows = 0;
      send();
    };
    h.on_row = [&](const CellValues& values) {
      if (rows >= max_rows) {
        // Cut here: said now, since the cut statement's own tag never comes.
        close_batch();
        buf +=
            Json{{"complete",
                  {{"tag", fmt::format("SELECT {}", rows)}, {"rows", rows}, {"truncated", true}}}}
                .dump() +
            "\n";
        rows = 0;
        send();
        return false;
      }
      buf += batched == 0 ? "{\"rows\":[" : ",";
      buf.push_back('[');
      for (size_t i = 0; i < values.size(); ++i) {
        if (i > 0) buf.push_back(',');
        AppendJsonValue(buf, values[i],
                        i < numbers_of.size() ? numbers_of[i] : JsonNumbers::kNever);
      }
      buf.push_back(']');
      ++batched;
      ++rows;
      if (batched >= kBatchRows || buf.size() >= kBatchBytes ||
          SteadyClock::now() - last_sent >= kBatchEvery) {
        return send();
      }
      return true;
    };
    h.on_complete = [&](std::string_view tag) {
      close_batch();
      buf += Json{{"complete", {{"tag", tag}, {"rows", rows}, {"truncated", false}}}}.dump() + "\n";
      rows = 0;  // a statement without rows (INSERT, CREATE) counts none
    };
    // Every second without a row: what is held goes out, or a blank line (the page skips
    // it), so that a client that left is found by the write and its query cancelled.
    h.idle_ms = 1000;
    h.on_idle = [&] {
      if (batched == 0 && buf.empty()) buf = "\n";
      return send();
    };
    h.on_notice = [&](std::string_view message) {
      close_batch();
      buf += Json{{"notice", message}}.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
    };
    Result<LocalOutcome> outcome = session->Run(sql, h);
    if (gone) return;  // the page left: its query was cancelled by the stop
    close_batch();
    if (outcome.ok() && outcome->rest_not_run) {
      buf += Json{{"notice",
                   "the query stopped where its result was cut at max_rows: statements after "
                   "it, if any, did not run"}}
                 .dump() +
             "\n";
    }
    if (!outcome.ok()) {
      buf +=
          Json{{"error", {{"sqlstate", "08006"}, {"message", outcome.status().message()}}}}.dump() +
          "\n";
    } else if (!outcome->ok) {
      buf += Json{{"error", SqlErrorJson(*outcome)}}.dump(-1, ' ', false,
                                                          Json::error_handler_t::replace) +
             "\n";
    } else {
      buf += Json{{"done",
                   {{"elapsed_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                       SteadyClock::now() - started)
                                       .count()}}}}
                 .dump() +
             "\n";
    }
    send();
  };
  return r;
}

HttpResponse ConsoleApi::DownloadSql(const HttpRequest& req, query::QueryServer& server,
                                     const std::string& user) {
  Result<SqlBody> body = ReadSqlBody(req, /*download=*/true);
  if (!body.ok()) return BadRequest(body.status().message());
  // A download holds an HTTP thread while its query runs, as a stream does: one of the
  // same kMaxQueries.
  if (queries_.fetch_add(1) >= kMaxQueries) {
    queries_.fetch_sub(1);
    return ErrorResponse(429, "TOO_MANY_QUERIES",
                         fmt::format("at most {} queries at once; wait for one", kMaxQueries));
  }
  struct Counted {
    std::atomic<int>& n;
    ~Counted() { n.fetch_sub(1); }
  } counted{queries_};
  Result<std::unique_ptr<LocalSession>> opened =
      LocalSession::Open(server, user, "", "sluice console");
  if (!opened.ok()) return SessionUnavailable(opened.status());
  std::shared_ptr<LocalSession> session(std::move(*opened));
  // With the page's id, DELETE /sql/{id} cancels it as it does a stream (while the query
  // runs: once it is sent, the page's abort ends it).
  struct Registered {
    ConsoleApi* api;
    std::string id;
    ~Registered() {
      if (id.empty()) return;
      std::lock_guard<std::mutex> lock(api->mu_);
      api->running_.erase(id);
    }
  } registered{this, ""};
  if (!body->query_id.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (running_.count(body->query_id) > 0) {
      return ErrorResponse(409, "QUERY_ID_IN_USE",
                           fmt::format("a query {} runs already", body->query_id));
    }
    running_[body->query_id] = RunningQuery{req.principal, session};
    registered.id = body->query_id;
  }
  auto dir = std::make_shared<TempDir>();
  if (dir->path.empty())
    return ErrorResponse(500, "IO_ERROR", "no temporary directory for the file");
  CsvFile csv;
  csv.path = dir->path + "/result.csv";
  LocalHandler h;
  h.on_columns = [&](const std::vector<LocalColumn>& columns) { csv.Start(columns); };
  h.on_row = [&](const CellValues& values) {
    if (csv.rows >= body->max_rows || csv.bytes >= kMaxDownloadBytes) {
      csv.cut = csv.rows >= body->max_rows ? "max_rows" : "bytes";
      return false;
    }
    csv.Row(values);
    return !csv.failed;
  };
  Result<LocalOutcome> outcome = session->Run(body->sql, h);
  if (!outcome.ok()) return SessionUnavailable(outcome.status());
  if (!outcome->ok && !outcome->stopped) {
    Json e = SqlErrorJson(*outcome);
    e["code"] = "SQL_ERROR";
    return JsonResponse(400, Json{{"error", std::move(e)}});
  }
  if (!csv.Close()) return ErrorResponse(500, "IO_ERROR", "writing the result's file failed");
  if (csv.columns.empty()) return BadRequest("the query returned no rows to download");
  if (body->format == "csv") {
    return FileResponse(dir, csv.path, "text/csv; charset=utf-8", "result.csv", csv.cut);
  }
  const std::string parquet = dir->path + "/result.parquet";
  if (Status st = CsvToParquet(csv, dir->path, parquet); !st.ok()) {
    return ErrorResponse(500, "PARQUET_FAILED",
                         fmt::format("writing the result as Parquet: {}", st.message()));
  }
  return FileResponse(dir, parquet, "application/vnd.apache.parquet", "result.parquet", csv.cut);
}

HttpResponse ConsoleApi::SqlSchema(query::QueryServer& server, const std::string& user) {
  Result<std::unique_ptr<LocalSession>> session =
      LocalSession::Open(server, user, "", "sluice console");
  if (!session.ok()) return SessionUnavailable(session.status());
  // The catalog as psql's \d reads it: the query server's emulation lists its lake tables
  // and topics there too.
  constexpr std::string_view kCatalog =
      "SELECT n.nspname, c.relname, c.relkind, a.attname, "
      "pg_catalog.format_type(a.atttypid, a.atttypmod) "
      "FROM pg_catalog.pg_class c "
      "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
      "LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 "
      "WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') "
      "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
      "ORDER BY 1, 2, a.attnum";
  Json relations = Json::array();
  std::string last_key;
  LocalHandler h;
  h.on_row = [&](const CellValues& v) {
    if (v.size() < 5 || !v[0] || !v[1]) return true;
    const std::string schema(*v[0]), name(*v[1]);
    const std::string key = schema + '\0' + name;
    if (key != last_key) {
      last_key = key;
      const char kind = v[2] && !v[2]->empty() ? v[2]->front() : 'r';
      const bool lake = schema == "lake" || schema.starts_with("lake.");
      // As SQL must write it: a schema of the lake is "lake.<namespace>" (its parts
      // written apart), and a name that is not a plain lower-case identifier is quoted
      // (a topic "page-views": kafka."page-views").
      std::string sql_name;
      if (schema != "main" && schema != "public") {
        size_t start = 0;
        while (true) {
          const size_t dot = lake ? schema.find('.', start) : std::string::npos;
          sql_name += SqlIdentifier(schema.substr(start, dot - start)) + ".";
          if (dot == std::string::npos) break;
          start = dot + 1;
        }
      }
      sql_name += SqlIdentifier(name);
      relations.push_back(Json{{"schema", schema},
                               {"name", name},
                               {"sql_name", sql_name},
                               {"kind", lake                ? "lake"
                                        : schema == "kafka" ? "topic"
                                        : kind == 'v'       ? "view"
                                                            : "table"},
                               {"columns", Json::array()}});
    }
    if (v[3]) {
      relations.back()["columns"].push_back(
          Json{{"name", std::string(*v[3])}, {"type", v[4] ? std::string(*v[4]) : ""}});
    }
    return true;
  };
  Result<LocalOutcome> outcome = (*session)->Run(kCatalog, h);
  if (!outcome.ok()) return SessionUnavailable(outcome.status());
  if (!outcome->ok) {
    return ErrorResponse(
        500, "SQL_ERROR",
        fmt::format("reading the catalog: {} ({})", outcome->message, outcome->sqlstate));
  }
  return JsonResponse(200, Json{{"relations", std::move(relations)}});
}

}  // namespace sluice::console
