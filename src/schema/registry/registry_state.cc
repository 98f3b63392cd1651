// RegistryState: applying `_schemas` records, and writing them in Confluent's layout.
#include "schema/registry/registry_state.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace sluice::schema::registry {

using nlohmann::json;

namespace {

constexpr std::string_view kTypeNames[] = {"AVRO", "PROTOBUF", "JSON"};
constexpr std::string_view kCompatibilityNames[] = {
    "NONE", "BACKWARD",       "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE",
    "FULL", "FULL_TRANSITIVE"};
constexpr std::string_view kModeNames[] = {"READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"};

template <typename E, size_t N>
std::optional<E> ParseName(const std::string_view (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

std::string ContentKey(SchemaType type, std::string_view text,
                       const std::vector<SchemaReference>& refs) {
  std::string key(1, static_cast<char>('0' + static_cast<int>(type)));
  key += text;
  for (const SchemaReference& r : refs) {
    key += '\0';
    key += r.name;
    key += '\0';
    key += r.subject;
    key += '\0';
    key += std::to_string(r.version);
  }
  return key;
}

// The subject of a key or value: a string, or null/absent for the global one ("").
std::optional<std::string> SubjectOf(const json& j) {
  auto it = j.find("subject");
  if (it == j.end() || it->is_null()) return std::string();
  if (!it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

json ReferencesJson(const std::vector<SchemaReference>& refs) {
  json out = json::array();
  for (const SchemaReference& r : refs) {
    out.push_back({{"name", r.name}, {"subject", r.subject}, {"version", r.version}});
  }
  return out;
}

}  // namespace

std::string_view SchemaTypeName(SchemaType t) { return kTypeNames[static_cast<int>(t)]; }
std::optional<SchemaType> ParseSchemaType(std::string_view name) {
  return ParseName<SchemaType>(kTypeNames, name);
}
std::string_view CompatibilityName(Compatibility c) {
  return kCompatibilityNames[static_cast<int>(c)];
}
std::optional<Compatibility> ParseCompatibility(std::string_view name) {
  return ParseName<Compatibility>(kCompatibilityNames, name);
}
std::string_view ModeName(Mode m) { return kModeNames[static_cast<int>(m)]; }
std::optional<Mode> ParseMode(std::string_view name) { return ParseName<Mode>(kModeNames, name); }

void RegistryState::Apply(int64_t offset, std::string_view key,
                          std::optional<std::string_view> value) {
  next_offset_ = std::max(next_offset_, offset + 1);
  json k = json::parse(key, nullptr, /*allow_exceptions=*/false);
  if (!k.is_object() || !k.contains("keytype") || !k["keytype"].is_string()) {
    ++skipped_;
    return;
  }
  const std::string keytype = k["keytype"].get<std::string>();
  if (keytype == "NOOP") return;
  std::optional<std::string> subject = SubjectOf(k);
  if (!subject) {
    ++skipped_;
    return;
  }
  json v;
  if (value) {
    v = json::parse(*value, nullptr, false);
    if (!v.is_object()) {
      ++skipped_;
      return;
    }
  }
  if (keytype == "SCHEMA") {
    auto ver = k.find("version");
    if (subject->empty() || ver == k.end() || !ver->is_number_integer()) {
      ++skipped_;
      return;
    }
    std::string text = value ? std::string(*value) : std::string();
    ApplySchema(*subject, ver->get<int32_t>(), value ? &text : nullptr);
  } else if (keytype == "CONFIG") {
    if (!value) {
      configs_.erase(*subject);
      return;
    }
    SubjectConfig c;
    for (const char* name : {"compatibilityLevel", "compatibility"}) {
      if (v.contains(name) && v[name].is_string()) {
        c.compatibility = ParseCompatibility(v[name].get<std::string>());
      }
    }
    if (v.contains("normalize") && v["normalize"].is_boolean()) {
      c.normalize = v["normalize"].get<bool>();
    }
    configs_[*subject] = c;
  } else if (keytype == "MODE") {
    if (!value) {
      modes_.erase(*subject);
      return;
    }
    std::optional<Mode> m;
    if (v.contains("mode") && v["mode"].is_string()) m = ParseMode(v["mode"].get<std::string>());
    if (!m) {
      ++skipped_;
      return;
    }
    modes_[*subject] = *m;
  } else if (keytype == "DELETE_SUBJECT" || keytype == "CLEAR_SUBJECT") {
    auto it = subjects_.find(*subject);
    if (!value || it == subjects_.end()) return;
    int32_t upto = v.contains("version") && v["version"].is_number_integer()
                       ? v["version"].get<int32_t>()
                       : INT32_MAX;
    std::vector<SubjectVersion>& versions = it->second;
    if (keytype == "DELETE_SUBJECT") {
      for (SubjectVersion& sv : versions) {
        if (sv.version <= upto) sv.deleted = true;
      }
    } else {
      std::erase_if(versions,
                    [&](const SubjectVersion& sv) { return sv.deleted && sv.version <= upto; });
      if (versions.empty()) subjects_.erase(it);
    }
  } else {
    ++skipped_;
  }
}

void RegistryState::ApplySchema(std::string_view subject, int32_t version,
                                const std::string* value) {
  auto sit = subjects_.find(subject);
  if (value == nullptr) {
    // A hard delete: the version goes; a schema no version uses any more goes too (its id
    // stays taken: max_id_ keeps it).
    if (sit == subjects_.end()) return;
    std::vector<SubjectVersion>& versions = sit->second;
    auto vit = std::find_if(versions.begin(), versions.end(),
                            [&](const SubjectVersion& sv) { return sv.version == version; });
    if (vit == versions.end()) return;
    int32_t id = vit->id;
    versions.erase(vit);
    if (versions.empty()) subjects_.erase(sit);
    if (UsesOf(id, true).empty()) {
      auto s = schemas_.find(id);
      if (s != schemas_.end()) {
        auto c = by_content_.find(ContentKey(s->second.type, s->second.text, s->second.references));
        if (c != by_content_.end() && c->second == id) by_content_.erase(c);
        schemas_.erase(s);
      }
    }
    return;
  }
  json v = json::parse(*value, nullptr, false);
  StoredSchema s;
  bool deleted = false;
  if (!v.contains("id") || !v["id"].is_number_integer() || !v.contains("schema") ||
      !v["schema"].is_string()) {
    ++skipped_;
    return;
  }
  s.id = v["id"].get<int32_t>();
  s.text = v["schema"].get<std::string>();
  if (v.contains("schemaType") && v["schemaType"].is_string()) {
    std::optional<SchemaType> t = ParseSchemaType(v["schemaType"].get<std::string>());
    if (!t) {
      ++skipped_;
      return;
    }
    s.type = *t;
  }
  if (v.contains("references") && v["references"].is_array()) {
    for (const json& r : v["references"]) {
      if (!r.is_object() || !r.contains("name") || !r["name"].is_string() ||
          !r.contains("subject") || !r["subject"].is_string() || !r.contains("version") ||
          !r["version"].is_number_integer()) {
        ++skipped_;
        return;
      }
      s.references.push_back({r["name"].get<std::string>(), r["subject"].get<std::string>(),
                              r["version"].get<int32_t>()});
    }
  }
  if (v.contains("deleted") && v["deleted"].is_boolean()) deleted = v["deleted"].get<bool>();
  if (s.id <= 0 || version <= 0) {
    ++skipped_;
    return;
  }
  // The first writer of an id keeps it.
  if (auto held = schemas_.find(s.id); held != schemas_.end()) {
    const StoredSchema& h = held->second;
    if (h.type != s.type || h.text != s.text || h.references != s.references) {
      ++skipped_;
      return;
    }
  }
  std::vector<SubjectVersion>* versions = nullptr;
  if (sit != subjects_.end()) versions = &sit->second;
  if (versions != nullptr) {
    auto vit = std::find_if(versions->begin(), versions->end(),
                            [&](const SubjectVersion& sv) { return sv.version == version; });
    if (vit != versions->end()) {
      // The version is taken: only its own id may change its deleted flag.
      if (vit->id != s.id) {
        ++skipped_;
        return;
      }
      vit->deleted = deleted;
      return;
    }
  }
  max_id_ = std::max(max_id_, s.id);
  if (!schemas_.contains(s.id)) {
    Index(s);
    schemas_.emplace(s.id, std::move(s));
  }
  if (versions == nullptr) versions = &subjects_[std::string(subject)];
  SubjectVersion sv{version, v["id"].get<int32_t>(), deleted};
  auto pos = std::lower_bound(
      versions->begin(), versions->end(), sv,
      [](const SubjectVersion& a, const SubjectVersion& b) { return a.version < b.version; });
  versions->insert(pos, sv);
}

void RegistryState::Index(const StoredSchema& s) {
  by_content_.emplace(ContentKey(s.type, s.text, s.references), s.id);
}

const StoredSchema* RegistryState::SchemaById(int32_t id) const {
  auto it = schemas_.find(id);
  return it == schemas_.end() ? nullptr : &it->second;
}

std::optional<int32_t> RegistryState::FindSchema(SchemaType type, std::string_view text,
                                                 const std::vector<SchemaReference>& refs) const {
  auto it = by_content_.find(ContentKey(type, text, refs));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> RegistryState::Subjects(bool deleted) const {
  std::vector<std::string> out;
  for (const auto& [name, versions] : subjects_) {
    if (deleted || std::any_of(versions.begin(), versions.end(),
                               [](const SubjectVersion& v) { return !v.deleted; })) {
      out.push_back(name);
    }
  }
  return out;
}

const std::vector<SubjectVersion>* RegistryState::Versions(std::string_view subject) const {
  auto it = subjects_.find(subject);
  return it == subjects_.end() ? nullptr : &it->second;
}

std::vector<std::pair<std::string, int32_t>> RegistryState::UsesOf(int32_t id, bool deleted) const {
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& [name, versions] : subjects_) {
    for (const SubjectVersion& v : versions) {
      if (v.id == id && (deleted || !v.deleted)) out.emplace_back(name, v.version);
    }
  }
  return out;
}

std::vector<int32_t> RegistryState::ReferencedBy(std::string_view subject, int32_t version) const {
  std::vector<int32_t> out;
  for (const auto& [id, s] : schemas_) {
    for (const SchemaReference& r : s.references) {
      if (r.subject == subject && r.version == version && !UsesOf(id, false).empty()) {
        out.push_back(id);
        break;
      }
    }
  }
  return out;
}

const SubjectConfig* RegistryState::Config(std::string_view subject) const {
  auto it = configs_.find(subject);
  return it == configs_.end() ? nullptr : &it->second;
}

std::optional<Mode> RegistryState::ModeOf(std::string_view subject) const {
  auto it = modes_.find(subject);
  if (it == modes_.end()) return std::nullopt;
  return it->second;
}

std::string SchemaKey(std::string_view subject, int32_t version) {
  return json{{"keytype", "SCHEMA"}, {"subject", subject}, {"version", version}, {"magic", 1}}
      .dump();
}

std::string SchemaValue(std::string_view subject, int32_t version, const StoredSchema& schema,
                        bool deleted) {
  json v = {{"subject", subject},
            {"version", version},
            {"id", schema.id},
            {"schema", schema.text},
            {"deleted", deleted}};
  if (schema.type != SchemaType::kAvro) v["schemaType"] = SchemaTypeName(schema.type);
  if (!schema.references.empty()) v["references"] = ReferencesJson(schema.references);
  return v.dump();
}

std::string ConfigKey(std::string_view subject) {
  json k = {{"keytype", "CONFIG"}, {"magic", 0}};
  k["subject"] = subject.empty() ? json(nullptr) : json(subject);
  return k.dump();
}

std::string ConfigValue(const SubjectConfig& config) {
  json v = json::object();
  if (config.compatibility) v["compatibilityLevel"] = CompatibilityName(*config.compatibility);
  if (config.normalize) v["normalize"] = *config.normalize;
  return v.dump();
}

std::string ModeKey(std::string_view subject) {
  json k = {{"keytype", "MODE"}, {"magic", 0}};
  k["subject"] = subject.empty() ? json(nullptr) : json(subject);
  return k.dump();
}

std::string ModeValue(Mode mode) { return json{{"mode", ModeName(mode)}}.dump(); }

std::string NoopKey() { return json{{"keytype", "NOOP"}, {"magic", 0}}.dump(); }

}  // namespace sluice::schema::registry
