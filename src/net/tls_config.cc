#include "net/tls_config.h"

namespace sluice::net {

const std::vector<std::string_view>& TlsConfigKeys() {
  static const std::vector<std::string_view> keys = {
      "tls.cert_file",   "tls.key_file", "tls.ca_file",      "tls.client_auth",
      "tls.min_version", "tls.ciphers",  "tls.ciphersuites", "tls.ktls"};
  return keys;
}

Result<std::optional<TlsOptions>> TlsOptionsFromConfig(const Config& config) {
  std::string_view first_set;
  for (std::string_view key : TlsConfigKeys()) {
    if (config.Has(key)) {
      first_set = key;
      break;
    }
  }
  if (first_set.empty()) return std::optional<TlsOptions>();
  for (std::string_view needed : {"tls.cert_file", "tls.key_file"}) {
    if (!config.Has(needed)) {
      return InvalidArgumentError("{} (set in {}) needs {} too", first_set,
                                  config.Origin(first_set), needed);
    }
  }
  TlsOptions o;
  ASSIGN_OR_RETURN(o.cert_file, config.GetString("tls.cert_file", ""));
  ASSIGN_OR_RETURN(o.key_file, config.GetString("tls.key_file", ""));
  ASSIGN_OR_RETURN(o.ca_file, config.GetString("tls.ca_file", ""));
  ASSIGN_OR_RETURN(std::string auth, config.GetString("tls.client_auth", "none"));
  Result<ClientAuth> parsed = ParseClientAuth(auth);
  if (!parsed.ok()) {
    return InvalidArgumentError("{} (set in {})", parsed.status().message(),
                                config.Origin("tls.client_auth"));
  }
  o.client_auth = *parsed;
  ASSIGN_OR_RETURN(o.min_version, config.GetString("tls.min_version", "1.2"));
  if (o.min_version != "1.2" && o.min_version != "1.3") {
    return InvalidArgumentError("tls.min_version (set in {}): '{}' must be 1.2 or 1.3",
                                config.Origin("tls.min_version"), o.min_version);
  }
  ASSIGN_OR_RETURN(o.ciphers, config.GetString("tls.ciphers", TlsOptions::kDefaultCiphers));
  ASSIGN_OR_RETURN(o.ciphersuites, config.GetString("tls.ciphersuites", ""));
  ASSIGN_OR_RETURN(o.ktls, config.GetBool("tls.ktls", true));
  for (const char* key : {"tls.cert_file", "tls.key_file"}) {
    ASSIGN_OR_RETURN(std::string v, config.GetString(key, ""));
    if (v.empty()) {
      return InvalidArgumentError("{} (set in {}) is empty: it must name a PEM file", key,
                                  config.Origin(key));
    }
  }
  return std::optional<TlsOptions>(std::move(o));
}

}  // namespace sluice::net
