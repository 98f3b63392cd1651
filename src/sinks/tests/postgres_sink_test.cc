// PostgresSink against a real PostgreSQL server the test starts itself (postgres_server.h):
// tables created from DuckDB types, append and upsert, the schema fixed at the first batch
// and later batches cast to it (rejected rows with reasons), transactions (nothing visible
// before Flush), and the server stopped and restarted mid-run.
#include "sinks/postgres_sink.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/logging.h"
#include "duck/database.h"
#include "sinks/testing/postgres_server.h"

namespace sluice::sinks {
namespace {

using ::testing::HasSubstr;
using Mode = PostgresSinkOptions::Mode;
using testing::PostgresServer;

class PostgresSinkTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!PostgresServer::Unavailable().empty()) return;
    server_ = new PostgresServer();
    start_error_ = server_->Start();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  void SetUp() override {
    if (std::string why = PostgresServer::Unavailable(); !why.empty()) GTEST_SKIP() << why;
    ASSERT_EQ(start_error_, "");
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
    ASSERT_TRUE(conn_->Execute("SET TimeZone = 'UTC'").ok());
  }

  std::unique_ptr<PostgresSink> Sink(PostgresServer& server, const std::string& table,
                                     Mode mode = Mode::kAppend, std::vector<std::string> key = {}) {
    auto sink = PostgresSink::Create(
        {.dsn = server.dsn(), .table = table, .mode = mode, .key = std::move(key)});
    EXPECT_TRUE(sink.ok()) << sink.status().ToString();
    return sink.ok() ? std::move(sink).value() : nullptr;
  }

