#include "query/sql_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "base/strings.h"
#include "base/utf8.h"

namespace sluice::query {

namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80);
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '$';
}

// The end of the quoted, commented or dollar-quoted run starting at `i`, or `i` when
// none starts there.
size_t SkipQuoted(std::string_view s, size_t i) {
  char c = s[i];
  if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') {
    // A line comment ends at \n or \r, as in Postgres's and DuckDB's scanners.
    size_t end = s.find_first_of("\n\r", i);
    return end == std::string_view::npos ? s.size() : end + 1;
  }
  if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
    size_t end = s.find("*/", i + 2);
    return end == std::string_view::npos ? s.size() : end + 2;
  }
  if (c == '\'' || c == '"') {
    bool backslash = c == '\'' && i > 0 && (s[i - 1] == 'E' || s[i - 1] == 'e') &&
                     (i < 2 || !IsIdentChar(s[i - 2]));
    size_t j = i + 1;
    while (j < s.size()) {
      if (backslash && s[j] == '\\') {
        j += 2;
        continue;
      }
      if (s[j] == c) {
        if (j + 1 < s.size() && s[j + 1] == c) {
          j += 2;
          continue;
        }
        return j + 1;
      }
      ++j;
    }
    return s.size();
  }
  if (c == '$' && (i == 0 || !IsIdentChar(s[i - 1]))) {
    size_t j = i + 1;
    while (j < s.size() && (IsIdentChar(s[j]) && s[j] != '$')) ++j;
    if (j < s.size() && s[j] == '$' &&
        (j == i + 1 || !std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      std::string_view tag = s.substr(i, j - i + 1);
      size_t end = s.find(tag, j + 1);
      return end == std::string_view::npos ? s.size() : end + tag.size();
    }
  }
  return i;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The words and the rest: a small tokenizer over the statement's start.
struct Token {
  std::string text;  // upper-cased word, or the punctuation/quoted text as written
  bool word;
  size_t end;
  size_t begin = 0;
};

std::vector<Token> Tokens(std::string_view s, size_t max) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size() && out.size() < max) {
    char c = s[i];
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    size_t q = SkipQuoted(s, i);
    if (q != i) {
      if (c == '\'' || c == '"' || c == '$')
        out.push_back({std::string(s.substr(i, q - i)), false, q, i});
      i = q;
      continue;
    }
    if (IsIdentStart(c)) {
      size_t j = i;
      while (j < s.size() && IsIdentChar(s[j])) ++j;
      std::string w(s.substr(i, j - i));
      for (char& x : w) x = static_cast<char>(std::toupper(static_cast<unsigned char>(x)));
      out.push_back({w, true, j, i});
      i = j;
      continue;
    }
    out.push_back({std::string(1, c), false, i + 1, i});
    ++i;
  }
  return out;
}

std::string Unquote(std::string_view v) {
  v = Trim(v);
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) {
    std::string out;
    char q = v.front();
    for (size_t i = 1; i + 1 < v.size(); ++i) {
      out += v[i];
      if (v[i] == q && i + 2 < v.size() && v[i + 1] == q) ++i;
    }
    return out;
  }
  return std::string(v);
}

// The setting a SET, RESET or PRAGMA statement changes (lower-cased) and where its value
// starts; empty name when it is not one of those.
struct SettingTarget {
  std::string verb;  // SET, RESET, PRAGMA
  std::string name;
  std::string value;
};

SettingTarget ParseSettingTarget(std::string_view statement) {
  std::vector<Token> t = Tokens(statement, 6);
  SettingTarget out;
  if (t.empty() || !t[0].word) return out;
  size_t i = 1;
  if (t[0].text == "SET" || t[0].text == "RESET") {
    out.verb = t[0].text;
    if (i < t.size() && t[i].word &&
        (t[i].text == "SESSION" || t[i].text == "LOCAL" || t[i].text == "GLOBAL"))
      ++i;
    if (i < t.size() && t[i].word && t[i].text == "TIME" && i + 1 < t.size() &&
        t[i + 1].text == "ZONE") {
      out.name = "timezone";
      out.value = out.verb == "SET" ? Unquote(statement.substr(t[i + 1].end)) : "";
      return out;
    }
  } else if (t[0].text == "PRAGMA") {
    out.verb = "PRAGMA";
  } else {
    return out;
  }
  if (i >= t.size()) return out;
  if (t[i].word) {
    out.name = AsciiLower(t[i].text);
  } else if (t[i].text.size() >= 2 && t[i].text.front() == '"') {
    out.name = AsciiLower(Unquote(t[i].text));
  } else {
    return out;
  }
  if (out.verb == "SET" && i + 1 < t.size()) {
    size_t start = t[i].end;
    std::string_view rest = Trim(statement.substr(start));
    if (rest.starts_with("=")) {
      rest.remove_prefix(1);
    } else if (rest.size() >= 2 && (rest[0] == 'T' || rest[0] == 't') &&
               (rest[1] == 'O' || rest[1] == 'o') &&
               (rest.size() == 2 || IsSpace(rest[2]) || rest[2] == '\'')) {
      rest.remove_prefix(2);
    }
    out.value = Unquote(rest);
  }
  return out;
}

