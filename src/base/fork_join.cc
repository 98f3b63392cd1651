// ForkJoin (fork_join.h).
#include "base/fork_join.h"

#include <pthread.h>

namespace sluice {

ForkJoin::ForkJoin(size_t helpers, std::string name) {
  if (name.size() > 15) name.resize(15);
  threads_.reserve(helpers);
  for (size_t i = 0; i < helpers; ++i) {
    threads_.emplace_back([this, i] { Loop(i); });
    pthread_setname_np(threads_.back().native_handle(), name.c_str());
  }
}

ForkJoin::~ForkJoin() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void ForkJoin::Run(size_t parts, const std::function<void(size_t)>& part) {
  if (parts == 0) return;
  if (parts > threads_.size() + 1) parts = threads_.size() + 1;
  if (parts > 1) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &part;
      job_parts_ = parts;
      pending_ = parts - 1;
      ++generation_;
    }
    work_.notify_all();
  }
  part(0);
  if (parts == 1) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ForkJoin::Loop(size_t helper) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const size_t index = helper + 1;
    if (index >= job_parts_) continue;  // this job has fewer parts than helpers
    const std::function<void(size_t)>* job = job_;
    lock.unlock();
    (*job)(index);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace sluice
