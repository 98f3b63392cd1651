#include "console/openapi.h"

#include <nlohmann/json.hpp>

namespace sluice::console {
namespace {

using Json = nlohmann::ordered_json;

Json Param(const char* name, const char* in, const char* type, const char* description,
           bool required = false) {
  return Json{{"name", name},
              {"in", in},
              {"required", required || std::string_view(in) == "path"},
              {"description", description},
              {"schema", {{"type", type}}}};
}

Json Ref(const char* schema) {
  return Json{{"$ref", std::string("#/components/schemas/") + schema}};
}

Json JsonContent(const Json& schema) { return Json{{"application/json", {{"schema", schema}}}}; }

Json Answer(const char* description, const Json& schema) {
  return Json{{"description", description}, {"content", JsonContent(schema)}};
}

// The errors every operation may answer, beside its own.
Json Responses(Json own) {
  own["400"] = Answer("bad input: a field, a parameter, or what the broker refused", Ref("Error"));
  own["401"] = Json{{"description", "a login is needed (http.auth)"}};
  own["403"] = Answer("refused: the browser guard, or Kafka's ACLs", Ref("Error"));
  own["504"] = Answer("the broker did not answer in time", Ref("Error"));
  return own;
}

Json Operation(const char* summary, Json parameters, Json responses, Json body = nullptr) {
  Json op{{"summary", summary},
          {"parameters", std::move(parameters)},
          {"responses", Responses(std::move(responses))}};
  if (!body.is_null()) {
    op["requestBody"] = Json{{"required", true}, {"content", JsonContent(body)}};
  }
  return op;
}

Json Object(Json properties, std::vector<std::string> required = {}) {
  Json o{{"type", "object"}, {"properties", std::move(properties)}};
  if (!required.empty()) o["required"] = required;
  return o;
}

Json Type(const char* t) { return Json{{"type", t}}; }
Json ArrayOf(Json items) { return Json{{"type", "array"}, {"items", std::move(items)}}; }
Json Nullable(const char* t) { return Json{{"type", t}, {"nullable", true}}; }

Json Build() {
  const Json topic = Param("topic", "path", "string", "the topic's name, percent-encoded");
  const Json group = Param("group", "path", "string", "the group id, percent-encoded");
  Json schemas;
  schemas["Error"] = Object(
      {{"error",
        Object({{"code", Type("string")}, {"message", Type("string")}}, {"code", "message"})}},
      {"error"});
  schemas["Broker"] =
      Object({{"node_id", Type("integer")}, {"host", Type("string")}, {"port", Type("integer")}});
  schemas["Cluster"] = Object({{"cluster_id", Type("string")},
                               {"controller_id", Type("integer")},
                               {"brokers", ArrayOf(Ref("Broker"))}});
  schemas["Overview"] =
      Object({{"time_ms", Type("integer")},
              {"cluster", Ref("Cluster")},
              {"topics", Type("integer")},
              {"partitions", Type("integer")},
              {"groups", Nullable("integer")},
              {"scope", Type("string")},
              {"bytes_in_per_sec", Type("number")},
              {"bytes_out_per_sec", Type("number")},
              {"messages_in_per_sec", Type("number")},
              {"bytes_in_total", Type("integer")},
              {"bytes_out_total", Type("integer")},
              {"messages_in_total", Type("integer")},
              {"disk_bytes", Nullable("integer")},
              {"memory_rss_bytes", Type("integer")},
              {"pipelines", Object({{"running", Type("integer")}, {"total", Type("integer")}})}});
  schemas["TopicSummary"] = Object({{"name", Type("string")},
                                    {"partitions", Type("integer")},
                                    {"replication_factor", Type("integer")},
                                    {"internal", Type("boolean")},
                                    {"messages", Type("integer")},
                                    {"messages_per_sec", Type("number")},
                                    {"size_bytes", Nullable("integer")}});
  schemas["Partition"] = Object({{"partition", Type("integer")},
                                 {"leader", Type("integer")},
                                 {"replicas", ArrayOf(Type("integer"))},
                                 {"isr", ArrayOf(Type("integer"))},
                                 {"low", Type("integer")},
                                 {"high", Type("integer")},
                                 {"error", Nullable("string")}});
  schemas["Config"] = Object({{"name", Type("string")},
                              {"value", Nullable("string")},
                              {"source", Type("string")},
                              {"read_only", Type("boolean")},
                              {"sensitive", Type("boolean")},
                              {"default", Type("boolean")}});
  schemas["Topic"] = Object({{"name", Type("string")},
                             {"internal", Type("boolean")},
                             {"size_bytes", Nullable("integer")},
                             {"partitions", ArrayOf(Ref("Partition"))},
                             {"configs", ArrayOf(Ref("Config"))}});
  schemas["NewTopic"] =
      Object({{"name", Type("string")},
              {"partitions", Type("integer")},
              {"replication_factor", Type("integer")},
              {"configs", Json{{"type", "object"}, {"additionalProperties", Type("string")}}}},
             {"name"});
  schemas["Bytes"] = Json{{"type", "string"},
                          {"nullable", true},
                          {"description", "as its *_encoding says: json, text, hex or base64"}};
  schemas["Message"] =
      Object({{"partition", Type("integer")},
              {"offset", Type("integer")},
              {"timestamp", Type("integer")},
              {"key", Ref("Bytes")},
              {"key_encoding", Nullable("string")},
              {"value", Ref("Bytes")},
              {"value_encoding", Nullable("string")},
              {"headers", ArrayOf(Object({{"key", Type("string")},
                                          {"value", Ref("Bytes")},
                                          {"value_encoding", Nullable("string")}}))},
              {"size", Type("integer")}});
  schemas["NewMessage"] =
      Object({{"partition", Type("integer")},
              {"key", Nullable("string")},
              {"value", Nullable("string")},
              {"headers", Json{{"type", "object"}, {"additionalProperties", Nullable("string")}}}});
  schemas["GroupSummary"] = Object({{"group_id", Type("string")},
                                    {"state", Type("string")},
                                    {"simple", Type("boolean")},
                                    {"members", Type("integer")},
                                    {"lag", Nullable("integer")}});
  schemas["Group"] =
      Object({{"group_id", Type("string")},
              {"state", Type("string")},
              {"protocol", Type("string")},
              {"simple", Type("boolean")},
              {"coordinator", Ref("Broker")},
              {"members",
               ArrayOf(Object({{"member_id", Type("string")},
                               {"group_instance_id", Nullable("string")},
                               {"client_id", Type("string")},
                               {"host", Type("string")},
                               {"assignments",
                                ArrayOf(Object({{"topic", Type("string")},
                                                {"partitions", ArrayOf(Type("integer"))}}))}}))},
              {"offsets", ArrayOf(Object({{"topic", Type("string")},
                                          {"partition", Type("integer")},
                                          {"offset", Nullable("integer")},
                                          {"high", Nullable("integer")},
                                          {"lag", Nullable("integer")}}))}});
  schemas["ResetOffsets"] = Object(
      {{"topic", Type("string")},
       {"partitions", ArrayOf(Type("integer"))},
       {"to", Json{{"type", "string"}, {"enum", {"earliest", "latest", "offset", "timestamp"}}}},
       {"offset", Type("integer")},
       {"timestamp", Type("integer")},
       {"dry_run", Type("boolean")}},
      {"topic", "to"});

  Json paths;
  paths["/api/v1/openapi.json"]["get"] =
      Operation("this document", Json::array(), {{"200", {{"description", "OpenAPI 3.0"}}}});
  paths["/api/v1/cluster"]["get"] =
      Operation("the cluster: its id, controller and brokers", Json::array(),
                {{"200", Answer("the cluster", Ref("Cluster"))}});
  paths["/api/v1/overview"]["get"] = Operation(
      "counts, this broker's rates over the last seconds, disk and memory (poll every 2 s)",
      Json::array(), {{"200", Answer("the overview", Ref("Overview"))}});
  paths["/api/v1/topics"]["get"] = Operation(
      "every topic", Json::array({Param("internal", "query", "boolean", "list __ topics too")}),
      {{"200", Answer("the topics", Object({{"topics", ArrayOf(Ref("TopicSummary"))}}))}});
  paths["/api/v1/topics"]["post"] =
      Operation("create a topic", Json::array(),
                {{"201", Answer("created", Ref("Topic"))},
                 {"409", Answer("TOPIC_ALREADY_EXISTS", Ref("Error"))}},
                Ref("NewTopic"));
  paths["/api/v1/topics/{topic}"]["get"] =
      Operation("a topic: partitions, watermarks, configs", Json::array({topic}),
                {{"200", Answer("the topic", Ref("Topic"))},
                 {"404", Answer("UNKNOWN_TOPIC_OR_PART", Ref("Error"))}});
  paths["/api/v1/topics/{topic}"]["delete"] =
      Operation("delete a topic", Json::array({topic}), {{"204", {{"description", "deleted"}}}});
  paths["/api/v1/topics/{topic}/partitions"]["post"] = Operation(
      "add partitions", Json::array({topic}), {{"200", Answer("the topic", Ref("Topic"))}},
      Object({{"count", Type("integer")}}, {"count"}));
  paths["/api/v1/topics/{topic}/configs"]["put"] =
      Operation("set and remove topic configs (the others are kept)", Json::array({topic}),
                {{"200", Answer("the configs", Object({{"configs", ArrayOf(Ref("Config"))}}))}},
                Object({{"set", Json{{"type", "object"}, {"additionalProperties", Type("string")}}},
                        {"delete", ArrayOf(Type("string"))}}));
  paths["/api/v1/topics/{topic}/messages"]["get"] = Operation(
      "a page of messages: from the newest (default), the oldest, an offset or a time; at "
      "most `limit` from each partition read, the page ordered by time",
      Json::array({topic, Param("partition", "query", "integer", "one partition (default: all)"),
                   Param("start", "query", "string", "newest or oldest"),
                   Param("offset", "query", "integer", "start at this offset"),
                   Param("timestamp", "query", "integer", "start at this time (ms since 1970)"),
                   Param("limit", "query", "integer", "1 to 1000, default 50"),
                   Param("order", "query", "string", "newest (default) or oldest first"),
                   Param("binary", "query", "string", "hex (default) or base64")}),
      {{"200", Answer("the page", Object({{"messages", ArrayOf(Ref("Message"))},
                                          {"next", Json{{"type", "object"},
                                                        {"additionalProperties", Type("integer")}}},
                                          {"partial", Type("boolean")}}))}});
  paths["/api/v1/topics/{topic}/messages"]["post"] = Operation(
      "produce one message (acks=all)", Json::array({topic}),
      {{"201", Answer("where it went",
                      Object({{"partition", Type("integer")}, {"offset", Type("integer")}}))}},
      Ref("NewMessage"));
  paths["/api/v1/topics/{topic}/messages/live"]["get"] = Operation(
      "server-sent events: `event: messages` with {messages, skipped} at most every 200 ms, "
      "from the end on",
      Json::array({topic, Param("partition", "query", "integer", "one partition (default: all)"),
                   Param("binary", "query", "string", "hex (default) or base64")}),
      {{"200", {{"description", "text/event-stream"}}},
       {"429", Answer("too many live streams at once", Ref("Error"))}});
  paths["/api/v1/groups"]["get"] = Operation(
      "every consumer group", Json::array(),
      {{"200", Answer("the groups", Object({{"groups", ArrayOf(Ref("GroupSummary"))}}))}});
  paths["/api/v1/groups/{group}"]["get"] =
      Operation("a group: members, assignments, offsets and lag", Json::array({group}),
                {{"200", Answer("the group", Ref("Group"))},
                 {"404", Answer("GROUP_ID_NOT_FOUND", Ref("Error"))}});
  paths["/api/v1/groups/{group}"]["delete"] = Operation(
      "delete a group with no members", Json::array({group}),
      {{"204", {{"description", "deleted"}}}, {"409", Answer("NON_EMPTY_GROUP", Ref("Error"))}});
  paths["/api/v1/groups/{group}/reset-offsets"]["post"] = Operation(
      "reset a group's offsets of a topic (dry_run: only say what would change)",
      Json::array({group}),
      {{"200", Answer("the offsets",
                      Object({{"executed", Type("boolean")},
                              {"offsets", ArrayOf(Object({{"topic", Type("string")},
                                                          {"partition", Type("integer")},
                                                          {"previous", Nullable("integer")},
                                                          {"offset", Type("integer")}}))}}))},
       {"409", Answer("NON_EMPTY_GROUP: the group has members", Ref("Error"))}},
      Ref("ResetOffsets"));
  paths["/api/v1/groups/{group}/history"]["get"] = Operation(
      "the group's lag over time, per partition and in total: sampled every step_ms while "
      "someone asked within 10 minutes (the first ask starts it), at most 30 minutes kept; "
      "null where not known",
      Json::array({group}),
      {{"200",
        Answer("the lag history",
               Object({{"group", Type("string")},
                       {"step_ms", Type("integer")},
                       {"time_ms", ArrayOf(Type("integer"))},
                       {"total_lag", ArrayOf(Nullable("number"))},
                       {"partitions", ArrayOf(Object({{"topic", Type("string")},
                                                      {"partition", Type("integer")},
                                                      {"lag", ArrayOf(Nullable("number"))}}))}}))},
       {"404", Answer("GROUP_ID_NOT_FOUND", Ref("Error"))}});
  const Json pipeline = Param("pipeline", "path", "string", "the pipeline's name");
  const Json yaml = Object({{"yaml", Type("string")}}, {"yaml"});
  paths["/api/v1/pipelines"]["get"] =
      Operation("the pipelines of --pipelines DIR: state, messages in, memory", Json::array(),
                {{"200", Answer("the pipelines", Type("object"))},
                 {"404", Answer("PIPELINES_OFF: no --pipelines DIR", Ref("Error"))}});
  paths["/api/v1/pipelines/validate"]["post"] = Operation(
      "check a pipeline file: its problems by line", Json::array(),
      {{"200", Answer("valid, problems [{line, message}], warnings", Type("object"))}}, yaml);
  paths["/api/v1/pipelines/preview"]["post"] = Operation(
      "run a file's handler over the newest messages of its topic, sandboxed, nothing "
      "written",
      Json::array(),
      {{"200", Answer("topic, messages, rows, errors", Type("object"))},
       {"429", Answer("PREVIEW_BUSY: one preview at a time", Ref("Error"))}},
      Object({{"yaml", Type("string")}, {"limit", Type("integer")}}, {"yaml"}));
  paths["/api/v1/pipelines/{pipeline}"]["get"] =
      Operation("a pipeline and its file", Json::array({pipeline}),
                {{"200", Answer("the pipeline with `yaml`", Type("object"))}});
  paths["/api/v1/pipelines/{pipeline}"]["put"] = Operation(
      "write the file (checked) and start or restart the pipeline", Json::array({pipeline}),
      {{"200", Answer("restarted", Type("object"))},
       {"201", Answer("started", Type("object"))},
       {"409", Answer("PIPELINE_NOT_STARTED, PIPELINE_FILE_ELSEWHERE", Ref("Error"))}},
      yaml);
  paths["/api/v1/pipelines/{pipeline}"]["delete"] =
      Operation("stop the pipeline and remove its file", Json::array({pipeline}),
                {{"204", {{"description", "removed"}}}});
  paths["/api/v1/pipelines/{pipeline}/restart"]["post"] =
      Operation("restart the pipeline (start it, when stopped)", Json::array({pipeline}),
                {{"200", Answer("restarted", Type("object"))},
                 {"400", Answer("PIPELINE_OVER_BUDGET", Ref("Error"))},
                 {"409", Answer("PIPELINE_NOT_STARTED", Ref("Error"))}});
  paths["/api/v1/pipelines/{pipeline}/stop"]["post"] = Operation(
      "stop the pipeline and keep it: its file renamed <file>.stopped, so it stays stopped "
      "across restarts of sluice; its memory leaves the budget",
      Json::array({pipeline}),
      {{"200", Answer("stopped", Type("object"))},
       {"409", Answer("PIPELINE_NOT_STOPPED, PIPELINE_FILE_ELSEWHERE", Ref("Error"))}});
  paths["/api/v1/pipelines/{pipeline}/start"]["post"] = Operation(
      "start a stopped pipeline from its file as it is now (renamed back)", Json::array({pipeline}),
      {{"200", Answer("running", Type("object"))},
       {"400", Answer("PIPELINE_OVER_BUDGET: the running pipelines leave no room", Ref("Error"))},
       {"409", Answer("PIPELINE_NOT_STARTED: it stays stopped", Ref("Error"))}});
  paths["/api/v1/pipelines/{pipeline}/history"]["get"] = Operation(
      "the pipeline's activity over time (every step_ms, at most 30 minutes, kept across its "
      "restarts): time_ms, series {messages_in_per_sec, rows_out_per_sec, bytes_in_per_sec, "
      "errors_per_sec, batch_seconds_mean, batch_seconds_p99, flush_seconds_mean, "
      "flush_seconds_p99, consumer_lag} (null: a gap), errors_total by phase since it last "
      "started, and dead_letters: its last 50 failed messages or rows, newest first "
      "{time_ms, phase, error, dead_lettered, topic, partition, offset, value {text, encoding, "
      "truncated}}",
      Json::array({pipeline}),
      {{"200", Answer("the history", Type("object"))},
       {"404", Answer("UNKNOWN_PIPELINE", Ref("Error"))}});
  const Json sql_body = Object({{"sql", Type("string")}, {"max_rows", Type("integer")}}, {"sql"});
  paths["/api/v1/sql"]["post"] = Operation(
      "run SQL in the query server as the login's user: application/x-ndjson, a line each: "
      "{query_id}, then per result {columns: [{name, type, numeric}]}, {rows: [[...]]}, "
      "{complete: {tag, rows, truncated}}, {notice}; last {done: {elapsed_ms}} or "
      "{error: {sqlstate, message, position}}",
      Json::array(),
      {{"200", {{"description", "application/x-ndjson, streamed as the query runs"}}},
       {"404", Answer("SQL_OFF: no query server", Ref("Error"))},
       {"429", Answer("TOO_MANY_QUERIES", Ref("Error"))},
       {"503", Answer("SQL_UNAVAILABLE: the query server is starting or full", Ref("Error"))}},
      sql_body);
  paths["/api/v1/sql/{query_id}"]["delete"] = Operation(
      "cancel a running query of this login (its stream ends with SQLSTATE 57014)",
      Json::array({Param("query_id", "path", "string", "the stream's first line's query_id")}),
      {{"204", {{"description", "cancelled"}}}, {"404", Answer("no such query", Ref("Error"))}});
  paths["/api/v1/sql/download"]["post"] = Operation(
      "the last result of the SQL as a file", Json::array(),
      {{"200", {{"description", "text/csv (a header line) or application/vnd.apache.parquet"}}}},
      Object({{"sql", Type("string")}, {"format", Type("string")}, {"max_rows", Type("integer")}},
             {"sql"}));
  paths["/api/v1/sql/schema"]["get"] = Operation(
      "what the editor completes: relations with their columns", Json::array(),
      {{"200", Answer("{relations: [{schema, name, sql_name, kind, columns}]}", Type("object"))}});
  const Json ns = Param("namespace", "path", "string", "the namespace's levels joined by '.'");
  const Json table = Param("table", "path", "string", "the table's name");
  paths["/api/v1/tables"]["get"] = Operation(
      "the lake's tables (those the login may read) with their current totals", Json::array(),
      {{"200", Answer("{catalog, tables}", Type("object"))},
       {"404", Answer("TABLES_OFF: no warehouse or REST catalog", Ref("Error"))}});
  paths["/api/v1/tables/{namespace}/{table}"]["get"] = Operation(
      "a table: schema, partition spec, sort order, properties, snapshots with their Kafka "
      "offsets",
      Json::array({ns, table}),
      {{"200", Answer("the table", Type("object"))},
       {"404", Answer("NO_SUCH_TABLE", Ref("Error"))}});
  paths["/api/v1/tables/{namespace}/{table}/files"]["get"] =
      Operation("the files of a snapshot (default: the current one)",
                Json::array({ns, table, Param("snapshot", "query", "integer", "a snapshot id")}),
                {{"200", Answer("{snapshot_id, files}", Type("object"))},
                 {"404", Answer("NO_SUCH_TABLE, NO_SUCH_SNAPSHOT", Ref("Error"))}});
  paths["/api/v1/tables/{namespace}/{table}/maintenance"]["post"] = Operation(
      "compaction or expiry: a preview by default (dry_run), run with dry_run false by a super "
      "user",
      Json::array({ns, table}),
      {{"200", Answer("what it would do, or did", Type("object"))},
       {"403", Answer("MAINTENANCE_NEEDS_SUPER_USER", Ref("Error"))}},
      Object({{"action", Type("string")},
              {"dry_run", Type("boolean")},
              {"target_file_size_bytes", Type("integer")},
              {"older_than_ms", Type("integer")}},
             {"action"}));
  return Json{{"openapi", "3.0.3"},
              {"info",
               {{"title", "sluice console API"},
                {"version", "1"},
                {"description",
                 "What the console page uses (docs/design/0026-console.md). Changes need "
                 "`X-Sluice-Request: 1` or a JSON Content-Type (browser safety, 0021)."}}},
              {"paths", paths},
              {"components", {{"schemas", schemas}}}};
}

}  // namespace

const std::string& OpenApiDocument() {
  static const std::string doc = Build().dump(2);
  return doc;
}

}  // namespace sluice::console
