// Controlled shutdown in a cluster (docs/design/0018-cluster.md, decision 9 and "shutdown
// (session 13)"): a broker stopped with SIGTERM writes shutdown/<node> under its lease; the
// controller, which watches every key, moves the leaderships that broker holds to other
// in-sync replicas and takes it out of every ISR (Kafka's ZooKeeper-era ControlledShutdown),
// and no leader adds it back. The key's value and the controller's decision, no etcd here.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cluster/cluster_values.h"
#include "cluster/controller_decisions.h"

namespace sluice::broker {

// The value of shutdown/<node>: the broker epoch (its registration's create_revision) of
// the registration that asked. A request of an older registration is not honoured.
struct ShutdownRequest {
  int64_t broker_epoch = 0;
  bool operator==(const ShutdownRequest&) const = default;
};

std::string ShutdownKey(const cluster::KeyLayout& keys, int32_t node);
// The node a shutdown/<node> key names; nullopt for any other key or a malformed node.
std::optional<int32_t> NodeOfShutdownKey(const cluster::KeyLayout& keys, std::string_view key);
std::string ToJson(const ShutdownRequest& v);
// Refuses what is not one JSON object of at most 4 KiB with a non-negative integer
// `broker_epoch`; other fields are ignored.
Result<ShutdownRequest> ParseShutdownRequest(std::string_view json);

// A partition's state with the `leaving` brokers (live, shutting down) moved out of it:
// a leaving leader is replaced by the first replica in assignment order that is an
// electable ISR member and not leaving (and leaves the ISR); with none it stays leader
// (Kafka's ControlledShutdownLeaderSelector: the partition goes offline only when the
// broker is gone). Leaving followers leave the ISR (the last member stays). Every change
// bumps the leader epoch, as the ZooKeeper-era controller did for its ISR changes: the
// leader starts the new epoch with no progress of the removed follower, so it never waits
// for it again. controller_epoch becomes the caller's. nullopt when nothing changes.
std::optional<cluster::PartitionState> MoveAway(const std::vector<int32_t>& replicas,
                                                const cluster::PartitionState& state,
                                                const cluster::LiveBrokers& live,
                                                const std::set<int32_t>& leaving,
                                                int64_t controller_epoch);

}  // namespace sluice::broker
