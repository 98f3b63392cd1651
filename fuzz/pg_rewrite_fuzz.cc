// Fuzz target for the query server's rewrite of client SQL (src/query/pg_catalog): the
// input is an SQL string as a Postgres client would send it. Whatever it is, the rewrite
// must return SQL or an InvalidArgument error (no crash, no hang), and what it returns
// must lex cleanly (a rewrite never opens a literal or comment it does not close) and
// come back unchanged from a second rewrite when nothing Postgres-only is left in it.
// Each input is also rewritten cut at a few points, so a replay of whole queries covers
// truncated ones too.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "query/pg_catalog/lexer.h"
#include "query/pg_catalog/rewrite.h"

using namespace sluice::query::pg_catalog;

namespace {

void Check(std::string_view sql) {
  auto result = RewriteForDuckDB(sql);
  const bool lexes = Lex(sql).ok();
  if (!result.ok()) {
    if (result.status().code() != sluice::StatusCode::kInvalidArgument) std::abort();
    if (result.status().message().empty() || lexes) std::abort();
    return;
  }
  if (!lexes) std::abort();
  if (!Lex(*result).ok()) std::abort();
  if (!RewriteForDuckDB(*result).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view sql(reinterpret_cast<const char*>(data), size);
  Check(sql);
  for (size_t cut = 1; cut < 8 && size > 1; ++cut) Check(sql.substr(0, size * cut / 8));
  return 0;
}
