// The query server in process, driven by a raw protocol client: the message flows of
// the simple and extended protocols, malformed input (each closing only its own
// connection), cancel, the time limit, the connection limit, the sandbox and the hooks.
// Real clients (psql, libpq, pg) are in tests/integration.
#include "query/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "query/pg_protocol.h"
#include "query/server_state.h"

namespace sluice::query {
namespace {

using Msg = std::pair<char, std::string>;

std::string Frame(char type, std::string_view body) {
  std::string out;
  pg::MessageWriter w(out);
  w.Begin(type);
  w.Bytes(body);
  w.End();
  return out;
}

std::string Int32(int32_t v) {
  std::string out;
  pg::MessageWriter(out).Int32(v);
  return out;
}

std::string Int16(int16_t v) {
  std::string out;
  pg::MessageWriter(out).Int16(v);
  return out;
}

std::string Z(std::string_view s) { return std::string(s) + '\0'; }

std::string Query(std::string_view sql) { return Frame('Q', Z(sql)); }
std::string Parse(std::string_view name, std::string_view sql) {
  return Frame('P', Z(name) + Z(sql) + Int16(0));
}
std::string Bind(std::string_view portal, std::string_view stmt,
                 const std::vector<std::string>& text_params, int16_t result_format = 0) {
  std::string b = Z(portal) + Z(stmt) + Int16(0) + Int16(static_cast<int16_t>(text_params.size()));
  for (const std::string& p : text_params) b += Int32(static_cast<int32_t>(p.size())) + p;
  return Frame('B', b + Int16(1) + Int16(result_format));
}
std::string Execute(std::string_view portal, int32_t max_rows) {
  return Frame('E', Z(portal) + Int32(max_rows));
}
std::string Describe(char kind, std::string_view name) {
  return Frame('D', std::string(1, kind) + Z(name));
}
std::string Sync() { return Frame('S', ""); }
std::string FlushMsg() { return Frame('H', ""); }
std::string Close(char kind, std::string_view name) {
  return Frame('C', std::string(1, kind) + Z(name));
}

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    timeval tv{60, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }
  ~RawClient() { ::close(fd_); }

  void Send(std::string_view bytes) {
    (void)!::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }

  std::optional<Msg> Read() {
    while (true) {
      size_t used = 0;
      auto f = pg::ReadFrame(buf_, 1 << 30, &used);
      if (f.ok() && f->has_value()) {
        Msg m{(*f)->type, std::string((*f)->body)};
        buf_.erase(0, used);
        return m;
      }
      char tmp[65536];
      ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) return std::nullopt;
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }

  // Every message up to and including ReadyForQuery (or the close).
  std::vector<Msg> UntilReady() {
    std::vector<Msg> out;
    while (auto m = Read()) {
      out.push_back(*m);
      if (m->first == 'Z') break;
    }
    return out;
  }

  bool Startup(const std::string& user = "tester") {
    std::string body = Int32(pg::kProtocolVersion3) + Z("user") + Z(user) + Z("application_name") +
                       Z("raw") + '\0';
    Send(Int32(static_cast<int32_t>(body.size() + 4)) + body);
    for (const Msg& m : UntilReady()) {
      if (m.first == 'K') {
        pg::MessageReader r(m.second);
        pid_ = *r.Int32();
        secret_ = *r.Int32();
      }
      if (m.first == 'Z') return true;
    }
    return false;
  }

  // True when the server closed the connection (after any messages it sent first).
  bool ClosedByServer() {
    while (Read()) {
    }
    return true;
  }

  // One byte outside any frame (the answer to SSLRequest).
  char ReadRawByte() {
    if (buf_.empty()) {
      char b = 0;
      return ::recv(fd_, &b, 1, 0) == 1 ? b : '\0';
    }
    char b = buf_[0];
    buf_.erase(0, 1);
    return b;
  }

  bool connected() const { return connected_; }
  int32_t pid() const { return pid_; }
  int32_t secret() const { return secret_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string buf_;
  int32_t pid_ = 0, secret_ = 0;
};

std::string Types(const std::vector<Msg>& msgs) {
  std::string out;
  for (const Msg& m : msgs) out += m.first;
  return out;
}

// The SQLSTATE of the first ErrorResponse, or "".
std::string SqlState(const std::vector<Msg>& msgs, std::string* message = nullptr) {
  for (const Msg& m : msgs) {
    if (m.first != 'E') continue;
    std::string code;
    for (size_t i = 0; i < m.second.size() && m.second[i] != '\0';) {
      char f = m.second[i];
      size_t end = m.second.find('\0', i + 1);
      std::string v = m.second.substr(i + 1, end - i - 1);
      if (f == 'C') code = v;
      if (f == 'M' && message != nullptr) *message = v;
      i = end + 1;
    }
    return code;
  }
  return "";
}

// DataRow's text fields.
std::vector<std::string> Fields(const Msg& m) {
  pg::MessageReader r(m.second);
  std::vector<std::string> out;
  int16_t n = *r.Int16();
  for (int i = 0; i < n; ++i) {
    int32_t len = *r.Int32();
    out.push_back(len < 0 ? "<NULL>" : std::string(*r.Bytes(static_cast<size_t>(len))));
  }
  return out;
}

class QueryServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-query-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_ / "allowed");
  }
  void TearDown() override {
    if (server_) server_->Stop();
    std::filesystem::remove_all(dir_);
  }
  void StartServer(QueryServerOptions o = {}) {
    o.port = 0;
    o.memory_limit_bytes = 256 << 20;
    o.threads = 1;
    o.allowed_directories = {(dir_ / "allowed").string()};
    o.temp_directory = (dir_ / "spill").string();
    o.max_message_bytes = 1 << 20;
    auto s = QueryServer::Start(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
  }
  // A fresh session still answers: the server survived whatever came before.
  void ExpectServing() {
    RawClient c(server_->port());
    ASSERT_TRUE(c.Startup());
    c.Send(Query("SELECT 41 + 1"));
    auto msgs = c.UntilReady();
    ASSERT_EQ(Types(msgs), "TDCZ");
    EXPECT_EQ(Fields(msgs[1])[0], "42");
  }

  std::filesystem::path dir_;
  std::unique_ptr<QueryServer> server_;
};

