#include "duck/database.h"

#include <duckdb.h>
#include <fmt/format.h>

#include <cctype>
#include <utility>

namespace sluice::duck {

struct ResultState {
  duckdb_result result;
};

namespace {

ColumnType ToColumnType(duckdb_type t) {
  switch (t) {
    case DUCKDB_TYPE_BOOLEAN:
      return ColumnType::kBoolean;
    case DUCKDB_TYPE_INTEGER:
      return ColumnType::kInt32;
    case DUCKDB_TYPE_BIGINT:
      return ColumnType::kInt64;
    case DUCKDB_TYPE_FLOAT:
      return ColumnType::kFloat;
    case DUCKDB_TYPE_DOUBLE:
      return ColumnType::kDouble;
    case DUCKDB_TYPE_DATE:
      return ColumnType::kDate;
    case DUCKDB_TYPE_TIMESTAMP:
    case DUCKDB_TYPE_TIMESTAMP_TZ:
      return ColumnType::kTimestamp;
    case DUCKDB_TYPE_UUID:
      return ColumnType::kUuid;
    case DUCKDB_TYPE_VARCHAR:
      return ColumnType::kVarchar;
    case DUCKDB_TYPE_BLOB:
      return ColumnType::kBlob;
    default:
      return ColumnType::kOther;
  }
}

static_assert(static_cast<int>(ErrorType::kSequence) == DUCKDB_ERROR_SEQUENCE);
static_assert(static_cast<int>(ErrorType::kPermission) == DUCKDB_ERROR_PERMISSION);
static_assert(static_cast<int>(ErrorType::kInterrupt) == DUCKDB_ERROR_INTERRUPT);
static_assert(static_cast<int>(StatementType::kMulti) == DUCKDB_STATEMENT_TYPE_MULTI);
static_assert(static_cast<int>(StatementType::kAttach) == DUCKDB_STATEMENT_TYPE_ATTACH);

Status ResultError(duckdb_result* result, ErrorType* error_type = nullptr) {
  if (error_type != nullptr) *error_type = static_cast<ErrorType>(duckdb_result_error_type(result));
  const char* msg = duckdb_result_error(result);
  std::string text = msg != nullptr ? msg : "unknown DuckDB error";
  switch (duckdb_result_error_type(result)) {
    case DUCKDB_ERROR_OUT_OF_MEMORY:
      return ResourceExhaustedError("DuckDB: {}", text);
    case DUCKDB_ERROR_INTERRUPT:
      return AbortedError("DuckDB: {}", text);
    case DUCKDB_ERROR_INTERNAL:
    case DUCKDB_ERROR_FATAL:
    case DUCKDB_ERROR_UNKNOWN_TYPE:
      return InternalError("DuckDB: {}", text);
    case DUCKDB_ERROR_IO:
      return IOError("DuckDB: {}", text);
    default:
      return InvalidArgumentError("DuckDB: {}", text);
  }
}

}  // namespace

std::string_view LibraryVersion() { return duckdb_library_version(); }

Result<std::unique_ptr<Database>> Database::Open(const DatabaseOptions& options) {
  duckdb_config config = nullptr;
  if (duckdb_create_config(&config) == DuckDBError) {
    return InternalError("DuckDB: cannot create a config");
  }
  auto set = [&](const char* name, const std::string& value) -> Status {
    if (duckdb_set_config(config, name, value.c_str()) == DuckDBError) {
      return InvalidArgumentError("DuckDB: cannot set {} to '{}'", name, value);
    }
    return Status::OK();
  };
  Status st = set("threads", std::to_string(std::max(1, options.threads)));
  if (st.ok() && options.memory_limit_bytes > 0) {
    st = set("memory_limit", std::to_string(options.memory_limit_bytes) + "B");
  }
  if (st.ok() && !options.temp_directory.empty())
    st = set("temp_directory", options.temp_directory);
  if (st.ok() && options.block_size > 0)
    st = set("default_block_size", std::to_string(options.block_size));
  // Extensions are never downloaded: the process works offline and loads nothing it was
  // not built with.
  if (st.ok()) st = set("autoinstall_known_extensions", "false");
  if (st.ok()) st = set("autoload_known_extensions", "false");
  if (st.ok() && options.survive_internal_errors) st = set("disable_database_invalidation", "true");
  if (!st.ok()) {
    duckdb_destroy_config(&config);
    return st;
  }
  duckdb_database db = nullptr;
  char* error = nullptr;
  const char* path = options.path.empty() ? nullptr : options.path.c_str();
  duckdb_state state = duckdb_open_ext(path, &db, config, &error);
  duckdb_destroy_config(&config);
  if (state == DuckDBError) {
    std::string msg = error != nullptr ? error : "unknown error";
    duckdb_free(error);
    return IOError("DuckDB: cannot open database '{}': {}",
                   options.path.empty() ? ":memory:" : options.path, msg);
  }
  return std::unique_ptr<Database>(new Database(db));
}

Database::~Database() { duckdb_close(&db_); }

Result<std::unique_ptr<Connection>> Connection::Open(Database& db) {
  duckdb_connection conn = nullptr;
  if (duckdb_connect(db.handle(), &conn) == DuckDBError) {
    return InternalError("DuckDB: cannot connect to the database");
  }
  return std::unique_ptr<Connection>(new Connection(conn, &db));
}

Connection::~Connection() { duckdb_disconnect(&conn_); }

Status Connection::Execute(std::string_view sql) {
  auto result = Query(sql);
  return result.status();
}

Result<QueryResult> Connection::Query(std::string_view sql) {
  auto result = std::make_unique<ResultState>();
  std::string text(sql);  // the C API wants a terminated string
  if (duckdb_query(conn_, text.c_str(), &result->result) == DuckDBError) {
    Status st = ResultError(&result->result);
    duckdb_destroy_result(&result->result);
    return st;
  }
  return QueryResult(std::move(result));
}

void Connection::Interrupt() { duckdb_interrupt(conn_); }

QueryResult::QueryResult(std::unique_ptr<ResultState> result) : result_(std::move(result)) {
  idx_t n = duckdb_column_count(&result_->result);
  names_.reserve(n);
  types_.reserve(n);
  for (idx_t i = 0; i < n; ++i) {
    const char* name = duckdb_column_name(&result_->result, i);
    names_.emplace_back(name != nullptr ? name : "");
    types_.push_back(ToColumnType(duckdb_column_type(&result_->result, i)));
  }
  chunks_.assign(duckdb_result_chunk_count(result_->result), nullptr);
}

QueryResult::QueryResult(QueryResult&& other) noexcept
    : result_(std::move(other.result_)),
      names_(std::move(other.names_)),
      types_(std::move(other.types_)),
      chunks_(std::move(other.chunks_)) {
  other.chunks_.clear();
}

QueryResult& QueryResult::operator=(QueryResult&& other) noexcept {
  if (this != &other) {
    Free();
    result_ = std::move(other.result_);
    names_ = std::move(other.names_);
    types_ = std::move(other.types_);
    chunks_ = std::move(other.chunks_);
    other.chunks_.clear();
  }
  return *this;
}

QueryResult::~QueryResult() { Free(); }

void QueryResult::Free() {
  for (duckdb_data_chunk& c : chunks_) {
    if (c != nullptr) duckdb_destroy_data_chunk(&c);
  }
  chunks_.clear();
  if (result_ != nullptr) {
    duckdb_destroy_result(&result_->result);
    result_.reset();
  }
}

std::string QueryResult::column_type_name(size_t col) const {
  duckdb_logical_type type = duckdb_column_logical_type(&result_->result, col);
  // The C API has no logical-type-to-string: name the type ids (not their parameters).
  duckdb_type id = duckdb_get_type_id(type);
  duckdb_destroy_logical_type(&type);
  switch (id) {
    case DUCKDB_TYPE_BOOLEAN:
      return "BOOLEAN";
    case DUCKDB_TYPE_TINYINT:
      return "TINYINT";
    case DUCKDB_TYPE_SMALLINT:
      return "SMALLINT";
    case DUCKDB_TYPE_INTEGER:
      return "INTEGER";
    case DUCKDB_TYPE_BIGINT:
      return "BIGINT";
    case DUCKDB_TYPE_HUGEINT:
      return "HUGEINT";
    case DUCKDB_TYPE_UTINYINT:
      return "UTINYINT";
    case DUCKDB_TYPE_USMALLINT:
      return "USMALLINT";
    case DUCKDB_TYPE_UINTEGER:
      return "UINTEGER";
    case DUCKDB_TYPE_UBIGINT:
      return "UBIGINT";
    case DUCKDB_TYPE_FLOAT:
      return "FLOAT";
    case DUCKDB_TYPE_DOUBLE:
      return "DOUBLE";
    case DUCKDB_TYPE_DECIMAL:
      return "DECIMAL";
    case DUCKDB_TYPE_VARCHAR:
      return "VARCHAR";
    case DUCKDB_TYPE_BLOB:
      return "BLOB";
    case DUCKDB_TYPE_DATE:
      return "DATE";
    case DUCKDB_TYPE_TIME:
      return "TIME";
    case DUCKDB_TYPE_TIMESTAMP:
      return "TIMESTAMP";
    case DUCKDB_TYPE_TIMESTAMP_TZ:
      return "TIMESTAMP WITH TIME ZONE";
    case DUCKDB_TYPE_INTERVAL:
      return "INTERVAL";
    case DUCKDB_TYPE_UUID:
      return "UUID";
    case DUCKDB_TYPE_LIST:
      return "LIST";
    case DUCKDB_TYPE_STRUCT:
      return "STRUCT";
    case DUCKDB_TYPE_MAP:
      return "MAP";
    default:
      return "TYPE#" + std::to_string(static_cast<int>(id));
  }
}

uint64_t QueryResult::row_count() const {
  uint64_t rows = 0;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    rows += const_cast<QueryResult*>(this)->chunk(i).size();
  }
  return rows;
}

