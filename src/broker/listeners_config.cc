#include "broker/listeners_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "broker/serve_config.h"

namespace sluice::broker {
namespace {

constexpr std::string_view kListeners = "kafka.listeners";
constexpr std::string_view kAdvertised = "kafka.advertised_listeners";
constexpr std::string_view kNames[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"};

// The key's entries: a YAML list, or one string of comma-separated entries.
Result<std::vector<std::string>> Entries(const Config& config, std::string_view key) {
  std::vector<std::string> out;
  auto list = config.GetList(key);
  if (list.ok()) {
    out = *list;
  } else {
    auto text = config.GetString(key, "");
    if (!text.ok()) {
      return InvalidArgumentError("{} (set in {}): a list of NAME://HOST:PORT entries", key,
                                  config.Origin(key));
    }
    std::string_view rest = *text;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      out.emplace_back(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (out.empty()) {
    return InvalidArgumentError("{} (set in {}) is empty: name at least one listener", key,
                                config.Origin(key));
  }
  return out;
}

struct Entry {
  std::string name, host;
  int port = -1;
};

// NAME://HOST:PORT; the host is checked by the caller.
Result<Entry> ParseEntry(const Config& config, std::string_view key, std::string_view text) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("{} (set in {}): '{}' {}", key, config.Origin(key), text, why);
  };
  size_t sep = text.find("://");
  if (sep == std::string_view::npos) return bad("is not NAME://HOST:PORT");
  Entry e;
  e.name = std::string(text.substr(0, sep));
  if (std::find(std::begin(kNames), std::end(kNames), e.name) == std::end(kNames)) {
    return bad("names no security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL");
  }
  std::string_view addr = text.substr(sep + 3);
  size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("is not NAME://HOST:PORT");
  e.host = std::string(addr.substr(0, colon));
  std::string_view port = addr.substr(colon + 1);
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), e.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || e.port < 0 ||
      e.port > 65535) {
    return bad("has no port from 0 to 65535");
  }
  return e;
}

}  // namespace

Result<std::optional<std::vector<KafkaListener>>> KafkaListenersFromConfig(
    const Config& config, const ListenerContext& context) {
  if (!config.Has(kListeners)) {
    if (config.Has(kAdvertised)) {
      return InvalidArgumentError("{} (set in {}) needs {}: the listeners it advertises",
                                  kAdvertised, config.Origin(kAdvertised), kListeners);
    }
    return std::optional<std::vector<KafkaListener>>();
  }
  for (std::string_view shorthand : {"kafka.addr", "kafka.advertised_addr"}) {
    if (config.Has(shorthand)) {
      return InvalidArgumentError(
          "{} (set in {}) and {} (set in {}) both say where Kafka clients connect: {} is the "
          "shorthand for one PLAINTEXT listener; keep one of them",
          shorthand, config.Origin(shorthand), kListeners, config.Origin(kListeners), shorthand);
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::string> entries, Entries(config, kListeners));
  std::vector<KafkaListener> out;
  for (const std::string& text : entries) {
    ASSIGN_OR_RETURN(Entry e, ParseEntry(config, kListeners, text));
    KafkaListener l;
    l.name = e.name;
    Status st = ParseHostPort(fmt::format("{}:{}", e.host, e.port), &l.host, &l.port);
    if (!st.ok()) {
      return InvalidArgumentError("{} (set in {}): '{}': {}", kListeners, config.Origin(kListeners),
                                  text, st.message());
    }
    for (const KafkaListener& other : out) {
      if (other.name == l.name) {
        return InvalidArgumentError("{} (set in {}): {} is named twice", kListeners,
                                    config.Origin(kListeners), l.name);
      }
      if (l.port != 0 && other.port == l.port &&
          (other.host == l.host || other.host == "0.0.0.0" || l.host == "0.0.0.0")) {
        return InvalidArgumentError("{} (set in {}): {} and {} both listen on port {}", kListeners,
                                    config.Origin(kListeners), other.name, l.name, l.port);
      }
    }
    l.advertised_host = l.host;
    l.advertised_port = l.port;
    out.push_back(std::move(l));
  }
  if (config.Has(kAdvertised)) {
    ASSIGN_OR_RETURN(std::vector<std::string> advertised, Entries(config, kAdvertised));
    std::vector<std::string> seen;
    for (const std::string& text : advertised) {
      ASSIGN_OR_RETURN(Entry e, ParseEntry(config, kAdvertised, text));
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const KafkaListener& l) { return l.name == e.name; });
      if (it == out.end()) {
        return InvalidArgumentError("{} (set in {}): {} is not in {}", kAdvertised,
                                    config.Origin(kAdvertised), e.name, kListeners);
      }
      if (std::find(seen.begin(), seen.end(), e.name) != seen.end()) {
        return InvalidArgumentError("{} (set in {}): {} is named twice", kAdvertised,
                                    config.Origin(kAdvertised), e.name);
      }
      seen.push_back(e.name);
      // Clients resolve it: a name or an address, but a real port and not "any address".
      if (e.port == 0 || e.host == "0.0.0.0") {
        return InvalidArgumentError(
            "{} (set in {}): '{}' must be a HOST:PORT clients can connect to (a port from 1 to "
            "65535, not 0.0.0.0)",
            kAdvertised, config.Origin(kAdvertised), text);
      }
      it->advertised_host = e.host;
      it->advertised_port = static_cast<uint16_t>(e.port);
    }
  }
  bool any_sasl = false;
  for (const KafkaListener& l : out) {
    if (l.advertised_host == "0.0.0.0") {
      // Kafka refuses this too: clients would be told to connect to "any address".
      return InvalidArgumentError(
          "{} (set in {}): {} listens on 0.0.0.0: give it an entry in {} with the HOST:PORT "
          "clients should connect to",
          kListeners, config.Origin(kListeners), l.name, kAdvertised);
    }
    if (l.tls() && !context.tls_configured) {
      return InvalidArgumentError(
          "{} (set in {}): {} needs the tls: section (tls.cert_file and tls.key_file)", kListeners,
          config.Origin(kListeners), l.name);
    }
    if (l.sasl() && !context.sasl_enabled) {
      return InvalidArgumentError(
          "{} (set in {}): {} needs sasl.enabled: true and the users who may log in", kListeners,
          config.Origin(kListeners), l.name);
    }
    any_sasl = any_sasl || l.sasl();
  }
  if (context.sasl_enabled && !any_sasl) {
    return InvalidArgumentError(
        "sasl.enabled is set but no listener in {} (set in {}) asks for SASL: add "
        "SASL_PLAINTEXT:// or SASL_SSL://, or turn sasl.enabled off",
        kListeners, config.Origin(kListeners));
  }
  return std::optional<std::vector<KafkaListener>>(std::move(out));
}

}  // namespace sluice::broker
