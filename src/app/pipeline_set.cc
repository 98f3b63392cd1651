// PipelineSet: the pipelines of a folder, loaded, started, stopped and reloaded inside one
// memory budget.
#include "app/pipeline_set.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "pipeline/in_process_source.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/runner.h"

namespace sluice::app {

namespace fs = std::filesystem;

// A file read and checked, not yet running.
struct PipelineSet::Loaded {
  std::string file;
  std::string text;  // the file's bytes: a reload restarts the pipeline when they change
  pipeline::PipelineConfig config;
};

// One pipeline. `runner` and `thread` are set by Begin under the set's manage_mu_ and mu_;
// `result` and `done` are written by the pipeline's thread.
struct PipelineSet::Entry {
  std::string name;
  std::string file;  // canonical path
  std::string text;
  int64_t memory = 0;
  pipeline::PipelineConfig config;  // as loaded: each start makes its runner from a copy
  std::unique_ptr<pipeline::PipelineRunner> runner;
  std::thread thread;
  mutable std::mutex mu;
  Status result;         // guarded by mu: why Run returned
  bool done = false;     // guarded by mu
  bool stopped = false;  // stopped by hand: `file` ends in kStoppedSuffix
};

namespace {

// What a stopped pipeline's file name ends with.
constexpr std::string_view kStoppedSuffix = ".stopped";

bool IsStoppedFile(std::string_view file) {
  return file.size() > kStoppedSuffix.size() && file.ends_with(kStoppedSuffix);
}

// The name a pipeline's file has while it runs.
std::string RunningFile(const std::string& file) {
  return IsStoppedFile(file) ? file.substr(0, file.size() - kStoppedSuffix.size()) : file;
}

Status RenameFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (fs::exists(to, ec)) {
    return AlreadyExistsError("cannot rename {} to {}: that file exists", from, to);
  }
  fs::rename(from, to, ec);
  if (ec) return IOError("cannot rename {} to {}: {}", from, to, ec.message());
  return Status::OK();
}

}  // namespace

int64_t DefaultPipelineMemoryBudget() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 2 : int64_t{4} << 30;
}

PipelineSet::PipelineSet(std::string dir, int64_t budget, MetricsRegistry* metrics)
    : dir_(std::move(dir)),
      budget_(budget),
      metrics_(metrics != nullptr ? metrics : &MetricsRegistry::Global()) {}

PipelineSet::~PipelineSet() { Stop(); }

