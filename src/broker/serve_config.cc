#include "broker/serve_config.h"

#include <arpa/inet.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <map>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "broker/inter_broker_connection.h"
#include "broker/listeners_config.h"
#include "net/tls_config.h"

namespace sluice::broker {

Status ParseHostPort(std::string_view text, std::string* host, uint16_t* port) {
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgumentError("'{}' is not HOST:PORT", text);
  }
  std::string h(text.substr(0, colon));
  std::string_view p = text.substr(colon + 1);
  int value = -1;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), value);
  if (p.empty() || ec != std::errc() || end != p.data() + p.size() || value < 0 || value > 65535) {
    return InvalidArgumentError("'{}': the port must be a number from 0 to 65535", text);
  }
  if (h == "localhost") h = "127.0.0.1";
  in_addr addr{};
  if (inet_pton(AF_INET, h.c_str(), &addr) != 1) {
    return InvalidArgumentError("'{}': the host must be an IPv4 address", text);
  }
  *host = h;
  *port = static_cast<uint16_t>(value);
  return Status::OK();
}

Status ParseEtcdEndpoint(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.starts_with("https://")) {
    return InvalidArgumentError("'{}': etcd over TLS (https) is not supported yet; use http://",
                                url);
  }
  if (!url.starts_with(kScheme)) {
    return InvalidArgumentError("'{}' is not an etcd URL http://HOST:PORT", url);
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return InvalidArgumentError("'{}': an etcd URL has no path (http://HOST:PORT)", url);
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidArgumentError("'{}' is not an etcd URL http://HOST:PORT (the port is needed)",
                                url);
  }
  std::string_view host = rest.substr(0, colon);
  std::string_view port = rest.substr(colon + 1);
  const bool host_ok = std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
  });
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (!host_ok || port.empty() || ec != std::errc() || end != port.data() + port.size() ||
      value < 1 || value > 65535) {
    return InvalidArgumentError(
        "'{}' is not an etcd URL http://HOST:PORT (a host name or IPv4 address, a port from 1 "
        "to 65535)",
        url);
  }
  return Status::OK();
}

