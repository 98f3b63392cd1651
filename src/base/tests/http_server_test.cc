// HttpServer: routes see the request's headers and peer, answer with headers of their own
// or a streamed body, and the authentication hook runs before every route.
#include "base/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

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

}  // namespace
}  // namespace sluice
