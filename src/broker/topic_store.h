// TopicStore: the broker's durable record of its topics (name, id, partition count,
// config overrides), in <data-dir>/meta/topics.json, replaced atomically on every change
// (write a temp file, fdatasync, rename, fsync the directory).
//
// TopicConfig: the per-topic settings a user can set, with Kafka's names, defaults and
// validation.
//
// Threads: a TopicStore is owned by one shard (the broker's metadata owner); it is not
// thread-safe.
#pragma once

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "kafka/protocol/api.h"
#include "kafka/protocol/wire.h"
#include "storage/env.h"

namespace sluice::broker {

// A Kafka error code with the message sent back to the client.
struct TopicError {
  kafka::ErrorCode code = kafka::ErrorCode::kNone;
  std::string message;
  bool ok() const { return code == kafka::ErrorCode::kNone; }
};

// The largest max.message.bytes a topic may set (Kafka has no such bound; 64 MiB keeps a
// batch well inside a request and a segment).
inline constexpr uint32_t kMaxTopicMessageBytes = 64u << 20;
// segment.bytes bounds: a segment holds at least a batch header, and a segment plus its
// largest batch stays within an int32 file position.
inline constexpr int64_t kMinSegmentBytes = 61;
inline constexpr int64_t kMaxSegmentBytes = INT32_MAX - int64_t{kMaxTopicMessageBytes};

struct TopicConfig {
  int64_t retention_ms = 7LL * 24 * 3600 * 1000;  // retention.ms, -1 = forever
  int64_t retention_bytes = -1;                   // retention.bytes, -1 = unlimited
  int64_t segment_bytes = 1LL << 30;              // segment.bytes
  int64_t segment_ms = 7LL * 24 * 3600 * 1000;    // segment.ms
  int32_t max_message_bytes = 1048588;            // max.message.bytes
  bool log_append_time = false;                   // message.timestamp.type=LogAppendTime
  std::string cleanup_policy = "delete";          // cleanup.policy: delete, compact or both
  // Compaction (docs/design/0017-log-compaction.md), Kafka's names and defaults.
  double min_cleanable_dirty_ratio = 0.5;            // min.cleanable.dirty.ratio
  int64_t min_compaction_lag_ms = 0;                 // min.compaction.lag.ms
  int64_t max_compaction_lag_ms = INT64_MAX;         // max.compaction.lag.ms
  int64_t delete_retention_ms = 24LL * 3600 * 1000;  // delete.retention.ms (tombstones)
  // Replication (docs/design/0018-cluster.md): acks=all is refused NOT_ENOUGH_REPLICAS
  // while the committed ISR is smaller. A single node's partitions ignore it.
  int32_t min_insync_replicas = 1;  // min.insync.replicas
  // Tiered storage (docs/design/0025-tiered-storage.md), KIP-405's names: closed segments
  // are uploaded to the broker's tiered_storage bucket, and only local.retention.* of
  // them is kept on disk (-2: as retention.*); retention.* applies to the whole log.
  bool remote_storage_enable = false;  // remote.storage.enable
  int64_t local_retention_ms = -2;     // local.retention.ms
  int64_t local_retention_bytes = -2;  // local.retention.bytes
  // Not a topic config: whether this broker has tiered storage (a `tiered_storage:`
  // section), set in the defaults by serve. remote.storage.enable=true is refused without.
  bool remote_storage_available = false;

  // cleanup.policy includes compact: the cleaner runs, produce needs keys.
  bool compacted() const { return cleanup_policy.find("compact") != std::string::npos; }
  // cleanup.policy includes delete: retention deletes old segments.
  bool deletes() const { return cleanup_policy.find("delete") != std::string::npos; }
  // The local retention in effect: local.retention.* when tiered, -2 meaning retention.*.
  int64_t EffectiveLocalRetentionMs() const {
    return remote_storage_enable && local_retention_ms != -2 ? local_retention_ms : retention_ms;
  }
  int64_t EffectiveLocalRetentionBytes() const {
    return remote_storage_enable && local_retention_bytes != -2 ? local_retention_bytes
                                                                : retention_bytes;
  }

  // Applies `overrides` (Kafka config names to values) on top of `defaults`. An unknown
  // name or a bad value is INVALID_CONFIG naming the key and the value.
  static Result<TopicConfig> Resolve(const std::map<std::string, std::string>& overrides,
                                     const TopicConfig& defaults, TopicError* error);
  // Every config with its effective value, for DescribeConfigs.
  std::map<std::string, std::string> ToMap() const;
  // The names Resolve accepts.
  static const std::vector<std::string>& Names();
};

struct TopicInfo {
  std::string name;
  kafka::Uuid id;
  int32_t partitions = 0;
  std::map<std::string, std::string> overrides;  // as the user set them
  TopicConfig config;                            // effective
};

// Kafka's rules: 1 to 249 characters from [a-zA-Z0-9._-], not "." or "..".
TopicError ValidateTopicName(const std::string& name);

class TopicStore {
 public:
  // Loads <data_dir>/meta/topics.json (a missing file is an empty store). A file that is
  // not what this code writes is a Corruption naming the file and what is wrong. Its
  // files are written through `env`, which must outlive the store.
  static Result<std::unique_ptr<TopicStore>> Open(const std::string& data_dir, TopicConfig defaults,
                                                  storage::Env* env = storage::Env::Posix());

  // Creates a topic with a new random id, durably before returning. Errors:
  // TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION (bad name, or a name that collides with
  // an existing one once '.' and '_' are treated alike, as Kafka does),
  // INVALID_PARTITIONS, INVALID_CONFIG, KAFKA_STORAGE_ERROR.
  TopicError Create(const std::string& name, int32_t partitions,
                    const std::map<std::string, std::string>& overrides, bool validate_only,
                    TopicInfo* created);
  TopicError Delete(const std::string& name);
  // Grows the partition count to `total` (INVALID_PARTITIONS if not larger).
  TopicError AddPartitions(const std::string& name, int32_t total, bool validate_only);
  // Replaces all overrides (AlterConfigs) or changes some (IncrementalAlterConfigs:
  // value nullopt deletes the override).
  TopicError SetConfigs(const std::string& name,
                        const std::map<std::string, std::optional<std::string>>& changes,
                        bool replace_all, bool validate_only);

  const TopicInfo* Find(const std::string& name) const;
  const TopicInfo* FindById(const kafka::Uuid& id) const;
  std::vector<const TopicInfo*> List() const;  // by name
  const TopicConfig& defaults() const { return defaults_; }
  const std::string& path() const { return path_; }

 private:
  TopicStore(const std::string& data_dir, TopicConfig defaults, storage::Env* env);
  Status Load();
  Status Save() const;

  storage::Env* const env_;
  std::string meta_dir_;
  std::string path_;
  TopicConfig defaults_;
  std::map<std::string, TopicInfo> topics_;  // by name
};

// A random (version 4) UUID, never the zero id.
kafka::Uuid RandomUuid();

}  // namespace sluice::broker
