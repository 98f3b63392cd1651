// Broker: opening and closing the broker's parts, and the request path up to the
// dispatch table. See broker.h.
#include "broker/broker.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <utility>

#include "auth/scram.h"
#include "base/base64.h"
#include "base/clock.h"
#include "base/logging.h"
#include "base/metrics.h"
#include "broker/cluster_controller.h"
#include "broker/cluster_controller_roles.h"
#include "broker/cluster_identity.h"
#include "broker/coordinator_partitions.h"
#include "broker/etcd_isr_store.h"
#include "broker/handlers/context.h"
#include "broker/handlers/fetch.h"
#include "broker/handlers/handlers.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"
#include "broker/metadata_controller.h"
#include "broker/replica_manager.h"
#include "broker/replica_state.h"
#include "broker/shards.h"
#include "broker/txn_cluster.h"
#include "broker/txn_coordinator.h"
#include "broker/txn_participants.h"
#include "broker/txn_partition_markers.h"
#include "kafka/protocol/requests.h"

namespace sluice::broker {
namespace {

constexpr const char* kUsersFile = "users.json";
constexpr const char* kAclsFile = "acls.json";
constexpr const char* kQuotasFile = "quotas.json";
constexpr const char* kGrantsFile = "grants.json";

using kafka::ApiKey;
using kafka::ErrorCode;

// Written after a clean stop, removed at start (decision 14 of the plan).
constexpr const char* kCleanShutdownFile = "clean_shutdown";

}  // namespace

Result<std::string> LoadOrCreateClusterId(const std::string& data_dir, storage::Env* env) {
  ASSIGN_OR_RETURN(std::optional<std::string> existing, ReadClusterId(data_dir, env));
  if (existing.has_value()) return std::move(*existing);
  std::string id = RandomUuid().ToString();
  RETURN_IF_ERROR(WriteClusterId(data_dir, id, env));
  SLUICE_LOG(kLog, kInfo, "created cluster id {} in {}/meta/cluster_id", id, data_dir);
  return id;
}

// The user store (docs/design/0019-security.md, phase D): <data-dir>/meta/users.json, mode
// 0600, rewritten durably on every change; sasl.users seed it (a user already there keeps
// its credentials).
// Adds each of `users` missing from `store` (`from` names the config key, for the log).
// `refresh` (a cluster's) reads the store again when a seed lost a race with another
// broker's change: brokers started together seed the same users.
static Status SeedUsers(auth::UserStore& store,
                        const std::vector<std::pair<std::string, std::string>>& users,
                        int iterations, std::string_view from,
                        const std::function<Status()>& refresh) {
  for (const auto& [name, password] : users) {
    if (IsInternalUserName(name)) {
      return InvalidArgumentError("{}: user '{}': names {}[/...] are sluice's own clients'", from,
                                  name, kInternalUser);
    }
    for (int attempt = 0;; ++attempt) {
      Result<bool> added = store.Seed(name, password, iterations);
      if (added.ok()) {
        if (*added) SLUICE_LOG(kLog, kInfo, "user '{}' added from {}", name, from);
        break;
      }
      if (!refresh || added.status().code() != StatusCode::kFailedPrecondition || attempt >= 20) {
        return added.status();
      }
      RETURN_IF_ERROR(refresh());
    }
  }
  return Status::OK();
}

static std::vector<std::pair<std::string, std::string>> SaslSeeds(const BrokerOptions& o) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const SaslUser& u : o.sasl.users) out.emplace_back(u.name, u.password);
  return out;
}

// A store kept whole in one file of <data-dir>/meta (users.json, acls.json), mode 0600,
// rewritten durably on every change: its JSON ("" when there is none yet) and the store's
// persist callback.
static Result<std::string> ReadMetaDocument(const BrokerOptions& o, const char* file) {
  const std::string dir = o.data_dir + "/meta";
  RETURN_IF_ERROR(o.env->CreateDirs(dir));
  Result<std::string> read = ReadSmallFile(o.env, dir + "/" + file, 64 << 20);
  if (read.ok()) return std::move(*read);
  if (read.status().code() != StatusCode::kNotFound) return read.status();
  return std::string();
}

