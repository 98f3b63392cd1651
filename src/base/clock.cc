#include "base/clock.h"

#include <algorithm>
#include <charconv>
#include <ctime>

namespace sluice {

int64_t WallMillis() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

int64_t MonotonicNanos() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
}

namespace {
class RealClock final : public Clock {
 public:
  int64_t NowMillis() const override { return WallMillis(); }
};
}  // namespace

Clock* Clock::Real() {
  static RealClock clock;
  return &clock;
}

std::optional<int64_t> ParseTimeMs(std::string_view s) {
  if (s.empty()) return std::nullopt;
  if (std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    int64_t ms = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), ms);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return ms;
  }
  // YYYY-MM-DD[THH:MM:SS[.fff][Z|+HH:MM|-HH:MM]]
  std::tm tm{};
  int ms = 0;
  int offset_minutes = 0;
  auto num = [&](size_t at, size_t len, int* out) {
    if (at + len > s.size()) return false;
    int v = 0;
    for (size_t i = at; i < at + len; ++i) {
      if (s[i] < '0' || s[i] > '9') return false;
      v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
  };
  int year, month, day;
  if (!num(0, 4, &year) || s.size() < 10 || s[4] != '-' || !num(5, 2, &month) || s[7] != '-' ||
      !num(8, 2, &day)) {
    return std::nullopt;
  }
  size_t at = 10;
  int hour = 0, minute = 0, second = 0;
  if (at < s.size()) {
    if (s[at] != 'T' && s[at] != ' ') return std::nullopt;
    if (!num(at + 1, 2, &hour) || at + 3 >= s.size() || s[at + 3] != ':' ||
        !num(at + 4, 2, &minute) || at + 6 >= s.size() || s[at + 6] != ':' ||
        !num(at + 7, 2, &second)) {
      return std::nullopt;
    }
    at += 9;
    if (at < s.size() && s[at] == '.') {
      size_t digits = 0;
      ++at;
      while (at < s.size() && s[at] >= '0' && s[at] <= '9') {
        if (digits < 3) ms = ms * 10 + (s[at] - '0');
        ++digits;
        ++at;
      }
      if (digits == 0) return std::nullopt;
      for (size_t d = digits; d < 3; ++d) ms *= 10;
    }
    if (at < s.size()) {
      if (s[at] == 'Z' && at + 1 == s.size()) {
        ++at;
      } else if ((s[at] == '+' || s[at] == '-') && at + 6 == s.size() && s[at + 3] == ':') {
        int oh, om;
        if (!num(at + 1, 2, &oh) || !num(at + 4, 2, &om) || oh > 23 || om > 59) return std::nullopt;
        offset_minutes = (s[at] == '+' ? 1 : -1) * (oh * 60 + om);
        at = s.size();
      } else {
        return std::nullopt;
      }
    }
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60)
    return std::nullopt;
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const time_t t = timegm(&tm);
  if (tm.tm_mday != day) return std::nullopt;  // 2026-02-30 rolled over
  return (static_cast<int64_t>(t) - offset_minutes * 60) * 1000 + ms;
}

}  // namespace sluice