TEST_F(QueryServerTest, SimpleQueryRunsEveryStatement) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(
      Query("CREATE TABLE t (a INT, b VARCHAR); INSERT INTO t VALUES (1, 'x'), (2, NULL); "
            "SELECT a, b FROM t ORDER BY a; UPDATE t SET a = a + 1; -- just a comment"));
  auto msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "CCTDDCCIZ");
  EXPECT_EQ(msgs[0].second, Z("CREATE TABLE"));
  EXPECT_EQ(msgs[1].second, Z("INSERT 0 2"));
  EXPECT_EQ(Fields(msgs[3]), (std::vector<std::string>{"1", "x"}));
  EXPECT_EQ(Fields(msgs[4]), (std::vector<std::string>{"2", "<NULL>"}));
  EXPECT_EQ(msgs[5].second, Z("SELECT 2"));
  EXPECT_EQ(msgs[6].second, Z("UPDATE 2"));
  EXPECT_EQ(msgs[8].second, "I");

  c.Send(Query(""));
  EXPECT_EQ(Types(c.UntilReady()), "IZ");
  c.Send(Query("SELECT 1; SELEC 2; SELECT 3"));
  msgs = c.UntilReady();
  EXPECT_EQ(Types(msgs), "TDCEZ");  // stops at the error
  EXPECT_EQ(SqlState(msgs), "42601");
  c.Send(Query("SELECT * FROM nosuch"));
  EXPECT_EQ(SqlState(c.UntilReady()), "42P01");
  c.Send(Query("SELECT nosuch FROM t"));
  EXPECT_EQ(SqlState(c.UntilReady()), "42703");
  c.Send(Query("SELECT 'x'::INT"));
  EXPECT_EQ(SqlState(c.UntilReady()), "22P02");
  c.Send(Query("BEGIN; SELECT 1"));
  msgs = c.UntilReady();
  EXPECT_EQ(msgs.back().second, "T");
  c.Send(Query("SELEC"));
  EXPECT_EQ(c.UntilReady().back().second, "E");
  c.Send(Query("ROLLBACK"));
  EXPECT_EQ(c.UntilReady().back().second, "I");
}

// A SELECT sent again reuses its prepared statement (session.h, simple_cache_), and never
// answers from before a change: a table replaced or grown, a view redefined.
TEST_F(QueryServerTest, RepeatedSelectsSeeEveryChange) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  auto one_row = [&](const std::string& sql) {
    c.Send(Query(sql));
    auto msgs = c.UntilReady();
    EXPECT_EQ(Types(msgs), "TDCZ") << sql;
    return msgs.size() > 1 ? Fields(msgs[1]) : std::vector<std::string>{};
  };
  c.Send(Query("CREATE TABLE t AS SELECT 1 AS a"));
  c.UntilReady();
  const std::string select = "SELECT * FROM t";
  EXPECT_EQ(one_row(select), (std::vector<std::string>{"1"}));
  EXPECT_EQ(one_row(select), (std::vector<std::string>{"1"}));
  c.Send(Query("CREATE OR REPLACE TABLE t AS SELECT 'two' AS b, 2 AS a"));
  c.UntilReady();
  EXPECT_EQ(one_row(select), (std::vector<std::string>{"two", "2"}));
  c.Send(Query("INSERT INTO t VALUES ('three', 3)"));
  c.UntilReady();
  EXPECT_EQ(one_row("SELECT count(*) FROM t"), (std::vector<std::string>{"2"}));
  EXPECT_EQ(one_row("SELECT count(*) FROM t"), (std::vector<std::string>{"2"}));
  c.Send(Query("INSERT INTO t VALUES ('four', 4)"));
  c.UntilReady();
  EXPECT_EQ(one_row("SELECT count(*) FROM t"), (std::vector<std::string>{"3"}));
  // A view redefined under the same text.
  c.Send(Query("CREATE VIEW v AS SELECT 1 AS x"));
  c.UntilReady();
  EXPECT_EQ(one_row("SELECT x FROM v"), (std::vector<std::string>{"1"}));
  c.Send(Query("CREATE OR REPLACE VIEW v AS SELECT 2 AS x"));
  c.UntilReady();
  EXPECT_EQ(one_row("SELECT x FROM v"), (std::vector<std::string>{"2"}));
}

// DuckDB's parquet_metadata and its kin fail inside DuckDB (an INTERNAL error) when one
// prepared statement runs them a second time; that once closed the whole database to every
// session. Each such run is prepared afresh: by the simple protocol's statement cache, by
// a named statement bound twice, and through a view (the name not in the text).
TEST_F(QueryServerTest, ParquetMetadataRunsAgainFromOnePreparedStatement) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  const std::string file = (dir_ / "allowed" / "m.parquet").string();
  c.Send(Query("COPY (SELECT range AS a FROM range(10)) TO '" + file + "' (FORMAT parquet)"));
  c.UntilReady();
  const std::vector<std::string> functions = {"parquet_metadata", "parquet_schema",
                                              "parquet_file_metadata", "parquet_kv_metadata"};
  for (const std::string& fn : functions) {
    const std::string sql = "SELECT count(*) FROM " + fn + "('" + file + "')";
    std::string first;
    for (int run = 0; run < 3; ++run) {
      c.Send(Query(sql));
      auto msgs = c.UntilReady();
      ASSERT_EQ(Types(msgs), "TDCZ") << sql << " run " << run;
      if (run == 0) first = Fields(msgs[1])[0];
      EXPECT_EQ(Fields(msgs[1])[0], first) << sql << " run " << run;
    }
  }
  c.Send(Parse("m", "SELECT count(*) FROM parquet_metadata($1)"));
  for (int run = 0; run < 3; ++run) {
    c.Send(Bind("", "m", {file}));
    c.Send(Execute("", 0));
    c.Send(Sync());
    auto msgs = c.UntilReady();
    ASSERT_EQ(Types(msgs).substr(Types(msgs).size() - 3), "DCZ") << "run " << run;
    EXPECT_EQ(Fields(msgs[msgs.size() - 3])[0], "1");
  }
  c.Send(Query("CREATE VIEW meta AS SELECT * FROM parquet_metadata('" + file + "')"));
  c.UntilReady();
  c.Send(Parse("v", "SELECT count(*) FROM meta"));
  for (int run = 0; run < 3; ++run) {
    c.Send(Bind("", "v", {}));
    c.Send(Execute("", 0));
    c.Send(Sync());
    auto msgs = c.UntilReady();
    ASSERT_EQ(Types(msgs).substr(Types(msgs).size() - 3), "DCZ")
        << "view run " << run << ": " << msgs[msgs.size() - 2].second;
    EXPECT_EQ(Fields(msgs[msgs.size() - 3])[0], "1");
  }
  ExpectServing();
}

