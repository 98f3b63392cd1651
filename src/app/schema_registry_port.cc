// SchemaRegistryPort: the registry, its log and its port (schema_registry_port.h).
#include "app/schema_registry_port.h"

#include <fmt/format.h>

#include "app/http_front_door.h"
#include "auth/http_auth.h"
#include "base/http_server.h"
#include "base/metrics.h"
#include "schema/registry/kafka_log.h"
#include "schema/registry/registry_http.h"

namespace sluice::app {

using schema::registry::KafkaSchemaLog;
using schema::registry::Registry;

Result<std::string> SchemaRegistryPort::CheckConfig(const Config& config, bool have_tls,
                                                    bool kafka_authenticates) {
  ASSIGN_OR_RETURN(std::string addr,
                   config.GetString("schema_registry.addr", kDefaultSchemaRegistryAddr));
  if (addr == "off") return addr;
  ASSIGN_OR_RETURN(std::string auth, config.GetString("schema_registry.auth",
                                                      kafka_authenticates ? "basic" : "none"));
  if (auth != "none" && auth != "basic") {
    return InvalidArgumentError("schema_registry.auth (set in {}): '{}' is not none or basic",
                                config.Origin("schema_registry.auth"), auth);
  }
  ASSIGN_OR_RETURN(bool use_tls, config.GetBool("schema_registry.tls", false));
  if (use_tls && !have_tls) {
    return InvalidArgumentError(
        "schema_registry.tls (set in {}) serves HTTPS with the tls: section's certificate, but "
        "there is no tls: section",
        config.Origin("schema_registry.tls"));
  }
  return addr;
}

Result<std::unique_ptr<SchemaRegistryPort>> SchemaRegistryPort::Start(
    const Config& config, broker::KafkaService& kafka, std::shared_ptr<net::TlsContext> tls,
    bool kafka_authenticates, bool cluster) {
  ASSIGN_OR_RETURN(std::string addr, CheckConfig(config, tls != nullptr, kafka_authenticates));
  if (addr == "off") return std::unique_ptr<SchemaRegistryPort>();
  ASSIGN_OR_RETURN(std::string auth, config.GetString("schema_registry.auth",
                                                      kafka_authenticates ? "basic" : "none"));
  ASSIGN_OR_RETURN(bool use_tls, config.GetBool("schema_registry.tls", false));
  std::unique_ptr<SchemaRegistryPort> p(new SchemaRegistryPort());
  p->tls_ = use_tls;
  p->registry_ = std::make_unique<Registry>(nullptr);
  schema::registry::KafkaSchemaLogOptions log_options;
  for (const auto& [k, v] : kafka.InternalClientProperties()) log_options.client[k] = v;
  log_options.cluster = cluster;
  auto log = KafkaSchemaLog::Open(std::move(log_options), p->registry_.get());
  if (!log.ok()) {
    return Status(log.status().code(), fmt::format("schema registry: {}", log.status().message()));
  }
  p->log_ = std::move(log).value();
  p->registry_->set_log(p->log_.get());
  // Served only once the registry has read its log to the end: an answer from a registry
  // that is still reading would miss schemas.
  RETURN_IF_ERROR(p->registry_->CatchUp(std::chrono::seconds(30)));

  std::vector<HttpRoute> routes;
  routes.push_back({"/", [r = p->registry_.get()](const HttpRequest& req) {
                      return schema::registry::HandleRegistryRequest(*r, req);
                    }});
  HttpServerOptions options;
  if (auth == "basic") {
    auto login = std::make_shared<auth::HttpAuth>(
        auth::HttpAuthOptions{.users = kafka.broker().users(), .accept_basic = true});
    options.authenticate = auth::HttpAuth::Hook(login);
  }
  // Browser safety as on the HTTP port (docs/design/0021): the registry's clients send
  // its own content type with a POST, which no cross-site form can; DELETE and PUT are
  // preflighted by browsers, and no preflight is approved.
  options.browser_guard = {
      .enabled = true,
      .allowed_hosts = {"localhost", "127.0.0.1", "::1", addr.substr(0, addr.rfind(':'))},
      .preflighted_methods_pass = true};
  auto peers = std::make_shared<HttpPeers>();
  options.peer_of = [peers](const std::string& a, int port) { return peers->Get(a, port); };
  ASSIGN_OR_RETURN(p->http_,
                   HttpServer::Start(
                       "127.0.0.1:0", MetricsRegistry::Global(), [] { return std::string(); },
                       std::move(routes), std::move(options)));
  auto door = HttpFrontDoor::Start({.listen_addr = addr,
                                    .backend_port = p->http_->port(),
                                    .tls = use_tls ? tls : nullptr,
                                    .peers = peers});
  if (!door.ok()) {
    return Status(door.status().code(),
                  fmt::format("schema_registry.addr: {}", door.status().message()));
  }
  p->door_ = std::move(door).value();
  return p;
}

SchemaRegistryPort::~SchemaRegistryPort() { Stop(); }

void SchemaRegistryPort::Stop() {
  if (door_) door_->Stop();
  if (http_) http_->Stop();
  log_.reset();
}

std::string SchemaRegistryPort::host() const { return door_ ? door_->host() : ""; }
int SchemaRegistryPort::port() const { return door_ ? door_->port() : 0; }
std::string SchemaRegistryPort::url() const {
  return fmt::format("{}://{}:{}", tls_ ? "https" : "http", host(), port());
}

}  // namespace sluice::app
