#include "lake/table_update.h"

#include <algorithm>
#include <set>

#include "base/strings.h"

namespace sluice::lake {

namespace {

struct RequirementName {
  RequirementKind kind;
  std::string_view name;
  std::string_view int_field;  // the requirement's int field, if any
};

constexpr RequirementName kRequirements[] = {
    {RequirementKind::kAssertCreate, "assert-create", ""},
    {RequirementKind::kAssertTableUuid, "assert-table-uuid", ""},
    {RequirementKind::kAssertRefSnapshotId, "assert-ref-snapshot-id", ""},
    {RequirementKind::kAssertLastAssignedFieldId, "assert-last-assigned-field-id",
     "last-assigned-field-id"},
    {RequirementKind::kAssertCurrentSchemaId, "assert-current-schema-id", "current-schema-id"},
    {RequirementKind::kAssertLastAssignedPartitionId, "assert-last-assigned-partition-id",
     "last-assigned-partition-id"},
    {RequirementKind::kAssertDefaultSpecId, "assert-default-spec-id", "default-spec-id"},
    {RequirementKind::kAssertDefaultSortOrderId, "assert-default-sort-order-id",
     "default-sort-order-id"},
};

const RequirementName& NameOf(RequirementKind kind) {
  for (const auto& r : kRequirements) {
    if (r.kind == kind) return r;
  }
  return kRequirements[0];
}

// Updates in the OpenAPI that this code rejects as unsupported (rather than unknown).
constexpr std::string_view kUnsupportedActions[] = {
    "set-statistics",           "remove-statistics",
    "set-partition-statistics", "remove-partition-statistics",
    "remove-partition-specs",   "remove-schemas",
    "add-encryption-key",       "remove-encryption-key",
    "add-view-version",         "set-current-view-version",
};

}  // namespace

// --- Wire form ---------------------------------------------------------------------------

Result<TableRequirement> TableRequirementFromJson(const Json& json, std::string_view path) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  ASSIGN_OR_RETURN(std::string type, obj.String("type"));
  for (const auto& r : kRequirements) {
    if (r.name != type) continue;
    TableRequirement req;
    req.kind = r.kind;
    if (r.kind == RequirementKind::kAssertTableUuid) {
      ASSIGN_OR_RETURN(req.uuid, obj.String("uuid"));
    } else if (r.kind == RequirementKind::kAssertRefSnapshotId) {
      ASSIGN_OR_RETURN(req.ref, obj.String("ref"));
      ASSIGN_OR_RETURN(req.snapshot_id, obj.OptLong("snapshot-id"));  // null: must not exist
    } else if (!r.int_field.empty()) {
      ASSIGN_OR_RETURN(req.id, obj.Int(r.int_field));
    }
    return req;
  }
  return InvalidArgumentError("{}: unknown requirement type \"{}\"", obj.PathOf("type"), type);
}

Json TableRequirementToJson(const TableRequirement& req) {
  const RequirementName& r = NameOf(req.kind);
  Json j = Json::object();
  j["type"] = r.name;
  if (req.kind == RequirementKind::kAssertTableUuid) j["uuid"] = req.uuid;
  if (req.kind == RequirementKind::kAssertRefSnapshotId) {
    j["ref"] = req.ref;
    j["snapshot-id"] = req.snapshot_id ? Json(*req.snapshot_id) : Json(nullptr);
  }
  if (!r.int_field.empty()) j[std::string(r.int_field)] = req.id;
  return j;
}

std::string_view TableUpdateAction(const TableUpdate& update) {
  struct Visitor {
    std::string_view operator()(const AssignUuidUpdate&) const { return "assign-uuid"; }
    std::string_view operator()(const UpgradeFormatVersionUpdate&) const {
      return "upgrade-format-version";
    }
    std::string_view operator()(const AddSchemaUpdate&) const { return "add-schema"; }
    std::string_view operator()(const SetCurrentSchemaUpdate&) const {
      return "set-current-schema";
    }
    std::string_view operator()(const AddSpecUpdate&) const { return "add-spec"; }
    std::string_view operator()(const SetDefaultSpecUpdate&) const { return "set-default-spec"; }
    std::string_view operator()(const AddSortOrderUpdate&) const { return "add-sort-order"; }
    std::string_view operator()(const SetDefaultSortOrderUpdate&) const {
      return "set-default-sort-order";
    }
    std::string_view operator()(const AddSnapshotUpdate&) const { return "add-snapshot"; }
    std::string_view operator()(const SetSnapshotRefUpdate&) const { return "set-snapshot-ref"; }
    std::string_view operator()(const RemoveSnapshotsUpdate&) const { return "remove-snapshots"; }
    std::string_view operator()(const RemoveSnapshotRefUpdate&) const {
      return "remove-snapshot-ref";
    }
    std::string_view operator()(const SetLocationUpdate&) const { return "set-location"; }
    std::string_view operator()(const SetPropertiesUpdate&) const { return "set-properties"; }
    std::string_view operator()(const RemovePropertiesUpdate&) const { return "remove-properties"; }
  };
  return std::visit(Visitor{}, update);
}