TEST_F(QueryServerTest, ExtendedProtocolSuspendsPortalsAtRowLimits) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Parse("s", "SELECT range AS n FROM range(5000) WHERE range >= $1::INT"));
  c.Send(Describe('S', "s"));
  c.Send(Bind("p", "s", {"10"}));
  c.Send(Describe('P', "p"));
  c.Send(Execute("p", 3));
  c.Send(Execute("p", 0));
  c.Send(Execute("p", 0));
  c.Send(Sync());
  auto msgs = c.UntilReady();
  std::string types = Types(msgs);
  ASSERT_EQ(types.substr(0, 5), "1tT2T");
  ASSERT_EQ(types.substr(5, 4), "DDDs");
  EXPECT_EQ(Fields(msgs[5])[0], "10");
  EXPECT_EQ(types.substr(9), std::string(4987, 'D') + "CCZ");
  EXPECT_EQ(msgs[msgs.size() - 3].second, Z("SELECT 4990"));
  EXPECT_EQ(Fields(msgs[9])[0], "13");

  // Named statements survive Sync; the same statement bound twice.
  c.Send(Bind("", "s", {"4998"}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  EXPECT_EQ(Types(msgs), "2DDCZ");
}

TEST_F(QueryServerTest, AfterAnErrorEverythingUpToSyncIsSkipped) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Parse("", "SELEC 1"));
  c.Send(Bind("", "", {}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  auto msgs = c.UntilReady();
  EXPECT_EQ(Types(msgs), "EZ");
  EXPECT_EQ(SqlState(msgs), "42601");
  // Wrong parameter count: an error, and the connection goes on.
  c.Send(Parse("two", "SELECT $1::INT + $2::INT"));
  c.Send(Bind("", "two", {"1"}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  EXPECT_EQ(Types(msgs), "1EZ");
  EXPECT_EQ(SqlState(msgs), "08P01");
  c.Send(Bind("", "two", {"1", "2"}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "2DCZ");
  EXPECT_EQ(Fields(msgs[1])[0], "3");
  c.Send(Parse("", "SELECT 1; SELECT 2"));
  c.Send(Sync());
  EXPECT_EQ(SqlState(c.UntilReady()), "42601");
  c.Send(Bind("", "missing", {}));
  c.Send(Sync());
  EXPECT_EQ(SqlState(c.UntilReady()), "26000");
}

TEST_F(QueryServerTest, MalformedInputClosesOnlyThatConnection) {
  StartServer();
  RawClient idle(server_->port());  // a session open through all of it
  ASSERT_TRUE(idle.Startup());
  {
    RawClient c(server_->port());  // a negative startup length
    c.Send(Int32(-5));
    EXPECT_TRUE(c.ClosedByServer());
  }
  {
    RawClient c(server_->port());  // a truncated startup packet, then the client leaves
    c.Send(Int32(100) + "abc");
  }
  {
    RawClient c(server_->port());  // a message length below 4
    ASSERT_TRUE(c.Startup());
    c.Send("Q" + Int32(2));
    EXPECT_TRUE(c.ClosedByServer());
  }
  {
    RawClient c(server_->port());  // over query.max_message_bytes
    ASSERT_TRUE(c.Startup());
    c.Send("Q" + Int32((2 << 20) + 4));
    auto msgs = c.UntilReady();
    EXPECT_EQ(SqlState(msgs), "08P01");
  }
  {
    RawClient c(server_->port());  // an unknown message type
    ASSERT_TRUE(c.Startup());
    c.Send(Frame('!', "x"));
    auto msgs = c.UntilReady();
    EXPECT_EQ(SqlState(msgs), "08P01");
    EXPECT_TRUE(c.ClosedByServer());
  }
  {
    RawClient c(server_->port());  // a Query without its NUL, a Bind cut short
    ASSERT_TRUE(c.Startup());
    c.Send(Frame('B', std::string("\0\0\0\2\0", 5)));
    EXPECT_EQ(SqlState(c.UntilReady()), "08P01");
  }
  {
    RawClient c(server_->port());  // invalid UTF-8: an error, the session goes on
    ASSERT_TRUE(c.Startup());
    c.Send(Query("SELECT '\xff\xfe'"));
    EXPECT_EQ(SqlState(c.UntilReady()), "22021");
    c.Send(Query("SELECT 1"));
    EXPECT_EQ(Types(c.UntilReady()), "TDCZ");
  }
  {
    RawClient c(server_->port());  // SSLRequest is answered 'N', then a normal start
    c.Send(Int32(8) + Int32(pg::kSslRequestCode));
    EXPECT_EQ(c.ReadRawByte(), 'N');
    EXPECT_TRUE(c.Startup());
  }
  idle.Send(Query("SELECT 1"));
  EXPECT_EQ(Types(idle.UntilReady()), "TDCZ");
  ExpectServing();
}

TEST_F(QueryServerTest, CancelRequestInterruptsTheRunningQuery) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("SELECT count(*) FROM range(1000000000) a, range(1000) b"));
  std::atomic<bool> answered{false};
  std::thread canceller([&] {
    // Until the query answers: a cancel that lands before it started is ignored.
    while (!answered.load()) {
      RawClient k(server_->port());
      k.Send(Int32(16) + Int32(pg::kCancelRequestCode) + Int32(c.pid()) + Int32(c.secret()));
      k.ClosedByServer();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::string message;
  auto msgs = c.UntilReady();
  answered = true;
  canceller.join();
  EXPECT_EQ(SqlState(msgs, &message), "57014");
  EXPECT_EQ(message, "canceling statement due to user request");
  c.Send(Query("SELECT 1"));
  EXPECT_EQ(Types(c.UntilReady()), "TDCZ");
}

TEST_F(QueryServerTest, QueriesOverTheTimeLimitAreInterrupted) {
  StartServer({.timeout_ms = 300});
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("SELECT count(*) FROM range(1000000000) a, range(1000) b"));
  std::string message;
  EXPECT_EQ(SqlState(c.UntilReady(), &message), "57014");
  EXPECT_NE(message.find("statement timeout"), std::string::npos) << message;
  c.Send(Query("SELECT 1"));
  EXPECT_EQ(Types(c.UntilReady()), "TDCZ");
}

TEST_F(QueryServerTest, QueriesOverTheMemoryLimitFailWith53200) {
  StartServer();  // memory_limit 256 MiB; one string of ~900 MB cannot spill
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("SELECT length(string_agg(range::VARCHAR, ',')) FROM range(100000000)"));
  std::string message;
  EXPECT_EQ(SqlState(c.UntilReady(), &message), "53200");
  // DuckDB's hints (SET memory_limit, SET threads) are refused here: the config is named.
  EXPECT_EQ(message.find("SET memory_limit"), std::string::npos) << message;
  EXPECT_NE(message.find("query.memory_limit, 256 MiB"), std::string::npos) << message;
  c.Send(Query("SELECT 1"));
  EXPECT_EQ(Types(c.UntilReady()), "TDCZ");
}

TEST_F(QueryServerTest, AdmissionQueuesStatementsBeyondMaxRunning) {
  StartServer({.max_running = 1, .queue_timeout_ms = 500});
  RawClient a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.Startup());
  ASSERT_TRUE(b.Startup());
  // a holds the only turn with a long query; b waits half a second, then gives up. Until
  // a's query has its turn, b's may still run at once: ask again.
  a.Send(Query("SELECT count(*) FROM range(1000000000) x, range(1000) y"));
  std::string state, message;
  for (int attempt = 0; attempt < 50 && state != "53300"; ++attempt) {
    b.Send(Query("SELECT count(*) FROM range(10)"));
    state = SqlState(b.UntilReady(), &message);
    if (state != "53300") std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(state, "53300");
  EXPECT_NE(message.find("query.max_running"), std::string::npos) << message;
  // Light statements do not queue: a pool's health check, psql's \dt, transaction control.
  for (const char* light :
       {"SELECT 1",
        "SELECT c.relname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n "
        "ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'v')",
        "BEGIN", "ROLLBACK"}) {
    b.Send(Query(light));
    EXPECT_EQ(SqlState(b.UntilReady()), "") << light;
  }
  server_->Stop();  // interrupts a's query
}

TEST_F(QueryServerTest, AWaitingStatementRunsWhenATurnFrees) {
  StartServer({.max_running = 1, .queue_timeout_ms = 30'000});
  RawClient a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.Startup());
  ASSERT_TRUE(b.Startup());
  a.Send(Query("SELECT count(*) FROM range(30000000)"));
  b.Send(Query("SELECT 42"));
  EXPECT_EQ(Types(a.UntilReady()), "TDCZ");
  auto msgs = b.UntilReady();
  ASSERT_EQ(Types(msgs), "TDCZ");
  EXPECT_EQ(Fields(msgs[1])[0], "42");
}

TEST_F(QueryServerTest, AnExtendedStatementTakesOneTurn) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  // Parse, Bind, Describe (which starts a portal with parameters), Executes with a row
  // limit, Sync: one turn. Before, the portal's start and each Execute took one each.
  uint64_t before = server_->stats().turns;
  c.Send(Parse("s", "SELECT range AS n FROM range(100) WHERE range >= $1::INT"));
  c.Send(Bind("p", "s", {"90"}));
  c.Send(Describe('P', "p"));
  c.Send(Execute("p", 3));
  c.Send(Execute("p", 3));
  c.Send(Execute("p", 0));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "12TDDDsDDDsDDDDCZ");
  EXPECT_EQ(server_->stats().turns - before, 1u);
  // Without Describe; two statements in one batch take one turn each.
  before = server_->stats().turns;
  c.Send(Bind("", "s", {"98"}));
  c.Send(Execute("", 1));
  c.Send(Execute("", 0));
  c.Send(Parse("", "SELECT count(*) FROM range(3)"));
  c.Send(Bind("", "", {}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "2DsDC12DCZ");
  EXPECT_EQ(server_->stats().turns - before, 2u);
  // A portal resumed after a Sync (inside a transaction block) takes a new turn.
  c.Send(Query("BEGIN"));
  c.UntilReady();
  before = server_->stats().turns;
  c.Send(Bind("q", "s", {"95"}));
  c.Send(Execute("q", 2));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "2DDsZ");
  c.Send(Execute("q", 0));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "DDDCZ");
  EXPECT_EQ(server_->stats().turns - before, 2u);
  c.Send(Query("COMMIT"));
  c.UntilReady();
}

TEST_F(QueryServerTest, ASuspendedPortalHoldsItsTurnUntilSync) {
  StartServer({.max_running = 1, .queue_timeout_ms = 300});
  RawClient a(server_->port()), b(server_->port());
  ASSERT_TRUE(a.Startup());
  ASSERT_TRUE(b.Startup());
  a.Send(Parse("", "SELECT range AS n FROM range(10)"));
  a.Send(Bind("", "", {}));
  a.Send(Execute("", 2));
  a.Send(FlushMsg());
  for (char t : std::string("12DDs")) {
    auto m = a.Read();
    ASSERT_TRUE(m);
    ASSERT_EQ(m->first, t);
  }
  b.Send(Query("SELECT count(*) FROM range(10)"));
  EXPECT_EQ(SqlState(b.UntilReady()), "53300");  // a's portal holds the only turn
  a.Send(Execute("", 0));
  a.Send(Sync());
  auto msgs = a.UntilReady();
  EXPECT_EQ(Types(msgs), std::string(8, 'D') + "CZ");
  b.Send(Query("SELECT 1"));
  EXPECT_EQ(Types(b.UntilReady()), "TDCZ");
  // Closing a suspended portal gives its turn back too.
  a.Send(Parse("", "SELECT range AS n FROM range(10)"));
  a.Send(Bind("", "", {}));
  a.Send(Execute("", 2));
  a.Send(Close('P', ""));
  a.Send(FlushMsg());
  for (char t : std::string("12DDs3")) {
    auto m = a.Read();
    ASSERT_TRUE(m);
    ASSERT_EQ(m->first, t);
  }
  b.Send(Query("SELECT 1"));
  EXPECT_EQ(Types(b.UntilReady()), "TDCZ");
  a.Send(Sync());
  EXPECT_EQ(Types(a.UntilReady()), "Z");
}

// A planner with steps as the partitioned rewrites have them (query/rewrite): for a
// statement reading `big`, the statement itself into a temp table, then a SELECT of it.
// "-- other columns" makes the final SELECT's columns differ; "-- slow" makes the step
// run until it is interrupted.
struct FakeStepsPlanner {
  std::shared_ptr<std::mutex> mu = std::make_shared<std::mutex>();
  std::shared_ptr<std::vector<std::string>> planned_with_steps =
      std::make_shared<std::vector<std::string>>();

  std::function<Result<PlannedStatement>(duck::Connection&, std::string_view, bool)> Hook() const {
    return [mu = mu, seen = planned_with_steps](duck::Connection& conn, std::string_view sql,
                                                bool allow_steps) -> Result<PlannedStatement> {
      PlannedStatement out{std::string(sql), nullptr};
      if (sql.find("FROM big") == std::string_view::npos) {
        out.steps_may_apply = false;
        return out;
      }
      if (!allow_steps) return out;
      {
        std::lock_guard lock(*mu);
        seen->push_back(std::string(sql));
      }
      std::string input =
          sql.find("-- slow") != std::string_view::npos
              ? "SELECT count(*) AS k, 0::BIGINT AS v FROM range(1000000000) a, range(1000) b"
              : std::string(sql);
      Status st = conn.Execute("CREATE TEMP TABLE parts AS " + input);
      if (!st.ok()) {
        (void)conn.Execute("DROP TABLE IF EXISTS parts");
        return st;
      }
      out.sql = sql.find("-- other columns") != std::string_view::npos
                    ? "SELECT *, 1 AS extra FROM parts ORDER BY k"
                    : "SELECT * FROM parts ORDER BY k";
      out.cleanup = [](duck::Connection& c) { (void)c.Execute("DROP TABLE IF EXISTS parts"); };
      out.explanation = "fake: the statement into parts";
      return out;
    };
  }
  std::vector<std::string> Seen() const {
    std::lock_guard lock(*mu);
    return *planned_with_steps;
  }
};

TEST_F(QueryServerTest, ExtendedProtocolRunsPlanningStepsWhenThePortalStarts) {
  FakeStepsPlanner planner;
  QueryServerOptions o;
  o.hooks.plan_statement = planner.Hook();
  StartServer(std::move(o));
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("CREATE TABLE big AS SELECT range AS k, range * 2 AS v FROM range(10000)"));
  ASSERT_EQ(Types(c.UntilReady()), "CZ");
  auto parts_left = [&] {
    c.Send(Query("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'parts'"));
    auto msgs = c.UntilReady();
    return msgs.size() == 4 ? Fields(msgs[1])[0] : "?";
  };

  // With a parameter, described, run in batches of 4 rows.
  c.Send(Parse("s", "SELECT k, v FROM big WHERE k >= $1 ORDER BY k"));
  c.Send(Describe('S', "s"));
  c.Send(Bind("p", "s", {"9990"}));
  c.Send(Describe('P', "p"));
  c.Send(Execute("p", 4));
  c.Send(Execute("p", 4));
  c.Send(Execute("p", 0));
  c.Send(Sync());
  auto msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "1tT2TDDDDsDDDDsDDCZ");
  EXPECT_EQ(msgs[2].second, msgs[4].second);  // the statement's RowDescription is the portal's
  std::vector<std::string> rows;
  for (const Msg& m : msgs) {
    if (m.first == 'D') rows.push_back(Fields(m)[0] + "," + Fields(m)[1]);
  }
  EXPECT_EQ(rows.front(), "9990,19980");
  EXPECT_EQ(rows.back(), "9999,19998");
  EXPECT_EQ(msgs[msgs.size() - 2].second, Z("SELECT 10"));
  ASSERT_EQ(planner.Seen().size(), 1u);
  EXPECT_EQ(planner.Seen()[0],
            "SELECT k, v FROM big WHERE k >= (CAST('9990' AS BIGINT)) ORDER BY k");
  EXPECT_EQ(server_->stats().extended_statements_with_steps, 1u);
  EXPECT_EQ(parts_left(), "0");  // cleaned up when the portal completed

  // The same answer through the simple protocol.
  c.Send(Query("SELECT k, v FROM big WHERE k >= 9990 ORDER BY k"));
  auto simple = c.UntilReady();
  std::vector<std::string> simple_rows;
  for (const Msg& m : simple) {
    if (m.first == 'D') simple_rows.push_back(Fields(m)[0] + "," + Fields(m)[1]);
  }
  EXPECT_EQ(simple_rows, rows);
  EXPECT_EQ(server_->stats().simple_statements_with_steps, 1u);

  // Without parameters; a suspended portal closed by Sync still cleans up.
  c.Send(Parse("", "SELECT k, v FROM big ORDER BY k"));
  c.Send(Bind("", "", {}));
  c.Send(Execute("", 2));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "12DDsZ");
  EXPECT_EQ(server_->stats().extended_statements_with_steps, 2u);
  EXPECT_EQ(parts_left(), "0");

  // Inside a transaction block a suspended portal outlives the Sync; its plan is cleaned
  // up when the transaction ends.
  c.Send(Query("BEGIN"));
  c.UntilReady();
  c.Send(Bind("q", "s", {"9990"}));
  c.Send(Execute("q", 2));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "2DDsZ");
  c.Send(Execute("q", 2));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "DDsZ");
  EXPECT_EQ(Fields(msgs[0])[0], "9992");
  c.Send(Query("COMMIT"));
  c.UntilReady();
  EXPECT_EQ(parts_left(), "0");
  c.Send(Execute("q", 0));
  c.Send(Sync());
  EXPECT_EQ(SqlState(c.UntilReady()), "34000");
  EXPECT_EQ(server_->stats().extended_statements_with_steps, 3u);

  // When the SQL after the steps would return other columns, the plain plan answers.
  c.Send(Parse("", "SELECT k, v FROM big WHERE k >= $1 ORDER BY k -- other columns"));
  c.Send(Bind("", "", {"9998"}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "12DDCZ");
  EXPECT_EQ(Fields(msgs[2]).size(), 2u);
  EXPECT_EQ(server_->stats().extended_statements_with_steps, 3u);
  EXPECT_EQ(parts_left(), "0");

  // A NULL parameter is a typed NULL literal; a binary one is written in DuckDB's text
  // form of the decoded value, cast back to the value's type, then to the parameter's.
  size_t seen_before = planner.Seen().size();
  c.Send(Frame('B', Z("") + Z("s") + Int16(0) + Int16(1) + Int32(-1) + Int16(0)));
  c.Send(Execute("", 0));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "2CZ");
  ASSERT_EQ(planner.Seen().size(), seen_before + 1);
  EXPECT_EQ(planner.Seen().back(),
            "SELECT k, v FROM big WHERE k >= (CAST(NULL AS BIGINT)) ORDER BY k");
  std::string int8(8, '\0');
  int8[6] = static_cast<char>(9995 >> 8);
  int8[7] = static_cast<char>(9995 & 0xff);
  c.Send(Frame('B', Z("") + Z("s") + Int16(1) + Int16(1) + Int16(1) + Int32(8) + int8 + Int16(0)));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "2DDDDDCZ");
  EXPECT_EQ(Fields(msgs[1])[0], "9995");
  ASSERT_EQ(planner.Seen().size(), seen_before + 2);
  EXPECT_EQ(planner.Seen().back(),
            "SELECT k, v FROM big WHERE k >= (CAST(CAST('9995' AS BIGINT) AS BIGINT)) ORDER BY k");
  double half = 19989.5;
  uint64_t bits = 0;
  std::memcpy(&bits, &half, 8);
  std::string float8(8, '\0');
  for (int i = 0; i < 8; ++i) float8[i] = static_cast<char>(bits >> (56 - 8 * i));
  c.Send(Parse("d", "SELECT k, v FROM big WHERE v::DOUBLE >= $1 ORDER BY k"));
  c.Send(
      Frame('B', Z("") + Z("d") + Int16(1) + Int16(1) + Int16(1) + Int32(8) + float8 + Int16(0)));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "12DDDDDCZ");
  EXPECT_EQ(Fields(msgs[2])[0], "9995");
  EXPECT_EQ(planner.Seen().back(),
            "SELECT k, v FROM big WHERE v::DOUBLE >= (CAST(CAST('19989.5' AS DOUBLE) AS DOUBLE)) "
            "ORDER BY k");
  int64_t micros = 45296789012;  // 2000-01-01 12:34:56.789012 UTC, Postgres's epoch
  std::string ts(8, '\0');
  for (int i = 0; i < 8; ++i)
    ts[i] = static_cast<char>(static_cast<uint64_t>(micros) >> (56 - 8 * i));
  c.Send(Parse(
      "t", "SELECT k, v FROM big WHERE $1 < TIMESTAMPTZ '2000-01-01 12:34:57+00' AND k >= 9999"));
  c.Send(Frame('B', Z("") + Z("t") + Int16(1) + Int16(1) + Int16(1) + Int32(8) + ts + Int16(0)));
  c.Send(Execute("", 0));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "12DCZ");
  EXPECT_EQ(planner.Seen().back(),
            "SELECT k, v FROM big WHERE (CAST(CAST('2000-01-01 12:34:56.789012+00' AS TIMESTAMP "
            "WITH TIME ZONE) AS "
            "TIMESTAMP WITH TIME ZONE)) < TIMESTAMPTZ '2000-01-01 12:34:57+00' AND k >= 9999");
  EXPECT_EQ(server_->stats().extended_statements_with_steps, 7u);

  // A statement the planner rules out at Parse is not planned again.
  size_t seen = planner.Seen().size();
  c.Send(Parse("", "SELECT $1::INT + 1"));
  c.Send(Bind("", "", {"1"}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  EXPECT_EQ(Types(c.UntilReady()), "12DCZ");
  EXPECT_EQ(planner.Seen().size(), seen);
}

TEST_F(QueryServerTest, ACancelDuringExtendedPlanningStepsInterruptsThem) {
  FakeStepsPlanner planner;
  QueryServerOptions o;
  o.hooks.plan_statement = planner.Hook();
  StartServer(std::move(o));
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("CREATE TABLE big AS SELECT range AS k, range * 2 AS v FROM range(10)"));
  ASSERT_EQ(Types(c.UntilReady()), "CZ");
  c.Send(Parse("", "SELECT k, v FROM big WHERE k >= $1 -- slow"));
  c.Send(Bind("", "", {"0"}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  std::atomic<bool> answered{false};
  std::thread canceller([&] {
    while (!answered.load()) {
      RawClient k(server_->port());
      k.Send(Int32(16) + Int32(pg::kCancelRequestCode) + Int32(c.pid()) + Int32(c.secret()));
      k.ClosedByServer();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::string message;
  auto msgs = c.UntilReady();
  answered = true;
  canceller.join();
  EXPECT_EQ(Types(msgs), "12EZ");
  EXPECT_EQ(SqlState(msgs, &message), "57014");
  EXPECT_EQ(message, "canceling statement due to user request");
  c.Send(Query("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'parts'"));
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "TDCZ");
  EXPECT_EQ(Fields(msgs[1])[0], "0");
}

TEST_F(QueryServerTest, ExtendedPlanningStepsRunUnderTheStatementTimeout) {
  FakeStepsPlanner planner;
  QueryServerOptions o;
  o.hooks.plan_statement = planner.Hook();
  o.timeout_ms = 300;
  StartServer(std::move(o));
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("CREATE TABLE big AS SELECT range AS k, range * 2 AS v FROM range(10)"));
  ASSERT_EQ(Types(c.UntilReady()), "CZ");
  c.Send(Parse("", "SELECT k, v FROM big -- slow"));
  c.Send(Bind("", "", {}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  std::string message;
  auto msgs = c.UntilReady();
  EXPECT_EQ(Types(msgs), "12EZ");
  EXPECT_EQ(SqlState(msgs, &message), "57014");
  EXPECT_NE(message.find("statement timeout"), std::string::npos) << message;
  EXPECT_EQ(planner.Seen().size(), 1u);
}

TEST_F(QueryServerTest, TheRssWatchdogInterruptsTheLongestRunningStatement) {
  // A limit every process is above: the running statement is interrupted with 53200.
  StartServer({.rss_limit_bytes = 1});
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("SELECT count(*) FROM range(1000000000) a, range(1000) b"));
  std::string message;
  EXPECT_EQ(SqlState(c.UntilReady(), &message), "53200");
  EXPECT_NE(message.find("query.rss_limit"), std::string::npos) << message;
}

// Under memory pressure, a user running more than its memory_share of the statements
// loses its longest-running one first; without shares, or with one user, the longest goes.
TEST(PickMemoryVictimTest, UsersAboveTheirShareGoFirst) {
  // light started first; heavy (25%) runs two of three statements.
  std::vector<RunningStatement> s = {
      {"light", 100, 0, false}, {"heavy", 200, 25, false}, {"heavy", 300, 25, false}};
  auto v = PickMemoryVictim(s);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->first, 1u);
  EXPECT_TRUE(v->second);
  // Within its share (two of three is 67%): the longest-running.
  s[1].share_percent = s[2].share_percent = 70;
  v = PickMemoryVictim(s);
  EXPECT_EQ(v->first, 0u);
  EXPECT_FALSE(v->second);
  // One user alone is never "over": nobody else is starved.
  std::vector<RunningStatement> alone = {{"heavy", 200, 10, false}, {"heavy", 100, 10, false}};
  v = PickMemoryVictim(alone);
  EXPECT_EQ(v->first, 1u);
  EXPECT_FALSE(v->second);
  // An interrupted statement is not picked again; none left: nullopt.
  alone[1].interrupted = true;
  EXPECT_EQ(PickMemoryVictim(alone)->first, 0u);
  alone[0].interrupted = true;
  EXPECT_FALSE(PickMemoryVictim(alone).has_value());
  EXPECT_FALSE(PickMemoryVictim({}).has_value());
}

// A line comment ends at \r for DuckDB as for Postgres: the server splits statements the
// same way, and a piece DuckDB would read as two is refused rather than run unchecked.
TEST_F(QueryServerTest, ALineCommentEndsAtACarriageReturn) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("SELECT 1 AS a --\r; SELECT 2 AS b"));
  auto msgs = c.UntilReady();
  EXPECT_EQ(Types(msgs), "TDCTDCZ");  // two statements, each answered
  c.Send(Query("SELECT 1 AS a --\rSELECT 2"));
  EXPECT_EQ(SqlState(c.UntilReady()), "42601");
}

TEST_F(QueryServerTest, ConnectionsOverTheLimitAreRefused) {
  StartServer({.max_connections = 2});
  RawClient a(server_->port()), b(server_->port()), c(server_->port());
  ASSERT_TRUE(a.Startup());
  ASSERT_TRUE(b.Startup());
  EXPECT_FALSE(c.Startup());
  std::string body = Int32(pg::kProtocolVersion3) + Z("user") + Z("x") + '\0';
  RawClient d(server_->port());
  d.Send(Int32(static_cast<int32_t>(body.size() + 4)) + body);
  EXPECT_EQ(SqlState(d.UntilReady()), "53300");
}

TEST_F(QueryServerTest, SandboxRefusesSettingsFilesAttachAndExtensions) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  std::string outside = (dir_ / "outside.csv").string();
  std::string inside = (dir_ / "allowed" / "inside.csv").string();
  for (const std::string& sql : std::vector<std::string>{
           std::string("SET memory_limit = '64GB'"), std::string("SET threads = 64"),
           "COPY (SELECT 1) TO '" + outside + "'", "SELECT * FROM read_csv('/etc/passwd')",
           std::string("ATTACH ':memory:' AS m"),
           "ATTACH '" + (dir_ / "allowed" / "x.db").string() + "'", std::string("INSTALL httpfs"),
           std::string("LOAD httpfs"), std::string("SET TimeZone = 'Europe/Berlin'")}) {
    c.Send(Query(sql));
    std::string state = SqlState(c.UntilReady());
    if (sql.find("TimeZone") != std::string::npos) {
      EXPECT_EQ(state, "0A000") << sql;
    } else {
      EXPECT_EQ(state, "42501") << sql;
    }
  }
  EXPECT_FALSE(std::filesystem::exists(outside));
  c.Send(Query("COPY (SELECT 1 AS a) TO '" + inside + "'"));
  EXPECT_EQ(SqlState(c.UntilReady()), "");
  c.Send(Query("SELECT a FROM read_csv('" + inside + "')"));
  auto msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "TDCZ");
  EXPECT_EQ(Fields(msgs[1])[0], "1");
  c.Send(Query("SELECT current_setting('memory_limit')"));
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "TDCZ");
  EXPECT_EQ(Fields(msgs[1])[0].substr(0, 3), "256");
  c.Send(Query("SET application_name = 'other'"));
  msgs = c.UntilReady();
  EXPECT_EQ(Types(msgs), "SCZ");
}

