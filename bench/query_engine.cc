#include "bench/query_engine.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "bench/child_process.h"

extern char** environ;

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;

// Starts `args` (args[0] an absolute path) with the environment plus `env`, stdin from
// /dev/null, stdout and stderr to the given files (truncated). The child gets SIGKILL if
// the bench dies, so no run outlives it.
Result<pid_t> SpawnWithEnv(const std::vector<std::string>& args,
                           const std::vector<std::string>& env, const std::string& out_path,
                           const std::string& err_path) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const std::string& x : env) {
      size_t eq = x.find('=');
      if (entry.substr(0, entry.find('=')) == std::string_view(x).substr(0, eq)) replaced = true;
    }
    if (!replaced) env_strings.emplace_back(entry);
  }
  for (const std::string& x : env) env_strings.push_back(x);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return ErrnoError("open", out_path, errno);
  int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (err < 0) {
    int e = errno;
    ::close(out);
    return ErrnoError("open", err_path, e);
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(out);
    ::close(err);
    return ErrnoError("fork", args[0], e);
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    if (in < 0) ::_exit(126);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out);
  ::close(err);
  return pid;
}

// The last non-empty line of a file.
std::string LastLine(const std::string& path) {
  std::string text = ReadFile(path);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  size_t nl = text.rfind('\n');
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

// A child that runs the query itself and prints its answer line.
class OneShotChildRun : public EngineRun {
 public:
  OneShotChildRun(pid_t pid, std::string out_path, std::string err_path)
      : pid_(pid), out_path_(std::move(out_path)), err_path_(std::move(err_path)) {}
  ~OneShotChildRun() override { Stop(); }

  pid_t root_pid() const override { return pid_; }

  Result<EngineAnswer> Execute() override {
    Reap(/*block=*/true);
    if (!reaped_) return InternalError("could not wait for child {}", pid_);
    if (!WIFEXITED(status_) || WEXITSTATUS(status_) != 0) {
      return AbortedError("the child {}; its stderr ends:\n{}", DescribeWaitStatus(status_),
                          Tail(err_path_, 6));
    }
    std::string line = LastLine(out_path_);
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("answer") || !j["answer"].is_array() ||
        !j.contains("elapsed_s") || !j["elapsed_s"].is_number()) {
      return InternalError(
          "the child printed no answer line (stdout ends: {:?}); its stderr ends:\n{}", line,
          Tail(err_path_, 6));
    }
    EngineAnswer a;
    a.line = line;
    a.seconds = j["elapsed_s"].get<double>();
    for (const auto& v : j["answer"]) {
      if (v.is_string()) {
        a.values.push_back(v.get<std::string>());
      } else if (v.is_null()) {
        a.values.push_back("NULL");
      } else {
        a.values.push_back(v.dump());
      }
    }
    if (j.contains("columns") && j["columns"].is_array()) {
      for (const auto& c : j["columns"])
        a.columns.push_back(c.is_string() ? c.get<std::string>() : c.dump());
    }
    return a;
  }

  int64_t Stop() override {
    if (!reaped_) {
      KillTree(pid_);
      Reap(/*block=*/true);
    }
    return max_rss_bytes_;
  }

  double cpu_seconds() const override { return reaped_ ? cpu_seconds_ : -1; }

 private:
  void Reap(bool block) {
    if (reaped_) return;
    while (true) {
      int status = 0;
      rusage usage{};
      pid_t r = ::wait4(pid_, &status, block ? 0 : WNOHANG, &usage);
      if (r == pid_) {
        reaped_ = true;
        status_ = status;
        max_rss_bytes_ = static_cast<int64_t>(usage.ru_maxrss) * 1024;
        cpu_seconds_ = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
        return;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) reaped_ = true;  // not our child any more: nothing to wait for
      return;
    }
  }

  pid_t pid_;
  std::string out_path_, err_path_;
  bool reaped_ = false;
  int status_ = -1;
  int64_t max_rss_bytes_ = 0;
  double cpu_seconds_ = -1;
};

