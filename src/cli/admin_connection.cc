#include "cli/admin_connection.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "base/strings.h"

namespace sluice::cli {
namespace {

constexpr int kTimeoutMs = 30'000;
constexpr uint32_t kMaxAnswerBytes = 64 << 20;

}  // namespace

Result<std::unique_ptr<broker::InterBrokerConnection>> ConnectAdmin(const AdminConnectionFlags& f) {
  std::string bootstrap = f.bootstrap;
  if (bootstrap.empty()) {
    const char* env = std::getenv("SLUICE_KAFKA_ADDR");
    bootstrap = env != nullptr && *env != '\0' ? env : "127.0.0.1:9092";
  }
  const size_t colon = bootstrap.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0) port = -1;
  try {
    if (port == 0) port = std::stoi(bootstrap.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port <= 0 || port > 65535) {
    return InvalidArgumentError("--bootstrap '{}' is not HOST:PORT", bootstrap);
  }
  std::string p = AsciiUpper(f.security_protocol);
  if (p.empty()) p = f.sasl_user.empty() ? "PLAINTEXT" : "SASL_PLAINTEXT";
  if (p != "PLAINTEXT" && p != "SSL" && p != "SASL_PLAINTEXT" && p != "SASL_SSL") {
    return InvalidArgumentError(
        "--security-protocol '{}' is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", p);
  }
  auto security = std::make_shared<broker::InterBrokerSecurity>();
  security->listener = p;
  if (p == "SSL" || p == "SASL_SSL") {
    if (f.ca_file.empty()) return InvalidArgumentError("{} needs --ca-file (the broker's CA)", p);
    security->tls = true;
    security->tls_client.ca_file = f.ca_file;
    security->tls_client.cert_file = f.cert_file;
    security->tls_client.key_file = f.key_file;
  }
  if (p == "SASL_PLAINTEXT" || p == "SASL_SSL") {
    const char* password = std::getenv("SLUICE_SASL_PASSWORD");
    if (f.sasl_user.empty() || password == nullptr) {
      return InvalidArgumentError(
          "{} logs in as --sasl-user with the password in $SLUICE_SASL_PASSWORD", p);
    }
    security->sasl_mechanism = f.sasl_mechanism;
    security->sasl_user = f.sasl_user;
    security->sasl_password = password;
  }
  auto conn = std::make_unique<broker::InterBrokerConnection>(bootstrap.substr(0, colon), port,
                                                              Clock::Real(), security);
  RETURN_IF_ERROR(conn->Connect(kTimeoutMs));
  return conn;
}

Result<std::vector<uint8_t>> AskRaw(broker::InterBrokerConnection& conn, kafka::ApiKey api,
                                    int16_t version, const std::string& client_id,
                                    const std::function<void(kafka::Writer&)>& encode,
                                    size_t* body_at) {
  auto answer =
      conn.RoundTrip(api, version, client_id, encode, kTimeoutMs, kMaxAnswerBytes, body_at);
  if (!answer.ok() && answer.status().message().find("connection closed") != std::string::npos) {
    // A SASL listener closes a connection whose first request is not SASL's.
    return Status(answer.status().code(),
                  fmt::format("{} (the broker closed the connection: does this listener want "
                              "SASL or TLS? see --security-protocol and --sasl-user)",
                              answer.status().message()));
  }
  return answer;
}

}  // namespace sluice::cli
