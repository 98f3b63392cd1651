// The uploader of tiered topics. See tier_uploader.h.
#include "broker/tier_uploader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "base/logging.h"
#include "base/metrics.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"
#include "storage/env.h"
#include "storage/log_swap.h"
#include "storage/segment.h"
#include "storage/segment_file.h"
#include "storage/txn_index.h"

namespace sluice::broker {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kManifestSuffix = ".manifest.json";
constexpr auto kMaxBackoff = std::chrono::seconds(30);

std::string KeyName(const TierUploader::Key& key) {
  return fmt::format("{}-{}", key.first, key.second);
}

// "<base>-<next>.manifest.json" -> (base, next).
std::optional<std::pair<int64_t, int64_t>> ParseManifestName(std::string_view name) {
  if (name.size() != 41 + kManifestSuffix.size() || !name.ends_with(kManifestSuffix) ||
      name[20] != '-')
    return std::nullopt;
  int64_t base = 0, next = 0;
  auto [p1, e1] = std::from_chars(name.data(), name.data() + 20, base);
  auto [p2, e2] = std::from_chars(name.data() + 21, name.data() + 41, next);
  if (e1 != std::errc() || e2 != std::errc() || p1 != name.data() + 20 || p2 != name.data() + 41 ||
      base < 0 || next < base)
    return std::nullopt;
  return std::make_pair(base, next);
}

std::string Token() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  return fmt::format("{:016x}", rng());
}

// Files a manifest names, by their extension.
void AddFile(RemoteSegment& r, const std::string& key) {
  if (key.ends_with(".log")) r.log = key;
  if (key.ends_with(".index")) r.index = key;
  if (key.ends_with(".timeindex")) r.time_index = key;
  if (key.ends_with(".txnindex")) r.txn_index = key;
  r.files.push_back(key);
}

// The manifest's "epochs" ([[epoch, start offset], ...], increasing, the first at `base`);
// empty when missing or not so (a manifest from before they were recorded).
std::vector<LeaderEpochCache::Entry> ManifestEpochs(const Json& m, int64_t base, int64_t next) {
  std::vector<LeaderEpochCache::Entry> out;
  if (!m.contains("epochs") || !m["epochs"].is_array()) return out;
  for (const Json& x : m["epochs"]) {
    if (!x.is_array() || x.size() != 2 || !x[0].is_number_integer() || !x[1].is_number_integer())
      return {};
    const int64_t epoch = x[0].get<int64_t>(), start = x[1].get<int64_t>();
    if (epoch < 0 || epoch > INT32_MAX || start < base || start >= next ||
        (out.empty() ? start != base
                     : epoch <= out.back().epoch || start <= out.back().start_offset))
      return {};
    out.push_back({static_cast<int32_t>(epoch), start});
  }
  return out;
}

int64_t UploaderNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string TierUploader::PartitionPrefix(const std::string& topic, const kafka::Uuid& id,
                                          int32_t partition) {
  return fmt::format("{}-{}/{}/", topic, id.ToString(), partition);
}

Result<TierUploader::StateAt> TierUploader::RemoteStateAt(const RemoteStore& store,
                                                          const std::string& topic,
                                                          const kafka::Uuid& id, int32_t partition,
                                                          int64_t next) {
  const std::string prefix = PartitionPrefix(topic, id, partition);
  ASSIGN_OR_RETURN(std::vector<std::string> keys, store.List(prefix));
  std::string manifest;
  int64_t base = -1;
  for (const std::string& k : keys) {
    auto range = ParseManifestName(std::string_view(k).substr(std::min(k.size(), prefix.size())));
    if (range && range->second == next && range->first > base) {
      base = range->first;
      manifest = k;
    }
  }
  if (manifest.empty()) {
    return NotFoundError("no remote segment of {} ends at offset {}", prefix, next);
  }
  ASSIGN_OR_RETURN(std::string text, store.Get(manifest));
  Json m = Json::parse(text, nullptr, false);
  if (!m.is_object() || !m.contains("files") || !m["files"].is_array()) {
    return CorruptionError("{}/{}: not a segment manifest", store.Describe(), manifest);
  }
  StateAt out;
  for (const Json& f : m["files"]) {
    if (!f.is_string()) continue;
    const std::string name = f.get<std::string>();
    std::string* into = name.ends_with(".producers") ? &out.producers
                        : name.ends_with(".epochs")  ? &out.epochs
                                                     : nullptr;
    if (into == nullptr) continue;
    ASSIGN_OR_RETURN(*into, store.Get(prefix + name));
  }
  return out;
}

