// Broker: request dispatch and the cluster and topic APIs. See broker.h.
#include "broker/broker.h"

#include <algorithm>
#include <charconv>
#include <atomic>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <shared_mutex>
#include <system_error>
#include <type_traits>
#include <variant>

#include "base/clock.h"
#include "base/logging.h"
#include "broker/meta_files.h"
#include "kafka/protocol/records.h"
#include "storage/env.h"

namespace sluice::broker {
namespace {

const Logger kLog("broker");

using kafka::ApiKey;
using kafka::ErrorCode;

constexpr size_t kClusterIdSize = 22;

bool IsClusterId(const std::string& s) {
  return s.size() == kClusterIdSize && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_';
         });
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return IOError("remove {}: {}", path, ec.message());
  return Status::OK();
}

template <typename Body>
void Reply(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
           const Body& body) {
  Response resp;
  kafka::Writer w(&resp.buffer);
  kafka::EncodeResponseHeader(w, static_cast<ApiKey>(h.api_key), h.api_version, h.correlation_id);
  body.Encode(w, h.api_version);
  conn->Send(std::move(resp));
}

// A connection's SASL progress when SASL is on.
// Internal topic names: their directories belong to the broker (the offsets log lives in
// __consumer_offsets-0), so no user topic may take them.
constexpr const char* kCleanShutdownFile = "clean_shutdown";

bool IsReservedTopic(const std::string& name) {
  return name == "__consumer_offsets" || name == "__transaction_state";
}

struct SaslState : Connection::HandlerState {
  enum class Phase {
    kHandshake,     // nothing but ApiVersions and SaslHandshake yet
    kAuthenticate,  // SaslHandshake v1 done: SaslAuthenticate requests carry the tokens
    kRawToken,      // SaslHandshake v0 done: the next frames are bare tokens
    kDone,          // authenticated
  };
  Phase phase = Phase::kHandshake;
  std::unique_ptr<SaslSession> session;
  std::string principal;
};

SaslState& SaslStateOf(Connection& conn) {
  auto& slot = conn.handler_state();
  if (slot == nullptr) slot = std::make_unique<SaslState>();
  return static_cast<SaslState&>(*slot);
}

}  // namespace

Result<std::string> LoadOrCreateClusterId(const std::string& data_dir) {
  storage::Env* env = storage::Env::Posix();
  std::string meta = data_dir + "/meta";
  std::string path = meta + "/cluster_id";
  RETURN_IF_ERROR(env->CreateDirs(meta));
  if (env->Exists(path)) {
    ASSIGN_OR_RETURN(auto file, env->Open(path, storage::OpenMode::kRead));
    std::string text(kClusterIdSize + 2, '\0');
    ASSIGN_OR_RETURN(size_t n, file->ReadAt(0, std::span<uint8_t>(
                                                   reinterpret_cast<uint8_t*>(text.data()), text.size())));
    text.resize(n);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (!IsClusterId(text)) {
      return CorruptionError("{}: not a cluster id (22 characters of URL-safe base64)", path);
    }
    return text;
  }
  std::string id = RandomUuid().ToString();
  SLUICE_ASSERT(IsClusterId(id));
  RETURN_IF_ERROR(WriteFileDurably(env, meta, "cluster_id", id + "\n"));
  SLUICE_LOG(kLog, kInfo, "created cluster id {} in {}", id, path);
  return id;
}

Result<std::unique_ptr<Broker>> Broker::Open(BrokerOptions options) {
  storage::Env* env = storage::Env::Posix();
  RETURN_IF_ERROR(env->CreateDirs(options.data_dir));
  ASSIGN_OR_RETURN(std::string cluster_id, LoadOrCreateClusterId(options.data_dir));
  ASSIGN_OR_RETURN(auto topics, TopicStore::Open(options.data_dir, options.topic_defaults));

  // Directories of deletions a crash interrupted.
  ASSIGN_OR_RETURN(auto entries, env->ListDir(options.data_dir));
  for (const std::string& name : entries) {
    static constexpr std::string_view kSuffix = "-delete";
    if (name.size() > kSuffix.size() && name.ends_with(kSuffix)) {
      RETURN_IF_ERROR(RemoveTree(options.data_dir + "/" + name));
    }
  }

  // The end of the last reserved block of producer ids: new ids start there.
  int64_t producer_id_start = 0;
  const std::string block_path = options.data_dir + "/meta/producer_id_block";
  if (env->Exists(block_path)) {
    ASSIGN_OR_RETURN(auto file, env->Open(block_path, storage::OpenMode::kRead));
    std::string text(32, '\0');
    ASSIGN_OR_RETURN(size_t n, file->ReadAt(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(text.data()), text.size())));
    text.resize(n);
    while (!text.empty() && text.back() == '\n') text.pop_back();
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), producer_id_start);
    if (ec != std::errc() || p != text.data() + text.size() || producer_id_start < 0) {
      return CorruptionError("{}: not a producer id", block_path);
    }
  }

  std::unique_ptr<SaslAuthenticator> sasl;
  if (options.sasl.enabled) {
    ASSIGN_OR_RETURN(sasl, SaslAuthenticator::Create(options.sasl));
  }
  // A clean stop leaves meta/clean_shutdown. Without it the last run died: any partition
  // may have lost unsynced records, so every leader epoch moves on (decision 14). The
  // marker goes before serving, so a crash of this run is seen as one by the next.
  const std::string marker = options.data_dir + "/meta/" + kCleanShutdownFile;
  const bool had_topics = env->Exists(options.data_dir + "/meta/topics.json");
  const bool unclean = had_topics && !env->Exists(marker);
  if (env->Exists(marker)) {
    RETURN_IF_ERROR(env->Remove(marker));
    RETURN_IF_ERROR(env->SyncDir(options.data_dir + "/meta"));
  }
  if (unclean) SLUICE_LOG(kLog, kWarn, "the last run did not stop cleanly: leader epochs move on");
  std::unique_ptr<Broker> broker(new Broker(std::move(options), std::move(cluster_id)));
  broker->unclean_start_ = unclean;
  broker->sasl_ = std::move(sasl);
  GroupCoordinatorOptions go = broker->options_.groups;
  go.dir = broker->options_.data_dir + "/__consumer_offsets-0";
  go.executor = broker->executor_.get();
  go.files = broker->files_.get();
  go.flush_policy = broker->options_.flush_policy;
  go.flush_ms = broker->options_.flush_ms;
  Broker* b = broker.get();
  go.partition_exists = [b](const std::string& topic, int32_t partition) {
    std::shared_lock lock(b->mu_);
    return b->logs_.count({topic, partition}) != 0;
  };
  ASSIGN_OR_RETURN(broker->groups_, GroupCoordinator::Open(std::move(go)));
  std::unique_lock lock(broker->mu_);
  broker->next_producer_id_ = broker->producer_id_block_end_ = producer_id_start;
  broker->topics_ = std::move(topics);
  for (const TopicInfo* t : broker->topics_->List()) {
    RETURN_IF_ERROR(broker->OpenTopicLogsLocked(*t));
  }
  SLUICE_LOG(kLog, kInfo, "opened {} topics, {} partitions in {}", broker->topics_->List().size(),
             broker->logs_.size(), broker->options_.data_dir);
  broker->ScheduleRetentionLocked();
  return broker;
}

Broker::Broker(BrokerOptions options, std::string cluster_id)
    : options_(std::move(options)),
      cluster_id_(std::move(cluster_id)),
      executor_(std::make_unique<storage::IoExecutor>(std::max(1, options_.io_threads))),
      files_(std::make_unique<storage::FileCache>(storage::Env::Posix(), options_.max_open_files)),
      advertised_host_(options_.advertised_host),
      advertised_port_(options_.advertised_port) {}

