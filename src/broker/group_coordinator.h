// GroupCoordinator: Kafka's consumer-group coordinator, classic protocol (JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
// DescribeGroups, DeleteGroups) and the offsets of transactions (TxnOffsetCommit, and
// CompleteTxn for the transaction coordinator's markers), behaving as Apache Kafka 3.x's
// GroupCoordinator does on a single node. Membership lives in memory only; committed offsets and
// each group's last generation are durable in an OffsetLog (<data-dir>/__consumer_offsets-0).
// Decisions: docs/design/0003-group-coordinator.md.
//
// Threads: the coordinator owns one thread running an EventLoop; every group lives on
// it, without locks. The request methods may be called from any thread: they post the
// request to that loop, and `done` runs exactly once, later, on the coordinator's thread
// (never inside the call). `done` must not block; it normally posts the response to the
// connection's own loop. OffsetCommit and DeleteGroups answer once their records are
// durable (the offsets log's acks come on I/O threads and are posted back).
//
// Lifecycle: Open replays the offsets log and starts the thread; Close (or the
// destructor) answers every request still waiting in a group (JoinGroup / SyncGroup
// waiting for a rebalance) with COORDINATOR_NOT_AVAILABLE, answers requests already
// queued with COORDINATOR_NOT_AVAILABLE, lets pending commits finish (they are answered
// by their durability), closes the log and stops the thread. A request that reaches the
// coordinator after its thread stopped is dropped: `done` never runs (it is destroyed
// with the loop). So the broker stops accepting requests before it closes the
// coordinator. Close must not be called from a `done` callback. Replicated (a cluster):
// a write under way is answered by the partition's owner shard, so the coordinator is
// destroyed only once the shards stopped (the Broker closes it after the server).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "broker/coordinator_loads.h"
#include "broker/offset_log.h"
#include "kafka/protocol/messages/groups.h"
#include "kafka/protocol/messages/txn.h"
#include "storage/file_cache.h"
#include "storage/io_executor.h"
#include "storage/log.h"

namespace sluice::compaction {
class LogCleaner;
}  // namespace sluice::compaction

namespace sluice::broker {

class EventLoop;
class OffsetLog;
class TxnVerifier;

struct GroupCoordinatorOptions {
  std::string dir;  // the internal offsets log, e.g. <data-dir>/__consumer_offsets-0
  storage::IoExecutor* executor = nullptr;  // shared with the broker's logs; required
  storage::FileCache* files = nullptr;
  storage::Env* env = storage::Env::Posix();  // the offsets log's files
  storage::FlushPolicy flush_policy = storage::FlushPolicy::kInterval;
  int64_t flush_ms = 100;
  int32_t min_session_timeout_ms = 6000;                         // group.min.session.timeout.ms
  int32_t max_session_timeout_ms = 1800000;                      // group.max.session.timeout.ms
  int32_t initial_rebalance_delay_ms = 3000;                     // group.initial.rebalance.delay.ms
  int32_t max_group_size = std::numeric_limits<int32_t>::max();  // group.max.size
  int32_t max_offset_metadata_bytes = 4096;                      // offset.metadata.max.bytes
  // Whether a partition exists (OffsetCommit answers UNKNOWN_TOPIC_OR_PARTITION
  // otherwise). Called on the coordinator's thread; must be thread-safe. Empty: every
  // partition exists.
  std::function<bool(const std::string& topic, int32_t partition)> partition_exists;
  // When set, TxnOffsetCommit first asks it whether the offsets partition
  // (kOffsetsTopicPartition) is in the producer's ongoing transaction, i.e. the producer
  // sent AddOffsetsToTxn for it, as Kafka 3.6+ verifies (KIP-890); its error answers the
  // request. Must outlive the coordinator. Null: no verification (Kafka before 3.6).
  TxnVerifier* txn_verifier = nullptr;
  // The process's log cleaner, which compacts the offsets log (internal_log.h); must
  // outlive the coordinator. Null: the log is not cleaned. The log's segment.bytes
  // (OffsetLogOptions): tests make it small.
  compaction::LogCleaner* cleaner = nullptr;
  uint64_t log_segment_bytes = 8ull << 20;
  // In a cluster (docs/design/0018-cluster.md, "coordmove"): Open opens no log; the
  // partitions of __consumer_offsets this broker leads are loaded and unloaded with
  // LoadPartition / UnloadPartition, and a group is served only by the coordinator whose
  // loaded partition holds it (CoordinatorPartitionFor).
  bool replicated = false;
  // Tests: runs on the loading thread before a partition's log is replayed.
  std::function<void(int32_t partition)> before_load;
};

// The partition TxnVerifier is asked about: the offsets log, as a transaction holds it.
inline const char kOffsetsTopic[] = "__consumer_offsets";

// Who asked: for DescribeGroups' client_id/client_host and member ids "<client_id>-<uuid>".
struct GroupClient {
  std::string client_id;
  std::string host;
};

class GroupCoordinator {
 public:
  template <class R>
  using Done = std::function<void(R)>;

