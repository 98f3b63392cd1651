// The console's pipelines (docs/design/0026-console.md, phase B): what a pipeline file
// says is wrong with it, line by line; a preview of its handler over sampled messages
// (`sluice pipeline invoke` on real records); and the interface through which the API
// lists, writes, restarts and removes the pipelines of `sluice serve --pipelines DIR`
// (app's PipelineSet implements it: the files of that folder are the pipelines, so a file
// and the console never disagree).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "console/kafka_ops.h"
#include "pipeline/dead_letters.h"

namespace sluice::console {

struct PipelineInfo {
  std::string name;
  std::string file;  // its path
  bool running = false;
  std::string error;  // why it stopped, when it stopped on an error
  uint64_t messages_in = 0;
  int64_t memory_limit_bytes = 0;
  bool stopped = false;  // stopped by hand (its file is <file>.stopped)
};

// Implemented over app::PipelineSet. Threads: any (the set serializes its changes).
class PipelineControl {
 public:
  virtual ~PipelineControl() = default;
  virtual std::string dir() const = 0;
  virtual std::vector<PipelineInfo> List() const = 0;
  // Loads `file` (in dir()) and starts it as a new pipeline, or restarts the pipeline of
  // that name from it. A refusal changes nothing running.
  virtual Status Apply(const std::string& file, bool is_new, const std::string& name) = 0;
  virtual Status Restart(const std::string& name) = 0;
  // Stops the pipeline and forgets it (the caller removes its file).
  virtual Status Remove(const std::string& name) = 0;
  // Stops the pipeline and keeps it, stopped (app::PipelineSet::StopOne), or starts it
  // again (StartOne: ResourceExhausted when the budget has no room for it; one that ended
  // on an error is restarted).
  virtual Status Stop(const std::string& name) = 0;
  virtual Status Start(const std::string& name) = 0;
  virtual int64_t memory_budget_bytes() const = 0;
  // The memory limits of the running pipelines, added up.
  virtual int64_t memory_in_use_bytes() const = 0;
  // Its last failed messages, newest first.
  virtual std::vector<pipeline::RecentFailure> RecentFailures(const std::string& name) const = 0;
};

struct PipelineProblem {
  int line = 0;  // 1-based in the text; 0: not tied to a line
  std::string message;
};

struct PipelineCheck {
  bool valid = false;
  std::string name;                       // pipeline.name, when it parsed
  std::vector<std::string> topics;        // the source's topics, when it parsed
  std::vector<PipelineProblem> problems;  // every error, by line
  std::vector<std::string> warnings;
  std::string description;  // `sluice pipeline validate`'s summary, when valid
};

// Every problem of a pipeline file's text at once ({{ env }} templates resolved from the
// process's environment, as a file of the folder would be).
PipelineCheck CheckPipeline(std::string_view yaml);

struct PipelinePreview {
  std::vector<std::string> rows;    // the handler's rows, each a JSON object
  std::vector<std::string> errors;  // "message N: reason" (decode errors)
  size_t messages = 0;              // how many it ran over
};

// The handler of `yaml` over `records` of `topic`, no sink, nothing committed: what the
// pipeline would write for them. InvalidArgument when the file does not check.
Result<PipelinePreview> PreviewPipeline(std::string_view yaml, const std::string& topic,
                                        const std::vector<ReadRecord>& records);

// A pipeline's name as a file name: 1 to 100 of A-Z a-z 0-9 . _ -, not starting with '.'.
bool ValidPipelineName(std::string_view name);

}  // namespace sluice::console