static std::function<Status(const std::string&)> PersistMetaDocument(const BrokerOptions& o,
                                                                     const char* file) {
  return [env = o.env, dir = o.data_dir + "/meta", file](const std::string& j) {
    return WriteFileDurably(env, dir, file, j, 0600);
  };
}

template <typename Store>
static Result<std::shared_ptr<Store>> OpenMetaStore(const BrokerOptions& o, const char* file) {
  ASSIGN_OR_RETURN(std::string json, ReadMetaDocument(o, file));
  auto store = Store::Load(json, PersistMetaDocument(o, file));
  if (!store.ok()) {
    return Status(store.status().code(),
                  fmt::format("{}/meta/{}: {}", o.data_dir, file, store.status().message()));
  }
  return std::shared_ptr<Store>(std::move(*store));
}

Status Broker::SeedUsers(const std::vector<std::pair<std::string, std::string>>& users,
                         int iterations, std::string_view from) {
  std::function<Status()> refresh;
  if (cluster_ != nullptr) refresh = [this] { return cluster_->RefreshUsers(); };
  return ::sluice::broker::SeedUsers(*users_, users, iterations, from, refresh);
}

std::string Broker::NewInternalSecret() {
  std::string raw = auth::RandomBytes(32);
  if (raw.size() != 32) std::abort();  // no randomness: nothing secure can run
  return Base64Encode(raw);
}

