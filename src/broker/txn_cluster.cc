// ClusterTxnParticipants and ClusterTxnVerifier: see txn_cluster.h.
#include "broker/txn_cluster.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "base/crash_point.h"
#include "broker/coordinator_partitions.h"
#include "broker/txn_participants.h"
#include "broker/txn_partition_markers.h"

namespace sluice::broker {

using kafka::ErrorCode;

namespace {

constexpr int16_t kWriteTxnMarkersVersion = 1;
constexpr int16_t kVerifyVersion = 4;  // AddPartitionsToTxn's broker form (KIP-890)

InterBrokerChannelOptions ChannelOptions(const char* name, int32_t node_id, int timeout_ms,
                                         std::shared_ptr<const InterBrokerSecurity> security) {
  InterBrokerChannelOptions o;
  o.name = name;
  o.node_id = node_id;
  o.request_timeout_ms = timeout_ms;
  o.security = std::move(security);
  return o;
}

}  // namespace

ClusterTxnLinks::ClusterTxnLinks(int32_t node_id, Shards* shards, TxnParticipants* groups,
                                 std::shared_ptr<const InterBrokerSecurity> security)
    // A marker's answer waits for replication (kMarkerReplicationTimeoutMs) on top of
    // the connection's own delays.
    : markers(
          ChannelOptions("txn-markers", node_id, kMarkerReplicationTimeoutMs + 10000, security)),
      verifications(ChannelOptions("txn-verify", node_id, 30000, security)),
      participants(shards, &markers, groups),
      shards_(shards) {}

void ClusterTxnLinks::SetLocalCoordinator(TxnVerifier* local) {
  verifier = std::make_unique<ClusterTxnVerifier>(shards_, &verifications, local);
}

void ClusterTxnLinks::Stop() {
  markers.Stop();
  verifications.Stop();
}

int32_t TxnCoordinatorNode(const MetadataSnapshot& meta, const std::string& transactional_id) {
  if (!meta.cluster) return meta.node_id;
  // The leader of the id's partition of __transaction_state (as FindCoordinator answers,
  // handlers/groups.cc; 0018 "coordmove"); -1 while it has none or the topic is missing.
  const MetadataSnapshot::Topic* t = meta.Find("__transaction_state");
  if (t == nullptr || t->partitions.empty()) return -1;
  const int32_t p =
      CoordinatorPartitionFor(transactional_id, static_cast<int32_t>(t->partitions.size()));
  return t->partitions[static_cast<size_t>(p)].leader;
}

bool InterBrokerAddress(const MetadataSnapshot& meta, int32_t node, std::string* host,
                        int32_t* port) {
  for (const MetadataSnapshot::Broker& b : meta.brokers) {
    if (b.node_id != node) continue;
    const bool own = !b.inter_broker_host.empty() && b.inter_broker_port > 0;
    *host = own ? b.inter_broker_host : b.host;
    *port = own ? b.inter_broker_port : b.port;
    return true;
  }
  return false;
}

std::vector<kafka::TxnTopic> GroupByTopic(const std::vector<TopicPartition>& partitions) {
  std::vector<kafka::TxnTopic> topics;
  std::map<std::string, size_t> at;
  for (const TopicPartition& tp : partitions) {
    auto [it, fresh] = at.emplace(tp.topic, topics.size());
    if (fresh) topics.push_back(kafka::TxnTopic{tp.topic, {}, {}});
    topics[it->second].partitions.push_back(tp.partition);
  }
  return topics;
}

std::vector<ErrorCode> ErrorsFor(const std::vector<TopicPartition>& partitions,
                                 const std::vector<kafka::TxnTopicErrors>& topics,
                                 ErrorCode missing) {
  std::map<TopicPartition, ErrorCode> answered;
  for (const auto& t : topics) {
    for (const auto& p : t.partitions) {
      answered.emplace(TopicPartition{t.name, p.partition_index}, p.error_code);
    }
  }
  std::vector<ErrorCode> out;
  out.reserve(partitions.size());
  for (const TopicPartition& tp : partitions) {
    auto it = answered.find(tp);
    out.push_back(it != answered.end() ? it->second : missing);
  }
  return out;
}

void ClusterTxnParticipants::WritePartitionMarkers(
    const TxnMarker& marker, std::vector<TopicPartition> partitions,
    std::function<void(std::vector<ErrorCode>)> done) {
  if (partitions.empty()) return done({});
  auto gather = std::make_shared<TxnAnswerGather>(partitions.size(), std::move(done));
  WritePartitionMarkersInParts(marker, std::move(partitions),
                               [gather](std::vector<size_t> which, std::vector<ErrorCode> errors) {
                                 for (size_t j = 0; j < which.size(); ++j) {
                                   gather->Set(which[j], errors[j]);
                                 }
                               });
}

void ClusterTxnParticipants::WritePartitionMarkersInParts(const TxnMarker& marker,
                                                          std::vector<TopicPartition> partitions,
                                                          MarkerPart part) {
  if (partitions.empty()) return;
  // Each part's answer: the crash point as each partition is done, as on one node.
  auto answer = [part](std::vector<size_t> which, std::vector<ErrorCode> errors) {
    errors.resize(which.size(), ErrorCode::kUnknownServerError);
    for (ErrorCode e : errors) {
      if (e == ErrorCode::kNone) CrashPoint("txn-partition-marker");
    }
    part(std::move(which), std::move(errors));
  };
  // Each partition to its leader now (the snapshot's): this broker, another, or none.
  std::shared_ptr<const MetadataSnapshot> meta = shards_->Published();
  std::map<int32_t, std::vector<size_t>> by_leader;
  std::vector<size_t> here_which;  // answered here at once
  std::vector<ErrorCode> here_errors;
  auto here = [&](size_t i, ErrorCode e) {
    here_which.push_back(i);
    here_errors.push_back(e);
  };
  for (size_t i = 0; i < partitions.size(); ++i) {
    const TopicPartition& tp = partitions[i];
    const MetadataSnapshot::Topic* topic = meta != nullptr ? meta->Find(tp.topic) : nullptr;
    if (topic == nullptr || tp.partition < 0 || tp.partition >= topic->info.partitions) {
      here(i, ErrorCode::kUnknownTopicOrPartition);
      continue;
    }
    int32_t leader = meta->node_id;
    if (meta->cluster) {
      const auto p = static_cast<size_t>(tp.partition);
      leader = p < topic->partitions.size() ? topic->partitions[p].leader : -1;
    }
    std::string host;
    int32_t port = 0;
    if (leader < 0 ||
        (leader != meta->node_id && !InterBrokerAddress(*meta, leader, &host, &port))) {
      here(i, ErrorCode::kNotLeaderOrFollower);  // none elected (or live) now: asked again later
      continue;
    }
    by_leader[leader].push_back(i);
  }
  if (!here_which.empty()) answer(std::move(here_which), std::move(here_errors));
  for (auto& [leader, which] : by_leader) {
    std::vector<TopicPartition> tps;
    for (size_t i : which) tps.push_back(partitions[i]);
    if (leader == meta->node_id) {
      WriteTxnMarkers(*shards_, marker, std::move(tps),
                      [answer, which](std::vector<ErrorCode> errors) { answer(which, errors); });
      continue;
    }
    std::string host;
    int32_t port = 0;
    InterBrokerAddress(*meta, leader, &host, &port);
    Queued q;
    q.marker = marker;
    q.partitions = std::move(tps);
    q.done = [answer, which](std::vector<ErrorCode> errors) { answer(which, std::move(errors)); };
    SendToLeader(leader, host, port, std::move(q));
  }
}

void ClusterTxnParticipants::SendToLeader(int32_t leader, const std::string& host, int32_t port,
                                          Queued q) {
  std::vector<Queued> batch;
  {
    std::lock_guard g(mu_);
    Destination& d = destinations_[leader];
    d.host = host;
    d.port = port;
    d.queued.push_back(std::move(q));
    if (d.in_flight) return;  // drained with the others when the request under way ends
    d.in_flight = true;
    batch.swap(d.queued);
  }
  SendBatch(leader, host, port, std::move(batch));
}

void ClusterTxnParticipants::SendBatch(int32_t leader, const std::string& host, int32_t port,
                                       std::vector<Queued> batch) {
  kafka::WriteTxnMarkersRequest req;
  for (const Queued& q : batch) {
    kafka::WriteTxnMarkersRequest::Marker m;
    m.producer_id = q.marker.producer_id;
    m.producer_epoch = q.marker.producer_epoch;
    m.transaction_result = q.marker.commit;
    m.coordinator_epoch = q.marker.coordinator_epoch;
    m.topics = GroupByTopic(q.partitions);
    req.markers.push_back(std::move(m));
  }
  channel_->Call<kafka::WriteTxnMarkersRequest, kafka::WriteTxnMarkersResponse>(
      leader, host, port, kafka::ApiKey::kWriteTxnMarkers, kWriteTxnMarkersVersion, std::move(req),
      [this, leader, host, port,
       batch = std::move(batch)](Result<kafka::WriteTxnMarkersResponse> r) mutable {
        for (Queued& q : batch) {
          // One transaction per producer at a time: its marker's answer is found by id.
          std::vector<ErrorCode> errors(q.partitions.size(), ErrorCode::kNetworkException);
          if (r.ok()) {
            const int64_t pid = q.marker.producer_id;
            auto m = std::find_if(r->markers.begin(), r->markers.end(),
                                  [pid](const auto& x) { return x.producer_id == pid; });
            errors =
                m != r->markers.end()
                    ? ErrorsFor(q.partitions, m->topics, ErrorCode::kUnknownServerError)
                    : std::vector<ErrorCode>(q.partitions.size(), ErrorCode::kUnknownServerError);
          }
          q.done(std::move(errors));
        }
        // What was queued meanwhile goes in one request, to the address given last.
        std::vector<Queued> next;
        std::string next_host = host;
        int32_t next_port = port;
        {
          std::lock_guard g(mu_);
          Destination& d = destinations_[leader];
          if (d.queued.empty()) {
            d.in_flight = false;
            return;
          }
          next.swap(d.queued);
          next_host = d.host;
          next_port = d.port;
        }
        SendBatch(leader, next_host, next_port, std::move(next));
      });
}

void ClusterTxnParticipants::CompleteGroupOffsets(
    const TxnMarker& marker, std::vector<std::string> groups,
    std::function<void(std::vector<ErrorCode>)> done) {
  // A group's offsets are where its coordinator is: the leader of its partition of
  // __consumer_offsets (0018 "coordmove"). Groups coordinated here complete on this
  // broker's group coordinator; the others get the marker as WriteTxnMarkers for that
  // partition, which their leader hands to its group coordinator (txn_partition_markers.h).
  std::shared_ptr<const MetadataSnapshot> meta = shards_->Published();
  const MetadataSnapshot::Topic* offsets =
      meta != nullptr && meta->cluster ? meta->Find("__consumer_offsets") : nullptr;
  if (groups.empty() || offsets == nullptr || offsets->partitions.empty()) {
    return groups_->CompleteGroupOffsets(marker, std::move(groups), std::move(done));
  }
  auto gather = std::make_shared<TxnAnswerGather>(groups.size(), std::move(done));
  std::vector<std::string> here;
  std::vector<size_t> here_at;
  std::map<int32_t, std::map<int32_t, std::vector<size_t>>> elsewhere;  // leader -> p -> groups
  const auto count = static_cast<int32_t>(offsets->partitions.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    const int32_t p = CoordinatorPartitionFor(groups[i], count);
    const int32_t leader = offsets->partitions[static_cast<size_t>(p)].leader;
    if (leader == meta->node_id) {
      here.push_back(groups[i]);
      here_at.push_back(i);
    } else if (leader < 0) {
      gather->Set(i, ErrorCode::kNotCoordinator);  // none elected now: asked again later
    } else {
      elsewhere[leader][p].push_back(i);
    }
  }
  if (!here.empty()) {
    groups_->CompleteGroupOffsets(
        marker, std::move(here), [gather, here_at](std::vector<ErrorCode> errors) {
          for (size_t j = 0; j < here_at.size(); ++j) {
            gather->Set(here_at[j], j < errors.size() ? errors[j] : ErrorCode::kUnknownServerError);
          }
        });
  }
  for (auto& [leader, partitions] : elsewhere) {
    std::string host;
    int32_t port = 0;
    if (!InterBrokerAddress(*meta, leader, &host, &port)) {
      for (const auto& [p, which] : partitions) {
        for (size_t i : which) gather->Set(i, ErrorCode::kNotCoordinator);
      }
      continue;
    }
    // One marker per partition, answered for each of its groups.
    Queued q;
    q.marker = marker;
    std::vector<std::vector<size_t>> groups_of;
    for (const auto& [p, which] : partitions) {
      q.partitions.push_back(TopicPartition{"__consumer_offsets", p});
      groups_of.push_back(which);
    }
    q.done = [gather, groups_of](std::vector<ErrorCode> errors) {
      for (size_t j = 0; j < groups_of.size(); ++j) {
        for (size_t i : groups_of[j]) {
          gather->Set(i, j < errors.size() ? errors[j] : ErrorCode::kUnknownServerError);
        }
      }
    };
    SendToLeader(leader, host, port, std::move(q));
  }
}

void ClusterTxnVerifier::Verify(std::string transactional_id, int64_t producer_id,
                                int16_t producer_epoch, std::vector<TopicPartition> partitions,
                                std::function<void(std::vector<ErrorCode>)> done) {
  std::shared_ptr<const MetadataSnapshot> meta = shards_->Published();
  const int32_t node = meta != nullptr ? TxnCoordinatorNode(*meta, transactional_id) : -1;
  if (meta != nullptr && node == meta->node_id) {
    return local_->Verify(std::move(transactional_id), producer_id, producer_epoch,
                          std::move(partitions), std::move(done));
  }
  std::string host;
  int32_t port = 0;
  if (node < 0 || !InterBrokerAddress(*meta, node, &host, &port)) {
    return done(std::vector<ErrorCode>(partitions.size(), ErrorCode::kCoordinatorNotAvailable));
  }
  kafka::AddPartitionsToTxnRequest req;
  kafka::AddPartitionsToTxnRequest::Transaction t;
  t.transactional_id = transactional_id;
  t.producer_id = producer_id;
  t.producer_epoch = producer_epoch;
  t.verify_only = true;
  t.topics = GroupByTopic(partitions);
  req.transactions.push_back(std::move(t));
  channel_->Call<kafka::AddPartitionsToTxnRequest, kafka::AddPartitionsToTxnResponse>(
      node, host, port, kafka::ApiKey::kAddPartitionsToTxn, kVerifyVersion, std::move(req),
      [id = std::move(transactional_id), partitions = std::move(partitions),
       done = std::move(done)](Result<kafka::AddPartitionsToTxnResponse> r) {
        const size_t n = partitions.size();
        if (!r.ok()) return done(std::vector<ErrorCode>(n, ErrorCode::kNetworkException));
        if (r->error_code != ErrorCode::kNone)
          return done(std::vector<ErrorCode>(n, r->error_code));
        for (const auto& result : r->results_by_transaction) {
          if (result.transactional_id == id) {
            return done(
                ErrorsFor(partitions, result.topic_results, ErrorCode::kUnknownServerError));
          }
        }
        done(std::vector<ErrorCode>(n, ErrorCode::kUnknownServerError));
      });
}

}  // namespace sluice::broker
