#include "lake/rest_client.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>
#include <thread>

#include "base/logging.h"
#include "lake/iceberg_json.h"
#include "lake/iceberg_schema.h"
#include "s3/http_call.h"
#include "s3/s3_client.h"
#include "s3/sigv4.h"

namespace sluice::lake {

const std::vector<std::string_view> kRestCatalogKeys = {
    "catalog.type",       "catalog.uri",   "catalog.warehouse",         "catalog.credential",
    "catalog.token",      "catalog.scope", "catalog.oauth2_server_uri", "catalog.request_timeout",
    "catalog.max_retries"};

Result<std::optional<RestCatalogConfig>> RestCatalogConfigFrom(const Config& config) {
  bool any = false;
  for (std::string_view k : kRestCatalogKeys) any = any || config.Has(k);
  if (!any) return std::optional<RestCatalogConfig>();
  ASSIGN_OR_RETURN(std::string type, config.GetString("catalog.type", ""));
  if (type != "rest") {
    return InvalidArgumentError(
        "catalog.type ({}) must be rest (an Iceberg REST catalog), not \"{}\"",
        config.Has("catalog.type") ? "set in " + config.Origin("catalog.type") : "not set", type);
  }
  RestCatalogConfig c;
  ASSIGN_OR_RETURN(c.uri, config.GetString("catalog.uri", ""));
  if (!c.uri.starts_with("http://") && !c.uri.starts_with("https://")) {
    return InvalidArgumentError(
        "catalog.uri ({}) must be an http:// or https:// URL",
        config.Has("catalog.uri") ? "set in " + config.Origin("catalog.uri") : "not set");
  }
  ASSIGN_OR_RETURN(c.warehouse, config.GetString("catalog.warehouse", ""));
  ASSIGN_OR_RETURN(c.credential, config.GetString("catalog.credential", ""));
  ASSIGN_OR_RETURN(c.token, config.GetString("catalog.token", ""));
  if (!c.credential.empty() && !c.token.empty()) {
    return InvalidArgumentError("catalog.credential ({}) and catalog.token ({}): set one, not both",
                                config.Origin("catalog.credential"),
                                config.Origin("catalog.token"));
  }
  ASSIGN_OR_RETURN(c.scope, config.GetString("catalog.scope", "catalog"));
  ASSIGN_OR_RETURN(c.oauth2_server_uri, config.GetString("catalog.oauth2_server_uri", ""));
  ASSIGN_OR_RETURN(int64_t timeout_ms, config.GetDurationMs("catalog.request_timeout", 30000));
  if (timeout_ms < 100 || timeout_ms > 600000) {
    return InvalidArgumentError("catalog.request_timeout (set in {}) must be from 100ms to 10m",
                                config.Origin("catalog.request_timeout"));
  }
  c.request_timeout = std::chrono::milliseconds(timeout_ms);
  ASSIGN_OR_RETURN(int64_t retries, config.GetInt("catalog.max_retries", 3, 0, 100));
  c.max_retries = static_cast<int>(retries);
  return std::optional<RestCatalogConfig>(std::move(c));
}

namespace {

const Logger kLog("rest-catalog");
constexpr std::chrono::milliseconds kRetryBase{200};
constexpr std::chrono::milliseconds kMaxRetryDelay{5000};
// A token is fetched again when this share of its lifetime is left.
constexpr double kRefreshShare = 0.1;

std::string Dotted(const std::vector<std::string>& ns) {
  return fmt::format("{}", fmt::join(ns, "."));
}

bool Transient(const Status& st) { return st.code() == StatusCode::kIOError; }
bool TransientHttp(long status) { return status == 429 || status >= 500; }

}  // namespace

struct RestCatalogClient::Reply {
  long status = 0;
  std::string body;
  // The ErrorModel's message and type, when the body is one.
  std::string Message() const {
    Result<Json> j = ParseJson(body, "error");
    if (j.ok() && j->is_object() && j->contains("error") && (*j)["error"].is_object()) {
      const Json& e = (*j)["error"];
      std::string type =
          e.contains("type") && e["type"].is_string() ? e["type"].get<std::string>() : "";
      std::string message =
          e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : "";
      return type.empty() ? message : fmt::format("{}: {}", type, message);
    }
    std::string shown = body.substr(0, 200);
    return shown.empty() ? "no body" : shown;
  }
};

std::string EncodeNamespace(const std::vector<std::string>& ns) {
  std::string out;
  for (size_t i = 0; i < ns.size(); ++i) {
    if (i > 0) out += "%1F";
    out += s3::UriEncode(ns[i], false);
  }
  return out;
}

std::string RestCatalogClient::Describe() const { return fmt::format("REST catalog {}", base_); }

std::string RestCatalogClient::Url(const std::string& path) const {
  return prefix_.empty() ? fmt::format("{}/v1/{}", base_, path)
                         : fmt::format("{}/v1/{}/{}", base_, prefix_, path);
}

Result<std::string> RestCatalogClient::Authorization(bool refresh) const {
  std::lock_guard<std::mutex> lock(token_mu_);
  if (config_.credential.empty()) {
    return config_.token.empty() ? std::string() : "Authorization: Bearer " + config_.token;
  }
  if (!token_.empty() && !refresh && std::chrono::steady_clock::now() < token_refresh_at_) {
    return "Authorization: Bearer " + token_;
  }
  std::string id, secret = config_.credential;
  if (size_t colon = config_.credential.find(':'); colon != std::string::npos) {
    id = config_.credential.substr(0, colon);
    secret = config_.credential.substr(colon + 1);
  }
  std::string form = "grant_type=client_credentials";
  if (!id.empty()) form += "&client_id=" + s3::UriEncode(id, false);
  form += "&client_secret=" + s3::UriEncode(secret, false);
  if (!config_.scope.empty()) form += "&scope=" + s3::UriEncode(config_.scope, false);
  std::string url =
      config_.oauth2_server_uri.empty() ? base_ + "/v1/oauth/tokens" : config_.oauth2_server_uri;
  std::minstd_rand random(std::random_device{}());
  Result<s3::HttpReply> reply = Status::OK();
  for (int attempt = 0;; ++attempt) {
    reply = s3::HttpCall({.method = "POST",
                          .url = url,
                          .headers = {"Content-Type: application/x-www-form-urlencoded",
                                      "Accept: application/json", "Expect:"},
                          .body = form,
                          .timeout = config_.request_timeout,
                          .max_reply_bytes = 1 << 20,
                          .what = fmt::format("{}: token request to {}", Describe(), url)});
    bool transient = reply.ok() ? TransientHttp(reply->status) : Transient(reply.status());
    if (!transient || attempt >= config_.max_retries) break;
    auto cap = std::min<std::chrono::milliseconds>(kRetryBase * (1LL << attempt), kMaxRetryDelay);
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::uniform_int_distribution<int64_t>(cap.count() / 2, cap.count())(random)));
  }
  if (!reply.ok()) return reply.status();
  Result<Json> j = ParseJson(reply->body, "OAuthTokenResponse");
  if (reply->status != 200 || !j.ok() || !j->is_object() || !j->contains("access_token") ||
      !(*j)["access_token"].is_string()) {
    std::string why;
    if (j.ok() && j->is_object() && j->contains("error") && (*j)["error"].is_string()) {
      why = (*j)["error"].get<std::string>();
      if (j->contains("error_description") && (*j)["error_description"].is_string())
        why += ": " + (*j)["error_description"].get<std::string>();
    } else {
      why = j.ok() ? "no access_token in the reply" : j.status().message();
    }
    if (reply->status >= 500 || reply->status == 429) {
      // The endpoint failed, after the retries: not a verdict on the credential.
      return Status(StatusCode::kUnavailable,
                    fmt::format("{}: the token endpoint {} failed (HTTP {}): {}", Describe(), url,
                                reply->status, why.substr(0, 200)));
    }
    return FailedPreconditionError("{}: the token endpoint {} refused the credential (HTTP {}): {}",
                                   Describe(), url, reply->status, why);
  }
  token_ = (*j)["access_token"].get<std::string>();
  int64_t expires_in = 3600;
  if (j->contains("expires_in") && (*j)["expires_in"].is_number_integer())
    expires_in = std::clamp<int64_t>((*j)["expires_in"].get<int64_t>(), 1, 366 * 86400);
  token_refresh_at_ =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(expires_in * 1000 * (1 - kRefreshShare)));
  return "Authorization: Bearer " + token_;
}

