// Broker: request dispatch and the cluster and topic APIs. See broker.h.
#include "broker/broker.h"

#include <algorithm>
#include <charconv>
#include <atomic>
#include <filesystem>
#include <functional>
#include <future>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <type_traits>
#include <variant>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/meta_files.h"
#include "kafka/protocol/records.h"
#include "storage/env.h"

namespace sluice::broker {
namespace {

const Logger kLog("broker");

using kafka::ApiKey;
using kafka::ErrorCode;

constexpr size_t kClusterIdSize = 22;

bool IsClusterId(const std::string& s) {
  return s.size() == kClusterIdSize && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_';
         });
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return IOError("remove {}: {}", path, ec.message());
  return Status::OK();
}

template <typename Body>
void Reply(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
           const Body& body) {
  Response resp;
  kafka::Writer w(&resp.buffer);
  kafka::EncodeResponseHeader(w, static_cast<ApiKey>(h.api_key), h.api_version, h.correlation_id);
  body.Encode(w, h.api_version);
  conn->Send(std::move(resp));
}

// A connection's SASL progress when SASL is on.
// Internal topic names: their directories belong to the broker (the offsets log lives in
// __consumer_offsets-0), so no user topic may take them.
constexpr const char* kCleanShutdownFile = "clean_shutdown";

bool IsReservedTopic(const std::string& name) {
  return name == "__consumer_offsets" || name == "__transaction_state";
}

struct SaslState : Connection::HandlerState {
  enum class Phase {
    kHandshake,     // nothing but ApiVersions and SaslHandshake yet
    kAuthenticate,  // SaslHandshake v1 done: SaslAuthenticate requests carry the tokens
    kRawToken,      // SaslHandshake v0 done: the next frames are bare tokens
    kDone,          // authenticated
  };
  Phase phase = Phase::kHandshake;
  std::unique_ptr<SaslSession> session;
  std::string principal;
};

SaslState& SaslStateOf(Connection& conn) {
  auto& slot = conn.handler_state();
  if (slot == nullptr) slot = std::make_unique<SaslState>();
  return static_cast<SaslState&>(*slot);
}

}  // namespace

Result<std::string> LoadOrCreateClusterId(const std::string& data_dir) {
  storage::Env* env = storage::Env::Posix();
  std::string meta = data_dir + "/meta";
  std::string path = meta + "/cluster_id";
  RETURN_IF_ERROR(env->CreateDirs(meta));
  if (env->Exists(path)) {
    ASSIGN_OR_RETURN(auto file, env->Open(path, storage::OpenMode::kRead));
    std::string text(kClusterIdSize + 2, '\0');
    ASSIGN_OR_RETURN(size_t n, file->ReadAt(0, std::span<uint8_t>(
                                                   reinterpret_cast<uint8_t*>(text.data()), text.size())));
    text.resize(n);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (!IsClusterId(text)) {
      return CorruptionError("{}: not a cluster id (22 characters of URL-safe base64)", path);
    }
    return text;
  }
  std::string id = RandomUuid().ToString();
  SLUICE_ASSERT(IsClusterId(id));
  RETURN_IF_ERROR(WriteFileDurably(env, meta, "cluster_id", id + "\n"));
  SLUICE_LOG(kLog, kInfo, "created cluster id {} in {}", id, path);
  return id;
}

Result<std::unique_ptr<Broker>> Broker::Open(BrokerOptions options) {
  storage::Env* env = storage::Env::Posix();
  RETURN_IF_ERROR(env->CreateDirs(options.data_dir));
  ASSIGN_OR_RETURN(std::string cluster_id, LoadOrCreateClusterId(options.data_dir));
  ASSIGN_OR_RETURN(auto topics, TopicStore::Open(options.data_dir, options.topic_defaults));

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
    ASSIGN_OR_RETURN(size_t n, file->ReadAt(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(text.data()), text.size())));
    text.resize(n);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), producer_id_start);
    if (ec != std::errc() || p != text.data() + text.size() || producer_id_start < 0) {
      return CorruptionError("{}: not a producer id", block_path);
    }
  }

  std::unique_ptr<SaslAuthenticator> sasl;
  if (options.sasl.enabled) {
    ASSIGN_OR_RETURN(sasl, SaslAuthenticator::Create(options.sasl));
  }
  // A clean stop leaves meta/clean_shutdown. Without it the last run died: any partition
  // may have lost unsynced records, so every leader epoch moves on (decision 14). The
  // marker goes before serving, so a crash of this run is seen as one by the next.
  const std::string marker = options.data_dir + "/meta/" + kCleanShutdownFile;
  const bool had_topics = env->Exists(options.data_dir + "/meta/topics.json");
  const bool unclean = had_topics && !env->Exists(marker);
  if (env->Exists(marker)) {
    RETURN_IF_ERROR(env->Remove(marker));
    RETURN_IF_ERROR(env->SyncDir(options.data_dir + "/meta"));
  }
  if (unclean) SLUICE_LOG(kLog, kWarn, "the last run did not stop cleanly: leader epochs move on");
  std::unique_ptr<Broker> broker(new Broker(std::move(options), std::move(cluster_id)));
  broker->unclean_start_ = unclean;
  broker->sasl_ = std::move(sasl);
  GroupCoordinatorOptions go = broker->options_.groups;
  go.dir = broker->options_.data_dir + "/__consumer_offsets-0";
  go.executor = broker->executor_.get();
  go.files = broker->files_.get();
  // Commits are answered once durable (docs/design/0003): the offsets log syncs each write
  // group at once rather than on the data logs' interval, or every synchronous commit
  // would wait up to flush_ms (a pipeline committing per batch did ~10 batches/s).
  go.flush_policy = storage::FlushPolicy::kDurable;
  go.flush_ms = broker->options_.flush_ms;
  Broker* b = broker.get();
  go.partition_exists = [b](const std::string& topic, int32_t partition) {
    std::shared_ptr<const MetadataSnapshot> meta = b->Snapshot();
    const MetadataSnapshot::Topic* t = meta->Find(topic);
    return t != nullptr && partition >= 0 && partition < t->info.partitions;
  };
  ASSIGN_OR_RETURN(broker->groups_, GroupCoordinator::Open(std::move(go)));
  // This thread stands in for the metadata thread until that starts: the partitions go
  // to the one provisional shard, spread over the real ones by OnServerStart.
  broker->next_producer_id_ = broker->producer_id_block_end_ = producer_id_start;
  broker->topics_ = std::move(topics);
  for (const TopicInfo* t : broker->topics_->List()) {
    RETURN_IF_ERROR(broker->OpenTopicLogsMeta(*t));
  }
  SLUICE_LOG(kLog, kInfo, "opened {} topics, {} partitions in {}", broker->topics_->List().size(),
             broker->catalog_.size(), broker->options_.data_dir);
  broker->PublishMeta();
  ASSIGN_OR_RETURN(broker->meta_loop_, EventLoop::Create());
  EventLoop* meta = broker->meta_loop_.get();
  broker->meta_thread_ = std::thread([meta] { meta->Run(); });
  meta->Post([b] { b->ScheduleRetentionMeta(); });
  return broker;
}

Broker::Broker(BrokerOptions options, std::string cluster_id)
    : options_(std::move(options)),
      cluster_id_(std::move(cluster_id)),
      executor_(std::make_unique<storage::IoExecutor>(std::max(1, options_.io_threads))),
      files_(std::make_unique<storage::FileCache>(storage::Env::Posix(), options_.max_open_files)),
      advertised_host_(options_.advertised_host),
      advertised_port_(options_.advertised_port) {
  shards_.push_back(std::make_unique<Shard>());
  auto empty = std::make_shared<MetadataSnapshot>();
  empty->advertised_host = advertised_host_;
  empty->advertised_port = advertised_port_;
  published_ = std::move(empty);
}

Broker::~Broker() {
  if (Status st = Close(); !st.ok()) {
    SLUICE_LOG(kLog, kError, "closing logs: {}", st.ToString());
  }
  // Joins the I/O threads while the logs' owners still exist.
  executor_.reset();
}

void Broker::SetAdvertisedAddress(std::string host, int32_t port) {
  std::lock_guard lock(publish_mu_);
  advertised_host_ = std::move(host);
  advertised_port_ = port;
  auto meta = std::make_shared<MetadataSnapshot>(*published_);
  meta->advertised_host = advertised_host_;
  meta->advertised_port = advertised_port_;
  published_ = std::move(meta);
  metadata_version_.fetch_add(1, std::memory_order_release);
}

std::shared_ptr<const MetadataSnapshot> Broker::Snapshot() const {
  std::lock_guard lock(publish_mu_);
  return published_;
}

const MetadataSnapshot::Topic* MetadataSnapshot::FindById(const kafka::Uuid& id) const {
  // Linear: Fetch v13+ only, and a single node has few topics. An index would have to be
  // rebuilt whenever a snapshot is copied.
  for (const auto& [name, topic] : topics) {
    if (topic.info.id == id) return &topic;
  }
  return nullptr;
}

