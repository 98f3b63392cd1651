// KeyMap: latest offset per key, fixed memory, full at its load factor.
#include "compaction/key_map.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

namespace sluice::compaction {
namespace {

std::span<const uint8_t> B(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(KeyMapTest, KeepsTheLatestOffsetPerKey) {
  KeyMap map(24 * 100);
  EXPECT_EQ(map.Get(B("a")), -1);
  EXPECT_TRUE(map.Put(B("a"), 1));
  EXPECT_TRUE(map.Put(B("b"), 2));
  EXPECT_TRUE(map.Put(B("a"), 7));
  EXPECT_EQ(map.Get(B("a")), 7);
  EXPECT_EQ(map.Get(B("b")), 2);
  EXPECT_EQ(map.Get(B("")), -1);
  EXPECT_TRUE(map.Put(B(""), 9));  // an empty key is a key
  EXPECT_EQ(map.Get(B("")), 9);
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ(map.latest_offset(), 9);
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.Get(B("a")), -1);
  EXPECT_EQ(map.latest_offset(), -1);
}

TEST(KeyMapTest, MemoryIsFixedAndFullAtTheLoadFactor) {
  KeyMap map(24 * 1000, 0.9);
  EXPECT_EQ(map.slots(), 1000u);
  EXPECT_EQ(map.memory_bytes(), 24000u);
  EXPECT_EQ(map.capacity(), 900u);
  int put = 0;
  for (int i = 0; i < 2000; ++i) {
    if (map.Put(B(fmt::format("key-{}", i)), i)) ++put;
  }
  EXPECT_EQ(put, 900);
  EXPECT_TRUE(map.full());
  // A key already there still updates when full; a new one does not get in.
  EXPECT_TRUE(map.Put(B("key-5"), 5000));
  EXPECT_EQ(map.Get(B("key-5")), 5000);
  EXPECT_FALSE(map.Put(B("key-1999"), 6000));
  EXPECT_EQ(map.Get(B("key-1999")), -1);
  for (int i = 0; i < 900; ++i) {
    if (i != 5) {
      EXPECT_EQ(map.Get(B(fmt::format("key-{}", i))), i);
    }
  }
}

TEST(KeyMapTest, ClearSizedForFewKeysUsesFewSlots) {
  KeyMap map(24 * 100000);
  map.Clear(90);
  EXPECT_GE(map.capacity(), 90u);  // room for the keys expected, about no more
  EXPECT_LE(map.capacity(), 92u);
  EXPECT_LE(map.peak_bytes(), 24u * 200);
  for (int i = 0; i < 90; ++i) EXPECT_TRUE(map.Put(B(fmt::format("k{}", i)), i));
  map.Clear(1'000'000'000);  // never past its memory
  EXPECT_EQ(map.capacity(), 90000u);
  EXPECT_EQ(map.Get(B("k3")), -1);
  EXPECT_LE(map.peak_bytes(), 24u * 200);
  EXPECT_TRUE(map.Put(B("k3"), 1));
  EXPECT_EQ(map.peak_bytes(), 24u * 100000);
}

TEST(KeyMapTest, TinyMapsStillWork) {
  KeyMap map(0);
  EXPECT_EQ(map.slots(), 2u);
  EXPECT_EQ(map.capacity(), 1u);
  EXPECT_TRUE(map.Put(B("x"), 1));
  EXPECT_FALSE(map.Put(B("y"), 2));
  EXPECT_EQ(map.Get(B("y")), -1);  // terminates: a slot always stays free
}

TEST(KeyMapTest, HashesDoNotCollideOnSimilarKeys) {
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (int i = 0; i < 200000; ++i) {
    std::string k = fmt::format("user-{:08d}", i);
    uint64_t a, b;
    HashKey(B(k), &a, &b);
    EXPECT_TRUE(seen.insert({a, b}).second) << k;
  }
  // Lengths that differ only by trailing zero bytes hash apart.
  uint64_t a1, b1, a2, b2;
  HashKey(B(std::string("ab")), &a1, &b1);
  HashKey(B(std::string("ab\0", 3)), &a2, &b2);
  EXPECT_NE(std::make_pair(a1, b1), std::make_pair(a2, b2));
}

}  // namespace
}  // namespace sluice::compaction