Result<TableUpdate> TableUpdateFromJson(const Json& json, std::string_view path) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  ASSIGN_OR_RETURN(std::string action, obj.String("action"));
  if (action == "assign-uuid") {
    AssignUuidUpdate u;
    ASSIGN_OR_RETURN(u.uuid, obj.String("uuid"));
    return TableUpdate(u);
  }
  if (action == "upgrade-format-version") {
    UpgradeFormatVersionUpdate u;
    ASSIGN_OR_RETURN(u.format_version, obj.Int("format-version"));
    return TableUpdate(u);
  }
  if (action == "add-schema") {
    AddSchemaUpdate u;
    ASSIGN_OR_RETURN(const Json* schema, obj.Require("schema"));
    ASSIGN_OR_RETURN(u.schema, SchemaFromJson(*schema, obj.PathOf("schema"), false));
    ASSIGN_OR_RETURN(u.last_column_id, obj.OptInt("last-column-id"));
    return TableUpdate(std::move(u));
  }
  if (action == "set-current-schema") {
    SetCurrentSchemaUpdate u;
    ASSIGN_OR_RETURN(u.schema_id, obj.Int("schema-id"));
    return TableUpdate(u);
  }
  if (action == "add-spec") {
    ASSIGN_OR_RETURN(const Json* spec, obj.Require("spec"));
    Json copy = *spec;
    if (copy.is_object() && !copy.contains("spec-id")) copy["spec-id"] = -1;  // readOnly in the API
    AddSpecUpdate u;
    ASSIGN_OR_RETURN(u.spec, PartitionSpecFromJson(copy, obj.PathOf("spec"), false));
    return TableUpdate(std::move(u));
  }
  if (action == "set-default-spec") {
    SetDefaultSpecUpdate u;
    ASSIGN_OR_RETURN(u.spec_id, obj.Int("spec-id"));
    return TableUpdate(u);
  }
  if (action == "add-sort-order") {
    ASSIGN_OR_RETURN(const Json* order, obj.Require("sort-order"));
    Json copy = *order;
    if (copy.is_object() && !copy.contains("order-id")) copy["order-id"] = -1;  // reassigned
    AddSortOrderUpdate u;
    ASSIGN_OR_RETURN(u.sort_order, SortOrderFromJson(copy, obj.PathOf("sort-order")));
    return TableUpdate(std::move(u));
  }
  if (action == "set-default-sort-order") {
    SetDefaultSortOrderUpdate u;
    ASSIGN_OR_RETURN(u.sort_order_id, obj.Int("sort-order-id"));
    return TableUpdate(u);
  }
  if (action == "add-snapshot") {
    ASSIGN_OR_RETURN(const Json* snapshot, obj.Require("snapshot"));
    AddSnapshotUpdate u;
    // The API's Snapshot has an optional sequence-number (v1 tables); read it as v1 does
    // and require the summary the API requires.
    ASSIGN_OR_RETURN(u.snapshot, SnapshotFromJson(*snapshot, obj.PathOf("snapshot"), 1));
    if (u.snapshot.operation.empty()) {
      return InvalidArgumentError("{}: missing required field \"summary\"", obj.PathOf("snapshot"));
    }
    return TableUpdate(std::move(u));
  }
  if (action == "set-snapshot-ref") {
    SetSnapshotRefUpdate u;
    ASSIGN_OR_RETURN(u.ref_name, obj.String("ref-name"));
    ASSIGN_OR_RETURN(u.ref, SnapshotRefFromJson(json, path));
    return TableUpdate(std::move(u));
  }
  if (action == "remove-snapshots") {
    RemoveSnapshotsUpdate u;
    ASSIGN_OR_RETURN(const Json* ids, obj.Array("snapshot-ids"));
    for (size_t i = 0; i < ids->size(); ++i) {
      ASSIGN_OR_RETURN(int64_t id, JsonToLong((*ids)[i], JsonPath(obj.PathOf("snapshot-ids"), i)));
      u.snapshot_ids.push_back(id);
    }
    return TableUpdate(std::move(u));
  }
  if (action == "remove-snapshot-ref") {
    RemoveSnapshotRefUpdate u;
    ASSIGN_OR_RETURN(u.ref_name, obj.String("ref-name"));
    return TableUpdate(std::move(u));
  }
  if (action == "set-location") {
    SetLocationUpdate u;
    ASSIGN_OR_RETURN(u.location, obj.String("location"));
    return TableUpdate(std::move(u));
  }
  if (action == "set-properties") {
    SetPropertiesUpdate u;
    RETURN_IF_ERROR(obj.Require("updates").status());
    ASSIGN_OR_RETURN(u.updates, obj.OptStringMap("updates"));
    return TableUpdate(std::move(u));
  }
  if (action == "remove-properties") {
    RemovePropertiesUpdate u;
    ASSIGN_OR_RETURN(const Json* removals, obj.Array("removals"));
    for (size_t i = 0; i < removals->size(); ++i) {
      ASSIGN_OR_RETURN(std::string key,
                       JsonToString((*removals)[i], JsonPath(obj.PathOf("removals"), i)));
      u.removals.push_back(std::move(key));
    }
    return TableUpdate(std::move(u));
  }
  for (std::string_view unsupported : kUnsupportedActions) {
    if (action == unsupported) {
      return UnimplementedError("{}: update \"{}\" is not supported by sluice's catalog",
                                obj.PathOf("action"), action);
    }
  }
  return InvalidArgumentError("{}: unknown update action \"{}\"", obj.PathOf("action"), action);
}

