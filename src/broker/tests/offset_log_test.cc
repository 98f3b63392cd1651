// OffsetLog: the __consumer_offsets record formats, replay after reopen, tombstones,
// malformed records at replay, and the offsets of transactions (pending offsets, markers,
// their replay). Cleaning of the log: internal_log_test.cc.
#include "broker/offset_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "kafka/protocol/records.h"
#include "kafka/protocol/wire.h"
#include "storage/batch_header.h"
#include "storage/io_executor.h"
#include "storage/log.h"
#include "storage/testing/fault_env.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace offset_log_test {
namespace {

using storage::testing::TempDir;

class OffsetLogTest : public ::testing::Test {
 protected:
  OffsetLogOptions Options() {
    OffsetLogOptions o;
    o.dir = dir_.path() + "/__consumer_offsets-0";
    o.executor = &executor_;
    o.flush_ms = 5;
    return o;
  }

  std::unique_ptr<OffsetLog> Open(OffsetLogOptions o) {
    auto log = OffsetLog::Open(std::move(o));
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(log).value() : nullptr;
  }
  std::unique_ptr<OffsetLog> Open() { return Open(Options()); }

  // Writes and waits until durable.
  static Status WriteDurable(OffsetLog& log, const OffsetWrite& w) {
    return WaitDurable([&](OffsetLog::Done cb) { return log.Write(w, std::move(cb)); });
  }
  // The offsets log's PartitionLog itself, to write or read batches by hand.
  Result<std::unique_ptr<storage::PartitionLog>> OpenRaw(const std::string& dir) {
    storage::LogOptions lo;
    lo.executor = &executor_;
    return storage::PartitionLog::Open(dir, lo);
  }
  // Runs `start` with a durability callback and waits for it.
  static Status WaitDurable(const std::function<Status(OffsetLog::Done)>& start) {
    auto p = std::make_shared<std::promise<Status>>();
    auto f = p->get_future();
    RETURN_IF_ERROR(start([p](const Status& s) { p->set_value(s); }));
    if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      return InternalError("no durable callback");
    }
    return f.get();
  }

  static CommittedOffset Value(int64_t offset, std::string metadata = "", int32_t epoch = -1) {
    return CommittedOffset{offset, epoch, std::move(metadata), 1'700'000'000'000 + offset};
  }

  TempDir dir_{"offset-log-test"};
  storage::IoExecutor executor_{2};
};

TEST(OffsetsFormatTest, OffsetKeyAndValueAreKafkasBytes) {
  auto key = offsets_format::EncodeOffsetKey("g", TopicPartition{"t", 3});
  EXPECT_EQ(key, (std::vector<uint8_t>{0, 1, 0, 1, 'g', 0, 1, 't', 0, 0, 0, 3}));
  auto value = offsets_format::EncodeOffsetValue(CommittedOffset{258, 7, "m", 1});
  EXPECT_EQ(value, (std::vector<uint8_t>{0, 3,                         // version 3
                                         0, 0, 0,   0, 0, 0, 1, 2,     // offset
                                         0, 0, 0,   7,                 // leader epoch
                                         0, 1, 'm',                    // metadata
                                         0, 0, 0,   0, 0, 0, 0, 1}));  // commit timestamp
  auto gkey = offsets_format::EncodeGroupKey("g");
  EXPECT_EQ(gkey, (std::vector<uint8_t>{0, 2, 0, 1, 'g'}));
  auto gvalue = offsets_format::EncodeGroupValue(GroupRecord{"consumer", 5, "range", std::nullopt});
  EXPECT_EQ(gvalue,
            (std::vector<uint8_t>{0, 0, 0, 8,   'c', 'o', 'n', 's', 'u',  'm',  'e', 'r', 0, 0, 0,
                                  5, 0, 5, 'r', 'a', 'n', 'g', 'e', 0xff, 0xff, 0,   0,   0, 0}));
}

TEST(OffsetsFormatTest, DecodesWhatItEncodes) {
  auto k = offsets_format::DecodeKey(offsets_format::EncodeOffsetKey("group", {"topic", 9}));
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->kind, offsets_format::Key::Kind::kOffset);
  EXPECT_EQ(k->group, "group");
  EXPECT_EQ(k->tp, (TopicPartition{"topic", 9}));
  auto g = offsets_format::DecodeKey(offsets_format::EncodeGroupKey("group"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->kind, offsets_format::Key::Kind::kGroup);
  CommittedOffset v{42, 3, "meta", 99};
  auto dv = offsets_format::DecodeOffsetValue(offsets_format::EncodeOffsetValue(v));
  ASSERT_TRUE(dv.ok());
  EXPECT_EQ(*dv, v);
  GroupRecord r{"consumer", 12, "range", "member-1"};
  auto dr = offsets_format::DecodeGroupValue(offsets_format::EncodeGroupValue(r));
  ASSERT_TRUE(dr.ok());
  EXPECT_EQ(*dr, r);
}

