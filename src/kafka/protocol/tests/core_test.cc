// Tests of the data-path messages (messages/core.h): golden bytes for every advertised
// version of every request and response, written field by field from Kafka's JSON
// definitions with testing::Golden, compared with Encode and decoded back; the Fetch
// splice path; and malformed input.
#include "kafka/protocol/messages/core.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kafka/protocol/tests/golden.h"

namespace sluice::kafka {
namespace core_test {
namespace {

using testing::Golden;

template <typename M>
struct Case {
  M msg;
  std::vector<uint8_t> golden;
};

// One tagged field: tag, size, value.
Golden& TagField(Golden& g, uint32_t tag, const Golden& value) {
  return g.uvarint(tag).uvarint(value.data().size()).raw(value.data());
}

// Nullable bytes (records): int32 length or compact length + 1; null is -1 or 0.
Golden& NullableRecords(Golden& g, bool flexible, const std::vector<uint8_t>* v) {
  if (v == nullptr) return flexible ? g.uvarint(0) : g.nullbytes();
  return flexible ? g.cbytes(*v) : g.bytes(*v);
}

const std::vector<uint8_t> kRecordsA = {0, 0, 0,  0,    0,    0,    0,    5, 0,
                                        0, 0, 12, 0xde, 0xad, 0xbe, 0xef, 2, 7};
const std::vector<uint8_t> kRecordsB = {9, 8, 7, 6, 5, 4, 3, 2, 1};
const std::vector<uint8_t> kEmpty = {};

std::span<const uint8_t> View(const std::vector<uint8_t>& v) { return {v.data(), v.size()}; }

int16_t MinVersion(ApiKey key) { return FindApi(key)->min; }
int16_t MaxVersion(ApiKey key) { return FindApi(key)->max; }

template <typename M>
void ExpectGolden(const Case<M>& c, int16_t version) {
  SCOPED_TRACE(::testing::Message() << "version " << version);
  std::vector<uint8_t> out;
  Writer w(&out);
  c.msg.Encode(w, version);
  EXPECT_EQ(out, c.golden);
  EXPECT_TRUE(w.splices().empty());
  Reader r(c.golden);
  M decoded;
  Status st = decoded.Decode(r, version);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(r.remaining(), 0u);
  EXPECT_TRUE(decoded == c.msg);
}

// ---------------------------------------------------------------------------------------
// Cases: a populated struct and its golden bytes, per version.

Case<ApiVersionsRequest> ApiVersionsRequestCase(int16_t v) {
  Case<ApiVersionsRequest> c;
  Golden g;
  if (v >= 3) {
    c.msg.client_software_name = "sluice-test";
    c.msg.client_software_version = "1.2.3";
    g.cstr("sluice-test").cstr("1.2.3");
    if (v == 4) {
      c.msg.unknown_tags = {{9, {1, 2}}};
      g.uvarint(1).uvarint(9).uvarint(2).i8(1).i8(2);
    } else {
      g.tags();
    }
  }
  c.golden = g.take();
  return c;
}

Case<ApiVersionsResponse> ApiVersionsResponseCase(int16_t v) {
  const bool f = v >= 3;
  Case<ApiVersionsResponse> c;
  auto& m = c.msg;
  Golden g;
  m.error_code = ErrorCode::kUnsupportedVersion;
  g.i16(35);
  m.api_keys = {{0, 3, 11, {}}, {18, 0, 4, {}}};
  g.a(f, 2).i16(0).i16(3).i16(11).t(f).i16(18).i16(0).i16(4).t(f);
  if (v >= 1) {
    m.throttle_time_ms = 100;
    g.i32(100);
  }
  if (f) {
    m.supported_features = {{"metadata.version", 1, 20, {}}, {"kraft.version", 0, 1, {}}};
    m.finalized_features_epoch = 7;
    m.finalized_features = {{"metadata.version", 20, 1, {}}, {"kraft.version", 1, 0, {}}};
    m.zk_migration_ready = true;
    m.unknown_tags = {{5, {0xaa}}};
    g.uvarint(5);
    Golden sf;
    sf.carr(2)
        .cstr("metadata.version")
        .i16(1)
        .i16(20)
        .tags()
        .cstr("kraft.version")
        .i16(0)
        .i16(1)
        .tags();
    TagField(g, 0, sf);
    TagField(g, 1, Golden().i64(7));
    Golden ff;
    ff.carr(2)
        .cstr("metadata.version")
        .i16(20)
        .i16(1)
        .tags()
        .cstr("kraft.version")
        .i16(1)
        .i16(0)
        .tags();
    TagField(g, 2, ff);
    TagField(g, 3, Golden().boolean(true));
    TagField(g, 5, Golden().i8(0xaa));
  }
  c.golden = g.take();
  return c;
}

Case<MetadataRequest> MetadataRequestCase(int16_t v) {
  const bool f = v >= 9;
  Case<MetadataRequest> c;
  auto& m = c.msg;
  Golden g;
  if (v == 1 || v == 9) {  // null: all topics
    m.topics = std::nullopt;
    g.a(f, -1);
  } else {
    m.topics.emplace();
    g.a(f, 2);
    for (int i = 0; i < 2; ++i) {
      MetadataRequest::Topic t;
      if (v >= 10) {
        t.topic_id = Uuid{0x1111, static_cast<uint64_t>(i + 1)};
        g.uuid(0x1111, i + 1);
      }
      if (v >= 12 && i == 1) {
        t.name = std::nullopt;
        g.ns(f);
      } else {
        t.name = "topic-" + std::to_string(i);
        g.s(f, *t.name);
      }
      g.t(f);
      m.topics->push_back(t);
    }
  }
  if (v >= 4) {
    m.allow_auto_topic_creation = false;
    g.boolean(false);
  }
  if (v >= 8 && v <= 10) {
    m.include_cluster_authorized_operations = true;
    g.boolean(true);
  }
  if (v >= 8) {
    m.include_topic_authorized_operations = true;
    g.boolean(true);
  }
  if (v == 12) {
    m.unknown_tags = {{3, {1, 2, 3}}};
    g.uvarint(1).uvarint(3).uvarint(3).i8(1).i8(2).i8(3);
  } else {
    g.t(f);
  }
  c.golden = g.take();
  return c;
}

Case<MetadataResponse> MetadataResponseCase(int16_t v) {
  const bool f = v >= 9;
  Case<MetadataResponse> c;
  auto& m = c.msg;
  Golden g;
  if (v >= 3) {
    m.throttle_time_ms = 50;
    g.i32(50);
  }
  m.brokers = {{1, "broker-1", 9092, std::nullopt, {}}, {2, "broker-2", 9093, std::nullopt, {}}};
  g.a(f, 2);
  g.i32(1).s(f, "broker-1").i32(9092);
  if (v >= 1) {
    m.brokers[0].rack = "rack-1";
    g.s(f, "rack-1");
  }
  g.t(f);
  g.i32(2).s(f, "broker-2").i32(9093);
  if (v >= 1) g.ns(f);
  g.t(f);
  if (v >= 2) {
    if (v == 2) {
      g.ns(f);
    } else {
      m.cluster_id = "cluster-x";
      g.s(f, "cluster-x");
    }
  }
  if (v >= 1) {
    m.controller_id = 1;
    g.i32(1);
  }
  // Topic 0: everything set, two partitions. Topic 1: an error, no partitions.
  m.topics.resize(2);
  g.a(f, 2);
  auto& t0 = m.topics[0];
  t0.error_code = ErrorCode::kLeaderNotAvailable;
  t0.name = "orders";
  g.i16(5).s(f, "orders");
  if (v >= 10) {
    t0.topic_id = Uuid{0xabcdef, 0x123456};
    g.uuid(0xabcdef, 0x123456);
  }
  if (v >= 1) {
    t0.is_internal = true;
    g.boolean(true);
  }
  g.a(f, 2);
  for (int i = 0; i < 2; ++i) {
    MetadataResponse::Partition p;
    p.error_code = i == 0 ? ErrorCode::kNone : ErrorCode::kReplicaNotAvailable;
    p.partition_index = i;
    p.leader_id = 1 + i;
    g.i16(i == 0 ? 0 : 9).i32(i).i32(1 + i);
    if (v >= 7) {
      p.leader_epoch = 5 + i;
      g.i32(5 + i);
    }
    p.replica_nodes = {1, 2};
    p.isr_nodes = {1};
    g.a(f, 2).i32(1).i32(2).a(f, 1).i32(1);
    if (v >= 5) {
      p.offline_replicas = {2};
      g.a(f, 1).i32(2);
    }
    g.t(f);
    t0.partitions.push_back(p);
  }
  if (v >= 8) {
    t0.topic_authorized_operations = 0x0ff8;
    g.i32(0x0ff8);
  }
  g.t(f);
  auto& t1 = m.topics[1];
  t1.error_code = ErrorCode::kUnknownTopicOrPartition;
  g.i16(3);
  if (v >= 12) {
    t1.name = std::nullopt;
    g.ns(f);
  } else {
    t1.name = "missing";
    g.s(f, "missing");
  }
  if (v >= 10) {
    t1.topic_id = Uuid{1, 2};
    g.uuid(1, 2);
  }
  if (v >= 1) g.boolean(false);
  g.a(f, 0);
  if (v >= 8) {
    t1.topic_authorized_operations = 0;
    g.i32(0);
  }
  g.t(f);
  if (v >= 8 && v <= 10) {
    m.cluster_authorized_operations = 0x1f;
    g.i32(0x1f);
  }
  g.t(f);
  c.golden = g.take();
  return c;
}

Case<ProduceRequest> ProduceRequestCase(int16_t v) {
  const bool f = v >= 9;
  Case<ProduceRequest> c;
  auto& m = c.msg;
  Golden g;
  if (v >= 3) {
    if (v % 2 == 1) {
      g.ns(f);
    } else {
      m.transactional_id = "txn-1";
      g.s(f, "txn-1");
    }
  }
  m.acks = -1;
  m.timeout_ms = 30000;
  g.i16(-1).i32(30000);
  m.topic_data.resize(2);
  g.a(f, 2);
  m.topic_data[0].name = "orders";
  m.topic_data[0].partition_data = {{0, View(kRecordsA), {}}, {1, std::nullopt, {}}};
  g.s(f, "orders").a(f, 2);
  g.i32(0);
  NullableRecords(g, f, &kRecordsA);
  if (v == 11) {
    m.topic_data[0].partition_data[0].unknown_tags = {{4, {7}}};
    g.uvarint(1).uvarint(4).uvarint(1).i8(7);
  } else {
    g.t(f);
  }
  g.i32(1);
  NullableRecords(g, f, nullptr).t(f);
  g.t(f);
  m.topic_data[1].name = "events";
  m.topic_data[1].partition_data = {{7, View(kRecordsB), {}}};
  g.s(f, "events").a(f, 1).i32(7);
  NullableRecords(g, f, &kRecordsB).t(f);
  g.t(f);
  g.t(f);
  c.golden = g.take();
  return c;
}

Case<ProduceResponse> ProduceResponseCase(int16_t v) {
  const bool f = v >= 9;
  Case<ProduceResponse> c;
  auto& m = c.msg;
  Golden g;
  m.responses.resize(2);
  g.a(f, 2);
  m.responses[0].name = "orders";
  g.s(f, "orders").a(f, 2);
  for (int i = 0; i < 2; ++i) {
    ProduceResponse::PartitionProduceResponse p;
    p.index = i;
    p.error_code = i == 0 ? ErrorCode::kNone : ErrorCode::kNotLeaderOrFollower;
    p.base_offset = 1000 + i;
    g.i32(i).i16(i == 0 ? 0 : 6).i64(1000 + i);
    if (v >= 2) {
      p.log_append_time_ms = 1700000000000 + i;
      g.i64(1700000000000 + i);
    }
    if (v >= 5) {
      p.log_start_offset = 10 + i;
      g.i64(10 + i);
    }
    if (v >= 8) {
      if (i == 0) {
        p.record_errors = {{0, "bad record", {}}, {3, std::nullopt, {}}};
        g.a(f, 2).i32(0).s(f, "bad record").t(f).i32(3).ns(f).t(f);
        p.error_message = "batch dropped";
        g.s(f, "batch dropped");
      } else {
        g.a(f, 0).ns(f);
      }
    }
    if (f) {
      if (v >= 10 && i == 1) {
        p.current_leader = {3, 9};
        p.unknown_tags = {{2, {0xbb}}};
        g.uvarint(2);
        TagField(g, 0, Golden().i32(3).i32(9).tags());
        TagField(g, 2, Golden().i8(0xbb));
      } else {
        g.tags();
      }
    }
    m.responses[0].partition_responses.push_back(p);
  }
  g.t(f);
  m.responses[1].name = "events";
  g.s(f, "events").a(f, 0).t(f);
  if (v >= 1) {
    m.throttle_time_ms = 25;
    g.i32(25);
  }
  if (v >= 10) {
    m.node_endpoints = {{3, "host-3", 9092, "rack-3", {}}, {4, "host-4", 9094, std::nullopt, {}}};
    Golden ne;
    ne.carr(2).i32(3).cstr("host-3").i32(9092).cstr("rack-3").tags();
    ne.i32(4).cstr("host-4").i32(9094).cnullstr().tags();
    g.uvarint(1);
    TagField(g, 0, ne);
  } else {
    g.t(f);
  }
  c.golden = g.take();
  return c;
}

Case<FetchRequest> FetchRequestCase(int16_t v) {
  const bool f = v >= 12;
  Case<FetchRequest> c;
  auto& m = c.msg;
  Golden g;
  if (v <= 14) {
    m.replica_id = 3;
    g.i32(3);
  }
  m.max_wait_ms = 500;
  m.min_bytes = 1;
  g.i32(500).i32(1);
  if (v >= 3) {
    m.max_bytes = 52428800;
    g.i32(52428800);
  }
  if (v >= 4) {
    m.isolation_level = 1;
    g.i8(1);
  }
  if (v >= 7) {
    m.session_id = 123;
    m.session_epoch = 4;
    g.i32(123).i32(4);
  }
  m.topics.resize(2);
  g.a(f, 2);
  for (int t = 0; t < 2; ++t) {
    auto& topic = m.topics[t];
    if (v <= 12) {
      topic.topic = "topic-" + std::to_string(t);
      g.s(f, topic.topic);
    } else {
      topic.topic_id = Uuid{0x77, static_cast<uint64_t>(t + 1)};
      g.uuid(0x77, t + 1);
    }
    g.a(f, 2);
    for (int i = 0; i < 2; ++i) {
      FetchRequest::FetchPartition p;
      p.partition = i;
      g.i32(i);
      if (v >= 9) {
        p.current_leader_epoch = 7;
        g.i32(7);
      }
      p.fetch_offset = 100 * (i + 1);
      g.i64(100 * (i + 1));
      if (v >= 12) {
        p.last_fetched_epoch = 6;
        g.i32(6);
      }
      if (v >= 5) {
        p.log_start_offset = 10;
        g.i64(10);
      }
      p.partition_max_bytes = 1048576;
      g.i32(1048576);
      g.t(f);
      topic.partitions.push_back(p);
    }
    g.t(f);
  }
  if (v >= 7) {
    m.forgotten_topics_data.resize(2);
    g.a(f, 2);
    for (int t = 0; t < 2; ++t) {
      auto& ft = m.forgotten_topics_data[t];
      if (v <= 12) {
        ft.topic = "gone-" + std::to_string(t);
        g.s(f, ft.topic);
      } else {
        ft.topic_id = Uuid{0x99, static_cast<uint64_t>(t)};
        g.uuid(0x99, t);
      }
      ft.partitions = {0, 5};
      g.a(f, 2).i32(0).i32(5).t(f);
    }
  }
  if (v >= 11) {
    m.rack_id = "rack-a";
    g.s(f, "rack-a");
  }
  if (f) {
    // cluster_id null in odd versions; replica_state from v15; an unknown tag in v13.
    uint32_t n = (v % 2 == 0 ? 1 : 0) + (v >= 15 ? 1 : 0) + (v == 13 ? 1 : 0);
    g.uvarint(n);
    if (v % 2 == 0) {
      m.cluster_id = "cluster-x";
      TagField(g, 0, Golden().cstr("cluster-x"));
    }
    if (v >= 15) {
      m.replica_state = {2, 44};
      TagField(g, 1, Golden().i32(2).i64(44).tags());
    }
    if (v == 13) {
      m.unknown_tags = {{6, {1, 1}}};
      TagField(g, 6, Golden().i8(1).i8(1));
    }
  }
  c.golden = g.take();
  return c;
}

Case<FetchResponse> FetchResponseCase(int16_t v) {
  const bool f = v >= 12;
  Case<FetchResponse> c;
  auto& m = c.msg;
  Golden g;
  if (v >= 1) {
    m.throttle_time_ms = 10;
    g.i32(10);
  }
  if (v >= 7) {
    m.error_code = ErrorCode::kFetchSessionIdNotFound;
    m.session_id = 99;
    g.i16(70).i32(99);
  }
  m.responses.resize(2);
  g.a(f, 2);
  auto topic_key = [&](FetchResponse::FetchableTopicResponse& t, int n) {
    if (v <= 12) {
      t.topic = "topic-" + std::to_string(n);
      g.s(f, t.topic);
    } else {
      t.topic_id = Uuid{0x55, static_cast<uint64_t>(n)};
      g.uuid(0x55, n);
    }
  };
  // Topic 0, partition 0: every field and tag set, records A.
  // Topic 0, partition 1: error, aborted transactions null, records null.
  // Topic 1, partition 0: empty (non-null) records.
  topic_key(m.responses[0], 0);
  g.a(f, 2);
  {
    FetchResponse::PartitionData p;
    p.partition_index = 0;
    p.high_watermark = 1000;
    g.i32(0).i16(0).i64(1000);
    if (v >= 4) {
      p.last_stable_offset = 990;
      g.i64(990);
    }
    if (v >= 5) {
      p.log_start_offset = 5;
      g.i64(5);
    }
    if (v >= 4) {
      p.aborted_transactions =
          std::vector<FetchResponse::AbortedTransaction>{{7, 900, {}}, {8, 950, {}}};
      g.a(f, 2).i64(7).i64(900).t(f).i64(8).i64(950).t(f);
    }
    if (v >= 11) {
      p.preferred_read_replica = 2;
      g.i32(2);
    }
    p.records = RecordsRef::Inline(View(kRecordsA));
    NullableRecords(g, f, &kRecordsA);
    if (f) {
      p.diverging_epoch = {4, 800};
      p.current_leader = {1, 5};
      p.snapshot_id = {700, 3};
      p.unknown_tags = {{7, {0xcc, 0xdd}}};
      g.uvarint(4);
      TagField(g, 0, Golden().i32(4).i64(800).tags());
      TagField(g, 1, Golden().i32(1).i32(5).tags());
      TagField(g, 2, Golden().i64(700).i32(3).tags());
      TagField(g, 7, Golden().i8(0xcc).i8(0xdd));
    }
    m.responses[0].partitions.push_back(p);
  }
  {
    FetchResponse::PartitionData p;
    p.partition_index = 1;
    p.error_code = ErrorCode::kOffsetOutOfRange;
    p.high_watermark = 0;
    g.i32(1).i16(1).i64(0);
    if (v >= 4) g.i64(-1);
    if (v >= 5) g.i64(-1);
    if (v >= 4) g.a(f, -1);
    if (v >= 11) g.i32(-1);
    p.records = RecordsRef::Inline(std::nullopt);
    NullableRecords(g, f, nullptr);
    if (f && v >= 13) {  // only current_leader
      p.current_leader = {2, 6};
      g.uvarint(1);
      TagField(g, 1, Golden().i32(2).i32(6).tags());
    } else {
      g.t(f);
    }
    m.responses[0].partitions.push_back(p);
  }
  g.t(f);
  topic_key(m.responses[1], 1);
  g.a(f, 1);
  {
    FetchResponse::PartitionData p;
    p.partition_index = 3;
    p.high_watermark = 42;
    g.i32(3).i16(0).i64(42);
    if (v >= 4) {
      p.last_stable_offset = 42;
      g.i64(42);
    }
    if (v >= 5) {
      p.log_start_offset = 0;
      g.i64(0);
    }
    if (v >= 4) {
      p.aborted_transactions.emplace();
      g.a(f, 0);
    }
    if (v >= 11) g.i32(-1);
    p.records = RecordsRef::Inline(View(kEmpty));
    NullableRecords(g, f, &kEmpty).t(f);
    m.responses[1].partitions.push_back(p);
  }
  g.t(f);
  if (v >= 16) {
    m.node_endpoints = {{1, "host-1", 9092, std::nullopt, {}}, {2, "host-2", 9093, "rack-2", {}}};
    Golden ne;
    ne.carr(2).i32(1).cstr("host-1").i32(9092).cnullstr().tags();
    ne.i32(2).cstr("host-2").i32(9093).cstr("rack-2").tags();
    g.uvarint(1);
    TagField(g, 0, ne);
  } else {
    g.t(f);
  }
  c.golden = g.take();
  return c;
}

Case<ListOffsetsRequest> ListOffsetsRequestCase(int16_t v) {
  const bool f = v >= 6;
  Case<ListOffsetsRequest> c;
  auto& m = c.msg;
  Golden g;
  m.replica_id = -1;
  g.i32(-1);
  if (v >= 2) {
    m.isolation_level = 1;
    g.i8(1);
  }
  m.topics.resize(2);
  g.a(f, 2);
  for (int t = 0; t < 2; ++t) {
    m.topics[t].name = "topic-" + std::to_string(t);
    g.s(f, m.topics[t].name).a(f, 2);
    for (int i = 0; i < 2; ++i) {
      ListOffsetsRequest::Partition p;
      p.partition_index = i;
      g.i32(i);
      if (v >= 4) {
        p.current_leader_epoch = 3;
        g.i32(3);
      }
      p.timestamp = i == 0 ? -1 : -2;
      g.i64(p.timestamp);
      if (v == 0) {
        p.max_num_offsets = 5;
        g.i32(5);
      }
      g.t(f);
      m.topics[t].partitions.push_back(p);
    }
    g.t(f);
  }
  if (v == 9) {
    m.unknown_tags = {{0, {1}}};
    g.uvarint(1).uvarint(0).uvarint(1).i8(1);
  } else {
    g.t(f);
  }
  c.golden = g.take();
  return c;
}

Case<ListOffsetsResponse> ListOffsetsResponseCase(int16_t v) {
  const bool f = v >= 6;
  Case<ListOffsetsResponse> c;
  auto& m = c.msg;
  Golden g;
  if (v >= 2) {
    m.throttle_time_ms = 20;
    g.i32(20);
  }
  m.topics.resize(2);
  g.a(f, 2);
  for (int t = 0; t < 2; ++t) {
    m.topics[t].name = "topic-" + std::to_string(t);
    g.s(f, m.topics[t].name).a(f, 2);
    for (int i = 0; i < 2; ++i) {
      ListOffsetsResponse::Partition p;
      p.partition_index = i;
      p.error_code = i == 0 ? ErrorCode::kNone : ErrorCode::kOffsetNotAvailable;
      g.i32(i).i16(i == 0 ? 0 : 78);
      if (v == 0) {
        if (i == 0) {
          p.old_style_offsets = {100, 50};
          g.a(f, 2).i64(100).i64(50);
        } else {
          g.a(f, 0);
        }
      }
      if (v >= 1) {
        p.timestamp = 1700000000000;
        p.offset = 42 + i;
        g.i64(1700000000000).i64(42 + i);
      }
      if (v >= 4) {
        p.leader_epoch = 2;
        g.i32(2);
      }
      g.t(f);
      m.topics[t].partitions.push_back(p);
    }
    g.t(f);
  }
  g.t(f);
  c.golden = g.take();
  return c;
}

// ---------------------------------------------------------------------------------------
// Golden bytes in every advertised version.

TEST(CoreCodecTest, FlexibleVersionsMatchTheJsonDefinitions) {
  EXPECT_EQ(FindApi(ApiKey::kApiVersions)->flexible_from, 3);
  EXPECT_EQ(FindApi(ApiKey::kMetadata)->flexible_from, 9);
  EXPECT_EQ(FindApi(ApiKey::kProduce)->flexible_from, 9);
  EXPECT_EQ(FindApi(ApiKey::kFetch)->flexible_from, 12);
  EXPECT_EQ(FindApi(ApiKey::kListOffsets)->flexible_from, 6);
}

template <typename M>
void CheckEveryVersion(ApiKey key, Case<M> (*make)(int16_t)) {
  for (int16_t v = MinVersion(key); v <= MaxVersion(key); ++v) ExpectGolden(make(v), v);
}

TEST(CoreCodecTest, ApiVersionsRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kApiVersions, ApiVersionsRequestCase);
}
TEST(CoreCodecTest, ApiVersionsResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kApiVersions, ApiVersionsResponseCase);
}
TEST(CoreCodecTest, MetadataRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kMetadata, MetadataRequestCase);
}
TEST(CoreCodecTest, MetadataResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kMetadata, MetadataResponseCase);
}
TEST(CoreCodecTest, ProduceRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kProduce, ProduceRequestCase);
}
TEST(CoreCodecTest, ProduceResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kProduce, ProduceResponseCase);
}
TEST(CoreCodecTest, FetchRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kFetch, FetchRequestCase);
}
TEST(CoreCodecTest, FetchResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kFetch, FetchResponseCase);
}
TEST(CoreCodecTest, ListOffsetsRequestMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kListOffsets, ListOffsetsRequestCase);
}
TEST(CoreCodecTest, ListOffsetsResponseMatchesGoldenInEveryVersion) {
  CheckEveryVersion(ApiKey::kListOffsets, ListOffsetsResponseCase);
}

