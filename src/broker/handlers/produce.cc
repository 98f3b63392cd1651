// Produce: each batch is validated on the connection's shard (CRC32C and the record
// checks are the CPU work of a produce), then checked against its producer's sequences
// and appended on its partition's owner; the answer goes out when the last append is
// acknowledged (acks=1: written, acks=-1: durable), or not at all for acks=0.
//
// Transactions (docs/design/0016-transactions.md, "Partitions"): a transactional batch
// needs the request's transactional id and a running transaction coordinator; one that
// would open its producer's transaction on a partition is first verified with the
// coordinator (KIP-890 part 1: the owner hands out a token, the coordinator is asked,
// and a second visit appends if no marker came in between). Control batches come only
// from the coordinator (txn_partition_markers.h).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/logging.h"
#include "base/metrics.h"
#include "broker/handlers/handlers.h"
#include "broker/loggers.h"
#include "broker/offset_log.h"
#include "broker/produce_refusals.h"
#include "kafka/protocol/records.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ErrorCode;

struct ProduceAppend;

// A produce request whose appends are in flight: the response, filled in by the owner
// shards and the append callbacks (each writes only its own partition entry), and how
// many are still out. The connection's shard holds one count itself until every owner
// has queued its appends, so the last callback cannot answer before the response is
// complete. The counter's acquire/release orders the entries' writes before the answer.
struct PendingProduce {
  Shards* shards;
  // A cluster broker: a partition that exists but is not open here is led elsewhere.
  bool cluster = false;
  std::shared_ptr<Connection> conn;
  kafka::RequestHeader header;
  kafka::ProduceResponse resp;
  std::shared_ptr<const std::vector<uint8_t>> frame;  // the records, until appended
  std::atomic<int> outstanding{1};
  bool acks0 = false;
  bool acks_all = false;
  int32_t timeout_ms = 0;  // how long acks=all waits for a replicated high watermark
  // The idempotent batches' outcomes go to the connection's ProduceRefusals once every
  // append is queued (or refused), before the next request is read.
  std::shared_ptr<const std::vector<ProduceAppend>> appends;
  bool refusals_noted = false;
  // Set once the appends are queued and the connection reads the next request meanwhile
  // (Connection::Detach): the answer goes to this request.
  RequestId request = 0;

