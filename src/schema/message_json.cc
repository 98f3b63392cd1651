// FramedToJson (message_json.h): the framing read, the writer schema parsed by its format's
// own parser, then the body walked into a JSON tree (nlohmann::ordered_json, key order kept)
// written once at the end. The formats' RowDecoders write into DuckDB vectors, so the two
// walkers here are small ones of their own, over the same parsed schemas (lake::avro::Node,
// protobuf::MessageType), the same wire readers (avro/binary_reader.h, protobuf/internal.h)
// and the same bounds (counts bounded by the bytes left; 64 levels).
// JSON Schema bodies go through nlohmann's SAX parser (iterative) straight back out as text.
#include "schema/message_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/base64.h"
#include "base/json_depth.h"
#include "base/utf8.h"
#include "schema/avro/avro_format.h"
#include "schema/avro/avro_types.h"
#include "schema/avro/binary_reader.h"
#include "schema/decoder_plans.h"
#include "schema/protobuf/internal.h"
#include "schema/protobuf/protobuf_format.h"

namespace sluice::schema {

namespace {

using Json = nlohmann::ordered_json;

// Longest decimal (in bytes) written as text, about 1200 digits: the conversion is
// quadratic in the length.
constexpr size_t kMaxDecimalBytes = 512;
// Longest map key shown in an error's path.
constexpr size_t kMaxKeyInPath = 64;

template <typename R>
std::vector<R> As(const std::vector<registry::Reference>& refs) {
  std::vector<R> out;
  for (const registry::Reference& r : refs) out.push_back({r.name, r.schema_text});
  return out;
}

// ---- values as readable text ----

std::string Hex(std::string_view b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(b.size() * 2);
  for (char c : b) {
    auto u = static_cast<uint8_t>(c);
    out.push_back(kDigits[u >> 4]);
    out.push_back(kDigits[u & 15]);
  }
  return out;
}

Json Real(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return d;
}

// A float as the double of its shortest decimal text, so that 0.1f shows as 0.1, not as
// 0.10000000149011612.
Json Real(float f) {
  if (!std::isfinite(f)) return Real(static_cast<double>(f));
  const std::string text = fmt::format("{}", f);
  double d = f;
  std::from_chars(text.data(), text.data() + text.size(), d);  // not locale-dependent
  return d;
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) --q;
  return q;
}
int64_t FloorMod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

// "2024-05-01" for days since 1970-01-01 (proleptic Gregorian; years outside 0..9999 with a
// sign: "-0044-03-15", "+10000-01-01").
std::string Date(int64_t days) {
  // Howard Hinnant's civil_from_days.
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<uint32_t>(z - era * 146097);
  const uint32_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const uint32_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const uint32_t mp = (5 * doy + 2) / 153;
  const uint32_t d = doy - (153 * mp + 2) / 5 + 1;
  const uint32_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400 + (m <= 2 ? 1 : 0);
  if (y >= 0 && y <= 9999) return fmt::format("{:04}-{:02}-{:02}", y, m, d);
  return fmt::format("{:+05}-{:02}-{:02}", y, m, d);
}

// ".5", ".123", ".000001": 3, 6 or 9 digits, as few as show `nanos` exactly ("" for 0).
std::string Fraction(int64_t nanos) {
  if (nanos == 0) return "";
  if (nanos % 1000000 == 0) return fmt::format(".{:03}", nanos / 1000000);
  if (nanos % 1000 == 0) return fmt::format(".{:06}", nanos / 1000);
  return fmt::format(".{:09}", nanos);
}

// RFC 3339: "2024-05-01T12:00:00.123Z" (`zulu`), or without the "Z" (a local timestamp).
// `nanos` in [0, 1e9).
std::string DateTime(int64_t seconds, int64_t nanos, bool zulu) {
  const int64_t day = FloorMod(seconds, 86400);
  return fmt::format("{}T{:02}:{:02}:{:02}{}{}", Date(FloorDiv(seconds, 86400)), day / 3600,
                     day / 60 % 60, day % 60, Fraction(nanos), zulu ? "Z" : "");
}

// An Avro timestamp of `units` per second.
std::string Timestamp(int64_t v, int64_t units, bool zulu) {
  return DateTime(FloorDiv(v, units), FloorMod(v, units) * (1000000000 / units), zulu);
}

// An Avro time of day ("12:30:00.5"); outside one day, the number.
Json TimeOfDay(int64_t v, int64_t units) {
  if (v < 0 || v >= 86400 * units) return v;
  const int64_t s = v / units;
  return fmt::format("{:02}:{:02}:{:02}{}", s / 3600, s / 60 % 60, s % 60,
                     Fraction(v % units * (1000000000 / units)));
}

// The decimal text of a big-endian two's complement integer with `scale` digits after the
// point. Nine digits per pass over the bytes.
std::string DecimalText(std::string_view bytes, int scale) {
  std::vector<uint8_t> mag(bytes.begin(), bytes.end());
  const bool neg = !mag.empty() && (mag[0] & 0x80) != 0;
  if (neg) {  // two's complement: invert and add one
    for (uint8_t& b : mag) b = static_cast<uint8_t>(~b);
    for (size_t i = mag.size(); i-- > 0;) {
      if (++mag[i] != 0) break;
    }
  }
  std::vector<uint32_t> groups;  // of nine digits, least significant first
  size_t start = 0;
  while (start < mag.size() && mag[start] == 0) ++start;
  while (start < mag.size()) {
    uint64_t rem = 0;
    for (size_t i = start; i < mag.size(); ++i) {
      const uint64_t cur = (rem << 8) | mag[i];
      mag[i] = static_cast<uint8_t>(cur / 1000000000);
      rem = cur % 1000000000;
    }
    groups.push_back(static_cast<uint32_t>(rem));
    while (start < mag.size() && mag[start] == 0) ++start;
  }
  std::string digits = groups.empty() ? "0" : std::to_string(groups.back());
  for (size_t i = groups.size() - (groups.empty() ? 0 : 1); i-- > 0;) {
    digits += fmt::format("{:09}", groups[i]);
  }
  if (scale > 0) {
    if (digits.size() <= static_cast<size_t>(scale)) {
      digits.insert(0, static_cast<size_t>(scale) + 1 - digits.size(), '0');
    }
    digits.insert(digits.size() - static_cast<size_t>(scale), 1, '.');
  }
  return neg ? "-" + digits : digits;
}

std::string UuidText(std::string_view b) {
  const std::string h = Hex(b);
  return fmt::format("{}-{}-{}-{}-{}", h.substr(0, 8), h.substr(8, 4), h.substr(12, 4),
                     h.substr(16, 4), h.substr(20));
}

uint32_t LittleEndian32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

// An Avro duration (months, days, milliseconds) in ISO 8601: "P1M2DT3.500S", "PT0S".
std::string IsoDuration(uint32_t months, uint32_t days, uint32_t millis) {
  std::string out = "P";
  if (months != 0) out += fmt::format("{}M", months);
  if (days != 0) out += fmt::format("{}D", days);
  if (millis != 0 || out.size() == 1) {
    out += fmt::format("T{}{}S", millis / 1000, Fraction(int64_t{millis % 1000} * 1000000));
  }
  return out;
}

// `s` with any byte of an invalid UTF-8 text as '?': messages that quote input (nlohmann's
// "last read: ..."), which callers may put in JSON.
std::string Printable(std::string s) {
  if (IsValidUtf8(s)) return s;
  for (char& c : s) {
    if (static_cast<uint8_t>(c) >= 0x80) c = '?';
  }
  return s;
}

// A map key as a step of an error's path.
std::string KeyStep(std::string_view key) {
  if (key.size() > kMaxKeyInPath || !IsValidUtf8(key)) return "[…]";
  return fmt::format("[\"{}\"]", key);
}

// A JSON object filled by keys that may repeat (Avro and Protobuf maps on the wire): each
// key once, in its first place, with its last value; constant time per key (ordered_json's
// own operator[] searches linearly).
class ObjectFiller {
 public:
  explicit ObjectFiller(Json* object) : object_(&object->get_ref<Json::object_t&>()) {}
  void Set(std::string key, Json value) {
    auto [it, fresh] = at_.try_emplace(key, object_->size());
    if (fresh) {
      object_->emplace_back(std::move(key), std::move(value));
    } else {
      (object_->begin() + static_cast<std::ptrdiff_t>(it->second))->second = std::move(value);
    }
  }

