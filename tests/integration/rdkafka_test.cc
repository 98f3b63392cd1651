// librdkafka (the C library under Kafka's C/C++, Python, Go and .NET clients) against a
// `sluice serve` child process: produce with every acks and compression and consume
// back byte for byte, the idempotent producer, a consumer group that rebalances while
// records flow (every record processed exactly once per group, in partition order),
// committed offsets, seek, offsets by timestamp, and the admin API. One broker serves
// the whole binary; each test uses its own topics and groups.
//
// usage: rdkafka_test [gtest flags] path/to/sluice
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "rdkafka_util.h"
#include "sluice_process.h"

namespace sluice::integration {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Headers = std::vector<std::pair<std::string, std::optional<std::string>>>;

// The initial rebalance delay is Kafka's 3 s by default; tests need no such wait.
constexpr const char* kBrokerConfig = "groups:\n  initial_rebalance_delay: 0\n";

// ---------------------------------------------------------------------------------
// Records: what is produced, and what came back

struct Record {
  int32_t partition = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  int64_t timestamp_ms = 0;
  Headers headers;
};

struct Consumed {
  int32_t partition = 0;
  int64_t offset = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;
  int64_t timestamp_ms = 0;
  rd_kafka_timestamp_type_t timestamp_type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  Headers headers;
};

// `per_partition` records for each of `partitions`, interleaved across partitions:
// null and empty keys and values, text that compresses and bytes that do not (every
// byte value), lengths up to 3 KiB, 0–2 headers (some with null values).
std::vector<Record> MakeRecords(const std::string& tag, int32_t partitions, int per_partition,
                                uint32_t seed, int64_t first_timestamp_ms) {
  std::mt19937 rng(seed);
  auto below = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  auto bytes = [&](size_t n) {
    std::string s(n, '\0');
    if (below(2) == 0) {
      for (char& c : s) c = static_cast<char>(below(256));
    } else {
      static const std::string kWords = "sluice kafka record batch offset partition ";
      for (size_t i = 0; i < n; ++i) s[i] = kWords[(i + n) % kWords.size()];
    }
    return s;
  };
  std::vector<Record> out;
  int total = partitions * per_partition;
  for (int i = 0; i < total; ++i) {
    Record r;
    r.partition = i % partitions;
    r.timestamp_ms = first_timestamp_ms + i;
    uint32_t k = below(20);
    if (k == 0) {
      r.key = std::nullopt;
    } else if (k == 1) {
      r.key = "";
    } else {
      r.key = tag + "-key-" + std::to_string(i);
    }
    uint32_t v = below(40);
    if (v == 0) {
      r.value = std::nullopt;
    } else if (v == 1) {
      r.value = "";
    } else {
      r.value = bytes(below(8) == 0 ? below(3072) : below(200));
    }
    for (uint32_t h = below(3); h > 0; --h) {
      r.headers.emplace_back("h" + std::to_string(h),
                             below(5) == 0 ? std::nullopt : std::optional(bytes(below(40))));
    }
    out.push_back(std::move(r));
  }
  return out;
}

Consumed FromMessage(const rd_kafka_message_t* m) {
  Consumed c;
  c.partition = m->partition;
  c.offset = m->offset;
  if (m->key != nullptr) c.key.emplace(static_cast<const char*>(m->key), m->key_len);
  if (m->payload != nullptr) c.value.emplace(static_cast<const char*>(m->payload), m->len);
  c.timestamp_ms = rd_kafka_message_timestamp(m, &c.timestamp_type);
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t i = 0;
         rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      c.headers.emplace_back(name, value == nullptr
                                       ? std::nullopt
                                       : std::optional<std::string>(
                                             std::in_place, static_cast<const char*>(value), size));
    }
  }
  return c;
}

std::string Describe(const std::optional<std::string>& s) {
  if (!s) return "null";
  return std::to_string(s->size()) + " bytes";
}

// Expects `got` (records of one partition in the order they were consumed) to be
// exactly `want` (that partition's records in produce order) at offsets first_offset,
// first_offset + 1, ...: each once, in order, byte for byte. Reports the first few
// differences only.
void ExpectPartition(const std::string& what, const std::vector<const Record*>& want,
                     const std::vector<Consumed>& got, int64_t first_offset = 0) {
  EXPECT_EQ(got.size(), want.size()) << what << ": records consumed";
  int reported = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()) && reported < 5; ++i) {
    const Record& w = *want[i];
    const Consumed& g = got[i];
    std::string at = what + " record " + std::to_string(i);
    bool same = g.offset == first_offset + static_cast<int64_t>(i) && g.key == w.key &&
                g.value == w.value && g.timestamp_ms == w.timestamp_ms &&
                g.timestamp_type == RD_KAFKA_TIMESTAMP_CREATE_TIME && g.headers == w.headers;
    if (!same) {
      ++reported;
      ADD_FAILURE() << at << ": offset " << g.offset << " (want "
                    << first_offset + static_cast<int64_t>(i) << "), key " << Describe(g.key)
                    << (g.key == w.key ? " ok" : " DIFFERS") << ", value " << Describe(g.value)
                    << (g.value == w.value ? " ok" : " DIFFERS") << " (want " << Describe(w.value)
                    << "), timestamp " << g.timestamp_ms << " type " << g.timestamp_type
                    << " (want " << w.timestamp_ms << " CreateTime)"
                    << ", headers " << (g.headers == w.headers ? "ok" : "DIFFER");
    }
  }
}

// Splits `records` by partition, keeping their order.
std::map<int32_t, std::vector<const Record*>> ByPartition(const std::vector<Record>& records) {
  std::map<int32_t, std::vector<const Record*>> out;
  for (const Record& r : records) out[r.partition].push_back(&r);
  return out;
}

std::map<int32_t, std::vector<Consumed>> ByPartition(const std::vector<Consumed>& records) {
  std::map<int32_t, std::vector<Consumed>> out;
  for (const Consumed& r : records) out[r.partition].push_back(r);
  return out;
}

// Expects the topic to hold exactly `want`, each partition from offset 0.
void ExpectTopic(const std::string& topic, const std::vector<Record>& want,
                 const std::vector<Consumed>& got) {
  auto want_by = ByPartition(want);
  auto got_by = ByPartition(got);
  for (const auto& [partition, records] : want_by) {
    ExpectPartition(topic + " [" + std::to_string(partition) + "]", records, got_by[partition]);
  }
  for (const auto& [partition, records] : got_by) {
    EXPECT_TRUE(want_by.count(partition)) << "consumed " << records.size() << " records of "
                                          << topic << " [" << partition << "], which got none";
  }
}

// ---------------------------------------------------------------------------------
// Producing

// Delivery reports of a producer, by the index each record was produced with; and,
// from librdkafka's log (with debug=msg), the codec of each batch it sent.
struct DeliveryLog {
  std::vector<rd_kafka_resp_err_t> errors;
  std::vector<int64_t> offsets;
  std::vector<rd_kafka_msg_status_t> statuses;
  size_t reports = 0;

  std::mutex mu;                                // the log callback runs on librdkafka's threads
  std::map<std::string, int> batches_by_codec;  // guarded by mu
  std::vector<std::string> not_compressed;      // guarded by mu: why a batch went uncompressed

  void Reset(size_t n) {
    errors.assign(n, RD_KAFKA_RESP_ERR__IN_PROGRESS);
    offsets.assign(n, -1);
    statuses.assign(n, RD_KAFKA_MSG_STATUS_NOT_PERSISTED);
    reports = 0;
  }
};

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* log = static_cast<DeliveryLog*>(opaque);
  auto i = reinterpret_cast<uintptr_t>(m->_private);
  if (i >= log->errors.size()) return;
  log->errors[i] = m->err;
  log->offsets[i] = m->offset;
  log->statuses[i] = rd_kafka_message_status(m);
  ++log->reports;
}

