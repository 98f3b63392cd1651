#include "lake/table_metadata.h"

#include <algorithm>
#include <random>
#include <set>
#include <unordered_map>

namespace sluice::lake {

std::string_view SortDirectionName(SortDirection d) {
  return d == SortDirection::kAsc ? "asc" : "desc";
}
std::string_view NullOrderName(NullOrder n) {
  return n == NullOrder::kNullsFirst ? "nulls-first" : "nulls-last";
}
std::string_view RefTypeName(RefType t) { return t == RefType::kBranch ? "branch" : "tag"; }

std::string NewUuid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  Uuid u;
  uint64_t a = rng(), b = rng();
  for (int i = 0; i < 8; ++i) {
    u[i] = static_cast<uint8_t>(a >> (8 * i));
    u[8 + i] = static_cast<uint8_t>(b >> (8 * i));
  }
  u[6] = static_cast<uint8_t>((u[6] & 0x0f) | 0x40);  // version 4
  u[8] = static_cast<uint8_t>((u[8] & 0x3f) | 0x80);  // IETF variant
  return UuidToString(u);
}

// --- Lookups -----------------------------------------------------------------------------

int32_t PartitionSpec::LastAssignedFieldId() const {
  int32_t last = kPartitionDataIdStart - 1;
  for (const PartitionField& f : fields) last = std::max(last, f.field_id);
  return last;
}

Result<Type> PartitionSpec::PartitionType(const Schema& schema) const {
  std::vector<NestedField> out;
  for (const PartitionField& f : fields) {
    const NestedField* source = schema.FindField(f.source_id);
    if (source == nullptr) {
      return InvalidArgumentError("partition field \"{}\": source id {} is not in schema {}",
                                  f.name, f.source_id, schema.schema_id);
    }
    ASSIGN_OR_RETURN(Type t, f.transform.ResultType(source->type));
    out.push_back(NestedField{f.field_id, f.name, false, std::move(t), {}});
  }
  return Type::Struct(std::move(out));
}

const Schema* TableMetadata::FindSchema(int32_t id) const {
  for (const Schema& s : schemas) {
    if (s.schema_id == id) return &s;
  }
  return nullptr;
}

const PartitionSpec* TableMetadata::FindSpec(int32_t id) const {
  for (const PartitionSpec& s : partition_specs) {
    if (s.spec_id == id) return &s;
  }
  return nullptr;
}

const SortOrder* TableMetadata::FindSortOrder(int32_t id) const {
  for (const SortOrder& s : sort_orders) {
    if (s.order_id == id) return &s;
  }
  return nullptr;
}

const Snapshot* TableMetadata::FindSnapshot(int64_t id) const {
  for (const Snapshot& s : snapshots) {
    if (s.snapshot_id == id) return &s;
  }
  return nullptr;
}

const Snapshot* TableMetadata::CurrentSnapshot() const {
  return current_snapshot_id ? FindSnapshot(*current_snapshot_id) : nullptr;
}

const SnapshotRef* TableMetadata::FindRef(std::string_view name) const {
  auto it = refs.find(std::string(name));
  return it == refs.end() ? nullptr : &it->second;
}

// --- Pieces to and from JSON ---------------------------------------------------------------

Json PartitionSpecToJson(const PartitionSpec& spec) {
  Json fields = Json::array();
  for (const PartitionField& f : spec.fields) {
    Json jf = Json::object();
    jf["name"] = f.name;
    jf["transform"] = f.transform.ToString();
    jf["source-id"] = f.source_id;
    jf["field-id"] = f.field_id;
    fields.push_back(std::move(jf));
  }
  Json j = Json::object();
  j["spec-id"] = spec.spec_id;
  j["fields"] = std::move(fields);
  return j;
}

namespace {

Result<std::vector<PartitionField>> PartitionFieldsFromJson(const Json& fields,
                                                            std::string_view path,
                                                            bool require_field_ids) {
  if (!fields.is_array()) {
    return InvalidArgumentError("{}: expected an array, got {}", path, JsonKindName(fields));
  }
  std::vector<PartitionField> out;
  for (size_t i = 0; i < fields.size(); ++i) {
    ASSIGN_OR_RETURN(JsonObject f, JsonObject::Of(fields[i], JsonPath(path, i)));
    PartitionField pf;
    if (f.Has("source-ids") && !f.Has("source-id")) {
      return UnimplementedError("{}: multi-argument transforms (format v3) are not supported",
                                f.path());
    }
    ASSIGN_OR_RETURN(pf.source_id, f.Int("source-id"));
    if (require_field_ids) {
      ASSIGN_OR_RETURN(pf.field_id, f.Int("field-id"));
    } else {
      ASSIGN_OR_RETURN(auto id, f.OptInt("field-id"));
      pf.field_id = id.value_or(-1);
    }
    ASSIGN_OR_RETURN(pf.name, f.String("name"));
    ASSIGN_OR_RETURN(std::string transform, f.String("transform"));
    auto t = Transform::Parse(transform);
    if (!t.ok()) return t.status().WithContext(f.PathOf("transform"));
    pf.transform = *t;
    out.push_back(std::move(pf));
  }
  return out;
}

}  // namespace