TEST(OffsetsFormatTest, DecodesOlderValueVersions) {
  // OffsetCommitValue v1: offset, metadata, commit timestamp, expire timestamp.
  std::vector<uint8_t> v1;
  kafka::Writer w(&v1);
  w.Int16(1);
  w.Int64(77);
  w.String(false, "x");
  w.Int64(5);
  w.Int64(6);
  auto d = offsets_format::DecodeOffsetValue(v1);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, (CommittedOffset{77, -1, "x", 5}));

  // GroupMetadataValue v3 with one member.
  std::vector<uint8_t> g3;
  kafka::Writer gw(&g3);
  gw.Int16(3);
  gw.String(false, "consumer");
  gw.Int32(8);
  gw.NullableString(false, std::string("range"));
  gw.NullableString(false, std::string("m1"));
  gw.Int64(123);  // current state timestamp
  gw.ArrayLength(false, 1);
  gw.String(false, "m1");
  gw.NullableString(false, std::nullopt);
  gw.String(false, "client");
  gw.String(false, "/127.0.0.1");
  gw.Int32(300000);
  gw.Int32(10000);
  gw.Bytes(false, std::vector<uint8_t>{1, 2});
  gw.Bytes(false, std::vector<uint8_t>{3});
  auto dg = offsets_format::DecodeGroupValue(g3);
  ASSERT_TRUE(dg.ok()) << dg.status().ToString();
  EXPECT_EQ(*dg, (GroupRecord{"consumer", 8, "range", "m1"}));
}

TEST(OffsetsFormatTest, RejectsTruncatedAndUnknownVersions) {
  auto key = offsets_format::EncodeOffsetKey("group", {"topic", 1});
  key.pop_back();
  EXPECT_FALSE(offsets_format::DecodeKey(key).ok());
  EXPECT_FALSE(offsets_format::DecodeKey(std::vector<uint8_t>{0, 9, 0, 0}).ok());  // version 9
  EXPECT_FALSE(offsets_format::DecodeKey(std::vector<uint8_t>{0}).ok());
  auto value = offsets_format::EncodeOffsetValue(CommittedOffset{1, 2, "abc", 4});
  value.resize(value.size() - 3);
  EXPECT_FALSE(offsets_format::DecodeOffsetValue(value).ok());
  EXPECT_FALSE(offsets_format::DecodeOffsetValue(std::vector<uint8_t>{0, 7}).ok());
  // A negative string length.
  EXPECT_FALSE(offsets_format::DecodeKey(std::vector<uint8_t>{0, 1, 0xff, 0xf0}).ok());
  auto group =
      offsets_format::EncodeGroupValue(GroupRecord{"consumer", 1, std::nullopt, std::nullopt});
  group.pop_back();
  EXPECT_FALSE(offsets_format::DecodeGroupValue(group).ok());
}

TEST_F(OffsetLogTest, CommitsAndGenerationsSurviveReopen) {
  {
    auto log = Open();
    ASSERT_NE(log, nullptr);
    OffsetWrite w;
    w.Commit("g1", {"a", 0}, Value(10, "meta", 4));
    w.Commit("g1", {"a", 1}, Value(11));
    w.Commit("g2", {"b", 0}, Value(20));
    w.SetGroup("g1", GroupRecord{"consumer", 3, "range", "m"});
    ASSERT_TRUE(WriteDurable(*log, w).ok());
    OffsetWrite w2;
    w2.Commit("g1", {"a", 0}, Value(15));  // overwrites
    ASSERT_TRUE(WriteDurable(*log, w2).ok());
    ASSERT_TRUE(log->Close().ok());
  }
  auto log = Open();
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->skipped_records(), 0);
  ASSERT_NE(log->Find("g1", {"a", 0}), nullptr);
  EXPECT_EQ(*log->Find("g1", {"a", 0}), Value(15));
  EXPECT_EQ(*log->Find("g1", {"a", 1}), Value(11));
  EXPECT_EQ(*log->Find("g2", {"b", 0}), Value(20));
  ASSERT_NE(log->Group("g1"), nullptr);
  EXPECT_EQ(*log->Group("g1"), (GroupRecord{"consumer", 3, "range", "m"}));
  EXPECT_EQ(log->Group("g2"), nullptr);
  EXPECT_EQ(log->GroupIds(), (std::vector<std::string>{"g1", "g2"}));
  EXPECT_EQ(log->offset_count(), 3u);
}

