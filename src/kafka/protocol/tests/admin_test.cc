// Tests of the admin and miscellaneous messages (messages/admin.h, the SCRAM credential
// APIs of messages/users.h, the ACL APIs of messages/acls.h and the client quota APIs of
// messages/quotas.h): for every version the codec knows of every request and response,
// golden bytes transcribed from Kafka's JSON definitions are compared with Encode, and
// decoded back to the same struct; then every message is fed truncated and corrupted bytes.
#include "kafka/protocol/messages/admin.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "kafka/protocol/api.h"
#include "kafka/protocol/messages/acls.h"
#include "kafka/protocol/messages/quotas.h"
#include "kafka/protocol/messages/users.h"
#include "kafka/protocol/tests/golden.h"

// Designated initializers leave the fields they do not name at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace sluice::kafka {
namespace admin_test {
namespace {

using std::nullopt;
using testing::Golden;

constexpr Uuid kId1{0x0102030405060708, 0x1112131415161718};
constexpr Uuid kId2{0xa1a2a3a4a5a6a7a8, 0xb1b2b3b4b5b6b7b8};
Golden& Id1(Golden& g) { return g.uuid(kId1.hi, kId1.lo); }
Golden& Id2(Golden& g) { return g.uuid(kId2.hi, kId2.lo); }

bool Flexible(ApiKey key, int16_t v) { return IsFlexible(*FindApi(key), v); }

// ------------------------------------------------------------------ CreateTopics

CreateTopicsRequest MakeCreateTopicsRequest(int16_t v) {
  CreateTopicsRequest m;
  m.topics = {
      {.name = "orders",
       .num_partitions = 3,
       .replication_factor = 2,
       .assignments = {{.partition_index = 0, .broker_ids = {1, 2}},
                       {.partition_index = 1, .broker_ids = {2, 3}}},
       .configs = {{.name = "cleanup.policy", .value = "compact"},
                   {.name = "retention.ms", .value = nullopt}}},
      {.name = "events", .num_partitions = -1, .replication_factor = -1},
  };
  m.timeout_ms = 30000;
  if (v >= 1) m.validate_only = true;
  return m;
}

std::vector<uint8_t> GoldenCreateTopicsRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kCreateTopics, v);
  Golden g;
  g.a(f, 2);
  g.s(f, "orders").i32(3).i16(2);
  g.a(f, 2).i32(0).a(f, 2).i32(1).i32(2).t(f).i32(1).a(f, 2).i32(2).i32(3).t(f);
  g.a(f, 2).s(f, "cleanup.policy").s(f, "compact").t(f).s(f, "retention.ms").ns(f).t(f);
  g.t(f);
  g.s(f, "events").i32(-1).i16(-1).a(f, 0).a(f, 0).t(f);
  g.i32(30000);
  if (v >= 1) g.boolean(true);
  g.t(f);
  return g.take();
}

CreateTopicsResponse MakeCreateTopicsResponse(int16_t v) {
  CreateTopicsResponse m;
  if (v >= 2) m.throttle_time_ms = 100;
  CreateTopicsResponse::Topic t0{.name = "orders", .error_code = ErrorCode::kTopicAlreadyExists};
  CreateTopicsResponse::Topic t1{.name = "events"};
  if (v >= 7) {
    t0.topic_id = kId1;
    t1.topic_id = kId2;
  }
  if (v >= 1) t0.error_message = "exists";
  if (v >= 5) {
    t0.topic_config_error_code = ErrorCode::kInvalidConfig;
    t0.num_partitions = 3;
    t0.replication_factor = 2;
    t0.configs = std::vector<CreateTopicsResponse::Config>{
        {.name = "cleanup.policy", .value = "compact", .read_only = true, .config_source = 5},
        {.name = "secret", .value = nullopt, .config_source = 1, .is_sensitive = true},
    };
    t1.num_partitions = 1;
    t1.replication_factor = 1;
    t1.configs = nullopt;
  }
  m.topics = {t0, t1};
  return m;
}

std::vector<uint8_t> GoldenCreateTopicsResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kCreateTopics, v);
  Golden g;
  if (v >= 2) g.i32(100);
  g.a(f, 2);
  g.s(f, "orders");
  if (v >= 7) Id1(g);
  g.i16(36);
  if (v >= 1) g.s(f, "exists");
  if (v >= 5) {
    g.i32(3).i16(2).a(f, 2);
    g.s(f, "cleanup.policy").s(f, "compact").boolean(true).i8(5).boolean(false).t(f);
    g.s(f, "secret").ns(f).boolean(false).i8(1).boolean(true).t(f);
  }
  if (f) g.uvarint(1).uvarint(0).uvarint(2).i16(40);  // tag 0: topic_config_error_code
  g.s(f, "events");
  if (v >= 7) Id2(g);
  g.i16(0);
  if (v >= 1) g.ns(f);
  if (v >= 5) g.i32(1).i16(1).a(f, -1);
  g.t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ DeleteTopics

DeleteTopicsRequest MakeDeleteTopicsRequest(int16_t v) {
  DeleteTopicsRequest m;
  if (v >= 6) {
    m.topics = {{.name = "orders", .topic_id = kId1}, {.name = nullopt, .topic_id = kId2}};
  } else {
    m.topic_names = {"orders", "events"};
  }
  m.timeout_ms = 15000;
  return m;
}

std::vector<uint8_t> GoldenDeleteTopicsRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kDeleteTopics, v);
  Golden g;
  if (v >= 6) {
    g.a(f, 2).s(f, "orders");
    Id1(g).t(f).ns(f);
    Id2(g).t(f);
  } else {
    g.a(f, 2).s(f, "orders").s(f, "events");
  }
  g.i32(15000).t(f);
  return g.take();
}

DeleteTopicsResponse MakeDeleteTopicsResponse(int16_t v) {
  DeleteTopicsResponse m;
  if (v >= 1) m.throttle_time_ms = 50;
  DeleteTopicsResponse::Result r0{.name = "orders",
                                  .error_code = ErrorCode::kUnknownTopicOrPartition};
  DeleteTopicsResponse::Result r1{.name = "events", .error_code = ErrorCode::kUnknownTopicId};
  if (v >= 5) r0.error_message = "unknown";
  if (v >= 6) {
    r0.topic_id = kId1;
    r1.name = nullopt;
    r1.topic_id = kId2;
  }
  m.responses = {r0, r1};
  return m;
}

std::vector<uint8_t> GoldenDeleteTopicsResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kDeleteTopics, v);
  Golden g;
  if (v >= 1) g.i32(50);
  g.a(f, 2);
  g.s(f, "orders");
  if (v >= 6) Id1(g);
  g.i16(3);
  if (v >= 5) g.s(f, "unknown");
  g.t(f);
  if (v >= 6) {
    g.ns(f);
    Id2(g);
  } else {
    g.s(f, "events");
  }
  g.i16(100);
  if (v >= 5) g.ns(f);
  g.t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ CreatePartitions

CreatePartitionsRequest MakeCreatePartitionsRequest(int16_t v) {
  CreatePartitionsRequest m;
  m.topics = {
      {.name = "orders",
       .count = 6,
       .assignments = std::vector<CreatePartitionsRequest::Assignment>{{.broker_ids = {1, 2}},
                                                                       {.broker_ids = {2, 3}}}},
      {.name = "events", .count = 4, .assignments = nullopt},
  };
  m.timeout_ms = 5000;
  m.validate_only = true;
  return m;
}

std::vector<uint8_t> GoldenCreatePartitionsRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kCreatePartitions, v);
  Golden g;
  g.a(f, 2);
  g.s(f, "orders").i32(6).a(f, 2).a(f, 2).i32(1).i32(2).t(f).a(f, 2).i32(2).i32(3).t(f).t(f);
  g.s(f, "events").i32(4).a(f, -1).t(f);
  g.i32(5000).boolean(true).t(f);
  return g.take();
}

CreatePartitionsResponse MakeCreatePartitionsResponse(int16_t v) {
  CreatePartitionsResponse m;
  m.throttle_time_ms = 10;
  m.results = {
      {.name = "orders", .error_code = ErrorCode::kInvalidPartitions, .error_message = "too few"},
      {.name = "events", .error_code = ErrorCode::kPolicyViolation, .error_message = nullopt},
  };
  return m;
}

std::vector<uint8_t> GoldenCreatePartitionsResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kCreatePartitions, v);
  Golden g;
  g.i32(10).a(f, 2);
  g.s(f, "orders").i16(37).s(f, "too few").t(f);
  g.s(f, "events").i16(44).ns(f).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ DescribeConfigs

DescribeConfigsRequest MakeDescribeConfigsRequest(int16_t v) {
  DescribeConfigsRequest m;
  m.resources = {
      {.resource_type = 2,
       .resource_name = "orders",
       .configuration_keys = std::vector<std::string>{"retention.ms", "cleanup.policy"}},
      {.resource_type = 4, .resource_name = "1", .configuration_keys = nullopt},
  };
  if (v >= 1) m.include_synonyms = true;
  if (v >= 3) m.include_documentation = true;
  return m;
}

std::vector<uint8_t> GoldenDescribeConfigsRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kDescribeConfigs, v);
  Golden g;
  g.a(f, 2);
  g.i8(2).s(f, "orders").a(f, 2).s(f, "retention.ms").s(f, "cleanup.policy").t(f);
  g.i8(4).s(f, "1").a(f, -1).t(f);
  if (v >= 1) g.boolean(true);
  if (v >= 3) g.boolean(true);
  g.t(f);
  return g.take();
}

DescribeConfigsResponse MakeDescribeConfigsResponse(int16_t v) {
  using M = DescribeConfigsResponse;
  M::Config c0{.name = "retention.ms", .value = "1000", .read_only = true};
  M::Config c1{.name = "password", .value = nullopt, .is_sensitive = true};
  if (v == 0) c0.is_default = true;
  if (v >= 1) {
    c0.config_source = 1;
    c1.config_source = 4;
    c0.synonyms = {{.name = "log.retention.ms", .value = "1000", .source = 4},
                   {.name = "log.retention.hours", .value = nullopt, .source = 5}};
  }
  if (v >= 3) {
    c0.config_type = 5;
    c0.documentation = "How long";
    c1.config_type = 9;
  }
  M m;
  m.throttle_time_ms = 20;
  m.results = {
      {.error_code = ErrorCode::kUnknownTopicOrPartition,
       .error_message = "oops",
       .resource_type = 2,
       .resource_name = "orders",
       .configs = {c0, c1}},
      {.error_code = ErrorCode::kInvalidConfig,
       .error_message = nullopt,
       .resource_type = 4,
       .resource_name = "1"},
  };
  return m;
}

std::vector<uint8_t> GoldenDescribeConfigsResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kDescribeConfigs, v);
  Golden g;
  g.i32(20).a(f, 2);
  g.i16(3).s(f, "oops").i8(2).s(f, "orders").a(f, 2);
  // retention.ms
  g.s(f, "retention.ms").s(f, "1000").boolean(true);
  if (v == 0) g.boolean(true);
  if (v >= 1) g.i8(1);
  g.boolean(false);
  if (v >= 1) {
    g.a(f, 2).s(f, "log.retention.ms").s(f, "1000").i8(4).t(f);
    g.s(f, "log.retention.hours").ns(f).i8(5).t(f);
  }
  if (v >= 3) g.i8(5).s(f, "How long");
  g.t(f);
  // password
  g.s(f, "password").ns(f).boolean(false);
  if (v == 0) g.boolean(false);
  if (v >= 1) g.i8(4);
  g.boolean(true);
  if (v >= 1) g.a(f, 0);
  if (v >= 3) g.i8(9).ns(f);
  g.t(f);
  g.t(f);
  g.i16(40).ns(f).i8(4).s(f, "1").a(f, 0).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ AlterConfigs

AlterConfigsRequest MakeAlterConfigsRequest(int16_t v) {
  AlterConfigsRequest m;
  m.resources = {
      {.resource_type = 2,
       .resource_name = "orders",
       .configs = {{.name = "retention.ms", .value = "1000"},
                   {.name = "cleanup.policy", .value = nullopt}}},
      {.resource_type = 4, .resource_name = "1"},
  };
  m.validate_only = true;
  return m;
}

