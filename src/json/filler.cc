// The value conversions: a JSON value (simdjson on-demand) into a bound Slot, strict or
// lenient (filler.h), ISO-8601 timestamps, and the validating skip of values no column takes.
#include "json/filler.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "json/text.h"

namespace sluice::json {

namespace od = simdjson::ondemand;
using duck::Vector;

namespace {

// ---- ISO-8601 dates and timestamps, as DuckDB reads them ----

struct ParsedTime {
  int64_t days = 0;            // the date as written
  int64_t micros_of_day = 0;   // the time as written
  int32_t nanos = 0;           // digits past microseconds (0..999)
  int32_t offset_seconds = 0;  // the UTC offset written (Z = 0), 0 when none
};

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// YYYY-MM-DD[(T|t| )HH:MM[:SS[.fraction]][Z|z|(+|-)HH[[:]MM]]]; months and days may have one
// digit, as DuckDB accepts. Returns false on anything else.
// Out of line, so that FillTime (which GCC then inlines) stays small.
[[gnu::noinline]] bool ParseIsoTimestamp(std::string_view s, ParsedTime* out) {
  size_t i = 0, n = s.size();
  auto number = [&](size_t min_digits, size_t max_digits, int64_t* v) {
    size_t start = i;
    int64_t x = 0;
    while (i < n && i - start < max_digits && s[i] >= '0' && s[i] <= '9')
      x = x * 10 + (s[i++] - '0');
    *v = x;
    return i - start >= min_digits;
  };
  int64_t year, month, day;
  if (!number(4, 4, &year) || i >= n || s[i++] != '-') return false;
  if (!number(1, 2, &month) || i >= n || s[i++] != '-') return false;
  if (!number(1, 2, &day)) return false;
  if (month < 1 || month > 12 || day < 1) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int max_day = kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0);
  if (day > max_day) return false;
  out->days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  out->micros_of_day = 0;
  out->nanos = 0;
  out->offset_seconds = 0;
  if (i == n) return true;
  if (s[i] != 'T' && s[i] != 't' && s[i] != ' ') return false;
  ++i;
  int64_t hour, minute, second = 0;
  if (!number(1, 2, &hour) || i >= n || s[i++] != ':' || !number(2, 2, &minute)) return false;
  int64_t frac_nanos = 0;
  if (i < n && s[i] == ':') {
    ++i;
    if (!number(2, 2, &second)) return false;
    if (i < n && s[i] == '.') {
      ++i;
      size_t start = i;
      int64_t scale = 100000000;
      while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (scale > 0) frac_nanos += (s[i] - '0') * scale;  // digits past 9 are dropped
        scale /= 10;
        ++i;
      }
      if (i == start) return false;
    }
  }
  if (hour > 23 || minute > 59 || second > 59) return false;
  out->micros_of_day = ((hour * 60 + minute) * 60 + second) * 1000000 + frac_nanos / 1000;
  out->nanos = static_cast<int32_t>(frac_nanos % 1000);
  if (i == n) return true;
  if (s[i] == 'Z' || s[i] == 'z') return i + 1 == n;
  if (s[i] != '+' && s[i] != '-') return false;
  int sign = s[i++] == '-' ? -1 : 1;
  int64_t oh, om = 0;
  if (!number(2, 2, &oh)) return false;
  if (i < n && s[i] == ':') ++i;
  if (i < n && !number(2, 2, &om)) return false;
  if (i != n || oh > 23 || om > 59) return false;
  out->offset_seconds = static_cast<int32_t>(sign * (oh * 3600 + om * 60));
  return true;
}

}  // namespace

std::string FillError::Reason() const {
  std::string key;
  for (size_t i = path.size(); i-- > 0;) {
    if (!key.empty() && path[i][0] != '[') key += '.';
    key += path[i];
  }
  if (key.size() > 120) key = key.substr(0, 117) + "...";
  if (key.empty()) return problem;
  if (type_name.empty()) return fmt::format("key '{}': {}", key, problem);
  return fmt::format("key '{}' ({}): {}", key, type_name, problem);
}

