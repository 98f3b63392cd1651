// Test doubles for the runner and the commit strategies, no broker: FakeGroup (a
// consumer group's committed offsets, which outlive a "crashed" member), FakeSource (a
// Source over in-memory partitions, with scripted revocations and losses) and FakeSink
// (a Sink that can refuse, fail or defer like the iceberg sink). Each keeps what it saw
// in a state object the test holds, since the runner owns the source and the sinks.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "duck/database.h"
#include "pipeline/source.h"
#include "sinks/sink.h"

namespace sluice::pipeline::testing {

using kafka::client::Message;
using kafka::client::TopicPartition;

// RebalanceEvent's unset offset (librdkafka's RD_KAFKA_OFFSET_INVALID).
inline constexpr int64_t kUnset = -1001;

// A group's committed offsets and every commit and acknowledgement, in order.
struct FakeGroup {
  SourceOffsets committed;
  // The group's generation now, and the one in the last group metadata a member handed
  // out (how a FakeTxnSink, txn_fakes.h, sees a member whose generation is gone).
  int32_t generation = 1;
  int32_t metadata_generation = 0;
  // "commit sync in[0]@3", "commit async in[0]@5", "ack revoke in[0]", ...
  std::vector<std::string> log;
};

// The topic of a FakeSource.
inline constexpr const char* kFakeTopic = "in";

// What a FakeSource does besides delivering records.
struct FakeScript {
  // Deliver a revocation (or a loss) of `partition` once the batch in hand holds at
  // least `in_hand` records, before it is processed.
  std::optional<size_t> revoke_when_in_hand;
  std::optional<size_t> lose_when_in_hand;
  int32_t partition = 0;
  // When the group's generation moved on (a rebalance this member missed), the member
  // learns it at its next NextBatch, as librdkafka does from a heartbeat's answer: its
  // partitions are lost, then assigned again (at the group's commit) in the new
  // generation.
  bool rejoin = true;
};

// One topic ("in") of in-memory partitions. NextBatch delivers from each assigned
// partition's position; a batch is ready when full, or when it holds records and nothing
// more is there to read. With nothing at all to deliver it calls `idle` (the test stops
// the runner there).
class FakeSource final : public Source {
 public:
  using Script = FakeScript;

  FakeSource(FakeGroup* group, std::map<int32_t, std::vector<std::string>> partitions,
             SourceCounters counters, Script script = {}, std::function<void()> idle = {})
      : group_(group),
        partitions_(std::move(partitions)),
        counters_(counters),
        script_(script),
        idle_(std::move(idle)) {}

  Status Start(SourceListener* listener, bool /*arrivals*/) override {
    listener_ = listener;
    generation_ = group_->generation;
    std::vector<TopicPartition> assigned;
    for (const auto& [p, values] : partitions_) assigned.push_back({kFakeTopic, p, kUnset});
    listener->Assigning(assigned);
    for (const TopicPartition& tp : assigned) {
      int64_t at = 0;
      if (tp.offset >= 0) {
        at = tp.offset;
      } else if (auto it = group_->committed.find({kFakeTopic, tp.partition});
                 it != group_->committed.end()) {
        at = it->second;
      }
      position_[tp.partition] = at;
      started_at_[tp.partition] = at;
      group_->log.push_back(fmt::format("assigned in[{}]@{}", tp.partition, at));
    }
    return Status::OK();
  }

