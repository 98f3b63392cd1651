// ServeProcess: builds `sluice serve` from its Config and stops it in order.
#include "app/serve.h"

#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "app/http_front_door.h"
#include "app/loggers.h"
#include "app/pipeline_grants.h"
#include "app/schema_registry_port.h"
#include "auth/http_auth.h"
#include "base/http_server.h"
#include "base/logging.h"
#include "base/metrics.h"
#include "base/strings.h"
#include "broker/serve_config.h"
#include "broker/service.h"
#include "console/api.h"
#include "console/assets/static_route.h"
#include "lake/object_cache.h"
#include "lake/rest_catalog.h"
#include "lake/rest_client.h"
#include "lake/storage.h"
#include "net/tls.h"
#include "pipeline/pipeline_config.h"
#include "query/authz/catalog_access.h"
#include "query/engine.h"
#include "query/lake_planner/lake_catalog.h"
#include "query/server.h"
#include "schema/schema_source.h"

namespace sluice::app {
namespace {

// The console's view of the pipelines folder (console::PipelineControl over PipelineSet).
class ConsolePipelines final : public console::PipelineControl {
 public:
  ConsolePipelines(PipelineSet* set, std::string dir) : set_(set), dir_(std::move(dir)) {}
  std::string dir() const override { return dir_; }
  std::vector<console::PipelineInfo> List() const override {
    std::vector<console::PipelineInfo> out;
    for (const PipelineStatus& s : set_->List()) {
      console::PipelineInfo p{s.name,  s.file,        s.running,
                              s.error, s.messages_in, s.memory_limit_bytes};
      p.stopped = s.stopped;
      out.push_back(std::move(p));
    }
    return out;
  }
  Status Apply(const std::string& file, bool is_new, const std::string& name) override {
    if (is_new) return set_->Add(file);
    // A stopped pipeline's new file is read when it starts.
    for (const PipelineStatus& s : set_->List()) {
      if (s.name == name && s.stopped) return Status::OK();
    }
    return set_->Restart(name);
  }
  Status Restart(const std::string& name) override { return set_->Restart(name); }
  Status Remove(const std::string& name) override { return set_->Remove(name); }
  Status Stop(const std::string& name) override { return set_->StopOne(name); }
  Status Start(const std::string& name) override { return set_->StartOne(name); }
  int64_t memory_budget_bytes() const override { return set_->memory_budget_bytes(); }
  int64_t memory_in_use_bytes() const override { return set_->memory_in_use(); }
  std::vector<pipeline::RecentFailure> RecentFailures(const std::string& name) const override {
    return set_->RecentFailures(name);
  }

 private:
  PipelineSet* set_;
  std::string dir_;
};

// The HTTP port when http.addr (--http-addr) does not say otherwise.
constexpr const char* kDefaultHttpAddr = "127.0.0.1:8181";

// Tiered storage's store (docs/design/0025): the lake's S3 storage under the
// tiered_storage bucket, so topics and tables share one S3 client and its settings; its
// own cache of the segments read (decision 10).
class LakeRemoteStore : public broker::RemoteStore {
 public:
  LakeRemoteStore(const lake::Storage* storage, std::string root,
                  std::unique_ptr<lake::ObjectCache> cache)
      : storage_(storage), root_(std::move(root)), cache_(std::move(cache)) {}
  Status Upload(const std::string& local_path, const std::string& key) const override {
    return storage_->Upload(local_path, Location(key));
  }
  Status Put(const std::string& key, std::string_view bytes) const override {
    return storage_->Write(Location(key), bytes);
  }
  Result<std::string> Get(const std::string& key) const override {
    return storage_->Read(Location(key));
  }
  Result<std::vector<std::string>> List(const std::string& prefix) const override {
    ASSIGN_OR_RETURN(std::vector<lake::StoredObject> objects, storage_->List(Location(prefix)));
    std::vector<std::string> keys;
    for (const lake::StoredObject& o : objects) {
      if (o.location.size() > root_.size() + 1 && o.location.starts_with(root_ + "/"))
        keys.push_back(o.location.substr(root_.size() + 1));
    }
    return keys;
  }
  Status Delete(const std::string& key) const override { return storage_->Delete(Location(key)); }
  Result<Copy> Fetch(const std::string& key, uint64_t size) const override {
    std::vector<uint64_t> sizes;
    if (size > 0) sizes.push_back(size);
    ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const lake::CachedObject>> copies,
                     cache_->Fetch({Location(key)}, sizes));
    return Copy{copies.front()->path(), copies.front()};
  }
  Result<Copy> FetchRange(const std::string& key, uint64_t offset, uint64_t length) const override {
    ASSIGN_OR_RETURN(std::shared_ptr<const lake::CachedObject> copy,
                     cache_->FetchRange(Location(key), offset, length));
    return Copy{copy->path(), copy};
  }
  std::string Describe() const override { return root_; }

