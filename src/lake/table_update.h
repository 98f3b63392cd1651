// REST catalog commits (Iceberg REST OpenAPI: CommitTableRequest, TableRequirement,
// TableUpdate): the wire form of requirements and updates, and their semantics over
// TableMetadata as Java's TableMetadata.Builder applies them.
//
//   ASSIGN_OR_RETURN(CommitRequest req, CommitRequestFromJson(body));          // 400 if bad
//   auto next = CommitTable(&current, current_location, req, clock.NowMs());
//   if (IsCommitConflict(next.status())) ... 409 CommitFailedException
//   else if (!next.ok()) ... 400 BadRequest
//
// Error kinds: a requirement that does not hold (and an add-snapshot whose sequence number
// is no longer above the table's) is kFailedPrecondition, the REST layer's 409: the client
// should refresh and retry. A malformed request or an update that cannot apply is
// kInvalidArgument (400); an update kind this code does not support is kUnimplemented.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.h"
#include "lake/iceberg_json.h"
#include "lake/table_metadata.h"

namespace sluice::lake {

enum class RequirementKind {
  kAssertCreate,
  kAssertTableUuid,
  kAssertRefSnapshotId,
  kAssertLastAssignedFieldId,
  kAssertCurrentSchemaId,
  kAssertLastAssignedPartitionId,
  kAssertDefaultSpecId,
  kAssertDefaultSortOrderId,
};

struct TableRequirement {
  RequirementKind kind = RequirementKind::kAssertCreate;
  std::string uuid;                    // assert-table-uuid
  std::string ref;                     // assert-ref-snapshot-id
  std::optional<int64_t> snapshot_id;  // assert-ref-snapshot-id; none = the ref must not exist
  int32_t id = 0;                      // the int of every other assert-*

  bool operator==(const TableRequirement& other) const = default;
};

// The updates (TableUpdate "action"s). Ids of -1 mean "the one added earlier in this commit".
struct AssignUuidUpdate {
  std::string uuid;
};
struct UpgradeFormatVersionUpdate {
  int format_version = 2;
};
struct AddSchemaUpdate {
  Schema schema;
  std::optional<int32_t> last_column_id;
};
struct SetCurrentSchemaUpdate {
  int32_t schema_id = -1;
};
struct AddSpecUpdate {
  PartitionSpec spec;
};  // field ids of -1 are assigned
struct SetDefaultSpecUpdate {
  int32_t spec_id = -1;
};
struct AddSortOrderUpdate {
  SortOrder sort_order;
};
struct SetDefaultSortOrderUpdate {
  int32_t sort_order_id = -1;
};
struct AddSnapshotUpdate {
  Snapshot snapshot;
};
struct SetSnapshotRefUpdate {
  std::string ref_name;
  SnapshotRef ref;
};
struct RemoveSnapshotsUpdate {
  std::vector<int64_t> snapshot_ids;
};
struct RemoveSnapshotRefUpdate {
  std::string ref_name;
};
struct SetLocationUpdate {
  std::string location;
};
struct SetPropertiesUpdate {
  std::map<std::string, std::string> updates;
};
struct RemovePropertiesUpdate {
  std::vector<std::string> removals;
};

using TableUpdate =
    std::variant<AssignUuidUpdate, UpgradeFormatVersionUpdate, AddSchemaUpdate,
                 SetCurrentSchemaUpdate, AddSpecUpdate, SetDefaultSpecUpdate, AddSortOrderUpdate,
                 SetDefaultSortOrderUpdate, AddSnapshotUpdate, SetSnapshotRefUpdate,
                 RemoveSnapshotsUpdate, RemoveSnapshotRefUpdate, SetLocationUpdate,
                 SetPropertiesUpdate, RemovePropertiesUpdate>;

// The body of POST .../tables/{table} (and of a create transaction's commit).
struct CommitRequest {
  Json identifier;  // {"namespace": [...], "name": ...} when given; not interpreted here
  std::vector<TableRequirement> requirements;
  std::vector<TableUpdate> updates;
};

// Wire form. Parse errors name the JSON path ("$.updates[2].schema.fields[0].type").
Result<TableRequirement> TableRequirementFromJson(const Json& json, std::string_view path);
Json TableRequirementToJson(const TableRequirement& requirement);
Result<TableUpdate> TableUpdateFromJson(const Json& json, std::string_view path);
Json TableUpdateToJson(const TableUpdate& update);
std::string_view TableUpdateAction(const TableUpdate& update);  // "add-schema", ...
Result<CommitRequest> CommitRequestFromJson(std::string_view text);
Result<CommitRequest> CommitRequestFromJson(const Json& json);
inline Result<CommitRequest> CommitRequestFromJson(const std::string& text) {
  return CommitRequestFromJson(std::string_view(text));
}
inline Result<CommitRequest> CommitRequestFromJson(const char* text) {
  return CommitRequestFromJson(std::string_view(text));
}
Json CommitRequestToJson(const CommitRequest& request);

// OK when `requirement` holds for `base` (nullptr: the table does not exist yet); else a
// kFailedPrecondition status that says what differed. Every requirement other than
// assert-create fails when there is no table.
Status CheckRequirement(const TableRequirement& requirement, const TableMetadata* base);

// The metadata a create transaction starts from before its updates: no schemas, specs or
// sort orders, last-column-id 0, last-partition-id 999, format v2 unless upgraded.
TableMetadata EmptyTableMetadata();

// Applies `updates` in order to `base` (EmptyTableMetadata() for a create) and returns the
// new metadata, validated. `base_metadata_location` is the metadata file `base` was read
// from ("" for a create): it is appended to metadata-log with base's last-updated-ms, and
// the log trimmed to write.metadata.previous-versions-max. last-updated-ms becomes the
// added snapshot's timestamp when the commit adds one (Java's rule), else `now_ms`.
Result<TableMetadata> ApplyUpdates(const TableMetadata& base,
                                   std::string_view base_metadata_location,
                                   const std::vector<TableUpdate>& updates, int64_t now_ms);

// CheckRequirement for every requirement, then ApplyUpdates (from EmptyTableMetadata()
// when `base` is nullptr).
Result<TableMetadata> CommitTable(const TableMetadata* base,
                                  std::string_view base_metadata_location,
                                  const CommitRequest& request, int64_t now_ms);

// Whether `status` is a commit conflict (the REST layer's 409 CommitFailedException).
inline bool IsCommitConflict(const Status& status) {
  return status.code() == StatusCode::kFailedPrecondition;
}

}  // namespace sluice::lake
