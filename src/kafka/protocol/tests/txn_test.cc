// Tests of the transaction API codecs (messages/txn.h): every version of every request
// and response (Kafka's JSON validVersions, which may reach past what api.cc advertises)
// against golden bytes built from Kafka's JSON field lists, and malformed input.
#include "kafka/protocol/messages/txn.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "kafka/protocol/api.h"
#include "kafka/protocol/requests.h"
#include "kafka/protocol/tests/golden.h"
#include "kafka/protocol/tests/message_harness.h"

// The samples use designated initializers that leave unknown_tags, and fields a version
// lacks, at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace sluice::kafka {
namespace txn_test {
namespace {

using namespace testing;  // Golden and the harness (message_harness.h)

// Flexible per Kafka's JSON "flexibleVersions", restated here rather than read from
// api.cc so that a wrong entry there fails a test.
bool Flexible(ApiKey key, int16_t v) {
  switch (key) {
    case ApiKey::kAddPartitionsToTxn:
    case ApiKey::kAddOffsetsToTxn:
    case ApiKey::kEndTxn:
    case ApiKey::kTxnOffsetCommit:
      return v >= 3;
    case ApiKey::kWriteTxnMarkers:
      return v >= 1;
    default:
      return true;  // DescribeProducers, DescribeTransactions, ListTransactions: 0+
  }
}

// A topic with partitions 0 and 7 (TxnTopic) and its bytes.
TxnTopic Topic(const std::string& name) { return {.name = name, .partitions = {0, 7}}; }
void TopicGolden(Golden& g, bool f, const std::string& name) {
  g.s(f, name).a(f, 2).i32(0).i32(7).t(f);
}

// Per-partition errors of two topics (TxnTopicErrors) and their bytes.
std::vector<TxnTopicErrors> TopicErrors() {
  return {
      {.name = "orders",
       .partitions = {{.partition_index = 0, .error_code = ErrorCode::kNone},
                      {.partition_index = 3, .error_code = ErrorCode::kConcurrentTransactions}}},
      {.name = "empty"}};
}
void TopicErrorsGolden(Golden& g, bool f) {
  g.a(f, 2).s(f, "orders").a(f, 2).i32(0).i16(0).t(f).i32(3).i16(51).t(f).t(f);
  g.s(f, "empty").a(f, 0).t(f);
}

// ------------------------------------------------------------------ AddPartitionsToTxn

AddPartitionsToTxnRequest AddPartitionsToTxnRequestSample(int16_t v, bool) {
  AddPartitionsToTxnRequest m;
  if (v >= 4) {
    m.transactions = {
        {.transactional_id = "txn-a",
         .producer_id = 4000,
         .producer_epoch = 3,
         .verify_only = true,
         .topics = {Topic("orders"), Topic("payments")}},
        {.transactional_id = "txn-b", .producer_id = 4001, .producer_epoch = 0},
    };
  } else {
    m.v3_and_below_transactional_id = "txn-a";
    m.v3_and_below_producer_id = 4000;
    m.v3_and_below_producer_epoch = 3;
    m.v3_and_below_topics = {Topic("orders"), Topic("payments")};
  }
  return m;
}

Bytes AddPartitionsToTxnRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kAddPartitionsToTxn, v);
  Golden g;
  if (v >= 4) {
    g.a(f, 2);
    g.s(f, "txn-a").i64(4000).i16(3).boolean(true).a(f, 2);
    TopicGolden(g, f, "orders");
    TopicGolden(g, f, "payments");
    g.t(f);
    g.s(f, "txn-b").i64(4001).i16(0).boolean(false).a(f, 0).t(f);
  } else {
    g.s(f, "txn-a").i64(4000).i16(3).a(f, 2);
    TopicGolden(g, f, "orders");
    TopicGolden(g, f, "payments");
  }
  g.t(f);
  return g.take();
}

AddPartitionsToTxnResponse AddPartitionsToTxnResponseSample(int16_t v, bool) {
  AddPartitionsToTxnResponse m;
  m.throttle_time_ms = 12;
  if (v >= 4) {
    m.error_code = ErrorCode::kTransactionAbortable;
    m.results_by_transaction = {{.transactional_id = "txn-a", .topic_results = TopicErrors()},
                                {.transactional_id = "txn-b"}};
  } else {
    m.results_by_topic_v3_and_below = TopicErrors();
  }
  return m;
}

