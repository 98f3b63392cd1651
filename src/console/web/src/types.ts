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
  disk_bytes: number;
  memory_rss_bytes: number;
  pipelines: { running: number; total: number };
  groups: number;
}

export interface TopicSummary {
  name: string;
  partitions: number;
  replication_factor: number;
  internal: boolean;
  size_bytes: number;
  messages: number;
  bytes_in_per_sec: number;
}

export interface PartitionInfo {
  partition: number;
  leader: number;
  replicas: number[];
  isr: number[];
  low: number;
  high: number;
  size_bytes: number;
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
  partitions: PartitionInfo[];
  configs: TopicConfig[];
}

export type Encoding = "json" | "text" | "hex" | "base64";

export interface MessageHeader {
  key: string;
  value: unknown;
  encoding: Encoding;
}

export interface Message {
  partition: number;
  offset: number;
  timestamp: number;
  key: unknown;
  key_encoding: Encoding;
  value: unknown;
  value_encoding: Encoding;
  headers: MessageHeader[];
  size: number;
}

export interface Messages {
  messages: Message[];
  next: Record<string, number>;
}

export interface Produced {
  partition: number;
  offset: number;
}

export interface GroupSummary {
  group_id: string;
  state: string;
  protocol_type: string;
  members: number;
  lag: number | null;
}

export interface GroupMember {
  member_id: string;
  client_id: string;
  host: string;
  assignments: { topic: string; partitions: number[] }[];
}

export interface GroupOffset {
  topic: string;
  partition: number;
  offset: number;
  high: number;
  lag: number | null;
  metadata: string;
}

export interface Group {
  group_id: string;
  state: string;
  protocol: string;
  protocol_type: string;
  coordinator: number | Broker | null;
  members: GroupMember[];
  offsets: GroupOffset[];
}

export interface ResetOffsets {
  offsets: { topic: string; partition: number; previous: number | null; offset: number }[];
}
