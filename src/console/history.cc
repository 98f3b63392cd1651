// History (history.h): the pipelines' and watched groups' series, sampled every kStep.
#include "console/history.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/clock.h"

namespace sluice::console {
namespace {

constexpr double kGap = std::numeric_limits<double>::quiet_NaN();

// A counter's growth since `before`; a counter that went back was registered again (its
// pipeline restarted), so all of it is new.
double Growth(double now, double before) { return now >= before ? now - before : now; }

// The counters of a histogram since `before` (all of it when it went back: registered again).
MetricsRegistry::HistogramCounts Since(const MetricsRegistry::HistogramCounts& now,
                                       const MetricsRegistry::HistogramCounts& before) {
  if (now.count < before.count || now.upper_bounds != before.upper_bounds ||
      now.buckets.size() != before.buckets.size()) {
    return now;
  }
  MetricsRegistry::HistogramCounts d{now.upper_bounds, now.buckets, now.count - before.count,
                                     now.sum - before.sum};
  for (size_t i = 0; i < d.buckets.size(); ++i) {
    d.buckets[i] = now.buckets[i] >= before.buckets[i] ? now.buckets[i] - before.buckets[i] : 0;
  }
  return d;
}

std::vector<double> Values(const std::deque<double>& d) { return {d.begin(), d.end()}; }

constexpr const char* kPipelineSeries[] = {
    "messages_in_per_sec", "rows_out_per_sec",   "bytes_in_per_sec",
    "errors_per_sec",      "batch_seconds_mean", "batch_seconds_p99",
    "flush_seconds_mean",  "flush_seconds_p99",  "consumer_lag"};

}  // namespace

void SeriesRing::Append(int64_t time_ms,
                        const std::vector<std::pair<std::string, double>>& values) {
  const bool full = times_.size() >= capacity_;
  if (full) times_.pop_front();
  times_.push_back(time_ms);
  for (auto& [name, d] : series_) {
    if (full) d.pop_front();
    d.push_back(kGap);
  }
  for (const auto& [name, v] : values) {
    auto [it, fresh] = series_.try_emplace(name);
    if (fresh) it->second.assign(times_.size(), kGap);
    it->second.back() = v;
  }
}

double BucketQuantile(double q, const std::vector<double>& upper_bounds,
                      const std::vector<uint64_t>& buckets) {
  uint64_t total = 0;
  for (uint64_t b : buckets) total += b;
  if (total == 0) return kGap;
  const double rank = q * static_cast<double>(total);
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (static_cast<double>(seen + buckets[i]) < rank || buckets[i] == 0) {
      seen += buckets[i];
      continue;
    }
    // The +Inf bucket has no upper bound: its lower one is the best said.
    if (i >= upper_bounds.size()) return upper_bounds.empty() ? kGap : upper_bounds.back();
    const double lower = i == 0 ? 0 : upper_bounds[i - 1];
    const double upper = upper_bounds[i];
    return lower +
           (upper - lower) * (rank - static_cast<double>(seen)) / static_cast<double>(buckets[i]);
  }
  return upper_bounds.empty() ? kGap : upper_bounds.back();
}

struct History::PipelineState {
  SeriesRing ring{kPoints};
  bool sampled = false;
  std::chrono::steady_clock::time_point at{};
  double messages_in = 0, rows_out = 0, bytes_in = 0, errors = 0;
  MetricsRegistry::HistogramCounts batch, flush;
};

struct History::GroupState {
  SeriesRing ring{kPoints};
  std::chrono::steady_clock::time_point asked{};
  std::chrono::steady_clock::time_point sampled{};
};

History::History(Sources sources, bool start_thread) : sources_(std::move(sources)) {
  if (start_thread) thread_ = std::thread([this] { Loop(); });
}

History::~History() { Stop(); }

void History::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void History::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (wake_.wait_for(lock, kStep, [this] { return stop_; })) break;
    lock.unlock();
    Sample();
    if (sources_.on_step) sources_.on_step();
    lock.lock();
  }
}

