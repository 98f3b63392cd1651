#include "auth/http_basic.h"

#include <gtest/gtest.h>

#include "auth/scram.h"
#include "base/base64.h"

namespace sluice::auth {
namespace {

HttpRequest WithAuthorization(std::string value) {
  HttpRequest r;
  r.headers["authorization"] = std::move(value);
  return r;
}

HttpRequest Basic(std::string_view user_colon_password) {
  return WithAuthorization("Basic " + Base64Encode(user_colon_password));
}

TEST(HttpBasicTest, TheStoreDecidesWhoMayUseThePort) {
  auto loaded = UserStore::Load("", nullptr);
  ASSERT_TRUE(loaded.ok());
  std::shared_ptr<UserStore> users = std::move(*loaded);
  ASSERT_TRUE(users->Seed("alice", "pa:ss", 4096).ok());
  HttpAuthenticator auth = BasicAuthenticator(users);

  HttpAuthResult ok = auth(Basic("alice:pa:ss"));  // the password may hold ':'
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ(ok.principal, "User:alice");
  EXPECT_TRUE(auth(WithAuthorization("basic   " + Base64Encode("alice:pa:ss"))).allowed);
  EXPECT_TRUE(auth(Basic("alice:pa:ss")).allowed);  // remembered

  for (const HttpRequest& bad :
       {HttpRequest{}, Basic("alice:wrong"), Basic("bob:pa:ss"), Basic("alice"), Basic(":pa:ss"),
        WithAuthorization("Bearer abc"), WithAuthorization("Basic !!"), WithAuthorization("Basic"),
        WithAuthorization("")}) {
    HttpAuthResult r = auth(bad);
    EXPECT_FALSE(r.allowed);
    EXPECT_EQ(r.refusal.status, 401);
    ASSERT_EQ(r.refusal.headers.size(), 1u);
    EXPECT_EQ(r.refusal.headers[0].first, "WWW-Authenticate");
    EXPECT_NE(r.refusal.body.find("NotAuthorizedException"), std::string::npos);
  }

  // A changed password: the remembered one no longer opens the port.
  UserChange change;
  change.user = "alice";
  change.mechanism = ScramMechanism::kSha256;
  change.credential = CredentialFromPassword(ScramMechanism::kSha256, "new", 4096);
  UserChange drop512;
  drop512.user = "alice";
  drop512.mechanism = ScramMechanism::kSha512;
  // no credential: removed
  ASSERT_TRUE(users->Apply({change, drop512}).ok());
  EXPECT_FALSE(auth(Basic("alice:pa:ss")).allowed);
  EXPECT_TRUE(auth(Basic("alice:new")).allowed);
}

}  // namespace
}  // namespace sluice::auth
