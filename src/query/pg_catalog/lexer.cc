// Postgres's lexical rules (scan.l), reduced to what a rewrite needs to see: where literals,
// quoted names, comments and dollar quotes begin and end. Linear in the input.
#include "query/pg_catalog/lexer.h"

namespace sluice::query::pg_catalog {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}
bool IsIdentChar(char c) { return IsIdentStart(c) || (c >= '0' && c <= '9') || c == '$'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsOperatorChar(char c) {
  switch (c) {
    case '+':
    case '-':
    case '*':
    case '/':
    case '<':
    case '>':
    case '=':
    case '~':
    case '!':
    case '@':
    case '#':
    case '%':
    case '^':
    case '&':
    case '|':
    case '`':
    case '?':
      return true;
    default:
      return false;
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view sql) : s_(sql) {}

  Result<std::vector<Token>> Run() {
    std::vector<Token> out;
    out.reserve(s_.size() / 4 + 1);  // typical SQL: a token (with its space) per 4 bytes or more
    while (pos_ < s_.size()) {
      size_t start = pos_;
      token_start_ = start;
      ASSIGN_OR_RETURN(TokenKind kind, Next());
      out.push_back(Token{kind, s_.substr(start, pos_ - start), start});
    }
    return out;
  }

 private:
  char At(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }

  Result<TokenKind> Next() {
    const size_t start = pos_;
    const char c = s_[pos_];
    if (IsSpace(c)) {
      while (pos_ < s_.size() && IsSpace(s_[pos_])) ++pos_;
      return TokenKind::kSpace;
    }
    if (c == '-' && At(pos_ + 1) == '-') {
      // To the end of the line: \n or \r, as Postgres's and DuckDB's scanners read it.
      while (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') ++pos_;
      return TokenKind::kComment;
    }
    if (c == '/' && At(pos_ + 1) == '*') return BlockComment();
    if (c == '\'') return QuotedString(/*backslash_escapes=*/false);
    if ((c == 'e' || c == 'E') && At(pos_ + 1) == '\'') {
      ++pos_;
      return QuotedString(/*backslash_escapes=*/true);
    }
    if ((c == 'b' || c == 'B' || c == 'x' || c == 'X' || c == 'n' || c == 'N') &&
        At(pos_ + 1) == '\'') {
      ++pos_;
      return QuotedString(false);
    }
    if ((c == 'u' || c == 'U') && At(pos_ + 1) == '&' &&
        (At(pos_ + 2) == '\'' || At(pos_ + 2) == '"')) {
      pos_ += 2;
      if (s_[pos_] == '\'') return QuotedString(false);
      return QuotedIdentifier();
    }
    if (c == '"') return QuotedIdentifier();
    if (c == '$') {
      if (IsDigit(At(pos_ + 1))) {
        ++pos_;
        while (pos_ < s_.size() && IsDigit(s_[pos_])) ++pos_;
        return TokenKind::kParam;
      }
      return DollarQuote();
    }
    if (IsIdentStart(c)) {
      while (pos_ < s_.size() && IsIdentChar(s_[pos_])) ++pos_;
      return TokenKind::kIdentifier;
    }
    if (IsDigit(c) || (c == '.' && IsDigit(At(pos_ + 1)))) {
      while (pos_ < s_.size() && (IsIdentChar(s_[pos_]) || s_[pos_] == '.')) {
        // "1..2" or "t.1" are not numbers we need to understand; stop before a second dot.
        if (s_[pos_] == '.' && At(pos_ + 1) == '.') break;
        ++pos_;
      }
      return TokenKind::kNumber;
    }
    if (c == ':' && At(pos_ + 1) == ':') {
      pos_ += 2;
      return TokenKind::kCast;
    }
    if (IsOperatorChar(c)) {
      while (pos_ < s_.size() && IsOperatorChar(s_[pos_])) {
        // A comment starts inside an operator run: the operator ends there (scan.l).
        if (pos_ > start &&
            ((s_[pos_] == '-' && At(pos_ + 1) == '-') || (s_[pos_] == '/' && At(pos_ + 1) == '*')))
          break;
        ++pos_;
      }
      return TokenKind::kOperator;
    }
    ++pos_;
    return TokenKind::kPunct;
  }

  Result<TokenKind> BlockComment() {
    const size_t start = pos_;
    pos_ += 2;
    size_t depth = 1;
    while (pos_ < s_.size()) {
      if (s_[pos_] == '/' && At(pos_ + 1) == '*') {
        ++depth;
        pos_ += 2;
      } else if (s_[pos_] == '*' && At(pos_ + 1) == '/') {
        pos_ += 2;
        if (--depth == 0) return TokenKind::kComment;
      } else {
        ++pos_;
      }
    }
    return InvalidArgumentError("unterminated /* comment at byte {}", start);
  }

  // At the opening quote.
  Result<TokenKind> QuotedString(bool backslash_escapes) {
    ++pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (backslash_escapes && c == '\\') {
        pos_ += 2;
        continue;
      }
      if (c == '\'') {
        if (At(pos_ + 1) == '\'') {
          pos_ += 2;
          continue;
        }
        ++pos_;
        return TokenKind::kString;
      }
      ++pos_;
    }
    pos_ = s_.size();
    return InvalidArgumentError("unterminated quoted string at byte {}", token_start_);
  }

  Result<TokenKind> QuotedIdentifier() {
    ++pos_;
    while (pos_ < s_.size()) {
      if (s_[pos_] == '"') {
        if (At(pos_ + 1) == '"') {
          pos_ += 2;
          continue;
        }
        ++pos_;
        return TokenKind::kQuoted;
      }
      ++pos_;
    }
    return InvalidArgumentError("unterminated quoted identifier at byte {}", token_start_);
  }

  // At '$', not followed by a digit: $tag$...$tag$ (tag empty or an identifier without '$'),
  // else a lone '$' punctuation byte.
  Result<TokenKind> DollarQuote() {
    const size_t start = pos_;
    size_t i = pos_ + 1;
    if (i < s_.size() && IsIdentStart(s_[i])) {
      while (i < s_.size() && IsIdentChar(s_[i]) && s_[i] != '$') ++i;
    }
    if (At(i) != '$') {
      ++pos_;
      return TokenKind::kPunct;
    }
    const std::string_view tag = s_.substr(start, i + 1 - start);  // "$tag$"
    const size_t end = s_.find(tag, i + 1);
    if (end == std::string_view::npos) {
      return InvalidArgumentError("unterminated dollar-quoted string at byte {}", start);
    }
    pos_ = end + tag.size();
    return TokenKind::kDollar;
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t token_start_ = 0;  // where the token being lexed begins (E'...: at the E)
};

}  // namespace

std::string UnquoteIdentifier(std::string_view q) {
  std::string out;
  const size_t start = q.size() >= 3 && (q[0] == 'U' || q[0] == 'u') && q[1] == '&' ? 3 : 1;
  for (size_t k = start; k + 1 < q.size(); ++k) {
    out += q[k];
    if (q[k] == '"' && q[k + 1] == '"') ++k;
  }
  return out;
}

Result<std::vector<Token>> Lex(std::string_view sql) { return Lexer(sql).Run(); }

}  // namespace sluice::query::pg_catalog
