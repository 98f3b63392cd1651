// Compaction and expiry over real tables: Parquet written by DuckDB, manifests and metadata
// by sluice, rows read back with DuckDB over exactly the files the table lists.
#include "lake/maintenance.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "duck/database.h"
#include "lake/data_files.h"
#include "lake/table.h"
#include "lake/table_files.h"
#include "lake/tests/scratch_dirs.h"

namespace sluice::lake {
namespace maintenance_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr int64_t kHourMs = 3'600'000;
constexpr std::string_view kOffsets = "sluice.offsets.g.t";

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

constexpr std::string_view kScratch = "sluice_maintenance";
[[maybe_unused]] ::testing::Environment* const kScratchDirs =
    ::testing::AddGlobalTestEnvironment(new ScratchDirs(std::string(kScratch)));

std::string FreshDir(std::string_view name) { return ScratchDirs::Fresh(kScratch, name); }

void SetMtime(const std::string& path, int64_t ms) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = ms / 1000;
  times[0].tv_nsec = times[1].tv_nsec = (ms % 1000) * 1'000'000;
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

void WriteText(const std::string& path, std::string_view text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// Every regular file under `dir` with its size.
std::map<std::string, uintmax_t> Listing(const std::string& dir) {
  std::map<std::string, uintmax_t> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().string()] = e.file_size();
  }
  return out;
}

class MaintenanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = duck::Database::Open({.threads = 1});
    ASSERT_TRUE(db.ok()) << db.status().message();
    db_ = std::move(*db);
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok()) << conn.status().message();
    conn_ = std::move(*conn);
  }

  // A table (id long, city string, amount double) partitioned by city.
  Table MakeTable(const std::string& root, std::map<std::string, std::string> properties = {}) {
    auto schema = SchemaFromJson(Json::parse(R"({"type":"struct","schema-id":0,"fields":[
        {"id":1,"name":"id","required":false,"type":"long"},
        {"id":2,"name":"city","required":false,"type":"string"},
        {"id":3,"name":"amount","required":false,"type":"double"}]})"),
                                 "$", true);
    EXPECT_TRUE(schema.ok()) << schema.status().message();
    PartitionSpec spec;
    spec.fields.push_back(PartitionField{2, 1000, "city", Transform::Identity()});
    fs::create_directories(root + "/data");
    auto t = Table::Create(root, *schema, spec, properties);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return std::move(*t);
  }

  // Appends ids [from, from + n), one file per city, with the offsets entry {"0": from + n}.
  static void AppendRows(Table& table, duck::Connection& conn, int64_t from, int64_t n) {
    const Schema* schema = table.metadata().CurrentSchema();
    std::vector<DataFile> files;
    for (const char* city : {"oslo", "rome"}) {
      std::string dir = fmt::format("{}/data/city={}", table.files().root(), city);
      fs::create_directories(dir);
      std::string path = fmt::format("{}/{}.parquet", dir, NewUuid());
      std::string select = fmt::format(
          "SELECT range AS id, '{0}' AS city, range * 1.5 AS amount FROM range({1}, {2}) "
          "WHERE (range % 2 = 0) = ('{0}' = 'oslo')",
          city, from, from + n);
      auto f = WriteDataFile(conn, select, *schema, path, FileUri(path));
      ASSERT_TRUE(f.ok()) << f.status().message();
      f->partition = avro::Datum::Record({{"city", avro::Datum::String(city)}});
      files.push_back(std::move(*f));
    }
    const int64_t next = from + n;
    auto id = table.Append(
        files, [next](const TableMetadata&) -> Result<std::map<std::string, std::string>> {
          return std::map<std::string, std::string>{
              {std::string(kOffsets), fmt::format(R"({{"0":{}}})", next)}};
        });
    ASSERT_TRUE(id.ok()) << id.status().message();
  }

  // The live data files of the current snapshot.
  static std::vector<ManifestEntry> LiveFiles(const std::string& root) {
    auto t = Table::Load(root);
    EXPECT_TRUE(t.ok()) << t.status().message();
    std::vector<ManifestEntry> out;
    auto manifests = t->CurrentManifests();
    EXPECT_TRUE(manifests.ok()) << manifests.status().message();
    for (auto& [m, entries] : *manifests) {
      for (auto& e : entries) {
        if (e.status != EntryStatus::kDeleted) out.push_back(std::move(e));
      }
    }
    return out;
  }

  // Rows of `select` over the table's listed files ({} is the reader), one string per row.
  std::vector<std::string> Rows(const std::string& root, std::string_view select) {
    std::vector<std::string> paths;
    for (const ManifestEntry& e : LiveFiles(root)) {
      if (e.file.content == 0) paths.push_back(duck::QuoteLiteral(*LocalPath(e.file.file_path)));
    }
    std::string reader = fmt::format("read_parquet([{}])", fmt::join(paths, ", "));
    auto rows = conn_->QueryText(fmt::format(fmt::runtime(select), reader));
    EXPECT_TRUE(rows.ok()) << rows.status().message();
    std::vector<std::string> out;
    for (const auto& r : *rows) {
      std::string line;
      for (const auto& v : r) line += (line.empty() ? "" : "|") + v.value_or("NULL");
      out.push_back(line);
    }
    return out;
  }

  std::vector<std::string> AllRows(const std::string& root) {
    return Rows(root, "SELECT id, city, amount FROM {} ORDER BY id");
  }

  std::unique_ptr<duck::Database> db_;
  std::unique_ptr<duck::Connection> conn_;
};