// ---------------------------------------------------------------------------------------
// Behaviours beyond the field lists.

TEST(CoreCodecTest, ApiVersionsFallbackIsTheV0BodyWithEveryAdvertisedApi) {
  std::vector<uint8_t> out;
  Writer w(&out);
  EncodeApiVersionsV0Fallback(w, ErrorCode::kUnsupportedVersion);
  Golden g;
  g.i16(35).arr(static_cast<int64_t>(SupportedApis().size()));
  for (const ApiVersionRange& a : SupportedApis()) {
    const int min = a.key == ApiKey::kProduce ? 0 : a.min;  // AdvertisedRange
    g.i16(static_cast<int>(a.key)).i16(min).i16(a.max);
  }
  EXPECT_EQ(out, g.data());

  ApiVersionsResponse decoded;
  Reader r(out);
  ASSERT_TRUE(decoded.Decode(r, 0).ok());
  EXPECT_EQ(decoded.error_code, ErrorCode::kUnsupportedVersion);
  ASSERT_EQ(decoded.api_keys.size(), SupportedApis().size());
  bool lists_api_versions = false;
  for (const auto& a : decoded.api_keys)
    lists_api_versions |= a.api_key == 18 && a.min_version == 0 && a.max_version == 4;
  EXPECT_TRUE(lists_api_versions);
}