TEST_F(OffsetLogTest, TombstonesDeleteGroupsAndTopicsDurably) {
  {
    auto log = Open();
    OffsetWrite w;
    w.Commit("g1", {"a", 0}, Value(1));
    w.Commit("g1", {"b", 0}, Value(2));
    w.Commit("g2", {"a", 0}, Value(3));
    w.Commit("g2", {"a", 1}, Value(4));
    w.Commit("g3", {"c", 0}, Value(5));
    w.SetGroup("g3", GroupRecord{"consumer", 2, std::nullopt, std::nullopt});
    ASSERT_TRUE(WriteDurable(*log, w).ok());
    OffsetWrite d;
    d.DeleteTopic("a");
    d.DeleteGroup("g3");
    ASSERT_TRUE(WriteDurable(*log, d).ok());
    EXPECT_EQ(log->Find("g1", {"a", 0}), nullptr);
    EXPECT_FALSE(log->HasOffsets("g2"));
    EXPECT_EQ(log->GroupIds(), (std::vector<std::string>{"g1"}));
  }
  auto log = Open();
  EXPECT_EQ(log->GroupIds(), (std::vector<std::string>{"g1"}));
  EXPECT_EQ(log->Find("g1", {"a", 0}), nullptr);
  EXPECT_EQ(*log->Find("g1", {"b", 0}), Value(2));
  EXPECT_EQ(log->Group("g3"), nullptr);
}

TEST_F(OffsetLogTest, DeletingNothingCallsBackInline) {
  auto log = Open();
  OffsetWrite w;
  w.DeleteTopic("nothing");
  bool called = false;
  ASSERT_TRUE(log->Write(w, [&](const Status& st) { called = st.ok(); }).ok());
  EXPECT_TRUE(called);
}

TEST_F(OffsetLogTest, RecordTooLargeChangesNothing) {
  auto log = Open();
  OffsetWrite w;
  w.Commit("g", {"t", 0}, Value(1, std::string(9 << 20, 'x')));
  bool called = false;
  Status st = log->Write(w, [&](const Status&) { called = true; });
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(called);
  EXPECT_EQ(log->Find("g", {"t", 0}), nullptr);
  EXPECT_EQ(log->live_bytes(), 0u);
}

TEST_F(OffsetLogTest, MalformedRecordsAreSkippedAtReplay) {
  OffsetLogOptions o = Options();
  {
    // Write the log by hand: good records around every kind of bad one.
    auto plog = OpenRaw(o.dir);
    ASSERT_TRUE(plog.ok()) << plog.status().ToString();
    auto good_key = offsets_format::EncodeOffsetKey("g", {"t", 0});
    auto good_value = offsets_format::EncodeOffsetValue(Value(100));
    auto good_key2 = offsets_format::EncodeOffsetKey("g", {"t", 1});
    auto good_value2 = offsets_format::EncodeOffsetValue(Value(200));
    std::vector<uint8_t> garbage_key{0xde, 0xad};
    std::vector<uint8_t> unknown_version_key{0x7f, 0x00, 0, 1, 'g'};
    auto key_bad_value = offsets_format::EncodeOffsetKey("g", {"t", 2});
    std::vector<uint8_t> bad_value{0, 3, 1, 2};
    auto group_key = offsets_format::EncodeGroupKey("g");
    std::vector<uint8_t> bad_group_value{0, 0, 0, 50, 'x'};
    std::vector<kafka::RecordInput> records(7);
    records[0].key = std::span<const uint8_t>(good_key);
    records[0].value = std::span<const uint8_t>(good_value);
    records[1].key = std::span<const uint8_t>(garbage_key);
    records[1].value = std::span<const uint8_t>(good_value);
    records[2].key = std::span<const uint8_t>(unknown_version_key);
    records[2].value = std::span<const uint8_t>(good_value);
    records[3].key = std::span<const uint8_t>(key_bad_value);
    records[3].value = std::span<const uint8_t>(bad_value);
    records[4].key = std::nullopt;  // null key
    records[4].value = std::span<const uint8_t>(good_value);
    records[5].key = std::span<const uint8_t>(group_key);
    records[5].value = std::span<const uint8_t>(bad_group_value);
    records[6].key = std::span<const uint8_t>(good_key2);
    records[6].value = std::span<const uint8_t>(good_value2);
    auto batch = kafka::BuildBatch(kafka::BatchBuilderOptions{}, records);
    ASSERT_TRUE((*plog)->Append(batch, storage::AppendOptions{}).ok());
    ASSERT_TRUE((*plog)->Close().ok());
  }
  auto log = Open(o);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->skipped_records(), 5);
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(100));
  EXPECT_EQ(*log->Find("g", {"t", 1}), Value(200));
  EXPECT_EQ(log->Find("g", {"t", 2}), nullptr);
  EXPECT_EQ(log->Group("g"), nullptr);
  // And the log still takes writes after the bad records.
  OffsetWrite w;
  w.Commit("g", {"t", 2}, Value(300));
  ASSERT_TRUE(WriteDurable(*log, w).ok());
}

