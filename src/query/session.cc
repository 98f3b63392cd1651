#include "query/session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/logging.h"
#include "base/strings.h"
#include "base/utf8.h"
#include "query/loggers.h"
#include "query/server_state.h"

namespace sluice::query {

int64_t SessionNowMs();  // server.cc

namespace {

constexpr size_t kFlushBytes = 256 << 10;

// The peer's address, for messages ("127.0.0.1"); "" when the socket does not say.
std::string PeerHost(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  char text[INET_ADDRSTRLEN] = {};
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      addr.sin_family != AF_INET ||
      ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text)) == nullptr) {
    return "";
  }
  return text;
}

// SQLSTATE of a DuckDB error (docs/design/0010-query-server.md, decision 7).
std::string SqlStateFor(duck::ErrorType type, std::string_view msg) {
  auto has = [&](std::string_view s) { return msg.find(s) != std::string_view::npos; };
  using duck::ErrorType;
  switch (type) {
    case ErrorType::kParser:
    case ErrorType::kSyntax:
      return "42601";
    case ErrorType::kCatalog:
      if (has("already exists")) return "42P07";
      if (has("Schema") || has("schema")) return "3F000";
      if (has("Function") || has("function") || has("Macro")) return "42883";
      if (has("Table") || has("View") || has("table") || has("view")) return "42P01";
      return "42704";
    case ErrorType::kBinder:
      if (has("no such topic")) return "42P01";  // topic(): a topic is a relation
      if (has("column") || has("Column")) return "42703";
      if (has("function") || has("Function")) return "42883";
      return "42P18";
    case ErrorType::kPermission:
      return "42501";
    case ErrorType::kInterrupt:
      return "57014";
    case ErrorType::kOutOfMemory:
      return "53200";
    case ErrorType::kConstraint:
      if (has("NOT NULL")) return "23502";
      if (has("foreign key")) return "23503";
      if (has("CHECK")) return "23514";
      if (has("Duplicate key") || has("unique") || has("primary key")) return "23505";
      return "23000";
    case ErrorType::kConversion:
      return "22P02";
    case ErrorType::kOutOfRange:
    case ErrorType::kDecimal:
      return "22003";
    case ErrorType::kDivideByZero:
      return "22012";
    case ErrorType::kInvalidInput:
      if (has("configuration has been locked")) return "42501";
      return "22023";
    case ErrorType::kMismatchType:
    case ErrorType::kInvalidType:
      return "42804";
    case ErrorType::kTransaction:
      return has("aborted") ? "25P02" : "25000";
    case ErrorType::kNotImplemented:
      return "0A000";
    case ErrorType::kIO:
      return "58030";
    case ErrorType::kParameterNotResolved:
      return "42P18";
    case ErrorType::kParameterNotAllowed:
      return "42P02";
    case ErrorType::kDependency:
      return "2BP01";
    case ErrorType::kSequence:
      return "2200H";
    case ErrorType::kSerialization:
      return "40001";
    case ErrorType::kMissingExtension:
    case ErrorType::kAutoload:
      return "0A000";
    case ErrorType::kExpression:
      return "42000";
    default:
      return "XX000";
  }
}

// DuckDB's message without the "DuckDB: " prefix of duck::Status and without the
// "LINE 1: ..." excerpt (clients show the message on one line).
std::string CleanMessage(std::string_view msg) {
  if (msg.starts_with("DuckDB: ")) msg.remove_prefix(8);
  size_t line = msg.find("\n\nLINE ");
  if (line != std::string_view::npos) msg = msg.substr(0, line);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.remove_suffix(1);
  std::string out(msg);
  // DuckDB's "Did you mean" may name the catalog emulation's own views and macros.
  size_t mean = out.find("\nDid you mean \"sluice_");
  if (mean != std::string::npos) {
    size_t end = out.find('\n', mean + 1);
    out.erase(mean, end == std::string::npos ? std::string::npos : end - mean);
  }
  return out;
}

bool ReturnsChangedRows(const duck::PreparedStatement& p) {
  auto t = p.type();
  return (t == duck::StatementType::kInsert || t == duck::StatementType::kUpdate ||
          t == duck::StatementType::kDelete) &&
         p.column_count() == 1 && p.column_name(0) == "Count";
}

bool StatementReturnsRows(const duck::PreparedStatement& p) {
  if (p.column_count() == 0) return false;
  switch (p.type()) {
    case duck::StatementType::kSelect:
    case duck::StatementType::kExplain:
    case duck::StatementType::kPragma:
    case duck::StatementType::kCall:
    case duck::StatementType::kExecute:
    case duck::StatementType::kRelation:
    case duck::StatementType::kLogicalPlan:
      return true;
    case duck::StatementType::kInsert:
    case duck::StatementType::kUpdate:
    case duck::StatementType::kDelete:
      return !ReturnsChangedRows(p);
    default:
      return false;
  }
}

// A parameter type as SQL for a literal's CAST: "" when DuckDB inferred none (the bound
// VARCHAR then stays one), nullopt for types not written here (the statement is then
// never planned with steps at execution).
std::optional<std::string> ParamTypeSql(const std::optional<duck::LogicalType>& type) {
  if (!type) return std::string();
  const duck::LogicalType& t = *type;
  std::string alias = t.alias();
  if (!alias.empty()) return alias == "JSON" ? std::optional<std::string>(alias) : std::nullopt;
  using duck::TypeId;
  switch (t.id()) {
    case TypeId::kAny:
    case TypeId::kSqlNull:
      return std::string();
    case TypeId::kBoolean:
    case TypeId::kTinyInt:
    case TypeId::kSmallInt:
    case TypeId::kInteger:
    case TypeId::kBigInt:
    case TypeId::kUTinyInt:
    case TypeId::kUSmallInt:
    case TypeId::kUInteger:
    case TypeId::kUBigInt:
    case TypeId::kHugeInt:
    case TypeId::kUHugeInt:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kTimestamp:
    case TypeId::kTimestampS:
    case TypeId::kTimestampMs:
    case TypeId::kTimestampNs:
    case TypeId::kTimestampTz:
    case TypeId::kDate:
    case TypeId::kTime:
    case TypeId::kInterval:
    case TypeId::kVarchar:
    case TypeId::kBlob:
    case TypeId::kUuid:
      return std::string(duck::TypeIdName(t.id()));
    case TypeId::kDecimal:
      return fmt::format("DECIMAL({}, {})", t.DecimalWidth(), t.DecimalScale());
    case TypeId::kList: {
      auto child = ParamTypeSql(t.ListChild());
      if (!child || child->empty()) return std::nullopt;
      return *child + "[]";
    }
    default:
      return std::nullopt;
  }
}

// The DuckDB type, as SQL, of a binary parameter value DecodeParam decodes by `o`; nullopt
// for bytea and arrays (no literal form here) and types without a decoder.
std::optional<std::string> BinaryValueTypeSql(uint32_t o) {
  switch (o) {
    case oid::kBool:
      return "BOOLEAN";
    case oid::kInt2:
      return "SMALLINT";
    case oid::kInt4:
      return "INTEGER";
    case oid::kOid:
    case oid::kInt8:
      return "BIGINT";
    case oid::kFloat4:
      return "FLOAT";
    case oid::kFloat8:
      return "DOUBLE";
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName:
    case oid::kJson:
    case oid::kJsonb:
    case oid::kUnknown:
    case oid::kNumeric:
      return "VARCHAR";  // numeric is decoded to its text
    case oid::kDate:
      return "DATE";
    case oid::kTime:
      return "TIME";
    case oid::kTimestamp:
      return "TIMESTAMP";
    case oid::kTimestampTz:
      return "TIMESTAMP WITH TIME ZONE";
    case oid::kInterval:
      return "INTERVAL";
    case oid::kUuid:
      return "UUID";
    default:
      return std::nullopt;
  }
}

// Whether `final` returns what `plain` does: the same columns, names and DuckDB types
// (so the same RowDescription and encodings), and no parameters.
bool SameResult(const duck::PreparedStatement& plain, const duck::PreparedStatement& final) {
  if (final.param_count() != 0 || final.column_count() != plain.column_count()) return false;
  if (StatementReturnsRows(final) != StatementReturnsRows(plain)) return false;
  for (size_t c = 0; c < plain.column_count(); ++c) {
    if (final.column_name(c) != plain.column_name(c)) return false;
    if (!final.column_type(c).Equals(plain.column_type(c))) return false;
  }
  return true;
}

}  // namespace