  SourceStep NextBatch(size_t max_messages, SteadyTime deadline) override {
    SourceStep step;
    if (rejoining_) {
      rejoining_ = false;
      (void)Start(listener_, false);  // assigned again, in the group's generation
      return step;
    }
    if (script_.rejoin && generation_ != group_->generation && !position_.empty()) {
      pending_.clear();
      group_->log.push_back(fmt::format("lost all, rejoining generation {}", group_->generation));
      step.event.kind = AssignmentEvent::Kind::kLost;
      for (const auto& [p, at] : position_)
        step.event.partitions.push_back({kFakeTopic, p, kUnset});
      position_.clear();
      rejoining_ = true;
      return step;
    }
    bool more = false;
    for (auto& [p, at] : position_) {
      const std::vector<std::string>& values = partitions_[p];
      while (pending_.size() < max_messages && at < static_cast<int64_t>(values.size())) {
        Message m;
        m.topic = kFakeTopic;
        m.partition = p;
        m.offset = at;
        m.value = values[static_cast<size_t>(at)];
        pending_.push_back(m);
        counters_.messages_in->Inc();
        ++*counters_.messages_in_stat;
        ++at;
      }
      if (at < static_cast<int64_t>(values.size())) more = true;
    }
    if (script_.revoke_when_in_hand && pending_.size() >= *script_.revoke_when_in_hand) {
      script_.revoke_when_in_hand.reset();
      revoking_ = script_.partition;
      step.event.kind = AssignmentEvent::Kind::kRevoked;
      step.event.partitions.push_back({kFakeTopic, script_.partition, kUnset});
      return step;
    }
    if (script_.lose_when_in_hand && pending_.size() >= *script_.lose_when_in_hand) {
      script_.lose_when_in_hand.reset();
      // The batch in hand is dropped, and the lost partition no longer read.
      pending_.clear();
      position_.erase(script_.partition);
      group_->log.push_back(fmt::format("lost in[{}]", script_.partition));
      step.event.kind = AssignmentEvent::Kind::kLost;
      step.event.partitions.push_back({kFakeTopic, script_.partition, kUnset});
      return step;
    }
    step.ready = pending_.size() >= max_messages || (!pending_.empty() && !more) ||
                 std::chrono::steady_clock::now() >= deadline;
    if (pending_.empty() && !more) {
      if (idle_) idle_();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return step;
  }

  std::span<const Message> InHand() const override { return pending_; }
  void BatchDone() override { pending_.clear(); }
  void AcknowledgeRevocation() override {
    group_->log.push_back(fmt::format("ack revoke in[{}]", revoking_));
    position_.erase(revoking_);
  }
  Status Commit(const std::vector<TopicPartition>& offsets, CommitMode mode) override {
    for (const TopicPartition& tp : offsets) {
      group_->committed[{tp.topic, tp.partition}] = tp.offset;
      group_->log.push_back(fmt::format("commit {} {}[{}]@{}",
                                        mode == CommitMode::kSync ? "sync" : "async", tp.topic,
                                        tp.partition, tp.offset));
    }
    return Status::OK();
  }
  Result<std::vector<kafka::client::PartitionLag>> Lag() const override {
    return std::vector<kafka::client::PartitionLag>{};
  }
  Result<kafka::client::GroupMetadata> GroupMetadata() const override {
    group_->metadata_generation = generation_;
    return kafka::client::GroupMetadata::Make("g", generation_, "member");
  }
  // Each assigned partition from the group's commit, or from where it started.
  Status Rewind(std::chrono::milliseconds /*timeout*/) override {
    pending_.clear();
    for (auto& [p, at] : position_) {
      auto it = group_->committed.find({kFakeTopic, p});
      at = it != group_->committed.end() ? it->second : started_at_[p];
      group_->log.push_back(fmt::format("rewind in[{}]@{}", p, at));
    }
    return Status::OK();
  }
  void Close() override { pending_.clear(); }

 private:
  FakeGroup* group_;
  std::map<int32_t, std::vector<std::string>> partitions_;
  SourceCounters counters_;
  Script script_;
  std::function<void()> idle_;
  std::map<int32_t, int64_t> position_;    // assigned partitions: the next offset to deliver
  std::map<int32_t, int64_t> started_at_;  // where each began at its assignment
  std::vector<Message> pending_;
  int32_t revoking_ = -1;
  int32_t generation_ = 0;  // the group's generation when this member joined
  SourceListener* listener_ = nullptr;
  bool rejoining_ = false;  // lost all: assigned again at the next NextBatch
};

// What a FakeSink saw and how it behaves.
struct FakeSinkState {
  // Behaviour.
  bool defers = false;   // commit like the iceberg sink: offsets in its own commits
  int fail_writes = 0;   // the next N writes fail
  int fail_flushes = 0;  // the next N flushes fail
  std::string refuse;    // rows whose JSON contains this are refused one by one
  // What it holds.
  std::vector<std::string> staged;   // written, not flushed (deferring: not committed)
  std::vector<std::string> durable;  // flushed (deferring: committed)
  sinks::SourceOffsets staged_offsets;
  sinks::SourceOffsets held;     // deferring: the offsets stored with its commits
  std::vector<std::string> log;  // "write 3", "flush", "commit in[0]@3", ...
};

class FakeSink final : public sinks::Sink {
 public:
  explicit FakeSink(FakeSinkState* state) : s_(state) {}