// librdkafka's log lines: warnings and errors to stderr; with debug=msg, each batch's
// codec ("Produce MessageSet with 3 message(s) (... PID{Invalid}, gzip)") and any
// decision not to compress.
void OnLog(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  std::string_view line(buf);
  if (level <= 4) std::fprintf(stderr, "%%%d|%s|%s| %s\n", level, fac, rd_kafka_name(rk), buf);
  auto* log = static_cast<DeliveryLog*>(rd_kafka_opaque(rk));
  if (log == nullptr) return;
  if (line.find("not compressing batch") != std::string_view::npos) {
    std::lock_guard lock(log->mu);
    log->not_compressed.emplace_back(line);
  } else if (line.find("Produce MessageSet") != std::string_view::npos && line.ends_with(")")) {
    size_t comma = line.rfind(", ");
    if (comma == std::string_view::npos) return;
    std::lock_guard lock(log->mu);
    ++log->batches_by_codec[std::string(line.substr(comma + 2, line.size() - comma - 3))];
  }
}

KafkaPtr NewProducer(const Props& props, DeliveryLog* log) {
  return NewClient(RD_KAFKA_PRODUCER, props, log, [](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_dr_msg_cb(conf, OnDelivery);
    rd_kafka_conf_set_log_cb(conf, OnLog);
  });
}

// Enqueues one record (its delivery report will carry `index`), waiting while the
// local queue is full. False (and a test failure) on any other error.
bool ProduceOne(rd_kafka_t* producer, const std::string& topic, const Record& r, size_t index) {
  while (true) {
    rd_kafka_headers_t* headers = rd_kafka_headers_new(r.headers.size());
    for (const auto& [name, value] : r.headers) {
      rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()),
                          value ? value->data() : nullptr,
                          value ? static_cast<ssize_t>(value->size()) : 0);
    }
    // Null pointers make null keys and values; the macros below cast their arguments.
    const void* key = r.key ? r.key->data() : nullptr;
    size_t key_size = r.key ? r.key->size() : 0;
    void* value = r.value ? const_cast<char*>(r.value->data()) : nullptr;
    size_t value_size = r.value ? r.value->size() : 0;
    rd_kafka_resp_err_t err = rd_kafka_producev(
        producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(r.partition),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, key_size),
        RD_KAFKA_V_VALUE(value, value_size), RD_KAFKA_V_TIMESTAMP(r.timestamp_ms),
        RD_KAFKA_V_HEADERS(headers),
        RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<uintptr_t>(index))), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return true;  // the headers now belong to the message
    rd_kafka_headers_destroy(headers);
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      ADD_FAILURE() << "produce to " << topic << ": " << rd_kafka_err2str(err);
      return false;
    }
    rd_kafka_poll(producer, 50);
  }
}

// Waits for every delivery report and expects each to be a success.
void FlushAndExpectDelivered(rd_kafka_t* producer, const DeliveryLog& log,
                             const std::string& what) {
  rd_kafka_resp_err_t err = rd_kafka_flush(producer, 60000);
  ASSERT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << what << ": flush: " << rd_kafka_err2str(err);
  ASSERT_EQ(log.reports, log.errors.size()) << what << ": delivery reports";
  for (size_t i = 0; i < log.errors.size(); ++i) {
    ASSERT_EQ(log.errors[i], RD_KAFKA_RESP_ERR_NO_ERROR)
        << what << ": record " << i << ": " << rd_kafka_err2str(log.errors[i]);
  }
}

// Produces every record and waits for its delivery.
void ProduceAll(rd_kafka_t* producer, DeliveryLog* log, const std::string& topic,
                const std::vector<Record>& records) {
  log->Reset(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    ASSERT_TRUE(ProduceOne(producer, topic, records[i], i));
    rd_kafka_poll(producer, 0);
  }
  FlushAndExpectDelivered(producer, *log, "producing to " + topic);
}

// Expects the delivery reports to give each partition's records the offsets
// first, first + 1, ... in produce order.
void ExpectDeliveredInOrder(const std::vector<Record>& records, const DeliveryLog& log,
                            int64_t first = 0) {
  std::map<int32_t, int64_t> next;
  for (size_t i = 0; i < records.size(); ++i) {
    int64_t& want = next.try_emplace(records[i].partition, first).first->second;
    ASSERT_EQ(log.offsets[i], want) << "record " << i << " to partition " << records[i].partition;
    ASSERT_EQ(log.statuses[i], RD_KAFKA_MSG_STATUS_PERSISTED) << "record " << i;
    ++want;
  }
}

// ---------------------------------------------------------------------------------
// Consuming without a group

// Reads `count` records from partitions started at the given offsets (assign: no group
// membership, nothing committed), or fewer when the deadline passes.
std::vector<Consumed> ReadPartitions(const std::string& topic,
                                     const std::vector<std::pair<int32_t, int64_t>>& starts,
                                     size_t count, const Props& extra = {}) {
  Props props = {{"group.id", "reader-" + topic},
                 {"enable.auto.commit", "false"},
                 {"enable.partition.eof", "false"}};
  props.insert(props.end(), extra.begin(), extra.end());
  KafkaPtr consumer = NewClient(RD_KAFKA_CONSUMER, props);
  std::vector<Consumed> out;
  if (!consumer) return out;
  ListPtr list = NewList(topic, starts);
  rd_kafka_resp_err_t err = rd_kafka_assign(consumer.get(), list.get());
  EXPECT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
  auto deadline = Clock::now() + 30s;
  while (out.size() < count && Clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer.get(), 100);
    if (m == nullptr) continue;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      ADD_FAILURE() << "consuming " << topic << ": " << rd_kafka_message_errstr(m);
    } else {
      out.push_back(FromMessage(m));
    }
    rd_kafka_message_destroy(m);
  }
  EXPECT_EQ(out.size(), count) << "records read from " << topic << " within 30 s";
  rd_kafka_consumer_close(consumer.get());
  return out;
}

std::vector<std::pair<int32_t, int64_t>> FromBeginning(int32_t partitions) {
  std::vector<std::pair<int32_t, int64_t>> out;
  for (int32_t p = 0; p < partitions; ++p) out.emplace_back(p, RD_KAFKA_OFFSET_BEGINNING);
  return out;
}

// A producer used only for admin requests and metadata.
class BrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    admin_ = NewProducer({}, &admin_log_);
    ASSERT_TRUE(admin_);
  }
  rd_kafka_t* admin() { return admin_.get(); }

  DeliveryLog admin_log_;
  KafkaPtr admin_;
};

// ---------------------------------------------------------------------------------
// Produce and consume with every acks and compression

class ProduceConsumeTest
    : public BrokerTest,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {};

