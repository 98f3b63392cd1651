// ClusterController: the broker::Controller of a broker in a cluster whose metadata lives
// in etcd (docs/design/0018-cluster.md, decisions 2, 3, 9, 10, 12). It registers the broker
// under its lease, keeps a ClusterView current from a listing and a watch, competes for the
// `controller` key, and — while it holds it — assigns replicas, creates, grows and deletes
// topics and elects leaders (controller_decisions.h), every change a fenced CAS. Every
// broker publishes the MetadataSnapshot of its view and opens the logs of the partitions it
// leads; with ReplicaRoles (the replication core) also those it follows, and tells the
// ReplicaManager each role. It commits the leaders' ISR changes (EtcdIsrStore).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "auth/acl_store.h"
#include "auth/user_store.h"
#include "base/status.h"
#include "broker/broker_options.h"
#include "broker/client_quotas.h"
#include "broker/cluster_controller_roles.h"
#include "broker/cluster_controller_view.h"
#include "broker/controller.h"
#include "broker/event_loop.h"
#include "broker/local_logs.h"
#include "broker/metadata_controller.h"
#include "broker/metadata_snapshot.h"
#include "broker/partition.h"
#include "broker/replica_isr_store.h"
#include "broker/shards.h"
#include "cluster/etcd_client.h"
#include "cluster/lease_keeper.h"
#include "cluster/watcher.h"
#include "compaction/cleaner.h"
#include "query/authz/grants.h"

namespace sluice::broker {

struct ClusterControllerOptions {
  // The local logs' settings (data_dir, env, executor, files, flush, topic defaults,
  // wake_fetches): the same as a single node's.
  MetadataControllerOptions local;
  ClusterOptions cluster;
  std::string advertised_host;  // what clients are told (a fixed port: others register it)
  int32_t advertised_port = 0;
  // kafka.listeners' advertised addresses, registered for the others' Metadata answers
  // (empty: advertised_host:advertised_port on every listener).
  std::vector<cluster::ListenerAddress> listeners;
  // The replication core (optional; outlives the controller): with it, every replica on
  // this broker is opened and told its role; without it a broker opens only what it
  // leads, and a replication factor above 1 is a single copy.
  ReplicaRoles* roles = nullptr;
  // How long the start waits for etcd before it gives up (at least one try).
  int64_t connect_timeout_ms = 10'000;
};

// Connects to etcd and settles the cluster id with the data directory: etcd's, written to
// <data-dir>/meta/cluster_id when the directory has none; the directory's (or a new one)
// when etcd has none yet. FailedPrecondition when they differ, Unavailable-style IOError
// naming the endpoints when etcd does not answer within connect_timeout_ms.
Result<std::string> JoinClusterId(const ClusterControllerOptions& options);

// Lifecycle, as MetadataController's: Create on the controlling thread; OpenLogs (the
// lease, the registration, the first listing, the led partitions' logs) and Start (the
// controller's thread, the watch, the controller election); Stop (deregisters: the lease
// is revoked, so the others take over at once), then CloseLogs. The Controller methods run
// on the controller's thread.
class ClusterController : public Controller {
 public:
  static Result<std::unique_ptr<ClusterController>> Create(ClusterControllerOptions options,
                                                           Shards* shards,
                                                           MetadataPublisher* publisher);
  ~ClusterController() override;
  ClusterController(const ClusterController&) = delete;
  ClusterController& operator=(const ClusterController&) = delete;

