// MetadataController: topics, the partition catalog, producer ids and retention on the
// metadata thread. See metadata_controller.h.
#include "broker/metadata_controller.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <future>
#include <system_error>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "broker/meta_files.h"

namespace sluice::broker {
namespace {

const Logger kLog("broker");
using kafka::ErrorCode;

// The env has no recursive removal: a partition directory goes with std::filesystem.
Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return IOError("remove {}: {}", path, ec.message());
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<MetadataController>> MetadataController::Load(
    MetadataControllerOptions options, Shards* shards, MetadataPublisher* publisher) {
  storage::Env* env = options.env;
  ASSIGN_OR_RETURN(auto topics, TopicStore::Open(options.data_dir, options.topic_defaults, env));

  // Directories of deletions a crash interrupted.
  ASSIGN_OR_RETURN(auto entries, env->ListDir(options.data_dir));
  for (const std::string& name : entries) {
    static constexpr std::string_view kSuffix = "-delete";
    if (name.size() > kSuffix.size() && name.ends_with(kSuffix)) {
      RETURN_IF_ERROR(RemoveTree(options.data_dir + "/" + name));
    }
  }

  // The end of the last reserved block of producer ids: new ids start there.
  int64_t producer_id_start = 0;
  const std::string block_path = options.data_dir + "/meta/producer_id_block";
  if (env->Exists(block_path)) {
    ASSIGN_OR_RETURN(auto file, env->Open(block_path, storage::OpenMode::kRead));
    std::string text(32, '\0');
    ASSIGN_OR_RETURN(
        size_t n,
        file->ReadAt(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(text.data()), text.size())));
    text.resize(n);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), producer_id_start);
    if (ec != std::errc() || p != text.data() + text.size() || producer_id_start < 0) {
      return CorruptionError("{}: not a producer id", block_path);
    }
  }
  std::unique_ptr<MetadataController> c(
      new MetadataController(std::move(options), shards, publisher));
  c->topics_ = std::move(topics);
  c->next_producer_id_ = c->producer_id_block_end_ = producer_id_start;
  return c;
}

MetadataController::MetadataController(MetadataControllerOptions options, Shards* shards,
                                       MetadataPublisher* publisher)
    : options_(std::move(options)),
      shards_(shards),
      publisher_(publisher),
      cleaner_(std::make_unique<compaction::LogCleaner>(options_.cleaner)) {}

MetadataController::~MetadataController() { Stop(); }

Status MetadataController::OpenLogs(bool unclean_start) {
  unclean_start_ = unclean_start;
  // This thread stands in for the controller's until Start(): the partitions go to the
  // one provisional shard, spread over the real ones when the server attaches its loops.
  for (const TopicInfo* t : topics_->List()) {
    RETURN_IF_ERROR(OpenTopicLogs(*t));
  }
  SLUICE_LOG(kLog, kInfo, "opened {} topics, {} partitions in {}", topics_->List().size(),
             catalog_.size(), options_.data_dir);
  Publish();
  return Status::OK();
}

Status MetadataController::Start() {
  ASSIGN_OR_RETURN(loop_, EventLoop::Create());
  EventLoop* loop = loop_.get();
  thread_ = std::thread([loop] { loop->Run(); });
  loop->Post([this] { ScheduleRetention(); });
  cleaner_->Start();
  return Status::OK();
}

