// What the Start page (pages/start.tsx) makes from the user's choices, kept apart from the
// page so that it reads as data: the sample events it sends, the defaults it names things
// by, the pipeline file it writes, and the query it runs at the end.
import type { Broker, SqlRelation } from "./types";

export const kDefaultTopic = "clicks";
export const kDefaultSql = "SELECT page, count(*) AS views FROM batch GROUP BY page";
// Messages a press of "Send sample messages" produces.
export const kSampleCount = 50;
// Previews and the pipeline commit this often, so that the page shows a result in seconds.
export const kIntervalSeconds = 1;

// The pipeline's output: an Iceberg table in the server's warehouse, or a Kafka topic.
export type SinkSpec =
  | { kind: "iceberg"; table: string; warehouse: string }
  | { kind: "kafka"; topic: string };

// Pages in a fixed cycle, weighted so that the counts per page differ; users and timings
// drawn at random. Each a click a web site could send.
const kPages = ["/", "/pricing", "/", "/docs", "/blog", "/", "/pricing", "/signup", "/docs"];
let samplesMade = 0;

export function sampleEvent(): { key: string; value: string } {
  const page = kPages[samplesMade++ % kPages.length];
  const user = `u${1 + Math.floor(Math.random() * 9)}`;
  const ms = Math.round(4 + Math.random() ** 2 * 400);
  return { key: user, value: JSON.stringify({ user, page, ms }) };
}

// A topic's name as part of an SQL identifier: lower case, `_` for anything else.
function identifierPart(topic: string): string {
  return topic.toLowerCase().replace(/[^a-z0-9_]/g, "_");
}

export const defaultTable = (topic: string) => `start.${identifierPart(topic)}_by_page`;
export const defaultSinkTopic = (topic: string) => `${topic}-by-page`.slice(0, 249);
export const defaultPipelineName = (topic: string) => `start-${topic}`.slice(0, 100);

// Whether `name` is a pipeline's name, as PUT /api/v1/pipelines/{p} takes it.
export const isPipelineName = (name: string) =>
  /^[A-Za-z0-9._-]{1,100}$/.test(name) && !name.startsWith(".");

// "namespace.table" with levels of letters, digits and '_' (names SQL reads unquoted when
// lower case), as the iceberg sink's table_name; null when it is not.
export function splitTableName(name: string): { namespace: string; table: string } | null {
  if (!/^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$/.test(name)) return null;
  const dot = name.lastIndexOf(".");
  return { namespace: name.slice(0, dot), table: name.slice(dot + 1) };
}

// A broker's address as librdkafka reads it ("[::1]:9092" for an IPv6 host).
export function brokerAddress(b: Broker): string {
  return b.host.includes(":") ? `[${b.host}]:${b.port}` : `${b.host}:${b.port}`;
}

// A YAML double-quoted scalar: JSON's escapes are YAML's too. (The file's `{{ }}` and
// `{# #}` are read as templates before the YAML, docs/pipelines.md: text holding them is
// refused by the check, which the page shows.)
const q = (s: string) => JSON.stringify(s);

// The pipeline file: the topic's messages in batches as table `batch`
// (handlers.InferredMemBatch: a column per JSON field), the user's SQL over each batch, its
// rows to `sink` (null: the console's, for a preview, which writes nothing anyway).
export function pipelineYaml(p: {
  name: string;
  topic: string;
  brokers: string[];
  sql: string;
  sink: SinkSpec | null;
}): string {
  const lines = [
    "# Written by the console's Start page; docs/pipelines.md lists every key.",
    "pipeline:",
    `  name: ${q(p.name)}`,
    `  description: ${q(`Topic ${p.topic} through the SQL written on the Start page`)}`,
    "  batch_size: 1000",
    `  flush_interval_seconds: ${kIntervalSeconds}`,
    "  source:",
    "    type: kafka",
    "    kafka:",
    `      brokers: [${p.brokers.map(q).join(", ")}]`,
    `      group_id: ${q(p.name)}`,
    "      auto_offset_reset: earliest",
    `      topics: [${q(p.topic)}]`,
    "  handler:",
    "    type: handlers.InferredMemBatch",
    `    sql: ${q(p.sql.trim())}`,
    "  sink:",
  ];
  const sink = p.sink;
  if (sink === null) {
    lines.push("    type: console");
  } else if (sink.kind === "iceberg") {
    lines.push(
      "    type: iceberg",
      "    iceberg:",
      "      catalog_name: sluice",
      `      table_name: ${q(sink.table)}`,
      `      warehouse: ${q(sink.warehouse)}`,
      `      commit_interval_seconds: ${kIntervalSeconds}`,
      // A changed SQL with a new column, run again into the same table, adds the column
      // rather than failing every batch.
      "      schema_evolution: true",
    );
  } else {
    lines.push(
      "    type: kafka",
      "    kafka:",
      `      brokers: [${p.brokers.map(q).join(", ")}]`,
      `      topic: ${q(sink.topic)}`,
    );
  }
  return lines.join("\n") + "\n";
}

// An SQL string literal.
const literal = (s: string) => `'${s.replace(/'/g, "''")}'`;

// What "Query it" runs: the table by the name the query server gives it, or the sink
// topic's JSON messages as columns.
export function resultQuery(sink: SinkSpec, tableSqlName: string | null): string | null {
  if (sink.kind === "iceberg") {
    return tableSqlName === null ? null : `SELECT * FROM ${tableSqlName} LIMIT 100`;
  }
  return `SELECT * FROM topic(${literal(sink.topic)}, format => 'json') LIMIT 100`;
}

// The relation `batch` as the SQL editor completes it: the fields of the messages shown
// (their JSON values' top-level keys), named by their JSON type, since the handler infers
// the column types from each batch.
export function batchRelation(values: (string | null)[]): SqlRelation {
  const columns = new Map<string, string>();
  for (const v of values) {
    if (v === null) continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(v);
    } catch {
      continue;
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) continue;
    for (const [k, field] of Object.entries(parsed)) {
      if (!columns.has(k)) columns.set(k, jsonType(field));
    }
  }
  return {
    schema: "",
    name: "batch",
    sql_name: "batch",
    kind: "table",
    columns: [...columns].map(([name, type]) => ({ name, type })),
  };
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v === "object" ? "object" : typeof v;
}
