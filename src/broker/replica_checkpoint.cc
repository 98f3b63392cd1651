// The high-watermark checkpoint file. See replica_checkpoint.h.
#include "broker/replica_checkpoint.h"

#include <fmt/format.h>

#include <vector>

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"
#include "broker/topic_store.h"

namespace sluice::broker {
namespace {

constexpr size_t kMaxCheckpointBytes = 64 << 20;

}  // namespace

Result<HighWatermarks> ParseHighWatermarks(std::string_view text) {
  ASSIGN_OR_RETURN(std::vector<std::string_view> lines, CheckpointEntryLines(text));
  HighWatermarks marks;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    const size_t a = l.find(' ');
    const size_t b = a == std::string_view::npos ? a : l.find(' ', a + 1);
    int32_t partition = -1;
    int64_t offset = -1;
    if (b == std::string_view::npos || l.find(' ', b + 1) != std::string_view::npos ||
        !ValidateTopicName(std::string(l.substr(0, a))).ok() ||
        !ParseCheckpointNumber(l.substr(a + 1, b - a - 1), &partition) || partition < 0 ||
        !ParseCheckpointNumber(l.substr(b + 1), &offset) || offset < 0) {
      return InvalidArgumentError("line {}: '{}' is not '<topic> <partition> <offset>'", i + 3, l);
    }
    if (!marks.emplace(PartitionKey{std::string(l.substr(0, a)), partition}, offset).second) {
      return InvalidArgumentError("line {}: partition {} of '{}' again", i + 3, partition,
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
      SLUICE_LOG(kReplicaLog, kWarn, "{}: {}; high watermarks start from the logs", path,
                 text.status().message());
    }
    return {};
  }
  Result<HighWatermarks> marks = ParseHighWatermarks(*text);
  if (!marks.ok()) {
    SLUICE_LOG(kReplicaLog, kWarn, "{}: {}; high watermarks start from the logs", path,
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