  // Replays the offsets log in options.dir (creating it when missing), starts the thread.
  static Result<std::unique_ptr<GroupCoordinator>> Open(GroupCoordinatorOptions options);
  ~GroupCoordinator();  // Close()s
  GroupCoordinator(const GroupCoordinator&) = delete;
  GroupCoordinator& operator=(const GroupCoordinator&) = delete;

  // See the lifecycle above. Returns the offsets log's close status. Idempotent.
  Status Close();

  // Each may be called from any thread; `done` runs once, later, on the coordinator's
  // thread. `version` is the request's API version (the response is for that version).
  void JoinGroup(kafka::JoinGroupRequest req, int16_t version, GroupClient client,
                 Done<kafka::JoinGroupResponse> done);
  void SyncGroup(kafka::SyncGroupRequest req, int16_t version, Done<kafka::SyncGroupResponse> done);
  void Heartbeat(kafka::HeartbeatRequest req, int16_t version, Done<kafka::HeartbeatResponse> done);
  void LeaveGroup(kafka::LeaveGroupRequest req, int16_t version,
                  Done<kafka::LeaveGroupResponse> done);
  void OffsetCommit(kafka::OffsetCommitRequest req, int16_t version,
                    Done<kafka::OffsetCommitResponse> done);
  void OffsetFetch(kafka::OffsetFetchRequest req, int16_t version,
                   Done<kafka::OffsetFetchResponse> done);
  void ListGroups(kafka::ListGroupsRequest req, int16_t version,
                  Done<kafka::ListGroupsResponse> done);
  void DescribeGroups(kafka::DescribeGroupsRequest req, int16_t version,
                      Done<kafka::DescribeGroupsResponse> done);
  void DeleteGroups(kafka::DeleteGroupsRequest req, int16_t version,
                    Done<kafka::DeleteGroupsResponse> done);
  // Offsets committed inside a transaction (KIP-98, KIP-447 checks from v3): written to
  // the offsets log as a transactional batch of the producer, answered once durable,
  // invisible to OffsetFetch until the transaction's commit marker (CompleteTxn).
  void TxnOffsetCommit(kafka::TxnOffsetCommitRequest req, int16_t version,
                       Done<kafka::TxnOffsetCommitResponse> done);
  // The transaction coordinator's marker for `group` (TxnParticipants::CompleteGroupOffsets):
  // appends the producer's commit or abort marker to the offsets log, then makes the
  // producer's pending offsets visible (commit) or drops them (abort) — every group's, as
  // the marker in the log does at replay. `done` gets kNone once the marker is durable
  // (also when nothing was pending), INVALID_PRODUCER_EPOCH for an epoch older than the
  // producer's last in the log, TRANSACTION_COORDINATOR_FENCED for a `coordinator_epoch`
  // older than its last marker's there, COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR when
  // it could not be written.
  void CompleteTxn(std::string group, int64_t producer_id, int16_t producer_epoch, bool commit,
                   int32_t coordinator_epoch, Done<kafka::ErrorCode> done);
  // The same marker for partition `p` of the offsets log (every group there): what another
  // broker's transaction coordinator sends as WriteTxnMarkers for __consumer_offsets-p
  // when this broker leads it (txn_partition_markers.h). NOT_COORDINATOR when `p` is not
  // led here, COORDINATOR_LOAD_IN_PROGRESS while it loads.
  void CompletePartitionTxn(int32_t p, int64_t producer_id, int16_t producer_epoch, bool commit,
                            int32_t coordinator_epoch, Done<kafka::ErrorCode> done);
  // Cluster: this broker leads partition `p` of the `count` partitions of
  // __consumer_offsets in `epoch`. Its groups are loaded from `log` (InternalLogOptions:
  // attach, append) on a loading thread; until they are, their requests answer
  // COORDINATOR_LOAD_IN_PROGRESS. A partition already loaded in this epoch stays as it is.
  // Returns without waiting for the coordinator's thread. One caller thread at a time
  // (the cluster controller's), never the coordinator's.
  void LoadPartition(int32_t p, int32_t count, int32_t epoch, OffsetLogOptions log);
  // It stopped leading `p` (Kafka's onResignation): the partition's groups are dropped,
  // requests waiting in them (JoinGroup, SyncGroup) answered NOT_COORDINATOR, and its
  // log is no longer touched once this returns. Requests for its groups answer
  // NOT_COORDINATOR. It returns once the log is no longer read here (the loading
  // thread, if any, ended), without waiting for the drop itself. As LoadPartition.
  void UnloadPartition(int32_t p);
  // The partitions loaded (or loading) now, for tests; waits for the coordinator's thread.
  std::map<int32_t, bool> PartitionsForTesting();

