// `sluice bench kafka --cluster N` (issue 21's benchmark, docs/design/0018-cluster.md):
// the single broker's acks=1 produce and consume (and idle partitions) as the same-run
// reference; then etcd (one member, data on tmpfs) and N `sluice serve --node-id I --etcd
// ... --inter-broker-addr ...` brokers on this machine, a topic with replication factor 3
// and min.insync.replicas 2, and acks=all produce, consume and latency at a fixed rate; a
// failover phase (a partition's leader SIGKILLed under an idempotent acks=all load,
// restarted and waited for back in every ISR, again and again: the time from each kill to
// the first acknowledged write of that partition on its new leader); and the memory and
// file descriptors of idle replicas. One JSON line per phase with `brokers`,
// `replication_factor` and `acks`, or a table; bench/README.md says what each field is.
#pragma once

#include "base/status.h"
#include "bench/kafka_bench.h"

namespace sluice::bench {

// Runs it; options as KafkaBenchOptions says (`cluster` >= 3; --bootstrap, --topic and
// --transactions are refused). Every child process is stopped (or killed after an error)
// and the work directory and etcd's data removed before it returns.
Status RunClusterBench(const KafkaBenchOptions& options);

}  // namespace sluice::bench