uint64_t QueryResult::rows_changed() const { return duckdb_rows_changed(&result_->result); }

size_t QueryResult::chunk_count() const { return chunks_.size(); }

ResultChunk QueryResult::chunk(size_t i) {
  if (chunks_[i] == nullptr) chunks_[i] = duckdb_result_get_chunk(result_->result, i);
  return ResultChunk(chunks_[i], &types_);
}

std::vector<LogicalType> QueryResult::column_logical_types() const {
  std::vector<LogicalType> out;
  for (size_t i = 0; i < names_.size(); ++i) {
    out.push_back(LogicalType::Adopt(duckdb_column_logical_type(&result_->result, i)));
  }
  return out;
}

std::vector<DataChunk> QueryResult::TakeChunks() {
  std::vector<DataChunk> out;
  out.reserve(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (chunks_[i] == nullptr) chunks_[i] = duckdb_result_get_chunk(result_->result, i);
    out.push_back(DataChunk(std::exchange(chunks_[i], nullptr), names_.size()));
  }
  chunks_.clear();
  return out;
}

namespace {

// A failed duckdb_prepare or duckdb_prepare_extracted_statement as a Status (the C API
// gives the message only; its prefix names the type).
Status PrepareError(duckdb_prepared_statement* stmt, ErrorType* error_type) {
  const char* e = duckdb_prepare_error(*stmt);
  std::string msg = e != nullptr ? e : "DuckDB: cannot prepare the statement";
  duckdb_destroy_prepare(stmt);
  if (error_type != nullptr) *error_type = ErrorTypeFromMessage(msg);
  return InvalidArgumentError("{}", msg);
}

}  // namespace

