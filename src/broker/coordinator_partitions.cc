// Coordinator partitions: the key hash, the replicated append of a coordinator's batch and
// the roles decorator. See coordinator_partitions.h.
#include "broker/coordinator_partitions.h"

#include <fmt/format.h>

#include <limits>
#include <utility>

#include "base/logging.h"
#include "broker/controller.h"
#include "broker/group_coordinator.h"
#include "broker/loggers.h"
#include "broker/partition.h"
#include "broker/replica_state.h"
#include "broker/shards.h"
#include "broker/txn_coordinator.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

// One code point from UTF-8 at s[*i], advancing *i; U+FFFD (one byte consumed) for a byte
// that does not start a valid sequence.
uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const auto b0 = static_cast<uint8_t>(s[*i]);
  auto cont = [&](size_t k) {
    return *i + k < s.size() && (static_cast<uint8_t>(s[*i + k]) & 0xC0) == 0x80;
  };
  auto at = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[*i + k]) & 0x3F); };
  uint32_t cp = 0xFFFD;
  size_t len = 1;
  if (b0 < 0x80) {
    cp = b0;
  } else if (b0 >= 0xC2 && b0 < 0xE0 && cont(1)) {
    cp = ((b0 & 0x1Fu) << 6) | at(1);
    len = 2;
  } else if (b0 >= 0xE0 && b0 < 0xF0 && cont(1) && cont(2)) {
    uint32_t v = ((b0 & 0x0Fu) << 12) | (at(1) << 6) | at(2);
    if (v >= 0x800 && (v < 0xD800 || v > 0xDFFF)) {
      cp = v;
      len = 3;
    }
  } else if (b0 >= 0xF0 && b0 < 0xF5 && cont(1) && cont(2) && cont(3)) {
    uint32_t v = ((b0 & 0x07u) << 18) | (at(1) << 12) | (at(2) << 6) | at(3);
    if (v >= 0x10000 && v <= 0x10FFFF) {
      cp = v;
      len = 4;
    }
  }
  *i += len;
  return cp;
}

}  // namespace

int32_t JavaStringHash(std::string_view key) {
  // h = 31 * h + c over UTF-16 code units, in 32-bit two's complement.
  uint32_t h = 0;
  size_t i = 0;
  while (i < key.size()) {
    uint32_t cp = NextCodePoint(key, &i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      h = 31 * h + (0xD800 + (cp >> 10));
      h = 31 * h + (0xDC00 + (cp & 0x3FF));
    } else {
      h = 31 * h + cp;
    }
  }
  return static_cast<int32_t>(h);
}

int32_t CoordinatorPartitionFor(std::string_view key, int32_t partitions) {
  const int32_t h = JavaStringHash(key);
  // Kafka's Utils.abs: Integer.MIN_VALUE is 0, not itself.
  const int32_t abs = h == std::numeric_limits<int32_t>::min() ? 0 : (h < 0 ? -h : h);
  return partitions <= 0 ? 0 : abs % partitions;
}

Status NotLeadingError(const std::string& what) {
  return Status(StatusCode::kNotFound, what + ": this broker does not lead it now");
}

ErrorCode CoordinatorWriteError(const Status& st) {
  return st.code() == StatusCode::kNotFound ? ErrorCode::kNotCoordinator
                                            : ErrorCode::kCoordinatorNotAvailable;
}

ErrorCode GroupStoreError(const Status& st) {
  return st.code() == StatusCode::kAborted ? ErrorCode::kRebalanceInProgress
                                           : CoordinatorWriteError(st);
}

