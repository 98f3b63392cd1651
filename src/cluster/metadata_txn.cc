// MetadataWrite to etcd TxnRequest. See metadata_txn.h.
#include "cluster/metadata_txn.h"

#include <utility>

namespace sluice::cluster {

TxnRequest ToTxn(const MetadataWrite& write, bool prev_kv) {
  TxnRequest t;
  for (const auto& c : write.compares) {
    t.compares.push_back(Compare::ModRevision(c.key, CompareResult::kEqual, c.mod_revision));
  }
  for (const auto& p : write.puts) {
    t.success.push_back(
        TxnOp::Put({.key = p.key, .value = p.value, .lease = p.lease, .prev_kv = prev_kv}));
  }
  for (const auto& k : write.deletes) t.success.push_back(TxnOp::Delete(k));
  for (const auto& prefix : write.delete_prefixes) {
    DeleteRequest d;
    d.key = prefix;
    d.range_end = PrefixRangeEnd(prefix);
    t.success.push_back(TxnOp::Delete(std::move(d)));
  }
  return t;
}

std::vector<AppliedPut> AppliedPuts(const MetadataWrite& write, const TxnResponse& r) {
  std::vector<AppliedPut> out;
  out.reserve(write.puts.size());
  const int64_t revision = r.header.revision;
  for (size_t i = 0; i < write.puts.size(); ++i) {
    AppliedPut a{write.puts[i].key, write.puts[i].value, revision, revision};
    // The puts come first in the success branch, so the i-th answer is the i-th put's.
    if (i < r.responses.size()) {
      if (const auto* put = std::get_if<PutResponse>(&r.responses[i]);
          put != nullptr && put->prev_kv.has_value() && put->prev_kv->create_revision > 0) {
        a.create_revision = put->prev_kv->create_revision;
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace sluice::cluster