ErrorType ErrorTypeFromMessage(std::string_view message) {
  // DuckDB's ErrorData prefixes its message with the type's name and " Error: ".
  static constexpr std::pair<std::string_view, ErrorType> kPrefixes[] = {
      {"Out of Range", ErrorType::kOutOfRange},
      {"Conversion", ErrorType::kConversion},
      {"Unknown Type", ErrorType::kUnknownType},
      {"Decimal", ErrorType::kDecimal},
      {"Mismatch Type", ErrorType::kMismatchType},
      {"Divide by Zero", ErrorType::kDivideByZero},
      {"Invalid type", ErrorType::kInvalidType},
      {"Serialization", ErrorType::kSerialization},
      {"TransactionContext", ErrorType::kTransaction},
      {"Not implemented", ErrorType::kNotImplemented},
      {"Expression", ErrorType::kExpression},
      {"Catalog", ErrorType::kCatalog},
      {"Parser", ErrorType::kParser},
      {"Planner", ErrorType::kPlanner},
      {"Constraint", ErrorType::kConstraint},
      {"Syntax", ErrorType::kSyntax},
      {"Binder", ErrorType::kBinder},
      {"IO", ErrorType::kIO},
      {"INTERRUPT", ErrorType::kInterrupt},
      {"FATAL", ErrorType::kFatal},
      {"INTERNAL", ErrorType::kInternal},
      {"Invalid Input", ErrorType::kInvalidInput},
      {"Out of Memory", ErrorType::kOutOfMemory},
      {"Permission", ErrorType::kPermission},
      {"Parameter Not Resolved", ErrorType::kParameterNotResolved},
      {"Parameter Not Allowed", ErrorType::kParameterNotAllowed},
      {"Dependency", ErrorType::kDependency},
      {"HTTP", ErrorType::kHTTP},
      {"Missing Extension", ErrorType::kMissingExtension},
      {"Sequence", ErrorType::kSequence},
      {"Invalid Configuration", ErrorType::kInvalidConfiguration},
  };
  if (message.starts_with("DuckDB: ")) message.remove_prefix(8);
  for (const auto& [prefix, type] : kPrefixes) {
    if (message.starts_with(prefix) && message.substr(prefix.size()).starts_with(" Error: "))
      return type;
  }
  return ErrorType::kInvalid;
}

