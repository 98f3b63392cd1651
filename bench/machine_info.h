// What a benchmark ran on: the machine (CPU, cores, memory, kernel) and the file system
// and device under a directory. Benchmarks print this beside every figure because the
// machines they run on are shared and differ (docs/benchmarks.md: every figure beside its same-run
// reference).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace sluice::bench {

struct MachineInfo {
  std::string cpu_model;      // /proc/cpuinfo "model name", or "unknown"
  int cores = 0;              // std::thread::hardware_concurrency
  uint64_t memory_bytes = 0;  // /proc/meminfo MemTotal
  std::string kernel;         // uname: "Linux 6.1.0-18-amd64 x86_64"
};

// The 1-minute load average (/proc/loadavg), or -1 when unknown: other work on a shared
// machine shows here.
double LoadAverage1m();

struct FsInfo {
  std::string path;          // the directory asked about, made absolute
  std::string mount_point;   // the longest /proc/mounts entry that holds it
  std::string fs_type;       // from /proc/mounts ("ext4", "tmpfs", ...)
  std::string device;        // from /proc/mounts ("/dev/nvme0n1p2", "tmpfs")
  std::string device_model;  // /sys/block/<disk>/device/model when known, else empty
  int rotational = -1;       // /sys/block/<disk>/queue/rotational: 1, 0, or -1 unknown
  uint64_t total_bytes = 0;  // statfs
  uint64_t free_bytes = 0;   // statfs, available to this user
  bool is_tmpfs = false;     // statfs f_type is TMPFS_MAGIC
};

// Never fails: fields it cannot read stay "unknown" or zero.
MachineInfo GetMachineInfo();

// `path` must exist. Fails when it cannot be stat'ed.
Result<FsInfo> GetFsInfo(const std::string& path);

// Free bytes (for this user) on the file system holding `path`.
Result<uint64_t> FreeBytes(const std::string& path);

// "1.5 GiB", "256 MiB", "17 KiB", "512 B".
std::string FormatBinaryBytes(uint64_t bytes);

}  // namespace sluice::bench
