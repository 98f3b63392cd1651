// Iceberg manifests and manifest lists (format v2): the Avro files that list a
// snapshot's data files. Written with Iceberg's field ids on every field and the file
// metadata keys readers look for (`schema`, `partition-spec`, `format-version`, ...);
// read back strictly (a missing or mistyped field is an error naming it).
//
//   ManifestContext ctx{schema_json, 0, "[]", 0, "[]"};
//   ASSIGN_OR_RETURN(std::string bytes, WriteManifest(ctx, entries));
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lake/avro_datum.h"
#include "lake/iceberg_schema.h"

namespace sluice::lake {

// data_file (field 2 of a manifest entry).
struct DataFile {
  int32_t content = 0;  // 0 data, 1 position deletes, 2 equality deletes
  std::string file_path;
  std::string file_format = "PARQUET";
  // The partition tuple: a record with one field per partition field, by the names of
  // the spec's fields (an empty record for an unpartitioned table).
  avro::Datum partition = avro::Datum::Record({});
  int64_t record_count = 0;
  int64_t file_size_in_bytes = 0;
  std::map<int32_t, int64_t> column_sizes;
  std::map<int32_t, int64_t> value_counts;
  std::map<int32_t, int64_t> null_value_counts;
  std::map<int32_t, int64_t> nan_value_counts;
  // Single-value serialized bounds (the spec's Appendix D), by field id.
  std::map<int32_t, std::string> lower_bounds;
  std::map<int32_t, std::string> upper_bounds;
  std::vector<int64_t> split_offsets;
  // Equality delete files (content 2): the field ids whose values identify deleted rows.
  std::vector<int32_t> equality_ids;
  std::optional<int32_t> sort_order_id;
};

enum class EntryStatus : int32_t { kExisting = 0, kAdded = 1, kDeleted = 2 };

// manifest_entry. Added entries of a new manifest leave the snapshot id and sequence
// numbers unset: readers inherit them from the manifest list (the commit's).
struct ManifestEntry {
  EntryStatus status = EntryStatus::kAdded;
  std::optional<int64_t> snapshot_id;
  std::optional<int64_t> sequence_number;
  std::optional<int64_t> file_sequence_number;
  DataFile file;
};

// What a manifest's Avro schema and metadata need from the table.
struct ManifestContext {
  std::string schema_json;  // the table schema (Iceberg JSON), metadata key "schema"
  int32_t schema_id = 0;
  std::string spec_fields_json = "[]";  // the partition spec's fields (JSON array)
  int32_t spec_id = 0;
  // The partition tuple's Avro fields (JSON array of {"name", "type", "field-id"}), in the
  // spec's order; "[]" when unpartitioned.
  std::string partition_avro_fields = "[]";
};

// field_summary of a manifest list entry: per partition field, over the manifest.
struct FieldSummary {
  bool contains_null = false;
  std::optional<bool> contains_nan;
  std::optional<std::string> lower_bound;  // single-value serialized
  std::optional<std::string> upper_bound;
};

// manifest_file: one manifest as the manifest list records it.
struct ManifestFile {
  std::string manifest_path;
  int64_t manifest_length = 0;
  int32_t partition_spec_id = 0;
  int32_t content = 0;  // 0 data, 1 deletes
  int64_t sequence_number = 0;
  int64_t min_sequence_number = 0;
  int64_t added_snapshot_id = 0;
  int32_t added_files_count = 0;
  int32_t existing_files_count = 0;
  int32_t deleted_files_count = 0;
  int64_t added_rows_count = 0;
  int64_t existing_rows_count = 0;
  int64_t deleted_rows_count = 0;
  std::vector<FieldSummary> partitions;
};

// The manifest list's field summaries of `entries`' partition tuples (a struct type: the
// spec's partition type): per field, whether a null or NaN occurs and the lower and upper
// bounds (Appendix D), as Java's engines need them to prune manifests.
Result<std::vector<FieldSummary>> SummarizePartitions(const Type& tuple,
                                                      const std::vector<ManifestEntry>& entries);

// The whole manifest file.
Result<std::string> WriteManifest(const ManifestContext& context,
                                  const std::vector<ManifestEntry>& entries);

// A manifest's entries; `inherit` (the manifest's list entry) fills the snapshot id and
// sequence numbers an entry left unset, as the spec's inheritance rules say.
Result<std::vector<ManifestEntry>> ReadManifest(std::string_view bytes,
                                                const ManifestFile* inherit = nullptr);

// The manifest list of snapshot `snapshot_id`.
Result<std::string> WriteManifestList(int64_t snapshot_id,
                                      std::optional<int64_t> parent_snapshot_id,
                                      int64_t sequence_number,
                                      const std::vector<ManifestFile>& manifests);
Result<std::vector<ManifestFile>> ReadManifestList(std::string_view bytes);

}  // namespace sluice::lake
