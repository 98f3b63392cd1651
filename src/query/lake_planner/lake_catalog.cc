#include "query/lake_planner/lake_catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>

#include "base/strings.h"
#include "duck/database.h"
#include "lake/duck_types.h"
#include "lake/iceberg_json.h"
#include "lake/manifest.h"
#include "lake/storage.h"
#include "lake/table_files.h"

namespace sluice::query {
namespace {

// One directory name: what the REST catalog accepts (no '/', no control characters, not
// empty, not dot-named), so a name cannot walk out of the warehouse.
Status CheckName(const std::string& name, const std::string& table) {
  bool ok = !name.empty() && name[0] != '.' && name.size() <= 255;
  for (char c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ok = false;
  }
  if (!ok)
    return InvalidArgumentError("lake table {}: \"{}\" is not a valid namespace or table name",
                                table, name);
  return Status::OK();
}

bool IsDir(const std::string& path) {
  if (lake::IsS3Location(path)) return true;  // prefixes, not directories: asked for by name
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// `dir`/`name`, or else the one entry of `dir` equal to `name` ignoring case (SQL names are
// case-insensitive, directories not); `dir`/`name` when there is none or several.
std::string Child(const std::string& dir, const std::string& name) {
  std::string exact = dir + "/" + name;
  if (IsDir(exact)) return exact;
  std::string found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string entry = it->path().filename().string();
    if (entry.size() != name.size() || entry[0] == '.') continue;
    bool same = true;
    for (size_t i = 0; i < entry.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(entry[i])) ==
             std::tolower(static_cast<unsigned char>(name[i]));
    }
    if (!same) continue;
    if (!found.empty()) return exact;  // ambiguous
    found = dir + "/" + entry;
  }
  return found.empty() ? exact : found;
}

}  // namespace

std::string LakeTableName(const std::vector<std::string>& ns, const std::string& table) {
  std::string out;
  for (const std::string& level : ns) out += level + ".";
  return out + table;
}

Result<std::shared_ptr<const lake::TableMetadata>> LakeCatalog::LoadMetadata(
    const std::vector<std::string>& ns, const std::string& table) const {
  ASSIGN_OR_RETURN(lake::Table t, LoadTable(ns, table));
  return std::make_shared<const lake::TableMetadata>(t.metadata());
}

Result<std::shared_ptr<const lake::TableMetadata>> LakeCatalog::LoadMetadataFile(
    const std::string& location) const {
  return UnimplementedError("this catalog reads no table by its metadata path ({})", location);
}

const ManifestReader& LakeCatalog::manifests() const {
  static const ManifestReader kFiles;
  return kFiles;
}

namespace {

// Parsed size per file byte, roughly: manifests are deflated Avro whose every map entry
// becomes a few allocations; metadata JSON parses to about its size again.
constexpr size_t kManifestCostFactor = 16;
constexpr size_t kMetadataCostFactor = 4;

// A file's name in the cache: its local path, or its S3 location.
Result<std::string> CacheKey(const std::string& location) {
  if (lake::IsS3Location(location)) return lake::NormalLocation(location);
  return lake::LocalPath(location);
}

// Manifest lists and manifests through the catalog's cache. A manifest's entries depend
// on the list entry they inherit from too, which is part of the key.
class CachedManifestReader : public ManifestReader {
 public:
  explicit CachedManifestReader(FileCache& cache) : cache_(cache) {}

  Result<std::shared_ptr<const std::vector<lake::ManifestFile>>> ManifestList(
      const lake::Snapshot& snapshot) const override {
    ASSIGN_OR_RETURN(std::string path, CacheKey(snapshot.manifest_list));
    return cache_.Get<std::vector<lake::ManifestFile>>(
        path, "manifest list", kManifestCostFactor,
        [&](std::string bytes) -> Result<std::vector<lake::ManifestFile>> {
          Result<std::vector<lake::ManifestFile>> list = lake::ReadManifestList(bytes);
          if (!list.ok()) return CorruptionError("{}: {}", path, list.status().message());
          return list;
        });
  }

