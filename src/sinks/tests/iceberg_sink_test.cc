// IcebergSink on its own: the rows of an unpartitioned table streamed into the data file
// being written (every row, a file per schema, nothing left by a discard), what staging
// costs in DuckDB's memory across many commits, and the commit that a full stage makes due
// (the pipeline tests cover the rest).
#include "sinks/iceberg_sink.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

  std::unique_ptr<IcebergSink> MakeSink(int64_t staged_memory_limit,
                                        std::vector<std::string> partition_by = {},
                                        bool schema_evolution = false) {
    IcebergSinkOptions o;
    o.partition_by = std::move(partition_by);
    o.schema_evolution = schema_evolution;
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

  // The data files under the table's directory.
  std::vector<std::string> DataFiles() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::recursive_directory_iterator(dir_ + "/db/events/data", ec)) {
      if (e.is_regular_file()) out.push_back(e.path().string());
    }
    return out;
  }

  // The data files the table's current snapshot lists.
  std::vector<lake::DataFile> TableFiles() {
    std::vector<lake::DataFile> out;
    auto table = lake::Table::Load(dir_ + "/db/events");
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    if (!table.ok()) return out;
    auto manifests = table->CurrentManifests();
    EXPECT_TRUE(manifests.ok()) << manifests.status().ToString();
    if (!manifests.ok()) return out;
    for (const auto& [manifest, entries] : *manifests) {
      for (const lake::ManifestEntry& e : entries) {
        if (e.status != lake::EntryStatus::kDeleted) out.push_back(e.file);
      }
    }
    return out;
  }

  // count(*), sum(id) and count(extra) over the files the table's current snapshot lists.
  std::vector<std::optional<std::string>> ReadBack(bool with_extra = false) {
    std::vector<std::string> paths;
    for (const lake::DataFile& f : TableFiles()) {
      paths.push_back(duck::QuoteLiteral(f.file_path.substr(std::string("file://").size())));
    }
    auto r = conn_->QueryText(
        fmt::format("SELECT count(*), sum(id), {} FROM read_parquet([{}], union_by_name = true)",
                    with_extra ? "count(extra)" : "0", fmt::join(paths, ", ")));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? (*r)[0] : std::vector<std::optional<std::string>>{};
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

TEST_F(IcebergSinkTest, StreamedRowsAreAllInTheCommittedFile) {
  auto sink = MakeSink(0);
  ASSERT_NE(sink, nullptr);
  int64_t next = 0;
  for (int64_t rows : {1, 2048, 0, 70'000, 5000}) {
    Batch(next, rows);
    next += rows;
    ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, next}}, nullptr).ok());
  }
  EXPECT_TRUE(sink->streams());
  auto committed = sink->Commit(true);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->at({"t", 0}), next);
  EXPECT_EQ(DataFiles().size(), 1u);
  auto back = ReadBack();
  EXPECT_EQ(back[0], std::to_string(next));
  EXPECT_EQ(back[1], std::to_string(next * (next - 1) / 2));
  std::vector<lake::DataFile> files = TableFiles();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.front().record_count, next);
  EXPECT_FALSE(files.front().lower_bounds.empty()) << "the writer's statistics";
}

// A table another engine made with write.data.path: the sink's data files go there.
TEST_F(IcebergSinkTest, DataFilesGoToTheTablesWriteDataPath) {
  lake::Schema schema;
  schema.fields.push_back(
      lake::NestedField{1, "id", false, lake::Type::Primitive(lake::TypeId::kLong), std::nullopt});
  schema.fields.push_back(lake::NestedField{
      2, "payload", false, lake::Type::Primitive(lake::TypeId::kString), std::nullopt});
  const std::string elsewhere = dir_ + "/elsewhere";
  auto made = lake::Table::Create(dir_ + "/db/events", schema, lake::PartitionSpec{},
                                  {{"write.data.path", "file://" + elsewhere}});
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto sink = MakeSink(0);
  ASSERT_NE(sink, nullptr);
  Batch(0, 1000);
  ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, 1000}}, nullptr).ok());
  ASSERT_TRUE(sink->Commit(true).ok());
  std::vector<lake::DataFile> files = TableFiles();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(files[0].file_path.starts_with("file://" + elsewhere + "/")) << files[0].file_path;
  EXPECT_TRUE(DataFiles().empty());  // nothing under <location>/data
  EXPECT_EQ(ReadBack()[0], "1000");
}

TEST_F(IcebergSinkTest, ANewColumnFinishesTheFileOfTheOldSchema) {
  auto sink = MakeSink(0, {}, /*schema_evolution=*/true);
  ASSERT_NE(sink, nullptr);
  Batch(0, 100);
  ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, 100}}, nullptr).ok());
  ASSERT_TRUE(conn_
                  ->Execute("CREATE OR REPLACE TEMP TABLE batch AS SELECT range AS id, 'p' AS "
                            "payload, range * 2 AS extra FROM range(100, 150)")
                  .ok());
  Status wrote = sink->Write(*conn_, "batch", {{{"t", 0}, 150}}, nullptr);
  ASSERT_TRUE(wrote.ok()) << wrote.ToString();
  // A batch without the new column: NULL in it.
  Batch(150, 10);
  ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, 160}}, nullptr).ok());
  auto committed = sink->Commit(true);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(DataFiles().size(), 2u);
  auto back = ReadBack(/*with_extra=*/true);
  EXPECT_EQ(back[0], "160");
  EXPECT_EQ(back[2], "50");
}

TEST_F(IcebergSinkTest, ADiscardLeavesNoFileAndNoSnapshot) {
  auto sink = MakeSink(0);
  ASSERT_NE(sink, nullptr);
  Batch(0, 10'000);
  ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, 10'000}}, nullptr).ok());
  ASSERT_TRUE(sink->Discard().ok());
  EXPECT_TRUE(DataFiles().empty());
  auto committed = sink->Commit(true);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_TRUE(committed->empty());
  // Writing goes on in a new file after the discard.
  Batch(10'000, 5);
  ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, 10'005}}, nullptr).ok());
  committed = sink->Commit(true);
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_EQ(committed->at({"t", 0}), 10'005);
  EXPECT_EQ(ReadBack()[0], "5");
  // A sink destroyed with a file half written leaves no file behind.
  Batch(10'005, 5);
  ASSERT_TRUE(sink->Write(*conn_, "batch", {{{"t", 0}, 10'010}}, nullptr).ok());
  sink.reset();
  EXPECT_EQ(DataFiles().size(), 1u);
}

TEST_F(IcebergSinkTest, CommittedRowsLeaveDuckDBsMemory) {
  // A partitioned table: its rows are staged in DuckDB.
  auto sink = MakeSink(0, {"truncate(100000000, id)"});
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
  auto sink = MakeSink(int64_t{4} << 20, {"truncate(100000000, id)"});
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