TEST(CoreCodecTest, ApiVersionsResponseOmitsTaggedFieldsAtTheirDefaults) {
  ApiVersionsResponse m;
  m.api_keys = {{3, 0, 12, {}}};
  std::vector<uint8_t> out;
  Writer w(&out);
  m.Encode(w, 3);
  EXPECT_EQ(out, Golden().i16(0).carr(1).i16(3).i16(0).i16(12).tags().i32(0).tags().data());
}

TEST(CoreCodecTest, MetadataRequestNullTopicsIsTheEmptyArrayInV0AndNullAfter) {
  MetadataRequest m;  // topics null: all topics
  std::vector<uint8_t> v0, v1, v9;
  Writer w0(&v0), w1(&v1), w9(&v9);
  m.Encode(w0, 0);
  m.Encode(w1, 1);
  m.Encode(w9, 9);
  EXPECT_EQ(v0, Golden().arr(0).data());
  EXPECT_EQ(v1, Golden().arr(-1).data());
  EXPECT_EQ(v9, Golden().carr(-1).boolean(true).boolean(false).boolean(false).tags().data());

  // Decoding is faithful: v0's empty array stays an empty array, the broker interprets.
  MetadataRequest d;
  Reader r(v0);
  ASSERT_TRUE(d.Decode(r, 0).ok());
  ASSERT_TRUE(d.topics.has_value());
  EXPECT_TRUE(d.topics->empty());
  auto null_v0 = Golden().arr(-1).take();
  Reader r2(null_v0);
  EXPECT_FALSE(d.Decode(r2, 0).ok());  // null is not allowed in v0
}

