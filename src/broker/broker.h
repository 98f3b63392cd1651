// Broker: the Kafka request dispatcher of `sluice serve`. It decodes each request frame,
// answers the cluster and topic APIs (ApiVersions, Metadata, CreateTopics, DeleteTopics,
// DescribeCluster), the data APIs (Produce, Fetch, ListOffsets) and owns what they change: the TopicStore, the cluster id and the
// open PartitionLog of every partition (docs/design/0002-broker-plan.md).
//
// A single-node cluster: node id 1 is every partition's leader and the controller,
// advertised at the listen address.
//
// Data directory:
//   <data-dir>/meta/topics.json   the topics (TopicStore)
//   <data-dir>/meta/cluster_id    22 characters of URL-safe base64, made at first start
//   <data-dir>/<topic>-<p>/       one PartitionLog per partition; a deleted topic's
//                                 directories are renamed <dir>-delete, then removed
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/connection.h"
#include "broker/group_coordinator.h"
#include "broker/leader_epochs.h"
#include "broker/producer_state.h"
#include "broker/sasl.h"
#include "broker/topic_store.h"
#include "kafka/protocol/requests.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::broker {

struct BrokerOptions {
  std::string data_dir;
  // Where clients are told to connect (Metadata, DescribeCluster): the listen address.
  std::string advertised_host = "127.0.0.1";
  int32_t advertised_port = 9092;
  // IoExecutor threads. They spend their time blocked in pwrite and fdatasync, not on a
  // CPU: with fewer threads than partitions, appends queue behind other logs' syncs (with
  // 2 threads and 16 partitions, p99 produce latency was 219 ms; with 16, 34 ms).
  int io_threads = 16;
  // Every partition's flush policy. Under kDurable the high watermark consumers see is
  // the durable end offset; under kInterval (the default) the written end offset.
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kInterval;
  int64_t flush_ms = 100;
  size_t max_open_files = 1024;     // log.max.open.files
  TopicConfig topic_defaults;
  // log.retention.check.interval.ms: how often retention deletes old segments.
  int64_t retention_check_interval_ms = 300'000;
  // auto.create.topics.enable (off, as in Kafka 4): Metadata for a missing topic creates
  // it with num.partitions partitions when the client allows it.
  bool auto_create_topics = false;
  int32_t num_partitions = 1;
  // SASL/PLAIN and SCRAM-SHA-256 (off by default): when enabled, a connection may send
  // only ApiVersions, SaslHandshake and SaslAuthenticate until it has authenticated.
  SaslConfig sasl;
  // The group coordinator's timeouts and limits (its dir, executor and files are the
  // broker's: <data-dir>/__consumer_offsets-0).
  GroupCoordinatorOptions groups;
};

// Lifecycle: Open() on the controlling thread, then hand it to a Server (which calls
// OnRequest on every shard's thread), Stop the server, then Close() (the destructor
// closes too). The Broker must outlive the server's shard threads.
//
// Threads: OnRequest runs on any shard's thread, so the topic state (the TopicStore and
// the open logs) is guarded for now by one mutex, and admin requests block their shard
// while they fsync. When Produce and Fetch land, each partition moves to its owner shard
// (decision 2 of the plan: hash of topic id and partition, mod shards) and requests reach
// it by Post, not by this lock; the metadata stays with one metadata shard.
class Broker : public RequestHandler {
 public:
  static constexpr int32_t kNodeId = 1;

  // Creates the data directory and the cluster id when missing, loads the topics and
  // opens every partition's log (removing leftover *-delete directories).
  static Result<std::unique_ptr<Broker>> Open(BrokerOptions options);
  ~Broker() override;
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Sets the address clients are told to connect to, once the server knows its port
  // (any thread).
  void SetAdvertisedAddress(std::string host, int32_t port);

