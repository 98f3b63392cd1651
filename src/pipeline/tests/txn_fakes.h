// Test doubles for exactly-once pipelines into Kafka, no broker: FakeTxnCluster (a Kafka
// cluster's transactions as a read_committed consumer and the group coordinator see them:
// committed records, open transactions per transactional.id, producer epochs, the group's
// committed offsets) and FakeTxnSink (a Sink that behaves as the exactly-once kafka sink:
// deferring, the offsets committed in its transaction, dead letters in the same one).
// Scripted troubles: abortable commits and writes, a rebalance the member missed, the
// broker's timeout abort, a fence by a newer producer. A "crash" (SIGKILL) is scripted: at the
// chosen step the sink stops touching the cluster for good and fails, so what happened before stays
// and nothing after does; its open transaction stays open until the next producer with the same id
// fences it.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "duck/database.h"
#include "pipeline/tests/fakes.h"
#include "sinks/sink.h"

namespace sluice::pipeline::testing {

struct FakeTxnCluster {
  explicit FakeTxnCluster(FakeGroup* g) : group(g) {}
  FakeGroup* group;  // where a committed transaction's offsets land

  // What a read_committed consumer sees: "topic:row", in commit order.
  std::vector<std::string> committed;
  // Open transactions by transactional.id: their records and offsets (invisible).
  struct Open {
    std::vector<std::string> records;
    sinks::SourceOffsets offsets;
  };
  std::map<std::string, Open> open;
  std::map<std::string, int> epochs;  // transactional.id -> the current producer epoch
  std::vector<std::string> log;       // "init t epoch 1", "abort t", "commit t 2 records"
  // Behaviour: the next N commits fail as abortable (a record not delivered, say); the
  // next N writes of the pipeline's sink fail after producing one row (the sink aborts
  // the transaction and keeps the offsets, as KafkaSink does).
  int fail_commits = 0;
  int fail_writes = 0;
  // The Nth commit from now (1: the next) first finds that the group moved to a new
  // generation (a rebalance the member missed: KIP-447 refuses its offsets).
  int rebalance_at_commit = 0;
  // The Nth commit (or write) from now finds its transaction aborted by the broker at its
  // timeout, the epoch bumped: the sink sees itself fenced past its timeout and makes a
  // new producer (KafkaSink); the transaction is lost.
  int time_out_at_commit = 0;
  int time_out_at_write = 0;
  // The Nth commit from now finds a newer producer with the same id (a live zombie's
  // successor): fenced inside its timeout, fatal.
  int fence_at_commit = 0;
  // Crash (as SIGKILL) at the Nth pass of this step: "write", "flush", "dlq-write",
  // "dlq-flush", "offsets-sent", "committed".
  std::string crash_at;
  int crash_count = 1;

  void Abort(const std::string& id, std::string_view why) {
    if (auto it = open.find(id); it != open.end()) {
      log.push_back(fmt::format("abort {} ({}, {} records)", id, why, it->second.records.size()));
      open.erase(it);
    }
  }
  // True when this pass of `step` is the crash.
  bool Crashes(std::string_view step) { return step == crash_at && --crash_count == 0; }
  // Counts down a "the Nth from now" trigger: true at the Nth.
  static bool Due(int& n) { return n > 0 && --n == 0; }
  // The coordinator aborts `id`'s transaction and bumps its epoch (a timeout, or another
  // producer's InitTransactions).
  void Fence(const std::string& id, std::string_view why) {
    Abort(id, why);
    ++epochs[id];
  }
};

class FakeTxnSink final : public sinks::Sink {
 public:
  // InitTransactions: fences older producers with this id, aborting what they left open.
  FakeTxnSink(FakeTxnCluster* cluster, std::string id, std::string topic = "out")
      : c_(cluster), id_(std::move(id)), topic_(std::move(topic)) {
    epoch_ = ++c_->epochs[id_];
    c_->Abort(id_, "fenced at init");
    c_->log.push_back(fmt::format("init {} epoch {}", id_, epoch_));
  }
  ~FakeTxnSink() override {
    // A clean stop with a transaction open aborts it; a crash leaves it open.
    if (!crashed_ && !Fenced() && open_) c_->Abort(id_, "sink closed");
  }

