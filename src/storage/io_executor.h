// IoExecutor: the threads that do the storage engine's blocking work (writes, fdatasync)
// so that the threads that own partitions never block on the disk. A log submits at most
// one job at a time, so its writes stay in order; different logs run in parallel.
//
// Lifecycle: create before the logs that use it, destroy after they are closed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <cstddef>
#include <vector>

namespace sluice::storage {

class IoExecutor {
 public:
  using Task = std::function<void()>;
  using TaskId = uint64_t;

  explicit IoExecutor(int threads);
  ~IoExecutor();  // runs the queued tasks that are due, drops the delayed ones, joins
  IoExecutor(const IoExecutor&) = delete;
  IoExecutor& operator=(const IoExecutor&) = delete;

  // Runs `task` as soon as a thread is free.
  void Submit(Task task);
  // Runs `task` once the monotonic clock reaches `deadline_ns` (MonotonicNanos()).
  TaskId SubmitAt(int64_t deadline_ns, Task task);
  // Removes a delayed task that has not started. False when it already ran or is running.
  bool Cancel(TaskId id);

  int threads() const { return static_cast<int>(threads_.size()); }

  // Write buffers shared by the logs on this executor, so a busy log reuses memory and
  // an idle one holds none. At most kPooledBytes of capacity are kept.
  std::vector<uint8_t> TakeBuffer();
  void ReturnBuffer(std::vector<uint8_t> buffer);
  static constexpr size_t kPooledBytes = 64 << 20;

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_: tasks keyed by (deadline, id); Submit uses deadline 0.
  std::map<std::pair<int64_t, TaskId>, Task> queue_;
  std::map<TaskId, int64_t> deadlines_;
  TaskId next_id_ = 1;
  bool stopping_ = false;
  std::vector<std::thread> threads_;

  std::mutex pool_mu_;
  std::vector<std::vector<uint8_t>> pool_;  // guarded by pool_mu_
  size_t pooled_bytes_ = 0;                 // guarded by pool_mu_
};

}  // namespace sluice::storage