TEST_F(MaintenanceTest, CompactRewritesSmallFilesIntoFewerWithTheSameRows) {
  const std::string root = FreshDir("compact") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 20; ++i)
    AppendRows(table, *conn_, i * 50, 50);  // 40 files, manifests merged once
  const std::vector<std::string> before = AllRows(root);
  ASSERT_EQ(before.size(), 1000u);
  ASSERT_EQ(LiveFiles(root).size(), 40u);

  // A dry run says what the compaction will do, and does nothing.
  auto plan = Compact(root, {.target_file_size_bytes = 1 << 20, .dry_run = true}, *conn_);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan->snapshot_id.has_value());
  EXPECT_EQ(LiveFiles(root).size(), 40u);

  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->snapshot_id.has_value());
  EXPECT_EQ(plan->files_rewritten, c->files_rewritten);
  EXPECT_EQ(plan->files_written, c->files_written);
  EXPECT_EQ(plan->partitions, c->partitions);
  EXPECT_EQ(plan->bytes_rewritten, c->bytes_rewritten);
  EXPECT_EQ(plan->records, c->records);
  EXPECT_EQ(c->files_rewritten, 40);
  EXPECT_EQ(c->files_written, 2);
  EXPECT_EQ(c->partitions, 2);
  EXPECT_EQ(c->records, 1000);

  EXPECT_EQ(AllRows(root), before);
  std::vector<ManifestEntry> live = LiveFiles(root);
  ASSERT_EQ(live.size(), 2u);
  std::set<std::string> cities;
  for (const ManifestEntry& e : live) {
    cities.insert(e.file.partition.ToString());
    EXPECT_EQ(e.file.record_count, 500);
    EXPECT_TRUE(e.file.lower_bounds.contains(1)) << "column statistics";
    // Field ids kept: id is field 1.
    auto ids =
        conn_->QueryText(fmt::format("SELECT field_id FROM parquet_schema({}) WHERE name = 'id'",
                                     duck::QuoteLiteral(*LocalPath(e.file.file_path))));
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(ids->at(0).at(0).value_or(""), "1");
  }
  EXPECT_EQ(cities.size(), 2u);

  auto t = Table::Load(root);
  ASSERT_TRUE(t.ok());
  const Snapshot* s = t->metadata().CurrentSnapshot();
  EXPECT_EQ(s->operation, "replace");
  EXPECT_EQ(s->summary.at("total-records"), "1000");
  EXPECT_EQ(s->summary.at("total-data-files"), "2");
  EXPECT_EQ(s->summary.at("deleted-data-files"), "40");
  // The offsets entry is in the compaction snapshot itself.
  EXPECT_EQ(s->summary.at(std::string(kOffsets)), R"({"0":1000})");
  EXPECT_EQ(t->NewestSummary(std::string(kOffsets)), R"({"0":1000})");

  // Nothing small left: nothing to do, nothing committed.
  const int64_t version = t->version();
  auto again = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(again->snapshot_id.has_value());
  ASSERT_TRUE(t->Refresh().ok());
  EXPECT_EQ(t->version(), version);

  // Appends after a compaction keep going on top of it.
  AppendRows(table, *conn_, 1000, 50);
  EXPECT_EQ(Rows(root, "SELECT count(*), count(DISTINCT id) FROM {}"),
            std::vector<std::string>{"1050|1050"});
}

