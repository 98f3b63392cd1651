#include "query/sql_text.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace sluice::query {

namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }
bool IsIdentChar(char c) { return IsIdentStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '$'; }

// The end of the quoted, commented or dollar-quoted run starting at `i`, or `i` when
// none starts there.
size_t SkipQuoted(std::string_view s, size_t i) {
  char c = s[i];
  if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') {
    size_t end = s.find('\n', i);
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
    if (j < s.size() && s[j] == '$' && (j == i + 1 || !std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
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

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The words and the rest: a small tokenizer over the statement's start.
struct Token {
  std::string text;  // upper-cased word, or the punctuation/quoted text as written
  bool word;
  size_t end;
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
      if (c == '\'' || c == '"' || c == '$') out.push_back({std::string(s.substr(i, q - i)), false, q});
      i = q;
      continue;
    }
    if (IsIdentStart(c)) {
      size_t j = i;
      while (j < s.size() && IsIdentChar(s[j])) ++j;
      std::string w(s.substr(i, j - i));
      for (char& x : w) x = static_cast<char>(std::toupper(static_cast<unsigned char>(x)));
      out.push_back({w, true, j});
      i = j;
      continue;
    }
    out.push_back({std::string(1, c), false, i + 1});
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
    if (i < t.size() && t[i].word && (t[i].text == "SESSION" || t[i].text == "LOCAL" || t[i].text == "GLOBAL")) ++i;
    if (i < t.size() && t[i].word && t[i].text == "TIME" && i + 1 < t.size() && t[i + 1].text == "ZONE") {
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
    out.name = Lower(t[i].text);
  } else if (t[i].text.size() >= 2 && t[i].text.front() == '"') {
    out.name = Lower(Unquote(t[i].text));
  } else {
    return out;
  }
  if (out.verb == "SET" && i + 1 < t.size()) {
    size_t start = t[i].end;
    std::string_view rest = Trim(statement.substr(start));
    if (rest.starts_with("=")) {
      rest.remove_prefix(1);
    } else if (rest.size() >= 2 && (rest[0] == 'T' || rest[0] == 't') && (rest[1] == 'O' || rest[1] == 'o') &&
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
    "memory_limit", "max_memory", "threads", "worker_threads", "external_threads",
    "enable_external_access", "allowed_directories", "allowed_paths", "lock_configuration",
    "autoinstall_known_extensions", "autoload_known_extensions", "allow_unsigned_extensions",
    "allow_community_extensions", "allow_extensions_metadata_mismatch", "extension_directory",
    "custom_extension_repository", "autoinstall_extension_repository", "temp_directory",
    "max_temp_directory_size", "allow_persistent_secrets", "enable_external_file_cache",
    "secret_directory", "default_block_size",
};

// Settings of the client session that the server answers itself.
constexpr std::string_view kClientSettings[] = {
    "application_name", "client_encoding", "datestyle", "intervalstyle", "extra_float_digits",
    "client_min_messages", "standard_conforming_strings", "timezone", "lc_messages",
    "bytea_output", "jit", "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
    "row_security", "synchronous_commit", "geqo",
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

SandboxVerdict CheckSandbox(std::string_view statement) {
  std::vector<std::string> w = LeadingWords(statement, 2);
  if (w.empty()) return {};
  const std::string& first = w[0];
  if (first == "ATTACH" || first == "DETACH") {
    return {true, fmt::format("permission denied: {} is not allowed on the query server", first)};
  }
  if (first == "INSTALL" || first == "LOAD" || (first == "FORCE" && w.size() > 1 && w[1] == "INSTALL") ||
      (first == "UPDATE" && w.size() > 1 && w[1] == "EXTENSIONS")) {
    return {true, "permission denied: extensions cannot be installed or loaded on the query server"};
  }
  if (first == "SET" || first == "RESET" || first == "PRAGMA") {
    SettingTarget t = ParseSettingTarget(statement);
    for (std::string_view p : kProtectedSettings) {
      if (t.name == p) return {true, fmt::format("permission denied to set parameter \"{}\"", t.name)};
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
      static constexpr std::string_view kSkip[] = {"OR", "REPLACE", "TEMP", "TEMPORARY", "PERSISTENT", "UNIQUE"};
      if (std::find(std::begin(kSkip), std::end(kSkip), w[i]) == std::end(kSkip)) return first + " " + w[i];
    }
    return first;
  }
  if (first == "BEGIN") return "BEGIN";
  if (first == "START") return "START TRANSACTION";
  if (first == "COMMIT" || first == "END") return "COMMIT";
  if (first == "ROLLBACK" || first == "ABORT") return "ROLLBACK";
  return first.empty() ? "SELECT 0" : first;
}

std::optional<std::string> SubstituteParameters(std::string_view s, const std::vector<std::string>& values) {
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

}  // namespace sluice::query
