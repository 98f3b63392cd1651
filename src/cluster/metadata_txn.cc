// MetadataWrite to etcd TxnRequest. See metadata_txn.h.
#include "cluster/metadata_txn.h"

#include <utility>

namespace sluice::cluster {

TxnRequest ToTxn(const MetadataWrite& write) {
  TxnRequest t;
  for (const auto& c : write.compares) {
    t.compares.push_back(Compare::ModRevision(c.key, CompareResult::kEqual, c.mod_revision));
  }
  for (const auto& p : write.puts) t.success.push_back(TxnOp::Put(p.key, p.value, p.lease));
  for (const auto& k : write.deletes) t.success.push_back(TxnOp::Delete(k));
  for (const auto& prefix : write.delete_prefixes) {
    DeleteRequest d;
    d.key = prefix;
    d.range_end = PrefixRangeEnd(prefix);
    t.success.push_back(TxnOp::Delete(std::move(d)));
  }
  return t;
}

}  // namespace sluice::cluster
