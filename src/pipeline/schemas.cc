// SchemasFor (schemas.h).
#include "pipeline/schemas.h"

namespace sluice::pipeline {

Result<std::shared_ptr<schema::SchemaSource>> SchemasFor(
    const std::optional<SchemaRegistryConfig>& config, const std::vector<std::string>& brokers,
    std::shared_ptr<schema::SchemaSource> local) {
  schema::HttpSchemaSourceOptions o;
  if (config) {
    o.url = config->url;
    o.username = config->username;
    o.password = config->password;
  } else if (local != nullptr) {
    return local;
  } else {
    std::string host = brokers.empty() ? "127.0.0.1" : brokers[0];
    if (size_t colon = host.rfind(':'); colon != std::string::npos && host.back() != ']') {
      host = host.substr(0, colon);
    }
    o.url = "http://" + host + ":8081";
  }
  return schema::MakeHttpSchemaSource(std::move(o));
}

}  // namespace sluice::pipeline
