// The latest-row rewrite (D2, D3, D8, D14): `ROW_NUMBER() OVER (PARTITION BY k ORDER BY
// x...) = 1` as one aggregate per key over hash parts of the input, the row that ranks
// first found as the minimum of a packed ordering key (key_packing.h) or of DuckDB's
// create_sort_key.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>

#include "query/rewrite/key_packing.h"
#include "query/rewrite/planner.h"

namespace sluice::query::rewrite {
namespace {

// An integer literal's value.
std::optional<int64_t> IntConstant(const Json& e) {
  if (Str(e, "class") != "CONSTANT" || !e.contains("value")) return std::nullopt;
  const Json& val = e["value"];
  if (val.value("is_null", true)) return std::nullopt;
  std::string id = val.contains("type") ? Str(val["type"], "id") : "";
  static const std::set<std::string, std::less<>> kInts = {"TINYINT",   "SMALLINT", "INTEGER",
                                                           "BIGINT",    "HUGEINT",  "UTINYINT",
                                                           "USMALLINT", "UINTEGER", "UBIGINT"};
  if (!kInts.count(id) || !val.contains("value") || !val["value"].is_number_integer())
    return std::nullopt;
  return val["value"].get<int64_t>();
}

// The most rows per key a filter on the row number keeps (D2, D23): 1 for `= 1`, k for
// `<= k` and `< k+1`, either way round; nullopt for anything else. `is_ref` says whether
// an operand is the row number.
template <typename IsRef>
std::optional<int64_t> RowLimit(const Json& e, const IsRef& is_ref) {
  if (Str(e, "class") != "COMPARISON") return std::nullopt;
  const Json& l = e["left"];
  const Json& r = e["right"];
  std::string t = Str(e, "type");
  auto limit = [](std::optional<int64_t> k, int64_t minus) -> std::optional<int64_t> {
    if (!k || *k - minus < 1) return std::nullopt;
    return *k - minus;
  };
  if (t == "COMPARE_EQUAL") {
    if ((is_ref(l) && IntConstant(r) == 1) || (is_ref(r) && IntConstant(l) == 1)) return 1;
    return std::nullopt;
  }
  if (t == "COMPARE_LESSTHANOREQUALTO" && is_ref(l)) return limit(IntConstant(r), 0);
  if (t == "COMPARE_GREATERTHANOREQUALTO" && is_ref(r)) return limit(IntConstant(l), 0);
  if (t == "COMPARE_LESSTHAN" && is_ref(l)) return limit(IntConstant(r), 1);
  if (t == "COMPARE_GREATERTHAN" && is_ref(r)) return limit(IntConstant(l), 1);
  return std::nullopt;
}

struct OrderKey {
  bool descending = false;
  bool nulls_first = false;
};

Result<OrderKey> ResolveOrder(const Json& order, const OrderDefaults& d) {
  OrderKey k;
  std::string type = Str(order, "type");
  if (type == "ASCENDING")
    k.descending = false;
  else if (type == "DESCENDING")
    k.descending = true;
  else if (type == "ORDER_DEFAULT")
    k.descending = d.descending;
  else
    return NotApplicable("order type {}", type);
  std::string nulls = Str(order, "null_order");
  std::replace(nulls.begin(), nulls.end(), ' ', '_');
  if (nulls == "ORDER_DEFAULT") nulls = d.null_order;
  if (nulls == "NULLS_FIRST")
    k.nulls_first = true;
  else if (nulls == "NULLS_LAST")
    k.nulls_first = false;
  else if (nulls == "NULLS_FIRST_ON_ASC_LAST_ON_DESC")
    k.nulls_first = !k.descending;
  else if (nulls == "NULLS_LAST_ON_ASC_FIRST_ON_DESC")
    k.nulls_first = k.descending;
  else
    return NotApplicable("null order {}", nulls);
  return k;
}

bool IsRowNumber(const Json& e) {
  return Str(e, "class") == "WINDOW" && Str(e, "type") == "WINDOW_ROW_NUMBER";
}

}  // namespace

bool Planner::IsLatestRowShape(const Candidate& c) const {
  const Json& n = *c.node;
  if (!n.contains("select_list")) return false;
  for (const Json& item : n["select_list"]) {
    if (IsRowNumber(item)) return true;
  }
  return n.contains("qualify") && !n["qualify"].is_null();
}

Result<Planner::WindowMatch> Planner::MatchWindow(const Candidate& c) const {
  const Json& n = *c.node;
  WindowMatch m;
  const Json& items = n["select_list"];
  for (size_t i = 0; i < items.size(); ++i) {
    if (IsRowNumber(items[i])) {
      if (m.window) return NotApplicable("two ROW_NUMBER columns");
      m.window = &items[i];
      m.item = static_cast<int>(i);
      m.alias = Str(items[i], "alias");
      if (m.alias.empty()) return NotApplicable("ROW_NUMBER without an alias");
    }
  }
  // The "= 1" filter: in QUALIFY, or in the consumer's WHERE.
  bool filtered = false;
  if (!IsNullOrMissing(n, "qualify")) {
    const Json& q = n["qualify"];
    std::optional<int64_t> limit = RowLimit(q, [&](const Json& e) {
      if (IsRowNumber(e) && !m.window) {
        m.window = &e;
        return true;
      }
      if (IsRowNumber(e) && m.window == &e) return true;
      if (Str(e, "class") == "COLUMN_REF" && !m.alias.empty() && e["column_names"].size() == 1 &&
          EqualsIgnoreCase(e["column_names"][0].get<std::string>(), m.alias)) {
        return true;
      }
      return false;
    });
    if (!limit) return NotApplicable("QUALIFY other than the row number = 1 or <= k");
    m.limit = *limit;
    filtered = true;
  }
  if (!m.window) return NotApplicable("no ROW_NUMBER");
  if (!filtered && c.consumer && !IsNullOrMissing(*c.consumer, "where_clause")) {
    for (const Json* conj : sql_tree::Conjuncts((*c.consumer)["where_clause"])) {
      // Every conjunct is applied again over the kept rows: the smallest limit holds.
      std::optional<int64_t> limit = RowLimit(*conj, [&](const Json& e) {
        if (Str(e, "class") != "COLUMN_REF") return false;
        const Json& parts = e["column_names"];
        if (parts.empty() || !EqualsIgnoreCase(parts.back().get<std::string>(), m.alias))
          return false;
        return parts.size() == 1 ||
               (parts.size() == 2 && EqualsIgnoreCase(parts[0].get<std::string>(), c.ref_alias));
      });
      if (limit) {
        m.limit = filtered ? std::min(m.limit, *limit) : *limit;
        filtered = true;
      }
    }
  }
  if (!filtered) return NotApplicable("no row number = 1 (or <= k) filter");
  // Top k per key is DuckDB's window: measured slower as k-row aggregates (D23).
  if (m.limit > 1)
    return NotApplicable("the row number <= {}: top k per key is left to DuckDB's window", m.limit);
  const Json& w = *m.window;
  if (!w["children"].empty() || w.value("ignore_nulls", false) ||
      !IsNullOrMissing(w, "filter_expr") || w.value("distinct", false) ||
      (w.contains("arg_orders") && !w["arg_orders"].empty())) {
    return NotApplicable("ROW_NUMBER with arguments, FILTER, DISTINCT or IGNORE NULLS");
  }
  if (w["partitions"].empty()) return NotApplicable("ROW_NUMBER without PARTITION BY");
  return m;
}

Result<Plan> Planner::TryLatestRow(Candidate& c) {
  assumed_ = false;
  key_range_.reset();
  Json& n = *c.node;
  if (!n.contains("select_list")) return NotApplicable("not a SELECT");
  ASSIGN_OR_RETURN(WindowMatch m, MatchWindow(c));
  if (!n["modifiers"].empty())
    return NotApplicable("ORDER BY, LIMIT or DISTINCT on the window query");
  if (!n["group_expressions"].empty() || !IsNullOrMissing(n, "having") ||
      Str(n, "aggregate_handling") != "STANDARD_HANDLING") {
    return NotApplicable("GROUP BY or HAVING on the window query");
  }
  RETURN_IF_ERROR(LoadCatalogueOnce());
  // No aggregate at the window query's own level (it would make one row of everything).
  Status own_ok;
  ForEachOwnExpression(n["select_list"], [&](const Json& e) {
    if (Str(e, "class") == "FUNCTION" && cat_[AsciiLower(Str(e, "function_name"))].aggregate) {
      own_ok = NotApplicable("an aggregate beside ROW_NUMBER");
    }
  });
  RETURN_IF_ERROR(own_ok);
  DeterminismCheck check{cat_, c.node, false, m.window};
  RETURN_IF_ERROR(check.Visit(n, nullptr));
  ASSIGN_OR_RETURN(OrderDefaults defaults, LoadOrderDefaults(conn_));

  const Json& w = *m.window;
  size_t nkeys = w["partitions"].size();
  size_t norders = w["orders"].size();
  std::vector<OrderKey> orders;
  for (const Json& o : w["orders"]) {
    ASSIGN_OR_RETURN(OrderKey k, ResolveOrder(o, defaults));
    orders.push_back(k);
  }

  // The input: the window query's columns (ROW_NUMBER as the constant 1), its partition
  // keys and its order keys, from its FROM and WHERE.
  Json input = n;
  input["qualify"] = nullptr;
  Json items = Json::array();
  for (size_t i = 0; i < n["select_list"].size(); ++i) {
    if (static_cast<int>(i) == m.item) {
      ASSIGN_OR_RETURN(Json one, ParseExpr(conn_, "1::BIGINT"));
      one["alias"] = m.alias;
      items.push_back(one);
    } else {
      items.push_back(n["select_list"][i]);
    }
  }
  for (size_t i = 0; i < nkeys; ++i) {
    Json k = w["partitions"][i];
    k["alias"] = fmt::format("__sluice_k{}", i);
    items.push_back(k);
  }
  for (size_t j = 0; j < norders; ++j) {
    Json o = w["orders"][j]["expression"];
    o["alias"] = fmt::format("__sluice_o{}", j);
    items.push_back(o);
  }
  input["select_list"] = items;
  ASSIGN_OR_RETURN(Json standalone, Standalone(input, c.scope));
  ASSIGN_OR_RETURN(std::string input_sql, Render(standalone));
  ASSIGN_OR_RETURN(std::vector<Column> cols, Describe(conn_, input_sql));
  if (cols.size() < nkeys + norders) return NotApplicable("DESCRIBE returned too few columns");
  std::vector<Column> out_cols(cols.begin(), cols.end() - static_cast<long>(nkeys + norders));
  std::vector<Column> key_cols(cols.end() - static_cast<long>(nkeys + norders),
                               cols.end() - static_cast<long>(norders));
  std::vector<Column> order_cols(cols.end() - static_cast<long>(norders), cols.end());
  std::set<std::string> seen;
  for (const Column& col : out_cols) {
    if (!seen.insert(AsciiLower(col.name)).second)
      return NotApplicable("duplicate output column {}", col.name);
    if (AsciiLower(col.name).rfind("__sluice_", 0) == 0)
      return NotApplicable("a column named {}", col.name);
  }
  RETURN_IF_ERROR(CheckKeyTypes(conn_, key_cols));

  ASSIGN_OR_RETURN(int64_t est_rows, EstimateRows(conn_, input_sql));
  est_rows = std::max(est_rows, options_.known_input_rows);
  if (est_rows < options_.min_rows_to_rewrite)
    return NotApplicable("estimated {} rows: too few to rewrite", est_rows);

  // Which output columns the rest of the query reads (D6), and which of those equal a key
  // (and so are equal across full ties: D3).
  std::optional<std::set<std::string>> referenced;
  bool has_col_aliases =
      c.slot && c.slot->contains("column_name_alias") && !(*c.slot)["column_name_alias"].empty();
  if (c.referenced_known) {
    referenced = c.referenced;
  } else if (c.slot && !has_col_aliases) {
    referenced =
        ReferencedNames(tree_, root_doc_, c.cte_name.empty() ? c.slot : c.node, c.ref_alias);
  }
  // A plain `*` or `t.*` passes its columns under their own names.
  bool plain_star = false;
  std::string star_relation;  // "t" for `t.*`
  for (const Json& item : n["select_list"]) {
    if (Str(item, "class") == "STAR" && !item.value("columns", false) &&
        item["exclude_list"].empty() && item["replace_list"].empty() &&
        (!item.contains("rename_list") || item["rename_list"].empty()) &&
        IsNullOrMissing(item, "expr")) {
      plain_star = true;
      star_relation = AsciiLower(Str(item, "relation_name"));
    }
  }
  // Kept columns that are a partition key (read from the GROUP BY) or an order key (decoded
  // from the packed key) are equal across full ties (D3, D14). Only the very column counts:
  // `SELECT b.ts ... ORDER BY a.ts` is no match.
  auto output_name = [&](const Json& e) -> std::optional<std::string> {
    if (Str(e, "class") != "COLUMN_REF") return std::nullopt;
    const Json& parts = e["column_names"];
    std::string name = AsciiLower(parts.back().get<std::string>());
    for (const Json& item : n["select_list"]) {
      if (Str(item, "class") != "COLUMN_REF") continue;
      const Json& ip = item["column_names"];
      if (AsciiLower(ip.back().get<std::string>()) != name) continue;
      if (!Str(item, "alias").empty() && !EqualsIgnoreCase(Str(item, "alias"), name)) continue;
      if (parts.size() == 1 || ip.size() == 1) return name;
      if (parts.size() != ip.size()) return std::nullopt;
      for (size_t i = 0; i < parts.size(); ++i) {
        if (!EqualsIgnoreCase(parts[i].get<std::string>(), ip[i].get<std::string>()))
          return std::nullopt;
      }
      return name;
    }
    if (plain_star &&
        (star_relation.empty() || parts.size() == 1 ||
         (parts.size() == 2 && AsciiLower(parts[0].get<std::string>()) == star_relation))) {
      return name;
    }
    return std::nullopt;
  };
  std::map<std::string, size_t> partition_of;  // output column -> partition key index
  std::map<std::string, size_t> order_of;      // output column -> order key index
  for (size_t i = 0; i < nkeys; ++i) {
    if (auto name = output_name(w["partitions"][i])) partition_of.emplace(*name, i);
  }
  for (size_t j = 0; j < norders; ++j) {
    if (auto name = output_name(w["orders"][j]["expression"])) order_of.emplace(*name, j);
  }

  std::vector<Column> kept;      // carried through the aggregate
  std::vector<Column> tiebreak;  // kept columns that may differ across full ties
  for (const Column& col : out_cols) {
    if (EqualsIgnoreCase(col.name, m.alias)) continue;  // the constant 1
    if (referenced && !referenced->count(AsciiLower(col.name))) continue;
    kept.push_back(col);
    if (!partition_of.count(AsciiLower(col.name)) && !order_of.count(AsciiLower(col.name)))
      tiebreak.push_back(col);
  }

  // One statistics scan: rows, distinct keys, each order key's bounds, and the bounds of
  // the tie-breaking columns that could be packed exactly (D14).
  std::vector<std::string> keys;
  for (size_t i = 0; i < nkeys; ++i) keys.push_back(fmt::format("__sluice_k{}", i));
  std::string key_list = fmt::format("{}", fmt::join(keys, ", "));
  std::vector<std::string> ordinals;
  bool packable = norders > 0;
  for (size_t j = 0; j < norders; ++j) {
    ordinals.push_back(OrdinalExpr(order_cols[j].type, fmt::format("__sluice_o{}", j)));
    packable &= !ordinals.back().empty();
  }
  std::vector<std::string> stat_exprs = {"count(*)", DistinctKeysExpr(key_list, est_rows)};
  std::vector<size_t> order_at;  // where order key j's four statistics start
  if (packable) {
    for (size_t j = 0; j < norders; ++j) {
      order_at.push_back(stat_exprs.size());
      for (const char* f : {"min({0})", "max({0})", "count(__sluice_o{1})", "count({0})"}) {
        stat_exprs.push_back(fmt::format(fmt::runtime(f), ordinals[j], j));
      }
    }
  }
  // Tie-breaking columns: integer-like ones by their ordinal, DOUBLEs by their value scaled
  // to 2 or 4 decimals when every value survives that exactly.
  std::vector<size_t> exact_at(tiebreak.size(), 0);  // 0: not a candidate
  for (size_t t = 0; packable && t < tiebreak.size(); ++t) {
    const Column& col = tiebreak[t];
    std::string q = Quote(col.name);
    std::string ord = OrdinalExpr(col.type, q);
    if (!ord.empty() && !DecodeOrdinal(col.type, "0").empty()) {
      exact_at[t] = stat_exprs.size();
      for (const char* f : {"min({0})", "max({0})", "count({1})", "count({0})"}) {
        stat_exprs.push_back(fmt::format(fmt::runtime(f), ord, q));
      }
    } else if (IsScaledFloat(col.type)) {
      exact_at[t] = stat_exprs.size();
      stat_exprs.push_back(fmt::format("count({})", q));
      // atan2(-0.0, -1) is -pi: a negative minimum says some zero is -0.0.
      stat_exprs.push_back(fmt::format("min(CASE WHEN {0} = 0 THEN atan2({0}, -1) END)", q));
      std::string scaled = Scaled(col.type, q);
      stat_exprs.push_back(fmt::format("min({})", scaled));
      stat_exprs.push_back(fmt::format("max({})", scaled));
      stat_exprs.push_back(
          fmt::format("count(*) FILTER (WHERE {} = {})", ScaledBack(col.type, scaled), q));
    }
  }
  // The same statistics from the Parquet footers when they answer every order key (D21):
  // the keys bounded by their ranges there, integer tie-breaking columns by their bounds;
  // with one part other tie-breaking columns hashed (a DOUBLE's exactness needs every
  // value), with several the keys and the DOUBLEs scanned alone.
  bool keys_counted = false, keys_checked = false;
  ASSIGN_OR_RETURN(
      auto footer_row,
      FooterStatistics(c, m, key_cols, order_cols, tiebreak, packable, stat_exprs.size(), order_at,
                       exact_at, stat_exprs, input_sql, &keys_counted, &keys_checked));
  const bool footer_row_used = footer_row.has_value();
  bool groups_bounded = footer_row_used && !keys_counted;
  Rows stats;
  if (footer_row) {
    stats.push_back(std::move(*footer_row));
  } else {
    std::string stats_sql =
        fmt::format("SELECT {} FROM ({}) AS __sluice_in", fmt::join(stat_exprs, ", "), input_sql);
    ASSIGN_OR_RETURN(stats, Ask(conn_, stats_sql, "statistics scan"));
  }
  if (stats.size() != 1 || !stats[0][0] || !stats[0][1])
    return NotApplicable("statistics scan returned nothing");
  const auto& s = stats[0];
  int64_t rows = std::atoll(s[0]->c_str());
  int64_t groups = std::atoll(s[1]->c_str());

  // The ordering key (D8): the order keys packed into one HUGEINT when their ranges fit in
  // 126 bits, then the tie-breaking columns packed exactly (D14) or a hash of them (D3);
  // else DuckDB's create_sort_key.
  constexpr const char* kChanged =
      "error('sluice rewrite: the input changed between planning and a part (or a Parquet "
      "file''s statistics are wrong)')";
  std::vector<PackedField> order_fields;
  for (size_t j = 0; j < norders && packable; ++j) {
    size_t at = order_at[j];
    std::string o = fmt::format("__sluice_o{}", j);
    if (!s[at] || !s[at + 1] || !s[at + 2] || !s[at + 3]) {  // all NULL: one code
      order_fields.push_back(AllNullField(o, order_cols[j].type));
      continue;
    }
    if (*s[at + 2] != *s[at + 3]) {  // values without an ordinal (infinite timestamps)
      packable = false;
      break;
    }
    __int128 lo = std::atoll(s[at]->c_str());
    __int128 hi = std::atoll(s[at + 1]->c_str());
    bool has_null = std::atoll(s[at + 2]->c_str()) < rows;
    order_fields.push_back(OrdinalField(o, ordinals[j], order_cols[j].type, lo, hi, has_null,
                                        orders[j].descending, orders[j].nulls_first));
  }
  int order_bits = 0;
  for (const PackedField& f : order_fields) order_bits += f.width;
  std::vector<std::optional<PackedField>> candidates(tiebreak.size());
  int candidate_bits = 0;
  bool all_exact = true;
  for (size_t t = 0; t < tiebreak.size(); ++t) {
    if (packable && exact_at[t] != 0) candidates[t] = ExactField(tiebreak[t], s, exact_at[t], rows);
    all_exact &= candidates[t].has_value();
    candidate_bits += candidates[t] ? candidates[t]->width : 0;
  }
  // Every tie-breaking column exact when they all fit; else, in column order, those that
  // fit beside the order keys and a hash of the rest.
  int budget = all_exact && order_bits + candidate_bits <= 126 ? 126 : 126 - kMinTieHashBits;
  std::vector<PackedField> exact_fields;  // per tie-breaking column packed exactly
  std::vector<size_t> exact_cols;         // their indexes in `tiebreak`
  std::vector<Column> hashed;             // the tie-breaking columns not packed exactly
  int exact_bits = 0;
  for (size_t t = 0; t < tiebreak.size(); ++t) {
    if (candidates[t] && order_bits + exact_bits + candidates[t]->width <= budget) {
      exact_bits += candidates[t]->width;
      exact_fields.push_back(std::move(*candidates[t]));
      exact_cols.push_back(t);
    } else {
      hashed.push_back(tiebreak[t]);
    }
  }
  int hash_bits = hashed.empty() ? 0 : std::min(63, 126 - order_bits - exact_bits);
  packable &= order_bits + exact_bits <= 126 && (hashed.empty() || hash_bits >= kMinTieHashBits);

  std::string key_expr;
  // How each kept column comes out of a part's aggregate: from the GROUP BY, decoded from
  // min(key), or by arg_min_null over the key.
  std::vector<std::string> extract(kept.size());
  std::vector<std::string> aggs;
  bool sort_key = !packable;
  if (packable) {
    std::vector<PackedField*> fields;
    for (PackedField& f : order_fields) fields.push_back(&f);
    for (PackedField& f : exact_fields) fields.push_back(&f);
    std::vector<std::string> tb;
    for (const Column& col : hashed) tb.push_back(Quote(col.name));
    // A guard that fails under an assumption sends the caller back to plan without it (D25).
    const std::string changed =
        assumed_ ? fmt::format("error({})", duck::QuoteLiteral(kAssumptionFailed)) : kChanged;
    key_expr = PackedKey(fields, fmt::format("hash({})", fmt::join(tb, ", ")), hash_bits, changed);
    bool uses_min = false;
    auto from_key = [&](const PackedField& f) {
      uses_min = true;
      // Shift and mask: HUGEINT division is a bit-serial loop in DuckDB, ~30 times slower.
      std::string mask = Int128ToString((static_cast<__int128>(1) << f.width) - 1);
      std::string code = f.width == 0   ? "0"
                         : f.shift == 0 ? fmt::format("(__sluice_m & {})", mask)
                                        : fmt::format("((__sluice_m >> {}) & {})", f.shift, mask);
      return f.decode(code);
    };
    for (size_t i = 0; i < kept.size(); ++i) {
      std::string l = AsciiLower(kept[i].name);
      if (auto it = partition_of.find(l); it != partition_of.end()) {
        extract[i] = fmt::format("__sluice_k{}", it->second);
      } else if (auto ot = order_of.find(l);
                 ot != order_of.end() && order_fields[ot->second].decode) {
        extract[i] = from_key(order_fields[ot->second]);
      } else if (auto et = std::find_if(
                     exact_cols.begin(), exact_cols.end(),
                     [&](size_t t) { return EqualsIgnoreCase(tiebreak[t].name, kept[i].name); });
                 et != exact_cols.end()) {
        extract[i] = from_key(exact_fields[static_cast<size_t>(et - exact_cols.begin())]);
      } else {
        aggs.push_back(
            fmt::format("arg_min_null({}, __sluice_key) AS __sluice_r{}", Quote(kept[i].name), i));
        extract[i] = fmt::format("__sluice_r{}", i);
      }
    }
    if (uses_min) aggs.push_back("min(__sluice_key) AS __sluice_m");
  } else {
    // create_sort_key over the order keys, then the kept columns that may differ across
    // full ties (ASC NULLS LAST): the least such row wins, for any N.
    std::vector<std::string> args;
    for (size_t j = 0; j < norders; ++j) {
      args.push_back(fmt::format("__sluice_o{}, '{} {}'", j, orders[j].descending ? "DESC" : "ASC",
                                 orders[j].nulls_first ? "NULLS FIRST" : "NULLS LAST"));
    }
    for (const Column& col : tiebreak)
      args.push_back(fmt::format("{}, 'ASC NULLS LAST'", Quote(col.name)));
    key_expr = args.empty() ? "0" : fmt::format("create_sort_key({})", fmt::join(args, ", "));
    // One arg_min_null of a struct of the columns not in the GROUP BY (one blob comparison
    // per row instead of one per column), or of the column itself when there is one.
    std::vector<size_t> carried;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (auto it = partition_of.find(AsciiLower(kept[i].name)); it != partition_of.end()) {
        extract[i] = fmt::format("__sluice_k{}", it->second);
      } else {
        carried.push_back(i);
      }
    }
    if (carried.size() == 1) {
      aggs.push_back(fmt::format("arg_min_null({}, __sluice_key) AS __sluice_r",
                                 Quote(kept[carried[0]].name)));
      extract[carried[0]] = "__sluice_r";
    } else if (!carried.empty()) {
      std::vector<std::string> fields;
      for (size_t i : carried) {
        fields.push_back(fmt::format("{0} := {0}", Quote(kept[i].name)));
        extract[i] =
            fmt::format("struct_extract(__sluice_r, {})", duck::QuoteLiteral(kept[i].name));
      }
      aggs.push_back(fmt::format("arg_min_null(struct_pack({}), __sluice_key) AS __sluice_r",
                                 fmt::join(fields, ", ")));
    }
  }
  if (aggs.empty()) aggs.push_back("count(*) AS __sluice_n");  // only the keys matter
  // N (D7): one part's groups must fit in part_memory_fraction of the memory limit.
  int64_t key_width = sort_key ? 48 : 16;
  int64_t per_group = 96;
  for (const Column& k : key_cols) per_group += 2 * TypeWidth(k.type);
  for (const std::string& a : aggs) {
    per_group += key_width + 8;
    if (a.rfind("arg_min_null(", 0) == 0) {
      for (const Column& col : kept)
        per_group += a.find(Quote(col.name)) != std::string::npos ? 2 * TypeWidth(col.type) : 0;
    }
  }
  int parts = PartsFor(groups, per_group);
  if (groups_bounded && !keys_checked && parts > 1) {
    // The footers' bound, taken for one part, asks for parts: the keys are counted (D21).
    ASSIGN_OR_RETURN(auto counted, Ask(conn_,
                                       fmt::format("SELECT count(*), {} FROM ({}) AS __sluice_in",
                                                   DistinctKeysExpr(key_list, est_rows), input_sql),
                                       "key count"));
    if (counted.size() != 1 || !counted[0][0] || !counted[0][1])
      return NotApplicable("key count returned nothing");
    rows = std::atoll(counted[0][0]->c_str());
    groups = std::atoll(counted[0][1]->c_str());
    parts = PartsFor(groups, per_group);
    groups_bounded = false;
  }

