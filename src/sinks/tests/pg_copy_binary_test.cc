// COPY's binary format, byte for byte: the frame, each type's send format, the epoch
// shift and infinities, numeric's base-10000 digits, and the decimal texts numeric refuses.
// postgres_sink_test loads the same encodings into a real server.
#include "sinks/pg_copy_binary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace sluice::sinks::pgcopy {
namespace {

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    if (!out.empty()) out.push_back(' ');
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

template <typename F>
std::string Encoded(F append) {
  std::string out;
  append(&out);
  return Hex(out);
}

TEST(PgCopyBinaryTest, FrameAndFixedWidthValues) {
  EXPECT_EQ(Encoded([](std::string* o) { AppendHeader(o); }),
            "50 47 43 4f 50 59 0a ff 0d 0a 00 00 00 00 00 00 00 00 00");
  EXPECT_EQ(Encoded([](std::string* o) { AppendTrailer(o); }), "ff ff");
  EXPECT_EQ(Encoded([](std::string* o) { AppendFieldCount(o, 3); }), "00 03");
  EXPECT_EQ(Encoded([](std::string* o) { AppendNull(o); }), "ff ff ff ff");
  EXPECT_EQ(Encoded([](std::string* o) { AppendBool(o, true); }), "00 00 00 01 01");
  EXPECT_EQ(Encoded([](std::string* o) { AppendInt2(o, -2); }), "00 00 00 02 ff fe");
  EXPECT_EQ(Encoded([](std::string* o) { AppendInt4(o, 0x01020304); }), "00 00 00 04 01 02 03 04");
  EXPECT_EQ(Encoded([](std::string* o) { AppendInt8(o, -1); }),
            "00 00 00 08 ff ff ff ff ff ff ff ff");
  EXPECT_EQ(Encoded([](std::string* o) { AppendFloat4(o, 1.5f); }), "00 00 00 04 3f c0 00 00");
  EXPECT_EQ(Encoded([](std::string* o) { AppendFloat8(o, -0.0); }),
            "00 00 00 08 80 00 00 00 00 00 00 00");
  EXPECT_EQ(Encoded([](std::string* o) { AppendFloat8(o, std::nan("")); }).substr(0, 17),
            "00 00 00 08 7f f8");
}

TEST(PgCopyBinaryTest, DatesAndTimestampsFromDuckDbsEpochAndInfinities) {
  constexpr int32_t kDays = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMicros = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Encoded([](std::string* o) { AppendDate(o, 10957); }), "00 00 00 04 00 00 00 00");
  EXPECT_EQ(Encoded([](std::string* o) { AppendDate(o, 0); }), "00 00 00 04 ff ff d5 33");
  EXPECT_EQ(Encoded([](std::string* o) { AppendDate(o, kDays); }), "00 00 00 04 7f ff ff ff");
  EXPECT_EQ(Encoded([](std::string* o) { AppendDate(o, -kDays); }), "00 00 00 04 80 00 00 00");
  EXPECT_EQ(Encoded([](std::string* o) { AppendTimestamp(o, 946684800000001); }),
            "00 00 00 08 00 00 00 00 00 00 00 01");
  EXPECT_EQ(Encoded([](std::string* o) { AppendTimestamp(o, kMicros); }),
            "00 00 00 08 7f ff ff ff ff ff ff ff");
  EXPECT_EQ(Encoded([](std::string* o) { AppendTimestamp(o, -kMicros); }),
            "00 00 00 08 80 00 00 00 00 00 00 00");
  // Finite values whose shift to 2000-01-01 would wrap: the nearest finite value, which
  // PostgreSQL's range check refuses (never a wrapped date or timestamp, never infinity).
  EXPECT_EQ(Encoded([](std::string* o) { AppendDate(o, -kDays + 5); }), "00 00 00 04 80 00 00 01");
  EXPECT_EQ(Encoded([](std::string* o) { AppendDate(o, -kDays + 10957); }),
            "00 00 00 04 80 00 00 01");
  EXPECT_EQ(Encoded([](std::string* o) { AppendDate(o, -kDays + 10958); }),
            "00 00 00 04 80 00 00 02");
  EXPECT_EQ(Encoded([](std::string* o) { AppendTimestamp(o, -kMicros + 7); }),
            "00 00 00 08 80 00 00 00 00 00 00 01");
  EXPECT_EQ(Encoded([](std::string* o) { AppendTimestamp(o, -kMicros + 946684800000000); }),
            "00 00 00 08 80 00 00 00 00 00 00 01");
}

