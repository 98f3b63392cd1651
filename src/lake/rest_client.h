// A client of an Iceberg REST catalog (the `/v1/...` API of Iceberg's REST OpenAPI, as
// `sluice serve --warehouse` serves it, and Polaris, Nessie, Gravitino, Lakekeeper, ...):
// namespaces and tables listed, tables loaded, created and committed through the catalog,
// which keeps the metadata files; sluice writes only data files, manifests and lists
// (docs/design/0024, decisions 17-19).
//
//   ASSIGN_OR_RETURN(auto catalog, RestCatalogClient::Connect({.uri = "http://127.0.0.1:8181",
//                                                              .credential = "id:secret"}));
//   ASSIGN_OR_RETURN(RestCatalogClient::Loaded t, catalog->LoadTable({"db"}, "events"));
//
// Login: a bearer `token`, or OAuth2 client credentials (`credential` "id:secret", or a
// secret alone) exchanged at the token endpoint for a token that is fetched again before it
// expires and once after a 401. Reads and creates are retried on 5xx, 429 and broken
// connections; commits are not (their outcome is then unknown: Unavailable, and the caller
// re-reads the table to learn it). Tokens and secrets never reach a log line or a Status.
//
// Thread-safe: one client may serve many tables and threads at once.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "lake/table.h"
#include "lake/table_metadata.h"
#include "lake/table_update.h"

namespace sluice::lake {

struct RestCatalogConfig {
  std::string uri;                // http(s)://host[:port][/path]: requests go to <uri>/v1/...
  std::string warehouse;          // sent to GET /v1/config as ?warehouse= ("": not sent)
  std::string credential;         // OAuth2 client credentials: "client_id:client_secret"
  std::string token;              // a bearer token (instead of credential)
  std::string oauth2_server_uri;  // default <uri>/v1/oauth/tokens
  std::string scope = "catalog";
  std::chrono::milliseconds request_timeout{30000};
  int max_retries = 3;  // attempts after the first, for requests that may be repeated
};

// The keys of `sluice serve`'s `catalog:` section (catalog.type, catalog.uri, ...), for its
// unknown-key check.
extern const std::vector<std::string_view> kRestCatalogKeys;

// The `catalog:` section of a config: nullopt when there is none. catalog.type must be
// rest; catalog.request_timeout is a duration ("30s").
Result<std::optional<RestCatalogConfig>> RestCatalogConfigFrom(const Config& config);

class RestCatalogClient {
 public:
  // Reads GET /v1/config (its defaults and overrides: the path prefix, another uri) after
  // the login; InvalidArgument for a bad uri, the catalog's error when it refuses.
  static Result<std::shared_ptr<RestCatalogClient>> Connect(RestCatalogConfig config);

  struct Loaded {
    std::string metadata_location;
    TableMetadata metadata;
    std::map<std::string, std::string> config;  // the LoadTableResult's config
  };

  // The namespaces under `parent` (every page); NotFound for a missing parent.
  Result<std::vector<std::vector<std::string>>> ListNamespaces(
      const std::vector<std::string>& parent) const;
  // AlreadyExists when it exists.
  Status CreateNamespace(const std::vector<std::string>& ns) const;
  // The table names of `ns` (every page); NotFound for a missing namespace.
  Result<std::vector<std::string>> ListTables(const std::vector<std::string>& ns) const;
  // NotFound (naming the table) when there is no such table or namespace.
  Result<Loaded> LoadTable(const std::vector<std::string>& ns, const std::string& name) const;
  // The catalog assigns the location and fresh field ids; AlreadyExists when the name is
  // taken, NotFound when the namespace is missing.
  Result<Loaded> CreateTable(const std::vector<std::string>& ns, const std::string& name,
                             const Schema& schema, const PartitionSpec& spec,
                             const std::map<std::string, std::string>& properties) const;
  // AlreadyExists when a requirement failed (409: another writer committed first; re-read
  // and build again); Unavailable when the outcome is unknown (5xx, a broken connection).
  Result<Loaded> CommitTable(const std::vector<std::string>& ns, const std::string& name,
                             const std::vector<TableRequirement>& requirements,
                             const std::vector<TableUpdate>& updates) const;

  // "REST catalog http://host:port" for messages.
  std::string Describe() const;

 private:
  struct Reply;
  explicit RestCatalogClient(RestCatalogConfig config) : config_(std::move(config)) {}

  // The path under <uri>/v1/ with the catalog's prefix: "namespaces/db/tables".
  std::string Url(const std::string& path) const;
  // One request with the login, the bearer fetched again after a 401; `retry`: repeated on
  // 5xx, 429 and broken connections.
  Result<Reply> Send(const std::string& method, const std::string& path, const std::string& body,
                     bool retry, const std::string& what) const;
  Result<Reply> SendOnce(const std::string& method, const std::string& url, const std::string& body,
                         const std::string& what) const;
  // The bearer header ("" without a login); `refresh` fetches a new token first.
  Result<std::string> Authorization(bool refresh) const;
  Result<Loaded> LoadedFrom(const Reply& reply, const std::string& what) const;

  RestCatalogConfig config_;
  std::string prefix_;  // from /v1/config's overrides, "" or "p" (no slashes around)
  std::string base_;    // <uri> without a trailing '/'

  mutable std::mutex token_mu_;
  mutable std::string token_;  // the current bearer token (config_.token or fetched)
  mutable std::chrono::steady_clock::time_point token_refresh_at_;
};

// The metadata store of table `ns`.`name` in `catalog` (Table::Open). A commit asserts the
// table's uuid, its main branch's snapshot, current schema, last field id, default spec and
// last partition id as the base has them: any concurrent commit that moved one of them makes
// it a lost race (re-read, build again), as the exclusive create of a file table does.
std::shared_ptr<const MetadataStore> RestTableStore(
    std::shared_ptr<const RestCatalogClient> catalog, std::vector<std::string> ns,
    std::string name);

// Creates table `ns`.`name` through the catalog, and the namespace's missing levels; when
// another writer created it first, that table.
Result<Table> CreateRestTable(std::shared_ptr<const RestCatalogClient> catalog,
                              const std::vector<std::string>& ns, const std::string& name,
                              const Schema& schema, const PartitionSpec& spec,
                              const std::map<std::string, std::string>& properties);

// "a"."b" -> "a%1Fb" with each level percent-encoded: a namespace in a REST path.
std::string EncodeNamespace(const std::vector<std::string>& ns);

}  // namespace sluice::lake
