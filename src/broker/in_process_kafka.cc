// InProcessKafka (in_process_kafka.h): FetchOnce posted to a shard, the coordinator's
// requests behind the group handlers' checks, each answer handed back through a promise.
#include "broker/in_process_kafka.h"

#include <future>
#include <utility>

#include "broker/coordinator_partitions.h"
#include "broker/group_coordinator.h"
#include "broker/handlers/context.h"
#include "broker/handlers/fetch.h"
#include "broker/handlers/handlers.h"

namespace sluice::broker {
namespace {

using auth::AclOperation;
using auth::ResourceType;
using kafka::ErrorCode;

// The host ACLs see for an in-process member: the loopback a local client would come from.
constexpr const char* kHost = "127.0.0.1";

// A `done` that fulfils `p` once (a shared promise: the coordinator's callbacks are
// copyable std::functions).
template <typename R>
std::function<void(R)> Fulfil(std::shared_ptr<std::promise<R>> p) {
  return [p](R r) { p->set_value(std::move(r)); };
}

}  // namespace

bool InProcessKafka::available() const { return ctx_.shards.attached(); }

Status InProcessKafka::FetchAnswer::ReadPiece(size_t i, uint8_t* into) const {
  if (i >= slices.size()) {
    const std::vector<uint8_t>& r = received[i - slices.size()];
    std::copy(r.begin(), r.end(), into);
    return Status::OK();
  }
  const storage::FileSlice& s = slices[i];
  if (s.size == 0) return Status::OK();
  ASSIGN_OR_RETURN(size_t n, s.file->ReadAt(s.position, {into, s.size}));
  if (n != s.size) return IOError("{}: short read at {}", s.file->path(), s.position);
  return Status::OK();
}

std::shared_ptr<const MetadataSnapshot> InProcessKafka::Metadata() const {
  return ctx_.shards.Published();
}

int32_t InProcessKafka::node_id() const {
  return ctx_.options.cluster.enabled() ? ctx_.options.cluster.node_id : kNodeId;
}

bool InProcessKafka::cluster() const { return ctx_.options.cluster.enabled(); }

std::shared_ptr<const InterBrokerSecurity> InProcessKafka::inter_broker_security() const {
  return ctx_.options.cluster.inter_broker_security;
}

int32_t InProcessKafka::GroupCoordinatorNode(const std::string& group) const {
  std::shared_ptr<const MetadataSnapshot> meta = ctx_.shards.Published();
  if (meta == nullptr || !meta->cluster) return node_id();
  const MetadataSnapshot::Topic* t = meta->Find("__consumer_offsets");
  if (t == nullptr) {
    // A member that never sends FindCoordinator: the topic is made as for one that does.
    handlers::CreateInternalTopicSoon(ctx_, "__consumer_offsets");
    return -1;
  }
  if (t->partitions.empty()) return -1;
  const int32_t p = CoordinatorPartitionFor(group, static_cast<int32_t>(t->partitions.size()));
  return t->partitions[static_cast<size_t>(p)].leader;
}

bool InProcessKafka::MayJoin(const std::string& principal, const std::string& group) const {
  return principal.empty() || ctx_.authorizer->For(principal, kHost)
                                  .Check(ResourceType::kGroup, group, AclOperation::kRead);
}

bool InProcessKafka::MayRead(const std::string& principal, const std::string& topic) const {
  return principal.empty() || ctx_.authorizer->For(principal, kHost)
                                  .Check(ResourceType::kTopic, topic, AclOperation::kRead);
}

Status InProcessKafka::CheckCommit(const std::string& principal,
                                   const kafka::OffsetCommitRequest& req) const {
  if (principal.empty()) return Status::OK();
  // READ on the group, then on each topic, as the handler: a refusal fails the commit
  // whole here (the member commits only what it was assigned, so one topic refused means
  // its ACLs changed under it).
  const Access access = ctx_.authorizer->For(principal, kHost);
  if (!access.Check(ResourceType::kGroup, req.group_id, AclOperation::kRead)) {
    return FailedPreconditionError("{} may not read group '{}'", principal, req.group_id);
  }
  for (const auto& t : req.topics) {
    if (!access.Check(ResourceType::kTopic, t.name, AclOperation::kRead)) {
      return FailedPreconditionError("{} may not read topic '{}'", principal, t.name);
    }
  }
  return Status::OK();
}

Status InProcessKafka::CheckOffsetFetch(const std::string& principal,
                                        const kafka::OffsetFetchRequest& req) const {
  if (principal.empty()) return Status::OK();
  const Access access = ctx_.authorizer->For(principal, kHost);
  if (!access.Check(ResourceType::kGroup, req.group_id, AclOperation::kDescribe)) {
    return FailedPreconditionError("{} may not describe group '{}'", principal, req.group_id);
  }
  if (req.topics.has_value()) {
    for (const auto& t : *req.topics) {
      if (!access.Check(ResourceType::kTopic, t.name, AclOperation::kDescribe)) {
        return FailedPreconditionError("{} may not describe topic '{}'", principal, t.name);
      }
    }
  }
  return Status::OK();
}

Result<int32_t> InProcessKafka::PartitionCount(std::string_view topic) const {
  std::shared_ptr<const MetadataSnapshot> meta = ctx_.shards.Published();
  const MetadataSnapshot::Topic* t = meta != nullptr ? meta->Find(std::string(topic)) : nullptr;
  if (t == nullptr) return NotFoundError("topic '{}' does not exist", topic);
  return t->info.partitions;
}

Result<InProcessKafka::FetchAnswer> InProcessKafka::Fetch(const std::string& principal,
                                                          kafka::FetchRequest req,
                                                          std::chrono::milliseconds timeout,
                                                          const std::atomic<bool>* cancel) {
  if (!ctx_.shards.attached()) return FailedPreconditionError("the broker's server is not running");
  const Access access =
      principal.empty() ? Access() : ctx_.authorizer->For(principal, std::string(kHost));
  auto shared = std::make_shared<const kafka::FetchRequest>(std::move(req));
  auto promise = std::make_shared<std::promise<FetchAnswer>>();
  std::future<FetchAnswer> answer = promise->get_future();
  handlers::Context* ctx = &ctx_;
  Shard& home = ctx_.shards.at(0);
  const bool posted = ctx_.shards.PostGated(home.loop, [ctx, &home, access, shared, promise] {
    handlers::FetchOnce(
        *ctx, home, access, shared, kFetchVersion, nullptr,
        [promise](kafka::FetchResponse& resp, std::vector<storage::FileSlice>& files, uint64_t) {
          promise->set_value({std::move(resp), std::move(files)});
        });
  });
  if (!posted) return FailedPreconditionError("the broker is stopping");
  return AwaitAnswer(answer, timeout, cancel, "fetch");
}

Result<std::vector<std::optional<InProcessKafka::Offsets>>> InProcessKafka::Watermarks(
    const std::string& principal, const std::vector<std::pair<std::string, int32_t>>& partitions,
    std::chrono::milliseconds timeout) {
  if (!ctx_.shards.attached()) return FailedPreconditionError("the broker's server is not running");
  const Access access =
      principal.empty() ? Access() : ctx_.authorizer->For(principal, std::string(kHost));
  std::shared_ptr<const MetadataSnapshot> meta = ctx_.shards.Published();
  // ListOffsets' checks and look-up: DESCRIBE on the topic, the owner from the metadata.
  std::vector<Target> targets;
  auto index = std::make_shared<std::vector<size_t>>();
  for (size_t i = 0; i < partitions.size(); ++i) {
    const auto& [topic, partition] = partitions[i];
    if (meta == nullptr || !access.Check(ResourceType::kTopic, topic, AclOperation::kDescribe)) {
      continue;
    }
    targets.push_back(ctx_.shards.TargetOf(meta->Find(topic), topic, partition));
    index->push_back(i);
  }
  using Answer = std::vector<std::optional<Offsets>>;
  auto out = std::make_shared<Answer>(partitions.size());
  auto promise = std::make_shared<std::promise<Answer>>();
  std::future<Answer> answer = promise->get_future();
  handlers::Context* ctx = &ctx_;
  Shard& home = ctx_.shards.at(0);
  const bool posted = ctx_.shards.PostGated(
      home.loop, [ctx, &home, targets = std::move(targets), index, out, promise]() mutable {
        const storage::FlushPolicy policy = ctx->options.flush_policy;
        ctx->shards.VisitOwners(
            home, std::move(targets),
            [policy, index, out](Partition* part, size_t k) {
              // Followers are not read, as ListOffsets answers NOT_LEADER_OR_FOLLOWER.
              if (part == nullptr || (part->replica != nullptr && !part->replica->leader())) {
                return;
              }
              const LogStart start = LogStartOf(*part);
              if (start.unknown) return;
              (*out)[(*index)[k]] = Offsets{start.start, HighWatermark(policy, *part)};
            },
            [out, promise] { promise->set_value(std::move(*out)); });
      });
  if (!posted) return FailedPreconditionError("the broker is stopping");
  return AwaitAnswer(answer, timeout, nullptr, "watermarks");
}

// A membership request (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as the group handlers
// take it: GROUP_AUTHORIZATION_FAILED without READ on the group, else `ask` hands it to the
// coordinator with the `done` that fulfils the answer.
template <typename Resp, typename Ask>
Result<Resp> InProcessKafka::Membership(const std::string& principal, const std::string& group,
                                        std::chrono::milliseconds timeout,
                                        const std::atomic<bool>* cancel, const char* what,
                                        Ask ask) {
  if (ctx_.groups == nullptr) return FailedPreconditionError("no group coordinator");
  if (!MayJoin(principal, group)) {
    Resp resp;
    resp.error_code = ErrorCode::kGroupAuthorizationFailed;
    return resp;
  }
  auto p = std::make_shared<std::promise<Resp>>();
  std::future<Resp> f = p->get_future();
  ask(Fulfil(p));
  return AwaitAnswer(f, timeout, cancel, what);
}

Result<kafka::JoinGroupResponse> InProcessKafka::JoinGroup(const std::string& principal,
                                                           kafka::JoinGroupRequest req,
                                                           std::chrono::milliseconds timeout,
                                                           const std::atomic<bool>* cancel) {
  const std::string group = req.group_id;
  return Membership<kafka::JoinGroupResponse>(
      principal, group, timeout, cancel, "JoinGroup", [&](auto done) {
        ctx_.groups->JoinGroup(std::move(req), kJoinGroupVersion,
                               GroupClient{"sluice-in-process", "/" + std::string(kHost)},
                               std::move(done));
      });
}

Result<kafka::SyncGroupResponse> InProcessKafka::SyncGroup(const std::string& principal,
                                                           kafka::SyncGroupRequest req,
                                                           std::chrono::milliseconds timeout,
                                                           const std::atomic<bool>* cancel) {
  const std::string group = req.group_id;
  return Membership<kafka::SyncGroupResponse>(
      principal, group, timeout, cancel, "SyncGroup", [&](auto done) {
        ctx_.groups->SyncGroup(std::move(req), kSyncGroupVersion, std::move(done));
      });
}

Result<kafka::HeartbeatResponse> InProcessKafka::Heartbeat(const std::string& principal,
                                                           kafka::HeartbeatRequest req,
                                                           std::chrono::milliseconds timeout,
                                                           const std::atomic<bool>* cancel) {
  const std::string group = req.group_id;
  return Membership<kafka::HeartbeatResponse>(
      principal, group, timeout, cancel, "Heartbeat", [&](auto done) {
        ctx_.groups->Heartbeat(std::move(req), kHeartbeatVersion, std::move(done));
      });
}

Result<kafka::LeaveGroupResponse> InProcessKafka::LeaveGroup(const std::string& principal,
                                                             kafka::LeaveGroupRequest req,
                                                             std::chrono::milliseconds timeout,
                                                             const std::atomic<bool>* cancel) {
  const std::string group = req.group_id;
  return Membership<kafka::LeaveGroupResponse>(
      principal, group, timeout, cancel, "LeaveGroup", [&](auto done) {
        ctx_.groups->LeaveGroup(std::move(req), kLeaveGroupVersion, std::move(done));
      });
}

Result<kafka::OffsetCommitResponse> InProcessKafka::OffsetCommit(const std::string& principal,
                                                                 kafka::OffsetCommitRequest req,
                                                                 std::chrono::milliseconds timeout,
                                                                 const std::atomic<bool>* cancel) {
  if (ctx_.groups == nullptr) return FailedPreconditionError("no group coordinator");
  RETURN_IF_ERROR(CheckCommit(principal, req));
  auto p = std::make_shared<std::promise<kafka::OffsetCommitResponse>>();
  std::future<kafka::OffsetCommitResponse> f = p->get_future();
  ctx_.groups->OffsetCommit(std::move(req), kOffsetCommitVersion, Fulfil(p));
  return AwaitAnswer(f, timeout, cancel, "OffsetCommit");
}

Result<kafka::OffsetFetchResponse> InProcessKafka::OffsetFetch(const std::string& principal,
                                                               kafka::OffsetFetchRequest req,
                                                               std::chrono::milliseconds timeout,
                                                               const std::atomic<bool>* cancel) {
  if (ctx_.groups == nullptr) return FailedPreconditionError("no group coordinator");
  RETURN_IF_ERROR(CheckOffsetFetch(principal, req));
  auto p = std::make_shared<std::promise<kafka::OffsetFetchResponse>>();
  std::future<kafka::OffsetFetchResponse> f = p->get_future();
  ctx_.groups->OffsetFetch(std::move(req), kOffsetFetchVersion, Fulfil(p));
  return AwaitAnswer(f, timeout, cancel, "OffsetFetch");
}

}  // namespace sluice::broker
