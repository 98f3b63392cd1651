// InProcessKafka: the broker as a consumer in the same process sees it, with no Kafka
// protocol and no socket (docs/design/0023-native-path.md): reads of partitions by the Fetch
// handler's own look (FetchOnce: the principal's ACLs, read_committed up to the last stable
// offset with the aborted transactions, record-less batches passed over, offsets out of
// range), the group coordinator's requests with the checks the group handlers make, and
// the topics' partition counts. The records come back as file slices of the segments, which
// the caller reads (one copy, from the page cache, where the Kafka path's sendfile would
// have copied them to a socket).
//
// Threads: any, several at once. The blocking calls wait on the shards' or the
// coordinator's threads, so they are never called from one of those; each stops waiting
// (Aborted) once `*cancel` is true, looked at every 100 ms (a pipeline stopping while its
// JoinGroup waits for a rebalance).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/messages/groups.h"
#include "kafka/protocol/requests.h"
#include "storage/log.h"

namespace sluice::broker {

namespace handlers {
struct Context;
}

class InProcessKafka {
 public:
  explicit InProcessKafka(handlers::Context& ctx) : ctx_(ctx) {}

  // Whether in-process reads may serve a pipeline: a single node whose server runs (in a
  // cluster the partitions a member is assigned may be led elsewhere: the Kafka path then).
  bool available() const;

  // A topic's partition count from the published metadata; NotFound when it has none.
  Result<int32_t> PartitionCount(std::string_view topic) const;

  // One look at the partitions of `req` (topics by name; Fetch v12's fields) as `principal`
  // ("User:alice"; "" for the broker's own service, which may read everything): no session,
  // no long poll (min_bytes and max_wait_ms are ignored). The answer's records are
  // RecordsRef::Splice entries indexing `slices`. FailedPrecondition when the server stops.
  struct FetchAnswer {
    kafka::FetchResponse response;
    std::vector<storage::FileSlice> slices;
  };
  Result<FetchAnswer> Fetch(const std::string& principal, kafka::FetchRequest req,
                            std::chrono::milliseconds timeout,
                            const std::atomic<bool>* cancel = nullptr);

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
