// Small metadata files the broker keeps beside its data: written whole and durably
// (temp file, fdatasync, rename, directory fsync), read whole with a size cap.
#pragma once

#include <cstddef>
#include <string>

#include "base/status.h"
#include "storage/env.h"

namespace sluice::broker {

// Replaces <dir>/<name> with `data`: a power loss leaves the old file or the new one.
// `mode` other than 0: the new file's permissions, set before any byte is written (0600
// for secrets).
Status WriteFileDurably(storage::Env* env, const std::string& dir, const std::string& name,
                        const std::string& data, int mode = 0);

// The whole file; NotFound when missing, InvalidArgument when larger than `max_bytes`.
Result<std::string> ReadSmallFile(storage::Env* env, const std::string& path, size_t max_bytes);

}  // namespace sluice::broker
