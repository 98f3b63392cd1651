// InProcessKafka: the broker as a consumer in the same process sees it, with no Kafka
// protocol and no socket (docs/design/0023-native-path.md): reads of partitions by the Fetch
// handler's own look (FetchOnce: the principal's ACLs, read_committed up to the last stable
// offset with the aborted transactions, record-less batches passed over, offsets out of
// range), the group coordinator's requests with the checks the group handlers make, and
// the topics' partition counts. The records come back as file slices of the segments, which
// the caller reads (one copy, from the page cache, where the Kafka path's sendfile would
// have copied them to a socket).
//
// In a cluster a member reaches the group's coordinator and the other leaders through an
// InProcessClient (in_process_client.h), which uses the calls below for what this broker
// holds.
//
// Threads: any, several at once. The blocking calls wait on the shards' or the
// coordinator's threads, so they are never called from one of those; each stops waiting
// (Aborted) once `*cancel` is true, looked at every 100 ms (a pipeline stopping while its
// JoinGroup waits for a rebalance).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/inter_broker_connection.h"
#include "kafka/protocol/messages/groups.h"
#include "kafka/protocol/requests.h"
#include "storage/log.h"

namespace sluice::broker {

struct MetadataSnapshot;

// Waits for an answer of InProcessKafka's or InProcessClient's: Aborted after `timeout`,
// or once `*cancel` (when given) is true, looked at every 100 ms.
template <typename R>
Result<R> AwaitAnswer(std::future<R>& f, std::chrono::milliseconds timeout,
                      const std::atomic<bool>* cancel, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return AbortedError("in-process {}: no answer within {} ms", what, timeout.count());
    }
    if (cancel != nullptr && cancel->load()) {
      return AbortedError("in-process {}: given up (stopping)", what);
    }
    const auto slice = std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(100));
    if (f.wait_for(slice) == std::future_status::ready) break;
  }
  try {
    return f.get();
  } catch (const std::future_error&) {
    // The answer's callback was dropped unrun: the coordinator or the shard stopped.
    return FailedPreconditionError("in-process {}: the broker is stopping", what);
  }
}

namespace handlers {
struct Context;
}

class InProcessKafka {
 public:
  explicit InProcessKafka(handlers::Context& ctx) : ctx_(ctx) {}

  // Whether in-process reads may serve a pipeline: the broker's server runs.
  bool available() const;

  // A topic's partition count from the published metadata; NotFound when it has none.
  Result<int32_t> PartitionCount(std::string_view topic) const;

  // One look at the partitions of `req` (topics by name; Fetch v12's fields) as `principal`
  // ("User:alice"; "" for the broker's own service, which may read everything): no session,
  // no long poll (min_bytes and max_wait_ms are ignored). The answer's records are
  // RecordsRef::Splice entries indexing its pieces. FailedPrecondition when the server
  // stops.
  struct FetchAnswer {
    kafka::FetchResponse response;
    // The pieces a splice token indexes: first the file slices of this broker's logs, then
    // the records other leaders answered (InProcessClient).
    std::vector<storage::FileSlice> slices;
    std::vector<std::vector<uint8_t>> received;

    size_t pieces() const { return slices.size() + received.size(); }
    uint64_t piece_size(size_t i) const {
      return i < slices.size() ? slices[i].size : received[i - slices.size()].size();
    }
    // Copies piece `i` (piece_size(i) bytes) to `into`.
    Status ReadPiece(size_t i, uint8_t* into) const;
  };
  Result<FetchAnswer> Fetch(const std::string& principal, kafka::FetchRequest req,
                            std::chrono::milliseconds timeout,
                            const std::atomic<bool>* cancel = nullptr);