TEST_P(ProduceConsumeTest, EveryRecordComesBackByteForByte) {
  const auto& [acks, codec] = GetParam();
  std::string topic = "produce-acks" + acks + "-" + codec;
  ASSERT_EQ(CreateTopic(admin(), topic, 2), RD_KAFKA_RESP_ERR_NO_ERROR);

  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  std::vector<Record> records =
      MakeRecords(topic, 2, 250, std::hash<std::string>{}(topic), now_ms - 60000);
  // One record near the 1 MB limit of a batch, of bytes no codec can shrink.
  std::mt19937 rng(11);
  std::string big(600 * 1024, '\0');
  for (char& c : big) c = static_cast<char>(rng());
  records[40].value = big;

  DeliveryLog log;
  // No retries: on loopback a correct broker needs none, and none can reorder records.
  // debug=msg: librdkafka logs the codec of every batch it sends.
  KafkaPtr producer = NewProducer({{"acks", acks},
                                   {"compression.codec", codec},
                                   {"linger.ms", "5"},
                                   {"message.send.max.retries", "0"},
                                   {"debug", "msg"}},
                                  &log);
  ASSERT_TRUE(producer);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, records));
  if (acks != "0") {
    ASSERT_NO_FATAL_FAILURE(ExpectDeliveredInOrder(records, log));
  }
  if (codec != "none") {
    // The batches must really be compressed. librdkafka before 2.8 compresses with gzip,
    // snappy and lz4 only if ApiVersions lists Produce v0, which is why Kafka 4 lists
    // Produce v0-v2 though it serves none of them (KAFKA-18659, librdkafka issue 4956).
    std::lock_guard lock(log.mu);
    EXPECT_TRUE(log.not_compressed.empty())
        << log.not_compressed.size()
        << " batches sent uncompressed: " << log.not_compressed.front();
    EXPECT_GT(log.batches_by_codec[codec], 0) << "no batch compressed with " << codec;
  }

  std::vector<Consumed> got = ReadPartitions(topic, FromBeginning(2), records.size());
  ExpectTopic(topic, records, got);
  auto by = ByPartition(records);
  for (int32_t p = 0; p < 2; ++p) {
    EXPECT_EQ(Watermarks(admin(), topic, p),
              std::make_pair(int64_t{0}, static_cast<int64_t>(by[p].size())))
        << topic << " [" << p << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(AcksAndCodecs, ProduceConsumeTest,
                         ::testing::Combine(::testing::Values("0", "1", "all"),
                                            ::testing::Values("none", "gzip", "snappy", "lz4",
                                                              "zstd")),
                         [](const auto& info) {
                           return "acks_" + std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

// ---------------------------------------------------------------------------------
// The idempotent producer

TEST_F(BrokerTest, IdempotentProducerWritesEachRecordOnceInOrder) {
  const std::string topic = "idempotent";
  ASSERT_EQ(CreateTopic(admin(), topic, 3), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<Record> first = MakeRecords("idem-a", 3, 1000, 21, 1'600'000'000'000);
  std::vector<Record> second = MakeRecords("idem-b", 3, 300, 22, 1'600'000'100'000);

  // Many small batches in flight at once (linger 0, 5 in flight), zstd.
  Props props = {{"enable.idempotence", "true"},
                 {"linger.ms", "0"},
                 {"max.in.flight.requests.per.connection", "5"},
                 {"compression.codec", "zstd"}};
  DeliveryLog log;
  {
    KafkaPtr producer = NewProducer(props, &log);
    ASSERT_TRUE(producer);
    ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, first));
    ASSERT_NO_FATAL_FAILURE(ExpectDeliveredInOrder(first, log));
  }
  {
    // A second producer gets a new producer id and continues where the first ended.
    KafkaPtr producer = NewProducer(props, &log);
    ASSERT_TRUE(producer);
    ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, second));
    ASSERT_NO_FATAL_FAILURE(ExpectDeliveredInOrder(second, log, 1000));
  }
  std::vector<Record> all = first;
  all.insert(all.end(), second.begin(), second.end());
  std::vector<Consumed> got = ReadPartitions(topic, FromBeginning(3), all.size());
  ExpectTopic(topic, all, got);
}

// ---------------------------------------------------------------------------------
// A consumer group that rebalances while records flow

// What the members of one group processed.
struct GroupLedger {
  std::map<int32_t, std::vector<Consumed>> by_partition;  // in processing order
  size_t total = 0;
  std::vector<std::string> errors;
};

// One member: its assignment and, for each assigned partition it processed records
// of, the offset of the next record (what it commits). Owned by the test's thread, the
// only thread that polls, so callbacks run there too.
struct Member {
  std::string name;
  std::string topic;
  bool cooperative = false;  // KIP-429 incremental rebalancing (cooperative-sticky)
  GroupLedger* ledger = nullptr;
  KafkaPtr rk;
  std::set<int32_t> assigned;
  std::map<int32_t, int64_t> next;
  int since_commit = 0;
  int rebalances = 0;    // rebalance callbacks served
  bool leaving = false;  // unsubscribed: gives its partitions up, then closes
  bool closed = false;
};

// Commits, synchronously, the position after the last processed record of each of
// `partitions` the member processed records of.
void CommitProcessed(Member* m, const std::set<int32_t>& partitions, const char* why) {
  m->since_commit = 0;
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(m->next.size())));
  for (const auto& [p, offset] : m->next) {
    if (partitions.count(p))
      rd_kafka_topic_partition_list_add(list.get(), m->topic.c_str(), p)->offset = offset;
  }
  if (list->cnt == 0) return;
  rd_kafka_resp_err_t err = rd_kafka_commit(m->rk.get(), list.get(), 0);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    m->ledger->errors.push_back(m->name + ": " + why + " commit: " + rd_kafka_err2str(err));
  }
  for (int i = 0; i < list->cnt; ++i) {
    if (list->elems[i].err != RD_KAFKA_RESP_ERR_NO_ERROR && list->elems[i].err != err) {
      m->ledger->errors.push_back(m->name + ": " + why + " commit of [" +
                                  std::to_string(list->elems[i].partition) +
                                  "]: " + rd_kafka_err2str(list->elems[i].err));
    }
  }
}

void CommitAll(Member* m, const char* why) { CommitProcessed(m, m->assigned, why); }

// Committing synchronously before giving partitions up is what makes "exactly once per
// group" hold: the next owner starts at the committed offset, after every record
// processed. Eager protocols revoke everything, then assign anew; the cooperative one
// (KIP-429) revokes and assigns only the partitions that move. (The protocol comes from
// the member: rd_kafka_rebalance_protocol() can hang in a callback that runs while the
// consumer closes, librdkafka issue 4041.)
void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                 void* opaque) {
  auto* m = static_cast<Member*>(opaque);
  const bool cooperative = m->cooperative;
  ++m->rebalances;
  std::set<int32_t> moving;
  for (int i = 0; i < parts->cnt; ++i) moving.insert(parts->elems[i].partition);
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    m->assigned.insert(moving.begin(), moving.end());
    if (cooperative) {
      if (rd_kafka_error_t* e = rd_kafka_incremental_assign(rk, parts)) {
        m->ledger->errors.push_back(m->name + ": incremental assign: " + rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
      }
    } else {
      rd_kafka_assign(rk, parts);
    }
    return;
  }
  if (err == RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS) {
    CommitProcessed(m, moving, "revoke");
  } else {
    m->ledger->errors.push_back(m->name + ": rebalance error " + rd_kafka_err2str(err));
  }
  for (int32_t p : moving) {
    m->assigned.erase(p);
    m->next.erase(p);
  }
  if (cooperative) {
    if (rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk, parts)) {
      m->ledger->errors.push_back(m->name + ": incremental unassign: " + rd_kafka_error_string(e));
      rd_kafka_error_destroy(e);
    }
  } else {
    rd_kafka_assign(rk, nullptr);
  }
}

