// ReplicaManager: roles, fetchers, ISR checks and ISR changes. See replica_manager.h.
#include "broker/replica_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>

#include "base/logging.h"
#include "broker/handlers/context.h"
#include "broker/handlers/fetch.h"
#include "broker/loggers.h"
#include "broker/replica_fetcher.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

}  // namespace

ReplicaManager::ReplicaManager(ReplicaManagerOptions options, handlers::Context& ctx)
    : options_(std::move(options)), ctx_(ctx) {
  SLUICE_ASSERT(options_.isr_store != nullptr);
  checkpointed_ = LoadHighWatermarks(ctx_.options.env, ctx_.options.data_dir);
}

ReplicaManager::~ReplicaManager() { Stop(); }

storage::FlushPolicy ReplicaManager::flush_policy() const { return ctx_.options.flush_policy; }

void ReplicaManager::Start() {
  if (started_.exchange(true)) return;
  isr_timers_.assign(static_cast<size_t>(ctx_.shards.size()), 0);
  for (int i = 0; i < ctx_.shards.size(); ++i) {
    ctx_.shards.PostGated(ctx_.shards.at(i).loop, [this, i] { ScheduleIsrCheck(i); });
  }
  if (options_.hw_checkpoint_interval_ms > 0) {
    checkpoint_thread_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (!stopped_.load()) {
        checkpoint_cv_.wait_for(lock,
                                std::chrono::milliseconds(options_.hw_checkpoint_interval_ms));
        if (stopped_.load()) break;
        lock.unlock();
        WriteCheckpoint();
        lock.lock();
      }
    });
  }
}

std::optional<int64_t> ReplicaManager::Checkpointed(const PartitionKey& key) {
  std::lock_guard lock(mu_);
  auto it = checkpointed_.find(key);
  if (it == checkpointed_.end()) return std::nullopt;
  return it->second;
}

int64_t ReplicaManager::StartingHighWatermark(const Partition& part,
                                              std::optional<int64_t> checkpointed) {
  const int64_t local = replica::LocalEnd(flush_policy(), *part.log);
  if (!checkpointed.has_value()) return local;
  return std::max(part.log->start_offset(), std::min(*checkpointed, local));
}

void ReplicaManager::WriteCheckpoint() {
  if (!ctx_.shards.attached()) return;
  HighWatermarks now;
  for (int i = 0; i < ctx_.shards.size(); ++i) {
    HighWatermarks part_marks;
    if (!ctx_.shards.RunOnShard(i, [&] {
          for (const auto& [key, part] : ctx_.shards.at(i).partitions) {
            // A replica not told its role yet (high watermark -1) keeps its checkpointed one.
            if (part->replica != nullptr && part->replica->high_watermark >= 0) {
              part_marks[key] = part->replica->high_watermark;
            }
          }
        })) {
      return;  // stopping: the last complete checkpoint stays
    }
    now.merge(part_marks);
  }
  std::shared_ptr<const MetadataSnapshot> meta = ctx_.shards.Published();
  std::lock_guard lock(mu_);
  // Replicas not told their role since the start keep their checkpointed value; deleted
  // topics' entries go.
  HighWatermarks merged = now;
  for (const auto& [key, hw] : checkpointed_) {
    const MetadataSnapshot::Topic* t = meta->Find(key.first);
    if (t != nullptr && key.second < t->info.partitions) merged.emplace(key, hw);
  }
  if (merged == checkpointed_) return;
  if (Status st = SaveHighWatermarks(ctx_.options.env, ctx_.options.data_dir, merged); !st.ok()) {
    SLUICE_LOG(kReplicaLog, kWarn, "writing the high-watermark checkpoint: {}", st.ToString());
    return;
  }
  checkpointed_ = std::move(merged);
}

void ReplicaManager::ScheduleIsrCheck(int shard_index) {
  if (stopped_.load()) return;
  const int64_t interval = options_.isr_check_interval_ms > 0
                               ? options_.isr_check_interval_ms
                               : std::max<int64_t>(options_.replica_lag_time_max_ms / 2, 1);
  Shard& shard = ctx_.shards.at(shard_index);
  isr_timers_[static_cast<size_t>(shard_index)] =
      shard.loop->RunAfter(interval, [this, shard_index] {
        Shard& s = ctx_.shards.at(shard_index);
        const int64_t now = options_.clock->NowMillis();
        for (auto& [key, part] : s.partitions) {
          if (part->replica == nullptr || !part->replica->leader()) continue;
          replica::MaybeShrinkIsr(*part, now);
          // Time moved: a follower may have stopped counting for the high watermark.
          replica::MaybeAdvanceHighWatermark(*part);
        }
        ScheduleIsrCheck(shard_index);
      });
}

