// Helpers shared by the message codecs in this folder (not a public API): smallest
// encodings for ArrayLength's bound, tagged-field sections with only unknown tags,
// arrays with a per-element callback, error codes.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::kafka::codec {

// Smallest encodings of one element, so a count that cannot fit in the bytes left fails
// before anything is allocated (Reader::ArrayLength).
constexpr size_t MinString(bool flexible) { return flexible ? 1 : 2; }
constexpr size_t MinBytes(bool flexible) { return flexible ? 1 : 4; }
constexpr size_t MinArray(bool flexible) { return flexible ? 1 : 4; }
constexpr size_t MinTags(bool flexible) { return flexible ? 1 : 0; }

// A tagged-field section with no known fields: every tag goes to `unknown`.
inline void ReadTags(Reader& r, bool flexible, std::vector<RawTaggedField>* unknown) {
  if (flexible) r.TaggedFields([](uint32_t, Reader&) { return false; }, unknown);
}

inline void WriteTags(Writer& w, bool flexible, const std::vector<RawTaggedField>& unknown) {
  if (!flexible) return;
  w.UnsignedVarint(static_cast<uint32_t>(unknown.size()));
  for (const RawTaggedField& t : unknown) {
    w.TaggedFieldHeader(t.tag, static_cast<uint32_t>(t.data.size()));
    w.Raw(t.data);
  }
}

inline ErrorCode ReadErrorCode(Reader& r, const char* field) {
  return static_cast<ErrorCode>(r.Int16(field));
}
inline void WriteErrorCode(Writer& w, ErrorCode e) { w.Int16(static_cast<int16_t>(e)); }

// A non-nullable array into `out` (cleared first): null is an error, as in Kafka.
// `read_one(T&)` fills one element.
template <typename T, typename F>
void ReadArray(Reader& r, bool flexible, const char* field, size_t min_element_bytes,
               std::vector<T>& out, F&& read_one) {
  out.clear();
  int32_t n = r.ArrayLength(flexible, field, min_element_bytes);
  if (!r.ok()) return;
  if (n < 0) {
    r.Fail(field, "null where an array is required");
    return;
  }
  out.reserve(static_cast<size_t>(n));  // bounded by the bytes left, see ArrayLength
  for (int32_t i = 0; i < n && r.ok(); ++i) read_one(out.emplace_back());
}
template <typename T, typename F>
void ReadArray(Reader& r, bool flexible, const char* field, size_t min_element_bytes,
               std::vector<T>* out, F&& read_one) {
  ReadArray(r, flexible, field, min_element_bytes, *out, std::forward<F>(read_one));
}

template <typename T, typename F>
void ReadNullableArray(Reader& r, bool flexible, const char* field, size_t min_element_bytes,
                       std::optional<std::vector<T>>& out, F&& read_one) {
  out.reset();
  int32_t n = r.ArrayLength(flexible, field, min_element_bytes);
  if (!r.ok() || n < 0) return;
  out.emplace();
  out->reserve(static_cast<size_t>(n));
  for (int32_t i = 0; i < n && r.ok(); ++i) read_one(out->emplace_back());
}
template <typename T, typename F>
void ReadNullableArray(Reader& r, bool flexible, const char* field, size_t min_element_bytes,
                       std::optional<std::vector<T>>* out, F&& read_one) {
  ReadNullableArray(r, flexible, field, min_element_bytes, *out, std::forward<F>(read_one));
}

template <typename T, typename F>
void WriteArray(Writer& w, bool flexible, const std::vector<T>& v, F&& write_one) {
  w.ArrayLength(flexible, static_cast<int32_t>(v.size()));
  for (const T& e : v) write_one(e);
}

template <typename T, typename F>
void WriteNullableArray(Writer& w, bool flexible, const std::optional<std::vector<T>>& v,
                        F&& write_one) {
  if (!v) {
    w.ArrayLength(flexible, -1);
    return;
  }
  WriteArray(w, flexible, *v, std::forward<F>(write_one));
}

inline void ReadStrings(Reader& r, bool flexible, const char* field,
                        std::vector<std::string>& out) {
  ReadArray(r, flexible, field, MinString(flexible), out,
            [&](std::string& s) { s = r.String(flexible, field); });
}
inline void ReadStrings(Reader& r, bool flexible, const char* field,
                        std::vector<std::string>* out) {
  ReadStrings(r, flexible, field, *out);
}
inline void WriteStrings(Writer& w, bool flexible, const std::vector<std::string>& v) {
  WriteArray(w, flexible, v, [&](const std::string& s) { w.String(flexible, s); });
}

inline void ReadInt32s(Reader& r, bool flexible, const char* field, std::vector<int32_t>& out) {
  ReadArray(r, flexible, field, 4, out, [&](int32_t& v) { v = r.Int32(field); });
}
inline void WriteInt32s(Writer& w, bool flexible, const std::vector<int32_t>& v) {
  WriteArray(w, flexible, v, [&](int32_t x) { w.Int32(x); });
}

// OK, or the reader's error with "<message> v<version>" in front.
inline Status Finish(const Reader& r, std::string_view message, int16_t version) {
  if (r.ok()) return Status::OK();
  return r.status().WithContext(fmt::format("{} v{}", message, version));
}

// The JSON's validVersions (all start at 0) and first flexible version of one API, for
// the families whose Decode rejects versions the JSON does not list (admin, txn).
struct ApiSpec {
  const char* name;
  int16_t max;
  int16_t flexible_from;  // > max: never flexible
};

// `kind` is "Request" or "Response".
inline Status CheckVersion(const ApiSpec& api, const char* kind, int16_t version) {
  if (version >= 0 && version <= api.max) return Status::OK();
  return InvalidArgumentError("{}{} v{}: unsupported version (0-{})", api.name, kind, version,
                              api.max);
}

inline Status Finish(const Reader& r, const ApiSpec& api, const char* kind, int16_t version) {
  return Finish(r, fmt::format("{}{}", api.name, kind), version);
}

}  // namespace sluice::kafka::codec