Json TableUpdateToJson(const TableUpdate& update) {
  Json j = Json::object();
  j["action"] = TableUpdateAction(update);
  std::visit(
      [&](const auto& u) {
        using T = std::decay_t<decltype(u)>;
        if constexpr (std::is_same_v<T, AssignUuidUpdate>) {
          j["uuid"] = u.uuid;
        } else if constexpr (std::is_same_v<T, UpgradeFormatVersionUpdate>) {
          j["format-version"] = u.format_version;
        } else if constexpr (std::is_same_v<T, AddSchemaUpdate>) {
          j["schema"] = SchemaToJson(u.schema);
          if (u.last_column_id) j["last-column-id"] = *u.last_column_id;
        } else if constexpr (std::is_same_v<T, SetCurrentSchemaUpdate>) {
          j["schema-id"] = u.schema_id;
        } else if constexpr (std::is_same_v<T, AddSpecUpdate>) {
          j["spec"] = PartitionSpecToJson(u.spec);
        } else if constexpr (std::is_same_v<T, SetDefaultSpecUpdate>) {
          j["spec-id"] = u.spec_id;
        } else if constexpr (std::is_same_v<T, AddSortOrderUpdate>) {
          j["sort-order"] = SortOrderToJson(u.sort_order);
        } else if constexpr (std::is_same_v<T, SetDefaultSortOrderUpdate>) {
          j["sort-order-id"] = u.sort_order_id;
        } else if constexpr (std::is_same_v<T, AddSnapshotUpdate>) {
          j["snapshot"] = SnapshotToJson(u.snapshot, 2);
        } else if constexpr (std::is_same_v<T, SetSnapshotRefUpdate>) {
          j["ref-name"] = u.ref_name;
          Json ref = SnapshotRefToJson(u.ref);  // items() must not outlive it
          for (auto it = ref.begin(); it != ref.end(); ++it) j[it.key()] = it.value();
        } else if constexpr (std::is_same_v<T, RemoveSnapshotsUpdate>) {
          j["snapshot-ids"] = u.snapshot_ids;
        } else if constexpr (std::is_same_v<T, RemoveSnapshotRefUpdate>) {
          j["ref-name"] = u.ref_name;
        } else if constexpr (std::is_same_v<T, SetLocationUpdate>) {
          j["location"] = u.location;
        } else if constexpr (std::is_same_v<T, SetPropertiesUpdate>) {
          Json m = Json::object();
          for (const auto& [k, v] : u.updates) m[k] = v;
          j["updates"] = std::move(m);
        } else if constexpr (std::is_same_v<T, RemovePropertiesUpdate>) {
          j["removals"] = u.removals;
        }
      },
      update);
  return j;
}

