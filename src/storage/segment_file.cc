// Reads of a closed segment's files. See segment_file.h.
#include "storage/segment_file.h"

#include <algorithm>
#include <vector>

#include "storage/segment.h"

namespace sluice::storage {

using namespace log_internal;  // NOLINT(google-build-using-namespace)

namespace {

// The position of the last index entry whose offset is <= `offset` (0 when none), by
// binary search over the entries read one at a time (a copy's index is in the page cache).
Result<uint64_t> IndexPosition(const SegmentFile& seg, int64_t offset) {
  if (seg.index == nullptr) return uint64_t{0};
  ASSIGN_OR_RETURN(uint64_t bytes, seg.index->Size());
  uint64_t lo = 0, hi = bytes / kOffsetEntrySize;  // entries [0, lo) fit; [hi, end) do not
  uint64_t pos = 0;
  uint8_t e[kOffsetEntrySize];
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(size_t n, seg.index->ReadAt(mid * kOffsetEntrySize, e));
    if (n != kOffsetEntrySize) {
      return CorruptionError("{}: entry {} is past the end of the file", seg.index->path(), mid);
    }
    const int64_t rel = static_cast<int32_t>(LoadBE32(e));
    if (seg.base_offset + rel <= offset) {
      pos = LoadBE32(e + 4);
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (pos >= seg.size) {
    return CorruptionError("{}: an entry points at byte {}, past the end ({})", seg.index->path(),
                           pos, seg.size);
  }
  return pos;
}

// The batch header at byte `p` of the segment's .log, checked.
Result<BatchHeader> HeaderAt(const SegmentFile& seg, uint64_t p) {
  if (seg.size - p < kBatchHeaderSize) {
    return CorruptionError("{} at byte {}: {} bytes left, less than a batch header",
                           seg.log->path(), p, seg.size - p);
  }
  uint8_t raw[kBatchHeaderSize];
  ASSIGN_OR_RETURN(size_t n, seg.log->ReadAt(p, raw));
  if (n != kBatchHeaderSize) {
    return CorruptionError("{} at byte {}: the file is shorter than {}", seg.log->path(), p,
                           seg.size);
  }
  BatchHeader h = ParseBatchHeader(raw);
  Status st =
      CheckStoredHeader(h, static_cast<uint32_t>(std::min<uint64_t>(seg.size - p, kMaxBatchFloor)));
  if (!st.ok()) return CorruptionError("{} at byte {}: {}", seg.log->path(), p, st.message());
  return h;
}

}  // namespace

Status ForEachSegmentFileBatch(const SegmentFile& seg, int64_t offset,
                               const std::function<bool(const BatchHeader&, uint64_t)>& fn) {
  ASSIGN_OR_RETURN(uint64_t pos, IndexPosition(seg, offset));
  while (pos < seg.size) {
    ASSIGN_OR_RETURN(BatchHeader h, HeaderAt(seg, pos));
    if (h.next_offset() > offset && !fn(h, pos)) break;
    pos += h.total_size();
  }
  return Status::OK();
}

Result<ReadResult> ReadSegmentFile(const SegmentFile& seg, int64_t offset, uint64_t max_bytes,
                                   int64_t limit, EmptyBatches empty) {
  ASSIGN_OR_RETURN(uint64_t pos, IndexPosition(seg, offset));
  auto header_at = [&](uint64_t p) { return HeaderAt(seg, p); };
  // To the batch holding `offset` (an index entry is at most index.interval.bytes before).
  BatchHeader first{};
  for (;;) {
    if (pos >= seg.size) {
      return OutOfRangeError("offset {} is past the batches of {}", offset, seg.log->path());
    }
    ASSIGN_OR_RETURN(first, header_at(pos));
    if (first.next_offset() > offset) break;
    pos += first.total_size();
  }
  if (first.base_offset >= limit) {
    ReadResult r;
    r.first_offset = r.next_offset = std::max(offset, first.base_offset);
    return r;
  }
  if (empty == EmptyBatches::kSkip && first.records_count == 0) {
    // Past the record-less batches to the first with records; with none, the run itself.
    for (uint64_t p = pos + first.total_size(); p < seg.size;) {
      ASSIGN_OR_RETURN(BatchHeader h, header_at(p));
      if (h.base_offset >= limit) break;
      if (h.records_count > 0) {
        pos = p;
        first = h;
        break;
      }
      p += h.total_size();
    }
  }
  ReadResult r;
  r.first_offset = first.base_offset;
  r.next_offset = first.next_offset();
  r.holds_records = first.records_count > 0;
  uint64_t end = pos + first.total_size();
  while (end < seg.size) {
    ASSIGN_OR_RETURN(BatchHeader h, header_at(end));
    if (h.base_offset >= limit || end - pos + h.total_size() > max_bytes) break;
    r.holds_records |= h.records_count > 0;
    r.next_offset = h.next_offset();
    end += h.total_size();
  }
  r.slice = FileSlice{seg.log, pos, end - pos};
  return r;
}

}  // namespace sluice::storage
