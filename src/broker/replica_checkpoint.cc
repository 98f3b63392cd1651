// The high-watermark checkpoint file. See replica_checkpoint.h.
#include "broker/replica_checkpoint.h"

#include <fmt/format.h>

#include <charconv>
#include <vector>

#include "base/logging.h"
#include "broker/meta_files.h"
#include "broker/topic_store.h"

namespace sluice::broker {
namespace {

const Logger kLog("replica");
constexpr size_t kMaxCheckpointBytes = 64 << 20;

template <typename T>
bool ParseNumber(std::string_view s, T* out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

Result<HighWatermarks> ParseHighWatermarks(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) {
      return InvalidArgumentError("line {} does not end with a newline", lines.size() + 1);
    }
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  if (lines.size() < 2) return InvalidArgumentError("{} lines, want at least 2", lines.size());
  int version = -1;
  if (!ParseNumber(lines[0], &version) || version != 0) {
    return InvalidArgumentError("line 1: version '{}', want 0", lines[0]);
  }
  int64_t count = -1;
  if (!ParseNumber(lines[1], &count) || count != static_cast<int64_t>(lines.size()) - 2) {
    return InvalidArgumentError("line 2: count '{}' for {} entry lines", lines[1],
                                lines.size() - 2);
  }
  HighWatermarks marks;
  for (size_t i = 2; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    const size_t a = l.find(' ');
    const size_t b = a == std::string_view::npos ? a : l.find(' ', a + 1);
    int32_t partition = -1;
    int64_t offset = -1;
    if (b == std::string_view::npos || l.find(' ', b + 1) != std::string_view::npos ||
        !ValidateTopicName(std::string(l.substr(0, a))).ok() ||
        !ParseNumber(l.substr(a + 1, b - a - 1), &partition) || partition < 0 ||
        !ParseNumber(l.substr(b + 1), &offset) || offset < 0) {
      return InvalidArgumentError("line {}: '{}' is not '<topic> <partition> <offset>'", i + 1, l);
    }
    if (!marks.emplace(PartitionKey{std::string(l.substr(0, a)), partition}, offset).second) {
      return InvalidArgumentError("line {}: partition {} of '{}' again", i + 1, partition,
                                  l.substr(0, a));
    }
  }
  return marks;
}

std::string FormatHighWatermarks(const HighWatermarks& marks) {
  std::string out = fmt::format("0\n{}\n", marks.size());
  for (const auto& [key, offset] : marks) {
    out += fmt::format("{} {} {}\n", key.first, key.second, offset);
  }
  return out;
}

HighWatermarks LoadHighWatermarks(storage::Env* env, const std::string& data_dir) {
  const std::string path = data_dir + "/" + kHighWatermarkFile;
  Result<std::string> text = ReadSmallFile(env, path, kMaxCheckpointBytes);
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound) {
      SLUICE_LOG(kLog, kWarn, "{}: {}; high watermarks start from the logs", path,
                 text.status().message());
    }
    return {};
  }
  Result<HighWatermarks> marks = ParseHighWatermarks(*text);
  if (!marks.ok()) {
    SLUICE_LOG(kLog, kWarn, "{}: {}; high watermarks start from the logs", path,
               marks.status().message());
    return {};
  }
  return std::move(*marks);
}

Status SaveHighWatermarks(storage::Env* env, const std::string& data_dir,
                          const HighWatermarks& marks) {
  return WriteFileDurably(env, data_dir, kHighWatermarkFile, FormatHighWatermarks(marks));
}

}  // namespace sluice::broker
