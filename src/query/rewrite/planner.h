// The rewrites' planner: tries each node of one statement's tree that could be rewritten
// (the latest-row rewrite in latest_row.cc, the group-by rewrite in group_by.cc) and turns
// the first that applies into steps and a final SELECT (planner.cc).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "query/rewrite/common.h"
#include "query/rewrite/probes.h"
#include "query/rewrite/rewrite.h"
#include "query/rewrite/shapes.h"

namespace sluice::query::rewrite {

// Lifecycle: one per PlanRewrite call, on the caller's thread. `tree` (not changed: the
// planner works on its own copy) and `options` must outlive it.
// The condition (SQL) that puts a row with key `key` into part `i` of `parts`: its
// `hash(key) % parts = i`, or with a range (Planner::RangeParts) its share of the range.
std::string PartCondition(const std::string& key, const std::optional<KeyRange>& range, int parts,
                          int i);

class Planner {
 public:
  Planner(duck::Connection& conn, const RewriteOptions& options, const sql_tree::SqlTree& tree)
      : conn_(conn), options_(options), tree_(tree) {}

  // The plan of the first candidate a rewrite applies to; NotApplicable (Unimplemented)
  // with the reason when none does.
  Result<Plan> Run();

 private:
  using PartSql = std::function<std::string(int part)>;

  // ---- latest row per key (latest_row.cc)

  // The ROW_NUMBER of a latest-row node: its select item (with an alias) or its QUALIFY.
  struct WindowMatch {
    const Json* window = nullptr;
    int item = -1;  // index in the select list, -1 when only in QUALIFY
    std::string alias;
    int64_t limit = 1;  // the rows kept per key: 1, or k for `<= k` (D23)
  };
  bool IsLatestRowShape(const Candidate& c) const;
  Result<WindowMatch> MatchWindow(const Candidate& c) const;
  Result<Plan> TryLatestRow(Candidate& c);
  // D21: the statistics scan's row (`width` values: rows, keys, then each order key's four
  // at order_at[j] and each tie-breaking column's at exact_at[t]) from the Parquet footers,
  // or nullopt when they do not answer it. A tie-breaking column they do not bound gets
  // exact_at[t] = 0 (hashed, not packed). The keys are the footers' upper bound; when the
  // bound asks for several parts they are checked (`keys_checked`): confirmed by a probe,
  // or counted by a scan of the keys and the DOUBLE tie-breakers (`keys_counted`).
  Result<std::optional<std::vector<std::optional<std::string>>>> FooterStatistics(
      const Candidate& c, const WindowMatch& m, const std::vector<Column>& key_cols,
      const std::vector<Column>& order_cols, const std::vector<Column>& tiebreak, bool packable,
      size_t width, const std::vector<size_t>& order_at, std::vector<size_t>& exact_at,
      const std::vector<std::string>& stat_exprs, const std::string& input_sql, bool* keys_counted,
      bool* keys_checked);

  // ---- DISTINCT ON as the latest-row window (distinct_on.cc, D24)

  // Writes every DISTINCT ON node under `j` that D24 converts as the window form; how many.
  Result<int> ConvertDistinctOn(Json& j);
  // The inner nodes (with the ROW_NUMBER) ConvertDistinctOn wrote under `j`.
  static void FindConvertedInners(Json& j, std::vector<const Json*>& out);

  // ---- group-by with very many groups (group_by.cc)

  Result<Plan> TryGroupBy(Candidate& c);

  // ---- shared (planner.cc)

  // The candidates of root_doc_ tried in turn; with `only`, the latest-row rewrite of those
  // nodes alone.
  Result<Plan> TryCandidates(const std::vector<const Json*>* only);

  // SQL text of a query node of the tree (or built from it), spliced scans put back.
  Result<std::string> Render(const Json& node);
  // The final SELECT: the whole tree once the rewritten node's slot was replaced, the CTE
  // it came from dropped when nothing else references it.
  Result<std::string> RenderFinal(const Candidate& c);
  int PartsFor(int64_t groups, int64_t per_group) const;
  // D26: `parts` parts by ranges of a single integer key (bounds from its footers) rather
  // than by its hash, when the range's every value as a key would need no more parts: no
  // part then holds more keys than planned, whatever the keys. nullopt: by hash.
  std::optional<KeyRange> RangeParts(const std::optional<KeyRange>& range, int parts,
                                     int64_t per_key) const;
  Status LoadCatalogueOnce();
  // The steps into a temp table and the final SELECT: the query with the rewritten node's
  // table ref (or the whole query) replaced by the temp table.
  Result<Plan> Finish(Candidate& c, RewriteKind kind, int parts, const PartSql& part_sql,
                      const std::string& how);
  // D17: the consumer's count/sum/min/max run per part and combined after; nullopt when
  // the consumer is any other shape.
  Result<std::optional<Plan>> TryPartialConsumer(Candidate& c, const Plan& base, int parts,
                                                 const PartSql& part_sql);

  duck::Connection& conn_;
  const RewriteOptions& options_;
  const sql_tree::SqlTree& tree_;
  Json root_doc_;  // a copy of tree_'s document, changed by the rewrite
  Catalogue cat_;
  bool cat_loaded_ = false;
  // The latest-row plan being made assumes what the first rows showed (D25).
  bool assumed_ = false;
  // Its single integer key's bounds in the footers (D26).
  std::optional<KeyRange> key_range_;
};

}  // namespace sluice::query::rewrite