Status Broker::Close() {
  // The coordinator first: its thread asks partition_exists.
  Status first;
  if (groups_ != nullptr) {
    first = groups_->Close();
    groups_.reset();
  }
  // Then the metadata thread: from here on this thread owns what it owned, and (the
  // server having stopped) every shard's partitions.
  if (meta_loop_ != nullptr) {
    meta_loop_->Stop();
    if (meta_thread_.joinable()) meta_thread_.join();
    meta_loop_.reset();
  }
  if (closed_) return first;
  closed_ = true;
  const bool was_open = !catalog_.empty() || topics_ != nullptr;
  for (auto& shard : shards_) {
    for (auto& [key, part] : shard->partitions) {
      Status st = part->log->Close();
      if (!st.ok() && first.ok()) first = st;
    }
    shard->partitions.clear();
  }
  catalog_.clear();
  open_logs_ = 0;
  if (first.ok() && was_open && !clean_marked_) {
    // Every log closed with its data synced: the next start is a clean one.
    first = WriteFileDurably(storage::Env::Posix(), options_.data_dir + "/meta",
                             kCleanShutdownFile, "");
    clean_marked_ = first.ok();
  }
  return first;
}

void Broker::ScheduleRetentionMeta() {
  if (options_.retention_check_interval_ms <= 0) return;
  retention_timer_ =
      meta_loop_->RunAfter(options_.retention_check_interval_ms, [this] { RunRetentionMeta(); });
}

void Broker::RunRetentionMeta() {
  for (auto& [key, part] : catalog_) {
    Result<int> deleted = part->log->ApplyRetention();
    if (!deleted.ok()) {
      SLUICE_LOG(kLog, kWarn, "retention of {}-{}: {}", key.first, key.second,
                 deleted.status().ToString());
    } else if (*deleted > 0) {
      SLUICE_LOG(kLog, kInfo, "retention deleted {} segments of {}-{}", *deleted, key.first, key.second);
    }
  }
  ScheduleRetentionMeta();
}

bool Broker::AutoCreateMeta(const std::string& name) {
  if (!options_.auto_create_topics || !ValidateTopicName(name).ok() || IsReservedTopic(name)) {
    return false;
  }
  TopicInfo info;
  TopicError err = topics_->Create(name, options_.num_partitions, {}, false, &info);
  if (!err.ok()) return false;
  if (Status st = OpenTopicLogsMeta(info); !st.ok()) {
    SLUICE_LOG(kLog, kError, "auto-creating topic {}: {}", name, st.ToString());
    if (TopicError undo = DeleteTopicMeta(name); !undo.ok()) {
      SLUICE_LOG(kLog, kError, "undoing topic {}: {}", name, undo.message);
    }
    return false;
  }
  SLUICE_LOG(kLog, kInfo, "auto-created topic {} ({} partitions)", name, options_.num_partitions);
  return true;
}

