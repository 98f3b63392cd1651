// The REST API's routes (registry_http.h): paths split into percent-decoded segments,
// JSON bodies in and out.
#include "schema/registry/registry_http.h"

#include <fmt/format.h>

#include <charconv>
#include <nlohmann/json.hpp>

namespace sluice::schema::registry {

using nlohmann::json;

namespace {

HttpResponse Json(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump();
  r.content_type = kRegistryContentType;
  return r;
}

HttpResponse Error(int error_code, std::string_view message) {
  int status = error_code >= 10000 ? error_code / 100 : error_code;
  if (status < 400 || status > 599) status = 500;
  return Json(status, {{"error_code", error_code}, {"message", message}});
}

HttpResponse Error(const ApiError& e) { return Error(e.error_code, e.message); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The path's segments, percent-decoded ("a%2Fb" is one segment "a/b"); false when an
// escape is broken.
bool Segments(std::string_view path, std::vector<std::string>* out) {
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    size_t end = path.find('/', i);
    if (end == std::string_view::npos) end = path.size();
    std::string seg;
    for (size_t j = i; j < end; ++j) {
      if (path[j] == '%') {
        if (j + 2 >= end) return false;
        int hi = HexValue(path[j + 1]);
        int lo = HexValue(path[j + 2]);
        if (hi < 0 || lo < 0) return false;
        seg += static_cast<char>(hi * 16 + lo);
        j += 2;
      } else {
        seg += path[j];
      }
    }
    out->push_back(std::move(seg));
    i = end;
  }
  return true;
}

bool Flag(const HttpRequest& r, const char* name) {
  auto it = r.query.find(name);
  return it != r.query.end() && (it->second == "true" || it->second == "1" || it->second.empty());
}

std::string Param(const HttpRequest& r, const char* name) {
  auto it = r.query.find(name);
  return it == r.query.end() ? std::string() : it->second;
}

json HttpReferencesJson(const std::vector<SchemaReference>& refs) {
  json out = json::array();
  for (const SchemaReference& r : refs) {
    out.push_back({{"name", r.name}, {"subject", r.subject}, {"version", r.version}});
  }
  return out;
}

// The fields a schema is shown with: schemaType only when not Avro, references when any.
void AddSchema(json& j, const StoredSchema& s) {
  if (s.type != SchemaType::kAvro) j["schemaType"] = SchemaTypeName(s.type);
  j["schema"] = s.text;
  if (!s.references.empty()) j["references"] = HttpReferencesJson(s.references);
}

json VersionJson(const VersionView& v) {
  json j = {{"subject", v.subject}, {"version", v.version}, {"id", v.schema.id}};
  AddSchema(j, v.schema);
  if (v.deleted) j["deleted"] = true;
  return j;
}

// The body of register, lookup and compatibility: {schema, schemaType, references, id,
// version}. An error response when it is not one.
std::optional<HttpResponse> ReadSchemaInput(const HttpRequest& r, SchemaInput* in) {
  json body = json::parse(r.body, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Error(400, "Unrecognized request body: not a JSON object");
  }
  auto schema = body.find("schema");
  if (schema == body.end() || !schema->is_string()) {
    return Error(42201, "Invalid schema: the body has no \"schema\" string");
  }
  in->text = schema->get<std::string>();
  if (auto t = body.find("schemaType"); t != body.end() && !t->is_null()) {
    std::optional<SchemaType> type =
        t->is_string() ? ParseSchemaType(t->get<std::string>()) : std::nullopt;
    if (!type) return Error(42201, fmt::format("Invalid schema type {}", t->dump()));
    in->type = *type;
  }
  if (auto refs = body.find("references"); refs != body.end() && !refs->is_null()) {
    if (!refs->is_array()) return Error(42201, "Invalid schema: references is not an array");
    for (const json& ref : *refs) {
      if (!ref.is_object() || !ref.contains("name") || !ref["name"].is_string() ||
          !ref.contains("subject") || !ref["subject"].is_string() || !ref.contains("version") ||
          !ref["version"].is_number_integer()) {
        return Error(42201,
                     "Invalid schema: a reference needs a name, a subject and an integer version");
      }
      in->references.push_back({ref["name"].get<std::string>(), ref["subject"].get<std::string>(),
                                ref["version"].get<int32_t>()});
    }
  }
  for (const char* name : {"id", "version"}) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX) {
      return Error(42201, fmt::format("Invalid schema: {} must be a positive integer", name));
    }
    (std::string_view(name) == "id" ? in->id : in->version) = it->get<int32_t>();
  }
  return std::nullopt;
}