TEST(CoreCodecTest, ProduceRecordsDecodeAsViewsIntoTheRequestBuffer) {
  auto c = ProduceRequestCase(9);
  ProduceRequest m;
  Reader r(c.golden);
  ASSERT_TRUE(m.Decode(r, 9).ok());
  const auto& rec = m.topic_data[0].partition_data[0].records;
  ASSERT_TRUE(rec.has_value());
  EXPECT_GE(rec->data(), c.golden.data());
  EXPECT_LE(rec->data() + rec->size(), c.golden.data() + c.golden.size());
  EXPECT_TRUE(std::equal(rec->begin(), rec->end(), kRecordsA.begin(), kRecordsA.end()));
  EXPECT_FALSE(m.topic_data[0].partition_data[1].records.has_value());
}

TEST(CoreCodecTest, FetchResponseRecordsDecodeAsViewsIntoTheResponseBuffer) {
  auto c = FetchResponseCase(16);
  FetchResponse m;
  Reader r(c.golden);
  ASSERT_TRUE(m.Decode(r, 16).ok());
  const RecordsRef& rec = m.responses[0].partitions[0].records;
  ASSERT_FALSE(rec.is_splice);
  ASSERT_TRUE(rec.inline_bytes.has_value());
  EXPECT_GE(rec.inline_bytes->data(), c.golden.data());
  EXPECT_LE(rec.inline_bytes->data() + rec.inline_bytes->size(), c.golden.data() + c.golden.size());
}

