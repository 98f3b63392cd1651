// PostgresSink: rows into a PostgreSQL table with libpq's COPY FROM STDIN (text format),
// appended, or upserted on key columns. sqlflow has no postgres sink of its own (its
// examples INSERT through DuckDB's postgres extension in a sqlcommand sink); this one is
// sluice's, with keys in sqlflow's style (docs/sinks.md).
//
// Schema: fixed at the first Write. A missing table is created from the batch's DuckDB
// column types (STRUCT, LIST, MAP and UNION become jsonb; the mapping is in
// postgres_sink.cc and docs/sinks.md), with a primary key on the key columns in upsert
// mode; an existing table's columns are read from the catalog. Every later batch is cast
// to those columns in DuckDB (TRY_CAST per column): a row with a non-null value that does
// not cast (or is longer than a varchar(n), or has a NULL key in upsert mode) goes to
// `rejected` with a reason naming the column, and the other rows are written. Batch
// columns the table lacks are ignored (logged once per column); table columns the batch
// lacks get their default.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sinks/duck_rows.h"
#include "sinks/sink.h"

struct pg_conn;  // libpq's PGconn

namespace sluice::sinks {

struct PostgresSinkOptions {
  enum class Mode { kAppend, kUpsert };
  // libpq connection string: "host=127.0.0.1 port=5432 dbname=app user=sluice" or a
  // postgresql:// URI. connect_timeout defaults to 10 s unless set here.
  std::string dsn;
  std::string table;  // "name" or "schema.name" (names are case-sensitive, not folded)
  Mode mode = Mode::kAppend;
  std::vector<std::string> key;  // upsert: the conflict columns (a unique key on them)
};

// Transactions: the first Write after a Flush opens a transaction; each Write sends its
// rows inside it (under a savepoint, so a Write that fails leaves earlier Writes in place);
// Flush COMMITs. "Durable" is that COMMIT: with PostgreSQL's defaults (fsync on,
// synchronous_commit on) the rows are on disk when Flush returns.
//
// Failures: errors name the server (host:port/dbname, never the password) and the table.
// When the connection breaks, the transaction's rows are gone: the Write that saw it fails,
// and the next Flush fails saying how many rows since the last Flush were not committed
// (the pipeline resends them: it never committed their offsets). The next Write
// reconnects. Owned by the pipeline's thread.
class PostgresSink final : public Sink {
 public:
  // InvalidArgument for an empty or malformed dsn, an empty table, upsert without key
  // columns. Does not connect: the first Write does.
  static Result<std::unique_ptr<PostgresSink>> Create(PostgresSinkOptions options);
  ~PostgresSink() override;

  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override;
  Status Flush() override;
  std::string Describe() const override;

  // The table's columns as the sink fixed them ("name type"), empty before the first
  // Write. For tests and logs.
  std::vector<std::string> FixedColumns() const;

  struct PgColumn;  // one column of the target table (postgres_sink.cc)
  struct ConnCloser {
    void operator()(pg_conn* c) const;
  };

 private:
  explicit PostgresSink(PostgresSinkOptions options, std::string server);

  Status Connect();
  // Drops the connection; the open transaction's rows are remembered as lost.
  void Disconnect(const Status& cause);
  // Runs `sql` expecting no rows. Errors name the server and table; a broken connection
  // is dropped (Disconnect).
  Status Exec(const std::string& sql);
  // Before a transaction is open: Exec, reconnecting and retrying once if the connection
  // had broken while idle (a server restart between batches).
  Status ExecIdle(const std::string& sql);
  Status FixSchema(const std::vector<DuckColumn>& batch);
  Status ReadColumns(std::vector<PgColumn>* out);
  Status EnsureStage();
  Status Copy(const std::string& target, const std::vector<const PgColumn*>& columns,
              duck::QueryResult& rows, size_t line_col, size_t reason_col);
  Status Error(std::string_view what, std::string_view detail) const;

  PostgresSinkOptions options_;
  std::string server_;     // "host:port/dbname" for messages
  std::string qualified_;  // the table, quoted for Postgres
  std::unique_ptr<pg_conn, ConnCloser> pg_;
  std::vector<PgColumn> columns_;  // fixed at the first Write
  bool schema_fixed_ = false;
  bool in_txn_ = false;
  bool stage_ready_ = false;
  uint64_t pending_rows_ = 0;           // written in the open transaction
  std::optional<Status> lost_;          // why rows written since the last Flush were lost
  std::set<std::string> warned_extra_;  // batch columns not in the table, logged once
};

}  // namespace sluice::sinks