Result<std::vector<std::string>> PipelineSet::ListFiles() const {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    return InvalidArgumentError("--pipelines: {} is not a directory", dir_);
  }
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string ext = fs::path(RunningFile(entry.path().string())).extension().string();
    if (entry.is_regular_file() && (ext == ".yml" || ext == ".yaml")) {
      std::error_code canon_ec;
      fs::path canonical = fs::weakly_canonical(entry.path(), canon_ec);
      files.push_back(canon_ec ? entry.path().string() : canonical.string());
    }
  }
  if (ec) return IOError("--pipelines: cannot list {}: {}", dir_, ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

Result<PipelineSet::Loaded> PipelineSet::LoadOne(const std::string& file) const {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  ASSIGN_OR_RETURN(pipeline::PipelineConfig config,
                   pipeline::LoadPipelineFile(file, pipeline::ProcessEnv()));
  if (config.name.empty()) config.name = fs::path(RunningFile(file)).stem().string();
  // One spelling per file, so that a reload recognises a file added by another path.
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(file, ec);
  return Loaded{ec ? file : canonical.string(), text.str(), std::move(config)};
}

Status PipelineSet::CheckBudget(int64_t total) const {
  if (total <= budget_) return Status::OK();
  return InvalidArgumentError(
      "--pipelines: the pipelines' duckdb.memory_limit add up to {} MiB, over the budget of {} "
      "MiB (--pipelines-memory-budget)",
      total >> 20, budget_ >> 20);
}

std::unique_ptr<PipelineSet::Entry> PipelineSet::MakeEntry(Loaded loaded) {
  auto e = std::make_unique<Entry>();
  e->name = loaded.config.name;
  e->file = std::move(loaded.file);
  e->text = std::move(loaded.text);
  e->memory = loaded.config.duckdb.memory_limit_bytes;
  e->config = std::move(loaded.config);
  e->stopped = IsStoppedFile(e->file);
  return e;
}

Result<std::unique_ptr<PipelineSet>> PipelineSet::Load(const std::string& dir,
                                                       int64_t memory_budget_bytes,
                                                       MetricsRegistry* metrics) {
  std::unique_ptr<PipelineSet> set(new PipelineSet(dir, memory_budget_bytes, metrics));
  ASSIGN_OR_RETURN(std::vector<std::string> files, set->ListFiles());
  std::vector<std::string> errors;
  int64_t total = 0;
  for (const std::string& f : files) {
    auto loaded = set->LoadOne(f);
    if (!loaded.ok()) {
      errors.push_back(loaded.status().message());
      continue;
    }
    std::unique_ptr<Entry> e = MakeEntry(std::move(loaded).value());
    if (!e->stopped) total += e->memory;
    auto [it, fresh] = set->entries_.try_emplace(e->name, nullptr);
    if (!fresh) {
      errors.push_back(
          fmt::format("{}: pipeline name '{}' is also used by {}", f, e->name, it->second->file));
      continue;
    }
    it->second = std::move(e);
  }
  if (Status st = set->CheckBudget(total); !st.ok()) errors.push_back(st.message());
  if (!errors.empty()) return InvalidArgumentError("{}", fmt::join(errors, "\n"));
  return set;
}

namespace {

// "localhost:9092" and "127.0.0.1:9092" are one address.
std::string CanonicalAddress(std::string a) {
  if (a.rfind("localhost:", 0) == 0) a = "127.0.0.1" + a.substr(9);
  return a;
}

}  // namespace

Status PipelineSet::Localize(pipeline::PipelineConfig& config) const {
  if (!local_.client_properties) return Status::OK();
  const std::string& principal = config.principal;
  auto local = [&](const pipeline::KafkaConnectionConfig& c) {
    for (const std::string& b : c.brokers) {
      for (const std::string& a : local_.addresses) {
        if (CanonicalAddress(b) == CanonicalAddress(a)) return true;
      }
    }
    return false;
  };
  auto localize = [&](pipeline::KafkaConnectionConfig& c, std::string_view what) -> Status {
    if (c.brokers.empty()) return Status::OK();
    if (c.sasl.has_value()) {
      // Its own credentials: they decide who it is.
      if (!principal.empty() && c.sasl->username != principal) {
        return InvalidArgumentError(
            "pipeline.principal is {} but {}'s kafka.sasl.username is {}: a pipeline acts as one "
            "principal",
            principal, what, c.sasl->username);
      }
      return Status::OK();
    }
    if (!local(c)) {
      if (principal.empty()) return Status::OK();
      return InvalidArgumentError(
          "pipeline.principal {}: {} reaches a broker other than this one, which cannot know "
          "who the pipeline is without kafka.sasl",
          principal, what);
    }
    if (c.security_protocol.has_value()) return Status::OK();  // set by hand: left alone
    std::map<std::string, std::string> p = local_.client_properties(principal);
    c.brokers = {p["bootstrap.servers"]};
    const std::string& protocol = p["security.protocol"];
    if (protocol == "SASL_PLAINTEXT")
      c.security_protocol = pipeline::SecurityProtocol::kSaslPlaintext;
    if (protocol == "SASL_SSL") c.security_protocol = pipeline::SecurityProtocol::kSaslSsl;
    if (protocol == "SSL") c.security_protocol = pipeline::SecurityProtocol::kSsl;
    if (p.count("sasl.username") > 0) {
      c.sasl =
          pipeline::KafkaSaslConfig{p["sasl.mechanism"], p["sasl.username"], p["sasl.password"]};
    }
    for (const char* k :
         {"enable.ssl.certificate.verification", "ssl.endpoint.identification.algorithm"}) {
      if (p.count(k) > 0) c.properties[k] = p[k];
    }
    return Status::OK();
  };
  RETURN_IF_ERROR(localize(config.source, "source.kafka"));
  if (config.sink.type == pipeline::SinkType::kKafka)
    RETURN_IF_ERROR(localize(config.sink.kafka, "sink.kafka"));
  if (config.on_error.dlq && config.on_error.dlq->type == pipeline::SinkType::kKafka) {
    RETURN_IF_ERROR(localize(config.on_error.dlq->kafka, "on_error.dlq.kafka"));
  }
  if (!principal.empty() && local_.check) RETURN_IF_ERROR(local_.check(config));
  return Status::OK();
}

Result<std::unique_ptr<pipeline::PipelineRunner>> PipelineSet::Create(Entry& e) const {
  pipeline::RunnerOptions options;
  options.metrics = metrics_;
  pipeline::PipelineConfig config = e.config;  // a copy: restartable
  // The registry of this process for a source or sink of this broker (before Localize
  // rewrites the broker addresses).
  auto is_local = [&](const pipeline::KafkaConnectionConfig& c) {
    for (const std::string& b : c.brokers) {
      for (const std::string& a : local_.addresses) {
        if (CanonicalAddress(b) == CanonicalAddress(a)) return true;
      }
    }
    return false;
  };
  if (is_local(config.source) ||
      (config.sink.type == pipeline::SinkType::kKafka && is_local(config.sink.kafka))) {
    options.schemas = local_.schemas;
  }
  // The native path (0023): the source reads this broker's log in-process, as the
  // principal its Kafka connection would have logged in as.
  const bool local_source = is_local(config.source);
  // Credentials of its own are checked by the Kafka path's login only.
  const bool own_login = config.source.sasl.has_value();
  const std::string principal = config.principal.empty() ? "" : "User:" + config.principal;
  if (Status st = Localize(config); !st.ok()) return st.WithContext(e.file);
  if (config.source.in_process != pipeline::InProcessMode::kFalse) {
    std::string why;
    if (local_.kafka == nullptr) {
      why = "this server has no broker to read";
    } else if (!local_source) {
      why = "its brokers are not this server's";
    } else if (own_login) {
      why =
          "source.kafka.sasl logs in with credentials of its own, which only the Kafka "
          "path checks (use pipeline.principal)";
    } else if (!local_.kafka->available()) {
      why = "the broker's server is not running";
    }
    if (why.empty()) {
      broker::InProcessKafka* kafka = local_.kafka;
      options.make_source = [kafka, source = config.source, name = config.name,
                             principal](const pipeline::SourceCounters& counters)
          -> Result<std::unique_ptr<pipeline::Source>> {
        ASSIGN_OR_RETURN(
            auto s, pipeline::InProcessSource::Create(source, name, counters,
                                                      {.kafka = kafka, .principal = principal}));
        return std::unique_ptr<pipeline::Source>(std::move(s));
      };
    } else if (config.source.in_process == pipeline::InProcessMode::kTrue) {
      return InvalidArgumentError("{}: source.kafka.in_process is true, but {}", e.file, why);
    }
  }
  options.on_failure = [this, name = e.name](const pipeline::DeadLetter& letter,
                                             bool dead_lettered) {
    const int64_t now = Clock::Real()->NowMillis();
    // Only what is kept is copied: a failed 1 MB message must not hold 1 MB here.
    kafka::client::Message cut;
    cut.topic = letter.topic;
    cut.partition = letter.partition;
    cut.offset = letter.offset;
    cut.timestamp_ms = letter.timestamp_ms;
    if (letter.value) {
      cut.value = std::string_view(letter.value->data(),
                                   std::min(letter.value->size(), kFailureValueBytes));
    }
    pipeline::RecentFailure f{
        now, dead_lettered, letter.value ? letter.value->size() : 0,
        pipeline::DeadLetter(letter.error.substr(0, kFailureValueBytes), letter.phase, cut)};
    std::lock_guard lock(failures_mu_);
    auto& recent = failures_[name];
    recent.push_back(std::move(f));
    if (recent.size() > kRecentFailures) recent.pop_front();
  };
  auto runner = pipeline::PipelineRunner::Create(config, options);
  if (!runner.ok()) return runner.status().WithContext(e.file);
  return runner;
}

void PipelineSet::Begin(Entry& e, std::unique_ptr<pipeline::PipelineRunner> runner) {
  std::lock_guard lock(mu_);  // Health() and List() read runner and thread
  e.runner = std::move(runner);
  Entry* raw = &e;
  e.thread = std::thread([raw] {
    Status st = raw->runner->Run();
    std::lock_guard entry_lock(raw->mu);
    raw->result = st;
    raw->done = true;
  });
}

Status PipelineSet::Launch(Entry& e) {
  auto runner = Create(e);
  if (!runner.ok()) {
    std::lock_guard lock(e.mu);
    e.result = runner.status();
    e.done = true;
    return e.result;
  }
  Begin(e, std::move(runner).value());
  return Status::OK();
}

// Stops every runner first, so they finish their batches side by side, then waits and
// destroys them: a runner's destructor removes the metrics labelled with its pipeline's
// name, which a restarted pipeline of that name registers again.
void PipelineSet::Halt(std::vector<std::unique_ptr<Entry>>& entries) {
  for (auto& e : entries) {
    if (e->runner) e->runner->Stop();
  }
  for (auto& e : entries) {
    if (e->thread.joinable()) e->thread.join();
  }
  entries.clear();
}

Status PipelineSet::Start() {
  std::lock_guard manage(manage_mu_);
  std::vector<Entry*> loaded;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return FailedPreconditionError("the pipelines are stopping");
    for (auto& [name, e] : entries_) {
      if (!e->runner && !e->stopped) loaded.push_back(e.get());
    }
  }
  // Every runner is created before any thread starts: a pipeline that cannot open its
  // database or sinks stops `serve` with nothing half-running.
  std::vector<std::unique_ptr<pipeline::PipelineRunner>> runners;
  for (Entry* e : loaded) {
    ASSIGN_OR_RETURN(auto runner, Create(*e));
    runners.push_back(std::move(runner));
  }
  {
    std::lock_guard lock(mu_);
    started_ = true;
  }
  for (size_t i = 0; i < loaded.size(); ++i) Begin(*loaded[i], std::move(runners[i]));
  return Status::OK();
}

