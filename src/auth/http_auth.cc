#include "auth/http_basic.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "auth/scram.h"
#include "base/base64.h"

namespace sluice::auth {
namespace {

constexpr size_t kMaxRemembered = 4096;

HttpAuthResult Refuse(std::string_view why) {
  HttpAuthResult r;
  r.allowed = false;
  r.refusal.status = 401;
  r.refusal.headers.emplace_back("WWW-Authenticate", R"(Basic realm="sluice", charset="UTF-8")");
  r.refusal.body = fmt::format(
      R"({{"error":{{"message":"{}","type":"NotAuthorizedException","code":401}}}})", why);
  return r;
}

// The credentials a verified password matched, by user and a hash of the header.
class Remembered {
 public:
  // Whether `key` was verified against exactly the credentials `user` has now.
  bool Holds(const std::string& key, const std::vector<std::optional<ScramCredential>>& now) {
    std::lock_guard lock(mu_);
    auto it = verified_.find(key);
    return it != verified_.end() && it->second == now;
  }
  void Add(std::string key, std::vector<std::optional<ScramCredential>> now) {
    std::lock_guard lock(mu_);
    if (verified_.size() >= kMaxRemembered) verified_.clear();
    verified_[std::move(key)] = std::move(now);
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<std::optional<ScramCredential>>> verified_;
};

}  // namespace

HttpAuthenticator BasicAuthenticator(std::shared_ptr<const UserStore> users) {
  auto remembered = std::make_shared<Remembered>();
  return [users = std::move(users), remembered](const HttpRequest& req) -> HttpAuthResult {
    const std::string* header = req.Header("authorization");
    if (header == nullptr) return Refuse("authentication required");
    std::string_view h = *header;
    constexpr std::string_view kScheme = "Basic ";
    if (h.size() < kScheme.size() ||
        !std::equal(kScheme.begin(), kScheme.end(), h.begin(),
                    [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return Refuse("only Basic authentication is accepted");
    }
    h.remove_prefix(kScheme.size());
    while (!h.empty() && h.front() == ' ') h.remove_prefix(1);
    Result<std::string> decoded = Base64Decode(h);
    if (!decoded.ok()) return Refuse("malformed Basic credentials");
    const size_t colon = decoded->find(':');
    if (colon == std::string::npos || colon == 0) return Refuse("malformed Basic credentials");
    const std::string user = decoded->substr(0, colon);
    const std::string_view password = std::string_view(*decoded).substr(colon + 1);
    std::vector<std::optional<ScramCredential>> now;
    for (ScramMechanism m : kScramMechanisms) now.push_back(users->Find(user, m));
    const std::string key = user + '\0' + Hash(ScramMechanism::kSha256, *decoded);
    if (!remembered->Holds(key, now)) {
      if (!users->VerifyPassword(user, password)) return Refuse("wrong user name or password");
      remembered->Add(key, std::move(now));
    }
    HttpAuthResult ok;
    ok.allowed = true;
    ok.principal = "User:" + user;
    return ok;
  };
}

}  // namespace sluice::auth
