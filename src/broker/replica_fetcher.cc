// ReplicaFetcher: the follower's fetch loop. See replica_fetcher.h.
#include "broker/replica_fetcher.h"

#include <fmt/format.h>

#include <future>
#include <limits>
#include <optional>

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"
#include "broker/replica_manager.h"
#include "kafka/protocol/header.h"
#include "storage/batch_header.h"
#include "storage/txn_index.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

// Fetch v15: replica_state (KIP-903's broker epoch), topic ids, diverging epochs.
constexpr int16_t kFetchVersion = 15;
// After a change of leader the follower may learn its new role before the leader does
// (each follows etcd's watch on its own): the leader answers NOT_LEADER_OR_FOLLOWER or
// UNKNOWN_LEADER_EPOCH for a few milliseconds. Within replica.fetch.backoff.ms of the
// role's start such an answer is asked again after this, not after the whole backoff:
// every acks=all write of the new leader waits for this fetch (0018, "replperf").
constexpr int64_t kShortBackoffMs = 20;
// A response larger than this is a broken peer, not data.
constexpr uint32_t kMaxResponseBytes = 256u << 20;

using replica::OwnerResult;

// The end and last epoch a follower fetches from next.
void ReadPosition(const Partition& part, OwnerResult* r) {
  r->end = part.log->end_offset();
  r->last_epoch = r->end > part.log->start_offset() ? part.epochs.latest_epoch() : -1;
}

bool IsCurrentFollower(const Partition* part, uint64_t generation) {
  return part != nullptr && part->replica != nullptr && !part->replica->leader() &&
         part->replica->generation == generation;
}

// Appends the fetched `records` (whole batches; a partial last one is left for the next
// fetch) to the follower's log on its owner: epochs first, then the batch, then the
// producer state, as Kafka's follower append does.
void AppendOnOwner(Partition& part, std::span<const uint8_t> records, storage::AckLevel ack,
                   OwnerResult* r) {
  storage::PartitionLog& log = *part.log;
  std::vector<std::span<const uint8_t>> batches;
  if (Status st = replica::SplitFetchedBatches(records, &batches); !st.ok()) {
    r->status = st;
    return;
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    std::span<const uint8_t> batch = batches[i];
    // Whole, intact and in place before anything (its epoch) is recorded: a leader epoch
    // entry must never start where no batch of that epoch is appended.
    Result<storage::BatchHeader> valid =
        storage::ValidateBatch(batch, log.options().max_batch_bytes);
    if (!valid.ok()) {
      r->status = valid.status();
      return;
    }
    const storage::BatchHeader h = *valid;
    if (Status st = replica::CheckFetchedBatch(h, log.end_offset()); !st.ok()) {
      r->status = st;
      return;
    }
    if (h.next_offset() <= log.end_offset()) continue;  // already here
    if (h.leader_epoch > part.epochs.latest_epoch() ||
        (part.epochs.entries().empty() && h.leader_epoch >= 0)) {
      if (Status st = part.epochs.Assign(h.leader_epoch, h.base_offset); !st.ok()) {
        r->status = st;
        return;
      }
    }
    ProducerBatch pb = ProducerBatch::FromHeader(batch);
    const bool control = (h.attributes & storage::kAttrControl) != 0;
    std::optional<int16_t> type;
    int32_t coordinator_epoch = -1;
    storage::AppendOptions ao;
    ao.crc_checked = true;
    if (control) {
      type =
          storage::ParseControlType(batch.subspan(storage::kBatchHeaderSize), &coordinator_epoch);
      std::optional<int64_t> first =
          pb.producer_id >= 0 ? part.producers.OpenTxn(pb.producer_id) : std::nullopt;
      if (type == static_cast<int16_t>(storage::ControlType::kAbort) && first.has_value()) {
        storage::AbortedTxn txn;
        txn.producer_id = pb.producer_id;
        txn.first_offset = *first;
        txn.last_stable_offset = part.producers.LastStableOffsetWithout(pb.producer_id);
        ao.aborted_txn = txn;
      }
    }
    if (i + 1 == batches.size()) {
      r->ack = std::make_shared<std::promise<Status>>();
      ao.ack = ack;
      ao.on_ack = [p = r->ack](const Status& st, const storage::AppendInfo&) { p->set_value(st); };
    }
    Result<storage::AppendInfo> appended = log.AppendReplica(batch, std::move(ao));
    if (!appended.ok()) {
      r->ack.reset();
      r->status = appended.status();
      // The epoch assigned for this batch goes with it.
      if (Status st = part.epochs.TruncateFromEnd(log.end_offset()); !st.ok()) {
        SLUICE_LOG(kReplicaLog, kWarn, "{}: {}", log.dir(), st.ToString());
      }
      return;
    }
    if (control) {
      if (pb.producer_id >= 0 && type.has_value()) {
        part.producers.OnMarker(pb.producer_id, pb.producer_epoch, coordinator_epoch,
                                h.base_offset);
      }
    } else {
      pb.record_count = h.last_offset_delta + 1;
      part.producers.OnAppended(pb, h.base_offset);
    }
  }
}