namespace {

// The replication keys and the internal topics' keys, Kafka's names and defaults
// (docs/design/0018-cluster.md).
constexpr std::string_view kReplicaKeys[] = {"replica.lag.time.max.ms",
                                             "replica.fetch.max.bytes",
                                             "replica.fetch.wait.max.ms",
                                             "replica.fetch.backoff.ms",
                                             "replica.socket.timeout.ms",
                                             "replica.follower.direct.writes",
                                             "offsets.topic.num.partitions",
                                             "offsets.topic.replication.factor",
                                             "transaction.state.log.num.partitions",
                                             "transaction.state.log.replication.factor",
                                             "transaction.state.log.min.isr"};

// offsets.topic.* and transaction.state.log.*: plain integers, as Kafka takes them.
Status ReadInternalTopicKeys(const Config& config, ClusterOptions* out) {
  auto read = [&](std::string_view key, int64_t def, int64_t max, int32_t* to) -> Status {
    auto v = config.GetInt(key, def, 1, max);
    if (!v.ok()) {
      return InvalidArgumentError("{} (set in {}): a number from 1 to {}", key, config.Origin(key),
                                  max);
    }
    *to = static_cast<int32_t>(*v);
    return Status::OK();
  };
  // Partition counts as CreateTopics takes them; replication factors and the ISR minimum
  // as Kafka's (int16).
  RETURN_IF_ERROR(
      read("offsets.topic.num.partitions", 16, 10'000, &out->offsets_topic_num_partitions));
  RETURN_IF_ERROR(read("offsets.topic.replication.factor", 3, INT16_MAX,
                       &out->offsets_topic_replication_factor));
  RETURN_IF_ERROR(
      read("transaction.state.log.num.partitions", 16, 10'000, &out->txn_state_log_num_partitions));
  RETURN_IF_ERROR(read("transaction.state.log.replication.factor", 3, INT16_MAX,
                       &out->txn_state_log_replication_factor));
  RETURN_IF_ERROR(read("transaction.state.log.min.isr", 2, INT16_MAX, &out->txn_state_log_min_isr));
  if (out->txn_state_log_min_isr > out->txn_state_log_replication_factor) {
    return InvalidArgumentError(
        "transaction.state.log.min.isr ({}, set in {}) is above "
        "transaction.state.log.replication.factor ({}): no transaction state could ever be "
        "written",
        out->txn_state_log_min_isr, config.Origin("transaction.state.log.min.isr"),
        out->txn_state_log_replication_factor);
  }
  return Status::OK();
}

Status ReadReplicaKeys(const Config& config, ClusterOptions* out) {
  constexpr int64_t kDayMs = 86'400'000;
  auto read = [&](std::string_view key, int64_t def, int64_t min, int64_t max) -> Result<int64_t> {
    auto v = config.GetInt(key, def, min, max);
    if (!v.ok()) {
      return InvalidArgumentError("{} (set in {}): a number from {} to {}", key, config.Origin(key),
                                  min, max);
    }
    return *v;
  };
  ASSIGN_OR_RETURN(out->replica_lag_time_max_ms,
                   read("replica.lag.time.max.ms", 30'000, 1, kDayMs));
  ASSIGN_OR_RETURN(int64_t fetch_max_bytes, read("replica.fetch.max.bytes", 1 << 20, 0, INT32_MAX));
  ASSIGN_OR_RETURN(int64_t wait, read("replica.fetch.wait.max.ms", 500, 0, kDayMs));
  ASSIGN_OR_RETURN(out->replica_fetch_backoff_ms,
                   read("replica.fetch.backoff.ms", 1'000, 0, kDayMs));
  ASSIGN_OR_RETURN(int64_t socket, read("replica.socket.timeout.ms", 30'000, 1, kDayMs));
  // Kafka's own checks (KafkaConfig): a fetch that waits longer than the socket timeout
  // times out for nothing, and one that waits longer than the lag time shrinks the ISR.
  if (wait > socket) {
    return InvalidArgumentError(
        "replica.fetch.wait.max.ms ({} ms, set in {}) is longer than replica.socket.timeout.ms "
        "({} ms): every idle replica fetch would time out",
        wait, config.Origin("replica.fetch.wait.max.ms"), socket);
  }
  if (wait > out->replica_lag_time_max_ms) {
    return InvalidArgumentError(
        "replica.fetch.wait.max.ms ({} ms, set in {}) is longer than replica.lag.time.max.ms "
        "({} ms): followers would leave the ISR while they wait",
        wait, config.Origin("replica.fetch.wait.max.ms"), out->replica_lag_time_max_ms);
  }
  out->replica_fetch_max_bytes = static_cast<int32_t>(fetch_max_bytes);
  out->replica_fetch_wait_max_ms = static_cast<int32_t>(wait);
  out->replica_socket_timeout_ms = static_cast<int32_t>(socket);
  auto direct = config.GetBool("replica.follower.direct.writes", true);
  if (!direct.ok()) {
    return InvalidArgumentError("replica.follower.direct.writes (set in {}): true or false",
                                config.Origin("replica.follower.direct.writes"));
  }
  out->replica_follower_direct_writes = *direct;
  return ReadInternalTopicKeys(config, out);
}

// The cluster keys (docs/design/0018-cluster.md): etcd, node_id, inter_broker_addr,
// cluster.*, replica.*. Set without etcd, any of them is a mistake worth naming.
Status ReadClusterKeys(const Config& config, const BrokerOptions& broker, ClusterOptions* out) {
  std::vector<std::string> endpoints;
  if (config.Has("etcd")) {
    auto list = config.GetList("etcd");
    if (list.ok()) {
      endpoints = *list;
    } else {
      // A scalar: one URL, or several separated by commas (as --etcd takes them).
      ASSIGN_OR_RETURN(std::string text, config.GetString("etcd", ""));
      size_t start = 0;
      while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string::npos) comma = text.size();
        std::string one = text.substr(start, comma - start);
        while (!one.empty() && one.front() == ' ') one.erase(one.begin());
        while (!one.empty() && one.back() == ' ') one.pop_back();
        endpoints.push_back(std::move(one));
        start = comma + 1;
      }
    }
    if (endpoints.empty() || (endpoints.size() == 1 && endpoints[0].empty())) {
      return InvalidArgumentError("etcd (set in {}): no endpoint; give http://HOST:PORT[,...]",
                                  config.Origin("etcd"));
    }
    for (const std::string& url : endpoints) {
      if (Status st = ParseEtcdEndpoint(url); !st.ok()) {
        return InvalidArgumentError("etcd (set in {}): {}", config.Origin("etcd"), st.message());
      }
    }
  }
  if (endpoints.empty()) {
    std::vector<std::string_view> cluster_keys = {"node_id", "inter_broker_addr",
                                                  "cluster.session_timeout", "cluster.name",
                                                  "cluster.controlled_shutdown_timeout"};
    cluster_keys.insert(cluster_keys.end(), std::begin(kReplicaKeys), std::end(kReplicaKeys));
    for (std::string_view key : cluster_keys) {
      if (config.Has(key)) {
        return InvalidArgumentError(
            "{} (set in {}) is a cluster setting: set etcd (--etcd http://HOST:PORT) too, or "
            "leave it out for a single broker",
            key, config.Origin(key));
      }
    }
    return Status::OK();
  }
  out->etcd = std::move(endpoints);
  if (!config.Has("node_id")) {
    return InvalidArgumentError(
        "etcd (set in {}) makes this broker part of a cluster: set node_id (--node-id N) too",
        config.Origin("etcd"));
  }
  auto node = config.GetInt("node_id", -1, 0, INT32_MAX);
  if (!node.ok()) {
    return InvalidArgumentError("node_id (set in {}): a broker's id is a number from 0 to {}",
                                config.Origin("node_id"), INT32_MAX);
  }
  out->node_id = static_cast<int32_t>(*node);
  if (broker.advertised_port == 0) {
    return InvalidArgumentError(
        "kafka.addr (set in {}) has port 0: a broker of a cluster needs a fixed port (the "
        "others register and reach it there), or set kafka.advertised_addr",
        config.Origin("kafka.addr"));
  }
  out->inter_broker_host = broker.advertised_host;
  out->inter_broker_port = broker.advertised_port;
  if (config.Has("inter_broker_addr")) {
    ASSIGN_OR_RETURN(std::string addr, config.GetString("inter_broker_addr", ""));
    // Like kafka.advertised_addr, the host may be a name; the port must be a real one.
    const size_t colon = addr.rfind(':');
    int value = -1;
    if (colon != std::string::npos && colon > 0) {
      auto [end, ec] = std::from_chars(addr.data() + colon + 1, addr.data() + addr.size(), value);
      if (ec != std::errc() || end != addr.data() + addr.size()) value = -1;
    }
    if (value <= 0 || value > 65535 || addr.substr(0, colon) == "0.0.0.0") {
      return InvalidArgumentError(
          "inter_broker_addr (set in {}): '{}' is not HOST:PORT with a host other brokers can "
          "reach and a port from 1 to 65535",
          config.Origin("inter_broker_addr"), addr);
    }
    out->inter_broker_host = addr.substr(0, colon);
    out->inter_broker_port = value;
  }
  auto session = config.GetDurationMs("cluster.session_timeout", 6000);
  if (!session.ok()) {
    return InvalidArgumentError("cluster.session_timeout (set in {}): {}",
                                config.Origin("cluster.session_timeout"),
                                session.status().message());
  }
  if (*session < 2000 || *session > 300'000) {
    return InvalidArgumentError(
        "cluster.session_timeout (set in {}): {} ms is outside 2 s (etcd's shortest lease) to "
        "300 s",
        config.Origin("cluster.session_timeout"), *session);
  }
  out->session_timeout_ms = *session;
  auto controlled = config.GetDurationMs("cluster.controlled_shutdown_timeout", 10'000);
  if (!controlled.ok() || *controlled < 0 || *controlled > 300'000) {
    return InvalidArgumentError("cluster.controlled_shutdown_timeout (set in {}): {}",
                                config.Origin("cluster.controlled_shutdown_timeout"),
                                controlled.ok()
                                    ? fmt::format("{} ms is outside 0 (off) to 300 s", *controlled)
                                    : controlled.status().message());
  }
  out->controlled_shutdown_timeout_ms = *controlled;
  ASSIGN_OR_RETURN(out->name, config.GetString("cluster.name", "sluice"));
  const bool name_ok =
      !out->name.empty() && out->name.size() <= 64 &&
      std::all_of(out->name.begin(), out->name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      });
  if (!name_ok || out->name == "." || out->name == "..") {
    return InvalidArgumentError(
        "cluster.name (set in {}): '{}' must be 1 to 64 letters, digits, '.', '_' or '-' (it "
        "becomes the etcd prefix /sluice/<name>/)",
        config.Origin("cluster.name"), out->name);
  }
  return ReadReplicaKeys(config, out);
}

// The tls: section and kafka.listeners (docs/design/0019-security.md): one socket per
// listener, each with its TLS and SASL, and its advertised address.
Status ReadListeners(const Config& config, ServeConfig* out) {
  ASSIGN_OR_RETURN(std::optional<net::TlsOptions> tls_options, net::TlsOptionsFromConfig(config));
  std::shared_ptr<net::TlsContext> tls;
  if (tls_options.has_value()) {
    // The files are read now: a key others may read or a broken chain stops the start.
    ASSIGN_OR_RETURN(tls, net::TlsContext::Create(*tls_options));
    out->tls = tls;
  }
  if (config.Has("ssl.principal.mapping.rules")) {
    // Kafka's key and syntax: a client certificate's subject to a user (auth/principal.h).
    ASSIGN_OR_RETURN(std::string rules, config.GetString("ssl.principal.mapping.rules", ""));
    auto mapper = auth::SslPrincipalMapper::Parse(rules);
    if (!mapper.ok()) {
      return InvalidArgumentError("ssl.principal.mapping.rules (set in {}): {}",
                                  config.Origin("ssl.principal.mapping.rules"),
                                  mapper.status().message());
    }
    out->server.connection.ssl_principal_mapper =
        std::make_shared<const auth::SslPrincipalMapper>(std::move(*mapper));
  }
  ListenerContext context;
  context.tls_configured = tls != nullptr;
  context.sasl_enabled = out->broker.sasl.enabled;
  ASSIGN_OR_RETURN(std::optional<std::vector<KafkaListener>> listeners,
                   KafkaListenersFromConfig(config, context));
  if (!listeners.has_value()) return Status::OK();
  if (config.Has("etcd")) {
    for (const KafkaListener& l : *listeners) {
      if (l.advertised_port == 0) {
        return InvalidArgumentError(
            "kafka.listeners (set in {}): {} has port 0: a broker of a cluster needs fixed ports "
            "(the others register and reach it there), or set kafka.advertised_listeners",
            config.Origin("kafka.listeners"), l.name);
      }
    }
  }
  for (const KafkaListener& l : *listeners) {
    ListenerOptions lo;
    lo.name = l.name;
    lo.host = l.host;
    lo.port = l.port;
    if (l.tls()) lo.tls = tls;
    lo.sasl = l.sasl();
    out->server.listeners.push_back(std::move(lo));
  }
  const KafkaListener& first = listeners->front();
  out->server.host = first.host;
  out->server.port = first.port;
  out->broker.advertised_host = first.advertised_host;
  out->broker.advertised_port = first.advertised_port;
  out->broker.listeners = std::move(*listeners);
  return Status::OK();
}

// kafka.inter_broker_listener and sasl.inter_broker_* (docs/design/0019-security.md): which
// listener the other brokers are reached on, and how this broker speaks to it.
Status ReadInterBrokerSecurity(const Config& config, ServeConfig* out) {
  constexpr std::string_view kKeys[] = {"kafka.inter_broker_listener", "sasl.inter_broker_user",
                                        "sasl.inter_broker_mechanism"};
  ClusterOptions& cluster = out->broker.cluster;
  if (!cluster.enabled()) {
    for (std::string_view key : kKeys) {
      if (config.Has(key)) {
        return InvalidArgumentError(
            "{} (set in {}) is a cluster setting: set etcd (--etcd http://HOST:PORT) too, or "
            "leave it out for a single broker",
            key, config.Origin(key));
      }
    }
    return Status::OK();
  }
  // The listeners: kafka.listeners, or kafka.addr's one (SASL_PLAINTEXT with sasl.enabled).
  std::vector<KafkaListener> listeners = out->broker.listeners;
  if (listeners.empty()) {
    KafkaListener one;
    one.name = out->broker.sasl.enabled ? "SASL_PLAINTEXT" : "PLAINTEXT";
    one.advertised_host = out->broker.advertised_host;
    one.advertised_port = static_cast<uint16_t>(out->broker.advertised_port);
    listeners.push_back(std::move(one));
  }
  // Kafka's default is PLAINTEXT (security.inter.broker.protocol); with kafka.addr, its one.
  const std::string fallback = out->broker.listeners.empty() ? listeners[0].name : "PLAINTEXT";
  ASSIGN_OR_RETURN(std::string name, config.GetString("kafka.inter_broker_listener", fallback));
  const auto found = std::find_if(listeners.begin(), listeners.end(),
                                  [&](const KafkaListener& l) { return l.name == name; });
  if (found == listeners.end()) {
    std::vector<std::string> names;
    for (const KafkaListener& l : listeners) names.push_back(l.name);
    return InvalidArgumentError(
        "kafka.inter_broker_listener ({}): '{}' is not one of this broker's listeners ({}); the "
        "other brokers reach this one on it",
        config.Has("kafka.inter_broker_listener")
            ? fmt::format("set in {}", config.Origin("kafka.inter_broker_listener"))
            : "PLAINTEXT by default",
        name, fmt::join(names, ", "));
  }
  const KafkaListener& l = *found;
  if (!config.Has("inter_broker_addr")) {
    cluster.inter_broker_host = l.advertised_host;
    cluster.inter_broker_port = l.advertised_port;
  }
  auto security = std::make_shared<InterBrokerSecurity>();
  security->listener = l.name;
  if (l.tls()) {
    const net::TlsOptions& tls = out->tls->options();
    if (tls.ca_file.empty()) {
      return InvalidArgumentError(
          "kafka.inter_broker_listener is {}: this broker checks the others' certificates "
          "against tls.ca_file, which is not set",
          l.name);
    }
    security->tls = true;
    security->tls_client.ca_file = tls.ca_file;
    security->tls_client.cert_file = tls.cert_file;  // offered when the others ask for one
    security->tls_client.key_file = tls.key_file;
  }
  const SaslConfig& sasl = out->broker.sasl;
  if (!l.sasl()) {
    for (std::string_view key : {kKeys[1], kKeys[2]}) {
      if (config.Has(key)) {
        return InvalidArgumentError(
            "{} (set in {}): the inter-broker listener {} has no SASL; leave it out or make the "
            "inter-broker listener SASL_PLAINTEXT or SASL_SSL",
            key, config.Origin(key), l.name);
      }
    }
  } else {
    ASSIGN_OR_RETURN(std::string user, config.GetString("sasl.inter_broker_user", ""));
    const auto u = std::find_if(sasl.users.begin(), sasl.users.end(),
                                [&](const SaslUser& x) { return x.name == user; });
    if (user.empty() || u == sasl.users.end()) {
      return InvalidArgumentError(
          "sasl.inter_broker_user{}: the inter-broker listener {} authenticates this broker to "
          "the others: name one of sasl.users{}",
          config.Has("sasl.inter_broker_user")
              ? fmt::format(" (set in {})", config.Origin("sasl.inter_broker_user"))
              : "",
          l.name, user.empty() ? "" : fmt::format(" ('{}' is not one)", user));
    }
    ASSIGN_OR_RETURN(std::string mechanism,
                     config.GetString("sasl.inter_broker_mechanism", sasl.mechanisms.front()));
    if (std::find(sasl.mechanisms.begin(), sasl.mechanisms.end(), mechanism) ==
        sasl.mechanisms.end()) {
      return InvalidArgumentError(
          "sasl.inter_broker_mechanism (set in {}): '{}' is not one of sasl.mechanisms ({})",
          config.Origin("sasl.inter_broker_mechanism"), mechanism,
          fmt::join(sasl.mechanisms, ", "));
    }
    security->sasl_mechanism = mechanism;
    security->sasl_user = u->name;
    security->sasl_password = u->password;
  }
  cluster.inter_broker_security = std::move(security);
  return Status::OK();
}

// authorization.* (docs/design/0019-security.md, phase E): Kafka's authorizer, super users
// and allow.everyone.if.no.acl.found. super_users is a YAML list or Kafka's
// "User:a;User:b".
Status ReadAuthorization(const Config& config, ServeConfig* out) {
  AuthorizationOptions& a = out->broker.authorization;
  ASSIGN_OR_RETURN(a.enabled, config.GetBool("authorization.enabled", false));
  ASSIGN_OR_RETURN(a.allow_everyone_if_no_acl_found,
                   config.GetBool("authorization.allow_everyone_if_no_acl_found", false));
  std::vector<std::string> supers;
  if (config.Has("authorization.super_users")) {
    auto list = config.GetList("authorization.super_users");
    if (list.ok()) {
      supers = std::move(*list);
    } else {
      ASSIGN_OR_RETURN(std::string text, config.GetString("authorization.super_users", ""));
      std::string_view rest = text;
      while (!rest.empty()) {
        const size_t semi = std::min(rest.find(';'), rest.size());
        std::string_view one = Trim(rest.substr(0, semi));
        if (!one.empty()) supers.emplace_back(one);
        rest.remove_prefix(std::min(semi + 1, rest.size()));
      }
    }
  }
  for (const std::string& p : supers) {
    const size_t colon = p.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == p.size()) {
      return InvalidArgumentError(
          "authorization.super_users (set in {}): '{}' is not a principal TYPE:NAME such as "
          "User:admin",
          config.Origin("authorization.super_users"), p);
    }
    // A comma may be part of a certificate's name, but not before a second principal.
    if (p.find(",User:") != std::string::npos || p.find(", User:") != std::string::npos) {
      return InvalidArgumentError(
          "authorization.super_users (set in {}): '{}' looks like several principals: separate "
          "them with ';' (Kafka's super.users) or write a YAML list",
          config.Origin("authorization.super_users"), p);
    }
  }
  a.super_users = std::move(supers);
  if (!a.enabled) {
    for (std::string_view key :
         {"authorization.super_users", "authorization.allow_everyone_if_no_acl_found"}) {
      if (config.Has(key)) {
        return InvalidArgumentError(
            "{} (set in {}) has no effect without authorization.enabled: true", key,
            config.Origin(key));
      }
    }
    return Status::OK();
  }
  // The other brokers fetch as the inter-broker principal: without ClusterAction they
  // could not replicate, and an ACL for it can only be made once the cluster runs.
  const ClusterOptions& cluster = out->broker.cluster;
  if (cluster.enabled() && cluster.inter_broker_security != nullptr &&
      !cluster.inter_broker_security->sasl_user.empty()) {
    const std::string principal = "User:" + cluster.inter_broker_security->sasl_user;
    if (std::find(a.super_users.begin(), a.super_users.end(), principal) == a.super_users.end()) {
      return InvalidArgumentError(
          "authorization.super_users{}: the brokers replicate as {} (sasl.inter_broker_user), "
          "which must be a super user",
          config.Has("authorization.super_users")
              ? fmt::format(" (set in {})", config.Origin("authorization.super_users"))
              : "",
          principal);
    }
  }
  return Status::OK();
}

}  // namespace

const std::vector<std::string_view>& ServeConfigKeys() {
  static const std::vector<std::string> kOwned = [] {
    std::vector<std::string> keys = {"kafka.addr",
                                     "kafka.advertised_addr",
                                     "kafka.listeners",
                                     "kafka.advertised_listeners",
                                     "kafka.inter_broker_listener",
                                     "ssl.principal.mapping.rules",
                                     "kafka.max_request_bytes",
                                     "data_dir",
                                     "shards",
                                     "storage.flush.policy",
                                     "storage.flush.ms",
                                     "storage.max_open_files",
                                     "storage.file_idle_timeout",
                                     "storage.io_threads",
                                     "storage.retention_check_interval",
                                     "storage.cleaner.threads",
                                     "storage.cleaner.dedupe_buffer_size",
                                     "storage.cleaner.io_max_bytes_per_second",
                                     "storage.cleaner.backoff",
                                     "topics.auto_create",
                                     "topics.num_partitions",
                                     "groups.initial_rebalance_delay",
                                     "groups.min_session_timeout",
                                     "groups.max_session_timeout",
                                     "groups.max_size",
                                     "transactions.max_timeout",
                                     "transactions.id_expiration",
                                     "transactions.abort_check_interval",
                                     "sasl.enabled",
                                     "sasl.mechanisms",
                                     "sasl.users",
                                     "sasl.scram_iterations",
                                     "sasl.inter_broker_user",
                                     "sasl.inter_broker_mechanism",
                                     "authorization.enabled",
                                     "authorization.super_users",
                                     "authorization.allow_everyone_if_no_acl_found",
                                     "etcd",
                                     "node_id",
                                     "inter_broker_addr",
                                     "cluster.session_timeout",
                                     "cluster.name",
                                     "cluster.controlled_shutdown_timeout",
                                     "tiered_storage.bucket",
                                     "tiered_storage.remote_fetch_max_wait_ms",
                                     "tiered_storage.chunk_bytes"};
    keys.insert(keys.end(), std::begin(kReplicaKeys), std::end(kReplicaKeys));
    for (std::string_view k : net::TlsConfigKeys()) keys.emplace_back(k);
    for (const std::string& n : TopicConfig::Names()) keys.push_back("topics.defaults." + n);
    return keys;
  }();
  static const std::vector<std::string_view> kViews(kOwned.begin(), kOwned.end());
  return kViews;
}

Result<ServeConfig> ServeConfigFrom(const Config& config,
                                    std::span<const std::string_view> other_keys) {
  static const std::vector<std::string> kTopicNames = TopicConfig::Names();
  std::vector<std::string_view> known = ServeConfigKeys();
  known.insert(known.end(), other_keys.begin(), other_keys.end());
  RETURN_IF_ERROR(config.CheckKnown(known));
  ServeConfig out;
  ASSIGN_OR_RETURN(std::string addr, config.GetString("kafka.addr", "127.0.0.1:9092"));
  if (Status st = ParseHostPort(addr, &out.server.host, &out.server.port); !st.ok()) {
    return InvalidArgumentError("kafka.addr (set in {}): {}", config.Origin("kafka.addr"),
                                st.message());
  }
  out.broker.advertised_host = out.server.host;
  out.broker.advertised_port = out.server.port;  // 0 until the server knows its port
  if (config.Has("kafka.advertised_addr")) {
    ASSIGN_OR_RETURN(std::string adv, config.GetString("kafka.advertised_addr", ""));
    uint16_t port = 0;
    size_t colon = adv.rfind(':');
    // Advertised hosts may be names (a container's hostname): only the port is checked.
    int value = -1;
    if (colon != std::string::npos && colon > 0) {
      auto [end, ec] = std::from_chars(adv.data() + colon + 1, adv.data() + adv.size(), value);
      if (ec != std::errc() || end != adv.data() + adv.size()) value = -1;
    }
    if (value <= 0 || value > 65535) {
      return InvalidArgumentError(
          "kafka.advertised_addr (set in {}): '{}' is not HOST:PORT with a port from 1 to 65535",
          config.Origin("kafka.advertised_addr"), adv);
    }
    port = static_cast<uint16_t>(value);
    out.broker.advertised_host = adv.substr(0, colon);
    out.broker.advertised_port = port;
  }
  if (out.broker.advertised_host == "0.0.0.0") {
    // Kafka refuses this too: clients would be told to connect to "any address".
    return InvalidArgumentError(
        "kafka.addr (set in {}) listens on 0.0.0.0: set kafka.advertised_addr (--advertised-addr) "
        "to the HOST:PORT clients should connect to",
        config.Origin("kafka.addr"));
  }
  ASSIGN_OR_RETURN(int64_t max_request, config.GetBytes("kafka.max_request_bytes", 100 << 20));
  if (max_request < 1024 || max_request > INT32_MAX) {
    return InvalidArgumentError("kafka.max_request_bytes (set in {}): {} is outside 1 KiB to 2 GiB",
                                config.Origin("kafka.max_request_bytes"), max_request);
  }
  out.server.connection.max_request_bytes = static_cast<int32_t>(max_request);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ASSIGN_OR_RETURN(int64_t shards, config.GetInt("shards", cores, 1, 256));
  out.server.shards = static_cast<int>(shards);

  ASSIGN_OR_RETURN(out.broker.data_dir, config.GetString("data_dir", "./sluice-data"));
  if (out.broker.data_dir.empty()) return InvalidArgumentError("data_dir must not be empty");
  ASSIGN_OR_RETURN(std::string policy, config.GetString("storage.flush.policy", "interval"));
  auto parsed = storage::ParseFlushPolicy(policy);
  if (!parsed.ok()) {
    return InvalidArgumentError("storage.flush.policy (set in {}): {}",
                                config.Origin("storage.flush.policy"), parsed.status().message());
  }
  out.broker.flush_policy = *parsed;
  ASSIGN_OR_RETURN(out.broker.flush_ms, config.GetDurationMs("storage.flush.ms", 100));
  if (out.broker.flush_ms < 1)
    return InvalidArgumentError("storage.flush.ms must be at least 1 ms");
  ASSIGN_OR_RETURN(int64_t files, config.GetInt("storage.max_open_files", 1024, 16, 1 << 20));
  out.broker.max_open_files = static_cast<size_t>(files);
  ASSIGN_OR_RETURN(out.broker.file_idle_timeout_ms,
                   config.GetDurationMs("storage.file_idle_timeout", 5000));
  if (out.broker.file_idle_timeout_ms < 0) {
    return InvalidArgumentError("storage.file_idle_timeout must not be negative (0: never)");
  }
  ASSIGN_OR_RETURN(int64_t io_threads,
                   config.GetInt("storage.io_threads", std::max(16, 4 * cores), 2, 1024));
  out.broker.io_threads = static_cast<int>(io_threads);
  ASSIGN_OR_RETURN(out.broker.retention_check_interval_ms,
                   config.GetDurationMs("storage.retention_check_interval", 300'000));
  if (out.broker.retention_check_interval_ms < 1) {
    return InvalidArgumentError("storage.retention_check_interval must be at least 1 ms");
  }
  // The log cleaner (Kafka's log.cleaner.threads, .dedupe.buffer.size,
  // .io.max.bytes.per.second, .backoff.ms).
  compaction::CleanerOptions& cleaner = out.broker.cleaner;
  ASSIGN_OR_RETURN(int64_t cleaner_threads, config.GetInt("storage.cleaner.threads", 1, 1, 64));
  cleaner.threads = static_cast<int>(cleaner_threads);
  ASSIGN_OR_RETURN(int64_t dedupe,
                   config.GetBytes("storage.cleaner.dedupe_buffer_size", int64_t{128} << 20));
  if (dedupe < (int64_t{1} << 20) * cleaner_threads) {
    return InvalidArgumentError(
        "storage.cleaner.dedupe_buffer_size (set in {}): {} bytes is less than 1 MiB per "
        "cleaner thread",
        config.Origin("storage.cleaner.dedupe_buffer_size"), dedupe);
  }
  cleaner.dedupe_buffer_bytes = static_cast<uint64_t>(dedupe);
  if (config.Has("storage.cleaner.io_max_bytes_per_second")) {
    ASSIGN_OR_RETURN(int64_t io, config.GetBytes("storage.cleaner.io_max_bytes_per_second", 0));
    if (io < 1) {
      return InvalidArgumentError(
          "storage.cleaner.io_max_bytes_per_second (set in {}) must be "
          "positive (leave it out for no limit)",
          config.Origin("storage.cleaner.io_max_bytes_per_second"));
    }
    cleaner.io_max_bytes_per_second = static_cast<double>(io);
  }
  ASSIGN_OR_RETURN(cleaner.backoff_ms, config.GetDurationMs("storage.cleaner.backoff", 15'000));
  if (cleaner.backoff_ms < 1) {
    return InvalidArgumentError("storage.cleaner.backoff must be at least 1 ms");
  }
  ASSIGN_OR_RETURN(out.broker.auto_create_topics, config.GetBool("topics.auto_create", false));
  ASSIGN_OR_RETURN(int64_t partitions, config.GetInt("topics.num_partitions", 1, 1, 100000));
  out.broker.num_partitions = static_cast<int32_t>(partitions);

  std::map<std::string, std::string> defaults;
  for (const std::string& n : kTopicNames) {
    std::string key = "topics.defaults." + n;
    if (!config.Has(key)) continue;
    ASSIGN_OR_RETURN(defaults[n], config.GetString(key, ""));
  }
  // Tiered storage: the bucket (the S3 settings are the s3: section's, read by the lake).
  ASSIGN_OR_RETURN(std::string bucket, config.GetString("tiered_storage.bucket", ""));
  if (config.Has("tiered_storage.bucket")) {
    while (bucket.size() > 5 && bucket.back() == '/') bucket.pop_back();
    const bool s3 = bucket.starts_with("s3://") && bucket.size() > 5 && bucket[5] != '/';
    if (!s3) {
      return InvalidArgumentError(
          "tiered_storage.bucket: '{}' is not an S3 location (s3://bucket or s3://bucket/prefix)",
          bucket);
    }
  }
  out.broker.tiered_storage_bucket = bucket;
  ASSIGN_OR_RETURN(out.broker.remote_fetch_max_wait_ms,
                   config.GetInt("tiered_storage.remote_fetch_max_wait_ms", 500, 1, 300'000));
  ASSIGN_OR_RETURN(int64_t chunk_bytes, config.GetBytes("tiered_storage.chunk_bytes", 16 << 20));
  if (chunk_bytes < (1 << 20) || chunk_bytes > (int64_t{1} << 30)) {
    return InvalidArgumentError(
        "tiered_storage.chunk_bytes (set in {}) must be between 1MiB and 1GiB",
        config.Origin("tiered_storage.chunk_bytes"));
  }
  out.broker.tiered_chunk_bytes = static_cast<uint64_t>(chunk_bytes);
  TopicConfig base;
  base.remote_storage_available = !bucket.empty();
  TopicError err;
  auto resolved = TopicConfig::Resolve(defaults, base, &err);
  if (!resolved.ok()) return InvalidArgumentError("topics.defaults: {}", err.message);
  out.broker.topic_defaults = *resolved;
  GroupCoordinatorOptions& g = out.broker.groups;
  ASSIGN_OR_RETURN(int64_t delay, config.GetDurationMs("groups.initial_rebalance_delay", 3000));
  ASSIGN_OR_RETURN(int64_t min_session, config.GetDurationMs("groups.min_session_timeout", 6000));
  ASSIGN_OR_RETURN(int64_t max_session,
                   config.GetDurationMs("groups.max_session_timeout", 1800000));
  ASSIGN_OR_RETURN(int64_t max_size, config.GetInt("groups.max_size", 0, 0, INT32_MAX));
  if (delay < 0 || delay > INT32_MAX || min_session < 1 || max_session > INT32_MAX ||
      min_session > max_session) {
    return InvalidArgumentError(
        "groups: initial_rebalance_delay must be 0 or more, and min_session_timeout ({} ms) "
        "at least 1 ms and at most max_session_timeout ({} ms)",
        min_session, max_session);
  }
  g.initial_rebalance_delay_ms = static_cast<int32_t>(delay);
  g.min_session_timeout_ms = static_cast<int32_t>(min_session);
  g.max_session_timeout_ms = static_cast<int32_t>(max_session);
  g.max_group_size = max_size == 0 ? INT32_MAX : static_cast<int32_t>(max_size);
  TxnLimits& tx = out.broker.transactions;
  ASSIGN_OR_RETURN(int64_t max_timeout, config.GetDurationMs("transactions.max_timeout", 900000));
  ASSIGN_OR_RETURN(tx.id_expiration_ms,
                   config.GetDurationMs("transactions.id_expiration", 7LL * 24 * 3600 * 1000));
  ASSIGN_OR_RETURN(tx.abort_check_interval_ms,
                   config.GetDurationMs("transactions.abort_check_interval", 10000));
  if (max_timeout < 1 || max_timeout > INT32_MAX || tx.id_expiration_ms < 1 ||
      tx.abort_check_interval_ms < 1) {
    return InvalidArgumentError(
        "transactions: max_timeout (at most {} ms), id_expiration and abort_check_interval "
        "must be at least 1 ms",
        INT32_MAX);
  }
  tx.max_timeout_ms = static_cast<int32_t>(max_timeout);
  ASSIGN_OR_RETURN(out.broker.sasl, SaslConfigFromYaml(config));
  RETURN_IF_ERROR(ReadListeners(config, &out));
  RETURN_IF_ERROR(ReadClusterKeys(config, out.broker, &out.broker.cluster));
  RETURN_IF_ERROR(ReadInterBrokerSecurity(config, &out));
  RETURN_IF_ERROR(ReadAuthorization(config, &out));
  if (out.broker.sasl.enabled) {
    out.server.connection.max_unauthenticated_request_bytes = 512 * 1024;
    if (out.server.listeners.empty()) {
      out.server.connection.sasl = true;  // kafka.addr's listener is SASL_PLAINTEXT
      out.server.connection.listener = "SASL_PLAINTEXT";
    }
  }
  return out;
}

}  // namespace sluice::broker
