// QueryServer: SQL for Postgres clients (psql, libpq, JDBC, drivers) over the Postgres
// v3 wire protocol, on the query server's own DuckDB database.
//
// Threads: one acceptor thread, one thread per connection (a session: its own
// duck::Connection, blocking socket I/O, results streamed from DuckDB as the client
// reads), one watchdog thread that interrupts queries over the time limit. The
// database is opened with explicit memory and thread limits and sandboxed (external
// access limited to the warehouse and allowed directories, no extension installs, the
// configuration locked) before the first client is accepted.
//
//   ASSIGN_OR_RETURN(auto server, QueryServer::Start(options));
//   fmt::print("postgres on {}:{}\n", server->host(), server->port());
//   ...
//   server->Stop();  // closes every session
//
// Lifecycle: Start, then Stop (or destroy) from the thread that started it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "auth/user_store.h"
#include "base/config.h"
#include "base/status.h"
#include "duck/database.h"
#include "net/tls.h"

namespace sluice::query {

// A statement as a planning hook hands it back: the SQL to run in its place and what to
// run after it (also after an error or a cancel), e.g. dropping temp tables of its steps.
struct PlannedStatement {
  std::string sql;
  // Set exactly when steps ran (the SQL reads what they made); empty otherwise.
  std::function<void(duck::Connection&)> cleanup;
  // Asked without steps (Parse): false when no plan with steps can apply to this
  // statement whatever its parameter values and data, so that the session does not ask
  // again when the statement runs. Left true (a planner that does not say), the session
  // asks again at the portal's start, with steps allowed and the parameter values
  // substituted as literals.
  bool steps_may_apply = true;
  // When steps ran: one line for the log (what was rewritten, into how many parts).
  std::string explanation;
  // What the SQL reads that must stay while it may run: local copies of S3 data files in
  // the object cache (lake/object_cache.h), kept from eviction while this is held.
  std::shared_ptr<const void> holds;
  // With `holds`: fetches the same copies again, at the same paths, for a prepared
  // statement that let them go between its executions.
  std::function<Result<std::shared_ptr<const void>>()> refetch;
};

// Where other modules plug into every session, without changes to the server.
struct SessionHooks {
  // Runs on each new session's connection before its first query (temp views, macros,
  // search_path...), with the user the client authenticated as and the database it named
  // (its user's name when it named none). An error refuses the session (FATAL) with the
  // message.
  std::function<Status(duck::Connection&, std::string_view user, std::string_view database)>
      on_session_start;
  // Applied to every SQL string a client sends (Query and Parse) before DuckDB sees it;
  // an error is sent to the client as the statement's error (SQLSTATE 42601 unless the
  // message begins with a 5-character SQLSTATE and ": ").
  std::function<Result<std::string>(std::string_view sql)> rewrite_query;
  // Applied to each single statement after rewrite_query and the sandbox check, on the
  // session's connection, just before it is prepared: the lake planner (lake.<ns>.<t>
  // into read_parquet of the pruned files) and the partitioned rewrites. With
  // `allow_steps` it may run statements first (parts into a temp table) under the
  // statement's turn, timeout and cancel: for each statement of a simple query, and for
  // an extended-protocol SELECT when its portal starts (its parameters then substituted
  // as literals; the steps' SQL is used only when its columns are the prepared
  // statement's, docs/design/0010-query-server.md decision 25). At Parse it may not.
  // Errors are sent as rewrite_query's are; a Status code without a SQLSTATE prefix maps
  // as NotFound 42P01, Unimplemented 0A000, Corruption XX001, ResourceExhausted 53200,
  // Aborted 57014, anything else as DuckDB's message says.
  std::function<Result<PlannedStatement>(duck::Connection&, std::string_view statement,
                                         bool allow_steps)>
      plan_statement;
  // Statements the engine answers itself instead of DuckDB (GRANT, REVOKE, CREATE/DROP
  // ROLE, ALTER ROLE ... SET): whether `statement` (after rewrite_query and the sandbox) is
  // one. Both or neither are set.
  std::function<bool(std::string_view statement)> is_command;
  // Runs one: in a simple query in its place, in the extended protocol at Execute (Parse
  // only notes it; Describe answers NoData). The CommandComplete tag, or an error sent as
  // rewrite_query's are. Not transactional: it takes effect at once.
  std::function<Result<std::string>(duck::Connection&, std::string_view statement)> run_command;
  // At Parse (optional): whether the command is well-formed, so that a malformed one fails
  // its Parse as Postgres's parser would (parameters included: commands take none).
  std::function<Status(std::string_view statement)> check_command;
  // How many statements `user` may run at once (0: no limit of its own; query.max_running
  // holds for everyone): asked at each admission turn.
  std::function<int(std::string_view user)> max_statements_of;
  // A user's share of the query memory in percent (0: none): under query.rss_limit
  // pressure the watchdog interrupts a statement of a user above it first.
  std::function<int(std::string_view user)> memory_share_of;
};

enum class AuthMethod { kScramSha256, kPassword };

struct QueryServerOptions {
  std::string host = "127.0.0.1";
  int port = 5433;  // 0: any free port (see port())
  // The database's budget (DuckDB's memory_limit and threads).
  int64_t memory_limit_bytes = int64_t{1} << 30;
  int threads = 2;
  // Where DuckDB spills what does not fit in memory_limit; "" leaves DuckDB's default (a
  // .tmp directory in the working directory).
  std::string temp_directory;
  // Directories queries may read and write: the warehouse and any others. Everything
  // else on the file system is refused (SQLSTATE 42501).
  std::vector<std::string> allowed_directories;
  int max_connections = 64;
  size_t max_message_bytes = size_t{64} << 20;
  int64_t timeout_ms = 0;  // 0: no limit
  // Admission: at most this many statements run at once; the next waits its turn, up to
  // queue_timeout_ms, then fails with 53300. A statement holds its turn while it runs
  // (planning steps and streaming included); an extended-protocol portal from its start
  // until it completes, fails, is closed, or the Sync after it (a portal suspended and
  // resumed before that Sync keeps its turn; one resumed after it takes a new one).
  int max_running = 4;
  int64_t queue_timeout_ms = 60'000;
  // The process's RSS above this (0: no watchdog) interrupts the longest-running
  // statement (SQLSTATE 53200) before the kernel would kill the process; DuckDB's C API
  // tells memory per database, not per query, so the one running longest stands for the
  // largest. At most one such interrupt a second, so freed memory can show.
  int64_t rss_limit_bytes = 0;
  // name -> password. Empty: every client is let in (trust).
  std::vector<std::pair<std::string, std::string>> users;
  // The user store to authenticate against (the broker's: one store for every port;
  // docs/design/0019-security.md, phase D). Null: one of the server's own, seeded with
  // `users`. Empty: every client is let in (trust). SCRAM needs a SCRAM-SHA-256 credential.
  std::shared_ptr<const auth::UserStore> user_store;
  AuthMethod auth = AuthMethod::kScramSha256;
  int scram_iterations = 4096;
  std::string server_version = "15.0";
  // query.tls: SSLRequest is answered 'S' and the session continues over TLS with this
  // context (the tls: section's; docs/design/0019-security.md); null: 'N'.
  std::shared_ptr<net::TlsContext> tls;
  // query.require_tls: a session that did not start TLS is refused after its startup
  // packet, with Postgres's message for a hostssl-only pg_hba.conf (SQLSTATE 28000).
  bool require_tls = false;
  // Runs once on a set-up connection before the configuration is locked.
  std::function<Status(duck::Connection&)> on_database_open;
  SessionHooks hooks;
};

// The server's settings from sluice's config (query.* keys, docs/config.md): the
// address from query.pg_addr ("off": nullopt-like, see `enabled`), the warehouse added
// to the allowed directories.
struct QueryServerConfig {
  bool enabled = true;
  QueryServerOptions options;
  // query.tls: the caller sets options.tls from the tls: section (refused without one).
  bool tls = false;
};
Result<QueryServerConfig> QueryServerConfigFrom(const Config& config);
// The query.* keys QueryServerConfigFrom reads, for Config::CheckKnown.
const std::vector<std::string_view>& QueryConfigKeys();

class ServerState;  // server.cc

class QueryServer {
 public:
  static Result<std::unique_ptr<QueryServer>> Start(QueryServerOptions options);
  ~QueryServer();
  QueryServer(const QueryServer&) = delete;
  QueryServer& operator=(const QueryServer&) = delete;

