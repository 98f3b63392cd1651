// A data directory's cluster id and incarnation files. See cluster_identity.h.
#include "broker/cluster_identity.h"

#include "base/logging.h"
#include "broker/loggers.h"
#include "broker/meta_files.h"
#include "broker/topic_store.h"
#include "cluster/cluster_values.h"

namespace sluice::broker {
namespace {

// The id in a one-line file; nullopt when missing.
Result<std::optional<std::string>> ReadIdFile(const std::string& path, storage::Env* env) {
  if (!env->Exists(path)) return std::optional<std::string>();
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(env, path, 256));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (!cluster::IsIdText(text)) {
    return CorruptionError("{}: not an id (22 characters of URL-safe base64)", path);
  }
  return std::optional<std::string>(std::move(text));
}

}  // namespace

Result<std::optional<std::string>> ReadClusterId(const std::string& data_dir, storage::Env* env) {
  return ReadIdFile(data_dir + "/meta/cluster_id", env);
}

Status WriteClusterId(const std::string& data_dir, const std::string& id, storage::Env* env) {
  SLUICE_ASSERT(cluster::IsIdText(id));
  RETURN_IF_ERROR(env->CreateDirs(data_dir + "/meta"));
  return WriteFileDurably(env, data_dir + "/meta", "cluster_id", id + "\n");
}

Result<Incarnation> LoadOrCreateIncarnation(const std::string& data_dir, storage::Env* env) {
  ASSIGN_OR_RETURN(std::optional<std::string> existing,
                   ReadIdFile(data_dir + "/meta/incarnation", env));
  if (existing.has_value()) return Incarnation{std::move(*existing), false};
  Incarnation made{RandomUuid().ToString(), true};
  RETURN_IF_ERROR(env->CreateDirs(data_dir + "/meta"));
  RETURN_IF_ERROR(WriteFileDurably(env, data_dir + "/meta", "incarnation", made.id + "\n"));
  SLUICE_LOG(kLog, kInfo, "new incarnation {} of the data directory {}", made.id, data_dir);
  return made;
}

bool CleanForRegistration(bool had_data, bool stopped_cleanly, storage::FlushPolicy policy) {
  return !had_data || stopped_cleanly || policy == storage::FlushPolicy::kDurable;
}

}  // namespace sluice::broker
