// FetchWait: a fetch waiting for data (a long poll), and how an owner shard wakes the
// fetches waiting on one of its partitions. The Fetch handler is in handlers.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "broker/connection.h"
#include "broker/event_loop.h"
#include "broker/handlers/context.h"
#include "broker/partition.h"
#include "kafka/protocol/requests.h"

namespace sluice::broker {

// A fetch waiting for data: answered once, by the first of an append or its timer. Made
// and answered on its connection's loop; registered (weakly) on its partitions' owners.
struct FetchWait {
  std::shared_ptr<Connection> conn;
  kafka::RequestHeader header;
  std::shared_ptr<const kafka::FetchRequest> req;
  uint64_t min_bytes = 1;
  bool replica = false;          // a follower's fetch (replica id >= 0)
  EventLoop::TimerId timer = 0;  // max_wait_ms; cancelled once answered
  // A re-arm is posted and has not run yet: appends meanwhile post no other.
  std::atomic<bool> arm_pending{false};
  std::atomic<bool> done{false};
};

}  // namespace sluice::broker

namespace sluice::broker::handlers {

// Which waiting fetches a wake-up is for.
enum class Wake {
  kAll,
  // A replicated leader's high watermark moved, nothing was appended: consumers may read
  // further, a follower's fetch has nothing new (Kafka's DelayedFetch for a follower
  // waits for bytes past its fetch offset, not for the high watermark), so it stays.
  kConsumers,
};

// On `part`'s owner thread: the fetches waiting on it (those `which` names) look again
// (on their connections' loops), and are taken off the partition's list.
void WakeFetches(Context& ctx, Partition& part, Wake which = Wake::kAll);

}  // namespace sluice::broker::handlers