std::vector<uint8_t> GoldenAlterConfigsRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kAlterConfigs, v);
  Golden g;
  g.a(f, 2);
  g.i8(2)
      .s(f, "orders")
      .a(f, 2)
      .s(f, "retention.ms")
      .s(f, "1000")
      .t(f)
      .s(f, "cleanup.policy")
      .ns(f)
      .t(f)
      .t(f);
  g.i8(4).s(f, "1").a(f, 0).t(f);
  g.boolean(true).t(f);
  return g.take();
}

std::vector<AlterConfigsResourceResponse> MakeAlterConfigsResults() {
  return {
      {.error_code = ErrorCode::kInvalidConfig,
       .error_message = "bad",
       .resource_type = 2,
       .resource_name = "orders"},
      {.error_code = ErrorCode::kPolicyViolation,
       .error_message = nullopt,
       .resource_type = 4,
       .resource_name = "1"},
  };
}

Golden& GoldenAlterConfigsResults(Golden& g, bool f) {
  g.a(f, 2);
  g.i16(40).s(f, "bad").i8(2).s(f, "orders").t(f);
  g.i16(44).ns(f).i8(4).s(f, "1").t(f);
  return g;
}

AlterConfigsResponse MakeAlterConfigsResponse(int16_t v) {
  AlterConfigsResponse m;
  m.throttle_time_ms = 30;
  m.responses = MakeAlterConfigsResults();
  return m;
}

std::vector<uint8_t> GoldenAlterConfigsResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kAlterConfigs, v);
  Golden g;
  g.i32(30);
  GoldenAlterConfigsResults(g, f).t(f);
  return g.take();
}

// ------------------------------------------------------------------ IncrementalAlterConfigs

IncrementalAlterConfigsRequest MakeIncrementalAlterConfigsRequest(int16_t v) {
  IncrementalAlterConfigsRequest m;
  m.resources = {
      {.resource_type = 2,
       .resource_name = "orders",
       .configs = {{.name = "retention.ms", .config_operation = 3, .value = "1000"},
                   {.name = "cleanup.policy", .config_operation = 1, .value = nullopt}}},
      {.resource_type = 4, .resource_name = "1"},
  };
  m.validate_only = true;
  return m;
}

std::vector<uint8_t> GoldenIncrementalAlterConfigsRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kIncrementalAlterConfigs, v);
  Golden g;
  g.a(f, 2);
  g.i8(2).s(f, "orders").a(f, 2);
  g.s(f, "retention.ms").i8(3).s(f, "1000").t(f);
  g.s(f, "cleanup.policy").i8(1).ns(f).t(f);
  g.t(f);
  g.i8(4).s(f, "1").a(f, 0).t(f);
  g.boolean(true).t(f);
  return g.take();
}

IncrementalAlterConfigsResponse MakeIncrementalAlterConfigsResponse(int16_t v) {
  IncrementalAlterConfigsResponse m;
  m.throttle_time_ms = 30;
  m.responses = MakeAlterConfigsResults();
  return m;
}

std::vector<uint8_t> GoldenIncrementalAlterConfigsResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kIncrementalAlterConfigs, v);
  Golden g;
  g.i32(30);
  GoldenAlterConfigsResults(g, f).t(f);
  return g.take();
}

// ------------------------------------------------------------------ InitProducerId

InitProducerIdRequest MakeInitProducerIdRequest(int16_t v) {
  InitProducerIdRequest m;
  if (v % 2 == 1) m.transactional_id = "txn-1";  // null in even versions
  m.transaction_timeout_ms = 60000;
  if (v >= 3) {
    m.producer_id = 1234;
    m.producer_epoch = 7;
  }
  return m;
}

std::vector<uint8_t> GoldenInitProducerIdRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kInitProducerId, v);
  Golden g;
  if (v % 2 == 1) {
    g.s(f, "txn-1");
  } else {
    g.ns(f);
  }
  g.i32(60000);
  if (v >= 3) g.i64(1234).i16(7);
  g.t(f);
  return g.take();
}

InitProducerIdResponse MakeInitProducerIdResponse(int16_t v) {
  return {.throttle_time_ms = 5,
          .error_code = ErrorCode::kConcurrentTransactions,
          .producer_id = 1234,
          .producer_epoch = 3};
}

std::vector<uint8_t> GoldenInitProducerIdResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kInitProducerId, v);
  return Golden().i32(5).i16(51).i64(1234).i16(3).t(f).take();
}

// ------------------------------------------------------------------ DeleteRecords

DeleteRecordsRequest MakeDeleteRecordsRequest(int16_t v) {
  DeleteRecordsRequest m;
  m.topics = {
      {.name = "orders",
       .partitions = {{.partition_index = 0, .offset = 100},
                      {.partition_index = 1, .offset = 200}}},
      {.name = "events", .partitions = {{.partition_index = 2, .offset = -1}}},
  };
  m.timeout_ms = 1000;
  return m;
}

std::vector<uint8_t> GoldenDeleteRecordsRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kDeleteRecords, v);
  Golden g;
  g.a(f, 2);
  g.s(f, "orders").a(f, 2).i32(0).i64(100).t(f).i32(1).i64(200).t(f).t(f);
  g.s(f, "events").a(f, 1).i32(2).i64(-1).t(f).t(f);
  g.i32(1000).t(f);
  return g.take();
}

DeleteRecordsResponse MakeDeleteRecordsResponse(int16_t v) {
  DeleteRecordsResponse m;
  m.throttle_time_ms = 7;
  m.topics = {
      {.name = "orders",
       .partitions = {{.partition_index = 0, .low_watermark = 100},
                      {.partition_index = 1,
                       .low_watermark = -1,
                       .error_code = ErrorCode::kOffsetOutOfRange}}},
      {.name = "events"},
  };
  return m;
}

std::vector<uint8_t> GoldenDeleteRecordsResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kDeleteRecords, v);
  Golden g;
  g.i32(7).a(f, 2);
  g.s(f, "orders").a(f, 2).i32(0).i64(100).i16(0).t(f).i32(1).i64(-1).i16(1).t(f).t(f);
  g.s(f, "events").a(f, 0).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ OffsetForLeaderEpoch

OffsetForLeaderEpochRequest MakeOffsetForLeaderEpochRequest(int16_t v) {
  OffsetForLeaderEpochRequest m;
  if (v >= 3) m.replica_id = -1;
  OffsetForLeaderEpochRequest::Partition p0{.partition = 0, .leader_epoch = 4};
  OffsetForLeaderEpochRequest::Partition p1{.partition = 1, .leader_epoch = 3};
  if (v >= 2) p0.current_leader_epoch = p1.current_leader_epoch = 5;
  m.topics = {{.topic = "orders", .partitions = {p0, p1}}, {.topic = "events"}};
  return m;
}

std::vector<uint8_t> GoldenOffsetForLeaderEpochRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kOffsetForLeaderEpoch, v);
  Golden g;
  if (v >= 3) g.i32(-1);
  g.a(f, 2).s(f, "orders").a(f, 2);
  g.i32(0);
  if (v >= 2) g.i32(5);
  g.i32(4).t(f);
  g.i32(1);
  if (v >= 2) g.i32(5);
  g.i32(3).t(f);
  g.t(f);
  g.s(f, "events").a(f, 0).t(f);
  g.t(f);
  return g.take();
}

OffsetForLeaderEpochResponse MakeOffsetForLeaderEpochResponse(int16_t v) {
  OffsetForLeaderEpochResponse m;
  if (v >= 2) m.throttle_time_ms = 9;
  OffsetForLeaderEpochResponse::Partition p0{.partition = 0, .end_offset = 500};
  OffsetForLeaderEpochResponse::Partition p1{.error_code = ErrorCode::kFencedLeaderEpoch,
                                             .partition = 1};
  if (v >= 1) p0.leader_epoch = 4;
  m.topics = {{.topic = "orders", .partitions = {p0, p1}}, {.topic = "events"}};
  return m;
}

std::vector<uint8_t> GoldenOffsetForLeaderEpochResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kOffsetForLeaderEpoch, v);
  Golden g;
  if (v >= 2) g.i32(9);
  g.a(f, 2).s(f, "orders").a(f, 2);
  g.i16(0).i32(0);
  if (v >= 1) g.i32(4);
  g.i64(500).t(f);
  g.i16(74).i32(1);
  if (v >= 1) g.i32(-1);
  g.i64(-1).t(f);
  g.t(f);
  g.s(f, "events").a(f, 0).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ DescribeCluster

DescribeClusterRequest MakeDescribeClusterRequest(int16_t v) {
  DescribeClusterRequest m;
  m.include_cluster_authorized_operations = true;
  if (v >= 1) m.endpoint_type = 2;
  return m;
}

std::vector<uint8_t> GoldenDescribeClusterRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kDescribeCluster, v);
  Golden g;
  g.boolean(true);
  if (v >= 1) g.i8(2);
  g.t(f);
  return g.take();
}

DescribeClusterResponse MakeDescribeClusterResponse(int16_t v) {
  DescribeClusterResponse m;
  m.throttle_time_ms = 11;
  m.error_code = ErrorCode::kClusterAuthorizationFailed;
  if (v % 2 == 0) m.error_message = "denied";  // null in odd versions
  if (v >= 1) m.endpoint_type = 2;
  m.cluster_id = "sluice-cluster";
  m.controller_id = 1;
  m.brokers = {{.broker_id = 1, .host = "localhost", .port = 9092, .rack = "rack-a"},
               {.broker_id = 2, .host = "host2", .port = 9093, .rack = nullopt}};
  m.cluster_authorized_operations = 0x0f;
  return m;
}

std::vector<uint8_t> GoldenDescribeClusterResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kDescribeCluster, v);
  Golden g;
  g.i32(11).i16(31);
  if (v % 2 == 0) {
    g.s(f, "denied");
  } else {
    g.ns(f);
  }
  if (v >= 1) g.i8(2);
  g.s(f, "sluice-cluster").i32(1);
  g.a(f, 2);
  g.i32(1).s(f, "localhost").i32(9092).s(f, "rack-a").t(f);
  g.i32(2).s(f, "host2").i32(9093).ns(f).t(f);
  g.i32(0x0f).t(f);
  return g.take();
}

// ------------------------------------------------------------------ SASL

SaslHandshakeRequest MakeSaslHandshakeRequest(int16_t v) { return {.mechanism = "PLAIN"}; }

std::vector<uint8_t> GoldenSaslHandshakeRequest(int16_t v) {
  EXPECT_FALSE(Flexible(ApiKey::kSaslHandshake, v));
  return Golden().str("PLAIN").take();
}

SaslHandshakeResponse MakeSaslHandshakeResponse(int16_t v) {
  return {.error_code = ErrorCode::kUnsupportedSaslMechanism,
          .mechanisms = {"PLAIN", "SCRAM-SHA-256"}};
}

std::vector<uint8_t> GoldenSaslHandshakeResponse(int16_t v) {
  return Golden().i16(33).arr(2).str("PLAIN").str("SCRAM-SHA-256").take();
}

const std::vector<uint8_t> kClientAuth = {0, 'u', 0, 'p'};
const std::vector<uint8_t> kServerAuth = {1, 2, 3};

SaslAuthenticateRequest MakeSaslAuthenticateRequest(int16_t v) {
  return {.auth_bytes = kClientAuth};
}

std::vector<uint8_t> GoldenSaslAuthenticateRequest(int16_t v) {
  const bool f = Flexible(ApiKey::kSaslAuthenticate, v);
  Golden g;
  if (f) {
    g.cbytes(kClientAuth);
  } else {
    g.bytes(kClientAuth);
  }
  return g.t(f).take();
}

SaslAuthenticateResponse MakeSaslAuthenticateResponse(int16_t v) {
  SaslAuthenticateResponse m;
  m.error_code = ErrorCode::kSaslAuthenticationFailed;
  if (v % 2 == 0) m.error_message = "bad password";  // null in odd versions
  m.auth_bytes = kServerAuth;
  if (v >= 1) m.session_lifetime_ms = 3600000;
  return m;
}

