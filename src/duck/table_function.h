// TableFunction: a DuckDB table function written as a C++ class, registered through the C
// API without duckdb.h outside this module. DuckDB calls Bind once per query (parameters
// in, columns out), Init once per scan (which columns the query reads) and Scan until it
// returns an empty chunk; their errors become the query's error.
//
//   class Numbers : public TableFunction {
//     Result<std::unique_ptr<BindData>> Bind(TableBind& bind) const override {
//       bind.AddResultColumn("n", LogicalType::BigInt());  ...
//   };
//   RETURN_IF_ERROR(RegisterTableFunction(conn, {.name = "numbers", ...},
//   std::make_unique<Numbers>()));
//
// Lifecycle: the function object is owned by DuckDB's catalog from registration until the
// database closes, and is shared by every query on it: its methods are const and may run on
// several of DuckDB's threads at once. A query's BindData lives as long as its plan; a
// scan's ScanState as long as the scan, used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "duck/database.h"
#include "duck/logical_type.h"

struct _duckdb_bind_info;
struct _duckdb_init_info;

namespace sluice::duck {

// What Bind sees: the call's parameters, and where it declares the result's columns.
class TableBind {
 public:
  explicit TableBind(_duckdb_bind_info* info) : info_(info) {}

  // Positional parameter `i` as text; nullopt when NULL.
  std::optional<std::string> TextParameter(size_t i) const;
  // Named parameters (declared in the signature): nullopt when not given or NULL.
  std::optional<int64_t> NamedInt64(const char* name) const;
  std::optional<std::string> NamedText(const char* name) const;
  // A TIMESTAMPTZ parameter, in microseconds since the epoch.
  std::optional<int64_t> NamedTimestampTz(const char* name) const;
  // A LIST of integers; NULL elements are left out.
  std::optional<std::vector<int64_t>> NamedInt64List(const char* name) const;

  void AddResultColumn(const std::string& name, const LogicalType& type);
  void SetCardinality(uint64_t rows, bool exact);

 private:
  _duckdb_bind_info* info_;
};

// What Init sees: the columns the query reads (projection pushdown) and the scan's threads.
class TableInit {
 public:
  explicit TableInit(_duckdb_init_info* info) : info_(info) {}

  // For each output column, in order, the index of the result column (as Bind added them)
  // it holds. Without projection pushdown: every column.
  std::vector<uint64_t> ProjectedColumns() const;
  void SetMaxThreads(uint64_t threads);

 private:
  _duckdb_init_info* info_;
};

// One output chunk of a scan: column i is ProjectedColumns()[i]; rows start valid.
class TableOutput {
 public:
  explicit TableOutput(_duckdb_data_chunk* chunk) : chunk_(chunk) {}

  // The most rows a chunk holds (DataChunk::Capacity()).
  static uint64_t Capacity() { return DataChunk::Capacity(); }
  Vector column(size_t i) const;
  void SetSize(uint64_t rows);

 private:
  _duckdb_data_chunk* chunk_;
};

class TableFunction {
 public:
  // Per query, from Bind; per scan, from Init. Subclass them with what the function keeps.
  struct BindData {
    virtual ~BindData() = default;
  };
  struct ScanState {
    virtual ~ScanState() = default;
  };

  virtual ~TableFunction() = default;
  // Reads the parameters and adds the result columns.
  virtual Result<std::unique_ptr<BindData>> Bind(TableBind& bind) const = 0;
  virtual Result<std::unique_ptr<ScanState>> Init(const BindData& data, TableInit& init) const = 0;
  // Fills the next chunk (SetSize); a chunk of 0 rows ends the scan.
  virtual Status Scan(const BindData& data, ScanState& state, TableOutput& out) const = 0;
};

struct TableFunctionSignature {
  std::string name;
  std::vector<LogicalType> parameters;
  std::vector<std::pair<std::string, LogicalType>> named_parameters;
  bool projection_pushdown = false;
};

// Registers `function` under `signature.name` on `conn`'s database (DuckDB cannot
// unregister one). An error's message (not its code) becomes the query's error text.
Status RegisterTableFunction(Connection& conn, const TableFunctionSignature& signature,
                             std::unique_ptr<TableFunction> function);

}  // namespace sluice::duck
