// pg_catalog: a Postgres-compatible SQL lexer, just enough to rewrite client SQL without
// touching what is inside string literals, quoted identifiers, comments and dollar quotes.
//
//   ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(sql));
//
// Every byte of the input belongs to exactly one token, so concatenating the tokens' text
// gives the input back.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::query::pg_catalog {

enum class TokenKind {
  kSpace,       // whitespace
  kComment,     // -- to end of line, or /* ... */ (nested, as in Postgres)
  kIdentifier,  // unquoted name or keyword
  kQuoted,      // "quoted identifier" (also U&"...")
  kString,      // '...', E'...', B'...', X'...', N'...', U&'...'
  kDollar,      // $tag$ ... $tag$
  kNumber,
  kParam,     // $1
  kOperator,  // a run of + - * / < > = ~ ! @ # % ^ & | ` ?
  kCast,      // ::
  kPunct,     // ( ) [ ] , ; . : and anything else, one byte each
};

struct Token {
  TokenKind kind;
  std::string_view text;  // a view into the lexed input
  size_t offset;          // byte offset in the input
};

// The name a kQuoted token's text stands for: "a""b" is a"b (U&"..." keeps its escapes).
std::string UnquoteIdentifier(std::string_view quoted);

// Splits `sql` into tokens. InvalidArgument, naming the byte offset, for an unterminated
// string literal, quoted identifier, block comment or dollar quote.
Result<std::vector<Token>> Lex(std::string_view sql);

}  // namespace sluice::query::pg_catalog
