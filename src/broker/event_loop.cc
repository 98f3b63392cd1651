// EventLoop: epoll, a timer heap and an eventfd-woken task queue. See event_loop.h.
#include "broker/event_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/loggers.h"

namespace sluice::broker {
namespace {

constexpr int kMaxEvents = 256;

}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::Create() {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return ErrnoError("epoll_create1", "", errno);
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake < 0) {
    int err = errno;
    ::close(ep);
    return ErrnoError("eventfd", "", err);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // nullptr marks the wake-up fd
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, wake, &ev) != 0) {
    int err = errno;
    ::close(wake);
    ::close(ep);
    return ErrnoError("epoll_ctl(ADD eventfd)", "", err);
  }
  return std::unique_ptr<EventLoop>(new EventLoop(ep, wake));  // private constructor
}

EventLoop::EventLoop(int epoll_fd, int wake_fd) : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {
  owner_.store(std::this_thread::get_id());
}

EventLoop::~EventLoop() {
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

Status EventLoop::Add(int fd, uint32_t events, IoCallback cb) {
  if (entries_.count(fd) != 0) return AlreadyExistsError("fd {} is already registered", fd);
  auto entry = std::make_unique<Entry>(Entry{fd, std::move(cb)});
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = entry.get();
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    return ErrnoError("epoll_ctl(ADD)", fmt::format("fd {}", fd), errno);
  }
  entries_.emplace(fd, std::move(entry));
  return Status::OK();
}

Status EventLoop::Modify(int fd, uint32_t events) {
  auto it = entries_.find(fd);
  if (it == entries_.end()) return NotFoundError("fd {} is not registered", fd);
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = it->second.get();
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) {
    return ErrnoError("epoll_ctl(MOD)", fmt::format("fd {}", fd), errno);
  }
  return Status::OK();
}

void EventLoop::Remove(int fd) {
  auto it = entries_.find(fd);
  if (it == entries_.end()) return;
  // Fails only when the fd was already closed, which removed it from epoll anyway.
  (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  it->second->removed = true;
  retired_.push_back(std::move(it->second));
  entries_.erase(it);
}

EventLoop::TimerId EventLoop::RunAfter(int64_t ms, Task fn) {
  TimerId id = next_timer_id_++;
  int64_t deadline = MonotonicNanos() + std::max<int64_t>(ms, 0) * 1'000'000;
  timers_.emplace(id, std::move(fn));
  timer_heap_.push_back({deadline, id});
  std::push_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
  return id;
}

bool EventLoop::Cancel(TimerId id) {
  if (timers_.erase(id) == 0) return false;
  // Cancelled entries stay in the heap until due; rebuild when they dominate it, so
  // many cancelled long timers (fetch long polls) cannot pile up.
  if (timer_heap_.size() > 64 && timer_heap_.size() > 2 * timers_.size()) {
    std::erase_if(timer_heap_, [this](const Timer& t) { return timers_.count(t.id) == 0; });
    std::make_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
  }
  return true;
}

void EventLoop::Post(Task fn) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(fn));
  }
  // A non-empty queue already has a wake-up on its way (or is about to be drained).
  if (was_empty) Wake();
}

void EventLoop::Stop() {
  stop_.store(true);
  Wake();
}

void EventLoop::Wake() {
  uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the loop will wake anyway.
  (void)!::write(wake_fd_, &one, sizeof(one));
}

int EventLoop::NextTimeoutMs() const {
  if (timer_heap_.empty()) return -1;
  int64_t wait_ns = timer_heap_.front().deadline_ns - MonotonicNanos();
  if (wait_ns <= 0) return 0;
  // Round up: waking a little late is fine, waking early spins.
  int64_t ms = (wait_ns + 999'999) / 1'000'000;
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

void EventLoop::RunTimers() {
  int64_t now = MonotonicNanos();
  while (!timer_heap_.empty() && timer_heap_.front().deadline_ns <= now && !stop_.load()) {
    std::pop_heap(timer_heap_.begin(), timer_heap_.end(), std::greater<>());
    TimerId id = timer_heap_.back().id;
    timer_heap_.pop_back();
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;  // cancelled
    Task fn = std::move(it->second);
    timers_.erase(it);
    fn();
  }
}

void EventLoop::RunPosted() {
  std::vector<Task> tasks;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    tasks.swap(posted_);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (stop_.load()) {
      // Keep the rest, in order, ahead of anything posted meanwhile; they are dropped
      // with the loop unless Run() is called again.
      std::lock_guard<std::mutex> lock(post_mu_);
      posted_.insert(posted_.begin(),
                     std::make_move_iterator(tasks.begin() + static_cast<ptrdiff_t>(i)),
                     std::make_move_iterator(tasks.end()));
      return;
    }
    tasks[i]();
  }
}

void EventLoop::Run() {
  owner_.store(std::this_thread::get_id());
  epoll_event events[kMaxEvents];
  while (!stop_.load()) {
    int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, NextTimeoutMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      SLUICE_LOG(kLog, kError, "epoll_wait failed: {}; the loop stops",
                 ErrnoError("epoll_wait", "", errno).message());
      break;
    }
    for (int i = 0; i < n && !stop_.load(); ++i) {
      auto* entry = static_cast<Entry*>(events[i].data.ptr);
      if (entry == nullptr) {
        uint64_t count;
        (void)!::read(wake_fd_, &count, sizeof(count));
        continue;
      }
      if (!entry->removed) entry->cb(events[i].events);
    }
    RunTimers();
    RunPosted();
    retired_.clear();
  }
  stop_.store(false);  // Run() may be called again
}

}  // namespace sluice::broker
