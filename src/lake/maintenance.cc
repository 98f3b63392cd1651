#include "lake/maintenance.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "lake/data_files.h"
#include "lake/deletes.h"
#include "lake/duck_types.h"
#include "lake/object_cache.h"
#include "lake/parquet_read.h"
#include "lake/storage.h"
#include "lake/table.h"
#include "lake/table_files.h"
#include "lake/table_update.h"

namespace sluice::lake {
namespace {

namespace fs = std::filesystem;

int64_t RealNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Paths compared as the file system resolves them (symbolic links followed), so a table
// reached through another spelling of its directory never mistakes a live file for an
// unreferenced one.
std::string Normal(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  return (ec ? fs::path(path).lexically_normal() : p).string();
}

// A location as files are compared: a local path resolved (Normal), an S3 location in its
// one spelling (s3://); "" when it is neither.
std::string KeyOf(std::string_view location) {
  if (IsS3Location(location)) return NormalLocation(location);
  Result<std::string> p = LocalPath(location);
  return p.ok() ? Normal(*p) : std::string();
}

// The table's root as KeyOf spells its files.
std::string RootKey(const std::string& table_root) {
  return IsS3Location(table_root) ? NormalLocation(table_root) : Normal(table_root);
}

bool Inside(const std::string& path, const std::string& root) {
  return path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0 &&
         path[root.size()] == '/';
}

// ---------------------------------------------------------------------------------------
// Compaction

struct Live {
  ManifestEntry entry;
  int32_t spec_id = 0;
};

std::string KeyDir(const std::string& key) { return key.substr(0, key.rfind('/')); }

// Packs `files` (sorted by size) into bins of at most `target` bytes; bins of one file
// change nothing and are dropped.
std::vector<std::vector<const Live*>> Bins(std::vector<const Live*> files, int64_t target) {
  std::sort(files.begin(), files.end(), [](const Live* a, const Live* b) {
    if (a->entry.file.file_size_in_bytes != b->entry.file.file_size_in_bytes) {
      return a->entry.file.file_size_in_bytes > b->entry.file.file_size_in_bytes;
    }
    return a->entry.file.file_path < b->entry.file.file_path;
  });
  std::vector<std::vector<const Live*>> bins;
  std::vector<int64_t> sizes;
  for (const Live* f : files) {  // first fit, largest first
    const int64_t size = f->entry.file.file_size_in_bytes;
    size_t i = 0;
    while (i < bins.size() && sizes[i] + size > target) ++i;
    if (i == bins.size()) {
      bins.emplace_back();
      sizes.push_back(0);
    }
    bins[i].push_back(f);
    sizes[i] += size;
  }
  std::erase_if(bins, [](const auto& b) { return b.size() < 2; });
  return bins;
}

void RemoveQuietly(const std::string& location) { (void)DeleteLocation(location); }

// The local files DuckDB reads for `locations`: the paths of local ones, copies in the
// object cache of S3 ones (held by `holds` while they are read).
Result<std::vector<std::string>> LocalCopies(
    const std::vector<const DataFile*>& files,
    std::vector<std::shared_ptr<const CachedObject>>* holds) {
  std::vector<std::string> out(files.size());
  std::vector<std::string> remote;
  std::vector<uint64_t> sizes;
  std::vector<size_t> at;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& location = files[i]->file_path;
    if (IsS3Location(location)) {
      remote.push_back(NormalLocation(location));
      sizes.push_back(static_cast<uint64_t>(std::max<int64_t>(0, files[i]->file_size_in_bytes)));
      at.push_back(i);
      continue;
    }
    ASSIGN_OR_RETURN(out[i], LocalPath(location));
  }
  if (!remote.empty()) {
    ASSIGN_OR_RETURN(ObjectCache * cache, S3ObjectCache());
    ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const CachedObject>> copies,
                     cache->Fetch(remote, sizes));
    for (size_t j = 0; j < at.size(); ++j) out[at[j]] = copies[j]->path();
    holds->insert(holds->end(), copies.begin(), copies.end());
  }
  return out;
}

}  // namespace

Result<CompactResult> Compact(const std::string& table_root, const CompactOptions& options,
                              duck::Connection& conn) {
  ASSIGN_OR_RETURN(Table table, Table::Load(table_root));
  return Compact(std::move(table), options, conn);
}

