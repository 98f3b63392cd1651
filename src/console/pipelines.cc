#include "console/pipelines.h"

#include <charconv>
#include <mutex>

#include "base/metrics.h"
#include "kafka/client/consumer.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/runner.h"

namespace sluice::console {
namespace {

// What errors start with ("pipeline.yaml:12: source.kafka: ..."): the line follows it.
constexpr std::string_view kOrigin = "pipeline.yaml";

PipelineProblem ProblemOf(std::string_view line) {
  PipelineProblem p;
  if (line.starts_with(kOrigin) && line.size() > kOrigin.size() + 1 &&
      line[kOrigin.size()] == ':') {
    std::string_view rest = line.substr(kOrigin.size() + 1);
    int n = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
    if (ec == std::errc() && end < rest.data() + rest.size() && *end == ':') {
      p.line = n;
      rest.remove_prefix(static_cast<size_t>(end - rest.data()) + 1);
      // A YAML syntax error names the column too ("12:7: not valid YAML").
      int column = 0;
      auto [cend, cec] = std::from_chars(rest.data(), rest.data() + rest.size(), column);
      if (cec == std::errc() && cend < rest.data() + rest.size() && *cend == ':') {
        rest.remove_prefix(static_cast<size_t>(cend - rest.data()) + 1);
      }
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    }
    p.message = std::string(rest);
  } else {
    p.message = std::string(line);
  }
  return p;
}

}  // namespace

bool ValidPipelineName(std::string_view name) {
  if (name.empty() || name.size() > 100 || name.front() == '.') return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

PipelineCheck CheckPipeline(std::string_view yaml) {
  PipelineCheck out;
  Result<pipeline::PipelineConfig> config =
      pipeline::ParsePipeline(yaml, kOrigin, pipeline::ProcessEnv());
  if (!config.ok()) {
    std::string_view m = config.status().message();
    while (!m.empty()) {
      const size_t nl = m.find('\n');
      std::string_view line = m.substr(0, nl);
      if (!line.empty()) out.problems.push_back(ProblemOf(line));
      if (nl == std::string_view::npos) break;
      m.remove_prefix(nl + 1);
    }
    return out;
  }
  out.valid = true;
  out.name = config->name;
  out.topics = config->source.topics;
  for (const std::string& w : config->warnings) out.warnings.push_back(w);
  out.description = pipeline::DescribePipeline(*config);
  return out;
}

Result<PipelinePreview> PreviewPipeline(std::string_view yaml, const std::string& topic,
                                        const std::vector<ReadRecord>& records) {
  ASSIGN_OR_RETURN(pipeline::PipelineConfig config,
                   pipeline::ParsePipeline(yaml, kOrigin, pipeline::ProcessEnv()));
  // One preview at a time in the process, refused rather than queued: a handler that runs
  // long holds only its own request.
  static std::mutex one_at_a_time;
  std::unique_lock<std::mutex> lock(one_at_a_time, std::try_to_lock);
  if (!lock.owns_lock()) {
    return ResourceExhaustedError("another preview is running; try again when it is done");
  }
  // Small and shut in: a quarter GiB, one thread, no files, network or extensions (the
  // file's commands run too), no state file.
  constexpr int64_t kPreviewMemory = int64_t{256} << 20;
  if (config.duckdb.memory_limit_bytes <= 0 || config.duckdb.memory_limit_bytes > kPreviewMemory)
    config.duckdb.memory_limit_bytes = kPreviewMemory;
  config.duckdb.threads = 1;
  config.state.reset();
  MetricsRegistry metrics;  // its own: a preview is no pipeline of the process's
  ASSIGN_OR_RETURN(auto runner, pipeline::PipelineRunner::Create(
                                    std::move(config),
                                    {.metrics = &metrics, .without_sinks = true, .sandbox = true}));
  std::vector<kafka::client::Message> messages;
  messages.reserve(records.size());
  for (const ReadRecord& r : records) {
    kafka::client::Message m;
    m.topic = topic;
    m.partition = r.partition;
    m.offset = r.offset;
    m.timestamp_ms = r.timestamp_ms;
    if (r.key) m.key = *r.key;
    if (r.value) m.value = *r.value;
    messages.push_back(m);
  }
  PipelinePreview out;
  out.messages = messages.size();
  ASSIGN_OR_RETURN(out.rows, runner->Invoke(messages, &out.errors));
  return out;
}

}  // namespace sluice::console
