// Reads of a closed segment's files outside any PartitionLog: the local copy of a segment
// in tiered storage (docs/design/0025-tiered-storage.md, decision 7), whose .log and
// .index are whole and never change.
//
//   ASSIGN_OR_RETURN(ReadResult r, ReadSegmentFile({log, size, index, base}, offset, 1 << 20));
//   // r.slice is whole batches of `log` from the one holding `offset`
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>

#include "base/status.h"
#include "storage/env.h"
#include "storage/log.h"

namespace sluice::storage {

struct SegmentFile {
  std::shared_ptr<File> log;         // <base>.log, or the chunk of it [from, end)
  uint64_t size = 0;                 // its bytes (batches past them are not read)
  std::shared_ptr<File> index;       // <base>.index; null: none (the batches are walked)
  std::shared_ptr<File> time_index;  // <base>.timeindex; null: none (TimeIndexStart)
  int64_t base_offset = 0;
  // A chunk of the segment (a remote segment read piecewise, docs/design/0025, decision
  // 10): `log` holds its bytes [from, end), both batch boundaries; end 0: to `size`.
  // Reads stop at `end`; an offset whose batch is before `from` is refused.
  uint64_t from = 0, end = 0;
  uint64_t stop() const { return end == 0 ? size : end; }
};

// The segment's chunks: bytes [from, end) split at batch boundaries that the index
// names, one near every `chunk_bytes` (the last indexed position at or below each multiple
// of it), so a chunk has about chunk_bytes (more when a batch is larger, fewer at index
// gaps) and every reader splits a segment alike. The chunk holding byte `pos` (a batch
// start: 0, or a position IndexPosition can answer). Without an index: the whole segment.
Result<std::pair<uint64_t, uint64_t>> SegmentChunkAt(const SegmentFile& seg, uint64_t pos,
                                                     uint64_t chunk_bytes);
// The position of the last index entry at or below `offset` (0 when none): where a walk
// to the batch holding `offset` starts.
Result<uint64_t> IndexPosition(const SegmentFile& seg, int64_t offset);
// Where a walk for the first batch whose max timestamp reaches `timestamp` can start: the
// offset of the time index's last entry dated before it (every batch before that offset
// is older, as PartitionLog::FindOffsetByTimestamp reads it), or the base offset without
// a time index or such an entry. Corruption for a torn entry.
Result<int64_t> TimeIndexStart(const SegmentFile& seg, int64_t timestamp);

// Whole batches from the one holding `offset` (or, in a gap, the next one), at least one
// and then as many as fit in max_bytes, none at or past `limit`. With EmptyBatches::kSkip
// record-less batches before the first batch with records are passed over within the
// segment (all of them record-less: the slice is that run, as PartitionLog::Read).
// OutOfRange when `offset` is past the segment's batches; Corruption, naming the file and
// byte, when a header or an index entry does not hold together.
Result<ReadResult> ReadSegmentFile(const SegmentFile& seg, int64_t offset, uint64_t max_bytes,
                                   int64_t limit = INT64_MAX,
                                   EmptyBatches empty = EmptyBatches::kKeep);

// Calls `fn(header, position)` for each batch from the one holding `offset` (found through
// the index; in a chunk that begins past it, from the chunk's first) to the end of the
// segment (or chunk), or until `fn` returns false. The errors of
// ReadSegmentFile; OK with no call when `offset` is past the batches.
Status ForEachSegmentFileBatch(const SegmentFile& seg, int64_t offset,
                               const std::function<bool(const BatchHeader&, uint64_t)>& fn);

}  // namespace sluice::storage
