// The Postgres frontend/backend protocol, version 3.0: framing, the startup packet and
// the frontend messages decoded from bytes, the backend messages encoded into a buffer.
// Pure functions over bytes, no I/O; every decoder takes input from the network and
// names what was wrong (docs/design/0010-query-server.md).
//
//   size_t used = 0;
//   ASSIGN_OR_RETURN(std::optional<Frame> f, ReadFrame(buffer, kMaxMessage, &used));
//   if (f && f->type == 'Q') { ASSIGN_OR_RETURN(std::string sql, ParseQuery(f->body)); }
//
//   std::string out;
//   WriteReadyForQuery(out, 'I');
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/utf8.h"

namespace sluice::query::pg {

inline constexpr int32_t kProtocolVersion3 = 196608;  // 3.0
inline constexpr int32_t kSslRequestCode = 80877103;
inline constexpr int32_t kGssEncRequestCode = 80877104;
inline constexpr int32_t kCancelRequestCode = 80877102;
// The largest startup packet accepted (Postgres allows 10000 bytes).
inline constexpr size_t kMaxStartupPacket = 10000;

// Big-endian reads over a message body; every read checks the bytes are there.
class MessageReader {
 public:
  explicit MessageReader(std::string_view body) : data_(body) {}
  Result<uint8_t> Byte();
  Result<int16_t> Int16();
  Result<int32_t> Int32();
  // A NUL-terminated string (without its NUL).
  Result<std::string_view> CString();
  Result<std::string_view> Bytes(size_t n);
  std::string_view Rest();
  size_t remaining() const { return data_.size() - pos_; }
  bool done() const { return pos_ == data_.size(); }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// One regular message: a type byte, then its body (the length word removed).
struct Frame {
  char type;
  std::string_view body;
};

// The first message from `buffer` when it is all there (sets *consumed), nullopt when
// more bytes are needed. A length below 4 or above `max_body` is InvalidArgument (the
// connection cannot go on).
Result<std::optional<Frame>> ReadFrame(std::string_view buffer, size_t max_body, size_t* consumed);
// The same for the startup phase, whose packets have no type byte: the body after the
// length word.
Result<std::optional<std::string_view>> ReadStartupFrame(std::string_view buffer, size_t* consumed);

struct StartupPacket {
  enum class Kind { kStartup, kSslRequest, kGssEncRequest, kCancel };
  Kind kind = Kind::kStartup;
  int32_t version = 0;                                      // kStartup
  std::vector<std::pair<std::string, std::string>> params;  // kStartup: user, database...
  int32_t process_id = 0;                                   // kCancel
  int32_t secret_key = 0;                                   // kCancel
  // The value of startup parameter `name`, or "".
  std::string Param(std::string_view name) const;
};
// Decodes a startup-phase packet body. A protocol other than 3.x is refused.
Result<StartupPacket> ParseStartupPacket(std::string_view body);

// Frontend messages of the extended protocol and authentication.
struct ParseMessage {
  std::string statement;
  std::string query;
  std::vector<uint32_t> param_types;  // 0: unspecified
};
struct BindMessage {
  std::string portal;
  std::string statement;
  std::vector<int16_t> param_formats;              // 0, 1 (all) or one per parameter
  std::vector<std::optional<std::string>> params;  // nullopt: NULL
  std::vector<int16_t> result_formats;             // 0, 1 (all) or one per column
  // The format of parameter `i` (0 text, 1 binary).
  int16_t ParamFormat(size_t i) const;
};
struct DescribeMessage {
  char kind;  // 'S' statement, 'P' portal
  std::string name;
};
struct ExecuteMessage {
  std::string portal;
  int32_t max_rows;  // 0: all
};
struct CloseMessage {
  char kind;  // 'S' or 'P'
  std::string name;
};
struct SaslInitialResponse {
  std::string mechanism;
  std::string data;
};

Result<std::string> ParseQuery(std::string_view body);
Result<ParseMessage> ParseParse(std::string_view body);
Result<BindMessage> ParseBind(std::string_view body);
Result<DescribeMessage> ParseDescribe(std::string_view body);
Result<ExecuteMessage> ParseExecute(std::string_view body);
Result<CloseMessage> ParseClose(std::string_view body);
Result<std::string> ParsePasswordMessage(std::string_view body);
Result<SaslInitialResponse> ParseSaslInitialResponse(std::string_view body);

// Well-formed UTF-8 (base/utf8.h): what Postgres accepts as text in its UTF8 encoding.
using sluice::IsValidUtf8;

// Builds one backend message in a buffer: Begin writes the type and a length
// placeholder, End fills the length in.
class MessageWriter {
 public:
  explicit MessageWriter(std::string& out) : out_(out) {}
  void Begin(char type);
  void Byte(uint8_t v);
  void Int16(int16_t v);
  void Int32(int32_t v);
  void Int64(int64_t v);
  void CString(std::string_view s);  // must not hold a NUL
  void Bytes(std::string_view s);
  void End();

 private:
  std::string& out_;
  size_t start_ = 0;
};

// One column of a RowDescription.
struct FieldDescription {
  std::string name;
  uint32_t type_oid;
  int16_t type_size;
  int32_t type_modifier;
  int16_t format;  // 0 text, 1 binary
};

// The fields of an ErrorResponse.
struct ErrorFields {
  std::string severity = "ERROR";  // ERROR, FATAL
  std::string sqlstate;            // five characters
  std::string message;
  std::string detail;  // optional
  std::string hint;    // optional
  int position = 0;    // optional: 1-based character position in the query string
};

void WriteAuthenticationOk(std::string& out);
void WriteAuthenticationCleartextPassword(std::string& out);
void WriteAuthenticationSasl(std::string& out, const std::vector<std::string>& mechanisms);
void WriteAuthenticationSaslContinue(std::string& out, std::string_view data);
void WriteAuthenticationSaslFinal(std::string& out, std::string_view data);
void WriteParameterStatus(std::string& out, std::string_view name, std::string_view value);
void WriteBackendKeyData(std::string& out, int32_t process_id, int32_t secret_key);
void WriteReadyForQuery(std::string& out, char status);  // 'I', 'T' or 'E'
void WriteRowDescription(std::string& out, const std::vector<FieldDescription>& fields);
void WriteParameterDescription(std::string& out, const std::vector<uint32_t>& oids);
void WriteCommandComplete(std::string& out, std::string_view tag);
void WriteEmptyQueryResponse(std::string& out);
void WriteErrorResponse(std::string& out, const ErrorFields& error);
void WriteParseComplete(std::string& out);
void WriteBindComplete(std::string& out);
void WriteCloseComplete(std::string& out);
void WriteNoData(std::string& out);
void WritePortalSuspended(std::string& out);
// COPY TO STDOUT's end (CopyOutResponse and CopyData are written by query/copy_out.h).
void WriteCopyDone(std::string& out);

}  // namespace sluice::query::pg