Result<std::unique_ptr<PreparedStatement>> PreparedStatement::Prepare(Connection& conn,
                                                                      std::string_view sql,
                                                                      ErrorType* error_type) {
  std::string text(sql);
  duckdb_prepared_statement stmt = nullptr;
  if (duckdb_prepare(conn.handle(), text.c_str(), &stmt) == DuckDBError) {
    return PrepareError(&stmt, error_type);
  }
  return std::unique_ptr<PreparedStatement>(new PreparedStatement(stmt));
}

Status PreparedStatement::BindValue(size_t index, const Value& value) {
  if (duckdb_bind_value(stmt_, index, value.handle()) == DuckDBError) {
    const char* e = duckdb_prepare_error(stmt_);
    return InvalidArgumentError("DuckDB: cannot bind parameter ${}: {}", index,
                                e != nullptr ? e : "out of range");
  }
  return Status::OK();
}

Status PreparedStatement::ClearBindings() {
  if (duckdb_clear_bindings(stmt_) == DuckDBError)
    return InternalError("DuckDB: cannot clear bindings");
  return Status::OK();
}

StatementType PreparedStatement::type() const {
  return static_cast<StatementType>(duckdb_prepared_statement_type(stmt_));
}

size_t PreparedStatement::param_count() const { return duckdb_nparams(stmt_); }

std::optional<LogicalType> PreparedStatement::param_type(size_t index) const {
  duckdb_logical_type t = duckdb_param_logical_type(stmt_, index);
  if (t == nullptr) return std::nullopt;
  LogicalType out = LogicalType::Adopt(t);
  if (out.id() == TypeId::kInvalid || out.id() == TypeId::kAny || out.id() == TypeId::kSqlNull) {
    return std::nullopt;
  }
  return out;
}

size_t PreparedStatement::column_count() const {
  return duckdb_prepared_statement_column_count(stmt_);
}

std::string PreparedStatement::column_name(size_t col) const {
  const char* n = duckdb_prepared_statement_column_name(stmt_, col);
  std::string out = n != nullptr ? n : "";
  duckdb_free(const_cast<char*>(n));
  return out;
}

