#include "base/logging.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <ctime>

#include "base/clock.h"
#include "base/strings.h"

namespace sluice {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

constexpr std::string_view kLevelNames[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

Result<LogLevel> ParseLogLevel(std::string_view text) {
  std::string lower = AsciiLower(text);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warn" || lower == "warning") return LogLevel::kWarn;
  if (lower == "error") return LogLevel::kError;
  if (lower == "off") return LogLevel::kOff;
  return InvalidArgumentError("unknown log level '{}' (want debug, info, warn, error or off)",
                              text);
}

bool Logger::Enabled(LogLevel level) const {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void Logger::Write(LogLevel level, std::string_view message) const {
  int64_t ms = WallMillis();
  time_t secs = static_cast<time_t>(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  std::string line =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z {} {}: {}\n", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000,
                  kLevelNames[static_cast<int>(level)], name_, message);
  // One write per line keeps lines from different threads whole.
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace sluice
