// The registry's view of the three schema formats: a schema's canonical or normalized text
// (what is stored and compared for identity) and the incompatibilities between two
// schemas, for Avro (schema/avro), Protobuf (schema/protobuf) and JSON Schema (here: the
// text as compact JSON, and a backward check of types and required properties).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "schema/registry/registry_state.h"

namespace sluice::schema::registry {

// A schema another one refers to: the name it is referred by and its text.
struct Reference {
  std::string name;
  std::string schema_text;
};

// InvalidArgument (the API's 42201) when `text` is not a valid schema of `type`.
Result<std::string> CanonicalText(SchemaType type, std::string_view text,
                                  const std::vector<Reference>& refs, bool normalize);

struct SchemaText {
  std::string_view text;
  const std::vector<Reference>* refs;
};
// What keeps a reader of `reader` from reading data written with `writer` (empty: it can).
// An error when either does not parse.
Result<std::vector<std::string>> Incompatibilities(SchemaType type, SchemaText reader,
                                                   SchemaText writer);

}  // namespace sluice::schema::registry
