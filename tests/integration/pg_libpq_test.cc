// The query server of a real `sluice serve` through libpq (the C client psql and most
// drivers are built on): simple queries, PQexecParams with text and binary parameters
// and binary results checked value by value, prepared statements and their
// descriptions, topic() bounds from WHERE in a prepared statement, PQcancel of a long query, the
// sandbox's refusals with SQLSTATE 42501, COPY ... TO STDOUT with PQgetCopyData, and SCRAM-SHA-256
// with right and wrong passwords.
//
// usage: pg_libpq_test path/to/sluice
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "kafka/client/admin.h"
#include "kafka/client/producer.h"
#include "sluice_process.h"

namespace {

std::string g_sluice;

using sluice::integration::SluiceProcess;

struct ConnDeleter {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Conn = std::unique_ptr<PGconn, ConnDeleter>;
using Res = std::unique_ptr<PGresult, ResultDeleter>;

std::string SqlState(const PGresult* r) {
  const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  return s != nullptr ? s : "";
}

// Starts serve and returns HOST:PORT of its Postgres port, or "".
std::string StartServe(SluiceProcess& p) {
  std::string err = p.Start();
  if (!err.empty()) {
    ADD_FAILURE() << err;
    return "";
  }
  std::string addr = p.WaitForOutput(R"(sluice: Postgres wire protocol on (127\.0\.0\.1:[0-9]+))");
  if (addr.empty()) {
    p.DumpLogs();
    ADD_FAILURE() << "no Postgres wire protocol line";
  }
  return addr;
}

Conn Connect(const std::string& addr, const std::string& user = "tester",
             const std::string& password = "") {
  size_t colon = addr.rfind(':');
  std::string conninfo = "host=" + addr.substr(0, colon) + " port=" + addr.substr(colon + 1) +
                         " user=" + user + " dbname=sluice connect_timeout=10 sslmode=disable";
  if (!password.empty()) conninfo += " password=" + password;
  return Conn(PQconnectdb(conninfo.c_str()));
}

class LibpqTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    serve_ = new SluiceProcess(g_sluice, "query:\n  timeout_seconds: 120\n");
    addr_ = StartServe(*serve_);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(serve_->Stop(), 0);
    delete serve_;
  }
  void SetUp() override {
    ASSERT_FALSE(addr_.empty());
    conn_ = Connect(addr_);
    ASSERT_EQ(PQstatus(conn_.get()), CONNECTION_OK) << PQerrorMessage(conn_.get());
  }
  Res Exec(const std::string& sql) { return Res(PQexec(conn_.get(), sql.c_str())); }

  static SluiceProcess* serve_;
  static std::string addr_;
  Conn conn_;
};
SluiceProcess* LibpqTest::serve_ = nullptr;
std::string LibpqTest::addr_;

TEST_F(LibpqTest, ServerReportsPostgres15AndUtf8) {
  EXPECT_EQ(PQserverVersion(conn_.get()) / 10000, 15);
  EXPECT_STREQ(PQparameterStatus(conn_.get(), "server_encoding"), "UTF8");
  EXPECT_STREQ(PQparameterStatus(conn_.get(), "integer_datetimes"), "on");
  EXPECT_STREQ(PQparameterStatus(conn_.get(), "DateStyle"), "ISO, MDY");
  EXPECT_NE(PQbackendPID(conn_.get()), 0);
}

TEST_F(LibpqTest, SimpleQueriesAndErrors) {
  Res r = Exec(
      "CREATE TABLE items (id INT, name VARCHAR, price DECIMAL(10,2)); "
      "INSERT INTO items VALUES (1, 'apple', 1.50), (2, 'pear', NULL); "
      "SELECT id, name, price FROM items ORDER BY id");
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.get());
  ASSERT_EQ(PQntuples(r.get()), 2);
  EXPECT_STREQ(PQfname(r.get(), 1), "name");
  EXPECT_EQ(PQftype(r.get(), 0), 23u);
  EXPECT_EQ(PQftype(r.get(), 2), 1700u);
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 2), "1.50");
  EXPECT_TRUE(PQgetisnull(r.get(), 1, 2));
  EXPECT_STREQ(PQcmdTuples(r.get()), "2");

  r = Exec("INSERT INTO items VALUES (3, 'fig', 2)");
  EXPECT_STREQ(PQcmdStatus(r.get()), "INSERT 0 1");
  r = Exec("SELECT * FROM no_such_table");
  EXPECT_EQ(PQresultStatus(r.get()), PGRES_FATAL_ERROR);
  EXPECT_EQ(SqlState(r.get()), "42P01");
  r = Exec("SELECT 1 +");
  EXPECT_EQ(SqlState(r.get()), "42601");
  r = Exec("");
  EXPECT_EQ(PQresultStatus(r.get()), PGRES_EMPTY_QUERY);
  r = Exec("DROP TABLE items");
  EXPECT_STREQ(PQcmdStatus(r.get()), "DROP TABLE");
}

