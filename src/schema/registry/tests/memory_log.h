// MemoryLog: the registry's log kept in memory, for unit tests of the registry and of what
// decodes by it (the broker's `_schemas` topic is exercised end to end in
// tests/integration/schema_registry_test.py).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "schema/registry/registry.h"

namespace sluice::schema::registry {

// The log as a vector: each append is fed to the registry at once, as the broker's reader
// would. `interleave`: records another writer appends just before this one's next append,
// which then fails as a fenced writer's would.
class MemoryLog : public SchemaLog {
 public:
  Registry* registry = nullptr;
  std::vector<std::pair<std::string, std::optional<std::string>>> records;
  std::vector<std::pair<std::string, std::optional<std::string>>> interleave;

  Status BecomeWriter() override { return Status::OK(); }
  Result<int64_t> Append(const std::string& key, const std::optional<std::string>& value) override {
    if (!interleave.empty()) {
      for (auto& [k, v] : interleave) Add(k, v);
      interleave.clear();
      return AbortedError("another writer came first");
    }
    return Add(key, value);
  }
  Result<int64_t> End() override { return static_cast<int64_t>(records.size()); }
  int64_t Add(const std::string& key, const std::optional<std::string>& value) {
    records.emplace_back(key, value);
    int64_t offset = static_cast<int64_t>(records.size()) - 1;
    std::optional<std::string_view> v;
    if (value) v = *value;
    registry->Feed(offset, key, v);
    return offset;
  }
};

}  // namespace sluice::schema::registry
