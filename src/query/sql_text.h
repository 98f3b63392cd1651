// What the query server reads from client SQL itself, before DuckDB sees it: statement
// boundaries, the leading keywords of a statement (for CommandComplete tags and the
// sandbox's refusals) and the name a SET, RESET or PRAGMA statement changes. A lexer
// of quotes and comments only; DuckDB parses the SQL.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::query {

// `sql` split at the semicolons outside quotes ('', "", $tag$...$tag$, E'\'') and
// comments (--, /* */); each piece without its semicolon and surrounding whitespace.
// Pieces holding only whitespace or comments are kept (DuckDB finds no statement in
// them).
std::vector<std::string_view> SplitStatements(std::string_view sql);

// The first `n` words of a statement (identifiers and keywords, upper-cased; a quoted
// identifier as written), skipping whitespace, comments and opening parentheses.
std::vector<std::string> LeadingWords(std::string_view statement, size_t n);

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
std::optional<std::string> SubstituteParameters(std::string_view statement, const std::vector<std::string>& values);

// The CommandComplete tag of a statement that returned `rows` rows (or changed them).
// `returned_rows` says whether it returned a result set.
std::string CommandTag(std::string_view statement, bool returned_rows, uint64_t rows);

}  // namespace sluice::query