// Kafka's follower truncation for a diverging epoch (AbstractFetcherThread
// getOffsetTruncationState): to the end of the leader's epoch, or of the largest local
// epoch at or below it, whichever is first.
Status TruncateOnOwner(Partition& part, const kafka::FetchResponse::EpochEndOffset& div) {
  storage::PartitionLog& log = *part.log;
  const int64_t end = log.end_offset();
  int64_t to = end;
  if (div.end_offset < 0) {
    to = std::min(part.replica->high_watermark, end);
  } else if (div.epoch < 0) {
    to = std::min(div.end_offset, end);
  } else {
    auto [local_epoch, local_end] = part.epochs.EndOffsetFor(div.epoch, end);
    if (local_epoch < 0 || local_end < 0) {
      to = std::min(div.end_offset, end);
    } else if (local_epoch != div.epoch) {
      to = std::min(local_end, end);  // and ask again with the earlier epoch
    } else {
      to = std::min({local_end, div.end_offset, end});
    }
  }
  SLUICE_LOG(kReplicaLog, kInfo, "{}: diverging epoch {} ending at {}: truncating from {} to {}",
             log.dir(), div.epoch, div.end_offset, end, to);
  if (to < end) RETURN_IF_ERROR(log.TruncateTo(to));
  RETURN_IF_ERROR(part.epochs.TruncateFromEnd(log.end_offset()));
  RETURN_IF_ERROR(part.producers.Rebuild(log));
  part.replica->high_watermark = std::min(part.replica->high_watermark, log.end_offset());
  return Status::OK();
}

// A follower starting over at its leader's local start (design 0025, decision 9) takes
// the epochs and producers tiered storage recorded there, as Kafka's follower builds its
// auxiliary state from the remote segment before: what a later leadership answers for
// old epochs and old producers' retries. Malformed ones are skipped (logged).
void RestoreOnOwner(Partition& part, int64_t at, const TierUploader::StateAt& state) {
  const std::string& dir = part.log->dir();
  Status epochs_st;
  if (!state.epochs.empty()) {
    Result<std::vector<LeaderEpochCache::Entry>> entries = LeaderEpochCache::Parse(state.epochs);
    epochs_st = entries.status();
    for (size_t i = 0; entries.ok() && i < entries->size() && epochs_st.ok(); ++i) {
      if ((*entries)[i].start_offset <= at)
        epochs_st = part.epochs.Assign((*entries)[i].epoch, (*entries)[i].start_offset);
    }
  }
  Result<ProducerStateTable::SnapshotInfo> producers =
      state.producers.empty()
          ? Result<ProducerStateTable::SnapshotInfo>(NotFoundError("no producer snapshot"))
          : part.producers.LoadSnapshot(state.producers);
  if (producers.ok() && producers->offset != at) {
    producers = InvalidArgumentError("the snapshot is at {}", producers->offset);
    (void)part.producers.Rebuild(*part.log);
  }
  if (producers.ok()) {
    // Kept where a restart rebuilds the producers from (LocalLogs::Open), as the
    // uploader keeps its own: the log before it is not here to replay.
    Status kept = WriteFileDurably(storage::Env::Posix(), dir, TierUploader::kProducerSnapshotFile,
                                   state.producers);
    if (!kept.ok()) producers = kept;
  }
  SLUICE_LOG(kReplicaLog, kInfo, "{}: tiered storage's state at {}: leader epochs {}, producers {}",
             dir, at, epochs_st.ok() ? "taken" : epochs_st.message(),
             producers.ok() ? "taken" : producers.status().message());
}

