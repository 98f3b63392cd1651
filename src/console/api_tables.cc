// /api/v1/tables: the lake's tables as the query server sees them (its WarehouseCatalog:
// the warehouse directory, or the REST catalog), each with its schema, partition spec,
// snapshots and the Kafka offsets a pipeline wrote with them, and its files
// (docs/design/0026-console.md). With SQL grants on, a user sees what it may SELECT.
#include <algorithm>

#include "base/clock.h"
#include "console/api.h"
#include "console/api_util.h"
#include "duck/database.h"
#include "lake/maintenance.h"
#include "lake/rest_catalog.h"
#include "lake/table.h"
#include "query/lake_planner/lake_catalog.h"

namespace sluice::console {
namespace {

using namespace api_util;  // NOLINT: the API's answers and input checks

// Iceberg's snapshot ids are random 63-bit integers, more digits than a double (and so a
// page's JSON.parse) holds: sent as their digits, a string.
std::string IdText(int64_t id) { return std::to_string(id); }

int64_t SummaryInt(const lake::Snapshot& s, const char* key) {
  auto it = s.summary.find(key);
  if (it == s.summary.end()) return 0;
  return std::strtoll(it->second.c_str(), nullptr, 10);
}

// The table's `sluice.offsets.<group>.<topic>` entries of `s`: each a JSON object of
// partition -> next offset. `source` is "<group>.<topic>" as the key holds it (a group id
// and a topic may both hold dots, so it is not split).
Json KafkaOffsetsJson(const lake::Snapshot& s) {
  Json out = Json::array();
  for (const auto& [key, value] : s.summary) {
    if (!key.starts_with(lake::kOffsetsSummaryPrefix)) continue;
    Json parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object()) continue;
    const std::string source = key.substr(lake::kOffsetsSummaryPrefix.size());
    for (const auto& [partition, offset] : parsed.items()) {
      if (!offset.is_number_integer()) continue;
      out.push_back(Json{{"source", source},
                         {"partition", std::strtol(partition.c_str(), nullptr, 10)},
                         {"offset", offset.get<int64_t>()}});
    }
  }
  return out;
}

Json SnapshotJson(const lake::Snapshot& s) {
  Json summary = Json::object();
  for (const auto& [k, v] : s.summary) {
    if (!k.starts_with(lake::kOffsetsSummaryPrefix)) summary[k] = v;
  }
  Json j{{"snapshot_id", IdText(s.snapshot_id)},
         {"parent_id", nullptr},
         {"sequence_number", s.sequence_number},
         {"timestamp_ms", s.timestamp_ms},
         {"operation", s.operation},
         {"summary", std::move(summary)},
         {"kafka_offsets", KafkaOffsetsJson(s)}};
  if (s.parent_snapshot_id) j["parent_id"] = IdText(*s.parent_snapshot_id);
  return j;
}

// The list's line of a table: its current snapshot's totals.
Json TableSummaryJson(const query::LakeTableInfo& info, const lake::TableMetadata* m) {
  Json j{{"namespace", info.ns},
         {"name", info.name},
         {"sql_name", info.SqlName()},
         {"location", nullptr},
         {"format_version", nullptr},
         {"current_snapshot_id", nullptr},
         {"snapshots", 0},
         {"records", 0},
         {"data_files", 0},
         {"size_bytes", 0},
         {"last_updated_ms", nullptr}};
  if (m == nullptr) return j;
  j["location"] = m->location;
  j["format_version"] = m->format_version;
  j["snapshots"] = m->snapshots.size();
  j["last_updated_ms"] = m->last_updated_ms;
  if (const lake::Snapshot* s = m->CurrentSnapshot()) {
    j["current_snapshot_id"] = IdText(s->snapshot_id);
    j["records"] = SummaryInt(*s, "total-records");
    j["data_files"] = SummaryInt(*s, "total-data-files");
    j["size_bytes"] = SummaryInt(*s, "total-files-size");
  }
  return j;
}

Json TableDetailJson(const std::vector<std::string>& ns, const std::string& name,
                     const lake::TableMetadata& m) {
  query::LakeTableInfo info{.ns = ns, .name = name};
  Json fields = Json::array();
  const lake::Schema* schema = m.CurrentSchema();
  if (schema != nullptr) {
    for (const lake::NestedField& f : schema->fields) {
      Json field{
          {"id", f.id}, {"name", f.name}, {"type", f.type.ToString()}, {"required", f.required}};
      if (f.doc) field["doc"] = *f.doc;
      fields.push_back(std::move(field));
    }
  }
  Json spec_fields = Json::array();
  const lake::PartitionSpec* spec = m.DefaultSpec();
  if (spec != nullptr) {
    for (const lake::PartitionField& p : spec->fields) {
      const lake::NestedField* src = schema ? schema->FindField(p.source_id) : nullptr;
      spec_fields.push_back(Json{{"name", p.name},
                                 {"transform", p.transform.ToString()},
                                 {"source_id", p.source_id},
                                 {"source_name", src ? Json(src->name) : Json(nullptr)},
                                 {"field_id", p.field_id}});
    }
  }
  // The table's sort order and properties as Iceberg's JSON writes them.
  Json full = Json::parse(lake::TableMetadataToString(m, false), nullptr, false);
  Json sort_order = nullptr;
  if (full.is_object() && full.contains("sort-orders")) {
    for (const Json& o : full["sort-orders"]) {
      if (o.value("order-id", -1) == m.default_sort_order_id) sort_order = o;
    }
  }
  Json snapshots = Json::array();
  std::vector<const lake::Snapshot*> ordered;
  for (const lake::Snapshot& s : m.snapshots) ordered.push_back(&s);
  std::sort(ordered.begin(), ordered.end(), [](const lake::Snapshot* a, const lake::Snapshot* b) {
    return a->timestamp_ms != b->timestamp_ms ? a->timestamp_ms > b->timestamp_ms
                                              : a->sequence_number > b->sequence_number;
  });
  for (const lake::Snapshot* s : ordered) snapshots.push_back(SnapshotJson(*s));
  return Json{
      {"namespace", ns},
      {"name", name},
      {"sql_name", info.SqlName()},
      {"location", m.location},
      {"format_version", m.format_version},
      {"table_uuid", m.table_uuid},
      {"current_snapshot_id",
       m.CurrentSnapshot() ? Json(IdText(m.CurrentSnapshot()->snapshot_id)) : Json(nullptr)},
      {"last_updated_ms", m.last_updated_ms},
      {"records", m.CurrentSnapshot() ? SummaryInt(*m.CurrentSnapshot(), "total-records") : 0},
      {"schema", {{"schema_id", schema ? schema->schema_id : 0}, {"fields", std::move(fields)}}},
      {"partition_spec",
       {{"spec_id", spec ? spec->spec_id : 0}, {"fields", std::move(spec_fields)}}},
      {"sort_order", std::move(sort_order)},
      {"properties", m.properties},
      {"snapshots", std::move(snapshots)}};
}

std::string_view ContentName(int32_t content) {
  switch (content) {
    case 1:
      return "position_deletes";
    case 2:
      return "equality_deletes";
    default:
      return "data";
  }
}

// A data file's partition tuple as a JSON object of the spec's field names (Datum's text
// form is JSON for the values a partition holds), else its text.
Json PartitionJson(const lake::avro::Datum& partition) {
  const std::string text = partition.ToString();
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : Json(text);
}

}  // namespace

