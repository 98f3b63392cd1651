// The pipeline file's sections that say where messages come from and go to
// (config_walker.h): the kafka source and connection, properties, the handler, every
// sink type, on_error and duckdb.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <utility>

#include "pipeline/config_walker.h"

namespace sluice::pipeline::config_internal {

void Walker::Connection(const MapView& m, KafkaConnectionConfig* out, bool consumer) {
  if (auto v = StringList(m, "brokers", true, "[localhost:9092]")) {
    out->brokers = std::move(*v);
    for (const std::string& b : out->brokers) {
      if (std::any_of(b.begin(), b.end(),
                      [](char c) { return std::isspace(static_cast<unsigned char>(c)); })) {
        Error(EntryLine(*m.Find("brokers"), m.line), Join(m.path, "brokers"),
              fmt::format("{} is not host:port (it holds a space)", Quote(b)));
      }
    }
  }
  if (m.Has("security_protocol")) {
    out->security_protocol = Enum(m, "security_protocol", false, kProtocols, true);
  }
  if (const Entry* e = m.Find("ssl")) {
    MapView ssl = OpenMap(e->value, Join(m.path, "ssl"), EntryLine(*e, m.line),
                          {"ca_location", "certificate_location", "key_location", "key_password",
                           "endpoint_identification_algorithm"});
    if (ssl.present) {
      KafkaSslConfig s;
      s.ca_location = String(ssl, "ca_location", false).value_or("");
      s.certificate_location = String(ssl, "certificate_location", false).value_or("");
      s.key_location = String(ssl, "key_location", false).value_or("");
      s.key_password = String(ssl, "key_password", false).value_or("");
      if (auto alg = String(ssl, "endpoint_identification_algorithm", false)) {
        std::string a = AsciiLower(Trim(*alg));
        if (a != "https" && a != "none") {
          Error(EntryLine(*ssl.Find("endpoint_identification_algorithm"), ssl.line),
                Join(ssl.path, "endpoint_identification_algorithm"),
                fmt::format("must be https or none; got {}", Quote(*alg)));
        }
        s.endpoint_identification_algorithm = a;
      }
      out->ssl = std::move(s);
    }
  }
  if (const Entry* e = m.Find("sasl")) {
    MapView sasl = OpenMap(e->value, Join(m.path, "sasl"), EntryLine(*e, m.line),
                           {"mechanism", "username", "password"});
    if (sasl.present) {
      KafkaSaslConfig s;
      if (auto mech = String(sasl, "mechanism", true)) {
        s.mechanism = AsciiUpper(Trim(*mech));
        if (std::find(std::begin(kMechanisms), std::end(kMechanisms), s.mechanism) ==
            std::end(kMechanisms)) {
          Error(
              EntryLine(*sasl.Find("mechanism"), sasl.line), Join(sasl.path, "mechanism"),
              fmt::format("must be one of {}; got {}", fmt::join(kMechanisms, ", "), Quote(*mech)));
        }
      }
      bool needs_password = s.mechanism == "PLAIN" || s.mechanism.starts_with("SCRAM");
      s.username = String(sasl, "username", needs_password).value_or("");
      s.password = String(sasl, "password", needs_password).value_or("");
      out->sasl = std::move(s);
      if (out->security_protocol != SecurityProtocol::kSaslPlaintext &&
          out->security_protocol != SecurityProtocol::kSaslSsl) {
        Warn(sasl.line, sasl.path,
             "is set but security_protocol is not SASL_PLAINTEXT or SASL_SSL, so librdkafka "
             "will not authenticate");
      }
    }
  }
  if (const Entry* e = m.Find("properties"))
    Properties(*e, Join(m.path, "properties"), m.line, consumer, &out->properties);
}

void Walker::Properties(const Entry& e, const std::string& path, int line, bool consumer,
                        std::map<std::string, std::string>* out) {
  line = EntryLine(e, line);
  if (e.value.IsNull()) return;
  if (!e.value.IsMap()) {
    Error(line, path,
          fmt::format("must be a map of librdkafka properties, e.g. {{fetch.wait.max.ms: 50}}; "
                      "got {}",
                      KindName(e.value)));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!Charge(1)) return;
    YAML::Node key = it->first;  // copies: the iterator hands out temporaries
    YAML::Node value = it->second;
    int key_line = LineOf(key, line);
    if (!key.IsScalar() || Trim(key.Scalar()).empty()) {
      Error(key_line, path, "a property name must be a plain, non-empty name");
      continue;
    }
    const std::string& name = key.Scalar();
    std::string key_path = fmt::format("{}.{}", path, name);
    const Refusal* r = FindRefusal(kConnectionProperties, name);
    if (r == nullptr && consumer) r = FindRefusal(kConsumerProperties, name);
    if (r != nullptr) {
      Error(key_line, key_path, fmt::format("cannot be set as a property: {}", r->guidance));
      continue;
    }
    if (!value.IsScalar()) {
      Error(LineOf(value, key_line), key_path,
            fmt::format("must be a single value, got {}", KindName(value)));
      continue;
    }
    if (!Charge(name.size() + value.Scalar().size())) return;
    if (!out->emplace(name, value.Scalar()).second) {
      Error(key_line, key_path, "is set twice");
    }
  }
}

