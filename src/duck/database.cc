#include "duck/database.h"

#include <duckdb.h>

namespace sluice::duck {

std::string_view LibraryVersion() { return duckdb_library_version(); }

}  // namespace sluice::duck