Bytes AddPartitionsToTxnResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kAddPartitionsToTxn, v);
  Golden g;
  g.i32(12);
  if (v >= 4) {
    g.i16(120).a(f, 2).s(f, "txn-a");
    TopicErrorsGolden(g, f);
    g.t(f).s(f, "txn-b").a(f, 0).t(f);
  } else {
    TopicErrorsGolden(g, f);
  }
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ AddOffsetsToTxn

AddOffsetsToTxnRequest AddOffsetsToTxnRequestSample(int16_t, bool) {
  return {.transactional_id = "txn-a",
          .producer_id = 0x0102030405060708,
          .producer_epoch = 9,
          .group_id = "group-a"};
}

Bytes AddOffsetsToTxnRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kAddOffsetsToTxn, v);
  return Golden().s(f, "txn-a").i64(0x0102030405060708).i16(9).s(f, "group-a").t(f).take();
}

AddOffsetsToTxnResponse AddOffsetsToTxnResponseSample(int16_t, bool) {
  return {.throttle_time_ms = 7, .error_code = ErrorCode::kProducerFenced};
}

Bytes AddOffsetsToTxnResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kAddOffsetsToTxn, v);
  return Golden().i32(7).i16(90).t(f).take();
}

// ------------------------------------------------------------------ EndTxn

EndTxnRequest EndTxnRequestSample(int16_t, bool) {
  return {.transactional_id = "txn-a", .producer_id = 4000, .producer_epoch = 3, .committed = true};
}

Bytes EndTxnRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kEndTxn, v);
  return Golden().s(f, "txn-a").i64(4000).i16(3).boolean(true).t(f).take();
}

EndTxnResponse EndTxnResponseSample(int16_t v, bool) {
  EndTxnResponse m{.throttle_time_ms = 1, .error_code = ErrorCode::kInvalidTxnState};
  if (v >= 5) {
    m.producer_id = 4000;
    m.producer_epoch = 4;
  }
  return m;
}

Bytes EndTxnResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kEndTxn, v);
  Golden g;
  g.i32(1).i16(48);
  if (v >= 5) g.i64(4000).i16(4);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ TxnOffsetCommit

TxnOffsetCommitRequest TxnOffsetCommitRequestSample(int16_t v, bool nulls) {
  TxnOffsetCommitRequest m;
  m.transactional_id = "txn-a";
  m.group_id = "group-a";
  m.producer_id = 4000;
  m.producer_epoch = 3;
  if (v >= 3) {
    m.generation_id = 5;
    m.member_id = "member-1";
    m.group_instance_id = Opt(nulls, "instance-1");
  }
  TxnOffsetCommitRequest::Partition p0{
      .partition_index = 0, .committed_offset = 1234, .committed_metadata = Opt(nulls, "meta")};
  TxnOffsetCommitRequest::Partition p1{
      .partition_index = 2, .committed_offset = 99, .committed_metadata = ""};
  if (v >= 2) {
    p0.committed_leader_epoch = 6;
    p1.committed_leader_epoch = 7;
  }
  m.topics = {{.name = "orders", .partitions = {p0, p1}}, {.name = "empty"}};
  return m;
}

Bytes TxnOffsetCommitRequestGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kTxnOffsetCommit, v);
  Golden g;
  g.s(f, "txn-a").s(f, "group-a").i64(4000).i16(3);
  if (v >= 3) {
    g.i32(5).s(f, "member-1");
    NStr(g, f, Opt(nulls, "instance-1"));
  }
  g.a(f, 2).s(f, "orders").a(f, 2);
  g.i32(0).i64(1234);
  if (v >= 2) g.i32(6);
  NStr(g, f, Opt(nulls, "meta"));
  g.t(f);
  g.i32(2).i64(99);
  if (v >= 2) g.i32(7);
  g.s(f, "").t(f);
  g.t(f);
  g.s(f, "empty").a(f, 0).t(f);
  g.t(f);
  return g.take();
}

TxnOffsetCommitResponse TxnOffsetCommitResponseSample(int16_t, bool) {
  return {.throttle_time_ms = 3, .topics = TopicErrors()};
}

