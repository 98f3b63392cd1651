// ssl.principal.mapping.rules as Kafka documents them (its SslPrincipalMapperTest's cases).
#include "auth/principal.h"

#include <gtest/gtest.h>

namespace sluice::auth {
namespace {

std::string Map(std::string_view rules, std::string_view dn) {
  auto m = SslPrincipalMapper::Parse(rules);
  EXPECT_TRUE(m.ok()) << rules << ": " << m.status().ToString();
  if (!m.ok()) return "<bad rules>";
  auto r = m->Apply(dn);
  return r.ok() ? *r : "<" + r.status().message() + ">";
}

TEST(SslPrincipalMapperTest, KafkasExamples) {
  const std::string dn = "CN=Kafka Server,OU=ServiceUsers,O=Org,C=US";
  EXPECT_EQ(Map("", "CN=a,O=b"), "CN=a,O=b");
  EXPECT_EQ(Map("DEFAULT", "CN=a,O=b"), "CN=a,O=b");
  EXPECT_EQ(Map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", dn), "Kafka Server");
  EXPECT_EQ(Map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L", dn), "kafka server");
  EXPECT_EQ(Map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U", dn), "KAFKA SERVER");
  EXPECT_EQ(Map("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L", dn),
            "kafka server@serviceusers");
  // The first rule that applies wins; DEFAULT catches the rest.
  const std::string rules =
      "RULE:^CN=([a-z]+),OU=eng$/$1/, RULE:^CN=([a-z]+).*$/$1-other/,\nDEFAULT";
  EXPECT_EQ(Map(rules, "CN=alice,OU=eng"), "alice");
  EXPECT_EQ(Map(rules, "CN=bob,OU=ops"), "bob-other");
  EXPECT_EQ(Map(rules, "O=NoCn"), "O=NoCn");
  // An escaped slash in a pattern and replacement.
  EXPECT_EQ(Map(R"(RULE:^CN=([a-z]+)\/x$/$1\/y/)", "CN=a/x"), "a/y");
}

TEST(SslPrincipalMapperTest, NoRuleApplyingIsAnError) {
  EXPECT_EQ(Map("RULE:^CN=(.*)$/$1/", "OU=x"), "<No rules apply to OU=x>");
}

TEST(SslPrincipalMapperTest, BadRulesAreRefused) {
  for (const char* bad : {"RULE:^CN=(.*)$/$1", "RULE:^CN=(.*)$", "NOTARULE", "DEFAULT junk",
                          "RULE:^CN=(.*$/$1/", "RULE:^CN=(.*)$/$1/X", ", DEFAULT"}) {
    auto m = SslPrincipalMapper::Parse(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.status().message().find("Invalid rule"), std::string::npos) << m.status().message();
  }
}

}  // namespace
}  // namespace sluice::auth
