// The schema registry a pipeline's source or kafka sink uses (docs/design/0022-schemas.md):
// its own schema_registry.url, else the one of this process (RunnerOptions::schemas, set
// by sluice serve for pipelines of its own broker), else http://<first broker's host>:8081,
// where sluice serve, Confluent and Redpanda answer by default.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "pipeline/pipeline_config.h"
#include "schema/schema_source.h"

namespace sluice::pipeline {

Result<std::shared_ptr<schema::SchemaSource>> SchemasFor(
    const std::optional<SchemaRegistryConfig>& config, const std::vector<std::string>& brokers,
    std::shared_ptr<schema::SchemaSource> local);

}  // namespace sluice::pipeline
