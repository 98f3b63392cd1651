// The HTTP port's logins (auth/http_auth.h): Basic against the user store, bearer tokens
// from POST /v1/oauth/tokens (the Iceberg REST spec's OAuth2 client credentials), and
// their refusals.
#include "auth/http_auth.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "auth/scram.h"
#include "base/base64.h"

namespace sluice::auth {
namespace {

using Json = nlohmann::json;

HttpRequest WithAuthorization(std::string value) {
  HttpRequest r;
  r.remote_addr = "10.0.0.1";
  r.headers["authorization"] = std::move(value);
  return r;
}

HttpRequest Basic(std::string_view user_colon_password) {
  return WithAuthorization("Basic " + Base64Encode(user_colon_password));
}

HttpRequest TokenRequest(std::string body, std::string addr = "10.0.0.1") {
  HttpRequest r;
  r.method = "POST";
  r.path = "/v1/oauth/tokens";
  r.remote_addr = std::move(addr);
  r.headers["content-type"] = "application/x-www-form-urlencoded";
  r.body = std::move(body);
  return r;
}

struct Fixture {
  std::shared_ptr<UserStore> users;
  int64_t now = 1'800'000'000;
  std::shared_ptr<HttpAuth> auth;
  int persists = 0;

  explicit Fixture(bool accept_basic = true) {
    auto loaded = UserStore::Load("", [this](const std::string&) {
      ++persists;
      return Status::OK();
    });
    EXPECT_TRUE(loaded.ok());
    users = std::move(*loaded);
    EXPECT_TRUE(users->Seed("alice", "pa:ss", 4096).ok());
    auth = std::make_shared<HttpAuth>(HttpAuthOptions{.users = users,
                                                      .accept_basic = accept_basic,
                                                      .token_ttl_seconds = 3600,
                                                      .token_max_ttl_seconds = 7200,
                                                      .now = [this] { return now; }});
  }

  // The token of a successful answer.
  std::string Token(const HttpResponse& r) {
    EXPECT_EQ(r.status, 200) << r.body;
    Json j = Json::parse(r.body);
    return j.value("access_token", "");
  }
};

void ExpectOAuthError(const HttpResponse& r, int status, const std::string& error) {
  EXPECT_EQ(r.status, status) << r.body;
  Json j = Json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j.value("error", ""), error) << r.body;
  EXPECT_FALSE(j.value("error_description", "").empty());
}

// The 401 of Authenticate: both challenges, the Iceberg error shape.
void ExpectRefused(const HttpAuthResult& r, bool token_error, bool basic = true) {
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.refusal.status, 401);
  ASSERT_EQ(r.refusal.headers.size(), basic ? 2u : 1u);
  EXPECT_EQ(r.refusal.headers[0].first, "WWW-Authenticate");
  EXPECT_TRUE(r.refusal.headers[0].second.starts_with("Bearer realm=\"sluice\""));
  EXPECT_EQ(r.refusal.headers[0].second.find("error=\"invalid_token\"") != std::string::npos,
            token_error)
      << r.refusal.headers[0].second;
  if (basic) {
    EXPECT_TRUE(r.refusal.headers[1].second.starts_with("Basic realm="));
  }
  Json j = Json::parse(r.refusal.body);
  EXPECT_EQ(j["error"]["type"], "NotAuthorizedException");
  EXPECT_EQ(j["error"]["code"], 401);
}

