// Session: one Postgres client connection of the QueryServer, on its own thread, with
// its own duck::Connection. Internal to the query module (server.cc creates them).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "duck/database.h"
#include "net/transport.h"
#include "query/copy_out.h"
#include "query/pg_protocol.h"
#include "query/pg_types.h"
#include "query/sql_text.h"

namespace sluice::query {

class ServerState;

// What other threads may touch of a session: the cancel key, the running query's
// start (for the watchdog) and why it was interrupted. Guarded by ServerState's mutex
// except the atomics.
struct SessionSlot {
  int32_t process_id = 0;
  int32_t secret_key = 0;
  int fd = -1;
  duck::Connection* connection = nullptr;    // set while the session has one
  std::atomic<int64_t> running_since_ms{0};  // 0: no query running
  // 0 none, 1 cancel request, 2 timeout, 3 RSS, 4 RSS and the user over its memory_share
  std::atomic<int> interrupt_reason{0};
  std::atomic<int64_t> rss_at_interrupt{0};  // reasons 3, 4: the RSS the watchdog saw
  // A simple query is being answered (from its Query message to its ReadyForQuery): a
  // cancel that finds no statement running (one waiting for its admission turn, or between
  // two statements) is kept in `cancel_pending` and stops the next statement of that query,
  // as Postgres's cancel stops a query waiting on a lock.
  std::atomic<bool> in_query{false};
  std::atomic<bool> cancel_pending{false};
  std::string user;  // set with the connection (under the server's lock)
};

class Session {
 public:
  // `trusted_user`: a session of this process's own (QueryServer::ConnectLocal) whose
  // caller already authenticated its user: it runs as that user, whatever the startup
  // packet names, without a password or TLS.
  Session(ServerState& server, int fd, std::optional<std::string> trusted_user = std::nullopt)
      : server_(server),
        fd_(fd),
        transport_(net::MakePlaintext(fd)),
        trusted_user_(std::move(trusted_user)) {}
  // Runs the connection to its end and shuts the socket down (the server closes it after
  // joining the thread, so that its number is not reused while others may touch it).
  void Run();

 private:
  struct Column {
    std::string name;
    ColumnEncoder encoder;
  };
  struct Statement {
    std::string sql;               // after rewrite_query
    bool empty = false;            // no statement in it
    ClientSetting client_setting;  // a SET the server answers itself
    bool command = false;          // a statement the hooks' run_command answers (GRANT...)
    std::unique_ptr<duck::PreparedStatement> prepared;
    // The text DuckDB prepared (after the planning), and whether `prepared` has run once.
    // DuckDB's Parquet metadata functions cannot run a second time from one prepared
    // statement (their file list moves out of the bind data at the first run: an INTERNAL
    // error), so a statement naming one, or one that failed so at a later run, is prepared
    // again before each run after the first (design 0027).
    std::string prepared_text;
    bool executed = false;
    bool prepare_each_run = false;
    std::vector<uint32_t> param_oids;
    std::vector<Column> columns;
    bool returns_rows = false;
    // For planning again with steps when a portal of it starts (a SELECT whose Parse-time
    // plan said steps may apply): the text plan_statement got at Parse, and each
    // parameter's type as SQL ("" when DuckDB inferred none, nullopt when it cannot be
    // written as SQL: such a statement is never planned again).
    bool steps_may_apply = false;
    std::string plan_text;
    // Fetches again the local copies of S3 files the SQL names (PlannedStatement::refetch),
    // held by each portal while it may run; empty without such files.
    std::function<Result<std::shared_ptr<const void>>()> refetch;
    std::vector<std::optional<std::string>> param_sql_types;
    // COPY ... TO STDOUT: `prepared` is its query, `sql` the COPY (for its tag), and
    // returns_rows is false (Describe answers NoData, as Postgres does).
    std::optional<CopyOptions> copy;
  };
  // Runs a plan's cleanup when destroyed (the portal's end, however it ends).
  struct StepsCleanup {
    std::function<void()> run;
    ~StepsCleanup() {
      if (run) run();
    }
  };
  // Members are destroyed bottom-up: the stream before the plan it reads, the plan's
  // cleanup after both.
  struct Portal {
    std::shared_ptr<Statement> statement;
    std::vector<std::optional<duck::Value>> params;  // nullopt: NULL
    // Each parameter as an SQL literal of the parameter's type, for planning with steps;
    // empty when one cannot be written (a bytea or array value). A binary value's
    // literal is written when the portal starts, by DuckDB's own text form of the decoded
    // value: binary_types[i] is then that value's type as SQL ("" for the others).
    std::vector<std::string> literals;
    std::vector<std::string> binary_types;
    std::vector<int16_t> result_formats;                   // as Bind gave them
    std::vector<int16_t> formats;                          // one per column
    std::unique_ptr<StepsCleanup> steps_cleanup;           // set when steps ran for this portal
    std::unique_ptr<duck::PreparedStatement> steps_final;  // the SQL to run after them
    std::shared_ptr<const void> holds;  // the statement's copies of S3 files (refetch)
    std::optional<duck::StreamResult> stream;
    std::vector<ColumnEncoder> encoders;       // of the running result
    std::optional<CopyOutWriter> copy_writer;  // a COPY's, set when it starts
    std::optional<duck::DataChunk> chunk;
    uint64_t chunk_row = 0;
    uint64_t rows = 0;
    uint64_t generation = 0;  // Session::duck_generation_ when its stream started
    bool started = false;
    bool done = false;
  };
  // An error for the client: SQLSTATE and message.
  struct SqlError {
    std::string sqlstate;
    std::string message;
    bool fatal = false;
    std::string hint;
    // Where DuckDB's error points: a byte offset in the statement as the client wrote it
    // (npos: nowhere, or the statement was planned into another text), then the position
    // sent.
    size_t offset = std::string_view::npos;
    int position = 0;
  };