Bytes TxnOffsetCommitResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kTxnOffsetCommit, v);
  Golden g;
  g.i32(3);
  TopicErrorsGolden(g, f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ WriteTxnMarkers

WriteTxnMarkersRequest WriteTxnMarkersRequestSample(int16_t, bool) {
  WriteTxnMarkersRequest m;
  m.markers = {{.producer_id = 4000,
                .producer_epoch = 3,
                .transaction_result = true,
                .topics = {Topic("orders"), Topic("__consumer_offsets")},
                .coordinator_epoch = 17},
               {.producer_id = 4001, .producer_epoch = 1, .coordinator_epoch = -1}};
  return m;
}

Bytes WriteTxnMarkersRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kWriteTxnMarkers, v);
  Golden g;
  g.a(f, 2).i64(4000).i16(3).boolean(true).a(f, 2);
  TopicGolden(g, f, "orders");
  TopicGolden(g, f, "__consumer_offsets");
  g.i32(17).t(f);
  g.i64(4001).i16(1).boolean(false).a(f, 0).i32(-1).t(f);
  g.t(f);
  return g.take();
}

WriteTxnMarkersResponse WriteTxnMarkersResponseSample(int16_t, bool) {
  WriteTxnMarkersResponse m;
  m.markers = {{.producer_id = 4000, .topics = TopicErrors()}, {.producer_id = 4001}};
  return m;
}

Bytes WriteTxnMarkersResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kWriteTxnMarkers, v);
  Golden g;
  g.a(f, 2).i64(4000);
  TopicErrorsGolden(g, f);
  g.t(f).i64(4001).a(f, 0).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ DescribeProducers

DescribeProducersRequest DescribeProducersRequestSample(int16_t, bool) {
  return {.topics = {Topic("orders"), {.name = "none"}}};
}

Bytes DescribeProducersRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kDescribeProducers, v);
  Golden g;
  g.a(f, 2);
  TopicGolden(g, f, "orders");
  g.s(f, "none").a(f, 0).t(f);
  g.t(f);
  return g.take();
}

DescribeProducersResponse DescribeProducersResponseSample(int16_t, bool nulls) {
  DescribeProducersResponse m;
  m.throttle_time_ms = 2;
  DescribeProducersResponse::Partition p0{
      .partition_index = 0,
      .active_producers = {{.producer_id = 4000,
                            .producer_epoch = 70000,  // int32 on this wire
                            .last_sequence = 41,
                            .last_timestamp = 1700000000000,
                            .coordinator_epoch = 2,
                            .current_txn_start_offset = 120},
                           {.producer_id = 4001, .producer_epoch = 0}}};
  DescribeProducersResponse::Partition p1{.partition_index = 9,
                                          .error_code = ErrorCode::kNotLeaderOrFollower,
                                          .error_message = Opt(nulls, "not the leader")};
  m.topics = {{.name = "orders", .partitions = {p0, p1}}};
  return m;
}

Bytes DescribeProducersResponseGolden(int16_t v, bool nulls) {
  const bool f = Flexible(ApiKey::kDescribeProducers, v);
  Golden g;
  g.i32(2).a(f, 1).s(f, "orders").a(f, 2);
  g.i32(0).i16(0).ns(f).a(f, 2);
  g.i64(4000).i32(70000).i32(41).i64(1700000000000).i32(2).i64(120).t(f);
  g.i64(4001).i32(0).i32(-1).i64(-1).i32(0).i64(-1).t(f);
  g.t(f);
  g.i32(9).i16(6);
  NStr(g, f, Opt(nulls, "not the leader"));
  g.a(f, 0).t(f);
  g.t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ DescribeTransactions

DescribeTransactionsRequest DescribeTransactionsRequestSample(int16_t, bool) {
  return {.transactional_ids = {"txn-a", "txn-b"}};
}

Bytes DescribeTransactionsRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kDescribeTransactions, v);
  return Golden().a(f, 2).s(f, "txn-a").s(f, "txn-b").t(f).take();
}

DescribeTransactionsResponse DescribeTransactionsResponseSample(int16_t, bool) {
  DescribeTransactionsResponse m;
  m.throttle_time_ms = 4;
  m.transaction_states = {
      {.transactional_id = "txn-a",
       .transaction_state = "Ongoing",
       .transaction_timeout_ms = 60000,
       .transaction_start_time_ms = 1700000000000,
       .producer_id = 4000,
       .producer_epoch = 3,
       .topics = {Topic("orders")}},
      {.error_code = ErrorCode::kTransactionalIdNotFound,
       .transactional_id = "txn-b",
       .transaction_state = "",
       .transaction_start_time_ms = -1,
       .producer_id = -1,
       .producer_epoch = -1},
  };
  return m;
}

Bytes DescribeTransactionsResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kDescribeTransactions, v);
  Golden g;
  g.i32(4).a(f, 2);
  g.i16(0).s(f, "txn-a").s(f, "Ongoing").i32(60000).i64(1700000000000).i64(4000).i16(3);
  g.a(f, 1);
  TopicGolden(g, f, "orders");
  g.t(f);
  g.i16(105).s(f, "txn-b").s(f, "").i32(0).i64(-1).i64(-1).i16(-1).a(f, 0).t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ ListTransactions