// ---- I/O -------------------------------------------------------------------------

bool Session::Fill() {
  if (in_pos_ > 0 && in_pos_ == in_.size()) {
    in_.clear();
    in_pos_ = 0;
  } else if (in_pos_ > (1 << 20)) {
    in_.erase(0, in_pos_);
    in_pos_ = 0;
  }
  char buf[64 << 10];
  net::IoResult r = transport_->Read(buf, sizeof(buf));
  if (!r.done()) {
    // Closed, reset or timed out (SO_RCVTIMEO: kWantRead); a TLS failure says why.
    if (r.state == net::IoResult::State::kError && !transport_->last_error().empty()) {
      SLUICE_LOG(kLog, kInfo, "{}: {} session ended: {}", PeerHost(fd_), transport_->name(),
                 transport_->last_error());
    }
    return false;
  }
  in_.append(buf, r.bytes);
  return true;
}

bool Session::Flush() {
  size_t sent = 0;
  while (sent < out_.size()) {
    net::IoResult r = transport_->Write(out_.data() + sent, out_.size() - sent);
    if (!r.done()) {
      out_.clear();
      return false;
    }
    sent += r.bytes;
  }
  out_.clear();
  return true;
}

bool Session::FlushIfLarge() { return out_.size() < kFlushBytes || Flush(); }

void Session::SendError(const SqlError& e) {
  pg::WriteErrorResponse(out_, {.severity = e.fatal ? "FATAL" : "ERROR",
                                .sqlstate = e.sqlstate,
                                .message = e.message,
                                .hint = e.hint,
                                .position = e.position});
}

void Session::AddCopyHint(std::string_view statement, SqlError& e) {
  if (e.sqlstate != "42501" || !e.hint.empty()) return;
  std::vector<std::string> w = LeadingWords(statement, 1);
  if (w.empty() || w[0] != "COPY") return;
  e.hint =
      "COPY to or from a file runs on the server, inside query.allowed_directories only; "
      "COPY ... TO STDOUT (psql's \\copy) writes on the client.";
}

std::optional<std::string> Session::ReadStartupPacket() {
  while (true) {
    size_t used = 0;
    auto frame = pg::ReadStartupFrame(std::string_view(in_).substr(in_pos_), &used);
    if (!frame.ok()) {
      SLUICE_LOG(kLog, kDebug, "closing a connection: {}", frame.status().message());
      SendError({"08P01", frame.status().message(), true});
      Flush();
      return std::nullopt;
    }
    if (frame->has_value()) {
      std::string body(**frame);
      in_pos_ += used;
      return body;
    }
    if (!Fill()) return std::nullopt;
  }
}

std::optional<pg::Frame> Session::ReadMessage() {
  while (true) {
    size_t used = 0;
    auto frame = pg::ReadFrame(std::string_view(in_).substr(in_pos_),
                               server_.options.max_message_bytes, &used);
    if (!frame.ok()) {
      SLUICE_LOG(kLog, kDebug, "closing a connection: {}", frame.status().message());
      SendError({"08P01", frame.status().message(), true});
      Flush();
      return std::nullopt;
    }
    if (frame->has_value()) {
      in_pos_ += used;
      return **frame;
    }
    if (!Fill()) return std::nullopt;
  }
}

// ---- start-up --------------------------------------------------------------------