Broker::~Broker() {
  if (Status st = Close(); !st.ok()) {
    SLUICE_LOG(kLog, kError, "closing logs: {}", st.ToString());
  }
  // Joins the I/O threads while mu_ and the logs still exist: a retention pass may be
  // starting (it finds closed_ and returns).
  executor_.reset();
}

void Broker::SetAdvertisedAddress(std::string host, int32_t port) {
  std::unique_lock lock(mu_);
  advertised_host_ = std::move(host);
  advertised_port_ = port;
}

Status Broker::Close() {
  // The coordinator first, outside mu_: its thread asks partition_exists, which locks it.
  Status first;
  if (groups_ != nullptr) {
    first = groups_->Close();
    groups_.reset();
  }
  std::unique_lock lock(mu_);
  closed_ = true;
  if (retention_task_ != 0) executor_->Cancel(retention_task_);
  retention_task_ = 0;
  const bool was_open = !logs_.empty() || topics_ != nullptr;
  for (auto& [key, part] : logs_) {
    Status st = part->log->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  logs_.clear();
  if (first.ok() && was_open && !clean_marked_) {
    // Every log closed with its data synced: the next start is a clean one.
    first = WriteFileDurably(storage::Env::Posix(), options_.data_dir + "/meta",
                             kCleanShutdownFile, "");
    clean_marked_ = first.ok();
  }
  return first;
}

void Broker::ScheduleRetentionLocked() {
  if (closed_ || options_.retention_check_interval_ms <= 0) return;
  retention_task_ = executor_->SubmitAt(
      MonotonicNanos() + options_.retention_check_interval_ms * 1'000'000, [this] { RunRetention(); });
}

void Broker::RunRetention() {
  // Never blocks an I/O thread on mu_: its holders may be waiting for this executor
  // (closing or flushing a log). Busy: try again in a second.
  std::shared_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    executor_->SubmitAt(MonotonicNanos() + 1'000'000'000, [this] { RunRetention(); });
    return;
  }
  if (closed_) return;
  for (auto& [key, part] : logs_) {
    Result<int> deleted = part->log->ApplyRetention();
    if (!deleted.ok()) {
      SLUICE_LOG(kLog, kWarn, "retention of {}-{}: {}", key.first, key.second,
                 deleted.status().ToString());
    } else if (*deleted > 0) {
      SLUICE_LOG(kLog, kInfo, "retention deleted {} segments of {}-{}", *deleted, key.first, key.second);
    }
  }
  ScheduleRetentionLocked();
}

const TopicInfo* Broker::AutoCreateLocked(const std::string& name) {
  if (!options_.auto_create_topics || !ValidateTopicName(name).ok() || IsReservedTopic(name)) {
    return nullptr;
  }
  TopicInfo info;
  TopicError err = topics_->Create(name, options_.num_partitions, {}, false, &info);
  if (!err.ok()) return nullptr;
  if (Status st = OpenTopicLogsLocked(info); !st.ok()) {
    SLUICE_LOG(kLog, kError, "auto-creating topic {}: {}", name, st.ToString());
    if (TopicError undo = DeleteTopicLocked(name); !undo.ok()) {
      SLUICE_LOG(kLog, kError, "undoing topic {}: {}", name, undo.message);
    }
    return nullptr;
  }
  SLUICE_LOG(kLog, kInfo, "auto-created topic {} ({} partitions)", name, options_.num_partitions);
  return topics_->Find(name);
}

size_t Broker::open_log_count() const {
  std::shared_lock lock(mu_);
  return logs_.size();
}

// ---------------------------------------------------------------------------------------
// Dispatch

void Broker::OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) {
  SaslState* sasl = sasl_ != nullptr ? &SaslStateOf(*conn) : nullptr;
  if (sasl != nullptr && sasl->phase == SaslState::Phase::kRawToken) {
    SaslRawToken(conn, frame);
    return;
  }
  kafka::DecodeOutcome out = kafka::DecodeRequest(frame);
  switch (out.problem) {
    case kafka::RequestProblem::kNone: {
      const auto key = static_cast<ApiKey>(out.request->header.api_key);
      if (sasl != nullptr && sasl->phase != SaslState::Phase::kDone &&
          key != ApiKey::kApiVersions && key != ApiKey::kSaslHandshake &&
          key != ApiKey::kSaslAuthenticate) {
        // As Kafka: anything else before authentication ends the connection.
        SLUICE_LOG(kLog, kWarn, "closing connection: {} before SASL authentication",
                   kafka::ApiName(key));
        conn->Close();
        return;
      }
      Handle(conn, *out.request);
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

void Broker::Handle(const std::shared_ptr<Connection>& conn, const kafka::DecodedRequest& req) {
  const kafka::RequestHeader& h = req.header;
  bool served = std::visit(
      [&](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, kafka::ApiVersionsRequest>) {
          Reply(conn, h, ApiVersions());
        } else if constexpr (std::is_same_v<T, kafka::MetadataRequest>) {
          Reply(conn, h, Metadata(body, h.api_version));
        } else if constexpr (std::is_same_v<T, kafka::CreateTopicsRequest>) {
          Reply(conn, h, CreateTopics(body));
        } else if constexpr (std::is_same_v<T, kafka::DeleteTopicsRequest>) {
          Reply(conn, h, DeleteTopics(body, h.api_version));
        } else if constexpr (std::is_same_v<T, kafka::DescribeClusterRequest>) {
          Reply(conn, h, DescribeCluster());
        } else if constexpr (std::is_same_v<T, kafka::InitProducerIdRequest>) {
          Reply(conn, h, InitProducerId(body));
        } else if constexpr (std::is_same_v<T, kafka::ProduceRequest>) {
          Produce(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::FetchRequest>) {
          Fetch(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::ListOffsetsRequest>) {
          Reply(conn, h, ListOffsets(body, h.api_version));
        } else if constexpr (std::is_same_v<T, kafka::CreatePartitionsRequest>) {
          Reply(conn, h, CreatePartitions(body));
        } else if constexpr (std::is_same_v<T, kafka::DescribeConfigsRequest>) {
          Reply(conn, h, DescribeConfigs(body, h.api_version));
        } else if constexpr (std::is_same_v<T, kafka::AlterConfigsRequest>) {
          Reply(conn, h, AlterConfigs(body));
        } else if constexpr (std::is_same_v<T, kafka::IncrementalAlterConfigsRequest>) {
          Reply(conn, h, IncrementalAlterConfigs(body));
        } else if constexpr (std::is_same_v<T, kafka::DeleteRecordsRequest>) {
          Reply(conn, h, DeleteRecords(body));
        } else if constexpr (std::is_same_v<T, kafka::OffsetForLeaderEpochRequest>) {
          Reply(conn, h, OffsetForLeaderEpoch(body));
        } else if constexpr (std::is_same_v<T, kafka::FindCoordinatorRequest>) {
          Reply(conn, h, FindCoordinator(body, h.api_version));
        } else if constexpr (std::is_same_v<T, kafka::JoinGroupRequest>) {
          kafka::JoinGroupRequest copy = body;
          GroupClient client{h.client_id.value_or(""), "/" + conn->peer_host()};
          auto* groups = groups_.get();
          ToCoordinator<kafka::JoinGroupResponse>(
              conn, h, copy, [groups, client, v = h.api_version](auto&& r, auto&& done) {
                groups->JoinGroup(std::move(r), v, client, std::move(done));
              });
        } else if constexpr (std::is_same_v<T, kafka::SyncGroupRequest>) {
          ToCoordinator<kafka::SyncGroupResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->SyncGroup(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::HeartbeatRequest>) {
          ToCoordinator<kafka::HeartbeatResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->Heartbeat(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::LeaveGroupRequest>) {
          ToCoordinator<kafka::LeaveGroupResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->LeaveGroup(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::OffsetCommitRequest>) {
          ToCoordinator<kafka::OffsetCommitResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->OffsetCommit(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::OffsetFetchRequest>) {
          ToCoordinator<kafka::OffsetFetchResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->OffsetFetch(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::ListGroupsRequest>) {
          ToCoordinator<kafka::ListGroupsResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->ListGroups(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::DescribeGroupsRequest>) {
          ToCoordinator<kafka::DescribeGroupsResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->DescribeGroups(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::DeleteGroupsRequest>) {
          ToCoordinator<kafka::DeleteGroupsResponse>(conn, h, body, [this, v = h.api_version](auto&& r, auto&& done) {
            groups_->DeleteGroups(std::move(r), v, std::move(done));
          });
        } else if constexpr (std::is_same_v<T, kafka::SaslHandshakeRequest>) {
          SaslHandshake(conn, h, body);
        } else if constexpr (std::is_same_v<T, kafka::SaslAuthenticateRequest>) {
          SaslAuthenticate(conn, h, body);
        } else {
          return false;
        }
        return true;
      },
      req.body);
  if (!served) {
    // Advertised (so clients see the whole surface) but not served yet.
    SLUICE_LOG(kLog, kWarn, "closing connection: {} v{} is not served yet",
               kafka::ApiName(static_cast<ApiKey>(h.api_key)), h.api_version);
    conn->Close();
  }
}

void Broker::SaslHandshake(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                           const kafka::SaslHandshakeRequest& req) {
  kafka::SaslHandshakeResponse resp;
  if (sasl_ == nullptr) {
    // A plaintext listener, as Kafka answers it: no SASL exchange is expected here.
    resp.error_code = ErrorCode::kIllegalSaslState;
    Reply(conn, h, resp);
    return;
  }
  SaslState& st = SaslStateOf(*conn);
  resp.mechanisms = sasl_->mechanisms();
  if (st.phase != SaslState::Phase::kHandshake) {
    resp.error_code = ErrorCode::kIllegalSaslState;
    Reply(conn, h, resp);
    return;
  }
  st.session = sasl_->Start(req.mechanism);
  if (st.session == nullptr) {
    resp.error_code = ErrorCode::kUnsupportedSaslMechanism;
    Reply(conn, h, resp);
    return;
  }
  st.phase = h.api_version == 0 ? SaslState::Phase::kRawToken : SaslState::Phase::kAuthenticate;
  Reply(conn, h, resp);
}

void Broker::SaslAuthenticate(const std::shared_ptr<Connection>& conn,
                              const kafka::RequestHeader& h,
                              const kafka::SaslAuthenticateRequest& req) {
  kafka::SaslAuthenticateResponse resp;
  SaslState* st = sasl_ != nullptr ? &SaslStateOf(*conn) : nullptr;
  if (st != nullptr && st->phase == SaslState::Phase::kDone) {
    // Kafka: answered, and the authenticated connection stays open.
    resp.error_code = ErrorCode::kIllegalSaslState;
    resp.error_message = "SaslAuthenticate received after successful authentication";
    Reply(conn, h, resp);
    return;
  }
  if (st == nullptr || st->phase != SaslState::Phase::kAuthenticate) {
    resp.error_code = ErrorCode::kIllegalSaslState;
    resp.error_message = "SaslAuthenticate without a SaslHandshake v1 first";
    Response out;
    kafka::Writer w(&out.buffer);
    kafka::EncodeResponseHeader(w, ApiKey::kSaslAuthenticate, h.api_version, h.correlation_id);
    resp.Encode(w, h.api_version);
    conn->SendAndClose(std::move(out));
    return;
  }
  SaslSession::Step step = st->session->Next(req.auth_bytes);
  resp.auth_bytes = std::move(step.response);
  Response out;
  kafka::Writer w(&out.buffer);
  kafka::EncodeResponseHeader(w, ApiKey::kSaslAuthenticate, h.api_version, h.correlation_id);
  switch (step.state) {
    case SaslSession::State::kInProgress:
      resp.Encode(w, h.api_version);
      conn->Send(std::move(out));
      return;
    case SaslSession::State::kSucceeded:
      st->phase = SaslState::Phase::kDone;
      conn->SetAuthenticated();
      st->principal = st->session->principal();
      st->session.reset();
      SLUICE_LOG(kLog, kDebug, "SASL: authenticated {}", st->principal);
      resp.Encode(w, h.api_version);
      conn->Send(std::move(out));
      return;
    case SaslSession::State::kFailed:
      SLUICE_LOG(kLog, kInfo, "SASL: authentication failed: {}", step.error);
      resp.error_code = ErrorCode::kSaslAuthenticationFailed;
      resp.error_message = step.error;
      resp.auth_bytes.clear();
      resp.Encode(w, h.api_version);
      conn->SendAndClose(std::move(out));
      return;
  }
}

void Broker::SaslRawToken(const std::shared_ptr<Connection>& conn, std::span<const uint8_t> token) {
  SaslState& st = SaslStateOf(*conn);
  SaslSession::Step step = st.session->Next(token);
  if (step.state == SaslSession::State::kFailed) {
    // The unframed exchange has no way to say why: Kafka closes the connection too.
    SLUICE_LOG(kLog, kInfo, "SASL: authentication failed: {}", step.error);
    conn->Close();
    return;
  }
  if (step.state == SaslSession::State::kSucceeded) {
    st.phase = SaslState::Phase::kDone;
    conn->SetAuthenticated();
    st.principal = st.session->principal();
    st.session.reset();
  }
  Response out;
  out.buffer = std::move(step.response);
  conn->Send(std::move(out));
}

template <typename Resp, typename Req, typename Method>
void Broker::ToCoordinator(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                           const Req& req, Method method) {
  Req copy = req;  // the coordinator's thread reads it after the frame is gone
  GroupCoordinator::Done<Resp> done = [this, conn, h](Resp resp) {
    auto shared = std::make_shared<Resp>(std::move(resp));
    PostToLoop(*conn, [conn, h, shared] { Reply(conn, h, *shared); });
  };
  method(std::move(copy), std::move(done));
}

kafka::FindCoordinatorResponse Broker::FindCoordinator(const kafka::FindCoordinatorRequest& req,
                                                       int16_t version) {
  kafka::FindCoordinatorResponse resp;
  std::string host;
  int32_t port;
  {
    std::shared_lock lock(mu_);
    host = advertised_host_;
    port = advertised_port_;
  }
  // Transactions (key type 1) have no coordinator: there are no transactions yet.
  const bool served = req.key_type == 0;
  const ErrorCode error = served                ? ErrorCode::kNone
                          : req.key_type == 1 ? ErrorCode::kCoordinatorNotAvailable
                                              : ErrorCode::kInvalidRequest;
  if (version >= 4) {
    for (const std::string& key : req.coordinator_keys) {
      kafka::FindCoordinatorResponse::Coordinator c;
      c.key = key;
      c.node_id = served ? kNodeId : -1;
      c.host = served ? host : "";
      c.port = served ? port : -1;
      c.error_code = error;
      if (!served) c.error_message = "transactions are not supported";
      resp.coordinators.push_back(std::move(c));
    }
    return resp;
  }
  resp.error_code = error;
  resp.node_id = served ? kNodeId : -1;
  resp.host = served ? host : "";
  resp.port = served ? port : -1;
  if (!served) resp.error_message = "transactions are not supported";
  return resp;
}

kafka::ApiVersionsResponse Broker::ApiVersions() const {
  kafka::ApiVersionsResponse resp;
  for (const kafka::ApiVersionRange& supported : kafka::SupportedApis()) {
    const kafka::ApiVersionRange a = kafka::AdvertisedRange(supported);  // Produce from v0
    resp.api_keys.push_back({static_cast<int16_t>(a.key), a.min, a.max, {}});
  }
  return resp;
}

kafka::MetadataResponse Broker::Metadata(const kafka::MetadataRequest& req, int16_t version) {
  kafka::MetadataResponse resp;
  resp.cluster_id = cluster_id_;
  resp.controller_id = kNodeId;

  auto describe = [this](const TopicInfo& t) {
    kafka::MetadataResponse::Topic out;
    out.name = t.name;
    out.topic_id = t.id;
    for (int32_t p = 0; p < t.partitions; ++p) {
      kafka::MetadataResponse::Partition part;
      part.partition_index = p;
      part.leader_id = kNodeId;
      part.leader_epoch = LeaderEpochLocked(t.name, p);
      part.replica_nodes = {kNodeId};
      part.isr_nodes = {kNodeId};
      out.partitions.push_back(std::move(part));
    }
    return out;
  };

  // Shared, unless a missing topic may be created here.
  std::shared_lock shared(mu_, std::defer_lock);
  std::unique_lock exclusive(mu_, std::defer_lock);
  if (options_.auto_create_topics) {
    exclusive.lock();
  } else {
    shared.lock();
  }
  resp.brokers.push_back({kNodeId, advertised_host_, advertised_port_, std::nullopt, {}});
  // Null asks for every topic, and so does an empty array in v0.
  const bool all = !req.topics.has_value() || (version == 0 && req.topics->empty());
  if (all) {
    for (const TopicInfo* t : topics_->List()) resp.topics.push_back(describe(*t));
    return resp;
  }
  for (const kafka::MetadataRequest::Topic& want : *req.topics) {
    const TopicInfo* found = nullptr;
    kafka::MetadataResponse::Topic out;
    out.name = want.name;
    out.topic_id = want.topic_id;
    if (want.name.has_value()) {
      found = topics_->Find(*want.name);
      if (found == nullptr && (version < 4 || req.allow_auto_topic_creation)) {
        found = AutoCreateLocked(*want.name);
      }
      if (found == nullptr) {
        out.error_code = ValidateTopicName(*want.name).ok() ? ErrorCode::kUnknownTopicOrPartition
                                                            : ErrorCode::kInvalidTopicException;
      }
    } else {
      found = topics_->FindById(want.topic_id);
      if (found == nullptr) out.error_code = ErrorCode::kUnknownTopicId;
    }
    resp.topics.push_back(found != nullptr ? describe(*found) : std::move(out));
  }
  return resp;
}

kafka::CreateTopicsResponse Broker::CreateTopics(const kafka::CreateTopicsRequest& req) {
  kafka::CreateTopicsResponse resp;
  std::map<std::string, int> seen;
  for (const auto& t : req.topics) ++seen[t.name];

  std::unique_lock lock(mu_);
  for (const auto& t : req.topics) {
    kafka::CreateTopicsResponse::Topic out;
    out.name = t.name;
    auto fail = [&](ErrorCode code, std::string message) {
      out.error_code = code;
      out.error_message = std::move(message);
      resp.topics.push_back(std::move(out));
    };
    if (seen[t.name] > 1) {
      fail(ErrorCode::kInvalidRequest,
           fmt::format("topic '{}' appears more than once in the request", t.name));
      continue;
    }
    if (IsReservedTopic(t.name)) {
      fail(ErrorCode::kTopicAlreadyExists,
           fmt::format("{} is reserved for the broker's internal use", t.name));
      continue;
    }
    if (!t.assignments.empty()) {
      fail(ErrorCode::kInvalidRequest,
           "replica assignments are not supported: sluice has one broker; give num_partitions");
      continue;
    }
    if (t.replication_factor != -1 && t.replication_factor != 1) {
      fail(ErrorCode::kInvalidReplicationFactor,
           fmt::format("replication factor {} is larger than the 1 available broker",
                       t.replication_factor));
      continue;
    }
    std::map<std::string, std::string> overrides;
    bool null_config = false;
    for (const auto& c : t.configs) {
      if (!c.value.has_value()) {
        fail(ErrorCode::kInvalidConfig, fmt::format("config '{}' has a null value", c.name));
        null_config = true;
        break;
      }
      overrides[c.name] = *c.value;
    }
    if (null_config) continue;

    const int32_t partitions = t.num_partitions == -1 ? 1 : t.num_partitions;
    TopicInfo info;
    TopicError err = topics_->Create(t.name, partitions, overrides, req.validate_only, &info);
    if (!err.ok()) {
      fail(err.code, err.message);
      continue;
    }
    if (!req.validate_only) {
      if (Status st = OpenTopicLogsLocked(info); !st.ok()) {
        SLUICE_LOG(kLog, kError, "creating topic {}: {}", t.name, st.ToString());
        if (TopicError undo = DeleteTopicLocked(t.name); !undo.ok()) {
          SLUICE_LOG(kLog, kError, "undoing topic {}: {}", t.name, undo.message);
        }
        fail(ErrorCode::kKafkaStorageError, st.ToString());
        continue;
      }
      SLUICE_LOG(kLog, kInfo, "created topic {} ({} partitions, id {})", t.name, partitions,
                 info.id.ToString());
    }
    out.topic_id = info.id;  // zero for validate_only, as in Kafka
    out.num_partitions = partitions;
    out.replication_factor = 1;
    resp.topics.push_back(std::move(out));
  }
  return resp;
}

kafka::DeleteTopicsResponse Broker::DeleteTopics(const kafka::DeleteTopicsRequest& req,
                                                 int16_t version) {
  kafka::DeleteTopicsResponse resp;
  std::vector<kafka::DeleteTopicsRequest::Topic> wanted = req.topics;
  if (version < 6) {
    for (const std::string& name : req.topic_names) wanted.push_back({name, {}, {}});
  }
  std::unique_lock lock(mu_);
  for (const auto& want : wanted) {
    kafka::DeleteTopicsResponse::Result out;
    out.name = want.name;
    out.topic_id = want.topic_id;
    const TopicInfo* info = want.name ? topics_->Find(*want.name) : topics_->FindById(want.topic_id);
    if (info == nullptr) {
      out.error_code = want.name ? ErrorCode::kUnknownTopicOrPartition : ErrorCode::kUnknownTopicId;
      out.error_message = want.name ? fmt::format("topic '{}' does not exist", *want.name)
                                    : fmt::format("no topic has id {}", want.topic_id.ToString());
      resp.responses.push_back(std::move(out));
      continue;
    }
    out.name = info->name;
    out.topic_id = info->id;
    std::string name = info->name;
    TopicError err = DeleteTopicLocked(name);
    if (!err.ok()) {
      out.error_code = err.code;
      out.error_message = err.message;
    } else {
      SLUICE_LOG(kLog, kInfo, "deleted topic {}", name);
      if (groups_ != nullptr) groups_->OnTopicDeleted(name);
    }
    resp.responses.push_back(std::move(out));
  }
  return resp;
}

kafka::InitProducerIdResponse Broker::InitProducerId(const kafka::InitProducerIdRequest& req) {
  kafka::InitProducerIdResponse resp;
  if (req.transactional_id.has_value()) {
    // No transaction coordinator yet: only idempotent producers are served.
    resp.error_code = ErrorCode::kInvalidRequest;
    return resp;
  }
  std::unique_lock lock(mu_);
  if (req.producer_id >= 0 && req.producer_epoch >= 0 && req.producer_epoch < INT16_MAX - 1) {
    // A producer asking for its next epoch (KIP-360) keeps its id.
    resp.producer_id = req.producer_id;
    resp.producer_epoch = static_cast<int16_t>(req.producer_epoch + 1);
    return resp;
  }
  if (next_producer_id_ >= producer_id_block_end_) {
    constexpr int64_t kBlock = 1000;
    int64_t end = next_producer_id_ + kBlock;
    Status st = WriteFileDurably(storage::Env::Posix(), options_.data_dir + "/meta",
                                 "producer_id_block", std::to_string(end) + "\n");
    if (!st.ok()) {
      SLUICE_LOG(kLog, kError, "reserving producer ids: {}", st.ToString());
      resp.error_code = ErrorCode::kKafkaStorageError;
      return resp;
    }
    producer_id_block_end_ = end;
  }
  resp.producer_id = next_producer_id_++;
  resp.producer_epoch = 0;
  return resp;
}

kafka::DescribeClusterResponse Broker::DescribeCluster() {
  kafka::DescribeClusterResponse resp;
  resp.cluster_id = cluster_id_;
  resp.controller_id = kNodeId;
  std::shared_lock lock(mu_);
  resp.brokers.push_back({kNodeId, advertised_host_, advertised_port_, std::nullopt, {}});
  return resp;
}

// ---------------------------------------------------------------------------------------
// Produce, Fetch, ListOffsets

namespace {

// A produce request whose appends are in flight: the response, filled in by the append
// callbacks (each writes only its own partition entry), and how many are still out. The
// request thread holds one count itself until every append is queued, so the last
// callback cannot answer before the response is complete.
struct PendingProduce {
  Broker* broker;
  std::shared_ptr<Connection> conn;
  kafka::RequestHeader header;
  kafka::ProduceResponse resp;
  std::atomic<int> outstanding{1};
  bool acks0 = false;

  // Called once per count; the last one answers on the connection's loop.
  static void Release(const std::shared_ptr<PendingProduce>& p) {
    if (p->outstanding.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    p->broker->PostToLoop(*p->conn, [p] {
      if (p->acks0) return;  // already finished
      Reply(p->conn, p->header, p->resp);
    });
  }
};

}  // namespace

void Broker::Produce(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                     const kafka::ProduceRequest& req) {
  auto pending = std::make_shared<PendingProduce>();
  pending->broker = this;
  pending->conn = conn;
  pending->header = h;
  pending->acks0 = req.acks == 0;
  kafka::ProduceResponse& resp = pending->resp;
  // Sized before any append is queued: callbacks hold pointers into these vectors.
  resp.responses.resize(req.topic_data.size());
  for (size_t t = 0; t < req.topic_data.size(); ++t) {
    resp.responses[t].name = req.topic_data[t].name;
    resp.responses[t].partition_responses.resize(req.topic_data[t].partition_data.size());
  }
  const bool acks_ok = req.acks == 0 || req.acks == 1 || req.acks == -1;
  const int64_t now_ms = Clock::Real()->NowMillis();

  {
    std::shared_lock lock(mu_);
    for (size_t t = 0; t < req.topic_data.size(); ++t) {
      const auto& topic = req.topic_data[t];
      const TopicInfo* info = topics_->Find(topic.name);
      for (size_t i = 0; i < topic.partition_data.size(); ++i) {
        const auto& pd = topic.partition_data[i];
        auto& out = resp.responses[t].partition_responses[i];
        out.index = pd.index;
        out.base_offset = -1;
        auto fail = [&](ErrorCode code, std::string message) {
          out.error_code = code;
          out.error_message = std::move(message);
        };
        if (!acks_ok) {
          fail(ErrorCode::kInvalidRequiredAcks, fmt::format("acks={} (must be -1, 0 or 1)", req.acks));
          continue;
        }
        auto it = logs_.find({topic.name, pd.index});
        if (info == nullptr || it == logs_.end()) {
          fail(ErrorCode::kUnknownTopicOrPartition,
               fmt::format("no partition {} of topic '{}'", pd.index, topic.name));
          continue;
        }
        Partition& part = *it->second;
        out.log_start_offset = part.log->start_offset();
        if (!pd.records.has_value() || pd.records->empty()) {
          fail(ErrorCode::kInvalidRecord, "no records");
          continue;
        }
        kafka::ValidateOptions vo;
        vo.max_batch_bytes = static_cast<uint32_t>(info->config.max_message_bytes);
        vo.now_ms = now_ms;
        vo.log_append_time = info->config.log_append_time;
        vo.compacted = info->config.cleanup_policy == "compact";
        vo.allow_zstd = h.api_version >= 7;
        kafka::BatchInfo batch_info;
        if (Status st = kafka::ValidateRecords(*pd.records, vo, &batch_info); !st.ok()) {
          fail(kafka::RecordsErrorCode(st), st.message());
          continue;
        }
        if (batch_info.control || batch_info.transactional) {
          // No transactions yet (decision 11 of the plan).
          fail(ErrorCode::kInvalidRecord, "transactional and control batches are not supported");
          continue;
        }
        // The producer check and the append are one step per partition: another shard
        // producing to it waits here, not on the broker.
        std::lock_guard part_lock(part.mu);
        ProducerBatch pb;
        pb.producer_id = batch_info.producer_id;
        pb.producer_epoch = batch_info.producer_epoch;
        pb.base_sequence = batch_info.base_sequence;
        pb.record_count = batch_info.header.records_count;
        ProducerStateTable::Check check = part.producers.CheckBatch(pb);
        switch (check.verdict) {
          case ProducerStateTable::Verdict::kAppend:
            break;
          case ProducerStateTable::Verdict::kDuplicate:
            out.base_offset = check.first_offset;
            continue;
          case ProducerStateTable::Verdict::kOutOfOrder:
            fail(ErrorCode::kOutOfOrderSequenceNumber, check.message);
            continue;
          case ProducerStateTable::Verdict::kFenced:
            fail(ErrorCode::kInvalidProducerEpoch, check.message);
            continue;
          case ProducerStateTable::Verdict::kUnknownProducer:
            fail(ErrorCode::kUnknownProducerId, check.message);
            continue;
        }

        storage::AppendOptions ao;
        ao.leader_epoch = part.epochs.latest_epoch();
        ao.log_append_time = info->config.log_append_time;
        ao.ack = req.acks == -1 ? storage::AckLevel::kDurable : storage::AckLevel::kWritten;
        if (req.acks != 0) {
          pending->outstanding.fetch_add(1, std::memory_order_relaxed);
          ao.on_ack = [pending, &out](const Status& st, const storage::AppendInfo& ai) {
            // `out` lives in pending->resp, which this callback keeps alive.
            if (st.ok()) {
              out.base_offset = ai.base_offset;
              out.log_append_time_ms = ai.log_append_time_ms;
            } else {
              out.base_offset = -1;
              out.error_code = ErrorCode::kKafkaStorageError;
              out.error_message = st.ToString();
            }
            PendingProduce::Release(pending);
          };
        }
        Result<storage::AppendInfo> appended = part.log->Append(*pd.records, std::move(ao));
        if (!appended.ok()) {
          if (req.acks != 0) pending->outstanding.fetch_sub(1, std::memory_order_relaxed);
          fail(ErrorCode::kKafkaStorageError, appended.status().ToString());
          continue;
        }
        part.producers.OnAppended(pb, appended->base_offset);
      }
    }
  }
  if (pending->acks0) conn->FinishRequest();
  PendingProduce::Release(pending);
}

namespace {

// Sends a fetch response whose records are splices of `files`.
void ReplyFetch(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                const kafka::FetchResponse& body, std::vector<storage::FileSlice> files) {
  Response resp;
  kafka::Writer w(&resp.buffer);
  kafka::EncodeResponseHeader(w, ApiKey::kFetch, h.api_version, h.correlation_id);
  body.Encode(w, h.api_version);
  resp.splices = w.splices();
  resp.files = std::move(files);
  conn->Send(std::move(resp));
}

}  // namespace

// A fetch waiting for data: answered once, by the first of an append or its timer.
struct Broker::FetchWait {
  std::shared_ptr<Connection> conn;
  kafka::RequestHeader header;
  kafka::FetchRequest req;
  uint64_t min_bytes = 1;
  std::vector<PartitionKey> keys;  // the partitions it waits on, each once
  EventLoop::TimerId timer = 0;    // max_wait_ms; cancelled once answered
  // A re-arm is posted and has not run yet: appends meanwhile post no other.
  std::atomic<bool> arm_pending{false};
  std::atomic<bool> done{false};
};

namespace {

bool HasErrors(const kafka::FetchResponse& resp) {
  for (const auto& t : resp.responses) {
    for (const auto& p : t.partitions) {
      if (p.error_code != ErrorCode::kNone || p.diverging_epoch.epoch >= 0 ||
          p.diverging_epoch.end_offset >= 0) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

void Broker::Fetch(const std::shared_ptr<Connection>& conn, const kafka::RequestHeader& h,
                   const kafka::FetchRequest& req) {
  kafka::FetchResponse resp;
  std::vector<storage::FileSlice> files;
  if (req.session_id != 0) {
    // Sessions are declined (session_id 0 in every answer), so no id is known.
    resp.error_code = ErrorCode::kFetchSessionIdNotFound;
    ReplyFetch(conn, h, resp, {});
    return;
  }
  uint64_t bytes = FetchOnce(req, h.api_version, &resp, &files);
  const bool errors = HasErrors(resp);
  const uint64_t min_bytes = static_cast<uint64_t>(std::max(req.min_bytes, 1));
  if (bytes >= min_bytes || errors || req.max_wait_ms <= 0 || req.min_bytes <= 0 ||
      draining_.load()) {
    ReplyFetch(conn, h, resp, std::move(files));
    return;
  }
  // Not enough data: a long poll. Register on every partition asked for, then look once
  // more (an append between the first look and the registration must not be missed);
  // every append to one of them looks again, and min_bytes or max_wait_ms answers.
  auto wait = std::make_shared<FetchWait>();
  wait->conn = conn;
  wait->header = h;
  wait->req = req;
  wait->min_bytes = min_bytes;
  {
    std::shared_lock lock(mu_);
    for (const auto& want : req.topics) {
      const TopicInfo* info =
          h.api_version >= 13 ? topics_->FindById(want.topic_id) : topics_->Find(want.topic);
      if (info == nullptr) continue;
      for (const auto& fp : want.partitions) wait->keys.emplace_back(info->name, fp.partition);
    }
  }
  // A partition listed twice waits once.
  std::sort(wait->keys.begin(), wait->keys.end());
  wait->keys.erase(std::unique(wait->keys.begin(), wait->keys.end()), wait->keys.end());
  wait->timer = conn->loop()->RunAfter(req.max_wait_ms, [this, wait] { CompleteFetch(wait); });
  ArmFetch(wait);
}

void Broker::ArmFetch(const std::shared_ptr<FetchWait>& wait) {
  wait->arm_pending = false;
  {
    std::lock_guard lock(waits_mu_);
    if (waking_stopped_) return;  // shutting down: the timer or the close ends it
    // Registered at most once per partition: a wake-up removes it from the woken
    // partition's list only, and it stays in the others'.
    for (const PartitionKey& key : wait->keys) {
      auto& list = waits_[key];
      bool present = false;
      std::erase_if(list, [&](const std::weak_ptr<FetchWait>& w) {
        auto locked = w.lock();
        present |= locked == wait;
        return locked == nullptr;
      });
      if (!present) list.push_back(wait);
    }
  }
  kafka::FetchResponse resp;
  std::vector<storage::FileSlice> files;
  const uint64_t bytes = FetchOnce(wait->req, wait->header.api_version, &resp, &files);
  // Enough data, a new error (a deleted topic, an offset now out of range) or a stop
  // answers at once, as Kafka's DelayedFetch completes.
  if (bytes >= wait->min_bytes || HasErrors(resp) || draining_.load()) {
    AnswerFetch(wait, resp, std::move(files));
  }
}

void Broker::CompleteFetch(const std::shared_ptr<FetchWait>& wait) {
  if (wait->done.load()) return;
  kafka::FetchResponse resp;
  std::vector<storage::FileSlice> files;
  FetchOnce(wait->req, wait->header.api_version, &resp, &files);
  AnswerFetch(wait, resp, std::move(files));
}

void Broker::AnswerFetch(const std::shared_ptr<FetchWait>& wait, const kafka::FetchResponse& resp,
                         std::vector<storage::FileSlice> files) {
  if (wait->done.exchange(true)) return;
  if (wait->conn->closed()) return;
  wait->conn->loop()->Cancel(wait->timer);  // false when the timer is what answers
  ReplyFetch(wait->conn, wait->header, resp, std::move(files));
}

size_t Broker::waiting_fetch_count() {
  std::lock_guard lock(waits_mu_);
  size_t n = 0;
  for (const auto& [key, list] : waits_) {
    for (const auto& weak : list) {
      auto w = weak.lock();
      if (w != nullptr && !w->done.load()) ++n;
    }
  }
  return n;
}

void Broker::Drain() {
  draining_ = true;
  std::vector<std::shared_ptr<FetchWait>> waiting;
  {
    std::lock_guard lock(waits_mu_);
    for (auto& [key, list] : waits_) {
      for (const auto& weak : list) {
        if (auto w = weak.lock(); w != nullptr && !w->done.load()) waiting.push_back(std::move(w));
      }
    }
    waits_.clear();
    if (!waking_stopped_) {
      for (const auto& w : waiting) w->conn->loop()->Post([this, w] { CompleteFetch(w); });
    }
  }
  std::shared_lock lock(mu_);
  for (auto& [key, part] : logs_) {
    if (Status st = part->log->Flush(); !st.ok()) {
      SLUICE_LOG(kLog, kWarn, "flushing {}-{}: {}", key.first, key.second, st.ToString());
    }
  }
}

void Broker::StopWaking() {
  std::lock_guard lock(waits_mu_);
  waking_stopped_ = true;
  waits_.clear();
}

void Broker::WakeFetches(const PartitionKey& key) {
  // Posts under waits_mu_, so that once StopWaking() returns no post reaches a loop.
  std::lock_guard lock(waits_mu_);
  if (waking_stopped_) return;
  auto it = waits_.find(key);
  if (it == waits_.end()) return;
  std::vector<std::weak_ptr<FetchWait>> woken;
  woken.swap(it->second);
  waits_.erase(it);
  for (const auto& weak : woken) {
    std::shared_ptr<FetchWait> wait = weak.lock();
    if (wait == nullptr || wait->done.load()) continue;
    if (wait->arm_pending.exchange(true)) continue;  // one re-arm at a time
    wait->conn->loop()->Post([this, wait] {
      if (!wait->done.load()) ArmFetch(wait);
    });
  }
}

void Broker::PostToLoop(Connection& conn, std::function<void()> task) {
  std::lock_guard lock(waits_mu_);
  if (waking_stopped_) return;
  conn.loop()->Post(std::move(task));
}

uint64_t Broker::FetchOnce(const kafka::FetchRequest& req, int16_t version,
                           kafka::FetchResponse* resp, std::vector<storage::FileSlice>* files) {
  resp->session_id = 0;
  uint64_t total = 0;
  const uint64_t max_bytes = req.max_bytes > 0 ? static_cast<uint64_t>(req.max_bytes) : 0;
  std::shared_lock lock(mu_);
  for (const auto& want : req.topics) {
    kafka::FetchResponse::FetchableTopicResponse tout;
    tout.topic = want.topic;
    tout.topic_id = want.topic_id;
    const TopicInfo* info =
        version >= 13 ? topics_->FindById(want.topic_id) : topics_->Find(want.topic);
    for (const auto& fp : want.partitions) {
      kafka::FetchResponse::PartitionData out;
      out.partition_index = fp.partition;
      out.high_watermark = -1;
      out.last_stable_offset = -1;
      out.log_start_offset = -1;
      out.records = kafka::RecordsRef::Inline(std::span<const uint8_t>());
      auto it = info != nullptr ? logs_.find({info->name, fp.partition}) : logs_.end();
      if (it == logs_.end()) {
        out.error_code = info == nullptr && version >= 13 ? ErrorCode::kUnknownTopicId
                                                          : ErrorCode::kUnknownTopicOrPartition;
        tout.partitions.push_back(std::move(out));
        continue;
      }
      storage::PartitionLog& log = *it->second->log;
      const int32_t epoch = it->second->epochs.latest_epoch();
      if (fp.current_leader_epoch >= 0 && fp.current_leader_epoch != epoch) {
        // KIP-320: a consumer that saw a newer epoch waits for metadata; an older one
        // must check for truncation (OffsetForLeaderEpoch) first.
        out.error_code = fp.current_leader_epoch > epoch ? ErrorCode::kUnknownLeaderEpoch
                                                         : ErrorCode::kFencedLeaderEpoch;
        tout.partitions.push_back(std::move(out));
        continue;
      }
      // No transactions, so the last stable offset is the high watermark.
      const int64_t hw = HighWatermark(log);
      const int64_t start = log.start_offset();
      out.high_watermark = hw;
      out.last_stable_offset = hw;
      out.log_start_offset = start;
      out.aborted_transactions.emplace();
      if (fp.last_fetched_epoch >= 0 && fp.fetch_offset >= start) {
        // KIP-595 (v12+): the consumer's last fetched epoch must end at or past its fetch
        // offset here; otherwise the log diverged (recovery cut it) and it must truncate.
        // An epoch this log never had has no end: out of range, as Kafka answers.
        auto [div_epoch, div_end] = it->second->epochs.EndOffsetFor(fp.last_fetched_epoch, log.end_offset());
        if (div_epoch < 0 || div_end < 0) {
          out.error_code = ErrorCode::kOffsetOutOfRange;
          tout.partitions.push_back(std::move(out));
          continue;
        }
        if (div_epoch < fp.last_fetched_epoch || div_end < fp.fetch_offset) {
          out.diverging_epoch = {div_epoch, div_end};
          tout.partitions.push_back(std::move(out));
          continue;
        }
      }
      if (fp.fetch_offset < start || fp.fetch_offset > hw) {
        out.error_code = ErrorCode::kOffsetOutOfRange;
        tout.partitions.push_back(std::move(out));
        continue;
      }
      const uint64_t left = max_bytes > total ? max_bytes - total : 0;
      const uint64_t limit =
          std::min<uint64_t>(left, fp.partition_max_bytes > 0 ? uint64_t(fp.partition_max_bytes) : 0);
      if (fp.fetch_offset < hw && (limit > 0 || total == 0)) {
        Result<storage::ReadResult> read = log.Read(fp.fetch_offset, std::max<uint64_t>(limit, 1), hw);
        if (!read.ok()) {
          out.error_code = read.status().code() == StatusCode::kOutOfRange
                               ? ErrorCode::kOffsetOutOfRange
                               : ErrorCode::kKafkaStorageError;
        } else if (read->slice.size > 0 && (total == 0 || read->slice.size <= limit)) {
          // Past the limits only for the first data of the response, as in Kafka.
          out.records = kafka::RecordsRef::Splice(read->slice.size,
                                                  static_cast<uint32_t>(files->size()));
          total += read->slice.size;
          files->push_back(std::move(read->slice));
        }
      }
      tout.partitions.push_back(std::move(out));
    }
    resp->responses.push_back(std::move(tout));
  }
  return total;
}

namespace {

// The first record of the batch holding `offset` with a timestamp satisfying `pick`, as
// (offset, timestamp), decoding the batch; nullopt when none does.
std::optional<std::pair<int64_t, int64_t>> FindInBatch(
    storage::PartitionLog& log, int64_t offset, const std::function<bool(int64_t)>& pick) {
  Result<storage::ReadResult> read = log.Read(offset, 1);
  if (!read.ok() || read->slice.size == 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  if (!storage::PartitionLog::ReadSlice(read->slice, &bytes).ok()) return std::nullopt;
  const storage::BatchHeader first = storage::ParseBatchHeader(bytes);
  kafka::RecordReader reader;
  std::span<const uint8_t> batch(bytes.data(), first.total_size());
  if (!reader.Open(batch, size_t{64} << 20).ok()) return std::nullopt;
  kafka::Record record;
  while (reader.Next(&record)) {
    int64_t ts = kafka::RecordTimestamp(reader.header(), record);
    if (pick(ts)) return std::make_pair(reader.header().base_offset + record.offset_delta, ts);
  }
  return std::nullopt;
}

}  // namespace

kafka::ListOffsetsResponse Broker::ListOffsets(const kafka::ListOffsetsRequest& req,
                                               int16_t version) {
  constexpr int64_t kLatest = -1, kEarliest = -2, kMaxTimestamp = -3;
  constexpr int64_t kEarliestLocal = -4, kLatestTiered = -5;  // KIP-1005, v8+
  kafka::ListOffsetsResponse resp;
  std::shared_lock lock(mu_);
  for (const auto& want : req.topics) {
    kafka::ListOffsetsResponse::Topic tout;
    tout.name = want.name;
    for (const auto& wp : want.partitions) {
      kafka::ListOffsetsResponse::Partition out;
      out.partition_index = wp.partition_index;
      auto it = logs_.find({want.name, wp.partition_index});
      if (it == logs_.end()) {
        out.error_code = ErrorCode::kUnknownTopicOrPartition;
        tout.partitions.push_back(std::move(out));
        continue;
      }
      storage::PartitionLog& log = *it->second->log;
      const LeaderEpochCache& epochs = it->second->epochs;
      out.leader_epoch = epochs.latest_epoch();
      if (wp.current_leader_epoch >= 0 && wp.current_leader_epoch != epochs.latest_epoch()) {
        out.error_code = wp.current_leader_epoch > epochs.latest_epoch()
                             ? ErrorCode::kUnknownLeaderEpoch
                             : ErrorCode::kFencedLeaderEpoch;
        tout.partitions.push_back(std::move(out));
        continue;
      }
      if (wp.timestamp == kLatest) {
        out.offset = HighWatermark(log);
      } else if (wp.timestamp == kEarliest || (wp.timestamp == kEarliestLocal && version >= 8)) {
        // Without tiered storage the earliest local offset is the log start.
        out.offset = log.start_offset();
      } else if (wp.timestamp == kLatestTiered && version >= 9) {
        // Nothing is tiered: no offset, as Kafka answers without remote storage.
        out.offset = -1;
        out.timestamp = -1;
      } else if (wp.timestamp == kMaxTimestamp) {
        // The first batch holding the largest max timestamp, then its record with it.
        int64_t best_ts = -1, best_base = -1;
        Status st = log.ForEachBatchHeader(
            log.start_offset(), [&](const storage::BatchHeader& bh, std::span<const uint8_t>) {
              if (bh.max_timestamp > best_ts) {
                best_ts = bh.max_timestamp;
                best_base = bh.base_offset;
              }
              return true;
            });
        if (!st.ok()) {
          out.error_code = ErrorCode::kKafkaStorageError;
        } else if (best_base >= 0) {
          auto found = FindInBatch(log, best_base, [&](int64_t ts) { return ts == best_ts; });
          out.offset = found ? found->first : best_base;
          out.timestamp = best_ts;
        }
      } else if (wp.timestamp < 0) {
        out.error_code = ErrorCode::kInvalidRequest;
      } else {
        Result<std::optional<storage::TimestampLookup>> found =
            log.FindOffsetByTimestamp(wp.timestamp);
        if (!found.ok()) {
          out.error_code = ErrorCode::kKafkaStorageError;
        } else if (found->has_value()) {
          const storage::TimestampLookup& l = **found;
          out.offset = l.offset;
          out.timestamp = l.timestamp;
          if (!l.exact) {
            const int64_t target = wp.timestamp;
            auto rec = FindInBatch(log, l.offset, [&](int64_t ts) { return ts >= target; });
            if (rec) {
              out.offset = rec->first;
              out.timestamp = rec->second;
            }
          }
          // Records below the log start (DeleteRecords) are gone: never answer with one.
          out.offset = std::max(out.offset, log.start_offset());
        }
      }
      if (out.error_code == ErrorCode::kNone && out.offset >= 0 && wp.timestamp != kLatest) {
        out.leader_epoch = epochs.EpochAt(out.offset);
      } else if (out.offset < 0) {
        out.leader_epoch = -1;
      }
      if (version == 0 && out.error_code == ErrorCode::kNone && out.offset >= 0) {
        out.old_style_offsets = {out.offset};
      }
      tout.partitions.push_back(std::move(out));
    }
    resp.topics.push_back(std::move(tout));
  }
  return resp;
}

// ---------------------------------------------------------------------------------------
// Partition logs

std::string Broker::PartitionDir(const std::string& topic, int32_t partition) const {
  return fmt::format("{}/{}-{}", options_.data_dir, topic, partition);
}

int64_t Broker::HighWatermark(const storage::PartitionLog& log) const {
  return options_.flush_policy == storage::FlushPolicy::kDurable ? log.durable_end_offset()
                                                                 : log.written_end_offset();
}

storage::LogOptions Broker::LogOptionsFor(const TopicConfig& config) {
  storage::LogOptions o;
  o.flush_policy = options_.flush_policy;
  o.flush_ms = options_.flush_ms;
  o.executor = executor_.get();
  o.files = files_.get();
  o.segment_bytes = static_cast<uint64_t>(config.segment_bytes);
  o.segment_ms = config.segment_ms;
  o.retention_bytes = config.retention_bytes;
  o.retention_ms = config.retention_ms;
  // The topic's max.message.bytes is enforced by Produce (ValidateRecords); the log
  // takes any batch up to the largest that setting allows, so lowering it never makes
  // stored batches unreadable and no topic config can make a log fail to open.
  o.max_batch_bytes = kMaxTopicMessageBytes;
  return o;
}

Status Broker::OpenTopicLogsLocked(const TopicInfo& topic) {
  for (int32_t p = 0; p < topic.partitions; ++p) {
    PartitionKey key{topic.name, p};
    if (logs_.count(key) != 0) continue;
    auto part = std::make_unique<Partition>();
    storage::LogOptions opts = LogOptionsFor(topic.config);
    opts.on_readable = [this, key] { WakeFetches(key); };
    ASSIGN_OR_RETURN(part->log, storage::PartitionLog::Open(PartitionDir(topic.name, p), opts));
    // Epochs first: a bump for a cut log is on disk before anything else reads it.
    ASSIGN_OR_RETURN(part->epochs, LeaderEpochCache::Open(*part->log, unclean_start_));
    RETURN_IF_ERROR(part->producers.Rebuild(*part->log));
    logs_.emplace(std::move(key), std::move(part));
  }
  return Status::OK();
}

Status Broker::CloseTopicLogsLocked(const std::string& topic, int32_t partitions) {
  Status first;
  for (int32_t p = 0; p < partitions; ++p) {
    auto it = logs_.find({topic, p});
    if (it == logs_.end()) continue;
    Status st = it->second->log->Close();
    if (!st.ok() && first.ok()) first = st;
    logs_.erase(it);
  }
  return first;
}

Status Broker::RemoveTopicDirsLocked(const std::string& topic, int32_t partitions) {
  storage::Env* env = storage::Env::Posix();
  // Rename all first, so a crash never leaves a topic half there under its own name.
  std::vector<std::string> doomed;
  for (int32_t p = 0; p < partitions; ++p) {
    std::string dir = PartitionDir(topic, p);
    if (!env->Exists(dir)) continue;
    std::string gone = dir + "-delete";
    RETURN_IF_ERROR(RemoveTree(gone));
    RETURN_IF_ERROR(env->Rename(dir, gone));
    doomed.push_back(std::move(gone));
  }
  RETURN_IF_ERROR(env->SyncDir(options_.data_dir));
  // TODO(broker): remove in the background (decision 6) once deletions can be large.
  for (const std::string& dir : doomed) RETURN_IF_ERROR(RemoveTree(dir));
  return Status::OK();
}

TopicError Broker::DeleteTopicLocked(const std::string& name) {
  const TopicInfo* info = topics_->Find(name);
  if (info == nullptr) {
    return {ErrorCode::kUnknownTopicOrPartition, fmt::format("topic '{}' does not exist", name)};
  }
  const int32_t partitions = info->partitions;
  if (Status st = CloseTopicLogsLocked(name, partitions); !st.ok()) {
    // The data that reached the disk stays; the topic goes anyway.
    SLUICE_LOG(kLog, kWarn, "closing logs of deleted topic {}: {}", name, st.ToString());
  }
  TopicError err = topics_->Delete(name);
  if (!err.ok()) {
    if (const TopicInfo* still = topics_->Find(name); still != nullptr) {
      if (Status st = OpenTopicLogsLocked(*still); !st.ok()) {
        SLUICE_LOG(kLog, kError, "reopening logs of topic {}: {}", name, st.ToString());
      }
    }
    return err;
  }
  if (Status st = RemoveTopicDirsLocked(name, partitions); !st.ok()) {
    // Removed from the metadata: leftovers named *-delete go at the next start.
    SLUICE_LOG(kLog, kWarn, "removing directories of deleted topic {}: {}", name, st.ToString());
  }
  return {};
}

}  // namespace sluice::broker
