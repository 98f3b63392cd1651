// Reads pipeline files: template substitution, YAML parsing, and the strict walk over
// sqlflow's keys that fills PipelineConfig (see pipeline_config.h, docs/pipelines.md).
//
// Here: the public API (ParsePipeline, LoadPipelineFile, SubstituteTemplate,
// DescribePipeline, KafkaClientProperties) and the checks before YAML sees the text.
// Step 1 is config_template.cc; step 3 config_walker.h, config_sections.cc and
// config_window.cc.
#include "pipeline/pipeline_config.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <span>
#include <sstream>
#include <utility>

#include "pipeline/config_template.h"
#include "pipeline/config_text.h"
#include "pipeline/config_walker.h"

namespace sluice::pipeline {

using namespace config_internal;  // NOLINT: this file is the reader's public face

namespace {

// Notes where each YAML document starts, and nothing else.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::vector<YAML::Mark> starts;
};

// Refuses text that cannot be a pipeline file before YAML sees it: too large, NUL
// bytes (a binary file), or not UTF-8.
Status CheckText(std::string_view text, std::string_view origin) {
  if (text.size() > kMaxPipelineFileBytes) {
    return InvalidArgumentError("{}: the file is {} bytes; pipeline files are limited to {}",
                                origin, text.size(), kMaxPipelineFileBytes);
  }
  int line = 1;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\n') ++line;
    if (c == 0) {
      return InvalidArgumentError("{}:{}: holds a NUL byte; a pipeline file is YAML text", origin,
                                  line);
    }
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len != 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (!ok) {
      return InvalidArgumentError("{}:{}: is not UTF-8 text (byte 0x{:02x} at offset {})", origin,
                                  line, c, i);
    }
    i += len;
  }
  return Status::OK();
}

}  // namespace

std::string_view Name(AutoOffsetReset v) { return NameOf(kOffsetResets, v); }
std::string_view Name(SecurityProtocol v) { return NameOf(kProtocols, v); }
std::string_view Name(HandlerType v) { return NameOf(kHandlers, v); }
std::string_view Name(SinkType v) { return NameOf(kSinks, v); }
std::string_view Name(ErrorPolicy v) { return NameOf(kPolicies, v); }
std::string_view Name(PostgresMode v) { return NameOf(kModes, v); }
std::string_view Name(SubstitutionType v) { return NameOf(kSubstitutions, v); }
std::string_view Name(WindowType v) { return NameOf(kWindowTypes, v); }

EnvLookup ProcessEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup MapEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Result<std::string> SubstituteTemplate(std::string_view text, std::string_view origin,
                                       const EnvLookup& env) {
  RETURN_IF_ERROR(CheckText(text, origin));
  ASSIGN_OR_RETURN(Rendered rendered, Render(text, origin, env));
  return std::move(rendered.text);
}

size_t DecodeThreads(const HandlerConfig& handler) {
  if (handler.decode_threads > 0) return static_cast<size_t>(handler.decode_threads);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  int n = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return static_cast<size_t>(std::clamp<int64_t>(n, 1, kMaxAutoDecodeThreads));
}

Result<PipelineConfig> ParsePipeline(std::string_view text, std::string_view origin,
                                     const EnvLookup& env) {
  RETURN_IF_ERROR(CheckText(text, origin));
  ASSIGN_OR_RETURN(Rendered rendered, Render(text, origin, env));
  auto source_line = [&](const YAML::Mark& mark) {
    if (mark.is_null() || mark.line < 0) return 0;
    size_t l = std::min(static_cast<size_t>(mark.line), rendered.source_line.size() - 1);
    return rendered.source_line[l];
  };
  // Documents are counted with a capped event pass before the first is loaded: yaml-cpp
  // 0.7's LoadAll turns a stray ',' at the top level into millions of empty documents
  // (gigabytes), found by the fuzzer.
  YAML::Node top;
  try {
    std::istringstream stream(rendered.text);
    YAML::Parser parser(stream);
    DocumentCounter counter;
    while (counter.starts.size() < 2 && parser.HandleNextDocument(counter)) {
    }
    if (counter.starts.size() > 1) {
      return InvalidArgumentError(
          "{}:{}: a second YAML document starts here; a pipeline file "
          "holds one",
          origin, source_line(counter.starts[1]));
    }
    if (!counter.starts.empty()) top = YAML::Load(rendered.text);
  } catch (const YAML::Exception& e) {
    int line = source_line(e.mark);
    return InvalidArgumentError("{}:{}: not valid YAML: {}", origin,
                                line > 0 ? fmt::format("{}:{}", line, e.mark.column + 1) : "?",
                                e.msg);
  } catch (const std::exception& e) {
    return InvalidArgumentError("{}: not valid YAML: {}", origin, e.what());
  }
  if (!top.IsDefined() || top.IsNull()) {
    return InvalidArgumentError(
        "{}: the file is empty; a pipeline file needs a `pipeline` section with source, "
        "handler and sink (see docs/pipelines.md)",
        origin);
  }
  if (!top.IsMap()) {
    return InvalidArgumentError(
        "{}:{}: the top level must be a map with `pipeline` (and `commands`), got {}", origin,
        source_line(top.Mark()), KindName(top));
  }
  Walker walker(origin, rendered);
  PipelineConfig config;
  try {
    config = walker.Walk(top);
  } catch (const std::exception& e) {
    return InvalidArgumentError("{}: cannot read the YAML: {}", origin, e.what());
  }
  std::vector<std::string>& errors = walker.errors();
  if (!errors.empty()) {
    if (walker.dropped_errors() > 0) {
      errors.push_back(fmt::format("... and {} more errors", walker.dropped_errors()));
    }
    return InvalidArgumentError("{}", fmt::join(errors, "\n"));
  }
  return config;
}

