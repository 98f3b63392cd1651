#include "kafka/protocol/records.h"

#include <lz4frame.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <memory>

#include "base/crc32c.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka {

namespace {

using storage::kBaseSequenceOffset;
using storage::kBatchHeaderSize;
using storage::kProducerEpochOffset;
using storage::kProducerIdOffset;

// ---------------------------------------------------------------------------------------
// Decompression output with a hard limit.

// A growing buffer that never holds more than max_output + 1 bytes: producing that last
// byte is how a decoder tells that the output would exceed max_output.
class BoundedOutput {
 public:
  BoundedOutput(size_t max_output, size_t size_hint)
      : max_(max_output), limit_(max_output == SIZE_MAX ? SIZE_MAX : max_output + 1) {
    buf_.resize(std::min(limit_, std::max<size_t>(size_hint, 4096)));
  }

  // Free space after what was produced; grows the buffer (up to the limit) when full.
  // Empty once the limit is reached.
  std::span<uint8_t> Free() {
    if (used_ == buf_.size() && buf_.size() < limit_) {
      size_t grown = buf_.size() > limit_ / 2 ? limit_ : std::max<size_t>(buf_.size() * 2, 65536);
      buf_.resize(std::min(grown, limit_));
    }
    return std::span<uint8_t>(buf_).subspan(used_);
  }
  void Commit(size_t n) { used_ += n; }
  bool Exceeded() const { return used_ > max_; }
  size_t used() const { return used_; }

  // The output; its capacity may be up to twice its size (not shrunk: that would copy).
  std::vector<uint8_t> Take() && {
    buf_.resize(used_);
    return std::move(buf_);
  }

 private:
  size_t max_;
  size_t limit_;
  size_t used_ = 0;
  std::vector<uint8_t> buf_;
};

Status TooLarge(Compression codec, size_t max_output) {
  return ResourceExhaustedError("{} data decompresses to more than {} bytes",
                                CompressionName(codec), max_output);
}

// ---------------------------------------------------------------------------------------
// gzip

constexpr size_t kMaxZlibChunk = UINT_MAX;

// Deflate cannot expand more than 1032:1, so a gzip trailer's size (ISIZE, the last four
// bytes, little-endian, mod 2^32) beyond that is a lie; within it, a good first guess.
size_t GzipSizeHint(std::span<const uint8_t> data) {
  if (data.size() < 18) return 0;
  const uint8_t* p = data.data() + data.size() - 4;
  size_t isize = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  return isize <= data.size() * 1032 ? isize + 1 : data.size() * 4;
}

Result<std::vector<uint8_t>> GzipDecompress(std::span<const uint8_t> data, size_t max_output) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) return InternalError("gzip: inflateInit2 failed");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  BoundedOutput out(max_output, GzipSizeHint(data));
  size_t in_pos = 0;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < data.size()) {
      size_t n = std::min(data.size() - in_pos, kMaxZlibChunk);
      zs.next_in = const_cast<Bytef*>(data.data() + in_pos);
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    std::span<uint8_t> free = out.Free();
    if (free.empty()) return TooLarge(Compression::kGzip, max_output);
    zs.next_out = free.data();
    zs.avail_out = static_cast<uInt>(std::min(free.size(), kMaxZlibChunk));
    uInt avail_in_before = zs.avail_in;
    uInt avail_out_before = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    out.Commit(avail_out_before - zs.avail_out);
    if (out.Exceeded()) return TooLarge(Compression::kGzip, max_output);
    size_t consumed = in_pos - zs.avail_in;
    if (rc == Z_STREAM_END) {
      if (consumed == data.size()) break;
      // Another gzip member follows (Java's GZIPInputStream reads them all); anything
      // else after the stream is an error.
      size_t left = data.size() - consumed;
      if (left < 2 || data[consumed] != 0x1f || data[consumed + 1] != 0x8b) {
        return CorruptionError("gzip: {} bytes after the end of the stream at byte {}", left,
                               consumed);
      }
      if (inflateReset(&zs) != Z_OK) return InternalError("gzip: inflateReset failed");
      continue;
    }
    if (rc == Z_BUF_ERROR ||
        (rc == Z_OK && avail_in_before == zs.avail_in && avail_out_before == zs.avail_out)) {
      if (zs.avail_in == 0 && in_pos == data.size()) {
        return CorruptionError("gzip: the stream is truncated after {} bytes", data.size());
      }
      if (zs.avail_out != 0) return CorruptionError("gzip: no progress at byte {}", consumed);
      continue;  // output full: Free() grows it
    }
    if (rc != Z_OK) {
      return CorruptionError("gzip: {} at byte {}", zs.msg != nullptr ? zs.msg : zError(rc),
                             consumed);
    }
  }
  return std::move(out).Take();
}