uint32_t BE32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return ntohl(v);
}
uint64_t BE64(const char* p) { return (uint64_t{BE32(p)} << 32) | BE32(p + 4); }

TEST_F(LibpqTest, BinaryResultsValueByValue) {
  const char* params[] = {"42", "hello"};
  Res r(PQexecParams(
      conn_.get(),
      "SELECT $1::INT AS i4, 7::SMALLINT AS i2, -5000000000::BIGINT AS i8, 1.5::FLOAT AS f4, "
      "-0.25::DOUBLE AS f8, true AS b, $2::VARCHAR AS t, '\\x00\\xFF'::BLOB AS by, DATE "
      "'2000-01-03' AS d, "
      "TIMESTAMP '2000-01-01 00:00:02' AS ts, TIMESTAMPTZ '1999-12-31 23:59:59+00' AS tstz, "
      "INTERVAL '1 month 2 days 3 seconds' AS iv, '00112233-4455-6677-8899-aabbccddeeff'::UUID AS "
      "u, "
      "12345.678::DECIMAL(10,3) AS n, [1, NULL, 3]::INTEGER[] AS arr, NULL::INT AS nul, "
      "TIME '01:00:00' AS tm",
      2, nullptr, params, nullptr, nullptr, 1));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.get());
  ASSERT_EQ(PQnfields(r.get()), 17);
  for (int c = 0; c < PQnfields(r.get()); ++c) EXPECT_EQ(PQfformat(r.get(), c), 1) << c;
  auto v = [&](int c) { return PQgetvalue(r.get(), 0, c); };
  auto len = [&](int c) { return PQgetlength(r.get(), 0, c); };
  EXPECT_EQ(PQftype(r.get(), 0), 23u);
  EXPECT_EQ(static_cast<int32_t>(BE32(v(0))), 42);
  EXPECT_EQ(PQftype(r.get(), 1), 21u);
  EXPECT_EQ(len(1), 2);
  EXPECT_EQ(
      static_cast<int16_t>((static_cast<uint8_t>(v(1)[0]) << 8) | static_cast<uint8_t>(v(1)[1])),
      7);
  EXPECT_EQ(PQftype(r.get(), 2), 20u);
  EXPECT_EQ(static_cast<int64_t>(BE64(v(2))), -5000000000LL);
  uint32_t f4 = BE32(v(3));
  float f;
  std::memcpy(&f, &f4, 4);
  EXPECT_EQ(f, 1.5f);
  uint64_t f8 = BE64(v(4));
  double d;
  std::memcpy(&d, &f8, 8);
  EXPECT_EQ(d, -0.25);
  EXPECT_EQ(PQftype(r.get(), 5), 16u);
  EXPECT_EQ(v(5)[0], 1);
  EXPECT_EQ(std::string(v(6), len(6)), "hello");
  EXPECT_EQ(PQftype(r.get(), 7), 17u);
  EXPECT_EQ(std::string(v(7), len(7)), std::string("\0\xff", 2));
  EXPECT_EQ(PQftype(r.get(), 8), 1082u);
  EXPECT_EQ(static_cast<int32_t>(BE32(v(8))), 2);
  EXPECT_EQ(PQftype(r.get(), 9), 1114u);
  EXPECT_EQ(static_cast<int64_t>(BE64(v(9))), 2'000'000);
  EXPECT_EQ(PQftype(r.get(), 10), 1184u);
  EXPECT_EQ(static_cast<int64_t>(BE64(v(10))), -1'000'000);
  EXPECT_EQ(PQftype(r.get(), 11), 1186u);
  EXPECT_EQ(static_cast<int64_t>(BE64(v(11))), 3'000'000);
  EXPECT_EQ(static_cast<int32_t>(BE32(v(11) + 8)), 2);
  EXPECT_EQ(static_cast<int32_t>(BE32(v(11) + 12)), 1);
  EXPECT_EQ(PQftype(r.get(), 12), 2950u);
  EXPECT_EQ(std::string(v(12), 16),
            std::string("\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff", 16));
  EXPECT_EQ(PQftype(r.get(), 13), 1700u);
  // 12345.678: base-10000 digits 1, 2345, 6780; weight 1; dscale 3.
  EXPECT_EQ(std::string(v(13), len(13)), std::string("\0\3\0\1\0\0\0\3\0\1\x09\x29\x1a\x7c", 14));
  EXPECT_EQ(PQftype(r.get(), 14), 1007u);
  std::string arr(v(14), len(14));
  EXPECT_EQ(BE32(arr.data()), 1u);                                 // dimensions
  EXPECT_EQ(BE32(arr.data() + 4), 1u);                             // has NULLs
  EXPECT_EQ(BE32(arr.data() + 8), 23u);                            // int4
  EXPECT_EQ(BE32(arr.data() + 12), 3u);                            // length
  EXPECT_EQ(static_cast<int32_t>(BE32(arr.data() + 20 + 8)), -1);  // the NULL
  EXPECT_TRUE(PQgetisnull(r.get(), 0, 15));
  EXPECT_EQ(static_cast<int64_t>(BE64(v(16))), 3600'000'000LL);
}