void ReplicaManager::Stop() {
  if (stopped_.exchange(true)) return;
  std::map<int32_t, std::unique_ptr<ReplicaFetcher>> fetchers;
  {
    std::lock_guard lock(mu_);
    fetchers.swap(fetchers_);
    fetching_from_.clear();
    checkpoint_cv_.notify_all();
  }
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
  for (auto& [leader, f] : fetchers) f->Stop();
  // The last high watermarks, while the shards still answer.
  if (started_.load() && options_.hw_checkpoint_interval_ms > 0) WriteCheckpoint();
  if (started_.load()) {
    for (int i = 0; i < ctx_.shards.size(); ++i) {
      ctx_.shards.RunOnShard(
          i, [this, i] { ctx_.shards.at(i).loop->Cancel(isr_timers_[static_cast<size_t>(i)]); });
    }
  }
}

int ReplicaManager::OwnerOf(const PartitionKey& key) const {
  std::shared_ptr<const MetadataSnapshot> meta = ctx_.shards.Published();
  return ctx_.shards.TargetOf(meta->Find(key.first), key.first, key.second).shard;
}

bool ReplicaManager::RunOnPartition(const PartitionKey& key,
                                    const std::function<void(Partition*)>& fn) {
  const int owner = OwnerOf(key);
  if (owner < 0) {
    fn(nullptr);
    return true;
  }
  return ctx_.shards.RunOnShard(owner, [&] {
    Shard& shard = ctx_.shards.at(owner);
    auto it = shard.partitions.find(key);
    fn(it == shard.partitions.end() ? nullptr : it->second.get());
  });
}

bool ReplicaManager::RunOnPartitions(const std::vector<Located>& parts,
                                     const std::function<void(Partition*, size_t)>& fn) {
  const int shards = ctx_.shards.size();
  std::vector<std::vector<size_t>> by_owner(static_cast<size_t>(shards));
  for (size_t i = 0; i < parts.size(); ++i) {
    by_owner[static_cast<size_t>(Shards::OwnerOf(parts[i].topic_id, parts[i].key.second, shards))]
        .push_back(i);
  }
  auto visit = [&](int owner, const std::vector<size_t>& indexes) {
    Shard& shard = ctx_.shards.at(owner);
    for (size_t i : indexes) {
      auto it = shard.partitions.find(parts[i].key);
      fn(it == shard.partitions.end() ? nullptr : it->second.get(), i);
    }
  };
  if (!ctx_.shards.attached()) {  // before the server: this thread owns the shard
    for (int s = 0; s < shards; ++s) visit(s, by_owner[static_cast<size_t>(s)]);
    return true;
  }
  // One promise per owner, held only by its task: a task destroyed unrun (its loop went
  // away) breaks it, which ends the wait too.
  std::vector<std::future<void>> finished;
  auto ran = std::make_shared<std::atomic<int>>(0);
  for (int s = 0; s < shards; ++s) {
    if (by_owner[static_cast<size_t>(s)].empty()) continue;
    auto promise = std::make_shared<std::promise<void>>();
    finished.push_back(promise->get_future());
    const std::vector<size_t>* indexes = &by_owner[static_cast<size_t>(s)];
    if (!ctx_.shards.PostGated(ctx_.shards.at(s).loop,
                               [&visit, s, indexes, promise = std::move(promise), ran] {
                                 visit(s, *indexes);
                                 ran->fetch_add(1);
                                 promise->set_value();
                               })) {
      finished.pop_back();
      break;
    }
  }
  for (auto& f : finished) f.wait();
  int wanted = 0;
  for (const auto& indexes : by_owner) wanted += indexes.empty() ? 0 : 1;
  return ran->load() == wanted;
}

void ReplicaManager::PostToPartition(const PartitionKey& key, uint64_t generation,
                                     std::function<void(Partition&)> fn) {
  const int owner = OwnerOf(key);
  if (owner < 0) return;
  ctx_.shards.PostGated(ctx_.shards.at(owner).loop,
                        [this, owner, key, generation, fn = std::move(fn)] {
                          Shard& shard = ctx_.shards.at(owner);
                          auto it = shard.partitions.find(key);
                          if (it == shard.partitions.end()) return;
                          Partition& part = *it->second;
                          if (part.replica == nullptr || part.replica->generation != generation)
                            return;
                          fn(part);
                        });
}

