// Where a lake table's files live (docs/design/0024, decision 4): a local directory or an
// S3 bucket, behind one seam, so tables, manifests, commits and maintenance read and write
// the same way on both.
//
//   ASSIGN_OR_RETURN(const Storage* storage, StorageFor(location));
//   ASSIGN_OR_RETURN(std::string bytes, storage->Read(location));
//   Status st = storage->CreateExclusive(next_version, json);  // AlreadyExists: lost a race
//
// Locations: a bare absolute path or file:// URI (local), or s3://bucket/key (s3a:// and
// s3n://, Hadoop's names, are read as s3://). A Storage is shared by the whole process and
// may be used from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/config.h"
#include "base/status.h"
#include "s3/s3_client.h"

namespace sluice::lake {

// s3://, s3a:// or s3n://.
bool IsS3Location(std::string_view location);
// The spelling a table writes and compares: s3a:// and s3n:// become s3://, file:// URIs
// their path, trailing slashes dropped; anything else unchanged.
std::string NormalLocation(std::string_view location);
// "s3://bucket/a/b" -> {"bucket", "a/b"}; InvalidArgument without a bucket.
Result<std::pair<std::string, std::string>> SplitS3Location(std::string_view location);

struct StoredObject {
  std::string location;  // as NormalLocation spells it
  uint64_t size = 0;
  std::optional<int64_t> modified_ms;  // last modified, when the storage says
};

class Storage {
 public:
  virtual ~Storage() = default;

  // The whole object; NotFound when it is not there.
  virtual Result<std::string> Read(const std::string& location) const = 0;
  // Bytes [offset, offset + length), fewer at the end of the object.
  virtual Result<std::string> ReadRange(const std::string& location, uint64_t offset,
                                        uint64_t length) const = 0;
  // ReadRange's bytes written into `fd` from `file_offset` on (pwrite); how many. S3
  // streams them to the file as they arrive, never holding the range in memory.
  virtual Result<uint64_t> ReadRangeToFile(const std::string& location, uint64_t offset,
                                           uint64_t length, int fd, uint64_t file_offset) const;
  // Its size; nullopt when it is not there.
  virtual Result<std::optional<uint64_t>> Size(const std::string& location) const = 0;
  // Writes `bytes` so that the object is there whole or not at all, replacing any.
  virtual Status Write(const std::string& location, std::string_view bytes) const = 0;
  // Creates the object only if nothing is there: AlreadyExists when another writer made
  // it first (the commit of a table version). A create retried after a lost reply that
  // finds its own bytes there is OK.
  virtual Status CreateExclusive(const std::string& location, std::string_view bytes) const = 0;
  // Puts the local file `path` at `location` (durable when it returns).
  virtual Status Upload(const std::string& path, const std::string& location) const = 0;
  // OK when it is not there.
  virtual Status Delete(const std::string& location) const = 0;
  // Every object whose location starts with `prefix`/ (recursively), in no set order.
  virtual Result<std::vector<StoredObject>> List(const std::string& prefix) const = 0;

  // Whether locations are local paths DuckDB can read directly.
  virtual bool local() const = 0;
};

// The storage of `location`: the local file system, or the S3 store the process is
// configured for (ConfigureS3, else the AWS_* environment at first use).
Result<const Storage*> StorageFor(std::string_view location);

// The tables under an S3 warehouse, as paths relative to it ("db/events"): the prefixes
// holding metadata/, found by walking the namespaces a level at a time (never listing
// data files), sorted. Callers load each to tell a table from leftovers.
Result<std::vector<std::string>> ListS3Tables(const std::string& warehouse);
// The names of the "directories" right under S3 location `prefix` (S3's common prefixes
// with the delimiter '/'), unsorted.
Result<std::vector<std::string>> ListS3Children(const std::string& prefix);
// The ETag of the S3 object at `location` (one HEAD); NotFound when it is not there.
Result<std::string> S3ETag(const std::string& location);

// Reads a whole object wherever it lives (errors name it).
Result<std::string> ReadLocation(std::string_view location);
// Writes one (Storage::Write) wherever it lives.
Status WriteLocation(std::string_view location, std::string_view bytes);
// Removes one (Storage::Delete); OK when it is not there.
Status DeleteLocation(std::string_view location);

// Puts each local file at its location (Storage::Upload), `parallel` at once; the first
// error, after every upload started has ended.
Status UploadAll(const std::vector<std::pair<std::string, std::string>>& files, int parallel = 4);

// Makes `dir` (and its parents) and checks it is a directory of this user, not a
// symbolic link, readable by nobody else (made so when it is not). Errors name
// `<section>.cache_dir`.
Status MakePrivateDir(const std::string& dir, std::string_view section = "s3");

// A new empty local directory for files written before they are uploaded to S3 (Parquet
// data files DuckDB writes; 0024 decision 5), under s3.cache_dir's parent of caches.
// Directories left by processes gone are removed at the first call.
Result<std::string> NewS3StagingDir();

// The S3 settings of the process: the client's options and the read cache's.
struct S3Settings {
  s3::S3Options options;
  std::string cache_dir;              // empty: $TMPDIR/sluice-s3-cache-<uid>
  uint64_t cache_bytes = 4ULL << 30;  // the read cache's budget
  uint64_t part_size = 16ULL << 20;   // multipart past this size
  int upload_threads = 4;             // parts in flight per upload
};

// The `s3:` config keys (endpoint, region, access_key_id, secret_access_key, session_token,
// path_style, request_timeout, max_retries, cache_dir, cache_bytes, part_size), for a
// caller's CheckKnown.
extern const std::vector<std::string_view> kS3ConfigKeys;

// The settings from the AWS_* environment, each overridden by the `s3.*` keys of
// `config` that are set. InvalidArgument naming the key (never a secret's value). Keys
// may be missing: a process that never reaches S3 needs none, and the first S3 location
// used without them fails naming what to set.
Result<S3Settings> S3SettingsFrom(const Config& config);

// Sets the process's S3 settings before any S3 location is used (a later call replaces
// them for storages made after it; tests).
void ConfigureS3(S3Settings settings);

// Where the read cache and staging directories go: s3.cache_dir, else
// $TMPDIR/sluice-s3-cache-<uid>. The directory is sluice's own: its numbered
// subdirectories and staging-* of processes gone are removed.
std::string S3CacheRoot(const S3Settings& settings);

// The settings in force (configured, else from the environment); an error when S3 is not
// configured and the environment has no keys.
Result<S3Settings> CurrentS3Settings();

}  // namespace sluice::lake
