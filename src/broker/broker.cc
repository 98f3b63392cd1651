// Broker: request dispatch and the cluster and topic APIs. See broker.h.
#include "broker/broker.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>
#include <type_traits>
#include <variant>

#include "base/logging.h"
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

// Writes `data` to `path` durably: a temp file, fdatasync, rename, fsync of the directory.
Status WriteFileDurably(storage::Env* env, const std::string& dir, const std::string& name,
                        const std::string& data) {
  std::string tmp = dir + "/" + name + ".tmp";
  std::string path = dir + "/" + name;
  {
    ASSIGN_OR_RETURN(auto file, env->Open(tmp, storage::OpenMode::kCreate));
    RETURN_IF_ERROR(file->Truncate(0));
    RETURN_IF_ERROR(file->WriteAt(
        0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size())));
    RETURN_IF_ERROR(file->Sync());
  }
  RETURN_IF_ERROR(env->Rename(tmp, path));
  return env->SyncDir(dir);
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

  std::unique_ptr<Broker> broker(new Broker(std::move(options), std::move(cluster_id)));
  std::lock_guard lock(broker->mu_);
  broker->topics_ = std::move(topics);
  for (const TopicInfo* t : broker->topics_->List()) {
    RETURN_IF_ERROR(broker->OpenTopicLogsLocked(*t));
  }
  SLUICE_LOG(kLog, kInfo, "opened {} topics, {} partitions in {}", broker->topics_->List().size(),
             broker->logs_.size(), broker->options_.data_dir);
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
}

void Broker::SetAdvertisedAddress(std::string host, int32_t port) {
  std::lock_guard lock(mu_);
  advertised_host_ = std::move(host);
  advertised_port_ = port;
}

Status Broker::Close() {
  std::lock_guard lock(mu_);
  Status first;
  for (auto& [key, log] : logs_) {
    Status st = log->Close();
    if (!st.ok() && first.ok()) first = st;
  }
  logs_.clear();
  return first;
}

size_t Broker::open_log_count() const {
  std::lock_guard lock(mu_);
  return logs_.size();
}

// ---------------------------------------------------------------------------------------
// Dispatch

void Broker::OnRequest(const std::shared_ptr<Connection>& conn, std::vector<uint8_t> frame) {
  kafka::DecodeOutcome out = kafka::DecodeRequest(frame);
  switch (out.problem) {
    case kafka::RequestProblem::kNone:
      Handle(conn, *out.request);
      return;
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

kafka::ApiVersionsResponse Broker::ApiVersions() const {
  kafka::ApiVersionsResponse resp;
  for (const kafka::ApiVersionRange& a : kafka::SupportedApis()) {
    resp.api_keys.push_back({static_cast<int16_t>(a.key), a.min, a.max, {}});
  }
  return resp;
}

kafka::MetadataResponse Broker::Metadata(const kafka::MetadataRequest& req, int16_t version) {
  kafka::MetadataResponse resp;
  resp.cluster_id = cluster_id_;
  resp.controller_id = kNodeId;

  auto describe = [](const TopicInfo& t) {
    kafka::MetadataResponse::Topic out;
    out.name = t.name;
    out.topic_id = t.id;
    for (int32_t p = 0; p < t.partitions; ++p) {
      kafka::MetadataResponse::Partition part;
      part.partition_index = p;
      part.leader_id = kNodeId;
      part.leader_epoch = 0;
      part.replica_nodes = {kNodeId};
      part.isr_nodes = {kNodeId};
      out.partitions.push_back(std::move(part));
    }
    return out;
  };

  std::lock_guard lock(mu_);
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
      if (found == nullptr) {
        out.error_code = ValidateTopicName(*want.name).ok() ? ErrorCode::kUnknownTopicOrPartition
                                                            : ErrorCode::kInvalidTopicException;
      }
    } else {
      found = topics_->FindById(want.topic_id);
      if (found == nullptr) out.error_code = ErrorCode::kUnknownTopicId;
    }
    // Automatic topic creation (auto.create.topics.enable) is off.
    resp.topics.push_back(found != nullptr ? describe(*found) : std::move(out));
  }
  return resp;
}

kafka::CreateTopicsResponse Broker::CreateTopics(const kafka::CreateTopicsRequest& req) {
  kafka::CreateTopicsResponse resp;
  std::map<std::string, int> seen;
  for (const auto& t : req.topics) ++seen[t.name];

  std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
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
    }
    resp.responses.push_back(std::move(out));
  }
  return resp;
}

kafka::DescribeClusterResponse Broker::DescribeCluster() {
  kafka::DescribeClusterResponse resp;
  resp.cluster_id = cluster_id_;
  resp.controller_id = kNodeId;
  std::lock_guard lock(mu_);
  resp.brokers.push_back({kNodeId, advertised_host_, advertised_port_, std::nullopt, {}});
  return resp;
}

// ---------------------------------------------------------------------------------------
// Partition logs

std::string Broker::PartitionDir(const std::string& topic, int32_t partition) const {
  return fmt::format("{}/{}-{}", options_.data_dir, topic, partition);
}

storage::LogOptions Broker::LogOptionsFor(const TopicConfig& config) {
  storage::LogOptions o;
  o.executor = executor_.get();
  o.files = files_.get();
  o.segment_bytes = static_cast<uint64_t>(config.segment_bytes);
  o.segment_ms = config.segment_ms;
  o.retention_bytes = config.retention_bytes;
  o.retention_ms = config.retention_ms;
  o.max_batch_bytes = static_cast<uint32_t>(config.max_message_bytes);
  return o;
}

Status Broker::OpenTopicLogsLocked(const TopicInfo& topic) {
  for (int32_t p = 0; p < topic.partitions; ++p) {
    PartitionKey key{topic.name, p};
    if (logs_.count(key) != 0) continue;
    ASSIGN_OR_RETURN(auto log, storage::PartitionLog::Open(PartitionDir(topic.name, p),
                                                           LogOptionsFor(topic.config)));
    logs_.emplace(std::move(key), std::move(log));
  }
  return Status::OK();
}

Status Broker::CloseTopicLogsLocked(const std::string& topic, int32_t partitions) {
  Status first;
  for (int32_t p = 0; p < partitions; ++p) {
    auto it = logs_.find({topic, p});
    if (it == logs_.end()) continue;
    Status st = it->second->Close();
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
