#include "lake/table.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "base/crash_point.h"
#include "lake/storage.h"
#include "lake/table_update.h"

namespace sluice::lake {
namespace {

constexpr int kMaxAttempts = 32;
// A snapshot keeps at most this many manifests: past it they are merged into one (a
// pipeline appending every minute would otherwise add a manifest a minute, forever).
constexpr size_t kMergeManifests = 16;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t NewSnapshotId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  int64_t id = 0;
  while (id == 0) id = static_cast<int64_t>(rng() >> 1);
  return id;
}

// The Avro type of a partition value of Iceberg type `t` (the spec's Avro mapping).
Result<std::string> AvroTypeOf(const Type& t) {
  switch (t.id) {
    case TypeId::kBoolean:
      return std::string(R"("boolean")");
    case TypeId::kInt:
      return std::string(R"("int")");
    case TypeId::kLong:
      return std::string(R"("long")");
    case TypeId::kFloat:
      return std::string(R"("float")");
    case TypeId::kDouble:
      return std::string(R"("double")");
    case TypeId::kDate:
      return std::string(R"({"type":"int","logicalType":"date"})");
    case TypeId::kTime:
      return std::string(R"({"type":"long","logicalType":"time-micros"})");
    case TypeId::kTimestamp:
      return std::string(
          R"({"type":"long","logicalType":"timestamp-micros","adjust-to-utc":false})");
    case TypeId::kTimestampTz:
      return std::string(
          R"({"type":"long","logicalType":"timestamp-micros","adjust-to-utc":true})");
    case TypeId::kString:
      return std::string(R"("string")");
    case TypeId::kBinary:
      return std::string(R"("bytes")");
    default:
      return UnimplementedError("partition values of type {} are not supported", t.ToString());
  }
}

// A pause before trying again after a catalog failed mid-commit: up to ~3 s.
void BackOff(int attempt) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  int64_t cap = std::min<int64_t>(3000, int64_t{100} << std::min(attempt, 5));
  std::this_thread::sleep_for(
      std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(cap / 2, cap)(rng)));
}

int64_t SummaryLong(const Snapshot* s, const std::string& key) {
  if (s == nullptr) return 0;
  auto it = s->summary.find(key);
  return it == s->summary.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 10);
}

}  // namespace

Result<ManifestContext> ContextOf(const TableMetadata& metadata) {
  const Schema* schema = metadata.CurrentSchema();
  const PartitionSpec* spec = metadata.DefaultSpec();
  if (schema == nullptr || spec == nullptr)
    return CorruptionError("table metadata without a current schema or spec");
  ManifestContext c;
  c.schema_json = SchemaToJson(*schema).dump();
  c.schema_id = schema->schema_id;
  c.spec_id = spec->spec_id;
  c.spec_fields_json = PartitionSpecToJson(*spec)["fields"].dump();
  ASSIGN_OR_RETURN(Type tuple, spec->PartitionType(*schema));
  std::string fields = "[";
  for (size_t i = 0; i < tuple.fields.size(); ++i) {
    const NestedField& f = tuple.fields[i];
    ASSIGN_OR_RETURN(std::string avro, AvroTypeOf(f.type));
    fields += fmt::format(R"({}{{"name":{},"type":["null",{}],"default":null,"field-id":{}}})",
                          i > 0 ? "," : "", Json(f.name).dump(), avro, f.id);
  }
  c.partition_avro_fields = fields + "]";
  return c;
}

namespace {

class TableFilesStore : public MetadataStore {
 public:
  explicit TableFilesStore(std::string root) : files_(std::move(root)) {}

  Result<std::optional<Version>> Load() const override {
    ASSIGN_OR_RETURN(std::optional<MetadataVersion> current, files_.Current());
    if (!current) return std::optional<Version>();
    Result<TableMetadata> metadata = TableMetadataFromJson(current->json);
    if (!metadata.ok())
      return CorruptionError("{}: {}", current->path, metadata.status().message());
    return std::optional<Version>(
        Version{std::move(*metadata), FileUri(current->path), current->version});
  }

  Result<Version> Commit(const Version& base, const std::vector<TableUpdate>& updates,
                         int64_t now_ms) const override {
    ASSIGN_OR_RETURN(TableMetadata next,
                     ApplyUpdates(base.metadata, base.location, updates,
                                  std::max(now_ms, base.metadata.last_updated_ms)));
    const int64_t version = base.version + 1;
    RETURN_IF_ERROR(files_.CommitVersion(version, TableMetadataToString(next)));
    return Version{std::move(next), FileUri(files_.VersionPath(version)), version};
  }