 private:
  Json::object_t* object_;
  std::unordered_map<std::string, size_t> at_;
};

// Where a walk over a value failed: what, at which byte of the value, and the path to it
// (collected innermost first while the walk unwinds).
class Walk {
 public:
  explicit Walk(std::string_view value) : begin_(reinterpret_cast<const uint8_t*>(value.data())) {}

  Status Error() const {
    std::string where;
    for (size_t i = path_.size(); i-- > 0;) {
      if (!where.empty() && path_[i][0] != '[') where += '.';
      where += path_[i];
    }
    if (where.size() > 200) {
      size_t cut = 197;
      while (cut > 0 && (static_cast<uint8_t>(where[cut]) & 0xc0) == 0x80) --cut;  // UTF-8
      where = where.substr(0, cut) + "...";
    }
    if (where.empty()) return InvalidArgumentError("{} at byte {}", problem_, at_);
    return InvalidArgumentError("field '{}': {} at byte {}", where, problem_, at_);
  }

 protected:
  bool Fail(const uint8_t* at, std::string problem) {
    problem_ = std::move(problem);
    at_ = static_cast<size_t>(at - begin_);
    path_.clear();
    return false;
  }
  // Adds the step the failure happened in (a field name, "[3]", "[\"key\"]").
  bool Within(std::string step) {
    if (!step.empty()) path_.push_back(std::move(step));
    return false;
  }

  const uint8_t* begin_;

 private:
  std::string problem_;
  size_t at_ = 0;
  std::vector<std::string> path_;
};

// ---- Avro ----

using lake::avro::Node;
using lake::avro::Type;

class AvroWalk : public Walk, private avro::BinaryReader<AvroWalk> {
 public:
  // `body`: the Avro bytes, a part of `value`.
  AvroWalk(std::string_view value, std::string_view body) : Walk(value) { Reset(body); }

  // One value of `root` taking all of the body.
  bool Run(const Node& root, Json* out) {
    if (!Value(root, out, 0)) return false;
    if (p_ != end_) return Fail(p_, fmt::format("{} bytes after the end of the value", end_ - p_));
    return true;
  }

 private:
  friend class avro::BinaryReader<AvroWalk>;

  // binary_reader.h fails through here, and words two of its problems as this walk does.
  bool FailAt(const uint8_t* at, std::string problem) { return Fail(at, std::move(problem)); }
  static std::string FixedPastEndText(int64_t size, int64_t bytes_left) {
    return fmt::format("{} bytes past the end ({} bytes left)", size, bytes_left);
  }
  static std::string ZeroSizeItemsText(int64_t count) {
    return fmt::format("{} items that take no bytes (at most {})", count, avro::kMaxZeroSizeItems);
  }

