// duck: the only module that talks to DuckDB (through its C API only). Databases,
// connections and materialized query results as RAII values; DuckDB's errors become
// Status values here and nowhere else.
//
//   ASSIGN_OR_RETURN(auto db, Database::Open({.memory_limit_bytes = 256 << 20, .threads = 1}));
//   ASSIGN_OR_RETURN(auto conn, Connection::Open(*db));
//   RETURN_IF_ERROR(conn->Execute("CREATE TABLE t (a INT)"));
//   ASSIGN_OR_RETURN(QueryResult r, conn->Query("SELECT count(*) FROM t"));
//
// DuckDB's memory and thread limits belong to a database, not a query: each pipeline and
// the query server open their own Database with explicit limits (DESIGN.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/logical_type.h"

// DuckDB's handle types are pointers to these; forward-declared so that duckdb.h stays
// inside this module.
struct _duckdb_database;
struct _duckdb_connection;
struct _duckdb_data_chunk;
struct _duckdb_prepared_statement;

namespace sluice::duck {

struct ResultState;  // holds DuckDB's duckdb_result (database.cc)

// The version of the libduckdb the process loaded, e.g. "v1.5.6".
std::string_view LibraryVersion();

struct DatabaseOptions {
  std::string path;                // "" for an in-memory database
  int64_t memory_limit_bytes = 0;  // DuckDB's memory_limit; 0 leaves DuckDB's default
  int threads = 1;                 // DuckDB's worker threads for this database
  // Where DuckDB spills when over its memory limit; "" leaves DuckDB's default (none for
  // an in-memory database, so such a database cannot spill).
  std::string temp_directory;
  // The block size of a database file this creates (DuckDB's default_block_size; a power of
  // two from 16384); 0 leaves DuckDB's 256 KiB. An existing file keeps its own.
  uint64_t block_size = 0;
};

// An open DuckDB database. Lifecycle: Open(), then connections; it must outlive them.
// Thread-safe as DuckDB's database is: connections on different threads are fine.
class Database {
 public:
  static Result<std::unique_ptr<Database>> Open(const DatabaseOptions& options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  _duckdb_database* handle() const { return db_; }

 private:
  explicit Database(_duckdb_database* db) : db_(db) {}
  _duckdb_database* db_;
};

// The column types sluice reads directly from result chunks; every other type is kOther
// (cast it in SQL, or read it with Connection::QueryText).
enum class ColumnType { kBoolean, kInt32, kInt64, kDouble, kVarchar, kBlob, kOther };

// One chunk of a materialized result (up to 2048 rows): typed, zero-copy reads of its
// columns. Valid while the QueryResult it came from lives.
class ResultChunk {
 public:
  size_t size() const { return rows_; }
  bool IsNull(size_t col, size_t row) const;
  // The column must have the named type (asserted); NULL rows read as 0 / "".
  bool GetBool(size_t col, size_t row) const;
  int32_t GetInt32(size_t col, size_t row) const;
  int64_t GetInt64(size_t col, size_t row) const;
  double GetDouble(size_t col, size_t row) const;
  std::string_view GetString(size_t col, size_t row) const;  // VARCHAR or BLOB

 private:
  friend class QueryResult;
  ResultChunk(_duckdb_data_chunk* chunk, const std::vector<ColumnType>* types);
  _duckdb_data_chunk* chunk_;
  const std::vector<ColumnType>* types_;
  size_t rows_;
};

// A materialized query result. Move-only; frees DuckDB's result when destroyed.
class QueryResult {
 public:
  QueryResult(QueryResult&& other) noexcept;
  QueryResult& operator=(QueryResult&& other) noexcept;
  ~QueryResult();

  size_t column_count() const { return names_.size(); }
  const std::string& column_name(size_t col) const { return names_[col]; }
  ColumnType column_type(size_t col) const { return types_[col]; }
  // The name of the column's type id ("BIGINT", "STRUCT", "LIST"...), without parameters.
  std::string column_type_name(size_t col) const;
  uint64_t row_count() const;
  // Rows changed by an INSERT, UPDATE or DELETE.
  uint64_t rows_changed() const;

  size_t chunk_count() const;
  // Chunk `i` (0 <= i < chunk_count()); valid while this result lives.
  ResultChunk chunk(size_t i);

  // Each column's full type.
  std::vector<LogicalType> column_logical_types() const;
  // Hands every chunk over to the caller; chunk() may not be used afterwards. The chunks
  // may point into the result's memory: keep the result alive while they are used, and
  // destroy them first.
  std::vector<DataChunk> TakeChunks();

 private:
  friend class Connection;
  friend class PreparedStatement;
  explicit QueryResult(std::unique_ptr<ResultState> result);
  void Free();

  std::unique_ptr<ResultState> result_;
  std::vector<std::string> names_;
  std::vector<ColumnType> types_;
  std::vector<_duckdb_data_chunk*> chunks_;  // fetched lazily, destroyed with the result
};

class Connection;

// A statement parsed, bound and planned once and run many times (DuckDB re-binds it by
// itself when a table or view it reads was replaced). Owned by its connection's thread;
// the Connection must outlive it.
class PreparedStatement {
 public:
  // A parser, binder or catalog error is InvalidArgument with DuckDB's message.
  static Result<std::unique_ptr<PreparedStatement>> Prepare(Connection& conn, std::string_view sql);
  ~PreparedStatement();
  PreparedStatement(const PreparedStatement&) = delete;
  PreparedStatement& operator=(const PreparedStatement&) = delete;

  // Sets parameter $`index` (from 1) for the next Execute.
  Status BindInt64(size_t index, int64_t value);
  // Runs it and materializes the result, with Query's errors.
  Result<QueryResult> Execute();

 private:
  explicit PreparedStatement(_duckdb_prepared_statement* stmt) : stmt_(stmt) {}
  _duckdb_prepared_statement* stmt_;
};

// A connection: DuckDB runs one query at a time on it. Owned by one thread at a time.
class Connection {
 public:
  static Result<std::unique_ptr<Connection>> Open(Database& db);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs `sql` (one or more statements) and drops the result.
  Status Execute(std::string_view sql);
  // Runs `sql` and materializes the result of its last statement. A DuckDB error is
  // InvalidArgument (parser, binder, catalog, conversion...), ResourceExhausted (out of
  // memory) or Internal, with DuckDB's message.
  Result<QueryResult> Query(std::string_view sql);
  // Every value of `select` (one SELECT statement) as DuckDB's text cast of it, row by
  // row; nullopt for NULL. For tests, small results and the console.
  Result<std::vector<std::vector<std::optional<std::string>>>> QueryText(std::string_view select);
  // Interrupts the query running on this connection (any thread).
  void Interrupt();

  _duckdb_connection* handle() const { return conn_; }

 private:
  explicit Connection(_duckdb_connection* conn) : conn_(conn) {}
  _duckdb_connection* conn_;
};

// `name` quoted as an SQL identifier ("a""b").
std::string QuoteIdentifier(std::string_view name);
// `value` quoted as an SQL string literal ('it''s').
std::string QuoteLiteral(std::string_view value);

}  // namespace sluice::duck
