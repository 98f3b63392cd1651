// GroupCoordinator driven directly with request structs: the classic rebalance protocol
// (join, sync, heartbeats, leaves, session timeouts, static membership), offset commits
// and fetches, group listing, description and deletion, and what survives a reopen.
#include "broker/group_coordinator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "broker/offset_log.h"
#include "broker/tests/group_coordinator_fixture.h"
#include "kafka/protocol/records.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace group_coordinator_test {
namespace {

// -----------------------------------------------------------------------------------------
// Join, sync, heartbeat

TEST_F(GroupCoordinatorTest, SingleMemberJoinsSyncsAndHeartbeats) {
  Open();
  auto join = JoinNewAsync(JoinSpec{})->Get();
  ASSERT_EQ(join.error_code, ErrorCode::kNone);
  EXPECT_EQ(join.generation_id, 1);
  EXPECT_EQ(join.leader, join.member_id);
  EXPECT_EQ(join.protocol_type, "consumer");
  EXPECT_EQ(join.protocol_name, "range");
  ASSERT_EQ(join.members.size(), 1u);
  EXPECT_EQ(join.members[0].member_id, join.member_id);
  EXPECT_EQ(join.members[0].metadata, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(Heartbeat("g", join.member_id, 1), ErrorCode::kNone);  // CompletingRebalance: NONE

  auto sync = Sync("g", join.member_id, 1, {{join.member_id, {9, 9}}});
  ASSERT_EQ(sync.error_code, ErrorCode::kNone);
  EXPECT_EQ(sync.assignment, (std::vector<uint8_t>{9, 9}));
  EXPECT_EQ(sync.protocol_type, "consumer");
  EXPECT_EQ(sync.protocol_name, "range");
  EXPECT_EQ(Heartbeat("g", join.member_id, 1), ErrorCode::kNone);

  auto d = Describe("g");
  EXPECT_EQ(d.error_code, ErrorCode::kNone);
  EXPECT_EQ(d.group_state, "Stable");
  EXPECT_EQ(d.protocol_type, "consumer");
  EXPECT_EQ(d.protocol_data, "range");
  ASSERT_EQ(d.members.size(), 1u);
  EXPECT_EQ(d.members[0].member_id, join.member_id);
  EXPECT_EQ(d.members[0].client_id, "client");
  EXPECT_EQ(d.members[0].client_host, "/127.0.0.1");
  EXPECT_EQ(d.members[0].member_metadata, (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(d.members[0].member_assignment, (std::vector<uint8_t>{9, 9}));

  // A sync after the group is Stable returns the stored assignment.
  auto again = Sync("g", join.member_id, 1);
  EXPECT_EQ(again.error_code, ErrorCode::kNone);
  EXPECT_EQ(again.assignment, (std::vector<uint8_t>{9, 9}));
}

TEST_F(GroupCoordinatorTest, MemberIdRequiredFromV4WithAGeneratedId) {
  Open();
  JoinSpec s;
  s.version = 4;
  s.client_id = "rdkafka";
  auto first = Join(s);
  EXPECT_EQ(first.error_code, ErrorCode::kMemberIdRequired);
  EXPECT_EQ(first.generation_id, -1);
  EXPECT_TRUE(first.members.empty());
  EXPECT_TRUE(std::regex_match(
      first.member_id,
      std::regex("rdkafka-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << first.member_id;
  s.member_id = first.member_id;
  auto join = Join(s);
  EXPECT_EQ(join.error_code, ErrorCode::kNone);
  EXPECT_EQ(join.member_id, first.member_id);

  // v3 and earlier join at once.
  JoinSpec old;
  old.group = "g-old";
  old.version = 3;
  auto direct = Join(old);
  EXPECT_EQ(direct.error_code, ErrorCode::kNone);
  EXPECT_EQ(direct.generation_id, 1);
  EXPECT_FALSE(direct.member_id.empty());
}

TEST_F(GroupCoordinatorTest, TwoMembersLeaderGetsMembersFollowerGetsNone) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 200;
  Open(o);
  JoinSpec a;
  a.client_id = "a";
  JoinSpec b;
  b.client_id = "b";
  b.protocols = {{"roundrobin", {5}}, {"range", {6}}};
  auto ja = JoinNewAsync(a);
  auto jb = JoinNewAsync(b);
  auto ra = ja->Get();
  auto rb = jb->Get();
  ASSERT_EQ(ra.error_code, ErrorCode::kNone);
  ASSERT_EQ(rb.error_code, ErrorCode::kNone);
  EXPECT_EQ(ra.generation_id, 1);
  EXPECT_EQ(rb.generation_id, 1);
  EXPECT_EQ(ra.leader, ra.member_id);  // the first to join leads
  EXPECT_EQ(rb.leader, ra.member_id);
  // Both vote for their first protocol both support; "range" is a's only one.
  EXPECT_EQ(ra.protocol_name, "range");
  ASSERT_EQ(ra.members.size(), 2u);
  EXPECT_EQ(ra.members[0].member_id, ra.member_id);
  EXPECT_EQ(ra.members[1].member_id, rb.member_id);
  EXPECT_EQ(ra.members[1].metadata, (std::vector<uint8_t>{6}));  // b's metadata for "range"
  EXPECT_TRUE(rb.members.empty());

  // The follower's SyncGroup waits for the leader's.
  auto sb = SyncAsync("g", rb.member_id, 1);
  EXPECT_FALSE(sb->ReadyWithin(100ms));
  EXPECT_EQ(Describe("g").group_state, "CompletingRebalance");
  auto sa = Sync("g", ra.member_id, 1, {{ra.member_id, {1}}, {rb.member_id, {2}}});
  EXPECT_EQ(sa.error_code, ErrorCode::kNone);
  EXPECT_EQ(sa.assignment, (std::vector<uint8_t>{1}));
  auto rsb = sb->Get();
  EXPECT_EQ(rsb.error_code, ErrorCode::kNone);
  EXPECT_EQ(rsb.assignment, (std::vector<uint8_t>{2}));
  EXPECT_EQ(Describe("g").group_state, "Stable");
}

TEST_F(GroupCoordinatorTest, MemberLeftOutOfTheAssignmentGetsEmptyBytes) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 200;
  Open(o);
  auto ja = JoinNewAsync(JoinSpec{});
  auto jb = JoinNewAsync(JoinSpec{});
  auto ra = ja->Get();
  auto rb = jb->Get();
  auto sb = SyncAsync("g", rb.member_id, 1);
  auto sa = Sync("g", ra.member_id, 1, {{ra.member_id, {1}}});
  EXPECT_EQ(sa.error_code, ErrorCode::kNone);
  auto rsb = sb->Get();
  EXPECT_EQ(rsb.error_code, ErrorCode::kNone);
  EXPECT_TRUE(rsb.assignment.empty());
}

TEST_F(GroupCoordinatorTest, ThirdMemberMakesOthersRebalance) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 200;
  Open(o);
  auto ja = JoinNewAsync(JoinSpec{});
  auto jb = JoinNewAsync(JoinSpec{});
  auto ra = ja->Get();
  auto rb = jb->Get();
  auto sb = SyncAsync("g", rb.member_id, 1);
  ASSERT_EQ(Sync("g", ra.member_id, 1, {{ra.member_id, {1}}, {rb.member_id, {2}}}).error_code,
            ErrorCode::kNone);
  ASSERT_EQ(sb->Get().error_code, ErrorCode::kNone);

  auto jc = JoinNewAsync(JoinSpec{});
  EXPECT_FALSE(jc->ReadyWithin(100ms));  // waits for a and b to rejoin
  EXPECT_EQ(Describe("g").group_state, "PreparingRebalance");
  EXPECT_EQ(Heartbeat("g", ra.member_id, 1), ErrorCode::kRebalanceInProgress);
  EXPECT_EQ(Heartbeat("g", rb.member_id, 1), ErrorCode::kRebalanceInProgress);
  // Commits are still taken while preparing (Kafka 3); the heartbeat tells to rejoin.
  EXPECT_EQ(Commit("g", ra.member_id, 1, {{"t", 0, 5}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);

  JoinSpec again;
  again.member_id = ra.member_id;
  auto ja2 = JoinAsync(again);
  again.member_id = rb.member_id;
  auto jb2 = JoinAsync(again);
  auto ra2 = ja2->Get();
  auto rb2 = jb2->Get();
  auto rc = jc->Get();
  for (const auto* r : {&ra2, &rb2, &rc}) {
    EXPECT_EQ(r->error_code, ErrorCode::kNone);
    EXPECT_EQ(r->generation_id, 2);
    EXPECT_EQ(r->leader, ra.member_id);
  }
  EXPECT_EQ(ra2.members.size(), 3u);
  EXPECT_TRUE(rb2.members.empty());
  EXPECT_TRUE(rc.members.empty());
  // The old generation is gone.
  EXPECT_EQ(Heartbeat("g", ra.member_id, 1), ErrorCode::kIllegalGeneration);
  EXPECT_EQ(Sync("g", rb.member_id, 1).error_code, ErrorCode::kIllegalGeneration);
  // A commit with the right generation before the assignment: REBALANCE_IN_PROGRESS.
  EXPECT_EQ(Commit("g", rb.member_id, 2, {{"t", 0, 6}}).topics[0].partitions[0].error_code,
            ErrorCode::kRebalanceInProgress);
}

TEST_F(GroupCoordinatorTest, SilentMemberIsExpelledAfterItsSessionTimeout) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 200;
  Open(o);
  JoinSpec a;
  a.session_ms = 5000;
  JoinSpec b;
  b.session_ms = 300;
  auto ja = JoinNewAsync(a);
  auto jb = JoinNewAsync(b);
  auto ra = ja->Get();
  auto rb = jb->Get();
  auto sb = SyncAsync("g", rb.member_id, 1);
  ASSERT_EQ(Sync("g", ra.member_id, 1, {{ra.member_id, {1}}, {rb.member_id, {2}}}).error_code,
            ErrorCode::kNone);
  ASSERT_EQ(sb->Get().error_code, ErrorCode::kNone);

  // a keeps heartbeating, b goes silent.
  ErrorCode hb = ErrorCode::kNone;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (hb == ErrorCode::kNone && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    hb = Heartbeat("g", ra.member_id, 1);
  }
  EXPECT_EQ(hb, ErrorCode::kRebalanceInProgress);
  EXPECT_EQ(Heartbeat("g", rb.member_id, 1), ErrorCode::kUnknownMemberId);
  JoinSpec again = a;
  again.member_id = ra.member_id;
  auto ra2 = Join(again);
  EXPECT_EQ(ra2.error_code, ErrorCode::kNone);
  EXPECT_EQ(ra2.generation_id, 2);
  ASSERT_EQ(ra2.members.size(), 1u);
  EXPECT_EQ(ra2.members[0].member_id, ra.member_id);
}

TEST_F(GroupCoordinatorTest, MemberThatDoesNotRejoinIsDroppedAtTheRebalanceTimeout) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 200;
  Open(o);
  JoinSpec s;
  s.rebalance_ms = 400;
  auto ja = JoinNewAsync(s);
  auto jb = JoinNewAsync(s);
  auto ra = ja->Get();
  auto rb = jb->Get();
  auto sb = SyncAsync("g", rb.member_id, 1);
  ASSERT_EQ(Sync("g", ra.member_id, 1, {{ra.member_id, {1}}, {rb.member_id, {2}}}).error_code,
            ErrorCode::kNone);
  ASSERT_EQ(sb->Get().error_code, ErrorCode::kNone);
  // The leader rejoins (forcing a rebalance); b never does.
  JoinSpec again = s;
  again.member_id = ra.member_id;
  auto start = std::chrono::steady_clock::now();
  auto ra2 = Join(again);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 350ms);
  EXPECT_EQ(ra2.error_code, ErrorCode::kNone);
  EXPECT_EQ(ra2.generation_id, 2);
  ASSERT_EQ(ra2.members.size(), 1u);
  EXPECT_EQ(Heartbeat("g", rb.member_id, 1), ErrorCode::kUnknownMemberId);
}

TEST_F(GroupCoordinatorTest, PendingMemberThatNeverJoinsExpiresAfterItsSessionTimeout) {
  Open();
  std::string a = StableSingleMember();
  JoinSpec pending;
  pending.session_ms = 300;
  ASSERT_EQ(Join(pending).error_code, ErrorCode::kMemberIdRequired);  // never comes back
  // The leader's rejoin starts a rebalance that waits for the pending id to expire.
  JoinSpec again;
  again.member_id = a;
  auto start = std::chrono::steady_clock::now();
  auto r = Join(again);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_EQ(r.error_code, ErrorCode::kNone);
  EXPECT_EQ(r.generation_id, 2);
  EXPECT_EQ(r.members.size(), 1u);
}

TEST_F(GroupCoordinatorTest, LastMemberTimingOutLeavesTheGroupEmpty) {
  Open();
  JoinSpec s;
  s.session_ms = 200;
  auto join = JoinNewAsync(s)->Get();
  ASSERT_EQ(Sync("g", join.member_id, 1, {{join.member_id, {1}}}).error_code, ErrorCode::kNone);
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (Describe("g").group_state != "Empty" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(Describe("g").group_state, "Empty");
  EXPECT_EQ(Heartbeat("g", join.member_id, 1), ErrorCode::kUnknownMemberId);
  // The generation moved on to 2 when the group emptied: the next one is 3.
  auto next = JoinNewAsync(JoinSpec{})->Get();
  EXPECT_EQ(next.generation_id, 3);
}

TEST_F(GroupCoordinatorTest, LeaveTriggersARebalance) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 200;
  Open(o);
  auto ja = JoinNewAsync(JoinSpec{});
  auto jb = JoinNewAsync(JoinSpec{});
  auto ra = ja->Get();
  auto rb = jb->Get();
  auto sb = SyncAsync("g", rb.member_id, 1);
  ASSERT_EQ(Sync("g", ra.member_id, 1, {{ra.member_id, {1}}, {rb.member_id, {2}}}).error_code,
            ErrorCode::kNone);
  ASSERT_EQ(sb->Get().error_code, ErrorCode::kNone);

  auto leave = Leave("g", {{rb.member_id, std::nullopt}, {"nobody", std::nullopt}});
  EXPECT_EQ(leave.error_code, ErrorCode::kNone);
  ASSERT_EQ(leave.members.size(), 2u);
  EXPECT_EQ(leave.members[0].member_id, rb.member_id);
  EXPECT_EQ(leave.members[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(leave.members[1].error_code, ErrorCode::kUnknownMemberId);
  EXPECT_EQ(Heartbeat("g", ra.member_id, 1), ErrorCode::kRebalanceInProgress);
  JoinSpec again;
  again.member_id = ra.member_id;
  auto ra2 = Join(again);
  EXPECT_EQ(ra2.generation_id, 2);
  EXPECT_EQ(ra2.members.size(), 1u);
  ASSERT_EQ(Sync("g", ra.member_id, 2, {{ra.member_id, {1}}}).error_code, ErrorCode::kNone);

  // v0-2 carry one member and answer with a top-level error.
  EXPECT_EQ(Leave("g", {{"nobody", std::nullopt}}, 1).error_code, ErrorCode::kUnknownMemberId);
  auto last = Leave("g", {{ra.member_id, std::nullopt}}, 1);
  EXPECT_EQ(last.error_code, ErrorCode::kNone);
  EXPECT_TRUE(last.members.empty());
  EXPECT_EQ(Describe("g").group_state, "Empty");
  EXPECT_EQ(Leave("unknown-group", {{"x", std::nullopt}}).members.at(0).error_code,
            ErrorCode::kUnknownMemberId);
}

TEST_F(GroupCoordinatorTest, StaticMemberRejoinReplacesAndFencesTheOldId) {
  Open();
  JoinSpec s;
  s.instance = "instance-a";
  s.version = 5;
  auto first = Join(s);  // static members never get MEMBER_ID_REQUIRED
  ASSERT_EQ(first.error_code, ErrorCode::kNone);
  EXPECT_EQ(first.member_id.rfind("instance-a-", 0), 0u) << first.member_id;
  ASSERT_EQ(first.members.size(), 1u);
  EXPECT_EQ(first.members[0].group_instance_id, "instance-a");
  ASSERT_EQ(Sync("g", first.member_id, 1, {{first.member_id, {4, 2}}}, "instance-a").error_code,
            ErrorCode::kNone);
  ASSERT_EQ(Commit("g", first.member_id, 1, {{"t", 0, 10}}, 8, "instance-a")
                .topics[0]
                .partitions[0]
                .error_code,
            ErrorCode::kNone);

  // The instance restarts: same instance id, no member id. Stable and the same protocol:
  // no rebalance, the same generation, and (before v9) the old leader id.
  auto second = Join(s);
  ASSERT_EQ(second.error_code, ErrorCode::kNone);
  EXPECT_NE(second.member_id, first.member_id);
  EXPECT_EQ(second.generation_id, 1);
  EXPECT_EQ(second.leader, first.member_id);
  EXPECT_TRUE(second.members.empty());
  EXPECT_EQ(Describe("g").group_state, "Stable");
  auto sync = Sync("g", second.member_id, 1, {}, "instance-a");
  EXPECT_EQ(sync.error_code, ErrorCode::kNone);
  EXPECT_EQ(sync.assignment, (std::vector<uint8_t>{4, 2}));

  // The old incarnation is fenced wherever it shows up with its instance id.
  EXPECT_EQ(Heartbeat("g", first.member_id, 1, "instance-a"), ErrorCode::kFencedInstanceId);
  EXPECT_EQ(Sync("g", first.member_id, 1, {}, "instance-a").error_code,
            ErrorCode::kFencedInstanceId);
  EXPECT_EQ(Commit("g", first.member_id, 1, {{"t", 0, 11}}, 8, "instance-a")
                .topics[0]
                .partitions[0]
                .error_code,
            ErrorCode::kFencedInstanceId);
  JoinSpec old = s;
  old.member_id = first.member_id;
  EXPECT_EQ(Join(old).error_code, ErrorCode::kFencedInstanceId);
  auto leave = Leave("g", {{first.member_id, std::string("instance-a")}});
  EXPECT_EQ(leave.members.at(0).error_code, ErrorCode::kFencedInstanceId);
  // An unknown instance id: UNKNOWN_MEMBER_ID.
  EXPECT_EQ(Heartbeat("g", second.member_id, 1, "instance-b"), ErrorCode::kUnknownMemberId);
  EXPECT_EQ(Heartbeat("g", second.member_id, 1, "instance-a"), ErrorCode::kNone);

  // v9: the returning leader learns it leads but skips the assignment.
  JoinSpec v9 = s;
  v9.version = 9;
  auto third = Join(v9);
  ASSERT_EQ(third.error_code, ErrorCode::kNone);
  EXPECT_EQ(third.generation_id, 1);
  EXPECT_EQ(third.leader, third.member_id);
  EXPECT_TRUE(third.skip_assignment);
  EXPECT_EQ(third.members.size(), 1u);

  // Removal by instance id alone (the admin API).
  auto removed = Leave("g", {{"", std::string("instance-a")}});
  EXPECT_EQ(removed.members.at(0).error_code, ErrorCode::kNone);
  EXPECT_EQ(Describe("g").group_state, "Empty");
}

TEST_F(GroupCoordinatorTest, StaticMemberReplacedWhileWaitingIsFenced) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 300;
  Open(o);
  JoinSpec s;
  s.instance = "i";
  s.version = 5;
  auto waiting = JoinAsync(s);  // waits out the initial delay
  std::this_thread::sleep_for(50ms);
  auto replacement = JoinAsync(s);
  auto fenced = waiting->Get();
  EXPECT_EQ(fenced.error_code, ErrorCode::kFencedInstanceId);
  auto joined = replacement->Get();
  EXPECT_EQ(joined.error_code, ErrorCode::kNone);
  EXPECT_EQ(joined.generation_id, 1);
  EXPECT_NE(joined.member_id, fenced.member_id);
}

TEST_F(GroupCoordinatorTest, IllegalGenerationAndUnknownMemberAnswers) {
  Open();
  std::string m = StableSingleMember();
  EXPECT_EQ(Heartbeat("g", m, 7), ErrorCode::kIllegalGeneration);
  EXPECT_EQ(Heartbeat("g", "stranger", 1), ErrorCode::kUnknownMemberId);
  EXPECT_EQ(Heartbeat("nope", m, 1), ErrorCode::kUnknownMemberId);
  EXPECT_EQ(Sync("g", m, 7).error_code, ErrorCode::kIllegalGeneration);
  EXPECT_EQ(Sync("g", "stranger", 1).error_code, ErrorCode::kUnknownMemberId);
  EXPECT_EQ(Sync("nope", m, 1).error_code, ErrorCode::kUnknownMemberId);
  EXPECT_EQ(Commit("g", m, 7, {{"t", 0, 1}}).topics[0].partitions[0].error_code,
            ErrorCode::kIllegalGeneration);
  EXPECT_EQ(Commit("g", "stranger", 1, {{"t", 0, 1}}).topics[0].partitions[0].error_code,
            ErrorCode::kUnknownMemberId);
  // A generation for a group that does not exist: an older generation's commit.
  EXPECT_EQ(Commit("nope", m, 1, {{"t", 0, 1}}).topics[0].partitions[0].error_code,
            ErrorCode::kIllegalGeneration);
  // Only members commit to a group with members.
  EXPECT_EQ(CommitStandalone("g", {{"t", 0, 1}}).topics[0].partitions[0].error_code,
            ErrorCode::kUnknownMemberId);
  JoinSpec stranger;
  stranger.member_id = "stranger";
  EXPECT_EQ(Join(stranger).error_code, ErrorCode::kUnknownMemberId);
  stranger.group = "nope";
  EXPECT_EQ(Join(stranger).error_code, ErrorCode::kUnknownMemberId);
  EXPECT_EQ(Describe("nope").group_state, "Dead");  // the failed join created nothing
  // v5 SyncGroup with a protocol that is not the group's.
  kafka::SyncGroupRequest bad;
  bad.group_id = "g";
  bad.generation_id = 1;
  bad.member_id = m;
  bad.protocol_type = "consumer";
  bad.protocol_name = "roundrobin";
  Pending<kafka::SyncGroupResponse> p;
  coord_->SyncGroup(bad, 5, p.Callback());
  EXPECT_EQ(p.Get().error_code, ErrorCode::kInconsistentGroupProtocol);
}

TEST_F(GroupCoordinatorTest, InvalidJoinsAreRefused) {
  Open();
  JoinSpec s;
  s.group = "";
  EXPECT_EQ(Join(s).error_code, ErrorCode::kInvalidGroupId);
  EXPECT_EQ(Heartbeat("", "m", 1), ErrorCode::kInvalidGroupId);
  EXPECT_EQ(Sync("", "m", 1).error_code, ErrorCode::kInvalidGroupId);
  EXPECT_EQ(Leave("", {{"m", std::nullopt}}).error_code, ErrorCode::kInvalidGroupId);
  s.group = "g";
  s.session_ms = 5;
  EXPECT_EQ(Join(s).error_code, ErrorCode::kInvalidSessionTimeout);
  s.session_ms = 60001;
  EXPECT_EQ(Join(s).error_code, ErrorCode::kInvalidSessionTimeout);
  s.session_ms = 10000;
  s.protocol_type = "";
  EXPECT_EQ(Join(s).error_code, ErrorCode::kInconsistentGroupProtocol);
  s.protocol_type = "consumer";
  s.protocols = {};
  EXPECT_EQ(Join(s).error_code, ErrorCode::kInconsistentGroupProtocol);

  StableSingleMember("g2");
  JoinSpec other;
  other.group = "g2";
  other.protocol_type = "connect";
  // Checked before a member id is handed out.
  EXPECT_EQ(Join(other).error_code, ErrorCode::kInconsistentGroupProtocol);
  JoinSpec no_common;
  no_common.group = "g2";
  no_common.protocols = {{"sticky", {1}}};
  EXPECT_EQ(Join(no_common).error_code, ErrorCode::kInconsistentGroupProtocol);
}

TEST_F(GroupCoordinatorTest, GroupMaxSizeRefusesTheExtraMember) {
  auto o = Options();
  o.max_group_size = 1;
  Open(o);
  StableSingleMember();
  JoinSpec s;
  s.version = 3;
  auto r = Join(s);
  EXPECT_EQ(r.error_code, ErrorCode::kGroupMaxSizeReached);
  EXPECT_EQ(Describe("g").members.size(), 1u);
}

// -----------------------------------------------------------------------------------------
// Offsets

TEST_F(GroupCoordinatorTest, OffsetCommitAndFetchRoundTrip) {
  Open();
  std::string m = StableSingleMember();
  auto c =
      Commit("g", m, 1,
             {{"t", 0, 100, std::string("meta"), 5}, {"t", 1, 101}, {"u", 3, 300, std::nullopt}});
  ASSERT_EQ(c.topics.size(), 2u);
  for (const auto& t : c.topics) {
    for (const auto& p : t.partitions)
      EXPECT_EQ(p.error_code, ErrorCode::kNone) << t.name << p.partition_index;
  }

  auto f = Fetch(
      "g", std::vector<std::pair<std::string, std::vector<int32_t>>>{{"t", {0, 1, 2}}, {"u", {3}}});
  EXPECT_EQ(f.error_code, ErrorCode::kNone);
  ASSERT_EQ(f.topics.size(), 2u);
  ASSERT_EQ(f.topics[0].partitions.size(), 3u);
  EXPECT_EQ(f.topics[0].partitions[0].committed_offset, 100);
  EXPECT_EQ(f.topics[0].partitions[0].committed_leader_epoch, 5);
  EXPECT_EQ(f.topics[0].partitions[0].metadata, "meta");
  EXPECT_EQ(f.topics[0].partitions[1].committed_offset, 101);
  EXPECT_EQ(f.topics[0].partitions[1].committed_leader_epoch, -1);
  // No commit: -1, empty (not null) metadata, no error.
  EXPECT_EQ(f.topics[0].partitions[2].committed_offset, -1);
  EXPECT_EQ(f.topics[0].partitions[2].metadata, "");
  EXPECT_EQ(f.topics[0].partitions[2].error_code, ErrorCode::kNone);
  EXPECT_EQ(f.topics[1].partitions[0].committed_offset, 300);
  EXPECT_EQ(f.topics[1].partitions[0].metadata, "");  // a null metadata is stored as ""

  // Topics null: every committed partition.
  auto all = Fetch("g", std::nullopt);
  ASSERT_EQ(all.topics.size(), 2u);
  EXPECT_EQ(all.topics[0].name, "t");
  EXPECT_EQ(all.topics[0].partitions.size(), 2u);
  EXPECT_EQ(all.topics[1].name, "u");

  // An unknown group: -1s, not an error.
  auto unknown =
      Fetch("nobody", std::vector<std::pair<std::string, std::vector<int32_t>>>{{"t", {0}}});
  EXPECT_EQ(unknown.error_code, ErrorCode::kNone);
  EXPECT_EQ(unknown.topics.at(0).partitions.at(0).committed_offset, -1);
  EXPECT_TRUE(Fetch("nobody", std::nullopt).topics.empty());

  // v8: several groups at once, with require_stable (never UNSTABLE_OFFSET_COMMIT here).
  kafka::OffsetFetchRequest req;
  req.require_stable = true;
  kafka::OffsetFetchRequest::Group g1;
  g1.group_id = "g";
  g1.topics = std::nullopt;
  kafka::OffsetFetchRequest::Group g2;
  g2.group_id = "nobody";
  g2.topics = std::vector<kafka::OffsetFetchRequest::Topic>{{"t", {0}, {}}};
  req.groups = {g1, g2};
  Pending<kafka::OffsetFetchResponse> p;
  coord_->OffsetFetch(req, 8, p.Callback());
  auto v8 = p.Get();
  ASSERT_EQ(v8.groups.size(), 2u);
  EXPECT_EQ(v8.groups[0].group_id, "g");
  EXPECT_EQ(v8.groups[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(v8.groups[0].topics.size(), 2u);
  EXPECT_EQ(v8.groups[0].topics[0].partitions[0].committed_offset, 100);
  EXPECT_EQ(v8.groups[1].topics.at(0).partitions.at(0).committed_offset, -1);
}

TEST_F(GroupCoordinatorTest, OffsetCommitBeforeV6DropsTheLeaderEpoch) {
  Open();
  ASSERT_EQ(
      Commit("g", "", -1, {{"t", 0, 1, std::string(), 9}}, 5).topics[0].partitions[0].error_code,
      ErrorCode::kNone);
  auto f = Fetch("g", std::vector<std::pair<std::string, std::vector<int32_t>>>{{"t", {0}}});
  EXPECT_EQ(f.topics[0].partitions[0].committed_leader_epoch, -1);
}

TEST_F(GroupCoordinatorTest, StandaloneCommitCreatesAnEmptyGroup) {
  Open();
  auto c = CommitStandalone("solo", {{"t", 0, 42}});
  EXPECT_EQ(c.topics[0].partitions[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(Committed("solo", "t", 0), 42);
  auto list = List();
  ASSERT_EQ(list.groups.size(), 1u);
  EXPECT_EQ(list.groups[0].group_id, "solo");
  EXPECT_EQ(list.groups[0].group_state, "Empty");
  EXPECT_EQ(list.groups[0].protocol_type, "");
  EXPECT_EQ(list.groups[0].group_type, "classic");
  // Commits are allowed for the empty group id, as Kafka allows them.
  EXPECT_EQ(CommitStandalone("", {{"t", 0, 1}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  EXPECT_EQ(Committed("", "t", 0), 1);
}

TEST_F(GroupCoordinatorTest, UnknownPartitionAndTooLargeMetadataArePerPartition) {
  auto o = Options();
  o.max_offset_metadata_bytes = 8;
  Open(o);
  auto c = CommitStandalone("g", {{"t", 0, 1, std::string("12345678")},
                                  {"t", 1, 2, std::string("123456789")},
                                  {"t", 100, 3},
                                  {"missing", 0, 4}});
  ASSERT_EQ(c.topics.size(), 2u);
  EXPECT_EQ(c.topics[0].partitions[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(c.topics[0].partitions[1].error_code, ErrorCode::kOffsetMetadataTooLarge);
  EXPECT_EQ(c.topics[0].partitions[2].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(c.topics[1].name, "missing");
  EXPECT_EQ(c.topics[1].partitions[0].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_EQ(Committed("g", "t", 0), 1);
  EXPECT_EQ(Committed("g", "t", 1), -1);
  EXPECT_EQ(Committed("g", "missing", 0), -1);
}

TEST_F(GroupCoordinatorTest, CommitsSurviveCloseAndReopen) {
  Open();
  std::string m = StableSingleMember();
  ASSERT_EQ(Commit("g", m, 1, {{"t", 0, 10, std::string("x"), 3}, {"t", 1, 11}})
                .topics[0]
                .partitions[1]
                .error_code,
            ErrorCode::kNone);
  ASSERT_EQ(CommitStandalone("solo", {{"u", 0, 99}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  Reopen();
  auto f = Fetch("g", std::vector<std::pair<std::string, std::vector<int32_t>>>{{"t", {0, 1}}});
  EXPECT_EQ(f.topics[0].partitions[0].committed_offset, 10);
  EXPECT_EQ(f.topics[0].partitions[0].committed_leader_epoch, 3);
  EXPECT_EQ(f.topics[0].partitions[0].metadata, "x");
  EXPECT_EQ(f.topics[0].partitions[1].committed_offset, 11);
  EXPECT_EQ(Committed("solo", "u", 0), 99);
}

TEST_F(GroupCoordinatorTest, GenerationSurvivesReopenWhileMembersDoNot) {
  Open();
  std::string m = StableSingleMember();  // generation 1
  Reopen();
  auto d = Describe("g");
  EXPECT_EQ(d.group_state, "Empty");
  EXPECT_EQ(d.protocol_type, "consumer");
  EXPECT_TRUE(d.members.empty());
  // The old member learns it is unknown and rejoins; the generation goes on from 1.
  EXPECT_EQ(Heartbeat("g", m, 1), ErrorCode::kUnknownMemberId);
  auto join = JoinNewAsync(JoinSpec{})->Get();
  EXPECT_EQ(join.error_code, ErrorCode::kNone);
  EXPECT_EQ(join.generation_id, 2);
  Reopen();
  auto again = JoinNewAsync(JoinSpec{})->Get();
  EXPECT_EQ(again.generation_id, 3);
}

TEST_F(GroupCoordinatorTest, DeleteGroupsTombstonesItsOffsets) {
  Open();
  ASSERT_EQ(CommitStandalone("a", {{"t", 0, 1}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  ASSERT_EQ(CommitStandalone("b", {{"t", 0, 2}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  StableSingleMember("busy");
  auto r = Delete({"a", "busy", "ghost", "a"});
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[0].group_id, "a");
  EXPECT_EQ(r.results[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(r.results[1].error_code, ErrorCode::kNonEmptyGroup);
  EXPECT_EQ(r.results[2].error_code, ErrorCode::kGroupIdNotFound);
  EXPECT_EQ(Committed("a", "t", 0), -1);
  EXPECT_EQ(Describe("a").group_state, "Dead");
  Reopen();
  EXPECT_EQ(Committed("a", "t", 0), -1);
  EXPECT_EQ(Committed("b", "t", 0), 2);
  EXPECT_EQ(Describe("a").group_state, "Dead");
  EXPECT_EQ(Delete({"a"}).results.at(0).error_code, ErrorCode::kGroupIdNotFound);
}

TEST_F(GroupCoordinatorTest, DeletedTopicForgetsItsOffsets) {
  Open();
  ASSERT_EQ(CommitStandalone("both", {{"a", 0, 1}, {"b", 0, 2}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  ASSERT_EQ(CommitStandalone("only-a", {{"a", 1, 3}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  coord_->OnTopicDeleted("a");
  EXPECT_EQ(Committed("both", "a", 0), -1);
  EXPECT_EQ(Committed("both", "b", 0), 2);
  // An Empty group left without offsets is forgotten, as Kafka does.
  EXPECT_EQ(Describe("only-a").group_state, "Dead");
  EXPECT_EQ(Describe("both").group_state, "Empty");
  Reopen();
  EXPECT_EQ(Committed("both", "a", 0), -1);
  EXPECT_EQ(Committed("both", "b", 0), 2);
  EXPECT_EQ(Committed("only-a", "a", 1), -1);
  auto list = List();
  ASSERT_EQ(list.groups.size(), 1u);
  EXPECT_EQ(list.groups[0].group_id, "both");
}

TEST_F(GroupCoordinatorTest, MalformedLogRecordIsSkippedAtOpen) {
  auto o = Options();
  {
    storage::LogOptions lo;
    lo.executor = &executor_;
    auto log = storage::PartitionLog::Open(o.dir, lo);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    auto key = offsets_format::EncodeOffsetKey("g", {"t", 0});
    auto value = offsets_format::EncodeOffsetValue(CommittedOffset{77, -1, "", 1});
    std::vector<uint8_t> junk{1, 2, 3};
    std::vector<kafka::RecordInput> records(3);
    records[0].key = std::span<const uint8_t>(junk);
    records[0].value = std::span<const uint8_t>(value);
    records[1].key = std::span<const uint8_t>(key);
    records[1].value = std::span<const uint8_t>(junk);
    records[2].key = std::span<const uint8_t>(key);
    records[2].value = std::span<const uint8_t>(value);
    auto batch = kafka::BuildBatch(kafka::BatchBuilderOptions{}, records);
    ASSERT_TRUE((*log)->Append(batch, storage::AppendOptions{}).ok());
    ASSERT_TRUE((*log)->Close().ok());
  }
  Open(o);
  EXPECT_EQ(Committed("g", "t", 0), 77);
}

// -----------------------------------------------------------------------------------------
// Listing, describing, closing

TEST_F(GroupCoordinatorTest, ListGroupsFiltersByStateAndType) {
  Open();
  StableSingleMember("stable");
  ASSERT_EQ(CommitStandalone("empty", {{"t", 0, 1}}).topics[0].partitions[0].error_code,
            ErrorCode::kNone);
  auto all = List();
  ASSERT_EQ(all.groups.size(), 2u);
  EXPECT_EQ(all.groups[0].group_id, "empty");
  EXPECT_EQ(all.groups[1].group_id, "stable");
  EXPECT_EQ(all.groups[1].protocol_type, "consumer");
  EXPECT_EQ(all.groups[1].group_state, "Stable");
  auto stable = List({"stable"});  // states compare without case
  ASSERT_EQ(stable.groups.size(), 1u);
  EXPECT_EQ(stable.groups[0].group_id, "stable");
  EXPECT_EQ(List({"Empty", "Dead"}).groups.size(), 1u);
  EXPECT_EQ(List({}, {"Classic"}).groups.size(), 2u);
  EXPECT_TRUE(List({}, {"consumer"}).groups.empty());
}

TEST_F(GroupCoordinatorTest, DescribeUnknownGroupIsDeadWithoutError) {
  Open();
  auto d = Describe("nobody");
  EXPECT_EQ(d.error_code, ErrorCode::kNone);
  EXPECT_EQ(d.group_state, "Dead");
  EXPECT_EQ(d.protocol_type, "");
  EXPECT_EQ(d.protocol_data, "");
  EXPECT_TRUE(d.members.empty());
  EXPECT_EQ(d.authorized_operations, std::numeric_limits<int32_t>::min());
  EXPECT_EQ(Describe("nobody", 3, true).authorized_operations, (1 << 3) | (1 << 6) | (1 << 8));
}

TEST_F(GroupCoordinatorTest, DescribeShowsNoMetadataOutsideStable) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 200;
  Open(o);
  auto ja = JoinNewAsync(JoinSpec{});
  auto jb = JoinNewAsync(JoinSpec{});
  auto ra = ja->Get();
  jb->Get();
  auto d = Describe("g");
  EXPECT_EQ(d.group_state, "CompletingRebalance");
  EXPECT_EQ(d.protocol_data, "");
  ASSERT_EQ(d.members.size(), 2u);
  EXPECT_TRUE(d.members[0].member_metadata.empty());
  EXPECT_EQ(d.members[0].member_id, ra.member_id);
}

TEST_F(GroupCoordinatorTest, CloseAnswersWaitingRequests) {
  auto o = Options();
  o.initial_rebalance_delay_ms = 60000;
  Open(o);
  auto waiting = JoinNewAsync(JoinSpec{});
  EXPECT_FALSE(waiting->ReadyWithin(50ms));
  ASSERT_TRUE(coord_->Close().ok());
  EXPECT_EQ(waiting->Get().error_code, ErrorCode::kCoordinatorNotAvailable);
  EXPECT_TRUE(coord_->Close().ok());  // idempotent
}

TEST_F(GroupCoordinatorTest, CommitAnsweredBeforeCloseIsDurable) {
  auto o = Options();
  o.flush_policy = storage::FlushPolicy::kDurable;
  Open(o);
  // Many commits in flight when Close comes: each is answered, and each NONE is on disk.
  std::vector<std::unique_ptr<Pending<kafka::OffsetCommitResponse>>> pending;
  for (int i = 0; i < 50; ++i) {
    kafka::OffsetCommitRequest req;
    req.group_id = "g";
    req.topics.emplace_back();
    req.topics[0].name = "t";
    req.topics[0].partitions.emplace_back();
    req.topics[0].partitions[0].partition_index = i;
    req.topics[0].partitions[0].committed_offset = 1000 + i;
    pending.push_back(std::make_unique<Pending<kafka::OffsetCommitResponse>>());
    coord_->OffsetCommit(std::move(req), 8, pending.back()->Callback());
  }
  ASSERT_TRUE(coord_->Close().ok());
  std::vector<bool> acked;
  for (auto& p : pending) {
    auto r = p->Get();
    acked.push_back(r.topics.at(0).partitions.at(0).error_code == ErrorCode::kNone);
  }
  coord_.reset();
  Open(o);
  for (int i = 0; i < 50; ++i) {
    if (acked[i]) {
      EXPECT_EQ(Committed("g", "t", i), 1000 + i) << i;
    }
  }
}

}  // namespace
}  // namespace group_coordinator_test
}  // namespace sluice::broker
