// Logging: one named Logger per module, a process-wide level and format, one line per
// message on stderr. Never log in a per-record hot path.
//
//   static const Logger kLog("storage");
//   SLUICE_LOG(kLog, kWarn, "truncated {} bytes of {}", n, path);
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace sluice {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// The process-wide threshold; messages below it are not formatted at all.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// "debug", "info", "warn", "error", "off" (case-insensitive).
Result<LogLevel> ParseLogLevel(std::string_view text);
// The level's name as ParseLogLevel reads it (and JSON lines write it): "warn".
std::string_view LogLevelName(LogLevel level);

// text: "<UTC time> <LEVEL> <name>: <message>"; json: one JSON object per line,
// {"ts":"<UTC time>","level":"info","logger":"<name>","msg":"<message>"}, for log
// collectors (invalid UTF-8 in a message becomes U+FFFD, so every line parses).
enum class LogFormat : int { kText = 0, kJson = 1 };
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
// "text" or "json" (case-insensitive).
Result<LogFormat> ParseLogFormat(std::string_view text);

// The line Logger::Write writes for `message` at `unix_ms`, in `format`, ending in '\n'.
std::string FormatLogLine(LogFormat format, int64_t unix_ms, LogLevel level,
                          std::string_view logger, std::string_view message);
// What a command says to its user beside the log (a port it listens on, that it stopped):
// "<prefix>: <line>" in the text format, the JSON log line of `logger` at `level` in json
// (so a collector reads every line alike), written to `fd` (stdout, stderr) at once.
void SayLine(int fd, std::string_view prefix, LogLevel level, std::string_view logger,
             std::string_view line);
// `text` as a JSON string with its quotes.
std::string JsonQuote(std::string_view text);

class Logger {
 public:
  explicit constexpr Logger(std::string_view name) : name_(name) {}
  bool Enabled(LogLevel level) const;
  // Writes one line in the process's format (FormatLogLine) to stderr.
  void Write(LogLevel level, std::string_view message) const;
  std::string_view name() const { return name_; }

 private:
  std::string_view name_;
};

}  // namespace sluice

#define SLUICE_LOG(logger, level, ...)                                       \
  do {                                                                       \
    if ((logger).Enabled(::sluice::LogLevel::level)) {                       \
      (logger).Write(::sluice::LogLevel::level, ::fmt::format(__VA_ARGS__)); \
    }                                                                        \
  } while (0)
