// The JSON the console's API answers (docs/design/0026-console.md, "The API (v1)"). Times
// are milliseconds since the epoch, sizes bytes.

export interface Broker {
  node_id: number;
  host: string;
  port: number;
}

export interface Cluster {
  cluster_id: string;
  controller_id: number;
  brokers: Broker[];
}

export interface Overview {
  time_ms: number;
  cluster: Cluster;
  topics: number;
  partitions: number;
  bytes_in_per_sec: number;
  bytes_out_per_sec: number;
  messages_in_per_sec: number;
  bytes_in_total: number;
  bytes_out_total: number;
  messages_in_total: number;
  // Of this broker (its data directory); null without one.
  disk_bytes: number | null;
  memory_rss_bytes: number;
  pipelines: { running: number; total: number } | null;
  groups: number | null;
  scope: string;
}

export interface TopicSummary {
  name: string;
  partitions: number;
  replication_factor: number;
  internal: boolean;
  size_bytes: number | null;
  messages: number;
  // From the change of its offsets between two lists (0 on the first).
  messages_per_sec: number;
}

export interface PartitionInfo {
  partition: number;
  leader: number;
  replicas: number[];
  isr: number[];
  low: number;
  high: number;
  error: string | null;
}

export interface TopicConfig {
  name: string;
  value: string | null;
  source: string;
  read_only: boolean;
  sensitive: boolean;
  default: boolean;
}

export interface Topic {
  name: string;
  internal: boolean;
  size_bytes: number | null;
  partitions: PartitionInfo[];
  configs: TopicConfig[];
}

export type Encoding = "json" | "text" | "hex" | "base64";

export interface FramedSchema {
  format: "avro" | "protobuf" | "json";
  id: number;
  message?: string; // Protobuf: the message type
}

export interface MessageHeader {
  key: string;
  value: string | null;
  value_encoding: Encoding | null;
}

export interface Message {
  partition: number;
  offset: number;
  timestamp: number;
  // As text in the encoding named (JSON stays text, exactly as sent); null: Kafka's null.
  key: string | null;
  key_encoding: Encoding | null;
  key_truncated?: boolean;
  value: string | null;
  value_encoding: Encoding | null;
  value_truncated?: boolean;
  // Set when the bytes were in a Schema Registry's framing and decoded with their schema
  // (then the encoding is "json"); `*_schema_error` when they were framed but did not decode.
  key_schema?: FramedSchema;
  key_schema_error?: string;
  value_schema?: FramedSchema;
  value_schema_error?: string;
  headers: MessageHeader[];
  size: number;
}

export interface Messages {
  messages: Message[];
  next: Record<string, number>;
  partial: boolean;
}

// One event of the live stream: the newest records since the last, and how many older
// ones were left out to keep events small.
export interface LiveEvent {
  messages: Message[];
  skipped: number;
}

export interface Produced {
  partition: number;
  offset: number;
}

export interface GroupSummary {
  group_id: string;
  state: string;
  simple: boolean;
  members: number;
  lag: number | null;
}

export interface GroupMember {
  member_id: string;
  group_instance_id: string | null;
  client_id: string;
  host: string;
  assignments: { topic: string; partitions: number[] }[];
}

export interface GroupOffset {
  topic: string;
  partition: number;
  // null: no commit (a partition a member holds)
  offset: number | null;
  high: number | null;
  lag: number | null;
}

export interface Group {
  group_id: string;
  state: string;
  protocol: string;
  simple: boolean;
  coordinator: Broker;
  members: GroupMember[];
  offsets: GroupOffset[];
}

// GET /api/v1/groups/{group}/history: the group's lag sampled every step_ms, oldest first,
// since its history was first asked (the server samples a group only while someone looks).
// Each array is as long as time_ms; null: not known then.
export interface GroupHistory {
  group: string;
  step_ms: number;
  time_ms: number[];
  total_lag: (number | null)[];
  partitions: { topic: string; partition: number; lag: (number | null)[] }[];
}

export interface ResetOffsets {
  executed: boolean;
  offsets: { topic: string; partition: number; previous: number | null; offset: number }[];
}

export type PipelineState = "running" | "stopped" | "failed";