void PipelineSet::Stop() {
  std::lock_guard manage(manage_mu_);
  std::vector<Entry*> all;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;  // no management call starts anything from now on
    for (auto& [name, e] : entries_) all.push_back(e.get());
  }
  for (Entry* e : all) {
    if (e->runner) e->runner->Stop();
  }
  for (Entry* e : all) {
    if (e->thread.joinable()) e->thread.join();
  }
}

Status PipelineSet::Add(const std::string& file) {
  std::lock_guard manage(manage_mu_);
  ASSIGN_OR_RETURN(Loaded loaded, LoadOne(file));
  std::unique_ptr<Entry> e = MakeEntry(std::move(loaded));
  Entry* raw = e.get();
  const std::string name = e->name;
  bool started;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return FailedPreconditionError("the pipelines are stopping");
    if (auto it = entries_.find(name); it != entries_.end()) {
      return AlreadyExistsError("{}: pipeline name '{}' is also used by {}", file, name,
                                it->second->file);
    }
    RETURN_IF_ERROR(CheckBudget(RunningMemoryLocked(name) + (e->stopped ? 0 : e->memory)));
    entries_.emplace(name, std::move(e));
    started = started_;
  }
  if (!started || raw->stopped) return Status::OK();
  Status st = Launch(*raw);
  if (!st.ok()) {
    // Not added after all: its name and memory are free for the next try.
    std::vector<std::unique_ptr<Entry>> gone;
    {
      std::lock_guard lock(mu_);
      gone.push_back(std::move(entries_[name]));
      entries_.erase(name);
    }
    Halt(gone);
  }
  return st;
}

