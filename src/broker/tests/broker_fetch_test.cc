// Fetch over a compacted log holding record-less batches (a producer's last batch that
// the cleaner kept empty): a consumer's fetch passes over them to the first batch with
// records, so a client that moves only by the records it gets (kafkajs 2.x) reads the
// whole log; a replica's fetch still gets the log as stored, empty batches included.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "broker/tests/broker_test_util.h"
#include "kafka/protocol/records.h"
#include "storage/batch_header.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/log_swap.h"
#include "storage/testing/batch_builder.h"

namespace sluice::broker {
namespace broker_fetch_test {
namespace {

using testing::Bytes;
using testing::Client;

constexpr char kTopic[] = "compacted";

struct Batch {
  storage::BatchHeader header;
  std::vector<std::pair<std::string, std::string>> records;  // (key, value), offset order
  std::vector<int64_t> offsets;
};

// Every batch of `bytes` (a fetch response's records, or a segment file).
std::vector<Batch> Batches(std::span<const uint8_t> bytes) {
  std::vector<Batch> out;
  while (bytes.size() >= storage::kBatchHeaderSize) {
    storage::BatchHeader h = storage::ParseBatchHeader(bytes);
    if (h.total_size() > bytes.size()) break;  // a partial batch at the end
    if (h.magic != 2 || h.length <= 0) break;  // a segment file's preallocated zeros
    Batch b;
    b.header = h;
    Status st =
        kafka::ForEachRecord(bytes.first(h.total_size()), 1 << 20, [&](const kafka::Record& r) {
          auto str = [](const auto& v) { return v ? std::string(v->begin(), v->end()) : ""; };
          b.records.emplace_back(str(r.key), str(r.value));
          b.offsets.push_back(h.base_offset + r.offset_delta);
        });
    EXPECT_TRUE(st.ok()) << st.ToString();
    out.push_back(std::move(b));
    bytes = bytes.subspan(h.total_size());
  }
  return out;
}

std::vector<Batch> Batches(const kafka::FetchResponse::PartitionData& p) {
  if (!p.records.inline_bytes) return {};
  return Batches(std::span<const uint8_t>(*p.records.inline_bytes));
}

class BrokerFetchTest : public testing::BrokerFixture {
 protected:
  void SetUp() override {
    options_.cleaner.backoff_ms = 20;
    BrokerFixture::SetUp();
  }

  // The batches of the partition's segment files, in offset order (file names are
  // zero-padded base offsets). A segment being swapped may be missed: callers retry.
  std::vector<Batch> StoredBatches() {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir_ / (std::string(kTopic) + "-0"))) {
      if (e.path().extension() == ".log") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    std::vector<Batch> out;
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
      for (Batch& b : Batches(std::span<const uint8_t>(bytes))) out.push_back(std::move(b));
    }
    return out;
  }

  static kafka::FetchRequest FetchRequest(int64_t offset, int32_t partition_max_bytes,
                                          int32_t replica_id, int32_t max_wait_ms) {
    kafka::FetchRequest req;
    req.replica_id = replica_id;
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = 1;
    req.max_bytes = 1 << 20;
    req.topics.push_back({.topic = kTopic,
                          .partitions = {{.partition = 0,
                                          .fetch_offset = offset,
                                          .partition_max_bytes = partition_max_bytes}}});
    return req;
  }

  kafka::FetchResponse::PartitionData Fetch(Client& c, int64_t offset, int32_t partition_max_bytes,
                                            int32_t replica_id = -1) {
    last_fetch_ = c.Call<kafka::FetchResponse>(
        kafka::ApiKey::kFetch, 11, FetchRequest(offset, partition_max_bytes, replica_id, 0));
    if (last_fetch_.responses.size() != 1 || last_fetch_.responses[0].partitions.size() != 1) {
      ADD_FAILURE() << "bad fetch response shape";
      return {};
    }
    return last_fetch_.responses[0].partitions[0];
  }

  int64_t InitProducerId(Client& c) {
    kafka::InitProducerIdRequest req;
    auto resp = c.Call<kafka::InitProducerIdResponse>(kafka::ApiKey::kInitProducerId, 4, req);
    EXPECT_EQ(resp.error_code, kafka::ErrorCode::kNone);
    return resp.producer_id;
  }

  // One batch of keyed records from idempotent producer `pid` at `sequence`.
  void Produce(Client& c, int64_t pid, int32_t sequence,
               const std::vector<std::pair<std::string, std::string>>& records) {
    std::vector<kafka::RecordInput> in;
    for (const auto& [k, v] : records) {
      kafka::RecordInput r;
      r.key = kafka::AsBytes(k);
      r.value = kafka::AsBytes(v);
      in.push_back(std::move(r));
    }
    kafka::BatchBuilderOptions o;
    o.producer_id = pid;
    o.producer_epoch = pid >= 0 ? 0 : -1;
    o.base_sequence = pid >= 0 ? sequence : -1;
    o.base_timestamp = 1000;
    Bytes batch = kafka::BuildBatch(o, in);
    kafka::ProduceRequest req;
    req.acks = -1;
    req.timeout_ms = 5000;
    req.topic_data.push_back({kTopic, {{0, std::span<const uint8_t>(batch), {}}}, {}});
    auto resp = c.Call<kafka::ProduceResponse>(kafka::ApiKey::kProduce, 9, req);
    ASSERT_EQ(resp.responses.size(), 1u);
    ASSERT_EQ(resp.responses[0].partition_responses.size(), 1u);
    EXPECT_EQ(resp.responses[0].partition_responses[0].error_code, kafka::ErrorCode::kNone);
  }

