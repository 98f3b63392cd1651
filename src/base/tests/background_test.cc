// Background: jobs run on the helper, one at a time, in order, each done when Wait returns.
#include "base/background.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace sluice {
namespace {

TEST(BackgroundTest, RunsEachJobOnTheHelperAndWaitSeesItDone) {
  Background b("sluice-test-bg");
  std::vector<int> seen;
  std::thread::id caller = std::this_thread::get_id(), ran_on;
  char name[16] = {};
  for (int i = 0; i < 100; ++i) {
    b.Start([&, i] {
      std::this_thread::sleep_for(std::chrono::microseconds(i % 3 == 0 ? 200 : 0));
      seen.push_back(i);  // only the helper writes, only between Start and Wait
      ran_on = std::this_thread::get_id();
      pthread_getname_np(pthread_self(), name, sizeof name);
    });
    EXPECT_TRUE(b.busy());
    if (i % 2 == 0) b.Wait();  // Start waits for the previous job otherwise
  }
  b.Wait();
  EXPECT_FALSE(b.busy());
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[i], i);
  EXPECT_NE(ran_on, caller);
  EXPECT_STREQ(name, "sluice-test-bg");
}

TEST(BackgroundTest, TheDestructorWaitsForTheJobInHand) {
  std::atomic<bool> finished{false};
  {
    Background b("sluice-test-bg");
    b.Start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      finished = true;
    });
  }
  EXPECT_TRUE(finished);
}

TEST(BackgroundTest, WaitWithoutAJobReturns) {
  Background b("x");
  b.Wait();
  EXPECT_FALSE(b.busy());
}

}  // namespace
}  // namespace sluice
