#include "query/lake_planner/lake_catalog.h"

#include <fmt/format.h>

namespace sluice::query {
namespace {

// One directory name: what the REST catalog accepts (no '/', no control characters, not
// empty, not dot-named), so a name cannot walk out of the warehouse.
Status CheckName(const std::string& name, const std::string& table) {
  bool ok = !name.empty() && name[0] != '.' && name.size() <= 255;
  for (char c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ok = false;
  }
  if (!ok) return InvalidArgumentError("lake table {}: \"{}\" is not a valid namespace or table name", table, name);
  return Status::OK();
}

}  // namespace

std::string LakeTableName(const std::vector<std::string>& ns, const std::string& table) {
  std::string out;
  for (const std::string& level : ns) out += level + ".";
  return out + table;
}

WarehouseCatalog::WarehouseCatalog(std::string warehouse) : warehouse_(std::move(warehouse)) {
  while (warehouse_.size() > 1 && warehouse_.back() == '/') warehouse_.pop_back();
}

Result<lake::Table> WarehouseCatalog::LoadTable(const std::vector<std::string>& ns, const std::string& table) const {
  const std::string name = LakeTableName(ns, table);
  if (ns.empty()) return InvalidArgumentError("lake table {}: a namespace is required", name);
  std::string dir = warehouse_;
  for (const std::string& level : ns) {
    RETURN_IF_ERROR(CheckName(level, name));
    dir += "/" + level;
  }
  RETURN_IF_ERROR(CheckName(table, name));
  dir += "/" + table;
  Result<lake::Table> t = lake::Table::Load(dir);
  if (!t.ok()) {
    if (t.status().code() == StatusCode::kNotFound) {
      return NotFoundError("lake table {} does not exist (no table at {})", name, dir);
    }
    return t.status().WithContext(fmt::format("lake table {}", name));
  }
  return t;
}

}  // namespace sluice::query