export interface PipelineInfo {
  name: string;
  // Its file's current name: "<file>.stopped" while a user has it stopped.
  file: string;
  state: PipelineState;
  // Stopped by a user (POST .../stop), and so kept stopped across restarts of sluice.
  stopped: boolean;
  // Why it stopped, when it stopped on an error.
  error: string | null;
  messages_in: number;
  memory_limit_bytes: number;
}

export interface Pipelines {
  dir: string;
  memory_budget_bytes: number;
  // The running pipelines' memory limits added up: what a start must fit beside.
  memory_in_use_bytes: number;
  pipelines: PipelineInfo[];
}

// Where a message or row failed (src/pipeline/error_phase.h); a phase a newer server adds
// comes as its name.
export type ErrorPhase = "decode" | "handler" | "sink" | "source" | "commit" | "window" | "late";

export type PipelineSeriesName =
  | "messages_in_per_sec"
  | "rows_out_per_sec"
  | "bytes_in_per_sec"
  | "errors_per_sec"
  | "batch_seconds_mean"
  | "batch_seconds_p99"
  | "flush_seconds_mean"
  | "flush_seconds_p99"
  | "consumer_lag";

// A message a pipeline could not take, as its on_error kept it.
export interface DeadLetter {
  time_ms: number;
  phase: ErrorPhase | string;
  error: string;
  topic: string | null;
  partition: number | null;
  offset: number | null;
  // Shown as the message browser shows a value; null: none (a source error, a null value).
  value: { text: string; encoding: Encoding; truncated: boolean } | null;
}

// GET /api/v1/pipelines/{name}/history: sampled every step_ms while sluice runs, across
// the pipeline's restarts, oldest first (at most 30 minutes). Each series is as long as
// time_ms; null: no value then (stopped, or no batch in that step).
export interface PipelineHistory {
  name: string;
  step_ms: number;
  time_ms: number[];
  series: Record<PipelineSeriesName, (number | null)[]>;
  errors_total: Record<string, number>;
  // Newest first, at most 50, of this process's life.
  dead_letters: DeadLetter[];
}

// One pipeline with its file's text (null: the file could not be read).
export interface Pipeline extends PipelineInfo {
  yaml: string | null;
}

export interface PipelineProblem {
  line: number | null;  // 1-based; null: not tied to a line
  message: string;
}

// POST /api/v1/pipelines/validate; also the body of an INVALID_PIPELINE error.
export interface PipelineCheck {
  valid: boolean;
  // pipeline.name ("" when the file has none); null when the file does not check.
  name: string | null;
  topics: string[];
  problems: PipelineProblem[];
  // "pipeline.yaml:12: pipeline.sink.kafka: ..." or "pipeline.yaml: ...".
  warnings: string[];
  // `sluice pipeline validate`'s summary, when valid.
  description: string | null;
}

// POST /api/v1/pipelines/preview: the handler's rows for the newest messages of `topic`.
export interface PipelinePreview {
  topic: string;
  messages: number;
  // Each an object of column → value (a row that was not JSON comes as its text).
  rows: unknown[];
  // "message N: reason"
  errors: string[];
}

// A column of a result of POST /api/v1/sql: its name, its type as the query engine names
// it, and whether its values are numbers (then JSON numbers when exact in a double, else
// their text).
export interface SqlColumn {
  name: string;
  type: string;
  numeric: boolean;
}

// A value of a result row: a number for a numeric column (when exact in a double), else
// Postgres's text form; null is SQL's NULL.
export type SqlValue = number | string | null;

export interface SqlComplete {
  tag: string;  // the statement's command tag: "SELECT 3", "CREATE VIEW"
  rows: number;
  truncated: boolean;  // more rows than max_rows: the rest were not sent
}

export interface SqlError {
  sqlstate: string;
  message: string;
  position?: number;  // 1-based, in characters of the SQL sent, as Postgres counts
}

// One line of POST /api/v1/sql's answer (application/x-ndjson), each with exactly one key.
export type SqlLine =
  | { query_id: string }
  | { columns: SqlColumn[] }
  | { rows: SqlValue[][] }
  | { complete: SqlComplete }
  | { notice: string }
  | { done: { elapsed_ms: number } }
  | { error: SqlError };

