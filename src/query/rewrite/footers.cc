// The Parquet footers' bound on a group-by's groups (D18): the rows of the tables its keys
// read, and an integer key's range in the column statistics, without reading the data.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "query/rewrite/key_packing.h"
#include "query/rewrite/probes.h"

namespace sluice::query::rewrite {
namespace {

// Text of one expression of a parse tree.
Result<std::string> ExprText(duck::Connection& conn, const Json& e) {
  Result<std::string> text = sql_tree::ExpressionSql(conn, e);
  if (!text.ok()) return PlanningError(text.status(), "json_deserialize_sql");
  return text;
}

// The most files whose footers a bound reads (see FooterKeyBound).
constexpr int64_t kMaxBoundFiles = 256;

}  // namespace

std::optional<std::string> ParquetRef::FileColumn(const std::string& column) const {
  if (projection == nullptr) return column;
  // The projection's output name is its column's name.
  std::optional<std::string> found;
  for (const Json& item : *projection) {
    std::string out = Str(item, "alias").empty() ? item["column_names"][0].get<std::string>()
                                                 : Str(item, "alias");
    if (EqualsIgnoreCase(out, column)) found = item["column_names"][0].get<std::string>();
  }
  return found;
}

std::string ParquetRef::ColumnMatch(const std::string& column) const {
  if (schema_map.empty()) return fmt::format("name = {}", duck::QuoteLiteral(column));
  return fmt::format(
      "field_id = (SELECT k FROM (SELECT unnest(map_keys(m)) AS k, unnest(map_values(m)) AS v "
      "FROM (SELECT {} AS m)) WHERE v.name = {})",
      schema_map, duck::QuoteLiteral(column));
}

// The Parquet files a table ref reads (D18): the ref itself a read_parquet call, or the only
// FROM of a plain projection (a lake table's scan, spliced in as text: parsed here into
// `spliced`, which must outlive the result). nullopt for anything else, and for reads whose
// columns are not the files' own (union_by_name, filename, file_row_number) or of more
// than kMaxBoundFiles files.
Result<std::optional<ParquetRef>> ReadParquetRef(duck::Connection& conn,
                                                 const sql_tree::SqlTree& tree, const Json& r,
                                                 std::deque<Json>& spliced) {
  const std::optional<ParquetRef> none;
  ParquetRef out;
  const Json* scan = &r;
  const sql_tree::Splice* splice =
      Str(r, "type") == "BASE_TABLE" ? tree.FindSplice(Str(r, "table_name")) : nullptr;
  if (splice != nullptr) {
    std::string_view text = splice->sql;
    if (text.size() >= 2 && text.front() == '(' && text.back() == ')')
      text = text.substr(1, text.size() - 2);
    ASSIGN_OR_RETURN(Json statement, ParseStatement(conn, text));
    spliced.push_back(std::move(statement));
  }
  if (Str(r, "type") == "SUBQUERY" || splice != nullptr) {
    const Json& q = splice != nullptr ? spliced.back()["node"] : r["subquery"]["node"];
    if (Str(q, "type") != "SELECT_NODE" || !IsNullOrMissing(q, "where_clause") ||
        !q["modifiers"].empty() || !q["group_expressions"].empty() ||
        !IsNullOrMissing(q, "having") || !IsNullOrMissing(q, "qualify") ||
        !q.contains("from_table")) {
      return none;
    }
    for (const Json& item : q["select_list"]) {
      if (Str(item, "class") != "COLUMN_REF" || item["column_names"].size() != 1) return none;
    }
    out.projection = &q["select_list"];
    scan = &q["from_table"];
  }
  if (Str(*scan, "type") != "TABLE_FUNCTION") return none;
  const Json& call = (*scan)["function"];
  std::string fn = AsciiLower(Str(call, "function_name"));
  if (fn != "read_parquet" && fn != "parquet_scan") return none;
  if (call["children"].empty() || Str(call["children"][0], "class") == "COMPARISON") return none;
  // Footers are read file by file: past a few hundred files the probe's fixed million
  // rows costs less than reading them all (a lake of 10,000 files would pay seconds).
  const Json& file_arg = call["children"][0];
  if (Str(file_arg, "class") == "FUNCTION" && Str(file_arg, "function_name") == "list_value" &&
      file_arg["children"].size() > kMaxBoundFiles) {
    return none;
  }
  ASSIGN_OR_RETURN(out.files, ExprText(conn, file_arg));
  if (Str(file_arg, "class") == "CONSTANT") {  // a glob: how many files it names
    ASSIGN_OR_RETURN(auto globbed,
                     Ask(conn, fmt::format("SELECT count(*) FROM glob({})", out.files), "glob"));
    if (globbed.size() != 1 || !globbed[0][0] ||
        std::atoll(globbed[0][0]->c_str()) > kMaxBoundFiles)
      return none;
  }
  bool hive_off = false;  // hive_partitioning = false
  for (const Json& arg : call["children"]) {
    if (Str(arg, "class") != "COMPARISON" || arg["left"]["column_names"].size() != 1) continue;
    std::string name = arg["left"]["column_names"][0].get<std::string>();
    if (EqualsIgnoreCase(name, "schema")) {
      ASSIGN_OR_RETURN(out.schema_map, ExprText(conn, arg["right"]));
    } else if (EqualsIgnoreCase(name, "hive_partitioning")) {
      ASSIGN_OR_RETURN(std::string v, ExprText(conn, arg["right"]));
      hive_off = AsciiLower(v).find("false") != std::string::npos ||
                 AsciiLower(v).find("'f'") != std::string::npos;
    } else if (EqualsIgnoreCase(name, "union_by_name") || EqualsIgnoreCase(name, "filename") ||
               EqualsIgnoreCase(name, "file_row_number")) {
      return none;  // columns that are not the files' own
    }
  }
  ASSIGN_OR_RETURN(auto counted,
                   Ask(conn,
                       fmt::format("SELECT sum(num_rows)::BIGINT, count(*), "
                                   "bool_or(regexp_matches(file_name, '/[^/]+=[^/]*/')) "
                                   "FROM parquet_file_metadata({})",
                                   out.files),
                       "row count of a key's table"));
  if (counted.size() != 1 || !counted[0][0] || !counted[0][1]) return none;
  out.rows = std::atoll(counted[0][0]->c_str());
  out.file_count = std::atoll(counted[0][1]->c_str());
  // A hive path's value replaces a file column of its name: the footers do not hold it.
  out.hive_paths = counted[0][2] && *counted[0][2] == "true" && !hive_off;
  return std::optional<ParquetRef>(std::move(out));
}

// An upper bound on a group-by's groups from where its keys come from, or nullopt (D18).
// Every column a key reads must belong to a table ref of the node's own FROM that reads
// Parquet files (read_parquet, directly or as the lake planner's projection of it, spliced
// into the tree's text or not). Each such ref bounds the keys reading it by its rows
// (counted from the footers), and a key that is one of its integer columns by that
// column's range in the footers' statistics (max - min + 1, and one for NULL); the groups
// are at most the product over the refs. Each key is a function of one row of the refs it
// reads (keys are CONSISTENT: DeterminismCheck), so an inner join or a filter only removes
// combinations; an outer join can add one NULL-extended row per ref, counted as one more
// row. q2's p.category is bounded by the 50,000 products, q4's customer_id by its range.
Result<std::optional<int64_t>> FooterKeyBound(duck::Connection& conn, const sql_tree::SqlTree& tree,
                                              const Json& n, const std::vector<Json>& keys,
                                              const std::vector<Column>& key_cols,
                                              std::optional<KeyRange>* key_range) {
  const std::optional<int64_t> none;
  if (key_range != nullptr) key_range->reset();
  std::vector<const Json*> refs;
  bool simple_from = true;
  std::function<void(const Json&)> collect = [&](const Json& r) {
    std::string type = Str(r, "type");
    if (type == "JOIN") {
      collect(r["left"]);
      collect(r["right"]);
    } else if (type == "TABLE_FUNCTION" || type == "SUBQUERY" || type == "BASE_TABLE") {
      // `AS t(a, b)` renames the columns by position: not followed here.
      if (r.contains("column_name_alias") && r["column_name_alias"].is_array() &&
          !r["column_name_alias"].empty()) {
        simple_from = false;
      }
      refs.push_back(&r);
    } else {
      simple_from = false;
    }
  };
  if (!n.contains("from_table")) return none;
  collect(n["from_table"]);
  if (!simple_from || refs.empty()) return none;
  // Per ref: the keys reading it, and whether each is a bare column of it (its name).
  std::map<const Json*, std::vector<std::optional<std::string>>> used;
  for (size_t i = 0; i < keys.size(); ++i) {
    bool bounded = true;
    std::set<const Json*> reads;
    std::string bare;
    std::function<void(const Json&)> visit = [&](const Json& e) {
      if (!bounded) return;
      if (e.is_object() && Str(e, "class") == "SUBQUERY") {
        bounded = false;
        return;
      }
      if (e.is_object() && Str(e, "class") == "COLUMN_REF") {
        const Json& names = e["column_names"];
        const Json* ref = nullptr;
        if (names.size() == 1 && refs.size() == 1) {
          ref = refs[0];
        } else if (names.size() == 2) {
          for (const Json* r : refs) {
            if (EqualsIgnoreCase(Str(*r, "alias"), names[0].get<std::string>())) ref = r;
          }
        }
        if (ref == nullptr) {
          bounded = false;
        } else {
          reads.insert(ref);
          if (&e == &keys[i]) bare = names.back().get<std::string>();
        }
        return;
      }
      if (e.is_structured()) {
        for (const Json& c : e) visit(c);
      }
    };
    visit(keys[i]);
    if (!bounded) return none;
    bool integer = i < key_cols.size() && OrdinalExpr(key_cols[i].type, "x") == "x::BIGINT" &&
                   key_cols[i].type != "BOOLEAN";
    for (const Json* r : reads) {
      used[r].push_back(!bare.empty() && integer ? std::optional<std::string>(bare) : std::nullopt);
    }
  }
  int64_t bound = 1;
  std::deque<Json> spliced;  // the parsed scans of lake tables, read below
  auto times = [](int64_t a, int64_t b) {
    return b > 0 && a > std::numeric_limits<int64_t>::max() / b
               ? std::numeric_limits<int64_t>::max()
               : a * std::max<int64_t>(b, 1);
  };
  for (const auto& [r, ref_keys] : used) {
    ASSIGN_OR_RETURN(std::optional<ParquetRef> scan, ReadParquetRef(conn, tree, *r, spliced));
    if (!scan) return none;
    // One more than the rows: an outer join's side may add a NULL key.
    const int64_t ref_rows = scan->rows + 1;
    // The range product of its keys when every one is a bare integer column.
    std::optional<int64_t> range = 1;
    if (scan->hive_paths) range.reset();
    for (const std::optional<std::string>& key : ref_keys) {
      if (!key || !range) {
        range.reset();
        break;
      }
      std::optional<std::string> column = scan->FileColumn(*key);
      if (!column) return none;
      // Every row group of every file must have both statistics of the column.
      ASSIGN_OR_RETURN(
          auto stats,
          Ask(conn,
              fmt::format("WITH s AS (SELECT file_name, name FROM parquet_schema({0}) WHERE {1}) "
                          "SELECT (max(TRY_CAST(m.stats_max_value AS HUGEINT)) - "
                          "min(TRY_CAST(m.stats_min_value AS HUGEINT)) + 2)::VARCHAR, "
                          "count(DISTINCT m.file_name), count(*) FILTER (WHERE "
                          "TRY_CAST(m.stats_min_value AS HUGEINT) IS NULL OR "
                          "TRY_CAST(m.stats_max_value AS HUGEINT) IS NULL), "
                          "min(TRY_CAST(m.stats_min_value AS BIGINT))::VARCHAR, "
                          "max(TRY_CAST(m.stats_max_value AS BIGINT))::VARCHAR "
                          "FROM parquet_metadata({0}) m JOIN s ON m.file_name = s.file_name AND "
                          "m.path_in_schema = s.name",
                          scan->files, scan->ColumnMatch(*column)),
              "statistics of a key's column"));
      if (stats.size() != 1 || !stats[0][0] || !stats[0][1] || !stats[0][2] ||
          std::atoll(stats[0][1]->c_str()) != scan->file_count ||
          std::atoll(stats[0][2]->c_str()) != 0) {
        range.reset();
        break;
      }
      // Beyond int64 (HUGEINT text longer than 18 digits): no bound from it.
      const std::string& width = *stats[0][0];
      if (width.size() > 18 || width.empty() || width[0] == '-') {
        range.reset();
        break;
      }
      range = times(*range, std::atoll(width.c_str()));
      // The bounds as BIGINTs when they are the same bounds (none beyond BIGINT).
      if (key_range != nullptr && keys.size() == 1 && used.size() == 1 && stats[0].size() == 5 &&
          stats[0][3] && stats[0][4]) {
        const KeyRange r{std::atoll(stats[0][3]->c_str()), std::atoll(stats[0][4]->c_str())};
        if (static_cast<__int128>(r.hi) - r.lo + 2 == std::atoll(width.c_str())) *key_range = r;
      }
    }
    bound = times(bound, range ? std::min(*range, ref_rows) : ref_rows);
  }
  return std::optional<int64_t>(bound);
}

// D21: the statistics a latest-row plan needs (each order key's bounds and NULLs, an
// integer tie-breaking column's) from the footers instead of a scan of the input. Every
// file must have the column and every row group its NULL count and, unless all its values
// are NULL, both bounds, which must cast to the column's type; else that column is not
// answered. Bounds are over the files, so over any WHERE of `n` too (a filter only removes
// rows: the bounds stay bounds).
Result<std::optional<FooterColumns>> FooterColumnStats(duck::Connection& conn,
                                                       const sql_tree::SqlTree& tree, const Json& n,
                                                       const std::vector<const Json*>& exprs,
                                                       const std::vector<Column>& types) {
  const std::optional<FooterColumns> none;
  if (!n.contains("from_table")) return none;
  const Json& r = n["from_table"];
  std::string type = Str(r, "type");
  if (type != "TABLE_FUNCTION" && type != "SUBQUERY" && type != "BASE_TABLE") return none;
  if (r.contains("column_name_alias") && r["column_name_alias"].is_array() &&
      !r["column_name_alias"].empty()) {
    return none;
  }
  std::deque<Json> spliced;
  ASSIGN_OR_RETURN(std::optional<ParquetRef> scan, ReadParquetRef(conn, tree, r, spliced));
  if (!scan || scan->hive_paths) return none;
  FooterColumns out;
  out.rows = scan->rows;
  out.columns.resize(exprs.size());
  // The file column each expression is, when it is a bare column of the ref.
  std::string alias = Str(r, "alias");
  if (alias.empty() && type == "BASE_TABLE") alias = Str(r, "table_name");
  std::vector<std::string> wanted, cases_min, cases_max;
  std::vector<size_t> at;
  for (size_t i = 0; i < exprs.size(); ++i) {
    const Json& e = *exprs[i];
    if (Str(e, "class") != "COLUMN_REF") continue;
    const Json& names = e["column_names"];
    if (names.size() == 2 && !EqualsIgnoreCase(names[0].get<std::string>(), alias)) continue;
    if (names.size() != 1 && names.size() != 2) continue;
    std::optional<std::string> column = scan->FileColumn(names.back().get<std::string>());
    std::string ord_min =
        OrdinalExpr(types[i].type, fmt::format("TRY_CAST(m.stats_min_value AS {})", types[i].type));
    std::string ord_max =
        OrdinalExpr(types[i].type, fmt::format("TRY_CAST(m.stats_max_value AS {})", types[i].type));
    if (IsScaledFloat(types[i].type)) {
      // A DOUBLE or FLOAT: its bounds in hundredths, rounded outwards (D25). A bound that is
      // NaN, infinite or beyond BIGINT does not cast: the column is not answered.
      ord_min = fmt::format("TRY_CAST(floor(TRY_CAST(m.stats_min_value AS DOUBLE) * {}) AS BIGINT)",
                            kDoubleScale);
      ord_max = fmt::format("TRY_CAST(ceil(TRY_CAST(m.stats_max_value AS DOUBLE) * {}) AS BIGINT)",
                            kDoubleScale);
    }
    if (!column || ord_min.empty()) continue;
    size_t k = wanted.size();
    wanted.push_back(fmt::format("({}, {})", k, duck::QuoteLiteral(*column)));
    cases_min.push_back(fmt::format("WHEN {} THEN {}", k, ord_min));
    cases_max.push_back(fmt::format("WHEN {} THEN {}", k, ord_max));
    at.push_back(i);
  }
  if (wanted.empty()) return std::optional<FooterColumns>(std::move(out));
  std::string keys =
      scan->schema_map.empty()
          ? "SELECT i, col AS key FROM want"
          : fmt::format(
                "SELECT want.i, f.k AS key FROM want JOIN (SELECT unnest(map_keys(m)) AS k, "
                "unnest(map_values(m)) AS v FROM (SELECT {} AS m)) f ON f.v.name = want.col",
                scan->schema_map);
  std::string lo = fmt::format("CASE s.i {} END", fmt::join(cases_min, " "));
  std::string hi = fmt::format("CASE s.i {} END", fmt::join(cases_max, " "));
  std::string sql = fmt::format(
      "WITH want(i, col) AS (VALUES {0}), keys AS ({1}), "
      "s AS (SELECT p.file_name, p.name, keys.i FROM parquet_schema({2}) p JOIN keys ON p.{3} = "
      "keys.key) "
      "SELECT s.i, min({4})::VARCHAR, max({5})::VARCHAR, sum(m.stats_null_count)::BIGINT, "
      "count(*) FILTER (WHERE m.stats_null_count IS NULL OR (({4}) IS NULL OR ({5}) IS NULL) AND "
      "m.stats_null_count <> m.row_group_num_rows), count(DISTINCT m.file_name) "
      "FROM parquet_metadata({2}) m JOIN s ON m.file_name = s.file_name AND m.path_in_schema = "
      "s.name GROUP BY s.i",
      fmt::join(wanted, ", "), keys, scan->files, scan->schema_map.empty() ? "name" : "field_id",
      lo, hi);
  Result<Rows> rows = Ask(conn, sql, "footer statistics");
  if (!rows.ok()) {
    if (rows.status().code() == StatusCode::kUnimplemented) return none;  // not answered
    return rows.status();
  }
  for (const auto& row : *rows) {
    if (row.size() != 6 || !row[0] || !row[3] || !row[4] || !row[5]) continue;
    size_t k = static_cast<size_t>(std::atoll(row[0]->c_str()));
    if (k >= at.size() || std::atoll(row[4]->c_str()) != 0 ||
        std::atoll(row[5]->c_str()) != scan->file_count) {
      continue;
    }
    FooterColumn c;
    c.nulls = std::atoll(row[3]->c_str());
    if (row[1] && row[2]) {
      c.lo = std::atoll(row[1]->c_str());
      c.hi = std::atoll(row[2]->c_str());
    } else if (c.nulls != out.rows) {
      continue;  // no bounds, yet not all NULL
    }
    out.columns[at[k]] = c;
  }
  return std::optional<FooterColumns>(std::move(out));
}

}  // namespace sluice::query::rewrite
