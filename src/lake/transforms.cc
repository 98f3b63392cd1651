#include "lake/transforms.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "base/strings.h"

namespace sluice::lake {

namespace {

constexpr int64_t kMicrosPerHour = 3'600'000'000LL;
constexpr int64_t kMicrosPerDay = 86'400'000'000LL;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

bool IsTimestamp(TypeId id) {
  return id == TypeId::kTimestamp || id == TypeId::kTimestampTz || id == TypeId::kTimestampNs ||
         id == TypeId::kTimestampTzNs;
}

bool IsNanos(TypeId id) { return id == TypeId::kTimestampNs || id == TypeId::kTimestampTzNs; }

// A timestamp value in microseconds (nanosecond types are floored to microseconds).
int64_t TimestampMicros(const Type& type, int64_t v) {
  return IsNanos(type.id) ? FloorDiv(v, 1000) : v;
}

// Days from the epoch of a date or timestamp value.
int64_t DaysOf(const Type& type, const Value& v) {
  if (type.id == TypeId::kDate) return v.as_int();
  return FloorDiv(TimestampMicros(type, v.as_long()), kMicrosPerDay);
}

}  // namespace

Result<Transform> Transform::Parse(std::string_view text) {
  std::string lower = AsciiLower(text);
  if (lower == "identity") return Identity();
  if (lower == "year") return Year();
  if (lower == "month") return Month();
  if (lower == "day") return Day();
  if (lower == "hour") return Hour();
  if (lower == "void") return Void();
  for (auto [prefix, kind] : {std::pair{std::string_view("bucket["), TransformKind::kBucket},
                              std::pair{std::string_view("truncate["), TransformKind::kTruncate}}) {
    if (lower.compare(0, prefix.size(), prefix) != 0) continue;
    std::string_view inner(lower);
    inner.remove_prefix(prefix.size());
    if (inner.empty() || inner.back() != ']') {
      return InvalidArgumentError("transform \"{}\": expected {}<n>]", text, prefix);
    }
    inner.remove_suffix(1);
    int32_t n = 0;
    auto [ptr, ec] = std::from_chars(inner.data(), inner.data() + inner.size(), n);
    if (inner.empty() || ec != std::errc() || ptr != inner.data() + inner.size() || n < 1) {
      return InvalidArgumentError("transform \"{}\": the parameter must be a positive int", text);
    }
    return Transform(kind, n);
  }
  if (text.empty()) return InvalidArgumentError("empty transform");
  Transform t(TransformKind::kUnknown, 0);
  t.unknown_ = std::string(text);
  return t;
}

std::string Transform::ToString() const {
  switch (kind_) {
    case TransformKind::kIdentity:
      return "identity";
    case TransformKind::kBucket:
      return fmt::format("bucket[{}]", param_);
    case TransformKind::kTruncate:
      return fmt::format("truncate[{}]", param_);
    case TransformKind::kYear:
      return "year";
    case TransformKind::kMonth:
      return "month";
    case TransformKind::kDay:
      return "day";
    case TransformKind::kHour:
      return "hour";
    case TransformKind::kVoid:
      return "void";
    case TransformKind::kUnknown:
      return unknown_;
  }
  return unknown_;
}

bool Transform::CanTransform(const Type& source) const {
  if (!source.is_primitive()) return false;
  TypeId id = source.id;
  switch (kind_) {
    case TransformKind::kIdentity:
    case TransformKind::kVoid:
      return true;
    case TransformKind::kBucket:
      return id == TypeId::kInt || id == TypeId::kLong || id == TypeId::kDecimal ||
             id == TypeId::kDate || id == TypeId::kTime || IsTimestamp(id) ||
             id == TypeId::kString || id == TypeId::kUuid || id == TypeId::kFixed ||
             id == TypeId::kBinary;
    case TransformKind::kTruncate:
      return id == TypeId::kInt || id == TypeId::kLong || id == TypeId::kDecimal ||
             id == TypeId::kString || id == TypeId::kBinary;
    case TransformKind::kYear:
    case TransformKind::kMonth:
    case TransformKind::kDay:
      return id == TypeId::kDate || IsTimestamp(id);
    case TransformKind::kHour:
      return IsTimestamp(id);
    case TransformKind::kUnknown:
      return false;
  }
  return false;
}

Result<Type> Transform::ResultType(const Type& source) const {
  if (!CanTransform(source)) {
    return InvalidArgumentError("transform {} cannot be applied to {}", ToString(),
                                source.ToString());
  }
  switch (kind_) {
    case TransformKind::kIdentity:
    case TransformKind::kTruncate:
    case TransformKind::kVoid:
      return source;
    default:
      return Type::Primitive(TypeId::kInt);
  }
}

uint32_t Murmur3X86_32(const uint8_t* data, size_t size, uint32_t seed) {
  constexpr uint32_t c1 = 0xcc9e2d51;
  constexpr uint32_t c2 = 0x1b873593;
  auto rotl = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  uint32_t h = seed;
  const size_t blocks = size / 4;
  for (size_t i = 0; i < blocks; ++i) {
    const uint8_t* p = data + i * 4;
    uint32_t k = static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
                 (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
    k *= c1;
    k = rotl(k, 15);
    k *= c2;
    h ^= k;
    h = rotl(h, 13);
    h = h * 5 + 0xe6546b64;
  }
  const uint8_t* tail = data + blocks * 4;
  uint32_t k = 0;
  switch (size & 3) {
    case 3:
      k ^= static_cast<uint32_t>(tail[2]) << 16;
      [[fallthrough]];
    case 2:
      k ^= static_cast<uint32_t>(tail[1]) << 8;
      [[fallthrough]];
    case 1:
      k ^= tail[0];
      k *= c1;
      k = rotl(k, 15);
      k *= c2;
      h ^= k;
  }
  h ^= static_cast<uint32_t>(size);
  h ^= h >> 16;
  h *= 0x85ebca6b;
  h ^= h >> 13;
  h *= 0xc2b2ae35;
  h ^= h >> 16;
  return h;
}

namespace {

int32_t HashBytes(const uint8_t* data, size_t size) {
  return static_cast<int32_t>(Murmur3X86_32(data, size));
}

int32_t HashLong(int64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
  return HashBytes(le, 8);
}

}  // namespace

Result<int32_t> BucketHash(const Type& source, const Value& value) {
  if (!Transform::Bucket(1).CanTransform(source)) {
    return InvalidArgumentError("{} values cannot be bucketed", source.ToString());
  }
  if (value.is_null()) return InvalidArgumentError("null has no bucket hash");
  RETURN_IF_ERROR(CheckValueType(source, value));
  switch (source.id) {
    case TypeId::kInt:
    case TypeId::kDate:
      return HashLong(value.as_int());
    case TypeId::kLong:
    case TypeId::kTime:
      return HashLong(value.as_long());
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTzNs:
      return HashLong(TimestampMicros(source, value.as_long()));
    case TypeId::kDecimal: {
      Bytes b = MinimalBigEndian(value.as_unscaled());
      return HashBytes(b.data(), b.size());
    }
    case TypeId::kString: {
      const std::string& s = value.as_string();
      return HashBytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
    case TypeId::kUuid:
      return HashBytes(value.as_uuid().data(), 16);
    default:
      return HashBytes(value.as_bytes().data(), value.as_bytes().size());
  }
}

Result<Value> Transform::Apply(const Type& source, const Value& value) const {
  if (kind_ == TransformKind::kUnknown) {
    return UnimplementedError("transform \"{}\" is not supported", unknown_);
  }
  if (!CanTransform(source)) {
    return InvalidArgumentError("transform {} cannot be applied to {}", ToString(),
                                source.ToString());
  }
  RETURN_IF_ERROR(CheckValueType(source, value));
  if (value.is_null() || kind_ == TransformKind::kVoid) return Value::Null();
  switch (kind_) {
    case TransformKind::kIdentity:
      return value;
    case TransformKind::kBucket: {
      ASSIGN_OR_RETURN(int32_t hash, BucketHash(source, value));
      return Value::Int((hash & std::numeric_limits<int32_t>::max()) % param_);
    }
    case TransformKind::kTruncate:
      switch (source.id) {
        case TypeId::kInt: {
          int64_t v = value.as_int();
          return Value::Int(static_cast<int32_t>(v - (((v % param_) + param_) % param_)));
        }
        case TypeId::kLong: {
          // v - ((v % W + W) % W) can leave the long range near its minimum; Java wraps the
          // same way, so compute in unsigned arithmetic to match it without overflow.
          int64_t v = value.as_long();
          int64_t r = ((v % param_) + param_) % param_;
          return Value::Long(
              static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(r)));
        }
        case TypeId::kDecimal: {
          __int128 v = value.as_unscaled();
          __int128 r = ((v % param_) + param_) % param_;
          Value out = Value::Decimal(v - r);
          // Truncating down can add a digit (-999.9 -> -1000.0 at W=10, scale 1).
          RETURN_IF_ERROR(CheckValueType(source, out).WithContext("truncate"));
          return out;
        }
        case TypeId::kString: {
          const std::string& s = value.as_string();
          size_t points = 0;
          size_t end = 0;
          while (end < s.size()) {
            if ((static_cast<unsigned char>(s[end]) & 0xC0) != 0x80) {
              if (points == static_cast<size_t>(param_)) break;
              ++points;
            }
            ++end;
          }
          return Value::String(s.substr(0, end));
        }
        default: {
          const Bytes& b = value.as_bytes();
          return Value::Binary(Bytes(b.begin(), b.begin() + std::min<size_t>(b.size(), param_)));
        }
      }
    case TransformKind::kYear:
    case TransformKind::kMonth: {
      int64_t year;
      unsigned month, day;
      CivilFromDays(DaysOf(source, value), &year, &month, &day);
      int64_t out = kind_ == TransformKind::kYear ? year - 1970 : (year - 1970) * 12 + (month - 1);
      return Value::Int(static_cast<int32_t>(out));
    }
    case TransformKind::kDay:
      return Value::Int(static_cast<int32_t>(DaysOf(source, value)));
    case TransformKind::kHour:
      return Value::Int(
          static_cast<int32_t>(FloorDiv(TimestampMicros(source, value.as_long()), kMicrosPerHour)));
    default:
      return InternalError("unhandled transform {}", ToString());
  }
}

}  // namespace sluice::lake