  // bytes or fixed `b` of type `n`, readable.
  bool Blob(const Node& n, std::string_view b, const uint8_t* at, Json* out) {
    const avro::LogicalInfo l = avro::LogicalOf(n);
    switch (l.kind) {
      case avro::Logical::kDecimal:
        if (b.size() > kMaxDecimalBytes) {
          return Fail(at, fmt::format("decimal of {} bytes (at most {} are shown)", b.size(),
                                      kMaxDecimalBytes));
        }
        *out = DecimalText(b, l.scale);
        return true;
      case avro::Logical::kUuid:
        *out = UuidText(b);  // fixed(16)
        return true;
      case avro::Logical::kDuration:
        *out = IsoDuration(LittleEndian32(b.data()), LittleEndian32(b.data() + 4),
                           LittleEndian32(b.data() + 8));
        return true;
      default:
        *out = Hex(b);
        return true;
    }
  }

  bool Value(const Node& n, Json* out, int depth) {
    if (depth > kMaxJsonDepth) return Fail(p_, "values nested too deeply");
    const uint8_t* start = p_;
    int64_t v;
    std::string_view b;
    switch (n.type) {
      case Type::kNull:
        *out = nullptr;
        return true;
      case Type::kBoolean: {
        bool x = false;
        if (!ReadBoolean(&x)) return false;
        *out = x;
        return true;
      }
      case Type::kInt:
        if (!ReadInt(&v)) return false;
        switch (avro::LogicalOf(n).kind) {
          case avro::Logical::kDate:
            *out = Date(v);
            break;
          case avro::Logical::kTimeMillis:
            *out = TimeOfDay(v, 1000);
            break;
          default:
            *out = v;
        }
        return true;
      case Type::kLong: {
        if (!ReadLong(&v)) return false;
        const avro::Logical l = avro::LogicalOf(n).kind;
        const int64_t units = avro::UnitsPerSecond(l);
        switch (l) {
          case avro::Logical::kTimeMicros:
            *out = TimeOfDay(v, units);
            break;
          case avro::Logical::kTimestampMillis:
          case avro::Logical::kTimestampMicros:
          case avro::Logical::kTimestampNanos:
            *out = Timestamp(v, units, true);
            break;
          case avro::Logical::kLocalTimestampMillis:
          case avro::Logical::kLocalTimestampMicros:
          case avro::Logical::kLocalTimestampNanos:
            *out = Timestamp(v, units, false);
            break;
          default:
            *out = v;
        }
        return true;
      }
      case Type::kFloat: {
        if (!ReadFixed(4, &b)) return false;
        float f;
        std::memcpy(&f, b.data(), 4);
        *out = Real(f);
        return true;
      }
      case Type::kDouble: {
        if (!ReadFixed(8, &b)) return false;
        double d;
        std::memcpy(&d, b.data(), 8);
        *out = Real(d);
        return true;
      }
      case Type::kBytes:
        return ReadBytes(&b) && Blob(n, b, start, out);
      case Type::kString:
        if (!ReadBytes(&b)) return false;
        *out = std::string(b);  // invalid UTF-8 becomes U+FFFD when written
        return true;
      case Type::kFixed:
        return ReadFixed(n.size, &b) && Blob(n, b, start, out);
      case Type::kEnum:
        if (!ReadLong(&v)) return false;
        if (v < 0 || v >= static_cast<int64_t>(n.symbols.size())) {
          return Fail(start,
                      fmt::format("enum index {} out of range ({} symbols)", v, n.symbols.size()));
        }
        *out = n.symbols[static_cast<size_t>(v)];
        return true;
      case Type::kUnion:
        if (!ReadLong(&v)) return false;
        if (v < 0 || v >= static_cast<int64_t>(n.branches.size())) {
          return Fail(start, fmt::format("union index {} out of range ({} branches)", v,
                                         n.branches.size()));
        }
        return Value(*n.branches[static_cast<size_t>(v)], out, depth + 1);
      case Type::kRecord: {
        *out = Json::object();
        auto& fields = out->get_ref<Json::object_t&>();
        for (const lake::avro::Field& f : n.fields) {
          Json value;
          if (!Value(*f.type, &value, depth + 1)) return Within(f.name);
          fields.emplace_back(f.name, std::move(value));
        }
        return true;
      }
      case Type::kArray: {
        *out = Json::array();
        while (true) {
          int64_t count;
          if (!ReadBlockCount(n.items->min_size, &count)) return false;
          if (count == 0) return true;
          for (int64_t i = 0; i < count; ++i) {
            Json item;
            if (!Value(*n.items, &item, depth + 1)) return Within(fmt::format("[{}]", out->size()));
            out->push_back(std::move(item));
          }
        }
      }
      case Type::kMap: {
        *out = Json::object();
        ObjectFiller entries(out);
        while (true) {
          int64_t count;
          if (!ReadBlockCount(n.values->min_size + 1, &count)) return false;
          if (count == 0) return true;
          for (int64_t i = 0; i < count; ++i) {
            std::string_view key;
            if (!ReadBytes(&key)) return false;
            Json value;
            if (!Value(*n.values, &value, depth + 1)) return Within(KeyStep(key));
            entries.Set(std::string(key), std::move(value));
          }
        }
      }
    }
    return Fail(start, "unknown type");
  }
};

// ---- Protobuf ----

using protobuf::EnumType;
using protobuf::FieldType;
using protobuf::Label;
using protobuf::MessageType;
using protobuf::internal::WellKnown;
using protobuf::internal::WireTypeOf;

constexpr uint64_t kMaxFieldNumber = (uint64_t{1} << 29) - 1;

bool Packable(FieldType t) { return WireTypeOf(t) != 2 && WireTypeOf(t) != 3; }

// The JSON of an enum's value `n`: its name, or the number when the schema names none.
Json EnumJson(const EnumType* e, int32_t n) {
  if (e != nullptr) {
    for (const protobuf::EnumValue& v : e->values) {
      if (v.number == n) return v.name;
    }
  }
  return n;
}

// A field's value when the wire leaves it out (map values, wrappers): proto3's defaults.
Json DefaultJson(FieldType t, const EnumType* e) {
  switch (t) {
    case FieldType::kBool:
      return false;
    case FieldType::kString:
    case FieldType::kBytes:
      return "";
    case FieldType::kDouble:
    case FieldType::kFloat:
      return 0.0;
    case FieldType::kEnum:
      if (e != nullptr && !e->values.empty()) {
        Json zero = EnumJson(e, 0);
        return zero.is_string() ? zero : Json(e->values[0].name);
      }
      return 0;
    case FieldType::kMessage:
    case FieldType::kGroup:
      return Json::object();
    default:
      return 0;
  }
}

// A singular integer member of a decoded message, or 0 when absent; false when it is there
// but not an integer (a schema defining google.protobuf types of its own).
bool IntegerOf(const Json& obj, const std::string& name, int64_t* out) {
  auto it = obj.find(name);
  if (it == obj.end()) {
    *out = 0;
    return true;
  }
  if (!it->is_number_integer()) return false;
  *out = it->get<int64_t>();
  return true;
}

// "1.5s", "-0.000001s": proto3's JSON of a Duration.
std::string DurationText(int64_t seconds, int64_t nanos) {
  const bool neg = seconds < 0 || nanos < 0;
  const uint64_t s = seconds < 0 ? 0 - static_cast<uint64_t>(seconds) : seconds;
  return fmt::format("{}{}{}s", neg ? "-" : "", s, Fraction(nanos < 0 ? -nanos : nanos));
}

// The JSON proto3 gives a well-known type, from the plain decoding of its fields `obj`.
// A value out of its type's range (a Timestamp's nanos past a second) stays as its fields.
void WellKnownJson(WellKnown kind, const MessageType& m, Json* obj) {
  auto member = [&](const std::string& name, Json fallback) {
    auto it = obj->find(name);
    return it == obj->end() ? fallback : Json(std::move(*it));
  };
  int64_t seconds = 0, nanos = 0;
  switch (kind) {
    case WellKnown::kTimestamp:
      if (IntegerOf(*obj, "seconds", &seconds) && IntegerOf(*obj, "nanos", &nanos) && nanos >= 0 &&
          nanos < 1000000000) {
        *obj = DateTime(seconds, nanos, true);
      }
      return;
    case WellKnown::kDuration:
      if (IntegerOf(*obj, "seconds", &seconds) && IntegerOf(*obj, "nanos", &nanos) &&
          nanos > -1000000000 && nanos < 1000000000 &&
          !((seconds < 0 && nanos > 0) || (seconds > 0 && nanos < 0))) {
        *obj = DurationText(seconds, nanos);
      }
      return;
    case WellKnown::kDoubleValue:
    case WellKnown::kFloatValue:
    case WellKnown::kInt64Value:
    case WellKnown::kUInt64Value:
    case WellKnown::kInt32Value:
    case WellKnown::kUInt32Value:
    case WellKnown::kBoolValue:
    case WellKnown::kStringValue:
    case WellKnown::kBytesValue:
      if (m.fields.size() == 1) {
        *obj = member("value", DefaultJson(m.fields[0].type, m.fields[0].enumeration));
      }
      return;
    case WellKnown::kStruct:
      *obj = member("fields", Json::object());
      return;
    case WellKnown::kListValue:
      *obj = member("values", Json::array());
      return;
    case WellKnown::kValue: {
      // Its oneof `kind` keeps one member; null_value is the enum NullValue.
      Json kept = nullptr;
      for (auto& [name, value] : obj->get_ref<Json::object_t&>()) {
        if (name != "null_value") kept = std::move(value);
      }
      *obj = std::move(kept);
      return;
    }
    default:
      return;
  }
}

class ProtoWalk : public Walk {
 public:
  explicit ProtoWalk(std::string_view value) : Walk(value), frames_(kMaxJsonDepth + 1) {}

