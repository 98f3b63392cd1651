#include "lake/table.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "lake/tests/scratch_dirs.h"

namespace sluice::lake {
namespace table_test {
namespace {

constexpr std::string_view kScratch = "sluice_table";
[[maybe_unused]] ::testing::Environment* const kScratchDirs =
    ::testing::AddGlobalTestEnvironment(new ScratchDirs(std::string(kScratch)));

std::string FreshDir(std::string_view name) { return ScratchDirs::Fresh(kScratch, name); }

Schema TwoColumns() {
  Schema s;
  s.fields.push_back(NestedField{1, "id", false, Type::Primitive(TypeId::kLong), std::nullopt});
  s.fields.push_back(NestedField{2, "city", false, Type::Primitive(TypeId::kString), std::nullopt});
  return s;
}

DataFile File(const std::string& name, int64_t rows) {
  DataFile f;
  f.file_path = "file:///nowhere/" + name + ".parquet";
  f.record_count = rows;
  f.file_size_in_bytes = 100 * rows;
  return f;
}

SummaryFn Offsets(const std::string& json) {
  return [json](const TableMetadata&) -> Result<std::map<std::string, std::string>> {
    return std::map<std::string, std::string>{{"sluice.offsets.g.t", json}};
  };
}

// Every live data file of the current snapshot, by path.
std::multiset<std::string> LiveFiles(const Table& t) {
  std::multiset<std::string> out;
  auto manifests = t.CurrentManifests();
  EXPECT_TRUE(manifests.ok()) << manifests.status().message();
  if (!manifests.ok()) return out;
  for (const auto& [m, entries] : *manifests) {
    for (const ManifestEntry& e : entries) {
      if (e.status != EntryStatus::kDeleted) out.insert(e.file.file_path);
    }
  }
  return out;
}

// A writer still holding a table that was dropped or renamed meanwhile (its metadata/
// moved away, as the REST catalog does) fails to append, and does not bring the name
// back: no metadata/ is made by its manifest's write, before or without a snapshot.
TEST(TableTest, AnAppendAfterTheTableMovedAwayFailsAndMakesNoMetadataDirectory) {
  for (bool with_snapshot : {false, true}) {
    std::string root = FreshDir(with_snapshot ? "moved-after" : "moved-before");
    Result<Table> t = Table::Create(root, TwoColumns(), PartitionSpec{}, {});
    ASSERT_TRUE(t.ok()) << t.status().message();
    if (with_snapshot) ASSERT_TRUE(t->Append({File("a", 1)}, Offsets("{}")).ok());
    std::filesystem::rename(root + "/metadata", root + "/metadata.renamed-1");
    Result<int64_t> appended = t->Append({File("b", 1)}, Offsets("{}"));
    EXPECT_FALSE(appended.ok()) << with_snapshot;
    EXPECT_FALSE(std::filesystem::exists(root + "/metadata")) << with_snapshot;
  }
}

// The REST catalog retires only a table's version files at a drop or rename (its
// manifests stay where the snapshots name them, in metadata/): a writer still holding the
// table fails to append and lands no version there, and a new table cannot be created
// over the old one's files.
TEST(TableTest, AnAppendAfterTheVersionsWereRetiredFailsAndLandsNoVersion) {
  std::string root = FreshDir("retired");
  Result<Table> t = Table::Create(root, TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE(t->Append({File("a", 1)}, Offsets("{}")).ok());
  std::filesystem::create_directories(root + "/.metadata.dropped-1");
  for (const auto& e : std::filesystem::directory_iterator(root + "/metadata")) {
    std::string name = e.path().filename().string();
    if (name.ends_with(".metadata.json") || name == "version-hint.text")
      std::filesystem::rename(e.path(), root + "/.metadata.dropped-1/" + name);
  }
  Result<int64_t> appended = t->Append({File("b", 1)}, Offsets("{}"));
  ASSERT_FALSE(appended.ok());
  EXPECT_EQ(appended.status().code(), StatusCode::kNotFound) << appended.status().ToString();
  for (const auto& e : std::filesystem::directory_iterator(root + "/metadata")) {
    EXPECT_FALSE(e.path().filename().string().ends_with(".metadata.json")) << e.path();
  }
  EXPECT_EQ(Table::Load(root).status().code(), StatusCode::kNotFound);
  Result<Table> again = Table::Create(root, TwoColumns(), PartitionSpec{}, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition) << again.status().ToString();
}

TEST(TableTest, AppendsMakeSnapshotsWithTotalsAndTheNewestOffsets) {
  std::string root = FreshDir("append");
  Result<Table> t = Table::Create(root, TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_FALSE(t->NewestSummary("sluice.offsets.g.t").has_value());
  ASSERT_TRUE(t->Append({File("a", 10)}, Offsets(R"({"0":10})")).ok());
  ASSERT_TRUE(t->Append({File("b", 5), File("c", 7)}, Offsets(R"({"0":22})")).ok());
  Result<Table> again = Table::Load(root);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->version(), 3);
  const Snapshot* s = again->metadata().CurrentSnapshot();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->sequence_number, 2);
  EXPECT_EQ(s->summary.at("total-records"), "22");
  EXPECT_EQ(s->summary.at("total-data-files"), "3");
  EXPECT_EQ(s->operation, "append");
  EXPECT_EQ(again->NewestSummary("sluice.offsets.g.t"), R"({"0":22})");
  EXPECT_EQ(LiveFiles(*again),
            (std::multiset<std::string>{"file:///nowhere/a.parquet", "file:///nowhere/b.parquet",
                                        "file:///nowhere/c.parquet"}));
}

TEST(TableTest, ManyAppendsMergeManifestsAndKeepEveryFile) {
  std::string root = FreshDir("merge");
  Result<Table> t = Table::Create(root, TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 40; ++i)
    ASSERT_TRUE(t->Append({File(fmt::format("f{}", i), 1)}, Offsets("{}")).ok());
  auto manifests = t->CurrentManifests();
  ASSERT_TRUE(manifests.ok());
  EXPECT_LE(manifests->size(), 16u);
  EXPECT_EQ(LiveFiles(*t).size(), 40u);
}

TEST(TableTest, RacingAppendersFromTwoHandlesLoseNoFile) {
  std::string root = FreshDir("race");
  ASSERT_TRUE(Table::Create(root, TwoColumns(), PartitionSpec{}, {}).ok());
  constexpr int kEach = 15;
  auto writer = [&](char who) {
    Result<Table> t = Table::Load(root);
    ASSERT_TRUE(t.ok());
    for (int i = 0; i < kEach; ++i) {
      ASSERT_TRUE(t->Append({File(fmt::format("{}{}", who, i), 1)}, Offsets("{}")).ok());
    }
  };
  std::thread a(writer, 'a'), b(writer, 'b');
  a.join();
  b.join();
  Result<Table> t = Table::Load(root);
  ASSERT_TRUE(t.ok());
  std::multiset<std::string> live = LiveFiles(*t);
  EXPECT_EQ(live.size(), 2u * kEach);
  EXPECT_EQ(std::set<std::string>(live.begin(), live.end()).size(), 2u * kEach)
      << "a file listed twice";
  EXPECT_EQ(t->metadata().CurrentSnapshot()->summary.at("total-records"),
            std::to_string(2 * kEach));
}

TEST(TableTest, CorruptMetadataAndManifestsAreNamedNotHalfRead) {
  std::string root = FreshDir("corrupt");
  Result<Table> t = Table::Create(root, TwoColumns(), PartitionSpec{}, {});
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t->Append({File("a", 1)}, Offsets("{}")).ok());
  // A truncated manifest list: reading the files names it.
  std::string list_path = *LocalPath(t->metadata().CurrentSnapshot()->manifest_list);
  std::string bytes = *ReadWholeFile(list_path);
  std::ofstream(list_path, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  auto manifests = t->CurrentManifests();
  ASSERT_FALSE(manifests.ok());
  EXPECT_NE(manifests.status().message().find(list_path), std::string::npos)
      << manifests.status().message();
  // And an append on top of it fails rather than dropping the files it lists.
  EXPECT_FALSE(t->Append({File("b", 1)}, Offsets("{}")).ok());
  // Truncated metadata: the load names the version file.
  std::string v = t->files().VersionPath(t->version());
  std::string json = *ReadWholeFile(v);
  std::ofstream(v, std::ios::trunc) << json.substr(0, json.size() / 3);
  Result<Table> loaded = Table::Load(root);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(v), std::string::npos) << loaded.status().message();
  // A directory without metadata is not a table.
  EXPECT_EQ(Table::Load(FreshDir("none")).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace table_test
}  // namespace sluice::lake
