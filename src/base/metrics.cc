#include "base/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>

namespace sluice {
namespace {

std::string EscapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string LabelText(const MetricLabels& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return "";
  std::string out = "{";
  for (const auto& [k, v] : labels) {
    if (out.size() > 1) out += ',';
    out += fmt::format("{}=\"{}\"", k, EscapeLabel(v));
  }
  if (!extra.empty()) {
    if (out.size() > 1) out += ',';
    out += extra;
  }
  return out + "}";
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  return fmt::format("{}", v);
}

bool HasLabel(const MetricLabels& labels, const std::string& key, const std::string& value) {
  return std::find(labels.begin(), labels.end(), std::make_pair(key, value)) != labels.end();
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  std::sort(bounds_.begin(), bounds_.end());
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin();
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double old = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
  }
}

std::vector<uint64_t> Histogram::bucket_counts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  for (size_t i = 0; i < out.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(const std::string& name,
                                                    const std::string& help, Type type) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  }
  return it->second;
}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyFor(name, help, Type::kCounter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& MetricsRegistry::GetGauge(const std::string& name, const std::string& help,
                                 const MetricLabels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyFor(name, help, Type::kGauge).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const MetricLabels& labels,
                                         std::vector<double> upper_bounds) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = FamilyFor(name, help, Type::kHistogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(std::move(upper_bounds));
  return *slot;
}

void MetricsRegistry::AddRefresher(std::function<void()> refresh) {
  std::lock_guard<std::mutex> lock(mu_);
  refreshers_.push_back(std::move(refresh));
}

void MetricsRegistry::RemoveLabeled(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto matches = [&](const MetricLabels& labels) { return HasLabel(labels, key, value); };
  for (auto& [name, f] : families_) {
    std::erase_if(f.counters, [&](const auto& e) { return matches(e.first); });
    std::erase_if(f.gauges, [&](const auto& e) { return matches(e.first); });
    std::erase_if(f.histograms, [&](const auto& e) { return matches(e.first); });
  }
}

std::vector<std::pair<MetricLabels, double>> MetricsRegistry::ValuesLabeled(
    const std::string& name, const std::string& key, const std::string& value) {
  std::vector<std::pair<MetricLabels, double>> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return out;
  for (const auto& [labels, c] : f->second.counters) {
    if (HasLabel(labels, key, value)) out.emplace_back(labels, static_cast<double>(c->value()));
  }
  for (const auto& [labels, g] : f->second.gauges) {
    if (HasLabel(labels, key, value)) out.emplace_back(labels, g->value());
  }
  return out;
}

std::optional<MetricsRegistry::HistogramCounts> MetricsRegistry::HistogramLabeled(
    const std::string& name, const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto f = families_.find(name);
  if (f == families_.end()) return std::nullopt;
  std::optional<HistogramCounts> out;
  for (const auto& [labels, h] : f->second.histograms) {
    if (!HasLabel(labels, key, value)) continue;
    std::vector<uint64_t> buckets = h->bucket_counts();
    if (!out) {
      out = HistogramCounts{h->upper_bounds(), std::vector<uint64_t>(buckets.size()), 0, 0};
    }
    if (out->upper_bounds != h->upper_bounds()) continue;  // unlike buckets do not add up
    for (size_t i = 0; i < buckets.size(); ++i) out->buckets[i] += buckets[i];
    out->count += h->count();
    out->sum += h->sum();
  }
  return out;
}

std::string MetricsRegistry::Render() {
  std::vector<std::function<void()>> refreshers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    refreshers = refreshers_;
  }
  for (auto& r : refreshers) r();
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name,
                       kTypeNames[static_cast<int>(f.type)]);
    for (const auto& [labels, c] : f.counters) {
      out += fmt::format("{}{} {}\n", name, LabelText(labels), c->value());
    }
    for (const auto& [labels, g] : f.gauges) {
      out += fmt::format("{}{} {}\n", name, LabelText(labels), Number(g->value()));
    }
    for (const auto& [labels, h] : f.histograms) {
      std::vector<uint64_t> counts = h->bucket_counts();
      uint64_t cumulative = 0;
      for (size_t i = 0; i < counts.size(); ++i) {
        cumulative += counts[i];
        std::string le = i < h->upper_bounds().size() ? Number(h->upper_bounds()[i]) : "+Inf";
        out += fmt::format("{}_bucket{} {}\n", name,
                           LabelText(labels, fmt::format("le=\"{}\"", le)), cumulative);
      }
      out += fmt::format("{}_sum{} {}\n", name, LabelText(labels), Number(h->sum()));
      out += fmt::format("{}_count{} {}\n", name, LabelText(labels), h->count());
    }
  }
  return out;
}

MetricsRegistry& MetricsRegistry::Global() {
  static MetricsRegistry* registry = new MetricsRegistry();  // never destroyed: used at exit
  return *registry;
}

void RegisterProcessMetrics(MetricsRegistry& registry) {
  Gauge& rss = registry.GetGauge("sluice_process_resident_memory_bytes",
                                 "Resident memory of the process (VmRSS)");
  Gauge& anon = registry.GetGauge("sluice_process_anonymous_memory_bytes",
                                  "Anonymous resident memory, the working set (RssAnon)");
  registry.AddRefresher([&rss, &anon] {
    std::ifstream status("/proc/self/status");
    std::string key;
    while (status >> key) {
      double kib = 0;
      if (key == "VmRSS:" && status >> kib) rss.Set(kib * 1024);
      if (key == "RssAnon:" && status >> kib) anon.Set(kib * 1024);
    }
  });
}

}  // namespace sluice