export type RelationKind = "table" | "view" | "lake" | "topic";

// GET /api/v1/sql/schema: what the SQL editor completes. `sql_name` is the name to write
// in a query (lake.ns.t, quoted where it needs to be).
export interface SqlRelation {
  schema: string;
  name: string;
  sql_name: string;
  kind: RelationKind;
  columns: { name: string; type: string }[];
}

export interface SqlSchema {
  relations: SqlRelation[];
}

// A line of GET /api/v1/tables; the counts are the current snapshot's. Location, format
// and time are null when the table's metadata could not be read.
export interface TableSummary {
  namespace: string[];
  name: string;
  sql_name: string;
  location: string | null;
  format_version: number | null;
  current_snapshot_id: SnapshotId | null;  // null: no snapshot yet
  snapshots: number;
  records: number | null;
  data_files: number | null;
  size_bytes: number | null;
  last_updated_ms: number | null;
}

export interface Tables {
  catalog: string;
  // The warehouse directory an iceberg sink of this server writes to; null for a REST catalog.
  warehouse: string | null;
  tables: TableSummary[];
}

export interface SchemaField {
  id: number;
  name: string;
  type: string;
  required: boolean;
  doc?: string;
}

export interface PartitionField {
  name: string;
  transform: string;
  source_id: number;
  source_name: string | null;  // null: no column of the schema has source_id
  field_id: number;
}

// Iceberg's snapshot ids are random 63-bit integers, more digits than a double holds: the
// API sends them as their digits.
export type SnapshotId = string;

// A snapshot's `sluice.offsets.<group>.<topic>` entry: `source` is "<group>.<topic>" (not
// split: a group id and a topic may both hold dots).
export interface KafkaOffset {
  source: string;
  partition: number;
  offset: number;
}

export interface Snapshot {
  snapshot_id: SnapshotId;
  parent_id: SnapshotId | null;
  sequence_number: number;
  timestamp_ms: number;
  operation: string;
  summary: Record<string, string>;
  // Where the pipeline that wrote it had read its topics to (empty when not written by
  // one).
  kafka_offsets: KafkaOffset[];
}

export interface Table {
  namespace: string[];
  name: string;
  sql_name: string;
  location: string;
  format_version: number;
  table_uuid: string;
  current_snapshot_id: SnapshotId | null;
  schema: { schema_id: number; fields: SchemaField[] };
  partition_spec: { spec_id: number; fields: PartitionField[] };
  // Iceberg's sort order as the catalog keeps it; shown as it comes.
  sort_order: unknown;
  properties: Record<string, string>;
  snapshots: Snapshot[];
}

export type FileContent = "data" | "position_deletes" | "equality_deletes";

export interface DataFile {
  path: string;
  content: FileContent;
  format: string;
  records: number;
  size_bytes: number;
  // The file's partition: a value per partition field; shown as it comes.
  partition: unknown;
}

export interface TableFiles {
  snapshot_id: SnapshotId | null;
  files: DataFile[];
}

// POST /api/v1/tables/{ns}/{t}/maintenance {action: "compact"}: what a compaction would
// rewrite (dry_run) or rewrote; snapshot_id null: nothing committed.
export interface CompactResult {
  action: "compact";
  dry_run: boolean;
  target_file_size_bytes: number;
  snapshot_id: SnapshotId | null;
  partitions: number;
  files_rewritten: number;
  bytes_rewritten: number;
  files_written: number;
  records: number;
}

// {action: "expire", dry_run: true}: the snapshots an expiry would remove and the files
// only they reference (not the leftovers of failed commits, which only the run finds);
// carries_offsets: a Kafka offset only they hold, which the run first carries forward
// in a snapshot of its own.
export interface ExpirePreview {
  action: "expire";
  dry_run: true;
  older_than_ms: number;
  snapshots: SnapshotId[];
  files: number;
  carries_offsets: boolean;
}

export interface ExpireResult {
  action: "expire";
  dry_run: false;
  older_than_ms: number;
  snapshots_removed: number;
  snapshots_kept: number;
  files: number;
  bytes_deleted: number;
}