std::vector<uint8_t> GoldenSaslAuthenticateResponse(int16_t v) {
  const bool f = Flexible(ApiKey::kSaslAuthenticate, v);
  Golden g;
  g.i16(58);
  if (v % 2 == 0) {
    g.s(f, "bad password");
  } else {
    g.ns(f);
  }
  if (f) {
    g.cbytes(kServerAuth);
  } else {
    g.bytes(kServerAuth);
  }
  if (v >= 1) g.i64(3600000);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ the table

template <typename M>
std::vector<uint8_t> EncodeBytes(const M& m, int16_t v) {
  std::vector<uint8_t> out;
  Writer w(&out);
  m.Encode(w, v);
  return out;
}

template <typename M>
Status DecodeBytes(std::span<const uint8_t> bytes, int16_t v, M* m) {
  Reader r(bytes);
  return m->Decode(r, v);
}

struct MessageCase {
  std::string name;
  ApiKey key;
  std::function<std::vector<uint8_t>(int16_t)> golden;
  std::function<void(int16_t)> round_trip;  // encode and decode checks at one version
  std::function<Status(std::span<const uint8_t>, int16_t)> decode;
};

// gtest prints the parameter of a failed test; the name is what helps.
void PrintTo(const MessageCase& c, std::ostream* os) { *os << c.name; }

template <typename M>
MessageCase Case(std::string name, ApiKey key, M (*make)(int16_t),
                 std::vector<uint8_t> (*golden)(int16_t)) {
  MessageCase c;
  c.name = std::move(name);
  c.key = key;
  c.golden = golden;
  c.round_trip = [make, golden](int16_t v) {
    const M m = make(v);
    const std::vector<uint8_t> bytes = golden(v);
    EXPECT_EQ(EncodeBytes(m, v), bytes) << "Encode";
    Reader r(bytes);
    M decoded;
    Status st = decoded.Decode(r, v);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(r.remaining(), 0u);
    EXPECT_TRUE(decoded == m) << "Decode gave a different struct";
  };
  c.decode = [](std::span<const uint8_t> bytes, int16_t v) {
    M m;
    return DecodeBytes(bytes, v, &m);
  };
  return c;
}

// ------------------------------------------------------------------ SCRAM credentials

DescribeUserScramCredentialsRequest MakeDescribeUserScramCredentialsRequest(int16_t) {
  DescribeUserScramCredentialsRequest m;
  m.users = std::vector<DescribeUserScramCredentialsRequest::User>{{"alice", {}}, {"bob", {}}};
  return m;
}

std::vector<uint8_t> GoldenDescribeUserScramCredentialsRequest(int16_t) {
  Golden g;
  g.carr(2).cstr("alice").tags().cstr("bob").tags().tags();
  return g.take();
}

DescribeUserScramCredentialsResponse MakeDescribeUserScramCredentialsResponse(int16_t) {
  DescribeUserScramCredentialsResponse m;
  m.throttle_time_ms = 7;
  m.results.push_back({"alice", ErrorCode::kNone, nullopt, {{1, 4096, {}}, {2, 8192, {}}}, {}});
  m.results.push_back({"carol", ErrorCode::kResourceNotFound, "no such user", {}, {}});
  return m;
}

std::vector<uint8_t> GoldenDescribeUserScramCredentialsResponse(int16_t) {
  Golden g;
  g.i32(7).i16(0).cnullstr().carr(2);
  g.cstr("alice").i16(0).cnullstr().carr(2).i8(1).i32(4096).tags().i8(2).i32(8192).tags().tags();
  g.cstr("carol").i16(91).cstr("no such user").carr(0).tags();
  g.tags();
  return g.take();
}

AlterUserScramCredentialsRequest MakeAlterUserScramCredentialsRequest(int16_t) {
  AlterUserScramCredentialsRequest m;
  m.deletions.push_back({"bob", 2, {}});
  m.upsertions.push_back({"alice", 1, 4096, {1, 2, 3}, {9, 8}, {}});
  return m;
}

std::vector<uint8_t> GoldenAlterUserScramCredentialsRequest(int16_t) {
  Golden g;
  g.carr(1).cstr("bob").i8(2).tags();
  g.carr(1).cstr("alice").i8(1).i32(4096).cbytes({1, 2, 3}).cbytes({9, 8}).tags();
  g.tags();
  return g.take();
}

AlterUserScramCredentialsResponse MakeAlterUserScramCredentialsResponse(int16_t) {
  AlterUserScramCredentialsResponse m;
  m.throttle_time_ms = 3;
  m.results.push_back({"alice", ErrorCode::kNone, nullopt, {}});
  m.results.push_back({"bob", ErrorCode::kUnacceptableCredential, "Too few iterations", {}});
  return m;
}

std::vector<uint8_t> GoldenAlterUserScramCredentialsResponse(int16_t) {
  Golden g;
  g.i32(3).carr(2).cstr("alice").i16(0).cnullstr().tags();
  g.cstr("bob").i16(93).cstr("Too few iterations").tags().tags();
  return g.take();
}

// ------------------------------------------------------------------ ACLs

// Kafka's codes (auth/acl.h): resource types, pattern types, operations, permissions.
constexpr int kAny = 1, kTopic = 2, kGroup = 3, kCluster = 4, kUser = 7;  // kUser: v3+
constexpr int kMatch = 2, kLiteral = 3, kPrefixed = 4;
constexpr int kAll = 2, kRead = 3, kWrite = 4, kDescribe = 8;
constexpr int kDeny = 2, kAllow = 3;

// "flexibleVersions": "2+" and pattern types "versions": "1+" in all six definitions.
bool AclFlexible(int16_t v) { return v >= 2; }
bool HasPatternType(int16_t v) { return v >= 1; }

// Even versions null the principal filter, odd ones the name and host filters, so each
// nullable string is null and set in a non-flexible and a flexible version.
DescribeAclsRequest MakeDescribeAclsRequest(int16_t v) {
  const bool even = v % 2 == 0;
  DescribeAclsRequest m;
  m.resource_type_filter = v >= 3 ? kUser : kTopic;
  m.resource_name_filter = even ? std::optional<std::string>("orders") : nullopt;
  if (HasPatternType(v)) m.pattern_type_filter = kMatch;
  m.principal_filter = even ? nullopt : std::optional<std::string>("User:alice");
  m.host_filter = even ? std::optional<std::string>("*") : nullopt;
  m.operation = kRead;
  m.permission_type = kAllow;
  return m;
}

std::vector<uint8_t> GoldenDescribeAclsRequest(int16_t v) {
  const bool f = AclFlexible(v);
  const bool even = v % 2 == 0;
  Golden g;
  g.i8(v >= 3 ? kUser : kTopic);
  if (even) {
    g.s(f, "orders");
  } else {
    g.ns(f);
  }
  if (HasPatternType(v)) g.i8(kMatch);
  if (even) {
    g.ns(f).s(f, "*");
  } else {
    g.s(f, "User:alice").ns(f);
  }
  g.i8(kRead).i8(kAllow).t(f);
  return g.take();
}

DescribeAclsResponse MakeDescribeAclsResponse(int16_t v) {
  DescribeAclsResponse m;
  m.throttle_time_ms = 11;
  if (v % 2 == 1) {
    m.error_code = ErrorCode::kSecurityDisabled;
    m.error_message = "No authorizer";
  }
  m.resources = {
      {.resource_type = kTopic,
       .resource_name = "orders",
       .pattern_type = static_cast<int8_t>(HasPatternType(v) ? kPrefixed : kLiteral),
       .acls =
           {{.principal = "User:alice", .host = "*", .operation = kRead, .permission_type = kAllow},
            {.principal = "User:bob",
             .host = "10.0.0.1",
             .operation = kWrite,
             .permission_type = kDeny}}},
      {.resource_type = static_cast<int8_t>(v >= 3 ? kUser : kCluster),
       .resource_name = v >= 3 ? "alice" : "kafka-cluster"},
  };
  return m;
}

std::vector<uint8_t> GoldenDescribeAclsResponse(int16_t v) {
  const bool f = AclFlexible(v);
  Golden g;
  g.i32(11);
  if (v % 2 == 1) {
    g.i16(54).s(f, "No authorizer");
  } else {
    g.i16(0).ns(f);
  }
  g.a(f, 2);
  g.i8(kTopic).s(f, "orders");
  if (HasPatternType(v)) g.i8(kPrefixed);
  g.a(f, 2);
  g.s(f, "User:alice").s(f, "*").i8(kRead).i8(kAllow).t(f);
  g.s(f, "User:bob").s(f, "10.0.0.1").i8(kWrite).i8(kDeny).t(f);
  g.t(f);
  g.i8(v >= 3 ? kUser : kCluster).s(f, v >= 3 ? "alice" : "kafka-cluster");
  if (HasPatternType(v)) g.i8(kLiteral);  // the default, still on the wire
  g.a(f, 0).t(f);
  g.t(f);
  return g.take();
}

CreateAclsRequest MakeCreateAclsRequest(int16_t v) {
  CreateAclsRequest m;
  m.creations = {
      {.resource_type = kTopic,
       .resource_name = "orders-",
       .resource_pattern_type = static_cast<int8_t>(HasPatternType(v) ? kPrefixed : kLiteral),
       .principal = "User:alice",
       .host = "*",
       .operation = kAll,
       .permission_type = kAllow},
      {.resource_type = kGroup,
       .resource_name = "app",
       .principal = "User:bob",
       .host = "10.0.0.1",
       .operation = kDescribe,
       .permission_type = kDeny},
  };
  return m;
}

std::vector<uint8_t> GoldenCreateAclsRequest(int16_t v) {
  const bool f = AclFlexible(v);
  Golden g;
  g.a(f, 2);
  g.i8(kTopic).s(f, "orders-");
  if (HasPatternType(v)) g.i8(kPrefixed);
  g.s(f, "User:alice").s(f, "*").i8(kAll).i8(kAllow).t(f);
  g.i8(kGroup).s(f, "app");
  if (HasPatternType(v)) g.i8(kLiteral);
  g.s(f, "User:bob").s(f, "10.0.0.1").i8(kDescribe).i8(kDeny).t(f);
  g.t(f);
  return g.take();
}

CreateAclsResponse MakeCreateAclsResponse(int16_t) {
  CreateAclsResponse m;
  m.throttle_time_ms = 5;
  m.results = {{.error_code = ErrorCode::kNone},
               {.error_code = ErrorCode::kInvalidRequest, .error_message = "bad host"}};
  return m;
}

std::vector<uint8_t> GoldenCreateAclsResponse(int16_t v) {
  const bool f = AclFlexible(v);
  Golden g;
  g.i32(5).a(f, 2);
  g.i16(0).ns(f).t(f);
  g.i16(42).s(f, "bad host").t(f);
  g.t(f);
  return g.take();
}

// The second filter matches every binding: ANY everywhere, null strings.
DeleteAclsRequest MakeDeleteAclsRequest(int16_t v) {
  DeleteAclsRequest m;
  m.filters = {
      {.resource_type_filter = kTopic,
       .resource_name_filter = "orders",
       .pattern_type_filter = static_cast<int8_t>(HasPatternType(v) ? kPrefixed : kLiteral),
       .principal_filter = "User:alice",
       .host_filter = "*",
       .operation = kRead,
       .permission_type = kAllow},
      {.resource_type_filter = kAny,
       .pattern_type_filter = static_cast<int8_t>(HasPatternType(v) ? kAny : kLiteral),
       .operation = kAny,
       .permission_type = kAny},
  };
  return m;
}

std::vector<uint8_t> GoldenDeleteAclsRequest(int16_t v) {
  const bool f = AclFlexible(v);
  Golden g;
  g.a(f, 2);
  g.i8(kTopic).s(f, "orders");
  if (HasPatternType(v)) g.i8(kPrefixed);
  g.s(f, "User:alice").s(f, "*").i8(kRead).i8(kAllow).t(f);
  g.i8(kAny).ns(f);
  if (HasPatternType(v)) g.i8(kAny);
  g.ns(f).ns(f).i8(kAny).i8(kAny).t(f);
  g.t(f);
  return g.take();
}

DeleteAclsResponse MakeDeleteAclsResponse(int16_t v) {
  DeleteAclsResponse m;
  m.throttle_time_ms = 9;
  m.filter_results = {
      {.matching_acls = {{.resource_type = kTopic,
                          .resource_name = "orders",
                          .pattern_type =
                              static_cast<int8_t>(HasPatternType(v) ? kPrefixed : kLiteral),
                          .principal = "User:alice",
                          .host = "*",
                          .operation = kRead,
                          .permission_type = kAllow},
                         {.error_code = ErrorCode::kUnknownServerError,
                          .error_message = "store unavailable",
                          .resource_type = kGroup,
                          .resource_name = "app",
                          .principal = "User:bob",
                          .host = "10.0.0.1",
                          .operation = kDescribe,
                          .permission_type = kDeny}}},
      {.error_code = ErrorCode::kSecurityDisabled, .error_message = "No authorizer"},
  };
  return m;
}

std::vector<uint8_t> GoldenDeleteAclsResponse(int16_t v) {
  const bool f = AclFlexible(v);
  Golden g;
  g.i32(9).a(f, 2);
  g.i16(0).ns(f).a(f, 2);
  g.i16(0).ns(f).i8(kTopic).s(f, "orders");
  if (HasPatternType(v)) g.i8(kPrefixed);
  g.s(f, "User:alice").s(f, "*").i8(kRead).i8(kAllow).t(f);
  g.i16(-1).s(f, "store unavailable").i8(kGroup).s(f, "app");
  if (HasPatternType(v)) g.i8(kLiteral);
  g.s(f, "User:bob").s(f, "10.0.0.1").i8(kDescribe).i8(kDeny).t(f);
  g.t(f);
  g.i16(54).s(f, "No authorizer").a(f, 0).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ client quotas

// "flexibleVersions": "1+" in all four definitions; no field depends on the version.
bool QuotasFlexible(int16_t v) { return v >= 1; }

// FLOAT64 values as Kafka writes them (ByteBuffer.putDouble: IEEE 754, big-endian),
// transcribed by hand so the goldens do not depend on Writer::Float64.
constexpr int64_t kBits1048576 = 0x4130000000000000;  // 1048576.0
constexpr int64_t kBitsHalf = 0x3fe0000000000000;     // 0.5
constexpr int64_t kBits250 = 0x406f400000000000;      // 250.0

// Each sample has a named and a default (null name) entity, so both string forms are
// checked in both versions.
DescribeClientQuotasRequest MakeDescribeClientQuotasRequest(int16_t) {
  DescribeClientQuotasRequest m;
  m.components = {{.entity_type = "user", .match_type = 0, .match = "alice"},
                  {.entity_type = "client-id", .match_type = 1},
                  {.entity_type = "ip", .match_type = 2}};
  m.strict = true;
  return m;
}

std::vector<uint8_t> GoldenDescribeClientQuotasRequest(int16_t v) {
  const bool f = QuotasFlexible(v);
  Golden g;
  g.a(f, 3);
  g.s(f, "user").i8(0).s(f, "alice").t(f);
  g.s(f, "client-id").i8(1).ns(f).t(f);
  g.s(f, "ip").i8(2).ns(f).t(f);
  g.boolean(true).t(f);
  return g.take();
}

DescribeClientQuotasResponse MakeDescribeClientQuotasResponse(int16_t) {
  DescribeClientQuotasResponse m;
  m.throttle_time_ms = 7;
  m.entries = std::vector<DescribeClientQuotasResponse::Entry>{
      {.entity = {{.entity_type = "user", .entity_name = "alice"}, {.entity_type = "client-id"}},
       .values = {{.key = "producer_byte_rate", .value = 1048576.0},
                  {.key = "controller_mutation_rate", .value = 0.5}}},
      {.entity = {{.entity_type = "user"}}},
  };
  return m;
}

std::vector<uint8_t> GoldenDescribeClientQuotasResponse(int16_t v) {
  const bool f = QuotasFlexible(v);
  Golden g;
  g.i32(7).i16(0).ns(f).a(f, 2);
  g.a(f, 2).s(f, "user").s(f, "alice").t(f).s(f, "client-id").ns(f).t(f);
  g.a(f, 2).s(f, "producer_byte_rate").i64(kBits1048576).t(f);
  g.s(f, "controller_mutation_rate").i64(kBitsHalf).t(f);
  g.t(f);
  g.a(f, 1).s(f, "user").ns(f).t(f).a(f, 0).t(f);
  g.t(f);
  return g.take();
}

AlterClientQuotasRequest MakeAlterClientQuotasRequest(int16_t) {
  AlterClientQuotasRequest m;
  m.entries = {
      {.entity = {{.entity_type = "user", .entity_name = "alice"}, {.entity_type = "client-id"}},
       .ops = {{.key = "producer_byte_rate", .value = 1048576.0},
               {.key = "request_percentage", .value = 0.5, .remove = true}}},
      {.entity = {{.entity_type = "ip"}},
       .ops = {{.key = "connection_creation_rate", .value = 250.0}}},
  };
  m.validate_only = true;
  return m;
}

std::vector<uint8_t> GoldenAlterClientQuotasRequest(int16_t v) {
  const bool f = QuotasFlexible(v);
  Golden g;
  g.a(f, 2);
  g.a(f, 2).s(f, "user").s(f, "alice").t(f).s(f, "client-id").ns(f).t(f);
  g.a(f, 2).s(f, "producer_byte_rate").i64(kBits1048576).boolean(false).t(f);
  g.s(f, "request_percentage").i64(kBitsHalf).boolean(true).t(f);
  g.t(f);
  g.a(f, 1).s(f, "ip").ns(f).t(f);
  g.a(f, 1).s(f, "connection_creation_rate").i64(kBits250).boolean(false).t(f);
  g.t(f);
  g.boolean(true).t(f);
  return g.take();
}

AlterClientQuotasResponse MakeAlterClientQuotasResponse(int16_t) {
  AlterClientQuotasResponse m;
  m.throttle_time_ms = 3;
  m.entries = {
      {.entity = {{.entity_type = "user", .entity_name = "alice"}, {.entity_type = "client-id"}}},
      {.error_code = ErrorCode::kInvalidRequest,
       .error_message = "unknown quota key",
       .entity = {{.entity_type = "ip"}}},
  };
  return m;
}

std::vector<uint8_t> GoldenAlterClientQuotasResponse(int16_t v) {
  const bool f = QuotasFlexible(v);
  Golden g;
  g.i32(3).a(f, 2);
  g.i16(0).ns(f).a(f, 2).s(f, "user").s(f, "alice").t(f).s(f, "client-id").ns(f).t(f).t(f);
  g.i16(42).s(f, "unknown quota key").a(f, 1).s(f, "ip").ns(f).t(f).t(f);
  g.t(f);
  return g.take();
}

#define SLUICE_ADMIN_CASES(Api)                                                     \
  Case(#Api "Request", ApiKey::k##Api, &Make##Api##Request, &Golden##Api##Request), \
      Case(#Api "Response", ApiKey::k##Api, &Make##Api##Response, &Golden##Api##Response)

std::vector<MessageCase> AllCases() {
  return {
      SLUICE_ADMIN_CASES(CreateTopics),
      SLUICE_ADMIN_CASES(DeleteTopics),
      SLUICE_ADMIN_CASES(CreatePartitions),
      SLUICE_ADMIN_CASES(DescribeConfigs),
      SLUICE_ADMIN_CASES(AlterConfigs),
      SLUICE_ADMIN_CASES(IncrementalAlterConfigs),
      SLUICE_ADMIN_CASES(InitProducerId),
      SLUICE_ADMIN_CASES(DeleteRecords),
      SLUICE_ADMIN_CASES(OffsetForLeaderEpoch),
      SLUICE_ADMIN_CASES(DescribeCluster),
      SLUICE_ADMIN_CASES(SaslHandshake),
      SLUICE_ADMIN_CASES(SaslAuthenticate),
      SLUICE_ADMIN_CASES(DescribeUserScramCredentials),
      SLUICE_ADMIN_CASES(AlterUserScramCredentials),
      SLUICE_ADMIN_CASES(DescribeAcls),
      SLUICE_ADMIN_CASES(CreateAcls),
      SLUICE_ADMIN_CASES(DeleteAcls),
      SLUICE_ADMIN_CASES(DescribeClientQuotas),
      SLUICE_ADMIN_CASES(AlterClientQuotas),
  };
}
#undef SLUICE_ADMIN_CASES

class AdminMessageTest : public ::testing::TestWithParam<MessageCase> {
 protected:
  // Every version the codec knows for this API (FindApi), advertised or not yet served.
  std::vector<int16_t> Versions() const {
    auto api = FindApi(GetParam().key);
    EXPECT_TRUE(api.has_value());
    std::vector<int16_t> out;
    if (api) {
      for (int16_t v = api->min; v <= api->max; ++v) out.push_back(v);
    }
    return out;
  }
  bool Flexible(int16_t v) const { return IsFlexible(*FindApi(GetParam().key), v); }
};

TEST_P(AdminMessageTest, EncodesGoldenBytesAndDecodesThemBackInEveryVersion) {
  for (int16_t v : Versions()) {
    SCOPED_TRACE(GetParam().name + " v" + std::to_string(v));
    GetParam().round_trip(v);
  }
}

TEST_P(AdminMessageTest, EveryStrictPrefixFailsToDecode) {
  for (int16_t v : Versions()) {
    std::vector<uint8_t> bytes = GetParam().golden(v);
    for (size_t n = 0; n < bytes.size(); ++n) {
      Status st = GetParam().decode(std::span<const uint8_t>(bytes.data(), n), v);
      EXPECT_FALSE(st.ok()) << GetParam().name << " v" << v << " decoded from " << n << " of "
                            << bytes.size() << " bytes";
    }
  }
}

TEST_P(AdminMessageTest, TrailingBytesAreTolerated) {
  for (int16_t v : Versions()) {
    std::vector<uint8_t> bytes = GetParam().golden(v);
    bytes.push_back(0x55);
    Status st = GetParam().decode(bytes, v);
    EXPECT_TRUE(st.ok()) << GetParam().name << " v" << v << ": " << st.ToString();
  }
}

TEST_P(AdminMessageTest, OverlongVarintInFlexibleVersionFails) {
  for (int16_t v : Versions()) {
    if (!Flexible(v)) continue;
    std::vector<uint8_t> bytes = GetParam().golden(v);
    ASSERT_EQ(bytes.back(), 0);  // the body's own (empty) tagged-field count
    bytes.pop_back();
    for (int i = 0; i < 5; ++i) bytes.push_back(0xff);
    bytes.push_back(0x01);
    Status st = GetParam().decode(bytes, v);
    EXPECT_FALSE(st.ok()) << GetParam().name << " v" << v;
    EXPECT_NE(st.message().find(GetParam().name), std::string::npos) << st.message();
  }
}

TEST_P(AdminMessageTest, VersionsOutsideTheDefinitionAreRejected) {
  for (int16_t v : {int16_t{-1}, int16_t{99}}) {
    std::vector<uint8_t> bytes = GetParam().golden(Versions().back());
    EXPECT_FALSE(GetParam().decode(bytes, v).ok()) << GetParam().name << " v" << v;
  }
}

// Overwrites each byte in turn with values that make lengths negative or huge; decoding
// may succeed or fail but must stay within the input (run under ASan to be sure).
TEST_P(AdminMessageTest, CorruptedBytesNeverCrash) {
  for (int16_t v : Versions()) {
    const std::vector<uint8_t> golden = GetParam().golden(v);
    for (size_t i = 0; i < golden.size(); ++i) {
      for (uint8_t b :
           {uint8_t{0x00}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xfe}, uint8_t{0xff}}) {
        std::vector<uint8_t> bytes = golden;
        bytes[i] = b;
        (void)GetParam().decode(bytes, v);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Admin, AdminMessageTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<MessageCase>& info) {
                           return info.param.name;
                         });

// ------------------------------------------------------------------ specific cases

template <typename M>
Status DecodeAs(const std::vector<uint8_t>& bytes, int16_t v) {
  M m;
  return DecodeBytes(bytes, v, &m);
}

TEST(AdminDecodeTest, NegativeArrayLengthFails) {
  EXPECT_FALSE(
      DecodeAs<CreateTopicsRequest>(Golden().arr(-2).i32(0).boolean(false).take(), 1).ok());
  EXPECT_FALSE(DecodeAs<DeleteRecordsRequest>(Golden().arr(-5).i32(0).take(), 0).ok());
  EXPECT_FALSE(DecodeAs<SaslHandshakeResponse>(Golden().i16(0).arr(-3).take(), 1).ok());
  // A nested array.
  EXPECT_FALSE(
      DecodeAs<DeleteRecordsRequest>(Golden().arr(1).str("t").arr(-7).i32(0).take(), 1).ok());
}

TEST(AdminDecodeTest, NullForNonNullableArrayFails) {
  Status st = DecodeAs<CreateTopicsRequest>(Golden().arr(-1).i32(0).boolean(false).take(), 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("topics"), std::string::npos) << st.message();
  EXPECT_FALSE(
      DecodeAs<AlterConfigsRequest>(Golden().carr(-1).boolean(false).tags().take(), 2).ok());
}

TEST(AdminDecodeTest, NullForNullableArrayDecodesAsNull) {
  CreatePartitionsRequest m;
  ASSERT_TRUE(
      DecodeBytes(Golden().arr(1).str("t").i32(3).arr(-1).i32(0).boolean(false).take(), 0, &m)
          .ok());
  ASSERT_EQ(m.topics.size(), 1u);
  EXPECT_FALSE(m.topics[0].assignments.has_value());
}

TEST(AdminDecodeTest, NegativeStringLengthFails) {
  EXPECT_FALSE(DecodeAs<SaslHandshakeRequest>(Golden().i16(-3).take(), 1).ok());
  EXPECT_FALSE(
      DecodeAs<CreateTopicsRequest>(Golden().arr(1).i16(-2).raw(std::string(20, '\0')).take(), 0)
          .ok());
  EXPECT_FALSE(DecodeAs<InitProducerIdRequest>(Golden().i16(-2).i32(0).take(), 0).ok());
  EXPECT_FALSE(DecodeAs<SaslAuthenticateRequest>(Golden().i32(-2).take(), 0).ok());  // bytes
}

TEST(AdminDecodeTest, NullForNonNullableStringFails) {
  EXPECT_FALSE(DecodeAs<SaslHandshakeRequest>(Golden().nullstr().take(), 0).ok());
  EXPECT_FALSE(
      DecodeAs<DescribeClusterResponse>(
          Golden().i32(0).i16(0).cnullstr().cnullstr().i32(0).carr(0).i32(0).tags().take(), 0)
          .ok());
  EXPECT_FALSE(DecodeAs<SaslAuthenticateRequest>(Golden().nullbytes().take(), 0).ok());
}

TEST(AdminDecodeTest, ArrayCountLargerThanTheBytesLeftFailsBeforeAllocating) {
  Status st =
      DecodeAs<CreateTopicsRequest>(Golden().arr(0x7fffffff).i32(0).boolean(false).take(), 1);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.message();
  // Compact count in a flexible version, at the top and nested.
  EXPECT_FALSE(DecodeAs<DescribeConfigsRequest>(Golden().uvarint(0xfffffffe).take(), 4).ok());
  EXPECT_FALSE(
      DecodeAs<DeleteRecordsRequest>(
          Golden().carr(1).cstr("t").uvarint(1000000).raw(std::string(100, '\0')).take(), 2)
          .ok());
  // int32 elements: 3 of them cannot fit in 8 bytes.
  EXPECT_FALSE(DecodeAs<CreatePartitionsRequest>(
                   Golden().arr(1).str("t").i32(3).arr(1).arr(3).i32(1).i32(2).take(), 0)
                   .ok());
}

TEST(AdminDecodeTest, ErrorNamesTheMessageAndVersion) {
  Status st = DecodeAs<DeleteTopicsRequest>(Golden().carr(2).take(), 6);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("DeleteTopicsRequest v6"), std::string::npos) << st.message();
}

TEST(AdminDecodeTest, DeleteTopicsResponseNullNameIsOnlyValidFromV6) {
  auto body = [](bool f) { return Golden().i32(0).a(f, 1).ns(f).i16(0).ns(f).t(f).t(f).take(); };
  EXPECT_FALSE(DecodeAs<DeleteTopicsResponse>(body(true), 5).ok());
  DeleteTopicsResponse m;
  std::vector<uint8_t> v6 =
      Golden().i32(0).carr(1).cnullstr().uuid(1, 2).i16(0).cnullstr().tags().tags().take();
  ASSERT_TRUE(DecodeBytes(v6, 6, &m).ok());
  EXPECT_EQ(m.responses.at(0).name, nullopt);
}

TEST(AdminEncodeTest, DeleteTopicsResponseWritesNullNameAsEmptyBeforeV6) {
  DeleteTopicsResponse m;
  m.responses = {{.name = nullopt}};
  EXPECT_EQ(EncodeBytes(m, 5),
            Golden().i32(0).carr(1).cstr("").i16(0).cnullstr().tags().tags().take());
}

TEST(AdminEncodeTest, FieldsAbsentInAVersionAreSkipped) {
  // validate_only is v1+; Kafka would refuse to encode true at v0, this codec drops it.
  CreateTopicsRequest req;
  req.validate_only = true;
  EXPECT_EQ(EncodeBytes(req, 0), Golden().arr(0).i32(60000).take());
  // DeleteTopics v0-5 carry names only; v6 ids only.
  DeleteTopicsRequest del;
  del.topics = {{.name = "a", .topic_id = kId1}};
  del.topic_names = {"b"};
  EXPECT_EQ(EncodeBytes(del, 3), Golden().arr(1).str("b").i32(0).take());
  EXPECT_EQ(EncodeBytes(del, 6), Id1(Golden().carr(1).cstr("a")).tags().i32(0).tags().take());
}

TEST(AdminDecodeTest, DefaultsFillFieldsAbsentInAVersion) {
  OffsetForLeaderEpochRequest m;
  ASSERT_TRUE(DecodeBytes(Golden().arr(1).str("t").arr(1).i32(0).i32(7).take(), 0, &m).ok());
  EXPECT_EQ(m.replica_id, -2);
  EXPECT_EQ(m.topics.at(0).partitions.at(0).current_leader_epoch, -1);
  InitProducerIdRequest ip;
  ASSERT_TRUE(DecodeBytes(Golden().nullstr().i32(100).take(), 0, &ip).ok());
  EXPECT_EQ(ip.producer_id, -1);
  EXPECT_EQ(ip.producer_epoch, -1);
  DescribeClusterRequest dc;
  ASSERT_TRUE(DecodeBytes(Golden().boolean(false).tags().take(), 0, &dc).ok());
  EXPECT_EQ(dc.endpoint_type, 1);
}

TEST(AdminTaggedFieldsTest, CreateTopicsResponseKeepsUnknownTagsBesideTopicConfigErrorCode) {
  // One topic with tag 0 (topic_config_error_code) and an unknown tag 9, plus an
  // unknown top-level tag 3.
  std::vector<uint8_t> bytes = Golden()
                                   .i32(0)
                                   .carr(1)
                                   .cstr("t")
                                   .i16(0)
                                   .cnullstr()
                                   .i32(1)
                                   .i16(1)
                                   .carr(-1)
                                   .uvarint(2)
                                   .uvarint(0)
                                   .uvarint(2)
                                   .i16(29)
                                   .uvarint(9)
                                   .uvarint(3)
                                   .raw(std::string("xyz"))
                                   .uvarint(1)
                                   .uvarint(3)
                                   .uvarint(1)
                                   .i8(7)
                                   .take();
  CreateTopicsResponse m;
  Status st = DecodeBytes(bytes, 5, &m);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(m.topics.size(), 1u);
  EXPECT_EQ(m.topics[0].topic_config_error_code, ErrorCode::kTopicAuthorizationFailed);
  ASSERT_EQ(m.topics[0].unknown_tags.size(), 1u);
  EXPECT_EQ(m.topics[0].unknown_tags[0].tag, 9u);
  EXPECT_EQ(m.topics[0].unknown_tags[0].data, (std::vector<uint8_t>{'x', 'y', 'z'}));
  ASSERT_EQ(m.unknown_tags.size(), 1u);
  EXPECT_EQ(m.unknown_tags[0].tag, 3u);
  EXPECT_EQ(EncodeBytes(m, 5), bytes);
}

TEST(AdminTaggedFieldsTest, TopicConfigErrorCodeTooShortFails) {
  std::vector<uint8_t> bytes = Golden()
                                   .i32(0)
                                   .carr(1)
                                   .cstr("t")
                                   .i16(0)
                                   .cnullstr()
                                   .i32(1)
                                   .i16(1)
                                   .carr(-1)
                                   .uvarint(1)
                                   .uvarint(0)
                                   .uvarint(1)
                                   .i8(1)
                                   .tags()
                                   .take();
  EXPECT_FALSE(DecodeAs<CreateTopicsResponse>(bytes, 5).ok());
}

TEST(AdminTaggedFieldsTest, UnknownTagsInNestedRequestStructsRoundTrip) {
  std::vector<uint8_t> bytes = Golden()
                                   .carr(1)
                                   .cstr("t")
                                   .carr(1)
                                   .i32(0)
                                   .i64(5)
                                   .uvarint(1)
                                   .uvarint(4)
                                   .uvarint(1)
                                   .i8(1)  // partition: unknown tag 4
                                   .tags()
                                   .i32(100)
                                   .tags()
                                   .take();
  DeleteRecordsRequest m;
  ASSERT_TRUE(DecodeBytes(bytes, 2, &m).ok());
  ASSERT_EQ(m.topics.at(0).partitions.at(0).unknown_tags.size(), 1u);
  EXPECT_EQ(m.topics[0].partitions[0].unknown_tags[0].tag, 4u);
  EXPECT_EQ(EncodeBytes(m, 2), bytes);
}

TEST(AdminTaggedFieldsTest, TagsOutOfOrderFail) {
  std::vector<uint8_t> bytes =
      Golden().boolean(true).uvarint(2).uvarint(5).uvarint(0).uvarint(2).uvarint(0).take();
  EXPECT_FALSE(DecodeAs<DescribeClusterRequest>(bytes, 0).ok());
}

TEST(AdminApiTest, AdvertisedRangesFitTheDefinitions) {
  // The JSON's validVersions and flexibleVersions; the codec handles exactly these.
  struct Def {
    ApiKey key;
    int16_t max;
    int16_t flexible_from;
  };
  for (Def d :
       {Def{ApiKey::kCreateTopics, 7, 5}, Def{ApiKey::kDeleteTopics, 6, 4},
        Def{ApiKey::kCreatePartitions, 3, 2}, Def{ApiKey::kDescribeConfigs, 4, 4},
        Def{ApiKey::kAlterConfigs, 2, 2}, Def{ApiKey::kIncrementalAlterConfigs, 1, 1},
        Def{ApiKey::kInitProducerId, 5, 2}, Def{ApiKey::kDeleteRecords, 2, 2},
        Def{ApiKey::kOffsetForLeaderEpoch, 4, 4}, Def{ApiKey::kDescribeCluster, 1, 0},
        Def{ApiKey::kSaslAuthenticate, 2, 2}, Def{ApiKey::kDescribeUserScramCredentials, 0, 0},
        Def{ApiKey::kAlterUserScramCredentials, 0, 0}, Def{ApiKey::kDescribeAcls, 3, 2},
        Def{ApiKey::kCreateAcls, 3, 2}, Def{ApiKey::kDeleteAcls, 3, 2},
        Def{ApiKey::kDescribeClientQuotas, 1, 1}, Def{ApiKey::kAlterClientQuotas, 1, 1}}) {
    auto api = FindApi(d.key);
    ASSERT_TRUE(api.has_value()) << ApiName(d.key);
    EXPECT_GE(api->min, 0) << ApiName(d.key);
    EXPECT_LE(api->max, d.max) << ApiName(d.key);
    EXPECT_EQ(api->flexible_from, d.flexible_from) << ApiName(d.key);
  }
  auto sasl = FindApi(ApiKey::kSaslHandshake);
  ASSERT_TRUE(sasl.has_value());
  EXPECT_LE(sasl->max, 1);
  EXPECT_FALSE(IsFlexible(*sasl, sasl->max));
}

// Null users (every user) round trips; malformed bodies fail, never crash.
TEST(UserScramCredentialsTest, NullUsersAndMalformedBodies) {
  DescribeUserScramCredentialsRequest all;
  std::vector<uint8_t> bytes;
  Writer w(&bytes);
  all.Encode(w, 0);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{0, 0}));  // null compact array, no tags
  DescribeUserScramCredentialsRequest back;
  back.users.emplace();
  ASSERT_TRUE(DecodeBytes(bytes, 0, &back).ok());
  EXPECT_FALSE(back.users.has_value());
  const std::vector<uint8_t> good = GoldenAlterUserScramCredentialsRequest(0);
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_FALSE(DecodeAs<AlterUserScramCredentialsRequest>(cut, 0).ok()) << n;
  }
  // A salt longer than what is left; an absurd array count.
  std::vector<uint8_t> long_salt =
      Golden().carr(0).carr(1).cstr("a").i8(1).i32(4096).uvarint(1000).take();
  EXPECT_FALSE(DecodeAs<AlterUserScramCredentialsRequest>(long_salt, 0).ok());
  std::vector<uint8_t> huge = Golden().uvarint(1u << 30).take();
  EXPECT_FALSE(DecodeAs<DescribeUserScramCredentialsRequest>(huge, 0).ok());
  EXPECT_FALSE(DecodeAs<AlterUserScramCredentialsRequest>(good, 1).ok());  // v1 does not exist
}

// A compact count is an unsigned varint of length + 1, so the only negative length is the
// null marker (0); a count of 2^32 - 2 (-2 as an int32) must be refused as too large, not
// taken for null. Then nulls where the JSON does not allow them, and string and bytes
// lengths past the end: each fails with an error naming the message and the field.
TEST(UserScramCredentialsTest, MalformedLengthsFailWithAnError) {
  using Decoder = Status (*)(const std::vector<uint8_t>&, int16_t);
  const Decoder describe_req = &DecodeAs<DescribeUserScramCredentialsRequest>;
  const Decoder describe_resp = &DecodeAs<DescribeUserScramCredentialsResponse>;
  const Decoder alter_req = &DecodeAs<AlterUserScramCredentialsRequest>;
  const Decoder alter_resp = &DecodeAs<AlterUserScramCredentialsResponse>;
  constexpr uint64_t kMinusTwo = 0xffffffffu;  // length + 1 = 2^32 - 1
  // The bytes before the first upsertion's salt; before the first result's credential infos.
  auto upsertion = [] { return Golden().carr(0).carr(1).cstr("a").i8(1).i32(4096); };
  auto described = [] { return Golden().i32(0).i16(0).cnullstr().carr(1).cstr("a").i16(0); };
  struct Bad {
    Decoder decode;
    const char* api;
    const char* reason;  // the field and what is wrong with it, as the error says
    std::vector<uint8_t> bytes;
  };
  const std::vector<Bad> cases = {
      {describe_req, "DescribeUserScramCredentialsRequest v0",
       "users: array of 4294967294 elements cannot fit",
       Golden().uvarint(kMinusTwo).cstr("alice").tags().tags().take()},
      {alter_req, "AlterUserScramCredentialsRequest v0",
       "deletions: array of 4294967294 elements cannot fit",
       Golden().uvarint(kMinusTwo).cstr("bob").i8(1).tags().carr(0).tags().take()},
      {alter_req, "AlterUserScramCredentialsRequest v0",
       "upsertions: array of 4294967294 elements cannot fit",
       Golden().carr(0).uvarint(kMinusTwo).cstr("a").i8(1).i32(4096).tags().take()},
      {describe_resp, "DescribeUserScramCredentialsResponse v0",
       "results: array of 4294967294 elements cannot fit",
       Golden().i32(0).i16(0).cnullstr().uvarint(kMinusTwo).cstr("a").i16(0).tags().take()},
      {describe_resp, "DescribeUserScramCredentialsResponse v0",
       "credential infos: array of 4294967294 elements cannot fit",
       described().cnullstr().uvarint(kMinusTwo).i8(1).i32(4096).tags().tags().tags().take()},
      {alter_resp, "AlterUserScramCredentialsResponse v0",
       "results: array of 4294967294 elements cannot fit",
       Golden().i32(0).uvarint(kMinusTwo).cstr("a").i16(0).cnullstr().tags().tags().take()},
      {alter_req, "AlterUserScramCredentialsRequest v0", "deletions: null where an array",
       Golden().carr(-1).carr(0).tags().take()},
      {alter_req, "AlterUserScramCredentialsRequest v0", "upsertions: null where an array",
       Golden().carr(0).carr(-1).tags().take()},
      {describe_resp, "DescribeUserScramCredentialsResponse v0", "results: null where an array",
       Golden().i32(0).i16(0).cnullstr().carr(-1).tags().take()},
      {describe_resp, "DescribeUserScramCredentialsResponse v0",
       "credential infos: null where an array",
       described().cnullstr().carr(-1).tags().tags().take()},
      {alter_resp, "AlterUserScramCredentialsResponse v0", "results: null where an array",
       Golden().i32(0).carr(-1).tags().take()},
      {describe_req, "DescribeUserScramCredentialsRequest v0", "user name: null where a string",
       Golden().carr(1).cnullstr().tags().tags().take()},
      {alter_req, "AlterUserScramCredentialsRequest v0", "salt: null where bytes",
       upsertion().uvarint(0).cbytes({1}).tags().tags().take()},
      {alter_req, "AlterUserScramCredentialsRequest v0", "salted password: null where bytes",
       upsertion().cbytes({1}).uvarint(0).tags().tags().take()},
      {describe_req, "DescribeUserScramCredentialsRequest v0", "user name: needs 50 bytes",
       Golden().carr(1).uvarint(51).raw(std::string("abc")).take()},
      {alter_req, "AlterUserScramCredentialsRequest v0", "deletion name: needs 199 bytes",
       Golden().carr(1).uvarint(200).raw(std::string("bob")).i8(1).tags().take()},
      {describe_resp, "DescribeUserScramCredentialsResponse v0", "user: needs 99 bytes",
       Golden().i32(0).i16(0).cnullstr().carr(1).uvarint(100).raw(std::string(14, 'a')).take()},
      {describe_resp, "DescribeUserScramCredentialsResponse v0", "error message: needs 39 bytes",
       Golden().i32(0).i16(0).uvarint(40).raw(std::string("oops")).carr(0).tags().take()},
      {alter_resp, "AlterUserScramCredentialsResponse v0", "error message: needs 29 bytes",
       Golden().i32(0).carr(1).cstr("a").i16(93).uvarint(30).raw(std::string("few")).take()},
      {alter_req, "AlterUserScramCredentialsRequest v0", "salted password: needs 64 bytes",
       upsertion().cbytes({1}).uvarint(65).raw(std::vector<uint8_t>(8, 7)).take()},
  };
  for (const Bad& c : cases) {
    Status st = c.decode(c.bytes, 0);
    ASSERT_FALSE(st.ok()) << c.reason;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.reason;
    EXPECT_NE(st.message().find(c.api), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
  }
}

// The JSON's default of every pattern type field is 3 (LITERAL); v0 has none on the wire,
// so decoding v0 gives LITERAL, and encoding at v0 leaves a non-LITERAL one out (Kafka
// would refuse to write it: the fields are not ignorable).
TEST(AclsTest, V0HasNoPatternTypeAndReadsAsLiteral) {
  EXPECT_EQ(DescribeAclsRequest{}.pattern_type_filter, 3);
  EXPECT_EQ(DescribeAclsResponse::DescribeAclsResource{}.pattern_type, 3);
  EXPECT_EQ(CreateAclsRequest::AclCreation{}.resource_pattern_type, 3);
  EXPECT_EQ(DeleteAclsRequest::DeleteAclsFilter{}.pattern_type_filter, 3);
  EXPECT_EQ(DeleteAclsResponse::DeleteAclsMatchingAcl{}.pattern_type, 3);

  DescribeAclsRequest describe;
  describe.pattern_type_filter = kPrefixed;  // Decode starts from the defaults
  ASSERT_TRUE(
      DecodeBytes(Golden().i8(kTopic).str("t").nullstr().nullstr().i8(kRead).i8(kAllow).take(), 0,
                  &describe)
          .ok());
  EXPECT_EQ(describe.pattern_type_filter, kLiteral);
  CreateAclsRequest create;
  ASSERT_TRUE(DecodeBytes(GoldenCreateAclsRequest(0), 0, &create).ok());
  EXPECT_EQ(create.creations.at(0).resource_pattern_type, kLiteral);
  DeleteAclsRequest del;
  ASSERT_TRUE(DecodeBytes(GoldenDeleteAclsRequest(0), 0, &del).ok());
  EXPECT_EQ(del.filters.at(0).pattern_type_filter, kLiteral);
  DescribeAclsResponse described;
  ASSERT_TRUE(DecodeBytes(GoldenDescribeAclsResponse(0), 0, &described).ok());
  EXPECT_EQ(described.resources.at(0).pattern_type, kLiteral);
  DeleteAclsResponse deleted;
  ASSERT_TRUE(DecodeBytes(GoldenDeleteAclsResponse(0), 0, &deleted).ok());
  EXPECT_EQ(deleted.filter_results.at(0).matching_acls.at(0).pattern_type, kLiteral);

  EXPECT_EQ(EncodeBytes(MakeCreateAclsRequest(1), 0), GoldenCreateAclsRequest(0));
  EXPECT_EQ(EncodeBytes(MakeDeleteAclsRequest(1), 0), GoldenDeleteAclsRequest(0));
  EXPECT_EQ(EncodeBytes(MakeDescribeAclsResponse(1), 0).size() + 2,
            GoldenDescribeAclsResponse(1).size());  // one pattern type byte per resource
}

// A filter that matches every binding: ANY codes and null strings, in both string forms.
TEST(AclsTest, NullFiltersRoundTrip) {
  const DescribeAclsRequest any{.resource_type_filter = kAny,
                                .pattern_type_filter = kAny,
                                .operation = kAny,
                                .permission_type = kAny};
  const std::vector<uint8_t> v1 =
      Golden().i8(kAny).nullstr().i8(kAny).nullstr().nullstr().i8(kAny).i8(kAny).take();
  const std::vector<uint8_t> v2 =
      Golden().i8(kAny).cnullstr().i8(kAny).cnullstr().cnullstr().i8(kAny).i8(kAny).tags().take();
  EXPECT_EQ(EncodeBytes(any, 1), v1);
  EXPECT_EQ(EncodeBytes(any, 2), v2);
  for (int16_t v : {int16_t{1}, int16_t{2}}) {
    DescribeAclsRequest back;
    back.resource_name_filter = "x";
    ASSERT_TRUE(DecodeBytes(v == 1 ? v1 : v2, v, &back).ok());
    EXPECT_TRUE(back == any) << "v" << v;
  }
}

TEST(AclsTest, UnknownTagsInNestedStructsRoundTrip) {
  // DeleteAclsResponse v2: tag 7 on a matching ACL, tag 2 on its filter result, tag 0 on
  // the response.
  const std::vector<uint8_t> bytes = Golden()
                                         .i32(0)
                                         .carr(1)
                                         .i16(0)
                                         .cnullstr()
                                         .carr(1)
                                         .i16(0)
                                         .cnullstr()
                                         .i8(kTopic)
                                         .cstr("t")
                                         .i8(kLiteral)
                                         .cstr("User:a")
                                         .cstr("*")
                                         .i8(kRead)
                                         .i8(kAllow)
                                         .uvarint(1)
                                         .uvarint(7)
                                         .uvarint(2)
                                         .i16(5)
                                         .uvarint(1)
                                         .uvarint(2)
                                         .uvarint(1)
                                         .i8(1)
                                         .uvarint(1)
                                         .uvarint(0)
                                         .uvarint(0)
                                         .take();
  DeleteAclsResponse m;
  Status st = DecodeBytes(bytes, 2, &m);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const auto& result = m.filter_results.at(0);
  ASSERT_EQ(result.matching_acls.at(0).unknown_tags.size(), 1u);
  EXPECT_EQ(result.matching_acls[0].unknown_tags[0].tag, 7u);
  EXPECT_EQ(result.matching_acls[0].unknown_tags[0].data, (std::vector<uint8_t>{0, 5}));
  ASSERT_EQ(result.unknown_tags.size(), 1u);
  EXPECT_EQ(result.unknown_tags[0].tag, 2u);
  ASSERT_EQ(m.unknown_tags.size(), 1u);
  EXPECT_EQ(m.unknown_tags[0].tag, 0u);
  EXPECT_EQ(EncodeBytes(m, 2), bytes);

  // CreateAclsRequest v3: a tag on the creation.
  const std::vector<uint8_t> create = Golden()
                                          .carr(1)
                                          .i8(kTopic)
                                          .cstr("t")
                                          .i8(kLiteral)
                                          .cstr("User:a")
                                          .cstr("*")
                                          .i8(kRead)
                                          .i8(kAllow)
                                          .uvarint(1)
                                          .uvarint(3)
                                          .uvarint(1)
                                          .i8(9)
                                          .tags()
                                          .take();
  CreateAclsRequest c;
  ASSERT_TRUE(DecodeBytes(create, 3, &c).ok());
  ASSERT_EQ(c.creations.at(0).unknown_tags.size(), 1u);
  EXPECT_EQ(c.creations[0].unknown_tags[0].tag, 3u);
  EXPECT_EQ(EncodeBytes(c, 3), create);
}

// Nulls where the JSON does not allow them, negative and oversized lengths, fields cut
// short, a version the JSON does not list: each fails with an error naming the message,
// its version and the field.
TEST(AclsTest, MalformedInputFailsWithAnError) {
  using Decoder = Status (*)(const std::vector<uint8_t>&, int16_t);
  const Decoder describe_req = &DecodeAs<DescribeAclsRequest>;
  const Decoder describe_resp = &DecodeAs<DescribeAclsResponse>;
  const Decoder create_req = &DecodeAs<CreateAclsRequest>;
  const Decoder create_resp = &DecodeAs<CreateAclsResponse>;
  const Decoder delete_req = &DecodeAs<DeleteAclsRequest>;
  const Decoder delete_resp = &DecodeAs<DeleteAclsResponse>;
  constexpr uint64_t kMinusTwo = 0xffffffffu;  // compact length + 1 = 2^32 - 1
  // One flexible creation, one match-everything filter: what follows a count that lies.
  auto creation = [](Golden g) {
    return g.i8(kTopic).cstr("t").i8(kLiteral).cstr("User:a").cstr("*").i8(kRead).i8(kAllow).tags();
  };
  auto any_filter = [](Golden g) {
    return g.i8(kAny).cnullstr().i8(kAny).cnullstr().cnullstr().i8(kAny).i8(kAny).tags();
  };
  // The bytes of a flexible DescribeAclsResponse up to its one resource's acls.
  auto resource = [] {
    return Golden().i32(0).i16(0).cnullstr().carr(1).i8(kTopic).cstr("t").i8(kLiteral);
  };
  // The bytes of a flexible DeleteAclsResponse up to its one filter result's matching acls.
  auto filter_result = [] { return Golden().i32(0).carr(1).i16(0).cnullstr(); };
  struct Bad {
    Decoder decode;
    int16_t version;
    const char* api;
    const char* reason;  // the field and what is wrong with it, as the error says
    std::vector<uint8_t> bytes;
  };
  const std::vector<Bad> cases = {
      {create_req, 0, "CreateAclsRequest v0", "creations: null where an array",
       Golden().arr(-1).take()},
      {create_req, 1, "CreateAclsRequest v1", "creations: negative array length -2",
       Golden().arr(-2).take()},
      {create_req, 1, "CreateAclsRequest v1", "creations: array of 1000 elements cannot fit",
       Golden().arr(1000).i8(kTopic).str("t").i8(kLiteral).str("U").str("*").i8(3).i8(3).take()},
      {create_req, 2, "CreateAclsRequest v2", "creations: array of 4294967294 elements cannot fit",
       creation(Golden().uvarint(kMinusTwo)).tags().take()},
      {create_req, 0, "CreateAclsRequest v0", "resource name: null where a string",
       Golden().arr(1).i8(kTopic).nullstr().str("User:a").str("*").i8(3).i8(3).take()},
      {create_req, 2, "CreateAclsRequest v2", "principal: null where a string",
       Golden()
           .carr(1)
           .i8(kTopic)
           .cstr("t")
           .i8(3)
           .cnullstr()
           .cstr("*")
           .i8(3)
           .i8(3)
           .tags()
           .tags()
           .take()},
      {create_req, 3, "CreateAclsRequest v3", "host: null where a string",
       Golden()
           .carr(1)
           .i8(kTopic)
           .cstr("t")
           .i8(3)
           .cstr("User:a")
           .cnullstr()
           .i8(3)
           .i8(3)
           .tags()
           .tags()
           .take()},
      {create_req, 4, "CreateAclsRequest v4", "unsupported version (0-3)",
       GoldenCreateAclsRequest(3)},
      {create_resp, 0, "CreateAclsResponse v0", "results: null where an array",
       Golden().i32(0).arr(-1).take()},
      {create_resp, 2, "CreateAclsResponse v2", "error message: needs 29 bytes",
       Golden().i32(0).carr(1).i16(42).uvarint(30).raw(std::string("bad")).take()},
      {describe_req, 0, "DescribeAclsRequest v0", "resource name filter: negative string length -2",
       Golden().i8(kTopic).i16(-2).nullstr().nullstr().i8(3).i8(3).take()},
      {describe_req, 1, "DescribeAclsRequest v1", "pattern type filter: needs 1 bytes",
       Golden().i8(kTopic).nullstr().take()},
      {describe_req, 2, "DescribeAclsRequest v2", "principal filter: needs 20 bytes",
       Golden().i8(kTopic).cnullstr().i8(3).uvarint(21).raw(std::string("User:a")).take()},
      {describe_req, -1, "DescribeAclsRequest v-1", "unsupported version (0-3)",
       GoldenDescribeAclsRequest(0)},
      {describe_resp, 1, "DescribeAclsResponse v1", "resources: null where an array",
       Golden().i32(0).i16(0).nullstr().arr(-1).take()},
      {describe_resp, 0, "DescribeAclsResponse v0", "resource name: null where a string",
       Golden().i32(0).i16(0).nullstr().arr(1).i8(kTopic).nullstr().arr(0).take()},
      {describe_resp, 3, "DescribeAclsResponse v3", "acls: null where an array",
       resource().carr(-1).tags().tags().take()},
      {describe_resp, 2, "DescribeAclsResponse v2", "acls: array of 4294967294 elements cannot fit",
       resource()
           .uvarint(kMinusTwo)
           .cstr("User:a")
           .cstr("*")
           .i8(3)
           .i8(3)
           .tags()
           .tags()
           .tags()
           .take()},
      {describe_resp, 2, "DescribeAclsResponse v2", "host: null where a string",
       resource().carr(1).cstr("User:a").cnullstr().i8(3).i8(3).tags().tags().tags().take()},
      {delete_req, 1, "DeleteAclsRequest v1", "filters: null where an array",
       Golden().arr(-1).take()},
      {delete_req, 3, "DeleteAclsRequest v3", "filters: array of 4294967294 elements cannot fit",
       any_filter(Golden().uvarint(kMinusTwo)).tags().take()},
      {delete_req, 0, "DeleteAclsRequest v0", "host filter: negative string length -5",
       Golden().arr(1).i8(kAny).nullstr().nullstr().i16(-5).i8(1).i8(1).take()},
      {delete_resp, 1, "DeleteAclsResponse v1", "filter results: null where an array",
       Golden().i32(0).arr(-1).take()},
      {delete_resp, 2, "DeleteAclsResponse v2", "matching acls: null where an array",
       filter_result().carr(-1).tags().tags().take()},
      {delete_resp, 2, "DeleteAclsResponse v2",
       "matching acls: array of 4294967294 elements cannot fit",
       filter_result().uvarint(kMinusTwo).i16(0).cnullstr().i8(kTopic).cstr("t").i8(3).take()},
      {delete_resp, 0, "DeleteAclsResponse v0", "resource name: null where a string",
       Golden()
           .i32(0)
           .arr(1)
           .i16(0)
           .nullstr()
           .arr(1)
           .i16(0)
           .nullstr()
           .i8(kTopic)
           .nullstr()
           .str("User:a")
           .str("*")
           .i8(3)
           .i8(3)
           .take()},
      {delete_resp, 3, "DeleteAclsResponse v3", "principal: null where a string",
       filter_result()
           .carr(1)
           .i16(0)
           .cnullstr()
           .i8(kTopic)
           .cstr("t")
           .i8(3)
           .cnullstr()
           .cstr("*")
           .i8(3)
           .i8(3)
           .tags()
           .tags()
           .tags()
           .take()},
  };
  for (const Bad& c : cases) {
    Status st = c.decode(c.bytes, c.version);
    ASSERT_FALSE(st.ok()) << c.api << ": " << c.reason;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.reason;
    EXPECT_NE(st.message().find(c.api), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
  }
}

// Kafka answers a failed describe with an error and null entries; a response built
// without entries has an empty array, Kafka's default.
TEST(ClientQuotasTest, NullEntriesRoundTripWithTheError) {
  DescribeClientQuotasResponse failed;
  failed.error_code = ErrorCode::kClusterAuthorizationFailed;
  failed.error_message = "denied";
  failed.entries = nullopt;
  const std::vector<uint8_t> v0 = Golden().i32(0).i16(31).str("denied").arr(-1).take();
  const std::vector<uint8_t> v1 = Golden().i32(0).i16(31).cstr("denied").carr(-1).tags().take();
  EXPECT_EQ(EncodeBytes(failed, 0), v0);
  EXPECT_EQ(EncodeBytes(failed, 1), v1);
  for (int16_t v : {int16_t{0}, int16_t{1}}) {
    DescribeClientQuotasResponse back;
    ASSERT_TRUE(back.entries.has_value());  // Decode must reset it, not keep it
    ASSERT_TRUE(DecodeBytes(v == 0 ? v0 : v1, v, &back).ok());
    EXPECT_TRUE(back == failed) << "v" << v;
  }
  EXPECT_EQ(EncodeBytes(DescribeClientQuotasResponse{}, 1),
            Golden().i32(0).i16(0).cnullstr().carr(0).tags().take());
}

// Values are doubles read and written bit for bit: -0.0 keeps its sign, a NaN its payload,
// infinities and the smallest subnormal pass, so a decoded request re-encodes unchanged.
TEST(ClientQuotasTest, ValuesRoundTripBitForBit) {
  const std::vector<int64_t> bits = {
      static_cast<int64_t>(0x8000000000000000),  // -0.0
      0x7ff8000000000123,                        // a quiet NaN with a payload
      0x7ff0000000000000,                        // +inf
      static_cast<int64_t>(0xfff0000000000000),  // -inf
      0x0000000000000001,                        // the smallest subnormal
      0x7fefffffffffffff,                        // the largest finite double
  };
  Golden g;
  g.carr(1).carr(1).cstr("user").cnullstr().tags().carr(static_cast<int64_t>(bits.size()));
  for (int64_t b : bits) g.cstr("k").i64(b).boolean(false).tags();
  g.tags().boolean(false).tags();
  const std::vector<uint8_t> bytes = g.take();
  AlterClientQuotasRequest m;
  Status st = DecodeBytes(bytes, 1, &m);
  ASSERT_TRUE(st.ok()) << st.ToString();
  const auto& ops = m.entries.at(0).ops;
  ASSERT_EQ(ops.size(), bits.size());
  EXPECT_EQ(ops[0].value, 0.0);
  EXPECT_TRUE(std::signbit(ops[0].value));
  EXPECT_TRUE(std::isnan(ops[1].value));
  EXPECT_EQ(ops[2].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(ops[3].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(ops[4].value, std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(ops[5].value, std::numeric_limits<double>::max());
  EXPECT_EQ(EncodeBytes(m, 1), bytes);
}

TEST(ClientQuotasTest, UnknownTagsInNestedStructsRoundTrip) {
  // DescribeClientQuotasResponse v1: tag 4 on an entity, tag 6 on a value, tag 1 on the
  // entry, tag 0 on the response.
  const std::vector<uint8_t> bytes = Golden()
                                         .i32(0)
                                         .i16(0)
                                         .cnullstr()
                                         .carr(1)
                                         .carr(1)
                                         .cstr("user")
                                         .cstr("alice")
                                         .uvarint(1)
                                         .uvarint(4)
                                         .uvarint(1)
                                         .i8(9)
                                         .carr(1)
                                         .cstr("producer_byte_rate")
                                         .i64(kBits1048576)
                                         .uvarint(1)
                                         .uvarint(6)
                                         .uvarint(2)
                                         .i16(5)
                                         .uvarint(1)
                                         .uvarint(1)
                                         .uvarint(0)
                                         .uvarint(1)
                                         .uvarint(0)
                                         .uvarint(1)
                                         .i8(3)
                                         .take();
  DescribeClientQuotasResponse m;
  Status st = DecodeBytes(bytes, 1, &m);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(m.entries.has_value());
  const auto& entry = m.entries->at(0);
  ASSERT_EQ(entry.entity.at(0).unknown_tags.size(), 1u);
  EXPECT_EQ(entry.entity[0].unknown_tags[0].tag, 4u);
  EXPECT_EQ(entry.entity[0].unknown_tags[0].data, (std::vector<uint8_t>{9}));
  ASSERT_EQ(entry.values.at(0).unknown_tags.size(), 1u);
  EXPECT_EQ(entry.values[0].unknown_tags[0].tag, 6u);
  EXPECT_EQ(entry.values[0].unknown_tags[0].data, (std::vector<uint8_t>{0, 5}));
  EXPECT_EQ(entry.values[0].value, 1048576.0);
  ASSERT_EQ(entry.unknown_tags.size(), 1u);
  EXPECT_EQ(entry.unknown_tags[0].tag, 1u);
  EXPECT_TRUE(entry.unknown_tags[0].data.empty());
  ASSERT_EQ(m.unknown_tags.size(), 1u);
  EXPECT_EQ(m.unknown_tags[0].tag, 0u);
  EXPECT_EQ(EncodeBytes(m, 1), bytes);

  // AlterClientQuotasRequest v1: a tag on the op; DescribeClientQuotasRequest v1: on the
  // component.
  const std::vector<uint8_t> alter = Golden()
                                         .carr(1)
                                         .carr(1)
                                         .cstr("user")
                                         .cnullstr()
                                         .tags()
                                         .carr(1)
                                         .cstr("request_percentage")
                                         .i64(kBits250)
                                         .boolean(false)
                                         .uvarint(1)
                                         .uvarint(2)
                                         .uvarint(1)
                                         .i8(7)
                                         .tags()
                                         .boolean(false)
                                         .tags()
                                         .take();
  AlterClientQuotasRequest a;
  ASSERT_TRUE(DecodeBytes(alter, 1, &a).ok());
  ASSERT_EQ(a.entries.at(0).ops.at(0).unknown_tags.size(), 1u);
  EXPECT_EQ(a.entries[0].ops[0].unknown_tags[0].tag, 2u);
  EXPECT_EQ(EncodeBytes(a, 1), alter);
  const std::vector<uint8_t> describe = Golden()
                                            .carr(1)
                                            .cstr("ip")
                                            .i8(2)
                                            .cnullstr()
                                            .uvarint(1)
                                            .uvarint(5)
                                            .uvarint(0)
                                            .boolean(true)
                                            .tags()
                                            .take();
  DescribeClientQuotasRequest d;
  ASSERT_TRUE(DecodeBytes(describe, 1, &d).ok());
  ASSERT_EQ(d.components.at(0).unknown_tags.size(), 1u);
  EXPECT_EQ(d.components[0].unknown_tags[0].tag, 5u);
  EXPECT_EQ(EncodeBytes(d, 1), describe);
}

// Nulls where the JSON does not allow them, negative and oversized lengths, fields cut
// short, a version the JSON does not list: each fails with an error naming the message,
// its version and the field.
TEST(ClientQuotasTest, MalformedInputFailsWithAnError) {
  using Decoder = Status (*)(const std::vector<uint8_t>&, int16_t);
  const Decoder describe_req = &DecodeAs<DescribeClientQuotasRequest>;
  const Decoder describe_resp = &DecodeAs<DescribeClientQuotasResponse>;
  const Decoder alter_req = &DecodeAs<AlterClientQuotasRequest>;
  const Decoder alter_resp = &DecodeAs<AlterClientQuotasResponse>;
  constexpr uint64_t kMinusTwo = 0xffffffffu;  // compact length + 1 = 2^32 - 1
  // The bytes of a DescribeClientQuotasResponse up to its one entry's entity array.
  auto entry = [](bool f) { return Golden().i32(0).i16(0).ns(f).a(f, 1); };
  // The bytes of an AlterClientQuotasRequest up to its one entry's ops array.
  auto alteration = [](bool f) { return Golden().a(f, 1).a(f, 1).s(f, "user").ns(f).t(f); };
  struct Bad {
    Decoder decode;
    int16_t version;
    const char* api;
    const char* reason;  // the field and what is wrong with it, as the error says
    std::vector<uint8_t> bytes;
  };
  const std::vector<Bad> cases = {
      {describe_req, 0, "DescribeClientQuotasRequest v0", "components: null where an array",
       Golden().arr(-1).boolean(false).take()},
      {describe_req, 0, "DescribeClientQuotasRequest v0", "components: negative array length -2",
       Golden().arr(-2).boolean(false).take()},
      {describe_req, 1, "DescribeClientQuotasRequest v1",
       "components: array of 4294967294 elements cannot fit",
       Golden()
           .uvarint(kMinusTwo)
           .cstr("user")
           .i8(0)
           .cstr("a")
           .tags()
           .boolean(false)
           .tags()
           .take()},
      {describe_req, 0, "DescribeClientQuotasRequest v0", "entity type: null where a string",
       Golden().arr(1).nullstr().i8(1).nullstr().boolean(false).take()},
      {describe_req, 1, "DescribeClientQuotasRequest v1", "match: needs 39 bytes",
       Golden().carr(1).cstr("user").i8(0).uvarint(40).raw(std::string("alice")).take()},
      {describe_req, 0, "DescribeClientQuotasRequest v0", "match: negative string length -3",
       Golden().arr(1).str("user").i8(0).i16(-3).boolean(false).take()},
      {describe_req, 0, "DescribeClientQuotasRequest v0", "strict: needs 1 bytes",
       Golden().arr(0).take()},
      {describe_req, 2, "DescribeClientQuotasRequest v2", "unsupported version (0-1)",
       GoldenDescribeClientQuotasRequest(1)},
      {describe_resp, 0, "DescribeClientQuotasResponse v0", "error message: negative string",
       Golden().i32(0).i16(0).i16(-2).arr(0).take()},
      {describe_resp, 1, "DescribeClientQuotasResponse v1",
       "entries: array of 4294967294 elements cannot fit",
       Golden().i32(0).i16(0).cnullstr().uvarint(kMinusTwo).carr(0).carr(0).tags().tags().take()},
      {describe_resp, 0, "DescribeClientQuotasResponse v0", "entries: negative array length -5",
       Golden().i32(0).i16(0).nullstr().arr(-5).take()},
      {describe_resp, 0, "DescribeClientQuotasResponse v0", "entity: null where an array",
       entry(false).arr(-1).arr(0).take()},
      {describe_resp, 1, "DescribeClientQuotasResponse v1",
       "entity: array of 4294967294 elements cannot fit",
       entry(true).uvarint(kMinusTwo).cstr("user").cnullstr().tags().carr(0).tags().tags().take()},
      {describe_resp, 1, "DescribeClientQuotasResponse v1", "entity type: null where a string",
       entry(true).carr(1).cnullstr().cnullstr().tags().carr(0).tags().tags().take()},
      {describe_resp, 1, "DescribeClientQuotasResponse v1", "entity name: needs 19 bytes",
       entry(true).carr(1).cstr("user").uvarint(20).raw(std::string("al")).take()},
      {describe_resp, 1, "DescribeClientQuotasResponse v1", "values: null where an array",
       entry(true).carr(0).carr(-1).tags().tags().take()},
      {describe_resp, 0, "DescribeClientQuotasResponse v0", "values: array of 2 elements cannot",
       entry(false).arr(0).arr(2).str("k").i64(kBitsHalf).take()},
      {describe_resp, 0, "DescribeClientQuotasResponse v0", "key: null where a string",
       entry(false).arr(0).arr(1).nullstr().i64(kBitsHalf).take()},
      {describe_resp, 0, "DescribeClientQuotasResponse v0", "value: needs 8 bytes, 5 left",
       entry(false).arr(0).arr(1).str("abc").i32(0).i8(0).take()},
      {alter_req, 0, "AlterClientQuotasRequest v0", "entries: null where an array",
       Golden().arr(-1).boolean(false).take()},
      {alter_req, 1, "AlterClientQuotasRequest v1",
       "entries: array of 4294967294 elements cannot fit",
       Golden().uvarint(kMinusTwo).carr(0).carr(0).tags().boolean(false).tags().take()},
      {alter_req, 0, "AlterClientQuotasRequest v0", "entity: negative array length -2",
       Golden().arr(1).arr(-2).arr(0).boolean(false).take()},
      {alter_req, 1, "AlterClientQuotasRequest v1", "entity type: null where a string",
       Golden()
           .carr(1)
           .carr(1)
           .cnullstr()
           .cstr("a")
           .tags()
           .carr(0)
           .tags()
           .boolean(false)
           .tags()
           .take()},
      {alter_req, 0, "AlterClientQuotasRequest v0", "ops: null where an array",
       alteration(false).arr(-1).boolean(false).take()},
      {alter_req, 0, "AlterClientQuotasRequest v0", "ops: negative array length -3",
       alteration(false).arr(-3).boolean(false).take()},
      {alter_req, 1, "AlterClientQuotasRequest v1", "ops: array of 4294967294 elements cannot fit",
       alteration(true)
           .uvarint(kMinusTwo)
           .cstr("k")
           .i64(kBitsHalf)
           .boolean(false)
           .tags()
           .tags()
           .boolean(false)
           .tags()
           .take()},
      {alter_req, 1, "AlterClientQuotasRequest v1", "key: null where a string",
       alteration(true).carr(1).cnullstr().i64(kBitsHalf).boolean(false).tags().take()},
      {alter_req, 0, "AlterClientQuotasRequest v0", "value: needs 8 bytes, 3 left",
       alteration(false).arr(1).str("abcdefgh").raw(std::string("abc")).take()},
      {alter_req, 0, "AlterClientQuotasRequest v0", "remove: needs 1 bytes",
       alteration(false).arr(1).str("k").i64(kBitsHalf).take()},
      {alter_req, 1, "AlterClientQuotasRequest v1", "validate only: needs 1 bytes",
       Golden().carr(0).take()},
      {alter_req, -1, "AlterClientQuotasRequest v-1", "unsupported version (0-1)",
       GoldenAlterClientQuotasRequest(0)},
      {alter_resp, 0, "AlterClientQuotasResponse v0", "entries: null where an array",
       Golden().i32(0).arr(-1).take()},
      {alter_resp, 1, "AlterClientQuotasResponse v1", "error message: needs 29 bytes",
       Golden().i32(0).carr(1).i16(42).uvarint(30).raw(std::string("bad")).take()},
      {alter_resp, 0, "AlterClientQuotasResponse v0", "entity: null where an array",
       Golden().i32(0).arr(1).i16(0).nullstr().arr(-1).take()},
      {alter_resp, 1, "AlterClientQuotasResponse v1",
       "entity: array of 4294967294 elements cannot fit",
       Golden().i32(0).carr(1).i16(0).cnullstr().uvarint(kMinusTwo).cstr("ip").cnullstr().take()},
      {alter_resp, 0, "AlterClientQuotasResponse v0", "entity name: negative string length -4",
       Golden().i32(0).arr(1).i16(0).nullstr().arr(1).str("user").i16(-4).take()},
      {alter_resp, 2, "AlterClientQuotasResponse v2", "unsupported version (0-1)",
       GoldenAlterClientQuotasResponse(1)},
  };
  for (const Bad& c : cases) {
    Status st = c.decode(c.bytes, c.version);
    ASSERT_FALSE(st.ok()) << c.api << ": " << c.reason;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.reason;
    EXPECT_NE(st.message().find(c.api), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.reason), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace admin_test
}  // namespace sluice::kafka
