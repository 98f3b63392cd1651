#include "storage/io_executor.h"

#include <algorithm>

#include "base/clock.h"

namespace sluice::storage {

IoExecutor::IoExecutor(int threads) : max_blocking_(std::max(1, threads / 2)) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { RunWorker(); });
  timer_thread_ = std::thread([this] { RunTimers(); });
}

IoExecutor::~IoExecutor() {
  std::map<std::pair<int64_t, TaskId>, Task> dropped;  // destroyed outside the lock
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    MoveDueLocked(MonotonicNanos());
    dropped.swap(delayed_);
    deadlines_.clear();
  }
  work_cv_.notify_all();
  timer_cv_.notify_all();
  timer_thread_.join();
  for (auto& t : workers_) t.join();
}

void IoExecutor::Submit(Task task) {
  {
    std::lock_guard lock(mu_);
    ready_.push_back({next_id_++, std::move(task)});
  }
  work_cv_.notify_one();
}

void IoExecutor::SubmitBlocking(Task task) {
  bool may_start;
  {
    std::lock_guard lock(mu_);
    blocking_.push_back({next_id_++, std::move(task)});
    may_start = blocking_running_ < max_blocking_;
  }
  // Over the limit, the worker that finishes a blocking task starts this one.
  if (may_start) work_cv_.notify_one();
}

IoExecutor::TaskId IoExecutor::SubmitAt(int64_t deadline_ns, Task task) {
  TaskId id;
  bool due = false, earliest = false;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    if (deadline_ns <= MonotonicNanos()) {
      due = true;
      ready_.push_back({id, std::move(task)});
    } else {
      auto it = delayed_.emplace(std::make_pair(deadline_ns, id), std::move(task)).first;
      deadlines_.emplace(id, deadline_ns);
      earliest = it == delayed_.begin();
    }
  }
  if (due) {
    work_cv_.notify_one();
  } else if (earliest) {
    timer_cv_.notify_one();  // the timer thread sleeps until a later deadline
  }
  return id;
}

bool IoExecutor::Cancel(TaskId id) {
  Task doomed;  // destroyed outside the lock
  std::lock_guard lock(mu_);
  if (auto it = deadlines_.find(id); it != deadlines_.end()) {
    auto node = delayed_.extract({it->second, id});
    doomed = std::move(node.mapped());
    deadlines_.erase(it);
    return true;
  }
  // Due and handed to the workers, but perhaps not started yet.
  auto it =
      std::find_if(ready_.begin(), ready_.end(), [id](const Queued& q) { return q.id == id; });
  if (it == ready_.end()) return false;
  doomed = std::move(it->task);
  ready_.erase(it);
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

// The older of the first short task and the first blocking one that may start.
bool IoExecutor::TakeLocked(Queued* out, bool* blocking) {
  bool blocking_ok = !blocking_.empty() && blocking_running_ < max_blocking_;
  if (!ready_.empty() && (!blocking_ok || ready_.front().id < blocking_.front().id)) {
    *out = std::move(ready_.front());
    ready_.pop_front();
    *blocking = false;
    return true;
  }
  if (!blocking_ok) return false;
  *out = std::move(blocking_.front());
  blocking_.pop_front();
  ++blocking_running_;
  *blocking = true;
  return true;
}

int IoExecutor::MoveDueLocked(int64_t now) {
  int moved = 0;
  while (!delayed_.empty() && delayed_.begin()->first.first <= now) {
    auto node = delayed_.extract(delayed_.begin());
    deadlines_.erase(node.key().second);
    ready_.push_back({node.key().second, std::move(node.mapped())});
    ++moved;
  }
  return moved;
}

void IoExecutor::RunWorker() {
  std::unique_lock lock(mu_);
  for (;;) {
    Queued next;
    bool blocking = false;
    if (!TakeLocked(&next, &blocking)) {
      if (stopping_) return;  // everything queued has started
      work_cv_.wait(lock);
      continue;
    }
    lock.unlock();
    next.task();
    next.task = nullptr;  // destroyed outside the lock
    lock.lock();
    if (blocking) {
      --blocking_running_;
      // A blocking task held back by the limit may start now. This worker takes the
      // older of it and the first short task; another one must take the other.
      if (!blocking_.empty() && !ready_.empty()) work_cv_.notify_one();
    }
  }
}

// The only thread that waits with a timeout: it sleeps until the earliest deadline (or
// until an earlier one is submitted) and hands what is due to the workers, one wake-up
// per task. (When every idle worker waited for the next deadline itself, each timer woke
// all of them at once, and they fought over this mutex and the condition variable's
// internal lock while Submit() callers waited.)
void IoExecutor::RunTimers() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (delayed_.empty()) {
      timer_cv_.wait(lock);
      continue;
    }
    int64_t now = MonotonicNanos();
    int64_t next = delayed_.begin()->first.first;
    if (next > now) {
      timer_cv_.wait_for(lock, std::chrono::nanoseconds(next - now));
      continue;
    }
    int moved = MoveDueLocked(now);
    lock.unlock();
    for (int i = 0; i < moved; ++i) work_cv_.notify_one();
    lock.lock();
  }
}

}  // namespace sluice::storage
