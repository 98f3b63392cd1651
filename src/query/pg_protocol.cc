#include "query/pg_protocol.h"

#include <cstring>

namespace sluice::query::pg {

Result<uint8_t> MessageReader::Byte() {
  if (remaining() < 1)
    return InvalidArgumentError("message ends at byte {}, a byte was expected", pos_);
  return static_cast<uint8_t>(data_[pos_++]);
}

Result<int16_t> MessageReader::Int16() {
  if (remaining() < 2)
    return InvalidArgumentError("message ends at byte {}, an Int16 was expected", pos_);
  auto b = reinterpret_cast<const uint8_t*>(data_.data() + pos_);
  pos_ += 2;
  return static_cast<int16_t>((b[0] << 8) | b[1]);
}

Result<int32_t> MessageReader::Int32() {
  if (remaining() < 4)
    return InvalidArgumentError("message ends at byte {}, an Int32 was expected", pos_);
  auto b = reinterpret_cast<const uint8_t*>(data_.data() + pos_);
  pos_ += 4;
  return static_cast<int32_t>((uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
                              (uint32_t{b[2]} << 8) | b[3]);
}

Result<std::string_view> MessageReader::CString() {
  size_t end = data_.find('\0', pos_);
  if (end == std::string_view::npos) {
    return InvalidArgumentError("string at byte {} has no terminating NUL", pos_);
  }
  std::string_view s = data_.substr(pos_, end - pos_);
  pos_ = end + 1;
  return s;
}

Result<std::string_view> MessageReader::Bytes(size_t n) {
  if (remaining() < n) {
    return InvalidArgumentError("message ends at byte {}, {} more bytes were expected", pos_, n);
  }
  std::string_view s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::string_view MessageReader::Rest() {
  std::string_view s = data_.substr(pos_);
  pos_ = data_.size();
  return s;
}

namespace {

uint32_t BigEndian32(const char* p) {
  auto b = reinterpret_cast<const uint8_t*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

Status ExpectEnd(MessageReader& r, std::string_view what) {
  if (!r.done())
    return InvalidArgumentError("{} message has {} bytes after its end", what, r.remaining());
  return Status::OK();
}

}  // namespace

Result<std::optional<Frame>> ReadFrame(std::string_view buffer, size_t max_body, size_t* consumed) {
  *consumed = 0;
  if (buffer.size() < 5) return std::optional<Frame>();
  int32_t len = static_cast<int32_t>(BigEndian32(buffer.data() + 1));
  if (len < 4) return InvalidArgumentError("message '{}' has an invalid length {}", buffer[0], len);
  size_t body = static_cast<size_t>(len) - 4;
  if (body > max_body) {
    return InvalidArgumentError("message '{}' of {} bytes is over the limit of {} bytes", buffer[0],
                                body, max_body);
  }
  if (buffer.size() < 5 + body) return std::optional<Frame>();
  *consumed = 5 + body;
  return std::optional<Frame>(Frame{buffer[0], buffer.substr(5, body)});
}

Result<std::optional<std::string_view>> ReadStartupFrame(std::string_view buffer,
                                                         size_t* consumed) {
  *consumed = 0;
  if (buffer.size() < 4) return std::optional<std::string_view>();
  int32_t len = static_cast<int32_t>(BigEndian32(buffer.data()));
  if (len < 8 || static_cast<size_t>(len) > kMaxStartupPacket) {
    return InvalidArgumentError("startup packet has an invalid length {}", len);
  }
  if (buffer.size() < static_cast<size_t>(len)) return std::optional<std::string_view>();
  *consumed = static_cast<size_t>(len);
  return std::optional<std::string_view>(buffer.substr(4, static_cast<size_t>(len) - 4));
}

std::string StartupPacket::Param(std::string_view name) const {
  for (const auto& [k, v] : params) {
    if (k == name) return v;
  }
  return "";
}

Result<StartupPacket> ParseStartupPacket(std::string_view body) {
  MessageReader r(body);
  ASSIGN_OR_RETURN(int32_t code, r.Int32());
  StartupPacket p;
  if (code == kSslRequestCode || code == kGssEncRequestCode) {
    RETURN_IF_ERROR(ExpectEnd(r, "SSLRequest"));
    p.kind = code == kSslRequestCode ? StartupPacket::Kind::kSslRequest
                                     : StartupPacket::Kind::kGssEncRequest;
    return p;
  }
  if (code == kCancelRequestCode) {
    p.kind = StartupPacket::Kind::kCancel;
    ASSIGN_OR_RETURN(p.process_id, r.Int32());
    ASSIGN_OR_RETURN(p.secret_key, r.Int32());
    RETURN_IF_ERROR(ExpectEnd(r, "CancelRequest"));
    return p;
  }
  if ((code >> 16) != 3) {
    return UnimplementedError("unsupported frontend protocol {}.{}: the server supports 3.0",
                              code >> 16, code & 0xffff);
  }
  p.version = code;
  while (true) {
    ASSIGN_OR_RETURN(std::string_view name, r.CString());
    if (name.empty()) break;
    ASSIGN_OR_RETURN(std::string_view value, r.CString());
    if (!IsValidUtf8(name) || !IsValidUtf8(value)) {
      return InvalidArgumentError("startup parameter '{}' is not valid UTF-8", name);
    }
    p.params.emplace_back(std::string(name), std::string(value));
  }
  RETURN_IF_ERROR(ExpectEnd(r, "startup"));
  if (p.Param("user").empty())
    return InvalidArgumentError("no PostgreSQL user name specified in startup packet");
  return p;
}

int16_t BindMessage::ParamFormat(size_t i) const {
  if (param_formats.empty()) return 0;
  if (param_formats.size() == 1) return param_formats[0];
  return i < param_formats.size() ? param_formats[i] : 0;
}

Result<std::string> ParseQuery(std::string_view body) {
  MessageReader r(body);
  ASSIGN_OR_RETURN(std::string_view q, r.CString());
  RETURN_IF_ERROR(ExpectEnd(r, "Query"));
  return std::string(q);
}

Result<ParseMessage> ParseParse(std::string_view body) {
  MessageReader r(body);
  ParseMessage m;
  ASSIGN_OR_RETURN(std::string_view name, r.CString());
  ASSIGN_OR_RETURN(std::string_view query, r.CString());
  ASSIGN_OR_RETURN(int16_t n, r.Int16());
  if (n < 0) return InvalidArgumentError("Parse message has a negative parameter count {}", n);
  for (int16_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(int32_t oid, r.Int32());
    m.param_types.push_back(static_cast<uint32_t>(oid));
  }
  RETURN_IF_ERROR(ExpectEnd(r, "Parse"));
  m.statement = name;
  m.query = query;
  return m;
}

Result<BindMessage> ParseBind(std::string_view body) {
  MessageReader r(body);
  BindMessage m;
  ASSIGN_OR_RETURN(std::string_view portal, r.CString());
  ASSIGN_OR_RETURN(std::string_view stmt, r.CString());
  m.portal = portal;
  m.statement = stmt;
  ASSIGN_OR_RETURN(int16_t nformats, r.Int16());
  if (nformats < 0)
    return InvalidArgumentError("Bind message has a negative format count {}", nformats);
  for (int16_t i = 0; i < nformats; ++i) {
    ASSIGN_OR_RETURN(int16_t f, r.Int16());
    if (f != 0 && f != 1)
      return InvalidArgumentError("Bind message has an unknown parameter format {}", f);
    m.param_formats.push_back(f);
  }
  ASSIGN_OR_RETURN(int16_t nparams, r.Int16());
  if (nparams < 0)
    return InvalidArgumentError("Bind message has a negative parameter count {}", nparams);
  if (nformats > 1 && nformats != nparams) {
    return InvalidArgumentError("Bind message has {} parameter formats for {} parameters", nformats,
                                nparams);
  }
  for (int16_t i = 0; i < nparams; ++i) {
    ASSIGN_OR_RETURN(int32_t len, r.Int32());
    if (len == -1) {
      m.params.emplace_back(std::nullopt);
      continue;
    }
    if (len < 0)
      return InvalidArgumentError("Bind message parameter {} has an invalid length {}", i + 1, len);
    ASSIGN_OR_RETURN(std::string_view v, r.Bytes(static_cast<size_t>(len)));
    m.params.emplace_back(std::string(v));
  }
  ASSIGN_OR_RETURN(int16_t nresults, r.Int16());
  if (nresults < 0)
    return InvalidArgumentError("Bind message has a negative result format count {}", nresults);
  for (int16_t i = 0; i < nresults; ++i) {
    ASSIGN_OR_RETURN(int16_t f, r.Int16());
    if (f != 0 && f != 1)
      return InvalidArgumentError("Bind message has an unknown result format {}", f);
    m.result_formats.push_back(f);
  }
  RETURN_IF_ERROR(ExpectEnd(r, "Bind"));
  return m;
}

namespace {
Result<std::pair<char, std::string>> ParseKindAndName(std::string_view body,
                                                      std::string_view what) {
  MessageReader r(body);
  ASSIGN_OR_RETURN(uint8_t kind, r.Byte());
  if (kind != 'S' && kind != 'P') {
    return InvalidArgumentError("{} message has an invalid kind '{}'", what,
                                static_cast<char>(kind));
  }
  ASSIGN_OR_RETURN(std::string_view name, r.CString());
  RETURN_IF_ERROR(ExpectEnd(r, what));
  return std::make_pair(static_cast<char>(kind), std::string(name));
}
}  // namespace

Result<DescribeMessage> ParseDescribe(std::string_view body) {
  ASSIGN_OR_RETURN(auto kn, ParseKindAndName(body, "Describe"));
  return DescribeMessage{kn.first, std::move(kn.second)};
}

Result<CloseMessage> ParseClose(std::string_view body) {
  ASSIGN_OR_RETURN(auto kn, ParseKindAndName(body, "Close"));
  return CloseMessage{kn.first, std::move(kn.second)};
}

Result<ExecuteMessage> ParseExecute(std::string_view body) {
  MessageReader r(body);
  ASSIGN_OR_RETURN(std::string_view portal, r.CString());
  ASSIGN_OR_RETURN(int32_t max_rows, r.Int32());
  RETURN_IF_ERROR(ExpectEnd(r, "Execute"));
  return ExecuteMessage{std::string(portal), max_rows < 0 ? 0 : max_rows};
}

Result<std::string> ParsePasswordMessage(std::string_view body) {
  MessageReader r(body);
  ASSIGN_OR_RETURN(std::string_view p, r.CString());
  RETURN_IF_ERROR(ExpectEnd(r, "PasswordMessage"));
  return std::string(p);
}

Result<SaslInitialResponse> ParseSaslInitialResponse(std::string_view body) {
  MessageReader r(body);
  ASSIGN_OR_RETURN(std::string_view mech, r.CString());
  ASSIGN_OR_RETURN(int32_t len, r.Int32());
  SaslInitialResponse m{std::string(mech), ""};
  if (len >= 0) {
    ASSIGN_OR_RETURN(std::string_view data, r.Bytes(static_cast<size_t>(len)));
    m.data = data;
  } else if (len != -1) {
    return InvalidArgumentError("SASLInitialResponse has an invalid length {}", len);
  }
  RETURN_IF_ERROR(ExpectEnd(r, "SASLInitialResponse"));
  return m;
}

void MessageWriter::Begin(char type) {
  out_.push_back(type);
  start_ = out_.size();
  out_.append(4, '\0');
}

void MessageWriter::Byte(uint8_t v) { out_.push_back(static_cast<char>(v)); }

void MessageWriter::Int16(int16_t v) {
  auto u = static_cast<uint16_t>(v);
  out_.push_back(static_cast<char>(u >> 8));
  out_.push_back(static_cast<char>(u));
}

void MessageWriter::Int32(int32_t v) {
  auto u = static_cast<uint32_t>(v);
  char b[4] = {static_cast<char>(u >> 24), static_cast<char>(u >> 16), static_cast<char>(u >> 8),
               static_cast<char>(u)};
  out_.append(b, 4);
}

void MessageWriter::Int64(int64_t v) {
  Int32(static_cast<int32_t>(static_cast<uint64_t>(v) >> 32));
  Int32(static_cast<int32_t>(static_cast<uint64_t>(v)));
}

void MessageWriter::CString(std::string_view s) {
  out_.append(s);
  out_.push_back('\0');
}

void MessageWriter::Bytes(std::string_view s) { out_.append(s); }

void MessageWriter::End() {
  auto len = static_cast<uint32_t>(out_.size() - start_);
  out_[start_] = static_cast<char>(len >> 24);
  out_[start_ + 1] = static_cast<char>(len >> 16);
  out_[start_ + 2] = static_cast<char>(len >> 8);
  out_[start_ + 3] = static_cast<char>(len);
}

namespace {
void WriteAuth(std::string& out, int32_t code, std::string_view data = {}) {
  MessageWriter w(out);
  w.Begin('R');
  w.Int32(code);
  w.Bytes(data);
  w.End();
}
void WriteEmpty(std::string& out, char type) {
  MessageWriter w(out);
  w.Begin(type);
  w.End();
}
// A NUL inside a C string would end it early: replaced by a space.
std::string NoNul(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\0') c = ' ';
  }
  return out;
}
}  // namespace

void WriteAuthenticationOk(std::string& out) { WriteAuth(out, 0); }
void WriteAuthenticationCleartextPassword(std::string& out) { WriteAuth(out, 3); }
void WriteAuthenticationSasl(std::string& out, const std::vector<std::string>& mechanisms) {
  std::string data;
  for (const std::string& m : mechanisms) {
    data += m;
    data.push_back('\0');
  }
  data.push_back('\0');
  WriteAuth(out, 10, data);
}
void WriteAuthenticationSaslContinue(std::string& out, std::string_view data) {
  WriteAuth(out, 11, data);
}
void WriteAuthenticationSaslFinal(std::string& out, std::string_view data) {
  WriteAuth(out, 12, data);
}

void WriteParameterStatus(std::string& out, std::string_view name, std::string_view value) {
  MessageWriter w(out);
  w.Begin('S');
  w.CString(NoNul(name));
  w.CString(NoNul(value));
  w.End();
}

void WriteBackendKeyData(std::string& out, int32_t process_id, int32_t secret_key) {
  MessageWriter w(out);
  w.Begin('K');
  w.Int32(process_id);
  w.Int32(secret_key);
  w.End();
}

void WriteReadyForQuery(std::string& out, char status) {
  MessageWriter w(out);
  w.Begin('Z');
  out.push_back(status);
  w.End();
}

void WriteRowDescription(std::string& out, const std::vector<FieldDescription>& fields) {
  MessageWriter w(out);
  w.Begin('T');
  w.Int16(static_cast<int16_t>(fields.size()));
  for (const FieldDescription& f : fields) {
    w.CString(NoNul(f.name));
    w.Int32(0);  // table OID
    w.Int16(0);  // column number
    w.Int32(static_cast<int32_t>(f.type_oid));
    w.Int16(f.type_size);
    w.Int32(f.type_modifier);
    w.Int16(f.format);
  }
  w.End();
}

void WriteParameterDescription(std::string& out, const std::vector<uint32_t>& oids) {
  MessageWriter w(out);
  w.Begin('t');
  w.Int16(static_cast<int16_t>(oids.size()));
  for (uint32_t oid : oids) w.Int32(static_cast<int32_t>(oid));
  w.End();
}

void WriteCommandComplete(std::string& out, std::string_view tag) {
  MessageWriter w(out);
  w.Begin('C');
  w.CString(NoNul(tag));
  w.End();
}

void WriteEmptyQueryResponse(std::string& out) { WriteEmpty(out, 'I'); }

void WriteErrorResponse(std::string& out, const ErrorFields& e) {
  MessageWriter w(out);
  w.Begin('E');
  auto field = [&](char code, std::string_view value) {
    if (value.empty()) return;
    out.push_back(code);
    w.CString(NoNul(value));
  };
  field('S', e.severity);
  field('V', e.severity);
  field('C', e.sqlstate);
  field('M', e.message);
  field('D', e.detail);
  field('H', e.hint);
  if (e.position > 0) field('P', std::to_string(e.position));
  out.push_back('\0');
  w.End();
}

void WriteParseComplete(std::string& out) { WriteEmpty(out, '1'); }
void WriteBindComplete(std::string& out) { WriteEmpty(out, '2'); }
void WriteCloseComplete(std::string& out) { WriteEmpty(out, '3'); }
void WriteNoData(std::string& out) { WriteEmpty(out, 'n'); }
void WritePortalSuspended(std::string& out) { WriteEmpty(out, 's'); }

void WriteCopyDone(std::string& out) { WriteEmpty(out, 'c'); }

}  // namespace sluice::query::pg
