// What the query server answers beyond plain DuckDB, put together for `sluice serve` and
// `sluice sql`: the Postgres catalog emulation and its SQL rewrite (query/pg_catalog),
// Iceberg tables by name (query/lake_planner), the partitioned rewrites that keep
// latest-row-per-key and huge group-bys inside the memory budget (query/rewrite), and
// topic() over the broker (query/topic_scan). docs/design/0010-query-server.md, "The
// engine".
//
//   QueryEngine engine({.warehouse = "/srv/wh", .kafka_bootstrap = "127.0.0.1:9092", ...});
//   engine.Install(&server_options);   // sets the server's hooks
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "lake/rest_client.h"
#include "query/authz/grants.h"
#include "query/pg_catalog/catalog.h"
#include "query/server.h"
#include "schema/schema_source.h"

namespace sluice::query {

namespace authz {
struct GrantStatement;
}

// Who may read what (docs/design/0020-data-authorization.md): with `enabled`, a session
// whose user is not a superuser has each statement checked against `grants` before it runs,
// sees only the lake tables it may read in the catalog, and cannot manage grants.
struct DataAuthorization {
  bool enabled = false;
  std::vector<std::string> super_users;  // as authorization.super_users: "User:admin"
  std::shared_ptr<authz::GrantStore> grants;
  // Whether a user of that name exists (the user store): grants name users or roles.
  std::function<bool(std::string_view user)> user_exists;
};

struct QueryEngineOptions {
  std::string warehouse;  // "" : no lake tables
  // Instead of the warehouse: lake tables from this Iceberg REST catalog.
  std::optional<lake::RestCatalogConfig> catalog;
  std::string kafka_bootstrap;  // "" : no topic()
  // topic()'s other librdkafka properties (serve's own credential: security.protocol, sasl.*).
  std::map<std::string, std::string> kafka_properties;
  // The Schema Registry topic() decodes registered values with (null: none; 0022).
  std::shared_ptr<schema::SchemaSource> schemas;
  int64_t memory_limit_bytes = int64_t{1} << 30;  // the query database's, for the rewrites
  int threads = 2;
  std::string server_version = "15.0";
  bool rewrites = true;  // the partitioned rewrites (query/rewrite)
  DataAuthorization authorization;
};

class WarehouseCatalog;
namespace rewrite {
struct UserFunctionCache;
}

class QueryEngine {
 public:
  explicit QueryEngine(QueryEngineOptions options);
  ~QueryEngine();

  // Sets `server`'s on_database_open, on_session_start, rewrite_query and plan_statement.
  // The engine must outlive the server.
  void Install(QueryServerOptions* server) const;

  // The same steps for one connection outside the server (`sluice sql`): once per
  // database, once per connection, and per statement.
  Status OpenDatabase(duck::Connection& conn) const;
  Status StartSession(duck::Connection& conn, std::string_view user,
                      std::string_view database = "") const;
  // Plan parses `statement` once (query/sql_tree) when a stage may change it, and passes
  // the tree through the stages in order: lake tables, topic() bounds, the rewrites (the
  // last only with `allow_steps`, and not for the query inside CREATE TABLE AS / INSERT).
  // The tree is printed once.
  Result<PlannedStatement> Plan(duck::Connection& conn, std::string_view statement,
                                bool allow_steps) const;
  // GRANT, REVOKE, CREATE/DROP ROLE, ALTER ROLE ... SET (authz/grant_sql.h): whether
  // `statement` is one, and running it as the session's user (its CommandComplete tag).
  static bool IsCommand(std::string_view statement);
  Result<std::string> RunCommand(duck::Connection& conn, std::string_view statement) const;
  // The user's own limit of statements at once (0: none).
  int MaxStatementsOf(std::string_view user) const;

 private:
  // Sets the catalog emulation's external relations of `conn` (the lake tables, and with
  // `topics` the topics as schema `kafka`) when they changed since the last time for that
  // connection.
  Status RefreshRelations(duck::Connection& conn, bool topics) const;
  // The topics as relations, listed at most once a second for every session.
  struct TopicListing;
  Result<std::vector<pg_catalog::ExternalRelation>> TopicRelations() const;

  struct SessionAuth {
    std::string user;
    bool superuser = true;
    std::set<std::string> trusted;  // the catalog emulation's views and macros
  };
  // The session on `conn` as StartSession saw it (a superuser when there is none).
  SessionAuth AuthOf(const duck::Connection& conn) const;
  bool Checked(const SessionAuth& a) const {
    return options_.authorization.enabled && !a.superuser;
  }
  // The lake table or namespace a GRANT or REVOKE names, as the warehouse holds it.
  Result<authz::GrantObject> ResolveLakeObject(const authz::GrantStatement& s) const;
  // SHOW GRANTS as a query over VALUES.
  Result<std::string> ShowGrantsSql(const SessionAuth& a, const std::string& of) const;

  QueryEngineOptions options_;
  mutable std::mutex auth_mu_;
  mutable std::map<const duck::Connection*, SessionAuth> sessions_;  // guarded by auth_mu_
  std::unique_ptr<WarehouseCatalog> catalog_;
  // Without catalog_: the one that reads tables by their metadata paths (iceberg_scan).
  std::unique_ptr<WarehouseCatalog> path_catalog_;
  mutable std::mutex relations_mu_;
  mutable std::map<const duck::Connection*, size_t>
      relations_seen_;  // hash of what was set, per connection
  // A statement naming MACRO or FUNCTION was planned: the rewrites read the user's
  // functions at every plan from then on.
  mutable std::atomic<bool> function_ddl_seen_{false};
  std::unique_ptr<TopicListing> topics_;
  std::shared_ptr<rewrite::UserFunctionCache> user_functions_;  // while none was seen
};

}  // namespace sluice::query