namespace {

// The conversions, in a class of this file only: GCC then passes simdjson's values to the
// recursive calls in registers and inlines as it sees fit (an externally visible class's
// members cost store-forwarding stalls per value). One per Filler call, on its state.
class Fill {
 public:
  Fill(bool case_insensitive, bool lenient, int max_depth, od::document* doc, uint64_t& stamp,
       FillError& error, std::string& minified)
      : case_insensitive_(case_insensitive),
        lenient_(lenient),
        max_depth_(max_depth),
        doc_(doc),
        stamp_(stamp),
        error_(error),
        minified_(minified) {}

  bool FillObject(od::object obj, std::vector<Slot>& fields,
                  const std::vector<std::pair<std::string, uint32_t>>& sorted, uint64_t row,
                  int depth);
  bool FillValue(Slot& s, od::value& v, uint64_t row, int depth);
  bool SkipValidated(od::value& v, int depth);
  bool ValidateObject(od::object obj);
  bool RawJson(od::value& v, od::json_type t, int depth, std::string_view* out);
  static void SetNull(Slot& s, uint64_t row);
  bool EnsureListRoom(Slot& s, uint64_t index);
  static void Refresh(Slot& s, Vector v);

 private:
  bool Fail(const Slot& s, std::string problem);
  bool WrongType(const Slot& s, od::json_type got, std::string_view expected);
  bool Syntax(simdjson::error_code e);
  bool SyntaxText(std::string problem);
  int Find(const std::vector<Slot>& fields,
           const std::vector<std::pair<std::string, uint32_t>>& sorted, std::string_view key,
           size_t hint) const;
  bool FillBool(Slot& s, od::value& v, od::json_type t, uint64_t row);
  template <typename T>
  bool StoreIntegral(Slot& s, double d, std::string_view text, uint64_t row);
  template <typename T>
  bool StoreInt64(Slot& s, int64_t x, uint64_t row);
  template <typename T>
  bool FillInt(Slot& s, od::value& v, od::json_type t, uint64_t row);
  template <typename T>
  bool FillFloat(Slot& s, od::value& v, od::json_type t, uint64_t row);
  bool FillText(Slot& s, od::value& v, od::json_type t, uint64_t row, int depth);
  bool FillJsonText(Slot& s, od::value& v, od::json_type t, uint64_t row, int depth);
  bool FillTime(Slot& s, od::value& v, od::json_type t, uint64_t row);
  bool FillList(Slot& s, od::value& v, od::json_type t, uint64_t row, int depth);
  std::string_view Minified(std::string_view json);

  const bool case_insensitive_;
  const bool lenient_;
  const int max_depth_;
  od::document* const doc_;
  uint64_t& stamp_;
  FillError& error_;
  std::string& minified_;
};

}  // namespace

bool Fill::FillObject(od::object obj, std::vector<Slot>& fields,
                      const std::vector<std::pair<std::string, uint32_t>>& sorted, uint64_t row,
                      int depth) {
  const uint64_t stamp = ++stamp_;
  size_t hint = 0;
  for (auto field_result : obj) {
    // Used in place: moving the field out (get) reloads what was just stored, a store-
    // forwarding stall per key that cost the structured decode a quarter of its speed.
    if (auto e = field_result.error(); e) return Syntax(e);
    od::field& field = field_result.value_unsafe();
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) return Syntax(e);
    int idx = Find(fields, sorted, key, hint);
    if (idx < 0) {
      if (lenient_) continue;  // validated already; simdjson skips it
      if (!SkipValidated(field.value(), depth + 1)) {
        error_.path.emplace_back(key);
        return false;
      }
      continue;
    }
    hint = static_cast<size_t>(idx) + 1;
    Slot& c = fields[idx];
    if (!FillValue(c, field.value(), row, depth + 1)) {
      if (!lenient_) {
        error_.path.push_back(c.name);
        return false;
      }
      SetNull(c, row);  // does not fit: NULL (and a later value of the key may still fit)
    }
    c.seen = stamp;
  }
  for (Slot& c : fields) {
    if (c.seen != stamp) SetNull(c, row);
  }
  return true;
}

