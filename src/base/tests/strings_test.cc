#include "base/strings.h"

#include <gtest/gtest.h>

#include <string>

#include "base/json_depth.h"

namespace sluice {
namespace {

TEST(StringsTest, CaseFoldsAsciiOnly) {
  EXPECT_EQ(AsciiLower("SELECT Ünïcode 42_X"), "select Ünïcode 42_x");
  EXPECT_EQ(AsciiUpper("sasl_plain é"), "SASL_PLAIN é");
  EXPECT_EQ(AsciiLower(""), "");
  EXPECT_EQ(AsciiLower(std::string_view("A\0B", 3)), std::string("a\0b", 3));
}

TEST(StringsTest, EqualsIgnoreCaseComparesLettersWithoutCase) {
  EXPECT_TRUE(EqualsIgnoreCase("Offset", "OFFSET"));
  EXPECT_TRUE(EqualsIgnoreCase("", ""));
  EXPECT_FALSE(EqualsIgnoreCase("offset", "offsets"));
  EXPECT_FALSE(EqualsIgnoreCase("[", "{"));  // 0x5B and 0x7B differ by the case bit only
  EXPECT_FALSE(EqualsIgnoreCase("é", "É"));
}

TEST(StringsTest, ContainsFindsTextOrWholeWordsWithoutCase) {
  EXPECT_TRUE(ContainsIgnoreCase("SELECT * FROM Lake.t", "lake"));
  EXPECT_TRUE(ContainsIgnoreCase("overview", "OVER"));
  EXPECT_FALSE(ContainsIgnoreCase("SELECT 1", "select 2"));
  EXPECT_FALSE(ContainsIgnoreCase("ab", "abc"));
  EXPECT_TRUE(ContainsIgnoreCase("anything", ""));
  EXPECT_TRUE(ContainsWordIgnoreCase("row_number() OVER (PARTITION BY k)", "over"));
  EXPECT_TRUE(ContainsWordIgnoreCase("x GROUP\nBY k", "group"));
  EXPECT_TRUE(ContainsWordIgnoreCase("over", "OVER"));
  EXPECT_TRUE(ContainsWordIgnoreCase("(over)", "over"));
  EXPECT_FALSE(ContainsWordIgnoreCase("SELECT overview, group_id, _over, over9 FROM t", "over"));
  EXPECT_FALSE(ContainsWordIgnoreCase("SELECT group_id FROM groups", "group"));
  EXPECT_FALSE(ContainsWordIgnoreCase("", "over"));
}

TEST(StringsTest, TrimRemovesAsciiWhitespaceAtTheEnds) {
  EXPECT_EQ(Trim(" \t\r\n day(ts) \v\f"), "day(ts)");
  EXPECT_EQ(Trim("   "), "");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim("a b"), "a b");
  EXPECT_EQ(TrimRight("  error text\n"), "  error text");
  EXPECT_EQ(Trim("\xA0x\xA0"), "\xA0x\xA0");  // not ASCII whitespace
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

TEST(JsonTooDeepTest, CountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(JsonTooDeep(R"({"a": [1, {"b": []}]})", 4), std::string_view::npos);
  EXPECT_EQ(JsonTooDeep(R"({"a": [1, {"b": []}]})", 3), 16u);  // the fourth level's '['
  EXPECT_EQ(JsonTooDeep(R"({"a": [1, {"b": []}]})", 2), 10u);  // the third level's '{'
  // Brackets inside strings, escaped quotes included, do not count.
  EXPECT_EQ(JsonTooDeep(R"(["[[[[", "\"{{{{"])", 1), std::string_view::npos);
  EXPECT_EQ(JsonTooDeep(std::string(100000, '['), 64), 64u);
  EXPECT_EQ(JsonTooDeep("", 0), std::string_view::npos);
}

}  // namespace
}  // namespace sluice
