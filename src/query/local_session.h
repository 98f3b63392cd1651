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
  // RowDescription's atttypmod: numeric's ((precision << 16) | scale) + 4, else -1.
  int32_t type_modifier = -1;
};

// What a statement's result tells as it runs. Any callback may be empty.
struct LocalHandler {
  std::function<void(const std::vector<LocalColumn>&)> on_columns;
  // One row: each value in Postgres's text form, nullopt for NULL. False cuts this result:
  // its statement is cancelled and the rest of its rows dropped; the statements after it
  // are handed on (a simple query's statements stop at the cancel's error when it reaches
  // a later one).
  std::function<bool(const std::vector<std::optional<std::string_view>>&)> on_row;
  std::function<void(std::string_view tag)> on_complete;  // CommandComplete's tag
  std::function<void(std::string_view message)> on_notice;
  // Called every `idle_ms` that passes without a message from the server (a statement
  // computing, or waiting for its turn): the caller may send what it holds, or see that
  // its own client left. False stops the run as on_row's does.
  std::function<bool()> on_idle;
  int idle_ms = 500;
};

// How a Run ended: `ok`, or the server's error (the first one; a simple query stops at it).
struct LocalOutcome {
  bool ok = true;
  bool stopped = false;  // on_row or on_idle said stop
  // The statement on_row cut was cancelled while it ran: a simple query stops there, so the
  // statements after it (if any) did not run.
  bool rest_not_run = false;
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
  // Interrupts the run (any thread): its statement ends with SQLSTATE 57014. A cancel that
  // comes before the server began the statement (the query still on its way) is asked again
  // every idle_ms until the run ends, and one before Run stops that run before it is sent.
  void Cancel();

 private:
  LocalSession(QueryServer& server, int fd) : server_(server), fd_(fd) {}
  Status Send(const std::string& bytes);
  // The next backend message (type and body), read whole. With `handler`, its on_idle is
  // called while none comes; `stopped` is set (and the statement cancelled) when it says so.
  Result<std::pair<char, std::string>> Next(const LocalHandler* handler = nullptr,
                                            bool* stopped = nullptr);
  Status Startup(const std::string& user, const std::string& database,
                 const std::string& application_name);

  QueryServer& server_;
  int fd_;
  std::string in_;
  size_t in_pos_ = 0;
  std::atomic<int32_t> process_id_{0};
  std::atomic<int32_t> secret_key_{0};
  std::atomic<bool> cancel_requested_{false};  // until the run it stopped has ended
  bool broken_ = false;
};

// The Postgres name of a type OID the query server reports ("int8[]" for an array of
// int8, "unknown" for others), and whether its text form is a number.
std::string PgTypeName(uint32_t type_oid);
bool PgTypeNumeric(uint32_t type_oid);

}  // namespace sluice::query
