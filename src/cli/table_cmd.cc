#include "cli/table_cmd.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include "base/config.h"
#include "duck/database.h"
#include "lake/maintenance.h"
#include "lake/rest_client.h"
#include "lake/storage.h"
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
  if (w.empty())
    return InvalidArgumentError("no warehouse: pass --warehouse DIR or set SLUICE_WAREHOUSE");
  if (w.find("://") == std::string::npos && w.rfind("file:", 0) != 0 && w[0] != '/') {
    w = fs::absolute(w).lexically_normal().string();  // relative to the working directory
  }
  if (lake::IsS3Location(w)) {
    w = lake::NormalLocation(w);
    RETURN_IF_ERROR(lake::SplitS3Location(w).status());
    return w;
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

Result<std::shared_ptr<lake::RestCatalogClient>> Catalog(const TableFlags& f) {
  lake::RestCatalogConfig c;
  c.uri = f.catalog_uri;
  c.warehouse = f.catalog_warehouse;
  if (const char* e = std::getenv("SLUICE_CATALOG_CREDENTIAL")) c.credential = e;
  if (const char* e = std::getenv("SLUICE_CATALOG_TOKEN")) c.token = e;
  return lake::RestCatalogClient::Connect(c);
}

// "a.b.t" -> ({"a", "b"}, "t")
Result<std::pair<std::vector<std::string>, std::string>> SplitName(const std::string& name) {
  if (name.empty() || name.front() == '.' || name.back() == '.' ||
      name.find('.') == std::string::npos || name.find("..") != std::string::npos) {
    return InvalidArgumentError("{} is not a table name: write namespace.table", name);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? dot : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::string table = parts.back();
  parts.pop_back();
  return std::make_pair(parts, table);
}

Result<lake::Table> Open(const TableFlags& f) {
  if (!f.catalog_uri.empty()) {
    ASSIGN_OR_RETURN(auto name, SplitName(f.table));
    ASSIGN_OR_RETURN(std::shared_ptr<lake::RestCatalogClient> catalog, Catalog(f));
    return lake::Table::Open(lake::RestTableStore(catalog, name.first, name.second));
  }
  ASSIGN_OR_RETURN(std::string root, TableRoot(f));
  return lake::Table::Load(root);
}

// The catalog's tables as namespace.table, walking its namespaces from `prefix`'s.
Result<std::vector<std::string>> CatalogTables(const TableFlags& f) {
  ASSIGN_OR_RETURN(std::shared_ptr<lake::RestCatalogClient> catalog, Catalog(f));
  std::vector<std::string> out;
  std::vector<std::vector<std::string>> pending = {{}};
  while (!pending.empty()) {
    std::vector<std::string> ns = std::move(pending.back());
    pending.pop_back();
    if (ns.size() > 16) continue;
    ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> children, catalog->ListNamespaces(ns));
    for (std::vector<std::string>& c : children) {
      if (c.size() == ns.size() + 1) pending.push_back(std::move(c));
    }
    if (ns.empty()) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> tables, catalog->ListTables(ns));
    std::string dotted = fmt::format("{}", fmt::join(ns, "."));
    for (const std::string& t : tables) {
      std::string name = dotted + "." + t;
      if (!f.table.empty() && name.rfind(f.table + ".", 0) != 0) continue;
      out.push_back(std::move(name));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Bytes(int64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  if (n < (int64_t{1} << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(n) / 1024);
  if (n < (int64_t{1} << 30)) return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1 << 20));
  return fmt::format("{:.2f} GiB", static_cast<double>(n) / (1 << 30));
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int RunTableCompact(const TableFlags& f) {
  Result<lake::Table> table = Open(f);
  if (!table.ok()) return Fail(table.status());
  if (f.target_file_size_bytes <= 0)
    return Fail(InvalidArgumentError("--target-file-size must be positive"));
  // DuckDB reads and writes the Parquet files: a bounded memory budget, spilling to a
  // temporary directory of our own.
  std::string spill =
      (fs::temp_directory_path() / fmt::format("sluice-compact-{}", ::getpid())).string();
  Result<std::unique_ptr<duck::Database>> db = duck::Database::Open(
      {.memory_limit_bytes = int64_t{1} << 30,
       .threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u)),
       .temp_directory = spill});
  if (!db.ok()) return Fail(db.status());
  Result<std::unique_ptr<duck::Connection>> conn = duck::Connection::Open(**db);
  if (!conn.ok()) return Fail(conn.status());
  lake::CompactOptions options;
  options.target_file_size_bytes = f.target_file_size_bytes;
  Result<lake::CompactResult> r = lake::Compact(std::move(*table), options, **conn);
  std::error_code ec;
  fs::remove_all(spill, ec);
  if (!r.ok()) return Fail(r.status());
  if (!r->snapshot_id) {
    fmt::print("{}: nothing to compact (no partition has two files below {})\n", f.table,
               Bytes(static_cast<int64_t>(static_cast<double>(f.target_file_size_bytes) *
                                          options.small_fraction)));
    return 0;
  }
  fmt::print("{}: rewrote {} files ({}) into {} ({}) in {} partitions, {} rows{}; snapshot {}\n",
             f.table, r->files_rewritten, Bytes(r->bytes_rewritten), r->files_written,
             Bytes(r->bytes_written), r->partitions, r->records,
             r->delete_files_removed > 0
                 ? fmt::format(", {} delete files no longer needed", r->delete_files_removed)
                 : "",
             *r->snapshot_id);
  return 0;
}

int RunTableExpire(const TableFlags& f) {
  Config config;
  config.Set("older-than", f.older_than, "--older-than");
  Result<int64_t> older_than = config.GetDurationMs("older-than", -1);
  if (!older_than.ok()) return Fail(older_than.status());
  if (*older_than < 0)
    return Fail(InvalidArgumentError("--older-than is required (30s, 5m, 1h, 7d)"));
  config.Set("orphan-min-age", f.orphan_min_age, "--orphan-min-age");
  Result<int64_t> orphan_min_age =
      config.GetDurationMs("orphan-min-age", lake::kDefaultOrphanMinAgeMs);
  if (!orphan_min_age.ok()) return Fail(orphan_min_age.status());
  Result<lake::Table> table = Open(f);
  if (!table.ok()) return Fail(table.status());
  Result<lake::ExpireResult> r =
      lake::Expire(std::move(*table), *older_than, NowMs(), *orphan_min_age);
  if (!r.ok()) return Fail(r.status());
  if (r->carry_snapshot_id) {
    fmt::print("{}: carried the Kafka offsets of old snapshots into snapshot {}\n", f.table,
               *r->carry_snapshot_id);
  }
  fmt::print(
      "{}: removed {} snapshots ({} kept); deleted {} data files, {} manifests, {} manifest lists, "
      "{} old "
      "metadata files, {} orphaned files: {}\n",
      f.table, r->snapshots_removed, r->snapshots_kept, r->data_files_deleted, r->manifests_deleted,
      r->manifest_lists_deleted, r->metadata_files_deleted, r->orphans_deleted,
      Bytes(r->bytes_deleted));
  return 0;
}

int RunTableList(const TableFlags& f) {
  if (!f.catalog_uri.empty()) {
    Result<std::vector<std::string>> names = CatalogTables(f);
    if (!names.ok()) return Fail(names.status());
    for (const std::string& n : *names) fmt::print("{}\n", n);
    return 0;
  }
  Result<std::string> root = Warehouse(f);
  if (!root.ok()) return Fail(root.status());
  std::vector<std::string> names;
  if (lake::IsS3Location(*root)) {
    Result<std::vector<std::string>> tables = lake::ListS3Tables(*root);
    if (!tables.ok()) return Fail(tables.status());
    for (std::string rel : *tables) {
      std::string dir = *root + "/" + rel;
      for (char& c : rel) {
        if (c == '/') c = '.';
      }
      if (rel.find('.') == std::string::npos) continue;  // a table needs a namespace
      if (!f.table.empty() && rel.rfind(f.table + ".", 0) != 0) continue;
      if (lake::Table::Load(dir).ok()) names.push_back(rel);
    }
  }
  std::error_code ec;
  if (!lake::IsS3Location(*root) && !fs::is_directory(*root, ec))
    return Fail(NotFoundError("warehouse {} is not a directory", *root));
  for (auto it = lake::IsS3Location(*root) ? fs::recursive_directory_iterator()
                                           : fs::recursive_directory_iterator(*root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
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
  fmt::print("table     {}\nlocation  {}\nmetadata  {}\nformat    v{}, uuid {}\n", f.table,
             m.location, t->metadata_location(), m.format_version, m.table_uuid);
  fmt::print("schema    (id {})\n", m.current_schema_id);
  if (const lake::Schema* s = m.CurrentSchema()) {
    for (const lake::NestedField& field : s->fields) {
      fmt::print("  {:>4}  {:<24} {}{}\n", field.id, field.name, field.type.ToString(),
                 field.required ? " (required)" : "");
    }
  }
  if (const lake::PartitionSpec* spec = m.DefaultSpec();
      spec != nullptr && !spec->is_unpartitioned()) {
    fmt::print("partitioned by\n");
    for (const lake::PartitionField& p : spec->fields) {
      const lake::NestedField* src =
          m.CurrentSchema() ? m.CurrentSchema()->FindField(p.source_id) : nullptr;
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
               Time(s->timestamp_ms), get("total-records"), get("total-data-files"),
               get("total-files-size"));
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
      if (k.rfind("sluice.offsets.", 0) == 0)
        offsets += fmt::format("{}{}={}", offsets.empty() ? "" : " ", k.substr(15), v);
    }
    fmt::print("{:<24} {:<20} {:>6} {:<9} {:>12} {:>8}  {}{}\n", Time(s.timestamp_ms),
               s.snapshot_id, s.sequence_number, s.operation, get("added-records"),
               get("added-data-files"), offsets,
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
