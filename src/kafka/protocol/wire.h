// Primitive types of the Kafka wire protocol: a bounds-checked Reader and an appending
// Writer. Field order, types and versions of each message come from Kafka's JSON message
// definitions; the messages in this folder are written against them by hand.
//
// The Reader is sticky: after the first error every read returns a zero value and
// ok() stays false; status() names the field and byte position of the first error.
// Decoders read all their fields, then check ok() once.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::kafka {

// A Kafka UUID (topic ids). All zeros is the "null" id.
struct Uuid {
  uint64_t hi = 0, lo = 0;
  bool IsZero() const { return hi == 0 && lo == 0; }
  bool operator==(const Uuid&) const = default;
  // Kafka's text form: URL-safe base64 without padding, 22 characters.
  std::string ToString() const;
};

// One unknown tagged field, kept so a message can be re-encoded unchanged.
struct RawTaggedField {
  uint32_t tag;
  std::vector<uint8_t> data;
  bool operator==(const RawTaggedField&) const = default;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes)
      : p_(bytes.data()), begin_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  bool ok() const { return error_.empty(); }
  Status status() const;  // InvalidArgument naming the field and position, or OK
  size_t position() const { return static_cast<size_t>(p_ - begin_); }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }

  // `field` names what is being read, for the error message.
  int8_t Int8(const char* field);
  int16_t Int16(const char* field);
  int32_t Int32(const char* field);
  int64_t Int64(const char* field);
  uint16_t Uint16(const char* field);
  uint32_t Uint32(const char* field);
  double Float64(const char* field);
  bool Bool(const char* field);
  int32_t Varint(const char* field);
  int64_t Varlong(const char* field);
  uint32_t UnsignedVarint(const char* field);
  Uuid ReadUuid(const char* field);

  // Strings: non-flexible versions use an int16 length, flexible ones a compact length.
  std::string String(bool flexible, const char* field);
  std::optional<std::string> NullableString(bool flexible, const char* field);
  std::vector<uint8_t> Bytes(bool flexible, const char* field);
  std::optional<std::vector<uint8_t>> NullableBytes(bool flexible, const char* field);
  // Bytes without copying: a view into the buffer (valid while the buffer is).
  std::optional<std::span<const uint8_t>> NullableBytesView(bool flexible, const char* field);

  // An array length: int32 (-1 = null) or compact (0 = null). Returns -1 for null. A
  // length that cannot fit in what is left (each element takes at least `min_element_bytes`)
  // is an error, so no caller allocates for a lying length.
  int32_t ArrayLength(bool flexible, const char* field, size_t min_element_bytes = 1);

  // Tagged fields (flexible versions only): calls `known(tag, reader_over_value)` for each;
  // `known` returns false for tags it does not know, which are kept in `unknown` (when not
  // null) or skipped.
  template <typename F>
  void TaggedFields(F&& known, std::vector<RawTaggedField>* unknown = nullptr);

  // Marks the reader failed with a message (for checks decoders make themselves).
  void Fail(const char* field, std::string_view why);

 private:
  bool Need(size_t n, const char* field);

  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  std::string error_;
  size_t error_pos_ = 0;
};

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>* out) : out_(out) {}

  void Int8(int8_t v) { out_->push_back(static_cast<uint8_t>(v)); }
  void Int16(int16_t v);
  void Int32(int32_t v);
  void Int64(int64_t v);
  void Uint16(uint16_t v) { Int16(static_cast<int16_t>(v)); }
  void Uint32(uint32_t v) { Int32(static_cast<int32_t>(v)); }
  void Float64(double v);
  void Bool(bool v) { Int8(v ? 1 : 0); }
  void Varint(int32_t v);
  void Varlong(int64_t v);
  void UnsignedVarint(uint32_t v);
  void WriteUuid(const Uuid& u);

  void String(bool flexible, std::string_view s);
  void NullableString(bool flexible, const std::optional<std::string>& s);
  void Bytes(bool flexible, std::span<const uint8_t> b);
  void NullableBytes(bool flexible, const std::optional<std::vector<uint8_t>>& b);
  void NullableBytesView(bool flexible, std::optional<std::span<const uint8_t>> b);
  void ArrayLength(bool flexible, int32_t n);  // -1 = null
  // Tagged fields: `count` known ones written by the caller after this call with
  // TaggedField(), plus `unknown`, in increasing tag order. For the common "none":
  // EmptyTaggedFields().
  void EmptyTaggedFields() { UnsignedVarint(0); }
  void TaggedFieldHeader(uint32_t tag, uint32_t size);
  void Raw(std::span<const uint8_t> bytes) {
    out_->insert(out_->end(), bytes.begin(), bytes.end());
  }

  // Records that come from elsewhere (a segment file sent with sendfile): marks that
  // `size` bytes identified by `token` belong at the current position, without copying
  // them. The caller writes the length prefix first. A response with splices is sent as
  // buffer pieces interleaved with the spliced data; tests materialize it with Splices().
  struct Splice {
    size_t buffer_pos;  // where in the buffer the spliced bytes go
    uint64_t size;
    uint32_t token;
  };
  void AddSplice(uint64_t size, uint32_t token) { splices_.push_back({out_->size(), size, token}); }
  const std::vector<Splice>& splices() const { return splices_; }
  // Total bytes of the message: buffer plus spliced data.
  uint64_t total_size() const;

  size_t size() const { return out_->size(); }
  std::vector<uint8_t>& buffer() { return *out_; }

 private:
  std::vector<uint8_t>* out_;
  std::vector<Splice> splices_;
};

template <typename F>
void Reader::TaggedFields(F&& known, std::vector<RawTaggedField>* unknown) {
  uint32_t n = UnsignedVarint("tagged fields count");
  int64_t last_tag = -1;
  for (uint32_t i = 0; i < n && ok(); ++i) {
    uint32_t tag = UnsignedVarint("tag");
    uint32_t size = UnsignedVarint("tagged field size");
    if (!ok()) return;
    if (static_cast<int64_t>(tag) <= last_tag) {
      Fail("tagged fields", "tags are not in increasing order");
      return;
    }
    last_tag = tag;
    if (!Need(size, "tagged field")) return;
    Reader sub(std::span<const uint8_t>(p_, size));
    if (!known(tag, sub)) {
      if (unknown != nullptr) unknown->push_back({tag, std::vector<uint8_t>(p_, p_ + size)});
    } else if (!sub.ok()) {
      Fail("tagged field", sub.error_);
      return;
    }
    p_ += size;
  }
}

}  // namespace sluice::kafka