Result<std::vector<uint8_t>> GzipCompress(std::span<const uint8_t> data, int level) {
  if (level == kDefaultCompressionLevel) level = 6;
  if (level < 0 || level > 9) return InvalidArgumentError("gzip level {} is not in 0-9", level);
  z_stream zs{};
  if (deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return InternalError("gzip: deflateInit2 failed");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, deflateEnd);
  std::vector<uint8_t> out(deflateBound(&zs, static_cast<uLong>(data.size())));
  size_t in_pos = 0, out_pos = 0;
  for (;;) {
    if (zs.avail_in == 0 && in_pos < data.size()) {
      size_t n = std::min(data.size() - in_pos, kMaxZlibChunk);
      zs.next_in = const_cast<Bytef*>(data.data() + in_pos);
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (out_pos == out.size()) out.resize(out.size() * 2 + 64);
    size_t room = std::min(out.size() - out_pos, kMaxZlibChunk);
    zs.next_out = out.data() + out_pos;
    zs.avail_out = static_cast<uInt>(room);
    int rc = deflate(&zs, in_pos == data.size() ? Z_FINISH : Z_NO_FLUSH);
    out_pos += room - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) return InternalError("gzip: deflate failed: {}", rc);
  }
  out.resize(out_pos);
  return out;
}

// ---------------------------------------------------------------------------------------
// snappy

constexpr uint8_t kXerialMagic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
constexpr size_t kXerialHeaderSize = 16;  // magic, int32 version, int32 compatible version
constexpr size_t kXerialBlockSize = 32 * 1024;

bool HasXerialMagic(std::span<const uint8_t> data) {
  return data.size() >= sizeof kXerialMagic &&
         std::memcmp(data.data(), kXerialMagic, sizeof kXerialMagic) == 0;
}

// Appends one raw snappy block to `out`.
Status SnappyRawAppend(std::span<const uint8_t> block, size_t max_output, std::vector<uint8_t>* out,
                       size_t at) {
  const char* src = reinterpret_cast<const char*>(block.data());
  size_t n = 0;
  if (!snappy::GetUncompressedLength(src, block.size(), &n)) {
    return CorruptionError("snappy: the block at byte {} has no valid length", at);
  }
  // A snappy element yields at most 64 bytes from 3: a larger claim is a lie.
  if (n / 22 > block.size()) {
    return CorruptionError("snappy: the block at byte {} claims {} bytes from {}", at, n,
                           block.size());
  }
  if (n > max_output - out->size()) return TooLarge(Compression::kSnappy, max_output);
  size_t old = out->size();
  out->resize(old + n);
  if (!snappy::RawUncompress(src, block.size(), reinterpret_cast<char*>(out->data() + old))) {
    return CorruptionError("snappy: the block at byte {} does not decompress", at);
  }
  return Status::OK();
}

Result<std::vector<uint8_t>> SnappyDecompress(std::span<const uint8_t> data, size_t max_output) {
  std::vector<uint8_t> out;
  if (!HasXerialMagic(data)) {
    RETURN_IF_ERROR(SnappyRawAppend(data, max_output, &out, 0));
    return out;
  }
  size_t pos = 0;
  while (pos < data.size()) {
    std::span<const uint8_t> rest = data.subspan(pos);
    // The stream starts with a header; snappy-java also reads streams concatenated
    // whole, header and all.
    if (HasXerialMagic(rest)) {
      if (rest.size() < kXerialHeaderSize) {
        return CorruptionError("snappy: xerial header at byte {} is truncated", pos);
      }
      pos += kXerialHeaderSize;
      continue;
    }
    if (rest.size() < 4) {
      return CorruptionError("snappy: xerial block length at byte {} is truncated", pos);
    }
    uint32_t len = storage::LoadBE32(rest.data());
    if (len > rest.size() - 4) {
      return CorruptionError("snappy: xerial block at byte {} says {} bytes, {} left", pos, len,
                             rest.size() - 4);
    }
    RETURN_IF_ERROR(SnappyRawAppend(rest.subspan(4, len), max_output, &out, pos + 4));
    pos += 4 + len;
  }
  return out;
}