  // The user store, cluster-wide (docs/design/0019-security.md, phase D): the whole store's
  // JSON in etcd's `users` key. A change is written with compare-and-swap on the key's
  // mod_revision (a change made meanwhile by another broker fails it: FailedPrecondition,
  // try again); the watch brings the others' changes in. Call once, before Start.
  Result<std::shared_ptr<auth::UserStore>> OpenUserStore();
  // Reads the `users` key again (after a change failed on a concurrent one).
  Status RefreshUsers() { return RefreshDocument(users_doc_); }
  // The ACL bindings, cluster-wide (phase E): etcd's `acls` key, kept as the users are.
  Result<std::shared_ptr<auth::AclStore>> OpenAclStore();
  Status RefreshAcls() { return RefreshDocument(acls_doc_); }
  // The client quotas, cluster-wide (phase F): etcd's `quotas` key, kept as the users are.
  Result<std::shared_ptr<QuotaStore>> OpenQuotaStore();
  Status RefreshQuotas() { return RefreshDocument(quotas_doc_); }
  // The SQL grants, cluster-wide (docs/design/0020): etcd's `grants` key, kept as the users
  // are.
  Result<std::shared_ptr<query::authz::GrantStore>> OpenGrantStore();

  // Controller
  Status OpenLogs(bool unclean_start) override;
  Status Start() override;
  void Stop() override;
  Status CloseLogs() override;
  void FlushLogs() override;
  size_t open_log_count() const override { return logs_.count(); }
  compaction::LogCleaner* cleaner() const override { return logs_.cleaner(); }
  void Post(std::function<void()> task) override;
  void RunAndWait(const std::function<void()>& fn) override;
  const TopicInfo* FindTopic(const std::string& name) const override;
  const TopicInfo* FindTopicById(const kafka::Uuid& id) const override;
  TopicError CreateTopic(const std::string& name, int32_t partitions,
                         const std::map<std::string, std::string>& overrides, bool validate_only,
                         TopicInfo* info) override;
  TopicError CreateReplicatedTopic(const std::string& name, int32_t partitions,
                                   int32_t replication_factor,
                                   const std::map<std::string, std::string>& overrides,
                                   bool validate_only, TopicInfo* info) override;
  bool AutoCreateTopic(const std::string& name) override;
  TopicError DeleteTopic(const std::string& name) override;
  TopicError AddPartitions(const std::string& name, int32_t count, bool validate_only) override;
  TopicError SetTopicConfigs(const std::string& name,
                             const std::map<std::string, std::optional<std::string>>& changes,
                             bool replace_all, bool validate_only) override;
  storage::PartitionLog* LogOf(const std::string& topic, int32_t partition) override;
  Result<int64_t> AllocateProducerId() override;
  void Publish() override;
  bool TopicLed(const std::string& name, const kafka::Uuid& id, int32_t partitions) const override;
  // Parked until AfterChange finds `ready` true, or a timer on the controller's loop fires.
  void AwaitMetadata(std::function<bool()> ready, int64_t timeout_ms,
                     std::function<void(bool)> done) override;
  // Reads the newest mod_revision under the cluster's keys from etcd (one read for every
  // call queued meanwhile) and parks each call until the view has it.
  void CatchUp(int64_t timeout_ms, std::function<void()> done) override;

  // A leader's ISR change (IsrStore::AlterIsr, through EtcdIsrStore), from any thread: on
  // the controller's thread, a CAS on partitions/<topic>/<p> (etcd_isr_store.h); `done`
  // runs there with the new revision, or kUnavailable once the controller stopped. After
  // an ambiguous etcd failure it re-reads the key and answers with what etcd holds.
  void AlterIsr(const std::string& topic, int32_t partition, int32_t leader, int32_t leader_epoch,
                std::vector<int32_t> new_isr, int64_t expected_version,
                IsrStore::BrokerEpochs broker_epochs, IsrStore::Done done);
  // This broker's last registration's etcd create_revision (its broker epoch), -1 before
  // the first. Any thread.
  int64_t BrokerEpoch() const { return broker_epoch_.load(); }
  // The same, for a reader that keeps it (it changes when the broker registers again).
  const std::atomic<int64_t>* BrokerEpochSource() const { return &broker_epoch_; }
  // The local deadline of this broker's etcd lease (LeaseKeeper::valid_until_ns), kept
  // here across re-registrations, for the shards to read (ReplicaManagerOptions).
  const std::atomic<int64_t>* LeaseDeadlineSource() const { return &lease_deadline_ns_; }
  // Tells the replication core every role again that it has not taken yet (it refuses
  // them until the server runs). Any thread.
  void ReissueRoles();
  // The controlled shutdown (decision 9; "shutdown (session 13)" in 0018), from the
  // stopping thread, before the server stops: writes shutdown/<node> under the broker's
  // lease, waits until the controller moved every leadership and ISR membership it can
  // out of this broker (at most `timeout_ms`), then, if this broker is the controller,
  // resigns. From then on this broker never becomes controller, follows only where it is
  // in the ISR, and its leaders refuse to add it back. True when nothing was left to move.
  bool ControlledShutdown(int64_t timeout_ms);