// DuckDB settings that fix the server's budget or its sandbox: refused before DuckDB
// sees them (DuckDB's lock_configuration refuses them too, as Invalid Input).
constexpr std::string_view kProtectedSettings[] = {
    "memory_limit",
    "max_memory",
    "threads",
    "worker_threads",
    "external_threads",
    "enable_external_access",
    "allowed_directories",
    "allowed_paths",
    "lock_configuration",
    "autoinstall_known_extensions",
    "autoload_known_extensions",
    "allow_unsigned_extensions",
    "allow_community_extensions",
    "allow_extensions_metadata_mismatch",
    "extension_directory",
    "custom_extension_repository",
    "autoinstall_extension_repository",
    "temp_directory",
    "max_temp_directory_size",
    "allow_persistent_secrets",
    "enable_external_file_cache",
    "secret_directory",
    "default_block_size",
};

// Settings of the client session that the server answers itself.
constexpr std::string_view kClientSettings[] = {
    "application_name",
    "client_encoding",
    "datestyle",
    "intervalstyle",
    "extra_float_digits",
    "client_min_messages",
    "standard_conforming_strings",
    "timezone",
    "lc_messages",
    "bytea_output",
    "jit",
    "statement_timeout",
    "lock_timeout",
    "idle_in_transaction_session_timeout",
    "row_security",
    "synchronous_commit",
    "geqo",
};

}  // namespace

std::vector<std::string_view> SplitStatements(std::string_view sql) {
  std::vector<std::string_view> out;
  size_t start = 0, i = 0;
  while (i < sql.size()) {
    size_t q = SkipQuoted(sql, i);
    if (q != i) {
      i = q;
      continue;
    }
    if (sql[i] == ';') {
      std::string_view piece = Trim(sql.substr(start, i - start));
      if (!piece.empty()) out.push_back(piece);
      start = i + 1;
    }
    ++i;
  }
  std::string_view piece = Trim(sql.substr(start));
  if (!piece.empty()) out.push_back(piece);
  return out;
}

std::vector<std::string> LeadingWords(std::string_view statement, size_t n) {
  std::vector<std::string> out;
  for (const Token& t : Tokens(statement, n + 8)) {
    if (out.size() == n) break;
    if (t.text == "(") continue;
    if (!t.word) break;
    out.push_back(t.text);
  }
  return out;
}

size_t EmbeddedQueryStart(std::string_view statement) {
  std::vector<Token> t = Tokens(statement, 256);
  if (t.empty() || !t[0].word) return std::string_view::npos;
  const bool create = t[0].text == "CREATE", insert = t[0].text == "INSERT";
  if (!create && !insert) return std::string_view::npos;
  int depth = 0;
  bool table = false, into = false;
  for (size_t i = 1; i < t.size(); ++i) {
    const Token& k = t[i];
    if (create && depth == 0 && k.word && !table) {
      if (k.text == "TABLE") {
        table = true;
      } else if (k.text != "OR" && k.text != "REPLACE" && k.text != "TEMP" &&
                 k.text != "TEMPORARY") {
        return std::string_view::npos;  // a view, a macro, a sequence...
      }
      continue;
    }
    if (insert && depth == 0 && k.word && k.text == "INTO") into = true;
    if (!k.word && k.text == "(") {
      // INSERT INTO t (SELECT ...): the parenthesized query itself.
      if (insert && into && depth == 0 && i + 1 < t.size() && t[i + 1].word &&
          (t[i + 1].text == "SELECT" || t[i + 1].text == "WITH")) {
        return k.begin;
      }
      ++depth;
      continue;
    }
    if (!k.word && k.text == ")") {
      --depth;
      continue;
    }
    if (depth != 0 || !k.word) continue;
    if (create && table && k.text == "AS")
      return i + 1 < t.size() ? t[i + 1].begin : std::string_view::npos;
    if (insert && into &&
        (k.text == "SELECT" || k.text == "WITH" || k.text == "FROM" || k.text == "VALUES")) {
      return k.begin;
    }
  }
  return std::string_view::npos;
}