void Walker::Source(const MapView& pipeline, KafkaSourceConfig* out) {
  const Entry* e = pipeline.Find("source");
  if (e == nullptr) {
    Error(pipeline.line, "pipeline.source", "is required but missing");
    return;
  }
  MapView source = OpenMap(e->value, "pipeline.source", EntryLine(*e, pipeline.line),
                           {"type", "kafka"}, kSourceRefused);
  if (!source.present) {
    if (e->value.IsNull()) Error(source.line, "pipeline.source", "is empty; it is required");
    return;
  }
  static constexpr EnumName<int> kTypes[] = {{"kafka", 0}};
  Enum(source, "type", true, kTypes, false, kSourceRefused);
  const Entry* k = source.Find("kafka");
  if (k == nullptr) {
    Error(source.line, "pipeline.source.kafka", "is required but missing");
    return;
  }
  MapView kafka = OpenMap(
      k->value, "pipeline.source.kafka", EntryLine(*k, source.line),
      {"brokers", "group_id", "auto_offset_reset", "topics", "security_protocol", "ssl", "sasl",
       "fetch", "properties", "format", "key_format", "schema_registry", "in_process"});
  if (!kafka.present || k->value.IsNull()) {
    if (k->value.IsNull()) Error(kafka.line, kafka.path, "is empty; it is required");
    return;
  }
  Connection(kafka, out, true);
  out->group_id = String(kafka, "group_id", true).value_or("");
  if (auto v = Enum(kafka, "auto_offset_reset", true, kOffsetResets, true)) {
    out->auto_offset_reset = *v;
  }
  if (auto v = StringList(kafka, "topics", true, "[events]")) out->topics = std::move(*v);
  if (auto v = Enum(kafka, "format", false, kFormats, false)) out->format = *v;
  if (auto v = Enum(kafka, "key_format", false, kKeyFormats, false)) {
    out->key_format = *v;
    if (*v != KeyFormat::kBytes && out->format != MessageFormat::kAvro &&
        out->format != MessageFormat::kProtobuf) {
      Error(EntryLine(*kafka.Find("key_format"), kafka.line), Join(kafka.path, "key_format"),
            fmt::format("decodes framed keys beside framed values: it needs format avro or "
                        "protobuf (format is {})",
                        NameOf(kFormats, out->format)));
    }
  }
  SchemaRegistry(kafka, &out->schema_registry);
  if (auto v = Enum(kafka, "in_process", false, kInProcessModes, true)) out->in_process = *v;
  if (const Entry* f = kafka.Find("fetch")) {
    MapView fetch = OpenMap(f->value, Join(kafka.path, "fetch"), EntryLine(*f, kafka.line),
                            {"max_bytes", "max_partition_bytes", "prefetch"});
    constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
    if (auto v = Integer(fetch, "max_bytes", 1, kInt32Max)) out->fetch.max_bytes = *v;
    if (auto v = Integer(fetch, "max_partition_bytes", 1, kInt32Max)) {
      out->fetch.max_partition_bytes = *v;
    }
    if (auto v = Integer(fetch, "prefetch", 1, 1024)) out->fetch.prefetch = *v;
    if (out->fetch.max_partition_bytes > out->fetch.max_bytes) {
      Error(fetch.line, Join(fetch.path, "max_partition_bytes"),
            fmt::format("({}) must not exceed fetch.max_bytes ({})", out->fetch.max_partition_bytes,
                        out->fetch.max_bytes));
    }
    // librdkafka refuses fetch.max.bytes below message.max.bytes (default 1000000).
    int64_t message_max = 1000000;
    if (auto it = out->properties.find("message.max.bytes"); it != out->properties.end()) {
      message_max = std::strtoll(it->second.c_str(), nullptr, 10);
    }
    if (out->fetch.max_bytes < message_max) {
      Error(fetch.line, Join(fetch.path, "max_bytes"),
            fmt::format("({}) must be at least the consumer's message.max.bytes ({}; lower it "
                        "under kafka.properties to fetch less at a time)",
                        out->fetch.max_bytes, message_max));
    }
  }
}

