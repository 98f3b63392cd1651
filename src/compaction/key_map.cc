// KeyMap: open addressing with linear probing over a fixed array of 24-byte entries.
#include "compaction/key_map.h"

#include <algorithm>
#include <cstring>

namespace sluice::compaction {
namespace {

constexpr uint64_t kMul1 = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kMul2 = 0xC2B2AE3D27D4EB4Full;

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

void HashKey(std::span<const uint8_t> key, uint64_t* h1, uint64_t* h2) {
  uint64_t a = 0x243F6A8885A308D3ull ^ (key.size() * kMul1);
  uint64_t b = 0x13198A2E03707344ull ^ (key.size() * kMul2);
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, key.data() + i, 8);
    a = Rotl((a ^ w) * kMul1, 31) * kMul2;
    b = Rotl((b + w) * kMul2, 27) * kMul1 ^ a;
  }
  if (i < key.size()) {
    uint64_t w = 0;
    std::memcpy(&w, key.data() + i, key.size() - i);
    a = Rotl((a ^ w) * kMul1, 31) * kMul2;
    b = Rotl((b + w) * kMul2, 27) * kMul1 ^ a;
  }
  *h1 = Mix(a ^ Rotl(b, 17));
  *h2 = Mix(b + Rotl(a, 41));
}

KeyMap::KeyMap(size_t memory_bytes, double load_factor)
    : slots_(std::max<size_t>(2, memory_bytes / kEntryBytes)),
      max_entries_(std::max<size_t>(
          1, std::min(slots_ - 1, static_cast<size_t>(static_cast<double>(slots_) * load_factor)))),
      entries_(new Entry[slots_]) {
  Clear();
}

void KeyMap::Clear() {
  for (size_t i = 0; i < slots_; ++i) entries_[i].offset = -1;
  size_ = 0;
  latest_offset_ = -1;
}

size_t KeyMap::Find(uint64_t h1, uint64_t h2) const {
  size_t i = static_cast<size_t>((static_cast<unsigned __int128>(h1) * slots_) >> 64);
  for (;;) {
    const Entry& e = entries_[i];
    if (e.offset < 0 || (e.h1 == h1 && e.h2 == h2)) return i;
    if (++i == slots_) i = 0;
  }
}

bool KeyMap::Put(std::span<const uint8_t> key, int64_t offset) {
  uint64_t h1, h2;
  HashKey(key, &h1, &h2);
  Entry& e = entries_[Find(h1, h2)];
  if (e.offset < 0) {
    if (size_ >= max_entries_) return false;
    e.h1 = h1;
    e.h2 = h2;
    ++size_;
  }
  e.offset = offset;
  latest_offset_ = std::max(latest_offset_, offset);
  return true;
}

int64_t KeyMap::Get(std::span<const uint8_t> key) const {
  uint64_t h1, h2;
  HashKey(key, &h1, &h2);
  return entries_[Find(h1, h2)].offset;
}

}  // namespace sluice::compaction
