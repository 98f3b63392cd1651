#include "console/sql_output.h"

#include <charconv>
#include <cstdint>

namespace sluice::console {
namespace {

// Whether `s` is a number by JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// Also counts its significant digits and whether it has a fraction or exponent.
bool IsJsonNumber(std::string_view s, int* significant, bool* integral) {
  size_t i = 0;
  const size_t n = s.size();
  auto digit = [&](size_t k) { return k < n && s[k] >= '0' && s[k] <= '9'; };
  *significant = 0;
  *integral = true;
  bool leading = true;  // zeros before the first non-zero digit are not significant
  auto count = [&](char c) {
    if (c != '0') leading = false;
    if (!leading) ++*significant;
  };
  if (i < n && s[i] == '-') ++i;
  if (!digit(i)) return false;
  if (s[i] == '0') {
    ++i;
  } else {
    while (digit(i)) count(s[i++]);
  }
  if (i < n && s[i] == '.') {
    *integral = false;
    ++i;
    if (!digit(i)) return false;
    while (digit(i)) count(s[i++]);
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    *integral = false;
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digit(i)) return false;
    while (digit(i)) ++i;
  }
  return i == n;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out.push_back(kHex[u >> 4]);
          out.push_back(kHex[u & 15]);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

void AppendJsonValue(std::string& out, const std::optional<std::string_view>& v,
                     JsonNumbers numbers) {
  if (!v.has_value()) {
    out += "null";
    return;
  }
  if (numbers != JsonNumbers::kNever) {
    int significant = 0;
    bool integral = true;
    if (IsJsonNumber(*v, &significant, &integral)) {
      if (numbers == JsonNumbers::kFloats) {
        out.append(v->data(), v->size());
        return;
      }
      // 2^53 has 16 digits: every integer of up to 15 digits is exact, 16-digit ones are
      // checked; decimals of up to 15 significant digits survive a double's round trip.
      bool exact = significant <= 15;
      if (!exact && integral && significant == 16) {
        int64_t n = 0;
        const char* begin = v->data() + (v->front() == '-' ? 1 : 0);
        auto [end, ec] = std::from_chars(begin, v->data() + v->size(), n);
        exact = ec == std::errc() && end == v->data() + v->size() && n <= (int64_t{1} << 53);
      }
      if (exact) {
        out.append(v->data(), v->size());
        return;
      }
    }
  }
  AppendJsonString(out, *v);
}

void AppendCsvLine(std::string& out, const std::vector<std::optional<std::string_view>>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (!values[i].has_value()) continue;
    std::string_view v = *values[i];
    // An empty string is quoted so that it stays apart from NULL (an empty field).
    const bool quote = v.empty() || v.find_first_of(",\"\r\n") != std::string_view::npos;
    if (!quote) {
      out.append(v.data(), v.size());
      continue;
    }
    out.push_back('"');
    for (char c : v) {
      if (c == '"') out.push_back('"');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('\n');
}

}  // namespace sluice::console
