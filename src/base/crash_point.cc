#include "base/crash_point.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

#include "base/logging.h"

namespace sluice {

static const Logger kLog("crash");

void CrashPoint(std::string_view point) {
  static std::string at;  // written once, by the initializer below
  static std::atomic<long> remaining = [] {
    const char* env = std::getenv("SLUICE_TEST_CRASH_AT");
    if (env == nullptr) return 0L;
    std::string_view spec(env);
    size_t colon = spec.rfind(':');
    if (colon == std::string_view::npos) return 0L;
    at = std::string(spec.substr(0, colon));
    return std::strtol(std::string(spec.substr(colon + 1)).c_str(), nullptr, 10);
  }();
  if (remaining.load(std::memory_order_relaxed) <= 0 || point != at) return;
  if (--remaining == 0) {
    SLUICE_LOG(kLog, kWarn, "SLUICE_TEST_CRASH_AT: killing the process at {}", point);
    ::raise(SIGKILL);
  }
}

}  // namespace sluice