  // The message `m` made of `pieces` (a message field seen several times is merged: its
  // parts read in order as one). `depth`: the messages around it. The work per message is
  // that of the fields on the wire, not of the schema's fields: thousands of small
  // elements of a repeated message field of a wide message stay cheap.
  bool Message(const MessageType& m, std::span<const std::string_view> pieces, Json* out,
               int depth) {
    if (depth > kMaxJsonDepth) {
      return Fail(pieces.empty() ? begin_ : At(pieces[0]), "messages nested too deeply");
    }
    const Shape& shape = ShapeOf(m);
    // This depth's frame, left by the message read here before (siblings, one at a time).
    Frame& frame = frames_[static_cast<size_t>(depth)];
    for (uint32_t i : frame.touched) frame.seen[i] = Seen();
    frame.touched.clear();
    if (frame.seen.size() < m.fields.size()) frame.seen.resize(m.fields.size());
    for (std::string_view piece : pieces) {
      const uint8_t* p = At(piece);
      const uint8_t* end = p + piece.size();
      while (p < end) {
        const uint8_t* tag_at = p;
        uint64_t key;
        if (!protobuf::internal::ReadVarint(&p, end, &key)) {
          return Fail(tag_at, "truncated or overlong tag");
        }
        const uint64_t number = key >> 3;
        const auto wire = static_cast<uint8_t>(key & 7);
        if (number == 0 || number > kMaxFieldNumber) {
          return Fail(tag_at, fmt::format("bad field number {}", number));
        }
        auto it = std::lower_bound(
            shape.numbers.begin(), shape.numbers.end(), static_cast<int32_t>(number),
            [](const std::pair<int32_t, uint32_t>& a, int32_t b) { return a.first < b; });
        if (it == shape.numbers.end() || it->first != static_cast<int32_t>(number)) {
          if (wire == 4) return Fail(tag_at, "unexpected end-group tag");
          if (!Skip(&p, end, key, tag_at, depth)) return false;
          continue;
        }
        const uint32_t i = it->second;
        const protobuf::Field& f = m.fields[i];
        Seen& s = frame.seen[i];
        if (!s.present) frame.touched.push_back(i);
        if (!FieldValue(f, wire, tag_at, &p, end, &s, depth)) return Within(f.name);
        if (f.oneof >= 0) {  // a oneof keeps the member seen last
          for (uint32_t other : shape.oneofs[static_cast<size_t>(f.oneof)]) {
            if (other != i) frame.seen[other] = Seen();
          }
        }
      }
    }
    // By field number: the registry's canonical text moves oneof members after the other
    // fields, so the order a schema was written in is not what ById gives back.
    std::vector<uint32_t> present;
    for (uint32_t i : frame.touched) {
      if (frame.seen[i].present) present.push_back(i);
    }
    std::sort(present.begin(), present.end(),
              [&](uint32_t a, uint32_t b) { return m.fields[a].number < m.fields[b].number; });
    present.erase(std::unique(present.begin(), present.end()), present.end());
    *out = Json::object();
    auto& fields = out->get_ref<Json::object_t&>();
    for (uint32_t i : present) {
      Seen& s = frame.seen[i];
      const protobuf::Field& f = m.fields[i];
      if (IsMessage(f) && f.label != Label::kRepeated && !f.is_map) {
        // The frame below is free: nothing else is read deeper while this one finishes.
        if (!Message(*f.message, s.pieces, &s.value, depth + 1)) return Within(f.name);
      }
      fields.emplace_back(f.name, std::move(s.value));
    }
    const WellKnown kind = protobuf::internal::WellKnownOf(&m);
    if (kind != WellKnown::kNone) WellKnownJson(kind, m, out);
    return true;
  }

