// Cleaning a real log: the latest value per key survives at its offset, in order; the
// active segment and records newer than min.compaction.lag.ms stay; tombstones go after
// delete.retention.ms; a small key map cleans in several passes to the same result;
// compressed batches keep their codec; aborted transactions go, markers stay until their
// transaction is gone; a producer's last batch stays (empty); the cleaner threads pick
// due logs by dirty ratio.
#include "compaction/log_cleaner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "compaction/cleaner.h"
#include "kafka/protocol/records.h"
#include "storage/io_executor.h"
#include "storage/log_swap.h"
#include "storage/testing/fault_env.h"
#include "storage/testing/files.h"

namespace sluice::compaction {
namespace {

using kafka::AsBytes;
using kafka::Compression;
using storage::PartitionLog;

struct Rec {
  int64_t offset;
  std::optional<std::string> key, value;
  bool operator==(const Rec&) const = default;
};
struct BatchSeen {
  storage::BatchHeader h;
  int64_t pid;
  bool control;
  std::vector<Rec> records;
};

class CleanerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    storage::LogOptions o;
    o.executor = &exec_;
    o.clock = &clock_;
    o.segment_bytes = 4096;
    o.index_interval_bytes = 512;
    o.flush_policy = storage::FlushPolicy::kDurable;
    auto log = PartitionLog::Open(dir_.path(), o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    log_ = std::move(*log);
  }

  struct Put {
    std::string key;
    std::optional<std::string> value;
  };
  // Appends one batch; returns its base offset.
  int64_t Append(const std::vector<Put>& puts, Compression codec = Compression::kNone,
                 int64_t pid = -1, bool transactional = false, int32_t seq = -1) {
    std::vector<kafka::RecordInput> records;
    for (const Put& p : puts) {
      kafka::RecordInput r;
      if (!p.key.empty()) r.key = AsBytes(p.key);
      if (p.value) r.value = AsBytes(*p.value);
      records.push_back(r);
    }
    kafka::BatchBuilderOptions o;
    o.compression = codec;
    o.base_timestamp = clock_.NowMillis();
    o.producer_id = pid;
    o.producer_epoch = pid >= 0 ? 0 : -1;
    o.base_sequence = pid >= 0 ? (seq >= 0 ? seq : seq_[pid]) : -1;
    if (pid >= 0) seq_[pid] += static_cast<int32_t>(puts.size());
    o.transactional = transactional;
    auto batch = kafka::BuildBatch(o, records);
    auto info = log_->Append(batch, {});
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info->base_offset;
  }
  int64_t Marker(int64_t pid, bool commit) {
    const uint8_t key[] = {0, 0, 0, static_cast<uint8_t>(commit ? 1 : 0)};
    const uint8_t value[] = {0, 0, 0, 0, 0, 0};
    kafka::RecordInput r;
    r.key = std::span<const uint8_t>(key);
    r.value = std::span<const uint8_t>(value);
    kafka::BatchBuilderOptions o;
    o.control = o.transactional = true;
    o.producer_id = pid;
    o.producer_epoch = 0;
    o.base_timestamp = clock_.NowMillis();
    auto batch = kafka::BuildBatch(o, std::span<const kafka::RecordInput>(&r, 1));
    auto info = log_->Append(batch, {});
    EXPECT_TRUE(info.ok());
    return info->base_offset;
  }
  // Rolls the active segment: fills it with records of a throwaway key past segment.bytes.
  void Roll() {
    int before = log_->segment_count();
    while (log_->segment_count() == before) Append({{"zz-filler", std::string(500, 'f')}});
    ASSERT_TRUE(log_->Flush().ok());
  }

