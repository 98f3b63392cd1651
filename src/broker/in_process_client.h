// InProcessClient: one in-process group member's way to the broker, on a single node and
// in a cluster (docs/design/0023-native-path.md, decision 8).
//
// On a single node every call is InProcessKafka's. In a cluster:
// - The group's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
//   OffsetFetch) go to the group's coordinator as FindCoordinator names it: this broker's
//   own when it is the one, else a request over an inter-broker connection to the broker
//   that is, once this broker has made the checks the group handlers make for the
//   principal (the other broker sees the inter-broker principal, a super user).
//   COORDINATOR_NOT_AVAILABLE while the group's partition has no leader; NOT_COORDINATOR
//   from a broker that stopped being it: the member asks again, and the next ask goes to
//   the leader the metadata names then.
// - A fetch reads the partitions this broker leads in-process (slices of its segments) and
//   asks each other leader for its partitions with a Fetch of its own (Fetch v12, a
//   consumer's: replica id -1, no session, a long poll of kRemoteWaitMs), at most one
//   outstanding per leader; an answer that came back joins the next fetch's answer, its
//   records copied out of the frame. A partition has at most one fetch under way wherever
//   it is led, so a leadership moving between this broker and another never reads a range
//   twice; an answer for an offset the caller no longer asks for is dropped. A leader that
//   could not be reached, or a partition that answered an error, is asked again after
//   kRemoteBackoffMs.
//
// Threads: Fetch on one thread at a time (the source's runner or prefetch), the group's
// calls on any; the channels' threads run the answers' callbacks. The InProcessKafka must
// outlive the client.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/in_process_kafka.h"
#include "broker/inter_broker_sender.h"

namespace sluice::broker {

class InProcessClient {
 public:
  // How long a remote leader may hold a fetch with nothing to answer.
  static constexpr int32_t kRemoteWaitMs = 500;
  // How long a leader that failed a fetch (unreachable, a broken answer) is left alone.
  static constexpr int64_t kRemoteBackoffMs = 100;

  // `principal`: as InProcessKafka's calls take it. `membership_timeout`: how long a
  // JoinGroup may wait for its rebalance (the member's rebalance timeout and some).
  InProcessClient(InProcessKafka* kafka, std::string principal,
                  std::chrono::milliseconds membership_timeout);
  ~InProcessClient();
  InProcessClient(const InProcessClient&) = delete;
  InProcessClient& operator=(const InProcessClient&) = delete;

  Result<int32_t> PartitionCount(std::string_view topic) const {
    return kafka_->PartitionCount(topic);
  }

  // As InProcessKafka::Fetch. In a cluster the answer holds this broker's partitions, the
  // other leaders' answers that came back since the last call, and an error for each
  // partition with no leader now or one the principal may not read; a partition whose
  // fetch is under way is left out.
  Result<InProcessKafka::FetchAnswer> Fetch(kafka::FetchRequest req,
                                            std::chrono::milliseconds timeout,
                                            const std::atomic<bool>* cancel = nullptr);

  Result<kafka::JoinGroupResponse> JoinGroup(kafka::JoinGroupRequest req,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel = nullptr);
  Result<kafka::SyncGroupResponse> SyncGroup(kafka::SyncGroupRequest req,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel = nullptr);
  Result<kafka::HeartbeatResponse> Heartbeat(kafka::HeartbeatRequest req,
                                             std::chrono::milliseconds timeout,
                                             const std::atomic<bool>* cancel = nullptr);
  Result<kafka::LeaveGroupResponse> LeaveGroup(kafka::LeaveGroupRequest req,
                                               std::chrono::milliseconds timeout,
                                               const std::atomic<bool>* cancel = nullptr);
  // Unavailable while the group has no coordinator, besides InProcessKafka's errors.
  Result<kafka::OffsetCommitResponse> OffsetCommit(kafka::OffsetCommitRequest req,
                                                   std::chrono::milliseconds timeout,
                                                   const std::atomic<bool>* cancel = nullptr);
  Result<kafka::OffsetFetchResponse> OffsetFetch(kafka::OffsetFetchRequest req,
                                                 std::chrono::milliseconds timeout,
                                                 const std::atomic<bool>* cancel = nullptr);

 private:
  using Key = std::pair<std::string, int32_t>;
  // What a remote leader answered, kept until the next Fetch takes it.
  struct Arrived {
    Status status;
    kafka::FetchResponse response;  // records: splices indexing `received`
    std::vector<std::vector<uint8_t>> received;
  };
  struct Leader {
    bool in_flight = false;
    std::map<Key, int64_t> asked;  // the offsets the fetch under way asked for
    std::unique_ptr<Arrived> arrived;
    std::chrono::steady_clock::time_point retry_at{};
  };
  // Shared with the fetch channel's callbacks.
  struct FetchState {
    std::mutex mu;
    std::map<int32_t, Leader> leaders;
  };

  // The coordinator's node for `group`, or the answer a member gets without one.
  template <typename Resp, typename Req, typename Local>
  Result<Resp> Group(kafka::ApiKey api, int16_t version, const std::string& group, Req req,
                     std::chrono::milliseconds timeout, const std::atomic<bool>* cancel,
                     InterBrokerChannel& channel, Local local);
  void SendFetch(int32_t leader, const std::string& host, int32_t port, kafka::FetchRequest req,
                 std::map<Key, int64_t> asked);

  InProcessKafka* const kafka_;
  const std::string principal_;
  const bool cluster_;
  std::shared_ptr<FetchState> fetch_state_ = std::make_shared<FetchState>();
  std::chrono::steady_clock::time_point last_failure_log_{};  // Fetch's thread
  // Partitions that answered an error, asked again from then (Fetch's thread).
  std::map<Key, std::chrono::steady_clock::time_point> partition_retry_at_;
  // Declared last: stopped (their callbacks done) before the state above goes.
  std::unique_ptr<InterBrokerChannel> membership_;  // cluster only
  std::unique_ptr<InterBrokerChannel> offsets_;
  std::unique_ptr<InterBrokerChannel> fetches_;
};

}  // namespace sluice::broker