void MetadataController::Stop() {
  cleaner_->Stop();
  if (loop_ == nullptr) return;
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

Status MetadataController::CloseLogs() {
  for (const auto& [key, part] : catalog_)
    cleaner_->Remove(fmt::format("{}-{}", key.first, key.second));
  Status first = shards_->CloseAll();
  catalog_.clear();
  open_logs_ = 0;
  return first;
}

void MetadataController::FlushLogs() {
  RunAndWait([this] {
    for (auto& [key, part] : catalog_) {
      if (Status st = part->log->Flush(); !st.ok()) {
        SLUICE_LOG(kLog, kWarn, "flushing {}-{}: {}", key.first, key.second, st.ToString());
      }
    }
  });
}

void MetadataController::Post(std::function<void()> task) { loop_->Post(std::move(task)); }

void MetadataController::RunAndWait(const std::function<void()>& fn) {
  if (loop_ == nullptr) {
    fn();
    return;
  }
  SLUICE_ASSERT(!loop_->InLoopThread());
  std::promise<void> finished;
  loop_->Post([&] {
    fn();
    finished.set_value();
  });
  finished.get_future().wait();
}

// ---------------------------------------------------------------------------------------
// Topics

const TopicInfo* MetadataController::FindTopic(const std::string& name) const {
  return topics_->Find(name);
}

const TopicInfo* MetadataController::FindTopicById(const kafka::Uuid& id) const {
  return topics_->FindById(id);
}

TopicError MetadataController::CreateTopic(const std::string& name, int32_t partitions,
                                           const std::map<std::string, std::string>& overrides,
                                           bool validate_only, TopicInfo* info) {
  TopicError err = topics_->Create(name, partitions, overrides, validate_only, info);
  if (!err.ok() || validate_only) return err;
  if (Status st = OpenTopicLogs(*info); !st.ok()) {
    SLUICE_LOG(kLog, kError, "creating topic {}: {}", name, st.ToString());
    if (TopicError undo = DeleteTopic(name); !undo.ok()) {
      SLUICE_LOG(kLog, kError, "undoing topic {}: {}", name, undo.message);
    }
    return {ErrorCode::kKafkaStorageError, st.ToString()};
  }
  SLUICE_LOG(kLog, kInfo, "created topic {} ({} partitions, id {})", name, partitions,
             info->id.ToString());
  return {};
}

bool MetadataController::AutoCreateTopic(const std::string& name) {
  if (!options_.auto_create_topics || !ValidateTopicName(name).ok() || IsReservedTopic(name)) {
    return false;
  }
  TopicInfo info;
  TopicError err = topics_->Create(name, options_.num_partitions, {}, false, &info);
  if (!err.ok()) return false;
  if (Status st = OpenTopicLogs(info); !st.ok()) {
    SLUICE_LOG(kLog, kError, "auto-creating topic {}: {}", name, st.ToString());
    if (TopicError undo = DeleteTopic(name); !undo.ok()) {
      SLUICE_LOG(kLog, kError, "undoing topic {}: {}", name, undo.message);
    }
    return false;
  }
  SLUICE_LOG(kLog, kInfo, "auto-created topic {} ({} partitions)", name, options_.num_partitions);
  return true;
}

TopicError MetadataController::DeleteTopic(const std::string& name) {
  const TopicInfo* info = topics_->Find(name);
  if (info == nullptr) {
    return {ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name)};
  }
  const int32_t partitions = info->partitions;
  if (Status st = CloseTopicLogs(name, partitions); !st.ok()) {
    // The data that reached the disk stays; the topic goes anyway.
    SLUICE_LOG(kLog, kWarn, "closing logs of deleted topic {}: {}", name, st.ToString());
  }
  TopicError err = topics_->Delete(name);
  if (!err.ok()) {
    if (const TopicInfo* still = topics_->Find(name); still != nullptr) {
      if (Status st = OpenTopicLogs(*still); !st.ok()) {
        SLUICE_LOG(kLog, kError, "reopening logs of topic {}: {}", name, st.ToString());
      }
    }
    return err;
  }
  if (Status st = RemoveTopicDirs(name, partitions); !st.ok()) {
    // Removed from the metadata: leftovers named *-delete go at the next start.
    SLUICE_LOG(kLog, kWarn, "removing directories of deleted topic {}: {}", name, st.ToString());
  }
  return {};
}

TopicError MetadataController::AddPartitions(const std::string& name, int32_t count,
                                             bool validate_only) {
  const int32_t before = topics_->Find(name) != nullptr ? topics_->Find(name)->partitions : 0;
  TopicError err = topics_->AddPartitions(name, count, validate_only);
  if (!err.ok() || validate_only) return err;
  if (Status st = OpenTopicLogs(*topics_->Find(name)); !st.ok()) {
    SLUICE_LOG(kLog, kError, "adding partitions to {}: {}", name, st.ToString());
    return {ErrorCode::kKafkaStorageError, st.ToString()};
  }
  SLUICE_LOG(kLog, kInfo, "topic {}: {} partitions, was {}", name, count, before);
  return {};
}