// Delete files (Iceberg v2, as Spark writes them) are applied to the rows compaction
// rewrites, and a delete file goes once no live data file it applies to remains.
TEST_F(MaintenanceTest, CompactionAppliesDeleteFilesAndDropsThoseNothingNeeds) {
  const std::string root = FreshDir("compact-deletes") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 3; ++i) AppendRows(table, *conn_, i * 50, 50);
  std::string first_oslo;
  for (const ManifestEntry& e : LiveFiles(root)) {
    if (e.file.partition.ToString().find("oslo") != std::string::npos &&
        e.sequence_number == std::optional<int64_t>(1)) {
      first_oslo = e.file.file_path;
    }
  }
  ASSERT_FALSE(first_oslo.empty());
  // Sequence 4: row 0 of the first oslo file (id 0) by position, id 3 in rome by equality.
  auto write = [&](const std::string& name, const std::string& select, const std::string& ids,
                   int32_t content, const char* city) {
    std::string path = root + "/data/" + name + ".parquet";
    EXPECT_TRUE(conn_
                    ->Execute(fmt::format("COPY ({}) TO '{}' (FORMAT parquet, FIELD_IDS {{{}}})",
                                          select, path, ids))
                    .ok());
    DataFile f;
    f.content = content;
    f.file_path = FileUri(path);
    f.file_size_in_bytes = static_cast<int64_t>(fs::file_size(path));
    f.record_count = 1;
    f.partition = avro::Datum::Record({{"city", avro::Datum::String(city)}});
    if (content == 2) f.equality_ids = {1};
    return f;
  };
  std::vector<DataFile> deletes = {
      write("pos",
            fmt::format("SELECT {} AS file_path, 0::BIGINT AS pos", duck::QuoteLiteral(first_oslo)),
            "file_path: 2147483546, pos: 2147483545", 1, "oslo"),
      write("eq", "SELECT 3::BIGINT AS id", "id: 1", 2, "rome")};
  auto committed = table.Commit("delete", [&](const CommitAttempt& a) -> Result<SnapshotPlan> {
    SnapshotPlan plan;
    ASSIGN_OR_RETURN(plan.manifests, ReadManifestsOf(*a.base.CurrentSnapshot()));
    ASSIGN_OR_RETURN(ManifestContext ctx, ContextOf(a.base));
    std::vector<ManifestEntry> entries;
    for (const DataFile& d : deletes) entries.push_back(ManifestEntry{.file = d});
    ASSIGN_OR_RETURN(std::string bytes, WriteManifest(ctx, entries));
    std::string path = root + "/metadata/deletes-" + std::to_string(a.attempt) + ".avro";
    RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
    ManifestFile m;
    m.manifest_path = FileUri(path);
    m.manifest_length = static_cast<int64_t>(bytes.size());
    m.content = 1;
    m.partition_spec_id = ctx.spec_id;
    m.sequence_number = a.sequence_number;
    m.min_sequence_number = a.sequence_number;
    m.added_snapshot_id = a.snapshot_id;
    m.added_files_count = 2;
    m.added_rows_count = 2;
    plan.manifests.push_back(m);
    return plan;
  });
  ASSERT_TRUE(committed.ok()) << committed.status().message();
  std::vector<std::string> expected;
  for (const std::string& row : AllRows(root)) {  // the data files' rows, deletes unapplied
    if (row.rfind("0|", 0) != 0 && row.rfind("3|", 0) != 0) expected.push_back(row);
  }
  ASSERT_EQ(expected.size(), 148u);

  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->snapshot_id.has_value());
  EXPECT_EQ(c->files_rewritten, 6);
  EXPECT_EQ(c->records, 148);
  EXPECT_EQ(c->delete_files_removed, 2);
  {
    auto t = Table::Load(root);
    ASSERT_TRUE(t.ok());
    const Snapshot* s = t->metadata().CurrentSnapshot();
    EXPECT_EQ(s->summary.at("removed-delete-files"), "2");
    EXPECT_EQ(s->summary.at("removed-position-deletes"), "1");
    EXPECT_EQ(s->summary.at("removed-equality-deletes"), "1");
    EXPECT_EQ(s->summary.at("total-records"), "148");
  }
  std::vector<ManifestEntry> live = LiveFiles(root);
  for (const ManifestEntry& e : live) EXPECT_EQ(e.file.content, 0) << e.file.file_path;
  EXPECT_EQ(live.size(), 2u);
  EXPECT_EQ(AllRows(root), expected);
}

