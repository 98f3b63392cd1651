// The catalog of open partition logs both controllers use. See local_logs.h.
#include "broker/local_logs.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <system_error>
#include <utility>

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/replica_state.h"

namespace sluice::broker {
namespace {

std::string Name(const PartitionKey& key) { return fmt::format("{}-{}", key.first, key.second); }

// A tiered topic's local log keeps local.retention.* (its deletions wait for the upload:
// RunRetention); the uploader applies retention.* to the remote segments.
storage::PartitionLog::Limits LimitsOf(const TopicConfig& c) {
  return {static_cast<uint64_t>(c.segment_bytes), c.segment_ms, c.EffectiveLocalRetentionBytes(),
          c.EffectiveLocalRetentionMs(), kMaxTopicMessageBytes};
}

}  // namespace

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return IOError("remove {}: {}", path, ec.message());
  return Status::OK();
}

LocalLogs::LocalLogs(LocalLogsOptions options, Shards* shards)
    : options_(std::move(options)),
      shards_(shards),
      cleaner_(std::make_unique<compaction::LogCleaner>(options_.cleaner)) {
  if (options_.remote_store != nullptr) {
    uploader_ = std::make_unique<TierUploader>(
        TierUploaderOptions{.store = options_.remote_store,
                            .interval_ms = options_.tier_upload_interval_ms,
                            .index = options_.remote_index});
  }
}

std::string LocalLogs::Dir(const std::string& topic, int32_t partition) const {
  return fmt::format("{}/{}-{}", options_.data_dir, topic, partition);
}

