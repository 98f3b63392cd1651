// PostgresSink: rows into a PostgreSQL table with libpq's COPY FROM STDIN, appended, or
// upserted on key columns. COPY's binary format when every column's type has one the sink
// writes (booleans, integers, floats, numeric(p,s), date, timestamp[tz], uuid, text,
// varchar, char, bytea, json, jsonb), its text format otherwise. sqlflow has no postgres sink of
// its own (its examples INSERT through DuckDB's postgres extension in a sqlcommand sink); this one
// is sluice's, with keys in sqlflow's style (docs/sinks.md).
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

#include <chrono>
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

namespace sluice {
class Background;
}

namespace sluice::sinks {

struct PostgresSinkOptions {
  enum class Mode { kAppend, kUpsert };
  // libpq connection string: "host=127.0.0.1 port=5432 dbname=app user=sluice" or a
  // postgresql:// URI. connect_timeout defaults to 10 s unless set here.
  std::string dsn;
  std::string table;  // "name" or "schema.name" (names are case-sensitive, not folded)
  Mode mode = Mode::kAppend;
  std::vector<std::string> key;  // upsert: the conflict columns (a unique key on them)
  // 0: each Flush commits (the rows of every batch durable at its Flush). N > 0 (append
  // only): the sink defers (Sink::Defers): the batches stream into one open COPY and
  // transaction that Commit ends every N ms, so PostgreSQL takes in one batch while the
  // pipeline makes the next; a row PostgreSQL refuses then fails the commit (the pipeline
  // stops and re-reads from its committed offsets) instead of its batch.
  int64_t commit_interval_ms = 0;
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
  // With commit_interval_ms: Flush stages (the COPY stays open), Commit ends the COPY and
  // commits when the interval has passed since the transaction began (or now, `force`).
  bool Defers() const override { return options_.commit_interval_ms > 0; }
  Result<SourceOffsets> Commit(bool force) override;
  void Skip(const SourceOffsets& offsets) override;
  Status Discard() override;

  // The table's columns as the sink fixed them ("name type"), empty before the first
  // Write. For tests and logs.
  std::vector<std::string> FixedColumns() const;
  // Whether the last Write's rows went in COPY's binary format (else text). For tests.
  bool last_copy_binary() const { return last_copy_binary_; }

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
  // Write's rows (its query: the reason, then the line or the values) whose reason is NULL,
  // in one COPY: StartCopy, SendRows (any number of times), EndCopy.
  Status Copy(const std::string& target, const std::vector<const PgColumn*>& columns,
              duck::QueryResult& rows, bool binary);
  Status StartCopy(const std::string& target, const std::vector<const PgColumn*>& columns,
                   bool binary);
  void SendRows(const std::vector<const PgColumn*>& columns, duck::QueryResult& rows);
  void Send(std::string_view data);  // a failure is kept in copy_.send_error
  Status EndCopy();
  // Commit_interval_ms: the accepted rows into the open COPY (opened, or reopened when the
  // batch's columns or format differ, in the open transaction).
  // The rows are sent on the sender thread; Stream returns once they are handed over.
  Status Stream(const std::vector<const PgColumn*>& columns, duck::QueryResult rows, bool binary,
                uint64_t accepted);
  // Waits for the rows in the sender's hands; a failure to send them is StreamFailed's.
  Status WaitSend();
  // Runs Write's cast query, prepared once for as long as the batches' columns stay.
  Result<duck::QueryResult> Cast(duck::Connection& conn, const std::string& sql);
  // A streaming failure: with rows of earlier batches in the transaction it is kept and
  // every Commit returns it (they are lost; the pipeline must re-read them); otherwise the
  // transaction is abandoned and the error is the batch's alone.
  Status StreamFailed(Status st);
  // Ends an open COPY with an error, so the server throws its rows away; when libpq cannot
  // end it, the connection goes (closing it throws them away too).
  void AbandonCopy(const char* why);
  void Stage(const SourceOffsets& offsets);
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
  bool logged_format_ = false;          // COPY's format logged (at the first Write)
  bool last_copy_binary_ = false;
  struct OpenCopy {
    bool open = false;
    bool binary = false;
    std::vector<std::string> columns;  // quoted, in the COPY's order
    const char* send_error = nullptr;
  } copy_;
  // commit_interval_ms: the source offsets of the batches in the open transaction (and of
  // those that wrote no rows), when it began, and the failure that lost its rows.
  SourceOffsets staged_;
  std::chrono::steady_clock::time_point txn_started_;
  std::optional<Status> stream_error_;
  // commit_interval_ms: encodes and sends a batch's rows while the pipeline makes the next
  // (made at the first streamed batch). Nothing else touches the connection meanwhile.
  std::unique_ptr<Background> sender_;
  std::unique_ptr<duck::PreparedStatement> cast_;  // Write's cast query, for cast_sql_
  std::string cast_sql_;
  const duck::Connection* cast_conn_ = nullptr;
};

}  // namespace sluice::sinks
