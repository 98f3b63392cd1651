// Internal to src/schema: Avro's binary encoding read over a bounds-checked cursor (booleans,
// zig-zag varints, lengths, fixed sizes, block counts), shared by the row decoder (decoder.cc) and
// the console's JSON walker (schema/message_json.cc). Inline and without virtual calls: the
// decoder reads millions of messages a second through it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace sluice::schema::avro {

// Items that take no bytes (nulls, empty records) one value may declare.
inline constexpr int64_t kMaxZeroSizeItems = 1 << 16;

// The reads of [p_, end_), a base of the class walking the values (CRTP, so that every read
// inlines), which reports failures its own way and words two of them in its own words:
//   bool FailAt(const uint8_t* at, std::string problem);  // returns false
//   static std::string FixedPastEndText(int64_t size, int64_t bytes_left);
//   static std::string ZeroSizeItemsText(int64_t count);
// A failed read returns false after FailAt, at the start of what it read. Owned by the
// thread of its Derived.
template <typename Derived>
class BinaryReader {
 protected:
  // Reads `bytes` (which must remain live while read) from their start, with a fresh
  // budget of items that take no bytes.
  void Reset(std::string_view bytes) {
    p_ = reinterpret_cast<const uint8_t*>(bytes.data());
    end_ = p_ + bytes.size();
    zero_budget_ = kMaxZeroSizeItems;
  }

  // boolean: one byte, 0 or 1.
  bool ReadBoolean(bool* v) {
    if (p_ == end_) return Self().FailAt(p_, "truncated boolean");
    if (*p_ > 1) return Self().FailAt(p_, fmt::format("invalid boolean byte {}", *p_));
    *v = *p_++ == 1;
    return true;
  }

  // int and long: a zig-zag varint.
  bool ReadLong(int64_t* v) {
    const uint8_t* start = p_;
    if (p_ < end_ && *p_ < 0x80) {
      uint64_t x = *p_++;
      *v = static_cast<int64_t>(x >> 1) ^ -static_cast<int64_t>(x & 1);
      return true;
    }
    uint64_t x = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ == end_) return Self().FailAt(start, "truncated varint");
      if (shift > 63) return Self().FailAt(start, "varint longer than 10 bytes");
      uint8_t b = *p_++;
      x |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) break;
    }
    *v = static_cast<int64_t>(x >> 1) ^ -static_cast<int64_t>(x & 1);
    return true;
  }

  bool ReadInt(int64_t* v) {
    const uint8_t* start = p_;
    if (!ReadLong(v)) return false;
    if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
      return Self().FailAt(start, fmt::format("int {} out of range", *v));
    }
    return true;
  }

  // bytes and string: a length, then that many bytes.
  bool ReadBytes(std::string_view* out) {
    const uint8_t* start = p_;
    int64_t n;
    if (!ReadLong(&n)) return false;
    if (n < 0) return Self().FailAt(start, fmt::format("negative length {}", n));
    if (n > end_ - p_) {
      return Self().FailAt(start,
                           fmt::format("length {} past the end ({} bytes left)", n, end_ - p_));
    }
    *out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return true;
  }

  bool ReadFixed(int64_t size, std::string_view* out) {
    if (size > end_ - p_) return Self().FailAt(p_, Derived::FixedPastEndText(size, end_ - p_));
    *out = std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(size));
    p_ += size;
    return true;
  }

  // A block's item count (0 ends the array or map), bounded by the bytes left: items of at
  // least `min_size` bytes each, or (0) by the budget of items that take no bytes.
  bool ReadBlockCount(int64_t min_size, int64_t* count) {
    const uint8_t* start = p_;
    if (!ReadLong(count)) return false;
    if (*count < 0) {
      if (*count == std::numeric_limits<int64_t>::min()) {
        return Self().FailAt(start, "invalid block count");
      }
      *count = -*count;
      int64_t bytes;
      if (!ReadLong(&bytes)) return false;
      if (bytes < 0 || bytes > end_ - p_) {
        return Self().FailAt(
            start, fmt::format("block size {} past the end ({} bytes left)", bytes, end_ - p_));
      }
    }
    if (min_size > 0) {
      if (*count > (end_ - p_) / min_size) {
        return Self().FailAt(
            start, fmt::format("{} items cannot fit in the {} bytes left", *count, end_ - p_));
      }
    } else {
      zero_budget_ -= *count;
      if (zero_budget_ < 0) return Self().FailAt(start, Derived::ZeroSizeItemsText(*count));
    }
    return true;
  }

  const uint8_t* p_ = nullptr;
  const uint8_t* end_ = nullptr;
  int64_t zero_budget_ = kMaxZeroSizeItems;

 private:
  Derived& Self() { return static_cast<Derived&>(*this); }
};

}  // namespace sluice::schema::avro