LogicalType PreparedStatement::column_type(size_t col) const {
  return LogicalType::Adopt(duckdb_prepared_statement_column_logical_type(stmt_, col));
}

Result<StreamResult> PreparedStatement::ExecuteStreaming(ErrorType* error_type) {
  duckdb_pending_result pending = nullptr;
  if (duckdb_pending_prepared_streaming(stmt_, &pending) == DuckDBError) {
    const char* e = duckdb_pending_error(pending);
    std::string msg = e != nullptr ? e : "DuckDB: cannot run the statement";
    duckdb_destroy_pending(&pending);
    if (error_type != nullptr) *error_type = ErrorTypeFromMessage(msg);
    return InvalidArgumentError("{}", msg);
  }
  auto result = std::make_unique<ResultState>();
  duckdb_state state = duckdb_execute_pending(pending, &result->result);
  duckdb_destroy_pending(&pending);
  if (state == DuckDBError) {
    Status st = ResultError(&result->result, error_type);
    duckdb_destroy_result(&result->result);
    return st;
  }
  return StreamResult(std::move(result));
}

Result<ExtractedStatements> ExtractedStatements::Extract(Connection& conn, std::string_view sql,
                                                         ErrorType* error_type) {
  std::string text(sql);
  duckdb_extracted_statements stmts = nullptr;
  idx_t n = duckdb_extract_statements(conn.handle(), text.c_str(), &stmts);
  if (n == 0) {
    const char* e = stmts != nullptr ? duckdb_extract_statements_error(stmts) : nullptr;
    if (e != nullptr) {
      std::string msg = e;
      duckdb_destroy_extracted(&stmts);
      if (error_type != nullptr) *error_type = ErrorTypeFromMessage(msg);
      if (error_type != nullptr && *error_type == ErrorType::kInvalid)
        *error_type = ErrorType::kParser;
      return InvalidArgumentError("{}", msg);
    }
  }
  return ExtractedStatements(conn.handle(), stmts, n);
}

ExtractedStatements::ExtractedStatements(ExtractedStatements&& other) noexcept
    : conn_(other.conn_), stmts_(std::exchange(other.stmts_, nullptr)), count_(other.count_) {}

ExtractedStatements::~ExtractedStatements() {
  if (stmts_ != nullptr) duckdb_destroy_extracted(&stmts_);
}

Result<std::unique_ptr<PreparedStatement>> ExtractedStatements::Prepare(size_t i,
                                                                        ErrorType* error_type) {
  duckdb_prepared_statement stmt = nullptr;
  if (duckdb_prepare_extracted_statement(conn_, stmts_, i, &stmt) == DuckDBError) {
    return PrepareError(&stmt, error_type);
  }
  return std::unique_ptr<PreparedStatement>(new PreparedStatement(stmt));
}

StreamResult::StreamResult(std::unique_ptr<ResultState> result) : result_(std::move(result)) {
  idx_t n = duckdb_column_count(&result_->result);
  for (idx_t i = 0; i < n; ++i) {
    const char* name = duckdb_column_name(&result_->result, i);
    names_.emplace_back(name != nullptr ? name : "");
  }
}

StreamResult::StreamResult(StreamResult&& other) noexcept
    : result_(std::move(other.result_)), names_(std::move(other.names_)) {}

StreamResult& StreamResult::operator=(StreamResult&& other) noexcept {
  if (this != &other) {
    if (result_ != nullptr) duckdb_destroy_result(&result_->result);
    result_ = std::move(other.result_);
    names_ = std::move(other.names_);
  }
  return *this;
}

StreamResult::~StreamResult() {
  if (result_ != nullptr) duckdb_destroy_result(&result_->result);
}

LogicalType StreamResult::column_type(size_t col) const {
  return LogicalType::Adopt(duckdb_column_logical_type(&result_->result, col));
}

