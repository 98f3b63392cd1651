// Internal to src/duck: a parameterless C-API table function with projection pushdown whose
// callbacks read a shared object (ChunkView's chunks, ChunkFeed's queue) that DuckDB's
// catalog keeps as the function's extra info until the database closes.
#pragma once

#include <duckdb.h>

#include <memory>
#include <string>

#include "base/status.h"
#include "duck/database.h"

namespace sluice::duck {

// `held` is reached in the callbacks through HeldBy<T>(duckdb_*_get_extra_info(info)).
template <typename T>
Status RegisterHeldFunction(Connection& conn, const std::string& name, std::shared_ptr<T> held,
                            duckdb_table_function_bind_t bind, duckdb_table_function_init_t init,
                            duckdb_table_function_t scan) {
  duckdb_table_function tf = duckdb_create_table_function();
  duckdb_table_function_set_name(tf, name.c_str());
  duckdb_table_function_set_extra_info(tf, new std::shared_ptr<T>(std::move(held)),
                                       [](void* p) { delete static_cast<std::shared_ptr<T>*>(p); });
  duckdb_table_function_set_bind(tf, bind);
  duckdb_table_function_set_init(tf, init);
  duckdb_table_function_set_function(tf, scan);
  duckdb_table_function_supports_projection_pushdown(tf, true);
  duckdb_state registered = duckdb_register_table_function(conn.handle(), tf);
  duckdb_destroy_table_function(&tf);
  if (registered == DuckDBError) {
    return InternalError("DuckDB: cannot register table function {}", name);
  }
  return Status::OK();
}

template <typename T>
T& HeldBy(void* extra) {
  return **static_cast<std::shared_ptr<T>*>(extra);
}

}  // namespace sluice::duck
