#include "sinks/pg_copy_binary.h"

#include <bit>
#include <limits>
#include <vector>

namespace sluice::sinks::pgcopy {

namespace {

// Days and microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
constexpr int32_t kEpochDays = 10957;
constexpr int64_t kEpochMicros = int64_t{kEpochDays} * 86'400'000'000;

template <typename T>
void Put(std::string* out, T v) {
  using U = std::make_unsigned_t<T>;
  const U u = static_cast<U>(v);
  char bytes[sizeof(T)];
  for (size_t i = 0; i < sizeof(T); ++i) {
    bytes[i] = static_cast<char>(u >> (8 * (sizeof(T) - 1 - i)));
  }
  out->append(bytes, sizeof(T));
}

void Length(std::string* out, size_t n) { Put<int32_t>(out, static_cast<int32_t>(n)); }

}  // namespace

void AppendHeader(std::string* out) {
  static constexpr char kSignature[] = "PGCOPY\n\377\r\n";  // and its terminating \0
  out->append(kSignature, sizeof(kSignature));
  Put<int32_t>(out, 0);  // flags: no OIDs
  Put<int32_t>(out, 0);  // header extension length
}

void AppendTrailer(std::string* out) { Put<int16_t>(out, -1); }

void AppendFieldCount(std::string* out, int16_t fields) { Put<int16_t>(out, fields); }

void AppendNull(std::string* out) { Put<int32_t>(out, -1); }

void AppendBool(std::string* out, bool v) {
  Length(out, 1);
  out->push_back(v ? 1 : 0);
}

void AppendInt2(std::string* out, int16_t v) {
  Length(out, 2);
  Put(out, v);
}

void AppendInt4(std::string* out, int32_t v) {
  Length(out, 4);
  Put(out, v);
}

void AppendInt8(std::string* out, int64_t v) {
  Length(out, 8);
  Put(out, v);
}

void AppendFloat4(std::string* out, float v) {
  Length(out, 4);
  Put(out, std::bit_cast<uint32_t>(v));
}

void AppendFloat8(std::string* out, double v) {
  Length(out, 8);
  Put(out, std::bit_cast<uint64_t>(v));
}

// DuckDB's infinities (its type's max and -max) are PostgreSQL's (max and min). A value
// whose shift to 2000-01-01 leaves the type is sent as the nearest finite value instead,
// outside PostgreSQL's range, so its range check refuses it rather than a wrapped value
// being stored (the sink refuses such rows before: InPostgresRange).
void AppendDate(std::string* out, int32_t days) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  const int64_t shifted = int64_t{days} - kEpochDays;
  Length(out, 4);
  Put<int32_t>(out, days == kMax      ? kMax
                    : days == -kMax   ? kMin
                    : shifted <= kMin ? kMin + 1
                                      : static_cast<int32_t>(shifted));
}

void AppendTimestamp(std::string* out, int64_t micros) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  Length(out, 8);
  // micros - kEpochMicros overflows only below kMin + kEpochMicros (kEpochMicros > 0).
  Put<int64_t>(out, micros == kMax                     ? kMax
                    : micros == -kMax                  ? kMin
                    : micros < kMin + kEpochMicros + 1 ? kMin + 1
                                                       : micros - kEpochMicros);
}

void AppendUuid(std::string* out, const uint8_t bytes[16]) {
  Length(out, 16);
  out->append(reinterpret_cast<const char*>(bytes), 16);
}

void AppendBytes(std::string* out, std::string_view bytes) {
  Length(out, bytes.size());
  out->append(bytes);
}

void AppendJsonb(std::string* out, std::string_view json) {
  Length(out, json.size() + 1);
  out->push_back(1);
  out->append(json);
}

bool AppendNumeric(std::string* out, std::string_view decimal) {
  // numeric_send: ndigits, weight, sign, dscale (int16 each), then ndigits base-10000
  // digits, the first worth 10000^weight.
  std::string_view s = decimal;
  const bool negative = !s.empty() && s.front() == '-';
  if (negative) s.remove_prefix(1);
  const size_t dot = s.find('.');
  std::string_view whole = s.substr(0, dot);
  std::string_view fraction = dot == std::string_view::npos ? "" : s.substr(dot + 1);
  if (whole.empty() && fraction.empty()) return false;
  if (dot != std::string_view::npos && fraction.empty()) return false;
  for (std::string_view part : {whole, fraction}) {
    for (char c : part) {
      if (c < '0' || c > '9') return false;
    }
  }
  if (fraction.size() > 16383 || whole.size() > 131072) return false;
  while (!whole.empty() && whole.front() == '0') whole.remove_prefix(1);
  // Whole digits in groups of four from the point leftwards, fraction digits from the
  // point rightwards.
  const size_t whole_groups = (whole.size() + 3) / 4;
  const size_t fraction_groups = (fraction.size() + 3) / 4;
  std::vector<int16_t> digits(whole_groups + fraction_groups, 0);
  const size_t lead = whole_groups * 4 - whole.size();  // zeros padding the first group
  for (size_t i = 0; i < whole.size(); ++i) {
    int16_t& d = digits[(lead + i) / 4];
    d = static_cast<int16_t>(d * 10 + (whole[i] - '0'));
  }
  for (size_t i = 0; i < fraction_groups * 4; ++i) {
    int16_t& d = digits[whole_groups + i / 4];
    d = static_cast<int16_t>(d * 10 + (i < fraction.size() ? fraction[i] - '0' : 0));
  }
  int weight = static_cast<int>(whole_groups) - 1;
  size_t first = 0;
  while (first < digits.size() && digits[first] == 0) {
    ++first;
    --weight;
  }
  size_t end = digits.size();
  while (end > first && digits[end - 1] == 0) --end;
  const size_t n = end - first;
  if (n == 0) weight = 0;
  Length(out, 8 + 2 * n);
  Put<int16_t>(out, static_cast<int16_t>(n));
  Put<int16_t>(out, static_cast<int16_t>(weight));
  Put<uint16_t>(out, negative && n > 0 ? 0x4000 : 0x0000);
  Put<int16_t>(out, static_cast<int16_t>(fraction.size()));
  for (size_t i = first; i < end; ++i) Put<int16_t>(out, digits[i]);
  return true;
}

}  // namespace sluice::sinks::pgcopy
