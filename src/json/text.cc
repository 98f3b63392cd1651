// Text helpers of the JSON decoders: excerpts, the number grammar, ISO-8601 timestamps.
#include "json/text.h"

#include <fmt/format.h>

namespace sluice::json {

namespace od = simdjson::ondemand;

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
    case od::json_type::array:
      return "an array";
    case od::json_type::object:
      return "an object";
    case od::json_type::number:
      return "a number";
    case od::json_type::string:
      return "a string";
    case od::json_type::boolean:
      return "a boolean";
    case od::json_type::null:
      return "null";
  }
  return "a value";
}

namespace {

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

}  // namespace

bool ParseIsoTimestamp(std::string_view s, ParsedTime* out) {
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

}  // namespace sluice::json