TEST_F(MaintenanceTest, ExpireRemovesOldSnapshotsAndOnlyFilesNothingLiveUses) {
  const std::string root = FreshDir("expire") + "/db/events";
  Table table = MakeTable(root, {{"write.metadata.previous-versions-max", "3"}});
  for (int i = 0; i < 6; ++i) AppendRows(table, *conn_, i * 10, 10);
  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_TRUE(c.ok() && c->snapshot_id) << c.status().message();
  AppendRows(table, *conn_, 60, 10);  // two files live beside the compacted ones
  const std::vector<std::string> before = AllRows(root);
  ASSERT_EQ(before.size(), 70u);

  // Nothing is old yet: nothing happens.
  const auto listing = Listing(root);
  auto young = Expire(root, kHourMs, NowMs());
  ASSERT_TRUE(young.ok()) << young.status().message();
  EXPECT_EQ(young->snapshots_removed, 0);
  EXPECT_EQ(young->orphans_deleted + young->data_files_deleted + young->manifests_deleted, 0);
  EXPECT_EQ(Listing(root), listing);

  // Orphans: old ones (a failed commit's data file and manifest, a temporary file) and
  // young ones (a writer about to commit them).
  const int64_t now = NowMs() + 2 * kHourMs;  // everything written so far is 2 hours old
  const std::string old_data = root + "/data/city=oslo/failed.parquet";
  const std::string old_manifest = root + "/metadata/failed-m0.avro";
  const std::string old_tmp = root + "/metadata/abc.metadata.json.tmp";
  const std::string young_data = root + "/data/city=rome/pending.parquet";
  const std::string young_manifest = root + "/metadata/pending-m0.avro";
  const std::string other = root + "/metadata/notes.txt";
  for (const auto& p : {old_data, old_manifest, old_tmp, young_data, young_manifest, other})
    WriteText(p, "x");
  for (const auto& p : {old_data, old_manifest, old_tmp, other}) SetMtime(p, now - 3 * kHourMs);
  for (const auto& p : {young_data, young_manifest}) SetMtime(p, now - 60'000);
  std::set<std::string> old_small;
  for (const auto& [path, size] : Listing(root + "/data")) old_small.insert(path);
  for (const ManifestEntry& e : LiveFiles(root)) old_small.erase(*LocalPath(e.file.file_path));
  old_small.erase(old_data);
  old_small.erase(young_data);
  ASSERT_EQ(old_small.size(), 12u);

  // The plan first: what Expire then removes, nothing removed by it.
  Result<Table> loaded = Table::Load(root);
  ASSERT_TRUE(loaded.ok());
  auto plan = PlanExpire(*loaded, kHourMs, now);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->snapshot_ids.size(), 7u);
  EXPECT_FALSE(plan->carries_offsets);
  EXPECT_EQ(Table::Load(root)->metadata().snapshots.size(), 8u);

  auto e = Expire(root, kHourMs, now);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(plan->files, e->data_files_deleted + e->manifests_deleted + e->manifest_lists_deleted);
  EXPECT_EQ(e->snapshots_removed, 7);  // 6 appends and the compaction; the last append stays
  EXPECT_EQ(e->snapshots_kept, 1);
  EXPECT_FALSE(e->carry_snapshot_id.has_value());
  EXPECT_EQ(e->data_files_deleted, 12);
  EXPECT_EQ(e->manifest_lists_deleted, 7);
  EXPECT_GT(e->manifests_deleted, 0);
  // The three, and the manifest list of the last append's first attempt: `table` had not
  // seen the compaction, so that attempt lost the race to it and was rebuilt.
  EXPECT_EQ(e->orphans_deleted, 4);
  EXPECT_GT(e->metadata_files_deleted, 0);
  EXPECT_GT(e->bytes_deleted, 0);

  auto t = Table::Load(root);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->metadata().snapshots.size(), 1u);
  EXPECT_EQ(t->NewestSummary(std::string(kOffsets)), R"({"0":70})");
  EXPECT_EQ(AllRows(root), before);
  for (const ManifestEntry& f : LiveFiles(root))
    EXPECT_TRUE(fs::exists(*LocalPath(f.file.file_path)));
  for (const std::string& p : old_small) EXPECT_FALSE(fs::exists(p)) << p;
  for (const auto& p : {old_data, old_manifest, old_tmp}) EXPECT_FALSE(fs::exists(p)) << p;
  for (const auto& p : {young_data, young_manifest, other}) EXPECT_TRUE(fs::exists(p)) << p;
  // The current manifests and list are there; metadata versions: the current one and the
  // log's (previous-versions-max 3).
  for (const Snapshot& s : t->metadata().snapshots)
    EXPECT_TRUE(fs::exists(*LocalPath(s.manifest_list)));
  int versions = 0;
  for (const auto& entry : fs::directory_iterator(root + "/metadata")) {
    versions += entry.path().filename().string().ends_with(".metadata.json") ? 1 : 0;
  }
  EXPECT_EQ(versions, 4);
  EXPECT_EQ(t->metadata().metadata_log.size(), 3u);

  // Again: nothing left to do.
  auto twice = Expire(root, kHourMs, now);
  ASSERT_TRUE(twice.ok()) << twice.status().message();
  EXPECT_EQ(twice->snapshots_removed + twice->data_files_deleted + twice->orphans_deleted, 0);
  // And the table takes appends as before.
  AppendRows(table, *conn_, 70, 10);
  EXPECT_EQ(Rows(root, "SELECT count(*), count(DISTINCT id) FROM {}"),
            std::vector<std::string>{"80|80"});
}

