// A pipeline's SQL checked against the SQL grants as its pipeline.principal
// (docs/design/0020-data-authorization.md): what `sluice serve` asks before it starts a
// pipeline that has one (LocalBroker::check).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "query/authz/grants.h"

namespace sluice::pipeline {
struct PipelineConfig;
}

namespace sluice::app {

// Every SQL text the pipeline runs (commands, tables, windows, handler, SQL sinks) as
// query::authz::CheckStatement checks a statement, and INSERT on the table of an Iceberg
// sink. Superusers (as authorization.super_users names them) pass. The error names the
// statement's origin (file:line) and what is refused.
class PipelineGrants {
 public:
  PipelineGrants(std::shared_ptr<query::authz::GrantStore> grants,
                 std::vector<std::string> super_users);
  ~PipelineGrants();
  Status Check(const pipeline::PipelineConfig& config) const;

 private:
  struct Scratch;
  std::shared_ptr<query::authz::GrantStore> grants_;
  std::vector<std::string> super_users_;
  std::unique_ptr<Scratch> scratch_;  // a DuckDB to parse with, one check at a time
};

}  // namespace sluice::app
