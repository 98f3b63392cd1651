// `sluice bench query --small-statements` (query_small.h).
#include "bench/query_small.h"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/machine_info.h"
#include "sinks/testing/postgres_server.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
using PlainJson = nlohmann::json;

constexpr int kProducts = 50'000;  // the products dimension's rows (query_bench.cc)

// One statement of the bench, as each server is asked it.
struct SmallStatement {
  std::string name;
  std::string what;
  // The text for sluice and for PostgreSQL; `key` is a product id for the lookup.
  std::function<std::string(bool sluice, int key)> sql;
};

std::vector<SmallStatement> Statements() {
  return {
      {"select_1", "SELECT 1", [](bool, int) { return std::string("SELECT 1"); }},
      // psql 15's first query for `\d products`.
      {"catalog", "psql's first query for \\d products",
       [](bool, int) {
         return std::string(
             "SELECT c.oid,\n  n.nspname,\n  c.relname\nFROM pg_catalog.pg_class c\n     LEFT "
             "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\nWHERE c.relname "
             "OPERATOR(pg_catalog.~) '^(products)$' COLLATE pg_catalog.default\n  AND "
             "pg_catalog.pg_table_is_visible(c.oid)\nORDER BY 2, 3;");
       }},
      {"point_lookup", "SELECT * FROM products WHERE product_id = <random>",
       [](bool sluice, int key) {
         return fmt::format("SELECT * FROM {} WHERE product_id = {}",
                            sluice ? "lake.bench.products" : "products", key);
       }},
  };
}

struct Throughput {
  double statements_per_s = 0;
  double latency_avg_ms = 0;  // clients / rate, as pgbench reports it
  std::string error;          // the first failure, when one client failed
};

using PgConn = std::unique_ptr<PGconn, decltype(&PQfinish)>;

// Runs one statement's text (any rows); "" or the error.
std::string RunOne(PGconn* conn, const std::string& sql) {
  std::unique_ptr<PGresult, decltype(&PQclear)> r(PQexec(conn, sql.c_str()), &PQclear);
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) return "";
  std::string e = r ? PQresultErrorMessage(r.get()) : "";
  return e.empty() ? std::string(PQerrorMessage(conn)) : e;
}

// `clients` sessions, connected first (not timed), then sending statements back to back
// for `warmup` (not counted) and `seconds` (counted).
Throughput Drive(const std::string& conninfo, int clients, double seconds, const SmallStatement& s,
                 bool sluice) {
  std::vector<std::atomic<int64_t>> done(clients);
  std::vector<std::string> errors(clients);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      PgConn conn(PQconnectdb(conninfo.c_str()), &PQfinish);
      if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
        errors[c] = fmt::format("connecting: {}", conn ? PQerrorMessage(conn.get()) : "no memory");
        ready.fetch_add(1);
        return;
      }
      std::mt19937 rng(static_cast<uint32_t>(c + 1));
      std::uniform_int_distribution<int> key(1, kProducts);
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      while (!stop.load()) {
        std::string e = RunOne(conn.get(), s.sql(sluice, key(rng)));
        if (!e.empty()) {
          errors[c] = e;
          return;
        }
        done[c].fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  while (ready.load() < clients) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto total = [&] {
    int64_t n = 0;
    for (auto& d : done) n += d.load(std::memory_order_relaxed);
    return n;
  };
  go = true;
  std::this_thread::sleep_for(std::chrono::seconds(1));  // warm-up, not counted
  const int64_t first = total();
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const int64_t last = total();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  for (std::thread& t : threads) t.join();
  Throughput out;
  for (const std::string& e : errors) {
    if (!e.empty() && out.error.empty()) out.error = e;
  }
  out.statements_per_s = static_cast<double>(last - first) / elapsed;
  out.latency_avg_ms = out.statements_per_s > 0 ? 1000.0 * clients / out.statements_per_s : 0;
  return out;
}