void Session::Run() {
  // A client has a minute to start up and authenticate (Postgres's authentication_timeout).
  timeval tv{60, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool ok = Startup();
  if (ok) {
    timeval none{0, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
    Serve();
  }
  portals_.clear();  // runs the cleanup of plans with steps, on the connection still open
  statements_.clear();
  ReleaseTurn();
  if (slot_) {
    server_.Unregister(slot_);
  }
  conn_.reset();
  transport_.reset();  // a TLS session's close_notify goes out before the socket shuts
  ::shutdown(fd_, SHUT_RDWR);
}

bool Session::Startup() {
  pg::StartupPacket startup;
  while (true) {
    std::optional<std::string> body = ReadStartupPacket();
    if (!body) return false;
    auto parsed = pg::ParseStartupPacket(*body);
    if (!parsed.ok()) {
      SendError({parsed.status().code() == StatusCode::kUnimplemented ? "0A000" : "08P01",
                 parsed.status().message(), true});
      Flush();
      return false;
    }
    startup = std::move(parsed).value();
    if (startup.kind == pg::StartupPacket::Kind::kSslRequest && server_.options.tls != nullptr &&
        !tls_) {
      // Bytes sent after the SSLRequest, before the handshake, would be taken as if they
      // came encrypted (CVE-2021-23214): Postgres refuses them, and so does this.
      if (in_pos_ != in_.size()) {
        SendError({"08P01", "received unencrypted data after SSL request", true});
        Flush();
        return false;
      }
      out_ += 'S';
      if (!Flush()) return false;
      transport_ = server_.options.tls->MakeServer(fd_);
      if (transport_ == nullptr) return false;  // no TLS session could be made (SSL_new)
      tls_ = true;
      continue;
    }
    if (startup.kind == pg::StartupPacket::Kind::kSslRequest ||
        startup.kind == pg::StartupPacket::Kind::kGssEncRequest) {
      if (tls_) {
        SendError({"08P01", "an encryption request inside an encrypted session", true});
        Flush();
        return false;
      }
      out_ += 'N';  // no TLS or GSSAPI encryption: the client goes on in the clear or gives up
      if (!Flush()) return false;
      continue;
    }
    break;
  }
  if (server_.options.require_tls && !tls_ && !trusted_user_ &&
      startup.kind != pg::StartupPacket::Kind::kCancel) {
    // Postgres's words for a hostssl-only pg_hba.conf.
    std::string database = startup.Param("database");
    SendError({"28000",
               fmt::format("no pg_hba.conf entry for host \"{}\", user \"{}\", database \"{}\", no "
                           "encryption",
                           PeerHost(fd_), startup.Param("user"),
                           database.empty() ? startup.Param("user") : database),
               true});
    Flush();
    return false;
  }
  if (startup.kind == pg::StartupPacket::Kind::kCancel) {
    server_.Cancel(startup.process_id, startup.secret_key);
    return false;
  }
  user_ = trusted_user_ ? *trusted_user_ : startup.Param("user");
  slot_ = server_.Register(fd_);
  if (!slot_) {
    SendError({"53300", "sorry, too many clients already", true});
    Flush();
    return false;
  }
  if (!trusted_user_ && !Authenticate(user_)) return false;

  auto conn = duck::Connection::Open(*server_.db);
  if (!conn.ok()) {
    SendError({"53000", conn.status().message(), true});
    Flush();
    return false;
  }
  conn_ = std::move(conn).value();
  if (server_.options.hooks.on_session_start) {
    std::string database = startup.Param("database");
    Status st =
        server_.options.hooks.on_session_start(*conn_, user_, database.empty() ? user_ : database);
    if (!st.ok()) {
      SendError({"XX000", st.message(), true});
      Flush();
      return false;
    }
  }
  server_.SetConnection(slot_, conn_.get(), user_);

  pg::WriteAuthenticationOk(out_);
  std::string app = startup.Param("application_name");
  const std::pair<const char*, std::string> params[] = {
      {"application_name", app},
      {"client_encoding", "UTF8"},
      {"DateStyle", "ISO, MDY"},
      {"default_transaction_read_only", "off"},
      {"in_hot_standby", "off"},
      {"integer_datetimes", "on"},
      {"IntervalStyle", "postgres"},
      {"is_superuser", "off"},
      {"server_encoding", "UTF8"},
      {"server_version", server_.options.server_version},
      {"session_authorization", user_},
      {"standard_conforming_strings", "on"},
      {"TimeZone", "UTC"},
  };
  for (const auto& [k, v] : params) pg::WriteParameterStatus(out_, k, v);
  pg::WriteBackendKeyData(out_, slot_->process_id, slot_->secret_key);
  pg::WriteReadyForQuery(out_, 'I');
  return Flush();
}

bool Session::Authenticate(const std::string& user) {
  const QueryServerOptions& o = server_.options;
  const auth::UserStore& users = *o.user_store;
  if (users.empty()) return true;  // trust
  SqlError failed{"28P01", fmt::format("password authentication failed for user \"{}\"", user),
                  true};
  auto expect_password_message = [&]() -> std::optional<pg::Frame> {
    std::optional<pg::Frame> f = ReadMessage();
    if (!f) return std::nullopt;
    if (f->type != 'p') {
      SendError({"08P01",
                 fmt::format("expected a password response, got message type '{}'", f->type),
                 true});
      Flush();
      return std::nullopt;
    }
    return f;
  };
  if (o.auth == AuthMethod::kPassword) {
    pg::WriteAuthenticationCleartextPassword(out_);
    if (!Flush()) return false;
    std::optional<pg::Frame> f = expect_password_message();
    if (!f) return false;
    auto password = pg::ParsePasswordMessage(f->body);
    const bool ok = password.ok() && users.VerifyPassword(user, *password);
    if (!ok) {
      SLUICE_LOG(kLog, kInfo, "password authentication failed for user \"{}\"", user);
      SendError(failed);
      Flush();
    }
    return ok;
  }
  pg::WriteAuthenticationSasl(out_, {"SCRAM-SHA-256"});
  if (!Flush()) return false;
  std::optional<pg::Frame> f = expect_password_message();
  if (!f) return false;
  auto initial = pg::ParseSaslInitialResponse(f->body);
  if (!initial.ok() || initial->mechanism != "SCRAM-SHA-256") {
    SendError({"28000",
               initial.ok()
                   ? fmt::format("SASL mechanism \"{}\" is not supported", initial->mechanism)
                   : initial.status().message(),
               true});
    Flush();
    return false;
  }
  std::optional<auth::ScramCredential> c = users.Find(user, auth::ScramMechanism::kSha256);
  ScramVerifier verifier = server_.impossible;
  if (c.has_value()) {
    verifier = ScramVerifier{std::move(c->salt), c->iterations, std::move(c->stored_key),
                             std::move(c->server_key)};
  }
  ScramExchange x(&verifier);
  auto server_first = x.ClientFirst(initial->data);
  if (!server_first.ok()) {
    SendError({"08P01", server_first.status().message(), true});
    Flush();
    return false;
  }
  pg::WriteAuthenticationSaslContinue(out_, *server_first);
  if (!Flush()) return false;
  f = expect_password_message();
  if (!f) return false;
  auto server_final = x.ClientFinal(f->body);
  if (!server_final.ok()) {
    SLUICE_LOG(kLog, kInfo, "SCRAM authentication failed for user \"{}\": {}", user,
               server_final.status().message());
    SendError(failed);
    Flush();
    return false;
  }
  pg::WriteAuthenticationSaslFinal(out_, *server_final);
  return true;
}

// ---- the message loop ------------------------------------------------------------

std::optional<Session::SqlError> Session::EndOfFailedTransaction(
    std::string_view* statement) const {
  if (!failed_transaction_) return std::nullopt;
  std::vector<std::string> first = LeadingWords(*statement, 1);
  if (!first.empty() && (first[0] == "ROLLBACK" || first[0] == "ABORT")) return std::nullopt;
  if (!first.empty() && (first[0] == "COMMIT" || first[0] == "END")) {
    *statement = "ROLLBACK";  // Postgres ends a failed block so, and says ROLLBACK
    return std::nullopt;
  }
  if (first.empty()) return std::nullopt;  // an empty query
  return SqlError{
      "25P02", "current transaction is aborted, commands ignored until end of transaction block"};
}

char Session::TransactionStatus() const {
  return failed_transaction_ ? 'E' : in_transaction_ ? 'T' : 'I';
}

void Session::TrackTransaction(std::string_view tag, bool failed) {
  if (failed) {
    if (in_transaction_) failed_transaction_ = true;
    return;
  }
  if (tag == "BEGIN" || tag == "START TRANSACTION") {
    in_transaction_ = true;
  } else if (tag == "COMMIT" || tag == "ROLLBACK") {
    in_transaction_ = false;
    failed_transaction_ = false;
  }
}

bool Session::Serve() {
  bool skip_to_sync = false;
  // A message that does not decode ends the connection (FATAL 08P01), as Postgres does.
  auto malformed = [this](const Status& st) {
    SendError({"08P01", st.message(), true});
    Flush();
    return false;
  };
  while (true) {
    std::optional<pg::Frame> f = ReadMessage();
    if (!f) return false;
    if (skip_to_sync && f->type != 'S' && f->type != 'X') continue;
    std::optional<SqlError> err;
    switch (f->type) {
      case 'Q': {
        auto sql = pg::ParseQuery(f->body);
        if (!sql.ok()) return malformed(sql.status());
        if (!SimpleQuery(*sql)) return false;
        continue;
      }
      case 'P': {
        auto m = pg::ParseParse(f->body);
        if (!m.ok()) return malformed(m.status());
        err = HandleParse(*m);
        break;
      }
      case 'B': {
        auto m = pg::ParseBind(f->body);
        if (!m.ok()) return malformed(m.status());
        err = HandleBind(*m);
        break;
      }
      case 'D': {
        auto m = pg::ParseDescribe(f->body);
        if (!m.ok()) return malformed(m.status());
        err = HandleDescribe(*m);
        break;
      }
      case 'E': {
        auto m = pg::ParseExecute(f->body);
        if (!m.ok()) return malformed(m.status());
        err = HandleExecute(*m);
        break;
      }
      case 'C': {
        auto m = pg::ParseClose(f->body);
        if (!m.ok()) return malformed(m.status());
        HandleClose(*m);
        break;
      }
      case 'H':
        if (!Flush()) return false;
        break;
      case 'S':
        skip_to_sync = false;
        // Outside a transaction block, Sync ends the implicit transaction and its portals.
        if (!in_transaction_) {
          while (!portals_.empty()) ErasePortal(portals_.begin()->first);
        }
        ErasePortal("");
        // The client waits for ReadyForQuery now: a portal still open (inside a
        // transaction block) takes a new turn when it is executed again.
        ReleaseTurn();
        pg::WriteReadyForQuery(out_, TransactionStatus());
        if (!Flush()) return false;
        break;
      case 'X':
        return true;
      case 'F':
        err = SqlError{"0A000", "the function call protocol is not supported"};
        break;
      case 'd':
      case 'c':
      case 'f':
        break;  // CopyData/CopyDone/CopyFail outside COPY: ignored, as Postgres does
      default:
        SendError({"08P01",
                   fmt::format("invalid frontend message type {}", static_cast<int>(f->type)),
                   true});
        Flush();
        return false;
    }
    if (err) {
      SendError(*err);
      TrackTransaction("", true);
      skip_to_sync = true;
      ReleaseTurn();
      if (err->fatal) {
        Flush();
        return false;
      }
    }
    if (!FlushIfLarge()) return false;
  }
}

// ---- running statements ----------------------------------------------------------

Session::SqlError Session::FromDuck(const Status& st, duck::ErrorType type) {
  if (type == duck::ErrorType::kInvalid) type = duck::ErrorTypeFromMessage(st.message());
  std::string state = SqlStateFor(type, st.message());
  if (state == "57014") {
    int reason = slot_->interrupt_reason.load();
    if (reason == 2) {
      return {
          state,
          fmt::format("canceling statement due to statement timeout (query.timeout_seconds is {})",
                      server_.options.timeout_ms / 1000)};
    }
    if (reason == 4) {
      return {"53200",
              fmt::format("canceling statement: the server's memory (RSS {} MiB) went above "
                          "query.rss_limit ({} MiB) while user {} ran more than its memory_share "
                          "of the statements",
                          slot_->rss_at_interrupt.load() >> 20,
                          server_.options.rss_limit_bytes >> 20, user_)};
    }
    if (reason == 3) {
      return {
          "53200",
          fmt::format(
              "canceling statement: the server's memory (RSS {} MiB) went above query.rss_limit "
              "({} MiB) and this was the longest-running statement",
              slot_->rss_at_interrupt.load() >> 20, server_.options.rss_limit_bytes >> 20)};
    }
    if (reason == 0 && !server_.stopping.load()) {
      // Nothing here asked for it: DuckDB 1.5 raises its interrupt flag itself when one of
      // its worker threads fails, and a streamed result's fetch can see the flag before
      // the worker's error, so the error's message is lost (docs/design/0010, decision 7).
      return {"XX000",
              "the statement failed in one of DuckDB's worker threads and DuckDB reported "
              "an interrupt in place of that error; running it again should show it"};
    }
    return {state, "canceling statement due to user request"};
  }
  if (type == duck::ErrorType::kInvalid && st.code() == StatusCode::kUnimplemented) state = "0A000";
  std::string message = CleanMessage(st.message());
  if (state == "53200") {
    // DuckDB's hints (SET threads, SET memory_limit) are refused here: say what is not.
    size_t hints = message.find("\nPossible solutions:");
    if (hints != std::string::npos) message.resize(hints);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    message +=
        fmt::format(" (the query server's memory is query.memory_limit, {} MiB, in its config)",
                    server_.options.memory_limit_bytes >> 20);
  }
  return {state, message};
}

Session::SqlError Session::FromHook(const Status& st) {
  const std::string& m = st.message();
  if (m.size() > 7 && m[5] == ':' && m[6] == ' ') return {m.substr(0, 5), m.substr(7)};
  switch (st.code()) {
    case StatusCode::kNotFound:
      return {"42P01", m};
    case StatusCode::kUnimplemented:
      return {"0A000", m};
    case StatusCode::kCorruption:
      return {"XX001", m};
    case StatusCode::kResourceExhausted:
      return {"53200", m};
    case StatusCode::kAborted:
      // DuckDB's interrupt, seen by a hook's own query; a hook's other aborts (a lake
      // commit lost to other writers, a sampling timeout) say what they are.
      if (slot_->interrupt_reason.load() != 0 ||
          duck::ErrorTypeFromMessage(m) == duck::ErrorType::kInterrupt)
        return FromDuck(st, duck::ErrorType::kInterrupt);
      return {m.find("lost to other writers") != std::string::npos ? "40001" : "XX000", m};
    default:
      return FromDuck(st, duck::ErrorType::kInvalid);
  }
}

std::optional<Session::SqlError> Session::TakeTurn(bool light) {
  if (turn_held_) return std::nullopt;
  const int user_limit =
      server_.options.hooks.max_statements_of ? server_.options.hooks.max_statements_of(user_) : 0;
  auto cancelled = [&]() -> std::optional<SqlError> {
    if (!slot_->cancel_pending.exchange(false)) return std::nullopt;
    return SqlError{"57014", "canceling statement due to user request"};
  };
  if (auto c = cancelled()) return c;
  if (!light && !server_.Admit(user_, user_limit, &slot_->cancel_pending)) {
    if (auto c = cancelled()) return c;
    if (server_.stopping.load())
      return SqlError{"57P01", "terminating connection: the server is stopping", true};
    if (user_limit > 0) {
      return SqlError{"53300", fmt::format("too many queries running: {} (query.max_running), or "
                                           "{} of user {} (its max_statements), ran for longer "
                                           "than query.queue_timeout_seconds ({}) while this one "
                                           "waited",
                                           server_.options.max_running, user_limit, user_,
                                           server_.options.queue_timeout_ms / 1000)};
    }
    return SqlError{
        "53300", fmt::format("too many queries running: {} (query.max_running) ran for longer than "
                             "query.queue_timeout_seconds ({}) while this one waited",
                             server_.options.max_running, server_.options.queue_timeout_ms / 1000)};
  }
  if (auto c = cancelled()) {
    if (!light) server_.Release(user_);
    return c;
  }
  turn_held_ = true;
  light_turn_ = light;
  slot_->interrupt_reason.store(0);
  slot_->running_since_ms.store(SessionNowMs());
  return std::nullopt;
}

void Session::ReleaseTurn() {
  if (!turn_held_) return;
  turn_held_ = false;
  slot_->running_since_ms.store(0);
  if (!light_turn_) server_.Release(user_);
  light_turn_ = false;
}

std::optional<Session::SqlError> Session::RunCommand(std::string_view statement) {
  auto tag = server_.options.hooks.run_command(*conn_, statement);
  if (!tag.ok()) return FromHook(tag.status());
  pg::WriteCommandComplete(out_, *tag);
  return std::nullopt;
}

std::optional<Session::SqlError> Session::ApplyClientSetting(const ClientSetting& s) {
  if (s.name == "application_name") {
    pg::WriteParameterStatus(out_, "application_name", s.value);
  } else if (s.name == "client_encoding") {
    std::string v = s.value;
    for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!v.empty() && v != "UTF8" && v != "UTF-8" && v != "UNICODE") {
      return SqlError{
          "0A000",
          fmt::format("client_encoding {} is not supported: the server speaks UTF8", s.value)};
    }
  } else if (s.name == "timezone") {
    std::string v = s.value;
    for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!v.empty() && v != "UTC" && v != "GMT" && v != "ETC/UTC" && v != "Z" && v != "DEFAULT" &&
        v != "LOCAL") {
      return SqlError{
          "0A000", fmt::format("time zone {} is not supported: the server runs in UTC", s.value)};
    }
  }
  // DateStyle, IntervalStyle, extra_float_digits...: accepted; the server's output
  // formats are fixed (and are what the clients ask for by default).
  return std::nullopt;
}