Result<CommitRequest> CommitRequestFromJson(const Json& json) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, "$"));
  CommitRequest req;
  if (const Json* id = obj.Get("identifier")) req.identifier = *id;
  ASSIGN_OR_RETURN(const Json* requirements, obj.Array("requirements"));
  for (size_t i = 0; i < requirements->size(); ++i) {
    ASSIGN_OR_RETURN(
        TableRequirement r,
        TableRequirementFromJson((*requirements)[i], JsonPath(obj.PathOf("requirements"), i)));
    req.requirements.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(const Json* updates, obj.Array("updates"));
  for (size_t i = 0; i < updates->size(); ++i) {
    ASSIGN_OR_RETURN(TableUpdate u,
                     TableUpdateFromJson((*updates)[i], JsonPath(obj.PathOf("updates"), i)));
    req.updates.push_back(std::move(u));
  }
  return req;
}

Result<CommitRequest> CommitRequestFromJson(std::string_view text) {
  ASSIGN_OR_RETURN(Json json, ParseJson(text, "commit request"));
  return CommitRequestFromJson(json);
}

Json CommitRequestToJson(const CommitRequest& request) {
  Json j = Json::object();
  if (!request.identifier.is_null()) j["identifier"] = request.identifier;
  Json reqs = Json::array();
  for (const auto& r : request.requirements) reqs.push_back(TableRequirementToJson(r));
  j["requirements"] = std::move(reqs);
  Json ups = Json::array();
  for (const auto& u : request.updates) ups.push_back(TableUpdateToJson(u));
  j["updates"] = std::move(ups);
  return j;
}

// --- Requirements --------------------------------------------------------------------------

Status CheckRequirement(const TableRequirement& req, const TableMetadata* base) {
  const RequirementName& r = NameOf(req.kind);
  if (req.kind == RequirementKind::kAssertCreate) {
    if (base != nullptr) return FailedPreconditionError("Requirement failed: table already exists");
    return Status::OK();
  }
  if (base == nullptr) {
    return FailedPreconditionError("Requirement failed ({}): the table does not exist", r.name);
  }
  auto check_int = [&](std::string_view what, int32_t actual) -> Status {
    if (actual == req.id) return Status::OK();
    return FailedPreconditionError("Requirement failed: {} changed: expected id {} != {}", what,
                                   req.id, actual);
  };
  switch (req.kind) {
    case RequirementKind::kAssertTableUuid: {
      if (!EqualsIgnoreCase(req.uuid, base->table_uuid)) {
        return FailedPreconditionError("Requirement failed: UUID does not match: expected {} != {}",
                                       base->table_uuid, req.uuid);
      }
      return Status::OK();
    }
    case RequirementKind::kAssertRefSnapshotId: {
      const SnapshotRef* ref = base->FindRef(req.ref);
      if (!req.snapshot_id) {
        if (ref != nullptr) {
          return FailedPreconditionError("Requirement failed: {} {} was created concurrently",
                                         RefTypeName(ref->type), req.ref);
        }
        return Status::OK();
      }
      if (ref == nullptr) {
        return FailedPreconditionError(
            "Requirement failed: branch or tag {} is missing, expected {}", req.ref,
            *req.snapshot_id);
      }
      if (ref->snapshot_id != *req.snapshot_id) {
        return FailedPreconditionError(
            "Requirement failed: {} {} has changed: expected id {} != {}", RefTypeName(ref->type),
            req.ref, *req.snapshot_id, ref->snapshot_id);
      }
      return Status::OK();
    }
    case RequirementKind::kAssertLastAssignedFieldId:
      return check_int("last assigned field id", base->last_column_id);
    case RequirementKind::kAssertCurrentSchemaId:
      return check_int("current schema id", base->current_schema_id);
    case RequirementKind::kAssertLastAssignedPartitionId:
      return check_int("last assigned partition id", base->last_partition_id);
    case RequirementKind::kAssertDefaultSpecId:
      return check_int("default partition spec id", base->default_spec_id);
    case RequirementKind::kAssertDefaultSortOrderId:
      return check_int("default sort order id", base->default_sort_order_id);
    default:
      return Status::OK();
  }
}

