// The inside of a Kafka record batch (format v2): the four compression codecs, a decoder
// for the records, the checks Kafka's LogValidator makes on produce, and a batch builder.
//
// The broker stores produced batches verbatim; it decompresses only to validate (and to
// answer a time lookup inside a compressed batch). The batch header itself (layout, CRC,
// offset assignment) belongs to storage/batch_header.h; this file starts where it stops.
//
// A record, as it sits in the (decompressed) records section, varint = zigzag varint:
//
//   length          varint   bytes of the rest of the record
//   attributes      int8     unused by Kafka so far
//   timestamp delta varlong  from the batch's base timestamp
//   offset delta    varint   from the batch's base offset: 0, 1, 2, ...
//   key length      varint   -1 = null
//   key             bytes
//   value length    varint   -1 = null
//   value           bytes
//   header count    varint
//   headers         header count times: key length (varint, >= 0), key (UTF-8),
//                   value length (varint, -1 = null), value
//
// Errors. Every function returns a Status whose message names the record (its index) and
// the byte where the problem is. The status code says how the broker answers a produce
// request (RecordsErrorCode below does the mapping):
//   kCorruption         CORRUPT_MESSAGE: the batch CRC does not match (clients retry)
//   kInvalidArgument    INVALID_RECORD: records that do not decode or break a rule
//   kUnimplemented      UNSUPPORTED_COMPRESSION_TYPE: codec 5-7, or zstd before Produce v7
//   kOutOfRange         INVALID_TIMESTAMP
//   kResourceExhausted  MESSAGE_TOO_LARGE: the batch, or what it decompresses to, is
//                       larger than allowed (a Java producer then splits the batch)
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "storage/batch_header.h"

namespace sluice::kafka {

// Batch attribute bits that storage/batch_header.h does not name.
inline constexpr uint16_t kAttrTransactional = storage::kAttrTransactional;
inline constexpr uint16_t kAttrControl = storage::kAttrControl;

// ---------------------------------------------------------------------------------------
// Compression

// Attributes bits 0-2. Values 5-7 are not codecs (CompressionFromAttributes rejects them).
enum class Compression : uint8_t { kNone = 0, kGzip = 1, kSnappy = 2, kLz4 = 3, kZstd = 4 };

std::string_view CompressionName(Compression codec);  // "none", "gzip", ...

// The codec of a batch's attributes; Unimplemented for 5, 6, 7.
Result<Compression> CompressionFromAttributes(int16_t attributes);

// Each codec's own default: gzip 6, lz4 fast (0), zstd 3. Snappy has no levels.
inline constexpr int kDefaultCompressionLevel = std::numeric_limits<int>::min();

// Decompresses `data`, which is in the framing Kafka clients write:
//   gzip    gzip members (RFC 1952); several members in a row are concatenated.
//   snappy  the xerial (snappy-java) framing: "\x82SNAPPY\0", version, compatible
//           version, then blocks of (int32 big-endian length, raw snappy); or plain raw
//           snappy, which librdkafka may write. Told apart by the magic.
//   lz4     LZ4 frames; like Kafka's Java reader, only frames with independent blocks.
//   zstd    zstd frames, with or without the content size.
//   none    a copy.
// Output larger than `max_output` is ResourceExhausted, found while holding at most
// max_output + 1 bytes of output; the decoders' own state adds at most an lz4 block
// buffer (4 MiB) or a zstd window (8 MiB, or max_output rounded up to a power of two when
// larger, at most 128 MiB; a frame asking for more is ResourceExhausted too). Bytes that
// do not decompress, a stream that ends early and bytes after the last frame are
// Corruption.
Result<std::vector<uint8_t>> Decompress(Compression codec, std::span<const uint8_t> data,
                                        size_t max_output);

// Compresses in the framing above (snappy: xerial, 32 KiB blocks; lz4: independent
// 64 KiB blocks, as Kafka's Java producer writes). Levels: gzip 0-9, lz4 0-17 (above 12
// liblz4 uses 12), zstd ZSTD_minCLevel()-ZSTD_maxCLevel(); snappy ignores the level.
// InvalidArgument for a level out of range.
Result<std::vector<uint8_t>> Compress(Compression codec, std::span<const uint8_t> data,
                                      int level = kDefaultCompressionLevel);

// ---------------------------------------------------------------------------------------
// Records

struct RecordHeader {
  std::string_view key;
  std::optional<std::span<const uint8_t>> value;  // nullopt = null
};

// One decoded record. The views point into the batch or into the RecordReader's buffer.
struct Record {
  int8_t attributes = 0;
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  std::optional<std::span<const uint8_t>> key;    // nullopt = null
  std::optional<std::span<const uint8_t>> value;  // nullopt = null
  std::vector<RecordHeader> headers;
};

// The record's timestamp as a consumer sees it: base timestamp + delta, or for a
// LogAppendTime batch the batch's max timestamp (what Kafka's DefaultRecordBatch does).
int64_t RecordTimestamp(const storage::BatchHeader& header, const Record& record);

// Decodes the records of one v2 batch, in order, checking every varint and length
// against the bytes that hold it. The records section must hold exactly the number of
// records the header declares, with no byte left over.
//
// Lifecycle: Open, then Next until it returns false, then status(). The Record views
// stay valid until the next Open or the reader's end. Not thread-safe; one owner.
class RecordReader {
 public:
  RecordReader() = default;
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // Checks the framing (header size, length field = bytes given, magic 2; storage's
  // CheckStoredHeader) and the codec, and decompresses the records into a buffer the
  // reader owns, at most `max_decompressed` bytes. Does not check the CRC (ValidateRecords
  // does). `batch` must stay live while the reader is in use.
  Status Open(std::span<const uint8_t> batch, size_t max_decompressed);

