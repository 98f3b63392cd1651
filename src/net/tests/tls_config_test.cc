#include "net/tls_config.h"

#include <gtest/gtest.h>

namespace sluice::net {
namespace {

Result<std::optional<TlsOptions>> From(std::string_view yaml) {
  auto config = Config::Parse(yaml, "sluice.yaml");
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  if (!config.ok()) return config.status();
  return TlsOptionsFromConfig(*config);
}

std::string Error(std::string_view yaml) {
  auto r = From(yaml);
  EXPECT_FALSE(r.ok()) << yaml;
  return r.ok() ? "" : r.status().message();
}

TEST(TlsConfigTest, AbsentIsNoTls) {
  auto r = From("kafka:\n  addr: 127.0.0.1:9092\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(TlsConfigTest, EveryKeyAndTheDefaults) {
  auto r = From("tls:\n  cert_file: /etc/sluice/b.crt\n  key_file: /etc/sluice/b.key\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const TlsOptions& o = **r;
  EXPECT_EQ(o.cert_file, "/etc/sluice/b.crt");
  EXPECT_EQ(o.key_file, "/etc/sluice/b.key");
  EXPECT_EQ(o.ca_file, "");
  EXPECT_EQ(o.client_auth, ClientAuth::kNone);
  EXPECT_EQ(o.min_version, "1.2");
  EXPECT_EQ(o.ciphers, TlsOptions::kDefaultCiphers);
  EXPECT_TRUE(o.ktls);
  r = From(
      "tls:\n  cert_file: c\n  key_file: k\n  ca_file: ca\n  client_auth: required\n"
      "  min_version: '1.3'\n  ciphers: ECDHE-RSA-AES128-GCM-SHA256\n  ktls: false\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->ca_file, "ca");
  EXPECT_EQ((*r)->client_auth, ClientAuth::kRequired);
  EXPECT_EQ((*r)->min_version, "1.3");
  EXPECT_EQ((*r)->ciphers, "ECDHE-RSA-AES128-GCM-SHA256");
  EXPECT_FALSE((*r)->ktls);
}

TEST(TlsConfigTest, MalformedSectionsNameTheKeyAndTheLine) {
  EXPECT_EQ(Error("tls:\n  ca_file: ca\n"),
            "tls.ca_file (set in sluice.yaml:2) needs tls.cert_file too");
  EXPECT_NE(Error("tls:\n  cert_file: c\n").find("needs tls.key_file"), std::string::npos);
  EXPECT_NE(Error("tls:\n  cert_file: c\n  key_file: k\n  client_auth: maybe\n")
                .find("must be none, requested or required (set in sluice.yaml:4)"),
            std::string::npos);
  EXPECT_NE(Error("tls:\n  cert_file: c\n  key_file: k\n  min_version: '1.1'\n")
                .find("'1.1' must be 1.2 or 1.3"),
            std::string::npos);
  EXPECT_NE(Error("tls:\n  cert_file: c\n  key_file: k\n  ktls: sometimes\n").find("tls.ktls"),
            std::string::npos);
  EXPECT_NE(Error("tls:\n  cert_file: ''\n  key_file: k\n").find("is empty"), std::string::npos);
}

}  // namespace
}  // namespace sluice::net
