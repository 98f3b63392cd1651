#include "query/topic_scan/value_schema.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <unordered_map>

namespace sluice::query {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool IsReserved(std::string_view name, std::span<const std::string_view> reserved) {
  const std::string lower = Lower(name);
  return std::any_of(reserved.begin(), reserved.end(),
                     [&](std::string_view r) { return Lower(r) == lower; });
}

std::optional<ValueType> ParseType(std::string_view text) {
  // Words joined by one space, upper case ("double   precision" -> "DOUBLE PRECISION").
  std::string t;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (std::isspace(c)) {
      if (!t.empty() && t.back() != ' ') t += ' ';
    } else {
      t += static_cast<char>(std::toupper(c));
    }
  }
  while (!t.empty() && t.back() == ' ') t.pop_back();
  static const std::unordered_map<std::string, ValueType> kTypes = {
      {"BOOLEAN", ValueType::kBoolean},
      {"BOOL", ValueType::kBoolean},
      {"LOGICAL", ValueType::kBoolean},
      {"TINYINT", ValueType::kTinyint},
      {"INT1", ValueType::kTinyint},
      {"SMALLINT", ValueType::kSmallint},
      {"INT2", ValueType::kSmallint},
      {"SHORT", ValueType::kSmallint},
      {"INTEGER", ValueType::kInteger},
      {"INT", ValueType::kInteger},
      {"INT4", ValueType::kInteger},
      {"SIGNED", ValueType::kInteger},
      {"BIGINT", ValueType::kBigint},
      {"INT8", ValueType::kBigint},
      {"LONG", ValueType::kBigint},
      {"FLOAT", ValueType::kFloat},
      {"FLOAT4", ValueType::kFloat},
      {"REAL", ValueType::kFloat},
      {"DOUBLE", ValueType::kDouble},
      {"FLOAT8", ValueType::kDouble},
      {"DOUBLE PRECISION", ValueType::kDouble},
      {"VARCHAR", ValueType::kVarchar},
      {"TEXT", ValueType::kVarchar},
      {"STRING", ValueType::kVarchar},
      {"JSON", ValueType::kJson}};
  auto it = kTypes.find(t);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

}  // namespace

std::string_view TypeName(ValueType type) {
  switch (type) {
    case ValueType::kBoolean:
      return "BOOLEAN";
    case ValueType::kTinyint:
      return "TINYINT";
    case ValueType::kSmallint:
      return "SMALLINT";
    case ValueType::kInteger:
      return "INTEGER";
    case ValueType::kBigint:
      return "BIGINT";
    case ValueType::kFloat:
      return "FLOAT";
    case ValueType::kDouble:
      return "DOUBLE";
    case ValueType::kVarchar:
      return "VARCHAR";
    case ValueType::kJson:
      return "JSON";
  }
  return "?";
}

duckdb_logical_type CreateLogicalType(ValueType type) {
  switch (type) {
    case ValueType::kBoolean:
      return duckdb_create_logical_type(DUCKDB_TYPE_BOOLEAN);
    case ValueType::kTinyint:
      return duckdb_create_logical_type(DUCKDB_TYPE_TINYINT);
    case ValueType::kSmallint:
      return duckdb_create_logical_type(DUCKDB_TYPE_SMALLINT);
    case ValueType::kInteger:
      return duckdb_create_logical_type(DUCKDB_TYPE_INTEGER);
    case ValueType::kBigint:
      return duckdb_create_logical_type(DUCKDB_TYPE_BIGINT);
    case ValueType::kFloat:
      return duckdb_create_logical_type(DUCKDB_TYPE_FLOAT);
    case ValueType::kDouble:
      return duckdb_create_logical_type(DUCKDB_TYPE_DOUBLE);
    case ValueType::kVarchar:
      return duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
    case ValueType::kJson: {
      duckdb_logical_type t = duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
      duckdb_logical_type_set_alias(t, "JSON");
      return t;
    }
  }
  return duckdb_create_logical_type(DUCKDB_TYPE_VARCHAR);
}