  // I/O. Reads fail (false) when the client went away or sent a malformed frame (an
  // error is then sent and the connection closed).
  bool Fill();
  bool Flush();
  bool FlushIfLarge();
  std::optional<std::string> ReadStartupPacket();
  std::optional<pg::Frame> ReadMessage();
  void SendError(const SqlError& e);
  // A permission error (42501) of a COPY statement gets a hint: to STDOUT works.
  static void AddCopyHint(std::string_view statement, SqlError& e);

  bool Startup();
  bool Authenticate(const std::string& user);
  bool Serve();

  // Simple query: every statement of `sql`, errors stop it; then ReadyForQuery.
  bool SimpleQuery(std::string_view sql);
  // Runs one piece of a simple query.
  std::optional<SqlError> RunSimpleStatement(std::string_view piece);
  // Extended protocol.
  std::optional<SqlError> HandleParse(const pg::ParseMessage& m);
  std::optional<SqlError> HandleBind(const pg::BindMessage& m);
  std::optional<SqlError> HandleDescribe(const pg::DescribeMessage& m);
  std::optional<SqlError> HandleExecute(const pg::ExecuteMessage& m);
  void HandleClose(const pg::CloseMessage& m);

  Result<std::shared_ptr<Statement>> PrepareStatement(std::string_view sql,
                                                      const std::vector<uint32_t>& oids,
                                                      SqlError* error);
  // Starts the portal's query (binding its parameters) and sends up to `max_rows` rows
  // (0: all), then CommandComplete or PortalSuspended.
  std::optional<SqlError> RunPortal(Portal& p, int32_t max_rows, bool describe_rows);
  // Binds the portal's parameters and starts its statement; sets its encoders and
  // formats from the real result.
  std::optional<SqlError> StartPortal(Portal& p);
  // Streams a started COPY portal's rows as CopyData to the end (an Execute's row limit
  // does not apply), then CopyDone and CommandComplete `COPY n`; an error on the way is
  // an ErrorResponse after the rows sent (which ends copy-out mode for the client).
  std::optional<SqlError> RunCopy(Portal& p);
  // For a COPY statement: what runs instead of it. nullopt, with `*query` set to the
  // query to stream, for COPY ... TO STDOUT; nullopt and `*query` empty for statements
  // DuckDB runs itself (other statements, COPY to or from a file, which DuckDB's sandbox
  // judges); an error for COPY FROM STDIN (0A000), PROGRAM (42501) and bad options.
  std::optional<SqlError> ParseCopy(std::string_view statement, std::optional<CopyOptions>* options,
                                    std::string* query);
  // At a portal's start: plans its statement again with steps allowed (parameters as
  // literals) when it may apply; when steps ran and the SQL after them has the
  // statement's columns, sets p.steps_final and p.steps_cleanup. Otherwise the portal
  // runs the prepared statement as before.
  std::optional<SqlError> PlanPortalSteps(Portal& p);
  // Fills in `literals` for the portal's binary values; false when one has no text form.
  bool BinaryLiterals(const Portal& p, std::vector<std::string>& literals);
  // Ends a portal (Close, Sync, a Bind or simple query replacing the unnamed one).
  void ErasePortal(const std::string& name);
  void WriteDescription(const Portal& p);
  std::optional<SqlError> ApplyClientSetting(const ClientSetting& s);
  // A statement the hooks answer themselves (SessionHooks::run_command): its tag, or error.
  std::optional<SqlError> RunCommand(std::string_view statement);
  SqlError FromDuck(const Status& st, duck::ErrorType type);
  SqlError FromHook(const Status& st);
  // Admission: a session runs one DuckDB query at a time, so it holds at most one turn.
  // TakeTurn waits for one (ServerState::Admit) unless held, marks the session running
  // (the timeout clock, cancel, the RSS watchdog) and is an error when none came in
  // time; ReleaseTurn gives it back. A simple-query statement holds it from its start to
  // its end; an extended-protocol portal from its start until it completes or fails, is
  // closed, or the next Sync (decision 26).
  // A turn of query.max_running (waiting in the queue), or for a light statement a turn
  // outside it: the timeout and the watchdogs apply to both.
  std::optional<SqlError> TakeTurn(bool light = false);
  void ReleaseTurn();
  bool turn_held_ = false;
  bool light_turn_ = false;  // the held turn is outside query.max_running (LightStatement)
  char TransactionStatus() const;
  // In a transaction block that failed, only its end runs (Postgres's 25P02 otherwise);
  // COMMIT and END become ROLLBACK.
  std::optional<SqlError> EndOfFailedTransaction(std::string_view* statement) const;
  void TrackTransaction(std::string_view tag, bool failed);

