#include "cli/table_cmd.h"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "lake/table.h"

namespace sluice::cli {
namespace {

namespace fs = std::filesystem;

Result<std::string> Warehouse(const TableFlags& f) {
  std::string w = f.warehouse;
  if (w.empty()) {
    const char* env = std::getenv("SLUICE_WAREHOUSE");
    if (env != nullptr) w = env;
  }
  if (w.empty()) return InvalidArgumentError("no warehouse: pass --warehouse DIR or set SLUICE_WAREHOUSE");
  if (w.find("://") == std::string::npos && w.rfind("file:", 0) != 0 && w[0] != '/') {
    w = fs::absolute(w).lexically_normal().string();  // relative to the working directory
  }
  return lake::LocalPath(w);
}

// "a.b.t" -> <warehouse>/a/b/t
Result<std::string> TableRoot(const TableFlags& f) {
  ASSIGN_OR_RETURN(std::string root, Warehouse(f));
  if (f.table.empty() || f.table.front() == '.' || f.table.back() == '.' ||
      f.table.find('.') == std::string::npos || f.table.find('/') != std::string::npos ||
      f.table.find("..") != std::string::npos) {
    return InvalidArgumentError("{} is not a table name: write namespace.table", f.table);
  }
  std::string path = f.table;
  for (char& c : path) {
    if (c == '.') c = '/';
  }
  return root + "/" + path;
}

std::string Time(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buf, ms % 1000);
}

int Fail(const Status& st) {
  std::fprintf(stderr, "sluice table: %s\n", st.message().c_str());
  return 1;
}

Result<lake::Table> Open(const TableFlags& f) {
  ASSIGN_OR_RETURN(std::string root, TableRoot(f));
  return lake::Table::Load(root);
}

}  // namespace

int RunTableList(const TableFlags& f) {
  Result<std::string> root = Warehouse(f);
  if (!root.ok()) return Fail(root.status());
  std::error_code ec;
  if (!fs::is_directory(*root, ec)) return Fail(NotFoundError("warehouse {} is not a directory", *root));
  std::vector<std::string> names;
  for (auto it = fs::recursive_directory_iterator(*root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_directory() || it->path().filename() != "metadata") continue;
    fs::path table = it->path().parent_path();
    std::string rel = fs::relative(table, *root).string();
    for (char& c : rel) {
      if (c == '/') c = '.';
    }
    if (!f.table.empty() && rel.rfind(f.table + ".", 0) != 0) continue;
    if (lake::Table::Load(table.string()).ok()) names.push_back(rel);
    it.disable_recursion_pending();
  }
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) fmt::print("{}\n", n);
  return 0;
}

int RunTableDescribe(const TableFlags& f) {
  Result<lake::Table> t = Open(f);
  if (!t.ok()) return Fail(t.status());
  const lake::TableMetadata& m = t->metadata();
  if (f.json) {
    fmt::print("{}\n", lake::TableMetadataToString(m, true));
    return 0;
  }
  fmt::print("table     {}\nlocation  {}\nmetadata  {}\nformat    v{}, uuid {}\n", f.table, m.location,
             t->metadata_location(), m.format_version, m.table_uuid);
  fmt::print("schema    (id {})\n", m.current_schema_id);
  if (const lake::Schema* s = m.CurrentSchema()) {
    for (const lake::NestedField& field : s->fields) {
      fmt::print("  {:>4}  {:<24} {}{}\n", field.id, field.name, field.type.ToString(),
                 field.required ? " (required)" : "");
    }
  }
  if (const lake::PartitionSpec* spec = m.DefaultSpec(); spec != nullptr && !spec->is_unpartitioned()) {
    fmt::print("partitioned by\n");
    for (const lake::PartitionField& p : spec->fields) {
      const lake::NestedField* src = m.CurrentSchema() ? m.CurrentSchema()->FindField(p.source_id) : nullptr;
      fmt::print("  {:>4}  {:<24} {}({})\n", p.field_id, p.name, p.transform.ToString(),
                 src ? src->name : std::to_string(p.source_id));
    }
  } else {
    fmt::print("partitioned by  nothing\n");
  }
  if (const lake::Snapshot* s = m.CurrentSnapshot()) {
    auto get = [&](const char* k) {
      auto it = s->summary.find(k);
      return it == s->summary.end() ? std::string("?") : it->second;
    };
    fmt::print("current   snapshot {} at {}: {} records in {} files, {} bytes\n", s->snapshot_id,
               Time(s->timestamp_ms), get("total-records"), get("total-data-files"), get("total-files-size"));
  } else {
    fmt::print("current   no snapshot (empty)\n");
  }
  for (const auto& [k, v] : m.properties) fmt::print("property  {} = {}\n", k, v);
  return 0;
}

int RunTableHistory(const TableFlags& f) {
  Result<lake::Table> t = Open(f);
  if (!t.ok()) return Fail(t.status());
  const lake::TableMetadata& m = t->metadata();
  fmt::print("{:<24} {:<20} {:>6} {:<9} {:>12} {:>8}  {}\n", "time", "snapshot", "seq", "operation",
             "added rows", "files", "offsets");
  for (const lake::Snapshot& s : m.snapshots) {
    auto get = [&](const char* k) {
      auto it = s.summary.find(k);
      return it == s.summary.end() ? std::string("") : it->second;
    };
    std::string offsets;
    for (const auto& [k, v] : s.summary) {
      if (k.rfind("sluice.offsets.", 0) == 0) offsets += fmt::format("{}{}={}", offsets.empty() ? "" : " ", k.substr(15), v);
    }
    fmt::print("{:<24} {:<20} {:>6} {:<9} {:>12} {:>8}  {}{}\n", Time(s.timestamp_ms), s.snapshot_id,
               s.sequence_number, s.operation, get("added-records"), get("added-data-files"), offsets,
               m.current_snapshot_id == s.snapshot_id ? "  (current)" : "");
  }
  return 0;
}

int RunTableFiles(const TableFlags& f) {
  Result<lake::Table> t = Open(f);
  if (!t.ok()) return Fail(t.status());
  auto manifests = t->CurrentManifests();
  if (!manifests.ok()) return Fail(manifests.status());
  fmt::print("{:>10} {:>12}  {:<30} {}\n", "records", "bytes", "partition", "file");
  for (const auto& [manifest, entries] : *manifests) {
    for (const lake::ManifestEntry& e : entries) {
      if (e.status == lake::EntryStatus::kDeleted) continue;
      fmt::print("{:>10} {:>12}  {:<30} {}\n", e.file.record_count, e.file.file_size_in_bytes,
                 e.file.partition.ToString(), e.file.file_path);
    }
  }
  return 0;
}

}  // namespace sluice::cli