TopicError MetadataController::SetTopicConfigs(
    const std::string& name, const std::map<std::string, std::optional<std::string>>& changes,
    bool replace_all, bool validate_only) {
  TopicError err = topics_->SetConfigs(name, changes, replace_all, validate_only);
  if (!err.ok() || validate_only) return err;
  const TopicInfo* info = topics_->Find(name);
  const storage::PartitionLog::Limits limits{static_cast<uint64_t>(info->config.segment_bytes),
                                             info->config.segment_ms, info->config.retention_bytes,
                                             info->config.retention_ms, kMaxTopicMessageBytes};
  for (int32_t p = 0; p < info->partitions; ++p) {
    auto it = catalog_.find({name, p});
    if (it == catalog_.end()) continue;
    it->second->log->Reconfigure(limits);  // thread-safe
    UpdateCleaner(it->first, it->second);
  }
  SLUICE_LOG(kLog, kInfo, "topic {}: configs changed", name);
  return {};
}

storage::PartitionLog* MetadataController::LogOf(const std::string& topic, int32_t partition) {
  auto it = catalog_.find({topic, partition});
  return it == catalog_.end() ? nullptr : it->second->log.get();
}

Result<int64_t> MetadataController::AllocateProducerId() {
  if (next_producer_id_ >= producer_id_block_end_) {
    constexpr int64_t kBlock = 1000;
    int64_t end = next_producer_id_ + kBlock;
    RETURN_IF_ERROR(WriteFileDurably(options_.env, options_.data_dir + "/meta", "producer_id_block",
                                     std::to_string(end) + "\n"));
    producer_id_block_end_ = end;
  }
  return next_producer_id_++;
}

void MetadataController::Publish() {
  auto meta = std::make_shared<MetadataSnapshot>();
  for (const TopicInfo* t : topics_->List()) {
    MetadataSnapshot::Topic& out = meta->topics[t->name];
    out.info = *t;
    out.leader_epochs.assign(static_cast<size_t>(std::max(t->partitions, 0)), 0);
    for (int32_t p = 0; p < t->partitions; ++p) {
      // Epochs never change after open: reading them here is safe.
      auto it = catalog_.find({t->name, p});
      if (it != catalog_.end()) {
        out.leader_epochs[static_cast<size_t>(p)] = it->second->epochs.latest_epoch();
      }
    }
  }
  publisher_->Publish(std::move(meta));
}

// ---------------------------------------------------------------------------------------
// Partition logs

std::string MetadataController::PartitionDir(const std::string& topic, int32_t partition) const {
  return fmt::format("{}/{}-{}", options_.data_dir, topic, partition);
}

storage::LogOptions MetadataController::LogOptionsFor(const TopicConfig& config) {
  storage::LogOptions o;
  o.env = options_.env;
  o.flush_policy = options_.flush_policy;
  o.flush_ms = options_.flush_ms;
  o.executor = options_.executor;
  o.files = options_.files;
  o.segment_bytes = static_cast<uint64_t>(config.segment_bytes);
  o.segment_ms = config.segment_ms;
  o.retention_bytes = config.retention_bytes;
  o.retention_ms = config.retention_ms;
  // The topic's max.message.bytes is enforced by Produce (ValidateRecords); the log
  // takes any batch up to the largest that setting allows, so lowering it never makes
  // stored batches unreadable and no topic config can make a log fail to open.
  o.max_batch_bytes = kMaxTopicMessageBytes;
  return o;
}

Result<std::unique_ptr<Partition>> MetadataController::OpenPartition(const TopicInfo& topic,
                                                                     int32_t p) {
  auto part = std::make_unique<Partition>();
  part->topic_id = topic.id;
  storage::LogOptions opts = LogOptionsFor(topic.config);
  // On an I/O thread after every write: a wake-up for the owner, only when fetches wait
  // there. The fence pairs with the owner's registration (waiting, then a read of the
  // log): either the owner's read saw the new data or this sees the waiter.
  opts.on_readable = [this, raw = part.get(), key = PartitionKey{topic.name, p}] {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (raw->waiting.load() == 0) return;
    const int owner = raw->shard;
    shards_->PostGated(shards_->at(owner).loop, [this, raw, owner, key] {
      Shard& shard = shards_->at(owner);
      auto it = shard.partitions.find(key);
      if (it != shard.partitions.end() && it->second.get() == raw) options_.wake_fetches(*raw);
    });
  };
  ASSIGN_OR_RETURN(part->log, storage::PartitionLog::Open(PartitionDir(topic.name, p), opts));
  // Epochs first: a bump for a cut log is on disk before anything else reads it.
  ASSIGN_OR_RETURN(part->epochs, LeaderEpochCache::Open(*part->log, unclean_start_));
  RETURN_IF_ERROR(part->producers.Rebuild(*part->log));
  return part;
}

