// Background (background.h).
#include "base/background.h"

#include <pthread.h>

#include <utility>

namespace sluice {

Background::Background(std::string name) {
  if (name.size() > 15) name.resize(15);
  thread_ = std::thread([this] { Loop(); });
  pthread_setname_np(thread_.native_handle(), name.c_str());
}

Background::~Background() {
  Wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void Background::Start(std::function<void()> job) {
  Wait();
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    running_ = true;
  }
  started_ = true;
  work_.notify_one();
}

void Background::Wait() {
  if (!started_) return;
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return !running_; });
  started_ = false;
}

void Background::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [this] { return stopping_ || running_; });
    if (running_) {
      std::function<void()> job = std::move(job_);
      lock.unlock();
      job();
      job = nullptr;  // what the job captured goes before the caller hears it is done
      lock.lock();
      running_ = false;
      done_.notify_all();
      continue;
    }
    return;  // stopping, nothing to run
  }
}

}  // namespace sluice