bool Session::SimpleQuery(std::string_view sql_in) {
  slot_->in_query.store(true);
  struct Answered {
    SessionSlot& slot;
    ~Answered() {
      slot.in_query.store(false);
      slot.cancel_pending.store(false);  // a cancel that found nothing to stop is dropped
    }
  } answered{*slot_};
  std::string sql(sql_in);
  std::optional<SqlError> err;
  if (!pg::IsValidUtf8(sql)) {
    err = SqlError{"22021", "invalid byte sequence for encoding \"UTF8\""};
  } else if (server_.options.hooks.rewrite_query) {
    auto rewritten = server_.options.hooks.rewrite_query(sql);
    if (!rewritten.ok()) {
      const std::string& m = rewritten.status().message();
      bool coded = m.size() > 7 && m[5] == ':' && m[6] == ' ';
      err = coded ? SqlError{m.substr(0, 5), m.substr(7)} : SqlError{"42601", m};
    } else {
      sql = std::move(rewritten).value();
    }
  }
  // A simple query closes the unnamed portal (and its stream), and ends the turn of a
  // portal left suspended by an extended-protocol batch without its Sync.
  ErasePortal("");
  ReleaseTurn();
  if (!err) {
    std::vector<std::string_view> pieces = SplitStatements(sql);
    if (pieces.empty()) pg::WriteEmptyQueryResponse(out_);
    for (std::string_view piece : pieces) {
      err = RunSimpleStatement(piece);
      if (err) AddCopyHint(piece, *err);
      if (err && err->offset != std::string_view::npos && sql == sql_in) {
        // Postgres's position: characters from the query string's start, from 1.
        size_t end = static_cast<size_t>(piece.data() - sql.data()) + err->offset;
        err->position = 1 + static_cast<int>(CountCodePoints(std::string_view(sql).substr(0, end)));
      }
      if (err || !FlushIfLarge()) break;
    }
  }
  if (err) {
    SendError(*err);
    TrackTransaction("", true);
  }
  // Outside a transaction block (a COMMIT or ROLLBACK just ran, or none was open) no
  // portal survives, as in Postgres: their streams and plans' temp tables end here.
  if (!in_transaction_) {
    while (!portals_.empty()) ErasePortal(portals_.begin()->first);
  }
  pg::WriteReadyForQuery(out_, TransactionStatus());
  return Flush() && !(err && err->fatal);
}