MapView Walker::Section(const MapView& parent, std::string_view key,
                        std::initializer_list<std::string_view> known, std::string_view why) {
  const Entry* e = parent.Find(key);
  std::string path = Join(parent.path, key);
  if (e == nullptr) {
    Error(parent.line, path, fmt::format("is required{} but missing", why));
    return MapView{};
  }
  MapView m = OpenMap(e->value, path, EntryLine(*e, parent.line), known);
  if (e->value.IsNull()) {
    Error(m.line, path, fmt::format("is empty; it is required{}", why));
    m.present = false;
  }
  return m;
}

void Walker::Handler(const MapView& pipeline, HandlerConfig* out) {
  MapView h = Section(pipeline, "handler",
                      {"type", "sql", "table", "sql_results_cache_dir", "decode_threads"});
  if (!h.present) return;
  std::optional<HandlerType> type = Enum(h, "type", true, kHandlers, false);
  if (type) out->type = *type;
  if (auto sql = String(h, "sql", true)) {
    out->sql = std::move(*sql);
    out->sql_origin = Where(EntryLine(*h.Find("sql"), h.line));
  }
  out->table = String(h, "table", false).value_or("");
  out->sql_results_cache_dir = String(h, "sql_results_cache_dir", false).value_or("");
  if (h.Has("decode_threads")) {
    std::optional<std::string> v = String(h, "decode_threads", false);
    if (v && Trim(*v) != "auto") {
      if (auto n = Integer(h, "decode_threads", 1, 64)) out->decode_threads = *n;
    }
  }
  if (type == HandlerType::kStructuredBatch && Trim(out->table).empty()) {
    Error(h.line, "pipeline.handler.table",
          "is required for handlers.StructuredBatch: name the table, declared in `commands`, "
          "that messages are parsed into");
  }
}

