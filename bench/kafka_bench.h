// `sluice bench kafka`: the broker's produce and consume rates and its produce latency at
// a fixed rate, measured with librdkafka (as Apache Kafka's kafka-producer-perf-test and
// kafka-consumer-perf-test do with the Java client), beside the loopback TCP rate that
// iperf3 measures in the same run (docs/benchmarks.md: every figure beside its same-run reference).
// By default the bench starts its own `sluice serve` as a child process; --bootstrap points it at a
// running broker. With --cluster N it runs a single broker's acks=1 produce and consume as
// the reference, then starts etcd and N `sluice serve --etcd` brokers and measures
// replication factor N with acks=all, a failover phase (leaders SIGKILLed under load) and
// the memory and file descriptors of idle replicas (kafka_cluster_bench.h). See
// bench/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::bench {

struct KafkaBenchOptions {
  std::string bootstrap;  // HOST:PORT of a running broker; empty: start `sluice serve`
  // The own broker keeps its data in <data_dir>/run-<pid>/data, removed at the end;
  // empty: a new directory under $TMPDIR (or /tmp).
  std::string data_dir;
  std::string sluice_binary = "/proc/self/exe";  // what the own broker runs
  // Created with `partitions` when missing. Empty: sluice-bench-<pid>-<time>, created and
  // deleted again by the bench.
  std::string topic;
  // --partitions N...: the phases run on a topic of each count in turn (a named --topic
  // gets "-p<N>" appended when there are several), each JSON line saying which; the later
  // counts' lines compare with the first's (vs_first_partitions).
  std::vector<int> partitions_list = {16};
  int partitions = 16;  // the count running now (set from partitions_list)
  int64_t records = 0;  // produce phase; 0: 5,000,000 (100,000 with quick)
  int record_size = 0;  // value bytes, keys null; 0: 256 (4096 with --tiered)
  // --acks A...: the produce and latency phases run with each in turn ("1" before "all",
  // so acks=all's lines compare with acks=1's: vs_acks_1); the consume phase once per
  // topic, after the first produce.
  std::vector<std::string> acks_list = {"1", "all"};
  std::string acks = "1";  // the value running now (set from acks_list)
  std::string compression = "none";
  // Records/s the latency phase holds; 0: 100,000 (20,000 with --cluster, where three
  // brokers and the client share the cores and every record is written three times).
  int64_t latency_rate = 0;
  int64_t latency_records = 0;  // 0: 5 s worth at latency_rate (1 s with quick)
  int iperf_seconds = 0;        // loopback reference length; 0: 3 (1 with quick)
  std::vector<std::string> phases = {"produce", "consume", "latency"};
  std::vector<std::string> producer_config;  // extra librdkafka properties, "name=value"
  std::vector<std::string> consumer_config;
  // Transactions instead of the phases above: `produce_idempotent` (acks=all,
  // enable.idempotence) and `produce_txn` (the same producer with a transactional.id,
  // committing every `commit_interval_ms`, as Kafka Streams commits), then a
  // read_committed consumer that must read back exactly the records of both.
  bool transactions = false;
  // --tls: the own broker gets a PLAINTEXT and a SASL_SSL listener (a certificate made for
  // the run; SCRAM-SHA-256; the cipher fixed to AES-128-GCM), and the phases run on each in
  // turn, every JSON line saying which ("tls": true|false; docs/design/0019-security.md).
  bool tls = false;
  // --tiered (kafka_tiered_bench.h): a consumer reading an old range of a tiered topic from
  // S3, beside the S3 GET bandwidth; instead of the phases above.
  bool tiered = false;
  int commit_interval_ms = 100;
  // --cluster N (kafka_cluster_bench.h): 0 = a single broker, as above; else N brokers
  // (at least 3: replication factor 3 with min.insync.replicas 2) and etcd.
  int cluster = 0;
  std::string etcd_binary = "/usr/bin/etcd";
  int session_timeout_ms = 2000;  // the brokers' cluster.session_timeout
  int failover_kills = 0;         // 0: 10 (2 with quick)
  int64_t failover_rate = 0;      // records/s the failover load holds; 0: 10,000
  int idle_partitions = -1;       // idle replicas phase; -1: 1000 (60 with quick); 0: skip
  bool quick = false;             // small sizes for demos and smoke tests
  bool json = false;              // one JSON object per phase on stdout instead of a table
};

// Runs the phases and prints the table (or JSON lines) on stdout; progress and errors go
// to stderr. Returns 0, or 1 after an error: bad options, a broker that does not start or
// stop cleanly (exit status 0 after SIGTERM), a failed delivery, or a consume phase that
// did not read back exactly the records produced, up to every partition's end offset.
int RunKafkaBench(const KafkaBenchOptions& options);

// `sluice demo`: starts `sluice serve` on a free loopback port with a temporary data
// directory, runs this bench against it in quick mode on topic "demo" (which it creates,
// produces to and consumes back), then stops the broker with SIGTERM and checks that it
// exits with status 0. Says what it does at each step. Returns 0 or 1.
int RunKafkaDemo(const KafkaBenchOptions& options);

}  // namespace sluice::bench
