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

export interface ResetOffsets {
  executed: boolean;
  offsets: { topic: string; partition: number; previous: number | null; offset: number }[];
}