Result<std::vector<ValueColumn>> ParseValueColumns(std::string_view text,
                                                   std::span<const std::string_view> reserved) {
  std::vector<ValueColumn> out;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  for (;;) {
    skip_space();
    const size_t start = i;
    std::string name;
    if (i < text.size() && text[i] == '"') {
      for (++i;; ++i) {
        if (i >= text.size())
          return InvalidArgumentError("columns: unterminated quoted name at {}", start);
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            name += '"';
            ++i;
            continue;
          }
          ++i;
          break;
        }
        name += text[i];
      }
    } else {
      while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) ||
                                 text[i] == '_' || static_cast<unsigned char>(text[i]) >= 0x80)) {
        name += text[i++];
      }
    }
    if (name.empty()) {
      return InvalidArgumentError(
          "columns: expected a column name at {} in '{}' (the form is 'name TYPE, ...')", start,
          text);
    }
    const size_t comma = std::min(text.find(',', i), text.size());
    std::string_view type_text = text.substr(i, comma - i);
    const size_t first = type_text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos)
      return InvalidArgumentError("columns: column '{}' has no type", name);
    type_text = type_text.substr(first, type_text.find_last_not_of(" \t\r\n") + 1 - first);
    std::optional<ValueType> type = ParseType(type_text);
    if (!type) {
      return InvalidArgumentError(
          "columns: column '{}': unknown or unsupported type '{}' (BOOLEAN, TINYINT, SMALLINT, "
          "INTEGER, BIGINT, "
          "FLOAT, DOUBLE, VARCHAR or JSON; cast in SQL for others)",
          name, type_text);
    }
    if (IsReserved(name, reserved)) {
      return InvalidArgumentError("columns: '{}' is one of topic()'s own columns", name);
    }
    for (const ValueColumn& c : out) {
      if (Lower(c.name) == Lower(name))
        return InvalidArgumentError("columns: '{}' is declared twice", name);
    }
    out.push_back({std::move(name), *type});
    if (comma == text.size()) break;
    i = comma + 1;
  }
  return out;
}

std::vector<ValueColumn> InferValueColumns(std::span<const std::string> samples,
                                           std::span<const std::string_view> reserved,
                                           size_t max_columns) {
  enum Kind : unsigned { kBool = 1, kInt = 2, kNumber = 4, kString = 8, kNested = 16, kNull = 32 };
  struct Seen {
    std::string name;
    unsigned kinds = 0;
  };
  std::vector<Seen> seen;
  std::unordered_map<std::string, size_t> index;  // lower-case name -> position in `seen`
  simdjson::dom::parser parser;
  for (const std::string& s : samples) {
    simdjson::dom::object object;
    if (parser.parse(s.data(), s.size()).get(object) != simdjson::SUCCESS) continue;
    for (auto field : object) {
      if (field.key.empty()) continue;
      const std::string lower = Lower(field.key);
      auto it = index.find(lower);
      if (it == index.end()) {
        if (seen.size() >= max_columns || IsReserved(field.key, reserved)) continue;
        it = index.emplace(lower, seen.size()).first;
        seen.push_back({std::string(field.key), 0});
      }
      unsigned kind = 0;
      switch (field.value.type()) {
        case simdjson::dom::element_type::BOOL:
          kind = kBool;
          break;
        case simdjson::dom::element_type::INT64:
          kind = kInt;
          break;
        case simdjson::dom::element_type::UINT64:  // past BIGINT
        case simdjson::dom::element_type::DOUBLE:
          kind = kNumber;
          break;
        case simdjson::dom::element_type::STRING:
          kind = kString;
          break;
        case simdjson::dom::element_type::ARRAY:
        case simdjson::dom::element_type::OBJECT:
          kind = kNested;
          break;
        case simdjson::dom::element_type::NULL_VALUE:
          kind = kNull;
          break;
      }
      seen[it->second].kinds |= kind;
    }
  }
  std::vector<ValueColumn> out;
  for (const Seen& s : seen) {
    const unsigned k = s.kinds & ~kNull;
    ValueType type = ValueType::kVarchar;
    if (k == 0 || (k & kNested) != 0) {
      type = ValueType::kJson;
    } else if (k == kBool) {
      type = ValueType::kBoolean;
    } else if (k == kInt) {
      type = ValueType::kBigint;
    } else if ((k & ~(kInt | kNumber)) == 0) {
      type = ValueType::kDouble;
    }
    out.push_back({s.name, type});
  }
  return out;
}

struct ValueDecoder::Impl {
  std::vector<ValueColumn> columns;
  std::unordered_map<std::string, size_t> exact, lower;  // key -> column
  simdjson::dom::parser parser;
  std::vector<uint8_t> written;  // per column, for the current row
  std::string text;              // minified JSON, reused

  static void SetNull(duckdb_vector v, idx_t row) {
    duckdb_vector_ensure_validity_writable(v);
    duckdb_validity_set_row_invalid(duckdb_vector_get_validity(v), row);
  }

