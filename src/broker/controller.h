// Controller: what the request handlers may ask of the cluster metadata — topics,
// partitions and their configs, the logs of the partitions, producer ids — and the
// thread all of it runs on. The single-node implementation is MetadataController
// (a TopicStore in <data-dir>/meta and the local partition logs); a cluster keeps its
// metadata elsewhere (etcd) and implements the same interface.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "base/status.h"
#include "broker/topic_store.h"
#include "kafka/protocol/wire.h"
#include "storage/log.h"

namespace sluice::compaction {
class LogCleaner;
}  // namespace sluice::compaction

namespace sluice::broker {

// Internal topic names: their directories belong to the broker (the offsets log lives in
// __consumer_offsets-0), so no user topic may take them.
inline bool IsReservedTopic(const std::string& name) {
  return name == "__consumer_offsets" || name == "__transaction_state";
}

// Every method but Post and RunAndWait runs on the controller's thread: handlers reach it
// with Post (or the ToController helper of handlers/context.h). A change becomes visible
// to the shards only with Publish().
class Controller {
 public:
  virtual ~Controller() = default;

  // Lifecycle (the Broker's, on its controlling thread): opens the logs this broker serves
  // (`unclean_start`: the last run did not stop cleanly), starts the controller's thread,
  // stops it, closes every log once the server stopped; FlushLogs from any thread but the
  // controller's; open_log_count from any.
  virtual Status OpenLogs(bool unclean_start) = 0;
  virtual Status Start() = 0;
  virtual void Stop() = 0;
  virtual Status CloseLogs() = 0;
  virtual void FlushLogs() = 0;
  virtual size_t open_log_count() const = 0;
  // The process's log cleaner (compacted topics and the coordinators' internal logs, which
  // register themselves). Add/Remove from any thread; it lives as long as the controller.
  virtual compaction::LogCleaner* cleaner() const = 0;

  // Runs `task` on the controller's thread (any thread).
  virtual void Post(std::function<void()> task) = 0;
  // Runs `fn` on the controller's thread and waits for it (any thread but that one).
  virtual void RunAndWait(const std::function<void()>& fn) = 0;

  // Topics as the controller knows them now (not yet published, perhaps).
  virtual const TopicInfo* FindTopic(const std::string& name) const = 0;
  virtual const TopicInfo* FindTopicById(const kafka::Uuid& id) const = 0;
  // Creates a topic and opens its partitions (nothing is opened under validate_only).
  // Fills `info` (its id zero under validate_only). A log that fails to open undoes the
  // topic: KAFKA_STORAGE_ERROR.
  virtual TopicError CreateTopic(const std::string& name, int32_t partitions,
                                 const std::map<std::string, std::string>& overrides,
                                 bool validate_only, TopicInfo* info) = 0;
  // CreateTopic with `replication_factor` replicas per partition (-1: the default, 1). A
  // single node has one broker: anything above 1 is INVALID_REPLICATION_FACTOR.
  virtual TopicError CreateReplicatedTopic(const std::string& name, int32_t partitions,
                                           int32_t replication_factor,
                                           const std::map<std::string, std::string>& overrides,
                                           bool validate_only, TopicInfo* info) {
    if (replication_factor != -1 && replication_factor != 1) {
      return {kafka::ErrorCode::kInvalidReplicationFactor,
              "replication factor " + std::to_string(replication_factor) +
                  " is larger than the 1 available broker"};
    }
    return CreateTopic(name, partitions, overrides, validate_only, info);
  }
  // Creates `name` with the default partition count when auto.create.topics.enable is
  // on and the name is a valid user topic's; false otherwise.
  virtual bool AutoCreateTopic(const std::string& name) = 0;
  // Closes the topic's logs, forgets it and removes its directories.
  virtual TopicError DeleteTopic(const std::string& name) = 0;
  // Grows a topic to `count` partitions and opens the new ones.
  virtual TopicError AddPartitions(const std::string& name, int32_t count, bool validate_only) = 0;
  // Changes a topic's config overrides (nullopt removes one) and applies them to its
  // open logs.
  virtual TopicError SetTopicConfigs(
      const std::string& name, const std::map<std::string, std::optional<std::string>>& changes,
      bool replace_all, bool validate_only) = 0;
  // The open log of a partition (thread-safe itself), or null.
  virtual storage::PartitionLog* LogOf(const std::string& topic, int32_t partition) = 0;
  // A producer id never handed out before, across restarts too.
  virtual Result<int64_t> AllocateProducerId() = 0;
  // Publishes the topics to every shard (a new MetadataSnapshot).
  virtual void Publish() = 0;

  // Whether the metadata this broker publishes holds `name` (with id `id`, unless zero)
  // with at least `partitions` partitions, each with a leader: what a client that asks
  // this broker next finds. A single node's topics are led once created.
  virtual bool TopicLed(const std::string& name, const kafka::Uuid& id, int32_t partitions) const {
    const TopicInfo* info = FindTopic(name);
    return info != nullptr && (id == kafka::Uuid{} || info->id == id) &&
           info->partitions >= partitions;
  }
  // Calls `done(true)` once `ready()` holds — now, or after a later change of the published
  // metadata — or `done(false)` once `timeout_ms` passed without it (Kafka's
  // DelayedCreatePartitions / DelayedDeleteTopics): an answer parked without blocking the
  // controller's thread. `ready` and `done` run on the controller's thread. A single node's
  // metadata is whole when its call returns: `done(ready())` at once.
  virtual void AwaitMetadata(std::function<bool()> ready, int64_t timeout_ms,
                             std::function<void(bool)> done) {
    (void)timeout_ms;
    done(ready());
  }
  // Calls `done` on the controller's thread once the metadata this broker publishes holds
  // every change made to it before the call (a cluster's: every key etcd held then is in
  // its view; a key deleted meanwhile is not waited for), or once `timeout_ms` passed. For
  // a request naming a topic this broker does not know yet, while another broker that
  // knows it already sent the client here. Any thread. A single node's metadata is always
  // whole: `done()` at once.
  virtual void CatchUp(int64_t timeout_ms, std::function<void()> done) {
    (void)timeout_ms;
    done();
  }
};

}  // namespace sluice::broker
