#include "base/clock.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(ParseTimeMsTest, AcceptsWhatPeopleType) {
  EXPECT_EQ(ParseTimeMs("0"), 0);
  EXPECT_EQ(ParseTimeMs("1796567761916"), 1796567761916);
  EXPECT_EQ(ParseTimeMs("1970-01-01"), 0);
  EXPECT_EQ(ParseTimeMs("2026-12-01"), 1796083200000);
  EXPECT_EQ(ParseTimeMs("2026-12-01T10:00:00Z"), 1796083200000 + 36000000);
  EXPECT_EQ(ParseTimeMs("2026-12-01 10:00:00Z"), 1796083200000 + 36000000);
  EXPECT_EQ(ParseTimeMs("2026-12-01T10:00:00"), 1796083200000 + 36000000);  // UTC
  EXPECT_EQ(ParseTimeMs("2026-12-01T10:00:00.5Z"), 1796083200000 + 36000500);
  EXPECT_EQ(ParseTimeMs("2026-12-01T10:00:00.123456Z"), 1796083200000 + 36000123);
  EXPECT_EQ(ParseTimeMs("2026-12-01T12:00:00+02:00"), 1796083200000 + 36000000);
  EXPECT_EQ(ParseTimeMs("2026-12-01T08:30:00-01:30"), 1796083200000 + 36000000);
  EXPECT_EQ(ParseTimeMs("2024-02-29"), 1709164800000);  // a leap day
}

TEST(ParseTimeMsTest, RefusesTheRest) {
  for (const char* bad : {"",
                          "now",
                          "-5",
                          "12a",
                          "2026-12",
                          "2026-13-01",
                          "2026-00-10",
                          "2026-12-32",
                          "2026-02-30",
                          "2025-02-29",
                          "2026-12-01T",
                          "2026-12-01T25:00:00Z",
                          "2026-12-01T10:61:00Z",
                          "2026-12-01T10:00Z",
                          "2026-12-01T10:00:00.Z",
                          "2026-12-01T10:00:00X",
                          "2026-12-01T10:00:00+0200",
                          "2026-12-01T10:00:00+24:00",
                          "2026-12-01T10:00:00Zjunk",
                          "2026/12/01",
                          "99999999999999999999999",
                          "２０２６-12-01"}) {
    EXPECT_FALSE(ParseTimeMs(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace sluice