ListTransactionsRequest ListTransactionsRequestSample(int16_t v, bool) {
  ListTransactionsRequest m;
  m.state_filters = {"Ongoing", "PrepareCommit"};
  m.producer_id_filters = {4000, 0x7fffffffffffffff};
  if (v >= 1) m.duration_filter = 300000;
  return m;
}

Bytes ListTransactionsRequestGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kListTransactions, v);
  Golden g;
  g.a(f, 2).s(f, "Ongoing").s(f, "PrepareCommit");
  g.a(f, 2).i64(4000).i64(0x7fffffffffffffff);
  if (v >= 1) g.i64(300000);
  g.t(f);
  return g.take();
}

ListTransactionsResponse ListTransactionsResponseSample(int16_t, bool) {
  ListTransactionsResponse m;
  m.throttle_time_ms = 5;
  m.error_code = ErrorCode::kCoordinatorLoadInProgress;
  m.unknown_state_filters = {"Sleeping"};
  m.transaction_states = {
      {.transactional_id = "txn-a", .producer_id = 4000, .transaction_state = "Ongoing"},
      {.transactional_id = "txn-b", .producer_id = 4001, .transaction_state = "CompleteAbort"}};
  return m;
}

Bytes ListTransactionsResponseGolden(int16_t v, bool) {
  const bool f = Flexible(ApiKey::kListTransactions, v);
  Golden g;
  g.i32(5).i16(14).a(f, 1).s(f, "Sleeping").a(f, 2);
  g.s(f, "txn-a").i64(4000).s(f, "Ongoing").t(f);
  g.s(f, "txn-b").i64(4001).s(f, "CompleteAbort").t(f);
  g.t(f);
  return g.take();
}

// ------------------------------------------------------------------ specs

#define TXN_SPEC(Name, Key, Max) \
  const Spec<Name> k##Name##Spec { #Name, ApiKey::Key, &Name##Sample, &Name##Golden, Max }

TXN_SPEC(AddPartitionsToTxnRequest, kAddPartitionsToTxn, 5);
TXN_SPEC(AddPartitionsToTxnResponse, kAddPartitionsToTxn, 5);
TXN_SPEC(AddOffsetsToTxnRequest, kAddOffsetsToTxn, 4);
TXN_SPEC(AddOffsetsToTxnResponse, kAddOffsetsToTxn, 4);
TXN_SPEC(EndTxnRequest, kEndTxn, 5);
TXN_SPEC(EndTxnResponse, kEndTxn, 5);
TXN_SPEC(TxnOffsetCommitRequest, kTxnOffsetCommit, 4);
TXN_SPEC(TxnOffsetCommitResponse, kTxnOffsetCommit, 4);
TXN_SPEC(WriteTxnMarkersRequest, kWriteTxnMarkers, 1);
TXN_SPEC(WriteTxnMarkersResponse, kWriteTxnMarkers, 1);
TXN_SPEC(DescribeProducersRequest, kDescribeProducers, 0);
TXN_SPEC(DescribeProducersResponse, kDescribeProducers, 0);
TXN_SPEC(DescribeTransactionsRequest, kDescribeTransactions, 0);
TXN_SPEC(DescribeTransactionsResponse, kDescribeTransactions, 0);
TXN_SPEC(ListTransactionsRequest, kListTransactions, 1);
TXN_SPEC(ListTransactionsResponse, kListTransactions, 1);
#undef TXN_SPEC

// ------------------------------------------------------------------ every version

