#include "storage/io_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "base/clock.h"

namespace sluice::storage {
namespace {

TEST(IoExecutorTest, RunsSubmittedTasks) {
  IoExecutor ex(2);
  std::atomic<int> n{0};
  std::promise<void> done;
  for (int i = 0; i < 100; ++i) {
    ex.Submit([&] {
      if (++n == 100) done.set_value();
    });
  }
  done.get_future().wait();
  EXPECT_EQ(n.load(), 100);
}

TEST(IoExecutorTest, DelayedTaskRunsAfterImmediateOnes) {
  IoExecutor ex(1);
  std::vector<int> order;
  std::mutex mu;
  std::promise<void> done;
  ex.SubmitAt(MonotonicNanos() + 20'000'000, [&] {
    std::lock_guard l(mu);
    order.push_back(2);
    done.set_value();
  });
  ex.Submit([&] {
    std::lock_guard l(mu);
    order.push_back(1);
  });
  done.get_future().wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(IoExecutorTest, CancelledTaskNeverRuns) {
  std::atomic<bool> ran{false};
  {
    IoExecutor ex(1);
    auto id = ex.SubmitAt(MonotonicNanos() + 60'000'000'000LL, [&] { ran = true; });
    EXPECT_TRUE(ex.Cancel(id));
    EXPECT_FALSE(ex.Cancel(id));
  }
  EXPECT_FALSE(ran.load());
}

TEST(IoExecutorTest, DestructorDropsFarDelayedTasks) {
  std::atomic<bool> ran{false};
  {
    IoExecutor ex(2);
    ex.SubmitAt(MonotonicNanos() + 60'000'000'000LL, [&] { ran = true; });
  }
  EXPECT_FALSE(ran.load());
}

}  // namespace
}  // namespace sluice::storage