Result<std::unique_ptr<Broker>> Broker::Open(BrokerOptions options) {
  storage::Env* env = options.env;
  RETURN_IF_ERROR(env->CreateDirs(options.data_dir));
  // Whether this directory held a broker before (a cluster's has no topics.json).
  const bool had_incarnation = env->Exists(options.data_dir + "/meta/incarnation");
  // A cluster's id is etcd's (the directory must agree); a single node makes its own.
  ClusterControllerOptions co;
  std::string cluster_id;
  if (options.cluster.enabled()) {
    co.cluster = options.cluster;
    co.advertised_host = options.advertised_host;
    co.advertised_port = options.advertised_port;
    for (const KafkaListener& l : options.listeners) {
      co.listeners.push_back({l.name, l.advertised_host, l.advertised_port});
    }
    co.local.data_dir = options.data_dir;
    co.local.env = env;
    ASSIGN_OR_RETURN(cluster_id, JoinClusterId(co));
  } else {
    ASSIGN_OR_RETURN(cluster_id, LoadOrCreateClusterId(options.data_dir, env));
  }
  std::unique_ptr<Broker> broker(new Broker(std::move(options), std::move(cluster_id)));
  Broker* b = broker.get();
  const BrokerOptions& o = b->options_;

  MetadataControllerOptions mo;
  mo.data_dir = o.data_dir;
  mo.env = env;
  mo.executor = b->executor_.get();
  mo.files = b->files_.get();
  mo.flush_policy = o.flush_policy;
  mo.flush_ms = o.flush_ms;
  mo.topic_defaults = o.topic_defaults;
  mo.retention_check_interval_ms = o.retention_check_interval_ms;
  mo.cleaner = o.cleaner;
  mo.remote_store = o.remote_store.get();
  if (o.remote_store != nullptr) {
    b->remote_index_ = std::make_unique<RemoteSegments>();
    b->remote_reader_ = std::make_unique<RemoteReader>(o.remote_store.get(), b->remote_index_.get(),
                                                       4, 2, o.tiered_chunk_bytes);
    mo.remote_index = b->remote_index_.get();
  }
  mo.auto_create_topics = o.auto_create_topics;
  mo.num_partitions = o.num_partitions;
  mo.wake_fetches = [b](Partition& part) { handlers::WakeFetches(*b->context_, part); };
  if (o.cluster.enabled()) {
    co.local = std::move(mo);
    // Every replica on this broker is opened and told its role; the ReplicaManager comes
    // when the server runs (OnServerStart), the roles wait for it.
    b->roles_ = std::make_unique<ReplicaManagerRoles>();
    b->coord_roles_ = std::make_unique<CoordinatorRoles>(b->roles_.get());
    co.roles = b->coord_roles_.get();
    auto cluster = ClusterController::Create(std::move(co), b->shards_.get(), &b->publisher_);
    if (!cluster.ok()) return cluster.status();
    b->cluster_ = cluster->get();
    b->isr_store_ = std::make_unique<EtcdIsrStore>(b->cluster_);
    b->controller_ = std::move(*cluster);
  } else {
    ASSIGN_OR_RETURN(b->controller_,
                     MetadataController::Load(std::move(mo), b->shards_.get(), &b->publisher_));
  }

  std::shared_ptr<auth::AclStore> acls;
  std::shared_ptr<QuotaStore> quota_store;
  if (b->cluster_ != nullptr) {
    // In a cluster the stores are etcd's, one for every broker.
    ASSIGN_OR_RETURN(b->users_, b->cluster_->OpenUserStore());
    RETURN_IF_ERROR(b->SeedUsers(SaslSeeds(o), o.sasl.scram_iterations, "sasl.users"));
    ASSIGN_OR_RETURN(acls, b->cluster_->OpenAclStore());
    ASSIGN_OR_RETURN(quota_store, b->cluster_->OpenQuotaStore());
    ASSIGN_OR_RETURN(b->grants_, b->cluster_->OpenGrantStore());
  } else {
    ASSIGN_OR_RETURN(b->users_, OpenMetaStore<auth::UserStore>(o, kUsersFile));
    RETURN_IF_ERROR(::sluice::broker::SeedUsers(*b->users_, SaslSeeds(o), o.sasl.scram_iterations,
                                                "sasl.users", nullptr));
    ASSIGN_OR_RETURN(acls, OpenMetaStore<auth::AclStore>(o, kAclsFile));
    ASSIGN_OR_RETURN(quota_store, OpenMetaStore<QuotaStore>(o, kQuotasFile));
    ASSIGN_OR_RETURN(b->grants_, OpenMetaStore<query::authz::GrantStore>(o, kGrantsFile));
  }
  b->authorizer_ = std::make_unique<Authorizer>(o.authorization, std::move(acls));
  b->quotas_ = std::make_unique<ClientQuotas>(std::move(quota_store));
  if (o.authorization.enabled) {
    // Without SASL or client certificates every client is User:ANONYMOUS: a super user
    // other than that can never connect.
    bool authenticates = o.sasl.enabled;
    for (const KafkaListener& l : o.listeners) authenticates |= l.tls();
    if (!authenticates) {
      SLUICE_LOG(kLog, kWarn,
                 "authorization is on but no listener authenticates clients (no SASL, no SSL): "
                 "every client is User:ANONYMOUS and only ACLs for it apply");
    }
    SLUICE_LOG(kLog, kInfo, "authorization on: {} ACL bindings, super users [{}]{}",
               b->authorizer_->acls().Current()->bindings().size(),
               fmt::join(o.authorization.super_users, ", "),
               o.authorization.allow_everyone_if_no_acl_found
                   ? "; a resource without ACLs is open to everyone"
                   : "");
  }
  if (o.sasl.enabled) {
    ASSIGN_OR_RETURN(b->sasl_, SaslAuthenticator::Create(o.sasl, b->users_, b->internal_secret_));
  }
  // A clean stop leaves meta/clean_shutdown. Without it the last run died: any partition
  // may have lost unsynced records, so every leader epoch moves on (decision 14). The
  // marker goes before serving, so a crash of this run is seen as one by the next.
  const std::string marker = o.data_dir + "/meta/" + kCleanShutdownFile;
  const bool had_topics = env->Exists(o.data_dir + "/meta/topics.json");
  const bool unclean = (had_topics || had_incarnation) && !env->Exists(marker);
  if (env->Exists(marker)) {
    RETURN_IF_ERROR(env->Remove(marker));
    RETURN_IF_ERROR(env->SyncDir(o.data_dir + "/meta"));
  }
  if (unclean) SLUICE_LOG(kLog, kWarn, "the last run did not stop cleanly: leader epochs move on");

  // The transaction coordinator, before the group coordinator, which verifies
  // TxnOffsetCommit with it (KIP-890); its markers wait for the shards (OnServerStart).
  b->txn_participants_ = std::make_unique<BrokerTxnParticipants>(
      [b](const TxnMarker& marker, const TopicPartition& tp, std::function<void(ErrorCode)> done) {
        WriteTxnMarkers(*b->shards_, marker, {tp}, [done](std::vector<ErrorCode> errors) {
          done(errors.empty() ? ErrorCode::kUnknownServerError : errors.front());
        });
      },
      [b](const TxnMarker& marker, const std::string& group, std::function<void(ErrorCode)> done) {
        // Markers start after Open and stop before the group coordinator closes.
        if (b->groups_ == nullptr) return done(ErrorCode::kCoordinatorNotAvailable);
        b->groups_->CompleteTxn(group, marker.producer_id, marker.producer_epoch, marker.commit,
                                marker.coordinator_epoch, std::move(done));
      });
  TxnCoordinatorOptions to;
  to.dir = o.data_dir + "/__transaction_state-0";
  to.executor = b->executor_.get();
  to.files = b->files_.get();
  to.env = env;
  to.flush_policy = storage::FlushPolicy::kDurable;  // every state change is awaited
  to.flush_ms = o.flush_ms;
  to.max_timeout_ms = o.transactions.max_timeout_ms;
  to.id_expiration_ms = o.transactions.id_expiration_ms;
  to.abort_check_interval_ms = o.transactions.abort_check_interval_ms;
  to.participants = b->txn_participants_.get();
  if (o.cluster.enabled()) {
    // Markers go to each partition's leader, verifications to the id's coordinator.
    b->txn_cluster_ = std::make_unique<ClusterTxnLinks>(o.cluster.node_id, b->shards_.get(),
                                                        b->txn_participants_.get(),
                                                        o.cluster.inter_broker_security);
    to.participants = &b->txn_cluster_->participants;
  }
  to.replicated = o.cluster.enabled();  // its partitions follow leadership (0018, coordmove)
  // The internal logs are compacted topics: the cleaner (started with the controller,
  // whether or not a user topic is compacted) cleans them; each log unregisters itself
  // when its coordinator closes, before the log closes.
  to.cleaner = b->controller_->cleaner();
  to.allocate_producer_id = [b]() -> Result<int64_t> {
    Result<int64_t> id = InternalError("the controller did not run");
    b->controller_->RunAndWait([&] { id = b->controller_->AllocateProducerId(); });
    return id;
  };
  to.partition_exists = [b](const TopicPartition& tp) {
    std::shared_ptr<const MetadataSnapshot> meta = b->Snapshot();
    const MetadataSnapshot::Topic* t = meta->Find(tp.topic);
    return t != nullptr && tp.partition >= 0 && tp.partition < t->info.partitions;
  };
  ASSIGN_OR_RETURN(b->txns_, TxnCoordinator::Open(std::move(to)));
  // In a cluster a transactional id's coordinator may be another broker: verifications
  // (produce's and TxnOffsetCommit's, KIP-890) go to it.
  if (b->txn_cluster_ != nullptr) b->txn_cluster_->SetLocalCoordinator(b->txns_.get());
  TxnVerifier* verifier = b->txns_.get();
  if (b->txn_cluster_ != nullptr) verifier = b->txn_cluster_->verifier.get();

  GroupCoordinatorOptions go = o.groups;
  go.txn_verifier = verifier;
  go.dir = o.data_dir + "/__consumer_offsets-0";
  go.executor = b->executor_.get();
  go.files = b->files_.get();
  go.env = env;
  // Commits are answered once durable (docs/design/0003): the offsets log syncs each write
  // group at once rather than on the data logs' interval, or every synchronous commit
  // would wait up to flush_ms (a pipeline committing per batch did ~10 batches/s).
  go.flush_policy = storage::FlushPolicy::kDurable;
  go.flush_ms = o.flush_ms;
  go.cleaner = b->controller_->cleaner();
  go.replicated = o.cluster.enabled();
  go.partition_exists = [b](const std::string& topic, int32_t partition) {
    std::shared_ptr<const MetadataSnapshot> meta = b->Snapshot();
    const MetadataSnapshot::Topic* t = meta->Find(topic);
    return t != nullptr && partition >= 0 && partition < t->info.partitions;
  };
  ASSIGN_OR_RETURN(b->groups_, GroupCoordinator::Open(std::move(go)));

  b->context_ = std::make_unique<handlers::Context>(o, b->cluster_id_, *b->shards_, *b->controller_,
                                                    b->groups_.get(), b->sasl_.get());
  b->in_process_ = std::make_unique<InProcessKafka>(*b->context_);
  b->context_->txn_verifier = verifier;
  b->context_->users = b->users_.get();
  b->context_->authorizer = b->authorizer_.get();
  b->context_->quotas = b->quotas_.get();
  b->context_->remote_reader = b->remote_reader_.get();
  if (b->cluster_ != nullptr) {
    b->context_->refresh_stores = [b] {
      RETURN_IF_ERROR(b->cluster_->RefreshAcls());
      return b->cluster_->RefreshQuotas();
    };
  }
  b->context_->txns = b->txns_.get();
  if (b->coord_roles_ != nullptr) {
    InternalLogOptions internal;
    internal.dir = o.data_dir;
    internal.executor = b->executor_.get();
    internal.files = b->files_.get();
    internal.env = env;
    b->coord_roles_->Attach(CoordinatorsFollowLeadership(
        *b->controller_, *b->shards_, b->groups_.get(), b->txns_.get(), std::move(internal)));
  }
  b->serving_ = true;
  RETURN_IF_ERROR(b->controller_->OpenLogs(unclean));
  RETURN_IF_ERROR(b->controller_->Start());
  return broker;
}