ReturnType StreamResult::return_type() const {
  switch (duckdb_result_return_type(result_->result)) {
    case DUCKDB_RESULT_TYPE_CHANGED_ROWS:
      return ReturnType::kChangedRows;
    case DUCKDB_RESULT_TYPE_QUERY_RESULT:
      return ReturnType::kRows;
    default:
      return ReturnType::kNothing;
  }
}

StatementType StreamResult::statement_type() const {
  return static_cast<StatementType>(duckdb_result_statement_type(result_->result));
}

Result<std::optional<DataChunk>> StreamResult::Fetch(ErrorType* error_type) {
  duckdb_data_chunk chunk = duckdb_fetch_chunk(result_->result);
  if (chunk == nullptr) {
    if (duckdb_result_error(&result_->result) != nullptr)
      return ResultError(&result_->result, error_type);
    return std::optional<DataChunk>();
  }
  return std::optional<DataChunk>(DataChunk(chunk, names_.size()));
}

Value& Value::operator=(Value&& other) noexcept {
  if (this != &other) {
    if (v_ != nullptr) duckdb_destroy_value(&v_);
    v_ = std::exchange(other.v_, nullptr);
  }
  return *this;
}

Value::~Value() {
  if (v_ != nullptr) duckdb_destroy_value(&v_);
}

