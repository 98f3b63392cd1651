// Broker over real sockets on 127.0.0.1: ApiVersions (and its v0 fallback), Metadata,
// CreateTopics, DeleteTopics, DescribeCluster, restart on the same data directory, and
// the requests that close a connection.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "broker/broker.h"
#include "broker/handlers/handlers.h"
#include "broker/server.h"
#include "broker/tests/broker_test_util.h"
#include "kafka/protocol/header.h"

namespace sluice::broker {
namespace broker_api_test {
namespace {

using kafka::ApiKey;
using kafka::ErrorCode;
using testing::Bytes;
using testing::Client;

// Every API the decoder accepts (and ApiVersions advertises) has a handler in the table.
TEST(DispatchTableTest, EverySupportedApiHasAHandler) {
  for (const kafka::ApiVersionRange& api : kafka::SupportedApis()) {
    EXPECT_NE(handlers::HandlerFor(static_cast<int16_t>(api.key)), nullptr)
        << kafka::ApiName(api.key);
  }
  EXPECT_EQ(handlers::HandlerFor(-1), nullptr);
  EXPECT_EQ(handlers::HandlerFor(1000), nullptr);
}

class BrokerApiTest : public testing::BrokerFixture {
 protected:
  kafka::MetadataResponse Metadata(Client& c, int16_t version,
                                   std::optional<std::vector<std::string>> names) {
    kafka::MetadataRequest req;
    if (names) {
      req.topics.emplace();
      for (const auto& n : *names) req.topics->push_back({{}, n, {}});
    }
    return c.Call<kafka::MetadataResponse>(ApiKey::kMetadata, version, req);
  }
};

void ExpectFullApiList(const std::vector<kafka::ApiVersionsResponse::ApiVersion>& got) {
  auto apis = kafka::SupportedApis();
  ASSERT_EQ(got.size(), apis.size());
  for (size_t i = 0; i < apis.size(); ++i) {
    EXPECT_EQ(got[i].api_key, static_cast<int16_t>(apis[i].key));
    // Produce lists v0 for librdkafka < 2.8's codec check; v0-2 requests are refused.
    EXPECT_EQ(got[i].min_version, apis[i].key == ApiKey::kProduce ? 0 : apis[i].min);
    EXPECT_EQ(got[i].max_version, apis[i].max);
  }
}

TEST_F(BrokerApiTest, ApiVersionsV0AndV3ListEverySupportedApi) {
  Client c(port());
  for (int16_t v : {0, 3}) {
    auto resp =
        c.Call<kafka::ApiVersionsResponse>(ApiKey::kApiVersions, v, kafka::ApiVersionsRequest{});
    EXPECT_EQ(resp.error_code, ErrorCode::kNone);
    EXPECT_EQ(resp.throttle_time_ms, 0);
    ExpectFullApiList(resp.api_keys);
  }
}

TEST_F(BrokerApiTest, ApiVersionsV3ResponseHeaderHasNoTags) {
  Client c(port());
  kafka::ApiVersionsRequest req;
  req.client_software_name = "test";
  req.client_software_version = "1";
  ASSERT_TRUE(c.SendRequest(ApiKey::kApiVersions, 3, 42, req));
  auto frame = c.ReadFrame();
  ASSERT_TRUE(frame);
  // correlation id, then the body at once: error code 0, compact array length.
  ASSERT_GE(frame->size(), 7u);
  EXPECT_EQ((Bytes{frame->begin(), frame->begin() + 6}), (Bytes{0, 0, 0, 42, 0, 0}));
  EXPECT_EQ((*frame)[6], kafka::SupportedApis().size() + 1);
}

TEST_F(BrokerApiTest, ApiVersionsUnknownVersionGetsV0Fallback) {
  Client c(port());
  ASSERT_TRUE(c.SendRequest(ApiKey::kApiVersions, 99, 7, kafka::ApiVersionsRequest{}));
  auto frame = c.ReadFrame();
  ASSERT_TRUE(frame);
  kafka::Reader r(*frame);
  EXPECT_EQ(r.Int32("correlation id"), 7);
  kafka::ApiVersionsResponse resp;
  ASSERT_TRUE(resp.Decode(r, 0).ok());
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_EQ(resp.error_code, ErrorCode::kUnsupportedVersion);
  ExpectFullApiList(resp.api_keys);
  // The connection stays usable.
  auto again =
      c.Call<kafka::ApiVersionsResponse>(ApiKey::kApiVersions, 3, kafka::ApiVersionsRequest{});
  EXPECT_EQ(again.error_code, ErrorCode::kNone);
}

TEST_F(BrokerApiTest, MetadataV1AllTopicsAndUnknownTopic) {
  Client c(port());
  ASSERT_EQ(Create(c, "alpha", 3).topics.at(0).error_code, ErrorCode::kNone);
  ASSERT_EQ(Create(c, "beta", -1).topics.at(0).error_code, ErrorCode::kNone);

  auto all = Metadata(c, 1, std::nullopt);
  ASSERT_EQ(all.brokers.size(), 1u);
  EXPECT_EQ(all.brokers[0].node_id, 1);
  EXPECT_EQ(all.brokers[0].host, "127.0.0.1");
  EXPECT_EQ(all.brokers[0].port, port());
  EXPECT_EQ(all.controller_id, 1);
  ASSERT_EQ(all.topics.size(), 2u);
  EXPECT_EQ(all.topics[0].name, "alpha");
  EXPECT_EQ(all.topics[0].error_code, ErrorCode::kNone);
  ASSERT_EQ(all.topics[0].partitions.size(), 3u);
  for (int32_t p = 0; p < 3; ++p) {
    const auto& part = all.topics[0].partitions[static_cast<size_t>(p)];
    EXPECT_EQ(part.partition_index, p);
    EXPECT_EQ(part.leader_id, 1);
    EXPECT_EQ(part.replica_nodes, std::vector<int32_t>{1});
    EXPECT_EQ(part.isr_nodes, std::vector<int32_t>{1});
  }
  EXPECT_EQ(all.topics[1].name, "beta");
  EXPECT_EQ(all.topics[1].partitions.size(), 1u);

  auto v0 = Metadata(c, 0, std::vector<std::string>{});  // v0: empty = all
  EXPECT_EQ(v0.topics.size(), 2u);

  auto one = Metadata(c, 1, std::vector<std::string>{"nope"});
  ASSERT_EQ(one.topics.size(), 1u);
  EXPECT_EQ(one.topics[0].name, "nope");
  EXPECT_EQ(one.topics[0].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_TRUE(one.topics[0].partitions.empty());
  // No automatic creation.
  EXPECT_EQ(Metadata(c, 1, std::nullopt).topics.size(), 2u);
}

TEST_F(BrokerApiTest, MetadataV12HasTopicIdsAndClusterId) {
  Client c(port());
  auto created = Create(c, "ids", 2);
  ASSERT_EQ(created.topics.at(0).error_code, ErrorCode::kNone);
  kafka::Uuid id = created.topics[0].topic_id;
  EXPECT_FALSE(id.IsZero());
  EXPECT_EQ(created.topics[0].num_partitions, 2);
  EXPECT_EQ(created.topics[0].replication_factor, 1);

  auto md = Metadata(c, 12, std::vector<std::string>{"ids"});
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].topic_id, id);
  EXPECT_EQ(md.topics[0].partitions.size(), 2u);
  EXPECT_EQ(md.topics[0].partitions[0].leader_epoch, 0);
  EXPECT_EQ(md.cluster_id, broker_->cluster_id());
  EXPECT_EQ(broker_->cluster_id().size(), 22u);