size_t ErrorOffset(std::string_view message, std::string_view sql) {
  constexpr size_t npos = std::string_view::npos;
  // "...\n\nLINE <n>: [...]<text>[...]\n<spaces>^" (DuckDB's QueryErrorContext).
  size_t at = message.find("\nLINE ");
  if (at == npos) return npos;
  size_t p = at + 6;
  size_t line = 0;
  while (p < message.size() && std::isdigit(static_cast<unsigned char>(message[p])))
    line = line * 10 + (message[p++] - '0');
  if (line == 0 || message.substr(p, 2) != ": ") return npos;
  const size_t indicator = p + 2 - (at + 1);  // "LINE n: "
  p += 2;
  size_t eol = message.find('\n', p);
  if (eol == npos) return npos;
  std::string_view shown = message.substr(p, eol - p);
  size_t caret_line_end = message.find('\n', eol + 1);
  std::string_view caret =
      message.substr(eol + 1, caret_line_end == npos ? npos : caret_line_end - eol - 1);
  size_t width = caret.find('^');
  if (width == npos || caret.find_first_not_of(' ') != width || width < indicator) return npos;
  width -= indicator;
  bool cut_front = shown.starts_with("...");
  if (cut_front) {
    shown.remove_prefix(3);
    width = width >= 3 ? width - 3 : 0;
  }
  if (shown.ends_with("...")) shown.remove_suffix(3);
  // The line's start in `sql`, then the shown text from there.
  size_t start = 0;
  for (size_t l = 1; l < line; ++l) {
    start = sql.find('\n', start);
    if (start == npos) return npos;
    ++start;
  }
  size_t from = shown.empty() ? start : sql.find(shown, start);
  if (from == npos) return npos;
  // The caret's column counts characters (UTF-8 code points; wide ones are rare in SQL).
  size_t i = from;
  for (size_t w = 0; w < width && i < sql.size(); ++w) {
    ++i;
    while (i < sql.size() && (static_cast<unsigned char>(sql[i]) & 0xC0) == 0x80) ++i;
  }
  return i <= sql.size() ? i : npos;
}

bool LightStatement(std::string_view statement) {
  constexpr size_t kMaxTokens = 4096;
  std::vector<Token> t = Tokens(statement, kMaxTokens);
  if (t.empty()) return true;
  if (t.size() >= kMaxTokens || !t[0].word) return false;
  static const std::set<std::string, std::less<>> kControl = {
      "SET", "RESET", "SHOW", "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "DEALLOCATE"};
  if (kControl.count(t[0].text)) return true;
  if (t[0].text != "SELECT" && t[0].text != "WITH" && t[0].text != "VALUES") return false;
  static const std::set<std::string, std::less<>> kListEnd = {
      "WHERE",  "GROUP",   "ORDER", "HAVING", "LIMIT",    "OFFSET",
      "WINDOW", "QUALIFY", "UNION", "EXCEPT", "INTERSECT"};
  auto catalog_relation = [](std::string name) {
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"')
      name = name.substr(1, name.size() - 2);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name.starts_with("pg_") || name == "information_schema" ||
           name.starts_with("sluice_pg_") || name.starts_with("sluice_information_schema");
  };
  int depth = 0;
  std::vector<int> from_lists;  // depths at which a FROM list is open
  bool expect_relation = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const Token& k = t[i];
    if (!k.word && k.text == "(") {
      expect_relation = false;  // a subquery: its own FROM is read in turn
      ++depth;
      continue;
    }
    if (!k.word && k.text == ")") {
      while (!from_lists.empty() && from_lists.back() >= depth) from_lists.pop_back();
      --depth;
      continue;
    }
    if (expect_relation) {
      if (!k.word && k.text.front() != '"') return false;
      if (!catalog_relation(k.text)) return false;  // a table, a CTE, LATERAL, a function...
      while (i + 2 < t.size() && !t[i + 1].word && t[i + 1].text == ".")
        i += 2;  // pg_catalog.pg_class
      if (i + 1 < t.size() && !t[i + 1].word && t[i + 1].text == "(")
        return false;  // a table function
      expect_relation = false;
      continue;
    }
    if (k.word && (k.text == "FROM" || k.text == "JOIN")) {
      expect_relation = true;
      if (k.text == "FROM") from_lists.push_back(depth);
    } else if (!k.word && k.text == "," && !from_lists.empty() && from_lists.back() == depth) {
      expect_relation = true;
    } else if (k.word && kListEnd.count(k.text) && !from_lists.empty() &&
               from_lists.back() == depth) {
      from_lists.pop_back();
    }
  }
  return !expect_relation;
}

SandboxVerdict CheckSandbox(std::string_view statement) {
  std::vector<std::string> w = LeadingWords(statement, 2);
  if (w.empty()) return {};
  const std::string& first = w[0];
  if (first == "ATTACH" || first == "DETACH") {
    return {true, fmt::format("permission denied: {} is not allowed on the query server", first)};
  }
  if (first == "INSTALL" || first == "LOAD" ||
      (first == "FORCE" && w.size() > 1 && w[1] == "INSTALL") ||
      (first == "UPDATE" && w.size() > 1 && w[1] == "EXTENSIONS")) {
    return {true,
            "permission denied: extensions cannot be installed or loaded on the query server"};
  }
  if (first == "SET" || first == "RESET" || first == "PRAGMA") {
    SettingTarget t = ParseSettingTarget(statement);
    for (std::string_view p : kProtectedSettings) {
      if (t.name == p)
        return {true, fmt::format("permission denied to set parameter \"{}\"", t.name)};
    }
  }
  return {};
}

