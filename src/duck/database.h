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
struct _duckdb_extracted_statements;
struct _duckdb_value;

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
  // DuckDB's disable_database_invalidation: an INTERNAL error fails its statement instead
  // of closing the whole database to every connection (a server's choice: one client's
  // statement that trips a DuckDB assertion must not stop every other session).
  bool survive_internal_errors = false;
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
// kDate: DATE (days since 1970-01-01); kTimestamp: TIMESTAMP and TIMESTAMPTZ (microseconds
// since 1970-01-01 UTC); both as DuckDB stores them, ±infinity as the extremes it uses.
enum class ColumnType {
  kBoolean,
  kInt32,
  kInt64,
  kFloat,
  kDouble,
  kDate,
  kTimestamp,
  kUuid,
  kVarchar,
  kBlob,
  kOther
};

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
  float GetFloat(size_t col, size_t row) const;
  double GetDouble(size_t col, size_t row) const;
  // DATE: days since 1970-01-01; ±infinity are ±INT32_MAX.
  int32_t GetDate(size_t col, size_t row) const;
  // TIMESTAMP / TIMESTAMPTZ: microseconds since 1970-01-01 UTC; ±infinity are ±INT64_MAX.
  int64_t GetTimestamp(size_t col, size_t row) const;
  // UUID: its 16 bytes in the order of its text form (RFC 4122), into `out`.
  void GetUuid(size_t col, size_t row, uint8_t out[16]) const;
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
class StreamResult;

// DuckDB's error types, with duckdb_error_type's values (checked in database.cc), for
// callers that map them to a wire code (the query server's SQLSTATEs).
enum class ErrorType : int {
  kInvalid = 0,
  kOutOfRange = 1,
  kConversion = 2,
  kUnknownType = 3,
  kDecimal = 4,
  kMismatchType = 5,
  kDivideByZero = 6,
  kObjectSize = 7,
  kInvalidType = 8,
  kSerialization = 9,
  kTransaction = 10,
  kNotImplemented = 11,
  kExpression = 12,
  kCatalog = 13,
  kParser = 14,
  kPlanner = 15,
  kScheduler = 16,
  kExecutor = 17,
  kConstraint = 18,
  kIndex = 19,
  kStat = 20,
  kConnection = 21,
  kSyntax = 22,
  kSettings = 23,
  kBinder = 24,
  kNetwork = 25,
  kOptimizer = 26,
  kNullPointer = 27,
  kIO = 28,
  kInterrupt = 29,
  kFatal = 30,
  kInternal = 31,
  kInvalidInput = 32,
  kOutOfMemory = 33,
  kPermission = 34,
  kParameterNotResolved = 35,
  kParameterNotAllowed = 36,
  kDependency = 37,
  kHTTP = 38,
  kMissingExtension = 39,
  kAutoload = 40,
  kSequence = 41,
  kInvalidConfiguration = 42,
};

// The type an error message of DuckDB's names in its prefix ("Catalog Error: ..." is
// kCatalog); kInvalid when there is none. For errors the C API gives without a type
// (prepare errors).
ErrorType ErrorTypeFromMessage(std::string_view message);

// DuckDB's statement types, with duckdb_statement_type's values.
enum class StatementType : int {
  kInvalid = 0,
  kSelect = 1,
  kInsert = 2,
  kUpdate = 3,
  kExplain = 4,
  kDelete = 5,
  kPrepare = 6,
  kCreate = 7,
  kExecute = 8,
  kAlter = 9,
  kTransaction = 10,
  kCopy = 11,
  kAnalyze = 12,
  kVariableSet = 13,
  kCreateFunc = 14,
  kDrop = 15,
  kExport = 16,
  kPragma = 17,
  kVacuum = 18,
  kCall = 19,
  kSet = 20,
  kLoad = 21,
  kRelation = 22,
  kExtension = 23,
  kLogicalPlan = 24,
  kAttach = 25,
  kDetach = 26,
  kMulti = 27,
};

// An owned DuckDB value (RAII over duckdb_value), to bind a prepared statement's
// parameters. Move-only; any thread.
class Value {
 public:
  static Value Null();
  static Value Varchar(std::string_view text);
  static Value Blob(std::string_view bytes);
  static Value Boolean(bool v);
  static Value Int16(int16_t v);
  static Value Int32(int32_t v);
  static Value Int64(int64_t v);
  static Value Float(float v);
  static Value Double(double v);
  static Value Date(int32_t days_since_epoch);
  static Value Time(int64_t micros_since_midnight);
  static Value Timestamp(int64_t micros_since_epoch);
  static Value TimestampTz(int64_t micros_since_epoch);
  static Value Interval(int32_t months, int32_t days, int64_t micros);
  // `upper`/`lower`: the UUID's bytes 0-7 and 8-15 as big-endian integers.
  static Value Uuid(uint64_t upper, uint64_t lower);
  // A LIST of `child` values (each must have type `child`; NULLs are Null()).
  static Value List(const LogicalType& child, std::vector<Value> values);

