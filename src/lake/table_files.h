// The files of a file-system Iceberg table (docs/design/0009 #1-3): which
// metadata/v<N>.metadata.json is current, the exclusive create that commits version N,
// and durable writes of everything else (manifests, the version hint).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::lake {

// "file:///a/b" and "/a/b" -> "/a/b"; other schemes are an error naming the location.
Result<std::string> LocalPath(std::string_view location);
// "/a/b" -> "file:///a/b"; an S3 location (s3://...) is returned as it is.
std::string FileUri(std::string_view path);

// Writes `bytes` to `path` so that it is there whole or not at all after a crash: a
// temporary file beside it, fsynced, renamed over `path`, the directory fsynced.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);
// Reads a whole file; NotFound when it is not there.
Result<std::string> ReadWholeFile(const std::string& path);
// fsync of a file written by someone else (DuckDB's Parquet).
Status SyncFile(const std::string& path);

struct MetadataVersion {
  int64_t version = 0;
  std::string path;  // <table>/metadata/v<N>.metadata.json
  std::string json;
};

class Storage;

// On S3 (a root of s3://bucket/prefix) the same files are objects: the commit is a
// conditional create (If-None-Match: *) instead of an exclusive link, and the metadata is
// found from the hint by probing with HEAD, by listing metadata/ only without a hint
// (docs/design/0024, decision 3).
class TableFiles {
 public:
  // `root`: the table's directory (its location as a local path) or its S3 location.
  explicit TableFiles(std::string root);

  const std::string& root() const { return root_; }
  std::string metadata_dir() const { return root_ + "/metadata"; }
  std::string data_dir() const { return root_ + "/data"; }
  std::string VersionPath(int64_t version) const;

  // The current metadata: the highest version reached from version-hint.text by probing
  // upwards (a scan of metadata/ when the hint is missing or unreadable); nullopt when
  // the table has no version.
  Result<std::optional<MetadataVersion>> Current() const;
  // Current() without reading the file: `json` is empty (for a cache of parsed metadata).
  Result<std::optional<MetadataVersion>> CurrentVersion() const;

  // Commits version `version` with `json`: fails with AlreadyExists when another writer
  // made that version first (the caller re-reads and retries). Then moves the hint.
  Status CommitVersion(int64_t version, std::string_view json) const;

 private:
  Result<std::optional<int64_t>> ScanVersions() const;
  Result<bool> Exists(const std::string& path) const;
  Status CommitObject(int64_t version, std::string_view json) const;
  // A commit of `version` (> 1) builds on version - 1: when that is gone, AlreadyExists if
  // `version` is taken (a lost race), else NotFound (the table's versions were retired).
  Status CheckBase(int64_t version) const;
  // FailedPrecondition when `names` (the table directory's entries) hold another table's
  // retired versions, or data without metadata.
  Status CheckNoLeftovers(const std::vector<std::string>& names, bool has_metadata,
                          bool data_nonempty) const;
  std::string root_;
  const Storage* storage_ = nullptr;  // null: `storage_error_` says why
  Status storage_error_;
};

}  // namespace sluice::lake
