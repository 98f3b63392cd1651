// Reads pipeline files: template substitution, YAML parsing, and the strict walk over
// sqlflow's keys that fills PipelineConfig (see pipeline_config.h, docs/pipelines.md).
#include "pipeline/pipeline_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <span>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

namespace sluice::pipeline {
namespace {

constexpr size_t kMaxErrors = 50;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A value quoted in an error message, cut short so that a huge value cannot flood it.
std::string Quote(std::string_view value) {
  constexpr size_t kMax = 60;
  std::string out;
  for (char c : value.substr(0, kMax)) {
    if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += '?';
    } else {
      out += c;
    }
  }
  if (value.size() > kMax) out += "...";
  return "'" + out + "'";
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// ------------------------------------------------------------------------------------
// Step 1: {{ NAME }} and {{ NAME|default(literal) }}.

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Parses one expression's inside (between "{{" and "}}", whitespace-control dashes
// removed). On success fills the variable, and the default when there is one.
struct Expression {
  std::string variable;
  std::optional<std::string> default_value;
  bool default_if_empty = false;  // default(value, true): also when set but empty
};

class ExpressionParser {
 public:
  explicit ExpressionParser(std::string_view s) : s_(s) {}

  // An error message without location, or "" when it parsed.
  std::string Parse(Expression* out) {
    SkipSpace();
    if (AtEnd()) return "empty expression";
    if (!IsIdentStart(s_[pos_])) return "expected a variable name";
    out->variable = Ident();
    SkipSpace();
    if (AtEnd()) return "";
    if (s_[pos_] != '|') {
      return fmt::format("only {{{{ NAME }}}} and {{{{ NAME|default('value') }}}} are supported, "
                         "not {}",
                         Quote(s_));
    }
    ++pos_;
    SkipSpace();
    std::string filter = AtEnd() || !IsIdentStart(s_[pos_]) ? "" : Ident();
    if (filter != "default" && filter != "d") {
      return fmt::format("filter '{}' is not supported (only default)", filter);
    }
    SkipSpace();
    if (AtEnd() || s_[pos_] != '(') return "default needs a value: default('value')";
    ++pos_;
    SkipSpace();
    std::string value;
    if (std::string err = Literal(&value); !err.empty()) return err;
    out->default_value = std::move(value);
    SkipSpace();
    if (!AtEnd() && s_[pos_] == ',') {
      ++pos_;
      SkipSpace();
      if (s_.substr(pos_).starts_with("boolean")) {
        pos_ += 7;
        SkipSpace();
        if (AtEnd() || s_[pos_] != '=') return "expected '=' after boolean";
        ++pos_;
        SkipSpace();
      }
      std::string flag;
      if (std::string err = Literal(&flag); !err.empty()) return err;
      out->default_if_empty = flag == "True";
      SkipSpace();
    }
    if (AtEnd() || s_[pos_] != ')') return "expected ')' after the default value";
    ++pos_;
    SkipSpace();
    if (!AtEnd()) return fmt::format("unexpected {} after default(...)", Quote(s_.substr(pos_)));
    return "";
  }