Value Value::Null() { return Value(duckdb_create_null_value()); }
Value Value::Varchar(std::string_view text) {
  return Value(duckdb_create_varchar_length(text.data(), text.size()));
}
Value Value::Blob(std::string_view bytes) {
  return Value(duckdb_create_blob(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}
Value Value::Boolean(bool v) { return Value(duckdb_create_bool(v)); }
Value Value::Int16(int16_t v) { return Value(duckdb_create_int16(v)); }
Value Value::Int32(int32_t v) { return Value(duckdb_create_int32(v)); }
Value Value::Int64(int64_t v) { return Value(duckdb_create_int64(v)); }
Value Value::Float(float v) { return Value(duckdb_create_float(v)); }
Value Value::Double(double v) { return Value(duckdb_create_double(v)); }
Value Value::Date(int32_t days) { return Value(duckdb_create_date(duckdb_date{days})); }
Value Value::Time(int64_t micros) { return Value(duckdb_create_time(duckdb_time{micros})); }
Value Value::Timestamp(int64_t micros) {
  return Value(duckdb_create_timestamp(duckdb_timestamp{micros}));
}
Value Value::TimestampTz(int64_t micros) {
  return Value(duckdb_create_timestamp_tz(duckdb_timestamp{micros}));
}
Value Value::Interval(int32_t months, int32_t days, int64_t micros) {
  return Value(duckdb_create_interval(duckdb_interval{months, days, micros}));
}
Value Value::Uuid(uint64_t upper, uint64_t lower) {
  return Value(duckdb_create_uuid(duckdb_uhugeint{lower, upper}));
}
Value Value::List(const LogicalType& child, std::vector<Value> values) {
  std::vector<duckdb_value> handles;
  for (const Value& v : values) handles.push_back(v.handle());
  return Value(duckdb_create_list_value(child.handle(), handles.data(), handles.size()));
}

PreparedStatement::~PreparedStatement() { duckdb_destroy_prepare(&stmt_); }

Status PreparedStatement::BindInt64(size_t index, int64_t value) {
  if (duckdb_bind_int64(stmt_, index, value) == DuckDBError) {
    return InvalidArgumentError("DuckDB: cannot bind parameter ${} of the prepared statement",
                                index);
  }
  return Status::OK();
}

Result<QueryResult> PreparedStatement::Execute() {
  auto result = std::make_unique<ResultState>();
  if (duckdb_execute_prepared(stmt_, &result->result) == DuckDBError) {
    Status st = ResultError(&result->result);
    duckdb_destroy_result(&result->result);
    return st;
  }
  return QueryResult(std::move(result));
}

Result<std::vector<std::vector<std::optional<std::string>>>> Connection::QueryText(
    std::string_view select) {
  ASSIGN_OR_RETURN(QueryResult result,
                   Query(fmt::format("SELECT COLUMNS(*)::VARCHAR FROM ({})", select)));
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (size_t i = 0; i < result.chunk_count(); ++i) {
    ResultChunk c = result.chunk(i);
    for (size_t r = 0; r < c.size(); ++r) {
      auto& row = rows.emplace_back();
      for (size_t col = 0; col < result.column_count(); ++col) {
        if (c.IsNull(col, r)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(std::string(c.GetString(col, r)));
        }
      }
    }
  }
  return rows;
}

ResultChunk::ResultChunk(_duckdb_data_chunk* chunk, const std::vector<ColumnType>* types)
    : chunk_(chunk), types_(types), rows_(duckdb_data_chunk_get_size(chunk)) {}

bool ResultChunk::IsNull(size_t col, size_t row) const {
  uint64_t* validity = duckdb_vector_get_validity(duckdb_data_chunk_get_vector(chunk_, col));
  return validity != nullptr && !duckdb_validity_row_is_valid(validity, row);
}

namespace {
template <typename T>
const T* ColumnData(duckdb_data_chunk chunk, size_t col) {
  return static_cast<const T*>(duckdb_vector_get_data(duckdb_data_chunk_get_vector(chunk, col)));
}
}  // namespace

bool ResultChunk::GetBool(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kBoolean);
  return ColumnData<bool>(chunk_, col)[row];
}
int32_t ResultChunk::GetInt32(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kInt32);
  return ColumnData<int32_t>(chunk_, col)[row];
}
int64_t ResultChunk::GetInt64(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kInt64);
  return ColumnData<int64_t>(chunk_, col)[row];
}
float ResultChunk::GetFloat(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kFloat);
  return ColumnData<float>(chunk_, col)[row];
}
double ResultChunk::GetDouble(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kDouble);
  return ColumnData<double>(chunk_, col)[row];
}
int32_t ResultChunk::GetDate(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kDate);
  return ColumnData<duckdb_date>(chunk_, col)[row].days;
}
int64_t ResultChunk::GetTimestamp(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kTimestamp);
  return ColumnData<duckdb_timestamp>(chunk_, col)[row].micros;
}
void ResultChunk::GetUuid(size_t col, size_t row, uint8_t out[16]) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kUuid);
  // Stored as a hugeint whose upper half has its top bit flipped (so that signed order is
  // the text's order): flipped back, the halves are the bytes, most significant first.
  const duckdb_hugeint& h = ColumnData<duckdb_hugeint>(chunk_, col)[row];
  const uint64_t upper = static_cast<uint64_t>(h.upper) ^ (uint64_t{1} << 63);
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(upper >> (56 - 8 * i));
    out[8 + i] = static_cast<uint8_t>(h.lower >> (56 - 8 * i));
  }
}
std::string_view ResultChunk::GetString(size_t col, size_t row) const {
  SLUICE_ASSERT((*types_)[col] == ColumnType::kVarchar || (*types_)[col] == ColumnType::kBlob);
  const duckdb_string_t& s = ColumnData<duckdb_string_t>(chunk_, col)[row];
  uint32_t len = duckdb_string_t_length(s);
  return {duckdb_string_t_data(const_cast<duckdb_string_t*>(&s)), len};
}

std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string QuoteLiteral(std::string_view value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

size_t ExplainPrefixLength(std::string_view sql) {
  size_t i = 0;
  auto skip_space = [&] {
    while (i < sql.size() && std::isspace(static_cast<unsigned char>(sql[i]))) ++i;
  };
  auto word = [&](std::string_view w) {
    skip_space();
    if (i + w.size() >= sql.size() || !std::isspace(static_cast<unsigned char>(sql[i + w.size()])))
      return false;
    for (size_t k = 0; k < w.size(); ++k) {
      if (std::toupper(static_cast<unsigned char>(sql[i + k])) != w[k]) return false;
    }
    i += w.size();
    return true;
  };
  if (!word("EXPLAIN")) return 0;
  word("ANALYZE");
  skip_space();
  return i;
}

}  // namespace sluice::duck