ClientSetting ParseClientSetting(std::string_view statement) {
  SettingTarget t = ParseSettingTarget(statement);
  if (t.verb != "SET" && t.verb != "RESET") return {};
  for (std::string_view c : kClientSettings) {
    if (t.name == c) return {t.name, t.value};
  }
  return {};
}

std::string CommandTag(std::string_view statement, bool returned_rows, uint64_t rows) {
  std::vector<std::string> w = LeadingWords(statement, 6);
  std::string first = w.empty() ? "" : w[0];
  if (first == "INSERT") return fmt::format("INSERT 0 {}", rows);
  if (first == "UPDATE" || first == "DELETE" || first == "MERGE" || first == "COPY") {
    return fmt::format("{} {}", first, rows);
  }
  if (first == "EXPLAIN") return "EXPLAIN";
  if (returned_rows) return fmt::format("SELECT {}", rows);
  if (first == "CREATE" || first == "DROP" || first == "ALTER") {
    for (size_t i = 1; i < w.size(); ++i) {
      static constexpr std::string_view kSkip[] = {"OR",        "REPLACE",    "TEMP",
                                                   "TEMPORARY", "PERSISTENT", "UNIQUE"};
      if (std::find(std::begin(kSkip), std::end(kSkip), w[i]) == std::end(kSkip))
        return first + " " + w[i];
    }
    return first;
  }
  if (first == "BEGIN") return "BEGIN";
  if (first == "START") return "START TRANSACTION";
  if (first == "COMMIT" || first == "END") return "COMMIT";
  if (first == "ROLLBACK" || first == "ABORT") return "ROLLBACK";
  return first.empty() ? "SELECT 0" : first;
}

std::optional<std::string> SubstituteParameters(std::string_view s,
                                                const std::vector<std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    size_t q = SkipQuoted(s, i);
    if (q != i) {
      out += s.substr(i, q - i);
      i = q;
      continue;
    }
    if (IsIdentStart(c)) {  // a$1 is an identifier, not a parameter
      size_t j = i;
      while (j < s.size() && IsIdentChar(s[j])) ++j;
      out += s.substr(i, j - i);
      i = j;
      continue;
    }
    if (c == '?') return std::nullopt;
    if (c == '$') {
      size_t j = i + 1;
      size_t n = 0;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])) && n <= values.size()) {
        n = n * 10 + static_cast<size_t>(s[j] - '0');
        ++j;
      }
      if (j == i + 1 || n == 0 || n > values.size()) return std::nullopt;
      if (j < s.size() && IsIdentChar(s[j])) return std::nullopt;  // $1abc
      out += '(';
      out += values[n - 1];
      out += ')';
      i = j;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

// ---- COPY ------------------------------------------------------------------------

namespace {

// A COPY option's argument, as Postgres's grammar reads it (copy_generic_opt_arg).
struct CopyArg {
  enum class Kind { kNone, kWord, kString, kNumber, kStar, kList };
  Kind kind = Kind::kNone;
  std::string text;               // kWord (as written), kString (decoded), kNumber
  std::vector<std::string> list;  // kList: names as Postgres folds them
};

Status CopyError(std::string_view sqlstate, std::string_view message) {
  return InvalidArgumentError("{}: {}", sqlstate, message);
}

// The body of an E'...' string with its backslash escapes (Postgres's: \b \f \n \r \t,
// octal, \xHH, \uXXXX, \UXXXXXXXX; any other character stands for itself).
Result<std::string> DecodeEscapeString(std::string_view body) {
  std::string out;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '\'' && i + 1 < body.size() && body[i + 1] == '\'') {
      out += '\'';
      ++i;
      continue;
    }
    if (c != '\\' || i + 1 >= body.size()) {
      out += c;
      continue;
    }
    char e = body[++i];
    switch (e) {
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'x': {
        int v = 0, n = 0;
        while (n < 2 && i + 1 < body.size() && hex(body[i + 1]) >= 0)
          v = v * 16 + hex(body[++i]), ++n;
        if (n == 0) {
          out += 'x';
        } else {
          out += static_cast<char>(v);
        }
        break;
      }
      case 'u':
      case 'U': {
        int want = e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        for (int n = 0; n < want; ++n) {
          if (i + 1 >= body.size() || hex(body[i + 1]) < 0)
            return CopyError("22025", "invalid Unicode escape");
          cp = cp * 16 + static_cast<uint32_t>(hex(body[++i]));
        }
        if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
          return CopyError("22025", "invalid Unicode escape value");
        }
        AppendUtf8(out, cp);
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          int v = e - '0', n = 1;
          while (n < 3 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7') {
            v = v * 8 + (body[++i] - '0');
            ++n;
          }
          out += static_cast<char>(v & 0xFF);
        } else {
          out += e;
        }
    }
  }
  if (!IsValidUtf8(out)) return CopyError("22021", "invalid byte sequence for encoding \"UTF8\"");
  return out;
}