// -----------------------------------------------------------------------------------------
// Transactions

TEST(OffsetsFormatTest, MarkerIsKafkasControlRecord) {
  EXPECT_EQ(offsets_format::EncodeMarkerKey(true), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(offsets_format::EncodeMarkerKey(false), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(offsets_format::EncodeMarkerValue(0x01020304),
            (std::vector<uint8_t>{0, 0, 1, 2, 3, 4}));
  auto batch = offsets_format::BuildMarkerBatch(77, 5, true, 3, 1000);
  storage::BatchHeader h = storage::ParseBatchHeader(batch);
  EXPECT_EQ(h.attributes, storage::kAttrTransactional | storage::kAttrControl);
  EXPECT_EQ(h.records_count, 1);
  EXPECT_EQ(storage::LoadBE64(batch.data() + storage::kProducerIdOffset), 77u);
  EXPECT_EQ(storage::LoadBE16(batch.data() + storage::kProducerEpochOffset), 5u);
  EXPECT_EQ(static_cast<int32_t>(storage::LoadBE32(batch.data() + storage::kBaseSequenceOffset)),
            -1);
  EXPECT_TRUE(storage::ValidateBatch(batch, 1 << 20).ok());
  kafka::RecordReader reader;
  ASSERT_TRUE(reader.Open(batch, 1 << 20).ok());
  kafka::Record rec;
  ASSERT_TRUE(reader.Next(&rec));
  ASSERT_TRUE(rec.key && rec.value);
  EXPECT_EQ(std::vector<uint8_t>(rec.key->begin(), rec.key->end()),
            (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(std::vector<uint8_t>(rec.value->begin(), rec.value->end()),
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 3}));
}

TEST(OffsetsFormatTest, MarkerKeyDecoding) {
  EXPECT_EQ(*offsets_format::DecodeMarkerKey(std::vector<uint8_t>{0, 0, 0, 1}), true);
  EXPECT_EQ(*offsets_format::DecodeMarkerKey(std::vector<uint8_t>{0, 0, 0, 0}), false);
  // A later key version is read as version 0, as Kafka does.
  EXPECT_EQ(*offsets_format::DecodeMarkerKey(std::vector<uint8_t>{0, 1, 0, 1, 9}), true);
  EXPECT_FALSE(offsets_format::DecodeMarkerKey(std::vector<uint8_t>{0, 0, 0}).ok());
  EXPECT_FALSE(offsets_format::DecodeMarkerKey(std::vector<uint8_t>{}).ok());
  EXPECT_FALSE(offsets_format::DecodeMarkerKey(std::vector<uint8_t>{0xff, 0xff, 0, 1}).ok());
  EXPECT_FALSE(offsets_format::DecodeMarkerKey(std::vector<uint8_t>{0, 0, 0, 2}).ok());
  EXPECT_FALSE(offsets_format::DecodeMarkerKey(std::vector<uint8_t>{0, 0, 0xff, 0xff}).ok());
}

class OffsetLogTxnTest : public OffsetLogTest {
 protected:
  static Status TxnDurable(OffsetLog& log, int64_t pid, int16_t epoch, const OffsetWrite& w) {
    return WaitDurable(
        [&](OffsetLog::Done cb) { return log.WriteTxnOffsets(pid, epoch, w, std::move(cb)); });
  }
  static Status MarkerDurable(OffsetLog& log, int64_t pid, int16_t epoch, bool commit) {
    return WaitDurable(
        [&](OffsetLog::Done cb) { return log.CompleteTxn(pid, epoch, commit, 0, std::move(cb)); });
  }
  static OffsetWrite One(const std::string& group, TopicPartition tp, CommittedOffset v) {
    OffsetWrite w;
    w.Commit(group, std::move(tp), std::move(v));
    return w;
  }
  // Every batch header of the log in `dir`, with its producer id.
  std::vector<std::pair<storage::BatchHeader, int64_t>> Batches(const std::string& dir) {
    auto plog = OpenRaw(dir);
    EXPECT_TRUE(plog.ok());
    std::vector<std::pair<storage::BatchHeader, int64_t>> out;
    if (!plog.ok()) return out;
    int64_t offset = (*plog)->start_offset();
    while (offset < (*plog)->written_end_offset()) {
      auto rr = (*plog)->Read(offset, 1 << 20);
      EXPECT_TRUE(rr.ok());
      if (!rr.ok() || rr->slice.size == 0) break;
      std::vector<uint8_t> buf;
      EXPECT_TRUE(storage::PartitionLog::ReadSlice(rr->slice, &buf).ok());
      size_t pos = 0;
      while (pos + storage::kBatchHeaderSize <= buf.size()) {
        storage::BatchHeader h = storage::ParseBatchHeader(std::span(buf).subspan(pos));
        out.emplace_back(h, static_cast<int64_t>(
                                storage::LoadBE64(buf.data() + pos + storage::kProducerIdOffset)));
        pos += h.total_size();
      }
      offset = rr->next_offset;
    }
    EXPECT_TRUE((*plog)->Close().ok());
    return out;
  }
};

TEST_F(OffsetLogTxnTest, PendingUntilCommittedThenVisible) {
  auto log = Open();
  ASSERT_TRUE(TxnDurable(*log, 7, 1, One("g", {"t", 0}, Value(10))).ok());
  EXPECT_EQ(log->Find("g", {"t", 0}), nullptr);
  EXPECT_TRUE(log->HasPendingOffset("g", {"t", 0}));
  EXPECT_FALSE(log->HasPendingOffset("g", {"t", 1}));
  EXPECT_TRUE(log->HasOffsets("g"));
  ASSERT_NE(log->FindPending(7, "g", {"t", 0}), nullptr);
  EXPECT_EQ(*log->FindPending(7, "g", {"t", 0}), Value(10));
  EXPECT_EQ(log->OpenProducers(), (std::vector<int64_t>{7}));
  EXPECT_EQ(log->GroupIds(), (std::vector<std::string>{"g"}));
  ASSERT_TRUE(MarkerDurable(*log, 7, 1, true).ok());
  ASSERT_NE(log->Find("g", {"t", 0}), nullptr);
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(10));
  EXPECT_FALSE(log->HasPendingOffset("g", {"t", 0}));
  EXPECT_EQ(log->pending_count(), 0u);
  const uint64_t live = log->live_bytes();
  ASSERT_TRUE(log->Close().ok());

  // On disk: a transactional batch of producer 7, then its control batch.
  auto batches = Batches(Options().dir);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].first.attributes, storage::kAttrTransactional);
  EXPECT_EQ(batches[0].second, 7);
  EXPECT_EQ(batches[1].first.attributes, storage::kAttrTransactional | storage::kAttrControl);
  EXPECT_EQ(batches[1].second, 7);

  auto reopened = Open();
  EXPECT_EQ(*reopened->Find("g", {"t", 0}), Value(10));
  EXPECT_EQ(reopened->pending_count(), 0u);
  EXPECT_EQ(reopened->live_bytes(), live);
  EXPECT_EQ(reopened->ProducerEpoch(7), std::optional<int16_t>(1));
}