 private:
  // A field as the message's walk found it so far.
  struct Seen {
    bool present = false;
    Json value;                             // a scalar; a list; a map
    std::vector<std::string_view> pieces;   // a singular message or group: its parts
    std::unique_ptr<ObjectFiller> entries;  // a map: into `value`
  };
  // The message being read at one depth: its fields by index, of which `touched` (in the
  // order first seen, maybe twice) are not empty.
  struct Frame {
    std::vector<Seen> seen;
    std::vector<uint32_t> touched;
  };
  // What the walk needs of a message type, built once per type per call: its fields by
  // number (sorted, to their index) and the members of each oneof.
  struct Shape {
    std::vector<std::pair<int32_t, uint32_t>> numbers;
    std::vector<std::vector<uint32_t>> oneofs;
  };

  static bool IsMessage(const protobuf::Field& f) {
    return (f.type == FieldType::kMessage || f.type == FieldType::kGroup) && f.message != nullptr;
  }

  const uint8_t* At(std::string_view piece) const {
    return reinterpret_cast<const uint8_t*>(piece.data());
  }

  const Shape& ShapeOf(const MessageType& m) {
    auto [it, fresh] = shapes_.try_emplace(&m);
    if (fresh) {
      Shape& shape = it->second;
      shape.oneofs.resize(m.oneofs.size());
      for (size_t i = 0; i < m.fields.size(); ++i) {
        shape.numbers.emplace_back(m.fields[i].number, static_cast<uint32_t>(i));
        const int oneof = m.fields[i].oneof;
        if (oneof >= 0 && static_cast<size_t>(oneof) < shape.oneofs.size()) {
          shape.oneofs[static_cast<size_t>(oneof)].push_back(static_cast<uint32_t>(i));
        }
      }
      std::sort(shape.numbers.begin(), shape.numbers.end());
    }
    return it->second;
  }

  bool WrongWire(const uint8_t* tag_at, uint8_t wire, uint8_t expected) {
    return Fail(tag_at, fmt::format("wrong wire type {} (expected {})", wire, expected));
  }

  bool ReadLength(const uint8_t** p, const uint8_t* end, std::string_view* out) {
    const uint8_t* start = *p;
    uint64_t n;
    if (!protobuf::internal::ReadVarint(p, end, &n)) {
      return Fail(start, "truncated or overlong length");
    }
    if (n > static_cast<uint64_t>(end - *p)) {
      return Fail(start, fmt::format("length {} past the end ({} bytes left)", n, end - *p));
    }
    *out = std::string_view(reinterpret_cast<const char*>(*p), n);
    *p += n;
    return true;
  }

