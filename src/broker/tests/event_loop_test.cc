// EventLoop: fd readiness, timers, cross-thread Post and Stop.
#include "broker/event_loop.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

namespace sluice::broker {
namespace event_loop_test {
namespace {

// Generous: only there so a broken loop fails instead of hanging.
constexpr auto kTimeout = std::chrono::seconds(20);

std::unique_ptr<EventLoop> NewLoop() {
  auto loop = EventLoop::Create();
  EXPECT_TRUE(loop.ok()) << loop.status().ToString();
  return std::move(loop).value();
}

// Runs a loop on its own thread for the life of the fixture.
class LoopThread {
 public:
  LoopThread() : loop_(NewLoop()), thread_([this] { loop_->Run(); }) {}
  ~LoopThread() {
    loop_->Stop();
    thread_.join();
  }
  EventLoop& loop() { return *loop_; }

  // Runs `fn` on the loop and waits for it.
  template <typename F>
  void RunSync(F fn) {
    std::promise<void> done;
    loop_->Post([&] {
      fn();
      done.set_value();
    });
    ASSERT_EQ(done.get_future().wait_for(kTimeout), std::future_status::ready)
        << "loop did not run the task";
  }

 private:
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

TEST(EventLoopTest, PostedTasksRunOnTheLoopThreadInOrder) {
  LoopThread t;
  std::vector<int> seen;
  std::thread::id loop_thread;
  for (int i = 0; i < 100; ++i) {
    t.loop().Post([&, i] {
      seen.push_back(i);
      loop_thread = std::this_thread::get_id();
    });
  }
  t.RunSync([&] { EXPECT_TRUE(t.loop().InLoopThread()); });
  ASSERT_EQ(seen.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], i);
  EXPECT_NE(loop_thread, std::this_thread::get_id());
}

TEST(EventLoopTest, PostFromManyThreadsRunsEveryTask) {
  LoopThread t;
  std::atomic<int> ran{0};
  std::vector<std::thread> posters;
  for (int p = 0; p < 4; ++p) {
    posters.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) t.loop().Post([&] { ran.fetch_add(1); });
    });
  }
  for (auto& p : posters) p.join();
  t.RunSync([] {});
  EXPECT_EQ(ran.load(), 4000);
}

TEST(EventLoopTest, TimersFireInDeadlineOrderAndCancelledOnesDoNot) {
  LoopThread t;
  std::vector<int> fired;
  std::promise<void> last;
  t.RunSync([&] {
    t.loop().RunAfter(30, [&] { fired.push_back(3); });
    EventLoop::TimerId cancelled = t.loop().RunAfter(10, [&] { fired.push_back(99); });
    t.loop().RunAfter(0, [&] { fired.push_back(1); });
    t.loop().RunAfter(10, [&] { fired.push_back(2); });
    t.loop().RunAfter(50, [&] { last.set_value(); });
    EXPECT_TRUE(t.loop().Cancel(cancelled));
    EXPECT_FALSE(t.loop().Cancel(cancelled));
  });
  ASSERT_EQ(last.get_future().wait_for(kTimeout), std::future_status::ready) << "timer never fired";
  t.RunSync([&] { EXPECT_EQ(fired, (std::vector<int>{1, 2, 3})); });
}

TEST(EventLoopTest, ManyCancelledTimersAreForgotten) {
  LoopThread t;
  std::promise<void> fired;
  t.RunSync([&] {
    for (int i = 0; i < 10000; ++i) {
      EXPECT_TRUE(t.loop().Cancel(
          t.loop().RunAfter(3'600'000, [] { ADD_FAILURE() << "cancelled timer ran"; })));
    }
    t.loop().RunAfter(1, [&] { fired.set_value(); });
  });
  ASSERT_EQ(fired.get_future().wait_for(kTimeout), std::future_status::ready);
}

TEST(EventLoopTest, ReadinessCallbacksAndRemoveFromInsideACallback) {
  LoopThread t;
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  std::promise<std::string> got;
  t.RunSync([&] {
    Status st = t.loop().Add(fds[0], EPOLLIN, [&](uint32_t events) {
      char buf[16];
      ssize_t n = ::read(fds[0], buf, sizeof(buf));
      t.loop().Remove(fds[0]);  // no further callback even though more may be readable
      got.set_value(std::string(buf, static_cast<size_t>(std::max<ssize_t>(n, 0))));
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_FALSE(t.loop().Add(fds[0], EPOLLIN, [](uint32_t) {}).ok()) << "registered twice";
  });
  ASSERT_EQ(::write(fds[1], "ping", 4), 4);
  auto f = got.get_future();
  ASSERT_EQ(f.wait_for(kTimeout), std::future_status::ready) << "no readiness callback";
  EXPECT_EQ(f.get(), "ping");
  ASSERT_EQ(::write(fds[1], "more", 4), 4);
  t.RunSync([] {});  // a second event would have crashed on the promise
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(EventLoopTest, WritableInterestIsReported) {
  LoopThread t;
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
  std::promise<void> writable;
  t.RunSync([&] {
    ASSERT_TRUE(t.loop()
                    .Add(fds[0], 0,
                         [&](uint32_t events) {
                           if (events & EPOLLOUT) {
                             t.loop().Remove(fds[0]);
                             writable.set_value();
                           }
                         })
                    .ok());
    ASSERT_TRUE(t.loop().Modify(fds[0], EPOLLOUT).ok());
    EXPECT_FALSE(t.loop().Modify(fds[1], EPOLLOUT).ok()) << "modify of an unknown fd";
  });
  ASSERT_EQ(writable.get_future().wait_for(kTimeout), std::future_status::ready);
  ::close(fds[0]);
  ::close(fds[1]);
}

TEST(EventLoopTest, StopFromAnotherThreadEndsRun) {
  auto loop = NewLoop();
  std::promise<void> returned;
  std::thread runner([&] {
    loop->Run();
    returned.set_value();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  loop->Stop();
  EXPECT_EQ(returned.get_future().wait_for(kTimeout), std::future_status::ready)
      << "Run() did not return";
  runner.join();
}

TEST(EventLoopTest, StopBeforeRunReturnsAtOnceAndQueuedTasksAreDropped) {
  auto loop = NewLoop();
  auto token = std::make_shared<int>(0);
  loop->Post([token] { ADD_FAILURE() << "ran after Stop"; });
  loop->Stop();
  loop->Run();  // returns without running the task
  EXPECT_EQ(token.use_count(), 2);
  loop.reset();
  EXPECT_EQ(token.use_count(), 1) << "the dropped task was not destroyed";
}

}  // namespace
}  // namespace event_loop_test
}  // namespace sluice::broker
