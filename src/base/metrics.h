// Metrics: counters, gauges and histograms with labels, rendered in Prometheus' text
// exposition format (version 0.0.4) for the /metrics endpoint.
//
//   Counter& in = registry.GetCounter("sluice_pipeline_messages_in_total",
//                                     "Messages read from the source", {{"pipeline", name}});
//   in.Inc(batch.size());
//
// Updating a metric is lock-free (an atomic per value) and may happen on any thread;
// Get* and Render take the registry's lock. Metrics live as long as the registry.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sluice {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Cumulative buckets of observed values (seconds, bytes...), with their count and sum.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);
  const std::vector<double>& upper_bounds() const { return bounds_; }
  // Per bucket (not cumulative), then +Inf.
  std::vector<uint64_t> bucket_counts() const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // bounds_.size() + 1
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Latency buckets from 0.5 ms to 30 s.
std::vector<double> LatencyBuckets();

class MetricsRegistry {
 public:
  // The same (name, labels) returns the same metric. A name keeps the help text and
  // type of its first registration.
  Counter& GetCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels = {});
  Gauge& GetGauge(const std::string& name, const std::string& help,
                  const MetricLabels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const MetricLabels& labels = {},
                          std::vector<double> upper_bounds = LatencyBuckets());
  // Runs before every Render (to refresh gauges that are sampled, such as memory).
  void AddRefresher(std::function<void()> refresh);
  // Removes every metric whose labels include (key, value) (a pipeline that stopped).
  void RemoveLabeled(const std::string& key, const std::string& value);

  std::string Render();

  // Read without registering anything: the counters and gauges of family `name` whose
  // labels include (key, value), each with its labels.
  std::vector<std::pair<MetricLabels, double>> ValuesLabeled(const std::string& name,
                                                             const std::string& key,
                                                             const std::string& value);
  // The histograms of family `name` whose labels include (key, value), added up bucket by
  // bucket; none when there is none.
  struct HistogramCounts {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> buckets;  // per bucket (not cumulative), then +Inf
    uint64_t count = 0;
    double sum = 0;
  };
  std::optional<HistogramCounts> HistogramLabeled(const std::string& name, const std::string& key,
                                                  const std::string& value);

  // The process's registry (what `sluice serve` and `sluice pipeline run` expose).
  static MetricsRegistry& Global();

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<MetricLabels, std::unique_ptr<Counter>> counters;
    std::map<MetricLabels, std::unique_ptr<Gauge>> gauges;
    std::map<MetricLabels, std::unique_ptr<Histogram>> histograms;
  };
  Family& FamilyFor(const std::string& name, const std::string& help, Type type);

  std::mutex mu_;
  std::map<std::string, Family> families_;         // guarded by mu_
  std::vector<std::function<void()>> refreshers_;  // guarded by mu_
};

// Adds process gauges (resident and anonymous memory, from /proc/self/status) to `registry`.
void RegisterProcessMetrics(MetricsRegistry& registry);

}  // namespace sluice