std::optional<Session::SqlError> Session::RunSimpleStatement(std::string_view piece) {
  // One admission turn and one timeout clock for the whole statement: planning steps,
  // preparing, running and streaming. A light one (SELECT 1, psql's \d) does not queue.
  if (auto e = TakeTurn(LightStatement(piece))) return e;
  struct EndStatement {
    Session* s;
    ~EndStatement() { s->ReleaseTurn(); }
  } end_statement{this};
  if (auto e = EndOfFailedTransaction(&piece)) return e;
  SandboxVerdict verdict = CheckSandbox(piece);
  if (verdict.refused) return SqlError{"42501", verdict.message};
  ClientSetting setting = ParseClientSetting(piece);
  if (!setting.name.empty()) {
    if (auto e = ApplyClientSetting(setting)) return e;
    pg::WriteCommandComplete(out_, LeadingWords(piece, 1)[0]);
    return std::nullopt;
  }
  if (server_.options.hooks.is_command && server_.options.hooks.is_command(piece)) {
    return RunCommand(piece);
  }
  const std::string_view statement = piece;
  std::optional<CopyOptions> copy;
  std::string_view before_plan;  // the text planned, inside `statement`
  std::string copy_query;
  if (auto e = ParseCopy(piece, &copy, &copy_query)) return e;
  if (copy) piece = copy_query;  // planned and run as a SELECT is
  before_plan = piece;
  std::string planned_sql;
  std::function<void(duck::Connection&)> cleanup;
  std::shared_ptr<const void> holds;  // until the statement has run
  if (server_.options.hooks.plan_statement) {
    // The steps run under the statement's turn, timeout and cancel (held since above).
    auto planned = server_.options.hooks.plan_statement(*conn_, piece, /*allow_steps=*/true);
    if (!planned.ok()) return FromHook(planned.status());
    planned_sql = std::move(planned->sql);
    cleanup = std::move(planned->cleanup);
    holds = std::move(planned->holds);
    piece = planned_sql;
    if (cleanup) {
      server_.simple_steps.fetch_add(1);
      SLUICE_LOG(kLog, kInfo, "simple-query statement ran planning steps: {}",
                 planned->explanation.empty() ? "(no explanation)" : planned->explanation);
    }
  }
  struct CleanupAtEnd {
    std::function<void(duck::Connection&)>& fn;
    duck::Connection& conn;
    ~CleanupAtEnd() {
      if (fn) fn(conn);
    }
  } cleanup_at_end{cleanup, *conn_};
  duck::ErrorType type = duck::ErrorType::kInvalid;
  // DuckDB's error position, when it ran the text the client wrote.
  auto located = [&](const Status& st) {
    SqlError e = FromDuck(st, type);
    size_t off = ErrorOffset(st.message(), piece);
    if (off != std::string_view::npos && piece == before_plan &&
        before_plan.data() >= statement.data() &&
        before_plan.data() + before_plan.size() <= statement.data() + statement.size()) {
      e.offset = static_cast<size_t>(before_plan.data() - statement.data()) + off;
    }
    return e;
  };
  // A SELECT this session ran before with the same text: prepared already.
  const bool cacheable = !copy && !cleanup;
  if (cacheable) {
    if (auto hit = simple_cache_.find(std::string(piece)); hit != simple_cache_.end()) {
      ++duck_generation_;
      Portal p;
      p.statement = hit->second;
      return RunPortal(p, 0, /*describe_rows=*/true);
    }
  }
  auto extracted = duck::ExtractedStatements::Extract(*conn_, piece, &type);
  if (!extracted.ok()) return located(extracted.status());
  if (copy && extracted->size() != 1)
    return SqlError{"42601", "COPY's query must be one statement"};
  if (extracted->size() > 1) {
    // The server split the client's string into this one statement; DuckDB reading more
    // out of it means the two disagree where it ends (a comment, a quote): nothing that
    // was checked as one statement may run as two.
    return SqlError{"42601",
                    "the statement holds more than one statement for DuckDB: send them "
                    "separated by semicolons"};
  }
  if (extracted->size() == 0) {
    pg::WriteEmptyQueryResponse(out_);
    return std::nullopt;
  }
  for (size_t i = 0; i < extracted->size(); ++i) {
    ++duck_generation_;
    auto prepared = extracted->Prepare(i, &type);
    if (!prepared.ok()) return located(prepared.status());
    auto stmt = std::make_shared<Statement>();
    stmt->sql = std::string(copy ? statement : piece);
    stmt->prepared = std::move(prepared).value();
    SetPreparedText(*stmt, piece);
    stmt->returns_rows = StatementReturnsRows(*stmt->prepared);
    if (copy) {
      if (!stmt->returns_rows)
        return SqlError{"0A000", "COPY's query must return rows (a SELECT, VALUES, or RETURNING)"};
      stmt->copy = copy;
      stmt->returns_rows = false;
    }
    Portal p;
    p.statement = stmt;
    if (stmt->prepared->param_count() > 0) {
      return SqlError{
          "08P01",
          fmt::format("bind message supplies 0 parameters, but prepared statement requires {}",
                      stmt->prepared->param_count())};
    }
    if (cacheable && extracted->size() == 1 &&
        stmt->prepared->type() == duck::StatementType::kSelect) {
      if (simple_cache_.size() >= kMaxCachedStatements) simple_cache_.clear();
      simple_cache_.emplace(std::string(piece), stmt);
    }
    if (auto e = RunPortal(p, 0, /*describe_rows=*/true)) return e;
  }
  return std::nullopt;
}

namespace {

// DuckDB's table functions whose prepared statement cannot run twice (Statement).
bool NamesParquetMetadata(std::string_view sql) {
  if (!ContainsIgnoreCase(sql, "parquet_")) return false;
  for (std::string_view fn :
       {"parquet_metadata", "parquet_schema", "parquet_file_metadata", "parquet_kv_metadata",
        "parquet_full_metadata", "parquet_bloom_probe"}) {
    if (ContainsWordIgnoreCase(sql, fn)) return true;
  }
  return false;
}

}  // namespace

void Session::SetPreparedText(Statement& s, std::string_view text) {
  s.prepared_text = std::string(text);
  s.prepare_each_run = NamesParquetMetadata(text);
}

Status Session::Reprepare(Statement& s) {
  ASSIGN_OR_RETURN(auto extracted, duck::ExtractedStatements::Extract(*conn_, s.prepared_text));
  if (extracted.size() != 1) return InternalError("the statement no longer prepares as one");
  ++duck_generation_;
  ASSIGN_OR_RETURN(s.prepared, extracted.Prepare(0));
  return Status::OK();
}

Result<std::shared_ptr<Session::Statement>> Session::PrepareStatement(
    std::string_view sql_in, const std::vector<uint32_t>& oids, SqlError* error) {
  auto fail = [&](SqlError e) -> Status {
    *error = std::move(e);
    return InvalidArgumentError("{}", error->message);
  };
  if (!pg::IsValidUtf8(sql_in))
    return fail({"22021", "invalid byte sequence for encoding \"UTF8\""});
  auto stmt = std::make_shared<Statement>();
  stmt->sql = std::string(sql_in);
  if (server_.options.hooks.rewrite_query) {
    auto rewritten = server_.options.hooks.rewrite_query(stmt->sql);
    if (!rewritten.ok()) {
      const std::string& m = rewritten.status().message();
      bool coded = m.size() > 7 && m[5] == ':' && m[6] == ' ';
      return fail(coded ? SqlError{m.substr(0, 5), m.substr(7)} : SqlError{"42601", m});
    }
    stmt->sql = std::move(rewritten).value();
  }
  std::vector<std::string_view> pieces = SplitStatements(stmt->sql);
  if (pieces.size() > 1)
    return fail({"42601", "cannot insert multiple commands into a prepared statement"});
  if (pieces.empty()) {
    stmt->empty = true;
    return stmt;
  }
  SandboxVerdict verdict = CheckSandbox(pieces[0]);
  if (verdict.refused) return fail({"42501", verdict.message});
  stmt->client_setting = ParseClientSetting(pieces[0]);
  if (!stmt->client_setting.name.empty()) return stmt;
  if (server_.options.hooks.is_command && server_.options.hooks.is_command(pieces[0])) {
    if (server_.options.hooks.check_command) {
      if (Status st = server_.options.hooks.check_command(pieces[0]); !st.ok()) {
        return fail(FromHook(st));
      }
    }
    stmt->command = true;  // runs at Execute
    stmt->sql = std::string(pieces[0]);
    return stmt;
  }
  std::string_view piece = pieces[0];
  std::string copy_query;
  if (auto e = ParseCopy(piece, &stmt->copy, &copy_query)) return fail(*e);
  if (stmt->copy) piece = copy_query;
  std::string planned_sql;
  bool steps_may_apply = false;
  std::shared_ptr<const void> parse_holds;
  if (server_.options.hooks.plan_statement) {
    auto planned = server_.options.hooks.plan_statement(*conn_, piece, /*allow_steps=*/false);
    if (!planned.ok()) return fail(FromHook(planned.status()));
    steps_may_apply = planned->steps_may_apply;
    if (steps_may_apply) stmt->plan_text = std::string(piece);
    planned_sql = std::move(planned->sql);
    // The copies stay while DuckDB prepares (it reads the files' footers); each portal
    // fetches them again (refetch) rather than the statement pinning them for its life.
    parse_holds = std::move(planned->holds);
    stmt->refetch = std::move(planned->refetch);
    piece = planned_sql;
  }
  duck::ErrorType type = duck::ErrorType::kInvalid;
  // DuckDB's error position, when it ran the Parse message's own text (as in the simple
  // protocol: not after the catalog rewrite, the planning or a COPY's unwrapping).
  auto located = [&](const Status& st) {
    SqlError e = FromDuck(st, type);
    size_t off = ErrorOffset(st.message(), piece);
    if (off != std::string_view::npos && piece == sql_in) {
      e.position = 1 + static_cast<int>(CountCodePoints(sql_in.substr(0, off)));
    }
    return e;
  };
  auto extracted = duck::ExtractedStatements::Extract(*conn_, piece, &type);
  if (!extracted.ok()) return fail(located(extracted.status()));
  if (stmt->copy && extracted->size() != 1)
    return fail({"42601", "COPY's query must be one statement"});
  if (extracted->size() == 0) {
    stmt->empty = true;
    return stmt;
  }
  if (extracted->size() > 1)
    return fail({"42601", "cannot insert multiple commands into a prepared statement"});
  ++duck_generation_;
  auto prepared = extracted->Prepare(0, &type);
  if (!prepared.ok()) return fail(located(prepared.status()));
  stmt->prepared = std::move(prepared).value();
  SetPreparedText(*stmt, piece);
  size_t nparams = stmt->prepared->param_count();
  if (oids.size() > nparams) {
    return fail(
        {"42P18",
         fmt::format("Parse message gives {} parameter types, the statement has {} parameters",
                     oids.size(), nparams)});
  }
  for (size_t i = 0; i < nparams; ++i) {
    uint32_t o = i < oids.size() ? oids[i] : 0;
    auto type = stmt->prepared->param_type(i + 1);
    stmt->param_oids.push_back(o != 0 ? o : ParamOid(type));
    if (steps_may_apply) stmt->param_sql_types.push_back(ParamTypeSql(type));
  }
  stmt->returns_rows = StatementReturnsRows(*stmt->prepared);
  if (stmt->copy) {
    if (nparams > 0) return fail({"42P02", "COPY does not take parameters"});
    if (!stmt->returns_rows)
      return fail({"0A000", "COPY's query must return rows (a SELECT, VALUES, or RETURNING)"});
  }
  // The rewrites that run steps are for SELECTs; nothing else is planned again.
  stmt->steps_may_apply = steps_may_apply && stmt->returns_rows &&
                          stmt->prepared->type() == duck::StatementType::kSelect;
  if (!stmt->steps_may_apply) {
    stmt->plan_text.clear();
    stmt->param_sql_types.clear();
  }
  if (stmt->copy) stmt->returns_rows = false;  // Describe: NoData; the rows come as CopyData
  if (stmt->returns_rows) {
    for (size_t c = 0; c < stmt->prepared->column_count(); ++c) {
      auto enc = ColumnEncoder::Make(stmt->prepared->column_type(c));
      if (!enc.ok()) return fail({"0A000", enc.status().message()});
      stmt->columns.push_back({stmt->prepared->column_name(c), std::move(enc).value()});
    }
  }
  return stmt;
}