Result<RestCatalogClient::Reply> RestCatalogClient::SendOnce(const std::string& method,
                                                             const std::string& url,
                                                             const std::string& body,
                                                             const std::string& what) const {
  Result<s3::HttpReply> reply = Status::OK();
  for (int login = 0; login < 2; ++login) {
    ASSIGN_OR_RETURN(std::string authorization, Authorization(login > 0));
    std::vector<std::string> headers = {"Accept: application/json", "Expect:"};
    if (!authorization.empty()) headers.push_back(std::move(authorization));
    if (!body.empty()) headers.push_back("Content-Type: application/json");
    reply = s3::HttpCall({.method = method,
                          .url = url,
                          .headers = std::move(headers),
                          .body = body,
                          .timeout = config_.request_timeout,
                          .max_reply_bytes = 256u << 20,
                          .what = what});
    if (!reply.ok()) return reply.status();
    // A token that expired early (or was revoked): once more with a new one.
    if (reply->status != 401 || config_.credential.empty()) break;
  }
  return Reply{reply->status, std::move(reply->body)};
}

Result<RestCatalogClient::Reply> RestCatalogClient::Send(const std::string& method,
                                                         const std::string& path,
                                                         const std::string& body, bool retry,
                                                         const std::string& what) const {
  const std::string url = Url(path);
  const std::string label = fmt::format("{}: {} {}", Describe(), what, url);
  std::minstd_rand random(std::random_device{}());
  for (int attempt = 0;; ++attempt) {
    Result<Reply> reply = SendOnce(method, url, body, label);
    bool transient = reply.ok() ? TransientHttp(reply->status) : Transient(reply.status());
    if (!retry || !transient || attempt >= config_.max_retries) return reply;
    auto cap = std::min<std::chrono::milliseconds>(kRetryBase * (1LL << attempt), kMaxRetryDelay);
    auto delay = std::chrono::milliseconds(
        std::uniform_int_distribution<int64_t>(cap.count() / 2, cap.count())(random));
    SLUICE_LOG(kLog, kInfo, "{}: retry {} of {} in {} ms after {}", label, attempt + 1,
               config_.max_retries, delay.count(),
               reply.ok() ? fmt::format("HTTP {}", reply->status) : reply.status().message());
    std::this_thread::sleep_for(delay);
  }
}

