# Finds DuckDB's shared library and C header, in this order:
#   1. an explicit path: -DDUCKDB_ROOT=DIR (DIR/libduckdb.so, DIR/duckdb.h or DIR/include/duckdb.h)
#   2. an installed copy (find_library / find_path on the system paths)
#   3. the pinned npm packages in node_modules/ (scripts/setup.sh installs them):
#      @duckdb/node-bindings-linux-x64 ships libduckdb.so, duckdb ships duckdb.h.
# Defines the imported target DuckDB::duckdb.
set(_npm ${PROJECT_SOURCE_DIR}/node_modules)
if(DUCKDB_ROOT)
  find_library(DUCKDB_LIBRARY NAMES duckdb PATHS ${DUCKDB_ROOT} ${DUCKDB_ROOT}/lib NO_DEFAULT_PATH)
  find_path(DUCKDB_INCLUDE_DIR duckdb.h PATHS ${DUCKDB_ROOT} ${DUCKDB_ROOT}/include NO_DEFAULT_PATH)
else()
  find_library(DUCKDB_LIBRARY NAMES duckdb
    PATHS ${_npm}/@duckdb/node-bindings-linux-x64)
  find_path(DUCKDB_INCLUDE_DIR duckdb.h
    PATHS ${_npm}/duckdb/src/duckdb/src/include)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(DuckDB REQUIRED_VARS DUCKDB_LIBRARY DUCKDB_INCLUDE_DIR)
if(DuckDB_FOUND AND NOT TARGET DuckDB::duckdb)
  add_library(DuckDB::duckdb SHARED IMPORTED)
  set_target_properties(DuckDB::duckdb PROPERTIES
    IMPORTED_LOCATION ${DUCKDB_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${DUCKDB_INCLUDE_DIR})
endif()