  std::vector<BatchSeen> Batches() {
    std::vector<BatchSeen> out;
    int64_t offset = log_->start_offset();
    std::vector<uint8_t> buf;
    while (offset < log_->written_end_offset()) {
      auto r = log_->Read(offset, 1 << 20);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (!r.ok() || r->slice.size == 0) break;
      EXPECT_TRUE(PartitionLog::ReadSlice(r->slice, &buf).ok());
      size_t pos = 0;
      while (pos < buf.size()) {
        auto b = std::span<const uint8_t>(buf).subspan(pos);
        auto h = storage::ParseBatchHeader(b);
        EXPECT_TRUE(storage::CrcMatches(b.first(h.total_size())));
        BatchSeen seen{h,
                       static_cast<int64_t>(storage::LoadBE64(b.data() + 43)),
                       (h.attributes & storage::kAttrControl) != 0,
                       {}};
        auto st =
            kafka::ForEachRecord(b.first(h.total_size()), 1 << 20, [&](const kafka::Record& rec) {
              auto str = [](const auto& v) -> std::optional<std::string> {
                if (!v) return std::nullopt;
                return std::string(reinterpret_cast<const char*>(v->data()), v->size());
              };
              seen.records.push_back(
                  {h.base_offset + rec.offset_delta, str(rec.key), str(rec.value)});
            });
        EXPECT_TRUE(st.ok()) << st.ToString();
        out.push_back(seen);
        pos += h.total_size();
        offset = h.next_offset();
      }
    }
    return out;
  }
  std::vector<Rec> Records() {
    std::vector<Rec> out;
    int64_t last = -1;
    for (const auto& b : Batches()) {
      if (b.control) continue;
      for (const auto& r : b.records) {
        EXPECT_GT(r.offset, last) << "offsets out of order";
        last = r.offset;
        if (r.key != "zz-filler") out.push_back(r);
      }
    }
    return out;
  }

  Status Clean(size_t map_bytes = 1 << 20, CleanStats* stats_out = nullptr) {
    KeyMap map(map_bytes);
    CleanStats stats;
    Status st = CleanLog(*log_, config_, map, nullptr, &clock_, &first_dirty_, &stats);
    if (stats_out) *stats_out = stats;
    return st;
  }

