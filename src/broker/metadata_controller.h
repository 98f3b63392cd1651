// MetadataController: the single-node Controller. It owns the topics (TopicStore in
// <data-dir>/meta/topics.json), the catalog of open partition logs, the producer-id
// block and the retention timer, all on a thread of its own ("the metadata thread",
// docs/design/0002-broker-plan.md, decision 16), and publishes a MetadataSnapshot after
// each change.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "base/status.h"
#include "broker/controller.h"
#include "broker/event_loop.h"
#include "broker/local_logs.h"
#include "broker/metadata_snapshot.h"
#include "broker/partition.h"
#include "broker/shards.h"
#include "broker/topic_store.h"
#include "compaction/cleaner.h"
#include "storage/env.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::broker {

struct MetadataControllerOptions {
  std::string data_dir;
  storage::Env* env = storage::Env::Posix();
  storage::IoExecutor* executor = nullptr;  // required; outlives the controller's logs
  storage::FileCache* files = nullptr;      // required; likewise
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kInterval;
  int64_t flush_ms = 100;
  TopicConfig topic_defaults;
  int64_t retention_check_interval_ms = 300'000;
  // The log cleaner over the partitions of compacted topics (started by Start()).
  compaction::CleanerOptions cleaner;
  // Tiered storage's store (null: none), outliving the controller.
  const RemoteStore* remote_store = nullptr;
  RemoteSegments* remote_index = nullptr;  // where its remote segments are published
  bool auto_create_topics = false;
  int32_t num_partitions = 1;
  // On a partition's owner thread, when data became readable or the partition is being
  // taken back: the fetches waiting on it look again.
  std::function<void(Partition&)> wake_fetches;
};

// The settings of the local logs' catalog among these.
LocalLogsOptions LocalLogsOptionsOf(const MetadataControllerOptions& options);

// Lifecycle: Load() and OpenLogs() on the controlling thread, which stands in for the
// controller's own until Start(); Stop() joins that thread (the controlling thread owns
// everything again), and CloseLogs(), once the server stopped, closes every log. The
// Controller methods run on its thread; open_log_count() on any.
class MetadataController : public Controller {
 public:
  // Loads the topics, removes directories of deletions a crash interrupted and reads the
  // producer-id block. Opens no log yet.
  static Result<std::unique_ptr<MetadataController>> Load(MetadataControllerOptions options,
                                                          Shards* shards,
                                                          MetadataPublisher* publisher);
  ~MetadataController() override;  // Stop()s
  MetadataController(const MetadataController&) = delete;
  MetadataController& operator=(const MetadataController&) = delete;

  // Opens every partition's log (hands each to its owner among `shards`) and publishes
  // the first snapshot. `unclean_start`: the last run did not stop cleanly, so every
  // leader epoch moves on.
  Status OpenLogs(bool unclean_start) override;
  // Starts the controller's thread and the retention timer.
  Status Start() override;
  // Stops and joins the thread. Idempotent.
  void Stop() override;
  // Closes every partition's log, on every shard (after Stop and the server's stop).
  Status CloseLogs() override;
  // Flushes every open log (on the controller's thread).
  void FlushLogs() override;
  // Open partition logs (any thread).
  size_t open_log_count() const override { return logs_.count(); }
  compaction::LogCleaner* cleaner() const override { return logs_.cleaner(); }

  // Controller
  void Post(std::function<void()> task) override;
  void RunAndWait(const std::function<void()>& fn) override;
  const TopicInfo* FindTopic(const std::string& name) const override;
  const TopicInfo* FindTopicById(const kafka::Uuid& id) const override;
  TopicError CreateTopic(const std::string& name, int32_t partitions,
                         const std::map<std::string, std::string>& overrides, bool validate_only,
                         TopicInfo* info) override;
  bool AutoCreateTopic(const std::string& name) override;
  TopicError DeleteTopic(const std::string& name) override;
  TopicError AddPartitions(const std::string& name, int32_t count, bool validate_only) override;
  TopicError SetTopicConfigs(const std::string& name,
                             const std::map<std::string, std::optional<std::string>>& changes,
                             bool replace_all, bool validate_only) override;
  storage::PartitionLog* LogOf(const std::string& topic, int32_t partition) override;
  Result<int64_t> AllocateProducerId() override;
  void Publish() override;

 private:
  MetadataController(MetadataControllerOptions options, Shards* shards,
                     MetadataPublisher* publisher);

  Status OpenTopicLogs(const TopicInfo& topic);
  Status CloseTopicLogs(const std::string& topic, int32_t partitions);
  Status RemoveTopicDirs(const std::string& topic, int32_t partitions);
  // Retention passes over every log, every retention_check_interval_ms.
  void ScheduleRetention();
  void RunRetention();
  // The config of an open log's topic (null when it has none), for the catalog.
  const TopicConfig* ConfigOf(const std::string& topic) const;

  const MetadataControllerOptions options_;
  Shards* const shards_;
  MetadataPublisher* const publisher_;
  bool unclean_start_ = false;  // set by OpenLogs

  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
  // What the controller's thread owns (the controlling thread's before Start and after
  // Stop).
  std::unique_ptr<TopicStore> topics_;
  LocalLogs logs_;  // every open log
  // Producer ids are handed out from blocks reserved on disk (meta/producer_id_block
  // holds the end of the current block), so a restart never repeats one.
  int64_t next_producer_id_ = 0;
  int64_t producer_id_block_end_ = 0;
  EventLoop::TimerId retention_timer_ = 0;
};

}  // namespace sluice::broker
