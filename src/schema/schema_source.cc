// The two SchemaSources (schema_source.h).
#include "schema/schema_source.h"

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "schema/registry/registry.h"

namespace sluice::schema {

namespace {

using RegistryJson = nlohmann::json;
using registry::Answer;

// The cache both kinds share: records by id, for the source's life.
class CachingSource : public SchemaSource {
 public:
  Result<std::shared_ptr<const SchemaRecord>> ById(int32_t id) final {
    {
      std::lock_guard lock(mu_);
      auto it = by_id_.find(id);
      if (it != by_id_.end()) return it->second;
    }
    ASSIGN_OR_RETURN(std::shared_ptr<const SchemaRecord> r, Fetch(id));
    std::lock_guard lock(mu_);
    by_id_.emplace(id, r);
    return r;
  }

 protected:
  virtual Result<std::shared_ptr<const SchemaRecord>> Fetch(int32_t id) = 0;

 private:
  std::mutex mu_;
  std::map<int32_t, std::shared_ptr<const SchemaRecord>> by_id_;
};

class RegistrySource final : public CachingSource {
 public:
  explicit RegistrySource(registry::Registry* r) : registry_(r) {}

  Result<std::shared_ptr<const SchemaRecord>> Latest(std::string_view subject) override {
    Answer<registry::VersionView> v = registry_->Version(subject, "latest", false);
    if (!v.ok()) return NotFoundError("{}", v.error.message);
    return Record(v.value->schema);
  }

  Result<Registered> Register(std::string_view subject, SchemaType type, std::string_view text,
                              const std::vector<registry::SchemaReference>& refs) override {
    registry::SchemaInput in;
    in.type = type;
    in.text = std::string(text);
    in.references = refs;
    Answer<registry::Registry::Registered> r = registry_->Register(subject, in, false);
    if (!r.ok()) {
      return FailedPreconditionError(
          "the schema registry refused a schema for subject '{}': {} "
          "({})",
          subject, r.error.message, r.error.error_code);
    }
    return Registered{r.value->id, r.value->version};
  }

  std::string Describe() const override { return "the Schema Registry of this process"; }

 protected:
  Result<std::shared_ptr<const SchemaRecord>> Fetch(int32_t id) override {
    Answer<registry::StoredSchema> s = registry_->SchemaById(id);
    if (!s.ok()) return NotFoundError("schema id {} is not in {}", id, Describe());
    return Record(*s.value);
  }

 private:
  Result<std::shared_ptr<const SchemaRecord>> Record(const registry::StoredSchema& s) {
    auto r = std::make_shared<SchemaRecord>();
    r->id = s.id;
    r->type = s.type;
    r->text = s.text;
    Answer<std::vector<registry::Reference>> refs = registry_->ResolveReferences(s.references);
    if (!refs.ok()) return NotFoundError("schema id {}: {}", s.id, refs.error.message);
    r->references = std::move(*refs.value);
    return std::shared_ptr<const SchemaRecord>(std::move(r));
  }

