// The console's writing of query values: JSON numbers only where JSON and a double carry
// them exactly, strings otherwise; CSV quoting that keeps NULL and "" apart.
#include "console/sql_output.h"

#include <gtest/gtest.h>

namespace sluice::console {
namespace {

std::string Json(std::optional<std::string_view> v, bool numeric,
                 JsonNumbers numbers = JsonNumbers::kExact) {
  std::string out;
  AppendJsonValue(out, v, numeric ? numbers : JsonNumbers::kNever);
  return out;
}

TEST(SqlOutputTest, NumbersStayNumbersOnlyWhenExact) {
  EXPECT_EQ(Json("42", true), "42");
  EXPECT_EQ(Json("-3.25", true), "-3.25");
  EXPECT_EQ(Json("1e-05", true), "1e-05");
  EXPECT_EQ(Json("0", true), "0");
  EXPECT_EQ(Json("9007199254740992", true), "9007199254740992");      // 2^53
  EXPECT_EQ(Json("9007199254740993", true), "\"9007199254740993\"");  // past it
  EXPECT_EQ(Json("-9007199254740993", true), "\"-9007199254740993\"");
  EXPECT_EQ(Json("12345678901234567890", true), "\"12345678901234567890\"");
  EXPECT_EQ(Json("0.1234567890123456789", true), "\"0.1234567890123456789\"");
  EXPECT_EQ(Json("0.000012345", true), "0.000012345");  // leading zeros are not digits
  // What JSON has no number for.
  EXPECT_EQ(Json("NaN", true), "\"NaN\"");
  EXPECT_EQ(Json("Infinity", true), "\"Infinity\"");
  EXPECT_EQ(Json("-Infinity", true), "\"-Infinity\"");
  EXPECT_EQ(Json("01", true), "\"01\"");
  EXPECT_EQ(Json("1.", true), "\"1.\"");
  EXPECT_EQ(Json("", true), "\"\"");
  // Not a numeric column: always a string.
  EXPECT_EQ(Json("42", false), "\"42\"");
  EXPECT_EQ(Json(std::nullopt, true), "null");
}

TEST(SqlOutputTest, FloatsAreNumbersWheneverFinite) {
  // A float's text is the shortest that reads back as the same double: always exact.
  EXPECT_EQ(Json("0.30000000000000004", true, JsonNumbers::kFloats), "0.30000000000000004");
  EXPECT_EQ(Json("1.2345678901234568e+22", true, JsonNumbers::kFloats), "1.2345678901234568e+22");
  EXPECT_EQ(Json("NaN", true, JsonNumbers::kFloats), "\"NaN\"");
  EXPECT_EQ(Json("-Infinity", true, JsonNumbers::kFloats), "\"-Infinity\"");
}

TEST(SqlOutputTest, StringsAreEscaped) {
  EXPECT_EQ(Json("a\"b\\c\nd\te\x01", false), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  EXPECT_EQ(Json("zürich", false), "\"zürich\"");
}

TEST(SqlOutputTest, CsvQuotesWhatItMustAndKeepsNullApartFromEmpty) {
  std::string out;
  AppendCsvLine(out, {"plain", "with,comma", "say \"hi\"", "two\nlines", "", std::nullopt});
  EXPECT_EQ(out, "plain,\"with,comma\",\"say \"\"hi\"\"\",\"two\nlines\",\"\",\n");
}

}  // namespace
}  // namespace sluice::console