Broker::Broker(BrokerOptions options, std::string cluster_id)
    : options_(std::move(options)),
      cluster_id_(std::move(cluster_id)),
      executor_(std::make_unique<storage::IoExecutor>(std::max(1, options_.io_threads))),
      files_(std::make_unique<storage::FileCache>(options_.env, options_.max_open_files,
                                                  options_.file_idle_timeout_ms)),
      publisher_(options_.advertised_host, options_.advertised_port),
      shards_(std::make_unique<Shards>(&publisher_)) {}

Broker::~Broker() {
  if (Status st = Close(); !st.ok()) {
    SLUICE_LOG(kLog, kError, "closing logs: {}", st.ToString());
  }
  // Joins the I/O threads while the logs' owners still exist.
  executor_.reset();
  // After the logs closed: their last acks reached it.
  replicas_.reset();
}

void Broker::SetAdvertisedAddress(std::string host, int32_t port) {
  publisher_.SetAdvertisedAddress(std::move(host), port);
}

void Broker::SetAdvertisedEndpoints(std::vector<MetadataSnapshot::Endpoint> endpoints) {
  publisher_.SetAdvertisedEndpoints(std::move(endpoints));
}

std::string Broker::ClusterReadiness() const {
  if (cluster_ == nullptr) return "";
  if (cluster_->BrokerEpoch() < 0) return "not registered in the cluster (etcd) yet";
  if (MonotonicNanos() >= cluster_->LeaseDeadlineSource()->load()) {
    return "its etcd lease is not current (the cluster may be moving its partitions away)";
  }
  return "";
}