Result<std::unique_ptr<Partition>> LocalLogs::Open(const TopicInfo& topic, int32_t p,
                                                   LeaderEpochCache::Owner epochs) {
  auto part = std::make_unique<Partition>();
  part->topic_id = topic.id;
  const TopicConfig& c = topic.config;
  storage::LogOptions o;
  o.env = options_.env;
  o.flush_policy = options_.flush_policy;
  o.flush_ms = options_.flush_ms;
  o.executor = options_.executor;
  o.files = options_.files;
  o.segment_bytes = static_cast<uint64_t>(c.segment_bytes);
  o.segment_ms = c.segment_ms;
  o.retention_bytes = c.EffectiveLocalRetentionBytes();
  o.retention_ms = c.EffectiveLocalRetentionMs();
  // The topic's max.message.bytes is enforced by Produce (ValidateRecords); the log
  // takes any batch up to the largest that setting allows, so lowering it never makes
  // stored batches unreadable and no topic config can make a log fail to open.
  o.max_batch_bytes = kMaxTopicMessageBytes;
  // On an I/O thread after every write: a wake-up for the owner, only when fetches wait
  // there. The fence pairs with the owner's registration (waiting, then a read of the
  // log): either the owner's read saw the new data or this sees the waiter.
  o.on_readable = [this, raw = part.get(), key = PartitionKey{topic.name, p}] {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (raw->waiting.load() == 0) return;
    const int owner = raw->shard;
    shards_->PostGated(shards_->at(owner).loop, [this, raw, owner, key] {
      Shard& shard = shards_->at(owner);
      auto it = shard.partitions.find(key);
      if (it != shard.partitions.end() && it->second.get() == raw) options_.wake_fetches(*raw);
    });
  };
  ASSIGN_OR_RETURN(part->log, storage::PartitionLog::Open(Dir(topic.name, p), o));
  // Epochs first: a bump for a cut log is on disk before anything else reads it.
  ASSIGN_OR_RETURN(part->epochs, LeaderEpochCache::Open(*part->log, epochs));
  // From the uploader's snapshot when the log has one (a tiered log whose older segments
  // are gone: design 0025, decision 8); Rebuild checks it against the log.
  std::string snapshot;
  if (std::ifstream in(Dir(topic.name, p) + "/" + TierUploader::kProducerSnapshotFile); in) {
    snapshot.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  RETURN_IF_ERROR(part->producers.Rebuild(*part->log, snapshot));
  return part;
}

Status LocalLogs::Install(const PartitionKey& key, std::unique_ptr<Partition> part,
                          const TopicConfig* config) {
  Partition* raw = part.get();
  RETURN_IF_ERROR(shards_->Place(key, std::move(part)));
  catalog_[key] = raw;
  count_ = catalog_.size();
  UpdateCleaner(key, config);
  UpdateTiering(key, config);
  return Status::OK();
}

std::unique_ptr<Partition> LocalLogs::Take(const PartitionKey& key) {
  auto it = catalog_.find(key);
  if (it == catalog_.end()) return nullptr;
  cleaner_->Remove(Name(key));            // waits for a cleaning
  if (uploader_) uploader_->Remove(key);  // and for an upload
  std::unique_ptr<Partition> taken = shards_->Take(key, it->second->shard, [this](Partition& p) {
    // acks=all produces waiting here are answered now, as at a change of leader.
    if (p.replica != nullptr)
      replica::FailAcksWaits(*p.replica, kafka::ErrorCode::kNotLeaderOrFollower);
    options_.wake_fetches(p);
  });
  catalog_.erase(it);
  count_ = catalog_.size();
  return taken;
}

Status LocalLogs::Close(const PartitionKey& key) {
  std::unique_ptr<Partition> part = Take(key);
  if (part == nullptr) return Status::OK();
  return part->log->Close();
}

void LocalLogs::Reconfigure(const PartitionKey& key, const TopicConfig& config) {
  Partition* part = Find(key);
  if (part == nullptr) return;
  part->log->Reconfigure(LimitsOf(config));  // thread-safe
  UpdateCleaner(key, &config);
  UpdateTiering(key, &config);
}

void LocalLogs::UpdateTiering(const PartitionKey& key, const TopicConfig* config) {
  if (uploader_ == nullptr) return;
  Partition* part = Find(key);
  if (part == nullptr || config == nullptr || !config->remote_storage_enable) {
    uploader_->Remove(key);
    return;
  }
  // A replicated partition is uploaded by its leader only, below its high watermark
  // (design 0025, decision 3), read on its owner. The uploader is removed before the
  // partition is taken (Take), so `part` outlives the calls.
  TierUploader::Bound bound;
  if (part->replica != nullptr) {
    bound = [shards = shards_, part] {
      TierUploader::Leadership role;
      // Before the server runs the partitions are still being placed and given roles:
      // nothing is uploaded.
      if (!shards->attached()) return role;
      shards->RunOnShard(part->shard, [&] {
        if (part->replica != nullptr && part->replica->leader()) {
          role.bound = part->replica->high_watermark;
          role.epoch = part->replica->leader_epoch;
        }
      });
      return role;
    };
  }
  uploader_->Add(key, part->topic_id, part->log.get(),
                 {.next = &part->tiered_next, .start = &part->tiered_start},
                 {.bytes = config->retention_bytes, .ms = config->retention_ms}, std::move(bound));
}

void LocalLogs::UpdateCleaner(const PartitionKey& key, const TopicConfig* config) {
  Partition* part = Find(key);
  if (part == nullptr || config == nullptr || !config->compacted()) {
    cleaner_->Remove(Name(key));
    return;
  }
  compaction::CleanConfig cc;
  cc.min_cleanable_dirty_ratio = config->min_cleanable_dirty_ratio;
  cc.min_compaction_lag_ms = config->min_compaction_lag_ms;
  cc.max_compaction_lag_ms = config->max_compaction_lag_ms;
  cc.delete_retention_ms = config->delete_retention_ms;
  cc.segment_bytes = static_cast<uint64_t>(config->segment_bytes);
  cleaner_->Add(Name(key), part->log.get(), cc);
}

void LocalLogs::RunRetention(const TopicConfigOf& config_of) {
  // A replicated partition's retention stops at its high watermark (read on the owners,
  // one visit per shard): a segment the ISR does not all hold yet is kept.
  std::map<PartitionKey, int64_t> bounds;
  std::map<int, std::vector<std::pair<PartitionKey, Partition*>>> by_shard;
  for (auto& [key, part] : catalog_) by_shard[part->shard].emplace_back(key, part);
  for (auto& [shard, parts] : by_shard) {
    const bool ran = shards_->RunOnShard(shard, [&bounds, &parts] {
      for (auto& [key, part] : parts) {
        if (part->replica != nullptr) bounds[key] = part->replica->high_watermark;
      }
    });
    if (!ran) return;  // stopping
  }
  for (auto& [key, part] : catalog_) {
    // Retention applies to cleanup.policy delete (alone or with compact) only.
    const TopicConfig* config = config_of(key.first);
    if (config != nullptr && !config->deletes()) continue;
    auto bound = bounds.find(key);
    int64_t upper = bound != bounds.end() ? bound->second : std::numeric_limits<int64_t>::max();
    // A tiered topic's segments go only once uploaded (design 0025, decision 5): an S3
    // outage grows the disk instead of losing data.
    if (config != nullptr && config->remote_storage_enable)
      upper = std::min(upper, std::max<int64_t>(part->tiered_next.load(), 0));
    Result<int> deleted = part->log->ApplyRetention(upper);
    if (!deleted.ok()) {
      SLUICE_LOG(kLog, kWarn, "retention of {}: {}", Name(key), deleted.status().ToString());
    } else if (*deleted > 0) {
      SLUICE_LOG(kLog, kInfo, "retention deleted {} segments of {}", *deleted, Name(key));
    }
  }
}

void LocalLogs::FlushAll() {
  for (auto& [key, part] : catalog_) {
    if (Status st = part->log->Flush(); !st.ok()) {
      SLUICE_LOG(kLog, kWarn, "flushing {}: {}", Name(key), st.ToString());
    }
  }
}

Status LocalLogs::CloseAll() {
  for (const auto& [key, part] : catalog_) {
    cleaner_->Remove(Name(key));
    if (uploader_) uploader_->Remove(key);
  }
  Status first = shards_->CloseAll();
  catalog_.clear();
  count_ = 0;
  return first;
}

Partition* LocalLogs::Find(const PartitionKey& key) const {
  auto it = catalog_.find(key);
  return it == catalog_.end() ? nullptr : it->second;
}

storage::PartitionLog* LocalLogs::LogOf(const PartitionKey& key) const {
  Partition* part = Find(key);
  return part == nullptr ? nullptr : part->log.get();
}

}  // namespace sluice::broker
