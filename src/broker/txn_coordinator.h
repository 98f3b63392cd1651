// TxnCoordinator: Kafka's transaction coordinator on one node (KIP-98, KIP-360, KIP-890
// part 1 verification), behaving as Apache Kafka 3.x's TransactionCoordinator does with
// transaction.version 0/1: InitProducerId with a transactional id, AddPartitionsToTxn,
// AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, the transaction
// timeout and transactional id expiration. State is durable in a TxnLog
// (<data-dir>/__transaction_state-0). Decisions: docs/design/0016-transactions.md
// ("The coordinator").
//
// Threads: the coordinator owns one thread running an EventLoop; every transactional id
// lives on it, without locks. The request methods may be called from any thread: they
// post to that loop, and `done` runs exactly once, later, on the coordinator's thread
// (never inside the call); `done` must not block. Answers that change state come once
// the record is durable (EndTxn: once the Prepare record is; the markers and the
// Complete record follow, as in Kafka).
//
// Lifecycle: Open replays the log and starts the thread; StartMarkers (once the
// partitions can take markers: the broker calls it when its shards run) lets markers be
// written, first those of every transaction found in a Prepare state; Close (or the destructor)
// stops the timers, lets appended records become durable (their requests are answered), closes the
// log and stops the thread. Marker writes still under way are abandoned: the Prepare record is
// durable, so the next Open writes them again. A request that reaches the coordinator
// after its thread stopped is dropped (`done` never runs), so the broker stops accepting
// requests first. `participants` must outlive the coordinator. Replicated (a cluster): a
// state write under way is answered by the partition's owner shard, so the coordinator is
// destroyed only once the shards stopped (the Broker closes it after the server).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "broker/coordinator_loads.h"
#include "broker/txn_log_partitions.h"
#include "broker/txn_markers.h"
#include "broker/txn_state.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::compaction {
class LogCleaner;
}  // namespace sluice::compaction

namespace sluice::broker {

class EventLoop;

struct TxnCoordinatorOptions {
  std::string dir;                          // the state log, e.g. <data-dir>/__transaction_state-0
  storage::IoExecutor* executor = nullptr;  // required
  storage::FileCache* files = nullptr;
  storage::Env* env = storage::Env::Posix();
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kDurable;
  int64_t flush_ms = 100;
  int32_t max_timeout_ms = 900000;                    // transaction.max.timeout.ms
  int64_t id_expiration_ms = 7LL * 24 * 3600 * 1000;  // transactional.id.expiration.ms
  // transaction.abort.timed.out.transaction.cleanup.interval.ms: how often timed-out
  // transactions are looked for (and idle ids expired).
  int64_t abort_check_interval_ms = 10000;
  // Backoff before writing again the markers a partition refused.
  int64_t marker_retry_ms = 100;
  // How long an AddPartitionsToTxn/AddOffsetsToTxn arriving while the id's previous
  // transaction completes waits for it before CONCURRENT_TRANSACTIONS is answered.
  int64_t add_wait_ms = 100;
  // A producer id never handed out before; called on the coordinator's thread. Required.
  std::function<Result<int64_t>()> allocate_producer_id;
  // Whether a partition still exists: a marker for a deleted one is not retried. Called
  // on the coordinator's thread; empty: every partition exists.
  std::function<bool(const TopicPartition&)> partition_exists;
  TxnParticipants* participants = nullptr;  // required
  // The state log's segment.bytes (TxnLogOptions) and the process's log cleaner, which
  // compacts it (must outlive the coordinator; null: the log is not cleaned).
  uint64_t log_segment_bytes = 4ull << 20;
  compaction::LogCleaner* cleaner = nullptr;
  // In a cluster (docs/design/0018-cluster.md, "coordmove"): Open opens no log; the
  // partitions of __transaction_state this broker leads are loaded and unloaded with
  // LoadPartition / UnloadPartition, and an id is served only while its partition is.
  bool replicated = false;
  // Tests: runs on the loading thread before a partition's log is replayed.
  std::function<void(int32_t partition)> before_load;
};

// InitProducerId's and EndTxn's answer. PRODUCER_FENCED is returned as such: the handler
// turns it into INVALID_PRODUCER_EPOCH for request versions that predate it.
struct TxnProducerResult {
  kafka::ErrorCode error = kafka::ErrorCode::kNone;
  int64_t producer_id = kNoProducerId;
  int16_t producer_epoch = kNoProducerEpoch;
};

// One DescribeTransactions entry.
struct TxnDescription {
  std::string transactional_id;
  kafka::ErrorCode error = kafka::ErrorCode::kNone;
  std::string state;
  int32_t timeout_ms = 0;
  int64_t start_ms = -1;
  int64_t producer_id = kNoProducerId;
  int16_t producer_epoch = kNoProducerEpoch;
  std::vector<TopicPartition> partitions;  // sorted
};

struct TxnListing {
  std::string transactional_id;
  int64_t producer_id = kNoProducerId;
  std::string state;
};

struct TxnListResult {
  kafka::ErrorCode error = kafka::ErrorCode::kNone;
  std::vector<std::string> unknown_state_filters;
  std::vector<TxnListing> states;  // sorted by transactional id
};

class TxnCoordinator : public TxnVerifier {
 public:
  template <class R>
  using Done = std::function<void(R)>;