class CopyParser {
 public:
  explicit CopyParser(std::string_view s)
      : s_(s), t_(Tokens(s, std::numeric_limits<size_t>::max())) {}

  Result<std::optional<CopyStatement>> Parse();

 private:
  bool Word(size_t k, std::string_view w) const {
    return k < t_.size() && t_[k].word && t_[k].text == w;
  }
  bool Punct(size_t k, char c) const {
    return k < t_.size() && !t_[k].word && t_[k].text.size() == 1 && t_[k].text[0] == c;
  }
  bool QuotedIdent(size_t k) const {
    return k < t_.size() && !t_[k].word && t_[k].text.starts_with('"');
  }
  bool Name(size_t k) const { return k < t_.size() && (t_[k].word || QuotedIdent(k)); }
  // A string constant at i_ ('...', E'...', $$...$$): decoded, i_ moved past it.
  bool StringAt(size_t k) const {
    if (k >= t_.size()) return false;
    if (!t_[k].word && (t_[k].text.starts_with('\'') || t_[k].text.starts_with('$')) &&
        t_[k].text.size() > 1)
      return true;
    return t_[k].word && t_[k].text == "E" && k + 1 < t_.size() && t_[k + 1].begin == t_[k].end &&
           t_[k + 1].text.starts_with('\'');
  }
  Result<std::string> String();
  // The name at k as Postgres folds it: lower-cased, or the quoted identifier's text.
  std::string FoldedName(size_t k) const {
    if (QuotedIdent(k)) return Unquote(t_[k].text);
    return AsciiLower(s_.substr(t_[k].begin, t_[k].end - t_[k].begin));
  }
  std::string Near(size_t k) const {
    if (k >= t_.size()) return "syntax error at end of input";
    return fmt::format("syntax error at or near \"{}\"",
                       s_.substr(t_[k].begin, t_[k].end - t_[k].begin));
  }
  Status ParseOptions(CopyOptions& o);
  Result<CopyArg> ParseArg();
  // A comma-separated list of column names (FORCE QUOTE a, b), i_ moved past it.
  Result<std::vector<std::string>> NameList();
  Status Set(const std::string& name, CopyArg arg);
  Status Check(CopyOptions& o);

  std::string_view s_;
  std::vector<Token> t_;
  size_t i_ = 0;
  std::vector<std::pair<std::string, CopyArg>> options_;  // lower-cased name, argument
};

// Whether a '...' token (as SkipQuoted cut it) ends with its closing quote: SkipQuoted
// runs to the end of the text when the quote is never closed.
bool QuoteClosed(std::string_view q, bool backslash) {
  for (size_t j = 1; j < q.size(); ++j) {
    if (backslash && q[j] == '\\') {
      ++j;
      continue;
    }
    if (q[j] != '\'') continue;
    if (j + 1 < q.size() && q[j + 1] == '\'') {
      ++j;
      continue;
    }
    return j + 1 == q.size();
  }
  return false;
}

Result<std::string> CopyParser::String() {
  const Token& t = t_[i_];
  if (t.word) {  // E'...'
    const std::string& q = t_[i_ + 1].text;
    i_ += 2;
    if (!QuoteClosed(q, true)) return CopyError("42601", "unterminated quoted string");
    return DecodeEscapeString(std::string_view(q).substr(1, q.size() - 2));
  }
  ++i_;
  if (t.text.starts_with('$')) {
    size_t tag_end = t.text.find('$', 1);
    size_t tag = tag_end + 1;
    if (tag_end == std::string::npos || t.text.size() < 2 * tag ||
        t.text.compare(t.text.size() - tag, tag, t.text, 0, tag) != 0) {
      return CopyError("42601", "unterminated dollar-quoted string");
    }
    return t.text.substr(tag, t.text.size() - 2 * tag);
  }
  if (!QuoteClosed(t.text, false)) return CopyError("42601", "unterminated quoted string");
  return Unquote(t.text);
}

Result<std::vector<std::string>> CopyParser::NameList() {
  std::vector<std::string> names;
  while (true) {
    if (!Name(i_)) return CopyError("42601", Near(i_));
    names.push_back(FoldedName(i_++));
    if (!Punct(i_, ',')) return names;
    ++i_;
  }
}

