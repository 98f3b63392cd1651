// SchemaSource: where decoders and the kafka sink get schemas: by id (the id in a
// message's framing), a subject's latest version, and registering a new one. Two kinds:
// the Schema Registry of this process (RegistrySchemaSource, no HTTP), and any Confluent-
// compatible registry over HTTP (HttpSchemaSource: sluice serve's, Confluent's,
// Redpanda's). Schemas by id never change, so both cache them for the source's life.
//
// Threads: any, several at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "schema/registry/formats.h"
#include "schema/registry/registry_state.h"

namespace sluice::schema::registry {
class Registry;
}

namespace sluice::schema {

using registry::SchemaType;

// A schema with the texts of what it references (transitively, dependencies first).
struct SchemaRecord {
  int32_t id = 0;
  SchemaType type = SchemaType::kAvro;
  std::string text;
  std::vector<registry::Reference> references;
};

class SchemaSource {
 public:
  virtual ~SchemaSource() = default;
  // NotFound when no schema has the id.
  virtual Result<std::shared_ptr<const SchemaRecord>> ById(int32_t id) = 0;
  // NotFound when the subject has no live version.
  virtual Result<std::shared_ptr<const SchemaRecord>> Latest(std::string_view subject) = 0;
  // Registers `text` (with `refs`) under `subject`, or finds it there: its id and
  // version. FailedPrecondition with the registry's message when it refuses (incompatible,
  // invalid).
  struct Registered {
    int32_t id = 0;
    int32_t version = 0;
  };
  virtual Result<Registered> Register(std::string_view subject, SchemaType type,
                                      std::string_view text,
                                      const std::vector<registry::SchemaReference>& refs = {}) = 0;
  // "the Schema Registry of this process", "http://host:8081": for error messages.
  virtual std::string Describe() const = 0;
};

// This process's registry (which must outlive the source).
std::shared_ptr<SchemaSource> MakeRegistrySchemaSource(registry::Registry* registry);

struct HttpSchemaSourceOptions {
  std::string url;                 // http://host:port[/prefix]
  std::string username, password;  // HTTP Basic when username is set
  std::chrono::milliseconds timeout{10000};
};
// InvalidArgument for a URL that is not http://HOST[:PORT][/PATH].
Result<std::shared_ptr<SchemaSource>> MakeHttpSchemaSource(HttpSchemaSourceOptions options);

}  // namespace sluice::schema
