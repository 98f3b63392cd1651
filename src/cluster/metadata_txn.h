// A MetadataWrite (controller_decisions.h) as the etcd transaction that carries it: each
// compare on the key's mod_revision (0: the key does not exist), then its puts (with their
// leases), deletes and prefix deletes in the success branch; no failure branch.
#pragma once

#include "cluster/controller_decisions.h"
#include "cluster/etcd_types.h"

namespace sluice::cluster {

TxnRequest ToTxn(const MetadataWrite& write);

}  // namespace sluice::cluster
