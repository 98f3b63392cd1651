// JsonType(): DuckDB's JSON type, a VARCHAR under the alias JSON (which DuckDB's json
// extension reads as JSON), for columns that hold JSON text.
#pragma once

#include "duck/logical_type.h"

namespace sluice::duck {

LogicalType JsonType();

}  // namespace sluice::duck
