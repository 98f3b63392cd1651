// Broker: the Kafka request handler of `sluice serve`, and the one place its parts are
// wired together. It decodes each request frame, passes it through the SASL gate and
// dispatches it by API key to its handler (handlers/handlers.h, one file per API family).
// The parts (docs/design/0002-broker-plan.md, decisions 2 and 16):
//   Shards              the shards' loops, which shard owns which partition, posting
//   MetadataController  topics, the open partition logs, producer ids, retention, on
//                       its own thread; publishes MetadataSnapshots (MetadataPublisher)
//   GroupCoordinator    consumer groups and committed offsets, on its own thread
//
// A single node (no etcd): node id 1 is every partition's leader and the controller,
// advertised at the listen address. With etcd (BrokerOptions::cluster) the controller is a
// ClusterController: the broker is one of a cluster (docs/design/0018-cluster.md).
//
// Data directory:
//   <data-dir>/meta/topics.json   the topics (TopicStore)
//   <data-dir>/meta/cluster_id    22 characters of URL-safe base64, made at first start
//   <data-dir>/<topic>-<p>/       one PartitionLog per partition; a deleted topic's
//                                 directories are renamed <dir>-delete, then removed
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "auth/user_store.h"
#include "base/status.h"
#include "broker/broker_options.h"
#include "broker/client_quotas.h"
#include "broker/connection.h"
#include "broker/event_loop.h"
#include "broker/in_process_kafka.h"
#include "broker/metadata_snapshot.h"
#include "broker/remote_reader.h"
#include "broker/remote_segments.h"
#include "query/authz/grants.h"
#include "storage/env.h"

namespace sluice::broker {

class BrokerTxnParticipants;
class ClusterController;
class Controller;
class CoordinatorRoles;
class EtcdIsrStore;
class ReplicaManager;
class ReplicaManagerRoles;
struct ClusterTxnLinks;
class Shards;
class TxnCoordinator;
namespace handlers {
struct Context;
}

// Lifecycle: Open() on the controlling thread; hand it to a Server, which calls
// OnServerStart (the broker learns the shards' loops and moves each partition to its
// owner) before its threads run and OnServerStop after they stopped; then Close() (the
// destructor closes too). The Broker must outlive the server.
//
// Threads:
// - Each partition has one owner shard, Shards::OwnerOf(topic id, partition). The owner's thread
//   alone touches its Partition: the producer-state check and the append, reads for
//   Fetch / ListOffsets / OffsetForLeaderEpoch, and the fetches waiting on it. A request
//   arrives on its connection's shard, which splits it by owner, posts each part to its
//   owner's loop (runs it inline when that is itself) and assembles the answer when every
//   part has posted back. No lock is shared between shards on the request path.
// - The topics, the producer-id block, the catalog of open logs and the retention timer
//   belong to the metadata controller's thread. Admin requests (create/delete topics,
//   create partitions, alter configs, delete records, InitProducerId, auto-creation) are
//   posted to it; its fsyncs and log opens and closes never run on a shard. It hands new
//   partitions to their owners (and takes deleted ones back) by posting and waiting,
//   then publishes a new MetadataSnapshot.
// - PartitionLog callbacks (acks, data readable) come from I/O threads; they only post to
//   loops, through a gate that StopWaking() closes.
class Broker : public RequestHandler {
 public:
  static constexpr int32_t kNodeId = ::sluice::broker::kNodeId;

  // Creates the data directory and the cluster id when missing, loads the topics and
  // opens every partition's log (removing leftover *-delete directories).
  static Result<std::unique_ptr<Broker>> Open(BrokerOptions options);
  ~Broker() override;
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Sets the address clients are told to connect to, once the server knows its port
  // (any thread).
  void SetAdvertisedAddress(std::string host, int32_t port);
  // One advertised address per listener (kafka.listeners), once the ports are known.
  void SetAdvertisedEndpoints(std::vector<MetadataSnapshot::Endpoint> endpoints);

  // The shards: called by the Server with its loops before their threads start (once),
  // and after they stopped (the broker stops posting to them).
  void OnServerStart(const std::vector<EventLoop*>& loops) override;
  void OnServerStop() override;

  void OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) override;

  // Stops the metadata controller's thread, then flushes and closes every log (call
  // after the server stopped). Idempotent.
  Status Close();

