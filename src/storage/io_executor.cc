#include "storage/io_executor.h"

#include "base/clock.h"

namespace sluice::storage {

IoExecutor::IoExecutor(int threads) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

IoExecutor::~IoExecutor() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void IoExecutor::Submit(Task task) { SubmitAt(0, std::move(task)); }

IoExecutor::TaskId IoExecutor::SubmitAt(int64_t deadline_ns, Task task) {
  TaskId id;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    queue_.emplace(std::make_pair(deadline_ns, id), std::move(task));
    deadlines_.emplace(id, deadline_ns);
  }
  cv_.notify_one();
  return id;
}

bool IoExecutor::Cancel(TaskId id) {
  std::lock_guard lock(mu_);
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return false;
  queue_.erase({it->second, id});
  deadlines_.erase(it);
  return true;
}

std::vector<uint8_t> IoExecutor::TakeBuffer() {
  std::lock_guard lock(pool_mu_);
  if (pool_.empty()) return {};
  std::vector<uint8_t> b = std::move(pool_.back());
  pool_.pop_back();
  pooled_bytes_ -= b.capacity();
  b.clear();
  return b;
}

void IoExecutor::ReturnBuffer(std::vector<uint8_t> buffer) {
  if (buffer.capacity() == 0) return;
  std::lock_guard lock(pool_mu_);
  if (pooled_bytes_ + buffer.capacity() > kPooledBytes) return;  // freed here
  pooled_bytes_ += buffer.capacity();
  pool_.push_back(std::move(buffer));
}

void IoExecutor::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (queue_.empty()) {
      if (stopping_) return;
      cv_.wait(lock);
      continue;
    }
    auto it = queue_.begin();
    int64_t deadline = it->first.first;
    if (deadline > 0) {
      int64_t now = MonotonicNanos();
      if (deadline > now) {
        if (stopping_) {
          // Delayed tasks are dropped at shutdown; due ones still run above.
          queue_.clear();
          deadlines_.clear();
          return;
        }
        cv_.wait_for(lock, std::chrono::nanoseconds(deadline - now));
        continue;
      }
    }
    Task task = std::move(it->second);
    deadlines_.erase(it->first.second);
    queue_.erase(it);
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace sluice::storage