  Value(Value&& other) noexcept : v_(other.v_) { other.v_ = nullptr; }
  Value& operator=(Value&& other) noexcept;
  ~Value();
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;

  _duckdb_value* handle() const { return v_; }

 private:
  explicit Value(_duckdb_value* v) : v_(v) {}
  _duckdb_value* v_;
};

// A statement parsed, bound and planned once and run many times (DuckDB re-binds it by
// itself when a table or view it reads was replaced). Owned by its connection's thread;
// the Connection must outlive it.
class PreparedStatement {
 public:
  // A parser, binder or catalog error is InvalidArgument with DuckDB's message; with
  // `error_type`, DuckDB's type of the error is stored there.
  static Result<std::unique_ptr<PreparedStatement>> Prepare(Connection& conn, std::string_view sql,
                                                            ErrorType* error_type = nullptr);
  ~PreparedStatement();
  PreparedStatement(const PreparedStatement&) = delete;
  PreparedStatement& operator=(const PreparedStatement&) = delete;

  // Sets parameter $`index` (from 1) for the next Execute.
  Status BindInt64(size_t index, int64_t value);
  // Any value; DuckDB casts it to the parameter's type when it runs (a VARCHAR to an
  // INTEGER parameter, for example).
  Status BindValue(size_t index, const Value& value);
  Status ClearBindings();
  // Runs it and materializes the result, with Query's errors.
  Result<QueryResult> Execute();
  // Runs it and returns a result read chunk by chunk as DuckDB produces it. The
  // connection runs nothing else while the result is being read: a new query on it
  // closes the stream.
  Result<StreamResult> ExecuteStreaming(ErrorType* error_type = nullptr);

  StatementType type() const;
  size_t param_count() const;
  // Parameter $`index`'s type (from 1), or nullopt when DuckDB could not infer it.
  std::optional<LogicalType> param_type(size_t index) const;
  // The result's columns as planned (what Execute will return).
  size_t column_count() const;
  std::string column_name(size_t col) const;
  LogicalType column_type(size_t col) const;

 private:
  friend class ExtractedStatements;
  explicit PreparedStatement(_duckdb_prepared_statement* stmt) : stmt_(stmt) {}
  _duckdb_prepared_statement* stmt_;
};

// The statements of an SQL string that may hold several, each prepared only when asked
// (so that one may depend on what an earlier one created). Owned by the connection's
// thread; the Connection must outlive it.
class ExtractedStatements {
 public:
  // A parser error is InvalidArgument (its type in `error_type`).
  static Result<ExtractedStatements> Extract(Connection& conn, std::string_view sql,
                                             ErrorType* error_type = nullptr);
  ExtractedStatements(ExtractedStatements&& other) noexcept;
  ExtractedStatements& operator=(ExtractedStatements&&) = delete;
  ~ExtractedStatements();

  size_t size() const { return count_; }
  Result<std::unique_ptr<PreparedStatement>> Prepare(size_t i, ErrorType* error_type = nullptr);

 private:
  ExtractedStatements(_duckdb_connection* conn, _duckdb_extracted_statements* s, size_t n)
      : conn_(conn), stmts_(s), count_(n) {}
  _duckdb_connection* conn_;
  _duckdb_extracted_statements* stmts_;
  size_t count_;
};

// What a statement's result holds.
enum class ReturnType { kRows, kChangedRows, kNothing };

// A result read chunk by chunk as DuckDB produces it (DuckDB's streaming result; a
// statement whose result cannot stream is materialized by DuckDB and read the same
// way). Move-only; owned by the connection's thread.
class StreamResult {
 public:
  StreamResult(StreamResult&& other) noexcept;
  StreamResult& operator=(StreamResult&& other) noexcept;
  ~StreamResult();

  size_t column_count() const { return names_.size(); }
  const std::string& column_name(size_t col) const { return names_[col]; }
  LogicalType column_type(size_t col) const;
  ReturnType return_type() const;
  StatementType statement_type() const;

  // The next chunk, or nullopt after the last one. An error while running (interrupt,
  // out of memory...) is returned here, its type in `error_type`.
  Result<std::optional<DataChunk>> Fetch(ErrorType* error_type = nullptr);

 private:
  friend class PreparedStatement;
  explicit StreamResult(std::unique_ptr<ResultState> result);
  std::unique_ptr<ResultState> result_;
  std::vector<std::string> names_;
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
  // The database this connection was opened on (which outlives it).
  Database& database() const { return *db_; }

 private:
  Connection(_duckdb_connection* conn, Database* db) : conn_(conn), db_(db) {}
  _duckdb_connection* conn_;
  Database* db_;
};

// `name` quoted as an SQL identifier ("a""b").
std::string QuoteIdentifier(std::string_view name);
// `value` quoted as an SQL string literal ('it''s').
std::string QuoteLiteral(std::string_view value);
// The length of a leading `EXPLAIN` or `EXPLAIN ANALYZE` and the space after it (0 when
// `sql` does not start so): the planners plan what follows and put the prefix back.
size_t ExplainPrefixLength(std::string_view sql);

}  // namespace sluice::duck