TEST_F(MaintenanceTest, ExpireCarriesOffsetsOnlyOldSnapshotsHeldIntoANewSnapshot) {
  const std::string root = FreshDir("carry") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 3; ++i) AppendRows(table, *conn_, i * 10, 10);
  // A table written before offsets were carried forward: group g's entry only in the
  // first snapshot, another group's in the later ones.
  TableMetadata m = table.metadata();
  for (size_t i = 0; i < m.snapshots.size(); ++i) {
    Snapshot& s = m.snapshots[i];
    if (s.snapshot_id == m.snapshots.front().snapshot_id) continue;
    s.summary.erase(std::string(kOffsets));
    s.summary["sluice.offsets.other.t"] = R"({"0":7})";
  }
  ASSERT_TRUE(table.files().CommitVersion(table.version() + 1, TableMetadataToString(m)).ok());
  auto loaded = Table::Load(root);
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->NewestSummary(std::string(kOffsets)), R"({"0":10})");

  auto e = Expire(root, kHourMs, NowMs() + 2 * kHourMs);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_TRUE(e->carry_snapshot_id.has_value());
  EXPECT_EQ(e->snapshots_removed, 3);
  auto t = Table::Load(root);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->metadata().snapshots.size(), 1u);
  EXPECT_EQ(t->metadata().CurrentSnapshot()->snapshot_id, *e->carry_snapshot_id);
  EXPECT_EQ(t->NewestSummary(std::string(kOffsets)), R"({"0":10})");
  EXPECT_EQ(t->NewestSummary("sluice.offsets.other.t"), R"({"0":7})");
  EXPECT_EQ(Rows(root, "SELECT count(*) FROM {}"), std::vector<std::string>{"30"});
}

