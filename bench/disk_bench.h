// `sluice bench disk`: the storage engine's append rate beside the raw disk's write rate,
// measured in the same run (docs/benchmarks.md: every figure beside its same-run reference). For
// each flush mode and for one writer and one writer per core, writers append pre-built batches to
// their own PartitionLog; then plain write(2) threads write the same bytes to the same file system.
// The figure that matters is the ratio of the two. See bench/README.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::bench {

struct DiskBenchOptions {
  uint64_t bytes_per_cell = 8ull << 30;  // 8 GiB so the page cache cannot hide the disk
  size_t record_bytes = 256;             // value bytes per record
  int records_per_batch = 64;
  int in_flight = 64;              // appends in flight per writer
  int writers = 0;                 // 0 = one per core (std::thread::hardware_concurrency)
  std::string dir = "bench-data";  // on the disk under test; created and removed
  std::string tmpfs_dir = "/dev/shm/sluice-bench";
  std::vector<std::string> flush = {"interval", "durable", "tmpfs"};
  bool json = false;  // one JSON object per row on stdout instead of a table
};

// Runs every cell (flush mode x {1, N} writers) and prints the table, or JSON lines, on
// stdout as each cell finishes; errors go to stderr. Returns 0, or 1 after an error (bad
// options, a directory that cannot be created, a failed append, not enough free space).
// Leaves no data behind, except after a crash or a signal: then <dir>/run-<pid> remains.
int RunDiskBench(const DiskBenchOptions& options);

}  // namespace sluice::bench