inline bool Fill::FillValue(Slot& s, od::value& v, uint64_t row, int depth) {
  od::json_type t;
  if (auto e = v.type().get(t); e) return Syntax(e);
  if (t == od::json_type::null) {
    bool is_null = false;
    if (v.is_null().get(is_null) || !is_null) return Fail(s, "invalid literal (expected null)");
    SetNull(s, row);
    return true;
  }
  switch (s.kind) {
    case Kind::kBool:
      return FillBool(s, v, t, row);
    case Kind::kI8:
      return FillInt<int8_t>(s, v, t, row);
    case Kind::kI16:
      return FillInt<int16_t>(s, v, t, row);
    case Kind::kI32:
      return FillInt<int32_t>(s, v, t, row);
    case Kind::kI64:
      return FillInt<int64_t>(s, v, t, row);
    case Kind::kU8:
      return FillInt<uint8_t>(s, v, t, row);
    case Kind::kU16:
      return FillInt<uint16_t>(s, v, t, row);
    case Kind::kU32:
      return FillInt<uint32_t>(s, v, t, row);
    case Kind::kU64:
      return FillInt<uint64_t>(s, v, t, row);
    case Kind::kFloat:
      return FillFloat<float>(s, v, t, row);
    case Kind::kDouble:
      return FillFloat<double>(s, v, t, row);
    case Kind::kVarchar:
    case Kind::kBlob:
      return FillText(s, v, t, row, depth);
    case Kind::kJson:
    case Kind::kStaged:
      return FillJsonText(s, v, t, row, depth);
    case Kind::kDate:
    case Kind::kTimestamp:
    case Kind::kTimestampTz:
    case Kind::kTimestampS:
    case Kind::kTimestampMs:
    case Kind::kTimestampNs:
      return FillTime(s, v, t, row);
    case Kind::kList:
      return FillList(s, v, t, row, depth);
    case Kind::kStruct: {
      if (t != od::json_type::object) return WrongType(s, t, "an object");
      od::object obj;
      if (auto e = v.get_object().get(obj); e) return Syntax(e);
      if (!FillObject(obj, s.children, s.sorted, row, depth)) return false;
      Vector::SetValid(s.validity, row);
      return true;
    }
  }
  return Fail(s, "unsupported column type");
}