// --- Applying updates -----------------------------------------------------------------------

TableMetadata EmptyTableMetadata() {
  TableMetadata m;
  m.format_version = 2;
  m.last_column_id = 0;
  m.current_schema_id = -1;
  m.default_spec_id = -1;
  m.last_partition_id = kPartitionDataIdStart - 1;
  m.default_sort_order_id = -1;
  return m;
}

namespace {

constexpr int64_t kOneMinuteMs = 60'000;

// One commit's worth of changes over a copy of the base metadata, as Java's
// TableMetadata.Builder tracks them.
class Builder {
 public:
  explicit Builder(const TableMetadata& base, int64_t now_ms) : m_(base), now_ms_(now_ms) {}

  Status Apply(const TableUpdate& update) {
    return std::visit([&](const auto& u) { return Do(u); }, update);
  }

  Result<TableMetadata> Build(const TableMetadata& base, std::string_view base_location) {
    if (!changed_) {
      RETURN_IF_ERROR(base.Validate().WithContext("the commit would produce invalid metadata"));
      return base;
    }
    FixSnapshotLog();
    m_.last_updated_ms = last_updated_ms_.value_or(now_ms_);
    if (!m_.snapshot_log.empty() &&
        m_.snapshot_log.back().timestamp_ms - m_.last_updated_ms > kOneMinuteMs) {
      return InvalidArgumentError(
          "invalid update timestamp {}: before the last snapshot log entry at {}",
          m_.last_updated_ms, m_.snapshot_log.back().timestamp_ms);
    }
    if (!base_location.empty()) {
      m_.metadata_log.push_back(MetadataLogEntry{base.last_updated_ms, std::string(base_location)});
      int keep = kMetadataPreviousVersionsMaxDefault;
      auto it = m_.properties.find(std::string(kMetadataPreviousVersionsMax));
      if (it != m_.properties.end()) {
        try {
          keep = std::stoi(it->second);
        } catch (const std::exception&) {
          return InvalidArgumentError("table property {}=\"{}\" is not an int",
                                      kMetadataPreviousVersionsMax, it->second);
        }
      }
      keep = std::max(1, keep);
      if (m_.metadata_log.size() > static_cast<size_t>(keep)) {
        m_.metadata_log.erase(m_.metadata_log.begin(), m_.metadata_log.end() - keep);
      }
    }
    RETURN_IF_ERROR(m_.Validate().WithContext("the commit would produce invalid metadata"));
    return std::move(m_);
  }