// The products table in PostgreSQL as the generator makes it (the same columns and
// values' shape), keyed as a PostgreSQL user keys it.
constexpr const char* kPostgresProducts =
    "CREATE TABLE products (product_id integer PRIMARY KEY, name text, category text, "
    "brand text, list_price double precision);\n"
    "INSERT INTO products SELECT p, 'product-' || lpad(p::text, 5, '0'), "
    "'category-' || lpad((p % 20)::text, 2, '0'), 'brand-' || lpad((p % 500)::text, 3, '0'), "
    "(100 + p % 100000)::float8 / 100 FROM generate_series(1, 50000) p;\n"
    "ANALYZE products;";

std::string Rate(double v) { return v > 0 ? fmt::format("{:.0f}", v) : "-"; }
std::string Ms(double v) { return v > 0 ? fmt::format("{:.2f}", v) : "-"; }

}  // namespace

int RunSmallStatementsBench(const QueryBenchOptions& o, const QueryDataset& data,
                            const std::string& work, const std::string& binary) {
  auto fail = [](const std::string& why) {
    std::fprintf(stderr, "sluice bench query --small-statements: %s\n", why.c_str());
    return 1;
  };
  const MachineInfo machine = GetMachineInfo();
  const std::string load_start = LoadAverages();
  // sluice: `sluice serve` over the generated warehouse, as the sluice-iceberg engine runs it.
  Result<std::unique_ptr<Engine>> engine = MakeEngine("sluice-iceberg");
  if (!engine.ok()) return fail(engine.status().message());
  EngineRunSpec spec;
  spec.data = &data;
  spec.query = "small";
  spec.sql_template = "SELECT 1";
  spec.sql = spec.sql_template;
  spec.threads = o.threads;
  spec.memory_setting = "3GB";
  spec.memory_bytes = 3'000'000'000;
  spec.work_dir = work + "/small-statements";
  spec.sluice_binary = binary;
  std::error_code ec;
  fs::create_directories(spec.work_dir + "/spill", ec);
  if (Status st = (*engine)->Check(spec); !st.ok()) return fail(st.message());
  Result<std::unique_ptr<EngineRun>> server = (*engine)->Launch(spec);
  if (!server.ok()) return fail(server.status().message());
  const std::string sluice_dsn = fmt::format(
      "host=127.0.0.1 port={} user=sluice dbname=sluice sslmode=disable", (*server)->pg_port());

  // PostgreSQL, when installed: the reference.
  std::optional<sinks::testing::PostgresServer> pg;
  std::string pg_missing = sinks::testing::PostgresServer::Unavailable();
  if (pg_missing.empty()) {
    pg.emplace();
    if (std::string why = pg->Start(); !why.empty()) return fail("PostgreSQL: " + why);
    std::string made = pg->Psql(kPostgresProducts);
    if (made.starts_with("ERROR")) return fail("PostgreSQL's products table: " + made);
  } else {
    std::fprintf(stderr, "sluice bench query --small-statements: no PostgreSQL beside it: %s\n",
                 pg_missing.c_str());
  }

  // Every statement answers on both before anything is timed.
  for (const SmallStatement& s : Statements()) {
    for (bool sluice : {true, false}) {
      if (!sluice && !pg) continue;
      PgConn conn(PQconnectdb(sluice ? sluice_dsn.c_str() : pg->dsn().c_str()), &PQfinish);
      if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
        return fail(fmt::format("connecting to {}: {}", sluice ? "sluice" : "PostgreSQL",
                                conn ? PQerrorMessage(conn.get()) : "no memory"));
      }
      if (std::string e = RunOne(conn.get(), s.sql(sluice, 1)); !e.empty()) {
        return fail(fmt::format("{} on {}: {}", s.name, sluice ? "sluice" : "PostgreSQL", e));
      }
    }
  }

  const std::string commit = SourceCommit();
  const std::string machine_text =
      fmt::format("{}, {} cores, {}, {}", machine.cpu_model, machine.cores,
                  FormatBinaryBytes(machine.memory_bytes), machine.kernel);
  struct Row {
    const SmallStatement* s;
    Throughput sluice, postgres;
  };
  std::vector<Row> rows;
  const std::vector<SmallStatement> statements = Statements();
  for (const SmallStatement& s : statements) {
    Row r{&s, {}, {}};
    // The two servers take turns, statement by statement.
    fmt::print(stderr, "sluice bench query --small-statements: {} on sluice ...", s.name);
    std::fflush(stderr);
    r.sluice = Drive(sluice_dsn, o.clients, o.statement_seconds, s, true);
    fmt::print(stderr, " {:.0f}/s\n", r.sluice.statements_per_s);
    if (!r.sluice.error.empty())
      return fail(fmt::format("{} on sluice: {}", s.name, r.sluice.error));
    if (pg) {
      fmt::print(stderr, "sluice bench query --small-statements: {} on PostgreSQL ...", s.name);
      std::fflush(stderr);
      r.postgres = Drive(pg->dsn(), o.clients, o.statement_seconds, s, false);
      fmt::print(stderr, " {:.0f}/s\n", r.postgres.statements_per_s);
      if (!r.postgres.error.empty()) {
        return fail(fmt::format("{} on PostgreSQL: {}", s.name, r.postgres.error));
      }
    }
    rows.push_back(std::move(r));
  }
  (*server)->Stop();
  const std::string load_end = LoadAverages();

  if (o.json) {
    for (const Row& r : rows) {
      PlainJson j = {{"bench", "query"},
                     {"mode", "small_statements"},
                     {"statement", r.s->name},
                     {"sql", r.s->sql(true, 1)},
                     {"clients", o.clients},
                     {"seconds", o.statement_seconds},
                     {"protocol", "simple"},
                     {"statements_per_s", Round(r.sluice.statements_per_s, 1)},
                     {"latency_avg_ms", Round(r.sluice.latency_avg_ms, 3)},
                     {"postgres_statements_per_s",
                      pg ? PlainJson(Round(r.postgres.statements_per_s, 1)) : PlainJson(nullptr)},
                     {"postgres_latency_avg_ms",
                      pg ? PlainJson(Round(r.postgres.latency_avg_ms, 3)) : PlainJson(nullptr)},
                     {"target_statements_per_s", kSmallStatementsTarget},
                     {"commit", commit},
                     {"machine", machine_text},
                     {"load_start", load_start},
                     {"load_end", load_end}};
      fmt::print("{}\n", j.dump());
    }
    return 0;
  }
  fmt::print(
      "sluice bench query --small-statements: {} clients, {} s per statement after 1 s not "
      "counted, simple query protocol, {} threads, on {}\n",
      o.clients, o.statement_seconds, o.threads, machine_text);
  fmt::print("commit {}, load average {} at the start, {} at the end; reference: {}\n\n", commit,
             load_start, load_end,
             pg ? fmt::format("PostgreSQL from {} in the same run", pg->BinDir())
                : "none (" + pg_missing + ")");
  fmt::print("{:<14} {:>14} {:>9} {:>16} {:>9}   target >= {:.0f}/s\n", "statement",
             "sluice stmt/s", "avg ms", "PostgreSQL st/s", "avg ms", kSmallStatementsTarget);
  for (const Row& r : rows) {
    fmt::print("{:<14} {:>14} {:>9} {:>16} {:>9}   {}\n", r.s->name,
               Rate(r.sluice.statements_per_s), Ms(r.sluice.latency_avg_ms),
               Rate(r.postgres.statements_per_s), Ms(r.postgres.latency_avg_ms),
               r.sluice.statements_per_s >= kSmallStatementsTarget ? "met" : "MISSED");
  }
  fmt::print("\n");
  for (const SmallStatement& s : statements) fmt::print("{}: {}\n", s.name, s.what);
  return 0;
}

}  // namespace sluice::bench