std::shared_ptr<const MetadataSnapshot> Broker::Snapshot() const { return publisher_.Current(); }

Status Broker::Close() {
  // The coordinators first: their threads ask partition_exists. The transaction
  // coordinator before the group coordinator (its markers complete groups' offsets). No
  // leadership reaches them from here on.
  if (coord_roles_ != nullptr) coord_roles_->Detach();
  Status first;
  if (txns_ != nullptr) {
    first = txns_->Close();
    if (context_ != nullptr) {
      context_->txns = nullptr;
      context_->txn_verifier = nullptr;
    }
  }
  if (groups_ != nullptr) {
    Status st = groups_->Close();
    if (!st.ok() && first.ok()) first = st;
    if (context_ != nullptr) context_->groups = nullptr;
    groups_.reset();
  }
  // The coordinator no longer writes markers: what the channels still send fails.
  if (txn_cluster_ != nullptr) txn_cluster_->Stop();
  txns_.reset();  // after the group coordinator, which held it as its TxnVerifier
  // Then the controller's thread: from here on this thread owns what it owned, and (the
  // server having stopped) every shard's partitions.
  if (controller_ != nullptr) controller_->Stop();
  if (closed_) return first;
  closed_ = true;
  if (controller_ != nullptr) {
    Status st = controller_->CloseLogs();
    if (!st.ok() && first.ok()) first = st;
  }
  if (first.ok() && serving_ && !clean_marked_) {
    // Every log closed with its data synced: the next start is a clean one.
    first = WriteFileDurably(options_.env, options_.data_dir + "/meta", kCleanShutdownFile, "");
    clean_marked_ = first.ok();
  }
  return first;
}

