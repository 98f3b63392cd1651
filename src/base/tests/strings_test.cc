#include "base/strings.h"

#include <gtest/gtest.h>

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
