// PipelineSet: the pipelines of `sluice serve --pipelines DIR`, every *.yml / *.yaml file
// of the folder, each run by its own PipelineRunner on its own thread. They are managed
// together (Load, Start, Stop) or one by one (Add, Remove, Restart, StopOne, StartOne,
// Reload of the folder), always inside one memory budget: the running pipelines' DuckDB
// memory limits (`pipeline.duckdb.memory_limit`, 256 MiB unless set) must add up to no
// more than it. A change that would pass the budget, a file that does not load or a name
// used twice is refused and changes nothing (docs/design/0014-composition-root.md).
//
// A pipeline stopped by hand keeps its file, renamed to `<file>.stopped` (*.yml.stopped,
// *.yaml.stopped): the folder says which pipelines run, across restarts of the process
// too, and a stopped pipeline holds no share of the budget (docs/design/0026-console.md).
//
// Lifecycle: Load (reads and checks every file, before the broker starts, so a bad file or
// budget stops `serve` before it listens), Start (opens each pipeline's database and sinks,
// then starts its thread), the management calls, Stop (each pipeline finishes and commits
// its batch in hand). Thread-safe: management calls and Health() may come from any thread
// (the HTTP port's); one management call runs at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "broker/in_process_kafka.h"
#include "pipeline/dead_letters.h"

namespace sluice::pipeline {
class PipelineRunner;
struct PipelineConfig;
}  // namespace sluice::pipeline

namespace sluice::schema {
class SchemaSource;
}  // namespace sluice::schema

namespace sluice::app {

struct PipelineStatus {
  std::string name;  // `pipeline.name`, else the file's name without its extension
  std::string file;
  int64_t memory_limit_bytes = 0;
  bool running = false;      // its thread runs (false: loaded and not started, or ended)
  bool stopped = false;      // stopped by hand: its file is <file>.stopped
  std::string error;         // why it stopped, when it stopped on an error
  uint64_t messages_in = 0;  // since it last started
};

// The broker of this process, for the pipelines that read from or write to it
// (docs/design/0020-data-authorization.md).
struct LocalBroker {
  // "HOST:PORT" its listeners answer on ("localhost" and 127.0.0.1 are one).
  std::vector<std::string> addresses;
  // librdkafka properties of a client acting as `principal` ("": the service itself):
  // bootstrap.servers, security.protocol, sasl.*.
  std::function<std::map<std::string, std::string>(std::string_view principal)> client_properties;
  // Checks the SQL of a pipeline with a principal against the SQL grants (null: nothing to
  // check, authorization is off): the error names what is refused.
  std::function<Status(const pipeline::PipelineConfig&)> check;
  // Its Schema Registry, for pipelines of this broker that name no other (null: none).
  std::shared_ptr<schema::SchemaSource> schemas;
  // The broker itself, for sources that read it in-process (source.kafka.in_process;
  // docs/design/0023-native-path.md); null: none. Must outlive the set.
  broker::InProcessKafka* kafka = nullptr;
};

class PipelineSet {
 public:
  // Every problem of every file at once, one per line. `metrics` (null: the process's
  // registry) must outlive the set.
  static Result<std::unique_ptr<PipelineSet>> Load(const std::string& dir,
                                                   int64_t memory_budget_bytes,
                                                   MetricsRegistry* metrics = nullptr);
  ~PipelineSet();
  PipelineSet(const PipelineSet&) = delete;
  PipelineSet& operator=(const PipelineSet&) = delete;

  // Pipelines whose Kafka connection names `local` and sets no credentials of its own log
  // in as their pipeline.principal (the service without one); a principal's SQL is checked
  // when its pipeline starts. Before Start.
  void SetLocalBroker(LocalBroker local) { local_ = std::move(local); }
  // Starts every loaded pipeline; the first that cannot be created is the error (none
  // started then).
  Status Start();
  // Stops every pipeline and waits for them; management calls are refused from then on.
  void Stop();