void History::Sample() {
  const auto now = std::chrono::steady_clock::now();
  const int64_t now_ms = Clock::Real()->NowMillis();
  MetricsRegistry* m = sources_.metrics;
  std::vector<std::string> names;
  if (sources_.pipelines) names = sources_.pipelines();
  // Read outside the lock: the registry has its own.
  struct Read {
    double messages_in = 0, rows_out = 0, bytes_in = 0, errors = 0, lag = kGap;
    MetricsRegistry::HistogramCounts batch, flush;
  };
  std::vector<Read> reads(names.size());
  for (size_t i = 0; i < names.size() && m != nullptr; ++i) {
    Read& r = reads[i];
    auto sum = [&](const char* family) {
      double total = 0;
      for (const auto& [labels, v] : m->ValuesLabeled(family, "pipeline", names[i])) total += v;
      return total;
    };
    r.messages_in = sum("sluice_pipeline_messages_in_total");
    r.rows_out = sum("sluice_pipeline_rows_out_total");
    r.bytes_in = sum("sluice_pipeline_bytes_in_total");
    r.errors = sum("sluice_pipeline_errors_total");
    auto lags = m->ValuesLabeled("sluice_pipeline_consumer_lag", "pipeline", names[i]);
    if (!lags.empty()) {
      r.lag = 0;
      for (const auto& [labels, v] : lags) r.lag += v;
    }
    r.batch = m->HistogramLabeled("sluice_pipeline_batch_seconds", "pipeline", names[i])
                  .value_or(MetricsRegistry::HistogramCounts{});
    r.flush = m->HistogramLabeled("sluice_pipeline_sink_flush_seconds", "pipeline", names[i])
                  .value_or(MetricsRegistry::HistogramCounts{});
  }
  std::vector<std::pair<std::string, std::string>> watched;  // (group, principal)
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Pipelines removed take their series with them.
    std::erase_if(pipelines_, [&](const auto& e) {
      return std::find(names.begin(), names.end(), e.first) == names.end();
    });
    for (size_t i = 0; i < names.size(); ++i) {
      auto& slot = pipelines_[names[i]];
      if (!slot) slot = std::make_unique<PipelineState>();
      PipelineState& p = *slot;
      const Read& r = reads[i];
      if (p.sampled) {
        const double dt = std::max(1e-3, std::chrono::duration<double>(now - p.at).count());
        const auto batch = Since(r.batch, p.batch);
        const auto flush = Since(r.flush, p.flush);
        auto mean = [](const MetricsRegistry::HistogramCounts& h) {
          return h.count == 0 ? kGap : h.sum / static_cast<double>(h.count);
        };
        p.ring.Append(
            now_ms, {{"messages_in_per_sec", Growth(r.messages_in, p.messages_in) / dt},
                     {"rows_out_per_sec", Growth(r.rows_out, p.rows_out) / dt},
                     {"bytes_in_per_sec", Growth(r.bytes_in, p.bytes_in) / dt},
                     {"errors_per_sec", Growth(r.errors, p.errors) / dt},
                     {"batch_seconds_mean", mean(batch)},
                     {"batch_seconds_p99", BucketQuantile(0.99, batch.upper_bounds, batch.buckets)},
                     {"flush_seconds_mean", mean(flush)},
                     {"flush_seconds_p99", BucketQuantile(0.99, flush.upper_bounds, flush.buckets)},
                     {"consumer_lag", r.lag}});
      }
      p.sampled = true;
      p.at = now;
      p.messages_in = r.messages_in;
      p.rows_out = r.rows_out;
      p.bytes_in = r.bytes_in;
      p.errors = r.errors;
      p.batch = r.batch;
      p.flush = r.flush;
    }
    // Groups nobody watches any more are forgotten.
    std::erase_if(groups_, [&](const auto& e) { return now - e.second->asked > kWatch; });
    for (const auto& [key, g] : groups_) {
      if (now - g->sampled >= kStep / 2) watched.push_back(key);
    }
  }
  if (!sources_.group_offsets) return;
  for (const auto& key : watched) {
    const auto& [group, principal] = key;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;  // each read may take the Kafka timeout: none after Stop
    }
    Result<std::vector<GroupOffset>> offsets = sources_.group_offsets(principal, group);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = groups_.find(key);
    if (it == groups_.end()) continue;
    // A read that failed (the group went away, the broker is slow) leaves a gap.
    RecordGroupLocked(*it->second, Clock::Real()->NowMillis(),
                      offsets.ok() ? *offsets : std::vector<GroupOffset>{});
  }
}

History::PipelineSeries History::Pipeline(const std::string& name) {
  PipelineSeries out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pipelines_.find(name);
  for (const char* s : kPipelineSeries) out.series[s];
  if (it == pipelines_.end()) return out;
  const SeriesRing& ring = it->second->ring;
  out.time_ms.assign(ring.times().begin(), ring.times().end());
  for (const char* s : kPipelineSeries) {
    auto found = ring.series().find(s);
    out.series[s] = found == ring.series().end() ? std::vector<double>(out.time_ms.size(), kGap)
                                                 : Values(found->second);
  }
  return out;
}

void History::RecordGroupLocked(GroupState& g, int64_t now_ms,
                                const std::vector<GroupOffset>& offsets) {
  std::vector<std::pair<std::string, double>> values;
  double total = 0;
  bool known = false;
  for (const GroupOffset& o : offsets) {
    if (o.lag < 0) continue;
    values.emplace_back(o.topic + ":" + std::to_string(o.partition), static_cast<double>(o.lag));
    total += static_cast<double>(o.lag);
    known = true;
  }
  values.emplace_back("total", known ? total : kGap);
  g.ring.Append(now_ms, values);
  g.sampled = std::chrono::steady_clock::now();
}

History::GroupSeries History::Group(const std::string& group, const std::string& principal,
                                    const std::vector<GroupOffset>& offsets) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = groups_[{group, principal}];
  if (!slot) slot = std::make_unique<GroupState>();
  GroupState& g = *slot;
  g.asked = now;
  if (g.ring.times().empty() || now - g.sampled >= kStep / 2) {
    RecordGroupLocked(g, Clock::Real()->NowMillis(), offsets);
  }
  GroupSeries out;
  out.time_ms.assign(g.ring.times().begin(), g.ring.times().end());
  for (const auto& [name, values] : g.ring.series()) {
    if (name == "total") {
      out.total_lag = Values(values);
      continue;
    }
    // "topic:partition": topic names hold no ':'.
    const size_t colon = name.rfind(':');
    out.partitions.push_back(
        {{name.substr(0, colon), std::stoi(name.substr(colon + 1))}, Values(values)});
  }
  std::sort(out.partitions.begin(), out.partitions.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace sluice::console