Result<PipelineConfig> LoadPipelineFile(const std::string& path, const EnvLookup& env) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError("pipeline file {} does not exist", path);
    return ErrnoError("open pipeline file", path, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError("stat pipeline file", path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError("{} is a directory, not a pipeline file", path);
  }
  if (st.st_size > static_cast<off_t>(kMaxPipelineFileBytes)) {
    ::close(fd);
    return InvalidArgumentError("{}: the file is {} bytes; pipeline files are limited to {}", path,
                                st.st_size, kMaxPipelineFileBytes);
  }
  std::string text;
  char buf[64 << 10];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError("read pipeline file", path, err);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxPipelineFileBytes) break;  // grew while read; CheckText refuses
  }
  ::close(fd);
  return ParsePipeline(text, path, env);
}

namespace {

std::string Size(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0) {
    return fmt::format("{} GiB", bytes >> 30);
  }
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) {
    return fmt::format("{} MiB", bytes >> 20);
  }
  if (bytes >= 1024 && bytes % 1024 == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

std::string DescribeSink(const SinkConfig& sink) {
  switch (sink.type) {
    case SinkType::kConsole:
      return "console";
    case SinkType::kNoop:
      return "noop";
    case SinkType::kKafka:
      return fmt::format("kafka topic {} on {}{}", sink.kafka.topic,
                         fmt::join(sink.kafka.brokers, ","),
                         sink.kafka.exactly_once ? ", exactly once (Kafka transactions)" : "");
    case SinkType::kSqlCommand: {
      size_t lines = std::count(sink.sqlcommand.sql.begin(), sink.sqlcommand.sql.end(), '\n');
      return fmt::format(
          "sqlcommand ({} line{} of SQL over sqlflow_sink_batch{})", std::max<size_t>(lines, 1),
          lines > 1 ? "s" : "",
          sink.sqlcommand.substitutions.empty()
              ? ""
              : fmt::format(", {} substitution(s)", sink.sqlcommand.substitutions.size()));
    }
    case SinkType::kIceberg:
      return fmt::format("iceberg table {}.{} (catalog {}{}), commit every {} s",
                         fmt::join(sink.iceberg.namespace_, "."), sink.iceberg.table,
                         sink.iceberg.catalog_name,
                         sink.iceberg.catalog ? ", REST catalog " + sink.iceberg.catalog->uri : "",
                         sink.iceberg.commit_interval_seconds);
    case SinkType::kPostgres:
      return fmt::format("postgres table {}, {}{}", sink.postgres.table, Name(sink.postgres.mode),
                         sink.postgres.key.empty()
                             ? ""
                             : fmt::format(" on ({})", fmt::join(sink.postgres.key, ", ")));
  }
  return "?";
}

}  // namespace