TierUploader::TierUploader(TierUploaderOptions options) : options_(std::move(options)) {}

TierUploader::~TierUploader() { Stop(); }

void TierUploader::Add(const Key& key, const kafka::Uuid& topic_id, storage::PartitionLog* log,
                       Published published, Retention retention, Bound bound) {
  std::unique_lock<std::mutex> lock(mu_);
  auto [it, added] = entries_.try_emplace(key);
  if (!added && it->second.log == log && it->second.topic_id == topic_id &&
      it->second.published == published) {
    it->second.retention = retention;
    if (!it->second.busy) it->second.bound = std::move(bound);
    return;
  }
  it->second.removed = true;  // the uploader stops after its current segment
  cv_.wait(lock, [&] { return !entries_[key].busy; });
  it = entries_.find(key);
  if (options_.index != nullptr && !added) options_.index->Erase(it->second.topic_id, key.second);
  it->second = Entry{};
  it->second.topic_id = topic_id;
  it->second.log = log;
  it->second.published = published;
  it->second.retention = retention;
  it->second.bound = std::move(bound);
  // Not known until the manifests are listed: readers below the local start wait.
  if (published.start != nullptr) published.start->store(kStartUnknown);
  cv_.notify_all();
}

void TierUploader::Remove(const Key& key) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  it->second.removed = true;
  cv_.wait(lock, [&] {
    auto again = entries_.find(key);
    return again == entries_.end() || !again->second.busy;
  });
  auto gone = entries_.find(key);
  if (gone != entries_.end()) {
    const Published& p = gone->second.published;
    if (p.next != nullptr) p.next->store(-1);
    if (p.start != nullptr) p.start->store(-1);
    if (options_.index != nullptr) options_.index->Erase(gone->second.topic_id, key.second);
    entries_.erase(gone);
  }
}

void TierUploader::DeleteRemote(const std::string& topic, const kafka::Uuid& topic_id,
                                int32_t partition) {
  std::lock_guard<std::mutex> lock(mu_);
  doomed_.push_back(PartitionPrefix(topic, topic_id, partition));
  cv_.notify_all();
}

Status TierUploader::DeletePrefix(const std::string& prefix) {
  ASSIGN_OR_RETURN(std::vector<std::string> keys, options_.store->List(prefix));
  std::stable_partition(keys.begin(), keys.end(),
                        [](const std::string& k) { return k.ends_with(kManifestSuffix); });
  for (const std::string& k : keys) RETURN_IF_ERROR(options_.store->Delete(k));
  SLUICE_LOG(kTieredLog, kInfo, "deleted {} objects of a deleted topic under {}/{}", keys.size(),
             options_.store->Describe(), prefix);
  return Status::OK();
}

void TierUploader::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void TierUploader::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

void TierUploader::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    // Deleted topics' objects first; what fails stays for the next round.
    std::vector<std::string> doomed;
    doomed.swap(doomed_);
    for (const std::string& prefix : doomed) {
      if (stopping_) {
        doomed_.push_back(prefix);
        continue;
      }
      lock.unlock();
      Status st = DeletePrefix(prefix);
      lock.lock();
      if (!st.ok()) {
        SLUICE_LOG(kTieredLog, kWarn, "deleting {}/{}: {}", options_.store->Describe(), prefix,
                   st.message());
        doomed_.push_back(prefix);
      }
    }
    // Every partition due, one at a time, unlocked while it uploads.
    std::vector<Key> keys;
    for (const auto& [key, e] : entries_) keys.push_back(key);
    for (const Key& key : keys) {
      if (stopping_) break;
      auto it = entries_.find(key);
      if (it == entries_.end() || it->second.removed) continue;
      Entry& e = it->second;
      if (std::chrono::steady_clock::now() < e.next_try) continue;
      e.busy = true;
      lock.unlock();
      Status st = Pass(key, e);
      lock.lock();
      e.busy = false;
      if (!st.ok()) {
        e.failures = std::min(e.failures + 1, 16);
        auto backoff = std::min<std::chrono::milliseconds>(
            std::chrono::milliseconds(1000) * (1LL << std::min(e.failures - 1, 5)), kMaxBackoff);
        e.next_try = std::chrono::steady_clock::now() + backoff;
        SLUICE_LOG(kTieredLog, kWarn, "uploading {} to {}: {} (again in {} ms)", KeyName(key),
                   options_.store->Describe(), st.message(), backoff.count());
        MetricsRegistry::Global()
            .GetCounter("sluice_tiered_upload_errors_total", "Failed tiered-storage uploads.",
                        {{"topic", key.first}, {"partition", std::to_string(key.second)}})
            .Inc();
      } else {
        e.failures = 0;
      }
      cv_.notify_all();  // a Remove may wait for it
    }
    cv_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms),
                 [this] { return stopping_ || !doomed_.empty(); });
  }
}

