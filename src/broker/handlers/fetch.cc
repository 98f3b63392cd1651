// Fetch: every partition is read on its owner (file slices sent with sendfile), the
// answers assembled on the connection's shard with the response's byte budget; with too
// little data the fetch waits (a long poll), registered on each partition's owner, until
// an append brings min_bytes, an error appears or max_wait_ms passes.
//
// read_committed (isolation_level 1, docs/design/0016-transactions.md, "Partitions"):
// reads stop at the last stable offset and list the aborted transactions overlapping
// what was read (Kafka's collectAbortedTxns). The LSO moves only when a marker or data
// is written, which wakes the waiting fetches as any append does.
//
// Record-less batches (a producer's last batch the cleaner kept empty, 0017 decision 6):
// a consumer's read passes over them to the first batch with records (storage's
// EmptyBatches::kSkip), because kafkajs 2.x cannot move past a response whose batches hold
// no record (it re-fetches the same offset forever). Only when nothing with records comes
// before the visible end are they served, so librdkafka and the Java client move their
// position past them; such a response counts no bytes toward min_bytes (it waits like a
// fetch at the end of the log, instead of answering kafkajs at once, again and again).
// A replica's fetch gets the log as it is.
#include "broker/handlers/fetch.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "base/metrics.h"
#include "broker/handlers/handlers.h"