TEST(CoreCodecTest, UnknownTaggedFieldsAreKeptAndWrittenBackInTagOrder) {
  // Fetch request v12: tag 1 (ReplicaState) is only known from v15, so it is unknown here.
  Golden g;
  g.i32(-1).i32(0).i32(0).i32(0x7fffffff).i8(0).i32(0).i32(-1).carr(0).carr(0).cstr("");
  g.uvarint(3);
  TagField(g, 0, Golden().cstr("c"));
  TagField(g, 1, Golden().i32(2).i64(44).tags());
  TagField(g, 8, Golden().i8(1));
  auto bytes = g.take();
  FetchRequest m;
  Reader r(bytes);
  ASSERT_TRUE(m.Decode(r, 12).ok());
  EXPECT_EQ(m.cluster_id, "c");
  EXPECT_EQ(m.replica_state, FetchRequest::ReplicaState{});
  ASSERT_EQ(m.unknown_tags.size(), 2u);
  EXPECT_EQ(m.unknown_tags[0].tag, 1u);
  EXPECT_EQ(m.unknown_tags[1].tag, 8u);
  std::vector<uint8_t> out;
  Writer w(&out);
  m.Encode(w, 12);
  EXPECT_EQ(out, bytes);
}

TEST(CoreCodecTest, NullArrayWhereNotNullableIsAnError) {
  auto bytes = Golden().nullstr().i16(1).i32(1000).arr(-1).take();
  ProduceRequest m;
  Reader r(bytes);
  Status st = m.Decode(r, 3);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ProduceRequest v3"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("topic data"), std::string::npos) << st.message();
}

