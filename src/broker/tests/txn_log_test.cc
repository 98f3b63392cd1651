// TxnLog: the __transaction_state record formats (Kafka's bytes), malformed records,
// replay after reopen and tombstones. Cleaning of the log: internal_log_test.cc.
#include "broker/txn_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "storage/io_executor.h"
#include "storage/testing/files.h"

namespace sluice::broker {
namespace txn_log_test {
namespace {

using storage::testing::TempDir;

TxnRecord Ongoing(int64_t pid, int16_t epoch) {
  TxnRecord r;
  r.producer_id = pid;
  r.producer_epoch = epoch;
  r.timeout_ms = 60000;
  r.state = TxnState::kOngoing;
  r.partitions = {{"a", 1}, {"a", 0}, {"b", 2}};
  r.last_update_ms = 1000;
  r.start_ms = 900;
  return r;
}

TEST(TxnFormatTest, KeyIsKafkasBytes) {
  EXPECT_EQ(txn_format::EncodeKey("tx"), (std::vector<uint8_t>{0, 0, 0, 2, 't', 'x'}));
}

TEST(TxnFormatTest, EmptyValueIsVersion0WithNullPartitions) {
  TxnRecord r;
  r.producer_id = 258;
  r.producer_epoch = 3;
  r.timeout_ms = 60000;
  r.state = TxnState::kEmpty;
  r.last_update_ms = 1;
  r.start_ms = -1;
  auto v = txn_format::EncodeValue(r);
  EXPECT_EQ(v, (std::vector<uint8_t>{0,    0,                                      // version 0
                                     0,    0,    0,    0,    0,    0,    1,    2,  // producer id
                                     0,    3,                                      // epoch
                                     0,    0,    0xea, 0x60,                       // timeout 60000
                                     0,                                            // Empty
                                     0xff, 0xff, 0xff, 0xff,  // null partitions
                                     0,    0,    0,    0,    0,    0,    0,    1,  // last update
                                     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));  // start
  auto back = txn_format::DecodeValue(v);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

TEST(TxnFormatTest, PartitionsAreGroupedByTopic) {
  auto v = txn_format::EncodeValue(Ongoing(1, 0));
  // version, pid, epoch, timeout, status: 2+8+2+4+1 = 17 bytes, then 2 topics.
  ASSERT_GT(v.size(), 21u);
  EXPECT_EQ(v[16], 1);  // Ongoing
  EXPECT_EQ((std::vector<uint8_t>(v.begin() + 17, v.begin() + 21)),
            (std::vector<uint8_t>{0, 0, 0, 2}));
  auto back = txn_format::DecodeValue(v);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, Ongoing(1, 0));
}

TEST(TxnFormatTest, GroupsAndPreviousIdUseVersion1TaggedFields) {
  TxnRecord r = Ongoing(7, 2);
  r.state = TxnState::kPrepareCommit;
  r.partitions.insert(kOffsetsPartition);
  r.groups = {"g1", "g2"};
  r.previous_producer_id = 5;
  auto v = txn_format::EncodeValue(r);
  EXPECT_EQ(v[1], 1);
  auto back = txn_format::DecodeValue(v);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
}

TEST(TxnFormatTest, MalformedValuesAreRefused) {
  auto good = txn_format::EncodeValue(Ongoing(1, 0));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(txn_format::DecodeValue(std::span(good).first(n)).ok()) << "truncated at " << n;
  }
  auto wrong_version = good;
  wrong_version[1] = 2;
  EXPECT_FALSE(txn_format::DecodeValue(wrong_version).ok());
  auto bad_state = good;
  bad_state[16] = 9;
  EXPECT_FALSE(txn_format::DecodeValue(bad_state).ok());
  auto fence_state = good;
  fence_state[16] = 7;  // PrepareEpochFence is never written
  EXPECT_FALSE(txn_format::DecodeValue(fence_state).ok());
  auto huge_array = good;
  huge_array[17] = 0x7f;  // more topics than bytes left
  EXPECT_FALSE(txn_format::DecodeValue(huge_array).ok());
  auto negative_partitions = good;
  // first topic "a": int16 length at 21, name at 23, partition count at 24
  negative_partitions[24] = 0x80;
  EXPECT_FALSE(txn_format::DecodeValue(negative_partitions).ok());
  EXPECT_FALSE(txn_format::DecodeKey(std::vector<uint8_t>{0, 1, 0, 1, 'x'}).ok());
  EXPECT_FALSE(txn_format::DecodeKey(std::vector<uint8_t>{0, 0, 0, 5, 'x'}).ok());
  EXPECT_FALSE(txn_format::DecodeKey(std::vector<uint8_t>{0}).ok());
}

class TxnLogTest : public ::testing::Test {
 protected:
  TxnLogOptions Options() {
    TxnLogOptions o;
    o.dir = dir_.path() + "/__transaction_state-0";
    o.executor = &executor_;
    return o;
  }
  std::unique_ptr<TxnLog> Open(TxnLogOptions o) {
    auto log = TxnLog::Open(std::move(o));
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(log).value() : nullptr;
  }
  static Status WriteDurable(TxnLog& log, const std::string& id, std::optional<TxnRecord> rec) {
    auto p = std::make_shared<std::promise<Status>>();
    auto f = p->get_future();
    Status st = log.Write(id, rec, [p](const Status& s) { p->set_value(s); });
    if (!st.ok()) return st;
    if (f.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      return InternalError("no durable callback");
    }
    return f.get();
  }
  TempDir dir_{"txn-log-test"};
  storage::IoExecutor executor_{2};
};

TEST_F(TxnLogTest, ReplaysLastRecordPerIdAndTombstones) {
  {
    auto log = Open(Options());
    ASSERT_TRUE(WriteDurable(*log, "a", Ongoing(1, 0)).ok());
    TxnRecord commit = Ongoing(1, 0);
    commit.state = TxnState::kPrepareCommit;
    ASSERT_TRUE(WriteDurable(*log, "a", commit).ok());
    ASSERT_TRUE(WriteDurable(*log, "b", Ongoing(2, 0)).ok());
    ASSERT_TRUE(WriteDurable(*log, "b", std::nullopt).ok());
    ASSERT_TRUE(log->Close().ok());
  }
  auto log = Open(Options());
  ASSERT_EQ(log->records().size(), 1u);
  EXPECT_EQ(log->records().at("a").state, TxnState::kPrepareCommit);
  EXPECT_EQ(log->skipped_records(), 0);
}

}  // namespace
}  // namespace txn_log_test
}  // namespace sluice::broker