 private:
  bool AtEnd() const { return pos_ >= s_.size(); }
  void SkipSpace() {
    while (!AtEnd() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::string Ident() {
    size_t start = pos_;
    while (!AtEnd() && IsIdentChar(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  // A Jinja literal rendered the way Jinja prints it: strings as they are, numbers as
  // written, true/false/none as Python's True/False/None.
  std::string Literal(std::string* out) {
    if (AtEnd()) return "expected a value";
    char c = s_[pos_];
    if (c == '\'' || c == '"') {
      ++pos_;
      while (!AtEnd() && s_[pos_] != c) {
        if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) {
          char e = s_[pos_ + 1];
          *out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          pos_ += 2;
          continue;
        }
        *out += s_[pos_++];
      }
      if (AtEnd()) return "unterminated string in default(...)";
      ++pos_;
      return "";
    }
    size_t start = pos_;
    if (c == '-' || c == '+') ++pos_;
    bool digits = false;
    while (!AtEnd() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '.' ||
                        s_[pos_] == '_')) {
      digits = true;
      ++pos_;
    }
    if (digits) {
      *out = std::string(s_.substr(start, pos_ - start));
      return "";
    }
    pos_ = start;
    if (IsIdentStart(c)) {
      std::string word = Ident();
      if (word == "true" || word == "True") {
        *out = "True";
      } else if (word == "false" || word == "False") {
        *out = "False";
      } else if (word == "none" || word == "None") {
        *out = "None";
      } else {
        return fmt::format("default({}) names a variable; quote it to use it as text: "
                           "default('{}')",
                           word, word);
      }
      return "";
    }
    return fmt::format("cannot read the default value {}", Quote(s_.substr(start)));
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// The rendered text, and for each of its lines the source line it came from (lines
// inserted by a multi-line value, or removed with a comment, keep error lines right).
struct Rendered {
  std::string text;
  std::vector<int> source_line;  // [rendered line, 0-based] -> source line, 1-based
};

Result<Rendered> Render(std::string_view text, std::string_view origin, const EnvLookup& env) {
  Rendered r;
  r.source_line.push_back(1);
  std::vector<std::string> errors;
  int line = 1;
  // A newline copied from the source follows `line`'s increment; one inside a value
  // stays on the line of the expression.
  auto emit = [&](char c) {
    r.text += c;
    if (c == '\n') r.source_line.push_back(line);
  };
  auto error = [&](int at, std::string msg) {
    if (errors.size() < kMaxErrors) errors.push_back(fmt::format("{}:{}: {}", origin, at, msg));
  };
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    bool open = c == '{' && i + 1 < text.size();
    if (open && text[i + 1] == '#') {  // a Jinja comment, dropped
      size_t end = text.find("#}", i + 2);
      if (end == std::string_view::npos) {
        error(line, "'{#' comment is never closed with '#}'");
        break;
      }
      line += static_cast<int>(std::count(text.begin() + i, text.begin() + end, '\n'));
      i = end + 2;
      continue;
    }
    if (open && text[i + 1] == '%') {
      error(line, "template statements ({% ... %}) are not supported: only {{ NAME }} and "
                  "{{ NAME|default('value') }}");
      size_t end = text.find("%}", i + 2);
      if (end == std::string_view::npos) break;
      line += static_cast<int>(std::count(text.begin() + i, text.begin() + end, '\n'));
      i = end + 2;
      continue;
    }
    if (open && text[i + 1] == '{') {
      int start_line = line;
      size_t end = text.find("}}", i + 2);
      if (end == std::string_view::npos) {
        error(line, "'{{' is never closed with '}}'");
        break;
      }
      std::string_view inner = text.substr(i + 2, end - i - 2);
      line += static_cast<int>(std::count(inner.begin(), inner.end(), '\n'));
      i = end + 2;
      bool trim_before = !inner.empty() && inner.front() == '-';
      bool trim_after = !inner.empty() && inner.back() == '-';
      if (trim_before) inner.remove_prefix(1);
      if (trim_after && !inner.empty()) inner.remove_suffix(1);
      Expression expr;
      if (std::string err = ExpressionParser(inner).Parse(&expr); !err.empty()) {
        error(start_line, fmt::format("{{{{{}}}}}: {}", inner.substr(0, 60), err));
        continue;
      }
      std::optional<std::string> value = env ? env(expr.variable) : std::nullopt;
      if (value && value->empty() && expr.default_if_empty) value.reset();
      if (!value) value = expr.default_value;
      if (!value) {
        error(start_line,
              fmt::format("environment variable {0} is not set and {{{{ {0} }}}} has no default; "
                          "set it, or write {{{{ {0}|default('value') }}}}",
                          expr.variable));
        continue;
      }
      if (trim_before) {
        while (!r.text.empty() && std::isspace(static_cast<unsigned char>(r.text.back()))) {
          if (r.text.back() == '\n') r.source_line.pop_back();
          r.text.pop_back();
        }
      }
      for (char v : *value) emit(v);
      if (trim_after) {
        while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) {
          if (text[i] == '\n') ++line;
          ++i;
        }
      }
      if (r.text.size() > kMaxPipelineFileBytes) {
        return InvalidArgumentError("{}:{}: the file is larger than {} bytes after substitution",
                                    origin, start_line, kMaxPipelineFileBytes);
      }
      continue;
    }
    if (c == '\n') ++line;
    emit(c);
    ++i;
  }
  if (!errors.empty()) return InvalidArgumentError("{}", fmt::join(errors, "\n"));
  return r;
}

// ------------------------------------------------------------------------------------
// Step 3: the walk over the parsed YAML.

// A sqlflow key (or value) sluice refuses, with what to use instead.
struct Refusal {
  std::string_view key;
  std::string_view guidance;
};

constexpr std::string_view kSqlcommandParquet =
    "write files with `type: sqlcommand` and `sql: COPY sqlflow_sink_batch TO "
    "'out.parquet' (FORMAT PARQUET)`";

constexpr Refusal kTopRefused[] = {
    {"udfs", "sluice runs no Python; write the function in SQL with CREATE MACRO in `commands`"},
};
constexpr Refusal kPipelineRefused[] = {
    {"drain_deadline_seconds", "remove it: on shutdown sluice flushes the open batch and "
                               "commits its offsets"},
    {"turbostats", "remove it: sluice serves Prometheus metrics on --http-addr"},
};
constexpr Refusal kSourceRefused[] = {
    {"websocket", "sluice reads Kafka topics only; produce the events to a topic (sluice serve "
                  "is a Kafka broker) and use `type: kafka`"},
    {"webhook", "sluice reads Kafka topics only; produce the events to a topic (sluice serve "
                "is a Kafka broker) and use `type: kafka`"},
    {"mqtt", "sluice reads Kafka topics only; bridge MQTT into a Kafka topic and use "
             "`type: kafka`"},
    {"error", "use pipeline.on_error"},
};
constexpr Refusal kSinkRefused[] = {
    {"clickhouse", "use `type: postgres`, or `type: sqlcommand` with SQL over "
                   "sqlflow_sink_batch"},
    {"local", kSqlcommandParquet},
    {"format", kSqlcommandParquet},
    {"retry", "remove it: a sink that fails follows pipeline.on_error"},
};

// Properties that a named key sets, or that sluice owns.
constexpr Refusal kConnectionProperties[] = {
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
constexpr Refusal kConsumerProperties[] = {
    {"group.id", "use kafka.group_id"},
    {"auto.offset.reset", "use kafka.auto_offset_reset"},
    {"enable.auto.commit", "sluice commits offsets itself, after the sink has flushed"},
    {"enable.auto.offset.store", "sluice commits offsets itself, after the sink has flushed"},
    {"fetch.max.bytes", "use kafka.fetch.max_bytes"},
    {"max.partition.fetch.bytes", "use kafka.fetch.max_partition_bytes"},
    {"queued.max.messages.kbytes", "the read-ahead is bounded by kafka.fetch (prefetch)"},
    {"queued.min.messages", "the read-ahead is bounded by kafka.fetch (prefetch)"},
};

const Refusal* FindRefusal(std::span<const Refusal> list, std::string_view key) {
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

constexpr EnumName<AutoOffsetReset> kOffsetResets[] = {
    {"earliest", AutoOffsetReset::kEarliest}, {"latest", AutoOffsetReset::kLatest}};
constexpr EnumName<SecurityProtocol> kProtocols[] = {
    {"PLAINTEXT", SecurityProtocol::kPlaintext},
    {"SSL", SecurityProtocol::kSsl},
    {"SASL_PLAINTEXT", SecurityProtocol::kSaslPlaintext},
    {"SASL_SSL", SecurityProtocol::kSaslSsl}};
constexpr EnumName<HandlerType> kHandlers[] = {
    {"handlers.StructuredBatch", HandlerType::kStructuredBatch},
    {"handlers.InferredMemBatch", HandlerType::kInferredMemBatch},
    {"handlers.InferredDiskBatch", HandlerType::kInferredDiskBatch}};
constexpr EnumName<SinkType> kSinks[] = {{"console", SinkType::kConsole},
                                         {"noop", SinkType::kNoop},
                                         {"kafka", SinkType::kKafka},
                                         {"sqlcommand", SinkType::kSqlCommand},
                                         {"postgres", SinkType::kPostgres},
                                         {"iceberg", SinkType::kIceberg}};
constexpr EnumName<ErrorPolicy> kPolicies[] = {
    {"RAISE", ErrorPolicy::kRaise}, {"IGNORE", ErrorPolicy::kIgnore}, {"DLQ", ErrorPolicy::kDlq}};
constexpr EnumName<PostgresMode> kModes[] = {{"append", PostgresMode::kAppend},
                                             {"upsert", PostgresMode::kUpsert}};
constexpr EnumName<SubstitutionType> kSubstitutions[] = {{"uuid4", SubstitutionType::kUuid4}};
constexpr EnumName<WindowType> kWindowTypes[] = {{"tumbling", WindowType::kTumbling},
                                                 {"hopping", WindowType::kHopping},
                                                 {"session", WindowType::kSession}};
constexpr std::string_view kMechanisms[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI",
                                            "OAUTHBEARER"};

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

const char* KindName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Scalar: return "a scalar";
    case YAML::NodeType::Null: return "nothing";
    default: return "nothing";
  }
}

std::string Join(std::string_view path, std::string_view key) {
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
        Error(key_line, view.path, fmt::format("a key must be a plain name, got {}", KindName(key)));
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
        Error(key_line, key_path, fmt::format("sqlflow's `{}` is not supported by sluice: {}",
                                              name, r->guidance));
        continue;
      }
      std::string hint;
      for (std::string_view k : known) {
        if (EditDistance(Lower(name), k) <= 2) {
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

  std::optional<int64_t> Integer(const MapView& m, std::string_view key, int64_t min,
                                 int64_t max) {
    std::optional<std::string> s = String(m, key, false);
    if (!s) return std::nullopt;
    std::string path = Join(m.path, key);
    int line = EntryLine(*m.Find(key), m.line);
    std::string_view t = Trim(*s);
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec == std::errc::result_out_of_range) {
      Error(line, path, fmt::format("must be a whole number between {} and {}, got {}", min, max,
                                    Quote(*s)));
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
    static constexpr std::pair<std::string_view, int64_t> kUnits[] = {
        {"", 1},          {"b", 1},          {"kb", 1000},          {"kib", 1 << 10},
        {"mb", 1000000},  {"mib", 1 << 20},  {"gb", 1000000000},    {"gib", int64_t{1} << 30},
        {"tb", 1000000000000}, {"tib", int64_t{1} << 40}};
    std::string unit = Lower(Trim(t.substr(digits)));
    const auto* u = std::find_if(std::begin(kUnits), std::end(kUnits),
                                 [&](const auto& p) { return p.first == unit; });
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + digits, n);
    if (digits == 0 || ec != std::errc() || u == std::end(kUnits)) {
      Error(line, path,
            fmt::format("must be a size such as 512MiB or 2GB, got {}", Quote(*s)));
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
    std::string unit = Lower(Trim(t.substr(digits)));
    const auto* u = std::find_if(std::begin(kUnits), std::end(kUnits),
                                 [&](const auto& p) { return p.first == unit; });
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + digits, n);
    if (digits == 0 || ec != std::errc() || u == std::end(kUnits)) {
      Error(line, path, fmt::format("must be a duration such as 500ms, 30s, 5m, 1h or 1d, got {}{}",
                                    Quote(*s), digits == t.size() && digits > 0 ? " (give a unit)" : ""));
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
      if (case_insensitive ? Lower(e.name) == Lower(value) : e.name == value) return e.value;
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
};

void Walker::Connection(const MapView& m, KafkaConnectionConfig* out, bool consumer) {
  if (auto v = StringList(m, "brokers", true, "[localhost:9092]")) {
    out->brokers = std::move(*v);
    for (const std::string& b : out->brokers) {
      if (std::any_of(b.begin(), b.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); })) {
        Error(EntryLine(*m.Find("brokers"), m.line), Join(m.path, "brokers"),
              fmt::format("{} is not host:port (it holds a space)", Quote(b)));
      }
    }
  }
  if (m.Has("security_protocol")) {
    out->security_protocol = Enum(m, "security_protocol", false, kProtocols, true);
  }
  if (const Entry* e = m.Find("ssl")) {
    MapView ssl = OpenMap(e->value, Join(m.path, "ssl"), EntryLine(*e, m.line),
                          {"ca_location", "certificate_location", "key_location", "key_password",
                           "endpoint_identification_algorithm"});
    if (ssl.present) {
      KafkaSslConfig s;
      s.ca_location = String(ssl, "ca_location", false).value_or("");
      s.certificate_location = String(ssl, "certificate_location", false).value_or("");
      s.key_location = String(ssl, "key_location", false).value_or("");
      s.key_password = String(ssl, "key_password", false).value_or("");
      if (auto alg = String(ssl, "endpoint_identification_algorithm", false)) {
        std::string a = Lower(Trim(*alg));
        if (a != "https" && a != "none") {
          Error(EntryLine(*ssl.Find("endpoint_identification_algorithm"), ssl.line),
                Join(ssl.path, "endpoint_identification_algorithm"),
                fmt::format("must be https or none; got {}", Quote(*alg)));
        }
        s.endpoint_identification_algorithm = a;
      }
      out->ssl = std::move(s);
    }
  }
  if (const Entry* e = m.Find("sasl")) {
    MapView sasl = OpenMap(e->value, Join(m.path, "sasl"), EntryLine(*e, m.line),
                           {"mechanism", "username", "password"});
    if (sasl.present) {
      KafkaSaslConfig s;
      if (auto mech = String(sasl, "mechanism", true)) {
        s.mechanism = Upper(Trim(*mech));
        if (std::find(std::begin(kMechanisms), std::end(kMechanisms), s.mechanism) ==
            std::end(kMechanisms)) {
          Error(EntryLine(*sasl.Find("mechanism"), sasl.line), Join(sasl.path, "mechanism"),
                fmt::format("must be one of {}; got {}", fmt::join(kMechanisms, ", "),
                            Quote(*mech)));
        }
      }
      bool needs_password = s.mechanism == "PLAIN" || s.mechanism.starts_with("SCRAM");
      s.username = String(sasl, "username", needs_password).value_or("");
      s.password = String(sasl, "password", needs_password).value_or("");
      out->sasl = std::move(s);
      if (out->security_protocol != SecurityProtocol::kSaslPlaintext &&
          out->security_protocol != SecurityProtocol::kSaslSsl) {
        Warn(sasl.line, sasl.path,
             "is set but security_protocol is not SASL_PLAINTEXT or SASL_SSL, so librdkafka "
             "will not authenticate");
      }
    }
  }
  if (const Entry* e = m.Find("properties")) Properties(*e, Join(m.path, "properties"), m.line, consumer, &out->properties);
}

void Walker::Properties(const Entry& e, const std::string& path, int line, bool consumer,
                        std::map<std::string, std::string>* out) {
  line = EntryLine(e, line);
  if (e.value.IsNull()) return;
  if (!e.value.IsMap()) {
    Error(line, path,
          fmt::format("must be a map of librdkafka properties, e.g. {{fetch.wait.max.ms: 50}}; "
                      "got {}",
                      KindName(e.value)));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!Charge(1)) return;
    YAML::Node key = it->first;  // copies: the iterator hands out temporaries
    YAML::Node value = it->second;
    int key_line = LineOf(key, line);
    if (!key.IsScalar() || Trim(key.Scalar()).empty()) {
      Error(key_line, path, "a property name must be a plain, non-empty name");
      continue;
    }
    const std::string& name = key.Scalar();
    std::string key_path = fmt::format("{}.{}", path, name);
    const Refusal* r = FindRefusal(kConnectionProperties, name);
    if (r == nullptr && consumer) r = FindRefusal(kConsumerProperties, name);
    if (r != nullptr) {
      Error(key_line, key_path, fmt::format("cannot be set as a property: {}", r->guidance));
      continue;
    }
    if (!value.IsScalar()) {
      Error(LineOf(value, key_line), key_path,
            fmt::format("must be a single value, got {}", KindName(value)));
      continue;
    }
    if (!Charge(name.size() + value.Scalar().size())) return;
    if (!out->emplace(name, value.Scalar()).second) {
      Error(key_line, key_path, "is set twice");
    }
  }
}

void Walker::Source(const MapView& pipeline, KafkaSourceConfig* out) {
  const Entry* e = pipeline.Find("source");
  if (e == nullptr) {
    Error(pipeline.line, "pipeline.source", "is required but missing");
    return;
  }
  MapView source = OpenMap(e->value, "pipeline.source", EntryLine(*e, pipeline.line),
                           {"type", "kafka"}, kSourceRefused);
  if (!source.present) {
    if (e->value.IsNull()) Error(source.line, "pipeline.source", "is empty; it is required");
    return;
  }
  static constexpr EnumName<int> kTypes[] = {{"kafka", 0}};
  Enum(source, "type", true, kTypes, false, kSourceRefused);
  const Entry* k = source.Find("kafka");
  if (k == nullptr) {
    Error(source.line, "pipeline.source.kafka", "is required but missing");
    return;
  }
  MapView kafka = OpenMap(k->value, "pipeline.source.kafka", EntryLine(*k, source.line),
                          {"brokers", "group_id", "auto_offset_reset", "topics",
                           "security_protocol", "ssl", "sasl", "fetch", "properties"});
  if (!kafka.present || k->value.IsNull()) {
    if (k->value.IsNull()) Error(kafka.line, kafka.path, "is empty; it is required");
    return;
  }
  Connection(kafka, out, true);
  out->group_id = String(kafka, "group_id", true).value_or("");
  if (auto v = Enum(kafka, "auto_offset_reset", true, kOffsetResets, true)) {
    out->auto_offset_reset = *v;
  }
  if (auto v = StringList(kafka, "topics", true, "[events]")) out->topics = std::move(*v);
  if (const Entry* f = kafka.Find("fetch")) {
    MapView fetch = OpenMap(f->value, Join(kafka.path, "fetch"), EntryLine(*f, kafka.line),
                            {"max_bytes", "max_partition_bytes", "prefetch"});
    constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
    if (auto v = Integer(fetch, "max_bytes", 1, kInt32Max)) out->fetch.max_bytes = *v;
    if (auto v = Integer(fetch, "max_partition_bytes", 1, kInt32Max)) {
      out->fetch.max_partition_bytes = *v;
    }
    if (auto v = Integer(fetch, "prefetch", 1, 1024)) out->fetch.prefetch = *v;
    if (out->fetch.max_partition_bytes > out->fetch.max_bytes) {
      Error(fetch.line, Join(fetch.path, "max_partition_bytes"),
            fmt::format("({}) must not exceed fetch.max_bytes ({})",
                        out->fetch.max_partition_bytes, out->fetch.max_bytes));
    }
    // librdkafka refuses fetch.max.bytes below message.max.bytes (default 1000000).
    int64_t message_max = 1000000;
    if (auto it = out->properties.find("message.max.bytes"); it != out->properties.end()) {
      message_max = std::strtoll(it->second.c_str(), nullptr, 10);
    }
    if (out->fetch.max_bytes < message_max) {
      Error(fetch.line, Join(fetch.path, "max_bytes"),
            fmt::format("({}) must be at least the consumer's message.max.bytes ({}; lower it "
                        "under kafka.properties to fetch less at a time)",
                        out->fetch.max_bytes, message_max));
    }
  }
}


MapView Walker::Section(const MapView& parent, std::string_view key,
                        std::initializer_list<std::string_view> known, std::string_view why) {
  const Entry* e = parent.Find(key);
  std::string path = Join(parent.path, key);
  if (e == nullptr) {
    Error(parent.line, path, fmt::format("is required{} but missing", why));
    return MapView{};
  }
  MapView m = OpenMap(e->value, path, EntryLine(*e, parent.line), known);
  if (e->value.IsNull()) {
    Error(m.line, path, fmt::format("is empty; it is required{}", why));
    m.present = false;
  }
  return m;
}

void Walker::Handler(const MapView& pipeline, HandlerConfig* out) {
  MapView h = Section(pipeline, "handler", {"type", "sql", "table", "sql_results_cache_dir"});
  if (!h.present) return;
  std::optional<HandlerType> type = Enum(h, "type", true, kHandlers, false);
  if (type) out->type = *type;
  if (auto sql = String(h, "sql", true)) {
    out->sql = std::move(*sql);
    out->sql_origin = Where(EntryLine(*h.Find("sql"), h.line));
  }
  out->table = String(h, "table", false).value_or("");
  out->sql_results_cache_dir = String(h, "sql_results_cache_dir", false).value_or("");
  if (type == HandlerType::kStructuredBatch && Trim(out->table).empty()) {
    Error(h.line, "pipeline.handler.table",
          "is required for handlers.StructuredBatch: name the table, declared in `commands`, "
          "that messages are parsed into");
  }
}

bool Walker::Sink(const YAML::Node& node, const std::string& path, int line, SinkConfig* out) {
  static constexpr std::string_view kBlocks[] = {"kafka", "console", "sqlcommand", "postgres", "iceberg"};
  MapView s = OpenMap(node, path, line, {"type", "kafka", "console", "sqlcommand", "postgres", "iceberg"},
                      kSinkRefused);
  if (!s.present || node.IsNull()) {
    if (node.IsNull()) Error(s.line, path, "is empty; a sink needs at least `type`");
    return false;
  }
  std::optional<SinkType> type = Enum(s, "type", true, kSinks, false, kSinkRefused);
  if (!type) return false;
  out->type = *type;
  size_t errors_before = errors_.size();
  for (std::string_view block : kBlocks) {
    if (s.Has(block) && block != NameOf(kSinks, *type)) {
      Warn(LineOf(s.Find(block)->key, s.line), Join(path, block),
           fmt::format("is ignored: the sink's type is {}", NameOf(kSinks, *type)));
    }
  }
  std::string why = fmt::format(" for type {}", NameOf(kSinks, *type));
  switch (*type) {
    case SinkType::kConsole:
      if (const Entry* e = s.Find("console")) OpenMap(e->value, Join(path, "console"), s.line, {});
      break;
    case SinkType::kNoop:
      break;
    case SinkType::kKafka: {
      MapView k = Section(s, "kafka",
                          {"brokers", "topic", "security_protocol", "ssl", "sasl", "properties"},
                          why);
      if (!k.present) break;
      Connection(k, &out->kafka, false);
      out->kafka.topic = String(k, "topic", true).value_or("");
      break;
    }
    case SinkType::kSqlCommand: {
      MapView c = Section(s, "sqlcommand", {"sql", "substitutions"}, why);
      if (!c.present) break;
      if (auto sql = String(c, "sql", true)) {
        out->sqlcommand.sql = std::move(*sql);
        out->sqlcommand.sql_origin = Where(EntryLine(*c.Find("sql"), c.line));
      }
      const Entry* subs = c.Find("substitutions");
      if (subs == nullptr || subs->value.IsNull()) break;
      std::string subs_path = Join(c.path, "substitutions");
      int subs_line = EntryLine(*subs, c.line);
      if (!subs->value.IsSequence()) {
        Error(subs_line, subs_path,
              fmt::format("must be a list of {{var, type}}, got {}", KindName(subs->value)));
        break;
      }
      size_t index = 0;
      for (const YAML::Node& item : subs->value) {
        std::string item_path = fmt::format("{}[{}]", subs_path, index++);
        MapView m = OpenMap(item, item_path, subs_line, {"var", "type"});
        if (!m.present || item.IsNull()) {
          if (item.IsNull()) Error(m.line, item_path, "must be a map {var, type}, got nothing");
          continue;
        }
        SqlSubstitution sub;
        std::optional<std::string> var = String(m, "var", true);
        std::optional<SubstitutionType> t = Enum(m, "type", true, kSubstitutions, false);
        if (!var || !t) continue;
        sub.var = std::move(*var);
        sub.type = *t;
        if (!out->sqlcommand.sql.empty() &&
            out->sqlcommand.sql.find(sub.var) == std::string::npos) {
          Warn(m.line, Join(item_path, "var"),
               fmt::format("{} does not appear in the sink's sql", Quote(sub.var)));
        }
        out->sqlcommand.substitutions.push_back(std::move(sub));
      }
      break;
    }
    case SinkType::kPostgres: {
      MapView p = Section(s, "postgres", {"dsn", "table", "mode", "key"}, why);
      if (!p.present) break;
      out->postgres.dsn = String(p, "dsn", true).value_or("");
      if (auto table = String(p, "table", true)) {
        std::string_view t = Trim(*table);
        size_t dots = std::count(t.begin(), t.end(), '.');
        bool empty_part = t.front() == '.' || t.back() == '.' || t.find("..") != t.npos;
        if (dots > 1 || empty_part || t.find('"') != t.npos) {
          Error(EntryLine(*p.Find("table"), p.line), Join(p.path, "table"),
                fmt::format("{} is not a table name; write table or schema.table, unquoted",
                            Quote(*table)));
        }
        out->postgres.table = std::string(t);
      }
      std::optional<PostgresMode> mode = Enum(p, "mode", true, kModes, true);
      if (mode) out->postgres.mode = *mode;
      if (auto key = StringList(p, "key", false, "[id]")) out->postgres.key = std::move(*key);
      if (mode == PostgresMode::kUpsert && out->postgres.key.empty() &&
          !(p.Has("key") && !p.Find("key")->value.IsNull() && !p.Find("key")->value.IsSequence())) {
        Error(p.line, Join(p.path, "key"),
              "is required for mode upsert: list the columns a row is identified by, e.g. [id]");
      }
      if (mode == PostgresMode::kAppend && !out->postgres.key.empty()) {
        Error(EntryLine(*p.Find("key"), p.line), Join(p.path, "key"),
              "is refused for mode append (every row is inserted); remove it or use mode: "
              "upsert");
      }
      break;
    }
    case SinkType::kIceberg: {
      MapView p = Section(s, "iceberg",
                          {"catalog_name", "table_name", "warehouse", "commit_interval_seconds",
                           "target_file_size_bytes", "schema_evolution", "partition_by"},
                          why);
      if (!p.present) break;
      IcebergSinkConfig& ice = out->iceberg;
      ice.catalog_name = String(p, "catalog_name", true).value_or("");
      if (auto name = String(p, "table_name", true)) {
        std::vector<std::string> parts;
        std::string_view t = Trim(*name);
        size_t start = 0;
        bool bad = t.empty();
        while (!bad) {
          size_t dot = t.find('.', start);
          std::string_view part = t.substr(start, dot == t.npos ? t.npos : dot - start);
          bad = part.empty() || part.find_first_of("/\\\"\x1f") != part.npos || part == ".." ;
          parts.emplace_back(part);
          if (dot == t.npos) break;
          start = dot + 1;
        }
        if (bad || parts.size() < 2) {
          Error(EntryLine(*p.Find("table_name"), p.line), Join(p.path, "table_name"),
                fmt::format("{} is not a table name; write namespace.table (namespaces may nest: "
                            "a.b.table), without quotes, slashes or empty parts",
                            Quote(*name)));
        } else {
          ice.table = parts.back();
          parts.pop_back();
          ice.namespace_ = std::move(parts);
        }
      }
      ice.warehouse = String(p, "warehouse", false).value_or("");
      if (auto v = Integer(p, "commit_interval_seconds", 1, 86400)) ice.commit_interval_seconds = *v;
      if (auto v = Integer(p, "target_file_size_bytes", int64_t{1} << 20, int64_t{16} << 30)) {
        ice.target_file_size_bytes = *v;
      }
      if (auto v = String(p, "schema_evolution", false)) {
        std::string_view t = Trim(*v);
        if (t == "true") {
          ice.schema_evolution = true;
        } else if (t != "false") {
          Error(EntryLine(*p.Find("schema_evolution"), p.line), Join(p.path, "schema_evolution"),
                fmt::format("must be true or false, got {}", Quote(*v)));
        }
      }
      if (auto parts = StringList(p, "partition_by", false, "[day(ts), 'bucket(16, id)']")) {
        // A flow list splits `bucket(16, id)` at its comma: join the pieces back until the
        // parentheses balance.
        std::string pending;
        for (std::string& part : *parts) {
          pending = pending.empty() ? part : pending + ", " + part;
          if (std::count(pending.begin(), pending.end(), '(') > std::count(pending.begin(), pending.end(), ')')) {
            continue;
          }
          ice.partition_by.push_back(std::move(pending));
          pending.clear();
        }
        if (!pending.empty()) {
          Error(EntryLine(*p.Find("partition_by"), p.line), Join(p.path, "partition_by"),
                fmt::format("{} has an unclosed parenthesis", Quote(pending)));
        }
      }
      break;
    }
  }
  return errors_.size() == errors_before;
}

void Walker::OnError(const MapView& pipeline, OnErrorConfig* out) {
  const Entry* e = pipeline.Find("on_error");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, "pipeline.on_error", EntryLine(*e, pipeline.line),
                      {"policy", "dlq"});
  if (!m.present) return;
  std::optional<ErrorPolicy> policy = Enum(m, "policy", false, kPolicies, true);
  if (policy) out->policy = *policy;
  if (const Entry* d = m.Find("dlq")) {
    SinkConfig dlq;
    if (Sink(d->value, "pipeline.on_error.dlq", EntryLine(*d, m.line), &dlq)) {
      if (dlq.type == SinkType::kIceberg) {
        Error(EntryLine(*d, m.line), "pipeline.on_error.dlq",
              "type iceberg is not a dead-letter sink; use a kafka topic (dead letters are few and "
              "each one matters alone)");
      } else {
        out->dlq = std::move(dlq);
      }
    }
    if (policy && *policy != ErrorPolicy::kDlq) {
      Warn(LineOf(d->key, m.line), "pipeline.on_error.dlq",
           fmt::format("is set but policy is {}, so it receives nothing", Name(*policy)));
    }
  } else if (policy == ErrorPolicy::kDlq) {
    Error(m.line, "pipeline.on_error.dlq",
          "is required when policy is DLQ: add the sink that receives each bad message, e.g. "
          "{type: kafka, kafka: {brokers: [localhost:9092], topic: dlq}}");
  }
}

void Walker::DuckDb(const MapView& pipeline, DuckDbConfig* out) {
  const Entry* e = pipeline.Find("duckdb");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, "pipeline.duckdb", EntryLine(*e, pipeline.line),
                      {"memory_limit", "threads"});
  if (!m.present) return;
  if (auto v = Bytes(m, "memory_limit", int64_t{16} << 20, int64_t{1} << 50)) {
    out->memory_limit_bytes = *v;
  }
  if (auto v = Integer(m, "threads", 1, 256)) out->threads = *v;
}

void Walker::Window(const MapView& pipeline, std::optional<WindowConfig>* out) {
  const Entry* e = pipeline.Find("window");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, "pipeline.window", EntryLine(*e, pipeline.line),
                      {"type", "time_column", "size", "slide", "gap", "key", "grace",
                       "allowed_lateness", "idle_close", "max_future", "emit_sql", "sink"});
  if (e->value.IsNull()) {
    Error(m.line, m.path, "is empty; it needs type, time_column, size (or gap) and sink");
    return;
  }
  if (!m.present) return;
  WindowConfig w;
  constexpr int64_t kDay = 86'400'000'000;
  std::optional<WindowType> type = Enum(m, "type", true, kWindowTypes, true);
  if (type) w.type = *type;
  w.time_column = String(m, "time_column", true).value_or("");
  auto only = [&](std::string_view key, std::string_view kind) {
    if (m.Find(key) != nullptr) {
      Error(EntryLine(*m.Find(key), m.line), Join(m.path, key),
            fmt::format("applies to {} windows only; this one is {}", kind, Name(w.type)));
    }
  };
  // A required duration written with no value (`size:`) is as missing as an absent one;
  // Duration() passes over it silently, as it does for optional keys.
  auto need = [&](std::string_view key, std::string_view what) {
    const Entry* k = m.Find(key);
    if (k == nullptr) {
      Error(m.line, Join(m.path, key), fmt::format("is required for a {} window: {}", Name(w.type), what));
    } else if (k->value.IsNull()) {
      Error(EntryLine(*k, m.line), Join(m.path, key),
            fmt::format("is empty; it is required for a {} window: {}", Name(w.type), what));
    }
  };
  if (type && *type != WindowType::kSession) {
    need("size", "how long each window is, e.g. 1m");
    if (auto v = Duration(m, "size", 1000, 366 * kDay)) w.size_us = *v;
    only("gap", "session");
    only("key", "session");
  }
  if (type && *type == WindowType::kHopping) {
    need("slide", "how far apart windows start, e.g. 1m for 5m windows");
    if (auto v = Duration(m, "slide", 1000, 366 * kDay)) w.slide_us = *v;
    if (w.size_us > 0 && w.slide_us > 0) {
      int line = EntryLine(*m.Find("slide"), m.line);
      if (w.slide_us > w.size_us) {
        Error(line, Join(m.path, "slide"), "must not be longer than size");
      } else if (w.size_us % w.slide_us != 0) {
        Error(line, Join(m.path, "slide"), "must divide size (5m windows sliding by 1m, not by 2m)");
      } else if (w.size_us / w.slide_us > 1000) {
        Error(line, Join(m.path, "slide"), "makes more than 1000 windows per row (size / slide); slide further");
      }
    }
  } else if (type) {
    only("slide", "hopping");
  }
  if (type && *type == WindowType::kSession) {
    need("gap", "the silence that ends a session, e.g. 30s");
    if (auto v = Duration(m, "gap", 1000, 366 * kDay)) w.gap_us = *v;
    only("size", "tumbling and hopping");
    if (auto v = StringList(m, "key", false, "[user_id]")) w.key = std::move(*v);
  }
  if (auto v = Duration(m, "grace", 0, 366 * kDay)) w.grace_us = *v;
  if (auto v = Duration(m, "allowed_lateness", 0, 366 * kDay)) w.allowed_lateness_us = *v;
  if (auto v = Duration(m, "idle_close", 1000, 366 * kDay)) w.idle_close_us = *v;
  if (auto v = Duration(m, "max_future", 0, 3660 * kDay)) w.max_future_us = *v;
  if (auto sql = String(m, "emit_sql", false); sql && Trim(*sql).empty()) {
    Error(EntryLine(*m.Find("emit_sql"), m.line), Join(m.path, "emit_sql"),
          "is empty; leave it out to emit SELECT * FROM closed");
  } else if (sql) {
    w.emit_sql = std::move(*sql);
    w.emit_origin = Where(EntryLine(*m.Find("emit_sql"), m.line));
  } else {
    w.emit_sql = "SELECT * FROM closed";
    w.emit_origin = Where(m.line) + " (pipeline.window.emit_sql's default)";
  }
  if (const Entry* s = m.Find("sink")) {
    Sink(s->value, Join(m.path, "sink"), EntryLine(*s, m.line), &w.sink);
    if (w.sink.type == SinkType::kIceberg) {
      Error(EntryLine(*s, m.line), Join(m.path, "sink"),
            "type iceberg takes a pipeline's results (pipeline.sink) only; send the windows to a "
            "kafka topic and append that topic to the table with a second pipeline");
    }
  } else {
    Error(m.line, Join(m.path, "sink"), "is required but missing: where closed windows go");
  }
  *out = std::move(w);
}

void Walker::State(const MapView& pipeline, std::optional<StateConfig>* out) {
  const Entry* e = pipeline.Find("state");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, "pipeline.state", EntryLine(*e, pipeline.line), {"path"});
  if (e->value.IsNull()) {
    Error(m.line, m.path, "is empty; it needs path (the state's database file)");
    return;
  }
  if (!m.present) return;
  StateConfig st;
  st.path = String(m, "path", true).value_or("");
  *out = std::move(st);
}