  int32_t node_id() const { return options_.cluster.node_id; }
  // Whether this broker holds the controller key now (controller's thread).
  bool is_controller() const { return fence_.has_value(); }

 private:
  ClusterController(ClusterControllerOptions options, Shards* shards, MetadataPublisher* publisher);

  // etcd
  Result<cluster::TxnResponse> Apply(const cluster::MetadataWrite& write);
  Status Register();
  Status ListAll();
  void OnWatchEvents(const cluster::WatchBatch& batch);
  void OnLeaseLost(const Status& why);
  // The lost lease's handling, on the controller's thread: steps down, registers again.
  void HandleLeaseLoss();

  // After every change of the view: local logs, the controller's duties, a new snapshot.
  void AfterChange();
  void TryBecomeController();
  void ControllerDuties();
  // The internal topics (cluster_internal_topics.cc, 0018 "coordmove"): created with
  // min(3, registered brokers) replicas when asked (`AutoCreateTopic` of their names, on
  // a FindCoordinator), and by the controller itself once three brokers are registered.
  bool CreateInternalTopic(const std::string& name);
  void MaybeCreateInternalTopics();
  TopicError NotController() const;
  // One step of ControlledShutdown (controller's thread): the request written if the view
  // lacks it, the partitions still to move counted.
  size_t ShutdownStep();
  // Gives the controller key up (controller's thread), if this broker holds it.
  void Resign();
  // The registered brokers' node ids, as etcd holds them now.
  std::vector<int32_t> RegisteredBrokers();
  TopicError CheckWrite(const Result<cluster::TxnResponse>& r, const std::string& what);
  // A topic change made by a broker that is not the controller (CreateTopics,
  // CreatePartitions, DeleteTopics and auto-creation forwarded through etcd): `write`, the
  // topic's value as the controller would write it, without the controller_epoch compare;
  // the controller sees the topic and writes its partition states (ControllerDuties).
  // `on_conflict` when the topic's keys changed meanwhile.
  TopicError ForwardTopicWrite(cluster::MetadataWrite write, kafka::ErrorCode on_conflict,
                               const std::string& what);
  const cluster::ControllerFence& fence() const { return *fence_; }

  // The parked AwaitMetadata calls whose `ready` now holds: answered (end of AfterChange).
  void CompleteMetadataWaits();

  // Local logs: open what this broker leads, close what it no longer does; with roles
  // (ReconcileReplicas), every replica it holds, and its role.
  void ReconcileLogs();
  void ReconcileReplicas();
  // Whether this broker may lead a partition whose state names it leader: the state was
  // written since this registration, and its ISR entry (if any) is this incarnation's.
  bool MayLead(const ClusterView::Versioned<cluster::PartitionState>& state) const;
  Result<std::unique_ptr<Partition>> OpenPartition(const TopicInfo& topic, int32_t p,
                                                   int32_t leader_epoch);
  void ClosePartition(const PartitionKey& key, bool remove_dir);
  // Retention passes over the open logs, every retention_check_interval_ms (the cleaner
  // takes those of compacted topics: LocalLogs).
  void ScheduleRetention();
  // The config of a topic in the view (null when it has none), for the catalog.
  const TopicConfig* ConfigOf(const std::string& topic) const;

