// Iceberg schemas and data types (table spec "Schemas and Data Types") and their JSON form
// (Appendix C): primitive types, struct/list/map with field ids, Schema with schema-id and
// identifier-field-ids, lookups by field id and by dotted name, and validation.
//
//   ASSIGN_OR_RETURN(Schema s, SchemaFromJson(json, "$.schemas[0]"));
//   const NestedField* f = s.FindField(3);        // by id
//   const NestedField* g = s.FindField("loc.lat");  // by dotted name
//
// Values, not handles: a Schema is a tree of plain structs, copied with the metadata.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "lake/iceberg_json.h"

namespace sluice::lake {

enum class TypeId {
  kBoolean,
  kInt,
  kLong,
  kFloat,
  kDouble,
  kDecimal,  // precision 1..38, scale 0..precision
  kDate,
  kTime,
  kTimestamp,
  kTimestampTz,
  kTimestampNs,    // format v3; parsed, rejected in v1/v2 table metadata
  kTimestampTzNs,  // format v3; likewise
  kString,
  kUuid,
  kFixed,  // fixed[L], L >= 1
  kBinary,
  kStruct,
  kList,
  kMap,
};

// The highest field id a table may use; above it are Iceberg's metadata columns.
inline constexpr int32_t kMaxUserFieldId = 2147483447;

struct NestedField;

// An Iceberg type. Nested types keep their children as NestedFields: a struct its fields,
// a list one field named "element", a map two fields named "key" and "value" (as Java's
// Types do), so that every field id in a schema is found the same way.
struct Type {
  TypeId id = TypeId::kBoolean;
  int32_t precision = 0;  // decimal
  int32_t scale = 0;      // decimal
  int32_t length = 0;     // fixed
  std::vector<NestedField> fields;

  static Type Primitive(TypeId id);
  static Type Decimal(int32_t precision, int32_t scale);
  static Type Fixed(int32_t length);
  static Type Struct(std::vector<NestedField> fields);
  static Type List(int32_t element_id, Type element, bool element_required);
  static Type Map(int32_t key_id, Type key, int32_t value_id, Type value, bool value_required);

  bool is_primitive() const {
    return id != TypeId::kStruct && id != TypeId::kList && id != TypeId::kMap;
  }
  bool is_nested() const { return !is_primitive(); }
  // List: the element field; map: the key and value fields (asserted).
  const NestedField& element() const;
  const NestedField& key() const;
  const NestedField& value() const;

  // The spec's name: "int", "decimal(9,2)", "fixed[16]", "list<string>", "struct<...>".
  std::string ToString() const;

  bool operator==(const Type& other) const;
};

// A struct field, list element or map key/value: an id unique in the schema, a name, a
// nullability and a type. `doc` is the field comment (struct fields only).
struct NestedField {
  int32_t id = 0;
  std::string name;
  bool required = false;
  Type type;
  std::optional<std::string> doc;

  bool operator==(const NestedField& other) const = default;
};

// A table schema: the top-level struct's fields, a schema id, and the fields that identify
// a row (identifier-field-ids).
struct Schema {
  int32_t schema_id = 0;
  std::vector<int32_t> identifier_field_ids;
  std::vector<NestedField> fields;

  // The field with this id anywhere in the tree (struct fields, list elements, map keys and
  // values), or nullptr.
  const NestedField* FindField(int32_t id) const;
  // By full dotted name as Java indexes them: "a", "a.b" (struct field), "l.element",
  // "m.key", "m.value". Case-sensitive. nullptr when absent.
  const NestedField* FindField(std::string_view dotted_name) const;
  // The dotted name of the field with this id, or "" when absent.
  std::string FindName(int32_t id) const;
  // The highest field id in the tree (0 for an empty schema).
  int32_t HighestFieldId() const;
  Type AsStruct() const { return Type::Struct(fields); }

  // Ids unique across the tree and in range, names unique within each struct, decimal and
  // fixed parameters valid, identifier fields valid (primitive, required, not float/double,
  // not inside a list, map or optional struct). The message names the offending field.
  Status Validate() const;

  // Same fields and identifier fields; the schema id is ignored (Java's sameSchema).
  bool SameSchema(const Schema& other) const {
    return fields == other.fields && identifier_field_ids == other.identifier_field_ids;
  }
  bool operator==(const Schema& other) const = default;
};

// Appendix C. `path` is the JSON path used in error messages. The parse checks shape and
// types, not schema-level rules (call Validate()).
Json TypeToJson(const Type& type);
Result<Type> TypeFromJson(const Json& json, std::string_view path);
// A primitive type from its string form ("long", "decimal(9, 2)", "fixed[16]").
Result<Type> PrimitiveTypeFromString(std::string_view text);

Json SchemaToJson(const Schema& schema);
// `schema-id` is required when `require_schema_id` (v2 table metadata), else defaults to 0.
Result<Schema> SchemaFromJson(const Json& json, std::string_view path, bool require_schema_id);

// A copy of `schema` with fresh field ids assigned as Java's AssignFreshIds does (and the
// REST catalog's create): the fields of a struct first, in order, then each field's nested
// fields, starting at `*next_id` (advanced past the last one). Identifier field ids are
// remapped. `old_to_new`, when given, receives the mapping.
Schema AssignFreshIds(const Schema& schema, int32_t* next_id,
                      std::vector<std::pair<int32_t, int32_t>>* old_to_new = nullptr);

}  // namespace sluice::lake