  Status Write(duck::Connection& conn, std::string_view table, const sinks::SourceOffsets& offsets,
               std::vector<sinks::RejectedRow>* rejected) override {
    if (s_->fail_writes > 0) {
      --s_->fail_writes;
      s_->log.push_back("write failed");
      return IOError("fake sink: write refused");
    }
    ASSIGN_OR_RETURN(auto rows,
                     conn.QueryText(fmt::format("SELECT to_json(t)::VARCHAR FROM {} t", table)));
    size_t n = 0;
    for (const auto& row : rows) {
      std::string json = row[0].value_or("null");
      if (!s_->refuse.empty() && json.find(s_->refuse) != std::string::npos) {
        rejected->push_back({json, "fake sink: refused"});
        continue;
      }
      s_->staged.push_back(json);
      ++n;
    }
    for (const auto& [tp, next] : offsets) s_->staged_offsets[tp] = next;
    s_->log.push_back(fmt::format("write {}", n));
    return Status::OK();
  }
  Status Flush() override {
    if (s_->fail_flushes > 0) {
      --s_->fail_flushes;
      s_->log.push_back("flush failed");
      s_->staged.clear();
      return IOError("fake sink: flush failed");
    }
    s_->log.push_back("flush");
    if (s_->defers) return Status::OK();  // staged until Commit
    s_->durable.insert(s_->durable.end(), s_->staged.begin(), s_->staged.end());
    s_->staged.clear();
    return Status::OK();
  }
  std::optional<sinks::SourceOffsets> HeldOffsets() override {
    if (!s_->defers) return std::nullopt;
    return s_->held;
  }
  bool Defers() const override { return s_->defers; }
  // Due only when forced (revocation, stop): the tests decide when it commits.
  Result<sinks::SourceOffsets> Commit(bool force) override {
    if (!force || s_->staged_offsets.empty()) return sinks::SourceOffsets{};
    s_->durable.insert(s_->durable.end(), s_->staged.begin(), s_->staged.end());
    s_->staged.clear();
    sinks::SourceOffsets made = std::move(s_->staged_offsets);
    s_->staged_offsets.clear();
    for (const auto& [tp, next] : made) {
      s_->held[tp] = next;
      s_->log.push_back(fmt::format("commit {}[{}]@{}", tp.first, tp.second, next));
    }
    return made;
  }
  void Skip(const sinks::SourceOffsets& offsets) override {
    for (const auto& [tp, next] : offsets)
      s_->staged_offsets[tp] = std::max(s_->staged_offsets[tp], next);
  }
  Status Discard() override {
    s_->staged.clear();
    s_->staged_offsets.clear();
    s_->log.push_back("discard");
    return Status::OK();
  }
  std::string Describe() const override { return "fake"; }

 private:
  FakeSinkState* s_;
};

}  // namespace sluice::pipeline::testing