std::optional<TierUploader::Stats> TierUploader::StatsOf(const Key& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || !it->second.loaded) return std::nullopt;
  return it->second.stats;
}

Status TierUploader::Load(const Key& key, Entry& e, bool leading) {
  const std::string prefix = PartitionPrefix(key.first, e.topic_id, key.second);
  ASSIGN_OR_RETURN(std::vector<std::string> keys, options_.store->List(prefix));
  Stats s;
  std::vector<Remote> remote;
  std::map<std::string, const Remote*> known;  // read before: manifests never change
  for (const Remote& r : e.remote) known[r.manifest] = &r;
  for (const std::string& k : keys) {
    std::string_view name = std::string_view(k).substr(std::min(k.size(), prefix.size()));
    std::optional<std::pair<int64_t, int64_t>> range = ParseManifestName(name);
    if (!range) continue;
    if (auto was = known.find(k); was != known.end()) {
      s.uploaded_next = std::max(s.uploaded_next, range->second);
      s.remote_bytes += was->second->size;
      ++s.segments;
      remote.push_back(*was->second);
      continue;
    }
    Result<std::string> text = options_.store->Get(k);
    if (!text.ok() && text.status().code() == StatusCode::kNotFound) continue;  // deleted
    if (!text.ok()) return text.status();
    Json m = Json::parse(*text, nullptr, false);
    // A segment's positions are 32-bit (its .index): a larger size is not one.
    if (!m.is_object() || !m.contains("size") || !m["size"].is_number_unsigned() ||
        m["size"].get<uint64_t>() > UINT32_MAX || !m.contains("files") || !m["files"].is_array()) {
      return CorruptionError("{}/{}: not a segment manifest", options_.store->Describe(), k);
    }
    Remote r;
    r.base = range->first;
    r.next = range->second;
    r.size = m["size"].get<uint64_t>();
    r.manifest = k;
    if (m.contains("max_timestamp") && m["max_timestamp"].is_number_integer())
      r.max_timestamp = m["max_timestamp"].get<int64_t>();
    for (const Json& f : m["files"]) {
      if (f.is_string()) AddFile(r, prefix + f.get<std::string>());
    }
    r.epochs = ManifestEpochs(m, r.base, r.next);
    if (r.log.empty()) {
      return CorruptionError("{}/{}: the manifest names no .log", options_.store->Describe(), k);
    }
    s.uploaded_next = std::max(s.uploaded_next, range->second);
    s.remote_bytes += r.size;
    ++s.segments;
    remote.push_back(std::move(r));
  }
  // By their ends: a new leader's segment may begin below the last one's end (overlaps
  // hold the same records).
  std::sort(remote.begin(), remote.end(), [](const Remote& a, const Remote& b) {
    return a.next != b.next ? a.next < b.next : a.base > b.base;
  });
  // Objects of an upload a crash interrupted: a segment at or past the last manifest's next
  // offset that has no manifest. A single broker is the partition's only writer, so nothing
  // refers to them: deleted (the upload starts again under a new token). In a cluster a
  // deposed leader may still be writing them: left.
  for (const std::string& k : keys) {
    if (!leading || e.bound) break;
    std::string_view name = std::string_view(k).substr(std::min(k.size(), prefix.size()));
    if (name.size() < 21 || name[20] != '-' || ParseManifestName(name)) continue;
    int64_t base = 0;
    auto [p, ec] = std::from_chars(name.data(), name.data() + 20, base);
    if (ec != std::errc() || p != name.data() + 20 || base < s.uploaded_next) continue;
    if (Status st = options_.store->Delete(k); !st.ok()) {
      SLUICE_LOG(kTieredLog, kWarn, "{}: deleting {} (an interrupted upload's): {}", KeyName(key),
                 k, st.message());
    }
  }
  // The producers' state where the uploads go on: the last segment's snapshot.
  e.producers_at = -1;
  if (leading && !remote.empty()) {
    const Remote& last = remote.back();
    for (const std::string& f : last.files) {
      if (!f.ends_with(".producers")) continue;
      Result<std::string> text = options_.store->Get(f);
      Result<ProducerStateTable::SnapshotInfo> info =
          text.ok() ? e.producers.LoadSnapshot(*text)
                    : Result<ProducerStateTable::SnapshotInfo>(text.status());
      if (info.ok() && info->offset == last.next) {
        e.producers_at = info->offset;
        e.producers_complete = info->complete;
      } else {
        SLUICE_LOG(kTieredLog, kWarn,
                   "{}: the producer snapshot {}: {}; the next is built from its segment",
                   KeyName(key), f, info.ok() ? "at another offset" : info.status().message());
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  e.stats = s;
  e.remote = std::move(remote);
  e.loaded = true;
  PublishLocked(key, e);
  return Status::OK();
}

Result<ProducerStateTable> TierUploader::ReplaySegment(Entry& e, int64_t base,
                                                       uint64_t size) const {
  ProducerStateTable state = e.producers;
  const std::string path = e.log->dir() + "/" + storage::log_internal::SegmentName(base, ".log");
  ASSIGN_OR_RETURN(std::unique_ptr<storage::File> file,
                   storage::Env::Posix()->Open(path, storage::OpenMode::kRead));
  storage::SegmentFile seg;
  seg.log = std::shared_ptr<storage::File>(std::move(file));
  seg.size = size;
  seg.base_offset = base;
  std::vector<storage::AbortedTxn> aborted;  // the log's own index has them
  std::vector<uint8_t> raw;
  Status read_error;
  RETURN_IF_ERROR(
      storage::ForEachSegmentFileBatch(seg, base, [&](const storage::BatchHeader& h, uint64_t pos) {
        raw.resize(
            std::min<uint64_t>(storage::kBatchHeaderSize + storage::kControlPeekBytes, size - pos));
        Result<size_t> n = seg.log->ReadAt(pos, raw);
        if (!n.ok()) {
          read_error = n.status();
          return false;
        }
        raw.resize(*n);
        state.Replay(h, raw, &aborted);
        return true;
      }));
  RETURN_IF_ERROR(read_error);
  return state;
}

Result<TierUploader::Remote> TierUploader::UploadSegment(const Key& key, Entry& e,
                                                         const std::string& prefix, int64_t base,
                                                         int64_t next, uint64_t size,
                                                         int64_t max_timestamp) {
  // A retry of the same segment reuses its token, so it overwrites what a failed attempt
  // left instead of leaving it beside.
  std::string token;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (e.pending_base != base) {
      e.pending_base = base;
      e.pending_token = Token();
    }
    token = e.pending_token;
  }
  const std::string dir = e.log->dir();
  Json files = Json::array();
  Remote r;
  r.base = base;
  r.next = next;
  r.size = size;
  r.max_timestamp = max_timestamp;
  for (const char* ext : {".log", ".index", ".timeindex", ".txnindex"}) {
    const std::string path = dir + "/" + storage::log_internal::SegmentName(base, ext);
    std::error_code ec;
    if (std::string_view(ext) != ".log" && !std::filesystem::exists(path, ec)) continue;
    const std::string object = fmt::format("{}{:020d}-{}{}", prefix, base, token, ext);
    RETURN_IF_ERROR(options_.store->Upload(path, object).WithContext(path));
    files.push_back(object.substr(prefix.size()));
    AddFile(r, object);
  }
  // The producers' state at its end (decision 8): from the last segment's, or, not known,
  // from nothing at this segment (complete when no local segment is before it).
  if (e.producers_at != base) {
    e.producers = ProducerStateTable();
    e.producers_at = base;
    e.producers_complete = base <= e.log->start_offset();
  }
  ASSIGN_OR_RETURN(ProducerStateTable state, ReplaySegment(e, base, size));
  const std::string snapshot = state.Snapshot(next, e.producers_complete);
  const std::string producers_object = fmt::format("{}{:020d}-{}.producers", prefix, base, token);
  RETURN_IF_ERROR(options_.store->Put(producers_object, snapshot));
  files.push_back(producers_object.substr(prefix.size()));
  AddFile(r, producers_object);
  if (e.producers_complete) {
    // Before the upload is recorded, so local retention never deletes past it.
    RETURN_IF_ERROR(WriteFileDurably(storage::Env::Posix(), dir, kProducerSnapshotFile, snapshot));
  }
  // The leader epochs (decision 4): the partition's checkpoint up to the segment's end as
  // `.epochs` (what a broker without the local log starts its epochs from), the segment's
  // own in the manifest.
  Result<std::vector<LeaderEpochCache::Entry>> chain =
      LeaderEpochCache::ReadCheckpoint(storage::Env::Posix(), dir);
  if (!chain.ok()) return chain.status().WithContext(dir + "/" + kLeaderEpochFile);
  std::erase_if(*chain, [&](const LeaderEpochCache::Entry& x) { return x.start_offset >= next; });
  const std::string epochs_object = fmt::format("{}{:020d}-{}.epochs", prefix, base, token);
  RETURN_IF_ERROR(options_.store->Put(epochs_object, LeaderEpochCache::Format(*chain)));
  files.push_back(epochs_object.substr(prefix.size()));
  AddFile(r, epochs_object);
  r.epochs = LeaderEpochCache::Within(*chain, base, next);
  Json epochs = Json::array();
  for (const LeaderEpochCache::Entry& x : r.epochs) epochs.push_back({x.epoch, x.start_offset});
  Json manifest = {{"base_offset", base},
                   {"next_offset", next},
                   {"size", size},
                   {"max_timestamp", max_timestamp},
                   {"leader_epoch", r.epochs.empty() ? -1 : r.epochs.back().epoch},
                   {"epochs", epochs},
                   {"token", token},
                   {"files", files},
                   {"uploaded_ms", UploaderNowMs()},
                   {"topic", key.first},
                   {"partition", key.second}};
  r.manifest = fmt::format("{}{:020d}-{:020d}{}", prefix, base, next, kManifestSuffix);
  RETURN_IF_ERROR(options_.store->Put(r.manifest, manifest.dump()));
  e.producers = std::move(state);
  e.producers_at = next;
  return r;
}

Status TierUploader::ApplyRetention(const Key& key, Entry& e) {
  // Only what is gone locally too (local retention is never longer than the whole log's),
  // so a segment is never remote-only while also local and deleted remotely; what
  // DeleteRecords put below the log start goes whatever the retention.
  const int64_t local_start = e.log->start_offset();
  const int64_t records_start = e.log->records_start_offset();
  const uint64_t local_bytes = e.log->size_bytes();
  const int64_t now = UploaderNowMs();
  while (true) {
    Remote r;
    std::string why;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (e.remote.empty() || e.removed || stopping_) break;
      r = e.remote.front();
      uint64_t whole = local_bytes;  // the remote segments below the local start, and the local log
      for (const Remote& o : e.remote) {
        if (o.next <= local_start) whole += o.size;
      }
      if (r.next <= records_start) {
        why = fmt::format("below the log start {}", records_start);
      } else if (r.next > local_start) {
        break;
      } else if (e.retention.bytes >= 0 &&
                 whole - r.size >= static_cast<uint64_t>(e.retention.bytes)) {
        why = fmt::format("retention.bytes {}", e.retention.bytes);
      } else if (e.retention.ms >= 0 && r.max_timestamp >= 0 &&
                 r.max_timestamp < now - e.retention.ms) {
        why = fmt::format("retention.ms {}", e.retention.ms);
      } else {
        break;
      }
    }
    // The manifest first: a segment without one is not remote, whatever files remain.
    RETURN_IF_ERROR(options_.store->Delete(r.manifest));
    {
      std::lock_guard<std::mutex> lock(mu_);
      e.remote.erase(e.remote.begin());
      e.stats.remote_bytes -= std::min(e.stats.remote_bytes, r.size);
      --e.stats.segments;
      PublishLocked(key, e);
    }
    for (const std::string& f : r.files) {
      if (Status st = options_.store->Delete(f); !st.ok()) {
        SLUICE_LOG(kTieredLog, kWarn, "{}: deleting {} (its manifest is gone): {}", KeyName(key), f,
                   st.message());
      }
    }
    SLUICE_LOG(kTieredLog, kInfo, "{}: remote segment [{}, {}) deleted ({})", KeyName(key), r.base,
               r.next, why);
  }
  return Status::OK();
}

void TierUploader::PublishLocked(const Key& key, Entry& e, bool changed) const {
  int64_t start = -1;
  for (const Remote& r : e.remote) start = start < 0 ? r.base : std::min(start, r.base);
  if (start >= 0) start = std::max(start, e.log->records_start_offset());
  // The list before the atomics: a reader that sees a new upload's end (and the local
  // deletion it allows) finds the segment in the list.
  if ((changed || start != e.published_start) && options_.index != nullptr) {
    auto list = std::make_shared<RemoteSegmentList>();
    list->segments = e.remote;
    list->start = start;
    options_.index->Publish(e.topic_id, key.second, std::move(list));
  }
  e.published_start = start;
  if (e.published.next != nullptr) e.published.next->store(e.stats.uploaded_next);
  if (e.published.start != nullptr) e.published.start->store(start);
}

Status TierUploader::Pass(const Key& key, Entry& e) {
  const Leadership role = e.bound ? e.bound() : Leadership{INT64_MAX, -1};
  const int64_t bound = role.bound;
  if (bound < 0) {
    // Not the leader: what it uploaded, now and then (local retention waits for it).
    e.leading = false;
    const auto now = std::chrono::steady_clock::now();
    if (e.loaded && now < e.next_listing) return Status::OK();
    e.next_listing = now + std::chrono::milliseconds(options_.follower_listing_ms);
    RETURN_IF_ERROR(Load(key, e, false));
    Stats published;
    {
      std::lock_guard<std::mutex> lock(mu_);
      published = e.stats;
    }
    Publish(key, published);
    return Status::OK();
  }
  if (e.bound && (!e.leading || role.epoch != e.leader_epoch)) {
    // A new leader (also this broker again, in a later epoch: another may have led
    // between two passes) goes on after what the last one uploaded.
    std::lock_guard<std::mutex> lock(mu_);
    e.loaded = false;
  }
  e.leading = true;
  e.leader_epoch = role.epoch;
  if (!e.loaded) RETURN_IF_ERROR(Load(key, e, true));
  const std::string prefix = PartitionPrefix(key.first, e.topic_id, key.second);
  std::vector<storage::SegmentSummary> closed = e.log->ClosedSegments();
  Status result;
  for (const storage::SegmentSummary& s : closed) {
    Stats now;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (e.removed || stopping_) break;
      now = e.stats;
    }
    if (s.next_offset <= now.uploaded_next || s.next_offset == s.base_offset) continue;
    if (s.next_offset > bound) break;  // not committed yet (a replicated partition's)
    Result<Remote> up =
        UploadSegment(key, e, prefix, s.base_offset, s.next_offset, s.size, s.max_timestamp);
    if (!up.ok()) {
      // Gone meanwhile (retention): the next pass goes on after it.
      result = up.status();
      break;
    }
    std::lock_guard<std::mutex> lock(mu_);
    e.remote.push_back(std::move(*up));
    e.stats.uploaded_next = s.next_offset;
    e.stats.remote_bytes += s.size;
    ++e.stats.segments;
    PublishLocked(key, e);
    MetricsRegistry::Global()
        .GetCounter("sluice_tiered_uploaded_bytes_total",
                    "Bytes of log segments uploaded to tiered storage.",
                    {{"topic", key.first}, {"partition", std::to_string(key.second)}})
        .Inc(s.size);
  }
  if (Status st = ApplyRetention(key, e); !st.ok() && result.ok()) result = st;
  Stats published;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t lag = 0;
    for (const storage::SegmentSummary& s : closed) {
      if (s.next_offset > e.stats.uploaded_next) lag += s.size;
    }
    e.stats.lag_bytes = lag;
    published = e.stats;
    PublishLocked(key, e, false);
  }
  Publish(key, published);
  return result;
}

void TierUploader::Publish(const Key& key, const Stats& s) const {
  const MetricLabels labels = {{"topic", key.first}, {"partition", std::to_string(key.second)}};
  MetricsRegistry& m = MetricsRegistry::Global();
  m.GetGauge("sluice_tiered_upload_lag_bytes",
             "Bytes of closed segments of a tiered partition not uploaded yet.", labels)
      .Set(static_cast<double>(s.lag_bytes));
  m.GetGauge("sluice_tiered_remote_bytes",
             "Bytes of a tiered partition's segments in tiered storage.", labels)
      .Set(static_cast<double>(s.remote_bytes));
  m.GetGauge("sluice_tiered_remote_next_offset",
             "The offset after a tiered partition's last uploaded segment (-1: none).", labels)
      .Set(static_cast<double>(s.uploaded_next));
}

}  // namespace sluice::broker