  Result<std::shared_ptr<const std::vector<lake::ManifestEntry>>> Entries(
      const lake::ManifestFile& m) const override {
    ASSIGN_OR_RETURN(std::string path, CacheKey(m.manifest_path));
    return cache_.Get<std::vector<lake::ManifestEntry>>(
        path, fmt::format("manifest {} {}", m.added_snapshot_id, m.sequence_number),
        kManifestCostFactor, [&](std::string bytes) -> Result<std::vector<lake::ManifestEntry>> {
          Result<std::vector<lake::ManifestEntry>> entries = lake::ReadManifest(bytes, &m);
          if (!entries.ok()) return CorruptionError("{}: {}", path, entries.status().message());
          return entries;
        });
  }

 private:
  FileCache& cache_;
};

}  // namespace

WarehouseCatalog::WarehouseCatalog(std::string warehouse, size_t cache_bytes)
    : warehouse_(std::move(warehouse)),
      cache_(std::make_unique<FileCache>(cache_bytes)),
      manifests_(std::make_unique<CachedManifestReader>(*cache_)) {
  if (lake::IsS3Location(warehouse_)) warehouse_ = lake::NormalLocation(warehouse_);
  while (warehouse_.size() > 1 && warehouse_.back() == '/') warehouse_.pop_back();
}

WarehouseCatalog::WarehouseCatalog(lake::RestCatalogConfig rest, size_t cache_bytes)
    : rest_config_(std::move(rest)),
      cache_(std::make_unique<FileCache>(cache_bytes)),
      manifests_(std::make_unique<CachedManifestReader>(*cache_)) {}

WarehouseCatalog::~WarehouseCatalog() = default;

Result<std::shared_ptr<const lake::RestCatalogClient>> WarehouseCatalog::Rest() const {
  constexpr auto kRetryConnectAfter = std::chrono::seconds(5);
  std::lock_guard<std::mutex> lock(rest_mu_);
  if (rest_ == nullptr) {
    const auto now = std::chrono::steady_clock::now();
    if (rest_failure_ && now - rest_failure_at_ < kRetryConnectAfter) return *rest_failure_;
    Result<std::shared_ptr<lake::RestCatalogClient>> client =
        lake::RestCatalogClient::Connect(*rest_config_);
    if (!client.ok()) {
      rest_failure_ = client.status();
      rest_failure_at_ = now;
      return client.status();
    }
    rest_ = std::move(*client);
    rest_failure_.reset();
  }
  return rest_;
}

namespace {

// The one of `names` equal to `name` ignoring case; `name` when none or several are.
std::string FoldedMatch(const std::vector<std::string>& names, const std::string& name) {
  std::string found;
  for (const std::string& n : names) {
    if (n == name) return n;
    if (!EqualsIgnoreCase(n, name)) continue;
    if (!found.empty()) return name;  // ambiguous
    found = n;
  }
  return found.empty() ? name : found;
}

LakeTableInfo InfoOf(std::vector<std::string> ns, std::string name, const lake::TableMetadata& m) {
  LakeTableInfo info{std::move(ns), std::move(name), {}};
  if (const lake::Schema* schema = m.CurrentSchema()) {
    for (const lake::NestedField& f : schema->fields) {
      info.columns.push_back({f.name, lake::DuckTypeOf(f.type), f.required, f.doc.value_or("")});
    }
  }
  return info;
}

}  // namespace

Result<std::pair<std::vector<std::string>, std::string>> WarehouseCatalog::RestName(
    const lake::RestCatalogClient& rest, const std::vector<std::string>& ns,
    const std::string& table) const {
  const std::string name = LakeTableName(ns, table);
  if (ns.empty()) return InvalidArgumentError("lake table {}: a namespace is required", name);
  std::vector<std::string> levels;
  for (const std::string& level : ns) {
    Result<std::vector<std::vector<std::string>>> children = rest.ListNamespaces(levels);
    std::vector<std::string> names;
    if (children.ok()) {
      for (const std::vector<std::string>& c : *children) {
        if (!c.empty()) names.push_back(c.back());
      }
    }
    levels.push_back(FoldedMatch(names, level));
  }
  Result<std::vector<std::string>> tables = rest.ListTables(levels);
  return std::make_pair(levels, tables.ok() ? FoldedMatch(*tables, table) : table);
}

