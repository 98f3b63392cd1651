// The storage side of log compaction: the closed segments a cleaner may read, the
// cleaned segment it writes (CleanedSegment), and the crash-safe swap that puts cleaned
// segments in place of the old ones (PartitionLog::ReplaceSegments, in log_swap.cc).
// The file states and their recovery are in docs/formats/storage.md ("Cleaned segments
// and the swap"); the cleaner itself is src/compaction.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/env.h"
#include "storage/file_cache.h"
#include "storage/log.h"

namespace sluice::storage {

// One closed segment of a log, as ClosedSegments() saw it.
struct SegmentSummary {
  int64_t base_offset = 0;
  int64_t next_offset = 0;  // after its last batch (== base_offset when it holds none)
  uint64_t size = 0;
  int64_t max_timestamp = -1;   // over its batches; -1 when none has one
  int64_t first_batch_ts = -1;  // max timestamp of its first batch
};

// A segment being written by a cleaner: <base>.log.cleaned with its offset and time
// indexes (<base>.index.cleaned, <base>.timeindex.cleaned) built as batches arrive.
// Lifecycle: PartitionLog::BeginCleaned, Append batches in offset order, then hand it to
// PartitionLog::ReplaceSegments (which consumes it); destroyed without that, it removes
// its files. One owner (the cleaner thread); not thread-safe.
class CleanedSegment {
 public:
  ~CleanedSegment();
  CleanedSegment(const CleanedSegment&) = delete;
  CleanedSegment& operator=(const CleanedSegment&) = delete;

  // Appends one whole v2 batch whose base offset is at least next_offset(). The bytes are
  // buffered and written in large blocks.
  Status Append(std::span<const uint8_t> batch);

  int64_t base_offset() const { return base_; }
  int64_t next_offset() const { return next_offset_; }  // base_offset() when empty
  uint64_t size() const { return size_; }
  uint64_t batches() const { return batches_; }

 private:
  friend class PartitionLog;
  CleanedSegment(Env* env, std::string dir, int64_t base, uint32_t index_interval_bytes);
  Status Open();
  Status FlushBuffer();
  // Writes what is buffered and the index files, and fdatasyncs every file.
  Status Finish();
  void RemoveFiles();

  Env* const env_;
  const std::string dir_;
  const int64_t base_;
  const uint32_t index_interval_bytes_;
  std::unique_ptr<File> log_;
  std::vector<uint8_t> buffer_;  // bytes past written_
  uint64_t written_ = 0;
  uint64_t size_ = 0;
  int64_t next_offset_;
  uint64_t batches_ = 0;
  uint64_t since_index_ = 0;
  int64_t max_timestamp_ = -1;
  int64_t last_indexed_ts_ = -1;
  std::vector<uint8_t> index_, time_index_;
  std::vector<uint8_t> txn_index_;  // the old segments' aborted-transaction entries
  bool swapped_ = false;
};

// The extensions of a segment's files that a swap moves (a segment may lack .txnindex).
inline constexpr const char* kSegmentFileExts[] = {".log", ".index", ".timeindex", ".txnindex"};

}  // namespace sluice::storage
