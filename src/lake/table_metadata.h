// Iceberg table metadata (table spec "Table Metadata", Appendix C): the metadata.json a
// catalog points at. Format v2 is read and written; v1 is read with the spec's conversions
// (Appendix E) and written back as v1; v3 and later are rejected.
//
//   ASSIGN_OR_RETURN(TableMetadata m, TableMetadataFromJson(text));   // parse + Validate()
//   std::string out = TableMetadataToString(m);
//   ASSIGN_OR_RETURN(TableMetadata t, NewTable({.location = "s3://b/t", .schema = s, ...}));
//
// Parsing is strict: a missing required field or a wrong JSON type is an error naming its
// JSON path; unknown fields are ignored (as Java does). A value type: copied to change it
// (table_update.h applies REST commits).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lake/iceberg_json.h"
#include "lake/iceberg_schema.h"
#include "lake/transforms.h"

namespace sluice::lake {

inline constexpr int kMaxSupportedFormatVersion = 2;
inline constexpr int32_t kPartitionDataIdStart = 1000;  // first partition field id
inline constexpr int32_t kUnsortedOrderId = 0;
inline constexpr std::string_view kMainBranch = "main";
// Table property bounding metadata-log (Java's name and default).
inline constexpr std::string_view kMetadataPreviousVersionsMax =
    "write.metadata.previous-versions-max";
inline constexpr int kMetadataPreviousVersionsMaxDefault = 100;

struct PartitionField {
  int32_t source_id = 0;
  int32_t field_id = 0;
  std::string name;
  Transform transform;
  bool operator==(const PartitionField& other) const = default;
};

struct PartitionSpec {
  int32_t spec_id = 0;
  std::vector<PartitionField> fields;

  bool is_unpartitioned() const { return fields.empty(); }
  // The highest field id, or kPartitionDataIdStart - 1 when there is none (Java's rule).
  int32_t LastAssignedFieldId() const;
  // Same fields (source, transform, name, and ids); the spec id is ignored.
  bool SameFields(const PartitionSpec& other) const { return fields == other.fields; }
  // The partition tuple's struct type over `schema` (field ids = partition field ids).
  Result<Type> PartitionType(const Schema& schema) const;
  bool operator==(const PartitionSpec& other) const = default;
};

enum class SortDirection { kAsc, kDesc };
enum class NullOrder { kNullsFirst, kNullsLast };

struct SortField {
  Transform transform;
  int32_t source_id = 0;
  SortDirection direction = SortDirection::kAsc;
  NullOrder null_order = NullOrder::kNullsFirst;
  bool operator==(const SortField& other) const = default;
};

struct SortOrder {
  int32_t order_id = kUnsortedOrderId;
  std::vector<SortField> fields;
  bool is_unsorted() const { return fields.empty(); }
  bool operator==(const SortOrder& other) const = default;
};

struct Snapshot {
  int64_t snapshot_id = 0;
  std::optional<int64_t> parent_snapshot_id;
  int64_t sequence_number = 0;  // v1: absent, read as 0
  int64_t timestamp_ms = 0;
  std::string manifest_list;
  std::string operation;  // summary["operation"]: append, replace, overwrite or delete
  std::map<std::string, std::string> summary;  // the other summary entries
  std::optional<int32_t> schema_id;
  bool operator==(const Snapshot& other) const = default;
};

enum class RefType { kBranch, kTag };

struct SnapshotRef {
  int64_t snapshot_id = 0;
  RefType type = RefType::kBranch;
  std::optional<int32_t> min_snapshots_to_keep;  // branches only
  std::optional<int64_t> max_snapshot_age_ms;    // branches only
  std::optional<int64_t> max_ref_age_ms;
  bool operator==(const SnapshotRef& other) const = default;
};

struct SnapshotLogEntry {
  int64_t timestamp_ms = 0;
  int64_t snapshot_id = 0;
  bool operator==(const SnapshotLogEntry& other) const = default;
};

struct MetadataLogEntry {
  int64_t timestamp_ms = 0;
  std::string metadata_file;
  bool operator==(const MetadataLogEntry& other) const = default;
};

struct TableMetadata {
  int format_version = 2;
  std::string table_uuid;  // may be empty only in v1
  std::string location;
  int64_t last_sequence_number = 0;
  int64_t last_updated_ms = 0;
  int32_t last_column_id = 0;
  std::vector<Schema> schemas;
  int32_t current_schema_id = 0;
  std::vector<PartitionSpec> partition_specs;
  int32_t default_spec_id = 0;
  int32_t last_partition_id = kPartitionDataIdStart - 1;
  std::map<std::string, std::string> properties;
  std::optional<int64_t> current_snapshot_id;  // -1 and null in the JSON both mean none
  std::vector<Snapshot> snapshots;
  std::vector<SnapshotLogEntry> snapshot_log;
  std::vector<MetadataLogEntry> metadata_log;
  std::vector<SortOrder> sort_orders;
  int32_t default_sort_order_id = kUnsortedOrderId;
  std::map<std::string, SnapshotRef> refs;
  // Kept as JSON and written back unchanged: not interpreted here.
  Json statistics = Json::array();
  Json partition_statistics = Json::array();

