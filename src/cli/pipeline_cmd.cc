#include "cli/pipeline_cmd.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "base/http_server.h"
#include "base/logging.h"
#include "base/metrics.h"
#include "pipeline/pipeline_config.h"
#include "pipeline/runner.h"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;

Result<pipeline::PipelineConfig> LoadFile(const std::string& file) {
  return pipeline::LoadPipelineFile(file, pipeline::ProcessEnv());
}

// Blocks SIGTERM and SIGINT in this thread (and the threads it starts) and returns a
// thread that calls `on_signal` when one arrives (or when `Release` is called).
class SignalWaiter {
 public:
  explicit SignalWaiter(std::function<void()> on_signal) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGUSR1);  // Release
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this, on_signal = std::move(on_signal)] {
      int sig = 0;
      sigwait(&set_, &sig);
      if (sig != SIGUSR1) on_signal();
    });
  }
  ~SignalWaiter() {
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }

 private:
  sigset_t set_;
  std::thread thread_;
};

}  // namespace

int RunPipelineValidate(const std::string& file) {
  auto config = LoadFile(file);
  if (!config.ok()) {
    std::fprintf(stderr, "sluice pipeline validate: %s\n", config.status().message().c_str());
    return 2;
  }
  fmt::print("{}", pipeline::DescribePipeline(*config));
  for (const std::string& w : config->warnings) fmt::print(stderr, "warning: {}\n", w);
  fmt::print("{}: valid\n", file);
  return 0;
}

int RunPipelineInvoke(const std::string& file, const std::string& fixture) {
  auto config = LoadFile(file);
  if (!config.ok()) {
    std::fprintf(stderr, "sluice pipeline invoke: %s\n", config.status().message().c_str());
    return 2;
  }
  std::ifstream in(fixture, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "sluice pipeline invoke: cannot read %s: %s\n", fixture.c_str(),
                 std::strerror(errno));
    return 2;
  }
  std::vector<std::string> lines;
  std::vector<int64_t> line_numbers;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    lines.push_back(line);
    line_numbers.push_back(n);
  }
  const bool raise = config->on_error.policy == pipeline::ErrorPolicy::kRaise;
  MetricsRegistry metrics;
  auto runner = pipeline::PipelineRunner::Create(std::move(*config),
                                                 {.metrics = &metrics, .without_sinks = true});
  if (!runner.ok()) {
    std::fprintf(stderr, "sluice pipeline invoke: %s\n", runner.status().message().c_str());
    return 1;
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  std::vector<kafka::client::Message> messages;
  for (size_t i = 0; i < lines.size(); ++i) {
    kafka::client::Message m;
    m.topic = "fixture";
    m.partition = 0;
    m.offset = line_numbers[i] - 1;  // the line's number, from 0
    m.timestamp_ms = now_ms;
    m.value = lines[i];
    messages.push_back(m);
  }
  std::vector<std::string> errors;
  auto rows = (*runner)->Invoke(messages, &errors);
  for (const std::string& e : errors) {
    // "message N" is the N-th non-empty line; name the file's line instead.
    size_t n = 0;
    if (std::sscanf(e.c_str(), "message %zu:", &n) == 1 && n >= 1 && n <= line_numbers.size()) {
      fmt::print(stderr, "{}:{}: {}\n", fixture, line_numbers[n - 1], e.substr(e.find(':') + 2));
    } else {
      fmt::print(stderr, "{}: {}\n", fixture, e);
    }
  }
  if (!rows.ok()) {
    std::fprintf(stderr, "sluice pipeline invoke: %s\n", rows.status().message().c_str());
    return 1;
  }
  for (const std::string& row : *rows) fmt::print("{}\n", row);
  return !errors.empty() && raise ? 1 : 0;
}

