// duck: the only module that talks to DuckDB (through its C API only).
// Today it reports the linked library's version; the pipeline and query issues grow it.
#pragma once

#include <string_view>

namespace sluice::duck {

// The version of the libduckdb the process loaded, e.g. "v1.5.6".
std::string_view LibraryVersion();

}  // namespace sluice::duck