Result<PartitionSpec> PartitionSpecFromJson(const Json& json, std::string_view path,
                                            bool require_field_ids) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  PartitionSpec spec;
  ASSIGN_OR_RETURN(spec.spec_id, obj.Int("spec-id"));
  ASSIGN_OR_RETURN(const Json* fields, obj.Array("fields"));
  ASSIGN_OR_RETURN(spec.fields,
                   PartitionFieldsFromJson(*fields, obj.PathOf("fields"), require_field_ids));
  return spec;
}

Json SortOrderToJson(const SortOrder& order) {
  Json fields = Json::array();
  for (const SortField& f : order.fields) {
    Json jf = Json::object();
    jf["transform"] = f.transform.ToString();
    jf["source-id"] = f.source_id;
    jf["direction"] = SortDirectionName(f.direction);
    jf["null-order"] = NullOrderName(f.null_order);
    fields.push_back(std::move(jf));
  }
  Json j = Json::object();
  j["order-id"] = order.order_id;
  j["fields"] = std::move(fields);
  return j;
}

Result<SortOrder> SortOrderFromJson(const Json& json, std::string_view path) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  SortOrder order;
  ASSIGN_OR_RETURN(order.order_id, obj.Int("order-id"));
  ASSIGN_OR_RETURN(const Json* fields, obj.Array("fields"));
  for (size_t i = 0; i < fields->size(); ++i) {
    ASSIGN_OR_RETURN(JsonObject f, JsonObject::Of((*fields)[i], JsonPath(obj.PathOf("fields"), i)));
    SortField sf;
    ASSIGN_OR_RETURN(std::string transform, f.String("transform"));
    auto t = Transform::Parse(transform);
    if (!t.ok()) return t.status().WithContext(f.PathOf("transform"));
    sf.transform = *t;
    if (f.Has("source-ids") && !f.Has("source-id")) {
      return UnimplementedError("{}: multi-argument transforms (format v3) are not supported",
                                f.path());
    }
    ASSIGN_OR_RETURN(sf.source_id, f.Int("source-id"));
    ASSIGN_OR_RETURN(std::string direction, f.String("direction"));
    if (direction == "asc") {
      sf.direction = SortDirection::kAsc;
    } else if (direction == "desc") {
      sf.direction = SortDirection::kDesc;
    } else {
      return InvalidArgumentError("{}: \"{}\" is not asc or desc", f.PathOf("direction"),
                                  direction);
    }
    ASSIGN_OR_RETURN(std::string nulls, f.String("null-order"));
    if (nulls == "nulls-first") {
      sf.null_order = NullOrder::kNullsFirst;
    } else if (nulls == "nulls-last") {
      sf.null_order = NullOrder::kNullsLast;
    } else {
      return InvalidArgumentError("{}: \"{}\" is not nulls-first or nulls-last",
                                  f.PathOf("null-order"), nulls);
    }
    order.fields.push_back(std::move(sf));
  }
  return order;
}

namespace {

bool IsKnownOperation(std::string_view op) {
  return op == "append" || op == "replace" || op == "overwrite" || op == "delete";
}

}  // namespace

Json SnapshotToJson(const Snapshot& s, int format_version) {
  Json j = Json::object();
  j["snapshot-id"] = s.snapshot_id;
  if (s.parent_snapshot_id) j["parent-snapshot-id"] = *s.parent_snapshot_id;
  if (format_version >= 2) j["sequence-number"] = s.sequence_number;
  j["timestamp-ms"] = s.timestamp_ms;
  if (!s.operation.empty() || !s.summary.empty()) {
    Json summary = Json::object();
    if (!s.operation.empty()) summary["operation"] = s.operation;
    for (const auto& [k, v] : s.summary) summary[k] = v;
    j["summary"] = std::move(summary);
  }
  j["manifest-list"] = s.manifest_list;
  if (s.schema_id) j["schema-id"] = *s.schema_id;
  return j;
}

