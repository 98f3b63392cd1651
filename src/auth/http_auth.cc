#include "auth/http_auth.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "base/base64.h"
#include "base/logging.h"
#include "base/strings.h"

namespace sluice::auth {
namespace {

using Json = nlohmann::json;

const Logger kLog("http-auth");

constexpr size_t kMaxRemembered = 4096;
constexpr size_t kMaxTrackedAddresses = 10'000;
constexpr int64_t kFailureWindowSeconds = 60;
constexpr int kLogLinesPerWindow = 5;
constexpr int64_t kLogWindowSeconds = 10;
constexpr size_t kMaxFormFields = 32;
constexpr std::string_view kIssuedTokenType = "urn:ietf:params:oauth:token-type:access_token";

// Text from outside made safe for one log line: printable ASCII, at most 64 bytes.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 64) out += "…";
  return out;
}

// The Iceberg REST error shape.
std::string IcebergError(int code, std::string_view type, std::string_view message) {
  return Json{{"error", {{"message", message}, {"type", type}, {"code", code}}}}.dump();
}

// RFC 6749 section 5.2's error, as the Iceberg spec's OAuthError names it.
HttpResponse OAuthError(int status, std::string_view error, std::string_view description) {
  HttpResponse r;
  r.status = status;
  r.body = Json{{"error", error}, {"error_description", description}}.dump();
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("Pragma", "no-cache");
  return r;
}

HttpResponse TooMany(int64_t wait, std::string_view addr, bool oauth) {
  const std::string why =
      fmt::format("too many failed logins from {}: try again in {} s", Printable(addr), wait);
  HttpResponse r;
  if (oauth) {
    r = OAuthError(429, "invalid_client", why);
  } else {
    r.status = 429;
    r.body = IcebergError(429, "TooManyRequestsException", why);
  }
  r.headers.emplace_back("Retry-After", std::to_string(wait));
  return r;
}

// "Basic x" or "Bearer x": the credentials after the scheme, when `header` uses `scheme`.
std::optional<std::string_view> AfterScheme(std::string_view header, std::string_view scheme) {
  if (header.size() <= scheme.size() ||
      !EqualsIgnoreCase(header.substr(0, scheme.size()), scheme) || header[scheme.size()] != ' ') {
    return std::nullopt;
  }
  header.remove_prefix(scheme.size());
  while (!header.empty() && header.front() == ' ') header.remove_prefix(1);
  while (!header.empty() && header.back() == ' ') header.remove_suffix(1);
  return header;
}

// user:password from Basic credentials.
std::optional<std::pair<std::string, std::string>> DecodeBasic(std::string_view b64) {
  Result<std::string> decoded = Base64Decode(b64);
  if (!decoded.ok()) return std::nullopt;
  const size_t colon = decoded->find(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  return std::make_pair(decoded->substr(0, colon), decoded->substr(colon + 1));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Result<std::string> FormDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) {
        return InvalidArgumentError("a truncated %-escape");
      }
      const int hi = HexValue(s[i + 1]), lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return InvalidArgumentError("a bad %-escape");
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// application/x-www-form-urlencoded: each name once (RFC 6749 section 3.2).
Result<std::map<std::string, std::string>> ParseForm(std::string_view body) {
  std::map<std::string, std::string> out;
  while (!body.empty()) {
    const size_t amp = body.find('&');
    std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    ASSIGN_OR_RETURN(std::string name, FormDecode(pair.substr(0, eq)));
    ASSIGN_OR_RETURN(
        std::string value,
        FormDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1)));
    if (out.size() >= kMaxFormFields) return InvalidArgumentError("too many form fields");
    if (!out.emplace(name, std::move(value)).second) {
      return InvalidArgumentError("'{}' is given twice", Printable(name));
    }
  }
  return out;
}

}  // namespace

HttpAuth::HttpAuth(HttpAuthOptions options) : options_(std::move(options)) {}

