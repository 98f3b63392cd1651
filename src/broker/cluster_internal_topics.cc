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

namespace sluice::broker {
namespace {

const Logger kLog("cluster");

// The internal topics' configs: compacted, min.insync.replicas 2 with three replicas
// (so an acknowledged commit is on two brokers), segments as a single node's logs.
std::map<std::string, std::string> InternalTopicConfigs(const std::string& name, int32_t rf) {
  std::map<std::string, std::string> c;
  c["cleanup.policy"] = "compact";
  if (rf >= 3) c["min.insync.replicas"] = "2";
  c["segment.bytes"] = name == "__consumer_offsets" ? "8388608" : "4194304";
  return c;
}

int32_t InternalTopicPartitions(const std::string& name) {
  return name == "__consumer_offsets" ? kOffsetsTopicPartitions : kTxnStateTopicPartitions;
}

}  // namespace

bool ClusterController::CreateInternalTopic(const std::string& name) {
  if (!IsReservedTopic(name) || !fence_.has_value()) return false;
  if (view_.topics().count(name) != 0 || view_.deleting().count(name) != 0) return false;
  const int32_t brokers = static_cast<int32_t>(RegisteredBrokers().size());
  const int32_t rf = std::max(1, std::min(kInternalTopicReplicationFactor, brokers));
  TopicInfo info;
  TopicError e = CreateReplicatedTopic(name, InternalTopicPartitions(name), rf,
                                       InternalTopicConfigs(name, rf), false, &info);
  if (!e.ok()) {
    SLUICE_LOG(kLog, kWarn, "creating the internal topic {}: {}", name, e.message);
    return false;
  }
  return true;
}

void ClusterController::MaybeCreateInternalTopics() {
  if (!fence_.has_value() || lease_lost_) return;
  if (static_cast<int32_t>(view_.brokers().size()) < kInternalTopicReplicationFactor) return;
  for (const char* name : {"__consumer_offsets", "__transaction_state"}) {
    if (view_.topics().count(name) == 0 && view_.deleting().count(name) == 0) {
      (void)CreateInternalTopic(name);
    }
  }
}

}  // namespace sluice::broker