TEST(TxnCodecTest, AddPartitionsToTxnRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kAddPartitionsToTxnRequestSpec);
}
TEST(TxnCodecTest, AddPartitionsToTxnResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kAddPartitionsToTxnResponseSpec);
}
TEST(TxnCodecTest, AddOffsetsToTxnRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kAddOffsetsToTxnRequestSpec);
}
TEST(TxnCodecTest, AddOffsetsToTxnResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kAddOffsetsToTxnResponseSpec);
}
TEST(TxnCodecTest, EndTxnRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kEndTxnRequestSpec);
}
TEST(TxnCodecTest, EndTxnResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kEndTxnResponseSpec);
}
TEST(TxnCodecTest, TxnOffsetCommitRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kTxnOffsetCommitRequestSpec);
}
TEST(TxnCodecTest, TxnOffsetCommitResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kTxnOffsetCommitResponseSpec);
}
TEST(TxnCodecTest, WriteTxnMarkersRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kWriteTxnMarkersRequestSpec);
}
TEST(TxnCodecTest, WriteTxnMarkersResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kWriteTxnMarkersResponseSpec);
}
TEST(TxnCodecTest, DescribeProducersRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDescribeProducersRequestSpec);
}
TEST(TxnCodecTest, DescribeProducersResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDescribeProducersResponseSpec);
}
TEST(TxnCodecTest, DescribeTransactionsRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDescribeTransactionsRequestSpec);
}
TEST(TxnCodecTest, DescribeTransactionsResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kDescribeTransactionsResponseSpec);
}
TEST(TxnCodecTest, ListTransactionsRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kListTransactionsRequestSpec);
}
TEST(TxnCodecTest, ListTransactionsResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(kListTransactionsResponseSpec);
}

// ------------------------------------------------------------------ version table

TEST(TxnCodecTest, ApiTableHasTheTransactionApisWithKafkasFlexibleVersions) {
  struct Want {
    ApiKey key;
    int16_t max;
    int16_t flexible_from;
    const char* name;
  };
  for (Want want : {Want{ApiKey::kAddPartitionsToTxn, 5, 3, "AddPartitionsToTxn"},
                    Want{ApiKey::kAddOffsetsToTxn, 4, 3, "AddOffsetsToTxn"},
                    Want{ApiKey::kEndTxn, 4, 3, "EndTxn"},  // v5 is unstable in Kafka
                    Want{ApiKey::kWriteTxnMarkers, 1, 1, "WriteTxnMarkers"},
                    Want{ApiKey::kTxnOffsetCommit, 4, 3, "TxnOffsetCommit"},
                    Want{ApiKey::kDescribeProducers, 0, 0, "DescribeProducers"},
                    Want{ApiKey::kDescribeTransactions, 0, 0, "DescribeTransactions"},
                    Want{ApiKey::kListTransactions, 1, 0, "ListTransactions"}}) {
    auto api = FindApi(want.key);
    ASSERT_TRUE(api.has_value()) << want.name;
    EXPECT_EQ(api->min, 0) << want.name;
    EXPECT_EQ(api->max, want.max) << want.name;
    EXPECT_EQ(api->flexible_from, want.flexible_from) << want.name;
    EXPECT_EQ(ApiName(want.key), want.name);
    for (int16_t v = 0; v <= want.max; ++v) {
      EXPECT_EQ(IsFlexible(*api, v), Flexible(want.key, v)) << want.name << " v" << v;
      EXPECT_EQ(RequestHeaderVersion(want.key, v), Flexible(want.key, v) ? 2 : 1);
      EXPECT_EQ(ResponseHeaderVersion(want.key, v), Flexible(want.key, v) ? 1 : 0);
    }
  }
}

TEST(TxnCodecTest, SupportedApisAreTheServedSubsetOfKnownApisInKeyOrder) {
  auto known = KnownApis();
  auto served = SupportedApis();
  ASSERT_LE(served.size(), known.size());
  size_t k = 0;
  for (const ApiVersionRange& s : served) {
    while (k < known.size() && known[k].key != s.key) ++k;
    ASSERT_LT(k, known.size()) << ApiName(s.key) << " served but unknown or out of order";
    EXPECT_EQ(known[k].max, s.max);
    EXPECT_TRUE(IsServed(s.key));
  }
  for (size_t i = 1; i < known.size(); ++i) EXPECT_LT(known[i - 1].key, known[i].key);
}

// ------------------------------------------------------------------ single behaviours

TEST(TxnCodecTest, VersionsOutsideTheJsonAreRejected) {
  EndTxnRequest e;
  Bytes v5 = EndTxnRequestGolden(5, false);
  EXPECT_TRUE(DecodeAt(v5, 5, &e).ok());
  Status st = DecodeAt(v5, 6, &e);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("EndTxnRequest v6"), std::string::npos) << st.ToString();
  AddOffsetsToTxnResponse a;
  EXPECT_FALSE(DecodeAt(AddOffsetsToTxnResponseGolden(4, false), 5, &a).ok());
  EXPECT_FALSE(DecodeAt(AddOffsetsToTxnResponseGolden(0, false), -1, &a).ok());
}

