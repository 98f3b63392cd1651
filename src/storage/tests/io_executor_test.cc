#include "storage/io_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

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

// A latch the tasks of a test wait on until the test opens it.
class Gate {
 public:
  void Wait() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return open_; });
  }
  void Open() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(IoExecutorTest, BlockingTasksLeaveWorkersForShortOnes) {
  Gate gate;
  std::atomic<int> running{0}, most{0}, done{0};
  IoExecutor ex(4);
  ASSERT_EQ(ex.max_blocking(), 2);
  // Four "fdatasyncs" that hang until the gate opens: two run, two wait for the limit...
  for (int i = 0; i < 4; ++i) {
    ex.SubmitBlocking([&] {
      int now = ++running;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      gate.Wait();
      --running;
      ++done;
    });
  }
  while (running.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // ... and a "write" submitted after them still runs, on a worker they left free.
  std::promise<int> short_ran;
  ex.Submit([&] { short_ran.set_value(done.load()); });
  EXPECT_EQ(short_ran.get_future().get(), 0);  // no blocking task has finished
  gate.Open();
  while (done.load() < 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(most.load(), 2);
}

TEST(IoExecutorTest, OneThreadRunsBlockingAndShortTasksInOrder) {
  IoExecutor ex(1);
  ASSERT_EQ(ex.max_blocking(), 1);
  std::vector<int> order;
  std::mutex mu;
  std::promise<void> done;
  auto task = [&](int n) {
    return [&, n] {
      std::lock_guard l(mu);
      order.push_back(n);
      if (n == 5) done.set_value();
    };
  };
  Gate gate;
  ex.Submit([&] { gate.Wait(); });  // everything below queues behind it
  ex.SubmitBlocking(task(1));
  ex.Submit(task(2));
  ex.SubmitBlocking(task(3));
  ex.SubmitBlocking(task(4));
  ex.Submit(task(5));
  gate.Open();
  done.get_future().wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST(IoExecutorTest, EarlierDeadlineSubmittedLaterRunsFirst) {
  std::atomic<bool> far_ran{false};
  std::promise<void> near_ran;
  {
    IoExecutor ex(2);
    ex.SubmitAt(MonotonicNanos() + 60'000'000'000LL, [&] { far_ran = true; });
    // The timer thread sleeps until the far deadline; this one must wake it.
    ex.SubmitAt(MonotonicNanos() + 1'000'000, [&] { near_ran.set_value(); });
    near_ran.get_future().wait();
  }
  EXPECT_FALSE(far_ran.load());
}

TEST(IoExecutorTest, DelayedTasksRunInDeadlineOrder) {
  IoExecutor ex(1);
  std::vector<int> deadlines_ms(50);
  for (int i = 0; i < 50; ++i) deadlines_ms[static_cast<size_t>(i)] = 1 + i;
  std::shuffle(deadlines_ms.begin(), deadlines_ms.end(), std::mt19937(7));
  std::vector<int> order;
  std::mutex mu;
  std::promise<void> done;
  int64_t start = MonotonicNanos();
  for (int ms : deadlines_ms) {
    ex.SubmitAt(start + ms * 1'000'000LL, [&, ms] {
      std::lock_guard l(mu);
      order.push_back(ms);
      if (order.size() == 50) done.set_value();
    });
  }
  done.get_future().wait();
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
}

TEST(IoExecutorTest, DueDelayedTaskCanBeCancelledUntilItStarts) {
  std::atomic<bool> ran{false};
  {
    IoExecutor ex(1);
    Gate gate;
    ex.Submit([&] { gate.Wait(); });  // the only worker is busy
    auto id = ex.SubmitAt(MonotonicNanos() + 1'000'000, [&] { ran = true; });
    // Due by now (or not yet: Cancel takes it back either way), but not started.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_TRUE(ex.Cancel(id));
    EXPECT_FALSE(ex.Cancel(id));
    gate.Open();
  }
  EXPECT_FALSE(ran.load());
}

TEST(IoExecutorTest, DestructorRunsEveryQueuedTask) {
  std::atomic<int> n{0};
  {
    IoExecutor ex(2);
    Gate gate;
    ex.Submit([&] { gate.Wait(); });
    ex.SubmitBlocking([&] { gate.Wait(); });
    for (int i = 0; i < 10; ++i) ex.Submit([&] { ++n; });
    for (int i = 0; i < 3; ++i) ex.SubmitBlocking([&] { ++n; });
    gate.Open();
  }
  EXPECT_EQ(n.load(), 13);
}

}  // namespace
}  // namespace sluice::storage