  // Replaces the pipeline's table `batch` with `select`, as the pipeline does per batch.
  void Batch(const std::string& select) {
    Status st = conn_->Execute("CREATE OR REPLACE TABLE batch AS " + select);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  Status Write(PostgresSink& sink, std::vector<RejectedRow>* rejected = nullptr) {
    std::vector<RejectedRow> ignored;
    return sink.Write(*conn_, "batch", {}, rejected != nullptr ? rejected : &ignored);
  }

  static std::string Psql(const std::string& sql) {
    return server_->Psql("SET TimeZone = 'UTC'; " + sql);
  }

  static PostgresServer* server_;
  static std::string start_error_;
  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

PostgresServer* PostgresSinkTest::server_ = nullptr;
std::string PostgresSinkTest::start_error_;

TEST_F(PostgresSinkTest, CreatesTheTableFromDuckDbTypesAndAppends) {
  auto sink = Sink(*server_, "typed");
  ASSERT_NE(sink, nullptr);
  Batch(R"sql(SELECT * FROM (VALUES
      (1::BIGINT, 1.5::DOUBLE, 'tab	and\ back
line', true, TIMESTAMPTZ '2024-02-29 13:14:15.5+02', DATE '2024-02-29',
       {'city': 'Paris', 'amount': 2.5}, [1, 2, NULL], 12.34::DECIMAL(10,2), '\x00\xFF'::BLOB,
       7::INTEGER, 'b6a1c3a2-0000-4000-8000-000000000001'::UUID, INTERVAL 90 MINUTE),
      (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
    ) t(id, amount, note, ok, seen_at, day, props, tags, price, raw, small, uid, dur))sql");
  Status st = Write(*sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sink->Flush().ok());

  EXPECT_EQ(Psql("SELECT string_agg(column_name || ' ' || data_type, ', ' ORDER BY "
                 "ordinal_position) FROM information_schema.columns WHERE table_name = 'typed'"),
            "id bigint, amount double precision, note text, ok boolean, seen_at timestamp with "
            "time "
            "zone, day date, props jsonb, tags jsonb, price numeric, raw bytea, small integer, "
            "uid uuid, dur interval");
  EXPECT_THAT(sink->FixedColumns(), ::testing::Contains("price numeric(10,2)"));
  EXPECT_EQ(Psql("SELECT id, amount, note = E'tab\\tand\\\\ back\\nline', ok, seen_at, day, props, "
                 "tags, price, encode(raw, 'hex'), small, uid, dur FROM typed ORDER BY id"),
            "1|1.5|t|t|2024-02-29 11:14:15.5+00|2024-02-29|{\"city\": \"Paris\", \"amount\": "
            "2.5}|[1, 2, null]|12.34|00ff|7|b6a1c3a2-0000-4000-8000-000000000001|01:30:00\n"
            "2||||||||||||");
}

// Every type COPY's binary format carries, at its edges, read back as PostgreSQL prints it
// (the first test's table has an interval: its batch goes as text).
TEST_F(PostgresSinkTest, BinaryCopyKeepsEveryValue) {
  ASSERT_EQ(Psql("CREATE TABLE bin (b bool, s int2, i int4, l int8, r float4, d float8, "
                 "day date, ts timestamp, tz timestamptz, u uuid, n numeric(38,9), "
                 "m numeric(5,0), t text, v varchar(4), c char(3), raw bytea, j json, "
                 "jb jsonb)"),
            "");
  auto sink = Sink(*server_, "bin");
  ASSERT_NE(sink, nullptr);
  Batch(R"sql(SELECT * FROM (VALUES
      (1, true, -32768, -2147483648, -9223372036854775808, 1.5::FLOAT, -0.25::DOUBLE,
       DATE '1999-12-31', TIMESTAMP '1969-12-31 23:59:59.999999',
       TIMESTAMPTZ '2024-02-29 13:14:15.123456+02', 'b6a1c3a2-0d0e-4f00-8000-0000000000ff'::UUID,
       -12345678901234567890123456789.123456789::DECIMAL(38,9), 99999::DECIMAL(5,0),
       'tab	new
line \ é', 'abcd', 'ab', '\x00\xFF'::BLOB, '{"a": [1, 2]}', '{"k":"v","n":null}'),
      (2, false, 32767, 2147483647, 9223372036854775807, 'NaN'::FLOAT, 'Infinity'::DOUBLE,
       'infinity'::DATE, '-infinity'::TIMESTAMP, 'infinity'::TIMESTAMPTZ,
       '00000000-0000-0000-0000-000000000000'::UUID, 0.000000001::DECIMAL(38,9), 0::DECIMAL(5,0),
       '', '', '', ''::BLOB, 'null', '[]'),
      (3, NULL, NULL, NULL, NULL, NULL, NULL, '-infinity'::DATE, TIMESTAMP '2000-01-01',
       TIMESTAMPTZ '1900-06-01 00:00:00+00', NULL, -0.5::DECIMAL(38,9), -1::DECIMAL(5,0),
       NULL, NULL, NULL, NULL, NULL, NULL)
    ) t(k, b, s, i, l, r, d, day, ts, tz, u, n, m, t, v, c, raw, j, jb))sql");
  Status st = Write(*sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(sink->last_copy_binary());
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(Psql("SELECT b, s, i, l, r, d, day, ts, tz, u, n, m, t = E'tab\\tnew\\nline \\\\ é', "
                 "v, format('[%s]', c), encode(raw, 'hex'), j, jb FROM bin ORDER BY l NULLS LAST"),
            "t|-32768|-2147483648|-9223372036854775808|1.5|-0.25|1999-12-31|1969-12-31 "
            "23:59:59.999999|2024-02-29 11:14:15.123456+00|b6a1c3a2-0d0e-4f00-8000-0000000000ff|"
            "-12345678901234567890123456789.123456789|99999|t|abcd|[ab ]|00ff|{\"a\": [1, 2]}|"
            "{\"k\": \"v\", \"n\": null}\n"
            "f|32767|2147483647|9223372036854775807|NaN|Infinity|infinity|-infinity|infinity|"
            "00000000-0000-0000-0000-000000000000|0.000000001|0|f||[   ]||null|[]\n"
            "||||||-infinity|2000-01-01 00:00:00|1900-06-01 00:00:00+00||-0.500000000|-1|||[]|||");
  // Values the columns cannot hold are refused in DuckDB, before COPY, as in the text format.
  Batch("SELECT * FROM (VALUES (40000, 'abcde', 'x'), (1, 'ok', 'not json')) t(s, v, jb)");
  std::vector<RejectedRow> rejected;
  ASSERT_TRUE(Write(*sink, &rejected).ok());
  EXPECT_TRUE(sink->last_copy_binary());
  ASSERT_TRUE(sink->Flush().ok());
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_EQ(rejected[0].reason, "column \"s\": value 40000 is not a valid smallint");
  EXPECT_EQ(rejected[1].reason, "column \"jb\": value not json is not a valid jsonb");
  EXPECT_EQ(Psql("SELECT count(*) FROM bin"), "3");
  // Dates and timestamps DuckDB holds but PostgreSQL does not (before 4714-11-24 BC, dates
  // after 5874897 AD) are refused row by row too: never a wrapped value, never a COPY the
  // server fails as a whole. The edges themselves go in.
  Batch(R"sql(SELECT * FROM (VALUES
      (10, DATE '5877612-06-21 (BC)', NULL::TIMESTAMP, NULL::TIMESTAMPTZ),
      (11, NULL, make_timestamp(-290000, 1, 1, 0, 0, 0), NULL),
      (12, NULL, NULL, make_timestamp(-5000, 1, 1, 0, 0, 0)::TIMESTAMPTZ),
      (13, DATE '5874898-01-01', NULL, NULL),
      (14, DATE '4714-11-24 (BC)', make_timestamp(-4713, 11, 24, 0, 0, 0), NULL),
      (15, DATE '5874897-12-31', NULL, NULL)
    ) t(s, day, ts, tz))sql");
  rejected.clear();
  st = Write(*sink, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sink->Flush().ok());
  ASSERT_EQ(rejected.size(), 4u);
  EXPECT_THAT(rejected[0].reason, HasSubstr("column \"day\": value "));
  EXPECT_THAT(rejected[0].reason, HasSubstr("is not a valid date"));
  EXPECT_THAT(rejected[1].reason, HasSubstr("is not a valid timestamp"));
  EXPECT_THAT(rejected[2].reason, HasSubstr("is not a valid timestamp with time zone"));
  EXPECT_THAT(rejected[3].reason, HasSubstr("is not a valid date"));
  EXPECT_EQ(Psql("SELECT s, day, ts FROM bin WHERE s BETWEEN 10 AND 20 ORDER BY s"),
            "14|4714-11-24 BC|4714-11-24 00:00:00 BC\n15|5874897-12-31|");
}

// A column without a binary form (an array) sends the whole batch as text.
TEST_F(PostgresSinkTest, ATypeWithoutABinaryFormSendsText) {
  ASSERT_EQ(Psql("CREATE TABLE mixed (n int, tags int[], at timestamptz)"), "");
  auto sink = Sink(*server_, "mixed");
  ASSERT_NE(sink, nullptr);
  Batch("SELECT 1 AS n, '{1,2}' AS tags, TIMESTAMPTZ '2024-01-01 00:00:00+00' AS at");
  ASSERT_TRUE(Write(*sink).ok());
  EXPECT_FALSE(sink->last_copy_binary());
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(Psql("SELECT n, tags, at FROM mixed"), "1|{1,2}|2024-01-01 00:00:00+00");
}

// commit_interval_ms: batches stream into one COPY and transaction; Commit returns the
// offsets it made durable, when due or forced.
TEST_F(PostgresSinkTest, ACommitIntervalStreamsBatchesIntoOneTransaction) {
  auto sink = PostgresSink::Create(
      {.dsn = server_->dsn(), .table = "streamed", .commit_interval_ms = 3'600'000});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  PostgresSink& s = **sink;
  EXPECT_TRUE(s.Defers());
  std::vector<RejectedRow> rejected;
  for (int b = 0; b < 3; ++b) {
    // The second batch lacks a column: the open COPY ends and another begins.
    Batch(b == 1 ? fmt::format("SELECT range + {} AS n FROM range(100)", b * 100)
                 : fmt::format("SELECT range + {} AS n, 'x' || range AS note FROM range(100)",
                               b * 100));
    ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 100 * (b + 1)}}, &rejected).ok());
    ASSERT_TRUE(s.Flush().ok());
  }
  // A batch whose rows are all refused still moves the offsets.
  Batch("SELECT 'not a number' AS n");
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 301}, {{"in", 1}, 7}}, &rejected).ok());
  EXPECT_EQ(rejected.size(), 1u);
  s.Skip({{{"in", 1}, 9}});
  EXPECT_EQ(Psql("SELECT count(*) FROM streamed"), "0");
  auto early = s.Commit(false);
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_TRUE(early->empty());  // not due
  auto done = s.Commit(true);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, (SourceOffsets{{{"in", 0}, 301}, {{"in", 1}, 9}}));
  EXPECT_EQ(Psql("SELECT count(*), count(DISTINCT n), max(n), count(note) FROM streamed"),
            "300|300|299|200");
  auto nothing = s.Commit(true);
  ASSERT_TRUE(nothing.ok());
  EXPECT_TRUE(nothing->empty());

  // Discard drops what is staged; the sink goes on.
  Batch("SELECT 1000 AS n");
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 302}}, &rejected).ok());
  ASSERT_TRUE(s.Discard().ok());
  Batch("SELECT 2000 AS n");
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 303}}, &rejected).ok());
  done = s.Commit(true);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, (SourceOffsets{{{"in", 0}, 303}}));
  EXPECT_EQ(Psql("SELECT string_agg(n::text, ',') FROM streamed WHERE n >= 1000"), "2000");
}