  // Loads `file` and starts it (once Start has run; before, it only joins the loaded set).
  // A pipeline that cannot start is not added.
  Status Add(const std::string& file);
  // Stops pipeline `name` and forgets it.
  Status Remove(const std::string& name);
  // Stops pipeline `name`, reads its file again and starts it. A file that no longer
  // loads, or that would pass the budget, leaves the running pipeline as it was; a new
  // version that cannot start (its sink cannot connect) gives way to the previous one.
  Status Restart(const std::string& name);
  // Stops pipeline `name` (it finishes and commits its batch in hand) and keeps it in the
  // set, its file renamed to <file>.stopped first (nothing stops when that fails). A
  // stopped pipeline stays so.
  Status StopOne(const std::string& name);
  // Starts stopped pipeline `name` from its file as it now is, renamed back: refused when
  // the file no longer loads or the running pipelines' memory and its own would pass the
  // budget (ResourceExhausted); a pipeline that then cannot start (its sink cannot connect)
  // stays stopped. A running pipeline is left as it is; one that ended on an error is
  // restarted (Restart).
  Status StartOne(const std::string& name);
  // Reads the folder again: files that appeared are added, files that went away (and
  // pipelines added from files outside the folder) are removed, files whose text changed
  // are restarted. A file that does not load, a name used twice or a budget overrun
  // refuses the whole reload, before anything stops; a pipeline that then cannot start is
  // reported (a changed one runs its previous version again).
  struct ReloadResult {
    std::vector<std::string> added, removed, restarted;  // pipeline names
  };
  Result<ReloadResult> Reload();

  // The last kRecentFailures messages (or rows) of pipeline `name` that failed and were
  // dead-lettered or skipped, newest first, their values cut to kFailureValueBytes; kept
  // across its restarts while it is in the set.
  static constexpr size_t kRecentFailures = 50;
  static constexpr size_t kFailureValueBytes = 4096;
  std::vector<pipeline::RecentFailure> RecentFailures(const std::string& name) const;

  std::vector<PipelineStatus> List() const;
  size_t size() const;
  int64_t memory_budget_bytes() const { return budget_; }
  // The memory limits of the running (not stopped) pipelines, added up.
  int64_t memory_in_use() const;
  // "" when every pipeline runs; otherwise one line per pipeline that stopped on an error
  // or reports a problem (PipelineRunner::Health).
  std::string Health() const;
  // "" when every pipeline not stopped by hand runs; otherwise one line per pipeline that
  // has not started or has ended (for /readyz; a pipeline retrying its sink runs).
  std::string Readiness() const;

 private:
  struct Entry;
  struct Loaded;
  PipelineSet(std::string dir, int64_t budget, MetricsRegistry* metrics);

  Result<Loaded> LoadOne(const std::string& file) const;
  static std::unique_ptr<Entry> MakeEntry(Loaded loaded);
  // Swaps `e` in for the pipeline of its name and starts it; see pipeline_set.cc.
  Status Replace(std::unique_ptr<Entry> e, std::optional<Loaded> previous, bool started);
  // The entry's runner from its config (its database and sinks opened).
  Result<std::unique_ptr<pipeline::PipelineRunner>> Create(Entry& e) const;
  // Starts the entry's thread on `runner`.
  void Begin(Entry& e, std::unique_ptr<pipeline::PipelineRunner> runner);
  // Stops the entry's runner, waits for its thread and destroys the runner; the entry
  // stays.
  void Park(Entry& e);
  // The memory limits of the running entries but `except`, added up (under mu_).
  int64_t RunningMemoryLocked(const std::string& except) const;
  Status StartLocked(Entry& e, int64_t others, bool started);
  Status RestartLocked(const std::string& name);  // under manage_mu_
  // Create and Begin; a failure is also the entry's result (Health reports it).
  Status Launch(Entry& e);
  // Stops, waits for and destroys `entries` (taken out of the set).
  static void Halt(std::vector<std::unique_ptr<Entry>>& entries);
  // The pipeline files of the folder, sorted.
  Result<std::vector<std::string>> ListFiles() const;
  Status CheckBudget(int64_t total) const;
  // `config` with its connections to the local broker made as its principal's, and its SQL
  // checked (LocalBroker).
  Status Localize(pipeline::PipelineConfig& config) const;
  LocalBroker local_;

  const std::string dir_;
  const int64_t budget_;
  MetricsRegistry* const metrics_;
  std::mutex manage_mu_;   // one management call at a time (held across starts and stops)
  mutable std::mutex mu_;  // guards entries_, started_, stopping_, each Entry's runner
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // by pipeline name
  bool started_ = false;
  mutable std::mutex failures_mu_;
  // By pipeline name, oldest first.
  mutable std::map<std::string, std::deque<pipeline::RecentFailure>>
      failures_;           // guarded by failures_mu_
  bool stopping_ = false;  // Stop() ran: management calls are refused
};

// Half the machine's memory: the default budget of all pipelines' DuckDB databases.
int64_t DefaultPipelineMemoryBudget();

}  // namespace sluice::app
