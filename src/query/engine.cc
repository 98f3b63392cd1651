#include "query/engine.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/strings.h"
#include "kafka/client/admin.h"
#include "lake/storage.h"
#include "query/authz/grant_sql.h"
#include "query/authz/grants.h"
#include "query/authz/plan_check.h"
#include "query/lake_planner/lake_catalog.h"
#include "query/lake_planner/lake_planner.h"
#include "query/loggers.h"
#include "query/pg_catalog/catalog.h"
#include "query/pg_catalog/rewrite.h"
#include "query/rewrite/rewrite.h"
#include "query/sql_text.h"
#include "query/sql_tree/sql_tree.h"
#include "query/topic_scan/topic_function.h"
#include "query/topic_scan/topic_planner.h"

namespace sluice::query {
QueryEngine::QueryEngine(QueryEngineOptions options)
    : options_(std::move(options)), user_functions_(rewrite::MakeUserFunctionCache()) {
  if (options_.catalog) {
    catalog_ = std::make_unique<WarehouseCatalog>(*options_.catalog);
  } else if (lake::IsS3Location(options_.warehouse)) {
    options_.warehouse = lake::NormalLocation(options_.warehouse);
    catalog_ = std::make_unique<WarehouseCatalog>(options_.warehouse);
  } else if (!options_.warehouse.empty()) {
    std::error_code ec;
    std::filesystem::path abs = std::filesystem::absolute(options_.warehouse, ec);
    if (!ec) options_.warehouse = abs.lexically_normal().string();
    while (options_.warehouse.size() > 1 && options_.warehouse.back() == '/')
      options_.warehouse.pop_back();
    catalog_ = std::make_unique<WarehouseCatalog>(options_.warehouse);
  }
  // Without a warehouse or catalog, tables are still read by their metadata paths.
  if (catalog_ == nullptr) path_catalog_ = std::make_unique<WarehouseCatalog>("");
  if (!options_.kafka_bootstrap.empty()) topics_ = std::make_unique<TopicListing>();
}

QueryEngine::~QueryEngine() = default;

Status QueryEngine::OpenDatabase(duck::Connection& conn) const {
  // Rows of a big INSERT ... SELECT (the rewrites' parts) need not keep their order;
  // Postgres promises no order without ORDER BY either. Lowers memory (DuckDB's advice).
  RETURN_IF_ERROR(conn.Execute("SET preserve_insertion_order = false"));
  // Parquet footers parsed once per file, not per query: a point lookup on a lake table
  // read its files' footers again every time. Lake files never change in place, and DuckDB
  // checks a cached footer against the file's modification time.
  RETURN_IF_ERROR(conn.Execute("SET parquet_metadata_cache = true"));
  if (!options_.kafka_bootstrap.empty()) {
    RETURN_IF_ERROR(RegisterTopicFunction(conn, {.bootstrap_servers = options_.kafka_bootstrap,
                                                 .client_properties = options_.kafka_properties,
                                                 .schemas = options_.schemas}));
  }
  // What the rewrites read once per process, read at start rather than in the first query.
  if (options_.rewrites) RETURN_IF_ERROR(rewrite::WarmUp(conn));
  return Status::OK();
}

Status QueryEngine::StartSession(duck::Connection& conn, std::string_view user,
                                 std::string_view database) const {
  // A new session may have the address of an ended one's connection: what was set for
  // that one is not in this one's fresh catalog.
  {
    std::lock_guard<std::mutex> lock(relations_mu_);
    relations_seen_.erase(&conn);
  }
  RETURN_IF_ERROR(pg_catalog::InstallCatalog(
      conn, {.user = user.empty() ? std::string("sluice") : std::string(user),
             .database = database.empty() ? std::string("sluice") : std::string(database),
             .server_version = options_.server_version}));
  // The user functions the rewrites check, read once per process while no statement
  // could have changed them: here rather than in the first query (rewrite.h).
  if (options_.rewrites && !function_ddl_seen_.load(std::memory_order_relaxed)) {
    RETURN_IF_ERROR(rewrite::WarmUpSession(conn, user_functions_.get()));
  }
  SessionAuth a;
  a.user = std::string(user);
  const DataAuthorization& az = options_.authorization;
  a.superuser = !az.enabled || std::find(az.super_users.begin(), az.super_users.end(),
                                         "User:" + a.user) != az.super_users.end();
  if (Checked(a)) {
    if (az.grants == nullptr) return InternalError("authorization is on without a grant store");
    // What the emulation just made is trusted while unchanged (authz/plan_check.h).
    ASSIGN_OR_RETURN(a.trusted, authz::DefinedObjects(conn));
  }
  {
    std::lock_guard<std::mutex> lock(auth_mu_);
    sessions_[&conn] = std::move(a);
  }
  return RefreshRelations(conn, /*topics=*/false);
}

QueryEngine::SessionAuth QueryEngine::AuthOf(const duck::Connection& conn) const {
  std::lock_guard<std::mutex> lock(auth_mu_);
  auto it = sessions_.find(&conn);
  if (it != sessions_.end()) return it->second;
  // A connection StartSession never saw (`sluice sql`, tests): the owner's, unless
  // authorization is on, where nobody unknown is trusted.
  SessionAuth a;
  a.superuser = !options_.authorization.enabled;
  return a;
}

struct QueryEngine::TopicListing {
  std::mutex mu;
  std::unique_ptr<kafka::client::Admin> admin;  // made at the first listing
  std::chrono::steady_clock::time_point at;
  std::vector<pg_catalog::ExternalRelation> relations;
};

Result<std::vector<pg_catalog::ExternalRelation>> QueryEngine::TopicRelations() const {
  std::lock_guard<std::mutex> lock(topics_->mu);
  const auto now = std::chrono::steady_clock::now();
  if (topics_->admin != nullptr && now - topics_->at < std::chrono::seconds(1)) {
    return topics_->relations;
  }
  if (topics_->admin == nullptr) {
    kafka::client::Config config{{"bootstrap.servers", options_.kafka_bootstrap},
                                 {"allow.auto.create.topics", "false"}};
    for (const auto& [k, v] : options_.kafka_properties) config[k] = v;
    ASSIGN_OR_RETURN(topics_->admin, kafka::client::Admin::Create(config));
  }
  constexpr std::chrono::milliseconds kTimeout{5000};
  ASSIGN_OR_RETURN(std::vector<kafka::client::Admin::TopicInfo> topics,
                   topics_->admin->ListTopics(kTimeout));
  std::sort(topics.begin(), topics.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  const TopicFunctionOptions describe{.bootstrap_servers = options_.kafka_bootstrap,
                                      .schemas = options_.schemas};
  std::vector<pg_catalog::ExternalRelation> relations;
  for (const kafka::client::Admin::TopicInfo& t : topics) {
    if (t.name.starts_with("__")) continue;  // Kafka's internal topics
    pg_catalog::ExternalRelation r;
    r.schema = std::string(kTopicSchema);
    r.name = t.name;
    r.comment =
        fmt::format("Kafka topic, {} partition{}", t.partitions, t.partitions == 1 ? "" : "s");
    // A registry that cannot answer for one topic leaves it with topic()'s own columns.
    Result<std::vector<schema::Column>> columns = TopicColumns(describe, t.name);
    if (!columns.ok()) {
      TopicFunctionOptions plain = describe;
      plain.schemas = nullptr;
      columns = TopicColumns(plain, t.name);
    }
    if (!columns.ok()) continue;
    for (const schema::Column& c : *columns) {
      r.columns.push_back({.name = c.name, .duckdb_type = c.type.ToSql(), .nullable = true});
    }
    relations.push_back(std::move(r));
  }
  topics_->relations = relations;
  topics_->at = now;
  return relations;
}

Status QueryEngine::RefreshRelations(duck::Connection& conn, bool topics) const {
  // The lake tables as relations of schema "lake.<namespace>" for \dt *.* and drivers.
  Result<std::vector<LakeTableInfo>> tables = std::vector<LakeTableInfo>();
  if (catalog_ != nullptr) tables = catalog_->ListTables();
  if (!tables.ok()) tables = std::vector<LakeTableInfo>();  // a missing warehouse: none yet
  std::vector<pg_catalog::ExternalRelation> relations;
  std::string fingerprint;
  // Only what the user may read is listed (psql's \d, information_schema, pg_class).
  const SessionAuth auth = AuthOf(conn);
  std::shared_ptr<const authz::GrantSet> grants;
  if (options_.authorization.enabled && options_.authorization.grants != nullptr) {
    grants = options_.authorization.grants->Current();
    fingerprint = auth.user + '\0';
  }
  for (const LakeTableInfo& t : *tables) {
    if (grants != nullptr && Checked(auth) && !grants->CanSelectTable(auth.user, t.ns, t.name))
      continue;
    pg_catalog::ExternalRelation r;
    r.schema = "lake";
    for (const std::string& level : t.ns) r.schema += "." + level;
    r.name = t.name;
    fingerprint += r.schema + '\0' + r.name + '\0';
    if (grants != nullptr) {
      // Who is granted SELECT on it (on the table, or on a namespace above it), as psql's
      // \dp shows a table's privileges.
      std::vector<std::string> full = t.ns;
      full.push_back(t.name);
      std::set<std::string> holders;
      for (const authz::Grant& g : grants->grants()) {
        const std::vector<std::string>& n = g.object.name;
        const bool covers =
            (g.object.kind == authz::GrantObject::Kind::kTable && n == full) ||
            (g.object.kind == authz::GrantObject::Kind::kNamespace && n.size() <= t.ns.size() &&
             std::equal(n.begin(), n.end(), t.ns.begin()));
        if (g.privilege == authz::Privilege::kSelect && covers) holders.insert(g.grantee);
      }
      for (const std::string& h : holders) {
        r.acl.push_back(h + "=r/sluice");
        fingerprint += r.acl.back() + '\0';
      }
    }
    for (const LakeTableInfo::Column& c : t.columns) {
      r.columns.push_back({.name = c.name,
                           .duckdb_type = c.duckdb_type,
                           .nullable = !c.required,
                           .comment = c.doc});
      fingerprint += c.name + '\0' + c.duckdb_type + (c.required ? "\1" : "\2") + c.doc + '\0';
    }
    relations.push_back(std::move(r));
  }
  if (topics && topics_ != nullptr) {
    // The topics the user may read, as schema `kafka` (kafka.<topic> names them in SQL).
    Result<std::vector<pg_catalog::ExternalRelation>> listed = TopicRelations();
    if (!listed.ok()) {
      SLUICE_LOG(kLog, kWarn, "the topics are not listed in the catalog: {}",
                 listed.status().message());
    }
    std::vector<pg_catalog::ExternalRelation> none;
    for (pg_catalog::ExternalRelation& r : listed.ok() ? *listed : none) {
      if (grants != nullptr && Checked(auth) && !grants->CanSelectTopic(auth.user, r.name))
        continue;
      fingerprint += r.schema + '\0' + r.name + '\0' + r.comment + '\0';
      for (const pg_catalog::ExternalColumn& c : r.columns)
        fingerprint += c.name + '\0' + c.duckdb_type + '\0';
      relations.push_back(std::move(r));
    }
  }
  size_t hash = std::hash<std::string>{}(fingerprint);
  {
    std::lock_guard<std::mutex> lock(relations_mu_);
    auto it = relations_seen_.find(&conn);
    if (it != relations_seen_.end() && it->second == hash) return Status::OK();
  }
  RETURN_IF_ERROR(pg_catalog::SetExternalRelations(conn, relations));
  std::lock_guard<std::mutex> lock(relations_mu_);
  // Sessions end without telling the engine: the map is bounded by forgetting all of it
  // now and then (a forgotten connection only refreshes once more).
  if (relations_seen_.size() >= 4096) relations_seen_.clear();
  relations_seen_[&conn] = hash;
  return Status::OK();
}

namespace {

// A statement that reads the Postgres catalog emulation (psql's \d, a driver's metadata
// call): the lake relations there are brought up to date first.
bool ReadsCatalog(std::string_view sql) {
  std::string lower = AsciiLower(sql);
  return lower.find("pg_catalog") != std::string::npos ||
         lower.find("information_schema") != std::string::npos ||
         lower.find("pg_class") != std::string::npos ||
         lower.find("pg_attribute") != std::string::npos;
}

// A statement that may create, replace or drop a function or macro: one naming MACRO or
// FUNCTION (CREATE FUNCTION is DuckDB's CREATE MACRO; words only: pg_get_function_result
// in a psql query is not one), or any statement whose first word is not one known to
// leave functions alone (IMPORT DATABASE creates the macros of an export).
bool MentionsFunctionDdl(std::string_view sql) {
  static const std::set<std::string, std::less<>> kHarmless = {
      "SELECT",  "WITH",       "VALUES", "FROM",       "TABLE",   "EXPLAIN", "DESCRIBE",
      "SHOW",    "SUMMARIZE",  "BEGIN",  "START",      "COMMIT",  "END",     "ROLLBACK",
      "ABORT",   "SET",        "RESET",  "COPY",       "CREATE",  "INSERT",  "UPDATE",
      "DELETE",  "DROP",       "ALTER",  "CHECKPOINT", "ANALYZE", "VACUUM",  "PREPARE",
      "EXECUTE", "DEALLOCATE", "CALL",   "TRUNCATE"};
  std::vector<std::string> first = LeadingWords(sql, 1);
  if (!first.empty() && kHarmless.count(first[0]) == 0) return true;
  return ContainsWordIgnoreCase(sql, "macro") || ContainsWordIgnoreCase(sql, "function");
}

}  // namespace

Result<PlannedStatement> QueryEngine::Plan(duck::Connection& conn, std::string_view statement,
                                           bool allow_steps) const {
  // The planning's time, at debug level (`sluice bench query` reports it): the lake
  // planner and the rewrites' planning, not the parts the steps run.
  struct PlanTimer {
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    std::optional<std::chrono::steady_clock::time_point> done;
    ~PlanTimer() {
      if (!kLog.Enabled(LogLevel::kDebug)) return;
      auto end = done.value_or(std::chrono::steady_clock::now());
      SLUICE_LOG(kLog, kDebug, "statement planned in {:.1f} ms",
                 std::chrono::duration<double, std::milli>(end - start).count());
    }
  } timer;
  PlannedStatement out{std::string(statement), nullptr};
  // Only the rewrites run steps: without them a session need not plan the statement again
  // when its portal starts (design 0010, decision 25).
  out.steps_may_apply = options_.rewrites;
  // A statement that may create, replace or drop a function or macro: from now on the
  // rewrites read the user's functions at every plan. Until then every session has only
  // the pg_catalog macros StartSession installs, read once per process.
  if (!function_ddl_seen_.load(std::memory_order_relaxed) && MentionsFunctionDdl(statement)) {
    function_ddl_seen_.store(true, std::memory_order_relaxed);
  }
  const SessionAuth auth = AuthOf(conn);
  if (authz::IsGrantStatement(statement)) {
    // SHOW GRANTS reads; the others are commands (RunCommand) and never reach here.
    ASSIGN_OR_RETURN(std::optional<authz::GrantStatement> g, authz::ParseGrantStatement(statement));
    if (g && g->kind == authz::GrantStatement::Kind::kShowGrants) {
      out.steps_may_apply = false;
      ASSIGN_OR_RETURN(out.sql, ShowGrantsSql(auth, g->grantees.empty() ? "" : g->grantees[0]));
      return out;
    }
  }
  if (Checked(auth)) {
    // Everything the statement reads, before anything is read (design 0020).
    std::shared_ptr<const authz::GrantSet> grants = options_.authorization.grants->Current();
    authz::AccessContext ctx{.user = auth.user,
                             .grants = grants.get(),
                             .catalog = catalog_.get(),
                             .trusted = &auth.trusted,
                             .user_macros = function_ddl_seen_.load(std::memory_order_relaxed)};
    RETURN_IF_ERROR(authz::CheckStatement(conn, statement, ctx));
  }
  int64_t lake_rows = 0;
  // A table created after the session started shows in \dt at once (best effort: a
  // failure leaves the relations as they were and the statement runs).
  if ((catalog_ != nullptr || topics_ != nullptr) && ReadsCatalog(statement)) {
    if (Status st = RefreshRelations(conn, /*topics=*/true); !st.ok()) {
      SLUICE_LOG(kLog, kWarn, "the catalog's relations are left as they were: {}", st.message());
    }
  }
  // CREATE TABLE ... AS <query> and INSERT INTO ... <query>: the query is planned as a
  // SELECT is (lake tables, topic() bounds), the statement around it kept; no rewrite.
  const size_t embedded = EmbeddedQueryStart(statement);
  const std::string head(embedded == std::string_view::npos ? std::string_view()
                                                            : statement.substr(0, embedded));
  if (embedded != std::string_view::npos) out.sql = std::string(statement.substr(embedded));

  // The stages (lake tables, then topic() bounds, then the rewrites) share one parse of the
  // statement and print it once; a statement no stage can change is not parsed.
  const bool lake = MayNameLakeTable(out.sql);
  const bool topic = !options_.kafka_bootstrap.empty() && MayCallTopic(out.sql);
  const bool rewrite = embedded == std::string_view::npos && allow_steps && options_.rewrites &&
                       rewrite::MayRewrite(out.sql);
  std::optional<sql_tree::SqlTree> tree;
  if (lake || topic || rewrite) {
    Result<sql_tree::SqlTree> parsed = sql_tree::SqlTree::Parse(conn, out.sql);
    if (parsed.ok()) {
      tree = std::move(*parsed);
    } else {
      // The parse query failed: topic() bounds need it, an interrupt or out of memory stops
      // the rewrites; the lake planner and the rest let DuckDB report the statement's error.
      const StatusCode code = parsed.status().code();
      if (topic ||
          (rewrite && (code == StatusCode::kAborted || code == StatusCode::kResourceExhausted))) {
        return parsed.status();
      }
    }
  }
  if (tree && lake) {
    const LakeCatalog& tables = catalog_ != nullptr ? *catalog_ : *path_catalog_;
    ASSIGN_OR_RETURN(std::vector<LakeTableScan> scans,
                     PlanLakeTree(conn, *tree, tables, {.lake_names = catalog_ != nullptr}));
    auto holds = std::make_shared<std::vector<std::shared_ptr<const lake::CachedObject>>>();
    for (LakeTableScan& t : scans) {
      lake_rows += t.stats.records_kept;
      for (auto& h : t.holds) holds->push_back(std::move(h));
    }
    if (!holds->empty()) {
      std::vector<std::string> locations;
      std::vector<uint64_t> sizes;
      for (const auto& h : *holds) {
        locations.push_back(h->location());
        sizes.push_back(h->size());
      }
      out.refetch = [locations = std::move(locations),
                     sizes = std::move(sizes)]() -> Result<std::shared_ptr<const void>> {
        ASSIGN_OR_RETURN(lake::ObjectCache * cache, lake::S3ObjectCache());
        ASSIGN_OR_RETURN(auto copies, cache->Fetch(locations, sizes));
        return std::shared_ptr<const void>(
            std::make_shared<std::vector<std::shared_ptr<const lake::CachedObject>>>(
                std::move(copies)));
      };
      out.holds = std::move(holds);
    }
  }
  // topic() bounds from WHERE (no steps: prepared statements get them too). They are an
  // optimization: when they cannot be applied, the statement is planned without them.
  std::optional<std::string> rendered;
  if (tree && topic) {
    std::optional<sql_tree::Json> before;
    if (tree->ok()) before = tree->doc();
    const bool changed_before = tree->changed();
    Result<bool> bounds = PlanTopicTree(*tree);
    Status failed = bounds.status();
    if (bounds.ok() && *bounds) {
      Result<std::string> text = tree->Render(conn);
      if (text.ok()) rendered = std::move(*text);
      failed = text.status();
    }
    if (!failed.ok() && before) {
      SLUICE_LOG(kLog, kWarn, "topic bounds not applied: {}", failed.message());
      tree->doc() = std::move(*before);
      tree->MarkChanged(changed_before);
    }
  }
  if (rendered) {
    out.sql = std::move(*rendered);
  } else if (tree) {
    ASSIGN_OR_RETURN(out.sql, tree->Render(conn));
  }
  if (embedded != std::string_view::npos) {
    out.sql = head + out.sql;
    out.steps_may_apply = false;
    return out;
  }
  if (!rewrite) return out;
  // A user with a memory_share plans within it (design 0020).
  int64_t budget = options_.memory_limit_bytes;
  if (options_.authorization.enabled && options_.authorization.grants != nullptr) {
    const int percent =
        options_.authorization.grants->Current()->LimitsOf(auth.user).memory_percent;
    if (percent > 0) budget = budget / 100 * percent;
  }
  const rewrite::RewriteOptions rewrite_options{
      .memory_limit_bytes = budget,
      .threads = options_.threads,
      .known_input_rows = lake_rows,
      .user_functions =
          function_ddl_seen_.load(std::memory_order_relaxed) ? nullptr : user_functions_.get()};
  std::optional<rewrite::Plan> plan;
  if (tree) {
    ASSIGN_OR_RETURN(plan, rewrite::PlanRewrite(conn, *tree, out.sql, rewrite_options));
  }
  if (!plan) return out;
  auto shared = std::make_shared<rewrite::Plan>(std::move(*plan));
  out.explanation = shared->explanation;
  if (kLog.Enabled(LogLevel::kDebug)) {
    for (const std::string& step : shared->steps)
      SLUICE_LOG(kLog, kDebug, "rewrite step: {}", step);
    SLUICE_LOG(kLog, kDebug, "rewrite: {}; runs: {}", shared->explanation, shared->final_select);
  }
  timer.done = std::chrono::steady_clock::now();
  Result<std::string> final_select = rewrite::RunSteps(conn, *shared);
  if (shared->assumed && rewrite::AssumptionFailed(final_select.status())) {
    // A row broke what the first rows showed (design 0013 D25): planned again without it.
    SLUICE_LOG(kLog, kInfo, "rewrite: {}; planning again without the assumption",
               final_select.status().message());
    rewrite::RewriteOptions again = rewrite_options;
    again.assume = false;
    ASSIGN_OR_RETURN(plan, rewrite::PlanRewrite(conn, *tree, out.sql, again));
    if (!plan) {
      out.explanation.clear();
      return out;
    }
    shared = std::make_shared<rewrite::Plan>(std::move(*plan));
    out.explanation = shared->explanation;
    final_select = rewrite::RunSteps(conn, *shared);
  }
  ASSIGN_OR_RETURN(out.sql, std::move(final_select));
  out.cleanup = [shared](duck::Connection& c) { (void)rewrite::RunCleanup(c, *shared); };
  return out;
}

void QueryEngine::Install(QueryServerOptions* server) const {
  auto previous_open = server->on_database_open;
  server->on_database_open = [this, previous_open](duck::Connection& conn) -> Status {
    if (previous_open) RETURN_IF_ERROR(previous_open(conn));
    return OpenDatabase(conn);
  };
  server->hooks.on_session_start = [this](duck::Connection& conn, std::string_view user,
                                          std::string_view database) {
    return StartSession(conn, user, database);
  };
  server->hooks.rewrite_query = [](std::string_view sql) {
    return pg_catalog::RewriteForDuckDB(sql);
  };
  server->hooks.plan_statement = [this](duck::Connection& conn, std::string_view statement,
                                        bool allow_steps) {
    return Plan(conn, statement, allow_steps);
  };
  server->hooks.is_command = [](std::string_view statement) { return IsCommand(statement); };
  server->hooks.run_command = [this](duck::Connection& conn, std::string_view statement) {
    return RunCommand(conn, statement);
  };
  server->hooks.check_command = [](std::string_view statement) {
    return authz::ParseGrantStatement(statement).status();
  };
  if (options_.authorization.enabled) {
    server->hooks.max_statements_of = [this](std::string_view user) {
      return MaxStatementsOf(user);
    };
    server->hooks.memory_share_of = [this](std::string_view user) {
      return options_.authorization.grants == nullptr
                 ? 0
                 : options_.authorization.grants->Current()->LimitsOf(user).memory_percent;
    };
  }
  server->server_version = options_.server_version;
}

}  // namespace sluice::query