bool Walker::Sink(const YAML::Node& node, const std::string& path, int line, SinkConfig* out) {
  static constexpr std::string_view kBlocks[] = {"kafka", "console", "sqlcommand", "postgres",
                                                 "iceberg"};
  MapView s =
      OpenMap(node, path, line, {"type", "kafka", "console", "sqlcommand", "postgres", "iceberg"},
              kSinkRefused);
  if (!s.present || node.IsNull()) {
    if (node.IsNull()) Error(s.line, path, "is empty; a sink needs at least `type`");
    return false;
  }
  std::optional<SinkType> type = Enum(s, "type", true, kSinks, false, kSinkRefused);
  if (!type) return false;
  out->type = *type;
  size_t errors_before = errors_.size();
  for (std::string_view block : kBlocks) {
    if (s.Has(block) && block != NameOf(kSinks, *type)) {
      Warn(LineOf(s.Find(block)->key, s.line), Join(path, block),
           fmt::format("is ignored: the sink's type is {}", NameOf(kSinks, *type)));
    }
  }
  if (*type != SinkType::kKafka) {
    // sluice's exactly_once under another sink's block: say why rather than "unknown key".
    if (const Entry* b = s.Find(NameOf(kSinks, *type)); b != nullptr && b->value.IsMap()) {
      if (YAML::Node eo = b->value["exactly_once"]; eo.IsDefined()) {
        Error(LineOf(eo, s.line), Join(Join(path, NameOf(kSinks, *type)), "exactly_once"),
              fmt::format("is the kafka sink's key: exactly-once delivery is a Kafka transaction "
                          "holding the rows and the consumed offsets, which a {} sink cannot "
                          "join; remove it (this sink is at-least-once)",
                          NameOf(kSinks, *type)));
        YAML::Node block = b->value;
        block.remove("exactly_once");
      }
    }
  }
  std::string why = fmt::format(" for type {}", NameOf(kSinks, *type));
  switch (*type) {
    case SinkType::kConsole:
      if (const Entry* e = s.Find("console")) OpenMap(e->value, Join(path, "console"), s.line, {});
      break;
    case SinkType::kNoop:
      break;
    case SinkType::kKafka: {
      MapView k =
          Section(s, "kafka",
                  {"brokers", "topic", "security_protocol", "ssl", "sasl", "properties",
                   "exactly_once", "transactional_id", "format", "schema_registry", "subject"},
                  why);
      if (!k.present) break;
      Connection(k, &out->kafka, false);
      out->kafka.topic = String(k, "topic", true).value_or("");
      if (auto v = Enum(k, "format", false, kFormats, false)) {
        if (*v == MessageFormat::kJsonSchema) {
          Error(EntryLine(*k.Find("format"), k.line), Join(k.path, "format"),
                "json_schema is read, not written: the sink writes json, avro or protobuf");
        }
        out->kafka.format = *v;
      }
      SchemaRegistry(k, &out->kafka.schema_registry);
      if (auto subject = String(k, "subject", false)) {
        if (out->kafka.format != MessageFormat::kAvro &&
            out->kafka.format != MessageFormat::kProtobuf) {
          Error(EntryLine(*k.Find("subject"), k.line), Join(k.path, "subject"),
                "names the subject avro and protobuf register their schema under; the format is "
                "json");
        }
        out->kafka.subject = std::move(*subject);
      }
      KafkaExactlyOnce(k, &out->kafka);
      break;
    }
    case SinkType::kSqlCommand: {
      MapView c = Section(s, "sqlcommand", {"sql", "substitutions"}, why);
      if (!c.present) break;
      if (auto sql = String(c, "sql", true)) {
        out->sqlcommand.sql = std::move(*sql);
        out->sqlcommand.sql_origin = Where(EntryLine(*c.Find("sql"), c.line));
      }
      const Entry* subs = c.Find("substitutions");
      if (subs == nullptr || subs->value.IsNull()) break;
      std::string subs_path = Join(c.path, "substitutions");
      int subs_line = EntryLine(*subs, c.line);
      if (!subs->value.IsSequence()) {
        Error(subs_line, subs_path,
              fmt::format("must be a list of {{var, type}}, got {}", KindName(subs->value)));
        break;
      }
      size_t index = 0;
      for (const YAML::Node& item : subs->value) {
        std::string item_path = fmt::format("{}[{}]", subs_path, index++);
        MapView m = OpenMap(item, item_path, subs_line, {"var", "type"});
        if (!m.present || item.IsNull()) {
          if (item.IsNull()) Error(m.line, item_path, "must be a map {var, type}, got nothing");
          continue;
        }
        SqlSubstitution sub;
        std::optional<std::string> var = String(m, "var", true);
        std::optional<SubstitutionType> t = Enum(m, "type", true, kSubstitutions, false);
        if (!var || !t) continue;
        sub.var = std::move(*var);
        sub.type = *t;
        if (!out->sqlcommand.sql.empty() &&
            out->sqlcommand.sql.find(sub.var) == std::string::npos) {
          Warn(m.line, Join(item_path, "var"),
               fmt::format("{} does not appear in the sink's sql", Quote(sub.var)));
        }
        out->sqlcommand.substitutions.push_back(std::move(sub));
      }
      break;
    }
    case SinkType::kPostgres: {
      MapView p =
          Section(s, "postgres", {"dsn", "table", "mode", "key", "commit_interval_ms"}, why);
      if (!p.present) break;
      out->postgres.dsn = String(p, "dsn", true).value_or("");
      if (auto table = String(p, "table", true)) {
        std::string_view t = Trim(*table);
        size_t dots = std::count(t.begin(), t.end(), '.');
        bool empty_part = t.front() == '.' || t.back() == '.' || t.find("..") != t.npos;
        if (dots > 1 || empty_part || t.find('"') != t.npos) {
          Error(EntryLine(*p.Find("table"), p.line), Join(p.path, "table"),
                fmt::format("{} is not a table name; write table or schema.table, unquoted",
                            Quote(*table)));
        }
        out->postgres.table = std::string(t);
      }
      std::optional<PostgresMode> mode = Enum(p, "mode", true, kModes, true);
      if (mode) out->postgres.mode = *mode;
      if (auto key = StringList(p, "key", false, "[id]")) out->postgres.key = std::move(*key);
      if (mode == PostgresMode::kUpsert && out->postgres.key.empty() &&
          !(p.Has("key") && !p.Find("key")->value.IsNull() && !p.Find("key")->value.IsSequence())) {
        Error(p.line, Join(p.path, "key"),
              "is required for mode upsert: list the columns a row is identified by, e.g. [id]");
      }
      if (mode == PostgresMode::kAppend && !out->postgres.key.empty()) {
        Error(EntryLine(*p.Find("key"), p.line), Join(p.path, "key"),
              "is refused for mode append (every row is inserted); remove it or use mode: "
              "upsert");
      }
      if (auto v = Integer(p, "commit_interval_ms", 1, 3'600'000)) {
        out->postgres.commit_interval_ms = *v;
        if (mode == PostgresMode::kUpsert) {
          Error(EntryLine(*p.Find("commit_interval_ms"), p.line),
                Join(p.path, "commit_interval_ms"),
                "is for mode append (an upsert merges each batch on its own); remove it");
        }
      }
      break;
    }
    case SinkType::kIceberg: {
      MapView p =
          Section(s, "iceberg",
                  {"catalog_name", "table_name", "warehouse", "catalog", "commit_interval_seconds",
                   "target_file_size_bytes", "schema_evolution", "partition_by"},
                  why);
      if (!p.present) break;
      IcebergSinkConfig& ice = out->iceberg;
      ice.catalog_name = String(p, "catalog_name", true).value_or("");
      if (auto name = String(p, "table_name", true)) {
        std::vector<std::string> parts;
        std::string_view t = Trim(*name);
        size_t start = 0;
        bool bad = t.empty();
        while (!bad) {
          size_t dot = t.find('.', start);
          std::string_view part = t.substr(start, dot == t.npos ? t.npos : dot - start);
          bad = part.empty() || part.find_first_of("/\\\"\x1f") != part.npos || part == "..";
          parts.emplace_back(part);
          if (dot == t.npos) break;
          start = dot + 1;
        }
        if (bad || parts.size() < 2) {
          Error(EntryLine(*p.Find("table_name"), p.line), Join(p.path, "table_name"),
                fmt::format("{} is not a table name; write namespace.table (namespaces may nest: "
                            "a.b.table), without quotes, slashes or empty parts",
                            Quote(*name)));
        } else {
          ice.table = parts.back();
          parts.pop_back();
          ice.namespace_ = std::move(parts);
        }
      }
      ice.warehouse = String(p, "warehouse", false).value_or("");
      if (const Entry* e = p.Find("catalog")) {
        MapView c = OpenMap(e->value, Join(p.path, "catalog"), EntryLine(*e, p.line),
                            {"type", "uri", "warehouse", "credential", "token", "oauth2_server_uri",
                             "scope", "request_timeout_ms", "max_retries"});
        if (c.present) {
          IcebergCatalogConfig cat;
          if (auto type = String(c, "type", true); type && Trim(*type) != "rest") {
            Error(EntryLine(*c.Find("type"), c.line), Join(c.path, "type"),
                  fmt::format("must be rest (an Iceberg REST catalog); got {}", Quote(*type)));
          }
          cat.uri = String(c, "uri", true).value_or("");
          if (!cat.uri.empty() && !cat.uri.starts_with("http://") &&
              !cat.uri.starts_with("https://")) {
            Error(EntryLine(*c.Find("uri"), c.line), Join(c.path, "uri"),
                  fmt::format("must be an http:// or https:// URL; got {}", Quote(cat.uri)));
          }
          cat.warehouse = String(c, "warehouse", false).value_or("");
          cat.credential = String(c, "credential", false).value_or("");
          cat.token = String(c, "token", false).value_or("");
          if (!cat.credential.empty() && !cat.token.empty()) {
            Error(EntryLine(*c.Find("token"), c.line), Join(c.path, "token"),
                  "set credential (OAuth2 client credentials) or token, not both");
          }
          cat.oauth2_server_uri = String(c, "oauth2_server_uri", false).value_or("");
          cat.scope = String(c, "scope", false).value_or("catalog");
          if (auto v = Integer(c, "request_timeout_ms", 100, 600000)) cat.request_timeout_ms = *v;
          if (auto v = Integer(c, "max_retries", 0, 100)) cat.max_retries = *v;
          ice.catalog = std::move(cat);
          if (!ice.warehouse.empty()) {
            Error(EntryLine(*p.Find("warehouse"), p.line), Join(p.path, "warehouse"),
                  "a table is in a warehouse directory or a catalog, not both: remove warehouse "
                  "(the catalog's warehouse goes in catalog.warehouse)");
          }
        }
      }
      if (auto v = Integer(p, "commit_interval_seconds", 1, 86400))
        ice.commit_interval_seconds = *v;
      if (auto v = Integer(p, "target_file_size_bytes", int64_t{1} << 20, int64_t{16} << 30)) {
        ice.target_file_size_bytes = *v;
      }
      if (auto v = String(p, "schema_evolution", false)) {
        std::string_view t = Trim(*v);
        if (t == "true") {
          ice.schema_evolution = true;
        } else if (t != "false") {
          Error(EntryLine(*p.Find("schema_evolution"), p.line), Join(p.path, "schema_evolution"),
                fmt::format("must be true or false, got {}", Quote(*v)));
        }
      }
      if (auto parts = StringList(p, "partition_by", false, "[day(ts), 'bucket(16, id)']")) {
        // A flow list splits `bucket(16, id)` at its comma: join the pieces back until the
        // parentheses balance.
        std::string pending;
        for (std::string& part : *parts) {
          pending = pending.empty() ? part : pending + ", " + part;
          if (std::count(pending.begin(), pending.end(), '(') >
              std::count(pending.begin(), pending.end(), ')')) {
            continue;
          }
          ice.partition_by.push_back(std::move(pending));
          pending.clear();
        }
        if (!pending.empty()) {
          Error(EntryLine(*p.Find("partition_by"), p.line), Join(p.path, "partition_by"),
                fmt::format("{} has an unclosed parenthesis", Quote(pending)));
        }
      }
      break;
    }
  }
  return errors_.size() == errors_before;
}