Result<CompactResult> Compact(Table table, const CompactOptions& options, duck::Connection& conn) {
  if (options.target_file_size_bytes <= 0) {
    return InvalidArgumentError("target file size {} is not positive",
                                options.target_file_size_bytes);
  }
  const std::string table_root = table.store().Describe();  // for messages
  CompactResult out;
  const TableMetadata base = table.metadata();
  if (base.CurrentSnapshot() == nullptr) return out;
  const Schema* schema = base.CurrentSchema();
  const PartitionSpec* spec = base.DefaultSpec();
  if (schema == nullptr || spec == nullptr)
    return CorruptionError("{}: no current schema or spec", table_root);

  // The live files of the default spec, by partition tuple, and the live delete files
  // (Iceberg v2, written by other engines): a rewritten file's rows are read with the
  // deletes that apply to it, so the new file holds only the rows still live.
  std::vector<Live> live;
  std::vector<Live> deletes;
  ASSIGN_OR_RETURN(auto manifests, table.CurrentManifests());
  for (auto& [m, entries] : manifests) {
    for (ManifestEntry& e : entries) {
      if (e.status == EntryStatus::kDeleted) continue;
      if ((e.file.content != 0) != (m.content != 0)) {
        return CorruptionError("{}: manifest {} mixes data and delete files", table_root,
                               m.manifest_path);
      }
      if (e.file.content != 0 && e.file.file_format != "PARQUET" &&
          e.file.file_format != "parquet") {
        return UnimplementedError("{}: delete file {} is {}; only Parquet can be applied",
                                  table_root, e.file.file_path, e.file.file_format);
      }
      (e.file.content != 0 ? deletes : live).push_back(Live{std::move(e), m.partition_spec_id});
    }
  }
  auto spec_of = [&](int32_t id) -> const PartitionSpec* { return base.FindSpec(id); };
  for (const Live& d : deletes) {
    if (spec_of(d.spec_id) == nullptr)
      return CorruptionError("{}: delete file {} has an unknown spec {}", table_root,
                             d.entry.file.file_path, d.spec_id);
  }
  std::map<std::string, std::vector<const Live*>> small;  // partition tuple (as text) -> files
  const double limit = static_cast<double>(options.target_file_size_bytes) * options.small_fraction;
  for (const Live& l : live) {
    if (l.spec_id != spec->spec_id || l.entry.file.file_format != "PARQUET") continue;
    if (static_cast<double>(l.entry.file.file_size_in_bytes) >= limit) continue;
    small[l.entry.file.partition.ToString()].push_back(&l);
  }

  // Files are read by field id: a table whose files may lack them (imported, with a name
  // mapping) would read as NULLs and lose its data in the rewrite, so it is refused, and
  // so is any small file without field ids.
  if (base.properties.contains("schema.name-mapping.default")) {
    return UnimplementedError(
        "{}: the table has a name mapping (schema.name-mapping.default): its files may lack "
        "field ids; compacting such tables is not supported",
        table_root);
  }
  if (options.dry_run) {
    for (const auto& [partition, files] : small) {
      std::vector<std::vector<const Live*>> bins = Bins(files, options.target_file_size_bytes);
      if (!bins.empty()) ++out.partitions;
      for (const auto& bin : bins) {
        ++out.files_written;
        for (const Live* f : bin) {
          ++out.files_rewritten;
          out.bytes_rewritten += f->entry.file.file_size_in_bytes;
          out.records += f->entry.file.record_count;
        }
      }
    }
    return out;
  }
  // Write the new files: columns read by field id, so renamed columns keep their data,
  // columns added after a file was written read as NULL and promoted types are cast.
  ASSIGN_OR_RETURN(const std::string data_dir, table.DataDir());
  ASSIGN_OR_RETURN(const std::string manifest_dir, table.ManifestDir());
  const bool remote = IsS3Location(data_dir);
  std::string staging;  // S3: where new files are written before their upload
  if (remote) {
    ASSIGN_OR_RETURN(staging, NewS3StagingDir());
  }
  struct StagingGone {
    const std::string& dir;
    ~StagingGone() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } staging_gone{staging};
  std::vector<DataFile> written;
  std::vector<std::string> written_paths;                // locations
  std::unordered_map<std::string, const Live*> removed;  // file_path -> entry
  auto discard = [&]() {
    for (const std::string& p : written_paths) RemoveQuietly(p);
  };
  for (const auto& [partition, files] : small) {
    std::vector<std::vector<const Live*>> bins = Bins(files, options.target_file_size_bytes);
    if (!bins.empty()) ++out.partitions;
    for (const auto& bin : bins) {
      std::vector<const DataFile*> inputs;
      int64_t records = 0;
      for (const Live* f : bin) {
        inputs.push_back(&f->entry.file);
        records += f->entry.file.record_count;
      }
      // The deletes applying to each file of the bin.
      std::vector<std::vector<const Live*>> applying(bin.size());
      std::vector<const DataFile*> delete_inputs;
      std::map<const Live*, size_t> delete_index;  // into delete_inputs
      for (size_t i = 0; i < bin.size(); ++i) {
        for (const Live& d : deletes) {
          if (!DeleteApplies(d.entry, *spec_of(d.spec_id), bin[i]->entry, *spec)) continue;
          applying[i].push_back(&d);
          if (delete_index.emplace(&d, delete_inputs.size()).second)
            delete_inputs.push_back(&d.entry.file);
        }
      }
      std::vector<std::shared_ptr<const CachedObject>> holds;
      Result<std::vector<std::string>> paths = LocalCopies(inputs, &holds);
      Result<std::vector<std::string>> delete_paths =
          paths.ok() ? LocalCopies(delete_inputs, &holds) : paths;
      if (!paths.ok() || !delete_paths.ok()) {
        discard();
        return (paths.ok() ? delete_paths : paths).status().WithContext(table_root);
      }
      // Files are read by field id: one without them (imported) would read as NULLs and
      // lose its values in the rewrite.
      std::vector<std::string> quoted;
      for (const std::string& p : *paths) quoted.push_back(duck::QuoteLiteral(p));
      Result<std::vector<std::vector<std::optional<std::string>>>> without = conn.QueryText(
          fmt::format("SELECT file_name FROM parquet_schema([{}]) GROUP BY file_name "
                      "HAVING count(field_id) = 0 ORDER BY file_name LIMIT 1",
                      fmt::join(quoted, ", ")));
      if (!without.ok() || (!without->empty() && (*without)[0][0])) {
        discard();
        if (!without.ok()) return without.status();
        std::string name = *(*without)[0][0];
        for (size_t i = 0; i < paths->size(); ++i) {
          if ((*paths)[i] == name) name = inputs[i]->file_path;
        }
        return UnimplementedError(
            "{}: data file {} has no Iceberg field ids; compacting it would lose its values",
            table_root, name);
      }
      // Beside the first file when it is in the table's data directory (its partition's
      // directory), else in data/.
      std::string dir = KeyDir(KeyOf(bin.front()->entry.file.file_path));
      if (dir != KeyOf(data_dir) && !Inside(dir, KeyOf(data_dir))) dir = data_dir;
      const std::string name = NewUuid() + ".parquet";
      const std::string location = fmt::format("{}/{}", dir, name);
      std::string path = location;
      if (remote) {
        path = fmt::format("{}/{}", staging, name);
      } else {
        std::error_code ec;
        fs::create_directories(dir, ec);
      }
      // Files without deletes in one read; those with deletes grouped by them and read
      // with them applied (lake::ScanWithDeletesSql), as queries read them.
      std::vector<std::string> plain;
      std::optional<DeleteScan> with_deletes;
      for (size_t i = 0; i < bin.size(); ++i) {
        if (applying[i].empty()) {
          plain.push_back((*paths)[i]);
          continue;
        }
        if (!with_deletes) with_deletes.emplace();
        DeleteScan& scan = *with_deletes;
        const size_t at = scan.data_paths.size();
        scan.data_paths.push_back((*paths)[i]);
        scan.data_locations.push_back(bin[i]->entry.file.file_path);
        for (const Live* d : applying[i]) {
          // delete_index orders the bin's delete files; the scan's list follows it.
          const size_t k = delete_index[d];
          while (scan.deletes.size() <= k) scan.deletes.emplace_back();
          DeleteScan::File& file = scan.deletes[k];
          file.path = (*delete_paths)[k];
          file.content = d->entry.file.content;
          file.field_ids = d->entry.file.equality_ids;
          file.applies_to.push_back(at);
        }
      }
      std::vector<std::string> parts;
      if (!plain.empty() || !with_deletes) parts.push_back(ParquetScanSql(plain, *schema));
      if (with_deletes) {
        Result<std::string> part = ScanWithDeletesSql(*with_deletes, *schema);
        if (!part.ok()) {
          discard();
          return part.status().WithContext(table_root);
        }
        parts.push_back(std::move(*part));
      }
      std::string select = fmt::format("{}", fmt::join(parts, " UNION ALL "));
      written_paths.push_back(location);
      Result<DataFile> f = WriteDataFile(conn, select, *schema, path, FileUri(location));
      if (f.ok() && remote) {
        Status up = UploadAll({{path, location}});
        if (!up.ok()) f = up;
        std::error_code ec;
        fs::remove(path, ec);
      }
      if (!f.ok()) {
        discard();
        return f.status().WithContext(
            fmt::format("{}: rewriting {} files", table_root, bin.size()));
      }
      // Deletes make fewer rows; without them every row moves.
      if (!with_deletes ? f->record_count != records : f->record_count > records) {
        discard();
        return InternalError("{}: rewriting {} files gave {} rows, not {}", table_root, bin.size(),
                             f->record_count, records);
      }
      f->partition = bin.front()->entry.file.partition;
      out.files_rewritten += static_cast<int64_t>(bin.size());
      for (const Live* l : bin) {
        out.bytes_rewritten += l->entry.file.file_size_in_bytes;
        removed[l->entry.file.file_path] = l;
      }
      out.bytes_written += f->file_size_in_bytes;
      out.records += f->record_count;
      written.push_back(std::move(*f));
    }
  }
  out.files_written = static_cast<int64_t>(written.size());
  if (written.empty()) return out;
  if (options.before_commit) options.before_commit();

  // One replace snapshot, built on whatever is current at each attempt.
  bool gave_up = false;
  int64_t deletes_dropped = 0;  // by the attempt that commits
  std::vector<std::string> manifests_written;
  Result<int64_t> id = table.Commit("replace", [&](const CommitAttempt& a) -> Result<SnapshotPlan> {
    SnapshotPlan plan;
    deletes_dropped = 0;
    const Snapshot* current = a.base.CurrentSnapshot();
    if (current == nullptr) {
      gave_up = true;
      return AbortedError("{}: compaction gave up: the table has no current snapshot any more",
                          table_root);
    }
    ASSIGN_OR_RETURN(ManifestContext context, ContextOf(a.base));
    ASSIGN_OR_RETURN(std::vector<ManifestFile> list, ReadManifestsOf(*current));
    std::vector<ManifestEntry> entries;
    for (const DataFile& f : written) {
      entries.push_back(
          ManifestEntry{EntryStatus::kAdded, std::nullopt, std::nullopt, std::nullopt, f});
      plan.changes.added_files += 1;
      plan.changes.added_records += f.record_count;
      plan.changes.added_bytes += f.file_size_in_bytes;
    }
    ManifestFile mine;
    mine.partition_spec_id = context.spec_id;
    mine.sequence_number = a.sequence_number;
    mine.min_sequence_number = a.sequence_number;
    mine.added_snapshot_id = a.snapshot_id;
    mine.added_files_count = static_cast<int32_t>(written.size());
    mine.added_rows_count = plan.changes.added_records;
    std::unordered_set<std::string> found;
    std::vector<ManifestFile> kept;
    std::vector<ManifestFile> delete_manifests;  // decided once the live data is known
    // The data files live after this snapshot, with their specs: the base's not rewritten,
    // and ours (of this attempt's sequence number).
    std::vector<std::pair<ManifestEntry, const PartitionSpec*>> remaining;
    for (const DataFile& f : written) {
      ManifestEntry e{EntryStatus::kAdded, a.snapshot_id, a.sequence_number, a.sequence_number, f};
      remaining.emplace_back(std::move(e), a.base.DefaultSpec());
    }
    for (const ManifestFile& m : list) {
      if (m.content != 0) {
        delete_manifests.push_back(m);
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<ManifestEntry> old, ReadEntriesOf(m));
      for (const ManifestEntry& e : old) {
        if (e.status != EntryStatus::kDeleted && !removed.contains(e.file.file_path))
          remaining.emplace_back(e, a.base.FindSpec(m.partition_spec_id));
      }
      bool touched = false;
      for (const ManifestEntry& e : old) {
        if (e.status != EntryStatus::kDeleted && removed.contains(e.file.file_path)) touched = true;
      }
      if (!touched) {
        kept.push_back(m);
        continue;
      }
      if (m.partition_spec_id != context.spec_id) {
        return InternalError("{}: a rewritten file is in a manifest of spec {}", table_root,
                             m.partition_spec_id);
      }
      // The manifest's entries move into this snapshot's: rewritten files deleted, the
      // others existing (their ids and sequence numbers kept).
      for (ManifestEntry& e : old) {
        if (e.status == EntryStatus::kDeleted) continue;
        if (removed.contains(e.file.file_path)) {
          if (!found.insert(e.file.file_path).second) continue;
          e.status = EntryStatus::kDeleted;
          e.snapshot_id = a.snapshot_id;
          plan.changes.deleted_files += 1;
          plan.changes.deleted_records += e.file.record_count;
          plan.changes.deleted_bytes += e.file.file_size_in_bytes;
          mine.deleted_files_count += 1;
          mine.deleted_rows_count += e.file.record_count;
        } else {
          e.status = EntryStatus::kExisting;
          mine.existing_files_count += 1;
          mine.existing_rows_count += e.file.record_count;
          mine.min_sequence_number =
              std::min(mine.min_sequence_number, e.sequence_number.value_or(a.sequence_number));
        }
        entries.push_back(std::move(e));
      }
    }
    if (found.size() != removed.size()) {
      // Another commit removed a file this one rewrote: committing would bring its rows back.
      std::string missing;
      for (const auto& [path, l] : removed) {
        if (!found.contains(path)) {
          missing = path;
          break;
        }
      }
      gave_up = true;
      return AbortedError(
          "{}: compaction gave up: {} is no longer live (removed by a concurrent compaction or "
          "expiry); nothing was committed",
          table_root, missing);
    }
    std::string path = fmt::format("{}/{}-m0.avro", manifest_dir, NewUuid());
    ASSIGN_OR_RETURN(std::string bytes, WriteManifest(context, entries));
    manifests_written.push_back(path);
    RETURN_IF_ERROR(WriteLocation(path, bytes));
    mine.manifest_path = FileUri(path);
    mine.manifest_length = static_cast<int64_t>(bytes.size());
    // Field summaries per partition field (Java's engines fail on an empty list).
    ASSIGN_OR_RETURN(Type tuple, a.base.DefaultSpec()->PartitionType(*a.base.CurrentSchema()));
    ASSIGN_OR_RETURN(mine.partitions, SummarizePartitions(tuple, entries));
    plan.manifests.push_back(std::move(mine));
    for (ManifestFile& m : kept) plan.manifests.push_back(std::move(m));
    // A delete file goes once no live data file it applies to remains (the rewritten
    // files hold their rows with it applied, under a newer sequence number).
    for (const ManifestFile& m : delete_manifests) {
      const PartitionSpec* dspec = a.base.FindSpec(m.partition_spec_id);
      if (dspec == nullptr || m.partition_spec_id != context.spec_id) {
        plan.manifests.push_back(m);  // another spec's: kept as it is
        continue;
      }
      ASSIGN_OR_RETURN(std::vector<ManifestEntry> old, ReadEntriesOf(m));
      bool dropped = false;
      ManifestFile rewritten;
      rewritten.content = m.content;
      rewritten.partition_spec_id = m.partition_spec_id;
      rewritten.sequence_number = a.sequence_number;
      rewritten.min_sequence_number = a.sequence_number;
      rewritten.added_snapshot_id = a.snapshot_id;
      std::vector<ManifestEntry> out;
      for (ManifestEntry& e : old) {
        if (e.status == EntryStatus::kDeleted) continue;
        bool used = false;
        for (const auto& [data, data_spec] : remaining) {
          if (data_spec != nullptr && DeleteApplies(e, *dspec, data, *data_spec)) {
            used = true;
            break;
          }
        }
        rewritten.min_sequence_number =
            std::min(rewritten.min_sequence_number, e.sequence_number.value_or(a.sequence_number));
        if (used) {
          e.status = EntryStatus::kExisting;
          rewritten.existing_files_count += 1;
          rewritten.existing_rows_count += e.file.record_count;
        } else {
          dropped = true;
          e.status = EntryStatus::kDeleted;
          e.snapshot_id = a.snapshot_id;
          rewritten.deleted_files_count += 1;
          rewritten.deleted_rows_count += e.file.record_count;
          ++deletes_dropped;
          plan.changes.removed_delete_files += 1;
          (e.file.content == 1 ? plan.changes.removed_position_deletes
                               : plan.changes.removed_equality_deletes) += e.file.record_count;
        }
        out.push_back(std::move(e));
      }
      if (!dropped) {
        plan.manifests.push_back(m);
        continue;
      }
      std::string path = fmt::format("{}/{}-m0.avro", manifest_dir, NewUuid());
      ASSIGN_OR_RETURN(std::string bytes, WriteManifest(context, out));
      manifests_written.push_back(path);
      RETURN_IF_ERROR(WriteLocation(path, bytes));
      rewritten.manifest_path = FileUri(path);
      rewritten.manifest_length = static_cast<int64_t>(bytes.size());
      ASSIGN_OR_RETURN(Type tuple, dspec->PartitionType(*a.base.CurrentSchema()));
      ASSIGN_OR_RETURN(rewritten.partitions, SummarizePartitions(tuple, out));
      plan.manifests.push_back(std::move(rewritten));
    }
    return plan;
  });
  if (!id.ok()) {
    // Nothing of ours was committed: what this run wrote is nobody's.
    if (gave_up) {
      discard();
      for (const std::string& p : manifests_written) RemoveQuietly(p);
    }
    return id.status();
  }
  out.snapshot_id = *id;
  out.delete_files_removed = deletes_dropped;
  return out;
}

