// JSON messages into DuckDB data chunks: the column plan (Slot), the on-demand fill, ISO-8601
// timestamps, the staging path for rare types, and schema inference.
#include "pipeline/json_decoder.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "duck/chunk_view.h"
#include "duck/data_chunk.h"
#include "duck/logical_type.h"

namespace sluice::pipeline {

namespace od = simdjson::ondemand;
using duck::TypeId;
using duck::Vector;
using kafka::client::Message;

namespace {

// JSON nested deeper than this is refused (it also bounds the decoder's recursion). The
// parser's own limit is a little higher, so that this check is the one that fires: simdjson's
// on-demand API only checks its limit with development checks (debug builds, by assert).
constexpr size_t kMaxJsonDepth = 256;
constexpr size_t kParserMaxDepth = kMaxJsonDepth + 16;
// Buffers grown past this by a large message are released after the batch.
constexpr size_t kKeepBufferBytes = size_t{4} << 20;

// ---- small text helpers ----------------------------------------------------------------

char AsciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (AsciiLower(a[i]) != AsciiLower(b[i])) return false;
  }
  return true;
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' ||
                        s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// A value for an error message: at most 64 bytes of it, quoted.
std::string Excerpt(std::string_view s) {
  if (s.size() <= 64) return fmt::format("\"{}\"", s);
  return fmt::format("\"{}...\"", s.substr(0, 61));
}

// JSON's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool IsJsonNumber(std::string_view s) {
  size_t i = 0, n = s.size();
  auto digits = [&] {
    size_t start = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < n && s[i] == '-') ++i;
  if (i < n && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == n;
}

std::string_view JsonTypeName(od::json_type t) {
  switch (t) {
    case od::json_type::array: return "an array";
    case od::json_type::object: return "an object";
    case od::json_type::number: return "a number";
    case od::json_type::string: return "a string";
    case od::json_type::boolean: return "a boolean";
    case od::json_type::null: return "null";
  }
  return "a value";
}

// ---- ISO-8601 timestamps -----------------------------------------------------------------

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

struct ParsedTime {
  int64_t days = 0;           // the date as written
  int64_t micros_of_day = 0;  // the time as written
  int32_t nanos = 0;          // digits past microseconds (0..999)
  int32_t offset_seconds = 0; // the UTC offset written (Z = 0), 0 when none
};

// YYYY-MM-DD[(T|t| )HH:MM[:SS[.fraction]][Z|z|(+|-)HH[[:]MM]]]; months and days may have one
// digit, as DuckDB accepts. Returns false on anything else.
bool ParseIsoTimestamp(std::string_view s, ParsedTime* out) {
  size_t i = 0, n = s.size();
  auto number = [&](size_t min_digits, size_t max_digits, int64_t* v) {
    size_t start = i;
    int64_t x = 0;
    while (i < n && i - start < max_digits && s[i] >= '0' && s[i] <= '9') x = x * 10 + (s[i++] - '0');
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

// ---- the column plan -----------------------------------------------------------------------

enum class Kind : uint8_t {
  kBool, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kFloat, kDouble,
  kVarchar, kBlob, kJson, kDate, kTimestamp, kTimestampTz, kTimestampS, kTimestampMs,
  kTimestampNs, kList, kStruct,
  kStaged,  // a rare type: the value's JSON text, cast by DuckDB later
};

// Whether every part of `t` has a direct path.
bool IsDirect(const duck::LogicalType& t) {
  switch (t.id()) {
    case TypeId::kBoolean: case TypeId::kTinyInt: case TypeId::kSmallInt: case TypeId::kInteger:
    case TypeId::kBigInt: case TypeId::kUTinyInt: case TypeId::kUSmallInt: case TypeId::kUInteger:
    case TypeId::kUBigInt: case TypeId::kFloat: case TypeId::kDouble: case TypeId::kVarchar:
    case TypeId::kBlob: case TypeId::kDate: case TypeId::kTimestamp: case TypeId::kTimestampTz:
    case TypeId::kTimestampS: case TypeId::kTimestampMs: case TypeId::kTimestampNs:
      return true;
    case TypeId::kList: return IsDirect(t.ListChild());
    case TypeId::kStruct:
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        if (!IsDirect(t.StructFieldType(i))) return false;
      }
      return t.StructFieldCount() > 0;
    default: return false;
  }
}

// One column, struct field or list element, and where it is written in the current chunk.
struct Slot {
  Kind kind = Kind::kVarchar;
  std::string name;       // column or field name ("" for a list element)
  std::string type_name;  // for error messages
  std::vector<Slot> children;  // struct fields, or the one list element
  std::vector<std::pair<std::string, uint32_t>> sorted;  // struct fields by name, when many

  // Bound per chunk.
  Vector vec;
  void* data = nullptr;
  uint64_t* validity = nullptr;
  uint64_t list_size = 0;      // child rows used (LIST)
  uint64_t list_capacity = 0;  // child rows reserved (LIST)
  uint64_t seen = 0;           // stamp of the object that last set this field
};

Slot BuildSlot(const duck::LogicalType& t, std::string name, std::string type_name) {
  Slot s;
  s.name = std::move(name);
  s.type_name = std::move(type_name);
  if (!IsDirect(t)) {
    s.kind = Kind::kStaged;
    return s;
  }
  switch (t.id()) {
    case TypeId::kBoolean: s.kind = Kind::kBool; break;
    case TypeId::kTinyInt: s.kind = Kind::kI8; break;
    case TypeId::kSmallInt: s.kind = Kind::kI16; break;
    case TypeId::kInteger: s.kind = Kind::kI32; break;
    case TypeId::kBigInt: s.kind = Kind::kI64; break;
    case TypeId::kUTinyInt: s.kind = Kind::kU8; break;
    case TypeId::kUSmallInt: s.kind = Kind::kU16; break;
    case TypeId::kUInteger: s.kind = Kind::kU32; break;
    case TypeId::kUBigInt: s.kind = Kind::kU64; break;
    case TypeId::kFloat: s.kind = Kind::kFloat; break;
    case TypeId::kDouble: s.kind = Kind::kDouble; break;
    case TypeId::kVarchar: s.kind = t.alias() == "JSON" ? Kind::kJson : Kind::kVarchar; break;
    case TypeId::kBlob: s.kind = Kind::kBlob; break;
    case TypeId::kDate: s.kind = Kind::kDate; break;
    case TypeId::kTimestamp: s.kind = Kind::kTimestamp; break;
    case TypeId::kTimestampTz: s.kind = Kind::kTimestampTz; break;
    case TypeId::kTimestampS: s.kind = Kind::kTimestampS; break;
    case TypeId::kTimestampMs: s.kind = Kind::kTimestampMs; break;
    case TypeId::kTimestampNs: s.kind = Kind::kTimestampNs; break;
    case TypeId::kList: {
      s.kind = Kind::kList;
      duck::LogicalType child = t.ListChild();
      s.children.push_back(BuildSlot(child, "", child.ToSql()));
      break;
    }
    case TypeId::kStruct: {
      s.kind = Kind::kStruct;
      for (size_t i = 0; i < t.StructFieldCount(); ++i) {
        duck::LogicalType f = t.StructFieldType(i);
        s.children.push_back(BuildSlot(f, t.StructFieldName(i), f.ToSql()));
      }
      break;
    }
    default: SLUICE_ASSERT(false);
  }
  return s;
}

constexpr size_t kLinearLookupMax = 16;

void IndexFields(std::vector<Slot>& fields, std::vector<std::pair<std::string, uint32_t>>* sorted) {
  sorted->clear();
  if (fields.size() <= kLinearLookupMax) return;
  for (uint32_t i = 0; i < fields.size(); ++i) sorted->emplace_back(fields[i].name, i);
  std::sort(sorted->begin(), sorted->end());
}

void IndexTree(Slot& s) {
  for (Slot& c : s.children) IndexTree(c);
  if (s.kind == Kind::kStruct) IndexFields(s.children, &s.sorted);
}

// ---- reading one message -------------------------------------------------------------------

// simdjson needs SIMDJSON_PADDING readable bytes after the text; librdkafka's buffers have
// none, so each message is copied into a reused padded buffer first.
class JsonReader {
 public:
  JsonReader() { Allocate(); }

  simdjson::error_code Iterate(std::string_view json, od::document* doc) {
    size_t need = json.size() + simdjson::SIMDJSON_PADDING;
    if (buf_.size() < need) buf_.resize(std::max(need, 2 * buf_.size()));
    std::memcpy(buf_.data(), json.data(), json.size());
    std::memset(buf_.data() + json.size(), 0, simdjson::SIMDJSON_PADDING);
    return parser_.iterate(buf_.data(), json.size(), buf_.size()).get(*doc);
  }

  // Releases what a very large message made the buffers grow to.
  void Shrink() {
    if (buf_.size() > kKeepBufferBytes) std::vector<char>().swap(buf_);
    if (parser_.capacity() > kKeepBufferBytes) {
      parser_ = od::parser();
      Allocate();
    }
  }

 private:
  // The depth limit is set here; iterate() grows the capacity as messages need.
  void Allocate() {
    if (parser_.allocate(64 << 10, kParserMaxDepth) != simdjson::SUCCESS) parser_ = od::parser();
  }
  od::parser parser_;
  std::vector<char> buf_;
};

// Why a value failed: the problem, the type it was meant for, and the key path (built as
// the recursion unwinds, innermost first).
struct FillError {
  std::string problem;
  std::string type_name;
  std::vector<std::string> path;

  void Clear() {
    problem.clear();
    type_name.clear();
    path.clear();
  }
  std::string Reason() const {
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
};

// Writes JSON values into bound Slots. One per decoder; not thread-safe.
class Filler {
 public:
  explicit Filler(bool case_insensitive) : case_insensitive_(case_insensitive) {}

  FillError& error() { return error_; }
  void set_document(od::document* doc) { doc_ = doc; }

  // Fills `fields` (a table's columns or a struct's fields) at `row` from `obj`: missing
  // keys become NULL, unknown keys are checked and skipped.
  bool FillObject(od::object obj, std::vector<Slot>& fields,
                  const std::vector<std::pair<std::string, uint32_t>>& sorted, uint64_t row,
                  int depth) {
    const uint64_t stamp = ++stamp_;
    size_t hint = 0;
    for (auto field_result : obj) {
      od::field field;
      if (auto e = std::move(field_result).get(field); e) return Syntax(e);
      std::string_view key;
      if (auto e = field.unescaped_key().get(key); e) return Syntax(e);
      int idx = Find(fields, sorted, key, hint);
      if (idx < 0) {
        if (!SkipValidated(field.value(), depth + 1)) {
          error_.path.emplace_back(key);
          return false;
        }
        continue;
      }
      hint = static_cast<size_t>(idx) + 1;
      Slot& c = fields[idx];
      if (!FillValue(c, field.value(), row, depth + 1)) {
        error_.path.push_back(c.name);
        return false;
      }
      c.seen = stamp;
    }
    for (Slot& c : fields) {
      if (c.seen != stamp) SetNull(c, row);
    }
    return true;
  }

  bool FillValue(Slot& s, od::value v, uint64_t row, int depth) {
    od::json_type t;
    if (auto e = v.type().get(t); e) return Syntax(e);
    if (t == od::json_type::null) {
      bool is_null = false;
      if (v.is_null().get(is_null) || !is_null) return Fail(s, "invalid literal (expected null)");
      SetNull(s, row);
      return true;
    }
    switch (s.kind) {
      case Kind::kBool: return FillBool(s, v, t, row);
      case Kind::kI8: return FillInt<int8_t>(s, v, t, row);
      case Kind::kI16: return FillInt<int16_t>(s, v, t, row);
      case Kind::kI32: return FillInt<int32_t>(s, v, t, row);
      case Kind::kI64: return FillInt<int64_t>(s, v, t, row);
      case Kind::kU8: return FillInt<uint8_t>(s, v, t, row);
      case Kind::kU16: return FillInt<uint16_t>(s, v, t, row);
      case Kind::kU32: return FillInt<uint32_t>(s, v, t, row);
      case Kind::kU64: return FillInt<uint64_t>(s, v, t, row);
      case Kind::kFloat: return FillFloat<float>(s, v, t, row);
      case Kind::kDouble: return FillFloat<double>(s, v, t, row);
      case Kind::kVarchar:
      case Kind::kBlob: return FillText(s, v, t, row, depth);
      case Kind::kJson:
      case Kind::kStaged: return FillJsonText(s, v, t, row, depth);
      case Kind::kDate:
      case Kind::kTimestamp:
      case Kind::kTimestampTz:
      case Kind::kTimestampS:
      case Kind::kTimestampMs:
      case Kind::kTimestampNs: return FillTime(s, v, t, row);
      case Kind::kList: return FillList(s, v, t, row, depth);
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

  // Walks a value the decoder does not store, so that invalid JSON inside it is still
  // caught (simdjson's on-demand API skips unread values without validating them).
  bool SkipValidated(od::value v, int depth) {
    if (depth > static_cast<int>(kMaxJsonDepth)) return Syntax(simdjson::DEPTH_ERROR);
    od::json_type t;
    if (auto e = v.type().get(t); e) return Syntax(e);
    switch (t) {
      case od::json_type::object: {
        od::object obj;
        if (auto e = v.get_object().get(obj); e) return Syntax(e);
        for (auto field_result : obj) {
          od::field field;
          if (auto e = std::move(field_result).get(field); e) return Syntax(e);
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
          od::value elem;
          if (auto e = elem_result.get(elem); e) return Syntax(e);
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

  // The exact JSON text of `v` (validated), without surrounding whitespace.
  bool RawJson(od::value v, od::json_type t, int depth, std::string_view* out) {
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
    return true;
  }

  // NULL for `s` and, for a struct, its fields (DuckDB expects a NULL struct's children to
  // be NULL too); an empty entry for a list.
  void SetNull(Slot& s, uint64_t row) {
    Vector::SetInvalid(s.validity, row);
    if (s.kind == Kind::kStruct) {
      for (Slot& c : s.children) SetNull(c, row);
    } else if (s.kind == Kind::kList) {
      static_cast<duck::ListEntry*>(s.data)[row] = {s.list_size, 0};
    }
  }

  // Makes room for child row `index` of a list; rebinds the child's pointers when moved.
  bool EnsureListRoom(Slot& s, uint64_t index) {
    if (index < s.list_capacity) return true;
    uint64_t cap = std::max<uint64_t>({index + 1, s.list_capacity * 2, 64});
    Status st = s.vec.ListReserve(cap);
    if (!st.ok()) return Fail(s, st.message());
    s.list_capacity = cap;
    Refresh(s.children[0], s.vec.ListChild());
    return true;
  }

  // Points a slot (and its struct fields) at `v`'s current buffers; a nested list keeps its
  // own child state (its child buffer does not move with its parent's).
  static void Refresh(Slot& s, Vector v) {
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

 private:
  bool Fail(const Slot& s, std::string problem) {
    error_.problem = std::move(problem);
    error_.type_name = s.type_name;
    return false;
  }
  bool WrongType(const Slot& s, od::json_type got, std::string_view expected) {
    return Fail(s, fmt::format("expected {}, got {}", expected, JsonTypeName(got)));
  }
  bool Syntax(simdjson::error_code e) {
    return SyntaxText(fmt::format("invalid JSON: {}", simdjson::error_message(e)));
  }
  bool SyntaxText(std::string problem) {
    error_.problem = std::move(problem);
    error_.type_name.clear();
    return false;
  }

  int Find(const std::vector<Slot>& fields,
           const std::vector<std::pair<std::string, uint32_t>>& sorted, std::string_view key,
           size_t hint) const {
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

  bool FillBool(Slot& s, od::value v, od::json_type t, uint64_t row) {
    bool b = false;
    if (t == od::json_type::boolean) {
      if (auto e = v.get_bool().get(b); e) return Syntax(e);
    } else if (t == od::json_type::string) {
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
  bool StoreIntegral(Slot& s, double d, std::string_view text, uint64_t row) {
    // DuckDB rounds a fractional number cast to an integer (half to even); so does sluice.
    double r = std::nearbyint(d);
    // 2^63 and 2^64 are exact doubles; the upper bound is exclusive.
    constexpr double kLo = static_cast<double>(std::numeric_limits<T>::min());
    constexpr double kHi = std::is_same_v<T, int64_t>    ? 9223372036854775808.0
                           : std::is_same_v<T, uint64_t> ? 18446744073709551616.0
                                                         : static_cast<double>(std::numeric_limits<T>::max()) + 1;
    if (!(r >= kLo && r < kHi)) {
      return Fail(s, fmt::format("{} is out of range", text));
    }
    static_cast<T*>(s.data)[row] = static_cast<T>(r);
    Vector::SetValid(s.validity, row);
    return true;
  }

  template <typename T>
  bool StoreInt64(Slot& s, int64_t x, uint64_t row) {
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
  bool FillInt(Slot& s, od::value v, od::json_type t, uint64_t row) {
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
      return StoreIntegral<T>(s, d, token, row);
    }
    if (t == od::json_type::string) {
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
  bool FillFloat(Slot& s, od::value v, od::json_type t, uint64_t row) {
    double d;
    if (t == od::json_type::number) {
      if (v.get_double().get(d) != simdjson::SUCCESS) {
        std::string_view token = TrimRight(v.raw_json_token());
        if (!IsJsonNumber(token)) return SyntaxText(fmt::format("invalid number {}", Excerpt(token)));
        return Fail(s, fmt::format("{} is out of range", token));
      }
    } else if (t == od::json_type::string) {
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

  // VARCHAR/BLOB: a string's text; the JSON text of anything else.
  bool FillText(Slot& s, od::value v, od::json_type t, uint64_t row, int depth) {
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

  // JSON columns and staged rare types: the value's JSON text, strings with their quotes.
  bool FillJsonText(Slot& s, od::value v, od::json_type t, uint64_t row, int depth) {
    std::string_view text;
    if (!RawJson(v, t, depth, &text)) return false;
    s.vec.AssignString(row, text);
    Vector::SetValid(s.validity, row);
    return true;
  }

  bool FillTime(Slot& s, od::value v, od::json_type t, uint64_t row) {
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
      return WrongType(s, t, s.kind == Kind::kDate ? "a date string" : "a timestamp string or number");
    }
    int64_t out = micros;
    switch (s.kind) {
      case Kind::kTimestampS: out = micros / 1000000 - (micros % 1000000 < 0 ? 1 : 0); break;
      case Kind::kTimestampMs: out = micros / 1000 - (micros % 1000 < 0 ? 1 : 0); break;
      case Kind::kTimestampNs:
        if (__builtin_mul_overflow(micros, int64_t{1000}, &out) ||
            __builtin_add_overflow(out, int64_t{nanos}, &out)) {
          return Fail(s, "out of range for TIMESTAMP_NS");
        }
        break;
      default: break;
    }
    static_cast<int64_t*>(s.data)[row] = out;
    Vector::SetValid(s.validity, row);
    return true;
  }

  bool FillList(Slot& s, od::value v, od::json_type t, uint64_t row, int depth) {
    if (t != od::json_type::array) return WrongType(s, t, "an array");
    od::array arr;
    if (auto e = v.get_array().get(arr); e) return Syntax(e);
    const uint64_t start = s.list_size;
    Slot& child = s.children[0];
    for (auto elem_result : arr) {
      od::value elem;
      if (auto e = elem_result.get(elem); e) return Syntax(e);
      if (!EnsureListRoom(s, s.list_size)) return false;
      if (!FillValue(child, elem, s.list_size, depth + 1)) {
        error_.path.push_back(fmt::format("[{}]", s.list_size - start));
        return false;
      }
      ++s.list_size;
    }
    static_cast<duck::ListEntry*>(s.data)[row] = {start, s.list_size - start};
    Vector::SetValid(s.validity, row);
    return true;
  }

  bool case_insensitive_;
  uint64_t stamp_ = 0;
  od::document* doc_ = nullptr;
  FillError error_;
};

// ---- chunks of rows ------------------------------------------------------------------------

// The rows being built: a DataChunk whose first columns are `slots` (the JSON columns),
// bound to the chunk, with the list sizes to roll back a row that failed half-way.
class ChunkBuilder {
 public:
  ChunkBuilder(duck::DataChunk chunk, std::vector<Slot> slots)
      : chunk_(std::move(chunk)), slots_(std::move(slots)) {
    for (Slot& s : slots_) {
      IndexTree(s);
      CollectLists(s);
    }
    IndexFields(slots_, &sorted_);
    list_marks_.resize(lists_.size());
    Bind();
  }

  std::vector<Slot>& slots() { return slots_; }
  const std::vector<std::pair<std::string, uint32_t>>& sorted() const { return sorted_; }
  duck::DataChunk& chunk() { return chunk_; }
  uint64_t rows() const { return rows_; }
  bool full() const { return rows_ == duck::DataChunk::Capacity(); }

  // Before a row: remember where each list's children end.
  void MarkRow() {
    for (size_t i = 0; i < lists_.size(); ++i) list_marks_[i] = lists_[i]->list_size;
  }
  // After a failed row: forget its list children.
  void RollbackRow() {
    for (size_t i = 0; i < lists_.size(); ++i) lists_[i]->list_size = list_marks_[i];
  }
  void CommitRow() { ++rows_; }

  // Sets the sizes DuckDB reads, for Appender::Append.
  Status Finish() {
    for (Slot* l : lists_) {
      if (l->list_capacity > 0) RETURN_IF_ERROR(l->vec.ListSetSize(l->list_size));
    }
    chunk_.SetSize(rows_);
    return Status::OK();
  }

  void Reset() {
    chunk_.Reset();
    rows_ = 0;
    Bind();
  }

  // Hands out the chunk built so far (Finish first) and goes on with `empty` (a chunk of
  // the same types, fresh or Reset).
  duck::DataChunk Swap(duck::DataChunk empty) {
    std::swap(chunk_, empty);
    rows_ = 0;
    Bind();
    return empty;
  }

 private:
  void CollectLists(Slot& s) {
    if (s.kind == Kind::kList) lists_.push_back(&s);
    for (Slot& c : s.children) CollectLists(c);
  }

  static void ResetLists(Slot& s) {
    s.list_size = 0;
    s.list_capacity = 0;
    for (Slot& c : s.children) ResetLists(c);
  }

  void Bind() {
    for (size_t i = 0; i < slots_.size(); ++i) {
      ResetLists(slots_[i]);
      Filler::Refresh(slots_[i], chunk_.column(i));
    }
  }

  duck::DataChunk chunk_;
  std::vector<Slot> slots_;
  std::vector<std::pair<std::string, uint32_t>> sorted_;
  std::vector<Slot*> lists_;  // every LIST slot, at any depth
  std::vector<uint64_t> list_marks_;
  uint64_t rows_ = 0;
};

// The decoded chunks of the batch being served from memory (a ChunkView reads them), and
// spare chunks to reuse for the next batch.
class ChunkPool {
 public:
  explicit ChunkPool(std::vector<duck::LogicalType> types) : types_(std::move(types)) {}

  // The previous batch is no longer read: its chunks become spares.
  void Recycle() {
    for (duck::DataChunk& c : held_) {
      c.Reset();
      spare_.push_back(std::move(c));
    }
    held_.clear();
  }

  // Moves the builder's finished chunk into the batch and gives the builder an empty one.
  Status Hold(ChunkBuilder& b) {
    RETURN_IF_ERROR(b.Finish());
    if (spare_.empty()) {
      ASSIGN_OR_RETURN(duck::DataChunk fresh, duck::DataChunk::Create(types_));
      spare_.push_back(std::move(fresh));
    }
    duck::DataChunk next = std::move(spare_.back());
    spare_.pop_back();
    held_.push_back(b.Swap(std::move(next)));
    return Status::OK();
  }

  // After a batch: spares past a few are freed (a big batch does not pin its memory).
  void Trim() {
    while (spare_.size() > kKeepSpareChunks) spare_.pop_back();
  }

  std::vector<const duck::DataChunk*> batch() const {
    std::vector<const duck::DataChunk*> out;
    for (const duck::DataChunk& c : held_) out.push_back(&c);
    return out;
  }

 private:
  static constexpr size_t kKeepSpareChunks = 4;
  std::vector<duck::LogicalType> types_;
  std::vector<duck::DataChunk> held_;
  std::vector<duck::DataChunk> spare_;
};

std::string_view MessageProblem(const Message& m) {
  if (m.value.data() == nullptr) return "message has no value (null)";
  if (m.value.empty()) return "empty message: expected a JSON object";
  return "";
}

// Parses message `m` as a JSON object; on error returns false with the reason in *reason.
bool OpenObject(JsonReader& reader, const Message& m, od::document* doc, od::object* obj,
                std::string* reason) {
  if (std::string_view p = MessageProblem(m); !p.empty()) {
    *reason = std::string(p);
    return false;
  }
  if (auto e = reader.Iterate(m.value, doc); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  od::json_type t;
  if (auto e = doc->type().get(t); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  if (t != od::json_type::object) {
    // The first byte decides the type: text starting with n, t or f may not be JSON at all.
    bool atom_ok = true;
    if (t == od::json_type::null) {
      bool is_null = false;
      atom_ok = !doc->is_null().get(is_null) && is_null;
    } else if (t == od::json_type::boolean) {
      bool b = false;
      atom_ok = !doc->get_bool().get(b);
    }
    *reason = atom_ok ? fmt::format("expected a JSON object, got {}", JsonTypeName(t))
                      : std::string("invalid JSON: not a JSON value");
    return false;
  }
  if (auto e = doc->get_object().get(*obj); e) {
    *reason = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }
  return true;
}

bool CloseDocument(od::document* doc, std::string* reason) {
  // Past the object, only the end of the text may remain.
  const char* rest = nullptr;
  if (doc->current_location().get(rest) == simdjson::SUCCESS) {
    *reason = "invalid JSON: content after the object";
    return false;
  }
  return true;
}

}  // namespace

// ---- StructuredDecoder ------------------------------------------------------------------------

struct StructuredDecoder::Impl {
  duck::Connection* conn;
  std::string table;
  std::vector<duck::TableColumn> columns;
  StructuredOptions options;
  bool staged = false;
  std::string stage_table;  // temp table for the staged path
  std::string insert_sql;   // INSERT INTO table SELECT ... FROM stage
  // Each Decode replaces the previous batch. DuckDB keeps deleted rows of an in-memory or
  // temporary table until a checkpoint (never, for temporary ones), so a table emptied
  // with DELETE would grow by every batch: the table is dropped and created again from
  // its own DDL (duckdb_tables().sql; prepared statements on it are rebound), and only a
  // table that cannot be recreated so (indexes, another database) falls back to DELETE.
  std::string clear_sql;
  std::string create_stage_sql;  // the stage, dropped and created again the same way
  // In memory (options.in_memory, direct types only): the batch's chunks and their view.
  std::unique_ptr<ChunkPool> pool;
  std::unique_ptr<duck::ChunkView> view;
  JsonReader reader;
  Filler filler;
  std::unique_ptr<ChunkBuilder> builder;

  explicit Impl(bool ci) : filler(ci) {}
  ~Impl() {
    if (staged) (void)conn->Execute("DROP TABLE IF EXISTS temp.main." + duck::QuoteIdentifier(stage_table));
  }

  Result<size_t> DecodeInMemory(std::span<const Message> messages, std::vector<DecodeError>* errors);
  Result<size_t> InsertStaged(const std::vector<size_t>& indices, std::vector<DecodeError>* errors);
  Status InsertRange(const std::vector<size_t>& indices, size_t lo, size_t hi, size_t* rows,
                     std::vector<DecodeError>* errors);
};

StructuredDecoder::StructuredDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StructuredDecoder::~StructuredDecoder() = default;

const std::vector<duck::TableColumn>& StructuredDecoder::columns() const { return impl_->columns; }
bool StructuredDecoder::staged() const { return impl_->staged; }

Result<std::unique_ptr<StructuredDecoder>> StructuredDecoder::Create(duck::Connection& conn,
                                                                     std::string_view table,
                                                                     StructuredOptions options) {
  auto impl = std::make_unique<Impl>(options.case_insensitive_keys);
  impl->conn = &conn;
  impl->table = std::string(table);
  impl->options = options;
  impl->clear_sql = "DELETE FROM " + duck::QuoteIdentifier(table);
  if (table.find_first_of(".\"") == std::string_view::npos) {
    // Not for tables with indexes or foreign keys pointing at them (a DROP would fail).
    auto ddl = conn.QueryText(fmt::format(
        "SELECT sql FROM duckdb_tables() t WHERE table_name = {0} AND "
        "database_name IN (current_database(), 'temp') AND NOT EXISTS (SELECT 1 FROM duckdb_indexes() i WHERE "
        "i.table_name = {0} AND i.schema_name = t.schema_name AND i.database_name = t.database_name) AND NOT "
        "EXISTS (SELECT 1 FROM duckdb_constraints() c WHERE c.constraint_type = 'FOREIGN KEY' AND "
        "c.referenced_table = {0})",
        duck::QuoteLiteral(table)));
    // One statement, so a failure leaves the table as it was: CREATE OR REPLACE.
    if (ddl.ok() && ddl->size() == 1 && (*ddl)[0][0] && (*ddl)[0][0]->starts_with("CREATE ")) {
      impl->clear_sql = "CREATE OR REPLACE " + (*ddl)[0][0]->substr(7);
    }
  }
  ASSIGN_OR_RETURN(impl->columns, duck::DescribeTable(conn, table));
  if (impl->columns.empty()) return InvalidArgumentError("table '{}' has no columns", table);
  std::vector<Slot> slots;
  std::vector<duck::LogicalType> types;
  for (const duck::TableColumn& c : impl->columns) {
    Slot s = BuildSlot(c.type, c.name, fmt::format("column {} {}", c.name, c.type_sql));
    if (s.kind == Kind::kStaged) {
      impl->staged = true;
      types.push_back(duck::LogicalType::Varchar());
    } else {
      types.push_back(c.type.Copy());
    }
    slots.push_back(std::move(s));
  }
  if (impl->staged) {
    // Rare types: rows go to a temporary table first (those columns as JSON text, plus the
    // message index) and DuckDB casts them into the table with INSERT ... SELECT.
    impl->stage_table = "__sluice_stage_" + impl->table;
    std::string cols, select;
    for (const duck::TableColumn& c : impl->columns) {
      bool direct = IsDirect(c.type);
      cols += fmt::format("{} {}, ", duck::QuoteIdentifier(c.name), direct ? c.type_sql : "JSON");
      if (!select.empty()) select += ", ";
      select += duck::QuoteIdentifier(c.name);
    }
    impl->create_stage_sql = fmt::format("CREATE OR REPLACE TEMP TABLE {} ({}\"__sluice_index\" BIGINT)",
                                         duck::QuoteIdentifier(impl->stage_table), cols);
    RETURN_IF_ERROR(conn.Execute(impl->create_stage_sql));
    impl->insert_sql = fmt::format("INSERT INTO {} SELECT {} FROM temp.main.{}",
                                   duck::QuoteIdentifier(impl->table), select,
                                   duck::QuoteIdentifier(impl->stage_table));
    types.push_back(duck::LogicalType::BigInt());
  }
  if (options.in_memory && !impl->staged) {
    std::vector<std::string> names;
    for (const duck::TableColumn& c : impl->columns) names.push_back(c.name);
    ASSIGN_OR_RETURN(impl->view, duck::ChunkView::Create(conn, table, names, types));
    std::vector<duck::LogicalType> copies;
    for (const duck::LogicalType& t : types) copies.push_back(t.Copy());
    impl->pool = std::make_unique<ChunkPool>(std::move(copies));
  }
  ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
  impl->builder = std::make_unique<ChunkBuilder>(std::move(chunk), std::move(slots));
  return std::unique_ptr<StructuredDecoder>(new StructuredDecoder(std::move(impl)));
}

Result<size_t> StructuredDecoder::Decode(std::span<const Message> messages,
                                         std::vector<DecodeError>* errors) {
  Impl& d = *impl_;
  errors->clear();
  if (d.view) return d.DecodeInMemory(messages, errors);
  // The table holds one batch: the previous one goes first (sqlflow empties it each batch).
  RETURN_IF_ERROR(d.conn->Execute(d.clear_sql));
  ASSIGN_OR_RETURN(duck::Appender app,
                   d.staged ? duck::Appender::Open(*d.conn, d.stage_table, "main", "temp")
                            : duck::Appender::Open(*d.conn, d.table));
  if (app.column_count() != d.builder->chunk().column_count()) {
    return FailedPreconditionError("table '{}' changed since the decoder was created", d.table);
  }
  ChunkBuilder& b = *d.builder;
  const size_t ncols = d.columns.size();
  std::vector<size_t> indices;  // staged path: the message index of each row
  size_t appended = 0;
  od::document doc;
  od::object obj;
  std::string reason;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!OpenObject(d.reader, messages[i], &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    d.filler.set_document(&doc);
    d.filler.error().Clear();
    b.MarkRow();
    bool ok = d.filler.FillObject(obj, b.slots(), b.sorted(), b.rows(), 0);
    if (!ok) {
      errors->push_back({i, d.filler.error().Reason()});
      b.RollbackRow();
      continue;
    }
    if (!CloseDocument(&doc, &reason)) {
      errors->push_back({i, std::move(reason)});
      b.RollbackRow();
      continue;
    }
    if (d.staged) {
      b.chunk().column(ncols).data<int64_t>()[b.rows()] = static_cast<int64_t>(i);
      indices.push_back(i);
    }
    b.CommitRow();
    if (b.full()) {
      RETURN_IF_ERROR(b.Finish());
      RETURN_IF_ERROR(app.Append(b.chunk()));
      appended += b.rows();
      b.Reset();
    }
  }
  if (b.rows() > 0) {
    RETURN_IF_ERROR(b.Finish());
    RETURN_IF_ERROR(app.Append(b.chunk()));
    appended += b.rows();
    b.Reset();
  }
  RETURN_IF_ERROR(app.Flush());
  d.reader.Shrink();
  if (!d.staged) return appended;
  return d.InsertStaged(indices, errors);
}

// The direct path without the table: rows stay in the pool's chunks, which the view shows.
Result<size_t> StructuredDecoder::Impl::DecodeInMemory(std::span<const Message> messages,
                                                       std::vector<DecodeError>* errors) {
  view->SetChunks({});
  pool->Recycle();
  ChunkBuilder& b = *builder;
  size_t rows = 0;
  od::document doc;
  od::object obj;
  std::string reason;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!OpenObject(reader, messages[i], &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    filler.set_document(&doc);
    filler.error().Clear();
    b.MarkRow();
    if (!filler.FillObject(obj, b.slots(), b.sorted(), b.rows(), 0)) {
      errors->push_back({i, filler.error().Reason()});
      b.RollbackRow();
      continue;
    }
    if (!CloseDocument(&doc, &reason)) {
      errors->push_back({i, std::move(reason)});
      b.RollbackRow();
      continue;
    }
    b.CommitRow();
    ++rows;
    if (b.full()) RETURN_IF_ERROR(pool->Hold(b));
  }
  if (b.rows() > 0) RETURN_IF_ERROR(pool->Hold(b));
  pool->Trim();
  reader.Shrink();
  view->SetChunks(pool->batch());
  return rows;
}

Result<size_t> StructuredDecoder::Impl::InsertStaged(const std::vector<size_t>& indices,
                                                     std::vector<DecodeError>* errors) {
  std::string stage = "temp.main." + duck::QuoteIdentifier(stage_table);
  size_t rows = 0;
  Status st = InsertRange(indices, 0, indices.size(), &rows, errors);
  Status cleared = conn->Execute(create_stage_sql);
  RETURN_IF_ERROR(st);
  RETURN_IF_ERROR(cleared);
  std::sort(errors->begin(), errors->end(),
            [](const DecodeError& a, const DecodeError& b) { return a.index < b.index; });
  return rows;
}

// Inserts staged rows [lo, hi) (positions in `indices`); when DuckDB refuses them, halves
// the range until the refused rows are single messages, which become DecodeErrors.
Status StructuredDecoder::Impl::InsertRange(const std::vector<size_t>& indices, size_t lo,
                                            size_t hi, size_t* rows,
                                            std::vector<DecodeError>* errors) {
  if (lo >= hi) return Status::OK();
  std::string sql = fmt::format("{} WHERE \"__sluice_index\" BETWEEN {} AND {}", insert_sql,
                                indices[lo], indices[hi - 1]);
  auto result = conn->Query(sql);
  if (result.ok()) {
    *rows += result->rows_changed();
    return Status::OK();
  }
  if (result.status().code() != StatusCode::kInvalidArgument) return result.status();
  if (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    RETURN_IF_ERROR(InsertRange(indices, lo, mid, rows, errors));
    return InsertRange(indices, mid, hi, rows, errors);
  }
  // One message: name the first column DuckDB cannot cast.
  std::string stage = "temp.main." + duck::QuoteIdentifier(stage_table);
  for (const duck::TableColumn& c : columns) {
    if (IsDirect(c.type)) continue;
    auto probe = conn->Query(fmt::format("SELECT CAST({} AS {}) FROM {} WHERE \"__sluice_index\" = {}",
                                         duck::QuoteIdentifier(c.name), c.type_sql, stage,
                                         indices[lo]));
    if (!probe.ok()) {
      errors->push_back({indices[lo], fmt::format("key '{}' (column {} {}): {}", c.name, c.name,
                                                  c.type_sql, probe.status().message())});
      return Status::OK();
    }
  }
  errors->push_back({indices[lo], fmt::format("row refused by table '{}': {}", table,
                                              result.status().message())});
  return Status::OK();
}

// ---- InferredDecoder ------------------------------------------------------------------------

namespace {

// What a batch's values at one place (a top-level key, a struct field, list elements) hold.
struct InferNode {
  enum class Kind : uint8_t { kNull, kBool, kNumber, kString, kObject, kArray, kText };
  Kind kind = Kind::kNull;
  std::vector<std::string> names;  // kObject: fields in first-seen order
  std::vector<std::unique_ptr<InferNode>> fields;
  std::unique_ptr<InferNode> element;  // kArray

  int Find(std::string_view key) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == key) return static_cast<int>(i);
    }
    for (size_t i = 0; i < names.size(); ++i) {
      if (EqualsIgnoreCase(names[i], key)) return static_cast<int>(i);
    }
    return -1;
  }

  // SQL type: numbers are DOUBLE; strings, conflicts, all-null and empty objects VARCHAR.
  std::string Sql() const {
    switch (kind) {
      case Kind::kBool: return "BOOLEAN";
      case Kind::kNumber: return "DOUBLE";
      case Kind::kObject: {
        if (names.empty()) return "VARCHAR";
        std::string out = "STRUCT(";
        for (size_t i = 0; i < names.size(); ++i) {
          if (i > 0) out += ", ";
          out += duck::QuoteIdentifier(names[i]) + " " + fields[i]->Sql();
        }
        return out + ")";
      }
      case Kind::kArray: return (element ? element->Sql() : std::string("VARCHAR")) + "[]";
      default: return "VARCHAR";
    }
  }

  // The same type as Sql(), built directly (the in-memory path creates no table).
  duck::LogicalType Type() const {
    switch (kind) {
      case Kind::kBool: return duck::LogicalType::Boolean();
      case Kind::kNumber: return duck::LogicalType::Double();
      case Kind::kObject: {
        if (names.empty()) return duck::LogicalType::Varchar();
        std::vector<duck::LogicalType> types;
        for (const auto& f : fields) types.push_back(f->Type());
        return duck::LogicalType::Struct(names, types);
      }
      case Kind::kArray:
        return duck::LogicalType::List(element ? element->Type() : duck::LogicalType::Varchar());
      default: return duck::LogicalType::Varchar();
    }
  }
};

constexpr std::string_view kKafkaColumns[] = {"kafka_topic", "kafka_partition", "kafka_offset",
                                              "kafka_timestamp", "kafka_key"};

bool IsKafkaColumn(std::string_view key) {
  for (std::string_view k : kKafkaColumns) {
    if (EqualsIgnoreCase(k, key)) return true;
  }
  return false;
}

// Pass 1: merges each message's values into the InferNode tree. Changes made by a message
// that later turns out invalid are undone, so a bad message leaves no trace in the schema.
class Inferrer {
 public:
  Inferrer(const InferredOptions& options, Filler* validator)
      : options_(options), validator_(validator) {}

  InferNode& root() { return root_; }
  void Reset() {
    root_ = InferNode();
    root_.kind = InferNode::Kind::kObject;
  }

  bool ObserveMessage(od::object obj, std::string* reason) {
    undo_.clear();
    validator_->error().Clear();
    bool ok = ObserveFields(root_, obj, 0, /*top=*/true);
    if (!ok) {
      *reason = top_error_.empty() ? validator_->error().Reason() : std::move(top_error_);
      top_error_.clear();
      Undo();
    }
    return ok;
  }

  void Undo() {
    for (size_t i = undo_.size(); i-- > 0;) {
      Change& c = undo_[i];
      c.node->kind = c.kind;
      c.node->names.resize(c.field_count);
      c.node->fields.resize(c.field_count);
    }
    undo_.clear();
  }

 private:
  struct Change {
    InferNode* node;
    InferNode::Kind kind;
    size_t field_count;
  };

  void Log(InferNode& n) { undo_.push_back({&n, n.kind, n.names.size()}); }
  void SetKind(InferNode& n, InferNode::Kind k) {
    Log(n);
    n.kind = k;
  }

  bool ObserveFields(InferNode& n, od::object obj, int depth, bool top) {
    size_t hint = 0;  // producers keep key order: the field after the last one is tried first
    for (auto field_result : obj) {
      od::field field;
      if (auto e = std::move(field_result).get(field); e) return Syntax(e);
      std::string_view key;
      if (auto e = field.unescaped_key().get(key); e) return Syntax(e);
      // The kafka_ columns come from the message's metadata, and an empty name cannot be a
      // column: such keys are checked and skipped.
      if (key.empty() || (top && IsKafkaColumn(key))) {
        if (!validator_->SkipValidated(field.value(), depth + 1)) return Path(key);
        continue;
      }
      // Names are unique ignoring case, so an exact match at the hint is the one Find gives.
      int idx = hint < n.names.size() && n.names[hint] == key ? static_cast<int>(hint) : n.Find(key);
      if (idx < 0) {
        size_t limit = top ? options_.max_columns : options_.max_struct_fields;
        if (n.names.size() >= limit) {
          if (top) {
            top_error_ = fmt::format("key '{}': the batch already has {} columns, the most "
                                     "an inferred batch may have", key, limit);
            return false;
          }
          // Too wide for a struct: the object is kept as its JSON text.
          SetKind(n, InferNode::Kind::kText);
          if (!validator_->SkipValidated(field.value(), depth + 1)) return Path(key);
          continue;
        }
        Log(n);
        n.names.emplace_back(key);
        n.fields.push_back(std::make_unique<InferNode>());
        idx = static_cast<int>(n.names.size() - 1);
      }
      hint = static_cast<size_t>(idx) + 1;
      if (n.kind == InferNode::Kind::kText) {
        if (!validator_->SkipValidated(field.value(), depth + 1)) return Path(key);
        continue;
      }
      if (!Observe(*n.fields[idx], field.value(), depth + 1)) return Path(key);
    }
    return true;
  }

  bool Observe(InferNode& n, od::value v, int depth) {
    if (depth > static_cast<int>(kMaxJsonDepth)) return Syntax(simdjson::DEPTH_ERROR);
    od::json_type t;
    if (auto e = v.type().get(t); e) return Syntax(e);
    InferNode::Kind k = InferNode::Kind::kNull;
    switch (t) {
      case od::json_type::null: k = InferNode::Kind::kNull; break;
      case od::json_type::boolean: k = InferNode::Kind::kBool; break;
      case od::json_type::number: k = InferNode::Kind::kNumber; break;
      case od::json_type::string: k = InferNode::Kind::kString; break;
      case od::json_type::object: k = InferNode::Kind::kObject; break;
      case od::json_type::array: k = InferNode::Kind::kArray; break;
    }
    if (k != InferNode::Kind::kNull && n.kind != k && n.kind != InferNode::Kind::kText) {
      if (n.kind == InferNode::Kind::kNull) {
        SetKind(n, k);
      } else {
        SetKind(n, InferNode::Kind::kText);  // conflicting types: VARCHAR
      }
    }
    if (n.kind == InferNode::Kind::kObject && depth > options_.max_struct_depth) {
      SetKind(n, InferNode::Kind::kText);
    }
    if (n.kind == InferNode::Kind::kText || k == InferNode::Kind::kNull ||
        k == InferNode::Kind::kBool || k == InferNode::Kind::kString) {
      return validator_->SkipValidated(v, depth);
    }
    if (k == InferNode::Kind::kNumber) {
      // Numbers become DOUBLE: one out of its range cannot be stored.
      double d;
      if (v.get_double().get(d) != simdjson::SUCCESS) {
        std::string_view token = TrimRight(v.raw_json_token());
        top_error_.clear();
        validator_->error().problem = IsJsonNumber(token)
                                          ? fmt::format("{} is out of range for DOUBLE", token)
                                          : fmt::format("invalid number {}", Excerpt(token));
        return false;
      }
      return true;
    }
    if (k == InferNode::Kind::kObject) {
      od::object obj;
      if (auto e = v.get_object().get(obj); e) return Syntax(e);
      return ObserveFields(n, obj, depth, false);
    }
    // An array: every element merges into one element node.
    od::array arr;
    if (auto e = v.get_array().get(arr); e) return Syntax(e);
    if (!n.element) n.element = std::make_unique<InferNode>();
    size_t i = 0;
    for (auto elem_result : arr) {
      od::value elem;
      if (auto e = elem_result.get(elem); e) return Syntax(e);
      if (!Observe(*n.element, elem, depth + 1)) {
        validator_->error().path.push_back(fmt::format("[{}]", i));
        return false;
      }
      ++i;
    }
    return true;
  }

  bool Path(std::string_view key) {
    validator_->error().path.emplace_back(key);
    return false;
  }
  bool Syntax(simdjson::error_code e) {
    validator_->error().problem = fmt::format("invalid JSON: {}", simdjson::error_message(e));
    return false;
  }

  const InferredOptions& options_;
  Filler* validator_;
  InferNode root_;
  std::vector<Change> undo_;
  std::string top_error_;
};

}  // namespace

struct InferredDecoder::Impl {
  duck::Connection* conn;
  InferredOptions options;
  JsonReader reader;
  Filler filler{true};
  Inferrer inferrer;
  std::string schema_sql;
  std::string built_for;  // schema_sql the builder was made for
  std::unique_ptr<ChunkBuilder> builder;
  size_t json_columns = 0;
  // In memory (options.in_memory): the batch's chunks and their view.
  std::unique_ptr<ChunkPool> pool;
  std::unique_ptr<duck::ChunkView> view;

  explicit Impl(InferredOptions o) : options(std::move(o)), inferrer(options, &filler) {}
};

InferredDecoder::InferredDecoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InferredDecoder::~InferredDecoder() = default;
const std::string& InferredDecoder::schema_sql() const { return impl_->schema_sql; }

Result<std::unique_ptr<InferredDecoder>> InferredDecoder::Create(duck::Connection& conn,
                                                                 InferredOptions options) {
  if (options.table.empty()) return InvalidArgumentError("an inferred batch needs a table name");
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->conn = &conn;
  return std::unique_ptr<InferredDecoder>(new InferredDecoder(std::move(impl)));
}

Result<size_t> InferredDecoder::Decode(std::span<const Message> messages,
                                       std::vector<DecodeError>* errors) {
  Impl& d = *impl_;
  errors->clear();
  // Pass 1: the schema, and which messages are valid.
  d.inferrer.Reset();
  std::vector<uint8_t> good(messages.size(), 0);
  od::document doc;
  od::object obj;
  std::string reason;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!OpenObject(d.reader, messages[i], &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    d.filler.set_document(&doc);
    if (!d.inferrer.ObserveMessage(obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    if (!CloseDocument(&doc, &reason)) {
      d.inferrer.Undo();
      errors->push_back({i, std::move(reason)});
      continue;
    }
    good[i] = 1;
  }
  // The table.
  const InferNode& root = d.inferrer.root();
  std::string cols;
  for (size_t i = 0; i < root.names.size(); ++i) {
    cols += fmt::format("{} {}, ", duck::QuoteIdentifier(root.names[i]), root.fields[i]->Sql());
  }
  cols += "\"kafka_topic\" VARCHAR, \"kafka_partition\" INTEGER, \"kafka_offset\" BIGINT, "
          "\"kafka_timestamp\" TIMESTAMPTZ, \"kafka_key\" BLOB";
  d.schema_sql = cols;
  std::optional<duck::Appender> app;
  std::vector<duck::LogicalType> types;
  const bool rebuild = !d.builder || d.built_for != d.schema_sql;
  if (d.options.in_memory) {
    // The previous batch's chunks are about to be reused or freed: the view lets go first.
    if (d.view) d.view->SetChunks({});
    if (rebuild) {
      std::vector<std::string> names = root.names;
      for (size_t i = 0; i < root.names.size(); ++i) types.push_back(root.fields[i]->Type());
      for (std::string_view k : kKafkaColumns) names.emplace_back(k);
      types.push_back(duck::LogicalType::Varchar());
      types.push_back(duck::LogicalType::Integer());
      types.push_back(duck::LogicalType::BigInt());
      types.push_back(duck::LogicalType::TimestampTz());
      types.push_back(duck::LogicalType::Blob());
      if (d.view) {
        RETURN_IF_ERROR(d.view->SetColumns(names, types));
      } else {
        ASSIGN_OR_RETURN(d.view, duck::ChunkView::Create(*d.conn, d.options.table, names, types));
      }
      std::vector<duck::LogicalType> copies;
      for (const duck::LogicalType& t : types) copies.push_back(t.Copy());
      d.pool = std::make_unique<ChunkPool>(std::move(copies));
    } else {
      d.pool->Recycle();
    }
  } else {
    RETURN_IF_ERROR(d.conn->Execute(fmt::format("CREATE OR REPLACE TABLE {} ({})",
                                                duck::QuoteIdentifier(d.options.table), cols)));
    ASSIGN_OR_RETURN(app, duck::Appender::Open(*d.conn, d.options.table));
    if (rebuild) types = app->ColumnTypes();
  }
  if (rebuild) {
    std::vector<Slot> slots;
    for (size_t i = 0; i < root.names.size(); ++i) {
      slots.push_back(BuildSlot(types[i], root.names[i], types[i].ToSql()));
    }
    ASSIGN_OR_RETURN(duck::DataChunk chunk, duck::DataChunk::Create(types));
    d.builder.reset();
    d.builder = std::make_unique<ChunkBuilder>(std::move(chunk), std::move(slots));
    d.built_for = d.schema_sql;
    d.json_columns = root.names.size();
  }
  // Pass 2: the rows.
  ChunkBuilder& b = *d.builder;
  const size_t k = d.json_columns;
  size_t appended = 0;
  // The kafka_ columns of the chunk being built, bound again whenever the chunk changes.
  struct {
    Vector topic, key;
    int32_t* partition;
    int64_t *offset, *timestamp;
    uint64_t *timestamp_valid, *key_valid;
  } kc;
  auto bind = [&] {
    duck::DataChunk& chunk = b.chunk();
    kc.topic = chunk.column(k);
    kc.partition = chunk.column(k + 1).data<int32_t>();
    kc.offset = chunk.column(k + 2).data<int64_t>();
    kc.timestamp = chunk.column(k + 3).data<int64_t>();
    kc.timestamp_valid = chunk.column(k + 3).validity();
    kc.key = chunk.column(k + 4);
    kc.key_valid = kc.key.validity();
  };
  bind();
  auto flush = [&]() -> Status {
    appended += b.rows();
    if (!app) {
      RETURN_IF_ERROR(d.pool->Hold(b));
    } else {
      RETURN_IF_ERROR(b.Finish());
      RETURN_IF_ERROR(app->Append(b.chunk()));
      b.Reset();
    }
    bind();
    return Status::OK();
  };
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!good[i]) continue;
    const Message& m = messages[i];
    if (!OpenObject(d.reader, m, &doc, &obj, &reason)) {
      errors->push_back({i, std::move(reason)});
      continue;
    }
    d.filler.set_document(&doc);
    d.filler.error().Clear();
    b.MarkRow();
    if (!d.filler.FillObject(obj, b.slots(), b.sorted(), b.rows(), 0)) {
      errors->push_back({i, d.filler.error().Reason()});
      b.RollbackRow();
      continue;
    }
    const uint64_t row = b.rows();
    kc.topic.AssignString(row, m.topic);
    kc.partition[row] = m.partition;
    kc.offset[row] = m.offset;
    if (m.timestamp_ms == -1) {
      Vector::SetInvalid(kc.timestamp_valid, row);
    } else {
      kc.timestamp[row] = m.timestamp_ms * 1000;
      Vector::SetValid(kc.timestamp_valid, row);
    }
    if (m.key.data() == nullptr) {
      Vector::SetInvalid(kc.key_valid, row);
    } else {
      kc.key.AssignString(row, m.key);
      Vector::SetValid(kc.key_valid, row);
    }
    b.CommitRow();
    if (b.full()) RETURN_IF_ERROR(flush());
  }
  if (b.rows() > 0) RETURN_IF_ERROR(flush());
  if (app) {
    RETURN_IF_ERROR(app->Flush());
  } else {
    d.pool->Trim();
    d.view->SetChunks(d.pool->batch());
  }
  d.reader.Shrink();
  std::sort(errors->begin(), errors->end(),
            [](const DecodeError& a, const DecodeError& b) { return a.index < b.index; });
  return appended;
}

}  // namespace sluice::pipeline
