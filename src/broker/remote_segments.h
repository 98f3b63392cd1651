// What tiered storage holds of each partition (docs/design/0025-tiered-storage.md): the
// uploader publishes a partition's remote segments here after every change (a listing at
// registration, an upload, a deletion) and the readers of remote offsets (Fetch,
// ListOffsets) look them up. Each published list is immutable; a reader keeps the one it
// got. Thread-safe.
//
//   index.Publish(id, 0, std::make_shared<const RemoteSegmentList>(segments));
//   if (auto list = index.Get(id, 0)) { const RemoteSegment* s = list->Covering(offset); }
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "broker/leader_epochs.h"
#include "kafka/protocol/wire.h"

namespace sluice::broker {

// One uploaded segment, as its manifest says. Keys are the store's (RemoteStore).
struct RemoteSegment {
  int64_t base = 0, next = 0;  // its offsets: [base, next)
  uint64_t size = 0;           // .log bytes
  int64_t max_timestamp = -1;
  // The leader epochs of its offsets, the first starting at `base` (empty: a manifest
  // written before they were recorded).
  std::vector<LeaderEpochCache::Entry> epochs;
  std::string manifest;
  std::string log, index, time_index, txn_index;  // empty when not uploaded (txn_index)
  std::vector<std::string> files;                 // every file's key
};

struct RemoteSegmentList {
  std::vector<RemoteSegment> segments;  // by base offset, not overlapping
  int64_t start = -1;                   // the first readable offset; -1: no segment

  // The segment holding `offset`, or the first after it when `offset` falls in a gap;
  // null when `offset` is below start or past the last segment.
  const RemoteSegment* Covering(int64_t offset) const {
    if (start < 0 || offset < start) return nullptr;
    auto it = std::upper_bound(segments.begin(), segments.end(), offset,
                               [](int64_t o, const RemoteSegment& s) { return o < s.next; });
    return it == segments.end() ? nullptr : &*it;
  }
  // The segment after `seg` (one of this list's), or null.
  const RemoteSegment* After(const RemoteSegment* seg) const {
    const size_t i = static_cast<size_t>(seg - segments.data()) + 1;
    return i < segments.size() ? &segments[i] : nullptr;
  }
};

class RemoteSegments {
 public:
  using Key = std::pair<std::pair<uint64_t, uint64_t>, int32_t>;  // topic id, partition

  void Publish(const kafka::Uuid& topic_id, int32_t partition,
               std::shared_ptr<const RemoteSegmentList> list) {
    std::lock_guard<std::mutex> lock(mu_);
    lists_[KeyOf(topic_id, partition)] = std::move(list);
  }
  void Erase(const kafka::Uuid& topic_id, int32_t partition) {
    std::lock_guard<std::mutex> lock(mu_);
    lists_.erase(KeyOf(topic_id, partition));
  }
  // Null when nothing is published for the partition.
  std::shared_ptr<const RemoteSegmentList> Get(const kafka::Uuid& topic_id,
                                               int32_t partition) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = lists_.find(KeyOf(topic_id, partition));
    return it == lists_.end() ? nullptr : it->second;
  }

 private:
  static Key KeyOf(const kafka::Uuid& id, int32_t partition) { return {{id.hi, id.lo}, partition}; }
  mutable std::mutex mu_;
  std::map<Key, std::shared_ptr<const RemoteSegmentList>> lists_;
};

}  // namespace sluice::broker