TEST(HttpAuthTest, BasicLoginsAgainstTheStore) {
  Fixture f;
  HttpAuthResult ok = f.auth->Authenticate(Basic("alice:pa:ss"));  // the password may hold ':'
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ(ok.principal, "User:alice");
  EXPECT_TRUE(
      f.auth->Authenticate(WithAuthorization("basic   " + Base64Encode("alice:pa:ss"))).allowed);
  EXPECT_TRUE(f.auth->Authenticate(Basic("alice:pa:ss")).allowed);  // remembered

  for (const HttpRequest& bad :
       {HttpRequest{}, Basic("alice:wrong"), Basic("bob:pa:ss"), Basic("alice"), Basic(":pa:ss"),
        WithAuthorization("Digest abc"), WithAuthorization("Basic !!"), WithAuthorization("Basic"),
        WithAuthorization("")}) {
    ExpectRefused(f.auth->Authenticate(bad), false);
  }

  // A changed password: the remembered one no longer opens the port.
  UserChange change{"alice", ScramMechanism::kSha256,
                    CredentialFromPassword(ScramMechanism::kSha256, "new", 4096)};
  UserChange drop512{"alice", ScramMechanism::kSha512, std::nullopt};
  ASSERT_TRUE(f.users->Apply({change, drop512}).ok());
  EXPECT_FALSE(f.auth->Authenticate(Basic("alice:pa:ss")).allowed);
  EXPECT_TRUE(f.auth->Authenticate(Basic("alice:new")).allowed);
}

// The console's page marks every request (X-Sluice-Request): its 401s carry no Basic
// challenge, which would make the browser open its own login dialog over the page's form.
TEST(HttpAuthTest, ThePagesRequestsGetNoBasicChallenge) {
  Fixture f;
  HttpRequest page = Basic("alice:wrong");
  page.headers["x-sluice-request"] = "1";
  ExpectRefused(f.auth->Authenticate(page), false, /*basic=*/false);
  HttpRequest nothing;
  nothing.headers["x-sluice-request"] = "1";
  ExpectRefused(f.auth->Authenticate(nothing), false, /*basic=*/false);
  ExpectRefused(f.auth->Authenticate(Basic("alice:wrong")), false, /*basic=*/true);
  // Basic still logs the page in where the port takes it.
  HttpRequest right = Basic("alice:pa:ss");
  right.headers["x-sluice-request"] = "1";
  EXPECT_TRUE(f.auth->Authenticate(right).allowed);
}

TEST(HttpAuthTest, ClientCredentialsGiveATokenThatLogsIn) {
  Fixture f;
  EXPECT_FALSE(f.users->FindTokenSecret().has_value());
  HttpResponse r = f.auth->IssueToken(
      TokenRequest("grant_type=client_credentials&client_id=alice&client_secret=pa%3Ass"
                   "&scope=catalog"));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j = Json::parse(r.body);
  EXPECT_EQ(j["token_type"], "bearer");
  EXPECT_EQ(j["expires_in"], 3600);
  EXPECT_EQ(j["issued_token_type"], "urn:ietf:params:oauth:token-type:access_token");
  const std::string token = j["access_token"];
  bool no_store = false;
  for (const auto& [k, v] : r.headers) no_store |= k == "Cache-Control" && v == "no-store";
  EXPECT_TRUE(no_store);
  // The secret was made and persisted once, with the users.
  EXPECT_TRUE(f.users->FindTokenSecret().has_value());
  EXPECT_EQ(f.persists, 2);  // the seed, the secret
  EXPECT_NE(f.users->ToJson().find("token_secret"), std::string::npos);

  HttpAuthResult ok = f.auth->Authenticate(WithAuthorization("Bearer " + token));
  EXPECT_TRUE(ok.allowed);
  EXPECT_EQ(ok.principal, "User:alice");
  EXPECT_TRUE(f.auth->Authenticate(WithAuthorization("bearer  " + token + " ")).allowed);

  // A Basic header carries the client's credentials too.
  HttpRequest by_header = TokenRequest("grant_type=client_credentials&expires_in=99999");
  by_header.headers["authorization"] = "Basic " + Base64Encode("alice:pa:ss");
  HttpResponse r2 = f.auth->IssueToken(by_header);
  ASSERT_EQ(r2.status, 200) << r2.body;
  EXPECT_EQ(Json::parse(r2.body)["expires_in"], 7200);  // capped at the maximum
  const std::string token2 = f.Token(r2);
  EXPECT_NE(token2, token);

  // Expiry: the first token (1 h) ends, the second (2 h) goes on.
  f.now += 3600;
  HttpAuthResult expired = f.auth->Authenticate(WithAuthorization("Bearer " + token));
  ExpectRefused(expired, true);
  EXPECT_NE(expired.refusal.headers[0].second.find("the token expired"), std::string::npos);
  EXPECT_TRUE(f.auth->Authenticate(WithAuthorization("Bearer " + token2)).allowed);

  // A tampered token, another cluster's, garbage.
  std::string tampered = token2;
  tampered[15] = tampered[15] == 'x' ? 'y' : 'x';
  ExpectRefused(f.auth->Authenticate(WithAuthorization("Bearer " + tampered)), true);
  ExpectRefused(f.auth->Authenticate(WithAuthorization("Bearer abc")), true);
  ExpectRefused(f.auth->Authenticate(WithAuthorization("Bearer")), false);

  // A new password ends the tokens made before it; a removed user's too.
  UserChange change{"alice", ScramMechanism::kSha256,
                    CredentialFromPassword(ScramMechanism::kSha256, "new", 4096)};
  ASSERT_TRUE(f.users->Apply({change}).ok());
  ExpectRefused(f.auth->Authenticate(WithAuthorization("Bearer " + token2)), true);
  Result<std::string> fresh = f.auth->TokenFor("alice", 60);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(f.auth->Authenticate(WithAuthorization("Bearer " + *fresh)).allowed);
  ASSERT_TRUE(f.users
                  ->Apply({{"alice", ScramMechanism::kSha256, std::nullopt},
                           {"alice", ScramMechanism::kSha512, std::nullopt}})
                  .ok());
  HttpAuthResult gone = f.auth->Authenticate(WithAuthorization("Bearer " + *fresh));
  ExpectRefused(gone, true);
  EXPECT_NE(gone.refusal.body.find("no longer exists"), std::string::npos);
}

