// SASL on a Kafka connection (docs/design/0004-sasl.md): SaslHandshake, SaslAuthenticate,
// the unframed token exchange after SaslHandshake v0, and the gate that lets nothing
// else through before authentication. The connection's progress is its HandlerState.
#include "base/logging.h"
#include "broker/handlers/handlers.h"
#include "broker/loggers.h"

namespace sluice::broker::handlers {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;

// A connection's SASL progress when SASL is on.
struct SaslState : Connection::HandlerState {
  enum class Phase {
    kHandshake,     // nothing but ApiVersions and SaslHandshake yet
    kAuthenticate,  // SaslHandshake v1 done: SaslAuthenticate requests carry the tokens
    kRawToken,      // SaslHandshake v0 done: the next frames are bare tokens
    kDone,          // authenticated
  };
  Phase phase = Phase::kHandshake;
  std::unique_ptr<SaslSession> session;
  std::string principal;
};

SaslState& SaslStateOf(Connection& conn) {
  auto& slot = conn.handler_state();
  if (slot == nullptr) slot = std::make_unique<SaslState>();
  return static_cast<SaslState&>(*slot);
}

}  // namespace

bool SaslTakesRawToken(Context& ctx, const std::shared_ptr<Connection>& conn,
                       std::span<const uint8_t> frame) {
  if (ctx.sasl == nullptr || !conn->sasl_listener()) return false;
  SaslState& st = SaslStateOf(*conn);
  if (st.phase != SaslState::Phase::kRawToken) return false;
  SaslSession::Step step = st.session->Next(frame);
  if (step.state == SaslSession::State::kFailed) {
    // The unframed exchange has no way to say why: Kafka closes the connection too.
    SLUICE_LOG(kLog, kInfo, "SASL: authentication failed: {}", step.error);
    conn->Close();
    return true;
  }
  if (step.state == SaslSession::State::kSucceeded) {
    st.phase = SaslState::Phase::kDone;
    conn->SetAuthenticated();
    st.principal = st.session->principal();
    conn->SetPrincipal("User:" + st.principal);
    st.session.reset();
  }
  Response out;
  out.buffer = std::move(step.response);
  conn->Send(std::move(out));
  return true;
}

bool SaslAdmits(Context& ctx, const std::shared_ptr<Connection>& conn, ApiKey key) {
  // Only a SASL listener's connections authenticate (docs/design/0019-security.md).
  if (ctx.sasl == nullptr || !conn->sasl_listener()) return true;
  if (SaslStateOf(*conn).phase == SaslState::Phase::kDone || key == ApiKey::kApiVersions ||
      key == ApiKey::kSaslHandshake || key == ApiKey::kSaslAuthenticate) {
    return true;
  }
  // As Kafka: anything else before authentication ends the connection.
  SLUICE_LOG(kLog, kWarn, "closing connection: {} before SASL authentication", kafka::ApiName(key));
  conn->Close();
  return false;
}

void HandleSaslHandshake(Context& ctx, const Call& call, const kafka::SaslHandshakeRequest& req) {
  const std::shared_ptr<Connection>& conn = call.conn;
  const kafka::RequestHeader& h = call.header;
  kafka::SaslHandshakeResponse resp;
  if (ctx.sasl == nullptr || !conn->sasl_listener()) {
    // A plaintext listener, as Kafka answers it: no SASL exchange is expected here.
    resp.error_code = ErrorCode::kIllegalSaslState;
    Reply(conn, h, resp);
    return;
  }
  SaslState& st = SaslStateOf(*conn);
  resp.mechanisms = ctx.sasl->mechanisms();
  if (st.phase != SaslState::Phase::kHandshake) {
    resp.error_code = ErrorCode::kIllegalSaslState;
    Reply(conn, h, resp);
    return;
  }
  st.session = ctx.sasl->Start(req.mechanism);
  if (st.session == nullptr) {
    resp.error_code = ErrorCode::kUnsupportedSaslMechanism;
    Reply(conn, h, resp);
    return;
  }
  st.phase = h.api_version == 0 ? SaslState::Phase::kRawToken : SaslState::Phase::kAuthenticate;
  Reply(conn, h, resp);
}

void HandleSaslAuthenticate(Context& ctx, const Call& call,
                            const kafka::SaslAuthenticateRequest& req) {
  const std::shared_ptr<Connection>& conn = call.conn;
  const kafka::RequestHeader& h = call.header;
  kafka::SaslAuthenticateResponse resp;
  SaslState* st = ctx.sasl != nullptr && conn->sasl_listener() ? &SaslStateOf(*conn) : nullptr;
  if (st != nullptr && st->phase == SaslState::Phase::kDone) {
    // Kafka: answered, and the authenticated connection stays open.
    resp.error_code = ErrorCode::kIllegalSaslState;
    resp.error_message = "SaslAuthenticate received after successful authentication";
    Reply(conn, h, resp);
    return;
  }
  if (st == nullptr || st->phase != SaslState::Phase::kAuthenticate) {
    resp.error_code = ErrorCode::kIllegalSaslState;
    resp.error_message = "SaslAuthenticate without a SaslHandshake v1 first";
    Response out;
    kafka::Writer w(&out.buffer);
    kafka::EncodeResponseHeader(w, ApiKey::kSaslAuthenticate, h.api_version, h.correlation_id);
    resp.Encode(w, h.api_version);
    conn->SendAndClose(std::move(out));
    return;
  }
  SaslSession::Step step = st->session->Next(req.auth_bytes);
  resp.auth_bytes = std::move(step.response);
  Response out;
  kafka::Writer w(&out.buffer);
  kafka::EncodeResponseHeader(w, ApiKey::kSaslAuthenticate, h.api_version, h.correlation_id);
  switch (step.state) {
    case SaslSession::State::kInProgress:
      resp.Encode(w, h.api_version);
      conn->Send(std::move(out));
      return;
    case SaslSession::State::kSucceeded:
      st->phase = SaslState::Phase::kDone;
      conn->SetAuthenticated();
      st->principal = st->session->principal();
      conn->SetPrincipal("User:" + st->principal);
      st->session.reset();
      SLUICE_LOG(kLog, kDebug, "SASL: authenticated {}", st->principal);
      resp.Encode(w, h.api_version);
      conn->Send(std::move(out));
      return;
    case SaslSession::State::kFailed:
      SLUICE_LOG(kLog, kInfo, "SASL: authentication failed: {}", step.error);
      resp.error_code = ErrorCode::kSaslAuthenticationFailed;
      resp.error_message = step.error;
      resp.auth_bytes.clear();
      resp.Encode(w, h.api_version);
      conn->SendAndClose(std::move(out));
      return;
  }
}

}  // namespace sluice::broker::handlers
