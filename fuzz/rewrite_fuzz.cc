// Differential fuzz target for the query server's planner rewrites (src/query/rewrite): the
// input's bytes choose a table (rows, column types, NULLs, how often values repeat, so full
// ties happen), whether it is read from a Parquet file of small row groups (the footers'
// statistics, D21), and a query of a shape the rewrites take: the latest row per key
// (ROW_NUMBER = 1 in its forms: the consumer's WHERE, QUALIFY, a CTE; DISTINCT ON, D24; a
// WHERE on the window query; `*` or chosen columns; an aggregate consumer) or a group-by
// with its consumer. The rewritten plan runs with 1, 2 and 3 parts, and its answer must be one that
// DuckDB's own plan of the same query allows:
//  - a group-by, or a latest-row query whose consumer reads only what full ties share: the
//    same rows as DuckDB's (as a multiset);
//  - otherwise (a tied row may be any of them): one row per key, each a row that ranks
//    first (RANK() = 1 in the same window).
// Any other outcome aborts, as does an error from the rewritten plan where DuckDB's own
// plan answers. A query no rewrite takes is fine (it runs as it is).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "duck/database.h"
#include "query/rewrite/rewrite.h"

namespace {

using sluice::Status;
using sluice::duck::Connection;
using sluice::duck::Database;
using Rows = std::vector<std::vector<std::optional<std::string>>>;
namespace rw = sluice::query::rewrite;

// The input as a stream of choices; zeros once it runs out.
class Choices {
 public:
  Choices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint32_t Below(uint32_t n) {
    if (n <= 1) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 2; ++i) v = (v << 8) | (pos_ < size_ ? data_[pos_++] : 0);
    return v % n;
  }
  bool Maybe(uint32_t percent) { return Below(100) < percent; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

struct Env {
  std::filesystem::path dir;
  std::unique_ptr<Database> db;
  std::unique_ptr<Connection> conn;
};

Env& TheEnv() {
  static Env* env = [] {
    auto* e = new Env;
    e->dir = std::filesystem::temp_directory_path() /
             ("sluice-rewrite-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(e->dir);
    static std::filesystem::path made = e->dir;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    auto db = Database::Open(
        {.memory_limit_bytes = 256 << 20, .threads = 2, .temp_directory = (e->dir / "spill")});
    if (!db.ok()) std::abort();
    e->db = std::move(db).value();
    auto conn = Connection::Open(*e->db);
    if (!conn.ok()) std::abort();
    e->conn = std::move(conn).value();
    if (!e->conn->Execute("SET preserve_insertion_order = false").ok()) std::abort();
    if (!rw::WarmUp(*e->conn).ok()) std::abort();
    return e;
  }();
  return *env;
}

// A column's values: `v` is a small integer (so that values repeat); each type maps it to
// an order-preserving value of its own, with NULLs mixed in by the caller.
const std::vector<std::string> kTypes = {"INTEGER",  "BIGINT", "TIMESTAMP",   "DATE",
                                         "BOOLEAN",  "DOUBLE", "VARCHAR",     "DECIMAL(10,2)",
                                         "SMALLINT", "FLOAT",  "TIMESTAMPTZ", "TIMESTAMP_NS"};
std::string ValueOf(const std::string& type, const std::string& v) {
  if (type == "INTEGER" || type == "SMALLINT") return fmt::format("({} - 40)::{}", v, type);
  if (type == "BIGINT") return fmt::format("({} * 1000000007 - 5)::BIGINT", v);
  if (type == "TIMESTAMP") return fmt::format("TIMESTAMP '2024-01-01' + to_seconds({}::BIGINT)", v);
  if (type == "TIMESTAMP_NS")
    return fmt::format("(TIMESTAMP '2024-01-01' + to_microseconds({}::BIGINT))::TIMESTAMP_NS", v);
  if (type == "TIMESTAMPTZ")
    return fmt::format("(TIMESTAMP '2024-01-01' + to_minutes({}::BIGINT))::TIMESTAMPTZ", v);
  if (type == "DATE") return fmt::format("DATE '2024-01-01' + {}::INTEGER", v);
  if (type == "BOOLEAN") return fmt::format("({} % 2 = 0)", v);
  if (type == "DOUBLE")
    return fmt::format("CASE WHEN {0} = 3 THEN -0.0 ELSE ({0} - 20)::DOUBLE / 4 END", v);
  if (type == "FLOAT")  // quarters pack exactly (D14), unless 37's extra 1/300 is drawn
    return fmt::format(
        "(({0} - 20)::FLOAT / 4 + CASE WHEN {0} = 37 THEN 1::FLOAT / 300 ELSE 0 END)", v);
  if (type == "DECIMAL(10,2)") return fmt::format("(({} - 20)::DECIMAL(10,2) / 8)", v);
  return fmt::format("'s' || lpad({}::VARCHAR, 3, '0')", v);  // VARCHAR
}

Rows Sorted(Rows r) {
  std::sort(r.begin(), r.end());
  return r;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "rewrite_fuzz: %s\n", what.c_str());
  std::abort();
}

Rows MustQuery(Connection& conn, const std::string& sql) {
  auto rows = conn.QueryText(sql);
  if (!rows.ok()) Fail(fmt::format("{}\n  {}", rows.status().ToString(), sql));
  return *rows;
}

void RunOne(Choices& in) {
  Env& env = TheEnv();
  Connection& conn = *env.conn;
  // The table: id (unique), two key columns, three order columns, two others.
  const uint32_t rows = 20 + in.Below(400);
  const uint32_t seed = in.Below(1000);
  struct Col {
    std::string name, type;
  };
  std::vector<Col> cols = {{"id", "BIGINT"}};
  std::vector<std::string> exprs = {"i AS id"};
  auto add = [&](const std::string& name, const std::string& type, uint32_t distinct,
                 uint32_t null_percent) {
    std::string v = fmt::format("(hash(i, {}, {}) % {})::BIGINT", seed, cols.size(), distinct);
    std::string value = ValueOf(type, v);
    exprs.push_back(fmt::format("CASE WHEN hash(i, {}, {}) % 100 < {} THEN NULL ELSE {} END AS {}",
                                seed, cols.size() + 100, null_percent, value, name));
    cols.push_back({name, type});
  };
  add("k1", in.Maybe(70) ? "INTEGER" : kTypes[in.Below(kTypes.size())], 1 + in.Below(30),
      in.Maybe(30) ? in.Below(20) : 0);
  add("k2", in.Maybe(50) ? "VARCHAR" : "BIGINT", 1 + in.Below(4), in.Maybe(30) ? 10 : 0);
  for (const char* name : {"o1", "o2", "o3", "x1", "x2"}) {
    add(name, kTypes[in.Below(kTypes.size())], 1 + in.Below(60), in.Maybe(40) ? in.Below(30) : 0);
  }
  std::string create = fmt::format("CREATE OR REPLACE TABLE f AS SELECT {} FROM range({}) r(i)",
                                   fmt::join(exprs, ", "), rows);
  if (Status st = conn.Execute(create); !st.ok())
    Fail(fmt::format("cannot create the table: {}\n  {}", st.ToString(), create));
  std::string source = "f";
  if (in.Maybe(40)) {
    std::string file = (env.dir / "f.parquet").string();
    std::string copy = fmt::format("COPY f TO '{}' (FORMAT parquet, ROW_GROUP_SIZE {})", file,
                                   std::max<uint32_t>(16, 8 + in.Below(200)));
    if (!conn.Execute(copy).ok()) Fail("cannot write " + file);
    source = fmt::format("read_parquet('{}')", file);
  }
  auto pick = [&](size_t from, size_t to) { return cols[from + in.Below(to - from)].name; };
  const std::string where =
      in.Maybe(25) ? fmt::format(" WHERE {} IS NOT NULL", pick(1, cols.size())) : "";

  std::string sql;
  // How the answer is judged: exactly, or one ranking-first row per key.
  bool exact = true;
  std::string reference;                 // for the inexact judgement: the RANK() = 1 rows
  std::vector<std::string> key_columns;  // the PARTITION BY columns (inexact judgement)
  std::string groups_sql;                // how many keys there are
  if (in.Maybe(70)) {
    // Latest row per key.
    std::vector<std::string> partition = {in.Maybe(80) ? "k1" : "k2"};
    if (in.Maybe(25)) partition.push_back(partition[0] == "k1" ? "k2" : "k1");
    std::vector<std::string> orders;
    const uint32_t norders = in.Below(4);
    std::set<std::string> used;
    for (uint32_t j = 0; j < norders; ++j) {
      std::string c = in.Maybe(15) ? "id" : pick(3, 6);
      if (!used.insert(c).second) continue;
      std::string dir = in.Maybe(50) ? " DESC" : in.Maybe(30) ? " ASC" : "";
      std::string nulls = in.Maybe(30) ? " NULLS FIRST" : in.Maybe(30) ? " NULLS LAST" : "";
      orders.push_back(c + dir + nulls);
    }
    std::string over =
        fmt::format("PARTITION BY {}{}", fmt::join(partition, ", "),
                    orders.empty() ? "" : fmt::format(" ORDER BY {}", fmt::join(orders, ", ")));
    // The window query's columns: all, or some (always the keys, for the judgement).
    std::vector<std::string> select;
    if (in.Maybe(50)) {
      select = {"*"};
      for (const Col& c : cols) key_columns.push_back(c.name);
    } else {
      std::set<std::string> chosen(partition.begin(), partition.end());
      for (size_t c = 1; c < cols.size(); ++c) {
        if (in.Maybe(50)) chosen.insert(cols[c].name);
      }
      for (const Col& c : cols) {
        if (chosen.count(c.name)) {
          select.push_back(c.name);
          key_columns.push_back(c.name);
        }
      }
    }
    std::string window = fmt::format("SELECT {}, row_number() OVER ({}) AS rn FROM {}{}",
                                     fmt::join(select, ", "), over, source, where);
    const uint32_t form = in.Below(5);
    // The rows kept per key: 1, or top k (D23: passes through), in the filter's forms.
    const uint32_t k = in.Maybe(85) ? 1 : 2 + in.Below(4);
    const std::vector<std::string> filters =
        k == 1
            ? std::vector<std::string>{"rn = 1", "rn <= 1", "rn < 2", "1 = rn"}
            : std::vector<std::string>{fmt::format("rn <= {}", k), fmt::format("rn < {}", k + 1),
                                       fmt::format("{} >= rn", k), fmt::format("{} > rn", k + 1)};
    // With an ORDER BY that ends in the unique id there are no full ties: any consumer is
    // judged exactly. Top k with ties is judged by what ties cannot change: the rows per key.
    const bool unique_order = !orders.empty() && orders.back().rfind("id", 0) == 0;
    if (form == 4) {
      sql = fmt::format("SELECT * FROM ({} QUALIFY {}) AS w", window, filters[0]);
      exact = false;
    } else if (in.Maybe(30) || (k > 1 && !unique_order)) {
      // An aggregate consumer of what full ties share: the keys and the rows.
      sql = fmt::format(
          "WITH w AS ({}) SELECT count(*), count(DISTINCT ({})), min({}), max({}), max(rn) "
          "FROM w WHERE {}",
          window, fmt::join(partition, ", "), partition[0], partition.back(), filters[form]);
    } else {
      sql = fmt::format("SELECT * FROM ({}) AS w WHERE {}", window, filters[form]);
      exact = false;
    }
    if (k > 1 && form == 4 && !unique_order) {
      sql = fmt::format(
          "WITH w AS ({} QUALIFY {}) SELECT count(*), count(DISTINCT ({})), max(rn) FROM w", window,
          filters[0], fmt::join(partition, ", "));
      exact = true;
    }
    if (k == 1 && !orders.empty() && in.Maybe(25)) {
      // DISTINCT ON (D24): the first row per key by the rest of the ORDER BY. Judged
      // exactly: whole rows with a unique order, else what full ties share.
      const std::string distinct = fmt::format(
          "SELECT DISTINCT ON ({0}) {1} FROM {2}{3} ORDER BY {0}, {4}", fmt::join(partition, ", "),
          fmt::join(select, ", "), source, where, fmt::join(orders, ", "));
      // A LIMIT keeps the first keys in their order: the same rows either way.
      sql = unique_order
                ? distinct + (in.Maybe(30) ? " LIMIT 7" : "")
                : fmt::format(
                      "WITH w AS ({}) SELECT count(*), count(DISTINCT ({})), min({}), "
                      "max({}) FROM w",
                      distinct, fmt::join(partition, ", "), partition[0], partition.back());
      exact = true;
    }
    std::string sel = fmt::format("{}", fmt::join(select, ", "));
    reference = fmt::format(
        "SELECT * EXCLUDE (__rank), 1::BIGINT AS rn FROM (SELECT {}, rank() OVER ({}) AS __rank "
        "FROM {}{}) WHERE __rank = 1",
        sel, over, source, where);
    groups_sql = fmt::format("SELECT count(*) FROM (SELECT DISTINCT {} FROM {}{})",
                             fmt::join(partition, ", "), source, where);
    key_columns.erase(std::remove_if(key_columns.begin(), key_columns.end(),
                                     [&](const std::string& c) {
                                       return std::find(partition.begin(), partition.end(), c) ==
                                              partition.end();
                                     }),
                      key_columns.end());
    if (unique_order) exact = true;
  } else {
    // A group-by of one or two keys, its aggregates exact in any order.
    std::vector<std::string> keys = {pick(1, cols.size())};
    if (in.Maybe(30)) keys.push_back(pick(1, cols.size()));
    std::string agg_col = pick(3, cols.size());
    std::string group = fmt::format(
        "SELECT {0}, count(*) AS n, count({1}) AS c, min({1}) AS lo, max({1}) AS hi, "
        "count(DISTINCT {1}) AS d, sum(id) AS s FROM {2}{3} GROUP BY {0}",
        fmt::join(keys, ", "), agg_col, source, where);
    sql = in.Maybe(50)
              ? group
              : fmt::format("SELECT count(*), sum(n), max(c), sum(s) FROM ({}) AS g", group);
  }

  auto want = conn.QueryText(sql);
  if (!want.ok()) return;  // DuckDB refuses it too (a type without an order, say)
  // The first rows a plan may assume from (D25): sometimes only a few, so that a later row
  // breaks the assumption and the plan is made again without it, as the server does.
  const int64_t probe_rows = in.Maybe(30) ? 1 + in.Below(40) : 1'000'000;
  for (int parts : {1, 2, 3}) {
    rw::RewriteOptions options{.memory_limit_bytes = 256 << 20,
                               .threads = 2,
                               .min_rows_to_rewrite = 0,
                               .force_parts = parts};
    options.probe_rows = probe_rows;
    std::string why;
    auto plan = rw::PlanRewrite(conn, sql, options, &why);
    if (!plan.ok()) Fail(fmt::format("planning failed: {}\n  {}", plan.status().ToString(), sql));
    if (plan->has_value() && (*plan)->assumed) {
      auto tried = rw::RunSteps(conn, **plan);
      if (rw::AssumptionFailed(tried.status())) {
        if (std::getenv("REWRITE_FUZZ_VERBOSE") != nullptr)
          std::fprintf(stderr, "assumption failed: planning again\n");
        options.assume = false;
        plan = rw::PlanRewrite(conn, sql, options, &why);
        if (!plan.ok())
          Fail(fmt::format("planning again failed: {}\n  {}", plan.status().ToString(), sql));
      } else {
        if (!tried.ok())
          Fail(fmt::format("a step failed: {}\n  {}", tried.status().ToString(), sql));
        (void)rw::RunCleanup(conn, **plan);
      }
    }
    if (std::getenv("REWRITE_FUZZ_VERBOSE") != nullptr) {
      std::fprintf(stderr, "%d part(s), %s: %s\n  %s\n", parts, exact ? "exact" : "ranked",
                   plan->has_value() ? (*plan)->explanation.c_str() : why.c_str(), sql.c_str());
    }
    if (!plan->has_value()) return;  // not a shape the rewrites take
    const rw::Plan& p = **plan;
    auto final_select = rw::RunSteps(conn, p);
    if (!final_select.ok())
      Fail(fmt::format("a step failed: {}\n  {}", final_select.status().ToString(), sql));
    auto got = conn.QueryText(*final_select);
    if (!rw::RunCleanup(conn, p).ok()) Fail("cleanup failed");
    if (!got.ok())
      Fail(fmt::format("the rewritten query failed: {}\n  {}\n  {}", got.status().ToString(), sql,
                       *final_select));
    if (exact) {
      if (Sorted(*got) != Sorted(*want))
        Fail(fmt::format("{} part(s): answers differ\n  {}\n  {}", parts, sql, p.explanation));
      continue;
    }
    // One row per key, each ranking first.
    Rows allowed = Sorted(MustQuery(conn, reference));
    Rows groups = MustQuery(conn, groups_sql);
    if (groups.size() != 1 || !groups[0][0] || std::to_string(got->size()) != *groups[0][0]) {
      Fail(fmt::format("{} part(s): {} rows for {} keys\n  {}\n  {}", parts, got->size(),
                       groups.empty() || !groups[0][0] ? "?" : *groups[0][0], sql, p.explanation));
    }
    for (const auto& row : *got) {
      if (!std::binary_search(allowed.begin(), allowed.end(), row))
        Fail(fmt::format("{} part(s): a row that does not rank first\n  {}\n  {}", parts, sql,
                         p.explanation));
    }
    // The keys come out once each (the rows are the window query's columns then rn; the
    // partition columns are among them, in the table's order).
    std::set<std::vector<std::optional<std::string>>> seen;
    std::vector<size_t> key_at;
    auto described =
        conn.QueryText(fmt::format("SELECT column_name FROM (DESCRIBE {})", reference));
    if (!described.ok()) Fail("cannot describe the reference");
    for (size_t c = 0; c < described->size(); ++c) {
      const auto& name = (*described)[c][0];
      if (name && std::find(key_columns.begin(), key_columns.end(), *name) != key_columns.end())
        key_at.push_back(c);
    }
    for (const auto& row : *got) {
      std::vector<std::optional<std::string>> key;
      for (size_t c : key_at) key.push_back(row[c]);
      if (!seen.insert(key).second)
        Fail(fmt::format("{} part(s): a key comes out twice\n  {}\n  {}", parts, sql,
                         p.explanation));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Choices in(data, size);
  RunOne(in);
  return 0;
}