  std::vector<std::string> select_cols;
  size_t kept_i = 0;
  for (const Column& col : out_cols) {
    if (EqualsIgnoreCase(col.name, m.alias)) {
      select_cols.push_back(fmt::format("1::BIGINT AS {}", Quote(col.name)));
    } else if (kept_i < kept.size() && kept[kept_i].name == col.name) {
      select_cols.push_back(fmt::format("{} AS {}", extract[kept_i], Quote(col.name)));
      ++kept_i;
    }
  }
  if (select_cols.empty())
    select_cols.push_back("1 AS __sluice_one");  // nothing read: only the row count
  // Parts by ranges of an integer key where its footers bound it (D26), else by its hash.
  const std::optional<KeyRange> ranges = RangeParts(key_range_, parts, per_group);
  auto part_sql = [&](int i) {
    std::string where =
        parts > 1 ? fmt::format(" WHERE {}", PartCondition(key_list, ranges, parts, i)) : "";
    return fmt::format(
        "SELECT {} FROM (SELECT {}, {} FROM (SELECT *, {} AS __sluice_key FROM ({}) AS "
        "__sluice_in{}) GROUP BY {}) "
        "AS __sluice_p",
        fmt::join(select_cols, ", "), key_list, fmt::join(aggs, ", "), key_expr, input_sql, where,
        key_list);
  };
  int decoded = 0;
  for (const std::string& e : extract) decoded += e.find("__sluice_m") != std::string::npos ? 1 : 0;
  std::string how = fmt::format(
      "latest row per key: {} rows (estimate {}), {} {} keys, {} B/key -> {} part(s); key {}; {} "
      "of {} kept column(s) decoded from the key; {}; statistics {}",
      rows, est_rows, groups_bounded ? "at most" : "~", groups, per_group, parts,
      sort_key ? "create_sort_key"
               : fmt::format("packed {} bits", order_bits + exact_bits + hash_bits),
      decoded, kept.size(),
      tiebreak.empty() ? "no kept column differs across full ties"
      : sort_key       ? "ties broken by the least kept columns"
      : hashed.empty() ? "ties broken by the least kept columns, packed exactly"
                       : fmt::format("ties broken by a {}-bit hash of {} kept column(s)", hash_bits,
                                     hashed.size()),
      !footer_row_used ? "scanned"
      : keys_counted   ? "from the Parquet footers, the keys scanned"
                       : "from the Parquet footers");
  if (ranges)
    how += fmt::format("; parts by ranges of the key from {} to {}", ranges->lo, ranges->hi);
  if (assumed_) {
    how += fmt::format("; the DOUBLE/FLOAT kept columns' exactness assumed from the first {} rows",
                       options_.probe_rows);
  }
  return Finish(c, RewriteKind::kLatestRow, parts, part_sql, how);
}