// `instance_id`, when not empty, makes a static member (group.instance.id, KIP-345).
std::unique_ptr<Member> NewMember(const std::string& group, const std::string& topic,
                                  const std::string& assignor, const std::string& name,
                                  GroupLedger* ledger, const std::string& instance_id = "") {
  auto m = std::make_unique<Member>();
  m->name = name;
  m->topic = topic;
  m->cooperative = assignor == "cooperative-sticky";
  m->ledger = ledger;
  Props props = {{"group.id", group},
                 {"client.id", name},
                 {"enable.auto.commit", "false"},
                 {"auto.offset.reset", "earliest"},
                 {"enable.partition.eof", "false"},
                 {"partition.assignment.strategy", assignor},
                 {"session.timeout.ms", "10000"},
                 {"heartbeat.interval.ms", "250"}};
  if (!instance_id.empty()) props.emplace_back("group.instance.id", instance_id);
  m->rk = NewClient(RD_KAFKA_CONSUMER, props, m.get(), [](rd_kafka_conf_t* conf) {
    rd_kafka_conf_set_rebalance_cb(conf, OnRebalance);
  });
  if (!m->rk) return nullptr;
  ListPtr topics(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(topics.get(), topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t err = rd_kafka_subscribe(m->rk.get(), topics.get());
  EXPECT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
  return m;
}

// A member leaves by unsubscribing, giving its partitions up through the rebalance
// callback while it is polled like the others, and closing once it owns nothing.
// Closing a member straight away is not safe with librdkafka 2.0.2: when a revoke was
// already handed to the application, rd_kafka_consumer_close leaves the group and
// tears it down first, and the unassign the callback then makes never returns
// (librdkafka issue 4884).
void StartLeaving(Member* m) {
  if (m->leaving || m->closed) return;
  rd_kafka_resp_err_t err = rd_kafka_unsubscribe(m->rk.get());
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    m->ledger->errors.push_back(m->name + ": unsubscribe: " + rd_kafka_err2str(err));
  m->leaving = true;
}

// Lets the member process at most `max` records; each one must belong to a partition
// it owns. A leaving member that owns nothing any more is closed.
//
// An eager member also commits every 150 records. A cooperative one must not: it keeps
// consuming while librdkafka rejoins for it in the background, so such a commit can
// reach the coordinator after the next generation formed and carry the old one
// (ILLEGAL_GENERATION, as Kafka answers too); librdkafka 2.0.2 then drops the member's
// partitions as lost, without the revoke commit, and their next owners repeat records.
void Process(Member* m, int max) {
  if (m->closed) return;
  if (m->leaving && m->assigned.empty()) {
    rd_kafka_consumer_close(m->rk.get());
    m->closed = true;
    return;
  }
  for (int i = 0; i < max; ++i) {
    rd_kafka_message_t* msg = rd_kafka_consumer_poll(m->rk.get(), i == 0 ? 10 : 0);
    if (msg == nullptr) return;
    if (msg->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      m->ledger->errors.push_back(m->name + ": " + rd_kafka_message_errstr(msg));
    } else {
      if (!m->assigned.count(msg->partition)) {
        m->ledger->errors.push_back(m->name + " got a record of [" +
                                    std::to_string(msg->partition) + "], which it does not own");
      }
      m->ledger->by_partition[msg->partition].push_back(FromMessage(msg));
      ++m->ledger->total;
      m->next[msg->partition] = msg->offset + 1;
      if (!m->cooperative && ++m->since_commit >= 150) CommitAll(m, "periodic");
    }
    rd_kafka_message_destroy(msg);
  }
}

std::string GroupStateName(rd_kafka_consumer_group_state_t s) {
  return rd_kafka_consumer_group_state_name(s);
}

// The partition assignment strategy: "range" (eager) or "cooperative-sticky".
class ConsumerGroupTest : public BrokerTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(ConsumerGroupTest, RebalancesWithoutLosingOrRepeatingRecords) {
  constexpr int32_t kPartitions = 6;
  const std::string assignor = GetParam();
  const std::string group = "rebalancing-group-" + assignor;
  const std::string topic = "group-events-" + assignor;
  ASSERT_EQ(CreateTopic(admin(), topic, kPartitions), RD_KAFKA_RESP_ERR_NO_ERROR);

  // Three batches of records, produced while the group runs: the second while a fourth
  // member joins, the third while a member leaves.
  std::vector<Record> records;
  for (int phase = 0; phase < 3; ++phase) {
    std::vector<Record> more = MakeRecords("group-" + std::to_string(phase), kPartitions, 200,
                                           100 + phase, 1'700'000'000'000 + phase * 10'000);
    records.insert(records.end(), more.begin(), more.end());
  }
  DeliveryLog log;
  log.Reset(records.size());
  KafkaPtr producer =
      NewProducer({{"acks", "all"}, {"enable.idempotence", "true"}, {"linger.ms", "2"}}, &log);
  ASSERT_TRUE(producer);
  size_t produced = 0;

  GroupLedger ledger;
  std::vector<std::unique_ptr<Member>> members;
  for (int i = 0; i < 3; ++i) {
    members.push_back(NewMember(group, topic, assignor, "member-" + std::to_string(i), &ledger));
    ASSERT_TRUE(members.back());
  }

  // Rounds: produce up to 10 records of the current phase, then let each live member
  // process up to 5. Ends when the phase's records are produced and processed and
  // every live member owns partitions (the group is stable with all of them).
  auto run_phase = [&](size_t produce_until, const std::function<void()>& each_round,
                       const std::string& what) {
    auto deadline = Clock::now() + 90s;
    while (Clock::now() < deadline) {
      for (int i = 0; i < 10 && produced < produce_until; ++i, ++produced) {
        if (!ProduceOne(producer.get(), topic, records[produced], produced)) return false;
      }
      rd_kafka_poll(producer.get(), 0);
      if (each_round) each_round();
      size_t owned = 0;
      bool everyone_owns = true;
      for (auto& m : members) {
        Process(m.get(), 5);
        if (m->closed) continue;
        owned += m->assigned.size();
        everyone_owns = everyone_owns && !m->leaving && !m->assigned.empty();
      }
      if (produced == produce_until && ledger.total >= produce_until && everyone_owns &&
          owned == kPartitions) {
        return true;
      }
    }
    ADD_FAILURE() << what << ": not done within 90 s: produced " << produced << ", processed "
                  << ledger.total;
    return false;
  };

  ASSERT_TRUE(run_phase(1200, {}, "three members"));

  members.push_back(NewMember(group, topic, assignor, "member-3", &ledger));
  ASSERT_TRUE(members.back());
  ASSERT_TRUE(run_phase(2400, {}, "a fourth member joins"));

  {
    // The group as DescribeGroups shows it: four members, each partition owned once.
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    const char* groups[] = {group.c_str()};
    rd_kafka_DescribeConsumerGroups(admin(), groups, 1, call.options(), call.queue());
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_DESCRIBECONSUMERGROUPS_RESULT);
    ASSERT_TRUE(ev);
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t** descs =
        rd_kafka_DescribeConsumerGroups_result_groups(
            rd_kafka_event_DescribeConsumerGroups_result(ev.get()), &n);
    ASSERT_EQ(n, 1u);
    ASSERT_EQ(rd_kafka_ConsumerGroupDescription_error(descs[0]), nullptr);
    EXPECT_EQ(GroupStateName(rd_kafka_ConsumerGroupDescription_state(descs[0])), "Stable");
    ASSERT_EQ(rd_kafka_ConsumerGroupDescription_member_count(descs[0]), 4u);
    std::multiset<int32_t> owned;
    std::set<std::string> clients;
    for (size_t i = 0; i < 4; ++i) {
      const rd_kafka_MemberDescription_t* member =
          rd_kafka_ConsumerGroupDescription_member(descs[0], i);
      clients.insert(rd_kafka_MemberDescription_client_id(member));
      EXPECT_NE(std::string(rd_kafka_MemberDescription_host(member)).find("127.0.0.1"),
                std::string::npos)
          << rd_kafka_MemberDescription_host(member);
      const rd_kafka_topic_partition_list_t* parts =
          rd_kafka_MemberAssignment_partitions(rd_kafka_MemberDescription_assignment(member));
      for (int j = 0; j < parts->cnt; ++j) owned.insert(parts->elems[j].partition);
    }
    EXPECT_EQ(clients, (std::set<std::string>{"member-0", "member-1", "member-2", "member-3"}));
    EXPECT_EQ(owned, (std::multiset<int32_t>{0, 1, 2, 3, 4, 5}));
  }

  // member-1 leaves (revoke, commit, LeaveGroup) once 300 of the last batch are out.
  ASSERT_TRUE(run_phase(
      records.size(),
      [&] {
        if (produced >= 2700) StartLeaving(members[1].get());
      },
      "a member leaves"));
  ASSERT_TRUE(members[1]->closed);

  // Every member leaves, committing what it processed when it gives its partitions up.
  for (auto& m : members) StartLeaving(m.get());
  auto deadline = Clock::now() + 60s;
  auto all_closed = [&] {
    return std::all_of(members.begin(), members.end(), [](const auto& m) { return m->closed; });
  };
  while (!all_closed() && Clock::now() < deadline) {
    for (auto& m : members) Process(m.get(), 5);
  }
  ASSERT_TRUE(all_closed()) << "members still owning partitions 60 s after unsubscribing";
  ASSERT_NO_FATAL_FAILURE(FlushAndExpectDelivered(producer.get(), log, "producing to " + topic));
  ASSERT_NO_FATAL_FAILURE(ExpectDeliveredInOrder(records, log));
  for (const std::string& e : ledger.errors) ADD_FAILURE() << e;

  // Exactly once per group, in order, byte for byte.
  auto want = ByPartition(records);
  for (int32_t p = 0; p < kPartitions; ++p) {
    ExpectPartition(topic + " [" + std::to_string(p) + "]", want[p], ledger.by_partition[p]);
  }

  // The committed offsets are the ends of the partitions, as the consumer and the
  // admin API see them.
  KafkaPtr reader =
      NewClient(RD_KAFKA_CONSUMER, {{"group.id", group}, {"enable.auto.commit", "false"}});
  ASSERT_TRUE(reader);
  std::vector<std::pair<int32_t, int64_t>> parts;
  for (int32_t p = 0; p < kPartitions; ++p) parts.emplace_back(p, RD_KAFKA_OFFSET_INVALID);
  ListPtr committed = NewList(topic, parts);
  ASSERT_EQ(rd_kafka_committed(reader.get(), committed.get(), kTimeoutMs),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  for (int i = 0; i < committed->cnt; ++i) {
    int32_t p = committed->elems[i].partition;
    EXPECT_EQ(committed->elems[i].err, RD_KAFKA_RESP_ERR_NO_ERROR);
    EXPECT_EQ(committed->elems[i].offset, static_cast<int64_t>(want[p].size()))
        << "committed [" << p << "]";
  }
  {
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
    rd_kafka_ListConsumerGroupOffsets_t* request =
        rd_kafka_ListConsumerGroupOffsets_new(group.c_str(), nullptr);
    rd_kafka_ListConsumerGroupOffsets(admin(), &request, 1, call.options(), call.queue());
    rd_kafka_ListConsumerGroupOffsets_destroy(request);
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT);
    ASSERT_TRUE(ev);
    size_t n = 0;
    const rd_kafka_group_result_t** groups = rd_kafka_ListConsumerGroupOffsets_result_groups(
        rd_kafka_event_ListConsumerGroupOffsets_result(ev.get()), &n);
    ASSERT_EQ(n, 1u);
    ASSERT_EQ(rd_kafka_group_result_error(groups[0]), nullptr);
    const rd_kafka_topic_partition_list_t* offsets = rd_kafka_group_result_partitions(groups[0]);
    ASSERT_EQ(offsets->cnt, kPartitions);
    for (int i = 0; i < offsets->cnt; ++i) {
      EXPECT_EQ(offsets->elems[i].topic, topic);
      EXPECT_EQ(offsets->elems[i].offset,
                static_cast<int64_t>(want[offsets->elems[i].partition].size()));
    }
  }
  {
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS);
    rd_kafka_ListConsumerGroups(admin(), call.options(), call.queue());
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_LISTCONSUMERGROUPS_RESULT);
    ASSERT_TRUE(ev);
    const rd_kafka_ListConsumerGroups_result_t* result =
        rd_kafka_event_ListConsumerGroups_result(ev.get());
    size_t n = 0, n_errors = 0;
    const rd_kafka_ConsumerGroupListing_t** listed =
        rd_kafka_ListConsumerGroups_result_valid(result, &n);
    rd_kafka_ListConsumerGroups_result_errors(result, &n_errors);
    EXPECT_EQ(n_errors, 0u);
    bool found = false;
    for (size_t i = 0; i < n; ++i) {
      if (group != rd_kafka_ConsumerGroupListing_group_id(listed[i])) continue;
      found = true;
      EXPECT_EQ(GroupStateName(rd_kafka_ConsumerGroupListing_state(listed[i])), "Empty");
      EXPECT_FALSE(rd_kafka_ConsumerGroupListing_is_simple_consumer_group(listed[i]));
    }
    EXPECT_TRUE(found) << "ListGroups does not list " << group;
  }
  {
    // DeleteGroups: the committed offsets go with the group.
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_DELETEGROUPS);
    rd_kafka_DeleteGroup_t* request = rd_kafka_DeleteGroup_new(group.c_str());
    rd_kafka_DeleteGroups(admin(), &request, 1, call.options(), call.queue());
    rd_kafka_DeleteGroup_destroy(request);
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_DELETEGROUPS_RESULT);
    ASSERT_TRUE(ev);
    size_t n = 0;
    const rd_kafka_group_result_t** groups =
        rd_kafka_DeleteGroups_result_groups(rd_kafka_event_DeleteGroups_result(ev.get()), &n);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(rd_kafka_group_result_error(groups[0]), nullptr);
  }
  ListPtr after = NewList(topic, parts);
  ASSERT_EQ(rd_kafka_committed(reader.get(), after.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
  for (int i = 0; i < after->cnt; ++i) {
    EXPECT_EQ(after->elems[i].offset, RD_KAFKA_OFFSET_INVALID) << "after DeleteGroups";
  }
}

INSTANTIATE_TEST_SUITE_P(Assignors, ConsumerGroupTest,
                         ::testing::Values("range", "cooperative-sticky"), [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// A static member (KIP-345) that closes and comes back under the same group.instance.id
// within its session timeout gets its partitions back without a rebalance: the other
// member is not disturbed, and the returning member resumes at its committed offsets.
TEST_F(BrokerTest, StaticMemberComesBackWithoutRebalancingTheGroup) {
  const std::string topic = "static-events";
  const std::string group = "static-group";
  ASSERT_EQ(CreateTopic(admin(), topic, 4), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<Record> first = MakeRecords("static-1", 4, 50, 91, 1'740'000'000'000);
  std::vector<Record> second = MakeRecords("static-2", 4, 50, 92, 1'740'000'100'000);
  DeliveryLog log;
  KafkaPtr producer = NewProducer({{"acks", "all"}}, &log);
  ASSERT_TRUE(producer);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, first));

  GroupLedger ledger;
  std::vector<std::unique_ptr<Member>> members;
  members.push_back(NewMember(group, topic, "range", "static-a", &ledger, "instance-a"));
  members.push_back(NewMember(group, topic, "range", "static-b", &ledger, "instance-b"));
  ASSERT_TRUE(members[0] && members[1]);
  auto run_until = [&](size_t processed, const char* what) {
    auto deadline = Clock::now() + 60s;
    while (Clock::now() < deadline) {
      for (auto& m : members) Process(m.get(), 20);
      bool owning = std::all_of(members.begin(), members.end(),
                                [](const auto& m) { return m->closed || m->assigned.size() == 2; });
      if (owning && ledger.total >= processed) return true;
    }
    ADD_FAILURE() << what << ": not within 60 s (processed " << ledger.total << ")";
    return false;
  };
  ASSERT_TRUE(run_until(first.size(), "two static members"));

  // static-a closes (its revoke callback commits; a static member sends no LeaveGroup)
  // and a new consumer takes its place under the same instance id.
  const std::set<int32_t> owned_by_a = members[0]->assigned;
  const int b_rebalances = members[1]->rebalances;
  rd_kafka_consumer_close(members[0]->rk.get());
  members[0]->closed = true;
  members.push_back(NewMember(group, topic, "range", "static-a-again", &ledger, "instance-a"));
  ASSERT_TRUE(members.back());
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, second));
  ASSERT_TRUE(run_until(first.size() + second.size(), "static-a back"));
  EXPECT_EQ(members[2]->assigned, owned_by_a);
  EXPECT_EQ(members[1]->rebalances, b_rebalances) << "static-b went through a rebalance";

  {
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_DESCRIBECONSUMERGROUPS);
    const char* groups[] = {group.c_str()};
    rd_kafka_DescribeConsumerGroups(admin(), groups, 1, call.options(), call.queue());
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_DESCRIBECONSUMERGROUPS_RESULT);
    ASSERT_TRUE(ev);
    size_t n = 0;
    const rd_kafka_ConsumerGroupDescription_t** descs =
        rd_kafka_DescribeConsumerGroups_result_groups(
            rd_kafka_event_DescribeConsumerGroups_result(ev.get()), &n);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(GroupStateName(rd_kafka_ConsumerGroupDescription_state(descs[0])), "Stable");
    std::map<std::string, std::string> instances;  // instance id -> client id
    for (size_t i = 0; i < rd_kafka_ConsumerGroupDescription_member_count(descs[0]); ++i) {
      const rd_kafka_MemberDescription_t* member =
          rd_kafka_ConsumerGroupDescription_member(descs[0], i);
      const char* instance = rd_kafka_MemberDescription_group_instance_id(member);
      instances[instance ? instance : "(none)"] = rd_kafka_MemberDescription_client_id(member);
    }
    // Kafka replaces only the member id of a returning static member: the client id
    // stays the one it joined with first (GroupMetadata.replaceStaticMember).
    EXPECT_EQ(instances, (std::map<std::string, std::string>{{"instance-a", "static-a"},
                                                             {"instance-b", "static-b"}}));
  }
  for (const std::string& e : ledger.errors) ADD_FAILURE() << e;
  std::vector<Record> all = first;
  all.insert(all.end(), second.begin(), second.end());
  auto want = ByPartition(all);
  for (int32_t p = 0; p < 4; ++p) {
    ExpectPartition(topic + " [" + std::to_string(p) + "]", want[p], ledger.by_partition[p]);
  }
  // Static members leave only by session timeout; closing them here needs no rebalance.
  for (auto& m : members) {
    if (!m->closed) rd_kafka_consumer_close(m->rk.get());
    m->closed = true;
  }
}