  static Result<std::unique_ptr<TxnCoordinator>> Open(TxnCoordinatorOptions options);
  ~TxnCoordinator() override;  // Close()s
  TxnCoordinator(const TxnCoordinator&) = delete;
  TxnCoordinator& operator=(const TxnCoordinator&) = delete;

  // See the lifecycle above. Returns the log's close status. Idempotent.
  Status Close();
  // Any thread: markers may be written from now on (see the lifecycle). Until then a
  // decided transaction waits in its Prepare state. Idempotent.
  void StartMarkers();

  // InitProducerId with a transactional id. `producer_id`/`producer_epoch` are the
  // request's (-1/-1 when none; the handler refuses one without the other).
  void InitProducerId(std::string transactional_id, int32_t timeout_ms, int64_t producer_id,
                      int16_t producer_epoch, Done<TxnProducerResult> done);
  // AddPartitionsToTxn (one transaction; the handler has checked the partitions exist).
  void AddPartitions(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
                     std::vector<TopicPartition> partitions, Done<kafka::ErrorCode> done);
  // AddOffsetsToTxn: adds the group (and the offsets partition, as Kafka lists it).
  void AddOffsets(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
                  std::string group, Done<kafka::ErrorCode> done);
  void EndTxn(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
              bool commit, Done<TxnProducerResult> done);
  void Describe(std::vector<std::string> transactional_ids, Done<std::vector<TxnDescription>> done);
  // `duration_ms` < 0: no duration filter (ListTransactions v0).
  void List(std::vector<std::string> state_filters, std::vector<int64_t> producer_id_filters,
            int64_t duration_ms, Done<TxnListResult> done);

  // TxnVerifier (the produce path, KIP-890 part 1). The errors are the ones the Produce
  // response carries, as Kafka's AddPartitionsToTxnManager and ReplicaManager turn them:
  // INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH (fenced), INVALID_TXN_STATE (the
  // partition is not in the transaction), NOT_ENOUGH_REPLICAS (retriable: a commit or
  // abort is completing, or the coordinator is closing).
  void Verify(std::string transactional_id, int64_t producer_id, int16_t producer_epoch,
              std::vector<TopicPartition> partitions,
              std::function<void(std::vector<kafka::ErrorCode>)> done) override;

  // Cluster: this broker leads partition `p` of the `count` partitions of
  // __transaction_state in `epoch`: its ids are loaded from `log` (TxnLogOptions: attach,
  // append) on a loading thread, and meanwhile answer COORDINATOR_LOAD_IN_PROGRESS; the
  // markers of the transactions found in a Prepare state are written again. A partition
  // loaded in this epoch stays. Returns without waiting for the coordinator's thread
  // (which may wait for the caller's: producer ids). One caller thread at a time.
  void LoadPartition(int32_t p, int32_t count, int32_t epoch, TxnLogOptions log);
  // It stopped leading `p`: its ids are dropped (waiting requests answered, markers
  // under way abandoned: the new coordinator writes them again); their requests answer
  // NOT_COORDINATOR. Returns once the log is no longer read here (the loading thread
  // ended), without waiting for the drop. As LoadPartition.
  void UnloadPartition(int32_t p);
  // The partitions loaded (true) or loading (false), for tests.
  std::map<int32_t, bool> PartitionsForTesting();

  // Tests: runs `fn` on the coordinator's thread and waits for it.
  void RunAndWait(const std::function<void()>& fn);
  // Tests: the durable-or-pending record of an id, read on the coordinator's thread.
  std::optional<TxnRecord> Find(const std::string& transactional_id);

