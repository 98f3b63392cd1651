// Dead letters (dead_letters.h): the DLQ table and the text clean-up it needs.
#include "pipeline/dead_letters.h"

#include <fmt/format.h>

namespace sluice::pipeline {

// `s` with every invalid UTF-8 sequence replaced by U+FFFD: DuckDB's VARCHAR (and every
// JSON sink) needs valid text, and a dead letter must get through whatever it holds.
std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= s.size() && c != 0;
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok && len == 2) ok = c >= 0xC2;
    if (ok && len == 3) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && len == 4) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = c <= 0xF4 && !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

kafka::client::Message RowAsMessage(const std::string& row_json) {
  kafka::client::Message m;
  m.value = row_json;
  m.partition = -1;
  m.offset = -1;
  return m;
}

// The batch's dead letters as a table on `conn` (error, message, phase, topic, partition,
// offset, timestamp), for the DLQ sink.
Status LoadDeadLetters(duck::Connection& conn, const std::vector<DeadLetter>& letters) {
  RETURN_IF_ERROR(conn.Execute(fmt::format(
      "CREATE OR REPLACE TEMP TABLE {} (error VARCHAR, message VARCHAR, phase VARCHAR, "
      "topic VARCHAR, \"partition\" INTEGER, \"offset\" BIGINT, \"timestamp\" TIMESTAMPTZ)",
      kDlqTable)));
  std::string sql;
  for (size_t i = 0; i < letters.size(); ++i) {
    const DeadLetter& d = letters[i];
    if (sql.empty())
      sql = fmt::format("INSERT INTO {} VALUES ", kDlqTable);
    else
      sql += ',';
    std::string ts = d.timestamp_ms >= 0
                         ? fmt::format("make_timestamptz({}::BIGINT * 1000)", d.timestamp_ms)
                         : "NULL";
    std::string partition = d.partition >= 0 ? std::to_string(d.partition) : "NULL";
    std::string offset = d.offset >= 0 ? std::to_string(d.offset) : "NULL";
    sql += fmt::format("({}, {}, {}, {}, {}, {}, {})", duck::QuoteLiteral(ValidUtf8(d.error)),
                       d.value ? duck::QuoteLiteral(ValidUtf8(*d.value)) : "NULL",
                       duck::QuoteLiteral(Name(d.phase)),
                       d.topic.empty() ? "NULL" : duck::QuoteLiteral(ValidUtf8(d.topic)), partition,
                       offset, ts);
    if (sql.size() > (8 << 20) || i + 1 == letters.size()) {
      RETURN_IF_ERROR(conn.Execute(sql));
      sql.clear();
    }
  }
  return Status::OK();
}

}  // namespace sluice::pipeline