  Status Write(duck::Connection& conn, std::string_view table, const sinks::SourceOffsets& offsets,
               std::vector<sinks::RejectedRow>* /*rejected*/) override {
    lost_.clear();
    if (FakeTxnCluster::Due(c_->time_out_at_write)) {
      Begin();
      Merge(offsets);
      c_->Fence(id_, "timed out");
      return TimedOut();
    }
    if (c_->fail_writes > 0) {
      --c_->fail_writes;
      RETURN_IF_ERROR(Alive());
      Begin();
      Merge(offsets);
      c_->open[id_].records.push_back(topic_ + ":a row of a failed write");
      sinks::SourceOffsets keep = uncommitted_;
      Status st = AbortWith(IOError("the producer queue stayed full"));
      uncommitted_ = std::move(keep);
      return st;
    }
    return WriteTo(conn, table, offsets, topic_, "write");
  }
  Status Flush() override {
    lost_.clear();
    return Step("flush");
  }
  std::string Describe() const override { return "fake kafka topic " + topic_; }
  std::string_view TransactionLost() const override { return lost_; }

  bool Defers() const override { return true; }
  bool CommitsSourceOffsets() const override { return true; }
  void SetGroupMetadata(GroupMetadataFn group) override { group_ = std::move(group); }
  void Skip(const sinks::SourceOffsets& offsets) override { Merge(offsets); }
  Status Discard() override {
    uncommitted_.clear();
    if (crashed_ || Fenced() || !open_) return Status::OK();
    open_ = false;
    c_->Abort(id_, "discarded");
    return Status::OK();
  }
  Result<sinks::SourceOffsets> Commit(bool /*force*/) override {
    lost_.clear();
    if (uncommitted_.empty() && !open_) return sinks::SourceOffsets{};
    RETURN_IF_ERROR(Alive());
    if (!group_) return FailedPreconditionError("no group metadata");
    ASSIGN_OR_RETURN(kafka::client::GroupMetadata md, group_());
    (void)md;
    Begin();
    if (FakeTxnCluster::Due(c_->time_out_at_commit)) {
      c_->Fence(id_, "timed out");
      return TimedOut();
    }
    if (FakeTxnCluster::Due(c_->fence_at_commit)) {
      c_->Fence(id_, "fenced by a newer producer");
      c_->log.push_back(fmt::format("init {} epoch {} (another producer)", id_, c_->epochs[id_]));
    }
    RETURN_IF_ERROR(Alive());
    if (FakeTxnCluster::Due(c_->rebalance_at_commit)) ++c_->group->generation;
    c_->open[id_].offsets = uncommitted_;
    // KIP-447: the group coordinator refuses offsets from a generation that is gone.
    if (c_->group->metadata_generation != c_->group->generation) {
      Status st =
          AbortWith(Status(StatusCode::kAborted, "ILLEGAL_GENERATION: the member is stale"));
      lost_ = "rebalance";
      return st;
    }
    if (c_->Crashes("offsets-sent")) return Crash("offsets-sent");
    if (c_->fail_commits > 0) {
      --c_->fail_commits;
      Status st =
          AbortWith(Status(StatusCode::kAborted, "commit failed: a record was not delivered"));
      lost_ = "abortable";
      return st;
    }
    FakeTxnCluster::Open& t = c_->open[id_];
    c_->committed.insert(c_->committed.end(), t.records.begin(), t.records.end());
    for (const auto& [tp, next] : t.offsets) c_->group->committed[tp] = next;
    c_->log.push_back(fmt::format("commit {} {} records", id_, t.records.size()));
    for (const auto& [tp, next] : t.offsets)
      c_->group->log.push_back(fmt::format("txn commit {}[{}]@{}", tp.first, tp.second, next));
    c_->open.erase(id_);
    open_ = false;
    if (c_->Crashes("committed")) return Crash("committed");
    return std::exchange(uncommitted_, {});
  }