  // By id (v10+), with a null name.
  kafka::MetadataRequest by_id;
  by_id.topics.emplace();
  by_id.topics->push_back({id, std::nullopt, {}});
  auto md2 = c.Call<kafka::MetadataResponse>(ApiKey::kMetadata, 12, by_id);
  ASSERT_EQ(md2.topics.size(), 1u);
  EXPECT_EQ(md2.topics[0].name, "ids");
}

TEST_F(BrokerApiTest, CreateTopicsErrors) {
  Client c(port());
  ASSERT_EQ(Create(c, "dup", 1).topics.at(0).error_code, ErrorCode::kNone);
  auto again = Create(c, "dup", 1);
  EXPECT_EQ(again.topics.at(0).error_code, ErrorCode::kTopicAlreadyExists);
  EXPECT_TRUE(again.topics[0].error_message.has_value());

  EXPECT_EQ(Create(c, "bad/name", 1).topics.at(0).error_code, ErrorCode::kInvalidTopicException);
  EXPECT_EQ(Create(c, "rf3", 1, 3).topics.at(0).error_code, ErrorCode::kInvalidReplicationFactor);
  EXPECT_EQ(Create(c, "zero", 0).topics.at(0).error_code, ErrorCode::kInvalidPartitions);

  kafka::CreateTopicsRequest assigned;
  assigned.topics.push_back({"assigned", -1, -1, {{0, {1}, {}}}, {}, {}});
  auto a = c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 4, assigned);
  EXPECT_EQ(a.topics.at(0).error_code, ErrorCode::kInvalidRequest);
  EXPECT_TRUE(a.topics[0].error_message.has_value());

  kafka::CreateTopicsRequest validate;
  validate.validate_only = true;
  validate.topics.push_back({"dry", 4, 1, {}, {}, {}});
  auto v = c.Call<kafka::CreateTopicsResponse>(ApiKey::kCreateTopics, 5, validate);
  EXPECT_EQ(v.topics.at(0).error_code, ErrorCode::kNone);
  EXPECT_EQ(v.topics[0].num_partitions, 4);

  auto md = Metadata(c, 1, std::nullopt);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].name, "dup");
  EXPECT_EQ(broker_->open_log_count(), 1u);
}