void Walker::Commands(const MapView& top, std::vector<SqlCommand>* out) {
  const Entry* e = top.Find("commands");
  if (e == nullptr || e->value.IsNull()) return;
  int line = EntryLine(*e, top.line);
  if (!e->value.IsSequence()) {
    Error(line, "commands", fmt::format("must be a list of {{name, sql}}, got {}",
                                        KindName(e->value)));
    return;
  }
  size_t index = 0;
  for (const YAML::Node& item : e->value) {
    std::string path = fmt::format("commands[{}]", index++);
    MapView c = OpenMap(item, path, line, {"name", "sql"});
    if (!c.present || item.IsNull()) {
      if (item.IsNull()) Error(c.line, path, "must be a map {name, sql}, got nothing");
      continue;
    }
    SqlCommand command;
    command.name = String(c, "name", true).value_or("");
    if (auto sql = String(c, "sql", true)) {
      command.sql = std::move(*sql);
      command.origin = Where(EntryLine(*c.Find("sql"), c.line));
    }
    out->push_back(std::move(command));
  }
}

void Walker::Tables(const MapView& top, std::vector<TableConfig>* out) {
  const Entry* e = top.Find("tables");
  if (e == nullptr || e->value.IsNull()) return;
  MapView tables = OpenMap(e->value, "tables", EntryLine(*e, top.line), {"sql"});
  if (!tables.present) return;
  const Entry* list = tables.Find("sql");
  if (list == nullptr || list->value.IsNull()) return;
  int line = EntryLine(*list, tables.line);
  if (!list->value.IsSequence()) {
    Error(line, "tables.sql", fmt::format("must be a list of {{name, sql, manager}}, got {}",
                                          KindName(list->value)));
    return;
  }
  static constexpr Refusal kTableRefused[] = {
      {"window", "sqlflow's later form is `manager: {tumbling_window: {collect_closed_windows_sql, "
                 "delete_closed_windows_sql, poll_interval_seconds}, sink: {...}}`; or use "
                 "sluice's pipeline.window"},
  };
  size_t index = 0;
  for (const YAML::Node& item : list->value) {
    std::string path = fmt::format("tables.sql[{}]", index++);
    MapView t = OpenMap(item, path, line, {"name", "sql", "manager"}, kTableRefused);
    if (!t.present || item.IsNull()) {
      if (item.IsNull()) Error(t.line, path, "must be a map {name, sql, manager}, got nothing");
      continue;
    }
    TableConfig table;
    table.name = String(t, "name", true).value_or("");
    if (auto sql = String(t, "sql", true)) {
      table.sql = std::move(*sql);
      table.origin = Where(EntryLine(*t.Find("sql"), t.line));
    }
    if (const Entry* me = t.Find("manager")) {
      MapView m = OpenMap(me->value, Join(path, "manager"), EntryLine(*me, t.line),
                          {"tumbling_window", "sink"});
      if (me->value.IsNull()) {
        Error(m.line, m.path, "is empty; it needs tumbling_window and sink");
      } else if (m.present) {
        MapView w = Section(m, "tumbling_window",
                            {"collect_closed_windows_sql", "delete_closed_windows_sql",
                             "poll_interval_seconds"},
                            " (the only manager type)");
        if (w.present) {
          TumblingWindowConfig tw;
          if (auto sql = String(w, "collect_closed_windows_sql", true)) {
            tw.collect_sql = std::move(*sql);
            tw.collect_origin = Where(EntryLine(*w.Find("collect_closed_windows_sql"), w.line));
          }
          if (auto sql = String(w, "delete_closed_windows_sql", true)) {
            tw.delete_sql = std::move(*sql);
            tw.delete_origin = Where(EntryLine(*w.Find("delete_closed_windows_sql"), w.line));
          }
          if (auto v = Integer(w, "poll_interval_seconds", 1, 86'400)) tw.poll_interval_seconds = *v;
          table.tumbling_window = std::move(tw);
        }
        if (const Entry* s = m.Find("sink")) {
          Sink(s->value, Join(m.path, "sink"), EntryLine(*s, m.line), &table.sink);
          if (table.sink.type == SinkType::kIceberg) {
            Error(EntryLine(*s, m.line), Join(m.path, "sink"),
                  "type iceberg takes a pipeline's results (pipeline.sink) only; send the windows to a "
                  "kafka topic and append that topic to the table with a second pipeline");
          }
        } else {
          Error(m.line, Join(m.path, "sink"), "is required but missing: where closed windows go");
        }
      }
    }
    out->push_back(std::move(table));
  }
}

PipelineConfig Walker::Walk(const YAML::Node& top) {
  PipelineConfig config;
  config.origin = std::string(origin_);
  MapView root = OpenMap(top, "", 0, {"pipeline", "commands", "tables"}, kTopRefused);
  Commands(root, &config.commands);
  Tables(root, &config.tables);
  const Entry* p = root.Find("pipeline");
  if (p == nullptr) {
    Error(root.line, "pipeline",
          "is required but missing: a pipeline file needs a `pipeline` section with source, "
          "handler and sink");
  } else {
    MapView pl = OpenMap(p->value, "pipeline", EntryLine(*p, root.line),
                         {"name", "description", "batch_size", "flush_interval_seconds", "source",
                          "handler", "sink", "on_error", "duckdb", "window", "state"},
                         kPipelineRefused);
    if (p->value.IsNull()) {
      Error(pl.line, "pipeline", "is empty; it needs source, handler and sink");
    } else if (pl.present) {
      config.name = String(pl, "name", false).value_or("");
      config.description = String(pl, "description", false).value_or("");
      if (auto v = Integer(pl, "batch_size", 1, 1'000'000)) config.batch_size = *v;
      if (auto v = Integer(pl, "flush_interval_seconds", 1, 86'400)) {
        config.flush_interval_seconds = *v;
      }
      Source(pl, &config.source);
      Handler(pl, &config.handler);
      Window(pl, &config.window);
      if (const Entry* s = pl.Find("sink")) {
        if (config.window) {
          Error(EntryLine(*s, pl.line), "pipeline.sink",
                "is not used with pipeline.window: the handler's rows go into the window, and "
                "closed windows go to pipeline.window.sink; remove one of them");
        } else {
          Sink(s->value, "pipeline.sink", EntryLine(*s, pl.line), &config.sink);
        }
      } else if (pl.Find("window") == nullptr) {
        Error(pl.line, "pipeline.sink", "is required but missing");
      }
      OnError(pl, &config.on_error);
      DuckDb(pl, &config.duckdb);
      State(pl, &config.state);
    }
  }
  if (config.handler.type == HandlerType::kStructuredBatch && !config.handler.table.empty()) {
    std::string table = Lower(config.handler.table);
    bool declared = std::any_of(config.commands.begin(), config.commands.end(),
                                [&](const SqlCommand& c) {
                                  return Lower(c.sql).find(table) != std::string::npos;
                                }) ||
                    std::any_of(config.tables.begin(), config.tables.end(), [&](const TableConfig& t) {
                      return Lower(t.sql).find(table) != std::string::npos;
                    });
    if (!declared) {
      Warn(0, "pipeline.handler.table",
           fmt::format("{} is not mentioned in any of `commands`; StructuredBatch parses "
                       "messages into a table the commands create",
                       Quote(config.handler.table)));
    }
  }
  config.warnings = std::move(warnings_);
  return config;
}

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
      return InvalidArgumentError("{}:{}: holds a NUL byte; a pipeline file is YAML text",
                                  origin, line);
    }
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len != 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    }
    if (!ok) {
      return InvalidArgumentError("{}:{}: is not UTF-8 text (byte 0x{:02x} at offset {})",
                                  origin, line, c, i);
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
      return InvalidArgumentError("{}:{}: a second YAML document starts here; a pipeline file "
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
    return InvalidArgumentError("{}: the file is {} bytes; pipeline files are limited to {}",
                                path, st.st_size, kMaxPipelineFileBytes);
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
    case SinkType::kConsole: return "console";
    case SinkType::kNoop: return "noop";
    case SinkType::kKafka:
      return fmt::format("kafka topic {} on {}", sink.kafka.topic,
                         fmt::join(sink.kafka.brokers, ","));
    case SinkType::kSqlCommand: {
      size_t lines = std::count(sink.sqlcommand.sql.begin(), sink.sqlcommand.sql.end(), '\n');
      return fmt::format("sqlcommand ({} line{} of SQL over sqlflow_sink_batch{})",
                         std::max<size_t>(lines, 1), lines > 1 ? "s" : "",
                         sink.sqlcommand.substitutions.empty()
                             ? ""
                             : fmt::format(", {} substitution(s)",
                                           sink.sqlcommand.substitutions.size()));
    }
    case SinkType::kIceberg:
      return fmt::format("iceberg table {}.{} (catalog {}), commit every {} s", fmt::join(sink.iceberg.namespace_, "."),
                         sink.iceberg.table, sink.iceberg.catalog_name, sink.iceberg.commit_interval_seconds);
    case SinkType::kPostgres:
      return fmt::format("postgres table {}, {}{}", sink.postgres.table,
                         Name(sink.postgres.mode),
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
  if (c.source.sasl) out += fmt::format(" ({} as {})", c.source.sasl->mechanism,
                                        c.source.sasl->username);
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
    out += fmt::format("; grace {}, allowed lateness {}, idle after {}, future cap {}", d(w.grace_us),
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
  out += fmt::format("\n  batches:  {} message{} or {} s, whichever comes first",
                     c.batch_size, c.batch_size == 1 ? "" : "s", c.flush_interval_seconds);
  out += fmt::format("\n  duckdb:   memory_limit {}, {} thread{}",
                     Size(c.duckdb.memory_limit_bytes), c.duckdb.threads,
                     c.duckdb.threads == 1 ? "" : "s");
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
  if (kafka.security_protocol) p["security.protocol"] = Lower(Name(*kafka.security_protocol));
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

}  // namespace sluice::pipeline