TEST_F(LibpqTest, BinaryParameters) {
  uint32_t i4 = htonl(static_cast<uint32_t>(-123));
  uint64_t i8 =
      (uint64_t{htonl(0x05060708)} << 32) | htonl(0x01020304);  // 0x0102030405060708, big-endian
  double dv = 2.75;
  uint64_t dbits;
  std::memcpy(&dbits, &dv, 8);
  uint64_t f8 = (uint64_t{htonl(static_cast<uint32_t>(dbits))} << 32) |
                htonl(static_cast<uint32_t>(dbits >> 32));
  char b = 1;
  int64_t micros = 86'400'000'000LL;  // 2000-01-02 00:00:00
  uint64_t ts = (uint64_t{htonl(static_cast<uint32_t>(micros))} << 32) |
                htonl(static_cast<uint32_t>(micros >> 32));
  Oid types[] = {23, 20, 701, 16, 1114, 17, 25};
  const char* values[] = {reinterpret_cast<const char*>(&i4),
                          reinterpret_cast<const char*>(&i8),
                          reinterpret_cast<const char*>(&f8),
                          &b,
                          reinterpret_cast<const char*>(&ts),
                          "\0\1\2",
                          "text value"};
  int lengths[] = {4, 8, 8, 1, 8, 3, 10};
  int formats[] = {1, 1, 1, 1, 1, 1, 1};
  Res r(PQexecParams(
      conn_.get(),
      "SELECT $1 + 0, $2, $3 * 2, NOT $4, $5 + INTERVAL 1 DAY, octet_length($6), upper($7)", 7,
      types, values, lengths, formats, 0));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.get());
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 0), "-123");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 1), "72623859790382856");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 2), "5.5");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 3), "f");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 4), "2000-01-03 00:00:00");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 5), "3");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 6), "TEXT VALUE");

  // A wrong binary length is an error of that statement only.
  int bad_lengths[] = {3, 8, 8, 1, 8, 3, 10};
  r.reset(PQexecParams(conn_.get(), "SELECT $1 + 0, $2, $3, $4, $5, $6, $7", 7, types, values,
                       bad_lengths, formats, 0));
  EXPECT_EQ(PQresultStatus(r.get()), PGRES_FATAL_ERROR);
  EXPECT_EQ(SqlState(r.get()), "22P03");
  r = Exec("SELECT 1");
  EXPECT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK);
}