  storage::testing::TempDir dir_;
  storage::IoExecutor exec_{2};
  ManualClock clock_;
  std::unique_ptr<PartitionLog> log_;
  CleanConfig config_{.min_cleanable_dirty_ratio = 0.5,
                      .min_compaction_lag_ms = 0,
                      .delete_retention_ms = 60'000,
                      .segment_bytes = 4096};
  int64_t first_dirty_ = 0;
  std::map<int64_t, int32_t> seq_;
};

// The expected live view: key -> (offset, value) of its latest record.
std::map<std::string, Rec> Latest(const std::vector<Rec>& recs) {
  std::map<std::string, Rec> out;
  for (const auto& r : recs) out[*r.key] = r;
  return out;
}

TEST_F(CleanerTest, KeepsTheLatestValueOfEachKeyInOffsetOrder) {
  std::mt19937 rng(7);
  for (int b = 0; b < 60; ++b) {
    std::vector<Put> puts;
    for (int i = 0; i < 5; ++i)
      puts.push_back({fmt::format("k{}", rng() % 20), fmt::format("v{}-{}", b, i)});
    Append(puts);
  }
  Roll();
  auto before = Records();
  auto want = Latest(before);
  uint64_t bytes = log_->size_bytes();
  CleanStats stats;
  ASSERT_TRUE(Clean(1 << 20, &stats).ok());
  EXPECT_EQ(stats.passes, 1);
  EXPECT_LT(log_->size_bytes(), bytes);
  auto after = Records();
  EXPECT_EQ(after.size(), want.size());
  for (const auto& r : after) EXPECT_EQ(want[*r.key], r) << *r.key;
  EXPECT_EQ(first_dirty_, stats.first_dirty_after);
  EXPECT_EQ(*ReadCheckpoint(storage::Env::Posix(), dir_.path()), first_dirty_);
  // The active segment's records are untouched; a second cleaning changes nothing.
  ASSERT_TRUE(Clean().ok());
  EXPECT_EQ(Records(), after);
  ASSERT_TRUE(log_->Verify().ok());
  // Reopened, the log is the same.
  log_.reset();
  Open();
  EXPECT_EQ(Records(), after);
}

// DeleteRecords (or the snapshots the internal logs wrote before they were compacted) can
// leave the log start inside the first segment: cleaning reads from the start, and the
// cleaned segment leaves out the records below it.
TEST_F(CleanerTest, ALogStartInsideTheFirstSegmentIsWhereCleaningReads) {
  for (int b = 0; b < 30; ++b) Append({{fmt::format("k{}", b % 6), fmt::format("v{}", b)}});
  Roll();
  const int64_t start = 10;
  ASSERT_EQ(*log_->DeleteRecordsBefore(start), start);
  ASSERT_LT(log_->ClosedSegments().front().base_offset, start);
  std::vector<Rec> before = Records();
  ASSERT_FALSE(before.empty());
  ASSERT_GE(before.front().offset, start);
  auto want = Latest(before);
  ASSERT_TRUE(Clean().ok());
  auto after = Records();
  EXPECT_EQ(after.size(), want.size());
  for (const auto& r : after) {
    EXPECT_GE(r.offset, start);
    EXPECT_EQ(want[*r.key], r) << *r.key;
  }
  EXPECT_EQ(log_->start_offset(), start);
  ASSERT_TRUE(log_->Verify().ok());
}

TEST_F(CleanerTest, ASmallMapCleansInSeveralPassesToTheSameResult) {
  for (int b = 0; b < 80; ++b) {
    std::vector<Put> puts;
    for (int i = 0; i < 5; ++i)
      puts.push_back({fmt::format("key-{}", (b * 5 + i) % 150), fmt::format("{}", b)});
    Append(puts);
  }
  Roll();
  auto want = Latest(Records());
  KeyMap map(24 * 60);  // room for 54 keys: 150 keys need at least 3 passes
  EXPECT_EQ(map.memory_bytes(), 24u * 60);
  CleanStats stats;
  ASSERT_TRUE(CleanLog(*log_, config_, map, nullptr, &clock_, &first_dirty_, &stats).ok());
  EXPECT_GE(stats.passes, 3);
  EXPECT_EQ(map.memory_bytes(), 24u * 60);
  auto after = Records();
  EXPECT_EQ(after.size(), want.size());
  for (const auto& r : after) EXPECT_EQ(want[*r.key], r);
}

TEST_F(CleanerTest, MapTooSmallForOneBatchIsAnError) {
  std::vector<Put> puts;
  for (int i = 0; i < 50; ++i) puts.push_back({fmt::format("k{}", i), "v"});
  Append(puts);
  Roll();
  Status st = Clean(24 * 10);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
}

TEST_F(CleanerTest, TombstonesStayUntilDeleteRetentionHasPassed) {
  Append({{"a", "1"}, {"b", "1"}});
  Append({{"a", std::nullopt}});
  Roll();
  ASSERT_TRUE(Clean().ok());
  auto recs = Records();
  ASSERT_EQ(recs.size(), 2u);  // b=1 and the tombstone of a
  EXPECT_EQ(recs[1].key, "a");
  EXPECT_EQ(recs[1].value, std::nullopt);
  clock_.Advance(config_.delete_retention_ms - 1);
  ASSERT_TRUE(Clean().ok());
  EXPECT_EQ(Records().size(), 2u);
  clock_.Advance(2);
  CleanStats stats;
  ASSERT_TRUE(Clean(1 << 20, &stats).ok());
  recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].key, "b");
  EXPECT_EQ(stats.tombstones_removed, 1u);
}