  registry::Registry* registry_;
};

std::string PathSegment(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

class HttpSource final : public CachingSource {
 public:
  HttpSource(HttpSchemaSourceOptions o, std::string scheme_host_port, std::string prefix)
      : options_(std::move(o)), origin_(std::move(scheme_host_port)), prefix_(std::move(prefix)) {}

  Result<std::shared_ptr<const SchemaRecord>> Latest(std::string_view subject) override {
    ASSIGN_OR_RETURN(RegistryJson j,
                     Get(fmt::format("/subjects/{}/versions/latest", PathSegment(subject))));
    return Record(j);
  }

  Result<Registered> Register(std::string_view subject, SchemaType type, std::string_view text,
                              const std::vector<registry::SchemaReference>& refs) override {
    RegistryJson body = {{"schema", text}};
    if (type != SchemaType::kAvro) body["schemaType"] = registry::SchemaTypeName(type);
    for (const registry::SchemaReference& r : refs) {
      body["references"].push_back(
          {{"name", r.name}, {"subject", r.subject}, {"version", r.version}});
    }
    ASSIGN_OR_RETURN(
        RegistryJson j,
        Call("POST", fmt::format("/subjects/{}/versions", PathSegment(subject)), body.dump()));
    if (!j.contains("id") || !j["id"].is_number_integer()) {
      return InvalidArgumentError("{}: the answer to a register has no id: {}", Describe(),
                                  j.dump());
    }
    const int32_t id = j["id"].get<int32_t>();
    // The version: Confluent's register answers the id alone; a lookup tells the version.
    ASSIGN_OR_RETURN(RegistryJson found,
                     Call("POST", fmt::format("/subjects/{}", PathSegment(subject)), body.dump()));
    if (!found.contains("version") || !found["version"].is_number_integer()) {
      return InvalidArgumentError("{}: the lookup of subject {} has no version", Describe(),
                                  subject);
    }
    return Registered{id, found["version"].get<int32_t>()};
  }

  std::string Describe() const override { return options_.url; }

 protected:
  Result<std::shared_ptr<const SchemaRecord>> Fetch(int32_t id) override {
    ASSIGN_OR_RETURN(RegistryJson j, Get(fmt::format("/schemas/ids/{}", id)));
    j["id"] = id;
    return Record(j);
  }

 private:
  Result<RegistryJson> Get(const std::string& path) { return Call("GET", path, ""); }

  Result<RegistryJson> Call(const std::string& method, const std::string& path,
                            const std::string& body) {
    httplib::Client client(origin_);
    client.set_connection_timeout(options_.timeout);
    client.set_read_timeout(options_.timeout);
    client.set_write_timeout(options_.timeout);
    if (!options_.username.empty()) {
      client.set_basic_auth(options_.username, options_.password);
    }
    httplib::Headers headers = {{"Accept", "application/vnd.schemaregistry.v1+json"}};
    httplib::Result res = method == "GET" ? client.Get(prefix_ + path, headers)
                                          : client.Post(prefix_ + path, headers, body,
                                                        "application/vnd.schemaregistry.v1+json");
    if (!res) {
      return IOError("{}: {} {} failed: {}", Describe(), method, path,
                     httplib::to_string(res.error()));
    }
    RegistryJson j = RegistryJson::parse(res->body, nullptr, false);
    if (res->status == 404) {
      return NotFoundError(
          "{}: {}", Describe(),
          j.is_object() && j.contains("message") ? j["message"].dump() : res->body);
    }
    if (res->status != 200) {
      return FailedPreconditionError("{}: {} {} answered {}: {}", Describe(), method, path,
                                     res->status, res->body.substr(0, 500));
    }
    if (j.is_discarded())
      return InvalidArgumentError("{}: {} answered with no JSON", Describe(), path);
    return j;
  }

  // {schema, schemaType, references, id}: the references fetched (by subject and version),
  // transitively, dependencies first.
  Result<std::shared_ptr<const SchemaRecord>> Record(const RegistryJson& j) {
    if (!j.is_object() || !j.contains("schema") || !j["schema"].is_string()) {
      return InvalidArgumentError("{}: an answer without a schema: {}", Describe(),
                                  j.dump().substr(0, 200));
    }
    auto r = std::make_shared<SchemaRecord>();
    r->id = j.contains("id") && j["id"].is_number_integer() ? j["id"].get<int32_t>() : 0;
    r->text = j["schema"].get<std::string>();
    if (j.contains("schemaType") && j["schemaType"].is_string()) {
      std::optional<SchemaType> t = registry::ParseSchemaType(j["schemaType"].get<std::string>());
      if (!t)
        return InvalidArgumentError("{}: unknown schemaType {}", Describe(),
                                    j["schemaType"].dump());
      r->type = *t;
    }
    std::vector<std::string> seen;
    RETURN_IF_ERROR(AddReferences(j, &r->references, &seen, 0));
    return std::shared_ptr<const SchemaRecord>(std::move(r));
  }

  Status AddReferences(const RegistryJson& j, std::vector<registry::Reference>* out,
                       std::vector<std::string>* seen, int depth) {
    if (!j.contains("references") || !j["references"].is_array()) return Status::OK();
    if (depth > 32) return InvalidArgumentError("{}: references nest too deep", Describe());
    for (const RegistryJson& ref : j["references"]) {
      if (!ref.is_object() || !ref.contains("name") || !ref.contains("subject") ||
          !ref.contains("version") || !ref["name"].is_string() || !ref["subject"].is_string()) {
        return InvalidArgumentError("{}: a malformed reference: {}", Describe(), ref.dump());
      }
      std::string name = ref["name"].get<std::string>();
      if (std::find(seen->begin(), seen->end(), name) != seen->end()) continue;
      seen->push_back(name);
      ASSIGN_OR_RETURN(
          RegistryJson dep,
          Get(fmt::format("/subjects/{}/versions/{}",
                          PathSegment(ref["subject"].get<std::string>()), ref["version"].dump())));
      RETURN_IF_ERROR(AddReferences(dep, out, seen, depth + 1));
      if (!dep.contains("schema") || !dep["schema"].is_string()) {
        return InvalidArgumentError("{}: reference {} has no schema", Describe(), name);
      }
      out->push_back({name, dep["schema"].get<std::string>()});
    }
    return Status::OK();
  }

  HttpSchemaSourceOptions options_;
  std::string origin_;  // "http://host:port"
  std::string prefix_;  // "" or "/path"
};

}  // namespace

std::shared_ptr<SchemaSource> MakeRegistrySchemaSource(registry::Registry* registry) {
  return std::make_shared<RegistrySource>(registry);
}

Result<std::shared_ptr<SchemaSource>> MakeHttpSchemaSource(HttpSchemaSourceOptions options) {
  std::string_view url = options.url;
  std::string_view scheme;
  if (url.starts_with("http://")) {
    scheme = "http://";
  } else if (url.starts_with("https://")) {
    return InvalidArgumentError(
        "schema registry url '{}': https is not supported yet; use http:// "
        "(on loopback) ",
        options.url);
  } else {
    return InvalidArgumentError("schema registry url '{}' is not http://HOST[:PORT][/PATH]",
                                options.url);
  }
  std::string_view rest = url.substr(scheme.size());
  size_t slash = rest.find('/');
  std::string_view host_port = rest.substr(0, slash);
  std::string prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (host_port.empty() || host_port.find('@') != std::string_view::npos) {
    return InvalidArgumentError(
        "schema registry url '{}': give the host (credentials go in "
        "username and password)",
        options.url);
  }
  std::string origin = std::string(scheme) + std::string(host_port);
  return std::shared_ptr<SchemaSource>(
      std::make_shared<HttpSource>(std::move(options), std::move(origin), std::move(prefix)));
}

}  // namespace sluice::schema