// Discard (the member lost its partitions) in the streamed mode: the open COPY and its
// transaction are thrown away, nothing staged is committed later; and a Discard while the
// server is down succeeds (closing the connection throws the transaction away too), after
// which the sink writes again once the server is back.
TEST_F(PostgresSinkTest, ACommitIntervalDiscardThrowsTheOpenTransactionAway) {
  PostgresServer own;  // this test stops it
  ASSERT_EQ(own.Start(), "");
  auto sink = PostgresSink::Create(
      {.dsn = own.dsn(), .table = "discarded", .commit_interval_ms = 3'600'000});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  PostgresSink& s = **sink;
  std::vector<RejectedRow> rejected;
  Batch("SELECT range AS n FROM range(50)");
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 50}}, &rejected).ok());
  ASSERT_TRUE(s.Discard().ok());
  auto done = s.Commit(true);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(done->empty());
  EXPECT_EQ(own.Psql("SELECT count(*) FROM discarded"), "0");

  Batch("SELECT range + 100 AS n FROM range(20)");
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 70}}, &rejected).ok());
  ASSERT_EQ(own.Stop(), "");
  Status st = s.Discard();
  EXPECT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(own.Start(), "");
  Batch("SELECT range + 200 AS n FROM range(5)");
  st = s.Write(*conn_, "batch", {{{"in", 0}, 75}}, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  done = s.Commit(true);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(*done, (SourceOffsets{{{"in", 0}, 75}}));
  EXPECT_EQ(own.Psql("SELECT count(*), min(n) FROM discarded"), "5|200");
}