void ReplicaManager::SubmitIsrChange(Partition& part, std::vector<int32_t> new_isr) {
  ReplicaState& rs = *part.replica;
  if (rs.isr_change_pending || options_.clock->NowMillis() < rs.isr_retry_after_ms) return;
  rs.isr_change_pending = true;
  const PartitionKey key{rs.topic, rs.partition};
  const uint64_t generation = rs.generation;
  const std::vector<int32_t> asked = new_isr;
  // The registration each follower fetched as: a member added must still run as it (KIP-903).
  IsrStore::BrokerEpochs broker_epochs;
  for (const FollowerProgress& f : rs.followers) broker_epochs[f.node] = f.broker_epoch;
  options_.isr_store->AlterIsr(
      rs.topic, rs.partition, options_.node_id, rs.leader_epoch, std::move(new_isr), rs.isr_version,
      std::move(broker_epochs), [this, key, generation, asked](IsrError error, int64_t version) {
        PostToPartition(key, generation, [this, key, asked, error, version](Partition& p) {
          ReplicaState& s = *p.replica;
          s.isr_change_pending = false;
          if (error != IsrError::kNone) {
            // A refused expansion is asked again after replica.fetch.backoff.ms: the
            // follower may have fetched as a registration it has just replaced (a broker
            // back from a lost lease, KIP-903), and its next fetches carry the new one.
            // Waiting replica.lag.time.max.ms kept a caught-up follower out for 30 s.
            const bool grows = asked.size() > s.isr.size();
            s.isr_retry_after_ms =
                options_.clock->NowMillis() +
                std::max<int64_t>(
                    grows ? options_.fetch_backoff_ms : options_.replica_lag_time_max_ms, 1);
            // The controller moved the leadership or the ISR (phase C re-reads it and
            // tells this broker); until then the committed ISR stays as it was.
            SLUICE_LOG(kReplicaLog, kWarn, "{}-{}: ISR change to [{}] refused: {}", key.first,
                       key.second, fmt::join(asked, ","), IsrErrorName(error));
            return;
          }
          SLUICE_LOG(kReplicaLog, kInfo, "{}-{}: ISR [{}] -> [{}] (version {})", key.first,
                     key.second, fmt::join(s.isr, ","), fmt::join(asked, ","), version);
          s.isr = asked;
          s.isr_version = version;
          replica::MaybeAdvanceHighWatermark(p);
        });
      });
}