Result<std::vector<uint8_t>> SnappyCompress(std::span<const uint8_t> data) {
  std::vector<uint8_t> out(kXerialMagic, kXerialMagic + sizeof kXerialMagic);
  Writer w(&out);
  w.Int32(1);  // version
  w.Int32(1);  // compatible version
  for (size_t pos = 0; pos < data.size(); pos += kXerialBlockSize) {
    size_t n = std::min(kXerialBlockSize, data.size() - pos);
    size_t at = out.size();
    out.resize(at + 4 + snappy::MaxCompressedLength(n));
    size_t written = 0;
    snappy::RawCompress(reinterpret_cast<const char*>(data.data() + pos), n,
                        reinterpret_cast<char*>(out.data() + at + 4), &written);
    storage::StoreBE32(out.data() + at, static_cast<uint32_t>(written));
    out.resize(at + 4 + written);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// lz4

constexpr uint32_t kLz4FrameMagic = 0x184D2204;
constexpr uint8_t kLz4FlagBlockIndependence = 0x20;

uint32_t LoadLE32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

Result<std::vector<uint8_t>> Lz4Decompress(std::span<const uint8_t> data, size_t max_output) {
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION))) {
    return InternalError("lz4: cannot create a decompression context");
  }
  std::unique_ptr<LZ4F_dctx, LZ4F_errorCode_t (*)(LZ4F_dctx*)> ctx(raw,
                                                                   LZ4F_freeDecompressionContext);
  BoundedOutput out(max_output, data.size() * 4);
  size_t pos = 0;
  bool frame_start = true;
  for (;;) {
    if (frame_start) {
      // Kafka's Java reader (KafkaLZ4BlockInputStream) refuses linked blocks; Java
      // consumers could not read such a batch, so the broker does not take it.
      if (data.size() - pos >= 5 && LoadLE32(data.data() + pos) == kLz4FrameMagic &&
          (data[pos + 4] & kLz4FlagBlockIndependence) == 0) {
        return CorruptionError(
            "lz4: the frame at byte {} uses linked blocks; Kafka needs "
            "independent blocks",
            pos);
      }
      frame_start = false;
    }
    std::span<uint8_t> free = out.Free();
    if (free.empty()) return TooLarge(Compression::kLz4, max_output);
    size_t produced = free.size();
    size_t consumed = data.size() - pos;
    size_t rc =
        LZ4F_decompress(ctx.get(), free.data(), &produced, data.data() + pos, &consumed, nullptr);
    if (LZ4F_isError(rc)) {
      return CorruptionError("lz4: {} near byte {}", LZ4F_getErrorName(rc), pos + consumed);
    }
    pos += consumed;
    out.Commit(produced);
    if (out.Exceeded()) return TooLarge(Compression::kLz4, max_output);
    if (rc == 0) {  // a frame ended
      if (pos == data.size()) break;
      frame_start = true;
      continue;
    }
    if (pos == data.size() && produced < free.size()) {
      return CorruptionError("lz4: the frame is truncated after {} bytes", data.size());
    }
    if (consumed == 0 && produced == 0) return CorruptionError("lz4: no progress at byte {}", pos);
  }
  return std::move(out).Take();
}

Result<std::vector<uint8_t>> Lz4Compress(std::span<const uint8_t> data, int level) {
  if (level == kDefaultCompressionLevel) level = 0;
  if (level < 0 || level > 17) return InvalidArgumentError("lz4 level {} is not in 0-17", level);
  LZ4F_preferences_t prefs{};
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  prefs.compressionLevel = level;
  std::vector<uint8_t> out(LZ4F_compressFrameBound(data.size(), &prefs));
  size_t n = LZ4F_compressFrame(out.data(), out.size(), data.data(), data.size(), &prefs);
  if (LZ4F_isError(n)) return InternalError("lz4: {}", LZ4F_getErrorName(n));
  out.resize(n);
  return out;
}

// ---------------------------------------------------------------------------------------
// zstd

// A frame states the window its decoder must keep, up to 2 GiB, whatever the output. Allow
// what the output could need, at least 8 MiB (level 19 without a content size; Kafka's
// default level 3 uses 2 MiB) and at most zstd's own default limit of 128 MiB.
int ZstdWindowLogMax(size_t max_output) {
  int log = max_output <= 1 ? 0 : static_cast<int>(std::bit_width(max_output - 1));
  return std::clamp(log, 23, 27);
}