TEST_F(CleanerTest, RecordsNewerThanTheMinimumLagStay) {
  config_.min_compaction_lag_ms = 10'000;
  Append({{"a", "1"}});
  Roll();
  Append({{"a", "2"}});
  Roll();
  clock_.Advance(20'000);
  Append({{"a", "3"}});
  Roll();  // this segment is younger than the lag
  ASSERT_TRUE(Clean().ok());
  auto recs = Records();
  ASSERT_EQ(recs.size(), 2u);  // a=1 went: a=2 is in the cleanable range; a=3 is not
  EXPECT_EQ(recs[0].value, "2");
  EXPECT_EQ(recs[1].value, "3");
}

TEST_F(CleanerTest, CompressedBatchesKeepTheirCodec) {
  const std::vector<Compression> codecs{Compression::kGzip, Compression::kSnappy, Compression::kLz4,
                                        Compression::kZstd};
  for (size_t i = 0; i < codecs.size(); ++i) {
    Append({{"a", "1"}, {fmt::format("own-{}", i), "1"}, {"b", "1"}}, codecs[i]);
  }
  Append({{"a", "2"}, {"b", "2"}});
  Roll();
  ASSERT_TRUE(Clean().ok());
  std::map<std::string, std::string> live;
  size_t rewritten = 0;
  for (const auto& b : Batches()) {
    for (const auto& r : b.records) {
      if (r.key != "zz-filler") live[*r.key] = *r.value;
    }
    if (b.records.size() == 1 && b.records[0].key->rfind("own-", 0) == 0) {
      size_t i = std::stoul(b.records[0].key->substr(4));
      EXPECT_EQ(b.h.attributes & 7, static_cast<int>(codecs[i])) << i;
      EXPECT_EQ(b.h.last_offset_delta, 2);
      ++rewritten;
    }
  }
  EXPECT_EQ(rewritten, codecs.size());
  EXPECT_EQ(live.size(), 2 + codecs.size());
  EXPECT_EQ(live["a"], "2");
}

TEST_F(CleanerTest, AbortedTransactionsGoAndMarkersFollowTheirTransactions) {
  Append({{"a", "aborted"}}, Compression::kNone, 7, true);
  Append({{"b", "committed"}}, Compression::kNone, 8, true);
  Marker(7, false);
  Marker(8, true);
  Append({{"c", "plain"}});
  Roll();
  ASSERT_TRUE(Clean().ok());
  auto recs = Records();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].key, "b");
  EXPECT_EQ(recs[1].key, "c");
  // Producer 7's only batch was its last: kept, empty. Both markers are still there.
  int markers = 0, empty7 = 0;
  for (const auto& b : Batches()) {
    if (b.control) ++markers;
    if (b.pid == 7 && !b.control && b.records.empty()) ++empty7;
  }
  EXPECT_EQ(markers, 2);
  EXPECT_EQ(empty7, 1);
}

TEST_F(CleanerTest, MarkerOfAnEmptiedTransactionGoesAfterItsHorizon) {
  Append({{"a", "aborted"}}, Compression::kNone, 7, true);
  Marker(7, false);
  Append({{"x", "1"}}, Compression::kNone, 7);  // producer 7's last batch is a later one
  Roll();
  ASSERT_TRUE(Clean().ok());  // the aborted batch goes; the marker stays (batch seen)
  ASSERT_TRUE(Clean().ok());  // now its transaction is empty: horizon set
  auto count_markers = [&] {
    int n = 0;
    for (const auto& b : Batches()) n += b.control;
    return n;
  };
  EXPECT_EQ(count_markers(), 1);
  clock_.Advance(config_.delete_retention_ms + 1);
  CleanStats stats;
  ASSERT_TRUE(Clean(1 << 20, &stats).ok());
  EXPECT_EQ(count_markers(), 0);
  EXPECT_EQ(stats.markers_removed, 1u);
}

TEST_F(CleanerTest, OpenTransactionsAreNotCleaned) {
  Append({{"a", "1"}});
  Roll();
  Append({{"a", "open"}}, Compression::kNone, 9, true);  // no marker yet
  Append({{"a", "2"}});
  Roll();
  Append({{"a", "3"}});
  Roll();
  ASSERT_TRUE(Clean().ok());
  // Nothing at or past the open transaction is cleanable: only the first segment, whose a=1
  // is not superseded within the range cleaned.
  auto recs = Records();
  ASSERT_GE(recs.size(), 4u);
  EXPECT_EQ(recs[0].value, "1");
}

TEST_F(CleanerTest, AProducersLastBatchStaysEmptySoItsSequenceSurvives) {
  Append({{"a", "1"}, {"b", "1"}}, Compression::kNone, 5);
  Append({{"a", "2"}, {"b", "2"}});
  Roll();
  ASSERT_TRUE(Clean().ok());
  bool found = false;
  for (const auto& b : Batches()) {
    if (b.pid != 5) continue;
    found = true;
    EXPECT_TRUE(b.records.empty());
    EXPECT_EQ(b.h.last_offset_delta, 1);
    EXPECT_EQ(b.h.base_offset, 0);
  }
  EXPECT_TRUE(found);
}

TEST_F(CleanerTest, RecordsWithoutKeysAreDropped) {
  Append({{"", "no key"}, {"a", "1"}});
  Roll();
  ASSERT_TRUE(Clean().ok());
  auto recs = Records();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].key, "a");
}