  std::string Describe() const override { return files_.root(); }

 private:
  TableFiles files_;
};

// The directory or S3 location a table's files live under, from its location.
Result<std::string> RootOf(const std::string& location) {
  if (IsS3Location(location)) return NormalLocation(location);
  ASSIGN_OR_RETURN(std::string path, LocalPath(location));
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

std::shared_ptr<const MetadataStore> FilesStore(const std::string& root) {
  return std::make_shared<TableFilesStore>(root);
}

Result<Table> Table::Load(const std::string& root) {
  auto store = FilesStore(root);
  ASSIGN_OR_RETURN(std::optional<MetadataStore::Version> current, store->Load());
  if (!current)
    return NotFoundError("{} holds no Iceberg table (no metadata/v<N>.metadata.json)", root);
  return Table(std::move(store), TableFiles(root), std::move(*current));
}

Result<Table> Table::Open(std::shared_ptr<const MetadataStore> store) {
  ASSIGN_OR_RETURN(std::optional<MetadataStore::Version> current, store->Load());
  if (!current) return NotFoundError("{}: no such table", store->Describe());
  Result<std::string> root = RootOf(current->metadata.location);
  if (!root.ok()) {
    return InvalidArgumentError("{}: the table's location: {}", store->Describe(),
                                root.status().message());
  }
  return Table(std::move(store), TableFiles(*root), std::move(*current));
}

Result<Table> Table::Create(const std::string& root, const Schema& schema,
                            const PartitionSpec& spec,
                            const std::map<std::string, std::string>& properties) {
  NewTableOptions options;
  options.location = FileUri(root);
  options.schema = schema;
  options.spec = spec;
  options.properties = properties;
  options.now_ms = NowMs();
  ASSIGN_OR_RETURN(TableMetadata metadata, NewTable(options));
  TableFiles files(root);
  Status st = files.CommitVersion(1, TableMetadataToString(metadata));
  if (st.code() == StatusCode::kAlreadyExists) return Load(root);
  RETURN_IF_ERROR(st);
  MetadataStore::Version v{std::move(metadata), FileUri(files.VersionPath(1)), 1};
  return Table(FilesStore(root), std::move(files), std::move(v));
}

Status Table::Refresh() {
  ASSIGN_OR_RETURN(std::optional<MetadataStore::Version> current, store_->Load());
  if (!current) return NotFoundError("{}: the table is gone", store_->Describe());
  metadata_ = std::move(current->metadata);
  metadata_location_ = std::move(current->location);
  version_ = current->version;
  return Status::OK();
}

Status Table::CommitOnce(const std::vector<TableUpdate>& updates, int64_t now_ms) {
  MetadataStore::Version base{metadata_, metadata_location_, version_};
  ASSIGN_OR_RETURN(MetadataStore::Version next, store_->Commit(base, updates, now_ms));
  metadata_ = std::move(next.metadata);
  metadata_location_ = std::move(next.location);
  version_ = next.version;
  return Status::OK();
}

Result<std::vector<ManifestFile>> ReadManifestsOf(const Snapshot& snapshot) {
  const std::string& path = snapshot.manifest_list;
  ASSIGN_OR_RETURN(std::string bytes, ReadLocation(path));
  Result<std::vector<ManifestFile>> list = ReadManifestList(bytes);
  if (!list.ok()) return CorruptionError("{}: {}", path, list.status().message());
  return list;
}

Result<std::vector<ManifestEntry>> ReadEntriesOf(const ManifestFile& m) {
  const std::string& path = m.manifest_path;
  ASSIGN_OR_RETURN(std::string bytes, ReadLocation(path));
  Result<std::vector<ManifestEntry>> entries = ReadManifest(bytes, &m);
  if (!entries.ok()) return CorruptionError("{}: {}", path, entries.status().message());
  return entries;
}

Result<std::vector<std::pair<ManifestFile, std::vector<ManifestEntry>>>> Table::CurrentManifests()
    const {
  std::vector<std::pair<ManifestFile, std::vector<ManifestEntry>>> out;
  const Snapshot* current = metadata_.CurrentSnapshot();
  if (current == nullptr) return out;
  ASSIGN_OR_RETURN(std::vector<ManifestFile> list, ReadManifestsOf(*current));
  for (ManifestFile& m : list) {
    ASSIGN_OR_RETURN(std::vector<ManifestEntry> entries, ReadEntriesOf(m));
    out.emplace_back(std::move(m), std::move(entries));
  }
  return out;
}

std::optional<std::string> NewestSummary(const TableMetadata& metadata, const std::string& key) {
  const Snapshot* s = metadata.CurrentSnapshot();
  for (size_t hops = 0; s != nullptr && hops <= metadata.snapshots.size(); ++hops) {
    if (auto it = s->summary.find(key); it != s->summary.end()) return it->second;
    s = s->parent_snapshot_id ? metadata.FindSnapshot(*s->parent_snapshot_id) : nullptr;
  }
  return std::nullopt;
}

std::map<std::string, std::string> NewestSummaries(const TableMetadata& metadata,
                                                   std::string_view prefix) {
  std::map<std::string, std::string> out;
  const Snapshot* s = metadata.CurrentSnapshot();
  for (size_t hops = 0; s != nullptr && hops <= metadata.snapshots.size(); ++hops) {
    for (auto it = s->summary.lower_bound(std::string(prefix));
         it != s->summary.end() && it->first.starts_with(prefix); ++it) {
      out.emplace(it->first, it->second);  // the newest stays
    }
    s = s->parent_snapshot_id ? metadata.FindSnapshot(*s->parent_snapshot_id) : nullptr;
  }
  return out;
}

namespace {

// A write.*.path property's directory, spelled as the table's root is (a local path or a
// normal S3 location, no trailing '/'); `fallback` when the property is unset or empty.
Result<std::string> PathProperty(const TableMetadata& m, const std::string& key,
                                 const std::string& root, std::string fallback) {
  auto it = m.properties.find(key);
  if (it == m.properties.end() || it->second.empty()) return fallback;
  std::string dir;
  if (IsS3Location(it->second)) {
    dir = NormalLocation(it->second);
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  } else {
    Result<std::string> local = LocalPath(it->second);
    if (!local.ok()) {
      return InvalidArgumentError("{}: property {} = \"{}\": {}", root, key, it->second,
                                  local.status().message());
    }
    dir = std::move(*local);
  }
  if (IsS3Location(dir) != IsS3Location(root)) {
    return InvalidArgumentError(
        "{}: property {} = \"{}\" is on another storage than the table's location; sluice "
        "writes a table's files to one storage",
        root, key, it->second);
  }
  return dir;
}

}  // namespace

Result<std::string> Table::DataDir() const {
  return PathProperty(metadata_, "write.data.path", files_.root(), files_.data_dir());
}

Result<std::string> Table::ManifestDir() const {
  if (!store_->HonoursMetadataPath()) return files_.metadata_dir();
  ASSIGN_OR_RETURN(std::string dir, PathProperty(metadata_, "write.metadata.path", files_.root(),
                                                 files_.metadata_dir()));
  // A directory of the property's is made (the default one never is: 0024 decision 12).
  if (dir != files_.metadata_dir() && !IsS3Location(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IOError("cannot create {} (write.metadata.path): {}", dir, ec.message());
  }
  return dir;
}

std::optional<std::string> Table::NewestSummary(const std::string& key) const {
  return lake::NewestSummary(metadata_, key);
}

Result<int64_t> Table::Append(const std::vector<DataFile>& data, const SummaryFn& summary) {
  ASSIGN_OR_RETURN(const std::string metadata_dir, ManifestDir());
  // The new files' manifest is written once: its added entries inherit the snapshot id and
  // sequence number from whichever list commits it.
  ASSIGN_OR_RETURN(ManifestContext context, ContextOf(metadata_));
  std::vector<ManifestEntry> added;
  SnapshotChanges changes;
  for (const DataFile& f : data) {
    added.push_back(
        ManifestEntry{EntryStatus::kAdded, std::nullopt, std::nullopt, std::nullopt, f});
    changes.added_records += f.record_count;
    changes.added_bytes += f.file_size_in_bytes;
  }
  changes.added_files = static_cast<int64_t>(data.size());
  std::string manifest_path = fmt::format("{}/{}-m0.avro", metadata_dir, NewUuid());
  ASSIGN_OR_RETURN(std::string manifest_bytes, WriteManifest(context, added));
  RETURN_IF_ERROR(WriteLocation(manifest_path, manifest_bytes));

  return Commit("append", [&](const CommitAttempt& a) -> Result<SnapshotPlan> {
    SnapshotPlan plan;
    plan.changes = changes;
    ManifestFile mine;
    mine.manifest_path = FileUri(manifest_path);
    mine.manifest_length = static_cast<int64_t>(manifest_bytes.size());
    mine.partition_spec_id = context.spec_id;
    mine.sequence_number = a.sequence_number;
    mine.min_sequence_number = a.sequence_number;
    mine.added_snapshot_id = a.snapshot_id;
    mine.added_files_count = static_cast<int32_t>(added.size());
    mine.added_rows_count = changes.added_records;
    std::vector<ManifestFile> manifests;
    std::vector<ManifestEntry> merged_entries;  // when the old manifests are merged
    if (const Snapshot* parent = a.base.CurrentSnapshot(); parent != nullptr) {
      ASSIGN_OR_RETURN(manifests, ReadManifestsOf(*parent));
    }
    // Only data manifests of this spec merge: another spec's tuples (a spec evolved by
    // another engine) or delete manifests are kept as they are.
    std::vector<ManifestFile> kept;
    std::vector<ManifestFile> same;
    for (ManifestFile& m : manifests) {
      (m.partition_spec_id == context.spec_id && m.content == 0 ? same : kept)
          .push_back(std::move(m));
    }
    manifests = std::move(same);
    if (manifests.size() + 1 > kMergeManifests) {
      // Merge: every live entry of the old manifests, as existing, plus the new files, in
      // one manifest of this snapshot.
      std::vector<ManifestEntry>& merged = merged_entries;
      merged = added;
      int64_t min_sequence = a.sequence_number;
      int32_t existing_files = 0;
      int64_t existing_rows = 0;
      for (const ManifestFile& m : manifests) {
        ASSIGN_OR_RETURN(std::vector<ManifestEntry> entries, ReadEntriesOf(m));
        for (ManifestEntry& e : entries) {
          if (e.status == EntryStatus::kDeleted) continue;
          e.status = EntryStatus::kExisting;
          min_sequence = std::min(min_sequence, e.sequence_number.value_or(a.sequence_number));
          ++existing_files;
          existing_rows += e.file.record_count;
          merged.push_back(std::move(e));
        }
      }
      std::string merged_path = fmt::format("{}/{}-m0.avro", metadata_dir, NewUuid());
      ASSIGN_OR_RETURN(std::string merged_bytes, WriteManifest(context, merged));
      RETURN_IF_ERROR(WriteLocation(merged_path, merged_bytes));
      mine.manifest_path = FileUri(merged_path);
      mine.manifest_length = static_cast<int64_t>(merged_bytes.size());
      mine.min_sequence_number = min_sequence;
      mine.existing_files_count = existing_files;
      mine.existing_rows_count = existing_rows;
      manifests.clear();
    }
    manifests.insert(manifests.end(), kept.begin(), kept.end());
    // Field summaries for readers that prune manifests by partition (Java's engines read
    // an empty list as one summary per field and fail).
    {
      ASSIGN_OR_RETURN(Type tuple, a.base.DefaultSpec()->PartitionType(*a.base.CurrentSchema()));
      ASSIGN_OR_RETURN(mine.partitions,
                       SummarizePartitions(tuple, merged_entries.empty() ? added : merged_entries));
    }
    manifests.insert(manifests.begin(), mine);
    plan.manifests = std::move(manifests);
    ASSIGN_OR_RETURN(plan.summary, summary(a.base));
    return plan;
  });
}

Result<int64_t> Table::Commit(std::string_view operation, const SnapshotBuilder& build) {
  const int64_t snapshot_id = NewSnapshotId();
  ASSIGN_OR_RETURN(const std::string metadata_dir, ManifestDir());
  bool fresh = true;  // metadata_ was (re)read for this attempt
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    if (!fresh) RETURN_IF_ERROR(Refresh());
    fresh = false;
    // A first attempt may have landed although it reported a failure (the link made, the
    // directory sync failed): then it is done.
    if (metadata_.FindSnapshot(snapshot_id) != nullptr) return snapshot_id;
    const Snapshot* parent = metadata_.CurrentSnapshot();
    const int64_t sequence = metadata_.last_sequence_number + 1;
    Result<SnapshotPlan> plan = build(CommitAttempt{metadata_, snapshot_id, sequence, attempt});
    if (!plan.ok()) {
      // A file the attempt read was removed by a commit that moved the table on (expiry
      // after a compaction): build again on the new current metadata.
      if (plan.status().code() != StatusCode::kNotFound) return plan.status();
      const int64_t read = version_;
      RETURN_IF_ERROR(Refresh());
      if (version_ == read) return plan.status();
      fresh = true;
      continue;
    }
    std::string list_path =
        fmt::format("{}/snap-{}-{}-{}.avro", metadata_dir, snapshot_id, attempt, NewUuid());
    ASSIGN_OR_RETURN(
        std::string list_bytes,
        WriteManifestList(snapshot_id,
                          parent ? std::optional<int64_t>(parent->snapshot_id) : std::nullopt,
                          sequence, plan->manifests));
    RETURN_IF_ERROR(WriteLocation(list_path, list_bytes));
    CrashPoint("iceberg-list-written");

    Snapshot snap;
    snap.snapshot_id = snapshot_id;
    snap.parent_snapshot_id = parent ? std::optional<int64_t>(parent->snapshot_id) : std::nullopt;
    snap.sequence_number = sequence;
    snap.timestamp_ms = std::max(NowMs(), metadata_.last_updated_ms);
    snap.manifest_list = FileUri(list_path);
    snap.operation = std::string(operation);
    snap.schema_id = metadata_.current_schema_id;
    // Offsets first: whatever expiry removes later, this snapshot answers for them.
    snap.summary = NewestSummaries(metadata_, kOffsetsSummaryPrefix);
    const SnapshotChanges& c = plan->changes;
    snap.summary["added-data-files"] = std::to_string(c.added_files);
    snap.summary["added-records"] = std::to_string(c.added_records);
    snap.summary["added-files-size"] = std::to_string(c.added_bytes);
    if (c.deleted_files != 0) {
      snap.summary["deleted-data-files"] = std::to_string(c.deleted_files);
      snap.summary["deleted-records"] = std::to_string(c.deleted_records);
      snap.summary["removed-files-size"] = std::to_string(c.deleted_bytes);
    }
    auto total = [&](const std::string& key, int64_t change) {
      snap.summary[key] = std::to_string(std::max<int64_t>(0, SummaryLong(parent, key) + change));
    };
    total("total-data-files", c.added_files - c.deleted_files);
    total("total-records", c.added_records - c.deleted_records);
    total("total-files-size", c.added_bytes - c.deleted_bytes);
    if (c.removed_delete_files != 0) {
      snap.summary["removed-delete-files"] = std::to_string(c.removed_delete_files);
      snap.summary["removed-position-deletes"] = std::to_string(c.removed_position_deletes);
      snap.summary["removed-equality-deletes"] = std::to_string(c.removed_equality_deletes);
    }
    total("total-delete-files", -c.removed_delete_files);
    total("total-position-deletes", -c.removed_position_deletes);
    total("total-equality-deletes", -c.removed_equality_deletes);
    for (auto& [k, v] : plan->summary) snap.summary[k] = v;

    SnapshotRef main;
    main.snapshot_id = snapshot_id;
    std::vector<TableUpdate> updates = {AddSnapshotUpdate{snap},
                                        SetSnapshotRefUpdate{std::string(kMainBranch), main}};
    Status st = CommitOnce(updates, snap.timestamp_ms);
    if (st.ok()) {
      CrashPoint("iceberg-committed");
      return snapshot_id;
    }
    if (st.code() == StatusCode::kUnavailable) {
      // A catalog failed mid-commit: the outcome is unknown. Re-read: landed, or build
      // again (the next attempt's requirements fail if this one lands after all, and the
      // re-read then finds it).
      BackOff(attempt);
      continue;
    }
    if (st.code() != StatusCode::kAlreadyExists) {
      // Did it land anyway (the link made, a later sync failed)? Then it is committed.
      if (Refresh().ok() && metadata_.FindSnapshot(snapshot_id) != nullptr) return snapshot_id;
      return st;
    }
    // Lost the race: the list written for it is left for expiry; try on the new current.
  }
  return AbortedError("{}: {} commit attempts lost to other writers", store_->Describe(),
                      kMaxAttempts);
}

Result<bool> Table::CommitUpdates(const UpdatesBuilder& build, int64_t now_ms) {
  bool fresh = true;
  for (int attempt = 1; attempt <= kMaxAttempts; ++attempt) {
    if (!fresh) RETURN_IF_ERROR(Refresh());
    fresh = false;
    Result<std::vector<TableUpdate>> updates = build(metadata_);
    if (!updates.ok()) {
      if (updates.status().code() != StatusCode::kNotFound) return updates.status();
      const int64_t read = version_;
      RETURN_IF_ERROR(Refresh());
      if (version_ == read) return updates.status();
      fresh = true;
      continue;
    }
    if (updates->empty()) return false;
    Status st = CommitOnce(*updates, now_ms);
    if (st.ok()) return true;
    if (st.code() == StatusCode::kUnavailable) {
      // Unknown outcome: the re-read shows whether the updates are there (a builder that
      // finds nothing left to do returns none).
      BackOff(attempt);
      continue;
    }
    if (st.code() != StatusCode::kAlreadyExists) return st;
  }
  return AbortedError("{}: {} commit attempts lost to other writers", store_->Describe(),
                      kMaxAttempts);
}

}  // namespace sluice::lake