// `duckdb`: the sluice binary as a child (`sluice bench query-child`), the libduckdb it
// links, with memory_limit and threads, spilling into the run's work directory.
class DuckDbEngine : public Engine {
 public:
  std::string_view name() const override { return "duckdb"; }
  bool applies_memory_setting() const override { return true; }
  Status Check(const EngineRunSpec& spec) const override {
    if (::access(spec.sluice_binary.c_str(), X_OK) != 0) {
      return NotFoundError("duckdb engine: {} is not an executable file", spec.sluice_binary);
    }
    return Status::OK();
  }
  std::string Describe(const EngineRunSpec& spec) const override {
    return fmt::format(
        "`sluice bench query-child` per run: libduckdb, SET threads={} memory_limit=<setting>, "
        "temp_directory in the run's work dir, views over read_parquet",
        spec.threads);
  }
  Result<std::unique_ptr<EngineRun>> Launch(const EngineRunSpec& spec) override {
    std::vector<std::string> args = {spec.sluice_binary,
                                     "bench",
                                     "query-child",
                                     "--query",
                                     spec.query,
                                     "--sales",
                                     spec.data->sales_glob,
                                     "--products",
                                     spec.data->products_glob,
                                     "--threads",
                                     std::to_string(spec.threads),
                                     "--memory-limit-bytes",
                                     std::to_string(spec.memory_bytes),
                                     "--temp-dir",
                                     spec.work_dir + "/spill"};
    return LaunchOneShotChild(args, {}, spec.work_dir);
  }
};

// The lake child: the sluice binary as a child (`sluice bench query-child --warehouse`), the
// query server's engine over the lake tables, the query run spec.repeat times in the process.
class LakeChildEngine : public Engine {
 public:
  std::string_view name() const override { return "sluice-sql"; }
  bool applies_memory_setting() const override { return true; }
  Status Check(const EngineRunSpec& spec) const override {
    if (::access(spec.sluice_binary.c_str(), X_OK) != 0) {
      return NotFoundError("the lake child: {} is not an executable file", spec.sluice_binary);
    }
    return Status::OK();
  }
  std::string Describe(const EngineRunSpec& spec) const override {
    return fmt::format(
        "`sluice bench query-child --warehouse W --repeat {}` per run: the query server's "
        "engine (lake planner, S3 object cache, partitioned rewrites) in one process as `sluice "
        "sql` runs it, libduckdb with threads={} memory_limit=<setting>, temp_directory in the "
        "run's work dir, over lake.bench.sales and lake.bench.products",
        spec.repeat, spec.threads);
  }
  Result<std::unique_ptr<EngineRun>> Launch(const EngineRunSpec& spec) override {
    std::vector<std::string> args = {spec.sluice_binary,
                                     "bench",
                                     "query-child",
                                     "--query",
                                     spec.query,
                                     "--warehouse",
                                     spec.lake_warehouse,
                                     "--repeat",
                                     std::to_string(spec.repeat),
                                     "--threads",
                                     std::to_string(spec.threads),
                                     "--memory-limit-bytes",
                                     std::to_string(spec.memory_bytes),
                                     "--temp-dir",
                                     spec.work_dir + "/spill"};
    if (!spec.s3_cache_dir.empty()) {
      args.push_back("--s3-cache-dir");
      args.push_back(spec.s3_cache_dir);
    }
    return LaunchOneShotChild(args, {}, spec.work_dir);
  }
};

