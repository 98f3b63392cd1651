// The uploader of tiered topics (docs/design/0025-tiered-storage.md, decisions 3-4): a
// thread that uploads each registered partition's closed, synced segments to the
// RemoteStore in offset order, each as its files (.log, .index, .timeindex, .txnindex),
// the producers' state at its end (.producers, decision 8), the leader-epoch checkpoint up
// to its end (.epochs) and then its manifest, the record that the segment is remote (its
// offsets, size, max timestamp, its own leader epochs and files):
//
//   <topic>-<topic id>/<partition>/<base, 20 digits>-<token>.log|.index|...|.epochs
//   <topic>-<topic id>/<partition>/<base, 20 digits>-<next offset, 20 digits>.manifest.json
//
// A partition registered again (a restart, a new leader) lists its manifests and goes on
// after the highest next offset, so a crash or an outage mid-upload only leaves objects no
// manifest names: a retry by the same process overwrites them (same token), and after a
// restart those at or past the last manifest's next offset are deleted. The remote segments
// are the log's oldest part: retention.ms and retention.bytes (the whole log's) delete them,
// oldest first and manifest first, once they are also gone locally (local.retention.*, whose
// deletions wait for the upload: LocalLogs::RunRetention), as do DeleteRecords past them.
// Each change is published to the RemoteSegments index that remote reads use.
// Failures back off (1 s doubling to 30 s) and are counted. A cluster's replicated partition is
// registered on each of its replicas with a Bound: the leader uploads below its high
// watermark and applies the remote retention, a new leader lists the manifests and goes on
// after the highest (a segment of its own that straddles it is uploaded whole: remote
// segments may overlap, and hold the same records where they do), and a follower only lists
// the manifests now and then so that its local retention waits for the uploads.
//
//   TierUploader up({.store = &store});
//   up.Add({"events", 0}, topic_id, log);   // on the controller thread
//   up.Start();  ...  up.Stop();
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "broker/producer_state.h"
#include "broker/remote_segments.h"
#include "broker/remote_store.h"
#include "kafka/protocol/wire.h"
#include "storage/log.h"

namespace sluice::broker {

struct TierUploaderOptions {
  const RemoteStore* store = nullptr;    // required; outlives the uploader
  int64_t interval_ms = 1000;            // how often every partition is looked at
  RemoteSegments* index = nullptr;       // where the remote segments are published; optional
  int64_t follower_listing_ms = 10'000;  // how often a follower lists the manifests
};

class TierUploader {
 public:
  using Key = std::pair<std::string, int32_t>;  // topic, partition

  explicit TierUploader(TierUploaderOptions options);
  ~TierUploader();
  TierUploader(const TierUploader&) = delete;
  TierUploader& operator=(const TierUploader&) = delete;

  // For readers on other threads (optional; kept valid until Remove): the offset after the
  // last uploaded segment, and the first offset remote storage serves (-1: none).
  // `start` is kStartUnknown from registration until the manifests are listed.
  static constexpr int64_t kStartUnknown = -2;
  struct Published {
    std::atomic<int64_t>* next = nullptr;
    std::atomic<int64_t>* start = nullptr;
    bool operator==(const Published&) const = default;
  };
  // The whole log's retention (retention.bytes, retention.ms: -1 keeps all), applied to the
  // remote segments.
  struct Retention {
    int64_t bytes = -1;
    int64_t ms = -1;
  };
  // A replicated partition's: the offset below which this broker uploads (its high
  // watermark while it leads; -1 while it does not) and the leader epoch it leads in (a
  // new one lists the manifests again). Called on the uploader's thread.
  struct Leadership {
    int64_t bound = -1;
    int32_t epoch = -1;
  };
  using Bound = std::function<Leadership()>;
  // Registers a partition's log (kept open by the caller until Remove); `bound` null: a
  // single broker's, every closed segment is uploaded. Again with the same log: only the
  // retention and the bound change.
  void Add(const Key& key, const kafka::Uuid& topic_id, storage::PartitionLog* log,
           Published published, Retention retention, Bound bound = nullptr);
  // Unregisters it, waiting for an upload of it in progress to end.
  void Remove(const Key& key);
  void Start();
  void Stop();
  // A deleted topic's partition: its remote objects are deleted by the uploader's thread
  // (manifests first), retried until they are gone or the process stops (a restart leaves
  // what remains: not collected yet).
  void DeleteRemote(const std::string& topic, const kafka::Uuid& topic_id, int32_t partition);

