#include "base/strings.h"

namespace sluice {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
char Upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }
bool Space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

}  // namespace

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Lower(c);
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Upper(c);
  return out;
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && Space(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && Space(s.front())) s.remove_prefix(1);
  return TrimRight(s);
}

namespace {

bool WordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool Contains(std::string_view text, std::string_view word, bool whole) {
  for (size_t i = 0; i + word.size() <= text.size(); ++i) {
    if (whole && ((i > 0 && WordChar(text[i - 1])) ||
                  (i + word.size() < text.size() && WordChar(text[i + word.size()])))) {
      continue;
    }
    if (EqualsIgnoreCase(text.substr(i, word.size()), word)) return true;
  }
  return false;
}

}  // namespace

bool ContainsIgnoreCase(std::string_view text, std::string_view word) {
  return Contains(text, word, false);
}

bool ContainsWordIgnoreCase(std::string_view text, std::string_view word) {
  return Contains(text, word, true);
}

Result<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= text.size()) {
      return InvalidArgumentError("\"{}\": truncated percent escape", text);
    }
    int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
    if (hi < 0 || lo < 0) return InvalidArgumentError("\"{}\": bad percent escape", text);
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace sluice
