// A file-system Iceberg table (docs/design/0009): loaded from its directory, created with
// a schema and partition spec, changed in snapshots committed by exclusive create with
// optimistic retries (each attempt built again from the metadata it commits on), and
// searched for what a snapshot summary recorded (the Kafka offsets a pipeline's rows came
// from).
//
//   ASSIGN_OR_RETURN(Table t, Table::Load("/warehouse/db/events"));
//   ASSIGN_OR_RETURN(int64_t id, t.Append(files, [&](const TableMetadata& base) { return extra;
//   })); ASSIGN_OR_RETURN(int64_t id, t.Commit("replace", [&](const CommitAttempt& a) ->
//   Result<SnapshotPlan> {...}));
//
// A Table is a value owned by one thread; several Tables (in threads or processes) may
// commit to one directory at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lake/manifest.h"
#include "lake/table_files.h"
#include "lake/table_metadata.h"
#include "lake/table_update.h"

namespace sluice::lake {

// Summary keys a commit adds beside Iceberg's own, computed against the metadata the
// attempt commits on (an attempt that lost a race is computed again).
using SummaryFn =
    std::function<Result<std::map<std::string, std::string>>(const TableMetadata& base)>;

// Summary keys with this prefix (`sluice.offsets.<group>.<topic>`) are carried into every
// new snapshot from the newest snapshot of the base's ancestry holding them, so the
// current snapshot alone answers a resuming pipeline, whatever expiry removed.
inline constexpr std::string_view kOffsetsSummaryPrefix = "sluice.offsets.";

// One commit attempt: the metadata it builds on and what the new snapshot will be.
struct CommitAttempt {
  const TableMetadata& base;
  int64_t snapshot_id = 0;
  int64_t sequence_number = 0;  // base.last_sequence_number + 1
  int attempt = 1;              // 1, 2, ... (a lost race makes another)
};

// What a snapshot changed, for the summary's Iceberg counts and totals.
struct SnapshotChanges {
  int64_t added_files = 0;
  int64_t added_records = 0;
  int64_t added_bytes = 0;
  int64_t deleted_files = 0;
  int64_t deleted_records = 0;
  int64_t deleted_bytes = 0;
  // Delete files (Iceberg v2) the snapshot removes, and the rows they held.
  int64_t removed_delete_files = 0;
  int64_t removed_position_deletes = 0;
  int64_t removed_equality_deletes = 0;
};

// What an attempt commits: the new snapshot's manifests in list order (new manifests
// with this attempt's snapshot id and sequence number), what changed, and summary keys
// of the caller's (they override the carried offsets).
struct SnapshotPlan {
  std::vector<ManifestFile> manifests;
  SnapshotChanges changes;
  std::map<std::string, std::string> summary;
};

// Builds an attempt. An error ends the commit with that error (nothing committed), except
// NotFound while the table moved on since `base` (another writer removed a file the
// attempt read): then the commit is tried again on the new current metadata.
using SnapshotBuilder = std::function<Result<SnapshotPlan>(const CommitAttempt& attempt)>;

// The metadata updates of a commit that adds no snapshot, built from the base metadata;
// none = nothing to commit.
using UpdatesBuilder = std::function<Result<std::vector<TableUpdate>>(const TableMetadata& base)>;

// Where a table's current metadata is kept and how the next version is committed
// (docs/design/0024, decision 18): the table's own files (FilesStore: an exclusive create
// of metadata/v<N+1>.metadata.json) or a REST catalog (lake/rest_client.h: the catalog
// writes the metadata file; sluice sends the updates and their requirements). Either way
// a Table writes its manifests and lists under its location's metadata/ itself.
class MetadataStore {
 public:
  struct Version {
    TableMetadata metadata;
    std::string location;  // of the metadata file (file://..., s3://...)
    int64_t version = 0;   // N of v<N>.metadata.json; a catalog's tables count commits seen
  };
  virtual ~MetadataStore() = default;
  // nullopt when there is no such table.
  virtual Result<std::optional<Version>> Load() const = 0;
  // Commits `updates` on `base`. AlreadyExists: another writer committed first (re-read
  // and build again); Unavailable: the outcome is unknown (re-read to learn it).
  virtual Result<Version> Commit(const Version& base, const std::vector<TableUpdate>& updates,
                                 int64_t now_ms) const = 0;
  // "/w/db/t", "REST catalog http://...: db.t", for messages.
  virtual std::string Describe() const = 0;
  // Whether the table's write.metadata.path property places its manifests (a catalog's
  // table, as Iceberg's metastore tables do); a directory's table keeps them in
  // <location>/metadata beside its versions, as Iceberg's Hadoop tables do.
  virtual bool HonoursMetadataPath() const { return false; }
};

// The metadata store of a table directory or S3 location (TableFiles).
std::shared_ptr<const MetadataStore> FilesStore(const std::string& root);

class Table {
 public:
  // NotFound when the directory holds no table.
  static Result<Table> Load(const std::string& root);
  // The table `store` keeps; NotFound when there is none. Its files (manifests, data) go
  // under its location.
  static Result<Table> Open(std::shared_ptr<const MetadataStore> store);
  // A new table with fresh field ids (NewTable); when another writer created it first,
  // that table, loaded.
  static Result<Table> Create(const std::string& root, const Schema& schema,
                              const PartitionSpec& spec,
                              const std::map<std::string, std::string>& properties);

