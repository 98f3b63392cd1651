// Logging: one named Logger per module, a process-wide level, one line per message on
// stderr. Never log in a per-record hot path.
//
//   static const Logger kLog("storage");
//   SLUICE_LOG(kLog, kWarn, "truncated {} bytes of {}", n, path);
#pragma once

#include <fmt/format.h>

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

class Logger {
 public:
  explicit constexpr Logger(std::string_view name) : name_(name) {}
  bool Enabled(LogLevel level) const;
  // Writes one line: "<UTC time> <LEVEL> <name>: <message>".
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