TEST_F(CleanerTest, InspectReportsTheDirtyRatio) {
  for (int i = 0; i < 30; ++i) Append({{"a", std::string(100, 'x')}});
  Roll();
  auto info = Inspect(*log_, config_, 0, &clock_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->clean_bytes, 0u);
  EXPECT_GT(info->dirty_bytes, 0u);
  EXPECT_DOUBLE_EQ(info->dirty_ratio(), 1.0);
  ASSERT_TRUE(Clean().ok());
  info = Inspect(*log_, config_, first_dirty_, &clock_);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dirty_bytes, 0u);
}

TEST_F(CleanerTest, BackgroundThreadsCleanDueLogs) {
  for (int i = 0; i < 40; ++i) Append({{"a", fmt::format("{}", i)}, {"b", "x"}});
  Roll();
  CleanerOptions opts;
  opts.backoff_ms = 10;
  opts.clock = &clock_;
  opts.dedupe_buffer_bytes = 16 << 20;
  LogCleaner cleaner(opts);
  cleaner.Add("t-0", log_.get(), config_);
  cleaner.Start();
  while (cleaner.cleanings() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  cleaner.Remove("t-0");
  cleaner.Stop();
  auto recs = Records();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].value, "39");
  EXPECT_EQ(recs[1].value, "x");
}