void Broker::PublishMeta() {
  auto meta = std::make_shared<MetadataSnapshot>();
  for (const TopicInfo* t : topics_->List()) {
    MetadataSnapshot::Topic& out = meta->topics[t->name];
    out.info = *t;
    out.leader_epochs.assign(static_cast<size_t>(std::max(t->partitions, 0)), 0);
    for (int32_t p = 0; p < t->partitions; ++p) {
      // Epochs never change after open: reading them here is safe.
      auto it = catalog_.find({t->name, p});
      if (it != catalog_.end()) out.leader_epochs[static_cast<size_t>(p)] = it->second->epochs.latest_epoch();
    }
  }
  std::lock_guard lock(publish_mu_);
  meta->advertised_host = advertised_host_;
  meta->advertised_port = advertised_port_;
  published_ = std::move(meta);
  metadata_version_.fetch_add(1, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------
// Shards and posting

int Broker::OwnerOf(const kafka::Uuid& topic_id, int32_t partition, int shards) {
  if (shards <= 1) return 0;
  // A topic's partitions go round robin from a shard its id picks, so each topic spreads
  // evenly and different topics start at different shards.
  uint64_t h = topic_id.hi ^ (topic_id.lo * 0x9E3779B97F4A7C15ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  const uint64_t n = static_cast<uint64_t>(shards);
  return static_cast<int>((h % n + static_cast<uint64_t>(static_cast<uint32_t>(partition)) % n) % n);
}

void Broker::OnServerStart(const std::vector<EventLoop*>& loops) {
  SLUICE_ASSERT(!attached_ && !loops.empty());
  std::vector<std::unique_ptr<Shard>> shards;
  for (size_t i = 0; i < loops.size(); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->loop = loops[i];
    shard->index = static_cast<int>(i);
    shards.push_back(std::move(shard));
  }
  const int n = static_cast<int>(shards.size());
  for (auto& provisional : shards_) {
    for (auto& [key, part] : provisional->partitions) {
      part->shard = OwnerOf(part->topic_id, key.second, n);
      shards[static_cast<size_t>(part->shard)]->partitions.emplace(key, std::move(part));
    }
  }
  shards_ = std::move(shards);
  attached_ = true;
}

void Broker::OnServerStop() { StopWaking(); }

Broker::Shard& Broker::ShardOf(EventLoop* loop) {
  for (auto& shard : shards_) {
    if (shard->loop == loop) return *shard;
  }
  SLUICE_ASSERT(false && "a request on a loop the broker was not given");
  return *shards_[0];
}

const MetadataSnapshot& Broker::SnapshotFor(Shard& shard) {
  const uint64_t version = metadata_version_.load(std::memory_order_acquire);
  if (shard.metadata == nullptr || shard.metadata_version != version) {
    std::lock_guard lock(publish_mu_);
    shard.metadata = published_;
    shard.metadata_version = metadata_version_.load(std::memory_order_relaxed);
  }
  return *shard.metadata;
}

Broker::Target Broker::TargetOf(const MetadataSnapshot::Topic* topic, const std::string& name,
                                int32_t p) const {
  Target t;
  t.key = {name, p};
  if (topic == nullptr || p < 0 || p >= topic->info.partitions) return t;
  t.topic_id = topic->info.id;
  t.shard = OwnerOf(topic->info.id, p, static_cast<int>(shards_.size()));
  return t;
}

bool Broker::PostGated(EventLoop* loop, std::function<void()> task) {
  // Sequentially consistent with StopWaking(): either it sees this post counted, or this
  // post sees the gate closed.
  posting_.fetch_add(1);
  const bool open = !waking_stopped_.load();
  if (open) loop->Post(std::move(task));
  posting_.fetch_sub(1);
  return open;
}

void Broker::PostToLoop(Connection& conn, std::function<void()> task) {
  PostGated(conn.loop(), std::move(task));
}

void Broker::StopWaking() {
  waking_stopped_.store(true);
  while (posting_.load() != 0) std::this_thread::yield();
}

void Broker::VisitOwners(Shard& home, std::vector<Target> targets,
                         std::function<void(Partition*, size_t)> visit,
                         std::function<void()> done) {
  struct Job {
    std::vector<Target> targets;
    std::function<void(Partition*, size_t)> visit;
    std::function<void()> done;
    int outstanding = 1;  // home's thread only; the dispatch below holds one
  };
  auto job = std::make_shared<Job>();
  job->targets = std::move(targets);
  job->visit = std::move(visit);
  job->done = std::move(done);
  std::vector<std::vector<size_t>> by_shard(shards_.size());
  for (size_t i = 0; i < job->targets.size(); ++i) {
    const int s = job->targets[i].shard;
    if (s < 0) {
      job->visit(nullptr, i);
    } else {
      by_shard[static_cast<size_t>(s)].push_back(i);
    }
  }
  // On shard s's thread: its partitions, found by name and checked by topic id (a topic
  // deleted and created again under its name is another partition).
  auto run = [this](Job& j, size_t s, const std::vector<size_t>& indexes) {
    Shard& shard = *shards_[s];
    for (size_t i : indexes) {
      const Target& t = j.targets[i];
      auto it = shard.partitions.find(t.key);
      Partition* part = it != shard.partitions.end() && it->second->topic_id == t.topic_id
                            ? it->second.get()
                            : nullptr;
      j.visit(part, i);
    }
  };
  EventLoop* home_loop = home.loop;
  for (size_t s = 0; s < by_shard.size(); ++s) {
    if (by_shard[s].empty()) continue;
    if (static_cast<int>(s) == home.index) {
      run(*job, s, by_shard[s]);
      continue;
    }
    ++job->outstanding;
    bool posted = PostGated(shards_[s]->loop, [this, job, s, run, home_loop,
                                               indexes = std::move(by_shard[s])] {
      run(*job, s, indexes);
      PostGated(home_loop, [job] {
        if (--job->outstanding == 0) job->done();
      });
    });
    if (!posted) return;  // stopping: this request gets no answer
  }
  if (--job->outstanding == 0) job->done();
}

bool Broker::RunOnShard(int shard, const std::function<void()>& fn) {
  if (!attached_) {
    fn();  // before the server: this thread owns the provisional shard
    return true;
  }
  // Only the task holds the promise: a task destroyed unrun (its loop went away) breaks
  // it, which ends the wait too.
  auto promise = std::make_shared<std::promise<void>>();
  std::future<void> finished = promise->get_future();
  auto ran = std::make_shared<std::atomic<bool>>(false);
  if (!PostGated(shards_[static_cast<size_t>(shard)]->loop,
                 [&fn, promise = std::move(promise), ran] {
                   fn();
                   ran->store(true);
                   promise->set_value();
                 })) {
    return false;
  }
  finished.wait();
  return ran->load();
}

void Broker::RunOnMetadata(const std::function<void()>& fn) {
  if (meta_loop_ == nullptr) {
    fn();
    return;
  }
  SLUICE_ASSERT(!meta_loop_->InLoopThread());
  std::promise<void> finished;
  meta_loop_->Post([&] {
    fn();
    finished.set_value();
  });
  finished.get_future().wait();
}

template <typename Fn>
void Broker::ToMetadata(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                        Fn fn) {
  meta_loop_->Post([this, conn, h, fn = std::move(fn)]() mutable {
    auto body = std::make_shared<decltype(fn())>(fn());
    PostToLoop(*conn, [conn, h, body] { Reply(conn, h, *body); });
  });
}

// ---------------------------------------------------------------------------------------
// Dispatch

void Broker::OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) {
  SaslState* sasl = sasl_ != nullptr ? &SaslStateOf(*conn) : nullptr;
  if (sasl != nullptr && sasl->phase == SaslState::Phase::kRawToken) {
    SaslRawToken(conn, frame);
    return;
  }
  // Shared: produce records are views into it, read on their partitions' owner shards.
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(frame));
  kafka::DecodeOutcome out = kafka::DecodeRequest(*owned);
  switch (out.problem) {
    case kafka::RequestProblem::kNone: {
      const auto key = static_cast<ApiKey>(out.request->header.api_key);
      if (sasl != nullptr && sasl->phase != SaslState::Phase::kDone &&
          key != ApiKey::kApiVersions && key != ApiKey::kSaslHandshake &&
          key != ApiKey::kSaslAuthenticate) {
        // As Kafka: anything else before authentication ends the connection.
        SLUICE_LOG(kLog, kWarn, "closing connection: {} before SASL authentication",
                   kafka::ApiName(key));
        conn->Close();
        return;
      }
      Handle(conn, owned, *out.request);
      return;
    }
    case kafka::RequestProblem::kUnsupportedVersion:
      if (out.header && out.header->api_key == static_cast<int16_t>(ApiKey::kApiVersions)) {
        // Kafka answers with the v0 body and a v0 header, whatever the version asked.
        Response resp;
        kafka::Writer w(&resp.buffer);
        w.Int32(out.header->correlation_id);
        kafka::EncodeApiVersionsV0Fallback(w, ErrorCode::kUnsupportedVersion);
        conn->Send(std::move(resp));
        return;
      }
      break;
    case kafka::RequestProblem::kMalformed:
    case kafka::RequestProblem::kUnknownApi:
      break;
  }
  SLUICE_LOG(kLog, kWarn, "closing connection: {}", out.status.ToString());
  conn->Close();
}


void Broker::Handle(const std::shared_ptr<Connection>& conn,
                    const std::shared_ptr<const std::vector<uint8_t>>& frame,
                    const kafka::DecodedRequest& req) {
  const kafka::RequestHeader& h = req.header;
  const int16_t v = h.api_version;
  bool served = std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, kafka::ApiVersionsRequest>) {
          Reply(conn, h, ApiVersions());
        } else if constexpr (std::is_same_v<T, kafka::MetadataRequest>) {
          Metadata(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::CreateTopicsRequest>) {
          ToMetadata(conn, h, [this, body] { return CreateTopicsMeta(body); });
        } else if constexpr (std::is_same_v<T, kafka::DeleteTopicsRequest>) {
          ToMetadata(conn, h, [this, body, v] { return DeleteTopicsMeta(body, v); });
        } else if constexpr (std::is_same_v<T, kafka::DescribeClusterRequest>) {
          Reply(conn, h, DescribeCluster(SnapshotFor(ShardOf(conn->loop()))));
        } else if constexpr (std::is_same_v<T, kafka::InitProducerIdRequest>) {
          ToMetadata(conn, h, [this, body] { return InitProducerIdMeta(body); });
        } else if constexpr (std::is_same_v<T, kafka::ProduceRequest>) {
          Produce(conn, frame, h, body);
        } else if constexpr (std::is_same_v<T, kafka::FetchRequest>) {
          Fetch(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::ListOffsetsRequest>) {
          ListOffsets(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::CreatePartitionsRequest>) {
          ToMetadata(conn, h, [this, body] { return CreatePartitionsMeta(body); });
        } else if constexpr (std::is_same_v<T, kafka::DescribeConfigsRequest>) {
          Reply(conn, h, DescribeConfigs(SnapshotFor(ShardOf(conn->loop())), body, v));
        } else if constexpr (std::is_same_v<T, kafka::AlterConfigsRequest>) {
          ToMetadata(conn, h, [this, body] { return AlterConfigsMeta(body); });
        } else if constexpr (std::is_same_v<T, kafka::IncrementalAlterConfigsRequest>) {
          ToMetadata(conn, h, [this, body] { return IncrementalAlterConfigsMeta(body); });
        } else if constexpr (std::is_same_v<T, kafka::DeleteRecordsRequest>) {
          ToMetadata(conn, h, [this, body] { return DeleteRecordsMeta(body); });
        } else if constexpr (std::is_same_v<T, kafka::OffsetForLeaderEpochRequest>) {
          OffsetForLeaderEpoch(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::FindCoordinatorRequest>) {
          Reply(conn, h, FindCoordinator(SnapshotFor(ShardOf(conn->loop())), body, v));
        } else if constexpr (std::is_same_v<T, kafka::JoinGroupRequest>) {
          kafka::JoinGroupRequest copy = body;
          GroupClient client{h.client_id.value_or(""), "/" + conn->peer_host()};
          auto* groups = groups_.get();
          ToCoordinator<kafka::JoinGroupResponse>(
              conn, h, copy, [groups, client, v = h.api_version](auto&& r, auto&& done) {
                groups->JoinGroup(std::move(r), v, client, std::move(done));
              });
        } else if constexpr (std::is_same_v<T, kafka::SyncGroupRequest>) {
          ToCoordinator<kafka::SyncGroupResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->SyncGroup(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::HeartbeatRequest>) {
          ToCoordinator<kafka::HeartbeatResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->Heartbeat(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::LeaveGroupRequest>) {
          ToCoordinator<kafka::LeaveGroupResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->LeaveGroup(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::OffsetCommitRequest>) {
          ToCoordinator<kafka::OffsetCommitResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->OffsetCommit(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::OffsetFetchRequest>) {
          ToCoordinator<kafka::OffsetFetchResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->OffsetFetch(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::ListGroupsRequest>) {
          ToCoordinator<kafka::ListGroupsResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->ListGroups(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::DescribeGroupsRequest>) {
          ToCoordinator<kafka::DescribeGroupsResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->DescribeGroups(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::DeleteGroupsRequest>) {
          ToCoordinator<kafka::DeleteGroupsResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->DeleteGroups(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::SaslHandshakeRequest>) {
          SaslHandshake(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::SaslAuthenticateRequest>) {
          SaslAuthenticate(conn, h, body);
        } else {
          return false;
        }
        return true;
      },
      req.body);
  if (!served) {
    // Advertised (so clients see the whole surface) but not served yet.
    SLUICE_LOG(kLog, kWarn, "closing connection: {} v{} is not served yet",
               kafka::ApiName(static_cast<ApiKey>(h.api_key)), h.api_version);
    conn->Close();
  }
}

void Broker::SaslHandshake(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                           const kafka::SaslHandshakeRequest& req) {
  kafka::SaslHandshakeResponse resp;
  if (sasl_ == nullptr) {
    // A plaintext listener, as Kafka answers it: no SASL exchange is expected here.
    resp.error_code = ErrorCode::kIllegalSaslState;
    Reply(conn, h, resp);
    return;
  }
  SaslState& st = SaslStateOf(*conn);
  resp.mechanisms = sasl_->mechanisms();
  if (st.phase != SaslState::Phase::kHandshake) {
    resp.error_code = ErrorCode::kIllegalSaslState;
    Reply(conn, h, resp);
    return;
  }
  st.session = sasl_->Start(req.mechanism);
  if (st.session == nullptr) {
    resp.error_code = ErrorCode::kUnsupportedSaslMechanism;
    Reply(conn, h, resp);
    return;
  }
  st.phase = h.api_version == 0 ? SaslState::Phase::kRawToken : SaslState::Phase::kAuthenticate;
  Reply(conn, h, resp);
}

void Broker::SaslAuthenticate(const std::shared_ptr<Connection>& conn,
                              const kafka::RequestHeader& h,
                              const kafka::SaslAuthenticateRequest& req) {
  kafka::SaslAuthenticateResponse resp;
  SaslState* st = sasl_ != nullptr ? &SaslStateOf(*conn) : nullptr;
  if (st != nullptr && st->phase == SaslState::Phase::kDone) {
    // Kafka: answered, and the authenticated connection stays open.
    resp.error_code = ErrorCode::kIllegalSaslState;
    resp.error_message = "SaslAuthenticate received after successful authentication";
    Reply(conn, h, resp);
    return;
  }
  if (st == nullptr || st->phase != SaslState::Phase::kAuthenticate) {
    resp.error_code = ErrorCode::kIllegalSaslState;
    resp.error_message = "SaslAuthenticate without a SaslHandshake v1 first";
    Response out;
    kafka::Writer w(&out.buffer);
    kafka::EncodeResponseHeader(w, ApiKey::kSaslAuthenticate, h.api_version, h.correlation_id);
    resp.Encode(w, h.api_version);
    conn->SendAndClose(std::move(out));
    return;
  }
  SaslSession::Step step = st->session->Next(req.auth_bytes);
  resp.auth_bytes = std::move(step.response);
  Response out;
  kafka::Writer w(&out.buffer);
  kafka::EncodeResponseHeader(w, ApiKey::kSaslAuthenticate, h.api_version, h.correlation_id);
  switch (step.state) {
    case SaslSession::State::kInProgress:
      resp.Encode(w, h.api_version);
      conn->Send(std::move(out));
      return;
    case SaslSession::State::kSucceeded:
      st->phase = SaslState::Phase::kDone;
      conn->SetAuthenticated();
      st->principal = st->session->principal();
      st->session.reset();
      SLUICE_LOG(kLog, kDebug, "SASL: authenticated {}", st->principal);
      resp.Encode(w, h.api_version);
      conn->Send(std::move(out));
      return;
    case SaslSession::State::kFailed:
      SLUICE_LOG(kLog, kInfo, "SASL: authentication failed: {}", step.error);
      resp.error_code = ErrorCode::kSaslAuthenticationFailed;
      resp.error_message = step.error;
      resp.auth_bytes.clear();
      resp.Encode(w, h.api_version);
      conn->SendAndClose(std::move(out));
      return;
  }
}

void Broker::SaslRawToken(const std::shared_ptr<Connection>& conn, std::span<const uint8_t> token) {
  SaslState& st = SaslStateOf(*conn);
  SaslSession::Step step = st.session->Next(token);
  if (step.state == SaslSession::State::kFailed) {
    // The unframed exchange has no way to say why: Kafka closes the connection too.
    SLUICE_LOG(kLog, kInfo, "SASL: authentication failed: {}", step.error);
    conn->Close();
    return;
  }
  if (step.state == SaslSession::State::kSucceeded) {
    st.phase = SaslState::Phase::kDone;
    conn->SetAuthenticated();
    st.principal = st.session->principal();
    st.session.reset();
  }
  Response out;
  out.buffer = std::move(step.response);
  conn->Send(std::move(out));
}

template <typename Resp, typename Req, typename Method>
void Broker::ToCoordinator(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                           const Req& req, Method method) {
  Req copy = req;  // the coordinator's thread reads it after the frame is gone
  GroupCoordinator::Done<Resp> done = [this, conn, h](Resp resp) {
    auto shared = std::make_shared<Resp>(std::move(resp));
    PostToLoop(*conn, [conn, h, shared] { Reply(conn, h, *shared); });
  };
  method(std::move(copy), std::move(done));
}

kafka::FindCoordinatorResponse Broker::FindCoordinator(const MetadataSnapshot& meta,
                                                       const kafka::FindCoordinatorRequest& req,
                                                       int16_t version) {
  kafka::FindCoordinatorResponse resp;
  const std::string& host = meta.advertised_host;
  const int32_t port = meta.advertised_port;
  // Transactions (key type 1) have no coordinator: there are no transactions yet.
  const bool served = req.key_type == 0;
  const ErrorCode error = served                ? ErrorCode::kNone
                          : req.key_type == 1 ? ErrorCode::kCoordinatorNotAvailable
                                              : ErrorCode::kInvalidRequest;
  if (version >= 4) {
    for (const std::string& key : req.coordinator_keys) {
      kafka::FindCoordinatorResponse::Coordinator c;
      c.key = key;
      c.node_id = served ? kNodeId : -1;
      c.host = served ? host : "";
      c.port = served ? port : -1;
      c.error_code = error;
      if (!served) c.error_message = "transactions are not supported";
      resp.coordinators.push_back(std::move(c));
    }
    return resp;
  }
  resp.error_code = error;
  resp.node_id = served ? kNodeId : -1;
  resp.host = served ? host : "";
  resp.port = served ? port : -1;
  if (!served) resp.error_message = "transactions are not supported";
  return resp;
}

kafka::ApiVersionsResponse Broker::ApiVersions() const {
  kafka::ApiVersionsResponse resp;
  for (const kafka::ApiVersionRange& supported : kafka::SupportedApis()) {
    const kafka::ApiVersionRange a = kafka::AdvertisedRange(supported);  // Produce from v0
    resp.api_keys.push_back({static_cast<int16_t>(a.key), a.min, a.max, {}});
  }
  return resp;
}

void Broker::Metadata(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                      const kafka::MetadataRequest& req) {
  std::vector<std::string> missing;
  kafka::MetadataResponse resp =
      MetadataFrom(SnapshotFor(ShardOf(conn->loop())), req, h.api_version, &missing);
  if (missing.empty() || !options_.auto_create_topics) {
    Reply(conn, h, resp);
    return;
  }
  // Topics to create: the metadata thread creates them and answers from its snapshot.
  ToMetadata(conn, h, [this, req, missing, v = h.api_version] {
    bool created = false;
    for (const std::string& name : missing) {
      if (topics_->Find(name) == nullptr) created |= AutoCreateMeta(name);
    }
    if (created) PublishMeta();
    std::vector<std::string> still;
    return MetadataFrom(*Snapshot(), req, v, &still);
  });
}

kafka::MetadataResponse Broker::MetadataFrom(const MetadataSnapshot& meta,
                                             const kafka::MetadataRequest& req, int16_t version,
                                             std::vector<std::string>* missing) const {
  kafka::MetadataResponse resp;
  resp.cluster_id = cluster_id_;
  resp.controller_id = kNodeId;

  auto describe = [](const MetadataSnapshot::Topic& t) {
    kafka::MetadataResponse::Topic out;
    out.name = t.info.name;
    out.topic_id = t.info.id;
    for (int32_t p = 0; p < t.info.partitions; ++p) {
      kafka::MetadataResponse::Partition part;
      part.partition_index = p;
      part.leader_id = kNodeId;
      part.leader_epoch = t.leader_epochs[static_cast<size_t>(p)];
      part.replica_nodes = {kNodeId};
      part.isr_nodes = {kNodeId};
      out.partitions.push_back(std::move(part));
    }
    return out;
  };

  resp.brokers.push_back({kNodeId, meta.advertised_host, meta.advertised_port, std::nullopt, {}});
  // Null asks for every topic, and so does an empty array in v0.
  const bool all = !req.topics.has_value() || (version == 0 && req.topics->empty());
  if (all) {
    for (const auto& [name, t] : meta.topics) resp.topics.push_back(describe(t));
    return resp;
  }
  for (const kafka::MetadataRequest::Topic& want : *req.topics) {
    const MetadataSnapshot::Topic* found = nullptr;
    kafka::MetadataResponse::Topic out;
    out.name = want.name;
    out.topic_id = want.topic_id;
    if (want.name.has_value()) {
      found = meta.Find(*want.name);
      if (found == nullptr) {
        if (version < 4 || req.allow_auto_topic_creation) missing->push_back(*want.name);
        out.error_code = ValidateTopicName(*want.name).ok() ? ErrorCode::kUnknownTopicOrPartition
                                                            : ErrorCode::kInvalidTopicException;
      }
    } else {
      found = meta.FindById(want.topic_id);
      if (found == nullptr) out.error_code = ErrorCode::kUnknownTopicId;
    }
    resp.topics.push_back(found != nullptr ? describe(*found) : std::move(out));
  }
  return resp;
}

kafka::CreateTopicsResponse Broker::CreateTopicsMeta(const kafka::CreateTopicsRequest& req) {
  kafka::CreateTopicsResponse resp;
  std::map<std::string, int> seen;
  for (const auto& t : req.topics) ++seen[t.name];

  for (const auto& t : req.topics) {
    kafka::CreateTopicsResponse::Topic out;
    out.name = t.name;
    auto fail = [&](ErrorCode code, std::string message) {
      out.error_code = code;
      out.error_message = std::move(message);
      resp.topics.push_back(std::move(out));
    };
    if (seen[t.name] > 1) {
      fail(ErrorCode::kInvalidRequest,
           fmt::format("topic '{}' appears more than once in the request", t.name));
      continue;
    }
    if (IsReservedTopic(t.name)) {
      fail(ErrorCode::kTopicAlreadyExists,
           fmt::format("{} is reserved for the broker's internal use", t.name));
      continue;
    }
    if (!t.assignments.empty()) {
      fail(ErrorCode::kInvalidRequest,
           "replica assignments are not supported: sluice has one broker; give num_partitions");
      continue;
    }
    if (t.replication_factor != -1 && t.replication_factor != 1) {
      fail(ErrorCode::kInvalidReplicationFactor,
           fmt::format("replication factor {} is larger than the 1 available broker",
                       t.replication_factor));
      continue;
    }
    std::map<std::string, std::string> overrides;
    bool null_config = false;
    for (const auto& c : t.configs) {
      if (!c.value.has_value()) {
        fail(ErrorCode::kInvalidConfig, fmt::format("config '{}' has a null value", c.name));
        null_config = true;
        break;
      }
      overrides[c.name] = *c.value;
    }
    if (null_config) continue;

    const int32_t partitions = t.num_partitions == -1 ? 1 : t.num_partitions;
    TopicInfo info;
    TopicError err = topics_->Create(t.name, partitions, overrides, req.validate_only, &info);
    if (!err.ok()) {
      fail(err.code, err.message);
      continue;
    }
    if (!req.validate_only) {
      if (Status st = OpenTopicLogsMeta(info); !st.ok()) {
        SLUICE_LOG(kLog, kError, "creating topic {}: {}", t.name, st.ToString());
        if (TopicError undo = DeleteTopicMeta(t.name); !undo.ok()) {
          SLUICE_LOG(kLog, kError, "undoing topic {}: {}", t.name, undo.message);
        }
        fail(ErrorCode::kKafkaStorageError, st.ToString());
        continue;
      }
      SLUICE_LOG(kLog, kInfo, "created topic {} ({} partitions, id {})", t.name, partitions,
                 info.id.ToString());
    }
    out.topic_id = info.id;  // zero for validate_only, as in Kafka
    out.num_partitions = partitions;
    out.replication_factor = 1;
    resp.topics.push_back(std::move(out));
  }
  if (!req.validate_only) PublishMeta();
  return resp;
}

kafka::DeleteTopicsResponse Broker::DeleteTopicsMeta(const kafka::DeleteTopicsRequest& req,
                                                     int16_t version) {
  kafka::DeleteTopicsResponse resp;
  std::vector<kafka::DeleteTopicsRequest::Topic> wanted = req.topics;
  if (version < 6) {
    for (const std::string& name : req.topic_names) wanted.push_back({name, {}, {}});
  }
  for (const auto& want : wanted) {
    kafka::DeleteTopicsResponse::Result out;
    out.name = want.name;
    out.topic_id = want.topic_id;
    const TopicInfo* info = want.name ? topics_->Find(*want.name) : topics_->FindById(want.topic_id);
    if (info == nullptr) {
      out.error_code = want.name ? ErrorCode::kUnknownTopicOrPartition : ErrorCode::kUnknownTopicId;
      out.error_message = want.name ? fmt::format("topic '{}' does not exist", *want.name)
                                    : fmt::format("no topic has id {}", want.topic_id.ToString());
      resp.responses.push_back(std::move(out));
      continue;
    }
    out.name = info->name;
    out.topic_id = info->id;
    std::string name = info->name;
    TopicError err = DeleteTopicMeta(name);
    if (!err.ok()) {
      out.error_code = err.code;
      out.error_message = err.message;
    } else {
      SLUICE_LOG(kLog, kInfo, "deleted topic {}", name);
      if (groups_ != nullptr) groups_->OnTopicDeleted(name);
    }
    resp.responses.push_back(std::move(out));
  }
  PublishMeta();
  return resp;
}

kafka::InitProducerIdResponse Broker::InitProducerIdMeta(const kafka::InitProducerIdRequest& req) {
  kafka::InitProducerIdResponse resp;
  if (req.transactional_id.has_value()) {
    // No transaction coordinator yet: only idempotent producers are served.
    resp.error_code = ErrorCode::kInvalidRequest;
    return resp;
  }
  if (req.producer_id >= 0 && req.producer_epoch >= 0 && req.producer_epoch < INT16_MAX - 1) {
    // A producer asking for its next epoch (KIP-360) keeps its id.
    resp.producer_id = req.producer_id;
    resp.producer_epoch = static_cast<int16_t>(req.producer_epoch + 1);
    return resp;
  }
  if (next_producer_id_ >= producer_id_block_end_) {
    constexpr int64_t kBlock = 1000;
    int64_t end = next_producer_id_ + kBlock;
    Status st = WriteFileDurably(storage::Env::Posix(), options_.data_dir + "/meta",
                                 "producer_id_block", std::to_string(end) + "\n");
    if (!st.ok()) {
      SLUICE_LOG(kLog, kError, "reserving producer ids: {}", st.ToString());
      resp.error_code = ErrorCode::kKafkaStorageError;
      return resp;
    }
    producer_id_block_end_ = end;
  }
  resp.producer_id = next_producer_id_++;
  resp.producer_epoch = 0;
  return resp;
}

kafka::DescribeClusterResponse Broker::DescribeCluster(const MetadataSnapshot& meta) const {
  kafka::DescribeClusterResponse resp;
  resp.cluster_id = cluster_id_;
  resp.controller_id = kNodeId;
  resp.brokers.push_back({kNodeId, meta.advertised_host, meta.advertised_port, std::nullopt, {}});
  return resp;
}

// ---------------------------------------------------------------------------------------
// Produce, Fetch, ListOffsets

namespace {

// A produce request whose appends are in flight: the response, filled in by the owner
// shards and the append callbacks (each writes only its own partition entry), and how
// many are still out. The connection's shard holds one count itself until every owner
// has queued its appends, so the last callback cannot answer before the response is
// complete. The counter's acquire/release orders the entries' writes before the answer.
struct PendingProduce {
  Broker* broker;
  std::shared_ptr<Connection> conn;
  kafka::RequestHeader header;
  kafka::ProduceResponse resp;
  std::shared_ptr<const std::vector<uint8_t>> frame;  // the records, until appended
  std::atomic<int> outstanding{1};
  bool acks0 = false;

  // Called once per count; the last one answers on the connection's loop.
  static void Release(const std::shared_ptr<PendingProduce>& p) {
    if (p->outstanding.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    p->broker->PostToLoop(*p->conn, [p] {
      if (p->acks0) return;  // already finished
      Reply(p->conn, p->header, p->resp);
    });
  }
};

// One validated batch for its partition's owner.
struct ProduceAppend {
  size_t topic;      // index in the request and the response
  size_t partition;  // index in the topic's list
  ProducerBatch batch;
  bool log_append_time = false;
  std::span<const uint8_t> records;  // in PendingProduce::frame
};

}  // namespace

void Broker::Produce(const std::shared_ptr<Connection>& conn,
                     const std::shared_ptr<const std::vector<uint8_t>>& frame,
                     const kafka::RequestHeader& h, const kafka::ProduceRequest& req) {
  Shard& home = ShardOf(conn->loop());
  const MetadataSnapshot& meta = SnapshotFor(home);
  auto pending = std::make_shared<PendingProduce>();
  pending->broker = this;
  pending->conn = conn;
  pending->header = h;
  pending->acks0 = req.acks == 0;
  kafka::ProduceResponse& resp = pending->resp;
  // Sized before any append is queued: owners and callbacks write into these vectors.
  resp.responses.resize(req.topic_data.size());
  for (size_t t = 0; t < req.topic_data.size(); ++t) {
    resp.responses[t].name = req.topic_data[t].name;
    resp.responses[t].partition_responses.resize(req.topic_data[t].partition_data.size());
  }
  const bool acks_ok = req.acks == 0 || req.acks == 1 || req.acks == -1;
  const int64_t now_ms = Clock::Real()->NowMillis();

  // Validation here, on the connection's shard (CRC32C and record checks are the CPU
  // work of a produce); the producer check and the append on each partition's owner.
  auto appends = std::make_shared<std::vector<ProduceAppend>>();
  std::vector<Target> targets;
  for (size_t t = 0; t < req.topic_data.size(); ++t) {
    const auto& topic = req.topic_data[t];
    const MetadataSnapshot::Topic* info = meta.Find(topic.name);
    for (size_t i = 0; i < topic.partition_data.size(); ++i) {
      const auto& pd = topic.partition_data[i];
      auto& out = resp.responses[t].partition_responses[i];
      out.index = pd.index;
      out.base_offset = -1;
      auto fail = [&](ErrorCode code, std::string message) {
        out.error_code = code;
        out.error_message = std::move(message);
      };
      if (!acks_ok) {
        fail(ErrorCode::kInvalidRequiredAcks, fmt::format("acks={} (must be -1, 0 or 1)", req.acks));
        continue;
      }
      Target target = TargetOf(info, topic.name, pd.index);
      if (target.shard < 0) {
        fail(ErrorCode::kUnknownTopicOrPartition,
             fmt::format("no partition {} of topic '{}'", pd.index, topic.name));
        continue;
      }
      if (!pd.records.has_value() || pd.records->empty()) {
        fail(ErrorCode::kInvalidRecord, "no records");
        continue;
      }
      const TopicConfig& config = info->info.config;
      kafka::ValidateOptions vo;
      vo.max_batch_bytes = static_cast<uint32_t>(config.max_message_bytes);
      vo.now_ms = now_ms;
      vo.log_append_time = config.log_append_time;
      vo.compacted = config.cleanup_policy == "compact";
      vo.allow_zstd = h.api_version >= 7;
      kafka::BatchInfo batch_info;
      if (Status st = kafka::ValidateRecords(*pd.records, vo, &batch_info); !st.ok()) {
        fail(kafka::RecordsErrorCode(st), st.message());
        continue;
      }
      if (batch_info.control || batch_info.transactional) {
        // No transactions yet (decision 11 of the plan).
        fail(ErrorCode::kInvalidRecord, "transactional and control batches are not supported");
        continue;
      }
      ProduceAppend a;
      a.topic = t;
      a.partition = i;
      a.batch.producer_id = batch_info.producer_id;
      a.batch.producer_epoch = batch_info.producer_epoch;
      a.batch.base_sequence = batch_info.base_sequence;
      a.batch.record_count = batch_info.header.records_count;
      a.log_append_time = config.log_append_time;
      a.records = *pd.records;
      appends->push_back(a);
      targets.push_back(std::move(target));
    }
  }
  // acks=0: nothing is answered, and the next request may come (the owners take this
  // one's appends first: each loop runs its posts in order).
  if (pending->acks0) conn->FinishRequest();
  if (targets.empty()) {
    PendingProduce::Release(pending);
    return;
  }
  pending->frame = frame;
  const int16_t acks = req.acks;
  VisitOwners(
      home, std::move(targets),
      [pending, appends, acks](Partition* part, size_t k) {
        // On the owner's thread: the only one touching part->producers.
        const ProduceAppend& a = (*appends)[k];
        auto& out = pending->resp.responses[a.topic].partition_responses[a.partition];
        if (part == nullptr) {
          out.error_code = ErrorCode::kUnknownTopicOrPartition;
          out.error_message = fmt::format("no partition {} of topic '{}'", out.index,
                                          pending->resp.responses[a.topic].name);
          return;
        }
        out.log_start_offset = part->log->start_offset();
        ProducerStateTable::Check check = part->producers.CheckBatch(a.batch);
        switch (check.verdict) {
          case ProducerStateTable::Verdict::kAppend:
            break;
          case ProducerStateTable::Verdict::kDuplicate:
            out.base_offset = check.first_offset;
            return;
          case ProducerStateTable::Verdict::kOutOfOrder:
            out.error_code = ErrorCode::kOutOfOrderSequenceNumber;
            out.error_message = check.message;
            return;
          case ProducerStateTable::Verdict::kFenced:
            out.error_code = ErrorCode::kInvalidProducerEpoch;
            out.error_message = check.message;
            return;
          case ProducerStateTable::Verdict::kUnknownProducer:
            out.error_code = ErrorCode::kUnknownProducerId;
            out.error_message = check.message;
            return;
        }
        storage::AppendOptions ao;
        ao.leader_epoch = part->epochs.latest_epoch();
        ao.log_append_time = a.log_append_time;
        ao.ack = acks == -1 ? storage::AckLevel::kDurable : storage::AckLevel::kWritten;
        if (acks != 0) {
          pending->outstanding.fetch_add(1, std::memory_order_relaxed);
          ao.on_ack = [pending, &out](const Status& st, const storage::AppendInfo& ai) {
            // `out` lives in pending->resp, which this callback keeps alive.
            if (st.ok()) {
              out.base_offset = ai.base_offset;
              out.log_append_time_ms = ai.log_append_time_ms;
            } else {
              out.base_offset = -1;
              out.error_code = ErrorCode::kKafkaStorageError;
              out.error_message = st.ToString();
            }
            PendingProduce::Release(pending);
          };
        }
        Result<storage::AppendInfo> appended = part->log->Append(a.records, std::move(ao));
        if (!appended.ok()) {
          if (acks != 0) pending->outstanding.fetch_sub(1, std::memory_order_relaxed);
          out.error_code = ErrorCode::kKafkaStorageError;
          out.error_message = appended.status().ToString();
          return;
        }
        part->producers.OnAppended(a.batch, appended->base_offset);
      },
      [pending] {
        pending->frame.reset();  // every owner has copied its records
        PendingProduce::Release(pending);
      });
}

namespace {

// Sends a fetch response whose records are splices of `files`.
void ReplyFetch(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                const kafka::FetchResponse& body, std::vector<storage::FileSlice> files) {
  Response resp;
  kafka::Writer w(&resp.buffer);
  kafka::EncodeResponseHeader(w, ApiKey::kFetch, h.api_version, h.correlation_id);
  body.Encode(w, h.api_version);
  resp.splices = w.splices();
  resp.files = std::move(files);
  conn->Send(std::move(resp));
}

bool HasErrors(const kafka::FetchResponse& resp) {
  for (const auto& t : resp.responses) {
    for (const auto& p : t.partitions) {
      if (p.error_code != ErrorCode::kNone || p.diverging_epoch.epoch >= 0 ||
          p.diverging_epoch.end_offset >= 0) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

// A fetch waiting for data: answered once, by the first of an append or its timer. Made
// and answered on its connection's loop; registered (weakly) on its partitions' owners.
struct Broker::FetchWait {
  std::shared_ptr<Connection> conn;
  kafka::RequestHeader header;
  std::shared_ptr<const kafka::FetchRequest> req;
  uint64_t min_bytes = 1;
  EventLoop::TimerId timer = 0;  // max_wait_ms; cancelled once answered
  // A re-arm is posted and has not run yet: appends meanwhile post no other.
  std::atomic<bool> arm_pending{false};
  std::atomic<bool> done{false};
};

void Broker::Fetch(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                   const kafka::FetchRequest& req) {
  if (req.session_id != 0) {
    // Sessions are declined (session_id 0 in every answer), so no id is known.
    kafka::FetchResponse resp;
    resp.error_code = ErrorCode::kFetchSessionIdNotFound;
    ReplyFetch(conn, h, resp, {});
    return;
  }
  auto shared = std::make_shared<const kafka::FetchRequest>(req);
  FetchOnce(ShardOf(conn->loop()), shared, h.api_version, nullptr,
            [this, conn, h, shared](kafka::FetchResponse& resp,
                                    std::vector<storage::FileSlice>& files, uint64_t bytes) {
              const kafka::FetchRequest& r = *shared;
              const uint64_t min_bytes = static_cast<uint64_t>(std::max(r.min_bytes, 1));
              if (bytes >= min_bytes || HasErrors(resp) || r.max_wait_ms <= 0 ||
                  r.min_bytes <= 0 || draining_.load()) {
                ReplyFetch(conn, h, resp, std::move(files));
                return;
              }
              // Not enough data: a long poll. Register on every partition asked for and
              // look once more (an append between the first look and the registration
              // must not be missed); every append to one of them looks again, and
              // min_bytes or max_wait_ms answers.
              auto wait = std::make_shared<FetchWait>();
              wait->conn = conn;
              wait->header = h;
              wait->req = shared;
              wait->min_bytes = min_bytes;
              wait->timer = conn->loop()->RunAfter(r.max_wait_ms, [this, wait] { CompleteFetch(wait); });
              ArmFetch(wait);
            });
}

void Broker::FetchOnce(Shard& home, std::shared_ptr<const kafka::FetchRequest> req,
                       int16_t version, const std::shared_ptr<FetchWait>& wait, FetchDone done) {
  const MetadataSnapshot& meta = SnapshotFor(home);
  // The response's shape first; the owners fill in their partitions' entries (each its
  // own) and slices, and the budget across partitions is applied here once all answered.
  struct State {
    kafka::FetchResponse resp;
    std::vector<kafka::FetchResponse::PartitionData*> outs;  // per target
    std::vector<const kafka::FetchRequest::FetchPartition*> wants;
    std::vector<std::optional<storage::FileSlice>> slices;
  };
  auto st = std::make_shared<State>();
  st->resp.session_id = 0;
  std::vector<Target> targets;
  for (const auto& want : req->topics) {
    kafka::FetchResponse::FetchableTopicResponse tout;
    tout.topic = want.topic;
    tout.topic_id = want.topic_id;
    const MetadataSnapshot::Topic* info =
        version >= 13 ? meta.FindById(want.topic_id) : meta.Find(want.topic);
    for (const auto& fp : want.partitions) {
      kafka::FetchResponse::PartitionData out;
      out.partition_index = fp.partition;
      out.high_watermark = -1;
      out.last_stable_offset = -1;
      out.log_start_offset = -1;
      out.records = kafka::RecordsRef::Inline(std::span<const uint8_t>());
      if (info == nullptr) {
        out.error_code = version >= 13 ? ErrorCode::kUnknownTopicId
                                       : ErrorCode::kUnknownTopicOrPartition;
      } else {
        targets.push_back(TargetOf(info, info->info.name, fp.partition));
        st->wants.push_back(&fp);
      }
      tout.partitions.push_back(std::move(out));
    }
    st->resp.responses.push_back(std::move(tout));
  }
  // Pointers once the vectors stopped growing, in request order.
  size_t k = 0;
  for (size_t t = 0; t < req->topics.size(); ++t) {
    const bool known = (version >= 13 ? meta.FindById(req->topics[t].topic_id)
                                      : meta.Find(req->topics[t].topic)) != nullptr;
    if (!known) continue;
    for (auto& out : st->resp.responses[t].partitions) {
      st->outs.push_back(&out);
      ++k;
    }
  }
  SLUICE_ASSERT(k == targets.size());
  st->slices.resize(targets.size());
  const uint64_t max_bytes = req->max_bytes > 0 ? static_cast<uint64_t>(req->max_bytes) : 0;
  VisitOwners(
      home, std::move(targets),
      [this, st, req, wait, max_bytes](Partition* part, size_t i) {
        kafka::FetchResponse::PartitionData& out = *st->outs[i];
        const kafka::FetchRequest::FetchPartition& fp = *st->wants[i];
        if (part == nullptr) {
          out.error_code = ErrorCode::kUnknownTopicOrPartition;
          return;
        }
        if (wait != nullptr && !wait->done.load()) {
          // Registered at most once per partition: a wake-up takes it off the woken
          // partition's list only, and it stays on the others'.
          bool present = false;
          std::erase_if(part->waits, [&](const std::weak_ptr<FetchWait>& w) {
            auto locked = w.lock();
            present |= locked == wait;
            return locked == nullptr || locked->done.load();
          });
          if (!present) part->waits.push_back(wait);
          part->waiting.store(static_cast<int>(part->waits.size()));
        }
        storage::PartitionLog& log = *part->log;
        const int32_t epoch = part->epochs.latest_epoch();
        if (fp.current_leader_epoch >= 0 && fp.current_leader_epoch != epoch) {
          // KIP-320: a consumer that saw a newer epoch waits for metadata; an older one
          // must check for truncation (OffsetForLeaderEpoch) first.
          out.error_code = fp.current_leader_epoch > epoch ? ErrorCode::kUnknownLeaderEpoch
                                                           : ErrorCode::kFencedLeaderEpoch;
          return;
        }
        // No transactions, so the last stable offset is the high watermark.
        const int64_t hw = HighWatermark(log);
        const int64_t start = log.start_offset();
        out.high_watermark = hw;
        out.last_stable_offset = hw;
        out.log_start_offset = start;
        out.aborted_transactions.emplace();
        if (fp.last_fetched_epoch >= 0 && fp.fetch_offset >= start) {
          // KIP-595 (v12+): the consumer's last fetched epoch must end at or past its
          // fetch offset here; otherwise the log diverged (recovery cut it) and it must
          // truncate. An epoch this log never had has no end: out of range, as Kafka
          // answers.
          auto [div_epoch, div_end] = part->epochs.EndOffsetFor(fp.last_fetched_epoch, log.end_offset());
          if (div_epoch < 0 || div_end < 0) {
            out.error_code = ErrorCode::kOffsetOutOfRange;
            return;
          }
          if (div_epoch < fp.last_fetched_epoch || div_end < fp.fetch_offset) {
            out.diverging_epoch = {div_epoch, div_end};
            return;
          }
        }
        if (fp.fetch_offset < start || fp.fetch_offset > hw) {
          out.error_code = ErrorCode::kOffsetOutOfRange;
          return;
        }
        // As much as this partition may give; the response's budget is applied on the
        // connection's shard, in request order.
        const uint64_t limit = std::min<uint64_t>(
            max_bytes, fp.partition_max_bytes > 0 ? uint64_t(fp.partition_max_bytes) : 0);
        if (fp.fetch_offset < hw) {
          Result<storage::ReadResult> read = log.Read(fp.fetch_offset, std::max<uint64_t>(limit, 1), hw);
          if (!read.ok()) {
            out.error_code = read.status().code() == StatusCode::kOutOfRange
                                 ? ErrorCode::kOffsetOutOfRange
                                 : ErrorCode::kKafkaStorageError;
          } else if (read->slice.size > 0) {
            st->slices[i] = std::move(read->slice);
          }
        }
      },
      [st, max_bytes, done = std::move(done)] {
        std::vector<storage::FileSlice> files;
        uint64_t total = 0;
        for (size_t i = 0; i < st->outs.size(); ++i) {
          if (!st->slices[i].has_value()) continue;
          const kafka::FetchRequest::FetchPartition& fp = *st->wants[i];
          const uint64_t left = max_bytes > total ? max_bytes - total : 0;
          const uint64_t limit = std::min<uint64_t>(
              left, fp.partition_max_bytes > 0 ? uint64_t(fp.partition_max_bytes) : 0);
          storage::FileSlice& slice = *st->slices[i];
          // Past the limits only for the first data of the response, as in Kafka.
          if (total == 0 || slice.size <= limit) {
            st->outs[i]->records =
                kafka::RecordsRef::Splice(slice.size, static_cast<uint32_t>(files.size()));
            total += slice.size;
            files.push_back(std::move(slice));
          }
        }
        done(st->resp, files, total);
      });
}

void Broker::ArmFetch(const std::shared_ptr<FetchWait>& wait) {
  wait->arm_pending = false;
  if (wait->done.load() || waking_stopped_.load()) return;  // a stop: the timer or the close ends it
  FetchOnce(ShardOf(wait->conn->loop()), wait->req, wait->header.api_version, wait,
            [this, wait](kafka::FetchResponse& resp, std::vector<storage::FileSlice>& files,
                         uint64_t bytes) {
              // Enough data, a new error (a deleted topic, an offset now out of range) or
              // a stop answers at once, as Kafka's DelayedFetch completes.
              if (bytes >= wait->min_bytes || HasErrors(resp) || draining_.load()) {
                AnswerFetch(wait, resp, std::move(files));
              }
            });
}

void Broker::CompleteFetch(const std::shared_ptr<FetchWait>& wait) {
  if (wait->done.load()) return;
  FetchOnce(ShardOf(wait->conn->loop()), wait->req, wait->header.api_version, nullptr,
            [this, wait](kafka::FetchResponse& resp, std::vector<storage::FileSlice>& files,
                         uint64_t) { AnswerFetch(wait, resp, std::move(files)); });
}

void Broker::AnswerFetch(const std::shared_ptr<FetchWait>& wait, const kafka::FetchResponse& resp,
                         std::vector<storage::FileSlice> files) {
  if (wait->done.exchange(true)) return;
  if (wait->conn->closed()) return;
  wait->conn->loop()->Cancel(wait->timer);  // false when the timer is what answers
  ReplyFetch(wait->conn, wait->header, resp, std::move(files));
}

void Broker::WakeFetches(Partition& part) {
  if (part.waits.empty()) return;
  std::vector<std::weak_ptr<FetchWait>> woken;
  woken.swap(part.waits);
  part.waiting.store(0);
  for (const auto& weak : woken) {
    std::shared_ptr<FetchWait> wait = weak.lock();
    if (wait == nullptr || wait->done.load()) continue;
    if (wait->arm_pending.exchange(true)) continue;  // one re-arm at a time
    PostGated(wait->conn->loop(), [this, wait] {
      if (!wait->done.load()) ArmFetch(wait);
    });
  }
}

size_t Broker::waiting_fetch_count() {
  if (!attached_) return 0;
  std::vector<std::promise<size_t>> counts(shards_.size());
  std::vector<std::future<size_t>> futures;
  for (size_t i = 0; i < shards_.size(); ++i) {
    futures.push_back(counts[i].get_future());
    Shard* shard = shards_[i].get();
    std::promise<size_t>* count = &counts[i];
    if (!PostGated(shard->loop, [shard, count] {
          size_t n = 0;
          for (const auto& [key, part] : shard->partitions) {
            for (const auto& weak : part->waits) {
              auto w = weak.lock();
              if (w != nullptr && !w->done.load()) ++n;
            }
          }
          count->set_value(n);
        })) {
      counts[i].set_value(0);
    }
  }
  size_t total = 0;
  for (auto& f : futures) total += f.get();
  return total;
}

void Broker::Drain() {
  draining_ = true;
  // Every waiting fetch looks again, sees draining_ and answers.
  if (attached_) {
    for (auto& s : shards_) {
      Shard* shard = s.get();
      PostGated(shard->loop, [this, shard] {
        for (auto& [key, part] : shard->partitions) WakeFetches(*part);
      });
    }
  }
  RunOnMetadata([this] {
    for (auto& [key, part] : catalog_) {
      if (Status st = part->log->Flush(); !st.ok()) {
        SLUICE_LOG(kLog, kWarn, "flushing {}-{}: {}", key.first, key.second, st.ToString());
      }
    }
  });
}

namespace {

// The first record of the batch holding `offset` with a timestamp satisfying `pick`, as
// (offset, timestamp), decoding the batch; nullopt when none does.
std::optional<std::pair<int64_t, int64_t>> FindInBatch(
    storage::PartitionLog& log, int64_t offset, const std::function<bool(int64_t)>& pick) {
  Result<storage::ReadResult> read = log.Read(offset, 1);
  if (!read.ok() || read->slice.size == 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  if (!storage::PartitionLog::ReadSlice(read->slice, &bytes).ok()) return std::nullopt;
  const storage::BatchHeader first = storage::ParseBatchHeader(bytes);
  kafka::RecordReader reader;
  std::span<const uint8_t> batch(bytes.data(), first.total_size());
  if (!reader.Open(batch, size_t{64} << 20).ok()) return std::nullopt;
  kafka::Record record;
  while (reader.Next(&record)) {
    int64_t ts = kafka::RecordTimestamp(reader.header(), record);
    if (pick(ts)) return std::make_pair(reader.header().base_offset + record.offset_delta, ts);
  }
  return std::nullopt;
}

}  // namespace


void Broker::ListOffsets(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                         const kafka::ListOffsetsRequest& req) {
  constexpr int64_t kLatest = -1, kEarliest = -2, kMaxTimestamp = -3;
  constexpr int64_t kEarliestLocal = -4, kLatestTiered = -5;  // KIP-1005, v8+
  Shard& home = ShardOf(conn->loop());
  const MetadataSnapshot& meta = SnapshotFor(home);
  struct State {
    kafka::ListOffsetsResponse resp;
    std::vector<kafka::ListOffsetsResponse::Partition*> outs;  // per target
    kafka::ListOffsetsRequest req;
  };
  auto st = std::make_shared<State>();
  st->req = req;
  std::vector<Target> targets;
  std::vector<std::pair<size_t, size_t>> where;
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const auto& want = req.topics[t];
    kafka::ListOffsetsResponse::Topic tout;
    tout.name = want.name;
    const MetadataSnapshot::Topic* info = meta.Find(want.name);
    for (size_t i = 0; i < want.partitions.size(); ++i) {
      kafka::ListOffsetsResponse::Partition out;
      out.partition_index = want.partitions[i].partition_index;
      targets.push_back(TargetOf(info, want.name, out.partition_index));
      where.emplace_back(t, i);
      tout.partitions.push_back(std::move(out));
    }
    st->resp.topics.push_back(std::move(tout));
  }
  for (auto [t, i] : where) st->outs.push_back(&st->resp.topics[t].partitions[i]);
  const int16_t version = h.api_version;
  VisitOwners(
      home, std::move(targets),
      [this, st, where, version](Partition* part, size_t k) {
        kafka::ListOffsetsResponse::Partition& out = *st->outs[k];
        const auto& wp = st->req.topics[where[k].first].partitions[where[k].second];
        if (part == nullptr) {
          out.error_code = ErrorCode::kUnknownTopicOrPartition;
          return;
        }
        storage::PartitionLog& log = *part->log;
        const LeaderEpochCache& epochs = part->epochs;
        out.leader_epoch = epochs.latest_epoch();
        if (wp.current_leader_epoch >= 0 && wp.current_leader_epoch != epochs.latest_epoch()) {
          out.error_code = wp.current_leader_epoch > epochs.latest_epoch()
                               ? ErrorCode::kUnknownLeaderEpoch
                               : ErrorCode::kFencedLeaderEpoch;
          return;
        }
        if (wp.timestamp == kLatest) {
          out.offset = HighWatermark(log);
        } else if (wp.timestamp == kEarliest || (wp.timestamp == kEarliestLocal && version >= 8)) {
          // Without tiered storage the earliest local offset is the log start.
          out.offset = log.start_offset();
        } else if (wp.timestamp == kLatestTiered && version >= 9) {
          // Nothing is tiered: no offset, as Kafka answers without remote storage.
          out.offset = -1;
          out.timestamp = -1;
        } else if (wp.timestamp == kMaxTimestamp) {
          // The first batch holding the largest max timestamp, then its record with it.
          int64_t best_ts = -1, best_base = -1;
          Status st = log.ForEachBatchHeader(
              log.start_offset(), [&](const storage::BatchHeader& bh, std::span<const uint8_t>) {
                if (bh.max_timestamp > best_ts) {
                  best_ts = bh.max_timestamp;
                  best_base = bh.base_offset;
                }
                return true;
              });
          if (!st.ok()) {
            out.error_code = ErrorCode::kKafkaStorageError;
          } else if (best_base >= 0) {
            auto found = FindInBatch(log, best_base, [&](int64_t ts) { return ts == best_ts; });
            out.offset = found ? found->first : best_base;
            out.timestamp = best_ts;
          }
        } else if (wp.timestamp < 0) {
          out.error_code = ErrorCode::kInvalidRequest;
        } else {
          Result<std::optional<storage::TimestampLookup>> found =
              log.FindOffsetByTimestamp(wp.timestamp);
          if (!found.ok()) {
            out.error_code = ErrorCode::kKafkaStorageError;
          } else if (found->has_value()) {
            const storage::TimestampLookup& l = **found;
            out.offset = l.offset;
            out.timestamp = l.timestamp;
            if (!l.exact) {
              const int64_t target = wp.timestamp;
              auto rec = FindInBatch(log, l.offset, [&](int64_t ts) { return ts >= target; });
              if (rec) {
                out.offset = rec->first;
                out.timestamp = rec->second;
              }
            }
            // Records below the log start (DeleteRecords) are gone: never answer with one.
            out.offset = std::max(out.offset, log.start_offset());
          }
        }
        if (out.error_code == ErrorCode::kNone && out.offset >= 0 && wp.timestamp != kLatest) {
          out.leader_epoch = epochs.EpochAt(out.offset);
        } else if (out.offset < 0) {
          out.leader_epoch = -1;
        }
        if (version == 0 && out.error_code == ErrorCode::kNone && out.offset >= 0) {
          out.old_style_offsets = {out.offset};
        }
      },
      [conn, h, st] { Reply(conn, h, st->resp); });
}

// ---------------------------------------------------------------------------------------
// Partition logs

std::string Broker::PartitionDir(const std::string& topic, int32_t partition) const {
  return fmt::format("{}/{}-{}", options_.data_dir, topic, partition);
}

int64_t Broker::HighWatermark(const storage::PartitionLog& log) const {
  return options_.flush_policy == storage::FlushPolicy::kDurable ? log.durable_end_offset()
                                                                 : log.written_end_offset();
}

storage::LogOptions Broker::LogOptionsFor(const TopicConfig& config) {
  storage::LogOptions o;
  o.flush_policy = options_.flush_policy;
  o.flush_ms = options_.flush_ms;
  o.executor = executor_.get();
  o.files = files_.get();
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

Result<std::unique_ptr<Broker::Partition>> Broker::OpenPartition(const TopicInfo& topic,
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
    PostGated(shards_[static_cast<size_t>(owner)]->loop, [this, raw, owner, key] {
      Shard& shard = *shards_[static_cast<size_t>(owner)];
      auto it = shard.partitions.find(key);
      if (it != shard.partitions.end() && it->second.get() == raw) WakeFetches(*raw);
    });
  };
  ASSIGN_OR_RETURN(part->log, storage::PartitionLog::Open(PartitionDir(topic.name, p), opts));
  // Epochs first: a bump for a cut log is on disk before anything else reads it.
  ASSIGN_OR_RETURN(part->epochs, LeaderEpochCache::Open(*part->log, unclean_start_));
  RETURN_IF_ERROR(part->producers.Rebuild(*part->log));
  return part;
}

Status Broker::Install(PartitionKey key, std::unique_ptr<Partition> part) {
  Partition* raw = part.get();
  raw->shard = OwnerOf(raw->topic_id, key.second, static_cast<int>(shards_.size()));
  bool placed = false;
  const bool ran = RunOnShard(raw->shard, [&] {
    placed = shards_[static_cast<size_t>(raw->shard)]->partitions.emplace(key, std::move(part)).second;
  });
  if (!ran) return FailedPreconditionError("the broker is stopping");
  if (!placed) return InternalError("partition {}-{} is open already", key.first, key.second);
  catalog_[key] = raw;
  open_logs_ = catalog_.size();
  return Status::OK();
}

std::unique_ptr<Broker::Partition> Broker::Uninstall(const PartitionKey& key) {
  auto it = catalog_.find(key);
  if (it == catalog_.end()) return nullptr;
  Partition* raw = it->second;
  std::unique_ptr<Partition> taken;
  const bool ran = RunOnShard(raw->shard, [&] {
    Shard& shard = *shards_[static_cast<size_t>(raw->shard)];
    auto found = shard.partitions.find(key);
    if (found == shard.partitions.end()) return;
    taken = std::move(found->second);
    shard.partitions.erase(found);
    WakeFetches(*taken);  // they look again and find it gone
  });
  if (!ran || taken == nullptr) return nullptr;
  catalog_.erase(it);
  open_logs_ = catalog_.size();
  return taken;
}

Status Broker::OpenTopicLogsMeta(const TopicInfo& topic) {
  for (int32_t p = 0; p < topic.partitions; ++p) {
    PartitionKey key{topic.name, p};
    if (catalog_.count(key) != 0) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Partition> part, OpenPartition(topic, p));
    RETURN_IF_ERROR(Install(std::move(key), std::move(part)));
  }
  return Status::OK();
}

Status Broker::CloseTopicLogsMeta(const std::string& topic, int32_t partitions) {
  Status first;
  for (int32_t p = 0; p < partitions; ++p) {
    std::unique_ptr<Partition> part = Uninstall({topic, p});
    if (part == nullptr) continue;
    // Its syncs run here, on the metadata thread, not on the owner.
    Status st = part->log->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

Status Broker::RemoveTopicDirsMeta(const std::string& topic, int32_t partitions) {
  storage::Env* env = storage::Env::Posix();
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

TopicError Broker::DeleteTopicMeta(const std::string& name) {
  const TopicInfo* info = topics_->Find(name);
  if (info == nullptr) {
    return {ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name)};
  }
  const int32_t partitions = info->partitions;
  if (Status st = CloseTopicLogsMeta(name, partitions); !st.ok()) {
    // The data that reached the disk stays; the topic goes anyway.
    SLUICE_LOG(kLog, kWarn, "closing logs of deleted topic {}: {}", name, st.ToString());
  }
  TopicError err = topics_->Delete(name);
  if (!err.ok()) {
    if (const TopicInfo* still = topics_->Find(name); still != nullptr) {
      if (Status st = OpenTopicLogsMeta(*still); !st.ok()) {
        SLUICE_LOG(kLog, kError, "reopening logs of topic {}: {}", name, st.ToString());
      }
    }
    return err;
  }
  if (Status st = RemoveTopicDirsMeta(name, partitions); !st.ok()) {
    // Removed from the metadata: leftovers named *-delete go at the next start.
    SLUICE_LOG(kLog, kWarn, "removing directories of deleted topic {}: {}", name, st.ToString());
  }
  return {};
}

}  // namespace sluice::broker
