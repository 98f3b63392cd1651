#include "lake/single_value.h"

#include <cmath>
#include <cstring>

namespace sluice::lake {

namespace {

std::string Int128ToString(__int128 v) {
  if (v == 0) return "0";
  bool negative = v < 0;
  unsigned __int128 u =
      negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string digits;
  while (u > 0) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (negative) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

__int128 Pow10(int n) {
  __int128 p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

template <typename T>
void PutLittleEndian(T v, Bytes* out) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));  // x86-64 and aarch64 are little-endian
  out->insert(out->end(), raw, raw + sizeof(T));
}

template <typename T>
T GetLittleEndian(const uint8_t* data) {
  T v;
  std::memcpy(&v, data, sizeof(T));
  return v;
}

std::string_view RepresentationName(const Value& v) {
  switch (v.data.index()) {
    case 0:
      return "null";
    case 1:
      return "boolean";
    case 2:
      return "int";
    case 3:
      return "long";
    case 4:
      return "float";
    case 5:
      return "double";
    case 6:
      return "string";
    case 7:
      return "bytes";
    case 8:
      return "uuid";
    default:
      return "decimal";
  }
}

}  // namespace

std::string DecimalToString(__int128 unscaled, int32_t scale) {
  std::string digits = Int128ToString(unscaled < 0 ? -unscaled : unscaled);
  if (scale <= 0) return (unscaled < 0 ? "-" : "") + digits;
  if (digits.size() <= static_cast<size_t>(scale)) {
    digits.insert(0, static_cast<size_t>(scale) - digits.size() + 1, '0');
  }
  digits.insert(digits.size() - static_cast<size_t>(scale), ".");
  return (unscaled < 0 ? "-" : "") + digits;
}

std::string Value::ToString() const {
  struct Visitor {
    std::string operator()(std::monostate) const { return "null"; }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(int32_t v) const { return std::to_string(v); }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(float v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(const std::string& v) const { return "\"" + v + "\""; }
    std::string operator()(const Bytes& v) const {
      std::string out = "0x";
      for (uint8_t b : v) out += fmt::format("{:02x}", b);
      return out;
    }
    std::string operator()(const Uuid& v) const { return UuidToString(v); }
    std::string operator()(const DecimalValue& v) const {
      return Int128ToString(v.unscaled) + " (unscaled)";
    }
  };
  return std::visit(Visitor{}, data);
}

Bytes MinimalBigEndian(__int128 v) {
  uint8_t be[16];
  unsigned __int128 u = static_cast<unsigned __int128>(v);
  for (int i = 15; i >= 0; --i) {
    be[i] = static_cast<uint8_t>(u & 0xff);
    u >>= 8;
  }
  int start = 0;
  while (start < 15) {
    bool redundant = (be[start] == 0x00 && (be[start + 1] & 0x80) == 0) ||
                     (be[start] == 0xff && (be[start + 1] & 0x80) != 0);
    if (!redundant) break;
    ++start;
  }
  return Bytes(be + start, be + 16);
}

int32_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's days_from_civil.
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return static_cast<int32_t>(era * 146097 + static_cast<int64_t>(doe) - 719468);
}

void CivilFromDays(int64_t z, int64_t* year, unsigned* month, unsigned* day) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *day = doy - (153 * mp + 2) / 5 + 1;
  *month = mp < 10 ? mp + 3 : mp - 9;
  *year = y + (*month <= 2);
}

Result<Uuid> ParseUuid(std::string_view text) {
  Uuid out{};
  if (text.size() != 36) return InvalidArgumentError("\"{}\" is not a UUID", text);
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return InvalidArgumentError("\"{}\" is not a UUID", text);
      continue;
    }
    int v;
    if (c >= '0' && c <= '9')
      v = c - '0';
    else if (c >= 'a' && c <= 'f')
      v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v = c - 'A' + 10;
    else
      return InvalidArgumentError("\"{}\" is not a UUID", text);
    out[n / 2] = static_cast<uint8_t>(out[n / 2] | (n % 2 == 0 ? v << 4 : v));
    ++n;
  }
  return out;
}

std::string UuidToString(const Uuid& u) {
  std::string out;
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += fmt::format("{:02x}", u[i]);
  }
  return out;
}