TEST_F(PostgresSinkTest, ACommitIntervalCommitsWhenDueAndARefusedRowFailsEveryCommit) {
  ASSERT_EQ(Psql("CREATE TABLE checked (n int CHECK (n < 1000))"), "");
  auto sink =
      PostgresSink::Create({.dsn = server_->dsn(), .table = "checked", .commit_interval_ms = 1});
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  PostgresSink& s = **sink;
  std::vector<RejectedRow> rejected;
  Batch("SELECT 1 AS n");
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 1}}, &rejected).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto due = s.Commit(false);
  ASSERT_TRUE(due.ok()) << due.status().ToString();
  EXPECT_EQ(*due, (SourceOffsets{{{"in", 0}, 1}}));
  EXPECT_EQ(Psql("SELECT count(*) FROM checked"), "1");
  // PostgreSQL refuses a row only when the COPY ends: the commit fails, and keeps failing
  // (the batches since the last commit are lost; the pipeline stops and re-reads them).
  Batch("SELECT 2 AS n UNION ALL SELECT 5000");
  ASSERT_TRUE(s.Write(*conn_, "batch", {{{"in", 0}, 3}}, &rejected).ok());
  auto failed = s.Commit(true);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("checked_n_check"));
  EXPECT_FALSE(s.Commit(true).ok());
  Batch("SELECT 3 AS n");
  EXPECT_FALSE(s.Write(*conn_, "batch", {{{"in", 0}, 4}}, &rejected).ok());
  EXPECT_EQ(Psql("SELECT count(*) FROM checked"), "1");
  // Upsert merges each batch alone: no interval.
  auto upsert = PostgresSink::Create({.dsn = server_->dsn(),
                                      .table = "checked",
                                      .mode = Mode::kUpsert,
                                      .key = {"n"},
                                      .commit_interval_ms = 10});
  EXPECT_FALSE(upsert.ok());
}