Status ReplicaManager::BecomeLeader(const std::string& topic, int32_t partition,
                                    const Leadership& l) {
  const PartitionKey key{topic, partition};
  Status result = NotFoundError("no partition {} of topic '{}' here", partition, topic);
  const std::optional<int64_t> checkpointed = Checkpointed(key);
  bool ran = RunOnPartition(key, [&](Partition* part) {
    if (part == nullptr) return;
    ReplicaState* old = part->replica.get();
    if (old != nullptr && l.leader_epoch < old->leader_epoch) {
      result = FailedPreconditionError("{}-{}: leader epoch {} is older than {}", topic, partition,
                                       l.leader_epoch, old->leader_epoch);
      return;
    }
    const storage::FlushPolicy policy = flush_policy();
    const int64_t now = options_.clock->NowMillis();
    if (old != nullptr && old->leader() && old->leader_epoch == l.leader_epoch) {
      // The same leadership with a newer assignment or ISR. A role from an older view
      // (made before this leader's own committed change reached it) is ignored: the ISR
      // never goes back to an older version; the same version changes nothing.
      old->min_insync_replicas = l.min_insync_replicas;  // the topic's config: the newest
      if (l.isr_version <= old->isr_version) {
        replica::MaybeAdvanceHighWatermark(*part);
        result = Status::OK();
        return;
      }
      // A new version is what a refused change waited for: the next may be asked at once.
      old->isr_retry_after_ms = 0;
      // A follower the controller took out (its broker died) stops holding the high
      // watermark back at once, not replica.lag.time.max.ms after its last fetch: as
      // Kafka's resetReplicaState for a replica outside the new ISR.
      for (FollowerProgress& f : old->followers) {
        if (old->InIsr(f.node) && std::find(l.isr.begin(), l.isr.end(), f.node) == l.isr.end()) {
          f.last_caught_up_ms = 0;
        }
      }
      old->replicas = l.replicas;
      old->isr = l.isr;
      old->isr_version = l.isr_version;
      replica::MaybeAdvanceHighWatermark(*part);
      result = Status::OK();
      return;
    }
    auto rs = std::make_unique<ReplicaState>();
    rs->role = ReplicaRole::kLeader;
    rs->topic = topic;
    rs->partition = partition;
    rs->leader_epoch = l.leader_epoch;
    rs->generation = next_generation_.fetch_add(1);
    rs->manager = this;
    rs->replicas = l.replicas;
    rs->isr = l.isr;
    rs->isr_version = l.isr_version;
    rs->min_insync_replicas = l.min_insync_replicas;
    rs->leader_id = options_.node_id;
    const int64_t end = part->log->end_offset();
    // The high watermark carries over (a follower's, or all a single node had) and
    // only grows from here.
    rs->high_watermark = std::min(old != nullptr && old->high_watermark >= 0
                                      ? old->high_watermark
                                      : StartingHighWatermark(*part, checkpointed),
                                  replica::LocalEnd(policy, *part->log));
    // Before any write of this epoch: (epoch, log end), durably (0018 decision 3).
    if (Status st = part->epochs.Assign(l.leader_epoch, end); !st.ok()) {
      result = st;
      return;
    }
    rs->epoch_start_offset = end;
    for (int32_t r : l.replicas) {
      if (r == options_.node_id) continue;
      FollowerProgress f;
      f.node = r;
      // ISR members start caught up now (Kafka's resetReplicaState), so a follower
      // that never fetches in this epoch leaves the ISR after replica.lag.time.max.ms.
      f.last_caught_up_ms = rs->InIsr(r) ? now : 0;
      rs->followers.push_back(f);
    }
    if (old != nullptr) replica::FailAcksWaits(*old, ErrorCode::kNotLeaderOrFollower);
    part->replica = std::move(rs);
    part->log->SetDirectWrites(false);  // its consumers read what it writes, from the cache
    replica::MaybeAdvanceHighWatermark(*part);
    SLUICE_LOG(kReplicaLog, kInfo, "{}-{}: leader in epoch {} from offset {}, ISR [{}], HW {}",
               topic, partition, l.leader_epoch, end, fmt::join(l.isr, ","),
               part->replica->high_watermark);
    result = Status::OK();
  });
  if (!ran) return AbortedError("the broker is stopping");
  if (result.ok()) StopFetching(key);
  return result;
}