int RunPipelineRun(const PipelineRunFlags& flags) {
  // Signals are taken from the start: a SIGTERM while DuckDB opens or the commands run
  // must stop the pipeline cleanly, not kill the process.
  std::atomic<bool> stop_requested{false};
  std::atomic<pipeline::PipelineRunner*> running{nullptr};
  std::mutex stop_mu;
  SignalWaiter signals([&] {
    std::lock_guard<std::mutex> lock(stop_mu);
    stop_requested = true;
    if (pipeline::PipelineRunner* r = running.load()) r->Stop();
  });
  auto config = LoadFile(flags.file);
  if (!config.ok()) {
    std::fprintf(stderr, "sluice pipeline run: %s\n", config.status().message().c_str());
    return 2;
  }
  for (const std::string& w : config->warnings) {
    SayLine(STDERR_FILENO, "warning", LogLevel::kWarn, "pipeline", w);
  }
  // A remote run is whoever its SASL user is (docs/design/0020): a principal must be it.
  if (!config->principal.empty()) {
    std::vector<std::pair<std::string, const pipeline::KafkaConnectionConfig*>> connections = {
        {"source.kafka", &config->source}};
    if (config->sink.type == pipeline::SinkType::kKafka) {
      connections.push_back({"sink.kafka", &config->sink.kafka});
    }
    for (const auto& [what, c] : connections) {
      if (!c->sasl || c->sasl->username != config->principal) {
        std::fprintf(stderr,
                     "sluice pipeline run: pipeline.principal is %s, but %s logs in as %s: a "
                     "pipeline run outside sluice serve is its kafka.sasl.username\n",
                     config->principal.c_str(), what.c_str(),
                     c->sasl ? c->sasl->username.c_str() : "nobody (no kafka.sasl)");
        return 2;
      }
    }
  }
  if (config->source.in_process == pipeline::InProcessMode::kTrue) {
    std::fprintf(stderr,
                 "sluice pipeline run: source.kafka.in_process is true, but only a pipeline of "
                 "sluice serve --pipelines reads its broker in-process (docs/design/"
                 "0023-native-path.md); use auto or false here\n");
    return 2;
  }
  MetricsRegistry& metrics = MetricsRegistry::Global();
  RegisterProcessMetrics(metrics);
  pipeline::RunnerOptions options;
  options.metrics = &metrics;
  options.progress = flags.progress && ::isatty(STDERR_FILENO) ? stderr : nullptr;
  auto runner = pipeline::PipelineRunner::Create(std::move(*config), options);
  if (!runner.ok()) {
    std::fprintf(stderr, "sluice pipeline run: %s\n", runner.status().message().c_str());
    return 1;
  }
  pipeline::PipelineRunner* r = runner->get();
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    running = r;
    if (stop_requested) r->Stop();
  }
  std::unique_ptr<HttpServer> http;
  if (!flags.http_addr.empty() && flags.http_addr != "off") {
    auto started = HttpServer::Start(flags.http_addr, metrics, [r] { return r->Health(); });
    if (!started.ok()) {
      std::fprintf(stderr, "sluice pipeline run: %s\n", started.status().message().c_str());
      return 2;
    }
    http = std::move(started).value();
    SayLine(STDERR_FILENO, "sluice", LogLevel::kInfo, "pipeline",
            fmt::format("metrics on http://{}:{}/metrics", http->host(), http->port()));
  }
  Status st = r->Run();
  {
    std::lock_guard<std::mutex> lock(stop_mu);
    running = nullptr;
  }
  if (!st.ok()) {
    std::fprintf(stderr, "sluice pipeline run: %s\n", st.message().c_str());
    return 1;
  }
  SayLine(STDERR_FILENO, "sluice", LogLevel::kInfo, "pipeline",
          fmt::format("pipeline {} stopped: {} messages in, {} rows out, {} errors", r->name(),
                      r->stats().messages_in.load(), r->stats().rows_out.load(),
                      r->stats().errors.load()));
  return 0;
}

}  // namespace sluice::cli
