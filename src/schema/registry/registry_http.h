// The Confluent Schema Registry REST API over a Registry: the routes its clients use
// (subjects, versions, schemas by id, register, lookup, delete, config, mode,
// compatibility), answering `application/vnd.schemaregistry.v1+json` and Confluent's error
// bodies ({"error_code": 40401, "message": "..."}). Served by sluice serve on its own port
// (schema_registry.addr, 127.0.0.1:8081 by default).
#pragma once

#include "base/http_server.h"
#include "schema/registry/registry.h"

namespace sluice::schema::registry {

inline constexpr const char* kRegistryContentType = "application/vnd.schemaregistry.v1+json";

// Answers one request (any path; the route's prefix is "/").
HttpResponse HandleRegistryRequest(Registry& registry, const HttpRequest& request);

}  // namespace sluice::schema::registry