  ServerState& server_;
  int fd_;
  std::unique_ptr<net::Transport> transport_;  // the session's bytes, over fd_
  bool tls_ = false;                           // transport_ is TLS (after an SSLRequest)
  std::string in_;
  size_t in_pos_ = 0;
  std::string out_;
  std::shared_ptr<SessionSlot> slot_;
  std::unique_ptr<duck::Connection> conn_;
  std::string user_;
  std::optional<std::string> trusted_user_;
  std::map<std::string, std::shared_ptr<Statement>> statements_;
  std::map<std::string, Portal> portals_;
  // Simple-query SELECTs prepared before, by the text DuckDB ran (after planning): drivers
  // and tools send the same small statements again and again, and DuckDB's parse and
  // prepare were a third of a `SELECT 1`. Only SELECTs without parameters, COPY or planning
  // steps; emptied when any other statement runs (a SET or DDL may change how a text binds;
  // DuckDB itself binds a prepared statement again when a catalog it read changed), and
  // when it holds kMaxCachedStatements.
  static constexpr size_t kMaxCachedStatements = 64;
  // Prepares `s.prepared_text` again into `s.prepared` (see Statement::prepare_each_run).
  Status Reprepare(Statement& s);
  static void SetPreparedText(Statement& s, std::string_view text);
  std::unordered_map<std::string, std::shared_ptr<Statement>> simple_cache_;
  // Counts the DuckDB calls that close the connection's open stream (prepare, execute):
  // a suspended portal whose stream was closed that way cannot go on.
  uint64_t duck_generation_ = 0;
  bool in_transaction_ = false;
  bool failed_transaction_ = false;
};

}  // namespace sluice::query