// `polars`: node + nodejs-polars, the lazy API (bench/query/polars_query.js), threads from
// POLARS_MAX_THREADS; no memory setting exists.
class PolarsEngine : public Engine {
 public:
  std::string_view name() const override { return "polars"; }
  bool applies_memory_setting() const override { return false; }
  Status Check(const EngineRunSpec& spec) const override {
    Result<std::string> node = FindProgram(spec.node);
    if (!node.ok()) return NotFoundError("polars engine: node: {}", node.status().message());
    if (!fs::exists(spec.node_modules + "/nodejs-polars/package.json")) {
      return NotFoundError(
          "polars engine: nodejs-polars is not in {} (npm ci in the source tree, or "
          "--node-modules DIR)",
          spec.node_modules);
    }
    return Status::OK();
  }
  std::string Describe(const EngineRunSpec& spec) const override {
    std::string version;
    std::ifstream in(spec.node_modules + "/nodejs-polars/package.json");
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_discarded() && j.contains("version") && j["version"].is_string())
      version = j["version"];
    return fmt::format(
        "`node polars_query.js` per run: nodejs-polars {}, lazy API, collect(); "
        "POLARS_MAX_THREADS={}; no memory setting (the cap only)",
        version.empty() ? "(version unknown)" : version, spec.threads);
  }
  Result<std::unique_ptr<EngineRun>> Launch(const EngineRunSpec& spec) override {
    ASSIGN_OR_RETURN(std::string node, FindProgram(spec.node));
    nlohmann::json arg = {{"query", spec.query},
                          {"sales", spec.data->sales_glob},
                          {"products", spec.data->products_glob}};
    std::vector<std::string> args = {node, spec.polars_script, arg.dump()};
    std::vector<std::string> env = {fmt::format("POLARS_MAX_THREADS={}", spec.threads),
                                    fmt::format("NODE_PATH={}", spec.node_modules)};
    return LaunchOneShotChild(args, env, spec.work_dir);
  }
};

// A `sluice serve` started for one run. Execute connects with libpq (not timed: the
// session's start, pg_catalog included, is the server's and is not the query's), sends the
// query with the simple query protocol (PQsendQuery, so the server plans it whole and its
// partitioned rewrites apply) in single-row mode, and times from the send to the last row.
// Stop sends SIGTERM and reaps (SIGKILL to the tree after 10 s).
class SluiceServerRun : public EngineRun {
 public:
  SluiceServerRun(pid_t pid, std::string sql, std::string err_path)
      : pid_(pid), sql_(std::move(sql)), err_path_(std::move(err_path)) {}
  ~SluiceServerRun() override { Stop(); }

  // The Postgres port, once the server printed it.
  void set_port(int port) { port_ = port; }
  // Whether the server has ended (and is reaped).
  bool Ended() { return Reap(/*block=*/false); }
  // An error naming the server's state (still running, or how it ended) and its stderr.
  Status Failed(const std::string& what) {
    std::string how = Reap(/*block=*/false) ? DescribeWaitStatus(status_) : "is still running";
    return AbortedError("{}\nthe server {}; its stderr ends:\n{}", what, how, Tail(err_path_, 6));
  }

  pid_t root_pid() const override { return pid_; }
  int pg_port() const override { return port_; }

  Result<EngineAnswer> Execute() override {
    std::string conninfo = fmt::format(
        "host=127.0.0.1 port={} user=sluice dbname=sluice connect_timeout=60 sslmode=disable",
        port_);
    std::unique_ptr<PGconn, decltype(&PQfinish)> conn(PQconnectdb(conninfo.c_str()), &PQfinish);
    if (conn == nullptr || PQstatus(conn.get()) != CONNECTION_OK) {
      return Failed(fmt::format("connecting to port {}: {}", port_,
                                conn ? PQerrorMessage(conn.get()) : "out of memory"));
    }
    auto start = std::chrono::steady_clock::now();
    if (PQsendQuery(conn.get(), sql_.c_str()) != 1) {
      return Failed(fmt::format("sending the query: {}", PQerrorMessage(conn.get())));
    }
    PQsetSingleRowMode(conn.get());
    EngineAnswer a;
    int rows = 0;
    std::string error;
    while (PGresult* raw = PQgetResult(conn.get())) {
      std::unique_ptr<PGresult, decltype(&PQclear)> res(raw, &PQclear);
      ExecStatusType st = PQresultStatus(res.get());
      if (st == PGRES_SINGLE_TUPLE) {
        a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (++rows > 1) continue;
        for (int c = 0; c < PQnfields(res.get()); ++c) {
          a.columns.emplace_back(PQfname(res.get(), c));
          a.values.emplace_back(PQgetisnull(res.get(), 0, c) ? "NULL"
                                                             : PQgetvalue(res.get(), 0, c));
        }
      } else if (st != PGRES_TUPLES_OK && error.empty()) {
        error = PQresultErrorMessage(res.get());
        if (error.empty()) error = PQerrorMessage(conn.get());
      }
    }
    if (!error.empty()) return Failed(fmt::format("the query failed: {}", error));
    if (rows != 1) return InternalError("the query answered {} rows, not one", rows);
    a.planning_seconds = PlanningSeconds();
    return a;
  }