TEST_F(QueryServerTest, HooksRewriteQueriesAndPrepareSessions) {
  QueryServerOptions o;
  o.hooks.on_session_start = [](duck::Connection& conn, std::string_view, std::string_view) {
    return conn.Execute("CREATE TEMP MACRO answer() AS 42");
  };
  o.hooks.rewrite_query = [](std::string_view sql) -> Result<std::string> {
    if (sql == "SELECT forbidden") return InvalidArgumentError("42501: not for you");
    std::string s(sql);
    size_t p = s.find("MAGIC");
    if (p != std::string::npos) s.replace(p, 5, "answer()");
    return s;
  };
  StartServer(std::move(o));
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("SELECT MAGIC"));
  auto msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "TDCZ");
  EXPECT_EQ(Fields(msgs[1])[0], "42");
  c.Send(Parse("", "SELECT MAGIC + $1::INT"));
  c.Send(Bind("", "", {"1"}));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "12DCZ");
  EXPECT_EQ(Fields(msgs[2])[0], "43");
  std::string message;
  c.Send(Query("SELECT forbidden"));
  EXPECT_EQ(SqlState(c.UntilReady(), &message), "42501");
  EXPECT_EQ(message, "not for you");
}

TEST_F(QueryServerTest, StopClosesOpenSessions) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  EXPECT_EQ(server_->session_count(), 1);
  server_->Stop();
  EXPECT_TRUE(c.ClosedByServer());
}

}  // namespace
}  // namespace sluice::query

