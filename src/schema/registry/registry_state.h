// RegistryState: what the Schema Registry knows, rebuilt from the records of its compacted
// topic `_schemas` in Confluent's layout (so a topic written by Confluent's registry or
// Redpanda's reads the same): SCHEMA records (a subject's version and the schema it names),
// CONFIG and MODE records (global or per subject), DELETE_SUBJECT and NOOP, and tombstones
// (a hard delete). Every broker applies the same records in the same order, so every
// broker answers the same (docs/design/0022-schemas.md, "Storage").
//
// Conflicts are settled here, deterministically, by log order: a SCHEMA record that gives
// an id already held by another schema, or a live version already held by another id, is
// ignored (the first writer won; the loser sees that it lost when it reads its own record
// back and tries again with a fresh id). So an id is never given to two schemas.
//
// Not thread-safe: the Registry holds it under its lock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::schema::registry {

enum class SchemaType : uint8_t { kAvro, kProtobuf, kJson };
// "AVRO", "PROTOBUF", "JSON": the API's schemaType.
std::string_view SchemaTypeName(SchemaType t);
std::optional<SchemaType> ParseSchemaType(std::string_view name);

enum class Compatibility : uint8_t {
  kNone,
  kBackward,
  kBackwardTransitive,
  kForward,
  kForwardTransitive,
  kFull,
  kFullTransitive,
};
std::string_view CompatibilityName(Compatibility c);
std::optional<Compatibility> ParseCompatibility(std::string_view name);

enum class Mode : uint8_t { kReadWrite, kReadOnly, kReadOnlyOverride, kImport };
std::string_view ModeName(Mode m);
std::optional<Mode> ParseMode(std::string_view name);

struct SchemaReference {
  std::string name;  // as the schema refers to it (an import path, a full name)
  std::string subject;
  int32_t version = 0;
  bool operator==(const SchemaReference&) const = default;
};

// A schema as stored: its text in the registry's canonical (or normalized) form.
struct StoredSchema {
  int32_t id = 0;
  SchemaType type = SchemaType::kAvro;
  std::string text;
  std::vector<SchemaReference> references;
};

struct SubjectVersion {
  int32_t version = 0;
  int32_t id = 0;
  bool deleted = false;  // soft-deleted
};

struct SubjectConfig {
  std::optional<Compatibility> compatibility;
  std::optional<bool> normalize;
};

class RegistryState {
 public:
  // Applies the record at `offset` (keys and values are JSON; a null value is a
  // tombstone). A record this state cannot read is skipped and counted, never fatal: the
  // topic may hold keys of later versions.
  void Apply(int64_t offset, std::string_view key, std::optional<std::string_view> value);

  // Everything before `offset` has been applied (the reader reached the log's end there).
  void SkipTo(int64_t offset) { next_offset_ = std::max(next_offset_, offset); }

  // The offset after the last record applied (0 before any).
  int64_t next_offset() const { return next_offset_; }
  int64_t skipped() const { return skipped_; }
  // The highest id ever seen (ids are never reused, even after a hard delete).
  int32_t max_id() const { return max_id_; }

  const StoredSchema* SchemaById(int32_t id) const;
  // The id of a schema with exactly this type, text and references, if any.
  std::optional<int32_t> FindSchema(SchemaType type, std::string_view text,
                                    const std::vector<SchemaReference>& refs) const;

  // Subjects with at least one version (live ones only unless `deleted`), sorted.
  std::vector<std::string> Subjects(bool deleted) const;
  // A subject's versions in order (live ones only unless `deleted`); null when the
  // subject has no version at all.
  const std::vector<SubjectVersion>* Versions(std::string_view subject) const;
  // Where `id` is used: (subject, version) pairs, live ones only unless `deleted`.
  std::vector<std::pair<std::string, int32_t>> UsesOf(int32_t id, bool deleted) const;
  // Ids of schemas whose references name subject:version.
  std::vector<int32_t> ReferencedBy(std::string_view subject, int32_t version) const;

  // Config and mode: "" is the global one.
  const SubjectConfig* Config(std::string_view subject) const;
  std::optional<Mode> ModeOf(std::string_view subject) const;

 private:
  void ApplySchema(std::string_view subject, int32_t version, const std::string* value);
  void Index(const StoredSchema& s);

  int64_t next_offset_ = 0;
  int64_t skipped_ = 0;
  int32_t max_id_ = 0;
  std::map<int32_t, StoredSchema> schemas_;
  std::map<std::string, int32_t> by_content_;  // type + text + refs → id
  std::map<std::string, std::vector<SubjectVersion>, std::less<>> subjects_;
  std::map<std::string, SubjectConfig, std::less<>> configs_;
  std::map<std::string, Mode, std::less<>> modes_;
};

// The `_schemas` record that registers (or soft-deletes) `subject`'s `version`, in
// Confluent's layout, and the CONFIG, MODE and hard-delete keys.
std::string SchemaKey(std::string_view subject, int32_t version);
std::string SchemaValue(std::string_view subject, int32_t version, const StoredSchema& schema,
                        bool deleted);
std::string ConfigKey(std::string_view subject);  // "" is the global config
std::string ConfigValue(const SubjectConfig& config);
std::string ModeKey(std::string_view subject);
std::string ModeValue(Mode mode);
std::string NoopKey();

}  // namespace sluice::schema::registry