TEST_F(LibpqTest, PreparedStatementsAndDescriptions) {
  Res r(PQprepare(conn_.get(), "by_range",
                  "SELECT range AS n, range * 2 AS twice FROM range(100) WHERE range < $1::BIGINT "
                  "AND range >= $2",
                  2, nullptr));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(r.get());
  r.reset(PQdescribePrepared(conn_.get(), "by_range"));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_COMMAND_OK);
  EXPECT_EQ(PQnparams(r.get()), 2);
  EXPECT_EQ(PQparamtype(r.get(), 0), 20u);
  EXPECT_EQ(PQnfields(r.get()), 2);
  EXPECT_STREQ(PQfname(r.get(), 1), "twice");
  EXPECT_EQ(PQftype(r.get(), 0), 20u);
  for (int run = 0; run < 3; ++run) {
    std::string n = std::to_string(10 + run);
    const char* params[] = {n.c_str(), "5"};
    r.reset(PQexecPrepared(conn_.get(), "by_range", 2, params, nullptr, nullptr, 0));
    ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.get());
    EXPECT_EQ(PQntuples(r.get()), 5 + run);
    EXPECT_STREQ(PQgetvalue(r.get(), 0, 1), "10");
  }
  // A statement DuckDB can bind only with its values (a table function's argument): its
  // portal is described from the real result.
  const char* seven[] = {"7"};
  r.reset(PQexecParams(conn_.get(), "SELECT count(*) AS c, max(range) AS m FROM range($1::BIGINT)",
                       1, nullptr, seven, nullptr, nullptr, 0));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.get());
  EXPECT_EQ(PQnfields(r.get()), 2);
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 0), "7");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 1), "6");
  r.reset(PQprepare(conn_.get(), "by_range", "SELECT 1", 0, nullptr));
  EXPECT_EQ(SqlState(r.get()), "42P05");
  const char* one[] = {"1"};
  r.reset(PQexecPrepared(conn_.get(), "by_range", 1, one, nullptr, nullptr, 0));
  EXPECT_EQ(SqlState(r.get()), "08P01");
  r = Exec("DEALLOCATE by_range");  // DuckDB's own prepared statements are separate; this may fail
  r.reset(PQexecPrepared(conn_.get(), "no_such", 0, nullptr, nullptr, nullptr, 0));
  EXPECT_EQ(SqlState(r.get()), "26000");
}

// Parse plans the statement: topic() gets the WHERE's constant bounds (the scan's estimate
// in EXPLAIN shows them), a bound on a parameter stays a filter, and the answer is right.
TEST_F(LibpqTest, PreparedTopicQueriesGetWhereBounds) {
  using namespace std::chrono_literals;
  namespace kc = sluice::kafka::client;
  auto admin = kc::Admin::Create({{"bootstrap.servers", serve_->bootstrap()}});
  ASSERT_TRUE(admin.ok());
  ASSERT_TRUE((*admin)->CreateTopic("pq_events", 2, 1, {}, 10s).ok());
  auto producer =
      kc::Producer::Create({{"bootstrap.servers", serve_->bootstrap()}, {"linger.ms", "5"}});
  ASSERT_TRUE(producer.ok());
  for (int p = 0; p < 2; ++p) {
    for (int n = 0; n < 20; ++n) {
      ASSERT_TRUE(
          (*producer)->Produce("pq_events", p, "k", "{\"n\": " + std::to_string(n) + "}").ok());
    }
  }
  ASSERT_TRUE((*producer)->Flush(30s).ok());

  Res r(PQprepare(conn_.get(), "topic_n",
                  "SELECT count(*), min(\"offset\") FROM topic('pq_events', columns => 'n BIGINT') "
                  "WHERE partition = 0 AND \"offset\" >= 5 AND n < $1::BIGINT",
                  1, nullptr));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(r.get());
  const char* twelve[] = {"12"};
  r.reset(PQexecPrepared(conn_.get(), "topic_n", 1, twelve, nullptr, nullptr, 0));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.get());
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 0), "7");
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 1), "5");

  r.reset(PQprepare(conn_.get(), "topic_plan",
                    "EXPLAIN SELECT count(*) FROM topic('pq_events') "
                    "WHERE partition = 0 AND \"offset\" >= 15 AND \"offset\" < $1::BIGINT",
                    1, nullptr));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(r.get());
  const char* hundred[] = {"100"};
  r.reset(PQexecPrepared(conn_.get(), "topic_plan", 1, hundred, nullptr, nullptr, 0));
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(r.get());
  ASSERT_GE(PQnfields(r.get()), 2);
  std::string plan = PQgetvalue(r.get(), 0, 1);
  size_t at = plan.rfind('~');  // the last operator printed is the scan: 5 of the 40 messages
  ASSERT_NE(at, std::string::npos) << plan;
  EXPECT_EQ(plan.substr(at, plan.find(' ', at) - at), "~5") << plan;
}

