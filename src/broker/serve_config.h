// ServeConfig: the broker's part of what `sluice serve` is configured with, read from a
// Config (the YAML file given by --config, with command-line flags set over it). The keys,
// their defaults and what they mean are listed in docs/config.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "broker/broker.h"
#include "broker/server.h"

namespace sluice::broker {

struct ServeConfig {
  ServerOptions server;   // kafka.addr, shards, kafka.max_request_bytes
  BrokerOptions broker;   // data_dir, storage.*, topics.*, groups.*, sasl.*, kafka.advertised_addr
};

// Reads and checks the broker's keys (ServeConfigKeys). Keys of other sections are left to
// the modules that read them; the composition root (src/app) refuses a key no module
// knows.
Result<ServeConfig> ServeConfigFrom(const Config& config);

// The keys ServeConfigFrom reads: kafka.*, data_dir, shards, storage.*, topics.*, groups.*
// and sasl.*.
const std::vector<std::string_view>& ServeConfigKeys();

// "HOST:PORT" with an IPv4 host (or "localhost") and a port 0-65535.
Status ParseHostPort(std::string_view text, std::string* host, uint16_t* port);

}  // namespace sluice::broker
