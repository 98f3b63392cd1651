// ForkJoin: a few persistent helper threads that run the parts of one job beside the
// caller's thread and are waited for, for work that is split into independent parts and
// must be done before the caller goes on (a pipeline's batch decoded in parts: the
// decoders' `threads` option, docs/design/0023 decision 16).
//
//   ForkJoin fj(1, "sluice-decode");            // one helper: two parts at once
//   fj.Run(2, [&](size_t part) { Decode(part); });  // part 0 here, part 1 on the helper
//
// Lifecycle: made and used by one thread (Run is not reentrant); the destructor stops and
// joins the helpers. A part must not throw.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice {

class ForkJoin {
 public:
  // `helpers` threads, named `name` (at most 15 characters are kept).
  ForkJoin(size_t helpers, std::string name);
  ~ForkJoin();
  ForkJoin(const ForkJoin&) = delete;
  ForkJoin& operator=(const ForkJoin&) = delete;

  size_t helpers() const { return threads_.size(); }

  // Runs part(0) .. part(parts - 1) and returns when all have: part 0 on the calling
  // thread, part i on helper i - 1. `parts` is at most helpers() + 1.
  void Run(size_t parts, const std::function<void(size_t)>& part);

 private:
  void Loop(size_t helper);

  std::mutex mu_;
  std::condition_variable work_;  // helpers wait for a job (or the end)
  std::condition_variable done_;  // the caller waits for the helpers' parts
  const std::function<void(size_t)>* job_ = nullptr;
  size_t job_parts_ = 0;
  uint64_t generation_ = 0;  // one per Run, so a helper runs each job once
  size_t pending_ = 0;       // helpers' parts of the current job not yet done
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sluice
