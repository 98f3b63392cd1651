// `sluice bench compaction`: the log cleaner's rate and memory. Builds one partition log
// of keyed records (1M records over 10K keys by default, with updates and tombstones),
// reads its closed segments once as the same-run reference (the rate the cleaner's input
// can be read at), cleans the log, checks that exactly the latest value of every live key
// is left, and prints the input MB/s cleaned beside the reference, and the cleaner's peak
// memory (key map + I/O buffers, and the process's RSS growth) beside its configured
// buffer (log.cleaner.dedupe.buffer.size). See bench/README.md.
#pragma once

#include <cstdint>
#include <string>

namespace sluice::bench {

struct CompactionBenchOptions {
  int64_t records = 1'000'000;
  int64_t keys = 10'000;
  int value_bytes = 100;
  int records_per_batch = 100;
  double tombstone_share = 0.02;         // of the records, deletes of a random key
  uint64_t buffer_bytes = 64ull << 20;   // log.cleaner.dedupe.buffer.size for the one thread
  uint64_t segment_bytes = 16ull << 20;  // the log's segment.bytes
  std::string compression = "none";      // of the batches written: none, gzip, snappy, lz4, zstd
  std::string dir;                       // the log goes in <dir>/run-<pid> (default $TMPDIR)
  bool json = false;                     // one JSON line instead of the table
};

// Returns 0, or 1 after an error (printed on stderr), including a wrong cleaning result.
int RunCompactionBench(const CompactionBenchOptions& options);

}  // namespace sluice::bench
