// Test certificates made with OpenSSL's API (no openssl CLI, no files in the repository):
// a CA, certificates it signs, written as PEM files with the key readable by its owner
// only. For unit tests of TLS; integration tests make theirs with the openssl CLI.
#pragma once

#include <string>

typedef struct evp_pkey_st EVP_PKEY;
typedef struct x509_st X509;

namespace sluice::net::testing {

// An EC P-256 key and its certificate, and the files they were written to.
class TestIdentity {
 public:
  // A certificate for `cn` signed by `issuer` (self-signed when null), valid from
  // `from_days` to `to_days` around now; a CA's can sign, a leaf's names `cn` and
  // 127.0.0.1 as subject alternative names. Written to <dir>/<file_name>.crt and .key.
  TestIdentity(const std::string& cn, const TestIdentity* issuer, bool ca, const std::string& dir,
               const std::string& file_name, long from_days = -1, long to_days = 30);
  ~TestIdentity();
  TestIdentity(const TestIdentity&) = delete;
  TestIdentity& operator=(const TestIdentity&) = delete;

  const std::string& cert_file() const { return cert_file_; }
  const std::string& key_file() const { return key_file_; }

 private:
  EVP_PKEY* key_ = nullptr;
  X509* cert_ = nullptr;
  std::string cert_file_, key_file_;
};

}  // namespace sluice::net::testing
