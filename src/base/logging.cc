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
std::atomic<int> g_format{static_cast<int>(LogFormat::kText)};

constexpr std::string_view kLevelNames[] = {"DEBUG", "INFO", "WARN", "ERROR", "OFF"};
constexpr std::string_view kLowerLevelNames[] = {"debug", "info", "warn", "error", "off"};

// The length of the valid UTF-8 sequence at the start of `s`, 0 when there is none.
size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto tail = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return tail(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!tail(1) || !tail(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!tail(1) || !tail(2) || !tail(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}
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

std::string_view LogLevelName(LogLevel level) { return kLowerLevelNames[static_cast<int>(level)]; }

void SetLogFormat(LogFormat format) { g_format.store(static_cast<int>(format)); }
LogFormat GetLogFormat() { return static_cast<LogFormat>(g_format.load()); }

Result<LogFormat> ParseLogFormat(std::string_view text) {
  std::string lower = AsciiLower(text);
  if (lower == "text") return LogFormat::kText;
  if (lower == "json") return LogFormat::kJson;
  return InvalidArgumentError("unknown log format '{}' (want text or json)", text);
}

std::string JsonQuote(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  while (!text.empty()) {
    const unsigned char c = static_cast<unsigned char>(text.front());
    size_t n = Utf8SequenceLength(text);
    if (n == 0) {
      out += "\\ufffd";
      text.remove_prefix(1);
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out.append(text.data(), n);
    }
    text.remove_prefix(n);
  }
  out += '"';
  return out;
}

std::string FormatLogLine(LogFormat format, int64_t unix_ms, LogLevel level,
                          std::string_view logger, std::string_view message) {
  time_t secs = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  const std::string ts =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, unix_ms % 1000);
  if (format == LogFormat::kJson) {
    return fmt::format("{{\"ts\":\"{}\",\"level\":\"{}\",\"logger\":{},\"msg\":{}}}\n", ts,
                       LogLevelName(level), JsonQuote(logger), JsonQuote(message));
  }
  return fmt::format("{} {} {}: {}\n", ts, kLevelNames[static_cast<int>(level)], logger, message);
}

void SayLine(int fd, std::string_view prefix, LogLevel level, std::string_view logger,
             std::string_view line) {
  std::string out = GetLogFormat() == LogFormat::kJson
                        ? FormatLogLine(LogFormat::kJson, WallMillis(), level, logger, line)
                        : fmt::format("{}: {}\n", prefix, line);
  ssize_t unused = ::write(fd, out.data(), out.size());
  (void)unused;
}

bool Logger::Enabled(LogLevel level) const {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void Logger::Write(LogLevel level, std::string_view message) const {
  std::string line = FormatLogLine(GetLogFormat(), WallMillis(), level, name_, message);
  // One write per line keeps lines from different threads whole.
  ssize_t unused = ::write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

}  // namespace sluice
