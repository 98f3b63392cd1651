// The file layer under the storage engine. The log does all its I/O through an Env so
// tests can put a fault-injecting layer in between (see testing/fault_env.h), in the
// manner of leveldb's Env.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace sluice::storage {

// An open file, read and written at explicit positions. Thread-safe for concurrent
// ReadAt; writers are serialized by the log.
class File {
 public:
  virtual ~File() = default;
  // Writes all of `data` at `pos`, or fails.
  virtual Status WriteAt(uint64_t pos, std::span<const uint8_t> data) = 0;
  // Reads up to out.size() bytes at `pos`; fewer only at end of file.
  virtual Result<size_t> ReadAt(uint64_t pos, std::span<uint8_t> out) = 0;
  // fdatasync: every byte written so far survives a power loss once this returns OK.
  virtual Status Sync() = 0;
  virtual Status Truncate(uint64_t size) = 0;
  virtual Result<uint64_t> Size() = 0;
  // True when the file's name was removed from the file system while it was open.
  virtual Result<bool> Unlinked() = 0;
  // The descriptor for sendfile, or -1 when the file is not backed by one.
  virtual int fd() const = 0;
  virtual const std::string& path() const = 0;
};

enum class OpenMode {
  kRead,       // existing file, read only
  kReadWrite,  // existing file
  kCreate,     // read-write, created when missing
  // Existing file, read-write, bypassing the page cache (O_DIRECT): every WriteAt and
  // ReadAt position, length and buffer address is a multiple of kDirectIoAlign. Fails
  // (InvalidArgument) where the file system cannot do it (tmpfs). Not for FileCache.
  kDirect,
};

inline constexpr size_t kDirectIoAlign = 4096;

class Env {
 public:
  virtual ~Env() = default;
  virtual Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) = 0;
  virtual Status Remove(const std::string& path) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Creates the directory and its parents; OK when it exists.
  virtual Status CreateDirs(const std::string& path) = 0;
  // fsync of a directory: makes file creations, renames and removals in it durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // Names (not paths) of the entries of a directory, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;

  // The real file system. Never null, lives for the whole process.
  static Env* Posix();
};

}  // namespace sluice::storage
