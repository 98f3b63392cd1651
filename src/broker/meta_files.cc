#include "broker/meta_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <span>
#include <vector>

namespace sluice::broker {

Status WriteFileDurably(storage::Env* env, const std::string& dir, const std::string& name,
                        const std::string& data, int mode) {
  std::string tmp = dir + "/" + name + ".tmp";
  std::string path = dir + "/" + name;
  {
    ASSIGN_OR_RETURN(auto file, env->Open(tmp, storage::OpenMode::kCreate));
    RETURN_IF_ERROR(file->Truncate(0));
    if (mode != 0 && ::chmod(tmp.c_str(), static_cast<mode_t>(mode)) != 0) {
      return ErrnoError("chmod", tmp, errno);
    }
    RETURN_IF_ERROR(file->WriteAt(
        0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size())));
    RETURN_IF_ERROR(file->Sync());
  }
  RETURN_IF_ERROR(env->Rename(tmp, path));
  return env->SyncDir(dir);
}

Result<std::string> ReadSmallFile(storage::Env* env, const std::string& path, size_t max_bytes) {
  if (!env->Exists(path)) return NotFoundError("{} does not exist", path);
  ASSIGN_OR_RETURN(auto file, env->Open(path, storage::OpenMode::kRead));
  ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (size > max_bytes) {
    return InvalidArgumentError("{} is {} bytes, more than the {} expected", path, size, max_bytes);
  }
  std::string out(size, '\0');
  size_t got = 0;
  while (got < size) {
    ASSIGN_OR_RETURN(
        size_t n, file->ReadAt(got, std::span<uint8_t>(reinterpret_cast<uint8_t*>(out.data()) + got,
                                                       size - got)));
    if (n == 0) break;
    got += n;
  }
  out.resize(got);
  return out;
}

}  // namespace sluice::broker
