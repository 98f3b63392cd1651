#include "base/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

namespace sluice::crc32c {
namespace {

std::vector<uint8_t> Filled(size_t n, uint8_t byte) { return std::vector<uint8_t>(n, byte); }

uint32_t Crc(std::string_view s) {
  return Value(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// RFC 3720 appendix B.4.
TEST(Crc32cTest, Rfc3720ZeroBytes) { EXPECT_EQ(Value(Filled(32, 0x00)), 0x8A9136AAu); }

TEST(Crc32cTest, Rfc3720OnesBytes) { EXPECT_EQ(Value(Filled(32, 0xFF)), 0x62A8AB43u); }

TEST(Crc32cTest, Rfc3720AscendingBytes) {
  std::vector<uint8_t> buf(32);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Value(buf), 0x46DD794Eu);
  EXPECT_EQ(ExtendPortable(0, buf.data(), buf.size()), 0x46DD794Eu);
}

TEST(Crc32cTest, Rfc3720DescendingBytes) {
  std::vector<uint8_t> buf(32);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Value(buf), 0x113FDB5Cu);
  EXPECT_EQ(ExtendPortable(0, buf.data(), buf.size()), 0x113FDB5Cu);
}

TEST(Crc32cTest, CheckValueOfDigits) { EXPECT_EQ(Crc("123456789"), 0xE3069283u); }

TEST(Crc32cTest, EmptyInputIsZeroAndExtendOfNothingIsIdentity) {
  EXPECT_EQ(Value(nullptr, 0), 0u);
  EXPECT_EQ(Extend(0x12345678, nullptr, 0), 0x12345678u);
  EXPECT_EQ(ExtendPortable(0x12345678, nullptr, 0), 0x12345678u);
}

TEST(Crc32cTest, ExtendOverSplitBuffersEqualsOneShot) {
  std::mt19937 rng(1);
  std::vector<uint8_t> buf(300);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  const uint32_t whole = Value(buf);
  for (size_t split = 0; split <= buf.size(); ++split) {
    uint32_t crc = Extend(0, buf.data(), split);
    crc = Extend(crc, buf.data() + split, buf.size() - split);
    ASSERT_EQ(crc, whole) << "split at " << split;
    uint32_t portable = ExtendPortable(0, buf.data(), split);
    portable = ExtendPortable(portable, buf.data() + split, buf.size() - split);
    ASSERT_EQ(portable, whole) << "portable, split at " << split;
  }
}

TEST(Crc32cTest, PortableMatchesDispatchedOnRandomLengthsAndOffsets) {
  // When the CPU has SSE4.2 this compares the two implementations; otherwise Extend is
  // the portable one and the test is trivially true.
  if (!HardwareAccelerated()) {
    GTEST_LOG_(INFO) << "no hardware CRC32C; comparing portable to itself";
  }
  std::mt19937 rng(42);
  std::vector<uint8_t> buf(40000 + 16);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len = 0; len <= 300; ++len) {
    for (size_t offset = 0; offset < 9; ++offset) {
      const uint8_t* p = buf.data() + offset;
      ASSERT_EQ(Extend(0, p, len), ExtendPortable(0, p, len))
          << "len " << len << " offset " << offset;
      ASSERT_EQ(Extend(0xDEADBEEF, p, len), ExtendPortable(0xDEADBEEF, p, len))
          << "seeded, len " << len << " offset " << offset;
    }
  }
  // Lengths around the three-stripe (3 x 4 KiB) fast path and several stripes long.
  for (size_t len : {1000u, 1023u, 1024u, 1025u, 4096u, 12287u, 12288u, 12289u, 24583u, 40000u}) {
    for (size_t offset = 0; offset < 16; ++offset) {
      const uint8_t* p = buf.data() + offset;
      ASSERT_EQ(Extend(0, p, len), ExtendPortable(0, p, len))
          << "len " << len << " offset " << offset;
    }
  }
}

}  // namespace
}  // namespace sluice::crc32c