namespace sluice::query {
namespace {

// CopyData bodies of `msgs`, concatenated: what a client writes to its file.
std::string CopyData(const std::vector<Msg>& msgs) {
  std::string out;
  for (const Msg& m : msgs) {
    if (m.first == 'd') out += m.second;
  }
  return out;
}

std::string Tag(const std::vector<Msg>& msgs) {
  for (const Msg& m : msgs) {
    if (m.first == 'C') return m.second.substr(0, m.second.find('\0'));
  }
  return "";
}

TEST_F(QueryServerTest, CopyToStdoutStreamsTextAndCsv) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query(
      "CREATE TABLE t (id INT, s VARCHAR, x DOUBLE); "
      "INSERT INTO t VALUES (1, 'tab\there, \"quoted\"', 1.5), (2, NULL, NULL), (3, '', -0.25), "
      "(4, E'two\\nlines\\\\', 1e100)"));
  ASSERT_EQ(SqlState(c.UntilReady()), "");

  c.Send(Query("COPY (SELECT * FROM t ORDER BY id) TO STDOUT"));
  auto msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "HddddcCZ");
  // Text overall, three columns, each text.
  EXPECT_EQ(msgs[0].second, std::string("\0\0\3\0\0\0\0\0\0", 9));
  EXPECT_EQ(msgs[1].second, "1\ttab\\there, \"quoted\"\t1.5\n");  // one row per CopyData
  EXPECT_EQ(CopyData(msgs),
            "1\ttab\\there, \"quoted\"\t1.5\n"
            "2\t\\N\t\\N\n"
            "3\t\t-0.25\n"
            "4\ttwo\\nlines\\\\\t1e+100\n");
  EXPECT_EQ(Tag(msgs), "COPY 4");

  c.Send(Query("COPY t TO STDOUT WITH (FORMAT csv, HEADER, FORCE_QUOTE (ID))"));
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "HdddddcCZ");
  EXPECT_EQ(CopyData(msgs),
            "id,s,x\n"
            "\"1\",\"tab\there, \"\"quoted\"\"\",1.5\n"
            "\"2\",,\n"
            "\"3\",\"\",-0.25\n"
            "\"4\",\"two\nlines\\\",1e+100\n");

  // The old keywords psql's \copy passes on, and the table form with columns.
  c.Send(Query("COPY t (id, x) TO STDOUT DELIMITER '|' NULL 'nil'"));
  EXPECT_EQ(CopyData(c.UntilReady()), "1|1.5\n2|nil\n3|-0.25\n4|1e+100\n");

  // Next to other statements in one Query, and with no rows.
  c.Send(Query("COPY (SELECT 1 AS a WHERE false) TO STDOUT (HEADER); SELECT 2"));
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "HdcCTDCZ");
  EXPECT_EQ(msgs[1].second, "a\n");
  EXPECT_EQ(Tag(msgs), "COPY 0");
}