TEST_F(MaintenanceTest, CompactionRacingAppendsLosesNothing) {
  const std::string root = FreshDir("race") + "/db/events";
  MakeTable(root);
  constexpr int kAppends = 40;
  std::atomic<bool> done{false};
  std::thread appender([&] {
    auto conn = duck::Connection::Open(*db_);
    ASSERT_TRUE(conn.ok());
    auto t = Table::Load(root);  // its own Table, as another process would have
    ASSERT_TRUE(t.ok());
    for (int i = 0; i < kAppends; ++i) AppendRows(*t, **conn, i * 10, 10);
    done = true;
  });
  int compactions = 0, committed = 0;
  while (!done || compactions == 0) {
    auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
    ASSERT_TRUE(c.ok()) << c.status().message();  // appends never make a compaction give up
    ++compactions;
    committed += c->snapshot_id ? 1 : 0;
    std::this_thread::sleep_for(20ms);
  }
  appender.join();
  EXPECT_GT(committed, 0);
  EXPECT_EQ(
      Rows(root, "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {}"),
      std::vector<std::string>{fmt::format("{0}|{0}|0|{1}", kAppends * 10, kAppends * 10 - 1)});
  auto t = Table::Load(root);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->NewestSummary(std::string(kOffsets)), fmt::format(R"({{"0":{}}})", kAppends * 10));
  EXPECT_EQ(t->metadata().CurrentSnapshot()->summary.at("total-records"),
            std::to_string(kAppends * 10));

  // Expiring everything old after the race keeps every row and the offsets.
  auto e = Expire(root, kHourMs, NowMs() + 2 * kHourMs);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_GT(e->snapshots_removed, 0);
  EXPECT_EQ(Rows(root, "SELECT count(*), count(DISTINCT id) FROM {}"),
            std::vector<std::string>{fmt::format("{0}|{0}", kAppends * 10)});
  ASSERT_TRUE(t->Refresh().ok());
  EXPECT_EQ(t->NewestSummary(std::string(kOffsets)), fmt::format(R"({{"0":{}}})", kAppends * 10));
}

TEST_F(MaintenanceTest, CompactionGivesUpWhenAnotherCommitRemovedItsFiles) {
  const std::string root = FreshDir("conflict") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 4; ++i) AppendRows(table, *conn_, i * 10, 10);
  const auto data_before = Listing(root + "/data");
  int64_t inner_written = 0;
  CompactOptions options{.target_file_size_bytes = 1 << 20};
  options.before_commit = [&] {
    // Another compaction of the same files commits first.
    auto inner = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
    ASSERT_TRUE(inner.ok()) << inner.status().message();
    ASSERT_TRUE(inner->snapshot_id.has_value());
    inner_written = inner->files_written;
  };
  auto outer = Compact(root, options, *conn_);
  ASSERT_FALSE(outer.ok());
  EXPECT_EQ(outer.status().code(), StatusCode::kAborted) << outer.status().message();
  EXPECT_NE(outer.status().message().find("gave up"), std::string::npos)
      << outer.status().message();
  EXPECT_EQ(inner_written, 2);
  // The table is the inner compaction's; the outer one's files are gone.
  EXPECT_EQ(Rows(root, "SELECT count(*), count(DISTINCT id) FROM {}"),
            std::vector<std::string>{"40|40"});
  EXPECT_EQ(LiveFiles(root).size(), 2u);
  EXPECT_EQ(Listing(root + "/data").size(), data_before.size() + 2);
  auto t = Table::Load(root);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->metadata().snapshots.size(), 5u);
}