HttpResponse Subjects(Registry& reg, const HttpRequest& r, const std::vector<std::string>& seg) {
  const bool deleted = Flag(r, "deleted");
  if (seg.size() == 1) {
    if (r.method != "GET") return Error(405, "HTTP 405 Method Not Allowed");
    return Json(200, reg.Subjects(deleted, Param(r, "subjectPrefix")));
  }
  const std::string& subject = seg[1];
  if (seg.size() == 2) {
    if (r.method == "POST") {
      SchemaInput in;
      if (auto bad = ReadSchemaInput(r, &in)) return *bad;
      Answer<VersionView> v = reg.Lookup(subject, in, Flag(r, "normalize"), deleted);
      return v.ok() ? Json(200, VersionJson(*v.value)) : Error(v.error);
    }
    if (r.method == "DELETE") {
      Answer<std::vector<int32_t>> v = reg.DeleteSubject(subject, Flag(r, "permanent"));
      return v.ok() ? Json(200, *v.value) : Error(v.error);
    }
    return Error(405, "HTTP 405 Method Not Allowed");
  }
  if (seg[2] != "versions") return Error(404, "HTTP 404 Not Found");
  if (seg.size() == 3) {
    if (r.method == "GET") {
      Answer<std::vector<int32_t>> v = reg.Versions(subject, deleted);
      return v.ok() ? Json(200, *v.value) : Error(v.error);
    }
    if (r.method == "POST") {
      SchemaInput in;
      if (auto bad = ReadSchemaInput(r, &in)) return *bad;
      Answer<Registry::Registered> v = reg.Register(subject, in, Flag(r, "normalize"));
      return v.ok() ? Json(200, {{"id", v.value->id}}) : Error(v.error);
    }
    return Error(405, "HTTP 405 Method Not Allowed");
  }
  const std::string& version = seg[3];
  if (seg.size() == 4) {
    if (r.method == "GET") {
      Answer<VersionView> v = reg.Version(subject, version, deleted);
      return v.ok() ? Json(200, VersionJson(*v.value)) : Error(v.error);
    }
    if (r.method == "DELETE") {
      Answer<int32_t> v = reg.DeleteVersion(subject, version, Flag(r, "permanent"));
      return v.ok() ? Json(200, *v.value) : Error(v.error);
    }
    return Error(405, "HTTP 405 Method Not Allowed");
  }
  if (seg.size() == 5 && r.method == "GET" && seg[4] == "schema") {
    Answer<VersionView> v = reg.Version(subject, version, deleted);
    if (!v.ok()) return Error(v.error);
    HttpResponse out;
    out.body = v.value->schema.text;
    out.content_type = kRegistryContentType;
    return out;
  }
  if (seg.size() == 5 && r.method == "GET" && seg[4] == "referencedby") {
    Answer<std::vector<int32_t>> v = reg.ReferencedBy(subject, version);
    return v.ok() ? Json(200, *v.value) : Error(v.error);
  }
  return Error(404, "HTTP 404 Not Found");
}

