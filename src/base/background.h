// Background: one persistent helper thread that runs one job at a time while its caller
// goes on, and is waited for before the caller touches what the job uses (the postgres
// sink's rows encoded and sent to the server while the pipeline makes its next batch,
// docs/design/0023 decision 20).
//
//   Background sender("sluice-pg-send");
//   sender.Start([&] { SendRows(rows); });   // runs on the helper
//   ... other work ...
//   sender.Wait();                           // the job is done
//
// Lifecycle: made and used by one thread; Start waits for the previous job first. The
// destructor waits for the job in hand, then stops and joins the helper. A job must not
// throw.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sluice {

class Background {
 public:
  // The helper is named `name` (at most 15 characters are kept).
  explicit Background(std::string name);
  ~Background();
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  // Runs `job` on the helper (after waiting for the previous one).
  void Start(std::function<void()> job);
  // Returns when no job is running or queued.
  void Wait();
  // Whether a job was started and not yet waited for.
  bool busy() const { return started_; }

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable work_;  // the helper waits for a job (or the end)
  std::condition_variable done_;  // the caller waits for the job's end
  std::function<void()> job_;     // set while a job is queued or running
  bool running_ = false;
  bool stopping_ = false;
  bool started_ = false;  // caller's view: Start without Wait since
  std::thread thread_;
};

}  // namespace sluice