  // Decodes the next record into `*record` (whose header vector is reused). Returns false
  // at the end and on the first error; status() says which.
  bool Next(Record* record);

  const Status& status() const { return status_; }
  const storage::BatchHeader& header() const { return header_; }
  Compression compression() const { return compression_; }
  int32_t records_read() const { return index_; }
  // Size of the records section after decompression.
  size_t records_size() const { return records_.size(); }

 private:
  bool Fail(Status status);
  Status ParseRecord(size_t begin, size_t end, Record* record) const;
  std::string Where(size_t pos) const;  // "byte N of the batch" / "...of the decompressed records"

  storage::BatchHeader header_{};
  Compression compression_ = Compression::kNone;
  std::vector<uint8_t> decompressed_;
  std::span<const uint8_t> records_;
  size_t pos_ = 0;
  int32_t index_ = 0;
  bool done_ = true;
  Status status_;
};

// Calls `callback(const Record&)` for each record of `batch` (see RecordReader::Open for
// what is checked). The callback returns void, or a Status that stops the walk when not
// OK and is returned.
template <typename F>
Status ForEachRecord(std::span<const uint8_t> batch, size_t max_decompressed, F&& callback) {
  RecordReader reader;
  RETURN_IF_ERROR(reader.Open(batch, max_decompressed));
  Record record;
  while (reader.Next(&record)) {
    if constexpr (std::is_convertible_v<std::invoke_result_t<F&, const Record&>, Status>) {
      RETURN_IF_ERROR(callback(static_cast<const Record&>(record)));
    } else {
      callback(static_cast<const Record&>(record));
    }
  }
  return reader.status();
}

// ---------------------------------------------------------------------------------------
// Validation on produce

struct ValidateOptions {
  uint32_t max_batch_bytes = 1'048'588;              // message.max.bytes
  size_t max_decompressed_bytes = size_t{64} << 20;  // decompression bomb guard
  int64_t now_ms = 0;                                // the broker's clock
  bool log_append_time = false;                      // message.timestamp.type
  // CreateTime topics: a record timestamp (other than -1) further than this from now_ms
  // is INVALID_TIMESTAMP (message.timestamp.difference.max.ms). Unset: no limit.
  std::optional<int64_t> max_timestamp_difference_ms;
  bool compacted = false;  // cleanup.policy=compact: every record needs a key
  bool allow_zstd = true;  // false for Produce before v7
};

// What validation learned about a batch, for the log and the produce response.
struct BatchInfo {
  storage::BatchHeader header{};
  Compression compression = Compression::kNone;
  bool transactional = false;
  bool control = false;  // sluice has no transactions yet: the caller decides
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  int64_t max_timestamp = -1;                  // largest record timestamp (-1: none)
  int32_t offset_delta_of_max_timestamp = -1;  // the first record that has it
  size_t records_size = 0;                     // bytes of records after decompression
};

// What Kafka's LogValidator checks when a client produces one v2 batch:
//   - the header (storage::ValidateBatch): size, length, magic, CRC, count vs last
//     offset delta, message.max.bytes;
//   - a known codec, zstd only when allowed;
//   - a producer id (>= 0) comes with a base sequence >= 0;
//   - every record decodes, its length covers exactly its fields, the count equals the
//     header's, no bytes follow the last record;
//   - offset deltas are 0, 1, 2, ... (Kafka rewrites a compressed batch that breaks this;
//     sluice stores batches verbatim, so it rejects it);
//   - keys on compacted topics; record timestamps for CreateTime topics; a producer may
//     not set LogAppendTime.
// Control and transactional batches are reported in `info`, not rejected. Fills `info`
// (when not null) on success.
Status ValidateRecords(std::span<const uint8_t> batch, const ValidateOptions& options,
                       BatchInfo* info = nullptr);

// The produce error code for a status from this file (see the table at the top).
ErrorCode RecordsErrorCode(const Status& status);

// ---------------------------------------------------------------------------------------
// Building batches (tests, benchmarks, pipelines)

inline std::span<const uint8_t> AsBytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct RecordInput {
  std::optional<std::span<const uint8_t>> key;    // nullopt = null
  std::optional<std::span<const uint8_t>> value;  // nullopt = null
  int64_t timestamp_delta = 0;
  std::vector<RecordHeader> headers;
  int8_t attributes = 0;
  std::optional<int32_t>
      offset_delta;  // default: the record's index (set only to build bad batches)
};

struct BatchBuilderOptions {
  Compression compression = Compression::kNone;
  int compression_level = kDefaultCompressionLevel;  // must be valid for the codec
  int64_t base_offset = 0;
  int32_t partition_leader_epoch = -1;  // producers send -1; the log assigns it
  int64_t base_timestamp = 0;
  std::optional<int64_t> max_timestamp;  // default: the largest record timestamp
  bool log_append_time = false;
  bool transactional = false;
  bool control = false;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
};

// A complete batch: header, records (compressed as asked), length and CRC32C.
std::vector<uint8_t> BuildBatch(const BatchBuilderOptions& options,
                                std::span<const RecordInput> records);

// A transaction marker as the transaction coordinator writes it (Kafka's
// EndTransactionMarker): a control and transactional batch of the producer with one
// record, key = version 0 (int16) and type (int16: 0 abort, 1 commit), value = version 0
// (int16) and the coordinator epoch (int32); no sequence, uncompressed.
std::vector<uint8_t> BuildTxnMarkerBatch(int64_t producer_id, int16_t producer_epoch, bool commit,
                                         int32_t coordinator_epoch, int64_t timestamp_ms);

}  // namespace sluice::kafka
