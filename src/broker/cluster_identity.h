// What a data directory says about itself in a cluster (docs/design/0018-cluster.md, "etcd
// layout"): <data-dir>/meta/cluster_id, the cluster it belongs to, and
// <data-dir>/meta/incarnation, a random id made when the directory is created, so a broker
// restarted with an empty directory is a new incarnation (KIP-903's concern). Also what a
// registration's `clean` flag is: whether records this broker reported to a leader may be
// gone.
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "storage/env.h"
#include "storage/log.h"

namespace sluice::broker {

// <data-dir>/meta/cluster_id: nullopt when the file is missing; Corruption when it is not an
// id (cluster::IsIdText: 22 characters of URL-safe base64, a UUID as Kafka writes it).
Result<std::optional<std::string>> ReadClusterId(const std::string& data_dir, storage::Env* env);
// Writes <data-dir>/meta/cluster_id durably (creating meta/).
Status WriteClusterId(const std::string& data_dir, const std::string& id, storage::Env* env);

struct Incarnation {
  std::string id;
  bool created = false;  // made by this call: the directory had none (a new broker or a wiped one)
};
// Reads <data-dir>/meta/incarnation, or makes a new random one (durably) when missing.
Result<Incarnation> LoadOrCreateIncarnation(const std::string& data_dir, storage::Env* env);

// The `clean` flag of a registration: false only when the last run of a directory that held
// data did not stop cleanly (no clean-shutdown marker, 0002 decision 14) under the interval
// flush policy, where records it reported may not have reached the disk. Under `durable` a
// broker reports only synced offsets, so an unclean stop loses nothing it reported.
bool CleanForRegistration(bool had_data, bool stopped_cleanly, storage::FlushPolicy policy);

}  // namespace sluice::broker
