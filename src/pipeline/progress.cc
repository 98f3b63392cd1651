// ProgressReporter (progress.h): the per-second gauges and the progress line.
#include "pipeline/progress.h"

#include <fmt/format.h>
#include <malloc.h>

#include "base/logging.h"
#include "pipeline/loggers.h"
#include "pipeline/runner.h"

namespace sluice::pipeline {
ProgressReporter::ProgressReporter(MetricsRegistry& registry, std::string pipeline,
                                   duck::Connection& conn, int64_t memory_limit_bytes,
                                   std::FILE* progress)
    : registry_(registry),
      pipeline_(std::move(pipeline)),
      conn_(conn),
      progress_(progress),
      next_memory_(std::chrono::steady_clock::now()) {
  // DuckDB's memory limit: the configured bytes, or DuckDB's default as it reports it.
  if (memory_limit_bytes > 0) {
    memory_limit_ = fmt::format("{}B", memory_limit_bytes);
  } else if (auto limit = conn_.QueryText("SELECT current_setting('memory_limit')");
             limit.ok() && !limit->empty()) {
    memory_limit_ = (*limit)[0][0].value_or("");
  }
}

void ProgressReporter::Report(SteadyTime now, const std::vector<kafka::client::PartitionLag>& lags,
                              const RunnerStats& stats) {
  // Consumer lag per partition (from what the consumer last heard of the broker: no
  // request), and the progress line when there is a terminal.
  int64_t lag = 0;
  for (const kafka::client::PartitionLag& l : lags) {
    if (l.lag() < 0) continue;
    lag += l.lag();
    registry_
        .GetGauge("sluice_pipeline_consumer_lag",
                  "Records behind the high watermark, per partition",
                  {{"pipeline", pipeline_},
                   {"topic", l.topic},
                   {"partition", std::to_string(l.partition)}})
        .Set(static_cast<double>(l.lag()));
    if (l.unstable() >= 0) {
      // Part of the lag a read_committed consumer cannot read yet: records of
      // transactions still open (docs/design/0006 #12).
      registry_
          .GetGauge("sluice_pipeline_unstable_offsets",
                    "Offsets between the last stable offset and the high watermark, per "
                    "partition: open transactions a read_committed pipeline waits behind",
                    {{"pipeline", pipeline_},
                     {"topic", l.topic},
                     {"partition", std::to_string(l.partition)}})
          .Set(static_cast<double>(l.unstable()));
    }
  }
  if (now >= next_memory_) {
    next_memory_ = now + std::chrono::seconds(10);
    ReportMemory();
  }
  if (progress_ != nullptr) {
    uint64_t in = stats.messages_in.load();
    std::fprintf(progress_, "\r%s: %llu in, %llu msg/s, lag %lld, %llu out, %llu errors   ",
                 pipeline_.c_str(), static_cast<unsigned long long>(in),
                 static_cast<unsigned long long>(in - last_in_), static_cast<long long>(lag),
                 static_cast<unsigned long long>(stats.rows_out.load()),
                 static_cast<unsigned long long>(stats.errors.load()));
    std::fflush(progress_);
    last_in_ = in;
  }
}

// DuckDB's own accounting, per tag: tells DuckDB's growth from the allocators'.
void ProgressReporter::ReportMemory() {
  if (!memory_limit_.empty()) {
    // Setting the limit (to what it is) makes DuckDB flush its allocators: its
    // jemalloc keeps freed pages resident and purges them only from idle worker
    // threads, which a one-thread database does not have (0.3-8 ms here).
    if (Status st =
            conn_.Execute(fmt::format("SET memory_limit = {}", duck::QuoteLiteral(memory_limit_)));
        !st.ok()) {
      SLUICE_LOG(kLog, kWarn, "pipeline {}: {}: {}", pipeline_, "flushing DuckDB's allocator",
                 st.message());
      memory_limit_.clear();
    }
  }
  // glibc's heap (everything but DuckDB's buffers): held from the system, in use by
  // allocations; a gap growing between them is fragmentation, not a leak.
  struct mallinfo2 heap = mallinfo2();
  for (const auto& [kind, bytes] :
       {std::pair<const char*, size_t>{"arena", heap.arena + heap.hblkhd},
        {"in_use", heap.uordblks + heap.hblkhd},
        {"free", heap.fordblks}}) {
    registry_
        .GetGauge("sluice_pipeline_malloc_bytes",
                  "glibc malloc's heap: arena (from the system), in_use, free",
                  {{"pipeline", pipeline_}, {"kind", kind}})
        .Set(static_cast<double>(bytes));
  }
  if (auto tags = conn_.QueryText("SELECT tag, memory_usage_bytes FROM duckdb_memory()");
      tags.ok()) {
    for (const auto& row : *tags) {
      if (!row[0] || !row[1]) continue;
      registry_
          .GetGauge("sluice_pipeline_duckdb_memory_bytes",
                    "DuckDB's memory by its tag (duckdb_memory())",
                    {{"pipeline", pipeline_}, {"tag", *row[0]}})
          .Set(std::stod(*row[1]));
    }
  }
}

void ProgressReporter::Finish() {
  if (progress_ != nullptr) std::fprintf(progress_, "\n");
}

}  // namespace sluice::pipeline