TEST_F(OffsetLogTxnTest, ReplayFollowsKafkasOrderingRules) {
  {
    auto log = Open();
    OffsetWrite base;
    base.Commit("g", {"t", 0}, Value(1));
    base.Commit("g", {"t", 1}, Value(1));
    ASSERT_TRUE(WriteDurable(*log, base).ok());
    // Producer 1 commits t-0 and t-1; a plain commit of t-1 follows its records.
    OffsetWrite t1;
    t1.Commit("g", {"t", 0}, Value(10));
    t1.Commit("g", {"t", 1}, Value(11));
    t1.Commit("h", {"t", 0}, Value(12));
    ASSERT_TRUE(TxnDurable(*log, 1, 0, t1).ok());
    ASSERT_TRUE(WriteDurable(*log, One("g", {"t", 1}, Value(5))).ok());
    // Producer 2 aborts; producer 3 never finishes.
    ASSERT_TRUE(TxnDurable(*log, 2, 0, One("g", {"t", 2}, Value(20))).ok());
    ASSERT_TRUE(TxnDurable(*log, 3, 0, One("g", {"t", 3}, Value(30))).ok());
    ASSERT_TRUE(MarkerDurable(*log, 1, 0, true).ok());
    ASSERT_TRUE(MarkerDurable(*log, 2, 0, false).ok());
    EXPECT_EQ(*log->Find("g", {"t", 0}), Value(10));
    EXPECT_EQ(*log->Find("g", {"t", 1}), Value(5));
    EXPECT_EQ(*log->Find("h", {"t", 0}), Value(12));
    EXPECT_EQ(log->Find("g", {"t", 2}), nullptr);
    EXPECT_EQ(log->Find("g", {"t", 3}), nullptr);
  }
  auto log = Open();
  EXPECT_EQ(log->skipped_records(), 0);
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(10));
  EXPECT_EQ(*log->Find("g", {"t", 1}), Value(5));
  EXPECT_EQ(*log->Find("h", {"t", 0}), Value(12));
  EXPECT_EQ(log->Find("g", {"t", 2}), nullptr);
  EXPECT_EQ(log->Find("g", {"t", 3}), nullptr);
  EXPECT_TRUE(log->HasPendingOffset("g", {"t", 3}));
  EXPECT_EQ(log->OpenProducers(), (std::vector<int64_t>{3}));
  // Producer 3 still completes after the reopen.
  ASSERT_TRUE(MarkerDurable(*log, 3, 0, true).ok());
  EXPECT_EQ(*log->Find("g", {"t", 3}), Value(30));
}