Status PipelineSet::Remove(const std::string& name) {
  std::lock_guard manage(manage_mu_);
  std::vector<std::unique_ptr<Entry>> gone;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return NotFoundError("no pipeline named '{}'", name);
    gone.push_back(std::move(it->second));
    entries_.erase(it);
  }
  Halt(gone);
  std::lock_guard lock(failures_mu_);
  failures_.erase(name);
  return Status::OK();
}

// Puts `e` in the set under its name in place of what was there, stops and destroys that,
// then starts `e` (when the set runs). When `e` cannot start and `previous` (the replaced
// pipeline's file as it was) is given, that version goes back and starts again.
Status PipelineSet::Replace(std::unique_ptr<Entry> e, std::optional<Loaded> previous,
                            bool started) {
  const std::string name = e->name;
  Entry* raw = e.get();
  std::vector<std::unique_ptr<Entry>> gone;
  {
    std::lock_guard lock(mu_);
    auto& slot = entries_[name];
    if (slot) gone.push_back(std::move(slot));
    slot = std::move(e);
  }
  // The old runner finishes and commits its batch before the new one opens the same
  // group and state.
  Halt(gone);
  if (!started || raw->stopped) return Status::OK();
  Status st = Launch(*raw);
  if (st.ok() || !previous) return st;
  std::unique_ptr<Entry> back = MakeEntry(std::move(*previous));
  Entry* back_raw = back.get();
  {
    std::lock_guard lock(mu_);
    gone.push_back(std::move(entries_[name]));
    entries_[name] = std::move(back);
  }
  Halt(gone);
  Status again = Launch(*back_raw);
  return st.WithContext(again.ok() ? "the previous version runs again"
                                   : "the previous version did not start either");
}