 private:
  std::string Location(const std::string& key) const { return root_ + "/" + key; }
  const lake::Storage* storage_;
  std::string root_;
  std::unique_ptr<lake::ObjectCache> cache_;
};

// Tiered reads' cache (docs/design/0025, decision 10): in `configured` when set; else in
// memory (/dev/shm) when it has room for the whole budget and can be used, and otherwise
// beside the S3 cache on disk.
Result<std::unique_ptr<lake::ObjectCache>> OpenTieredCache(const lake::Storage& storage,
                                                           const std::string& configured,
                                                           uint64_t budget,
                                                           const lake::S3Settings& s3) {
  auto open = [&](const std::string& dir) {
    return lake::ObjectCache::Open(storage, dir, budget, 8, "tiered_storage");
  };
  if (!configured.empty()) return open(configured);
  struct statvfs vfs {};
  if (::statvfs("/dev/shm", &vfs) == 0 &&
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize >= budget) {
    auto cache = open(fmt::format("/dev/shm/sluice-tiered-{}", ::getuid()));
    if (cache.ok()) return cache;
    SLUICE_LOG(kLog, kWarn, "tiered storage's cache: {}; on disk instead",
               cache.status().message());
  }
  return open(lake::S3CacheRoot(s3) + "-tiered");
}

// The keys this root reads itself.
constexpr std::string_view kOwnKeys[] = {"log.level",
                                         "log.format",
                                         "http.addr",
                                         "http.tls",
                                         "http.auth",
                                         "http.auth_metrics",
                                         "http.token_ttl",
                                         "http.token_max_ttl",
                                         "http.allowed_hosts",
                                         "http.vend_credentials",
                                         "warehouse",
                                         "tiered_storage.cache_dir",
                                         "tiered_storage.cache_bytes"};

// Bearer tokens' lifetimes (docs/design/0021): the default, and the most a client may ask.
constexpr int64_t kDefaultTokenTtlMs = 3600'000;
constexpr int64_t kDefaultTokenMaxTtlMs = 30LL * 86400'000;
constexpr int64_t kLongestTokenTtlMs = 366LL * 86400'000;

// The names a request's Host may give the HTTP port (docs/design/0021, against DNS
// rebinding): loopback's, http.addr's host (this machine's name when that is a wildcard),
// and http.allowed_hosts. IP literals pass anyway (HttpBrowserGuard).
Result<std::vector<std::string>> AllowedHosts(const Config& config, const std::string& http_addr) {
  std::vector<std::string> hosts = {"localhost", "127.0.0.1", "::1"};
  auto add = [&](std::string h) {
    h = AsciiLower(h);
    if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
    if (!h.empty() && h.back() == '.') h.pop_back();
    if (!h.empty() && std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  };
  const std::string host = http_addr.substr(0, http_addr.rfind(':'));
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0) add(name);
  } else {
    add(host);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> extra, config.GetList("http.allowed_hosts"));
  for (const std::string& h : extra) {
    // A port or a URL would never match: a Host's name is compared without its port.
    const bool bracketed = h.size() > 2 && h.front() == '[' && h.back() == ']';
    if (h.empty() || (!bracketed && h.find_first_of(" /:@\t") != std::string::npos)) {
      return InvalidArgumentError(
          "http.allowed_hosts (set in {}): '{}' is not a host name (no scheme, port or path; "
          "\"*\" allows any)",
          config.Origin("http.allowed_hosts"), h);
    }
    add(h);
  }
  return hosts;
}

}  // namespace

Result<LogSettings> LogSettingsFrom(const Config& config) {
  LogSettings out;
  ASSIGN_OR_RETURN(std::string level, config.GetString("log.level", "info"));
  Result<LogLevel> parsed_level = ParseLogLevel(level);
  if (!parsed_level.ok()) {
    return InvalidArgumentError("log.level (set in {}): {}", config.Origin("log.level"),
                                parsed_level.status().message());
  }
  out.level = *parsed_level;
  ASSIGN_OR_RETURN(std::string format, config.GetString("log.format", "text"));
  Result<LogFormat> parsed_format = ParseLogFormat(format);
  if (!parsed_format.ok()) {
    return InvalidArgumentError("log.format (set in {}): {}", config.Origin("log.format"),
                                parsed_format.status().message());
  }
  out.format = *parsed_format;
  return out;
}

std::vector<std::string_view> ServeConfigKeys() {
  std::vector<std::string_view> keys(std::begin(kOwnKeys), std::end(kOwnKeys));
  for (std::string_view k : broker::ServeConfigKeys()) keys.push_back(k);
  for (std::string_view k : query::QueryConfigKeys()) keys.push_back(k);
  for (std::string_view k : kSchemaRegistryKeys) keys.push_back(k);
  for (std::string_view k : lake::kS3ConfigKeys) keys.push_back(k);
  for (std::string_view k : lake::kRestCatalogKeys) keys.push_back(k);
  return keys;
}

ServeProcess::ServeProcess() = default;

ServeProcess::~ServeProcess() { (void)Stop(); }

