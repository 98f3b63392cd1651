// avro: object container files, written (FileWriter) and read (ReadFile), with the null
// and deflate codecs.
#include <zlib.h>

#include <cstring>
#include <limits>
#include <random>

#include "lake/avro.h"
#include "lake/avro_decoder.h"

namespace sluice::lake::avro {

namespace {

constexpr std::string_view kMagic("Obj\x01", 4);
constexpr size_t kSyncSize = 16;

void WriteBytes(std::string_view b, std::string* out) {
  WriteLong(static_cast<int64_t>(b.size()), out);
  out->append(b);
}

// Raw deflate (RFC 1951, no zlib header), as the Avro specification's deflate codec.
Result<std::string> Deflate(std::string_view in, int level) {
  z_stream z{};
  if (deflateInit2(&z, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return InternalError("deflateInit2 failed (level {})", level);
  }
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  size_t written = out.size() - z.avail_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return InternalError("deflate failed: {}", rc);
  out.resize(written);
  return out;
}

// Inflates a raw deflate stream, at most `limit` bytes out. Bytes after the end of the
// stream are ignored: Python's avro writes zlib's 4-byte checksum minus one after it.
Status Inflate(std::string_view in, int64_t limit, std::string* out) {
  if (in.size() > std::numeric_limits<uInt>::max())
    return ResourceExhaustedError("block over 4 GiB");
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) return InternalError("inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  out->clear();
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    size_t have = out->size();
    if (static_cast<int64_t>(have) >= limit) {
      inflateEnd(&z);
      return ResourceExhaustedError("inflates to more than {} bytes", limit);
    }
    size_t chunk =
        std::min<size_t>(static_cast<size_t>(limit) - have, std::max<size_t>(have, 64 << 10));
    out->resize(have + chunk);
    z.next_out = reinterpret_cast<Bytef*>(out->data() + have);
    z.avail_out = static_cast<uInt>(chunk);
    rc = inflate(&z, Z_NO_FLUSH);
    out->resize(have + chunk - z.avail_out);
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) {
      inflateEnd(&z);
      return CorruptionError("truncated deflate stream");
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      std::string msg = z.msg ? z.msg : std::to_string(rc);
      inflateEnd(&z);
      return CorruptionError("invalid deflate data: {}", msg);
    }
  }
  inflateEnd(&z);
  return Status::OK();
}

}  // namespace

FileWriter::FileWriter(const Schema& schema, WriterOptions options)
    : schema_(schema), options_(std::move(options)) {
  if (options_.sync) {
    sync_ = *options_.sync;
  } else {
    std::random_device rd;
    for (uint8_t& b : sync_) b = static_cast<uint8_t>(rd());
  }
  out_.append(kMagic);
  WriteLong(static_cast<int64_t>(2 + options_.metadata.size()), &out_);
  WriteBytes("avro.schema", &out_);
  WriteBytes(schema_.ToJson(), &out_);
  WriteBytes("avro.codec", &out_);
  WriteBytes(options_.codec == Codec::kDeflate ? "deflate" : "null", &out_);
  for (size_t i = 0; i < options_.metadata.size(); ++i) {
    const auto& [key, value] = options_.metadata[i];
    if (key.starts_with("avro.")) {
      status_ = InvalidArgumentError("avro file metadata: \"{}\" is reserved", key);
    }
    for (size_t k = 0; k < i; ++k) {
      if (options_.metadata[k].first == key) {
        status_ = InvalidArgumentError("avro file metadata: \"{}\" given twice", key);
      }
    }
    WriteBytes(key, &out_);
    WriteBytes(value, &out_);
  }
  out_.push_back(0);
  out_.append(reinterpret_cast<const char*>(sync_.data()), kSyncSize);
}

Status FileWriter::Append(const Datum& datum) {
  RETURN_IF_ERROR(status_);
  RETURN_IF_ERROR(Encode(schema_.root(), datum, &block_));
  ++block_objects_;
  ++object_count_;
  if (block_.size() >= options_.block_bytes) RETURN_IF_ERROR(FlushBlock());
  return Status::OK();
}

Status FileWriter::FlushBlock() {
  if (block_objects_ == 0) return Status::OK();
  std::string deflated;
  std::string_view payload = block_;
  if (options_.codec == Codec::kDeflate) {
    ASSIGN_OR_RETURN(deflated, Deflate(block_, options_.deflate_level));
    payload = deflated;
  }
  WriteLong(block_objects_, &out_);
  WriteBytes(payload, &out_);
  out_.append(reinterpret_cast<const char*>(sync_.data()), kSyncSize);
  block_.clear();
  block_objects_ = 0;
  return Status::OK();
}

Result<std::string> FileWriter::Finish() {
  RETURN_IF_ERROR(status_);
  RETURN_IF_ERROR(FlushBlock());
  status_ = FailedPreconditionError("avro FileWriter used after Finish()");
  return std::move(out_);
}

