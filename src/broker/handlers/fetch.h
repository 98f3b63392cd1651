// FetchWait: a fetch waiting for data (a long poll), and how an owner shard wakes the
// fetches waiting on one of its partitions. The Fetch handler is in handlers.h.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "broker/connection.h"
#include "broker/event_loop.h"
#include "broker/handlers/context.h"
#include "broker/partition.h"
#include "broker/shards.h"
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

// What a look at a fetch's partitions found: the response (records as splices of `files`,
// by index) and the bytes of slices holding records (what min_bytes waits for).
using FetchDone =
    std::function<void(kafka::FetchResponse&, std::vector<storage::FileSlice>&, uint64_t)>;

// Reads every partition of `req` on its owner with Kafka's rules (the principal's READ on
// each topic, leader epochs, read_committed up to the last stable offset with the aborted
// transactions, record-less batches passed over), registering `wait` there first when set,
// then calls `done` on `home`'s loop. On `home`'s thread. The Fetch handler's look, and the
// in-process consumer's (broker/in_process_kafka.h).
void FetchOnce(Context& ctx, Shard& home, const Access& access,
               std::shared_ptr<const kafka::FetchRequest> req, int16_t version,
               const std::shared_ptr<FetchWait>& wait, FetchDone done);

// On `part`'s owner thread: the fetches waiting on it (those `which` names) look again
// (on their connections' loops), and are taken off the partition's list.
void WakeFetches(Context& ctx, Partition& part, Wake which = Wake::kAll);

}  // namespace sluice::broker::handlers