bool WarehouseCatalog::NamespaceExists(const std::vector<std::string>& ns) const {
  if (rest_config_) {
    Result<std::shared_ptr<const lake::RestCatalogClient>> rest = Rest();
    if (!rest.ok() || ns.empty()) return false;
    std::vector<std::string> parent(ns.begin(), ns.end() - 1);
    Result<std::vector<std::vector<std::string>>> children = (*rest)->ListNamespaces(parent);
    return children.ok() && std::find(children->begin(), children->end(), ns) != children->end();
  }
  if (lake::IsS3Location(warehouse_)) return false;
  std::filesystem::path dir(warehouse_);
  for (const std::string& level : ns) dir /= level;
  std::error_code ec;
  return std::filesystem::is_directory(dir, ec);
}

const ManifestReader& WarehouseCatalog::manifests() const { return *manifests_; }

Result<std::string> WarehouseCatalog::TableDir(const std::vector<std::string>& ns,
                                               const std::string& table) const {
  const std::string name = LakeTableName(ns, table);
  if (ns.empty()) return InvalidArgumentError("lake table {}: a namespace is required", name);
  std::string dir = warehouse_;
  for (const std::string& level : ns) {
    RETURN_IF_ERROR(CheckName(level, name));
    dir = Child(dir, level);
  }
  RETURN_IF_ERROR(CheckName(table, name));
  return Child(dir, table);
}

Result<std::shared_ptr<const lake::TableMetadata>> WarehouseCatalog::ParsedMetadata(
    const std::string& path) const {
  return cache_->Get<lake::TableMetadata>(
      path, "metadata", kMetadataCostFactor, [&](std::string bytes) -> Result<lake::TableMetadata> {
        Result<lake::TableMetadata> parsed = lake::TableMetadataFromJson(bytes);
        if (!parsed.ok()) return CorruptionError("{}: {}", path, parsed.status().message());
        return parsed;
      });
}

Result<std::shared_ptr<const lake::TableMetadata>> WarehouseCatalog::LoadMetadataFile(
    const std::string& location) const {
  ASSIGN_OR_RETURN(std::string path, CacheKey(location));
  if (!path.ends_with(".metadata.json")) {
    if (!IsDir(path)) {
      return NotFoundError(
          "{} is neither a table's metadata file (<name>.metadata.json) nor a table directory",
          location);
    }
    Result<std::shared_ptr<const lake::TableMetadata>> m = MetadataAt(path, location);
    if (!m.ok() && m.status().code() == StatusCode::kNotFound) {
      return NotFoundError(
          "no table at {}: it holds no metadata/v<N>.metadata.json (name a table's metadata "
          "file, such as metadata/00001-<uuid>.metadata.json)",
          location);
    }
    return m;
  }
  Result<std::shared_ptr<const lake::TableMetadata>> m = ParsedMetadata(path);
  if (!m.ok() && m.status().code() == StatusCode::kNotFound) {
    return NotFoundError("no table metadata at {}", location);
  }
  return m;
}

Result<std::shared_ptr<const lake::TableMetadata>> WarehouseCatalog::MetadataAt(
    const std::string& dir, const std::string& name) const {
  // A version file can go (metadata cleanup after a commit) between finding it and
  // reading it: then the newer version is read.
  for (int attempt = 0;; ++attempt) {
    Result<std::optional<lake::MetadataVersion>> current = lake::TableFiles(dir).CurrentVersion();
    if (!current.ok()) return current.status().WithContext(fmt::format("lake table {}", name));
    if (!*current) return NotFoundError("lake table {} does not exist (no table at {})", name, dir);
    Result<std::shared_ptr<const lake::TableMetadata>> m = ParsedMetadata((*current)->path);
    if (m.ok() || m.status().code() != StatusCode::kNotFound || attempt == 2) {
      if (!m.ok()) return m.status().WithContext(fmt::format("lake table {}", name));
      return m;
    }
  }
}