TEST_F(BrokerApiTest, CreateTopicsMakesPartitionDirectories) {
  Client c(port());
  ASSERT_EQ(Create(c, "dirs", 2, 1, 0).topics.at(0).error_code, ErrorCode::kNone);
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "dirs-0"));
  EXPECT_TRUE(std::filesystem::is_directory(dir_ / "dirs-1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "dirs-2"));
  EXPECT_EQ(broker_->open_log_count(), 2u);
}

TEST_F(BrokerApiTest, DeleteTopicsByNameAndById) {
  Client c(port());
  ASSERT_EQ(Create(c, "gone", 2).topics.at(0).error_code, ErrorCode::kNone);
  auto kept = Create(c, "byid", 1);
  ASSERT_EQ(kept.topics.at(0).error_code, ErrorCode::kNone);

  kafka::DeleteTopicsRequest by_name;
  by_name.topic_names = {"gone", "never"};
  auto del = c.Call<kafka::DeleteTopicsResponse>(ApiKey::kDeleteTopics, 4, by_name);
  ASSERT_EQ(del.responses.size(), 2u);
  EXPECT_EQ(del.responses[0].name, "gone");
  EXPECT_EQ(del.responses[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(del.responses[1].error_code, ErrorCode::kUnknownTopicOrPartition);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "gone-0"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "gone-0-delete"));

  auto md = Metadata(c, 1, std::nullopt);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].name, "byid");

  kafka::DeleteTopicsRequest by_id;
  by_id.topics.push_back({std::nullopt, kept.topics[0].topic_id, {}});
  by_id.topics.push_back({std::nullopt, kafka::Uuid{1, 2}, {}});
  auto del2 = c.Call<kafka::DeleteTopicsResponse>(ApiKey::kDeleteTopics, 6, by_id);
  ASSERT_EQ(del2.responses.size(), 2u);
  EXPECT_EQ(del2.responses[0].error_code, ErrorCode::kNone);
  EXPECT_EQ(del2.responses[0].name, "byid");
  EXPECT_EQ(del2.responses[1].error_code, ErrorCode::kUnknownTopicId);
  EXPECT_TRUE(Metadata(c, 1, std::nullopt).topics.empty());
  EXPECT_EQ(broker_->open_log_count(), 0u);

  // A re-created topic starts afresh.
  auto again = Create(c, "gone", 1);
  EXPECT_EQ(again.topics.at(0).error_code, ErrorCode::kNone);
}

TEST_F(BrokerApiTest, DescribeCluster) {
  Client c(port());
  auto resp = c.Call<kafka::DescribeClusterResponse>(ApiKey::kDescribeCluster, 1,
                                                     kafka::DescribeClusterRequest{});
  EXPECT_EQ(resp.error_code, ErrorCode::kNone);
  EXPECT_EQ(resp.cluster_id, broker_->cluster_id());
  EXPECT_EQ(resp.controller_id, 1);
  ASSERT_EQ(resp.brokers.size(), 1u);
  EXPECT_EQ(resp.brokers[0].broker_id, 1);
  EXPECT_EQ(resp.brokers[0].port, port());
}

TEST_F(BrokerApiTest, RestartKeepsTopicsIdsAndClusterId) {
  kafka::Uuid id;
  std::string cluster;
  {
    Client c(port());
    auto created = Create(c, "durable", 3);
    ASSERT_EQ(created.topics.at(0).error_code, ErrorCode::kNone);
    id = created.topics[0].topic_id;
    cluster = broker_->cluster_id();
  }
  Stop();
  Start();
  EXPECT_EQ(broker_->cluster_id(), cluster);
  EXPECT_EQ(broker_->open_log_count(), 3u);
  Client c(port());
  auto md = Metadata(c, 12, std::nullopt);
  ASSERT_EQ(md.topics.size(), 1u);
  EXPECT_EQ(md.topics[0].name, "durable");
  EXPECT_EQ(md.topics[0].topic_id, id);
  EXPECT_EQ(md.topics[0].partitions.size(), 3u);
  EXPECT_EQ(md.cluster_id, cluster);
}

TEST_F(BrokerApiTest, UnsupportedProduceVersionClosesConnection) {
  Client c(port());
  kafka::ProduceRequest req;
  ASSERT_TRUE(c.SendRequest(ApiKey::kProduce, 0, 1, req));
  EXPECT_TRUE(c.SeesClose());
}

TEST_F(BrokerApiTest, GarbageFrameClosesOnlyThatConnection) {
  Client good(port());
  Client bad(port());
  ASSERT_TRUE(bad.SendFrame(Bytes{0x00, 0x12, 0x00}));  // a header cut short
  EXPECT_TRUE(bad.SeesClose());
  Client unknown(port());  // API key 32512: a whole header, an API nobody has
  ASSERT_TRUE(unknown.SendFrame(Bytes{0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff}));
  EXPECT_TRUE(unknown.SeesClose());
  auto resp =
      good.Call<kafka::ApiVersionsResponse>(ApiKey::kApiVersions, 3, kafka::ApiVersionsRequest{});
  EXPECT_EQ(resp.error_code, ErrorCode::kNone);
}

}  // namespace
}  // namespace broker_api_test
}  // namespace sluice::broker
