#include "broker/group_coordinator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/event_loop.h"
#include "broker/offset_log.h"

namespace sluice::broker {

using kafka::ErrorCode;

namespace {

const Logger kLog("groups");

// Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member's JoinGroup waits at
// most this long in a rebalance (its client cannot heartbeat before it has an id).
constexpr int64_t kNewMemberJoinTimeoutMs = int64_t{5} * 60 * 1000;
// offsets.retention.check.interval.ms: how often Empty groups without offsets are
// forgotten.
constexpr int64_t kCleanupIntervalMs = int64_t{10} * 60 * 1000;
// What a group allows when no authorizer is configured (Kafka's AclOperation codes
// READ 3, DELETE 6, DESCRIBE 8 as a bit field), for DescribeGroups v3+.
constexpr int32_t kGroupOperations = (1 << 3) | (1 << 6) | (1 << 8);

enum class State { kEmpty, kPreparingRebalance, kCompletingRebalance, kStable, kDead };

// The names DescribeGroups and ListGroups report (Kafka's GroupState.toString).
std::string StateName(State s) {
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

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// java.util.UUID.randomUUID().toString(): version 4, lowercase hex, 8-4-4-4-12.
std::string RandomUuidText() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  uint64_t hi = (gen() & ~0xf000ULL) | 0x4000ULL;
  uint64_t lo = (gen() & ~(3ULL << 62)) | (2ULL << 62);
  return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                     hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

// Kafka's JoinGroupResult(memberId, error).
kafka::JoinGroupResponse JoinError(std::string member_id, ErrorCode error) {
  kafka::JoinGroupResponse r;
  r.error_code = error;
  r.member_id = std::move(member_id);
  r.generation_id = -1;
  return r;
}

kafka::SyncGroupResponse SyncError(ErrorCode error) {
  kafka::SyncGroupResponse r;
  r.error_code = error;
  return r;
}

// An OffsetLog callback that only reports failures (writes nobody waits for).
OffsetLog::Done LogIfFailed(std::string what) {
  return [what = std::move(what)](const Status& st) {
    if (!st.ok()) SLUICE_LOG(kLog, kWarn, "{}: {}", what, st.ToString());
  };
}

int64_t NonNegative(int64_t ms) { return std::max<int64_t>(ms, 0); }

}  // namespace

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

// ---------------------------------------------------------------------------------------
// Lifecycle

GroupCoordinator::GroupCoordinator(GroupCoordinatorOptions options)
    : options_(std::move(options)) {}

GroupCoordinator::~GroupCoordinator() {
  Status st = Close();
  if (!st.ok()) SLUICE_LOG(kLog, kWarn, "closing the group coordinator: {}", st.ToString());
}

Result<std::unique_ptr<GroupCoordinator>> GroupCoordinator::Open(GroupCoordinatorOptions options) {
  if (options.executor == nullptr)
    return InvalidArgumentError("group coordinator: no IoExecutor given");
  if (options.min_session_timeout_ms > options.max_session_timeout_ms) {
    return InvalidArgumentError(
        "group.min.session.timeout.ms {} is above group.max.session.timeout.ms {}",
        options.min_session_timeout_ms, options.max_session_timeout_ms);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<EventLoop> loop, EventLoop::Create());
  OffsetLogOptions lo;
  lo.dir = options.dir;
  lo.executor = options.executor;
  lo.files = options.files;
  lo.env = options.env;
  lo.flush_policy = options.flush_policy;
  lo.flush_ms = options.flush_ms;
  ASSIGN_OR_RETURN(std::unique_ptr<OffsetLog> offsets, OffsetLog::Open(lo));

  std::unique_ptr<GroupCoordinator> c(new GroupCoordinator(std::move(options)));
  c->loop_ = std::move(loop);
  c->offsets_ = std::move(offsets);
  // Every group the log knows comes back Empty: members are not persisted (they rejoin),
  // the generation is, so it never goes backwards.
  for (const std::string& id : c->offsets_->GroupIds()) {
    Group& g = c->CreateGroup(id);
    if (const GroupRecord* rec = c->offsets_->Group(id)) {
      g.generation = rec->generation;
      if (!rec->protocol_type.empty()) g.protocol_type = rec->protocol_type;
    }
  }
  SLUICE_LOG(kLog, kInfo, "group coordinator on {}: {} groups loaded", c->options_.dir,
             c->groups_.size());
  c->ScheduleCleanup();  // allowed: the loop does not run yet
  c->thread_ = std::thread([p = c.get()] { p->loop_->Run(); });
  return c;
}

Status GroupCoordinator::Close() {
  std::lock_guard lock(close_mu_);
  if (closed_) return close_status_;
  closed_ = true;
  if (thread_.joinable()) {
    loop_->Post([this] { Shutdown(); });
    thread_.join();
  }
  close_status_ = shutdown_status_;
  return close_status_;
}

// Answers every waiting JoinGroup/SyncGroup, closes the log (pending commits get their
// acks, which are posted here and run before the Stop posted after them), then stops.
void GroupCoordinator::Shutdown() {
  shutting_down_ = true;
  for (auto& [id, g] : groups_) {
    if (g->join_timer != 0) loop_->Cancel(g->join_timer);
    if (g->sync_timer != 0) loop_->Cancel(g->sync_timer);
    for (auto& [pid, timer] : g->pending_members) loop_->Cancel(timer);
    for (auto& [mid, m] : g->members) {
      if (m->heartbeat_timer != 0) loop_->Cancel(m->heartbeat_timer);
      if (m->join_done)
        std::exchange(m->join_done, nullptr)(JoinError(m->id, ErrorCode::kCoordinatorNotAvailable));
      if (m->sync_done)
        std::exchange(m->sync_done, nullptr)(SyncError(ErrorCode::kCoordinatorNotAvailable));
    }
    g->num_awaiting_join = 0;
  }
  shutdown_status_ = offsets_->Close();
  loop_->Post([this] { loop_->Stop(); });
}

// ---------------------------------------------------------------------------------------
// Entry points: each posts to the loop.

void GroupCoordinator::JoinGroup(kafka::JoinGroupRequest req, int16_t version, GroupClient client,
                                 Done<kafka::JoinGroupResponse> done) {
  loop_->Post([this, req = std::move(req), version, client = std::move(client),
               done = std::move(done)]() mutable { DoJoinGroup(req, version, client, done); });
}

void GroupCoordinator::SyncGroup(kafka::SyncGroupRequest req, int16_t version,
                                 Done<kafka::SyncGroupResponse> done) {
  loop_->Post([this, req = std::move(req), version, done = std::move(done)]() mutable {
    DoSyncGroup(req, version, done);
  });
}

void GroupCoordinator::Heartbeat(kafka::HeartbeatRequest req, int16_t /*version*/,
                                 Done<kafka::HeartbeatResponse> done) {
  loop_->Post([this, req = std::move(req), done = std::move(done)] {
    kafka::HeartbeatResponse r;
    r.error_code = DoHeartbeat(req);
    done(std::move(r));
  });
}

void GroupCoordinator::LeaveGroup(kafka::LeaveGroupRequest req, int16_t version,
                                  Done<kafka::LeaveGroupResponse> done) {
  loop_->Post([this, req = std::move(req), version, done = std::move(done)] {
    done(DoLeaveGroup(req, version));
  });
}

void GroupCoordinator::OffsetCommit(kafka::OffsetCommitRequest req, int16_t version,
                                    Done<kafka::OffsetCommitResponse> done) {
  loop_->Post([this, req = std::move(req), version, done = std::move(done)]() mutable {
    DoOffsetCommit(req, version, done);
  });
}

void GroupCoordinator::OffsetFetch(kafka::OffsetFetchRequest req, int16_t version,
                                   Done<kafka::OffsetFetchResponse> done) {
  loop_->Post([this, req = std::move(req), version, done = std::move(done)] {
    done(DoOffsetFetch(req, version));
  });
}

void GroupCoordinator::ListGroups(kafka::ListGroupsRequest req, int16_t /*version*/,
                                  Done<kafka::ListGroupsResponse> done) {
  loop_->Post([this, req = std::move(req), done = std::move(done)] { done(DoListGroups(req)); });
}

void GroupCoordinator::DescribeGroups(kafka::DescribeGroupsRequest req, int16_t version,
                                      Done<kafka::DescribeGroupsResponse> done) {
  loop_->Post([this, req = std::move(req), version, done = std::move(done)] {
    done(DoDescribeGroups(req, version));
  });
}

void GroupCoordinator::DeleteGroups(kafka::DeleteGroupsRequest req, int16_t /*version*/,
                                    Done<kafka::DeleteGroupsResponse> done) {
  loop_->Post([this, req = std::move(req), done = std::move(done)]() mutable {
    DoDeleteGroups(req, done);
  });
}

void GroupCoordinator::OnTopicDeleted(std::string topic) {
  loop_->Post([this, topic = std::move(topic)] { DoTopicDeleted(topic); });
}

// ---------------------------------------------------------------------------------------
// JoinGroup

void GroupCoordinator::DoJoinGroup(kafka::JoinGroupRequest& req, int16_t version,
                                   const GroupClient& client,
                                   Done<kafka::JoinGroupResponse>& done) {
  if (shutting_down_) return done(JoinError(req.member_id, ErrorCode::kCoordinatorNotAvailable));
  if (req.group_id.empty()) return done(JoinError(req.member_id, ErrorCode::kInvalidGroupId));
  if (req.session_timeout_ms < options_.min_session_timeout_ms ||
      req.session_timeout_ms > options_.max_session_timeout_ms) {
    return done(JoinError(req.member_id, ErrorCode::kInvalidSessionTimeout));
  }
  JoinArgs a;
  a.group_id = std::move(req.group_id);
  a.member_id = std::move(req.member_id);
  a.instance_id = std::move(req.group_instance_id);
  a.protocol_type = std::move(req.protocol_type);
  for (auto& p : req.protocols) {
    bool seen = std::any_of(a.protocols.begin(), a.protocols.end(),
                            [&](const auto& q) { return q.first == p.name; });
    if (!seen) a.protocols.emplace_back(std::move(p.name), std::move(p.metadata));
  }
  a.session_timeout_ms = req.session_timeout_ms;
  a.rebalance_timeout_ms = version == 0 ? req.session_timeout_ms : req.rebalance_timeout_ms;
  a.version = version;
  a.client = client;

  const bool unknown_member = a.member_id.empty();
  Group* g = FindGroup(a.group_id);
  if (g == nullptr) {
    // Only a member without an id creates the group.
    if (!unknown_member) return done(JoinError(a.member_id, ErrorCode::kUnknownMemberId));
    g = &CreateGroup(a.group_id);
  }
  if (!AcceptJoiningMember(*g, a.member_id)) {
    RemoveMember(*g, a.member_id);
    done(JoinError("", ErrorCode::kGroupMaxSizeReached));
  } else if (unknown_member) {
    NewMemberJoin(*g, a, done);
  } else {
    CurrentMemberJoin(*g, a, done);
  }
  if (g->Is(State::kPreparingRebalance)) MaybeCompleteJoin(*g);
}

// Kafka's acceptJoiningMember (group.max.size).
bool GroupCoordinator::AcceptJoiningMember(const Group& g, const std::string& member_id) const {
  const Member* m = g.Get(member_id);
  switch (g.state) {
    case State::kEmpty:
    case State::kDead:
      return true;
    case State::kPreparingRebalance:
      // Counting members awaiting join: the last ones to rejoin an oversized group are
      // turned away.
      return (m != nullptr && m->awaiting_join()) || g.num_awaiting_join < options_.max_group_size;
    case State::kCompletingRebalance:
    case State::kStable:
      return m != nullptr || static_cast<int64_t>(g.members.size()) < options_.max_group_size;
  }
  return true;
}

std::unique_ptr<GroupCoordinator::Member> GroupCoordinator::NewMember(const std::string& id,
                                                                      const JoinArgs& a) {
  auto m = std::make_unique<Member>();
  m->id = id;
  m->instance_id = a.instance_id;
  m->client_id = a.client.client_id;
  m->client_host = a.client.host;
  m->rebalance_timeout_ms = a.rebalance_timeout_ms;
  m->session_timeout_ms = a.session_timeout_ms;
  m->protocol_type = a.protocol_type;
  m->protocols = a.protocols;
  return m;
}

void GroupCoordinator::NewMemberJoin(Group& g, JoinArgs& a, Done<kafka::JoinGroupResponse>& done) {
  if (!g.SupportsProtocols(a.protocol_type, a.protocols)) {
    return done(JoinError("", ErrorCode::kInconsistentGroupProtocol));
  }
  // Kafka's generateMemberId: the instance id for static members, else the client id.
  std::string new_id =
      (a.instance_id ? *a.instance_id : a.client.client_id) + "-" + RandomUuidText();
  if (a.instance_id) {
    auto known = g.static_members.find(*a.instance_id);
    if (known != g.static_members.end()) {
      std::string old_id = known->second;
      SLUICE_LOG(kLog, kInfo, "group {}: static member {} rejoins as {}, replacing {}", g.id,
                 *a.instance_id, new_id, old_id);
      return UpdateStaticMemberAndRebalance(g, old_id, new_id, a, std::move(done));
    }
    return AddMemberAndRebalance(g, NewMember(new_id, a), std::move(done));
  }
  if (a.version >= 4) {
    // The client must come back with this id (it then survives a lost response).
    AddPendingMember(g, new_id, a.session_timeout_ms);
    return done(JoinError(new_id, ErrorCode::kMemberIdRequired));
  }
  AddMemberAndRebalance(g, NewMember(new_id, a), std::move(done));
}

void GroupCoordinator::CurrentMemberJoin(Group& g, JoinArgs& a,
                                         Done<kafka::JoinGroupResponse>& done) {
  if (!g.SupportsProtocols(a.protocol_type, a.protocols)) {
    return done(JoinError(a.member_id, ErrorCode::kInconsistentGroupProtocol));
  }
  if (g.pending_members.count(a.member_id) != 0) {
    // Ids from MEMBER_ID_REQUIRED are dynamic; a static member never holds one.
    if (a.instance_id) return done(JoinError(a.member_id, ErrorCode::kUnknownMemberId));
    return AddMemberAndRebalance(g, NewMember(a.member_id, a), std::move(done));
  }
  ErrorCode err = ValidateCurrentMember(g, a.member_id, a.instance_id);
  if (err != ErrorCode::kNone) return done(JoinError(a.member_id, err));
  Member& m = *g.Get(a.member_id);
  switch (g.state) {
    case State::kPreparingRebalance:
      UpdateMember(g, m, a, std::move(done));
      MaybePrepareRebalance(g, fmt::format("member {} joining", m.id));
      return;
    case State::kCompletingRebalance:
      if (m.protocols == a.protocols) {
        // Same metadata (it lost the join response): answer with this generation.
        return done(JoinSuccess(g, m, g.IsLeader(m.id), g.leader));
      }
      UpdateMember(g, m, a, std::move(done));
      MaybePrepareRebalance(g, fmt::format("member {} changed its metadata", m.id));
      return;
    case State::kStable:
      if (g.IsLeader(m.id) || m.protocols != a.protocols) {
        // A leader's rejoin forces a rebalance (it saw a metadata change the members'
        // subscriptions do not show); so does a follower's new metadata.
        UpdateMember(g, m, a, std::move(done));
        MaybePrepareRebalance(g, fmt::format("member {} rejoining", m.id));
        return;
      }
      return done(JoinSuccess(g, m, false, g.leader));
    case State::kEmpty:
    case State::kDead:
      return done(JoinError(a.member_id, ErrorCode::kUnknownMemberId));
  }
}

void GroupCoordinator::AddMemberAndRebalance(Group& g, std::unique_ptr<Member> m,
                                             Done<kafka::JoinGroupResponse> done) {
  m->is_new = true;
  // During the initial delay of a new group each new member extends the wait.
  if (g.Is(State::kPreparingRebalance) && g.generation == 0) g.new_member_added = true;
  Member& ref = AddMember(g, std::move(m), std::move(done));
  ScheduleHeartbeat(g, ref, kNewMemberJoinTimeoutMs);
  MaybePrepareRebalance(g, fmt::format("adding member {}", ref.id));
}

// Kafka's updateStaticMemberAndRebalance: the new id takes over the old member (fencing
// any request still waiting under the old id); in a Stable group with an unchanged
// protocol choice the member gets this generation back without a rebalance.
void GroupCoordinator::UpdateStaticMemberAndRebalance(Group& g, const std::string& old_id,
                                                      const std::string& new_id, JoinArgs& a,
                                                      Done<kafka::JoinGroupResponse> done) {
  const std::optional<std::string> current_leader = g.leader;
  auto it = g.members.find(old_id);
  std::unique_ptr<Member> m = std::move(it->second);
  g.members.erase(it);
  if (m->join_done) {
    --g.num_awaiting_join;
    std::exchange(m->join_done, nullptr)(JoinError(old_id, ErrorCode::kFencedInstanceId));
  }
  if (m->sync_done) std::exchange(m->sync_done, nullptr)(SyncError(ErrorCode::kFencedInstanceId));
  m->id = new_id;
  // Unlike Kafka, a pending SyncGroup expectation moves to the new id (Kafka keeps the
  // old id, so the sync expiry always forces one more rebalance).
  if (g.pending_sync.erase(old_id) != 0) g.pending_sync.insert(new_id);
  if (g.IsLeader(old_id)) g.leader = new_id;
  g.static_members[*a.instance_id] = new_id;
  Member& ref = *m;
  g.members[new_id] = std::move(m);
  ScheduleHeartbeat(g, ref, ref.session_timeout_ms);
  UpdateMember(g, ref, a, std::move(done));

  switch (g.state) {
    case State::kStable: {
      if (g.protocol_name == g.SelectProtocol()) {
        kafka::JoinGroupResponse resp;
        if (a.version >= 9) {
          // The leader learns it leads, but skips the assignment (the group keeps its own).
          const bool is_leader = g.IsLeader(new_id);
          resp = JoinSuccess(g, ref, is_leader, g.leader);
          resp.skip_assignment = is_leader;
        } else {
          // Before v9: the old leader id, so that a returning leader does not assign.
          resp = JoinSuccess(g, ref, false, current_leader);
        }
        --g.num_awaiting_join;
        std::exchange(ref.join_done, nullptr)(std::move(resp));
      } else {
        MaybePrepareRebalance(g,
                              fmt::format("static member {} changed the protocol choice", new_id));
      }
      return;
    }
    case State::kCompletingRebalance:
      // The leader may already be assigning to the old id: start over.
      PrepareRebalance(g,
                       fmt::format("static member {} rejoined during CompletingRebalance", new_id));
      return;
    case State::kPreparingRebalance:
    case State::kEmpty:
    case State::kDead:
      return;  // waits for the join phase with the others
  }
}

void GroupCoordinator::UpdateMember(Group& g, Member& m, JoinArgs& a,
                                    Done<kafka::JoinGroupResponse> done) {
  g.Count(m, -1);
  m.protocols = a.protocols;
  g.Count(m, +1);
  m.rebalance_timeout_ms = a.rebalance_timeout_ms;
  m.session_timeout_ms = a.session_timeout_ms;
  if (m.join_done) {
    // A second JoinGroup for the same member while the first waits (another
    // connection): the first is answered now rather than never (Kafka drops it).
    --g.num_awaiting_join;
    std::exchange(m.join_done, nullptr)(JoinError(m.id, ErrorCode::kRebalanceInProgress));
  }
  if (done) {
    m.join_done = std::move(done);
    ++g.num_awaiting_join;
  }
}

void GroupCoordinator::MaybePrepareRebalance(Group& g, const std::string& reason) {
  if (g.Is(State::kStable) || g.Is(State::kCompletingRebalance) || g.Is(State::kEmpty)) {
    PrepareRebalance(g, reason);
  }
}

void GroupCoordinator::PrepareRebalance(Group& g, const std::string& reason) {
  if (g.Is(State::kCompletingRebalance)) {
    // Members waiting in SyncGroup must rejoin.
    for (auto& [id, m] : g.members) m->assignment.clear();
    PropagateAssignment(g, ErrorCode::kRebalanceInProgress);
  }
  g.pending_sync.clear();
  if (g.sync_timer != 0) {
    loop_->Cancel(g.sync_timer);
    g.sync_timer = 0;
  }
  if (g.join_timer != 0) {
    loop_->Cancel(g.join_timer);
    g.join_timer = 0;
  }
  const bool initial = g.Is(State::kEmpty);
  g.state = State::kPreparingRebalance;
  SLUICE_LOG(kLog, kInfo, "group {}: preparing to rebalance (generation {}): {}", g.id,
             g.generation, reason);
  auto fire = [this, id = g.id, inc = g.incarnation] { OnJoinTimer(id, inc); };
  if (initial) {
    // group.initial.rebalance.delay.ms: wait for more members before the first
    // generation; every new member extends the wait, up to the rebalance timeout.
    g.join_initial = true;
    g.join_delay_ms = NonNegative(options_.initial_rebalance_delay_ms);
    g.join_remaining_ms =
        NonNegative(int64_t{g.RebalanceTimeoutMs()} - options_.initial_rebalance_delay_ms);
    g.join_timer = loop_->RunAfter(g.join_delay_ms, fire);
  } else {
    g.join_initial = false;
    g.join_timer = loop_->RunAfter(NonNegative(g.RebalanceTimeoutMs()), fire);
    MaybeCompleteJoin(g);
  }
}

void GroupCoordinator::MaybeCompleteJoin(Group& g) {
  if (g.Is(State::kPreparingRebalance) && !g.join_initial && g.HasAllMembersJoined())
    CompleteJoin(g);
}

void GroupCoordinator::OnJoinTimer(const std::string& group_id, uint64_t incarnation) {
  if (shutting_down_) return;
  Group* g = FindGroup(group_id);
  if (g == nullptr || g->incarnation != incarnation) return;
  g->join_timer = 0;
  if (!g->Is(State::kPreparingRebalance)) return;
  if (g->join_initial && g->new_member_added && g->join_remaining_ms != 0) {
    g->new_member_added = false;
    const int64_t delay =
        std::min<int64_t>(NonNegative(options_.initial_rebalance_delay_ms), g->join_remaining_ms);
    g->join_remaining_ms = NonNegative(g->join_remaining_ms - g->join_delay_ms);
    g->join_delay_ms = delay;
    g->join_timer =
        loop_->RunAfter(delay, [this, id = g->id, inc = g->incarnation] { OnJoinTimer(id, inc); });
    return;
  }
  CompleteJoin(*g);
}

// Kafka's onCompleteJoin: drop dynamic members that did not rejoin, make sure the leader
// rejoined, start the next generation and answer every waiting JoinGroup.
void GroupCoordinator::CompleteJoin(Group& g) {
  if (g.join_timer != 0) {
    loop_->Cancel(g.join_timer);
    g.join_timer = 0;
  }
  g.join_initial = false;
  std::vector<std::string> gone;
  for (const auto& [id, m] : g.members) {
    if (!m->awaiting_join() && !m->instance_id) gone.push_back(id);
  }
  for (const std::string& id : gone) RemoveMember(g, id);
  if (!gone.empty()) {
    SLUICE_LOG(kLog, kInfo, "group {}: removed {} members that did not rejoin: {}", g.id,
               gone.size(), fmt::join(gone, ", "));
  }

  bool leader_joined = false;
  if (g.leader) {
    const Member* leader = g.Get(*g.leader);
    if (leader != nullptr && leader->awaiting_join()) {
      leader_joined = true;
    } else {
      for (const Member* m : g.Ordered()) {
        if (m->awaiting_join()) {
          g.leader = m->id;
          leader_joined = true;
          break;
        }
      }
    }
  }
  if (!leader_joined && !g.members.empty()) {
    // Only static members that have not rejoined are left: wait another rebalance
    // timeout (their session timeouts remove them meanwhile).
    SLUICE_LOG(kLog, kWarn, "group {}: could not complete the rebalance, no member rejoined", g.id);
    g.join_timer =
        loop_->RunAfter(NonNegative(g.RebalanceTimeoutMs()),
                        [this, id = g.id, inc = g.incarnation] { OnJoinTimer(id, inc); });
    return;
  }

  ++g.generation;
  g.pending_sync.clear();
  if (!g.members.empty()) {
    g.protocol_name = g.SelectProtocol();
    g.state = State::kCompletingRebalance;
  } else {
    g.protocol_name.reset();
    g.state = State::kEmpty;
  }
  PersistGeneration(g);
  if (g.Is(State::kEmpty)) {
    SLUICE_LOG(kLog, kInfo, "group {}: generation {} is empty", g.id, g.generation);
    return;
  }
  SLUICE_LOG(kLog, kInfo, "group {}: generation {} with {} members, protocol {}, leader {}", g.id,
             g.generation, g.members.size(), g.protocol_name.value_or(""), g.leader.value_or(""));
  for (Member* m : g.Ordered()) {
    kafka::JoinGroupResponse resp = JoinSuccess(g, *m, g.IsLeader(m->id), g.leader);
    if (m->join_done) {
      --g.num_awaiting_join;
      std::exchange(m->join_done, nullptr)(std::move(resp));
    }
    ScheduleHeartbeat(g, *m, m->session_timeout_ms);
    m->is_new = false;
    g.pending_sync.insert(m->id);
  }
  SchedulePendingSync(g);
}

kafka::JoinGroupResponse GroupCoordinator::JoinSuccess(
    const Group& g, const Member& m, bool with_members,
    const std::optional<std::string>& leader) const {
  kafka::JoinGroupResponse r;
  r.error_code = ErrorCode::kNone;
  r.generation_id = g.generation;
  r.protocol_type = g.protocol_type;
  r.protocol_name = g.protocol_name;
  r.leader = leader.value_or("");
  r.member_id = m.id;
  if (with_members && g.protocol_name) {
    for (const Member* o : g.Ordered()) {
      kafka::JoinGroupResponse::Member rm;
      rm.member_id = o->id;
      rm.group_instance_id = o->instance_id;
      rm.metadata = o->Metadata(*g.protocol_name);
      r.members.push_back(std::move(rm));
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// SyncGroup

void GroupCoordinator::DoSyncGroup(kafka::SyncGroupRequest& req, int16_t version,
                                   Done<kafka::SyncGroupResponse>& done) {
  if (shutting_down_) return done(SyncError(ErrorCode::kCoordinatorNotAvailable));
  if (req.group_id.empty()) return done(SyncError(ErrorCode::kInvalidGroupId));
  // v5+ must name the protocol type and name (KafkaApis checks this).
  if (version >= 5 && (!req.protocol_type || !req.protocol_name)) {
    return done(SyncError(ErrorCode::kInconsistentGroupProtocol));
  }
  Group* g = FindGroup(req.group_id);
  if (g == nullptr) return done(SyncError(ErrorCode::kUnknownMemberId));
  ErrorCode err = ValidateCurrentMember(*g, req.member_id, req.group_instance_id);
  if (err == ErrorCode::kNone) {
    if (req.generation_id != g->generation) {
      err = ErrorCode::kIllegalGeneration;
    } else if ((req.protocol_type && g->protocol_type != req.protocol_type) ||
               (req.protocol_name && g->protocol_name != req.protocol_name)) {
      err = ErrorCode::kInconsistentGroupProtocol;
    }
  }
  if (err != ErrorCode::kNone) return done(SyncError(err));

  Member& m = *g->Get(req.member_id);
  switch (g->state) {
    case State::kEmpty:
    case State::kDead:
      return done(SyncError(ErrorCode::kUnknownMemberId));
    case State::kPreparingRebalance:
      return done(SyncError(ErrorCode::kRebalanceInProgress));
    case State::kCompletingRebalance: {
      if (m.sync_done)
        std::exchange(m.sync_done, nullptr)(SyncError(ErrorCode::kRebalanceInProgress));
      m.sync_done = std::move(done);
      RemovePendingSyncMember(*g, m.id);
      if (!g->IsLeader(m.id)) return;  // followers wait for the leader's assignment
      std::map<std::string, std::vector<uint8_t>> assignment;
      for (auto& a : req.assignments) assignment[a.member_id] = std::move(a.assignment);
      std::vector<std::string> missing;
      for (const auto& [id, member] : g->members) {
        auto it = assignment.find(id);
        if (it == assignment.end()) {
          missing.push_back(id);
          member->assignment.clear();
        } else {
          member->assignment = std::move(it->second);
        }
      }
      if (!missing.empty()) {
        SLUICE_LOG(kLog, kWarn,
                   "group {} generation {}: no assignment for {}; they get an empty one", g->id,
                   g->generation, fmt::join(missing, ", "));
      }
      SLUICE_LOG(kLog, kInfo, "group {}: assignment for generation {} received from leader {}",
                 g->id, g->generation, m.id);
      PropagateAssignment(*g, ErrorCode::kNone);
      g->state = State::kStable;
      return;
    }
    case State::kStable: {
      RemovePendingSyncMember(*g, m.id);
      kafka::SyncGroupResponse r;
      r.protocol_type = g->protocol_type;
      r.protocol_name = g->protocol_name;
      r.assignment = m.assignment;
      done(std::move(r));
      ScheduleHeartbeat(*g, m, m.session_timeout_ms);
      return;
    }
  }
}

void GroupCoordinator::SchedulePendingSync(Group& g) {
  if (g.sync_timer != 0) loop_->Cancel(g.sync_timer);
  g.sync_timer = loop_->RunAfter(
      NonNegative(g.RebalanceTimeoutMs()),
      [this, id = g.id, inc = g.incarnation, gen = g.generation] { OnSyncExpired(id, inc, gen); });
}

// Members that got this generation's join response but did not send SyncGroup within
// the rebalance timeout are removed, and the group rebalances (Kafka 3's DelayedSync).
void GroupCoordinator::OnSyncExpired(const std::string& group_id, uint64_t incarnation,
                                     int32_t generation) {
  if (shutting_down_) return;
  Group* g = FindGroup(group_id);
  if (g == nullptr || g->incarnation != incarnation) return;
  g->sync_timer = 0;
  if (generation != g->generation) return;
  if (!g->Is(State::kCompletingRebalance) && !g->Is(State::kStable)) return;
  if (g->pending_sync.empty()) return;
  std::vector<std::string> ids(g->pending_sync.begin(), g->pending_sync.end());
  for (const std::string& id : ids) RemoveMember(*g, id);
  PrepareRebalance(*g, fmt::format("members {} sent no SyncGroup in time", fmt::join(ids, ", ")));
}

void GroupCoordinator::RemovePendingSyncMember(Group& g, const std::string& member_id) {
  g.pending_sync.erase(member_id);
  if (g.pending_sync.empty() && g.sync_timer != 0) {
    loop_->Cancel(g.sync_timer);
    g.sync_timer = 0;
  }
}

// Answers every waiting SyncGroup: the member's assignment, or `error`.
void GroupCoordinator::PropagateAssignment(Group& g, ErrorCode error) {
  for (Member* m : g.Ordered()) {
    if (!m->sync_done) continue;
    kafka::SyncGroupResponse r;
    r.error_code = error;
    if (error == ErrorCode::kNone) {
      r.protocol_type = g.protocol_type;
      r.protocol_name = g.protocol_name;
    }
    r.assignment = m->assignment;
    std::exchange(m->sync_done, nullptr)(std::move(r));
    ScheduleHeartbeat(g, *m, m->session_timeout_ms);
  }
}

// ---------------------------------------------------------------------------------------
// Heartbeat, LeaveGroup

ErrorCode GroupCoordinator::DoHeartbeat(const kafka::HeartbeatRequest& req) {
  if (shutting_down_) return ErrorCode::kCoordinatorNotAvailable;
  if (req.group_id.empty()) return ErrorCode::kInvalidGroupId;
  Group* g = FindGroup(req.group_id);
  if (g == nullptr) return ErrorCode::kUnknownMemberId;
  ErrorCode err = ValidateCurrentMember(*g, req.member_id, req.group_instance_id);
  if (err != ErrorCode::kNone) return err;
  if (req.generation_id != g->generation) return ErrorCode::kIllegalGeneration;
  Member& m = *g->Get(req.member_id);
  switch (g->state) {
    case State::kEmpty:
    case State::kDead:
      return ErrorCode::kUnknownMemberId;
    case State::kCompletingRebalance:
    case State::kStable:
      ScheduleHeartbeat(*g, m, m.session_timeout_ms);
      return ErrorCode::kNone;
    case State::kPreparingRebalance:
      ScheduleHeartbeat(*g, m, m.session_timeout_ms);
      return ErrorCode::kRebalanceInProgress;
  }
  return ErrorCode::kNone;
}

kafka::LeaveGroupResponse GroupCoordinator::DoLeaveGroup(const kafka::LeaveGroupRequest& req,
                                                         int16_t version) {
  kafka::LeaveGroupResponse resp;
  std::vector<kafka::LeaveGroupRequest::Member> leaving;
  if (version < 3) {
    kafka::LeaveGroupRequest::Member one;
    one.member_id = req.member_id;
    leaving.push_back(std::move(one));
  } else {
    leaving = req.members;
  }
  if (shutting_down_) {
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
    return resp;
  }
  if (req.group_id.empty()) {
    resp.error_code = ErrorCode::kInvalidGroupId;
    return resp;
  }
  Group* g = FindGroup(req.group_id);
  for (const auto& l : leaving) {
    kafka::LeaveGroupResponse::Member r;
    r.member_id = l.member_id;
    r.group_instance_id = l.group_instance_id;
    const std::string reason =
        fmt::format("member {} left ({})",
                    l.member_id.empty() && l.group_instance_id ? *l.group_instance_id : l.member_id,
                    l.reason.value_or("no reason given"));
    if (g == nullptr) {
      r.error_code = ErrorCode::kUnknownMemberId;
    } else if (l.member_id.empty()) {
      // Removal by group.instance.id alone (the admin API).
      auto s = l.group_instance_id ? g->static_members.find(*l.group_instance_id)
                                   : g->static_members.end();
      if (s == g->static_members.end()) {
        r.error_code = ErrorCode::kUnknownMemberId;
      } else {
        std::string id = s->second;
        RemoveMemberAndUpdateGroup(*g, id, reason);
      }
    } else if (g->pending_members.count(l.member_id) != 0) {
      RemovePendingMemberAndUpdateGroup(*g, l.member_id);
    } else {
      r.error_code = ValidateCurrentMember(*g, l.member_id, l.group_instance_id);
      if (r.error_code == ErrorCode::kNone) RemoveMemberAndUpdateGroup(*g, l.member_id, reason);
    }
    resp.members.push_back(std::move(r));
  }
  if (version < 3) {
    // One member: its error is the response's.
    for (const auto& r : resp.members) {
      if (r.error_code != ErrorCode::kNone) {
        resp.error_code = r.error_code;
        break;
      }
    }
    resp.members.clear();
  }
  return resp;
}

// ---------------------------------------------------------------------------------------
// OffsetCommit, OffsetFetch

namespace {

struct PendingCommit {
  kafka::OffsetCommitResponse resp;
  std::vector<std::pair<size_t, size_t>> written;  // (topic, partition) indexes
  GroupCoordinator::Done<kafka::OffsetCommitResponse> done;

  void Fail(ErrorCode error) {
    for (auto [t, p] : written) resp.topics[t].partitions[p].error_code = error;
  }
};

}  // namespace

ErrorCode GroupCoordinator::ValidateOffsetCommit(
    const Group& g, int32_t generation, const std::string& member_id,
    const std::optional<std::string>& instance_id) const {
  // Generation -1: the admin client or a consumer without group management; allowed
  // while the group has no members.
  if (generation < 0 && g.Is(State::kEmpty)) return ErrorCode::kNone;
  if (generation >= 0 || !member_id.empty() || instance_id) {
    ErrorCode err = ValidateCurrentMember(g, member_id, instance_id);
    if (err != ErrorCode::kNone) return err;
    return generation == g.generation ? ErrorCode::kNone : ErrorCode::kIllegalGeneration;
  }
  // Only members commit to a group with members.
  return g.Is(State::kEmpty) ? ErrorCode::kNone : ErrorCode::kUnknownMemberId;
}

void GroupCoordinator::DoOffsetCommit(kafka::OffsetCommitRequest& req, int16_t version,
                                      Done<kafka::OffsetCommitResponse>& done) {
  auto pending = std::make_shared<PendingCommit>();
  pending->done = std::move(done);
  kafka::OffsetCommitResponse& resp = pending->resp;
  std::vector<std::pair<size_t, size_t>> valid;
  for (size_t t = 0; t < req.topics.size(); ++t) {
    const auto& topic = req.topics[t];
    kafka::OffsetCommitResponse::Topic rt;
    rt.name = topic.name;
    for (size_t p = 0; p < topic.partitions.size(); ++p) {
      kafka::OffsetCommitResponse::Partition rp;
      rp.partition_index = topic.partitions[p].partition_index;
      if (options_.partition_exists && !options_.partition_exists(topic.name, rp.partition_index)) {
        rp.error_code = ErrorCode::kUnknownTopicOrPartition;
      } else {
        valid.emplace_back(t, p);
      }
      rt.partitions.push_back(std::move(rp));
    }
    resp.topics.push_back(std::move(rt));
  }
  auto fail_all = [&](ErrorCode error) {
    for (auto [t, p] : valid) resp.topics[t].partitions[p].error_code = error;
    pending->done(std::move(resp));
  };
  if (shutting_down_) return fail_all(ErrorCode::kCoordinatorNotAvailable);
  if (valid.empty()) return pending->done(std::move(resp));

  const int32_t generation = req.generation_id_or_member_epoch;
  Group* g = FindGroup(req.group_id);
  if (g == nullptr) {
    // A commit with a generation for a group that does not exist comes from an older
    // generation (or a coordinator restart): refused. Without one it creates the group.
    if (generation >= 0) return fail_all(ErrorCode::kIllegalGeneration);
    g = &CreateGroup(req.group_id);
    SLUICE_LOG(kLog, kInfo, "group {} created by a commit without group management", req.group_id);
  }
  ErrorCode err = ValidateOffsetCommit(*g, generation, req.member_id, req.group_instance_id);
  if (err == ErrorCode::kNone) {
    switch (g->state) {
      case State::kCompletingRebalance:
        // The member has its new generation but not its assignment yet.
        err = ErrorCode::kRebalanceInProgress;
        break;
      case State::kStable:
      case State::kPreparingRebalance:
        // Allowed while preparing: the heartbeat tells the member to rejoin.
        if (Member* m = g->Get(req.member_id)) ScheduleHeartbeat(*g, *m, m->session_timeout_ms);
        break;
      case State::kEmpty:
      case State::kDead:
        break;
    }
  }
  if (err != ErrorCode::kNone) return fail_all(err);

  OffsetWrite write;
  const int64_t now = WallMillis();
  for (auto [t, p] : valid) {
    const auto& rp = req.topics[t].partitions[p];
    if (rp.committed_metadata && options_.max_offset_metadata_bytes >= 0 &&
        rp.committed_metadata->size() > static_cast<size_t>(options_.max_offset_metadata_bytes)) {
      resp.topics[t].partitions[p].error_code = ErrorCode::kOffsetMetadataTooLarge;
      continue;
    }
    CommittedOffset value;
    value.offset = rp.committed_offset;
    value.leader_epoch = version >= 6 ? rp.committed_leader_epoch : -1;
    value.metadata = rp.committed_metadata.value_or("");
    // Only v1 carries a client timestamp; -1 there means "now" too.
    value.commit_timestamp_ms =
        version == 1 && rp.commit_timestamp != -1 ? rp.commit_timestamp : now;
    write.Commit(req.group_id, TopicPartition{req.topics[t].name, rp.partition_index},
                 std::move(value));
    pending->written.emplace_back(t, p);
  }
  if (write.empty()) return pending->done(std::move(resp));
  Status st = offsets_->Write(write, [this, pending](const Status& s) {
    loop_->Post([pending, s] {
      if (!s.ok()) {
        SLUICE_LOG(kLog, kWarn, "offset commit not durable: {}", s.ToString());
        pending->Fail(ErrorCode::kCoordinatorNotAvailable);
      }
      pending->done(std::move(pending->resp));
    });
  });
  if (!st.ok()) {
    SLUICE_LOG(kLog, kWarn, "group {}: offset commit refused: {}", req.group_id, st.ToString());
    pending->Fail(st.code() == StatusCode::kInvalidArgument ? ErrorCode::kInvalidCommitOffsetSize
                                                            : ErrorCode::kCoordinatorNotAvailable);
    pending->done(std::move(pending->resp));
    return;
  }
  MaybeSnapshot();
}

kafka::OffsetFetchResponse GroupCoordinator::DoOffsetFetch(const kafka::OffsetFetchRequest& req,
                                                           int16_t version) {
  using Resp = kafka::OffsetFetchResponse;
  // One group's answer: every committed partition (topics null), or the asked ones,
  // -1 / "" for those without a commit (also when the group does not exist).
  auto fetch = [&](const std::string& group,
                   const std::optional<std::vector<kafka::OffsetFetchRequest::Topic>>& topics) {
    std::vector<Resp::Topic> out;
    auto partition = [](int32_t index, const CommittedOffset* v) {
      Resp::Partition p;
      p.partition_index = index;
      p.committed_offset = v ? v->offset : -1;
      p.committed_leader_epoch = v ? v->leader_epoch : -1;
      p.metadata = v ? v->metadata : std::string();
      return p;
    };
    if (!topics) {
      if (const OffsetLog::OffsetMap* offsets = offsets_->Offsets(group)) {
        for (const auto& [tp, v] : *offsets) {
          if (out.empty() || out.back().name != tp.topic) {
            out.emplace_back();
            out.back().name = tp.topic;
          }
          out.back().partitions.push_back(partition(tp.partition, &v));
        }
      }
      return out;
    }
    for (const auto& t : *topics) {
      Resp::Topic rt;
      rt.name = t.name;
      for (int32_t index : t.partition_indexes) {
        rt.partitions.push_back(
            partition(index, offsets_->Find(group, TopicPartition{t.name, index})));
      }
      out.push_back(std::move(rt));
    }
    return out;
  };

  Resp resp;
  if (version >= 8) {
    for (const auto& rg : req.groups) {
      Resp::Group out;
      out.group_id = rg.group_id;
      if (shutting_down_) {
        out.error_code = ErrorCode::kCoordinatorNotAvailable;
      } else {
        out.topics = fetch(rg.group_id, rg.topics);
      }
      resp.groups.push_back(std::move(out));
    }
    return resp;
  }
  if (shutting_down_) {
    if (version >= 2) {
      resp.error_code = ErrorCode::kCoordinatorNotAvailable;
    } else if (req.topics) {
      // v0-1 have no top-level error: every asked partition carries it.
      for (const auto& t : *req.topics) {
        Resp::Topic rt;
        rt.name = t.name;
        for (int32_t index : t.partition_indexes) {
          Resp::Partition p;
          p.partition_index = index;
          p.committed_offset = -1;
          p.metadata = std::string();
          p.error_code = ErrorCode::kCoordinatorNotAvailable;
          rt.partitions.push_back(std::move(p));
        }
        resp.topics.push_back(std::move(rt));
      }
    }
    return resp;
  }
  resp.topics = fetch(req.group_id, req.topics);
  return resp;
}

// ---------------------------------------------------------------------------------------
// ListGroups, DescribeGroups, DeleteGroups, deleted topics

kafka::ListGroupsResponse GroupCoordinator::DoListGroups(const kafka::ListGroupsRequest& req) {
  kafka::ListGroupsResponse resp;
  if (shutting_down_) {
    resp.error_code = ErrorCode::kCoordinatorNotAvailable;
    return resp;
  }
  // Both filters compare without case, as Kafka does; every group here is "classic".
  std::set<std::string> states, types;
  for (const auto& s : req.states_filter) states.insert(Lower(s));
  for (const auto& t : req.types_filter) types.insert(Lower(t));
  if (!types.empty() && types.count("classic") == 0) return resp;
  for (const auto& [id, g] : groups_) {
    std::string state = StateName(g->state);
    if (!states.empty() && states.count(Lower(state)) == 0) continue;
    kafka::ListGroupsResponse::Group out;
    out.group_id = id;
    out.protocol_type = g->protocol_type.value_or("");
    out.group_state = std::move(state);
    out.group_type = "classic";
    resp.groups.push_back(std::move(out));
  }
  return resp;
}

kafka::DescribeGroupsResponse GroupCoordinator::DoDescribeGroups(
    const kafka::DescribeGroupsRequest& req, int16_t version) {
  kafka::DescribeGroupsResponse resp;
  for (const std::string& id : req.groups) {
    kafka::DescribeGroupsResponse::Group out;
    out.group_id = id;
    if (shutting_down_) {
      out.error_code = ErrorCode::kCoordinatorNotAvailable;
      resp.groups.push_back(std::move(out));
      continue;
    }
    const Group* g = FindGroup(id);
    if (g == nullptr) {
      out.group_state = StateName(State::kDead);  // unknown: Dead, no error (before v6)
    } else {
      out.group_state = StateName(g->state);
      out.protocol_type = g->protocol_type.value_or("");
      const bool stable = g->Is(State::kStable) && g->protocol_name;
      // Metadata and assignments only in Stable, as Kafka's GroupMetadata.summary.
      if (stable) out.protocol_data = *g->protocol_name;
      for (const Member* m : g->Ordered()) {
        kafka::DescribeGroupsResponse::Member om;
        om.member_id = m->id;
        om.group_instance_id = m->instance_id;
        om.client_id = m->client_id;
        om.client_host = m->client_host;
        if (stable) {
          om.member_metadata = m->Metadata(*g->protocol_name);
          om.member_assignment = m->assignment;
        }
        out.members.push_back(std::move(om));
      }
    }
    if (version >= 3 && req.include_authorized_operations)
      out.authorized_operations = kGroupOperations;
    resp.groups.push_back(std::move(out));
  }
  return resp;
}

void GroupCoordinator::DoDeleteGroups(const kafka::DeleteGroupsRequest& req,
                                      Done<kafka::DeleteGroupsResponse>& done) {
  auto resp = std::make_shared<kafka::DeleteGroupsResponse>();
  std::set<std::string> seen;
  std::vector<size_t> deleted;
  OffsetWrite write;
  for (const std::string& id : req.groups_names) {
    if (!seen.insert(id).second) continue;
    kafka::DeleteGroupsResponse::GroupResult r;
    r.group_id = id;
    Group* g = shutting_down_ ? nullptr : FindGroup(id);
    if (shutting_down_) {
      r.error_code = ErrorCode::kCoordinatorNotAvailable;
    } else if (g == nullptr) {
      r.error_code = ErrorCode::kGroupIdNotFound;
    } else if (!g->Is(State::kEmpty)) {
      r.error_code = ErrorCode::kNonEmptyGroup;
    } else {
      DropGroup(*g);
      write.DeleteGroup(id);
      deleted.push_back(resp->results.size());
    }
    resp->results.push_back(std::move(r));
  }
  if (write.empty()) return done(std::move(*resp));
  SLUICE_LOG(kLog, kInfo, "deleting {} groups", deleted.size());
  auto answer = [resp, deleted, done = std::move(done)](const Status& st) mutable {
    if (!st.ok()) {
      SLUICE_LOG(kLog, kWarn, "group deletion not durable: {}", st.ToString());
      for (size_t i : deleted) resp->results[i].error_code = ErrorCode::kCoordinatorNotAvailable;
    }
    done(std::move(*resp));
  };
  auto shared_answer = std::make_shared<decltype(answer)>(std::move(answer));
  Status st = offsets_->Write(write, [this, shared_answer](const Status& s) {
    loop_->Post([shared_answer, s] { (*shared_answer)(s); });
  });
  if (!st.ok()) (*shared_answer)(st);
  MaybeSnapshot();
}

void GroupCoordinator::DoTopicDeleted(const std::string& topic) {
  if (shutting_down_) return;
  OffsetWrite write;
  write.DeleteTopic(topic);
  Status st = offsets_->Write(write, LogIfFailed("deleting the offsets of topic " + topic));
  if (!st.ok())
    SLUICE_LOG(kLog, kWarn, "deleting the offsets of topic {}: {}", topic, st.ToString());
  CleanupEmptyGroups("a topic was deleted");
  MaybeSnapshot();
}

// Kafka's cleanupGroupMetadata: an Empty group left without offsets is forgotten, with
// its generation (no member can refer to it).
void GroupCoordinator::CleanupEmptyGroups(const char* why) {
  std::vector<std::string> dropped;
  for (const auto& [id, g] : groups_) {
    if (g->Is(State::kEmpty) && g->pending_members.empty() && !offsets_->HasOffsets(id))
      dropped.push_back(id);
  }
  if (dropped.empty()) return;
  OffsetWrite write;
  for (const std::string& id : dropped) {
    DropGroup(*FindGroup(id));
    if (offsets_->Group(id) != nullptr) write.DeleteGroup(id);
  }
  SLUICE_LOG(kLog, kInfo, "{}: forgetting {} empty groups without offsets", why, dropped.size());
  if (write.empty()) return;
  Status st = offsets_->Write(write, LogIfFailed("forgetting empty groups"));
  if (!st.ok()) SLUICE_LOG(kLog, kWarn, "forgetting empty groups: {}", st.ToString());
}

void GroupCoordinator::ScheduleCleanup() {
  loop_->RunAfter(kCleanupIntervalMs, [this] {
    if (shutting_down_) return;
    CleanupEmptyGroups("periodic cleanup");
    MaybeSnapshot();
    ScheduleCleanup();
  });
}

// ---------------------------------------------------------------------------------------
// Members and groups

GroupCoordinator::Member& GroupCoordinator::AddMember(Group& g, std::unique_ptr<Member> m,
                                                      Done<kafka::JoinGroupResponse> done) {
  if (m->instance_id) g.static_members[*m->instance_id] = m->id;
  if (g.members.empty()) g.protocol_type = m->protocol_type;
  if (!g.leader) g.leader = m->id;
  m->join_seq = next_join_seq_++;
  g.Count(*m, +1);
  if (done) {
    m->join_done = std::move(done);
    ++g.num_awaiting_join;
  }
  auto pending = g.pending_members.find(m->id);
  if (pending != g.pending_members.end()) {
    loop_->Cancel(pending->second);
    g.pending_members.erase(pending);
  }
  Member& ref = *m;
  g.members[ref.id] = std::move(m);
  return ref;
}

// Kafka's GroupMetadata.remove, plus: the member's timers stop, and a request of its
// still waiting is answered UNKNOWN_MEMBER_ID (Kafka answers the JoinGroup so and drops
// a SyncGroup; here every request is answered).
void GroupCoordinator::RemoveMember(Group& g, const std::string& member_id) {
  auto it = g.members.find(member_id);
  if (it != g.members.end()) {
    std::unique_ptr<Member> m = std::move(it->second);
    g.members.erase(it);
    g.Count(*m, -1);
    if (m->instance_id) {
      auto s = g.static_members.find(*m->instance_id);
      if (s != g.static_members.end() && s->second == member_id) g.static_members.erase(s);
    }
    if (m->heartbeat_timer != 0) loop_->Cancel(m->heartbeat_timer);
    if (m->join_done) {
      --g.num_awaiting_join;
      std::exchange(m->join_done, nullptr)(JoinError("", ErrorCode::kUnknownMemberId));
    }
    if (m->sync_done) std::exchange(m->sync_done, nullptr)(SyncError(ErrorCode::kUnknownMemberId));
  }
  if (g.IsLeader(member_id)) {
    auto ordered = g.Ordered();
    g.leader = ordered.empty() ? std::nullopt : std::optional<std::string>(ordered.front()->id);
  }
  auto pending = g.pending_members.find(member_id);
  if (pending != g.pending_members.end()) {
    loop_->Cancel(pending->second);
    g.pending_members.erase(pending);
  }
  g.pending_sync.erase(member_id);
}

void GroupCoordinator::RemoveMemberAndUpdateGroup(Group& g, const std::string& member_id,
                                                  const std::string& reason) {
  RemoveMember(g, member_id);
  switch (g.state) {
    case State::kEmpty:
    case State::kDead:
      return;
    case State::kStable:
    case State::kCompletingRebalance:
      MaybePrepareRebalance(g, reason);
      return;
    case State::kPreparingRebalance:
      MaybeCompleteJoin(g);
      return;
  }
}

void GroupCoordinator::AddPendingMember(Group& g, const std::string& member_id,
                                        int32_t timeout_ms) {
  g.pending_members[member_id] =
      loop_->RunAfter(NonNegative(timeout_ms), [this, id = g.id, inc = g.incarnation, member_id] {
        OnPendingMemberExpired(id, inc, member_id);
      });
}

void GroupCoordinator::OnPendingMemberExpired(const std::string& group_id, uint64_t incarnation,
                                              const std::string& member_id) {
  if (shutting_down_) return;
  Group* g = FindGroup(group_id);
  if (g == nullptr || g->incarnation != incarnation) return;
  if (g->pending_members.erase(member_id) == 0) return;
  SLUICE_LOG(kLog, kInfo, "group {}: pending member {} did not join within its session timeout",
             g->id, member_id);
  if (g->Is(State::kPreparingRebalance)) MaybeCompleteJoin(*g);
}

void GroupCoordinator::RemovePendingMemberAndUpdateGroup(Group& g, const std::string& member_id) {
  RemoveMember(g, member_id);
  if (g.Is(State::kPreparingRebalance)) MaybeCompleteJoin(g);
}

// Every heartbeat, join, sync and commit of a member pushes its session deadline.
void GroupCoordinator::ScheduleHeartbeat(Group& g, Member& m, int64_t timeout_ms) {
  if (m.heartbeat_timer != 0) loop_->Cancel(m.heartbeat_timer);
  m.heartbeat_timer = loop_->RunAfter(NonNegative(timeout_ms),
                                      [this, id = g.id, inc = g.incarnation, member_id = m.id] {
                                        OnHeartbeatExpired(id, inc, member_id);
                                      });
}

// Kafka's onExpireHeartbeat: a member waiting in JoinGroup or SyncGroup is not expired
// (its request is its heartbeat; the rebalance timeout bounds the wait), except a new
// member whose first join has waited kNewMemberJoinTimeoutMs.
void GroupCoordinator::OnHeartbeatExpired(const std::string& group_id, uint64_t incarnation,
                                          const std::string& member_id) {
  if (shutting_down_) return;
  Group* g = FindGroup(group_id);
  if (g == nullptr || g->incarnation != incarnation) return;
  Member* m = g->Get(member_id);
  if (m == nullptr) return;
  m->heartbeat_timer = 0;
  const bool satisfied = !m->is_new && (m->awaiting_join() || m->awaiting_sync());
  if (satisfied) return;
  SLUICE_LOG(kLog, kInfo, "group {}: member {} session timed out, removing it", g->id, member_id);
  RemoveMemberAndUpdateGroup(*g, member_id, fmt::format("member {} session timed out", member_id));
}

// Kafka's validateCurrentMember: a group.instance.id must map to this member id
// (FENCED_INSTANCE_ID when it maps to another), and the member must exist.
ErrorCode GroupCoordinator::ValidateCurrentMember(
    const Group& g, const std::string& member_id,
    const std::optional<std::string>& instance_id) const {
  if (instance_id) {
    auto s = g.static_members.find(*instance_id);
    if (s == g.static_members.end()) return ErrorCode::kUnknownMemberId;
    if (s->second != member_id) return ErrorCode::kFencedInstanceId;
  }
  return g.members.count(member_id) != 0 ? ErrorCode::kNone : ErrorCode::kUnknownMemberId;
}

GroupCoordinator::Group* GroupCoordinator::FindGroup(const std::string& id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second.get();
}

GroupCoordinator::Group& GroupCoordinator::CreateGroup(const std::string& id) {
  auto g = std::make_unique<Group>();
  g->id = id;
  g->incarnation = next_incarnation_++;
  Group& ref = *g;
  groups_[id] = std::move(g);
  return ref;
}

void GroupCoordinator::DropGroup(Group& g) {
  if (g.join_timer != 0) loop_->Cancel(g.join_timer);
  if (g.sync_timer != 0) loop_->Cancel(g.sync_timer);
  for (auto& [id, timer] : g.pending_members) loop_->Cancel(timer);
  std::vector<std::string> ids;
  for (const auto& [id, m] : g.members) ids.push_back(id);
  for (const std::string& id : ids) RemoveMember(g, id);
  groups_.erase(g.id);  // `g` is gone
}

// The generation (with protocol type, protocol and leader) goes to the log at every
// change, without waiting: a commit acknowledged later is behind it in the log, so no
// acknowledged state can refer to a generation a restart would not know.
void GroupCoordinator::PersistGeneration(Group& g) {
  OffsetWrite write;
  write.SetGroup(
      g.id, GroupRecord{g.protocol_type.value_or(""), g.generation, g.protocol_name, g.leader});
  Status st = offsets_->Write(
      write, LogIfFailed(fmt::format("writing generation {} of group {}", g.generation, g.id)));
  if (!st.ok())
    SLUICE_LOG(kLog, kWarn, "group {}: writing generation {}: {}", g.id, g.generation,
               st.ToString());
  MaybeSnapshot();
}

void GroupCoordinator::MaybeSnapshot() {
  if (shutting_down_ || !offsets_->SnapshotDue()) return;
  Status st = offsets_->StartSnapshot([this](const Status& s) {
    loop_->Post([this, s] {
      Status f = offsets_->FinishSnapshot(s);
      if (!f.ok()) SLUICE_LOG(kLog, kWarn, "offsets log snapshot: {}", f.ToString());
    });
  });
  if (!st.ok()) SLUICE_LOG(kLog, kWarn, "offsets log snapshot: {}", st.ToString());
}

}  // namespace sluice::broker