  struct Stats {
    int64_t uploaded_next = -1;  // the offset after the last uploaded segment; -1: none
    uint64_t remote_bytes = 0;   // the uploaded segments' .log bytes
    uint64_t lag_bytes = 0;      // closed segments not uploaded yet
    int64_t segments = 0;        // uploaded segments
  };
  std::optional<Stats> StatsOf(const Key& key) const;

  // What a broker without the older local log starts a partition from (decision 9): the
  // producers' snapshot and the leader-epoch checkpoint of the remote segment that ends at
  // `next` (NotFound when no manifest ends there; a file the manifest lacks is empty).
  struct StateAt {
    std::string producers, epochs;
  };
  static Result<StateAt> RemoteStateAt(const RemoteStore& store, const std::string& topic,
                                       const kafka::Uuid& id, int32_t partition, int64_t next);

  // The key prefix of a partition's objects: "<topic>-<topic id>/<partition>/".
  static std::string PartitionPrefix(const std::string& topic, const kafka::Uuid& id,
                                     int32_t partition);
  // The producer-state snapshot the uploader keeps in a tiered partition's directory: the
  // state at the end of the last uploaded segment (design 0025, decision 8), which a
  // restart rebuilds from once the local segments before it are gone.
  static constexpr const char* kProducerSnapshotFile = "producer-snapshot";

 private:
  using Remote = RemoteSegment;
  struct Entry {
    kafka::Uuid topic_id;
    storage::PartitionLog* log = nullptr;
    Published published;
    Retention retention;
    Bound bound;
    bool leading = false;       // the last pass uploaded (this thread's)
    int32_t leader_epoch = -1;  // in this epoch (a replicated partition's)
    std::chrono::steady_clock::time_point next_listing{};  // a follower's
    bool loaded = false;                                   // the manifests were listed
    int64_t published_start = -2;                          // the start last published to the index
    Stats stats;
    std::vector<Remote> remote;  // by base offset (this thread's while busy)
    bool busy = false;           // an upload of it runs (unlocked)
    bool removed = false;        // Remove was called while busy
    int failures = 0;
    int64_t pending_base = -1;  // the segment being uploaded, and its objects' token
    std::string pending_token;
    // The producers' state at `producers_at` (the end of the last uploaded segment; -1:
    // not known), uploaded with each segment (decision 8). This thread's.
    ProducerStateTable producers;
    int64_t producers_at = -1;
    bool producers_complete = false;
    std::chrono::steady_clock::time_point next_try{};
  };
  void Run();
  // Uploads what is due for one partition (unlocked; `e` is this thread's while busy).
  Status Pass(const Key& key, Entry& e);
  // Lists the manifests (reading only those not known yet); `leading`: also the producer
  // state to go on from, and (a single broker's) what an interrupted upload left.
  Status Load(const Key& key, Entry& e, bool leading);
  Result<Remote> UploadSegment(const Key& key, Entry& e, const std::string& prefix, int64_t base,
                               int64_t next, uint64_t size, int64_t max_timestamp);
  // The producers' state at `next`: `e.producers` with the segment's batches replayed.
  Result<ProducerStateTable> ReplaySegment(Entry& e, int64_t base, uint64_t size) const;
  // Deletes every object under `prefix`, manifests first.
  Status DeletePrefix(const std::string& prefix);
  // Deletes the remote segments the whole log's retention or DeleteRecords let go: the
  // manifest first, then the files.
  Status ApplyRetention(const Key& key, Entry& e);
  // The atomics, and the remote segments to the index when `changed` or the start moved
  // (mu_ held).
  void PublishLocked(const Key& key, Entry& e, bool changed = true) const;
  void Publish(const Key& key, const Stats& s) const;

  const TierUploaderOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Entry> entries_;     // guarded by mu_
  std::vector<std::string> doomed_;  // guarded by mu_: prefixes of deleted partitions
  bool stopping_ = false;            // guarded by mu_
  std::thread thread_;
};

}  // namespace sluice::broker
