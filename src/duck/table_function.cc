// TableFunction over the C API: the callbacks DuckDB calls, handing its handles to the
// function object and its errors (and exceptions) back to DuckDB.
#include "duck/table_function.h"

#include <duckdb.h>

#include <exception>

namespace sluice::duck {

namespace {

// A named or positional parameter's value, destroyed with the holder.
class ParameterValue {
 public:
  explicit ParameterValue(duckdb_value v) : v_(v) {}
  ~ParameterValue() {
    if (v_ != nullptr) duckdb_destroy_value(&v_);
  }
  ParameterValue(const ParameterValue&) = delete;
  ParameterValue& operator=(const ParameterValue&) = delete;

  // Given and not NULL.
  bool present() const { return v_ != nullptr && !duckdb_is_null_value(v_); }
  duckdb_value get() const { return v_; }

  std::string Text() const {
    char* text = duckdb_get_varchar(v_);
    std::string out = text;
    duckdb_free(text);
    return out;
  }

 private:
  duckdb_value v_;
};

const TableFunction& FunctionOf(void* extra) { return *static_cast<const TableFunction*>(extra); }

void BindCallback(duckdb_bind_info info) {
  const TableFunction& fn = FunctionOf(duckdb_bind_get_extra_info(info));
  TableBind bind(info);
  try {
    Result<std::unique_ptr<TableFunction::BindData>> data = fn.Bind(bind);
    if (!data.ok()) return duckdb_bind_set_error(info, data.status().message().c_str());
    duckdb_bind_set_bind_data(info, data->release(),
                              [](void* p) { delete static_cast<TableFunction::BindData*>(p); });
  } catch (const std::exception& e) {
    duckdb_bind_set_error(info, e.what());
  }
}

void InitCallback(duckdb_init_info info) {
  const TableFunction& fn = FunctionOf(duckdb_init_get_extra_info(info));
  const auto& data = *static_cast<const TableFunction::BindData*>(duckdb_init_get_bind_data(info));
  TableInit init(info);
  try {
    Result<std::unique_ptr<TableFunction::ScanState>> state = fn.Init(data, init);
    if (!state.ok()) return duckdb_init_set_error(info, state.status().message().c_str());
    duckdb_init_set_init_data(info, state->release(),
                              [](void* p) { delete static_cast<TableFunction::ScanState*>(p); });
  } catch (const std::exception& e) {
    duckdb_init_set_error(info, e.what());
  }
}

void ScanCallback(duckdb_function_info info, duckdb_data_chunk output) {
  const TableFunction& fn = FunctionOf(duckdb_function_get_extra_info(info));
  const auto& data =
      *static_cast<const TableFunction::BindData*>(duckdb_function_get_bind_data(info));
  auto& state = *static_cast<TableFunction::ScanState*>(duckdb_function_get_init_data(info));
  TableOutput out(output);
  try {
    Status st = fn.Scan(data, state, out);
    if (!st.ok()) duckdb_function_set_error(info, st.message().c_str());
  } catch (const std::exception& e) {
    duckdb_function_set_error(info, e.what());
  }
}

}  // namespace

std::optional<std::string> TableBind::TextParameter(size_t i) const {
  ParameterValue v(duckdb_bind_get_parameter(info_, i));
  if (!v.present()) return std::nullopt;
  return v.Text();
}

std::optional<int64_t> TableBind::NamedInt64(const char* name) const {
  ParameterValue v(duckdb_bind_get_named_parameter(info_, name));
  if (!v.present()) return std::nullopt;
  return duckdb_get_int64(v.get());
}

std::optional<std::string> TableBind::NamedText(const char* name) const {
  ParameterValue v(duckdb_bind_get_named_parameter(info_, name));
  if (!v.present()) return std::nullopt;
  return v.Text();
}

std::optional<int64_t> TableBind::NamedTimestampTz(const char* name) const {
  ParameterValue v(duckdb_bind_get_named_parameter(info_, name));
  if (!v.present()) return std::nullopt;
  return duckdb_get_timestamp_tz(v.get()).micros;
}

std::optional<std::vector<int64_t>> TableBind::NamedInt64List(const char* name) const {
  ParameterValue v(duckdb_bind_get_named_parameter(info_, name));
  if (!v.present()) return std::nullopt;
  std::vector<int64_t> out;
  const idx_t n = duckdb_get_list_size(v.get());
  for (idx_t i = 0; i < n; ++i) {
    ParameterValue child(duckdb_get_list_child(v.get(), i));
    if (child.present()) out.push_back(duckdb_get_int64(child.get()));
  }
  return out;
}

void TableBind::AddResultColumn(const std::string& name, const LogicalType& type) {
  duckdb_bind_add_result_column(info_, name.c_str(), type.handle());
}

void TableBind::SetCardinality(uint64_t rows, bool exact) {
  duckdb_bind_set_cardinality(info_, rows, exact);
}

std::vector<uint64_t> TableInit::ProjectedColumns() const {
  std::vector<uint64_t> out;
  const idx_t n = duckdb_init_get_column_count(info_);
  for (idx_t i = 0; i < n; ++i) out.push_back(duckdb_init_get_column_index(info_, i));
  return out;
}

void TableInit::SetMaxThreads(uint64_t threads) { duckdb_init_set_max_threads(info_, threads); }

Vector TableOutput::column(size_t i) const {
  return Vector(duckdb_data_chunk_get_vector(chunk_, i));
}

void TableOutput::SetSize(uint64_t rows) { duckdb_data_chunk_set_size(chunk_, rows); }

Status RegisterTableFunction(Connection& conn, const TableFunctionSignature& signature,
                             std::unique_ptr<TableFunction> function) {
  duckdb_table_function tf = duckdb_create_table_function();
  duckdb_table_function_set_name(tf, signature.name.c_str());
  for (const LogicalType& t : signature.parameters)
    duckdb_table_function_add_parameter(tf, t.handle());
  for (const auto& [name, type] : signature.named_parameters) {
    duckdb_table_function_add_named_parameter(tf, name.c_str(), type.handle());
  }
  duckdb_table_function_set_extra_info(tf, function.release(),
                                       [](void* p) { delete static_cast<TableFunction*>(p); });
  duckdb_table_function_set_bind(tf, BindCallback);
  duckdb_table_function_set_init(tf, InitCallback);
  duckdb_table_function_set_function(tf, ScanCallback);
  duckdb_table_function_supports_projection_pushdown(tf, signature.projection_pushdown);
  duckdb_state registered = duckdb_register_table_function(conn.handle(), tf);
  duckdb_destroy_table_function(&tf);
  if (registered == DuckDBError) {
    return InternalError("DuckDB: cannot register table function {}", signature.name);
  }
  return Status::OK();
}

}  // namespace sluice::duck