 private:
  struct Txn;
  // The loop as seen from participants' callbacks, which may come after Close.
  struct LoopGate {
    std::mutex mu;
    EventLoop* loop = nullptr;  // guarded by mu; null once closed
  };
  using EndDone = std::function<void(kafka::ErrorCode, int64_t, int16_t)>;

  explicit TxnCoordinator(TxnCoordinatorOptions options);

  // Everything below runs on the coordinator's thread.
  void DoInitProducerId(const std::string& id, int32_t timeout_ms, int64_t producer_id,
                        int16_t producer_epoch, Done<TxnProducerResult>& done);
  void DoAdd(const std::string& id, int64_t producer_id, int16_t producer_epoch,
             const std::vector<TopicPartition>& partitions, const std::optional<std::string>& group,
             Done<kafka::ErrorCode>& done, bool may_wait = true);
  // Answers the requests waiting in DoAdd for `t`'s transaction to complete.
  void ReleaseWaiting(Txn& t);
  void EndTransaction(const std::string& id, int64_t producer_id, int16_t producer_epoch,
                      bool commit, bool from_client, EndDone done);
  // Bumps the epoch of an Ongoing transaction in memory and aborts it (Kafka's
  // PrepareEpochFence); `done` gets EndTransaction's answer.
  void FenceAndAbort(Txn& t, EndDone done);
  void WriteMarkers(const std::string& id);
  // The markers (item 3 of 0018 "coordfix"): each leader's partitions answer on their
  // own and are retried on their own backoff (Kafka's TransactionMarkerChannelManager).
  void SendMarkers(Txn& t, std::vector<TopicPartition> tps);
  void SendGroups(Txn& t);
  // An answer counts only for the round it was sent in (`round`: Txn::marker_round), not
  // for a later one of the same id and producer (after an unload and a reload, or the
  // next transaction's).
  void OnMarkersPart(const std::string& id, uint64_t round, std::vector<TopicPartition> tps,
                     std::vector<kafka::ErrorCode> errors);
  void OnGroupsDone(const std::string& id, uint64_t round, std::vector<std::string> groups,
                    std::vector<kafka::ErrorCode> errors);
  // A partition or group answered TRANSACTION_COORDINATOR_FENCED: a newer coordinator
  // completes the transaction; this one stops sending its markers.
  void StopMarkers(Txn& t);
  void MaybeComplete(Txn& t);
  // Runs `fn` on t after `ms` unless t changed producer meanwhile; cancelled with t.
  void RetryAfter(Txn& t, int64_t ms, std::function<void(Txn&)> fn);
  void CompleteTransaction(Txn& t);
  // Makes `next` t's state once durable; `then` gets kNone, or the error to answer.
  void Persist(Txn& t, TxnRecord next, std::function<void(kafka::ErrorCode)> then);
  void ApplyDurable(Txn& t, const TxnRecord& next);
  TxnRecord RecordOf(const Txn& t) const;
  void OnTick();
  void AbortTimedOut(int64_t now);
  void ExpireIds(int64_t now);
  Txn* FindTxn(const std::string& id);
  void Shutdown();
  // Why `id` is not served now (COORDINATOR_NOT_AVAILABLE closing, NOT_COORDINATOR,
  // COORDINATOR_LOAD_IN_PROGRESS), kNone when it is.
  kafka::ErrorCode ServingError(const std::string& id) const;
  void InstallPartition(int32_t p, uint64_t load_id, Result<std::unique_ptr<TxnLog>> loaded);
  void DropPartition(int32_t p);

  const TxnCoordinatorOptions options_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<TxnLogs> log_;  // the partitions served here; coordinator's thread
  std::shared_ptr<LoopGate> gate_;
  std::thread thread_;
  // The callers' side of the partitions (replicated only): LoadPartition / UnloadPartition.
  CoordinatorLoads loads_;
  // Set by Close (under gate_->mu) before Shutdown is posted: no load or unload is posted
  // after it, so each one posted runs.
  std::atomic<bool> closed_for_loads_{false};

  std::mutex close_mu_;
  bool closed_ = false;  // guarded by close_mu_
  Status close_status_;  // guarded by close_mu_
  Status shutdown_status_;

  // The coordinator's thread only.
  std::map<std::string, std::unique_ptr<Txn>> txns_;
  bool shutting_down_ = false;
  bool markers_started_ = false;
  uint64_t tick_timer_ = 0;
  uint64_t last_marker_round_ = 0;  // Txn::marker_round's last value, over every load
};

}  // namespace sluice::broker
