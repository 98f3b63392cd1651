#include "lake/deletes.h"

namespace sluice::lake {

bool DeleteApplies(const ManifestEntry& del, const PartitionSpec& del_spec,
                   const ManifestEntry& data, const PartitionSpec& data_spec) {
  const DataFile& f = del.file;
  if (!del_spec.is_unpartitioned() && (del_spec.spec_id != data_spec.spec_id ||
                                       f.partition.ToString() != data.file.partition.ToString())) {
    return false;
  }
  const int64_t data_seq = data.sequence_number.value_or(0);
  const int64_t delete_seq = del.sequence_number.value_or(0);
  if (f.content == 2) return delete_seq > data_seq;
  if (f.content != 1 || delete_seq < data_seq) return false;
  const std::string& path = data.file.file_path;
  auto lo = f.lower_bounds.find(kDeleteFilePathFieldId);
  auto hi = f.upper_bounds.find(kDeleteFilePathFieldId);
  if (lo != f.lower_bounds.end() && path < lo->second) return false;
  if (hi != f.upper_bounds.end() && path > hi->second) return false;
  return true;
}

}  // namespace sluice::lake
