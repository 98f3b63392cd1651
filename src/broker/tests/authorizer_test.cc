#include "broker/authorizer.h"

#include <gtest/gtest.h>

namespace sluice::broker {
namespace authorizer_test {
namespace {

using auth::AclBinding;
using auth::AclOperation;
using auth::AclPermission;
using auth::PatternType;
using auth::ResourceType;

std::shared_ptr<auth::AclStore> StoreWith(const std::vector<AclBinding>& bindings) {
  auto store = auth::AclStore::Load("", nullptr);
  EXPECT_TRUE(store.ok());
  std::shared_ptr<auth::AclStore> s = std::move(*store);
  for (const Status& st : s->Create(bindings)) EXPECT_TRUE(st.ok()) << st.ToString();
  return s;
}

AclBinding Allow(ResourceType type, std::string name, std::string principal, AclOperation op,
                 PatternType pattern = PatternType::kLiteral) {
  return AclBinding{type, std::move(name),      pattern, std::move(principal), "*",
                    op,   AclPermission::kAllow};
}

TEST(AuthorizerTest, DisabledAllowsEverything) {
  Authorizer a(AuthorizationOptions{}, StoreWith({}));
  Access access = a.For("User:ANONYMOUS", "127.0.0.1");
  EXPECT_TRUE(access.everything());
  EXPECT_TRUE(access.Allows(ResourceType::kTopic, "t", AclOperation::kWrite));
  EXPECT_TRUE(access.AllowsCluster(AclOperation::kClusterAction));
  // Kafka without an authorizer: every supported operation.
  EXPECT_EQ(access.Operations(ResourceType::kGroup, "g"), (1 << 3) | (1 << 6) | (1 << 8));
}

TEST(AuthorizerTest, SuperUsersMayDoAnythingOthersWhatTheAclsSay) {
  AuthorizationOptions o;
  o.enabled = true;
  o.super_users = {"User:admin"};
  Authorizer a(o, StoreWith({Allow(ResourceType::kTopic, "pay-", "User:alice", AclOperation::kRead,
                                   PatternType::kPrefixed)}));
  EXPECT_TRUE(a.For("User:admin", "10.0.0.1").AllowsCluster(AclOperation::kAlter));
  Access alice = a.For("User:alice", "10.0.0.1");
  EXPECT_FALSE(alice.everything());
  EXPECT_TRUE(alice.Allows(ResourceType::kTopic, "pay-1", AclOperation::kRead));
  EXPECT_TRUE(alice.Allows(ResourceType::kTopic, "pay-1", AclOperation::kDescribe));  // implied
  EXPECT_FALSE(alice.Allows(ResourceType::kTopic, "pay-1", AclOperation::kWrite));
  EXPECT_FALSE(alice.Allows(ResourceType::kTopic, "other", AclOperation::kRead));
  EXPECT_EQ(alice.Operations(ResourceType::kTopic, "pay-1"), (1 << 3) | (1 << 8));
  EXPECT_EQ(alice.Operations(ResourceType::kTopic, "other"), 0);
  Access bob = a.For("User:bob", "10.0.0.1");
  EXPECT_FALSE(bob.Allows(ResourceType::kTopic, "pay-1", AclOperation::kRead));
  // A resource no ACL names: closed unless allow.everyone.if.no.acl.found.
  EXPECT_FALSE(bob.Allows(ResourceType::kGroup, "g", AclOperation::kRead));
}

TEST(AuthorizerTest, ADenialIsLoggedOnceInTenSecondsAndFilteringIsQuiet) {
  AuthorizationOptions o;
  o.enabled = true;
  Authorizer a(o,
               StoreWith({Allow(ResourceType::kTopic, "open", "User:carol", AclOperation::kRead)}));
  Access carol = a.For("User:carol", "10.0.0.9");
  testing::internal::CaptureStderr();
  EXPECT_TRUE(carol.Check(ResourceType::kTopic, "open", AclOperation::kRead));
  EXPECT_FALSE(carol.Allows(ResourceType::kTopic, "hidden", AclOperation::kDescribe));  // quiet
  EXPECT_FALSE(carol.Check(ResourceType::kTopic, "closed-log-test", AclOperation::kWrite));
  EXPECT_FALSE(carol.Check(ResourceType::kTopic, "closed-log-test", AclOperation::kWrite));
  EXPECT_FALSE(carol.CheckCluster(AclOperation::kAlter));
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_EQ(logged.find("hidden"), std::string::npos) << logged;
  EXPECT_EQ(logged.find("open"), std::string::npos) << logged;
  const std::string denial = "User:carol from 10.0.0.9 denied WRITE on TOPIC closed-log-test";
  const size_t first = logged.find(denial);
  ASSERT_NE(first, std::string::npos) << logged;
  EXPECT_EQ(logged.find(denial, first + 1), std::string::npos) << logged;  // once in 10 s
  EXPECT_NE(logged.find("User:carol from 10.0.0.9 denied ALTER on CLUSTER kafka-cluster"),
            std::string::npos)
      << logged;
}

TEST(AuthorizerTest, AllowEveryoneIfNoAclFoundOpensOnlyUnnamedResources) {
  AuthorizationOptions o;
  o.enabled = true;
  o.allow_everyone_if_no_acl_found = true;
  Authorizer a(
      o, StoreWith({Allow(ResourceType::kTopic, "secret", "User:alice", AclOperation::kRead)}));
  Access bob = a.For("User:bob", "10.0.0.1");
  EXPECT_TRUE(bob.Allows(ResourceType::kTopic, "public", AclOperation::kWrite));
  EXPECT_FALSE(bob.Allows(ResourceType::kTopic, "secret", AclOperation::kRead));
  EXPECT_TRUE(bob.AllowsAny(ResourceType::kGroup, AclOperation::kRead));  // no group ACL at all
  // Kafka's authorizeByResourceType: some topic is open to bob (those no ACL names), so an
  // idempotent producer may start.
  EXPECT_TRUE(bob.AllowsAny(ResourceType::kTopic, AclOperation::kWrite));
  o.allow_everyone_if_no_acl_found = false;
  Authorizer closed(
      o, StoreWith({Allow(ResourceType::kTopic, "secret", "User:alice", AclOperation::kRead)}));
  EXPECT_FALSE(
      closed.For("User:bob", "10.0.0.1").AllowsAny(ResourceType::kTopic, AclOperation::kWrite));
}

TEST(AuthorizerTest, AnAclChangeCountsForTheNextRequestNotTheOneInFlight) {
  AuthorizationOptions o;
  o.enabled = true;
  auto store = StoreWith({});
  Authorizer a(o, store);
  Access before = a.For("User:alice", "10.0.0.1");
  for (const Status& st :
       store->Create({Allow(ResourceType::kTopic, "t", "User:alice", AclOperation::kWrite)})) {
    ASSERT_TRUE(st.ok());
  }
  EXPECT_FALSE(before.Allows(ResourceType::kTopic, "t", AclOperation::kWrite));
  EXPECT_TRUE(
      a.For("User:alice", "10.0.0.1").Allows(ResourceType::kTopic, "t", AclOperation::kWrite));
  // WRITE on some topic is what an idempotent producer needs (KIP-679).
  EXPECT_TRUE(
      a.For("User:alice", "10.0.0.1").AllowsAny(ResourceType::kTopic, AclOperation::kWrite));
}

TEST(AuthorizerTest, NoneRefusesEverything) {
  Access none = Access::None();
  EXPECT_FALSE(none.everything());
  EXPECT_FALSE(none.Allows(ResourceType::kTopic, "t", AclOperation::kDescribe));
  EXPECT_FALSE(none.AllowsAny(ResourceType::kTopic, AclOperation::kWrite));
  EXPECT_EQ(none.Operations(ResourceType::kCluster, auth::kClusterName), 0);
}

}  // namespace
}  // namespace authorizer_test
}  // namespace sluice::broker
