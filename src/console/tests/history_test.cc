// History: the ring's gaps and bound, the quantile of histogram buckets, and a pipeline's
// rates and latencies sampled from a real MetricsRegistry across a restart of its metrics.
#include "console/history.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <thread>

namespace sluice::console {
namespace {

TEST(SeriesRingTest, GapsForSeriesThatComeLateOrSkipAPointAndABound) {
  SeriesRing ring(3);
  ring.Append(1, {{"a", 1}});
  ring.Append(2, {{"a", 2}, {"b", 20}});
  ring.Append(3, {{"b", 30}});
  ASSERT_EQ(ring.times(), (std::deque<int64_t>{1, 2, 3}));
  const auto& a = ring.series().at("a");
  const auto& b = ring.series().at("b");
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(a[1], 2);
  EXPECT_TRUE(std::isnan(a[2]));
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[2], 30);
  ring.Append(4, {{"a", 4}});  // the oldest point goes
  EXPECT_EQ(ring.times(), (std::deque<int64_t>{2, 3, 4}));
  EXPECT_EQ(ring.series().at("a").size(), 3u);
  EXPECT_EQ(ring.series().at("a").front(), 2);
  EXPECT_TRUE(std::isnan(ring.series().at("b").back()));
}

TEST(BucketQuantileTest, InterpolatesInsideTheBucketOfTheRank) {
  const std::vector<double> bounds = {0.1, 0.2, 0.4};
  EXPECT_TRUE(std::isnan(BucketQuantile(0.99, bounds, {0, 0, 0, 0})));
  // 100 observations, all in (0.1, 0.2]: the 99th is near its top.
  EXPECT_NEAR(BucketQuantile(0.99, bounds, {0, 100, 0, 0}), 0.199, 1e-9);
  EXPECT_NEAR(BucketQuantile(0.5, bounds, {50, 50, 0, 0}), 0.1, 1e-9);
  // Beyond the last bound: the last bound is all that can be said.
  EXPECT_EQ(BucketQuantile(0.99, bounds, {1, 0, 0, 99}), 0.4);
}

TEST(HistoryTest, APipelinesRatesAndLatenciesAcrossARestartOfItsMetrics) {
  MetricsRegistry m;
  const MetricLabels p = {{"pipeline", "p"}};
  std::vector<std::string> names = {"p"};
  History h({.metrics = &m, .pipelines = [&] { return names; }, .group_offsets = nullptr},
            /*start_thread=*/false);
  h.Sample();  // the first sample is where rates start from
  EXPECT_TRUE(h.Pipeline("p").time_ms.empty());

  m.GetCounter("sluice_pipeline_messages_in_total", "", p).Inc(1000);
  m.GetCounter("sluice_pipeline_errors_total", "", {{"pipeline", "p"}, {"phase", "decode"}}).Inc(4);
  m.GetHistogram("sluice_pipeline_batch_seconds", "", p).Observe(0.010);
  m.GetHistogram("sluice_pipeline_batch_seconds", "", p).Observe(0.030);
  m.GetGauge("sluice_pipeline_consumer_lag", "", {{"pipeline", "p"}, {"partition", "0"}}).Set(5);
  m.GetGauge("sluice_pipeline_consumer_lag", "", {{"pipeline", "p"}, {"partition", "1"}}).Set(7);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  h.Sample();
  History::PipelineSeries s = h.Pipeline("p");
  ASSERT_EQ(s.time_ms.size(), 1u);
  EXPECT_GT(s.series["messages_in_per_sec"][0], 0);
  EXPECT_GT(s.series["errors_per_sec"][0], 0);
  EXPECT_NEAR(s.series["batch_seconds_mean"][0], 0.020, 1e-9);
  EXPECT_GT(s.series["batch_seconds_p99"][0], 0.010);
  EXPECT_EQ(s.series["consumer_lag"][0], 12);
  EXPECT_TRUE(std::isnan(s.series["flush_seconds_mean"][0]));  // no flush: a gap
  EXPECT_EQ(s.series.size(), 9u);

  // Its runner went (metrics removed) and came back with fewer counted: all of it is new.
  m.RemoveLabeled("pipeline", "p");
  m.GetCounter("sluice_pipeline_messages_in_total", "", p).Inc(10);
  h.Sample();
  s = h.Pipeline("p");
  ASSERT_EQ(s.time_ms.size(), 2u);
  EXPECT_GT(s.series["messages_in_per_sec"][1], 0);
  EXPECT_TRUE(std::isnan(s.series["batch_seconds_mean"][1]));
  EXPECT_TRUE(std::isnan(s.series["consumer_lag"][1]));

  // A pipeline removed takes its series with it; an unknown one has empty series.
  names.clear();
  h.Sample();
  s = h.Pipeline("p");
  EXPECT_TRUE(s.time_ms.empty());
  EXPECT_TRUE(s.series["messages_in_per_sec"].empty());
}

TEST(HistoryTest, AGroupsLagPerPartitionFromTheAskersRead) {
  History h({.metrics = nullptr, .pipelines = nullptr, .group_offsets = nullptr},
            /*start_thread=*/false);
  History::GroupSeries g =
      h.Group("g", "User:alice", {{"t", 1, 10, 15, 5}, {"t", 0, 3, 10, 7}, {"t", 2, -1, 4, -1}});
  ASSERT_EQ(g.time_ms.size(), 1u);
  EXPECT_EQ(g.total_lag, std::vector<double>{12});
  ASSERT_EQ(g.partitions.size(), 2u);  // the partition with no known lag has no series
  EXPECT_EQ(g.partitions[0].first, (std::pair<std::string, int32_t>{"t", 0}));
  EXPECT_EQ(g.partitions[0].second, std::vector<double>{7});
  // Asked again at once: no second point within half a step.
  g = h.Group("g", "User:alice", {{"t", 0, 10, 10, 0}});
  EXPECT_EQ(g.time_ms.size(), 1u);
  // Another principal has a history of its own: what the broker showed alice (topics bob
  // may not describe) is not bob's.
  g = h.Group("g", "User:bob", {{"u", 0, 1, 4, 3}});
  ASSERT_EQ(g.time_ms.size(), 1u);
  EXPECT_EQ(g.total_lag, std::vector<double>{3});
  ASSERT_EQ(g.partitions.size(), 1u);
  EXPECT_EQ(g.partitions[0].first.first, "u");
}

// The sampler reads each watched (group, principal) as that principal, until Stop.
TEST(HistoryTest, TheSamplerReadsEachWatchedGroupAsItsAsker) {
  std::vector<std::pair<std::string, std::string>> reads;
  History h({.metrics = nullptr,
             .pipelines = nullptr,
             .group_offsets = [&](const std::string& principal,
                                  const std::string& group) -> Result<std::vector<GroupOffset>> {
               reads.emplace_back(group, principal);
               if (group == "gone") return NotFoundError("no group");
               return std::vector<GroupOffset>{{"t", 0, 5, 9, 4}};
             }},
            /*start_thread=*/false);
  h.Group("g", "User:alice", {});
  h.Group("gone", "User:bob", {});
  std::this_thread::sleep_for(History::kStep / 2 + std::chrono::milliseconds(50));
  h.Sample();
  std::sort(reads.begin(), reads.end());
  EXPECT_EQ(reads, (std::vector<std::pair<std::string, std::string>>{{"g", "User:alice"},
                                                                     {"gone", "User:bob"}}));
  History::GroupSeries g = h.Group("g", "User:alice", {});
  ASSERT_EQ(g.time_ms.size(), 2u);
  EXPECT_TRUE(std::isnan(g.total_lag[0]));  // the first ask read nothing
  EXPECT_EQ(g.total_lag[1], 4);
  // A failed read is a gap.
  History::GroupSeries gone = h.Group("gone", "User:bob", {});
  ASSERT_EQ(gone.time_ms.size(), 2u);
  EXPECT_TRUE(std::isnan(gone.total_lag[1]));
  h.Stop();
}

}  // namespace
}  // namespace sluice::console
