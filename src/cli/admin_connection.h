// A connection to a running broker for the admin commands (`sluice user`, `sluice
// quota`, `sluice acl`): the Kafka protocol over any listener's security protocol, one request at a
// time, as Kafka's admin tools speak it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "broker/inter_broker_connection.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"

namespace sluice::cli {

struct AdminConnectionFlags {
  std::string bootstrap;  // HOST:PORT; default $SLUICE_KAFKA_ADDR or 127.0.0.1:9092
  // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (any case); "" : SASL_PLAINTEXT with a
  // --sasl-user, else PLAINTEXT.
  std::string security_protocol;
  std::string ca_file, cert_file, key_file;  // SSL
  std::string sasl_mechanism = "SCRAM-SHA-256";
  std::string sasl_user;  // its password from $SLUICE_SASL_PASSWORD
};

Result<std::unique_ptr<broker::InterBrokerConnection>> ConnectAdmin(
    const AdminConnectionFlags& flags);

// Sends `req` at `version` and decodes the answer.
Result<std::vector<uint8_t>> AskRaw(broker::InterBrokerConnection& conn, kafka::ApiKey api,
                                    int16_t version, const std::string& client_id,
                                    const std::function<void(kafka::Writer&)>& encode,
                                    size_t* body_at);

template <typename Response, typename Request>
Result<Response> Ask(broker::InterBrokerConnection& conn, kafka::ApiKey api, const Request& req,
                     const std::string& client_id, int16_t version = 0) {
  size_t at = 0;
  ASSIGN_OR_RETURN(
      std::vector<uint8_t> answer,
      AskRaw(
          conn, api, version, client_id, [&](kafka::Writer& w) { req.Encode(w, version); }, &at));
  kafka::Reader r(std::span<const uint8_t>(answer).subspan(at));
  Response resp;
  RETURN_IF_ERROR(resp.Decode(r, version));
  return resp;
}

}  // namespace sluice::cli
