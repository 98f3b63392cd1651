#include "console/assets/assets.h"

namespace sluice::console {

const Asset* FindAsset(std::string_view path) {
  // A handful of files: a scan is as quick as a map and needs nothing built first.
  for (const Asset& a : AllAssets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

}  // namespace sluice::console
