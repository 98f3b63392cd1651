// The group coordinator's state as its files share it (internal to src/broker):
// a group's and a member's fields, the group states, and the small helpers the join,
// offsets and admin parts use. Owned by the coordinator's thread, as the coordinator is.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/logging.h"
#include "base/strings.h"
#include "broker/event_loop.h"
#include "broker/group_coordinator.h"
#include "broker/loggers.h"
#include "broker/offset_log.h"

namespace sluice::broker {
namespace group_internal {

using kafka::ErrorCode;

// Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's JoinGroup waits at
// most this long in a rebalance (its client cannot heartbeat before it has an id).
inline constexpr int64_t kNewMemberJoinTimeoutMs = int64_t{5} * 60 * 1000;
// offsets.retention.check.interval.ms: how often Empty groups without offsets are
// forgotten.
inline constexpr int64_t kCleanupIntervalMs = int64_t{10} * 60 * 1000;
// What a group allows when no authorizer is configured (Kafka's AclOperation codes
// READ 3, DELETE 6, DESCRIBE 8 as a bit field), for DescribeGroups v3+.
inline constexpr int32_t kGroupOperations = (1 << 3) | (1 << 6) | (1 << 8);

enum class State { kEmpty, kPreparingRebalance, kCompletingRebalance, kStable, kDead };

// The names DescribeGroups and ListGroups report (Kafka's GroupState.toString).
inline std::string StateName(State s) {
  switch (s) {
    case State::kEmpty:
      return "Empty";
    case State::kPreparingRebalance:
      return "PreparingRebalance";
    case State::kCompletingRebalance:
      return "CompletingRebalance";
    case State::kStable:
      return "Stable";
    case State::kDead:
      return "Dead";
  }
  return "Dead";
}

// java.util.UUID.randomUUID().toString(): version 4, lowercase hex, 8-4-4-4-12.
inline std::string RandomUuidText() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  uint64_t hi = (gen() & ~0xf000ULL) | 0x4000ULL;
  uint64_t lo = (gen() & ~(3ULL << 62)) | (2ULL << 62);
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                     hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

// Kafka's JoinGroupResult(memberId, error).
inline kafka::JoinGroupResponse JoinError(std::string member_id, ErrorCode error) {
  kafka::JoinGroupResponse r;
  r.error_code = error;
  r.member_id = std::move(member_id);
  r.generation_id = -1;
  return r;
}

inline kafka::SyncGroupResponse SyncError(ErrorCode error) {
  kafka::SyncGroupResponse r;
  r.error_code = error;
  return r;
}

// An OffsetLog callback that only reports failures (writes nobody waits for).
inline OffsetLog::Done LogIfFailed(std::string what) {
  return [what = std::move(what)](const Status& st) {
    if (!st.ok()) SLUICE_LOG(kGroupsLog, kWarn, "{}: {}", what, st.ToString());
  };
}

inline int64_t NonNegative(int64_t ms) { return std::max<int64_t>(ms, 0); }

}  // namespace group_internal

using namespace group_internal;  // NOLINT: the coordinator's own files only

// A member's protocols in the client's order of preference, names unique.
using Protocols = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

struct GroupCoordinator::Member {
  std::string id;
  std::optional<std::string> instance_id;
  std::string client_id;
  std::string client_host;
  int32_t rebalance_timeout_ms = 0;
  int32_t session_timeout_ms = 0;
  std::string protocol_type;
  Protocols protocols;
  std::vector<uint8_t> assignment;
  Done<kafka::JoinGroupResponse> join_done;  // set while its JoinGroup waits
  Done<kafka::SyncGroupResponse> sync_done;  // set while its SyncGroup waits
  bool is_new = false;                       // joined and has not yet had a join response
  uint64_t join_seq = 0;                     // join order: the leader is the first member to join
  EventLoop::TimerId heartbeat_timer = 0;

