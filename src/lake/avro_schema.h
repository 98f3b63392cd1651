// avro::Schema: an Avro schema parsed from JSON, held as a tree of Nodes, written back to
// JSON with every attribute it was given (Iceberg's field-id, element-id, key-id,
// value-id, logicalType, ...). Parsing is strict: a schema that the Avro specification
// does not allow is an InvalidArgument error that says what and where.
//
//   ASSIGN_OR_RETURN(Schema schema, Schema::Parse(R"({"type": "record", ...})"));
//   const Field* f = schema.root().FindField("data_file");
//   std::optional<int64_t> id = IntAttribute(f->attributes, "field-id");
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lake/avro_datum.h"

namespace sluice::lake::avro {

enum class Type : uint8_t {
  kNull,
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kBytes,
  kString,
  kRecord,
  kEnum,
  kArray,
  kMap,
  kUnion,
  kFixed,
};
std::string_view TypeName(Type type);

// An attribute that Avro itself does not define, kept as the JSON text of its value
// ("1", "\"map\"", "{...}") so that it is written back exactly as it was read.
struct Attribute {
  std::string name;
  std::string json;
};
using Attributes = std::vector<Attribute>;
// The attribute's JSON text, or nullptr.
const std::string* FindAttribute(const Attributes& attributes, std::string_view name);
// The attribute as an integer ("field-id": 3), or nullopt if absent or not an integer.
std::optional<int64_t> IntAttribute(const Attributes& attributes, std::string_view name);
// The attribute as a string ("logicalType": "map"), or nullopt if absent or not a string.
std::optional<std::string> StringAttribute(const Attributes& attributes, std::string_view name);

struct Node;

struct Field {
  std::string name;
  const Node* type = nullptr;  // owned by the Schema
  std::string doc;
  std::string default_json;            // as written; "" when the field has no default
  std::optional<Datum> default_value;  // default_json decoded against `type`
  Attributes attributes;               // field-id, aliases, order, ...
};

// One type in a schema. Named types (record, enum, fixed) exist once, where they are
// defined; a reference by name is the same Node. Nodes are owned by their Schema.
struct Node {
  Type type = Type::kNull;
  std::string name;        // named types: the name as written
  std::string namespace_;  // named types: the namespace as written ("" when none given)
  std::string full_name;   // named types: namespace.name, resolved
  std::string doc;
  std::vector<Field> fields;          // record
  std::vector<std::string> symbols;   // enum
  std::string enum_default;           // enum: "" when none
  const Node* items = nullptr;        // array
  const Node* values = nullptr;       // map
  std::vector<const Node*> branches;  // union
  int64_t size = 0;                   // fixed
  Attributes attributes;              // logicalType, element-id, ...
  // The fewest bytes a value takes in the binary encoding (0 for null, an empty record,
  // fixed(0)): the decoder bounds a declared item count by the bytes left with it.
  int64_t min_size = 0;

  bool is_named() const {
    return type == Type::kRecord || type == Type::kEnum || type == Type::kFixed;
  }
  // Records: the field named `name` and its position, or nullptr / -1.
  const Field* FindField(std::string_view name) const;
  int FieldIndex(std::string_view name) const;
};

// A parsed schema. Move-only: Nodes point at each other.
class Schema {
 public:
  static Result<Schema> Parse(std::string_view json);

  Schema(Schema&&) = default;
  Schema& operator=(Schema&&) = default;
  ~Schema();

  const Node& root() const { return *root_; }
  // Compact JSON with every attribute; a named type is written in full where it is first
  // met and by its full name after that. Parse(ToJson()) gives the same schema.
  std::string ToJson() const;

 private:
  Schema() = default;
  friend class SchemaParser;
  std::vector<std::unique_ptr<Node>> nodes_;
  const Node* root_ = nullptr;
};

}  // namespace sluice::lake::avro
