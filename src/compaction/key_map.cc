// KeyMap: open addressing with linear probing over a fixed array of 24-byte entries.
#include "compaction/key_map.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

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
    : slots_(std::max<size_t>(2, memory_bytes / kEntryBytes)), load_factor_(load_factor) {
  mapped_bytes_ = slots_ * sizeof(Entry);
  void* p =
      mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  entries_ = static_cast<Entry*>(p);
  Clear();
}

KeyMap::~KeyMap() { munmap(entries_, mapped_bytes_); }

void KeyMap::Clear(size_t expected_keys) {
  // Zero what may have been written: large stretches go back to the kernel (they read as
  // zeros and cost nothing until touched again), the rest is cleared in place.
  size_t used_bytes = used_ * sizeof(Entry);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (used_bytes >= 16 * page) {
    size_t whole = used_bytes / page * page;
    madvise(entries_, whole, MADV_DONTNEED);
    std::memset(reinterpret_cast<char*>(entries_) + whole, 0, used_bytes - whole);
  } else {
    std::memset(entries_, 0, used_bytes);
  }
  size_t want = slots_;
  if (expected_keys != SIZE_MAX) {
    double need = static_cast<double>(expected_keys) / load_factor_ + 2;
    if (need < static_cast<double>(slots_)) want = std::max<size_t>(2, static_cast<size_t>(need));
  }
  active_ = want;
  used_ = active_;
  max_entries_ = std::max<size_t>(
      1, std::min(active_ - 1, static_cast<size_t>(static_cast<double>(active_) * load_factor_)));
  size_ = 0;
  latest_offset_ = -1;
}

size_t KeyMap::Find(uint64_t h1, uint64_t h2) const {
  size_t i = Home(h1);
  for (;;) {
    const Entry& e = entries_[i];
    if (e.offset_plus_one == 0 || (e.h1 == h1 && e.h2 == h2)) return i;
    if (++i == active_) i = 0;
  }
}

bool KeyMap::PutHashed(uint64_t h1, uint64_t h2, int64_t offset) {
  Entry& e = entries_[Find(h1, h2)];
  if (e.offset_plus_one == 0) {
    if (size_ >= max_entries_) return false;
    e.h1 = h1;
    e.h2 = h2;
    ++size_;
  }
  e.offset_plus_one = offset + 1;
  if (active_ > peak_used_) peak_used_ = active_;
  latest_offset_ = std::max(latest_offset_, offset);
  return true;
}

int64_t KeyMap::GetHashed(uint64_t h1, uint64_t h2) const {
  return entries_[Find(h1, h2)].offset_plus_one - 1;
}

bool KeyMap::Put(std::span<const uint8_t> key, int64_t offset) {
  uint64_t h1, h2;
  HashKey(key, &h1, &h2);
  return PutHashed(h1, h2, offset);
}

int64_t KeyMap::Get(std::span<const uint8_t> key) const {
  uint64_t h1, h2;
  HashKey(key, &h1, &h2);
  return GetHashed(h1, h2);
}

}  // namespace sluice::compaction
