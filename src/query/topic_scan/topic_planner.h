// Topics named as tables (`kafka.<topic>`, see kTopicSchema) become topic() calls, then
// topic() bounds from the WHERE clause: plain conjuncts of a SELECT's WHERE on a
// topic() call's `offset`, `timestamp` and `partition` columns become the call's named
// parameters, so the scan reads only the offsets and partitions that can match.
//
//   ASSIGN_OR_RETURN(std::string sql, PlanTopicBounds(conn, sql));
//   // SELECT * FROM topic('e') WHERE "offset" >= 10 AND partition = 2
//   //   -> SELECT * FROM topic('e', from_offset => greatest(10), partitions => [2]) WHERE ...
//
// The WHERE clause stays as written: pushed bounds only ever narrow what the scan reads to
// a superset of the rows the WHERE keeps, so the answer is the same. What is pushed and
// what is not (and why): docs/design/0010-query-server.md, decision 22.
// SQL without the function's name, that DuckDB cannot parse, that is not a SELECT, or whose
// tree DuckDB cannot print back comes back unchanged. Parsing runs json_serialize_sql /
// json_deserialize_sql on `conn` and leaves no state on it; an error means `conn` could
// not run them. PlanTopicTree is the same pass as one stage on a tree parsed once
// (query/sql_tree), for the engine.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "duck/database.h"
#include "query/sql_tree/sql_tree.h"

namespace sluice::query {

// The schema topics are relations of: `kafka.events` is topic('events') AS events (the
// catalog emulation lists topics there; docs/design/0022-schemas.md).
inline constexpr std::string_view kTopicSchema = "kafka";

struct TopicPlanOptions {
  std::string function_name = "topic";  // as registered (TopicFunctionOptions)
};

// The SQL to run: `sql` with bounds filled into its topic() calls, or `sql` itself when
// there is nothing to push.
Result<std::string> PlanTopicBounds(duck::Connection& conn, std::string_view sql,
                                    const TopicPlanOptions& options = {});

// Whether `sql` may call the function: a text check that costs no parse. False means
// planning would hand it back unchanged.
bool MayCallTopic(std::string_view sql, const TopicPlanOptions& options = {});

// Fills the bounds into the topic() calls of a parsed tree; true when it changed the tree
// (tree.changed() then). A tree that is not ok() is left as it is. An error (a tree of
// another shape than DuckDB writes) may leave the tree half changed: the caller plans
// without the bounds.
Result<bool> PlanTopicTree(sql_tree::SqlTree& tree, const TopicPlanOptions& options = {});

}  // namespace sluice::query
