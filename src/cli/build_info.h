// What this binary is: sluice's version, the commit it was built from and how it was built.
// The definition is generated at every build (cmake/BuildInfo.cmake), so only the `sluice`
// binary links it; `sluice version` prints it and /metrics carries it as sluice_build_info.
#pragma once

#include <string_view>

namespace sluice::cli {

struct BuildInfo {
  std::string_view version;     // the project's version, "0.1.0"
  std::string_view commit;      // `git describe --always --dirty`: "0477d345dda0", "...-dirty"
  std::string_view build_type;  // CMAKE_BUILD_TYPE: "RelWithDebInfo", "Debug"
  std::string_view compiler;    // "GNU 12.2.0"
};

const BuildInfo& GetBuildInfo();

}  // namespace sluice::cli
