#include "bench/bench_util.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#ifndef SLUICE_SOURCE_DIR
#define SLUICE_SOURCE_DIR ""
#endif

namespace sluice::bench {

namespace fs = std::filesystem;

Result<std::unique_ptr<WorkDir>> WorkDir::Create(const std::string& parent, std::string_view name) {
  std::unique_ptr<WorkDir> w(new WorkDir());
  std::error_code ec;
  if (parent.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = fmt::format("{}/sluice-bench-{}-XXXXXX",
                                      tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", name);
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) return ErrnoError("mkdtemp", pattern, errno);
    w->path_ = buf.data();
    return w;
  }
  if (!fs::exists(parent, ec)) {
    fs::create_directories(parent, ec);
    if (ec) return IOError("create directory {}: {}", parent, ec.message());
    w->created_parent_ = parent;
  }
  w->path_ = fs::absolute(parent).string() + fmt::format("/run-{}", ::getpid());
  fs::create_directories(w->path_, ec);
  if (ec) return IOError("create directory {}: {}", w->path_, ec.message());
  return w;
}

WorkDir::~WorkDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  if (!created_parent_.empty()) fs::remove(created_parent_, ec);  // only if now empty
}

Progress::Progress() : enabled_(::isatty(STDERR_FILENO) == 1) {}

void Progress::Show(std::string_view text) {
  if (enabled_) fmt::print(stderr, "\r\033[K{}", text);
}

void Progress::Clear() {
  if (enabled_) fmt::print(stderr, "\r\033[K");
}

std::string LoadAverages() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a.empty() ? "unknown" : fmt::format("{} {} {}", a, b, c);
}

std::string SourceCommit() {
  std::string dir = SLUICE_SOURCE_DIR;
  if (dir.empty() || !fs::exists(dir + "/.git")) return "";
  std::string cmd = fmt::format("git -C '{}' describe --always --dirty 2>/dev/null", dir);
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  char buf[128] = {};
  std::string out = std::fgets(buf, sizeof(buf), p) != nullptr ? buf : "";
  ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string SourceNodeModules() {
  const std::string dir = SLUICE_SOURCE_DIR;
  return dir.empty() ? "node_modules" : dir + "/node_modules";
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Round(double v, int digits) {
  double scale = std::pow(10.0, digits);
  return std::round(v * scale) / scale;
}

Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  if (!f) return IOError("{}: cannot write", path);
  return Status::OK();
}

}  // namespace sluice::bench
