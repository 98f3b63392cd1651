// The text helpers the pipeline file reader shares (pipeline_config.cc,
// config_template.cc, config_walker.*): case, trimming, quoting values in errors, and the
// edit distance behind "did you mean".
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/strings.h"

namespace sluice::pipeline::config_internal {

// Errors reported at most; the rest are counted.
inline constexpr size_t kMaxErrors = 50;

// A value quoted in an error message, cut short so that a huge value cannot flood it.
inline std::string Quote(std::string_view value) {
  constexpr size_t kMax = 60;
  std::string out;
  for (char c : value.substr(0, kMax)) {
    if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += '?';
    } else {
      out += c;
    }
  }
  if (value.size() > kMax) out += "...";
  return "'" + out + "'";
}

inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace sluice::pipeline::config_internal