// ---------------------------------------------------------------------------------------
// Expiry

namespace {

// Files reachable from snapshots, read once per manifest list and manifest (they never
// change once written).
class Reach {
 public:
  // Adds the manifest list, manifests and data files of `s` (only live entries when
  // `live_only`). `missing_ok`: a list or manifest that is gone adds nothing (a removed
  // snapshot's, deleted by an earlier expiry that stopped halfway); corruption is an error
  // either way.
  Status Add(const Snapshot& s, bool live_only, bool missing_ok,
             std::unordered_set<std::string>* out) {
    out->insert(KeyOf(s.manifest_list));
    const std::vector<ManifestFile>* list = nullptr;
    if (auto it = lists_.find(s.manifest_list); it != lists_.end()) {
      list = &it->second;
    } else {
      Result<std::vector<ManifestFile>> read = ReadManifestsOf(s);
      if (!read.ok()) {
        if (missing_ok && read.status().code() == StatusCode::kNotFound) return Status::OK();
        return read.status();
      }
      list = &lists_.emplace(s.manifest_list, std::move(*read)).first->second;
    }
    for (const ManifestFile& m : *list) {
      out->insert(KeyOf(m.manifest_path));
      const std::vector<std::pair<std::string, bool>>* files = nullptr;
      if (auto it = manifests_.find(m.manifest_path); it != manifests_.end()) {
        files = &it->second;
      } else {
        Result<std::vector<ManifestEntry>> read = ReadEntriesOf(m);
        if (!read.ok()) {
          if (missing_ok && read.status().code() == StatusCode::kNotFound) continue;
          return read.status();
        }
        std::vector<std::pair<std::string, bool>> paths;
        for (const ManifestEntry& e : *read)
          paths.emplace_back(KeyOf(e.file.file_path), e.status != EntryStatus::kDeleted);
        files = &manifests_.emplace(m.manifest_path, std::move(paths)).first->second;
      }
      for (const auto& [path, live] : *files) {
        if (live || !live_only) out->insert(path);
      }
    }
    return Status::OK();
  }