void Walker::SchemaRegistry(const MapView& k, std::optional<SchemaRegistryConfig>* out) {
  const Entry* e = k.Find("schema_registry");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, Join(k.path, "schema_registry"), EntryLine(*e, k.line),
                      {"url", "username", "password"});
  if (!m.present) return;
  SchemaRegistryConfig c;
  if (auto url = String(m, "url", true)) {
    if (!url->starts_with("http://")) {
      Error(EntryLine(*m.Find("url"), m.line), Join(m.path, "url"),
            fmt::format("{} is not http://HOST:PORT", Quote(*url)));
    }
    c.url = std::move(*url);
  }
  c.username = String(m, "username", false).value_or("");
  c.password = String(m, "password", false).value_or("");
  if (c.username.empty() != c.password.empty()) {
    Error(m.line, m.path, "username and password go together");
  }
  *out = std::move(c);
}

void Walker::KafkaExactlyOnce(const MapView& k, KafkaSinkConfig* out) {
  if (const Entry* e = k.Find("exactly_once"); e != nullptr && !e->value.IsNull()) {
    const int line = EntryLine(*e, k.line);
    const std::string path = Join(k.path, "exactly_once");
    if (!e->value.IsScalar()) {
      Error(line, path, fmt::format("must be true or false, got {}", KindName(e->value)));
    } else {
      const std::string v = AsciiLower(Trim(e->value.Scalar()));
      if (v == "true") {
        out->exactly_once = true;
        exactly_once_at_.push_back({k.path, line});
      } else if (v != "false") {
        Error(line, path, fmt::format("must be true or false, got {}", Quote(e->value.Scalar())));
      }
    }
  }
  if (auto id = String(k, "transactional_id", false)) {
    const int line = EntryLine(*k.Find("transactional_id"), k.line);
    const std::string path = Join(k.path, "transactional_id");
    if (Trim(*id).empty()) {
      Error(line, path, "is empty; leave it out for sluice-<pipeline name>");
    } else if (id->size() > 200) {
      Error(line, path, fmt::format("is {} characters; at most 200", id->size()));
    } else if (!out->exactly_once) {
      Warn(line, path, "is set but exactly_once is not true, so no transaction uses it");
    }
    out->transactional_id = std::move(*id);
  }
  for (const auto& [name, value] : out->properties) {
    if (name == "transactional.id") {
      Error(k.line, Join(Join(k.path, "properties"), name),
            "cannot be set as a property: use kafka.exactly_once and kafka.transactional_id");
    } else if (out->exactly_once && name == "enable.idempotence" && AsciiLower(value) != "true") {
      Error(k.line, Join(Join(k.path, "properties"), name),
            "cannot be false with exactly_once: a transactional producer is idempotent");
    }
  }
}

