// `sluice bench query --storage s3` (issue 26): the bench's Iceberg tables copied to S3 byte
// for byte, the S3 GET bandwidth measured through the lake's own client, the object store
// named for the header, and the one-shot child that runs a query through the query
// server's engine (query::QueryEngine: the lake planner, the S3 object cache, the
// partitioned rewrites) several times in one process, reporting the object cache's
// downloads after each. How the figures are read: bench/README.md, "--storage s3".
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/query_engine.h"

namespace sluice::lake {
class Storage;
}

namespace sluice::bench {

// The S3 copy of a dataset: tables bench.sales and bench.products under `warehouse`, whose
// data files are the local tables' files uploaded unchanged (same bytes, same layout) and
// whose manifests carry the local manifests' entries (counts, sizes, column bounds) with
// S3 locations, committed by lake::Table as any S3 table is.
struct S3Copy {
  std::string warehouse;  // <--s3-warehouse>/<the dataset directory's name>
  bool uploaded = false;  // in this run (else found complete: its complete.json matched)
  double upload_s = 0;
  uint64_t bytes = 0;  // the data files of both tables
  int files = 0;
};

// Finds the S3 copy of `local` under `s3_warehouse` complete (complete.json there, naming the
// same files and sizes), or makes it: removes whatever an interrupted copy left under the
// prefix, uploads the data files, creates the two tables with the local schemas (checked to
// get the same field ids) and appends the files in one snapshot each, then writes
// complete.json. Progress on stderr.
Result<S3Copy> EnsureS3Copy(const QueryDataset& local, const std::string& s3_warehouse);

// What serves `endpoint`. For a loopback endpoint, the process listening on its port, found
// through /proc ("radosgw, pid 1234: radosgw -n client.rgw.a"), and, when it runs with a
// CEPH_CONF, the other processes of that Ceph cluster (its OSD and monitor), whose CPU is
// the store's too; else "not on this machine" and no pids. Never fails.
struct ObjectStore {
  std::string description;
  std::vector<pid_t> pids;
};
ObjectStore FindObjectStore(const std::string& endpoint);

// Summed CPU seconds of `pids` (those gone count 0); -1 when `pids` is empty.
double CpuSecondsOf(const std::vector<pid_t>& pids);
// Busy CPU seconds of the whole machine (all cores) from /proc/stat, or -1.
double MachineBusyCpuSeconds();

// CPU seconds spent while something ran: by this process, by a child it ran (set by the
// caller), by the object store's processes (ObjectStore::pids) and by the whole machine
// (/proc/stat), over `wall_s`; -1 unknown.
struct CpuSplit {
  double wall_s = 0;
  double self_s = -1;
  double child_s = -1;
  double store_s = -1;
  double machine_s = -1;
  // The machine's CPU used by none of those: other work on a shared machine.
  double other_s() const;
};

// Measures a CpuSplit from its construction to AddTo (which adds; call it once). Owned by
// one thread.
class CpuMeter {
 public:
  explicit CpuMeter(const ObjectStore& store);
  void AddTo(CpuSplit& split) const;

 private:
  const ObjectStore& store_;
  std::chrono::steady_clock::time_point start_;
  double self_, store_cpu_, machine_;
};

// The S3 GET bandwidth seen through the lake's client (lake::StorageFor: the same client,
// settings and 32 MiB ranged GETs the object cache downloads with). MB = 10^6 bytes.
struct S3Bandwidth {
  std::string object;  // its location
  uint64_t object_bytes = 0;
  int streams = 0;
  std::vector<double> single_mb_per_s;    // one per download
  std::vector<double> parallel_mb_per_s;  // one per round of `streams` downloads
  double upload_mb_per_s = 0;
  CpuSplit single_cpu, parallel_cpu;  // over all the rounds of each
  double single_median() const;
  double parallel_median() const;
};

// An object of random bytes under `prefix` to measure the bandwidth with, read whole by one
// or several streams. Lifecycle: Create uploads it (as the lake uploads data files), the
// destructor deletes it. Owned by one thread.
class S3Probe {
 public:
  static Result<std::unique_ptr<S3Probe>> Create(const std::string& prefix, uint64_t bytes,
                                                 const std::string& work_dir,
                                                 const ObjectStore& store);
  ~S3Probe();
  S3Probe(const S3Probe&) = delete;
  S3Probe& operator=(const S3Probe&) = delete;

  // Reads the object once, whole, by `streams` readers taking its 32 MiB ranges in turn
  // (1: one after the other, as the object cache downloads one file; 8: as it downloads
  // a plan's files, 8 at once); MB/s. Adds the CPU it cost to `cpu` when given.
  Result<double> Read(int streams, CpuSplit* cpu) const;

  const std::string& location() const { return location_; }
  uint64_t bytes() const { return bytes_; }
  double upload_mb_per_s() const { return upload_mb_per_s_; }

 private:
  S3Probe(const lake::Storage& storage, std::string location, uint64_t bytes,
          const ObjectStore& store)
      : storage_(storage), location_(std::move(location)), bytes_(bytes), store_(store) {}
  const lake::Storage& storage_;
  std::string location_;
  uint64_t bytes_;
  const ObjectStore& store_;
  double upload_mb_per_s_ = 0;
};

// `repeats` reads by one stream, then `repeats` by `streams`.
Result<S3Bandwidth> MeasureS3Bandwidth(const S3Probe& probe, int repeats, int streams);

// The lake child (`sluice bench query-child --warehouse W`): `sql` (naming
// lake.bench.sales / lake.bench.products) run `repeat` times in one process through
// query::QueryEngine over `warehouse`, with a DuckDB of `threads`, `memory_limit_bytes` and
// `temp_dir`; an S3 warehouse's object cache in `s3_cache_dir`. Each repeat runs as the
// server runs a simple query, timed in two parts: `plan_s`, QueryEngine::Plan with steps
// allowed (the lake planning: metadata, manifests, pruning and, on S3, the fetch of the
// files the plan keeps; then the steps of a partitioned rewrite, DuckDB's work, when one
// applies), and `run_s`, the planned statement run by DuckDB. Prints one JSON line:
// {"elapsed_s", "columns", "answer", "repeats": [{"elapsed_s", "plan_s", "run_s",
// "downloads", "downloaded_bytes", "hits", "cache_bytes"}...]} (cache fields: the object
// cache's stats() grown during that repeat; 0 for a local warehouse). Returns 0, or 1 with
// the error on stderr (also when the repeats' answers differ).
struct LakeChildOptions {
  std::string query;  // its name, for errors
  std::string sql;
  std::string warehouse;
  std::string s3_cache_dir;
  int repeat = 2;
  int threads = 1;
  int64_t memory_limit_bytes = 0;
  std::string temp_dir;
};
int RunLakeQueryChild(const LakeChildOptions& options);

}  // namespace sluice::bench