Status PipelineSet::Restart(const std::string& name) {
  std::lock_guard manage(manage_mu_);
  return RestartLocked(name);
}

Status PipelineSet::RestartLocked(const std::string& name) {
  Entry* old;
  bool started;
  int64_t others = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return FailedPreconditionError("the pipelines are stopping");
    auto it = entries_.find(name);
    if (it == entries_.end()) return NotFoundError("no pipeline named '{}'", name);
    old = it->second.get();
    started = started_;
    others = RunningMemoryLocked(name);
  }
  if (old->stopped) return StartLocked(*old, others, started);
  ASSIGN_OR_RETURN(Loaded loaded, LoadOne(old->file));
  if (loaded.config.name != name) {
    return InvalidArgumentError("{}: the file now names pipeline '{}', not '{}' (use Reload)",
                                old->file, loaded.config.name, name);
  }
  if (Status st = CheckBudget(others + loaded.config.duckdb.memory_limit_bytes); !st.ok()) {
    return ResourceExhaustedError("{}", st.message());
  }
  Loaded previous{old->file, old->text, old->config};
  return Replace(MakeEntry(std::move(loaded)), std::move(previous), started);
}

void PipelineSet::Park(Entry& e) {
  if (e.runner) e.runner->Stop();
  if (e.thread.joinable()) e.thread.join();
  std::unique_ptr<pipeline::PipelineRunner> runner;
  {
    std::lock_guard lock(mu_);  // List() and Health() read the runner
    runner = std::move(e.runner);
    std::lock_guard entry_lock(e.mu);
    e.result = Status::OK();
    e.done = false;
  }
  // Destroyed outside the locks: it removes the metrics labelled with its name.
  runner.reset();
}

int64_t PipelineSet::RunningMemoryLocked(const std::string& except) const {
  int64_t total = 0;
  for (const auto& [name, e] : entries_) {
    if (name != except && !e->stopped) total += e->memory;
  }
  return total;
}

Status PipelineSet::StopOne(const std::string& name) {
  std::lock_guard manage(manage_mu_);
  Entry* e;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return FailedPreconditionError("the pipelines are stopping");
    auto it = entries_.find(name);
    if (it == entries_.end()) return NotFoundError("no pipeline named '{}'", name);
    e = it->second.get();
    if (e->stopped) return Status::OK();
  }
  // The file first: a pipeline whose file cannot say so would start again next time.
  const std::string stopped = e->file + std::string(kStoppedSuffix);
  RETURN_IF_ERROR(RenameFile(e->file, stopped));
  Park(*e);
  std::lock_guard lock(mu_);
  e->file = stopped;
  e->stopped = true;
  return Status::OK();
}