TEST_F(CleanerTest, ThreadsCleanByDirtyRatioThenByMaxLag) {
  // Clean once, then add a little dirt: a small dirty share of the cleanable bytes.
  for (int i = 0; i < 40; ++i) Append({{fmt::format("k{}", i), std::string(200, 'a')}});
  Roll();
  ASSERT_TRUE(Clean().ok());
  Append({{"k1", "update"}});
  Roll();
  auto info = Inspect(*log_, config_, first_dirty_, &clock_);
  ASSERT_TRUE(info.ok());
  ASSERT_GT(info->dirty_bytes, 0u);
  ASSERT_LT(info->dirty_ratio(), 0.9);
  ASSERT_TRUE(WriteCheckpoint(storage::Env::Posix(), dir_.path(), first_dirty_).ok());
  auto k1_values = [&] {
    int n = 0;
    for (const auto& r : Records()) n += r.key == "k1";
    return n;
  };
  ASSERT_EQ(k1_values(), 2);

  CleanerOptions opts;
  opts.backoff_ms = 5;
  opts.clock = &clock_;
  opts.dedupe_buffer_bytes = 16 << 20;
  LogCleaner cleaner(opts);
  CleanConfig high = config_;
  high.min_cleanable_dirty_ratio = 0.9;  // not reached
  high.max_compaction_lag_ms = 60'000;
  cleaner.Add("t-0", log_.get(), high);
  cleaner.Start();
  // Inspections happen, no cleaning: the ratio is below the minimum, the lag not passed.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(cleaner.cleanings(), 0u);
  EXPECT_EQ(k1_values(), 2);
  // Past max.compaction.lag.ms the log is due whatever its ratio.
  clock_.Advance(60'001);
  while (cleaner.cleanings() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  cleaner.Remove("t-0");
  cleaner.Stop();
  EXPECT_EQ(k1_values(), 1);
}

// Power loss at disk calls all through a cleaning (several groups and passes, the
// checkpoint): the reopened log shows every key's latest value as before, and cleans.
TEST(CleanerCrashTest, PowerLossDuringCleaningKeepsTheLiveView) {
  storage::IoExecutor exec(2);
  ManualClock clock;
  CleanConfig config{.min_cleanable_dirty_ratio = 0.5,
                     .min_compaction_lag_ms = 0,
                     .delete_retention_ms = 60'000,
                     .segment_bytes = 2048};
  auto options = [&](storage::Env* env) {
    storage::LogOptions o;
    o.executor = &exec;
    o.clock = &clock;
    o.env = env;
    o.segment_bytes = 1024;
    o.flush_policy = storage::FlushPolicy::kInterval;
    return o;
  };
  auto live = [](PartitionLog& log) {
    std::map<std::string, std::string> view;
    std::vector<uint8_t> buf;
    int64_t offset = log.start_offset();
    while (offset < log.written_end_offset()) {
      auto r = log.Read(offset, 1 << 20);
      if (!r.ok() || r->slice.size == 0) break;
      EXPECT_TRUE(PartitionLog::ReadSlice(r->slice, &buf).ok());
      size_t pos = 0;
      while (pos < buf.size()) {
        auto h = storage::ParseBatchHeader(std::span<const uint8_t>(buf).subspan(pos));
        EXPECT_TRUE(kafka::ForEachRecord(std::span<const uint8_t>(buf).subspan(pos, h.total_size()),
                                         1 << 20,
                                         [&](const kafka::Record& rec) {
                                           view[std::string(rec.key->begin(), rec.key->end())] =
                                               std::string(rec.value->begin(), rec.value->end());
                                         })
                        .ok());
        pos += h.total_size();
      }
      offset = r->next_offset;
    }
    return view;
  };
  int crashed = 0;
  // Every disk call in turn (SLUICE_CLEANER_CRASH_STRIDE=N: every Nth).
  const char* stride_env = std::getenv("SLUICE_CLEANER_CRASH_STRIDE");
  const uint64_t stride = stride_env != nullptr ? std::strtoull(stride_env, nullptr, 10) : 1;
  // On tmpfs when there is one: the power loss is simulated, the fsyncs need not be real.
  const std::string prefix =
      storage::Env::Posix()->Exists("/dev/shm") ? "/dev/shm/sluice-cleaner-crash" : "sluice-test";
  for (uint64_t k = 0;; k += std::max<uint64_t>(stride, 1)) {
    storage::testing::TempDir dir(prefix);
    storage::testing::FaultEnv env(storage::Env::Posix());
    std::map<std::string, std::string> before;
    bool done;
    {
      auto log = PartitionLog::Open(dir.path(), options(&env));
      ASSERT_TRUE(log.ok());
      for (int b = 0; b < 30; ++b) {
        std::vector<kafka::RecordInput> records(3);
        std::vector<std::string> keys, values;
        for (int i = 0; i < 3; ++i) {
          keys.push_back(fmt::format("k{}", (b * 3 + i) % 11));
          values.push_back(fmt::format("v{}", b * 3 + i));
        }
        for (int i = 0; i < 3; ++i) {
          records[i].key = kafka::AsBytes(keys[i]);
          records[i].value = kafka::AsBytes(values[i]);
        }
        ASSERT_TRUE((*log)->Append(kafka::BuildBatch({}, records), {}).ok());
      }
      ASSERT_TRUE((*log)->Flush().ok());
      before = live(**log);
      env.CrashAfter(k);
      KeyMap map(24 * 8);  // 7 keys a pass: 11 keys take two passes
      CleanStats stats;
      int64_t first_dirty = 0;
      done = CleanLog(**log, config, map, nullptr, &clock, &first_dirty, &stats).ok();
      if (!done) env.SimulateCrash();
    }
    if (done) break;
    ++crashed;
    ASSERT_TRUE(env.DropUnsyncedData(k, storage::testing::TearMode::kKeepPrefix).ok());
    env.Reset();
    auto log = PartitionLog::Open(dir.path(), options(&env));
    ASSERT_TRUE(log.ok()) << "crash at disk call " << k << ": " << log.status().ToString();
    EXPECT_EQ(live(**log), before) << "crash at disk call " << k;
    KeyMap map(1 << 20);
    CleanStats stats;
    auto first_dirty = ReadCheckpoint(&env, dir.path());
    ASSERT_TRUE(first_dirty.ok());
    ASSERT_TRUE(CleanLog(**log, config, map, nullptr, &clock, &*first_dirty, &stats).ok());
    EXPECT_EQ(live(**log), before) << "cleaning again after a crash at disk call " << k;
  }
  EXPECT_GT(crashed, 20);
}

TEST(ThrottlerTest, UnlimitedNeverWaitsAndLimitedAdmitsEverything) {
  Throttler none(std::numeric_limits<double>::max());
  for (int i = 0; i < 1000; ++i) none.Acquire(1 << 20);
  Throttler some(1e9);
  for (int i = 0; i < 10; ++i) some.Acquire(1000);
  SUCCEED();
}

}  // namespace
}  // namespace sluice::compaction
