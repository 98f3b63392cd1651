// Offsets by time and by epoch, read on each partition's owner: ListOffsets (latest,
// earliest, max timestamp, by timestamp) and OffsetForLeaderEpoch (KIP-320). Under
// read_committed (isolation_level 1) the latest offset is the last stable offset and a
// lookup that lands at or past it finds nothing, as Kafka answers.
#include <algorithm>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "broker/handlers/handlers.h"
#include "broker/record_lookup.h"
#include "kafka/protocol/records.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

// The first record of the batch holding `offset` with a timestamp satisfying `pick`, as
// (offset, timestamp), decoding the batch; nullopt when none does.
std::optional<std::pair<int64_t, int64_t>> FindInBatch(storage::PartitionLog& log, int64_t offset,
                                                       const std::function<bool(int64_t)>& pick) {
  Result<storage::ReadResult> read = log.Read(offset, 1);
  if (!read.ok() || read->slice.size == 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  if (!storage::PartitionLog::ReadSlice(read->slice, &bytes).ok()) return std::nullopt;
  const storage::BatchHeader first = storage::ParseBatchHeader(bytes);
  return FindRecordInBatch(std::span<const uint8_t>(bytes.data(), first.total_size()), 0, pick);
}

// The remote segment below the local start that answers a lookup by time (decision 6 of
// design 0025), or null when the local log does: for a timestamp, the first segment past
// the log start whose max timestamp reaches it; for -3 (`max_ts`, the local log's largest
// timestamp), the first segment holding a larger one than any after it and than the local
// log's (Kafka answers the first record with the largest timestamp).
const RemoteSegment* RemoteSegmentFor(const RemoteSegmentList& list, int64_t log_start,
                                      int64_t local_start, int64_t timestamp,
                                      std::optional<int64_t> max_ts) {
  const RemoteSegment* best = nullptr;
  for (const RemoteSegment& seg : list.segments) {
    // By end offset: after a leader change a later segment may begin lower (overlaps).
    if (seg.next <= log_start || seg.max_timestamp < 0 || seg.base >= local_start) continue;
    if (!max_ts.has_value()) {
      if (seg.max_timestamp >= timestamp) return &seg;
    } else if (seg.max_timestamp >= *max_ts &&
               (best == nullptr || seg.max_timestamp > best->max_timestamp)) {
      best = &seg;
    }
  }
  return best;
}

}  // namespace

