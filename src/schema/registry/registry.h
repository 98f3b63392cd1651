// Registry: the Schema Registry's operations (Confluent's REST API is registry_http.h over
// these) on a RegistryState rebuilt from the `_schemas` log. Reads answer from the state
// as applied so far; writes go through the log: the writer reads the log to its end,
// decides (an existing id for an identical schema, else the next id; the subject's next
// version), appends, reads its record back and checks that it took effect — a record
// another broker wrote in between wins by log order (RegistryState), and the write is
// tried again (docs/design/0022-schemas.md, "Storage").
//
// Threads: every method may be called from any thread; writes are one at a time. The
// log's reader calls Feed from its own thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "schema/registry/formats.h"
#include "schema/registry/registry_state.h"

namespace sluice::schema::registry {

// Where the registry's records go: `_schemas`-0 on the broker (kafka_log.h), or memory in
// unit tests. Append returns once the record is durable; whoever reads the log hands the
// records to Registry::Feed in offset order.
class SchemaLog {
 public:
  virtual ~SchemaLog() = default;
  // Makes this process the one that writes (fencing any other), before a write reads the
  // log to its end: a record another writer appends after that makes this one's Append
  // fail with Aborted, and the write is decided again.
  virtual Status BecomeWriter() = 0;
  // Aborted: another writer came in between (decide again); other errors are final.
  virtual Result<int64_t> Append(const std::string& key,
                                 const std::optional<std::string>& value) = 0;
  // The offset the next record will get (the high watermark).
  virtual Result<int64_t> End() = 0;
};

// A refusal as the API reports it: Confluent's error_code (40401, 42201, 409, 50001, ...)
// and message. The HTTP status is error_code / 100 for five-digit codes.
struct ApiError {
  int error_code = 0;
  std::string message;
};

template <typename T>
struct Answer {
  std::optional<T> value;
  ApiError error;
  bool ok() const { return value.has_value(); }
  static Answer Fail(int code, std::string message) {
    Answer a;
    a.error = {code, std::move(message)};
    return a;
  }
};

struct SchemaInput {
  SchemaType type = SchemaType::kAvro;
  std::string text;
  std::vector<SchemaReference> references;
  // IMPORT mode: the id and version to give it (0: the registry picks).
  int32_t id = 0;
  int32_t version = 0;
};

// A subject's version as GET /subjects/{s}/versions/{v} answers it.
struct VersionView {
  std::string subject;
  int32_t version = 0;
  StoredSchema schema;
  bool deleted = false;
};

struct RegistryOptions {
  // How long a write waits for its record to come back, and how long a read that must
  // see the log's end (a write's catch-up) waits for it.
  std::chrono::milliseconds write_timeout{10000};
  // Writes that lost to another writer are tried this many times, after a growing random
  // pause.
  int write_attempts = 20;
};

class Registry {
 public:
  // `log` may be set later (set_log), before the first call that reads or writes it.
  explicit Registry(SchemaLog* log, RegistryOptions options = {});
  void set_log(SchemaLog* log) { log_ = log; }

  // The log's reader: one record, in offset order. Wakes writers waiting for it.
  void Feed(int64_t offset, std::string_view key, std::optional<std::string_view> value);
  // The log's reader reached its end at `offset` (records below it were all fed; control
  // records and compacted-away offsets leave gaps).
  void ReachedEnd(int64_t offset);
  // Waits until every record before `offset` was fed; false on timeout.
  bool WaitApplied(int64_t offset, std::chrono::milliseconds timeout);
  // Reads the log's end and waits for it (a start, or a read that must be current).
  Status CatchUp(std::chrono::milliseconds timeout);

  // --- Reads
  std::vector<std::string> Subjects(bool deleted, std::string_view prefix) const;
  Answer<std::vector<int32_t>> Versions(std::string_view subject, bool deleted) const;
  // `version`: a number, "latest" or "-1".
  Answer<VersionView> Version(std::string_view subject, std::string_view version,
                              bool deleted) const;
  Answer<StoredSchema> SchemaById(int32_t id) const;
  Answer<std::vector<std::pair<std::string, int32_t>>> UsesOf(int32_t id, bool deleted) const;
  Answer<std::vector<int32_t>> ReferencedBy(std::string_view subject,
                                            std::string_view version) const;
  // Every version of every subject (GET /schemas), in subject and version order.
  std::vector<VersionView> AllSchemas(std::string_view prefix, bool deleted,
                                      bool latest_only) const;
  // POST /subjects/{s}: the version of `subject` holding this schema.
  Answer<VersionView> Lookup(std::string_view subject, const SchemaInput& input, bool normalize,
                             bool deleted) const;
  // The texts a schema's references name, transitively (for Parse).
  Answer<std::vector<Reference>> ResolveReferences(const std::vector<SchemaReference>& refs) const;

  Compatibility CompatibilityOf(std::string_view subject) const;
  std::optional<SubjectConfig> SubjectConfigOf(std::string_view subject) const;
  Mode ModeOf(std::string_view subject) const;
  std::optional<Mode> SubjectModeOf(std::string_view subject) const;

  // POST /compatibility/subjects/{s}/versions/{v} ("" for every version): the
  // incompatibilities of `input` with them under the subject's level (NONE reports none).
  Answer<std::vector<std::string>> CheckCompatibility(std::string_view subject,
                                                      std::string_view version,
                                                      const SchemaInput& input,
                                                      bool normalize) const;

  // --- Writes
  struct Registered {
    int32_t id = 0;
    int32_t version = 0;
  };
  Answer<Registered> Register(std::string_view subject, const SchemaInput& input, bool normalize);
  // Soft (permanent=false) or hard delete of a subject: the versions deleted.
  Answer<std::vector<int32_t>> DeleteSubject(std::string_view subject, bool permanent);
  Answer<int32_t> DeleteVersion(std::string_view subject, std::string_view version, bool permanent);
  Answer<SubjectConfig> SetConfig(std::string_view subject, const SubjectConfig& config);
  Answer<SubjectConfig> DeleteConfig(std::string_view subject);
  Answer<Mode> SetMode(std::string_view subject, Mode mode, bool force);
  Answer<Mode> DeleteMode(std::string_view subject);

 private:
  // The canonical (or normalized) text of `input`, or 42201/42202-style refusals.
  Answer<std::string> Prepare(const SchemaInput& input, bool normalize,
                              std::vector<Reference>* refs) const;
  // The incompatibilities of `text` with the versions the level compares it to.
  std::vector<std::string> Incompatible(std::string_view subject, SchemaType type,
                                        const std::string& text, const std::vector<Reference>& refs,
                                        Compatibility level,
                                        std::optional<int32_t> only_version) const;
  // BecomeWriter, then the log read to its end.
  Status StartWrite();
  // Appends and waits for the record to be applied. A write that lost to another writer
  // is tried again unless `decided` (it was decided on the log as read: the caller decides
  // again).
  Answer<int64_t> Write(const std::string& key, const std::optional<std::string>& value,
                        bool decided = false);
  std::optional<int32_t> ParseVersion(std::string_view subject, std::string_view version,
                                      bool deleted, ApiError* error) const;

  SchemaLog* log_;
  const RegistryOptions options_;
  mutable std::mutex mu_;  // guards state_
  std::condition_variable applied_;
  RegistryState state_;
  std::mutex write_mu_;  // one write at a time
};

}  // namespace sluice::schema::registry
