// A MetadataWrite (controller_decisions.h) as the etcd transaction that carries it: each
// compare on the key's mod_revision (0: the key does not exist), then its puts (with their
// leases), deletes and prefix deletes in the success branch; no failure branch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/controller_decisions.h"
#include "cluster/etcd_types.h"

namespace sluice::cluster {

// With `prev_kv`, every put asks for the key's previous value (AppliedPuts needs it).
TxnRequest ToTxn(const MetadataWrite& write, bool prev_kv = false);

// What each put of a `write` that succeeded left in etcd, from the transaction's answer:
// its mod_revision is the answer's revision; its create_revision the previous key's when
// the key existed (the answer's prev_kv: ask with ToTxn(write, true)), else the answer's
// revision. A put without its PutResponse (an answer not of this write) counts as new.
struct AppliedPut {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;
  int64_t create_revision = 0;
};
std::vector<AppliedPut> AppliedPuts(const MetadataWrite& write, const TxnResponse& r);

}  // namespace sluice::cluster