  // One scalar (not string, bytes or message) of type `t` at `*p`.
  bool Scalar(FieldType t, const EnumType* e, const uint8_t** p, const uint8_t* end, Json* out) {
    const uint8_t* start = *p;
    uint64_t v = 0;
    switch (WireTypeOf(t)) {
      case 0:
        if (!protobuf::internal::ReadVarint(p, end, &v)) {
          return Fail(start, "truncated or overlong varint");
        }
        break;
      case 5: {
        if (end - *p < 4) return Fail(start, "truncated fixed32");
        uint32_t x;
        std::memcpy(&x, *p, 4);
        *p += 4;
        v = x;
        break;
      }
      default:
        if (end - *p < 8) return Fail(start, "truncated fixed64");
        std::memcpy(&v, *p, 8);
        *p += 8;
        break;
    }
    const auto low = static_cast<uint32_t>(v);
    switch (t) {
      case FieldType::kInt32:
      case FieldType::kSfixed32:
        *out = static_cast<int32_t>(low);
        break;
      case FieldType::kInt64:
      case FieldType::kSfixed64:
        *out = static_cast<int64_t>(v);
        break;
      case FieldType::kUint32:
      case FieldType::kFixed32:
        *out = low;
        break;
      case FieldType::kUint64:
      case FieldType::kFixed64:
        *out = v;
        break;
      case FieldType::kSint32:
        *out = static_cast<int32_t>(protobuf::internal::UnZigZag64(low));
        break;
      case FieldType::kSint64:
        *out = protobuf::internal::UnZigZag64(v);
        break;
      case FieldType::kBool:
        *out = v != 0;
        break;
      case FieldType::kEnum:
        *out = EnumJson(e, static_cast<int32_t>(low));
        break;
      case FieldType::kFloat: {
        float f;
        std::memcpy(&f, &low, 4);
        *out = Real(f);
        break;
      }
      case FieldType::kDouble: {
        double d;
        std::memcpy(&d, &v, 8);
        *out = Real(d);
        break;
      }
      default:
        return Fail(start, "not a scalar");
    }
    return true;
  }

  // A value of type `t` whose tag (of wire type `wire`) is read: a scalar, a string or
  // bytes, or for messages and groups their bytes in `*piece` (not decoded).
  bool Single(FieldType t, const EnumType* e, uint8_t wire, const uint8_t* tag_at, uint64_t number,
              const uint8_t** p, const uint8_t* end, Json* out, std::string_view* piece,
              int depth) {
    if (wire != WireTypeOf(t)) return WrongWire(tag_at, wire, WireTypeOf(t));
    std::string_view b;
    switch (t) {
      case FieldType::kString:
        if (!ReadLength(p, end, &b)) return false;
        *out = std::string(b);  // invalid UTF-8 becomes U+FFFD when written
        return true;
      case FieldType::kBytes:
        if (!ReadLength(p, end, &b)) return false;
        *out = Base64Encode(b);
        return true;
      case FieldType::kMessage:
        return ReadLength(p, end, piece);
      case FieldType::kGroup:
        return GroupBody(p, end, number, tag_at, piece, depth);
      default:
        return Scalar(t, e, p, end, out);
    }
  }

  // The value of field `f` whose tag is read, into what the message has of it so far.
  bool FieldValue(const protobuf::Field& f, uint8_t wire, const uint8_t* tag_at, const uint8_t** p,
                  const uint8_t* end, Seen* s, int depth) {
    const auto number = static_cast<uint64_t>(f.number);
    if (f.is_map) {
      if (wire != 2) return WrongWire(tag_at, wire, 2);
      std::string_view entry;
      if (!ReadLength(p, end, &entry)) return false;
      if (!s->present) {
        s->present = true;
        s->value = Json::object();
        s->entries = std::make_unique<ObjectFiller>(&s->value);
      }
      std::string key;
      Json value;
      if (!MapEntry(f, entry, &key, &value, depth)) return false;
      s->entries->Set(std::move(key), std::move(value));
      return true;
    }
    if (f.label != Label::kRepeated) {
      std::string_view piece;
      Json value;
      if (!Single(f.type, f.enumeration, wire, tag_at, number, p, end, &value, &piece, depth)) {
        return false;
      }
      s->present = true;
      if (IsMessage(f)) {
        s->pieces.push_back(piece);
      } else if (f.type == FieldType::kMessage || f.type == FieldType::kGroup) {
        s->value = Base64Encode(piece);  // a type the schema did not resolve
      } else {
        s->value = std::move(value);
      }
      return true;
    }
    if (!s->present) {
      s->present = true;
      s->value = Json::array();
    }
    if (wire == 2 && Packable(f.type)) {  // packed
      std::string_view run;
      if (!ReadLength(p, end, &run)) return false;
      const uint8_t* q = At(run);
      const uint8_t* q_end = q + run.size();
      while (q < q_end) {
        Json item;
        if (!Scalar(f.type, f.enumeration, &q, q_end, &item)) {
          return Within(fmt::format("[{}]", s->value.size()));
        }
        s->value.push_back(std::move(item));
      }
      return true;
    }
    std::string_view piece;
    Json item;
    if (!Single(f.type, f.enumeration, wire, tag_at, number, p, end, &item, &piece, depth)) {
      return false;
    }
    if (IsMessage(f)) {
      const std::string_view one[] = {piece};
      if (!Message(*f.message, one, &item, depth + 1)) {
        return Within(fmt::format("[{}]", s->value.size()));
      }
    } else if (f.type == FieldType::kMessage || f.type == FieldType::kGroup) {
      item = Base64Encode(piece);
    }
    s->value.push_back(std::move(item));
    return true;
  }