// ---------------------------------------------------------------------------------
// Committed offsets and seek

TEST_F(BrokerTest, CommittedOffsetsAreWhereTheNextReaderStartsAndSeekMoves) {
  const std::string topic = "commits";
  const std::string group = "commit-group";
  ASSERT_EQ(CreateTopic(admin(), topic, 2), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<Record> records = MakeRecords(topic, 2, 100, 31, 1'650'000'000'000);
  DeliveryLog log;
  KafkaPtr producer = NewProducer({{"acks", "all"}, {"compression.codec", "snappy"}}, &log);
  ASSERT_TRUE(producer);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, records));
  auto want = ByPartition(records);

  {
    // Commit (with metadata) from a consumer that is no group member: generation -1.
    KafkaPtr c =
        NewClient(RD_KAFKA_CONSUMER, {{"group.id", group}, {"enable.auto.commit", "false"}});
    ASSERT_TRUE(c);
    ListPtr offsets = NewList(topic, {{0, 30}, {1, 55}});
    std::string metadata = "processed by the commit test";
    for (int i = 0; i < offsets->cnt; ++i) {
      offsets->elems[i].metadata = metadata.data();
      offsets->elems[i].metadata_size = metadata.size();
    }
    rd_kafka_resp_err_t err = rd_kafka_commit(c.get(), offsets.get(), 0);
    for (int i = 0; i < offsets->cnt; ++i)
      offsets->elems[i].metadata = nullptr;  // not the list's to free
    ASSERT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);

    ListPtr committed =
        NewList(topic, {{0, RD_KAFKA_OFFSET_INVALID}, {1, RD_KAFKA_OFFSET_INVALID}});
    ASSERT_EQ(rd_kafka_committed(c.get(), committed.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
    EXPECT_EQ(committed->elems[0].offset, 30);
    EXPECT_EQ(committed->elems[1].offset, 55);
    for (int i = 0; i < committed->cnt; ++i) {
      EXPECT_EQ(std::string(static_cast<const char*>(committed->elems[i].metadata),
                            committed->elems[i].metadata_size),
                metadata);
    }
    rd_kafka_consumer_close(c.get());
  }

  KafkaPtr c = NewClient(
      RD_KAFKA_CONSUMER,
      {{"group.id", group}, {"enable.auto.commit", "false"}, {"enable.partition.eof", "false"}});
  ASSERT_TRUE(c);
  auto read = [&](size_t count) {
    std::vector<Consumed> out;
    auto deadline = Clock::now() + 30s;
    while (out.size() < count && Clock::now() < deadline) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(c.get(), 100);
      if (m == nullptr) continue;
      if (m->err) {
        ADD_FAILURE() << rd_kafka_message_errstr(m);
      } else {
        out.push_back(FromMessage(m));
      }
      rd_kafka_message_destroy(m);
    }
    EXPECT_EQ(out.size(), count) << "records read within 30 s";
    return ByPartition(out);
  };
  auto tail = [&](int32_t p, size_t from) {
    return std::vector<const Record*>(want[p].begin() + static_cast<std::ptrdiff_t>(from),
                                      want[p].end());
  };

  // Started at the stored offsets: 30 and 55.
  ListPtr stored = NewList(topic, {{0, RD_KAFKA_OFFSET_STORED}, {1, RD_KAFKA_OFFSET_STORED}});
  ASSERT_EQ(rd_kafka_assign(c.get(), stored.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
  auto got = read(70 + 45);
  ExpectPartition("from the committed offset, [0]", tail(0, 30), got[0], 30);
  ExpectPartition("from the committed offset, [1]", tail(1, 55), got[1], 55);

  // Seek back to an offset and to the beginning.
  ListPtr seek = NewList(topic, {{0, 10}, {1, RD_KAFKA_OFFSET_BEGINNING}});
  rd_kafka_error_t* error = rd_kafka_seek_partitions(c.get(), seek.get(), kTimeoutMs);
  ASSERT_EQ(error, nullptr) << rd_kafka_error_string(error);
  for (int i = 0; i < seek->cnt; ++i) EXPECT_EQ(seek->elems[i].err, RD_KAFKA_RESP_ERR_NO_ERROR);
  got = read(90 + 100);
  ExpectPartition("after seek to 10, [0]", tail(0, 10), got[0], 10);
  ExpectPartition("after seek to the beginning, [1]", tail(1, 0), got[1], 0);

  ListPtr position = NewList(topic, {{0, RD_KAFKA_OFFSET_INVALID}, {1, RD_KAFKA_OFFSET_INVALID}});
  ASSERT_EQ(rd_kafka_position(c.get(), position.get()), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(position->elems[0].offset, 100);
  EXPECT_EQ(position->elems[1].offset, 100);

  // Seek to 3 before the end (librdkafka resolves it with ListOffsets): the last 3
  // records, then those produced afterwards. (A seek to the end would race the produce:
  // librdkafka resolves a logical offset after rd_kafka_seek_partitions returns.)
  ListPtr end = NewList(topic, {{0, RD_KAFKA_OFFSET_TAIL(3)}});
  error = rd_kafka_seek_partitions(c.get(), end.get(), kTimeoutMs);
  ASSERT_EQ(error, nullptr) << rd_kafka_error_string(error);
  got = read(3);
  ExpectPartition("after seek to the end - 3, [0]", tail(0, 97), got[0], 97);
  std::vector<Record> more = MakeRecords("commits-more", 1, 7, 32, 1'650'000'100'000);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, more));
  got = read(7);
  ExpectPartition("records produced after the seek, [0]", ByPartition(more)[0], got[0], 100);
  EXPECT_TRUE(got[1].empty());
  rd_kafka_consumer_close(c.get());
}