Result<CopyArg> CopyParser::ParseArg() {
  CopyArg a;
  if (i_ >= t_.size() || Punct(i_, ',') || Punct(i_, ')')) return a;
  if (StringAt(i_)) {
    a.kind = CopyArg::Kind::kString;
    ASSIGN_OR_RETURN(a.text, String());
  } else if (t_[i_].word) {
    a.kind = CopyArg::Kind::kWord;
    a.text = AsciiLower(t_[i_++].text);
  } else if (Punct(i_, '*')) {
    a.kind = CopyArg::Kind::kStar;
    ++i_;
  } else if (t_[i_].text.size() == 1 && std::isdigit(static_cast<unsigned char>(t_[i_].text[0]))) {
    a.kind = CopyArg::Kind::kNumber;
    while (i_ < t_.size() && t_[i_].text.size() == 1 &&
           std::isdigit(static_cast<unsigned char>(t_[i_].text[0])) &&
           (a.text.empty() || t_[i_].begin == t_[i_ - 1].end)) {
      a.text += t_[i_++].text;
    }
  } else if (Punct(i_, '(')) {
    ++i_;
    a.kind = CopyArg::Kind::kList;
    ASSIGN_OR_RETURN(a.list, NameList());
    if (!Punct(i_, ')')) return CopyError("42601", Near(i_));
    ++i_;
  } else {
    return CopyError("42601", Near(i_));
  }
  return a;
}

Status CopyParser::Set(const std::string& name, CopyArg arg) {
  for (const auto& [n, a] : options_) {
    if (n == name) return CopyError("42601", "conflicting or redundant options");
  }
  options_.emplace_back(name, std::move(arg));
  return Status::OK();
}

Status CopyParser::ParseOptions(CopyOptions& o) {
  // Postgres 7.3's `USING DELIMITERS 'x'` after the target.
  if (Word(i_, "USING") && Word(i_ + 1, "DELIMITERS")) ++i_;
  if (Word(i_, "DELIMITERS")) {
    ++i_;
    if (!StringAt(i_)) return CopyError("42601", Near(i_));
    CopyArg a{CopyArg::Kind::kString, "", {}};
    ASSIGN_OR_RETURN(a.text, String());
    RETURN_IF_ERROR(Set("delimiter", std::move(a)));
  }
  if (Word(i_, "WITH")) ++i_;
  if (Punct(i_, '(')) {
    // The generic list: (name [argument], ...).
    ++i_;
    while (true) {
      if (i_ >= t_.size() || !t_[i_].word) return CopyError("42601", Near(i_));
      std::string name = AsciiLower(t_[i_++].text);
      ASSIGN_OR_RETURN(CopyArg arg, ParseArg());
      RETURN_IF_ERROR(Set(name, std::move(arg)));
      if (Punct(i_, ',')) {
        ++i_;
        continue;
      }
      if (Punct(i_, ')')) {
        ++i_;
        break;
      }
      return CopyError("42601", Near(i_));
    }
  } else {
    // The old keyword list (Postgres before 9.0, still accepted; psql's `\copy ... csv header`).
    auto string_option = [&](const char* name) -> Status {
      ++i_;
      if (Word(i_, "AS")) ++i_;
      if (!StringAt(i_)) return CopyError("42601", Near(i_));
      CopyArg a{CopyArg::Kind::kString, "", {}};
      ASSIGN_OR_RETURN(a.text, String());
      return Set(name, std::move(a));
    };
    while (i_ < t_.size()) {
      if (Word(i_, "BINARY") || Word(i_, "CSV")) {
        RETURN_IF_ERROR(Set("format", {CopyArg::Kind::kWord, AsciiLower(t_[i_].text), {}}));
        ++i_;
      } else if (Word(i_, "HEADER") || Word(i_, "FREEZE")) {
        RETURN_IF_ERROR(Set(AsciiLower(t_[i_].text), {}));
        ++i_;
      } else if (Word(i_, "DELIMITER")) {
        RETURN_IF_ERROR(string_option("delimiter"));
      } else if (Word(i_, "NULL")) {
        RETURN_IF_ERROR(string_option("null"));
      } else if (Word(i_, "QUOTE")) {
        RETURN_IF_ERROR(string_option("quote"));
      } else if (Word(i_, "ESCAPE")) {
        RETURN_IF_ERROR(string_option("escape"));
      } else if (Word(i_, "ENCODING")) {
        RETURN_IF_ERROR(string_option("encoding"));
      } else if (Word(i_, "FORCE") && Word(i_ + 1, "QUOTE")) {
        i_ += 2;
        CopyArg a;
        if (Punct(i_, '*')) {
          a.kind = CopyArg::Kind::kStar;
          ++i_;
        } else {
          a.kind = CopyArg::Kind::kList;
          ASSIGN_OR_RETURN(a.list, NameList());
        }
        RETURN_IF_ERROR(Set("force_quote", std::move(a)));
      } else if (Word(i_, "FORCE") && Word(i_ + 1, "NOT") && Word(i_ + 2, "NULL")) {
        i_ += 3;
        ASSIGN_OR_RETURN(auto names, NameList());
        RETURN_IF_ERROR(Set("force_not_null", {CopyArg::Kind::kList, "", std::move(names)}));
      } else if (Word(i_, "FORCE") && Word(i_ + 1, "NULL")) {
        i_ += 2;
        ASSIGN_OR_RETURN(auto names, NameList());
        RETURN_IF_ERROR(Set("force_null", {CopyArg::Kind::kList, "", std::move(names)}));
      } else {
        return CopyError("42601", Near(i_));
      }
    }
  }
  if (i_ < t_.size()) return CopyError("42601", Near(i_));
  return Check(o);
}