// A follower applies its leader's log start (DeleteRecords or retention there; Kafka's
// follower maybeIncrementLogStartOffset): up to what it has written.
Status ApplyLeaderStartOnOwner(Partition& part, int64_t leader_start) {
  storage::PartitionLog& log = *part.log;
  const int64_t to = std::min(leader_start, log.written_end_offset());
  // Also below the local start (a tiered log's older offsets are remote): recorded, so a
  // later leadership here does not serve what the leader's DeleteRecords removed.
  if (to <= log.records_start_offset()) return Status::OK();
  ASSIGN_OR_RETURN(int64_t start, log.DeleteRecordsBefore(to));
  RETURN_IF_ERROR(part.epochs.TruncateFromStart(start));
  part.replica->high_watermark = std::max(part.replica->high_watermark, start);
  return Status::OK();
}

// One partition's answer on its owner: truncation for a diverging epoch, or the
// fetched batches appended and the leader's log start applied; then where to fetch from
// next, the ack to wait for before reporting it, and the follower's high watermark (the
// leader's, within what this log has: it only seeds a later leadership, which takes its
// own durable end as the bound, so it need not wait for the ack).
void ApplyOnOwner(Partition* part, uint64_t generation,
                  const kafka::FetchResponse::PartitionData& data, storage::AckLevel ack,
                  OwnerResult* r) {
  if (!IsCurrentFollower(part, generation)) {
    r->stale = true;
    return;
  }
  const bool diverged = data.diverging_epoch.epoch >= 0 || data.diverging_epoch.end_offset >= 0;
  const std::span<const uint8_t> records =
      data.records.inline_bytes.value_or(std::span<const uint8_t>());
  if (diverged) {
    r->status = TruncateOnOwner(*part, data.diverging_epoch);
  } else if (!records.empty()) {
    AppendOnOwner(*part, records, ack, r);
  }
  if (r->status.ok() && !diverged && data.log_start_offset > part->log->records_start_offset()) {
    if (Status st = ApplyLeaderStartOnOwner(*part, data.log_start_offset); !st.ok()) {
      SLUICE_LOG(kReplicaLog, kWarn, "{}: moving the log start to the leader's {}: {}",
                 part->log->dir(), data.log_start_offset, st.ToString());
    }
  }
  ReadPosition(*part, r);
  if (!r->status.ok()) return;
  if (r->ack == nullptr && ack == storage::AckLevel::kDurable) {
    // Nothing appended by this answer, yet the end reported next must be synced: an
    // earlier answer may have appended batches and then failed before its ack was asked
    // for (0018 review item 7).
    r->ack = std::make_shared<std::promise<Status>>();
    part->log->WhenDurable(
        r->end, [p = r->ack](const Status& st, const storage::AppendInfo&) { p->set_value(st); });
  }
  part->replica->high_watermark = std::max<int64_t>(0, std::min(data.high_watermark, r->end));
}

}  // namespace

Status replica::CheckFetchedBatch(const storage::BatchHeader& h, int64_t log_end) {
  if (h.base_offset < 0 || h.last_offset_delta < 0 ||
      h.base_offset > std::numeric_limits<int64_t>::max() - 1 - h.last_offset_delta) {
    return CorruptionError("a fetched batch at offset {} with last offset delta {}", h.base_offset,
                           h.last_offset_delta);
  }
  if (h.base_offset < log_end && h.next_offset() > log_end) {
    return CorruptionError("a fetched batch {}..{} straddles the log end {}", h.base_offset,
                           h.last_offset(), log_end);
  }
  return Status::OK();
}

