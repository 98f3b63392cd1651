#include "sinks/postgres_sink.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include "base/background.h"
#include "base/logging.h"
#include "base/strings.h"
#include "sinks/loggers.h"
#include "sinks/pg_copy_binary.h"

namespace sluice::sinks {

namespace {

constexpr std::string_view kStage = "pg_temp.sluice_stage";
constexpr std::string_view kSeq = "__sluice_seq";

std::string QuotePg(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

// libpq's messages end in a newline.
std::string TrimmedRight(std::string_view s) { return std::string(TrimRight(s)); }

struct ResultCloser {
  void operator()(PGresult* r) const { PQclear(r); }
};
using ResultPtr = std::unique_ptr<PGresult, ResultCloser>;

// DuckDB's type (DESCRIBE's spelling) -> the Postgres column type a new table gets.
std::string PgTypeFor(std::string_view duck) {
  auto starts = [&](std::string_view p) { return duck.substr(0, p.size()) == p; };
  if (starts("STRUCT") || starts("MAP") || starts("UNION") || duck.ends_with("]")) {
    return "jsonb";
  }
  if (starts("DECIMAL")) return "numeric" + std::string(duck.substr(7));  // "(p,s)"
  static const std::map<std::string_view, std::string_view> kTypes = {
      {"BOOLEAN", "boolean"},
      {"TINYINT", "smallint"},
      {"UTINYINT", "smallint"},
      {"SMALLINT", "smallint"},
      {"USMALLINT", "integer"},
      {"INTEGER", "integer"},
      {"UINTEGER", "bigint"},
      {"BIGINT", "bigint"},
      {"UBIGINT", "numeric"},
      {"HUGEINT", "numeric"},
      {"UHUGEINT", "numeric"},
      {"BIGNUM", "numeric"},
      {"VARINT", "numeric"},
      {"FLOAT", "real"},
      {"DOUBLE", "double precision"},
      {"VARCHAR", "text"},
      {"BLOB", "bytea"},
      {"DATE", "date"},
      {"TIME", "time"},
      {"TIME WITH TIME ZONE", "timetz"},
      {"TIMESTAMP", "timestamp"},
      {"TIMESTAMP_S", "timestamp"},
      {"TIMESTAMP_MS", "timestamp"},
      {"TIMESTAMP_NS", "timestamp"},
      {"TIMESTAMP WITH TIME ZONE", "timestamptz"},
      {"INTERVAL", "interval"},
      {"UUID", "uuid"},
      {"JSON", "jsonb"},
  };
  auto it = kTypes.find(duck);
  return it != kTypes.end() ? std::string(it->second) : "text";  // ENUM, BIT, ...: text
}

bool IsNestedDuckType(std::string_view duck) {
  return duck.starts_with("STRUCT") || duck.starts_with("MAP") || duck.starts_with("UNION") ||
         duck.ends_with("]");
}

// Types whose DuckDB text Postgres' numeric input takes as is (all the digits kept).
bool KeepsItsDigitsAsText(std::string_view duck) {
  static const std::set<std::string_view> kNumeric = {
      "TINYINT",  "SMALLINT", "INTEGER",  "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
      "UINTEGER", "UBIGINT",  "UHUGEINT", "BIGNUM", "VARINT",  "VARCHAR"};
  return kNumeric.contains(duck) || duck.starts_with("DECIMAL");
}

// DuckDB SQL escaping a VARCHAR expression for COPY's text format.
std::string CopyEscape(const std::string& expr) {
  return fmt::format(
      "replace(replace(replace(replace({}, '\\', '\\\\'), chr(10), '\\n'), chr(13), '\\r'), "
      "chr(9), '\\t')",
      expr);
}

}  // namespace

// How one target column is filled from DuckDB: `duck_type` for a TRY_CAST, or a special
// rendering (`kind`). The text sent is what Postgres' input function accepts for it.
struct PostgresSink::PgColumn {
  enum class Kind {
    kCast,         // TRY_CAST to duck_type, then DuckDB's text of it
    kText,         // text (varchar(n): also length-checked)
    kBytea,        // TRY_CAST to BLOB, sent as \x<hex>
    kJson,         // json/jsonb: to_json of the value; a VARCHAR must already be JSON
    kNumericText,  // unconstrained numeric: checked as DOUBLE, sent with all its digits
    kPassThrough,  // a type sluice does not know (arrays, enums, domains): DuckDB's text,
                   // checked by Postgres (a value it refuses fails the whole Write)
  };
  // How its values go in COPY's binary format (pg_copy_binary.h), read from DuckDB as the
  // type the comment names; kNone: only in the text format (a batch with such a column is
  // copied as text).
  enum class Binary {
    kNone,
    kBool,       // BOOLEAN
    kInt2,       // SMALLINT, read as INTEGER
    kInt4,       // INTEGER
    kInt8,       // BIGINT
    kFloat4,     // FLOAT
    kFloat8,     // DOUBLE
    kDate,       // DATE
    kTimestamp,  // TIMESTAMP or TIMESTAMPTZ
    kUuid,       // UUID
    kNumeric,    // DECIMAL(p,s), read as its text
    kBytes,      // text, varchar, char(n), json: VARCHAR; bytea: BLOB
    kJsonb,      // VARCHAR
  };
  std::string name;
  std::string pg_type;  // format_type(): "character varying(10)", "numeric(10,2)"
  Kind kind = Kind::kPassThrough;
  Binary binary = Binary::kNone;
  std::string duck_type;
  int64_t max_chars = -1;  // varchar(n) / char(n)
};

void PostgresSink::ConnCloser::operator()(pg_conn* c) const { PQfinish(c); }

Result<std::unique_ptr<PostgresSink>> PostgresSink::Create(PostgresSinkOptions options) {
  if (options.dsn.empty()) return InvalidArgumentError("postgres sink: dsn is empty");
  if (options.table.empty()) return InvalidArgumentError("postgres sink: table is empty");
  if (options.commit_interval_ms < 0 ||
      (options.commit_interval_ms > 0 && options.mode == PostgresSinkOptions::Mode::kUpsert)) {
    return InvalidArgumentError(
        "postgres sink (table {}): commit_interval_ms is for mode append, at least 0",
        options.table);
  }
  if (options.mode == PostgresSinkOptions::Mode::kUpsert && options.key.empty()) {
    return InvalidArgumentError("postgres sink (table {}): mode upsert needs key columns",
                                options.table);
  }
  for (const std::string& k : options.key) {
    if (k.empty()) return InvalidArgumentError("postgres sink: an empty key column name");
  }
  char* err = nullptr;
  PQconninfoOption* info = PQconninfoParse(options.dsn.c_str(), &err);
  if (info == nullptr) {
    std::string msg = err != nullptr ? TrimmedRight(err) : "out of memory";
    PQfreemem(err);
    return InvalidArgumentError("postgres sink: malformed dsn: {}", msg);
  }
  std::map<std::string, std::string> kv;
  for (PQconninfoOption* o = info; o->keyword != nullptr; ++o) {
    if (o->val != nullptr && *o->val != '\0') kv[o->keyword] = o->val;
  }
  PQconninfoFree(info);
  std::string host = kv.contains("host")       ? kv["host"]
                     : kv.contains("hostaddr") ? kv["hostaddr"]
                                               : "localhost";
  std::string server = fmt::format("{}:{}/{}", host, kv.contains("port") ? kv["port"] : "5432",
                                   kv.contains("dbname") ? kv["dbname"] : "(default database)");
  return std::unique_ptr<PostgresSink>(new PostgresSink(std::move(options), std::move(server)));
}

PostgresSink::PostgresSink(PostgresSinkOptions options, std::string server)
    : options_(std::move(options)), server_(std::move(server)) {
  size_t dot = options_.table.find('.');
  qualified_ = dot == std::string::npos ? QuotePg(options_.table)
                                        : QuotePg(options_.table.substr(0, dot)) + "." +
                                              QuotePg(options_.table.substr(dot + 1));
}

PostgresSink::~PostgresSink() {
  if (sender_ != nullptr) sender_->Wait();  // before the connection it uses goes
}

std::string PostgresSink::Describe() const {
  return fmt::format("postgres table {} at {}", options_.table, server_);
}

std::vector<std::string> PostgresSink::FixedColumns() const {
  std::vector<std::string> out;
  for (const PgColumn& c : columns_) out.push_back(c.name + " " + c.pg_type);
  return out;
}

Status PostgresSink::Error(std::string_view what, std::string_view detail) const {
  return IOError("postgres sink (table {} at {}): {}: {}", options_.table, server_, what, detail);
}

Status PostgresSink::Connect() {
  // Ours first: a dsn that sets the same keyword overrides them (expand_dbname). TCP
  // keepalives find a half-open idle connection within about a minute and a half, and
  // tcp_user_timeout one whose sent rows go unacknowledged for five minutes (a server
  // gone without a FIN); libpq's blocking calls would otherwise wait on it for as long as
  // the kernel's retransmissions last (about fifteen minutes).
  const char* keys[] = {"connect_timeout",
                        "application_name",
                        "keepalives",
                        "keepalives_idle",
                        "keepalives_interval",
                        "keepalives_count",
                        "tcp_user_timeout",
                        "dbname",
                        nullptr};
  const char* values[] = {"10",   "sluice", "1", "30", "10", "6", "300000", options_.dsn.c_str(),
                          nullptr};
  pg_.reset(PQconnectdbParams(keys, values, 1));
  if (pg_ == nullptr) return Error("cannot connect", "out of memory");
  if (PQstatus(pg_.get()) != CONNECTION_OK) {
    Status st = Error("cannot connect", TrimmedRight(PQerrorMessage(pg_.get())));
    pg_.reset();
    return st;
  }
  if (PQsetClientEncoding(pg_.get(), "UTF8") != 0) {
    Status st =
        Error("cannot set client_encoding to UTF8", TrimmedRight(PQerrorMessage(pg_.get())));
    pg_.reset();
    return st;
  }
  stage_ready_ = false;
  return Status::OK();
}

void PostgresSink::Disconnect(const Status& cause) {
  if (in_txn_ && pending_rows_ > 0 && !lost_.has_value()) {
    lost_ = IOError(
        "postgres sink (table {} at {}): {} rows written since the last flush were not "
        "committed (the connection was lost): {}",
        options_.table, server_, pending_rows_, cause.message());
  }
  pg_.reset();
  in_txn_ = false;
  pending_rows_ = 0;
  stage_ready_ = false;
  copy_.open = false;
}

Status PostgresSink::Exec(const std::string& sql) {
  if (pg_ == nullptr) RETURN_IF_ERROR(Connect());
  ResultPtr r(PQexec(pg_.get(), sql.c_str()));
  ExecStatusType st = r != nullptr ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Status::OK();
  std::string msg =
      TrimmedRight(r != nullptr ? PQresultErrorMessage(r.get()) : PQerrorMessage(pg_.get()));
  if (msg.empty()) msg = TrimmedRight(PQerrorMessage(pg_.get()));
  std::string first_word = sql.substr(0, sql.find(' '));
  if (PQstatus(pg_.get()) == CONNECTION_BAD) {
    Status error = Error("connection lost", msg);
    Disconnect(error);
    return error;
  }
  return Error(first_word, msg);
}

Status PostgresSink::ExecIdle(const std::string& sql) {
  const bool had_connection = pg_ != nullptr;
  Status st = Exec(sql);
  if (!st.ok() && had_connection && pg_ == nullptr && !in_txn_) {
    // The idle connection had broken (a server restart between batches): once more on a
    // fresh one. Nothing was pending, so nothing was lost.
    st = Exec(sql);
  }
  return st;
}

Status PostgresSink::ReadColumns(std::vector<PgColumn>* out) {
  out->clear();
  if (pg_ == nullptr) RETURN_IF_ERROR(Connect());
  const char* sql =
      "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), t.typname, "
      "a.atttypmod FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = "
      "a.atttypid WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped "
      "ORDER BY a.attnum";
  const char* params[] = {qualified_.c_str()};
  ResultPtr r(PQexecParams(pg_.get(), sql, 1, nullptr, params, nullptr, nullptr, 0));
  if (r == nullptr || PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    std::string msg =
        TrimmedRight(r != nullptr ? PQresultErrorMessage(r.get()) : PQerrorMessage(pg_.get()));
    Status st = Error("reading the table's columns", msg);
    if (PQstatus(pg_.get()) == CONNECTION_BAD) Disconnect(st);
    return st;
  }
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    PgColumn c;
    c.name = PQgetvalue(r.get(), i, 0);
    c.pg_type = PQgetvalue(r.get(), i, 1);
    std::string typname = PQgetvalue(r.get(), i, 2);
    const int64_t typmod = std::strtoll(PQgetvalue(r.get(), i, 3), nullptr, 10);
    using K = PgColumn::Kind;
    static const std::map<std::string_view, std::string_view> kCasts = {
        {"bool", "BOOLEAN"},
        {"int2", "SMALLINT"},
        {"int4", "INTEGER"},
        {"int8", "BIGINT"},
        {"float4", "FLOAT"},
        {"float8", "DOUBLE"},
        {"date", "DATE"},
        {"time", "TIME"},
        {"timetz", "TIMETZ"},
        {"timestamp", "TIMESTAMP"},
        {"timestamptz", "TIMESTAMPTZ"},
        {"interval", "INTERVAL"},
        {"uuid", "UUID"},
    };
    if (auto it = kCasts.find(typname); it != kCasts.end()) {
      c.kind = K::kCast;
      c.duck_type = it->second;
    } else if (typname == "numeric") {
      const int64_t precision = typmod >= 4 ? ((typmod - 4) >> 16) & 0xffff : -1;
      const int64_t scale = typmod >= 4 ? (typmod - 4) & 0xffff : -1;
      if (precision > 0 && precision <= 38 && scale <= precision) {
        c.kind = K::kCast;
        c.duck_type = fmt::format("DECIMAL({},{})", precision, scale);
      } else {
        c.kind = K::kNumericText;
      }
    } else if (typname == "text" || typname == "varchar" || typname == "bpchar" ||
               typname == "name" || typname == "citext") {
      c.kind = K::kText;
      if ((typname == "varchar" || typname == "bpchar") && typmod >= 4) c.max_chars = typmod - 4;
    } else if (typname == "bytea") {
      c.kind = K::kBytea;
    } else if (typname == "json" || typname == "jsonb") {
      c.kind = K::kJson;
    } else {
      c.kind = K::kPassThrough;
    }
    // name and citext are left to the text format: name's binary input refuses what its
    // text input truncates, and citext is an extension's.
    using B = PgColumn::Binary;
    static const std::map<std::string_view, B> kBinary = {
        {"bool", B::kBool},    {"int2", B::kInt2},           {"int4", B::kInt4},
        {"int8", B::kInt8},    {"float4", B::kFloat4},       {"float8", B::kFloat8},
        {"date", B::kDate},    {"timestamp", B::kTimestamp}, {"timestamptz", B::kTimestamp},
        {"uuid", B::kUuid},    {"text", B::kBytes},          {"varchar", B::kBytes},
        {"bpchar", B::kBytes}, {"bytea", B::kBytes},         {"json", B::kBytes},
        {"jsonb", B::kJsonb},
    };
    if (auto it = kBinary.find(typname); it != kBinary.end()) {
      c.binary = it->second;
    } else if (typname == "numeric" && c.kind == K::kCast) {
      c.binary = B::kNumeric;  // DECIMAL(p,s); an unconstrained numeric keeps the text
    }
    out->push_back(std::move(c));
  }
  return Status::OK();
}

Status PostgresSink::FixSchema(const std::vector<DuckColumn>& batch) {
  std::vector<PgColumn> columns;
  RETURN_IF_ERROR(ReadColumns(&columns));
  if (columns.empty()) {
    if (batch.empty()) return Error("creating the table", "the batch has no columns");
    std::vector<std::string> defs;
    for (const DuckColumn& c : batch) defs.push_back(QuotePg(c.name) + " " + PgTypeFor(c.type));
    if (options_.mode == PostgresSinkOptions::Mode::kUpsert) {
      std::vector<std::string> keys;
      for (const std::string& k : options_.key) keys.push_back(QuotePg(k));
      defs.push_back(fmt::format("PRIMARY KEY ({})", fmt::join(keys, ", ")));
    }
    RETURN_IF_ERROR(ExecIdle(
        fmt::format("CREATE TABLE IF NOT EXISTS {} ({})", qualified_, fmt::join(defs, ", "))));
    SLUICE_LOG(kLog, kInfo, "postgres sink: created table {} at {} ({})", options_.table, server_,
               fmt::join(defs, ", "));
    RETURN_IF_ERROR(ReadColumns(&columns));
    if (columns.empty()) return Error("creating the table", "it has no columns after CREATE");
  }
  for (const std::string& k : options_.key) {
    if (std::none_of(columns.begin(), columns.end(),
                     [&](const PgColumn& c) { return c.name == k; })) {
      return Error("key column", fmt::format("\"{}\" is not a column of the table", k));
    }
  }
  columns_ = std::move(columns);
  schema_fixed_ = true;
  return Status::OK();
}

Status PostgresSink::EnsureStage() {
  if (stage_ready_) return Status::OK();
  // Every target column, without constraints, plus the arrival order (the last row of a
  // key in a batch wins the upsert).
  std::vector<std::string> defs;
  for (const PgColumn& c : columns_) defs.push_back(QuotePg(c.name) + " " + c.pg_type);
  defs.push_back(std::string(kSeq) + " bigserial");
  RETURN_IF_ERROR(
      Exec(fmt::format("CREATE TEMP TABLE IF NOT EXISTS {} ({})", kStage, fmt::join(defs, ", "))));
  stage_ready_ = true;
  return Status::OK();
}

namespace {

// One row of Write's query (the values from column 1 on) in COPY's binary format.
void AppendBinaryRow(const duck::ResultChunk& c, size_t row,
                     const std::vector<const PostgresSink::PgColumn*>& columns, std::string* out) {
  using B = PostgresSink::PgColumn::Binary;
  pgcopy::AppendFieldCount(out, static_cast<int16_t>(columns.size()));
  for (size_t i = 0; i < columns.size(); ++i) {
    const size_t col = i + 1;
    if (c.IsNull(col, row)) {
      pgcopy::AppendNull(out);
      continue;
    }
    switch (columns[i]->binary) {
      case B::kBool:
        pgcopy::AppendBool(out, c.GetBool(col, row));
        break;
      case B::kInt2:
        pgcopy::AppendInt2(out, static_cast<int16_t>(c.GetInt32(col, row)));
        break;
      case B::kInt4:
        pgcopy::AppendInt4(out, c.GetInt32(col, row));
        break;
      case B::kInt8:
        pgcopy::AppendInt8(out, c.GetInt64(col, row));
        break;
      case B::kFloat4:
        pgcopy::AppendFloat4(out, c.GetFloat(col, row));
        break;
      case B::kFloat8:
        pgcopy::AppendFloat8(out, c.GetDouble(col, row));
        break;
      case B::kDate:
        pgcopy::AppendDate(out, c.GetDate(col, row));
        break;
      case B::kTimestamp:
        pgcopy::AppendTimestamp(out, c.GetTimestamp(col, row));
        break;
      case B::kUuid: {
        uint8_t bytes[16];
        c.GetUuid(col, row, bytes);
        pgcopy::AppendUuid(out, bytes);
        break;
      }
      case B::kNumeric:
        // DuckDB prints a DECIMAL as plain digits; anything else would be a DuckDB change,
        // which PostgreSQL's check of the value then reports.
        if (!pgcopy::AppendNumeric(out, c.GetString(col, row))) {
          pgcopy::AppendBytes(out, c.GetString(col, row));
        }
        break;
      case B::kBytes:
        pgcopy::AppendBytes(out, c.GetString(col, row));
        break;
      case B::kJsonb:
        pgcopy::AppendJsonb(out, c.GetString(col, row));
        break;
      case B::kNone:
        SLUICE_ASSERT(false);
    }
  }
}

// `value` (of DuckDB type `duck_type`) or NULL where PostgreSQL's type holds no such value:
// DuckDB's dates reach past PostgreSQL's (4714-11-24 BC to 5874897 AD) and its timestamps
// start long before PostgreSQL's (4714-11-24 BC). Refused here, such a row goes to on_error
// as a cast failure; sent, PostgreSQL would refuse the whole COPY (and a streamed COPY at
// its commit, batch after batch).
std::string InPostgresRange(const std::string& value, std::string_view duck_type) {
  if (duck_type == "DATE") {
    return fmt::format(
        "CASE WHEN isinf({0}) OR {0} BETWEEN DATE '4714-11-24 (BC)' AND DATE '5874897-12-31' "
        "THEN {0} END",
        value);
  }
  if (duck_type == "TIMESTAMP" || duck_type == "TIMESTAMPTZ") {
    // -210866803200000000: 4714-11-24 00:00:00 BC (UTC) in microseconds since 1970.
    return fmt::format("CASE WHEN isinf({0}) OR epoch_us({0}) >= -210866803200000000 THEN {0} END",
                       value);
  }
  return value;
}

}  // namespace

Status PostgresSink::StartCopy(const std::string& target,
                               const std::vector<const PgColumn*>& columns, bool binary) {
  std::vector<std::string> names;
  for (const PgColumn* c : columns) names.push_back(QuotePg(c->name));
  const std::string sql = fmt::format("COPY {} ({}) FROM STDIN{}", target, fmt::join(names, ", "),
                                      binary ? " (FORMAT binary)" : "");
  ResultPtr r(PQexec(pg_.get(), sql.c_str()));
  if (r == nullptr || PQresultStatus(r.get()) != PGRES_COPY_IN) {
    std::string msg =
        TrimmedRight(r != nullptr ? PQresultErrorMessage(r.get()) : PQerrorMessage(pg_.get()));
    Status st = Error("COPY", msg);
    if (PQstatus(pg_.get()) == CONNECTION_BAD) Disconnect(st);
    return st;
  }
  copy_.open = true;
  copy_.binary = binary;
  copy_.columns = std::move(names);
  copy_.send_error = nullptr;
  if (binary) {
    std::string header;
    pgcopy::AppendHeader(&header);
    Send(header);
  }
  return Status::OK();
}

void PostgresSink::Send(std::string_view data) {
  if (!data.empty() && copy_.send_error == nullptr &&
      PQputCopyData(pg_.get(), data.data(), static_cast<int>(data.size())) != 1) {
    copy_.send_error = "sending rows";
  }
}

void PostgresSink::SendRows(const std::vector<const PgColumn*>& columns, duck::QueryResult& rows) {
  constexpr size_t kReasonCol = 0;
  constexpr size_t kLineCol = 1;  // text: the row's line; binary: its first value
  std::string buffer;
  constexpr size_t kChunk = 256 << 10;
  for (size_t i = 0; i < rows.chunk_count() && copy_.send_error == nullptr; ++i) {
    duck::ResultChunk c = rows.chunk(i);
    for (size_t row = 0; row < c.size(); ++row) {
      if (!c.IsNull(kReasonCol, row)) continue;
      if (copy_.binary) {
        AppendBinaryRow(c, row, columns, &buffer);
      } else {
        buffer.append(c.GetString(kLineCol, row));
        buffer.push_back('\n');
      }
      if (buffer.size() >= kChunk) {
        Send(buffer);
        buffer.clear();
      }
    }
  }
  Send(buffer);
}

Status PostgresSink::EndCopy() {
  copy_.open = false;
  const char* send_error = copy_.send_error;
  if (copy_.binary && send_error == nullptr) {
    std::string trailer;
    pgcopy::AppendTrailer(&trailer);
    Send(trailer);
    send_error = copy_.send_error;
  }
  if (PQputCopyEnd(pg_.get(), send_error) != 1 && send_error == nullptr) send_error = "ending COPY";
  // The COPY's outcome, then nothing: libpq wants every result read.
  Status st;
  while (PGresult* raw = PQgetResult(pg_.get())) {
    ResultPtr res(raw);
    if (PQresultStatus(res.get()) == PGRES_COPY_IN) {
      // libpq still waits for data: the end of the COPY never went out. The connection's
      // state is unknown; it is dropped below.
      if (st.ok()) st = Error("COPY", "the end of the data could not be sent");
      PQputCopyEnd(pg_.get(), "sluice: abandoned");
      Status lost = Error("connection dropped", st.message());
      Disconnect(lost);
      return lost;
    }
    if (PQresultStatus(res.get()) != PGRES_COMMAND_OK && st.ok()) {
      std::string msg = TrimmedRight(PQresultErrorMessage(res.get()));
      if (const char* where = PQresultErrorField(res.get(), PG_DIAG_CONTEXT)) {
        msg += fmt::format(" ({})", TrimmedRight(where));
      }
      st = Error("COPY", msg);
    }
  }
  if (st.ok() && send_error != nullptr)
    st = Error(send_error, TrimmedRight(PQerrorMessage(pg_.get())));
  if (!st.ok() && PQstatus(pg_.get()) == CONNECTION_BAD) {
    Status lost = Error("connection lost", st.message());
    Disconnect(lost);
    return lost;
  }
  return st;
}

Status PostgresSink::Copy(const std::string& target, const std::vector<const PgColumn*>& columns,
                          duck::QueryResult& rows, bool binary) {
  RETURN_IF_ERROR(StartCopy(target, columns, binary));
  SendRows(columns, rows);
  return EndCopy();
}

Result<duck::QueryResult> PostgresSink::Cast(duck::Connection& conn, const std::string& sql) {
  // Prepared once per batch shape: parsing, binding and planning the cast query took a
  // tenth of the pipeline's thread at 5,000 rows a batch.
  if (cast_ == nullptr || cast_sql_ != sql || cast_conn_ != &conn) {
    cast_.reset();
    ASSIGN_OR_RETURN(cast_, duck::PreparedStatement::Prepare(conn, sql));
    cast_sql_ = sql;
    cast_conn_ = &conn;
  }
  Result<duck::QueryResult> ran = cast_->Execute();
  if (!ran.ok() && (ran.status().message().find("Binder Error") != std::string::npos ||
                    ran.status().message().find("Catalog Error") != std::string::npos)) {
    // Prepared over a view the pipeline has since made again (a new schema): once more.
    cast_.reset();
    ASSIGN_OR_RETURN(cast_, duck::PreparedStatement::Prepare(conn, sql));
    ran = cast_->Execute();
  }
  return ran;
}

Status PostgresSink::Write(duck::Connection& conn, std::string_view table,
                           const SourceOffsets& offsets, std::vector<RejectedRow>* rejected) {
  ASSIGN_OR_RETURN(std::vector<DuckColumn> batch, DescribeColumns(conn, table));
  if (!schema_fixed_) {
    const bool had_connection = pg_ != nullptr;
    Status st = FixSchema(batch);
    if (!st.ok() && had_connection && pg_ == nullptr && !in_txn_) {
      st = FixSchema(batch);  // the idle connection had broken: once more
    }
    RETURN_IF_ERROR(st);
  }

  // The batch's columns in the table's order; the others are ignored.
  std::map<std::string_view, const DuckColumn*> by_name;
  for (const DuckColumn& c : batch) by_name[c.name] = &c;
  std::vector<const PgColumn*> targets;
  std::vector<const DuckColumn*> sources;
  for (const PgColumn& c : columns_) {
    auto it = by_name.find(c.name);
    if (it == by_name.end()) continue;
    targets.push_back(&c);
    sources.push_back(it->second);
  }
  for (const DuckColumn& c : batch) {
    bool known = std::any_of(columns_.begin(), columns_.end(),
                             [&](const PgColumn& p) { return p.name == c.name; });
    if (!known && warned_extra_.insert(c.name).second) {
      SLUICE_LOG(kLog, kWarn,
                 "postgres sink: column \"{}\" of the batch is not in table {}; "
                 "its values are not written",
                 c.name, options_.table);
    }
  }
  if (targets.empty()) {
    return InvalidArgumentError(
        "postgres sink (table {} at {}): none of the batch's columns is in the table",
        options_.table, server_);
  }
  const bool upsert = options_.mode == PostgresSinkOptions::Mode::kUpsert;
  for (const std::string& k : options_.key) {
    if (!by_name.contains(k)) {
      return InvalidArgumentError(
          "postgres sink (table {} at {}): the batch has no key column \"{}\"", options_.table,
          server_, k);
    }
  }

  // In DuckDB: each value as COPY sends it, and why a row cannot go. The binary format
  // when every column has one (each value read from DuckDB as a typed column and encoded
  // here: PostgreSQL parses no text); the text format otherwise (each row one line built
  // in DuckDB).
  using B = PgColumn::Binary;
  const bool binary = std::all_of(targets.begin(), targets.end(),
                                  [](const PgColumn* t) { return t->binary != B::kNone; });
  if (!logged_format_) {
    logged_format_ = true;
    SLUICE_LOG(kLog, kInfo, "postgres sink: rows go to {} at {} through COPY's {} format",
               options_.table, server_, binary ? "binary" : "text");
  }
  last_copy_binary_ = binary;
  constexpr std::string_view kRow = "__sluice_row";
  std::vector<std::string> l1 = {fmt::format("{0} AS __r", kRow)};
  std::vector<std::string> reasons;
  std::vector<std::string> fields;
  using K = PgColumn::Kind;
  for (size_t i = 0; i < targets.size(); ++i) {
    const PgColumn& t = *targets[i];
    const DuckColumn& s = *sources[i];
    const std::string src = fmt::format("{}.{}", kRow, duck::QuoteIdentifier(s.name));
    const bool nested = IsNestedDuckType(s.type);
    std::string text;
    switch (t.kind) {
      case K::kCast:
        text = fmt::format(
            "CAST({} AS VARCHAR)",
            InPostgresRange(fmt::format("TRY_CAST({} AS {})", src, t.duck_type), t.duck_type));
        break;
      case K::kText:
      case K::kPassThrough:
        text = nested ? fmt::format("to_json({})::VARCHAR", src)
                      : fmt::format("CAST({} AS VARCHAR)", src);
        break;
      case K::kBytea:
        text = fmt::format("'\\x' || lower(hex(TRY_CAST({} AS BLOB)))", src);
        break;
      case K::kJson:
        text = s.type == "VARCHAR" ? fmt::format("CASE WHEN json_valid({0}) THEN {0} END", src)
                                   : fmt::format(
                                         "CASE WHEN json_valid(to_json({0})::VARCHAR) THEN "
                                         "to_json({0})::VARCHAR END",
                                         src);
        break;
      case K::kNumericText:
        text = KeepsItsDigitsAsText(s.type)
                   ? fmt::format(
                         "CASE WHEN TRY_CAST({0} AS DOUBLE) IS NOT NULL THEN "
                         "CAST({0} AS VARCHAR) END",
                         src)
                   : fmt::format("CAST(TRY_CAST({} AS DOUBLE) AS VARCHAR)", src);
        break;
    }
    if (binary) {
      switch (t.binary) {
        case B::kInt2:
          text = fmt::format("CAST(TRY_CAST({} AS SMALLINT) AS INTEGER)", src);
          break;
        case B::kBool:
        case B::kInt4:
        case B::kInt8:
        case B::kFloat4:
        case B::kFloat8:
        case B::kDate:
        case B::kTimestamp:
        case B::kUuid:
          text = InPostgresRange(fmt::format("TRY_CAST({} AS {})", src, t.duck_type), t.duck_type);
          break;
        case B::kBytes:
          if (t.kind == K::kBytea) text = fmt::format("TRY_CAST({} AS BLOB)", src);
          break;
        case B::kNumeric:  // the DECIMAL's text, as above
        case B::kJsonb:
        case B::kNone:
          break;
      }
    }
    l1.push_back(fmt::format("{} AS __s{}", src, i));
    l1.push_back(fmt::format("{} AS __t{}", text, i));
    const std::string col = duck::QuoteLiteral(QuotePg(t.name));
    const bool is_key =
        std::find(options_.key.begin(), options_.key.end(), t.name) != options_.key.end();
    if (upsert && is_key) {
      reasons.push_back(
          fmt::format("WHEN __s{} IS NULL THEN 'key column ' || {} || ' is NULL'", i, col));
    }
    reasons.push_back(fmt::format(
        "WHEN __s{0} IS NOT NULL AND __t{0} IS NULL THEN 'column ' || {1} || ': value ' || "
        "left(CAST(__s{0} AS VARCHAR), 200) || ' is not a valid ' || {2}",
        i, col, duck::QuoteLiteral(t.pg_type)));
    if (t.max_chars >= 0) {
      reasons.push_back(
          fmt::format("WHEN length(__t{0}) > {1} THEN 'column ' || {2} || ': value ' || "
                      "left(__t{0}, 200) || ' is longer than ' || {3}",
                      i, t.max_chars, col, duck::QuoteLiteral(t.pg_type)));
    }
    fields.push_back(binary
                         ? fmt::format("__t{}", i)
                         : fmt::format("COALESCE({}, '\\N')", CopyEscape(fmt::format("__t{}", i))));
  }
  // Columns: the reason (NULL: the row goes), the row's line or its values, the refused
  // row as JSON.
  const std::string sql = fmt::format(
      "SELECT __reason, {}, CASE WHEN __reason IS NOT NULL THEN to_json(__r)::VARCHAR END FROM ("
      "SELECT *, CASE {} END AS __reason FROM (SELECT {} FROM {} AS {}))",
      binary ? fmt::format("{}", fmt::join(fields, ", "))
             : fmt::format("CASE WHEN __reason IS NULL THEN concat_ws(chr(9), {}) END",
                           fmt::join(fields, ", ")),
      fmt::join(reasons, " "), fmt::join(l1, ", "), TableRef(table), kRow);
  const size_t json_col = binary ? 1 + targets.size() : 2;
  auto queried = Cast(conn, sql);
  if (!queried.ok()) {
    return queried.status().WithContext(
        fmt::format("postgres sink (table {}): casting the batch", options_.table));
  }
  duck::QueryResult rows = std::move(queried).value();
  std::vector<RejectedRow> refused;
  uint64_t accepted = 0;
  for (size_t i = 0; i < rows.chunk_count(); ++i) {
    duck::ResultChunk c = rows.chunk(i);
    for (size_t r = 0; r < c.size(); ++r) {
      if (c.IsNull(0, r)) {
        ++accepted;
      } else {
        refused.push_back({std::string(c.GetString(json_col, r)), std::string(c.GetString(0, r))});
      }
    }
  }
  if (accepted == 0) {
    for (RejectedRow& r : refused) rejected->push_back(std::move(r));
    if (Defers()) Stage(offsets);
    return Status::OK();
  }
  if (Defers()) {
    RETURN_IF_ERROR(Stream(targets, std::move(rows), binary, accepted));
    Stage(offsets);
    for (RejectedRow& r : refused) rejected->push_back(std::move(r));
    return Status::OK();
  }

  if (!in_txn_) {
    RETURN_IF_ERROR(ExecIdle("BEGIN"));
    in_txn_ = true;
  }
  RETURN_IF_ERROR(Exec("SAVEPOINT sluice_write"));
  Status st;
  if (upsert) {
    st = EnsureStage();
    if (st.ok()) st = Exec(fmt::format("TRUNCATE {}", kStage));
    if (st.ok()) st = Copy(std::string(kStage), targets, rows, binary);
    if (st.ok()) {
      std::vector<std::string> cols, keys, sets;
      for (const PgColumn* t : targets) {
        cols.push_back(QuotePg(t->name));
        if (std::find(options_.key.begin(), options_.key.end(), t->name) == options_.key.end()) {
          sets.push_back(fmt::format("{0} = EXCLUDED.{0}", QuotePg(t->name)));
        }
      }
      for (const std::string& k : options_.key) keys.push_back(QuotePg(k));
      st = Exec(fmt::format(
          "INSERT INTO {0} ({1}) SELECT DISTINCT ON ({2}) {1} FROM {3} ORDER BY {2}, {4} DESC "
          "ON CONFLICT ({2}) DO {5}",
          qualified_, fmt::join(cols, ", "), fmt::join(keys, ", "), kStage, kSeq,
          sets.empty() ? std::string("NOTHING")
                       : fmt::format("UPDATE SET {}", fmt::join(sets, ", "))));
    }
  } else {
    st = Copy(qualified_, targets, rows, binary);
  }
  if (st.ok()) st = Exec("RELEASE SAVEPOINT sluice_write");
  if (!st.ok()) {
    // A stage created under the savepoint is rolled back with it: made again next time.
    stage_ready_ = false;
    if (pg_ != nullptr) {
      // A refused batch leaves the transaction's earlier Writes in place.
      Status undo = Exec("ROLLBACK TO SAVEPOINT sluice_write");
      if (!undo.ok() && pg_ != nullptr) Disconnect(undo);
    }
    return st;
  }
  pending_rows_ += accepted;
  for (RejectedRow& r : refused) rejected->push_back(std::move(r));
  return Status::OK();
}

Status PostgresSink::WaitSend() {
  if (sender_ == nullptr || !sender_->busy()) return Status::OK();
  sender_->Wait();
  if (copy_.send_error != nullptr) {
    return StreamFailed(Error(copy_.send_error, TrimmedRight(PQerrorMessage(pg_.get()))));
  }
  return Status::OK();
}

Status PostgresSink::Stream(const std::vector<const PgColumn*>& columns, duck::QueryResult rows,
                            bool binary, uint64_t accepted) {
  RETURN_IF_ERROR(WaitSend());
  if (stream_error_.has_value()) return *stream_error_;
  if (!in_txn_) {
    RETURN_IF_ERROR(ExecIdle("BEGIN"));
    in_txn_ = true;
    txn_started_ = std::chrono::steady_clock::now();
  }
  std::vector<std::string> names;
  for (const PgColumn* c : columns) names.push_back(QuotePg(c->name));
  if (copy_.open && (copy_.binary != binary || copy_.columns != names)) {
    if (Status st = EndCopy(); !st.ok()) return StreamFailed(std::move(st));
  }
  if (!copy_.open) {
    if (Status st = StartCopy(qualified_, columns, binary); !st.ok()) {
      return StreamFailed(std::move(st));
    }
  }
  // The rows are encoded and sent on the sender's thread while the pipeline makes its next
  // batch; whatever touches the connection next waits for it first (WaitSend).
  pending_rows_ += accepted;
  if (sender_ == nullptr) sender_ = std::make_unique<Background>("sluice-pg-send");
  auto held = std::make_shared<duck::QueryResult>(std::move(rows));
  sender_->Start([this, columns, held] { SendRows(columns, *held); });
  return Status::OK();
}

Status PostgresSink::StreamFailed(Status st) {
  if (lost_.has_value() || pending_rows_ > 0) {
    stream_error_ = Status(st.code(), fmt::format("{} (the rows written since the last commit "
                                                  "are lost; the pipeline re-reads them)",
                                                  st.message()));
    return *stream_error_;
  }
  // Nothing of earlier batches in the transaction: abandon it, the batch's error alone.
  AbandonCopy("sluice: abandoned");
  if (pg_ != nullptr && in_txn_) {
    if (Status undo = Exec("ROLLBACK"); !undo.ok() && pg_ != nullptr) Disconnect(undo);
  }
  in_txn_ = false;
  return st;
}

void PostgresSink::Stage(const SourceOffsets& offsets) {
  for (const auto& [tp, next] : offsets) {
    auto [it, added] = staged_.emplace(tp, next);
    if (!added) it->second = std::max(it->second, next);
  }
}

void PostgresSink::Skip(const SourceOffsets& offsets) {
  if (Defers()) Stage(offsets);
}

Result<SourceOffsets> PostgresSink::Commit(bool force) {
  if (Status st = WaitSend(); !st.ok()) return st;
  if (stream_error_.has_value()) return *stream_error_;
  if (lost_.has_value()) {
    stream_error_ = std::move(*lost_);
    lost_.reset();
    return *stream_error_;
  }
  if (!in_txn_) return std::exchange(staged_, {});  // batches that wrote no rows
  const auto interval = std::chrono::milliseconds(options_.commit_interval_ms);
  if (!force && std::chrono::steady_clock::now() - txn_started_ < interval) return SourceOffsets{};
  if (copy_.open) {
    if (Status st = EndCopy(); !st.ok()) return StreamFailed(std::move(st));
  }
  const uint64_t rows = pending_rows_;
  Status st = Exec("COMMIT");
  in_txn_ = false;
  pending_rows_ = 0;
  if (!st.ok()) {
    stream_error_ = st.WithContext(
        fmt::format("{} rows written since the last commit may not be committed", rows));
    return *stream_error_;
  }
  return std::exchange(staged_, {});
}

Status PostgresSink::Discard() {
  if (sender_ != nullptr) sender_->Wait();  // its error goes with the rows
  staged_.clear();
  pending_rows_ = 0;
  lost_.reset();
  stream_error_.reset();
  AbandonCopy("sluice: discarded");
  if (pg_ == nullptr || !in_txn_) {
    in_txn_ = false;
    return Status::OK();
  }
  // A ROLLBACK that fails (the server restarted, the connection broke) has nothing left to
  // undo once the connection is closed: the server rolls an open transaction back when its
  // connection goes. Discarding succeeds either way.
  Status st = Exec("ROLLBACK");
  in_txn_ = false;
  if (!st.ok() && pg_ != nullptr) Disconnect(st);
  return Status::OK();
}

void PostgresSink::AbandonCopy(const char* why) {
  if (pg_ == nullptr || !copy_.open) return;
  copy_.open = false;
  bool ended = PQputCopyEnd(pg_.get(), why) == 1;
  while (ended) {
    PGresult* raw = PQgetResult(pg_.get());
    if (raw == nullptr) break;
    // Still in COPY: the end did not reach the server.
    ended = PQresultStatus(raw) != PGRES_COPY_IN;
    PQclear(raw);
  }
  if (!ended) {
    Disconnect(IOError("postgres sink (table {} at {}): could not end a COPY: {}", options_.table,
                       server_, TrimmedRight(PQerrorMessage(pg_.get()))));
  }
}

Status PostgresSink::Flush() {
  // Deferring: the rows stay in the open COPY until Commit.
  if (Defers()) return Status::OK();
  if (lost_.has_value()) {
    Status st = std::move(*lost_);
    lost_.reset();
    return st;
  }
  if (!in_txn_) return Status::OK();
  const uint64_t rows = pending_rows_;
  Status st = Exec("COMMIT");
  in_txn_ = false;
  pending_rows_ = 0;
  if (!st.ok()) {
    lost_.reset();  // this error already says it
    return st.WithContext(
        fmt::format("{} rows written since the last flush may not be committed", rows));
  }
  return Status::OK();
}

}  // namespace sluice::sinks
