#include "query/lake_planner/lake_catalog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "duck/database.h"
#include "lake/duck_types.h"

namespace sluice::query {
namespace {

// One directory name: what the REST catalog accepts (no '/', no control characters, not
// empty, not dot-named), so a name cannot walk out of the warehouse.
Status CheckName(const std::string& name, const std::string& table) {
  bool ok = !name.empty() && name[0] != '.' && name.size() <= 255;
  for (char c : name) {
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ok = false;
  }
  if (!ok)
    return InvalidArgumentError("lake table {}: \"{}\" is not a valid namespace or table name",
                                table, name);
  return Status::OK();
}

bool IsDir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// `dir`/`name`, or else the one entry of `dir` equal to `name` ignoring case (SQL names are
// case-insensitive, directories not); `dir`/`name` when there is none or several.
std::string Child(const std::string& dir, const std::string& name) {
  std::string exact = dir + "/" + name;
  if (IsDir(exact)) return exact;
  std::string found;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string entry = it->path().filename().string();
    if (entry.size() != name.size() || entry[0] == '.') continue;
    bool same = true;
    for (size_t i = 0; i < entry.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(entry[i])) ==
             std::tolower(static_cast<unsigned char>(name[i]));
    }
    if (!same) continue;
    if (!found.empty()) return exact;  // ambiguous
    found = dir + "/" + entry;
  }
  return found.empty() ? exact : found;
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

Result<lake::Table> WarehouseCatalog::LoadTable(const std::vector<std::string>& ns,
                                                const std::string& table) const {
  const std::string name = LakeTableName(ns, table);
  if (ns.empty()) return InvalidArgumentError("lake table {}: a namespace is required", name);
  std::string dir = warehouse_;
  for (const std::string& level : ns) {
    RETURN_IF_ERROR(CheckName(level, name));
    dir = Child(dir, level);
  }
  RETURN_IF_ERROR(CheckName(table, name));
  dir = Child(dir, table);
  Result<lake::Table> t = lake::Table::Load(dir);
  if (!t.ok()) {
    if (t.status().code() == StatusCode::kNotFound) {
      return NotFoundError("lake table {} does not exist (no table at {})", name, dir);
    }
    return t.status().WithContext(fmt::format("lake table {}", name));
  }
  return t;
}

namespace {

constexpr size_t kMaxNamespaceDepth = 16;

void ListUnder(const std::string& dir, std::vector<std::string>& ns,
               std::vector<LakeTableInfo>* out) {
  if (ns.size() > kMaxNamespaceDepth) return;
  std::vector<std::string> entries;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string entry = it->path().filename().string();
    std::error_code ec2;
    if (entry.empty() || entry[0] == '.' || !it->is_directory(ec2)) continue;
    entries.push_back(std::move(entry));
  }
  std::sort(entries.begin(), entries.end());
  for (const std::string& entry : entries) {
    const std::string path = dir + "/" + entry;
    if (IsDir(path + "/metadata")) {
      if (ns.empty()) continue;  // a table needs a namespace
      Result<lake::Table> t = lake::Table::Load(path);
      if (!t.ok()) continue;
      const lake::Schema* schema = t->metadata().CurrentSchema();
      if (schema == nullptr) continue;
      LakeTableInfo info{ns, entry, {}};
      for (const lake::NestedField& f : schema->fields) {
        info.columns.push_back({f.name, lake::DuckTypeOf(f.type), f.required, f.doc.value_or("")});
      }
      out->push_back(std::move(info));
      continue;
    }
    ns.push_back(entry);
    ListUnder(path, ns, out);
    ns.pop_back();
  }
}

}  // namespace

std::string LakeTableInfo::SqlName() const {
  std::string joined;
  for (const std::string& level : ns) joined += (joined.empty() ? "" : ".") + level;
  return fmt::format("lake.{}.{}", duck::QuoteIdentifier(joined), duck::QuoteIdentifier(name));
}

Result<std::vector<LakeTableInfo>> WarehouseCatalog::ListTables() const {
  if (!IsDir(warehouse_)) return NotFoundError("warehouse {} is not a directory", warehouse_);
  std::vector<LakeTableInfo> out;
  std::vector<std::string> ns;
  ListUnder(warehouse_, ns, &out);
  return out;
}

}  // namespace sluice::query