bool Fill::SkipValidated(od::value& v, int depth) {
  if (depth > max_depth_) return Syntax(simdjson::DEPTH_ERROR);
  od::json_type t;
  if (auto e = v.type().get(t); e) return Syntax(e);
  switch (t) {
    case od::json_type::object: {
      od::object obj;
      if (auto e = v.get_object().get(obj); e) return Syntax(e);
      for (auto field_result : obj) {
        if (auto e = field_result.error(); e) return Syntax(e);
        od::field& field = field_result.value_unsafe();  // not moved: see FillObject
        std::string_view key;
        if (auto e = field.unescaped_key().get(key); e) return Syntax(e);
        if (!SkipValidated(field.value(), depth + 1)) {
          error_.path.emplace_back(key);
          return false;
        }
      }
      return true;
    }
    case od::json_type::array: {
      od::array arr;
      if (auto e = v.get_array().get(arr); e) return Syntax(e);
      size_t k = 0;
      for (auto elem_result : arr) {
        if (auto e = elem_result.error(); e) return Syntax(e);
        od::value& elem = elem_result.value_unsafe();
        if (!SkipValidated(elem, depth + 1)) {
          error_.path.push_back(fmt::format("[{}]", k));
          return false;
        }
        ++k;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view sv;
      if (auto e = v.get_string().get(sv); e) return Syntax(e);
      return true;
    }
    case od::json_type::number: {
      std::string_view token = TrimRight(v.raw_json_token());
      if (!IsJsonNumber(token)) return SyntaxText(fmt::format("invalid number {}", Excerpt(token)));
      od::number n;
      if (lenient_ && v.get_number().get(n)) {
        return SyntaxText(fmt::format("unreadable number {}", Excerpt(token)));
      }
      return true;
    }
    case od::json_type::boolean: {
      bool b;
      if (auto e = v.get_bool().get(b); e) return Syntax(e);
      return true;
    }
    case od::json_type::null: {
      bool is_null = false;
      if (v.is_null().get(is_null) || !is_null) return SyntaxText("invalid literal");
      return true;
    }
  }
  return SyntaxText("unknown JSON value");
}

[[gnu::always_inline]] inline bool Fill::RawJson(od::value& v, od::json_type t, int depth,
                                                 std::string_view* out) {
  if (t != od::json_type::object && t != od::json_type::array) {
    std::string_view token = TrimRight(v.raw_json_token());
    if (!SkipValidated(v, depth)) return false;
    *out = token;
    return true;
  }
  const char* start = v.raw_json_token().data();
  if (!SkipValidated(v, depth)) return false;
  const char* end = nullptr;
  if (auto e = doc_->current_location().get(end); e) return Syntax(e);
  *out = TrimRight(std::string_view(start, static_cast<size_t>(end - start)));
  if (lenient_) *out = Minified(*out);
  return true;
}

void Fill::SetNull(Slot& s, uint64_t row) {
  Vector::SetInvalid(s.validity, row);
  if (s.kind == Kind::kStruct) {
    for (Slot& c : s.children) SetNull(c, row);
  } else if (s.kind == Kind::kList) {
    static_cast<duck::ListEntry*>(s.data)[row] = {s.list_size, 0};
  }
}

inline bool Fill::EnsureListRoom(Slot& s, uint64_t index) {
  if (index < s.list_capacity) return true;
  uint64_t cap = std::max<uint64_t>({index + 1, s.list_capacity * 2, 64});
  Status st = s.vec.ListReserve(cap);
  if (!st.ok()) return Fail(s, st.message());
  s.list_capacity = cap;
  Refresh(s.children[0], s.vec.ListChild());
  return true;
}

void Fill::Refresh(Slot& s, Vector v) {
  s.vec = v;
  s.validity = v.validity();
  if (s.kind == Kind::kStruct) {
    for (size_t i = 0; i < s.children.size(); ++i) Refresh(s.children[i], v.StructField(i));
    s.data = nullptr;
  } else if (s.kind == Kind::kVarchar || s.kind == Kind::kBlob || s.kind == Kind::kJson ||
             s.kind == Kind::kStaged) {
    s.data = nullptr;
  } else {
    s.data = v.RawData();
  }
}

inline bool Fill::Fail(const Slot& s, std::string problem) {
  error_.problem = std::move(problem);
  error_.type_name = s.type_name;
  return false;
}

inline bool Fill::WrongType(const Slot& s, od::json_type got, std::string_view expected) {
  return Fail(s, fmt::format("expected {}, got {}", expected, JsonTypeName(got)));
}

inline bool Fill::Syntax(simdjson::error_code e) {
  return SyntaxText(fmt::format("invalid JSON: {}", simdjson::error_message(e)));
}

inline bool Fill::SyntaxText(std::string problem) {
  error_.problem = std::move(problem);
  error_.type_name.clear();
  return false;
}

[[gnu::always_inline]] inline bool Fill::FillBool(Slot& s, od::value& v, od::json_type t,
                                                  uint64_t row) {
  bool b = false;
  if (t == od::json_type::boolean) {
    if (auto e = v.get_bool().get(b); e) return Syntax(e);
  } else if (t == od::json_type::string && !lenient_) {
    std::string_view sv;
    if (auto e = v.get_string().get(sv); e) return Syntax(e);
    if (EqualsIgnoreCase(sv, "true") || EqualsIgnoreCase(sv, "t") || sv == "1") {
      b = true;
    } else if (EqualsIgnoreCase(sv, "false") || EqualsIgnoreCase(sv, "f") || sv == "0") {
      b = false;
    } else {
      return Fail(s, fmt::format("{} is not a boolean", Excerpt(sv)));
    }
  } else {
    return WrongType(s, t, "a boolean");
  }
  static_cast<bool*>(s.data)[row] = b;
  Vector::SetValid(s.validity, row);
  return true;
}

template <typename T>
inline bool Fill::StoreIntegral(Slot& s, double d, std::string_view text, uint64_t row) {
  // DuckDB rounds a fractional number cast to an integer (half to even); so does sluice.
  double r = std::nearbyint(d);
  // 2^63 and 2^64 are exact doubles; the upper bound is exclusive.
  constexpr double kLo = static_cast<double>(std::numeric_limits<T>::min());
  constexpr double kHi = std::is_same_v<T, int64_t> ? 9223372036854775808.0
                         : std::is_same_v<T, uint64_t>
                             ? 18446744073709551616.0
                             : static_cast<double>(std::numeric_limits<T>::max()) + 1;
  if (!(r >= kLo && r < kHi)) {
    return Fail(s, fmt::format("{} is out of range", text));
  }
  static_cast<T*>(s.data)[row] = static_cast<T>(r);
  Vector::SetValid(s.validity, row);
  return true;
}

template <typename T>
inline bool Fill::StoreInt64(Slot& s, int64_t x, uint64_t row) {
  if constexpr (std::is_signed_v<T>) {
    if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
      return Fail(s, fmt::format("{} is out of range", x));
    }
  } else {
    if (x < 0 || static_cast<uint64_t>(x) > std::numeric_limits<T>::max()) {
      return Fail(s, fmt::format("{} is out of range", x));
    }
  }
  static_cast<T*>(s.data)[row] = static_cast<T>(x);
  Vector::SetValid(s.validity, row);
  return true;
}