  // The dead-letter sink inside this sink's transactions (KafkaSink::DeadLetterTopic).
  std::unique_ptr<sinks::Sink> DeadLetterTopic(std::string topic) {
    return std::make_unique<InTransaction>(this, std::move(topic));
  }

 private:
  class InTransaction final : public sinks::Sink {
   public:
    InTransaction(FakeTxnSink* owner, std::string topic)
        : owner_(owner), topic_(std::move(topic)) {}
    Status Write(duck::Connection& conn, std::string_view table,
                 const sinks::SourceOffsets& offsets,
                 std::vector<sinks::RejectedRow>* /*rejected*/) override {
      owner_->lost_.clear();
      return owner_->WriteTo(conn, table, offsets, topic_, "dlq-write");
    }
    Status Flush() override {
      owner_->lost_.clear();
      return owner_->Step("dlq-flush");
    }
    std::string Describe() const override { return "fake kafka topic " + topic_; }

   private:
    FakeTxnSink* owner_;
    std::string topic_;
  };

  bool Fenced() const { return c_->epochs[id_] != epoch_; }
  // Fenced past the transaction's timeout (KafkaSink::End): a new producer, the
  // transaction lost.
  Status TimedOut() {
    open_ = false;
    uncommitted_.clear();
    epoch_ = ++c_->epochs[id_];
    c_->log.push_back(fmt::format("init {} epoch {} (after a timeout)", id_, epoch_));
    lost_ = "timeout";
    return Status(StatusCode::kAborted,
                  "fenced: the broker aborted the transaction at its timeout");
  }
  Status Alive() {
    if (crashed_) return InternalError("crashed at {}", crashed_at_);
    if (Fenced()) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("fatal: producer {} fenced by a newer epoch", id_));
    }
    return Status::OK();
  }
  Status Crash(std::string_view step) {
    crashed_ = true;
    crashed_at_ = step;
    c_->log.push_back(fmt::format("crash at {}", step));
    return InternalError("crashed at {}", step);
  }
  Status AbortWith(Status cause) {
    c_->Abort(id_, cause.message());
    open_ = false;
    uncommitted_.clear();
    return cause;
  }
  void Begin() {
    if (!open_) c_->open[id_];
    open_ = true;
  }
  void Merge(const sinks::SourceOffsets& offsets) {
    for (const auto& [tp, next] : offsets) uncommitted_[tp] = std::max(uncommitted_[tp], next);
  }
  Status Step(std::string_view step) {
    RETURN_IF_ERROR(Alive());
    if (c_->Crashes(step)) return Crash(step);
    return Status::OK();
  }
  Status WriteTo(duck::Connection& conn, std::string_view table,
                 const sinks::SourceOffsets& offsets, const std::string& topic,
                 std::string_view step) {
    RETURN_IF_ERROR(Alive());
    ASSIGN_OR_RETURN(auto rows,
                     conn.QueryText(fmt::format("SELECT to_json(t)::VARCHAR FROM {} t", table)));
    Begin();
    Merge(offsets);
    for (const auto& row : rows)
      c_->open[id_].records.push_back(fmt::format("{}:{}", topic, row[0].value_or("null")));
    if (c_->Crashes(step)) return Crash(step);
    return Status::OK();
  }

  FakeTxnCluster* c_;
  const std::string id_;
  const std::string topic_;
  int epoch_ = 0;
  bool open_ = false;
  bool crashed_ = false;
  std::string crashed_at_;
  sinks::SourceOffsets uncommitted_;
  GroupMetadataFn group_;
  std::string lost_;  // TransactionLost
};

}  // namespace sluice::pipeline::testing
