// Reads of a closed segment's files. See segment_file.h.
#include "storage/segment_file.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "storage/segment.h"

namespace sluice::storage {

using namespace log_internal;  // NOLINT(google-build-using-namespace)

namespace {

// The index entry i: (relative offset, position).
Result<std::pair<int64_t, uint64_t>> IndexEntry(File& index, uint64_t i) {
  uint8_t e[kOffsetEntrySize];
  ASSIGN_OR_RETURN(size_t n, index.ReadAt(i * kOffsetEntrySize, e));
  if (n != kOffsetEntrySize) {
    return CorruptionError("{}: entry {} is past the end of the file", index.path(), i);
  }
  return std::make_pair(int64_t{static_cast<int32_t>(LoadBE32(e))}, uint64_t{LoadBE32(e + 4)});
}

// The last indexed position at or below `at` (0 when none).
Result<uint64_t> IndexedAtOrBelow(const SegmentFile& seg, uint64_t at) {
  if (seg.index == nullptr) return uint64_t{0};
  ASSIGN_OR_RETURN(uint64_t bytes, seg.index->Size());
  uint64_t lo = 0, hi = bytes / kOffsetEntrySize, pos = 0;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(auto entry, IndexEntry(*seg.index, mid));
    if (entry.second <= at) {
      pos = entry.second;
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return pos;
}

// The first indexed position above `at`, if any.
Result<std::optional<uint64_t>> IndexedAbove(const SegmentFile& seg, uint64_t at) {
  ASSIGN_OR_RETURN(uint64_t bytes, seg.index->Size());
  uint64_t lo = 0, hi = bytes / kOffsetEntrySize;
  std::optional<uint64_t> found;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(auto entry, IndexEntry(*seg.index, mid));
    if (entry.second > at) {
      found = entry.second;
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return found;
}

}  // namespace

// By binary search over the entries read one at a time (a copy's index is in the page
// cache).
Result<uint64_t> IndexPosition(const SegmentFile& seg, int64_t offset) {
  if (seg.index == nullptr) return uint64_t{0};
  ASSIGN_OR_RETURN(uint64_t bytes, seg.index->Size());
  uint64_t lo = 0, hi = bytes / kOffsetEntrySize;  // entries [0, lo) fit; [hi, end) do not
  uint64_t pos = 0;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(auto entry, IndexEntry(*seg.index, mid));
    if (seg.base_offset + entry.first <= offset) {
      pos = entry.second;
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

Result<int64_t> TimeIndexStart(const SegmentFile& seg, int64_t timestamp) {
  if (seg.time_index == nullptr) return seg.base_offset;
  ASSIGN_OR_RETURN(uint64_t bytes, seg.time_index->Size());
  uint64_t lo = 0, hi = bytes / kTimeEntrySize;  // entries [0, lo) are older; [hi, end) not
  int64_t rel = 0;
  uint8_t e[kTimeEntrySize];
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(size_t n, seg.time_index->ReadAt(mid * kTimeEntrySize, e));
    if (n != kTimeEntrySize) {
      return CorruptionError("{}: entry {} is past the end of the file", seg.time_index->path(),
                             mid);
    }
    if (static_cast<int64_t>(LoadBE64(e)) < timestamp) {
      rel = std::max<int64_t>(0, static_cast<int32_t>(LoadBE32(e + 8)));
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return seg.base_offset + rel;
}

Result<std::pair<uint64_t, uint64_t>> SegmentChunkAt(const SegmentFile& seg, uint64_t pos,
                                                     uint64_t chunk_bytes) {
  if (pos >= seg.size) return OutOfRangeError("byte {} is past the segment ({})", pos, seg.size);
  if (seg.index == nullptr || chunk_bytes == 0) return std::make_pair(uint64_t{0}, seg.size);
  // Boundary k: 0, the last indexed position at or below k * chunk_bytes, the size from
  // the first multiple at or past it on (counted without overflowing).
  const uint64_t past = seg.size / chunk_bytes + (seg.size % chunk_bytes != 0 ? 1 : 0);
  auto boundary = [&](uint64_t k) -> Result<uint64_t> {
    if (k == 0) return uint64_t{0};
    if (k >= past) return seg.size;
    return IndexedAtOrBelow(seg, k * chunk_bytes);
  };
  // The chunk ends at the first boundary past `pos`: the one whose multiple reaches the
  // first indexed position past it (none: the segment's end), in closed form, so a
  // corrupt index or size costs a few searches, never a walk over every multiple.
  ASSIGN_OR_RETURN(std::optional<uint64_t> above, IndexedAbove(seg, pos));
  uint64_t k = past;
  if (above.has_value() && *above < seg.size) {
    k = *above / chunk_bytes + (*above % chunk_bytes != 0 ? 1 : 0);
  }
  ASSIGN_OR_RETURN(uint64_t end, boundary(k));
  ASSIGN_OR_RETURN(uint64_t from, boundary(k - 1));
  if (end <= pos || from > pos) {
    // Only an index whose positions do not increase gets here: one chunk of everything.
    return std::make_pair(uint64_t{0}, seg.size);
  }
  return std::make_pair(from, end);
}

namespace {

// The batch header at byte `p` of the segment's .log, checked.
Result<BatchHeader> HeaderAt(const SegmentFile& seg, uint64_t p) {
  const uint64_t stop = seg.stop();
  if (p < seg.from || stop - p < kBatchHeaderSize) {
    return CorruptionError("{} at byte {}: {} bytes left, less than a batch header",
                           seg.log->path(), p, p < seg.from ? 0 : stop - p);
  }
  uint8_t raw[kBatchHeaderSize];
  ASSIGN_OR_RETURN(size_t n, seg.log->ReadAt(p - seg.from, raw));
  if (n != kBatchHeaderSize) {
    return CorruptionError("{} at byte {}: the file is shorter than {}", seg.log->path(),
                           p - seg.from, stop - seg.from);
  }
  BatchHeader h = ParseBatchHeader(raw);
  Status st =
      CheckStoredHeader(h, static_cast<uint32_t>(std::min<uint64_t>(stop - p, kMaxBatchFloor)));
  if (!st.ok()) return CorruptionError("{} at byte {}: {}", seg.log->path(), p, st.message());
  return h;
}

// Where a walk to `offset` starts in `seg`'s chunk: InvalidArgument when the offset's
// batch is before it (the chunk asked for is the wrong one).
Result<uint64_t> ChunkStart(const SegmentFile& seg, int64_t offset) {
  ASSIGN_OR_RETURN(uint64_t pos, IndexPosition(seg, offset));
  if (pos < seg.from) {
    return InvalidArgumentError("offset {} is before the chunk [{}, {}) of {}", offset, seg.from,
                                seg.stop(), seg.log->path());
  }
  return pos;
}

}  // namespace

Status ForEachSegmentFileBatch(const SegmentFile& seg, int64_t offset,
                               const std::function<bool(const BatchHeader&, uint64_t)>& fn) {
  ASSIGN_OR_RETURN(uint64_t pos, IndexPosition(seg, offset));
  pos = std::max(pos, seg.from);  // a chunk past the offset's: all of it
  while (pos < seg.stop()) {
    ASSIGN_OR_RETURN(BatchHeader h, HeaderAt(seg, pos));
    if (h.next_offset() > offset && !fn(h, pos)) break;
    pos += h.total_size();
  }
  return Status::OK();
}

Result<ReadResult> ReadSegmentFile(const SegmentFile& seg, int64_t offset, uint64_t max_bytes,
                                   int64_t limit, EmptyBatches empty) {
  ASSIGN_OR_RETURN(uint64_t pos, ChunkStart(seg, offset));
  auto header_at = [&](uint64_t p) { return HeaderAt(seg, p); };
  const uint64_t stop = seg.stop();
  // To the batch holding `offset` (an index entry is at most index.interval.bytes before).
  BatchHeader first{};
  for (;;) {
    if (pos >= stop) {
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
    for (uint64_t p = pos + first.total_size(); p < stop;) {
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
  while (end < stop) {
    ASSIGN_OR_RETURN(BatchHeader h, header_at(end));
    if (h.base_offset >= limit || end - pos + h.total_size() > max_bytes) break;
    r.holds_records |= h.records_count > 0;
    r.next_offset = h.next_offset();
    end += h.total_size();
  }
  r.slice = FileSlice{seg.log, pos - seg.from, end - pos};
  return r;
}

}  // namespace sluice::storage