  const std::string& cluster_id() const { return cluster_id_; }
  // "" when this broker serves clients as its cluster's member: always for a single node;
  // with etcd, once registered and while its lease holds. Otherwise why not (for /readyz).
  // Any thread.
  std::string ClusterReadiness() const;
  // The user store every port authenticates against (phase D of 0019); shared with the
  // query server.
  const std::shared_ptr<auth::UserStore>& users() const { return users_; }
  // The SQL grants the query server checks (docs/design/0020), kept here beside the users
  // and ACLs: <data-dir>/meta/grants.json, or etcd's in a cluster.
  const std::shared_ptr<query::authz::GrantStore>& grants() const { return grants_; }
  // The password of this process's own Kafka clients (user kInternalUser of sasl.h): random
  // per process, never stored or logged.
  const std::string& internal_secret() const { return internal_secret_; }
  // Adds each of `users` (name, password) the store lacks; `from` names the config key.
  Status SeedUsers(const std::vector<std::pair<std::string, std::string>>& users, int iterations,
                   std::string_view from);
  // Open partition logs (tests; any thread).
  size_t open_log_count() const;
  // Fetches waiting for data, counted once per partition they wait on (tests; asks every
  // shard and waits for the answers).
  size_t waiting_fetch_count();
  // The first step of a graceful stop in a cluster, while the server still runs and
  // accepts connections: the controller moves this broker's leaderships to other in-sync
  // replicas (a controlled shutdown, cluster.controlled_shutdown_timeout at most). Nothing
  // on a single node. Any thread but a shard's or the controller's.
  void ControlledShutdown();
  // For a graceful stop, while the server still runs: fetches stop waiting (the waiting
  // ones are answered now, new ones at once) and every log is flushed, so in-flight
  // produces get their acks. Any thread but a shard's.
  void Drain();
  // Stops posting to the shards' loops (fetch wake-ups, produce acks, parts of requests,
  // answers from the metadata controller): logs may still report new data or acks while
  // the loops are being destroyed. Returns once no post is in progress. Any thread.
  void StopWaking();
  // The published topics (any thread; takes a short lock: shards use their own copy).
  std::shared_ptr<const MetadataSnapshot> Snapshot() const;
  // The handlers' context, for tests that reach the broker's parts as the wiring does
  // (the shards; a TxnVerifier set before the first request).
  handlers::Context& context_for_testing() { return *context_; }
  // The broker for a consumer in this process (a pipeline of `sluice serve`): reads and
  // group requests without the Kafka protocol (docs/design/0023-native-path.md).
  InProcessKafka& in_process() { return *in_process_; }

 private:
  Broker(BrokerOptions options, std::string cluster_id);

  const BrokerOptions options_;
  const std::string cluster_id_;
  std::unique_ptr<SaslAuthenticator> sasl_;           // null when SASL is off; immutable
  std::shared_ptr<auth::UserStore> users_;            // <data-dir>/meta/users.json
  std::unique_ptr<Authorizer> authorizer_;            // its ACLs: <data-dir>/meta/acls.json
  std::unique_ptr<ClientQuotas> quotas_;              // <data-dir>/meta/quotas.json
  std::shared_ptr<query::authz::GrantStore> grants_;  // <data-dir>/meta/grants.json
  const std::string internal_secret_ = NewInternalSecret();
  static std::string NewInternalSecret();
  std::unique_ptr<GroupCoordinator> groups_;  // thread-safe: posts to its own thread
  // The transaction coordinator and what it writes markers through (thread-safe). Closed
  // first, destroyed after the group coordinator (which verifies with it).
  std::unique_ptr<BrokerTxnParticipants> txn_participants_;
  // With etcd: markers to other brokers' partitions and verifications with another
  // broker's coordinator (txn_cluster.h); stopped by Close after the coordinator.
  std::unique_ptr<ClusterTxnLinks> txn_cluster_;
  std::unique_ptr<TxnCoordinator> txns_;
  // Declared before the logs: destroyed after them.
  std::unique_ptr<storage::IoExecutor> executor_;
  std::unique_ptr<storage::FileCache> files_;
  MetadataPublisher publisher_;
  std::unique_ptr<Shards> shards_;  // the partitions' logs live in its shards
  // Tiered storage: the remote segments the uploader publishes (outliving the controller).
  std::unique_ptr<RemoteSegments> remote_index_;
  // MetadataController for a single node, ClusterController with etcd.
  std::unique_ptr<Controller> controller_;
  // With etcd: the controller as a ClusterController, the roles it tells, the ISR store
  // it serves and the replication core (made at OnServerStart, stopped by StopWaking
  // before the server stops, destroyed after the logs closed). Null for a single node.
  ClusterController* cluster_ = nullptr;
  std::unique_ptr<ReplicaManagerRoles> roles_;
  // In front of roles_: moves the coordinators' partitions with their leadership (0018,
  // "coordmove"); detached in Close before the coordinators close.
  std::unique_ptr<CoordinatorRoles> coord_roles_;
  std::unique_ptr<EtcdIsrStore> isr_store_;
  std::unique_ptr<ReplicaManager> replicas_;
  std::unique_ptr<handlers::Context> context_;
  std::unique_ptr<InProcessKafka> in_process_;  // over context_
  // Tiered storage's reads: destroyed first (its threads answer into the context).
  std::unique_ptr<RemoteReader> remote_reader_;

  bool serving_ = false;       // the logs were opened (set at Open)
  bool closed_ = false;        // controlling thread
  bool clean_marked_ = false;  // controlling thread
};

// Reads <data-dir>/meta/cluster_id, creating it (durably) with a random id when missing.
Result<std::string> LoadOrCreateClusterId(const std::string& data_dir,
                                          storage::Env* env = storage::Env::Posix());

}  // namespace sluice::broker
