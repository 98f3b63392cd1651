// `sluice quota set|remove|list`: the client quotas of a running broker
// (docs/design/0019-security.md, phase F), over the Kafka protocol as Kafka's
// kafka-configs.sh --entity-type users|clients --alter --add-config does it
// (AlterClientQuotas, DescribeClientQuotas).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/admin_connection.h"

namespace sluice::cli {

struct QuotaFlags {
  AdminConnectionFlags connection;
  std::optional<std::string> user;  // --user NAME
  bool default_user = false;        // --default-user: <default>
  std::optional<std::string> client_id;
  bool default_client_id = false;
  // set: KEY=VALUE (producer_byte_rate, consumer_byte_rate, request_percentage); remove:
  // KEY.
  std::vector<std::string> settings;
};

int RunQuotaSet(const QuotaFlags& flags);
int RunQuotaRemove(const QuotaFlags& flags);
int RunQuotaList(const QuotaFlags& flags);

}  // namespace sluice::cli