HttpResponse ConsoleApi::Tables(const HttpRequest& req, const std::vector<std::string>& path) {
  if (options_.tables == nullptr) {
    return ErrorResponse(404, "TABLES_OFF",
                         "no lake tables here: start sluice serve with --warehouse DIR, or a "
                         "REST catalog (catalog: in the config), to see them");
  }
  const bool maintenance = path.size() == 4 && path[3] == "maintenance";
  if (maintenance ? req.method != "POST" : (req.method != "GET" && req.method != "HEAD")) {
    return MethodNotAllowed(req);
  }
  const query::WarehouseCatalog& catalog = *options_.tables;
  auto may_read = [&](const std::vector<std::string>& ns, const std::string& table) {
    const lake::CatalogAccess* access = options_.table_access.get();
    return access == nullptr || access->Everything(req.principal) ||
           access->ReadTable(req.principal, ns, table);
  };
  if (path.size() == 1) {
    Result<std::vector<query::LakeTableInfo>> listed = catalog.ListTables();
    if (!listed.ok()) return FromStatus(listed.status());
    Json tables = Json::array();
    for (const query::LakeTableInfo& info : *listed) {
      if (!may_read(info.ns, info.name)) continue;
      // Parsed metadata is cached by the catalog while its file is unchanged.
      auto m = catalog.LoadMetadata(info.ns, info.name);
      tables.push_back(TableSummaryJson(info, m.ok() ? m->get() : nullptr));
    }
    return JsonResponse(
        200,
        Json{{"catalog", catalog.warehouse().empty() ? "REST catalog" : catalog.warehouse()},
             // Where an iceberg sink of this process writes (null: a REST catalog).
             {"warehouse", catalog.warehouse().empty() ? Json(nullptr) : Json(catalog.warehouse())},
             {"tables", std::move(tables)}});
  }
  if (path.size() != 3 && !(path.size() == 4 && (path[3] == "files" || maintenance))) {
    return ErrorResponse(404, "NOT_FOUND", "no such API: " + req.path);
  }
  std::vector<std::string> ns;
  for (size_t start = 0; start <= path[1].size();) {
    const size_t dot = std::min(path[1].find('.', start), path[1].size());
    ns.push_back(path[1].substr(start, dot - start));
    start = dot + 1;
  }
  if (std::find(ns.begin(), ns.end(), "") != ns.end()) ns.clear();
  const std::string& name = path[2];
  const std::string shown = query::LakeTableName(ns, name);
  if (ns.empty() || name.empty() || !may_read(ns, name)) {
    return ErrorResponse(404, "NO_SUCH_TABLE", fmt::format("no table {}", shown));
  }
  Result<lake::Table> table = catalog.LoadTable(ns, name);
  if (!table.ok()) {
    if (table.status().code() == StatusCode::kNotFound) {
      return ErrorResponse(404, "NO_SUCH_TABLE", table.status().message());
    }
    return FromStatus(table.status());
  }
  const lake::TableMetadata& m = table->metadata();
  if (path.size() == 3) return JsonResponse(200, TableDetailJson(ns, name, m));
  if (maintenance) return Maintenance(req, std::move(*table));

  Result<int64_t> wanted = QueryInt(req, "snapshot", -1);
  if (!wanted.ok()) return BadRequest(wanted.status().message());
  const lake::Snapshot* snapshot = *wanted < 0 ? m.CurrentSnapshot() : m.FindSnapshot(*wanted);
  if (*wanted >= 0 && snapshot == nullptr) {
    return ErrorResponse(404, "NO_SUCH_SNAPSHOT",
                         fmt::format("table {} has no snapshot {}", shown, *wanted));
  }
  Json files = Json::array();
  if (snapshot != nullptr) {
    Result<std::vector<lake::ManifestFile>> manifests = lake::ReadManifestsOf(*snapshot);
    if (!manifests.ok()) return FromStatus(manifests.status());
    for (const lake::ManifestFile& mf : *manifests) {
      Result<std::vector<lake::ManifestEntry>> entries = lake::ReadEntriesOf(mf);
      if (!entries.ok()) return FromStatus(entries.status());
      for (const lake::ManifestEntry& e : *entries) {
        if (e.status == lake::EntryStatus::kDeleted) continue;  // not in this snapshot
        files.push_back(Json{{"path", e.file.file_path},
                             {"content", ContentName(e.file.content)},
                             {"format", e.file.file_format},
                             {"records", e.file.record_count},
                             {"size_bytes", e.file.file_size_in_bytes},
                             {"partition", PartitionJson(e.file.partition)}});
      }
    }
  }
  return JsonResponse(
      200, Json{{"snapshot_id", snapshot ? Json(IdText(snapshot->snapshot_id)) : Json(nullptr)},
                {"files", std::move(files)}});
}