Status ReplicaManager::BecomeFollower(const std::string& topic, int32_t partition,
                                      int32_t leader_epoch, int32_t leader, const std::string& host,
                                      int32_t port) {
  const PartitionKey key{topic, partition};
  if (leader == options_.node_id) {
    return InvalidArgumentError("{}-{}: this node ({}) cannot follow itself", topic, partition,
                                leader);
  }
  const bool no_leader = leader < 0;
  Status result = NotFoundError("no partition {} of topic '{}' here", partition, topic);
  const std::optional<int64_t> checkpointed = Checkpointed(key);
  ReplicaFetcher::Start start;
  bool ran = RunOnPartition(key, [&](Partition* part) {
    if (part == nullptr) return;
    ReplicaState* old = part->replica.get();
    if (old != nullptr && leader_epoch < old->leader_epoch) {
      result = FailedPreconditionError("{}-{}: leader epoch {} is older than {}", topic, partition,
                                       leader_epoch, old->leader_epoch);
      return;
    }
    // What this node reports as its log end must be on disk (decision 5).
    if (Status st = part->log->Flush(); !st.ok()) {
      result = st;
      return;
    }
    auto rs = std::make_unique<ReplicaState>();
    rs->role = ReplicaRole::kFollower;
    rs->topic = topic;
    rs->partition = partition;
    rs->leader_epoch = leader_epoch;
    rs->generation = next_generation_.fetch_add(1);
    rs->manager = this;
    rs->leader_id = leader;
    rs->high_watermark = std::min(old != nullptr && old->high_watermark >= 0
                                      ? old->high_watermark
                                      : StartingHighWatermark(*part, checkpointed),
                                  part->log->end_offset());
    if (old != nullptr) replica::FailAcksWaits(*old, ErrorCode::kNotLeaderOrFollower);
    part->log->SetDirectWrites(options_.follower_direct_writes);
    start.topic_id = part->topic_id;
    start.leader_epoch = leader_epoch;
    start.generation = rs->generation;
    start.fetch_offset = part->log->end_offset();
    start.last_fetched_epoch =
        part->log->end_offset() > part->log->start_offset() ? part->epochs.latest_epoch() : -1;
    part->replica = std::move(rs);
    // Consumers waiting here learn it is no longer the leader.
    handlers::WakeFetches(ctx_, *part);
    if (no_leader) {
      SLUICE_LOG(kReplicaLog, kInfo,
                 "{}-{}: no leader in epoch {}: fetching nothing, log end {}, HW {}", topic,
                 partition, leader_epoch, start.fetch_offset, part->replica->high_watermark);
    } else {
      SLUICE_LOG(kReplicaLog, kInfo, "{}-{}: follower of broker {} in epoch {} from offset {}",
                 topic, partition, leader, leader_epoch, start.fetch_offset);
    }
    result = Status::OK();
  });
  if (!ran) return AbortedError("the broker is stopping");
  if (!result.ok()) return result;
  if (no_leader) {
    StopFetching(key);  // the log, its high watermark and its epochs stay for the next role
    return Status::OK();
  }
  // Fetchers left without partitions, or pointed at an address the leader left: stopped
  // (joined) once mu_ is released.
  std::vector<std::unique_ptr<ReplicaFetcher>> retired;
  {
    std::lock_guard lock(mu_);
    if (stopped_.load()) return AbortedError("the replica manager stopped");
    auto from = fetching_from_.find(key);
    if (from != fetching_from_.end() && from->second != leader) {
      RemoveFromFetcherLocked(from->second, key, &retired);
    }
    auto& fetcher = fetchers_[leader];
    if (fetcher != nullptr && (fetcher->host() != host || fetcher->port() != port)) {
      // The leader's inter-broker address changed (it restarted elsewhere): every
      // partition fetched from it moves, with its position, to a fetcher at the new one.
      SLUICE_LOG(kReplicaLog, kInfo, "leader {} moved from {}:{} to {}:{}", leader, fetcher->host(),
                 fetcher->port(), host, port);
      std::map<PartitionKey, ReplicaFetcher::Start> moved = fetcher->TakeAll();
      retired.push_back(std::move(fetcher));
      fetcher = std::make_unique<ReplicaFetcher>(this, leader, host, port);
      for (const auto& [k, s] : moved) fetcher->Add(k, s);
    }
    if (fetcher == nullptr) fetcher = std::make_unique<ReplicaFetcher>(this, leader, host, port);
    fetcher->Add(key, start);
    fetching_from_[key] = leader;
  }
  for (auto& f : retired) f->Stop();
  return Status::OK();
}

void ReplicaManager::RemoveFromFetcherLocked(
    int32_t leader, const PartitionKey& key,
    std::vector<std::unique_ptr<ReplicaFetcher>>* retired) {
  auto f = fetchers_.find(leader);
  if (f == fetchers_.end()) return;
  f->second->Remove(key);
  if (f->second->empty()) {
    retired->push_back(std::move(f->second));
    fetchers_.erase(f);
  }
}

void ReplicaManager::StopFetching(const PartitionKey& key) {
  std::vector<std::unique_ptr<ReplicaFetcher>> retired;
  {
    std::lock_guard lock(mu_);
    auto from = fetching_from_.find(key);
    if (from == fetching_from_.end()) return;
    RemoveFromFetcherLocked(from->second, key, &retired);
    fetching_from_.erase(from);
  }
  for (auto& f : retired) f->Stop();
}

bool ReplicaManager::HasFetcherFor(int32_t leader) {
  std::lock_guard lock(mu_);
  return fetchers_.count(leader) != 0;
}

Result<ReplicaManager::View> ReplicaManager::Describe(const std::string& topic, int32_t partition) {
  Result<View> view = NotFoundError("no partition {} of topic '{}' here", partition, topic);
  bool ran = RunOnPartition({topic, partition}, [&](Partition* part) {
    if (part == nullptr) return;
    View v;
    v.log_end = part->log->end_offset();
    v.log_start = part->log->start_offset();
    v.durable_end = part->log->durable_end_offset();
    v.epochs = part->epochs.entries();
    if (part->replica != nullptr) {
      const ReplicaState& rs = *part->replica;
      v.replicated = true;
      v.role = rs.role;
      v.leader_epoch = rs.leader_epoch;
      v.high_watermark = rs.high_watermark;
      v.isr = rs.isr;
      v.isr_version = rs.isr_version;
      for (const FollowerProgress& f : rs.followers) v.follower_log_ends[f.node] = f.log_end;
    } else {
      v.high_watermark = HighWatermark(flush_policy(), *part->log);
    }
    view = std::move(v);
  });
  if (!ran) return AbortedError("the broker is stopping");
  return view;
}

}  // namespace sluice::broker
