#include "base/config.h"

#include <fcntl.h>
#include <fmt/ranges.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <utility>

#include "base/bytes.h"
#include "base/strings.h"

namespace sluice {
namespace {

// "a.b.c" is a key; "", ".a", "a..b" and "a." are not.
bool ValidKey(std::string_view key) {
  return !key.empty() && key.front() != '.' && key.back() != '.' &&
         key.find("..") == std::string_view::npos;
}

struct Unit {
  std::string_view name;  // lower case
  int64_t scale;
};

constexpr Unit kByteUnits[] = {
    {"", 1},
    {"b", 1},
    {"kb", 1'000},
    {"kib", int64_t{1} << 10},
    {"mb", 1'000'000},
    {"mib", int64_t{1} << 20},
    {"gb", 1'000'000'000},
    {"gib", int64_t{1} << 30},
    {"tb", 1'000'000'000'000},
    {"tib", int64_t{1} << 40},
};

constexpr Unit kDurationUnits[] = {
    {"", 1}, {"ms", 1}, {"s", 1'000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000},
};

// Reads "<digits>[ ]<unit>" as a non-negative count times the unit's scale. The error's
// message says what is wrong with the text, to follow "'<text>' ".
Result<int64_t> ParseScaled(std::string_view text, std::span<const Unit> units,
                            bool case_insensitive_units, std::string_view units_wanted) {
  if (text.empty()) return InvalidArgumentError("is empty");
  if (text.size() > 1 && text[0] == '-' && std::isdigit(static_cast<unsigned char>(text[1]))) {
    return InvalidArgumentError("must not be negative");
  }
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return InvalidArgumentError("is not a number");
  uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (ec == std::errc::result_out_of_range) return InvalidArgumentError("is too large");
  if (ec != std::errc() || ptr != text.data() + digits) {
    return InvalidArgumentError("is not a number");
  }
  std::string_view rest = text.substr(digits);
  if (!rest.empty() && (rest.front() == '.' || rest.front() == ',')) {
    return InvalidArgumentError("is not a whole number");
  }
  if (rest.size() > 1 && rest.front() == ' ') rest.remove_prefix(1);
  std::string unit = case_insensitive_units ? AsciiLower(rest) : std::string(rest);
  auto it = std::ranges::find(units, std::string_view(unit), &Unit::name);
  if (it == units.end()) {
    return InvalidArgumentError("has an unknown unit '{}' (want {})", rest, units_wanted);
  }
  if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / it->scale)) {
    return InvalidArgumentError("is too large");
  }
  return static_cast<int64_t>(n) * it->scale;
}

}  // namespace

// Walks a parsed YAML document into a Config's flat entries.
class ConfigParser {
 public:
  ConfigParser(std::string_view origin, Config* config) : origin_(origin), config_(config) {}

  Status Flatten(const YAML::Node& map, const std::string& prefix) {
    std::map<std::string, std::string, std::less<>> seen;  // this mapping's keys -> where
    // `*it` is a pair made on the fly: hold it for the loop body (`it->first` would dangle).
    for (const auto& pair : map) {
      const YAML::Node& key_node = pair.first;
      const YAML::Node& value = pair.second;
      std::string where = Where(key_node);
      if (!key_node.IsScalar()) {
        return InvalidArgumentError("{}: a key must be a plain name", where);
      }
      const std::string& name = key_node.Scalar();
      std::string key = prefix.empty() ? name : fmt::format("{}.{}", prefix, name);
      if (!ValidKey(name)) {
        return InvalidArgumentError("{}: '{}' is not a valid key (empty or with an empty part)",
                                    where, key);
      }
      auto [seen_it, first] = seen.try_emplace(name, where);
      if (!first) return Duplicate(key, seen_it->second, where);

      Config::Entry entry;
      entry.origin = where;
      switch (value.Type()) {
        case YAML::NodeType::Map:
          RETURN_IF_ERROR(Flatten(value, key));
          continue;
        case YAML::NodeType::Null:
        case YAML::NodeType::Undefined:
          entry.kind = Config::Kind::kNull;
          break;
        case YAML::NodeType::Scalar:
          entry.value = value.Scalar();
          break;
        case YAML::NodeType::Sequence:
          entry.kind = Config::Kind::kList;
          for (const YAML::Node& item : value) {
            if (!item.IsScalar()) {
              return InvalidArgumentError("{}: {}: every item of a list must be a plain value",
                                          Where(item), key);
            }
            entry.list.push_back(item.Scalar());
          }
          break;
      }
      auto [entry_it, inserted] = config_->entries_.try_emplace(key, std::move(entry));
      if (!inserted) return Duplicate(key, entry_it->second.origin, where);
    }
    return Status::OK();
  }

