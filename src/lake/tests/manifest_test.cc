#include "lake/manifest.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace sluice::lake {
namespace manifest_test {
namespace {

using avro::Datum;

constexpr std::string_view kSchemaJson =
    R"({"type":"struct","schema-id":0,"fields":[{"id":1,"name":"city","required":false,"type":"string"},)"
    R"({"id":2,"name":"n","required":false,"type":"long"},{"id":3,"name":"ts","required":false,"type":"timestamptz"}]})";

ManifestContext DayPartitioned() {
  ManifestContext c;
  c.schema_json = std::string(kSchemaJson);
  c.spec_id = 1;
  c.spec_fields_json = R"([{"source-id":3,"field-id":1000,"name":"ts_day","transform":"day"}])";
  c.partition_avro_fields =
      R"([{"name":"ts_day","type":["null",{"type":"int","logicalType":"date"}],"default":null,"field-id":1000}])";
  return c;
}

ManifestEntry Entry(int i) {
  ManifestEntry e;
  e.status = EntryStatus::kAdded;
  e.file.file_path = fmt::format("file:///w/t/data/{}.parquet", i);
  e.file.partition = Datum::Record({{"ts_day", i % 2 ? Datum::Null() : Datum::Int(20000 + i)}});
  e.file.record_count = 100 + i;
  e.file.file_size_in_bytes = 4096 + i;
  e.file.column_sizes = {{1, 10}, {2, 20}, {3, 30}};
  e.file.value_counts = {{1, 100 + i}, {2, 100 + i}};
  e.file.null_value_counts = {{1, 0}, {2, i}};
  e.file.lower_bounds = {{1, "a"}, {2, std::string("\x01\0\0\0\0\0\0\0", 8)}};
  e.file.upper_bounds = {{1, "z"}, {2, std::string("\x09\0\0\0\0\0\0\0", 8)}};
  e.file.split_offsets = {4};
  return e;
}

TEST(ManifestTest, EntriesRoundTripAndInheritTheListsSequenceNumber) {
  std::vector<ManifestEntry> entries;
  for (int i = 0; i < 5; ++i) entries.push_back(Entry(i));
  entries[4].status = EntryStatus::kExisting;
  entries[4].snapshot_id = 7;
  entries[4].sequence_number = 2;
  entries[4].file_sequence_number = 2;
  Result<std::string> bytes = WriteManifest(DayPartitioned(), entries);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();

  ManifestFile list_entry;
  list_entry.added_snapshot_id = 9;
  list_entry.sequence_number = 3;
  Result<std::vector<ManifestEntry>> read = ReadManifest(*bytes, &list_entry);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const ManifestEntry& got = (*read)[i];
    EXPECT_EQ(got.file.file_path, entries[i].file.file_path);
    EXPECT_EQ(got.file.record_count, entries[i].file.record_count);
    EXPECT_EQ(got.file.partition, entries[i].file.partition);
    EXPECT_EQ(got.file.lower_bounds, entries[i].file.lower_bounds);
    EXPECT_EQ(got.file.upper_bounds, entries[i].file.upper_bounds);
    EXPECT_EQ(got.file.null_value_counts, entries[i].file.null_value_counts);
    EXPECT_EQ(got.file.split_offsets, entries[i].file.split_offsets);
  }
  EXPECT_EQ((*read)[0].snapshot_id, 9);
  EXPECT_EQ((*read)[0].sequence_number, 3);
  EXPECT_EQ((*read)[4].snapshot_id, 7);  // set: not inherited
  EXPECT_EQ((*read)[4].sequence_number, 2);
}

TEST(ManifestTest, ListRoundTrips) {
  ManifestFile m;
  m.manifest_path = "file:///w/t/metadata/a-m0.avro";
  m.manifest_length = 1234;
  m.partition_spec_id = 1;
  m.sequence_number = 4;
  m.min_sequence_number = 2;
  m.added_snapshot_id = 99;
  m.added_files_count = 3;
  m.existing_files_count = 1;
  m.added_rows_count = 300;
  m.existing_rows_count = 100;
  m.partitions = {{.contains_null = true,
                   .contains_nan = std::nullopt,
                   .lower_bound = "\x20\x4e\0\0",
                   .upper_bound = "\x24\x4e\0\0"}};
  Result<std::string> bytes = WriteManifestList(99, 98, 4, {m, m});
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  Result<std::vector<ManifestFile>> read = ReadManifestList(*bytes);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[1].manifest_path, m.manifest_path);
  EXPECT_EQ((*read)[1].existing_rows_count, 100);
  ASSERT_EQ((*read)[1].partitions.size(), 1u);
  EXPECT_EQ((*read)[1].partitions[0].lower_bound, m.partitions[0].lower_bound);
  EXPECT_TRUE((*read)[1].partitions[0].contains_null);
}