TEST_F(OffsetLogTxnTest, StaleEpochsAreRefusedAndRemembered) {
  {
    auto log = Open();
    ASSERT_TRUE(TxnDurable(*log, 9, 4, One("g", {"t", 0}, Value(1))).ok());
    EXPECT_EQ(TxnDurable(*log, 9, 3, One("g", {"t", 0}, Value(2))).code(), StatusCode::kAborted);
    EXPECT_EQ(MarkerDurable(*log, 9, 3, true).code(), StatusCode::kAborted);
    EXPECT_EQ(*log->FindPending(9, "g", {"t", 0}), Value(1));
    // Not a Commit: refused.
    OffsetWrite bad;
    bad.DeleteGroup("g");
    EXPECT_EQ(log->WriteTxnOffsets(9, 4, bad, [](const Status&) {}).code(),
              StatusCode::kInvalidArgument);
    ASSERT_TRUE(MarkerDurable(*log, 9, 5, false).ok());  // a bumped epoch aborts
  }
  auto log = Open();
  EXPECT_EQ(log->ProducerEpoch(9), std::optional<int16_t>(5));
  EXPECT_EQ(TxnDurable(*log, 9, 4, One("g", {"t", 0}, Value(2))).code(), StatusCode::kAborted);
  EXPECT_EQ(log->pending_count(), 0u);
}

TEST_F(OffsetLogTxnTest, AMarkerWithNothingPendingIsStillWritten) {
  auto log = Open();
  ASSERT_TRUE(MarkerDurable(*log, 4, 0, true).ok());
  EXPECT_GT(log->log_bytes(), 0u);
  EXPECT_TRUE(log->GroupIds().empty());
  ASSERT_TRUE(log->Close().ok());
  auto batches = Batches(Options().dir);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].first.attributes, storage::kAttrTransactional | storage::kAttrControl);
  EXPECT_EQ(Open()->skipped_records(), 0);
}

TEST_F(OffsetLogTxnTest, TombstonesDropPendingOffsets) {
  {
    auto log = Open();
    ASSERT_TRUE(TxnDurable(*log, 1, 0, One("g", {"a", 0}, Value(1))).ok());
    ASSERT_TRUE(TxnDurable(*log, 1, 0, One("g", {"b", 0}, Value(2))).ok());
    ASSERT_TRUE(TxnDurable(*log, 2, 0, One("h", {"a", 0}, Value(3))).ok());
    OffsetWrite d;
    d.DeleteGroup("g");  // g's pending offsets (producer 1) go
    d.DeleteTopic("a");  // h's pending a-0 (producer 2) goes
    ASSERT_TRUE(WriteDurable(*log, d).ok());
    EXPECT_EQ(log->pending_count(), 0u);
    EXPECT_TRUE(log->GroupIds().empty());
    EXPECT_EQ(log->live_bytes(), 0u);
  }
  auto log = Open();
  EXPECT_EQ(log->pending_count(), 0u);
  EXPECT_TRUE(log->GroupIds().empty());
  ASSERT_TRUE(MarkerDurable(*log, 1, 0, true).ok());
  ASSERT_TRUE(MarkerDurable(*log, 2, 0, true).ok());
  EXPECT_EQ(log->Find("g", {"b", 0}), nullptr);
  EXPECT_EQ(log->Find("h", {"a", 0}), nullptr);
}