  std::string Where(const YAML::Node& node) const {
    if (node.Mark().is_null()) return std::string(origin_);
    return fmt::format("{}:{}", origin_, node.Mark().line + 1);
  }

 private:
  static Status Duplicate(std::string_view key, std::string_view first, std::string_view second) {
    return InvalidArgumentError("duplicate key '{}': set at {} and again at {}", key, first,
                                second);
  }

  std::string_view origin_;
  Config* config_;
};

Result<Config> Config::LoadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError("config file {} does not exist", path);
    return ErrnoError("open config file", path, err);
  }
  std::string text;
  char buf[16384];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError("read config file", path, err);
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return Parse(text, path);
}

Result<Config> Config::Parse(std::string_view yaml, std::string_view origin) {
  Config config;
  ConfigParser parser(origin, &config);
  // yaml-cpp reports by exception; they stop here.
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(yaml));
    for (size_t i = 1; i < docs.size(); ++i) {
      if (!docs[i].IsNull()) {
        return InvalidArgumentError("{}: a second YAML document; a config file holds one",
                                    parser.Where(docs[i]));
      }
    }
    if (docs.empty() || docs[0].IsNull()) return config;
    const YAML::Node& top = docs[0];
    if (!top.IsMap()) {
      return InvalidArgumentError("{}: the top level must be a map of settings, not {}",
                                  parser.Where(top), top.IsSequence() ? "a list" : "a value");
    }
    RETURN_IF_ERROR(parser.Flatten(top, ""));
  } catch (const YAML::ParserException& e) {
    if (e.mark.is_null()) return InvalidArgumentError("{}: bad YAML: {}", origin, e.msg);
    return InvalidArgumentError("{}:{}:{}: bad YAML: {}", origin, e.mark.line + 1,
                                e.mark.column + 1, e.msg);
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError("{}: bad YAML: {}", origin, e.what());
  }
  return config;
}

void Config::Set(std::string key, std::string value, std::string origin) {
  Entry entry;
  entry.value = std::move(value);
  entry.origin = std::move(origin);
  entries_.insert_or_assign(std::move(key), std::move(entry));
}

bool Config::Has(std::string_view key) const { return entries_.contains(key); }

std::string Config::Origin(std::string_view key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? std::string() : it->second.origin;
}

Result<const Config::Entry*> Config::FindScalar(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return static_cast<const Entry*>(nullptr);
  const Entry& entry = it->second;
  switch (entry.kind) {
    case Kind::kScalar:
      return &entry;
    case Kind::kNull:
      return InvalidArgumentError("{} (from {}) has no value", key, entry.origin);
    case Kind::kList:
      return InvalidArgumentError("{} (from {}) is a list; expected a single value", key,
                                  entry.origin);
  }
  return InvalidArgumentError("{} (from {}): unknown kind of value", key, entry.origin);
}

namespace {
// "storage.flush.ms (from sluice.yaml:3): 'abc' is not a number".
Status BadValue(std::string_view key, std::string_view origin, std::string_view value,
                std::string_view why) {
  return InvalidArgumentError("{} (from {}): '{}' {}", key, origin, value, why);
}
}  // namespace

Result<std::string> Config::GetString(std::string_view key, std::string_view default_value) const {
  ASSIGN_OR_RETURN(const Entry* entry, FindScalar(key));
  if (entry == nullptr) return std::string(default_value);
  return entry->value;
}