  // A map entry (key = 1, value = 2; either may be missing: the type's default).
  bool MapEntry(const protobuf::Field& f, std::string_view entry, std::string* key, Json* value,
                int depth) {
    const uint8_t* p = At(entry);
    const uint8_t* end = p + entry.size();
    Json k = DefaultJson(f.map_key, nullptr);
    Json v;
    bool has_v = false;
    std::vector<std::string_view> pieces;
    while (p < end) {
      const uint8_t* tag_at = p;
      uint64_t tag;
      if (!protobuf::internal::ReadVarint(&p, end, &tag)) {
        return Fail(tag_at, "truncated or overlong tag");
      }
      const uint64_t number = tag >> 3;
      const auto wire = static_cast<uint8_t>(tag & 7);
      std::string_view piece;
      if (number == 1) {
        if (!Single(f.map_key, nullptr, wire, tag_at, 1, &p, end, &k, &piece, depth)) return false;
      } else if (number == 2) {
        if (!Single(f.type, f.enumeration, wire, tag_at, 2, &p, end, &v, &piece, depth)) {
          return false;
        }
        if (f.type == FieldType::kMessage) pieces.push_back(piece);
        has_v = true;
      } else if (wire == 4) {
        return Fail(tag_at, "unexpected end-group tag");
      } else if (number == 0 || number > kMaxFieldNumber) {
        return Fail(tag_at, fmt::format("bad field number {}", number));
      } else if (!Skip(&p, end, tag, tag_at, depth)) {
        return false;
      }
    }
    *key = k.is_string() ? k.get<std::string>() : k.dump();
    if (IsMessage(f)) {
      if (!Message(*f.message, pieces, value, depth + 1)) return Within(KeyStep(*key));
    } else if (f.type == FieldType::kMessage) {
      *value = has_v ? Json(Base64Encode(pieces.back())) : Json::object();
    } else {
      *value = has_v ? std::move(v) : DefaultJson(f.type, f.enumeration);
    }
    return true;
  }

  // A group's fields after its start tag (number `number`, at `tag_at`), up to its end tag
  // (read too).
  bool GroupBody(const uint8_t** p, const uint8_t* end, uint64_t number, const uint8_t* tag_at,
                 std::string_view* body, int depth) {
    if (depth > kMaxJsonDepth) return Fail(tag_at, "groups nested too deeply");
    const uint8_t* start = *p;
    while (true) {
      const uint8_t* at = *p;
      if (at >= end) return Fail(tag_at, "unterminated group");
      uint64_t k;
      if (!protobuf::internal::ReadVarint(p, end, &k)) return Fail(at, "truncated or overlong tag");
      if ((k & 7) == 4) {
        if ((k >> 3) != number) return Fail(at, "end-group tag does not match");
        *body =
            std::string_view(reinterpret_cast<const char*>(start), static_cast<size_t>(at - start));
        return true;
      }
      if (!Skip(p, end, k, at, depth + 1)) return false;
    }
  }

  // Skips the value of tag `key` (at `tag_at`; groups to their end).
  bool Skip(const uint8_t** p, const uint8_t* end, uint64_t key, const uint8_t* tag_at, int depth) {
    const uint8_t* start = *p;
    uint64_t v;
    std::string_view b;
    switch (key & 7) {
      case 0:
        if (!protobuf::internal::ReadVarint(p, end, &v)) {
          return Fail(start, "truncated or overlong varint");
        }
        return true;
      case 1:
        if (end - *p < 8) return Fail(start, "truncated fixed64");
        *p += 8;
        return true;
      case 2:
        return ReadLength(p, end, &b);
      case 3:
        return GroupBody(p, end, key >> 3, tag_at, &b, depth + 1);
      case 5:
        if (end - *p < 4) return Fail(start, "truncated fixed32");
        *p += 4;
        return true;
      default:
        return Fail(tag_at, fmt::format("invalid wire type {}", key & 7));
    }
  }

  std::vector<Frame> frames_;  // by depth
  std::unordered_map<const MessageType*, Shape> shapes_;
};

// ---- JSON Schema ----

// Where `body` nests deeper than kMaxJsonDepth, or npos. nlohmann's SAX parser is
// iterative and the copy keeps no tree, so depth costs nothing here; the limit is the other
// formats', so that what reads the JSON next (a page rendering it recursively) never gets
// deeper values from this function.
size_t TooDeep(std::string_view body) { return JsonTooDeep(body, kMaxJsonDepth); }

// A SAX handler writing the parsed value back as compact JSON (numbers as written, keys in
// their order, repeated keys kept as sent).
class CompactCopy final : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::string out;
  size_t error_at = 0;
  std::string error;

