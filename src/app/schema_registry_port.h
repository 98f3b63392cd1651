// SchemaRegistryPort: sluice serve's Schema Registry (docs/design/0022-schemas.md): the
// registry over the broker's `_schemas` topic, its REST API on schema_registry.addr
// (127.0.0.1:8081 by default, as Confluent's and Redpanda's; "off" turns it off) behind a
// front door like the HTTP port's (TLS with schema_registry.tls), and HTTP Basic logins
// against the user store with schema_registry.auth: basic (the default when the broker
// authenticates Kafka clients).
//
// Lifecycle: Start after the broker listens, before the pipelines (they may read schemas
// from it); Stop before the broker stops.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "broker/service.h"
#include "net/tls.h"
#include "schema/registry/registry.h"

namespace sluice {
class HttpServer;
}

namespace sluice::schema::registry {
class KafkaSchemaLog;
}

namespace sluice::app {

class HttpFrontDoor;

// The config keys the port reads.
inline constexpr std::string_view kSchemaRegistryKeys[] = {
    "schema_registry.addr", "schema_registry.auth", "schema_registry.tls"};
inline constexpr const char* kDefaultSchemaRegistryAddr = "127.0.0.1:8081";

class SchemaRegistryPort {
 public:
  // The schema_registry.* settings checked as Start checks them, nothing started: the
  // address it would listen on, or "off".
  static Result<std::string> CheckConfig(const Config& config, bool have_tls,
                                         bool kafka_authenticates);
  // Null when schema_registry.addr is off.
  static Result<std::unique_ptr<SchemaRegistryPort>> Start(const Config& config,
                                                           broker::KafkaService& kafka,
                                                           std::shared_ptr<net::TlsContext> tls,
                                                           bool kafka_authenticates, bool cluster);
  ~SchemaRegistryPort();

  void Stop();
  schema::registry::Registry& registry() { return *registry_; }
  std::string host() const;
  int port() const;
  // "http://127.0.0.1:8081" (https with TLS).
  std::string url() const;

 private:
  SchemaRegistryPort() = default;
  std::unique_ptr<schema::registry::KafkaSchemaLog> log_;
  std::unique_ptr<schema::registry::Registry> registry_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpFrontDoor> door_;
  bool tls_ = false;
};

}  // namespace sluice::app
