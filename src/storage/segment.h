// The pieces of a PartitionLog shared by its source files (log.cc: open, recovery, appends
// and I/O; log_read.cc: reads, lookups, truncation, retention, verification): segment
// names, index entry layouts, the batch scanner and the private structs of log.h.
// Private to src/storage.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "storage/batch_header.h"
#include "storage/log.h"

namespace sluice::storage {
namespace log_internal {

constexpr size_t kOffsetEntrySize = 8;     // relative offset (4), position (4), big-endian
constexpr size_t kTimeEntrySize = 12;      // timestamp (8), relative offset (4), big-endian
constexpr size_t kScanBlock = 1 << 20;     // bytes read at a time when scanning a segment
constexpr size_t kHeaderBlock = 64 << 10;  // bytes read at a time when walking headers
// Stored batches may have been appended under a larger message.max.bytes than today's;
// anything up to this is accepted when reading a segment back.
constexpr uint64_t kMaxBatchFloor = 64 << 20;
constexpr const char* kLogStartFile = "log-start-offset";
// How far past its writes the active segment's blocks are reserved (see ReserveAhead).
constexpr uint64_t kReserveAheadBytes = 8 << 20;

inline std::string SegmentName(int64_t base, std::string_view ext) {
  return fmt::format("{:020d}{}", base, ext);
}

// "00000000000000000123.log" -> 123 with ext ".log"; nullopt for any other name.
inline std::optional<int64_t> ParseSegmentName(std::string_view name, std::string_view ext) {
  if (name.size() != 20 + ext.size() || name.substr(20) != ext) return std::nullopt;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + 20, v);
  if (ec != std::errc() || p != name.data() + 20 || v < 0) return std::nullopt;
  return v;
}

inline void PutOffsetEntry(std::vector<uint8_t>& out, int32_t rel, uint32_t pos) {
  size_t at = out.size();
  out.resize(at + kOffsetEntrySize);
  StoreBE32(out.data() + at, static_cast<uint32_t>(rel));
  StoreBE32(out.data() + at + 4, pos);
}

inline void PutTimeEntry(std::vector<uint8_t>& out, int64_t ts, int32_t rel) {
  size_t at = out.size();
  out.resize(at + kTimeEntrySize);
  StoreBE64(out.data() + at, static_cast<uint64_t>(ts));
  StoreBE32(out.data() + at + 8, static_cast<uint32_t>(rel));
}

// Reads the varint-framed records of an uncompressed batch to find the first record
// with timestamp >= ts. Returns its offset, or nullopt when the records are malformed.
class VarintReader {
 public:
  VarintReader(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}
  bool ReadVarlong(int64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return false;
      uint8_t b = *p_++;
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) {
        *out = static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
        return true;
      }
    }
    return false;
  }
  bool Skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    p_ += n;
    return true;
  }
  const uint8_t* pos() const { return p_; }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

inline std::optional<TimestampLookup> FindInUncompressedBatch(std::span<const uint8_t> batch,
                                                              const BatchHeader& h, int64_t ts) {
  VarintReader r(batch.data() + kBatchHeaderSize, batch.data() + batch.size());
  for (int32_t i = 0; i < h.records_count; ++i) {
    int64_t len, ts_delta, off_delta;
    if (!r.ReadVarlong(&len) || len < 0 || static_cast<uint64_t>(len) > r.remaining())
      return std::nullopt;
    const uint8_t* rec_end = r.pos() + len;
    if (!r.Skip(1) || !r.ReadVarlong(&ts_delta) || !r.ReadVarlong(&off_delta)) return std::nullopt;
    int64_t rec_ts = h.base_timestamp + ts_delta;
    if (rec_ts >= ts) return TimestampLookup{h.base_offset + off_delta, rec_ts, true};
    if (rec_end < r.pos() || !r.Skip(static_cast<size_t>(rec_end - r.pos()))) return std::nullopt;
  }
  return std::nullopt;
}

// Walks the batches of [pos, end) of a segment file, reading in large blocks.
class SegmentScanner {
 public:
  // Batches longer than `max_batch` are treated as corrupt: a damaged length field must
  // not make a scan allocate the rest of a segment.
  SegmentScanner(File& file, uint64_t pos, uint64_t end, uint64_t max_batch = kMaxBatchFloor)
      : file_(file), pos_(pos), end_(end), max_batch_(max_batch) {}

  // The next whole batch, or nullopt at the end. `problem` is set (and nullopt returned)
  // when the bytes at pos() are not a valid batch; check_crc adds the CRC check.
  Result<std::optional<std::span<const uint8_t>>> Next(bool check_crc, std::string* problem) {
    if (pos_ >= end_) return std::optional<std::span<const uint8_t>>();
    uint64_t left = end_ - pos_;
    if (left < kBatchHeaderSize) {
      *problem = fmt::format("{} trailing bytes are shorter than a batch header", left);
      return std::optional<std::span<const uint8_t>>();
    }
    RETURN_IF_ERROR(Fill(kBatchHeaderSize));
    BatchHeader h = ParseBatchHeader(Avail());
    uint64_t max_len = std::min<uint64_t>(left, max_batch_);
    if (Status st = CheckStoredHeader(h, static_cast<uint32_t>(max_len)); !st.ok()) {
      *problem = st.message();
      if (h.length >= 0 && h.total_size() > left && h.magic == 2) {
        *problem = fmt::format("batch of {} bytes runs past the end ({} bytes left)",
                               h.total_size(), left);
      }
      return std::optional<std::span<const uint8_t>>();
    }
    RETURN_IF_ERROR(Fill(h.total_size()));
    std::span<const uint8_t> batch = Avail().first(h.total_size());
    if (check_crc && !CrcMatches(batch)) {
      *problem = fmt::format("batch CRC {:#010x} does not match its bytes", h.crc);
      return std::optional<std::span<const uint8_t>>();
    }
    header_ = h;
    batch_pos_ = pos_;
    pos_ += h.total_size();
    buf_start_ += h.total_size();
    return std::optional<std::span<const uint8_t>>(batch);
  }