TEST_F(OffsetLogTxnTest, MalformedMarkersAndTransactionalBatchesAreSkipped) {
  OffsetLogOptions o = Options();
  {
    auto plog = OpenRaw(o.dir);
    ASSERT_TRUE(plog.ok()) << plog.status().ToString();
    auto append = [&](const std::vector<uint8_t>& batch) {
      ASSERT_TRUE((*plog)->Append(batch, storage::AppendOptions{}).ok());
    };
    auto key = offsets_format::EncodeOffsetKey("g", {"t", 0});
    auto key1 = offsets_format::EncodeOffsetKey("g", {"t", 1});
    auto value = offsets_format::EncodeOffsetValue(Value(100));
    auto txn_batch = [&](int64_t pid, const std::vector<uint8_t>& k) {
      kafka::RecordInput in;
      in.key = std::span<const uint8_t>(k);
      in.value = std::span<const uint8_t>(value);
      kafka::BatchBuilderOptions bo;
      bo.transactional = true;
      bo.producer_id = pid;
      bo.producer_epoch = pid < 0 ? -1 : 0;
      bo.base_sequence = 0;
      return kafka::BuildBatch(bo, std::span<const kafka::RecordInput>(&in, 1));
    };
    auto control = [&](int64_t pid, std::optional<std::vector<uint8_t>> k) {
      auto v = offsets_format::EncodeMarkerValue(0);
      kafka::RecordInput in;
      if (k) in.key = std::span<const uint8_t>(*k);
      in.value = std::span<const uint8_t>(v);
      kafka::BatchBuilderOptions bo;
      bo.transactional = true;
      bo.control = true;
      bo.producer_id = pid;
      bo.producer_epoch = 0;
      return kafka::BuildBatch(bo, std::span<const kafka::RecordInput>(&in, 1));
    };
    append(txn_batch(-1, key));                                  // no producer: skipped
    append(txn_batch(5, key));                                   // producer 5, t-0
    append(txn_batch(6, key1));                                  // producer 6, t-1
    append(control(6, std::vector<uint8_t>{0, 0, 0, 7}));        // unknown type
    append(control(6, std::vector<uint8_t>{0, 0}));              // truncated key
    append(control(6, std::nullopt));                            // null key
    append(control(-1, offsets_format::EncodeMarkerKey(true)));  // no producer
    append(control(5, offsets_format::EncodeMarkerKey(true)));   // good: commits t-0
    ASSERT_TRUE((*plog)->Close().ok());
  }
  auto log = Open(o);
  ASSERT_NE(log, nullptr);
  EXPECT_EQ(log->skipped_records(), 5);
  ASSERT_NE(log->Find("g", {"t", 0}), nullptr);
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(100));
  // Producer 6's markers were all bad: its offset stays pending, for the coordinator.
  EXPECT_EQ(log->Find("g", {"t", 1}), nullptr);
  EXPECT_TRUE(log->HasPendingOffset("g", {"t", 1}));
  ASSERT_TRUE(MarkerDurable(*log, 6, 0, true).ok());
  EXPECT_EQ(*log->Find("g", {"t", 1}), Value(100));
}

// A crash after the offsets and before the marker, and one after the marker: the
// offsets are pending, then visible (a power loss drops what was not synced).
TEST_F(OffsetLogTxnTest, CrashBetweenOffsetsAndMarker) {
  storage::testing::FaultEnv env(storage::Env::Posix());
  OffsetLogOptions o = Options();
  o.env = &env;
  auto crash = [&](std::unique_ptr<OffsetLog>& log, uint64_t seed) {
    env.SimulateCrash();
    (void)log->Close();
    log.reset();
    ASSERT_TRUE(env.DropUnsyncedData(seed, storage::testing::TearMode::kDropAll).ok());
    env.Reset();
    log = Open(o);
    ASSERT_NE(log, nullptr);
  };
  auto log = Open(o);
  ASSERT_TRUE(TxnDurable(*log, 3, 0, One("g", {"t", 0}, Value(50))).ok());
  crash(log, 1);
  EXPECT_EQ(log->Find("g", {"t", 0}), nullptr);
  EXPECT_TRUE(log->HasPendingOffset("g", {"t", 0}));
  ASSERT_TRUE(MarkerDurable(*log, 3, 0, true).ok());
  crash(log, 2);
  EXPECT_EQ(*log->Find("g", {"t", 0}), Value(50));
  EXPECT_FALSE(log->HasPendingOffset("g", {"t", 0}));
}

// -----------------------------------------------------------------------------------------
// Commits applied once acknowledged; markers fenced by the coordinator epoch (0018
// "coordfix").

TEST(OffsetsFormatTest, MarkerValueDecoding) {
  EXPECT_EQ(*offsets_format::DecodeMarkerValue(offsets_format::EncodeMarkerValue(7)), 7);
  EXPECT_EQ(*offsets_format::DecodeMarkerValue(std::vector<uint8_t>{0, 3, 0, 0, 1, 0}), 256);
  EXPECT_FALSE(offsets_format::DecodeMarkerValue(std::vector<uint8_t>{}).ok());
  EXPECT_FALSE(offsets_format::DecodeMarkerValue(std::vector<uint8_t>{0, 0, 0, 0, 7}).ok());
  EXPECT_FALSE(
      offsets_format::DecodeMarkerValue(std::vector<uint8_t>{0xff, 0xfe, 0, 0, 0, 1}).ok());
}