Result<std::shared_ptr<const lake::TableMetadata>> WarehouseCatalog::LoadMetadata(
    const std::vector<std::string>& ns, const std::string& table) const {
  if (rest_config_) {
    const std::string name = LakeTableName(ns, table);
    ASSIGN_OR_RETURN(std::shared_ptr<const lake::RestCatalogClient> rest, Rest());
    Result<lake::RestCatalogClient::Loaded> loaded = rest->LoadTable(ns, table);
    if (!loaded.ok() && loaded.status().code() == StatusCode::kNotFound) {
      ASSIGN_OR_RETURN(auto folded, RestName(*rest, ns, table));
      loaded = rest->LoadTable(folded.first, folded.second);
    }
    if (!loaded.ok()) {
      if (loaded.status().code() == StatusCode::kNotFound)
        return NotFoundError("lake table {} does not exist ({})", name, rest->Describe());
      return loaded.status().WithContext(fmt::format("lake table {}", name));
    }
    return std::make_shared<const lake::TableMetadata>(std::move(loaded->metadata));
  }
  ASSIGN_OR_RETURN(std::string dir, TableDir(ns, table));
  return MetadataAt(dir, LakeTableName(ns, table));
}

Result<lake::Table> WarehouseCatalog::LoadTable(const std::vector<std::string>& ns,
                                                const std::string& table) const {
  const std::string name = LakeTableName(ns, table);
  if (rest_config_) {
    ASSIGN_OR_RETURN(std::shared_ptr<const lake::RestCatalogClient> rest, Rest());
    ASSIGN_OR_RETURN(auto folded, RestName(*rest, ns, table));
    Result<lake::Table> t =
        lake::Table::Open(lake::RestTableStore(rest, folded.first, folded.second));
    if (!t.ok()) {
      if (t.status().code() == StatusCode::kNotFound)
        return NotFoundError("lake table {} does not exist ({})", name, rest->Describe());
      return t.status().WithContext(fmt::format("lake table {}", name));
    }
    return t;
  }
  ASSIGN_OR_RETURN(std::string dir, TableDir(ns, table));
  Result<lake::Table> t = lake::Table::Load(dir);
  if (!t.ok()) {
    if (t.status().code() == StatusCode::kNotFound) {
      return NotFoundError("lake table {} does not exist (no table at {})", name, dir);
    }
    return t.status().WithContext(fmt::format("lake table {}", name));
  }
  return t;
}

namespace {

constexpr size_t kMaxNamespaceDepth = 16;

using MetadataAtFn = std::function<Result<std::shared_ptr<const lake::TableMetadata>>(
    const std::string& dir, const std::string& name)>;

void ListUnder(const std::string& dir, std::vector<std::string>& ns, const MetadataAtFn& load,
               std::vector<LakeTableInfo>* out) {
  if (ns.size() > kMaxNamespaceDepth) return;
  std::vector<std::string> entries;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string entry = it->path().filename().string();
    std::error_code ec2;
    if (entry.empty() || entry[0] == '.' || !it->is_directory(ec2)) continue;
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end());
  for (const std::string& entry : entries) {
    const std::string path = dir + "/" + entry;
    if (IsDir(path + "/metadata")) {
      if (ns.empty()) continue;  // a table needs a namespace
      Result<std::shared_ptr<const lake::TableMetadata>> m = load(path, LakeTableName(ns, entry));
      if (!m.ok()) continue;
      const lake::Schema* schema = (*m)->CurrentSchema();
      if (schema == nullptr) continue;
      LakeTableInfo info{ns, entry, {}};
      for (const lake::NestedField& f : schema->fields) {
        info.columns.push_back({f.name, lake::DuckTypeOf(f.type), f.required, f.doc.value_or("")});
      }
      out->push_back(std::move(info));
      continue;
    }
    ns.push_back(entry);
    ListUnder(path, ns, load, out);
    ns.pop_back();
  }
}

}  // namespace