Status MetadataController::Install(PartitionKey key, std::unique_ptr<Partition> part) {
  Partition* raw = part.get();
  RETURN_IF_ERROR(shards_->Place(key, std::move(part)));
  catalog_[key] = raw;
  open_logs_ = catalog_.size();
  UpdateCleaner(key, raw);
  return Status::OK();
}

std::unique_ptr<Partition> MetadataController::Uninstall(const PartitionKey& key) {
  auto it = catalog_.find(key);
  if (it == catalog_.end()) return nullptr;
  cleaner_->Remove(fmt::format("{}-{}", key.first, key.second));  // waits for a cleaning
  // Its waiting fetches look again and find it gone.
  std::unique_ptr<Partition> taken =
      shards_->Take(key, it->second->shard, [this](Partition& p) { options_.wake_fetches(p); });
  if (taken == nullptr) return nullptr;
  catalog_.erase(it);
  open_logs_ = catalog_.size();
  return taken;
}

Status MetadataController::OpenTopicLogs(const TopicInfo& topic) {
  for (int32_t p = 0; p < topic.partitions; ++p) {
    PartitionKey key{topic.name, p};
    if (catalog_.count(key) != 0) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Partition> part, OpenPartition(topic, p));
    RETURN_IF_ERROR(Install(std::move(key), std::move(part)));
  }
  return Status::OK();
}

Status MetadataController::CloseTopicLogs(const std::string& topic, int32_t partitions) {
  Status first;
  for (int32_t p = 0; p < partitions; ++p) {
    std::unique_ptr<Partition> part = Uninstall({topic, p});
    if (part == nullptr) continue;
    // Its syncs run here, on the controller's thread, not on the owner.
    Status st = part->log->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

Status MetadataController::RemoveTopicDirs(const std::string& topic, int32_t partitions) {
  storage::Env* env = options_.env;
  // Rename all first, so a crash never leaves a topic half there under its own name.
  std::vector<std::string> doomed;
  for (int32_t p = 0; p < partitions; ++p) {
    std::string dir = PartitionDir(topic, p);
    if (!env->Exists(dir)) continue;
    std::string gone = dir + "-delete";
    RETURN_IF_ERROR(RemoveTree(gone));
    RETURN_IF_ERROR(env->Rename(dir, gone));
    doomed.push_back(std::move(gone));
  }
  RETURN_IF_ERROR(env->SyncDir(options_.data_dir));
  // TODO(broker): remove in the background (decision 6) once deletions can be large.
  for (const std::string& dir : doomed) RETURN_IF_ERROR(RemoveTree(dir));
  return Status::OK();
}

void MetadataController::ScheduleRetention() {
  if (options_.retention_check_interval_ms <= 0) return;
  retention_timer_ =
      loop_->RunAfter(options_.retention_check_interval_ms, [this] { RunRetention(); });
}

void MetadataController::RunRetention() {
  for (auto& [key, part] : catalog_) {
    // Retention applies to cleanup.policy delete (alone or with compact) only.
    const TopicInfo* topic = topics_->Find(key.first);
    if (topic != nullptr && !topic->config.deletes()) continue;
    Result<int> deleted = part->log->ApplyRetention();
    if (!deleted.ok()) {
      SLUICE_LOG(kLog, kWarn, "retention of {}-{}: {}", key.first, key.second,
                 deleted.status().ToString());
    } else if (*deleted > 0) {
      SLUICE_LOG(kLog, kInfo, "retention deleted {} segments of {}-{}", *deleted, key.first,
                 key.second);
    }
  }
  ScheduleRetention();
}

// ---------------------------------------------------------------------------------------
// Compaction

void MetadataController::UpdateCleaner(const PartitionKey& key, Partition* part) {
  const std::string name = fmt::format("{}-{}", key.first, key.second);
  const TopicInfo* topic = topics_->Find(key.first);
  if (topic == nullptr || !topic->config.compacted()) {
    cleaner_->Remove(name);
    return;
  }
  const TopicConfig& c = topic->config;
  compaction::CleanConfig cc;
  cc.min_cleanable_dirty_ratio = c.min_cleanable_dirty_ratio;
  cc.min_compaction_lag_ms = c.min_compaction_lag_ms;
  cc.max_compaction_lag_ms = c.max_compaction_lag_ms;
  cc.delete_retention_ms = c.delete_retention_ms;
  cc.segment_bytes = static_cast<uint64_t>(c.segment_bytes);
  cleaner_->Add(name, part->log.get(), cc);
}

}  // namespace sluice::broker