TEST(HttpAuthTest, TheSecretSurvivesAReloadAndAnotherBrokersCopy) {
  Fixture f;
  Result<std::string> token = f.auth->TokenFor("alice", 60);
  ASSERT_TRUE(token.ok());
  // Another broker (or a restart) loads the same JSON: the token verifies there.
  auto copy = UserStore::Load(f.users->ToJson(), nullptr);
  ASSERT_TRUE(copy.ok());
  auto other = std::make_shared<HttpAuth>(HttpAuthOptions{
      .users = std::shared_ptr<UserStore>(std::move(*copy)), .now = [&] { return f.now; }});
  EXPECT_TRUE(other->Authenticate(WithAuthorization("Bearer " + *token)).allowed);
  // Changes to the users keep the secret.
  ASSERT_TRUE(f.users->Seed("bob", "b", 4096).ok());
  EXPECT_TRUE(f.auth->Authenticate(WithAuthorization("Bearer " + *token)).allowed);
  // The listing and the failures never show it.
  for (const UserInfo& u : f.users->List()) EXPECT_NE(u.name, "token_secret");
}

TEST(HttpAuthTest, TokenOnlyModeRefusesBasic) {
  Fixture f(/*accept_basic=*/false);
  HttpAuthResult r = f.auth->Authenticate(Basic("alice:pa:ss"));
  ExpectRefused(r, false, /*basic=*/false);
  EXPECT_NE(r.refusal.body.find("/v1/oauth/tokens"), std::string::npos);
  // The token endpoint still takes the password.
  const std::string token = f.Token(f.auth->IssueToken(
      TokenRequest("grant_type=client_credentials&client_id=alice&client_secret=pa:ss")));
  EXPECT_TRUE(f.auth->Authenticate(WithAuthorization("Bearer " + token)).allowed);
}

