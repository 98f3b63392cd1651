// The rewrites' planning queries: DESCRIBE, EXPLAIN's estimates, the function catalogue,
// the collation and order settings.
#include "query/rewrite/probes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "query/rewrite/key_packing.h"
#include "query/rewrite/rewrite.h"

namespace sluice::query::rewrite {

struct UserFunctionCache {
  std::mutex mu;
  std::optional<Catalogue> user;  // guarded by mu
};

std::shared_ptr<UserFunctionCache> MakeUserFunctionCache() {
  return std::make_shared<UserFunctionCache>();
}

Result<std::optional<int64_t>> ProbeGroups(duck::Connection& conn, const std::string& key_list,
                                           const std::string& input_sql, int64_t total_rows) {
  constexpr int64_t kProbeRows = 1'000'000;
  ASSIGN_OR_RETURN(
      auto probe,
      Ask(conn,
          fmt::format("SELECT sum(c)::BIGINT, count(*), count(*) FILTER (WHERE c = 1) FROM (SELECT "
                      "hash({0}) AS h, count(*) AS c FROM (SELECT {0} FROM ({1}) AS __sluice_in "
                      "LIMIT {2}) AS __sluice_probe GROUP BY h)",
                      key_list, input_sql, kProbeRows),
          "group probe"));
  if (probe.size() != 1 || !probe[0][0] || !probe[0][1] || !probe[0][2])
    return std::optional<int64_t>();
  double n = std::atof(probe[0][0]->c_str());
  double distinct = std::atof(probe[0][1]->c_str());
  double once = std::atof(probe[0][2]->c_str());
  double total = static_cast<double>(total_rows);
  double estimate =
      n <= 0 || n >= total ? distinct : std::sqrt(total / n) * once + (distinct - once);
  return std::optional<int64_t>(
      static_cast<int64_t>(std::min(estimate, std::max(total, distinct))));
}

bool UserFunctionsCached(UserFunctionCache& cache) {
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.user.has_value();
}

Status PlanningError(const Status& st, std::string_view what) {
  if (st.code() == StatusCode::kAborted || st.code() == StatusCode::kResourceExhausted) return st;
  return NotApplicable("{} failed: {}", what, st.message());
}

Result<Rows> Ask(duck::Connection& conn, const std::string& sql, std::string_view what) {
  auto rows = conn.QueryText(sql);
  if (!rows.ok()) return PlanningError(rows.status(), what);
  return std::move(rows).value();
}

Result<Rows> AskStatement(duck::Connection& conn, const std::string& sql, std::string_view what) {
  auto result = conn.Query(sql);
  if (!result.ok()) return PlanningError(result.status(), what);
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (size_t i = 0; i < result->chunk_count(); ++i) {
    duck::ResultChunk c = result->chunk(i);
    for (size_t r = 0; r < c.size(); ++r) {
      auto& row = rows.emplace_back();
      for (size_t col = 0; col < result->column_count(); ++col) {
        if (result->column_type(col) != duck::ColumnType::kVarchar || c.IsNull(col, r)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(std::string(c.GetString(col, r)));
        }
      }
    }
  }
  return rows;
}

Result<Json> ParseStatement(duck::Connection& conn, std::string_view sql) {
  Result<sql_tree::SqlTree> tree = sql_tree::SqlTree::Parse(conn, sql);
  if (!tree.ok()) return PlanningError(tree.status(), "json_serialize_sql");
  if (!tree->ok()) return NotApplicable("{}", tree->error());
  if (tree->statement_count() != 1) return NotApplicable("not exactly one statement");
  return std::move(tree->doc()["statements"][0]);
}

Result<Json> ParseExpr(duck::Connection& conn, std::string_view expr) {
  Result<Json> e = sql_tree::ParseExpression(conn, expr);
  if (!e.ok()) return PlanningError(e.status(), "json_serialize_sql");
  return e;
}

Result<std::vector<Column>> Describe(duck::Connection& conn, const std::string& select) {
  ASSIGN_OR_RETURN(auto rows, AskStatement(conn, "DESCRIBE " + select, "DESCRIBE"));
  std::vector<Column> out;
  for (auto& r : rows) {
    if (r.size() < 2 || !r[0] || !r[1]) return NotApplicable("DESCRIBE returned an incomplete row");
    out.push_back({*r[0], *r[1]});
  }
  return out;
}

Result<Estimates> EstimatePlan(duck::Connection& conn, const std::string& select) {
  ASSIGN_OR_RETURN(auto rows, AskStatement(conn, "EXPLAIN (FORMAT JSON) " + select, "EXPLAIN"));
  Estimates out;
  for (auto& r : rows) {
    if (r.size() < 2 || !r[1]) continue;
    nlohmann::json plan = nlohmann::json::parse(*r[1], nullptr, false);
    if (plan.is_discarded()) continue;
    std::vector<const nlohmann::json*> queue{&plan};  // breadth first: the root's estimate first
    for (size_t i = 0; i < queue.size(); ++i) {
      const nlohmann::json* j = queue[i];
      if (j->is_object()) {
        auto it = j->find("Estimated Cardinality");
        if (it != j->end() && it->is_string()) {
          int64_t e = std::atoll(it->get<std::string>().c_str());
          if (out.output < 0) out.output = e;
          out.largest = std::max(out.largest, e);
        }
      }
      if (j->is_structured()) {
        for (const nlohmann::json& c : *j) queue.push_back(&c);
      }
    }
  }
  if (out.output < 0) return NotApplicable("EXPLAIN gave no cardinality estimate");
  return out;
}
Result<int64_t> EstimateRows(duck::Connection& conn, const std::string& select) {
  ASSIGN_OR_RETURN(Estimates e, EstimatePlan(conn, select));
  return e.largest;
}

std::string DistinctKeysExpr(const std::string& key_list, int64_t est_rows) {
  int64_t m = std::max<int64_t>(64, est_rows >> 20);
  return fmt::format("count(DISTINCT hash({0})) FILTER (WHERE hash({0}) % {1} = 0) * {1}", key_list,
                     m);
}

namespace {

Result<Catalogue> AskCatalogue(duck::Connection& conn, std::string_view which) {
  ASSIGN_OR_RETURN(
      auto rows,
      Ask(conn,
          fmt::format("SELECT lower(function_name), bool_or(function_type = 'aggregate'), "
                      "bool_and(coalesce(stability, '') = 'CONSISTENT' AND function_type IN "
                      "('scalar', 'aggregate')) FROM duckdb_functions() WHERE {} GROUP BY 1",
                      which),
          "duckdb_functions()"));
  Catalogue out;
  for (auto& r : rows) {
    if (r.size() != 3 || !r[0] || !r[1] || !r[2]) continue;
    out[*r[0]] = {*r[1] == "true", *r[2] == "true"};
  }
  return out;
}

}  // namespace

Result<Catalogue> LoadCatalogue(duck::Connection& conn, UserFunctionCache* cache,
                                bool builtin_only) {
  static std::mutex mu;
  static std::optional<Catalogue> builtin;
  Catalogue out;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!builtin) {
      ASSIGN_OR_RETURN(Catalogue c, AskCatalogue(conn, "internal"));
      builtin = std::move(c);
    }
    out = *builtin;
  }
  if (builtin_only) return out;
  std::optional<Catalogue> cached_user;
  if (cache != nullptr) {
    std::lock_guard<std::mutex> lock(cache->mu);
    cached_user = cache->user;
  }
  if (!cached_user) {
    ASSIGN_OR_RETURN(Catalogue c, AskCatalogue(conn, "NOT internal"));
    if (cache != nullptr) {
      std::lock_guard<std::mutex> lock(cache->mu);
      cache->user = c;
    }
    cached_user = std::move(c);
  }
  const Catalogue& user = *cached_user;
  for (auto& [name, info] : user) {
    auto [it, inserted] = out.emplace(name, info);
    if (!inserted)
      it->second = {it->second.aggregate || info.aggregate,
                    it->second.consistent && info.consistent};
  }
  return out;
}

