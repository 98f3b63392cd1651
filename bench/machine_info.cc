#include "bench/machine_info.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace sluice::bench {
namespace {

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\n");
  return s.substr(b, e - b + 1);
}

// The first line of a small file, trimmed; empty when it cannot be read.
std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return Trim(line);
}

// The value after "key:" on the first line of `path` that starts with `key`.
std::string FindKey(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    return Trim(line.substr(colon + 1));
  }
  return "";
}

// /proc/mounts escapes space, tab, newline and backslash as \ooo.
std::string UnescapeMountField(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool octal = true;
      for (size_t j = 1; j <= 3; ++j) {
        char c = s[i + j];
        if (c < '0' || c > '7') {
          octal = false;
          break;
        }
        v = v * 8 + (c - '0');
      }
      if (octal) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

bool PathUnder(const std::string& path, const std::string& mount) {
  if (mount == "/") return true;
  if (path.compare(0, mount.size(), mount) != 0) return false;
  return path.size() == mount.size() || path[mount.size()] == '/';
}

// The disk behind a device number, through /sys/dev/block: for a partition, its parent.
std::string SysBlockDir(dev_t dev) {
  std::string link =
      "/sys/dev/block/" + std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
  char buf[PATH_MAX];
  if (::realpath(link.c_str(), buf) == nullptr) return "";
  std::string dir = buf;
  struct stat st;
  if (::stat((dir + "/partition").c_str(), &st) == 0) {
    size_t slash = dir.rfind('/');
    if (slash != std::string::npos) dir = dir.substr(0, slash);
  }
  return dir;
}

}  // namespace

MachineInfo GetMachineInfo() {
  MachineInfo info;
  info.cpu_model = FindKey("/proc/cpuinfo", "model name");
  if (info.cpu_model.empty()) info.cpu_model = FindKey("/proc/cpuinfo", "Model");  // arm64
  if (info.cpu_model.empty()) info.cpu_model = "unknown";
  info.cores = static_cast<int>(std::thread::hardware_concurrency());
  std::string mem = FindKey("/proc/meminfo", "MemTotal");  // "24683620 kB"
  if (!mem.empty()) info.memory_bytes = std::strtoull(mem.c_str(), nullptr, 10) * 1024;
  struct utsname u;
  if (::uname(&u) == 0) {
    info.kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  } else {
    info.kernel = "unknown";
  }
  return info;
}

double LoadAverage1m() {
  std::string line = ReadLine("/proc/loadavg");  // "0.52 0.58 0.59 1/467 12345"
  if (line.empty()) return -1;
  char* end = nullptr;
  double v = std::strtod(line.c_str(), &end);
  return end == line.c_str() ? -1 : v;
}

Result<FsInfo> GetFsInfo(const std::string& path) {
  FsInfo info;
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return ErrnoError("realpath", path, errno);
  info.path = buf;

  struct statfs sfs;
  if (::statfs(info.path.c_str(), &sfs) != 0) return ErrnoError("statfs", info.path, errno);
  info.total_bytes = static_cast<uint64_t>(sfs.f_blocks) * static_cast<uint64_t>(sfs.f_frsize);
  info.free_bytes = static_cast<uint64_t>(sfs.f_bavail) * static_cast<uint64_t>(sfs.f_frsize);
  info.is_tmpfs = sfs.f_type == TMPFS_MAGIC;

  std::ifstream mounts("/proc/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, mount_point, fs_type;
    if (!(fields >> device >> mount_point >> fs_type)) continue;
    mount_point = UnescapeMountField(mount_point);
    // The longest mount point holding the path; a later entry at the same point shadows.
    if (PathUnder(info.path, mount_point) && mount_point.size() >= info.mount_point.size()) {
      info.mount_point = mount_point;
      info.device = UnescapeMountField(device);
      info.fs_type = fs_type;
    }
  }
  if (info.fs_type.empty()) info.fs_type = "unknown";
  if (info.device.empty()) info.device = "unknown";

  struct stat st;
  if (::stat(info.path.c_str(), &st) != 0) return ErrnoError("stat", info.path, errno);
  if (major(st.st_dev) != 0) {  // 0 = anonymous (tmpfs, overlay): no block device
    std::string sys = SysBlockDir(st.st_dev);
    if (!sys.empty()) {
      info.device_model = ReadLine(sys + "/device/model");
      std::string rot = ReadLine(sys + "/queue/rotational");
      if (rot == "0" || rot == "1") info.rotational = rot == "1" ? 1 : 0;
    }
  }
  return info;
}

Result<uint64_t> FreeBytes(const std::string& path) {
  struct statfs sfs;
  if (::statfs(path.c_str(), &sfs) != 0) return ErrnoError("statfs", path, errno);
  return static_cast<uint64_t>(sfs.f_bavail) * static_cast<uint64_t>(sfs.f_frsize);
}

std::string FormatBinaryBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024 && unit < 4) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  if (v == static_cast<double>(static_cast<uint64_t>(v))) {
    return fmt::format("{} {}", static_cast<uint64_t>(v), kUnits[unit]);
  }
  return fmt::format("{:.1f} {}", v, kUnits[unit]);
}

}  // namespace sluice::bench