Status PipelineSet::StartOne(const std::string& name) {
  std::lock_guard manage(manage_mu_);
  Entry* e;
  bool started;
  int64_t others;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return FailedPreconditionError("the pipelines are stopping");
    auto it = entries_.find(name);
    if (it == entries_.end()) return NotFoundError("no pipeline named '{}'", name);
    e = it->second.get();
    started = started_;
    others = RunningMemoryLocked(name);
  }
  if (!e->stopped) {
    // Running: left as it is; ended on an error: started again from its file.
    bool failed;
    {
      std::lock_guard lock(mu_);
      std::lock_guard entry_lock(e->mu);
      failed = started && (e->runner == nullptr || e->done);
    }
    return failed ? RestartLocked(name) : Status::OK();
  }
  return StartLocked(*e, others, started);
}

// Starts stopped entry `e` from its file as it now is (under manage_mu_): `others` is the
// memory the other running pipelines hold.
Status PipelineSet::StartLocked(Entry& e, int64_t others, bool started) {
  ASSIGN_OR_RETURN(Loaded loaded, LoadOne(e.file));
  if (loaded.config.name != e.name) {
    return InvalidArgumentError("{}: the file now names pipeline '{}', not '{}' (use Reload)",
                                e.file, loaded.config.name, e.name);
  }
  if (Status st = CheckBudget(others + loaded.config.duckdb.memory_limit_bytes); !st.ok()) {
    return ResourceExhaustedError("{}", st.message());
  }
  const std::string stopped_file = e.file;
  const std::string running_file = RunningFile(e.file);
  {
    std::lock_guard lock(mu_);
    e.text = std::move(loaded.text);
    e.memory = loaded.config.duckdb.memory_limit_bytes;
    e.config = std::move(loaded.config);
  }
  // Its database and sinks opened before the file is renamed: one that cannot start keeps
  // its stopped name, also when the process dies meanwhile (a running name would make the
  // next `sluice serve` refuse to start on it).
  std::unique_ptr<pipeline::PipelineRunner> runner;
  if (started) {
    auto created = Create(e);
    if (!created.ok()) return created.status().WithContext("it stays stopped");
    runner = std::move(created).value();
  }
  RETURN_IF_ERROR(RenameFile(stopped_file, running_file));
  {
    std::lock_guard lock(mu_);
    e.file = running_file;
    e.stopped = false;
  }
  if (runner) Begin(e, std::move(runner));
  return Status::OK();
}