HttpResponse Schemas(Registry& reg, const HttpRequest& r, const std::vector<std::string>& seg) {
  if (r.method != "GET") return Error(405, "HTTP 405 Method Not Allowed");
  if (seg.size() == 1) {
    json out = json::array();
    for (const VersionView& v :
         reg.AllSchemas(Param(r, "subjectPrefix"), Flag(r, "deleted"), Flag(r, "latestOnly"))) {
      out.push_back(VersionJson(v));
    }
    return Json(200, out);
  }
  if (seg.size() == 2 && seg[1] == "types") return Json(200, {"JSON", "PROTOBUF", "AVRO"});
  if (seg.size() < 3 || seg[1] != "ids") return Error(404, "HTTP 404 Not Found");
  int64_t id = 0;
  auto [p, ec] = std::from_chars(seg[2].data(), seg[2].data() + seg[2].size(), id);
  if (ec != std::errc() || p != seg[2].data() + seg[2].size() || id < 1 || id > INT32_MAX) {
    return Error(40403, fmt::format("Schema {} not found", seg[2]));
  }
  Answer<StoredSchema> s = reg.SchemaById(static_cast<int32_t>(id));
  if (!s.ok()) return Error(s.error);
  if (seg.size() == 3) {
    json j = json::object();
    AddSchema(j, *s.value);
    return Json(200, j);
  }
  if (seg.size() == 4 && seg[3] == "schema") {
    HttpResponse out;
    out.body = s.value->text;
    out.content_type = kRegistryContentType;
    return out;
  }
  if (seg.size() == 4 && (seg[3] == "versions" || seg[3] == "subjects")) {
    Answer<std::vector<std::pair<std::string, int32_t>>> uses =
        reg.UsesOf(static_cast<int32_t>(id), Flag(r, "deleted"));
    if (!uses.ok()) return Error(uses.error);
    json out = json::array();
    for (const auto& [subject, version] : *uses.value) {
      if (seg[3] == "versions") {
        out.push_back({{"subject", subject}, {"version", version}});
      } else if (out.empty() || out.back() != subject) {
        out.push_back(subject);
      }
    }
    return Json(200, out);
  }
  return Error(404, "HTTP 404 Not Found");
}

HttpResponse Config(Registry& reg, const HttpRequest& r, const std::vector<std::string>& seg) {
  if (seg.size() > 2) return Error(404, "HTTP 404 Not Found");
  const std::string subject = seg.size() == 2 ? seg[1] : "";
  if (r.method == "GET") {
    std::optional<SubjectConfig> c = reg.SubjectConfigOf(subject);
    if (!subject.empty() && (!c || !c->compatibility) && !Flag(r, "defaultToGlobal")) {
      return Error(40408, fmt::format("Subject '{}' does not have subject-level compatibility "
                                      "configured",
                                      subject));
    }
    json j = {{"compatibilityLevel", CompatibilityName(reg.CompatibilityOf(subject))}};
    if (c && c->normalize) j["normalize"] = *c->normalize;
    return Json(200, j);
  }
  if (r.method == "PUT") {
    json body = json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return Error(400, "Unrecognized request body: not a JSON object");
    }
    SubjectConfig c;
    for (const char* name : {"compatibility", "compatibilityLevel"}) {
      if (!body.contains(name)) continue;
      std::optional<Compatibility> level =
          body[name].is_string() ? ParseCompatibility(body[name].get<std::string>()) : std::nullopt;
      if (!level) {
        return Error(42203, fmt::format("Invalid compatibility level. Valid values are none, "
                                        "backward, forward, full, backward_transitive, "
                                        "forward_transitive, and full_transitive"));
      }
      c.compatibility = level;
    }
    if (body.contains("normalize")) {
      if (!body["normalize"].is_boolean()) return Error(42203, "normalize must be true or false");
      c.normalize = body["normalize"].get<bool>();
    }
    if (!c.compatibility && !c.normalize) {
      return Error(42203, "Invalid compatibility level: the body names none");
    }
    if (!c.compatibility) {
      // Only normalize given: the level stays what it was.
      if (std::optional<SubjectConfig> old = reg.SubjectConfigOf(subject))
        c.compatibility = old->compatibility;
    }
    Answer<SubjectConfig> v = reg.SetConfig(subject, c);
    if (!v.ok()) return Error(v.error);
    json j = json::object();
    if (v.value->compatibility) j["compatibility"] = CompatibilityName(*v.value->compatibility);
    if (v.value->normalize) j["normalize"] = *v.value->normalize;
    return Json(200, j);
  }
  if (r.method == "DELETE") {
    Answer<SubjectConfig> v = reg.DeleteConfig(subject);
    if (!v.ok()) return Error(v.error);
    json j = json::object();
    if (v.value->compatibility)
      j["compatibilityLevel"] = CompatibilityName(*v.value->compatibility);
    return Json(200, j);
  }
  return Error(405, "HTTP 405 Method Not Allowed");
}