size_t Broker::open_log_count() const {
  return controller_ != nullptr ? controller_->open_log_count() : 0;
}

void Broker::OnServerStart(const std::vector<EventLoop*>& loops) {
  shards_->Attach(loops);
  if (txns_ != nullptr) txns_->StartMarkers();  // partitions take markers on their shards now
  if (cluster_ != nullptr && replicas_ == nullptr) {
    // The replication core runs on the shards: from now on (0018, phase C's wiring).
    ReplicaManagerOptions ro;
    ro.node_id = options_.cluster.node_id;
    // Sent in replica fetches, read at each fetch: a re-registration after a lost lease
    // has a newer one, which leaders need to add this broker to an ISR again (KIP-903).
    ro.broker_epoch = cluster_->BrokerEpoch();
    ro.broker_epoch_source = cluster_->BrokerEpochSource();
    ro.lease_deadline_ns = cluster_->LeaseDeadlineSource();  // 0018 review item 5
    ro.replica_lag_time_max_ms = options_.cluster.replica_lag_time_max_ms;
    ro.fetch_partition_max_bytes = options_.cluster.replica_fetch_max_bytes;
    ro.fetch_max_wait_ms = options_.cluster.replica_fetch_wait_max_ms;
    ro.fetch_backoff_ms = options_.cluster.replica_fetch_backoff_ms;
    ro.socket_timeout_ms = options_.cluster.replica_socket_timeout_ms;
    ro.follower_direct_writes = options_.cluster.replica_follower_direct_writes;
    ro.isr_store = isr_store_.get();
    ro.inter_broker_security = options_.cluster.inter_broker_security;
    ro.remote_store = options_.remote_store.get();
    replicas_ = std::make_unique<ReplicaManager>(std::move(ro), *context_);
    replicas_->Start();
    roles_->SetManager(replicas_.get());
    cluster_->ReissueRoles();  // those refused while the server was not running
  }
}

void Broker::OnServerStop() {
  // The loops have stopped: the gate first, so a ReplicaManager not stopped yet (no
  // StopWaking before the server stopped) does not wait on them.
  shards_->StopWaking();
  StopWaking();
}