Status replica::SplitFetchedBatches(std::span<const uint8_t> records,
                                    std::vector<std::span<const uint8_t>>* batches) {
  size_t pos = 0;
  while (records.size() - pos >= storage::kBatchHeaderSize) {
    const int32_t length = static_cast<int32_t>(storage::LoadBE32(records.data() + pos + 8));
    if (length < static_cast<int32_t>(storage::kBatchHeaderSize - storage::kBatchLogOverhead)) {
      return CorruptionError("a fetched batch at byte {} has length {}", pos, length);
    }
    const size_t size = storage::kBatchLogOverhead + static_cast<size_t>(length);
    if (size > records.size() - pos) break;  // partial: fetched again next time
    batches->push_back(records.subspan(pos, size));
    pos += size;
  }
  return Status::OK();
}

ReplicaFetcher::ReplicaFetcher(ReplicaManager* manager, int32_t leader, std::string host,
                               int32_t port)
    : manager_(manager),
      leader_(leader),
      host_(std::move(host)),
      port_(port),
      conn_(std::make_unique<InterBrokerConnection>(host_, port_, manager->options().clock,
                                                    manager->options().inter_broker_security)) {
  thread_ = std::thread([this] { Run(); });
}

ReplicaFetcher::~ReplicaFetcher() { Stop(); }

void ReplicaFetcher::Add(const PartitionKey& key, const Start& start) {
  std::lock_guard lock(mu_);
  partitions_[key] = Fetched{start, 0, manager_->options().clock->NowMillis()};
  cv_.notify_all();
}

void ReplicaFetcher::Remove(const PartitionKey& key) {
  std::lock_guard lock(mu_);
  partitions_.erase(key);
}

bool ReplicaFetcher::empty() {
  std::lock_guard lock(mu_);
  return partitions_.empty();
}

std::map<PartitionKey, ReplicaFetcher::Start> ReplicaFetcher::TakeAll() {
  std::lock_guard lock(mu_);
  std::map<PartitionKey, Start> out;
  for (const auto& [key, f] : partitions_) out.emplace(key, f.state);
  partitions_.clear();
  return out;
}

void ReplicaFetcher::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  conn_->Shutdown();  // wakes a blocked connect, send or read
  if (thread_.joinable()) thread_.join();
  Disconnect();
}

void ReplicaFetcher::Run() {
  const int64_t backoff = std::max<int64_t>(manager_->options().fetch_backoff_ms, 1);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (stopping_) return;
      if (partitions_.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(backoff));
        continue;
      }
    }
    if (!conn_->connected() && !Connect()) {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(backoff), [&] { return stopping_; });
      continue;
    }
    if (!FetchOnce()) {
      Disconnect();
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(backoff), [&] { return stopping_; });
    }
  }
}

bool ReplicaFetcher::Connect() {
  Status st = conn_->Connect(manager_->options().socket_timeout_ms);
  if (conn_->WarnAbout(st)) {
    SLUICE_LOG(kReplicaLog, kWarn, "leader {}: {}", leader_, st.ToString());
  } else if (!st.ok()) {
    SLUICE_LOG(kReplicaLog, kDebug, "leader {}: {}", leader_, st.ToString());
  }
  return st.ok();
}

void ReplicaFetcher::Disconnect() { conn_->Close(); }

