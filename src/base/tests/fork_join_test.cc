// ForkJoin (base/fork_join.h): every part runs once per Run, part 0 on the caller's thread,
// the others on distinct helpers; fewer parts than helpers; many runs in a row.
#include "base/fork_join.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace sluice {
namespace {

TEST(ForkJoinTest, EachPartOnceWithPartZeroOnTheCaller) {
  ForkJoin fj(3, "test-fork-join");
  EXPECT_EQ(fj.helpers(), 3u);
  const std::thread::id caller = std::this_thread::get_id();
  for (size_t parts : {4, 1, 2, 3, 4, 7}) {
    std::vector<std::atomic<int>> runs(parts);
    std::vector<std::thread::id> where(parts);
    fj.Run(parts, [&](size_t p) {
      runs[p].fetch_add(1);
      where[p] = std::this_thread::get_id();
    });
    const size_t ran = std::min<size_t>(parts, 4);  // at most helpers + 1
    std::set<std::thread::id> threads;
    for (size_t p = 0; p < parts; ++p) {
      EXPECT_EQ(runs[p].load(), p < ran ? 1 : 0) << "parts " << parts << ", part " << p;
      if (p < ran) threads.insert(where[p]);
    }
    EXPECT_EQ(where[0], caller);
    EXPECT_EQ(threads.size(), ran) << "parts " << parts;
  }
}

TEST(ForkJoinTest, ManyRunsSeeEveryPartsWrites) {
  ForkJoin fj(1, "test-fork-join");
  std::vector<uint64_t> sums(2);
  uint64_t total = 0;
  for (int run = 0; run < 20000; ++run) {
    fj.Run(2, [&](size_t p) { sums[p] = static_cast<uint64_t>(run) * (p + 1); });
    total += sums[0] + sums[1];  // the helper's write is visible once Run returns
  }
  EXPECT_EQ(total, 3ull * (20000ull * 19999ull / 2));
}

TEST(ForkJoinTest, NoHelpersRunsOnTheCaller) {
  ForkJoin fj(0, "none");
  int ran = 0;
  fj.Run(3, [&](size_t p) { ran += static_cast<int>(p) + 1; });
  EXPECT_EQ(ran, 1);
}

}  // namespace
}  // namespace sluice
