// `sluice pipeline run|validate|invoke` and the pipelines of `sluice serve --pipelines`:
// wiring of src/pipeline's runner to files, signals and the HTTP port.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "pipeline/runner.h"

namespace sluice::cli {

struct PipelineRunFlags {
  std::string file;
  std::string http_addr;  // "" = no HTTP port
  bool progress = true;   // the progress line, when stderr is a terminal
};

int RunPipelineRun(const PipelineRunFlags& flags);
int RunPipelineValidate(const std::string& file);
int RunPipelineInvoke(const std::string& file, const std::string& fixture);

// The pipelines of `sluice serve --pipelines DIR`: every *.yml / *.yaml file in DIR, each
// run on its own thread. Their DuckDB memory limits must add up to no more than
// `memory_budget_bytes`.
// Lifecycle: Load (reads and checks every file, before the broker starts, so a bad file
// or budget stops `serve` before it listens), Start (opens each pipeline's database and
// sinks and starts its thread), Stop.
class PipelineSet {
 public:
  // Every problem of every file at once, one per line.
  static Result<std::unique_ptr<PipelineSet>> Load(const std::string& dir, int64_t memory_budget_bytes);
  Status Start();
  ~PipelineSet();
  // Stops every pipeline (each finishes and commits its batch in hand) and waits.
  void Stop();
  size_t size() const { return configs_.size() + runners_.size(); }
  // "" when every pipeline runs; otherwise one line per pipeline that stopped on an error.
  std::string Health() const;

 private:
  PipelineSet() = default;
  struct Running;
  std::vector<std::string> files_;                // beside configs_, until Start
  std::vector<pipeline::PipelineConfig> configs_;  // loaded, not started
  std::vector<std::unique_ptr<Running>> runners_;
};

// Half the machine's memory: the default budget of all pipelines' DuckDB databases.
int64_t DefaultPipelineMemoryBudget();

}  // namespace sluice::cli
