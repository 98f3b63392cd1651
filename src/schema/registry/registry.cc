// Registry: reads from the applied state, writes through the log (registry.h).
#include "schema/registry/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <random>
#include <set>
#include <thread>

namespace sluice::schema::registry {

namespace {

constexpr int kSubjectNotFound = 40401;
constexpr int kVersionNotFound = 40402;
constexpr int kSchemaNotFound = 40403;
constexpr int kSubjectSoftDeleted = 40404;
constexpr int kSubjectNotSoftDeleted = 40405;
constexpr int kVersionSoftDeleted = 40406;
constexpr int kVersionNotSoftDeleted = 40407;
constexpr int kSubjectConfigNotFound = 40408;
constexpr int kSubjectModeNotFound = 40409;
constexpr int kIncompatible = 409;
constexpr int kInvalidSchema = 42201;
constexpr int kInvalidVersion = 42202;
constexpr int kOperationNotPermitted = 42205;
constexpr int kReferenceExists = 42206;
constexpr int kStoreError = 50001;
constexpr int kTimeout = 50002;
// Not an API code: a decided write lost to another writer.
constexpr int kDecideAgain = -1;

// After losing a write to another broker: a random pause, growing with the attempts, so
// that two brokers taking the writer's role from each other in turn (each InitTransactions
// fences the other) let one finish.
void BackOff(int attempt) {
  static thread_local std::minstd_rand random(
      static_cast<uint32_t>(std::hash<std::thread::id>{}(std::this_thread::get_id())) ^
      static_cast<uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const int cap = std::min(1000, 50 << std::min(attempt, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(cap / 2 + random() % (cap / 2 + 1)));
}

std::string SubjectNotFound(std::string_view subject) {
  return fmt::format("Subject '{}' not found.", subject);
}

}  // namespace

Registry::Registry(SchemaLog* log, RegistryOptions options) : log_(log), options_(options) {}

void Registry::Feed(int64_t offset, std::string_view key, std::optional<std::string_view> value) {
  {
    std::lock_guard lock(mu_);
    state_.Apply(offset, key, value);
  }
  applied_.notify_all();
}

void Registry::ReachedEnd(int64_t offset) {
  {
    std::lock_guard lock(mu_);
    state_.SkipTo(offset);
  }
  applied_.notify_all();
}

bool Registry::WaitApplied(int64_t offset, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return applied_.wait_for(lock, timeout, [&] { return state_.next_offset() >= offset; });
}

Status Registry::CatchUp(std::chrono::milliseconds timeout) {
  // The log's end; in a cluster a topic just made may have no leader for a moment.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Result<int64_t> found = log_->End();
  while (!found.ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    found = log_->End();
  }
  ASSIGN_OR_RETURN(int64_t end, std::move(found));
  if (!WaitApplied(end, timeout)) {
    int64_t read = 0;
    {
      std::lock_guard lock(mu_);
      read = state_.next_offset();
    }
    return ResourceExhaustedError("the schema registry read its log to offset {} of {} in {} ms",
                                  read, end, timeout.count());
  }
  return Status::OK();
}

std::vector<std::string> Registry::Subjects(bool deleted, std::string_view prefix) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out = state_.Subjects(deleted);
  if (!prefix.empty())
    std::erase_if(out, [&](const std::string& s) { return !s.starts_with(prefix); });
  return out;
}

Answer<std::vector<int32_t>> Registry::Versions(std::string_view subject, bool deleted) const {
  std::lock_guard lock(mu_);
  const std::vector<SubjectVersion>* versions = state_.Versions(subject);
  std::vector<int32_t> out;
  if (versions != nullptr) {
    for (const SubjectVersion& v : *versions) {
      if (deleted || !v.deleted) out.push_back(v.version);
    }
  }
  if (out.empty())
    return Answer<std::vector<int32_t>>::Fail(kSubjectNotFound, SubjectNotFound(subject));
  return {std::move(out), {}};
}

// Under mu_. A version by number or "latest"/"-1"; nullopt with `error` set when there is
// none (or it is soft-deleted and `deleted` is false).
std::optional<int32_t> Registry::ParseVersion(std::string_view subject, std::string_view version,
                                              bool deleted, ApiError* error) const {
  const std::vector<SubjectVersion>* versions = state_.Versions(subject);
  bool any_live =
      versions != nullptr && std::any_of(versions->begin(), versions->end(),
                                         [](const SubjectVersion& v) { return !v.deleted; });
  if (versions == nullptr || (!deleted && !any_live)) {
    *error = {kSubjectNotFound, SubjectNotFound(subject)};
    return std::nullopt;
  }
  if (version == "latest" || version == "-1") {
    for (auto it = versions->rbegin(); it != versions->rend(); ++it) {
      if (deleted || !it->deleted) return it->version;
    }
    *error = {kVersionNotFound, fmt::format("Version latest not found for subject '{}'.", subject)};
    return std::nullopt;
  }
  int64_t n = 0;
  auto [p, ec] = std::from_chars(version.data(), version.data() + version.size(), n);
  if (ec != std::errc() || p != version.data() + version.size() || n < 1 || n > INT32_MAX) {
    *error = {kInvalidVersion,
              fmt::format("The specified version '{}' is not a valid version id. Allowed values "
                          "are between [1, 2^31-1] and the string \"latest\"",
                          version)};
    return std::nullopt;
  }
  for (const SubjectVersion& v : *versions) {
    if (v.version == n && (deleted || !v.deleted)) return v.version;
  }
  *error = {kVersionNotFound, fmt::format("Version {} not found.", n)};
  return std::nullopt;
}

Answer<VersionView> Registry::Version(std::string_view subject, std::string_view version,
                                      bool deleted) const {
  std::lock_guard lock(mu_);
  ApiError error;
  std::optional<int32_t> v = ParseVersion(subject, version, deleted, &error);
  if (!v) return Answer<VersionView>::Fail(error.error_code, error.message);
  for (const SubjectVersion& sv : *state_.Versions(subject)) {
    if (sv.version != *v) continue;
    const StoredSchema* s = state_.SchemaById(sv.id);
    if (s == nullptr) return Answer<VersionView>::Fail(kSchemaNotFound, "Schema not found");
    return {VersionView{std::string(subject), sv.version, *s, sv.deleted}, {}};
  }
  return Answer<VersionView>::Fail(kVersionNotFound, fmt::format("Version {} not found.", *v));
}

Answer<StoredSchema> Registry::SchemaById(int32_t id) const {
  std::lock_guard lock(mu_);
  const StoredSchema* s = state_.SchemaById(id);
  if (s == nullptr) {
    return Answer<StoredSchema>::Fail(kSchemaNotFound, fmt::format("Schema {} not found", id));
  }
  return {*s, {}};
}

Answer<std::vector<std::pair<std::string, int32_t>>> Registry::UsesOf(int32_t id,
                                                                      bool deleted) const {
  std::lock_guard lock(mu_);
  if (state_.SchemaById(id) == nullptr) {
    return Answer<std::vector<std::pair<std::string, int32_t>>>::Fail(
        kSchemaNotFound, fmt::format("Schema {} not found", id));
  }
  return {state_.UsesOf(id, deleted), {}};
}

Answer<std::vector<int32_t>> Registry::ReferencedBy(std::string_view subject,
                                                    std::string_view version) const {
  std::lock_guard lock(mu_);
  ApiError error;
  std::optional<int32_t> v = ParseVersion(subject, version, false, &error);
  if (!v) return Answer<std::vector<int32_t>>::Fail(error.error_code, error.message);
  return {state_.ReferencedBy(subject, *v), {}};
}

std::vector<VersionView> Registry::AllSchemas(std::string_view prefix, bool deleted,
                                              bool latest_only) const {
  std::lock_guard lock(mu_);
  std::vector<VersionView> out;
  for (const std::string& subject : state_.Subjects(deleted)) {
    if (!subject.starts_with(prefix)) continue;
    std::vector<VersionView> of_subject;
    for (const SubjectVersion& sv : *state_.Versions(subject)) {
      if (sv.deleted && !deleted) continue;
      const StoredSchema* s = state_.SchemaById(sv.id);
      if (s != nullptr) of_subject.push_back({subject, sv.version, *s, sv.deleted});
    }
    if (latest_only && !of_subject.empty())
      of_subject.erase(of_subject.begin(), of_subject.end() - 1);
    for (VersionView& v : of_subject) out.push_back(std::move(v));
  }
  return out;
}

Answer<std::vector<Reference>> Registry::ResolveReferences(
    const std::vector<SchemaReference>& refs) const {
  std::vector<Reference> out;
  std::set<std::string> seen;
  std::vector<SchemaReference> todo(refs.rbegin(), refs.rend());
  std::lock_guard lock(mu_);
  while (!todo.empty()) {
    SchemaReference r = std::move(todo.back());
    todo.pop_back();
    if (!seen.insert(r.name).second) continue;
    if (seen.size() > 1000) {
      return Answer<std::vector<Reference>>::Fail(kInvalidSchema,
                                                  "Invalid schema: too many references");
    }
    const StoredSchema* s = nullptr;
    if (const std::vector<SubjectVersion>* versions = state_.Versions(r.subject)) {
      for (const SubjectVersion& sv : *versions) {
        if (sv.version == r.version || (r.version == -1 && &sv == &versions->back())) {
          s = state_.SchemaById(sv.id);
        }
      }
    }
    if (s == nullptr) {
      return Answer<std::vector<Reference>>::Fail(
          kInvalidSchema, fmt::format("Invalid schema: reference '{}' names subject '{}' version "
                                      "{}, which does not exist",
                                      r.name, r.subject, r.version));
    }
    out.push_back({r.name, s->text});
    for (auto it = s->references.rbegin(); it != s->references.rend(); ++it) todo.push_back(*it);
  }
  // Dependencies first: a schema parser may want a reference's own references before it.
  std::reverse(out.begin(), out.end());
  return {std::move(out), {}};
}

Answer<std::string> Registry::Prepare(const SchemaInput& input, bool normalize,
                                      std::vector<Reference>* refs) const {
  Answer<std::vector<Reference>> resolved = ResolveReferences(input.references);
  if (!resolved.ok())
    return Answer<std::string>::Fail(resolved.error.error_code, resolved.error.message);
  *refs = std::move(*resolved.value);
  Result<std::string> text = CanonicalText(input.type, input.text, *refs, normalize);
  if (!text.ok()) {
    return Answer<std::string>::Fail(kInvalidSchema,
                                     fmt::format("Invalid schema {}", text.status().message()));
  }
  return {std::move(text).value(), {}};
}

Compatibility Registry::CompatibilityOf(std::string_view subject) const {
  std::lock_guard lock(mu_);
  for (std::string_view s : {subject, std::string_view()}) {
    const SubjectConfig* c = state_.Config(s);
    if (c != nullptr && c->compatibility) return *c->compatibility;
  }
  return Compatibility::kBackward;
}

std::optional<SubjectConfig> Registry::SubjectConfigOf(std::string_view subject) const {
  std::lock_guard lock(mu_);
  const SubjectConfig* c = state_.Config(subject);
  if (c == nullptr) return std::nullopt;
  return *c;
}

Mode Registry::ModeOf(std::string_view subject) const {
  std::lock_guard lock(mu_);
  if (std::optional<Mode> m = state_.ModeOf(subject)) return *m;
  return state_.ModeOf("").value_or(Mode::kReadWrite);
}

std::optional<Mode> Registry::SubjectModeOf(std::string_view subject) const {
  std::lock_guard lock(mu_);
  return state_.ModeOf(subject);
}

std::vector<std::string> Registry::Incompatible(std::string_view subject, SchemaType type,
                                                const std::string& text,
                                                const std::vector<Reference>& refs,
                                                Compatibility level,
                                                std::optional<int32_t> only_version) const {
  if (level == Compatibility::kNone) return {};
  std::vector<StoredSchema> previous;
  {
    std::lock_guard lock(mu_);
    if (const std::vector<SubjectVersion>* versions = state_.Versions(subject)) {
      for (const SubjectVersion& sv : *versions) {
        if (sv.deleted || (only_version && sv.version != *only_version)) continue;
        if (const StoredSchema* s = state_.SchemaById(sv.id)) previous.push_back(*s);
      }
    }
  }
  const bool transitive = level == Compatibility::kBackwardTransitive ||
                          level == Compatibility::kForwardTransitive ||
                          level == Compatibility::kFullTransitive;
  if (!transitive && previous.size() > 1) previous.erase(previous.begin(), previous.end() - 1);
  const bool backward =
      level != Compatibility::kForward && level != Compatibility::kForwardTransitive;
  const bool forward =
      level != Compatibility::kBackward && level != Compatibility::kBackwardTransitive;
  std::vector<std::string> out;
  // Newest first, as Confluent reports them.
  for (auto it = previous.rbegin(); it != previous.rend(); ++it) {
    const StoredSchema& old = *it;
    if (old.type != type) {
      out.push_back(fmt::format("Incompatible because of different schema type: {} and {}",
                                SchemaTypeName(old.type), SchemaTypeName(type)));
      continue;
    }
    Answer<std::vector<Reference>> old_refs = ResolveReferences(old.references);
    if (!old_refs.ok()) {
      out.push_back(old_refs.error.message);
      continue;
    }
    SchemaText now{text, &refs}, then{old.text, &*old_refs.value};
    auto add = [&](Result<std::vector<std::string>> found, std::string_view direction) {
      if (!found.ok()) {
        out.push_back(fmt::format("{}: {}", direction, found.status().message()));
        return;
      }
      for (std::string& m : *found) {
        out.push_back(fmt::format("{} (version with id {}, {})", m, old.id, direction));
      }
    };
    if (backward) add(Incompatibilities(type, now, then), "the new schema reading the old");
    if (forward) add(Incompatibilities(type, then, now), "the old schema reading the new");
  }
  return out;
}

Answer<std::vector<std::string>> Registry::CheckCompatibility(std::string_view subject,
                                                              std::string_view version,
                                                              const SchemaInput& input,
                                                              bool normalize) const {
  std::optional<int32_t> only;
  if (!version.empty()) {
    std::lock_guard lock(mu_);
    ApiError error;
    only = ParseVersion(subject, version, false, &error);
    if (!only) {
      // Nothing to be incompatible with: a new subject takes any schema (Confluent).
      if (error.error_code == kSubjectNotFound && version == "latest")
        return {std::vector<std::string>{}, {}};
      return Answer<std::vector<std::string>>::Fail(error.error_code, error.message);
    }
  }
  std::vector<Reference> refs;
  Answer<std::string> text = Prepare(input, normalize, &refs);
  if (!text.ok())
    return Answer<std::vector<std::string>>::Fail(text.error.error_code, text.error.message);
  Compatibility level = CompatibilityOf(subject);
  if (only && level != Compatibility::kNone) {
    // One version named: its direction(s), not transitive.
    if (level == Compatibility::kBackwardTransitive) level = Compatibility::kBackward;
    if (level == Compatibility::kForwardTransitive) level = Compatibility::kForward;
    if (level == Compatibility::kFullTransitive) level = Compatibility::kFull;
  } else if (!only && level != Compatibility::kNone) {
    // Every version: the transitive form of the level.
    if (level == Compatibility::kBackward) level = Compatibility::kBackwardTransitive;
    if (level == Compatibility::kForward) level = Compatibility::kForwardTransitive;
    if (level == Compatibility::kFull) level = Compatibility::kFullTransitive;
  }
  return {Incompatible(subject, input.type, *text.value, refs, level, only), {}};
}

Answer<VersionView> Registry::Lookup(std::string_view subject, const SchemaInput& input,
                                     bool normalize, bool deleted) const {
  {
    std::lock_guard lock(mu_);
    const std::vector<SubjectVersion>* versions = state_.Versions(subject);
    if (versions == nullptr ||
        (!deleted && std::none_of(versions->begin(), versions->end(),
                                  [](const SubjectVersion& v) { return !v.deleted; }))) {
      return Answer<VersionView>::Fail(kSubjectNotFound, SubjectNotFound(subject));
    }
  }
  std::optional<SubjectConfig> config = SubjectConfigOf(subject);
  if (!normalize && config && config->normalize) normalize = *config->normalize;
  std::vector<Reference> refs;
  Answer<std::string> text = Prepare(input, normalize, &refs);
  if (!text.ok()) return Answer<VersionView>::Fail(text.error.error_code, text.error.message);
  std::lock_guard lock(mu_);
  std::optional<int32_t> id = state_.FindSchema(input.type, *text.value, input.references);
  if (id) {
    const std::vector<SubjectVersion>* versions = state_.Versions(subject);
    for (auto it = versions->rbegin(); it != versions->rend(); ++it) {
      if (it->id == *id && (deleted || !it->deleted)) {
        return {
            VersionView{std::string(subject), it->version, *state_.SchemaById(*id), it->deleted},
            {}};
      }
    }
  }
  return Answer<VersionView>::Fail(kSchemaNotFound, "Schema not found");
}

Status Registry::StartWrite() {
  RETURN_IF_ERROR(log_->BecomeWriter());
  return CatchUp(options_.write_timeout);
}

Answer<int64_t> Registry::Write(const std::string& key, const std::optional<std::string>& value,
                                bool decided) {
  Result<int64_t> offset = log_->Append(key, value);
  for (int attempt = 1;
       !decided && !offset.ok() && offset.status().code() == StatusCode::kAborted &&
       attempt < options_.write_attempts;
       ++attempt) {
    // Another writer came in between; this record does not depend on what it wrote.
    BackOff(attempt);
    if (Status st = StartWrite(); !st.ok()) return Answer<int64_t>::Fail(kStoreError, st.message());
    offset = log_->Append(key, value);
  }
  if (!offset.ok() && offset.status().code() == StatusCode::kAborted && decided) {
    return Answer<int64_t>::Fail(kDecideAgain, std::string(offset.status().message()));
  }
  if (!offset.ok()) {
    return Answer<int64_t>::Fail(
        kStoreError, fmt::format("Error while registering schema: {}", offset.status().message()));
  }
  if (!WaitApplied(*offset + 1, options_.write_timeout)) {
    return Answer<int64_t>::Fail(
        kTimeout,
        fmt::format("Write to the schemas log timed out after {} ms waiting for offset {}",
                    options_.write_timeout.count(), *offset));
  }
  return {*offset, {}};
}

Answer<Registry::Registered> Registry::Register(std::string_view subject, const SchemaInput& input,
                                                bool normalize) {
  using A = Answer<Registered>;
  if (subject.empty()) return A::Fail(42208, "Invalid subject: it is empty");
  const Mode mode = ModeOf(subject);
  if (mode == Mode::kReadOnly || mode == Mode::kReadOnlyOverride) {
    return A::Fail(kOperationNotPermitted, fmt::format("Subject {} is in read-only mode", subject));
  }
  std::lock_guard write(write_mu_);
  for (int attempt = 0; attempt < options_.write_attempts; ++attempt) {
    if (Status st = StartWrite(); !st.ok()) return A::Fail(kTimeout, st.message());
    std::optional<SubjectConfig> config = SubjectConfigOf(subject);
    bool normalized = normalize || (config && config->normalize.value_or(false));
    std::vector<Reference> refs;
    Answer<std::string> text = Prepare(input, normalized, &refs);
    if (!text.ok()) return A::Fail(text.error.error_code, text.error.message);
    StoredSchema s{0, input.type, *text.value, input.references};
    int32_t version = 0;
    {
      std::lock_guard lock(mu_);
      std::optional<int32_t> existing = state_.FindSchema(s.type, s.text, s.references);
      const std::vector<SubjectVersion>* versions = state_.Versions(subject);
      int32_t last = 0;
      if (versions != nullptr) {
        for (const SubjectVersion& sv : *versions) {
          // Registering a schema the subject has (live) again returns its version.
          if (existing && sv.id == *existing && !sv.deleted)
            return {Registered{sv.id, sv.version}, {}};
          last = std::max(last, sv.version);
        }
      }
      if (mode == Mode::kImport) {
        if (input.id <= 0)
          return A::Fail(kInvalidSchema, "Invalid schema: IMPORT mode needs an id");
        if (existing && *existing != input.id) {
          return A::Fail(kInvalidSchema,
                         fmt::format("Invalid schema: it is registered with id {}, not {}",
                                     *existing, input.id));
        }
        if (const StoredSchema* held = state_.SchemaById(input.id);
            held != nullptr && (held->text != s.text || held->type != s.type)) {
          return A::Fail(
              kInvalidSchema,
              fmt::format("Overwrite new schema with id {} is not permitted.", input.id));
        }
        s.id = input.id;
        version = input.version > 0 ? input.version : last + 1;
      } else {
        s.id = existing ? *existing : state_.max_id() + 1;
        version = last + 1;
        if (input.version > 0 && input.version != version) {
          return A::Fail(kInvalidSchema,
                         fmt::format("Invalid schema: version {} is not the next version {}",
                                     input.version, version));
        }
      }
    }
    if (mode != Mode::kImport) {
      std::vector<std::string> problems =
          Incompatible(subject, s.type, s.text, refs, CompatibilityOf(subject), std::nullopt);
      if (!problems.empty()) {
        std::string details;
        for (const std::string& p : problems) details += (details.empty() ? "" : ", ") + p;
        return A::Fail(kIncompatible,
                       fmt::format("Schema being registered is incompatible with an earlier schema "
                                   "for subject \"{}\", details: [{}]",
                                   subject, details));
      }
    }
    Answer<int64_t> wrote =
        Write(SchemaKey(subject, version), SchemaValue(subject, version, s, false), true);
    if (!wrote.ok() && wrote.error.error_code == kDecideAgain) {
      BackOff(attempt);
      continue;
    }
    if (!wrote.ok()) return A::Fail(wrote.error.error_code, wrote.error.message);
    std::lock_guard lock(mu_);
    if (const std::vector<SubjectVersion>* versions = state_.Versions(subject)) {
      for (const SubjectVersion& sv : *versions) {
        if (sv.version == version && sv.id == s.id) return {Registered{s.id, version}, {}};
      }
    }
    // Another writer's record came first: decide again from what it wrote.
  }
  return A::Fail(kStoreError, "Error while registering schema: lost to other writers too often");
}

Answer<std::vector<int32_t>> Registry::DeleteSubject(std::string_view subject, bool permanent) {
  using A = Answer<std::vector<int32_t>>;
  if (ModeOf(subject) == Mode::kReadOnly) {
    return A::Fail(kOperationNotPermitted, fmt::format("Subject {} is in read-only mode", subject));
  }
  std::lock_guard write(write_mu_);
  if (Status st = StartWrite(); !st.ok()) return A::Fail(kTimeout, st.message());
  std::vector<SubjectVersion> versions;
  {
    std::lock_guard lock(mu_);
    const std::vector<SubjectVersion>* v = state_.Versions(subject);
    if (v == nullptr) return A::Fail(kSubjectNotFound, SubjectNotFound(subject));
    versions = *v;
    bool all_deleted = std::all_of(versions.begin(), versions.end(),
                                   [](const SubjectVersion& sv) { return sv.deleted; });
    if (!permanent && all_deleted) {
      return A::Fail(kSubjectSoftDeleted,
                     fmt::format("Subject '{}' was soft deleted. Set permanent=true to delete "
                                 "permanently",
                                 subject));
    }
    if (permanent && !all_deleted) {
      return A::Fail(kSubjectNotSoftDeleted,
                     fmt::format("Subject '{}' was not deleted first before being permanently "
                                 "deleted",
                                 subject));
    }
    for (const SubjectVersion& sv : versions) {
      if (!state_.ReferencedBy(subject, sv.version).empty()) {
        return A::Fail(kReferenceExists,
                       fmt::format("One or more references exist to the schema {{subject={}, "
                                   "version={}}}",
                                   subject, sv.version));
      }
    }
  }
  std::vector<int32_t> out;
  for (const SubjectVersion& sv : versions) {
    if (!permanent && sv.deleted) continue;
    std::optional<std::string> value;
    if (!permanent) {
      Answer<StoredSchema> s = SchemaById(sv.id);
      if (!s.ok()) continue;
      value = SchemaValue(subject, sv.version, *s.value, true);
    }
    Answer<int64_t> wrote = Write(SchemaKey(subject, sv.version), value);
    if (!wrote.ok()) return A::Fail(wrote.error.error_code, wrote.error.message);
    out.push_back(sv.version);
  }
  if (permanent) {
    // The subject's own config and mode go with it.
    if (SubjectConfigOf(subject)) (void)Write(ConfigKey(subject), std::nullopt);
    if (SubjectModeOf(subject)) (void)Write(ModeKey(subject), std::nullopt);
  }
  return {std::move(out), {}};
}

Answer<int32_t> Registry::DeleteVersion(std::string_view subject, std::string_view version,
                                        bool permanent) {
  using A = Answer<int32_t>;
  if (ModeOf(subject) == Mode::kReadOnly) {
    return A::Fail(kOperationNotPermitted, fmt::format("Subject {} is in read-only mode", subject));
  }
  std::lock_guard write(write_mu_);
  if (Status st = StartWrite(); !st.ok()) return A::Fail(kTimeout, st.message());
  SubjectVersion target;
  {
    std::lock_guard lock(mu_);
    ApiError error;
    std::optional<int32_t> v = ParseVersion(subject, version, true, &error);
    if (!v) return A::Fail(error.error_code, error.message);
    if (version == "latest" || version == "-1") {
      // "latest" is the latest live version.
      v = ParseVersion(subject, version, false, &error);
      if (!v) return A::Fail(error.error_code, error.message);
    }
    for (const SubjectVersion& sv : *state_.Versions(subject)) {
      if (sv.version == *v) target = sv;
    }
    if (!permanent && target.deleted) {
      return A::Fail(kVersionSoftDeleted,
                     fmt::format("Subject '{}' Version {} was soft deleted. Set permanent=true to "
                                 "delete permanently",
                                 subject, target.version));
    }
    if (permanent && !target.deleted) {
      return A::Fail(kVersionNotSoftDeleted,
                     fmt::format("Subject '{}' Version {} was not deleted first before being "
                                 "permanently deleted",
                                 subject, target.version));
    }
    if (!state_.ReferencedBy(subject, target.version).empty()) {
      return A::Fail(kReferenceExists,
                     fmt::format("One or more references exist to the schema {{subject={}, "
                                 "version={}}}",
                                 subject, target.version));
    }
  }
  std::optional<std::string> value;
  if (!permanent) {
    Answer<StoredSchema> s = SchemaById(target.id);
    if (!s.ok()) return A::Fail(s.error.error_code, s.error.message);
    value = SchemaValue(subject, target.version, *s.value, true);
  }
  Answer<int64_t> wrote = Write(SchemaKey(subject, target.version), value);
  if (!wrote.ok()) return A::Fail(wrote.error.error_code, wrote.error.message);
  return {target.version, {}};
}

Answer<SubjectConfig> Registry::SetConfig(std::string_view subject, const SubjectConfig& config) {
  using A = Answer<SubjectConfig>;
  std::lock_guard write(write_mu_);
  Answer<int64_t> wrote = Write(ConfigKey(subject), ConfigValue(config));
  if (!wrote.ok()) return A::Fail(wrote.error.error_code, wrote.error.message);
  return {config, {}};
}

Answer<SubjectConfig> Registry::DeleteConfig(std::string_view subject) {
  using A = Answer<SubjectConfig>;
  std::lock_guard write(write_mu_);
  std::optional<SubjectConfig> old = SubjectConfigOf(subject);
  if (!old) {
    if (subject.empty()) return {SubjectConfig{Compatibility::kBackward, std::nullopt}, {}};
    return A::Fail(
        kSubjectConfigNotFound,
        fmt::format("Subject '{}' does not have subject-level compatibility configured", subject));
  }
  Answer<int64_t> wrote = Write(ConfigKey(subject), std::nullopt);
  if (!wrote.ok()) return A::Fail(wrote.error.error_code, wrote.error.message);
  return {*old, {}};
}

Answer<Mode> Registry::SetMode(std::string_view subject, Mode mode, bool force) {
  using A = Answer<Mode>;
  std::lock_guard write(write_mu_);
  if (mode == Mode::kImport && !force) {
    std::lock_guard lock(mu_);
    bool has =
        subject.empty() ? !state_.Subjects(true).empty() : state_.Versions(subject) != nullptr;
    if (has) {
      return A::Fail(kOperationNotPermitted,
                     "Cannot import since found existing subjects (force=true overrides)");
    }
  }
  Answer<int64_t> wrote = Write(ModeKey(subject), ModeValue(mode));
  if (!wrote.ok()) return A::Fail(wrote.error.error_code, wrote.error.message);
  return {mode, {}};
}

Answer<Mode> Registry::DeleteMode(std::string_view subject) {
  using A = Answer<Mode>;
  std::lock_guard write(write_mu_);
  std::optional<Mode> old = SubjectModeOf(subject);
  if (!old) {
    return A::Fail(
        kSubjectModeNotFound,
        fmt::format("Subject '{}' does not have subject-level mode configured", subject));
  }
  Answer<int64_t> wrote = Write(ModeKey(subject), std::nullopt);
  if (!wrote.ok()) return A::Fail(wrote.error.error_code, wrote.error.message);
  return {*old, {}};
}

}  // namespace sluice::schema::registry