template <typename T>
inline bool Fill::FillInt(Slot& s, od::value& v, od::json_type t, uint64_t row) {
  if (t == od::json_type::number) {
    int64_t x;
    if (v.get_int64().get(x) == simdjson::SUCCESS) return StoreInt64<T>(s, x, row);
    std::string_view token = TrimRight(v.raw_json_token());
    if (!IsJsonNumber(token)) return SyntaxText(fmt::format("invalid number {}", Excerpt(token)));
    if constexpr (std::is_same_v<T, uint64_t>) {
      uint64_t u;
      if (v.get_uint64().get(u) == simdjson::SUCCESS) {
        static_cast<uint64_t*>(s.data)[row] = u;
        Vector::SetValid(s.validity, row);
        return true;
      }
    }
    double d;
    if (v.get_double().get(d) != simdjson::SUCCESS) {
      return Fail(s, fmt::format("{} is out of range", token));
    }
    // Lenient: 5.0 is 5, but 5.5 does not fit (strict rounds it, as DuckDB's cast does).
    if (lenient_ && d != std::trunc(d)) return Fail(s, fmt::format("{} has a fraction", token));
    return StoreIntegral<T>(s, d, token, row);
  }
  if (t == od::json_type::string && !lenient_) {
    // DuckDB casts numeric strings ("42") to numbers; so does sluice.
    std::string_view sv;
    if (auto e = v.get_string().get(sv); e) return Syntax(e);
    int64_t x;
    auto [p, ec] = std::from_chars(sv.data(), sv.data() + sv.size(), x);
    if (ec == std::errc() && p == sv.data() + sv.size()) return StoreInt64<T>(s, x, row);
    if constexpr (std::is_same_v<T, uint64_t>) {
      uint64_t u;
      auto [p2, ec2] = std::from_chars(sv.data(), sv.data() + sv.size(), u);
      if (ec2 == std::errc() && p2 == sv.data() + sv.size()) {
        static_cast<uint64_t*>(s.data)[row] = u;
        Vector::SetValid(s.validity, row);
        return true;
      }
    }
    double d;
    auto [p3, ec3] = std::from_chars(sv.data(), sv.data() + sv.size(), d);
    if (sv.empty() || ec3 != std::errc() || p3 != sv.data() + sv.size() || !std::isfinite(d)) {
      return Fail(s, fmt::format("{} is not a number", Excerpt(sv)));
    }
    return StoreIntegral<T>(s, d, Excerpt(sv), row);
  }
  return WrongType(s, t, "a number");
}

template <typename T>
inline bool Fill::FillFloat(Slot& s, od::value& v, od::json_type t, uint64_t row) {
  double d;
  if (t == od::json_type::number) {
    if (v.get_double().get(d) != simdjson::SUCCESS) {
      std::string_view token = TrimRight(v.raw_json_token());
      if (!IsJsonNumber(token)) return SyntaxText(fmt::format("invalid number {}", Excerpt(token)));
      return Fail(s, fmt::format("{} is out of range", token));
    }
  } else if (t == od::json_type::string && !lenient_) {
    std::string_view sv;
    if (auto e = v.get_string().get(sv); e) return Syntax(e);
    auto [p, ec] = std::from_chars(sv.data(), sv.data() + sv.size(), d);
    if (sv.empty() || ec != std::errc() || p != sv.data() + sv.size()) {
      return Fail(s, fmt::format("{} is not a number", Excerpt(sv)));
    }
  } else {
    return WrongType(s, t, "a number");
  }
  if constexpr (std::is_same_v<T, float>) {
    if (std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max()) {
      return Fail(s, fmt::format("{} is out of range", d));
    }
  }
  static_cast<T*>(s.data)[row] = static_cast<T>(d);
  Vector::SetValid(s.validity, row);
  return true;
}

