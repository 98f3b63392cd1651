// The user store: seeds, changes all-or-none and persisted before they show, passwords
// checked, JSON round trips, and malformed JSON refused with a reason.
#include "auth/user_store.h"

#include <gtest/gtest.h>

#include <string>

namespace sluice::auth {
namespace {

TEST(UserStoreTest, SeedsAddOnceAndPasswordsVerify) {
  std::vector<std::string> written;
  auto store = UserStore::Load("", [&](const std::string& j) {
    written.push_back(j);
    return Status::OK();
  });
  ASSERT_TRUE(store.ok());
  UserStore& s = **store;
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(s.VerifyPassword("alice", "a"));
  auto added = s.Seed("alice", "alice-secret", 4096);
  ASSERT_TRUE(added.ok() && *added);
  EXPECT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].find("alice-secret"), std::string::npos);
  // A second seed with another password changes nothing.
  added = s.Seed("alice", "other", 4096);
  ASSERT_TRUE(added.ok());
  EXPECT_FALSE(*added);
  EXPECT_TRUE(s.VerifyPassword("alice", "alice-secret"));
  EXPECT_FALSE(s.VerifyPassword("alice", "other"));
  EXPECT_FALSE(s.VerifyPassword("bob", "alice-secret"));
  ASSERT_TRUE(s.Find("alice", ScramMechanism::kSha512).has_value());
  EXPECT_TRUE(PasswordMatches(ScramMechanism::kSha512, *s.Find("alice", ScramMechanism::kSha512),
                              "alice-secret"));
  auto list = s.List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].credentials.size(), 2u);
}