TEST(CoreCodecTest, TrailingBytesAfterTheBodyAreTolerated) {
  auto c = ListOffsetsRequestCase(5);
  c.golden.push_back(0x42);
  ListOffsetsRequest m;
  Reader r(c.golden);
  ASSERT_TRUE(m.Decode(r, 5).ok());
  EXPECT_TRUE(m == c.msg);
}

TEST(CoreCodecTest, DecodeResetsAReusedStruct) {
  auto c = FetchRequestCase(11);
  FetchRequest m;
  for (int i = 0; i < 2; ++i) {
    Reader r(c.golden);
    ASSERT_TRUE(m.Decode(r, 11).ok());
  }
  EXPECT_TRUE(m == c.msg);
}

// ---------------------------------------------------------------------------------------
// Fetch splices: the records of a partition sent from a segment file with sendfile.

// The message as it goes on the wire: the buffer with each splice's bytes put in.
std::vector<uint8_t> Materialize(const Writer& w, const std::vector<uint8_t>& buffer,
                                 const std::function<uint8_t(uint32_t token, uint64_t i)>& byte) {
  std::vector<uint8_t> out;
  size_t pos = 0;
  for (const Writer::Splice& s : w.splices()) {
    out.insert(out.end(), buffer.begin() + static_cast<ptrdiff_t>(pos),
               buffer.begin() + static_cast<ptrdiff_t>(s.buffer_pos));
    for (uint64_t i = 0; i < s.size; ++i) out.push_back(byte(s.token, i));
    pos = s.buffer_pos;
  }
  out.insert(out.end(), buffer.begin() + static_cast<ptrdiff_t>(pos), buffer.end());
  return out;
}

FetchResponse SplicedResponse() {
  FetchResponse m;
  m.responses.resize(1);
  m.responses[0].topic = "t";
  m.responses[0].topic_id = Uuid{1, 1};
  m.responses[0].partitions.resize(2);
  m.responses[0].partitions[0].partition_index = 0;
  m.responses[0].partitions[0].records = RecordsRef::Splice(300, 11);
  m.responses[0].partitions[1].partition_index = 1;
  m.responses[0].partitions[1].records = RecordsRef::Splice(5, 12);
  return m;
}

uint8_t SpliceByte(uint32_t token, uint64_t i) { return static_cast<uint8_t>(token * 16 + i); }