Result<std::vector<uint8_t>> ZstdDecompress(std::span<const uint8_t> data, size_t max_output) {
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (ctx == nullptr) return InternalError("zstd: cannot create a decompression context");
  size_t rc = ZSTD_DCtx_setParameter(ctx.get(), ZSTD_d_windowLogMax, ZstdWindowLogMax(max_output));
  if (ZSTD_isError(rc)) return InternalError("zstd: {}", ZSTD_getErrorName(rc));
  unsigned long long content = ZSTD_getFrameContentSize(data.data(), data.size());
  size_t hint = data.size() * 4;
  if (content != ZSTD_CONTENTSIZE_UNKNOWN && content != ZSTD_CONTENTSIZE_ERROR &&
      content <= max_output) {
    hint = static_cast<size_t>(content) + 1;
  }
  BoundedOutput out(max_output, hint);
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  for (;;) {
    std::span<uint8_t> free = out.Free();
    if (free.empty()) return TooLarge(Compression::kZstd, max_output);
    ZSTD_outBuffer o{free.data(), free.size(), 0};
    size_t in_before = in.pos;
    rc = ZSTD_decompressStream(ctx.get(), &o, &in);
    if (ZSTD_isError(rc)) {
      if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge) {
        return ResourceExhaustedError("zstd: the frame needs a window larger than 2^{} bytes",
                                      ZstdWindowLogMax(max_output));
      }
      return CorruptionError("zstd: {} near byte {}", ZSTD_getErrorName(rc), in.pos);
    }
    out.Commit(o.pos);
    if (out.Exceeded()) return TooLarge(Compression::kZstd, max_output);
    if (rc == 0 && in.pos == in.size) break;  // the last frame is complete
    if (in.pos == in.size && o.pos < o.size) {
      return CorruptionError("zstd: the frame is truncated after {} bytes", data.size());
    }
    if (in.pos == in_before && o.pos == 0)
      return CorruptionError("zstd: no progress at byte {}", in.pos);
  }
  return std::move(out).Take();
}

