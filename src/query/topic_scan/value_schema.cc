// topic()'s value columns: the `columns =>` parser, and inference through the shared JSON
// decoder.
#include "query/topic_scan/value_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <unordered_map>

#include "base/strings.h"
#include "duck/json_type.h"
#include "json/lenient_decoder.h"

namespace sluice::query {
namespace {

bool IsReserved(std::string_view name, std::span<const std::string_view> reserved) {
  const std::string lower = AsciiLower(name);
  return std::any_of(reserved.begin(), reserved.end(),
                     [&](std::string_view r) { return AsciiLower(r) == lower; });
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

duck::LogicalType ValueLogicalType(ValueType type) {
  switch (type) {
    case ValueType::kBoolean:
      return duck::LogicalType::Boolean();
    case ValueType::kTinyint:
      return duck::LogicalType::Of(duck::TypeId::kTinyInt);
    case ValueType::kSmallint:
      return duck::LogicalType::Of(duck::TypeId::kSmallInt);
    case ValueType::kInteger:
      return duck::LogicalType::Integer();
    case ValueType::kBigint:
      return duck::LogicalType::BigInt();
    case ValueType::kFloat:
      return duck::LogicalType::Of(duck::TypeId::kFloat);
    case ValueType::kDouble:
      return duck::LogicalType::Double();
    case ValueType::kVarchar:
      return duck::LogicalType::Varchar();
    case ValueType::kJson:
      return duck::JsonType();
  }
  return duck::LogicalType::Varchar();
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
      if (AsciiLower(c.name) == AsciiLower(name))
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
  std::vector<json::Column> inferred = json::InferColumns(
      samples,
      {.reserved = reserved, .max_columns = max_columns, .types = json::InferredTypes::kFlat});
  std::vector<ValueColumn> out;
  for (json::Column& c : inferred) {
    // kFlat gives these five types only.
    ValueType type = ValueType::kJson;
    switch (c.type.id()) {
      case duck::TypeId::kBoolean:
        type = ValueType::kBoolean;
        break;
      case duck::TypeId::kBigInt:
        type = ValueType::kBigint;
        break;
      case duck::TypeId::kDouble:
        type = ValueType::kDouble;
        break;
      case duck::TypeId::kVarchar:
        type = c.type.alias() == "JSON" ? ValueType::kJson : ValueType::kVarchar;
        break;
      default:
        break;
    }
    out.push_back({std::move(c.name), type});
  }
  return out;
}

}  // namespace sluice::query
