// Primitive Iceberg values and their single-value binary serialization (table spec
// Appendix D): the bytes of manifest lower/upper bounds and of partition summaries.
//
//   ASSIGN_OR_RETURN(Bytes b, ToSingleValueBinary(Type::Primitive(TypeId::kLong),
//   Value::Long(34))); ASSIGN_OR_RETURN(Value v, FromSingleValueBinary(type, b));
//
// A Value does not carry its Iceberg type; the type travels beside it. Representations:
//   boolean -> bool;  int, date (days from 1970-01-01) -> int32_t;
//   long, time (µs from midnight), timestamp[tz] (µs from the epoch),
//   timestamp[tz]_ns (ns from the epoch) -> int64_t;  float; double;
//   string -> std::string (UTF-8);  fixed, binary -> Bytes;  uuid -> Uuid (16 bytes, big-endian);
//   decimal(P,S) -> DecimalValue (the unscaled integer; S comes from the type).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "lake/iceberg_schema.h"

namespace sluice::lake {

using Bytes = std::vector<uint8_t>;
using Uuid = std::array<uint8_t, 16>;

// A decimal's unscaled value: 38 digits need 127 bits.
struct DecimalValue {
  __int128 unscaled = 0;
  bool operator==(const DecimalValue& other) const = default;
};

// A primitive value or null.
struct Value {
  using Storage = std::variant<std::monostate, bool, int32_t, int64_t, float, double, std::string,
                               Bytes, Uuid, DecimalValue>;
  Storage data;

  static Value Null() { return Value{}; }
  static Value Boolean(bool v) { return Value{Storage(v)}; }
  static Value Int(int32_t v) { return Value{Storage(v)}; }
  static Value Long(int64_t v) { return Value{Storage(v)}; }
  static Value Float(float v) { return Value{Storage(v)}; }
  static Value Double(double v) { return Value{Storage(v)}; }
  static Value String(std::string v) { return Value{Storage(std::move(v))}; }
  static Value Binary(Bytes v) { return Value{Storage(std::move(v))}; }
  static Value UuidValue(const Uuid& v) { return Value{Storage(v)}; }
  static Value Decimal(__int128 unscaled) { return Value{Storage(DecimalValue{unscaled})}; }

  bool is_null() const { return std::holds_alternative<std::monostate>(data); }
  // The value as this representation; asserted (check with CheckValueType first).
  bool as_bool() const { return Get<bool>(); }
  int32_t as_int() const { return Get<int32_t>(); }
  int64_t as_long() const { return Get<int64_t>(); }
  float as_float() const { return Get<float>(); }
  double as_double() const { return Get<double>(); }
  const std::string& as_string() const { return Get<std::string>(); }
  const Bytes& as_bytes() const { return Get<Bytes>(); }
  const Uuid& as_uuid() const { return Get<Uuid>(); }
  __int128 as_unscaled() const { return Get<DecimalValue>().unscaled; }

  // For messages and tests: "34", "\"ice\"", "0x0102", "null".
  std::string ToString() const;
  bool operator==(const Value& other) const = default;

 private:
  template <typename T>
  const T& Get() const {
    const T* p = std::get_if<T>(&data);
    if (p == nullptr) AssertionFailed("Value holds another representation", __FILE__, __LINE__);
    return *p;
  }
};

// OK when `value` is null or holds the representation of primitive `type` (fixed: exactly
// L bytes; decimal: at most P digits).
Status CheckValueType(const Type& type, const Value& value);

// Appendix D. Null and nested types are errors.
Result<Bytes> ToSingleValueBinary(const Type& type, const Value& value);
// Reads the bytes as `type`. Bounds written before a type promotion are read as the spec
// requires: 4 bytes for a long are an int, 4 bytes for a double are a float (widened).
Result<Value> FromSingleValueBinary(const Type& type, const uint8_t* data, size_t size);
inline Result<Value> FromSingleValueBinary(const Type& type, const Bytes& bytes) {
  return FromSingleValueBinary(type, bytes.data(), bytes.size());
}

// Two's-complement big-endian in the fewest bytes that hold the value (at least one), as
// Java's BigInteger.toByteArray(): used for decimals here and for bucket hashing.
Bytes MinimalBigEndian(__int128 v);

// Calendar helpers (proleptic Gregorian, UTC).
int32_t DaysFromCivil(int64_t year, unsigned month, unsigned day);
void CivilFromDays(int64_t days, int64_t* year, unsigned* month, unsigned* day);

// "f79c3e09-677c-4bbd-a479-3f349cb785e7" <-> 16 big-endian bytes (lowercase on output).
Result<Uuid> ParseUuid(std::string_view text);
std::string UuidToString(const Uuid& uuid);

// "14.20" for unscaled 1420 at scale 2.
std::string DecimalToString(__int128 unscaled, int32_t scale);

}  // namespace sluice::lake
