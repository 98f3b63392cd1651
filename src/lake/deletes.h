// Which Iceberg v2 delete files apply to which data files (the spec's "Scan Planning"),
// for the query planner and compaction (docs/design/0024, decisions 14 and 15).
#pragma once

#include "lake/manifest.h"
#include "lake/table_metadata.h"

namespace sluice::lake {

// The field id of a position delete file's file_path column (the spec's reserved id).
inline constexpr int32_t kDeleteFilePathFieldId = 2147483546;
inline constexpr int32_t kDeletePosFieldId = 2147483545;

// Whether delete file `del` (content 1 or 2, of spec `del_spec`) applies to data file
// `data` (of spec `data_spec`): the delete's partition (spec and values) is the data
// file's, or its spec is unpartitioned; a position delete applies to data of a data
// sequence number not above its own (and, when it has file_path bounds, to files inside
// them), an equality delete to data of a lower one.
bool DeleteApplies(const ManifestEntry& del, const PartitionSpec& del_spec,
                   const ManifestEntry& data, const PartitionSpec& data_spec);

}  // namespace sluice::lake
