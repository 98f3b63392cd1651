// Fuzz target for the grant statements' grammar (src/query/authz/grant_sql.h): any text
// is "not a grant statement", a statement, or an error whose message starts with a
// SQLSTATE ("42601: ..."); never a crash. Cut copies of each input are read too.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "query/authz/grant_sql.h"

namespace {

void Check(std::string_view sql) {
  auto r = sluice::query::authz::ParseGrantStatement(sql);
  if (!r.ok()) {
    const std::string& m = r.status().message();
    if (m.size() < 7 || m[5] != ':' || m[6] != ' ') std::abort();
    if (!sluice::query::authz::IsGrantStatement(sql)) std::abort();
    return;
  }
  if (r->has_value()) {
    if (!sluice::query::authz::IsGrantStatement(sql)) std::abort();
    if (sluice::query::authz::GrantCommandTag(**r).empty()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view sql(reinterpret_cast<const char*>(data), size);
  Check(sql);
  for (size_t cut = 1; cut < 8 && size > 1; ++cut) Check(sql.substr(0, size * cut / 8));
  return 0;
}