std::optional<Session::SqlError> Session::HandleParse(const pg::ParseMessage& m) {
  if (!m.statement.empty() && statements_.contains(m.statement)) {
    return SqlError{"42P05", fmt::format("prepared statement \"{}\" already exists", m.statement)};
  }
  std::string_view query = m.query;
  if (auto e = EndOfFailedTransaction(&query)) return e;
  SqlError error;
  auto stmt = PrepareStatement(query, m.param_types, &error);
  if (!stmt.ok()) {
    AddCopyHint(m.query, error);
    return error;
  }
  statements_[m.statement] = std::move(stmt).value();
  pg::WriteParseComplete(out_);
  return std::nullopt;
}

std::optional<Session::SqlError> Session::HandleBind(const pg::BindMessage& m) {
  auto it = statements_.find(m.statement);
  if (it == statements_.end()) {
    return SqlError{"26000", fmt::format("prepared statement \"{}\" does not exist", m.statement)};
  }
  if (!m.portal.empty() && portals_.contains(m.portal)) {
    return SqlError{"42P03", fmt::format("portal \"{}\" already exists", m.portal)};
  }
  const Statement& s = *it->second;
  if (m.params.size() != s.param_oids.size()) {
    return SqlError{
        "08P01",
        fmt::format(
            "bind message supplies {} parameters, but prepared statement \"{}\" requires {}",
            m.params.size(), m.statement, s.param_oids.size())};
  }
  Portal p;
  p.statement = it->second;
  p.result_formats = m.result_formats;
  for (size_t i = 0; i < m.params.size(); ++i) {
    if (!m.params[i]) {
      p.params.emplace_back(std::nullopt);
      continue;
    }
    auto v = DecodeParam(s.param_oids[i], m.ParamFormat(i) == 1, *m.params[i]);
    if (!v.ok()) {
      std::string state = v.status().code() == StatusCode::kUnimplemented          ? "0A000"
                          : v.status().message().find("UTF8") != std::string::npos ? "22021"
                                                                                   : "22P03";
      return SqlError{state, fmt::format("parameter ${}: {}", i + 1, v.status().message())};
    }
    p.params.emplace_back(std::move(v).value());
  }
  if (s.steps_may_apply) {
    // A text value is bound as VARCHAR and cast by DuckDB to the parameter's type: as a
    // literal, CAST('text' AS type) is the same. A binary value is written when the
    // portal starts (PlanPortalSteps). Bytea and array values are not written as
    // literals (yet): such a portal runs its prepared statement.
    for (size_t i = 0; i < m.params.size(); ++i) {
      const std::optional<std::string>& type = s.param_sql_types[i];
      const uint32_t o = s.param_oids[i];
      std::optional<std::string> binary_type =
          m.params[i] && m.ParamFormat(i) == 1 ? BinaryValueTypeSql(o) : std::string();
      const bool text_value = m.params[i] && binary_type && binary_type->empty();
      if (!type || !binary_type || (m.params[i] && (o == oid::kBytea || oid::ElementOf(o) != 0)) ||
          (text_value && m.params[i]->find('\0') != std::string::npos)) {
        p.literals.clear();
        p.binary_types.clear();
        break;
      }
      std::string value = !m.params[i] ? std::string("NULL")
                          : text_value ? duck::QuoteLiteral(*m.params[i])
                                       : "";
      p.literals.push_back(
          type->empty() || value.empty() ? value : fmt::format("CAST({} AS {})", value, *type));
      p.binary_types.push_back(std::move(*binary_type));
    }
  }
  for (size_t c = 0; c < s.columns.size(); ++c) {
    p.formats.push_back(m.result_formats.empty()       ? 0
                        : m.result_formats.size() == 1 ? m.result_formats[0]
                        : c < m.result_formats.size()  ? m.result_formats[c]
                                                       : 0);
  }
  if (s.refetch) {
    Result<std::shared_ptr<const void>> holds = s.refetch();
    if (!holds.ok()) {
      return SqlError{holds.status().code() == StatusCode::kResourceExhausted ? "53200" : "58030",
                      holds.status().message()};
    }
    p.holds = std::move(*holds);
  }
  ErasePortal(m.portal);  // the unnamed portal: a Bind replaces it
  portals_.emplace(m.portal, std::move(p));
  pg::WriteBindComplete(out_);
  return std::nullopt;
}

std::optional<Session::SqlError> Session::HandleDescribe(const pg::DescribeMessage& m) {
  const Statement* s = nullptr;
  const std::vector<int16_t>* formats = nullptr;
  if (m.kind == 'S') {
    auto it = statements_.find(m.name);
    if (it == statements_.end()) {
      return SqlError{"26000", fmt::format("prepared statement \"{}\" does not exist", m.name)};
    }
    s = it->second.get();
    pg::WriteParameterDescription(out_, s->param_oids);
  } else {
    auto it = portals_.find(m.name);
    if (it == portals_.end())
      return SqlError{"34000", fmt::format("portal \"{}\" does not exist", m.name)};
    Portal& p = it->second;
    s = p.statement.get();
    formats = &p.formats;
    // With parameters DuckDB may bind the statement, and know its result, only once the
    // values are there: the portal starts now and is described from its real result
    // (the Execute that follows goes on from there).
    bool runnable =
        !s->empty && s->client_setting.name.empty() && !s->command && s->prepared != nullptr;
    if (runnable && !p.params.empty()) {
      if (!p.started && !p.done) {
        // The turn taken here is the one the Execute that follows runs under.
        if (auto e = StartPortal(p)) {
          p.steps_cleanup.reset();
          return e;
        }
      }
      if (p.stream && p.stream->return_type() == duck::ReturnType::kRows) {
        WriteDescription(p);
      } else {
        pg::WriteNoData(out_);
      }
      return std::nullopt;
    }
  }
  if (!s->returns_rows) {
    pg::WriteNoData(out_);
    return std::nullopt;
  }
  std::vector<pg::FieldDescription> fields;
  for (size_t c = 0; c < s->columns.size(); ++c) {
    const PgType& t = s->columns[c].encoder.pg_type();
    fields.push_back({s->columns[c].name, t.oid, t.size, t.modifier,
                      formats != nullptr ? (*formats)[c] : int16_t{0}});
  }
  pg::WriteRowDescription(out_, fields);
  return std::nullopt;
}

