// BrokerOptions: how `sluice serve` configures its Broker (filled from the YAML config
// and flags by serve_config.cc; docs/config.md names every key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "broker/authorizer.h"
#include "broker/group_coordinator.h"
#include "broker/listeners_config.h"
#include "broker/remote_store.h"
#include "broker/sasl.h"
#include "broker/topic_store.h"
#include "compaction/cleaner.h"
#include "storage/env.h"
#include "storage/log.h"

namespace sluice::broker {

struct InterBrokerSecurity;  // inter_broker_connection.h

// The transaction coordinator's settings (docs/design/0016-transactions.md).
struct TxnLimits {
  int32_t max_timeout_ms = 900000;                    // transaction.max.timeout.ms
  int64_t id_expiration_ms = 7LL * 24 * 3600 * 1000;  // transactional.id.expiration.ms
  // transaction.abort.timed.out.transaction.cleanup.interval.ms
  int64_t abort_check_interval_ms = 10000;
};

// Cluster mode (docs/design/0018-cluster.md): several brokers keep their metadata in etcd.
// With no etcd endpoint the broker is the single node it always was.
struct ClusterOptions {
  // The etcd endpoints, each http://HOST:PORT (the v3 JSON gateway); empty: no cluster.
  std::vector<std::string> etcd;
  int32_t node_id = -1;  // this broker's id in the cluster (0 or more)
  // Where the other brokers reach this one (replica fetches, the controller): defaults to
  // the advertised address. The Kafka listener serves them; nothing else listens there.
  std::string inter_broker_host;
  int32_t inter_broker_port = 0;  // 0: the advertised port, once known
  // How this broker speaks to that listener on the others (kafka.inter_broker_listener);
  // null: plaintext.
  std::shared_ptr<const InterBrokerSecurity> inter_broker_security;
  // How long etcd keeps a dead broker's lease (failover follows from it); etcd's shortest
  // lease is 2 s.
  int64_t session_timeout_ms = 6000;
  std::string name = "sluice";  // every key is under /sluice/<name>/
  // How long a stopping broker waits for the controller to move its leaderships away
  // (a controlled shutdown) before it stops anyway; 0: no controlled shutdown.
  int64_t controlled_shutdown_timeout_ms = 10'000;
  // Replication (Kafka's keys and defaults; ReplicaManagerOptions).
  int64_t replica_lag_time_max_ms = 30'000;    // replica.lag.time.max.ms
  int32_t replica_fetch_max_bytes = 1 << 20;   // replica.fetch.max.bytes (per partition)
  int32_t replica_fetch_wait_max_ms = 500;     // replica.fetch.wait.max.ms
  int64_t replica_fetch_backoff_ms = 1'000;    // replica.fetch.backoff.ms
  int32_t replica_socket_timeout_ms = 30'000;  // replica.socket.timeout.ms
  bool replica_follower_direct_writes = true;  // replica.follower.direct.writes
  // The coordinators' internal topics as the controller creates them (Kafka's keys;
  // docs/design/0018-cluster.md, "coordfix"). Once a topic exists its partition count is
  // what the coordinators hash with, whatever these say. The replication factor is capped
  // at the brokers registered at creation.
  int32_t offsets_topic_num_partitions = 16;     // offsets.topic.num.partitions
  int32_t offsets_topic_replication_factor = 3;  // offsets.topic.replication.factor
  int32_t txn_state_log_num_partitions = 16;     // transaction.state.log.num.partitions
  int32_t txn_state_log_replication_factor = 3;  // transaction.state.log.replication.factor
  int32_t txn_state_log_min_isr = 2;             // transaction.state.log.min.isr

  bool enabled() const { return !etcd.empty(); }
};

struct BrokerOptions {
  std::string data_dir;
  // Every file the broker, its logs and its offsets log read and write goes through it
  // (tests put a fault-injecting Env here). Must outlive the broker.
  storage::Env* env = storage::Env::Posix();
  // Where clients are told to connect (Metadata, DescribeCluster): the listen address.
  std::string advertised_host = "127.0.0.1";
  int32_t advertised_port = 9092;
  // kafka.listeners (empty: kafka.addr's one listener): each listener's advertised address
  // answers the requests that came in on it.
  std::vector<KafkaListener> listeners;
  // IoExecutor threads. They spend their time blocked in pwrite and fdatasync, not on a
  // CPU: with fewer threads than partitions, appends queue behind other logs' syncs (with
  // 2 threads and 16 partitions, p99 produce latency was 219 ms; with 16, 34 ms).
  int io_threads = 16;
  // Every partition's flush policy. Under kDurable the high watermark consumers see is
  // the durable end offset; under kInterval (the default) the written end offset.
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kInterval;
  int64_t flush_ms = 100;
  size_t max_open_files = 1024;  // log.max.open.files
  // storage.file_idle_timeout: the file cache closes a descriptor nobody asked for in this
  // long (an idle partition holds none); 0: only max_open_files closes them.
  int64_t file_idle_timeout_ms = 5000;
  TopicConfig topic_defaults;
  // tiered_storage.bucket: where tiered topics' segments go, "s3://bucket/prefix" (no
  // trailing '/'); "" without tiered storage (docs/design/0025-tiered-storage.md).
  std::string tiered_storage_bucket;
  // Its store, made by the composition root (src/app) over the lake's S3 client; null
  // without tiered storage.
  std::shared_ptr<const RemoteStore> remote_store;
  // tiered_storage.remote_fetch_max_wait_ms (Kafka's remote.fetch.max.wait.ms): how long a
  // fetch waits for its reads from tiered storage; past it the fetch answers without them
  // (those partitions empty) while the reads go on into the cache.
  int64_t remote_fetch_max_wait_ms = 500;
  // tiered_storage.chunk_bytes: how much of a remote segment's .log one download brings
  // (design 0025, decision 10); a chunk is cached on its own.
  uint64_t tiered_chunk_bytes = 16 << 20;
  // log.retention.check.interval.ms: how often retention deletes old segments.
  int64_t retention_check_interval_ms = 300'000;
  // log.cleaner.*: the cleaner threads of compacted topics (storage.cleaner.* in YAML).
  compaction::CleanerOptions cleaner;
  // auto.create.topics.enable (off, as in Kafka 4): Metadata for a missing topic creates
  // it with num.partitions partitions when the client allows it.
  bool auto_create_topics = false;
  int32_t num_partitions = 1;
  // SASL/PLAIN and SCRAM-SHA-256 (off by default): when enabled, a connection may send
  // only ApiVersions, SaslHandshake and SaslAuthenticate until it has authenticated.
  SaslConfig sasl;
  // Kafka's ACLs (authorization.*; off by default, as Kafka without an authorizer).
  AuthorizationOptions authorization;
  // The group coordinator's timeouts and limits (its dir, executor, env and files are
  // the broker's: <data-dir>/__consumer_offsets-0).
  GroupCoordinatorOptions groups;
  // The transaction coordinator's limits (<data-dir>/__transaction_state-0).
  TxnLimits transactions;
  // Cluster membership (off unless etcd endpoints are set).
  ClusterOptions cluster;
};

// The node id of the one broker: every partition's leader and the controller.
inline constexpr int32_t kNodeId = 1;

}  // namespace sluice::broker