  int64_t Stop() override {
    if (reaped_) return max_rss_bytes_;
    ::kill(pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!Reap(/*block=*/false) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!reaped_) {
      KillTree(pid_);
      Reap(/*block=*/true);
    }
    return max_rss_bytes_;
  }

 private:
  // The last "statement planned in X ms" of the server's log (it runs at debug level):
  // the timed query is the session's only statement.
  double PlanningSeconds() const {
    static const std::regex kPlanned(R"(statement planned in ([0-9.]+) ms)");
    std::string text = ReadFile(err_path_);
    double ms = -1;
    for (std::sregex_iterator it(text.begin(), text.end(), kPlanned), end; it != end; ++it)
      ms = std::atof((*it)[1].str().c_str());
    return ms < 0 ? -1 : ms / 1000;
  }

  // Whether the server has been reaped (now or before).
  bool Reap(bool block) {
    while (!reaped_) {
      int status = 0;
      rusage usage{};
      pid_t r = ::wait4(pid_, &status, block ? 0 : WNOHANG, &usage);
      if (r == pid_) {
        reaped_ = true;
        status_ = status;
        max_rss_bytes_ = static_cast<int64_t>(usage.ru_maxrss) * 1024;
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else if (r < 0) {
        reaped_ = true;  // not our child any more
      } else {
        break;  // still running
      }
    }
    return reaped_;
  }

  pid_t pid_;
  int port_ = 0;
  std::string sql_, err_path_;
  bool reaped_ = false;
  int status_ = -1;
  int64_t max_rss_bytes_ = 0;
};

// Whether `path` is `dir` or inside it (both absolute and normal).
bool Inside(const fs::path& path, const fs::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

// `sluice-iceberg` and `sluice-parquet`: `sluice serve` per run with the query server's
// memory_limit, threads and spill directory from the run, no statement timeout (the
// bench's --timeout kills the tree instead); the query names the Iceberg tables
// (`lake.bench.sales`) or the Parquet files (`read_parquet('<glob>')`).
class SluiceEngine : public Engine {
 public:
  explicit SluiceEngine(bool iceberg) : iceberg_(iceberg) {}
  std::string_view name() const override { return iceberg_ ? "sluice-iceberg" : "sluice-parquet"; }
  bool applies_memory_setting() const override { return true; }
  Status Check(const EngineRunSpec& spec) const override {
    if (::access(spec.sluice_binary.c_str(), X_OK) != 0) {
      return NotFoundError("{} engine: {} is not an executable file", name(), spec.sluice_binary);
    }
    return Status::OK();
  }
  std::string Describe(const EngineRunSpec& spec) const override {
    return fmt::format(
        "`sluice serve` per run: query.memory_limit=<setting> query.threads={}, temp_directory "
        "in the run's work dir; one libpq session, simple query protocol, over {}",
        spec.threads,
        iceberg_
            ? fmt::format("lake.{} and lake.{}", spec.data->sales_table, spec.data->products_table)
            : std::string("read_parquet(<the table's data files>)"));
  }
  Result<std::unique_ptr<EngineRun>> Launch(const EngineRunSpec& spec) override {
    const QueryDataset& d = *spec.data;
    std::string sql = iceberg_ ? BindTables(spec.sql_template, "lake." + d.sales_table,
                                            "lake." + d.products_table)
                               : BindTables(spec.sql_template, ReadParquet(d.sales_glob),
                                            ReadParquet(d.products_glob));
    // The server reads only inside the warehouse and query.allowed_directories.
    fs::path warehouse = fs::absolute(d.warehouse).lexically_normal();
    std::vector<std::string> allowed;
    for (const std::string& glob : {d.sales_glob, d.products_glob}) {
      fs::path dir = fs::absolute(glob).lexically_normal().parent_path();
      if (!Inside(dir, warehouse)) allowed.push_back(dir.string());
    }
    nlohmann::json allowed_json = allowed;
    std::string config = fmt::format(
        "query:\n"
        "  memory_limit: {}\n"
        "  threads: {}\n"
        "  temp_directory: {}\n"
        "  timeout_seconds: 0\n"
        "  allowed_directories: {}\n",
        spec.memory_bytes, spec.threads, nlohmann::json(spec.work_dir + "/spill").dump(),
        allowed_json.dump());
    std::string config_path = spec.work_dir + "/sluice.yaml";
    {
      std::ofstream out(config_path);
      out << config;
      if (!out) return ErrnoError("write", config_path, errno);
    }
    // At debug level the server logs each statement's planning time (read by Execute).
    std::vector<std::string> args = {spec.sluice_binary,
                                     "--log-level",
                                     "debug",
                                     "serve",
                                     "--kafka-addr",
                                     "127.0.0.1:0",
                                     "--http-addr",
                                     "127.0.0.1:0",
                                     "--pg-addr",
                                     "127.0.0.1:0",
                                     "--schema-registry-addr",
                                     "off",
                                     "--data-dir",
                                     spec.work_dir + "/data",
                                     "--warehouse",
                                     d.warehouse,
                                     "--config",
                                     config_path};
    std::string out_path = spec.work_dir + "/stdout", err_path = spec.work_dir + "/stderr";
    ASSIGN_OR_RETURN(pid_t pid, SpawnWithEnv(args, {}, out_path, err_path));
    auto run = std::make_unique<SluiceServerRun>(pid, sql, err_path);
    // Wait for "sluice: Postgres wire protocol on HOST:PORT" (a failed start: the run's
    // destructor kills and reaps the tree).
    static const std::regex kListening(R"(Postgres wire protocol on \S+:(\d+))");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (true) {
      std::smatch m;
      std::string text = ReadFile(out_path);
      if (std::regex_search(text, m, kListening)) {
        run->set_port(std::stoi(m[1].str()));
        return std::unique_ptr<EngineRun>(std::move(run));
      }
      if (run->Ended()) return run->Failed("`sluice serve` did not start");
      if (std::chrono::steady_clock::now() > deadline) {
        return run->Failed("`sluice serve` printed no Postgres port within 120 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

 private:
  static std::string ReadParquet(const std::string& glob) {
    std::string quoted;
    for (char c : glob) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return "read_parquet('" + quoted + "')";
  }

  bool iceberg_;
};

}  // namespace

std::string BindTables(const std::string& sql_template, std::string_view sales,
                       std::string_view products) {
  std::string out;
  for (size_t i = 0; i < sql_template.size();) {
    if (sql_template.compare(i, 7, "{sales}") == 0) {
      out += sales;
      i += 7;
    } else if (sql_template.compare(i, 10, "{products}") == 0) {
      out += products;
      i += 10;
    } else {
      out += sql_template[i++];
    }
  }
  return out;
}

std::vector<std::string> KnownEngines() {
  return {"duckdb", "polars", "sluice-iceberg", "sluice-parquet"};
}

Result<std::unique_ptr<Engine>> MakeEngine(std::string_view name) {
  if (name == "duckdb") return std::unique_ptr<Engine>(std::make_unique<DuckDbEngine>());
  if (name == "polars") return std::unique_ptr<Engine>(std::make_unique<PolarsEngine>());
  if (name == "sluice-iceberg")
    return std::unique_ptr<Engine>(std::make_unique<SluiceEngine>(true));
  if (name == "sluice-parquet")
    return std::unique_ptr<Engine>(std::make_unique<SluiceEngine>(false));
  std::string known;
  for (const std::string& e : KnownEngines()) known += (known.empty() ? "" : ", ") + e;
  return NotFoundError("unknown engine {:?} (known: {})", name, known);
}

std::unique_ptr<Engine> MakeLakeChildEngine() { return std::make_unique<LakeChildEngine>(); }

Result<std::unique_ptr<EngineRun>> LaunchOneShotChild(const std::vector<std::string>& args,
                                                      const std::vector<std::string>& env,
                                                      const std::string& work_dir) {
  std::string out = work_dir + "/stdout", err = work_dir + "/stderr";
  ASSIGN_OR_RETURN(pid_t pid, SpawnWithEnv(args, env, out, err));
  return std::unique_ptr<EngineRun>(std::make_unique<OneShotChildRun>(pid, out, err));
}

// ---- the process tree ----

namespace {

// The children of `pid` from /proc/<pid>/task/*/children; nullopt when the kernel has no
// such file (CONFIG_PROC_CHILDREN off).
std::optional<std::vector<pid_t>> ChildrenFromTasks(pid_t pid) {
  std::string dir = fmt::format("/proc/{}/task", pid);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return std::vector<pid_t>();
  std::vector<pid_t> out;
  bool any_file = false;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(dir + "/" + e->d_name + "/children");
    if (!in.is_open()) continue;
    any_file = true;
    for (pid_t c; in >> c;) out.push_back(c);
  }
  ::closedir(d);
  if (!any_file && fs::exists(dir)) return std::nullopt;
  return out;
}

// Every process's parent, from /proc/<pid>/stat.
std::vector<std::pair<pid_t, pid_t>> AllParents() {
  std::vector<std::pair<pid_t, pid_t>> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 4 > stat.size()) continue;
    std::istringstream f(stat.substr(paren + 2));
    std::string state;
    long ppid = 0;
    f >> state >> ppid;
    out.emplace_back(static_cast<pid_t>(pid), static_cast<pid_t>(ppid));
  }
  ::closedir(d);
  return out;
}

}  // namespace

std::vector<pid_t> ProcessTree(pid_t root) {
  if (root <= 0 || ::kill(root, 0) != 0) return {};
  std::vector<pid_t> tree = {root};
  std::optional<std::vector<std::pair<pid_t, pid_t>>> parents;  // the scan, when needed
  std::set<pid_t> seen = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    std::optional<std::vector<pid_t>> children = ChildrenFromTasks(tree[i]);
    if (!children) {
      if (!parents) parents = AllParents();
      children.emplace();
      for (const auto& [pid, ppid] : *parents) {
        if (ppid == tree[i]) children->push_back(pid);
      }
    }
    for (pid_t c : *children) {
      if (seen.insert(c).second) tree.push_back(c);
    }
  }
  return tree;
}

int64_t TreeRssBytes(const std::vector<pid_t>& tree) {
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  int64_t total = 0;
  for (pid_t pid : tree) {
    std::ifstream in(fmt::format("/proc/{}/statm", pid));
    int64_t size = 0, resident = 0;
    if (in >> size >> resident) total += resident * page;
  }
  return total;
}

void KillTree(pid_t root) {
  std::vector<pid_t> tree = ProcessTree(root);
  for (pid_t pid : tree) ::kill(pid, SIGKILL);
}

struct TreeWatchdog::State {
  pid_t root;
  int64_t cap_bytes;
  double timeout_s;
  int interval_ms;
  std::mutex mu;
  std::condition_variable cv;
  bool finish = false;  // guarded by mu
  std::thread thread;
};

TreeWatchdog::TreeWatchdog(pid_t root, int64_t cap_bytes, double timeout_s, int interval_ms)
    : state_(std::make_unique<State>()) {
  state_->root = root;
  state_->cap_bytes = cap_bytes;
  state_->timeout_s = timeout_s;
  state_->interval_ms = interval_ms;
  state_->thread = std::thread([this] {
    State& s = *state_;
    auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(s.mu);
    while (!s.finish) {
      lock.unlock();
      std::vector<pid_t> tree = ProcessTree(s.root);
      int64_t rss = TreeRssBytes(tree);
      samples_.fetch_add(1);
      if (rss > peak_.load()) peak_.store(rss);
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!tree.empty() && rss > s.cap_bytes) {
        over_cap_.store(true);
        for (pid_t pid : tree) ::kill(pid, SIGKILL);
        lock.lock();
        break;
      }
      if (!tree.empty() && s.timeout_s > 0 && elapsed > s.timeout_s) {
        timed_out_.store(true);
        for (pid_t pid : tree) ::kill(pid, SIGKILL);
        lock.lock();
        break;
      }
      lock.lock();
      s.cv.wait_for(lock, std::chrono::milliseconds(s.interval_ms), [&] { return s.finish; });
    }
  });
}

TreeWatchdog::~TreeWatchdog() { Finish(); }

void TreeWatchdog::Finish() {
  if (!state_->thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->finish = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
}

}  // namespace sluice::bench
