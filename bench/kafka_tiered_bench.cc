// `sluice bench kafka --tiered`. See kafka_tiered_bench.h.
#include "bench/kafka_tiered_bench.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "bench/bench_util.h"
#include "bench/kafka_phases.h"
#include "bench/machine_info.h"
#include "bench/query_lake.h"
#include "kafka/client/admin.h"
#include "lake/storage.h"

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;
namespace kc = kafka::client;
using namespace kafka_phases;  // NOLINT(google-build-using-namespace)
using namespace std::chrono_literals;

constexpr uint64_t kProbeBytes = 256ULL << 20;
constexpr int kProbeRepeats = 3;
constexpr int kProbeStreams = 8;

// The base offset of each local segment of `dir` (a partition's directory), in order.
std::vector<int64_t> LocalSegments(const std::string& dir) {
  std::vector<int64_t> bases;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() == 24 && name.ends_with(".log"))
      bases.push_back(std::stoll(name.substr(0, 20)));
  }
  std::sort(bases.begin(), bases.end());
  return bases;
}

}  // namespace

Status RunTieredBench(const KafkaBenchOptions& options) {
  const char* bucket = std::getenv("SLUICE_S3_BUCKET");
  if (bucket == nullptr || *bucket == 0) {
    return InvalidArgumentError(
        "--tiered needs an S3 bucket: set SLUICE_S3_BUCKET and the AWS_* variables (or run "
        "under tests/integration/s3/with-rgw.sh BUCKET)");
  }
  if (!options.bootstrap.empty() || options.cluster > 0 || options.tls || options.transactions) {
    return InvalidArgumentError(
        "--tiered runs its own single broker: not with --bootstrap, --cluster, --tls or "
        "--transactions");
  }
  Result<lake::S3Settings> s3 = lake::CurrentS3Settings();
  if (!s3.ok()) return InvalidArgumentError("--tiered: {}", s3.status().message());
  const std::string endpoint = s3->options.endpoint;
  KafkaBenchOptions o = options;
  o.partitions = o.partitions_list.front();
  o.acks = "all";
  const uint64_t range_bytes = o.quick ? 200'000'000 : 2'000'000'000;
  const uint64_t segment_bytes = o.quick ? 8ULL << 20 : 64ULL << 20;
  ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Create(o.data_dir, "kafka-tiered"));
  const std::string root =
      fmt::format("s3://{}/sluice-bench-tiered/run-{}", bucket, static_cast<int>(::getpid()));
  const std::string config_path = work->path() + "/sluice.yaml";
  RETURN_IF_ERROR(
      WriteTextFile(config_path, fmt::format("tiered_storage:\n  bucket: {}\n"
                                             "s3:\n  cache_dir: {}/cache\n"
                                             "storage:\n  retention_check_interval: 1s\n",
                                             root, work->path())));
  const std::string data_dir = work->path() + "/data";
  ASSIGN_OR_RETURN(std::unique_ptr<BrokerProcess> broker,
                   BrokerProcess::Start(
                       o.sluice_binary, data_dir, work->path() + "/broker",
                       {"--kafka-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--pg-addr",
                        "off", "--schema-registry-addr", "off", "--config", config_path}));
  auto with_broker = [&](Status st) {
    if (st.ok()) return st;
    Status dead = broker->CheckAlive();
    return dead.ok() ? st : Status(st.code(), st.message() + "\n" + dead.message());
  };
  ASSIGN_OR_RETURN(Settings s, MakeSettings(o, broker->address()));
  s.topic = "sluice-bench-tiered";
  s.consume_min_seconds = 0;  // one pass: a second would read the cache
  s.producer["acks"] = "all";
  // Each record to a random partition (not librdkafka's sticky batches of one partition),
  // so that every partition gets its share of the range.
  s.producer["sticky.partitioning.linger.ms"] = "0";
  // librdkafka's default per-partition fetch size (the other phases take 512 KiB): the
  // producer's batches reach its batch.size of 1 MB with 4 KiB records, and a batch larger
  // than a partition's limit is sent only first in a response (Kafka's rule), so at 512 KiB
  // every response would carry one partition.
  s.consumer["fetch.message.max.bytes"] = "1048576";
  // The range, and a segment and a half per partition more: what stays local (a segment and
  // the active one's part).
  s.records = static_cast<int64_t>((range_bytes + 3 * segment_bytes * o.partitions / 2) /
                                   static_cast<uint64_t>(o.record_size));
  const ServerPids servers{{broker->pid()}, -1};
  MachineInfo machine = GetMachineInfo();
  const double load = LoadAverage1m();
  Progress progress;

  ASSIGN_OR_RETURN(std::unique_ptr<kc::Admin> admin,
                   kc::Admin::Create({{"bootstrap.servers", broker->address()}}));
  bool created = false;
  ASSIGN_OR_RETURN(s.partitions,
                   EnsureTopic(admin.get(), s, &created, 1,
                               {{"remote.storage.enable", "true"},
                                {"segment.bytes", std::to_string(segment_bytes)},
                                {"local.retention.bytes", std::to_string(segment_bytes)}}));
  progress.Show(fmt::format("tiered: produce {} records ...", s.records));
  Result<PhaseResult> produced = RunProduce(s, servers);
  progress.Clear();
  if (!produced.ok()) return with_broker(produced.status());

  // Uploaded and gone from the disk: at most the local segment and the active one left;
  // the range read is everything before them.
  progress.Show("tiered: waiting for the uploads and the local deletions ...");
  std::vector<int64_t> local_start(static_cast<size_t>(s.partitions), 0);
  const auto deadline = std::chrono::steady_clock::now() + 20min;
  for (int p = 0; p < s.partitions; ++p) {
    const std::string dir = fmt::format("{}/{}-{}", data_dir, s.topic, p);
    while (true) {
      std::vector<int64_t> bases = LocalSegments(dir);
      if (bases.size() <= 2 && !bases.empty()) {
        local_start[static_cast<size_t>(p)] = bases.front();
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return with_broker(UnavailableError(
            "partition {}: {} local segments after 20 minutes: not uploaded and deleted", p,
            bases.size()));
      }
      std::this_thread::sleep_for(200ms);
    }
  }
  // The range is old: nothing of its writing is still on its way to the disk (the broker's
  // local segments, the store's own files) when it is read, as for data written long ago.
  progress.Show("tiered: syncing the disks ...");
  ::sync();
  progress.Clear();

  progress.Show("tiered_fetch: reading the old range from S3 ...");
  std::vector<int64_t> start(static_cast<size_t>(s.partitions), 0);
  Result<PhaseResult> read = RunConsume(s, start, local_start, servers);
  progress.Clear();
  if (!read.ok()) return with_broker(read.status());
  read->phase = "tiered_fetch";
  read->acks = "all";
  read->partitions = s.partitions;

  // The reference: the same S3 client reading an object by the object cache's ranges.
  progress.Show("tiered: measuring the S3 GET bandwidth ...");
  const ObjectStore store = FindObjectStore(endpoint);
  ASSIGN_OR_RETURN(std::unique_ptr<S3Probe> probe,
                   S3Probe::Create(root, kProbeBytes, work->path(), store));
  ASSIGN_OR_RETURN(S3Bandwidth bw, MeasureS3Bandwidth(*probe, kProbeRepeats, kProbeStreams));
  probe.reset();
  progress.Clear();

  const double ratio = bw.single_median() > 0 ? read->mb_per_s() / bw.single_median() : 0;
  if (o.json) {
    Loopback none;
    none.note = "not measured (--tiered compares with the S3 GET bandwidth)";
    Json j = PhaseJson(*read, s, o, machine, load, "own", 1, 1, "all", none);
    j["s3_get_mb_per_s"] = Round(bw.single_median(), 1);
    j["s3_get_parallel_mb_per_s"] = Round(bw.parallel_median(), 1);
    j["s3_get_streams"] = bw.streams;
    j["vs_s3_get"] = Round(ratio, 3);
    j["segment_bytes"] = segment_bytes;
    j["object_store"] = store.description;
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print(
        "sluice bench kafka --tiered: a consumer reading {} old records ({:.0f} MB of records,\n"
        "every segment of them in S3, none on the broker's disk) with librdkafka {}\n"
        "  broker: {} (pid {}), tiered_storage {} (segments copied into tiered_storage's\n"
        "  default cache: memory when /dev/shm has room for its 4 GiB; disks synced first)\n"
        "  S3: {} ({})\n  machine: {}, {} cores, "
        "load {:.2f}; commit {}\n\n",
        read->records, static_cast<double>(read->bytes) / kMB, kc::LibraryVersion(),
        broker->address(), broker->pid(), root, endpoint, store.description, machine.cpu_model,
        machine.cores, load, SourceCommit());
    fmt::print("  {:<14} {:>12} {:>10} {:>10}\n", "phase", "records/s", "MB/s", "seconds");
    fmt::print("  {:<14} {:>12.0f} {:>10.1f} {:>10.2f}\n", "tiered_fetch", read->records_per_s(),
               read->mb_per_s(), read->seconds);
    fmt::print("  {:<14} {:>12} {:>10.1f}   (one stream, {} MiB object, median of {})\n", "S3 GET",
               "-", bw.single_median(), kProbeBytes >> 20, kProbeRepeats);
    fmt::print("  {:<14} {:>12} {:>10.1f}   ({} streams)\n", "S3 GET", "-", bw.parallel_median(),
               bw.streams);
    fmt::print("\n  tiered_fetch / S3 GET (one stream): {:.2f}x; {}\n", ratio, read->check);
  }
  std::fflush(stdout);
  // Deleting the topic deletes its objects (the uploader's thread, before the stop).
  if (Status st = admin->DeleteTopic(s.topic, kAdminTimeout); !st.ok()) {
    fmt::print(stderr, "sluice bench kafka --tiered: deleting the topic: {}\n", st.ToString());
  }
  std::this_thread::sleep_for(3s);
  admin.reset();
  return broker->Stop();
}

}  // namespace sluice::bench
