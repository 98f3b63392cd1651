// ServeConfig: everything `sluice serve` is configured with, read from a Config (the YAML
// file given by --config, with command-line flags set over it). The keys, their defaults
// and what they mean are listed in docs/config.md; an unknown key is an error naming it
// and where it was set, so a misspelt setting cannot pass silently.
#pragma once

#include <cstdint>
#include <string>

#include "base/config.h"
#include "base/status.h"
#include "broker/broker.h"
#include "broker/server.h"

namespace sluice::broker {

struct ServeConfig {
  ServerOptions server;   // kafka.addr, shards, kafka.max_request_bytes
  BrokerOptions broker;   // data_dir, storage.*, topics.*, kafka.advertised_addr
  Config raw;             // the whole config, for sections other modules read (sasl, groups)
};

// Reads and checks every key of `sluice serve` (the sasl.* and groups.* keys are checked
// for being known here and read where they are wired).
Result<ServeConfig> ServeConfigFrom(const Config& config);

// "HOST:PORT" with an IPv4 host (or "localhost") and a port 0-65535.
Status ParseHostPort(std::string_view text, std::string* host, uint16_t* port);

}  // namespace sluice::broker
