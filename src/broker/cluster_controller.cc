// ClusterController: a broker's membership, its copy of the cluster's metadata and, while
// it holds the controller key, the controller's decisions, all through etcd. See
// cluster_controller.h and docs/design/0018-cluster.md.
#include "broker/cluster_controller.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <random>
#include <thread>
#include <utility>

#include "base/logging.h"
#include "broker/cluster_identity.h"
#include "broker/controlled_shutdown.h"
#include "broker/etcd_isr_store.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"
#include "broker/replica_state.h"
#include "cluster/cluster_values.h"
#include "cluster/controller_decisions.h"
#include "cluster/metadata_txn.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;
using namespace cluster;  // NOLINT: the etcd values and decisions, throughout

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string Endpoints(const std::vector<std::string>& urls) {
  std::string out;
  for (const std::string& u : urls) out += (out.empty() ? "" : ",") + u;
  return out;
}

Result<std::unique_ptr<EtcdClient>> Connect(const ClusterControllerOptions& o) {
  EtcdOptions eo;
  eo.endpoints = o.cluster.etcd;
  ASSIGN_OR_RETURN(auto etcd, EtcdClient::Create(eo));
  // etcd may be starting too: wait a bounded time for any member to answer.
  const int64_t deadline = NowMs() + std::max<int64_t>(o.connect_timeout_ms, 0);
  for (;;) {
    auto st = etcd->Status();
    if (st.ok()) return etcd;
    if (NowMs() >= deadline) {
      return IOError("etcd is not reachable at {} (waited {} ms): {}", Endpoints(eo.endpoints),
                     o.connect_timeout_ms, st.status().message());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// Kafka's partition.metadata: the topic id a partition directory belongs to (KIP-516), so a
// directory left by a deleted topic of the same name is never taken for the new one.
std::string PartitionMetadata(const kafka::Uuid& id) {
  return "version: 0\ntopic_id: " + id.ToString() + "\n";
}

// The leader-epoch checkpoint made to end with etcd's epoch `epoch` (decision 3): entries
// that cover no record (starting at or past the log end) go, and `epoch` starts at the log
// end. Corruption when the log holds records of a later epoch than etcd's.
Status AlignEpochs(storage::Env* env, const std::string& dir, storage::PartitionLog& log,
                   LeaderEpochCache* epochs, int32_t epoch) {
  if (epochs->latest_epoch() == epoch && !epochs->entries().empty()) return Status::OK();
  if (epochs->entries().empty() && epoch == 0) return Status::OK();
  const int64_t end = log.written_end_offset();
  std::vector<LeaderEpochCache::Entry> entries = epochs->entries();
  std::erase_if(entries, [end](const LeaderEpochCache::Entry& e) { return e.start_offset >= end; });
  if (!entries.empty() && entries.back().epoch > epoch) {
    return CorruptionError("{}: the log holds records of leader epoch {}, past etcd's {}", dir,
                           entries.back().epoch, epoch);
  }
  if (entries.empty() || entries.back().epoch < epoch) entries.push_back({epoch, end});
  RETURN_IF_ERROR(WriteFileDurably(env, dir, kLeaderEpochFile, LeaderEpochCache::Format(entries)));
  ASSIGN_OR_RETURN(*epochs, LeaderEpochCache::Open(log, LeaderEpochCache::Owner::kCluster));
  return Status::OK();
}

}  // namespace

Result<std::string> JoinClusterId(const ClusterControllerOptions& options) {
  ASSIGN_OR_RETURN(auto etcd, Connect(options));
  const KeyLayout keys(options.cluster.name);
  storage::Env* env = options.local.env;
  ASSIGN_OR_RETURN(std::optional<std::string> local, ReadClusterId(options.local.data_dir, env));
  ASSIGN_OR_RETURN(GetResponse got, etcd->Get(keys.ClusterId()));
  if (!got.kv.has_value()) {
    // The first broker: its directory's id (a single node joining) or a new one.
    const std::string id = local.value_or(RandomUuid().ToString());
    MetadataWrite w;
    w.compares.push_back({keys.ClusterId(), 0});
    w.puts.push_back({keys.ClusterId(), ToJson(ClusterIdValue{id}), 0});
    ASSIGN_OR_RETURN(TxnResponse r, etcd->Txn(ToTxn(w)));
    if (r.succeeded) SLUICE_LOG(kClusterLog, kInfo, "created cluster id {} in etcd", id);
    ASSIGN_OR_RETURN(got, etcd->Get(keys.ClusterId()));
    if (!got.kv.has_value())
      return IOError("etcd: {} vanished after it was written", keys.ClusterId());
  }
  auto held = ParseClusterIdValue(got.kv->value);
  if (!held.ok()) return CorruptionError("etcd {}: {}", keys.ClusterId(), held.status().message());
  if (local.has_value() && *local != held->id) {
    return FailedPreconditionError(
        "the data directory {} belongs to cluster {}, but etcd ({}, cluster name '{}') holds "
        "cluster {}: start this broker with an empty data directory, or against its own cluster",
        options.local.data_dir, *local, Endpoints(options.cluster.etcd), options.cluster.name,
        held->id);
  }
  if (!local.has_value()) RETURN_IF_ERROR(WriteClusterId(options.local.data_dir, held->id, env));
  return held->id;
}

Result<std::unique_ptr<ClusterController>> ClusterController::Create(
    ClusterControllerOptions options, Shards* shards, MetadataPublisher* publisher) {
  if (options.advertised_port <= 0) {
    return InvalidArgumentError(
        "a broker of a cluster needs a fixed port (kafka.addr or kafka.advertised_addr): the "
        "others register and reach it there");
  }
  std::unique_ptr<ClusterController> c(
      new ClusterController(std::move(options), shards, publisher));
  ASSIGN_OR_RETURN(c->etcd_, Connect(c->options_));
  ASSIGN_OR_RETURN(Incarnation inc,
                   LoadOrCreateIncarnation(c->options_.local.data_dir, c->options_.local.env));
  c->incarnation_ = inc.id;
  return c;
}

ClusterController::ClusterController(ClusterControllerOptions options, Shards* shards,
                                     MetadataPublisher* publisher)
    : options_(std::move(options)),
      shards_(shards),
      publisher_(publisher),
      users_doc_(cluster::KeyLayout(options_.cluster.name).Users()),
      acls_doc_(cluster::KeyLayout(options_.cluster.name).Acls()),
      quotas_doc_(cluster::KeyLayout(options_.cluster.name).Quotas()),
      grants_doc_(cluster::KeyLayout(options_.cluster.name).Grants()),
      view_(options_.cluster.name),
      logs_(LocalLogsOptionsOf(options_.local), shards) {}

ClusterController::~ClusterController() { Stop(); }

Result<TxnResponse> ClusterController::Apply(const MetadataWrite& write) {
  ASSIGN_OR_RETURN(TxnResponse r, etcd_->Txn(ToTxn(write, /*prev_kv=*/true)));
  if (r.succeeded) {
    // What this broker wrote is in its view at once (the watch brings it again later),
    // with the revisions etcd gave it: a key that existed keeps its create_revision (a
    // registration's is its broker epoch).
    for (const AppliedPut& p : AppliedPuts(write, r)) {
      (void)view_.Put(p.key, p.value, p.mod_revision, p.create_revision);
    }
    for (const auto& k : write.deletes) view_.Delete(k);
    for (const auto& prefix : write.delete_prefixes) {
      std::vector<std::pair<std::string, int32_t>> gone;
      for (const auto& [key, state] : view_.partitions()) {
        if (view_.keys().Partition(key.first, key.second).starts_with(prefix)) gone.push_back(key);
      }
      for (const auto& key : gone) view_.Delete(view_.keys().Partition(key.first, key.second));
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Membership

Status ClusterController::Register() {
  BrokerRegistration reg;
  reg.host = options_.advertised_host;
  reg.port = options_.advertised_port;
  reg.inter_broker_host = options_.cluster.inter_broker_host.empty()
                              ? options_.advertised_host
                              : options_.cluster.inter_broker_host;
  reg.inter_broker_port = options_.cluster.inter_broker_port > 0
                              ? options_.cluster.inter_broker_port
                              : options_.advertised_port;
  reg.incarnation = incarnation_;
  reg.clean = clean_;
  reg.listeners = options_.listeners;
  const int32_t node = node_id();
  const KeyLayout& keys = view_.keys();
  // A restart of this very broker finds its previous registration until that lease expires.
  const int64_t deadline = NowMs() + options_.cluster.session_timeout_ms + 1000;
  for (;;) {
    ASSIGN_OR_RETURN(TxnResponse r,
                     etcd_->Txn(ToTxn(RegistrationWrite(keys, node, lease_->lease_id(), reg))));
    if (r.succeeded) {
      broker_epoch_ = r.header.revision;  // the key's create_revision
      SLUICE_LOG(
          kClusterLog, kInfo, "registered as broker {} of cluster '{}' ({}:{}, incarnation {}{})",
          node, options_.cluster.name, reg.host, reg.port, incarnation_, clean_ ? "" : ", unclean");
      return Status::OK();
    }
    ASSIGN_OR_RETURN(GetResponse held, etcd_->Get(keys.Broker(node)));
    if (!held.kv.has_value()) continue;  // its lease just expired
    auto other = ParseBrokerRegistration(held.kv->value);
    if (other.ok() && other->incarnation == incarnation_ && NowMs() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      continue;
    }
    return FailedPreconditionError(
        "node id {} is in use by {}: another broker of cluster '{}' is registered with it; give "
        "this broker another --node-id",
        node, other.ok() ? fmt::format("{}:{}", other->host, other->port) : "a broker",
        options_.cluster.name);
  }
}

auth::AclStore::Persist ClusterController::LoadDocument(EtcdDocument& doc, std::string_view what,
                                                        std::string* json) {
  Result<GetResponse> got = etcd_->Get(doc.key);
  if (!got.ok()) {
    doc.load_error = got.status();
    return nullptr;
  }
  if (got->kv.has_value()) {
    *json = got->kv->value;
    doc.revision = got->kv->mod_revision;
  }
  return [this, &doc, what = std::string(what)](const std::string& j) -> Status {
    TxnRequest t;
    t.compares.push_back(Compare::ModRevision(doc.key, CompareResult::kEqual, doc.revision.load()));
    t.success.push_back(TxnOp::Put(doc.key, j));
    ASSIGN_OR_RETURN(TxnResponse r, etcd_->Txn(t));
    if (!r.succeeded) {
      return FailedPreconditionError(
          "the {} was changed by another broker at the same time: try again", what);
    }
    doc.revision = r.header.revision;
    return Status::OK();
  };
}

Result<std::shared_ptr<auth::UserStore>> ClusterController::OpenUserStore() {
  std::string json;
  auto persist = LoadDocument(users_doc_, "user store", &json);
  if (persist == nullptr) return users_doc_.load_error;
  auto store = auth::UserStore::Load(json, std::move(persist));
  if (!store.ok()) {
    return Status(store.status().code(),
                  fmt::format("etcd {}: {}", users_doc_.key, store.status().message()));
  }
  std::shared_ptr<auth::UserStore> users = std::move(*store);
  users_doc_.replace = [users](std::string_view v) { return users->Replace(v); };
  return users;
}

Result<std::shared_ptr<auth::AclStore>> ClusterController::OpenAclStore() {
  std::string json;
  auto persist = LoadDocument(acls_doc_, "ACL set", &json);
  if (persist == nullptr) return acls_doc_.load_error;
  auto store = auth::AclStore::Load(json, std::move(persist));
  if (!store.ok()) {
    return Status(store.status().code(),
                  fmt::format("etcd {}: {}", acls_doc_.key, store.status().message()));
  }
  std::shared_ptr<auth::AclStore> acls = std::move(*store);
  acls_doc_.replace = [acls](std::string_view v) { return acls->Replace(v); };
  return acls;
}

Result<std::shared_ptr<QuotaStore>> ClusterController::OpenQuotaStore() {
  std::string json;
  auto persist = LoadDocument(quotas_doc_, "quota set", &json);
  if (persist == nullptr) return quotas_doc_.load_error;
  auto store = QuotaStore::Load(json, std::move(persist));
  if (!store.ok()) {
    return Status(store.status().code(),
                  fmt::format("etcd {}: {}", quotas_doc_.key, store.status().message()));
  }
  std::shared_ptr<QuotaStore> quotas = std::move(*store);
  quotas_doc_.replace = [quotas](std::string_view v) { return quotas->Replace(v); };
  return quotas;
}

Result<std::shared_ptr<query::authz::GrantStore>> ClusterController::OpenGrantStore() {
  std::string json;
  auto persist = LoadDocument(grants_doc_, "grant set", &json);
  if (persist == nullptr) return grants_doc_.load_error;
  auto store = query::authz::GrantStore::Load(json, std::move(persist));
  if (!store.ok()) {
    return Status(store.status().code(),
                  fmt::format("etcd {}: {}", grants_doc_.key, store.status().message()));
  }
  std::shared_ptr<query::authz::GrantStore> grants = std::move(*store);
  grants_doc_.replace = [grants](std::string_view v) { return grants->Replace(v); };
  return grants;
}

Status ClusterController::RefreshDocument(EtcdDocument& doc) {
  ASSIGN_OR_RETURN(GetResponse got, etcd_->Get(doc.key));
  if (got.kv.has_value()) SyncDocument(doc, got.kv->value, got.kv->mod_revision);
  return Status::OK();
}

bool ClusterController::SyncDocuments(const std::string& key, const std::string& value,
                                      int64_t mod_revision) {
  for (EtcdDocument* doc : {&users_doc_, &acls_doc_, &quotas_doc_, &grants_doc_}) {
    if (key != doc->key) continue;
    SyncDocument(*doc, value, mod_revision);
    return true;
  }
  return false;
}

void ClusterController::SyncDocument(EtcdDocument& doc, const std::string& value,
                                     int64_t mod_revision) {
  if (!doc.replace || mod_revision <= doc.revision.load()) return;
  if (Status st = doc.replace(value); !st.ok()) {
    SLUICE_LOG(kClusterLog, kError, "etcd {} is unreadable, keeping the one in use: {}", doc.key,
               st.message());
    return;
  }
  doc.revision = mod_revision;
}

Status ClusterController::ListAll() {
  ASSIGN_OR_RETURN(RangeResponse all, etcd_->RangePrefix(view_.keys().prefix()));
  view_.Clear();
  for (const KeyValue& kv : all.kvs) {
    if (SyncDocuments(kv.key, kv.value, kv.mod_revision)) continue;
    if (Status st = view_.Put(kv.key, kv.value, kv.mod_revision, kv.create_revision); !st.ok()) {
      SLUICE_LOG(kClusterLog, kWarn, "ignoring etcd {}", st.message());
    }
  }
  listed_revision_ = all.header.revision;
  seen_revision_ = std::max(seen_revision_, listed_revision_);
  return Status::OK();
}

Status ClusterController::OpenLogs(bool unclean_start) {
  unclean_start_ = unclean_start;
  clean_ = CleanForRegistration(true, !unclean_start, options_.local.flush_policy);
  const int64_t ttl_s = (options_.cluster.session_timeout_ms + 999) / 1000;
  ASSIGN_OR_RETURN(lease_,
                   LeaseKeeper::Start(
                       *etcd_, ttl_s, [this](int64_t, const Status& why) { OnLeaseLost(why); },
                       &lease_deadline_ns_));
  RETURN_IF_ERROR(Register());
  RETURN_IF_ERROR(ListAll());
  AfterChange();  // the led partitions' logs, perhaps the controller key, the first snapshot
  return Status::OK();
}

Status ClusterController::Start() {
  ASSIGN_OR_RETURN(loop_, EventLoop::Create());
  EventLoop* loop = loop_.get();
  thread_ = std::thread([loop] { loop->Run(); });
  WatchOptions wo;
  wo.key = view_.keys().prefix();
  wo.range_end = PrefixRangeEnd(wo.key);
  wo.start_revision = listed_revision_ + 1;
  // A member that holds the stream silent (cut off without a reset, hung) is left within
  // about a session timeout, as the lease keeper leaves it (0018, "controller (session 14)").
  wo.probe_interval_ms =
      static_cast<int>(std::clamp<int64_t>(options_.cluster.session_timeout_ms / 2, 500, 5000));
  WatchHandlers handlers;
  handlers.on_events = [this](const WatchBatch& batch) {
    if (stopping_.load()) return;
    loop_->Post([this, batch] { OnWatchEvents(batch); });
  };
  handlers.on_compacted = [this](int64_t) -> int64_t {
    // Events were lost: list again on the controller's thread, resume after the listing.
    if (stopping_.load()) return 0;
    std::promise<int64_t> next;
    loop_->Post([this, &next] {
      Status st = ListAll();
      if (st.ok()) AfterChange();
      next.set_value(st.ok() ? listed_revision_ + 1 : 0);
    });
    return next.get_future().get();
  };
  ASSIGN_OR_RETURN(watcher_, Watcher::Start(*etcd_, wo, std::move(handlers)));
  loop->Post([this] {
    AfterChange();
    ScheduleRetention();
  });
  if (lease_loss_pending_.load()) loop->Post([this] { HandleLeaseLoss(); });
  logs_.StartCleaner();
  return Status::OK();
}

void ClusterController::Stop() {
  stopping_ = true;
  logs_.StopCleaner();
  if (watcher_ != nullptr) watcher_->Cancel();  // no handler posts after this
  if (loop_ != nullptr) {
    loop_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  metadata_waits_.clear();  // their answers are never sent: the connections close with us
  watcher_.reset();
  // Deregisters: the registration and a held controller key go with the lease, so the
  // others move this broker's leaderships now rather than after the session timeout. The
  // stopped loop stays until then: a loss reported meanwhile posts to it, and never runs.
  if (lease_ != nullptr) {
    if (Status st = lease_->Stop(); !st.ok()) {
      SLUICE_LOG(kClusterLog, kWarn, "revoking the broker's lease: {}", st.ToString());
    }
    lease_.reset();
  }
  loop_.reset();
}

Status ClusterController::CloseLogs() {
  catalog_epochs_.clear();
  issued_.clear();
  return logs_.CloseAll();
}

void ClusterController::FlushLogs() {
  RunAndWait([this] { logs_.FlushAll(); });
}

void ClusterController::Post(std::function<void()> task) { loop_->Post(std::move(task)); }

void ClusterController::RunAndWait(const std::function<void()>& fn) {
  if (loop_ == nullptr) {
    fn();
    return;
  }
  SLUICE_ASSERT(!loop_->InLoopThread());
  std::promise<void> finished;
  loop_->Post([&] {
    fn();
    finished.set_value();
  });
  finished.get_future().wait();
}

void ClusterController::OnWatchEvents(const WatchBatch& batch) {
  for (const WatchEvent& e : batch.events) {
    seen_revision_ = std::max(seen_revision_, e.kv.mod_revision);
    if (e.type == EventType::kDelete) {
      view_.Delete(e.kv.key, e.kv.mod_revision);
      continue;
    }
    if (SyncDocuments(e.kv.key, e.kv.value, e.kv.mod_revision)) continue;
    if (Status st = view_.Put(e.kv.key, e.kv.value, e.kv.mod_revision, e.kv.create_revision);
        !st.ok()) {
      SLUICE_LOG(kClusterLog, kWarn, "ignoring etcd {}", st.message());
    }
  }
  AfterChange();
}

void ClusterController::OnLeaseLost(const Status& why) {
  // On the lease keeper's thread. The registration is gone: this broker leads nothing
  // from now on (decision 9), and registers again with a new lease.
  SLUICE_LOG(kClusterLog, kError,
             "broker {} lost its etcd lease ({}): stepping down, registering again", node_id(),
             why.message());
  if (stopping_.load()) return;
  // Set before loop_ is read: a loss while the broker starts (its logs opening, no loop
  // yet) is handled by Start(), which reads the flag after it made the loop. Before, it
  // was dropped, and the broker served for good with no registration (cluster_faults.py
  // seed 2121, fault 241: a lease lost to a slow etcd while a wiped broker started).
  lease_loss_pending_ = true;
  if (loop_ == nullptr) return;
  loop_->Post([this] { HandleLeaseLoss(); });
}

void ClusterController::HandleLeaseLoss() {
  if (stopping_.load() || !lease_loss_pending_.exchange(false)) return;
  fence_.reset();
  lease_lost_ = true;
  ReconcileLogs();
  Publish();
  lease_.reset();  // its thread has ended: it reported the loss last
  // An unclean start the controller has handled (incarnations/<node> written after this
  // registration: it took this broker out of every ISR, and leaders added it back caught
  // up) is behind this process, which lost no record since: it registers again clean.
  // Otherwise every broker once restarted after a SIGKILL left every ISR again when an
  // etcd outage took all the leases (cluster_faults.py).
  if (!clean_) {
    auto inc = view_.incarnations().find(node_id());
    clean_ = inc != view_.incarnations().end() && inc->second.value.incarnation == incarnation_ &&
             inc->second.mod_revision > broker_epoch_.load();
  }
  const int64_t ttl_s = (options_.cluster.session_timeout_ms + 999) / 1000;
  auto fresh = LeaseKeeper::Start(
      *etcd_, ttl_s, [this](int64_t, const Status& w) { OnLeaseLost(w); }, &lease_deadline_ns_);
  Status st = fresh.ok() ? Status::OK() : fresh.status();
  if (st.ok()) {
    lease_ = std::move(*fresh);
    st = Register();
  }
  // The view may be far behind etcd: the watch broke with the path that lost the lease
  // and resumes where it stopped. Acting on it led again, for a second, epochs etcd had
  // moved past (an idempotent producer sent there got OUT_OF_ORDER_SEQUENCE_NUMBER, fatal;
  // cluster_faults.py). List it again first, as at start.
  if (st.ok()) st = ListAll();
  if (!st.ok()) {
    SLUICE_LOG(kClusterLog, kError, "registering again: {}; retrying", st.ToString());
    loop_->RunAfter(1000, [this] { OnLeaseLost(InternalError("registration failed")); });
    return;
  }
  lease_lost_ = false;
  AfterChange();
}

// ---------------------------------------------------------------------------------------
// Reacting to the view

void ClusterController::AfterChange() {
  if (stopping_.load()) return;
  const auto& held = view_.controller();
  if (fence_.has_value() &&
      (!held.has_value() || held->value.node != node_id() || held->value.epoch != fence_->epoch)) {
    SLUICE_LOG(kClusterLog, kInfo, "broker {} is no longer the controller", node_id());
    fence_.reset();
    handled_registrations_.clear();
  }
  if (!fence_.has_value() && !held.has_value() && !lease_lost_ && !leaving_) TryBecomeController();
  if (fence_.has_value()) ControllerDuties();
  std::map<std::string, TopicInfo> before = std::move(topic_infos_);
  topic_infos_.clear();
  for (const auto& [name, topic] : view_.topics()) {
    auto info = view_.TopicInfoOf(name, options_.local.topic_defaults);
    if (info.ok()) {
      topic_infos_[name] = std::move(*info);
    } else {
      SLUICE_LOG(kClusterLog, kWarn, "ignoring topic: {}", info.status().message());
    }
  }
  // Configs changed by any broker reach the logs this one leads.
  for (const auto& [key, part] : logs_.all()) {
    auto now = topic_infos_.find(key.first);
    auto was = before.find(key.first);
    if (now == topic_infos_.end() ||
        (was != before.end() && was->second.overrides == now->second.overrides)) {
      continue;
    }
    logs_.Reconfigure(key, now->second.config);
  }
  // The ReplicaManager finds a partition's owner shard in the published snapshot.
  if (options_.roles != nullptr) Publish();
  ReconcileLogs();
  Publish();
  if (fence_.has_value()) MaybeCreateInternalTopics();
  CompleteMetadataWaits();
}

void ClusterController::TryBecomeController() {
  const auto& epoch = view_.controller_epoch();
  const int64_t previous = epoch.has_value() ? epoch->value.epoch : 0;
  const int64_t revision = epoch.has_value() ? epoch->mod_revision : 0;
  auto r = Apply(
      ControllerElectionWrite(view_.keys(), node_id(), lease_->lease_id(), previous, revision));
  if (!r.ok()) {
    SLUICE_LOG(kClusterLog, kWarn, "controller election: {}", r.status().ToString());
    return;
  }
  if (!r->succeeded) return;  // another broker was faster: the watch says which
  fence_ = ControllerFence{previous + 1, r->header.revision};
  handled_registrations_.clear();
  SLUICE_LOG(kClusterLog, kInfo, "broker {} is the controller (epoch {})", node_id(),
             fence_->epoch);
}

void ClusterController::ControllerDuties() {
  const KeyLayout& keys = view_.keys();
  const LiveBrokers live = view_.Live();
  const std::set<int32_t> leaving = view_.Leaving();
  // Registrations not handled in this term: a new incarnation or an unclean start leaves
  // every ISR before anything else (0018, "etcd layout").
  std::vector<int32_t> remove;
  std::map<int32_t, int64_t> handling;
  for (const auto& [node, reg] : view_.brokers()) {
    auto done = handled_registrations_.find(node);
    if (done != handled_registrations_.end() && done->second == reg.create_revision) continue;
    handling[node] = reg.create_revision;
    auto inc = view_.incarnations().find(node);
    const bool same =
        inc != view_.incarnations().end() && inc->second.value.incarnation == reg.value.incarnation;
    // An unclean registration leaves the ISRs once: a controller that handled it wrote
    // the incarnation after it registered, and the leaders may have added it back since
    // (caught up); a later controller must not take it out again.
    const bool handled_before = same && inc->second.mod_revision > reg.create_revision;
    if (!same || (!reg.value.clean && !handled_before)) remove.push_back(node);
  }
  // Elections and ISR removals, decided from the view, then written one by one.
  struct Change {
    std::string topic;
    int32_t partition;
    int64_t revision;
    PartitionState next;
  };
  std::vector<Change> changes;
  for (const auto& [key, state] : view_.partitions()) {
    auto topic = view_.topics().find(key.first);
    if (topic == view_.topics().end() ||
        static_cast<size_t>(key.second) >= topic->second.value.partitions.size()) {
      continue;
    }
    const auto& replicas = topic->second.value.partitions[static_cast<size_t>(key.second)];
    auto next = Reelect(replicas, state.value, live, remove, fence_->epoch);
    if (!leaving.empty()) {
      // Brokers shutting down: out of the leadership and the ISR (controlled_shutdown.h),
      // one write with the election, one epoch past the stored one.
      auto moved =
          MoveAway(replicas, next.has_value() ? *next : state.value, live, leaving, fence_->epoch);
      if (moved.has_value()) {
        moved->leader_epoch = state.value.leader_epoch + 1;
        next = std::move(moved);
      }
    }
    // A leader registered after its leadership was written (restarted, or its lease lost
    // and taken again) does not lead that epoch (MayLead): the same leader, one epoch on,
    // written after its registration. Kafka's controller does the same for a broker whose
    // epoch changed (a failure, then a startup).
    const PartitionState& now = next.has_value() ? *next : state.value;
    if (now.leader >= 0 && now.leader == state.value.leader &&
        now.leader_epoch == state.value.leader_epoch) {
      auto reg = view_.brokers().find(now.leader);
      if (reg != view_.brokers().end() && state.mod_revision < reg->second.create_revision) {
        PartitionState bumped = now;
        bumped.leader_epoch = state.value.leader_epoch + 1;
        bumped.controller_epoch = fence_->epoch;
        next = std::move(bumped);
      }
    }
    if (next.has_value()) changes.push_back({key.first, key.second, state.mod_revision, *next});
  }
  bool all_written = true;
  for (const Change& c : changes) {
    auto r = Apply(PartitionStateWrite(keys, fence(), c.topic, c.partition, c.revision, c.next));
    if (!r.ok() || !r->succeeded) {
      // A newer value (the leader's ISR change, or another controller): the watch brings
      // it, and this runs again.
      all_written = false;
      if (!r.ok())
        SLUICE_LOG(kClusterLog, kWarn, "electing {}-{}: {}", c.topic, c.partition,
                   r.status().ToString());
      continue;
    }
    SLUICE_LOG(kClusterLog, kInfo, "{}-{}: leader {} (epoch {}), isr of {}", c.topic, c.partition,
               c.next.leader, c.next.leader_epoch, c.next.isr.size());
  }
  if (all_written) {
    for (const auto& [node, create_revision] : handling) {
      const auto& reg = view_.brokers().at(node).value;
      const std::string& inc = reg.incarnation;
      auto known = view_.incarnations().find(node);
      if (known == view_.incarnations().end() || known->second.value.incarnation != inc ||
          (!reg.clean && known->second.mod_revision < create_revision)) {
        MetadataWrite w;
        w.compares.push_back({keys.ControllerEpoch(), fence().controller_epoch_revision});
        w.puts.push_back({keys.Incarnation(node), ToJson(IncarnationValue{inc}), 0});
        auto r = Apply(w);
        if (!r.ok() || !r->succeeded) continue;
      }
      handled_registrations_[node] = create_revision;
    }
  }
  // Partition states a creation left unwritten (its controller died between the writes):
  // the states are written in partition order, so the missing ones are a suffix.
  for (const auto& [name, topic] : view_.topics()) {
    const auto n = static_cast<int32_t>(topic.value.partitions.size());
    int32_t first = n;
    while (first > 0 && view_.partitions().count({name, first - 1}) == 0) --first;
    if (first == n) continue;
    const std::string topic_name = name;  // the view changes under the writes
    const std::vector<std::vector<int32_t>> replicas = topic.value.partitions;
    for (const MetadataWrite& w :
         InitialStateWrites(keys, fence(), topic_name, replicas, first, live)) {
      auto r = Apply(w);
      if (!r.ok() || !r->succeeded) break;
    }
    SLUICE_LOG(kClusterLog, kInfo,
               "{}: wrote the states of partitions {} to {} a creation left out", topic_name, first,
               n - 1);
    break;  // the view changed: the next change does the rest
  }
  // Deletions: every broker removes its directories when it sees the topic go (and checks
  // partition.metadata before it opens one), so the mark comes off at once.
  for (const auto& [name, deleting] : view_.deleting()) {
    if (view_.topics().count(name) != 0) continue;
    MetadataWrite w;
    w.compares.push_back({keys.ControllerEpoch(), fence().controller_epoch_revision});
    w.deletes.push_back(keys.Deleting(name));
    (void)Apply(w);
    break;  // the view changed under the loop: the next change does the rest
  }
}

// ---------------------------------------------------------------------------------------
// Local logs

const TopicConfig* ClusterController::ConfigOf(const std::string& topic) const {
  auto it = topic_infos_.find(topic);
  return it == topic_infos_.end() ? nullptr : &it->second.config;
}

void ClusterController::ReconcileLogs() {
  if (options_.roles != nullptr) return ReconcileReplicas();
  std::map<PartitionKey, int32_t> led;
  if (!lease_lost_) led = view_.LedBy(node_id(), broker_epoch_.load());
  std::vector<PartitionKey> close;
  for (const auto& [key, part] : logs_.all()) {
    auto it = led.find(key);
    if (it == led.end() || it->second != catalog_epochs_[key]) close.push_back(key);
  }
  for (const PartitionKey& key : close) {
    ClosePartition(key, view_.topics().count(key.first) == 0);
  }
  for (const auto& [key, epoch] : led) {
    if (logs_.Find(key) != nullptr) continue;
    auto info = view_.TopicInfoOf(key.first, options_.local.topic_defaults);
    if (!info.ok()) continue;
    auto part = OpenPartition(*info, key.second, epoch);
    if (!part.ok()) {
      SLUICE_LOG(kClusterLog, kError, "opening {}-{} to lead it: {}", key.first, key.second,
                 part.status().ToString());
      continue;
    }
    if (Status st = logs_.Install(key, std::move(*part), ConfigOf(key.first)); !st.ok()) {
      SLUICE_LOG(kClusterLog, kError, "placing {}-{}: {}", key.first, key.second, st.ToString());
      continue;
    }
    catalog_epochs_[key] = epoch;
    SLUICE_LOG(kClusterLog, kInfo, "leading {}-{} in epoch {}", key.first, key.second, epoch);
  }
}

void ClusterController::ReconcileReplicas() {
  // Every partition whose assignment names this broker, while it is registered.
  std::map<PartitionKey, const ClusterView::Versioned<PartitionState>*> held;
  // Those open here whose leader is gone (-1 or unregistered): kept open, fetching
  // nothing, so the next leadership keeps the open log and its current high watermark
  // (0018 review item 6).
  std::set<PartitionKey> leaderless;
  if (!lease_lost_) {
    for (const auto& [key, state] : view_.partitions()) {
      auto topic = view_.topics().find(key.first);
      if (topic == view_.topics().end() || key.second < 0 ||
          static_cast<size_t>(key.second) >= topic->second.value.partitions.size()) {
        continue;
      }
      const auto& replicas = topic->second.value.partitions[static_cast<size_t>(key.second)];
      if (std::find(replicas.begin(), replicas.end(), node_id()) == replicas.end()) continue;
      // Nothing to lead or follow while no registered broker leads it: an open log stays
      // open as a follower of no one; one not open waits for the next leader.
      const int32_t leader = state.value.leader;
      if (leader < 0 || view_.brokers().count(leader) == 0 ||
          (leader == node_id() && !MayLead(state))) {
        if (logs_.Find(key) != nullptr) leaderless.insert(key);
        continue;
      }
      // Shutting down, a replica out of the ISR stops fetching: its leader must not count
      // its progress, nor add it back (controlled_shutdown.h).
      if (leaving_ && leader != node_id() && !state.value.InIsr(node_id())) continue;
      held[key] = &state;
    }
  }
  std::vector<PartitionKey> close;
  for (const auto& [key, part] : logs_.all()) {
    if (held.count(key) == 0 && leaderless.count(key) == 0) close.push_back(key);
  }
  for (const PartitionKey& key : leaderless) {
    const IssuedRole want{.leader = -1,
                          .leader_epoch = view_.partitions().at(key).value.leader_epoch};
    auto was = issued_.find(key);
    if (was != issued_.end() && was->second == want) continue;
    if (options_.roles->BecomeFollower(key, -1, want.leader_epoch, "", 0)) {
      issued_[key] = want;
    } else {
      issued_.erase(key);
    }
  }
  for (const PartitionKey& key : close) {
    const bool deleted = view_.topics().count(key.first) == 0;
    options_.roles->StopReplica(key, deleted);
    issued_.erase(key);
    ClosePartition(key, deleted);
  }
  // Leaderships first: clients and the coordinators wait for them, while a new
  // followership costs a sync of its log and nobody waits for it (a broker taking its roles
  // after a failover served the bench's partition behind dozens of followerships: 0018,
  // "replperf").
  std::vector<std::pair<PartitionKey, const ClusterView::Versioned<PartitionState>*>> ordered;
  ordered.reserve(held.size());
  for (const bool leaders : {true, false}) {
    for (const auto& [key, state] : held) {
      if ((state->value.leader == node_id()) == leaders) ordered.emplace_back(key, state);
    }
  }
  for (const auto& [key, state] : ordered) {
    const PartitionState& s = state->value;
    const bool leads = s.leader == node_id();
    auto info = topic_infos_.find(key.first);
    if (info == topic_infos_.end()) continue;
    if (logs_.Find(key) == nullptr) {
      // A leader's epochs end with etcd's; a follower's come from the leader's batches.
      auto part = OpenPartition(info->second, key.second, leads ? s.leader_epoch : -1);
      if (!part.ok()) {
        SLUICE_LOG(kClusterLog, kError, "opening {}-{}: {}", key.first, key.second,
                   part.status().ToString());
        continue;
      }
      // No writes until the ReplicaManager is told its role (a high watermark of -1:
      // the first role starts it from the checkpoint).
      auto placeholder = std::make_unique<ReplicaState>();
      placeholder->topic = key.first;
      placeholder->partition = key.second;
      placeholder->leader_epoch = -1;
      placeholder->high_watermark = -1;
      (*part)->replica = std::move(placeholder);
      if (Status st = logs_.Install(key, std::move(*part), &info->second.config); !st.ok()) {
        SLUICE_LOG(kClusterLog, kError, "placing {}-{}: {}", key.first, key.second, st.ToString());
        continue;
      }
      catalog_epochs_[key] = s.leader_epoch;
    }
    IssuedRole want;
    want.leader = s.leader;
    want.leader_epoch = s.leader_epoch;
    if (leads) {
      want.revision = state->mod_revision;
      want.min_insync_replicas = info->second.config.min_insync_replicas;
      want.replicas =
          view_.topics().at(key.first).value.partitions[static_cast<size_t>(key.second)];
    }
    auto was = issued_.find(key);
    if (was != issued_.end() && was->second == want) continue;
    bool taken = false;
    if (leads) {
      LeaderRole role;
      role.leader_epoch = s.leader_epoch;
      role.replicas = want.replicas;
      for (const IsrMember& m : s.isr) role.isr.push_back(m.node);
      role.version = state->mod_revision;
      role.min_insync_replicas = want.min_insync_replicas;
      taken = options_.roles->BecomeLeader(key, role);
    } else {
      const BrokerRegistration& reg = view_.brokers().at(s.leader).value;
      taken = options_.roles->BecomeFollower(key, s.leader, s.leader_epoch, reg.inter_broker_host,
                                             reg.inter_broker_port);
    }
    if (taken) {
      issued_[key] = want;
    } else {
      issued_.erase(key);
    }
  }
}

bool ClusterController::MayLead(const ClusterView::Versioned<PartitionState>& state) const {
  // A state written before this registration names an earlier life of this broker (a
  // restart, a lease lost and taken again): the controller gives the partition a new epoch
  // when it handles the registration (ControllerDuties), and this broker leads that one.
  // Leading the old epoch for the moment in between served stale transaction state,
  // wrote a wiped broker's empty log into an old epoch and left an epoch checkpoint a
  // later follower could never match (0018, "stalelead").
  if (state.mod_revision < broker_epoch_.load()) return false;
  for (const IsrMember& m : state.value.isr) {
    if (m.node == node_id()) return m.incarnation == incarnation_;
  }
  return true;
}

void ClusterController::ReissueRoles() {
  if (stopping_.load() || loop_ == nullptr) return;
  loop_->Post([this] {
    if (stopping_.load()) return;
    ReconcileLogs();
    Publish();
  });
}

bool ClusterController::ControlledShutdown(int64_t timeout_ms) {
  if (loop_ == nullptr || stopping_.load() || timeout_ms <= 0) return false;
  SLUICE_LOG(kClusterLog, kInfo, "broker {}: controlled shutdown, moving its leaderships away",
             node_id());
  const int64_t deadline = NowMs() + timeout_ms;
  size_t left = 0;
  for (;;) {
    RunAndWait([&] { left = ShutdownStep(); });
    if (left == 0 || NowMs() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  RunAndWait([this] { Resign(); });
  if (left == 0) {
    SLUICE_LOG(kClusterLog, kInfo, "broker {}: controlled shutdown done, its leaderships moved",
               node_id());
  } else {
    SLUICE_LOG(kClusterLog, kWarn,
               "broker {}: controlled shutdown gave up after {} ms with {} partitions not "
               "moved; they move when its registration goes",
               node_id(), timeout_ms, left);
  }
  return left == 0;
}

size_t ClusterController::ShutdownStep() {
  if (stopping_.load()) return 0;
  leaving_ = true;
  if (lease_lost_) return 0;  // no registration: it leads nothing and counts in no ISR
  const int64_t epoch = broker_epoch_.load();
  auto held = view_.shutdowns().find(node_id());
  if (held == view_.shutdowns().end() || held->second.value.broker_epoch != epoch) {
    // Under the broker's lease: it goes with the registration, whatever happens next.
    MetadataWrite w;
    w.puts.push_back(
        {ShutdownKey(view_.keys(), node_id()), ToJson(ShutdownRequest{epoch}), lease_->lease_id()});
    auto r = Apply(w);
    if (!r.ok()) {
      SLUICE_LOG(kClusterLog, kWarn, "asking for a controlled shutdown: {}", r.status().ToString());
    }
    AfterChange();  // the controller's moves, if this broker is the controller
  }
  return view_.PartitionsToMoveAway(node_id());
}

void ClusterController::Resign() {
  if (!fence_.has_value()) return;
  const auto& held = view_.controller();
  if (held.has_value() && held->value.node == node_id()) {
    MetadataWrite w;
    w.compares.push_back({view_.keys().Controller(), held->mod_revision});
    w.deletes.push_back(view_.keys().Controller());
    auto r = Apply(w);
    if (!r.ok()) {
      SLUICE_LOG(kClusterLog, kWarn, "resigning as controller: {}", r.status().ToString());
    } else {
      SLUICE_LOG(kClusterLog, kInfo, "broker {} resigned as controller (epoch {})", node_id(),
                 fence_->epoch);
    }
  }
  fence_.reset();
  handled_registrations_.clear();
  AfterChange();
}

void ClusterController::AlterIsr(const std::string& topic, int32_t partition, int32_t leader,
                                 int32_t leader_epoch, std::vector<int32_t> new_isr,
                                 int64_t expected_version, IsrStore::BrokerEpochs broker_epochs,
                                 IsrStore::Done done) {
  if (stopping_.load() || loop_ == nullptr) return done(IsrError::kUnavailable, 0);
  loop_->Post([this, topic, partition, leader, leader_epoch, new_isr = std::move(new_isr),
               expected_version, broker_epochs = std::move(broker_epochs), done = std::move(done)] {
    // A broker shutting down never joins an ISR again (as KIP-841's controller refuses a
    // shutting-down replica): it is leaving, its progress soon stale.
    const std::set<int32_t> leaving = view_.Leaving();
    auto held = view_.partitions().find({topic, partition});
    for (int32_t node : new_isr) {
      if (leaving.count(node) != 0 &&
          (held == view_.partitions().end() || !held->second.value.InIsr(node))) {
        return done(IsrError::kInvalidIsr, 0);
      }
    }
    MetadataWrite w;
    IsrError e = IsrChangeWrite(view_, topic, partition, leader, leader_epoch, new_isr,
                                expected_version, broker_epochs, &w);
    if (e != IsrError::kNone) return done(e, 0);
    // A refusal: the state moved in etcd before this broker saw it; the watch brings it
    // and the roles are told again. A lost answer is resolved by a re-read.
    const IsrApplied applied = ApplyIsrChange(*etcd_, w, expected_version);
    if (applied.error != IsrError::kNone) return done(applied.error, 0);
    // What this broker wrote is in its view at once (the watch brings it again later).
    (void)view_.Put(w.puts[0].key, w.puts[0].value, applied.revision, applied.revision);
    done(IsrError::kNone, applied.revision);
    AfterChange();  // the leadership again, with the ISR at its new revision
  });
}

Result<std::unique_ptr<Partition>> ClusterController::OpenPartition(const TopicInfo& topic,
                                                                    int32_t p,
                                                                    int32_t leader_epoch) {
  storage::Env* env = options_.local.env;
  const std::string dir = logs_.Dir(topic.name, p);
  const std::string marker = dir + "/partition.metadata";
  if (env->Exists(marker)) {
    ASSIGN_OR_RETURN(std::string text, ReadSmallFile(env, marker, 4096));
    if (text != PartitionMetadata(topic.id)) {
      // A deleted topic's directory under the same name: its data is not this topic's.
      SLUICE_LOG(kClusterLog, kWarn, "{} belongs to another topic id: removing it", dir);
      RETURN_IF_ERROR(RemoveTree(dir));
    }
  } else if (env->Exists(dir)) {
    // No topic id: not written by a cluster broker (a single node's directory joining a
    // cluster). Not this topic's for sure, and not ours to delete: set aside, as Kafka sets
    // aside stray logs.
    const std::string stray = fmt::format("{}-{}-stray", dir, RandomUuid().ToString());
    SLUICE_LOG(kClusterLog, kWarn, "{} has no partition.metadata: moved to {}", dir, stray);
    RETURN_IF_ERROR(env->Rename(dir, stray));
    RETURN_IF_ERROR(env->SyncDir(options_.local.data_dir));
  }
  if (!env->Exists(marker)) {
    // The topic id first: a directory without one is never this broker's own.
    RETURN_IF_ERROR(env->CreateDirs(dir));
    RETURN_IF_ERROR(WriteFileDurably(env, dir, "partition.metadata", PartitionMetadata(topic.id)));
  }
  // Epochs come from etcd in a cluster: no local bump for an unclean stop or a recovery
  // cut (the controller decides), and the checkpoint ends with the epoch this broker
  // leads in.
  ASSIGN_OR_RETURN(std::unique_ptr<Partition> part,
                   logs_.Open(topic, p, LeaderEpochCache::Owner::kCluster));
  if (leader_epoch >= 0) {
    RETURN_IF_ERROR(AlignEpochs(env, dir, *part->log, &part->epochs, leader_epoch));
  }
  return part;
}

void ClusterController::ClosePartition(const PartitionKey& key, bool remove_dir) {
  if (logs_.Find(key) == nullptr) return;
  std::unique_ptr<Partition> part = logs_.Take(key);
  catalog_epochs_.erase(key);
  if (part != nullptr) {
    if (Status st = part->log->Close(); !st.ok()) {
      SLUICE_LOG(kClusterLog, kWarn, "closing {}-{}: {}", key.first, key.second, st.ToString());
    }
  }
  SLUICE_LOG(kClusterLog, kInfo, "closed {}-{}{}", key.first, key.second,
             remove_dir ? " (deleted)" : "");
  if (remove_dir) {
    if (Status st = RemoveTree(logs_.Dir(key.first, key.second)); !st.ok()) {
      SLUICE_LOG(kClusterLog, kWarn, "removing {}", st.ToString());
    }
  }
}

void ClusterController::ScheduleRetention() {
  if (options_.local.retention_check_interval_ms <= 0) return;
  loop_->RunAfter(options_.local.retention_check_interval_ms, [this] {
    logs_.RunRetention([this](const std::string& topic) { return ConfigOf(topic); });
    ScheduleRetention();
  });
}

// ---------------------------------------------------------------------------------------
// Topics

TopicError ClusterController::NotController() const {
  const auto& held = view_.controller();
  return {ErrorCode::kNotController,
          held.has_value()
              ? fmt::format("broker {} is not the controller; broker {} is", node_id(),
                            held->value.node)
              : fmt::format("broker {} is not the controller; none is elected now", node_id())};
}

TopicError ClusterController::CheckWrite(const Result<TxnResponse>& r, const std::string& what) {
  if (!r.ok()) {
    return {ErrorCode::kRequestTimedOut, fmt::format("{}: {}", what, r.status().message())};
  }
  if (r->succeeded) return {};
  // Either the fence (another controller) or the topic changed meanwhile.
  const auto& held = view_.controller();
  if (!held.has_value() || held->value.node != node_id()) return NotController();
  return {ErrorCode::kUnknownServerError,
          fmt::format("{}: the metadata changed meanwhile; try again", what)};
}

std::vector<int32_t> ClusterController::RegisteredBrokers() {
  // Read from etcd, not the view: brokers that registered a moment ago (all of them, when
  // a cluster starts) may not have reached this broker's watch yet, and an assignment
  // made without them would never spread to them.
  auto listed = etcd_->RangePrefix(view_.keys().Brokers());
  if (listed.ok()) {
    for (const KeyValue& kv : listed->kvs) {
      (void)view_.Put(kv.key, kv.value, kv.mod_revision, kv.create_revision);
    }
  } else {
    SLUICE_LOG(kClusterLog, kWarn, "listing the brokers: {}; assigning from the watched ones",
               listed.status().ToString());
  }
  std::vector<int32_t> nodes;
  for (const auto& [node, reg] : view_.brokers()) nodes.push_back(node);
  return nodes;
}

TopicError ClusterController::ForwardTopicWrite(MetadataWrite write, ErrorCode on_conflict,
                                                const std::string& what) {
  // Without the fence: a broker's topic write compares the topic's keys only (a controller
  // replaced meanwhile changes nothing a topic's value says).
  const std::string fence_key = view_.keys().ControllerEpoch();
  std::erase_if(write.compares,
                [&](const MetadataWrite::Compare& c) { return c.key == fence_key; });
  auto r = Apply(write);
  if (!r.ok()) {
    return {ErrorCode::kRequestTimedOut, fmt::format("{}: {}", what, r.status().message())};
  }
  if (!r->succeeded) {
    return {on_conflict, fmt::format("{}: the topic changed meanwhile (it exists, is being "
                                     "deleted, or grew); look again",
                                     what)};
  }
  AfterChange();
  return {};
}

const TopicInfo* ClusterController::FindTopic(const std::string& name) const {
  auto it = topic_infos_.find(name);
  return it == topic_infos_.end() ? nullptr : &it->second;
}

const TopicInfo* ClusterController::FindTopicById(const kafka::Uuid& id) const {
  for (const auto& [name, info] : topic_infos_) {
    if (info.id == id) return &info;
  }
  return nullptr;
}

TopicError ClusterController::CreateTopic(const std::string& name, int32_t partitions,
                                          const std::map<std::string, std::string>& overrides,
                                          bool validate_only, TopicInfo* info) {
  return CreateReplicatedTopic(name, partitions, -1, overrides, validate_only, info);
}

TopicError ClusterController::CreateReplicatedTopic(
    const std::string& name, int32_t partitions, int32_t replication_factor,
    const std::map<std::string, std::string>& overrides, bool validate_only, TopicInfo* info) {
  if (TopicError e = ValidateTopicName(name); !e.ok()) return e;
  if (view_.topics().count(name) != 0) {
    return {ErrorCode::kTopicAlreadyExists, fmt::format("topic '{}' already exists", name)};
  }
  if (view_.deleting().count(name) != 0) {
    return {ErrorCode::kTopicAlreadyExists, fmt::format("topic '{}' is being deleted", name)};
  }
  if (partitions < 1 || static_cast<size_t>(partitions) > kMaxPartitions) {
    return {ErrorCode::kInvalidPartitions,
            fmt::format("{} partitions: a topic has 1 to {}", partitions, kMaxPartitions)};
  }
  TopicError err;
  auto config = TopicConfig::Resolve(overrides, options_.local.topic_defaults, &err);
  if (!config.ok()) return err;
  const std::vector<int32_t> brokers = RegisteredBrokers();
  static thread_local std::mt19937 random{std::random_device{}()};
  const int32_t n = std::max<int32_t>(1, static_cast<int32_t>(brokers.size()));
  const int32_t rf = replication_factor == -1 ? 1 : replication_factor;
  Assignment a = AssignReplicas(brokers, partitions, rf, static_cast<int32_t>(random() % n),
                                static_cast<int32_t>(random() % n));
  if (a.error != AssignmentError::kNone) {
    return {a.error == AssignmentError::kInvalidPartitions ? ErrorCode::kInvalidPartitions
                                                           : ErrorCode::kInvalidReplicationFactor,
            a.message};
  }
  info->name = name;
  info->partitions = partitions;
  info->overrides = overrides;
  info->config = *config;
  info->id = {};
  if (validate_only) return {};
  const kafka::Uuid id = RandomUuid();
  TopicAssignment topic{IdText(id.hi, id.lo), std::move(a.replicas), overrides};
  if (!fence_.has_value()) {
    TopicError e =
        ForwardTopicWrite(CreateTopicWrites(view_.keys(), {}, name, topic, view_.Live()).at(0),
                          ErrorCode::kTopicAlreadyExists, fmt::format("creating topic '{}'", name));
    if (!e.ok()) return e;
    info->id = id;
    SLUICE_LOG(kClusterLog, kInfo,
               "created topic {} ({} partitions, replication factor {}, id {}); the controller "
               "elects its leaders",
               name, partitions, rf, id.ToString());
    return {};
  }
  std::vector<MetadataWrite> writes =
      CreateTopicWrites(view_.keys(), fence(), name, topic, view_.Live());
  for (size_t i = 0; i < writes.size(); ++i) {
    TopicError e = CheckWrite(Apply(writes[i]), fmt::format("creating topic '{}'", name));
    if (!e.ok()) {
      if (i == 0 && e.code != ErrorCode::kNotController && view_.topics().count(name) != 0) {
        return {ErrorCode::kTopicAlreadyExists, fmt::format("topic '{}' already exists", name)};
      }
      // Past the first write the topic exists: a later controller writes the missing states.
      if (i == 0) return e;
      SLUICE_LOG(kClusterLog, kWarn, "{}", e.message);
      break;
    }
  }
  info->id = id;
  SLUICE_LOG(kClusterLog, kInfo, "created topic {} ({} partitions, replication factor {}, id {})",
             name, partitions, rf, id.ToString());
  AfterChange();
  return {};
}

bool ClusterController::AutoCreateTopic(const std::string& name) {
  if (IsReservedTopic(name)) return CreateInternalTopic(name);
  if (!options_.local.auto_create_topics) return false;
  TopicInfo info;
  return CreateReplicatedTopic(name, options_.local.num_partitions, -1, {}, false, &info).ok();
}

TopicError ClusterController::DeleteTopic(const std::string& name) {
  auto it = view_.topics().find(name);
  if (it == view_.topics().end()) {
    return {ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name)};
  }
  const std::string id = it->second.value.id;
  const std::string what = fmt::format("deleting topic '{}'", name);
  TopicError e =
      fence_.has_value()
          ? CheckWrite(
                Apply(DeleteTopicWrite(view_.keys(), fence(), name, it->second.mod_revision, id)),
                what)
          : ForwardTopicWrite(DeleteTopicWrite(view_.keys(), {}, name, it->second.mod_revision, id),
                              ErrorCode::kUnknownServerError, what);
  if (!e.ok()) return e;
  SLUICE_LOG(kClusterLog, kInfo, "deleted topic {}", name);
  AfterChange();
  return {};
}

TopicError ClusterController::AddPartitions(const std::string& name, int32_t count,
                                            bool validate_only) {
  auto it = view_.topics().find(name);
  if (it == view_.topics().end()) {
    return {ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name)};
  }
  const TopicAssignment& topic = it->second.value;
  const auto before = static_cast<int32_t>(topic.partitions.size());
  if (count <= before) {
    return {ErrorCode::kInvalidPartitions,
            fmt::format("Topic currently has {} partitions, which is higher than the requested {}.",
                        before, count)};
  }
  if (static_cast<size_t>(count) > kMaxPartitions) {
    return {ErrorCode::kInvalidPartitions,
            fmt::format("{} partitions: a topic has at most {}", count, kMaxPartitions)};
  }
  const std::vector<int32_t> brokers = RegisteredBrokers();
  static thread_local std::mt19937 random{std::random_device{}()};
  Assignment a = AssignNewPartitions(topic.partitions, brokers, count - before,
                                     static_cast<int32_t>(random() % 1024));
  if (a.error != AssignmentError::kNone) {
    return {ErrorCode::kInvalidReplicationFactor, a.message};
  }
  if (validate_only) return {};
  TopicAssignment grown = topic;
  for (auto& r : a.replicas) grown.partitions.push_back(std::move(r));
  if (!fence_.has_value()) {
    TopicError e = ForwardTopicWrite(
        AddPartitionsWrites(view_.keys(), {}, name, it->second.mod_revision, grown, before,
                            view_.Live())
            .at(0),
        ErrorCode::kUnknownServerError, fmt::format("adding partitions to '{}'", name));
    if (!e.ok()) return e;
    SLUICE_LOG(kClusterLog, kInfo, "topic {}: {} partitions, was {}; the controller elects", name,
               count, before);
    return {};
  }
  std::vector<MetadataWrite> writes = AddPartitionsWrites(
      view_.keys(), fence(), name, it->second.mod_revision, grown, before, view_.Live());
  for (size_t i = 0; i < writes.size(); ++i) {
    TopicError e = CheckWrite(Apply(writes[i]), fmt::format("adding partitions to '{}'", name));
    if (!e.ok()) {
      if (i == 0) return e;
      SLUICE_LOG(kClusterLog, kWarn, "{}", e.message);
      break;
    }
  }
  SLUICE_LOG(kClusterLog, kInfo, "topic {}: {} partitions, was {}", name, count, before);
  AfterChange();
  return {};
}

TopicError ClusterController::SetTopicConfigs(
    const std::string& name, const std::map<std::string, std::optional<std::string>>& changes,
    bool replace_all, bool validate_only) {
  // Any broker may change a topic's configs (a CAS on the topic's value): AlterConfigs
  // goes to any broker, as in Kafka's ZooKeeper era.
  auto it = view_.topics().find(name);
  if (it == view_.topics().end()) {
    return {ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name)};
  }
  TopicAssignment next = it->second.value;
  if (replace_all) next.configs.clear();
  for (const auto& [key, value] : changes) {
    if (value.has_value()) {
      next.configs[key] = *value;
    } else {
      next.configs.erase(key);
    }
  }
  TopicError err;
  auto config = TopicConfig::Resolve(next.configs, options_.local.topic_defaults, &err);
  if (!config.ok()) return err;
  if (validate_only) return {};
  MetadataWrite w;
  w.compares.push_back({view_.keys().Topic(name), it->second.mod_revision});
  w.puts.push_back({view_.keys().Topic(name), ToJson(next), 0});
  auto r = Apply(w);
  if (!r.ok()) {
    return {ErrorCode::kRequestTimedOut,
            fmt::format("changing the configs of '{}': {}", name, r.status().message())};
  }
  if (!r->succeeded) {
    return {ErrorCode::kUnknownServerError,
            fmt::format("the topic '{}' changed meanwhile; try again", name)};
  }
  AfterChange();  // the logs this broker leads take the new configs
  return {};
}

storage::PartitionLog* ClusterController::LogOf(const std::string& topic, int32_t partition) {
  return logs_.LogOf({topic, partition});
}

Result<int64_t> ClusterController::AllocateProducerId() {
  // Blocks of kProducerIdBlockSize from etcd by CAS (decision 12): unique for the cluster.
  for (int attempt = 0; next_producer_id_ >= producer_id_block_end_; ++attempt) {
    if (attempt == 20) return AbortedError("producer id blocks: too many concurrent takers");
    ASSIGN_OR_RETURN(GetResponse got, etcd_->Get(view_.keys().ProducerIds()));
    std::optional<ProducerIdBlock> current;
    int64_t revision = 0;
    if (got.kv.has_value()) {
      auto parsed = ParseProducerIdBlock(got.kv->value);
      if (!parsed.ok()) {
        return CorruptionError("etcd {}: {}", view_.keys().ProducerIds(),
                               parsed.status().message());
      }
      current = *parsed;
      revision = got.kv->mod_revision;
    }
    auto [first, write] = TakeProducerIdBlock(view_.keys(), current, revision);
    ASSIGN_OR_RETURN(TxnResponse r, Apply(write));
    if (r.succeeded) {
      next_producer_id_ = first;
      producer_id_block_end_ = first + kProducerIdBlockSize;
    }
  }
  return next_producer_id_++;
}

void ClusterController::Publish() {
  publisher_->Publish(view_.Snapshot(node_id(), options_.local.topic_defaults, !lease_lost_));
}

bool ClusterController::TopicLed(const std::string& name, const kafka::Uuid& id,
                                 int32_t partitions) const {
  const std::string id_text = id == kafka::Uuid{} ? std::string() : IdText(id.hi, id.lo);
  return view_.PartitionsLed(name, id_text, partitions, node_id(), !lease_lost_);
}

void ClusterController::AwaitMetadata(std::function<bool()> ready, int64_t timeout_ms,
                                      std::function<void(bool)> done) {
  if (ready()) {
    done(true);
    return;
  }
  if (timeout_ms <= 0 || loop_ == nullptr || stopping_.load()) {
    done(false);
    return;
  }
  const uint64_t id = next_metadata_wait_++;
  MetadataWait& w = metadata_waits_[id];
  w.ready = std::move(ready);
  w.done = std::move(done);
  w.timer = loop_->RunAfter(timeout_ms, [this, id] {
    auto it = metadata_waits_.find(id);
    if (it == metadata_waits_.end()) return;
    auto done = std::move(it->second.done);
    const bool ready = it->second.ready();
    metadata_waits_.erase(it);
    done(ready);
  });
}

void ClusterController::CatchUp(int64_t timeout_ms, std::function<void()> done) {
  if (loop_ == nullptr || stopping_.load() || timeout_ms <= 0) {
    done();
    return;
  }
  loop_->Post([this, timeout_ms, done = std::move(done)]() mutable {
    catch_ups_.emplace_back(timeout_ms, std::move(done));
    if (catch_up_read_queued_) return;
    catch_up_read_queued_ = true;
    // Queued behind whatever else is posted, so the calls arriving meanwhile share it.
    loop_->Post([this] {
      catch_up_read_queued_ = false;
      auto calls = std::move(catch_ups_);
      catch_ups_.clear();
      cluster::RangeRequest newest{.key = view_.keys().prefix(),
                                   .range_end = PrefixRangeEnd(view_.keys().prefix()),
                                   .limit = 1,
                                   .keys_only = true,
                                   .newest_first = true};
      Result<cluster::RangeResponse> r = etcd_->Range(newest);
      // Without etcd the view cannot be brought up to date: the callers go on with it.
      const int64_t target = r.ok() && !r->kvs.empty() ? r->kvs[0].mod_revision : 0;
      for (auto& [timeout, call] : calls) {
        AwaitMetadata([this, target] { return seen_revision_ >= target; }, timeout,
                      [call = std::move(call)](bool) { call(); });
      }
    });
  });
}

void ClusterController::CompleteMetadataWaits() {
  for (auto it = metadata_waits_.begin(); it != metadata_waits_.end();) {
    if (!it->second.ready()) {
      ++it;
      continue;
    }
    loop_->Cancel(it->second.timer);
    auto done = std::move(it->second.done);
    it = metadata_waits_.erase(it);
    done(true);
  }
}

}  // namespace sluice::broker