TEST(CoreSpliceTest, SpliceWritesTheLengthPrefixAndRecordsItsPositionNonFlexible) {
  FetchResponse m = SplicedResponse();
  std::vector<uint8_t> out;
  Writer w(&out);
  m.Encode(w, 11);
  // Up to partition 0's records: throttle, error, session, topics[1], "t", partitions[2],
  // then partition 0's fields and the int32 length of the splice.
  Golden g;
  g.i32(0).i16(0).i32(0).arr(1).str("t").arr(2);
  g.i32(0).i16(0).i64(0).i64(-1).i64(-1).arr(-1).i32(-1).i32(300);
  const size_t first = g.data().size();
  g.i32(1).i16(0).i64(0).i64(-1).i64(-1).arr(-1).i32(-1).i32(5);
  const size_t second = g.data().size();
  EXPECT_EQ(out, g.data());  // no record bytes in the buffer
  ASSERT_EQ(w.splices().size(), 2u);
  EXPECT_EQ(w.splices()[0].buffer_pos, first);
  EXPECT_EQ(w.splices()[0].size, 300u);
  EXPECT_EQ(w.splices()[0].token, 11u);
  EXPECT_EQ(w.splices()[1].buffer_pos, second);
  EXPECT_EQ(w.splices()[1].token, 12u);
  EXPECT_EQ(w.total_size(), out.size() + 305);

  // On the wire it reads back as inline records holding the spliced bytes.
  auto wire = Materialize(w, out, SpliceByte);
  FetchResponse d;
  Reader r(wire);
  ASSERT_TRUE(d.Decode(r, 11).ok());
  EXPECT_EQ(r.remaining(), 0u);
  const auto& rec = d.responses[0].partitions[0].records.inline_bytes;
  ASSERT_TRUE(rec.has_value());
  ASSERT_EQ(rec->size(), 300u);
  EXPECT_EQ((*rec)[0], SpliceByte(11, 0));
  EXPECT_EQ((*rec)[299], SpliceByte(11, 299));
  EXPECT_EQ(d.responses[0].partitions[1].records.inline_bytes->size(), 5u);
}

TEST(CoreSpliceTest, SpliceWritesACompactLengthPrefixInFlexibleVersions) {
  FetchResponse m = SplicedResponse();
  std::vector<uint8_t> out;
  Writer w(&out);
  m.Encode(w, 13);
  Golden g;
  g.i32(0).i16(0).i32(0).carr(1).uuid(1, 1).carr(2);
  g.i32(0).i16(0).i64(0).i64(-1).i64(-1).carr(-1).i32(-1).uvarint(301);
  const size_t first = g.data().size();
  g.tags();
  g.i32(1).i16(0).i64(0).i64(-1).i64(-1).carr(-1).i32(-1).uvarint(6);
  const size_t second = g.data().size();
  g.tags().tags().tags();
  EXPECT_EQ(out, g.data());
  ASSERT_EQ(w.splices().size(), 2u);
  EXPECT_EQ(w.splices()[0].buffer_pos, first);
  EXPECT_EQ(w.splices()[1].buffer_pos, second);

  auto wire = Materialize(w, out, SpliceByte);
  FetchResponse d;
  Reader r(wire);
  ASSERT_TRUE(d.Decode(r, 13).ok());
  EXPECT_EQ(r.remaining(), 0u);
  ASSERT_EQ(d.responses[0].partitions[0].records.inline_bytes->size(), 300u);
  EXPECT_EQ((*d.responses[0].partitions[1].records.inline_bytes)[4], SpliceByte(12, 4));
}

TEST(CoreSpliceTest, EmptySpliceIsAnEmptyRecordsField) {
  FetchResponse m = SplicedResponse();
  m.responses[0].partitions.resize(1);
  m.responses[0].partitions[0].records = RecordsRef::Splice(0, 3);
  std::vector<uint8_t> out;
  Writer w(&out);
  m.Encode(w, 4);
  ASSERT_EQ(w.splices().size(), 1u);
  EXPECT_EQ(w.splices()[0].buffer_pos, out.size());
  EXPECT_EQ(std::vector<uint8_t>(out.end() - 4, out.end()), Golden().i32(0).data());
}

TEST(CoreSpliceTest, RecordsRefComparesInlineByContentAndSplicesByToken) {
  std::vector<uint8_t> a = {1, 2, 3}, b = {1, 2, 3};
  EXPECT_EQ(RecordsRef::Inline(View(a)), RecordsRef::Inline(View(b)));
  EXPECT_NE(RecordsRef::Inline(View(a)), RecordsRef::Inline(std::nullopt));
  EXPECT_NE(RecordsRef::Inline(View(kEmpty)), RecordsRef::Inline(std::nullopt));
  EXPECT_EQ(RecordsRef::Splice(3, 1), RecordsRef::Splice(3, 1));
  EXPECT_NE(RecordsRef::Splice(3, 1), RecordsRef::Splice(3, 2));
  EXPECT_NE(RecordsRef::Splice(3, 1), RecordsRef::Inline(View(a)));
}

// ---------------------------------------------------------------------------------------
// Malformed input, over every message.

struct Codec {
  const char* name;
  ApiKey key;
  std::function<std::vector<uint8_t>(int16_t)> golden;
  std::function<Status(std::span<const uint8_t>, int16_t)> decode;
};

template <typename M>
Codec MakeCodec(const char* name, ApiKey key, Case<M> (*make)(int16_t)) {
  return Codec{name, key, [make](int16_t v) { return make(v).golden; },
               [](std::span<const uint8_t> bytes, int16_t v) {
                 Reader r(bytes);
                 M m;
                 return m.Decode(r, v);
               }};
}

std::vector<Codec> AllCodecs() {
  return {
      MakeCodec("ApiVersionsRequest", ApiKey::kApiVersions, ApiVersionsRequestCase),
      MakeCodec("ApiVersionsResponse", ApiKey::kApiVersions, ApiVersionsResponseCase),
      MakeCodec("MetadataRequest", ApiKey::kMetadata, MetadataRequestCase),
      MakeCodec("MetadataResponse", ApiKey::kMetadata, MetadataResponseCase),
      MakeCodec("ProduceRequest", ApiKey::kProduce, ProduceRequestCase),
      MakeCodec("ProduceResponse", ApiKey::kProduce, ProduceResponseCase),
      MakeCodec("FetchRequest", ApiKey::kFetch, FetchRequestCase),
      MakeCodec("FetchResponse", ApiKey::kFetch, FetchResponseCase),
      MakeCodec("ListOffsetsRequest", ApiKey::kListOffsets, ListOffsetsRequestCase),
      MakeCodec("ListOffsetsResponse", ApiKey::kListOffsets, ListOffsetsResponseCase),
  };
}

void PrintTo(const Codec& c, std::ostream* os) { *os << c.name; }

