// SluiceProcess: `sluice serve` as a child process of a C++ integration test, on
// 127.0.0.1 and a port the kernel picks, with its own data directory and optional YAML
// config. Its stdout and stderr go to files in a temporary directory (printed by
// DumpLogs when a test failed).
// Lifecycle: Start, then Stop (SIGTERM) or Kill (SIGKILL); Start again runs it on the same
// data directory. The destructor kills a broker still running (SIGKILL) and removes the
// directory. One thread owns the object.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace sluice::integration {

class SluiceProcess {
 public:
  // `sluice` is the path of the binary; `config_yaml`, when not empty, is written to a
  // file and passed as --config.
  SluiceProcess(std::string sluice, std::string config_yaml);
  // Listening on `kafka_addr` (a fixed HOST:PORT, as a cluster's brokers need), with
  // `extra_args` after the usual ones (e.g. --node-id N --etcd URL).
  SluiceProcess(std::string sluice, std::string config_yaml, std::string kafka_addr,
                std::vector<std::string> extra_args);
  ~SluiceProcess();
  SluiceProcess(const SluiceProcess&) = delete;
  SluiceProcess& operator=(const SluiceProcess&) = delete;

  // Starts the broker and waits (up to `timeout`) for its "serving Kafka on" line.
  // Returns an empty string or what went wrong.
  std::string Start(std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // Sends SIGTERM and waits up to `timeout` for the exit. Returns the exit status, or
  // -1 (after a SIGKILL) when it did not exit in time or died of a signal.
  int Stop(std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // SIGKILL (a machine that died), reaped. Nothing when it is not running.
  void Kill();

  // "127.0.0.1:PORT", valid after Start.
  const std::string& bootstrap() const { return bootstrap_; }
  // The broker's --data-dir (kept across Stop, Kill and Start).
  std::filesystem::path data_dir() const { return dir_ / "data"; }

  // Waits (up to `timeout`) for a line of sluice's stdout matching `regex` and returns
  // its first group, or "" when none came (e.g. the query server's
  // R"(sluice: Postgres wire protocol on (127\.0\.0\.1:[0-9]+))").
  std::string WaitForOutput(const std::string& regex,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

  // Prints the last `lines` lines of the broker's stdout and stderr to stderr.
  void DumpLogs(int lines = 80) const;

 private:
  std::string sluice_;
  std::string config_yaml_;
  std::string kafka_addr_ = "127.0.0.1:0";
  std::vector<std::string> extra_args_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
  std::string bootstrap_;
};

}  // namespace sluice::integration
