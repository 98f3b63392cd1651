// Step 3 of reading a pipeline file: the strict walk over the parsed YAML that fills
// PipelineConfig (pipeline_config.h). Every error names the dotted key path and the
// source line; keys sqlflow has and sluice refuses say what to use instead.
//
// Walker's sections are in config_sections.cc (source, handler, sinks, on_error, duckdb)
// and config_window.cc (window, state, commands, tables, and the walk of the file).
// Internal to the pipeline config reader.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/config_template.h"
#include "pipeline/config_text.h"
#include "pipeline/pipeline_config.h"

namespace sluice::pipeline::config_internal {

// ------------------------------------------------------------------------------------
// Step 3: the walk over the parsed YAML.

// A sqlflow key (or value) sluice refuses, with what to use instead.
struct Refusal {
  std::string_view key;
  std::string_view guidance;
};

inline constexpr std::string_view kSqlcommandParquet =
    "write files with `type: sqlcommand` and `sql: COPY sqlflow_sink_batch TO "
    "'out.parquet' (FORMAT PARQUET)`";

inline constexpr Refusal kTopRefused[] = {
    {"udfs", "sluice runs no Python; write the function in SQL with CREATE MACRO in `commands`"},
};
inline constexpr Refusal kPipelineRefused[] = {
    {"drain_deadline_seconds",
     "remove it: on shutdown sluice flushes the open batch and "
     "commits its offsets"},
    {"turbostats", "remove it: sluice serves Prometheus metrics on --http-addr"},
};
inline constexpr Refusal kSourceRefused[] = {
    {"websocket",
     "sluice reads Kafka topics only; produce the events to a topic (sluice serve "
     "is a Kafka broker) and use `type: kafka`"},
    {"webhook",
     "sluice reads Kafka topics only; produce the events to a topic (sluice serve "
     "is a Kafka broker) and use `type: kafka`"},
    {"mqtt",
     "sluice reads Kafka topics only; bridge MQTT into a Kafka topic and use "
     "`type: kafka`"},
    {"error", "use pipeline.on_error"},
};
inline constexpr Refusal kSinkRefused[] = {
    {"clickhouse",
     "use `type: postgres`, or `type: sqlcommand` with SQL over "
     "sqlflow_sink_batch"},
    {"local", kSqlcommandParquet},
    {"format", kSqlcommandParquet},
    {"retry", "remove it: a sink that fails follows pipeline.on_error"},
};

// Properties that a named key sets, or that sluice owns.
inline constexpr Refusal kConnectionProperties[] = {
    {"bootstrap.servers", "use kafka.brokers"},
    {"metadata.broker.list", "use kafka.brokers"},
    {"security.protocol", "use kafka.security_protocol"},
    {"sasl.mechanism", "use kafka.sasl.mechanism"},
    {"sasl.mechanisms", "use kafka.sasl.mechanism"},
    {"sasl.username", "use kafka.sasl.username"},
    {"sasl.password", "use kafka.sasl.password"},
    {"ssl.ca.location", "use kafka.ssl.ca_location"},
    {"ssl.certificate.location", "use kafka.ssl.certificate_location"},
    {"ssl.key.location", "use kafka.ssl.key_location"},
    {"ssl.key.password", "use kafka.ssl.key_password"},
    {"ssl.endpoint.identification.algorithm", "use kafka.ssl.endpoint_identification_algorithm"},
};
inline constexpr Refusal kConsumerProperties[] = {
    {"group.id", "use kafka.group_id"},
    {"auto.offset.reset", "use kafka.auto_offset_reset"},
    {"enable.auto.commit", "sluice commits offsets itself, after the sink has flushed"},
    {"enable.auto.offset.store", "sluice commits offsets itself, after the sink has flushed"},
    {"fetch.max.bytes", "use kafka.fetch.max_bytes"},
    {"max.partition.fetch.bytes", "use kafka.fetch.max_partition_bytes"},
    {"queued.max.messages.kbytes", "the read-ahead is bounded by kafka.fetch (prefetch)"},
    {"queued.min.messages", "the read-ahead is bounded by kafka.fetch (prefetch)"},
};

inline const Refusal* FindRefusal(std::span<const Refusal> list, std::string_view key) {
  for (const Refusal& r : list) {
    if (r.key == key) return &r;
  }
  return nullptr;
}

template <typename E>
struct EnumName {
  std::string_view name;
  E value;
};

inline constexpr EnumName<AutoOffsetReset> kOffsetResets[] = {
    {"earliest", AutoOffsetReset::kEarliest}, {"latest", AutoOffsetReset::kLatest}};
inline constexpr EnumName<MessageFormat> kFormats[] = {{"json", MessageFormat::kJson},
                                                       {"avro", MessageFormat::kAvro},
                                                       {"protobuf", MessageFormat::kProtobuf},
                                                       {"json_schema", MessageFormat::kJsonSchema}};
inline constexpr EnumName<KeyFormat> kKeyFormats[] = {
    {"bytes", KeyFormat::kBytes}, {"avro", KeyFormat::kAvro}, {"protobuf", KeyFormat::kProtobuf}};
inline constexpr EnumName<InProcessMode> kInProcessModes[] = {{"auto", InProcessMode::kAuto},
                                                              {"true", InProcessMode::kTrue},
                                                              {"false", InProcessMode::kFalse}};
inline constexpr EnumName<SecurityProtocol> kProtocols[] = {
    {"PLAINTEXT", SecurityProtocol::kPlaintext},
    {"SSL", SecurityProtocol::kSsl},
    {"SASL_PLAINTEXT", SecurityProtocol::kSaslPlaintext},
    {"SASL_SSL", SecurityProtocol::kSaslSsl}};
inline constexpr EnumName<HandlerType> kHandlers[] = {
    {"handlers.StructuredBatch", HandlerType::kStructuredBatch},
    {"handlers.InferredMemBatch", HandlerType::kInferredMemBatch},
    {"handlers.InferredDiskBatch", HandlerType::kInferredDiskBatch}};
inline constexpr EnumName<SinkType> kSinks[] = {
    {"console", SinkType::kConsole},   {"noop", SinkType::kNoop},
    {"kafka", SinkType::kKafka},       {"sqlcommand", SinkType::kSqlCommand},
    {"postgres", SinkType::kPostgres}, {"iceberg", SinkType::kIceberg}};
inline constexpr EnumName<ErrorPolicy> kPolicies[] = {
    {"RAISE", ErrorPolicy::kRaise}, {"IGNORE", ErrorPolicy::kIgnore}, {"DLQ", ErrorPolicy::kDlq}};
inline constexpr EnumName<PostgresMode> kModes[] = {{"append", PostgresMode::kAppend},
                                                    {"upsert", PostgresMode::kUpsert}};
inline constexpr EnumName<SubstitutionType> kSubstitutions[] = {
    {"uuid4", SubstitutionType::kUuid4}};
inline constexpr EnumName<WindowType> kWindowTypes[] = {{"tumbling", WindowType::kTumbling},
                                                        {"hopping", WindowType::kHopping},
                                                        {"session", WindowType::kSession}};
inline constexpr std::string_view kMechanisms[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                                   "GSSAPI", "OAUTHBEARER"};

template <typename E, size_t N>
std::string_view NameOf(const EnumName<E> (&table)[N], E value) {
  for (const auto& e : table) {
    if (e.value == value) return e.name;
  }
  return "?";
}

template <typename E, size_t N>
std::string ChoiceList(const EnumName<E> (&table)[N]) {
  std::vector<std::string_view> names;
  for (const auto& e : table) names.push_back(e.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

inline const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return "nothing";
  }
}

inline std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

// One key of a map: its key node (for its line) and its value.
struct Entry {
  YAML::Node key;
  YAML::Node value;
};

// A map whose keys were checked. `present` is false when the value was not a map (the
// error is already recorded) or was absent.
struct MapView {
  std::string path;
  YAML::Node node;
  int line = 0;  // where the map is, for "missing" errors
  bool present = false;
  std::map<std::string, Entry, std::less<>> entries;

