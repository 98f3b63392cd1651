// avro: the binary decoder over a byte range, shared by Decode() and the file reader.
// Private to src/lake. Every read checks the bytes left; errors are Corruption statuses
// that say where ("at byte 812: data_file.record_count: truncated varint").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/utf8.h"
#include "lake/avro.h"

namespace sluice::lake::avro {

// Appends the zig-zag varint of `v`.
void WriteLong(int64_t v, std::string* out);
using sluice::IsValidUtf8;

// Reads values from `data`, which must outlive it. `*zero_budget` is how many values that
// take no bytes may still be declared (shared by every Decoder of one file).
class Decoder {
 public:
  Decoder(std::string_view data, const DecodeOptions& options, int64_t* zero_budget);

  // How an offset into `data` is described in errors; "at byte N" by default.
  void set_location(std::function<std::string(size_t)> location) {
    location_ = std::move(location);
  }

  size_t pos() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  void Skip(size_t n) { pos_ += n; }  // n <= remaining()

  // Each returns a formatted error (location, path, what).
  Status ReadValue(const Node& n, Datum* out);
  // A non-negative count (bounded by the caller).
  Status ReadCount(int64_t* count);
  Status ReadLengthAt(size_t* n, std::string_view what);
  Status ReadBlockCountAt(int64_t min_size, int64_t* count, size_t* block_end);
  Status ReadBytesAt(std::string* out, std::string_view what);
  Status ReadFixedAt(size_t n, std::string* out);
  Status Error(size_t at, std::string_view what);

 private:
  // The raw readers: on error they record where (Fail) and return the bare reason.
  Status Fail(size_t at, std::string_view what);
  Status AddPath(Status st, std::string segment) {
    error_path_.push_back(std::move(segment));
    return st;
  }
  Status Format(const Status& raw);
  Status Read(const Node& n, Datum* out, int depth);
  Status ReadLong(int64_t* v);
  Status ReadInt(int32_t* v);
  Status ReadLength(size_t* n, std::string_view what);
  Status ReadBytes(std::string* out, std::string_view what);
  Status ReadFixed(size_t n, std::string* out);
  Status ChargeCount(int64_t count, int64_t min_size, size_t at);
  Status ReadBlockCount(int64_t min_size, int64_t* count, size_t* block_end);
  Status CheckBlockEnd(size_t block_end, size_t start);

  std::string_view data_;
  size_t pos_ = 0;
  const DecodeOptions& options_;
  int64_t* zero_budget_;
  std::function<std::string(size_t)> location_;
  size_t fail_at_ = 0;
  std::vector<std::string> error_path_;  // innermost first
};

}  // namespace sluice::lake::avro
