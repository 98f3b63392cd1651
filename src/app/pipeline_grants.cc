#include "app/pipeline_grants.h"

#include <algorithm>
#include <mutex>

#include "duck/database.h"
#include "pipeline/pipeline_config.h"
#include "query/authz/plan_check.h"
#include "query/sql_text.h"

namespace sluice::app {

struct PipelineGrants::Scratch {
  std::mutex mu;
  std::unique_ptr<duck::Database> db;
  std::unique_ptr<duck::Connection> conn;
};

PipelineGrants::PipelineGrants(std::shared_ptr<query::authz::GrantStore> grants,
                               std::vector<std::string> super_users)
    : grants_(std::move(grants)),
      super_users_(std::move(super_users)),
      scratch_(std::make_unique<Scratch>()) {}

PipelineGrants::~PipelineGrants() = default;

Status PipelineGrants::Check(const pipeline::PipelineConfig& c) const {
  const std::string& user = c.principal;
  if (user.empty() ||
      std::find(super_users_.begin(), super_users_.end(), "User:" + user) != super_users_.end()) {
    return Status::OK();
  }
  const std::shared_ptr<const query::authz::GrantSet> grants = grants_->Current();
  std::lock_guard lock(scratch_->mu);
  if (scratch_->conn == nullptr) {
    ASSIGN_OR_RETURN(scratch_->db,
                     duck::Database::Open({.memory_limit_bytes = 64 << 20, .threads = 1}));
    ASSIGN_OR_RETURN(scratch_->conn, duck::Connection::Open(*scratch_->db));
  }
  const query::authz::AccessContext ctx{.user = user, .grants = grants.get()};
  // Each statement of a text, named by where it is.
  auto check = [&](const std::string& sql, const std::string& origin) -> Status {
    for (std::string_view piece : query::SplitStatements(sql)) {
      Status st = query::authz::CheckStatement(*scratch_->conn, piece, ctx);
      if (!st.ok()) {
        // "42501: permission denied ..." without the SQLSTATE, with the statement's origin.
        std::string_view m = st.message();
        if (m.size() > 7 && m[5] == ':') m.remove_prefix(7);
        return FailedPreconditionError("{}: pipeline.principal {}: {}", origin, user, m);
      }
    }
    return Status::OK();
  };
  auto sink = [&](const pipeline::SinkConfig& s, const std::string& what) -> Status {
    if (s.type == pipeline::SinkType::kSqlCommand)
      RETURN_IF_ERROR(check(s.sqlcommand.sql, s.sqlcommand.sql_origin));
    if (s.type == pipeline::SinkType::kIceberg &&
        !grants->CanOnTable(user, s.iceberg.namespace_, s.iceberg.table,
                            query::authz::Privilege::kInsert)) {
      std::string table;
      for (const std::string& level : s.iceberg.namespace_) table += level + ".";
      return FailedPreconditionError(
          "{}: pipeline.principal {}: permission denied: INSERT on lake table {}{} is not granted",
          what, user, table, s.iceberg.table);
    }
    return Status::OK();
  };
  for (const pipeline::SqlCommand& cmd : c.commands) RETURN_IF_ERROR(check(cmd.sql, cmd.origin));
  for (const pipeline::TableConfig& t : c.tables) {
    RETURN_IF_ERROR(check(t.sql, t.origin));
    if (t.tumbling_window) {
      RETURN_IF_ERROR(check(t.tumbling_window->collect_sql, t.tumbling_window->collect_origin));
      RETURN_IF_ERROR(check(t.tumbling_window->delete_sql, t.tumbling_window->delete_origin));
      RETURN_IF_ERROR(sink(t.sink, "tables." + t.name + ".manager.sink"));
    }
  }
  RETURN_IF_ERROR(check(c.handler.sql, c.handler.sql_origin));
  if (c.window) {
    RETURN_IF_ERROR(check(c.window->emit_sql, "pipeline.window.emit_sql"));
    RETURN_IF_ERROR(sink(c.window->sink, "pipeline.window.sink"));
  } else {
    RETURN_IF_ERROR(sink(c.sink, "pipeline.sink"));
  }
  if (c.on_error.dlq) RETURN_IF_ERROR(sink(*c.on_error.dlq, "on_error.dlq"));
  return Status::OK();
}

}  // namespace sluice::app
