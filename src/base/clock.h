// Clocks. Code that decides by time (segment roll by age, retention, flush intervals)
// takes a Clock so tests can move time by hand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice {

// Milliseconds since the Unix epoch, from the wall clock (Kafka timestamps).
int64_t WallMillis();
// Nanoseconds from a monotonic clock, for measuring durations.
int64_t MonotonicNanos();

// A time as people type it, in milliseconds since the Unix epoch: RFC 3339
// ("2026-12-01T10:00:00Z", "2026-12-01T10:00:00.5+02:00"; a space for the T too), a date
// alone ("2026-12-01", UTC midnight), or milliseconds since 1970 as digits. nullopt for
// anything else, a day past its month's end included.
std::optional<int64_t> ParseTimeMs(std::string_view s);

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall time in milliseconds since the Unix epoch.
  virtual int64_t NowMillis() const = 0;

  // The process-wide real clock.
  static Clock* Real();
};

// A clock that only moves when told to. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_ms = 1'700'000'000'000) : now_ms_(start_ms) {}
  int64_t NowMillis() const override { return now_ms_.load(std::memory_order_relaxed); }
  void Advance(int64_t ms) { now_ms_.fetch_add(ms, std::memory_order_relaxed); }
  void Set(int64_t ms) { now_ms_.store(ms, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace sluice