void Broker::StopWaking() {
  // The fetchers post to the shards: they stop while the shards still run.
  if (roles_ != nullptr) roles_->SetManager(nullptr);
  if (replicas_ != nullptr) replicas_->Stop();
  shards_->StopWaking();
}

size_t Broker::waiting_fetch_count() {
  if (!shards_->attached()) return 0;
  const int n = shards_->size();
  std::vector<std::promise<size_t>> counts(static_cast<size_t>(n));
  std::vector<std::future<size_t>> futures;
  for (int i = 0; i < n; ++i) {
    futures.push_back(counts[static_cast<size_t>(i)].get_future());
    Shard* shard = &shards_->at(i);
    std::promise<size_t>* count = &counts[static_cast<size_t>(i)];
    if (!shards_->PostGated(shard->loop, [shard, count] {
          size_t waiting = 0;
          for (const auto& [key, part] : shard->partitions) {
            for (const auto& weak : part->waits) {
              auto w = weak.lock();
              if (w != nullptr && !w->done.load()) ++waiting;
            }
          }
          count->set_value(waiting);
        })) {
      counts[static_cast<size_t>(i)].set_value(0);
    }
  }
  size_t total = 0;
  for (auto& f : futures) total += f.get();
  return total;
}

void Broker::ControlledShutdown() {
  if (cluster_ == nullptr || options_.cluster.controlled_shutdown_timeout_ms <= 0) return;
  cluster_->ControlledShutdown(options_.cluster.controlled_shutdown_timeout_ms);
}

void Broker::Drain() {
  context_->draining = true;
  // Every waiting fetch looks again, sees `draining` and answers.
  if (shards_->attached()) {
    for (int i = 0; i < shards_->size(); ++i) {
      Shard* shard = &shards_->at(i);
      handlers::Context* ctx = context_.get();
      shards_->PostGated(shard->loop, [ctx, shard] {
        for (auto& [key, part] : shard->partitions) handlers::WakeFetches(*ctx, *part);
      });
    }
  }
  controller_->FlushLogs();
}

// ---------------------------------------------------------------------------------------
// Requests

namespace {

// sluice_kafka_requests_total{api}: every decoded request, by API (what a consumer of many
// partitions costs is first a question of how many fetches it sends). Each counter is
// made on its API's first request.
void CountRequest(int16_t api_key) {
  constexpr int kKeys = 128;
  static std::array<std::atomic<Counter*>, kKeys> counters{};
  if (api_key < 0 || api_key >= kKeys) return;
  std::atomic<Counter*>& slot = counters[static_cast<size_t>(api_key)];
  Counter* c = slot.load(std::memory_order_acquire);
  if (c == nullptr) {
    // Racing threads get the same counter from the registry.
    c = &MetricsRegistry::Global().GetCounter(
        "sluice_kafka_requests_total", "Kafka requests received, by API",
        {{"api", std::string(kafka::ApiName(static_cast<ApiKey>(api_key)))}});
    slot.store(c, std::memory_order_release);
  }
  c->Inc();
}

enum class QuotaExemption { kNone, kRequestTime, kAll };

// What client quotas leave alone, as Kafka does: the brokers' own requests (a follower's
// Fetch and OffsetForLeaderEpoch, WriteTxnMarkers, AddPartitionsToTxn v4+) entirely, and
// an acks=0 produce's request time (its bytes count).
QuotaExemption ExemptionOf(const kafka::RequestHeader& h, const kafka::AnyRequest& body) {
  switch (static_cast<ApiKey>(h.api_key)) {
    case ApiKey::kFetch:
      return replica::FetchReplicaId(std::get<kafka::FetchRequest>(body), h.api_version) >= 0
                 ? QuotaExemption::kAll
                 : QuotaExemption::kNone;
    case ApiKey::kOffsetForLeaderEpoch:
      return std::get<kafka::OffsetForLeaderEpochRequest>(body).replica_id >= 0
                 ? QuotaExemption::kAll
                 : QuotaExemption::kNone;
    case ApiKey::kWriteTxnMarkers:
      return QuotaExemption::kAll;
    case ApiKey::kAddPartitionsToTxn:
      return h.api_version >= 4 ? QuotaExemption::kAll : QuotaExemption::kNone;
    case ApiKey::kProduce:
      return std::get<kafka::ProduceRequest>(body).acks == 0 ? QuotaExemption::kRequestTime
                                                             : QuotaExemption::kNone;
    default:
      return QuotaExemption::kNone;
  }
}

}  // namespace

