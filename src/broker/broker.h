// Broker: the Kafka request dispatcher of `sluice serve`. It decodes each request frame,
// answers the cluster and topic APIs (ApiVersions, Metadata, CreateTopics, DeleteTopics,
// DescribeCluster), the data APIs (Produce, Fetch, ListOffsets) and owns what they
// change: the TopicStore, the cluster id and the open PartitionLog of every partition,
// each on its owner shard (docs/design/0002-broker-plan.md, decisions 2 and 16).
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
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/connection.h"
#include "broker/event_loop.h"
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

// The topics as every shard sees them: an immutable copy made by the metadata thread
// after each change (topic created, deleted, grown, reconfigured; the advertised address
// set) and published to all shards at once (Broker::Snapshot). Requests read it without
// a lock; a shard keeps its own reference and takes the new one on its next request.
struct MetadataSnapshot {
  struct Topic {
    TopicInfo info;
    std::vector<int32_t> leader_epochs;  // per partition, as its log was opened (0: none)
  };
  std::map<std::string, Topic> topics;  // by name
  std::string advertised_host;
  int32_t advertised_port = 0;

  const Topic* Find(const std::string& name) const {
    auto it = topics.find(name);
    return it == topics.end() ? nullptr : &it->second;
  }
  const Topic* FindById(const kafka::Uuid& id) const;
};