namespace sluice::broker::handlers {
namespace {

// Partitions of one fetch read from tiered storage at once (design 0025, decision 7).
constexpr int kMaxRemoteAsks = 4;

using kafka::ApiKey;
using kafka::ErrorCode;

void SendFetch(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
               const kafka::FetchResponse& body, std::vector<storage::FileSlice> files) {
  Response resp;
  kafka::Writer w(&resp.buffer);
  kafka::EncodeResponseHeader(w, ApiKey::kFetch, h.api_version, h.correlation_id);
  body.Encode(w, h.api_version);
  resp.splices = w.splices();
  resp.files = std::move(files);
  conn->Send(std::move(resp));
}

// Sends a fetch response whose records are splices of `files`. A consumer's record bytes
// count against its consumer_byte_rate quota (a follower's do not, as in Kafka).
void ReplyFetch(Context& ctx, bool replica, const std::shared_ptr<Connection>& conn,
                const kafka::RequestHeader& h, const kafka::FetchResponse& body,
                std::vector<storage::FileSlice> files) {
  if (!replica && ctx.quotas->active()) {
    uint64_t bytes = 0;
    for (const storage::FileSlice& f : files) bytes += f.size;
    conn->ThrottleAfterResponse(ctx.quotas->Record(ClientQuotas::Kind::kFetch, QuotaUser(*conn),
                                                   h.client_id.value_or(""),
                                                   static_cast<double>(bytes)));
  }
  if (const int64_t throttle = conn->pending_throttle_ms(); throttle > body.throttle_time_ms) {
    kafka::FetchResponse throttled = body;
    throttled.throttle_time_ms = static_cast<int32_t>(throttle);
    return SendFetch(conn, h, throttled, std::move(files));
  }
  SendFetch(conn, h, body, std::move(files));
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

void AnswerFetch(Context& ctx, const std::shared_ptr<FetchWait>& wait,
                 const kafka::FetchResponse& resp, std::vector<storage::FileSlice> files);
// Has a waiting fetch look again, on its connection's loop (one re-arm pending at a time).
void Rearm(Context& ctx, const std::shared_ptr<FetchWait>& wait);

// One FetchOnce's answer as the owners fill it in: the response's shape first, each
// owner its partitions' entries and slices; the budget across partitions is applied on the
// home shard once all answered (AssembleFetch).
struct FetchState {
  kafka::FetchResponse resp;
  std::vector<kafka::FetchResponse::PartitionData*> outs;  // per target
  std::vector<const kafka::FetchRequest::FetchPartition*> wants;
  std::vector<std::optional<storage::FileSlice>> slices;
  std::vector<char> holds_records;  // per target: its slice has a batch with records
  std::vector<char> elsewhere;      // per target: a cluster's partition, maybe not open here
  // Per target, with tiered storage: a read of offsets only remote storage holds, made
  // by the RemoteReader once the owners answered (design 0025, decision 7).
  std::vector<std::optional<RemoteReadAsk>> remote;
  std::atomic<int> remote_asks{0};
  // Bytes each owner shard has read so far, against its share of the response's
  // max_bytes (by its number of targets): past it, its partitions still to read answer
  // their offsets only (as Kafka's read with no limit left), instead of reading slices
  // the budget below would drop (a consumer of 1,000 partitions asks each fetch for all
  // of them, and one response holds about 100). A share per shard, not one counter: the
  // home shard reads inline, first, and would take it all while its partitions have data.
  std::vector<int> shard_of;  // per target
  std::unique_ptr<std::atomic<uint64_t>[]> claimed;
  std::vector<uint64_t> share;  // per shard
};

void AssembleFetch(FetchState& st, uint64_t max_bytes, const FetchDone& done);

}  // namespace

// Reads every partition of `req` on its owner (registering `wait` there first when set),
// then calls done(response, files, record bytes) on `home`'s loop. On `home`'s thread;
// `access` is the asking principal's.
void FetchOnce(Context& ctx, Shard& home, const Access& access,
               std::shared_ptr<const kafka::FetchRequest> req, int16_t version,
               const std::shared_ptr<FetchWait>& wait, FetchDone done) {
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(home);

  auto st = std::make_shared<FetchState>();
  st->resp.session_id = 0;
  std::vector<Target> targets;
  // A follower's fetch (docs/design/0018-cluster.md) is served by replica::ServeFetch,
  // the log as stored; a consumer's read passes over record-less batches (0017 #13).
  const int32_t replica_id = replica::FetchReplicaId(*req, version);
  const int64_t replica_epoch = version >= 15 ? req->replica_state.replica_epoch : -1;
  // Kafka's checks, made at every look (an ACL removed meanwhile counts): a follower needs
  // CLUSTER_ACTION on the cluster, a consumer READ on each topic.
  const bool replica_allowed =
      replica_id < 0 || access.CheckCluster(auth::AclOperation::kClusterAction);
  std::vector<char> read;  // per topic of the request: its partitions are read
  for (const auto& want : req->topics) {
    kafka::FetchResponse::FetchableTopicResponse tout;
    tout.topic = want.topic;
    tout.topic_id = want.topic_id;
    const MetadataSnapshot::Topic* info =
        version >= 13 ? meta.FindById(want.topic_id) : meta.Find(want.topic);
    // An unknown topic id is UNKNOWN_TOPIC_ID before any check (ids are not secret: a
    // consumer whose topic was recreated must learn to refresh its metadata).
    bool allowed = replica_allowed;
    if (replica_id < 0 && !(version >= 13 && info == nullptr)) {
      allowed = access.Check(
          auth::ResourceType::kTopic,
          info != nullptr ? std::string_view(info->info.name) : std::string_view(want.topic),
          auth::AclOperation::kRead);
    }
    read.push_back(info != nullptr && allowed);
    for (const auto& fp : want.partitions) {
      kafka::FetchResponse::PartitionData out;
      out.partition_index = fp.partition;
      out.high_watermark = -1;
      out.last_stable_offset = -1;
      out.log_start_offset = -1;
      out.records = kafka::RecordsRef::Inline(std::span<const uint8_t>());
      if (!allowed) {
        out.error_code = ErrorCode::kTopicAuthorizationFailed;
      } else if (info == nullptr) {
        out.error_code =
            version >= 13 ? ErrorCode::kUnknownTopicId : ErrorCode::kUnknownTopicOrPartition;
      } else {
        targets.push_back(ctx.shards.TargetOf(info, info->info.name, fp.partition));
        st->wants.push_back(&fp);
      }
      tout.partitions.push_back(std::move(out));
    }
    st->resp.responses.push_back(std::move(tout));
  }
  // Pointers once the vectors stopped growing, in request order.
  size_t k = 0;
  for (size_t t = 0; t < req->topics.size(); ++t) {
    if (read[t] == 0) continue;
    for (auto& out : st->resp.responses[t].partitions) {
      st->outs.push_back(&out);
      ++k;
    }
  }
  SLUICE_ASSERT(k == targets.size());
  st->slices.resize(targets.size());
  st->holds_records.resize(targets.size(), 0);
  if (ctx.remote_reader != nullptr) st->remote.resize(targets.size());
  for (const Target& target : targets) {
    st->elsewhere.push_back(ctx.options.cluster.enabled() && target.shard >= 0);
  }
  const uint64_t max_bytes = req->max_bytes > 0 ? static_cast<uint64_t>(req->max_bytes) : 0;
  {
    int shards = 1;
    for (const Target& target : targets) shards = std::max(shards, target.shard + 1);
    std::vector<uint64_t> count(static_cast<size_t>(shards), 0);
    for (const Target& target : targets) {
      st->shard_of.push_back(std::max(0, target.shard));
      ++count[static_cast<size_t>(st->shard_of.back())];
    }
    st->claimed = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(shards));
    for (uint64_t c : count) {
      st->share.push_back(targets.empty() ? 0 : (max_bytes / targets.size() + 1) * c);
    }
  }
  ctx.shards.VisitOwners(
      home, std::move(targets),
      [&ctx, st, req, wait, max_bytes, replica_id, replica_epoch](Partition* part, size_t i) {
        kafka::FetchResponse::PartitionData& out = *st->outs[i];
        const kafka::FetchRequest::FetchPartition& fp = *st->wants[i];
        if (part == nullptr) {
          // A cluster's partition not open here is another broker's (0018).
          out.error_code = st->elsewhere[i] != 0 ? ErrorCode::kNotLeaderOrFollower
                                                 : ErrorCode::kUnknownTopicOrPartition;
          return;
        }
        auto register_wait = [&] {
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
        };
        const bool may_wait = wait != nullptr && !wait->done.load();
        if (may_wait && replica_id < 0) register_wait();
        if (replica_id >= 0 || part->replica != nullptr) [[unlikely]] {
          if (replica_id >= 0) {
            replica::ServeFetch(*part, replica_id, replica_epoch, fp, max_bytes, &out,
                                &st->slices[i]);
            if (may_wait && !st->slices[i].has_value() && out.error_code == ErrorCode::kNone &&
                out.diverging_epoch.epoch < 0 && out.diverging_epoch.end_offset < 0) {
              // A follower's fetch registers only where it read nothing (it usually reads
              // something, and a registration left behind costs the next append a wake-up),
              // then looks again at the end: the I/O thread's wake-up after a write and
              // this registration are ordered by the fences (LocalLogs' on_readable).
              register_wait();
              std::atomic_thread_fence(std::memory_order_seq_cst);
              if (part->log->written_end_offset() > fp.fetch_offset) {
                replica::ServeFetch(*part, replica_id, replica_epoch, fp, max_bytes, &out,
                                    &st->slices[i]);
              }
            }
            // Empty batches count for a follower: it needs them (producer state).
            st->holds_records[i] = st->slices[i].has_value() ? 1 : 0;
            return;
          }
          if (!part->replica->leader()) {  // consumers read leaders only (no KIP-392)
            out.error_code = ErrorCode::kNotLeaderOrFollower;
            return;
          }
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
        const int64_t hw = HighWatermark(ctx.options.flush_policy, *part);
        // A tiered partition's log starts in remote storage (design 0025, decision 6).
        const LogStart log_start = LogStartOf(*part);
        const int64_t local_start = log_start.local;
        const int64_t start = log_start.start;
        // Records below the log start are gone: the LSO is never below it.
        const int64_t lso = std::max(part->producers.LastStableOffset(hw), std::min(start, hw));
        const bool read_committed = req->isolation_level == 1;
        const int64_t visible = read_committed ? lso : hw;
        out.high_watermark = hw;
        out.last_stable_offset = lso;
        out.log_start_offset = start;
        out.aborted_transactions.emplace();
        if (fp.last_fetched_epoch >= 0 && fp.fetch_offset >= local_start) {
          // KIP-595 (v12+): the consumer's last fetched epoch must end at or past its
          // fetch offset here; otherwise the log diverged (recovery cut it) and it must
          // truncate. An epoch this log never had has no end: out of range, as Kafka
          // answers.
          auto [div_epoch, div_end] =
              part->epochs.EndOffsetFor(fp.last_fetched_epoch, log.end_offset());
          if (div_epoch < 0 || div_end < 0) {
            out.error_code = ErrorCode::kOffsetOutOfRange;
            return;
          }
          if (div_epoch < fp.last_fetched_epoch || div_end < fp.fetch_offset) {
            out.diverging_epoch = {div_epoch, div_end};
            return;
          }
        }
        // Replicated, an offset between the high watermark and the log end is not out of
        // range (a new leader learns the high watermark after its consumers did): it
        // reads nothing yet, as in Kafka.
        const int64_t last_valid = part->replica != nullptr ? log.written_end_offset() : hw;
        if (log_start.unknown && fp.fetch_offset >= 0 && fp.fetch_offset < local_start) {
          // Tiered storage's part of the log is not known yet (S3 away since the start): a
          // retriable error, not an out-of-range that would send consumers to the end.
          out.error_code = ErrorCode::kKafkaStorageError;
          return;
        }
        if (fp.fetch_offset < start || fp.fetch_offset > last_valid) {
          out.error_code = ErrorCode::kOffsetOutOfRange;
          return;
        }
        // As much as this partition may give; the response's budget is applied on the
        // connection's shard, in request order.
        std::atomic<uint64_t>& shard_claimed = st->claimed[st->shard_of[i]];
        const uint64_t claimed = shard_claimed.load(std::memory_order_relaxed);
        const uint64_t share = st->share[st->shard_of[i]];
        const uint64_t limit =
            std::min<uint64_t>(share > claimed ? share - claimed : 0,
                               fp.partition_max_bytes > 0 ? uint64_t(fp.partition_max_bytes) : 0);
        // Only tiered storage holds it: read by the RemoteReader once every owner answered,
        // at most kMaxRemoteAsks partitions per fetch (each may download a whole segment;
        // the others answer nothing this time, as partitions past the byte budget do).
        auto ask_remote = [&] {
          if (st->remote.empty() ||
              st->remote_asks.fetch_add(1, std::memory_order_relaxed) >= kMaxRemoteAsks)
            return;
          shard_claimed.fetch_add(limit, std::memory_order_relaxed);
          RemoteReadAsk ask{part->topic_id,
                            fp.partition,
                            fp.fetch_offset,
                            std::max<uint64_t>(limit, 1),
                            visible,
                            read_committed,
                            storage::EmptyBatches::kSkip,
                            local_start,
                            {}};
          if (read_committed) {
            // Transactions begun below the local start whose abort marker is local.
            Result<std::vector<storage::AbortedTxn>> local =
                log.CollectAbortedTxns(local_start, local_start);
            if (!local.ok()) {
              out.error_code = ErrorCode::kKafkaStorageError;
              return;
            }
            ask.local_aborted = *std::move(local);
          }
          st->remote[i] = std::move(ask);
        };
        const bool wanted = fp.fetch_offset < visible && (limit > 0 || claimed == 0);
        if (fp.fetch_offset < local_start) {
          if (wanted) ask_remote();
          return;
        }
        if (wanted) {
          Result<storage::ReadResult> read = log.Read(fp.fetch_offset, std::max<uint64_t>(limit, 1),
                                                      visible, storage::EmptyBatches::kSkip);
          if (!read.ok() && read.status().code() == StatusCode::kOutOfRange &&
              start < local_start && fp.fetch_offset < log.start_offset()) {
            // Local retention deleted it since (it was uploaded): remote now.
            ask_remote();
            return;
          }
          Result<std::vector<storage::AbortedTxn>> aborted = std::vector<storage::AbortedTxn>();
          if (read.ok() && read->slice.size > 0 && read_committed) {
            aborted = log.CollectAbortedTxns(fp.fetch_offset, read->next_offset);
          }
          const Status& failed = !read.ok() ? read.status() : aborted.status();
          if (!failed.ok()) {
            out.error_code = failed.code() == StatusCode::kOutOfRange
                                 ? ErrorCode::kOffsetOutOfRange
                                 : ErrorCode::kKafkaStorageError;
          } else if (read->slice.size > 0) {
            shard_claimed.fetch_add(read->slice.size, std::memory_order_relaxed);
            st->slices[i] = std::move(read->slice);
            st->holds_records[i] = read->holds_records;
            for (const storage::AbortedTxn& t : *aborted) {
              out.aborted_transactions->push_back({t.producer_id, t.first_offset, {}});
            }
          }
        }
      },
      [&ctx, &home, st, max_bytes, wait, done = std::move(done)]() mutable {
        std::vector<RemoteReadAsk> asks;
        for (const auto& ask : st->remote) {
          if (ask.has_value()) asks.push_back(*ask);
        }
        if (asks.empty()) return AssembleFetch(*st, max_bytes, done);
        // The remote reads have remote_fetch_max_wait_ms (Kafka's remote.fetch.max.wait.ms):
        // past it the fetch answers without them (their partitions empty, no error, as
        // Kafka's expired DelayedRemoteFetch) and they go on into the cache; a waiting
        // fetch looks again when they end. Both sides run on the home loop.
        struct Race {
          FetchDone done;
          EventLoop::TimerId timer = 0;
          bool answered = false;
        };
        auto race = std::make_shared<Race>();
        race->done = std::move(done);
        race->timer =
            home.loop->RunAfter(ctx.options.remote_fetch_max_wait_ms, [st, max_bytes, race] {
              if (race->answered) return;
              race->answered = true;
              AssembleFetch(*st, max_bytes, race->done);
            });
        ctx.remote_reader->Read(
            std::move(asks), [&ctx, &home, st, max_bytes, race,
                              wait](std::vector<RemoteReadAnswer> answers) mutable {
              ctx.shards.PostGated(home.loop, [&ctx, &home, st, max_bytes, race, wait,
                                               answers = std::move(answers)]() mutable {
                if (race->answered) {
                  if (wait != nullptr) Rearm(ctx, wait);  // the copies are cached now
                  return;
                }
                race->answered = true;
                home.loop->Cancel(race->timer);
                size_t a = 0;
                for (size_t i = 0; i < st->remote.size(); ++i) {
                  if (!st->remote[i].has_value()) continue;
                  RemoteReadAnswer& answer = answers[a++];
                  kafka::FetchResponse::PartitionData& out = *st->outs[i];
                  out.error_code = answer.error;
                  if (!answer.slice.has_value()) continue;
                  st->slices[i] = std::move(answer.slice);
                  st->holds_records[i] = answer.holds_records;
                  for (const storage::AbortedTxn& t : answer.aborted) {
                    out.aborted_transactions->push_back({t.producer_id, t.first_offset, {}});
                  }
                }
                AssembleFetch(*st, max_bytes, race->done);
              });
            });
      });
}

namespace {

// The response's budget across partitions, in request order, then `done` (on the home
// shard, once every partition was read).
void AssembleFetch(FetchState& st, uint64_t max_bytes, const FetchDone& done) {
  std::vector<storage::FileSlice> files;
  uint64_t total = 0;
  uint64_t record_bytes = 0;  // of slices with records: what min_bytes waits for
  for (size_t i = 0; i < st.outs.size(); ++i) {
    if (!st.slices[i].has_value()) continue;
    const kafka::FetchRequest::FetchPartition& fp = *st.wants[i];
    const uint64_t left = max_bytes > total ? max_bytes - total : 0;
    const uint64_t limit =
        std::min<uint64_t>(left, fp.partition_max_bytes > 0 ? uint64_t(fp.partition_max_bytes) : 0);
    storage::FileSlice& slice = *st.slices[i];
    // Past the limits only for the first records of the response, as in Kafka.
    if (record_bytes == 0 || slice.size <= limit) {
      st.outs[i]->records =
          kafka::RecordsRef::Splice(slice.size, static_cast<uint32_t>(files.size()));
      total += slice.size;
      if (st.holds_records[i]) record_bytes += slice.size;
      files.push_back(std::move(slice));
    }
  }
  // What fetches ask and answer: partitions named, bytes of records sent.
  static Counter& partitions = MetricsRegistry::Global().GetCounter(
      "sluice_kafka_fetch_partitions_total",
      "Partitions named by Fetch requests (each look of a waiting fetch counts again)");
  static Counter& bytes = MetricsRegistry::Global().GetCounter(
      "sluice_kafka_fetch_bytes_total",
      "Bytes of record batches in Fetch answers (each look of a waiting fetch counts again)");
  partitions.Inc(st.outs.size());
  bytes.Inc(total);
  done(st.resp, files, record_bytes);
}

// Registers a waiting fetch on its partitions and answers it if min_bytes are there (on
// its connection's loop).
void ArmFetch(Context& ctx, const std::shared_ptr<FetchWait>& wait) {
  wait->arm_pending = false;
  if (wait->done.load() || ctx.shards.waking_stopped())
    return;  // a stop: the timer or the close ends it
  Connection& conn = *wait->conn;
  FetchOnce(ctx, ctx.shards.ShardOf(conn.loop()), ctx.authorizer->For(conn), wait->req,
            wait->header.api_version, wait,
            [&ctx, wait](kafka::FetchResponse& resp, std::vector<storage::FileSlice>& files,
                         uint64_t bytes) {
              // Enough data, a new error (a deleted topic, an offset now out of range) or
              // a stop answers at once, as Kafka's DelayedFetch completes.
              if (bytes >= wait->min_bytes || HasErrors(resp) || ctx.draining.load()) {
                AnswerFetch(ctx, wait, resp, std::move(files));
              }
            });
}

void Rearm(Context& ctx, const std::shared_ptr<FetchWait>& wait) {
  if (wait->done.load() || wait->arm_pending.exchange(true)) return;
  ctx.shards.PostGated(wait->conn->loop(), [&ctx, wait] {
    if (!wait->done.load()) ArmFetch(ctx, wait);
  });
}

// Answers a waiting fetch with what there is (its max_wait_ms passed, or a stop).
void CompleteFetch(Context& ctx, const std::shared_ptr<FetchWait>& wait) {
  if (wait->done.load()) return;
  Connection& conn = *wait->conn;
  FetchOnce(ctx, ctx.shards.ShardOf(conn.loop()), ctx.authorizer->For(conn), wait->req,
            wait->header.api_version, nullptr,
            [&ctx, wait](kafka::FetchResponse& resp, std::vector<storage::FileSlice>& files,
                         uint64_t) { AnswerFetch(ctx, wait, resp, std::move(files)); });
}

// Sends the answer once; later calls do nothing.
void AnswerFetch(Context& ctx, const std::shared_ptr<FetchWait>& wait,
                 const kafka::FetchResponse& resp, std::vector<storage::FileSlice> files) {
  if (wait->done.exchange(true)) return;
  if (wait->conn->closed()) return;
  wait->conn->loop()->Cancel(wait->timer);  // false when the timer is what answers
  ReplyFetch(ctx, wait->replica, wait->conn, wait->header, resp, std::move(files));
}

// Not enough data yet: a long poll. Registered on every partition asked for (a
// follower's: where it read nothing) and looked at once more (an append between the
// first look and the registration must not be missed); every append to one of them
// looks again, and min_bytes or max_wait_ms answers. On the connection's loop.
void LongPoll(Context& ctx, const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
              const std::shared_ptr<const kafka::FetchRequest>& req) {
  auto wait = std::make_shared<FetchWait>();
  wait->conn = conn;
  wait->header = h;
  wait->req = req;
  wait->min_bytes = static_cast<uint64_t>(std::max(req->min_bytes, 1));
  wait->replica = replica::FetchReplicaId(*req, h.api_version) >= 0;
  wait->timer =
      conn->loop()->RunAfter(req->max_wait_ms, [&ctx, wait] { CompleteFetch(ctx, wait); });
  ArmFetch(ctx, wait);
}

}  // namespace

void HandleFetch(Context& ctx, const Call& call, const kafka::FetchRequest& req) {
  const std::shared_ptr<Connection>& conn = call.conn;
  const kafka::RequestHeader& h = call.header;
  if (req.session_id != 0) {
    // Sessions are declined (session_id 0 in every answer), so no id is known.
    kafka::FetchResponse resp;
    resp.error_code = ErrorCode::kFetchSessionIdNotFound;
    ReplyFetch(ctx, false, conn, h, resp, {});
    return;
  }
  const bool replica = replica::FetchReplicaId(req, h.api_version) >= 0;
  auto mutable_req = std::make_shared<kafka::FetchRequest>(req);
  if (!replica && ctx.quotas->active()) {
    // A consumer over its consumer_byte_rate gets nothing until its debt is paid (Kafka's
    // throttled response: no data, the throttle time); within it, a response holds at most
    // a second of its quota (Kafka caps it at its quota window), past the first batch.
    const ClientQuotas::Quote q =
        ctx.quotas->Check(ClientQuotas::Kind::kFetch, QuotaUser(*conn), h.client_id.value_or(""));
    if (q.throttle_ms > 0) {
      conn->ThrottleAfterResponse(q.throttle_ms);
      kafka::FetchResponse resp;
      resp.session_id = 0;
      ReplyFetch(ctx, false, conn, h, resp, {});
      return;
    }
    if (q.rate > 0) {
      const int32_t budget = static_cast<int32_t>(std::min<double>(q.rate, INT32_MAX));
      mutable_req->max_bytes = req.max_bytes > 0 ? std::min(req.max_bytes, budget) : budget;
    }
  }
  std::shared_ptr<const kafka::FetchRequest> shared = std::move(mutable_req);
  if (replica && req.max_wait_ms > 0 && req.min_bytes > 0 && !ctx.draining.load()) {
    // A follower's fetch usually waits (it asks for what comes after what it has): it is
    // a long poll from the first look, which registers it where it read nothing, instead
    // of a first look and a second to register (0018, "replperf").
    LongPoll(ctx, conn, h, shared);
    return;
  }
  FetchOnce(ctx, ctx.shards.ShardOf(conn->loop()), ctx.authorizer->For(*conn), shared,
            h.api_version, nullptr,
            [&ctx, conn, h, shared](kafka::FetchResponse& resp,
                                    std::vector<storage::FileSlice>& files, uint64_t bytes) {
              const kafka::FetchRequest& r = *shared;
              const uint64_t min_bytes = static_cast<uint64_t>(std::max(r.min_bytes, 1));
              if (bytes >= min_bytes || HasErrors(resp) || r.max_wait_ms <= 0 || r.min_bytes <= 0 ||
                  ctx.draining.load()) {
                ReplyFetch(ctx, replica::FetchReplicaId(r, h.api_version) >= 0, conn, h, resp,
                           std::move(files));
                return;
              }
              LongPoll(ctx, conn, h, shared);  // not enough data
            });
}

void WakeFetches(Context& ctx, Partition& part, Wake which) {
  if (part.waits.empty()) return;
  std::vector<std::weak_ptr<FetchWait>> woken;
  woken.swap(part.waits);
  for (const auto& weak : woken) {
    std::shared_ptr<FetchWait> wait = weak.lock();
    if (wait == nullptr || wait->done.load()) continue;
    if (which == Wake::kConsumers && wait->replica) {
      part.waits.push_back(weak);  // stays registered
      continue;
    }
    Rearm(ctx, wait);
  }
  part.waiting.store(static_cast<int>(part.waits.size()));
}

}  // namespace sluice::broker::handlers