namespace {

Status CheckNoCollation(duck::Connection& conn) {
  ASSIGN_OR_RETURN(auto rows,
                   Ask(conn,
                       "SELECT current_setting('default_collation'), "
                       "(SELECT count(*) FROM duckdb_tables() WHERE sql ILIKE '%COLLATE%')",
                       "collation check"));
  if (rows.size() != 1 || !rows[0][0] || !rows[0][1])
    return NotApplicable("collation check returned nothing");
  if (!rows[0][0]->empty() || *rows[0][1] != "0")
    return NotApplicable("a collation may apply to a VARCHAR key");
  return Status::OK();
}

}  // namespace

Status CheckKeyTypes(duck::Connection& conn, const std::vector<Column>& keys) {
  bool varchar = false;
  for (const Column& k : keys) {
    if (!HashableKeyType(k.type))
      return NotApplicable("key type {} not partitionable by hash()", k.type);
    varchar |= k.type == "VARCHAR";
  }
  if (varchar) RETURN_IF_ERROR(CheckNoCollation(conn));
  return Status::OK();
}

Result<OrderDefaults> LoadOrderDefaults(duck::Connection& conn) {
  ASSIGN_OR_RETURN(auto rows, Ask(conn,
                                  "SELECT upper(current_setting('default_order')), "
                                  "upper(current_setting('default_null_order'))",
                                  "order settings"));
  if (rows.size() != 1 || !rows[0][0] || !rows[0][1])
    return NotApplicable("order settings returned nothing");
  OrderDefaults d;
  d.descending = rows[0][0]->rfind("DESC", 0) == 0;
  d.null_order = *rows[0][1];
  std::replace(d.null_order.begin(), d.null_order.end(), ' ', '_');
  return d;
}

}  // namespace sluice::query::rewrite