Result<Snapshot> SnapshotFromJson(const Json& json, std::string_view path, int format_version) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  Snapshot s;
  ASSIGN_OR_RETURN(s.snapshot_id, obj.Long("snapshot-id"));
  ASSIGN_OR_RETURN(s.parent_snapshot_id, obj.OptLong("parent-snapshot-id"));
  if (format_version >= 2) {
    ASSIGN_OR_RETURN(s.sequence_number, obj.Long("sequence-number"));
  } else {
    ASSIGN_OR_RETURN(auto seq, obj.OptLong("sequence-number"));
    s.sequence_number = seq.value_or(0);
  }
  ASSIGN_OR_RETURN(s.timestamp_ms, obj.Long("timestamp-ms"));
  if (format_version < 2 && !obj.Has("manifest-list") && obj.Has("manifests")) {
    return UnimplementedError(
        "{}: v1 snapshots that list \"manifests\" instead of a \"manifest-list\" are not supported",
        path);
  }
  ASSIGN_OR_RETURN(s.manifest_list, obj.String("manifest-list"));
  if (format_version >= 2 || obj.Has("summary")) {
    ASSIGN_OR_RETURN(auto summary, obj.OptStringMap("summary"));
    if (!obj.Has("summary")) {
      return InvalidArgumentError("{}: missing required field \"summary\"", path);
    }
    auto op = summary.find("operation");
    if (op == summary.end()) {
      return InvalidArgumentError("{}: missing required field \"operation\"",
                                  obj.PathOf("summary"));
    }
    if (!IsKnownOperation(op->second)) {
      return InvalidArgumentError("{}: \"{}\" is not append, replace, overwrite or delete",
                                  JsonPath(obj.PathOf("summary"), "operation"), op->second);
    }
    s.operation = op->second;
    summary.erase(op);
    s.summary = std::move(summary);
  }
  ASSIGN_OR_RETURN(s.schema_id, obj.OptInt("schema-id"));
  return s;
}

Json SnapshotRefToJson(const SnapshotRef& ref) {
  Json j = Json::object();
  j["snapshot-id"] = ref.snapshot_id;
  j["type"] = RefTypeName(ref.type);
  if (ref.min_snapshots_to_keep) j["min-snapshots-to-keep"] = *ref.min_snapshots_to_keep;
  if (ref.max_snapshot_age_ms) j["max-snapshot-age-ms"] = *ref.max_snapshot_age_ms;
  if (ref.max_ref_age_ms) j["max-ref-age-ms"] = *ref.max_ref_age_ms;
  return j;
}

Result<SnapshotRef> SnapshotRefFromJson(const Json& json, std::string_view path) {
  ASSIGN_OR_RETURN(JsonObject obj, JsonObject::Of(json, std::string(path)));
  SnapshotRef ref;
  ASSIGN_OR_RETURN(ref.snapshot_id, obj.Long("snapshot-id"));
  ASSIGN_OR_RETURN(std::string type, obj.String("type"));
  if (type == "branch") {
    ref.type = RefType::kBranch;
  } else if (type == "tag") {
    ref.type = RefType::kTag;
  } else {
    return InvalidArgumentError("{}: \"{}\" is not branch or tag", obj.PathOf("type"), type);
  }
  ASSIGN_OR_RETURN(ref.min_snapshots_to_keep, obj.OptInt("min-snapshots-to-keep"));
  ASSIGN_OR_RETURN(ref.max_snapshot_age_ms, obj.OptLong("max-snapshot-age-ms"));
  ASSIGN_OR_RETURN(ref.max_ref_age_ms, obj.OptLong("max-ref-age-ms"));
  return ref;
}

// --- Table metadata JSON -----------------------------------------------------------------

namespace {

Status CheckFormatVersion(int version) {
  if (version > kMaxSupportedFormatVersion) {
    return UnimplementedError(
        "format-version {} is not supported (sluice reads and writes format versions 1 and 2)",
        version);
  }
  if (version < 1) return InvalidArgumentError("format-version {} is not a valid version", version);
  return Status::OK();
}

// v1 partition fields written without ids get Java's ids: 1000, 1001, ... within each spec.
void AssignV1PartitionFieldIds(PartitionSpec* spec) {
  int32_t next = kPartitionDataIdStart;
  for (PartitionField& f : spec->fields) {
    if (f.field_id < 0) f.field_id = next;
    next = std::max(next, f.field_id) + 1;
  }
}

}  // namespace

