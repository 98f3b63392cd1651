// IoExecutor: the threads that do the storage engine's blocking work (writes, fdatasync)
// so that the threads that own partitions never block on the disk. A log submits at most
// one job at a time, so its writes stay in order; different logs run in parallel.
//
// Two kinds of task share the workers. Short ones (Submit) do not wait for the device:
// a write into the page cache, a timer callback. Blocking ones (SubmitBlocking) do: an
// fdatasync can take tens of milliseconds on a busy disk. At most max_blocking() blocking
// tasks run at once, so the other workers stay free and a write never queues behind
// other logs' syncs.
//
// Delayed tasks (SubmitAt) are timed by one timer thread, which hands each to the workers
// when it is due. Idle workers wait without a timeout, so a timer that fires wakes one
// worker, not every idle one.
//
// Lifecycle: create before the logs that use it, destroy after they are closed.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace sluice::storage {

class IoExecutor {
 public:
  using Task = std::function<void()>;
  using TaskId = uint64_t;

  // `threads` workers (at least 1); max(1, threads / 2) of them may run blocking tasks at
  // once.
  explicit IoExecutor(int threads);
  ~IoExecutor();  // runs the queued tasks that are due, drops the delayed ones, joins
  IoExecutor(const IoExecutor&) = delete;
  IoExecutor& operator=(const IoExecutor&) = delete;

  // Runs `task` as soon as a worker is free. For tasks that do not wait for the device.
  void Submit(Task task);
  // Runs `task` as soon as a worker is free and fewer than max_blocking() blocking tasks
  // run. For tasks that wait for the device (fdatasync). Blocking tasks start in the order
  // they were submitted; short tasks go ahead of one that waits for the limit.
  void SubmitBlocking(Task task);
  // Runs `task` as a short task once the monotonic clock reaches `deadline_ns`
  // (MonotonicNanos()).
  TaskId SubmitAt(int64_t deadline_ns, Task task);
  // Removes a delayed task that has not started. False when it already ran or is running.
  bool Cancel(TaskId id);

  int threads() const { return static_cast<int>(workers_.size()); }
  int max_blocking() const { return max_blocking_; }

  // Write buffers shared by the logs on this executor, so a busy log reuses memory and
  // an idle one holds none. At most kPooledBytes of capacity are kept.
  std::vector<uint8_t> TakeBuffer();
  void ReturnBuffer(std::vector<uint8_t> buffer);
  static constexpr size_t kPooledBytes = 64 << 20;

 private:
  struct Queued {
    TaskId id;
    Task task;
  };

  void RunWorker();
  void RunTimers();
  // Takes the next task a worker may start off its queue; false when there is none.
  bool TakeLocked(Queued* out, bool* blocking);
  // Moves the delayed tasks due at `now` to ready_. Returns how many.
  int MoveDueLocked(int64_t now);

  const int max_blocking_;

  std::mutex mu_;
  std::condition_variable work_cv_;   // idle workers wait here, without a timeout
  std::condition_variable timer_cv_;  // only the timer thread waits here
  // All below guarded by mu_.
  std::deque<Queued> ready_;     // short tasks and due delayed ones, oldest first
  std::deque<Queued> blocking_;  // blocking tasks not started, oldest first
  int blocking_running_ = 0;
  std::map<std::pair<int64_t, TaskId>, Task> delayed_;  // by (deadline, id)
  std::unordered_map<TaskId, int64_t> deadlines_;       // of the tasks in delayed_
  TaskId next_id_ = 1;
  bool stopping_ = false;

  std::vector<std::thread> workers_;
  std::thread timer_thread_;

  std::mutex pool_mu_;
  std::vector<std::vector<uint8_t>> pool_;  // guarded by pool_mu_
  size_t pooled_bytes_ = 0;                 // guarded by pool_mu_
};

}  // namespace sluice::storage
