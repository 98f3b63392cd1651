#include "query/local_session.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "query/pg_protocol.h"
#include "query/pg_types.h"
#include "query/server.h"

namespace sluice::query {
namespace {

// The largest backend message taken: a row of the query server is bounded by its own
// limits, this only stops a runaway read.
constexpr size_t kMaxMessage = size_t{1} << 30;

void PutInt32(std::string& out, int32_t v) {
  const auto u = static_cast<uint32_t>(v);
  out.push_back(static_cast<char>(u >> 24));
  out.push_back(static_cast<char>(u >> 16));
  out.push_back(static_cast<char>(u >> 8));
  out.push_back(static_cast<char>(u));
}

// An ErrorResponse's or NoticeResponse's fields into `out`.
Status ParseErrorFields(std::string_view body, LocalOutcome* out) {
  pg::MessageReader r(body);
  while (true) {
    ASSIGN_OR_RETURN(uint8_t code, r.Byte());
    if (code == 0) return Status::OK();
    ASSIGN_OR_RETURN(std::string_view value, r.CString());
    switch (code) {
      case 'C':
        out->sqlstate = std::string(value);
        break;
      case 'M':
        out->message = std::string(value);
        break;
      case 'P': {
        int position = 0;
        std::from_chars(value.data(), value.data() + value.size(), position);
        out->position = position;
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace

std::string PgTypeName(uint32_t type_oid) {
  switch (type_oid) {
    case oid::kBool:
      return "bool";
    case oid::kBytea:
      return "bytea";
    case oid::kName:
      return "name";
    case oid::kInt8:
      return "int8";
    case oid::kInt2:
      return "int2";
    case oid::kInt4:
      return "int4";
    case oid::kText:
      return "text";
    case oid::kOid:
      return "oid";
    case oid::kJson:
      return "json";
    case oid::kFloat4:
      return "float4";
    case oid::kFloat8:
      return "float8";
    case oid::kBpchar:
      return "bpchar";
    case oid::kVarchar:
      return "varchar";
    case oid::kDate:
      return "date";
    case oid::kTime:
      return "time";
    case oid::kTimestamp:
      return "timestamp";
    case oid::kTimestampTz:
      return "timestamptz";
    case oid::kInterval:
      return "interval";
    case oid::kNumeric:
      return "numeric";
    case oid::kUuid:
      return "uuid";
    case oid::kJsonb:
      return "jsonb";
    default:
      break;
  }
  if (uint32_t elem = oid::ElementOf(type_oid); elem != 0) return PgTypeName(elem) + "[]";
  return "unknown";
}

bool PgTypeNumeric(uint32_t type_oid) {
  switch (type_oid) {
    case oid::kInt2:
    case oid::kInt4:
    case oid::kInt8:
    case oid::kOid:
    case oid::kFloat4:
    case oid::kFloat8:
    case oid::kNumeric:
      return true;
    default:
      return false;
  }
}

Result<std::unique_ptr<LocalSession>> LocalSession::Open(QueryServer& server,
                                                         const std::string& user,
                                                         const std::string& database,
                                                         const std::string& application_name) {
  ASSIGN_OR_RETURN(int fd, server.ConnectLocal(user));
  std::unique_ptr<LocalSession> s(new LocalSession(server, fd));
  RETURN_IF_ERROR(s->Startup(user, database, application_name));
  return s;
}

LocalSession::~LocalSession() {
  if (!broken_) {
    std::string terminate;
    terminate.push_back('X');
    PutInt32(terminate, 4);
    (void)Send(terminate);
  }
  ::close(fd_);
}

Status LocalSession::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken_ = true;
      return IOError("the query server's session: {}", std::strerror(errno));
    }
    sent += static_cast<size_t>(n);
  }
  return Status::OK();
}

Result<std::pair<char, std::string>> LocalSession::Next(const LocalHandler* handler,
                                                        bool* stopped) {
  while (true) {
    size_t used = 0;
    auto frame = pg::ReadFrame(std::string_view(in_).substr(in_pos_), kMaxMessage, &used);
    if (!frame.ok()) {
      broken_ = true;
      return frame.status();
    }
    if (frame->has_value()) {
      std::pair<char, std::string> out{(*frame)->type, std::string((*frame)->body)};
      in_pos_ += used;
      if (in_pos_ == in_.size()) {
        in_.clear();
        in_pos_ = 0;
      }
      return out;
    }
    if (in_pos_ > 0) {
      in_.erase(0, in_pos_);
      in_pos_ = 0;
    }
    if (handler != nullptr) {
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, std::max(handler->idle_ms, 1));
      if (ready == 0) {
        // A cancel that reached the server before its statement ran was not kept there.
        if (cancel_requested_.load()) server_.Cancel(process_id_.load(), secret_key_.load());
        if (handler->on_idle && !*stopped && !handler->on_idle()) {
          *stopped = true;
          Cancel();
        }
        continue;
      }
      if (ready < 0 && errno == EINTR) continue;
    }
    char buf[64 * 1024];
    ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken_ = true;
      return IOError("the query server closed the session{}",
                     n < 0 ? std::string(": ") + std::strerror(errno) : std::string());
    }
    in_.append(buf, static_cast<size_t>(n));
  }
}

Status LocalSession::Startup(const std::string& user, const std::string& database,
                             const std::string& application_name) {
  std::string body;
  PutInt32(body, pg::kProtocolVersion3);
  auto param = [&](std::string_view k, std::string_view v) {
    body.append(k);
    body.push_back('\0');
    body.append(v);
    body.push_back('\0');
  };
  param("user", user);
  if (!database.empty()) param("database", database);
  param("application_name", application_name);
  body.push_back('\0');
  std::string packet;
  PutInt32(packet, static_cast<int32_t>(body.size() + 4));
  packet += body;
  RETURN_IF_ERROR(Send(packet));
  while (true) {
    ASSIGN_OR_RETURN(auto msg, Next());
    const auto& [type, b] = msg;
    switch (type) {
      case 'R':  // AuthenticationOk: a trusted session asks nothing else
      case 'S':  // ParameterStatus
      case 'N':
        break;
      case 'K': {
        pg::MessageReader r(b);
        ASSIGN_OR_RETURN(int32_t pid, r.Int32());
        ASSIGN_OR_RETURN(int32_t key, r.Int32());
        process_id_ = pid;
        secret_key_ = key;
        break;
      }
      case 'E': {
        LocalOutcome e;
        RETURN_IF_ERROR(ParseErrorFields(b, &e));
        broken_ = true;
        return IOError("the query server refused the session: {} ({})", e.message, e.sqlstate);
      }
      case 'Z':
        return Status::OK();
      default:
        broken_ = true;
        return IOError("the query server sent message '{}' during the startup", type);
    }
  }
}

Result<LocalOutcome> LocalSession::Run(std::string_view sql, const LocalHandler& handler) {
  if (broken_) return IOError("the query server's session is closed");
  struct Ended {
    std::atomic<bool>& requested;
    ~Ended() { requested.store(false); }
  } ended{cancel_requested_};
  if (cancel_requested_.load()) {
    LocalOutcome cancelled;
    cancelled.ok = false;
    cancelled.sqlstate = "57014";
    cancelled.message = "canceling statement due to user request";
    return cancelled;
  }
  std::string query;
  pg::MessageWriter w(query);
  w.Begin('Q');
  w.CString(sql.substr(0, sql.find('\0')));
  w.End();
  RETURN_IF_ERROR(Send(query));
  LocalOutcome outcome;
  std::vector<LocalColumn> columns;
  std::vector<std::optional<std::string_view>> values;
  // `abandoned`: on_idle said stop (nothing more is handed on); `skipping`: on_row said stop,
  // so the rest of this result is dropped (its statement cancelled) and later statements
  // are handed on as they come. A cancel landing once the statement had ended may stop a
  // later one instead: that one's 57014 is reported.
  bool abandoned = false;
  bool skipping = false;
  while (true) {
    ASSIGN_OR_RETURN(auto msg, Next(&handler, &abandoned));
    if (abandoned) outcome.stopped = true;
    const char type = msg.first;
    std::string_view body = msg.second;
    pg::MessageReader r(body);
    switch (type) {
      case 'T': {
        ASSIGN_OR_RETURN(int16_t n, r.Int16());
        columns.clear();
        for (int i = 0; i < n; ++i) {
          LocalColumn c;
          ASSIGN_OR_RETURN(std::string_view name, r.CString());
          c.name = std::string(name);
          ASSIGN_OR_RETURN(int32_t table_oid, r.Int32());
          ASSIGN_OR_RETURN(int16_t attnum, r.Int16());
          ASSIGN_OR_RETURN(int32_t type_oid, r.Int32());
          ASSIGN_OR_RETURN(int16_t size, r.Int16());
          ASSIGN_OR_RETURN(int32_t modifier, r.Int32());
          ASSIGN_OR_RETURN(int16_t format, r.Int16());
          (void)table_oid, (void)attnum, (void)size, (void)format;
          c.type_oid = static_cast<uint32_t>(type_oid);
          c.type_modifier = modifier;
          c.type = PgTypeName(c.type_oid);
          c.numeric = PgTypeNumeric(c.type_oid);
          columns.push_back(std::move(c));
        }
        skipping = false;
        if (handler.on_columns && !abandoned) handler.on_columns(columns);
        break;
      }
      case 'D': {
        if (abandoned || skipping) break;
        ASSIGN_OR_RETURN(int16_t n, r.Int16());
        values.assign(static_cast<size_t>(std::max<int16_t>(n, 0)), std::nullopt);
        for (int i = 0; i < n; ++i) {
          ASSIGN_OR_RETURN(int32_t len, r.Int32());
          if (len < 0) continue;
          ASSIGN_OR_RETURN(std::string_view v, r.Bytes(static_cast<size_t>(len)));
          values[static_cast<size_t>(i)] = v;
        }
        if (handler.on_row && !handler.on_row(values)) {
          outcome.stopped = true;
          skipping = true;
          // Once: the statements after the cut one are to run.
          server_.Cancel(process_id_.load(), secret_key_.load());
        }
        break;
      }
      case 'C': {
        ASSIGN_OR_RETURN(std::string_view tag, r.CString());
        if (skipping) {
          skipping = false;  // the cut statement ended before the cancel reached it
          break;
        }
        if (handler.on_complete && !abandoned) handler.on_complete(tag);
        break;
      }
      case 'I':  // EmptyQueryResponse
      case 'H':  // COPY TO STDOUT: its rows are not shown, its tag is
      case 'd':
      case 'c':
      case 'S':
        break;
      case 'N': {
        LocalOutcome notice;
        RETURN_IF_ERROR(ParseErrorFields(body, &notice));
        if (handler.on_notice && !abandoned) handler.on_notice(notice.message);
        break;
      }
      case 'E': {
        LocalOutcome error;
        RETURN_IF_ERROR(ParseErrorFields(body, &error));
        if (skipping) {
          skipping = false;
          if (error.sqlstate == "57014") {  // the cut statement's cancel
            outcome.rest_not_run = true;
            break;
          }
        }
        if (outcome.ok) {
          outcome.ok = false;
          outcome.sqlstate = std::move(error.sqlstate);
          outcome.message = std::move(error.message);
          outcome.position = error.position;
        }
        break;
      }
      case 'G': {
        // COPY FROM STDIN: the console has no data to give.
        std::string fail;
        pg::MessageWriter f(fail);
        f.Begin('f');
        f.CString("COPY FROM STDIN is not available here");
        f.End();
        RETURN_IF_ERROR(Send(fail));
        break;
      }
      case 'Z':
        return outcome;
      default:
        broken_ = true;
        return IOError("the query server sent message '{}' during a query", type);
    }
  }
}

void LocalSession::Cancel() {
  cancel_requested_.store(true);
  const int32_t pid = process_id_.load();
  if (pid != 0) server_.Cancel(pid, secret_key_.load());
}

}  // namespace sluice::query