TEST_F(PostgresSinkTest, NothingIsVisibleBeforeFlushAndEveryWriteIsThereAfter) {
  auto sink = Sink(*server_, "appended");
  ASSERT_NE(sink, nullptr);
  for (int b = 0; b < 3; ++b) {
    Batch(fmt::format("SELECT range + {} AS n FROM range(100)", b * 100));
    ASSERT_TRUE(Write(*sink).ok());
  }
  EXPECT_EQ(Psql("SELECT count(*) FROM appended"), "0");
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(Psql("SELECT count(*), count(DISTINCT n), min(n), max(n) FROM appended"),
            "300|300|0|299");
  ASSERT_TRUE(sink->Flush().ok());  // nothing new: nothing to commit
}

TEST_F(PostgresSinkTest, UpsertKeepsTheLastValueOfAKey) {
  auto sink = Sink(*server_, "latest", Mode::kUpsert, {"user_id"});
  ASSERT_NE(sink, nullptr);
  Batch("SELECT * FROM (VALUES (1, 'a', 10), (2, 'b', 20)) t(user_id, name, score)");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());
  // Key 1 twice in one batch (the later row wins) and key 2 again in the next Write.
  Batch(
      "SELECT * FROM (VALUES (1, 'a2', 11), (3, 'c', 30), (1, 'a3', 12)) t(user_id, name, "
      "score)");
  ASSERT_TRUE(Write(*sink).ok());
  Batch("SELECT * FROM (VALUES (2, 'b2', 21)) t(user_id, name, score)");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(Psql("SELECT user_id, name, score FROM latest ORDER BY user_id"),
            "1|a3|12\n2|b2|21\n3|c|30");
  // The table was created with the key as its primary key.
  EXPECT_EQ(Psql("SELECT count(*) FROM information_schema.table_constraints WHERE table_name = "
                 "'latest' AND constraint_type = 'PRIMARY KEY'"),
            "1");
}

TEST_F(PostgresSinkTest, UpsertRejectsANullKey) {
  auto sink = Sink(*server_, "keyed", Mode::kUpsert, {"k"});
  ASSERT_NE(sink, nullptr);
  Batch("SELECT * FROM (VALUES (1, 'x'), (NULL, 'y')) t(k, v)");
  std::vector<RejectedRow> rejected;
  ASSERT_TRUE(Write(*sink, &rejected).ok());
  ASSERT_TRUE(sink->Flush().ok());
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].reason, "key column \"k\" is NULL");
  EXPECT_EQ(rejected[0].row_json, R"({"k":null,"v":"y"})");
  EXPECT_EQ(Psql("SELECT k, v FROM keyed"), "1|x");
}

