// InProcessClient (in_process_client.h): a single node's calls passed through; a cluster's
// routed to the coordinator and the leaders.
#include "broker/in_process_client.h"

#include <future>
#include <set>
#include <utility>

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/metadata_snapshot.h"
#include "broker/txn_cluster.h"

namespace sluice::broker {
namespace {

using kafka::ErrorCode;

constexpr int16_t kFetchVersion = InProcessKafka::kFetchVersion;

// The largest answer a channel takes. A fetch answer is bounded by the request's max_bytes
// except that its first batch always comes whole (up to the topic's max.message.bytes).
constexpr uint32_t kMaxAnswerBytes = 256u << 20;

InterBrokerChannelOptions Channel(const InProcessKafka& kafka, int request_timeout_ms) {
  InterBrokerChannelOptions o;
  o.max_response_bytes = kMaxAnswerBytes;
  o.name = "in-process";  // the other broker sees client id sluice-in-process-<node>
  o.node_id = kafka.node_id();
  o.request_timeout_ms = request_timeout_ms;
  o.security = kafka.inter_broker_security();
  return o;
}

}  // namespace

InProcessClient::InProcessClient(InProcessKafka* kafka, std::string principal,
                                 std::chrono::milliseconds membership_timeout)
    : kafka_(kafka), principal_(std::move(principal)), cluster_(kafka->cluster()) {
  if (!cluster_) return;
  membership_ = std::make_unique<InterBrokerChannel>(
      Channel(*kafka_, static_cast<int>(membership_timeout.count())));
  offsets_ = std::make_unique<InterBrokerChannel>(Channel(*kafka_, 30000));
  fetches_ = std::make_unique<InterBrokerChannel>(Channel(*kafka_, 30000 + kRemoteWaitMs));
}

InProcessClient::~InProcessClient() {
  // Their callbacks finish (or fail) before the members they touch go.
  if (fetches_ != nullptr) fetches_->Stop();
  if (offsets_ != nullptr) offsets_->Stop();
  if (membership_ != nullptr) membership_->Stop();
}

template <typename Resp, typename Req, typename Local>
Result<Resp> InProcessClient::Group(kafka::ApiKey api, int16_t version, const std::string& group,
                                    Req req, std::chrono::milliseconds timeout,
                                    const std::atomic<bool>* cancel, InterBrokerChannel& channel,
                                    Local local) {
  const int32_t node = kafka_->GroupCoordinatorNode(group);
  if (node == kafka_->node_id()) return local(std::move(req));
  std::shared_ptr<const MetadataSnapshot> meta = kafka_->Metadata();
  std::string host;
  int32_t port = 0;
  if (node < 0 || meta == nullptr || !InterBrokerAddress(*meta, node, &host, &port)) {
    return AbortedError("group '{}' has no coordinator now", group);
  }
  auto p = std::make_shared<std::promise<Result<Resp>>>();
  std::future<Result<Resp>> f = p->get_future();
  channel.Call<Req, Resp>(node, host, port, api, version, std::move(req),
                          [p](Result<Resp> r) { p->set_value(std::move(r)); });
  const std::string what(kafka::ApiName(api));
  ASSIGN_OR_RETURN(Result<Resp> answer, AwaitAnswer(f, timeout, cancel, what.c_str()));
  if (!answer.ok()) {
    return answer.status().WithContext(fmt::format("{} to broker {}", what, node));
  }
  return answer;
}

Result<kafka::JoinGroupResponse> InProcessClient::JoinGroup(kafka::JoinGroupRequest req,
                                                            std::chrono::milliseconds timeout,
                                                            const std::atomic<bool>* cancel) {
  auto local = [&](kafka::JoinGroupRequest r) {
    return kafka_->JoinGroup(principal_, std::move(r), timeout, cancel);
  };
  if (!cluster_) return local(std::move(req));
  if (!kafka_->MayJoin(principal_, req.group_id)) return local(std::move(req));  // its refusal
  const std::string group = req.group_id;
  return Group<kafka::JoinGroupResponse>(kafka::ApiKey::kJoinGroup,
                                         InProcessKafka::kJoinGroupVersion, group, std::move(req),
                                         timeout, cancel, *membership_, local);
}

Result<kafka::SyncGroupResponse> InProcessClient::SyncGroup(kafka::SyncGroupRequest req,
                                                            std::chrono::milliseconds timeout,
                                                            const std::atomic<bool>* cancel) {
  auto local = [&](kafka::SyncGroupRequest r) {
    return kafka_->SyncGroup(principal_, std::move(r), timeout, cancel);
  };
  if (!cluster_ || !kafka_->MayJoin(principal_, req.group_id)) return local(std::move(req));
  const std::string group = req.group_id;
  return Group<kafka::SyncGroupResponse>(kafka::ApiKey::kSyncGroup,
                                         InProcessKafka::kSyncGroupVersion, group, std::move(req),
                                         timeout, cancel, *membership_, local);
}

Result<kafka::HeartbeatResponse> InProcessClient::Heartbeat(kafka::HeartbeatRequest req,
                                                            std::chrono::milliseconds timeout,
                                                            const std::atomic<bool>* cancel) {
  auto local = [&](kafka::HeartbeatRequest r) {
    return kafka_->Heartbeat(principal_, std::move(r), timeout, cancel);
  };
  if (!cluster_ || !kafka_->MayJoin(principal_, req.group_id)) return local(std::move(req));
  const std::string group = req.group_id;
  return Group<kafka::HeartbeatResponse>(kafka::ApiKey::kHeartbeat,
                                         InProcessKafka::kHeartbeatVersion, group, std::move(req),
                                         timeout, cancel, *membership_, local);
}

Result<kafka::LeaveGroupResponse> InProcessClient::LeaveGroup(kafka::LeaveGroupRequest req,
                                                              std::chrono::milliseconds timeout,
                                                              const std::atomic<bool>* cancel) {
  auto local = [&](kafka::LeaveGroupRequest r) {
    return kafka_->LeaveGroup(principal_, std::move(r), timeout, cancel);
  };
  if (!cluster_ || !kafka_->MayJoin(principal_, req.group_id)) return local(std::move(req));
  const std::string group = req.group_id;
  // On the offsets' channel: a stop may have given up a JoinGroup the coordinator still
  // holds for a rebalance, and the leave must not queue behind it.
  return Group<kafka::LeaveGroupResponse>(kafka::ApiKey::kLeaveGroup,
                                          InProcessKafka::kLeaveGroupVersion, group, std::move(req),
                                          timeout, cancel, *offsets_, local);
}

Result<kafka::OffsetCommitResponse> InProcessClient::OffsetCommit(kafka::OffsetCommitRequest req,
                                                                  std::chrono::milliseconds timeout,
                                                                  const std::atomic<bool>* cancel) {
  auto local = [&](kafka::OffsetCommitRequest r) {
    return kafka_->OffsetCommit(principal_, std::move(r), timeout, cancel);
  };
  if (!cluster_) return local(std::move(req));
  RETURN_IF_ERROR(kafka_->CheckCommit(principal_, req));
  const std::string group = req.group_id;
  return Group<kafka::OffsetCommitResponse>(kafka::ApiKey::kOffsetCommit,
                                            InProcessKafka::kOffsetCommitVersion, group,
                                            std::move(req), timeout, cancel, *offsets_, local);
}

Result<kafka::OffsetFetchResponse> InProcessClient::OffsetFetch(kafka::OffsetFetchRequest req,
                                                                std::chrono::milliseconds timeout,
                                                                const std::atomic<bool>* cancel) {
  auto local = [&](kafka::OffsetFetchRequest r) {
    return kafka_->OffsetFetch(principal_, std::move(r), timeout, cancel);
  };
  if (!cluster_) return local(std::move(req));
  RETURN_IF_ERROR(kafka_->CheckOffsetFetch(principal_, req));
  const std::string group = req.group_id;
  return Group<kafka::OffsetFetchResponse>(kafka::ApiKey::kOffsetFetch,
                                           InProcessKafka::kOffsetFetchVersion, group,
                                           std::move(req), timeout, cancel, *offsets_, local);
}

// ---- fetches -----------------------------------------------------------------------------

Result<InProcessKafka::FetchAnswer> InProcessClient::Fetch(kafka::FetchRequest req,
                                                           std::chrono::milliseconds timeout,
                                                           const std::atomic<bool>* cancel) {
  if (!cluster_) return kafka_->Fetch(principal_, std::move(req), timeout, cancel);
  const auto now = std::chrono::steady_clock::now();
  std::shared_ptr<const MetadataSnapshot> meta = kafka_->Metadata();
  if (meta == nullptr) return FailedPreconditionError("the broker's server is not running");
  const int32_t self = kafka_->node_id();

  // What the caller asks now.
  std::map<Key, const kafka::FetchRequest::FetchPartition*> wanted;
  for (const auto& t : req.topics) {
    for (const auto& p : t.partitions) wanted[{t.topic, p.partition}] = &p;
  }

  // The answers that came back, and the partitions whose fetch is still under way.
  std::vector<std::unique_ptr<Arrived>> arrived;
  std::vector<std::map<Key, int64_t>> arrived_asked;
  std::set<Key> busy;
  std::set<int32_t> waiting;  // leaders with a fetch under way, or left alone for now
  {
    std::lock_guard lock(fetch_state_->mu);
    for (auto& [node, l] : fetch_state_->leaders) {
      if (l.arrived != nullptr) {
        arrived.push_back(std::move(l.arrived));
        arrived_asked.push_back(std::move(l.asked));
        l.asked.clear();
      }
      if (l.in_flight) {
        for (const auto& [key, offset] : l.asked) busy.insert(key);
        waiting.insert(node);
      } else if (now < l.retry_at) {
        waiting.insert(node);
      }
    }
  }
  // An arrived partition counts when the caller still asks for the offset it was fetched
  // at; else it is dropped (the position moved: a rewind, a new assignment).
  struct Kept {
    size_t answer;
    size_t topic;
    size_t partition;
  };
  std::vector<Kept> kept;
  std::set<Key> answered;
  for (size_t a = 0; a < arrived.size(); ++a) {
    if (!arrived[a]->status.ok()) {
      // Once per leader outage and then every 10 s: a leader down is asked every
      // kRemoteBackoffMs until the metadata names another.
      if (now - last_failure_log_ > std::chrono::seconds(10)) {
        last_failure_log_ = now;
        SLUICE_LOG(kInProcessLog, kInfo, "fetch from another leader: {}",
                   arrived[a]->status.message());
      }
      continue;
    }
    const auto& topics = arrived[a]->response.responses;
    for (size_t t = 0; t < topics.size(); ++t) {
      for (size_t p = 0; p < topics[t].partitions.size(); ++p) {
        const Key key{topics[t].topic, topics[t].partitions[p].partition_index};
        auto w = wanted.find(key);
        auto asked = arrived_asked[a].find(key);
        if (w == wanted.end() || asked == arrived_asked[a].end() ||
            w->second->fetch_offset != asked->second || !answered.insert(key).second) {
          continue;
        }
        kept.push_back({a, t, p});
      }
    }
  }

  // The rest by leader: this broker's, the others' (when not asked already), or an error.
  kafka::FetchRequest local = req;
  local.topics.clear();
  std::map<int32_t, kafka::FetchRequest> remote;
  std::map<int32_t, std::map<Key, int64_t>> remote_asked;
  struct Refused {
    Key key;
    ErrorCode code;
  };
  std::vector<Refused> refused;
  auto add = [](kafka::FetchRequest& r, const std::string& topic,
                const kafka::FetchRequest::FetchPartition& p) {
    if (r.topics.empty() || r.topics.back().topic != topic) {
      r.topics.emplace_back();
      r.topics.back().topic = topic;
    }
    r.topics.back().partitions.push_back(p);
  };
  std::string checked_topic;
  bool may_read = false;
  for (const auto& [key, p] : wanted) {
    if (answered.count(key) > 0 || busy.count(key) > 0) continue;
    if (auto r = partition_retry_at_.find(key); r != partition_retry_at_.end()) {
      if (now < r->second) continue;
      partition_retry_at_.erase(r);
    }
    // One check per topic (`wanted` is ordered by topic).
    if (key.first != checked_topic) {
      checked_topic = key.first;
      may_read = kafka_->MayRead(principal_, key.first);
    }
    if (!may_read) {
      refused.push_back({key, ErrorCode::kTopicAuthorizationFailed});
      continue;
    }
    const MetadataSnapshot::Topic* t = meta->Find(key.first);
    if (t == nullptr || key.second < 0 || static_cast<size_t>(key.second) >= t->partitions.size()) {
      // Not known here: this broker's look answers it (UNKNOWN_TOPIC_OR_PARTITION).
      add(local, key.first, *p);
      continue;
    }
    const int32_t leader = t->partitions[static_cast<size_t>(key.second)].leader;
    if (leader == self) {
      add(local, key.first, *p);
    } else if (leader < 0 || meta->FindBroker(leader) == nullptr) {
      refused.push_back({key, ErrorCode::kLeaderNotAvailable});
    } else if (waiting.count(leader) == 0) {
      auto [it, fresh] = remote.try_emplace(leader);
      kafka::FetchRequest& r = it->second;
      if (fresh) {
        r = req;  // isolation level, max_bytes, rack as the caller asked
        r.topics.clear();
      }
      add(r, key.first, *p);
      remote_asked[leader][key] = p->fetch_offset;
    }
  }

  InProcessKafka::FetchAnswer out;
  if (!local.topics.empty()) {
    ASSIGN_OR_RETURN(out, kafka_->Fetch(principal_, std::move(local), timeout, cancel));
  }
  // The arrived records after this broker's slices.
  std::map<size_t, size_t> topic_at;  // arrived topic (answer << 32 | topic) -> out's index
  for (const Kept& k : kept) {
    Arrived& a = *arrived[k.answer];
    const auto& from = a.response.responses[k.topic];
    const size_t slot = (k.answer << 32) | k.topic;
    auto it = topic_at.find(slot);
    if (it == topic_at.end()) {
      it = topic_at.emplace(slot, out.response.responses.size()).first;
      out.response.responses.emplace_back();
      out.response.responses.back().topic = from.topic;
    }
    kafka::FetchResponse::PartitionData part = from.partitions[k.partition];
    if (part.records.is_splice) {
      out.received.push_back(std::move(a.received[part.records.splice_token]));
      part.records = kafka::RecordsRef::Splice(part.records.splice_size,
                                               static_cast<uint32_t>(out.pieces() - 1));
    }
    out.response.responses[it->second].partitions.push_back(std::move(part));
  }
  for (const Refused& r : refused) {
    out.response.responses.emplace_back();
    out.response.responses.back().topic = r.key.first;
    kafka::FetchResponse::PartitionData part;
    part.partition_index = r.key.second;
    part.error_code = r.code;
    // Nothing known of the log: the caller keeps what it had.
    part.high_watermark = -1;
    part.last_stable_offset = -1;
    part.log_start_offset = -1;
    out.response.responses.back().partitions.push_back(std::move(part));
  }

  // A partition that answered an error (its leader moved, none now, a fenced epoch) is
  // left alone for kRemoteBackoffMs rather than asked again at once.
  for (const auto& t : out.response.responses) {
    for (const auto& p : t.partitions) {
      if (p.error_code != ErrorCode::kNone && p.error_code != ErrorCode::kOffsetOutOfRange) {
        partition_retry_at_[{t.topic, p.partition_index}] =
            now + std::chrono::milliseconds(kRemoteBackoffMs);
      }
    }
  }

  // Then ask the other leaders for what they lead.
  for (auto& [leader, r] : remote) {
    std::string host;
    int32_t port = 0;
    if (!InterBrokerAddress(*meta, leader, &host, &port)) continue;
    r.replica_id = -1;
    r.max_wait_ms = kRemoteWaitMs;
    r.min_bytes = 1;
    r.session_id = 0;
    r.session_epoch = -1;
    SendFetch(leader, host, port, std::move(r), std::move(remote_asked[leader]));
  }
  return out;
}

void InProcessClient::SendFetch(int32_t leader, const std::string& host, int32_t port,
                                kafka::FetchRequest req, std::map<Key, int64_t> asked) {
  {
    std::lock_guard lock(fetch_state_->mu);
    Leader& l = fetch_state_->leaders[leader];
    l.in_flight = true;
    l.asked = std::move(asked);
  }
  InterBrokerRequest r;
  r.api = kafka::ApiKey::kFetch;
  r.version = kFetchVersion;
  r.encode = [req = std::move(req)](kafka::Writer& w) { req.Encode(w, kFetchVersion); };
  r.handle = [state = fetch_state_, leader](const Status& st, kafka::Reader* body) {
    auto a = std::make_unique<Arrived>();
    Status decoded = Status::OK();
    if (!st.ok()) {
      a->status = st.WithContext(fmt::format("broker {}", leader));
    } else {
      decoded = a->response.Decode(*body, kFetchVersion);
      if (!decoded.ok()) {
        a->status = decoded.WithContext(fmt::format("broker {}'s Fetch answer", leader));
      } else if (a->response.error_code != ErrorCode::kNone) {
        a->status = AbortedError("broker {} answered the fetch with Kafka error code {}", leader,
                                 static_cast<int>(a->response.error_code));
      } else {
        // The records out of the frame, which goes when this returns.
        for (auto& t : a->response.responses) {
          for (auto& p : t.partitions) {
            if (!p.records.inline_bytes.has_value() || p.records.inline_bytes->empty()) {
              p.records = kafka::RecordsRef::Inline(std::nullopt);
              continue;
            }
            const auto bytes = *p.records.inline_bytes;
            a->received.emplace_back(bytes.begin(), bytes.end());
            p.records = kafka::RecordsRef::Splice(bytes.size(),
                                                  static_cast<uint32_t>(a->received.size() - 1));
          }
        }
      }
    }
    std::lock_guard lock(state->mu);
    Leader& l = state->leaders[leader];
    l.in_flight = false;
    if (!a->status.ok()) {
      l.retry_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRemoteBackoffMs);
    }
    l.arrived = std::move(a);
    return decoded;
  };
  fetches_->Send(leader, host, port, std::move(r));
}

}  // namespace sluice::broker