  uint64_t pos() const { return pos_; }  // after the last batch returned
  uint64_t batch_pos() const { return batch_pos_; }
  const BatchHeader& header() const { return header_; }

 private:
  std::span<const uint8_t> Avail() const {
    return std::span<const uint8_t>(buf_.data() + buf_start_, buf_len_ - buf_start_);
  }
  // Makes at least `n` bytes from pos_ available in the buffer.
  Status Fill(uint64_t n) {
    if (buf_len_ - buf_start_ >= n) return Status::OK();
    size_t want =
        static_cast<size_t>(std::max<uint64_t>(n, std::min<uint64_t>(kScanBlock, end_ - pos_)));
    if (buf_.size() < want) buf_.resize(want);
    ASSIGN_OR_RETURN(size_t got, file_.ReadAt(pos_, std::span<uint8_t>(buf_.data(), want)));
    buf_start_ = 0;
    buf_len_ = got;
    if (got < n) {
      return CorruptionError("{}: file ended at byte {} while reading a batch", file_.path(),
                             pos_ + got);
    }
    return Status::OK();
  }

  File& file_;
  uint64_t pos_, end_;
  uint64_t max_batch_;
  std::vector<uint8_t> buf_;
  size_t buf_start_ = 0, buf_len_ = 0;
  BatchHeader header_{};
  uint64_t batch_pos_ = 0;
};

}  // namespace log_internal

// One segment: <base>.log, <base>.index, <base>.timeindex. Paths and base_offset never
// change; the rest is guarded by the log's mu_.
struct PartitionLog::Segment {
  int64_t base_offset = 0;
  std::string log_path, index_path, time_index_path;
  std::string txn_index_path;  // <base>.txnindex (storage/log_txn.cc)

  uint64_t size = 0;               // bytes appended, including those not yet written
  uint64_t written_size = 0;       // bytes in the file: readers stop here
  int64_t next_offset = 0;         // offset after the last batch appended
  int64_t max_timestamp = -1;      // over the batches appended
  int64_t created_ms = 0;          // when created or opened: segment.ms without timestamps
  int64_t first_batch_ts = -1;     // max timestamp of the first batch: segment.ms, as Kafka
  uint64_t bytes_since_index = 0;  // appended since the last offset-index entry
  int64_t last_indexed_ts = -1;    // newest timestamp in the time index
  uint64_t index_entries = 0;      // in the offset index, including pending ones
  uint64_t time_entries = 0;
  uint64_t written_index_entries = 0;  // in the offset-index file: readers search these
  uint64_t written_time_entries = 0;
  uint64_t txn_entries = 0;  // in the .txnindex, including pending ones
  uint64_t written_txn_entries = 0;
  bool closed_durable = false;  // rolled, and its files were synced
  // Blocks of the .log reserved up to here (ReserveAhead). Only the write job and
  // TruncateTo (which waits for it) touch it.
  uint64_t reserved_end = 0;
  // Direct writes (SetDirectWrites) pad the .log with zeros to a whole block: its size
  // on disk reaches here, past written_size, until the segment is closed or the log is.
  // Only the write job, TruncateTo and Close (which wait for it) touch it.
  uint64_t padded_end = 0;
};

// The write job's state for direct writes (SetDirectWrites).
struct PartitionLog::DirectWriter {
  std::shared_ptr<Segment> seg;  // the segment the tail belongs to
  // The O_DIRECT descriptor, alive while the log's written_file_ holds it (until a sync
  // covered it): an idle log keeps no descriptor open.
  std::weak_ptr<File> file;
  // seg's .log bytes [tail_pos, tail_pos + tail.size()): the partial block at its end,
  // written again, whole, with the next batch. tail_pos is a block boundary.
  uint64_t tail_pos = 0;
  std::vector<uint8_t> tail;
  bool tail_valid = false;
};

// Bytes for one segment, appended together and written by one job.
struct PartitionLog::Chunk {
  std::shared_ptr<Segment> seg;
  uint64_t file_pos = 0;
  std::vector<uint8_t> bytes;
  uint64_t index_pos = 0;
  std::vector<uint8_t> index_bytes;
  uint64_t time_index_pos = 0;
  std::vector<uint8_t> time_index_bytes;
  uint64_t txn_index_pos = 0;  // written and synced before `bytes`
  std::vector<uint8_t> txn_index_bytes;
  int64_t end_offset = 0;       // offset after the chunk's last batch
  bool opens_segment = false;   // create the files and sync the directory first
  bool closes_segment = false;  // sync the segment's files after writing
};

struct PartitionLog::Waiter {
  int64_t last_offset;
  AppendInfo info;
  AppendCallback cb;
};

}  // namespace sluice::storage
