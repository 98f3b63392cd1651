// Fuzz target for the broker's SASL exchanges: the input picks a mechanism (first byte:
// even PLAIN, odd SCRAM-SHA-256) and then holds up to four client messages, each a
// 2-byte big-endian length and its bytes. Whatever they are, every step must end in a
// state (no crash, no hang), and no exchange may succeed without the right password.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "broker/sasl.h"

using namespace sluice::broker;

namespace {

const SaslAuthenticator& Authenticator() {
  static std::unique_ptr<SaslAuthenticator> auth = [] {
    SaslConfig config;
    config.enabled = true;
    config.users = {{"alice", "alice-secret"}, {"a,b=c", "x"}};
    auto created = SaslAuthenticator::Create(config);
    if (!created.ok()) std::abort();
    return std::move(*created);
  }();
  return *auth;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto session = Authenticator().Start(data[0] % 2 == 0 ? "PLAIN" : "SCRAM-SHA-256");
  if (session == nullptr) std::abort();
  size_t pos = 1;
  for (int step = 0; step < 4 && pos + 2 <= size; ++step) {
    size_t len = size_t{data[pos]} << 8 | data[pos + 1];
    pos += 2;
    len = std::min(len, size - pos);
    SaslSession::Step s = session->Next(std::span<const uint8_t>(data + pos, len));
    pos += len;
    // A fuzzer cannot know a SCRAM proof; a PLAIN success needs the password verbatim.
    if (s.state == SaslSession::State::kSucceeded && data[0] % 2 == 1) std::abort();
    if (s.state != SaslSession::State::kInProgress) break;
  }
  return 0;
}