namespace {

// The Status of a failed reply: 404 NotFound, 409 AlreadyExists, 400/422 InvalidArgument,
// 401/403 FailedPrecondition, 5xx Unavailable, others IOError.
Status ReplyError(long status, const std::string& what, const std::string& message) {
  std::string text = fmt::format("{}: HTTP {}: {}", what, status, message);
  switch (status) {
    case 404:
      return Status(StatusCode::kNotFound, std::move(text));
    case 409:
      return Status(StatusCode::kAlreadyExists, std::move(text));
    case 400:
    case 406:
    case 422:
      return Status(StatusCode::kInvalidArgument, std::move(text));
    case 401:
    case 403:
    case 419:
      return Status(StatusCode::kFailedPrecondition, std::move(text));
    default:
      if (status >= 500) return Status(StatusCode::kUnavailable, std::move(text));
      return Status(StatusCode::kIOError, std::move(text));
  }
}

// Unwraps a Send: the transport failure, or the reply's error unless 2xx.
#define SLUICE_REST_CHECK(reply, what)                                           \
  do {                                                                           \
    if ((reply).status / 100 != 2)                                               \
      return ReplyError((reply).status, fmt::format("{}: {}", Describe(), what), \
                        (reply).Message());                                      \
  } while (false)

Result<std::vector<std::string>> StringList(const Json& j, std::string_view path) {
  std::vector<std::string> out;
  if (!j.is_array()) return CorruptionError("{}: not an array", path);
  for (size_t i = 0; i < j.size(); ++i) {
    ASSIGN_OR_RETURN(std::string s, JsonToString(j[i], JsonPath(path, i)));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<RestCatalogClient>> RestCatalogClient::Connect(RestCatalogConfig config) {
  std::string base = config.uri;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (!base.starts_with("http://") && !base.starts_with("https://")) {
    return InvalidArgumentError("catalog uri \"{}\" is not an http:// or https:// URL", config.uri);
  }
  if (base.find_first_of("?# \t\r\n") != std::string::npos) {
    return InvalidArgumentError("catalog uri \"{}\" must not have a query or spaces", config.uri);
  }
  if (!config.credential.empty() && !config.token.empty()) {
    return InvalidArgumentError("catalog: set credential or token, not both");
  }
  if (config.max_retries < 0) return InvalidArgumentError("catalog: max_retries is negative");
  auto client = std::shared_ptr<RestCatalogClient>(new RestCatalogClient(std::move(config)));
  client->base_ = base;
  std::string path = "config";
  if (!client->config_.warehouse.empty())
    path += "?warehouse=" + s3::UriEncode(client->config_.warehouse, false);
  // /v1/config has no prefix.
  ASSIGN_OR_RETURN(Reply reply, client->Send("GET", path, "", true, "GET config"));
  if (reply.status / 100 != 2)
    return ReplyError(reply.status, client->Describe() + ": GET /v1/config", reply.Message());
  ASSIGN_OR_RETURN(Json j, ParseJson(reply.body, "CatalogConfig"));
  if (!j.is_object()) return CorruptionError("{}: /v1/config is not an object", client->Describe());
  // Overrides win over defaults; only the keys a client of the catalog API needs.
  for (const char* section : {"defaults", "overrides"}) {
    if (!j.contains(section) || !j[section].is_object()) continue;
    const Json& values = j[section];
    if (values.contains("prefix") && values["prefix"].is_string()) {
      std::string prefix = values["prefix"].get<std::string>();
      while (!prefix.empty() && prefix.front() == '/') prefix.erase(prefix.begin());
      while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
      client->prefix_ = prefix;
    }
    if (values.contains("uri") && values["uri"].is_string()) {
      std::string uri = values["uri"].get<std::string>();
      while (!uri.empty() && uri.back() == '/') uri.pop_back();
      if (uri.starts_with("http://") || uri.starts_with("https://")) client->base_ = uri;
    }
  }
  return client;
}

Result<std::vector<std::vector<std::string>>> RestCatalogClient::ListNamespaces(
    const std::vector<std::string>& parent) const {
  std::vector<std::vector<std::string>> out;
  std::string token;
  for (int page = 0; page < 100000; ++page) {
    std::string path = "namespaces";
    std::string sep = "?";
    if (!parent.empty()) {
      path += "?parent=" + EncodeNamespace(parent);
      sep = "&";
    }
    if (!token.empty()) path += sep + "pageToken=" + s3::UriEncode(token, false);
    ASSIGN_OR_RETURN(Reply reply, Send("GET", path, "", true, "list namespaces"));
    SLUICE_REST_CHECK(reply, fmt::format("namespaces of {}", Dotted(parent)));
    ASSIGN_OR_RETURN(Json j, ParseJson(reply.body, "ListNamespacesResponse"));
    if (!j.is_object() || !j.contains("namespaces") || !j["namespaces"].is_array())
      return CorruptionError("{}: ListNamespacesResponse without namespaces", Describe());
    for (size_t i = 0; i < j["namespaces"].size(); ++i) {
      ASSIGN_OR_RETURN(std::vector<std::string> ns,
                       StringList(j["namespaces"][i], JsonPath("$.namespaces", i)));
      out.push_back(std::move(ns));
    }
    if (!j.contains("next-page-token") || !j["next-page-token"].is_string()) return out;
    token = j["next-page-token"].get<std::string>();
    if (token.empty()) return out;
  }
  return CorruptionError("{}: more than 100000 pages of namespaces", Describe());
}

Status RestCatalogClient::CreateNamespace(const std::vector<std::string>& ns) const {
  Json body = {{"namespace", ns}, {"properties", Json::object()}};
  ASSIGN_OR_RETURN(Reply reply, Send("POST", "namespaces", body.dump(), true, "create namespace"));
  SLUICE_REST_CHECK(reply, fmt::format("create namespace {}", Dotted(ns)));
  return Status::OK();
}

Result<std::vector<std::string>> RestCatalogClient::ListTables(
    const std::vector<std::string>& ns) const {
  std::vector<std::string> out;
  std::string token;
  for (int page = 0; page < 100000; ++page) {
    std::string path = fmt::format("namespaces/{}/tables", EncodeNamespace(ns));
    if (!token.empty()) path += "?pageToken=" + s3::UriEncode(token, false);
    ASSIGN_OR_RETURN(Reply reply, Send("GET", path, "", true, "list tables"));
    SLUICE_REST_CHECK(reply, fmt::format("tables of {}", Dotted(ns)));
    ASSIGN_OR_RETURN(Json j, ParseJson(reply.body, "ListTablesResponse"));
    if (!j.is_object() || !j.contains("identifiers") || !j["identifiers"].is_array())
      return CorruptionError("{}: ListTablesResponse without identifiers", Describe());
    for (const Json& id : j["identifiers"]) {
      if (!id.is_object() || !id.contains("name") || !id["name"].is_string())
        return CorruptionError("{}: a table identifier without a name", Describe());
      out.push_back(id["name"].get<std::string>());
    }
    if (!j.contains("next-page-token") || !j["next-page-token"].is_string()) return out;
    token = j["next-page-token"].get<std::string>();
    if (token.empty()) return out;
  }
  return CorruptionError("{}: more than 100000 pages of tables", Describe());
}

Result<RestCatalogClient::Loaded> RestCatalogClient::LoadedFrom(const Reply& reply,
                                                                const std::string& what) const {
  ASSIGN_OR_RETURN(Json j, ParseJson(reply.body, "LoadTableResult"));
  ASSIGN_OR_RETURN(JsonObject o, JsonObject::Of(j, "$"));
  Loaded out;
  ASSIGN_OR_RETURN(const Json* metadata, o.Require("metadata"));
  Result<TableMetadata> m = TableMetadataFromJson(*metadata);
  if (!m.ok()) return CorruptionError("{}: {}: {}", Describe(), what, m.status().message());
  out.metadata = std::move(*m);
  if (const Json* loc = o.Get("metadata-location"); loc != nullptr && loc->is_string())
    out.metadata_location = loc->get<std::string>();
  if (const Json* config = o.Get("config"); config != nullptr && config->is_object()) {
    for (auto it = config->begin(); it != config->end(); ++it) {
      if (it.value().is_string()) out.config[it.key()] = it.value().get<std::string>();
    }
  }
  return out;
}

Result<RestCatalogClient::Loaded> RestCatalogClient::LoadTable(const std::vector<std::string>& ns,
                                                               const std::string& name) const {
  std::string path =
      fmt::format("namespaces/{}/tables/{}", EncodeNamespace(ns), s3::UriEncode(name, false));
  std::string what = fmt::format("table {}.{}", Dotted(ns), name);
  ASSIGN_OR_RETURN(Reply reply, Send("GET", path, "", true, "load " + what));
  SLUICE_REST_CHECK(reply, what);
  return LoadedFrom(reply, what);
}

Result<RestCatalogClient::Loaded> RestCatalogClient::CreateTable(
    const std::vector<std::string>& ns, const std::string& name, const Schema& schema,
    const PartitionSpec& spec, const std::map<std::string, std::string>& properties) const {
  Json props = Json::object();
  for (const auto& [k, v] : properties) props[k] = v;
  Json body = {{"name", name},
               {"schema", SchemaToJson(schema)},
               {"partition-spec", PartitionSpecToJson(spec)},
               {"properties", props}};
  std::string what = fmt::format("create table {}.{}", Dotted(ns), name);
  ASSIGN_OR_RETURN(Reply reply,
                   Send("POST", fmt::format("namespaces/{}/tables", EncodeNamespace(ns)),
                        body.dump(), true, what));
  SLUICE_REST_CHECK(reply, what);
  return LoadedFrom(reply, what);
}

Result<RestCatalogClient::Loaded> RestCatalogClient::CommitTable(
    const std::vector<std::string>& ns, const std::string& name,
    const std::vector<TableRequirement>& requirements,
    const std::vector<TableUpdate>& updates) const {
  Json reqs = Json::array();
  for (const TableRequirement& r : requirements) reqs.push_back(TableRequirementToJson(r));
  Json ups = Json::array();
  for (const TableUpdate& u : updates) ups.push_back(TableUpdateToJson(u));
  Json body = {{"identifier", {{"namespace", ns}, {"name", name}}},
               {"requirements", reqs},
               {"updates", ups}};
  std::string what = fmt::format("commit to table {}.{}", Dotted(ns), name);
  Result<Reply> reply =
      Send("POST",
           fmt::format("namespaces/{}/tables/{}", EncodeNamespace(ns), s3::UriEncode(name, false)),
           body.dump(), false, what);
  if (!reply.ok()) {
    // The request may have reached the catalog: its outcome is unknown.
    if (Transient(reply.status()))
      return Status(StatusCode::kUnavailable, reply.status().message());
    return reply.status();
  }
  SLUICE_REST_CHECK(*reply, what);
  return LoadedFrom(*reply, what);
}

namespace {

class RestStore : public MetadataStore {
 public:
  RestStore(std::shared_ptr<const RestCatalogClient> catalog, std::vector<std::string> ns,
            std::string name)
      : catalog_(std::move(catalog)), ns_(std::move(ns)), name_(std::move(name)) {}

  Result<std::optional<Version>> Load() const override {
    Result<RestCatalogClient::Loaded> loaded = catalog_->LoadTable(ns_, name_);
    if (!loaded.ok()) {
      if (loaded.status().code() == StatusCode::kNotFound) return std::optional<Version>();
      return loaded.status();
    }
    return std::optional<Version>(
        Version{std::move(loaded->metadata), std::move(loaded->metadata_location), ++loads_});
  }

  Result<Version> Commit(const Version& base, const std::vector<TableUpdate>& updates,
                         int64_t) const override {
    const TableMetadata& m = base.metadata;
    std::vector<TableRequirement> requirements;
    requirements.push_back({.kind = RequirementKind::kAssertTableUuid, .uuid = m.table_uuid});
    TableRequirement main{.kind = RequirementKind::kAssertRefSnapshotId,
                          .ref = std::string(kMainBranch)};
    if (auto it = m.refs.find(std::string(kMainBranch)); it != m.refs.end())
      main.snapshot_id = it->second.snapshot_id;
    requirements.push_back(main);
    requirements.push_back(
        {.kind = RequirementKind::kAssertCurrentSchemaId, .id = m.current_schema_id});
    requirements.push_back(
        {.kind = RequirementKind::kAssertLastAssignedFieldId, .id = m.last_column_id});
    requirements.push_back(
        {.kind = RequirementKind::kAssertDefaultSpecId, .id = m.default_spec_id});
    requirements.push_back(
        {.kind = RequirementKind::kAssertLastAssignedPartitionId, .id = m.last_partition_id});
    ASSIGN_OR_RETURN(RestCatalogClient::Loaded next,
                     catalog_->CommitTable(ns_, name_, requirements, updates));
    return Version{std::move(next.metadata), std::move(next.metadata_location), base.version + 1};
  }

  std::string Describe() const override {
    return fmt::format("{}: table {}.{}", catalog_->Describe(), Dotted(ns_), name_);
  }
  bool HonoursMetadataPath() const override { return true; }

 private:
  std::shared_ptr<const RestCatalogClient> catalog_;
  std::vector<std::string> ns_;
  std::string name_;
  mutable int64_t loads_ = 0;  // a version counter: each load counts one
};

}  // namespace

std::shared_ptr<const MetadataStore> RestTableStore(
    std::shared_ptr<const RestCatalogClient> catalog, std::vector<std::string> ns,
    std::string name) {
  return std::make_shared<RestStore>(std::move(catalog), std::move(ns), std::move(name));
}

Result<Table> CreateRestTable(std::shared_ptr<const RestCatalogClient> catalog,
                              const std::vector<std::string>& ns, const std::string& name,
                              const Schema& schema, const PartitionSpec& spec,
                              const std::map<std::string, std::string>& properties) {
  Result<RestCatalogClient::Loaded> created =
      catalog->CreateTable(ns, name, schema, spec, properties);
  if (!created.ok() && created.status().code() == StatusCode::kNotFound) {
    // The namespace (or a level of it) is missing: made level by level, then again.
    for (size_t i = 1; i <= ns.size(); ++i) {
      std::vector<std::string> level(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(i));
      Status st = catalog->CreateNamespace(level);
      if (!st.ok() && st.code() != StatusCode::kAlreadyExists) return st;
    }
    created = catalog->CreateTable(ns, name, schema, spec, properties);
  }
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
    return created.status();
  }
  // Created (by this call or another writer): loaded as any table is.
  Result<Table> table = Table::Open(RestTableStore(std::move(catalog), ns, name));
  if (!table.ok() && table.status().code() == StatusCode::kNotFound && !created.ok()) {
    return created.status();  // a 409 that is not a table there: the catalog's reason
  }
  return table;
}

}  // namespace sluice::lake
