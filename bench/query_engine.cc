#include "bench/query_engine.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
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

// The absolute path of `program`: as given when it has a slash, else found on $PATH.
Result<std::string> FindProgram(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) != 0)
      return NotFoundError("{} is not an executable file", program);
    return fs::absolute(program).string();
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFoundError("{} is not on PATH", program);
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

std::vector<std::string> KnownEngines() { return {"duckdb", "polars"}; }

Result<std::unique_ptr<Engine>> MakeEngine(std::string_view name) {
  if (name == "duckdb") return std::unique_ptr<Engine>(std::make_unique<DuckDbEngine>());
  if (name == "polars") return std::unique_ptr<Engine>(std::make_unique<PolarsEngine>());
  if (name == "sluice-iceberg" || name == "sluice-parquet") {
    return UnimplementedError("engine {}: sluice's query server (issue 7) is not there yet", name);
  }
  std::string known;
  for (const std::string& e : KnownEngines()) known += (known.empty() ? "" : ", ") + e;
  return NotFoundError("unknown engine {:?} (known: {})", name, known);
}

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
