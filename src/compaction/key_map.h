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

#include <cstdint>
#include <memory>
#include <span>

namespace sluice::compaction {

class KeyMap {
 public:
  static constexpr size_t kEntryBytes = 24;

  // `memory_bytes` is what the slots take (at least two; one always stays free). load_factor in (0,
  // 1].
  explicit KeyMap(size_t memory_bytes, double load_factor = 0.9);
  KeyMap(const KeyMap&) = delete;
  KeyMap& operator=(const KeyMap&) = delete;

  // Records `offset` as the latest for `key` (offsets arrive in increasing order). Returns
  // false, changing nothing, when the key is new and the map is full.
  bool Put(std::span<const uint8_t> key, int64_t offset);
  // The latest offset put for `key`, or -1.
  int64_t Get(std::span<const uint8_t> key) const;
  void Clear();

  size_t size() const { return size_; }
  size_t slots() const { return slots_; }
  size_t capacity() const { return max_entries_; }  // entries before it counts as full
  bool full() const { return size_ >= max_entries_; }
  size_t memory_bytes() const { return slots_ * kEntryBytes; }
  int64_t latest_offset() const { return latest_offset_; }  // -1 when empty

 private:
  struct Entry {
    uint64_t h1, h2;
    int64_t offset;  // -1: free
  };
  size_t Find(uint64_t h1, uint64_t h2) const;  // the slot holding the hash, or the free one

  size_t slots_;
  size_t max_entries_;
  std::unique_ptr<Entry[]> entries_;
  size_t size_ = 0;
  int64_t latest_offset_ = -1;
};

// The 128-bit hash the map stores (exposed for tests).
void HashKey(std::span<const uint8_t> key, uint64_t* h1, uint64_t* h2);

}  // namespace sluice::compaction