  kafka::FetchResponse last_fetch_;
};

// Producers A1..A3 each write one batch larger than segment.bytes (a segment of its own);
// producer B then overwrites every key of theirs. Cleaned, A1..A3's batches stay as
// record-less batches, each alone in its segment: a fetch at offset 0 used to answer with
// A1's empty batch only.
TEST_F(BrokerFetchTest, ConsumerFetchPassesOverRecordlessBatches) {
  Client c(port());
  kafka::CreateTopicsRequest create;
  create.topics.push_back({kTopic, 1, -1, {}, {}, {}});
  for (auto [k, v] :
       std::vector<std::pair<const char*, const char*>>{{"cleanup.policy", "compact"},
                                                        {"segment.bytes", "1024"},
                                                        {"min.cleanable.dirty.ratio", "0.01"}}) {
    create.topics[0].configs.push_back({k, v, {}});
  }
  auto created = c.Call<kafka::CreateTopicsResponse>(kafka::ApiKey::kCreateTopics, 7, create);
  ASSERT_EQ(created.topics.size(), 1u);
  ASSERT_EQ(created.topics[0].error_code, kafka::ErrorCode::kNone);

  const std::string pad(120, 'p');
  std::map<std::string, std::string> latest;
  for (int a = 0; a < 3; ++a) {
    std::vector<std::pair<std::string, std::string>> recs;
    for (int k = 0; k < 10; ++k) {
      recs.emplace_back("a" + std::to_string(a) + "-" + std::to_string(k), "old-" + pad);
    }
    Produce(c, InitProducerId(c), 0, recs);
  }
  const int64_t b = InitProducerId(c);
  int32_t seq = 0;
  for (int a = 0; a < 3; ++a) {
    for (int k = 0; k < 10; ++k) {
      std::string key = "a" + std::to_string(a) + "-" + std::to_string(k);
      latest[key] = "new-" + std::to_string(a * 10 + k);
      Produce(c, b, seq++, {{key, latest[key]}});
    }
  }
  // More of B's records so the segments above are closed (the active one is never cleaned).
  for (int i = 0; i < 40; ++i) {
    std::string key = "b-" + std::to_string(i);
    latest[key] = "b-value-" + std::to_string(i) + pad;
    Produce(c, b, seq++, {{key, latest[key]}});
  }

  // The cleaner empties A1..A3's batches; the segment files show them as stored (a
  // single node's partition refuses replica fetches, as Kafka does).
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<Batch> stored;
  for (;;) {
    stored = StoredBatches();
    if (!stored.empty() && stored[0].header.records_count == 0) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the cleaner did not run";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(stored[0].header.base_offset, 0);
  EXPECT_EQ(stored[0].header.last_offset(), 9);  // the producer's offsets and sequence kept
  int empty_seen = 0;
  for (const Batch& batch : stored) {
    if (batch.header.base_offset < 30) empty_seen += batch.header.records_count == 0 ? 1 : 0;
  }
  EXPECT_EQ(empty_seen, 3);

  // A consumer's fetch at 0 starts at B's first batch, the first with records.
  for (int32_t max_bytes : {1, 200, 1 << 20}) {
    auto p = Fetch(c, 0, max_bytes);
    EXPECT_EQ(p.error_code, kafka::ErrorCode::kNone);
    auto got = Batches(p);
    ASSERT_FALSE(got.empty()) << max_bytes;
    EXPECT_EQ(got[0].header.base_offset, 30) << max_bytes;
    for (const Batch& batch : got) EXPECT_GT(batch.header.records_count, 0);
  }

  // A client that moves only by the records it gets (kafkajs: the last record's offset +
  // 1) reads every key's latest value, with small and large fetches.
  for (int32_t max_bytes : {1, 300, 1 << 20}) {
    std::map<std::string, std::string> seen;
    int64_t offset = 0;
    auto hw = Fetch(c, 0, 1).high_watermark;
    for (int fetches = 0; offset < hw; ++fetches) {
      ASSERT_LT(fetches, 1000) << "no progress at offset " << offset;
      auto got = Batches(Fetch(c, offset, max_bytes));
      int64_t last = -1;
      for (const Batch& batch : got) {
        for (size_t i = 0; i < batch.records.size(); ++i) {
          if (batch.offsets[i] < offset) continue;
          seen[batch.records[i].first] = batch.records[i].second;
          last = batch.offsets[i];
        }
      }
      ASSERT_GE(last, offset) << "a fetch at " << offset << " brought no record";
      offset = last + 1;
    }
    EXPECT_EQ(seen, latest) << "max_bytes " << max_bytes;
  }
}

// A log whose visible end is record-less batches (built with the storage API while the
// broker is stopped: a segment cleaned down to its first batch and emptied ones, the
// segments after it cut). Not waiting, a consumer's fetch there gets the empty batches
// (librdkafka and Java move past them); waiting, they are no data for min_bytes, so the
// fetch waits like one at the end of the log, and an append answers it with the new
// record, the empty batches passed over.
TEST_F(BrokerFetchTest, RecordlessTailIsNoDataForMinBytes) {
  {
    Client c(port());
    kafka::CreateTopicsRequest create;
    create.topics.push_back({kTopic, 1, -1, {}, {{"segment.bytes", "1024", {}}}, {}});
    auto created = c.Call<kafka::CreateTopicsResponse>(kafka::ApiKey::kCreateTopics, 7, create);
    ASSERT_EQ(created.topics.size(), 1u);
    ASSERT_EQ(created.topics[0].error_code, kafka::ErrorCode::kNone);
  }
  Stop();
  int64_t tail = -1, end = -1;
  {
    storage::IoExecutor exec(1);
    storage::LogOptions o;
    o.executor = &exec;
    o.segment_bytes = 1024;
    o.flush_policy = storage::FlushPolicy::kDurable;
    auto log = storage::PartitionLog::Open((dir_ / (std::string(kTopic) + "-0")).string(), o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (int i = 0; i < 12; ++i) {
      storage::testing::BatchSpec spec;
      spec.base_timestamp = now;
      spec.records.push_back({"k" + std::to_string(i), std::string(200, 'v')});
      ASSERT_TRUE((*log)->Append(storage::testing::BuildBatch(spec), {}).ok());
    }
    ASSERT_TRUE((*log)->Flush().ok());
    auto closed = (*log)->ClosedSegments();
    ASSERT_FALSE(closed.empty());
    const storage::SegmentSummary seg = closed[0];
    auto read = (*log)->Read(seg.base_offset, 1 << 20);  // the whole first segment
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(storage::PartitionLog::ReadSlice(read->slice, &bytes).ok());
    auto cleaned = (*log)->BeginCleaned(seg.base_offset);
    ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
    for (size_t pos = 0; pos < bytes.size();) {
      storage::BatchHeader h = storage::ParseBatchHeader(std::span(bytes).subspan(pos));
      std::vector<uint8_t> batch(bytes.begin() + static_cast<ptrdiff_t>(pos),
                                 bytes.begin() + static_cast<ptrdiff_t>(pos + h.total_size()));
      if (pos > 0 && tail < 0) tail = h.base_offset;
      ASSERT_TRUE(
          (*cleaned)->Append(pos == 0 ? batch : storage::testing::EmptiedBatch(batch)).ok());
      pos += h.total_size();
    }
    ASSERT_GE(tail, 0) << "the first segment holds one batch only";
    ASSERT_TRUE((*log)->ReplaceSegments({seg.base_offset}, std::move(*cleaned)).ok());
    ASSERT_TRUE((*log)->TruncateTo(seg.next_offset).ok());
    end = seg.next_offset;
    ASSERT_EQ((*log)->end_offset(), end);
  }
  Start();

  Client c(port());
  auto p = Fetch(c, tail, 1 << 20);
  ASSERT_EQ(p.error_code, kafka::ErrorCode::kNone);
  ASSERT_EQ(p.high_watermark, end);
  auto got = Batches(p);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0].header.base_offset, tail);
  EXPECT_EQ(got.back().header.next_offset(), end);
  for (const Batch& b : got) EXPECT_EQ(b.header.records_count, 0);

  // A waiting fetch at the empty batches, then a record from another connection.
  ASSERT_TRUE(c.SendRequest(kafka::ApiKey::kFetch, 11, 1000,
                            FetchRequest(tail, 1 << 20, -1, testing::kTimeoutMs / 2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it waits on the partition
  {
    Client producer(port());
    Produce(producer, -1, -1, {{"after", "the empty batches"}});
  }
  auto frame = c.ReadFrame();
  ASSERT_TRUE(frame.has_value());
  kafka::Reader r(*frame);
  auto id = kafka::DecodeResponseHeader(r, kafka::ApiKey::kFetch, 11);
  ASSERT_TRUE(id.ok() && *id == 1000);
  kafka::FetchResponse resp;
  ASSERT_TRUE(resp.Decode(r, 11).ok());
  ASSERT_EQ(resp.responses.size(), 1u);
  ASSERT_EQ(resp.responses[0].partitions.size(), 1u);
  got = Batches(resp.responses[0].partitions[0]);
  ASSERT_FALSE(got.empty()) << "the waiting fetch was answered without the new record";
  EXPECT_EQ(got[0].header.base_offset, end) << "answered with the empty batches, not waiting";
  ASSERT_EQ(got[0].records.size(), 1u);
  EXPECT_EQ(got[0].records[0].first, "after");
}

}  // namespace
}  // namespace broker_fetch_test
}  // namespace sluice::broker