// Postgres's ProcessCopyOptions for COPY TO, with its SQLSTATEs and messages.
Status CopyParser::Check(CopyOptions& o) {
  auto boolean = [](const std::string& name, const CopyArg& a) -> Result<bool> {
    std::string v = AsciiLower(a.text);
    switch (a.kind) {
      case CopyArg::Kind::kNone:
        return true;
      case CopyArg::Kind::kNumber:
        if (v == "0" || v == "1") return v == "1";
        break;
      case CopyArg::Kind::kWord:
      case CopyArg::Kind::kString:
        if (v == "true" || v == "on") return true;
        if (v == "false" || v == "off") return false;
        if (name == "header" && v == "match") {
          return CopyError("42601", "cannot use \"match\" with HEADER in COPY TO");
        }
        break;
      default:
        break;
    }
    return CopyError("42601", fmt::format("{} requires a Boolean value", name));
  };
  auto string = [](const std::string& name, const CopyArg& a) -> Result<std::string> {
    if (a.kind == CopyArg::Kind::kWord || a.kind == CopyArg::Kind::kString ||
        a.kind == CopyArg::Kind::kNumber) {
      return a.text;
    }
    return CopyError("42601", fmt::format("{} requires a parameter", name));
  };
  std::optional<std::string> delimiter, null_string, quote, escape;
  bool force_quote = false;
  for (const auto& [name, a] : options_) {
    if (name == "format") {
      ASSIGN_OR_RETURN(std::string f, string(name, a));
      std::string lf = AsciiLower(f);
      if (lf == "text") {
        o.format = CopyFormat::kText;
      } else if (lf == "csv") {
        o.format = CopyFormat::kCsv;
      } else if (lf == "binary") {
        o.format = CopyFormat::kBinary;
      } else {
        return CopyError("22023", fmt::format("COPY format \"{}\" not recognized", f));
      }
    } else if (name == "freeze") {
      ASSIGN_OR_RETURN(bool freeze, boolean(name, a));
      (void)freeze;  // nothing to freeze on the way out
    } else if (name == "header") {
      ASSIGN_OR_RETURN(o.header, boolean(name, a));
    } else if (name == "delimiter") {
      ASSIGN_OR_RETURN(delimiter, string(name, a));
    } else if (name == "null") {
      ASSIGN_OR_RETURN(null_string, string(name, a));
    } else if (name == "quote") {
      ASSIGN_OR_RETURN(quote, string(name, a));
    } else if (name == "escape") {
      ASSIGN_OR_RETURN(escape, string(name, a));
    } else if (name == "encoding") {
      ASSIGN_OR_RETURN(std::string e, string(name, a));
      std::string le = AsciiLower(e);
      if (le != "utf8" && le != "utf-8" && le != "unicode") {
        return CopyError(
            "0A000",
            fmt::format("COPY encoding \"{}\" is not supported: the server speaks UTF8", e));
      }
    } else if (name == "force_quote") {
      if (a.kind == CopyArg::Kind::kStar) {
        o.force_quote_all = true;
      } else if (a.kind == CopyArg::Kind::kList) {
        o.force_quote = a.list;
      } else {
        return CopyError("42601",
                         "argument to option \"force_quote\" must be a list of column names");
      }
      force_quote = true;
    } else if (name == "force_not_null") {
      return CopyError("0A000", "COPY force not null only available using COPY FROM");
    } else if (name == "force_null") {
      return CopyError("0A000", "COPY force null only available using COPY FROM");
    } else {
      return CopyError("42601", fmt::format("option \"{}\" not recognized", name));
    }
  }
  const bool csv = o.format == CopyFormat::kCsv;
  if (o.format == CopyFormat::kBinary && delimiter)
    return CopyError("42601", "cannot specify DELIMITER in BINARY mode");
  if (o.format == CopyFormat::kBinary && null_string)
    return CopyError("42601", "cannot specify NULL in BINARY mode");
  std::string delim = delimiter.value_or(csv ? "," : "\t");
  o.null_string = null_string.value_or(csv ? "" : "\\N");
  if (delim.size() != 1)
    return CopyError("0A000", "COPY delimiter must be a single one-byte character");
  o.delimiter = delim[0];
  if (o.delimiter == '\r' || o.delimiter == '\n') {
    return CopyError("22023", "COPY delimiter cannot be newline or carriage return");
  }
  if (o.null_string.find_first_of("\r\n") != std::string::npos) {
    return CopyError("22023", "COPY null representation cannot use newline or carriage return");
  }
  if (!csv && std::string_view("\\.abcdefghijklmnopqrstuvwxyz0123456789").find(o.delimiter) !=
                  std::string_view::npos) {
    return CopyError("22023", fmt::format("COPY delimiter cannot be \"{}\"", delim));
  }
  if (o.format == CopyFormat::kBinary && o.header)
    return CopyError("0A000", "cannot specify HEADER in BINARY mode");
  if (!csv && quote) return CopyError("0A000", "COPY quote available only in CSV mode");
  if (csv) {
    std::string q = quote.value_or("\"");
    if (q.size() != 1) return CopyError("0A000", "COPY quote must be a single one-byte character");
    o.quote = q[0];
    if (o.delimiter == o.quote)
      return CopyError("22023", "COPY delimiter and quote must be different");
  }
  if (!csv && escape) return CopyError("0A000", "COPY escape available only in CSV mode");
  if (csv) {
    std::string e = escape.value_or(std::string(1, o.quote));
    if (e.size() != 1) return CopyError("0A000", "COPY escape must be a single one-byte character");
    o.escape = e[0];
  }
  if (!csv && force_quote) return CopyError("0A000", "COPY force quote available only in CSV mode");
  if (o.format != CopyFormat::kBinary && o.null_string.find(o.delimiter) != std::string::npos) {
    return CopyError("22023", "COPY delimiter must not appear in the NULL specification");
  }
  if (csv && o.null_string.find(o.quote) != std::string::npos) {
    return CopyError("22023", "CSV quote character must not appear in the NULL specification");
  }
  return Status::OK();
}

