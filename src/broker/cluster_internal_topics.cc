// ClusterController: the internal topics of the coordinators, __consumer_offsets and
// __transaction_state, as ordinary replicated topics in etcd (docs/design/0018-cluster.md,
// decision 11 and "coordmove"). Kafka creates them on the first FindCoordinator with
// offsets.topic.replication.factor replicas; here the controller creates them with
// min(3, registered brokers) replicas when a FindCoordinator (or a Metadata request naming
// them) reaches it, and by itself as soon as three brokers are registered, so a client
// asking a broker that is not the controller finds them soon after.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "base/logging.h"
#include "broker/cluster_controller.h"
#include "broker/coordinator_partitions.h"
#include "broker/group_coordinator.h"
#include "broker/loggers.h"

namespace sluice::broker {
namespace {

// How the internal topics are created (ClusterOptions: Kafka's keys offsets.topic.* and
// transaction.state.log.*).
struct InternalTopicSpec {
  int32_t partitions;
  int32_t replication_factor;  // at most; fewer when fewer brokers are registered
  int32_t min_isr;             // 0: the topic default (1)
};

InternalTopicSpec SpecOf(const ClusterOptions& o, const std::string& name) {
  if (name == kOffsetsTopic) {
    // Kafka leaves __consumer_offsets at the broker's min.insync.replicas; sluice has kept
    // 2 with three or more replicas (an acknowledged commit is on two brokers).
    return {o.offsets_topic_num_partitions, o.offsets_topic_replication_factor, 2};
  }
  return {o.txn_state_log_num_partitions, o.txn_state_log_replication_factor,
          o.txn_state_log_min_isr};
}

// The internal topics' configs: compacted, segments as a single node's logs, and
// min.insync.replicas: __transaction_state's is transaction.state.log.min.isr capped at
// the replicas it gets; __consumer_offsets' is 2 from three replicas on.
std::map<std::string, std::string> InternalTopicConfigs(const std::string& name, int32_t rf,
                                                        int32_t min_isr) {
  std::map<std::string, std::string> c;
  c["cleanup.policy"] = "compact";
  const int32_t isr = name == kOffsetsTopic ? (rf >= 3 ? min_isr : 1) : std::min(min_isr, rf);
  if (isr > 1) c["min.insync.replicas"] = std::to_string(isr);
  c["segment.bytes"] = name == kOffsetsTopic ? "8388608" : "4194304";
  return c;
}

}  // namespace

bool ClusterController::CreateInternalTopic(const std::string& name) {
  if (!IsReservedTopic(name) || !fence_.has_value()) return false;
  if (view_.topics().count(name) != 0 || view_.deleting().count(name) != 0) return false;
  const InternalTopicSpec spec = SpecOf(options_.cluster, name);
  const int32_t brokers = static_cast<int32_t>(RegisteredBrokers().size());
  const int32_t rf = std::max(1, std::min(spec.replication_factor, brokers));
  TopicInfo info;
  TopicError e = CreateReplicatedTopic(name, spec.partitions, rf,
                                       InternalTopicConfigs(name, rf, spec.min_isr), false, &info);
  if (!e.ok()) {
    SLUICE_LOG(kClusterLog, kWarn, "creating the internal topic {}: {}", name, e.message);
    return false;
  }
  SLUICE_LOG(kClusterLog, kInfo,
             "created the internal topic {}: {} partitions, replication factor {}", name,
             spec.partitions, rf);
  return true;
}

void ClusterController::MaybeCreateInternalTopics() {
  if (!fence_.has_value() || lease_lost_) return;
  const auto registered = static_cast<int32_t>(view_.brokers().size());
  for (const char* name : {kOffsetsTopic, kTxnStateTopic}) {
    const InternalTopicSpec spec = SpecOf(options_.cluster, name);
    auto topic = view_.topics().find(name);
    if (topic != view_.topics().end()) {
      // The topic's count is what the coordinators hash with (Kafka's too: its
      // partitionFor reads the topic); a key changed since its creation changes nothing.
      // Said once per process and count.
      static std::map<std::string, int32_t> warned;  // the controller's thread only
      const auto count = static_cast<int32_t>(topic->second.value.partitions.size());
      if (count != spec.partitions && warned[name] != spec.partitions) {
        warned[name] = spec.partitions;
        SLUICE_LOG(kClusterLog, kWarn,
                   "{} has {} partitions, not the {} configured: the coordinators keep using {} "
                   "(a topic's partition count decides which partition a key belongs to)",
                   name, count, spec.partitions, count);
      }
      continue;
    }
    if (registered < spec.replication_factor || view_.deleting().count(name) != 0) continue;
    (void)CreateInternalTopic(name);
  }
}

}  // namespace sluice::broker
