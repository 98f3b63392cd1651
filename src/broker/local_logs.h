// LocalLogs: the catalog of the partition logs a broker holds open, shared by both
// controllers (MetadataController for a single node, ClusterController in a cluster):
// opening a partition's log, epochs and producer state from its topic's config, placing it
// on its owner shard, taking it back, closing it, flushing every log, retention passes and
// the log cleaner for compacted topics. What to open, and when, stays the controllers'.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"
#include "broker/partition.h"
#include "broker/remote_store.h"
#include "broker/shards.h"
#include "broker/tier_uploader.h"
#include "broker/topic_store.h"
#include "compaction/cleaner.h"
#include "storage/env.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::broker {

struct LocalLogsOptions {
  std::string data_dir;
  storage::Env* env = storage::Env::Posix();
  storage::IoExecutor* executor = nullptr;  // required; outlives the logs
  storage::FileCache* files = nullptr;      // required; likewise
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kInterval;
  int64_t flush_ms = 100;
  compaction::CleanerOptions cleaner;
  // On a partition's owner thread, when data became readable or the partition is being
  // taken back: the fetches waiting on it look again.
  std::function<void(Partition&)> wake_fetches;
  // Tiered storage (docs/design/0025): where remote.storage.enable topics' segments go;
  // null: none. Outlives the logs.
  const RemoteStore* remote_store = nullptr;
  RemoteSegments* remote_index = nullptr;  // where the uploader publishes; optional
  int64_t tier_upload_interval_ms = 1000;
};

// Removes a directory and everything under it (the Env has no recursive removal).
Status RemoveTree(const std::string& path);

// Owned by a controller and used on its thread (the controlling thread's before the
// controller's starts and after it stops); count() and cleaner() from any thread. The
// cleaner's threads run between StartCleaner and StopCleaner.
class LocalLogs {
 public:
  using TopicConfigOf = std::function<const TopicConfig*(const std::string& topic)>;

  LocalLogs(LocalLogsOptions options, Shards* shards);
  LocalLogs(const LocalLogs&) = delete;
  LocalLogs& operator=(const LocalLogs&) = delete;

  const LocalLogsOptions& options() const { return options_; }
  compaction::LogCleaner* cleaner() const { return cleaner_.get(); }
  // The log cleaner's threads, and the tiered-storage uploader's when there is one.
  void StartCleaner() {
    cleaner_->Start();
    if (uploader_) uploader_->Start();
  }
  void StopCleaner() {
    cleaner_->Stop();
    if (uploader_) uploader_->Stop();
  }
  // Null without a RemoteStore.
  TierUploader* uploader() const { return uploader_.get(); }

  // <data-dir>/<topic>-<partition>
  std::string Dir(const std::string& topic, int32_t partition) const;
  // Opens partition `p` of `topic`: its log with the topic's settings (waking the owner's
  // waiting fetches when data becomes readable), its leader epochs (`epochs`: who starts
  // them, LeaderEpochCache::Open) and its producer state. Not placed yet.
  Result<std::unique_ptr<Partition>> Open(const TopicInfo& topic, int32_t p,
                                          LeaderEpochCache::Owner epochs);
  // Hands an open partition to its owner, records it, and registers it with the cleaner
  // when `config` (its topic's, or null) is compacted.
  Status Install(const PartitionKey& key, std::unique_ptr<Partition> part,
                 const TopicConfig* config);
  // Takes a partition back from its owner: acks=all produces waiting on it are answered
  // NOT_LEADER_OR_FOLLOWER and its waiting fetches look again. Null when it is not open
  // or the owner is stopping (it is forgotten either way when open).
  std::unique_ptr<Partition> Take(const PartitionKey& key);
  // Take, then close the log (its syncs run on this thread).
  Status Close(const PartitionKey& key);
  // New settings (segment, retention) for an open log, and the cleaner's registration.
  void Reconfigure(const PartitionKey& key, const TopicConfig& config);
  // Registers the log with the cleaner when `config` is compacted, unregisters it
  // otherwise (or with no config).
  void UpdateCleaner(const PartitionKey& key, const TopicConfig* config);
  // Registers the log with the uploader when `config` is tiered (remote.storage.enable)
  // and this broker has a RemoteStore; unregisters it otherwise.
  void UpdateTiering(const PartitionKey& key, const TopicConfig* config);
  // A retention pass over every open log whose topic deletes (cleanup.policy delete).
  void RunRetention(const TopicConfigOf& config_of);
  // Flushes every open log, logging failures.
  void FlushAll();
  // Every log closed on every shard (after the server stopped), the catalog emptied.
  Status CloseAll();

  Partition* Find(const PartitionKey& key) const;
  storage::PartitionLog* LogOf(const PartitionKey& key) const;
  const std::map<PartitionKey, Partition*>& all() const { return catalog_; }
  size_t count() const { return count_.load(); }

 private:
  const LocalLogsOptions options_;
  Shards* const shards_;
  std::unique_ptr<compaction::LogCleaner> cleaner_;  // its threads clean compacted logs
  std::unique_ptr<TierUploader> uploader_;           // with options_.remote_store
  std::map<PartitionKey, Partition*> catalog_;       // every open log, on its owner
  std::atomic<size_t> count_{0};                     // catalog_.size()
};

}  // namespace sluice::broker