Result<TableMetadata> TableMetadataFromJson(const Json& json) {
  ASSIGN_OR_RETURN(JsonObject root, JsonObject::Of(json, "$"));
  TableMetadata m;
  ASSIGN_OR_RETURN(m.format_version, root.Int("format-version"));
  RETURN_IF_ERROR(CheckFormatVersion(m.format_version).WithContext(root.PathOf("format-version")));
  const bool v2 = m.format_version >= 2;

  if (v2) {
    ASSIGN_OR_RETURN(m.table_uuid, root.String("table-uuid"));
  } else {
    ASSIGN_OR_RETURN(auto uuid, root.OptString("table-uuid"));
    m.table_uuid = uuid.value_or("");
  }
  ASSIGN_OR_RETURN(m.location, root.String("location"));
  if (v2) {
    ASSIGN_OR_RETURN(m.last_sequence_number, root.Long("last-sequence-number"));
  } else {
    ASSIGN_OR_RETURN(auto seq, root.OptLong("last-sequence-number"));
    m.last_sequence_number = seq.value_or(0);
  }
  ASSIGN_OR_RETURN(m.last_updated_ms, root.Long("last-updated-ms"));
  ASSIGN_OR_RETURN(m.last_column_id, root.Int("last-column-id"));

  // Schemas: v2 "schemas" + "current-schema-id"; v1 may have only the deprecated "schema".
  if (v2 || root.Has("schemas")) {
    ASSIGN_OR_RETURN(const Json* schemas, root.Array("schemas"));
    for (size_t i = 0; i < schemas->size(); ++i) {
      ASSIGN_OR_RETURN(Schema s,
                       SchemaFromJson((*schemas)[i], JsonPath(root.PathOf("schemas"), i), v2));
      m.schemas.push_back(std::move(s));
    }
    ASSIGN_OR_RETURN(m.current_schema_id, root.Int("current-schema-id"));
  } else {
    ASSIGN_OR_RETURN(const Json* schema, root.Require("schema"));
    ASSIGN_OR_RETURN(Schema s, SchemaFromJson(*schema, root.PathOf("schema"), false));
    m.current_schema_id = s.schema_id;
    m.schemas.push_back(std::move(s));
  }

  // Partition specs: likewise "partition-specs" or v1's "partition-spec" (fields only).
  if (v2 || root.Has("partition-specs")) {
    ASSIGN_OR_RETURN(const Json* specs, root.Array("partition-specs"));
    for (size_t i = 0; i < specs->size(); ++i) {
      ASSIGN_OR_RETURN(
          PartitionSpec spec,
          PartitionSpecFromJson((*specs)[i], JsonPath(root.PathOf("partition-specs"), i), v2));
      if (!v2) AssignV1PartitionFieldIds(&spec);
      m.partition_specs.push_back(std::move(spec));
    }
    ASSIGN_OR_RETURN(m.default_spec_id, root.Int("default-spec-id"));
  } else {
    ASSIGN_OR_RETURN(const Json* fields, root.Require("partition-spec"));
    PartitionSpec spec;
    ASSIGN_OR_RETURN(spec.fields,
                     PartitionFieldsFromJson(*fields, root.PathOf("partition-spec"), false));
    AssignV1PartitionFieldIds(&spec);
    m.partition_specs.push_back(std::move(spec));
    m.default_spec_id = 0;
  }
  if (v2) {
    ASSIGN_OR_RETURN(m.last_partition_id, root.Int("last-partition-id"));
  } else {
    ASSIGN_OR_RETURN(auto last, root.OptInt("last-partition-id"));
    int32_t highest = kPartitionDataIdStart - 1;
    for (const PartitionSpec& s : m.partition_specs)
      highest = std::max(highest, s.LastAssignedFieldId());
    m.last_partition_id = last.value_or(highest);
  }

  ASSIGN_OR_RETURN(m.properties, root.OptStringMap("properties"));

  ASSIGN_OR_RETURN(auto current, root.OptLong("current-snapshot-id"));
  if (current && *current != -1) m.current_snapshot_id = *current;

  if (const Json* snapshots = root.Get("snapshots")) {
    ASSIGN_OR_RETURN(snapshots, root.Array("snapshots"));
    for (size_t i = 0; i < snapshots->size(); ++i) {
      ASSIGN_OR_RETURN(Snapshot s,
                       SnapshotFromJson((*snapshots)[i], JsonPath(root.PathOf("snapshots"), i),
                                        m.format_version));
      m.snapshots.push_back(std::move(s));
    }
  }

  if (const Json* refs = root.Get("refs")) {
    if (!refs->is_object()) {
      return InvalidArgumentError("{}: expected an object, got {}", root.PathOf("refs"),
                                  JsonKindName(*refs));
    }
    for (auto it = refs->begin(); it != refs->end(); ++it) {
      ASSIGN_OR_RETURN(SnapshotRef ref,
                       SnapshotRefFromJson(it.value(), JsonPath(root.PathOf("refs"), it.key())));
      m.refs.emplace(it.key(), ref);
    }
  } else if (m.current_snapshot_id) {
    // Java's rule for metadata written before refs: the current snapshot is main.
    m.refs.emplace(std::string(kMainBranch),
                   SnapshotRef{*m.current_snapshot_id, RefType::kBranch, {}, {}, {}});
  }

  if (const Json* log = root.Get("snapshot-log")) {
    ASSIGN_OR_RETURN(log, root.Array("snapshot-log"));
    for (size_t i = 0; i < log->size(); ++i) {
      ASSIGN_OR_RETURN(JsonObject e,
                       JsonObject::Of((*log)[i], JsonPath(root.PathOf("snapshot-log"), i)));
      SnapshotLogEntry entry;
      ASSIGN_OR_RETURN(entry.timestamp_ms, e.Long("timestamp-ms"));
      ASSIGN_OR_RETURN(entry.snapshot_id, e.Long("snapshot-id"));
      m.snapshot_log.push_back(entry);
    }
  }
  if (const Json* log = root.Get("metadata-log")) {
    ASSIGN_OR_RETURN(log, root.Array("metadata-log"));
    for (size_t i = 0; i < log->size(); ++i) {
      ASSIGN_OR_RETURN(JsonObject e,
                       JsonObject::Of((*log)[i], JsonPath(root.PathOf("metadata-log"), i)));
      MetadataLogEntry entry;
      ASSIGN_OR_RETURN(entry.timestamp_ms, e.Long("timestamp-ms"));
      ASSIGN_OR_RETURN(entry.metadata_file, e.String("metadata-file"));
      m.metadata_log.push_back(std::move(entry));
    }
  }

  if (v2 || root.Has("sort-orders")) {
    ASSIGN_OR_RETURN(const Json* orders, root.Array("sort-orders"));
    for (size_t i = 0; i < orders->size(); ++i) {
      ASSIGN_OR_RETURN(SortOrder o,
                       SortOrderFromJson((*orders)[i], JsonPath(root.PathOf("sort-orders"), i)));
      m.sort_orders.push_back(std::move(o));
    }
    ASSIGN_OR_RETURN(m.default_sort_order_id, root.Int("default-sort-order-id"));
  } else {
    m.sort_orders.push_back(SortOrder{});
    m.default_sort_order_id = kUnsortedOrderId;
  }

  if (const Json* stats = root.Get("statistics")) {
    ASSIGN_OR_RETURN(stats, root.Array("statistics"));
    m.statistics = *stats;
  }
  if (const Json* stats = root.Get("partition-statistics")) {
    ASSIGN_OR_RETURN(stats, root.Array("partition-statistics"));
    m.partition_statistics = *stats;
  }

  RETURN_IF_ERROR(m.Validate());
  return m;
}

