// PostgresServer: a real PostgreSQL server for tests and `sluice bench pipeline --sink
// postgres` (Debian's `postgresql` package), started in a temporary directory on 127.0.0.1
// and a free port, with trust
// authentication for user `postgres`, and removed at the end. initdb refuses to run as
// root, so when the test runs as root (CI) every server command runs as the `postgres`
// user through `runuser`, in a directory that user owns.
//
//   if (std::string why = PostgresServer::Unavailable(); !why.empty()) GTEST_SKIP() << why;
//   PostgresServer pg;
//   ASSERT_EQ(pg.Start(), "");
//   ... pg.dsn() ...
//
// Lifecycle: Start, then any number of Stop/Start (same data and port); the destructor
// stops a running server (immediate mode) and removes the directory. One thread owns it.
#pragma once

#include <string>
#include <utility>

namespace sluice::sinks::testing {

// A loopback TCP port nothing listens on now (the kernel's pick, released again), or 0.
int FreePort();

class PostgresServer {
 public:
  // Why no server can be started here (the binaries are missing), or "" when one can.
  static std::string Unavailable();
  // The directory with initdb, pg_ctl and postgres ("" when not found): the newest of
  // /usr/lib/postgresql/*/bin, or $SLUICE_PG_BINDIR.
  static std::string BinDir();

  // `extra_conf`: postgresql.conf lines appended after the tests' own (a later setting
  // wins), read by the first Start.
  explicit PostgresServer(std::string extra_conf = "") : extra_conf_(std::move(extra_conf)) {}
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // The first call creates the cluster (initdb) on a free port; every call starts the
  // server and waits until it accepts connections. "" or what went wrong (with the log).
  std::string Start();
  // Stops the server (fast mode: clients are disconnected). "" or what went wrong.
  std::string Stop();
  bool running() const { return running_; }

  int port() const { return port_; }
  // The server's directory (its data under data/): the server can read and write files
  // here, for COPY ... TO/FROM a file.
  const std::string& dir() const { return dir_; }
  // A libpq connection string for `dbname` as user postgres over TCP.
  std::string dsn(const std::string& dbname = "postgres") const;

  // Runs `sql` with psql (for checks); its output with -At (unaligned, tuples only), or
  // "ERROR: ..." when psql failed.
  std::string Psql(const std::string& sql, const std::string& dbname = "postgres") const;

 private:
  std::string extra_conf_;
  std::string dir_;  // owned by the postgres user when running as root
  int port_ = 0;
  bool running_ = false;
};

}  // namespace sluice::sinks::testing
