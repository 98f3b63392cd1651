// `sluice bench compaction` (see compaction_bench.h).
#include "bench/compaction_bench.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/machine_info.h"
#include "compaction/cleaner.h"
#include "compaction/log_cleaner.h"
#include "kafka/protocol/records.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/log_swap.h"

namespace sluice::bench {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// A /proc/self/status field in bytes ("VmRSS", "VmHWM"), 0 when unknown.
uint64_t ProcStatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) * 1024;
  }
  return 0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so the peak measured is the cleaning's.
void ResetPeakRss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
}

std::optional<kafka::Compression> ParseCodec(const std::string& name) {
  for (auto c : {kafka::Compression::kNone, kafka::Compression::kGzip, kafka::Compression::kSnappy,
                 kafka::Compression::kLz4, kafka::Compression::kZstd}) {
    if (kafka::CompressionName(c) == name) return c;
  }
  return std::nullopt;
}

}  // namespace

int RunCompactionBench(const CompactionBenchOptions& o) {
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "bench compaction: %s\n", what.c_str());
    return 1;
  };
  auto codec = ParseCodec(o.compression);
  if (!codec) return fail("--compression must be none, gzip, snappy, lz4 or zstd");
  if (o.records < 1 || o.keys < 1 || o.records_per_batch < 1 || o.value_bytes < 0 ||
      o.tombstone_share < 0 || o.tombstone_share > 1) {
    return fail("records, keys and records per batch must be positive, tombstone share 0 to 1");
  }
  auto work = WorkDir::Create(o.dir, "compaction");
  if (!work.ok()) return fail(work.status().ToString());
  storage::IoExecutor exec(4);
  storage::LogOptions lo;
  lo.executor = &exec;
  lo.segment_bytes = o.segment_bytes;
  lo.flush_policy = storage::FlushPolicy::kInterval;
  lo.max_batch_bytes = 64 << 20;
  lo.retention_ms = -1;
  auto opened = storage::PartitionLog::Open((*work)->path() + "/bench-0", lo);
  if (!opened.ok()) return fail(opened.status().ToString());
  storage::PartitionLog& log = **opened;

  // Build: updates of random keys, some of them deletes. `latest` is what must remain.
  Progress progress;
  std::mt19937_64 rng(20261202);
  std::map<std::string, std::optional<std::string>> latest;
  std::string value(static_cast<size_t>(o.value_bytes), 'v');
  std::vector<std::string> keys(static_cast<size_t>(o.keys));
  for (int64_t k = 0; k < o.keys; ++k) keys[static_cast<size_t>(k)] = fmt::format("key-{:08d}", k);
  auto build_start = std::chrono::steady_clock::now();
  int64_t written = 0;
  std::vector<kafka::RecordInput> batch;
  std::vector<std::string> values;
  while (written < o.records) {
    int n = static_cast<int>(std::min<int64_t>(o.records_per_batch, o.records - written));
    batch.clear();
    values.assign(static_cast<size_t>(n), std::string());
    for (int i = 0; i < n; ++i) {
      const std::string& key = keys[rng() % keys.size()];
      bool tombstone = std::uniform_real_distribution<double>(0, 1)(rng) < o.tombstone_share;
      kafka::RecordInput r;
      r.key = kafka::AsBytes(key);
      r.timestamp_delta = i;
      if (!tombstone) {
        values[static_cast<size_t>(i)] = fmt::format("{}:{}", written + i, value);
        r.value = kafka::AsBytes(values[static_cast<size_t>(i)]);
        latest[key] = values[static_cast<size_t>(i)];
      } else {
        latest[key] = std::nullopt;
      }
      batch.push_back(r);
    }
    kafka::BatchBuilderOptions bo;
    bo.compression = *codec;
    bo.base_timestamp = 1'700'000'000'000 + written;
    auto bytes = kafka::BuildBatch(bo, batch);
    storage::AppendOptions ao;
    ao.ack = storage::AckLevel::kWritten;
    auto appended = log.Append(bytes, ao);
    if (!appended.ok()) return fail(appended.status().ToString());
    written += n;
    if (written % 100'000 < o.records_per_batch) {
      progress.Show(fmt::format("building: {} of {} records", written, o.records));
    }
  }
  if (Status st = log.Flush(); !st.ok()) return fail(st.ToString());
  double build_s = Seconds(build_start);
  progress.Clear();

  // Reference: read every closed segment once, as the cleaner's input.
  std::vector<storage::SegmentSummary> closed = log.ClosedSegments();
  uint64_t input_bytes = 0;
  for (const auto& s : closed) input_bytes += s.size;
  if (input_bytes == 0) return fail("the log has no closed segment: raise --records");
  auto read_start = std::chrono::steady_clock::now();
  {
    std::vector<uint8_t> buf;
    int64_t offset = closed.front().base_offset;
    while (offset < closed.back().next_offset) {
      auto r = log.Read(offset, 1 << 20);
      if (!r.ok()) return fail(r.status().ToString());
      if (r->slice.size == 0) break;
      if (Status st = storage::PartitionLog::ReadSlice(r->slice, &buf); !st.ok())
        return fail(st.ToString());
      offset = r->next_offset;
    }
  }
  double read_s = Seconds(read_start);

  // Clean, once, timed; the memory is the cleaner's own.
  compaction::CleanConfig cc;
  cc.segment_bytes = o.segment_bytes;
  cc.delete_retention_ms = 0;
  uint64_t rss_before = ProcStatusBytes("VmRSS");
  ResetPeakRss();
  auto clean_start = std::chrono::steady_clock::now();
  compaction::KeyMap map(compaction::KeyMapBytes(o.buffer_bytes));
  compaction::CleanStats stats;
  int64_t first_dirty = 0;
  if (Status st = compaction::CleanLog(log, cc, map, nullptr, Clock::Real(), &first_dirty, &stats);
      !st.ok()) {
    return fail(st.ToString());
  }
  double clean_s = Seconds(clean_start);
  uint64_t rss_peak = ProcStatusBytes("VmHWM");
  uint64_t rss_growth = rss_peak > rss_before ? rss_peak - rss_before : 0;
  uint64_t tracked_peak = map.peak_bytes() + stats.peak_buffer_bytes;
  uint64_t output_bytes = 0;
  for (const auto& s : log.ClosedSegments()) output_bytes += s.size;

  // The tombstones' horizon (delete.retention.ms = 0) has passed: a second cleaning removes
  // them. Then check: every live key's latest value once, no deleted key (the active
  // segment's records aside, which are not cleanable and are checked as they are).
  compaction::CleanStats stats2;
  if (Status st = compaction::CleanLog(log, cc, map, nullptr, Clock::Real(), &first_dirty, &stats2);
      !st.ok()) {
    return fail(st.ToString());
  }
  std::map<std::string, std::optional<std::string>> seen;
  {
    std::vector<uint8_t> buf;
    int64_t offset = log.start_offset();
    while (offset < log.written_end_offset()) {
      auto r = log.Read(offset, 1 << 20);
      if (!r.ok()) return fail(r.status().ToString());
      if (r->slice.size == 0) break;
      if (Status st = storage::PartitionLog::ReadSlice(r->slice, &buf); !st.ok())
        return fail(st.ToString());
      size_t pos = 0;
      while (pos < buf.size()) {
        auto b = std::span<const uint8_t>(buf).subspan(pos);
        auto h = storage::ParseBatchHeader(b);
        Status st =
            kafka::ForEachRecord(b.first(h.total_size()), 64 << 20, [&](const kafka::Record& rec) {
              std::string k(reinterpret_cast<const char*>(rec.key->data()), rec.key->size());
              if (rec.value) {
                seen[k] = std::string(reinterpret_cast<const char*>(rec.value->data()),
                                      rec.value->size());
              } else {
                seen[k] = std::nullopt;
              }
            });
        if (!st.ok()) return fail(st.ToString());
        pos += h.total_size();
      }
      offset = r->next_offset;
    }
  }
  for (const auto& [k, v] : latest) {
    auto it = seen.find(k);
    bool ok = v ? (it != seen.end() && it->second == v) : (it == seen.end() || !it->second);
    if (!ok) return fail(fmt::format("after cleaning, key {} is wrong", k));
  }
  int64_t live = 0;
  for (const auto& [k, v] : latest) live += v.has_value();

  double mb = static_cast<double>(input_bytes) / 1e6;
  double clean_mbps = mb / clean_s, read_mbps = mb / read_s;
  MachineInfo m = GetMachineInfo();
  auto fs = GetFsInfo((*work)->path());
  nlohmann::json j = {
      {"bench", "compaction"},
      {"records", o.records},
      {"keys", o.keys},
      {"live_keys", live},
      {"value_bytes", o.value_bytes},
      {"records_per_batch", o.records_per_batch},
      {"tombstone_share", o.tombstone_share},
      {"compression", o.compression},
      {"input_bytes", input_bytes},
      {"output_bytes", output_bytes},
      {"records_kept", stats.records_kept},
      {"passes", stats.passes},
      {"clean_s", Round(clean_s, 3)},
      {"input_mb_per_s", Round(clean_mbps, 1)},
      {"records_per_s", Round(static_cast<double>(o.records) / clean_s, 0)},
      {"reference_read_mb_per_s", Round(read_mbps, 1)},
      {"ratio_to_read", Round(clean_mbps / read_mbps, 3)},
      {"buffer_bytes", o.buffer_bytes},
      {"key_map_bytes", map.peak_bytes()},
      {"key_map_limit_bytes", map.memory_bytes()},
      {"peak_cleaner_bytes", tracked_peak},
      {"rss_growth_bytes", rss_growth},
      {"within_buffer", tracked_peak <= o.buffer_bytes},
      {"build_s", Round(build_s, 2)},
      {"cpu", m.cpu_model},
      {"cores", m.cores},
      {"memory_bytes", m.memory_bytes},
      {"kernel", m.kernel},
      {"fs", fs.ok() ? fs->fs_type : "unknown"},
      {"load", LoadAverages()},
      {"commit", SourceCommit()},
  };
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf(
      "sluice bench compaction: %lld records over %lld keys (%d-byte values, %.0f%% "
      "tombstones, %d per batch, %s)\n",
      static_cast<long long>(o.records), static_cast<long long>(o.keys), o.value_bytes,
      o.tombstone_share * 100, o.records_per_batch, o.compression.c_str());
  std::printf("machine: %s, %d cores, %s, %s; fs %s; load %s; commit %s\n\n", m.cpu_model.c_str(),
              m.cores, FormatBinaryBytes(m.memory_bytes).c_str(), m.kernel.c_str(),
              fs.ok() ? fs->fs_type.c_str() : "unknown", LoadAverages().c_str(),
              SourceCommit().c_str());
  std::printf("%-34s %14s\n", "", "value");
  std::printf("%-34s %14s\n", "input (closed segments)", FormatBinaryBytes(input_bytes).c_str());
  std::printf("%-34s %14s\n", "output", FormatBinaryBytes(output_bytes).c_str());
  std::printf("%-34s %14.1f\n", "cleaned, input MB/s", clean_mbps);
  std::printf("%-34s %14.1f\n", "reference: reading it, MB/s", read_mbps);
  std::printf("%-34s %14.3f\n", "ratio", clean_mbps / read_mbps);
  std::printf("%-34s %14d\n", "passes", stats.passes);
  std::printf("%-34s %14s\n", "configured buffer", FormatBinaryBytes(o.buffer_bytes).c_str());
  std::printf("%-34s %14s\n", "peak: key map + I/O buffers",
              FormatBinaryBytes(tracked_peak).c_str());
  std::printf("%-34s %14s\n", "peak: process RSS growth", FormatBinaryBytes(rss_growth).c_str());
  std::printf("%-34s %14lld of %lld keys\n", "live after cleaning", static_cast<long long>(live),
              static_cast<long long>(o.keys));
  return 0;
}

}  // namespace sluice::bench
