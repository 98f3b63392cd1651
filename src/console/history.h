// History: what the console's charts show of the past (docs/design/0026-console.md,
// decision 13), kept in this process's memory: per pipeline its rates, errors, batch and
// flush latencies and consumer lag, sampled from the metrics registry; per consumer group
// someone watches, its lag per partition. One point every kStep, at most kPoints per
// series (30 minutes), so a page opened now draws the last half hour.
//
// Threads: a sampler thread of its own; the readers on any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/metrics.h"
#include "base/status.h"
#include "console/kafka_ops.h"

namespace sluice::console {

// The times and named series of one subject, at most `capacity` points, oldest first. A
// value not given at a time is NaN (a gap), also for a series that appeared later.
class SeriesRing {
 public:
  explicit SeriesRing(size_t capacity) : capacity_(capacity) {}
  void Append(int64_t time_ms, const std::vector<std::pair<std::string, double>>& values);
  const std::deque<int64_t>& times() const { return times_; }
  const std::map<std::string, std::deque<double>>& series() const { return series_; }

 private:
  size_t capacity_;
  std::deque<int64_t> times_;
  std::map<std::string, std::deque<double>> series_;
};

// The q-quantile (0..1) of the observations counted in `buckets` (per bucket, then +Inf) of
// histogram `upper_bounds`, interpolated inside its bucket as Prometheus'
// histogram_quantile does; NaN when nothing was counted.
double BucketQuantile(double q, const std::vector<double>& upper_bounds,
                      const std::vector<uint64_t>& buckets);

class History {
 public:
  static constexpr std::chrono::milliseconds kStep{2000};
  static constexpr size_t kPoints = 900;
  // A group is sampled while someone asked for its history within this long.
  static constexpr std::chrono::minutes kWatch{10};

  struct Sources {
    MetricsRegistry* metrics = nullptr;
    // The names of the pipelines now (none: no pipelines).
    std::function<std::vector<std::string>()> pipelines;
    // Group `group`'s committed offsets and lag as `principal` may see them.
    std::function<Result<std::vector<GroupOffset>>(const std::string& principal,
                                                   const std::string& group)>
        group_offsets;
    // Run at the end of each step, on the sampler's thread (null: nothing).
    std::function<void()> on_step;
  };
  // `start_thread`: false for tests, which call Sample themselves.
  explicit History(Sources sources, bool start_thread = true);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  // One step of sampling now (the thread calls it every kStep).
  void Sample();
  // Ends the sampler thread (after the step in hand); the readers go on answering.
  void Stop();

  // Pipeline `name`'s series: time_ms and series.{messages_in_per_sec, rows_out_per_sec,
  // bytes_in_per_sec, errors_per_sec, batch_seconds_mean, batch_seconds_p99,
  // flush_seconds_mean, flush_seconds_p99, consumer_lag}, NaN for a gap.
  struct PipelineSeries {
    std::vector<int64_t> time_ms;
    std::map<std::string, std::vector<double>> series;
  };
  PipelineSeries Pipeline(const std::string& name);

  // Records `offsets` of `group`, read now by a request of `principal` (which the read
  // proved may see them), as a point unless the sampler took one within half a step, and
  // watches the group for kWatch from now. Each principal has a history of its own, sampled
  // as that principal: the broker leaves out of a group's offsets the topics a principal
  // may not describe, so one user's history must not be shown to another.
  struct GroupSeries {
    std::vector<int64_t> time_ms;
    std::vector<double> total_lag;
    // Per (topic, partition), by topic then partition.
    std::vector<std::pair<std::pair<std::string, int32_t>, std::vector<double>>> partitions;
  };
  GroupSeries Group(const std::string& group, const std::string& principal,
                    const std::vector<GroupOffset>& offsets);

 private:
  struct PipelineState;
  struct GroupState;
  void RecordGroupLocked(GroupState& g, int64_t now_ms, const std::vector<GroupOffset>& offsets);
  void Loop();

  Sources sources_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<PipelineState>> pipelines_;  // guarded by mu_
  // By (group, principal).
  std::map<std::pair<std::string, std::string>, std::unique_ptr<GroupState>>
      groups_;         // guarded by mu_
  bool stop_ = false;  // guarded by mu_
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace sluice::console