TEST_F(PostgresSinkTest, LaterBatchesAreCastToTheFixedSchemaAndUncastableRowsRejected) {
  auto sink = Sink(*server_, "inferred");
  ASSERT_NE(sink, nullptr);
  // The first batch fixes the schema: id bigint, amount double precision, ts timestamptz.
  Batch(
      "SELECT 1::BIGINT AS id, 2.5::DOUBLE AS amount, TIMESTAMPTZ '2024-01-01 00:00:00+00' "
      "AS ts");
  ASSERT_TRUE(Write(*sink).ok());
  // An inferred batch later: conflicting types became VARCHAR.
  Batch(R"sql(SELECT * FROM (VALUES
      ('2', '3.5', '2024-01-02 00:00:00+00'),
      ('three', '4', '2024-01-03 00:00:00+00'),
      ('4', 'lots', NULL),
      ('5', NULL, 'yesterday-ish'),
      (NULL, '6', '2024-01-06 00:00:00+00')
    ) t(id, amount, ts))sql");
  std::vector<RejectedRow> rejected;
  Status st = Write(*sink, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sink->Flush().ok());
  ASSERT_EQ(rejected.size(), 3u);
  EXPECT_EQ(rejected[0].reason, "column \"id\": value three is not a valid bigint");
  EXPECT_EQ(rejected[0].row_json, R"({"id":"three","amount":"4","ts":"2024-01-03 00:00:00+00"})");
  EXPECT_EQ(rejected[1].reason, "column \"amount\": value lots is not a valid double precision");
  EXPECT_EQ(rejected[2].reason,
            "column \"ts\": value yesterday-ish is not a valid timestamp with time zone");
  EXPECT_EQ(Psql("SELECT id, amount, ts FROM inferred ORDER BY id NULLS LAST"),
            "1|2.5|2024-01-01 00:00:00+00\n2|3.5|2024-01-02 00:00:00+00\n|6|2024-01-06 "
            "00:00:00+00");
}

TEST_F(PostgresSinkTest, AnExistingTableKeepsItsColumnsAndTypes) {
  ASSERT_EQ(Psql("CREATE TABLE existing (id serial PRIMARY KEY, code varchar(3) NOT NULL, "
                 "total numeric, doc jsonb, tags text[], created timestamptz NOT NULL "
                 "DEFAULT now())"),
            "");
  auto sink = Sink(*server_, "public.existing");
  ASSERT_NE(sink, nullptr);
  Batch(R"sql(SELECT * FROM (VALUES
      ('abc', 123456789012345678901234567890.5::DOUBLE, {'a': 1}, 'extra', '{x,y}'),
      ('toolong', 1, NULL, 'extra', NULL),
      ('ok', NULL, NULL, 'extra', NULL)
    ) t(code, total, doc, not_in_table, tags))sql");
  std::vector<RejectedRow> rejected;
  Status st = Write(*sink, &rejected);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sink->Flush().ok());
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].reason,
            "column \"code\": value toolong is longer than character varying(3)");
  EXPECT_EQ(Psql("SELECT id, code, total > 1e29, doc, tags, created IS NOT NULL FROM existing "
                 "ORDER BY id"),
            "1|abc|t|{\"a\": 1}|{x,y}|t\n2|ok||||t");
  // A VARCHAR column into jsonb must already hold JSON.
  Batch("SELECT * FROM (VALUES ('j1', '{\"b\": [1]}'), ('j2', 'not json')) t(code, doc)");
  rejected.clear();
  ASSERT_TRUE(Write(*sink, &rejected).ok());
  ASSERT_TRUE(sink->Flush().ok());
  ASSERT_EQ(rejected.size(), 1u);
  EXPECT_EQ(rejected[0].reason, "column \"doc\": value not json is not a valid jsonb");
  EXPECT_EQ(Psql("SELECT doc FROM existing WHERE code = 'j1'"), "{\"b\": [1]}");
}

TEST_F(PostgresSinkTest, ARefusedWriteLeavesEarlierWritesOfTheTransaction) {
  ASSERT_EQ(Psql("CREATE TABLE arrays (n int, tags int[])"), "");
  auto sink = Sink(*server_, "arrays");
  ASSERT_NE(sink, nullptr);
  Batch("SELECT 1 AS n, '{1,2}' AS tags");
  ASSERT_TRUE(Write(*sink).ok());
  // int[] is a type the sink passes through as text: Postgres itself refuses this one.
  Batch("SELECT 2 AS n, '{1,x}' AS tags");
  Status st = Write(*sink);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("table arrays"));
  EXPECT_THAT(st.message(), HasSubstr("tags"));
  Batch("SELECT 3 AS n, NULL AS tags");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(Psql("SELECT n, tags FROM arrays ORDER BY n"), "1|{1,2}\n3|");
}