TEST_F(MaintenanceTest, CompactionReadsColumnsByFieldIdAcrossRenamesAndAddedColumns) {
  const std::string root = FreshDir("renamed") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 3; ++i) AppendRows(table, *conn_, i * 10, 10);
  // amount -> price (same field id 3), and a new optional column 4.
  auto changed = table.CommitUpdates(
      [](const TableMetadata& base) -> Result<std::vector<TableUpdate>> {
        Schema next = *base.CurrentSchema();
        next.schema_id = 1;
        next.fields[2].name = "price";
        next.fields.push_back(NestedField{4, "extra", false, Type::Primitive(TypeId::kString), {}});
        return std::vector<TableUpdate>{AddSchemaUpdate{next, 4}, SetCurrentSchemaUpdate{-1}};
      },
      NowMs());
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_TRUE(c.ok() && c->snapshot_id) << c.status().message();
  // The rewritten files hold the old amounts under the new name, and NULL for extra.
  std::vector<std::string> paths;
  for (const ManifestEntry& e : LiveFiles(root))
    paths.push_back(duck::QuoteLiteral(*LocalPath(e.file.file_path)));
  EXPECT_EQ(paths.size(), 2u);
  auto rows = conn_->QueryText(fmt::format(
      "SELECT count(*), sum(price), count(extra) FROM read_parquet([{}])", fmt::join(paths, ", ")));
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ((*rows)[0][0].value_or("NULL") + "|" + (*rows)[0][1].value_or("NULL") + "|" +
                (*rows)[0][2].value_or("NULL"),
            "30|652.5|0");
}

TEST_F(MaintenanceTest, FilesWithoutFieldIdsAreNotCompacted) {
  const std::string root = FreshDir("no_ids") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 2; ++i) AppendRows(table, *conn_, i * 10, 10);
  // A file written without field ids (an import), added to the table.
  const std::string path = root + "/data/city=oslo/imported.parquet";
  ASSERT_TRUE(conn_
                  ->Execute(fmt::format(
                      "COPY (SELECT 100::BIGINT AS id, 'oslo' AS city, 1.5::DOUBLE AS amount) "
                      "TO '{}' (FORMAT parquet)",
                      path))
                  .ok());
  DataFile f;
  f.file_path = FileUri(path);
  f.file_format = "PARQUET";
  f.record_count = 1;
  f.file_size_in_bytes = static_cast<int64_t>(fs::file_size(path));
  f.partition = avro::Datum::Record({{"city", avro::Datum::String("oslo")}});
  ASSERT_TRUE(table
                  .Append({f},
                          [](const TableMetadata&) -> Result<std::map<std::string, std::string>> {
                            return std::map<std::string, std::string>{};
                          })
                  .ok());
  const auto listing = Listing(root);
  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("imported.parquet"), std::string::npos)
      << c.status().message();
  EXPECT_EQ(Listing(root), listing);
}