std::optional<Session::SqlError> Session::HandleExecute(const pg::ExecuteMessage& m) {
  auto it = portals_.find(m.portal);
  if (it == portals_.end())
    return SqlError{"34000", fmt::format("portal \"{}\" does not exist", m.portal)};
  Portal& p = it->second;
  auto err = RunPortal(p, m.max_rows, /*describe_rows=*/false);
  if (p.done) {
    // Finished or failed: the plan's temp table goes now, and so does the turn (a
    // suspended portal keeps it until its end or the Sync).
    p.steps_cleanup.reset();
    ReleaseTurn();
  }
  return err;
}

void Session::HandleClose(const pg::CloseMessage& m) {
  if (m.kind == 'S') {
    statements_.erase(m.name);
  } else {
    auto it = portals_.find(m.name);
    if (it != portals_.end() && it->second.started && !it->second.done) ReleaseTurn();
    ErasePortal(m.name);
  }
  pg::WriteCloseComplete(out_);
}

void Session::ErasePortal(const std::string& name) {
  auto it = portals_.find(name);
  if (it == portals_.end()) return;
  Portal& p = it->second;
  p.chunk.reset();
  p.stream.reset();  // before the plan's cleanup (the portal's destructor) runs
  portals_.erase(it);
}

bool Session::BinaryLiterals(const Portal& p, std::vector<std::string>& literals) {
  std::string select;
  std::vector<size_t> binary;
  for (size_t i = 0; i < p.binary_types.size(); ++i) {
    if (p.binary_types[i].empty()) continue;
    binary.push_back(i);
    select +=
        fmt::format("{}CAST(${} AS VARCHAR)", binary.size() == 1 ? "SELECT " : ", ", binary.size());
  }
  if (binary.empty()) return true;
  // DuckDB's text form of each decoded value (its cast to VARCHAR, the form its cast from
  // VARCHAR reads back), then CAST(CAST('text' AS value type) AS parameter type): what
  // binding the value does.
  auto prepared = duck::PreparedStatement::Prepare(*conn_, select);
  if (!prepared.ok()) return false;
  for (size_t j = 0; j < binary.size(); ++j) {
    if (!(*prepared)->BindValue(j + 1, *p.params[binary[j]]).ok()) return false;
  }
  auto result = (*prepared)->Execute();
  if (!result.ok() || result->chunk_count() != 1) return false;
  duck::ResultChunk row = result->chunk(0);
  if (row.size() != 1) return false;
  const Statement& s = *p.statement;
  for (size_t j = 0; j < binary.size(); ++j) {
    size_t i = binary[j];
    if (row.IsNull(j, 0)) return false;
    std::string value =
        fmt::format("CAST({} AS {})", duck::QuoteLiteral(row.GetString(j, 0)), p.binary_types[i]);
    const std::string& type = *s.param_sql_types[i];
    literals[i] = type.empty() ? value : fmt::format("CAST({} AS {})", value, type);
  }
  return true;
}

std::optional<Session::SqlError> Session::PlanPortalSteps(Portal& p) {
  const Statement& s = *p.statement;
  if (!s.steps_may_apply || !server_.options.hooks.plan_statement) return std::nullopt;
  if (p.literals.size() != p.params.size()) return std::nullopt;
  ++duck_generation_;  // what runs on the connection from here ends a suspended stream
  std::vector<std::string> literals = p.literals;
  if (!BinaryLiterals(p, literals)) return std::nullopt;
  std::optional<std::string> sql = SubstituteParameters(s.plan_text, literals);
  if (!sql) return std::nullopt;
  auto planned = server_.options.hooks.plan_statement(*conn_, *sql, /*allow_steps=*/true);
  if (!planned.ok()) return FromHook(planned.status());
  if (!planned->cleanup) return std::nullopt;  // no steps: the prepared statement runs
  auto cleanup = std::make_unique<StepsCleanup>();
  cleanup->run = [this, fn = std::move(planned->cleanup), holds = std::move(planned->holds)] {
    ++duck_generation_;
    fn(*conn_);
  };
  std::string why;
  duck::ErrorType type = duck::ErrorType::kInvalid;
  auto extracted = duck::ExtractedStatements::Extract(*conn_, planned->sql, &type);
  std::unique_ptr<duck::PreparedStatement> final;
  if (!extracted.ok()) {
    why = extracted.status().message();
  } else if (extracted->size() != 1) {
    why = fmt::format("{} statements", extracted->size());
  } else {
    auto prepared = extracted->Prepare(0, &type);
    if (!prepared.ok()) {
      why = prepared.status().message();
    } else if (!SameResult(*s.prepared, **prepared)) {
      why = "its columns differ from the prepared statement's";
    } else {
      final = std::move(prepared).value();
    }
  }
  if (!final) {
    // The client may have been given the prepared statement's RowDescription: the plain
    // plan answers instead (cleanup runs now).
    SLUICE_LOG(kLog, kWarn,
               "extended-protocol statement: the SQL after the planning steps is not used ({}); "
               "running the statement as prepared",
               CleanMessage(why));
    return std::nullopt;
  }
  p.steps_final = std::move(final);
  p.steps_cleanup = std::move(cleanup);
  server_.extended_steps.fetch_add(1);
  SLUICE_LOG(kLog, kInfo, "extended-protocol statement ran planning steps: {}",
             planned->explanation.empty() ? "(no explanation)" : planned->explanation);
  return std::nullopt;
}

std::optional<Session::SqlError> Session::StartPortal(Portal& p) {
  Statement& s = *p.statement;
  duck::ErrorType type = duck::ErrorType::kInvalid;
  // The portal's turn: held through its Executes until it ends or the Sync.
  if (auto e = TakeTurn(LightStatement(s.sql))) return e;
  p.started = true;
  if (auto e = PlanPortalSteps(p)) {
    p.done = true;
    return e;
  }
  auto bind = [&]() -> std::optional<SqlError> {
    duck::PreparedStatement& prepared = *s.prepared;
    if (Status st = prepared.ClearBindings(); !st.ok()) return FromDuck(st, type);
    for (size_t i = 0; i < p.params.size(); ++i) {
      Status st = p.params[i] ? prepared.BindValue(i + 1, *p.params[i])
                              : prepared.BindValue(i + 1, duck::Value::Null());
      if (!st.ok()) {
        p.done = true;
        return SqlError{"22023", CleanMessage(st.message())};
      }
    }
    return std::nullopt;
  };
  if (!p.steps_final) {
    if (s.executed && s.prepare_each_run) {
      if (Status st = Reprepare(s); !st.ok()) {
        p.done = true;
        return FromDuck(st, type);
      }
    }
    if (auto e = bind()) return e;
  }
  // Anything but a SELECT may change how a cached text binds (session.h).
  if ((p.steps_final ? *p.steps_final : *s.prepared).type() != duck::StatementType::kSelect)
    simple_cache_.clear();
  p.generation = ++duck_generation_;
  auto stream = (p.steps_final ? *p.steps_final : *s.prepared).ExecuteStreaming(&type);
  if (!stream.ok() && type == duck::ErrorType::kInternal && !p.steps_final && s.executed &&
      !s.prepare_each_run) {
    // A prepared statement that ran before and now fails inside DuckDB: prepared afresh
    // from now on, and this run tried once more that way.
    SLUICE_LOG(kLog, kWarn, "a prepared statement failed at a later run ({}); preparing it again",
               CleanMessage(stream.status().message()));
    s.prepare_each_run = true;
    if (Status st = Reprepare(s); !st.ok()) {
      p.done = true;
      return FromDuck(st, type);
    }
    if (auto e = bind()) return e;
    p.generation = ++duck_generation_;
    stream = s.prepared->ExecuteStreaming(&type);
  }
  if (!p.steps_final) s.executed = true;
  if (!stream.ok()) {
    p.done = true;
    return FromDuck(stream.status(), type);
  }
  p.stream.emplace(std::move(stream).value());
  if (p.stream->return_type() != duck::ReturnType::kRows) return std::nullopt;
  size_t ncols = p.stream->column_count();
  // Result formats: none (text), one for all, or one per column (Bind's rule), checked
  // now that the columns are known for sure. A COPY's are its options'.
  if (!s.copy && p.result_formats.size() > 1 && p.result_formats.size() != ncols) {
    p.done = true;
    return SqlError{"08P01",
                    fmt::format("bind message has {} result formats but query has {} columns",
                                p.result_formats.size(), ncols)};
  }
  p.formats.clear();
  for (size_t c = 0; c < ncols; ++c) {
    p.formats.push_back(p.result_formats.empty() || s.copy ? 0
                        : p.result_formats.size() == 1     ? p.result_formats[0]
                                                           : p.result_formats[c]);
    auto enc = ColumnEncoder::Make(p.stream->column_type(c));
    if (!enc.ok()) {
      p.done = true;
      return SqlError{"0A000", enc.status().message()};
    }
    p.encoders.push_back(std::move(enc).value());
  }
  if (s.copy) {
    std::vector<std::string> names;
    for (size_t c = 0; c < ncols; ++c) names.push_back(p.stream->column_name(c));
    auto writer = CopyOutWriter::Make(*s.copy, p.encoders, std::move(names));
    if (!writer.ok()) {
      p.done = true;
      return FromHook(writer.status());
    }
    p.copy_writer.emplace(std::move(writer).value());
  }
  return std::nullopt;
}