TEST(UserStoreTest, ChangesAreAllOrNoneAndPersistedFirst) {
  bool fail = false;
  std::string last;
  auto store = UserStore::Load("", [&](const std::string& j) {
    if (fail) return IOError("disk full");
    last = j;
    return Status::OK();
  });
  ASSERT_TRUE(store.ok());
  UserStore& s = **store;
  const ScramCredential bob = CredentialFromPassword(ScramMechanism::kSha512, "b0b", 8192);
  ASSERT_TRUE(s.Apply({{"bob", ScramMechanism::kSha512, bob}}).ok());
  const uint64_t v = s.version();
  // One bad change in a batch: nothing applied.
  Status st = s.Apply({{"carol", ScramMechanism::kSha256,
                        CredentialFromPassword(ScramMechanism::kSha256, "c", 4096)},
                       {"bob", ScramMechanism::kSha256, std::nullopt}});
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_FALSE(s.Exists("carol"));
  ScramCredential weak = bob;
  weak.iterations = 1000;
  EXPECT_EQ(s.Apply({{"bob", ScramMechanism::kSha512, weak}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Apply({{"", ScramMechanism::kSha512, bob}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Apply({{"x", ScramMechanism::kSha256, bob}}).code(),  // a SHA-512-sized key
            StatusCode::kInvalidArgument);
  // A failed persist leaves the store as it was.
  fail = true;
  EXPECT_FALSE(s.Apply({{"bob", ScramMechanism::kSha512, std::nullopt}}).ok());
  EXPECT_TRUE(s.Exists("bob"));
  EXPECT_EQ(s.version(), v);
  fail = false;
  // The last credential removed: the user is gone.
  ASSERT_TRUE(s.Apply({{"bob", ScramMechanism::kSha512, std::nullopt}}).ok());
  EXPECT_FALSE(s.Exists("bob"));
  EXPECT_TRUE(s.empty());
}

TEST(UserStoreTest, TheJsonRoundTripsAndReplaceLoadsIt) {
  auto a = UserStore::Load("", nullptr);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE((*a)->Seed("alice", "alice-secret", 4096).ok());
  ASSERT_TRUE((*a)->Seed("a,b=c ü", "x", 4096).ok());
  auto b = UserStore::Load((*a)->ToJson(), nullptr);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->ToJson(), (*a)->ToJson());
  EXPECT_TRUE((*b)->VerifyPassword("a,b=c ü", "x"));
  auto c = UserStore::Load("  \n", nullptr);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Replace((*a)->ToJson()).ok());
  EXPECT_TRUE((*c)->VerifyPassword("alice", "alice-secret"));
}

TEST(UserStoreTest, MalformedJsonSaysWhatIsWrong) {
  const std::string key32 = "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"";
  auto cred = [&](const std::string& iterations, const std::string& salt, const std::string& key) {
    return R"({"version":1,"users":{"u":{"SCRAM-SHA-256":{"salt":)" + salt + R"(,"iterations":)" +
           iterations + R"(,"stored_key":)" + key + R"(,"server_key":)" + key32 + "}}}}";
  };
  ASSERT_TRUE(UserStore::Load(cred("4096", "\"c2FsdA==\"", key32), nullptr).ok());
  for (auto [json, why] : std::vector<std::pair<std::string, std::string>>{
           {"{", "not a JSON object"},
           {"[]", "not a JSON object"},
           {R"({"users":{}})", "\"version\" is not 1"},
           {R"({"version":2,"users":{}})", "\"version\" is not 1"},
           {R"({"version":1})", "no \"users\" object"},
           {R"({"version":1,"users":{"u":{}}})", "has no credentials"},
           {R"({"version":1,"users":{"":{"SCRAM-SHA-256":{}}}})", "empty, too long"},
           {R"({"version":1,"users":{"u":{"MD5":{}}}})", "unknown mechanism 'MD5'"},
           {R"({"version":1,"users":{"u":{"SCRAM-SHA-256":5}}})", "is not an object"},
           {cred("100", "\"c2FsdA==\"", key32), "\"iterations\" from 4096 to 16384"},
           {cred("\"4096\"", "\"c2FsdA==\"", key32), "\"iterations\""},
           {cred("4096", "\"!!\"", key32), "\"salt\" of SCRAM-SHA-256 of 'u' is not base64"},
           {cred("4096", "5", key32), "no \"salt\" string"},
           {cred("4096", "\"c2FsdA==\"", "\"c2FsdA==\""), "\"stored_key\""},
           {R"({"version":1,"users":{},"token_secret":"c2FsdA=="})", "\"token_secret\""},
           {R"({"version":1,"users":{},"token_secret":5})", "\"token_secret\""},
       }) {
    auto r = UserStore::Load(json, nullptr);
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_NE(r.status().message().find(why), std::string::npos)
        << json << " -> " << r.status().message();
  }
}

TEST(UserStoreTest, TheTokenSecretIsMadeOncePersistedAndKept) {
  std::vector<std::string> written;
  bool fail = false;
  auto store = UserStore::Load("", [&](const std::string& j) {
    if (fail) return FailedPreconditionError("changed elsewhere");
    written.push_back(j);
    return Status::OK();
  });
  ASSERT_TRUE(store.ok());
  UserStore& s = **store;
  EXPECT_FALSE(s.FindTokenSecret().has_value());
  fail = true;  // a failed persist makes nothing
  EXPECT_EQ(s.TokenSecret().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(s.FindTokenSecret().has_value());
  fail = false;
  Result<std::string> secret = s.TokenSecret();
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(secret->size(), 32u);
  ASSERT_EQ(written.size(), 1u);
  EXPECT_NE(written[0].find("\"token_secret\""), std::string::npos);
  EXPECT_EQ(*s.TokenSecret(), *secret);  // made once
  EXPECT_EQ(written.size(), 1u);
  // Kept through changes of the users, a reload and a Replace.
  ASSERT_TRUE(s.Seed("alice", "a", 4096).ok());
  auto again = UserStore::Load(written.back(), nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->FindTokenSecret(), secret.value());
  ASSERT_TRUE(s.Replace(written.back()).ok());
  EXPECT_EQ(s.FindTokenSecret(), secret.value());
  // Never in the listing.
  for (const UserInfo& u : s.List()) EXPECT_EQ(u.name, "alice");
}

}  // namespace
}  // namespace sluice::auth