  // A topic was deleted: forget its committed offsets (durably, without waiting), and
  // drop the Empty groups left without offsets, as Kafka does. Any thread.
  void OnTopicDeleted(std::string topic);

 private:
  struct Member;
  struct Group;
  struct JoinArgs;

  explicit GroupCoordinator(GroupCoordinatorOptions options);

  // Everything below runs on the coordinator's thread.
  void DoJoinGroup(kafka::JoinGroupRequest& req, int16_t version, const GroupClient& client,
                   Done<kafka::JoinGroupResponse>& done);
  void DoSyncGroup(kafka::SyncGroupRequest& req, int16_t version,
                   Done<kafka::SyncGroupResponse>& done);
  kafka::ErrorCode DoHeartbeat(const kafka::HeartbeatRequest& req);
  kafka::LeaveGroupResponse DoLeaveGroup(const kafka::LeaveGroupRequest& req, int16_t version);
  void DoOffsetCommit(kafka::OffsetCommitRequest& req, int16_t version,
                      Done<kafka::OffsetCommitResponse>& done);
  kafka::OffsetFetchResponse DoOffsetFetch(const kafka::OffsetFetchRequest& req, int16_t version);
  void DoTxnOffsetCommit(kafka::TxnOffsetCommitRequest& req, int16_t version,
                         kafka::ErrorCode verified, Done<kafka::TxnOffsetCommitResponse>& done);
  // Writes the marker to `log` (of partition `p`, for the log lines) and answers `done`.
  void CompleteTxnIn(OffsetLog* log, int32_t p, int64_t producer_id, int16_t producer_epoch,
                     bool commit, int32_t coordinator_epoch, Done<kafka::ErrorCode>& done);
  kafka::ListGroupsResponse DoListGroups(const kafka::ListGroupsRequest& req);
  kafka::DescribeGroupsResponse DoDescribeGroups(const kafka::DescribeGroupsRequest& req,
                                                 int16_t version);
  void DoDeleteGroups(const kafka::DeleteGroupsRequest& req,
                      Done<kafka::DeleteGroupsResponse>& done);
  void DoTopicDeleted(const std::string& topic);
  void Shutdown();