  // Stops accepting, closes every session (interrupting running queries) and joins
  // the threads. Idempotent.
  void Stop();

  const std::string& host() const;
  int port() const;
  // A session of this process's own, run as `user` without asking a password (the caller
  // authenticated it: the console's HTTP login): the client's end of a socket pair,
  // speaking the Postgres protocol from its startup packet on (query::LocalSession). The
  // session is like any other (admission, timeouts, the watchdog, `user`'s grants).
  // ResourceExhausted when the server stops or is full. The caller closes the fd.
  Result<int> ConnectLocal(const std::string& user);
  // A CancelRequest's effect, without the connection: interrupts the session's running
  // statement when the key matches.
  void Cancel(int32_t process_id, int32_t secret_key);
  // Sessions now open (not counting cancel requests).
  int session_count() const;
  // Counters since Start: admission turns given (one per statement run) and statements
  // that ran planning steps (the partitioned rewrites), by protocol.
  struct Stats {
    uint64_t turns = 0;
    uint64_t simple_statements_with_steps = 0;
    uint64_t extended_statements_with_steps = 0;
  };
  Stats stats() const;

 private:
  explicit QueryServer(std::unique_ptr<ServerState> state);
  std::unique_ptr<ServerState> state_;
};

}  // namespace sluice::query
