// HttpServer: routes see the request's headers and peer, answer with headers of their own
// or a streamed body, the authentication hook runs before every route that needs a login,
// and the browser guard refuses what another site's page could send.
#include "base/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace sluice {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<HttpServer> Serve(std::vector<HttpRoute> routes, HttpServerOptions options = {}) {
  static MetricsRegistry registry;
  auto s = HttpServer::Start(
      "127.0.0.1:0", registry, [] { return std::string(); }, std::move(routes), std::move(options));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(HttpServerTest, RoutesSeeHeadersLowerCasedAndSetTheirOwn) {
  HttpRequest seen;
  auto server = Serve({{"/echo/", [&](const HttpRequest& r) {
                          seen = r;
                          HttpResponse out;
                          out.body = "{}";
                          out.headers.push_back({"X-Answer", "42"});
                          return out;
                        }}});
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  auto res = c.Get("/echo/a%2Fb?x=1", {{"X-Trace-Id", "abc"}, {"Accept", "application/json"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("X-Answer"), "42");
  EXPECT_EQ(seen.path, "/echo/a%2Fb");
  EXPECT_EQ(seen.query.at("x"), "1");
  ASSERT_NE(seen.Header("x-trace-id"), nullptr);
  EXPECT_EQ(*seen.Header("x-trace-id"), "abc");
  EXPECT_EQ(*seen.Header("accept"), "application/json");
  EXPECT_EQ(seen.Header("X-Trace-Id"), nullptr);   // names are lower case
  EXPECT_EQ(seen.Header("remote_addr"), nullptr);  // the library's own, not the client's
  EXPECT_EQ(seen.remote_addr, "127.0.0.1");
  EXPECT_EQ(seen.principal, "");
}

// httplib's brotli is its slowest quality: answers are gzip when the client takes gzip, else
// not compressed.
// /readyz answers from the readiness check, /healthz from the health check; without a
// readiness check /readyz is /healthz.
TEST(HttpServerTest, ReadyzAnswersFromItsOwnCheck) {
  std::atomic<bool> ready{false};
  HttpServerOptions options;
  options.readiness = [&] { return ready ? std::string() : std::string("starting"); };
  static MetricsRegistry registry;
  auto s = HttpServer::Start(
      "127.0.0.1:0", registry, [] { return std::string(); }, {}, std::move(options));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  httplib::Client c("127.0.0.1", (*s)->port());
  auto r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "starting\n");
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  ready = true;
  r = c.Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ready\n");

  auto plain = HttpServer::Start("127.0.0.1:0", registry, [] { return std::string("sick"); });
  ASSERT_TRUE(plain.ok());
  httplib::Client p("127.0.0.1", (*plain)->port());
  EXPECT_EQ(p.Get("/readyz")->status, 503);
  EXPECT_EQ(p.Get("/readyz")->body, "sick\n");
}

TEST(HttpServerTest, AnswersAreGzipNeverBrotli) {
  const std::string body(8192, 'x');
  auto server = Serve({{"/big/", [&](const HttpRequest&) {
                          HttpResponse out;
                          out.body = body;
                          out.content_type = "application/json";
                          return out;
                        }}});
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  for (const auto& [offered, want] :
       std::vector<std::pair<std::string, std::string>>{{"gzip, deflate, br", "gzip"},
                                                        {"br;q=1.0, gzip;q=0.5", "gzip"},
                                                        {"br", ""},
                                                        {"gzip;q=0, br", ""},
                                                        {"gzip", "gzip"}}) {
    auto res = c.Get("/big/", {{"Accept-Encoding", offered}});
    ASSERT_TRUE(res) << offered;
    EXPECT_EQ(res->get_header_value("Content-Encoding"), want) << offered;
    EXPECT_EQ(res->body, body) << offered;  // the client decompresses
  }
}

TEST(HttpServerTest, StreamedBodyArrivesInChunksAsServerSentEvents) {
  auto server = Serve({{"/events", [](const HttpRequest&) {
                          HttpResponse out;
                          out.content_type = "text/event-stream";
                          out.stream = [](HttpStream& s) {
                            for (int i = 0; i < 3; ++i) {
                              if (!s.Write("data: " + std::to_string(i) + "\n\n")) return;
                            }
                          };
                          return out;
                        }}});
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  auto res = c.Get("/events");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  EXPECT_EQ(res->get_header_value("Transfer-Encoding"), "chunked");
  EXPECT_EQ(res->body, "data: 0\n\ndata: 1\n\ndata: 2\n\n");
}

TEST(HttpServerTest, StreamEndsWhenTheClientGoes) {
  std::atomic<bool> ended{false};
  std::atomic<int> writes{0};
  auto server = Serve({{"/forever", [&](const HttpRequest&) {
                          HttpResponse out;
                          out.content_type = "text/event-stream";
                          out.stream = [&](HttpStream& s) {
                            std::string event = "data: " + std::string(1000, 'x') + "\n\n";
                            while (s.Write(event)) {
                              ++writes;
                              std::this_thread::sleep_for(1ms);
                            }
                            ended = true;
                          };
                          return out;
                        }}});
  ASSERT_NE(server, nullptr);
  {
    httplib::Client c("127.0.0.1", server->port());
    size_t got = 0;
    // The client reads a little, then hangs up.
    auto res = c.Get("/forever", [&](const char*, size_t n) {
      got += n;
      return got < 10'000;
    });
    EXPECT_FALSE(res);
  }
  // A stream that never noticed would run until the test's timeout.
  while (!ended.load()) std::this_thread::sleep_for(5ms);
  EXPECT_GT(writes.load(), 0);
}

TEST(HttpServerTest, AuthenticationRunsBeforeEveryRouteButNotMetricsUnlessAsked) {
  std::string principal;
  HttpServerOptions options;
  options.authenticate = [](const HttpRequest& r) {
    HttpAuthResult v;
    const std::string* auth = r.Header("authorization");
    if (auth != nullptr && *auth == "Bearer good") {
      v.allowed = true;
      v.principal = "alice";
    } else {
      v.refusal.status = 401;
      v.refusal.headers.push_back({"WWW-Authenticate", "Bearer"});
      v.refusal.body = R"({"error":"who are you?"})";
    }
    return v;
  };
  auto route = [&](const HttpRequest& r) {
    principal = r.principal;
    return HttpResponse{.body = "{}"};
  };
  auto server = Serve({{"/v1/", route}}, options);
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  auto refused = c.Get("/v1/config");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(refused->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(principal, "");  // the route never ran
  auto wrong = c.Get("/v1/config", {{"Authorization", "Bearer bad"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto ok = c.Get("/v1/config", {{"Authorization", "Bearer good"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(principal, "alice");
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);

  options.authenticate_metrics = true;
  auto guarded = Serve({}, options);
  ASSERT_NE(guarded, nullptr);
  httplib::Client g("127.0.0.1", guarded->port());
  auto m = g.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 401);
  auto h = g.Get("/healthz", {{"Authorization", "Bearer good"}});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
}

HttpRequest Req(std::string method, std::map<std::string, std::string> headers,
                std::string path = "/v1/namespaces") {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.headers = std::move(headers);
  return r;
}

TEST(HttpServerTest, BrowserGuardChecksHostOriginAndProof) {
  HttpBrowserGuard g{.enabled = true, .allowed_hosts = {"localhost", "127.0.0.1", "::1", "sluice"}};
  auto refused = [&](const HttpRequest& r, bool forms = false) {
    return !BrowserRefusal(g, r, forms).empty();
  };
  // Hosts: the listed names (any case, a trailing dot), IP literals, no Host at all.
  for (std::string host :
       {"localhost:8181", "LOCALHOST:8181", "localhost.:8181", "localhost", "127.0.0.1:8181",
        "[::1]:8181", "sluice:8181", "10.1.2.3:8181", "[fe80::1]:80"}) {
    EXPECT_FALSE(refused(Req("GET", {{"host", host}}))) << host;
  }
  EXPECT_FALSE(refused(Req("GET", {})));
  for (std::string host :
       {"evil.example:8181", "localhost.evil.example", "127.0.0.1.nip.io:8181", "[::1",
        "localhost:80x", "localhost:", ":8181", "a:b:c", "[]:80", "localhost:1234567"}) {
    EXPECT_TRUE(refused(Req("GET", {{"host", host}}))) << host;
  }
  // Origins: this port's (by any allowed name), none, or refused.
  for (std::string origin :
       {"http://localhost:8181", "https://localhost:8181", "http://127.0.0.1:8181",
        "http://[::1]:8181", "HTTP://LocalHost:8181"}) {
    EXPECT_FALSE(refused(Req(
        "POST",
        {{"host", "localhost:8181"}, {"origin", origin}, {"content-type", "application/json"}})))
        << origin;
  }
  for (std::string origin :
       {"http://localhost:3000", "http://evil.example", "null", "http://evil.example:8181",
        "file://", "chrome-extension://abc", "http://10.0.0.9:8181", "localhost:8181", "http://"}) {
    EXPECT_TRUE(refused(Req("GET", {{"host", "localhost:8181"}, {"origin", origin}}))) << origin;
  }
  // An IP address's own origin is its own; default ports on both sides match.
  EXPECT_FALSE(
      refused(Req("GET", {{"host", "10.0.0.5:8181"}, {"origin", "http://10.0.0.5:8181"}})));
  EXPECT_FALSE(refused(Req("GET", {{"host", "sluice"}, {"origin", "https://sluice"}})));
  EXPECT_FALSE(refused(Req("GET", {{"host", "sluice:443"}, {"origin", "https://sluice"}})));
  EXPECT_TRUE(refused(Req("GET", {{"host", "sluice:443"}, {"origin", "http://sluice"}})));

  // State-changing requests need a proof a cross-site form or no-cors fetch cannot give.
  const std::map<std::string, std::string> h = {{"host", "localhost:8181"}};
  auto with = [&](std::map<std::string, std::string> more) {
    more.insert(h.begin(), h.end());
    return more;
  };
  for (std::string method : {"POST", "PUT", "DELETE", "PATCH"}) {
    EXPECT_TRUE(refused(Req(method, h))) << method;
    EXPECT_TRUE(refused(Req(method, with({{"content-type", "text/plain"}}))));
    EXPECT_TRUE(refused(Req(method, with({{"content-type", "Text/Plain ; charset=UTF-8"}}))));
    EXPECT_TRUE(
        refused(Req(method, with({{"content-type", "application/x-www-form-urlencoded"}}))));
    EXPECT_TRUE(refused(Req(method, with({{"content-type", "multipart/form-data; boundary=x"}}))));
    EXPECT_TRUE(refused(Req(method, with({{"x-requested-with", "x"}}))));
    EXPECT_FALSE(refused(Req(method, with({{"content-type", "application/json"}}))));
    EXPECT_FALSE(refused(Req(method, with({{"x-sluice-request", "1"}}))));
    EXPECT_FALSE(refused(Req(method, with({{"x-client-version", "0.14.0"}}))));
    EXPECT_FALSE(refused(Req(method, with({{"idempotency-key", "k"}}))));
    EXPECT_FALSE(refused(Req(method, with({{"authorization", "Bearer x"}}))));
  }
  for (std::string method : {"GET", "HEAD", "OPTIONS"}) EXPECT_FALSE(refused(Req(method, h)));
  // A login form: no proof needed, but still no other site's Origin.
  EXPECT_FALSE(refused(Req("POST", with({{"content-type", "application/x-www-form-urlencoded"}})),
                       /*forms=*/true));
  EXPECT_TRUE(refused(Req("POST", with({{"origin", "http://evil.example"}})), /*forms=*/true));
  // /healthz is never checked; a guard that is off checks nothing.
  EXPECT_FALSE(refused(Req("GET", {{"host", "evil.example"}}, "/healthz")));
  EXPECT_FALSE(refused(Req("GET", {{"host", "evil.example"}}, "/readyz")));
  HttpBrowserGuard off;
  EXPECT_TRUE(BrowserRefusal(off, Req("POST", {{"host", "evil.example"}}), false).empty());
  // "*": any Host, but an Origin must still be the Host's.
  HttpBrowserGuard any{.enabled = true, .allowed_hosts = {"*"}};
  EXPECT_TRUE(BrowserRefusal(any, Req("GET", {{"host", "evil.example"}}), false).empty());
  EXPECT_FALSE(
      BrowserRefusal(any, Req("GET", {{"host", "a:1"}, {"origin", "http://b:1"}}), false).empty());
}

TEST(HttpServerTest, BrowserGuardRunsBeforeRoutesAndNoCorsIsGranted) {
  int routed = 0;
  HttpServerOptions options;
  options.browser_guard = {.enabled = true, .allowed_hosts = {"localhost", "127.0.0.1", "::1"}};
  options.authenticate = [](const HttpRequest& r) {
    HttpAuthResult v;
    v.allowed = r.Header("authorization") != nullptr;
    v.principal = "alice";
    v.refusal.status = 401;
    return v;
  };
  HttpRoute login{"/v1/oauth/tokens", [&](const HttpRequest& r) {
                    ++routed;
                    EXPECT_EQ(r.principal, "");
                    return HttpResponse{.body = R"({"access_token":"t"})"};
                  }};
  login.needs_login = false;
  login.accepts_forms = true;
  HttpRoute catalog{"/v1/", [&](const HttpRequest&) {
                      ++routed;
                      HttpResponse out{.body = "{}"};
                      out.headers.push_back({"Access-Control-Allow-Origin", "*"});
                      return out;
                    }};
  auto server = Serve({login, catalog}, options);
  ASSERT_NE(server, nullptr);
  httplib::Client c("127.0.0.1", server->port());
  // Another site's form, a foreign Origin, a rebinding name: 403 before any route.
  auto form = c.Post("/v1/namespaces", "x=1", "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 403);
  EXPECT_NE(form->body.find("X-Sluice-Request"), std::string::npos) << form->body;
  EXPECT_EQ(std::count(form->body.begin(), form->body.end(), '\n'), 1);
  auto origin = c.Get("/v1/config", {{"Origin", "http://evil.example"}, {"Authorization", "x"}});
  ASSERT_TRUE(origin);
  EXPECT_EQ(origin->status, 403);
  auto host = c.Get("/v1/config", {{"Host", "evil.example:1234"}, {"Authorization", "x"}});
  ASSERT_TRUE(host);
  EXPECT_EQ(host->status, 403);
  auto metrics = c.Get("/metrics", {{"Host", "evil.example"}});
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 403);
  auto health = c.Get("/healthz", {{"Host", "evil.example"}});
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(routed, 0);
  // The login form needs no login and no proof; the catalog needs both.
  auto token = c.Post("/v1/oauth/tokens", "grant_type=client_credentials",
                      "application/x-www-form-urlencoded");
  ASSERT_TRUE(token);
  EXPECT_EQ(token->status, 200);
  EXPECT_EQ(routed, 1);
  auto json = c.Post("/v1/namespaces", "{}", "application/json");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->status, 401);
  auto ok = c.Post("/v1/namespaces", {{"Authorization", "Bearer t"}}, "{}", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(routed, 2);
  EXPECT_FALSE(ok->has_header("Access-Control-Allow-Origin"));  // dropped
  // A preflight is answered, and grants nothing.
  auto pre = c.Options("/v1/namespaces");
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  for (const auto& [k, v] : pre->headers) EXPECT_FALSE(k.starts_with("Access-Control")) << k;
}

}  // namespace
}  // namespace sluice