void Broker::OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) {
  handlers::Context& ctx = *context_;
  if (handlers::SaslTakesRawToken(ctx, conn, frame)) return;
  // Shared: produce records are views into it, read on their partitions' owner shards.
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(frame));
  kafka::DecodeOutcome out = kafka::DecodeRequest(*owned);
  switch (out.problem) {
    case kafka::RequestProblem::kNone: {
      const kafka::RequestHeader& h = out.request->header;
      CountRequest(h.api_key);
      if (!handlers::SaslAdmits(ctx, conn, static_cast<ApiKey>(h.api_key))) return;
      handlers::Handler handler = handlers::HandlerFor(h.api_key);
      if (handler == nullptr) {
        // The decoder knows every API of the codec (kafka::KnownApis), the broker serves
        // those with a handler (SupportedApis, what ApiVersions lists): a known API it
        // does not serve is answered as Kafka answers an unknown one.
        SLUICE_LOG(kLog, kWarn, "closing connection: no handler for {} v{}",
                   kafka::ApiName(static_cast<ApiKey>(h.api_key)), h.api_version);
        conn->Close();
        return;
      }
      const QuotaExemption exempt = ExemptionOf(h, out.request->body);
      if (!ctx.quotas->active() || exempt == QuotaExemption::kAll) {
        handler(ctx, handlers::Call{conn, owned, h}, out.request->body);
        return;
      }
      // Client quotas (docs/design/0019-security.md, phase F): a produce's bytes count
      // when it arrives; the request time a handler took here counts for the next request
      // (this one carries the debt there is now).
      const std::string user = handlers::QuotaUser(*conn);
      const std::string client_id = h.client_id.value_or("");
      ClientQuotas& quotas = *ctx.quotas;
      if (h.api_key == static_cast<int16_t>(ApiKey::kProduce)) {
        conn->ThrottleAfterResponse(quotas.Record(ClientQuotas::Kind::kProduce, user, client_id,
                                                  static_cast<double>(owned->size())));
      }
      if (exempt == QuotaExemption::kRequestTime) {
        handler(ctx, handlers::Call{conn, owned, h}, out.request->body);
        return;
      }
      conn->ThrottleAfterResponse(quotas.Record(ClientQuotas::Kind::kRequest, user, client_id, 0));
      const auto start = std::chrono::steady_clock::now();
      handler(ctx, handlers::Call{conn, owned, h}, out.request->body);
      const std::chrono::duration<double, std::milli> took =
          std::chrono::steady_clock::now() - start;
      quotas.Record(ClientQuotas::Kind::kRequest, user, client_id, took.count());
      return;
    }
    case kafka::RequestProblem::kUnsupportedVersion:
      if (out.header && out.header->api_key == static_cast<int16_t>(ApiKey::kApiVersions)) {
        // Kafka answers with the v0 body and a v0 header, whatever the version asked.
        Response resp;
        kafka::Writer w(&resp.buffer);
        w.Int32(out.header->correlation_id);
        kafka::EncodeApiVersionsV0Fallback(w, ErrorCode::kUnsupportedVersion);
        conn->Send(std::move(resp));
        return;
      }
      break;
    case kafka::RequestProblem::kMalformed:
    case kafka::RequestProblem::kUnknownApi:
      break;
  }
  SLUICE_LOG(kLog, kWarn, "closing connection: {}", out.status.ToString());
  conn->Close();
}

}  // namespace sluice::broker
