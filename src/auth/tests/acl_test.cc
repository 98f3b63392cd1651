// Kafka's authorization rules on AclSet: literal, wildcard and prefixed patterns; deny
// winning; implied operations; principal and host wildcards; allow.everyone.if.no.acl.found;
// authorize-by-type; filters with ANY and MATCH; validation with Kafka's messages; JSON.
#include "auth/acl.h"

#include <gtest/gtest.h>

namespace sluice::auth {
namespace {

using O = AclOperation;
using P = AclPermission;
using R = ResourceType;

AclBinding Bind(R type, std::string name, PatternType pattern, std::string principal, O op,
                P permission = P::kAllow, std::string host = "*") {
  return {type, std::move(name), pattern, std::move(principal), std::move(host), op, permission};
}

AclRequest Ask(std::string principal, R type, std::string name, O op,
               std::string host = "10.0.0.1") {
  return {std::move(principal), std::move(host), type, std::move(name), op};
}

TEST(AclTest, LiteralWildcardAndPrefixedPatterns) {
  AclSet acls({Bind(R::kTopic, "orders", PatternType::kLiteral, "User:alice", O::kRead),
               Bind(R::kTopic, "logs-", PatternType::kPrefixed, "User:bob", O::kWrite),
               Bind(R::kGroup, "*", PatternType::kLiteral, "User:alice", O::kRead)});
  EXPECT_TRUE(acls.Authorize(Ask("User:alice", R::kTopic, "orders", O::kRead), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:alice", R::kTopic, "orders2", O::kRead), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:alice", R::kTopic, "orders", O::kWrite), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:bob", R::kTopic, "orders", O::kRead), false));
  EXPECT_TRUE(acls.Authorize(Ask("User:bob", R::kTopic, "logs-app", O::kWrite), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:bob", R::kTopic, "log", O::kWrite), false));
  EXPECT_TRUE(acls.Authorize(Ask("User:alice", R::kGroup, "any-group", O::kRead), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:alice", R::kTransactionalId, "any", O::kWrite), false));
}

TEST(AclTest, DenyWinsOverAllowAndImpliedOperationsOnlyAllow) {
  AclSet acls(
      {Bind(R::kTopic, "*", PatternType::kLiteral, "User:*", O::kAll),
       Bind(R::kTopic, "secret", PatternType::kLiteral, "User:eve", O::kAll, P::kDeny),
       Bind(R::kTopic, "t", PatternType::kLiteral, "User:carol", O::kWrite),
       Bind(R::kTopic, "t", PatternType::kLiteral, "User:carol", O::kDescribe, P::kDeny,
            "10.0.0.9"),
       Bind(R::kCluster, "kafka-cluster", PatternType::kLiteral, "User:ops", O::kAlterConfigs)});
  EXPECT_TRUE(acls.Authorize(Ask("User:eve", R::kTopic, "public", O::kRead), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:eve", R::kTopic, "secret", O::kRead), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:eve", R::kTopic, "secret", O::kDescribe), false));
  EXPECT_TRUE(acls.Authorize(Ask("User:carol", R::kTopic, "t", O::kDescribe), false));
  // A deny from one host only.
  EXPECT_FALSE(acls.Authorize(Ask("User:carol", R::kTopic, "t", O::kDescribe, "10.0.0.9"), false));
  EXPECT_TRUE(acls.Authorize(Ask("User:carol", R::kTopic, "t", O::kWrite, "10.0.0.9"), false));
  // ALTER_CONFIGS implies DESCRIBE_CONFIGS, not DESCRIBE or ALTER.
  EXPECT_TRUE(
      acls.Authorize(Ask("User:ops", R::kCluster, "kafka-cluster", O::kDescribeConfigs), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:ops", R::kCluster, "kafka-cluster", O::kAlter), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:ops", R::kCluster, "kafka-cluster", O::kDescribe), false));
}

TEST(AclTest, WriteReadDeleteAlterImplyDescribe) {
  for (O op : {O::kRead, O::kWrite, O::kDelete, O::kAlter}) {
    AclSet acls({Bind(R::kTopic, "t", PatternType::kLiteral, "User:a", op)});
    EXPECT_TRUE(acls.Authorize(Ask("User:a", R::kTopic, "t", O::kDescribe), false)) << Name(op);
    EXPECT_FALSE(acls.Authorize(Ask("User:a", R::kTopic, "t", O::kCreate), false)) << Name(op);
  }
}

TEST(AclTest, AllowEveryoneIfNoAclFoundAppliesOnlyToUnnamedResources) {
  AclSet acls({Bind(R::kTopic, "named", PatternType::kLiteral, "User:a", O::kRead)});
  EXPECT_TRUE(acls.Authorize(Ask("User:b", R::kTopic, "other", O::kWrite), true));
  EXPECT_FALSE(acls.Authorize(Ask("User:b", R::kTopic, "other", O::kWrite), false));
  EXPECT_FALSE(acls.Authorize(Ask("User:b", R::kTopic, "named", O::kRead), true));
  EXPECT_FALSE(AclSet().Authorize(Ask("User:b", R::kTopic, "x", O::kRead), false));
}

TEST(AclTest, AuthorizeAnyIsKafkasAuthorizeByResourceType) {
  AclSet acls({Bind(R::kTopic, "p-", PatternType::kPrefixed, "User:a", O::kWrite),
               Bind(R::kTopic, "q", PatternType::kLiteral, "User:b", O::kWrite),
               Bind(R::kTopic, "*", PatternType::kLiteral, "User:b", O::kWrite, P::kDeny),
               Bind(R::kTopic, "r-1", PatternType::kLiteral, "User:c", O::kWrite),
               Bind(R::kTopic, "r-", PatternType::kPrefixed, "User:c", O::kWrite, P::kDeny)});
  EXPECT_TRUE(acls.AuthorizeAny("User:a", "h", R::kTopic, O::kWrite));
  EXPECT_FALSE(acls.AuthorizeAny("User:a", "h", R::kTopic, O::kRead));
  EXPECT_FALSE(acls.AuthorizeAny("User:b", "h", R::kTopic, O::kWrite));  // denied everywhere
  EXPECT_FALSE(acls.AuthorizeAny("User:c", "h", R::kTopic, O::kWrite));  // a wider deny
  EXPECT_FALSE(acls.AuthorizeAny("User:z", "h", R::kTopic, O::kWrite));
}

TEST(AclTest, FiltersWithAnyAndMatch) {
  const AclBinding lit = Bind(R::kTopic, "orders", PatternType::kLiteral, "User:a", O::kRead);
  const AclBinding pre = Bind(R::kTopic, "ord", PatternType::kPrefixed, "User:a", O::kRead);
  const AclBinding all = Bind(R::kTopic, "*", PatternType::kLiteral, "User:a", O::kRead);
  const AclBinding grp =
      Bind(R::kGroup, "orders", PatternType::kLiteral, "User:b", O::kRead, P::kDeny);
  AclFilter any;
  for (const AclBinding* b : {&lit, &pre, &all, &grp}) EXPECT_TRUE(any.Matches(*b));
  AclFilter match{R::kTopic, "orders", PatternType::kMatch};
  EXPECT_TRUE(match.Matches(lit));
  EXPECT_TRUE(match.Matches(pre));
  EXPECT_TRUE(match.Matches(all));
  EXPECT_FALSE(match.Matches(grp));
  AclFilter exact{R::kAny, "orders", PatternType::kAny};
  EXPECT_TRUE(exact.Matches(lit));
  EXPECT_FALSE(exact.Matches(pre));
  EXPECT_TRUE(exact.Matches(grp));
  AclFilter prefixed{R::kTopic, std::nullopt, PatternType::kPrefixed};
  EXPECT_TRUE(prefixed.Matches(pre));
  EXPECT_FALSE(prefixed.Matches(lit));
  AclFilter by_entry;
  by_entry.principal = "User:b";
  by_entry.permission = P::kDeny;
  EXPECT_TRUE(by_entry.Matches(grp));
  EXPECT_FALSE(by_entry.Matches(lit));
  AclFilter bad;
  bad.operation = O::kUnknown;
  EXPECT_FALSE(bad.Validate().ok());
  EXPECT_TRUE(any.Validate().ok());
}

TEST(AclTest, ValidationUsesKafkasMessages) {
  const AclBinding ok = Bind(R::kTopic, "t", PatternType::kLiteral, "User:a", O::kRead);
  EXPECT_TRUE(ValidateBinding(ok).ok());
  auto refused = [](AclBinding b, const std::string& why) {
    Status st = ValidateBinding(b);
    ASSERT_FALSE(st.ok()) << why;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
  };
  AclBinding b = ok;
  b.pattern_type = PatternType::kMatch;
  refused(b, "Invalid patternType MATCH");
  b = ok;
  b.resource_type = R::kAny;
  refused(b, "Invalid resourceType ANY");
  b = ok;
  b.operation = O::kAny;
  refused(b, "Invalid operation ANY");
  b = ok;
  b.permission = P::kAny;
  refused(b, "Invalid permissionType ANY");
  b = ok;
  b.resource_name = "";
  refused(b, "Resource name should not be empty");
  b = ok;
  b.principal = "alice";
  refused(b, "Could not parse principal from `alice`");
  b = Bind(R::kCluster, "other", PatternType::kLiteral, "User:a", O::kAlter);
  refused(b, "The only valid name for the CLUSTER resource is kafka-cluster");
  b = Bind(R::kGroup, "g", PatternType::kLiteral, "User:a", O::kWrite);
  refused(b, "ResourceType GROUP only supports operations READ, DESCRIBE, DELETE");
  EXPECT_TRUE(ValidateBinding(Bind(R::kGroup, "g", PatternType::kLiteral, "User:a", O::kAll)).ok());
}

TEST(AclTest, JsonRoundTripsAndMalformedJsonIsRefused) {
  AclSet acls(
      {Bind(R::kTopic, "t", PatternType::kPrefixed, "User:a", O::kWrite, P::kDeny, "1.2.3.4"),
       Bind(R::kCluster, "kafka-cluster", PatternType::kLiteral, "User:ops", O::kAll),
       Bind(R::kTopic, "t", PatternType::kPrefixed, "User:a", O::kWrite, P::kDeny, "1.2.3.4")});
  EXPECT_EQ(acls.bindings().size(), 2u);  // the duplicate is one binding
  auto back = AclSet::FromJson(acls.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->bindings(), acls.bindings());
  for (
      auto [json, why] : std::vector<std::pair<std::string, std::string>>{
          {"[", "not a JSON object"},
          {R"({"acls":[]})", "\"version\" is not 1"},
          {R"({"version":1})", "no \"acls\" array"},
          {R"({"version":1,"acls":[5]})", "binding 0 is not an object"},
          {R"({"version":1,"acls":[{"resource_type":"TOPIC"}]})", "no \"resource_name\""},
          {R"({"version":1,"acls":[{"resource_type":"TOPICS","resource_name":"t","pattern_type":"LITERAL","principal":"User:a","host":"*","operation":"READ","permission":"ALLOW"}]})",
           "unknown type"},
          {R"({"version":1,"acls":[{"resource_type":"TOPIC","resource_name":"t","pattern_type":"LITERAL","principal":"a","host":"*","operation":"READ","permission":"ALLOW"}]})",
           "Could not parse principal"},
      }) {
    auto r = AclSet::FromJson(json);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace sluice::auth