HttpResponse ConsoleApi::Maintenance(const HttpRequest& req, lake::Table table) {
  Result<Json> body =
      ParseBody(req, {"action", "dry_run", "target_file_size_bytes", "older_than_ms"});
  if (!body.ok()) return BadRequest(body.status().message());
  Result<std::optional<std::string>> action = OptionalString(*body, "action");
  if (!action.ok()) return BadRequest(action.status().message());
  if (!action->has_value() || (**action != "compact" && **action != "expire")) {
    return BadRequest("action: compact or expire");
  }
  const Json& dry = (*body)["dry_run"];
  if (!dry.is_null() && !dry.is_boolean()) return BadRequest("dry_run: true or false");
  const bool dry_run = dry.is_null() || dry.get<bool>();  // a preview unless asked otherwise
  // Running it rewrites and deletes the lake's files as the process: whom the process
  // trusts with its own files, as for pipelines. A preview only reads.
  if (!dry_run && options_.may_run_pipelines && !options_.may_run_pipelines(req.principal)) {
    return ErrorResponse(403, "MAINTENANCE_NEEDS_SUPER_USER",
                         "compaction and expiry rewrite and delete the table's files as the "
                         "process: only its super users may run them (a preview is open)");
  }
  if (**action == "compact") {
    Result<int64_t> target = IntField(*body, "target_file_size_bytes", int64_t{128} << 20);
    if (!target.ok()) return BadRequest(target.status().message());
    if (*target < (1 << 20)) return BadRequest("target_file_size_bytes: at least 1 MiB");
    // The files are read and written by a DuckDB of this request's own.
    auto db = duck::Database::Open({.memory_limit_bytes = 512 << 20, .threads = 1});
    if (!db.ok()) return FromStatus(db.status());
    auto conn = duck::Connection::Open(**db);
    if (!conn.ok()) return FromStatus(conn.status());
    Result<lake::CompactResult> c = lake::Compact(
        std::move(table), {.target_file_size_bytes = *target, .dry_run = dry_run}, **conn);
    if (!c.ok()) return FromStatus(c.status());
    return JsonResponse(
        200, Json{{"action", "compact"},
                  {"dry_run", dry_run},
                  {"target_file_size_bytes", *target},
                  {"snapshot_id", c->snapshot_id ? Json(IdText(*c->snapshot_id)) : Json(nullptr)},
                  {"partitions", c->partitions},
                  {"files_rewritten", c->files_rewritten},
                  {"bytes_rewritten", c->bytes_rewritten},
                  {"files_written", c->files_written},
                  {"records", c->records}});
  }
  Result<int64_t> older = IntField(*body, "older_than_ms", int64_t{7} * 24 * 3600 * 1000);
  if (!older.ok()) return BadRequest(older.status().message());
  if (*older < 0) return BadRequest("older_than_ms: not negative");
  const int64_t now = Clock::Real()->NowMillis();
  if (dry_run) {
    Result<lake::ExpirePlan> plan = lake::PlanExpire(table, *older, now);
    if (!plan.ok()) return FromStatus(plan.status());
    Json ids = Json::array();
    for (int64_t id : plan->snapshot_ids) ids.push_back(IdText(id));
    return JsonResponse(200, Json{{"action", "expire"},
                                  {"dry_run", true},
                                  {"older_than_ms", *older},
                                  {"snapshots", std::move(ids)},
                                  {"files", plan->files},
                                  {"carries_offsets", plan->carries_offsets}});
  }
  Result<lake::ExpireResult> e = lake::Expire(std::move(table), *older, now);
  if (!e.ok()) return FromStatus(e.status());
  return JsonResponse(
      200, Json{{"action", "expire"},
                {"dry_run", false},
                {"older_than_ms", *older},
                {"snapshots_removed", e->snapshots_removed},
                {"snapshots_kept", e->snapshots_kept},
                {"files", e->data_files_deleted + e->manifests_deleted + e->manifest_lists_deleted +
                              e->metadata_files_deleted + e->orphans_deleted},
                {"bytes_deleted", e->bytes_deleted}});
}

}  // namespace sluice::console