Status CheckValueType(const Type& type, const Value& value) {
  if (value.is_null()) return Status::OK();
  auto mismatch = [&]() {
    return InvalidArgumentError("a {} value cannot be of type {}", RepresentationName(value),
                                type.ToString());
  };
  const auto& d = value.data;
  switch (type.id) {
    case TypeId::kBoolean:
      return std::holds_alternative<bool>(d) ? Status::OK() : mismatch();
    case TypeId::kInt:
    case TypeId::kDate:
      return std::holds_alternative<int32_t>(d) ? Status::OK() : mismatch();
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTzNs:
      return std::holds_alternative<int64_t>(d) ? Status::OK() : mismatch();
    case TypeId::kFloat:
      return std::holds_alternative<float>(d) ? Status::OK() : mismatch();
    case TypeId::kDouble:
      return std::holds_alternative<double>(d) ? Status::OK() : mismatch();
    case TypeId::kString:
      return std::holds_alternative<std::string>(d) ? Status::OK() : mismatch();
    case TypeId::kUuid:
      return std::holds_alternative<Uuid>(d) ? Status::OK() : mismatch();
    case TypeId::kBinary:
      return std::holds_alternative<Bytes>(d) ? Status::OK() : mismatch();
    case TypeId::kFixed:
      if (!std::holds_alternative<Bytes>(d)) return mismatch();
      if (value.as_bytes().size() != static_cast<size_t>(type.length)) {
        return InvalidArgumentError("a {}-byte value is not a {}", value.as_bytes().size(),
                                    type.ToString());
      }
      return Status::OK();
    case TypeId::kDecimal: {
      if (!std::holds_alternative<DecimalValue>(d)) return mismatch();
      __int128 u = value.as_unscaled();
      __int128 limit = Pow10(type.precision);
      if (u >= limit || u <= -limit) {
        return InvalidArgumentError("{} has more than {} digits for {}",
                                    DecimalToString(u, type.scale), type.precision,
                                    type.ToString());
      }
      return Status::OK();
    }
    default:
      return InvalidArgumentError("{} is not a primitive type", type.ToString());
  }
}

Result<Bytes> ToSingleValueBinary(const Type& type, const Value& value) {
  if (value.is_null()) {
    return InvalidArgumentError("null has no single-value serialization ({})", type.ToString());
  }
  RETURN_IF_ERROR(CheckValueType(type, value));
  Bytes out;
  switch (type.id) {
    case TypeId::kBoolean:
      out.push_back(value.as_bool() ? 1 : 0);
      break;
    case TypeId::kInt:
    case TypeId::kDate:
      PutLittleEndian(value.as_int(), &out);
      break;
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTzNs:
      PutLittleEndian(value.as_long(), &out);
      break;
    case TypeId::kFloat:
      PutLittleEndian(value.as_float(), &out);
      break;
    case TypeId::kDouble:
      PutLittleEndian(value.as_double(), &out);
      break;
    case TypeId::kString:
      out.assign(value.as_string().begin(), value.as_string().end());
      break;
    case TypeId::kUuid:
      out.assign(value.as_uuid().begin(), value.as_uuid().end());
      break;
    case TypeId::kFixed:
    case TypeId::kBinary:
      out = value.as_bytes();
      break;
    case TypeId::kDecimal:
      out = MinimalBigEndian(value.as_unscaled());
      break;
    default:
      return InvalidArgumentError("{} has no single-value serialization", type.ToString());
  }
  return out;
}

Result<Value> FromSingleValueBinary(const Type& type, const uint8_t* data, size_t size) {
  auto wrong_size = [&](std::string_view want) {
    return InvalidArgumentError("{} bytes cannot be a {} value (expected {})", size,
                                type.ToString(), want);
  };
  switch (type.id) {
    case TypeId::kBoolean:
      if (size != 1) return wrong_size("1 byte");
      return Value::Boolean(data[0] != 0);
    case TypeId::kInt:
    case TypeId::kDate:
      if (size != 4) return wrong_size("4 bytes");
      return Value::Int(GetLittleEndian<int32_t>(data));
    case TypeId::kLong:
      if (size == 4) return Value::Long(GetLittleEndian<int32_t>(data));  // written as int
      if (size != 8) return wrong_size("8 bytes");
      return Value::Long(GetLittleEndian<int64_t>(data));
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTzNs:
      if (size != 8) return wrong_size("8 bytes");
      return Value::Long(GetLittleEndian<int64_t>(data));
    case TypeId::kFloat:
      if (size != 4) return wrong_size("4 bytes");
      return Value::Float(GetLittleEndian<float>(data));
    case TypeId::kDouble:
      if (size == 4) return Value::Double(GetLittleEndian<float>(data));  // written as float
      if (size != 8) return wrong_size("8 bytes");
      return Value::Double(GetLittleEndian<double>(data));
    case TypeId::kString:
      return Value::String(std::string(reinterpret_cast<const char*>(data), size));
    case TypeId::kUuid: {
      if (size != 16) return wrong_size("16 bytes");
      Uuid u;
      std::memcpy(u.data(), data, 16);
      return Value::UuidValue(u);
    }
    case TypeId::kFixed:
      if (size != static_cast<size_t>(type.length)) {
        return wrong_size(fmt::format("{} bytes", type.length));
      }
      return Value::Binary(Bytes(data, data + size));
    case TypeId::kBinary:
      return Value::Binary(Bytes(data, data + size));
    case TypeId::kDecimal: {
      if (size < 1 || size > 16) return wrong_size("1 to 16 bytes");
      unsigned __int128 u = (data[0] & 0x80) ? ~static_cast<unsigned __int128>(0) : 0;
      for (size_t i = 0; i < size; ++i) u = (u << 8) | data[i];
      Value v = Value::Decimal(static_cast<__int128>(u));
      RETURN_IF_ERROR(CheckValueType(type, v));
      return v;
    }
    default:
      return InvalidArgumentError("{} has no single-value serialization", type.ToString());
  }
}

}  // namespace sluice::lake