  void OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) override;

  // Flushes and closes every log (call after the server stopped). Idempotent.
  Status Close();

  const std::string& cluster_id() const { return cluster_id_; }
  // Open partition logs (tests).
  size_t open_log_count() const;
  // Fetches waiting for data (tests).
  size_t waiting_fetch_count();
  // For a graceful stop, while the server still runs: fetches stop waiting (the waiting
  // ones are answered now, new ones at once) and every log is flushed, so in-flight
  // produces get their acks. Any thread.
  void Drain();
  // Stops posting to connections' loops from I/O threads (fetch wake-ups, produce acks).
  // Call before stopping the server: logs may still report new data or acks while the
  // loops are being destroyed.
  void StopWaking();
  // Posts `task` to the connection's loop from any thread, unless StopWaking() was called.
  void PostToLoop(Connection& conn, std::function<void()> task);

 private:
  using PartitionKey = std::pair<std::string, int32_t>;  // (topic, partition)
  // One open partition: its log and the idempotent producers' state (rebuilt at open).
  struct Partition {
    std::unique_ptr<storage::PartitionLog> log;  // thread-safe
    std::mutex mu;                 // a produce's sequence check and append, as one step
    ProducerStateTable producers;  // guarded by mu
    LeaderEpochCache epochs;       // written at open only
  };

  Broker(BrokerOptions options, std::string cluster_id);

  void Handle(const std::shared_ptr<Connection>& conn, const kafka::DecodedRequest& req);
  // SASL (docs/design/0004-sasl.md); the connection's progress is its HandlerState.
  void SaslHandshake(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                     const kafka::SaslHandshakeRequest& req);
  void SaslAuthenticate(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                        const kafka::SaslAuthenticateRequest& req);
  // A token of the unframed exchange that follows SaslHandshake v0.
  void SaslRawToken(const std::shared_ptr<Connection>& conn, std::span<const uint8_t> token);
  // FindCoordinator: this node coordinates every group; transactions have none.
  kafka::FindCoordinatorResponse FindCoordinator(const kafka::FindCoordinatorRequest& req,
                                                 int16_t version);
  // Hands a group request to the coordinator; its answer is posted back to `conn`.
  template <typename Resp, typename Req, typename Method>
  void ToCoordinator(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                     const Req& req, Method method);
  kafka::ApiVersionsResponse ApiVersions() const;
  kafka::MetadataResponse Metadata(const kafka::MetadataRequest& req, int16_t version);
  kafka::CreateTopicsResponse CreateTopics(const kafka::CreateTopicsRequest& req);
  kafka::DeleteTopicsResponse DeleteTopics(const kafka::DeleteTopicsRequest& req, int16_t version);
  kafka::DescribeClusterResponse DescribeCluster();
  // Idempotent producers only (no transactions): a new producer id, or the next epoch of
  // a producer id the client already has (v3+).
  kafka::InitProducerIdResponse InitProducerId(const kafka::InitProducerIdRequest& req);
  // Produce answers (or finishes, for acks=0) when every partition's append is acked.
  void Produce(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
               const kafka::ProduceRequest& req);
  // Answers at once when there is data (or an error); otherwise waits, up to max_wait_ms,
  // for an append to any of its partitions to make data readable (a long poll).
  void Fetch(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
             const kafka::FetchRequest& req);
  struct FetchWait;
  // Registers a waiting fetch on its partitions and answers it if min_bytes are there
  // (on its connection's loop).
  void ArmFetch(const std::shared_ptr<FetchWait>& wait);
  // Answers a waiting fetch with what there is (its max_wait_ms passed).
  void CompleteFetch(const std::shared_ptr<FetchWait>& wait);
  // Sends the answer once; later calls do nothing.
  void AnswerFetch(const std::shared_ptr<FetchWait>& wait, const kafka::FetchResponse& resp,
                   std::vector<storage::FileSlice> files);
  // Called by a partition log when data became readable: wakes the fetches waiting on it.
  void WakeFetches(const PartitionKey& key);
  // Fills `resp` and `files` (the slices its splices index); returns the record bytes.
  uint64_t FetchOnce(const kafka::FetchRequest& req, int16_t version,
                     kafka::FetchResponse* resp, std::vector<storage::FileSlice>* files);
  kafka::ListOffsetsResponse ListOffsets(const kafka::ListOffsetsRequest& req, int16_t version);

  // Topic and partition administration (broker_admin.cc).
  kafka::CreatePartitionsResponse CreatePartitions(const kafka::CreatePartitionsRequest& req);
  kafka::DescribeConfigsResponse DescribeConfigs(const kafka::DescribeConfigsRequest& req,
                                                 int16_t version);
  kafka::AlterConfigsResponse AlterConfigs(const kafka::AlterConfigsRequest& req);
  kafka::IncrementalAlterConfigsResponse IncrementalAlterConfigs(
      const kafka::IncrementalAlterConfigsRequest& req);
  // Applies a topic's changed overrides (AlterConfigs, IncrementalAlterConfigs).
  kafka::AlterConfigsResourceResponse ChangeTopicConfigsLocked(
      int8_t resource_type, const std::string& topic,
      const std::map<std::string, std::optional<std::string>>& changes, bool replace_all,
      bool validate_only);
  kafka::DeleteRecordsResponse DeleteRecords(const kafka::DeleteRecordsRequest& req);
  kafka::OffsetForLeaderEpochResponse OffsetForLeaderEpoch(
      const kafka::OffsetForLeaderEpochRequest& req);
  // The leader epoch Metadata reports for a partition (0 when it is not open).
  int32_t LeaderEpochLocked(const std::string& topic, int32_t partition) const;

  // Retention passes over every log, every retention_check_interval_ms, on an I/O thread.
  void ScheduleRetentionLocked();
  void RunRetention();
  // Creates `name` for Metadata when auto.create.topics.enable is on; null otherwise.
  const TopicInfo* AutoCreateLocked(const std::string& name);

  std::string PartitionDir(const std::string& topic, int32_t partition) const;
  storage::LogOptions LogOptionsFor(const TopicConfig& config);
  // What consumers may read up to (decision 5 of the plan).
  int64_t HighWatermark(const storage::PartitionLog& log) const;
  // The caller holds mu_.
  Status OpenTopicLogsLocked(const TopicInfo& topic);
  Status CloseTopicLogsLocked(const std::string& topic, int32_t partitions);
  Status RemoveTopicDirsLocked(const std::string& topic, int32_t partitions);
  TopicError DeleteTopicLocked(const std::string& name);

  const BrokerOptions options_;
  const std::string cluster_id_;
  std::unique_ptr<SaslAuthenticator> sasl_;  // null when SASL is off; immutable
  std::unique_ptr<GroupCoordinator> groups_;  // thread-safe: posts to its own thread
  // Declared before the logs: destroyed after them.
  std::unique_ptr<storage::IoExecutor> executor_;
  std::unique_ptr<storage::FileCache> files_;

  // Readers (produce, fetch, list offsets, metadata, describe) share it; changes to the
  // topics, the map of logs or the counters below take it exclusively. Logs are
  // thread-safe themselves; a partition's producer state has its own mutex.
  mutable std::shared_mutex mu_;
  std::string advertised_host_;                    // guarded by mu_
  int32_t advertised_port_ = 0;                    // guarded by mu_
  std::unique_ptr<TopicStore> topics_;             // guarded by mu_
  std::map<PartitionKey, std::unique_ptr<Partition>> logs_;  // guarded by mu_
  // Producer ids are handed out from blocks reserved on disk (meta/producer_id_block
  // holds the end of the current block), so a restart never repeats one.
  int64_t next_producer_id_ = 0;                   // guarded by mu_
  int64_t producer_id_block_end_ = 0;              // guarded by mu_
  storage::IoExecutor::TaskId retention_task_ = 0;  // guarded by mu_
  bool closed_ = false;                            // guarded by mu_
  bool clean_marked_ = false;                      // guarded by mu_
  bool unclean_start_ = false;  // the last run did not stop cleanly (set at Open)

  // Fetches waiting for data, by partition, and the gate on posting to loops from I/O
  // threads. Its own lock (never held with mu_): logs call WakeFetches from their I/O
  // threads after every write.
  std::mutex waits_mu_;
  std::map<PartitionKey, std::vector<std::weak_ptr<FetchWait>>> waits_;  // guarded by waits_mu_
  bool waking_stopped_ = false;                                           // guarded by waits_mu_
  std::atomic<bool> draining_{false};
};

// Reads <data-dir>/meta/cluster_id, creating it (durably) with a random id when missing.
Result<std::string> LoadOrCreateClusterId(const std::string& data_dir);

}  // namespace sluice::broker