// Lifecycle: Open() on the controlling thread; hand it to a Server, which calls
// OnServerStart (the broker learns the shards' loops and moves each partition to its
// owner) before its threads run and OnServerStop after they stopped; then Close() (the
// destructor closes too). The Broker must outlive the server.
//
// Threads (docs/design/0002-broker-plan.md, decisions 2 and 16):
// - Each partition has one owner shard, OwnerOf(topic id, partition). The owner's thread
//   alone touches its Partition: the producer-state check and the append, reads for
//   Fetch / ListOffsets / OffsetForLeaderEpoch, and the fetches waiting on it. A request
//   arrives on its connection's shard, which splits it by owner, posts each part to its
//   owner's loop (runs it inline when that is itself) and assembles the answer when every
//   part has posted back. No lock is shared between shards on the request path.
// - The topics (TopicStore), the producer-id block, the catalog of open logs and the
//   retention timer belong to the metadata thread, a loop of the broker's own. Admin
//   requests (create/delete topics, create partitions, alter configs, delete records,
//   InitProducerId, auto-creation) are posted to it; its fsyncs and log opens and closes
//   never run on a shard. It hands new partitions to their owners (and takes deleted ones
//   back) by posting and waiting, then publishes a new MetadataSnapshot.
// - PartitionLog callbacks (acks, data readable) come from I/O threads; they only post to
//   loops, through a gate that StopWaking() closes.
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

  // The shards: called by the Server with its loops before their threads start (once),
  // and after they stopped (the broker stops posting to them).
  void OnServerStart(const std::vector<EventLoop*>& loops) override;
  void OnServerStop() override;

  void OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) override;

  // Stops the metadata thread, then flushes and closes every log (call after the server
  // stopped). Idempotent.
  Status Close();

  const std::string& cluster_id() const { return cluster_id_; }
  // Open partition logs (tests; any thread).
  size_t open_log_count() const { return open_logs_.load(); }
  // Fetches waiting for data, counted once per partition they wait on (tests; asks every
  // shard and waits for the answers).
  size_t waiting_fetch_count();
  // For a graceful stop, while the server still runs: fetches stop waiting (the waiting
  // ones are answered now, new ones at once) and every log is flushed, so in-flight
  // produces get their acks. Any thread but a shard's.
  void Drain();
  // Stops posting to the shards' loops (fetch wake-ups, produce acks, parts of requests,
  // answers from the metadata thread): logs may still report new data or acks while the
  // loops are being destroyed. Returns once no post is in progress. Any thread.
  void StopWaking();
  // Posts `task` to the connection's loop from any thread, unless StopWaking() was called.
  void PostToLoop(Connection& conn, std::function<void()> task);
  // The published topics (any thread; takes a short lock: shards use their own copy).
  std::shared_ptr<const MetadataSnapshot> Snapshot() const;
  // The shard owning a partition among `shards`.
  static int OwnerOf(const kafka::Uuid& topic_id, int32_t partition, int shards);

 private:
  using PartitionKey = std::pair<std::string, int32_t>;  // (topic, partition)
  struct FetchWait;
  // One open partition. Made and destroyed on the metadata thread (or at Open/Close);
  // between its installation and removal its owner shard's thread alone uses the
  // producer state and the waits. The log is thread-safe; the epochs never change after
  // open.
  struct Partition {
    kafka::Uuid topic_id;
    int shard = 0;                                // its owner; set before it is installed
    std::unique_ptr<storage::PartitionLog> log;  // thread-safe
    ProducerStateTable producers;                // owner's thread
    LeaderEpochCache epochs;                     // written at open only
    std::vector<std::weak_ptr<FetchWait>> waits;  // owner's thread: fetches waiting on it
    // waits.size(), read by the log's I/O thread to skip posting a wake-up nobody needs.
    std::atomic<int> waiting{0};
  };
  // What a shard's thread owns.
  struct Shard {
    EventLoop* loop = nullptr;  // null until OnServerStart
    int index = 0;
    std::map<PartitionKey, std::unique_ptr<Partition>> partitions;
    // Its copy of the published snapshot and the version it is of.
    std::shared_ptr<const MetadataSnapshot> metadata;
    uint64_t metadata_version = 0;
  };
  // One partition named by a request: where it lives, and (for the visitor) its index
  // in the request's flattened list.
  struct Target {
    PartitionKey key;
    kafka::Uuid topic_id;
    int shard = -1;  // -1: the topic or partition does not exist (the visitor gets null)
  };

  Broker(BrokerOptions options, std::string cluster_id);

  // -- Shards and posting ------------------------------------------------------------
  // The shard whose loop `loop` is.
  Shard& ShardOf(EventLoop* loop);
  // The snapshot a request on `shard` reads: its copy, refreshed when a newer one was
  // published (one atomic load when none was).
  const MetadataSnapshot& SnapshotFor(Shard& shard);
  // A Target for partition `p` of `topic` (shard -1 when it does not exist).
  Target TargetOf(const MetadataSnapshot::Topic* topic, const std::string& name,
                  int32_t p) const;
  // Posts `task` to `loop` unless StopWaking() was called; false when it was not posted.
  bool PostGated(EventLoop* loop, std::function<void()> task);
  // Runs visit(partition or null, i) for every targets[i] on its owner's thread (inline
  // for the home shard), then done() on `home`'s thread once all ran. `visit` may write
  // only to state of index i; done() sees all of it.
  void VisitOwners(Shard& home, std::vector<Target> targets,
                   std::function<void(Partition*, size_t)> visit, std::function<void()> done);
  // Metadata thread: runs `fn` on `shard`'s thread and waits for it (inline before the
  // shards are known). False when it could not run (the server is stopping).
  bool RunOnShard(int shard, const std::function<void()>& fn);
  // Runs `fn` on the metadata thread and waits for it (any other thread).
  void RunOnMetadata(const std::function<void()>& fn);
  // Runs `fn` (returning a response body) on the metadata thread and answers `conn`.
  template <typename Fn>
  void ToMetadata(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h, Fn fn);

  // -- Requests -----------------------------------------------------------------------
  void Handle(const std::shared_ptr<Connection>& conn,
              const std::shared_ptr<const std::vector<uint8_t>>& frame,
              const kafka::DecodedRequest& req);
  // SASL (docs/design/0004-sasl.md); the connection's progress is its HandlerState.
  void SaslHandshake(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                     const kafka::SaslHandshakeRequest& req);
  void SaslAuthenticate(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                        const kafka::SaslAuthenticateRequest& req);
  // A token of the unframed exchange that follows SaslHandshake v0.
  void SaslRawToken(const std::shared_ptr<Connection>& conn, std::span<const uint8_t> token);
  // FindCoordinator: this node coordinates every group; transactions have none.
  kafka::FindCoordinatorResponse FindCoordinator(const MetadataSnapshot& meta,
                                                 const kafka::FindCoordinatorRequest& req,
                                                 int16_t version);
  // Hands a group request to the coordinator; its answer is posted back to `conn`.
  template <typename Resp, typename Req, typename Method>
  void ToCoordinator(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                     const Req& req, Method method);
  kafka::ApiVersionsResponse ApiVersions() const;
  // Answers from the snapshot on the connection's shard; a missing topic that may be
  // auto-created sends the request to the metadata thread.
  void Metadata(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                const kafka::MetadataRequest& req);
  // The response from `meta`; `missing` gets the names that do not exist.
  kafka::MetadataResponse MetadataFrom(const MetadataSnapshot& meta,
                                       const kafka::MetadataRequest& req, int16_t version,
                                       std::vector<std::string>* missing) const;
  kafka::DescribeClusterResponse DescribeCluster(const MetadataSnapshot& meta) const;
  // Produce answers (or finishes, for acks=0) when every partition's append is acked.
  void Produce(const std::shared_ptr<Connection>& conn,
               const std::shared_ptr<const std::vector<uint8_t>>& frame,
               const kafka::RequestHeader& h, const kafka::ProduceRequest& req);
  // Answers at once when there is data (or an error); otherwise waits, up to max_wait_ms,
  // for an append to any of its partitions to make data readable (a long poll).
  void Fetch(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
             const kafka::FetchRequest& req);
  // Reads every partition of `req` on its owner (registering `wait` there first when
  // set), then calls done(response, files, record bytes) on `home`'s thread.
  using FetchDone =
      std::function<void(kafka::FetchResponse&, std::vector<storage::FileSlice>&, uint64_t)>;
  void FetchOnce(Shard& home, std::shared_ptr<const kafka::FetchRequest> req, int16_t version,
                 const std::shared_ptr<FetchWait>& wait, FetchDone done);
  // Registers a waiting fetch on its partitions and answers it if min_bytes are there
  // (on its connection's loop).
  void ArmFetch(const std::shared_ptr<FetchWait>& wait);
  // Answers a waiting fetch with what there is (its max_wait_ms passed, or a stop).
  void CompleteFetch(const std::shared_ptr<FetchWait>& wait);
  // Sends the answer once; later calls do nothing.
  void AnswerFetch(const std::shared_ptr<FetchWait>& wait, const kafka::FetchResponse& resp,
                   std::vector<storage::FileSlice> files);
  // Owner's thread: wakes the fetches waiting on `part` (they look again).
  void WakeFetches(Partition& part);
  void ListOffsets(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                   const kafka::ListOffsetsRequest& req);
  void OffsetForLeaderEpoch(const std::shared_ptr<Connection>& conn,
                            const kafka::RequestHeader& h,
                            const kafka::OffsetForLeaderEpochRequest& req);
  kafka::DescribeConfigsResponse DescribeConfigs(const MetadataSnapshot& meta,
                                                 const kafka::DescribeConfigsRequest& req,
                                                 int16_t version);

  // -- On the metadata thread (the *Meta suffix) -----------------------------------------
  kafka::CreateTopicsResponse CreateTopicsMeta(const kafka::CreateTopicsRequest& req);
  kafka::DeleteTopicsResponse DeleteTopicsMeta(const kafka::DeleteTopicsRequest& req,
                                               int16_t version);
  // Idempotent producers only (no transactions): a new producer id, or the next epoch of
  // a producer id the client already has (v3+).
  kafka::InitProducerIdResponse InitProducerIdMeta(const kafka::InitProducerIdRequest& req);
  kafka::CreatePartitionsResponse CreatePartitionsMeta(const kafka::CreatePartitionsRequest& req);
  kafka::AlterConfigsResponse AlterConfigsMeta(const kafka::AlterConfigsRequest& req);
  kafka::IncrementalAlterConfigsResponse IncrementalAlterConfigsMeta(
      const kafka::IncrementalAlterConfigsRequest& req);
  // Applies a topic's changed overrides (AlterConfigs, IncrementalAlterConfigs).
  kafka::AlterConfigsResourceResponse ChangeTopicConfigsMeta(
      int8_t resource_type, const std::string& topic,
      const std::map<std::string, std::optional<std::string>>& changes, bool replace_all,
      bool validate_only);
  // DeleteRecords moves log starts durably: on this thread, not the owners'.
  kafka::DeleteRecordsResponse DeleteRecordsMeta(const kafka::DeleteRecordsRequest& req);
  // Creates `name` for Metadata when auto.create.topics.enable is on; false otherwise.
  bool AutoCreateMeta(const std::string& name);
  // Makes a new snapshot of topics_ and publishes it.
  void PublishMeta();
  // Retention passes over every log, every retention_check_interval_ms.
  void ScheduleRetentionMeta();
  void RunRetentionMeta();

  std::string PartitionDir(const std::string& topic, int32_t partition) const;
  storage::LogOptions LogOptionsFor(const TopicConfig& config);
  // What consumers may read up to (decision 5 of the plan).
  int64_t HighWatermark(const storage::PartitionLog& log) const;
  // Opens partition `p` of `topic` (its log, epochs and producer state).
  Result<std::unique_ptr<Partition>> OpenPartition(const TopicInfo& topic, int32_t p);
  // Hands an open partition to its owner and records it in the catalog.
  Status Install(PartitionKey key, std::unique_ptr<Partition> part);
  // Takes a partition back from its owner (its waiting fetches look again and find it
  // gone); null when it is not open or the owner is stopping.
  std::unique_ptr<Partition> Uninstall(const PartitionKey& key);
  Status OpenTopicLogsMeta(const TopicInfo& topic);
  Status CloseTopicLogsMeta(const std::string& topic, int32_t partitions);
  Status RemoveTopicDirsMeta(const std::string& topic, int32_t partitions);
  TopicError DeleteTopicMeta(const std::string& name);

  const BrokerOptions options_;
  const std::string cluster_id_;
  std::unique_ptr<SaslAuthenticator> sasl_;  // null when SASL is off; immutable
  std::unique_ptr<GroupCoordinator> groups_;  // thread-safe: posts to its own thread
  // Declared before the logs: destroyed after them.
  std::unique_ptr<storage::IoExecutor> executor_;
  std::unique_ptr<storage::FileCache> files_;

  // The shards. Sized once (one before OnServerStart, then one per loop) on the
  // controlling thread before the shard threads run; each Shard's contents belong to its
  // thread from then on, and to the controlling thread again after OnServerStop.
  std::vector<std::unique_ptr<Shard>> shards_;
  bool attached_ = false;  // OnServerStart ran (set before the shard threads start)

  // The metadata thread: its loop, and what it owns.
  std::unique_ptr<EventLoop> meta_loop_;
  std::thread meta_thread_;
  std::unique_ptr<TopicStore> topics_;                // metadata thread
  std::map<PartitionKey, Partition*> catalog_;        // metadata thread: every open log
  // Producer ids are handed out from blocks reserved on disk (meta/producer_id_block
  // holds the end of the current block), so a restart never repeats one.
  int64_t next_producer_id_ = 0;                      // metadata thread
  int64_t producer_id_block_end_ = 0;                 // metadata thread
  EventLoop::TimerId retention_timer_ = 0;            // metadata thread
  std::atomic<size_t> open_logs_{0};                  // catalog_.size(), for tests

  // The published snapshot. Shards compare metadata_version_ with their copy's version
  // on each request and take publish_mu_ only when it moved.
  mutable std::mutex publish_mu_;
  std::shared_ptr<const MetadataSnapshot> published_;  // guarded by publish_mu_
  std::string advertised_host_;                        // guarded by publish_mu_
  int32_t advertised_port_ = 0;                        // guarded by publish_mu_
  std::atomic<uint64_t> metadata_version_{1};          // written under publish_mu_

  // The gate on posting to the shards' loops: posters count themselves in posting_,
  // StopWaking() closes it and waits for posting_ to drain.
  std::atomic<bool> waking_stopped_{false};
  std::atomic<int> posting_{0};
  std::atomic<bool> draining_{false};

  bool closed_ = false;        // controlling thread
  bool clean_marked_ = false;  // controlling thread
  bool unclean_start_ = false;  // the last run did not stop cleanly (set at Open)
};

// Reads <data-dir>/meta/cluster_id, creating it (durably) with a random id when missing.
Result<std::string> LoadOrCreateClusterId(const std::string& data_dir);

}  // namespace sluice::broker
