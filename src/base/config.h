// Config: sluice's settings, read from a YAML file and overridden by command-line flags.
//
// A Config is a flat map from dotted keys ("storage.flush.ms") to scalar strings, each
// remembering where it came from ("sluice.yaml:12", "flag", "default") so that every
// error can point at the line to fix. Values are typed only when read: the typed getters
// parse, range-check and name the key, its origin and the bad value when they refuse.
//
//   ASSIGN_OR_RETURN(Config config, Config::LoadFile(path));
//   config.Set("storage.dir", flag_dir);
//   RETURN_IF_ERROR(config.CheckKnown(kKnownKeys));
//   ASSIGN_OR_RETURN(int64_t flush_ms, config.GetDurationMs("storage.flush.ms", 1000));
//
// A Config is a plain value, built once at startup and read-only after that; const
// methods may then be called from any thread.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice {

class Config {
 public:
  Config() = default;

  // Reads a YAML file. A missing file is NotFound, an unreadable one IOError, both
  // naming the path; bad YAML is InvalidArgument naming path, line and column.
  static Result<Config> LoadFile(const std::string& path);

  // Parses YAML text; `origin` (usually the file's path) prefixes every entry's origin.
  // The top level must be a map (empty text is an empty config). Nested maps flatten to
  // dotted keys, and a key written with dots names the same setting as the nested form,
  // so `storage: {flush: {ms: 1}}` and `storage: {flush.ms: 1}` both set
  // "storage.flush.ms"; a setting written twice, in either spelling, is an error naming
  // both lines. A value may be a scalar, empty (null) or a list of scalars.
  static Result<Config> Parse(std::string_view yaml, std::string_view origin);

  // Sets a scalar, replacing any value from the file (flags override the file).
  void Set(std::string key, std::string value, std::string origin = "flag");

  bool Has(std::string_view key) const;
  // Where `key` was set ("sluice.yaml:12", "flag"), or "" when it is not set.
  std::string Origin(std::string_view key) const;

  // Each getter returns `default_value` when `key` is not set. A key that is set must
  // hold one non-empty scalar of the right form (GetString alone accepts ""); anything
  // else is InvalidArgument naming the key, its origin and the value.
  Result<std::string> GetString(std::string_view key, std::string_view default_value) const;
  // A decimal integer (optional '-') within [min, max].
  Result<int64_t> GetInt(std::string_view key, int64_t default_value,
                         int64_t min = std::numeric_limits<int64_t>::min(),
                         int64_t max = std::numeric_limits<int64_t>::max()) const;
  // true/false, yes/no, on/off, 1/0 (case-insensitive).
  Result<bool> GetBool(std::string_view key, bool default_value) const;
  // A byte count: a plain integer, or one followed by B, KB, KiB, MB, MiB, GB, GiB, TB or
  // TiB (case-insensitive; KB = 1000, KiB = 1024), with an optional space before the unit.
  Result<int64_t> GetBytes(std::string_view key, int64_t default_value) const;
  // A duration in milliseconds: a plain integer (ms), or one followed by ms, s, m, h or d.
  Result<int64_t> GetDurationMs(std::string_view key, int64_t default_value) const;
  // A YAML list of scalars; empty when the key is not set. A scalar is not a list.
  Result<std::vector<std::string>> GetList(std::string_view key) const;

  // InvalidArgument listing every key not in `known`, each with its origin, so that a
  // misspelt setting cannot pass silently. Keys match exactly, with one allowance: an
  // empty section ("storage:" with every line under it commented out) is not unknown
  // when some known key lies under it.
  Status CheckKnown(std::span<const std::string_view> known) const;

  // The keys set in one of `a` and `b` only, or to another value (origins are not
  // compared), sorted: what a reload of the file changed.
  static std::vector<std::string> ChangedKeys(const Config& a, const Config& b);

 private:
  enum class Kind { kScalar, kNull, kList };
  struct Entry {
    Kind kind = Kind::kScalar;
    std::string value;              // kScalar
    std::vector<std::string> list;  // kList
    std::string origin;
  };

  // The entry for `key` if it is set and holds a scalar; nullptr if it is not set; an
  // error if it holds a list or nothing.
  Result<const Entry*> FindScalar(std::string_view key) const;

  friend class ConfigParser;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace sluice