bool ReplicaFetcher::FetchOnce() {
  const ReplicaManagerOptions& o = manager_->options();
  const int64_t now = o.clock->NowMillis();
  std::vector<std::pair<PartitionKey, Fetched>> asked;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, f] : partitions_) {
      if (f.delayed_until_ms <= now) asked.emplace_back(key, f);
    }
  }
  if (asked.empty()) {
    // Until the first partition's delay ends (or a partition is added).
    std::unique_lock lock(mu_);
    int64_t wait_ms = std::max<int64_t>(o.fetch_backoff_ms, 1) / 4 + 1;
    for (const auto& [key, f] : partitions_) {
      wait_ms = std::min(wait_ms, std::max<int64_t>(f.delayed_until_ms - now, 1));
    }
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
    return true;
  }
  kafka::FetchRequest req;
  req.replica_state.replica_id = o.node_id;
  req.replica_state.replica_epoch =
      o.broker_epoch_source != nullptr ? o.broker_epoch_source->load() : o.broker_epoch;
  req.max_wait_ms = o.fetch_max_wait_ms;
  req.min_bytes = 1;
  req.max_bytes = o.fetch_max_bytes;
  req.isolation_level = 0;
  req.session_id = 0;
  req.session_epoch = -1;  // no fetch session
  for (const auto& [key, f] : asked) {
    if (req.topics.empty() || req.topics.back().topic_id != f.state.topic_id) {
      kafka::FetchRequest::FetchTopic t;
      t.topic = key.first;
      t.topic_id = f.state.topic_id;
      req.topics.push_back(std::move(t));
    }
    kafka::FetchRequest::FetchPartition fp;
    fp.partition = key.second;
    fp.current_leader_epoch = f.state.leader_epoch;
    fp.fetch_offset = f.state.fetch_offset;
    fp.last_fetched_epoch = f.state.last_fetched_epoch;
    fp.log_start_offset = -1;
    fp.partition_max_bytes = o.fetch_partition_max_bytes;
    req.topics.back().partitions.push_back(fp);
  }
  const int timeout = o.socket_timeout_ms + o.fetch_max_wait_ms;
  size_t body_at = 0;
  Result<std::vector<uint8_t>> body = conn_->RoundTrip(
      kafka::ApiKey::kFetch, kFetchVersion, fmt::format("sluice-replica-{}", o.node_id),
      [&](kafka::Writer& w) { req.Encode(w, kFetchVersion); }, timeout, kMaxResponseBytes,
      &body_at);
  kafka::FetchResponse resp;
  Status st = body.status();
  if (st.ok()) {
    kafka::Reader r(std::span<const uint8_t>(*body).subspan(body_at));
    st = resp.Decode(r, kFetchVersion);
  }
  if (!st.ok()) {
    if (st.code() == StatusCode::kIOError || st.code() == StatusCode::kAborted) {
      SLUICE_LOG(kReplicaLog, kDebug, "leader {}: {}", leader_, st.ToString());
    } else {
      SLUICE_LOG(kReplicaLog, kWarn, "leader {}: bad fetch response: {}", leader_, st.ToString());
    }
    return false;
  }
  if (resp.error_code != ErrorCode::kNone) {
    SLUICE_LOG(kReplicaLog, kWarn, "leader {}: fetch error {}", leader_,
               static_cast<int>(resp.error_code));
    for (const auto& [key, f] : asked) Delay(key, f.state.generation);
    return true;
  }
  // Errors first, one partition at a time (rare); the data of every other partition is
  // appended on the owners together: one post per owner shard for the whole answer, and
  // the appends' acks awaited once all were queued (one post-and-wait per partition,
  // and a second post for its high watermark, made small fetches dear: 0018, "replperf").
  std::vector<Answered> work;
  std::vector<std::pair<PartitionKey, Fetched>> tiered;  // behind the leader's local start
  std::map<PartitionKey, int64_t> tiered_starts;         // their leader's whole-log start
  for (const auto& t : resp.responses) {
    for (const auto& p : t.partitions) {
      for (const auto& [key, f] : asked) {
        if (f.state.topic_id != t.topic_id || key.second != p.partition_index) continue;
        if (p.error_code == ErrorCode::kOffsetOutOfRange &&
            p.log_start_offset > f.state.fetch_offset) {
          ResetToLeaderStart(key, f.state.generation, p.log_start_offset);
        } else if (p.error_code == ErrorCode::kOffsetMovedToTieredStorage) {
          tiered.emplace_back(key, f);
          tiered_starts[key] = p.log_start_offset;
        } else if (p.error_code != ErrorCode::kNone) {
          // A leader that moved on or not there yet: the controller tells this broker
          // what changed; until then, ask again after the backoff.
          SLUICE_LOG(kReplicaLog, kDebug, "{}-{}: leader {} answered error {}", key.first,
                     key.second, leader_, static_cast<int>(p.error_code));
          Delay(key, f.state.generation, p.error_code);
        } else {
          work.push_back(Answered{key, f.state, &p, {}});
        }
        break;
      }
    }
  }
  HandlePartitions(work);
  // Older than the leader's local log: tiered storage holds it (design 0025, decision 9).
  // As Kafka's follower, this log starts over at the leader's local start (ListOffsets
  // -4, EARLIEST_LOCAL); what is below stays in tiered storage.
  for (const auto& [key, f] : tiered) {
    Result<int64_t> local = LeaderLocalStart(key, f);
    if (!local.ok() || *local <= f.state.fetch_offset) {
      SLUICE_LOG(kReplicaLog, kWarn,
                 "{}-{}: offset {} is in tiered storage, and leader {}'s local start: {}",
                 key.first, key.second, f.state.fetch_offset, leader_,
                 local.ok() ? std::to_string(*local) : local.status().ToString());
      Delay(key, f.state.generation);
      if (!local.ok()) return false;  // the connection is unusable
      continue;
    }
    // The producers and epochs at that offset, from the remote segment ending there.
    std::optional<TierUploader::StateAt> state;
    if (const RemoteStore* store = manager_->options().remote_store; store != nullptr) {
      Result<TierUploader::StateAt> got =
          TierUploader::RemoteStateAt(*store, key.first, f.state.topic_id, key.second, *local);
      if (got.ok()) {
        state = *std::move(got);
      } else {
        SLUICE_LOG(kReplicaLog, kWarn,
                   "{}-{}: starting over at {} without tiered storage's producers "
                   "and epochs there: {}",
                   key.first, key.second, *local, got.status().ToString());
      }
    }
    ResetToLeaderStart(key, f.state.generation, *local, state ? &*state : nullptr,
                       tiered_starts[key]);
  }
  return true;
}

