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
#include "broker/coordinator_partitions.h"
#include "broker/event_loop.h"
#include "broker/group_state.h"
#include "broker/offset_log.h"

namespace sluice::broker {

// ---------------------------------------------------------------------------------------
// Lifecycle

GroupCoordinator::GroupCoordinator(GroupCoordinatorOptions options)
    : options_(std::move(options)) {}

GroupCoordinator::~GroupCoordinator() {
  Status st = Close();
  if (!st.ok()) SLUICE_LOG(kGroupsLog, kWarn, "closing the group coordinator: {}", st.ToString());
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
  std::unique_ptr<OffsetLog> offsets;
  if (!options.replicated) {
    OffsetLogOptions lo;
    lo.dir = options.dir;
    lo.executor = options.executor;
    lo.files = options.files;
    lo.env = options.env;
    lo.flush_policy = options.flush_policy;
    lo.flush_ms = options.flush_ms;
    lo.cleaner = options.cleaner;
    lo.segment_bytes = options.log_segment_bytes;
    ASSIGN_OR_RETURN(offsets, OffsetLog::Open(lo));
  }

  std::unique_ptr<GroupCoordinator> c(new GroupCoordinator(std::move(options)));
  c->loop_ = std::move(loop);
  if (offsets != nullptr) {
    // A single node: one partition, always served.
    c->InstallPartition(0, 0, std::move(offsets));
    SLUICE_LOG(kGroupsLog, kInfo, "group coordinator on {}: {} groups loaded", c->options_.dir,
               c->groups_.size());
  }
  c->gate_->loop = c->loop_.get();
  c->ScheduleCleanup();  // allowed: the loop does not run yet
  c->thread_ = std::thread([p = c.get()] { p->loop_->Run(); });
  return c;
}

Status GroupCoordinator::Close() {
  std::lock_guard lock(close_mu_);
  if (closed_) return close_status_;
  closed_ = true;
  {
    std::lock_guard gate_lock(gate_->mu);
    gate_->loop = nullptr;
  }
  loads_.Close();  // loading threads end; their results are dropped (the gate is shut)
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
  for (auto& [id, g] : groups_) AbandonGroup(*g, ErrorCode::kCoordinatorNotAvailable);
  for (auto& [p, part] : partitions_) {
    if (part.log == nullptr) continue;
    Status st = part.log->Close();
    if (!st.ok() && shutdown_status_.ok()) shutdown_status_ = st;
  }
  loop_->Post([this] { loop_->Stop(); });
}

void GroupCoordinator::AbandonGroup(Group& g, ErrorCode error) {
  if (g.join_timer != 0) loop_->Cancel(g.join_timer);
  if (g.sync_timer != 0) loop_->Cancel(g.sync_timer);
  g.join_timer = 0;
  g.sync_timer = 0;
  for (auto& [pid, timer] : g.pending_members) loop_->Cancel(timer);
  for (auto& [mid, m] : g.members) {
    if (m->heartbeat_timer != 0) loop_->Cancel(m->heartbeat_timer);
    m->heartbeat_timer = 0;
    if (m->join_done) std::exchange(m->join_done, nullptr)(JoinError(m->id, error));
    if (m->sync_done) std::exchange(m->sync_done, nullptr)(SyncError(error));
  }
  g.num_awaiting_join = 0;
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
  if (ErrorCode e = ServingError(req.group_id); e != ErrorCode::kNone) {
    return done(JoinError(req.member_id, e));
  }
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
      SLUICE_LOG(kGroupsLog, kInfo, "group {}: static member {} rejoins as {}, replacing {}", g.id,
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
  g.held.reset();  // a leader's assignment waiting for the generation's record is void
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
  SLUICE_LOG(kGroupsLog, kInfo, "group {}: preparing to rebalance (generation {}): {}", g.id,
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
    SLUICE_LOG(kGroupsLog, kInfo, "group {}: removed {} members that did not rejoin: {}", g.id,
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
    SLUICE_LOG(kGroupsLog, kWarn, "group {}: could not complete the rebalance, no member rejoined",
               g.id);
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
    SLUICE_LOG(kGroupsLog, kInfo, "group {}: generation {} is empty", g.id, g.generation);
    return;
  }
  SLUICE_LOG(kGroupsLog, kInfo, "group {}: generation {} with {} members, protocol {}, leader {}",
             g.id, g.generation, g.members.size(), g.protocol_name.value_or(""),
             g.leader.value_or(""));
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
  if (ErrorCode e = ServingError(req.group_id); e != ErrorCode::kNone) return done(SyncError(e));
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
      SLUICE_LOG(kGroupsLog, kInfo,
                 "group {}: assignment for generation {} received from leader {}", g->id,
                 g->generation, m.id);
      g->held = std::move(assignment);
      MaybeCompleteSync(*g);
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

// Kafka's storeGroup callback: the leader's assignment goes out once the generation's
// record is acknowledged; if its write failed, every waiting member gets the error and
// the group rebalances (resetAndPropagateAssignmentError).
void GroupCoordinator::MaybeCompleteSync(Group& g) {
  if (!g.held || !g.Is(State::kCompletingRebalance)) return;
  if (g.store_error != ErrorCode::kNone) {
    const ErrorCode error = g.store_error;
    g.held.reset();
    SLUICE_LOG(kGroupsLog, kWarn, "group {}: generation {} was not stored (error {}): rebalancing",
               g.id, g.generation, static_cast<int>(error));
    for (auto& [id, m] : g.members) m->assignment.clear();
    PropagateAssignment(g, error);
    MaybePrepareRebalance(g, "the group's record was not stored");
    return;
  }
  if (g.stored != g.generation) return;  // its write is under way
  std::map<std::string, std::vector<uint8_t>> assignment = std::move(*g.held);
  g.held.reset();
  std::vector<std::string> missing;
  for (const auto& [id, member] : g.members) {
    auto it = assignment.find(id);
    if (it == assignment.end()) {
      missing.push_back(id);
      member->assignment.clear();
    } else {
      member->assignment = std::move(it->second);
    }
  }
  if (!missing.empty()) {
    SLUICE_LOG(kGroupsLog, kWarn,
               "group {} generation {}: no assignment for {}; they get an empty one", g.id,
               g.generation, fmt::join(missing, ", "));
  }
  PropagateAssignment(g, ErrorCode::kNone);
  g.state = State::kStable;
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
  if (ErrorCode e = ServingError(req.group_id); e != ErrorCode::kNone) return e;
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
  if (ErrorCode e = ServingError(req.group_id); e != ErrorCode::kNone) {
    resp.error_code = e;
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
  SLUICE_LOG(kGroupsLog, kInfo,
             "group {}: pending member {} did not join within its session timeout", g->id,
             member_id);
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
  SLUICE_LOG(kGroupsLog, kInfo, "group {}: member {} session timed out, removing it", g->id,
             member_id);
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
// change: a commit acknowledged later is behind it in the log, so no acknowledged state
// can refer to a generation a restart would not know. The leader's SyncGroup waits for
// its acknowledgement (MaybeCompleteSync), as Kafka's storeGroup; an Empty generation's
// failure is only logged (Kafka's onCompleteJoin: no member depends on it).
void GroupCoordinator::PersistGeneration(Group& g) {
  g.store_error = ErrorCode::kNone;
  g.held.reset();
  OffsetWrite write;
  write.SetGroup(
      g.id, GroupRecord{g.protocol_type.value_or(""), g.generation, g.protocol_name, g.leader});
  OffsetLog* log = OffsetsOf(g.id);
  if (log == nullptr) {  // its partition is no longer served here
    g.store_error = ErrorCode::kNotCoordinator;
    return;
  }
  auto stored = [this, id = g.id, inc = g.incarnation, gen = g.generation](const Status& st) {
    loop_->Post([this, id, inc, gen, st] {
      if (!st.ok()) {
        SLUICE_LOG(kGroupsLog, kWarn, "group {}: writing generation {}: {}", id, gen,
                   st.ToString());
      }
      Group* g = FindGroup(id);
      if (g == nullptr || g->incarnation != inc || g->generation != gen) return;
      if (st.ok()) {
        g->stored = gen;
      } else {
        g->store_error = GroupStoreError(st);
      }
      MaybeCompleteSync(*g);
    });
  };
  Status st = log->Write(write, std::move(stored));
  if (!st.ok()) {
    SLUICE_LOG(kGroupsLog, kWarn, "group {}: writing generation {}: {}", g.id, g.generation,
               st.ToString());
    g.store_error = st.code() == StatusCode::kInvalidArgument ? ErrorCode::kUnknownServerError
                                                              : GroupStoreError(st);
  }
}

}  // namespace sluice::broker
