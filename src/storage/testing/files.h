// Test helpers for files: a temporary directory removed with its contents, and whole-file
// reads and writes for tests that damage segment files on purpose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::storage::testing {

// A fresh directory under the system temp dir, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "sluice-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::vector<uint8_t> ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes);

// How many of this process's descriptors (/proc/self/fd) name a file under `dir`.
int OpenDescriptorsUnder(const std::string& dir);

// How many pages of the file at `path` are in the page cache (mincore); 0 when it cannot
// be read.
size_t ResidentPages(const std::string& path);

}  // namespace sluice::storage::testing