HttpResponse ModeRoute(Registry& reg, const HttpRequest& r, const std::vector<std::string>& seg) {
  if (seg.size() > 2) return Error(404, "HTTP 404 Not Found");
  const std::string subject = seg.size() == 2 ? seg[1] : "";
  if (r.method == "GET") {
    std::optional<Mode> m = reg.SubjectModeOf(subject);
    if (!subject.empty() && !m && !Flag(r, "defaultToGlobal")) {
      return Error(
          40409, fmt::format("Subject '{}' does not have subject-level mode configured", subject));
    }
    return Json(200, {{"mode", ModeName(reg.ModeOf(subject))}});
  }
  if (r.method == "PUT") {
    json body = json::parse(r.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return Error(400, "Unrecognized request body: not a JSON object");
    }
    std::optional<Mode> m = body.contains("mode") && body["mode"].is_string()
                                ? ParseMode(body["mode"].get<std::string>())
                                : std::nullopt;
    if (!m) {
      return Error(42204,
                   "Invalid mode. Valid values are READWRITE, READONLY, "
                   "READONLY_OVERRIDE and IMPORT.");
    }
    Answer<Mode> v = reg.SetMode(subject, *m, Flag(r, "force"));
    return v.ok() ? Json(200, {{"mode", ModeName(*v.value)}}) : Error(v.error);
  }
  if (r.method == "DELETE" && !subject.empty()) {
    Answer<Mode> v = reg.DeleteMode(subject);
    return v.ok() ? Json(200, {{"mode", ModeName(*v.value)}}) : Error(v.error);
  }
  return Error(405, "HTTP 405 Method Not Allowed");
}

HttpResponse CompatibilityRoute(Registry& reg, const HttpRequest& r,
                                const std::vector<std::string>& seg) {
  if (seg.size() < 4 || seg.size() > 5 || seg[1] != "subjects" || seg[3] != "versions") {
    return Error(404, "HTTP 404 Not Found");
  }
  if (r.method != "POST") return Error(405, "HTTP 405 Method Not Allowed");
  SchemaInput in;
  if (auto bad = ReadSchemaInput(r, &in)) return *bad;
  Answer<std::vector<std::string>> v =
      reg.CheckCompatibility(seg[2], seg.size() == 5 ? seg[4] : "", in, Flag(r, "normalize"));
  if (!v.ok()) return Error(v.error);
  json j = {{"is_compatible", v.value->empty()}};
  if (Flag(r, "verbose")) j["messages"] = *v.value;
  return Json(200, j);
}

}  // namespace

HttpResponse HandleRegistryRequest(Registry& registry, const HttpRequest& request) {
  std::vector<std::string> seg;
  if (!Segments(request.path, &seg)) return Error(404, "HTTP 404 Not Found");
  if (seg.empty()) return Json(200, json::object());
  if (seg[0] == "subjects") return Subjects(registry, request, seg);
  if (seg[0] == "schemas") return Schemas(registry, request, seg);
  if (seg[0] == "config") return Config(registry, request, seg);
  if (seg[0] == "mode") return ModeRoute(registry, request, seg);
  if (seg[0] == "compatibility") return CompatibilityRoute(registry, request, seg);
  return Error(404, "HTTP 404 Not Found");
}

}  // namespace sluice::schema::registry
