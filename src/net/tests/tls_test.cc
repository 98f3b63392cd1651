// TLS transports over non-blocking socket pairs, with a CA and certificates made here.
#include "net/tls.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "net/testing/test_certs.h"
#include "storage/testing/files.h"

namespace sluice::net {
namespace {

using testing::TestIdentity;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds_), 0);
  }
  void TearDown() override {
    server_t_.reset();
    client_t_.reset();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  TlsOptions ServerOptions() const {
    TlsOptions o;
    o.cert_file = server_.cert_file();
    o.key_file = server_.key_file();
    o.ca_file = ca_.cert_file();
    return o;
  }
  TlsClientOptions ClientOptions() const {
    TlsClientOptions o;
    o.ca_file = ca_.cert_file();
    o.server_name = "localhost";
    return o;
  }
  void Connect(const TlsContext& server, const TlsClientOptions& client) {
    server_t_ = server.MakeServer(fds_[0]);
    ASSERT_NE(server_t_, nullptr);
    auto c = MakeTlsClient(fds_[1], client);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_t_ = std::move(*c);
  }
  // Drives both handshakes (a zero-byte read each) until both finish or one fails.
  // The states of the last calls.
  std::pair<IoResult, IoResult> Handshake() {
    IoResult s, c;
    char byte;
    for (int i = 0; i < 100; ++i) {
      c = client_t_->Read(&byte, 0);
      s = server_t_->Read(&byte, 0);
      if (s.state == IoResult::State::kError || c.state == IoResult::State::kError) break;
      if (s.done() && c.done()) break;
    }
    return {s, c};
  }
  // Moves `data` from `from` to `to`, alternating writes and reads as a loop would.
  std::string Transfer(Transport& from, Transport& to, const std::string& data) {
    std::string got;
    size_t sent = 0;
    std::vector<char> buf(65536);
    for (int rounds = 0; rounds < 100000 && got.size() < data.size(); ++rounds) {
      if (sent < data.size()) {
        iovec iov[2];
        size_t half = (data.size() - sent) / 2;
        iov[0] = {const_cast<char*>(data.data() + sent), half};
        iov[1] = {const_cast<char*>(data.data() + sent + half), data.size() - sent - half};
        IoResult w = from.Writev(iov, 2);
        if (w.state == IoResult::State::kError) break;
        if (w.done()) sent += w.bytes;
      }
      IoResult r = to.Read(buf.data(), buf.size());
      if (r.state == IoResult::State::kError || r.state == IoResult::State::kClosed) break;
      if (r.done()) got.append(buf.data(), r.bytes);
    }
    return got;
  }

  storage::testing::TempDir dir_{"tls-test"};
  TestIdentity ca_{"sluice test CA", nullptr, true, dir_.path(), "ca"};
  TestIdentity server_{"localhost", &ca_, false, dir_.path(), "server"};
  TestIdentity alice_{"alice", &ca_, false, dir_.path(), "alice"};
  TestIdentity other_ca_{"another CA", nullptr, true, dir_.path(), "other-ca"};
  TestIdentity mallory_{"mallory", &other_ca_, false, dir_.path(), "mallory"};
  int fds_[2] = {-1, -1};
  std::unique_ptr<Transport> server_t_, client_t_;
};

TEST_F(TlsTest, HandshakeThenBytesBothWaysWithPartialWrites) {
  auto ctx = TlsContext::Create(ServerOptions());
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  EXPECT_EQ((*ctx)->subject(), "CN=localhost");
  Connect(**ctx, ClientOptions());
  auto [s, c] = Handshake();
  ASSERT_TRUE(s.done()) << server_t_->last_error();
  ASSERT_TRUE(c.done()) << client_t_->last_error();
  EXPECT_EQ(server_t_->name(), "tls");  // no kernel TLS in a socket pair
  EXPECT_FALSE(server_t_->CanSendFile());
  auto session = SessionOf(*server_t_);
  ASSERT_TRUE(session.has_value());
  EXPECT_EQ(session->version, "TLSv1.3");
  EXPECT_EQ(session->peer_subject, "");  // no client certificate asked for
  EXPECT_FALSE(SessionOf(*MakePlaintext(fds_[0])).has_value());
  // Several MiB: more than the socket buffer, so writes want and are retried.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 251);
  EXPECT_EQ(Transfer(*client_t_, *server_t_, big), big);
  EXPECT_EQ(Transfer(*server_t_, *client_t_, "pong"), "pong");
}

