// Iceberg partition transforms (table spec "Partition Transforms", Appendix B): identity,
// bucket[N], truncate[W], year, month, day, hour, void. Parsed from and printed to the
// spec's strings, with the source types each accepts, its result type, and its value.
//
//   ASSIGN_OR_RETURN(Transform t, Transform::Parse("bucket[16]"));
//   ASSIGN_OR_RETURN(Value v, t.Apply(Type::Primitive(TypeId::kLong), Value::Long(34)));
//
// A transform this code does not know is kept as kUnknown with its text (v2 readers must
// ignore unknown transforms, and metadata must round-trip); it cannot be applied.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "lake/iceberg_schema.h"
#include "lake/single_value.h"

namespace sluice::lake {

enum class TransformKind {
  kIdentity,
  kBucket,    // param = N >= 1
  kTruncate,  // param = W >= 1
  kYear,
  kMonth,
  kDay,
  kHour,
  kVoid,
  kUnknown,  // text() holds the original string
};

class Transform {
 public:
  Transform() = default;
  static Transform Identity() { return Transform(TransformKind::kIdentity, 0); }
  static Transform Bucket(int32_t n) { return Transform(TransformKind::kBucket, n); }
  static Transform Truncate(int32_t w) { return Transform(TransformKind::kTruncate, w); }
  static Transform Year() { return Transform(TransformKind::kYear, 0); }
  static Transform Month() { return Transform(TransformKind::kMonth, 0); }
  static Transform Day() { return Transform(TransformKind::kDay, 0); }
  static Transform Hour() { return Transform(TransformKind::kHour, 0); }
  static Transform Void() { return Transform(TransformKind::kVoid, 0); }

  // "identity", "bucket[16]", "truncate[10]", "year", "month", "day", "hour", "void"
  // (names case-insensitive, as Java's Transforms.fromString). A malformed parameter
  // ("bucket[0]", "bucket[x]") is an error; any other unknown name parses as kUnknown.
  static Result<Transform> Parse(std::string_view text);

  TransformKind kind() const { return kind_; }
  int32_t param() const { return param_; }
  // The spec string; for kUnknown the original text.
  std::string ToString() const;

  // Whether this transform accepts values of `source` (a primitive type). kUnknown accepts
  // nothing.
  bool CanTransform(const Type& source) const;
  // The partition value's type: int for bucket/year/month/day/hour (as the spec's table
  // says), the source type for identity/truncate/void.
  Result<Type> ResultType(const Type& source) const;
  // The partition value for `value` of type `source`; null in, null out.
  Result<Value> Apply(const Type& source, const Value& value) const;

  bool operator==(const Transform& other) const = default;

 private:
  Transform(TransformKind kind, int32_t param) : kind_(kind), param_(param) {}
  TransformKind kind_ = TransformKind::kIdentity;
  int32_t param_ = 0;
  std::string unknown_;  // kUnknown only
};

// MurmurHash3_x86_32 with seed 0 (Appendix B's hash).
uint32_t Murmur3X86_32(const uint8_t* data, size_t size, uint32_t seed = 0);

// Appendix B's hash of `value` of type `source`, as Java's signed int: ints, dates and
// longs are hashed as 8-byte little-endian longs, timestamp_ns after converting to
// microseconds, decimals as their minimal big-endian unscaled bytes, strings as UTF-8,
// uuids as 16 big-endian bytes. Defined for the types bucket accepts.
Result<int32_t> BucketHash(const Type& source, const Value& value);

}  // namespace sluice::lake