  const Entry* Find(std::string_view key) const {
    auto it = entries.find(key);
    return it == entries.end() ? nullptr : &it->second;
  }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
};

class Walker {
 public:
  Walker(std::string_view origin, const Rendered& rendered)
      : origin_(origin),
        rendered_(rendered),
        budget_(static_cast<int64_t>(rendered.text.size()) * 4 + (int64_t{64} << 10)) {}

  PipelineConfig Walk(const YAML::Node& top);
  std::vector<std::string>& errors() { return errors_; }
  size_t dropped_errors() const { return dropped_errors_; }

 private:
  // ---- locations and reports
  int LineOf(const YAML::Node& node, int fallback) const {
    if (!node.IsDefined()) return fallback;
    YAML::Mark mark = node.Mark();
    if (mark.is_null() || mark.line < 0) return fallback;
    size_t l = static_cast<size_t>(mark.line);
    if (l >= rendered_.source_line.size()) return rendered_.source_line.back();
    return rendered_.source_line[l];
  }
  std::string Where(int line) const {
    return line > 0 ? fmt::format("{}:{}", origin_, line) : std::string(origin_);
  }
  void Error(int line, std::string_view path, std::string_view msg) {
    if (errors_.size() >= kMaxErrors) {
      ++dropped_errors_;
      return;
    }
    errors_.push_back(path.empty() ? fmt::format("{}: {}", Where(line), msg)
                                   : fmt::format("{}: {}: {}", Where(line), path, msg));
  }
  void Warn(int line, std::string_view path, std::string_view msg) {
    warnings_.push_back(fmt::format("{}: {}: {}", Where(line), path, msg));
  }
  // Charges the walk for work done on behalf of the document, so that aliases
  // repeating a large node cannot make it unbounded. False once exhausted.
  bool Charge(size_t units) {
    budget_ -= static_cast<int64_t>(units) + 1;
    if (budget_ >= 0) return true;
    if (!exhausted_) {
      exhausted_ = true;
      errors_.push_back(fmt::format(
          "{}: the document expands (through aliases) to far more than its own size", origin_));
    }
    return false;
  }
  // Where an entry's value is; an empty value (whose mark yaml-cpp puts at the next
  // token) is on its key's line.
  int EntryLine(const Entry& e, int fallback) const {
    int key_line = LineOf(e.key, fallback);
    return e.value.IsNull() ? key_line : LineOf(e.value, key_line);
  }