// Always inlined (with RawJson): the path of every VARCHAR value, past the size GCC's -O2
// inlines on its own.
[[gnu::always_inline]] inline bool Fill::FillText(Slot& s, od::value& v, od::json_type t,
                                                  uint64_t row, int depth) {
  std::string_view text;
  if (t == od::json_type::string) {
    if (auto e = v.get_string().get(text); e) return Syntax(e);
  } else if (t == od::json_type::boolean) {
    bool b;
    if (auto e = v.get_bool().get(b); e) return Syntax(e);
    text = b ? "true" : "false";
  } else if (!RawJson(v, t, depth, &text)) {
    return false;
  }
  s.vec.AssignString(row, text);
  Vector::SetValid(s.validity, row);
  return true;
}

inline bool Fill::FillJsonText(Slot& s, od::value& v, od::json_type t, uint64_t row, int depth) {
  std::string_view text;
  if (!RawJson(v, t, depth, &text)) return false;
  s.vec.AssignString(row, text);
  Vector::SetValid(s.validity, row);
  return true;
}

[[gnu::always_inline]] inline bool Fill::FillTime(Slot& s, od::value& v, od::json_type t,
                                                  uint64_t row) {
  int64_t micros = 0;
  int32_t nanos = 0;
  if (t == od::json_type::string) {
    std::string_view sv;
    if (auto e = v.get_string().get(sv); e) return Syntax(e);
    ParsedTime pt;
    if (!ParseIsoTimestamp(sv, &pt)) {
      return Fail(s, fmt::format("{} is not an ISO-8601 {}", Excerpt(sv),
                                 s.kind == Kind::kDate ? "date" : "timestamp"));
    }
    if (s.kind == Kind::kDate) {
      static_cast<int32_t*>(s.data)[row] = static_cast<int32_t>(pt.days);
      Vector::SetValid(s.validity, row);
      return true;
    }
    micros = pt.days * 86400000000LL + pt.micros_of_day;
    nanos = pt.nanos;
    // TIMESTAMPTZ is an instant: the offset applies. TIMESTAMP keeps the wall-clock time
    // as written, offset dropped, as DuckDB's own cast does.
    if (s.kind != Kind::kTimestamp) micros -= int64_t{pt.offset_seconds} * 1000000;
  } else if (t == od::json_type::number && s.kind != Kind::kDate) {
    // Epoch numbers; the unit follows the magnitude (see the design note).
    int64_t x;
    double d;
    if (v.get_int64().get(x) == simdjson::SUCCESS) {
      int64_t ax = x < 0 ? -(x + 1) : x;
      if (ax < 100000000000LL) {
        micros = x * 1000000;
      } else if (ax < 100000000000000LL) {
        micros = x * 1000;
      } else if (ax < 100000000000000000LL) {
        micros = x;
      } else {
        micros = x / 1000;
        nanos = static_cast<int32_t>(x % 1000);
        if (nanos < 0) {
          nanos += 1000;
          micros -= 1;
        }
      }
    } else if (v.get_double().get(d) == simdjson::SUCCESS && std::isfinite(d)) {
      double ad = std::fabs(d);
      double scaled = ad < 1e11 ? d * 1e6 : ad < 1e14 ? d * 1e3 : ad < 1e17 ? d : d / 1e3;
      if (!(scaled > -9.2e18 && scaled < 9.2e18)) {
        return Fail(s, fmt::format("{} is out of range", TrimRight(v.raw_json_token())));
      }
      micros = std::llround(scaled);
    } else {
      return Fail(s, fmt::format("{} is out of range", TrimRight(v.raw_json_token())));
    }
  } else {
    return WrongType(s, t,
                     s.kind == Kind::kDate ? "a date string" : "a timestamp string or number");
  }
  int64_t out = micros;
  switch (s.kind) {
    case Kind::kTimestampS:
      out = micros / 1000000 - (micros % 1000000 < 0 ? 1 : 0);
      break;
    case Kind::kTimestampMs:
      out = micros / 1000 - (micros % 1000 < 0 ? 1 : 0);
      break;
    case Kind::kTimestampNs:
      if (__builtin_mul_overflow(micros, int64_t{1000}, &out) ||
          __builtin_add_overflow(out, int64_t{nanos}, &out)) {
        return Fail(s, "out of range for TIMESTAMP_NS");
      }
      break;
    default:
      break;
  }
  static_cast<int64_t*>(s.data)[row] = out;
  Vector::SetValid(s.validity, row);
  return true;
}

