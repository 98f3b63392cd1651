// JsonType(): VARCHAR with the alias JSON.
#include "duck/json_type.h"

#include <duckdb.h>

namespace sluice::duck {

LogicalType JsonType() {
  LogicalType t = LogicalType::Varchar();
  duckdb_logical_type_set_alias(t.handle(), "JSON");
  return t;
}

}  // namespace sluice::duck