TEST_F(MaintenanceTest, AShortOlderThanDoesNotTakeTheFilesOfAWriterStillWorking) {
  const std::string root = FreshDir("orphan_floor") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 3; ++i) AppendRows(table, *conn_, i * 10, 10);
  // A compaction that has been writing for ten minutes: its files are unreferenced yet.
  const int64_t now = NowMs() + 2 * kHourMs;
  const std::string pending_data = root + "/data/city=oslo/compacting.parquet";
  const std::string pending_manifest = root + "/metadata/compacting-m0.avro";
  for (const auto& p : {pending_data, pending_manifest}) {
    WriteText(p, "x");
    SetMtime(p, now - 10 * 60'000);
  }
  // --older-than 30s: the old snapshots go, the pending files stay (floor of one hour).
  auto e = Expire(root, 30'000, now);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->snapshots_removed, 2);
  EXPECT_EQ(e->orphans_deleted, 0);
  for (const auto& p : {pending_data, pending_manifest}) EXPECT_TRUE(fs::exists(p)) << p;
  // A lower floor, said explicitly, takes them.
  e = Expire(root, 30'000, now, 60'000);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->orphans_deleted, 2);
  for (const auto& p : {pending_data, pending_manifest}) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_FALSE(Expire(root, 30'000, now, -1).ok());
}

TEST_F(MaintenanceTest, ACorruptManifestIsAnErrorNamingItAndNothingIsDeleted) {
  const std::string root = FreshDir("corrupt") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 3; ++i) AppendRows(table, *conn_, i * 10, 10);
  auto manifests = table.CurrentManifests();
  ASSERT_TRUE(manifests.ok());
  const std::string victim = *LocalPath(manifests->back().first.manifest_path);
  const uintmax_t size = fs::file_size(victim);
  fs::resize_file(victim, size / 2);
  const auto listing = Listing(root);

  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(victim), std::string::npos) << c.status().message();
  auto e = Expire(root, kHourMs, NowMs() + 2 * kHourMs);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(victim), std::string::npos) << e.status().message();
  EXPECT_EQ(Listing(root), listing);
}

TEST_F(MaintenanceTest, ACorruptManifestListOrMetadataIsAnErrorNamingItAndNothingIsDeleted) {
  const std::string root = FreshDir("corrupt_meta") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 3; ++i) AppendRows(table, *conn_, i * 10, 10);
  const std::string list = *LocalPath(table.metadata().CurrentSnapshot()->manifest_list);
  const std::string saved = *ReadWholeFile(list);
  fs::resize_file(list, saved.size() - 7);
  auto listing = Listing(root);
  auto e = Expire(root, kHourMs, NowMs() + 2 * kHourMs);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(list), std::string::npos) << e.status().message();
  EXPECT_EQ(Listing(root), listing);
  WriteText(list, saved);

  // The current metadata version cut short.
  const std::string current = table.files().VersionPath(table.version());
  std::string json = *ReadWholeFile(current);
  WriteText(current, json.substr(0, json.size() / 2));
  listing = Listing(root);
  e = Expire(root, kHourMs, NowMs() + 2 * kHourMs);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find(current), std::string::npos) << e.status().message();
  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(current), std::string::npos) << c.status().message();
  EXPECT_EQ(Listing(root), listing);
}

TEST_F(MaintenanceTest, AnAppendOnAStaleTableIsRebuiltWhenExpiryDeletedWhatItRead) {
  const std::string root = FreshDir("stale") + "/db/events";
  Table table = MakeTable(root);
  for (int i = 0; i < 3; ++i) AppendRows(table, *conn_, i * 10, 10);
  // `table` now lags: a compaction and an expiry delete the manifest list of the snapshot
  // it still thinks is current (a pipeline's Table between two commits).
  auto c = Compact(root, {.target_file_size_bytes = 1 << 20}, *conn_);
  ASSERT_TRUE(c.ok() && c->snapshot_id) << c.status().message();
  auto e = Expire(root, kHourMs, NowMs() + 2 * kHourMs);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->snapshots_removed, 3);
  ASSERT_FALSE(fs::exists(*LocalPath(table.metadata().CurrentSnapshot()->manifest_list)));
  AppendRows(table, *conn_, 30, 10);
  EXPECT_EQ(Rows(root, "SELECT count(*), count(DISTINCT id) FROM {}"),
            std::vector<std::string>{"40|40"});
  EXPECT_EQ(table.NewestSummary(std::string(kOffsets)), R"({"0":40})");
}

}  // namespace
}  // namespace maintenance_test
}  // namespace sluice::lake