 private:
  Status Do(const AssignUuidUpdate& u) {
    RETURN_IF_ERROR(ParseUuid(u.uuid).status().WithContext("assign-uuid"));
    if (u.uuid == m_.table_uuid) return Status::OK();
    if (!m_.table_uuid.empty()) {
      return InvalidArgumentError(
          "assign-uuid: the table already has UUID {}; it cannot be reassigned", m_.table_uuid);
    }
    m_.table_uuid = u.uuid;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const UpgradeFormatVersionUpdate& u) {
    if (u.format_version > kMaxSupportedFormatVersion) {
      return UnimplementedError(
          "upgrade-format-version: format version {} is not supported (at most {})",
          u.format_version, kMaxSupportedFormatVersion);
    }
    if (u.format_version < m_.format_version) {
      return InvalidArgumentError("upgrade-format-version: cannot downgrade v{} table to v{}",
                                  m_.format_version, u.format_version);
    }
    if (u.format_version == m_.format_version) return Status::OK();
    m_.format_version = u.format_version;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const AddSchemaUpdate& u) {
    RETURN_IF_ERROR(u.schema.Validate().WithContext("add-schema"));
    int32_t last = std::max(m_.last_column_id, u.schema.HighestFieldId());
    if (u.last_column_id) {
      if (*u.last_column_id < m_.last_column_id) {
        return InvalidArgumentError(
            "add-schema: invalid last column id {} < {} (previous last column id)",
            *u.last_column_id, m_.last_column_id);
      }
      last = std::max(last, *u.last_column_id);
    }
    int32_t new_id = 0;
    for (const Schema& s : m_.schemas) {
      if (s.SameSchema(u.schema)) {
        last_added_schema_id_ = s.schema_id;
        if (last != m_.last_column_id) changed_ = true;
        m_.last_column_id = last;
        return Status::OK();
      }
      new_id = std::max(new_id, s.schema_id + 1);
    }
    Schema schema = u.schema;
    schema.schema_id = new_id;
    m_.schemas.push_back(std::move(schema));
    m_.last_column_id = last;
    last_added_schema_id_ = new_id;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const SetCurrentSchemaUpdate& u) {
    int32_t id = u.schema_id;
    if (id == -1) {
      if (!last_added_schema_id_) {
        return InvalidArgumentError("set-current-schema: -1 (last added) but no schema was added");
      }
      id = *last_added_schema_id_;
    }
    if (m_.FindSchema(id) == nullptr) {
      return InvalidArgumentError("set-current-schema: unknown schema id {}", id);
    }
    if (id == m_.current_schema_id) return Status::OK();
    m_.current_schema_id = id;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const AddSpecUpdate& u) {
    const Schema* schema = m_.CurrentSchema();
    if (schema == nullptr) return InvalidArgumentError("add-spec: the table has no current schema");
    PartitionSpec spec = u.spec;
    int32_t v1_next = kPartitionDataIdStart;
    for (PartitionField& f : spec.fields) {
      if (f.transform.kind() == TransformKind::kUnknown) {
        return InvalidArgumentError("add-spec: field \"{}\": unknown transform \"{}\"", f.name,
                                    f.transform.ToString());
      }
      if (f.field_id < 0) f.field_id = m_.format_version >= 2 ? ReusedOrNewPartitionId(f) : v1_next;
      v1_next = std::max(v1_next, f.field_id) + 1;
    }
    std::set<int32_t> ids;
    for (const PartitionField& f : spec.fields) {
      if (!ids.insert(f.field_id).second) {
        return InvalidArgumentError("add-spec: field id {} appears more than once", f.field_id);
      }
    }
    RETURN_IF_ERROR(ValidateSpecAgainstSchema(spec, *schema).WithContext("add-spec"));
    int32_t new_id = 0;
    for (const PartitionSpec& s : m_.partition_specs) {
      if (s.SameFields(spec)) {
        last_added_spec_id_ = s.spec_id;
        return Status::OK();
      }
      new_id = std::max(new_id, s.spec_id + 1);
    }
    spec.spec_id = new_id;
    m_.last_partition_id = std::max(m_.last_partition_id, spec.LastAssignedFieldId());
    m_.partition_specs.push_back(std::move(spec));
    last_added_spec_id_ = new_id;
    changed_ = true;
    return Status::OK();
  }

  // v2: an equivalent field (same source and transform) in an existing spec keeps its id.
  int32_t ReusedOrNewPartitionId(const PartitionField& f) {
    for (const PartitionSpec& s : m_.partition_specs) {
      for (const PartitionField& e : s.fields) {
        if (e.source_id == f.source_id && e.transform == f.transform) return e.field_id;
      }
    }
    return ++m_.last_partition_id;
  }