Result<TableMetadata> TableMetadataFromJson(std::string_view text) {
  ASSIGN_OR_RETURN(Json json, ParseJson(text, "table metadata"));
  return TableMetadataFromJson(json);
}

Json TableMetadataToJson(const TableMetadata& m) {
  const bool v2 = m.format_version >= 2;
  Json j = Json::object();
  j["format-version"] = m.format_version;
  if (v2 || !m.table_uuid.empty()) j["table-uuid"] = m.table_uuid;
  j["location"] = m.location;
  if (v2) j["last-sequence-number"] = m.last_sequence_number;
  j["last-updated-ms"] = m.last_updated_ms;
  j["last-column-id"] = m.last_column_id;
  if (!v2 && m.CurrentSchema() != nullptr) j["schema"] = SchemaToJson(*m.CurrentSchema());
  j["current-schema-id"] = m.current_schema_id;
  Json schemas = Json::array();
  for (const Schema& s : m.schemas) schemas.push_back(SchemaToJson(s));
  j["schemas"] = std::move(schemas);
  if (!v2 && m.DefaultSpec() != nullptr)
    j["partition-spec"] = PartitionSpecToJson(*m.DefaultSpec())["fields"];
  j["default-spec-id"] = m.default_spec_id;
  Json specs = Json::array();
  for (const PartitionSpec& s : m.partition_specs) specs.push_back(PartitionSpecToJson(s));
  j["partition-specs"] = std::move(specs);
  j["last-partition-id"] = m.last_partition_id;
  j["default-sort-order-id"] = m.default_sort_order_id;
  Json orders = Json::array();
  for (const SortOrder& o : m.sort_orders) orders.push_back(SortOrderToJson(o));
  j["sort-orders"] = std::move(orders);
  Json props = Json::object();
  for (const auto& [k, v] : m.properties) props[k] = v;
  j["properties"] = std::move(props);
  j["current-snapshot-id"] = m.current_snapshot_id.value_or(-1);
  Json refs = Json::object();
  for (const auto& [name, ref] : m.refs) refs[name] = SnapshotRefToJson(ref);
  j["refs"] = std::move(refs);
  Json snapshots = Json::array();
  for (const Snapshot& s : m.snapshots) snapshots.push_back(SnapshotToJson(s, m.format_version));
  j["snapshots"] = std::move(snapshots);
  j["statistics"] = m.statistics;
  j["partition-statistics"] = m.partition_statistics;
  Json slog = Json::array();
  for (const SnapshotLogEntry& e : m.snapshot_log) {
    slog.push_back(Json{{"timestamp-ms", e.timestamp_ms}, {"snapshot-id", e.snapshot_id}});
  }
  j["snapshot-log"] = std::move(slog);
  Json mlog = Json::array();
  for (const MetadataLogEntry& e : m.metadata_log) {
    mlog.push_back(Json{{"timestamp-ms", e.timestamp_ms}, {"metadata-file", e.metadata_file}});
  }
  j["metadata-log"] = std::move(mlog);
  return j;
}

