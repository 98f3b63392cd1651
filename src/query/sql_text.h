// What the query server reads from client SQL itself, before DuckDB sees it: statement
// boundaries, the leading keywords of a statement (for CommandComplete tags and the
// sandbox's refusals), the name a SET, RESET or PRAGMA statement changes, and Postgres's
// COPY statement (the server runs COPY ... TO STDOUT itself). A lexer of quotes and
// comments only; DuckDB parses the SQL.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::query {

// `sql` split at the semicolons outside quotes ('', "", $tag$...$tag$, E'\'') and
// comments (--, /* */); each piece without its semicolon and surrounding whitespace.
// Pieces holding only whitespace or comments are kept (DuckDB finds no statement in
// them).
std::vector<std::string_view> SplitStatements(std::string_view sql);

// The first `n` words of a statement (identifiers and keywords, upper-cased; a quoted
// identifier as written), skipping whitespace, comments and opening parentheses.
std::vector<std::string> LeadingWords(std::string_view statement, size_t n);

// Where the query of `CREATE [OR REPLACE] [TEMP|TEMPORARY] TABLE [IF NOT EXISTS] name AS
// <query>` or `INSERT [OR ...] INTO name [(columns)] [BY NAME] <query>` starts (its
// offset in `statement`), or npos for any other statement: the server plans that query
// as it plans a SELECT (lake tables, topic() bounds).
size_t EmbeddedQueryStart(std::string_view statement);

// Where a DuckDB error points in `sql`, the text it ran: the byte offset its "LINE n:
// <text>" and caret lines mark, or npos when the message has none (or does not match the
// text).
size_t ErrorOffset(std::string_view message, std::string_view sql);

// A statement cheap enough not to queue behind query.max_running: transaction control,
// SET/SHOW, and SELECTs that read no relation, or only the catalog's (pg_*,
// pg_catalog.*, information_schema.*: psql's \d, drivers' metadata calls, a pool's
// `SELECT 1`). Anything it cannot read for sure is not light.
bool LightStatement(std::string_view statement);

// A statement the sandbox refuses before it runs, or kAllowed.
struct SandboxVerdict {
  bool refused = false;
  std::string message;  // for SQLSTATE 42501
};
SandboxVerdict CheckSandbox(std::string_view statement);

// For SET/RESET of a client-side parameter the server answers itself (application_name,
// DateStyle, extra_float_digits...): the lower-cased name and value; empty name
// otherwise. `value` is "" for RESET.
struct ClientSetting {
  std::string name;
  std::string value;
};
ClientSetting ParseClientSetting(std::string_view statement);

// `statement` with each parameter $n outside quotes and comments replaced by
// `(values[n-1])`; nullopt when it holds one it cannot replace: $n beyond `values`, $0,
// or DuckDB's `?` and `$name` forms. For planning a prepared statement with its bound
// values (the session's rewrites at execution).
std::optional<std::string> SubstituteParameters(std::string_view statement,
                                                const std::vector<std::string>& values);

// The CommandComplete tag of a statement that returned `rows` rows (or changed them).
// `returned_rows` says whether it returned a result set.
std::string CommandTag(std::string_view statement, bool returned_rows, uint64_t rows);

// The options of COPY ... TO STDOUT, checked as Postgres 15 checks them (defaults filled
// in for the format).
enum class CopyFormat { kText, kCsv, kBinary };
struct CopyOptions {
  CopyFormat format = CopyFormat::kText;
  bool header = false;
  char delimiter = '\t';                 // text '\t', csv ','
  std::string null_string = "\\N";       // text "\N", csv ""
  char quote = '"';                      // csv only
  char escape = '"';                     // csv only; the quote unless given
  bool force_quote_all = false;          // csv: FORCE_QUOTE *
  std::vector<std::string> force_quote;  // csv: FORCE_QUOTE (columns), names as Postgres folds them
};

// A COPY statement in Postgres's grammar: `COPY (query) TO ...` or `COPY [BINARY] table
// [(columns)] {TO|FROM} {STDOUT|STDIN|'file'|PROGRAM 'command'} [[WITH] (options) | old
// options]`.
struct CopyStatement {
  enum class Direction { kTo, kFrom };
  enum class Target { kClient, kFile, kProgram };  // STDOUT/STDIN, 'file', PROGRAM 'cmd'
  Direction direction = Direction::kTo;
  Target target = Target::kClient;
  // What COPY TO reads: the query in parentheses as written, or `SELECT <columns or *>
  // FROM <table>` with the names as written.
  std::string query;
  CopyOptions options;  // parsed and checked only for TO STDOUT
};
// nullopt when `statement` is not a COPY this grammar reads (DuckDB's `COPY FROM
// DATABASE`, or a head that does not parse: DuckDB runs it and reports it). For TO
// STDOUT a malformed or invalid option list is an error whose message starts with its
// SQLSTATE ("42601: option \"x\" not recognized"), as Postgres answers it.
Result<std::optional<CopyStatement>> ParseCopyStatement(std::string_view statement);

}  // namespace sluice::query