Result<PipelineSet::ReloadResult> PipelineSet::Reload() {
  std::lock_guard manage(manage_mu_);
  ASSIGN_OR_RETURN(std::vector<std::string> files, ListFiles());
  std::map<std::string, const Entry*> by_file;
  std::map<std::string, int64_t> memory;  // by name, after the reload
  bool started;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return FailedPreconditionError("the pipelines are stopping");
    started = started_;
    for (const auto& [name, e] : entries_) {
      by_file[e->file] = e.get();
      memory[name] = e->stopped ? 0 : e->memory;
    }
  }
  ReloadResult result;
  std::vector<Loaded> incoming;  // new and changed files
  std::vector<std::string> errors;
  std::set<std::string> present(files.begin(), files.end());
  for (const auto& [file, e] : by_file) {
    if (!present.count(file)) {
      result.removed.push_back(e->name);
      memory.erase(e->name);
    }
  }
  for (const std::string& f : files) {
    auto known = by_file.find(f);
    if (known != by_file.end()) {
      std::ifstream in(f, std::ios::binary);
      std::stringstream text;
      text << in.rdbuf();
      if (text.str() == known->second->text) continue;
    }
    auto loaded = LoadOne(f);
    if (!loaded.ok()) {
      errors.push_back(loaded.status().message());
      continue;
    }
    const std::string& name = loaded->config.name;
    if (known != by_file.end() && known->second->name != name) {
      // Renamed inside the file: the old pipeline goes, the new one comes.
      result.removed.push_back(known->second->name);
      memory.erase(known->second->name);
      known = by_file.end();
    }
    if (known == by_file.end()) {
      if (memory.count(name)) {
        errors.push_back(fmt::format("{}: pipeline name '{}' is already used", f, name));
        continue;
      }
      result.added.push_back(name);
    } else {
      result.restarted.push_back(name);
    }
    memory[name] = IsStoppedFile(loaded->file) ? 0 : loaded->config.duckdb.memory_limit_bytes;
    incoming.push_back(std::move(loaded).value());
  }
  int64_t total = 0;
  for (const auto& [name, bytes] : memory) total += bytes;
  if (Status st = CheckBudget(total); !st.ok()) errors.push_back(st.message());
  if (!errors.empty()) return InvalidArgumentError("{}", fmt::join(errors, "\n"));

  std::vector<std::unique_ptr<Entry>> gone;
  {
    std::lock_guard lock(mu_);
    for (const std::string& name : result.removed) {
      gone.push_back(std::move(entries_[name]));
      entries_.erase(name);
    }
  }
  Halt(gone);
  {
    std::lock_guard lock(failures_mu_);
    for (const std::string& name : result.removed) failures_.erase(name);
  }
  // Each changed pipeline falls back to its previous version when the new one cannot
  // start (a sink that cannot connect, a state file in use); a new one that cannot start
  // is reported and stays in the set with its error (Health names it).
  std::vector<std::string> failed;
  for (Loaded& l : incoming) {
    std::optional<Loaded> previous;
    {
      std::lock_guard lock(mu_);
      auto it = entries_.find(l.config.name);
      if (it != entries_.end())
        previous = Loaded{it->second->file, it->second->text, it->second->config};
    }
    if (Status st = Replace(MakeEntry(std::move(l)), std::move(previous), started); !st.ok()) {
      failed.push_back(st.message());
    }
  }
  if (!failed.empty()) {
    return InternalError("reloaded (added {}, removed {}, restarted {}), but: {}",
                         fmt::join(result.added, ", "), fmt::join(result.removed, ", "),
                         fmt::join(result.restarted, ", "), fmt::join(failed, "\n"));
  }
  return result;
}

std::vector<pipeline::RecentFailure> PipelineSet::RecentFailures(const std::string& name) const {
  std::lock_guard lock(failures_mu_);
  auto it = failures_.find(name);
  if (it == failures_.end()) return {};
  return {it->second.rbegin(), it->second.rend()};
}

std::vector<PipelineStatus> PipelineSet::List() const {
  std::lock_guard lock(mu_);
  std::vector<PipelineStatus> out;
  for (const auto& [name, e] : entries_) {
    PipelineStatus s{name, e->file, e->memory};
    std::lock_guard entry_lock(e->mu);
    s.running = e->runner != nullptr && !e->done;  // runner: under mu_, set before the thread
    s.stopped = e->stopped;
    if (e->done && !e->result.ok()) s.error = e->result.message();
    if (e->runner) s.messages_in = e->runner->stats().messages_in.load();
    out.push_back(std::move(s));
  }
  return out;
}

size_t PipelineSet::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

int64_t PipelineSet::memory_in_use() const {
  std::lock_guard lock(mu_);
  return RunningMemoryLocked("");
}

std::string PipelineSet::Health() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, e] : entries_) {
    std::string problem;
    {
      std::lock_guard entry_lock(e->mu);
      if (e->done && !e->result.ok()) {
        problem = fmt::format("pipeline {} ({}) stopped: {}", name, e->file, e->result.message());
      }
    }
    if (problem.empty() && e->runner) problem = e->runner->Health();
    if (!problem.empty()) out += (out.empty() ? "" : "\n") + problem;
  }
  return out;
}

std::string PipelineSet::Readiness() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, e] : entries_) {
    if (e->stopped) continue;
    std::string problem;
    {
      std::lock_guard entry_lock(e->mu);
      if (e->done) {
        problem = e->result.ok() ? fmt::format("pipeline {} ({}) is not running", name, e->file)
                                 : fmt::format("pipeline {} ({}) stopped: {}", name, e->file,
                                               e->result.message());
      }
    }
    if (problem.empty() && !e->runner) {
      problem = fmt::format("pipeline {} ({}) has not started", name, e->file);
    }
    if (!problem.empty()) out += (out.empty() ? "" : "\n") + problem;
  }
  return out;
}

}  // namespace sluice::app