std::string TableMetadataToString(const TableMetadata& m, bool pretty) {
  return TableMetadataToJson(m).dump(pretty ? 2 : -1);
}

// --- Validation --------------------------------------------------------------------------

namespace {

bool HasNanosecondTypes(const std::vector<NestedField>& fields) {
  for (const NestedField& f : fields) {
    if (f.type.id == TypeId::kTimestampNs || f.type.id == TypeId::kTimestampTzNs) return true;
    if (f.type.is_nested() && HasNanosecondTypes(f.type.fields)) return true;
  }
  return false;
}

// Whether the field with `id` sits inside a list or a map.
bool InsideListOrMap(const std::vector<NestedField>& fields, int32_t id, bool inside) {
  for (const NestedField& f : fields) {
    if (f.id == id) return inside;
    if (f.type.is_nested() &&
        InsideListOrMap(f.type.fields, id, inside || f.type.id != TypeId::kStruct)) {
      return true;
    }
  }
  return false;
}

Status CheckSource(const Transform& transform, int32_t source_id, const Schema& schema,
                   std::string_view what) {
  const NestedField* source = schema.FindField(source_id);
  if (source == nullptr) {
    return InvalidArgumentError("{}: source id {} is not in schema {}", what, source_id,
                                schema.schema_id);
  }
  if (!source->type.is_primitive()) {
    return InvalidArgumentError("{}: source \"{}\" is a {}, not a primitive type", what,
                                schema.FindName(source_id), source->type.ToString());
  }
  if (InsideListOrMap(schema.fields, source_id, false)) {
    return InvalidArgumentError("{}: source \"{}\" is inside a list or map", what,
                                schema.FindName(source_id));
  }
  // Unknown transforms are ignored by readers (spec); writers refuse them elsewhere.
  if (transform.kind() != TransformKind::kUnknown && !transform.CanTransform(source->type)) {
    return InvalidArgumentError("{}: transform {} cannot be applied to \"{}\" of type {}", what,
                                transform.ToString(), schema.FindName(source_id),
                                source->type.ToString());
  }
  return Status::OK();
}

}  // namespace

Status ValidateSpecAgainstSchema(const PartitionSpec& spec, const Schema& schema) {
  std::set<std::string_view> names;
  for (const PartitionField& f : spec.fields) {
    std::string what = fmt::format("partition spec {} field \"{}\"", spec.spec_id, f.name);
    if (f.name.empty())
      return InvalidArgumentError("partition spec {}: a field has no name", spec.spec_id);
    if (!names.insert(f.name).second)
      return InvalidArgumentError("{}: the name appears twice", what);
    RETURN_IF_ERROR(CheckSource(f.transform, f.source_id, schema, what));
    const NestedField* column = schema.FindField(std::string_view(f.name));
    if (column != nullptr) {
      bool same_identity =
          f.transform.kind() == TransformKind::kIdentity && column->id == f.source_id;
      if (!same_identity) {
        return InvalidArgumentError(
            "{}: the name is a column of the schema (only an identity "
            "partition of that column may use it)",
            what);
      }
    }
  }
  return Status::OK();
}

Status ValidateSortOrderAgainstSchema(const SortOrder& order, const Schema& schema) {
  for (size_t i = 0; i < order.fields.size(); ++i) {
    const SortField& f = order.fields[i];
    RETURN_IF_ERROR(CheckSource(f.transform, f.source_id, schema,
                                fmt::format("sort order {} field {}", order.order_id, i)));
  }
  return Status::OK();
}