  Status AddAll(const TableMetadata& m, std::unordered_set<std::string>* out) {
    for (const Snapshot& s : m.snapshots)
      RETURN_IF_ERROR(Add(s, /*live_only=*/true, /*missing_ok=*/false, out));
    return Status::OK();
  }

 private:
  std::unordered_map<std::string, std::vector<ManifestFile>> lists_;
  std::unordered_map<std::string, std::vector<std::pair<std::string, bool>>> manifests_;
};

// The snapshots to remove: replaced before `cutoff`, not current, not named by a ref.
std::vector<int64_t> Expired(const TableMetadata& m, int64_t cutoff) {
  std::set<int64_t> keep;
  if (m.current_snapshot_id) keep.insert(*m.current_snapshot_id);
  for (const auto& [name, ref] : m.refs) keep.insert(ref.snapshot_id);
  std::unordered_map<int64_t, int64_t> replaced_at;  // snapshot -> its first child's time
  for (const Snapshot& s : m.snapshots) {
    if (!s.parent_snapshot_id) continue;
    auto [it, added] = replaced_at.emplace(*s.parent_snapshot_id, s.timestamp_ms);
    if (!added) it->second = std::min(it->second, s.timestamp_ms);
  }
  std::vector<int64_t> out;
  for (const Snapshot& s : m.snapshots) {
    if (keep.contains(s.snapshot_id)) continue;
    auto it = replaced_at.find(s.snapshot_id);
    int64_t until = it == replaced_at.end() ? s.timestamp_ms : std::max(s.timestamp_ms, it->second);
    if (until < cutoff) out.push_back(s.snapshot_id);
  }
  return out;
}

// "v12.metadata.json" -> 12.
std::optional<int64_t> MetadataVersionOf(const std::string& name) {
  constexpr std::string_view kSuffix = ".metadata.json";
  if (name.size() <= 1 + kSuffix.size() || name[0] != 'v' || !name.ends_with(kSuffix))
    return std::nullopt;
  std::string digits = name.substr(1, name.size() - 1 - kSuffix.size());
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::strtoll(digits.c_str(), nullptr, 10);
}

}  // namespace