  bool awaiting_join() const { return static_cast<bool>(join_done); }
  bool awaiting_sync() const { return static_cast<bool>(sync_done); }
  const std::vector<uint8_t>& Metadata(const std::string& protocol) const {
    static const std::vector<uint8_t> kNone;
    for (const auto& [name, metadata] : protocols) {
      if (name == protocol) return metadata;
    }
    return kNone;
  }
};

struct GroupCoordinator::Group {
  std::string id;
  uint64_t incarnation = 0;  // tells a re-created group from the one its timers were for
  State state = State::kEmpty;
  int32_t generation = 0;
  std::optional<std::string> protocol_type;
  std::optional<std::string> protocol_name;
  std::optional<std::string> leader;
  std::map<std::string, std::unique_ptr<Member>> members;
  std::map<std::string, std::string> static_members;  // group.instance.id -> member id
  // Ids handed out with MEMBER_ID_REQUIRED, not yet joined, and their expiry timers.
  std::map<std::string, EventLoop::TimerId> pending_members;
  std::set<std::string> pending_sync;  // joined this generation, no SyncGroup yet
  int num_awaiting_join = 0;
  std::map<std::string, int> supported_protocols;  // protocol -> members supporting it
  bool new_member_added = false;                   // Kafka's InitialDelayedJoin extension
  // The join phase's timer: the initial delay (join_initial) or the rebalance timeout.
  EventLoop::TimerId join_timer = 0;
  bool join_initial = false;
  int64_t join_delay_ms = 0;
  int64_t join_remaining_ms = 0;
  EventLoop::TimerId sync_timer = 0;
  // The group record of each generation is written at CompleteJoin; the leader's
  // assignment is handed out only once that write is acknowledged (Kafka's storeGroup at
  // SyncGroup): `stored` is the last generation acknowledged, `store_error` the error of
  // the current generation's write when it failed, and `held` the leader's assignment
  // waiting for it.
  int32_t stored = -1;
  kafka::ErrorCode store_error = kafka::ErrorCode::kNone;
  std::optional<std::map<std::string, std::vector<uint8_t>>> held;

  bool Is(State s) const { return state == s; }
  Member* Get(const std::string& member_id) const {
    auto it = members.find(member_id);
    return it == members.end() ? nullptr : it->second.get();
  }
  bool IsLeader(const std::string& member_id) const { return leader && *leader == member_id; }
  std::vector<Member*> Ordered() const {
    std::vector<Member*> out;
    out.reserve(members.size());
    for (const auto& [id, m] : members) out.push_back(m.get());
    std::sort(out.begin(), out.end(),
              [](const Member* a, const Member* b) { return a->join_seq < b->join_seq; });
    return out;
  }
  int32_t RebalanceTimeoutMs() const {
    int32_t t = 0;
    for (const auto& [id, m] : members) t = std::max(t, m->rebalance_timeout_ms);
    return t;
  }
  bool HasAllMembersJoined() const {
    return static_cast<int>(members.size()) == num_awaiting_join && pending_members.empty();
  }
  void Count(const Member& m, int delta) {
    for (const auto& [name, metadata] : m.protocols) supported_protocols[name] += delta;
  }
  int Supporters(const std::string& protocol) const {
    auto it = supported_protocols.find(protocol);
    return it == supported_protocols.end() ? 0 : it->second;
  }
  bool SupportsProtocols(const std::string& type, const Protocols& protocols) const {
    if (Is(State::kEmpty)) return !type.empty() && !protocols.empty();
    if (protocol_type != type) return false;
    for (const auto& [name, metadata] : protocols) {
      if (Supporters(name) == static_cast<int>(members.size())) return true;
    }
    return false;
  }
  // Kafka's selectProtocol: among the protocols every member supports, each member votes
  // for its first; the most votes wins (ties: the earliest vote in join order).
  std::string SelectProtocol() const {
    std::vector<std::pair<std::string, int>> votes;
    for (const Member* m : Ordered()) {
      for (const auto& protocol : m->protocols) {
        const std::string& name = protocol.first;
        if (Supporters(name) != static_cast<int>(members.size())) continue;
        auto it = std::find_if(votes.begin(), votes.end(),
                               [&](const auto& v) { return v.first == name; });
        if (it == votes.end()) {
          votes.emplace_back(name, 1);
        } else {
          ++it->second;
        }
        break;
      }
    }
    if (votes.empty()) {
      // Cannot happen while joins check SupportsProtocols; stay defined anyway.
      auto ordered = Ordered();
      return ordered.empty() || ordered.front()->protocols.empty()
                 ? std::string()
                 : ordered.front()->protocols.front().first;
    }
    auto best = votes.begin();
    for (auto it = votes.begin(); it != votes.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    return best->first;
  }
};

// One JoinGroup, as the join phase needs it.
struct GroupCoordinator::JoinArgs {
  std::string group_id;
  std::string member_id;
  std::optional<std::string> instance_id;
  std::string protocol_type;
  Protocols protocols;
  int32_t session_timeout_ms = 0;
  int32_t rebalance_timeout_ms = 0;
  int16_t version = 0;
  GroupClient client;
};

}  // namespace sluice::broker