  Status Do(const SetDefaultSpecUpdate& u) {
    int32_t id = u.spec_id;
    if (id == -1) {
      if (!last_added_spec_id_)
        return InvalidArgumentError("set-default-spec: -1 (last added) but no spec was added");
      id = *last_added_spec_id_;
    }
    if (m_.FindSpec(id) == nullptr)
      return InvalidArgumentError("set-default-spec: unknown spec id {}", id);
    if (id == m_.default_spec_id) return Status::OK();
    m_.default_spec_id = id;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const AddSortOrderUpdate& u) {
    const Schema* schema = m_.CurrentSchema();
    if (schema == nullptr)
      return InvalidArgumentError("add-sort-order: the table has no current schema");
    SortOrder order = u.sort_order;
    for (const SortField& f : order.fields) {
      if (f.transform.kind() == TransformKind::kUnknown) {
        return InvalidArgumentError("add-sort-order: unknown transform \"{}\"",
                                    f.transform.ToString());
      }
    }
    RETURN_IF_ERROR(ValidateSortOrderAgainstSchema(order, *schema).WithContext("add-sort-order"));
    int32_t new_id = order.is_unsorted() ? kUnsortedOrderId : 1;
    for (const SortOrder& o : m_.sort_orders) {
      if (o.fields == order.fields) {
        last_added_order_id_ = o.order_id;
        return Status::OK();
      }
      if (!order.is_unsorted()) new_id = std::max(new_id, o.order_id + 1);
    }
    order.order_id = new_id;
    m_.sort_orders.push_back(std::move(order));
    last_added_order_id_ = new_id;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const SetDefaultSortOrderUpdate& u) {
    int32_t id = u.sort_order_id;
    if (id == -1) {
      if (!last_added_order_id_) {
        return InvalidArgumentError(
            "set-default-sort-order: -1 (last added) but no sort order was added");
      }
      id = *last_added_order_id_;
    }
    if (m_.FindSortOrder(id) == nullptr) {
      return InvalidArgumentError("set-default-sort-order: unknown sort order id {}", id);
    }
    if (id == m_.default_sort_order_id) return Status::OK();
    m_.default_sort_order_id = id;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const AddSnapshotUpdate& u) {
    const Snapshot& s = u.snapshot;
    if (m_.FindSnapshot(s.snapshot_id) != nullptr) {
      return InvalidArgumentError("add-snapshot: snapshot {} already exists", s.snapshot_id);
    }
    if (m_.format_version >= 2 && s.sequence_number <= m_.last_sequence_number) {
      return FailedPreconditionError(
          "add-snapshot: snapshot {} has sequence number {}, not above the table's last sequence "
          "number {} (another commit came first)",
          s.snapshot_id, s.sequence_number, m_.last_sequence_number);
    }
    if (s.parent_snapshot_id && m_.FindSnapshot(*s.parent_snapshot_id) == nullptr) {
      return InvalidArgumentError(
          "add-snapshot: snapshot {} has parent {}, which is not in the table", s.snapshot_id,
          *s.parent_snapshot_id);
    }
    if (s.schema_id && m_.FindSchema(*s.schema_id) == nullptr) {
      return InvalidArgumentError("add-snapshot: snapshot {} names unknown schema {}",
                                  s.snapshot_id, *s.schema_id);
    }
    if (s.manifest_list.empty()) {
      return InvalidArgumentError("add-snapshot: snapshot {} has no manifest-list", s.snapshot_id);
    }
    m_.snapshots.push_back(s);
    if (m_.format_version >= 2) m_.last_sequence_number = s.sequence_number;
    added_snapshot_ids_.insert(s.snapshot_id);
    last_updated_ms_ = s.timestamp_ms;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const SetSnapshotRefUpdate& u) {
    if (u.ref_name.empty()) return InvalidArgumentError("set-snapshot-ref: empty ref name");
    const Snapshot* s = m_.FindSnapshot(u.ref.snapshot_id);
    if (s == nullptr) {
      return InvalidArgumentError("set-snapshot-ref: cannot set {} to unknown snapshot {}",
                                  u.ref_name, u.ref.snapshot_id);
    }
    if (u.ref_name == kMainBranch && u.ref.type != RefType::kBranch) {
      return InvalidArgumentError("set-snapshot-ref: main must be a branch");
    }
    auto existing = m_.refs.find(u.ref_name);
    if (existing != m_.refs.end() && existing->second == u.ref) return Status::OK();
    m_.refs[u.ref_name] = u.ref;
    if (added_snapshot_ids_.count(s->snapshot_id) > 0) last_updated_ms_ = s->timestamp_ms;
    if (u.ref_name == kMainBranch) {
      m_.current_snapshot_id = s->snapshot_id;
      m_.snapshot_log.push_back(
          SnapshotLogEntry{last_updated_ms_.value_or(now_ms_), s->snapshot_id});
      if (added_snapshot_ids_.count(s->snapshot_id) > 0)
        main_set_to_added_.push_back(s->snapshot_id);
    }
    changed_ = true;
    return Status::OK();
  }