Result<ExpireResult> Expire(const std::string& table_root, int64_t older_than_ms, int64_t now_ms,
                            int64_t orphan_min_age_ms) {
  ASSIGN_OR_RETURN(Table table, Table::Load(RootKey(table_root)));
  return Expire(std::move(table), older_than_ms, now_ms, orphan_min_age_ms);
}

Result<ExpirePlan> PlanExpire(const Table& table, int64_t older_than_ms, int64_t now_ms) {
  if (older_than_ms < 0) return InvalidArgumentError("older-than {} ms is negative", older_than_ms);
  const TableMetadata& base = table.metadata();
  ExpirePlan plan;
  plan.snapshot_ids = Expired(base, now_ms - older_than_ms);
  if (plan.snapshot_ids.empty()) return plan;
  auto gone = [&](int64_t id) {
    return std::find(plan.snapshot_ids.begin(), plan.snapshot_ids.end(), id) !=
           plan.snapshot_ids.end();
  };
  TableMetadata after = base;
  std::erase_if(after.snapshots, [&](const Snapshot& s) { return gone(s.snapshot_id); });
  plan.carries_offsets =
      NewestSummaries(after, kOffsetsSummaryPrefix) != NewestSummaries(base, kOffsetsSummaryPrefix);
  Reach reach;
  std::unordered_set<std::string> kept;
  std::unordered_set<std::string> candidates;
  RETURN_IF_ERROR(reach.AddAll(after, &kept));
  for (const Snapshot& s : base.snapshots) {
    if (gone(s.snapshot_id)) {
      RETURN_IF_ERROR(reach.Add(s, /*live_only=*/false, /*missing_ok=*/true, &candidates));
    }
  }
  for (const std::string& f : candidates) plan.files += kept.contains(f) ? 0 : 1;
  return plan;
}

