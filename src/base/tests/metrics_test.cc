#include "base/metrics.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "base/http_server.h"

namespace sluice {
namespace {

TEST(MetricsTest, RendersPrometheusText) {
  MetricsRegistry r;
  r.GetCounter("x_total", "Things", {{"pipeline", "a\"b"}}).Inc(3);
  r.GetCounter("x_total", "Things", {{"pipeline", "a\"b"}}).Inc();
  r.GetGauge("g", "A gauge").Set(2.5);
  Histogram& h = r.GetHistogram("lat_seconds", "Latency", {}, {0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(5);
  std::string text = r.Render();
  EXPECT_NE(text.find("# TYPE x_total counter\nx_total{pipeline=\"a\\\"b\"} 4\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("g 2.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_count 3\n"), std::string::npos) << text;
  r.RemoveLabeled("pipeline", "a\"b");
  EXPECT_EQ(r.Render().find("x_total{"), std::string::npos);
}

TEST(MetricsTest, ProcessMemoryIsSampled) {
  MetricsRegistry r;
  RegisterProcessMetrics(r);
  std::string text = r.Render();
  EXPECT_NE(text.find("sluice_process_resident_memory_bytes "), std::string::npos);
  EXPECT_EQ(text.find("sluice_process_resident_memory_bytes 0\n"), std::string::npos) << text;
}

TEST(HttpServerTest, ServesMetricsAndHealth) {
  MetricsRegistry r;
  r.GetCounter("hits_total", "Hits").Inc(7);
  std::string problem;
  auto server = HttpServer::Start("127.0.0.1:0", r, [&] { return problem; });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("hits_total 7"), std::string::npos);
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  problem = "pipeline p: sink down";
  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_NE(res->body.find("sink down"), std::string::npos);
  EXPECT_EQ(client.Get("/nothing")->status, 404);
}

TEST(HttpServerTest, BadAddressesAreErrors) {
  MetricsRegistry r;
  EXPECT_FALSE(HttpServer::Start("nocolon", r, nullptr).ok());
  EXPECT_FALSE(HttpServer::Start("127.0.0.1:99999", r, nullptr).ok());
  EXPECT_FALSE(HttpServer::Start("127.0.0.1:", r, nullptr).ok());
  auto first = HttpServer::Start("127.0.0.1:0", r, nullptr);
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(HttpServer::Start("127.0.0.1:" + std::to_string((*first)->port()), r, nullptr).ok());
}

}  // namespace
}  // namespace sluice