  // The earliest and latest offsets of `partitions` (topic, partition), as ListOffsets -2
  // and -1 under read_uncommitted answer them: the log start and the high watermark, read
  // on their owners. nullopt for one not answered here: whose topic `principal` may not
  // describe, that does not exist, that this broker does not lead (a cluster's other
  // brokers' partitions), or whose start is not known yet (tiered storage's part not
  // listed). FailedPrecondition when the server stops.
  struct Offsets {
    int64_t earliest = 0;
    int64_t latest = 0;
  };
  Result<std::vector<std::optional<Offsets>>> Watermarks(
      const std::string& principal, const std::vector<std::pair<std::string, int32_t>>& partitions,
      std::chrono::milliseconds timeout);

  // The coordinator's requests as `principal`, each with the group handlers' checks (READ
  // on the group; OffsetCommit and OffsetFetch READ on each topic), waiting up to `timeout`
  // for the answer (a JoinGroup waits for its rebalance: pass its rebalance timeout and
  // some). Aborted when no answer came in time; FailedPrecondition without a coordinator, or when
  // the principal may not (OffsetCommit, OffsetFetch).
  Result<kafka::JoinGroupResponse> JoinGroup(const std::string& principal,
                                             kafka::JoinGroupRequest req,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel = nullptr);
  Result<kafka::SyncGroupResponse> SyncGroup(const std::string& principal,
                                             kafka::SyncGroupRequest req,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel = nullptr);
  Result<kafka::HeartbeatResponse> Heartbeat(const std::string& principal,
                                             kafka::HeartbeatRequest req,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel = nullptr);
  Result<kafka::LeaveGroupResponse> LeaveGroup(const std::string& principal,
                                               kafka::LeaveGroupRequest req,
                                               std::chrono::milliseconds timeout,
                                               const std::atomic<bool>* cancel = nullptr);
  Result<kafka::OffsetCommitResponse> OffsetCommit(const std::string& principal,
                                                   kafka::OffsetCommitRequest req,
                                                   std::chrono::milliseconds timeout,
                                                   const std::atomic<bool>* cancel = nullptr);
  // One group (OffsetFetch v7's shape, require_stable as given).
  Result<kafka::OffsetFetchResponse> OffsetFetch(const std::string& principal,
                                                 kafka::OffsetFetchRequest req,
                                                 std::chrono::milliseconds timeout,
                                                 const std::atomic<bool>* cancel = nullptr);

  // For InProcessClient: the published metadata, this broker's id and how it reaches the
  // others, and the checks the calls above make before they ask the coordinator.
  std::shared_ptr<const MetadataSnapshot> Metadata() const;
  int32_t node_id() const;
  bool cluster() const;
  std::shared_ptr<const InterBrokerSecurity> inter_broker_security() const;
  // The broker coordinating `group`: this one on a single node; in a cluster the leader of
  // the group's partition of __consumer_offsets, as FindCoordinator answers (-1: none now).
  int32_t GroupCoordinatorNode(const std::string& group) const;
  // READ on the group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup).
  bool MayJoin(const std::string& principal, const std::string& group) const;
  // READ on a topic (Fetch).
  bool MayRead(const std::string& principal, const std::string& topic) const;
  // OffsetCommit's and OffsetFetch's checks: FailedPrecondition naming what is refused.
  Status CheckCommit(const std::string& principal, const kafka::OffsetCommitRequest& req) const;
  Status CheckOffsetFetch(const std::string& principal, const kafka::OffsetFetchRequest& req) const;

  // The API versions the calls above speak (the response shapes follow them).
  static constexpr int16_t kFetchVersion = 12;
  static constexpr int16_t kJoinGroupVersion = 7;
  static constexpr int16_t kSyncGroupVersion = 5;
  static constexpr int16_t kHeartbeatVersion = 4;
  static constexpr int16_t kLeaveGroupVersion = 4;
  static constexpr int16_t kOffsetCommitVersion = 8;
  static constexpr int16_t kOffsetFetchVersion = 7;

 private:
  template <typename Resp, typename Ask>
  Result<Resp> Membership(const std::string& principal, const std::string& group,
                          std::chrono::milliseconds timeout, const std::atomic<bool>* cancel,
                          const char* what, Ask ask);
  handlers::Context& ctx_;
};

}  // namespace sluice::broker