Result<std::vector<uint8_t>> ZstdCompress(std::span<const uint8_t> data, int level) {
  if (level == kDefaultCompressionLevel) level = ZSTD_CLEVEL_DEFAULT;
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    return InvalidArgumentError("zstd level {} is not in {}-{}", level, ZSTD_minCLevel(),
                                ZSTD_maxCLevel());
  }
  std::vector<uint8_t> out(ZSTD_compressBound(data.size()));
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  if (ZSTD_isError(n)) return InternalError("zstd: {}", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

// ---------------------------------------------------------------------------------------
// Record fields

// A bounds-checked cursor over the records section for the varint-framed fields of a
// record. Varints follow wire.h's rules (at most 5 bytes for 32 bits, 10 for 64, no bits
// beyond); wire.h's Reader has no view of varint-length bytes, which records need.
// Sticky: after the first error reads return zero values.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, size_t pos, size_t end)
      : bytes_(bytes), pos_(pos), end_(end) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t error_pos() const { return error_pos_; }
  size_t position() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }

  void Fail(size_t at, const char* field, std::string why) {
    if (!ok()) return;
    error_ = fmt::format("{}: {}", field, why);
    error_pos_ = at;
    pos_ = end_;
  }

  int8_t Int8(const char* field) {
    if (!ok()) return 0;
    if (pos_ == end_) {
      Fail(pos_, field, "no bytes left");
      return 0;
    }
    return static_cast<int8_t>(bytes_[pos_++]);
  }

  int32_t Varint(const char* field) {
    uint64_t z = Unsigned(field, 5);
    if (!ok()) return 0;
    uint32_t u = static_cast<uint32_t>(z);
    return static_cast<int32_t>(u >> 1) ^ -static_cast<int32_t>(u & 1);
  }

  int64_t Varlong(const char* field) {
    uint64_t z = Unsigned(field, 10);
    if (!ok()) return 0;
    return static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
  }

  // A varint length (-1 = null) and that many bytes.
  std::optional<std::span<const uint8_t>> Bytes(const char* field) {
    size_t at = pos_;
    int32_t n = Varint(field);
    if (!ok() || n == -1) return std::nullopt;
    if (n < 0) {
      Fail(at, field, fmt::format("length {} is negative", n));
      return std::nullopt;
    }
    if (static_cast<size_t>(n) > remaining()) {
      Fail(at, field,
           fmt::format("length {} is longer than the {} bytes left in the record", n, remaining()));
      return std::nullopt;
    }
    std::span<const uint8_t> view = bytes_.subspan(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return view;
  }

 private:
  uint64_t Unsigned(const char* field, int max_bytes) {
    if (!ok()) return 0;
    size_t at = pos_;
    uint64_t v = 0;
    for (int i = 0; i < max_bytes; ++i) {
      if (pos_ == end_) {
        Fail(at, field, "ends inside a varint");
        return 0;
      }
      uint8_t b = bytes_[pos_++];
      v |= uint64_t{b & 0x7fu} << (7 * i);
      if ((b & 0x80) == 0) {
        bool last = i == max_bytes - 1;
        if (last && (max_bytes == 5 ? (b & 0x70) != 0 : (b & 0x7e) != 0)) {
          Fail(at, field, fmt::format("varint does not fit in {} bits", max_bytes == 5 ? 32 : 64));
          return 0;
        }
        return v;
      }
    }
    Fail(at, field, fmt::format("varint longer than {} bytes", max_bytes));
    return 0;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_;
  size_t end_;
  std::string error_;
  size_t error_pos_ = 0;
};

uint64_t AbsDiff(int64_t a, int64_t b) {
  return a >= b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b)
                : static_cast<uint64_t>(b) - static_cast<uint64_t>(a);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Compression

std::string_view CompressionName(Compression codec) {
  switch (codec) {
    case Compression::kNone:
      return "none";
    case Compression::kGzip:
      return "gzip";
    case Compression::kSnappy:
      return "snappy";
    case Compression::kLz4:
      return "lz4";
    case Compression::kZstd:
      return "zstd";
  }
  return "unknown";
}

Result<Compression> CompressionFromAttributes(int16_t attributes) {
  int codec = static_cast<uint16_t>(attributes) & storage::kAttrCompressionMask;
  if (codec > static_cast<int>(Compression::kZstd)) {
    return UnimplementedError("compression codec {} (attributes {:#06x}) is not one Kafka knows",
                              codec, static_cast<uint16_t>(attributes));
  }
  return static_cast<Compression>(codec);
}

Result<std::vector<uint8_t>> Decompress(Compression codec, std::span<const uint8_t> data,
                                        size_t max_output) {
  switch (codec) {
    case Compression::kNone:
      if (data.size() > max_output) return TooLarge(codec, max_output);
      return std::vector<uint8_t>(data.begin(), data.end());
    case Compression::kGzip:
      return GzipDecompress(data, max_output);
    case Compression::kSnappy:
      return SnappyDecompress(data, max_output);
    case Compression::kLz4:
      return Lz4Decompress(data, max_output);
    case Compression::kZstd:
      return ZstdDecompress(data, max_output);
  }
  return UnimplementedError("compression codec {}", static_cast<int>(codec));
}

Result<std::vector<uint8_t>> Compress(Compression codec, std::span<const uint8_t> data, int level) {
  switch (codec) {
    case Compression::kNone:
      return std::vector<uint8_t>(data.begin(), data.end());
    case Compression::kGzip:
      return GzipCompress(data, level);
    case Compression::kSnappy:
      return SnappyCompress(data);
    case Compression::kLz4:
      return Lz4Compress(data, level);
    case Compression::kZstd:
      return ZstdCompress(data, level);
  }
  return UnimplementedError("compression codec {}", static_cast<int>(codec));
}

// ---------------------------------------------------------------------------------------
// Records

int64_t RecordTimestamp(const storage::BatchHeader& header, const Record& record) {
  if (static_cast<uint16_t>(header.attributes) & storage::kAttrTimestampTypeLogAppend) {
    return header.max_timestamp;
  }
  // Java's long arithmetic wraps; so does this.
  return static_cast<int64_t>(static_cast<uint64_t>(header.base_timestamp) +
                              static_cast<uint64_t>(record.timestamp_delta));
}

Status RecordReader::Open(std::span<const uint8_t> batch, size_t max_decompressed) {
  done_ = true;
  status_ = Status::OK();
  decompressed_.clear();
  records_ = {};
  pos_ = 0;
  index_ = 0;
  if (batch.size() < kBatchHeaderSize) {
    return status_ = InvalidArgumentError("batch of {} bytes is shorter than the {}-byte header",
                                          batch.size(), kBatchHeaderSize);
  }
  header_ = storage::ParseBatchHeader(batch);
  if (header_.length < 0 || header_.total_size() != batch.size()) {
    return status_ = InvalidArgumentError("batch length field {} does not match the {} bytes given",
                                          header_.length, batch.size());
  }
  Status framing = storage::CheckStoredHeader(
      header_, static_cast<uint32_t>(std::min<size_t>(batch.size(), UINT32_MAX)));
  if (!framing.ok()) return status_ = Status(StatusCode::kInvalidArgument, framing.message());
  if (header_.records_count < 0) {
    return status_ =
               InvalidArgumentError("batch record count {} is negative", header_.records_count);
  }
  Result<Compression> codec = CompressionFromAttributes(header_.attributes);
  if (!codec.ok()) return status_ = codec.status();
  compression_ = *codec;
  std::span<const uint8_t> payload = batch.subspan(kBatchHeaderSize);
  if (compression_ == Compression::kNone) {
    records_ = payload;
  } else {
    Result<std::vector<uint8_t>> plain = Decompress(compression_, payload, max_decompressed);
    if (!plain.ok()) {
      const Status& st = plain.status();
      // Only the size limit keeps its code; bytes that do not decompress make the batch invalid.
      StatusCode code =
          st.code() == StatusCode::kResourceExhausted ? st.code() : StatusCode::kInvalidArgument;
      return status_ = Status(code, fmt::format("batch records ({} bytes at byte {}): {}",
                                                payload.size(), kBatchHeaderSize, st.message()));
    }
    decompressed_ = std::move(plain).value();
    records_ = decompressed_;
  }
  done_ = false;
  return status_;
}

std::string RecordReader::Where(size_t pos) const {
  if (compression_ == Compression::kNone)
    return fmt::format("byte {} of the batch", pos + kBatchHeaderSize);
  return fmt::format("byte {} of the decompressed {} records", pos, CompressionName(compression_));
}

bool RecordReader::Fail(Status status) {
  status_ = std::move(status);
  done_ = true;
  return false;
}

bool RecordReader::Next(Record* record) {
  if (done_) return false;
  if (index_ == header_.records_count) {
    done_ = true;
    if (pos_ != records_.size()) {
      return Fail(InvalidArgumentError("{} bytes follow the last of the {} records, at {}",
                                       records_.size() - pos_, header_.records_count, Where(pos_)));
    }
    return false;
  }
  if (pos_ == records_.size()) {
    return Fail(InvalidArgumentError("the header declares {} records but the records end after {}",
                                     header_.records_count, index_));
  }
  Cursor c(records_, pos_, records_.size());
  int32_t length = c.Varint("record length");
  if (c.ok() && length < 0) c.Fail(pos_, "record length", fmt::format("{} is negative", length));
  if (c.ok() && static_cast<size_t>(length) > c.remaining()) {
    c.Fail(pos_, "record length",
           fmt::format("{} is longer than the {} bytes left", length, c.remaining()));
  }
  if (!c.ok()) {
    return Fail(
        InvalidArgumentError("record {} at {}: {}", index_, Where(c.error_pos()), c.error()));
  }
  size_t end = c.position() + static_cast<size_t>(length);
  Status st = ParseRecord(c.position(), end, record);
  if (!st.ok()) return Fail(std::move(st));
  pos_ = end;
  ++index_;
  return true;
}

Status RecordReader::ParseRecord(size_t begin, size_t end, Record* record) const {
  Cursor c(records_, begin, end);
  record->attributes = c.Int8("attributes");
  record->timestamp_delta = c.Varlong("timestamp delta");
  record->offset_delta = c.Varint("offset delta");
  record->key = c.Bytes("key");
  record->value = c.Bytes("value");
  record->headers.clear();
  size_t count_at = c.position();
  int32_t count = c.Varint("header count");
  if (c.ok() && count < 0) c.Fail(count_at, "header count", fmt::format("{} is negative", count));
  // Each header takes at least two bytes: a lying count fails here, before any allocation.
  if (c.ok() && static_cast<size_t>(count) > c.remaining() / 2) {
    c.Fail(count_at, "header count",
           fmt::format("{} headers cannot fit in the {} bytes left", count, c.remaining()));
  }
  for (int32_t i = 0; i < count && c.ok(); ++i) {
    size_t key_at = c.position();
    std::optional<std::span<const uint8_t>> key = c.Bytes("header key");
    if (c.ok() && !key) c.Fail(key_at, "header key", "null (length -1)");
    std::optional<std::span<const uint8_t>> value = c.Bytes("header value");
    if (!c.ok()) break;
    record->headers.push_back(
        {std::string_view(reinterpret_cast<const char*>(key->data()), key->size()), value});
  }
  if (c.ok() && c.remaining() != 0) {
    c.Fail(c.position(), "record length",
           fmt::format("{} bytes are left after the last field", c.remaining()));
  }
  if (!c.ok()) {
    return InvalidArgumentError("record {} at {}: {}", index_, Where(c.error_pos()), c.error());
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------
// Validation

Status ValidateRecords(std::span<const uint8_t> batch, const ValidateOptions& options,
                       BatchInfo* info) {
  Result<storage::BatchHeader> header = storage::ValidateBatch(batch, options.max_batch_bytes);
  // ValidateBatch's codes already tell CORRUPT_MESSAGE and MESSAGE_TOO_LARGE apart.
  if (!header.ok()) return header.status();
  const storage::BatchHeader& h = *header;
  ASSIGN_OR_RETURN(Compression codec, CompressionFromAttributes(h.attributes));
  if (codec == Compression::kZstd && !options.allow_zstd) {
    return UnimplementedError("zstd compression needs Produce version 7 or later");
  }
  int64_t producer_id = static_cast<int64_t>(storage::LoadBE64(batch.data() + kProducerIdOffset));
  int32_t base_sequence =
      static_cast<int32_t>(storage::LoadBE32(batch.data() + kBaseSequenceOffset));
  if (producer_id >= 0 && base_sequence < 0) {
    return InvalidArgumentError("batch with producer id {} has a negative base sequence {}",
                                producer_id, base_sequence);
  }
  const bool batch_log_append =
      static_cast<uint16_t>(h.attributes) & storage::kAttrTimestampTypeLogAppend;

  RecordReader reader;
  RETURN_IF_ERROR(reader.Open(batch, options.max_decompressed_bytes));
  Record record;
  int64_t max_timestamp = -1;
  int32_t max_timestamp_delta = -1;
  while (reader.Next(&record)) {
    const int32_t i = reader.records_read() - 1;
    if (record.offset_delta != i) {
      return InvalidArgumentError(
          "record {} has offset delta {}: a batch's offset deltas must "
          "be 0, 1, 2, ...",
          i, record.offset_delta);
    }
    if (options.compacted && !record.key) {
      return InvalidArgumentError("record {} has a null key; a compacted topic needs keys", i);
    }
    const int64_t ts = RecordTimestamp(h, record);
    if (!options.log_append_time && ts != -1) {
      if (options.max_timestamp_difference_ms &&
          AbsDiff(ts, options.now_ms) >
              static_cast<uint64_t>(std::max<int64_t>(*options.max_timestamp_difference_ms, 0))) {
        return OutOfRangeError("record {} has timestamp {}, more than {} ms from now ({})", i, ts,
                               *options.max_timestamp_difference_ms, options.now_ms);
      }
    } else if (batch_log_append) {
      return OutOfRangeError(
          "record {}: the batch has timestamp type LogAppendTime, which only "
          "the broker may set",
          i);
    }
    if (ts > max_timestamp) {
      max_timestamp = ts;
      max_timestamp_delta = i;
    }
  }
  RETURN_IF_ERROR(reader.status());

  if (info != nullptr) {
    const uint16_t attrs = static_cast<uint16_t>(h.attributes);
    info->header = h;
    info->compression = codec;
    info->transactional = (attrs & kAttrTransactional) != 0;
    info->control = (attrs & kAttrControl) != 0;
    info->producer_id = producer_id;
    info->producer_epoch =
        static_cast<int16_t>(storage::LoadBE16(batch.data() + kProducerEpochOffset));
    info->base_sequence = base_sequence;
    info->max_timestamp = max_timestamp;
    info->offset_delta_of_max_timestamp = max_timestamp_delta;
    info->records_size = reader.records_size();
  }
  return Status::OK();
}

ErrorCode RecordsErrorCode(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return ErrorCode::kNone;
    case StatusCode::kCorruption:
      return ErrorCode::kCorruptMessage;
    case StatusCode::kInvalidArgument:
      return ErrorCode::kInvalidRecord;
    case StatusCode::kUnimplemented:
      return ErrorCode::kUnsupportedCompressionType;
    case StatusCode::kOutOfRange:
      return ErrorCode::kInvalidTimestamp;
    case StatusCode::kResourceExhausted:
      return ErrorCode::kMessageTooLarge;
    default:
      return ErrorCode::kUnknownServerError;
  }
}

// ---------------------------------------------------------------------------------------
// Building

std::vector<uint8_t> BuildBatch(const BatchBuilderOptions& options,
                                std::span<const RecordInput> records) {
  std::vector<uint8_t> plain;
  std::vector<uint8_t> body;
  Writer w(&plain);
  int64_t max_timestamp = options.base_timestamp;
  for (size_t i = 0; i < records.size(); ++i) {
    const RecordInput& r = records[i];
    body.clear();
    Writer b(&body);
    b.Int8(r.attributes);
    b.Varlong(r.timestamp_delta);
    b.Varint(r.offset_delta.value_or(static_cast<int32_t>(i)));
    auto bytes = [&b](const std::optional<std::span<const uint8_t>>& v) {
      if (!v) {
        b.Varint(-1);
        return;
      }
      b.Varint(static_cast<int32_t>(v->size()));
      b.Raw(*v);
    };
    bytes(r.key);
    bytes(r.value);
    b.Varint(static_cast<int32_t>(r.headers.size()));
    for (const RecordHeader& h : r.headers) {
      bytes(AsBytes(h.key));
      bytes(h.value);
    }
    w.Varint(static_cast<int32_t>(body.size()));
    w.Raw(body);
    int64_t ts = static_cast<int64_t>(static_cast<uint64_t>(options.base_timestamp) +
                                      static_cast<uint64_t>(r.timestamp_delta));
    if (i == 0 || ts > max_timestamp) max_timestamp = ts;
  }

  std::vector<uint8_t> compressed;
  std::span<const uint8_t> payload = plain;
  if (options.compression != Compression::kNone) {
    Result<std::vector<uint8_t>> c =
        Compress(options.compression, plain, options.compression_level);
    SLUICE_ASSERT(c.ok());  // the only failure is a level the caller got wrong
    compressed = std::move(c).value();
    payload = compressed;
  }

  uint16_t attributes = static_cast<uint16_t>(options.compression);
  if (options.log_append_time) attributes |= storage::kAttrTimestampTypeLogAppend;
  if (options.transactional) attributes |= kAttrTransactional;
  if (options.control) attributes |= kAttrControl;
  const int32_t count = static_cast<int32_t>(records.size());

  std::vector<uint8_t> out;
  out.reserve(kBatchHeaderSize + payload.size());
  Writer h(&out);
  h.Int64(options.base_offset);
  h.Int32(0);  // length, below
  h.Int32(options.partition_leader_epoch);
  h.Int8(2);
  h.Uint32(0);  // crc, below
  h.Uint16(attributes);
  h.Int32(count - 1);
  h.Int64(options.base_timestamp);
  h.Int64(options.max_timestamp.value_or(max_timestamp));
  h.Int64(options.producer_id);
  h.Int16(options.producer_epoch);
  h.Int32(options.base_sequence);
  h.Int32(count);
  h.Raw(payload);
  storage::StoreBE32(out.data() + storage::kBatchLengthOffset,
                     static_cast<uint32_t>(out.size() - storage::kBatchLogOverhead));
  storage::StoreBE32(out.data() + storage::kCrcOffset,
                     crc32c::Value(out.data() + storage::kAttributesOffset,
                                   out.size() - storage::kAttributesOffset));
  return out;
}

std::vector<uint8_t> BuildTxnMarkerBatch(int64_t producer_id, int16_t producer_epoch, bool commit,
                                         int32_t coordinator_epoch, int64_t timestamp_ms) {
  uint8_t key[4];
  storage::StoreBE16(key, 0);
  storage::StoreBE16(key + 2, commit ? 1 : 0);
  uint8_t value[6];
  storage::StoreBE16(value, 0);
  storage::StoreBE32(value + 2, static_cast<uint32_t>(coordinator_epoch));
  RecordInput record;
  record.key = std::span<const uint8_t>(key);
  record.value = std::span<const uint8_t>(value);
  BatchBuilderOptions o;
  o.base_timestamp = timestamp_ms;
  o.transactional = true;
  o.control = true;
  o.producer_id = producer_id;
  o.producer_epoch = producer_epoch;
  o.base_sequence = -1;
  return BuildBatch(o, std::span<const RecordInput>(&record, 1));
}

}  // namespace sluice::kafka