TEST(PgCopyBinaryTest, BytesJsonbAndUuid) {
  EXPECT_EQ(Encoded([](std::string* o) { AppendBytes(o, std::string("a\0b", 3)); }),
            "00 00 00 03 61 00 62");
  EXPECT_EQ(Encoded([](std::string* o) { AppendBytes(o, ""); }), "00 00 00 00");
  EXPECT_EQ(Encoded([](std::string* o) { AppendJsonb(o, "{}"); }), "00 00 00 03 01 7b 7d");
  const uint8_t uuid[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255};
  EXPECT_EQ(Encoded([&](std::string* o) { AppendUuid(o, uuid); }),
            "00 00 00 10 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e ff");
}

// numeric: length, ndigits, weight, sign, dscale, digits.
TEST(PgCopyBinaryTest, NumericInBaseTenThousand) {
  auto numeric = [](std::string_view text) {
    std::string out;
    EXPECT_TRUE(AppendNumeric(&out, text)) << text;
    return Hex(out);
  };
  // 12345.678 = 1|2345 . 6780: weight 1, dscale 3.
  EXPECT_EQ(numeric("12345.678"), "00 00 00 0e 00 03 00 01 00 00 00 03 00 01 09 29 1a 7c");
  EXPECT_EQ(numeric("-12345.678"), "00 00 00 0e 00 03 00 01 40 00 00 03 00 01 09 29 1a 7c");
  // 0.05: one digit 500 worth 10000^-1, dscale 2.
  EXPECT_EQ(numeric("0.05"), "00 00 00 0a 00 01 ff ff 00 00 00 02 01 f4");
  // 0.00001: the first group is zero, so the weight is -2.
  EXPECT_EQ(numeric("0.00001"), "00 00 00 0a 00 01 ff fe 00 00 00 05 03 e8");
  // Trailing zero groups dropped; the scale stays.
  EXPECT_EQ(numeric("100000000.0000"), "00 00 00 0a 00 01 00 02 00 00 00 04 00 01");
  EXPECT_EQ(numeric("7"), "00 00 00 0a 00 01 00 00 00 00 00 00 00 07");
  // Zero, negative zero: no digits, positive.
  EXPECT_EQ(numeric("0"), "00 00 00 08 00 00 00 00 00 00 00 00");
  EXPECT_EQ(numeric("-0.00"), "00 00 00 08 00 00 00 00 00 00 00 02");
  EXPECT_EQ(numeric(".5"), "00 00 00 0a 00 01 ff ff 00 00 00 01 13 88");
  // 38 digits.
  std::string out;
  EXPECT_TRUE(AppendNumeric(&out, "-99999999999999999999999999999.999999999"));
  EXPECT_EQ(out.size(), 4u + 8u + 2u * 11u);  // 8 groups before the point, 3 after
}

TEST(PgCopyBinaryTest, NumericRefusesWhatIsNotAPlainDecimal) {
  for (std::string_view bad : {"", "-", ".", "1.", "1e5", "NaN", "inf", " 1", "1 ", "+1", "1.2.3",
                               "--1", "0x10", "1,5", "١"}) {
    std::string out = "kept";
    EXPECT_FALSE(AppendNumeric(&out, bad)) << bad;
    EXPECT_EQ(out, "kept") << bad;
  }
}

}  // namespace
}  // namespace sluice::sinks::pgcopy
