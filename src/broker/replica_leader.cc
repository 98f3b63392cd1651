// The leader's side of replication, on the partition's owner thread
// (docs/design/0018-cluster.md, decisions 4, 6 and 7; Kafka's Partition.scala): follower
// fetches, the high watermark, acks=all waits and the ISR.
#include <fmt/format.h>

#include <algorithm>

#include "base/logging.h"
#include "broker/handlers/context.h"
#include "broker/handlers/fetch.h"
#include "broker/loggers.h"
#include "broker/partition.h"
#include "broker/replica_manager.h"

namespace sluice::broker {

FollowerProgress* ReplicaState::Follower(int32_t node) {
  for (FollowerProgress& f : followers) {
    if (f.node == node) return &f;
  }
  return nullptr;
}

bool ReplicaState::InIsr(int32_t node) const {
  return std::find(isr.begin(), isr.end(), node) != isr.end();
}

namespace replica {
namespace {

using kafka::ErrorCode;

void Answer(const std::shared_ptr<AcksWait>& w, ErrorCode e) {
  if (w->answered) return;
  w->answered = true;
  if (w->timer != 0) w->loop->Cancel(w->timer);
  auto done = std::move(w->done);
  done(e);
}

// Whether a follower has everything the leader had recently (Kafka's isCaughtUp).
bool CaughtUp(const FollowerProgress& f, int64_t leader_end, int64_t now_ms, int64_t max_lag_ms) {
  return f.log_end == leader_end || now_ms - f.last_caught_up_ms <= max_lag_ms;
}

}  // namespace

int64_t LocalEnd(storage::FlushPolicy policy, const storage::PartitionLog& log) {
  return HighWatermark(policy, log);
}

ErrorCode CheckAppend(const Partition& part, int16_t acks, std::string* message) {
  const ReplicaState& rs = *part.replica;
  if (!rs.leader()) {
    *message = fmt::format("this broker follows broker {} for this partition", rs.leader_id);
    return ErrorCode::kNotLeaderOrFollower;
  }
  if (!rs.manager->LeaseValid()) [[unlikely]] {
    *message = "this broker's etcd lease may have expired: it leads nothing until it renews";
    return ErrorCode::kNotLeaderOrFollower;
  }
  if (acks == -1 && static_cast<int32_t>(rs.isr.size()) < rs.min_insync_replicas) {
    *message = fmt::format("the in-sync replicas ({}) are fewer than min.insync.replicas ({})",
                           rs.isr.size(), rs.min_insync_replicas);
    return ErrorCode::kNotEnoughReplicas;
  }
  return ErrorCode::kNone;
}

void PrepareAppend(Partition& part, storage::AppendOptions* opts) {
  ReplicaState& rs = *part.replica;
  ReplicaManager* mgr = rs.manager;
  // The leader's own end counts for the high watermark once written (interval) or
  // durable (durable): the append's ack at that level recomputes it on the owner.
  opts->ack = mgr->flush_policy() == storage::FlushPolicy::kDurable ? storage::AckLevel::kDurable
                                                                    : storage::AckLevel::kWritten;
  opts->leader_epoch = rs.leader_epoch;
  opts->on_ack = [mgr, key = PartitionKey{rs.topic, rs.partition}, generation = rs.generation,
                  then = std::move(opts->on_ack)](const Status& st,
                                                  const storage::AppendInfo& info) {
    if (st.ok()) {
      mgr->PostToPartition(key, generation, [](Partition& p) { MaybeAdvanceHighWatermark(p); });
    }
    if (then) then(st, info);
  };
}

// What a committed acks=all batch is answered (Kafka's checkEnoughReplicasReachOffset):
// the high watermark passed it, but if the ISR shrank below min.insync.replicas meanwhile
// it is held by fewer replicas than the producer asked for: NOT_ENOUGH_REPLICAS_AFTER_APPEND.
namespace {
ErrorCode CommittedVerdict(const ReplicaState& rs) {
  return static_cast<int32_t>(rs.isr.size()) < rs.min_insync_replicas
             ? ErrorCode::kNotEnoughReplicasAfterAppend
             : ErrorCode::kNone;
}
}  // namespace

void AwaitHighWatermark(Partition& part, int64_t required_offset, int32_t timeout_ms,
                        std::function<void(ErrorCode)> done) {
  ReplicaState& rs = *part.replica;
  if (rs.high_watermark >= required_offset) return done(CommittedVerdict(rs));
  auto w = std::make_shared<AcksWait>();
  w->required_offset = required_offset;
  w->done = std::move(done);
  w->loop = rs.manager->context().shards.at(part.shard).loop;
  // The timer holds the wait, not the partition: it answers even after a role change.
  w->timer = w->loop->RunAfter(std::max(timeout_ms, 0), [w] {
    w->timer = 0;
    Answer(w, ErrorCode::kRequestTimedOut);
  });
  // Waits answered by their timers leave here (or when the high watermark moves).
  std::erase_if(rs.acks_waits, [](const std::shared_ptr<AcksWait>& x) { return x->answered; });
  rs.acks_waits.push_back(std::move(w));
}

void FailAcksWaits(ReplicaState& rs, ErrorCode error) {
  std::vector<std::shared_ptr<AcksWait>> waits;
  waits.swap(rs.acks_waits);
  for (auto& w : waits) Answer(w, error);
}

bool MaybeAdvanceHighWatermark(Partition& part) {
  ReplicaState& rs = *part.replica;
  if (!rs.leader()) return false;
  ReplicaManager& mgr = *rs.manager;
  // A leader whose lease may be gone commits nothing more: another may lead already.
  if (!mgr.LeaseValid()) [[unlikely]]
    return false;
  int64_t hw = LocalEnd(mgr.flush_policy(), *part.log);
  const int64_t leader_end = part.log->written_end_offset();
  const int64_t now = mgr.options().clock->NowMillis();
  for (const FollowerProgress& f : rs.followers) {
    // The committed ISR counts, and (as Kafka) a caught-up follower about to join it, so
    // a follower catching up with a leader alone in the ISR is not outrun for ever.
    const bool counts =
        rs.InIsr(f.node) ||
        (f.log_end >= 0 && CaughtUp(f, leader_end, now, mgr.options().replica_lag_time_max_ms));
    if (counts) hw = std::min(hw, std::max<int64_t>(f.log_end, 0));
  }
  if (hw <= rs.high_watermark) return false;
  rs.high_watermark = hw;
  // The waits it passed, in any order (each has its own timer).
  std::vector<std::shared_ptr<AcksWait>> ready;
  std::erase_if(rs.acks_waits, [&](const std::shared_ptr<AcksWait>& w) {
    if (w->answered) return true;
    if (w->required_offset > hw) return false;
    ready.push_back(w);
    return true;
  });
  const ErrorCode verdict = CommittedVerdict(rs);
  for (auto& w : ready) Answer(w, verdict);
  // Consumers may read further; followers' fetches wait for data, not for this.
  handlers::WakeFetches(mgr.context(), part, handlers::Wake::kConsumers);
  return true;
}

ErrorCode DeleteRecordsBound(handlers::Context& ctx, const std::string& topic, int32_t partition,
                             int64_t* hw) {
  if (!ctx.shards.attached()) return ErrorCode::kNone;
  std::shared_ptr<const MetadataSnapshot> meta = ctx.shards.Published();
  const int owner = ctx.shards.TargetOf(meta->Find(topic), topic, partition).shard;
  if (owner < 0) return ErrorCode::kNone;
  ErrorCode error = ErrorCode::kNone;
  const bool ran = ctx.shards.RunOnShard(owner, [&] {
    const auto& parts = ctx.shards.at(owner).partitions;
    auto it = parts.find(PartitionKey{topic, partition});
    if (it == parts.end() || it->second->replica == nullptr) return;
    const ReplicaState& rs = *it->second->replica;
    if (!rs.leader()) {
      error = ErrorCode::kNotLeaderOrFollower;
      return;
    }
    *hw = rs.high_watermark;
  });
  return ran ? error : ErrorCode::kNotLeaderOrFollower;
}

void MaybeShrinkIsr(Partition& part, int64_t now_ms) {
  ReplicaState& rs = *part.replica;
  if (!rs.leader() || rs.isr_change_pending) return;
  ReplicaManager& mgr = *rs.manager;
  const int64_t leader_end = part.log->written_end_offset();
  std::vector<int32_t> keep;
  bool shrink = false;
  for (int32_t node : rs.isr) {
    const FollowerProgress* f = node == mgr.options().node_id ? nullptr : rs.Follower(node);
    const bool out_of_sync =
        node != mgr.options().node_id &&
        (f == nullptr || !CaughtUp(*f, leader_end, now_ms, mgr.options().replica_lag_time_max_ms));
    if (out_of_sync) {
      shrink = true;
      SLUICE_LOG(kReplicaLog, kInfo,
                 "{}-{}: follower {} is out of sync (log end {}, leader end {}, last caught up "
                 "{} ms ago): leaving the ISR",
                 rs.topic, rs.partition, node, f != nullptr ? f->log_end : -1, leader_end,
                 f != nullptr ? now_ms - f->last_caught_up_ms : -1);
    } else {
      keep.push_back(node);
    }
  }
  if (shrink) mgr.SubmitIsrChange(part, std::move(keep));
}

void ServeFetch(Partition& part, int32_t replica_id, int64_t replica_epoch,
                const kafka::FetchRequest::FetchPartition& fp, uint64_t max_bytes,
                kafka::FetchResponse::PartitionData* out,
                std::optional<storage::FileSlice>* slice) {
  storage::PartitionLog& log = *part.log;
  ReplicaState* rs = part.replica.get();
  if (rs == nullptr || !rs->leader()) {
    out->error_code = ErrorCode::kNotLeaderOrFollower;
    return;
  }
  ReplicaManager& mgr = *rs->manager;
  if (fp.current_leader_epoch >= 0 && fp.current_leader_epoch != rs->leader_epoch) {
    // A follower of an older epoch must learn the new leader; one of a newer epoch
    // knows more than this broker yet.
    out->error_code = fp.current_leader_epoch < rs->leader_epoch ? ErrorCode::kFencedLeaderEpoch
                                                                 : ErrorCode::kUnknownLeaderEpoch;
    return;
  }
  FollowerProgress* f = replica_id == mgr.options().node_id ? nullptr : rs->Follower(replica_id);
  if (f == nullptr) {
    // Not one of the assigned replicas (Kafka's followerReplicaOrThrow).
    out->error_code = fp.current_leader_epoch >= 0 ? ErrorCode::kUnknownLeaderEpoch
                                                   : ErrorCode::kNotLeaderOrFollower;
    return;
  }
  if (replica_epoch >= 0 && replica_epoch < f->broker_epoch) {
    // An older registration of that broker (a fetch from before it restarted).
    out->error_code = ErrorCode::kNotLeaderOrFollower;
    return;
  }
  // The log start is the whole log's, tiered storage's part included (design 0025,
  // decision 9): a follower moves its own start only to it.
  const LogStart starts = LogStartOf(part);
  const int64_t start = starts.local;
  const int64_t leader_end = log.written_end_offset();
  out->high_watermark = rs->high_watermark;
  out->last_stable_offset = rs->high_watermark;
  // While tiered storage's part is not listed yet the whole log's start is not known: the
  // DeleteRecords start, which is never above it (a follower records what it is sent).
  out->log_start_offset = starts.unknown ? log.records_start_offset() : starts.start;
  // Below the local start: tiered storage holds it (Kafka's OFFSET_MOVED_TO_TIERED_STORAGE:
  // the follower starts its log at this log's local start), or nobody does.
  auto below_start = [&] {
    out->error_code = starts.unknown ? ErrorCode::kKafkaStorageError
                      : fp.fetch_offset >= starts.start && starts.start < start
                          ? ErrorCode::kOffsetMovedToTieredStorage
                          : ErrorCode::kOffsetOutOfRange;
  };
  if (fp.last_fetched_epoch >= 0) {
    auto [div_epoch, div_end] = part.epochs.EndOffsetFor(fp.last_fetched_epoch, leader_end);
    if (fp.fetch_offset < start) return below_start();
    if (div_epoch < 0 || div_end < 0) {
      out->error_code = ErrorCode::kOffsetOutOfRange;
      return;
    }
    if (div_epoch < fp.last_fetched_epoch || div_end < fp.fetch_offset) {
      out->diverging_epoch = {div_epoch, div_end};  // the follower truncates, then asks again
      return;
    }
  }
  if (fp.fetch_offset < start) return below_start();
  if (fp.fetch_offset > leader_end) {
    out->error_code = ErrorCode::kOffsetOutOfRange;
    return;
  }
  // The follower has everything below fetch_offset (synced, under the durable policy:
  // decision 5).
  const int64_t now = mgr.options().clock->NowMillis();
  if (fp.fetch_offset >= leader_end) {
    f->last_caught_up_ms = std::max(f->last_caught_up_ms, now);
  } else if (fp.fetch_offset >= f->last_fetch_leader_end) {
    f->last_caught_up_ms = std::max(f->last_caught_up_ms, f->last_fetch_ms);
  }
  const bool moved = f->log_end != fp.fetch_offset;
  f->log_end = fp.fetch_offset;
  f->log_start = fp.log_start_offset;
  f->last_fetch_leader_end = std::max(f->last_fetch_leader_end, leader_end);
  f->last_fetch_ms = now;
  if (replica_epoch >= 0) f->broker_epoch = replica_epoch;
  // Expansion (Kafka's maybeExpandIsr): caught up to the high watermark and into this
  // epoch.
  // (Not while an earlier change waits to be retried: SubmitIsrChange would drop it, and
  // the line below was logged at every fetch.)
  if (!rs->isr_change_pending && now >= rs->isr_retry_after_ms && !rs->InIsr(replica_id) &&
      f->log_end >= rs->high_watermark && f->log_end >= rs->epoch_start_offset) {
    std::vector<int32_t> grown = rs->isr;
    grown.push_back(replica_id);
    SLUICE_LOG(kReplicaLog, kInfo, "{}-{}: follower {} caught up at {}: joining the ISR", rs->topic,
               rs->partition, replica_id, f->log_end);
    mgr.SubmitIsrChange(part, std::move(grown));
  }
  if (moved) MaybeAdvanceHighWatermark(part);
  out->high_watermark = rs->high_watermark;
  out->last_stable_offset = rs->high_watermark;
  if (fp.fetch_offset < leader_end) {
    const uint64_t limit = std::min<uint64_t>(
        max_bytes, fp.partition_max_bytes > 0 ? uint64_t(fp.partition_max_bytes) : 0);
    Result<storage::ReadResult> read =
        log.Read(fp.fetch_offset, std::max<uint64_t>(limit, 1), leader_end);
    if (!read.ok()) {
      out->error_code = read.status().code() == StatusCode::kOutOfRange
                            ? ErrorCode::kOffsetOutOfRange
                            : ErrorCode::kKafkaStorageError;
    } else if (read->slice.size > 0) {
      *slice = std::move(read->slice);
    }
  }
}

}  // namespace replica
}  // namespace sluice::broker