Result<int64_t> ReplicaFetcher::LeaderLocalStart(const PartitionKey& key, const Fetched& f) {
  const auto& o = manager_->options();
  kafka::ListOffsetsRequest req;
  req.replica_id = o.node_id;
  kafka::ListOffsetsRequest::Partition p;
  p.partition_index = key.second;
  p.current_leader_epoch = f.state.leader_epoch;
  p.timestamp = -4;  // EARLIEST_LOCAL (KIP-1005)
  req.topics.push_back({key.first, {p}, {}});
  constexpr int16_t kVersion = 9;
  size_t body_at = 0;
  ASSIGN_OR_RETURN(
      std::vector<uint8_t> body,
      conn_->RoundTrip(
          kafka::ApiKey::kListOffsets, kVersion, fmt::format("sluice-replica-{}", o.node_id),
          [&](kafka::Writer& w) { req.Encode(w, kVersion); }, o.socket_timeout_ms,
          kMaxResponseBytes, &body_at));
  kafka::ListOffsetsResponse resp;
  kafka::Reader r(std::span<const uint8_t>(body).subspan(body_at));
  RETURN_IF_ERROR(resp.Decode(r, kVersion));
  if (resp.topics.size() != 1 || resp.topics[0].partitions.size() != 1) {
    return CorruptionError("a ListOffsets answer for {} partitions", resp.topics.size());
  }
  const auto& out = resp.topics[0].partitions[0];
  if (out.error_code != ErrorCode::kNone) {
    return UnavailableError("ListOffsets -4 answered error {}", static_cast<int>(out.error_code));
  }
  return out.offset;
}