Status TableMetadata::Validate() const {
  RETURN_IF_ERROR(CheckFormatVersion(format_version));
  const bool v2 = format_version >= 2;
  if (v2 && table_uuid.empty()) return InvalidArgumentError("table-uuid is required in format v2");
  if (location.empty()) return InvalidArgumentError("location is empty");

  if (schemas.empty()) return InvalidArgumentError("the table has no schemas");
  std::set<int32_t> ids;
  for (const Schema& s : schemas) {
    if (!ids.insert(s.schema_id).second) {
      return InvalidArgumentError("schema id {} appears more than once", s.schema_id);
    }
    RETURN_IF_ERROR(s.Validate());
    if (s.HighestFieldId() > last_column_id) {
      return InvalidArgumentError("schema {} uses field id {}, above last-column-id {}",
                                  s.schema_id, s.HighestFieldId(), last_column_id);
    }
    if (HasNanosecondTypes(s.fields)) {
      return InvalidArgumentError("schema {}: timestamp_ns and timestamptz_ns need format v3",
                                  s.schema_id);
    }
  }
  const Schema* current = CurrentSchema();
  if (current == nullptr) {
    return InvalidArgumentError("current-schema-id {} is not among the schemas", current_schema_id);
  }

  if (partition_specs.empty()) return InvalidArgumentError("the table has no partition specs");
  ids.clear();
  for (const PartitionSpec& spec : partition_specs) {
    if (!ids.insert(spec.spec_id).second) {
      return InvalidArgumentError("partition spec id {} appears more than once", spec.spec_id);
    }
    std::set<int32_t> field_ids;
    for (const PartitionField& f : spec.fields) {
      if (!field_ids.insert(f.field_id).second) {
        return InvalidArgumentError("partition spec {}: field id {} appears more than once",
                                    spec.spec_id, f.field_id);
      }
      if (v2 && f.field_id > last_partition_id) {
        return InvalidArgumentError("partition spec {}: field id {} is above last-partition-id {}",
                                    spec.spec_id, f.field_id, last_partition_id);
      }
    }
  }
  const PartitionSpec* spec = DefaultSpec();
  if (spec == nullptr) {
    return InvalidArgumentError("default-spec-id {} is not among the partition specs",
                                default_spec_id);
  }
  RETURN_IF_ERROR(ValidateSpecAgainstSchema(*spec, *current));

  if (sort_orders.empty()) return InvalidArgumentError("the table has no sort orders");
  ids.clear();
  for (const SortOrder& o : sort_orders) {
    if (!ids.insert(o.order_id).second) {
      return InvalidArgumentError("sort order id {} appears more than once", o.order_id);
    }
    if ((o.order_id == kUnsortedOrderId) != o.is_unsorted()) {
      return InvalidArgumentError(
          "sort order {}: order id 0 is reserved for the unsorted order "
          "(and only for it)",
          o.order_id);
    }
  }
  const SortOrder* order = FindSortOrder(default_sort_order_id);
  if (order == nullptr) {
    return InvalidArgumentError("default-sort-order-id {} is not among the sort orders",
                                default_sort_order_id);
  }
  RETURN_IF_ERROR(ValidateSortOrderAgainstSchema(*order, *current));

  std::set<int64_t> snapshot_ids;
  for (const Snapshot& s : snapshots) {
    if (!snapshot_ids.insert(s.snapshot_id).second) {
      return InvalidArgumentError("snapshot id {} appears more than once", s.snapshot_id);
    }
    if (s.parent_snapshot_id == s.snapshot_id) {
      return InvalidArgumentError("snapshot {} is its own parent", s.snapshot_id);
    }
    if (v2 && s.sequence_number > last_sequence_number) {
      return InvalidArgumentError(
          "snapshot {} has sequence number {}, above last-sequence-number {}", s.snapshot_id,
          s.sequence_number, last_sequence_number);
    }
    if (v2 && s.operation.empty()) {
      return InvalidArgumentError("snapshot {} has no summary operation", s.snapshot_id);
    }
  }
  if (current_snapshot_id && FindSnapshot(*current_snapshot_id) == nullptr) {
    return InvalidArgumentError("current-snapshot-id {} is not among the snapshots",
                                *current_snapshot_id);
  }
  for (const auto& [name, ref] : refs) {
    if (name.empty()) return InvalidArgumentError("a snapshot ref has an empty name");
    if (FindSnapshot(ref.snapshot_id) == nullptr) {
      return InvalidArgumentError(
          "ref \"{}\" points at snapshot {}, which is not among the snapshots", name,
          ref.snapshot_id);
    }
    if (ref.type == RefType::kTag && (ref.min_snapshots_to_keep || ref.max_snapshot_age_ms)) {
      return InvalidArgumentError(
          "tag \"{}\": min-snapshots-to-keep and max-snapshot-age-ms are for "
          "branches only",
          name);
    }
    if ((ref.min_snapshots_to_keep && *ref.min_snapshots_to_keep <= 0) ||
        (ref.max_snapshot_age_ms && *ref.max_snapshot_age_ms <= 0) ||
        (ref.max_ref_age_ms && *ref.max_ref_age_ms <= 0)) {
      return InvalidArgumentError("ref \"{}\": retention settings must be positive", name);
    }
  }
  const SnapshotRef* main = FindRef(kMainBranch);
  if (main != nullptr && main->type != RefType::kBranch) {
    return InvalidArgumentError("ref \"main\" must be a branch");
  }
  if (current_snapshot_id && main != nullptr && main->snapshot_id != *current_snapshot_id) {
    return InvalidArgumentError("current-snapshot-id {} does not match the main branch ({})",
                                *current_snapshot_id, main->snapshot_id);
  }
  if (!current_snapshot_id && main != nullptr) {
    return InvalidArgumentError(
        "the main branch points at snapshot {} but current-snapshot-id is "
        "not set",
        main->snapshot_id);
  }
  return Status::OK();
}