TEST(TxnCodecTest, AddPartitionsToTxnV3FieldsAreDroppedAtV4AndBack) {
  AddPartitionsToTxnRequest m = AddPartitionsToTxnRequestSample(3, false);
  EXPECT_EQ(EncodeAt(m, 4), Golden().carr(0).tags().take());
  AddPartitionsToTxnRequest batched = AddPartitionsToTxnRequestSample(4, false);
  EXPECT_EQ(EncodeAt(batched, 3), Golden().cstr("").i64(0).i16(0).carr(0).tags().take());
}

TEST(TxnCodecTest, TxnOffsetCommitGroupMetadataDefaultsBeforeV3) {
  TxnOffsetCommitRequest m = TxnOffsetCommitRequestSample(4, false);
  ASSERT_TRUE(DecodeAt(TxnOffsetCommitRequestGolden(1, false), 1, &m).ok());
  EXPECT_EQ(m.generation_id, -1);
  EXPECT_EQ(m.member_id, "");
  EXPECT_EQ(m.group_instance_id, std::nullopt);
  ASSERT_EQ(m.topics.size(), 2u);
  EXPECT_EQ(m.topics[0].partitions[0].committed_leader_epoch, -1);
}

TEST(TxnCodecTest, EndTxnResponseProducerFieldsDefaultToMinusOneBeforeV5) {
  EndTxnResponse m = EndTxnResponseSample(5, false);
  ASSERT_TRUE(DecodeAt(EndTxnResponseGolden(4, false), 4, &m).ok());
  EXPECT_EQ(m.producer_id, -1);
  EXPECT_EQ(m.producer_epoch, -1);
}

TEST(TxnCodecTest, UnknownTaggedFieldsAreKeptAndWrittenBack) {
  // AddPartitionsToTxnRequest v4: a tag in a topic, one in the transaction, one on top.
  Bytes bytes = Golden()
                    .carr(1)
                    .cstr("t")
                    .i64(1)
                    .i16(2)
                    .boolean(false)
                    .carr(1)
                    .cstr("orders")
                    .carr(1)
                    .i32(4)
                    .uvarint(1)
                    .uvarint(7)
                    .uvarint(1)
                    .i8(1)  // topic: tag 7
                    .uvarint(1)
                    .uvarint(0)
                    .uvarint(0)  // transaction: tag 0, empty
                    .uvarint(1)
                    .uvarint(300)
                    .uvarint(2)
                    .i16(0x0a0b)  // top: tag 300
                    .take();
  AddPartitionsToTxnRequest m;
  Status st = DecodeAt(bytes, 4, &m);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(m.transactions.size(), 1u);
  ASSERT_EQ(m.transactions[0].topics.size(), 1u);
  EXPECT_EQ(m.transactions[0].topics[0].unknown_tags, (std::vector<RawTaggedField>{{7, {1}}}));
  EXPECT_EQ(m.transactions[0].unknown_tags, (std::vector<RawTaggedField>{{0, {}}}));
  EXPECT_EQ(m.unknown_tags, (std::vector<RawTaggedField>{{300, {0x0a, 0x0b}}}));
  EXPECT_EQ(EncodeAt(m, 4), bytes);
}

TEST(TxnCodecTest, DecodeErrorNamesMessageVersionAndField) {
  Bytes bytes = Golden().str("txn").i64(1).take();  // producer epoch missing
  EndTxnRequest m;
  Status st = DecodeAt(bytes, 2, &m);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("EndTxnRequest v2"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("producer epoch"), std::string::npos) << st.ToString();
}

// ------------------------------------------------------------------ whole frames

TEST(TxnRequestTest, DecodeRequestDecodesTransactionApisTheBrokerDoesNotServeYet) {
  Bytes frame = Golden()
                    .i16(26)
                    .i16(3)
                    .i32(11)
                    .str("client")
                    .tags()  // header v2
                    .raw(EndTxnRequestGolden(3, false))
                    .take();
  DecodeOutcome out = DecodeRequest(frame);
  ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
  EXPECT_EQ(std::get<EndTxnRequest>(out.request->body), EndTxnRequestSample(3, false));
  // v5 is in the codec, not in the advertised range.
  Bytes v5 =
      Golden().i16(26).i16(5).i32(1).str("c").tags().raw(EndTxnRequestGolden(5, false)).take();
  EXPECT_EQ(DecodeRequest(v5).problem, RequestProblem::kUnsupportedVersion);
}

