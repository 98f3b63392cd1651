// SASL on the broker over real sockets: the handshake (v0 with bare tokens, v1 with
// SaslAuthenticate), what is allowed before authentication, failures closing the
// connection, and a broker with SASL off. SCRAM exchanges against librdkafka are in
// tests/integration/sasl_test.sh.
#include <gtest/gtest.h>

#include <string>

#include "broker/broker.h"
#include "broker/server.h"
#include "broker/tests/broker_test_util.h"

namespace sluice::broker {
namespace broker_sasl_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Bytes;
using testing::Client;

Bytes Plain(const std::string& user, const std::string& password) {
  std::string s = std::string(1, '\0') + user + std::string(1, '\0') + password;
  return Bytes(s.begin(), s.end());
}

class BrokerSaslTest : public testing::BrokerFixture {
 protected:
  void SetUp() override {
    options_.sasl.enabled = true;
    options_.sasl.users = {{"alice", "alice-secret"}};
    BrokerFixture::SetUp();
  }
  kafka::SaslHandshakeResponse Handshake(Client& c, const std::string& mechanism, int16_t v = 1) {
    kafka::SaslHandshakeRequest req;
    req.mechanism = mechanism;
    return c.Call<kafka::SaslHandshakeResponse>(ApiKey::kSaslHandshake, v, req);
  }
  kafka::SaslAuthenticateResponse Authenticate(Client& c, const Bytes& bytes, int16_t v = 2) {
    kafka::SaslAuthenticateRequest req;
    req.auth_bytes = bytes;
    return c.Call<kafka::SaslAuthenticateResponse>(ApiKey::kSaslAuthenticate, v, req);
  }
  kafka::MetadataResponse Metadata(Client& c) {
    kafka::MetadataRequest req;
    return c.Call<kafka::MetadataResponse>(ApiKey::kMetadata, 9, req);
  }
};

TEST_F(BrokerSaslTest, PlainThenRequestsAreServed) {
  Client c(port());
  // ApiVersions is allowed before authenticating.
  auto versions =
      c.Call<kafka::ApiVersionsResponse>(ApiKey::kApiVersions, 3, kafka::ApiVersionsRequest{});
  EXPECT_EQ(versions.error_code, ErrorCode::kNone);
  auto hs = Handshake(c, "PLAIN");
  EXPECT_EQ(hs.error_code, ErrorCode::kNone);
  EXPECT_EQ(hs.mechanisms, (std::vector<std::string>{"PLAIN", "SCRAM-SHA-256"}));
  auto auth = Authenticate(c, Plain("alice", "alice-secret"));
  EXPECT_EQ(auth.error_code, ErrorCode::kNone);
  EXPECT_EQ(Metadata(c).brokers.size(), 1u);
  // A second handshake or authenticate on an authenticated connection is out of order,
  // and the connection stays.
  EXPECT_EQ(Handshake(c, "PLAIN").error_code, ErrorCode::kIllegalSaslState);
  EXPECT_EQ(Authenticate(c, Plain("alice", "alice-secret")).error_code,
            ErrorCode::kIllegalSaslState);
  EXPECT_EQ(Metadata(c).brokers.size(), 1u);
}

// Two listeners (docs/design/0019-security.md): SASL is asked only on the SASL one; a
// PLAINTEXT connection is served as it is, and a SaslHandshake there is out of place.
class BrokerTwoListenersTest : public BrokerSaslTest {
 protected:
  void SetUp() override {
    ListenerOptions plain;
    plain.name = "PLAINTEXT";
    ListenerOptions sasl;
    sasl.name = "SASL_PLAINTEXT";
    sasl.sasl = true;
    server_options_.listeners = {plain, sasl};
    BrokerSaslTest::SetUp();
  }
};

TEST_F(BrokerTwoListenersTest, OnlyTheSaslListenerAsksForAuthentication) {
  Client plain(server_->port("PLAINTEXT"));
  EXPECT_EQ(Metadata(plain).brokers.size(), 1u);
  EXPECT_EQ(Handshake(plain, "PLAIN").error_code, ErrorCode::kIllegalSaslState);
  EXPECT_EQ(Metadata(plain).brokers.size(), 1u);
  Client sasl(server_->port("SASL_PLAINTEXT"));
  ASSERT_EQ(Handshake(sasl, "PLAIN").error_code, ErrorCode::kNone);
  ASSERT_EQ(Authenticate(sasl, Plain("alice", "alice-secret")).error_code, ErrorCode::kNone);
  EXPECT_EQ(Metadata(sasl).brokers.size(), 1u);
  // Unauthenticated, a Metadata on the SASL listener ends the connection.
  Client early(server_->port("SASL_PLAINTEXT"));
  ASSERT_TRUE(early.SendRequest(ApiKey::kMetadata, 9, 5, kafka::MetadataRequest{}));
  EXPECT_TRUE(early.SeesClose());
}

TEST_F(BrokerSaslTest, WrongPasswordIsToldThenClosed) {
  Client c(port());
  ASSERT_EQ(Handshake(c, "PLAIN").error_code, ErrorCode::kNone);
  auto auth = Authenticate(c, Plain("alice", "guess"));
  EXPECT_EQ(auth.error_code, ErrorCode::kSaslAuthenticationFailed);
  ASSERT_TRUE(auth.error_message.has_value());
  EXPECT_EQ(auth.error_message->find("guess"), std::string::npos) << "echoes the password";
  EXPECT_TRUE(c.SeesClose());
}

TEST_F(BrokerSaslTest, RequestsBeforeAuthenticationCloseTheConnection) {
  Client c(port());
  kafka::MetadataRequest req;
  ASSERT_TRUE(c.SendRequest(ApiKey::kMetadata, 9, 5, req));
  EXPECT_TRUE(c.SeesClose());
  Client half(port());
  ASSERT_EQ(Handshake(half, "PLAIN").error_code, ErrorCode::kNone);
  ASSERT_TRUE(half.SendRequest(ApiKey::kMetadata, 9, 6, req));
  EXPECT_TRUE(half.SeesClose());
}

// Before authenticating, a frame may be 512 KiB at most; after, the usual limit.
TEST_F(BrokerSaslTest, LargeFramesBeforeAuthenticationClose) {
  Stop();
  server_options_.connection.max_unauthenticated_request_bytes = 512 * 1024;
  Start();
  Client c(port());
  Bytes big(600 * 1024, 0);
  (void)c.SendFrame(big);  // the broker may close before it has read it all
  EXPECT_TRUE(c.SeesClose());
}

TEST_F(BrokerSaslTest, UnknownMechanismAndAuthenticateWithoutHandshake) {
  Client c(port());
  auto hs = Handshake(c, "GSSAPI");
  EXPECT_EQ(hs.error_code, ErrorCode::kUnsupportedSaslMechanism);
  EXPECT_EQ(hs.mechanisms.size(), 2u);
  // The client may try again with one that is.
  EXPECT_EQ(Handshake(c, "PLAIN").error_code, ErrorCode::kNone);
  Client d(port());
  EXPECT_EQ(Authenticate(d, Plain("alice", "alice-secret")).error_code,
            ErrorCode::kIllegalSaslState);
  EXPECT_TRUE(d.SeesClose());
}

// SaslHandshake v0: the tokens follow as bare size-prefixed frames, without headers.
TEST_F(BrokerSaslTest, HandshakeV0ThenBareTokens) {
  Client c(port());
  ASSERT_EQ(Handshake(c, "PLAIN", 0).error_code, ErrorCode::kNone);
  ASSERT_TRUE(c.SendFrame(Plain("alice", "alice-secret")));
  auto reply = c.ReadFrame();
  ASSERT_TRUE(reply.has_value());
  EXPECT_TRUE(reply->empty());  // PLAIN's server token is empty
  EXPECT_EQ(Metadata(c).brokers.size(), 1u);

  Client bad(port());
  ASSERT_EQ(Handshake(bad, "PLAIN", 0).error_code, ErrorCode::kNone);
  ASSERT_TRUE(bad.SendFrame(Plain("alice", "nope")));
  EXPECT_TRUE(bad.SeesClose());
}

class BrokerSaslOffTest : public testing::BrokerFixture {};

// As Kafka's plaintext listener: a SASL handshake is out of place.
TEST_F(BrokerSaslOffTest, HandshakeIsIllegalWithoutSasl) {
  Client c(port());
  kafka::SaslHandshakeRequest req;
  req.mechanism = "PLAIN";
  auto hs = c.Call<kafka::SaslHandshakeResponse>(ApiKey::kSaslHandshake, 1, req);
  EXPECT_EQ(hs.error_code, ErrorCode::kIllegalSaslState);
  EXPECT_TRUE(hs.mechanisms.empty());
  kafka::MetadataRequest m;
  EXPECT_EQ(c.Call<kafka::MetadataResponse>(ApiKey::kMetadata, 9, m).brokers.size(), 1u);
}

}  // namespace
}  // namespace broker_sasl_test
}  // namespace sluice::broker