// ---------------------------------------------------------------------------------
// Offsets by timestamp

TEST_F(BrokerTest, OffsetsForTimesFindsTheFirstRecordAtOrAfterEachTime) {
  const std::string topic = "times";
  ASSERT_EQ(CreateTopic(admin(), topic, 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  constexpr int64_t kBase = 1'690'000'000'000;
  std::vector<Record> records = MakeRecords(topic, 1, 300, 41, 0);
  for (size_t i = 0; i < records.size(); ++i)
    records[i].timestamp_ms = kBase + 1000 * static_cast<int64_t>(i);
  // lz4 batches of up to 64 records: most lookups land inside a compressed batch.
  DeliveryLog log;
  KafkaPtr producer = NewProducer(
      {{"compression.codec", "lz4"}, {"linger.ms", "100"}, {"batch.num.messages", "64"}}, &log);
  ASSERT_TRUE(producer);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, records));

  const std::vector<std::pair<int64_t, int64_t>> cases = {
      {kBase - 5000, 0},      {kBase, 0},
      {kBase + 1, 1},         {kBase + 63'000, 63},
      {kBase + 64'500, 65},   {kBase + 150'000, 150},
      {kBase + 299'000, 299}, {kBase + 299'001, -1},
  };
  for (const auto& [timestamp, offset] : cases) {
    ListPtr query = NewList(topic, {{0, timestamp}});
    rd_kafka_resp_err_t err = rd_kafka_offsets_for_times(producer.get(), query.get(), kTimeoutMs);
    ASSERT_EQ(err, RD_KAFKA_RESP_ERR_NO_ERROR) << rd_kafka_err2str(err);
    EXPECT_EQ(query->elems[0].err, RD_KAFKA_RESP_ERR_NO_ERROR);
    EXPECT_EQ(query->elems[0].offset, offset)
        << "time " << timestamp - kBase << " ms after the first record";
  }
  EXPECT_EQ(Watermarks(producer.get(), topic, 0), std::make_pair(int64_t{0}, int64_t{300}));

  // Consuming from the offset a time gave starts exactly there.
  ListPtr query = NewList(topic, {{0, kBase + 250'000}});
  ASSERT_EQ(rd_kafka_offsets_for_times(producer.get(), query.get(), kTimeoutMs),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<Consumed> got = ReadPartitions(topic, {{0, query->elems[0].offset}}, 50);
  auto want = ByPartition(records)[0];
  ExpectPartition(topic + " from time +250 s",
                  std::vector<const Record*>(want.begin() + 250, want.end()), got, 250);
}

// ---------------------------------------------------------------------------------
// The admin API

// name -> (value, source) of a topic's configs, by DescribeConfigs.
std::map<std::string, std::pair<std::string, rd_kafka_ConfigSource_t>> DescribeTopicConfigs(
    rd_kafka_t* rk, const std::string& topic) {
  std::map<std::string, std::pair<std::string, rd_kafka_ConfigSource_t>> out;
  AdminCall call(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
  rd_kafka_ConfigResource_t* resource =
      rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
  rd_kafka_DescribeConfigs(rk, &resource, 1, call.options(), call.queue());
  rd_kafka_ConfigResource_destroy(resource);
  EventPtr ev = call.Wait(RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT);
  if (!ev) return out;
  size_t n = 0;
  const rd_kafka_ConfigResource_t** resources = rd_kafka_DescribeConfigs_result_resources(
      rd_kafka_event_DescribeConfigs_result(ev.get()), &n);
  if (n != 1 || rd_kafka_ConfigResource_error(resources[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    ADD_FAILURE() << "DescribeConfigs " << topic << ": "
                  << (n == 1 ? rd_kafka_ConfigResource_error_string(resources[0]) : "no resource");
    return out;
  }
  size_t count = 0;
  const rd_kafka_ConfigEntry_t** entries = rd_kafka_ConfigResource_configs(resources[0], &count);
  for (size_t i = 0; i < count; ++i) {
    const char* value = rd_kafka_ConfigEntry_value(entries[i]);
    out[rd_kafka_ConfigEntry_name(entries[i])] = {value ? value : "(null)",
                                                  rd_kafka_ConfigEntry_source(entries[i])};
  }
  return out;
}

TEST_F(BrokerTest, AdminCreatesConfiguresGrowsTrimsAndDeletesTopics) {
  EXPECT_EQ(CreateTopic(admin(), "admin-a", 2,
                        {{"retention.ms", "3600000"}, {"segment.bytes", "1048576"}}),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(CreateTopic(admin(), "admin-b", 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(CreateTopic(admin(), "admin-a", 1), RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS);
  EXPECT_EQ(CreateTopic(admin(), "admin-bad-config", 1, {{"retention.ms", "soon"}}),
            RD_KAFKA_RESP_ERR_INVALID_CONFIG);
  EXPECT_EQ(CreateTopic(admin(), "admin-bad-name!", 1), RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION);
  EXPECT_EQ(PartitionCount(admin(), "admin-a"), 2);
  EXPECT_EQ(PartitionCount(admin(), "admin-b"), 1);
  EXPECT_EQ(PartitionCount(admin(), "admin-bad-config"), -1);

  // DescribeConfigs: the overrides as dynamic topic configs, the rest as defaults.
  auto configs = DescribeTopicConfigs(admin(), "admin-a");
  EXPECT_EQ(configs["retention.ms"],
            std::make_pair(std::string("3600000"), RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG));
  EXPECT_EQ(configs["segment.bytes"],
            std::make_pair(std::string("1048576"), RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG));
  EXPECT_EQ(configs["cleanup.policy"].first, "delete");
  EXPECT_EQ(configs["cleanup.policy"].second, RD_KAFKA_CONFIG_SOURCE_DEFAULT_CONFIG);

  // AlterConfigs replaces the whole set of overrides: segment.bytes returns to its default.
  {
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_ALTERCONFIGS);
    rd_kafka_ConfigResource_t* resource =
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, "admin-a");
    rd_kafka_ConfigResource_set_config(resource, "retention.ms", "7200000");
    rd_kafka_AlterConfigs(admin(), &resource, 1, call.options(), call.queue());
    rd_kafka_ConfigResource_destroy(resource);
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_ALTERCONFIGS_RESULT);
    ASSERT_TRUE(ev);
    size_t n = 0;
    const rd_kafka_ConfigResource_t** resources =
        rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev.get()), &n);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(rd_kafka_ConfigResource_error(resources[0]), RD_KAFKA_RESP_ERR_NO_ERROR)
        << rd_kafka_ConfigResource_error_string(resources[0]);
  }
  configs = DescribeTopicConfigs(admin(), "admin-a");
  EXPECT_EQ(configs["retention.ms"],
            std::make_pair(std::string("7200000"), RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG));
  EXPECT_EQ(configs["segment.bytes"],
            std::make_pair(std::string("1073741824"), RD_KAFKA_CONFIG_SOURCE_DEFAULT_CONFIG));

  // CreatePartitions: 2 -> 5, and the new partitions take records.
  {
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_CREATEPARTITIONS);
    char err[256];
    rd_kafka_NewPartitions_t* request = rd_kafka_NewPartitions_new("admin-a", 5, err, sizeof err);
    ASSERT_NE(request, nullptr) << err;
    rd_kafka_CreatePartitions(admin(), &request, 1, call.options(), call.queue());
    rd_kafka_NewPartitions_destroy(request);
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT);
    ASSERT_TRUE(ev);
    size_t n = 0;
    const rd_kafka_topic_result_t** results = rd_kafka_CreatePartitions_result_topics(
        rd_kafka_event_CreatePartitions_result(ev.get()), &n);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(rd_kafka_topic_result_error(results[0]), RD_KAFKA_RESP_ERR_NO_ERROR)
        << rd_kafka_topic_result_error_string(results[0]);
  }
  EXPECT_EQ(PartitionCount(admin(), "admin-a"), 5);
  std::vector<Record> grown = MakeRecords("admin-a", 5, 20, 51, 1'660'000'000'000);
  DeliveryLog log;
  KafkaPtr producer = NewProducer({{"acks", "all"}}, &log);
  ASSERT_TRUE(producer);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, "admin-a", grown));
  ExpectTopic("admin-a", grown, ReadPartitions("admin-a", FromBeginning(5), grown.size()));

  // DeleteRecords: the log start moves to 4; reading from the beginning starts there.
  std::vector<Record> trimmed = MakeRecords("admin-b", 1, 10, 52, 1'660'000'000'000);
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, "admin-b", trimmed));
  {
    AdminCall call(admin(), RD_KAFKA_ADMIN_OP_DELETERECORDS);
    ListPtr before = NewList("admin-b", {{0, 4}});
    rd_kafka_DeleteRecords_t* request = rd_kafka_DeleteRecords_new(before.get());
    rd_kafka_DeleteRecords(admin(), &request, 1, call.options(), call.queue());
    rd_kafka_DeleteRecords_destroy(request);
    EventPtr ev = call.Wait(RD_KAFKA_EVENT_DELETERECORDS_RESULT);
    ASSERT_TRUE(ev);
    const rd_kafka_topic_partition_list_t* result =
        rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev.get()));
    ASSERT_EQ(result->cnt, 1);
    EXPECT_EQ(result->elems[0].err, RD_KAFKA_RESP_ERR_NO_ERROR)
        << rd_kafka_err2str(result->elems[0].err);
    EXPECT_EQ(result->elems[0].offset, 4);  // the new low watermark
  }
  EXPECT_EQ(Watermarks(admin(), "admin-b", 0), std::make_pair(int64_t{4}, int64_t{10}));
  auto want_b = ByPartition(trimmed)[0];
  ExpectPartition("admin-b after DeleteRecords",
                  std::vector<const Record*>(want_b.begin() + 4, want_b.end()),
                  ReadPartitions("admin-b", FromBeginning(1), 6), 4);

  // DeleteTopics: gone from Metadata; deleting again fails; a new topic of the same
  // name starts empty.
  EXPECT_EQ(DeleteTopic(admin(), "admin-a"), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(PartitionCount(admin(), "admin-a"), -1);
  EXPECT_EQ(DeleteTopic(admin(), "admin-a"), RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
  EXPECT_EQ(CreateTopic(admin(), "admin-a", 1), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(PartitionCount(admin(), "admin-a"), 1);
  EXPECT_EQ(Watermarks(admin(), "admin-a", 0), std::make_pair(int64_t{0}, int64_t{0}));
  EXPECT_EQ(DeleteTopic(admin(), "admin-b"), RD_KAFKA_RESP_ERR_NO_ERROR);
}

// ---------------------------------------------------------------------------------
// Per-topic limits and timestamps

TEST_F(BrokerTest, LogAppendTimeTopicsStampRecordsWithTheBrokerClock) {
  const std::string topic = "append-time";
  ASSERT_EQ(CreateTopic(admin(), topic, 1, {{"message.timestamp.type", "LogAppendTime"}}),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<Record> records = MakeRecords(topic, 1, 100, 95, 1'000'000'000'000);  // 2001
  auto wall_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  DeliveryLog log;
  KafkaPtr producer = NewProducer({{"compression.codec", "lz4"}, {"linger.ms", "20"}}, &log);
  ASSERT_TRUE(producer);
  const int64_t before = wall_ms();
  ASSERT_NO_FATAL_FAILURE(ProduceAll(producer.get(), &log, topic, records));
  const int64_t after = wall_ms();

  std::vector<Consumed> got = ReadPartitions(topic, FromBeginning(1), records.size());
  ASSERT_EQ(got.size(), records.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].offset, static_cast<int64_t>(i));
    EXPECT_EQ(got[i].key, records[i].key);
    EXPECT_EQ(got[i].value, records[i].value);
    EXPECT_EQ(got[i].headers, records[i].headers);
    EXPECT_EQ(got[i].timestamp_type, RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME) << "record " << i;
    EXPECT_GE(got[i].timestamp_ms, before) << "record " << i;
    EXPECT_LE(got[i].timestamp_ms, after) << "record " << i;
  }
  // Lookups by time use the broker's times, not the producer's.
  ListPtr query = NewList(topic, {{0, before}});
  ASSERT_EQ(rd_kafka_offsets_for_times(producer.get(), query.get(), kTimeoutMs),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(query->elems[0].offset, 0);
  query = NewList(topic, {{0, after + 1}});
  ASSERT_EQ(rd_kafka_offsets_for_times(producer.get(), query.get(), kTimeoutMs),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(query->elems[0].offset, -1);
}

TEST_F(BrokerTest, BatchesOverMaxMessageBytesAreRefusedAndSmallerOnesTaken) {
  const std::string topic = "small-messages";
  ASSERT_EQ(CreateTopic(admin(), topic, 1, {{"max.message.bytes", "10000"}}),
            RD_KAFKA_RESP_ERR_NO_ERROR);
  std::mt19937 rng(97);
  std::string random(20000, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  auto produce_one = [&](const std::string& value, const char* codec) {
    DeliveryLog log;
    KafkaPtr producer = NewProducer(
        {{"compression.codec", codec}, {"linger.ms", "0"}, {"message.send.max.retries", "0"}},
        &log);
    log.Reset(1);
    Record r;
    r.value = value;
    r.timestamp_ms = 1'750'000'000'000;
    EXPECT_TRUE(ProduceOne(producer.get(), topic, r, 0));
    EXPECT_EQ(rd_kafka_flush(producer.get(), kTimeoutMs), RD_KAFKA_RESP_ERR_NO_ERROR);
    return log.errors[0];
  };
  // 20,000 random bytes: over the limit however compressed.
  EXPECT_EQ(produce_one(random, "none"), RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
  EXPECT_EQ(produce_one(random, "zstd"), RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE);
  // The limit is on the batch as sent: 20,000 zeros compress far below it.
  EXPECT_EQ(produce_one(std::string(20000, '\0'), "zstd"), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(produce_one(random.substr(0, 5000), "none"), RD_KAFKA_RESP_ERR_NO_ERROR);
  EXPECT_EQ(Watermarks(admin(), topic, 0), std::make_pair(int64_t{0}, int64_t{2}));
  std::vector<Consumed> got = ReadPartitions(topic, FromBeginning(1), 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].value, std::string(20000, '\0'));
  EXPECT_EQ(got[1].value, random.substr(0, 5000));
}

}  // namespace
}  // namespace sluice::integration

int main(int argc, char** argv) {
  return sluice::integration::RunWithBroker(argc, argv, sluice::integration::kBrokerConfig);
}
