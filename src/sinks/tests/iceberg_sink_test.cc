// IcebergSink on its own: what staging costs in DuckDB's memory across many commits, and
// the commit that a full stage makes due (the pipeline tests cover the rest).
#include "sinks/iceberg_sink.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "duck/database.h"
#include "lake/table.h"

namespace sluice::sinks {
namespace {

namespace fs = std::filesystem;

class IcebergSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.memory_limit_bytes = int64_t{512} << 20, .threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(db).value();
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    conn_ = std::move(conn).value();
    std::string tmpl = (fs::temp_directory_path() / "sluice-iceberg-sink-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::unique_ptr<IcebergSink> MakeSink(int64_t staged_memory_limit) {
    IcebergSinkOptions o;
    o.warehouse = dir_;
    o.namespace_ = {"db"};
    o.table = "events";
    o.catalog_name = "test";
    o.commit_interval_seconds = 3600;
    o.group_id = "g";
    o.topics = {"t"};
    o.staged_memory_limit_bytes = staged_memory_limit;
    auto sink = IcebergSink::Create(o);
    EXPECT_TRUE(sink.ok()) << sink.status().ToString();
    return sink.ok() ? std::move(sink).value() : nullptr;
  }

  // A batch of `rows` rows with 40-byte strings, as the runner hands a sink its batch table.
  void Batch(int64_t first, int64_t rows) {
    ASSERT_TRUE(
        conn_
            ->Execute(fmt::format("CREATE OR REPLACE TEMP TABLE batch AS SELECT range AS id, "
                                  "repeat('x', 40) || range::VARCHAR AS payload FROM range({}, {})",
                                  first, first + rows))
            .ok());
  }

  int64_t InMemoryTableBytes() {
    auto r = conn_->Query(
        "SELECT coalesce(sum(memory_usage_bytes + temporary_storage_bytes), 0)::BIGINT FROM "
        "duckdb_memory() "
        "WHERE tag = 'IN_MEMORY_TABLE'");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->chunk(0).GetInt64(0, 0) : -1;
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
  std::string dir_;
};

TEST_F(IcebergSinkTest, CommittedRowsLeaveDuckDBsMemory) {
  auto sink = MakeSink(0);
  ASSERT_NE(sink, nullptr);
  int64_t after_first = 0;
  for (int round = 0; round < 12; ++round) {
    Batch(round * 100'000, 100'000);
    ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, (round + 1) * 100'000}}, nullptr).ok());
    auto committed = sink->Commit(true);
    ASSERT_TRUE(committed.ok()) << committed.status().ToString();
    EXPECT_EQ(committed->at({"t", 0}), (round + 1) * 100'000);
    if (round == 0) after_first = InMemoryTableBytes();
  }
  // Twelve commits of 100,000 rows each hold no more than the first did (a stage emptied
  // with DELETE would hold all 1.2M rows: about 12 times as much).
  EXPECT_LE(InMemoryTableBytes(), after_first + (int64_t{1} << 20));
  auto table = lake::Table::Load(dir_ + "/db/events");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_EQ(table->metadata().snapshots.size(), 12u);
}

TEST_F(IcebergSinkTest, AFullStageMakesACommitDue) {
  auto sink = MakeSink(int64_t{4} << 20);
  ASSERT_NE(sink, nullptr);
  // Other in-memory tables (window state, say) far above the bound do not count.
  ASSERT_TRUE(
      conn_->Execute("CREATE TABLE unrelated AS SELECT range AS v FROM range(3000000)").ok());
  Batch(0, 1000);
  ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, 1000}}, nullptr).ok());
  // The first commit creates nothing new: an hour's interval, far below the target size.
  auto early = sink->Commit(false);
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_TRUE(early->empty());
  // Rows enough to take more than 4 MiB of DuckDB's memory.
  int64_t next = 1000;
  bool committed = false;
  for (int i = 0; i < 40 && !committed; ++i) {
    Batch(next, 20'000);
    next += 20'000;
    ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, next}}, nullptr).ok());
    auto c = sink->Commit(false);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    committed = !c->empty();
    if (committed) {
      EXPECT_EQ(c->at({"t", 0}), next);
    }
  }
  EXPECT_TRUE(committed) << "no commit after " << next << " staged rows";
  EXPECT_LT(next, 800'000) << "the memory bound should trip long before the row target";
}

}  // namespace
}  // namespace sluice::sinks