TEST(TxnRequestTest, EveryTransactionRequestVersionDecodesAsAFrame) {
  auto check = [](auto spec) {
    ApiVersionRange api = *FindApi(spec.key);
    for (int16_t v = api.min; v <= api.max; ++v) {
      SCOPED_TRACE(fmt::format("{} v{}", spec.name, v));
      Golden g;
      g.i16(static_cast<int>(spec.key)).i16(v).i32(v).str("client");
      if (IsFlexible(api, v)) g.tags();
      g.raw(spec.golden(v, false));
      DecodeOutcome out = DecodeRequest(g.take());
      ASSERT_EQ(out.problem, RequestProblem::kNone) << out.status.ToString();
      EXPECT_TRUE(std::get<decltype(spec.sample(v, false))>(out.request->body) ==
                  spec.sample(v, false));
    }
  };
  check(kAddPartitionsToTxnRequestSpec);
  check(kAddOffsetsToTxnRequestSpec);
  check(kEndTxnRequestSpec);
  check(kTxnOffsetCommitRequestSpec);
  check(kWriteTxnMarkersRequestSpec);
  check(kDescribeProducersRequestSpec);
  check(kDescribeTransactionsRequestSpec);
  check(kListTransactionsRequestSpec);
}

// The transaction fields of APIs the broker already serves, as a transactional producer
// and a read_committed consumer send them.
TEST(TxnRequestTest, TransactionFieldsOfServedApisDecodeFromFrames) {
  // InitProducerId v4 with a transactional id and the epoch of a producer that resumes.
  DecodeOutcome init = DecodeRequest(Golden()
                                         .i16(22)
                                         .i16(4)
                                         .i32(1)
                                         .str("c")
                                         .tags()
                                         .cstr("txn-a")
                                         .i32(60000)
                                         .i64(4000)
                                         .i16(3)
                                         .tags()
                                         .take());
  ASSERT_EQ(init.problem, RequestProblem::kNone) << init.status.ToString();
  const auto& i = std::get<InitProducerIdRequest>(init.request->body);
  EXPECT_EQ(i.transactional_id, "txn-a");
  EXPECT_EQ(i.producer_id, 4000);
  EXPECT_EQ(i.producer_epoch, 3);
  // FindCoordinator v1 (non-flexible) and v4 (batched) with key_type 1, "transaction".
  DecodeOutcome v1 =
      DecodeRequest(Golden().i16(10).i16(1).i32(2).str("c").str("txn-a").i8(1).take());
  ASSERT_EQ(v1.problem, RequestProblem::kNone) << v1.status.ToString();
  EXPECT_EQ(std::get<FindCoordinatorRequest>(v1.request->body).key_type, 1);
  DecodeOutcome v4 = DecodeRequest(
      Golden().i16(10).i16(4).i32(3).str("c").tags().i8(1).carr(1).cstr("txn-a").tags().take());
  ASSERT_EQ(v4.problem, RequestProblem::kNone) << v4.status.ToString();
  const auto& fc = std::get<FindCoordinatorRequest>(v4.request->body);
  EXPECT_EQ(fc.key_type, 1);
  EXPECT_EQ(fc.coordinator_keys, std::vector<std::string>{"txn-a"});
  // OffsetFetch v7 with require_stable.
  DecodeOutcome of = DecodeRequest(Golden()
                                       .i16(9)
                                       .i16(7)
                                       .i32(4)
                                       .str("c")
                                       .tags()
                                       .cstr("group-a")
                                       .uvarint(0)  // null topics: all

                                       .boolean(true)
                                       .tags()
                                       .take());
  ASSERT_EQ(of.problem, RequestProblem::kNone) << of.status.ToString();
  EXPECT_TRUE(std::get<OffsetFetchRequest>(of.request->body).require_stable);
}

// ------------------------------------------------------------------ malformed

TEST(TxnMalformedTest, NegativeArrayLengthIsRejected) {
  AddPartitionsToTxnRequest a;
  EXPECT_FALSE(DecodeAt(Golden().str("t").i64(1).i16(0).arr(-2).take(), 0, &a).ok());
  EXPECT_FALSE(DecodeAt(Golden().str("t").i64(1).i16(0).arr(-1).take(), 0, &a).ok());  // null
  Bytes nested = Golden().str("t").i64(1).i16(0).arr(1).str("orders").arr(-3).take();
  EXPECT_FALSE(DecodeAt(nested, 2, &a).ok());
  TxnOffsetCommitResponse t;
  EXPECT_FALSE(DecodeAt(Golden().i32(0).arr(1).str("x").arr(-1).take(), 0, &t).ok());
  // Compact null (0) where an array is required.
  EXPECT_FALSE(DecodeAt(Golden().i32(0).carr(-1).tags().take(), 3, &t).ok());
}

