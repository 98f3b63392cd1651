// Shards: owners, posting and the visit of a request's partitions. See shards.h.
#include "broker/shards.h"

#include <future>
#include <thread>
#include <utility>

#include "base/logging.h"

namespace sluice::broker {

Shards::Shards(const MetadataPublisher* publisher) : publisher_(publisher) {
  shards_.push_back(std::make_unique<Shard>());
}

int Shards::OwnerOf(const kafka::Uuid& topic_id, int32_t partition, int shards) {
  if (shards <= 1) return 0;
  // A topic's partitions go round robin from a shard its id picks, so each topic spreads
  // evenly and different topics start at different shards.
  uint64_t h = topic_id.hi ^ (topic_id.lo * 0x9E3779B97F4A7C15ull);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  const uint64_t n = static_cast<uint64_t>(shards);
  return static_cast<int>((h % n + static_cast<uint64_t>(static_cast<uint32_t>(partition)) % n) %
                          n);
}

std::pair<ShardPartitions::iterator, bool> ShardPartitions::emplace(
    const PartitionKey& key, std::unique_ptr<Partition> part) {
  Partition* raw = part.get();
  auto placed = map_.emplace(key, std::move(part));
  if (placed.second) by_id_[IdKey{raw->topic_id, key.second}] = raw;
  return placed;
}

std::unique_ptr<Partition> ShardPartitions::Extract(iterator it) {
  std::unique_ptr<Partition> part = std::move(it->second);
  by_id_.erase(IdKey{part->topic_id, it->first.second});
  map_.erase(it);
  return part;
}

void ShardPartitions::clear() {
  map_.clear();
  by_id_.clear();
}

Partition* ShardPartitions::FindById(const kafka::Uuid& topic_id, int32_t partition) const {
  auto it = by_id_.find(IdKey{topic_id, partition});
  return it != by_id_.end() ? it->second : nullptr;
}

void Shards::Attach(const std::vector<EventLoop*>& loops) {
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

Shard& Shards::ShardOf(EventLoop* loop) {
  for (auto& shard : shards_) {
    if (shard->loop == loop) return *shard;
  }
  SLUICE_ASSERT(false && "a request on a loop the broker was not given");
  return *shards_[0];
}

Target Shards::TargetOf(const MetadataSnapshot::Topic* topic, const std::string& name,
                        int32_t p) const {
  Target t;
  t.key = {name, p};
  if (topic == nullptr || p < 0 || p >= topic->info.partitions) return t;
  t.topic_id = topic->info.id;
  t.shard = OwnerOf(topic->info.id, p, static_cast<int>(shards_.size()));
  return t;
}

bool Shards::PostGated(EventLoop* loop, std::function<void()> task) {
  // Sequentially consistent with StopWaking(): either it sees this post counted, or this
  // post sees the gate closed.
  posting_.fetch_add(1);
  const bool open = !waking_stopped_.load();
  if (open) loop->Post(std::move(task));
  posting_.fetch_sub(1);
  return open;
}

void Shards::StopWaking() {
  waking_stopped_.store(true);
  while (posting_.load() != 0) std::this_thread::yield();
}

void Shards::VisitOwners(Shard& home, std::vector<Target> targets,
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
  // On shard s's thread: its partitions, found by topic id (a topic deleted and created
  // again under its name is another partition).
  auto run = [this](Job& j, size_t s, const std::vector<size_t>& indexes) {
    Shard& shard = *shards_[s];
    for (size_t i : indexes) {
      const Target& t = j.targets[i];
      j.visit(shard.partitions.FindById(t.topic_id, t.key.second), i);
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
    bool posted = PostGated(shards_[s]->loop,
                            [this, job, s, run, home_loop, indexes = std::move(by_shard[s])] {
                              run(*job, s, indexes);
                              PostGated(home_loop, [job] {
                                if (--job->outstanding == 0) job->done();
                              });
                            });
    if (!posted) return;  // stopping: this request gets no answer
  }
  if (--job->outstanding == 0) job->done();
}

bool Shards::RunOnShard(int shard, const std::function<void()>& fn) {
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

Status Shards::Place(const PartitionKey& key, std::unique_ptr<Partition> part) {
  Partition* raw = part.get();
  raw->shard = OwnerOf(raw->topic_id, key.second, static_cast<int>(shards_.size()));
  bool placed = false;
  const bool ran = RunOnShard(raw->shard, [&] {
    placed =
        shards_[static_cast<size_t>(raw->shard)]->partitions.emplace(key, std::move(part)).second;
  });
  if (!ran) return FailedPreconditionError("the broker is stopping");
  if (!placed) return InternalError("partition {}-{} is open already", key.first, key.second);
  return Status::OK();
}

std::unique_ptr<Partition> Shards::Take(const PartitionKey& key, int shard,
                                        const std::function<void(Partition&)>& on_taken) {
  std::unique_ptr<Partition> taken;
  const bool ran = RunOnShard(shard, [&] {
    Shard& owner = *shards_[static_cast<size_t>(shard)];
    auto found = owner.partitions.find(key);
    if (found == owner.partitions.end()) return;
    taken = owner.partitions.Extract(found);
    on_taken(*taken);
  });
  if (!ran) return nullptr;
  return taken;
}

Status Shards::CloseAll() {
  Status first;
  for (auto& shard : shards_) {
    for (auto& [key, part] : shard->partitions) {
      Status st = part->log->Close();
      if (!st.ok() && first.ok()) first = st;
    }
    shard->partitions.clear();
  }
  return first;
}

}  // namespace sluice::broker
