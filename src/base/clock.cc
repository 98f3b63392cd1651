#include "base/clock.h"

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

}  // namespace sluice