Result<std::optional<CopyStatement>> CopyParser::Parse() {
  if (!Word(0, "COPY")) return std::optional<CopyStatement>();
  i_ = 1;
  if (Word(i_, "FROM")) return std::optional<CopyStatement>();  // DuckDB's COPY FROM DATABASE
  CopyStatement c;
  bool old_binary = false;
  if (Word(i_, "BINARY") && (Name(i_ + 1))) {
    old_binary = true;
    ++i_;
  }
  if (Punct(i_, '(')) {
    size_t depth = 0, j = i_;
    for (; j < t_.size(); ++j) {
      if (Punct(j, '(')) ++depth;
      if (Punct(j, ')') && --depth == 0) break;
    }
    if (j >= t_.size()) return std::optional<CopyStatement>();
    c.query = std::string(Trim(s_.substr(t_[i_].end, t_[j].begin - t_[i_].end)));
    i_ = j + 1;
  } else {
    if (!Name(i_)) return std::optional<CopyStatement>();
    size_t first = i_;
    ++i_;
    while (Punct(i_, '.') && Name(i_ + 1)) i_ += 2;
    std::string_view table = s_.substr(t_[first].begin, t_[i_ - 1].end - t_[first].begin);
    std::string columns;
    if (Punct(i_, '(')) {
      ++i_;
      while (true) {
        if (!Name(i_)) return std::optional<CopyStatement>();
        if (!columns.empty()) columns += ", ";
        columns += s_.substr(t_[i_].begin, t_[i_].end - t_[i_].begin);
        ++i_;
        if (Punct(i_, ',')) {
          ++i_;
          continue;
        }
        if (Punct(i_, ')')) break;
        return std::optional<CopyStatement>();
      }
      ++i_;
    }
    c.query = fmt::format("SELECT {} FROM {}", columns.empty() ? "*" : columns, table);
  }
  if (Word(i_, "TO")) {
    c.direction = CopyStatement::Direction::kTo;
  } else if (Word(i_, "FROM")) {
    c.direction = CopyStatement::Direction::kFrom;
  } else {
    return std::optional<CopyStatement>();
  }
  ++i_;
  if (Word(i_, "STDOUT") || Word(i_, "STDIN")) {
    c.target = CopyStatement::Target::kClient;
    ++i_;
  } else if (Word(i_, "PROGRAM")) {
    c.target = CopyStatement::Target::kProgram;
    return std::optional<CopyStatement>(std::move(c));
  } else if (StringAt(i_)) {
    c.target = CopyStatement::Target::kFile;
    return std::optional<CopyStatement>(std::move(c));
  } else {
    return std::optional<CopyStatement>();
  }
  if (c.direction == CopyStatement::Direction::kFrom)
    return std::optional<CopyStatement>(std::move(c));
  if (old_binary) RETURN_IF_ERROR(Set("format", {CopyArg::Kind::kWord, "binary", {}}));
  RETURN_IF_ERROR(ParseOptions(c.options));
  if (c.query.empty()) return CopyError("42601", "syntax error at or near \")\"");
  return std::optional<CopyStatement>(std::move(c));
}

}  // namespace

Result<std::optional<CopyStatement>> ParseCopyStatement(std::string_view statement) {
  return CopyParser(statement).Parse();
}

}  // namespace sluice::query