TEST(ManifestTest, TruncatedOrWrongFilesAreErrorsNotCrashes) {
  std::vector<ManifestEntry> entries = {Entry(0), Entry(2)};
  Result<std::string> bytes = WriteManifest(DayPartitioned(), entries);
  ASSERT_TRUE(bytes.ok());
  for (size_t n = 0; n < bytes->size(); n += 7) {
    Result<std::vector<ManifestEntry>> r = ReadManifest(std::string_view(*bytes).substr(0, n));
    if (r.ok()) {
      EXPECT_LE(r->size(), entries.size());
    }
  }
  EXPECT_FALSE(ReadManifest("").ok());
  // A manifest list is not a manifest: its records have no data_file.
  Result<std::string> list = WriteManifestList(1, std::nullopt, 1, {ManifestFile{}});
  ASSERT_TRUE(list.ok());
  Result<std::vector<ManifestEntry>> wrong = ReadManifest(*list);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("status"), std::string::npos) << wrong.status().message();
}

// python3-avro, an independent reader: the files decode, the field ids are the spec's.
constexpr std::string_view kPython = R"PY(
import json, sys, warnings
import avro.datafile, avro.io
warnings.simplefilter("ignore")
def ids(node, path, out):
    if isinstance(node, dict):
        for f in node.get("fields", []):
            if "field-id" in f: out[path + f["name"]] = f["field-id"]
            ids(f["type"], path + f["name"] + ".", out)
        for k in ("items", "values"):
            if k in node: ids(node[k], path, out)
        if "element-id" in node: out[path + "element"] = node["element-id"]
    elif isinstance(node, list):
        for b in node: ids(b, path, out)
with open(sys.argv[1], "rb") as f:
    r = avro.datafile.DataFileReader(f, avro.io.DatumReader())
    rows = list(r)
    meta = {k: v.decode() for k, v in r.meta.items()}
    out = {}
    ids(json.loads(meta["avro.schema"]), "", out)
    first = rows[0]
    print(json.dumps({"n": len(rows), "ids": out, "meta": meta,
        "path": first["data_file"]["file_path"] if "data_file" in first else first["manifest_path"],
        "count": first["data_file"]["record_count"] if "data_file" in first else first["added_rows_count"]}))
)PY";

std::string RunPython(const std::string& file) {
  std::string dir = ::testing::TempDir();
  std::string script = dir + "/manifest_read_" + std::to_string(getpid()) + ".py";
  std::ofstream(script) << kPython;
  std::string cmd = fmt::format("/usr/bin/python3 {} {}", script, file);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while (p != nullptr && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(p != nullptr ? pclose(p) : -1, 0) << cmd;
  std::remove(script.c_str());
  return out;
}

TEST(ManifestTest, PythonAvroReadsOurManifestAndList) {
  if (std::system("/usr/bin/python3 -c 'import avro.datafile' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import avro (apt-get install python3-avro)";
  }
  std::string dir = ::testing::TempDir();
  std::string manifest = dir + "/m_" + std::to_string(getpid()) + ".avro";
  std::string list = dir + "/l_" + std::to_string(getpid()) + ".avro";
  std::vector<ManifestEntry> entries = {Entry(0), Entry(1), Entry(2)};
  std::ofstream(manifest, std::ios::binary) << *WriteManifest(DayPartitioned(), entries);
  ManifestFile m;
  m.manifest_path = manifest;
  m.added_rows_count = 303;
  std::ofstream(list, std::ios::binary) << *WriteManifestList(5, std::nullopt, 1, {m});

  std::string got = RunPython(manifest);
  EXPECT_NE(got.find(R"("n": 3)"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("data_file.file_path": 100)"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("data_file.partition.ts_day": 1000)"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("data_file.lower_bounds.key": 126)"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("data_file.split_offsets.element": 133)"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("partition-spec-id": "1")"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("format-version": "2")"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("count": 100)"), std::string::npos) << got;

  got = RunPython(list);
  EXPECT_NE(got.find(R"("manifest_path": 500)"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("partitions.element": 508)"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("parent-snapshot-id": "null")"), std::string::npos) << got;
  EXPECT_NE(got.find(R"("count": 303)"), std::string::npos) << got;
  std::remove(manifest.c_str());
  std::remove(list.c_str());
}

}  // namespace
}  // namespace manifest_test
}  // namespace sluice::lake