  // Lookups; nullptr when absent.
  const Schema* FindSchema(int32_t id) const;
  const Schema* CurrentSchema() const { return FindSchema(current_schema_id); }
  const PartitionSpec* FindSpec(int32_t id) const;
  const PartitionSpec* DefaultSpec() const { return FindSpec(default_spec_id); }
  const SortOrder* FindSortOrder(int32_t id) const;
  const Snapshot* FindSnapshot(int64_t id) const;
  const Snapshot* CurrentSnapshot() const;
  const SnapshotRef* FindRef(std::string_view name) const;

  // The table-level rules: supported format version, schemas/specs/orders present with
  // unique ids and their defaults among them, last-column-id and last-partition-id not
  // below any assigned id, the default spec and sort order bound to the current schema,
  // current-snapshot-id and every ref naming a snapshot that exists, the main branch equal
  // to current-snapshot-id, snapshot sequence numbers not above last-sequence-number (v2).
  // A snapshot's parent may be missing: expiring snapshots removes parents.
  Status Validate() const;

  bool operator==(const TableMetadata& other) const = default;
};

// Parses metadata JSON (a metadata.json file's text) and validates it.
Result<TableMetadata> TableMetadataFromJson(std::string_view text);
Result<TableMetadata> TableMetadataFromJson(const Json& json);
// (A std::string would convert to both; it is text.)
inline Result<TableMetadata> TableMetadataFromJson(const std::string& text) {
  return TableMetadataFromJson(std::string_view(text));
}
inline Result<TableMetadata> TableMetadataFromJson(const char* text) {
  return TableMetadataFromJson(std::string_view(text));
}
// The JSON Java's TableMetadataParser writes for the same metadata (v2: no "schema" or
// "partition-spec"; current-snapshot-id -1 when there is none).
Json TableMetadataToJson(const TableMetadata& metadata);
std::string TableMetadataToString(const TableMetadata& metadata, bool pretty = true);

// The pieces of table metadata as they appear inside it and in REST requests.
Json PartitionSpecToJson(const PartitionSpec& spec);
// `require_field_ids`: v2 metadata requires "field-id"; REST add-spec and v1 may omit it
// (missing ids are returned as -1 for the caller to assign).
Result<PartitionSpec> PartitionSpecFromJson(const Json& json, std::string_view path,
                                            bool require_field_ids);
Json SortOrderToJson(const SortOrder& order);
Result<SortOrder> SortOrderFromJson(const Json& json, std::string_view path);
Json SnapshotToJson(const Snapshot& snapshot, int format_version);
Result<Snapshot> SnapshotFromJson(const Json& json, std::string_view path, int format_version);
Json SnapshotRefToJson(const SnapshotRef& ref);
Result<SnapshotRef> SnapshotRefFromJson(const Json& json, std::string_view path);

// Checks that every field of `spec` names a primitive source column of `schema` that its
// transform accepts, and that partition names are unique and do not shadow a column
// (except an identity partition of that same column).
Status ValidateSpecAgainstSchema(const PartitionSpec& spec, const Schema& schema);
Status ValidateSortOrderAgainstSchema(const SortOrder& order, const Schema& schema);

struct NewTableOptions {
  std::string location;
  Schema schema;
  PartitionSpec spec;    // source ids refer to `schema`'s ids
  SortOrder sort_order;  // likewise
  std::map<std::string, std::string> properties;
  int format_version = 2;
  std::string table_uuid;  // "" = a new random UUID
  int64_t now_ms = 0;      // last-updated-ms
};

// A new table's metadata as the REST catalog's create makes it: field ids reassigned from
// 1 (struct fields first, then nested), schema id 0, last-column-id the highest id;
// partition field ids from 1000 with spec id 0 and last-partition-id the highest (999 when
// unpartitioned); sort order id 1 when sorted, 0 when not; no snapshots.
Result<TableMetadata> NewTable(const NewTableOptions& options);

// A random (version 4) UUID in its lowercase text form.
std::string NewUuid();

std::string_view SortDirectionName(SortDirection d);
std::string_view NullOrderName(NullOrder n);
std::string_view RefTypeName(RefType t);

}  // namespace sluice::lake