// exactly_once holds only where the sink's Kafka transaction is the only place a batch
// leaves state: the pipeline's results, with nothing kept in DuckDB across batches.
void Walker::ExactlyOnceRules(const PipelineConfig& config, const MapView& pipeline) {
  for (const auto& [path, line] : exactly_once_at_) {
    if (path.starts_with("pipeline.window.sink")) {
      Error(line, Join(path, "exactly_once"),
            "is refused with pipeline.window: the open windows live in the pipeline's DuckDB, "
            "which cannot join a Kafka transaction, so after a crash the windows and the "
            "committed offsets would disagree; drop exactly_once (closed windows are "
            "delivered at least once) or make the pipeline stateless");
    } else if (path.starts_with("tables.")) {
      Error(line, Join(path, "exactly_once"),
            "is refused on a table manager's sink: the managed table lives in DuckDB, which "
            "cannot join a Kafka transaction");
    } else if (path.starts_with("pipeline.on_error.dlq")) {
      Error(line, Join(path, "exactly_once"),
            "belongs on pipeline.sink: with it there, dead letters to a kafka topic on the "
            "same brokers go into the batch's transaction");
    } else if (config.state) {
      Error(line, Join(path, "exactly_once"),
            "is refused with pipeline.state: the offsets are committed in the Kafka "
            "transaction, and a second copy in the DuckDB state file cannot commit with it; "
            "remove pipeline.state");
    } else if (std::any_of(config.tables.begin(), config.tables.end(),
                           [](const TableConfig& t) { return t.tumbling_window.has_value(); })) {
      Error(line, Join(path, "exactly_once"),
            "is refused with a managed table (tables.sql[].manager): its rows live in DuckDB, "
            "which cannot join a Kafka transaction");
    } else if (auto it = config.source.properties.find("isolation.level");
               it != config.source.properties.end() && it->second == "read_uncommitted") {
      Error(line, Join(path, "exactly_once"),
            "needs the source to read read_committed, but "
            "pipeline.source.kafka.properties.isolation.level is read_uncommitted: records of "
            "aborted upstream transactions would be processed, and a restart could resume "
            "from offsets a transaction still being committed is about to replace (librdkafka "
            "asks for stable offsets only when read_committed)");
    }
  }
}