TEST_F(TlsTest, BytesDecryptedPastARead) {
  auto ctx = TlsContext::Create(ServerOptions());
  ASSERT_TRUE(ctx.ok());
  Connect(**ctx, ClientOptions());
  ASSERT_TRUE(Handshake().first.done());
  ASSERT_TRUE(client_t_->Write("abcdefgh", 8).done());
  char four[4];
  IoResult r = server_t_->Read(four, 4);
  ASSERT_TRUE(r.done());
  EXPECT_EQ(r.bytes, 4u);
  // The other four are inside the transport, not on the socket.
  EXPECT_TRUE(server_t_->HasBufferedInput());
  r = server_t_->Read(four, 4);
  ASSERT_TRUE(r.done());
  EXPECT_EQ(std::string(four, 4), "efgh");
  EXPECT_FALSE(server_t_->HasBufferedInput());
  EXPECT_EQ(server_t_->Read(four, 4).state, IoResult::State::kWantRead);
  // The peer's close_notify (its transport destroyed) is the end of the stream.
  client_t_.reset();
  EXPECT_EQ(server_t_->Read(four, 4).state, IoResult::State::kClosed);
}

TEST_F(TlsTest, AMissingRequiredClientCertificateIsRefused) {
  TlsOptions o = ServerOptions();
  o.client_auth = ClientAuth::kRequired;
  auto ctx = TlsContext::Create(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  // Without a certificate: refused.
  Connect(**ctx, ClientOptions());
  auto [s, c] = Handshake();
  // TLS 1.3: the client finishes first and learns of the refusal on its next read.
  EXPECT_EQ(s.state, IoResult::State::kError);
  EXPECT_NE(server_t_->last_error().find("certificate"), std::string::npos)
      << server_t_->last_error();
}

TEST_F(TlsTest, AClientCertificateNamesThePeer) {
  TlsOptions o = ServerOptions();
  o.client_auth = ClientAuth::kRequired;
  auto ctx = TlsContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  TlsClientOptions co = ClientOptions();
  co.cert_file = alice_.cert_file();
  co.key_file = alice_.key_file();
  Connect(**ctx, co);
  auto [s, c] = Handshake();
  ASSERT_TRUE(s.done()) << server_t_->last_error();
  ASSERT_TRUE(c.done()) << client_t_->last_error();
  EXPECT_EQ(SessionOf(*server_t_)->peer_subject, "CN=alice");
  EXPECT_EQ(Transfer(*client_t_, *server_t_, "hi"), "hi");
}

TEST_F(TlsTest, ACertificateFromAnotherCaIsRefused) {
  TlsOptions o = ServerOptions();
  o.client_auth = ClientAuth::kRequested;
  auto ctx = TlsContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  TlsClientOptions co = ClientOptions();
  co.cert_file = mallory_.cert_file();
  co.key_file = mallory_.key_file();
  Connect(**ctx, co);
  auto [s, c] = Handshake();
  EXPECT_EQ(s.state, IoResult::State::kError);
  EXPECT_NE(server_t_->last_error().find("certificate verify failed"), std::string::npos)
      << server_t_->last_error();
}

TEST_F(TlsTest, TheClientRefusesAServerItCannotVerify) {
  TlsOptions o = ServerOptions();
  o.cert_file = mallory_.cert_file();  // signed by the other CA
  o.key_file = mallory_.key_file();
  auto ctx = TlsContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  Connect(**ctx, ClientOptions());
  auto [s, c] = Handshake();
  EXPECT_EQ(c.state, IoResult::State::kError);
  EXPECT_NE(client_t_->last_error().find("certificate verify failed"), std::string::npos)
      << client_t_->last_error();
}

TEST_F(TlsTest, AnExpiredCertificateIsRefusedByTheClient) {
  TestIdentity old("localhost", &ca_, false, dir_.path(), "expired", -30, -1);
  TlsOptions o = ServerOptions();
  o.cert_file = old.cert_file();
  o.key_file = old.key_file();
  auto ctx = TlsContext::Create(o);
  ASSERT_TRUE(ctx.ok());
  Connect(**ctx, ClientOptions());
  auto [s, c] = Handshake();
  EXPECT_EQ(c.state, IoResult::State::kError);
  EXPECT_NE(client_t_->last_error().find("certificate"), std::string::npos)
      << client_t_->last_error();
}

TEST_F(TlsTest, PlaintextBytesOnATlsServerAreAnError) {
  auto ctx = TlsContext::Create(ServerOptions());
  ASSERT_TRUE(ctx.ok());
  server_t_ = (*ctx)->MakeServer(fds_[0]);
  // A Kafka ApiVersions request where a ClientHello belongs.
  const char request[] = "\x00\x00\x00\x0e\x00\x12\x00\x03\x00\x00\x00\x01\x00\x04test\x00";
  ASSERT_EQ(::write(fds_[1], request, sizeof(request) - 1),
            static_cast<ssize_t>(sizeof(request) - 1));
  char buf[16];
  IoResult r = server_t_->Read(buf, sizeof(buf));
  EXPECT_EQ(r.state, IoResult::State::kError);
  EXPECT_FALSE(server_t_->last_error().empty());
}

TEST_F(TlsTest, BadConfigurationsAreRefusedWithTheFileAndTheReason) {
  auto fails = [](const TlsOptions& o) {
    auto ctx = TlsContext::Create(o);
    EXPECT_FALSE(ctx.ok());
    return ctx.ok() ? std::string() : ctx.status().message();
  };
  TlsOptions o = ServerOptions();
  ::chmod(o.key_file.c_str(), 0644);
  EXPECT_NE(fails(o).find("may be read by group or others (mode 0644)"), std::string::npos);
  ::chmod(o.key_file.c_str(), 0600);
  o = ServerOptions();
  o.key_file = alice_.key_file();  // another certificate's key
  EXPECT_NE(fails(o).find("key values mismatch (it must be the PEM private key of"),
            std::string::npos);
  o = ServerOptions();
  o.cert_file = dir_.path() + "/missing.crt";
  EXPECT_NE(fails(o).find("missing.crt"), std::string::npos);
  o = ServerOptions();
  {
    std::ofstream junk(dir_.path() + "/junk.crt");
    junk << "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
  }
  o.cert_file = dir_.path() + "/junk.crt";
  EXPECT_NE(fails(o).find("junk.crt"), std::string::npos);
  o = ServerOptions();
  o.ca_file.clear();
  o.client_auth = ClientAuth::kRequired;
  EXPECT_NE(fails(o).find("needs ca_file"), std::string::npos);
  o = ServerOptions();
  o.min_version = "1.0";
  EXPECT_NE(fails(o).find("must be 1.2 or 1.3"), std::string::npos);
  o = ServerOptions();
  o.ciphers = "NO-SUCH-CIPHER";
  EXPECT_NE(fails(o).find("NO-SUCH-CIPHER"), std::string::npos);
  o = ServerOptions();
  o.ciphersuites = "TLS_NO_SUCH_SUITE";
  EXPECT_NE(fails(o).find("tls ciphersuites 'TLS_NO_SUCH_SUITE'"), std::string::npos);
  o.ciphersuites = "TLS_AES_128_GCM_SHA256";
  EXPECT_TRUE(TlsContext::Create(o).ok());
  EXPECT_FALSE(ParseClientAuth("maybe").ok());
  EXPECT_EQ(*ParseClientAuth("requested"), ClientAuth::kRequested);
}

TEST_F(TlsTest, ReloadTakesANewCertificateAndKeepsTheOldOneOnABrokenFile) {
  TlsOptions o = ServerOptions();
  o.cert_file = dir_.path() + "/live.crt";
  o.key_file = dir_.path() + "/live.key";
  auto copy = [](const std::string& from, const std::string& to) {
    std::ifstream in(from);
    std::ofstream out(to, std::ios::trunc);
    out << in.rdbuf();
  };
  copy(server_.cert_file(), o.cert_file);
  copy(server_.key_file(), o.key_file);
  ::chmod(o.key_file.c_str(), 0600);
  auto ctx = TlsContext::Create(o);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  // An open connection keeps working across reloads.
  Connect(**ctx, ClientOptions());
  ASSERT_TRUE(Handshake().first.done());
  TestIdentity renewed("renewed.localhost", &ca_, false, dir_.path(), "renewed");
  copy(renewed.cert_file(), o.cert_file);
  copy(renewed.key_file(), o.key_file);
  ASSERT_TRUE((*ctx)->Reload().ok());
  // A broken key: refused, the renewed pair stays in use.
  { std::ofstream(o.key_file, std::ios::trunc) << "garbage\n"; }
  EXPECT_FALSE((*ctx)->Reload().ok());
  EXPECT_EQ(Transfer(*client_t_, *server_t_, "still here"), "still here");
  EXPECT_EQ(SessionOf(*client_t_)->peer_subject, "CN=localhost");
  // A new connection gets the renewed certificate.
  server_t_.reset();
  client_t_.reset();
  ::close(fds_[0]);
  ::close(fds_[1]);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds_), 0);
  TlsClientOptions co = ClientOptions();
  co.server_name = "renewed.localhost";
  Connect(**ctx, co);
  auto [s, c] = Handshake();
  ASSERT_TRUE(s.done()) << server_t_->last_error();
  ASSERT_TRUE(c.done()) << client_t_->last_error();
  EXPECT_EQ(SessionOf(*client_t_)->peer_subject, "CN=renewed.localhost");
  EXPECT_EQ((*ctx)->subject(), "CN=renewed.localhost");
  EXPECT_EQ(Transfer(*client_t_, *server_t_, "renewed"), "renewed");
}

}  // namespace
}  // namespace sluice::net