  // ---- maps
  MapView OpenMap(const YAML::Node& node, std::string path, int line,
                  std::initializer_list<std::string_view> known,
                  std::span<const Refusal> refused = {}) {
    MapView view;
    view.path = std::move(path);
    view.node = node;
    view.line = node.IsDefined() && !node.IsNull() ? LineOf(node, line) : line;
    if (!node.IsDefined() || node.IsNull()) {
      view.present = node.IsDefined();
      return view;
    }
    if (!node.IsMap()) {
      Error(view.line, view.path, fmt::format("must be a map of keys, got {}", KindName(node)));
      return view;
    }
    view.present = true;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!Charge(1)) break;
      YAML::Node key = it->first;  // copies: the iterator hands out temporaries
      int key_line = LineOf(key, view.line);
      if (!key.IsScalar()) {
        Error(key_line, view.path,
              fmt::format("a key must be a plain name, got {}", KindName(key)));
        continue;
      }
      const std::string& name = key.Scalar();
      std::string key_path = Join(view.path, name);
      if (auto prev = view.entries.find(name); prev != view.entries.end()) {
        Error(key_line, key_path,
              fmt::format("is set twice (first at line {})", LineOf(prev->second.key, 0)));
        continue;
      }
      view.entries.emplace(name, Entry{key, it->second});
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      if (const Refusal* r = FindRefusal(refused, name)) {
        Error(key_line, key_path,
              fmt::format("sqlflow's `{}` is not supported by sluice: {}", name, r->guidance));
        continue;
      }
      std::string hint;
      for (std::string_view k : known) {
        if (EditDistance(AsciiLower(name), k) <= 2) {
          hint = fmt::format(" (did you mean `{}`?)", k);
          break;
        }
      }
      Error(key_line, key_path,
            fmt::format("unknown key{}; known here: {}", hint, fmt::join(known, ", ")));
    }
    return view;
  }

  // ---- scalars. Each returns nullopt when absent or wrong (the error is recorded).
  std::optional<std::string> String(const MapView& m, std::string_view key, bool required) {
    std::string path = Join(m.path, key);
    const Entry* e = m.Find(key);
    if (e == nullptr || e->value.IsNull()) {
      if (required) {
        Error(e ? EntryLine(*e, m.line) : m.line, path,
              e ? "is empty; it is required" : "is required but missing");
      }
      return std::nullopt;
    }
    if (!e->value.IsScalar()) {
      Error(EntryLine(*e, m.line), path,
            fmt::format("must be a single value, got {}", KindName(e->value)));
      return std::nullopt;
    }
    const std::string& s = e->value.Scalar();
    if (!Charge(s.size())) return std::nullopt;
    if (required && Trim(s).empty()) {
      Error(EntryLine(*e, m.line), path, "is empty; it is required");
      return std::nullopt;
    }
    return s;
  }

  std::optional<int64_t> Integer(const MapView& m, std::string_view key, int64_t min, int64_t max) {
    std::optional<std::string> s = String(m, key, false);
    if (!s) return std::nullopt;
    std::string path = Join(m.path, key);
    int line = EntryLine(*m.Find(key), m.line);
    std::string_view t = Trim(*s);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec == std::errc::result_out_of_range) {
      Error(line, path,
            fmt::format("must be a whole number between {} and {}, got {}", min, max, Quote(*s)));
      return std::nullopt;
    }
    if (ec != std::errc() || ptr != t.data() + t.size()) {
      Error(line, path, fmt::format("must be a whole number, got {}", Quote(*s)));
      return std::nullopt;
    }
    if (v < min) {
      Error(line, path, fmt::format("must be at least {}, got {}", min, v));
      return std::nullopt;
    }
    if (v > max) {
      Error(line, path, fmt::format("must be at most {}, got {}", max, v));
      return std::nullopt;
    }
    return v;
  }

  // A byte count: a whole number with an optional unit (B, KB, KiB, MB, MiB, GB, GiB, TB,
  // TiB; KB = 1000, KiB = 1024).
  std::optional<int64_t> Bytes(const MapView& m, std::string_view key, int64_t min, int64_t max) {
    std::optional<std::string> s = String(m, key, false);
    if (!s) return std::nullopt;
    std::string path = Join(m.path, key);
    int line = EntryLine(*m.Find(key), m.line);
    std::string_view t = Trim(*s);
    size_t digits = 0;
    while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
    static constexpr std::pair<std::string_view, int64_t> kUnits[] = {{"", 1},
                                                                      {"b", 1},
                                                                      {"kb", 1000},
                                                                      {"kib", 1 << 10},
                                                                      {"mb", 1000000},
                                                                      {"mib", 1 << 20},
                                                                      {"gb", 1000000000},
                                                                      {"gib", int64_t{1} << 30},
                                                                      {"tb", 1000000000000},
                                                                      {"tib", int64_t{1} << 40}};
    std::string unit = AsciiLower(Trim(t.substr(digits)));
    const auto* u = std::find_if(std::begin(kUnits), std::end(kUnits),
                                 [&](const auto& p) { return p.first == unit; });
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + digits, n);
    if (digits == 0 || ec != std::errc() || u == std::end(kUnits)) {
      Error(line, path, fmt::format("must be a size such as 512MiB or 2GB, got {}", Quote(*s)));
      return std::nullopt;
    }
    if (n > max / u->second || n * u->second > max) {
      Error(line, path, fmt::format("must be at most {} bytes, got {}", max, Quote(*s)));
      return std::nullopt;
    }
    if (n * u->second < min) {
      Error(line, path, fmt::format("must be at least {} bytes, got {}", min, Quote(*s)));
      return std::nullopt;
    }
    return n * u->second;
  }

  // A duration: a whole number and a unit (ms, s, m, h, d), e.g. 500ms, 30s, 5m, 1h, 1d;
  // in microseconds.
  std::optional<int64_t> Duration(const MapView& m, std::string_view key, int64_t min_us,
                                  int64_t max_us) {
    std::optional<std::string> s = String(m, key, false);
    if (!s) return std::nullopt;
    std::string path = Join(m.path, key);
    int line = EntryLine(*m.Find(key), m.line);
    std::string_view t = Trim(*s);
    size_t digits = 0;
    while (digits < t.size() && std::isdigit(static_cast<unsigned char>(t[digits]))) ++digits;
    static constexpr std::pair<std::string_view, int64_t> kUnits[] = {
        {"ms", 1000}, {"s", 1000000}, {"m", 60000000}, {"h", 3600000000}, {"d", 86400000000}};
    std::string unit = AsciiLower(Trim(t.substr(digits)));
    const auto* u = std::find_if(std::begin(kUnits), std::end(kUnits),
                                 [&](const auto& p) { return p.first == unit; });
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + digits, n);
    if (digits == 0 || ec != std::errc() || u == std::end(kUnits)) {
      Error(line, path,
            fmt::format("must be a duration such as 500ms, 30s, 5m, 1h or 1d, got {}{}", Quote(*s),
                        digits == t.size() && digits > 0 ? " (give a unit)" : ""));
      return std::nullopt;
    }
    auto show = [](int64_t us) {
      return us % 1000000 == 0 ? fmt::format("{}s", us / 1000000) : fmt::format("{}ms", us / 1000);
    };
    if (n > max_us / u->second) {
      Error(line, path, fmt::format("must be at most {}, got {}", show(max_us), Quote(*s)));
      return std::nullopt;
    }
    if (n * u->second < min_us) {
      Error(line, path, fmt::format("must be at least {}, got {}", show(min_us), Quote(*s)));
      return std::nullopt;
    }
    return n * u->second;
  }

  template <typename E, size_t N>
  std::optional<E> Enum(const MapView& m, std::string_view key, bool required,
                        const EnumName<E> (&table)[N], bool case_insensitive,
                        std::span<const Refusal> refused = {}) {
    std::optional<std::string> s = String(m, key, required);
    if (!s) return std::nullopt;
    std::string_view value = Trim(*s);
    for (const auto& e : table) {
      if (case_insensitive ? AsciiLower(e.name) == AsciiLower(value) : e.name == value)
        return e.value;
    }
    int line = EntryLine(*m.Find(key), m.line);
    std::string path = Join(m.path, key);
    if (const Refusal* r = FindRefusal(refused, value)) {
      Error(line, path,
            fmt::format("sqlflow's {} is not supported by sluice: {}", Quote(value), r->guidance));
      return std::nullopt;
    }
    Error(line, path, fmt::format("must be one of {}; got {}", ChoiceList(table), Quote(value)));
    return std::nullopt;
  }

  // A list of non-empty single values; a lone scalar is refused (sqlflow wants a list).
  std::optional<std::vector<std::string>> StringList(const MapView& m, std::string_view key,
                                                     bool required, std::string_view example) {
    std::string path = Join(m.path, key);
    const Entry* e = m.Find(key);
    if (e == nullptr || e->value.IsNull()) {
      if (required) {
        Error(e ? EntryLine(*e, m.line) : m.line, path,
              fmt::format("is required but {}; write a list, e.g. {}", e ? "empty" : "missing",
                          example));
      }
      return std::nullopt;
    }
    int line = EntryLine(*e, m.line);
    if (!e->value.IsSequence()) {
      Error(line, path,
            fmt::format("must be a list, e.g. {}; got {}", example, KindName(e->value)));
      return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    size_t index = 0;
    for (const YAML::Node& item : e->value) {
      std::string item_path = fmt::format("{}[{}]", path, index++);
      if (!item.IsScalar()) {
        Error(LineOf(item, line), item_path,
              fmt::format("must be a single value, got {}", KindName(item)));
        ok = false;
        continue;
      }
      if (!Charge(item.Scalar().size())) return std::nullopt;
      if (Trim(item.Scalar()).empty()) {
        Error(LineOf(item, line), item_path, "is empty");
        ok = false;
        continue;
      }
      out.push_back(item.Scalar());
    }
    if (!ok) return std::nullopt;
    if (required && out.empty()) {
      Error(line, path, fmt::format("must list at least one, e.g. {}", example));
      return std::nullopt;
    }
    return out;
  }

  // ---- sections
  void Connection(const MapView& m, KafkaConnectionConfig* out, bool consumer);
  void Properties(const Entry& e, const std::string& path, int line, bool consumer,
                  std::map<std::string, std::string>* out);
  // The required map `key` of `parent`; not present (error recorded) when missing or empty.
  MapView Section(const MapView& parent, std::string_view key,
                  std::initializer_list<std::string_view> known, std::string_view why = "");
  void Source(const MapView& pipeline, KafkaSourceConfig* out);
  void Handler(const MapView& pipeline, HandlerConfig* out);
  bool Sink(const YAML::Node& node, const std::string& path, int line, SinkConfig* out);
  void OnError(const MapView& pipeline, OnErrorConfig* out);
  // source.kafka.schema_registry / sink.kafka.schema_registry.
  void SchemaRegistry(const MapView& k, std::optional<SchemaRegistryConfig>* out);
  // A kafka sink's exactly_once and transactional_id; the rules that need the whole file.
  void KafkaExactlyOnce(const MapView& k, KafkaSinkConfig* out);
  void ExactlyOnceRules(const PipelineConfig& config, const MapView& pipeline);
  void DuckDb(const MapView& pipeline, DuckDbConfig* out);
  void Window(const MapView& pipeline, std::optional<WindowConfig>* out);
  void State(const MapView& pipeline, std::optional<StateConfig>* out);
  void Commands(const MapView& top, std::vector<SqlCommand>* out);
  void Tables(const MapView& top, std::vector<TableConfig>* out);

  std::string_view origin_;
  const Rendered& rendered_;
  int64_t budget_;
  bool exhausted_ = false;
  std::vector<std::string> errors_;
  size_t dropped_errors_ = 0;
  std::vector<std::string> warnings_;
  std::vector<std::pair<std::string, int>> exactly_once_at_;  // kafka blocks' paths, lines
};

}  // namespace sluice::pipeline::config_internal