Result<std::optional<std::vector<std::optional<std::string>>>> Planner::FooterStatistics(
    const Candidate& c, const WindowMatch& m, const std::vector<Column>& key_cols,
    const std::vector<Column>& order_cols, const std::vector<Column>& tiebreak, bool packable,
    size_t width, const std::vector<size_t>& order_at, std::vector<size_t>& exact_at,
    const std::vector<std::string>& stat_exprs, const std::string& input_sql, bool* keys_counted,
    bool* keys_checked) {
  using Row = std::vector<std::optional<std::string>>;
  const std::optional<Row> none;
  const Json& n = *c.node;
  const Json& w = *m.window;
  // The window query's expression of each output column, for a tie-breaking column: its
  // select item when a bare column, else what a plain `*` passes under that name.
  std::deque<Json> starred;
  auto output_expr = [&](const std::string& name) -> const Json* {
    bool star = false;
    for (const Json& item : n["select_list"]) {
      if (Str(item, "class") == "STAR" && !item.value("columns", false) &&
          item["exclude_list"].empty() && item["replace_list"].empty() &&
          (!item.contains("rename_list") || item["rename_list"].empty()) &&
          IsNullOrMissing(item, "expr") && Str(item, "relation_name").empty()) {
        star = true;
      }
      if (Str(item, "class") != "COLUMN_REF") continue;
      std::string out = Str(item, "alias").empty() ? item["column_names"].back().get<std::string>()
                                                   : Str(item, "alias");
      if (EqualsIgnoreCase(out, name)) return &item;
    }
    if (!star) return nullptr;
    starred.push_back(Json{{"class", "COLUMN_REF"}, {"column_names", Json::array({name})}});
    return &starred.back();
  };
  // Only where one part holds every key (D21): the bound is an upper bound, and with
  // several parts a scan's exact figures (a DOUBLE packed exactly, a smaller state per key,
  // the keys counted) pay for themselves over the parts' passes. The size per key is the
  // most the plan can need: every tie-breaking column carried by arg_min_null.
  std::vector<Json> keys(w["partitions"].begin(), w["partitions"].end());
  ASSIGN_OR_RETURN(std::optional<int64_t> bound,
                   FooterKeyBound(conn_, tree_, n, keys, key_cols, &key_range_));
  if (!bound) return none;
  const int64_t per_aggregate = packable ? 24 : 56;  // a HUGEINT or a sort key, and a flag
  int64_t most_per_key = 96 + per_aggregate;
  for (const Column& k : key_cols) most_per_key += 2 * TypeWidth(k.type);
  for (const Column& t : tiebreak) most_per_key += per_aggregate + 2 * TypeWidth(t.type);
  const bool several = PartsFor(*bound, most_per_key) > 1;
  std::vector<const Json*> exprs;
  std::vector<Column> types;
  // A sort key (not packable) needs only the rows and the keys.
  const size_t norders = packable ? order_cols.size() : 0;
  for (size_t j = 0; j < norders; ++j) {
    exprs.push_back(&w["orders"][j]["expression"]);
    types.push_back(order_cols[j]);
  }
  // A DOUBLE or FLOAT tie-breaking column's bounds too, when its exactness may be assumed
  // from the first rows instead of scanned (D25: only with several parts, where the scan is
  // a pass of its own).
  const bool assume_floats = several && options_.assume;
  std::vector<size_t> tie_at(tiebreak.size(), SIZE_MAX);  // index in exprs
  for (size_t t = 0; t < tiebreak.size(); ++t) {
    if (exact_at[t] == 0 || (IsScaledFloat(tiebreak[t].type) && !assume_floats)) continue;
    if (const Json* e = output_expr(tiebreak[t].name)) {
      tie_at[t] = exprs.size();
      exprs.push_back(e);
      types.push_back(tiebreak[t]);
    }
  }
  ASSIGN_OR_RETURN(std::optional<FooterColumns> footers,
                   FooterColumnStats(conn_, tree_, n, exprs, types));
  if (!footers) return none;
  for (size_t j = 0; j < norders; ++j) {
    if (!footers->columns[j]) return none;
  }
  Row row(width);
  const int64_t rows = footers->rows;  // the files' rows: NULL codes are judged against them
  row[0] = std::to_string(rows);
  row[1] = std::to_string(std::min(*bound, rows + 1));
  *keys_counted = *keys_checked = false;
  if (several) {
    // Several parts: the keys are the bound when a probe of the first rows estimates them
    // within 1.5x below it (D20: an upper bound only costs parts), else counted; each DOUBLE
    // tie-breaking column's exactness is scanned. Both in one scan of only their columns
    // (the order keys' bounds stay the footers').
    std::vector<std::string> keys_named;
    for (size_t i = 0; i < key_cols.size(); ++i)
      keys_named.push_back(fmt::format("__sluice_k{}", i));
    ASSIGN_OR_RETURN(
        std::optional<int64_t> probe,
        ProbeGroups(conn_, fmt::format("{}", fmt::join(keys_named, ", ")), input_sql, rows));
    const bool bound_holds =
        probe && static_cast<double>(*bound) <= 1.5 * static_cast<double>(*probe);
    std::vector<std::string> narrow;
    std::vector<std::pair<size_t, size_t>> into;  // row index <- scan column
    if (!bound_holds) {
      into.emplace_back(1, narrow.size());
      narrow.push_back(stat_exprs[1]);
    }
    // A DOUBLE or FLOAT column is probed in the first rows when the footers bound it (D25),
    // else scanned with the keys.
    std::vector<std::string> probed;
    std::vector<std::pair<size_t, size_t>> probed_into;
    for (size_t t = 0; t < tiebreak.size(); ++t) {
      if (exact_at[t] == 0 || !IsScaledFloat(tiebreak[t].type)) continue;
      const bool bounded = tie_at[t] != SIZE_MAX && footers->columns[tie_at[t]];
      for (size_t f = 0; f < 5; ++f) {
        (bounded ? probed_into : into)
            .emplace_back(exact_at[t] + f, (bounded ? probed : narrow).size());
        (bounded ? probed : narrow).push_back(stat_exprs[exact_at[t] + f]);
      }
    }
    if (!probed.empty()) {
      ASSIGN_OR_RETURN(
          auto first, Ask(conn_,
                          fmt::format("SELECT {} FROM (SELECT * FROM ({}) AS __sluice_in LIMIT {}) "
                                      "AS __sluice_first",
                                      fmt::join(probed, ", "), input_sql, options_.probe_rows),
                          "probe of the first rows"));
      if (first.size() != 1 || first[0].size() != probed.size()) return none;
      for (size_t k = 0; k < probed_into.size(); k += 5) {
        const size_t at = probed_into[k].first;
        const auto& p = first[0];
        const size_t col = probed_into[k].second;
        // Every value of the first rows exact and none -0.0: assumed of all (the footers'
        // bounds in hundredths are the field's range).
        const bool exact = p[col] && p[col + 4] && *p[col] == *p[col + 4] &&
                           !(p[col + 1] && std::strtod(p[col + 1]->c_str(), nullptr) < 0);
        size_t t = 0;
        while (exact_at[t] != at) ++t;
        const FooterColumn& f = *footers->columns[tie_at[t]];
        const int64_t non_null = f.lo ? rows - f.nulls : 0;
        row[at] = std::to_string(non_null);
        row[at + 1] = std::nullopt;
        if (f.lo) {
          row[at + 2] = std::to_string(*f.lo);
          row[at + 3] = std::to_string(*f.hi);
        }
        row[at + 4] = exact ? std::to_string(non_null) : "-1";
        assumed_ |= exact && non_null > 0;
      }
    }
    if (!narrow.empty()) {
      ASSIGN_OR_RETURN(auto scanned, Ask(conn_,
                                         fmt::format("SELECT {} FROM ({}) AS __sluice_in",
                                                     fmt::join(narrow, ", "), input_sql),
                                         "statistics scan of the keys"));
      if (scanned.size() != 1 || scanned[0].size() != narrow.size()) return none;
      for (const auto& [at, col] : into) row[at] = scanned[0][col];
      if (!row[1]) return none;
    }
    *keys_counted = !bound_holds;
    *keys_checked = true;  // counted, or the bound confirmed for several parts
  }
  auto fill = [&](size_t at, const FooterColumn& f) {
    if (f.lo) {
      row[at] = std::to_string(*f.lo);
      row[at + 1] = std::to_string(*f.hi);
    }
    row[at + 2] = row[at + 3] = std::to_string(f.lo ? rows - f.nulls : 0);
  };
  for (size_t j = 0; j < norders; ++j) fill(order_at[j], *footers->columns[j]);
  for (size_t t = 0; t < tiebreak.size(); ++t) {
    if (IsScaledFloat(tiebreak[t].type) && several && exact_at[t] != 0) continue;  // above
    if (tie_at[t] != SIZE_MAX && footers->columns[tie_at[t]]) {
      fill(exact_at[t], *footers->columns[tie_at[t]]);
    } else {
      exact_at[t] = 0;  // hashed
    }
  }
  return std::optional<Row>(std::move(row));
}

}  // namespace sluice::query::rewrite
