// Where the lake planner finds the tables a query names: `lake.<namespace>.<table>`
// resolved to a loaded lake::Table. WarehouseCatalog reads the warehouse directory the
// REST catalog serves (namespace levels are directories, a table a directory with
// metadata/), so the query server sees every table the pipelines and REST clients made.
//
//   WarehouseCatalog catalog("/var/lib/sluice/warehouse");
//   ASSIGN_OR_RETURN(lake::Table t, catalog.LoadTable({"db"}, "events"));
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "lake/table.h"

namespace sluice::query {

// "db.events", "a.b.events": a table's name for messages.
std::string LakeTableName(const std::vector<std::string>& ns, const std::string& table);

// Resolves a table name to its current metadata. Implementations must be usable from the
// thread that plans (one planning call at a time per object is enough).
class LakeCatalog {
 public:
  virtual ~LakeCatalog() = default;
  // NotFound (naming the table) when there is no such table.
  virtual Result<lake::Table> LoadTable(const std::vector<std::string>& ns,
                                        const std::string& table) const = 0;
};

// A table as catalogs list it (for the Postgres catalog emulation's external relations).
struct LakeTableInfo {
  std::vector<std::string> ns;
  std::string name;
  struct Column {
    std::string name;
    std::string duckdb_type;  // "BIGINT", "DECIMAL(10, 2)", "STRUCT(...)[]"
    bool required = false;
    std::string doc;  // "" for none
  };
  std::vector<Column> columns;  // the current schema's top-level columns
  // How SQL names it: lake."db"."events", lake."a.b"."events" (always quoted).
  std::string SqlName() const;
};

// Tables under a warehouse directory: <warehouse>/<level>/.../<table>. Every load reads the
// table's current metadata version again, so a query sees the newest commit.
class WarehouseCatalog : public LakeCatalog {
 public:
  explicit WarehouseCatalog(std::string warehouse);
  Result<lake::Table> LoadTable(const std::vector<std::string>& ns,
                                const std::string& table) const override;
  // Every table of the warehouse, sorted by namespace and name. A table whose metadata
  // cannot be read is left out (a query naming it gets the error).
  Result<std::vector<LakeTableInfo>> ListTables() const;
  const std::string& warehouse() const { return warehouse_; }

 private:
  std::string warehouse_;  // without a trailing '/'
};

}  // namespace sluice::query
