// What every part of the rewrites shares: the parse tree's type, "does not apply", names.
#pragma once

#include <fmt/format.h>

#include <cctype>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"
#include "base/strings.h"
#include "duck/database.h"
#include "query/sql_tree/sql_tree.h"

namespace sluice::query::rewrite {

using Json = sql_tree::Json;
using sql_tree::IsTableRef;

// "Does not apply": the query passes through unchanged. Internal only.
template <typename... Args>
Status NotApplicable(fmt::format_string<Args...> f, Args&&... args) {
  return UnimplementedError(f, std::forward<Args>(args)...);
}

inline std::string Str(const Json& j, const char* key) { return sql_tree::StringField(j, key); }

inline bool IsNullOrMissing(const Json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null();
}

inline std::string Quote(std::string_view name) { return duck::QuoteIdentifier(name); }

// A column of a DESCRIBE.
struct Column {
  std::string name;
  std::string type;
};

}  // namespace sluice::query::rewrite
