// Where the lake planner finds the tables a query names: `lake.<namespace>.<table>`
// resolved to a loaded lake::Table. WarehouseCatalog reads the warehouse directory the
// REST catalog serves (namespace levels are directories, a table a directory with
// metadata/), so the query server sees every table the pipelines and REST clients made.
//
//   WarehouseCatalog catalog("/var/lib/sluice/warehouse");
//   ASSIGN_OR_RETURN(lake::Table t, catalog.LoadTable({"db"}, "events"));
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "lake/rest_client.h"
#include "lake/table.h"
#include "query/lake_planner/file_cache.h"
#include "query/lake_planner/file_pruner.h"

namespace sluice::query {

// "db.events", "a.b.events": a table's name for messages.
std::string LakeTableName(const std::vector<std::string>& ns, const std::string& table);

// Resolves a table name to its current metadata. Implementations must be usable from the
// thread that plans (one planning call at a time per object is enough).
class LakeCatalog {
 public:
  virtual ~LakeCatalog() = default;
  // NotFound (naming the table) when there is no such table.
  virtual Result<lake::Table> LoadTable(const std::vector<std::string>& ns,
                                        const std::string& table) const = 0;
  // The table's current metadata as planning reads it (shared, immutable); the same errors.
  // By default LoadTable's.
  virtual Result<std::shared_ptr<const lake::TableMetadata>> LoadMetadata(
      const std::vector<std::string>& ns, const std::string& table) const;
  // The metadata of the table at `location` (iceberg_scan's argument): a metadata file of
  // any name (v3.metadata.json, 00001-<uuid>.metadata.json) or a table directory, whose
  // newest metadata/v<N>.metadata.json is read; a local path (absolute or file:) or an S3
  // location (s3:, s3a:, s3n:). NotFound when there is no table there. By default
  // Unimplemented.
  virtual Result<std::shared_ptr<const lake::TableMetadata>> LoadMetadataFile(
      const std::string& location) const;
  // How planning reads manifests: by default the files, each time.
  virtual const ManifestReader& manifests() const;
};

// A table as catalogs list it (for the Postgres catalog emulation's external relations).
struct LakeTableInfo {
  std::vector<std::string> ns;
  std::string name;
  struct Column {
    std::string name;
    std::string duckdb_type;  // "BIGINT", "DECIMAL(10, 2)", "STRUCT(...)[]"
    bool required = false;
    std::string doc;  // "" for none
  };
  std::vector<Column> columns;  // the current schema's top-level columns
  // How SQL names it: lake."db"."events", lake."a.b"."events" (always quoted).
  std::string SqlName() const;
};

// Tables under a warehouse directory: <warehouse>/<level>/.../<table>. Every load finds the
// table's current metadata version again, so a query sees the newest commit; the parsed
// metadata, manifest lists and manifests are kept in a FileCache of `cache_bytes` (0: none)
// and used while their files are unchanged. Shared by every session's thread.
//
// Or the tables of an Iceberg REST catalog (`catalog: {type: rest, ...}`): names resolved,
// tables listed and their metadata loaded through its API (connected at first use, and
// again after a failed connect); manifests and lists are read and cached as above.
class WarehouseCatalog : public LakeCatalog {
 public:
  static constexpr size_t kDefaultCacheBytes = 64 << 20;
  explicit WarehouseCatalog(std::string warehouse, size_t cache_bytes = kDefaultCacheBytes);
  explicit WarehouseCatalog(lake::RestCatalogConfig rest, size_t cache_bytes = kDefaultCacheBytes);
  ~WarehouseCatalog() override;
  Result<lake::Table> LoadTable(const std::vector<std::string>& ns,
                                const std::string& table) const override;
  Result<std::shared_ptr<const lake::TableMetadata>> LoadMetadata(
      const std::vector<std::string>& ns, const std::string& table) const override;
  Result<std::shared_ptr<const lake::TableMetadata>> LoadMetadataFile(
      const std::string& location) const override;
  const ManifestReader& manifests() const override;
  // Every table of the warehouse, sorted by namespace and name. A table whose metadata
  // cannot be read is left out (a query naming it gets the error).
  Result<std::vector<LakeTableInfo>> ListTables() const;
  // Whether namespace `ns` exists (a directory of the warehouse, or the catalog's).
  bool NamespaceExists(const std::vector<std::string>& ns) const;
  // The warehouse directory or S3 location; "" for a REST catalog or for one that only
  // reads tables by their metadata paths (WarehouseCatalog("")).
  const std::string& warehouse() const { return warehouse_; }
  FileCache::Stats cache_stats() const { return cache_->stats(); }

 private:
  Result<std::vector<LakeTableInfo>> ListS3Tables() const;
  Result<std::vector<LakeTableInfo>> ListRestTables() const;
  // The REST catalog's client, connected at the first call that succeeds.
  Result<std::shared_ptr<const lake::RestCatalogClient>> Rest() const;
  // `ns`.`table` as the REST catalog names it: exact, else the one name equal ignoring
  // case (SQL folds names, the catalog does not).
  Result<std::pair<std::vector<std::string>, std::string>> RestName(
      const lake::RestCatalogClient& rest, const std::vector<std::string>& ns,
      const std::string& table) const;
  // The table's directory; InvalidArgument for a name that could leave the warehouse.
  Result<std::string> TableDir(const std::vector<std::string>& ns, const std::string& table) const;
  // The metadata file at `path` (a local path or an S3 location), parsed, through cache_.
  Result<std::shared_ptr<const lake::TableMetadata>> ParsedMetadata(const std::string& path) const;
  // LoadMetadata of the table at `dir`, named `name` in errors.
  Result<std::shared_ptr<const lake::TableMetadata>> MetadataAt(const std::string& dir,
                                                                const std::string& name) const;

  std::string warehouse_;  // without a trailing '/'
  std::optional<lake::RestCatalogConfig> rest_config_;
  mutable std::mutex rest_mu_;
  mutable std::shared_ptr<const lake::RestCatalogClient> rest_;
  // The last failed connect, answered again for a few seconds: a catalog that is down
  // must not cost every new session the connect's retries.
  mutable std::optional<Status> rest_failure_;
  mutable std::chrono::steady_clock::time_point rest_failure_at_;
  // The catalog's table list, kept a few seconds: every session start lists the tables
  // for drivers, and a catalog's listing costs a request per table.
  mutable std::optional<std::vector<LakeTableInfo>> rest_tables_;
  mutable std::chrono::steady_clock::time_point rest_tables_at_;
  std::unique_ptr<FileCache> cache_;
  std::unique_ptr<ManifestReader> manifests_;  // reads through cache_
};

}  // namespace sluice::query