void ReplicaFetcher::HandlePartitions(std::vector<Answered>& work) {
  if (work.empty()) return;
  const storage::AckLevel ack = manager_->flush_policy() == storage::FlushPolicy::kDurable
                                    ? storage::AckLevel::kDurable
                                    : storage::AckLevel::kWritten;
  std::vector<ReplicaManager::Located> where;
  where.reserve(work.size());
  for (const Answered& w : work) where.push_back({w.key, w.state.topic_id});
  const bool ran = manager_->RunOnPartitions(where, [&](Partition* part, size_t i) {
    ApplyOnOwner(part, work[i].state.generation, *work[i].data, ack, &work[i].result);
  });
  if (!ran) return;  // stopping
  for (Answered& w : work) {
    OwnerResult& r = w.result;
    if (r.stale) continue;
    if (r.ack != nullptr) {
      // Reported to the leader only once it is written (synced under durable).
      Status acked = r.ack->get_future().get();
      if (!acked.ok() && r.status.ok()) r.status = acked;
    }
    if (!r.status.ok()) {
      SLUICE_LOG(kReplicaLog, kWarn, "{}-{}: from leader {}: {}", w.key.first, w.key.second,
                 leader_, r.status.ToString());
      Delay(w.key, w.state.generation);
      continue;
    }
    Update(w.key, w.state.generation, r.end, r.last_epoch);
  }
}

void ReplicaFetcher::ResetToLeaderStart(const PartitionKey& key, uint64_t generation,
                                        int64_t leader_start, const TierUploader::StateAt* state,
                                        int64_t whole_start) {
  // Behind the leader's log start (retention or DeleteRecords there): Kafka's
  // truncateFullyAndStartAt. Everything here goes, and the log restarts empty at the
  // leader's start, which becomes its own start.
  Status st;
  bool stale = false;
  bool ran = manager_->RunOnPartition(key, [&](Partition* part) {
    if (!IsCurrentFollower(part, generation)) {
      stale = true;
      return;
    }
    storage::PartitionLog& log = *part->log;
    SLUICE_LOG(kReplicaLog, kInfo,
               "{}: the leader's log starts at {}, past this log's end {}: restarting it there",
               log.dir(), leader_start, log.end_offset());
    st = log.TruncateFullyAndStartAt(leader_start);
    // No epoch, producer or transaction of the old log holds any more (Kafka clears them).
    if (st.ok()) st = part->epochs.TruncateFromEnd(0);
    if (st.ok()) st = part->producers.Rebuild(log);
    if (st.ok() && state != nullptr) RestoreOnOwner(*part, leader_start, *state);
    // The whole log's start below it (tiered storage's part): recorded as the leader's.
    if (st.ok() && whole_start > 0 && whole_start < leader_start) {
      st = log.DeleteRecordsBefore(whole_start).status();
    }
    // Nothing below the leader's start exists: its high watermark is at least there.
    part->replica->high_watermark = leader_start;
  });
  if (!ran || stale) return;
  if (!st.ok()) {
    SLUICE_LOG(kReplicaLog, kWarn, "{}-{}: emptying for leader {}: {}", key.first, key.second,
               leader_, st.ToString());
    Delay(key, generation);
    return;
  }
  Update(key, generation, leader_start, -1);
}

void ReplicaFetcher::Delay(const PartitionKey& key, uint64_t generation, ErrorCode error) {
  std::lock_guard lock(mu_);
  auto it = partitions_.find(key);
  if (it == partitions_.end() || it->second.state.generation != generation) return;
  const int64_t now = manager_->options().clock->NowMillis();
  const int64_t backoff = manager_->options().fetch_backoff_ms;
  const bool leader_behind =
      error == ErrorCode::kNotLeaderOrFollower || error == ErrorCode::kUnknownLeaderEpoch;
  it->second.delayed_until_ms = now + (leader_behind && now - it->second.added_ms < backoff
                                           ? std::min(kShortBackoffMs, backoff)
                                           : backoff);
}

void ReplicaFetcher::Update(const PartitionKey& key, uint64_t generation, int64_t fetch_offset,
                            int32_t last_fetched_epoch) {
  std::lock_guard lock(mu_);
  auto it = partitions_.find(key);
  if (it == partitions_.end() || it->second.state.generation != generation) return;
  it->second.state.fetch_offset = fetch_offset;
  it->second.state.last_fetched_epoch = last_fetched_epoch;
}

}  // namespace sluice::broker