TEST_F(PostgresSinkTest, AnUpsertRefusedByPostgresLeavesTheSinkUsable) {
  ASSERT_EQ(Psql("CREATE TABLE upsert_arrays (k int PRIMARY KEY, tags int[])"), "");
  auto sink = Sink(*server_, "upsert_arrays", Mode::kUpsert, {"k"});
  ASSERT_NE(sink, nullptr);
  // The first Write of the connection (its stage table made under the savepoint) fails.
  Batch("SELECT 1 AS k, '{1,x}' AS tags");
  EXPECT_FALSE(Write(*sink).ok());
  Batch("SELECT 1 AS k, '{1,2}' AS tags");
  Status st = Write(*sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  Batch("SELECT 1 AS k, '{3}' AS tags");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(Psql("SELECT k, tags FROM upsert_arrays"), "1|{3}");
}

TEST_F(PostgresSinkTest, MissingKeyColumnsAndForeignBatchesAreErrors) {
  auto sink = Sink(*server_, "kv", Mode::kUpsert, {"k"});
  ASSERT_NE(sink, nullptr);
  Batch("SELECT 1 AS k, 2 AS v");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());
  Batch("SELECT 2 AS v");
  Status st = Write(*sink);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("no key column \"k\""));
  Batch("SELECT 2 AS other");
  st = Write(*sink);
  EXPECT_THAT(st.message(), HasSubstr("none of the batch's columns"));
  ASSERT_TRUE(sink->Flush().ok());
}

TEST_F(PostgresSinkTest, StoppedServerIsAClearErrorAndTheSinkReconnectsAfterARestart) {
  // A server of its own: this test stops it.
  PostgresServer own;
  ASSERT_EQ(own.Start(), "");
  auto sink = Sink(own, "resilient");
  ASSERT_NE(sink, nullptr);
  Batch("SELECT range AS n FROM range(10)");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());

  // Rows written, then the server goes away before the COMMIT.
  Batch("SELECT range + 10 AS n FROM range(10)");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_EQ(own.Stop(), "");
  Status st = sink->Flush();
  EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("table resilient at 127.0.0.1:" + std::to_string(own.port()) +
                                      "/postgres"));
  EXPECT_THAT(st.message(), HasSubstr("10 rows written since the last flush"));

  // While it is down: Write says it cannot connect.
  st = Write(*sink);
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_THAT(st.message(), HasSubstr("table resilient"));
  EXPECT_THAT(st.message(), HasSubstr("cannot connect"));
  EXPECT_TRUE(sink->Flush().ok());  // nothing was written since

  // Back up: the pipeline resends the uncommitted batch and goes on.
  ASSERT_EQ(own.Start(), "");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(own.Psql("SELECT count(*), count(DISTINCT n) FROM resilient"), "20|20");

  // A restart between batches (the idle connection is dead): the next Write reconnects.
  ASSERT_EQ(own.Stop(), "");
  ASSERT_EQ(own.Start(), "");
  Batch("SELECT range + 20 AS n FROM range(5)");
  st = Write(*sink);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(own.Psql("SELECT count(*) FROM resilient"), "25");

  // The server stops between a Write and the next Write of one transaction.
  Batch("SELECT range + 25 AS n FROM range(5)");
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_EQ(own.Stop(), "");
  ASSERT_EQ(own.Start(), "");
  st = Write(*sink);
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_THAT(st.message(), HasSubstr("connection lost"));
  st = sink->Flush();
  EXPECT_THAT(st.message(), HasSubstr("5 rows written since the last flush were not committed"));
  ASSERT_TRUE(Write(*sink).ok());
  ASSERT_TRUE(sink->Flush().ok());
  EXPECT_EQ(own.Psql("SELECT count(*) FROM resilient"), "30");
}

}  // namespace
}  // namespace sluice::sinks
