// The group-by rewrite (D7, D13, D18, D20): a group-by with more groups than fit in memory
// run as N parts, each the group-by over the input rows whose keys hash to it. Before the
// statistics scan that counts the groups, cheaper evidence may show they fit: DuckDB's
// estimate, the Parquet footers' bound (footers.cc), a probe of the first million rows.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "query/rewrite/key_packing.h"
#include "query/rewrite/planner.h"

namespace sluice::query::rewrite {

Result<Plan> Planner::TryGroupBy(Candidate& c) {
  assumed_ = false;  // nothing assumed here (D25 is the latest row's)
  Json& n = *c.node;
  if (!n.contains("group_expressions") || n["group_expressions"].empty())
    return NotApplicable("no GROUP BY");
  size_t ng = n["group_expressions"].size();
  if (n["group_sets"].size() != 1 || n["group_sets"][0].size() != ng) {
    return NotApplicable("GROUPING SETS, ROLLUP or CUBE");
  }
  if (Str(n, "aggregate_handling") != "STANDARD_HANDLING") return NotApplicable("GROUP BY ALL");
  if (!n["modifiers"].empty()) return NotApplicable("ORDER BY, LIMIT or DISTINCT on the group-by");
  if (!IsNullOrMissing(n, "qualify")) return NotApplicable("QUALIFY on the group-by");
  RETURN_IF_ERROR(LoadCatalogueOnce());
  DeterminismCheck check{cat_, c.node, true, nullptr};
  RETURN_IF_ERROR(check.Visit(n, nullptr));

  // The keys as expressions over the input (GROUP BY 2 is the second select item).
  std::vector<Json> keys;
  for (const Json& g : n["group_expressions"]) {
    if (Str(g, "class") == "CONSTANT") {
      const Json& v = g["value"];
      if (!v.contains("value") || !v["value"].is_number_integer())
        return NotApplicable("GROUP BY a constant");
      int64_t pos = v["value"].get<int64_t>();
      if (pos < 1 || pos > static_cast<int64_t>(n["select_list"].size()))
        return NotApplicable("GROUP BY position");
      Json k = n["select_list"][pos - 1];
      k["alias"] = "";
      keys.push_back(k);
    } else {
      keys.push_back(g);
    }
  }
  int aggregates = 0;
  ForEachOwnExpression(n["select_list"], [&](const Json& e) {
    if (Str(e, "class") == "FUNCTION" && cat_[AsciiLower(Str(e, "function_name"))].aggregate)
      ++aggregates;
  });
  if (aggregates == 0) aggregates = 1;

  Json key_node = n;
  key_node["group_expressions"] = Json::array();
  key_node["group_sets"] = Json::array();
  key_node["having"] = nullptr;
  Json items = Json::array();
  for (size_t i = 0; i < keys.size(); ++i) {
    Json k = keys[i];
    k["alias"] = fmt::format("__sluice_k{}", i);
    items.push_back(k);
  }
  key_node["select_list"] = items;
  ASSIGN_OR_RETURN(Json key_standalone, Standalone(key_node, c.scope));
  ASSIGN_OR_RETURN(std::string key_sql, Render(key_standalone));
  ASSIGN_OR_RETURN(std::vector<Column> key_cols, Describe(conn_, key_sql));
  RETURN_IF_ERROR(CheckKeyTypes(conn_, key_cols));
  std::vector<std::string> key_names;
  for (size_t i = 0; i < keys.size(); ++i) key_names.push_back(fmt::format("__sluice_k{}", i));
  std::string key_list = fmt::format("{}", fmt::join(key_names, ", "));
  int64_t per_group = 96 + 24 * aggregates;
  for (const Column& k : key_cols) per_group += 2 * TypeWidth(k.type);
  auto fits_whole = [&](int64_t g) {
    return 1.1 * static_cast<double>(g) * static_cast<double>(per_group) <=
           0.75 * static_cast<double>(options_.memory_limit_bytes);
  };
  // The footers' bound first (D18, D22): when it fits, DuckDB's plan is the answer and
  // neither EXPLAIN nor a probe is needed. A failed footer read only means no bound; an
  // interrupt is the user's.
  std::optional<int64_t> key_bound;
  std::optional<KeyRange> key_range;
  {
    Result<std::optional<int64_t>> bound =
        FooterKeyBound(conn_, tree_, n, keys, key_cols, &key_range);
    if (!bound.ok()) {
      StatusCode code = bound.status().code();
      if (code == StatusCode::kAborted || code == StatusCode::kResourceExhausted)
        return bound.status();
      bound = std::optional<int64_t>();
    }
    if (*bound && fits_whole(**bound) && options_.force_parts == 0) {
      return NotApplicable(
          "at most {} groups (the keys' tables' rows and ranges): they fit in memory", **bound);
    }
    key_bound = *bound;
  }
  // One EXPLAIN of the keys' group-by: its input's rows and its groups.
  ASSIGN_OR_RETURN(
      Estimates estimates,
      EstimatePlan(conn_, fmt::format("SELECT {0} FROM ({1}) AS __sluice_in GROUP BY {0}", key_list,
                                      key_sql)));
  int64_t duckdb_rows = estimates.largest;
  int64_t est_rows = std::max(duckdb_rows, options_.known_input_rows);
  if (est_rows < options_.min_rows_to_rewrite)
    return NotApplicable("estimated {} rows: too few to rewrite", est_rows);

  // No scan when even one group per row would fit: DuckDB's own plan is that.
  if (options_.force_parts == 0 && PartsFor(est_rows, per_group) <= 1) {
    return NotApplicable("at most {} groups fit in memory: DuckDB's own plan", est_rows);
  }
  bool probed = false;
  std::optional<int64_t> probe_groups;
  // Before scanning the whole input for its distinct keys: when DuckDB's own estimate of
  // the groups fits, leave the query to DuckDB (a join with a small dimension's key, say).
  // Only a cost decision: the answer is the same either way.
  if (options_.force_parts == 0) {
    int64_t est_groups = estimates.output;
    // DuckDB estimates read_parquet with an explicit schema (lake tables) at 1,000 rows a
    // file and knows no distinct counts there, so its group estimate is bounded by that
    // and says nothing; elsewhere it often overestimates (10M groups for q4's 1.5M).
    // Before paying a full statistics scan, the first million input rows are probed and
    // the groups estimated from them (GEE: sqrt(N/n) times the keys seen once, plus those
    // seen more often), and a query whose estimate fits is left to DuckDB (D13).
    // An estimate decides only between DuckDB's plan and a scan: groups that fit in three
    // quarters of the memory limit are DuckDB's to aggregate in memory (a part gets half,
    // for the scans beside it: an estimate a little high must not cost a full scan, and
    // GEE's underestimate of a key near the limit must not skip one).
    // (An estimate of no rows or no groups at all, below the rows known to be there, is
    // as blind.)
    bool estimate_blind = options_.known_input_rows > duckdb_rows &&
                          (duckdb_rows <= 0 || est_groups <= 0 || est_groups * 10 >= duckdb_rows);
    if (estimate_blind || !fits_whole(est_groups)) {
      ASSIGN_OR_RETURN(std::optional<int64_t> probe,
                       ProbeGroups(conn_, key_list, key_sql, est_rows));
      if (probe) {
        probed = true;
        est_groups = *probe;
        probe_groups = est_groups;
      }
    }
    if (fits_whole(est_groups)) {
      return NotApplicable("{} {} groups: they fit in memory",
                           probed ? "a probe of the first rows gives" : "DuckDB estimates",
                           est_groups);
    }
  }
  // The groups: the footers' upper bound when the probe's estimate is close below it
  // (within 1.5x: the parts it gives are at most that many more than needed, and never
  // too few), else a statistics scan of the whole input (D20).
  int64_t rows = est_rows, groups = 0;
  std::string counted_by = "a statistics scan";
  if (key_bound && probe_groups &&
      static_cast<double>(*key_bound) <= 1.5 * static_cast<double>(*probe_groups)) {
    groups = *key_bound;
    counted_by = "the footers' bound";
  } else {
    ASSIGN_OR_RETURN(auto stats, Ask(conn_,
                                     fmt::format("SELECT count(*), {} FROM ({}) AS __sluice_in",
                                                 DistinctKeysExpr(key_list, est_rows), key_sql),
                                     "statistics scan"));
    if (stats.size() != 1 || !stats[0][0] || !stats[0][1])
      return NotApplicable("statistics scan returned nothing");
    rows = std::atoll(stats[0][0]->c_str());
    groups = std::atoll(stats[0][1]->c_str());
  }
  int parts = PartsFor(groups, per_group);
  if (parts <= 1 && options_.force_parts == 0)
    return NotApplicable("~{} groups fit in memory: DuckDB's own plan", groups);

  // Each part: the group-by with "hash(keys) % N = i" added to its WHERE, or its share of
  // an integer key's range (D26).
  const std::optional<KeyRange> ranges = RangeParts(key_range, parts, per_group);
  std::vector<Json> range_conds;
  for (int i = 0; ranges && i < parts; ++i) {
    ASSIGN_OR_RETURN(Json rc, ParseExpr(conn_, PartCondition("__sluice_rk", ranges, parts, i)));
    Json key = keys[0];
    key["alias"] = "";
    std::function<void(Json&)> put_key = [&](Json& e) {
      if (e.is_object() && Str(e, "class") == "COLUMN_REF" && e["column_names"].size() == 1 &&
          e["column_names"][0] == "__sluice_rk") {
        e = key;
        return;
      }
      if (e.is_structured()) {
        for (Json& child : e) put_key(child);
      }
    };
    put_key(rc);
    range_conds.push_back(std::move(rc));
  }
  ASSIGN_OR_RETURN(Json cond, ParseExpr(conn_, "hash(1) % 2 = 3"));
  Json& hash_call = cond["left"]["children"][0];
  hash_call["children"] = Json::array();
  for (const Json& k : keys) {
    Json kk = k;
    kk["alias"] = "";
    hash_call["children"].push_back(kk);
  }
  cond["left"]["children"][1]["value"]["value"] = parts;
  ASSIGN_OR_RETURN(Json and_template, ParseExpr(conn_, "true AND true"));
  std::vector<std::string> part_sqls;
  for (int i = 0; i < parts; ++i) {
    Json part = n;
    Json ci = cond;
    ci["right"]["value"]["value"] = i;
    if (ranges) ci = range_conds[i];
    if (IsNullOrMissing(part, "where_clause")) {
      part["where_clause"] = ci;
    } else {
      Json a = and_template;
      a["children"] = Json::array({part["where_clause"], ci});
      part["where_clause"] = a;
    }
    ASSIGN_OR_RETURN(Json standalone, Standalone(part, c.scope));
    ASSIGN_OR_RETURN(std::string sql, Render(standalone));
    part_sqls.push_back(sql);
  }
  std::string how =
      fmt::format("group-by: {} rows (estimate {}), ~{} groups by {}, {} B/group -> {} parts", rows,
                  est_rows, groups, counted_by, per_group, parts);
  if (ranges)
    how += fmt::format("; parts by ranges of the key from {} to {}", ranges->lo, ranges->hi);
  return Finish(
      c, RewriteKind::kGroupBy, parts, [&](int i) { return part_sqls[i]; }, how);
}

}  // namespace sluice::query::rewrite