void Session::WriteDescription(const Portal& p) {
  std::vector<pg::FieldDescription> fields;
  for (size_t c = 0; c < p.encoders.size(); ++c) {
    const PgType& t = p.encoders[c].pg_type();
    fields.push_back({p.stream->column_name(c), t.oid, t.size, t.modifier, p.formats[c]});
  }
  pg::WriteRowDescription(out_, fields);
}

std::optional<Session::SqlError> Session::RunPortal(Portal& p, int32_t max_rows,
                                                    bool describe_rows) {
  Statement& s = *p.statement;
  if (s.empty) {
    pg::WriteEmptyQueryResponse(out_);
    return std::nullopt;
  }
  if (!s.client_setting.name.empty()) {
    if (auto e = ApplyClientSetting(s.client_setting)) return e;
    pg::WriteCommandComplete(out_, LeadingWords(s.sql, 1)[0]);
    return std::nullopt;
  }
  if (s.command) return RunCommand(s.sql);
  if (p.done) {
    // Postgres answers an Execute of a finished portal with an empty completion.
    pg::WriteCommandComplete(out_, CommandTag(s.sql, s.returns_rows, 0));
    return std::nullopt;
  }
  duck::ErrorType type = duck::ErrorType::kInvalid;
  if (!p.started) {
    if (auto e = StartPortal(p)) return e;
    if (describe_rows && !s.copy && p.stream->return_type() == duck::ReturnType::kRows)
      WriteDescription(p);
  }
  // Held since the start unless a Sync came between (a portal resumed inside a
  // transaction block takes a new turn); the caller gives it back.
  if (auto e = TakeTurn(LightStatement(s.sql))) return e;
  if (p.generation != duck_generation_) {
    p.done = true;
    p.stream.reset();
    return SqlError{
        "55000",
        "portal cannot go on: another statement ran on this session after it was suspended"};
  }
  if (p.copy_writer) return RunCopy(p);
  duck::StreamResult& stream = *p.stream;
  if (stream.return_type() != duck::ReturnType::kRows) {
    // Changed rows come back as one BIGINT row; DDL and SET as nothing.
    uint64_t changed = 0;
    if (stream.return_type() == duck::ReturnType::kChangedRows) {
      auto chunk = stream.Fetch(&type);
      if (!chunk.ok()) {
        p.done = true;
        return FromDuck(chunk.status(), type);
      }
      if (chunk->has_value() && (*chunk)->size() > 0)
        changed = static_cast<uint64_t>((*chunk)->column(0).data<int64_t>()[0]);
    }
    p.done = true;
    std::string tag = CommandTag(s.sql, false, changed);
    TrackTransaction(tag, false);
    pg::WriteCommandComplete(out_, tag);
    p.stream.reset();
    return std::nullopt;
  }
  uint64_t sent = 0;
  size_t ncols = p.encoders.size();
  while (true) {
    if (!p.chunk || p.chunk_row >= p.chunk->size()) {
      p.chunk.reset();
      auto next = stream.Fetch(&type);
      if (!next.ok()) {
        p.done = true;
        p.stream.reset();
        return FromDuck(next.status(), type);
      }
      if (!next->has_value()) break;
      p.chunk.emplace(std::move(**next));
      p.chunk_row = 0;
      continue;
    }
    if (max_rows > 0 && sent == static_cast<uint64_t>(max_rows)) {
      pg::WritePortalSuspended(out_);
      return std::nullopt;
    }
    std::vector<duck::Vector> columns;
    columns.reserve(ncols);
    for (size_t c = 0; c < ncols; ++c) columns.push_back(p.chunk->column(c));
    uint64_t end = p.chunk->size();
    if (max_rows > 0)
      end = std::min<uint64_t>(end, p.chunk_row + (static_cast<uint64_t>(max_rows) - sent));
    for (; p.chunk_row < end; ++p.chunk_row) {
      pg::MessageWriter w(out_);
      w.Begin('D');
      w.Int16(static_cast<int16_t>(ncols));
      for (size_t c = 0; c < ncols; ++c)
        p.encoders[c].Append(columns[c], p.chunk_row, p.formats[c] == 1, out_);
      w.End();
      ++sent;
      ++p.rows;
    }
    if (!FlushIfLarge()) return SqlError{"08006", "connection lost", true};
  }
  p.done = true;
  p.stream.reset();
  std::string tag = CommandTag(s.sql, true, p.rows);
  TrackTransaction(tag, false);
  pg::WriteCommandComplete(out_, tag);
  return std::nullopt;
}

std::optional<Session::SqlError> Session::RunCopy(Portal& p) {
  CopyOutWriter& writer = *p.copy_writer;
  writer.Start(out_);
  duck::ErrorType type = duck::ErrorType::kInvalid;
  std::vector<duck::Vector> columns;
  while (true) {
    auto next = p.stream->Fetch(&type);
    if (!next.ok()) {
      p.done = true;
      p.stream.reset();
      return FromDuck(next.status(), type);
    }
    if (!next->has_value()) break;
    duck::DataChunk chunk = std::move(**next);
    columns.clear();
    for (size_t c = 0; c < p.encoders.size(); ++c) columns.push_back(chunk.column(c));
    for (uint64_t r = 0; r < chunk.size(); ++r) writer.AppendRow(columns, r, out_);
    p.rows += chunk.size();
    if (!FlushIfLarge()) return SqlError{"08006", "connection lost", true};
  }
  p.done = true;
  p.stream.reset();
  writer.Finish(out_);
  std::string tag = CommandTag(p.statement->sql, false, p.rows);
  TrackTransaction(tag, false);
  pg::WriteCommandComplete(out_, tag);
  return std::nullopt;
}

std::optional<Session::SqlError> Session::ParseCopy(std::string_view statement,
                                                    std::optional<CopyOptions>* options,
                                                    std::string* query) {
  options->reset();
  query->clear();
  auto copy = ParseCopyStatement(statement);
  if (!copy.ok()) return FromHook(copy.status());
  if (!*copy) return std::nullopt;
  CopyStatement& c = **copy;
  using Target = CopyStatement::Target;
  const bool to = c.direction == CopyStatement::Direction::kTo;
  if (c.target == Target::kProgram) {
    return SqlError{
        "42501",
        fmt::format("permission denied: COPY {} PROGRAM is not allowed on the query server",
                    to ? "TO" : "FROM")};
  }
  if (c.target == Target::kFile) return std::nullopt;  // DuckDB's COPY, inside its sandbox
  if (!to) {
    return SqlError{"0A000",
                    "COPY FROM STDIN is not supported by the query server (it serves queries; "
                    "load data through a pipeline)"};
  }
  SandboxVerdict verdict = CheckSandbox(c.query);
  if (verdict.refused) return SqlError{"42501", verdict.message};
  *options = c.options;
  *query = std::move(c.query);
  return std::nullopt;
}

}  // namespace sluice::query
