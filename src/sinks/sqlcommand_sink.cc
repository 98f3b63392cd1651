#include "sinks/sqlcommand_sink.h"

#include <fmt/format.h>

#include <array>
#include <memory>

#include "sinks/duck_rows.h"

namespace sluice::sinks {

namespace {

bool Blank(std::string_view s) { return s.find_first_not_of(" \t\r\n;") == std::string_view::npos; }

}  // namespace

Result<std::unique_ptr<SqlCommandSink>> SqlCommandSink::Create(SqlCommandSinkOptions options) {
  if (Blank(options.sql)) return InvalidArgumentError("sqlcommand sink: sql is empty");
  for (size_t i = 0; i < options.substitutions.size(); ++i) {
    if (options.substitutions[i].var.empty()) {
      return InvalidArgumentError("sqlcommand sink: substitutions[{}].var is empty", i);
    }
  }
  return std::unique_ptr<SqlCommandSink>(new SqlCommandSink(std::move(options)));
}

SqlCommandSink::SqlCommandSink(SqlCommandSinkOptions options) : options_(std::move(options)) {
  std::random_device rd;
  std::seed_seq seed{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
  rng_.seed(seed);
}

std::string SqlCommandSink::Uuid4() {
  std::array<uint8_t, 16> b;
  for (size_t i = 0; i < b.size(); i += 8) {
    uint64_t v = rng_();
    for (size_t j = 0; j < 8; ++j) b[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  b[6] = static_cast<uint8_t>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<uint8_t>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out += fmt::format("{:02x}", b[i]);
  }
  return out;
}

std::string SqlCommandSink::SubstitutedSql() {
  std::string sql = options_.sql;
  for (const SqlSubstitution& s : options_.substitutions) {
    // One value per var per execution, as Python's str.replace in sqlflow.
    const std::string value = Uuid4();
    std::string out;
    size_t from = 0;
    for (size_t at; (at = sql.find(s.var, from)) != std::string::npos; from = at + s.var.size()) {
      out.append(sql, from, at - from);
      out += value;
    }
    out.append(sql, from, std::string::npos);
    sql = std::move(out);
  }
  return sql;
}

Status SqlCommandSink::Write(duck::Connection& conn, std::string_view table,
                             const SourceOffsets& offsets, std::vector<RejectedRow>* rejected) {
  const std::string batch = duck::QuoteIdentifier(kSqlCommandBatchTable);
  RETURN_IF_ERROR(conn.Execute(fmt::format("CREATE OR REPLACE TEMP TABLE {} AS SELECT * FROM {}",
                                           batch, TableRef(table)))
                      .WithContext("sqlcommand sink: copying the batch"));
  Status st = conn.Execute(SubstitutedSql());
  // The copy is dropped either way: it holds the batch's memory until the next Write.
  Status drop = conn.Execute(fmt::format("DROP TABLE IF EXISTS temp.{}", batch));
  RETURN_IF_ERROR(st.WithContext("sqlcommand sink: running sql"));
  return drop.WithContext("sqlcommand sink: dropping the batch copy");
}

}  // namespace sluice::sinks
