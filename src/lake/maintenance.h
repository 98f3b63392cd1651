// Maintenance of an Iceberg table (a directory's or S3 prefix's, or a REST catalog's)
// beside the pipelines writing it (docs/design/
// 0009 #11-14): compaction rewrites small data files into target-sized ones in one `replace`
// snapshot; expiry removes old snapshots, the files only they used, old metadata versions
// and what failed commits left behind. Both commit like any writer (exclusive create,
// rebuilt after a lost race), so a pipeline appending at the same time loses nothing.
//
//   ASSIGN_OR_RETURN(CompactResult c, Compact("/wh/db/events", {.target_file_size_bytes = 128 <<
//   20}, *conn)); ASSIGN_OR_RETURN(ExpireResult e, Expire("/wh/db/events", 3'600'000, NowMs()));
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "duck/database.h"
#include "lake/table.h"

namespace sluice::lake {

struct CompactOptions {
  int64_t target_file_size_bytes = int64_t{128} << 20;  // the iceberg sink's default
  // Files below this fraction of the target are small: only they are rewritten.
  double small_fraction = 0.75;
  // Called once the new files are written, before the first commit attempt (tests race
  // other writers here).
  std::function<void()> before_commit;
  // Nothing read, written or committed: the result says what a compaction would rewrite
  // now (partitions, files_rewritten, bytes_rewritten, records; files_written: the new
  // files' count), for a preview.
  bool dry_run = false;
};

struct CompactResult {
  std::optional<int64_t> snapshot_id;  // none: nothing to rewrite, nothing committed
  int64_t partitions = 0;              // partitions that had files rewritten
  int64_t files_rewritten = 0;         // small files replaced
  int64_t files_written = 0;
  int64_t bytes_rewritten = 0;
  int64_t bytes_written = 0;
  int64_t records = 0;               // rows moved (fewer after when delete files applied)
  int64_t delete_files_removed = 0;  // delete files nothing live they apply to remains
};

// Rewrites the live data files of the default spec that are small, per partition, into
// files of about the target size (read with DuckDB's read_parquet by field id, so renamed
// and added columns keep their data, and written with
// WriteDataFile: field ids and column statistics), committed as one `replace` snapshot
// in which they are DELETED and the new files ADDED; manifests without a rewritten file
// are reused. Appends committed meanwhile are kept (the snapshot is built again on them);
// when a file it rewrote was removed by another commit (a concurrent compaction or
// expiry), it gives up with Aborted and deletes the files it wrote. Corrupt metadata or
// manifests are errors naming the file. `conn` reads and writes the Parquet files.
Result<CompactResult> Compact(const std::string& table_root, const CompactOptions& options,
                              duck::Connection& conn);
// The same on an opened table: a directory's, or a REST catalog's (Table::Open of a
// RestTableStore), whose commit goes through the catalog with its requirements.
Result<CompactResult> Compact(Table table, const CompactOptions& options, duck::Connection& conn);

struct ExpireResult {
  int64_t snapshots_removed = 0;
  int64_t snapshots_kept = 0;
  // A `replace` snapshot without changes, committed first when removing old snapshots
  // would have lost a `sluice.offsets.*` value that only they held (tables written
  // before offsets were carried forward).
  std::optional<int64_t> carry_snapshot_id;
  int64_t data_files_deleted = 0;
  int64_t manifests_deleted = 0;
  int64_t manifest_lists_deleted = 0;
  int64_t metadata_files_deleted = 0;  // v<N>.metadata.json out of the metadata log
  int64_t orphans_deleted = 0;         // files no snapshot references: failed commits, *.tmp
  int64_t bytes_deleted = 0;
};

// Removes the snapshots that stopped being current (were replaced) more than
// `older_than_ms` before `now_ms`, except the current one and those refs name, in one
// metadata commit; then deletes the files (data files, manifests, manifest lists) that
// only removed snapshots used, and, in metadata/ and data/, files no snapshot of the
// current metadata references that are older than the limit (a writer may be about to
// commit a younger one): leftovers of failed commits, *.tmp, and v<N>.metadata.json
// versions out of the metadata log (write.metadata.previous-versions-max). Unreferenced
// data files, manifests and *.tmp must also be older than `orphan_min_age_ms` (default
// one hour): a writer's files are unreferenced until it commits, and a short
// `older_than_ms` must not take the files of a slow compaction. Only files inside
// `table_root` are deleted. Everything is read before anything is deleted: a corrupt or
// truncated manifest, list or metadata file is an error naming it.
inline constexpr int64_t kDefaultOrphanMinAgeMs = 3'600'000;
Result<ExpireResult> Expire(const std::string& table_root, int64_t older_than_ms, int64_t now_ms,
                            int64_t orphan_min_age_ms = kDefaultOrphanMinAgeMs);
// The same on an opened table. A REST catalog's table (MetadataStore::HonoursMetadataPath):
// the snapshots are removed through the catalog (remove-snapshots), and its metadata
// files are left alone, whatever their names (they are the catalog's); manifests, lists
// and data files are deleted as above.
// What Expire would remove now, without removing anything (a preview): the snapshots, and
// the data files, manifests and manifest lists only they reference. The files no snapshot
// references (failed commits' leftovers) are not listed: finding them lists the table's
// directories.
struct ExpirePlan {
  std::vector<int64_t> snapshot_ids;
  int64_t files = 0;
  // Removing them would lose a `sluice.offsets.*` value only they hold: Expire commits a
  // snapshot carrying the offsets first.
  bool carries_offsets = false;
};
Result<ExpirePlan> PlanExpire(const Table& table, int64_t older_than_ms, int64_t now_ms);

Result<ExpireResult> Expire(Table table, int64_t older_than_ms, int64_t now_ms,
                            int64_t orphan_min_age_ms = kDefaultOrphanMinAgeMs);

}  // namespace sluice::lake