Result<std::unique_ptr<ServeProcess>> ServeProcess::Start(const Config& given,
                                                          const ServeOptions& given_options) {
  // The embedded defaults make every part work on a bare `sluice serve`
  // (docs/design/0026-console.md, decision 14): a pipelines folder and a warehouse under
  // the data directory, unless set ("off": none).
  Config config = given;
  ServeOptions options = given_options;
  bool default_pipelines_dir = false;  // DATA_DIR/pipelines, made when missing
  {
    ASSIGN_OR_RETURN(std::string data_dir, config.GetString("data_dir", "./sluice-data"));
    ASSIGN_OR_RETURN(std::string http, config.GetString("http.addr", kDefaultHttpAddr));
    // Absolute: the warehouse is also a directory the query server's DuckDB may read, and
    // a location in the tables' metadata.
    if (!data_dir.empty()) {
      std::error_code abs_ec;
      const std::filesystem::path absolute = std::filesystem::absolute(data_dir, abs_ec);
      if (!abs_ec) data_dir = absolute.lexically_normal().string();
      while (data_dir.size() > 1 && data_dir.back() == '/') data_dir.pop_back();
    }
    ASSIGN_OR_RETURN(std::string warehouse, config.GetString("warehouse", ""));
    std::error_code ec;
    // (An empty data_dir is refused below, by the broker's settings.) A check makes nothing.
    if (!data_dir.empty() && !config.Has("warehouse") && !config.Has("catalog.uri") &&
        http != "off") {
      warehouse = data_dir + "/warehouse";
      if (!options.check_only) std::filesystem::create_directories(warehouse, ec);
      if (ec) return IOError("cannot make the warehouse {}: {}", warehouse, ec.message());
      config.Set("warehouse", warehouse, "the default: data_dir/warehouse");
    } else if (warehouse == "off") {
      config.Set("warehouse", "", config.Origin("warehouse"));
    }
    default_pipelines_dir = options.pipelines_dir.empty() && !data_dir.empty();
    if (default_pipelines_dir) {
      options.pipelines_dir = data_dir + "/pipelines";
      if (!options.check_only) std::filesystem::create_directories(options.pipelines_dir, ec);
      if (ec) {
        return IOError("cannot make the pipelines folder {}: {}", options.pipelines_dir,
                       ec.message());
      }
    } else if (options.pipelines_dir == "off") {
      options.pipelines_dir.clear();
    }
  }
  auto say = [&](std::string line) {
    if (options.on_banner) options.on_banner(line);
  };
  // The broker checks every key against its own and the other modules' lists.
  ASSIGN_OR_RETURN(broker::ServeConfig sc, broker::ServeConfigFrom(config, ServeConfigKeys()));
  RETURN_IF_ERROR(LogSettingsFrom(config).status());
  // S3 for lake tables (docs/design/0024): the AWS_* environment, overridden by `s3:`.
  ASSIGN_OR_RETURN(lake::S3Settings s3_settings, lake::S3SettingsFrom(config));
  lake::ConfigureS3(s3_settings);
  // Tiered reads' cache: its own budget, in memory by default (docs/design/0025, 10).
  ASSIGN_OR_RETURN(std::string tiered_cache_dir, config.GetString("tiered_storage.cache_dir", ""));
  ASSIGN_OR_RETURN(int64_t tiered_cache_bytes,
                   config.GetBytes("tiered_storage.cache_bytes", int64_t{4} << 30));
  if (tiered_cache_bytes < (int64_t{64} << 20)) {
    return InvalidArgumentError("tiered_storage.cache_bytes (set in {}) must be at least 64MiB",
                                config.Origin("tiered_storage.cache_bytes"));
  }
  if (!sc.broker.tiered_storage_bucket.empty()) {
    const std::string root = lake::NormalLocation(sc.broker.tiered_storage_bucket);
    ASSIGN_OR_RETURN(const lake::Storage* storage, lake::StorageFor(root));
    const uint64_t budget = static_cast<uint64_t>(tiered_cache_bytes);
    if (!options.check_only) {  // a check makes no cache directory
      ASSIGN_OR_RETURN(std::unique_ptr<lake::ObjectCache> cache,
                       OpenTieredCache(*storage, tiered_cache_dir, budget, s3_settings));
      say(fmt::format("tiered storage: {}, segments read through {} ({} MiB)", root, cache->dir(),
                      budget >> 20));
      sc.broker.remote_store = std::make_shared<LakeRemoteStore>(storage, root, std::move(cache));
    }
  } else if (config.Has("tiered_storage.cache_dir") || config.Has("tiered_storage.cache_bytes")) {
    return InvalidArgumentError(
        "tiered_storage.cache_* (set in {}) without tiered_storage.bucket",
        config.Origin(config.Has("tiered_storage.cache_dir") ? "tiered_storage.cache_dir"
                                                             : "tiered_storage.cache_bytes"));
  }

  // The HTTP port (metrics, health, and the Iceberg REST catalog with a warehouse): on by
  // default; "off" turns it off.
  ASSIGN_OR_RETURN(std::string http_addr, config.GetString("http.addr", kDefaultHttpAddr));
  ASSIGN_OR_RETURN(std::string warehouse, config.GetString("warehouse", ""));
  // The query server's lake tables from an external Iceberg REST catalog instead.
  ASSIGN_OR_RETURN(std::optional<lake::RestCatalogConfig> rest_catalog,
                   lake::RestCatalogConfigFrom(config));
  if (rest_catalog && !warehouse.empty()) {
    return InvalidArgumentError(
        "warehouse (set in {}) and catalog (set in {}): the lake tables come from a warehouse "
        "this process serves, or from another catalog, not both",
        config.Origin("warehouse"), config.Origin("catalog.uri"));
  }
  if (http_addr == "off" && !warehouse.empty()) {
    return InvalidArgumentError("warehouse (set in {}) needs the HTTP port, but http.addr is off",
                                config.Origin("warehouse"));
  }
  // TLS on the HTTP port and the query server (docs/design/0019-security.md, phase C): the
  // tls: section's certificate, reloaded on SIGHUP like the Kafka listeners'.
  ASSIGN_OR_RETURN(bool http_tls, config.GetBool("http.tls", false));
  // Whether the HTTP port is on this machine only: what a login and TLS may be spared for.
  const std::string http_host = http_addr.substr(0, http_addr.rfind(':'));
  const bool http_loopback =
      http_host.starts_with("127.") || http_host == "localhost" || http_host == "[::1]";
  if (http_tls && sc.tls == nullptr) {
    return InvalidArgumentError(
        "http.tls (set in {}) serves HTTPS with the tls: section's certificate, but there is no "
        "tls: section",
        config.Origin("http.tls"));
  }
  if (http_tls && http_addr == "off") {
    return InvalidArgumentError("http.tls (set in {}): the HTTP port is off (http.addr)",
                                config.Origin("http.tls"));
  }
  // Who may use the HTTP port (phase D of 0019, and 0021): nobody is asked (none), a user
  // of the store by HTTP Basic or a bearer token (basic), or by a bearer token only (token);
  // /metrics and /healthz too with http.auth_metrics. Tokens come from POST
  // /v1/oauth/tokens, which is served in every mode.
  ASSIGN_OR_RETURN(std::string http_auth, config.GetString("http.auth", "none"));
  if (http_auth != "none" && http_auth != "basic" && http_auth != "token") {
    return InvalidArgumentError("http.auth (set in {}): '{}' is not none, basic or token",
                                config.Origin("http.auth"), http_auth);
  }
  ASSIGN_OR_RETURN(bool http_auth_metrics, config.GetBool("http.auth_metrics", false));
  if (http_auth_metrics && http_auth == "none") {
    return InvalidArgumentError(
        "http.auth_metrics (set in {}) authenticates /metrics and /healthz with http.auth, "
        "which is none",
        config.Origin("http.auth_metrics"));
  }
  ASSIGN_OR_RETURN(int64_t token_ttl_ms,
                   config.GetDurationMs("http.token_ttl", kDefaultTokenTtlMs));
  ASSIGN_OR_RETURN(int64_t token_max_ttl_ms,
                   config.GetDurationMs("http.token_max_ttl", kDefaultTokenMaxTtlMs));
  if (token_max_ttl_ms < 1000 || token_max_ttl_ms > kLongestTokenTtlMs) {
    return InvalidArgumentError("http.token_max_ttl (set in {}) must be from 1s to 366d",
                                config.Origin("http.token_max_ttl"));
  }
  if (token_ttl_ms < 1000 || token_ttl_ms > token_max_ttl_ms) {
    return InvalidArgumentError(
        "http.token_ttl ({}) must be from 1s to http.token_max_ttl ({}, {})",
        config.Has("http.token_ttl") ? "set in " + config.Origin("http.token_ttl") : "1h",
        config.Has("http.token_max_ttl") ? "set in " + config.Origin("http.token_max_ttl") : "30d",
        token_max_ttl_ms / 1000);
  }
  std::vector<std::string> allowed_hosts;
  if (http_addr != "off") {
    ASSIGN_OR_RETURN(allowed_hosts, AllowedHosts(config, http_addr));
  }
  std::unique_ptr<ServeProcess> p(new ServeProcess());
  // The REST catalog hands its own S3 credentials to clients that ask, only when told to.
  ASSIGN_OR_RETURN(bool vend, config.GetBool("http.vend_credentials", false));
  if (vend && !lake::IsS3Location(warehouse)) {
    return InvalidArgumentError(
        "http.vend_credentials (set in {}) hands out S3 credentials, but the warehouse is not "
        "on S3",
        config.Origin("http.vend_credentials"));
  }
  // A check opens an S3 warehouse (which makes nothing) but not a local one (which would
  // make its directory).
  if (!warehouse.empty() && (!options.check_only || lake::IsS3Location(warehouse))) {
    lake::RestCatalog::Options catalog_options{.warehouse = warehouse};
    if (vend) {
      catalog_options.vended_credentials = [] {
        std::map<std::string, std::string> out;
        Result<lake::S3Settings> s = lake::CurrentS3Settings();
        if (!s.ok()) return out;
        const s3::S3Options& o = s->options;
        out["s3.access-key-id"] = o.access_key_id;
        out["s3.secret-access-key"] = o.secret_access_key;
        if (!o.session_token.empty()) out["s3.session-token"] = o.session_token;
        if (!o.endpoint.empty()) out["s3.endpoint"] = o.endpoint;
        if (o.path_style) out["s3.path-style-access"] = *o.path_style ? "true" : "false";
        out["s3.region"] = o.region;
        out["client.region"] = o.region;
        return out;
      };
    }
    auto opened = lake::RestCatalog::Open(std::move(catalog_options));
    if (!opened.ok()) {
      return InvalidArgumentError("warehouse (set in {}): {}", config.Origin("warehouse"),
                                  opened.status().message());
    }
    p->catalog_ = std::move(opened).value();
  }
  ASSIGN_OR_RETURN(query::QueryServerConfig query_config, query::QueryServerConfigFrom(config));
  if (lake::IsS3Location(warehouse) || rest_catalog) {
    // DuckDB reads an S3 table's data files as local copies in the object cache (a
    // catalog's tables may be on S3; its local tables' directories are named in
    // query.allowed_directories).
    ASSIGN_OR_RETURN(lake::S3Settings s3, lake::CurrentS3Settings());
    query_config.options.allowed_directories.insert(
        query_config.options.allowed_directories.begin(), lake::S3CacheRoot(s3));
  }
  // sasl.users and query.users seed one store: a name in both must have one password.
  for (const auto& [name, password] : query_config.options.users) {
    for (const broker::SaslUser& u : sc.broker.sasl.users) {
      if (u.name == name && u.password != password) {
        return InvalidArgumentError(
            "user '{}' is in sasl.users (set in {}) and query.users (set in {}) with two "
            "passwords: one user store serves both, give it one",
            name, config.Origin("sasl.users"), config.Origin("query.users"));
      }
    }
  }
  if (query_config.tls) {
    if (sc.tls == nullptr) {
      return InvalidArgumentError(
          "query.tls (set in {}) answers SSLRequest with the tls: section's certificate, but "
          "there is no tls: section",
          config.Origin("query.tls"));
    }
    query_config.options.tls = sc.tls;
  }

  // The pipeline files are read and checked before the broker listens. They may name this
  // broker as {{ SLUICE_KAFKA_ADDR }} (unless the environment already sets it; not with
  // port 0, which is known only once listening).
  if (!options.pipelines_dir.empty()) {
    if (sc.server.port != 0) {
      ::setenv("SLUICE_KAFKA_ADDR", fmt::format("{}:{}", sc.server.host, sc.server.port).c_str(),
               0);
    }
    int64_t budget = options.pipelines_memory_budget_bytes > 0
                         ? options.pipelines_memory_budget_bytes
                         : DefaultPipelineMemoryBudget();
    // A check of a default folder not made yet finds no pipelines (serve makes it empty).
    std::error_code ec;
    if (!options.check_only || !default_pipelines_dir ||
        std::filesystem::is_directory(options.pipelines_dir, ec)) {
      ASSIGN_OR_RETURN(p->pipelines_, PipelineSet::Load(options.pipelines_dir, budget));
    }
  }
  if (options.check_only) {
    ASSIGN_OR_RETURN(
        std::string registry_addr,
        SchemaRegistryPort::CheckConfig(config, sc.tls != nullptr, sc.broker.sasl.enabled));
    // The addresses the ports would parse when they start.
    if (http_addr != "off") RETURN_IF_ERROR(SplitHostPort(http_addr, "http.addr").status());
    if (registry_addr != "off") {
      RETURN_IF_ERROR(SplitHostPort(registry_addr, "schema_registry.addr").status());
    }
    say(fmt::format("Kafka on {}:{}{}, data in {}{}", sc.server.host, sc.server.port,
                    sc.broker.sasl.enabled ? " (SASL)" : "", sc.broker.data_dir,
                    sc.broker.cluster.enabled() ? ", one broker of a cluster (etcd)" : ""));
    for (const broker::KafkaListener& l : sc.broker.listeners) {
      say(fmt::format("Kafka listener {} on {}:{}", l.name, l.host, l.port));
    }
    say(http_addr == "off"
            ? std::string("HTTP port off")
            : fmt::format("HTTP port on {} ({}; /metrics, /healthz, /readyz, the console{})",
                          http_addr, http_tls ? "https" : "http",
                          warehouse.empty() ? "" : ", the Iceberg REST catalog of " + warehouse));
    say(query_config.enabled ? fmt::format("Postgres wire protocol on {}:{}",
                                           query_config.options.host, query_config.options.port)
                             : std::string("query server off"));
    say(registry_addr == "off" ? std::string("Schema Registry off")
                               : fmt::format("Schema Registry on {}", registry_addr));
    if (options.pipelines_dir.empty()) {
      say("no pipelines folder");
    } else if (p->pipelines_ == nullptr) {
      say(fmt::format("pipelines folder {} does not exist yet (made at start)",
                      options.pipelines_dir));
    } else {
      say(fmt::format("{} pipeline(s) in {}", p->pipelines_->size(), options.pipelines_dir));
    }
    return std::unique_ptr<ServeProcess>();
  }

  auto service = broker::KafkaService::Start(sc);
  if (!service.ok()) return Status(service.status().code(), service.status().ToString());
  p->kafka_ = std::move(service).value();
  if (query_config.enabled) {
    // One user store for every port (0019, phase D): query.users seed the broker's, before
    // the HTTP port or a pipeline can ask it for one of them.
    RETURN_IF_ERROR(p->kafka_->broker().SeedUsers(
        query_config.options.users, query_config.options.scram_iterations, "query.users"));
    query_config.options.users.clear();
  }
  if (p->catalog_ && sc.broker.authorization.enabled) {
    // The REST catalog's namespaces and tables by the SQL grants (docs/design/0020).
    p->catalog_->SetAccess(query::authz::GrantCatalogAccess(p->kafka_->broker().grants(),
                                                            sc.broker.authorization.super_users));
  }
  p->tls_ = sc.tls;
  say(fmt::format("serving Kafka on {}:{} (cluster {}, data in {}, {} shards{})", sc.server.host,
                  p->kafka_->port(), p->kafka_->broker().cluster_id(), sc.broker.data_dir,
                  p->kafka_->shard_count(), sc.broker.sasl.enabled ? ", SASL" : ""));
  if (!sc.broker.listeners.empty()) {
    // kafka.listeners: each socket, and what Metadata answers on it.
    std::string line = "Kafka listeners:";
    const std::shared_ptr<const broker::MetadataSnapshot> meta = p->kafka_->broker().Snapshot();
    for (const broker::KafkaListener& l : sc.broker.listeners) {
      const auto [host, port] = meta->AdvertisedFor(l.name);
      line += fmt::format(" {} {}:{} (advertised {}:{}){}", l.name, l.host,
                          p->kafka_->server().port(l.name), host, port,
                          &l == &sc.broker.listeners.back() ? "" : ",");
    }
    say(line);
  }
  // The Schema Registry (docs/design/0022) before the pipelines, which may read from it.
  ASSIGN_OR_RETURN(p->schema_registry_,
                   SchemaRegistryPort::Start(config, *p->kafka_, sc.tls, sc.broker.sasl.enabled,
                                             sc.broker.cluster.enabled()));
  if (p->schema_registry_) {
    say(fmt::format("Schema Registry on {}", p->schema_registry_->url()));
  }
  if (p->pipelines_) {
    // Pipelines that name this broker log in as their principal (the service without one),
    // and a principal's SQL is checked against the grants (docs/design/0020).
    LocalBroker local;
    local.addresses.push_back(fmt::format("{}:{}", sc.server.host, p->kafka_->port()));
    for (const broker::KafkaListener& l : sc.broker.listeners) {
      local.addresses.push_back(fmt::format("{}:{}", l.host, p->kafka_->server().port(l.name)));
      if (!l.advertised_host.empty() && l.advertised_port != 0) {
        local.addresses.push_back(fmt::format("{}:{}", l.advertised_host, l.advertised_port));
      }
    }
    local.client_properties = [k = p->kafka_.get()](std::string_view principal) {
      return k->InternalClientProperties(principal);
    };
    if (sc.broker.authorization.enabled) {
      auto grants = std::make_shared<PipelineGrants>(p->kafka_->broker().grants(),
                                                     sc.broker.authorization.super_users);
      local.check = [grants](const pipeline::PipelineConfig& c) { return grants->Check(c); };
    }
    if (p->schema_registry_) {
      local.schemas = schema::MakeRegistrySchemaSource(&p->schema_registry_->registry());
    }
    local.kafka = &p->kafka_->broker().in_process();
    p->pipelines_->SetLocalBroker(std::move(local));
    RETURN_IF_ERROR(p->pipelines_->Start());
    say(fmt::format("running {} pipeline(s) from {}", p->pipelines_->size(),
                    options.pipelines_dir));
  }

  if (http_addr != "off") {
    RegisterProcessMetrics(MetricsRegistry::Global());
    // Logins (0021): the token endpoint in every mode (Iceberg clients given credentials
    // ask it first); Basic or bearer tokens checked before every other route when on.
    auto http_login = std::make_shared<auth::HttpAuth>(
        auth::HttpAuthOptions{.users = p->kafka_->broker().users(),
                              .accept_basic = http_auth != "token",
                              .token_ttl_seconds = token_ttl_ms / 1000,
                              .token_max_ttl_seconds = token_max_ttl_ms / 1000});
    std::vector<HttpRoute> routes;
    routes.push_back(auth::HttpAuth::TokenRoute(http_login));
    if (p->catalog_) {
      routes.push_back(
          {"/v1/", [c = p->catalog_.get()](const HttpRequest& r) { return c->Handle(r); }});
    }
    if (p->pipelines_) {
      p->pipeline_control_ =
          std::make_unique<ConsolePipelines>(p->pipelines_.get(), options.pipelines_dir);
    }
    // The console's API (docs/design/0026): a Kafka client of this broker as the HTTP
    // user (their ACLs apply), or as the process itself without a login.
    const console::ConsoleRefusal refusal = console::ConsoleRefusalFor(
        http_auth != "none", sc.broker.authorization.enabled || sc.broker.sasl.enabled,
        http_loopback, http_tls);
    p->console_ = std::make_unique<console::ConsoleApi>(console::ConsoleApiOptions{
        .client_for =
            [k = p->kafka_.get()](const std::string& principal) {
              // The HTTP login's "User:alice" is the Kafka principal's name "alice" (the
              // SASL gate adds "User:" again).
              std::string_view name = principal;
              if (name.starts_with("User:")) name.remove_prefix(5);
              std::map<std::string, std::string> props = k->InternalClientProperties(name);
              return kafka::client::Config(props.begin(), props.end());
            },
        .local_watermarks =
            [k = p->kafka_.get()](const std::string& principal,
                                  const std::vector<kafka::client::TopicPartition>& partitions) {
              std::vector<std::pair<std::string, int32_t>> asked;
              asked.reserve(partitions.size());
              for (const auto& tp : partitions) asked.emplace_back(tp.topic, tp.partition);
              std::vector<std::optional<kafka::client::Watermarks>> out(partitions.size());
              // The topics list's 2,000 partitions: 1 ms here, 14 over ListOffsets.
              auto got = k->broker().in_process().Watermarks(principal, asked,
                                                             std::chrono::milliseconds(5000));
              if (!got.ok()) return out;
              for (size_t i = 0; i < out.size(); ++i) {
                if ((*got)[i])
                  out[i] = kafka::client::Watermarks{(*got)[i]->earliest, (*got)[i]->latest};
              }
              return out;
            },
        .data_dir = sc.broker.data_dir,
        .metrics = &MetricsRegistry::Global(),
        .pipelines = p->pipeline_control_.get(),
        .refusal = refusal.message,
        .refusal_code = refusal.code,
        // Pipelines run SQL, sinks and templates as the process: with logins, only its
        // super users may touch them; without, only on a loopback port (whoever reaches it
        // is on this machine).
        .may_run_pipelines =
            http_auth == "none"
                ? std::function<bool(const std::string&)>(
                      [open = http_loopback](const std::string&) { return open; })
                : std::function<bool(const std::string&)>(
                      [supers = sc.broker.authorization.super_users](const std::string& who) {
                        return std::find(supers.begin(), supers.end(), who) != supers.end();
                      }),
        // The lake's tables as the query server finds them; a user sees what its SQL
        // grants let it SELECT.
        .tables = !warehouse.empty() ? std::make_shared<const query::WarehouseCatalog>(warehouse)
                  : rest_catalog ? std::make_shared<const query::WarehouseCatalog>(*rest_catalog)
                                 : nullptr,
        .table_access = sc.broker.authorization.enabled
                            ? query::authz::GrantCatalogAccess(p->kafka_->broker().grants(),
                                                               sc.broker.authorization.super_users)
                            : nullptr,
        .query_server_enabled = query_config.enabled,
        .schemas = p->schema_registry_
                       ? schema::MakeRegistrySchemaSource(&p->schema_registry_->registry())
                       : nullptr,
        // SQL runs in the query server as the login's user; without a login only where
        // that server lets everyone in and the HTTP port is a loopback one (the query
        // server listens on loopback by default: a wider HTTP port must not open it to
        // the network), so the console opens nothing psql could not.
        .sql_user = [users = p->kafka_->broker().users(), loopback = http_loopback](
                        const std::string& principal) -> Result<std::string> {
          std::string_view name = principal;
          if (name.starts_with("User:")) name.remove_prefix(5);
          if (!name.empty()) return std::string(name);
          if (!loopback) {
            return FailedPreconditionError(
                "the HTTP port is not a loopback one and has no login: set http.auth to basic "
                "or token to run SQL from the console");
          }
          if (users->empty()) return std::string("sluice");
          return FailedPreconditionError(
              "the query server asks every user for a password (its user store has users) "
              "but the HTTP port has no login: set http.auth to basic or token to run SQL "
              "from the console");
        }});
    routes.push_back(p->console_->Route());
    routes.push_back(console::ConsoleRoute());  // "/": last, the others match first
    HttpServerOptions http_options;
    // Browser safety in every mode (0021): Host and Origin allowlists, a proof on every
    // state-changing request.
    http_options.browser_guard = {.enabled = true, .allowed_hosts = allowed_hosts};
    const bool loopback = http_loopback;
    if (http_auth != "none") {
      http_options.authenticate = auth::HttpAuth::Hook(http_login);
      http_options.authenticate_metrics = http_auth_metrics;
      if (p->kafka_->broker().users()->empty() && query_config.options.users.empty()) {
        say(fmt::format(
            "warning: http.auth is {} but the user store is empty: nobody can use the HTTP "
            "port until a user is added (sluice user add)",
            http_auth));
      }
      // Made now rather than on the first login, so that a failure shows at start (a
      // request would make it again).
      if (Result<std::string> secret = http_login->EnsureSecret(); !secret.ok()) {
        say(fmt::format("warning: the token secret could not be stored yet: {}",
                        secret.status().message()));
      }
      // Basic sends the password readable with every request, a token is as good as one:
      // fine on loopback, not on a network.
      if (!http_tls && !loopback) {
        say(fmt::format(
            "warning: http.auth is {} on {} without http.tls: passwords and tokens cross the "
            "network readable; set http.tls: true",
            http_auth, http_addr));
      }
    }
    if (!loopback && !config.Has("http.allowed_hosts")) {
      say(fmt::format(
          "note: the HTTP port answers requests naming it by an IP address or as {} only; "
          "list other names in http.allowed_hosts",
          allowed_hosts.back()));
    }
    // The HTTP server listens on loopback behind the front door, which owns http.addr:
    // it does the TLS handshake and waits for each connection's first request without
    // holding one of the server's threads (0019, "the HTTP port's front door").
    auto peers = std::make_shared<HttpPeers>();
    http_options.peer_of = [peers](const std::string& addr, int port) {
      return peers->Get(addr, port);
    };
    http_options.readiness = [process = p.get()] { return process->Readiness(); };
    ASSIGN_OR_RETURN(p->http_, HttpServer::Start(
                                   "127.0.0.1:0", MetricsRegistry::Global(),
                                   [s = p->pipelines_.get()] { return s ? s->Health() : ""; },
                                   std::move(routes), std::move(http_options)));
    ASSIGN_OR_RETURN(p->http_door_, HttpFrontDoor::Start({.listen_addr = http_addr,
                                                          .backend_port = p->http_->port(),
                                                          .tls = http_tls ? sc.tls : nullptr,
                                                          .peers = peers}));
    const char* scheme = http_tls ? "https" : "http";
    say(fmt::format("metrics on {}://{}:{}/metrics", scheme, p->http_door_->host(),
                    p->http_door_->port()));
    say(fmt::format("console on {}://{}:{}/ (its API under /api/v1)", scheme, p->http_door_->host(),
                    p->http_door_->port()));
    if (p->catalog_) {
      say(fmt::format("Iceberg REST catalog on {}://{}:{}/v1 (warehouse {})", scheme,
                      p->http_door_->host(), p->http_door_->port(), p->catalog_->warehouse()));
    }
  }

  // The query server (Postgres wire protocol): on by default; query.pg_addr off turns it off.
  if (query_config.enabled) {
    query_config.options.user_store = p->kafka_->broker().users();
    // topic() reads from this broker as the process itself (a super user on a SASL
    // listener; the SQL grants decide who may call it, design 0020).
    std::map<std::string, std::string> kafka_properties = p->kafka_->InternalClientProperties();
    std::string kafka_bootstrap = kafka_properties["bootstrap.servers"];
    kafka_properties.erase("bootstrap.servers");
    p->query_engine_ = std::make_unique<query::QueryEngine>(query::QueryEngineOptions{
        .warehouse = warehouse,
        .catalog = rest_catalog,
        .kafka_bootstrap = kafka_bootstrap,
        .kafka_properties = std::move(kafka_properties),
        .schemas = p->schema_registry_
                       ? schema::MakeRegistrySchemaSource(&p->schema_registry_->registry())
                       : nullptr,
        .memory_limit_bytes = query_config.options.memory_limit_bytes,
        .threads = query_config.options.threads,
        // SQL grants (docs/design/0020) with the Kafka ACLs' switch and super users.
        .authorization = {.enabled = sc.broker.authorization.enabled,
                          .super_users = sc.broker.authorization.super_users,
                          .grants = p->kafka_->broker().grants(),
                          .user_exists = [users = p->kafka_->broker().users()](std::string_view u) {
                            return users->Exists(u);
                          }}});
    p->query_engine_->Install(&query_config.options);
    const bool pg_tls_required = query_config.options.require_tls;
    ASSIGN_OR_RETURN(p->query_server_, query::QueryServer::Start(std::move(query_config.options)));
    if (p->console_) p->console_->SetQueryServer(p->query_server_.get());
    say(fmt::format("Postgres wire protocol on {}:{}{}", p->query_server_->host(),
                    p->query_server_->port(),
                    pg_tls_required    ? " (TLS required)"
                    : query_config.tls ? " (TLS offered)"
                                       : ""));
    if (rest_catalog) {
      say(fmt::format("lake tables (lake.<ns>.<table>) from the Iceberg REST catalog {}",
                      rest_catalog->uri));
    }
  }
  p->phase_ = Phase::kReady;
  return p;
}