void Walker::OnError(const MapView& pipeline, OnErrorConfig* out) {
  const Entry* e = pipeline.Find("on_error");
  if (e == nullptr) return;
  MapView m =
      OpenMap(e->value, "pipeline.on_error", EntryLine(*e, pipeline.line), {"policy", "dlq"});
  if (!m.present) return;
  std::optional<ErrorPolicy> policy = Enum(m, "policy", false, kPolicies, true);
  if (policy) out->policy = *policy;
  if (const Entry* d = m.Find("dlq")) {
    SinkConfig dlq;
    if (Sink(d->value, "pipeline.on_error.dlq", EntryLine(*d, m.line), &dlq)) {
      if (dlq.type == SinkType::kIceberg) {
        Error(EntryLine(*d, m.line), "pipeline.on_error.dlq",
              "type iceberg is not a dead-letter sink; use a kafka topic (dead letters are few and "
              "each one matters alone)");
      } else if (dlq.type == SinkType::kPostgres && dlq.postgres.commit_interval_ms > 0) {
        Error(EntryLine(*d, m.line), "pipeline.on_error.dlq.postgres.commit_interval_ms",
              "is for pipeline.sink only: dead letters are committed with each batch");
      } else {
        out->dlq = std::move(dlq);
      }
    }
    if (policy && *policy != ErrorPolicy::kDlq) {
      Warn(LineOf(d->key, m.line), "pipeline.on_error.dlq",
           fmt::format("is set but policy is {}, so it receives nothing", Name(*policy)));
    }
  } else if (policy == ErrorPolicy::kDlq) {
    Error(m.line, "pipeline.on_error.dlq",
          "is required when policy is DLQ: add the sink that receives each bad message, e.g. "
          "{type: kafka, kafka: {brokers: [localhost:9092], topic: dlq}}");
  }
}

void Walker::DuckDb(const MapView& pipeline, DuckDbConfig* out) {
  const Entry* e = pipeline.Find("duckdb");
  if (e == nullptr) return;
  MapView m = OpenMap(e->value, "pipeline.duckdb", EntryLine(*e, pipeline.line),
                      {"memory_limit", "threads"});
  if (!m.present) return;
  if (auto v = Bytes(m, "memory_limit", int64_t{16} << 20, int64_t{1} << 50)) {
    out->memory_limit_bytes = *v;
  }
  if (auto v = Integer(m, "threads", 1, 256)) out->threads = *v;
}

}  // namespace sluice::pipeline::config_internal
