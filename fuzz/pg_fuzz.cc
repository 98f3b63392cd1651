// Fuzz target for the query server's decoders of client bytes (src/query): the startup
// packet, every frontend message, binary parameters, COPY statements. Byte 0 picks the
// phase: 0 the startup packet, 1 a stream of messages, 2 one binary parameter (a 4-byte
// type OID, then its bytes), 3 a statement (up to the first NUL), then a value: the
// statement goes through the lexer's readers (COPY, light statements, the query inside
// CREATE TABLE AS / INSERT, where a DuckDB error message, the value, points) and the COPY
// options encode the value. Whatever the bytes, each decoder returns a value or an error,
// never crashes or hangs; a decoded NUMERIC must encode again; COPY options accepted are
// consistent and an encoded text value holds no raw line end; offsets stay inside the
// statement.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "query/copy_out.h"
#include "query/pg_protocol.h"
#include "query/pg_types.h"
#include "query/sql_text.h"

using namespace sluice::query;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t used = 0;
  switch (data[0] % 4) {
    case 0: {
      auto frame = pg::ReadStartupFrame(in, &used);
      if (frame.ok() && frame->has_value()) {
        auto p = pg::ParseStartupPacket(**frame);
        if (p.ok() && p->kind == pg::StartupPacket::Kind::kStartup && p->Param("user").empty())
          std::abort();
      }
      break;
    }
    case 1:
      while (!in.empty()) {
        auto frame = pg::ReadFrame(in, 1 << 20, &used);
        if (!frame.ok() || !frame->has_value()) break;
        const pg::Frame& f = **frame;
        switch (f.type) {
          case 'Q':
            (void)pg::ParseQuery(f.body);
            break;
          case 'P':
            (void)pg::ParseParse(f.body);
            break;
          case 'B': {
            auto b = pg::ParseBind(f.body);
            if (b.ok()) {
              for (size_t i = 0; i < b->params.size(); ++i) (void)b->ParamFormat(i);
            }
            break;
          }
          case 'D':
            (void)pg::ParseDescribe(f.body);
            break;
          case 'E':
            (void)pg::ParseExecute(f.body);
            break;
          case 'C':
            (void)pg::ParseClose(f.body);
            break;
          case 'p':
            (void)pg::ParseSaslInitialResponse(f.body);
            (void)pg::ParsePasswordMessage(f.body);
            break;
          default:
            break;
        }
        if (used == 0 || used > in.size()) std::abort();
        in.remove_prefix(used);
      }
      break;
    case 3: {
      size_t nul = in.find('\0');
      std::string_view sql = in.substr(0, nul);
      std::string_view value =
          nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
      (void)LightStatement(sql);
      size_t query = EmbeddedQueryStart(sql);
      if (query != std::string_view::npos && query >= sql.size()) std::abort();
      size_t offset = ErrorOffset(value, sql);
      if (offset != std::string_view::npos && offset > sql.size()) std::abort();
      auto copy = ParseCopyStatement(sql);
      if (!copy.ok()) {
        if (copy.status().message().size() < 7 || copy.status().message()[5] != ':')
          std::abort();  // a SQLSTATE
        break;
      }
      if (!copy->has_value() || (*copy)->target != CopyStatement::Target::kClient ||
          (*copy)->direction != CopyStatement::Direction::kTo) {
        break;
      }
      const CopyOptions& o = (*copy)->options;
      if (o.delimiter == '\n' || o.delimiter == '\r') std::abort();
      std::string out;
      if (o.format == CopyFormat::kCsv) {
        if (o.delimiter == o.quote) std::abort();
        AppendCopyCsv(value, o, false, true, out);
        if (value.find_first_of("\r\n") != std::string_view::npos && out.front() != o.quote)
          std::abort();
      } else {
        AppendCopyText(value, o.delimiter, out);
        if (out.find_first_of("\r\n") != std::string::npos) std::abort();
      }
      break;
    }
    default: {
      if (in.size() < 4) return 0;
      uint32_t oid = (uint32_t{static_cast<uint8_t>(in[0])} << 24) |
                     (uint32_t{static_cast<uint8_t>(in[1])} << 16) |
                     (uint32_t{static_cast<uint8_t>(in[2])} << 8) | static_cast<uint8_t>(in[3]);
      std::string_view bytes = in.substr(4);
      (void)DecodeParam(oid, true, bytes);
      (void)DecodeParam(oid, false, bytes);
      auto text = NumericTextFromBinary(bytes);
      if (text.ok() && !NumericBinaryFromText(*text).ok()) std::abort();
      break;
    }
  }
  return 0;
}