  Status Do(const RemoveSnapshotsUpdate& u) {
    std::set<int64_t> remove(u.snapshot_ids.begin(), u.snapshot_ids.end());
    size_t before = m_.snapshots.size();
    std::erase_if(m_.snapshots, [&](const Snapshot& s) { return remove.count(s.snapshot_id) > 0; });
    if (m_.snapshots.size() == before) return Status::OK();
    for (auto it = m_.refs.begin(); it != m_.refs.end();) {
      if (m_.FindSnapshot(it->second.snapshot_id) == nullptr) {
        if (it->first == kMainBranch) m_.current_snapshot_id.reset();
        it = m_.refs.erase(it);
      } else {
        ++it;
      }
    }
    changed_ = true;
    return Status::OK();
  }

  Status Do(const RemoveSnapshotRefUpdate& u) {
    auto it = m_.refs.find(u.ref_name);
    if (it == m_.refs.end()) return Status::OK();
    if (u.ref_name == kMainBranch) m_.current_snapshot_id.reset();
    m_.refs.erase(it);
    changed_ = true;
    return Status::OK();
  }

  Status Do(const SetLocationUpdate& u) {
    if (u.location.empty()) return InvalidArgumentError("set-location: empty location");
    if (u.location == m_.location) return Status::OK();
    m_.location = u.location;
    changed_ = true;
    return Status::OK();
  }

  Status Do(const SetPropertiesUpdate& u) {
    for (const auto& [k, v] : u.updates) m_.properties[k] = v;
    changed_ = changed_ || !u.updates.empty();
    return Status::OK();
  }

  Status Do(const RemovePropertiesUpdate& u) {
    for (const std::string& k : u.removals) m_.properties.erase(k);
    changed_ = changed_ || !u.removals.empty();
    return Status::OK();
  }

  // Java's updateSnapshotLog: entries of snapshots that no longer exist drop the history
  // before them (a gap would make time travel lie); snapshots added in this commit and made
  // current, then replaced within it, are not logged.
  void FixSnapshotLog() {
    std::set<int64_t> intermediate;
    for (int64_t id : main_set_to_added_) {
      if (!m_.current_snapshot_id || id != *m_.current_snapshot_id) intermediate.insert(id);
    }
    std::vector<SnapshotLogEntry> log;
    for (const SnapshotLogEntry& e : m_.snapshot_log) {
      if (m_.FindSnapshot(e.snapshot_id) != nullptr) {
        if (intermediate.count(e.snapshot_id) == 0) log.push_back(e);
      } else {
        log.clear();
      }
    }
    m_.snapshot_log = std::move(log);
  }

  TableMetadata m_;
  int64_t now_ms_;
  bool changed_ = false;
  std::optional<int32_t> last_added_schema_id_;
  std::optional<int32_t> last_added_spec_id_;
  std::optional<int32_t> last_added_order_id_;
  std::set<int64_t> added_snapshot_ids_;
  std::vector<int64_t> main_set_to_added_;
  std::optional<int64_t> last_updated_ms_;
};

}  // namespace

Result<TableMetadata> ApplyUpdates(const TableMetadata& base,
                                   std::string_view base_metadata_location,
                                   const std::vector<TableUpdate>& updates, int64_t now_ms) {
  Builder builder(base, now_ms);
  for (size_t i = 0; i < updates.size(); ++i) {
    Status st = builder.Apply(updates[i]);
    if (!st.ok())
      return st.WithContext(fmt::format("update {} ({})", i, TableUpdateAction(updates[i])));
  }
  return builder.Build(base, base_metadata_location);
}

Result<TableMetadata> CommitTable(const TableMetadata* base,
                                  std::string_view base_metadata_location,
                                  const CommitRequest& request, int64_t now_ms) {
  for (const TableRequirement& r : request.requirements) RETURN_IF_ERROR(CheckRequirement(r, base));
  if (base != nullptr) return ApplyUpdates(*base, base_metadata_location, request.updates, now_ms);
  // A create starts at the version it asks for (Java's buildFromEmpty(formatVersion)).
  TableMetadata empty = EmptyTableMetadata();
  for (const TableUpdate& u : request.updates) {
    if (const auto* up = std::get_if<UpgradeFormatVersionUpdate>(&u)) {
      if (up->format_version >= 1 && up->format_version <= kMaxSupportedFormatVersion) {
        empty.format_version = up->format_version;
      }
      break;
    }
  }
  return ApplyUpdates(empty, "", request.updates, now_ms);
}

}  // namespace sluice::lake