// --- New tables ----------------------------------------------------------------------------

Result<TableMetadata> NewTable(const NewTableOptions& o) {
  RETURN_IF_ERROR(CheckFormatVersion(o.format_version));
  if (o.location.empty()) return InvalidArgumentError("a new table needs a location");
  RETURN_IF_ERROR(o.schema.Validate());

  int32_t next_id = 1;
  std::vector<std::pair<int32_t, int32_t>> mapping;
  Schema schema = AssignFreshIds(o.schema, &next_id, &mapping);
  schema.schema_id = 0;
  std::unordered_map<int32_t, int32_t> fresh(mapping.begin(), mapping.end());
  auto remap = [&](int32_t old_id, std::string_view what) -> Result<int32_t> {
    auto it = fresh.find(old_id);
    if (it == fresh.end())
      return InvalidArgumentError("{}: source id {} is not in the schema", what, old_id);
    return it->second;
  };

  PartitionSpec spec;
  spec.spec_id = 0;
  int32_t next_partition_id = kPartitionDataIdStart;
  for (const PartitionField& f : o.spec.fields) {
    if (f.transform.kind() == TransformKind::kUnknown) {
      return InvalidArgumentError("partition field \"{}\": unknown transform \"{}\"", f.name,
                                  f.transform.ToString());
    }
    PartitionField nf = f;
    ASSIGN_OR_RETURN(nf.source_id,
                     remap(f.source_id, fmt::format("partition field \"{}\"", f.name)));
    nf.field_id = next_partition_id++;
    spec.fields.push_back(std::move(nf));
  }
  RETURN_IF_ERROR(ValidateSpecAgainstSchema(spec, schema));

  SortOrder order;
  for (const SortField& f : o.sort_order.fields) {
    if (f.transform.kind() == TransformKind::kUnknown) {
      return InvalidArgumentError("sort field: unknown transform \"{}\"", f.transform.ToString());
    }
    SortField nf = f;
    ASSIGN_OR_RETURN(nf.source_id, remap(f.source_id, "sort field"));
    order.fields.push_back(nf);
  }
  order.order_id = order.is_unsorted() ? kUnsortedOrderId : 1;
  RETURN_IF_ERROR(ValidateSortOrderAgainstSchema(order, schema));

  TableMetadata m;
  m.format_version = o.format_version;
  m.table_uuid = o.table_uuid.empty() ? NewUuid() : o.table_uuid;
  m.location = o.location;
  while (m.location.size() > 1 && m.location.back() == '/') m.location.pop_back();
  m.last_sequence_number = 0;
  m.last_updated_ms = o.now_ms;
  m.last_column_id = next_id - 1;
  m.schemas.push_back(std::move(schema));
  m.current_schema_id = 0;
  m.last_partition_id = spec.LastAssignedFieldId();
  m.partition_specs.push_back(std::move(spec));
  m.default_spec_id = 0;
  m.sort_orders.push_back(order);
  m.default_sort_order_id = order.order_id;
  m.properties = o.properties;
  RETURN_IF_ERROR(m.Validate());
  return m;
}

}  // namespace sluice::lake
