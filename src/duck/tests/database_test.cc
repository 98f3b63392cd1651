#include "duck/database.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace sluice::duck {
namespace {

std::unique_ptr<Connection> Connect(Database& db) {
  auto conn = Connection::Open(db);
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  return std::move(conn).value();
}

TEST(DatabaseTest, QueriesReturnTypedColumns) {
  auto db = Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto conn = Connect(**db);
  ASSERT_TRUE(
      conn->Execute("CREATE TABLE t (b BOOLEAN, i INTEGER, l BIGINT, d DOUBLE, s VARCHAR)").ok());
  ASSERT_TRUE(conn->Execute("INSERT INTO t VALUES (true, 1, 10000000000, 1.5, 'a much longer "
                            "string than twelve'),"
                            "(NULL, NULL, NULL, NULL, NULL)")
                  .ok());
  auto r = conn->Query("SELECT * FROM t ORDER BY i NULLS LAST");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->column_count(), 5u);
  EXPECT_EQ(r->column_name(4), "s");
  EXPECT_EQ(r->column_type(0), ColumnType::kBoolean);
  EXPECT_EQ(r->column_type(2), ColumnType::kInt64);
  EXPECT_EQ(r->column_type_name(3), "DOUBLE");
  EXPECT_EQ(r->row_count(), 2u);
  ResultChunk c = r->chunk(0);
  EXPECT_TRUE(c.GetBool(0, 0));
  EXPECT_EQ(c.GetInt32(1, 0), 1);
  EXPECT_EQ(c.GetInt64(2, 0), 10000000000);
  EXPECT_EQ(c.GetDouble(3, 0), 1.5);
  EXPECT_EQ(c.GetString(4, 0), "a much longer string than twelve");
  for (size_t col = 0; col < 5; ++col) EXPECT_TRUE(c.IsNull(col, 1));
  EXPECT_FALSE(c.IsNull(4, 0));
}

TEST(DatabaseTest, DatesTimestampsFloatsAndUuidsAsStored) {
  auto db = Database::Open({});
  ASSERT_TRUE(db.ok());
  auto conn = Connect(**db);
  auto r = conn->Query(
      "SELECT DATE '2000-01-01', 'infinity'::DATE, '-infinity'::DATE, "
      "TIMESTAMP '1969-12-31 23:59:59.999999', TIMESTAMPTZ '2000-01-01 00:00:00+00', "
      "'infinity'::TIMESTAMP, '-infinity'::TIMESTAMP, 1.5::FLOAT, "
      "'b6a1c3a2-0d0e-4f00-8000-0000000000ff'::UUID, '00000000-0000-0000-0000-000000000001'::UUID");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->column_type(0), ColumnType::kDate);
  EXPECT_EQ(r->column_type(3), ColumnType::kTimestamp);
  EXPECT_EQ(r->column_type(4), ColumnType::kTimestamp);
  EXPECT_EQ(r->column_type(7), ColumnType::kFloat);
  EXPECT_EQ(r->column_type(8), ColumnType::kUuid);
  ResultChunk c = r->chunk(0);
  EXPECT_EQ(c.GetDate(0, 0), 10957);
  EXPECT_EQ(c.GetDate(1, 0), std::numeric_limits<int32_t>::max());
  EXPECT_EQ(c.GetDate(2, 0), -std::numeric_limits<int32_t>::max());
  EXPECT_EQ(c.GetTimestamp(3, 0), -1);
  EXPECT_EQ(c.GetTimestamp(4, 0), 946684800000000);
  EXPECT_EQ(c.GetTimestamp(5, 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(c.GetTimestamp(6, 0), -std::numeric_limits<int64_t>::max());
  EXPECT_EQ(c.GetFloat(7, 0), 1.5f);
  uint8_t uuid[16];
  c.GetUuid(8, 0, uuid);
  const uint8_t want[16] = {0xb6, 0xa1, 0xc3, 0xa2, 0x0d, 0x0e, 0x4f, 0x00,
                            0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff};
  EXPECT_EQ(std::vector<uint8_t>(uuid, uuid + 16), std::vector<uint8_t>(want, want + 16));
  c.GetUuid(9, 0, uuid);
  EXPECT_EQ(uuid[0], 0);
  EXPECT_EQ(uuid[15], 1);
}

TEST(DatabaseTest, ManyChunks) {
  auto db = Database::Open({});
  ASSERT_TRUE(db.ok());
  auto conn = Connect(**db);
  auto r = conn->Query("SELECT range AS x FROM range(10000)");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->row_count(), 10000u);
  int64_t sum = 0;
  for (size_t i = 0; i < r->chunk_count(); ++i) {
    ResultChunk c = r->chunk(i);
    for (size_t row = 0; row < c.size(); ++row) sum += c.GetInt64(0, row);
  }
  EXPECT_EQ(sum, 10000LL * 9999 / 2);
  QueryResult moved = std::move(r).value();
  EXPECT_EQ(moved.row_count(), 10000u);
}