  // Called once per count; the last one answers on the connection's loop.
  static void Release(const std::shared_ptr<PendingProduce>& p) {
    if (p->outstanding.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    p->shards->PostGated(p->conn->loop(), [p] {
      NoteRefusals(*p);
      if (p->acks0) return;  // already finished
      Reply(p->conn, p->header, p->resp, p->request);
    });
  }
  // On the connection's loop once every owner has appended (or refused) its batches.
  // An acks=all request then lets the next one be read while it waits for the fdatasync
  // (or the followers): the producer's next request joins the next group commit instead
  // of waiting for this one's answer (with one request at a time, the sync time capped a
  // connection's rate: 0.65x acks=1 measured). acks=1 waits only for a write into the page
  // cache, and pipelining it cost the client more, smaller requests (0.9x its rate). The
  // owners run later posts after these appends, so the next request's batches come after
  // this one's.
  //
  // Not in a cluster yet: there an acks=all waits for the followers, and with pipelined
  // requests a producer's batches met a leader change differently (an idempotent producer
  // in cluster_rdkafka_clients_test stopped being acknowledged after a leader's kill and
  // restart, twice in full -j2 runs; never alone). Until that is understood, a cluster's
  // connections answer one request at a time.
  static void Appended(const std::shared_ptr<PendingProduce>& p) {
    NoteRefusals(*p);
    if (p->acks_all && !p->cluster) p->request = p->conn->Detach();
  }
  static void NoteRefusals(PendingProduce& p);
};

// One validated batch for its partition's owner.
struct ProduceAppend {
  size_t topic;      // index in the request and the response
  size_t partition;  // index in the topic's list
  ProducerBatch batch;
  bool log_append_time = false;
  std::span<const uint8_t> records;  // in PendingProduce::frame
  // A transactional batch that would open its producer's transaction: the owner's
  // verification token (written by the owner in the first visit, read after it).
  bool verify = false;
  uint64_t token = 0;
  // Refused before it was written with a retriable error (ProduceRefusals).
  bool refused_before_write = false;
};

ProduceRefusals& RefusalsOf(Connection& conn) {
  auto& slot = conn.produce_state();
  if (slot == nullptr) slot = std::make_unique<ProduceRefusals>();
  return static_cast<ProduceRefusals&>(*slot);
}

void PendingProduce::NoteRefusals(PendingProduce& p) {
  if (p.appends == nullptr || p.conn->closed() || p.refusals_noted) return;
  p.refusals_noted = true;
  const int64_t now = Clock::Real()->NowMillis();
  for (const ProduceAppend& a : *p.appends) {
    if (!a.batch.idempotent()) continue;
    const auto& topic = p.resp.responses[a.topic];
    const auto& out = topic.partition_responses[a.partition];
    if (out.error_code == ErrorCode::kNone) {
      RefusalsOf(*p.conn).Written(topic.name, out.index, a.batch.producer_id);
    } else if (a.refused_before_write) {
      RefusalsOf(*p.conn).Refused(topic.name, out.index, a.batch.producer_id,
                                  a.batch.producer_epoch, a.batch.base_sequence, out.error_code,
                                  now);
    }
  }
}

// The produce error for a verifier's answer (Kafka's ReplicaManager and
// AddPartitionsToTxnManager): fencing is INVALID_PRODUCER_EPOCH, which producers handle
// here; a coordinator that cannot answer now is NOT_ENOUGH_REPLICAS, which every client
// retries without a metadata refresh.
std::pair<ErrorCode, std::string> VerificationError(ErrorCode e, int16_t version) {
  constexpr auto kTransactionAbortable = static_cast<ErrorCode>(118);
  switch (e) {
    case ErrorCode::kProducerFenced:
    case ErrorCode::kInvalidProducerEpoch:
      return {ErrorCode::kInvalidProducerEpoch, "the producer's epoch is fenced"};
    case ErrorCode::kInvalidTxnState:
      return {ErrorCode::kInvalidTxnState, "Partition was not added to the transaction"};
    case ErrorCode::kConcurrentTransactions:
    case ErrorCode::kNetworkException:
    case ErrorCode::kCoordinatorLoadInProgress:
    case ErrorCode::kCoordinatorNotAvailable:
    case ErrorCode::kNotCoordinator:
      return {ErrorCode::kNotEnoughReplicas,
              fmt::format("Unable to verify the partition has been added to the transaction. "
                          "Underlying error: {}",
                          static_cast<int>(e))};
    default:
      if (e == kTransactionAbortable && version <= 10) return {ErrorCode::kInvalidTxnState, ""};
      return {e, ""};
  }
}

// A replicated acks=all batch at [base, required_offset): answered once the high
// watermark reaches it (docs/design/0018-cluster.md, decision 6).
void AwaitCommit(const std::shared_ptr<PendingProduce>& pending,
                 kafka::ProduceResponse::PartitionProduceResponse& out, Partition& part,
                 int64_t base, int64_t required_offset) {
  pending->outstanding.fetch_add(1, std::memory_order_relaxed);
  replica::AwaitHighWatermark(part, required_offset, pending->timeout_ms,
                              [pending, &out, base](ErrorCode e) {
                                // `out` lives in pending->resp, kept alive here.
                                out.base_offset = e == ErrorCode::kNone ? base : -1;
                                out.error_code = e;
                                PendingProduce::Release(pending);
                              });
}

// A producer's batch refused for its sequence or epoch: said in the log (at most once a
// second in all), since such a refusal makes clients bump their epoch or stop, and the
// cause is otherwise lost with the answer.
void LogSequenceRefusal(const Partition& part, const ProducerBatch& b,
                        const ProducerStateTable::Check& check) {
  static std::atomic<int64_t> last_ms{0};
  const int64_t now = Clock::Real()->NowMillis();
  int64_t before = last_ms.load(std::memory_order_relaxed);
  if (now - before < 1000 || !last_ms.compare_exchange_strong(before, now)) return;
  SLUICE_LOG(kLog, kInfo, "{}: producer {} epoch {} batch at sequence {} refused: {}",
             part.log->dir(), b.producer_id, b.producer_epoch, b.base_sequence, check.message);
}

// On the partition's owner: the producer checks and the append of (*appends)[k].
// `verified` is false in the first visit: a transactional batch that would open its
// producer's transaction then gets a token instead of an append; true in the second
// visit, after the coordinator said yes, when the token must still hold.
void AppendOnOwner(const std::shared_ptr<PendingProduce>& pending,
                   std::vector<ProduceAppend>& appends, size_t k, Partition* part, int16_t acks,
                   bool verified) {
  ProduceAppend& a = appends[k];
  auto& out = pending->resp.responses[a.topic].partition_responses[a.partition];
  if (part == nullptr) {
    // In a cluster the partition exists (the metadata has it) and another broker leads
    // it: Kafka's NOT_LEADER_OR_FOLLOWER sends the client to refresh its metadata.
    out.error_code =
        pending->cluster ? ErrorCode::kNotLeaderOrFollower : ErrorCode::kUnknownTopicOrPartition;
    a.refused_before_write = pending->cluster;
    const std::string& name = pending->resp.responses[a.topic].name;
    out.error_message =
        pending->cluster
            ? fmt::format("this broker does not lead partition {} of topic '{}'", out.index, name)
            : fmt::format("no partition {} of topic '{}'", out.index, name);
    return;
  }
  out.log_start_offset = part->log->start_offset();
  if (part->replica != nullptr) {
    // Replicated (docs/design/0018-cluster.md): only the leader appends, and acks=all
    // needs min.insync.replicas in the committed ISR.
    std::string message;
    out.error_code = replica::CheckAppend(*part, acks, &message);
    if (out.error_code != ErrorCode::kNone) {
      out.error_message = std::move(message);
      part->producers.OnRefused(a.batch, static_cast<int16_t>(out.error_code));
      a.refused_before_write = true;
      return;
    }
  }
  ProducerStateTable::Check check = part->producers.CheckBatch(a.batch);
  if ((check.verdict == ProducerStateTable::Verdict::kOutOfOrder ||
       check.verdict == ProducerStateTable::Verdict::kUnknownProducer) &&
      part->replica != nullptr && part->replica->leader() && a.batch.producer_epoch >= 0 &&
      a.batch.base_sequence > check.expected_sequence &&
      part->producers.TakeEarlyGap(a.batch.producer_id, part->replica->leader_epoch,
                                   part->replica->epoch_start_offset)) {
    // Early in a leadership, a gap may be batches still on their way to the previous
    // leader: the client resends them in order (ProducerStateTable::TakeEarlyGap).
    out.error_code = ErrorCode::kNotLeaderOrFollower;
    out.error_message = fmt::format(
        "producer {} epoch {}: sequence {} is due here, got {}; the earlier ones may still be "
        "at the previous leader",
        a.batch.producer_id, a.batch.producer_epoch, check.expected_sequence,
        a.batch.base_sequence);
    a.refused_before_write = true;
    LogSequenceRefusal(*part, a.batch, check);
    return;
  }
  if (check.verdict != ProducerStateTable::Verdict::kAppend &&
      check.verdict != ProducerStateTable::Verdict::kDuplicate) {
    LogSequenceRefusal(*part, a.batch, check);
  }
  switch (check.verdict) {
    case ProducerStateTable::Verdict::kAppend:
      break;
    case ProducerStateTable::Verdict::kDuplicate:
      out.base_offset = check.first_offset;
      // A retry is answered as its original would be: replicated, once committed.
      if (part->replica != nullptr && acks == -1) {
        AwaitCommit(pending, out, *part, check.first_offset, check.last_offset + 1);
      }
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
    case ProducerStateTable::Verdict::kInvalidTxnState:
      out.error_code = ErrorCode::kInvalidTxnState;
      out.error_message = check.message;
      return;
    case ProducerStateTable::Verdict::kEarlierRefused:
      out.error_code = static_cast<ErrorCode>(check.refused_error);
      out.error_message = check.message;
      a.refused_before_write = true;
      return;
  }
  if (a.batch.transactional) {
    if (!verified) {
      a.token = part->producers.StartVerification(a.batch.producer_id);
      if (a.token != 0) {
        a.verify = true;  // asked of the coordinator, then visited again
        return;
      }
    } else if (!part->producers.Verified(a.batch.producer_id, a.token)) {
      out.error_code = ErrorCode::kInvalidTxnState;
      out.error_message = "Record was not part of an ongoing transaction";
      return;
    }
  }
  storage::AppendOptions ao;
  ao.leader_epoch = part->epochs.latest_epoch();
  ao.log_append_time = a.log_append_time;
  ao.crc_checked = true;  // by ValidateRecords, on the connection's shard
  ao.ack = acks == -1 ? storage::AckLevel::kDurable : storage::AckLevel::kWritten;
  // A replicated acks=all is answered by the high watermark, not by the local ack.
  const bool await_hw = part->replica != nullptr && acks == -1;
  if (acks != 0 && !await_hw) {
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
  if (part->replica != nullptr) replica::PrepareAppend(*part, &ao);
  Result<storage::AppendInfo> appended = part->log->Append(a.records, std::move(ao));
  if (!appended.ok()) {
    if (acks != 0 && !await_hw) pending->outstanding.fetch_sub(1, std::memory_order_relaxed);
    out.error_code = ErrorCode::kKafkaStorageError;
    out.error_message = appended.status().ToString();
    part->producers.OnRefused(a.batch, static_cast<int16_t>(out.error_code));
    a.refused_before_write = true;
    return;
  }
  part->producers.OnAppended(a.batch, appended->base_offset);
  // What this broker took in as a leader (the console's throughput in; followers' copies
  // are not counted).
  static Counter& bytes_in = MetricsRegistry::Global().GetCounter(
      "sluice_kafka_produce_bytes_total", "Bytes of record batches appended by Produce requests");
  static Counter& records_in = MetricsRegistry::Global().GetCounter(
      "sluice_kafka_produce_records_total", "Records appended by Produce requests");
  bytes_in.Inc(a.records.size());
  records_in.Inc(static_cast<uint64_t>(std::max(a.batch.record_count, 0)));
  if (await_hw) AwaitCommit(pending, out, *part, appended->base_offset, appended->last_offset + 1);
}

// How long a produce naming a partition this broker does not know yet waits for its
// metadata to catch up with etcd's (at most; the request's timeout if shorter).
constexpr int64_t kCatchUpMaxMs = 5'000;

// Whether a cluster's request names a partition missing from this broker's metadata, one
// the caller may write: another broker, whose metadata is ahead (a topic just created
// through it), may have sent the client here.
bool NamesUnknownPartition(Context& ctx, const Call& call, const kafka::ProduceRequest& req,
                           const MetadataSnapshot& meta) {
  const Access access = AccessOf(ctx, call);
  for (const auto& topic : req.topic_data) {
    const MetadataSnapshot::Topic* info = meta.Find(topic.name);
    if (!access.Check(auth::ResourceType::kTopic, topic.name, auth::AclOperation::kWrite)) {
      continue;
    }
    for (const auto& pd : topic.partition_data) {
      if (ctx.shards.TargetOf(info, topic.name, pd.index).shard < 0) return true;
    }
  }
  return false;
}

void Produce(Context& ctx, const Call& call, const kafka::ProduceRequest& req, bool caught_up);

}  // namespace

void HandleProduce(Context& ctx, const Call& call, const kafka::ProduceRequest& req) {
  Produce(ctx, call, req, /*caught_up=*/false);
}

namespace {

void Produce(Context& ctx, const Call& call, const kafka::ProduceRequest& req, bool caught_up) {
  const std::shared_ptr<Connection>& conn = call.conn;
  const kafka::RequestHeader& h = call.header;
  Shard& home = ctx.shards.ShardOf(conn->loop());
  const MetadataSnapshot& meta = ctx.shards.SnapshotFor(home);
  if (!caught_up && ctx.options.cluster.enabled() && NamesUnknownPartition(ctx, call, req, meta)) {
    // Answered once this broker's metadata caught up with etcd's, not with an
    // UNKNOWN_TOPIC_OR_PARTITION its own lag made. The request's records are views into
    // the frame, kept with it.
    auto again = [&ctx, conn, frame = call.frame, header = h,
                  copy = std::make_shared<kafka::ProduceRequest>(req)] {
      ctx.shards.PostGated(conn->loop(), [&ctx, conn, frame, header, copy] {
        Produce(ctx, Call{conn, frame, header}, *copy, /*caught_up=*/true);
      });
    };
    ctx.controller.CatchUp(std::min<int64_t>(req.timeout_ms, kCatchUpMaxMs), std::move(again));
    return;
  }
  auto pending = std::make_shared<PendingProduce>();
  pending->shards = &ctx.shards;
  pending->cluster = ctx.options.cluster.enabled();
  pending->conn = conn;
  pending->header = h;
  pending->acks0 = req.acks == 0;
  pending->acks_all = req.acks == -1;
  pending->timeout_ms = req.timeout_ms;
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
  // work of a produce, done once: the log does not check the CRC again); the producer
  // check and the append on each partition's owner.
  auto appends = std::make_shared<std::vector<ProduceAppend>>();
  std::vector<Target> targets;
  std::pair<ErrorCode, std::string> txn_refusal{ErrorCode::kNone, ""};
  int64_t txn_pid = -1;
  int16_t txn_epoch = -1;
  // Kafka's checks: WRITE on each topic; WRITE on the transactional id when a batch is
  // transactional (the whole request refused without it).
  const Access access = AccessOf(ctx, call);
  // A request naming a transactional id it may not WRITE is refused whole, before any
  // topic is looked at (Kafka's order).
  const bool txn_id_allowed = !req.transactional_id.has_value() ||
                              access.Check(auth::ResourceType::kTransactionalId,
                                           *req.transactional_id, auth::AclOperation::kWrite);
  if (!txn_id_allowed) txn_refusal = {ErrorCode::kTransactionalIdAuthorizationFailed, kTxnIdDenied};
  for (size_t t = 0; t < req.topic_data.size(); ++t) {
    const auto& topic = req.topic_data[t];
    const MetadataSnapshot::Topic* info = meta.Find(topic.name);
    const bool may_write =
        access.Check(auth::ResourceType::kTopic, topic.name, auth::AclOperation::kWrite);
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
        fail(ErrorCode::kInvalidRequiredAcks,
             fmt::format("acks={} (must be -1, 0 or 1)", req.acks));
        continue;
      }
      if (!may_write) {
        fail(ErrorCode::kTopicAuthorizationFailed, kTopicDenied);
        continue;
      }
      Target target = ctx.shards.TargetOf(info, topic.name, pd.index);
      if (target.shard < 0) {
        fail(ErrorCode::kUnknownTopicOrPartition,
             fmt::format("no partition {} of topic '{}'", pd.index, topic.name));
        continue;
      }
      if (pending->cluster && IsReservedTopic(topic.name)) {
        // Their coordinators alone write them (0018, coordmove), as Kafka refuses.
        fail(ErrorCode::kInvalidTopicException,
             fmt::format("Cannot append to internal topic {}", topic.name));
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
      vo.compacted = config.compacted();
      vo.allow_zstd = h.api_version >= 7;
      kafka::BatchInfo batch_info;
      if (Status st = kafka::ValidateRecords(*pd.records, vo, &batch_info); !st.ok()) {
        fail(kafka::RecordsErrorCode(st), st.message());
        continue;
      }
      if (batch_info.control) {
        fail(ErrorCode::kInvalidRecord,
             "control batches are written by the transaction coordinator, not by clients");
        continue;
      }
      if (batch_info.transactional && batch_info.producer_id < 0) {
        fail(ErrorCode::kInvalidRecord, "a transactional batch needs a producer id");
        continue;
      }
      if (batch_info.transactional) {
        if (!req.transactional_id.has_value()) {
          // Kafka answers the whole request so (KafkaApis.handleProduceRequest).
          txn_refusal = {ErrorCode::kTransactionalIdAuthorizationFailed,
                         "a transactional batch needs the request's transactional id"};
        } else if (!txn_id_allowed) {
          txn_refusal = {ErrorCode::kTransactionalIdAuthorizationFailed, kTxnIdDenied};
        } else if (txn_pid >= 0 && txn_pid != batch_info.producer_id) {
          txn_refusal = {ErrorCode::kInvalidProducerIdMapping,
                         "transactional batches of more than one producer id in one request"};
        }
        txn_pid = batch_info.producer_id;
        txn_epoch = batch_info.producer_epoch;
        if (ctx.txn_verifier == nullptr) {
          fail(ErrorCode::kNotEnoughReplicas,
               "no transaction coordinator runs: transactional batches cannot be verified");
          continue;
        }
      }
      if (batch_info.producer_id >= 0 && pending->cluster) {
        // Behind a batch of this producer refused here before it was written: the same
        // answer, so the client resends both in order (ProduceRefusals).
        int32_t refused_seq = -1;
        const ErrorCode earlier = RefusalsOf(*conn).Check(
            topic.name, pd.index, batch_info.producer_id, batch_info.producer_epoch,
            batch_info.base_sequence, now_ms, &refused_seq);
        if (earlier != ErrorCode::kNone) {
          fail(earlier, fmt::format("producer {}'s batch at sequence {} was refused here and "
                                    "must come before sequence {}",
                                    batch_info.producer_id, refused_seq, batch_info.base_sequence));
          continue;
        }
      }
      ProduceAppend a;
      a.topic = t;
      a.partition = i;
      a.batch.producer_id = batch_info.producer_id;
      a.batch.producer_epoch = batch_info.producer_epoch;
      a.batch.base_sequence = batch_info.base_sequence;
      a.batch.record_count = batch_info.header.records_count;
      a.batch.transactional = batch_info.transactional;
      a.batch.max_timestamp = batch_info.max_timestamp;
      a.log_append_time = config.log_append_time;
      a.records = *pd.records;
      appends->push_back(a);
      targets.push_back(std::move(target));
    }
  }
  if (txn_refusal.first != ErrorCode::kNone) {
    // The whole request is refused: every partition gets the error, nothing is appended.
    for (auto& t : resp.responses) {
      for (auto& out : t.partition_responses) {
        out.error_code = txn_refusal.first;
        out.error_message = txn_refusal.second;
        out.base_offset = -1;
      }
    }
    appends->clear();
    targets.clear();
  }
  // acks=0: nothing is answered, and the next request may come (the owners take this
  // one's appends first: each loop runs its posts in order). A refusal known now closes
  // the connection instead, as Kafka does, so that the client notices.
  if (pending->acks0) {
    bool refused = false;
    for (const auto& t : resp.responses) {
      for (const auto& p : t.partition_responses) refused |= p.error_code != ErrorCode::kNone;
    }
    if (refused) {
      conn->Close();
    } else {
      conn->FinishRequest();
    }
  }
  if (targets.empty()) {
    PendingProduce::Release(pending);
    return;
  }
  pending->frame = call.frame;
  pending->appends = appends;
  const int16_t acks = req.acks;
  const std::vector<Target> all_targets = targets;
  ctx.shards.VisitOwners(
      home, std::move(targets),
      [pending, appends, acks](Partition* part, size_t k) {
        // On the owner's thread: the only one touching part->producers.
        AppendOnOwner(pending, *appends, k, part, acks, /*verified=*/false);
      },
      [&ctx, pending, appends, acks, all_targets, txn_pid, txn_epoch,
       txn_id = req.transactional_id.value_or(""), loop = conn->loop()] {
        std::vector<size_t> asked;
        std::vector<TopicPartition> partitions;
        for (size_t k = 0; k < appends->size(); ++k) {
          if (!(*appends)[k].verify) continue;
          asked.push_back(k);
          partitions.push_back({all_targets[k].key.first, all_targets[k].key.second});
        }
        TxnVerifier* verifier = ctx.txn_verifier;
        if (asked.empty() || verifier == nullptr) {
          for (size_t k : asked) {  // the coordinator went away meanwhile
            const ProduceAppend& a = (*appends)[k];
            auto& out = pending->resp.responses[a.topic].partition_responses[a.partition];
            out.error_code = ErrorCode::kNotEnoughReplicas;
            out.error_message = "no transaction coordinator runs";
          }
          pending->frame.reset();  // every owner has copied its records
          PendingProduce::Appended(pending);
          PendingProduce::Release(pending);
          return;
        }
        // The frame and one count stay held until the second visit is done.
        verifier->Verify(
            txn_id, txn_pid, txn_epoch, std::move(partitions),
            [&ctx, pending, appends, acks, all_targets, asked,
             loop](std::vector<ErrorCode> errors) {
              ctx.shards.PostGated(loop, [&ctx, pending, appends, acks, all_targets, asked,
                                          errors = std::move(errors), loop] {
                const int16_t version = pending->header.api_version;
                std::vector<Target> again;
                std::vector<size_t> which;
                for (size_t j = 0; j < asked.size(); ++j) {
                  const ProduceAppend& a = (*appends)[asked[j]];
                  auto& out = pending->resp.responses[a.topic].partition_responses[a.partition];
                  const ErrorCode e =
                      j < errors.size() ? errors[j] : ErrorCode::kUnknownServerError;
                  if (e != ErrorCode::kNone) {
                    auto [code, message] = VerificationError(e, version);
                    out.error_code = code;
                    out.error_message = std::move(message);
                    continue;
                  }
                  again.push_back(all_targets[asked[j]]);
                  which.push_back(asked[j]);
                }
                ctx.shards.VisitOwners(
                    ctx.shards.ShardOf(loop), std::move(again),
                    [pending, appends, acks, which](Partition* part, size_t j) {
                      AppendOnOwner(pending, *appends, which[j], part, acks, /*verified=*/true);
                    },
                    [pending] {
                      pending->frame.reset();
                      PendingProduce::Appended(pending);
                      PendingProduce::Release(pending);
                    });
              });
            });
      });
}

}  // namespace

}  // namespace sluice::broker::handlers