TEST_F(LibpqTest, CancelInterruptsALongQuery) {
  ASSERT_EQ(PQsendQuery(conn_.get(), "SELECT count(*) FROM range(1000000000) a, range(100000) b"),
            1);
  std::unique_ptr<PGcancel, decltype(&PQfreeCancel)> cancel(PQgetCancel(conn_.get()),
                                                            &PQfreeCancel);
  std::atomic<bool> done{false};
  std::thread canceller([&] {
    // Again until it lands: a cancel before the query started is ignored, as in Postgres.
    while (!done.load()) {
      char err[256];
      PQcancel(cancel.get(), err, sizeof(err));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  Res r(PQgetResult(conn_.get()));
  done = true;
  canceller.join();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(PQresultStatus(r.get()), PGRES_FATAL_ERROR);
  EXPECT_EQ(SqlState(r.get()), "57014") << PQresultErrorMessage(r.get());
  while (PGresult* rest = PQgetResult(conn_.get())) PQclear(rest);
  r = Exec("SELECT 'still here'");
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK);
  EXPECT_STREQ(PQgetvalue(r.get(), 0, 0), "still here");
}

TEST_F(LibpqTest, SandboxRefusals) {
  for (const char* sql :
       {"SET memory_limit = '100GB'", "COPY (SELECT 1) TO '/tmp/sluice-escaped.csv'",
        "ATTACH ':memory:' AS other", "INSTALL httpfs"}) {
    Res r = Exec(sql);
    EXPECT_EQ(PQresultStatus(r.get()), PGRES_FATAL_ERROR) << sql;
    EXPECT_EQ(SqlState(r.get()), "42501") << sql << ": " << PQresultErrorMessage(r.get());
  }
}

// COPY ... TO STDOUT through libpq's copy API: PQgetCopyData row by row, in the simple
// protocol (PQexec) and the extended one (PQexecParams), and an error after rows.
TEST_F(LibpqTest, CopyOutWithPQgetCopyData) {
  auto copy_out = [&](Res r, std::string* data) {
    EXPECT_EQ(PQresultStatus(r.get()), PGRES_COPY_OUT) << PQresultErrorMessage(r.get());
    char* buf = nullptr;
    int n = 0;
    while ((n = PQgetCopyData(conn_.get(), &buf, 0)) > 0) {
      data->append(buf, static_cast<size_t>(n));
      PQfreemem(buf);
    }
    EXPECT_EQ(n, -1) << PQerrorMessage(conn_.get());
    return Res(PQgetResult(conn_.get()));
  };
  std::string data;
  Res r = Exec(
      "COPY (SELECT range AS n, CASE WHEN range = 1 THEN NULL ELSE 'v,' || range END AS s "
      "FROM range(3)) TO STDOUT (FORMAT csv, HEADER)");
  EXPECT_EQ(PQnfields(r.get()), 2);
  EXPECT_EQ(PQbinaryTuples(r.get()), 0);
  Res done = copy_out(std::move(r), &data);
  ASSERT_EQ(PQresultStatus(done.get()), PGRES_COMMAND_OK);
  EXPECT_STREQ(PQcmdTuples(done.get()), "3");
  EXPECT_EQ(data, "n,s\n0,\"v,0\"\n1,\n2,\"v,2\"\n");
  while (PGresult* rest = PQgetResult(conn_.get())) PQclear(rest);

  data.clear();
  r.reset(PQexecParams(conn_.get(), "COPY (SELECT 'x' AS a UNION ALL SELECT 'y\ty') TO STDOUT", 0,
                       nullptr, nullptr, nullptr, nullptr, 0));
  done = copy_out(std::move(r), &data);
  ASSERT_EQ(PQresultStatus(done.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(done.get());
  EXPECT_EQ(data, "x\ny\\ty\n");
  while (PGresult* rest = PQgetResult(conn_.get())) PQclear(rest);

  data.clear();
  r = Exec(
      "COPY (SELECT CASE WHEN range < 199000 THEN range ELSE error('boom') END FROM range(200000)) "
      "TO STDOUT");
  done = copy_out(std::move(r), &data);
  EXPECT_EQ(PQresultStatus(done.get()), PGRES_FATAL_ERROR);
  EXPECT_EQ(SqlState(done.get()), "22023") << PQresultErrorMessage(done.get());
  EXPECT_FALSE(data.empty());  // rows came before the error
  while (PGresult* rest = PQgetResult(conn_.get())) PQclear(rest);
  r = Exec("COPY t FROM STDIN");
  EXPECT_EQ(SqlState(r.get()), "0A000");
  r = Exec("SELECT 'still here'");
  ASSERT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK);
}

TEST(LibpqAuthTest, ScramRightAndWrongPassword) {
  SluiceProcess serve(g_sluice, "query:\n  users: [\"alice:alice-secret\"]\n");
  std::string addr = StartServe(serve);
  ASSERT_FALSE(addr.empty());
  Conn ok = Connect(addr, "alice", "alice-secret");
  ASSERT_EQ(PQstatus(ok.get()), CONNECTION_OK) << PQerrorMessage(ok.get());
  Res r(PQexec(ok.get(), "SELECT 1"));
  EXPECT_EQ(PQresultStatus(r.get()), PGRES_TUPLES_OK);
  Conn wrong = Connect(addr, "alice", "nope");
  EXPECT_EQ(PQstatus(wrong.get()), CONNECTION_BAD);
  EXPECT_NE(std::string(PQerrorMessage(wrong.get())).find("password authentication failed"),
            std::string::npos)
      << PQerrorMessage(wrong.get());
  Conn nobody = Connect(addr, "mallory", "alice-secret");
  EXPECT_EQ(PQstatus(nobody.get()), CONNECTION_BAD);
  EXPECT_EQ(serve.Stop(), 0);
}

// SQL grants through libpq (docs/design/0020-data-authorization.md): a user without grants
// gets 42501 naming the object, with PQexecParams too, and the same query passes once a
// superuser grants the directory; a CTE and a view over it count.
TEST(LibpqGrantsTest, DeniedUntilGranted) {
  const std::string dir =
      ::testing::TempDir() + "sluice_libpq_grants_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  SluiceProcess serve(g_sluice,
                      "query:\n  users: [\"admin:admin-pw\", \"carol:carol-pw\"]\n"
                      "  allowed_directories: [\"" +
                          dir +
                          "\"]\n"
                          "authorization:\n  enabled: true\n  super_users: [\"User:admin\"]\n");
  std::string addr = StartServe(serve);
  ASSERT_FALSE(addr.empty());
  Conn admin = Connect(addr, "admin", "admin-pw");
  ASSERT_EQ(PQstatus(admin.get()), CONNECTION_OK) << PQerrorMessage(admin.get());
  Conn carol = Connect(addr, "carol", "carol-pw");
  ASSERT_EQ(PQstatus(carol.get()), CONNECTION_OK) << PQerrorMessage(carol.get());
  auto exec = [](PGconn* c, const std::string& sql) { return Res(PQexec(c, sql.c_str())); };
  Res made = exec(admin.get(), "COPY (SELECT 7 AS x) TO '" + dir + "/x.parquet'");
  ASSERT_EQ(PQresultStatus(made.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(made.get());
  made = exec(admin.get(),
              "CREATE VIEW sevens AS SELECT * FROM read_parquet('" + dir + "/x.parquet')");
  ASSERT_EQ(PQresultStatus(made.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(made.get());

  const std::string read = "SELECT x FROM read_parquet('" + dir + "/x.parquet')";
  for (const std::string& sql :
       {read, "WITH s AS (" + read + ") SELECT * FROM s", std::string("SELECT * FROM sevens")}) {
    Res denied = exec(carol.get(), sql);
    EXPECT_EQ(PQresultStatus(denied.get()), PGRES_FATAL_ERROR) << sql;
    EXPECT_EQ(SqlState(denied.get()), "42501") << sql;
    EXPECT_NE(std::string(PQresultErrorMessage(denied.get())).find(dir), std::string::npos)
        << PQresultErrorMessage(denied.get());
  }
  const char* value = "7";
  Res params(PQexecParams(carol.get(), (read + " WHERE x = $1::INT").c_str(), 1, nullptr, &value,
                          nullptr, nullptr, 0));
  EXPECT_EQ(SqlState(params.get()), "42501");

  Res grant = exec(admin.get(), "GRANT READ ON DIRECTORY '" + dir + "' TO carol");
  ASSERT_EQ(PQresultStatus(grant.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(grant.get());
  EXPECT_STREQ(PQcmdStatus(grant.get()), "GRANT");
  for (const std::string& sql :
       {read, "WITH s AS (" + read + ") SELECT * FROM s", std::string("SELECT * FROM sevens")}) {
    Res ok = exec(carol.get(), sql);
    ASSERT_EQ(PQresultStatus(ok.get()), PGRES_TUPLES_OK)
        << sql << ": " << PQresultErrorMessage(ok.get());
    EXPECT_STREQ(PQgetvalue(ok.get(), 0, 0), "7");
  }
  params.reset(PQexecParams(carol.get(), (read + " WHERE x = $1::INT").c_str(), 1, nullptr, &value,
                            nullptr, nullptr, 0));
  EXPECT_EQ(PQresultStatus(params.get()), PGRES_TUPLES_OK) << PQresultErrorMessage(params.get());
  EXPECT_EQ(serve.Stop(), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s path/to/sluice\n", argv[0]);
    return 2;
  }
  g_sluice = argv[1];
  return RUN_ALL_TESTS();
}
