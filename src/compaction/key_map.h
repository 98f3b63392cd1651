// KeyMap: the cleaner's bounded map from a record key to the latest offset seen for it
// (Kafka's SkimpyOffsetMap). Keys are stored as 128-bit hashes, not bytes, so every entry
// is 24 bytes and the map's memory is fixed when it is made: slots = memory / 24, and it
// counts as full at `load_factor` of them (Kafka's log.cleaner.io.buffer.load.factor, 0.9),
// where linear probing still finds a free slot quickly. A log whose dirty keys do not fit
// is cleaned in several passes, one map-full each (log_cleaner.h).
//
// Two keys with the same 128-bit hash would be taken for one; with a strong mix that is as
// unlikely as Kafka's MD5 collision, and it is the same trade Kafka makes.
//
// Lifecycle: made once per cleaner thread, Clear()ed before each pass. One owner; not
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sluice::compaction {

class KeyMap {
 public:
  static constexpr size_t kEntryBytes = 24;

  // `memory_bytes` is what the slots take (at least two; one always stays free). load_factor in (0,
  // 1].
  explicit KeyMap(size_t memory_bytes, double load_factor = 0.9);
  ~KeyMap();
  KeyMap(const KeyMap&) = delete;
  KeyMap& operator=(const KeyMap&) = delete;

  // Records `offset` as the latest for `key` (offsets arrive in increasing order). Returns
  // false, changing nothing, when the key is new and the map is full.
  bool Put(std::span<const uint8_t> key, int64_t offset);
  // The latest offset put for `key`, or -1.
  int64_t Get(std::span<const uint8_t> key) const;
  // The same with the key's hash (HashKey), and a prefetch of its slot: a caller with many
  // keys hashes them all, prefetches, then looks up, hiding the memory latency.
  bool PutHashed(uint64_t h1, uint64_t h2, int64_t offset);
  int64_t GetHashed(uint64_t h1, uint64_t h2) const;
  void Prefetch(uint64_t h1) const { __builtin_prefetch(&entries_[Home(h1)]); }
  // Empties the map. With `expected_keys`, uses only the slots that many keys need at the
  // load factor (fewer pages touched, a smaller working set), never more than its memory.
  void Clear(size_t expected_keys = SIZE_MAX);

  size_t size() const { return size_; }
  size_t slots() const { return slots_; }
  size_t capacity() const { return max_entries_; }  // entries before it counts as full (now)
  bool full() const { return size_ >= max_entries_; }
  size_t memory_bytes() const { return slots_ * kEntryBytes; }  // the most it may use
  // The most it has used: the slots in use (as sized by Clear) when a key was put.
  size_t peak_bytes() const { return peak_used_ * kEntryBytes; }
  int64_t latest_offset() const { return latest_offset_; }  // -1 when empty

 private:
  struct Entry {
    uint64_t h1, h2;
    int64_t offset_plus_one;  // 0: free (fresh and cleared pages read as zeros)
  };
  size_t Find(uint64_t h1, uint64_t h2) const;  // the slot holding the hash, or the free one
  size_t Home(uint64_t h1) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(h1) * active_) >> 64);
  }

  const size_t slots_;
  const double load_factor_;
  size_t active_ = 0;  // slots in use since the last Clear (<= slots_)
  size_t max_entries_ = 0;
  // mmap'ed: pages cost memory only once touched; Clear() gives them back (madvise).
  Entry* entries_ = nullptr;
  size_t mapped_bytes_ = 0;
  size_t used_ = 0;  // slots that may be non-zero
  size_t peak_used_ = 0;
  size_t size_ = 0;
  int64_t latest_offset_ = -1;
};

// The 128-bit hash the map stores (exposed for tests).
void HashKey(std::span<const uint8_t> key, uint64_t* h1, uint64_t* h2);

}  // namespace sluice::compaction