TEST(DatabaseTest, ErrorsNameWhatWentWrong) {
  auto db = Database::Open({});
  ASSERT_TRUE(db.ok());
  auto conn = Connect(**db);
  auto r = conn->Query("SELEC 1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("syntax error"), std::string::npos) << r.status().message();
  Status st = conn->Execute("SELECT * FROM missing_table");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("missing_table"), std::string::npos);
  EXPECT_FALSE(conn->Execute("SELECT 'x'::INTEGER").ok());
  // The connection still works after errors.
  EXPECT_TRUE(conn->Execute("SELECT 1").ok());
}

TEST(DatabaseTest, MemoryLimitIsEnforced) {
  auto db = Database::Open({.memory_limit_bytes = 32 << 20, .threads = 1});
  ASSERT_TRUE(db.ok());
  auto conn = Connect(**db);
  auto limit = conn->QueryText("SELECT current_setting('memory_limit')");
  ASSERT_TRUE(limit.ok()) << limit.status().ToString();
  EXPECT_NE((*limit)[0][0]->find("MiB"), std::string::npos) << *(*limit)[0][0];
  // A hash aggregate over far more than 32 MiB of distinct strings, with nowhere to spill.
  Status st = conn->Execute(
      "SELECT count(*) FROM (SELECT DISTINCT repeat('x', 100) || range::VARCHAR FROM "
      "range(3000000))");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
}

TEST(DatabaseTest, BadOptionsAreErrors) {
  EXPECT_FALSE(Database::Open({.path = "/nonexistent-dir/x/y.duckdb"}).ok());
}

TEST(DatabaseTest, QueryTextCastsEveryType) {
  auto db = Database::Open({});
  ASSERT_TRUE(db.ok());
  auto conn = Connect(**db);
  auto rows =
      conn->QueryText("SELECT 1 AS a, {'k': [1, 2]} AS s, NULL AS n, DATE '2024-01-02' AS d");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0][0], "1");
  EXPECT_EQ((*rows)[0][1], "{'k': [1, 2]}");
  EXPECT_EQ((*rows)[0][2], std::nullopt);
  EXPECT_EQ((*rows)[0][3], "2024-01-02");
}

TEST(DatabaseTest, PreparedStatementRunsManyTimesAndFollowsAReplacedTable) {
  auto db = Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto conn = Connect(**db);
  auto bad = PreparedStatement::Prepare(*conn, "SELECT nope FROM missing");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("missing"), std::string::npos) << bad.status().ToString();

  ASSERT_TRUE(conn->Execute("CREATE TABLE t AS SELECT range AS i FROM range(10)").ok());
  auto stmt = PreparedStatement::Prepare(*conn, "SELECT count(*), sum(i) FROM t WHERE i >= $1");
  ASSERT_TRUE(stmt.ok()) << stmt.status().ToString();
  for (int64_t from : {0, 5, 9}) {
    ASSERT_TRUE((*stmt)->BindInt64(1, from).ok());
    auto r = (*stmt)->Execute();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->chunk(0).GetInt64(0, 0), 10 - from);
  }
  EXPECT_FALSE((*stmt)->BindInt64(2, 1).ok());  // there is no $2
  // The table it reads is replaced: DuckDB binds the statement again by itself.
  ASSERT_TRUE(
      conn->Execute("CREATE OR REPLACE TABLE t AS SELECT range * 2 AS i FROM range(4)").ok());
  ASSERT_TRUE((*stmt)->BindInt64(1, 0).ok());
  auto r = (*stmt)->Execute();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunk(0).GetInt64(0, 0), 4);
  ASSERT_TRUE(conn->Execute("DROP TABLE t").ok());
  EXPECT_FALSE((*stmt)->Execute().ok());
}

TEST(DatabaseTest, TakenChunksKeepTheirRowsAndTypes) {
  auto db = Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto conn = Connect(**db);
  auto r = conn->Query(
      "SELECT range AS i, 'row ' || range || ' with a long enough text' AS s, "
      "(range / 100)::DECIMAL(10,2) AS d FROM range(5000)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<LogicalType> types = r->column_logical_types();
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[0].id(), TypeId::kBigInt);
  EXPECT_EQ(types[2].id(), TypeId::kDecimal);
  std::vector<DataChunk> chunks = r->TakeChunks();
  uint64_t rows = 0;
  for (const DataChunk& c : chunks) {
    EXPECT_EQ(c.column_count(), 3u);
    rows += c.size();
  }
  EXPECT_EQ(rows, 5000u);
  EXPECT_EQ(r->chunk_count(), 0u);
}