class CoreMalformedTest : public ::testing::TestWithParam<Codec> {};

TEST_P(CoreMalformedTest, EveryStrictPrefixFailsToDecode) {
  const Codec& c = GetParam();
  for (int16_t v = MinVersion(c.key); v <= MaxVersion(c.key); ++v) {
    auto bytes = c.golden(v);
    for (size_t n = 0; n < bytes.size(); ++n) {
      Status st = c.decode(std::span<const uint8_t>(bytes.data(), n), v);
      EXPECT_FALSE(st.ok()) << c.name << " v" << v << " prefix " << n << " of " << bytes.size();
      if (!st.ok()) {
        EXPECT_NE(st.message().find(std::string(c.name) + " v" + std::to_string(v)),
                  std::string::npos)
            << st.message();
      }
    }
  }
}

TEST_P(CoreMalformedTest, CorruptedBytesNeverCrash) {
  // Every byte of every golden set to values that make lengths negative, huge or
  // overlong: decode may succeed or fail but must return.
  const Codec& c = GetParam();
  for (int16_t v = MinVersion(c.key); v <= MaxVersion(c.key); ++v) {
    auto bytes = c.golden(v);
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (uint8_t x : {uint8_t{0x00}, uint8_t{0x80}, uint8_t{0xfe}, uint8_t{0xff}}) {
        auto mutated = bytes;
        mutated[i] = x;
        (void)c.decode(mutated, v);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(CoreAllMessages, CoreMalformedTest, ::testing::ValuesIn(AllCodecs()),
                         [](const ::testing::TestParamInfo<Codec>& info) {
                           return std::string(info.param.name);
                         });

struct BadInput {
  const char* name;
  const char* message;  // which codec
  int16_t version;
  std::vector<uint8_t> bytes;
  const char* expect;  // a piece of the error message
};

Status DecodeNamed(const std::string& message, std::span<const uint8_t> bytes, int16_t v) {
  for (const Codec& c : AllCodecs()) {
    if (message == c.name) return c.decode(bytes, v);
  }
  return Status(StatusCode::kInternal, "no codec " + message);
}

std::vector<BadInput> BadInputs() {
  return {
      {"NegativeStringLength", "ProduceRequest", 3, Golden().i16(-2).i16(1).i32(0).arr(0).take(),
       "negative string length"},
      {"NegativeHostLength", "MetadataResponse", 1,
       Golden().arr(1).i32(1).i16(-7).i32(9092).nullstr().i32(0).take(), "negative string length"},
      {"NegativeArrayLength", "MetadataRequest", 4, Golden().arr(-2).boolean(true).take(),
       "negative array length"},
      {"NegativeRecordsLength", "ProduceRequest", 3,
       Golden().nullstr().i16(1).i32(0).arr(1).str("t").arr(1).i32(0).i32(-5).take(),
       "negative bytes length"},
      {"ArrayCountBeyondInput", "FetchRequest", 4,
       Golden().i32(-1).i32(0).i32(0).i32(0).i8(0).arr(0x7fffffff).i32(0).take(), "cannot fit"},
      {"PartitionCountBeyondInput", "ProduceRequest", 8,
       Golden().nullstr().i16(1).i32(0).arr(1).str("t").arr(100000).i64(0).take(), "cannot fit"},
      {"CompactArrayCountBeyondInput", "FetchResponse", 12,
       Golden().i32(0).i16(0).i32(0).uvarint(0x0fffffff).take(), "cannot fit"},
      {"MetadataTopicCountBeyondInput", "MetadataResponse", 9,
       Golden().i32(0).carr(0).cnullstr().i32(-1).carr(5000).take(), "cannot fit"},
      {"OverlongVarintStringLength", "ProduceRequest", 9,
       Golden()
           .raw(std::vector<uint8_t>{0x81, 0x80, 0x80, 0x80, 0x80, 0x00})
           .i16(1)
           .i32(0)
           .carr(0)
           .tags()
           .take(),
       "varint"},
      {"OverlongVarintArrayCount", "MetadataRequest", 12,
       Golden().raw(std::vector<uint8_t>{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}).take(), "varint"},
      {"OverlongVarintTagCount", "ListOffsetsResponse", 6,
       Golden().i32(0).carr(0).raw(std::vector<uint8_t>{0x80, 0x80, 0x80, 0x80, 0x80, 0x80}).take(),
       "varint"},
      {"TaggedFieldSizeBeyondInput", "FetchResponse", 16,
       Golden().i32(0).i16(0).i32(0).carr(0).uvarint(1).uvarint(0).uvarint(1000).i8(1).take(),
       "tagged field"},
      {"TruncatedKnownTaggedValue", "ProduceResponse", 10,
       Golden()
           .carr(1)
           .cstr("t")
           .carr(1)
           .i32(0)
           .i16(0)
           .i64(0)
           .i64(-1)
           .i64(-1)
           .carr(0)
           .cnullstr()
           .uvarint(1)
           .uvarint(0)
           .uvarint(3)
           .i8(0)
           .i8(0)
           .i8(0)
           .tags()
           .i32(0)
           .tags()
           .take(),
       "current leader"},
      {"TagsOutOfOrder", "ApiVersionsResponse", 3,
       Golden()
           .i16(0)
           .carr(0)
           .i32(0)
           .uvarint(2)
           .uvarint(3)
           .uvarint(1)
           .i8(1)
           .uvarint(1)
           .uvarint(8)
           .i64(1)
           .take(),
       "increasing order"},
  };
}

void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

class CoreBadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(CoreBadInputTest, FailsWithAnErrorNamingTheProblem) {
  const BadInput& in = GetParam();
  Status st = DecodeNamed(in.message, in.bytes, in.version);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(in.expect), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(CoreCases, CoreBadInputTest, ::testing::ValuesIn(BadInputs()),
                         [](const ::testing::TestParamInfo<BadInput>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace core_test
}  // namespace sluice::kafka
