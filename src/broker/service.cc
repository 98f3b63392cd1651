#include "broker/service.h"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/sasl.h"

namespace sluice::broker {
Result<std::unique_ptr<KafkaService>> KafkaService::Start(const ServeConfig& config) {
  std::unique_ptr<KafkaService> service(new KafkaService());
  ASSIGN_OR_RETURN(service->broker_, Broker::Open(config.broker));
  service->server_ = std::make_unique<Server>(config.server, service->broker_.get());
  if (Status st = service->server_->Start(); !st.ok()) {
    service->server_.reset();
    if (Status closed = service->broker_->Close(); !closed.ok()) {
      SLUICE_LOG(kLog, kWarn, "closing after a failed start: {}", closed.ToString());
    }
    return st;
  }
  for (const KafkaListener& l : config.broker.listeners) {
    service->listeners_.push_back({l.name, l.host, service->server_->port(l.name)});
  }
  if (config.broker.listeners.empty()) {
    service->listeners_.push_back({config.broker.sasl.enabled ? "SASL_PLAINTEXT" : "PLAINTEXT",
                                   config.server.host, service->server_->port()});
  }
  if (config.broker.sasl.enabled) service->sasl_mechanisms_ = config.broker.sasl.mechanisms;
  if (!config.broker.listeners.empty()) {
    // kafka.listeners: each its advertised address, a port of 0 the one the kernel chose.
    std::vector<MetadataSnapshot::Endpoint> endpoints;
    for (const KafkaListener& l : config.broker.listeners) {
      const int32_t port =
          l.advertised_port != 0 ? l.advertised_port : service->server_->port(l.name);
      endpoints.push_back({l.name, l.advertised_host, port});
    }
    service->broker_->SetAdvertisedAddress(endpoints[0].host, endpoints[0].port);
    service->broker_->SetAdvertisedEndpoints(std::move(endpoints));
  } else if (config.broker.advertised_port == 0 ||
             config.broker.advertised_port == config.server.port) {
    // With port 0 the kernel chose one; clients must be told the real one, unless an
    // advertised address was configured.
    const std::string host =
        config.broker.advertised_host.empty() ? config.server.host : config.broker.advertised_host;
    service->broker_->SetAdvertisedAddress(host, service->server_->port());
  }
  return service;
}

std::map<std::string, std::string> KafkaService::InternalClientProperties(
    std::string_view principal) const {
  const Listener* chosen = nullptr;
  for (const char* protocol : {"SASL_PLAINTEXT", "SASL_SSL", "PLAINTEXT"}) {
    for (const Listener& l : listeners_) {
      if (chosen == nullptr && l.protocol == protocol) chosen = &l;
    }
  }
  std::map<std::string, std::string> p;
  if (chosen == nullptr) chosen = &listeners_.front();  // SSL alone: its certificate is ours
  // A listener on every address is reached on loopback.
  const std::string host = chosen->host == "0.0.0.0" ? "127.0.0.1" : chosen->host;
  p["bootstrap.servers"] = fmt::format("{}:{}", host, chosen->port);
  p["security.protocol"] = chosen->protocol;
  if (chosen->protocol == "SASL_PLAINTEXT" || chosen->protocol == "SASL_SSL") {
    std::string mechanism = sasl_mechanisms_.empty() ? "PLAIN" : sasl_mechanisms_.front();
    for (const std::string& m : sasl_mechanisms_) {
      if (m == "PLAIN") mechanism = m;
    }
    p["sasl.mechanism"] = mechanism;
    p["sasl.username"] = principal.empty() ? std::string(kInternalUser)
                                           : fmt::format("{}/{}", kInternalUser, principal);
    p["sasl.password"] = broker_->internal_secret();
  }
  if (chosen->protocol == "SASL_SSL" || chosen->protocol == "SSL") {
    // The process's own listener on this host: its certificate need not name the address
    // connected to (and a client certificate of the process has none to offer).
    p["enable.ssl.certificate.verification"] = "false";
    p["ssl.endpoint.identification.algorithm"] = "none";
  }
  return p;
}

KafkaService::~KafkaService() {
  if (Status st = Stop(0); !st.ok()) SLUICE_LOG(kLog, kError, "stopping: {}", st.ToString());
}

Status KafkaService::Stop(int64_t drain_ms) {
  if (stopped_ || server_ == nullptr) return Status::OK();
  stopped_ = true;
  broker_->ControlledShutdown();  // a cluster's leaderships move first, while serving
  server_->StopAccepting();
  broker_->Drain();
  // Acks and fetch answers are posted to the loops; let them be written.
  const int64_t deadline = MonotonicNanos() + drain_ms * 1'000'000;
  int busy = server_->BusyConnectionCount();
  while (busy > 0 && MonotonicNanos() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    busy = server_->BusyConnectionCount();
  }
  if (busy > 0) SLUICE_LOG(kLog, kWarn, "stopping with {} requests still in flight", busy);
  broker_->StopWaking();
  server_->Stop();
  return broker_->Close();
}

}  // namespace sluice::broker
