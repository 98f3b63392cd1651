#include "storage/testing/files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace sluice::storage::testing {

TempDir::TempDir(const std::string& prefix) {
  std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<uint8_t> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

void WriteFileBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

int OpenDescriptorsUnder(const std::string& dir) {
  const std::string prefix = dir.ends_with('/') ? dir : dir + "/";
  int n = 0;
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), link_ec).string();
    if (!link_ec && target.starts_with(prefix)) ++n;
  }
  return n;
}

size_t ResidentPages(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct stat st;
  size_t resident = 0;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const auto len = static_cast<size_t>(st.st_size);
    void* m = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
      std::vector<unsigned char> in((len + page - 1) / page);
      if (::mincore(m, len, in.data()) == 0) {
        for (unsigned char c : in) resident += c & 1;
      }
      ::munmap(m, len);
    }
  }
  ::close(fd);
  return resident;
}

}  // namespace sluice::storage::testing
