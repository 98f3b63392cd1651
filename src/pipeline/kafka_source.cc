// KafkaSource (kafka_source.h): the consumer's properties, the bounded read-ahead, the
// fetcher wake-up and the deferred revocations.
#include "pipeline/kafka_source.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <climits>
#include <optional>

#include "base/logging.h"
#include "pipeline/loggers.h"

namespace sluice::pipeline {
namespace {

using Clock = std::chrono::steady_clock;
using kafka::client::Message;

// Short of a batch, the longest a NextBatch waits for records, and how long nothing must
// have come before the fetchers are woken.
constexpr auto kStarved = std::chrono::milliseconds(5);
// The most records one Poll returns; a Poll that returned this many is followed by another.
constexpr size_t kPollMax = 10000;

}  // namespace

kafka::client::Config KafkaSourceProperties(const KafkaSourceConfig& source) {
  kafka::client::Config props;
  for (const auto& [k, v] : KafkaClientProperties(source)) props[k] = v;
  props["group.id"] = source.group_id;
  props["auto.offset.reset"] =
      source.auto_offset_reset == AutoOffsetReset::kEarliest ? "earliest" : "latest";
  props["enable.auto.commit"] = "false";
  // fetch.prefetch: the consumer holds at most about `prefetch` fetches of max_bytes ahead
  // of the pipeline (docs/pipelines.md, docs/design/0006 #7): a quarter in librdkafka's
  // local queue, a quarter in the runner's read-ahead, and one drain's overshoot.
  const int64_t bound = source.fetch.prefetch * source.fetch.max_bytes;
  props["fetch.max.bytes"] = std::to_string(source.fetch.max_bytes);
  props["max.partition.fetch.bytes"] = std::to_string(source.fetch.max_partition_bytes);
  props["queued.max.messages.kbytes"] = std::to_string(std::max<int64_t>(1, bound / 4 / 1024));
  // Only the byte bound limits read-ahead: librdkafka (< 2.2) stops fetching a partition
  // for up to a second whenever either bound is reached, and a message-count bound of a
  // batch or so was reached by every fetch (one fetch a second).
  props["queued.min.messages"] = "10000000";
  // The statistics carry each partition's last stable offset (docs/design/0006 #12): how
  // far open transactions hold a read_committed consumer back.
  props.emplace("statistics.interval.ms", "1000");
  return props;
}

KafkaSource::KafkaSource(std::string pipeline, SourceCounters counters)
    : pipeline_(std::move(pipeline)),
      counters_(counters),
      last_wake_(Clock::now()),
      last_arrival_(Clock::now()) {}

KafkaSource::~KafkaSource() { Close(); }

Result<std::unique_ptr<KafkaSource>> KafkaSource::Create(const KafkaSourceConfig& config,
                                                         std::string pipeline,
                                                         SourceCounters counters) {
  std::unique_ptr<KafkaSource> s(new KafkaSource(std::move(pipeline), counters));
  KafkaSource* self = s.get();
  ASSIGN_OR_RETURN(s->consumer_, kafka::client::Consumer::Create(
                                     KafkaSourceProperties(config),
                                     [self](std::string_view j) { self->OnStats(j); }));
  const int64_t bound = config.fetch.prefetch * config.fetch.max_bytes;
  s->read_ahead_limit_ = static_cast<uint64_t>(std::max<int64_t>(1, bound / 4));
  s->topics_ = config.topics;
  return s;
}

Status KafkaSource::Start(SourceListener* listener, bool arrivals) {
  listener_ = listener;
  arrivals_ = arrivals;
  consumer_->SetRebalanceListener([this](kafka::client::RebalanceEvent& e) { OnRebalance(e); });
  return consumer_->Subscribe(topics_);
}

// Inside Poll. The read-ahead's part of a revocation or loss is done here; the runner's
// when NextBatch reports the event.
void KafkaSource::OnRebalance(kafka::client::RebalanceEvent& e) {
  using Kind = kafka::client::RebalanceEvent::Kind;
  for (const kafka::client::TopicPartition& tp : e.partitions)
    first_read_.erase({tp.topic, tp.partition});
  if (e.kind == Kind::kAssigned) {
    listener_->Assigning(e.partitions);
    return;
  }
  if (e.kind == Kind::kLost) {
    // Already someone else's: what we hold of them will be read again there. So will the
    // records of them this Poll brought before the loss (tagged by their Poll's epoch).
    DropAll();
  } else {
    // Kept until the runner has finished and committed the batch in hand; what was read
    // ahead of them is dropped (their next owner reads it from the commit).
    e.defer = true;
  }
  for (const kafka::client::TopicPartition& tp : e.partitions)
    dropped_[{tp.topic, tp.partition}] = epoch_;
  ++epoch_;
  const AssignmentEvent::Kind kind =
      e.kind == Kind::kLost ? AssignmentEvent::Kind::kLost : AssignmentEvent::Kind::kRevoked;
  if (event_.kind == AssignmentEvent::Kind::kNone) {
    event_.kind = kind;
    event_.partitions = e.partitions;
  } else {
    // Lost after a revocation not yet reported: the batch in hand is gone, so it is a loss.
    if (kind == AssignmentEvent::Kind::kLost) event_.kind = kind;
    event_.partitions.insert(event_.partitions.end(), e.partitions.begin(), e.partitions.end());
  }
}

SourceStep KafkaSource::NextBatch(size_t max_messages, SteadyTime deadline) {
  max_messages_ = max_messages;
  SourceStep step;
  // Wait for records only when the read-ahead cannot fill the batch; otherwise just
  // drain what librdkafka has (and serve its callbacks).
  auto now = Clock::now();
  auto wait = std::chrono::milliseconds(0);
  if (pending_.size() + ahead_records_ < max_messages) {
    // Short of a batch. When nothing has come for a while although the broker has more
    // (librdkafka's fetcher asleep at its own queue bound), wake the fetcher.
    if (!full_ && now - last_arrival_ >= kStarved && now - last_wake_ >= kStarved) WakeFetchers();
    wait = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    wait = std::clamp(wait, std::chrono::milliseconds(0), std::chrono::milliseconds(kStarved));
  }
  // All that librdkafka holds, unless the read-ahead is full. (No pause/resume: in
  // librdkafka 2.0 a batch consume around a pause can skip offsets, fixed in 2.1.)
  size_t got = full_ ? 0 : kPollMax;
  while (got == kPollMax) {
    // Records a rebalance inside this Poll revoked carry the epoch before it: dropped.
    const uint64_t poll_epoch = epoch_;
    auto polled = consumer_->Poll(wait, kPollMax);
    wait = std::chrono::milliseconds(0);
    got = 0;
    if (!polled.ok()) {
      counters_.errors->Inc();
      SLUICE_LOG(kLog, kWarn, "pipeline {}: poll: {}", pipeline_, polled.status().message());
      break;
    }
    for (const Status& e : polled->errors()) {
      counters_.errors->Inc();
      SLUICE_LOG(kLog, kWarn, "pipeline {}: source: {}", pipeline_, e.message());
    }
    got = polled->size();
    if (!polled->empty() && arrivals_) {
      // Idleness is judged on arrival: a partition whose messages wait in the read-ahead
      // behind another's backlog is not idle.
      const auto arrived = Clock::now();
      std::optional<Message> last;
      for (size_t i = 0; i < polled->size(); ++i) {
        Message m = (*polled)[i];
        if (last && m.partition == last->partition && m.topic == last->topic) continue;
        listener_->Heard(m.topic, m.partition, arrived);
        last = m;
      }
    }
    if (!polled->empty()) {
      NoteFirstRead(*polled);
      last_arrival_ = Clock::now();
      ahead_bytes_ += polled->bytes();
      ahead_records_ += polled->size();
      held_.push_back({std::move(polled).value(), poll_epoch});
    }
    // The runner deals with the event before anything else is polled.
    if (event_.kind != AssignmentEvent::Kind::kNone) break;
  }
  if (wake_after_drain_ && !full_) {
    wake_after_drain_ = false;
    WakeFetchers();
  }
  if (event_.kind != AssignmentEvent::Kind::kNone) {
    step.event = std::move(event_);
    event_ = AssignmentEvent{};
    return step;
  }
  Take();
  step.ready = pending_.size() >= max_messages || Clock::now() >= deadline;
  return step;
}

void KafkaSource::Take() {
  // Takes what the read-ahead holds into the batch in hand; stops draining librdkafka's
  // queue while the read-ahead holds its bound, and drains again at half (docs/design/0006
  // #7). librdkafka's own bound then holds the rest: its fetcher stops at it and sleeps,
  // so the first drain after a full spell wakes it.
  uint64_t records = 0;
  uint64_t bytes = 0;
  while (pending_.size() < max_messages_ && take_chunk_ < held_.size()) {
    const Polled& p = held_[take_chunk_];
    if (take_index_ >= p.batch.size()) {
      ++take_chunk_;
      take_index_ = 0;
      continue;
    }
    Message m = p.batch[take_index_++];
    --ahead_records_;
    ahead_bytes_ -= m.key.size() + m.value.size();
    if (!dropped_.empty()) {
      auto it = dropped_.find({std::string(m.topic), m.partition});
      if (it != dropped_.end() && p.epoch <= it->second) continue;
    }
    pending_.push_back(m);
    ++records;
    bytes += m.value.size();
  }
  if (records > 0) {
    counters_.messages_in->Inc(records);
    counters_.bytes_in->Inc(bytes);
    *counters_.messages_in_stat += records;
  }
  if (!full_ && ahead_bytes_ >= read_ahead_limit_) {
    full_ = true;
    counters_.read_ahead_full->Inc();
  } else if (full_ && ahead_bytes_ <= read_ahead_limit_ / 2) {
    full_ = false;
    wake_after_drain_ = true;
  }
  // Polled batches used up by skipped (revoked) records alone: release them now.
  if (pending_.empty() && take_chunk_ > 0) ReleaseTaken();
  counters_.read_ahead->Set(static_cast<double>(ahead_bytes_));
}

void KafkaSource::BatchDone() {
  ReleaseTaken();
  Take();
}

void KafkaSource::ReleaseTaken() {
  pending_.clear();
  if (take_chunk_ < held_.size() && take_index_ >= held_[take_chunk_].batch.size()) {
    ++take_chunk_;
    take_index_ = 0;
  }
  held_.erase(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(take_chunk_));
  take_chunk_ = 0;
  if (held_.empty()) dropped_.clear();
}

void KafkaSource::DropAll() {
  pending_.clear();
  held_.clear();
  take_chunk_ = take_index_ = 0;
  ahead_records_ = ahead_bytes_ = 0;
  dropped_.clear();
}

void KafkaSource::NoteFirstRead(const kafka::client::MessageBatch& polled) {
  // Runs of one partition are the rule: the map is looked at when the partition changes.
  std::string_view topic;
  int32_t partition = -1;
  for (size_t i = 0; i < polled.size(); ++i) {
    Message m = polled[i];
    if (m.partition == partition && m.topic == topic) continue;
    topic = m.topic;
    partition = m.partition;
    first_read_.try_emplace({std::string(topic), partition}, m.offset);
  }
}

void KafkaSource::AcknowledgeRevocation() { consumer_->CompleteRevocation(); }

Result<kafka::client::GroupMetadata> KafkaSource::GroupMetadata() const {
  ASSIGN_OR_RETURN(kafka::client::GroupMetadata md, consumer_->CurrentGroupMetadata());
  // After the metadata: a membership lost before it was taken shows here too (librdkafka
  // rejoins only once Poll, on this thread, has reported the loss).
  if (consumer_->MemberId().empty()) {
    return Status(StatusCode::kAborted,
                  fmt::format("pipeline {}: the consumer is no member of its group now (its "
                              "session was lost; it rejoins): no offsets are committed without "
                              "a generation",
                              pipeline_));
  }
  return md;
}

Status KafkaSource::Rewind(std::chrono::milliseconds timeout) {
  DropAll();
  ASSIGN_OR_RETURN(std::vector<kafka::client::TopicPartition> assigned, consumer_->Assignment());
  if (assigned.empty()) return Status::OK();
  ASSIGN_OR_RETURN(std::vector<kafka::client::TopicPartition> committed,
                   consumer_->Committed(assigned, timeout));
  std::vector<kafka::client::TopicPartition> seek;
  for (const kafka::client::TopicPartition& tp : committed) {
    int64_t at = tp.offset;
    if (at < 0) {
      // Nothing committed yet: where this member began reading it. (Nothing read: its
      // position has not moved.)
      auto it = first_read_.find({tp.topic, tp.partition});
      if (it == first_read_.end()) continue;
      at = it->second;
    }
    seek.push_back({tp.topic, tp.partition, at});
  }
  RETURN_IF_ERROR(consumer_->Seek(seek, timeout));
  std::string where;
  for (const kafka::client::TopicPartition& tp : seek) {
    where += fmt::format("{}{} [{}] at {}", where.empty() ? "" : ", ", tp.topic, tp.partition,
                         tp.offset);
  }
  SLUICE_LOG(kLog, kInfo, "pipeline {}: source rewound to the group's committed offsets: {}",
             pipeline_, where.empty() ? "(nothing read yet)" : where);
  return Status::OK();
}

Status KafkaSource::Commit(const std::vector<kafka::client::TopicPartition>& offsets,
                           CommitMode mode) {
  return mode == CommitMode::kSync ? consumer_->Commit(offsets) : consumer_->CommitAsync(offsets);
}

Result<std::vector<kafka::client::PartitionLag>> KafkaSource::Lag() const {
  ASSIGN_OR_RETURN(std::vector<kafka::client::PartitionLag> lags, consumer_->Lag());
  for (kafka::client::PartitionLag& l : lags) {
    if (auto it = stable_.find({l.topic, l.partition}); it != stable_.end())
      l.last_stable_offset = it->second;
  }
  return lags;
}

void KafkaSource::OnStats(std::string_view json) {
  auto stable = StableOffsetsFromStats(json);
  if (!stable.ok()) {
    SLUICE_LOG(kLog, kDebug, "pipeline {}: statistics: {}", pipeline_, stable.status().message());
    return;
  }
  stable_ = std::move(stable).value();
}

Result<std::map<std::pair<std::string, int32_t>, int64_t>> StableOffsetsFromStats(
    std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (auto error = parser.parse(padded).get(root); error) {
    return CorruptionError("librdkafka statistics: {}", simdjson::error_message(error));
  }
  std::map<std::pair<std::string, int32_t>, int64_t> out;
  simdjson::dom::object topics;
  if (root["topics"].get(topics) != simdjson::SUCCESS) return out;  // none yet
  for (auto [topic_name, topic] : topics) {
    simdjson::dom::object partitions;
    if (topic["partitions"].get(partitions) != simdjson::SUCCESS) continue;
    for (auto [key, partition] : partitions) {
      int64_t id = -1;
      int64_t ls = -1;
      if (partition["partition"].get(id) != simdjson::SUCCESS || id < 0 || id > INT32_MAX) continue;
      if (partition["ls_offset"].get(ls) != simdjson::SUCCESS || ls < 0) continue;
      out[{std::string(topic_name), static_cast<int32_t>(id)}] = ls;
    }
  }
  return out;
}

// librdkafka 2.0 notices a resumed partition (or room below its queue bound) only when
// its fetcher thread wakes: a watermark request to the partition's leader wakes it.
void KafkaSource::WakeFetchers() {
  last_wake_ = Clock::now();
  auto lags = consumer_->Lag();  // positions after the read-ahead, cached watermarks
  if (!lags.ok()) return;
  for (const kafka::client::PartitionLag& l : *lags) {
    if (l.lag() <= 0) continue;
    Status st =
        consumer_->QueryHighWatermark(l.topic, l.partition, std::chrono::seconds(1)).status();
    if (!st.ok()) {
      // The broker is unreachable: librdkafka reconnects by itself; try again in a second.
      SLUICE_LOG(kLog, kWarn, "pipeline {}: {}: {}", pipeline_, "waking the fetcher", st.message());
      last_wake_ = Clock::now() + std::chrono::seconds(1);
      return;
    }
  }
}

void KafkaSource::Close() {
  // What is still read ahead goes first: librdkafka cannot be destroyed (its broker
  // threads wait) while messages it handed out are alive.
  DropAll();
  consumer_.reset();  // leaves the group
}

}  // namespace sluice::pipeline
