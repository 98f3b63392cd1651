// MetadataController: topics, the partition catalog, producer ids and retention on the
// metadata thread. See metadata_controller.h.
#include "broker/metadata_controller.h"

#include <algorithm>
#include <charconv>
#include <future>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

}  // namespace

LocalLogsOptions LocalLogsOptionsOf(const MetadataControllerOptions& o) {
  LocalLogsOptions l;
  l.data_dir = o.data_dir;
  l.env = o.env;
  l.executor = o.executor;
  l.files = o.files;
  l.flush_policy = o.flush_policy;
  l.flush_ms = o.flush_ms;
  l.cleaner = o.cleaner;
  l.wake_fetches = o.wake_fetches;
  l.remote_store = o.remote_store;
  l.remote_index = o.remote_index;
  return l;
}

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
      logs_(LocalLogsOptionsOf(options_), shards) {}

MetadataController::~MetadataController() { Stop(); }

Status MetadataController::OpenLogs(bool unclean_start) {
  unclean_start_ = unclean_start;
  // This thread stands in for the controller's until Start(): the partitions go to the
  // one provisional shard, spread over the real ones when the server attaches its loops.
  for (const TopicInfo* t : topics_->List()) {
    RETURN_IF_ERROR(OpenTopicLogs(*t));
  }
  SLUICE_LOG(kLog, kInfo, "opened {} topics, {} partitions in {}", topics_->List().size(),
             logs_.count(), options_.data_dir);
  Publish();
  return Status::OK();
}

Status MetadataController::Start() {
  ASSIGN_OR_RETURN(loop_, EventLoop::Create());
  EventLoop* loop = loop_.get();
  thread_ = std::thread([loop] { loop->Run(); });
  loop->Post([this] { ScheduleRetention(); });
  logs_.StartCleaner();
  return Status::OK();
}

void MetadataController::Stop() {
  logs_.StopCleaner();
  if (loop_ == nullptr) return;
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

Status MetadataController::CloseLogs() { return logs_.CloseAll(); }

void MetadataController::FlushLogs() {
  RunAndWait([this] { logs_.FlushAll(); });
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
  const kafka::Uuid topic_id = info->id;
  const bool tiered = info->config.remote_storage_enable;
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
  if (tiered && logs_.uploader() != nullptr) {
    for (int32_t p = 0; p < partitions; ++p) logs_.uploader()->DeleteRemote(name, topic_id, p);
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
  for (int32_t p = 0; p < info->partitions; ++p) logs_.Reconfigure({name, p}, info->config);
  SLUICE_LOG(kLog, kInfo, "topic {}: configs changed", name);
  return {};
}

storage::PartitionLog* MetadataController::LogOf(const std::string& topic, int32_t partition) {
  return logs_.LogOf({topic, partition});
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
      if (const Partition* part = logs_.Find({t->name, p}); part != nullptr) {
        out.leader_epochs[static_cast<size_t>(p)] = part->epochs.latest_epoch();
      }
    }
  }
  publisher_->Publish(std::move(meta));
}

// ---------------------------------------------------------------------------------------
// Partition logs

const TopicConfig* MetadataController::ConfigOf(const std::string& topic) const {
  const TopicInfo* info = topics_->Find(topic);
  return info == nullptr ? nullptr : &info->config;
}

Status MetadataController::OpenTopicLogs(const TopicInfo& topic) {
  for (int32_t p = 0; p < topic.partitions; ++p) {
    PartitionKey key{topic.name, p};
    if (logs_.Find(key) != nullptr) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Partition> part,
                     logs_.Open(topic, p,
                                unclean_start_ ? LeaderEpochCache::Owner::kLocalUncleanStart
                                               : LeaderEpochCache::Owner::kLocal));
    RETURN_IF_ERROR(logs_.Install(key, std::move(part), &topic.config));
  }
  return Status::OK();
}

Status MetadataController::CloseTopicLogs(const std::string& topic, int32_t partitions) {
  Status first;
  for (int32_t p = 0; p < partitions; ++p) {
    // Its syncs run here, on the controller's thread, not on the owner.
    Status st = logs_.Close({topic, p});
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

Status MetadataController::RemoveTopicDirs(const std::string& topic, int32_t partitions) {
  storage::Env* env = options_.env;
  // Rename all first, so a crash never leaves a topic half there under its own name.
  std::vector<std::string> doomed;
  for (int32_t p = 0; p < partitions; ++p) {
    std::string dir = logs_.Dir(topic, p);
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
  logs_.RunRetention([this](const std::string& topic) { return ConfigOf(topic); });
  ScheduleRetention();
}

}  // namespace sluice::broker
