#include "cli/user_cmd.h"

#include <fmt/format.h>
#include <httplib.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "auth/http_auth.h"
#include "auth/scram.h"
#include "base/config.h"
#include "base/http_server.h"
#include "broker/inter_broker_connection.h"
#include "cli/admin_connection.h"
#include "kafka/protocol/messages/admin.h"
#include "kafka/protocol/messages/users.h"

namespace sluice::cli {
namespace {

using kafka::ErrorCode;

const std::string kClientId = "sluice-user";

int Fail(const std::string& message) {
  std::fprintf(stderr, "sluice user: %s\n", message.c_str());
  return 1;
}

template <typename Response, typename Request>
Result<Response> Ask(broker::InterBrokerConnection& conn, kafka::ApiKey api, const Request& req) {
  return cli::Ask<Response>(conn, api, req, kClientId);
}

// The user's credentials (mechanism codes), nullopt when it does not exist.
Result<std::optional<std::vector<int8_t>>> Describe(broker::InterBrokerConnection& conn,
                                                    const std::string& name) {
  kafka::DescribeUserScramCredentialsRequest req;
  req.users = std::vector<kafka::DescribeUserScramCredentialsRequest::User>{{name}};
  ASSIGN_OR_RETURN(auto resp, (Ask<kafka::DescribeUserScramCredentialsResponse>(
                                  conn, kafka::ApiKey::kDescribeUserScramCredentials, req)));
  if (resp.error_code != ErrorCode::kNone) {
    return FailedPreconditionError(
        "DescribeUserScramCredentials: {}",
        resp.error_message.value_or(fmt::format("error {}", static_cast<int>(resp.error_code))));
  }
  for (const auto& r : resp.results) {
    if (r.user != name) continue;
    if (r.error_code == ErrorCode::kResourceNotFound) return std::optional<std::vector<int8_t>>();
    if (r.error_code != ErrorCode::kNone) {
      return FailedPreconditionError("{}", r.error_message.value_or("error"));
    }
    std::vector<int8_t> out;
    for (const auto& c : r.credential_infos) out.push_back(c.mechanism);
    return std::optional<std::vector<int8_t>>(std::move(out));
  }
  return std::optional<std::vector<int8_t>>();
}

Status Alter(broker::InterBrokerConnection& conn,
             const kafka::AlterUserScramCredentialsRequest& req) {
  ASSIGN_OR_RETURN(auto resp, (Ask<kafka::AlterUserScramCredentialsResponse>(
                                  conn, kafka::ApiKey::kAlterUserScramCredentials, req)));
  for (const auto& r : resp.results) {
    if (r.error_code != ErrorCode::kNone) {
      return FailedPreconditionError("'{}': {} (error {})", r.user,
                                     r.error_message.value_or("refused"),
                                     static_cast<int>(r.error_code));
    }
  }
  return Status::OK();
}

// The password from stdin or the terminal (asked twice when `confirm`: a new one).
Result<std::string> ReadPassword(const UserFlags& f, bool confirm) {
  std::string password;
  if (f.password_stdin) {
    if (!std::getline(std::cin, password)) return InvalidArgumentError("no password on stdin");
    if (!password.empty() && password.back() == '\r') password.pop_back();
  } else if (::isatty(STDIN_FILENO)) {
    auto ask = [](const char* prompt) {
      std::fprintf(stderr, "%s", prompt);
      termios old{};
      ::tcgetattr(STDIN_FILENO, &old);
      termios quiet = old;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
      std::string line;
      std::getline(std::cin, line);
      ::tcsetattr(STDIN_FILENO, TCSANOW, &old);
      std::fprintf(stderr, "\n");
      return line;
    };
    password = ask(fmt::format("Password for {}: ", f.name).c_str());
    if (confirm && ask("Again: ") != password) {
      return InvalidArgumentError("the passwords differ");
    }
  } else {
    return InvalidArgumentError("no terminal to ask the password on: give --password-stdin");
  }
  if (password.empty()) return InvalidArgumentError("an empty password");
  return password;
}

Result<std::vector<auth::ScramMechanism>> Mechanisms(const UserFlags& f) {
  if (f.mechanism == "all") {
    return std::vector<auth::ScramMechanism>(std::begin(auth::kScramMechanisms),
                                             std::end(auth::kScramMechanisms));
  }
  std::optional<auth::ScramMechanism> m = auth::MechanismFromName(f.mechanism);
  if (!m.has_value()) {
    return InvalidArgumentError("--mechanism '{}' is not SCRAM-SHA-256, SCRAM-SHA-512 or all",
                                f.mechanism);
  }
  return std::vector<auth::ScramMechanism>{*m};
}

// add and passwd: the new password's credentials, salted here.
int SetPassword(const UserFlags& f, bool must_exist) {
  if (f.name.empty()) return Fail("a user name is needed");
  if (f.iterations < auth::kMinIterations || f.iterations > auth::kMaxIterations) {
    return Fail(fmt::format("--iterations {} is outside {} to {}", f.iterations,
                            auth::kMinIterations, auth::kMaxIterations));
  }
  auto mechanisms = Mechanisms(f);
  if (!mechanisms.ok()) return Fail(mechanisms.status().message());
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return Fail(conn.status().message());
  auto existing = Describe(**conn, f.name);
  if (!existing.ok()) return Fail(existing.status().message());
  if (must_exist && !existing->has_value()) {
    return Fail(fmt::format("no user '{}' (sluice user add makes one)", f.name));
  }
  if (!must_exist && existing->has_value()) {
    return Fail(
        fmt::format("user '{}' exists already (sluice user passwd changes its password)", f.name));
  }
  auto password = ReadPassword(f, /*confirm=*/true);
  if (!password.ok()) return Fail(password.status().message());
  kafka::AlterUserScramCredentialsRequest req;
  for (auth::ScramMechanism m : *mechanisms) {
    const std::string salt = auth::RandomBytes(auth::kSaltBytes);
    const std::string salted = auth::SaltedPassword(m, *password, salt, f.iterations);
    kafka::AlterUserScramCredentialsRequest::Upsertion u;
    u.name = f.name;
    u.mechanism = static_cast<int8_t>(m);
    u.iterations = f.iterations;
    u.salt.assign(salt.begin(), salt.end());
    u.salted_password.assign(salted.begin(), salted.end());
    req.upsertions.push_back(std::move(u));
  }
  // passwd with one mechanism leaves no stale credential of the other.
  if (existing->has_value()) {
    for (int8_t code : **existing) {
      bool kept = false;
      for (auth::ScramMechanism m : *mechanisms) kept |= static_cast<int8_t>(m) == code;
      if (!kept) req.deletions.push_back({f.name, code});
    }
  }
  if (Status st = Alter(**conn, req); !st.ok()) return Fail(st.message());
  std::printf("%s user %s\n", must_exist ? "changed the password of" : "added", f.name.c_str());
  return 0;
}

// application/x-www-form-urlencoded's escaping of one value.
std::string FormEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace

int RunUserAdd(const UserFlags& flags) { return SetPassword(flags, false); }
int RunUserPasswd(const UserFlags& flags) { return SetPassword(flags, true); }

int RunUserRemove(const UserFlags& f) {
  if (f.name.empty()) return Fail("a user name is needed");
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return Fail(conn.status().message());
  auto existing = Describe(**conn, f.name);
  if (!existing.ok()) return Fail(existing.status().message());
  if (!existing->has_value()) return Fail(fmt::format("no user '{}'", f.name));
  kafka::AlterUserScramCredentialsRequest req;
  for (int8_t code : **existing) req.deletions.push_back({f.name, code});
  if (Status st = Alter(**conn, req); !st.ok()) return Fail(st.message());
  std::printf("removed user %s\n", f.name.c_str());
  return 0;
}

int RunUserList(const UserFlags& f) {
  auto conn = ConnectAdmin(f.connection);
  if (!conn.ok()) return Fail(conn.status().message());
  kafka::DescribeUserScramCredentialsRequest req;  // users null: all of them
  auto resp = Ask<kafka::DescribeUserScramCredentialsResponse>(
      **conn, kafka::ApiKey::kDescribeUserScramCredentials, req);
  if (!resp.ok()) return Fail(resp.status().message());
  if (resp->error_code != ErrorCode::kNone) {
    return Fail(
        resp->error_message.value_or(fmt::format("error {}", static_cast<int>(resp->error_code))));
  }
  size_t width = 4;
  for (const auto& r : resp->results) width = std::max(width, r.user.size());
  std::printf("%-*s  %s\n", static_cast<int>(width), "USER", "CREDENTIALS");
  for (const auto& r : resp->results) {
    std::string creds;
    for (const auto& c : r.credential_infos) {
      std::optional<auth::ScramMechanism> m = auth::MechanismFromKafka(c.mechanism);
      creds += fmt::format("{}{} ({} iterations)", creds.empty() ? "" : ", ",
                           m ? auth::MechanismName(*m) : "unknown", c.iterations);
    }
    std::printf("%-*s  %s\n", static_cast<int>(width), r.user.c_str(), creds.c_str());
  }
  return 0;
}

int RunUserToken(const UserFlags& f) {
  if (f.name.empty()) return Fail("a user name is needed");
  int64_t ttl_seconds = 0;  // the server's default
  if (!f.ttl.empty()) {
    Config config;
    config.Set("ttl", f.ttl, "--ttl");
    Result<int64_t> ms = config.GetDurationMs("ttl", -1);
    if (!ms.ok()) return Fail(ms.status().message());
    if (*ms < 1000) return Fail("--ttl must be at least 1s (30m, 12h, 7d)");
    ttl_seconds = *ms / 1000;
  }
  // The HTTP port: HOST:PORT, or a URL saying http or https; --cacert means https.
  std::string addr = f.http_addr;
  std::string scheme = f.cacert.empty() ? "http" : "https";
  for (std::string_view s : {"http", "https"}) {
    const std::string prefix = std::string(s) + "://";
    if (addr.starts_with(prefix)) {
      scheme = s;
      addr = addr.substr(prefix.size());
    }
  }
  while (addr.ends_with('/')) addr.pop_back();
  if (scheme == "http" && !f.cacert.empty()) {
    return Fail("--cacert is for HTTPS, but --http-addr says http://");
  }
  Result<std::pair<std::string, int>> host_port = SplitHostPort(addr, "--http-addr");
  if (!host_port.ok()) return Fail(host_port.status().message());
  const std::string host = host_port->first.find(':') != std::string::npos
                               ? "[" + host_port->first + "]"
                               : host_port->first;
  const std::string base = fmt::format("{}://{}:{}", scheme, host, host_port->second);
  auto password = ReadPassword(f, /*confirm=*/false);
  if (!password.ok()) return Fail(password.status().message());

  httplib::Client client(base);
  client.set_connection_timeout(std::chrono::seconds(10));
  client.set_read_timeout(std::chrono::seconds(60));
  if (scheme == "https") {
    if (!f.cacert.empty()) client.set_ca_cert_path(f.cacert.c_str());
    client.enable_server_certificate_verification(true);
  }
  std::string form = "grant_type=client_credentials&client_id=" + FormEncode(f.name) +
                     "&client_secret=" + FormEncode(*password);
  if (ttl_seconds > 0) form += fmt::format("&expires_in={}", ttl_seconds);
  httplib::Result res = client.Post(std::string(auth::kTokenPath), {{"Accept", "application/json"}},
                                    form, "application/x-www-form-urlencoded");
  if (!res) {
    return Fail(fmt::format("cannot reach {}: {}", base, httplib::to_string(res.error())));
  }
  nlohmann::json j = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  if (res->status != 200 || !j.is_object() || !j.contains("access_token") ||
      !j["access_token"].is_string()) {
    std::string why = res->body.substr(0, 300);
    if (j.is_object() && j.contains("error_description") && j["error_description"].is_string()) {
      why = j["error_description"].get<std::string>();
    }
    return Fail(fmt::format("{}{}: HTTP {}: {}", base, auth::kTokenPath, res->status, why));
  }
  if (ttl_seconds > 0 && j.contains("expires_in") && j["expires_in"].is_number_integer() &&
      j["expires_in"].get<int64_t>() < ttl_seconds) {
    std::fprintf(stderr, "sluice user token: the server's maximum cut the lifetime to %lld s\n",
                 static_cast<long long>(j["expires_in"].get<int64_t>()));
  }
  std::printf("%s\n", j["access_token"].get<std::string>().c_str());
  return 0;
}

}  // namespace sluice::cli