TEST(DatabaseTest, LogicalTypesCompareWithTheirParameters) {
  auto db = Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1});
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto conn = Connect(**db);
  ASSERT_TRUE(
      conn->Execute(
              "CREATE TYPE mood AS ENUM ('sad', 'ok'); CREATE TYPE mood2 AS ENUM ('sad', 'happy')")
          .ok());
  auto r = conn->Query(
      "SELECT 1.5::DECIMAL(10,2) a, 1.5::DECIMAL(10,2) b, 1.5::DECIMAL(18,3) c, "
      "{'x': 1, 'y': 'z'} d, {'x': 1, 'y': 'z'} e, {'x': 1, 'w': 'z'} f, "
      "[1, 2] g, ['1'] h, MAP {'k': 1} i, MAP {'k': 1.5} j, 'ok'::mood k, 'sad'::mood2 l, "
      "[1, 2]::INTEGER[2] m, [1, 2, 3]::INTEGER[3] n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<LogicalType> t = r->column_logical_types();
  EXPECT_TRUE(t[0].Equals(t[1]));
  EXPECT_FALSE(t[0].Equals(t[2]));
  EXPECT_TRUE(t[3].Equals(t[4]));
  EXPECT_FALSE(t[3].Equals(t[5]));
  EXPECT_FALSE(t[6].Equals(t[7]));
  EXPECT_FALSE(t[8].Equals(t[9]));
  EXPECT_FALSE(t[10].Equals(t[11]));
  EXPECT_TRUE(t[10].Equals(t[10]));
  EXPECT_FALSE(t[12].Equals(t[13]));
  EXPECT_FALSE(t[0].Equals(t[6]));
}

TEST(DatabaseTest, StreamingResultsComeChunkByChunk) {
  auto db = Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1});
  ASSERT_TRUE(db.ok());
  auto conn = Connect(**db);
  auto stmt = PreparedStatement::Prepare(*conn, "SELECT range AS n FROM range($1::BIGINT)");
  ASSERT_TRUE(stmt.ok()) << stmt.status().ToString();
  EXPECT_EQ((*stmt)->type(), StatementType::kSelect);
  EXPECT_EQ((*stmt)->param_count(), 1u);
  ASSERT_TRUE((*stmt)->BindValue(1, Value::Varchar("5000")).ok());  // cast by DuckDB
  auto stream = (*stmt)->ExecuteStreaming();
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ(stream->return_type(), ReturnType::kRows);
  EXPECT_EQ(stream->column_name(0), "n");
  EXPECT_EQ(stream->column_type(0).id(), TypeId::kBigInt);
  uint64_t rows = 0, chunks = 0;
  while (true) {
    auto chunk = stream->Fetch();
    ASSERT_TRUE(chunk.ok());
    if (!chunk->has_value()) break;
    EXPECT_EQ((*chunk)->column(0).data<int64_t>()[0], static_cast<int64_t>(rows));
    rows += (*chunk)->size();
    ++chunks;
  }
  EXPECT_EQ(rows, 5000u);
  EXPECT_GT(chunks, 1u);
}

TEST(DatabaseTest, ExtractedStatementsAndErrorTypes) {
  auto db = Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1});
  ASSERT_TRUE(db.ok());
  auto conn = Connect(**db);
  auto stmts = ExtractedStatements::Extract(
      *conn, "CREATE TABLE t (a INT); INSERT INTO t VALUES (1), (2); SELECT * FROM nosuch");
  ASSERT_TRUE(stmts.ok()) << stmts.status().ToString();
  ASSERT_EQ(stmts->size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    auto p = stmts->Prepare(i);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    auto r = (*p)->ExecuteStreaming();
    ASSERT_TRUE(r.ok());
    if (i == 1) {
      EXPECT_EQ(r->return_type(), ReturnType::kChangedRows);
      auto chunk = r->Fetch();
      ASSERT_TRUE(chunk.ok() && chunk->has_value());
      EXPECT_EQ((*chunk)->column(0).data<int64_t>()[0], 2);
    }
  }
  ErrorType type = ErrorType::kInvalid;
  EXPECT_FALSE(stmts->Prepare(2, &type).ok());
  EXPECT_EQ(type, ErrorType::kCatalog);
  EXPECT_FALSE(ExtractedStatements::Extract(*conn, "SELEC 1", &type).ok());
  EXPECT_EQ(type, ErrorType::kParser);
  auto p = PreparedStatement::Prepare(*conn, "SELECT $1::INT");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE((*p)->BindValue(1, Value::Varchar("nope")).ok());
  auto r = (*p)->ExecuteStreaming(&type);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(type, ErrorType::kConversion);
  EXPECT_EQ(ErrorTypeFromMessage("DuckDB: Permission Error: no"), ErrorType::kPermission);
  EXPECT_EQ(ErrorTypeFromMessage("something else"), ErrorType::kInvalid);
}

TEST(DatabaseTest, Quoting) {
  EXPECT_EQ(QuoteIdentifier("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(QuoteLiteral("it's"), "'it''s'");
}

}  // namespace
}  // namespace sluice::duck