  const ClusterControllerOptions options_;
  Shards* const shards_;
  MetadataPublisher* const publisher_;
  std::unique_ptr<cluster::EtcdClient> etcd_;
  std::unique_ptr<cluster::LeaseKeeper> lease_;
  std::unique_ptr<cluster::Watcher> watcher_;
  // A store kept whole in one etcd key (users, acls): changed with compare-and-swap on the
  // key's mod_revision, a newer value from a listing or the watch replaces the store's.
  struct EtcdDocument {
    explicit EtcdDocument(std::string k) : key(std::move(k)) {}
    const std::string key;
    std::atomic<int64_t> revision{0};                 // the mod_revision the store holds
    std::function<Status(std::string_view)> replace;  // set once the store is open
    Status load_error;
  };
  // Reads `doc` into *json and returns the store's persist callback (null on an etcd
  // error, kept in doc.load_error).
  auth::AclStore::Persist LoadDocument(EtcdDocument& doc, std::string_view what, std::string* json);
  // True when `key` is a document's (its store then has the value if newer).
  bool SyncDocuments(const std::string& key, const std::string& value, int64_t mod_revision);
  void SyncDocument(EtcdDocument& doc, const std::string& value, int64_t mod_revision);
  Status RefreshDocument(EtcdDocument& doc);
  EtcdDocument users_doc_;
  EtcdDocument acls_doc_;
  EtcdDocument quotas_doc_;
  EtcdDocument grants_doc_;
  std::string incarnation_;
  bool clean_ = true;
  bool unclean_start_ = false;
  bool lease_lost_ = false;  // controller's thread: no registration until a new one is made
  bool leaving_ = false;     // controller's thread: a controlled shutdown began

  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
  // The controller's thread's (the controlling thread's before Start and after Stop).
  ClusterView view_;
  int64_t listed_revision_ = 0;
  // Every change up to this revision is in view_: the last listing's, or the newest
  // watched event's (CatchUp waits for it).
  int64_t seen_revision_ = 0;
  // CatchUp's calls not yet given a revision to wait for, and whether a read is queued.
  std::vector<std::pair<int64_t, std::function<void()>>> catch_ups_;
  bool catch_up_read_queued_ = false;
  std::map<std::string, TopicInfo> topic_infos_;      // FindTopic's answers, from view_
  std::optional<cluster::ControllerFence> fence_;     // set while this is the controller
  std::map<int32_t, int64_t> handled_registrations_;  // node -> broker epoch handled
  LocalLogs logs_;                                    // the open partitions
  std::map<PartitionKey, int32_t> catalog_epochs_;    // the epoch each was opened in
  // The role each open replica was last told, as (leader, leader epoch, revision, min ISR,
  // replicas); a follower's revision is 0 (an ISR change does not concern it).
  struct IssuedRole {
    int32_t leader = -1;
    int32_t leader_epoch = -1;
    int64_t revision = 0;
    int32_t min_insync_replicas = 1;
    std::vector<int32_t> replicas;
    bool operator==(const IssuedRole&) const = default;
  };
  std::map<PartitionKey, IssuedRole> issued_;
  // AwaitMetadata's parked calls, by id (controller's thread).
  struct MetadataWait {
    std::function<bool()> ready;
    std::function<void(bool)> done;
    EventLoop::TimerId timer = 0;
  };
  std::map<uint64_t, MetadataWait> metadata_waits_;
  uint64_t next_metadata_wait_ = 1;
  int64_t next_producer_id_ = 0;
  int64_t producer_id_block_end_ = 0;
  std::atomic<int64_t> broker_epoch_{-1};
  std::atomic<int64_t> lease_deadline_ns_{0};  // written by the lease keeper
  std::atomic<bool> stopping_{false};
  // A lost lease not yet handled: set by the lease keeper's thread, taken by
  // HandleLeaseLoss on the controller's thread (Start() posts it for a loss while starting).
  std::atomic<bool> lease_loss_pending_{false};
};

}  // namespace sluice::broker
