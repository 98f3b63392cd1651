// A file-system Iceberg table (docs/design/0009): loaded from its directory, created with
// a schema and partition spec, appended to in snapshots committed by exclusive create
// with optimistic retries, and searched for what a snapshot summary recorded (the Kafka
// offsets a pipeline's rows came from).
//
//   ASSIGN_OR_RETURN(Table t, Table::Load("/warehouse/db/events"));
//   ASSIGN_OR_RETURN(int64_t id, t.Append(files, [&](const TableMetadata& base) { return extra; }));
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "lake/manifest.h"
#include "lake/table_files.h"
#include "lake/table_metadata.h"

namespace sluice::lake {

// Summary keys a commit adds beside Iceberg's own, computed against the metadata the
// attempt commits on (an attempt that lost a race is computed again).
using SummaryFn = std::function<Result<std::map<std::string, std::string>>(const TableMetadata& base)>;

class Table {
 public:
  // NotFound when the directory holds no table.
  static Result<Table> Load(const std::string& root);
  // A new table with fresh field ids (NewTable); when another writer created it first,
  // that table, loaded.
  static Result<Table> Create(const std::string& root, const Schema& schema, const PartitionSpec& spec,
                              const std::map<std::string, std::string>& properties);

  const TableMetadata& metadata() const { return metadata_; }
  int64_t version() const { return version_; }
  const TableFiles& files() const { return files_; }
  // The metadata file as a location (file://.../v<N>.metadata.json).
  std::string metadata_location() const;

  // Re-reads the current version.
  Status Refresh();

  // Appends `data` in one snapshot (operation append); returns its id. Lost races are
  // retried on the new current metadata, up to a limit. With more than a few manifests in
  // the current snapshot they are merged into one with the new files (existing entries).
  Result<int64_t> Append(const std::vector<DataFile>& data, const SummaryFn& summary);

  // The newest value of summary `key` walking back from the current snapshot through its
  // parents; nullopt when no snapshot has it.
  std::optional<std::string> NewestSummary(const std::string& key) const;

  // Every manifest of the current snapshot and their entries (for `sluice table files`).
  Result<std::vector<std::pair<ManifestFile, std::vector<ManifestEntry>>>> CurrentManifests() const;

 private:
  Table(TableFiles files, TableMetadata metadata, int64_t version)
      : files_(std::move(files)), metadata_(std::move(metadata)), version_(version) {}
  Result<std::vector<ManifestFile>> ManifestsOf(const Snapshot& snapshot) const;

  TableFiles files_;
  TableMetadata metadata_;
  int64_t version_ = 0;
};

// The newest value of summary `key` from the current snapshot back through its parents.
std::optional<std::string> NewestSummary(const TableMetadata& metadata, const std::string& key);

// The manifest context (schema JSON, spec, partition tuple's Avro fields) of the table's
// current schema and default spec.
Result<ManifestContext> ContextOf(const TableMetadata& metadata);

}  // namespace sluice::lake
