// Principals as Kafka names them ("User:alice"), and the mapping of a TLS client
// certificate's distinguished name to a user with Kafka's ssl.principal.mapping.rules
// (docs/design/0019-security.md, phase E):
//
//   RULE:^CN=([a-zA-Z0-9.]*).*$/$1/L, RULE:^.*[Cc]=([a-zA-Z0-9.]*).*$/$1/, DEFAULT
//
// Rules are tried in order; a RULE applies when its pattern matches the whole DN (RFC 2253
// form, "CN=alice,OU=eng,O=Example"), and gives the DN with every match replaced by the
// replacement ($1 for a group), lower-cased with /L, upper-cased with /U; DEFAULT gives the
// DN as it is. No rule applying fails the connection, as in Kafka. Patterns are ECMAScript
// regular expressions (Java's for the forms these rules use).
#pragma once

#include <memory>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::auth {

inline constexpr std::string_view kAnonymous = "User:ANONYMOUS";

class SslPrincipalMapper {
 public:
  // "" is DEFAULT. InvalidArgument "Invalid rule: ..." for a rule that does not parse or a
  // pattern that does not compile.
  static Result<SslPrincipalMapper> Parse(std::string_view rules);

  // The user name for `dn` (without "User:"); NotFound when no rule applies.
  Result<std::string> Apply(std::string_view dn) const;

 private:
  struct Rule {
    bool is_default = false;
    std::string pattern_text;
    std::shared_ptr<const std::regex> pattern;
    std::string replacement;
    char case_change = 0;  // 'L', 'U' or 0
  };
  std::vector<Rule> rules_;
};

}  // namespace sluice::auth