int64_t HttpAuth::Now() const {
  if (options_.now) return options_.now();
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t HttpAuth::Throttled(const std::string& remote_addr) {
  std::lock_guard lock(mu_);
  auto it = failures_.find(remote_addr);
  if (it == failures_.end()) return 0;
  const int64_t end = it->second.window_start + kFailureWindowSeconds;
  const int64_t now = Now();
  if (now >= end) {
    failures_.erase(it);
    return 0;
  }
  return it->second.count >= kMaxFailuresPerMinute ? end - now : 0;
}

void HttpAuth::Failed(const std::string& remote_addr, const std::string& user,
                      std::string_view how) {
  std::lock_guard lock(mu_);
  const int64_t now = Now();
  if (failures_.size() >= kMaxTrackedAddresses) {
    std::erase_if(failures_, [&](const auto& kv) {
      return now >= kv.second.window_start + kFailureWindowSeconds;
    });
    if (failures_.size() >= kMaxTrackedAddresses) failures_.clear();
  }
  Failures& f = failures_[remote_addr];
  if (now >= f.window_start + kFailureWindowSeconds) f = {now, 0};
  ++f.count;
  if (now >= log_window_ + kLogWindowSeconds) {
    if (unlogged_ > 0) {
      SLUICE_LOG(kLog, kWarn, "{} more failed logins were not logged", unlogged_);
    }
    log_window_ = now;
    logged_ = 0;
    unlogged_ = 0;
  }
  if (logged_ < kLogLinesPerWindow) {
    ++logged_;
    SLUICE_LOG(
        kLog, kWarn, "failed login as '{}' from {} ({}){}", Printable(user), Printable(remote_addr),
        how, f.count == kMaxFailuresPerMinute ? "; its next logins wait for the minute's end" : "");
  } else {
    ++unlogged_;
  }
}

bool HttpAuth::CheckPassword(const std::string& user, std::string_view password,
                             const std::string& remote_addr) {
  std::vector<std::optional<ScramCredential>> now;
  for (ScramMechanism m : kScramMechanisms) now.push_back(options_.users->Find(user, m));
  const std::string key =
      user + '\0' + Hash(ScramMechanism::kSha256, user + '\0' + std::string(password));
  {
    std::lock_guard lock(mu_);
    auto it = verified_.find(key);
    if (it != verified_.end() && it->second == now) return true;
  }
  if (!options_.users->VerifyPassword(user, password)) {
    Failed(remote_addr, user, "wrong user name or password");
    return false;
  }
  std::lock_guard lock(mu_);
  if (verified_.size() >= kMaxRemembered) verified_.clear();
  verified_[key] = std::move(now);
  return true;
}

std::string HttpAuth::CredentialTag(const TokenSigner& signer, const std::string& user) const {
  std::string creds;
  for (ScramMechanism m : kScramMechanisms) {
    std::optional<ScramCredential> c = options_.users->Find(user, m);
    if (!c.has_value()) continue;
    creds += fmt::format("{}:{}:{}:{};", MechanismName(m), Base64Encode(c->salt), c->iterations,
                         Base64Encode(c->stored_key));
  }
  return creds.empty() ? std::string() : signer.CredentialTag(creds);
}

Result<std::string> HttpAuth::EnsureSecret() {
  for (int attempt = 0;; ++attempt) {
    Result<std::string> secret = options_.users->TokenSecret();
    if (secret.ok() || secret.status().code() != StatusCode::kFailedPrecondition || attempt >= 30) {
      return secret;
    }
    // Another broker changed the store: its change (maybe its own secret) comes through
    // the watch.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<std::string> HttpAuth::TokenFor(const std::string& user, int64_t ttl_seconds) {
  ASSIGN_OR_RETURN(std::string secret, EnsureSecret());
  TokenSigner signer(secret);
  TokenClaims c;
  c.subject = user;
  c.issued_at = Now();
  c.expires_at = c.issued_at + ttl_seconds;
  c.id = TokenSigner::NewId();
  c.credential = CredentialTag(signer, user);
  if (c.credential.empty()) return NotFoundError("no user '{}'", user);
  return signer.Sign(c);
}

HttpResponse HttpAuth::IssueToken(const HttpRequest& req) {
  if (req.path != kTokenPath) {
    HttpResponse r;
    r.status = 404;
    r.body = IcebergError(404, "NoSuchEndpointException", "no such endpoint");
    return r;
  }
  if (req.method != "POST") {
    HttpResponse r = OAuthError(405, "invalid_request", "POST a form to get a token");
    r.headers.emplace_back("Allow", "POST");
    return r;
  }
  const std::string* type = req.Header("content-type");
  if (type == nullptr || AsciiLower(Trim(std::string_view(*type).substr(0, type->find(';')))) !=
                             "application/x-www-form-urlencoded") {
    return OAuthError(400, "invalid_request",
                      "the request must be a form (application/x-www-form-urlencoded)");
  }
  Result<std::map<std::string, std::string>> form = ParseForm(req.body);
  if (!form.ok()) return OAuthError(400, "invalid_request", form.status().message());
  auto field = [&](const char* name) -> const std::string* {
    auto it = form->find(name);
    return it == form->end() ? nullptr : &it->second;
  };
  const std::string* grant = field("grant_type");
  if (grant == nullptr) return OAuthError(400, "invalid_request", "grant_type is missing");
  if (*grant != "client_credentials") {
    return OAuthError(400, "unsupported_grant_type",
                      *grant == "urn:ietf:params:oauth:grant-type:token-exchange"
                          ? "token exchange is not supported: log in with client_credentials"
                          : "only grant_type=client_credentials is supported");
  }
  // The client's credentials: the form's client_id and client_secret, or a Basic header
  // (RFC 6749 section 2.3.1), never both.
  std::string user, password;
  bool by_header = false;
  const std::string* header = req.Header("authorization");
  if (std::optional<std::string_view> b64 =
          header != nullptr ? AfterScheme(*header, "Basic") : std::nullopt) {
    if (field("client_id") != nullptr || field("client_secret") != nullptr) {
      return OAuthError(400, "invalid_request",
                        "client credentials in both the Authorization header and the form");
    }
    auto decoded = DecodeBasic(*b64);
    if (!decoded.has_value()) {
      HttpResponse r = OAuthError(401, "invalid_client", "malformed Basic credentials");
      r.headers.emplace_back("WWW-Authenticate", R"(Basic realm="sluice", charset="UTF-8")");
      return r;
    }
    std::tie(user, password) = std::move(*decoded);
    by_header = true;
  } else {
    const std::string* id = field("client_id");
    const std::string* secret = field("client_secret");
    if (id == nullptr || secret == nullptr || id->empty()) {
      return OAuthError(401, "invalid_client",
                        "client_id (the user) and client_secret (its password) are needed");
    }
    user = *id;
    password = *secret;
  }
  int64_t ttl = options_.token_ttl_seconds;
  if (const std::string* asked = field("expires_in")) {
    if (asked->empty() || asked->size() > 12 ||
        asked->find_first_not_of("0123456789") != std::string::npos || std::stoll(*asked) == 0) {
      return OAuthError(400, "invalid_request", "expires_in must be a whole number of seconds");
    }
    ttl = std::min<int64_t>(std::stoll(*asked), options_.token_max_ttl_seconds);
  }
  if (int64_t wait = Throttled(req.remote_addr); wait > 0) {
    return TooMany(wait, req.remote_addr, /*oauth=*/true);
  }
  if (!CheckPassword(user, password, req.remote_addr)) {
    HttpResponse r = OAuthError(401, "invalid_client", "wrong client_id or client_secret");
    if (by_header) {
      r.headers.emplace_back("WWW-Authenticate", R"(Basic realm="sluice", charset="UTF-8")");
    }
    return r;
  }
  Result<std::string> token = TokenFor(user, ttl);
  if (!token.ok()) {
    if (token.status().code() == StatusCode::kNotFound) {  // removed meanwhile
      return OAuthError(401, "invalid_client", "wrong client_id or client_secret");
    }
    SLUICE_LOG(kLog, kError, "cannot make the token secret: {}", token.status().ToString());
    return OAuthError(503, "temporarily_unavailable",
                      "the token secret could not be stored; try again");
  }
  SLUICE_LOG(kLog, kInfo, "issued a token to '{}' from {} for {} s", Printable(user),
             Printable(req.remote_addr), ttl);
  HttpResponse r;
  r.body = Json{{"access_token", *token},
                {"token_type", "bearer"},
                {"expires_in", ttl},
                {"issued_token_type", kIssuedTokenType}}
               .dump();
  r.headers.emplace_back("Cache-Control", "no-store");
  r.headers.emplace_back("Pragma", "no-cache");
  return r;
}

HttpAuthResult HttpAuth::Authenticate(const HttpRequest& req) {
  // 401 with a challenge for each scheme; `token_error` for a refused bearer token.
  auto refuse = [&](std::string_view why, bool token_error) {
    HttpAuthResult r;
    r.refusal.status = 401;
    std::string bearer = R"(Bearer realm="sluice")";
    if (token_error) {
      std::string d(why);
      std::replace(d.begin(), d.end(), '"', '\'');
      bearer += fmt::format(R"(, error="invalid_token", error_description="{}")", d);
    }
    r.refusal.headers.emplace_back("WWW-Authenticate", bearer);
    // Not to the console's page (it marks every request): a Basic challenge would make the
    // browser open its own login dialog over the page's login form.
    if (options_.accept_basic && req.Header("x-sluice-request") == nullptr) {
      r.refusal.headers.emplace_back("WWW-Authenticate",
                                     R"(Basic realm="sluice", charset="UTF-8")");
    }
    r.refusal.body = IcebergError(401, "NotAuthorizedException", why);
    return r;
  };
  auto allow = [](const std::string& user) {
    HttpAuthResult ok;
    ok.allowed = true;
    ok.principal = "User:" + user;
    return ok;
  };
  const std::string* header = req.Header("authorization");
  if (header == nullptr) return refuse("authentication required", false);
  if (std::optional<std::string_view> token = AfterScheme(*header, "Bearer")) {
    std::optional<std::string> secret = options_.users->FindTokenSecret();
    if (!secret.has_value()) return refuse("the token is not one of this cluster's", true);
    TokenSigner signer(*secret);
    TokenVerdict v = signer.Verify(*token, Now());
    if (!v.ok) return refuse(v.why, true);
    const std::string tag = CredentialTag(signer, v.claims.subject);
    if (tag.empty()) return refuse("the token's user no longer exists", true);
    if (!ConstantTimeEquals(tag, v.claims.credential)) {
      return refuse("the token's user has another password since it was issued", true);
    }
    return allow(v.claims.subject);
  }
  if (std::optional<std::string_view> b64 = AfterScheme(*header, "Basic")) {
    if (!options_.accept_basic) {
      return refuse("only bearer tokens are accepted (http.auth: token): get one from POST " +
                        std::string(kTokenPath),
                    false);
    }
    auto decoded = DecodeBasic(*b64);
    if (!decoded.has_value()) return refuse("malformed Basic credentials", false);
    if (int64_t wait = Throttled(req.remote_addr); wait > 0) {
      HttpAuthResult r;
      r.refusal = TooMany(wait, req.remote_addr, /*oauth=*/false);
      return r;
    }
    if (!CheckPassword(decoded->first, decoded->second, req.remote_addr)) {
      return refuse("wrong user name or password", false);
    }
    return allow(decoded->first);
  }
  return refuse(options_.accept_basic ? "only Bearer and Basic authentication are accepted"
                                      : "only bearer tokens are accepted",
                false);
}

HttpRoute HttpAuth::TokenRoute(std::shared_ptr<HttpAuth> auth) {
  HttpRoute route;
  route.prefix = std::string(kTokenPath);
  route.handler = [auth = std::move(auth)](const HttpRequest& r) { return auth->IssueToken(r); };
  route.needs_login = false;  // it is the login
  route.accepts_forms = true;
  return route;
}

HttpAuthenticator HttpAuth::Hook(std::shared_ptr<HttpAuth> auth) {
  return [auth = std::move(auth)](const HttpRequest& r) { return auth->Authenticate(r); };
}

}  // namespace sluice::auth