void HandleListOffsets(Context& ctx, const Call& call, const kafka::ListOffsetsRequest& req) {
  const std::shared_ptr<Connection>& conn = call.conn;
  const kafka::RequestHeader& h = call.header;
  constexpr int64_t kLatest = -1, kEarliest = -2, kMaxTimestamp = -3;
  constexpr int64_t kEarliestLocal = -4, kLatestTiered = -5;  // KIP-1005, v8+
  Shard& home = ctx.shards.ShardOf(conn->loop());
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(home);
  // A lookup by time answered by a remote segment (design 0025, decision 6): what the
  // owner knew that the answer is checked against, on the home shard.
  struct RemoteLookup {
    RemoteTimeAsk ask;
    int64_t lso = 0;
    std::vector<LeaderEpochCache::Entry> epochs;
  };
  struct State {
    kafka::ListOffsetsResponse resp;
    std::vector<kafka::ListOffsetsResponse::Partition*> outs;  // per target
    std::vector<char> elsewhere;  // per target: a cluster's partition, maybe not open here
    kafka::ListOffsetsRequest req;
    std::vector<std::optional<RemoteLookup>> remote;  // per target
    std::shared_ptr<Connection> conn;
    kafka::RequestHeader header;
  };
  auto st = std::make_shared<State>();
  st->req = req;
  st->conn = conn;
  st->header = h;
  std::vector<Target> targets;
  std::vector<std::pair<size_t, size_t>> where;
  const Access access = AccessOf(ctx, call);
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const auto& want = req.topics[t];
    kafka::ListOffsetsResponse::Topic tout;
    tout.name = want.name;
    const MetadataSnapshot::Topic* info = meta.Find(want.name);
    const bool allowed =
        access.Check(auth::ResourceType::kTopic, want.name, auth::AclOperation::kDescribe);
    for (size_t i = 0; i < want.partitions.size(); ++i) {
      kafka::ListOffsetsResponse::Partition out;
      out.partition_index = want.partitions[i].partition_index;
      if (!allowed) {
        out.error_code = ErrorCode::kTopicAuthorizationFailed;
        tout.partitions.push_back(std::move(out));
        continue;
      }
      targets.push_back(ctx.shards.TargetOf(info, want.name, out.partition_index));
      where.emplace_back(t, i);
      tout.partitions.push_back(std::move(out));
    }
    st->resp.topics.push_back(std::move(tout));
  }
  for (auto [t, i] : where) st->outs.push_back(&st->resp.topics[t].partitions[i]);
  for (const Target& target : targets) {
    st->elsewhere.push_back(ctx.options.cluster.enabled() && target.shard >= 0);
  }
  st->remote.resize(targets.size());
  const int16_t version = h.api_version;
  const bool read_committed = req.isolation_level == 1;
  // The answer's last touches: by time, none when read_committed cannot see it yet; the
  // leader epoch of its offset; v0's offsets. Also for answers found in a remote segment,
  // on the home shard (hence a copy of the epochs).
  auto settle = [version, read_committed](kafka::ListOffsetsResponse::Partition& out,
                                          int64_t timestamp, int64_t lso,
                                          const std::vector<LeaderEpochCache::Entry>& epochs) {
    const bool by_time = timestamp >= 0 || timestamp == kMaxTimestamp;
    if (read_committed && by_time && out.offset >= lso) {
      out.offset = -1;  // not yet decided: read_committed consumers cannot see it
      out.timestamp = -1;
    }
    if (out.error_code == ErrorCode::kNone && out.offset >= 0 && timestamp != kLatest) {
      out.leader_epoch = LeaderEpochCache::EpochAt(epochs, out.offset);
    } else if (out.offset < 0) {
      out.leader_epoch = -1;
    }
    if (version == 0 && out.error_code == ErrorCode::kNone && out.offset >= 0) {
      out.old_style_offsets = {out.offset};
    }
  };
  ctx.shards.VisitOwners(
      home, std::move(targets),
      [&ctx, st, where, version, read_committed, settle](Partition* part, size_t k) {
        kafka::ListOffsetsResponse::Partition& out = *st->outs[k];
        const auto& wp = st->req.topics[where[k].first].partitions[where[k].second];
        if (part == nullptr) {
          // A cluster's partition not open here is another broker's (0018).
          out.error_code = st->elsewhere[k] != 0 ? ErrorCode::kNotLeaderOrFollower
                                                 : ErrorCode::kUnknownTopicOrPartition;
          return;
        }
        if (part->replica != nullptr && !part->replica->leader()) {
          out.error_code = ErrorCode::kNotLeaderOrFollower;  // followers are not read
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
        const int64_t hw = HighWatermark(ctx.options.flush_policy, *part);
        // A tiered partition's log starts in remote storage (design 0025, decision 6).
        const LogStart starts = LogStartOf(*part);
        const int64_t local_start = starts.local;
        const int64_t log_start = starts.start;
        const int64_t lso = std::max(part->producers.LastStableOffset(hw), std::min(log_start, hw));
        // By time, below the local start: the remote segment holding the answer is read
        // once every owner answered.
        std::shared_ptr<const RemoteSegmentList> remote;
        if (ctx.remote_reader != nullptr && log_start < local_start) {
          remote = ctx.remote_reader->segments().Get(part->topic_id, wp.partition_index);
        }
        auto remote_for = [&](int64_t timestamp, std::optional<int64_t> max_ts) {
          return remote == nullptr
                     ? nullptr
                     : RemoteSegmentFor(*remote, log_start, local_start, timestamp, max_ts);
        };
        // The answer's leader epoch: the segment's own, as its manifest records them (the
        // local checkpoint may have lost epochs whose segments are gone: rebuilt from the
        // local log), else the local ones.
        auto ask_remote = [&](const RemoteSegment& seg, int64_t timestamp, bool exact) {
          st->remote[k] = RemoteLookup{RemoteTimeAsk{part->topic_id, wp.partition_index, seg.base,
                                                     timestamp, exact, log_start},
                                       lso, seg.epochs.empty() ? epochs.entries() : seg.epochs};
        };
        if (wp.timestamp == kLatest) {
          out.offset = read_committed ? lso : hw;
        } else if (wp.timestamp == kEarliest) {
          // Not known while tiered storage's part is not listed yet: retriable.
          if (starts.unknown) {
            out.error_code = ErrorCode::kKafkaStorageError;
          } else {
            out.offset = log_start;
          }
        } else if (wp.timestamp == kEarliestLocal && version >= 8) {
          // Without tiered storage the earliest local offset is the log start.
          out.offset = local_start;
        } else if (wp.timestamp == kLatestTiered && version >= 9) {
          // The last offset in tiered storage; -1 when nothing is (or the topic is not
          // tiered), as Kafka answers.
          const int64_t tiered = part->tiered_next.load();
          out.offset = tiered > 0 ? tiered - 1 : -1;
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
          } else if (const RemoteSegment* seg = remote_for(0, best_ts)) {
            return ask_remote(*seg, seg->max_timestamp, true);
          } else if (best_base >= 0) {
            auto found = FindInBatch(log, best_base, [&](int64_t ts) { return ts == best_ts; });
            out.offset = found ? found->first : best_base;
            out.timestamp = best_ts;
          }
        } else if (wp.timestamp < 0) {
          out.error_code = ErrorCode::kInvalidRequest;
        } else if (const RemoteSegment* seg = remote_for(wp.timestamp, std::nullopt)) {
          return ask_remote(*seg, wp.timestamp, false);
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
        settle(out, wp.timestamp, lso, epochs.entries());
      },
      [&ctx, &home, st, settle] {
        std::vector<RemoteTimeAsk> asks;
        for (const auto& r : st->remote) {
          if (r.has_value()) asks.push_back(r->ask);
        }
        if (asks.empty()) return Reply(st->conn, st->header, st->resp);
        ctx.remote_reader->FindByTime(
            std::move(asks), [&ctx, &home, st, settle](std::vector<RemoteTimeAnswer> answers) {
              ctx.shards.PostGated(home.loop, [st, settle, answers = std::move(answers)] {
                size_t a = 0;
                for (size_t k = 0; k < st->remote.size(); ++k) {
                  if (!st->remote[k].has_value()) continue;
                  const RemoteTimeAnswer& answer = answers[a++];
                  const RemoteLookup& lookup = *st->remote[k];
                  kafka::ListOffsetsResponse::Partition& out = *st->outs[k];
                  out.error_code = answer.error;
                  out.offset = answer.offset;
                  out.timestamp = answer.timestamp;
                  settle(out, lookup.ask.exact ? kMaxTimestamp : lookup.ask.timestamp, lookup.lso,
                         lookup.epochs);
                }
                Reply(st->conn, st->header, st->resp);
              });
            });
      });
}

