// Helpers every `sluice bench ...` shares: its working directory, the progress line, the
// machine's load while it ran, the commit it was built from, medians and rounding.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace sluice::bench {

// The bench's working directory: <parent>/run-<pid> under a given directory (created, and
// removed at the end only if the bench created it), else a fresh
// $TMPDIR/sluice-bench-<name>-XXXXXX. Removed with its contents on destruction.
class WorkDir {
 public:
  static Result<std::unique_ptr<WorkDir>> Create(const std::string& parent, std::string_view name);
  ~WorkDir();
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  WorkDir() = default;
  std::string path_;
  std::string created_parent_;
};

// A progress line on stderr while a cell runs, only when stderr is a terminal.
class Progress {
 public:
  Progress();
  void Show(std::string_view text);
  void Clear();

 private:
  bool enabled_;
};

// The 1, 5 and 15 minute load averages as /proc/loadavg gives them, or "unknown".
std::string LoadAverages();

// `git describe --always --dirty` of the source tree the binary was built from, or "".
std::string SourceCommit();

// The node_modules of the source tree the binary was built from ("node_modules" when
// unknown): the pinned npm packages the query and console benches run with node.
std::string SourceNodeModules();

// The median of `v` (the mean of the middle two for an even count); 0 when empty.
double Median(std::vector<double> v);

// Writes `text` to `path` (replacing it); IOError naming the path.
Status WriteTextFile(const std::string& path, const std::string& text);

// `v` rounded to `digits` decimals.
double Round(double v, int digits);

}  // namespace sluice::bench
