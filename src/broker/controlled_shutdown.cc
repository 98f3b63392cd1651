// The shutdown/<node> key and the controller's moves. See controlled_shutdown.h.
#include "broker/controlled_shutdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

namespace sluice::broker {
namespace {

constexpr size_t kMaxRequestBytes = 4096;

}  // namespace

std::string ShutdownKey(const cluster::KeyLayout& keys, int32_t node) {
  return keys.prefix() + "shutdown/" + std::to_string(node);
}

std::optional<int32_t> NodeOfShutdownKey(const cluster::KeyLayout& keys, std::string_view key) {
  const std::string p = keys.prefix() + "shutdown/";
  if (!key.starts_with(p)) return std::nullopt;
  std::string_view text = key.substr(p.size());
  // Decimal digits only, as KeyLayout writes them: no sign, no spaces, no leading zero.
  if (text.empty() || text.size() > 10 || (text.size() > 1 && text[0] == '0')) {
    return std::nullopt;
  }
  int64_t node = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), node);
  if (ec != std::errc() || end != text.data() + text.size() || node < 0 ||
      node > std::numeric_limits<int32_t>::max() || text[0] == '-' || text[0] == '+') {
    return std::nullopt;
  }
  return static_cast<int32_t>(node);
}

std::string ToJson(const ShutdownRequest& v) {
  return fmt::format("{{\"broker_epoch\":{}}}", v.broker_epoch);
}

Result<ShutdownRequest> ParseShutdownRequest(std::string_view json) {
  if (json.size() > kMaxRequestBytes) {
    return InvalidArgumentError("shutdown request: {} bytes, more than {}", json.size(),
                                kMaxRequestBytes);
  }
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError("shutdown request: not JSON");
  if (!j.is_object()) return InvalidArgumentError("shutdown request: not a JSON object");
  auto it = j.find("broker_epoch");
  if (it == j.end()) return InvalidArgumentError("shutdown request: no broker_epoch");
  if (!it->is_number_integer()) {
    return InvalidArgumentError("shutdown request: broker_epoch is not an integer");
  }
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgumentError("shutdown request: broker_epoch is out of range");
  }
  const int64_t epoch = it->get<int64_t>();
  if (epoch < 0) return InvalidArgumentError("shutdown request: a negative broker_epoch");
  return ShutdownRequest{epoch};
}

std::optional<cluster::PartitionState> MoveAway(const std::vector<int32_t>& replicas,
                                                const cluster::PartitionState& state,
                                                const cluster::LiveBrokers& live,
                                                const std::set<int32_t>& leaving,
                                                int64_t controller_epoch) {
  cluster::PartitionState next = state;
  for (const cluster::IsrMember& m : state.isr) {
    if (m.node != state.leader && leaving.count(m.node) != 0) {
      next = cluster::WithoutIsrMember(next, m.node);
    }
  }
  if (state.leader >= 0 && leaving.count(state.leader) != 0) {
    cluster::LiveBrokers staying = live;
    for (int32_t node : leaving) staying.erase(node);
    cluster::PartitionState without_leader = next;
    without_leader.leader = -1;
    const int32_t successor = cluster::ChooseLeader(replicas, without_leader, staying);
    if (successor >= 0) {
      next.leader = successor;
      next = cluster::WithoutIsrMember(next, state.leader);
    }
  }
  if (next.leader == state.leader && next.isr == state.isr) return std::nullopt;
  next.leader_epoch = state.leader_epoch + 1;
  next.controller_epoch = controller_epoch;
  return next;
}

}  // namespace sluice::broker
