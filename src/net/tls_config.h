// The `tls:` section of sluice's config (docs/config.md, docs/design/0019-security.md):
// one certificate and its settings, used by every listener that asks for TLS.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "net/tls.h"

namespace sluice::net {

// The section's options, or nullopt when it is absent (no tls.* key set). Each key is
// checked (client_auth's and min_version's values, ktls a boolean); the files themselves
// are read by TlsContext::Create. A tls.* key without tls.cert_file and tls.key_file is
// an error naming it.
Result<std::optional<TlsOptions>> TlsOptionsFromConfig(const Config& config);

// tls.cert_file, tls.key_file, tls.ca_file, tls.client_auth, tls.min_version, tls.ciphers,
// tls.ciphersuites, tls.ktls.
const std::vector<std::string_view>& TlsConfigKeys();

}  // namespace sluice::net
