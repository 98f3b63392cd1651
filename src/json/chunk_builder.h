// The rows being built (internal to src/json): ChunkBuilder (a DataChunk bound to a Slot
// plan, with per-row rollback) and ChunkPool (a batch's finished chunks, kept in memory and
// reused batch after batch, for the decoders' in_memory mode).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "duck/data_chunk.h"
#include "json/slot.h"

namespace sluice::json {

// The rows being built: a DataChunk whose first columns are `slots` (the JSON columns),
// bound to the chunk, with the list sizes to roll back a row that failed half-way.
class ChunkBuilder {
 public:
  ChunkBuilder(duck::DataChunk chunk, std::vector<Slot> slots);

  std::vector<Slot>& slots() { return slots_; }
  const std::vector<std::pair<std::string, uint32_t>>& sorted() const { return sorted_; }
  duck::DataChunk& chunk() { return chunk_; }
  uint64_t rows() const { return rows_; }
  bool full() const { return rows_ == duck::DataChunk::Capacity(); }

  // Before a row: remember where each list's children end.
  void MarkRow() {
    for (size_t i = 0; i < lists_.size(); ++i) list_marks_[i] = lists_[i]->list_size;
  }
  // After a failed row: forget its list children.
  void RollbackRow() {
    for (size_t i = 0; i < lists_.size(); ++i) lists_[i]->list_size = list_marks_[i];
  }
  void CommitRow() { ++rows_; }

  // Sets the sizes DuckDB reads, for Appender::Append.
  Status Finish();

  void Reset() {
    chunk_.Reset();
    rows_ = 0;
    Bind();
  }

  // Hands out the chunk built so far (Finish first) and goes on with `empty` (a chunk of
  // the same types, fresh or Reset).
  duck::DataChunk Swap(duck::DataChunk empty);

 private:
  void CollectLists(Slot& s);
  // Points the slots at the chunk's vectors, lists emptied.
  void Bind();

  duck::DataChunk chunk_;
  std::vector<Slot> slots_;
  std::vector<std::pair<std::string, uint32_t>> sorted_;
  std::vector<Slot*> lists_;  // every LIST slot, at any depth
  std::vector<uint64_t> list_marks_;
  uint64_t rows_ = 0;
};

// A batch decoded in parts (the decoders' `threads` option): as many parts as `helpers` + 1
// allow, each of at least kMinMessagesPerPart messages (below that a hand-off to another
// thread costs more than it saves).
constexpr size_t kMinMessagesPerPart = 512;
inline size_t PartsFor(size_t messages, size_t helpers) {
  return std::clamp<size_t>(messages / kMinMessagesPerPart, 1, helpers + 1);
}

// The decoded chunks of the batch being served from memory (a ChunkView reads them), and
// spare chunks to reuse for the next batch.
class ChunkPool {
 public:
  explicit ChunkPool(std::vector<duck::LogicalType> types) : types_(std::move(types)) {}
  // A pool of copies of `types`.
  static std::unique_ptr<ChunkPool> Of(const std::vector<duck::LogicalType>& types) {
    std::vector<duck::LogicalType> copies;
    for (const duck::LogicalType& t : types) copies.push_back(t.Copy());
    return std::make_unique<ChunkPool>(std::move(copies));
  }

  // The previous batch is no longer read: its chunks become spares.
  void Recycle();

  // Moves the builder's finished chunk into the batch and gives the builder an empty one.
  Status Hold(ChunkBuilder& b);

  // After a batch: spares past a few are freed (a big batch does not pin its memory).
  void Trim() {
    while (spare_.size() > kKeepSpareChunks) spare_.pop_back();
  }

  std::vector<const duck::DataChunk*> batch() const;

 private:
  static constexpr size_t kKeepSpareChunks = 4;
  std::vector<duck::LogicalType> types_;
  std::vector<duck::DataChunk> held_;
  std::vector<duck::DataChunk> spare_;
};

}  // namespace sluice::json