  bool null() override { return Put("null"); }
  bool boolean(bool v) override { return Put(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return Put(fmt::format("{}", v)); }
  bool number_unsigned(number_unsigned_t v) override { return Put(fmt::format("{}", v)); }
  bool number_float(number_float_t, const string_t& text) override { return Put(text); }
  bool string(string_t& v) override {
    Before();
    avro::AppendJsonString(v, &out);
    return true;
  }
  bool binary(binary_t&) override { return false; }  // not in JSON text
  bool start_object(std::size_t) override { return Open('{'); }
  bool key(string_t& k) override {
    if (!first_.back()) out += ',';
    first_.back() = false;
    avro::AppendJsonString(k, &out);
    out += ':';
    after_key_ = true;
    return true;
  }
  bool end_object() override { return Close('}'); }
  bool start_array(std::size_t) override { return Open('['); }
  bool end_array() override { return Close(']'); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    error_at = position;
    error = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 4: syntax error ..."
    if (size_t colon = error.find(": "); colon != std::string::npos) error.erase(0, colon + 2);
    return false;
  }

 private:
  void Before() {
    if (after_key_) {
      after_key_ = false;
    } else if (!first_.empty()) {
      if (!first_.back()) out += ',';
      first_.back() = false;
    }
  }
  bool Put(std::string_view text) {
    Before();
    out += text;
    return true;
  }
  bool Open(char c) {
    Before();
    out += c;
    first_.push_back(true);
    return true;
  }
  bool Close(char c) {
    out += c;
    first_.pop_back();
    return true;
  }

  std::vector<bool> first_;  // per open array or object: nothing written in it yet
  bool after_key_ = false;
};

// ---- the formats ----

std::string Write(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status AvroToJson(std::string_view value, std::string_view body, const SchemaRecord& r,
                  FramedJson* out) {
  Result<avro::Parsed> schema = avro::Parse(r.text, As<avro::Reference>(r.references));
  if (!schema.ok()) {
    return InvalidArgumentError("schema id {} does not parse: {}", r.id, schema.status().message());
  }
  AvroWalk walk(value, body);
  Json j;
  if (!walk.Run(schema->root(), &j)) return walk.Error();
  out->json = Write(j);
  return Status::OK();
}

Status ProtobufToJson(std::string_view value, std::string_view rest, const SchemaRecord& r,
                      FramedJson* out) {
  Result<protobuf::Parsed> schema = protobuf::Parse(r.text, As<protobuf::Reference>(r.references));
  if (!schema.ok()) {
    return InvalidArgumentError("schema id {} does not parse: {}", r.id, schema.status().message());
  }
  // The message indexes; values whose bytes do not read as indexes naming a message of the
  // schema are its first message, without indexes (as DecoderPlans::For).
  std::vector<int> indexes;
  size_t consumed = 0;
  std::string why;
  const MessageType* m = nullptr;
  std::string_view body = rest;
  if (protobuf::ReadMessageIndexes(rest, &indexes, &consumed, &why)) {
    Result<const MessageType*> named = protobuf::FindMessage(*schema, indexes);
    if (named.ok()) {
      m = *named;
      body = rest.substr(consumed);
    }
  }
  const bool without_indexes = m == nullptr;
  if (without_indexes) {
    Result<const MessageType*> first = protobuf::FindMessage(*schema, {});
    if (!first.ok())
      return InvalidArgumentError("schema id {}: {}", r.id, first.status().message());
    m = *first;
  }
  ProtoWalk walk(value);
  Json j;
  const std::string_view pieces[] = {body};
  if (!walk.Message(*m, pieces, &j, 0)) {
    Status st = walk.Error();
    if (!without_indexes) return st;
    return InvalidArgumentError(
        "the message indexes name no message of schema id {}; read without indexes as its "
        "first message, {}: {}",
        r.id, m->full_name, st.message());
  }
  out->json = Write(j);
  out->message = m->full_name;
  return Status::OK();
}

Status JsonSchemaToJson(std::string_view body, FramedJson* out) {
  constexpr size_t kFraming = 5;
  if (size_t at = TooDeep(body); at != std::string_view::npos) {
    return InvalidArgumentError("JSON nested deeper than {} levels at byte {}", kMaxJsonDepth,
                                kFraming + at);
  }
  CompactCopy copy;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(body.begin(), body.end(), &copy);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError("not JSON: {}", Printable(e.what()));
  }
  if (!ok) {
    if (copy.error.empty()) return InvalidArgumentError("not JSON");
    // nlohmann counts the byte it stopped at from 1.
    return InvalidArgumentError("not JSON: {} at byte {}", Printable(copy.error),
                                kFraming + (copy.error_at > 0 ? copy.error_at - 1 : 0));
  }
  out->json = std::move(copy.out);
  return Status::OK();
}

}  // namespace

Result<FramedJson> FramedToJson(std::string_view payload, SchemaSource& source) {
  int32_t id = 0;
  std::string_view rest;
  std::string reason;
  if (!ReadFraming(payload, &id, &rest, &reason)) return NotFoundError("{}", reason);
  Result<std::shared_ptr<const SchemaRecord>> record = source.ById(id);
  if (!record.ok()) {
    if (record.status().code() == StatusCode::kNotFound) {
      return NotFoundError("schema id {} is unknown to {}", id, source.Describe());
    }
    return record.status();
  }
  const SchemaRecord& r = **record;
  FramedJson out;
  out.schema_id = id;
  try {
    switch (r.type) {
      case SchemaType::kAvro:
        out.format = "avro";
        RETURN_IF_ERROR(AvroToJson(payload, rest, r, &out));
        break;
      case SchemaType::kProtobuf:
        out.format = "protobuf";
        RETURN_IF_ERROR(ProtobufToJson(payload, rest, r, &out));
        break;
      case SchemaType::kJson:
        out.format = "json";
        RETURN_IF_ERROR(JsonSchemaToJson(rest, &out));
        break;
    }
  } catch (const nlohmann::json::exception& e) {
    // Not expected: every value is built with its own type.
    return InternalError("schema id {}: writing JSON: {}", id, e.what());
  }
  return out;
}

}  // namespace sluice::schema