Result<int64_t> Config::GetInt(std::string_view key, int64_t default_value, int64_t min,
                               int64_t max) const {
  ASSIGN_OR_RETURN(const Entry* entry, FindScalar(key));
  if (entry == nullptr) return default_value;
  const std::string& v = entry->value;
  if (v.empty()) return BadValue(key, entry->origin, v, "is empty");
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec == std::errc::result_out_of_range) {
    return BadValue(key, entry->origin, v, "does not fit in a 64-bit integer");
  }
  if (ec != std::errc() || ptr != v.data() + v.size()) {
    return BadValue(key, entry->origin, v, "is not an integer");
  }
  if (n < min || n > max) {
    return BadValue(key, entry->origin, v, fmt::format("is out of range [{}, {}]", min, max));
  }
  return n;
}

Result<bool> Config::GetBool(std::string_view key, bool default_value) const {
  ASSIGN_OR_RETURN(const Entry* entry, FindScalar(key));
  if (entry == nullptr) return default_value;
  std::string v = AsciiLower(entry->value);
  if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
  if (v == "false" || v == "no" || v == "off" || v == "0") return false;
  return BadValue(key, entry->origin, entry->value,
                  entry->value.empty() ? "is empty"
                                       : "is not a boolean (want true/false, yes/no, on/off, 1/0)");
}

Result<int64_t> ParseBytes(std::string_view text) {
  return ParseScaled(text, kByteUnits, /*case_insensitive_units=*/true,
                     "B, KB, KiB, MB, MiB, GB, GiB, TB or TiB");
}

Result<int64_t> Config::GetBytes(std::string_view key, int64_t default_value) const {
  ASSIGN_OR_RETURN(const Entry* entry, FindScalar(key));
  if (entry == nullptr) return default_value;
  Result<int64_t> n = ParseScaled(entry->value, kByteUnits, /*case_insensitive_units=*/true,
                                  "B, KB, KiB, MB, MiB, GB, GiB, TB or TiB");
  if (!n.ok()) return BadValue(key, entry->origin, entry->value, n.status().message());
  return *n;
}

Result<int64_t> Config::GetDurationMs(std::string_view key, int64_t default_value) const {
  ASSIGN_OR_RETURN(const Entry* entry, FindScalar(key));
  if (entry == nullptr) return default_value;
  Result<int64_t> n = ParseScaled(entry->value, kDurationUnits, /*case_insensitive_units=*/false,
                                  "ms, s, m, h or d");
  if (!n.ok()) return BadValue(key, entry->origin, entry->value, n.status().message());
  return *n;
}

Result<std::vector<std::string>> Config::GetList(std::string_view key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::vector<std::string>();
  const Entry& entry = it->second;
  switch (entry.kind) {
    case Kind::kList:
      return entry.list;
    case Kind::kNull:
      return InvalidArgumentError("{} (from {}) has no value", key, entry.origin);
    case Kind::kScalar:
      return BadValue(key, entry.origin, entry.value, "is a single value; expected a list");
  }
  return InvalidArgumentError("{} (from {}): unknown kind of value", key, entry.origin);
}

Status Config::CheckKnown(std::span<const std::string_view> known) const {
  std::vector<std::string> unknown;
  for (const auto& kv : entries_) {
    const std::string& key = kv.first;  // not a structured binding: clang 14 cannot capture those
    const auto& entry = kv.second;
    if (std::ranges::find(known, std::string_view(key)) != known.end()) continue;
    if (entry.kind == Kind::kNull) {
      bool section = std::ranges::any_of(known, [&key](std::string_view k) {
        return k.size() > key.size() && k.starts_with(key) && k[key.size()] == '.';
      });
      if (section) continue;
    }
    unknown.push_back(fmt::format("{} ({})", key, entry.origin));
  }
  if (unknown.empty()) return Status::OK();
  return InvalidArgumentError("unknown config key{}: {}", unknown.size() == 1 ? "" : "s",
                              fmt::join(unknown, ", "));
}

std::vector<std::string> Config::ChangedKeys(const Config& a, const Config& b) {
  std::vector<std::string> out;
  auto same = [](const Entry& x, const Entry& y) {
    return x.kind == y.kind && x.value == y.value && x.list == y.list;
  };
  for (const auto& [key, entry] : a.entries_) {
    auto it = b.entries_.find(key);
    if (it == b.entries_.end() || !same(entry, it->second)) out.push_back(key);
  }
  for (const auto& [key, entry] : b.entries_) {
    if (!a.entries_.contains(key)) out.push_back(key);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace sluice