InternalLogOptions::AppendFn ReplicatedAppend(Shards& shards, std::string topic, int32_t partition,
                                              int shard, int32_t leader_epoch, int32_t timeout_ms) {
  return [&shards, key = PartitionKey(std::move(topic), partition), shard, leader_epoch,
          timeout_ms](std::vector<uint8_t> batch, InternalLog::Done done) {
    const std::string what = fmt::format("{}-{}", key.first, key.second);
    if (shard < 0 || shard >= shards.size()) {
      if (done) done(NotLeadingError(what));
      return;
    }
    Shard* owner = &shards.at(shard);
    auto task = [owner, key, what, leader_epoch, timeout_ms, batch = std::move(batch),
                 done]() mutable {
      auto it = owner->partitions.find(key);
      Partition* part = it == owner->partitions.end() ? nullptr : it->second.get();
      if (part == nullptr || part->replica == nullptr || !part->replica->leader() ||
          part->replica->leader_epoch != leader_epoch) {
        if (done) done(NotLeadingError(what));
        return;
      }
      std::string message;
      const ErrorCode refused = replica::CheckAppend(*part, -1, &message);
      if (refused != ErrorCode::kNone) {
        if (done) {
          done(refused == ErrorCode::kNotLeaderOrFollower
                   ? NotLeadingError(what)
                   : ResourceExhaustedError("{}: error {}: {}", what, static_cast<int>(refused),
                                            message));
        }
        return;
      }
      storage::AppendOptions ao;
      ao.leader_epoch = part->epochs.latest_epoch();
      ao.ack = storage::AckLevel::kDurable;
      replica::PrepareAppend(*part, &ao);
      Result<storage::AppendInfo> appended = part->log->Append(batch, std::move(ao));
      if (!appended.ok()) {
        SLUICE_LOG(kCoordinatorLog, kWarn, "appending to {}: {}", what,
                   appended.status().ToString());
        if (done) done(appended.status());
        return;
      }
      if (!done) return;
      replica::AwaitHighWatermark(
          *part, appended->last_offset + 1, timeout_ms, [what, done, timeout_ms](ErrorCode e) {
            if (e == ErrorCode::kNone) return done(Status::OK());
            if (e == ErrorCode::kNotLeaderOrFollower) return done(NotLeadingError(what));
            if (e == ErrorCode::kRequestTimedOut) {
              return done(AbortedError("{}: not replicated in {} ms", what, timeout_ms));
            }
            done(
                ResourceExhaustedError("{}: not replicated (error {})", what, static_cast<int>(e)));
          });
    };
    if (!shards.PostGated(owner->loop, std::move(task)) && done) {
      done(NotLeadingError(what));
    }
  };
}

// ---------------------------------------------------------------------------------------
// CoordinatorRoles

CoordinatorListener CoordinatorsFollowLeadership(Controller& controller, Shards& shards,
                                                 GroupCoordinator* groups, TxnCoordinator* txns,
                                                 InternalLogOptions defaults) {
  CoordinatorListener l;
  l.on_lead = [&controller, &shards, groups, txns, defaults](const PartitionKey& key,
                                                             int32_t epoch) {
    storage::PartitionLog* log = controller.LogOf(key.first, key.second);
    const TopicInfo* info = controller.FindTopic(key.first);
    if (log == nullptr || info == nullptr) return;
    InternalLogOptions o = defaults;
    o.dir = fmt::format("{}/{}-{}", defaults.dir, key.first, key.second);
    o.attach = log;
    o.cleaner = nullptr;  // the controller registers every compacted replica's log
    o.append = ReplicatedAppend(shards, key.first, key.second,
                                Shards::OwnerOf(info->id, key.second, shards.size()), epoch,
                                kCoordinatorWriteTimeoutMs);
    if (key.first == kOffsetsTopic && groups != nullptr) {
      OffsetLogOptions lo;
      static_cast<InternalLogOptions&>(lo) = o;
      groups->LoadPartition(key.second, info->partitions, epoch, std::move(lo));
    } else if (key.first == kTxnStateTopic && txns != nullptr) {
      TxnLogOptions lo;
      static_cast<InternalLogOptions&>(lo) = o;
      txns->LoadPartition(key.second, info->partitions, epoch, std::move(lo));
    }
  };
  l.on_resign = [groups, txns](const PartitionKey& key) {
    if (key.first == kOffsetsTopic && groups != nullptr) groups->UnloadPartition(key.second);
    if (key.first == kTxnStateTopic && txns != nullptr) txns->UnloadPartition(key.second);
  };
  return l;
}

// ---------------------------------------------------------------------------------------
// CoordinatorRoles

void CoordinatorRoles::Attach(CoordinatorListener listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
}

void CoordinatorRoles::Detach() {
  std::lock_guard lock(mu_);
  listener_ = {};
}

bool CoordinatorRoles::BecomeLeader(const PartitionKey& key, const LeaderRole& role) {
  const bool taken = inner_->BecomeLeader(key, role);
  if (taken && IsReservedTopic(key.first)) {
    std::lock_guard lock(mu_);
    if (listener_.on_lead) listener_.on_lead(key, role.leader_epoch);
  }
  return taken;
}

bool CoordinatorRoles::BecomeFollower(const PartitionKey& key, int32_t leader, int32_t leader_epoch,
                                      const std::string& host, int32_t port) {
  if (IsReservedTopic(key.first)) {
    std::lock_guard lock(mu_);
    if (listener_.on_resign) listener_.on_resign(key);
  }
  return inner_->BecomeFollower(key, leader, leader_epoch, host, port);
}

void CoordinatorRoles::StopReplica(const PartitionKey& key, bool deleted) {
  if (IsReservedTopic(key.first)) {
    std::lock_guard lock(mu_);
    if (listener_.on_resign) listener_.on_resign(key);
  }
  inner_->StopReplica(key, deleted);
}

}  // namespace sluice::broker
