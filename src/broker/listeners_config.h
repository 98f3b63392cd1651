// Kafka's named listeners in sluice's config: kafka.listeners and
// kafka.advertised_listeners (docs/design/0019-security.md, phase B), with Kafka's
// security protocol names as the listener names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.h"
#include "base/status.h"

namespace sluice::broker {

struct KafkaListener {
  std::string name;  // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: also its protocol
  std::string host;  // where it listens: an IPv4 address
  uint16_t port = 0;
  // What Metadata answers a request that came in on it: kafka.advertised_listeners' entry
  // of the same name, else host:port (a port of 0 is known once the socket is bound).
  std::string advertised_host;
  uint16_t advertised_port = 0;

  bool tls() const { return name == "SSL" || name == "SASL_SSL"; }
  bool sasl() const { return name == "SASL_PLAINTEXT" || name == "SASL_SSL"; }
};

// What the listeners' checks need to know of the rest of the config.
struct ListenerContext {
  bool tls_configured = false;  // the tls: section is there
  bool sasl_enabled = false;    // sasl.enabled
};

// kafka.listeners and kafka.advertised_listeners, each a YAML list or one string of
// comma-separated entries (Kafka's form), each entry NAME://HOST:PORT. nullopt when
// kafka.listeners is not set. Errors name the key, where it was set and the entry:
// kafka.addr or kafka.advertised_addr beside them; an unknown or repeated name; a HOST
// that is not IPv4 (listeners; advertised hosts may be names); two listeners on one
// address; an advertised name that does not listen, or a port outside 1-65535; 0.0.0.0
// without an advertised entry; SSL or SASL_SSL without the tls: section; SASL_* without
// sasl.enabled, or sasl.enabled without a SASL listener.
Result<std::optional<std::vector<KafkaListener>>> KafkaListenersFromConfig(
    const Config& config, const ListenerContext& context);

}  // namespace sluice::broker