TEST(HttpAuthTest, TokenEndpointErrorsAreTheSpecs) {
  Fixture f;
  ExpectOAuthError(f.auth->IssueToken(TokenRequest("client_id=alice&client_secret=pa:ss")), 400,
                   "invalid_request");
  ExpectOAuthError(
      f.auth->IssueToken(TokenRequest("grant_type=password&client_id=alice&client_secret=pa:ss")),
      400, "unsupported_grant_type");
  ExpectOAuthError(
      f.auth->IssueToken(TokenRequest("grant_type=urn:ietf:params:oauth:grant-type:token-exchange"
                                      "&subject_token=x")),
      400, "unsupported_grant_type");
  ExpectOAuthError(
      f.auth->IssueToken(TokenRequest("grant_type=client_credentials&client_id=alice")), 401,
      "invalid_client");
  ExpectOAuthError(f.auth->IssueToken(TokenRequest(
                       "grant_type=client_credentials&client_id=alice&client_secret=wrong")),
                   401, "invalid_client");
  ExpectOAuthError(f.auth->IssueToken(TokenRequest(
                       "grant_type=client_credentials&client_id=nobody&client_secret=pa:ss")),
                   401, "invalid_client");
  for (std::string_view body : {
           "grant_type=client_credentials&grant_type=client_credentials",  // twice
           "grant_type=client_credentials&client_id=alice&client_secret=pa:ss&expires_in=-5",
           "grant_type=client_credentials&client_id=alice&client_secret=pa:ss&expires_in=0",
           "grant_type=client_credentials&client_id=alice&client_secret=pa:ss&expires_in=1h",
           "grant_type=client_credentials&client_id=%zz",
           "grant_type=client_credentials&client_id=%4",
       }) {
    ExpectOAuthError(f.auth->IssueToken(TokenRequest(std::string(body))), 400, "invalid_request");
  }
  HttpRequest json = TokenRequest(R"({"grant_type":"client_credentials"})");
  json.headers["content-type"] = "application/json";
  ExpectOAuthError(f.auth->IssueToken(json), 400, "invalid_request");
  HttpRequest get = TokenRequest("");
  get.method = "GET";
  ExpectOAuthError(f.auth->IssueToken(get), 405, "invalid_request");
  HttpRequest both = TokenRequest("grant_type=client_credentials&client_id=alice");
  both.headers["authorization"] = "Basic " + Base64Encode("alice:pa:ss");
  ExpectOAuthError(f.auth->IssueToken(both), 400, "invalid_request");
  HttpRequest bad_header = TokenRequest("grant_type=client_credentials");
  bad_header.headers["authorization"] = "Basic " + Base64Encode("alice:wrong");
  HttpResponse r = f.auth->IssueToken(bad_header);
  ExpectOAuthError(r, 401, "invalid_client");
  bool challenged = false;
  for (const auto& [k, v] : r.headers) challenged |= k == "WWW-Authenticate";
  EXPECT_TRUE(challenged);
  HttpRequest elsewhere = TokenRequest("grant_type=client_credentials");
  elsewhere.path = "/v1/oauth/tokens/x";
  EXPECT_EQ(f.auth->IssueToken(elsewhere).status, 404);
}

TEST(HttpAuthTest, FailedLoginsFromOneAddressAreBounded) {
  Fixture f;
  for (int i = 0; i < kMaxFailuresPerMinute; ++i) {
    ExpectOAuthError(
        f.auth->IssueToken(TokenRequest(
            "grant_type=client_credentials&client_id=alice&client_secret=no", "1.2.3.4")),
        401, "invalid_client");
  }
  // Even the right password waits now, from that address, by Basic or by the form.
  HttpResponse r = f.auth->IssueToken(
      TokenRequest("grant_type=client_credentials&client_id=alice&client_secret=pa:ss", "1.2.3.4"));
  EXPECT_EQ(r.status, 429) << r.body;
  bool retry_after = false;
  for (const auto& [k, v] : r.headers) retry_after |= k == "Retry-After";
  EXPECT_TRUE(retry_after);
  HttpRequest basic = Basic("alice:pa:ss");
  basic.remote_addr = "1.2.3.4";
  EXPECT_EQ(f.auth->Authenticate(basic).refusal.status, 429);
  // Another address is not held up; and after the minute, neither is this one.
  EXPECT_EQ(f.auth
                ->IssueToken(TokenRequest(
                    "grant_type=client_credentials&client_id=alice&client_secret=pa:ss", "5.6.7.8"))
                .status,
            200);
  f.now += 60;
  EXPECT_EQ(f.auth
                ->IssueToken(TokenRequest(
                    "grant_type=client_credentials&client_id=alice&client_secret=pa:ss", "1.2.3.4"))
                .status,
            200);
}

}  // namespace
}  // namespace sluice::auth