Result<ExpireResult> Expire(Table table, int64_t older_than_ms, int64_t now_ms,
                            int64_t orphan_min_age_ms) {
  if (older_than_ms < 0) return InvalidArgumentError("older-than {} ms is negative", older_than_ms);
  if (orphan_min_age_ms < 0)
    return InvalidArgumentError("orphan minimum age {} ms is negative", orphan_min_age_ms);
  const int64_t cutoff = now_ms - older_than_ms;
  const int64_t orphan_cutoff = now_ms - std::max(older_than_ms, orphan_min_age_ms);
  const std::string root = RootKey(table.files().root());
  // A catalog's table: its metadata files are the catalog's to keep or remove.
  const bool catalog_owns_versions = table.store().HonoursMetadataPath();
  ASSIGN_OR_RETURN(const Storage* storage, StorageFor(root));
  ExpireResult out;
  Reach reach;

  // 1. Remove the old snapshots in one metadata commit, having read every file first.
  std::vector<int64_t> removed_ids;
  std::unordered_set<std::string> candidates;  // files of removed snapshots
  bool removed = false;
  for (int round = 0; round < 3 && !removed; ++round) {
    bool carry = false;
    Result<bool> committed = table.CommitUpdates(
        [&](const TableMetadata& base) -> Result<std::vector<TableUpdate>> {
          removed_ids = Expired(base, cutoff);
          candidates.clear();
          if (removed_ids.empty()) return std::vector<TableUpdate>();
          TableMetadata after = base;
          std::erase_if(after.snapshots, [&](const Snapshot& s) {
            return std::find(removed_ids.begin(), removed_ids.end(), s.snapshot_id) !=
                   removed_ids.end();
          });
          if (NewestSummaries(after, kOffsetsSummaryPrefix) !=
              NewestSummaries(base, kOffsetsSummaryPrefix)) {
            carry = true;  // a resuming pipeline would lose its place
            return std::vector<TableUpdate>();
          }
          std::unordered_set<std::string> kept;
          RETURN_IF_ERROR(reach.AddAll(after, &kept));
          for (const Snapshot& s : base.snapshots) {
            if (std::find(removed_ids.begin(), removed_ids.end(), s.snapshot_id) ==
                removed_ids.end())
              continue;
            RETURN_IF_ERROR(reach.Add(s, /*live_only=*/false, /*missing_ok=*/true, &candidates));
          }
          return std::vector<TableUpdate>{RemoveSnapshotsUpdate{removed_ids}};
        },
        RealNowMs());
    if (!committed.ok()) return committed.status();
    if (carry) {
      // Carry the offsets into a new current snapshot (no file changes), then plan again.
      ASSIGN_OR_RETURN(
          int64_t id, table.Commit("replace", [](const CommitAttempt& a) -> Result<SnapshotPlan> {
            SnapshotPlan plan;
            if (a.base.CurrentSnapshot() == nullptr)
              return InternalError("no current snapshot to carry offsets into");
            ASSIGN_OR_RETURN(plan.manifests, ReadManifestsOf(*a.base.CurrentSnapshot()));
            return plan;
          }));
      out.carry_snapshot_id = id;
      continue;
    }
    if (!*committed) break;
    removed = true;
  }
  if (!removed) candidates.clear();
  out.snapshots_removed = removed ? static_cast<int64_t>(removed_ids.size()) : 0;

  // 2. What the newest metadata references (a writer may have committed since).
  RETURN_IF_ERROR(table.Refresh());
  const TableMetadata& now = table.metadata();
  out.snapshots_kept = static_cast<int64_t>(now.snapshots.size());
  std::unordered_set<std::string> kept;
  RETURN_IF_ERROR(reach.AddAll(now, &kept));
  std::unordered_set<std::string> lists;
  for (const Snapshot& s : now.snapshots) lists.insert(KeyOf(s.manifest_list));

  // `size`: from a listing; else asked (nothing there: nothing to do).
  auto remove = [&](const std::string& path, std::optional<uint64_t> size,
                    int64_t* counter) -> Status {
    if (!size) {
      ASSIGN_OR_RETURN(size, storage->Size(path));
      if (!size) return Status::OK();
    }
    RETURN_IF_ERROR(storage->Delete(path));
    ++*counter;
    out.bytes_deleted += static_cast<int64_t>(*size);
    return Status::OK();
  };

  // 3. The files only removed snapshots used: under the table's location, or its
  // write.data.path or write.metadata.path (another table's files are never removed).
  ASSIGN_OR_RETURN(std::string metadata_dir, table.ManifestDir());
  metadata_dir = RootKey(metadata_dir);
  ASSIGN_OR_RETURN(std::string data_path, table.DataDir());
  data_path = RootKey(data_path);
  for (const std::string& path : candidates) {
    if (path.empty() || kept.contains(path) ||
        !(Inside(path, root) || Inside(path, data_path) || Inside(path, metadata_dir)))
      continue;
    std::string name = fs::path(path).filename().string();
    int64_t* counter =
        path.ends_with(".avro") && Inside(path, metadata_dir)
            ? (name.starts_with("snap-") ? &out.manifest_lists_deleted : &out.manifests_deleted)
            : &out.data_files_deleted;
    RETURN_IF_ERROR(remove(path, std::nullopt, counter));
  }

  // 4. Old files nothing references: failed commits' manifests, lists and data files,
  // temporary files, metadata versions out of the log.
  std::unordered_set<std::string> logged;
  for (const MetadataLogEntry& e : now.metadata_log) logged.insert(KeyOf(e.metadata_file));
  const int64_t current_version = table.version();
  // A listing's files as KeyOf spells them, with their sizes and ages (a file whose age
  // the storage does not say is never an orphan).
  auto listing = [&](const std::string& dir) -> Result<std::vector<StoredObject>> {
    ASSIGN_OR_RETURN(std::vector<StoredObject> objects, storage->List(dir));
    for (StoredObject& o : objects) o.location = KeyOf(o.location);
    return objects;
  };
  ASSIGN_OR_RETURN(std::vector<StoredObject> in_metadata, listing(metadata_dir));
  for (const StoredObject& o : in_metadata) {
    const std::string& path = o.location;
    if (!Inside(path, metadata_dir)) continue;
    const std::string name = path.substr(metadata_dir.size() + 1);
    if (name.find('/') != std::string::npos) continue;  // only metadata/'s own files
    if (!o.modified_ms || *o.modified_ms >= cutoff || kept.contains(path)) continue;
    if (std::optional<int64_t> v = MetadataVersionOf(name); v) {
      if (!catalog_owns_versions && *v < current_version && !logged.contains(path))
        RETURN_IF_ERROR(remove(path, o.size, &out.metadata_files_deleted));
    } else if ((name.ends_with(".avro") || name.ends_with(".tmp")) &&
               *o.modified_ms < orphan_cutoff) {
      RETURN_IF_ERROR(remove(path, o.size, &out.orphans_deleted));
    }
  }
  const std::string data_dir = RootKey(table.files().data_dir());
  ASSIGN_OR_RETURN(std::vector<StoredObject> in_data, listing(data_dir));
  for (const StoredObject& o : in_data) {
    const std::string& path = o.location;
    if (!path.ends_with(".parquet") && !path.ends_with(".tmp")) continue;
    if (!o.modified_ms || *o.modified_ms >= orphan_cutoff || kept.contains(path)) continue;
    RETURN_IF_ERROR(remove(path, o.size, &out.orphans_deleted));
  }
  return out;
}

}  // namespace sluice::lake
