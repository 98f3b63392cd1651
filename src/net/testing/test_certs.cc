#include "net/testing/test_certs.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>

namespace sluice::net::testing {

TestIdentity::TestIdentity(const std::string& cn, const TestIdentity* issuer, bool ca,
                           const std::string& dir, const std::string& file_name, long from_days,
                           long to_days) {
  static std::atomic<long> serial{1};
  key_ = EVP_EC_gen("P-256");
  cert_ = X509_new();
  X509_set_version(cert_, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert_), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert_), from_days * 86400);
  X509_gmtime_adj(X509_getm_notAfter(cert_), to_days * 86400);
  X509_set_pubkey(cert_, key_);
  X509_NAME* name = X509_get_subject_name(cert_);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert_, issuer != nullptr ? X509_get_subject_name(issuer->cert_) : name);
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, issuer != nullptr ? issuer->cert_ : cert_, cert_, nullptr, nullptr, 0);
  auto add = [&](int nid, const std::string& value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str());
    X509_add_ext(cert_, ext, -1);
    X509_EXTENSION_free(ext);
  };
  if (ca) {
    add(NID_basic_constraints, "critical,CA:TRUE");
    add(NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add(NID_basic_constraints, "CA:FALSE");
    add(NID_subject_alt_name, "DNS:" + cn + ",IP:127.0.0.1");
  }
  X509_sign(cert_, issuer != nullptr ? issuer->key_ : key_, EVP_sha256());

  cert_file_ = dir + "/" + file_name + ".crt";
  key_file_ = dir + "/" + file_name + ".key";
  if (FILE* f = std::fopen(cert_file_.c_str(), "w"); f != nullptr) {
    PEM_write_X509(f, cert_);
    std::fclose(f);
  }
  if (FILE* f = std::fopen(key_file_.c_str(), "w"); f != nullptr) {
    ::fchmod(fileno(f), 0600);
    PEM_write_PrivateKey(f, key_, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
  }
}

TestIdentity::~TestIdentity() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

}  // namespace sluice::net::testing