  const TableMetadata& metadata() const { return metadata_; }
  int64_t version() const { return version_; }
  const TableFiles& files() const { return files_; }
  // Where new data files go: the write.data.path property (as Iceberg's default location
  // provider reads it), else <location>/data. InvalidArgument for a value that is not an
  // absolute local path or S3 location, or that is on another storage than the table.
  Result<std::string> DataDir() const;
  // Where new manifests and manifest lists go: the write.metadata.path property for a
  // catalog's table (MetadataStore::HonoursMetadataPath), else <location>/metadata.
  Result<std::string> ManifestDir() const;
  // The metadata file as a location (file://.../v<N>.metadata.json).
  std::string metadata_location() const { return metadata_location_; }
  const MetadataStore& store() const { return *store_; }

  // Re-reads the current version.
  Status Refresh();

  // Appends `data` in one snapshot (operation append); returns its id. Lost races are
  // retried on the new current metadata, up to a limit. With more than a few manifests in
  // the current snapshot they are merged into one with the new files (existing entries).
  Result<int64_t> Append(const std::vector<DataFile>& data, const SummaryFn& summary);

  // Commits one snapshot of `operation` (append, replace, overwrite, delete) made by
  // `build` on the current metadata, made current on main; returns its id. Lost races are
  // built again on the new current metadata, up to a limit (then Aborted). The summary
  // carries every kOffsetsSummaryPrefix key forward (see there).
  Result<int64_t> Commit(std::string_view operation, const SnapshotBuilder& build);

  // Commits the metadata updates `build` makes of the current metadata (built again after a
  // lost race); returns false when it made none (nothing committed).
  Result<bool> CommitUpdates(const UpdatesBuilder& build, int64_t now_ms);

  // The newest value of summary `key` walking back from the current snapshot through its
  // parents; nullopt when no snapshot has it.
  std::optional<std::string> NewestSummary(const std::string& key) const;

  // Every manifest of the current snapshot and their entries (for `sluice table files`).
  Result<std::vector<std::pair<ManifestFile, std::vector<ManifestEntry>>>> CurrentManifests() const;

 private:
  Table(std::shared_ptr<const MetadataStore> store, TableFiles files, MetadataStore::Version v)
      : store_(std::move(store)),
        files_(std::move(files)),
        metadata_(std::move(v.metadata)),
        metadata_location_(std::move(v.location)),
        version_(v.version) {}
  // Commits `updates` on the current metadata; keeps the new one when it lands.
  Status CommitOnce(const std::vector<TableUpdate>& updates, int64_t now_ms);

  std::shared_ptr<const MetadataStore> store_;
  TableFiles files_;
  TableMetadata metadata_;
  std::string metadata_location_;
  int64_t version_ = 0;
};

// The newest value of summary `key` from the current snapshot back through its parents.
std::optional<std::string> NewestSummary(const TableMetadata& metadata, const std::string& key);
// The newest value of every summary key starting with `prefix`, the same way.
std::map<std::string, std::string> NewestSummaries(const TableMetadata& metadata,
                                                   std::string_view prefix);

// The manifest list of `snapshot` (errors name the file).
Result<std::vector<ManifestFile>> ReadManifestsOf(const Snapshot& snapshot);
// The entries of manifest `m`, with inherited ids and sequence numbers (errors name the file).
Result<std::vector<ManifestEntry>> ReadEntriesOf(const ManifestFile& m);

// The manifest context (schema JSON, spec, partition tuple's Avro fields) of the table's
// current schema and default spec.
Result<ManifestContext> ContextOf(const TableMetadata& metadata);

}  // namespace sluice::lake