TEST_F(OffsetLogTxnTest, AppendedOffsetsAreVisibleOnlyOnceFinished) {
  auto log = Open();
  const TopicPartition tp{"t", 0};
  ASSERT_TRUE(WriteDurable(*log, One("g", tp, Value(5))).ok());
  AppendedOffsets failed;
  ASSERT_TRUE(WaitDurable([&](OffsetLog::Done cb) {
                return log->AppendOffsets(One("g", tp, Value(9)), std::move(cb), &failed);
              }).ok());
  EXPECT_EQ(log->Find("g", tp)->offset, 5);  // appended, not finished
  EXPECT_TRUE(log->HasPendingOffset("g", tp));
  log->FinishOffsets(failed, /*ok=*/false);
  EXPECT_EQ(log->Find("g", tp)->offset, 5);
  EXPECT_FALSE(log->HasPendingOffset("g", tp));

  // Two in flight, acknowledged out of order: the later record wins, as replay has it.
  AppendedOffsets first, second;
  ASSERT_TRUE(WaitDurable([&](OffsetLog::Done cb) {
                return log->AppendOffsets(One("g", tp, Value(11)), std::move(cb), &first);
              }).ok());
  ASSERT_TRUE(WaitDurable([&](OffsetLog::Done cb) {
                return log->AppendOffsets(One("g", tp, Value(12)), std::move(cb), &second);
              }).ok());
  log->FinishOffsets(second, true);
  log->FinishOffsets(first, true);
  EXPECT_EQ(log->Find("g", tp)->offset, 12);

  // A group deleted while a commit is in flight: the commit never reappears.
  AppendedOffsets late;
  ASSERT_TRUE(
      WaitDurable([&](OffsetLog::Done cb) {
        return log->AppendOffsets(One("g", TopicPartition{"u", 1}, Value(3)), std::move(cb), &late);
      }).ok());
  OffsetWrite del;
  del.DeleteGroup("g");
  ASSERT_TRUE(WriteDurable(*log, del).ok());
  log->FinishOffsets(late, true);
  EXPECT_EQ(log->Find("g", TopicPartition{"u", 1}), nullptr);
  EXPECT_EQ(log->Find("g", tp), nullptr);

  // Replay: the failed commit (9) was in the log too, but what follows it decides; the
  // deletion removed both keys.
  log.reset();
  log = Open();
  EXPECT_EQ(log->Find("g", tp), nullptr);
  EXPECT_EQ(log->Find("g", TopicPartition{"u", 1}), nullptr);
}

TEST_F(OffsetLogTxnTest, AFailedTransactionalWriteIsTakenBack) {
  auto log = Open();
  const TopicPartition tp{"t", 0};
  AppendedOffsets appended;
  ASSERT_TRUE(WaitDurable([&](OffsetLog::Done cb) {
                return log->WriteTxnOffsets(7, 0, One("g", tp, Value(4)), std::move(cb), &appended);
              }).ok());
  EXPECT_TRUE(log->HasPendingOffset("g", tp));
  log->FailTxnOffsets(appended);
  EXPECT_FALSE(log->HasPendingOffset("g", tp));
  EXPECT_EQ(log->FindPending(7, "g", tp), nullptr);
  // A later write of the producer's is not taken back by an earlier one's failure.
  AppendedOffsets older = appended;
  ASSERT_TRUE(TxnDurable(*log, 7, 0, One("g", tp, Value(6))).ok());
  log->FailTxnOffsets(older);
  ASSERT_NE(log->FindPending(7, "g", tp), nullptr);
  EXPECT_EQ(log->FindPending(7, "g", tp)->offset, 6);
}

TEST_F(OffsetLogTxnTest, AnOlderCoordinatorEpochIsFencedAlsoAfterReplay) {
  auto log = Open();
  const TopicPartition tp{"t", 0};
  auto marker = [&](OffsetLog& l, int32_t coordinator_epoch) {
    return WaitDurable([&](OffsetLog::Done cb) {
      return l.CompleteTxn(7, 0, true, coordinator_epoch, std::move(cb));
    });
  };
  ASSERT_TRUE(TxnDurable(*log, 7, 0, One("g", tp, Value(4))).ok());
  ASSERT_TRUE(marker(*log, 5).ok());
  EXPECT_EQ(log->CoordinatorEpoch(7), 5);
  Status fenced = marker(*log, 4);
  EXPECT_EQ(fenced.code(), StatusCode::kOutOfRange) << fenced.ToString();
  EXPECT_TRUE(marker(*log, 5).ok());  // the same coordinator again: harmless
  log.reset();
  log = Open();
  EXPECT_EQ(log->CoordinatorEpoch(7), 5);
  EXPECT_EQ(marker(*log, 4).code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(marker(*log, 6).ok());
  EXPECT_EQ(log->Find("g", tp)->offset, 4);
}

}  // namespace
}  // namespace offset_log_test
}  // namespace sluice::broker
