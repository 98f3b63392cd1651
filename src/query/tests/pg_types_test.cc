#include "query/pg_types.h"

#include <gtest/gtest.h>

#include "duck/database.h"

namespace sluice::query {
namespace {

TEST(PgTextTest, FormatsDatesTimesAndTimestamps) {
  EXPECT_EQ(FormatDate(0), "1970-01-01");
  EXPECT_EQ(FormatDate(19724), "2024-01-02");
  EXPECT_EQ(FormatDate(-719162), "0001-01-01");
  EXPECT_EQ(FormatDate(-719163), "0001-12-31 BC");  // the day before 0001-01-01 is in 1 BC
  EXPECT_EQ(FormatDate(2147483647), "infinity");
  EXPECT_EQ(FormatTime(0), "00:00:00");
  EXPECT_EQ(FormatTime(3723'500000), "01:02:03.5");
  EXPECT_EQ(FormatTimestamp(1704164645'123456, false), "2024-01-02 03:04:05.123456");
  EXPECT_EQ(FormatTimestamp(1704164645'000000, true), "2024-01-02 03:04:05+00");
  EXPECT_EQ(FormatTimestamp(-1, false), "1969-12-31 23:59:59.999999");
}

TEST(PgTextTest, FormatsIntervalsAsPostgresDoes) {
  EXPECT_EQ(FormatInterval(0, 0, 0), "00:00:00");
  EXPECT_EQ(FormatInterval(14, 3, 4 * 3600'000000LL + 5 * 60'000000LL + 6'700000),
            "1 year 2 mons 3 days 04:05:06.7");
  EXPECT_EQ(FormatInterval(0, 1, 0), "1 day");
  EXPECT_EQ(FormatInterval(-12, 0, 0), "-1 years");
  EXPECT_EQ(FormatInterval(0, -1, 3600'000000LL), "-1 days +01:00:00");
  EXPECT_EQ(FormatInterval(0, 0, -90'000000LL), "-00:01:30");
  EXPECT_EQ(FormatInterval(0, 0, 100 * 3600'000000LL), "100:00:00");
}

TEST(PgTextTest, FormatsFloatsLikePostgres15) {
  EXPECT_EQ(FormatFloat(0.1, false), "0.1");
  EXPECT_EQ(FormatFloat(1.5, false), "1.5");
  EXPECT_EQ(FormatFloat(100000, false), "100000");
  EXPECT_EQ(FormatFloat(1e15, false), "1e+15");
  EXPECT_EQ(FormatFloat(123456789012345, false), "123456789012345");
  EXPECT_EQ(FormatFloat(0.0001, false), "0.0001");
  EXPECT_EQ(FormatFloat(0.00001, false), "1e-05");
  EXPECT_EQ(FormatFloat(-2.5e-10, false), "-2.5e-10");
  EXPECT_EQ(FormatFloat(1.0 / 3, false), "0.3333333333333333");
  EXPECT_EQ(FormatFloat(1234567, true), "1.234567e+06");
  EXPECT_EQ(FormatFloat(0.1f, true), "0.1");
  EXPECT_EQ(FormatFloat(std::numeric_limits<double>::infinity(), false), "Infinity");
  EXPECT_EQ(FormatFloat(std::nan(""), false), "NaN");
}

TEST(PgTextTest, FormatsDecimals) {
  EXPECT_EQ(FormatHugeInt(12345, 2), "123.45");
  EXPECT_EQ(FormatHugeInt(-5, 3), "-0.005");
  EXPECT_EQ(FormatHugeInt(0, 2), "0.00");
  __int128 big = static_cast<__int128>(1) << 100;
  EXPECT_EQ(FormatHugeInt(big, 0), "1267650600228229401496703205376");
}

TEST(PgNumericTest, BinaryFormRoundTrips) {
  for (std::string text : {"0", "1", "-12.340", "10000", "0.0001", "123456789.987654321", "-0.5",
                           "9999.9999", "0.00000001", "100000000", "NaN"}) {
    auto bin = NumericBinaryFromText(text);
    ASSERT_TRUE(bin.ok()) << text;
    auto back = NumericTextFromBinary(*bin);
    ASSERT_TRUE(back.ok()) << text << ": " << back.status().ToString();
    EXPECT_EQ(*back, text);
  }
  // 10000 is one base-10000 digit of weight 1.
  auto bin = NumericBinaryFromText("10000");
  EXPECT_EQ(*bin, std::string("\0\1\0\1\0\0\0\0\0\1", 10));
  EXPECT_FALSE(NumericTextFromBinary(std::string("\0\1\0\0\0\0\0\0", 8)).ok());  // a digit missing
  EXPECT_FALSE(
      NumericTextFromBinary(std::string("\0\1\0\0\0\0\0\0\x27\x10", 10)).ok());  // digit 10000
  EXPECT_FALSE(NumericBinaryFromText("1e5").ok());
}

// Runs `select` and encodes its first row, every column, as text or binary fields.
std::vector<std::string> EncodeRow(const std::string& select, bool binary) {
  auto db = duck::Database::Open({.threads = 1});
  EXPECT_TRUE(db.ok());
  auto conn = duck::Connection::Open(**db);
  auto stmt = duck::PreparedStatement::Prepare(**conn, select);
  EXPECT_TRUE(stmt.ok()) << stmt.status().ToString();
  auto stream = (*stmt)->ExecuteStreaming();
  EXPECT_TRUE(stream.ok()) << stream.status().ToString();
  auto chunk = stream->Fetch();
  EXPECT_TRUE(chunk.ok() && chunk->has_value());
  std::vector<std::string> out;
  for (size_t c = 0; c < stream->column_count(); ++c) {
    auto enc = ColumnEncoder::Make(stream->column_type(c));
    EXPECT_TRUE(enc.ok()) << enc.status().ToString();
    std::string field;
    enc->Append((*chunk)->column(c), 0, binary, field);
    int32_t len = (static_cast<uint8_t>(field[0]) << 24) | (static_cast<uint8_t>(field[1]) << 16) |
                  (static_cast<uint8_t>(field[2]) << 8) | static_cast<uint8_t>(field[3]);
    out.push_back(len < 0 ? "<NULL>" : field.substr(4));
  }
  return out;
}

TEST(PgEncodeTest, EncodesDuckDbValuesAsText) {
  auto row = EncodeRow(
      "SELECT true, 7::TINYINT, 300::SMALLINT, 70000, 5000000000, 2.5::FLOAT, 0.1::DOUBLE, "
      "12.30::DECIMAL(10,2), "
      "'héllo', '\\x01\\xAB'::BLOB, DATE '2024-01-02', TIME '01:02:03.25', TIMESTAMP '2024-01-02 "
      "03:04:05', "
      "INTERVAL '1 year 2 months 3 days 4 hours', '12345678-1234-5678-9abc-def012345678'::UUID, "
      "[1, NULL, 3], ['a b', 'c\"d', NULL, ''], NULL::INTEGER, {'x': 1, 'y': 'z'}, "
      "170141183460469231731687303715884105727::HUGEINT, "
      "'{\"a\":1}'::JSON",
      false);
  std::vector<std::string> expected = {"t",
                                       "7",
                                       "300",
                                       "70000",
                                       "5000000000",
                                       "2.5",
                                       "0.1",
                                       "12.30",
                                       "héllo",
                                       "\\x01ab",
                                       "2024-01-02",
                                       "01:02:03.25",
                                       "2024-01-02 03:04:05",
                                       "1 year 2 mons 3 days 04:00:00",
                                       "12345678-1234-5678-9abc-def012345678",
                                       "{1,NULL,3}",
                                       "{\"a b\",\"c\\\"d\",NULL,\"\"}",
                                       "<NULL>",
                                       "{'x': 1, 'y': 'z'}",
                                       "170141183460469231731687303715884105727",
                                       "{\"a\":1}"};
  ASSERT_EQ(row.size(), expected.size());
  for (size_t i = 0; i < row.size(); ++i) EXPECT_EQ(row[i], expected[i]) << "column " << i;
}

TEST(PgEncodeTest, EncodesDuckDbValuesAsBinary) {
  auto row = EncodeRow(
      "SELECT true, 300::SMALLINT, 70000, -2::BIGINT, 1.5::DOUBLE, DATE '2000-01-02', "
      "TIMESTAMP '2000-01-01 00:00:01', INTERVAL '1 month 2 days 3 seconds', "
      "'00000000-0000-0000-0000-000000000001'::UUID, [1, 2]::INTEGER[], 1.50::DECIMAL(4,2)",
      true);
  ASSERT_EQ(row.size(), 11u);
  EXPECT_EQ(row[0], std::string("\1", 1));
  EXPECT_EQ(row[1], std::string("\x01\x2c", 2));
  EXPECT_EQ(row[2], std::string("\0\x01\x11\x70", 4));
  EXPECT_EQ(row[3], std::string("\xff\xff\xff\xff\xff\xff\xff\xfe", 8));
  EXPECT_EQ(row[4], std::string("\x3f\xf8\0\0\0\0\0\0", 8));
  EXPECT_EQ(row[5], std::string("\0\0\0\1", 4));
  EXPECT_EQ(row[6], std::string("\0\0\0\0\0\x0f\x42\x40", 8));
  EXPECT_EQ(row[7], std::string("\0\0\0\0\0\x2d\xc6\xc0\0\0\0\2\0\0\0\1", 16));
  EXPECT_EQ(row[8], std::string(15, '\0') + "\1");
  EXPECT_EQ(row[9], std::string("\0\0\0\1\0\0\0\0\0\0\0\x17\0\0\0\2\0\0\0\1"
                                "\0\0\0\4\0\0\0\1\0\0\0\4\0\0\0\2",
                                36));
  EXPECT_EQ(row[10],
            std::string("\0\2\0\0\0\0\0\2\0\1\x13\x88", 12));  // 1.50: digits 1, 5000, dscale 2
}

TEST(PgEncodeTest, UnsupportedTypesNameTheType) {
  auto db = duck::Database::Open({.threads = 1});
  auto conn = duck::Connection::Open(**db);
  auto stmt = duck::PreparedStatement::Prepare(**conn, "SELECT '101'::BIT");
  ASSERT_TRUE(stmt.ok());
  auto enc = ColumnEncoder::Make((*stmt)->column_type(0));
  ASSERT_FALSE(enc.ok());
  EXPECT_EQ(enc.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(enc.status().message().find("BIT"), std::string::npos) << enc.status().message();
}

TEST(PgParamTest, DecodesBinaryParameters) {
  auto db = duck::Database::Open({.threads = 1});
  auto conn = duck::Connection::Open(**db);
  auto stmt =
      duck::PreparedStatement::Prepare(**conn,
                                       "SELECT $1::VARCHAR, $2::VARCHAR, $3::VARCHAR, $4::VARCHAR, "
                                       "$5::VARCHAR, $6::VARCHAR, $7::VARCHAR, $8::VARCHAR");
  ASSERT_TRUE(stmt.ok()) << stmt.status().ToString();
  std::vector<std::pair<uint32_t, std::string>> params = {
      {oid::kInt4, std::string("\0\0\1\0", 4)},
      {oid::kInt8, std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8)},
      {oid::kFloat8, std::string("\x3f\xf8\0\0\0\0\0\0", 8)},
      {oid::kBool, std::string("\1", 1)},
      {oid::kDate, std::string("\0\0\0\1", 4)},
      {oid::kTimestamp, std::string("\0\0\0\0\0\x0f\x42\x40", 8)},
      {oid::kNumeric, std::string("\0\2\0\0\0\0\0\2\0\1\x13\x88", 12)},
      {oid::kInt4Array,
       std::string("\0\0\0\1\0\0\0\0\0\0\0\x17\0\0\0\2\0\0\0\1\0\0\0\4\0\0\0\1\0\0\0\4\0\0\0\2",
                   36)},
  };
  for (size_t i = 0; i < params.size(); ++i) {
    auto v = DecodeParam(params[i].first, true, params[i].second);
    ASSERT_TRUE(v.ok()) << i << ": " << v.status().ToString();
    ASSERT_TRUE((*stmt)->BindValue(i + 1, *v).ok());
  }
  auto result = (*stmt)->Execute();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  auto chunk = result->chunk(0);
  std::vector<std::string> expected = {
      "256", "-1", "1.5", "true", "2000-01-02", "2000-01-01 00:00:01", "1.50", "[1, 2]"};
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(chunk.GetString(i, 0), expected[i]) << i;
}

TEST(PgParamTest, RefusesMalformedBinaryParameters) {
  EXPECT_FALSE(DecodeParam(oid::kInt4, true, "abc").ok());
  EXPECT_FALSE(DecodeParam(oid::kBool, true, "").ok());
  EXPECT_FALSE(DecodeParam(oid::kText, true, "\xff").ok());
  EXPECT_FALSE(DecodeParam(oid::kText, false, "\xc3").ok());
  EXPECT_FALSE(DecodeParam(oid::kInt4Array, true,
                           std::string("\0\0\0\1\0\0\0\0\0\0\0\x17\x7f\0\0\0\0\0\0\1", 20))
                   .ok());
  EXPECT_EQ(DecodeParam(600 /* point */, true, "x").status().code(), StatusCode::kUnimplemented);
  auto bytea = DecodeParam(oid::kBytea, false, "\\x00ff");
  ASSERT_TRUE(bytea.ok());
  EXPECT_FALSE(DecodeParam(oid::kBytea, false, "\\x0").ok());
}

}  // namespace
}  // namespace sluice::query

namespace sluice::query {
namespace {

TEST(PgParamTest, TextArraysBecomeLists) {
  auto db = duck::Database::Open({.threads = 1});
  auto conn = duck::Connection::Open(**db);
  auto stmt =
      duck::PreparedStatement::Prepare(**conn, "SELECT $1::INTEGER[] AS a, $2::VARCHAR[] AS b");
  ASSERT_TRUE(stmt.ok()) << stmt.status().ToString();
  auto a = DecodeParam(oid::kInt4Array, false, "{1, NULL ,3}");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = DecodeParam(oid::kTextArray, false, R"({"a,b","q\"uote",NULL,"NULL",plain})");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE((*stmt)->BindValue(1, *a).ok());
  ASSERT_TRUE((*stmt)->BindValue(2, *b).ok());
  auto rows = (*conn)->QueryText("SELECT 1");  // the connection works
  ASSERT_TRUE(rows.ok());
  auto result = (*stmt)->Execute();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(DecodeParam(oid::kInt4Array, false, "{}").ok());
  for (const char* bad : {"1,2", "{1,2", "{\"a}", "{1}x", "{{1}}"}) {
    EXPECT_FALSE(DecodeParam(oid::kInt4Array, false, bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace sluice::query