std::string DescribePipeline(const PipelineConfig& c) {
  std::string out = fmt::format("pipeline {}", c.name.empty() ? "(unnamed)" : c.name);
  if (!c.description.empty()) out += fmt::format(": {}", c.description);
  out += fmt::format("\n  source:   kafka topic{} {} on {}, group {}, from {}",
                     c.source.topics.size() > 1 ? "s" : "", fmt::join(c.source.topics, ", "),
                     fmt::join(c.source.brokers, ","), c.source.group_id,
                     Name(c.source.auto_offset_reset));
  if (c.source.security_protocol) out += fmt::format(", {}", Name(*c.source.security_protocol));
  if (c.source.sasl)
    out += fmt::format(" ({} as {})", c.source.sasl->mechanism, c.source.sasl->username);
  out += fmt::format("; read-ahead {} fetches of {} ({} per partition)", c.source.fetch.prefetch,
                     Size(c.source.fetch.max_bytes), Size(c.source.fetch.max_partition_bytes));
  if (!c.source.properties.empty()) {
    out += fmt::format("; {} librdkafka propert{}", c.source.properties.size(),
                       c.source.properties.size() == 1 ? "y" : "ies");
  }
  size_t sql_lines = std::count(c.handler.sql.begin(), c.handler.sql.end(), '\n');
  out += fmt::format("\n  handler:  {} into table {}, {} line{} of SQL", Name(c.handler.type),
                     c.handler.type == HandlerType::kStructuredBatch ? c.handler.table : "batch",
                     std::max<size_t>(sql_lines, 1), sql_lines > 1 ? "s" : "");
  if (c.window) {
    const WindowConfig& w = *c.window;
    auto d = [](int64_t us) {
      return us % 1000000 == 0 ? fmt::format("{}s", us / 1000000) : fmt::format("{}ms", us / 1000);
    };
    out += fmt::format("\n  window:   {} on {}", Name(w.type), w.time_column);
    if (w.type == WindowType::kSession) {
      out += fmt::format(", gap {}", d(w.gap_us));
      if (!w.key.empty()) out += fmt::format(" per {}", fmt::join(w.key, ", "));
    } else {
      out += fmt::format(", size {}", d(w.size_us));
      if (w.type == WindowType::kHopping) out += fmt::format(" sliding by {}", d(w.slide_us));
    }
    out +=
        fmt::format("; grace {}, allowed lateness {}, idle after {}, future cap {}", d(w.grace_us),
                    d(w.allowed_lateness_us), d(w.idle_close_us), d(w.max_future_us));
    out += fmt::format("\n  sink:     {} (closed windows)", DescribeSink(w.sink));
  } else {
    out += fmt::format("\n  sink:     {}", DescribeSink(c.sink));
  }
  if (c.state) out += fmt::format("\n  state:    {}", c.state->path);
  out += fmt::format("\n  on_error: {}", Name(c.on_error.policy));
  if (c.on_error.policy == ErrorPolicy::kDlq && c.on_error.dlq) {
    out += fmt::format(" to {}", DescribeSink(*c.on_error.dlq));
  }
  out += fmt::format("\n  batches:  {} message{} or {} s, whichever comes first", c.batch_size,
                     c.batch_size == 1 ? "" : "s", c.flush_interval_seconds);
  out +=
      fmt::format("\n  duckdb:   memory_limit {}, {} thread{}", Size(c.duckdb.memory_limit_bytes),
                  c.duckdb.threads, c.duckdb.threads == 1 ? "" : "s");
  if (!c.commands.empty()) {
    std::vector<std::string_view> names;
    for (const SqlCommand& cmd : c.commands) names.push_back(cmd.name);
    out += fmt::format("\n  commands: {} ({})", c.commands.size(), fmt::join(names, "; "));
  }
  for (const TableConfig& t : c.tables) {
    out += fmt::format("\n  table:    {}", t.name);
    if (t.tumbling_window) {
      out += fmt::format(", a tumbling window polled every {} s, closed windows to {}",
                         t.tumbling_window->poll_interval_seconds, DescribeSink(t.sink));
    }
  }
  out += '\n';
  return out;
}

std::map<std::string, std::string> KafkaClientProperties(const KafkaConnectionConfig& kafka) {
  std::map<std::string, std::string> p;
  p["bootstrap.servers"] = fmt::format("{}", fmt::join(kafka.brokers, ","));
  if (kafka.security_protocol) p["security.protocol"] = AsciiLower(Name(*kafka.security_protocol));
  if (kafka.sasl) {
    p["sasl.mechanisms"] = kafka.sasl->mechanism;
    if (!kafka.sasl->username.empty()) p["sasl.username"] = kafka.sasl->username;
    if (!kafka.sasl->password.empty()) p["sasl.password"] = kafka.sasl->password;
  }
  if (kafka.ssl) {
    auto set = [&](const char* name, const std::string& v) {
      if (!v.empty()) p[name] = v;
    };
    set("ssl.ca.location", kafka.ssl->ca_location);
    set("ssl.certificate.location", kafka.ssl->certificate_location);
    set("ssl.key.location", kafka.ssl->key_location);
    set("ssl.key.password", kafka.ssl->key_password);
    set("ssl.endpoint.identification.algorithm", kafka.ssl->endpoint_identification_algorithm);
  }
  for (const auto& [k, v] : kafka.properties) p[k] = v;
  return p;
}

std::string TransactionalId(const KafkaSinkConfig& sink, const KafkaSourceConfig& source,
                            std::string_view pipeline) {
  std::string id = !sink.transactional_id.empty()
                       ? sink.transactional_id
                       : fmt::format("sluice-{}", pipeline.empty() ? "pipeline" : pipeline);
  if (auto it = source.properties.find("group.instance.id"); it != source.properties.end()) {
    return fmt::format("{}-{}", id, it->second);
  }
  if (!sink.transactional_id.empty()) return id;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "host");
  return fmt::format("{}-{}-{}", id, host, static_cast<long>(getpid()));
}

}  // namespace sluice::pipeline