TEST(TxnMalformedTest, NegativeStringLengthIsRejected) {
  EndTxnRequest e;
  EXPECT_FALSE(DecodeAt(Golden().i16(-5).i64(1).i16(0).boolean(true).take(), 0, &e).ok());
  EXPECT_FALSE(DecodeAt(Golden().nullstr().i64(1).i16(0).boolean(true).take(), 0, &e).ok());
  TxnOffsetCommitRequest t;
  Bytes meta =
      Golden().str("t").str("g").i64(1).i16(0).arr(1).str("o").arr(1).i32(0).i64(5).i16(-7).take();
  EXPECT_FALSE(DecodeAt(meta, 0, &t).ok());
}

TEST(TxnMalformedTest, ArrayCountBeyondTheBytesLeftFailsBeforeAllocating) {
  AddPartitionsToTxnRequest a;
  Status st = DecodeAt(Golden().carr(0x7ffffffe).tags().take(), 4, &a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  // One topic claiming a million partitions (4 bytes each) with 8 bytes left.
  st = DecodeAt(Golden().str("t").i64(1).i16(0).arr(1).str("o").arr(1000000).i32(0).i32(1).take(),
                0, &a);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  AddPartitionsToTxnResponse r;
  st = DecodeAt(Golden().i32(0).i16(0).carr(100000).cstr("x").take(), 5, &r);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
}

TEST(TxnMalformedTest, NestedCountsOfStep2MessagesAreBounded) {
  // WriteTxnMarkers v1: one marker whose topic claims 2^20 partition indexes.
  WriteTxnMarkersRequest w;
  Status st = DecodeAt(
      Golden().carr(1).i64(1).i16(0).boolean(true).carr(1).cstr("t").carr(1 << 20).i32(0).take(), 1,
      &w);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  // DescribeProducers: a producer takes 36 bytes; two cannot fit in 40.
  DescribeProducersResponse d;
  Bytes producers = Golden()
                        .i32(0)
                        .carr(1)
                        .cstr("t")
                        .carr(1)
                        .i32(0)
                        .i16(0)
                        .cnullstr()
                        .carr(2)
                        .raw(Bytes(40, 0))
                        .take();
  st = DecodeAt(producers, 0, &d);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  // ListTransactions: producer id filters are 8 bytes each.
  ListTransactionsRequest l;
  st = DecodeAt(Golden().carr(0).carr(3).i64(1).i64(2).tags().take(), 0, &l);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot fit"), std::string::npos) << st.ToString();
  // A negative (non-null) compact length cannot be written; a null array is refused.
  DescribeTransactionsRequest t;
  EXPECT_FALSE(DecodeAt(Golden().carr(-1).tags().take(), 0, &t).ok());
}

// ------------------------------------------------------------------ every golden, malformed

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  AddCases(&cases, kAddPartitionsToTxnRequestSpec);
  AddCases(&cases, kAddPartitionsToTxnResponseSpec);
  AddCases(&cases, kAddOffsetsToTxnRequestSpec);
  AddCases(&cases, kAddOffsetsToTxnResponseSpec);
  AddCases(&cases, kEndTxnRequestSpec);
  AddCases(&cases, kEndTxnResponseSpec);
  AddCases(&cases, kTxnOffsetCommitRequestSpec);
  AddCases(&cases, kTxnOffsetCommitResponseSpec);
  AddCases(&cases, kWriteTxnMarkersRequestSpec);
  AddCases(&cases, kWriteTxnMarkersResponseSpec);
  AddCases(&cases, kDescribeProducersRequestSpec);
  AddCases(&cases, kDescribeProducersResponseSpec);
  AddCases(&cases, kDescribeTransactionsRequestSpec);
  AddCases(&cases, kDescribeTransactionsResponseSpec);
  AddCases(&cases, kListTransactionsRequestSpec);
  AddCases(&cases, kListTransactionsResponseSpec);
  return cases;
}

class TxnGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(TxnGoldenTest, EveryStrictPrefixFailsToDecode) { ExpectEveryStrictPrefixFails(GetParam()); }

TEST_P(TxnGoldenTest, TrailingBytesAreTolerated) { ExpectTrailingBytesTolerated(GetParam()); }

TEST_P(TxnGoldenTest, CorruptedBytesNeverCrash) { DecodeEveryCorruption(GetParam()); }

INSTANTIATE_TEST_SUITE_P(AllTxnMessages, TxnGoldenTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace txn_test
}  // namespace sluice::kafka