TEST_F(QueryServerTest, CopyToStdoutBinaryHasPostgresLayout) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("COPY (SELECT 7::INT AS a, NULL::VARCHAR AS b) TO STDOUT (FORMAT binary)"));
  auto msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "HddcCZ");
  EXPECT_EQ(msgs[0].second, std::string("\1\0\2\0\1\0\1", 7));
  EXPECT_EQ(CopyData(msgs), std::string("PGCOPY\n\377\r\n\0", 11) + Int32(0) + Int32(0) +  // header
                                Int16(2) + Int32(4) + Int32(7) + Int32(-1) +  // the row
                                Int16(-1));                                   // trailer
  c.Send(Query("COPY (SELECT 1 WHERE false) TO STDOUT BINARY"));
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "HdcCZ");
  EXPECT_EQ(CopyData(msgs),
            std::string("PGCOPY\n\377\r\n\0", 11) + Int32(0) + Int32(0) + Int16(-1));
}

TEST_F(QueryServerTest, CopyErrorsAndRefusals) {
  StartServer();
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  auto state = [&](const std::string& sql) {
    c.Send(Query(sql));
    auto msgs = c.UntilReady();
    EXPECT_EQ(msgs.back().first, 'Z') << sql;
    EXPECT_EQ(msgs.back().second, "I") << sql;
    return SqlState(msgs);
  };
  EXPECT_EQ(state("CREATE TABLE t (a INT)"), "");
  EXPECT_EQ(state("COPY t FROM STDIN"), "0A000");
  EXPECT_EQ(state("COPY t FROM STDIN (FORMAT csv)"), "0A000");
  EXPECT_EQ(state("COPY t TO PROGRAM 'touch /tmp/x'"), "42501");
  EXPECT_EQ(state("COPY (SELECT 1) TO '" + (dir_ / "outside.csv").string() + "'"), "42501");
  EXPECT_EQ(state("COPY t TO STDOUT (FORMAT xml)"), "22023");
  EXPECT_EQ(state("COPY t TO STDOUT (BOGUS)"), "42601");
  EXPECT_EQ(state("COPY (SELEC 1) TO STDOUT"), "42601");
  EXPECT_EQ(state("COPY (SELECT 1; SELECT 2) TO STDOUT"), "42601");
  EXPECT_EQ(state("COPY (SELECT 1 TO STDOUT"), "42601");
  EXPECT_EQ(state("COPY missing TO STDOUT"), "42P01");
  EXPECT_EQ(state("COPY t (nope) TO STDOUT"), "42703");
  EXPECT_EQ(state("COPY t TO STDOUT (FORMAT csv, FORCE_QUOTE (nope))"), "42P10");
  EXPECT_EQ(state("COPY (CREATE TABLE u (a INT)) TO STDOUT"), "0A000");
  EXPECT_EQ(state("COPY (ATTACH ':memory:' AS m) TO STDOUT"), "42501");
  EXPECT_EQ(state("COPY (SELECT 1::BIT) TO STDOUT"), "0A000");
  EXPECT_EQ(state("COPY (-- nothing\n) TO STDOUT"), "42601");
  // A file outside the allowed directories: DuckDB's 42501, with a hint at STDOUT.
  c.Send(Query("COPY (SELECT 1) TO '" + (dir_ / "outside.csv").string() + "' (FORMAT csv)"));
  auto refused = c.UntilReady();
  ASSERT_EQ(SqlState(refused), "42501");
  EXPECT_NE(refused[0].second.find("HCOPY to or from a file runs on the server"),
            std::string::npos);

  // An error while the rows stream: ErrorResponse after the CopyData, no CopyDone.
  c.Send(Query(
      "COPY (SELECT CASE WHEN range < 199000 THEN range ELSE error('boom') END FROM range(200000)) "
      "TO STDOUT"));
  auto msgs = c.UntilReady();
  std::string types = Types(msgs);
  ASSERT_GE(types.size(), 3u);
  EXPECT_EQ(types.front(), 'H');
  EXPECT_EQ(types.substr(types.size() - 2), "EZ");
  EXPECT_EQ(types.find('c'), std::string::npos);
  EXPECT_EQ(SqlState(msgs), "22023");  // error(): invalid input
  ExpectServing();
}