inline bool Fill::FillList(Slot& s, od::value& v, od::json_type t, uint64_t row, int depth) {
  if (t != od::json_type::array) return WrongType(s, t, "an array");
  od::array arr;
  if (auto e = v.get_array().get(arr); e) return Syntax(e);
  const uint64_t start = s.list_size;
  Slot& child = s.children[0];
  for (auto elem_result : arr) {
    if (auto e = elem_result.error(); e) return Syntax(e);
    od::value& elem = elem_result.value_unsafe();
    if (!EnsureListRoom(s, s.list_size)) return false;
    if (!FillValue(child, elem, s.list_size, depth + 1)) {
      if (!lenient_) {
        error_.path.push_back(fmt::format("[{}]", s.list_size - start));
        return false;
      }
      SetNull(child, s.list_size);  // an element that does not fit is NULL
    }
    ++s.list_size;
  }
  static_cast<duck::ListEntry*>(s.data)[row] = {start, s.list_size - start};
  Vector::SetValid(s.validity, row);
  return true;
}

bool Fill::ValidateObject(od::object obj) {
  for (auto field_result : obj) {
    if (auto e = field_result.error(); e) return Syntax(e);
    od::field& field = field_result.value_unsafe();  // not moved: see FillObject
    std::string_view key;
    if (auto e = field.unescaped_key().get(key); e) return Syntax(e);
    if (!SkipValidated(field.value(), 1)) {
      error_.path.emplace_back(key);
      return false;
    }
  }
  return true;
}

std::string_view Fill::Minified(std::string_view json) {
  if (minified_.size() < json.size()) minified_.resize(json.size());
  size_t length = 0;
  if (simdjson::minify(json.data(), json.size(), minified_.data(), length) != simdjson::SUCCESS) {
    return json;  // validated already: not reached
  }
  return std::string_view(minified_.data(), length);
}

inline int Fill::Find(const std::vector<Slot>& fields,
                      const std::vector<std::pair<std::string, uint32_t>>& sorted,
                      std::string_view key, size_t hint) const {
  // Producers usually write keys in the same order as the columns: try the next one first.
  if (hint < fields.size() && fields[hint].name == key) return static_cast<int>(hint);
  if (sorted.empty()) {
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i].name == key) return static_cast<int>(i);
    }
  } else {
    auto it = std::lower_bound(sorted.begin(), sorted.end(), key,
                               [](const auto& p, std::string_view k) { return p.first < k; });
    if (it != sorted.end() && it->first == key) return static_cast<int>(it->second);
  }
  if (case_insensitive_) {
    for (size_t i = 0; i < fields.size(); ++i) {
      if (EqualsIgnoreCase(fields[i].name, key)) return static_cast<int>(i);
    }
  }
  return -1;
}

// ---- Filler: the decoders' entry points --------------------------------------------------

bool Filler::FillObject(od::object obj, std::vector<Slot>& fields,
                        const std::vector<std::pair<std::string, uint32_t>>& sorted, uint64_t row,
                        int depth) {
  return Fill(case_insensitive_, lenient_, max_depth_, doc_, stamp_, error_, minified_)
      .FillObject(obj, fields, sorted, row, depth);
}

bool Filler::SkipValidated(od::value& v, int depth) {
  return Fill(case_insensitive_, lenient_, max_depth_, doc_, stamp_, error_, minified_)
      .SkipValidated(v, depth);
}

bool Filler::ValidateObject(od::object obj) {
  return Fill(case_insensitive_, lenient_, max_depth_, doc_, stamp_, error_, minified_)
      .ValidateObject(obj);
}

void Filler::SetNull(Slot& s, uint64_t row) { Fill::SetNull(s, row); }

void Filler::Refresh(Slot& s, Vector v) { Fill::Refresh(s, v); }

}  // namespace sluice::json
