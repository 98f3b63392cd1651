// InProcessSource (in_process_source.h): the member's thread (join, sync, heartbeat,
// leave) and the runner's side (assignment, fetch, decode, batches, commits).
#include "pipeline/in_process_source.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <thread>

#include "base/logging.h"
#include "base/strings.h"
#include "kafka/group/assignors.h"
#include "kafka/group/consumer_protocol.h"
#include "pipeline/loggers.h"

namespace sluice::pipeline {
namespace {

using Clock = std::chrono::steady_clock;
using kafka::ErrorCode;
using kafka::client::Message;
using kafka::client::TopicPartition;
using std::chrono::milliseconds;

constexpr const char* kProtocolType = "consumer";
// How long a fetch or a coordinator request may take before it counts as failed.
constexpr milliseconds kRequestTimeout{30'000};
// With nothing to read, the next look comes after kIdleWait, doubled with each look that
// found nothing up to kMaxIdleWait (no long poll: 0023 decision 4). A fixed 1 ms made an
// idle pipeline ask its shard 1,000 times a second: 10 idle pipelines kept 40% of a core
// busy; with the doubling they ask about 30 times a second, and the first message after a
// quiet spell waits at most kMaxIdleWait.
constexpr milliseconds kIdleWait{1};
constexpr milliseconds kMaxIdleWait{32};
// How often the member looks whether its topics' partition counts changed.
constexpr milliseconds kMetadataEvery{1000};
// A member whose join or heartbeat failed tries again after this.
constexpr milliseconds kRetryBackoff{200};

// A Kafka error code for a log line or a Status.
std::string CodeText(ErrorCode code) {
  return fmt::format("Kafka error code {}", static_cast<int>(code));
}

// The comma-separated names of a list property.
std::vector<std::string> SplitList(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    out.emplace_back(Trim(text.substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

// A librdkafka property of the pipeline as a positive whole number (milliseconds), or
// `fallback`: InvalidArgument for anything else (librdkafka refuses it on the Kafka path).
Result<int32_t> IntProperty(const KafkaSourceConfig& c, const char* name, int32_t fallback) {
  auto it = c.properties.find(name);
  if (it == c.properties.end()) return fallback;
  int32_t v = 0;
  const std::string& text = it->second;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 1) {
    return InvalidArgumentError("source.kafka.properties.{}: '{}' is not a positive whole number",
                                name, text);
  }
  return v;
}

}  // namespace

Result<std::unique_ptr<InProcessSource>> InProcessSource::Create(const KafkaSourceConfig& config,
                                                                 std::string pipeline,
                                                                 SourceCounters counters,
                                                                 InProcessSourceOptions options) {
  Settings s;
  ASSIGN_OR_RETURN(s.session_timeout_ms,
                   IntProperty(config, "session.timeout.ms", s.session_timeout_ms));
  ASSIGN_OR_RETURN(s.rebalance_timeout_ms,
                   IntProperty(config, "max.poll.interval.ms", s.rebalance_timeout_ms));
  ASSIGN_OR_RETURN(s.heartbeat_interval_ms,
                   IntProperty(config, "heartbeat.interval.ms", s.heartbeat_interval_ms));
  if (auto it = config.properties.find("partition.assignment.strategy");
      it != config.properties.end()) {
    s.assignors.clear();
    bool eager = false;
    for (const std::string& name : SplitList(it->second)) {
      if (name == "range" || name == "roundrobin") {
        eager = true;
        s.assignors.push_back(name);
      } else if (name == "cooperative-sticky") {
        s.cooperative = true;
        s.assignors.push_back(name);
      } else if (!name.empty()) {
        return InvalidArgumentError(
            "partition.assignment.strategy {}: the in-process source offers range, "
            "roundrobin and cooperative-sticky (set source.kafka.in_process: false for "
            "librdkafka's others)",
            name);
      }
    }
    if (eager && s.cooperative) {
      // As librdkafka: one rebalance protocol per member.
      return InvalidArgumentError(
          "partition.assignment.strategy {}: eager assignors (range, roundrobin) and "
          "cooperative-sticky cannot be mixed",
          it->second);
    }
    if (s.assignors.empty()) s.assignors = {"range", "roundrobin"};
  }
  if (auto it = config.properties.find("isolation.level"); it != config.properties.end()) {
    s.read_committed = it->second != "read_uncommitted";
  }
  // The settings first: their errors hold wherever the pipeline runs.
  if (options.kafka == nullptr || !options.kafka->available()) {
    return FailedPreconditionError(
        "the broker cannot serve in-process reads here (its server is not running)");
  }
  for (const std::string& t : config.topics) {
    Result<int32_t> n = options.kafka->PartitionCount(t);
    if (!n.ok()) {
      SLUICE_LOG(kLog, kWarn, "pipeline {}: topic {}: {} (it gets partitions once it exists)",
                 pipeline, t, n.status().message());
    }
  }
  return std::unique_ptr<InProcessSource>(
      new InProcessSource(config, std::move(pipeline), counters, std::move(options), s));
}

InProcessSource::InProcessSource(const KafkaSourceConfig& config, std::string pipeline,
                                 SourceCounters counters, InProcessSourceOptions options,
                                 Settings settings)
    : config_(config),
      pipeline_(std::move(pipeline)),
      counters_(counters),
      options_(std::move(options)),
      settings_(std::move(settings)),
      client_(std::make_unique<broker::InProcessClient>(
          options_.kafka, options_.principal,
          milliseconds(settings_.rebalance_timeout_ms) + milliseconds(10000))),
      topic_names_(config.topics) {}

InProcessSource::~InProcessSource() { Close(); }

Status InProcessSource::Start(SourceListener* listener, bool arrivals) {
  listener_ = listener;
  arrivals_ = arrivals;
  SLUICE_LOG(kLog, kInfo, "pipeline {}: source in-process (group {}, topics {}{})", pipeline_,
             config_.group_id, fmt::join(config_.topics, ","),
             options_.kafka->cluster()
                 ? "; this broker's partitions read in-process, the others' fetched from "
                   "their leaders"
                 : "");
  member_ = std::thread([this] { MemberLoop(); });
  prefetcher_ = std::thread([this] { PrefetchLoop(); });
  pthread_setname_np(prefetcher_.native_handle(), "sluice-prefetch");
  return Status::OK();
}

// ---- the prefetch thread -----------------------------------------------------------------

void InProcessSource::PrefetchLoop() {
  std::unique_lock lock(prefetch_mu_);
  for (;;) {
    prefetch_cv_.wait(lock, [this] { return prefetch_stop_ || prefetch_wanted_; });
    if (prefetch_stop_) return;
    prefetch_wanted_ = false;
    prefetch_running_ = true;
    lock.unlock();
    FetchOnce();
    lock.lock();
    prefetch_running_ = false;
    prefetch_cv_.notify_all();
  }
}

void InProcessSource::StartPrefetch() {
  std::lock_guard lock(prefetch_mu_);
  if (prefetch_stop_ || !prefetcher_.joinable()) return;
  prefetch_wanted_ = true;
  prefetch_cv_.notify_all();
}

void InProcessSource::BatchDecoded() {
  if (!prefetch_due_) return;
  prefetch_due_ = false;
  StartPrefetch();
}

void InProcessSource::WaitPrefetch() const {
  std::unique_lock lock(prefetch_mu_);
  prefetch_cv_.wait(lock, [this] { return !prefetch_wanted_ && !prefetch_running_; });
}

void InProcessSource::DeliverHeard() {
  if (arrivals_) {
    for (const Arrival& a : heard_) listener_->Heard(*a.topic, a.partition, a.at);
  }
  heard_.clear();
}

// ---- the member's thread -----------------------------------------------------------------

void InProcessSource::MemberLoop() {
  bool joined = false;
  auto next_heartbeat = Clock::now();
  while (true) {
    {
      std::unique_lock lock(shared_.mu);
      if (shared_.stop) break;
    }
    if (!joined) {
      Status st = JoinAndSync();
      if (st.ok() && rejoin_now_) {
        // Cooperative: partitions were taken away; the group rebalances again so that
        // their new owners get them (KIP-429).
        rejoin_now_ = false;
        continue;
      }
      if (st.ok()) {
        joined = true;
        next_heartbeat = Clock::now() + milliseconds(settings_.heartbeat_interval_ms);
        continue;
      }
      if (stopping_) break;  // the join was given up for the stop
      SLUICE_LOG(kLog, kWarn, "pipeline {}: joining group {}: {}", pipeline_, config_.group_id,
                 st.message());
      counters_.errors->Inc();
      std::unique_lock lock(shared_.mu);
      shared_.cv.wait_for(lock, kRetryBackoff, [this] { return shared_.stop; });
      continue;
    }
    {
      // Wakes at the next heartbeat, and every second to look at the topics' metadata.
      std::unique_lock lock(shared_.mu);
      shared_.cv.wait_until(lock, std::min(next_heartbeat, Clock::now() + kMetadataEvery),
                            [this] { return shared_.stop; });
      if (shared_.stop) break;
    }
    if (TopicsChanged()) {
      // A subscribed topic appeared or grew: rejoin, so the leader assigns its partitions
      // (as librdkafka and the Java client do on a metadata change).
      SLUICE_LOG(kLog, kInfo, "pipeline {}: the topics' partitions changed: rejoining group {}",
                 pipeline_, config_.group_id);
      if (!settings_.cooperative) WaitRevocationAck();
      joined = false;
      continue;
    }
    if (Clock::now() < next_heartbeat) continue;
    next_heartbeat = Clock::now() + milliseconds(settings_.heartbeat_interval_ms);
    kafka::HeartbeatRequest hb;
    hb.group_id = config_.group_id;
    {
      std::lock_guard lock(shared_.mu);
      hb.generation_id = shared_.generation;
      hb.member_id = shared_.member_id;
    }
    Result<kafka::HeartbeatResponse> r = client_->Heartbeat(hb, kRequestTimeout, &stopping_);
    if (!r.ok()) {
      SLUICE_LOG(kLog, kWarn, "pipeline {}: heartbeat: {}", pipeline_, r.status().message());
      continue;
    }
    switch (r->error_code) {
      case ErrorCode::kNone:
        break;
      case ErrorCode::kRebalanceInProgress:
        // Eager: every partition is given up (the runner finishes its batch), then rejoin.
        // Cooperative: rejoin holding them; the sync says which to give up.
        if (!settings_.cooperative) WaitRevocationAck();
        joined = false;
        break;
      case ErrorCode::kUnknownMemberId:
      case ErrorCode::kIllegalGeneration:
      case ErrorCode::kFencedInstanceId: {
        SLUICE_LOG(kLog, kWarn, "pipeline {}: the group's membership was lost ({}): rejoining",
                   pipeline_, CodeText(r->error_code));
        owned_.clear();
        std::lock_guard lock(shared_.mu);
        shared_.lost = true;
        if (r->error_code == ErrorCode::kUnknownMemberId) shared_.member_id.clear();
        shared_.generation = -1;
        joined = false;
        break;
      }
      default:
        SLUICE_LOG(kLog, kWarn, "pipeline {}: heartbeat: {}", pipeline_, CodeText(r->error_code));
        break;
    }
  }
  // Leaving: the group rebalances at once instead of after the session timeout.
  kafka::LeaveGroupRequest leave;
  leave.group_id = config_.group_id;
  {
    std::lock_guard lock(shared_.mu);
    if (shared_.member_id.empty()) return;
    leave.members.push_back(
        {shared_.member_id, std::nullopt, std::string("the pipeline stops"), {}});
  }
  Result<kafka::LeaveGroupResponse> left = client_->LeaveGroup(leave, milliseconds(5000));
  if (!left.ok()) {
    SLUICE_LOG(kLog, kWarn, "pipeline {}: leaving group {}: {}", pipeline_, config_.group_id,
               left.status().message());
  }
}

// Waits until the runner gave its partitions up (or the rebalance timeout passed).
void InProcessSource::WaitRevocationAck(std::optional<std::set<Key>> only) {
  if (!only.has_value()) {
    owned_.clear();
  } else {
    std::erase_if(owned_, [&](const TopicPartition& tp) {
      return only->count({tp.topic, tp.partition}) > 0;
    });
  }
  std::unique_lock lock(shared_.mu);
  shared_.revoke = true;
  shared_.revoke_only = std::move(only);
  shared_.revoke_reported = false;
  shared_.revoke_acked = false;
  // The runner finishes its batch (a sink's flush, a commit) meanwhile; the member keeps
  // its session alive with heartbeats, as the Java consumer's heartbeat thread does, so a
  // batch longer than session.timeout.ms does not cost the membership. Their answers do
  // not matter here: what they say comes again after the revocation.
  const auto deadline = Clock::now() + milliseconds(settings_.rebalance_timeout_ms);
  auto done = [this] { return shared_.revoke_acked || shared_.stop; };
  while (!done() && Clock::now() < deadline) {
    const auto beat =
        std::min(deadline, Clock::now() + milliseconds(settings_.heartbeat_interval_ms));
    if (shared_.cv.wait_until(lock, beat, done)) break;
    if (shared_.member_id.empty() || Clock::now() >= deadline) continue;
    kafka::HeartbeatRequest hb;
    hb.group_id = config_.group_id;
    hb.generation_id = shared_.generation;
    hb.member_id = shared_.member_id;
    lock.unlock();
    (void)client_->Heartbeat(hb, kRequestTimeout, &stopping_);
    lock.lock();
  }
  shared_.revoke = false;
}

std::map<std::string, int32_t> InProcessSource::TopicCounts() const {
  std::map<std::string, int32_t> counts;
  for (const std::string& t : config_.topics) {
    Result<int32_t> n = client_->PartitionCount(t);
    counts[t] = n.ok() ? *n : 0;
  }
  return counts;
}

bool InProcessSource::TopicsChanged() const { return TopicCounts() != counts_at_join_; }

Status InProcessSource::JoinAndSync() {
  counts_at_join_ = TopicCounts();
  kafka::group::Subscription sub;
  sub.topics = config_.topics;
  std::vector<uint8_t> metadata;
  if (settings_.cooperative) {
    // What it holds and since when, for the cooperative-sticky leader (KIP-429).
    std::vector<kafka::group::TopicPartition> owned;
    for (const TopicPartition& tp : owned_) owned.push_back({tp.topic, tp.partition});
    sub.owned_partitions = kafka::group::GroupByTopic(owned);
    std::lock_guard lock(shared_.mu);
    sub.generation_id = shared_.generation;
    metadata = sub.Encode();
  } else {
    metadata = sub.Encode(0);
  }
  kafka::JoinGroupRequest join;
  join.group_id = config_.group_id;
  join.session_timeout_ms = settings_.session_timeout_ms;
  join.rebalance_timeout_ms = settings_.rebalance_timeout_ms;
  join.protocol_type = kProtocolType;
  for (const std::string& a : settings_.assignors) join.protocols.push_back({a, metadata, {}});
  {
    std::lock_guard lock(shared_.mu);
    join.member_id = shared_.member_id;
  }
  const milliseconds join_timeout(settings_.rebalance_timeout_ms + 5000);
  ASSIGN_OR_RETURN(kafka::JoinGroupResponse joined,
                   client_->JoinGroup(join, join_timeout, &stopping_));
  if (joined.error_code == ErrorCode::kMemberIdRequired) {
    // KIP-394: the first join gets an id and comes again with it.
    join.member_id = joined.member_id;
    {
      std::lock_guard lock(shared_.mu);
      shared_.member_id = joined.member_id;
    }
    ASSIGN_OR_RETURN(joined, client_->JoinGroup(join, join_timeout, &stopping_));
  }
  if (joined.error_code != ErrorCode::kNone) {
    if (joined.error_code == ErrorCode::kUnknownMemberId) {
      std::lock_guard lock(shared_.mu);
      shared_.member_id.clear();
    }
    return AbortedError("JoinGroup: {}", CodeText(joined.error_code));
  }
  {
    std::lock_guard lock(shared_.mu);
    shared_.member_id = joined.member_id;
    shared_.generation = joined.generation_id;
  }
  kafka::SyncGroupRequest sync;
  sync.group_id = config_.group_id;
  sync.generation_id = joined.generation_id;
  sync.member_id = joined.member_id;
  sync.protocol_type = kProtocolType;
  sync.protocol_name = joined.protocol_name;
  if (joined.leader == joined.member_id) {
    // The leader runs the assignor the members agreed on.
    ASSIGN_OR_RETURN(sync.assignments, LeaderAssignments(joined));
  }
  ASSIGN_OR_RETURN(kafka::SyncGroupResponse synced,
                   client_->SyncGroup(sync, kRequestTimeout, &stopping_));
  if (synced.error_code != ErrorCode::kNone) {
    return AbortedError("SyncGroup: {}", CodeText(synced.error_code));
  }
  std::vector<TopicPartition> partitions;
  if (!synced.assignment.empty()) {
    ASSIGN_OR_RETURN(kafka::group::Assignment a,
                     kafka::group::Assignment::Decode(synced.assignment));
    for (const auto& [topic, parts] : a.assigned_partitions) {
      for (int32_t p : parts) partitions.push_back({topic, p, kafka::client::kOffsetInvalid});
    }
  }
  std::string change;
  if (settings_.cooperative) {
    std::set<Key> now;
    for (const TopicPartition& tp : partitions) now.insert({tp.topic, tp.partition});
    std::set<Key> gone;
    size_t kept = 0;
    for (const TopicPartition& tp : owned_) {
      if (now.count({tp.topic, tp.partition}) > 0) {
        ++kept;
      } else {
        gone.insert({tp.topic, tp.partition});
      }
    }
    change = fmt::format("; cooperative: keeps {}, gives up {}, gets {}", kept, gone.size(),
                         partitions.size() - kept);
    if (!gone.empty()) {
      // Given up before anything new is taken, and the group is asked to rebalance again.
      rejoin_now_ = true;
      WaitRevocationAck(std::move(gone));
    }
  }
  SLUICE_LOG(kLog, kInfo, "pipeline {}: joined group {} (generation {}, {} partitions{}{})",
             pipeline_, config_.group_id, joined.generation_id, partitions.size(),
             joined.leader == joined.member_id ? ", leader" : "", change);
  owned_ = partitions;
  std::lock_guard lock(shared_.mu);
  shared_.assignment = std::move(partitions);
  return Status::OK();
}

// The leader's SyncGroup: every member's assignment by the protocol the group chose, over
// the partitions the members' topics have now.
Result<std::vector<kafka::SyncGroupRequest::Assignment>> InProcessSource::LeaderAssignments(
    const kafka::JoinGroupResponse& joined) {
  std::vector<kafka::group::Member> members;
  std::map<std::string, int32_t> partitions;
  for (const auto& m : joined.members) {
    Result<kafka::group::Subscription> sub = kafka::group::Subscription::Decode(m.metadata);
    if (!sub.ok()) {
      // A member whose metadata does not decode gets nothing (Kafka's leader would fail
      // the rebalance; the others keep reading).
      SLUICE_LOG(kLog, kWarn, "pipeline {}: member {}'s subscription: {}", pipeline_, m.member_id,
                 sub.status().message());
      members.push_back({m.member_id, m.group_instance_id, {}});
      continue;
    }
    for (const std::string& t : sub->topics) {
      if (partitions.count(t) > 0) continue;
      Result<int32_t> n = client_->PartitionCount(t);
      if (n.ok()) partitions[t] = *n;
    }
    members.push_back({m.member_id, m.group_instance_id, std::move(sub).value()});
  }
  ASSIGN_OR_RETURN(auto assigned,
                   kafka::group::Assign(joined.protocol_name.value_or(""), members, partitions));
  std::vector<kafka::SyncGroupRequest::Assignment> out;
  for (auto& [member, assignment] : assigned) {
    out.push_back({member, assignment.Encode(0), {}});
  }
  return out;
}

// ---- the runner's thread -----------------------------------------------------------------

SourceStep InProcessSource::NextBatch(size_t max_messages, SteadyTime deadline) {
  WaitPrefetch();
  DeliverHeard();
  SourceStep step;
  std::optional<std::vector<TopicPartition>> assignment;
  {
    std::lock_guard lock(shared_.mu);
    if (shared_.lost) {
      shared_.lost = false;
      step.event.kind = AssignmentEvent::Kind::kLost;
      for (const auto& [key, pos] : positions_) {
        step.event.partitions.push_back({key.first, key.second, kafka::client::kOffsetInvalid});
      }
      DropAll();
      pending_.clear();
      positions_.clear();
      if (!step.event.partitions.empty()) return step;
      step.event = AssignmentEvent{};  // nothing was assigned: no event for the runner
    }
    if (shared_.revoke && !shared_.revoke_reported) {
      shared_.revoke_reported = true;
      step.event.kind = AssignmentEvent::Kind::kRevoked;
      revoking_ = shared_.revoke_only;
      for (const auto& [key, pos] : positions_) {
        if (revoking_.has_value() && revoking_->count(key) == 0) continue;
        step.event.partitions.push_back({key.first, key.second, kafka::client::kOffsetInvalid});
      }
      // What was read ahead of the batch in hand goes (its next owner reads it again).
      while (ahead_.size() > ahead_taken_chunks_) {
        Fetched& last = ahead_.back();
        if (last.taken > 0) {
          last.records.resize(last.taken);
          ++ahead_taken_chunks_;
          break;
        }
        ahead_.pop_back();
      }
      // The partitions kept read again from what no batch took yet.
      for (auto& [key, pos] : positions_) pos.next = pos.consumed;
      if (!step.event.partitions.empty()) return step;
      revoking_.reset();
      step.event = AssignmentEvent{};  // nothing to give up: acknowledged at once
      shared_.revoke_acked = true;
      shared_.cv.notify_all();
    }
    assignment = std::move(shared_.assignment);
    shared_.assignment.reset();
  }
  if (assignment) ApplyAssignment(std::move(*assignment));

  Take(max_messages);
  const auto read_ahead_bound =
      static_cast<uint64_t>(config_.fetch.max_bytes * config_.fetch.prefetch);
  if (pending_.size() < max_messages && ReadAheadBytes() < read_ahead_bound) {
    if (!positions_.empty() && FetchOnce()) {
      idle_wait_ = kIdleWait;
      DeliverHeard();
      Take(max_messages);
    } else if (Clock::now() < deadline) {
      DeliverHeard();
      std::this_thread::sleep_for(std::min<Clock::duration>(idle_wait_, deadline - Clock::now()));
      idle_wait_ = std::min(idle_wait_ * 2, kMaxIdleWait);
    }
  }
  step.ready = pending_.size() >= max_messages || Clock::now() >= deadline;
  // A batch goes to the runner: the next fetch runs once it is decoded, while its SQL and
  // sink run (docs/design/0023 decision 22).
  prefetch_due_ =
      step.ready && !pending_.empty() && !positions_.empty() && ReadAheadBytes() < read_ahead_bound;
  return step;
}

void InProcessSource::ApplyAssignment(std::vector<TopicPartition> partitions) {
  // The partitions held already keep their positions (a cooperative rebalance; after an
  // eager one none is held). Those no longer assigned were revoked before.
  std::set<Key> now;
  std::vector<TopicPartition> added;
  for (const TopicPartition& tp : partitions) {
    now.insert({tp.topic, tp.partition});
    if (positions_.count({tp.topic, tp.partition}) == 0) added.push_back(tp);
  }
  std::erase_if(positions_, [&](const auto& entry) { return now.count(entry.first) == 0; });
  std::erase_if(first_read_, [&](const auto& entry) { return now.count(entry.first) == 0; });
  if (added.empty()) return;
  // Positions the listener does not set come from the group's committed offsets, then
  // auto_offset_reset.
  listener_->Assigning(added);
  Status st = ResolvePositions(added);
  // A coordinator moving, loading or unreachable, or an offset commit still in a
  // transaction, is asked again (as the Java consumer's poll does) rather than taken for
  // "no committed offset", which would skip or repeat records by auto_offset_reset.
  auto last_log = Clock::now();
  while (!st.ok() && st.code() == StatusCode::kAborted && !stopping_) {
    if (Clock::now() - last_log > std::chrono::seconds(10)) {
      last_log = Clock::now();
      SLUICE_LOG(kLog, kWarn, "pipeline {}: committed offsets: {} (asking again)", pipeline_,
                 st.message());
    }
    std::this_thread::sleep_for(kRetryBackoff);
    st = ResolvePositions(added);
  }
  if (!st.ok()) {
    counters_.errors->Inc();
    SLUICE_LOG(kLog, kWarn, "pipeline {}: committed offsets: {} (auto_offset_reset applies)",
               pipeline_, st.message());
  }
  for (const TopicPartition& tp : added) {
    Position pos;
    pos.next = tp.offset >= 0 ? tp.offset : -1;
    pos.consumed = pos.next;
    positions_[{tp.topic, tp.partition}] = pos;
    if (std::find(topic_names_.begin(), topic_names_.end(), tp.topic) == topic_names_.end()) {
      topic_names_.push_back(tp.topic);
    }
  }
}

Status InProcessSource::ResolvePositions(std::vector<TopicPartition>& partitions) {
  kafka::OffsetFetchRequest req;
  req.group_id = config_.group_id;
  req.require_stable = settings_.read_committed;
  std::map<std::string, std::vector<int32_t>> wanted;
  for (const TopicPartition& tp : partitions) {
    if (tp.offset < 0) wanted[tp.topic].push_back(tp.partition);
  }
  if (wanted.empty()) return Status::OK();
  req.topics.emplace();
  for (auto& [topic, parts] : wanted) req.topics->push_back({topic, parts, {}});
  // Aborted: worth asking again (no answer, a coordinator moving or loading, a commit in
  // a transaction not finished); FailedPrecondition: not.
  Result<kafka::OffsetFetchResponse> asked = client_->OffsetFetch(req, kRequestTimeout);
  if (!asked.ok()) {
    if (asked.status().code() == StatusCode::kFailedPrecondition) return asked.status();
    return AbortedError("OffsetFetch: {}", asked.status().message());
  }
  const kafka::OffsetFetchResponse& resp = *asked;
  if (resp.error_code != ErrorCode::kNone) {
    const bool again = resp.error_code == ErrorCode::kNotCoordinator ||
                       resp.error_code == ErrorCode::kCoordinatorNotAvailable ||
                       resp.error_code == ErrorCode::kCoordinatorLoadInProgress;
    return again ? AbortedError("OffsetFetch: {}", CodeText(resp.error_code))
                 : FailedPreconditionError("OffsetFetch: {}", CodeText(resp.error_code));
  }
  bool unstable = false;
  for (const auto& t : resp.topics) {
    for (const auto& p : t.partitions) {
      if (p.error_code == ErrorCode::kUnstableOffsetCommit) unstable = true;
      if (p.error_code != ErrorCode::kNone || p.committed_offset < 0) continue;
      for (TopicPartition& tp : partitions) {
        if (tp.topic == t.name && tp.partition == p.partition_index && tp.offset < 0) {
          tp.offset = p.committed_offset;
        }
      }
    }
  }
  if (unstable) {
    return AbortedError("OffsetFetch: a transaction's offset commit is not complete yet");
  }
  return Status::OK();
}

bool InProcessSource::FetchOnce() {
  kafka::FetchRequest req;
  req.replica_id = -1;
  req.max_wait_ms = 0;
  req.min_bytes = 1;
  req.max_bytes = static_cast<int32_t>(config_.fetch.max_bytes);
  req.isolation_level = settings_.read_committed ? 1 : 0;
  std::map<std::string, size_t> topic_index;
  for (const auto& [key, pos] : positions_) {
    auto [it, added] = topic_index.emplace(key.first, req.topics.size());
    if (added) {
      req.topics.emplace_back();
      req.topics.back().topic = key.first;
    }
    kafka::FetchRequest::FetchPartition fp;
    fp.partition = key.second;
    // Unknown yet: -1 is out of range, which answers the log's start and end (the reset).
    fp.fetch_offset = pos.next;
    fp.partition_max_bytes = static_cast<int32_t>(config_.fetch.max_partition_bytes);
    req.topics[it->second].partitions.push_back(fp);
  }
  Result<broker::InProcessKafka::FetchAnswer> answer =
      client_->Fetch(std::move(req), kRequestTimeout);
  if (!answer.ok()) {
    counters_.errors->Inc();
    SLUICE_LOG(kLog, kWarn, "pipeline {}: in-process fetch: {}", pipeline_,
               answer.status().message());
    return false;
  }
  Fetched chunk;
  uint64_t total = 0;
  for (size_t i = 0; i < answer->pieces(); ++i) total += answer->piece_size(i);
  chunk.bytes = std::make_unique_for_overwrite<uint8_t[]>(total);
  chunk.size = total;
  // A record of a fetch takes some tens of bytes at least: no regrowth for most fetches.
  chunk.records.reserve(total / 128 + 16);
  std::vector<uint64_t> at;  // where each piece starts in chunk.bytes
  uint64_t offset = 0;
  for (size_t i = 0; i < answer->pieces(); ++i) {
    at.push_back(offset);
    if (Status st = answer->ReadPiece(i, chunk.bytes.get() + offset); !st.ok()) {
      counters_.errors->Inc();
      SLUICE_LOG(kLog, kWarn, "pipeline {}: {}", pipeline_, st.message());
      return false;
    }
    offset += answer->piece_size(i);
  }
  const auto now = Clock::now();
  bool any = false;
  for (const auto& t : answer->response.responses) {
    const std::string* topic = nullptr;
    for (const std::string& name : topic_names_) {
      if (name == t.topic) topic = &name;
    }
    if (topic == nullptr) continue;
    for (const auto& p : t.partitions) {
      auto it = positions_.find({t.topic, p.partition_index});
      if (it == positions_.end()) continue;
      Position& pos = it->second;
      if (p.high_watermark >= 0) pos.high_watermark = p.high_watermark;
      if (p.last_stable_offset >= 0) pos.last_stable_offset = p.last_stable_offset;
      if (p.error_code == ErrorCode::kOffsetOutOfRange) {
        // No position yet, or the records are gone (retention): auto_offset_reset.
        const int64_t reset =
            config_.auto_offset_reset == AutoOffsetReset::kEarliest
                ? p.log_start_offset
                : (settings_.read_committed ? p.last_stable_offset : p.high_watermark);
        if (reset >= 0) {
          if (pos.next >= 0) {
            SLUICE_LOG(kLog, kWarn, "pipeline {}: {}-{}: offset {} is out of range; reset to {}",
                       pipeline_, t.topic, p.partition_index, pos.next, reset);
          }
          // Nothing of it read ahead (the read-ahead ends where the fetch began): the next
          // batch starts at the reset too.
          if (pos.consumed < 0 || pos.consumed == pos.next) pos.consumed = reset;
          pos.next = reset;
        }
        continue;
      }
      if (p.error_code != ErrorCode::kNone) {
        counters_.errors->Inc();
        if (now - last_error_log_ > std::chrono::seconds(10)) {
          last_error_log_ = now;
          SLUICE_LOG(kLog, kWarn, "pipeline {}: fetch {}-{}: {}", pipeline_, t.topic,
                     p.partition_index, CodeText(p.error_code));
        }
        continue;
      }
      if (!p.records.is_splice) continue;
      const uint32_t file = p.records.splice_token;
      std::span<const uint8_t> bytes(chunk.bytes.get() + at[file], answer->piece_size(file));
      std::vector<kafka::local::AbortedTransaction> aborted;
      if (p.aborted_transactions) {
        for (const auto& a : *p.aborted_transactions) {
          aborted.push_back({a.producer_id, a.first_offset});
        }
      }
      const size_t before = chunk.records.size();
      const kafka::local::DecodeResult decoded =
          decoder_.Decode({.topic = *topic,
                           .partition = p.partition_index,
                           .bytes = bytes,
                           .fetch_offset = pos.next,
                           .read_committed = settings_.read_committed,
                           .aborted = aborted},
                          &chunk.records);
      chunk.generation = std::max(chunk.generation, decoded.generation);
      if (!decoded.status.ok()) {
        // The batches before the bad one count; the bad one is looked at again (a
        // consumer stops at a corrupt batch).
        counters_.errors->Inc();
        if (now - last_error_log_ > std::chrono::seconds(10)) {
          last_error_log_ = now;
          SLUICE_LOG(kLog, kWarn, "pipeline {}: {}-{} at offset {}: {}", pipeline_, t.topic,
                     p.partition_index, pos.next, decoded.status.message());
        }
      }
      if (decoded.next_offset > pos.next) pos.next = decoded.next_offset;
      if (chunk.records.size() > before) {
        any = true;
        first_read_.emplace(std::make_pair(t.topic, p.partition_index),
                            chunk.records[before].offset);
        if (arrivals_) heard_.push_back({topic, p.partition_index, now});
      }
    }
  }
  // An empty chunk's buffers (batches all skipped) go with the next chunk's release.
  if (chunk.records.empty()) return false;
  ahead_.push_back(std::move(chunk));
  return any;
}

void InProcessSource::Take(size_t max_messages) {
  uint64_t records = 0;
  uint64_t bytes = 0;
  size_t i = ahead_taken_chunks_;
  // A fetch's records come partition by partition: the position is looked up once a run.
  Position* pos = nullptr;
  std::string_view pos_topic;
  int32_t pos_partition = -1;
  while (pending_.size() < max_messages && i < ahead_.size()) {
    Fetched& f = ahead_[i];
    while (pending_.size() < max_messages && f.taken < f.records.size()) {
      const Message& m = f.records[f.taken++];
      pending_.push_back(m);
      bytes += m.value.size();
      ++records;
      if (m.partition != pos_partition || m.topic != pos_topic) {
        auto it = positions_.find({std::string(m.topic), m.partition});
        pos = it == positions_.end() ? nullptr : &it->second;
        pos_topic = m.topic;
        pos_partition = m.partition;
      }
      if (pos != nullptr) pos->consumed = m.offset + 1;
    }
    if (f.taken == f.records.size()) ++i;
  }
  ahead_taken_chunks_ = i;
  if (records > 0) {
    counters_.messages_in->Inc(records);
    counters_.bytes_in->Inc(bytes);
    counters_.messages_in_stat->fetch_add(records, std::memory_order_relaxed);
  }
  counters_.read_ahead->Set(static_cast<double>(ReadAheadBytes()));
}

uint64_t InProcessSource::ReadAheadBytes() const {
  uint64_t n = 0;
  for (size_t i = ahead_taken_chunks_; i < ahead_.size(); ++i) n += ahead_[i].size;
  return n;
}

void InProcessSource::BatchDone() {
  WaitPrefetch();
  pending_.clear();
  // Chunks whose every record went into batches are released, with the decoder's buffers
  // their records used.
  uint64_t released = 0;
  while (ahead_taken_chunks_ > 0) {
    released = ahead_.front().generation;
    ahead_.pop_front();
    --ahead_taken_chunks_;
  }
  if (released > 0) decoder_.ReleaseUpTo(released);
}

void InProcessSource::DropAll() {
  ahead_.clear();
  ahead_taken_chunks_ = 0;
  decoder_.ReleaseAll();
}

void InProcessSource::AcknowledgeRevocation() {
  WaitPrefetch();
  heard_.clear();
  pending_.clear();
  DropAll();
  if (revoking_.has_value()) {
    for (const Key& key : *revoking_) {
      positions_.erase(key);
      first_read_.erase(key);
    }
    for (auto& [key, pos] : positions_) pos.next = pos.consumed;
  } else {
    positions_.clear();
  }
  revoking_.reset();
  std::lock_guard lock(shared_.mu);
  shared_.revoke_acked = true;
  shared_.cv.notify_all();
}

Status InProcessSource::Commit(const std::vector<TopicPartition>& offsets, CommitMode) {
  if (offsets.empty()) return Status::OK();
  kafka::OffsetCommitRequest req;
  req.group_id = config_.group_id;
  {
    std::lock_guard lock(shared_.mu);
    req.generation_id_or_member_epoch = shared_.generation;
    req.member_id = shared_.member_id;
  }
  std::map<std::string, size_t> index;
  for (const TopicPartition& tp : offsets) {
    auto [it, added] = index.emplace(tp.topic, req.topics.size());
    if (added) req.topics.push_back({tp.topic, {}, {}});
    kafka::OffsetCommitRequest::Partition p;
    p.partition_index = tp.partition;
    p.committed_offset = tp.offset;
    req.topics[it->second].partitions.push_back(p);
  }
  // Both modes wait: a commit is one post to the coordinator and its write (0023).
  ASSIGN_OR_RETURN(kafka::OffsetCommitResponse resp, client_->OffsetCommit(req, kRequestTimeout));
  for (const auto& t : resp.topics) {
    for (const auto& p : t.partitions) {
      if (p.error_code != ErrorCode::kNone) {
        return AbortedError("commit of {}-{}: {}", t.name, p.partition_index,
                            CodeText(p.error_code));
      }
    }
  }
  return Status::OK();
}

Result<std::vector<kafka::client::PartitionLag>> InProcessSource::Lag() const {
  WaitPrefetch();
  std::vector<kafka::client::PartitionLag> out;
  for (const auto& [key, pos] : positions_) {
    kafka::client::PartitionLag l;
    l.topic = key.first;
    l.partition = key.second;
    l.position = pos.next;
    l.high_watermark = settings_.read_committed ? pos.last_stable_offset : pos.high_watermark;
    out.push_back(std::move(l));
  }
  return out;
}

Result<kafka::client::GroupMetadata> InProcessSource::GroupMetadata() const {
  std::lock_guard lock(shared_.mu);
  if (shared_.member_id.empty() || shared_.generation < 0) {
    return AbortedError("the in-process member is not in the group right now");
  }
  return kafka::client::GroupMetadata::Make(config_.group_id, shared_.generation,
                                            shared_.member_id);
}

Status InProcessSource::Rewind(std::chrono::milliseconds timeout) {
  WaitPrefetch();
  heard_.clear();
  pending_.clear();
  DropAll();
  std::vector<TopicPartition> partitions;
  for (const auto& [key, pos] : positions_) {
    partitions.push_back({key.first, key.second, kafka::client::kOffsetInvalid});
  }
  // What is worth asking again (a coordinator moving) is, within the timeout.
  const auto deadline = Clock::now() + timeout;
  Status st = ResolvePositions(partitions);
  while (!st.ok() && st.code() == StatusCode::kAborted && !stopping_ && Clock::now() < deadline) {
    std::this_thread::sleep_for(kRetryBackoff);
    st = ResolvePositions(partitions);
  }
  RETURN_IF_ERROR(st);
  for (const TopicPartition& tp : partitions) {
    Position& pos = positions_[{tp.topic, tp.partition}];
    if (tp.offset >= 0) {
      pos.next = tp.offset;
    } else if (auto it = first_read_.find({tp.topic, tp.partition}); it != first_read_.end()) {
      pos.next = it->second;
    }
    pos.consumed = pos.next;
  }
  return Status::OK();
}

void InProcessSource::Close() {
  stopping_ = true;  // a JoinGroup waiting for a rebalance gives up
  {
    std::lock_guard lock(shared_.mu);
    shared_.stop = true;
    shared_.cv.notify_all();
  }
  if (member_.joinable()) member_.join();
  {
    std::lock_guard lock(prefetch_mu_);
    prefetch_stop_ = true;
    prefetch_wanted_ = false;
    prefetch_cv_.notify_all();
  }
  if (prefetcher_.joinable()) prefetcher_.join();
  heard_.clear();
  pending_.clear();
  DropAll();
}

}  // namespace sluice::pipeline