TEST_F(QueryServerTest, CopyRunsThroughThePlannerAndTheExtendedProtocol) {
  FakeStepsPlanner planner;
  QueryServerOptions o;
  o.hooks.plan_statement = planner.Hook();
  StartServer(std::move(o));
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  c.Send(Query("CREATE TABLE big AS SELECT range AS k, range * 2 AS v FROM range(10)"));
  ASSERT_EQ(Types(c.UntilReady()), "CZ");
  // Simple protocol: the inner query is planned with steps, like a SELECT.
  c.Send(Query("COPY (SELECT k, v FROM big WHERE k < 3) TO STDOUT (FORMAT csv)"));
  auto msgs = c.UntilReady();
  EXPECT_EQ(CopyData(msgs), "0,0\n1,2\n2,4\n");
  ASSERT_EQ(planner.Seen().size(), 1u);
  EXPECT_EQ(planner.Seen()[0], "SELECT k, v FROM big WHERE k < 3");
  // Extended: Describe answers NoData, Execute streams all rows whatever its limit.
  c.Send(Parse("", "COPY (SELECT k FROM big WHERE k >= 8) TO STDOUT"));
  c.Send(Bind("", "", {}));
  c.Send(Describe('P', ""));
  c.Send(Execute("", 1));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "12nHddcCZ");
  EXPECT_EQ(CopyData(msgs), "8\n9\n");
  EXPECT_EQ(Tag(msgs), "COPY 2");
  EXPECT_EQ(planner.Seen().size(), 2u);  // planned again with steps when the portal started
  c.Send(Query("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'parts'"));
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "TDCZ");
  EXPECT_EQ(Fields(msgs[1])[0], "0");  // the plans' cleanup ran
  // Bind's result formats do not apply to a COPY (two codes for three columns here).
  c.Send(Parse("", "COPY (SELECT k, v, k AS again FROM big WHERE k = 1) TO STDOUT"));
  c.Send(Frame('B', Z("") + Z("") + Int16(0) + Int16(0) + Int16(2) + Int16(1) + Int16(1)));
  c.Send(Execute("", 0));
  c.Send(Sync());
  msgs = c.UntilReady();
  ASSERT_EQ(Types(msgs), "12HdcCZ");
  EXPECT_EQ(CopyData(msgs), "1\t2\t1\n");
  c.Send(Parse("", "COPY (SELECT $1::INT) TO STDOUT"));
  c.Send(Sync());
  EXPECT_EQ(SqlState(c.UntilReady()), "42P02");
  c.Send(Parse("", "COPY big FROM STDIN"));
  c.Send(Sync());
  EXPECT_EQ(SqlState(c.UntilReady()), "0A000");
}

}  // namespace
}  // namespace sluice::query

namespace sluice::query {
namespace {

TEST_F(QueryServerTest, CopyIsUnderTheStatementTimeout) {
  StartServer({.timeout_ms = 300});
  RawClient c(server_->port());
  ASSERT_TRUE(c.Startup());
  // Rows stream for a while (each filtered pair costs time), then the watchdog interrupts.
  c.Send(Query(
      "COPY (SELECT a.range FROM range(100000000) a, range(200) b WHERE b.range = 0) TO STDOUT"));
  std::string message;
  auto msgs = c.UntilReady();
  EXPECT_EQ(SqlState(msgs, &message), "57014");
  EXPECT_EQ(message, "canceling statement due to statement timeout (query.timeout_seconds is 0)");
  EXPECT_EQ(msgs.front().first, 'H');
  EXPECT_EQ(Types(msgs).find('c'), std::string::npos);
  c.Send(Query("SELECT 1"));
  EXPECT_EQ(Types(c.UntilReady()), "TDCZ");
}

}  // namespace
}  // namespace sluice::query