std::string LakeTableInfo::SqlName() const {
  std::string joined;
  for (const std::string& level : ns) joined += (joined.empty() ? "" : ".") + level;
  return fmt::format("lake.{}.{}", duck::QuoteIdentifier(joined), duck::QuoteIdentifier(name));
}

Result<std::vector<LakeTableInfo>> WarehouseCatalog::ListTables() const {
  if (rest_config_) return ListRestTables();
  if (lake::IsS3Location(warehouse_)) return ListS3Tables();
  if (!IsDir(warehouse_)) return NotFoundError("warehouse {} is not a directory", warehouse_);
  std::vector<LakeTableInfo> out;
  std::vector<std::string> ns;
  ListUnder(
      warehouse_, ns,
      [this](const std::string& dir, const std::string& name) { return MetadataAt(dir, name); },
      &out);
  return out;
}

Result<std::vector<LakeTableInfo>> WarehouseCatalog::ListS3Tables() const {
  ASSIGN_OR_RETURN(std::vector<std::string> roots, lake::ListS3Tables(warehouse_));
  std::vector<LakeTableInfo> out;
  for (const std::string& root : roots) {
    std::vector<std::string> levels;
    for (size_t start = 0;;) {
      size_t slash = root.find('/', start);
      levels.push_back(root.substr(start, slash - start));
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (levels.size() < 2 || levels.size() > kMaxNamespaceDepth + 1) continue;
    std::string name = levels.back();
    levels.pop_back();
    Result<std::shared_ptr<const lake::TableMetadata>> m =
        MetadataAt(warehouse_ + "/" + root, LakeTableName(levels, name));
    if (!m.ok()) continue;
    const lake::Schema* schema = (*m)->CurrentSchema();
    if (schema == nullptr) continue;
    LakeTableInfo info{levels, name, {}};
    for (const lake::NestedField& f : schema->fields) {
      info.columns.push_back({f.name, lake::DuckTypeOf(f.type), f.required, f.doc.value_or("")});
    }
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::vector<LakeTableInfo>> WarehouseCatalog::ListRestTables() const {
  constexpr auto kListingTtl = std::chrono::seconds(5);
  {
    std::lock_guard<std::mutex> lock(rest_mu_);
    if (rest_tables_ && std::chrono::steady_clock::now() - rest_tables_at_ < kListingTtl)
      return *rest_tables_;
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const lake::RestCatalogClient> rest, Rest());
  std::vector<LakeTableInfo> out;
  // Breadth first over the namespaces, each level's tables loaded for their columns.
  std::vector<std::vector<std::string>> pending = {{}};
  while (!pending.empty()) {
    std::vector<std::string> ns = std::move(pending.back());
    pending.pop_back();
    if (ns.size() > kMaxNamespaceDepth) continue;
    ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> children, rest->ListNamespaces(ns));
    for (std::vector<std::string>& c : children) {
      if (c.size() == ns.size() + 1) pending.push_back(std::move(c));
    }
    if (ns.empty()) continue;
    Result<std::vector<std::string>> tables = rest->ListTables(ns);
    if (!tables.ok()) continue;  // dropped meanwhile, or not ours to see
    for (const std::string& t : *tables) {
      Result<lake::RestCatalogClient::Loaded> loaded = rest->LoadTable(ns, t);
      if (!loaded.ok()) continue;  // a query naming it gets the error
      out.push_back(InfoOf(ns, t, loaded->metadata));
    }
  }
  std::sort(out.begin(), out.end(), [](const LakeTableInfo& a, const LakeTableInfo& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  std::lock_guard<std::mutex> lock(rest_mu_);
  rest_tables_ = out;
  rest_tables_at_ = std::chrono::steady_clock::now();
  return out;
}

}  // namespace sluice::query