  // Join phase.
  bool AcceptJoiningMember(const Group& g, const std::string& member_id) const;
  static std::unique_ptr<Member> NewMember(const std::string& id, const JoinArgs& a);
  void NewMemberJoin(Group& g, JoinArgs& a, Done<kafka::JoinGroupResponse>& done);
  void CurrentMemberJoin(Group& g, JoinArgs& a, Done<kafka::JoinGroupResponse>& done);
  void AddMemberAndRebalance(Group& g, std::unique_ptr<Member> m,
                             Done<kafka::JoinGroupResponse> done);
  void UpdateStaticMemberAndRebalance(Group& g, const std::string& old_id,
                                      const std::string& new_id, JoinArgs& a,
                                      Done<kafka::JoinGroupResponse> done);
  void UpdateMember(Group& g, Member& m, JoinArgs& a, Done<kafka::JoinGroupResponse> done);
  void MaybePrepareRebalance(Group& g, const std::string& reason);
  void PrepareRebalance(Group& g, const std::string& reason);
  void MaybeCompleteJoin(Group& g);
  void CompleteJoin(Group& g);
  void OnJoinTimer(const std::string& group_id, uint64_t incarnation);
  kafka::JoinGroupResponse JoinSuccess(const Group& g, const Member& m, bool with_members,
                                       const std::optional<std::string>& leader) const;
  // Sync phase.
  void SchedulePendingSync(Group& g);
  void OnSyncExpired(const std::string& group_id, uint64_t incarnation, int32_t generation);
  void RemovePendingSyncMember(Group& g, const std::string& member_id);
  void PropagateAssignment(Group& g, kafka::ErrorCode error);
  void MaybeCompleteSync(Group& g);
  // Members.
  Member& AddMember(Group& g, std::unique_ptr<Member> m, Done<kafka::JoinGroupResponse> done);
  void RemoveMember(Group& g, const std::string& member_id);
  void RemoveMemberAndUpdateGroup(Group& g, const std::string& member_id,
                                  const std::string& reason);
  void AddPendingMember(Group& g, const std::string& member_id, int32_t timeout_ms);
  void OnPendingMemberExpired(const std::string& group_id, uint64_t incarnation,
                              const std::string& member_id);
  void RemovePendingMemberAndUpdateGroup(Group& g, const std::string& member_id);
  void ScheduleHeartbeat(Group& g, Member& m, int64_t timeout_ms);
  void OnHeartbeatExpired(const std::string& group_id, uint64_t incarnation,
                          const std::string& member_id);
  kafka::ErrorCode ValidateCurrentMember(const Group& g, const std::string& member_id,
                                         const std::optional<std::string>& instance_id) const;
  kafka::ErrorCode ValidateOffsetCommit(const Group& g, int32_t generation,
                                        const std::string& member_id,
                                        const std::optional<std::string>& instance_id,
                                        bool transactional = false) const;
  // Groups.
  Group* FindGroup(const std::string& id);
  Group& CreateGroup(const std::string& id);
  void DropGroup(Group& g);  // stops its timers and forgets it (writes nothing)
  // Stops the group's timers and answers its waiting JoinGroup/SyncGroup with `error`.
  void AbandonGroup(Group& g, kafka::ErrorCode error);
  // A partition of the offsets log served here (replicated: led here).
  struct OffsetsPartition {
    std::unique_ptr<OffsetLog> log;  // null while it loads
    int32_t epoch = -1;              // its leader epoch
    uint64_t load_id = 0;            // tells a load's result from a later load's
  };
  int32_t PartitionOf(const std::string& group) const;
  // Why this coordinator does not serve `group` now: COORDINATOR_NOT_AVAILABLE (closing),
  // NOT_COORDINATOR (its partition is not led here), COORDINATOR_LOAD_IN_PROGRESS; kNone
  // when it does.
  kafka::ErrorCode ServingError(const std::string& group) const;
  // The log holding `group`: non-null when ServingError(group) is kNone.
  OffsetLog* OffsetsOf(const std::string& group);
  // What a write's acknowledgement runs on partition `p`'s log (on this thread), if the
  // partition is still the load the write went to.
  std::function<void(bool ok)> FinishIn(int32_t p, std::function<void(OffsetLog&, bool)> finish);
  void InstallPartition(int32_t p, uint64_t load_id, Result<std::unique_ptr<OffsetLog>> loaded);
  void DropPartition(int32_t p);
  void PersistGeneration(Group& g);
  void CleanupEmptyGroups(const char* why);
  void ScheduleCleanup();

  const GroupCoordinatorOptions options_;
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
  // The callers' side of the partitions (replicated only): LoadPartition / UnloadPartition.
  CoordinatorLoads loads_;

  // Lets callbacks of other components (the TxnVerifier's) post to the loop only while
  // the coordinator is open: Close clears `loop` before it stops the thread, so a late
  // callback is dropped instead of touching a coordinator that is gone.
  struct PostGate {
    std::mutex mu;
    EventLoop* loop = nullptr;  // guarded by mu
  };
  std::shared_ptr<PostGate> gate_ = std::make_shared<PostGate>();

  std::mutex close_mu_;
  bool closed_ = false;  // guarded by close_mu_
  Status close_status_;  // guarded by close_mu_
  // Written by Shutdown() on the coordinator's thread, read by Close() after joining it.
  Status shutdown_status_;

  // The coordinator's thread only.
  // The offsets log's partitions served here: partition 0 always on a single node.
  std::map<int32_t, OffsetsPartition> partitions_;
  int32_t partition_count_ = 1;
  std::map<std::string, std::unique_ptr<Group>> groups_;
  bool shutting_down_ = false;
  uint64_t next_incarnation_ = 1;
  uint64_t next_join_seq_ = 1;
};

}  // namespace sluice::broker
