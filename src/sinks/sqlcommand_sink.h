// SqlCommandSink: sqlflow's `sink.type: sqlcommand`. Each batch is exposed to the user's
// SQL as the table `sqlflow_sink_batch`, and the SQL runs on the pipeline's own DuckDB
// connection: `COPY sqlflow_sink_batch TO 'out/$uuid.parquet'` writes a Parquet file per
// batch; `INSERT INTO attached_db.t SELECT * FROM sqlflow_sink_batch` writes to a database
// the pipeline's `commands` ATTACHed.
//
// Substitutions work as in sqlflow: before each execution, every occurrence of each
// substitution's `var` text in the SQL (plain text, no `{{ }}` syntax: sqlflow's own
// examples use `$sqlflow_uuid`) is replaced by a fresh value; all occurrences of one var
// in one execution get the same value. The only type is uuid4 (a random UUID, lowercase,
// 8-4-4-4-12).
#pragma once

#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sinks/sink.h"

namespace sluice::sinks {

struct SqlSubstitution {
  enum class Type { kUuid4 };
  std::string var;  // the text replaced in the SQL, e.g. "$sqlflow_uuid"
  Type type = Type::kUuid4;
};

struct SqlCommandSinkOptions {
  std::string sql;  // one or more statements over `sqlflow_sink_batch`
  std::vector<SqlSubstitution> substitutions;
};

// Write copies the batch into the temporary table `sqlflow_sink_batch` (the pipeline
// replaces its own table right after Write), runs the SQL synchronously and drops the
// copy. Flush has nothing left to do.
//
// What "durable" means: the SQL has returned. For an INSERT into an attached database,
// that is that database's commit (DuckDB's autocommit; Postgres' COMMIT through the
// postgres extension). For COPY ... TO a file, DuckDB has closed the file but does not
// fsync it (its Parquet and CSV writers flush to the operating system and close): the
// file survives a crash or SIGKILL of sluice, not a power loss or kernel crash before the
// OS wrote it back. A pipeline that needs more syncs the directory itself.
//
// Owned by the pipeline's thread; the SQL runs on the connection Write is given.
class SqlCommandSink final : public Sink {
 public:
  // InvalidArgument when the SQL is empty or a substitution's var is empty.
  static Result<std::unique_ptr<SqlCommandSink>> Create(SqlCommandSinkOptions options);

  Status Write(duck::Connection& conn, std::string_view table, const SourceOffsets& offsets,
               std::vector<RejectedRow>* rejected) override;
  Status Flush() override { return Status::OK(); }
  std::string Describe() const override { return "sqlcommand"; }

  // The SQL with every substitution applied (fresh values each call). For tests.
  std::string SubstitutedSql();

 private:
  explicit SqlCommandSink(SqlCommandSinkOptions options);
  std::string Uuid4();

  SqlCommandSinkOptions options_;
  std::mt19937_64 rng_;
};

// The table name the user's SQL reads the batch from.
inline constexpr std::string_view kSqlCommandBatchTable = "sqlflow_sink_batch";

}  // namespace sluice::sinks