std::string ServeProcess::Readiness() const {
  switch (phase_.load()) {
    case Phase::kStarting:
      return "starting";
    case Phase::kStopping:
      return "stopping";
    case Phase::kReady:
      break;
  }
  std::string out = kafka_ ? kafka_->broker().ClusterReadiness() : "";
  if (pipelines_) {
    const std::string pipelines = pipelines_->Readiness();
    if (!pipelines.empty()) out += (out.empty() ? "" : "\n") + pipelines;
  }
  return out;
}

Status ServeProcess::Stop() {
  phase_ = Phase::kStopping;
  if (stopped_) return Status::OK();
  stopped_ = true;
  // The query server's sessions end first (their running queries are interrupted).
  if (console_) console_->SetQueryServer(nullptr);
  if (query_server_) query_server_->Stop();
  // Then the pipelines: each finishes its batch in hand and commits to the broker still up.
  if (pipelines_) pipelines_->Stop();
  if (console_) console_->Stop();  // its live streams end, which the server waits for
  if (http_door_) http_door_->Stop();
  if (http_) http_->Stop();
  if (schema_registry_) schema_registry_->Stop();
  if (kafka_) return kafka_->Stop();
  return Status::OK();
}

uint16_t ServeProcess::kafka_port() const { return kafka_ ? kafka_->port() : 0; }

Status ServeProcess::ReloadTls() {
  if (tls_ == nullptr) return Status::OK();
  return tls_->Reload();
}
int ServeProcess::http_port() const { return http_door_ ? http_door_->port() : 0; }
int ServeProcess::schema_registry_port() const {
  return schema_registry_ ? schema_registry_->port() : 0;
}
int ServeProcess::pg_port() const { return query_server_ ? query_server_->port() : 0; }

}  // namespace sluice::app
