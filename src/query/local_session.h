// LocalSession: a Postgres client of this process's own QueryServer, over the socket pair
// QueryServer::ConnectLocal makes (docs/design/0026-console.md, decision 12). It speaks
// the simple-query protocol from the startup packet on and hands each result's columns,
// rows (Postgres's text form) and command tags to the caller as they arrive, so that a
// caller can stream them on. The session behind it is the query server's: admission,
// timeouts, the watchdog and the user's grants hold as for psql.
//
//   auto s = LocalSession::Open(server, "alice", "console");
//   auto outcome = (*s)->Run("SELECT 1", handler);   // handler.on_row(...) per row
//   (*s)->Cancel();                                  // from any thread
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::query {

class QueryServer;

struct LocalColumn {
  std::string name;
  uint32_t type_oid = 0;
  std::string type;      // its Postgres name: int8, text, timestamptz, ... ("unknown")
  bool numeric = false;  // int2/4/8, float4/8, numeric, oid
};

// What a statement's result tells as it runs. Any callback may be empty.
struct LocalHandler {
  std::function<void(const std::vector<LocalColumn>&)> on_columns;
  // One row: each value in Postgres's text form, nullopt for NULL. False stops the run: the
  // statement is cancelled and the rest of its answer read and dropped.
  std::function<bool(const std::vector<std::optional<std::string_view>>&)> on_row;
  std::function<void(std::string_view tag)> on_complete;  // CommandComplete's tag
  std::function<void(std::string_view message)> on_notice;
};

// How a Run ended: `ok`, or the server's error (the first one; a simple query stops at it).
struct LocalOutcome {
  bool ok = true;
  bool stopped = false;  // on_row said stop
  std::string sqlstate;
  std::string message;
  int position = 0;  // 1-based character position in the SQL, 0: none
};

class LocalSession {
 public:
  // Opens a session as `user` (the startup's database: `database`, "" for the user's).
  // IOError when the server refuses it (FATAL, with its message) or the socket fails.
  static Result<std::unique_ptr<LocalSession>> Open(QueryServer& server, const std::string& user,
                                                    const std::string& database,
                                                    const std::string& application_name);
  ~LocalSession();  // sends Terminate and closes the socket
  LocalSession(const LocalSession&) = delete;
  LocalSession& operator=(const LocalSession&) = delete;

  // Runs `sql` (one or more statements, as psql -c) with the simple-query protocol. The
  // Status is an error only when the session itself broke (the socket, a malformed
  // answer): the session cannot be used again.
  Result<LocalOutcome> Run(std::string_view sql, const LocalHandler& handler);
  // Interrupts the statement running now, if any (any thread): it ends with SQLSTATE 57014.
  void Cancel();

 private:
  LocalSession(QueryServer& server, int fd) : server_(server), fd_(fd) {}
  Status Send(const std::string& bytes);
  // The next backend message (type and body), read whole.
  Result<std::pair<char, std::string>> Next();
  Status Startup(const std::string& user, const std::string& database,
                 const std::string& application_name);

  QueryServer& server_;
  int fd_;
  std::string in_;
  size_t in_pos_ = 0;
  std::atomic<int32_t> process_id_{0};
  std::atomic<int32_t> secret_key_{0};
  bool broken_ = false;
};

// The Postgres name of a type OID the query server reports ("int8[]" for an array of
// int8, "unknown" for others), and whether its text form is a number.
std::string PgTypeName(uint32_t type_oid);
bool PgTypeNumeric(uint32_t type_oid);

}  // namespace sluice::query