void HandleOffsetForLeaderEpoch(Context& ctx, const Call& call,
                                const kafka::OffsetForLeaderEpochRequest& req) {
  const std::shared_ptr<Connection>& conn = call.conn;
  const kafka::RequestHeader& h = call.header;
  Shard& home = ctx.shards.ShardOf(conn->loop());
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(home);
  struct State {
    kafka::OffsetForLeaderEpochResponse resp;
    std::vector<kafka::OffsetForLeaderEpochResponse::Partition*> outs;  // per target
    std::vector<char> elsewhere;  // per target: a cluster's partition, maybe not open here
    std::vector<std::pair<int32_t, int32_t>> asked;  // (current epoch, leader epoch)
    int32_t replica_id = -1;
  };
  auto st = std::make_shared<State>();
  st->replica_id = req.replica_id;
  std::vector<Target> targets;
  std::vector<std::pair<size_t, size_t>> where;
  // Kafka: CLUSTER_ACTION (a follower's), or DESCRIBE on each topic; else
  // TOPIC_AUTHORIZATION_FAILED.
  const Access access = AccessOf(ctx, call);
  const bool cluster_action = access.AllowsCluster(auth::AclOperation::kClusterAction);
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const auto& want = req.topics[t];
    kafka::OffsetForLeaderEpochResponse::Topic tout;
    tout.topic = want.topic;
    const MetadataSnapshot::Topic* info = meta.Find(want.topic);
    const ErrorCode denied = cluster_action || access.Check(auth::ResourceType::kTopic, want.topic,
                                                            auth::AclOperation::kDescribe)
                                 ? ErrorCode::kNone
                                 : ErrorCode::kTopicAuthorizationFailed;
    for (size_t i = 0; i < want.partitions.size(); ++i) {
      const auto& p = want.partitions[i];
      kafka::OffsetForLeaderEpochResponse::Partition out;
      out.partition = p.partition;
      if (denied != ErrorCode::kNone) {
        out.error_code = denied;
        tout.partitions.push_back(out);
        continue;
      }
      targets.push_back(ctx.shards.TargetOf(info, want.topic, p.partition));
      st->asked.emplace_back(p.current_leader_epoch, p.leader_epoch);
      where.emplace_back(t, i);
      tout.partitions.push_back(out);
    }
    st->resp.topics.push_back(std::move(tout));
  }
  for (auto [t, i] : where) st->outs.push_back(&st->resp.topics[t].partitions[i]);
  for (const Target& target : targets) {
    st->elsewhere.push_back(ctx.options.cluster.enabled() && target.shard >= 0);
  }
  ctx.shards.VisitOwners(
      home, std::move(targets),
      [&ctx, st](Partition* part, size_t k) {
        kafka::OffsetForLeaderEpochResponse::Partition& out = *st->outs[k];
        const auto [current_epoch, leader_epoch] = st->asked[k];
        if (part == nullptr) {
          // A cluster's partition not open here is another broker's (0018).
          out.error_code = st->elsewhere[k] != 0 ? ErrorCode::kNotLeaderOrFollower
                                                 : ErrorCode::kUnknownTopicOrPartition;
          return;
        }
        if (part->replica != nullptr && !part->replica->leader()) {
          out.error_code = ErrorCode::kNotLeaderOrFollower;
          return;
        }
        const LeaderEpochCache& epochs = part->epochs;
        if (current_epoch >= 0 && current_epoch != epochs.latest_epoch()) {
          out.error_code = current_epoch > epochs.latest_epoch() ? ErrorCode::kUnknownLeaderEpoch
                                                                 : ErrorCode::kFencedLeaderEpoch;
          return;
        }
        // Consumers are answered up to the high watermark, followers (replica id >= 0)
        // up to the log end, as Kafka answers them.
        const int64_t upto = st->replica_id >= 0 ? part->log->written_end_offset()
                                                 : HighWatermark(ctx.options.flush_policy, *part);
        auto [epoch, end] = epochs.EndOffsetFor(leader_epoch, upto);
        out.leader_epoch = epoch;
        out.end_offset = end;
      },
      [conn, h, st] { Reply(conn, h, st->resp); });
}

}  // namespace sluice::broker::handlers
