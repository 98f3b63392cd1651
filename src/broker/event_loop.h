// EventLoop: one epoll loop per thread, the unit of the broker's thread-per-core model
// (docs/design/0002-broker-plan.md, decision 1). A shard owns its loop, its connections
// and its partitions; other threads reach it only through Post().
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace sluice::broker {

// Lifecycle: Create() on any thread; Run() on the thread that then owns the loop, until
// Stop(). Post() and Stop() may be called from any thread; every other method only from
// the owning thread (or from the creating thread while Run() is not running). Callbacks
// run on the owning thread, one at a time, and must not block. Epoll is level-triggered.
// Tasks still queued when the loop is destroyed are destroyed without running.
class EventLoop {
 public:
  using Task = std::function<void()>;
  using IoCallback = std::function<void(uint32_t events)>;  // EPOLLIN, EPOLLOUT, ...
  using TimerId = uint64_t;

  static Result<std::unique_ptr<EventLoop>> Create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` (not owned) for `events`; `cb` gets the ready events. EPOLLERR and
  // EPOLLHUP are always reported. An fd is registered at most once.
  Status Add(int fd, uint32_t events, IoCallback cb);
  Status Modify(int fd, uint32_t events);
  // Stops watching `fd`; no callback for it runs afterwards, even one already reported
  // in the current batch. Safe from inside that fd's own callback. No-op when unknown.
  void Remove(int fd);

  // Runs `fn` on this loop once `ms` milliseconds have passed. Timers due together run
  // in the order they were added.
  TimerId RunAfter(int64_t ms, Task fn);
  // False when the timer already ran or was cancelled.
  bool Cancel(TimerId id);

  // Any thread: runs `fn` on this loop soon, in posting order.
  void Post(Task fn);
  // Any thread: makes Run() return after the callback it is running, if any.
  void Stop();

  // Dispatches events, timers and posted tasks until Stop().
  void Run();
  bool InLoopThread() const { return std::this_thread::get_id() == owner_.load(); }

 private:
  struct Entry {
    int fd;
    IoCallback cb;
    bool removed = false;
  };
  struct Timer {
    int64_t deadline_ns;
    TimerId id;
    bool operator>(const Timer& o) const {
      return deadline_ns != o.deadline_ns ? deadline_ns > o.deadline_ns : id > o.id;
    }
  };

  EventLoop(int epoll_fd, int wake_fd);
  int NextTimeoutMs() const;
  void RunTimers();
  void RunPosted();
  void Wake();

  const int epoll_fd_;
  const int wake_fd_;  // eventfd: Post() and Stop() write it to end epoll_wait
  std::atomic<bool> stop_{false};
  std::atomic<std::thread::id> owner_{};

  std::unordered_map<int, std::unique_ptr<Entry>> entries_;
  // Removed entries kept alive until the current dispatch batch ends, so an event
  // already reported for them finds `removed` set, not freed memory.
  std::vector<std::unique_ptr<Entry>> retired_;

  std::vector<Timer> timer_heap_;  // min-heap; cancelled ids are skipped lazily
  std::unordered_map<TimerId, Task> timers_;
  TimerId next_timer_id_ = 1;

  std::mutex post_mu_;
  std::vector<Task> posted_;  // guarded by post_mu_
};

}  // namespace sluice::broker