const std::string* File::FindMetadata(std::string_view key) const {
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

Result<File> ReadFile(std::string_view bytes, const ReadOptions& options) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return CorruptionError("at byte 0: not an Avro object container file (no \"Obj\\x01\" magic)");
  }
  int64_t budget = options.decode.max_zero_size_values;
  Decoder d(bytes, options.decode, &budget);
  d.Skip(kMagic.size());

  // Header: the metadata map (string keys, bytes values) and the sync marker.
  std::vector<std::pair<std::string, std::string>> metadata;
  while (true) {
    int64_t count;
    size_t block_end;
    RETURN_IF_ERROR(d.ReadBlockCountAt(2, &count, &block_end));
    if (count == 0) break;
    for (int64_t i = 0; i < count; ++i) {
      size_t at = d.pos();
      std::pair<std::string, std::string> e;
      RETURN_IF_ERROR(d.ReadBytesAt(&e.first, "metadata key"));
      RETURN_IF_ERROR(d.ReadBytesAt(&e.second, "metadata value"));
      for (const auto& other : metadata) {
        if (other.first == e.first)
          return d.Error(at, fmt::format("metadata key \"{}\" twice", e.first));
      }
      metadata.push_back(std::move(e));
    }
    if (block_end != 0 && d.pos() != block_end)
      return d.Error(d.pos(), "metadata block size mismatch");
  }
  std::string sync;
  size_t header_end = d.pos();
  RETURN_IF_ERROR(d.ReadFixedAt(kSyncSize, &sync));

  const std::string* schema_json = nullptr;
  const std::string* codec_name = nullptr;
  for (const auto& [k, v] : metadata) {
    if (k == "avro.schema") schema_json = &v;
    if (k == "avro.codec") codec_name = &v;
  }
  if (schema_json == nullptr) return d.Error(header_end, "file metadata has no avro.schema");
  auto schema = Schema::Parse(*schema_json);
  if (!schema.ok()) return d.Error(header_end, "avro.schema: " + schema.status().message());
  Codec codec = Codec::kNull;
  if (codec_name != nullptr && *codec_name == "deflate") {
    codec = Codec::kDeflate;
  } else if (codec_name != nullptr && *codec_name != "null") {
    return Status(StatusCode::kUnimplemented,
                  fmt::format("at byte {}: avro.codec \"{}\" is not supported (null, deflate)",
                              header_end, *codec_name));
  }
  File file{std::move(*schema), codec, std::move(metadata), {}};
  const Node& root = file.schema.root();

  // Data blocks: object count, byte size, the objects, the sync marker.
  std::string inflated;
  while (d.remaining() > 0) {
    size_t block_at = d.pos();
    int64_t count;
    RETURN_IF_ERROR(d.ReadCount(&count));
    size_t size;
    RETURN_IF_ERROR(d.ReadLengthAt(&size, "block"));
    size_t data_at = d.pos();
    std::string_view data = bytes.substr(data_at, size);
    d.Skip(size);
    std::string marker;
    RETURN_IF_ERROR(d.ReadFixedAt(kSyncSize, &marker));
    if (marker != sync) {
      return d.Error(
          d.pos() - kSyncSize,
          fmt::format("sync marker of the block at byte {} does not match the header's", block_at));
    }
    std::function<std::string(size_t)> location;
    if (codec == Codec::kDeflate) {
      Status st = Inflate(data, options.max_block_bytes, &inflated);
      if (!st.ok()) {
        return Status(st.code(),
                      fmt::format("at byte {}: deflate block: {}", data_at, st.message()));
      }
      data = inflated;
      location = [block_at](size_t at) {
        return fmt::format("in the deflate block at byte {}, at byte {} of its data", block_at, at);
      };
    } else {
      if (static_cast<int64_t>(size) > options.max_block_bytes) {
        return ResourceExhaustedError("at byte {}: block of {} bytes, over the limit of {}",
                                      block_at, size, options.max_block_bytes);
      }
      location = [data_at](size_t at) { return fmt::format("at byte {}", data_at + at); };
    }
    Decoder block(data, options.decode, &budget);
    block.set_location(std::move(location));
    // The count is checked against the block's own bytes.
    {
      if (root.min_size > 0 &&
          static_cast<uint64_t>(count) > data.size() / static_cast<uint64_t>(root.min_size)) {
        return d.Error(block_at,
                       fmt::format("block of {} objects in {} bytes", count, data.size()));
      }
      if (root.min_size == 0) {
        if (count > budget) {
          return d.Error(
              block_at,
              fmt::format("block of {} objects that take no bytes is over the limit of {}", count,
                          options.decode.max_zero_size_values));
        }
        budget -= count;
      }
    }
    for (int64_t i = 0; i < count; ++i) {
      Datum obj;
      RETURN_IF_ERROR(block.ReadValue(root, &obj));
      file.objects.push_back(std::move(obj));
    }
    if (block.remaining() != 0) {
      return block.Error(block.pos(), fmt::format("{} bytes after the block's {} objects",
                                                  block.remaining(), count));
    }
  }
  return file;
}

}  // namespace sluice::lake::avro