  template <typename T>
  static bool PutInt(duckdb_vector v, idx_t row, simdjson::dom::element e) {
    int64_t n;
    if (e.type() == simdjson::dom::element_type::INT64) {
      n = e.get_int64().value_unsafe();
    } else if (e.type() == simdjson::dom::element_type::DOUBLE) {
      // 5.0 is 5; 5.5 does not fit an integer column.
      const double d = e.get_double().value_unsafe();
      if (d != std::trunc(d) || d < -9.2233720368547758e18 || d >= 9.2233720368547758e18)
        return false;
      n = static_cast<int64_t>(d);
    } else {
      return false;
    }
    if (n < std::numeric_limits<T>::min() || n > std::numeric_limits<T>::max()) return false;
    static_cast<T*>(duckdb_vector_get_data(v))[row] = static_cast<T>(n);
    return true;
  }

  // Whether the value fit (false: the row's column stays NULL).
  bool Put(ValueType type, duckdb_vector v, idx_t row, simdjson::dom::element e) {
    using simdjson::dom::element_type;
    const element_type t = e.type();
    if (t == element_type::NULL_VALUE) return false;
    switch (type) {
      case ValueType::kBoolean:
        if (t != element_type::BOOL) return false;
        static_cast<bool*>(duckdb_vector_get_data(v))[row] = e.get_bool().value_unsafe();
        return true;
      case ValueType::kTinyint:
        return PutInt<int8_t>(v, row, e);
      case ValueType::kSmallint:
        return PutInt<int16_t>(v, row, e);
      case ValueType::kInteger:
        return PutInt<int32_t>(v, row, e);
      case ValueType::kBigint:
        return PutInt<int64_t>(v, row, e);
      case ValueType::kFloat:
      case ValueType::kDouble: {
        double d;
        if (e.get_double().get(d) != simdjson::SUCCESS) return false;  // also takes integers
        if (type == ValueType::kFloat) {
          if (std::fabs(d) > std::numeric_limits<float>::max()) return false;
          static_cast<float*>(duckdb_vector_get_data(v))[row] = static_cast<float>(d);
        } else {
          static_cast<double*>(duckdb_vector_get_data(v))[row] = d;
        }
        return true;
      }
      case ValueType::kVarchar:
        if (t == element_type::STRING) {
          std::string_view s = e.get_string().value_unsafe();
          duckdb_vector_assign_string_element_len(v, row, s.data(), s.size());
          return true;
        }
        [[fallthrough]];  // numbers, booleans, objects, arrays: their JSON text
      case ValueType::kJson:
        text = simdjson::minify(e);
        duckdb_vector_assign_string_element_len(v, row, text.data(), text.size());
        return true;
    }
    return false;
  }
};

ValueDecoder::ValueDecoder(std::vector<ValueColumn> columns) : impl_(std::make_unique<Impl>()) {
  impl_->columns = std::move(columns);
  for (size_t i = 0; i < impl_->columns.size(); ++i) {
    impl_->exact.emplace(impl_->columns[i].name, i);
    impl_->lower.emplace(Lower(impl_->columns[i].name), i);
  }
  impl_->written.resize(impl_->columns.size());
}

ValueDecoder::~ValueDecoder() = default;

void ValueDecoder::Decode(std::span<const duckdb_vector> out, idx_t row, std::string_view value) {
  Impl& d = *impl_;
  std::fill(d.written.begin(), d.written.end(), 0);
  simdjson::dom::object object;
  if (value.data() != nullptr &&
      d.parser.parse(value.data(), value.size()).get(object) == simdjson::SUCCESS) {
    // Keys match columns exactly, else ignoring case (DuckDB's names ignore case); of a key
    // given twice, the last one counts.
    for (auto field : object) {
      size_t c;
      if (auto it = d.exact.find(std::string(field.key)); it != d.exact.end()) {
        c = it->second;
      } else if (auto lower = d.lower.find(Lower(field.key)); lower != d.lower.end()) {
        c = lower->second;
      } else {
        continue;
      }
      if (out[c] == nullptr) continue;
      d.written[c] = d.Put(d.columns[c].type, out[c], row, field.value) ? 1 : 0;
    }
  }
  for (size_t c = 0; c < out.size(); ++c) {
    if (out[c] != nullptr && !d.written[c]) Impl::SetNull(out[c], row);
  }
}

}  // namespace sluice::query
