// ServeConfig: the broker's part of what `sluice serve` is configured with, read from a
// Config (the YAML file given by --config, with command-line flags set over it). The keys,
// their defaults and what they mean are listed in docs/config.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "broker/broker_options.h"
#include "broker/server.h"

namespace sluice::broker {

struct ServeConfig {
  ServerOptions server;  // kafka.addr or kafka.listeners, shards, kafka.max_request_bytes
  // The tls: section's context, shared by the listeners that use it (SIGHUP reloads it);
  // null without the section.
  std::shared_ptr<net::TlsContext> tls;
  BrokerOptions broker;  // data_dir, storage.*, topics.*, groups.*, transactions.*, sasl.*,
                         // kafka.advertised_addr, and the cluster (broker.cluster)
};

// Reads and checks the broker's keys (ServeConfigKeys). A key that is neither one of them
// nor in `other_keys` (what the process's other modules read, gathered by the composition
// root, src/app) is an error naming it and where it was set.
Result<ServeConfig> ServeConfigFrom(const Config& config,
                                    std::span<const std::string_view> other_keys = {});

// The keys ServeConfigFrom reads: kafka.*, data_dir, shards, storage.*, topics.*, groups.*,
// transactions.*, sasl.*, and the cluster's etcd, node_id, inter_broker_addr and cluster.*.
const std::vector<std::string_view>& ServeConfigKeys();

// "HOST:PORT" with an IPv4 host (or "localhost") and a port 0-65535.
Status ParseHostPort(std::string_view text, std::string* host, uint16_t* port);

// "http://HOST:PORT" (an optional trailing '/'), the form of an etcd endpoint: a host name
// or IPv4 address and a port 1-65535; https is refused (not supported yet).
Status ParseEtcdEndpoint(std::string_view url);

}  // namespace sluice::broker
